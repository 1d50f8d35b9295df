//! Screenshots on KDE Plasma through KWin's own `org.kde.KWin.ScreenShot2` interface, where
//! the compositor offers no capture protocol and KDE's desktop portal asks in a dialog for
//! every screenshot.
//!
//! KWin answers only programs it knows: the caller's executable (`/proc/<pid>/exe`) must be
//! the program of an installed desktop entry that lists the interface in
//! `X-KDE-DBUS-Restricted-Interfaces`, as Spectacle's does. `autogpt-shim install` writes one
//! for the copy it installs; anything else is refused with `NoAuthorized`.
//!
//! A capture sends KWin the write end of a pipe; KWin answers with the picture's size and
//! pixel format, then writes the raw pixels (a `QImage`'s bytes, rows `stride` apart) from a
//! thread of its own, which are read here up to the size it announced.

use std::collections::HashMap;
use std::time::Duration;

use image::RgbaImage;
use tokio::io::AsyncReadExt as _;
use zbus::zvariant::{Fd, OwnedValue, Value};

use super::{ask, kwin::KWIN, on_own_thread};
use crate::desktop::{DesktopError, Rect};

const PATH: &str = "/org/kde/KWin/ScreenShot2";
const INTERFACE: &str = "org.kde.KWin.ScreenShot2";
/// KWin's answer to a program no desktop entry allows.
const NOT_AUTHORIZED: &str = "org.kde.KWin.ScreenShot2.Error.NoAuthorized";
/// KWin's answer to an empty area, checked after the permission: asking for one tells whether
/// this program may take screenshots without taking one.
const INVALID_AREA: &str = "org.kde.KWin.ScreenShot2.Error.InvalidArea";
/// How long KWin may take to render the area and write its pixels.
const CAPTURE_DEADLINE: Duration = Duration::from_secs(10);
/// The most pixel bytes accepted: a 16384×16384 picture at four bytes a pixel.
const MAX_BYTES: u64 = 1 << 30;

/// `QImage::Format` values KWin sends: 32-bit pixels stored as `0xAARRGGBB` words (bytes B, G,
/// R, A on every machine KWin runs on), or as R, G, B, A bytes.
const FORMAT_RGB32: u32 = 4;
const FORMAT_ARGB32: u32 = 5;
const FORMAT_ARGB32_PREMULTIPLIED: u32 = 6;
const FORMAT_RGBX8888: u32 = 16;
const FORMAT_RGBA8888: u32 = 17;
const FORMAT_RGBA8888_PREMULTIPLIED: u32 = 18;

/// Whether KWin's ScreenShot2 gives this program screenshots, asked of a KWin known to run:
/// `None` when it has no such interface, `Some(false)` when it refuses this program.
pub async fn offered_by_running_kwin(bus: &zbus::Connection) -> Option<bool> {
    let (_reader, writer) = rustix::pipe::pipe().ok()?;
    let called = capture_area(bus, (0, 0, 0, 0), HashMap::new(), &writer);
    match tokio::time::timeout(super::CALL_DEADLINE, called)
        .await
        .ok()?
    {
        Err(zbus::Error::MethodError(name, ..)) => match name.as_str() {
            INVALID_AREA => Some(true),
            NOT_AUTHORIZED => Some(false),
            _ => None,
        },
        // An empty area is never captured; a KWin that did has answered for this program.
        Ok(_) => Some(true),
        Err(_) => None,
    }
}

/// [`offered_by_running_kwin`] on this process's session bus; `None` also without a session
/// bus or KWin on it (a call to a name nobody owns may start a service for it).
#[must_use]
pub fn allowed() -> Option<bool> {
    on_own_thread(|| {
        ask(|bus| async move {
            if super::kwin::offered(&bus).await {
                offered_by_running_kwin(&bus).await
            } else {
                None
            }
        })
    })
}

/// KWin's `CaptureArea` of `(x, y, width, height)` with `options`, its pixels to `pipe`.
async fn capture_area(
    bus: &zbus::Connection,
    (x, y, width, height): (i32, i32, u32, u32),
    options: HashMap<&str, Value<'_>>,
    pipe: &std::os::fd::OwnedFd,
) -> zbus::Result<zbus::Message> {
    let body = (x, y, width, height, options, Fd::from(pipe));
    bus.call_method(Some(KWIN), PATH, Some(INTERFACE), "CaptureArea", &body)
        .await
}

/// The pixels of `area` in KWin's layout, at the outputs' own resolution, with the pointer
/// drawn in when `pointer`.
///
/// # Errors
/// [`DesktopError::NotSupported`] (`screenshot`) without a session bus, and
/// [`DesktopError::Failed`] when KWin refuses, fails or sends a picture not understood.
pub fn area(area: Rect, pointer: bool) -> Result<RgbaImage, DesktopError> {
    on_own_thread(|| ask(|bus| async move { Some(capture(&bus, area, pointer).await) }))
        .unwrap_or_else(|| {
            Err(DesktopError::unsupported(
                "screenshot",
                "no session bus to reach KWin on (DBUS_SESSION_BUS_ADDRESS is unset)",
            ))
        })
}

async fn capture(
    bus: &zbus::Connection,
    area: Rect,
    pointer: bool,
) -> Result<RgbaImage, DesktopError> {
    let failed = |what: &str| DesktopError::Failed(format!("KWin's screenshot failed: {what}"));
    let (reader, writer) =
        rustix::pipe::pipe().map_err(|e| failed(&format!("no pipe for its pixels ({e})")))?;
    let options: HashMap<&str, Value<'_>> = HashMap::from([
        // The outputs' own pixels, as a wlroots compositor's capture gives them.
        ("native-resolution", Value::from(true)),
        ("include-cursor", Value::from(pointer)),
    ]);
    let (x, y) = (
        i32::try_from(area.x).map_err(|_| failed("the area lies too far out"))?,
        i32::try_from(area.y).map_err(|_| failed("the area lies too far out"))?,
    );
    let (width, height) = (
        u32::try_from(area.width).map_err(|_| failed("the area is too large"))?,
        u32::try_from(area.height).map_err(|_| failed("the area is too large"))?,
    );
    let called = capture_area(bus, (x, y, width, height), options, &writer);
    let reply = tokio::time::timeout(CAPTURE_DEADLINE, called)
        .await
        .map_err(|_| failed("KWin did not answer"))?
        .map_err(|err| match err {
            zbus::Error::MethodError(name, ..) if name.as_str() == NOT_AUTHORIZED => failed(
                "KWin no longer lets this program take screenshots (its desktop entry is gone)",
            ),
            other => failed(&other.to_string()),
        })?;
    // KWin writes from its own copy of the pipe; this one would keep it open past the pixels.
    drop(writer);
    let answer: HashMap<String, OwnedValue> = reply
        .body()
        .deserialize()
        .map_err(|e| failed(&format!("its answer was not understood ({e})")))?;
    let picture = Picture::from_answer(&answer).map_err(|what| failed(&what))?;
    let mut bytes = vec![0; picture.len().map_err(|what| failed(&what))?];
    let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(reader)
        .map_err(|e| failed(&format!("its pipe could not be read ({e})")))?;
    tokio::time::timeout(CAPTURE_DEADLINE, pipe.read_exact(&mut bytes))
        .await
        .map_err(|_| failed("KWin did not send the pixels"))?
        .map_err(|e| failed(&format!("its pixels could not be read ({e})")))?;
    picture.decode(&bytes).map_err(|what| failed(&what))
}

/// A picture's layout, as KWin's answer describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Picture {
    format: u32,
    width: u32,
    height: u32,
    stride: u32,
}

impl Picture {
    fn from_answer(answer: &HashMap<String, OwnedValue>) -> Result<Self, String> {
        let number = |key: &str| {
            answer
                .get(key)
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| format!("its answer lacks `{key}`"))
        };
        let kind = answer
            .get("type")
            .and_then(|v| String::try_from(v.try_clone().ok()?).ok());
        if kind.as_deref().is_some_and(|k| k != "raw") {
            return Err(format!(
                "it sent a picture of type {} where raw pixels were asked for",
                kind.unwrap_or_default()
            ));
        }
        Ok(Self {
            format: number("format")?,
            width: number("width")?,
            height: number("height")?,
            stride: number("stride")?,
        })
    }

    /// How many bytes the pixels take, checked against the width and the cap.
    fn len(&self) -> Result<usize, String> {
        let bytes = u64::from(self.stride) * u64::from(self.height);
        let bytes = usize::try_from(bytes)
            .ok()
            .filter(|_| u64::from(self.stride) >= u64::from(self.width) * 4 && bytes <= MAX_BYTES);
        bytes.ok_or_else(|| {
            format!(
                "it announced {}×{} pixels in rows of {} bytes, which no screen's picture has",
                self.width, self.height, self.stride
            )
        })
    }

    /// The pixels as RGBA, every one opaque: a screen has no transparency, and KWin's
    /// premultiplied formats are then the same as straight ones.
    fn decode(&self, bytes: &[u8]) -> Result<RgbaImage, String> {
        let swap = match self.format {
            FORMAT_RGB32 | FORMAT_ARGB32 | FORMAT_ARGB32_PREMULTIPLIED => true,
            FORMAT_RGBX8888 | FORMAT_RGBA8888 | FORMAT_RGBA8888_PREMULTIPLIED => false,
            other => {
                return Err(format!(
                    "it sent pixels in a format not read here ({other})"
                ));
            }
        };
        let (width, stride) = (self.width as usize, self.stride as usize);
        if stride < width * 4 {
            return Err("its rows are shorter than their pixels".to_owned());
        }
        let mut out = Vec::with_capacity(width * 4 * self.height as usize);
        for row in bytes.chunks_exact(stride).take(self.height as usize) {
            for pixel in row[..width * 4].chunks_exact(4) {
                let [a, b, c, _] = [pixel[0], pixel[1], pixel[2], pixel[3]];
                out.extend_from_slice(&if swap { [c, b, a, 255] } else { [a, b, c, 255] });
            }
        }
        RgbaImage::from_raw(self.width, self.height, out)
            .ok_or_else(|| "it sent fewer pixels than it announced".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(format: u32, width: u32, height: u32, stride: u32) -> HashMap<String, OwnedValue> {
        HashMap::from([
            (
                "type".to_owned(),
                OwnedValue::from(zbus::zvariant::Str::from("raw")),
            ),
            ("format".to_owned(), OwnedValue::from(format)),
            ("width".to_owned(), OwnedValue::from(width)),
            ("height".to_owned(), OwnedValue::from(height)),
            ("stride".to_owned(), OwnedValue::from(stride)),
            ("scale".to_owned(), OwnedValue::from(1.0_f64)),
        ])
    }

    #[test]
    fn kwins_32_bit_words_become_opaque_rgba_and_row_padding_is_skipped() {
        // Two pixels a row, rows padded to 12 bytes: red, green / blue, half-transparent white.
        let bytes = [
            0, 0, 255, 255, 0, 255, 0, 255, 9, 9, 9, 9, //
            255, 0, 0, 255, 255, 255, 255, 128, 9, 9, 9, 9,
        ];
        let picture = Picture::from_answer(&answer(FORMAT_ARGB32_PREMULTIPLIED, 2, 2, 12)).unwrap();
        assert_eq!(picture.len().unwrap(), 24);
        let image = picture.decode(&bytes).unwrap();
        assert_eq!(image.get_pixel(0, 0).0, [255, 0, 0, 255]);
        assert_eq!(image.get_pixel(1, 0).0, [0, 255, 0, 255]);
        assert_eq!(image.get_pixel(0, 1).0, [0, 0, 255, 255]);
        assert_eq!(image.get_pixel(1, 1).0, [255, 255, 255, 255]);
        let rgba = Picture::from_answer(&answer(FORMAT_RGBA8888, 2, 2, 12)).unwrap();
        assert_eq!(
            rgba.decode(&bytes).unwrap().get_pixel(0, 0).0,
            [0, 0, 255, 255]
        );
    }

    #[test]
    fn a_picture_kwin_cannot_have_sent_is_refused_in_words() {
        let picture = |format, width, height, stride| {
            Picture::from_answer(&answer(format, width, height, stride)).unwrap()
        };
        // Rows shorter than their pixels, and more than the cap.
        assert!(picture(FORMAT_ARGB32, 10, 1, 39).len().is_err());
        assert!(picture(FORMAT_ARGB32, 65536, 65536, 262_144).len().is_err());
        // Too few bytes for what was announced, and a format not read here (RGB888).
        assert_eq!(
            picture(FORMAT_ARGB32, 2, 2, 8)
                .decode(&[0; 12])
                .unwrap_err(),
            "it sent fewer pixels than it announced"
        );
        assert!(
            picture(13, 2, 2, 8)
                .decode(&[0; 32])
                .unwrap_err()
                .contains("(13)")
        );
        let mut png = answer(FORMAT_ARGB32, 1, 1, 4);
        png.insert(
            "type".to_owned(),
            OwnedValue::from(zbus::zvariant::Str::from("png")),
        );
        assert!(Picture::from_answer(&png).unwrap_err().contains("type png"));
        let mut missing = answer(FORMAT_ARGB32, 1, 1, 4);
        missing.remove("stride");
        assert_eq!(
            Picture::from_answer(&missing).unwrap_err(),
            "its answer lacks `stride`"
        );
    }
}
