//! The MSGuide local API: a loopback axum service over [`local_core`].
//!
//! # Layout
//! - [`boundary`]: the local boundary every request passes first.
//! - [`contracts`]: wire types, the strict JSON extractor, conversions to core types.
//! - [`routes`]: one file per route group; handlers only convert and dispatch.
//! - [`error`]: the single mapping from failures to HTTP responses.
//! - [`openapi`](mod@openapi): the document's frame and the boundary's answers (the paths come from the handlers).
//! - [`server`]: the accept loop with header deadlines and a connection cap.
//! - [`config`]: environment and bind-address validation.

// A library says nothing on the terminal itself: it logs through tracing or returns what a
// program prints (tests/tests/suite/tidy.rs checks this attribute stays).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod boundary;
pub mod config;
pub mod contracts;
pub mod error;
pub mod openapi;
pub mod routes;
pub mod server;

use std::sync::Arc;

use axum::{Router, middleware};
use local_core::LocalState;

pub use routes::openapi;

/// What handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The capability core's state.
    pub local: Arc<LocalState>,
}

/// The whole service: boundary first, then the application.
pub fn app(local: Arc<LocalState>, boundary: boundary::Boundary) -> Router {
    // The application is a router whose one route is its fallback, so this layer wraps that
    // fallback and runs before the framework rules; a router of its own around it would be
    // one more routing of every request.
    routes::application(AppState { local }).layer(middleware::from_fn_with_state(
        Arc::new(boundary),
        boundary::enforce,
    ))
}
