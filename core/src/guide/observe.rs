//! The observation of one window: its title, size, accessibility elements (boxes normalised
//! to the window), the element names as `ocrText`, and its pixels only when the user allowed
//! pixel sharing.
//!
//! The window list and window pixels come from [`crate::desktop`]. Capture never
//! looks beyond the chosen window: no desktop capture, no other window's elements.

use image::{RgbaImage, imageops::FilterType};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    a11y::{self, A11yError, Budget, ScreenRect, WindowTarget},
    desktop::{
        DesktopError,
        screen::{self, Encoding, Source},
        screenshot::encode_within,
    },
    guide::guidance::model::{Bounds, Element, Observation},
    guide::png_sanitise::{self, MAX_PNG_BYTES, MAX_SIDE, PngError, SanitisedPng},
    limits::{MAX_ELEMENTS, MAX_LABEL_CHARS, MAX_OBSERVATION_SIDE, MAX_TEXT_CHARS},
};

/// The confidence of an element read from the accessibility tree: the original's value for
/// UI Automation evidence, above the 0.8 a target needs.
pub const ACCESSIBILITY_CONFIDENCE: f64 = 0.95;
/// Each retry of an image too large in PNG bytes scales it by this factor.
const SHRINK_STEP: f64 = 0.75;
/// Most shrink steps tried before giving up on the pixels.
const MAX_SHRINK_STEPS: u32 = 12;

/// One top-level window, as the window system lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowInfo {
    /// The window system's id (an X11 window id, a Windows HWND).
    pub id: u32,
    /// The owning process, when the window system says.
    pub pid: Option<u32>,
    /// The window's title.
    pub title: String,
    /// Where it is on screen, in pixels.
    pub bounds: ScreenRect,
    /// Whether it is minimised.
    pub minimized: bool,
    /// Whether `bounds` is where the window is on screen. A window only the accessibility
    /// bus lists (on a Wayland compositor that lists its windows to no other program) is at
    /// its own corner, `(0, 0)`; one a wlroots compositor other than sway lists is given the
    /// outputs it is on. Its controls can be read, but nothing can be drawn or captured where
    /// it is, and its capture's size is the one its toolkit reports.
    pub placed: bool,
}

impl WindowInfo {
    /// The `windowId` an observation of this window carries.
    #[must_use]
    pub fn observation_window_id(&self) -> String {
        format!("window-{}", self.id)
    }
}

/// One capture of one window, with what the overlay needs to place the target on screen.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowObservation {
    /// The window as it was when capture started.
    pub window: WindowInfo,
    /// What the client sends the API about it.
    pub observation: Observation,
}

impl WindowObservation {
    /// Where the observation's boxes are: the window on screen, or, for a window the
    /// compositor does not place ([`WindowInfo::placed`]), the capture itself at `(0, 0)`.
    #[must_use]
    pub fn area(&self) -> ScreenRect {
        if self.window.placed {
            self.window.bounds
        } else {
            ScreenRect {
                x: 0,
                y: 0,
                width: self.observation.width,
                height: self.observation.height,
            }
        }
    }
}

/// Why a window could not be observed.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The window system cannot list windows.
    #[error("the window list is unavailable: {0}")]
    WindowList(String),
    /// The window system can list windows, but this time it failed or did not answer.
    #[error("the window list could not be read: {0}")]
    WindowListFailed(String),
    /// No open window has the title asked for.
    #[error("no window titled like that is open")]
    NoSuchWindow,
    /// The window is minimised.
    #[error("the window is minimised")]
    Minimised,
    /// The window has no title.
    #[error("the window has no title to report as its application")]
    Untitled,
    /// The window's size is outside what an observation allows.
    #[error("the window's size is outside 1-16384 pixels")]
    BadSize,
    /// The accessibility tree could not be read.
    #[error(transparent)]
    Accessibility(#[from] A11yError),
    /// The window's pixels could not be captured or encoded.
    #[error("the window's pixels could not be captured: {0}")]
    Pixels(String),
    /// The desktop lets no program (or not this one) capture a window's pixels.
    #[error("the desktop does not let this program capture the window's pixels: {0}")]
    PixelsNotAllowed(String),
    /// KDE Plasma's KWin refuses this program screenshots until a desktop entry allows it
    /// (`crate::desktop_entry`).
    #[error(
        "KWin gives screenshots only to programs a desktop entry allows, and none names this one"
    )]
    PixelsNeedDesktopEntry,
    /// The window's pixels break the API's image rules even when shrunk.
    #[error("the window's image cannot be shared: {0}")]
    Image(#[from] PngError),
}

impl ObserveError {
    /// The stable code of the failure.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Self::WindowList(_) => "window_list_unavailable",
            Self::WindowListFailed(_) => "window_list_failed",
            Self::NoSuchWindow => "window_not_found",
            Self::Minimised => "window_minimised",
            Self::Untitled => "window_untitled",
            Self::BadSize => "window_bad_size",
            Self::Accessibility(e) => e.code(),
            Self::Pixels(_) => "pixels_unavailable",
            Self::PixelsNotAllowed(_) => "pixels_not_allowed",
            Self::PixelsNeedDesktopEntry => "pixels_need_desktop_entry",
            Self::Image(_) => "image_unshareable",
        }
    }
}

/// Every titled top-level window, in the window system's stacking order.
///
/// # Errors
/// [`ObserveError::WindowList`] when the window system cannot list windows (on X11 this
/// needs an EWMH window manager), [`ObserveError::WindowListFailed`] when it can but failed.
pub fn windows() -> Result<Vec<WindowInfo>, ObserveError> {
    // Who lists a Wayland session's windows is asked once: the guidance window asks for the
    // list twice a second while an outline is shown.
    #[cfg(target_os = "linux")]
    let listed = if crate::desktop::session::Session::detect()
        == crate::desktop::session::Session::Wayland
    {
        use crate::desktop::windows::WaylandLister;
        match WaylandLister::here() {
            WaylandLister::Accessibility => return accessible_windows(),
            lister => lister.windows(),
        }
    } else {
        crate::desktop::windows::all()
    };
    #[cfg(not(target_os = "linux"))]
    let listed = crate::desktop::windows::all();
    let all = match listed {
        Ok(all) => all,
        Err(e @ DesktopError::NotSupported { .. }) => {
            return Err(ObserveError::WindowList(e.to_string()));
        }
        Err(e) => return Err(ObserveError::WindowListFailed(e.to_string())),
    };
    Ok(all
        .into_iter()
        .filter_map(|w| {
            let title = Some(w.title).filter(|t| !t.trim().is_empty())?;
            let side = |v: u64| i32::try_from(v).ok();
            let x = i32::try_from(w.bounds.x).ok()?;
            let y = i32::try_from(w.bounds.y).ok()?;
            Some(WindowInfo {
                id: w.id,
                pid: w.pid,
                title,
                bounds: ScreenRect::from_extents(
                    x,
                    y,
                    side(w.bounds.width)?,
                    side(w.bounds.height)?,
                )?,
                minimized: w.minimized,
                placed: w.placed,
            })
        })
        .collect())
}

/// The windows the applications on the accessibility bus list, where the compositor lists
/// none (weston, GNOME): titled by their frame's name, or their application's where the
/// toolkit leaves it empty, and never [`WindowInfo::placed`]. Unlike the connector's list
/// ([`crate::desktop::windows::accessible`]), each keeps the size its toolkit reports, at
/// `(0, 0)`, so a resized window tells.
#[cfg(target_os = "linux")]
fn accessible_windows() -> Result<Vec<WindowInfo>, ObserveError> {
    use crate::desktop::windows::accessible;
    Ok(accessible::listed()?
        .into_iter()
        .filter_map(|w| {
            let title = w.name()?.to_owned();
            Some(WindowInfo {
                id: accessible::id_of(&w.key),
                pid: w.pid,
                title,
                bounds: ScreenRect {
                    x: 0,
                    y: 0,
                    ..w.bounds
                },
                minimized: false,
                placed: false,
            })
        })
        .collect())
}

/// The open window titled exactly `title` (the first in stacking order among several).
///
/// # Errors
/// [`ObserveError::NoSuchWindow`] when none is, or the window list's own failure.
pub fn find_window(title: &str) -> Result<WindowInfo, ObserveError> {
    windows()?
        .into_iter()
        .find(|w| w.title == title)
        .ok_or(ObserveError::NoSuchWindow)
}

/// Observes `window`: its elements within `budget`, and its pixels when `share_pixels`.
///
/// `capturedAt` is the moment before capture starts, as the original records it.
///
/// # Errors
/// [`ObserveError`]: the window is minimised, untitled, of an odd size, absent from the
/// accessibility tree, or its pixels could not be captured or fitted.
pub async fn observe(
    window: &WindowInfo,
    share_pixels: bool,
    budget: Budget,
) -> Result<WindowObservation, ObserveError> {
    let captured_at = OffsetDateTime::now_utc();
    if window.minimized {
        return Err(ObserveError::Minimised);
    }
    let application: String = window.title.trim().chars().take(MAX_LABEL_CHARS).collect();
    if application.is_empty() {
        return Err(ObserveError::Untitled);
    }
    let side_ok = |area: ScreenRect| {
        let ok = |side: u32| (1..=MAX_OBSERVATION_SIDE).contains(&side);
        ok(area.width) && ok(area.height)
    };
    if !side_ok(window.bounds) {
        return Err(ObserveError::BadSize);
    }
    if share_pixels && !window.placed {
        return Err(ObserveError::PixelsNotAllowed(
            "the compositor does not say where the window is".to_owned(),
        ));
    }
    let target = WindowTarget {
        title: window.title.clone(),
        pid: window.pid,
        bounds: window.placed.then_some(window.bounds),
        window_relative: crate::desktop::session::Session::detect()
            == crate::desktop::session::Session::Wayland,
    };
    let snapshot = a11y::snapshot(&target, budget).await?;
    // A window the compositor does not place is as large as its toolkit says, and its boxes
    // are from its own corner.
    let area = match (window.placed, snapshot.frame) {
        (true, _) => window.bounds,
        (false, frame) => ScreenRect {
            x: 0,
            y: 0,
            ..frame.unwrap_or(window.bounds)
        },
    };
    if !side_ok(area) {
        return Err(ObserveError::BadSize);
    }
    let mut elements: Vec<Element> = snapshot
        .elements
        .iter()
        .filter_map(|e| {
            Some(Element {
                role: e.role.clone(),
                label: e.label.clone(),
                bounds: normalise(e.bounds, area)?,
                confidence: ACCESSIBILITY_CONFIDENCE,
                is_enabled: Some(e.states.enabled),
                is_offscreen: Some(false),
                is_selected: e.states.selected.then_some(true),
                ..Element::default()
            })
        })
        .collect();
    elements.truncate(MAX_ELEMENTS);
    let ocr_text = ocr_text(&elements);
    let image = if share_pixels {
        Some(window_pixels(window.id)?)
    } else {
        None
    };
    Ok(WindowObservation {
        window: window.clone(),
        observation: Observation {
            id: Uuid::new_v4().to_string(),
            window_id: window.observation_window_id(),
            application,
            captured_at,
            width: area.width,
            height: area.height,
            ocr_text,
            elements,
            image,
            automation_complete: !snapshot.truncated,
            resource_id: None,
        },
    })
}

/// `element` relative to `window`, clipped to it, as fractions of its size; `None` when
/// nothing of it lies inside the window.
#[must_use]
pub fn normalise(element: ScreenRect, window: ScreenRect) -> Option<Bounds> {
    let (wx, wy) = (i64::from(window.x), i64::from(window.y));
    let (ww, wh) = (i64::from(window.width), i64::from(window.height));
    let left = (i64::from(element.x) - wx).clamp(0, ww);
    let top = (i64::from(element.y) - wy).clamp(0, wh);
    let right = (i64::from(element.x) + i64::from(element.width) - wx).clamp(0, ww);
    let bottom = (i64::from(element.y) + i64::from(element.height) - wy).clamp(0, wh);
    if right <= left || bottom <= top {
        return None;
    }
    // Pixel counts are far below 2^53, so the conversions are exact.
    let fraction = |value: i64, whole: i64| value as f64 / whole as f64;
    let mut bounds = Bounds {
        x: fraction(left, ww),
        y: fraction(top, wh),
        width: fraction(right - left, ww),
        height: fraction(bottom - top, wh),
    };
    // Rounding can put the far edge a hair past 1, which the API refuses.
    while bounds.x + bounds.width > 1.0 {
        bounds.width = bounds.width.next_down();
    }
    while bounds.y + bounds.height > 1.0 {
        bounds.height = bounds.height.next_down();
    }
    bounds.is_inside_unit_square().then_some(bounds)
}

/// A normalised box back on screen: the inverse of [`normalise`] for the overlay.
#[must_use]
pub fn on_screen(bounds: Bounds, window: ScreenRect) -> ScreenRect {
    let scale = |fraction: f64, side: u32| (fraction * f64::from(side)).round() as i64;
    let clamp_i32 = |v: i64| i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX });
    let x = i64::from(window.x) + scale(bounds.x, window.width);
    let y = i64::from(window.y) + scale(bounds.y, window.height);
    let width = u32::try_from(scale(bounds.width, window.width)).unwrap_or(0);
    let height = u32::try_from(scale(bounds.height, window.height)).unwrap_or(0);
    ScreenRect {
        x: clamp_i32(x),
        y: clamp_i32(y),
        width,
        height,
    }
}

/// The element names joined by newlines, whole names only, at most [`MAX_TEXT_CHARS`].
fn ocr_text(elements: &[Element]) -> String {
    let mut text = String::new();
    let mut chars = 0;
    for element in elements {
        let extra = element.label.chars().count() + usize::from(!text.is_empty());
        if chars + extra > MAX_TEXT_CHARS {
            break;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&element.label);
        chars += extra;
    }
    text
}

/// The window's pixels as a sanitised PNG: longest side at most [`MAX_SIDE`], at most
/// [`MAX_PNG_BYTES`], shrunk by [`SHRINK_STEP`] until it fits.
fn window_pixels(id: u32) -> Result<SanitisedPng, ObserveError> {
    let capture = screen::capture(Source::Window(id), false).map_err(|e| match e {
        DesktopError::NotSupported { .. } if kwin_allows_this_program() == Some(false) => {
            ObserveError::PixelsNeedDesktopEntry
        }
        DesktopError::NotSupported { .. } => ObserveError::PixelsNotAllowed(e.to_string()),
        _ => ObserveError::Pixels(e.to_string()),
    })?;
    fit_png(&capture.image)
}

/// Whether KDE Plasma's KWin gives this program screenshots (`Some(false)` until a desktop
/// entry allows it, `crate::desktop_entry`); `None` where no KWin runs.
#[must_use]
pub fn kwin_allows_this_program() -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        crate::desktop::portal::kwin_screenshot::allowed()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Scales and encodes `image` until it fits the API's image limits: the screenshot's own
/// encode-and-measure step, retried smaller where a screenshot would refuse.
fn fit_png(image: &RgbaImage) -> Result<SanitisedPng, ObserveError> {
    let longest = image.width().max(image.height()).max(1);
    let mut scale = (f64::from(MAX_SIDE) / f64::from(longest)).min(1.0);
    let max_bytes = u64::try_from(MAX_PNG_BYTES).unwrap_or(u64::MAX);
    for _ in 0..MAX_SHRINK_STEPS {
        let size = |side: u32| ((f64::from(side) * scale).floor() as u32).max(1);
        let (width, height) = (size(image.width()), size(image.height()));
        let scaled;
        let pixels = if (width, height) == image.dimensions() {
            image
        } else {
            scaled = image::imageops::resize(image, width, height, FilterType::Triangle);
            &scaled
        };
        match encode_within(pixels, Encoding::Png, max_bytes) {
            Ok(bytes) => match png_sanitise::sanitise_png(&bytes) {
                Err(PngError::OutputTooLarge | PngError::TooManyBytes) => {}
                other => return Ok(other?),
            },
            Err(DesktopError::TooLarge { .. }) => {}
            Err(DesktopError::Failed(reason)) => return Err(ObserveError::Pixels(reason)),
            Err(other) => return Err(ObserveError::Pixels(other.to_string())),
        }
        scale *= SHRINK_STEP;
    }
    Err(ObserveError::Image(PngError::OutputTooLarge))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect(x: i32, y: i32, width: u32, height: u32) -> ScreenRect {
        ScreenRect {
            x,
            y,
            width,
            height,
        }
    }

    fn named(label: &str) -> Element {
        Element {
            label: label.to_owned(),
            ..Element::default()
        }
    }

    #[test]
    fn boxes_are_normalised_to_the_window_and_clipped() {
        let window = rect(100, 50, 400, 200);
        let b = normalise(rect(200, 100, 100, 50), window).unwrap();
        assert_eq!((b.x, b.y, b.width, b.height), (0.25, 0.25, 0.25, 0.25));
        let clipped = normalise(rect(50, 0, 100, 100), window).unwrap();
        assert_eq!(
            (clipped.x, clipped.y, clipped.width, clipped.height),
            (0.0, 0.0, 0.125, 0.25)
        );
        assert_eq!(normalise(rect(0, 0, 100, 50), window), None);
        assert_eq!(normalise(rect(500, 50, 10, 10), window), None);
        let whole = normalise(window, window).unwrap();
        assert_eq!((whole.x + whole.width, whole.y + whole.height), (1.0, 1.0));
    }

    #[test]
    fn a_normalised_box_goes_back_to_the_same_pixels() {
        let window = rect(-30, 20, 640, 480);
        let element = rect(10, 60, 64, 20);
        let back = on_screen(normalise(element, window).unwrap(), window);
        assert_eq!(back, element);
    }

    #[test]
    fn ocr_text_joins_whole_names_up_to_16000_characters() {
        assert_eq!(ocr_text(&[named("a"), named("b c")]), "a\nb c");
        let half = "x".repeat(MAX_TEXT_CHARS / 2);
        // Two halves and the newline between them: one character too many.
        assert_eq!(ocr_text(&[named(&half), named(&half)]), half);
        let exact = "y".repeat(MAX_TEXT_CHARS / 2 - 1);
        let both = ocr_text(&[named(&half), named(&exact)]);
        assert_eq!(both.chars().count(), MAX_TEXT_CHARS);
    }

    #[test]
    fn a_large_image_is_scaled_to_1600_pixels_and_stays_a_valid_png() {
        let image = RgbaImage::from_pixel(3200, 400, image::Rgba([10, 20, 30, 255]));
        let png = fit_png(&image).unwrap();
        assert_eq!((png.width, png.height), (1600, 200));
        assert!(png.bytes.len() <= MAX_PNG_BYTES);
        let small = RgbaImage::from_pixel(MAX_SIDE, 10, image::Rgba([0, 0, 0, 255]));
        assert_eq!(fit_png(&small).unwrap().width, MAX_SIDE);
    }

    #[test]
    fn noise_too_large_for_two_megabytes_is_shrunk_until_it_fits() {
        // Pseudo-random pixels do not compress: 1600×1600 of them is ~10 MB of PNG.
        let mut state = 0x1234_5678_u32;
        let image = RgbaImage::from_fn(1600, 1600, |_, _| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let [a, b, c, _] = state.to_le_bytes();
            image::Rgba([a, b, c, 255])
        });
        let png = fit_png(&image).unwrap();
        assert!(png.width < 1600 && png.bytes.len() <= MAX_PNG_BYTES);
    }
}
