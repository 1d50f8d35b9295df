//! One screenshot from start to finish: the per-minute slot, the window a minted id names, the
//! capture, the pointer drawn in, the encoding and the byte limit. A face converts its request
//! into a [`ScreenshotRequest`] and the [`Screenshot`] (or [`DesktopError`]) back, nothing more.
//!
//! [`encode_within`] is the encode-and-measure step the window observation shares
//! (`guide::observe` shrinks and retries where a screenshot refuses).

use image::RgbaImage;

use super::screen::{self, Encoding, Source};
use super::{Desktop, DesktopError};

/// Where a screenshot's pixels come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One monitor by index (past the last: the primary); `-1` stitches them all.
    Monitor(i32),
    /// A display-global rectangle `[x1, y1, x2, y2]`, clipped to the displays it overlaps.
    Region([i64; 4]),
    /// The window a listing minted this id for (`win_<uuid>`).
    Window(String),
}

/// A screenshot request in core terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenshotRequest {
    /// What to capture.
    pub target: Target,
    /// Whether to draw the pointer in, as a user sees the screen.
    pub include_cursor: bool,
    /// How to encode the pixels.
    pub encoding: Encoding,
    /// Most bytes the encoded image may have; more is refused, never cut.
    pub max_bytes: u64,
    /// Longest side the image may have, in pixels: a larger capture is scaled down (aspect
    /// kept) before it is encoded; `None` keeps every captured pixel.
    pub max_edge: Option<u32>,
}

/// An encoded screenshot and where its pixels came from.
#[derive(Debug, Clone)]
pub struct Screenshot {
    /// The encoded image, as [`ScreenshotRequest::encoding`] asked.
    pub bytes: Vec<u8>,
    /// The image's width in pixels (the capture's physical pixels unless it was scaled).
    pub width: u32,
    /// The image's height in pixels.
    pub height: u32,
    /// The capture's size in physical pixels, before any scaling to `max_edge`.
    pub captured: [u32; 2],
    /// The image's top-left in display-global pixels.
    pub origin: [i64; 2],
    /// The monitor captured (for a region or a window: the one holding its top-left), `-1`
    /// for all of them.
    pub monitor: i32,
    /// That monitor's physical pixels per logical pixel.
    pub scale: f64,
    /// That monitor's OS id.
    pub os_id: u32,
    /// Whether any of the pointer landed in the image.
    pub cursor_drawn: bool,
    /// Why the pointer could not be drawn, when it was asked for and that failed: the
    /// screenshot is still good (a screenshot without the pointer beats none), the caller
    /// may log the code.
    pub pointer_failure: Option<DesktopError>,
}

impl Screenshot {
    /// The capture's size in logical pixels (physical divided by the monitor's scale).
    #[must_use]
    pub fn logical_size(&self) -> [u32; 2] {
        let logical = |side: u32| (f64::from(side) / self.scale).round() as u32;
        [logical(self.captured[0]), logical(self.captured[1])]
    }

    /// Physical screen pixels per image pixel: 1 unless the image was scaled to `max_edge`.
    #[must_use]
    pub fn screen_per_image_pixel(&self) -> f64 {
        f64::from(self.captured[0].max(self.captured[1]))
            / f64::from(self.width.max(self.height).max(1))
    }
}

impl Desktop {
    /// Takes one screenshot (blocking): counts it against the per-minute limit, resolves a
    /// window id against the live windows, captures, draws the pointer when asked, encodes and
    /// checks the encoded size against `request.max_bytes`.
    ///
    /// # Errors
    /// [`DesktopError::RateLimited`] past the per-minute share, [`DesktopError::WindowStale`]
    /// for an id that no longer names its window, [`DesktopError::TooLarge`] for an image over
    /// the limit, and the capture's and encoder's own failures.
    pub fn screenshot(&self, request: &ScreenshotRequest) -> Result<Screenshot, DesktopError> {
        self.take_screenshot_slot()?;
        let source = match &request.target {
            Target::Window(window_id) => {
                let live = super::windows::all()?;
                Source::Window(self.windows.resolve(window_id, &live)?.id)
            }
            Target::Region(corners) => Source::Region(*corners),
            Target::Monitor(index) => Source::Monitor(*index),
        };
        let mut capture = screen::capture(source, request.include_cursor)?;
        let (cursor_drawn, pointer_failure) = if request.include_cursor {
            match screen::draw_cursor(&mut capture) {
                Ok(drawn) => (drawn, None),
                Err(err) => (false, Some(err)),
            }
        } else {
            (false, None)
        };
        let captured = capture.image.dimensions();
        let image = match request.max_edge {
            Some(edge) => within_edge(capture.image, edge),
            None => capture.image,
        };
        let bytes = encode_within(&image, request.encoding, request.max_bytes)?;
        let (width, height) = image.dimensions();
        Ok(Screenshot {
            bytes,
            width,
            height,
            captured: [captured.0, captured.1],
            origin: capture.origin,
            monitor: capture.monitor,
            scale: capture.scale,
            os_id: capture.os_id,
            cursor_drawn,
            pointer_failure,
        })
    }
}

/// `image` with its longer side at most `edge` pixels (at least 1), scaled with a triangle
/// filter, aspect kept; unchanged when it already fits.
#[must_use]
pub fn within_edge(image: RgbaImage, edge: u32) -> RgbaImage {
    let (width, height) = image.dimensions();
    let longer = width.max(height);
    let edge = edge.max(1);
    if longer <= edge {
        return image;
    }
    let side = |length: u32| {
        u32::try_from(u64::from(length) * u64::from(edge) / u64::from(longer))
            .unwrap_or(edge)
            .max(1)
    };
    image::imageops::resize(
        &image,
        side(width),
        side(height),
        image::imageops::FilterType::Triangle,
    )
}

/// Encodes `image` and refuses the result when it is over `max_bytes`.
///
/// # Errors
/// [`DesktopError::TooLarge`] with the encoded size and the limit, or the encoder's failure
/// ([`screen::encode`]).
pub fn encode_within(
    image: &RgbaImage,
    encoding: Encoding,
    max_bytes: u64,
) -> Result<Vec<u8>, DesktopError> {
    let bytes = screen::encode(image, encoding)?;
    let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if size > max_bytes {
        return Err(DesktopError::TooLarge {
            size,
            limit: max_bytes,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_over_the_edge_is_scaled_with_its_aspect() {
        let image = RgbaImage::from_pixel(1280, 720, image::Rgba([9, 9, 9, 255]));
        let scaled = within_edge(image.clone(), 640);
        assert_eq!(scaled.dimensions(), (640, 360));
        assert_eq!(
            within_edge(image, 2000).dimensions(),
            (1280, 720),
            "a fitting image stays"
        );
        let tall = RgbaImage::new(10, 3000);
        assert_eq!(within_edge(tall, 1000).dimensions(), (3, 1000));
        assert_eq!(
            within_edge(RgbaImage::new(5000, 1), 100).dimensions(),
            (100, 1)
        );
    }

    #[test]
    fn an_encoding_over_the_limit_is_refused_with_its_size_and_the_limit() {
        let image = RgbaImage::from_fn(64, 64, |x, y| image::Rgba([x as u8, y as u8, 7, 255]));
        let bytes = encode_within(&image, Encoding::Png, u64::MAX).unwrap();
        let size = u64::try_from(bytes.len()).unwrap();
        assert_eq!(
            encode_within(&image, Encoding::Png, size).unwrap(),
            bytes,
            "exactly the limit is allowed"
        );
        let err = encode_within(&image, Encoding::Png, size - 1).unwrap_err();
        assert_eq!(
            err,
            DesktopError::TooLarge {
                size,
                limit: size - 1
            }
        );
        assert_eq!(err.code(), "FILE_TOO_LARGE");
    }

    #[test]
    fn the_logical_size_divides_by_the_scale_and_rounds() {
        let mut shot = Screenshot {
            bytes: Vec::new(),
            width: 2561,
            height: 1440,
            captured: [2561, 1440],
            origin: [0, 0],
            monitor: 0,
            scale: 2.0,
            os_id: 1,
            cursor_drawn: false,
            pointer_failure: None,
        };
        assert_eq!(shot.logical_size(), [1281, 720]);
        assert!((shot.screen_per_image_pixel() - 1.0).abs() < 1e-9);
        // Scaled to half: the logical size is still the capture's, each image pixel two.
        (shot.width, shot.height) = (1280, 720);
        assert_eq!(shot.logical_size(), [1281, 720]);
        assert!((shot.screen_per_image_pixel() - 2561.0 / 1280.0).abs() < 1e-9);
    }
}
