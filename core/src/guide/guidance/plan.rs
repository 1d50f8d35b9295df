//! The rules of task context and plan segments: what a task a client reports must keep, what
//! any plan segment must keep, and how a plan is bound to the observation it was made on.
//!
//! A request's task is refused (422) when it breaks a rule here; a provider's plan that breaks
//! one is an invalid result (502) and never reaches the client.

use super::{
    model::{
        BoundaryKind, Element, Observation, PlanIntent, PlanSegment, PlanStep, PlanStepKind,
        TaskProgress, ToggleState, UiAction,
    },
    validate::{is_identifier, is_value_hash, value_is_typeable},
};
use crate::limits::{
    MAX_BOUNDARY_NEEDED_CHARS, MAX_HELP_TEXT_CHARS, MAX_LABEL_CHARS, MAX_PLAN_STEPS,
    MAX_PLAN_TEXT_CHARS, MAX_ROLE_CHARS, MAX_TASK_HISTORY, MAX_TASK_STEP,
};

/// The SHA-256 of the empty string: a `set_value` step not bound to an element writes into an
/// empty field, so it must have been planned against this hash.
pub const EMPTY_VALUE_HASH: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Why a reported task was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TaskRefusal {
    /// A step number is out of range, or the history is too long, not strictly increasing or
    /// not entirely below the task's step.
    #[error("task history steps must increase strictly and stay below the task's step")]
    History,
    /// `planCursor` is past the plan's last step (or not 0 without a plan).
    #[error("the plan cursor must be at most the number of plan steps")]
    PlanCursor,
    /// The task's plan breaks a plan segment rule.
    #[error("the task's plan breaks a plan segment rule")]
    Plan,
}

/// A lower-case hyphenated UUID (`8-4-4-4-12` hex): the shape of task and plan ids.
#[must_use]
pub fn is_task_id(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => matches!(b, b'0'..=b'9' | b'a'..=b'f'),
        })
}

fn text_within(text: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&text.chars().count())
}

fn not_blank(text: &str) -> bool {
    !text.trim().is_empty()
}

/// The cross-field rules of a reported task: step numbers, history order, the plan cursor, and
/// the rules of the plan it carries.
///
/// # Errors
/// The first [`TaskRefusal`] the task earns.
pub fn check_task(task: &TaskProgress) -> Result<(), TaskRefusal> {
    let in_range = |step: u32| (1..=MAX_TASK_STEP).contains(&step);
    let history_ok = in_range(task.step)
        && task.history.len() <= MAX_TASK_HISTORY
        && task
            .history
            .iter()
            .all(|h| in_range(h.step) && h.step < task.step)
        && task.history.windows(2).all(|w| w[0].step < w[1].step);
    if !history_ok {
        return Err(TaskRefusal::History);
    }
    let steps = task.plan.as_ref().map_or(0, |p| p.steps.len());
    if !usize::try_from(task.plan_cursor).is_ok_and(|cursor| cursor <= steps) {
        return Err(TaskRefusal::PlanCursor);
    }
    if task.plan.as_ref().is_some_and(|p| !segment_is_valid(p)) {
        return Err(TaskRefusal::Plan);
    }
    Ok(())
}

/// The plan segment contract, whoever wrote the plan: ids, at most 32 valid steps, a manual
/// step only last, and a boundary that fits the steps.
#[must_use]
pub fn segment_is_valid(plan: &PlanSegment) -> bool {
    let boundary = &plan.boundary;
    let completion = boundary.kind == BoundaryKind::CompletionCandidate;
    let boundary_ok = text_within(&boundary.reason, 1, MAX_PLAN_TEXT_CHARS)
        && not_blank(&boundary.reason)
        && text_within(&boundary.needed, 0, MAX_BOUNDARY_NEEDED_CHARS)
        && (completion || not_blank(&boundary.needed));
    let steps = &plan.steps;
    let manual_only_last = steps
        .iter()
        .rev()
        .skip(1)
        .all(|s| s.kind == PlanStepKind::Action);
    let ends_manual = steps.last().is_some_and(|s| s.kind == PlanStepKind::Manual);
    is_task_id(&plan.plan_id)
        && is_identifier(&plan.window_id)
        && plan.resource_id.as_deref().is_none_or(is_identifier)
        && steps.len() <= MAX_PLAN_STEPS
        && boundary_ok
        && !(steps.len() == MAX_PLAN_STEPS && completion)
        && manual_only_last
        && !(ends_manual && completion)
        && steps.iter().all(step_is_valid)
}

fn step_is_valid(step: &PlanStep) -> bool {
    let instruction_ok =
        text_within(&step.instruction, 1, MAX_PLAN_TEXT_CHARS) && not_blank(&step.instruction);
    instruction_ok
        && match step.kind {
            PlanStepKind::Manual => {
                step.intent.is_none()
                    && step.control_id.is_none()
                    && step.value.is_none()
                    && step.scroll_direction.is_none()
                    && step.value_hash.is_none()
            }
            PlanStepKind::Action => step.intent.as_ref().is_some_and(|intent| {
                let set_value = intent.action == UiAction::SetValue;
                let scroll = intent.action == UiAction::Scroll;
                intent_is_valid(intent)
                    && step.control_id.as_deref().is_none_or(is_identifier)
                    && step.value.is_some() == set_value
                    && step.value_hash.is_some() == set_value
                    && step.scroll_direction.is_some() == scroll
                    && step.value.as_deref().is_none_or(value_is_typeable)
                    && step.value_hash.as_deref().is_none_or(is_value_hash)
                    && (!set_value
                        || step.control_id.is_some()
                        || step.value_hash.as_deref() == Some(EMPTY_VALUE_HASH))
            }),
        }
}

fn intent_is_valid(intent: &PlanIntent) -> bool {
    let toggle_ok = match intent.action {
        UiAction::Toggle => matches!(
            intent.toggle_state,
            Some(ToggleState::On | ToggleState::Off)
        ),
        _ => intent.toggle_state.is_none(),
    };
    let selected_ok = match intent.action {
        UiAction::Select => intent.is_selected == Some(false),
        _ => intent.is_selected.is_none(),
    };
    let short = |v: &Option<String>| {
        v.as_deref()
            .is_none_or(|s| text_within(s, 0, MAX_HELP_TEXT_CHARS))
    };
    text_within(&intent.role, 1, MAX_ROLE_CHARS)
        && text_within(&intent.label, 1, MAX_LABEL_CHARS)
        && short(&intent.automation_id)
        && short(&intent.framework_id)
        && toggle_ok
        && selected_ok
}

/// The intent a plan step on `element` carries: what the element declares, with the toggle
/// state only for `toggle` and the selection only for `select`. `None` when it offers no action.
#[must_use]
pub fn intent_of(element: &Element) -> Option<PlanIntent> {
    let action = element.action?;
    Some(PlanIntent {
        role: element.role.clone(),
        label: element.label.clone(),
        action,
        automation_id: element.automation_id.clone(),
        framework_id: element.framework_id.clone(),
        toggle_state: element.toggle_state.filter(|_| action == UiAction::Toggle),
        is_selected: element.is_selected.filter(|_| action == UiAction::Select),
    })
}

/// The route's rule for a plan: made for this window and resource, and every step bound to a
/// control names exactly one executable element of a complete observation, with that element's
/// intent and (for `set_value`) its value hash.
#[must_use]
pub fn plan_matches_observation(plan: &PlanSegment, observation: &Observation) -> bool {
    plan.window_id == observation.window_id
        && plan.resource_id == observation.resource_id
        && plan.steps.iter().all(|step| {
            let Some(control_id) = &step.control_id else {
                return true;
            };
            let mut found = observation
                .elements
                .iter()
                .filter(|e| e.control_id.as_ref() == Some(control_id));
            let (Some(element), None) = (found.next(), found.next()) else {
                return false;
            };
            let set_value = element.action == Some(UiAction::SetValue);
            observation.automation_complete
                && element.is_executable()
                && intent_of(element) == step.intent
                && (!set_value || step.value_hash == element.value_hash)
        })
}

#[cfg(test)]
mod tests;
