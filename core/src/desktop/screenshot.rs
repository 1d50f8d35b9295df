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
}

/// An encoded screenshot and where its pixels came from.
#[derive(Debug, Clone)]
pub struct Screenshot {
    /// The encoded image, as [`ScreenshotRequest::encoding`] asked.
    pub bytes: Vec<u8>,
    /// Width in physical pixels.
    pub width: u32,
    /// Height in physical pixels.
    pub height: u32,
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
    /// The image's size in logical pixels (physical divided by the monitor's scale).
    #[must_use]
    pub fn logical_size(&self) -> [u32; 2] {
        let logical = |side: u32| (f64::from(side) / self.scale).round() as u32;
        [logical(self.width), logical(self.height)]
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
        let mut capture = screen::capture(source)?;
        let (cursor_drawn, pointer_failure) = if request.include_cursor {
            match screen::draw_cursor(&mut capture) {
                Ok(drawn) => (drawn, None),
                Err(err) => (false, Some(err)),
            }
        } else {
            (false, None)
        };
        let bytes = encode_within(&capture.image, request.encoding, request.max_bytes)?;
        let (width, height) = capture.image.dimensions();
        Ok(Screenshot {
            bytes,
            width,
            height,
            origin: capture.origin,
            monitor: capture.monitor,
            scale: capture.scale,
            os_id: capture.os_id,
            cursor_drawn,
            pointer_failure,
        })
    }
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
        let shot = Screenshot {
            bytes: Vec::new(),
            width: 2561,
            height: 1440,
            origin: [0, 0],
            monitor: 0,
            scale: 2.0,
            os_id: 1,
            cursor_drawn: false,
            pointer_failure: None,
        };
        assert_eq!(shot.logical_size(), [1281, 720]);
    }
}
