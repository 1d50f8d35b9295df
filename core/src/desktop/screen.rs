//! Displays and screenshots: every monitor's place in the virtual desktop, pixels of one
//! monitor, all of them stitched, a display-global region or one window, encoded as JPEG or PNG.

use image::{ImageEncoder, RgbaImage, codecs::png};

pub use super::Display;
use super::{DesktopError, Rect};

/// Every connected monitor, primary first.
///
/// # Errors
/// [`DesktopError::Failed`] when the window system cannot be asked.
pub fn displays() -> Result<Vec<Display>, DesktopError> {
    Ok(monitors(false)?.0)
}

/// The smallest rectangle holding every display (empty without any).
#[must_use]
pub fn spanned(displays: &[Display]) -> Rect {
    displays
        .iter()
        .map(|d| d.rect)
        .reduce(|a, b| a.union(&b))
        .unwrap_or(Rect {
            x: 0,
            y: 0,
            width: 0,
            height: 0,
        })
}

/// Where pixels come from: the X server itself on X11, the compositor's screencopy on Wayland
/// (KWin's ScreenShot2 or the desktop portal where it has none),
/// xcap on Windows and macOS (Linux builds do not link xcap: it brought libgbm, libdrm and
/// libwayland-server into the binary, loaded at every start, for captures done here anyway).
enum Grabber {
    #[cfg(all(unix, not(target_os = "macos")))]
    X11(Box<x11::Screen>),
    /// xcap's monitors, in the order of the displays they belong to.
    #[cfg(any(windows, target_os = "macos"))]
    Xcap(Vec<xcap::Monitor>),
    /// The Wayland compositor's screencopy, one whole output at a time, with the pointer
    /// composited by the compositor when true (screencopy's `overlay_cursor`).
    #[cfg(target_os = "linux")]
    Wayland(bool),
    /// The desktop portal's Screenshot (GNOME Shell), one picture of the whole desktop taken
    /// at the first grab and cut for every display and region after it, with the union of the
    /// displays' rectangles it covers.
    #[cfg(target_os = "linux")]
    Portal(std::cell::RefCell<Option<RgbaImage>>, Rect),
    /// KWin's ScreenShot2 (KDE), one area at a time, with the pointer drawn in when true.
    #[cfg(target_os = "linux")]
    Kwin(bool),
    /// Nothing: the compositor refuses this program's screenshots, for this reason (the
    /// displays are still known).
    #[cfg(target_os = "linux")]
    Refused(&'static str),
    /// No screencopy: KWin's ScreenShot2, or the portal's Screenshot over the union of the
    /// displays, chosen at the first grab, so that listing the displays (every input action
    /// does) asks KWin nothing; KWin draws the pointer in when the flag is true.
    #[cfg(target_os = "linux")]
    Unchosen(std::cell::OnceCell<Box<Self>>, Rect, bool),
}

impl Grabber {
    /// The pixels of `rect` (display-global), which lies on `display`.
    fn grab(&self, display: &Display, rect: Rect) -> Result<RgbaImage, DesktopError> {
        let offset = |v: i64, base: i64| u32::try_from(v - base).unwrap_or(0);
        let side = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        match self {
            #[cfg(all(unix, not(target_os = "macos")))]
            Self::X11(screen) => screen.grab(rect),
            #[cfg(target_os = "linux")]
            Self::Wayland(pointer) => {
                let image = super::wayland::capture::output(display.os_id, *pointer)?;
                if rect == display.rect {
                    return Ok(image);
                }
                Ok(image::imageops::crop_imm(
                    &image,
                    offset(rect.x, display.rect.x),
                    offset(rect.y, display.rect.y),
                    side(rect.width),
                    side(rect.height),
                )
                .to_image())
            }
            #[cfg(target_os = "linux")]
            Self::Portal(taken, desktop) => {
                let mut taken = taken.borrow_mut();
                let image = match taken.take() {
                    Some(image) => image,
                    None => portal_desktop(*desktop)?,
                };
                let part = image::imageops::crop_imm(
                    &image,
                    offset(rect.x, desktop.x),
                    offset(rect.y, desktop.y),
                    side(rect.width),
                    side(rect.height),
                )
                .to_image();
                *taken = Some(image);
                Ok(part)
            }
            #[cfg(target_os = "linux")]
            Self::Kwin(pointer) => super::portal::kwin_screenshot::area(rect, *pointer),
            #[cfg(target_os = "linux")]
            Self::Refused(reason) => Err(DesktopError::unsupported("screenshot", *reason)),
            #[cfg(target_os = "linux")]
            Self::Unchosen(chosen, desktop, pointer) => {
                without_screencopy(chosen, *desktop, *pointer).grab(display, rect)
            }
            #[cfg(any(windows, target_os = "macos"))]
            Self::Xcap(monitors) => {
                let monitor = monitors
                    .get(display.index)
                    .ok_or_else(|| DesktopError::Failed("the monitor went away".to_owned()))?;
                if rect == display.rect {
                    return Ok(screen_pixels(monitor.capture_image()?));
                }
                Ok(screen_pixels(monitor.capture_region(
                    offset(rect.x, display.rect.x),
                    offset(rect.y, display.rect.y),
                    side(rect.width),
                    side(rect.height),
                )?))
            }
        }
    }

    /// One window's pixels and their top-left, display-global (on Wayland: the outputs'
    /// capture cropped to the window's content rectangle, which sway's IPC or KWin gives).
    fn window(&self, id: u32, displays: &[Display]) -> Result<(RgbaImage, [i64; 2]), DesktopError> {
        match self {
            #[cfg(all(unix, not(target_os = "macos")))]
            Self::X11(screen) => screen.grab_window(id),
            #[cfg(target_os = "linux")]
            Self::Wayland(_) | Self::Kwin(_) => {
                let bounds = if matches!(self, Self::Kwin(_)) {
                    super::portal::kwin::all()?
                        .into_iter()
                        .find(|w| w.id == id)
                        .map(|w| w.bounds)
                        .ok_or_else(|| DesktopError::Failed("the window closed".to_owned()))?
                } else {
                    super::wayland::windows::geometry(id)?
                };
                let wanted = displays
                    .iter()
                    .filter_map(|d| d.rect.intersect(&bounds))
                    .reduce(|a, b| a.union(&b))
                    .ok_or_else(|| {
                        DesktopError::unsupported(
                            "screenshot.window",
                            "the window lies outside every display",
                        )
                    })?;
                Ok((stitch(displays, self, wanted)?, [wanted.x, wanted.y]))
            }
            #[cfg(target_os = "linux")]
            Self::Refused(reason) => Err(DesktopError::unsupported("screenshot.window", *reason)),
            #[cfg(target_os = "linux")]
            Self::Unchosen(chosen, desktop, pointer) => {
                without_screencopy(chosen, *desktop, *pointer).window(id, displays)
            }
            #[cfg(target_os = "linux")]
            Self::Portal(..) => Err(DesktopError::unsupported(
                "screenshot.window",
                "GNOME Shell tells no client where a window is",
            )),
            #[cfg(any(windows, target_os = "macos"))]
            Self::Xcap(_) => {
                // xcap captures a window by itself; only Wayland needs the displays.
                let _ = displays;
                let window = xcap::Window::all()?
                    .into_iter()
                    .find(|w| w.id().ok() == Some(id))
                    .ok_or_else(|| {
                        DesktopError::Failed("the window closed during capture".to_owned())
                    })?;
                let origin = [i64::from(window.x()?), i64::from(window.y()?)];
                Ok((screen_pixels(window.capture_image()?), origin))
            }
        }
    }
}

/// Where pixels come from without screencopy, chosen once into `chosen`: KWin's ScreenShot2
/// where KWin lets this program, nothing where it does not, else the desktop portal's
/// Screenshot (which the probe has checked) of `desktop`, the union of the displays; KWin
/// draws the pointer in with `pointer`.
#[cfg(target_os = "linux")]
fn without_screencopy(
    chosen: &std::cell::OnceCell<Box<Grabber>>,
    desktop: Rect,
    pointer: bool,
) -> &Grabber {
    chosen.get_or_init(|| {
        Box::new(match super::portal::kwin_screenshot::allowed() {
            Some(true) => Grabber::Kwin(pointer),
            Some(false) => Grabber::Refused(super::wayland::KWIN_SHOTS_REFUSED),
            None => Grabber::Portal(std::cell::RefCell::new(None), desktop),
        })
    })
}

/// The whole desktop through the desktop portal's Screenshot, checked to cover `desktop` (the
/// union of the displays): the compositor draws every output at the largest scale, as the
/// display-global coordinates place them.
#[cfg(target_os = "linux")]
fn portal_desktop(desktop: Rect) -> Result<RgbaImage, DesktopError> {
    let image = super::portal::screenshot::take()?;
    let size = (u64::from(image.width()), u64::from(image.height()));
    if size != (desktop.width, desktop.height) {
        return Err(DesktopError::Failed(format!(
            "the desktop portal's screenshot is {}×{} pixels where the displays cover {}×{}: the monitors changed while it was taken; take it again",
            size.0, size.1, desktop.width, desktop.height
        )));
    }
    Ok(image)
}

/// What xcap captured, as the screen shows it. On Windows xcap reads the screen through GDI
/// into a 32-bit bitmap whose fourth byte GDI leaves unused ("not used" in BI_RGB), and hands
/// that byte on as alpha: under Wine it is what the X server left in its padding byte, so
/// anti-aliased text came out translucent in PNG screenshots. A screen has no transparency.
#[cfg(any(windows, target_os = "macos"))]
fn screen_pixels(image: RgbaImage) -> RgbaImage {
    if cfg!(windows) { opaque(image) } else { image }
}

/// `image` with every pixel fully opaque.
#[cfg(any(windows, target_os = "macos", test))]
fn opaque(mut image: RgbaImage) -> RgbaImage {
    for pixel in image.pixels_mut() {
        pixel.0[3] = u8::MAX;
    }
    image
}

/// The displays, primary first and indexed, and where their pixels come from; with
/// `pointer`, a compositor that draws the pointer into captures on request is asked to.
fn monitors(pointer: bool) -> Result<(Vec<Display>, Grabber), DesktopError> {
    #[cfg(all(unix, not(target_os = "macos")))]
    {
        use super::session::Session;
        let session = Session::detect();
        if session == Session::X11 {
            let screen = x11::Screen::open()?;
            return Ok((order(screen.displays()?), Grabber::X11(Box::new(screen))));
        }
        #[cfg(target_os = "linux")]
        if session == Session::Wayland {
            let protocols = super::wayland::protocols()?;
            let displays = order(protocols.displays.clone());
            if protocols.screenshots() {
                return Ok((displays, Grabber::Wayland(pointer)));
            }
            let desktop = spanned(&displays);
            return Ok((
                displays,
                Grabber::Unchosen(std::cell::OnceCell::new(), desktop, pointer),
            ));
        }
        Err(DesktopError::unsupported("screenshot", session.reason()))
    }
    #[cfg(any(windows, target_os = "macos"))]
    {
        // xcap's captures never hold the pointer, and nothing draws it there yet.
        let _ = pointer;
        xcap_monitors()
    }
}

/// Every monitor as xcap lists it.
#[cfg(any(windows, target_os = "macos"))]
fn xcap_monitors() -> Result<(Vec<Display>, Grabber), DesktopError> {
    let mut all = Vec::new();
    for monitor in xcap::Monitor::all()? {
        let rect = Rect {
            x: i64::from(monitor.x()?),
            y: i64::from(monitor.y()?),
            width: u64::from(monitor.width()?),
            height: u64::from(monitor.height()?),
        };
        let scale = f64::from(monitor.scale_factor().unwrap_or(1.0));
        let display = Display {
            index: 0,
            primary: monitor.is_primary().unwrap_or(false),
            rect,
            scale: if scale.is_finite() && scale > 0.0 {
                scale
            } else {
                1.0
            },
            os_id: monitor.id()?,
        };
        all.push((display, monitor));
    }
    let displays = order(all.iter().map(|(d, _)| d.clone()).collect());
    // Each ordered display takes its monitor along, found by OS id.
    let monitors = displays
        .iter()
        .filter_map(|display| {
            let at = all.iter().position(|(d, _)| d.os_id == display.os_id)?;
            Some(all.swap_remove(at).1)
        })
        .collect();
    Ok((displays, Grabber::Xcap(monitors)))
}

/// Primary first (the first listed when none is), then the rest in the OS's order, indexed.
fn order(mut displays: Vec<Display>) -> Vec<Display> {
    let primary = displays.iter().position(|d| d.primary).unwrap_or(0);
    if primary < displays.len() {
        let first = displays.remove(primary);
        displays.insert(0, first);
    }
    for (index, display) in displays.iter_mut().enumerate() {
        display.index = index;
        display.primary = index == 0;
    }
    displays
}

/// The index of the display holding `(x, y)`, if one does.
#[must_use]
pub fn display_at(displays: &[Display], x: i64, y: i64) -> Option<usize> {
    displays.iter().position(|d| d.rect.contains(x, y))
}

/// Checks that `(x, y)` lies on some display.
///
/// # Errors
/// [`DesktopError::OutOfBounds`] with every display's rectangle.
pub fn check_point(displays: &[Display], [x, y]: [i64; 2]) -> Result<(), DesktopError> {
    if display_at(displays, x, y).is_some() {
        Ok(())
    } else {
        Err(DesktopError::OutOfBounds {
            coordinate: [x, y],
            displays: displays.iter().map(|d| (d.index, d.rect)).collect(),
        })
    }
}

/// What to capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// One monitor by index (an index past the last falls back to the primary, as the
    /// reference does); `-1` stitches every monitor into one image of the virtual desktop.
    Monitor(i32),
    /// A display-global rectangle, clipped to the displays it overlaps (the capture's origin
    /// is then the clipped top-left).
    Region([i64; 4]),
    /// One window by its OS id.
    Window(u32),
}

/// A captured image and where it came from.
#[derive(Debug, Clone)]
pub struct Capture {
    /// The pixels.
    pub image: RgbaImage,
    /// The image's top-left in display-global pixels.
    pub origin: [i64; 2],
    /// The monitor captured (for a region or a window: the one holding its top-left), `-1`
    /// for all of them.
    pub monitor: i32,
    /// That monitor's scale.
    pub scale: f64,
    /// That monitor's OS id.
    pub os_id: u32,
}

/// Captures `source`; with `pointer`, a compositor that draws the pointer into captures on
/// request (wlroots' screencopy, KWin) is asked to (on X11 [`draw_cursor`] draws it after).
///
/// # Errors
/// [`DesktopError::NotSupported`] for a region outside every display, [`DesktopError::WindowStale`]
/// never (callers resolve window ids first), [`DesktopError::Failed`] when capture fails.
pub fn capture(source: Source, pointer: bool) -> Result<Capture, DesktopError> {
    let (displays, grabber) = monitors(pointer)?;
    let Some(primary) = displays.first() else {
        return Err(DesktopError::unsupported(
            "screenshot",
            "no display is connected",
        ));
    };
    let summary = |index: usize| {
        let display = &displays[index];
        (
            i32::try_from(index).unwrap_or(0),
            display.scale,
            display.os_id,
        )
    };
    match source {
        Source::Monitor(-1) => {
            let all = displays
                .iter()
                .map(|d| d.rect)
                .reduce(|a, b| a.union(&b))
                .unwrap_or(primary.rect);
            let image = stitch(&displays, &grabber, all)?;
            Ok(Capture {
                image,
                origin: [all.x, all.y],
                monitor: -1,
                scale: primary.scale,
                os_id: primary.os_id,
            })
        }
        Source::Monitor(index) => {
            let index = usize::try_from(index)
                .ok()
                .filter(|i| *i < displays.len())
                .unwrap_or(0);
            let display = &displays[index];
            let (monitor_index, scale, os_id) = summary(index);
            Ok(Capture {
                image: grabber.grab(display, display.rect)?,
                origin: [display.rect.x, display.rect.y],
                monitor: monitor_index,
                scale,
                os_id,
            })
        }
        Source::Region(corners) => {
            let outside = || {
                DesktopError::unsupported(
                    "screenshot.region",
                    "the region lies outside every display",
                )
            };
            let requested = Rect::from_corners(corners).ok_or_else(outside)?;
            // Clipped to the displays it overlaps: no black margin for the part off-screen.
            let wanted = displays
                .iter()
                .filter_map(|d| d.rect.intersect(&requested))
                .reduce(|a, b| a.union(&b))
                .ok_or_else(outside)?;
            let image = stitch(&displays, &grabber, wanted)?;
            let (monitor, scale, os_id) = displays
                .iter()
                .position(|d| d.rect.contains(wanted.x, wanted.y))
                .map_or((0, primary.scale, primary.os_id), summary);
            Ok(Capture {
                image,
                origin: [wanted.x, wanted.y],
                monitor,
                scale,
                os_id,
            })
        }
        Source::Window(id) => {
            let (image, origin) = grabber.window(id, &displays)?;
            let (monitor, scale, os_id) = display_at(&displays, origin[0], origin[1])
                .map_or((0, primary.scale, primary.os_id), summary);
            Ok(Capture {
                image,
                origin,
                monitor,
                scale,
                os_id,
            })
        }
    }
}

/// The pixels of `wanted` (display-global), taken from every display it overlaps; parts no
/// display covers stay black.
fn stitch(
    displays: &[Display],
    grabber: &Grabber,
    wanted: Rect,
) -> Result<RgbaImage, DesktopError> {
    let mut parts = Vec::new();
    for display in displays {
        if let Some(overlap) = display.rect.intersect(&wanted) {
            parts.push(([overlap.x, overlap.y], grabber.grab(display, overlap)?));
        }
    }
    compose(&parts, wanted)
}

/// Lays `parts` (each with its display-global top-left) onto one canvas covering `canvas`.
///
/// # Errors
/// [`DesktopError::TooLarge`] when the canvas would not fit in memory sensibly.
pub fn compose(parts: &[([i64; 2], RgbaImage)], canvas: Rect) -> Result<RgbaImage, DesktopError> {
    const MAX_PIXELS: u64 = 1 << 28;
    let pixels = canvas.width.saturating_mul(canvas.height);
    let (Ok(width), Ok(height)) = (u32::try_from(canvas.width), u32::try_from(canvas.height))
    else {
        return Err(DesktopError::TooLarge {
            size: pixels.saturating_mul(4),
            limit: MAX_PIXELS * 4,
        });
    };
    if pixels > MAX_PIXELS {
        return Err(DesktopError::TooLarge {
            size: pixels.saturating_mul(4),
            limit: MAX_PIXELS * 4,
        });
    }
    let mut out = RgbaImage::from_pixel(width, height, image::Rgba([0, 0, 0, 255]));
    for ([x, y], part) in parts {
        image::imageops::replace(&mut out, part, x - canvas.x, y - canvas.y);
    }
    Ok(out)
}

/// Draws the pointer into `capture` where the window system shows it, as a user sees the
/// screen (X11 captures never contain it); returns whether any of it landed in the capture.
///
/// # Errors
/// [`DesktopError::Failed`] when the window system would not give the pointer's image.
pub fn draw_cursor(capture: &mut Capture) -> Result<bool, DesktopError> {
    Ok(pointer::image()?
        .is_some_and(|cursor| blend_cursor(&mut capture.image, capture.origin, &cursor)))
}

/// The pointer as the window system draws it: premultiplied ARGB pixels whose top-left sits
/// at `at` (display-global, hot spot already subtracted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorImage {
    /// Where its top-left lands, display-global.
    pub at: [i64; 2],
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// One premultiplied ARGB pixel per position, row by row.
    pub argb: Vec<u32>,
}

/// Composites `cursor` over `image`, whose top-left is `origin`; returns whether any of it
/// landed inside.
fn blend_cursor(image: &mut RgbaImage, origin: [i64; 2], cursor: &CursorImage) -> bool {
    let expected = u64::from(cursor.width) * u64::from(cursor.height);
    if u64::try_from(cursor.argb.len()).ok() != Some(expected) {
        return false;
    }
    let (width, height) = (i64::from(image.width()), i64::from(image.height()));
    let mut drawn = false;
    for (i, argb) in (0_u32..).zip(&cursor.argb) {
        let x = cursor.at[0] + i64::from(i % cursor.width) - origin[0];
        let y = cursor.at[1] + i64::from(i / cursor.width) - origin[1];
        let (Ok(px), Ok(py)) = (u32::try_from(x), u32::try_from(y)) else {
            continue;
        };
        if x >= width || y >= height {
            continue;
        }
        let [alpha, red, green, blue] = argb.to_be_bytes();
        if alpha == 0 {
            continue;
        }
        let under = image.get_pixel_mut(px, py);
        // Premultiplied "over": source plus what shows through of the destination.
        let over = |src: u8, dst: u8| {
            let kept = u16::from(dst) * u16::from(255 - alpha) / 255;
            u8::try_from(u16::from(src) + kept).unwrap_or(u8::MAX)
        };
        under.0 = [
            over(red, under.0[0]),
            over(green, under.0[1]),
            over(blue, under.0[2]),
            under.0[3],
        ];
        drawn = true;
    }
    drawn
}

#[cfg(all(unix, not(target_os = "macos")))]
mod x11;

mod pointer {
    use super::{CursorImage, DesktopError};

    /// The X pointer; `None` outside an X11 session (Wayland, Windows, macOS, a console), where
    /// no pointer image source of ours exists yet.
    pub(super) fn image() -> Result<Option<CursorImage>, DesktopError> {
        #[cfg(all(unix, not(target_os = "macos")))]
        if super::super::session::Session::detect() == super::super::session::Session::X11 {
            return super::x11::Screen::open()?.cursor().map(Some);
        }
        Ok(None)
    }
}

/// How to encode a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Baseline JPEG.
    Jpeg {
        /// The quality, 1-100.
        quality: u8,
    },
    /// PNG with fast compression (screen content compresses well even so).
    Png,
}

impl Encoding {
    /// The MIME type of the encoded bytes.
    #[must_use]
    pub const fn mime_type(self) -> &'static str {
        match self {
            Self::Jpeg { .. } => "image/jpeg",
            Self::Png => "image/png",
        }
    }
}

/// Encodes `image`.
///
/// # Errors
/// [`DesktopError::NotSupported`] for a JPEG wider or taller than 65,535 pixels,
/// [`DesktopError::Failed`] when the encoder fails.
pub fn encode(image: &RgbaImage, encoding: Encoding) -> Result<Vec<u8>, DesktopError> {
    let mut out = Vec::new();
    match encoding {
        Encoding::Jpeg { quality } => {
            let side = |v: u32| u16::try_from(v).ok();
            let (Some(width), Some(height)) = (side(image.width()), side(image.height())) else {
                return Err(DesktopError::unsupported(
                    "screenshot",
                    "JPEG images are limited to 65535 pixels a side; ask for PNG",
                ));
            };
            jpeg_encoder::Encoder::new(&mut out, quality.clamp(1, 100))
                .encode(image.as_raw(), width, height, jpeg_encoder::ColorType::Rgba)
                .map_err(|e| DesktopError::Failed(e.to_string()))?;
        }
        Encoding::Png => {
            png::PngEncoder::new_with_quality(
                &mut out,
                png::CompressionType::Fast,
                png::FilterType::Adaptive,
            )
            .write_image(
                image.as_raw(),
                image.width(),
                image.height(),
                image::ExtendedColorType::Rgba8,
            )
            .map_err(|e| DesktopError::Failed(e.to_string()))?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn display(os_id: u32, primary: bool, corners: [i64; 4]) -> Display {
        Display {
            index: 9,
            primary,
            rect: Rect::from_corners(corners).unwrap(),
            scale: 1.0,
            os_id,
        }
    }

    #[test]
    fn the_primary_comes_first_and_indices_follow() {
        let ordered = order(vec![
            display(7, false, [0, 0, 1280, 1024]),
            display(8, true, [1280, 0, 3200, 1080]),
        ]);
        assert_eq!(
            ordered
                .iter()
                .map(|d| (d.index, d.os_id, d.primary))
                .collect::<Vec<_>>(),
            [(0, 8, true), (1, 7, false)]
        );
        // Xvfb names no primary: the first listed becomes index 0.
        let none = order(vec![
            display(3, false, [0, 0, 10, 10]),
            display(4, false, [10, 0, 20, 10]),
        ]);
        assert_eq!((none[0].os_id, none[0].primary), (3, true));
    }

    #[test]
    fn points_are_checked_against_the_union_of_displays() {
        let displays = order(vec![
            display(1, true, [0, 0, 1920, 1080]),
            display(2, false, [1920, 0, 3200, 1024]),
        ]);
        assert!(check_point(&displays, [3199, 1023]).is_ok());
        assert!(check_point(&displays, [0, 1079]).is_ok());
        // Below the second, shorter display: in the bounding box, on no display.
        let err = check_point(&displays, [2000, 1050]).unwrap_err();
        assert_eq!(err.code(), "INPUT_OUT_OF_BOUNDS");
        assert_eq!(
            err.details().unwrap()["displays"][1]["origin"],
            serde_json::json!([1920, 0])
        );
        assert!(check_point(&displays, [3200, 0]).is_err());
        assert!(check_point(&displays, [-1, 0]).is_err());
    }

    #[test]
    fn parts_land_at_their_offsets_and_gaps_stay_black() {
        let red = RgbaImage::from_pixel(2, 2, image::Rgba([255, 0, 0, 255]));
        let blue = RgbaImage::from_pixel(2, 1, image::Rgba([0, 0, 255, 255]));
        let canvas = Rect::from_corners([0, 0, 4, 2]).unwrap();
        let out = compose(&[([0, 0], red), ([2, 0], blue)], canvas).unwrap();
        assert_eq!(out.dimensions(), (4, 2));
        assert_eq!(out.get_pixel(1, 1).0, [255, 0, 0, 255]);
        assert_eq!(out.get_pixel(3, 0).0, [0, 0, 255, 255]);
        assert_eq!(out.get_pixel(3, 1).0, [0, 0, 0, 255]);
    }

    #[test]
    fn the_cursor_is_composited_where_it_sits_and_clipped_at_the_edges() {
        let mut image = RgbaImage::from_pixel(4, 4, image::Rgba([200, 0, 0, 255]));
        // 2×2 at display-global (11, 21) over a capture whose top-left is (10, 20): opaque
        // white, half-transparent black (premultiplied), fully transparent, opaque blue.
        let cursor = CursorImage {
            at: [11, 21],
            width: 2,
            height: 2,
            argb: vec![0xFFFF_FFFF, 0x8000_0000, 0x0000_0000, 0xFF00_00FF],
        };
        assert!(blend_cursor(&mut image, [10, 20], &cursor));
        assert_eq!(image.get_pixel(1, 1).0, [255, 255, 255, 255]);
        assert_eq!(image.get_pixel(2, 1).0, [99, 0, 0, 255]);
        assert_eq!(image.get_pixel(1, 2).0, [200, 0, 0, 255]);
        assert_eq!(image.get_pixel(2, 2).0, [0, 0, 255, 255]);
        assert_eq!(image.get_pixel(0, 0).0, [200, 0, 0, 255]);
        // Hanging over the top-left corner: only the part inside is drawn.
        let mut edge = RgbaImage::from_pixel(2, 2, image::Rgba([0, 0, 0, 255]));
        let corner = CursorImage {
            at: [-1, -1],
            ..cursor.clone()
        };
        assert!(blend_cursor(&mut edge, [0, 0], &corner));
        assert_eq!(edge.get_pixel(0, 0).0, [0, 0, 255, 255]);
        // Wholly outside, or with a pixel count that does not match its size: nothing.
        let away = CursorImage {
            at: [50, 50],
            ..cursor.clone()
        };
        assert!(!blend_cursor(&mut edge, [0, 0], &away));
        let short = CursorImage {
            argb: vec![0xFFFF_FFFF],
            ..cursor
        };
        assert!(!blend_cursor(&mut edge, [0, 0], &short));
    }

    #[test]
    fn an_opaque_capture_keeps_its_colours() {
        let image = RgbaImage::from_fn(3, 1, |x, _| image::Rgba([10 * x as u8, 7, 200, x as u8]));
        let out = opaque(image);
        assert_eq!(out.get_pixel(0, 0).0, [0, 7, 200, 255]);
        assert_eq!(out.get_pixel(2, 0).0, [20, 7, 200, 255]);
    }

    #[test]
    fn both_encodings_decode_to_the_same_size() {
        let image = RgbaImage::from_fn(300, 200, |x, y| image::Rgba([x as u8, y as u8, 90, 255]));
        let jpeg = encode(&image, Encoding::Jpeg { quality: 75 }).unwrap();
        assert_eq!(&jpeg[..2], &[0xFF, 0xD8]);
        let png_bytes = encode(&image, Encoding::Png).unwrap();
        let decoded =
            image::load_from_memory_with_format(&png_bytes, image::ImageFormat::Png).unwrap();
        assert_eq!((decoded.width(), decoded.height()), (300, 200));
        assert_eq!(decoded.to_rgba8().get_pixel(10, 20).0, [10, 20, 90, 255]);
        // JPEG's own header carries the size: SOF0 after the markers.
        let sof = jpeg.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        let height = u16::from_be_bytes([jpeg[sof + 5], jpeg[sof + 6]]);
        let width = u16::from_be_bytes([jpeg[sof + 7], jpeg[sof + 8]]);
        assert_eq!((width, height), (300, 200));
    }
}
