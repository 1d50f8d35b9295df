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

use std::{
    convert::Infallible,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use axum::{extract::Request, response::Response};
use local_core::LocalState;

pub use routes::openapi;

/// What handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The capability core's state.
    pub local: Arc<LocalState>,
}

/// The whole service: boundary first, then the application.
#[derive(Debug, Clone)]
pub struct App(Arc<Parts>);

#[derive(Debug)]
struct Parts {
    boundary: boundary::Boundary,
    application: routes::Application,
}

/// The whole service over `local`, behind `boundary`.
#[must_use]
pub fn app(local: Arc<LocalState>, boundary: boundary::Boundary) -> App {
    App(Arc::new(Parts {
        boundary,
        application: routes::Application::new(AppState { local }),
    }))
}

impl App {
    /// Answers one request. The boundary and the framework rules are plain calls, not
    /// middleware layers: each layer boxed the rest of the chain again for every request.
    pub async fn answer(&self, request: Request) -> Response {
        let parts = &self.0;
        boundary::enforce(&parts.boundary, request, |request| {
            parts.application.answer(request)
        })
        .await
    }
}

impl tower::Service<Request> for App {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let app = self.clone();
        Box::pin(async move { Ok(app.answer(request).await) })
    }
}
