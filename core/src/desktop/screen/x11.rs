//! X11 screens on one connection: monitors from RandR, pixels from GetImage on the root window
//! (a window's from GetImage on the window itself), the pointer from XFIXES. xcap opened a
//! connection per question and converted pixel by pixel through a function pointer, which made
//! a 1920×1080 capture cost 2-3× what the transfer does; on Linux it is no longer used at all.

use image::RgbaImage;
use x11rb::connection::Connection;
use x11rb::protocol::randr::ConnectionExt as _;
use x11rb::protocol::xfixes::ConnectionExt as _;
use x11rb::protocol::xproto::{
    AtomEnum, ConnectionExt as _, GetImageReply, ImageFormat, ImageOrder, MapState,
};
use x11rb::rust_connection::RustConnection;

use super::{CursorImage, DesktopError, Display, Rect};

/// The DPI X11 calls a scale of 1.
const BASE_DPI: f64 = 96.0;

fn failed(err: impl std::fmt::Display) -> DesktopError {
    DesktopError::Failed(err.to_string())
}

/// One connection to the X server and its default screen's root window.
pub(super) struct Screen {
    conn: RustConnection,
    root: u32,
}

impl Screen {
    pub(super) fn open() -> Result<Self, DesktopError> {
        let (conn, screen) = x11rb::connect(None).map_err(failed)?;
        let root = conn
            .setup()
            .roots
            .get(screen)
            .ok_or_else(|| failed("the X server has no such screen"))?
            .root;
        Ok(Self { conn, root })
    }

    /// Every active RandR monitor, in the server's order, unindexed.
    pub(super) fn displays(&self) -> Result<Vec<Display>, DesktopError> {
        let monitors = self
            .conn
            .randr_get_monitors(self.root, true)
            .map_err(failed)?
            .reply()
            .map_err(failed)?
            .monitors;
        let scale = self.scale();
        Ok(monitors
            .into_iter()
            .map(|m| Display {
                index: 0,
                primary: m.primary,
                rect: Rect {
                    x: i64::from(m.x),
                    y: i64::from(m.y),
                    width: u64::from(m.width),
                    height: u64::from(m.height),
                },
                scale,
                // The output id, as xcap names monitors; a monitor without one by its name.
                os_id: m.outputs.first().copied().unwrap_or(m.name),
            })
            .collect())
    }

    /// `Xft.dpi` over 96 from the root's resource database, as toolkits (and xcap) read it.
    fn scale(&self) -> f64 {
        let Ok(Ok(reply)) = self
            .conn
            .get_property(
                false,
                self.root,
                AtomEnum::RESOURCE_MANAGER,
                AtomEnum::STRING,
                0,
                1 << 16,
            )
            .map(x11rb::cookie::Cookie::reply)
        else {
            return 1.0;
        };
        xft_scale(&String::from_utf8_lossy(&reply.value)).unwrap_or(1.0)
    }

    /// The pixels of `rect` (display-global, on the screen) as RGBA.
    pub(super) fn grab(&self, rect: Rect) -> Result<RgbaImage, DesktopError> {
        let (Ok(x), Ok(y), Ok(width), Ok(height)) = (
            i16::try_from(rect.x),
            i16::try_from(rect.y),
            u16::try_from(rect.width),
            u16::try_from(rect.height),
        ) else {
            return Err(failed("the area lies beyond what X11 can address"));
        };
        let reply = self
            .conn
            .get_image(ImageFormat::Z_PIXMAP, self.root, x, y, width, height, !0)
            .map_err(failed)?
            .reply()
            .map_err(failed)?;
        self.to_rgba(&reply, width, height)
    }

    /// One window's pixels as RGBA and its top-left, display-global: the window's own contents
    /// (GetImage on the window, what xcap did), or, when part of it lies off the screen (where
    /// the server refuses that), the part on the screen as the root window shows it.
    pub(super) fn grab_window(&self, window: u32) -> Result<(RgbaImage, [i64; 2]), DesktopError> {
        let closed = |_| DesktopError::Failed("the window closed during capture".to_owned());
        let attributes = self.conn.get_window_attributes(window).map_err(failed)?;
        let geometry = self.conn.get_geometry(window).map_err(failed)?;
        let origin = self
            .conn
            .translate_coordinates(window, self.root, 0, 0)
            .map_err(failed)?;
        let attributes = attributes.reply().map_err(closed)?;
        let geometry = geometry.reply().map_err(closed)?;
        let origin = origin.reply().map_err(closed)?;
        if attributes.map_state != MapState::VIEWABLE {
            return Err(DesktopError::Failed(
                "the window is not shown (minimised or hidden): restore it, then capture it"
                    .to_owned(),
            ));
        }
        let at = [i64::from(origin.dst_x), i64::from(origin.dst_y)];
        let own = self
            .conn
            .get_image(
                ImageFormat::Z_PIXMAP,
                window,
                0,
                0,
                geometry.width,
                geometry.height,
                !0,
            )
            .map_err(failed)?
            .reply();
        if let Ok(reply) = own {
            return Ok((self.to_rgba(&reply, geometry.width, geometry.height)?, at));
        }
        let screen = self.conn.setup().roots.iter().find(|s| s.root == self.root);
        let visible = screen
            .and_then(|s| {
                Rect {
                    x: at[0],
                    y: at[1],
                    width: u64::from(geometry.width),
                    height: u64::from(geometry.height),
                }
                .intersect(&Rect {
                    x: 0,
                    y: 0,
                    width: u64::from(s.width_in_pixels),
                    height: u64::from(s.height_in_pixels),
                })
            })
            .ok_or_else(|| {
                DesktopError::Failed(
                    "the window lies wholly off the screen: move it onto a display, then capture it"
                        .to_owned(),
                )
            })?;
        Ok((self.grab(visible)?, [visible.x, visible.y]))
    }

    /// A GetImage answer of `width`×`height` as RGBA, when its pixel format is one this reads.
    fn to_rgba(
        &self,
        reply: &GetImageReply,
        width: u16,
        height: u16,
    ) -> Result<RgbaImage, DesktopError> {
        let setup = self.conn.setup();
        let bits = setup
            .pixmap_formats
            .iter()
            .find(|f| f.depth == reply.depth)
            .map(|f| f.bits_per_pixel);
        if !matches!(reply.depth, 24 | 32) || bits != Some(32) {
            return Err(DesktopError::unsupported(
                "screenshot",
                "only 24- and 32-bit X11 visuals can be captured",
            ));
        }
        to_rgba(
            &reply.data,
            u32::from(width),
            u32::from(height),
            setup.image_byte_order,
        )
    }

    /// The pointer's image, placed at its hot spot.
    pub(super) fn cursor(&self) -> Result<CursorImage, DesktopError> {
        // The server answers XFIXES requests only after the client has named its version.
        self.conn
            .xfixes_query_version(4, 0)
            .map_err(failed)?
            .reply()
            .map_err(failed)?;
        let cursor = self
            .conn
            .xfixes_get_cursor_image()
            .map_err(failed)?
            .reply()
            .map_err(failed)?;
        Ok(CursorImage {
            at: [
                i64::from(cursor.x) - i64::from(cursor.xhot),
                i64::from(cursor.y) - i64::from(cursor.yhot),
            ],
            width: u32::from(cursor.width),
            height: u32::from(cursor.height),
            argb: cursor.cursor_image,
        })
    }
}

/// The scale `Xft.dpi` in a resource database string sets, if it names a sensible one.
fn xft_scale(resources: &str) -> Option<f64> {
    let dpi: f64 = resources
        .lines()
        .find_map(|line| line.strip_prefix("Xft.dpi:"))?
        .trim()
        .parse()
        .ok()?;
    (dpi.is_finite() && dpi > 0.0).then_some(dpi / BASE_DPI)
}

/// 32-bit Z-pixmap pixels (B, G, R, pad in least-significant-byte-first order) as opaque RGBA.
fn to_rgba(
    data: &[u8],
    width: u32,
    height: u32,
    order: ImageOrder,
) -> Result<RgbaImage, DesktopError> {
    let pixels = usize::try_from(u64::from(width) * u64::from(height)).map_err(failed)?;
    if data.len() < pixels * 4 {
        return Err(failed("the X server sent fewer pixels than asked for"));
    }
    let mut out = vec![0_u8; pixels * 4];
    let lsb = order == ImageOrder::LSB_FIRST;
    for (dst, src) in out.chunks_exact_mut(4).zip(data.chunks_exact(4)) {
        let [red, green, blue] = if lsb {
            [src[2], src[1], src[0]]
        } else {
            [src[1], src[2], src[3]]
        };
        dst.copy_from_slice(&[red, green, blue, 255]);
    }
    RgbaImage::from_raw(width, height, out).ok_or_else(|| failed("the image size overflowed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixels_convert_in_either_byte_order() {
        // One pixel of R=1, G=2, B=3: LSB-first stores B, G, R, pad; MSB-first pad, R, G, B.
        let lsb = to_rgba(&[3, 2, 1, 0], 1, 1, ImageOrder::LSB_FIRST).unwrap();
        assert_eq!(lsb.get_pixel(0, 0).0, [1, 2, 3, 255]);
        let msb = to_rgba(&[0, 1, 2, 3], 1, 1, ImageOrder::MSB_FIRST).unwrap();
        assert_eq!(msb.get_pixel(0, 0).0, [1, 2, 3, 255]);
        assert!(to_rgba(&[0; 7], 2, 1, ImageOrder::LSB_FIRST).is_err());
    }

    #[test]
    fn the_scale_comes_from_xft_dpi() {
        assert_eq!(xft_scale("Xft.antialias:\t1\nXft.dpi:\t144\n"), Some(1.5));
        assert_eq!(xft_scale("Xft.dpi:\t96"), Some(1.0));
        assert_eq!(xft_scale("Xft.dpi:\tlots"), None);
        assert_eq!(xft_scale("Xft.dpi:\t0"), None);
        assert_eq!(xft_scale(""), None);
    }
}
