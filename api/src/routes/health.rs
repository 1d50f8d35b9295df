//! `GET /health`: status, version and provider mode, without a bearer.

use axum::extract::State;

use crate::{
    AppState,
    contracts::{Reply, responses::Health},
};

/// The API version this build speaks.
pub const API_VERSION: &str = "0.2.0";

/// Reports that the service is up and which kind of provider answers.
#[utoipa::path(get, path = "/health", tag = "local",
    responses((status = 200, description = "The service is up", body = Health)))]
pub async fn health(State(app): State<AppState>) -> Reply<Health> {
    Reply(Health {
        status: "ok",
        mode: app.local.provider().mode().as_str(),
        version: API_VERSION,
    })
}
