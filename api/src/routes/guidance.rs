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
        (status = 200, description = "One validated guidance result", body = Guidance),
        (status = 403, description = "Consent missing", body = ErrorDetail),
        (status = 404, description = "Unknown session", body = ErrorDetail),
        (status = 410, description = "Session expired", body = ErrorDetail),
        (status = 422, description = "Invalid request or image (validation list), or a stale observation (sentence)", body = Unprocessable,
            examples(
                ("invalid" = (summary = "The request broke its contract", value = json!({"detail": [{"loc": ["body", "observation", "elements", 1, "valueLength"], "type": "int_type", "msg": "Invalid request value"}]}))),
                ("stale" = (summary = "capturedAt is 60 s old or more, or over 5 s in the future", value = json!({"detail": "Observation must be at most 60 seconds old and at most 5 seconds in the future"}))),
            )),
        (status = 502, description = "Invalid or failed provider result", body = ErrorDetail),
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
