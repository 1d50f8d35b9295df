//! The outline around the target on screen: a hollow frame in the outline's colour, always on
//! top, letting every click through, so the target itself stays in sight and in reach.
//!
//! The window system's part sits behind [`Outline`], one backend per window system:
//! [`x11`] on Linux (its own X window, shaped to the frame, watching the person's clicks and
//! the target window), [`viewport`] elsewhere (an egui viewport; on Windows with a window
//! region), [`wayland`] on a Wayland compositor with the wlr layer shell (an overlay surface),
//! picked by [`open`]: Wayland when `WAYLAND_DISPLAY` names a live compositor, X11 otherwise.

use eframe::egui;
use local_core::a11y::ScreenRect;

use crate::problem::Problem;

#[cfg(not(target_os = "linux"))]
pub mod viewport;
#[cfg(target_os = "linux")]
pub mod wayland;
#[cfg(target_os = "linux")]
pub mod x11;

/// The outline window's title (tests and window lists find it by this).
pub const TITLE: &str = "MSGuide outline";
/// The frame's width in pixels; the frame lies just outside the target's box.
pub const FRAME: u32 = 3;
/// The frame's colour, as the original draws it (cyan).
pub const COLOUR: [u8; 3] = [0, 255, 255];

/// What the outline saw of the person's next move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// A mouse button went down inside the target's box: the step is being taken.
    ClickedInside,
    /// The target's window moved, was resized, restacked, retitled, hidden or closed: the
    /// outline may no longer mark the target, so the checks run again at once.
    TargetChanged,
}

/// One window system's outline. At most one frame is shown at a time.
pub trait Outline {
    /// Shows the frame around `target` (screen pixels), the element of the window whose
    /// window-system id is `window`, replacing any frame shown.
    ///
    /// # Errors
    /// The [`Problem`] to show when the frame cannot be drawn.
    fn show(&mut self, target: ScreenRect, window: u32) -> Result<(), Problem>;

    /// Removes the frame, if one is shown.
    fn hide(&mut self);

    /// Whether [`Outline::poll`] reports the person's clicks inside the target
    /// ([`Seen::ClickedInside`]); where it cannot (a Wayland client sees no other client's
    /// input), the guidance window reads the target window's controls again instead.
    fn sees_clicks(&self) -> bool {
        true
    }

    /// Called once per frame of the guidance window: draws what the backend draws with egui,
    /// keeps the frame above other windows, and returns what was seen since the last call.
    fn poll(&mut self, ctx: &egui::Context) -> Vec<Seen>;
}

/// The outline backend for this session's window system.
///
/// # Errors
/// The [`Problem`] to show when the window system cannot draw outlines (no X display).
pub fn open(ctx: &egui::Context) -> Result<Box<dyn Outline>, Problem> {
    #[cfg(target_os = "linux")]
    {
        use local_core::desktop::session::Session;
        if Session::detect() == Session::Wayland {
            return wayland::WaylandOutline::open()
                .map(|outline| Box::new(outline) as Box<dyn Outline>);
        }
        x11::X11Outline::open(ctx).map(|outline| Box::new(outline) as Box<dyn Outline>)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = ctx;
        Ok(Box::new(viewport::ViewportOutline::default()))
    }
}

/// The frame's outer rectangle on screen: the target grown by [`FRAME`] on every side.
#[must_use]
pub fn outer(target: ScreenRect) -> ScreenRect {
    let grow = i32::try_from(FRAME).unwrap_or(0);
    ScreenRect {
        x: target.x.saturating_sub(grow),
        y: target.y.saturating_sub(grow),
        width: target.width.saturating_add(2 * FRAME),
        height: target.height.saturating_add(2 * FRAME),
    }
}

/// The frame's four bars, `[x, y, width, height]` relative to the outer rectangle of
/// `width`×`height`: top, bottom, left, right; the inside (the target) is left out.
#[must_use]
pub fn bars(width: u32, height: u32) -> [[u32; 4]; 4] {
    let side = height.saturating_sub(2 * FRAME);
    [
        [0, 0, width, FRAME],
        [0, height.saturating_sub(FRAME), width, FRAME],
        [0, FRAME, FRAME, side],
        [width.saturating_sub(FRAME), FRAME, FRAME, side],
    ]
}

/// Whether the screen point `(x, y)` lies inside `rect`.
#[must_use]
pub fn contains(rect: ScreenRect, x: i32, y: i32) -> bool {
    let (x, y) = (i64::from(x), i64::from(y));
    let (left, top) = (i64::from(rect.x), i64::from(rect.y));
    (left..left + i64::from(rect.width)).contains(&x)
        && (top..top + i64::from(rect.height)).contains(&y)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: ScreenRect = ScreenRect {
        x: 100,
        y: 50,
        width: 80,
        height: 24,
    };

    #[test]
    fn the_frame_lies_just_outside_the_target() {
        assert_eq!(
            outer(TARGET),
            ScreenRect {
                x: 97,
                y: 47,
                width: 86,
                height: 30
            }
        );
    }

    #[test]
    fn the_bars_cover_the_border_and_leave_the_inside_open() {
        let (w, h) = (86, 30);
        let bars = bars(w, h);
        let covered = |x: u32, y: u32| {
            bars.iter()
                .any(|[bx, by, bw, bh]| (*bx..bx + bw).contains(&x) && (*by..by + bh).contains(&y))
        };
        for y in 0..h {
            for x in 0..w {
                let border = x < FRAME || y < FRAME || x >= w - FRAME || y >= h - FRAME;
                assert_eq!(covered(x, y), border, "({x}, {y})");
            }
        }
        // No pixel is covered twice, so the shape is exactly the frame.
        let area: u32 = bars.iter().map(|[_, _, bw, bh]| bw * bh).sum();
        assert_eq!(area, w * h - (w - 2 * FRAME) * (h - 2 * FRAME));
    }

    #[test]
    fn a_click_counts_inside_the_box_only() {
        assert!(contains(TARGET, 100, 50));
        assert!(contains(TARGET, 179, 73));
        assert!(!contains(TARGET, 180, 60));
        assert!(!contains(TARGET, 99, 60));
        assert!(!contains(TARGET, 120, 74));
    }
}
