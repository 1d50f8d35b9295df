//! The local boundary: every request passes it before routing, in the reference's order.
//!
//! 1. loopback peer (403), 2. exactly one local `Host` (400), 3. no `Origin` (403),
//! 4. for `/v1`, `/v1/*` and `/admin/*`: a configured token (503) and exactly one well-formed
//!    `Bearer` header that matches in constant time (401, with a `WWW-Authenticate` that says
//!    whether the token was missing, malformed or wrong) — decided before the body is read,
//! 5. `Content-Length` rules (400/413), 6. a large body (an image) waits for one of
//!    [`LARGE_BODIES_IN_FLIGHT`] places, then the body is buffered under the cap, the wait and
//!    the read within one deadline (413/408). Its own rejections carry no `cache-control`;
//!    everything the application answers gets `cache-control: no-store`.

use std::{net::SocketAddr, time::Duration};

use axum::{
    body::{Body, Bytes, HttpBody as _},
    extract::{ConnectInfo, Request},
    http::{
        HeaderMap, HeaderValue, StatusCode,
        header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_LENGTH, HOST, ORIGIN, WWW_AUTHENTICATE},
    },
    response::Response,
};
use http_body_util::{BodyExt, LengthLimitError, Limited};
pub use local_core::secret::BearerFault;
use local_core::secret::LocalToken;
use tokio::sync::Semaphore;

use crate::error::detail;

/// The one principal every authenticated caller is: ownership is per machine, not per user.
pub const LOCAL_OWNER: &str = "local";

/// 403 for a peer that is not a loopback address.
pub const LOOPBACK_REQUIRED: &str = "Loopback client required";
/// 400 for a `Host` that is missing, repeated or not local.
pub const LOCAL_HOST_REQUIRED: &str = "Local Host required";
/// 403 for any request with an `Origin` (a browser's).
pub const ORIGIN_REFUSED: &str = "Browser origins are not allowed";
/// 503 for a protected route when no valid token was configured.
pub const AUTH_NOT_CONFIGURED: &str = "Local authentication is not configured";
/// 401 for a missing, malformed or wrong bearer.
pub const UNAUTHORIZED: &str = "Unauthorized";
/// 400 for a `Content-Length` that is repeated or not a number.
pub const INVALID_CONTENT_LENGTH: &str = "Invalid Content-Length";
/// 413 for a body over the cap.
pub const BODY_TOO_LARGE: &str = "Request body too large";
/// 408 for a body not sent within the deadline.
pub const BODY_TIMED_OUT: &str = "Request body timed out";
/// 400 for a body cut short.
pub const BODY_INCOMPLETE: &str = "Request body incomplete";

/// Bodies larger than this (or of unknown length) are large: a guidance request without an
/// image is a few kilobytes, one with a 1600×1600 screenshot hundreds of them.
pub const SMALL_BODY_BYTES: u64 = 64 * 1024;
/// Large bodies read and answered at once, one per core: each is an image whose sanitising is
/// CPU-bound, so more at once only holds more bodies and pixel buffers in memory. The rest
/// wait before a byte of their body is read (it stays in the kernel's socket buffer).
pub const LARGE_BODIES_IN_FLIGHT: usize = 2;
static LARGE_BODIES: Semaphore = Semaphore::const_new(LARGE_BODIES_IN_FLIGHT);

/// Size of the buffered request body, kept for diagnostics.
#[derive(Debug, Clone, Copy)]
pub struct BodySize(pub usize);

/// What the boundary needs to know.
#[derive(Debug)]
pub struct Boundary {
    /// The launcher's token, when configured and well-formed.
    pub token: Option<LocalToken>,
    /// Largest body accepted.
    pub max_body_bytes: usize,
    /// Longest a client may take to send its body.
    pub body_timeout: Duration,
}

fn is_loopback_peer(request: &Request) -> bool {
    // No peer address means an in-process call (tests without a socket), which the reference
    // also lets through.
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .is_none_or(|ConnectInfo(peer)| local_core::loopback::is_loopback_peer(peer.ip()))
}

fn has_local_host(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(HOST).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    value
        .to_str()
        .is_ok_and(local_core::loopback::is_local_authority)
}

fn is_protected(path: &str) -> bool {
    path == "/v1" || path.starts_with("/v1/") || path.starts_with("/admin/")
}

/// The `WWW-Authenticate` challenge (RFC 6750) of a refused bearer: what was wrong and what
/// to send instead. It never quotes the presented value.
#[must_use]
pub const fn challenge(fault: BearerFault) -> &'static str {
    match fault {
        // RFC 6750 3.1: a request without credentials gets no error code.
        BearerFault::Missing => {
            "Bearer realm=\"msguide\", error_description=\"No bearer token was sent; send Authorization: Bearer followed by the token in MSGUIDE_LOCAL_TOKEN\""
        }
        BearerFault::Malformed => {
            "Bearer realm=\"msguide\", error=\"invalid_request\", error_description=\"The Authorization header is malformed; send exactly one header of the form Bearer <token>\""
        }
        BearerFault::Wrong => {
            "Bearer realm=\"msguide\", error=\"invalid_token\", error_description=\"The bearer token is not the one this service was started with; use the current MSGUIDE_LOCAL_TOKEN\""
        }
    }
}

/// Exactly one header of scheme `Bearer` (any case), one space, a b64token, equal to ours.
fn check_bearer(headers: &HeaderMap, token: &LocalToken) -> Result<(), BearerFault> {
    local_core::secret::check_bearer(
        headers
            .get_all(AUTHORIZATION)
            .iter()
            .map(HeaderValue::as_bytes),
        token,
    )
}

enum LengthCheck {
    Fine,
    Invalid,
    TooLarge,
}

fn check_content_length(headers: &HeaderMap, max: usize) -> LengthCheck {
    let mut values = headers.get_all(CONTENT_LENGTH).iter();
    let Some(value) = values.next() else {
        return LengthCheck::Fine;
    };
    let bytes = value.as_bytes();
    if values.next().is_some()
        || bytes.is_empty()
        || bytes.len() > 20
        || !bytes.iter().all(u8::is_ascii_digit)
    {
        return LengthCheck::Invalid;
    }
    let length = std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse::<u128>().ok());
    match length {
        Some(n) if n <= max as u128 => LengthCheck::Fine,
        Some(_) => LengthCheck::TooLarge,
        None => LengthCheck::Invalid,
    }
}

/// Passes `request` to `next` if it keeps every rule of the boundary, or answers it here.
pub async fn enforce<F, Answer>(boundary: &Boundary, request: Request, next: F) -> Response
where
    F: FnOnce(Request) -> Answer,
    Answer: Future<Output = Response>,
{
    if !is_loopback_peer(&request) {
        return detail(StatusCode::FORBIDDEN, LOOPBACK_REQUIRED);
    }
    if !has_local_host(request.headers()) {
        return detail(StatusCode::BAD_REQUEST, LOCAL_HOST_REQUIRED);
    }
    if request.headers().contains_key(ORIGIN) {
        return detail(StatusCode::FORBIDDEN, ORIGIN_REFUSED);
    }
    if is_protected(request.uri().path()) {
        let Some(token) = &boundary.token else {
            return detail(StatusCode::SERVICE_UNAVAILABLE, AUTH_NOT_CONFIGURED);
        };
        if let Err(fault) = check_bearer(request.headers(), token) {
            let mut response = detail(StatusCode::UNAUTHORIZED, UNAUTHORIZED);
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge(fault)));
            return response;
        }
    }
    match check_content_length(request.headers(), boundary.max_body_bytes) {
        LengthCheck::Fine => {}
        LengthCheck::Invalid => return detail(StatusCode::BAD_REQUEST, INVALID_CONTENT_LENGTH),
        LengthCheck::TooLarge => {
            return detail(StatusCode::PAYLOAD_TOO_LARGE, BODY_TOO_LARGE);
        }
    }

    let (parts, body) = request.into_parts();
    // hyper knows the exact length of a body with a Content-Length (and 0 without a body).
    let declared = body.size_hint().exact();
    let large = declared.is_none_or(|length| length > SMALL_BODY_BYTES);
    let limited = Limited::new(body, boundary.max_body_bytes);
    let read = async {
        // Held until the answer is built, so at most that many images are buffered, parsed and
        // sanitised at once however many clients send one. The semaphore is never closed.
        let place = if large {
            LARGE_BODIES.acquire().await.ok()
        } else {
            None
        };
        let capacity = declared.and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
        (place, read_body(limited, capacity).await)
    };
    // Waiting for a place counts against the body deadline: a body not read in time is a 408
    // whether the client or the queue held it up.
    let (place, bytes) = match tokio::time::timeout(boundary.body_timeout, read).await {
        Err(_elapsed) => return detail(StatusCode::REQUEST_TIMEOUT, BODY_TIMED_OUT),
        Ok((_, Err(error))) if error.downcast_ref::<LengthLimitError>().is_some() => {
            return detail(StatusCode::PAYLOAD_TOO_LARGE, BODY_TOO_LARGE);
        }
        // The client went away mid-body: nobody is left to answer.
        Ok((_, Err(_))) => return detail(StatusCode::BAD_REQUEST, BODY_INCOMPLETE),
        Ok((place, Ok(bytes))) => (place, bytes),
    };
    let size = BodySize(bytes.len());
    let mut request = Request::from_parts(parts, Body::from(bytes));
    request.extensions_mut().insert(size);

    let mut response = next(request).await;
    drop(place);
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Reads a whole body into one buffer of its declared size (already checked against the cap),
/// so a large body is neither reallocated as it grows nor copied out of its chunks.
async fn read_body(
    mut body: Limited<Body>,
    capacity: usize,
) -> Result<Bytes, Box<dyn std::error::Error + Send + Sync>> {
    let mut buffer = Vec::with_capacity(capacity);
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            buffer.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(buffer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_prefixes() {
        for p in ["/v1", "/v1/", "/v1/sessions", "/admin/audit-log", "/admin/"] {
            assert!(is_protected(p), "{p}");
        }
        for p in [
            "/v1x",
            "/adminx",
            "/admin",
            "/health",
            "/docs",
            "/openapi.json",
            "/redoc",
        ] {
            assert!(!is_protected(p), "{p}");
        }
    }

    #[test]
    fn bearer_rules() {
        let token = LocalToken::from_configured(Some("good")).unwrap();
        let check = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for v in values {
                headers.append(AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            }
            check_bearer(&headers, &token)
        };
        // The rules themselves are core's (`secret::check_bearer`, tested there); this checks
        // that every Authorization header reaches them.
        assert_eq!(check(&["Bearer good"]), Ok(()));
        assert_eq!(check(&["Basic good"]), Err(BearerFault::Malformed));
        assert_eq!(check(&["Bearer wrong"]), Err(BearerFault::Wrong));
        assert_eq!(
            check(&["Bearer good", "Bearer good"]),
            Err(BearerFault::Malformed)
        );
        assert_eq!(check(&[]), Err(BearerFault::Missing));
        for fault in [
            BearerFault::Missing,
            BearerFault::Malformed,
            BearerFault::Wrong,
        ] {
            assert!(HeaderValue::from_str(challenge(fault)).is_ok());
            assert!(challenge(fault).starts_with("Bearer "));
        }
    }
}
