//! Request bodies of the local API: strict, with unknown fields refused everywhere.

use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::{
    ToSchema,
    openapi::{
        RefOr, Schema,
        schema::{AdditionalProperties, Object, ObjectBuilder, OneOfBuilder, Type},
    },
};

use super::scalars::{
    BoundaryNeeded, BoxIn, EvidenceId, FramesObserved, GrantToken, Identifier, ImageBase64,
    ImageRef, InputValue, ItemStatus, Label, OnlyTrue, PlanCursor, PlanText, ProcessId, Prompt,
    ReplanReason, Role, ScrollPercent, ShortText, Side, StepNumber, TaskId, TaskNote, Text,
    Timestamp, ToolName, Unit, ValueHash, ValueLength, bounded_list,
};

/// A UI Automation pattern action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum UiActionIn {
    Invoke,
    Toggle,
    Select,
    Expand,
    Collapse,
    SetValue,
    Scroll,
}

/// A scroll direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScrollDirectionIn {
    Up,
    Down,
    Left,
    Right,
}

/// A toggle control's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToggleStateIn {
    Off,
    On,
    Indeterminate,
}

/// The Teams camera session state a capture may report; the camera branch's pinned profile
/// reads it (`reinitialized` after the permission changed), other requests ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum CameraSessionState {
    NotInitialized,
    Active,
    Reinitializing,
    Reinitialized,
    Unknown,
}

bounded_list!(
    /// The directions an element can scroll in (at most 4).
    ScrollDirections, ScrollDirectionIn, local_core::limits::MAX_SCROLL_DIRECTIONS
);
bounded_list!(
    /// The elements of one observation (at most 200).
    Elements, UiElement, local_core::limits::MAX_ELEMENTS
);
bounded_list!(
    /// Requested output modes (at most 3, duplicates allowed).
    ResponseModes, ResponseMode, local_core::limits::MAX_RESPONSE_MODES
);

/// One accessibility element of the observed window.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UiElement {
    pub role: Role,
    pub label: Label,
    #[serde(rename = "box")]
    pub bounds: BoxIn,
    pub confidence: Unit,
    pub process_id: Option<ProcessId>,
    pub target_id: Option<Identifier>,
    pub control_id: Option<Identifier>,
    pub automation_id: Option<ShortText>,
    pub framework_id: Option<ShortText>,
    pub is_enabled: Option<bool>,
    pub is_offscreen: Option<bool>,
    pub targetable: Option<bool>,
    pub is_password: Option<bool>,
    pub is_read_only: Option<bool>,
    pub is_selected: Option<bool>,
    pub toggle_state: Option<ToggleStateIn>,
    pub help_text: Option<ShortText>,
    pub item_status: Option<ItemStatus>,
    pub action: Option<UiActionIn>,
    pub value_hash: Option<ValueHash>,
    pub value_length: Option<ValueLength>,
    #[serde(default)]
    pub scroll_directions: ScrollDirections,
    pub horizontal_scroll_percent: Option<ScrollPercent>,
    pub vertical_scroll_percent: Option<ScrollPercent>,
}

/// What the user consented to share about one window.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Observation {
    pub id: Identifier,
    pub window_id: Identifier,
    /// The window title.
    pub application: Label,
    pub root_process_id: Option<ProcessId>,
    pub teams_camera_session_state: Option<CameraSessionState>,
    /// When capture started; at most 60 s old and at most 5 s in the future.
    pub captured_at: Timestamp,
    pub width: Side,
    pub height: Side,
    /// The element names joined by newlines (not pixel OCR).
    pub ocr_text: Text,
    pub elements: Elements,
    /// Only when pixel sharing was approved: raw canonical base64 of a single-frame PNG.
    pub image_base64: Option<ImageBase64>,
    #[serde(default = "yes")]
    pub automation_complete: bool,
    pub resource_id: Option<Identifier>,
}

const fn yes() -> bool {
    true
}

/// `POST /v1/guidance`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GuidanceRequest {
    pub session_id: Identifier,
    pub prompt: Prompt,
    /// Must be the boolean `true`.
    pub consent: bool,
    pub observation: Observation,
    /// The multi-step task this request belongs to; its id and step are echoed.
    pub task: Option<TaskProgress>,
    /// The boolean `true` asks for a plan segment (`plan`) instead of a single step.
    #[serde(default)]
    #[schema(default = false)]
    pub plan_segments: bool,
    /// The camera-recovery branch: the deterministic engine answers and the provider is never
    /// called. Not with `task` or `planSegments: true` (422 `Generic task context cannot
    /// authorize camera recovery`).
    pub camera_recovery: Option<CameraRecoveryIn>,
}

/// The scenario the camera engine follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
pub enum CameraProfileIn {
    /// The synthetic fixture (completes).
    #[serde(rename = "teams-camera-recovery-win11-24h2-en-US-fixture-v1")]
    Fixture,
    /// A live probe (never completes; Settings never trusted).
    #[serde(rename = "teams-camera-recovery-new-teams-uia-probe-20260916-v1")]
    LiveProbe,
    /// A pinned machine (proven Settings page, reinitialisation required).
    #[serde(rename = "teams-camera-recovery-pinned-20260916-v2")]
    Pinned,
}

/// The one kind of camera verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
pub enum VerificationKindIn {
    #[serde(rename = "localCameraReady")]
    LocalCameraReady,
}

/// The one source of camera verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
pub enum VerificationSourceIn {
    #[serde(rename = "desktopLocalCameraVerifier")]
    DesktopLocalCameraVerifier,
}

/// How the camera was restarted after the permission changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ReinitializationMethodIn {
    PrejoinReopened,
    TeamsRelaunched,
    CameraDeviceReinitialized,
}

/// The desktop verifier's report that the local camera delivers frames. It names this
/// request's `sessionId`, `observation.id` and `observation.windowId` (else 422), is itself at
/// most 60 s old and 5 s ahead, and within 5 s of `observation.capturedAt`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CameraVerificationIn {
    pub kind: VerificationKindIn,
    pub source: VerificationSourceIn,
    pub evidence_id: EvidenceId,
    pub session_id: Identifier,
    pub observation_id: Identifier,
    pub window_id: Identifier,
    pub captured_at: Timestamp,
    /// Must be the boolean `true`.
    pub camera_active: OnlyTrue,
    pub frames_observed: FramesObserved,
    /// Required by the pinned profile.
    pub reinitialization_method: Option<ReinitializationMethodIn>,
}

/// `cameraRecovery`: the profile, and the verifier's report once Teams is back.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CameraRecoveryIn {
    pub profile: CameraProfileIn,
    pub verification: Option<CameraVerificationIn>,
}

/// How the client sees its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatusIn {
    #[default]
    Running,
    Checkpoint,
    Blocked,
    NeedsInput,
    ReviewRequired,
    NoProgress,
    Unknown,
    Cancelled,
    Failed,
}

/// What a step the task took led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcomeIn {
    EffectObserved,
    ScreenChanged,
    NoProgress,
    Unknown,
    NotInvoked,
}

bounded_list!(
    /// Earlier steps of a task (at most 16), numbered strictly increasing and all below `step`.
    TaskHistory, TaskStep, local_core::limits::MAX_TASK_HISTORY
);
bounded_list!(
    /// The steps of a plan segment (at most 32).
    PlanSteps, PlanStep, local_core::limits::MAX_PLAN_STEPS
);

/// One step a task already took.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TaskStep {
    pub step: StepNumber,
    pub observation_id: Identifier,
    pub after_observation_id: Option<Identifier>,
    pub target_id: Identifier,
    pub label: Label,
    pub action: UiActionIn,
    pub outcome: StepOutcomeIn,
}

/// Where a multi-step task stands. `history` steps increase strictly and stay below `step`;
/// `planCursor` is at most the number of `plan` steps (0 without a plan); a breach is a 422
/// `value_error` at `task`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TaskProgress {
    pub task_id: TaskId,
    pub step: StepNumber,
    #[serde(default)]
    #[schema(default = "running")]
    pub status: TaskStatusIn,
    #[serde(default)]
    #[schema(default = json!([]))]
    pub history: TaskHistory,
    #[serde(default)]
    #[schema(default = "")]
    pub remaining_work: TaskNote,
    #[serde(default)]
    #[schema(default = "")]
    pub user_input: TaskNote,
    pub plan: Option<PlanSegment>,
    #[serde(default)]
    #[schema(default = 0)]
    pub plan_cursor: PlanCursor,
    pub replan_reason: Option<ReplanReason>,
}

/// Whether a plan step is an action on an element or a manual step (only ever last).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanStepKindIn {
    Action,
    Manual,
}

/// The kind of stop at a plan's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BoundaryKindIn {
    CompletionCandidate,
    Resource,
    NeedsInput,
    Permission,
    Observation,
    Unsupported,
    PlanLimit,
}

/// The element a plan step is meant for. `toggleState` (on or off) only with `toggle`,
/// `isSelected` (false) only with `select`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlanIntent {
    pub role: Role,
    pub label: Label,
    pub action: UiActionIn,
    pub automation_id: Option<ShortText>,
    pub framework_id: Option<ShortText>,
    pub toggle_state: Option<ToggleStateIn>,
    pub is_selected: Option<bool>,
}

/// One step of a plan. Manual steps carry none of the optional fields; action steps need an
/// intent, `value` and `valueHash` exactly for `set_value` (the empty-value hash when no
/// `controlId`), `scrollDirection` exactly for `scroll`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlanStep {
    pub kind: PlanStepKindIn,
    pub instruction: PlanText,
    pub intent: Option<PlanIntent>,
    pub control_id: Option<Identifier>,
    pub value: Option<InputValue>,
    pub scroll_direction: Option<ScrollDirectionIn>,
    pub value_hash: Option<ValueHash>,
}

/// Where and why a plan stops.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlanBoundary {
    pub kind: BoundaryKindIn,
    pub reason: PlanText,
    pub needed: BoundaryNeeded,
}

/// A plan segment a client is following. 32 steps cannot end in `completion_candidate`; a
/// manual step may only be last, and then the boundary is not `completion_candidate`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlanSegment {
    pub plan_id: TaskId,
    pub window_id: Identifier,
    pub resource_id: Option<Identifier>,
    pub steps: PlanSteps,
    pub boundary: PlanBoundary,
}

/// What an assist context was captured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum CaptureType {
    SelectedRegion,
    ActiveWindow,
    TextSelection,
}

/// How sensitive a context claims to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum SensitivityIn {
    #[default]
    Public,
    Internal,
    Confidential,
    Restricted,
}

/// A legacy assist context.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContextEnvelope {
    pub session_id: Identifier,
    pub capture_type: CaptureType,
    pub application: Label,
    #[serde(default)]
    pub ocr_text: Option<Text>,
    #[serde(default)]
    pub elements: Elements,
    #[serde(default)]
    pub image_ref: Option<ImageRef>,
    #[serde(default)]
    pub sensitivity: SensitivityIn,
    pub timestamp: Timestamp,
}

/// An output the assist caller would like (descriptive only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResponseMode {
    Text,
    Overlay,
    Voice,
}

fn text_only() -> ResponseModes {
    ResponseModes(vec![ResponseMode::Text])
}

/// `POST /v1/assist`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AssistRequest {
    pub session_id: Identifier,
    pub prompt: Prompt,
    pub context: Option<ContextEnvelope>,
    #[serde(default = "text_only")]
    pub response_modes: ResponseModes,
}

/// What the `tool` field documents: the mock tools and their risk tiers. The field stays a free
/// string: an unknown name is a valid request, answered with 403 `DENIED`.
pub const TOOL_DESCRIPTION: &str = "The mock tool, by name. `view_logs` (low risk) and `create_work_item` (medium risk) are simulations that are previewed and need a confirmation. `modify_service_config` and `delete_personal_data` are high risk: 403 `{\"status\":\"STEP_UP_REQUIRED\",\"detail\":\"External actions are disabled\"}`. Any other name is blocked: 403 `{\"status\":\"DENIED\",\"detail\":\"External actions are disabled\"}`.";

/// The tool names the documentation shows, each with its tier (a test checks them against the
/// core's table).
pub const DOCUMENTED_TOOLS: [(&str, &str); 5] = [
    ("view_logs", "low"),
    ("create_work_item", "medium"),
    ("modify_service_config", "high"),
    ("delete_personal_data", "high"),
    ("deploy_production", "blocked"),
];

/// The `tool` field: a free string of 1-64 characters, with the tiers in its description; the
/// pattern excludes the names a branch of its own covers.
fn tool_schema(except: &[&str]) -> Object {
    let mut tool = match <ToolName as utoipa::PartialSchema>::schema() {
        RefOr::T(Schema::Object(object)) => object,
        _ => ObjectBuilder::new().schema_type(Type::String).build(),
    };
    tool.description = Some(TOOL_DESCRIPTION.to_owned());
    tool.examples = DOCUMENTED_TOOLS
        .iter()
        .filter(|(name, _)| !except.contains(name))
        .map(|(name, _)| Value::from(*name))
        .collect();
    if !except.is_empty() {
        // utoipa has no `not`: a negative lookahead says the same, and regex engines of JSON
        // Schema (ECMA-262) and generators understand it.
        tool.pattern = Some(format!("^(?!(?:{})$)", except.join("|")));
    }
    tool
}

fn text(min: usize, max: usize) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(min))
        .max_length(Some(max))
}

/// One branch of the preview body: a tool (named, or any other) and its parameters.
fn preview_branch(
    tool: impl Into<RefOr<Schema>>,
    parameters: ObjectBuilder,
    description: &str,
) -> Object {
    ObjectBuilder::new()
        .description(Some(description))
        .property("tool", tool)
        .property("parameters", parameters)
        .required("tool")
        .required("parameters")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .build()
}

/// The preview body as the core checks it: each permitted tool with its own parameters
/// (`local_core::guide::actions::normalise_parameters`), any other name with any object (it is denied
/// before its parameters are read).
impl utoipa::PartialSchema for PreviewRequest {
    fn schema() -> RefOr<Schema> {
        use local_core::limits::{MAX_DESCRIPTION_CHARS, MAX_LABEL_CHARS};
        let named = |name: &str| {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some([name]))
                .build()
        };
        let view_logs = ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "application",
                text(1, MAX_LABEL_CHARS).description(Some("Default `MSGuide Demo`")),
            )
            .additional_properties(Some(AdditionalProperties::FreeForm(false)));
        let create_work_item = ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("title", text(1, MAX_LABEL_CHARS))
            .property(
                "description",
                text(0, MAX_DESCRIPTION_CHARS).description(Some("Default empty")),
            )
            .required("title")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)));
        OneOfBuilder::new()
            .description(Some(
                "A mock tool and its parameters. Parameters that do not fit a permitted tool's \
                 rules answer 422 `Invalid mock tool parameters`; a denied tool's parameters are \
                 not read.",
            ))
            .item(preview_branch(
                named("view_logs"),
                view_logs,
                "view_logs: low risk",
            ))
            .item(preview_branch(
                named("create_work_item"),
                create_work_item,
                "create_work_item: medium risk",
            ))
            .item(preview_branch(
                tool_schema(&["view_logs", "create_work_item"]),
                ObjectBuilder::new().schema_type(Type::Object),
                "Any other tool: 403 STEP_UP_REQUIRED (high risk) or DENIED",
            ))
            .into()
    }
}

impl ToSchema for PreviewRequest {}

/// `POST /v1/actions/preview`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PreviewRequest {
    pub tool: ToolName,
    /// The tool's parameters, checked against the tool's own rules.
    pub parameters: Map<String, Value>,
}

/// `POST /v1/actions/{previewId}/execute`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExecuteRequest {
    pub grant_token: GrantToken,
}
