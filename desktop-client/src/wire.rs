//! The JSON the desktop client exchanges with the local API (`/v1/sessions`, `/v1/guidance`),
//! spelled as API.md and the API's contracts spell it.

use local_core::guide::guidance::model::{Element, Observation};
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;

/// One element as the API takes it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementOut {
    pub role: String,
    pub label: String,
    #[serde(rename = "box")]
    pub bounds: [f64; 4],
    pub confidence: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_offscreen: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_selected: Option<bool>,
}

impl From<&Element> for ElementOut {
    fn from(e: &Element) -> Self {
        Self {
            role: e.role.clone(),
            label: e.label.clone(),
            bounds: e.bounds.to_array(),
            confidence: e.confidence,
            is_enabled: e.is_enabled,
            is_offscreen: e.is_offscreen,
            is_selected: e.is_selected,
        }
    }
}

/// An observation as the API takes it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservationOut {
    pub id: String,
    pub window_id: String,
    pub application: String,
    pub captured_at: String,
    pub width: u32,
    pub height: u32,
    pub ocr_text: String,
    pub elements: Vec<ElementOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_base64: Option<String>,
    pub automation_complete: bool,
}

impl From<&Observation> for ObservationOut {
    fn from(o: &Observation) -> Self {
        Self {
            id: o.id.clone(),
            window_id: o.window_id.clone(),
            application: o.application.clone(),
            // RFC 3339 always carries the offset the API requires; formatting a UTC time
            // cannot fail, and an empty string would be refused by the API, not sent wrongly.
            captured_at: o.captured_at.format(&Rfc3339).unwrap_or_default(),
            width: o.width,
            height: o.height,
            ocr_text: o.ocr_text.clone(),
            elements: o.elements.iter().map(ElementOut::from).collect(),
            image_base64: o.image.as_ref().map(|png| png.base64()),
            automation_complete: o.automation_complete,
        }
    }
}

/// `POST /v1/guidance`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GuidanceRequest<'a> {
    pub session_id: &'a str,
    pub prompt: &'a str,
    pub consent: bool,
    pub observation: &'a ObservationOut,
    /// The task this round belongs to ([`crate::task`]); omitted when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<&'a TaskProgressOut>,
    /// Ask for a plan segment instead of a single step; omitted when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub plan_segments: bool,
}

/// One step a task took, as `task.history` carries it (also the task file's form).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStepOut {
    pub step: u32,
    pub observation_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_observation_id: Option<String>,
    pub target_id: String,
    pub label: String,
    pub action: String,
    pub outcome: String,
}

/// `task`: where the task stands, with the plan being followed and the person's step in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskProgressOut {
    pub task_id: String,
    pub step: u32,
    pub status: String,
    pub history: Vec<TaskStepOut>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub remaining_work: String,
    /// What the person typed in answer to a question (at most 1000 characters).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_input: String,
    /// The plan last shown, exactly as the API sent it, while it is for this window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanIn>,
    /// The index of the plan step the person is on; 0 without a plan.
    #[serde(skip_serializing_if = "is_zero")]
    pub plan_cursor: u32,
    /// Why the last plan was dropped (a fixed sentence, never screen text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replan_reason: Option<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
const fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `POST /v1/sessions`' answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub session_id: String,
    pub expires_at: String,
}

/// The target a guidance answer points at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetIn {
    pub label: String,
    #[serde(rename = "box")]
    pub bounds: [f64; 4],
    pub confidence: f64,
    #[serde(default)]
    pub is_enabled: Option<bool>,
    #[serde(default)]
    pub is_offscreen: Option<bool>,
    /// The element's evidence id and action, when the provider set them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// `POST /v1/guidance`'s answer; unknown fields are kept out of the way, not refused, so a
/// newer API's additions do not break the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuidanceIn {
    pub instruction: String,
    pub status: String,
    pub target: Option<TargetIn>,
    pub mode: String,
    pub correlation_id: String,
    pub observation_id: String,
    pub window_id: String,
    #[serde(default)]
    pub remaining_work: Option<String>,
    /// The plan segment, when one was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanIn>,
    /// The echo of `task.taskId` and `task.step`, when a task was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
}

/// A plan segment: steps planned on one observation, and where the plan stops.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanIn {
    pub plan_id: String,
    pub window_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
    pub steps: Vec<PlanStepIn>,
    pub boundary: PlanBoundaryIn,
}

/// One step of a plan: an action on the element its intent describes, or a manual step. Every
/// field the API may send is kept, so the plan goes back in `task.plan` exactly as it came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanStepIn {
    pub kind: String,
    pub instruction: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<PlanIntentIn>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scroll_direction: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_hash: Option<String>,
}

/// The element a plan step is meant for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanIntentIn {
    pub role: String,
    pub label: String,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toggle_state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_selected: Option<bool>,
}

/// Where and why a plan stops.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanBoundaryIn {
    pub kind: String,
    pub reason: String,
    #[serde(default)]
    pub needed: String,
}
