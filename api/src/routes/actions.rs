//! `/v1/actions/*`: preview a mock tool, confirm for a single-use grant, execute a simulated job.

use axum::{
    Json,
    extract::{Path, State},
};
use local_core::actions::EFFECTS;

use crate::{
    AppState,
    boundary::LOCAL_OWNER,
    contracts::{
        StrictJson, job,
        requests::{ExecuteRequest, PreviewRequest},
        responses::{Denied, ErrorDetail, Grant, Job, Preview, ValidationErrors},
    },
    error::ApiError,
};

/// Validates and stores a preview of a low- or medium-risk mock tool.
#[utoipa::path(post, path = "/v1/actions/preview", tag = "actions", security(("bearer" = [])),
    request_body = PreviewRequest,
    responses(
        (status = 200, description = "Stored preview", body = Preview),
        (status = 403, description = "STEP_UP_REQUIRED or DENIED", body = Denied),
        (status = 422, description = "Invalid request or mock tool parameters", body = ValidationErrors),
        (status = 429, description = "Local state capacity reached", body = ErrorDetail),
    ))]
pub async fn preview(
    State(app): State<AppState>,
    StrictJson(body): StrictJson<PreviewRequest>,
) -> Result<Json<Preview>, ApiError> {
    let view = app
        .local
        .preview_action(LOCAL_OWNER, &body.tool.0, &body.parameters)?;
    Ok(Json(Preview {
        preview_id: view.preview_id.to_string(),
        tool: view.tool,
        parameters: view.parameters,
        effects: EFFECTS,
        risk_level: view.risk.as_str(),
        requires_confirmation: true,
        expiry_time: local_core::clock::iso_utc(view.expires_at),
        mock: true,
    }))
}

/// Issues the one grant a preview ever gets.
#[utoipa::path(post, path = "/v1/actions/{previewId}/confirm", tag = "actions", security(("bearer" = [])),
    params(("previewId" = String, Path, description = "The preview's id")),
    responses(
        (status = 200, description = "Single-use grant", body = Grant),
        (status = 404, description = "Unknown preview", body = ErrorDetail),
        (status = 409, description = "Already confirmed", body = ErrorDetail),
        (status = 410, description = "Preview expired", body = ErrorDetail),
    ))]
pub async fn confirm(
    State(app): State<AppState>,
    Path(preview_id): Path<String>,
) -> Result<Json<Grant>, ApiError> {
    let grant = app.local.confirm_action(LOCAL_OWNER, &preview_id)?;
    Ok(Json(Grant {
        grant_token: grant.token,
        expires_in: grant.expires_in,
        expires_at: local_core::clock::iso_utc(grant.expires_at),
        mock: true,
    }))
}

/// Consumes the grant and starts the simulated job.
#[utoipa::path(post, path = "/v1/actions/{previewId}/execute", tag = "actions", security(("bearer" = [])),
    params(("previewId" = String, Path, description = "The preview's id")),
    request_body = ExecuteRequest,
    responses(
        (status = 200, description = "The started job", body = Job),
        (status = 403, description = "Invalid grant or tool no longer permitted", body = ErrorDetail),
        (status = 404, description = "Unknown preview", body = ErrorDetail),
        (status = 409, description = "Grant already consumed", body = ErrorDetail),
        (status = 410, description = "Preview or grant expired", body = ErrorDetail),
        (status = 422, description = "Invalid request", body = ValidationErrors),
        (status = 429, description = "Too many active mock jobs or capacity reached", body = ErrorDetail),
    ))]
pub async fn execute(
    State(app): State<AppState>,
    Path(preview_id): Path<String>,
    StrictJson(body): StrictJson<ExecuteRequest>,
) -> Result<Json<Job>, ApiError> {
    let view = app
        .local
        .execute_action(LOCAL_OWNER, &preview_id, &body.grant_token.0)?;
    Ok(Json(job(view)))
}
