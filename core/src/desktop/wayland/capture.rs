//! One output's pixels through wlr-screencopy: the frame asks for a shared-memory buffer, the
//! compositor copies into a memfd, and the pixels are read back with pread (no mmap, which
//! would need unsafe code), in physical pixels.

use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

use image::RgbaImage;
use wayland_client::protocol::{wl_buffer, wl_shm, wl_shm_pool};
use wayland_client::{Connection, Dispatch, Proxy, QueueHandle, WEnum, delegate_noop};
use wayland_protocols_wlr::screencopy::v1::client::{
    zwlr_screencopy_frame_v1, zwlr_screencopy_manager_v1::ZwlrScreencopyManagerV1,
};

use super::{Frame, State, Wl, failed, memfd, run};
use crate::desktop::DesktopError;

/// How long the compositor may take to describe and then fill a frame.
const FRAME_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// The whole output `os_id` (a display's OS id), at its physical size; with `pointer`, the
/// compositor draws the pointer into it (a compositor that draws its pointer in software, as
/// on a headless output, has it in every capture).
///
/// # Errors
/// [`DesktopError::NotSupported`] without screencopy, [`DesktopError::Failed`] when the
/// compositor refuses or offers a pixel format this does not read.
pub fn output(os_id: u32, pointer: bool) -> Result<RgbaImage, DesktopError> {
    run(move |wl| grab(wl, os_id, pointer))
}

fn grab(wl: &mut Wl, os_id: u32, pointer: bool) -> Result<RgbaImage, DesktopError> {
    let manager = wl
        .globals
        .bind::<ZwlrScreencopyManagerV1, _, _>(&wl.qh, 1..=3, ())
        .map_err(|_| {
            DesktopError::unsupported(
                "screenshot",
                "this Wayland compositor has no screen capture protocol",
            )
        })?;
    let shm = wl
        .globals
        .bind::<wl_shm::WlShm, _, _>(&wl.qh, 1..=1, ())
        .map_err(|e| failed("no shared memory on this compositor", e))?;
    let output = wl.output(os_id)?.wl.clone();
    wl.state.frame = Frame::default();
    let frame = manager.capture_output(i32::from(pointer), &output, &wl.qh, ());
    // Version 3 announces every buffer type and then buffer_done; before it, the shm buffer
    // event is all there is.
    let v3 = manager.version() >= 3;
    let outcome = copy(wl, &shm, &frame, v3);
    frame.destroy();
    manager.destroy();
    let _ = wl.conn.flush();
    outcome
}

fn copy(
    wl: &mut Wl,
    shm: &wl_shm::WlShm,
    frame: &zwlr_screencopy_frame_v1::ZwlrScreencopyFrameV1,
    v3: bool,
) -> Result<RgbaImage, DesktopError> {
    wl.until(FRAME_DEADLINE, "the screen capture", |s| {
        s.frame.failed
            || if v3 {
                s.frame.buffer_done
            } else {
                s.frame.shm.is_some()
            }
    })?;
    let Some((format, width, height, stride)) = wl.state.frame.shm else {
        return Err(DesktopError::Failed(
            "the compositor offered no shared-memory buffer for the capture".to_owned(),
        ));
    };
    let size = u64::from(stride) * u64::from(height);
    let file = memfd("screencopy", size)?;
    let side = |v: u32| i32::try_from(v).map_err(|e| failed("capture size", e));
    let pool = shm.create_pool(
        file.as_fd(),
        side(u32::try_from(size).unwrap_or(u32::MAX))?,
        &wl.qh,
        (),
    );
    let buffer = pool.create_buffer(
        0,
        side(width)?,
        side(height)?,
        side(stride)?,
        format,
        &wl.qh,
        (),
    );
    frame.copy(&buffer);
    let done = wl.until(FRAME_DEADLINE, "the screen capture", |s| {
        s.frame.ready || s.frame.failed
    });
    buffer.destroy();
    pool.destroy();
    done?;
    if wl.state.frame.failed {
        return Err(DesktopError::Failed(
            "the compositor could not copy the output".to_owned(),
        ));
    }
    let mut raw = vec![0; usize::try_from(size).unwrap_or(0)];
    file.read_exact_at(&mut raw, 0)
        .map_err(|e| failed("could not read the captured pixels", e))?;
    to_rgba(&raw, format, width, height, stride, wl.state.frame.y_invert)
}

/// Converts 32-bit shm pixels to RGBA, honouring the row order.
fn to_rgba(
    raw: &[u8],
    format: wl_shm::Format,
    width: u32,
    height: u32,
    stride: u32,
    y_invert: bool,
) -> Result<RgbaImage, DesktopError> {
    use wl_shm::Format as F;
    // Little-endian in memory: [A|X]RGB8888 is B,G,R,A; [A|X]BGR8888 is R,G,B,A.
    let bgr = match format {
        F::Xrgb8888 | F::Argb8888 => true,
        F::Xbgr8888 | F::Abgr8888 => false,
        other => {
            return Err(DesktopError::Failed(format!(
                "the compositor offered the pixel format {other:?}, which this does not read"
            )));
        }
    };
    let row_bytes = usize::try_from(width).unwrap_or(0) * 4;
    let stride = usize::try_from(stride).unwrap_or(0);
    let mut out = Vec::with_capacity(row_bytes * usize::try_from(height).unwrap_or(0));
    for y in 0..height {
        let row = usize::try_from(if y_invert { height - 1 - y } else { y }).unwrap_or(0);
        let line = raw
            .get(row * stride..row * stride + row_bytes)
            .ok_or_else(|| {
                DesktopError::Failed("the capture was shorter than announced".to_owned())
            })?;
        for p in line.chunks_exact(4) {
            if bgr {
                out.extend_from_slice(&[p[2], p[1], p[0], 255]);
            } else {
                out.extend_from_slice(&[p[0], p[1], p[2], 255]);
            }
        }
    }
    RgbaImage::from_raw(width, height, out)
        .ok_or_else(|| DesktopError::Failed("the capture's size did not add up".to_owned()))
}

delegate_noop!(State: wl_shm_pool::WlShmPool);
delegate_noop!(State: ignore wl_buffer::WlBuffer);

impl Dispatch<zwlr_screencopy_frame_v1::ZwlrScreencopyFrameV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &zwlr_screencopy_frame_v1::ZwlrScreencopyFrameV1,
        event: zwlr_screencopy_frame_v1::Event,
        (): &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        use zwlr_screencopy_frame_v1::Event as E;
        let frame = &mut state.frame;
        match event {
            E::Buffer {
                format: WEnum::Value(format),
                width,
                height,
                stride,
            } => frame.shm = Some((format, width, height, stride)),
            E::BufferDone => frame.buffer_done = true,
            E::Flags { flags } => {
                let bits = match flags {
                    WEnum::Value(f) => f.bits(),
                    WEnum::Unknown(bits) => bits,
                };
                frame.y_invert = bits & 1 == 1;
            }
            E::Ready { .. } => frame.ready = true,
            E::Failed => frame.failed = true,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixels_are_read_in_their_format_and_row_order() {
        // 2×2, stride 12 (4 bytes of padding a row): blue, red / green, white in XRGB.
        let raw = [
            255, 0, 0, 0, 0, 0, 255, 0, 9, 9, 9, 9, //
            0, 255, 0, 0, 255, 255, 255, 0, 9, 9, 9, 9,
        ];
        let image = to_rgba(&raw, wl_shm::Format::Xrgb8888, 2, 2, 12, false).unwrap();
        assert_eq!(image.get_pixel(0, 0).0, [0, 0, 255, 255]);
        assert_eq!(image.get_pixel(1, 0).0, [255, 0, 0, 255]);
        assert_eq!(image.get_pixel(1, 1).0, [255, 255, 255, 255]);
        let flipped = to_rgba(&raw, wl_shm::Format::Xbgr8888, 2, 2, 12, true).unwrap();
        assert_eq!(flipped.get_pixel(0, 0).0, [0, 255, 0, 255]);
        assert_eq!(flipped.get_pixel(1, 1).0, [0, 0, 255, 255]);
        assert!(to_rgba(&raw, wl_shm::Format::Rgb565, 2, 2, 12, false).is_err());
        assert!(to_rgba(&raw[..19], wl_shm::Format::Xrgb8888, 2, 2, 12, false).is_err());
    }
}
