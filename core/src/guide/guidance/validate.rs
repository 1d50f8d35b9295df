//! Re-validation of a provider's result, the route's check that a target is one observed
//! element, and the rule that an observation's element ids are unique.

use std::collections::HashSet;

use super::{
    model::{Element, GuidanceResult, GuidanceStatus, Observation, Target, UiAction},
    plan::segment_is_valid,
};
use crate::limits::{
    MAX_CITATION_SOURCE_CHARS, MAX_CITATIONS, MAX_INPUT_VALUE_CHARS, MAX_INSTRUCTION_CHARS,
    MAX_LABEL_CHARS, MAX_REMAINING_WORK_CHARS, MIN_TARGET_CONFIDENCE,
};

fn chars_within(text: &str, min: usize, max: usize) -> bool {
    let n = text.chars().count();
    (min..=max).contains(&n)
}

/// A SHA-256 digest in lower-case hex, the only shape a value hash may have.
#[must_use]
pub fn is_value_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// 1–128 characters of letters, digits, `_`, `.`, `:` or `-`: the reference's Identifier.
#[must_use]
pub fn is_identifier(text: &str) -> bool {
    (1..=crate::limits::MAX_IDENTIFIER_CHARS).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

/// A value a step may type: at most 1000 characters, no control characters but CR, LF and TAB.
#[must_use]
pub fn value_is_typeable(value: &str) -> bool {
    value.chars().count() <= MAX_INPUT_VALUE_CHARS
        && !value
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\r' | '\n' | '\t'))
}

/// The guidance result contract: what any provider must return before the route looks further.
#[must_use]
pub fn result_is_valid(result: &GuidanceResult) -> bool {
    let instruction_ok = chars_within(&result.instruction, 1, MAX_INSTRUCTION_CHARS);
    let target_ok = match &result.target {
        None => true,
        Some(target) => result.status == GuidanceStatus::NextStep && target_is_valid(target),
    };
    let citations_ok = result.citations.len() <= MAX_CITATIONS
        && result.citations.iter().all(|c| {
            c.source.starts_with("https://")
                && c.source.chars().count() <= MAX_CITATION_SOURCE_CHARS
                && chars_within(&c.title, 1, MAX_LABEL_CHARS)
        });
    let remaining_ok = result
        .remaining_work
        .as_deref()
        .is_none_or(|w| w.chars().count() <= MAX_REMAINING_WORK_CHARS);
    // A plan stands in for a target: only a next step carries one, and never beside a target.
    let plan_ok = result.plan.as_ref().is_none_or(|plan| {
        result.status == GuidanceStatus::NextStep
            && result.target.is_none()
            && segment_is_valid(plan)
    });
    instruction_ok && target_ok && citations_ok && remaining_ok && plan_ok
}

fn target_is_valid(target: &Target) -> bool {
    let non_empty = |v: &Option<String>| v.as_deref().is_none_or(|s| !s.is_empty());
    let value_ok = target.value.as_deref().is_none_or(value_is_typeable);
    let is_set_value = target.action == Some(UiAction::SetValue);
    let is_scroll = target.action == Some(UiAction::Scroll);
    chars_within(&target.label, 1, MAX_LABEL_CHARS)
        && target.bounds.is_inside_unit_square()
        && target.confidence.is_finite()
        && (MIN_TARGET_CONFIDENCE..=1.0).contains(&target.confidence)
        && target.process_id.is_none_or(|p| p >= 1)
        && non_empty(&target.automation_id)
        && non_empty(&target.framework_id)
        && value_ok
        && target.value.is_some() == is_set_value
        && target.scroll_direction.is_some() == is_scroll
        && (!is_set_value || target.value_hash.is_some())
        && target.value_hash.as_deref().is_none_or(is_value_hash)
}

/// The route's rule: the target must be exactly one observed element and match it fully.
#[must_use]
pub fn target_matches_observation(target: &Target, observation: &Observation) -> bool {
    let mut candidates = observation
        .elements
        .iter()
        .filter(|element| match &target.target_id {
            Some(id) => element.target_id.as_ref() == Some(id),
            None => element.label == target.label && element.bounds == target.bounds,
        });
    let (Some(element), None) = (candidates.next(), candidates.next()) else {
        return false;
    };
    fn agrees<T: PartialEq>(wanted: Option<&T>, actual: Option<&T>) -> bool {
        wanted.is_none_or(|w| actual == Some(w))
    }
    element.label == target.label
        && element.bounds == target.bounds
        && element.confidence >= target.confidence
        && agrees(target.process_id.as_ref(), element.process_id.as_ref())
        && agrees(
            target.automation_id.as_ref(),
            element.automation_id.as_ref(),
        )
        && agrees(target.framework_id.as_ref(), element.framework_id.as_ref())
        && agrees(target.control_id.as_ref(), element.control_id.as_ref())
        && agrees(target.is_selected.as_ref(), element.is_selected.as_ref())
        && agrees(target.is_enabled.as_ref(), element.is_enabled.as_ref())
        && agrees(target.is_offscreen.as_ref(), element.is_offscreen.as_ref())
        && agrees(target.toggle_state.as_ref(), element.toggle_state.as_ref())
        && target.action == element.action
        && target.value_hash == element.value_hash
        && (target.action.is_none() || (observation.automation_complete && element.is_executable()))
        && target
            .scroll_direction
            .is_none_or(|d| element.scroll_directions.contains(&d))
}

/// The observation's rule: no two elements share a non-null `targetId`, and no two a
/// non-null `controlId` (a target names exactly one element by either).
#[must_use]
pub fn element_ids_are_unique(elements: &[Element]) -> bool {
    let unique = |id: fn(&Element) -> Option<&String>| {
        let mut seen = HashSet::new();
        elements.iter().filter_map(id).all(|id| seen.insert(id))
    };
    unique(|e| e.target_id.as_ref()) && unique(|e| e.control_id.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guide::guidance::model::{Bounds, Element, Mode};

    fn element(label: &str) -> Element {
        Element {
            role: "button".to_owned(),
            label: label.to_owned(),
            bounds: Bounds {
                x: 0.1,
                y: 0.1,
                width: 0.2,
                height: 0.1,
            },
            confidence: 0.95,
            ..Element::default()
        }
    }

    fn observation(elements: Vec<Element>) -> Observation {
        Observation {
            id: "obs".to_owned(),
            window_id: "win".to_owned(),
            application: "MSGuide Demo".to_owned(),
            captured_at: time::OffsetDateTime::now_utc(),
            width: 100,
            height: 100,
            ocr_text: String::new(),
            elements,
            image: None,
            automation_complete: true,
            resource_id: None,
        }
    }

    fn next_step(target: Target) -> GuidanceResult {
        GuidanceResult {
            instruction: "Do it".to_owned(),
            status: GuidanceStatus::NextStep,
            target: Some(target),
            citations: vec![],
            mode: Mode::Demo,
            remaining_work: None,
            plan: None,
        }
    }

    #[test]
    fn target_must_be_exactly_one_full_match() {
        let obs = observation(vec![element("View logs")]);
        let target = Target::from_element(&obs.elements[0]);
        assert!(target_matches_observation(&target, &obs));

        let invented = Target {
            label: "Format disk".to_owned(),
            ..target.clone()
        };
        assert!(!target_matches_observation(&invented, &obs));

        let dup = observation(vec![element("View logs"), element("View logs")]);
        assert!(!target_matches_observation(&target, &dup));

        let overconfident = Target {
            confidence: 0.99,
            ..target.clone()
        };
        assert!(!target_matches_observation(&overconfident, &obs));

        let acting = Target {
            action: Some(UiAction::Invoke),
            ..target
        };
        let mut obs_acting = obs;
        obs_acting.elements[0].action = Some(UiAction::Invoke);
        assert!(
            !target_matches_observation(&acting, &obs_acting),
            "not executable without targetId etc."
        );
    }

    #[test]
    fn executable_element_passes_with_action() {
        let mut el = element("Run");
        el.action = Some(UiAction::Invoke);
        el.target_id = Some("t1".to_owned());
        el.is_enabled = Some(true);
        el.is_offscreen = Some(false);
        el.targetable = Some(true);
        let obs = observation(vec![el]);
        assert!(target_matches_observation(
            &Target::from_element(&obs.elements[0]),
            &obs
        ));
        let mut incomplete = obs;
        incomplete.automation_complete = false;
        assert!(!target_matches_observation(
            &Target::from_element(&incomplete.elements[0]),
            &incomplete
        ));
    }

    #[test]
    fn result_contract() {
        let target = Target::from_element(&element("View logs"));
        assert!(result_is_valid(&next_step(target.clone())));
        assert!(!result_is_valid(&next_step(Target {
            confidence: 0.79,
            ..target.clone()
        })));
        assert!(!result_is_valid(&next_step(Target {
            automation_id: Some(String::new()),
            ..target.clone()
        })));
        let mut clarification = next_step(target.clone());
        clarification.status = GuidanceStatus::Clarification;
        assert!(
            !result_is_valid(&clarification),
            "only next_step may carry a target"
        );
        let mut empty = next_step(target.clone());
        empty.instruction.clear();
        assert!(!result_is_valid(&empty));
        let set_value_without_hash = Target {
            action: Some(UiAction::SetValue),
            value: Some("x".to_owned()),
            ..target
        };
        assert!(!result_is_valid(&next_step(set_value_without_hash)));
    }

    #[test]
    fn a_plan_needs_next_step_and_no_target() {
        use crate::guide::guidance::model::{BoundaryKind, PlanBoundary, PlanSegment};
        let plan = PlanSegment {
            plan_id: "0b8e6f0e-4c1a-4f3e-9a57-2d9c7e1f3a10".to_owned(),
            window_id: "win".to_owned(),
            resource_id: None,
            steps: vec![],
            boundary: PlanBoundary {
                kind: BoundaryKind::Observation,
                reason: "Look again.".to_owned(),
                needed: "A fresh observation.".to_owned(),
            },
        };
        let mut planned = next_step(Target::from_element(&element("View logs")));
        planned.plan = Some(plan.clone());
        assert!(!result_is_valid(&planned), "a plan beside a target");
        planned.target = None;
        assert!(result_is_valid(&planned));
        for status in [
            GuidanceStatus::Clarification,
            GuidanceStatus::Completed,
            GuidanceStatus::Blocked,
            GuidanceStatus::NeedsInput,
            GuidanceStatus::CompletionCandidate,
        ] {
            planned.status = status;
            assert!(!result_is_valid(&planned), "{status:?}");
        }
        planned.status = GuidanceStatus::NextStep;
        planned.plan = Some(PlanSegment {
            plan_id: "not-a-uuid".to_owned(),
            ..plan
        });
        assert!(!result_is_valid(&planned), "the segment's own rules apply");
    }
}
