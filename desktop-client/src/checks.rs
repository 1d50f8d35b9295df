//! The checks made before an outline is drawn: the answer is about this capture, the capture
//! is fresh, the window is where it was, and the target is exactly one captured element.
//! Pure functions of their inputs, so every refusal is tested without a screen.

use local_core::{
    a11y::ScreenRect,
    guide::guidance::model::Element,
    guide::observe::{WindowInfo, WindowObservation, on_screen},
    limits::{MAX_OBSERVATION_AGE, MIN_TARGET_CONFIDENCE},
};
use time::OffsetDateTime;

use crate::wire::{GuidanceIn, TargetIn};

/// How far a target's box may differ from the captured element's, per coordinate.
pub const BOX_TOLERANCE: f64 = 1e-6;

/// Why nothing is drawn.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DrawRefusal {
    #[error("the answer is about another capture: capture again and send")]
    OtherObservation,
    #[error("the answer is about another window: capture again and send")]
    OtherWindow,
    #[error("the answer names no control to outline: follow its instruction")]
    NoTarget,
    #[error("the capture is {0} s old (limit 60 s): capture again")]
    Stale(i64),
    #[error("the window is gone: open it again, then capture again")]
    WindowGone,
    #[error("the window moved or was resized since the capture: capture again")]
    WindowMoved,
    #[error("the window's title changed since the capture: capture again")]
    WindowChanged,
    #[error(
        "the target matches {0} captured elements, not exactly one: capture again, or follow the instruction by hand"
    )]
    NotExactlyOne(usize),
}

/// The screen rectangle to outline, when every check passes.
///
/// `window_now` is the same window looked up again just before drawing (`None` if it closed).
///
/// # Errors
/// The first [`DrawRefusal`] met, in the order the checks are listed.
pub fn check_before_drawing(
    capture: &WindowObservation,
    answer: &GuidanceIn,
    window_now: Option<&WindowInfo>,
    now: OffsetDateTime,
) -> Result<ScreenRect, DrawRefusal> {
    let observation = &capture.observation;
    if answer.observation_id != observation.id {
        return Err(DrawRefusal::OtherObservation);
    }
    if answer.window_id != observation.window_id {
        return Err(DrawRefusal::OtherWindow);
    }
    let (Some(target), "next_step") = (&answer.target, answer.status.as_str()) else {
        return Err(DrawRefusal::NoTarget);
    };
    let age = now - observation.captured_at;
    if age.is_negative() || age >= MAX_OBSERVATION_AGE {
        return Err(DrawRefusal::Stale(age.whole_seconds()));
    }
    let window = window_now.ok_or(DrawRefusal::WindowGone)?;
    if window.id != capture.window.id {
        return Err(DrawRefusal::WindowGone);
    }
    if window.bounds != capture.window.bounds {
        return Err(DrawRefusal::WindowMoved);
    }
    if window.title != capture.window.title {
        return Err(DrawRefusal::WindowChanged);
    }
    let matches = observation
        .elements
        .iter()
        .filter(|e| matches_target(e, target))
        .collect::<Vec<_>>();
    match matches.as_slice() {
        [element] => Ok(on_screen(element.bounds, window.bounds)),
        other => Err(DrawRefusal::NotExactlyOne(other.len())),
    }
}

/// Whether `element` is the one `target` names: same label, same box within
/// [`BOX_TOLERANCE`], a confidence at least the target's and at least 0.8, and not disabled,
/// offscreen or a password field.
fn matches_target(element: &Element, target: &TargetIn) -> bool {
    let same_box = element
        .bounds
        .to_array()
        .iter()
        .zip(target.bounds)
        .all(|(a, b)| (a - b).abs() <= BOX_TOLERANCE);
    element.label == target.label
        && same_box
        && (MIN_TARGET_CONFIDENCE..=1.0).contains(&target.confidence)
        && element.confidence >= target.confidence
        && element.is_enabled != Some(false)
        && element.is_offscreen != Some(true)
        && element.is_password != Some(true)
}

#[cfg(test)]
mod tests {
    use local_core::guide::guidance::model::{Bounds, Observation};

    use super::*;

    const WINDOW: ScreenRect = ScreenRect {
        x: 100,
        y: 50,
        width: 400,
        height: 200,
    };

    fn button(label: &str, x: f64) -> Element {
        Element {
            role: "button".to_owned(),
            label: label.to_owned(),
            bounds: Bounds {
                x,
                y: 0.5,
                width: 0.25,
                height: 0.25,
            },
            confidence: 0.95,
            is_enabled: Some(true),
            is_offscreen: Some(false),
            ..Element::default()
        }
    }

    fn window() -> WindowInfo {
        WindowInfo {
            id: 7,
            pid: Some(1),
            title: "MSGuide Demo".to_owned(),
            bounds: WINDOW,
            minimized: false,
        }
    }

    fn capture(at: OffsetDateTime, elements: Vec<Element>) -> WindowObservation {
        WindowObservation {
            window: window(),
            observation: Observation {
                id: "obs".to_owned(),
                window_id: "window-7".to_owned(),
                application: "MSGuide Demo".to_owned(),
                captured_at: at,
                width: 400,
                height: 200,
                ocr_text: String::new(),
                elements,
                image: None,
                automation_complete: true,
                resource_id: None,
            },
        }
    }

    fn answer(label: &str, x: f64) -> GuidanceIn {
        GuidanceIn {
            instruction: "Demo: select it".to_owned(),
            status: "next_step".to_owned(),
            target: Some(TargetIn {
                label: label.to_owned(),
                bounds: [x, 0.5, 0.25, 0.25],
                confidence: 0.95,
                is_enabled: Some(true),
                is_offscreen: Some(false),
            }),
            mode: "demo".to_owned(),
            correlation_id: "c".to_owned(),
            observation_id: "obs".to_owned(),
            window_id: "window-7".to_owned(),
            remaining_work: None,
        }
    }

    fn now() -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    #[test]
    fn a_fresh_matching_answer_is_drawn_at_the_elements_screen_position() {
        let c = capture(now(), vec![button("View logs", 0.5), button("Other", 0.0)]);
        let rect = check_before_drawing(&c, &answer("View logs", 0.5), Some(&window()), now());
        assert_eq!(
            rect,
            Ok(ScreenRect {
                x: 300,
                y: 150,
                width: 100,
                height: 50
            })
        );
    }

    #[test]
    fn a_capture_60_seconds_old_is_not_drawn_and_59_is() {
        let t = now();
        let c = |age: i64| {
            capture(
                t - time::Duration::seconds(age),
                vec![button("View logs", 0.5)],
            )
        };
        let a = answer("View logs", 0.5);
        assert!(check_before_drawing(&c(59), &a, Some(&window()), t).is_ok());
        assert_eq!(
            check_before_drawing(&c(60), &a, Some(&window()), t),
            Err(DrawRefusal::Stale(60))
        );
        assert_eq!(
            check_before_drawing(&c(-1), &a, Some(&window()), t),
            Err(DrawRefusal::Stale(-1))
        );
    }

    #[test]
    fn an_answer_about_another_capture_or_window_is_not_drawn() {
        let c = capture(now(), vec![button("View logs", 0.5)]);
        let mut other = answer("View logs", 0.5);
        other.observation_id = "old".to_owned();
        assert_eq!(
            check_before_drawing(&c, &other, Some(&window()), now()),
            Err(DrawRefusal::OtherObservation)
        );
        let mut other = answer("View logs", 0.5);
        other.window_id = "window-8".to_owned();
        assert_eq!(
            check_before_drawing(&c, &other, Some(&window()), now()),
            Err(DrawRefusal::OtherWindow)
        );
        let mut done = answer("View logs", 0.5);
        done.status = "completed".to_owned();
        assert_eq!(
            check_before_drawing(&c, &done, Some(&window()), now()),
            Err(DrawRefusal::NoTarget)
        );
    }

    #[test]
    fn a_window_that_moved_changed_or_closed_is_not_drawn_on() {
        let c = capture(now(), vec![button("View logs", 0.5)]);
        let a = answer("View logs", 0.5);
        let mut moved = window();
        moved.bounds.x += 1;
        assert_eq!(
            check_before_drawing(&c, &a, Some(&moved), now()),
            Err(DrawRefusal::WindowMoved)
        );
        let mut renamed = window();
        renamed.title = "Other".to_owned();
        assert_eq!(
            check_before_drawing(&c, &a, Some(&renamed), now()),
            Err(DrawRefusal::WindowChanged)
        );
        let mut replaced = window();
        replaced.id = 8;
        assert_eq!(
            check_before_drawing(&c, &a, Some(&replaced), now()),
            Err(DrawRefusal::WindowGone)
        );
        assert_eq!(
            check_before_drawing(&c, &a, None, now()),
            Err(DrawRefusal::WindowGone)
        );
    }

    #[test]
    fn the_target_must_match_exactly_one_element() {
        let twice = capture(
            now(),
            vec![button("View logs", 0.5), button("View logs", 0.5)],
        );
        assert_eq!(
            check_before_drawing(&twice, &answer("View logs", 0.5), Some(&window()), now()),
            Err(DrawRefusal::NotExactlyOne(2))
        );
        let c = capture(now(), vec![button("View logs", 0.5)]);
        for wrong in [answer("View log", 0.5), answer("View logs", 0.500_01)] {
            assert_eq!(
                check_before_drawing(&c, &wrong, Some(&window()), now()),
                Err(DrawRefusal::NotExactlyOne(0))
            );
        }
        // Within the tolerance is the same box.
        assert!(
            check_before_drawing(
                &c,
                &answer("View logs", 0.500_000_5),
                Some(&window()),
                now()
            )
            .is_ok()
        );
        let mut disabled = button("View logs", 0.5);
        disabled.is_enabled = Some(false);
        let c = capture(now(), vec![disabled]);
        assert_eq!(
            check_before_drawing(&c, &answer("View logs", 0.5), Some(&window()), now()),
            Err(DrawRefusal::NotExactlyOne(0))
        );
        let mut overconfident = answer("View logs", 0.5);
        if let Some(t) = overconfident.target.as_mut() {
            t.confidence = 0.99;
        }
        let c = capture(now(), vec![button("View logs", 0.5)]);
        assert_eq!(
            check_before_drawing(&c, &overconfident, Some(&window()), now()),
            Err(DrawRefusal::NotExactlyOne(0))
        );
    }
}
