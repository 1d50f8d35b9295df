//! The guidance window moved out of the target's way on KDE, where a Wayland client cannot
//! place its own window: KWin moves it, through its scripting interface on the session bus.

use eframe::egui::{Rect, pos2, vec2};
use local_core::desktop::portal::kwin;

/// Where this window's frame was before it moved, in KWin's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    home: (i64, i64),
}

/// Moves this program's window off `window`, or when there is no room beside it at least off
/// `target` (both in KWin's logical pixels), as [`super::aside`] places it; `None` when it
/// covers neither or KWin is not there.
#[must_use]
pub fn aside(window: Rect, target: Rect) -> Option<Moved> {
    let (frame, output) = kwin::frame_of(std::process::id()).ok()??;
    let rect = |r: local_core::desktop::Rect| {
        Rect::from_min_size(
            pos2(r.x as f32, r.y as f32),
            vec2(r.width as f32, r.height as f32),
        )
    };
    // `super::aside` works on one monitor from its corner: the output's layout pixels.
    let origin = rect(output).min.to_vec2();
    let at = super::aside(
        rect(output).size(),
        rect(frame).translate(-origin),
        window.translate(-origin),
        target.translate(-origin),
    )? + origin;
    kwin::move_frame(std::process::id(), at.x.round() as i64, at.y.round() as i64).ok()?;
    Some(Moved {
        home: (frame.x, frame.y),
    })
}

/// Puts the window back where it was before [`aside`] moved it.
pub fn back(moved: Moved) {
    // Closed meanwhile: there is nothing to put back.
    let _ = kwin::move_frame(std::process::id(), moved.home.0, moved.home.1);
}
