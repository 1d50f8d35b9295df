//! The local boundary: every request passes it before routing, in the reference's order.
//!
//! 1. loopback peer (403), 2. exactly one local `Host` (400), 3. no `Origin` (403),
//! 4. for `/v1`, `/v1/*` and `/admin/*`: a configured token (503) and exactly one well-formed
//!    `Bearer` header that matches in constant time (401) — decided before the body is read,
//! 5. `Content-Length` rules (400/413), 6. the body buffered under the cap and a read deadline
//!    (413/408). Its own rejections carry no `cache-control`; everything the application
//!    answers gets `cache-control: no-store`.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    body::Body,
    extract::{ConnectInfo, Request, State},
    http::{
        HeaderMap, HeaderValue, StatusCode,
        header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_LENGTH, HOST, ORIGIN},
    },
    middleware::Next,
    response::Response,
};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use local_core::secret::{LocalToken, is_b64token};

use crate::error::detail;

/// The one principal every authenticated caller is: ownership is per machine, not per user.
pub const LOCAL_OWNER: &str = "local";

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
    request.extensions().get::<ConnectInfo<SocketAddr>>().is_none_or(|ConnectInfo(peer)| {
        let ip = peer.ip();
        ip.is_loopback() || matches!(ip, std::net::IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()))
    })
}

/// The host name of a `Host` value, parsed like a URL authority: userinfo dropped, brackets
/// kept for IPv6, port ignored, lower-cased.
fn host_name(value: &str) -> Option<String> {
    let authority = value.rsplit_once('@').map_or(value, |(_, rest)| rest);
    let host = if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.starts_with(':')) {
            return None;
        }
        inside
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    Some(host.to_ascii_lowercase())
}

fn has_local_host(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(HOST).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    value
        .to_str()
        .ok()
        .and_then(host_name)
        .is_some_and(|host| matches!(host.as_str(), "localhost" | "127.0.0.1" | "::1"))
}

fn is_protected(path: &str) -> bool {
    path == "/v1" || path.starts_with("/v1/") || path.starts_with("/admin/")
}

/// Exactly one header of scheme `Bearer` (any case), one space, a b64token, equal to ours.
fn bearer_matches(headers: &HeaderMap, token: &LocalToken) -> bool {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    let Ok(value) = value.to_str() else {
        return false;
    };
    let Some((scheme, presented)) = value.split_once(' ') else {
        return false;
    };
    scheme.eq_ignore_ascii_case("bearer") && is_b64token(presented) && token.matches(presented)
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

/// The boundary middleware.
pub async fn enforce(
    State(boundary): State<Arc<Boundary>>,
    request: Request,
    next: Next,
) -> Response {
    if !is_loopback_peer(&request) {
        return detail(StatusCode::FORBIDDEN, "Loopback client required");
    }
    if !has_local_host(request.headers()) {
        return detail(StatusCode::BAD_REQUEST, "Local Host required");
    }
    if request.headers().contains_key(ORIGIN) {
        return detail(StatusCode::FORBIDDEN, "Browser origins are not allowed");
    }
    if is_protected(request.uri().path()) {
        let Some(token) = &boundary.token else {
            return detail(
                StatusCode::SERVICE_UNAVAILABLE,
                "Local authentication is not configured",
            );
        };
        if !bearer_matches(request.headers(), token) {
            return detail(StatusCode::UNAUTHORIZED, "Unauthorized");
        }
    }
    match check_content_length(request.headers(), boundary.max_body_bytes) {
        LengthCheck::Fine => {}
        LengthCheck::Invalid => return detail(StatusCode::BAD_REQUEST, "Invalid Content-Length"),
        LengthCheck::TooLarge => {
            return detail(StatusCode::PAYLOAD_TOO_LARGE, "Request body too large");
        }
    }

    let (parts, body) = request.into_parts();
    let limited = Limited::new(body, boundary.max_body_bytes);
    let bytes = match tokio::time::timeout(boundary.body_timeout, limited.collect()).await {
        Err(_elapsed) => return detail(StatusCode::REQUEST_TIMEOUT, "Request body timed out"),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => {
            return detail(StatusCode::PAYLOAD_TOO_LARGE, "Request body too large");
        }
        // The client went away mid-body: nobody is left to answer.
        Ok(Err(_)) => return detail(StatusCode::BAD_REQUEST, "Request body incomplete"),
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    let size = BodySize(bytes.len());
    let mut request = Request::from_parts(parts, Body::from(bytes));
    request.extensions_mut().insert(size);

    let mut response = next.run(request).await;
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_follow_url_authority_parsing() {
        for ok in [
            "localhost",
            "localhost:8765",
            "LOCALHOST",
            "[::1]:8765",
            "[::1]",
            "localhost:99999",
            "user@localhost",
            "127.0.0.1:1",
        ] {
            let host = host_name(ok).unwrap();
            assert!(
                matches!(host.as_str(), "localhost" | "127.0.0.1" | "::1"),
                "{ok}"
            );
        }
        for bad in [
            "localhost.",
            "127.0.0.2",
            "127.0.0.1.",
            "::1",
            "evil.invalid",
            "[::1]x",
            "",
        ] {
            assert!(
                host_name(bad)
                    .is_none_or(|h| !matches!(h.as_str(), "localhost" | "127.0.0.1" | "::1")),
                "{bad}"
            );
        }
    }

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
            bearer_matches(&headers, &token)
        };
        assert!(check(&["Bearer good"]));
        assert!(check(&["bEaReR good"]));
        for bad in [
            "",
            "Bearer",
            "Bearer ",
            "Basic good",
            "Bearer wrong",
            "Bearer a b",
            "Bearer\tgood",
            "Bearer  good",
            "Bearer good ",
        ] {
            assert!(!check(&[bad]), "{bad:?}");
        }
        assert!(!check(&["Bearer good", "Bearer good"]));
        assert!(!check(&[]));
    }
}
