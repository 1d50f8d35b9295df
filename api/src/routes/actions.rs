//! `/v1/actions/*`: preview a mock tool, confirm for a single-use grant, execute a simulated job.

use axum::extract::{Path, State};

use crate::{
    AppState,
    boundary::LOCAL_OWNER,
    contracts::{
        Reply, StrictJson, examples, job,
        requests::{ExecuteRequest, PreviewRequest},
        responses::{
            ErrorDetail, Grant, Job, Preview, PreviewForbidden, Unprocessable, ValidationErrors,
        },
    },
    error::ApiError,
};

/// Validates and stores a preview of a low- or medium-risk mock tool.
///
/// `view_logs` (low risk) and `create_work_item` (medium risk) are simulations that need a
/// confirmation; `modify_service_config` and `delete_personal_data` are high risk and answer
/// 403 `STEP_UP_REQUIRED`; any other name is blocked and answers 403 `DENIED`.
#[utoipa::path(post, path = "/v1/actions/preview", tag = "actions", security(("bearer" = [])),
    request_body(content = PreviewRequest, examples(
        ("viewLogs" = (summary = "Low risk: view_logs (application is optional, default MSGuide Demo)", value = json!(examples::actions_view_logs()))),
        ("createWorkItem" = (summary = "Medium risk: create_work_item (title required, description optional)", value = json!(examples::actions_create_work_item()))),
        ("highRisk" = (summary = "High risk: answers 403 STEP_UP_REQUIRED", value = json!(examples::actions_high_risk()))),
        ("unknown" = (summary = "Unknown or blocked: answers 403 DENIED", value = json!(examples::actions_unknown()))),
    )),
    responses(
        (status = 200, description = "Stored preview", body = Preview,
            links(
                ("confirm" = (operation_id = "confirm",
                    parameters(("previewId" = "$response.body#/previewId")),
                    description = "Confirm this preview for its one grant")),
                ("execute" = (operation_id = "execute",
                    parameters(("previewId" = "$response.body#/previewId")),
                    description = "Execute this preview (needs the grant confirm issues)")),
            )),
        (status = 403, description = "A high-risk tool (STEP_UP_REQUIRED) or an unknown or blocked one (DENIED)", body = PreviewForbidden,
            examples(
                ("stepUp" = (summary = "modify_service_config or delete_personal_data", value = json!(examples::actions_step_up()))),
                ("denied" = (summary = "Any tool but the four named ones", value = json!(examples::actions_denied()))),
            )),
        (status = 422, description = "Invalid request (validation list), or parameters that do not fit the tool (sentence)", body = Unprocessable,
            examples(
                ("invalid" = (summary = "The request broke its contract", value = json!(examples::actions_invalid()))),
                ("parameters" = (summary = "create_work_item without a title, an unknown parameter, or a value out of range", value = json!(examples::actions_parameters()))),
            )),
        (status = 429, description = "Local state capacity reached", body = ErrorDetail),
    ))]
pub async fn preview(
    State(app): State<AppState>,
    StrictJson(body): StrictJson<PreviewRequest>,
) -> Result<Reply<Preview>, ApiError> {
    let view = app
        .local
        .preview_action(LOCAL_OWNER, &body.tool.0, &body.parameters)?;
    Ok(Reply(view.into()))
}

/// Issues the one grant a preview ever gets.
#[utoipa::path(post, path = "/v1/actions/{previewId}/confirm", tag = "actions", security(("bearer" = [])),
    params(("previewId" = String, Path, description = "The preview's id")),
    responses(
        (status = 200, description = "Single-use grant", body = Grant,
            links(
                ("execute" = (operation_id = "execute",
                    parameters(("previewId" = "$request.path.previewId")),
                    request_body = json!({"grantToken": "$response.body#/grantToken"}),
                    description = "Spend the grant on the preview it was issued for")),
            )),
        (status = 404, description = "Unknown preview", body = ErrorDetail),
        (status = 409, description = "Already confirmed", body = ErrorDetail),
        (status = 410, description = "Preview expired", body = ErrorDetail),
    ))]
pub async fn confirm(
    State(app): State<AppState>,
    Path(preview_id): Path<String>,
) -> Result<Reply<Grant>, ApiError> {
    let grant = app.local.confirm_action(LOCAL_OWNER, &preview_id)?;
    Ok(Reply(grant.into()))
}

/// Consumes the grant and starts the simulated job.
#[utoipa::path(post, path = "/v1/actions/{previewId}/execute", tag = "actions", security(("bearer" = [])),
    params(("previewId" = String, Path, description = "The preview's id")),
    request_body = ExecuteRequest,
    responses(
        (status = 200, description = "The started job", body = Job,
            links(
                ("getJob" = (operation_id = "get_job",
                    parameters(("jobId" = "$response.body#/jobId")),
                    description = "Read the job's state")),
                ("cancelJob" = (operation_id = "cancel_job",
                    parameters(("jobId" = "$response.body#/jobId")),
                    description = "Cancel the job while it runs")),
            )),
        (status = 403, description = "Invalid grant or tool no longer permitted", body = ErrorDetail),
        (status = 404, description = "Unknown preview", body = ErrorDetail),
        (status = 409, description = "Grant already consumed", body = ErrorDetail),
        (status = 410, description = "Preview or grant expired", body = ErrorDetail),
        (status = 422, description = "Invalid request", body = ValidationErrors,
            example = json!(examples::actions_status_422())),
        (status = 429, description = "Too many active mock jobs or capacity reached", body = ErrorDetail),
    ))]
pub async fn execute(
    State(app): State<AppState>,
    Path(preview_id): Path<String>,
    StrictJson(body): StrictJson<ExecuteRequest>,
) -> Result<Reply<Job>, ApiError> {
    let view = app
        .local
        .execute_action(LOCAL_OWNER, &preview_id, &body.grant_token.0)?;
    Ok(Reply(job(view)))
}
