//! `POST /v1/assist`: the legacy answer from bundled public sample passages.

use axum::extract::State;
use local_core::guide::assist::AssistContext;

use crate::{
    AppState,
    boundary::LOCAL_OWNER,
    contracts::{
        Reply, StrictJson, assist_answer, examples,
        requests::AssistRequest,
        responses::{Assist, ErrorDetail, Unprocessable},
    },
    error::ApiError,
};

/// Classifies the prompt and cites the sample passages it mentions.
#[utoipa::path(post, path = "/v1/assist", tag = "legacy", security(("bearer" = [])),
    request_body = AssistRequest,
    responses(
        (status = 200, description = "Sample answer", body = Assist),
        (status = 403, description = "Non-public context", body = ErrorDetail),
        (status = 404, description = "Unknown session", body = ErrorDetail),
        (status = 410, description = "Session expired", body = ErrorDetail),
        (status = 422, description = "Invalid request (validation list), or a context of another session or a stale context (sentence)", body = Unprocessable,
            examples(
                ("invalid" = (summary = "The request broke its contract", value = json!(examples::assist_invalid()))),
                ("otherSession" = (summary = "context.sessionId is not the request's sessionId", value = json!(examples::assist_other_session()))),
                ("stale" = (summary = "context.timestamp is 60 s old or more, or over 5 s in the future", value = json!(examples::assist_stale()))),
            )),
    ))]
pub async fn assist(
    State(app): State<AppState>,
    StrictJson(body): StrictJson<AssistRequest>,
) -> Result<Reply<Assist>, ApiError> {
    let context = body.context.map(AssistContext::from);
    let answer = app.local.assist(
        LOCAL_OWNER,
        &body.session_id.0,
        &body.prompt.0,
        context.as_ref(),
    )?;
    Ok(Reply(assist_answer(answer, body.response_modes.0)))
}
