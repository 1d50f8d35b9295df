//! Readiness: the API answers `GET /health` with `status` `ok` and this build's version, then
//! accepts the launch's token on `POST /v1/sessions`.
//!
//! The authenticated session is what proves the answer comes from our child: a program that
//! grabbed the port in the probe's window could fake `/health` but not know the token.
//! [`Probe`] remembers the stage and the error of the last failed attempt, so when the
//! caller gives up (deadline, child exit, signal) it can say where the API got stuck.

use std::{fmt, net::SocketAddr, time::Duration};

use hyper::Method;
use serde_json::Value;

use crate::{
    http::{self, Response},
    token::LaunchToken,
};

/// How long the API has to become ready. It must stay at least a model provider's start-up
/// (30 s) plus 15 s, as in the reference launcher.
pub const READINESS_BUDGET: Duration = Duration::from_secs(60);
/// The deadline of one readiness request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The pause between two attempts.
pub const RETRY_PAUSE: Duration = Duration::from_millis(150);
/// The version `/health` must report: the workspace's, which the API shares.
pub const EXPECTED_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where an attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `GET /health`: no connection yet, or not `ok` with the expected version.
    Health,
    /// `POST /v1/sessions` with the bearer.
    Session,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Health => "health",
            Self::Session => "session",
        })
    }
}

/// Polls one API until it is ready, remembering the last failure.
#[derive(Debug)]
pub struct Probe {
    addr: SocketAddr,
    last_failure: Option<(Stage, String)>,
}

impl Probe {
    /// A probe of the API at `addr`.
    #[must_use]
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            last_failure: None,
        }
    }

    /// The stage and error of the last failed attempt (`health`, `none` before any).
    #[must_use]
    pub fn last_failure(&self) -> (Stage, &str) {
        match &self.last_failure {
            Some((stage, error)) => (*stage, error),
            None => (Stage::Health, "none"),
        }
    }

    /// Returns once the API is ready; never gives up by itself. Cancelling it (by dropping
    /// the future) is safe at any point and leaves [`Probe::last_failure`] up to date.
    pub async fn until_ready(&mut self, token: &LaunchToken) {
        loop {
            match self.attempt(token).await {
                Ok(()) => return,
                Err(failure) => self.last_failure = Some(failure),
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    async fn attempt(&self, token: &LaunchToken) -> Result<(), (Stage, String)> {
        let fail = |stage| move |error: String| (stage, error);
        let health = http::request(self.addr, Method::GET, "/health", None, REQUEST_TIMEOUT)
            .await
            .map_err(|e| e.to_string())
            .map_err(fail(Stage::Health))?;
        check_health(&health).map_err(fail(Stage::Health))?;
        let session = http::request(
            self.addr,
            Method::POST,
            "/v1/sessions",
            Some(token.expose()),
            REQUEST_TIMEOUT,
        )
        .await
        .map_err(|e| e.to_string())
        .map_err(fail(Stage::Session))?;
        check_session(&session).map_err(fail(Stage::Session))
    }
}

fn json(response: &Response) -> Result<Value, String> {
    if response.status != 200 {
        return Err(format!("HTTP {}", response.status));
    }
    serde_json::from_slice(&response.body).map_err(|_| "the body is not JSON".to_owned())
}

/// Whether a `/health` answer says ready: 200, `status` `ok`, version [`EXPECTED_VERSION`].
pub fn check_health(response: &Response) -> Result<(), String> {
    let body = json(response)?;
    if body["status"] != "ok" {
        return Err("status is not ok".to_owned());
    }
    match body["version"].as_str() {
        Some(EXPECTED_VERSION) => Ok(()),
        // The value is shown escaped and short: it comes from whoever answers on the port.
        Some(other) => Err(format!(
            "version {:?}, expected {EXPECTED_VERSION}",
            other.chars().take(32).collect::<String>()
        )),
        None => Err("no version".to_owned()),
    }
}

/// Whether a `POST /v1/sessions` answer opened a session: 200 with a `sessionId`.
pub fn check_session(response: &Response) -> Result<(), String> {
    let body = json(response)?;
    if body["sessionId"].as_str().is_some_and(|id| !id.is_empty()) {
        Ok(())
    } else {
        Err("no sessionId in the answer".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn answer(status: u16, body: &str) -> Response {
        Response {
            status,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn the_budget_covers_a_model_providers_start_up() {
        assert_eq!(READINESS_BUDGET, Duration::from_secs(60));
        assert!(READINESS_BUDGET >= Duration::from_secs(30 + 15));
        assert_eq!(EXPECTED_VERSION, "0.2.0");
    }

    #[test]
    fn health_must_be_ok_with_this_version() {
        assert_eq!(
            check_health(&answer(
                200,
                r#"{"status":"ok","mode":"demo","version":"0.2.0"}"#
            )),
            Ok(())
        );
        for (response, why) in [
            (answer(503, "{}"), "HTTP 503"),
            (answer(200, "<html>"), "the body is not JSON"),
            (
                answer(200, r#"{"status":"starting","version":"0.2.0"}"#),
                "status is not ok",
            ),
            (answer(200, r#"{"status":"ok"}"#), "no version"),
            (
                answer(200, r#"{"status":"ok","version":"0.1.9"}"#),
                r#"version "0.1.9", expected 0.2.0"#,
            ),
        ] {
            assert_eq!(check_health(&response), Err(why.to_owned()));
        }
    }

    #[test]
    fn a_session_needs_an_id() {
        assert_eq!(
            check_session(&answer(200, r#"{"sessionId":"abc","expiresIn":3600}"#)),
            Ok(())
        );
        assert_eq!(
            check_session(&answer(401, r#"{"detail":"Unauthorized"}"#)),
            Err("HTTP 401".to_owned())
        );
        assert_eq!(
            check_session(&answer(200, r#"{"sessionId":""}"#)),
            Err("no sessionId in the answer".to_owned())
        );
    }

    /// Whether the request head carries `Authorization: Bearer <token>` (any name case).
    fn bears(head: &str, token: &str) -> bool {
        head.lines().any(|line| {
            line.split_once(':').is_some_and(|(name, value)| {
                name.eq_ignore_ascii_case("authorization")
                    && value.trim() == format!("Bearer {token}")
            })
        })
    }

    /// A fake API: `/health` is fine; the first `sessions` answers 503, the next ones check
    /// the bearer.
    async fn fake_api(token: String) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut sessions = 0;
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let mut len = 0;
                while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                    len += socket.read(&mut buf[len..]).await.unwrap();
                }
                let head = String::from_utf8_lossy(&buf[..len]).into_owned();
                let (status, body) = if head.starts_with("GET /health ") {
                    (200, r#"{"status":"ok","mode":"demo","version":"0.2.0"}"#)
                } else {
                    sessions += 1;
                    if sessions == 1 {
                        (503, r#"{"detail":"not yet"}"#)
                    } else if bears(&head, &token) {
                        (200, r#"{"sessionId":"s-1"}"#)
                    } else {
                        (401, r#"{"detail":"Unauthorized"}"#)
                    }
                };
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                socket.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        addr
    }

    #[tokio::test]
    async fn retries_until_the_session_opens_and_remembers_why_it_waited() {
        let token = LaunchToken::mint().unwrap();
        let addr = fake_api(token.expose().to_owned()).await;
        let mut probe = Probe::new(addr);
        tokio::time::timeout(Duration::from_secs(20), probe.until_ready(&token))
            .await
            .unwrap();
        assert_eq!(probe.last_failure(), (Stage::Session, "HTTP 503"));
    }

    #[tokio::test]
    async fn a_closed_port_is_reported_at_the_health_stage() {
        let token = LaunchToken::mint().unwrap();
        let addr = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let mut probe = Probe::new(addr);
        assert_eq!(probe.last_failure(), (Stage::Health, "none"));
        let gave_up = tokio::time::timeout(Duration::from_millis(500), probe.until_ready(&token))
            .await
            .is_err();
        assert!(gave_up);
        assert_eq!(
            probe.last_failure(),
            (Stage::Health, "connect: connection refused")
        );
    }
}
