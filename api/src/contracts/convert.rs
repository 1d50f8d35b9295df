//! Conversions between the wire contracts and the core's own types.

use local_core::guide::{
    actions::{EFFECTS, GrantView, JOB_MESSAGE, JobView, PreviewView},
    assist::{AssistAnswer, AssistContext, Sensitivity},
    audit_ring,
    guidance::{
        GuidanceResponse, UploadError,
        camera::{
            CameraRecovery, CameraReport, Profile, Reinitialization, TeamsCameraSession,
            Verification,
        },
        model::{
            self, BoundaryKind, Element, PlanStepKind, ScrollDirection, StepOutcome, TaskStatus,
            ToggleState, UiAction,
        },
        plan::TaskRefusal,
        upload::{GuidanceUpload, ObservationRefusal, ObservationUpload},
    },
    sessions::NewSession,
};
use serde_json::Value;

use super::{
    invalid,
    requests::{
        BoundaryKindIn, CameraProfileIn, CameraRecoveryIn, CameraSessionState, ContextEnvelope,
        GuidanceRequest, Observation, PlanIntent, PlanSegment, PlanStep, PlanStepKindIn,
        ReinitializationMethodIn, ResponseMode, ScrollDirectionIn, SensitivityIn, StepOutcomeIn,
        TaskProgress, TaskStatusIn, TaskStep, ToggleStateIn, UiActionIn, UiElement,
    },
    responses,
};
use crate::error::ApiError;

impl From<UiActionIn> for UiAction {
    fn from(action: UiActionIn) -> Self {
        match action {
            UiActionIn::Invoke => Self::Invoke,
            UiActionIn::Toggle => Self::Toggle,
            UiActionIn::Select => Self::Select,
            UiActionIn::Expand => Self::Expand,
            UiActionIn::Collapse => Self::Collapse,
            UiActionIn::SetValue => Self::SetValue,
            UiActionIn::Scroll => Self::Scroll,
        }
    }
}

impl From<ToggleStateIn> for ToggleState {
    fn from(state: ToggleStateIn) -> Self {
        match state {
            ToggleStateIn::Off => Self::Off,
            ToggleStateIn::On => Self::On,
            ToggleStateIn::Indeterminate => Self::Indeterminate,
        }
    }
}

impl From<ScrollDirectionIn> for ScrollDirection {
    fn from(direction: ScrollDirectionIn) -> Self {
        match direction {
            ScrollDirectionIn::Up => Self::Up,
            ScrollDirectionIn::Down => Self::Down,
            ScrollDirectionIn::Left => Self::Left,
            ScrollDirectionIn::Right => Self::Right,
        }
    }
}

impl From<UiElement> for Element {
    fn from(e: UiElement) -> Self {
        Self {
            role: e.role.0,
            label: e.label.0,
            bounds: e.bounds.0,
            confidence: e.confidence.0,
            process_id: e.process_id.map(|p| p.0),
            target_id: e.target_id.map(|v| v.0),
            control_id: e.control_id.map(|v| v.0),
            automation_id: e.automation_id.map(|v| v.0),
            framework_id: e.framework_id.map(|v| v.0),
            is_enabled: e.is_enabled,
            is_offscreen: e.is_offscreen,
            targetable: e.targetable,
            is_password: e.is_password,
            is_read_only: e.is_read_only,
            is_selected: e.is_selected,
            toggle_state: e.toggle_state.map(Into::into),
            action: e.action.map(Into::into),
            value_hash: e.value_hash.map(|v| v.0),
            value_length: e.value_length.map(|v| v.0),
            scroll_directions: e.scroll_directions.0.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<Observation> for ObservationUpload {
    fn from(o: Observation) -> Self {
        Self {
            observation: model::Observation {
                id: o.id.0,
                window_id: o.window_id.0,
                application: o.application.0,
                captured_at: o.captured_at.0,
                width: o.width.0,
                height: o.height.0,
                ocr_text: o.ocr_text.0,
                elements: o.elements.0.into_iter().map(Into::into).collect(),
                image: None,
                automation_complete: o.automation_complete,
                resource_id: o.resource_id.map(|r| r.0),
            },
            image_base64: o.image_base64.map(|image| image.0),
        }
    }
}

/// The core's upload of a parsed guidance body; `body_bytes` is the HTTP body's size.
#[must_use]
pub fn guidance_upload(request: GuidanceRequest, body_bytes: usize) -> GuidanceUpload {
    let teams_session = request
        .observation
        .teams_camera_session_state
        .map(Into::into);
    GuidanceUpload {
        camera: request
            .camera_recovery
            .map(|camera| camera_recovery(camera, teams_session)),
        session_id: request.session_id.0,
        prompt: request.prompt.0,
        consent: request.consent,
        observation: request.observation.into(),
        body_bytes,
        task: request.task.map(Into::into),
        plan_segments: request.plan_segments,
    }
}

impl From<CameraSessionState> for TeamsCameraSession {
    fn from(state: CameraSessionState) -> Self {
        match state {
            CameraSessionState::NotInitialized => Self::NotInitialized,
            CameraSessionState::Active => Self::Active,
            CameraSessionState::Reinitializing => Self::Reinitializing,
            CameraSessionState::Reinitialized => Self::Reinitialized,
            CameraSessionState::Unknown => Self::Unknown,
        }
    }
}

fn camera_recovery(
    camera: CameraRecoveryIn,
    teams_session: Option<TeamsCameraSession>,
) -> CameraRecovery {
    CameraRecovery {
        profile: match camera.profile {
            CameraProfileIn::Fixture => Profile::Fixture,
            CameraProfileIn::LiveProbe => Profile::LiveProbe,
            CameraProfileIn::Pinned => Profile::Pinned,
        },
        verification: camera.verification.map(|v| Verification {
            evidence_id: v.evidence_id.0,
            session_id: v.session_id.0,
            observation_id: v.observation_id.0,
            window_id: v.window_id.0,
            captured_at: v.captured_at.0,
            frames_observed: v.frames_observed.0,
            reinitialization: v.reinitialization_method.map(|m| match m {
                ReinitializationMethodIn::PrejoinReopened => Reinitialization::PrejoinReopened,
                ReinitializationMethodIn::TeamsRelaunched => Reinitialization::TeamsRelaunched,
                ReinitializationMethodIn::CameraDeviceReinitialized => {
                    Reinitialization::CameraDeviceReinitialized
                }
            }),
        }),
        teams_session,
    }
}

fn camera_out(report: &CameraReport) -> responses::CameraRecoveryOut {
    responses::CameraRecoveryOut {
        profile: report.profile.as_str(),
        evidence_basis: report.profile.evidence_basis(),
        fixture_supported: report.fixture_supported(),
        settings_uia_proven: report.settings_uia_proven(),
        raw_pixel_evidence_used: false,
        settings_launch_uri: report.settings_launch_uri,
        state: report.state.as_str(),
        evidence: report.evidence.iter().map(|e| e.as_str()).collect(),
        permission_state: report.permission.as_str(),
        verification_required: report.verification_required(),
    }
}

impl From<TaskStatusIn> for TaskStatus {
    fn from(status: TaskStatusIn) -> Self {
        match status {
            TaskStatusIn::Running => Self::Running,
            TaskStatusIn::Checkpoint => Self::Checkpoint,
            TaskStatusIn::Blocked => Self::Blocked,
            TaskStatusIn::NeedsInput => Self::NeedsInput,
            TaskStatusIn::ReviewRequired => Self::ReviewRequired,
            TaskStatusIn::NoProgress => Self::NoProgress,
            TaskStatusIn::Unknown => Self::Unknown,
            TaskStatusIn::Cancelled => Self::Cancelled,
            TaskStatusIn::Failed => Self::Failed,
        }
    }
}

impl From<StepOutcomeIn> for StepOutcome {
    fn from(outcome: StepOutcomeIn) -> Self {
        match outcome {
            StepOutcomeIn::EffectObserved => Self::EffectObserved,
            StepOutcomeIn::ScreenChanged => Self::ScreenChanged,
            StepOutcomeIn::NoProgress => Self::NoProgress,
            StepOutcomeIn::Unknown => Self::Unknown,
            StepOutcomeIn::NotInvoked => Self::NotInvoked,
        }
    }
}

impl From<BoundaryKindIn> for BoundaryKind {
    fn from(kind: BoundaryKindIn) -> Self {
        match kind {
            BoundaryKindIn::CompletionCandidate => Self::CompletionCandidate,
            BoundaryKindIn::Resource => Self::Resource,
            BoundaryKindIn::NeedsInput => Self::NeedsInput,
            BoundaryKindIn::Permission => Self::Permission,
            BoundaryKindIn::Observation => Self::Observation,
            BoundaryKindIn::Unsupported => Self::Unsupported,
            BoundaryKindIn::PlanLimit => Self::PlanLimit,
        }
    }
}

impl From<TaskStep> for model::TaskStep {
    fn from(step: TaskStep) -> Self {
        Self {
            step: step.step.0,
            observation_id: step.observation_id.0,
            after_observation_id: step.after_observation_id.map(|id| id.0),
            target_id: step.target_id.0,
            label: step.label.0,
            action: step.action.into(),
            outcome: step.outcome.into(),
        }
    }
}

impl From<PlanIntent> for model::PlanIntent {
    fn from(intent: PlanIntent) -> Self {
        Self {
            role: intent.role.0,
            label: intent.label.0,
            action: intent.action.into(),
            automation_id: intent.automation_id.map(|v| v.0),
            framework_id: intent.framework_id.map(|v| v.0),
            toggle_state: intent.toggle_state.map(Into::into),
            is_selected: intent.is_selected,
        }
    }
}

impl From<PlanStep> for model::PlanStep {
    fn from(step: PlanStep) -> Self {
        Self {
            kind: match step.kind {
                PlanStepKindIn::Action => PlanStepKind::Action,
                PlanStepKindIn::Manual => PlanStepKind::Manual,
            },
            instruction: step.instruction.0,
            intent: step.intent.map(Into::into),
            control_id: step.control_id.map(|v| v.0),
            value: step.value.map(|v| v.0),
            scroll_direction: step.scroll_direction.map(Into::into),
            value_hash: step.value_hash.map(|v| v.0),
        }
    }
}

impl From<PlanSegment> for model::PlanSegment {
    fn from(plan: PlanSegment) -> Self {
        Self {
            plan_id: plan.plan_id.0,
            window_id: plan.window_id.0,
            resource_id: plan.resource_id.map(|v| v.0),
            steps: plan.steps.0.into_iter().map(Into::into).collect(),
            boundary: model::PlanBoundary {
                kind: plan.boundary.kind.into(),
                reason: plan.boundary.reason.0,
                needed: plan.boundary.needed.0,
            },
        }
    }
}

impl From<TaskProgress> for model::TaskProgress {
    fn from(task: TaskProgress) -> Self {
        Self {
            task_id: task.task_id.0,
            step: task.step.0,
            status: task.status.into(),
            history: task.history.0.into_iter().map(Into::into).collect(),
            remaining_work: task.remaining_work.0,
            user_input: task.user_input.0,
            plan: task.plan.map(Into::into),
            plan_cursor: task.plan_cursor.0,
            replan_reason: task.replan_reason.map(|v| v.0),
        }
    }
}

fn plan_out(plan: model::PlanSegment) -> responses::GuidancePlan {
    responses::GuidancePlan {
        plan_id: plan.plan_id,
        window_id: plan.window_id,
        resource_id: plan.resource_id,
        steps: plan
            .steps
            .into_iter()
            .map(|step| responses::GuidancePlanStep {
                kind: step.kind.as_str(),
                instruction: step.instruction,
                intent: step.intent.map(|intent| responses::GuidancePlanIntent {
                    role: intent.role,
                    label: intent.label,
                    action: intent.action.as_str(),
                    automation_id: intent.automation_id,
                    framework_id: intent.framework_id,
                    toggle_state: intent.toggle_state.map(ToggleState::as_str),
                    is_selected: intent.is_selected,
                }),
                control_id: step.control_id,
                value: step.value,
                scroll_direction: step.scroll_direction.map(ScrollDirection::as_str),
                value_hash: step.value_hash,
            })
            .collect(),
        boundary: responses::GuidancePlanBoundary {
            kind: plan.boundary.kind.as_str(),
            reason: plan.boundary.reason,
            needed: plan.boundary.needed,
        },
    }
}

impl From<UploadError> for ApiError {
    fn from(err: UploadError) -> Self {
        match err {
            UploadError::Refused(refusal) => refused(refusal),
            UploadError::Guidance(err) => Self::from(err),
        }
    }
}

/// The 422 of a refused upload: a validation item at the part of the body it concerns, or, for
/// the camera branch's cross-field rules, the sentence the reference gives.
#[must_use]
fn refused(refusal: ObservationRefusal) -> ApiError {
    let loc: &[&str] = match refusal {
        ObservationRefusal::Camera(camera) => {
            return ApiError::Core(local_core::Error::CameraRecovery(camera));
        }
        ObservationRefusal::Image(_) => &["body", "observation", "imageBase64"],
        ObservationRefusal::DuplicateElementIds | ObservationRefusal::ImageWorkFailed => {
            &["body", "observation"]
        }
        ObservationRefusal::ImageWorkClosed => &["body"],
        ObservationRefusal::Task(TaskRefusal::History | TaskRefusal::PlanCursor) => {
            &["body", "task"]
        }
        ObservationRefusal::Task(TaskRefusal::Plan) => &["body", "task", "plan"],
    };
    ApiError::Validation(vec![invalid(
        loc.iter().map(|s| Value::from(*s)).collect(),
        "value_error",
    )])
}

impl From<GuidanceResponse> for responses::Guidance {
    fn from(response: GuidanceResponse) -> Self {
        let result = response.result;
        Self {
            instruction: result.instruction,
            status: result.status.as_str(),
            target: result.target.map(|t| {
                let model = result.mode == model::Mode::Model;
                responses::Target {
                    label: t.label,
                    bounds: t.bounds.to_array(),
                    confidence: t.confidence,
                    process_id: t.process_id,
                    target_id: t.target_id,
                    automation_id: t.automation_id,
                    framework_id: t.framework_id,
                    is_enabled: t.is_enabled,
                    is_offscreen: t.is_offscreen,
                    toggle_state: t.toggle_state.map(ToggleState::as_str),
                    action: t.action.map(UiAction::as_str),
                    control_id: t.control_id,
                    value: model.then_some(t.value),
                    scroll_direction: model
                        .then(|| t.scroll_direction.map(ScrollDirection::as_str)),
                    value_hash: model.then_some(t.value_hash),
                    is_selected: if model { t.is_selected } else { None },
                }
            }),
            citations: result
                .citations
                .into_iter()
                .map(|c| responses::Citation {
                    source: c.source,
                    title: c.title,
                })
                .collect(),
            mode: result.mode.as_str(),
            correlation_id: response.correlation_id,
            observation_id: response.observation_id,
            window_id: response.window_id,
            remaining_work: result.remaining_work,
            plan: result.plan.map(plan_out),
            step: response.task.as_ref().map(|(_, step)| *step),
            task_id: response.task.map(|(id, _)| id),
            camera_recovery: response.camera.as_ref().map(camera_out),
        }
    }
}

impl From<NewSession> for responses::Session {
    fn from(session: NewSession) -> Self {
        Self {
            session_id: session.session_id.to_string(),
            expires_at: local_core::clock::iso_utc(session.expires_at),
        }
    }
}

impl From<SensitivityIn> for Sensitivity {
    fn from(sensitivity: SensitivityIn) -> Self {
        match sensitivity {
            SensitivityIn::Public => Self::Public,
            SensitivityIn::Internal => Self::Internal,
            SensitivityIn::Confidential => Self::Confidential,
            SensitivityIn::Restricted => Self::Restricted,
        }
    }
}

impl From<ContextEnvelope> for AssistContext {
    fn from(context: ContextEnvelope) -> Self {
        Self {
            session_id: context.session_id.0,
            sensitivity: context.sensitivity.into(),
            timestamp: Some(context.timestamp.0),
        }
    }
}

const fn response_mode(mode: ResponseMode) -> &'static str {
    match mode {
        ResponseMode::Text => "text",
        ResponseMode::Overlay => "overlay",
        ResponseMode::Voice => "voice",
    }
}

/// The wire form of an assist answer, echoing the response modes the request asked for.
#[must_use]
pub fn assist_answer(answer: AssistAnswer, modes: Vec<ResponseMode>) -> responses::Assist {
    responses::Assist {
        correlation_id: answer.correlation_id.to_string(),
        request_type: answer.request_type.as_str(),
        answer: answer.answer,
        citations: answer
            .citations
            .iter()
            .map(|p| responses::AssistCitation {
                source: p.source,
                title: p.title,
                modified: p.modified,
            })
            .collect(),
        response_modes: modes.into_iter().map(response_mode).collect(),
        mode: "demo",
    }
}

impl From<PreviewView> for responses::Preview {
    fn from(view: PreviewView) -> Self {
        Self {
            preview_id: view.preview_id.to_string(),
            tool: view.tool,
            parameters: view.parameters,
            effects: EFFECTS,
            risk_level: view.risk.as_str(),
            requires_confirmation: true,
            expiry_time: local_core::clock::iso_utc(view.expires_at),
            mock: true,
        }
    }
}

impl From<GrantView> for responses::Grant {
    fn from(grant: GrantView) -> Self {
        Self {
            grant_token: grant.token,
            expires_in: grant.expires_in,
            expires_at: local_core::clock::iso_utc(grant.expires_at),
            mock: true,
        }
    }
}

/// The wire form of the audit tail: `count` events held, the newest of them in `events`.
#[must_use]
pub fn audit_tail(count: usize, events: Vec<audit_ring::AuditEvent>) -> responses::AuditLog {
    responses::AuditLog {
        count,
        events: events
            .into_iter()
            .map(|e| responses::AuditEvent {
                correlation_id: e.correlation_id,
                timestamp: local_core::clock::iso_utc(e.timestamp),
                outcome: e.outcome,
            })
            .collect(),
    }
}

/// The wire form of a job.
#[must_use]
pub fn job(view: JobView) -> responses::Job {
    responses::Job {
        job_id: view.job_id.to_string(),
        status: view.status.as_str(),
        progress: view.progress(),
        result: view.succeeded_tool.map(|tool| responses::JobResult {
            mock: true,
            tool,
            external_effects: false,
            message: JOB_MESSAGE,
        }),
        error: None,
        mock: true,
    }
}

#[cfg(test)]
mod tests {
    use local_core::guide::{error::CameraRefusal, png_sanitise::PngError};
    use serde_json::json;

    use super::*;

    #[test]
    fn each_refusal_is_a_value_error_at_the_part_it_concerns() {
        let loc = |refusal| {
            let ApiError::Validation(items) = refused(refusal) else {
                panic!("not a validation item");
            };
            let item = &items[0];
            assert_eq!(
                (item.kind, item.msg),
                ("value_error", super::super::INVALID_VALUE)
            );
            Value::from(item.loc.clone())
        };
        assert_eq!(
            loc(ObservationRefusal::Image(PngError::NotPng)),
            json!(["body", "observation", "imageBase64"])
        );
        assert_eq!(
            loc(ObservationRefusal::DuplicateElementIds),
            json!(["body", "observation"])
        );
        assert_eq!(
            loc(ObservationRefusal::ImageWorkFailed),
            json!(["body", "observation"])
        );
        assert_eq!(loc(ObservationRefusal::ImageWorkClosed), json!(["body"]));
        assert_eq!(
            loc(ObservationRefusal::Task(TaskRefusal::History)),
            json!(["body", "task"])
        );
        assert_eq!(
            loc(ObservationRefusal::Task(TaskRefusal::PlanCursor)),
            json!(["body", "task"])
        );
        assert_eq!(
            loc(ObservationRefusal::Task(TaskRefusal::Plan)),
            json!(["body", "task", "plan"])
        );
        // The camera branch's cross-field rules answer with their sentence.
        let ApiError::Core(error) = refused(ObservationRefusal::Camera(CameraRefusal::TaskContext))
        else {
            panic!("not a sentence");
        };
        assert_eq!(
            error.to_string(),
            "Generic task context cannot authorize camera recovery"
        );
    }
}
