//! `POST /v1/guidance`: one consented, fresh observation to one validated next step.

use axum::{Extension, Json, extract::State};

use crate::{
    AppState,
    boundary::{BodySize, LOCAL_OWNER},
    contracts::{
        StrictJson, guidance_request,
        requests::GuidanceRequest,
        responses::{ErrorDetail, Guidance, ValidationErrors},
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
        (status = 422, description = "Invalid request, invalid image, or stale observation", body = ValidationErrors),
        (status = 502, description = "Invalid or failed provider result", body = ErrorDetail),
        (status = 504, description = "Guidance timed out", body = ErrorDetail),
    ))]
pub async fn guidance(
    State(app): State<AppState>,
    body_size: Option<Extension<BodySize>>,
    StrictJson(body): StrictJson<GuidanceRequest>,
) -> Result<Json<Guidance>, ApiError> {
    let body_bytes = body_size.map_or(0, |Extension(BodySize(n))| n);
    let request = guidance_request(body, body_bytes).await?;
    let response = app.local.guidance(LOCAL_OWNER, request).await?;
    Ok(Json(response.into()))
}
