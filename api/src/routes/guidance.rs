//! `POST /v1/guidance`: one consented, fresh observation to one validated next step.

use axum::{Extension, Json, extract::State};
use local_core::guide::guidance::upload;

use crate::{
    AppState,
    boundary::{BodySize, LOCAL_OWNER},
    contracts::{
        StrictJson, guidance_upload, refused,
        requests::GuidanceRequest,
        responses::{ErrorDetail, Guidance, Unprocessable},
    },
    error::ApiError,
};

/// Asks the configured provider for the next step and validates its answer.
#[utoipa::path(post, path = "/v1/guidance", tag = "local", security(("bearer" = [])),
    request_body = GuidanceRequest,
    responses(
        (status = 200, description = "One validated guidance result; with `planSegments: true` a plan segment (`plan`, `target` null); with a `task`, its `taskId` and `step` echoed; with `cameraRecovery`, the camera engine's answer and its `cameraRecovery` object (the provider is never called)", body = Guidance,
            examples(
                ("step" = (summary = "The demo's next step", value = json!({"instruction": "Demo: select View logs yourself, then check the screen again.", "status": "next_step", "target": {"label": "View logs", "box": [0.1, 0.2, 0.3, 0.1], "confidence": 0.95, "processId": null, "targetId": null, "automationId": null, "frameworkId": null, "isEnabled": null, "isOffscreen": null, "toggleState": null, "action": null}, "citations": [], "mode": "demo", "correlationId": "6f1c2b8e-3d4a-4e5f-9a6b-7c8d9e0f1a2b", "observationId": "obs-1", "windowId": "win-1"}))),
                ("plan" = (summary = "The demo's plan segment for a task (planSegments: true)", value = json!({"instruction": "Demo plan segment; local checks are required before every action.", "status": "next_step", "target": null, "citations": [], "mode": "demo", "correlationId": "6f1c2b8e-3d4a-4e5f-9a6b-7c8d9e0f1a2b", "observationId": "obs-1", "windowId": "win-1", "plan": {"planId": "9b2d7c1e-0a4f-4e3b-8c6d-5f1a2b3c4d5e", "windowId": "win-1", "resourceId": null, "steps": [{"kind": "action", "instruction": "Demo: select Mark resolved.", "intent": {"role": "button", "label": "Mark resolved", "action": "invoke", "frameworkId": "WPF"}, "controlId": null, "value": null, "scrollDirection": null, "valueHash": null}], "boundary": {"kind": "completion_candidate", "reason": "Review the demo's Issue resolved state; goal completion is not independently verified.", "needed": ""}}, "taskId": "3f0c9a52-8d4e-4b7a-9c1d-2e5f6a7b8c9d", "step": 3}))),
                ("camera" = (summary = "The camera fixture's first step: Windows blocks the camera for Teams", value = json!({"instruction": "Windows blocks the camera for Teams; select Open camera settings.", "status": "next_step", "target": {"label": "Open camera settings", "box": [0.4, 0.7, 0.2, 0.06], "confidence": 0.95, "processId": null, "targetId": "tgt.q3V0m4m3Yx2p8b0kU5l1f0nQJj3dJ0e2xwz9mVQk3aA", "automationId": "prejoin-open-camera-settings", "frameworkId": "Chrome", "isEnabled": true, "isOffscreen": false, "toggleState": null, "action": null}, "citations": [], "mode": "demo", "correlationId": "6f1c2b8e-3d4a-4e5f-9a6b-7c8d9e0f1a2b", "observationId": "obs-1", "windowId": "win-teams", "cameraRecovery": {"profile": "teams-camera-recovery-win11-24h2-en-US-fixture-v1", "evidenceBasis": "fixture", "fixtureSupported": true, "settingsUiaProven": false, "rawPixelEvidenceUsed": false, "state": "camera_block_confirmed", "evidence": ["cameraToggleOff", "cameraBlockIndicator", "cameraSettingsButton"], "permissionState": "unknown", "verificationRequired": true}}))),
            )),
        (status = 403, description = "Consent missing", body = ErrorDetail),
        (status = 404, description = "Unknown session", body = ErrorDetail),
        (status = 410, description = "Session expired", body = ErrorDetail),
        (status = 422, description = "Invalid request or image (validation list), or a stale observation (sentence)", body = Unprocessable,
            examples(
                ("invalid" = (summary = "The request broke its contract", value = json!({"detail": [{"loc": ["body", "observation", "elements", 1, "valueLength"], "type": "int_type", "msg": "Invalid request value"}]}))),
                ("stale" = (summary = "capturedAt is 60 s old or more, or over 5 s in the future", value = json!({"detail": "Observation must be at most 60 seconds old and at most 5 seconds in the future"}))),
                ("history" = (summary = "17 history entries (at most 16)", value = json!({"detail": [{"loc": ["body", "task", "history"], "type": "too_long", "msg": "Invalid request value"}]}))),
                ("task" = (summary = "History steps not strictly increasing or not all below step, or planCursor past the plan", value = json!({"detail": [{"loc": ["body", "task"], "type": "value_error", "msg": "Invalid request value"}]}))),
                ("taskPlan" = (summary = "The task's plan breaks a segment rule (32 steps ending in completion_candidate, a manual step not last, ...)", value = json!({"detail": [{"loc": ["body", "task", "plan"], "type": "value_error", "msg": "Invalid request value"}]}))),
                ("planSegments" = (summary = "planSegments must be a JSON boolean", value = json!({"detail": [{"loc": ["body", "planSegments"], "type": "bool_type", "msg": "Invalid request value"}]}))),
                ("cameraTask" = (summary = "cameraRecovery together with task or planSegments: true", value = json!({"detail": "Generic task context cannot authorize camera recovery"}))),
                ("cameraVerificationIds" = (summary = "The verification names another session, observation or window", value = json!({"detail": "Camera verification must name this request's session, observation and window; send the verifier's report for this capture"}))),
                ("cameraVerificationTime" = (summary = "The verification is over 5 s away from observation.capturedAt (a stale one answers the freshness sentence)", value = json!({"detail": "Camera verification must be captured with the same observation"}))),
                ("cameraOrder" = (summary = "Captured before an observation this session already sent", value = json!({"detail": "Camera recovery observations must arrive in capture order: this one was captured before the last one; send a fresh capture"}))),
                ("cameraReuse" = (summary = "An observation id reused for other content", value = json!({"detail": "This observation id was already used for a different capture in this session; give every capture a new id"}))),
                ("cameraPremature" = (summary = "A verification before Teams is back with the permission on", value = json!({"detail": "Camera verification is premature: send it only with the Teams observation that was answered return_to_teams"}))),
                ("cameraTarget" = (summary = "An element carries a tgt. target id not issued for it", value = json!({"detail": "An element carries a tgt. target id that was not issued for it in this observation and session; send the element without that id"}))),
                ("cameraConflict" = (summary = "A verification while Teams shows the camera off", value = json!({"detail": "Camera verification conflicts with the observation: Teams shows the camera off; turn the camera on in Teams and capture again"}))),
                ("cameraLiveProbe" = (summary = "A verification with the live probe profile", value = json!({"detail": "The live probe profile never completes camera recovery; send no verification with it"}))),
                ("cameraPinnedMethod" = (summary = "A pinned-profile verification without reinitializationMethod", value = json!({"detail": "Camera verification for the pinned profile must say how the camera was reinitialized (reinitializationMethod)"}))),
                ("cameraActive" = (summary = "cameraActive must be true", value = json!({"detail": [{"loc": ["body", "cameraRecovery", "verification", "cameraActive"], "type": "value_error", "msg": "Invalid request value"}]}))),
            )),
        (status = 502, description = "Invalid or failed provider result: also a plan segment that breaks a plan rule or is not bound to the observation, or none when `planSegments` asked for one (`x-msguide-error-code: guidance-invalid-result`)", body = ErrorDetail,
            examples(
                ("invalid" = (summary = "Invalid result, target or plan", value = json!({"detail": "Invalid guidance result"}))),
                ("failed" = (summary = "The provider failed", value = json!({"detail": "Guidance provider failed"}))),
            )),
        (status = 504, description = "Guidance timed out", body = ErrorDetail),
    ))]
pub async fn guidance(
    State(app): State<AppState>,
    body_size: Option<Extension<BodySize>>,
    StrictJson(body): StrictJson<GuidanceRequest>,
) -> Result<Json<Guidance>, ApiError> {
    let body_bytes = body_size.map_or(0, |Extension(BodySize(n))| n);
    let upload = guidance_upload(body, body_bytes);
    let request = upload::admit(upload).await.map_err(refused)?;
    let response = app.local.guidance(LOCAL_OWNER, request).await?;
    Ok(Json(response.into()))
}
