//! Where the guidance window goes: at start, the top right corner of the monitor (the demo
//! window opens at the top left, so on a 1280×800 screen and larger neither covers the other);
//! while an outline is shown, beside the target's window, or at least off the target's box.
//! Pure geometry in egui points, so every case is tested without a screen; on sway, [`sway`]
//! moves the window, and on KDE [`kwin`], which egui cannot do on Wayland.

use eframe::egui::{Pos2, Rect, Vec2, pos2};

#[cfg(target_os = "linux")]
pub mod kwin;
#[cfg(target_os = "linux")]
pub mod sway;

/// Space left between the guidance window and what it keeps clear of.
pub const GAP: f32 = 8.0;

/// The guidance window's position at start: the monitor's top right corner.
#[must_use]
pub fn start(monitor: Vec2, outer: Vec2) -> Pos2 {
    pos2((monitor.x - outer.x).max(0.0), 0.0)
}

/// Where the guidance window (`client`, its outer rectangle) goes so that it covers neither
/// the target's window nor, when no place beside the window is on the monitor, the target's
/// box; `None` when it covers neither already, or there is no such place.
#[must_use]
pub fn aside(monitor: Vec2, client: Rect, window: Rect, target: Rect) -> Option<Pos2> {
    let screen = Rect::from_min_size(Pos2::ZERO, monitor);
    for clear_of in [window, target] {
        if !client.intersects(clear_of) {
            return None;
        }
        let size = client.size();
        let clamp_x = |x: f32| x.clamp(0.0, (monitor.x - size.x).max(0.0));
        let clamp_y = |y: f32| y.clamp(0.0, (monitor.y - size.y).max(0.0));
        let candidates = [
            pos2(clear_of.max.x + GAP, clamp_y(client.min.y)),
            pos2(clear_of.min.x - GAP - size.x, clamp_y(client.min.y)),
            pos2(clamp_x(client.min.x), clear_of.max.y + GAP),
            pos2(clamp_x(client.min.x), clear_of.min.y - GAP - size.y),
        ];
        let nearest = candidates
            .into_iter()
            .filter(|at| {
                let moved = Rect::from_min_size(*at, size);
                screen.contains_rect(moved) && !moved.intersects(clear_of)
            })
            .min_by(|a, b| {
                let distance = |p: &Pos2| p.distance_sq(client.min);
                distance(a).total_cmp(&distance(b))
            });
        if nearest.is_some() {
            return nearest;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use eframe::egui::vec2;

    use super::*;

    /// The demo window as it opens (480×240 inside, with openbox's frame), the guidance window
    /// (640×720 inside).
    const DEMO: Vec2 = vec2(482.0, 262.0);
    const CLIENT: Vec2 = vec2(642.0, 742.0);

    #[test]
    fn at_start_neither_window_covers_the_other_on_1280_by_800_and_larger() {
        for monitor in [
            vec2(1280.0, 800.0),
            vec2(1920.0, 1080.0),
            vec2(2560.0, 1440.0),
        ] {
            let client = Rect::from_min_size(start(monitor, CLIENT), CLIENT);
            let demo = Rect::from_min_size(Pos2::ZERO, DEMO);
            assert!(!client.intersects(demo), "{monitor:?}: {client:?}");
            assert!(
                Rect::from_min_size(Pos2::ZERO, monitor).contains_rect(client),
                "{monitor:?}: {client:?} is off the screen"
            );
        }
    }

    #[test]
    fn the_client_moves_beside_the_window_it_covers() {
        let monitor = vec2(1280.0, 800.0);
        let client = Rect::from_min_size(pos2(100.0, 40.0), CLIENT);
        let window = Rect::from_min_size(pos2(0.0, 0.0), DEMO);
        let target = Rect::from_min_size(pos2(12.0, 80.0), vec2(80.0, 24.0));
        let at = aside(monitor, client, window, target).unwrap();
        let moved = Rect::from_min_size(at, CLIENT);
        assert!(!moved.intersects(window), "{moved:?}");
        // The nearest free place: right of the window, at the same height.
        assert_eq!(at, pos2(DEMO.x + GAP, 40.0));
    }

    #[test]
    fn with_no_room_beside_the_window_it_keeps_off_the_box() {
        let monitor = vec2(1280.0, 800.0);
        let client = Rect::from_min_size(pos2(0.0, 0.0), CLIENT);
        // A window that fills the screen: nothing beside it.
        let window = Rect::from_min_size(Pos2::ZERO, monitor);
        let target = Rect::from_min_size(pos2(100.0, 100.0), vec2(80.0, 24.0));
        let at = aside(monitor, client, window, target).unwrap();
        let moved = Rect::from_min_size(at, CLIENT);
        assert!(!moved.intersects(target), "{moved:?}");
        assert!(Rect::from_min_size(Pos2::ZERO, monitor).contains_rect(moved));
    }

    #[test]
    fn a_client_already_clear_stays() {
        let monitor = vec2(1920.0, 1080.0);
        let client = Rect::from_min_size(pos2(1200.0, 0.0), CLIENT);
        let window = Rect::from_min_size(Pos2::ZERO, DEMO);
        assert_eq!(aside(monitor, client, window, window), None);
        // Over the window but off the box, with no room beside the window: it stays.
        let window = Rect::from_min_size(Pos2::ZERO, monitor);
        let target = Rect::from_min_size(pos2(10.0, 10.0), vec2(50.0, 20.0));
        assert_eq!(aside(monitor, client, window, target), None);
    }
}
