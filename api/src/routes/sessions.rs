//! `POST /v1/sessions`: a one-hour local session; any body is ignored.

use axum::extract::State;

use crate::{
    AppState,
    boundary::LOCAL_OWNER,
    contracts::{
        Reply,
        responses::{ErrorDetail, Session},
    },
    error::ApiError,
};

/// Creates a session.
#[utoipa::path(post, path = "/v1/sessions", tag = "local", security(("bearer" = [])),
    responses(
        (status = 200, description = "Session created", body = Session,
            links(
                ("guidance" = (operation_id = "guidance",
                    request_body = json!({"sessionId": "$response.body#/sessionId"}),
                    description = "The session guidance requests belong to")),
                ("assist" = (operation_id = "assist",
                    request_body = json!({"sessionId": "$response.body#/sessionId"}),
                    description = "The session assist requests belong to")),
            )),
        (status = 429, description = "Local state capacity reached", body = ErrorDetail),
    ))]
pub async fn create_session(State(app): State<AppState>) -> Result<Reply<Session>, ApiError> {
    Ok(Reply(app.local.create_session(LOCAL_OWNER)?.into()))
}
