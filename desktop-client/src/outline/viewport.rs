//! The outline where there is no X server: a borderless, always-on-top egui viewport that lets
//! clicks through, with the frame painted on a transparent background. On Windows its window
//! region is set to the frame alone (`SetWindowRgn`), so the target shows through even where
//! the window cannot be transparent, and the pointer is polled while the frame is shown so a
//! press inside the target's box is seen.

use std::time::Duration;

use eframe::egui::{self, Color32, Stroke, StrokeKind, ViewportBuilder, ViewportId};
use local_core::a11y::ScreenRect;

use super::{COLOUR, FRAME, Outline, Seen, TITLE, outer};
use crate::problem::Problem;

/// How often the pointer is looked at while a frame is shown: shorter than a click lasts.
const POINTER_POLL: Duration = Duration::from_millis(30);

/// The egui outline: the frame to draw, if any.
#[derive(Debug, Default)]
pub struct ViewportOutline {
    shown: Option<ScreenRect>,
    /// The window region has been set for the frame shown.
    shaped: bool,
    /// The left button was down at the last poll.
    pressed: bool,
}

impl Outline for ViewportOutline {
    fn show(&mut self, target: ScreenRect, _window: u32) -> Result<(), Problem> {
        self.shown = Some(target);
        self.shaped = false;
        Ok(())
    }

    fn hide(&mut self) {
        self.shown = None;
    }

    fn poll(&mut self, ctx: &egui::Context) -> Vec<Seen> {
        let Some(target) = self.shown else {
            return Vec::new();
        };
        let frame = outer(target);
        let points = ctx.pixels_per_point();
        let builder = ViewportBuilder::default()
            .with_title(TITLE)
            .with_decorations(false)
            .with_transparent(true)
            .with_always_on_top()
            .with_mouse_passthrough(true)
            .with_taskbar(false)
            .with_active(false)
            .with_resizable(false)
            .with_position([frame.x as f32 / points, frame.y as f32 / points])
            .with_inner_size([frame.width as f32 / points, frame.height as f32 / points]);
        let [r, g, b] = COLOUR;
        let stroke = Stroke::new(FRAME as f32 / points, Color32::from_rgb(r, g, b));
        ctx.show_viewport_immediate(ViewportId::from_hash_of(TITLE), builder, |ui, _| {
            ui.painter()
                .rect_stroke(ui.max_rect(), 0.0, stroke, StrokeKind::Inside);
        });
        ctx.request_repaint_after(POINTER_POLL);
        let mut seen = Vec::new();
        #[cfg(windows)]
        {
            if !self.shaped {
                self.shaped = windows::hollow(frame.width, frame.height);
            }
            let down = winsafe::GetAsyncKeyState(winsafe::co::VK::LBUTTON);
            if down
                && !self.pressed
                && let Ok(at) = winsafe::GetCursorPos()
                && super::contains(target, at.x, at.y)
            {
                seen.push(Seen::ClickedInside);
            }
            self.pressed = down;
        }
        seen
    }
}

#[cfg(windows)]
mod windows {
    //! The window region of the outline's viewport.

    use winsafe::{self as w, co};

    use super::{FRAME, TITLE};

    /// Sets the region of this process's outline window to the frame of a `width`×`height`
    /// window; false while the window is not there yet (it appears after the first frame).
    pub(super) fn hollow(width: u32, height: u32) -> bool {
        let pid = std::process::id();
        let mut found = None;
        // Stopping the walk early makes EnumWindows report a failure; `found` says the truth.
        let _ = w::EnumWindows(|hwnd: w::HWND| {
            let ours = hwnd.GetWindowThreadProcessId().1 == pid
                && hwnd.GetWindowText().is_ok_and(|text| text == TITLE);
            if ours {
                found = Some(hwnd);
            }
            !ours
        });
        let Some(hwnd) = found else { return false };
        let side = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        let frame = side(FRAME);
        let (width, height) = (side(width), side(height));
        let region = (|| {
            let outside = w::HRGN::CreateRectRgn(w::RECT {
                left: 0,
                top: 0,
                right: width,
                bottom: height,
            })?;
            let inside = w::HRGN::CreateRectRgn(w::RECT {
                left: frame,
                top: frame,
                right: width - frame,
                bottom: height - frame,
            })?;
            outside.CombineRgn(&outside, &inside, co::RGN::DIFF)?;
            hwnd.SetWindowRgn(&outside, true)?;
            // The system owns a region once it is the window's: it must not be deleted here.
            let mut outside = outside;
            let _ = outside.leak();
            w::SysResult::Ok(())
        })();
        region.is_ok()
    }
}
