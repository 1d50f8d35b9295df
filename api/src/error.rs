//! The one mapping from core failures and contract violations to HTTP responses.

use axum::{
    http::{HeaderName, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use local_core::guide::error::{Error, ErrorKind, GuidanceFailure};

use crate::contracts::{
    Reply,
    responses::{Denied, ErrorDetail, ValidationErrors, ValidationItem},
};

/// Correlation id of a failed guidance request.
pub const CORRELATION_HEADER: HeaderName = HeaderName::from_static("x-msguide-correlation-id");
/// Sanitised failure code of a failed guidance request.
pub const ERROR_CODE_HEADER: HeaderName = HeaderName::from_static("x-msguide-error-code");
/// Type name of an unexpected provider failure.
pub const ERROR_TYPE_HEADER: HeaderName = HeaderName::from_static("x-msguide-error-type");

/// Everything a handler can fail with.
#[derive(Debug)]
pub enum ApiError {
    /// A core operation refused or failed.
    Core(Error),
    /// The request did not fit its contract (422, list form).
    Validation(Vec<ValidationItem>),
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        Self::Core(error)
    }
}

impl From<ValidationItem> for ApiError {
    fn from(item: ValidationItem) -> Self {
        Self::Validation(vec![item])
    }
}

/// The HTTP status of a core failure.
#[must_use]
pub const fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Gone => StatusCode::GONE,
        ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::BadGateway => StatusCode::BAD_GATEWAY,
        ErrorKind::GatewayTimeout => StatusCode::GATEWAY_TIMEOUT,
    }
}

/// A `{"detail": ...}` response with the given status.
pub fn detail(status: StatusCode, message: &str) -> Response {
    (
        status,
        Reply(ErrorDetail {
            detail: message.to_owned(),
        }),
    )
        .into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let error = match self {
            Self::Validation(items) => {
                return (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    Reply(ValidationErrors { detail: items }),
                )
                    .into_response();
            }
            Self::Core(error) => error,
        };
        let status = status_of(error.kind());
        let mut response = match &error {
            Error::ActionDenied(denial) => (
                status,
                Reply(Denied {
                    status: denial.as_str(),
                    detail: error.to_string(),
                }),
            )
                .into_response(),
            _ => detail(status, &error.to_string()),
        };
        let headers = response.headers_mut();
        let mut set = |name: HeaderName, value: String| {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        };
        if let Some((correlation_id, failure)) = error.guidance_failure() {
            set(CORRELATION_HEADER, correlation_id.to_string());
            if let Some(code) = failure.error_code() {
                set(ERROR_CODE_HEADER, code);
            }
            if let GuidanceFailure::Unexpected { error_type } = failure {
                set(ERROR_TYPE_HEADER, error_type.clone());
            }
        }
        response
    }
}
