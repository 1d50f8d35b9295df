//! Response bodies of the local API, in the reference's exact shapes.

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// `GET /health`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: &'static str,
    /// `demo` or `model`, by the configured provider.
    pub mode: &'static str,
    /// `0.2.0`.
    pub version: &'static str,
}

/// `POST /v1/sessions`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub session_id: String,
    pub expires_at: String,
}

/// The element a next step points at; the demo's keys are always present, null when unknown.
/// Model answers also carry `value`, `scrollDirection` and `valueHash` (null when unset) and
/// `isSelected` when known, as the reference's model provider does.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    pub label: String,
    #[serde(rename = "box")]
    pub bounds: [f64; 4],
    pub confidence: f64,
    pub process_id: Option<u32>,
    pub target_id: Option<String>,
    pub automation_id: Option<String>,
    pub framework_id: Option<String>,
    pub is_enabled: Option<bool>,
    pub is_offscreen: Option<bool>,
    pub toggle_state: Option<&'static str>,
    pub action: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_id: Option<String>,
    /// Model answers only (present, possibly null); absent for the demo.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub value: Option<Option<String>>,
    /// `up`, `down`, `left` or `right`; model answers only (present, possibly null).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub scroll_direction: Option<Option<&'static str>>,
    /// Model answers only (present, possibly null).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub value_hash: Option<Option<String>>,
    /// Model answers only, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_selected: Option<bool>,
}

/// A cited source.
#[derive(Debug, Serialize, ToSchema)]
pub struct Citation {
    pub source: String,
    pub title: String,
}

/// `POST /v1/guidance`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Guidance {
    pub instruction: String,
    /// `next_step`, `clarification`, `completed`, `blocked`, `needs_input` or `completion_candidate`.
    pub status: &'static str,
    pub target: Option<Target>,
    pub citations: Vec<Citation>,
    pub mode: &'static str,
    pub correlation_id: String,
    pub observation_id: String,
    pub window_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_work: Option<String>,
    /// The plan segment, when the request asked for one (`planSegments: true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<GuidancePlan>,
    /// The request's `task.taskId`, echoed when a task was sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The request's `task.step`, echoed when a task was sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// The camera engine's account, when the request carried `cameraRecovery`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub camera_recovery: Option<CameraRecoveryOut>,
}

/// Where the camera-recovery scenario stands. `status` is `completed` exactly when `state` is
/// `camera_ready_verified`, which is exactly when `verificationRequired` is false.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CameraRecoveryOut {
    /// The request's profile.
    pub profile: &'static str,
    /// `fixture` for the fixture profile, `liveProbe` for the live probe and pinned profiles.
    pub evidence_basis: &'static str,
    /// True only for the fixture profile.
    pub fixture_supported: bool,
    /// True only for the pinned profile.
    pub settings_uia_proven: bool,
    /// Always false: the engine reads the accessibility elements, never pixels.
    pub raw_pixel_evidence_used: bool,
    /// `ms-settings:privacy-webcam`, only for the pinned profile in `teams_devices_open`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings_launch_uri: Option<&'static str>,
    /// One of the 17 states (docs/api.md).
    pub state: &'static str,
    /// The kinds of evidence the answer rests on (at most 12).
    pub evidence: Vec<&'static str>,
    /// `unknown`, `off`, `on` or `managed`.
    pub permission_state: &'static str,
    /// False only in `camera_ready_verified`.
    pub verification_required: bool,
}

/// A plan segment: several steps planned on one observation, and where the plan stops.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuidancePlan {
    /// A fresh UUIDv4 per answer.
    pub plan_id: String,
    /// The observation's `windowId`.
    pub window_id: String,
    /// The observation's `resourceId` (null when it named none).
    pub resource_id: Option<String>,
    /// At most 32 steps.
    pub steps: Vec<GuidancePlanStep>,
    pub boundary: GuidancePlanBoundary,
}

/// One step of a plan; every key is present, null when unset.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuidancePlanStep {
    /// `action` or `manual`.
    pub kind: &'static str,
    pub instruction: String,
    /// The element an action step is meant for; null for a manual step.
    pub intent: Option<GuidancePlanIntent>,
    /// The observed element's `controlId` when the step is bound to one.
    pub control_id: Option<String>,
    /// The value to type (`set_value` only).
    pub value: Option<String>,
    /// `up`, `down`, `left` or `right` (`scroll` only).
    pub scroll_direction: Option<&'static str>,
    /// The value hash the step was planned against (`set_value` only).
    pub value_hash: Option<String>,
}

/// The element a plan step is meant for; unset keys are omitted.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuidancePlanIntent {
    pub role: String,
    pub label: String,
    /// A UI action (`invoke`, `toggle`, `select`, `expand`, `collapse`, `set_value`, `scroll`).
    pub action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub automation_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<String>,
    /// `on` or `off`, only with `toggle`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toggle_state: Option<&'static str>,
    /// `false`, only with `select`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_selected: Option<bool>,
}

/// Where and why a plan stops.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuidancePlanBoundary {
    /// `completion_candidate`, `resource`, `needs_input`, `permission`, `observation`,
    /// `unsupported` or `plan_limit`.
    pub kind: &'static str,
    pub reason: String,
    /// What is needed to go on; may be empty only for `completion_candidate`.
    pub needed: String,
}

/// A sample passage cited by assist.
#[derive(Debug, Serialize, ToSchema)]
pub struct AssistCitation {
    pub source: &'static str,
    pub title: &'static str,
    pub modified: &'static str,
}

/// `POST /v1/assist`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Assist {
    pub correlation_id: String,
    /// `guide`, `action`, `retrieve` or `explain`.
    pub request_type: &'static str,
    pub answer: String,
    pub citations: Vec<AssistCitation>,
    pub response_modes: Vec<&'static str>,
    /// Always `demo`.
    pub mode: &'static str,
}

/// `POST /v1/actions/preview`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    pub preview_id: String,
    pub tool: String,
    #[schema(value_type = Object)]
    pub parameters: Map<String, Value>,
    pub effects: &'static str,
    /// `low` or `medium`.
    pub risk_level: &'static str,
    pub requires_confirmation: bool,
    pub expiry_time: String,
    pub mock: bool,
}

/// The 403 body of a denied preview.
// `deny_unknown_fields` only documents `additionalProperties: false`, so a client can tell this
// body from an `ErrorDetail` (serialisation ignores it).
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Denied {
    /// `STEP_UP_REQUIRED` or `DENIED`.
    pub status: &'static str,
    pub detail: String,
}

/// `POST /v1/actions/{previewId}/confirm`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// 43 URL-safe characters from 32 random bytes; shown once.
    pub grant_token: String,
    pub expires_in: u64,
    pub expires_at: String,
    pub mock: bool,
}

/// What a finished mock job reports.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobResult {
    pub mock: bool,
    pub tool: String,
    pub external_effects: bool,
    pub message: &'static str,
}

/// A mock job.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub job_id: String,
    /// `pending`, `running`, `success`, `failed` or `cancelled`.
    pub status: &'static str,
    pub result: Option<JobResult>,
    #[schema(value_type = Option<String>)]
    pub error: Option<()>,
    pub mock: bool,
    pub progress: u8,
}

/// One audit event.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub correlation_id: String,
    pub timestamp: String,
    pub outcome: String,
}

/// `GET /admin/audit-log`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditLog {
    /// Events currently held.
    pub count: usize,
    /// The requested tail, oldest first.
    pub events: Vec<AuditEvent>,
}

/// Every error but validation errors: one fixed sentence.
// `deny_unknown_fields` documents `additionalProperties: false` (see `Denied`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorDetail {
    pub detail: String,
}

/// One step of a validation item's `loc`: a field name or a list index.
fn loc_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    ArrayBuilder::new()
        .items(
            OneOfBuilder::new()
                .item(ObjectBuilder::new().schema_type(Type::String))
                .item(
                    ObjectBuilder::new()
                        .schema_type(Type::Integer)
                        .minimum(Some(0)),
                ),
        )
        .min_items(Some(1))
        .build()
}

/// One validation failure; never echoes the input.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"loc": ["body", "observation", "elements", 1, "valueLength"], "type": "int_type", "msg": "Invalid request value"}))]
pub struct ValidationItem {
    /// Where: `body` or `query`, then field names (strings) and list indexes (integers),
    /// e.g. `["body","observation","elements",1,"valueLength"]`; a JSON syntax error gives
    /// `["body", <character offset>]`.
    #[schema(schema_with = loc_schema)]
    pub loc: Vec<Value>,
    /// The pydantic error type, e.g. `missing`, `extra_forbidden`, `string_too_long`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Always `Invalid request value`.
    pub msg: &'static str,
}

/// The 422 body of a request that does not fit its contract.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidationErrors {
    pub detail: Vec<ValidationItem>,
}

/// A 422 of a route with rules no schema can state (freshness, one field matching another):
/// either the validation list or one fixed sentence. Only documents the two shapes.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Unprocessable {
    /// The request broke its contract.
    Validation(ValidationErrors),
    /// A rule across fields or time: `detail` is a fixed sentence.
    Sentence(ErrorDetail),
}

/// The 403 of a preview: the denial of a tool, or a boundary or rule refusal with a sentence.
/// Only documents the two shapes.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum PreviewForbidden {
    /// `STEP_UP_REQUIRED` for a high-risk tool, `DENIED` for any other unknown or blocked one.
    Denied(Denied),
    /// A refusal of the local boundary (peer, `Origin`).
    Sentence(ErrorDetail),
}
