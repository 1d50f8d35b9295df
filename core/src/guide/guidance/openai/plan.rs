//! Plan mode of the OpenAI-compatible provider: the task as untrusted evidence, the schema the
//! model's `plan` must follow, and the strict conversion of that `plan` (steps naming an
//! element by `targetIndex` or describing one by `intent`) into a canonical plan segment.
//!
//! The model never writes ids, control ids or value hashes: the plan id is minted here, the
//! window and resource come from the observation, and a referenced element's intent, control id
//! and value hash are copied from the element itself.

use serde_json::{Map, Value, json};

use super::answer::is_model_text;
use crate::{
    guide::guidance::{
        model::{
            BoundaryKind, Observation, PlanBoundary, PlanIntent, PlanSegment, PlanStep,
            PlanStepKind, ScrollDirection, TaskProgress, ToggleState, UiAction,
        },
        plan::{EMPTY_VALUE_HASH, intent_of},
    },
    limits::{MAX_ELEMENTS, MAX_PLAN_STEPS},
};

/// The task as the model sees it: everything the client reported, as untrusted evidence.
#[must_use]
pub fn task_json(task: &TaskProgress) -> Value {
    json!({
        "taskId": task.task_id,
        "step": task.step,
        "status": task.status.as_str(),
        "history": task.history.iter().map(|h| json!({
            "step": h.step,
            "observationId": h.observation_id,
            "afterObservationId": h.after_observation_id,
            "targetId": h.target_id,
            "label": h.label,
            "action": h.action.as_str(),
            "outcome": h.outcome.as_str(),
        })).collect::<Vec<_>>(),
        "remainingWork": task.remaining_work,
        "userInput": task.user_input,
        "plan": task.plan.as_ref().map(plan_json),
        "planCursor": task.plan_cursor,
        "replanReason": task.replan_reason,
    })
}

fn plan_json(plan: &PlanSegment) -> Value {
    json!({
        "planId": plan.plan_id,
        "windowId": plan.window_id,
        "resourceId": plan.resource_id,
        "steps": plan.steps.iter().map(|s| json!({
            "kind": s.kind.as_str(),
            "instruction": s.instruction,
            "intent": s.intent.as_ref().map(|i| json!({
                "role": i.role,
                "label": i.label,
                "action": i.action.as_str(),
                "automationId": i.automation_id,
                "frameworkId": i.framework_id,
                "toggleState": i.toggle_state.map(ToggleState::as_str),
                "isSelected": i.is_selected,
            })),
            "controlId": s.control_id,
            "value": s.value,
            "scrollDirection": s.scroll_direction.map(ScrollDirection::as_str),
        })).collect::<Vec<_>>(),
        "boundary": {
            "kind": plan.boundary.kind.as_str(),
            "reason": plan.boundary.reason,
            "needed": plan.boundary.needed,
        },
    })
}

const ACTIONS: [&str; 7] = [
    "invoke",
    "toggle",
    "select",
    "expand",
    "collapse",
    "set_value",
    "scroll",
];
const BOUNDARIES: [&str; 7] = [
    "completion_candidate",
    "resource",
    "needs_input",
    "permission",
    "observation",
    "unsupported",
    "plan_limit",
];

/// The JSON schema of the `plan` the model must return in plan mode.
#[must_use]
pub fn plan_schema() -> Value {
    let text = |max: usize| json!({"type": "string", "minLength": 1, "maxLength": max});
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["steps", "boundary"],
        "properties": {
            "steps": {
                "type": "array",
                "maxItems": MAX_PLAN_STEPS,
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["kind", "instruction"],
                    "description": "An action names exactly one of targetIndex (an executable element of untrustedObservation.elements) or intent (an element not on screen yet); a manual step has neither and may only be last.",
                    "properties": {
                        "kind": {"enum": ["action", "manual"]},
                        "instruction": text(500),
                        "targetIndex": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_ELEMENTS - 1},
                        "intent": {
                            "type": ["object", "null"],
                            "additionalProperties": false,
                            "required": ["role", "label", "action"],
                            "properties": {
                                "role": text(64),
                                "label": text(256),
                                "action": {"enum": ACTIONS},
                                "automationId": {"type": ["string", "null"], "maxLength": 256},
                                "frameworkId": {"type": ["string", "null"], "maxLength": 256},
                                "toggleState": {"enum": ["on", "off", null]},
                                "isSelected": {"enum": [false, null]},
                            },
                        },
                        "value": {"type": ["string", "null"], "maxLength": 1000},
                        "scrollDirection": {"enum": ["up", "down", "left", "right", null]},
                    },
                },
            },
            "boundary": {
                "type": "object",
                "additionalProperties": false,
                "required": ["kind", "reason", "needed"],
                "properties": {
                    "kind": {"enum": BOUNDARIES},
                    "reason": text(500),
                    "needed": {"type": "string", "maxLength": 1000},
                },
            },
        },
    })
}

/// The object at `value` when every key is one of `allowed`; `null` and absent keys are the same.
fn object<'a>(value: &'a Value, allowed: &[&str]) -> Option<&'a Map<String, Value>> {
    let Value::Object(map) = value else {
        return None;
    };
    map.keys()
        .all(|k| allowed.contains(&k.as_str()))
        .then_some(map)
}

fn present<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).filter(|v| !v.is_null())
}

/// `Some(None)` when absent or null, `Some(Some(text))` for a string, `None` for anything else.
fn optional_text(map: &Map<String, Value>, key: &str) -> Option<Option<String>> {
    match present(map, key) {
        None => Some(None),
        Some(Value::String(text)) => Some(Some(text.clone())),
        Some(_) => None,
    }
}

fn parse_action(text: &str) -> Option<UiAction> {
    Some(match text {
        "invoke" => UiAction::Invoke,
        "toggle" => UiAction::Toggle,
        "select" => UiAction::Select,
        "expand" => UiAction::Expand,
        "collapse" => UiAction::Collapse,
        "set_value" => UiAction::SetValue,
        "scroll" => UiAction::Scroll,
        _ => return None,
    })
}

fn parse_boundary_kind(text: &str) -> Option<BoundaryKind> {
    Some(match text {
        "completion_candidate" => BoundaryKind::CompletionCandidate,
        "resource" => BoundaryKind::Resource,
        "needs_input" => BoundaryKind::NeedsInput,
        "permission" => BoundaryKind::Permission,
        "observation" => BoundaryKind::Observation,
        "unsupported" => BoundaryKind::Unsupported,
        "plan_limit" => BoundaryKind::PlanLimit,
        _ => return None,
    })
}

fn parse_intent(value: &Value) -> Option<PlanIntent> {
    let map = object(
        value,
        &[
            "role",
            "label",
            "action",
            "automationId",
            "frameworkId",
            "toggleState",
            "isSelected",
        ],
    )?;
    let text = |key| present(map, key).and_then(Value::as_str).map(str::to_owned);
    Some(PlanIntent {
        role: text("role")?,
        label: text("label")?,
        action: parse_action(present(map, "action")?.as_str()?)?,
        automation_id: optional_text(map, "automationId")?,
        framework_id: optional_text(map, "frameworkId")?,
        toggle_state: match optional_text(map, "toggleState")?.as_deref() {
            None => None,
            Some("on") => Some(ToggleState::On),
            Some("off") => Some(ToggleState::Off),
            Some(_) => return None,
        },
        is_selected: match present(map, "isSelected") {
            None => None,
            Some(Value::Bool(flag)) => Some(*flag),
            Some(_) => return None,
        },
    })
}

fn parse_step(value: &Value, observation: &Observation) -> Option<PlanStep> {
    let map = object(
        value,
        &[
            "kind",
            "instruction",
            "targetIndex",
            "intent",
            "value",
            "scrollDirection",
        ],
    )?;
    let instruction = present(map, "instruction")?.as_str()?;
    if !is_model_text(instruction) {
        return None;
    }
    let value = optional_text(map, "value")?;
    let scroll_direction = match optional_text(map, "scrollDirection")?.as_deref() {
        None => None,
        Some("up") => Some(ScrollDirection::Up),
        Some("down") => Some(ScrollDirection::Down),
        Some("left") => Some(ScrollDirection::Left),
        Some("right") => Some(ScrollDirection::Right),
        Some(_) => return None,
    };
    let mut step = PlanStep {
        kind: PlanStepKind::Manual,
        instruction: instruction.to_owned(),
        intent: None,
        control_id: None,
        value,
        scroll_direction,
        value_hash: None,
    };
    match present(map, "kind")?.as_str()? {
        "manual" => {
            // A manual step names nothing; the segment rules refuse any value it carries.
            if present(map, "targetIndex").is_some() || present(map, "intent").is_some() {
                return None;
            }
        }
        "action" => {
            step.kind = PlanStepKind::Action;
            match (present(map, "targetIndex"), present(map, "intent")) {
                (Some(index), None) => {
                    // Strict integers only: floats, booleans and strings are refused.
                    let index = usize::try_from(index.as_u64()?).ok()?;
                    let element = observation.elements.get(index)?;
                    if !observation.automation_complete
                        || element.control_id.is_none()
                        || !element.is_executable()
                    {
                        return None;
                    }
                    step.intent = intent_of(element);
                    step.control_id.clone_from(&element.control_id);
                    if element.action == Some(UiAction::SetValue) {
                        step.value_hash.clone_from(&element.value_hash);
                    }
                }
                (None, Some(intent)) => {
                    let intent = parse_intent(intent)?;
                    if intent.action == UiAction::SetValue {
                        // A write to an element not yet observed goes into an empty field.
                        step.value_hash = Some(EMPTY_VALUE_HASH.to_owned());
                    }
                    step.intent = Some(intent);
                }
                _ => return None,
            }
        }
        _ => return None,
    }
    Some(step)
}

/// The model's `plan` as a canonical segment for `observation`, with a fresh plan id; `None`
/// when it breaks its schema or names an element it may not. The segment rules and the binding
/// to the observation are checked by the caller, as for any provider.
#[must_use]
pub fn parse_plan(value: &Value, observation: &Observation) -> Option<PlanSegment> {
    let map = object(value, &["steps", "boundary"])?;
    let Value::Array(steps) = present(map, "steps")? else {
        return None;
    };
    if steps.len() > MAX_PLAN_STEPS {
        return None;
    }
    let boundary = object(present(map, "boundary")?, &["kind", "reason", "needed"])?;
    let reason = present(boundary, "reason")?.as_str()?;
    let needed = present(boundary, "needed")?.as_str()?;
    if !is_model_text(reason) || !(needed.is_empty() || is_model_text(needed)) {
        return None;
    }
    Some(PlanSegment {
        plan_id: crate::secret::new_id().to_string(),
        window_id: observation.window_id.clone(),
        resource_id: observation.resource_id.clone(),
        steps: steps
            .iter()
            .map(|s| parse_step(s, observation))
            .collect::<Option<_>>()?,
        boundary: PlanBoundary {
            kind: parse_boundary_kind(present(boundary, "kind")?.as_str()?)?,
            reason: reason.to_owned(),
            needed: needed.to_owned(),
        },
    })
}

#[cfg(test)]
mod tests;
