//! The words the guidance window shows a person in place of the wire's: the answer's status as
//! a phrase, the capture time in local date and time to the second, each element's box in
//! pixels of the window on one line, and where a plan stops in plain words.

use local_core::guide::guidance::model::Element;
use time::{OffsetDateTime, UtcOffset, macros::format_description};

/// The answer's `status` as a phrase ("Next step", "Done", "Needs your input").
#[must_use]
pub fn status(status: &str) -> String {
    match status {
        "next_step" => "Next step".to_owned(),
        "completed" => "Done".to_owned(),
        "needs_input" => "Needs your input".to_owned(),
        "clarification" => "Needs a clearer request".to_owned(),
        "blocked" => "Cannot go on from here".to_owned(),
        "completion_candidate" => "Probably done: check that it is".to_owned(),
        // A status a newer API added: its words, without the underscores.
        other => {
            let words = other.replace('_', " ");
            let mut chars = words.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect::<String>()
            })
        }
    }
}

/// The heading of an answer: its status phrase, then its instruction.
#[must_use]
pub fn heading(status_text: &str, instruction: &str) -> String {
    format!("{}: {instruction}", status(status_text))
}

/// `at` in the person's time zone (`offset`), to the second: `2026-03-14 07:58:24`.
#[must_use]
pub fn local_time(at: OffsetDateTime, offset: UtcOffset) -> String {
    at.to_offset(offset)
        .format(format_description!(
            "[year]-[month]-[day] [hour]:[minute]:[second]"
        ))
        .unwrap_or_default()
}

/// The person's UTC offset now, or UTC when the system does not say.
#[must_use]
pub fn local_offset() -> UtcOffset {
    UtcOffset::current_local_offset().unwrap_or(UtcOffset::UTC)
}

/// The review's line about the window: its size, when it was captured, how many elements.
#[must_use]
pub fn window_line(
    width: u32,
    height: u32,
    captured: &str,
    elements: usize,
    complete: bool,
) -> String {
    format!(
        "Window: {width}×{height} px, captured {captured}, {elements} element{}{}",
        if elements == 1 { "" } else { "s" },
        if complete {
            ""
        } else {
            " (the walk was cut short)"
        }
    )
}

/// One element on one line: its role, its label, and its box in pixels of the window
/// (`width`×`height`): `button "View logs" at 12, 80, 80×24 px`. Line breaks in a label become
/// spaces.
#[must_use]
pub fn element_line(element: &Element, width: u32, height: u32) -> String {
    let [x, y, w, h] = element.bounds.to_array();
    let px = |fraction: f64, side: u32| (fraction * f64::from(side)).round() as i64;
    let label: String = element
        .label
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!(
        "{} \"{label}\" at {}, {}, {}×{} px",
        element.role,
        px(x, width),
        px(y, height),
        px(w, width),
        px(h, height)
    )
}

/// Where a plan stops, in plain words: why it stops (its `kind`), the provider's reason, and
/// what is needed when something is.
#[must_use]
pub fn boundary(kind: &str, reason: &str, needed: &str) -> String {
    let why = match kind {
        "completion_candidate" => "After these steps the task may be done",
        "resource" => "The plan stops where another window or page is needed",
        "needs_input" => "The plan stops where your input is needed",
        "permission" => "The plan stops where your permission is needed",
        "observation" => "The plan stops until the window is captured again",
        "unsupported" => "The plan stops where MSGuide cannot guide",
        "plan_limit" => "The plan stops at the most steps one plan holds",
        _ => "The plan stops here",
    };
    let needed = if needed.trim().is_empty() {
        String::new()
    } else {
        format!(" Needed: {}", needed.trim())
    };
    format!("Then: {why}. {}{needed}", reason.trim())
}

#[cfg(test)]
mod tests {
    use local_core::guide::guidance::model::Bounds;
    use time::macros::{datetime, offset};

    use super::*;

    #[test]
    fn statuses_read_as_phrases() {
        for (wire, phrase) in [
            ("next_step", "Next step"),
            ("completed", "Done"),
            ("needs_input", "Needs your input"),
            ("clarification", "Needs a clearer request"),
            ("blocked", "Cannot go on from here"),
            ("completion_candidate", "Probably done: check that it is"),
            ("waiting_for_review", "Waiting for review"),
            ("", ""),
        ] {
            assert_eq!(status(wire), phrase);
        }
        assert_eq!(
            heading(
                "next_step",
                "Demo: select View logs yourself, then check the screen again."
            ),
            "Next step: Demo: select View logs yourself, then check the screen again."
        );
    }

    #[test]
    fn the_capture_time_is_local_to_the_second() {
        let at = datetime!(2026-03-14 06:58:24.999_620_303 UTC);
        assert_eq!(local_time(at, offset!(+1)), "2026-03-14 07:58:24");
        assert_eq!(local_time(at, offset!(-5)), "2026-03-14 01:58:24");
        assert_eq!(local_time(at, UtcOffset::UTC), "2026-03-14 06:58:24");
        assert_eq!(
            window_line(480, 240, "2026-03-14 07:58:24", 2, true),
            "Window: 480×240 px, captured 2026-03-14 07:58:24, 2 elements"
        );
        assert_eq!(
            window_line(480, 240, "2026-03-14 07:58:24", 1, false),
            "Window: 480×240 px, captured 2026-03-14 07:58:24, 1 element (the walk was cut short)"
        );
    }

    fn element(label: &str, bounds: [f64; 4]) -> Element {
        Element {
            role: "button".to_owned(),
            label: label.to_owned(),
            bounds: Bounds {
                x: bounds[0],
                y: bounds[1],
                width: bounds[2],
                height: bounds[3],
            },
            confidence: 0.95,
            ..Element::default()
        }
    }

    #[test]
    fn a_box_is_in_window_pixels_on_one_line() {
        let line = element_line(
            &element("View logs", [0.025, 0.3375, 0.1666, 0.1]),
            480,
            240,
        );
        assert_eq!(line, "button \"View logs\" at 12, 81, 80×24 px");
        let line = element_line(&element("two\nlines", [0.0, 0.0, 1.0, 1.0]), 480, 240);
        assert_eq!(line, "button \"two lines\" at 0, 0, 480×240 px");
        assert!(!line.contains('\n'));
    }

    #[test]
    fn a_plan_boundary_says_why_it_stops_in_plain_words() {
        assert_eq!(
            boundary(
                "completion_candidate",
                "Review the demo's Issue resolved state; goal completion is not independently verified.",
                ""
            ),
            "Then: After these steps the task may be done. Review the demo's Issue resolved state; goal completion is not independently verified."
        );
        assert_eq!(
            boundary(
                "observation",
                "The deterministic demo needs its supported local resource.",
                "Select and approve the MSGuide Demo window."
            ),
            "Then: The plan stops until the window is captured again. The deterministic demo needs its supported local resource. Needed: Select and approve the MSGuide Demo window."
        );
        for kind in [
            "resource",
            "needs_input",
            "permission",
            "unsupported",
            "plan_limit",
            "something_new",
        ] {
            let line = boundary(kind, "Why.", "");
            assert!(!line.contains('_'), "{line}");
            assert!(line.starts_with("Then: The plan stops"), "{line}");
        }
    }
}
