//! The local boundary, in order: peer, Host, Origin, bearer, Content-Length, body cap,
//! plus the framework rules (404/405/307), `cache-control` and slow-client bounds.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{body::Body, extract::ConnectInfo, http::Request};
use local_core::{
    LocalState, guide::state::LocalConfig, limits::MAX_BODY_BYTES, secret::LocalToken,
};
use msguide_api::{boundary::Boundary, server::ConnectionLimits};
use serde_json::json;
use tokio::{io::AsyncWriteExt, net::TcpStream};
use tower::ServiceExt;

use super::support::{Options, Req, Server, TOKEN, read_response, send_raw};

const PROTECTED: [(&str, &str); 8] = [
    ("POST", "/v1/sessions"),
    ("POST", "/v1/guidance"),
    ("POST", "/v1/assist"),
    ("POST", "/v1/actions/preview"),
    (
        "POST",
        "/v1/actions/00000000-0000-4000-8000-000000000000/confirm",
    ),
    (
        "POST",
        "/v1/actions/00000000-0000-4000-8000-000000000000/execute",
    ),
    (
        "POST",
        "/v1/jobs/00000000-0000-4000-8000-000000000000/cancel",
    ),
    ("GET", "/v1/jobs/00000000-0000-4000-8000-000000000000"),
];

#[tokio::test]
async fn remote_peer_is_refused_before_anything_else() {
    let local = Arc::new(LocalState::new(LocalConfig::default()));
    let boundary = Boundary {
        token: LocalToken::from_configured(Some(TOKEN)),
        max_body_bytes: MAX_BODY_BYTES,
        body_timeout: Duration::from_secs(5),
    };
    let app = msguide_api::app(local, boundary);
    for (peer, expected) in [
        ("192.0.2.1:5555", 403),
        ("127.0.0.1:5555", 200),
        ("[::1]:5555", 200),
    ] {
        let mut request = Request::get("/health")
            .header("host", "evil.invalid")
            .header("origin", "x")
            .body(Body::empty())
            .unwrap();
        request
            .extensions_mut()
            .insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        if expected == 403 {
            assert_eq!(status, 403);
            let body = axum::body::to_bytes(response.into_body(), 1000)
                .await
                .unwrap();
            assert_eq!(&body[..], br#"{"detail":"Loopback client required"}"#);
        } else {
            assert_eq!(status, 400, "a loopback peer reaches the Host check");
        }
    }
}

#[tokio::test]
async fn host_must_be_exactly_one_local_name() {
    let server = Server::start().await;
    let health = || Req::new(server.addr, "GET", "/health").without("host");
    for ok in [
        "localhost",
        "localhost:8765",
        "LOCALHOST",
        "[::1]:8765",
        "localhost:99999",
        "user@localhost",
        "127.0.0.1",
    ] {
        let res = health().header("Host", ok).send().await;
        assert_eq!(res.status, 200, "{ok}");
    }
    for bad in [
        "evil.invalid",
        "localhost.",
        "127.0.0.2",
        "127.0.0.1.",
        "::1",
    ] {
        let res = health().header("Host", bad).send().await;
        assert_eq!(
            (res.status, res.detail().as_str()),
            (400, "Local Host required"),
            "{bad}"
        );
        assert_eq!(
            res.header("cache-control"),
            None,
            "boundary rejections carry no cache-control"
        );
    }
    let twice = health()
        .header("Host", "localhost")
        .header("Host", "localhost")
        .send()
        .await;
    assert_eq!(twice.status, 400);
    let missing = health().send().await;
    assert_eq!(missing.status, 400);
}

#[tokio::test]
async fn any_origin_is_refused() {
    let server = Server::start().await;
    for origin in [
        "null",
        "https://evil.invalid",
        "http://localhost",
        "http://127.0.0.1:8765",
    ] {
        let res = server.get("/health").header("Origin", origin).send().await;
        assert_eq!(
            (res.status, res.detail().as_str()),
            (403, "Browser origins are not allowed"),
            "{origin}"
        );
    }
}

#[tokio::test]
async fn unconfigured_or_malformed_token_answers_503_on_protected_routes_only() {
    for token in [None, Some("bad token"), Some("")] {
        let server = Server::with(Options {
            token: token.map(str::to_owned),
            ..Options::default()
        })
        .await;
        let res = server.post("/v1/sessions").send().await;
        assert_eq!(
            (res.status, res.detail().as_str()),
            (503, "Local authentication is not configured")
        );
        let res = server.get("/admin/audit-log").send().await;
        assert_eq!(res.status, 503);
        assert_eq!(server.get("/health").send().await.status, 200);
        assert_eq!(server.get("/openapi.json").send().await.status, 200);
    }
}

#[tokio::test]
async fn every_protected_route_refuses_bad_bearers_even_with_bad_bodies() {
    let server = Server::start().await;
    let bad_values = [
        "",
        "Bearer",
        "Bearer ",
        "Basic abc",
        "Bearer wrong",
        "Bearer a b",
        "Bearer\tbad",
        "Bearer  bad",
        &format!("Bearer {TOKEN}x"),
        &format!("Bearer {TOKEN}="),
    ];
    // Trailing whitespace is not listed: the HTTP parser strips it from every field value (RFC 9110).
    for (method, path) in PROTECTED {
        for value in bad_values {
            let res = Req::new(server.addr, method, path)
                .header("Authorization", value)
                .body(b"{not json".to_vec())
                .send()
                .await;
            assert_eq!(
                (res.status, res.detail().as_str()),
                (401, "Unauthorized"),
                "{method} {path} {value:?}"
            );
        }
        let missing = Req::new(server.addr, method, path).send().await;
        assert_eq!(missing.status, 401);
        let twice = Req::new(server.addr, method, path)
            .bearer(TOKEN)
            .bearer(TOKEN)
            .send()
            .await;
        assert_eq!(twice.status, 401, "duplicate Authorization");
    }
    let any_case = Req::new(server.addr, "POST", "/v1/sessions")
        .header("Authorization", &format!("bEARER {TOKEN}"))
        .send()
        .await;
    assert_eq!(any_case.status, 200);
}

/// RFC 6750: every 401 challenges with `Bearer` and says whether the token was missing,
/// malformed or wrong, while the body stays the contract's and nothing presented is echoed.
#[tokio::test]
async fn unauthorized_answers_say_why_in_www_authenticate() {
    let server = Server::start().await;
    let presented = "Wr0ngButWellFormed.token";
    let cases = [
        (None, "No bearer token was sent"),
        (
            Some("Basic dXNlcjpwYXNz"),
            "The Authorization header is malformed",
        ),
        (
            Some("Bearer two words"),
            "The Authorization header is malformed",
        ),
        (
            Some(&*format!("Bearer {presented}")),
            "The bearer token is not the one this service was started with",
        ),
    ];
    for (method, path) in PROTECTED {
        for (authorization, reason) in &cases {
            let mut request = Req::new(server.addr, method, path);
            if let Some(value) = authorization {
                request = request.header("Authorization", value);
            }
            let res = request.send().await;
            assert_eq!(res.status, 401, "{method} {path} {authorization:?}");
            assert_eq!(res.text(), r#"{"detail":"Unauthorized"}"#);
            let challenge = res
                .header("www-authenticate")
                .unwrap_or_else(|| panic!("no challenge for {authorization:?}"));
            assert!(challenge.starts_with("Bearer "), "{challenge}");
            assert!(
                challenge.contains(&format!("error_description=\"{reason}")),
                "{authorization:?}: {challenge}"
            );
            for part in [presented, "dXNlcjpwYXNz", "two words"] {
                assert!(!challenge.contains(part), "echoed: {challenge}");
            }
        }
    }
    let twice = server.post("/v1/sessions").bearer(TOKEN).send().await;
    assert_eq!(twice.status, 401);
    assert!(
        twice
            .header("www-authenticate")
            .unwrap()
            .contains("invalid_request")
    );
    let fine = server.post("/v1/sessions").send().await;
    assert_eq!(fine.status, 200);
    assert!(fine.header("www-authenticate").is_none());
}

#[tokio::test]
async fn only_v1_and_admin_prefixes_are_protected() {
    let server = Server::start().await;
    let anonymous = |path: &str| Req::new(server.addr, "GET", path);
    assert_eq!(anonymous("/v1").send().await.status, 401);
    assert_eq!(anonymous("/admin/anything").send().await.status, 401);
    for public in ["/v1x", "/adminx", "/admin"] {
        let res = anonymous(public).send().await;
        assert_eq!(
            (res.status, res.detail().as_str()),
            (404, "Not Found"),
            "{public}"
        );
    }
    assert_eq!(anonymous("/health").send().await.status, 200);
}

#[tokio::test]
async fn auth_is_decided_before_the_body_is_read() {
    let server = Server::start().await;
    let huge = Req::new(server.addr, "POST", "/v1/sessions").header("Content-Length", "5000000");
    let res = send_raw(server.addr, &huge.to_bytes()).await;
    assert_eq!(
        res.status, 401,
        "401, not 413, for an unauthenticated oversized body"
    );
}

#[tokio::test]
async fn content_length_rules() {
    let server = Server::start().await;
    let exact = server
        .post("/v1/sessions")
        .body(vec![b' '; MAX_BODY_BYTES])
        .send()
        .await;
    assert_eq!(exact.status, 200, "a body of exactly the cap is accepted");
    let over = server
        .post("/v1/sessions")
        .body(vec![b' '; MAX_BODY_BYTES + 1])
        .send()
        .await;
    assert_eq!(
        (over.status, over.detail().as_str()),
        (413, "Request body too large")
    );
    let claimed = server
        .post("/v1/sessions")
        .header("Content-Length", &(MAX_BODY_BYTES + 1).to_string())
        .send()
        .await;
    assert_eq!(claimed.status, 413);
    for bad in ["12a".to_owned(), "9".repeat(21), "9".repeat(5000)] {
        let res = server
            .post("/v1/sessions")
            .header("Content-Length", &bad)
            .send()
            .await;
        assert_eq!(
            res.status,
            400,
            "Content-Length {}",
            &bad[..bad.len().min(25)]
        );
    }
    // Identical duplicates may be merged by the HTTP parser (RFC 9110 §8.6); differing ones never pass.
    let twice = server
        .post("/v1/sessions")
        .header("Content-Length", "0")
        .header("Content-Length", "5")
        .send()
        .await;
    assert_eq!(twice.status, 400);
}

fn chunked(server: &Server, sizes: &[usize]) -> Vec<u8> {
    let mut raw = server
        .post("/v1/sessions")
        .header("Transfer-Encoding", "chunked")
        .to_bytes();
    for size in sizes {
        raw.extend_from_slice(format!("{size:x}\r\n").as_bytes());
        raw.extend(std::iter::repeat_n(b' ', *size));
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    raw
}

#[tokio::test]
async fn streamed_bodies_are_capped_before_the_handler_runs() {
    let server = Server::start().await;
    let half = MAX_BODY_BYTES / 2;
    let at_cap = send_raw(
        server.addr,
        &chunked(&server, &[half, MAX_BODY_BYTES - half]),
    )
    .await;
    assert_eq!(at_cap.status, 200);
    let before = server.local.audit().tail(1000).unwrap().0;
    let over = send_raw(
        server.addr,
        &chunked(&server, &[half, MAX_BODY_BYTES - half + 1]),
    )
    .await;
    assert_eq!(
        (over.status, over.detail().as_str()),
        (413, "Request body too large")
    );
    assert_eq!(
        server.local.audit().tail(1000).unwrap().0,
        before,
        "the handler never ran"
    );
}

#[tokio::test]
async fn framework_answers_are_json_with_no_store() {
    let server = Server::start().await;
    let not_found = server.get("/v1/nothing").send().await;
    assert_eq!(
        (not_found.status, not_found.text().as_str()),
        (404, r#"{"detail":"Not Found"}"#)
    );
    assert_eq!(not_found.header("cache-control"), Some("no-store"));

    let wrong_method = server.get("/v1/sessions").send().await;
    assert_eq!(
        (wrong_method.status, wrong_method.text().as_str()),
        (405, r#"{"detail":"Method Not Allowed"}"#)
    );
    assert_eq!(wrong_method.header("allow"), Some("POST"));
    for method in ["HEAD", "OPTIONS", "POST"] {
        let res = Req::new(server.addr, method, "/health").send().await;
        assert_eq!(res.status, 405, "{method} /health");
        assert_eq!(res.header("allow"), Some("GET"));
    }

    let slash = server.post("/v1/sessions/").send().await;
    assert_eq!(
        (slash.status, slash.header("location")),
        (307, Some("/v1/sessions"))
    );
    assert!(slash.body.is_empty());
    assert_eq!(
        Req::new(server.addr, "GET", "/health/")
            .send()
            .await
            .header("location"),
        Some("/health")
    );

    for path in ["/health", "/openapi.json", "/docs/"] {
        let res = Req::new(server.addr, "GET", path).send().await;
        assert_eq!(
            (res.status, res.header("cache-control")),
            (200, Some("no-store")),
            "{path}"
        );
    }
    let unprocessable = server.post("/v1/guidance").json(&json!({})).send().await;
    assert_eq!(
        (unprocessable.status, unprocessable.header("cache-control")),
        (422, Some("no-store"))
    );
}

#[tokio::test]
async fn stalled_headers_and_bodies_are_cut_off() {
    let limits = ConnectionLimits {
        header_timeout: Duration::from_millis(300),
        ..ConnectionLimits::default()
    };
    let server = Server::with(Options {
        limits,
        body_timeout: Duration::from_millis(300),
        ..Options::default()
    })
    .await;

    let mut stalled = TcpStream::connect(server.addr).await.unwrap();
    stalled
        .write_all(b"GET /health HTTP/1.1\r\nHost: local")
        .await
        .unwrap();
    let cut = tokio::time::timeout(Duration::from_secs(5), read_response(&mut stalled))
        .await
        .expect("connection held past the header deadline");
    assert!(cut.as_ref().is_none_or(|r| r.status == 408), "{cut:?}");

    let mut slow_body = TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100\r\n\r\n0123456789"
    );
    slow_body.write_all(head.as_bytes()).await.unwrap();
    let res = tokio::time::timeout(Duration::from_secs(5), read_response(&mut slow_body))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (res.status, res.detail().as_str()),
        (408, "Request body timed out")
    );
}

/// At most `max_connections` are open: a newcomer takes the place of the connection that has
/// waited longest for a request (so idle or slow connections cannot lock anyone out), and waits
/// only while every open connection is answering a request.
#[tokio::test]
async fn open_connections_are_bounded() {
    let limits = ConnectionLimits {
        max_connections: 2,
        header_timeout: Duration::from_secs(30),
        ..ConnectionLimits::default()
    };
    let server = Server::with(Options {
        limits,
        ..Options::default()
    })
    .await;
    let mut idle_a = TcpStream::connect(server.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut idle_b = TcpStream::connect(server.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let res = tokio::time::timeout(
        Duration::from_secs(5),
        Req::new(server.addr, "GET", "/health").send(),
    )
    .await
    .expect("a third client was locked out by two idle connections");
    assert_eq!(res.status, 200);
    let closed = tokio::time::timeout(Duration::from_secs(5), read_response(&mut idle_a)).await;
    assert!(
        matches!(closed, Ok(None)),
        "the oldest idle connection kept its place: {closed:?}"
    );

    // Two connections answering a request (their bodies still coming) keep their places.
    let head = format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100\r\n\r\n0123456789"
    );
    let mut busy = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        busy.push(stream);
    }
    let closed = tokio::time::timeout(Duration::from_secs(5), read_response(&mut idle_b)).await;
    assert!(matches!(closed, Ok(None)), "{closed:?}");
    let waiting = tokio::spawn(Req::new(server.addr, "GET", "/health").send_owned());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !waiting.is_finished(),
        "a third connection was served while two were answering"
    );
    drop(busy.remove(0));
    let res = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(res.status, 200);
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let limits = ConnectionLimits {
        header_timeout: Duration::from_millis(300),
        ..ConnectionLimits::default()
    };
    let server = Server::with(Options {
        limits,
        ..Options::default()
    })
    .await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_response(&mut stream).await.unwrap().status, 200);
    let closed = tokio::time::timeout(Duration::from_secs(5), read_response(&mut stream)).await;
    assert!(
        matches!(closed, Ok(None)),
        "an idle keep-alive connection held its slot: {closed:?}"
    );
}
