//! The guidance window moved out of the target's way on sway, where a Wayland client cannot
//! place its own window: through sway's IPC, and only while sway floats it (tiled windows never
//! overlap one another). Other Wayland compositors offer no way to do it.

use eframe::egui::{Rect, pos2, vec2};
use local_core::desktop::wayland::sway::{self, LayoutRect};

/// Where this window was before it moved: sway's container and its frame's corner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    con_id: i64,
    home: (i64, i64),
}

/// Moves this program's floating window off `window`, or when there is no room beside it at
/// least off `target` (both in the layout's logical pixels), as [`super::aside`] places it;
/// `None` when it covers neither, is not floating, or this is not sway.
#[must_use]
pub fn aside(window: Rect, target: Rect) -> Option<Moved> {
    let own = sway::windows()
        .ok()?
        .into_iter()
        .find(|w| w.floating && w.pid == Some(std::process::id()))?;
    let output = own.output;
    // `super::aside` works on one monitor from its corner: the output's layout pixels.
    let origin = vec2(output.x as f32, output.y as f32);
    let layout = |r: LayoutRect| {
        Rect::from_min_size(
            pos2(r.x as f32, r.y as f32),
            vec2(r.width as f32, r.height as f32),
        )
    };
    let at = super::aside(
        vec2(output.width as f32, output.height as f32),
        layout(own.frame).translate(-origin),
        window.translate(-origin),
        target.translate(-origin),
    )? + origin;
    sway::move_floating(own.con_id, at.x.round() as i64, at.y.round() as i64).ok()?;
    Some(Moved {
        con_id: own.con_id,
        home: (own.frame.x, own.frame.y),
    })
}

/// Puts the window back where it was before [`aside`] moved it.
pub fn back(moved: Moved) {
    // Gone or no longer floating: there is nothing to put back.
    let _ = sway::move_floating(moved.con_id, moved.home.0, moved.home.1);
}
