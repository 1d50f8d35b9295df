//! The checks made before an outline is drawn: the answer is about this capture, the capture
//! is fresh, the window is where it was, and the target is exactly one captured element.
//! Pure functions of their inputs, so every refusal is tested without a screen.

use local_core::{
    a11y::ScreenRect,
    guide::guidance::model::{Element, Observation},
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

/// The rectangle to outline, when every check passes: on screen, or on the capture for a
/// window the compositor does not place ([`WindowObservation::area`]).
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
        [element] => Ok(on_screen(element.bounds, capture.area())),
        other => Err(DrawRefusal::NotExactlyOne(other.len())),
    }
}

/// Whether the target of `answer` is still exactly one element of `now`, a fresh capture of
/// the same window: where the outline cannot see the person's clicks (Wayland), a target that
/// changed or went away means the step was most likely taken.
#[must_use]
pub fn target_still_there(answer: &GuidanceIn, now: &Observation) -> bool {
    answer.target.as_ref().is_some_and(|target| {
        now.elements
            .iter()
            .filter(|e| matches_target(e, target))
            .count()
            == 1
    })
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
mod tests;
