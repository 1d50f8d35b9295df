//! `POST /v1/guidance`: one consented, fresh observation to one validated next step.

use axum::{Extension, extract::State};

use crate::{
    AppState,
    boundary::{BodySize, LOCAL_OWNER},
    contracts::{
        Reply, StrictJson, examples, guidance_upload,
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
                ("step" = (summary = "The demo's next step", value = json!(examples::guidance_step()))),
                ("plan" = (summary = "The demo's plan segment for a task (planSegments: true)", value = json!(examples::guidance_plan()))),
                ("camera" = (summary = "The camera fixture's first step: Windows blocks the camera for Teams", value = json!(examples::guidance_camera()))),
            )),
        (status = 403, description = "Consent missing", body = ErrorDetail),
        (status = 404, description = "Unknown session", body = ErrorDetail),
        (status = 410, description = "Session expired", body = ErrorDetail),
        (status = 422, description = "Invalid request or image (validation list), or a stale observation (sentence)", body = Unprocessable,
            examples(
                ("invalid" = (summary = "The request broke its contract", value = json!(examples::guidance_invalid()))),
                ("stale" = (summary = "capturedAt is 60 s old or more, or over 5 s in the future", value = json!(examples::guidance_stale()))),
                ("history" = (summary = "17 history entries (at most 16)", value = json!(examples::guidance_history()))),
                ("task" = (summary = "History steps not strictly increasing or not all below step, or planCursor past the plan", value = json!(examples::guidance_task()))),
                ("taskPlan" = (summary = "The task's plan breaks a segment rule (32 steps ending in completion_candidate, a manual step not last, ...)", value = json!(examples::guidance_task_plan()))),
                ("planSegments" = (summary = "planSegments must be a JSON boolean", value = json!(examples::guidance_plan_segments()))),
                ("cameraTask" = (summary = "cameraRecovery together with task or planSegments: true", value = json!(examples::guidance_camera_task()))),
                ("cameraVerificationIds" = (summary = "The verification names another session, observation or window", value = json!(examples::guidance_camera_verification_ids()))),
                ("cameraVerificationTime" = (summary = "The verification is over 5 s away from observation.capturedAt (a stale one answers the freshness sentence)", value = json!(examples::guidance_camera_verification_time()))),
                ("cameraOrder" = (summary = "Captured before an observation this session already sent", value = json!(examples::guidance_camera_order()))),
                ("cameraReuse" = (summary = "An observation id reused for other content", value = json!(examples::guidance_camera_reuse()))),
                ("cameraPremature" = (summary = "A verification before Teams is back with the permission on", value = json!(examples::guidance_camera_premature()))),
                ("cameraTarget" = (summary = "An element carries a tgt. target id not issued for it", value = json!(examples::guidance_camera_target()))),
                ("cameraConflict" = (summary = "A verification while Teams shows the camera off", value = json!(examples::guidance_camera_conflict()))),
                ("cameraLiveProbe" = (summary = "A verification with the live probe profile", value = json!(examples::guidance_camera_live_probe()))),
                ("cameraPinnedMethod" = (summary = "A pinned-profile verification without reinitializationMethod", value = json!(examples::guidance_camera_pinned_method()))),
                ("cameraActive" = (summary = "cameraActive must be true", value = json!(examples::guidance_camera_active()))),
            )),
        (status = 502, description = "Invalid or failed provider result: also a plan segment that breaks a plan rule or is not bound to the observation, or none when `planSegments` asked for one (`x-msguide-error-code: guidance-invalid-result`)", body = ErrorDetail,
            examples(
                ("invalid" = (summary = "Invalid result, target or plan", value = json!(examples::guidance_invalid_2()))),
                ("failed" = (summary = "The provider failed", value = json!(examples::guidance_failed()))),
            )),
        (status = 504, description = "Guidance timed out", body = ErrorDetail),
    ))]
pub async fn guidance(
    State(app): State<AppState>,
    body_size: Option<Extension<BodySize>>,
    StrictJson(body): StrictJson<GuidanceRequest>,
) -> Result<Reply<Guidance>, ApiError> {
    let body_bytes = body_size.map_or(0, |Extension(BodySize(n))| n);
    let upload = guidance_upload(body, body_bytes);
    let response = app.local.guidance_upload(LOCAL_OWNER, upload).await?;
    Ok(Reply(response.into()))
}
