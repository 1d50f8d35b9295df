//! The loopback server that receives the browser's redirect after the user approves the login:
//! bound to 127.0.0.1 only, on the first free port of [`REDIRECT_PORT_COUNT`] starting at the
//! configured one, answering exactly one `/callback` request, within a deadline.
//!
//! Requests for other paths (a browser's favicon, a stray local client) get 404 and do not end
//! the wait; the first `/callback` decides: a state that does not match is refused (400, the
//! login fails, so a forged redirect cannot be retried against the same state), an `error`
//! parameter fails with the server's error code, and a code is returned.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use reqwest::Url;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::Secret;
use crate::link::REDIRECT_PORT_COUNT;

/// How long the login waits for the browser, as in the reference.
pub const CALLBACK_DEADLINE: Duration = Duration::from_secs(300);
/// The largest request head read from the browser.
pub const MAX_REQUEST_HEAD_BYTES: usize = 16 * 1024;
/// How long one connection may take to send its request head.
const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest `error` code repeated to the user.
const MAX_ERROR_CHARS: usize = 64;
/// The callback path of the redirect URI.
pub const CALLBACK_PATH: &str = "/callback";

/// Why the login's callback failed.
#[derive(Debug, thiserror::Error)]
pub enum CallbackError {
    /// Every port of the range is taken.
    #[error(
        "no free port for the login callback on 127.0.0.1 in {first}-{last}; close what uses them or set oauth_redirect_port"
    )]
    NoFreePort {
        /// The first port tried.
        first: u16,
        /// The last port tried.
        last: u16,
    },
    /// The browser did not come back in time.
    #[error("the login was not completed within {} seconds", .0.as_secs())]
    Timeout(Duration),
    /// The callback carried another state: not the redirect of this login.
    #[error("OAuth callback state did not match; start `autogpt-shim auth` again")]
    StateMismatch,
    /// The authorization server reported an error (the user denied access, ...).
    #[error("the authorization server refused the login: {0}")]
    Denied(String),
    /// The callback carried neither a code nor an error.
    #[error("the OAuth callback carried no authorization code")]
    MissingCode,
    /// The listener failed.
    #[error("the login callback server failed: {0}")]
    Io(#[from] io::Error),
}

/// The bound callback server.
#[derive(Debug)]
pub struct CallbackServer {
    listener: TcpListener,
    port: u16,
}

impl CallbackServer {
    /// Binds 127.0.0.1 on the first free port of `first..first + REDIRECT_PORT_COUNT`.
    ///
    /// # Errors
    /// [`CallbackError::NoFreePort`] when every port is taken.
    pub async fn bind(first: u16) -> Result<Self, CallbackError> {
        let last = first.saturating_add(REDIRECT_PORT_COUNT - 1);
        for port in first..=last {
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            match TcpListener::bind(addr).await {
                Ok(listener) => return Ok(Self { listener, port }),
                Err(err) if err.kind() == io::ErrorKind::AddrInUse => {}
                Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {}
                Err(err) => return Err(err.into()),
            }
        }
        Err(CallbackError::NoFreePort { first, last })
    }

    /// The bound port.
    pub const fn port(&self) -> u16 {
        self.port
    }

    /// The redirect URI registered with the authorize request (the reference's `localhost`
    /// form; the server itself listens on 127.0.0.1 only).
    pub fn redirect_uri(&self) -> String {
        format!("http://localhost:{}{CALLBACK_PATH}", self.port)
    }

    /// Waits for the `/callback` request and returns its code; the listener closes on return.
    ///
    /// # Errors
    /// See [`CallbackError`].
    pub async fn wait(self, state: &str, deadline: Duration) -> Result<Secret, CallbackError> {
        let until = Instant::now() + deadline;
        loop {
            let accepted = tokio::time::timeout_at(until, self.listener.accept()).await;
            let Ok(accepted) = accepted else {
                return Err(CallbackError::Timeout(deadline));
            };
            let (stream, _) = accepted?;
            if let Some(outcome) = handle(stream, state).await {
                return outcome;
            }
        }
    }
}

/// One connection: `None` when it was not the callback (the wait goes on).
async fn handle(mut stream: TcpStream, state: &str) -> Option<Result<Secret, CallbackError>> {
    let head = tokio::time::timeout(REQUEST_HEAD_TIMEOUT, read_head(&mut stream))
        .await
        .ok()?
        .ok()?;
    let Some(target) = callback_target(&head) else {
        respond(&mut stream, 404, "Not found.").await;
        return None;
    };
    let outcome = decide(&target, state);
    let (status, page) = match &outcome {
        Ok(_) => (
            200,
            "Login complete. You can close this window and return to the terminal.",
        ),
        Err(CallbackError::StateMismatch) => (400, "OAuth callback state did not match."),
        Err(_) => (400, "Login failed. See the terminal for details."),
    };
    respond(&mut stream, status, page).await;
    Some(outcome)
}

/// The request target when the request is `GET /callback?...`.
fn callback_target(head: &str) -> Option<Url> {
    let line = head.lines().next()?;
    let mut parts = line.split(' ');
    let (method, target) = (parts.next()?, parts.next()?);
    if method != "GET" || !target.starts_with('/') {
        return None;
    }
    let url = Url::parse(&format!("http://localhost{target}")).ok()?;
    (url.path() == CALLBACK_PATH).then_some(url)
}

fn decide(target: &Url, state: &str) -> Result<Secret, CallbackError> {
    let param = |name: &str| {
        target
            .query_pairs()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    };
    let given = param("state").unwrap_or_default();
    if !local_core::secret::ct_eq(given.as_bytes(), state.as_bytes()) {
        return Err(CallbackError::StateMismatch);
    }
    if let Some(error) = param("error") {
        // The code is the server's word, but it arrives through the browser: keep it short
        // and printable so it cannot forge terminal output.
        let shown: String = error
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            .take(MAX_ERROR_CHARS)
            .collect();
        return Err(CallbackError::Denied(shown));
    }
    param("code")
        .as_deref()
        .and_then(Secret::new)
        .ok_or(CallbackError::MissingCode)
}

async fn read_head(stream: &mut TcpStream) -> io::Result<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_REQUEST_HEAD_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request too large",
            ));
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(head).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8"))
}

async fn respond(stream: &mut TcpStream, status: u16, message: &str) {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Bad Request",
    };
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>autogpt-shim</title></head><body><p>{message}</p></body></html>\n"
    );
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(port: u16, target: &str) -> String {
        let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port))
            .await
            .unwrap();
        stream
            .write_all(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    /// A base port per test, far from the default range and from each other, and below the
    /// kernel's ephemeral ports (32768-60999 on Linux), so no connection another test opens
    /// at the same time can be holding one (47100 once was).
    async fn bound(first: u16) -> CallbackServer {
        CallbackServer::bind(first).await.unwrap()
    }

    #[tokio::test]
    async fn the_first_free_port_is_taken_and_a_full_range_is_refused() {
        let first = 29_100;
        let mut held = Vec::new();
        for n in 0..REDIRECT_PORT_COUNT - 1 {
            let server = bound(first).await;
            assert_eq!(server.port(), first + n);
            held.push(server);
        }
        // The twelfth port is the last one accepted, the thirteenth is never tried.
        let last = bound(first).await;
        assert_eq!(last.port(), first + REDIRECT_PORT_COUNT - 1);
        assert_eq!(last.redirect_uri(), "http://localhost:29111/callback");
        let _outside = TcpListener::bind((Ipv4Addr::LOCALHOST, first + REDIRECT_PORT_COUNT))
            .await
            .unwrap();
        let err = CallbackServer::bind(first).await.unwrap_err();
        assert!(
            matches!(
                err,
                CallbackError::NoFreePort {
                    first: 29_100,
                    last: 29_111
                }
            ),
            "{err}"
        );
        held.push(last);
    }

    #[tokio::test]
    async fn other_paths_get_404_and_the_callback_returns_the_code() {
        let server = bound(29_200).await;
        let port = server.port();
        let wait = tokio::spawn(server.wait("st-1", Duration::from_secs(30)));
        assert!(get(port, "/favicon.ico").await.starts_with("HTTP/1.1 404"));
        let ok = get(port, "/callback?code=c%2B1&state=st-1").await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        assert_eq!(wait.await.unwrap().unwrap().expose(), "c+1");
        // One callback, then the server is gone.
        assert!(
            TcpStream::connect((Ipv4Addr::LOCALHOST, port))
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_wrong_state_or_an_error_fails_the_login() {
        let server = bound(29_300).await;
        let port = server.port();
        let wait = tokio::spawn(server.wait("st-1", Duration::from_secs(30)));
        let refused = get(port, "/callback?code=c&state=st-2").await;
        assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
        assert!(refused.contains("state did not match"));
        assert!(matches!(
            wait.await.unwrap(),
            Err(CallbackError::StateMismatch)
        ));

        let server = bound(29_300).await;
        let port = server.port();
        let wait = tokio::spawn(server.wait("st-1", Duration::from_secs(30)));
        get(port, "/callback?error=access_denied%0A%1B[31m&state=st-1").await;
        let err = wait.await.unwrap().unwrap_err();
        assert!(
            matches!(&err, CallbackError::Denied(code) if code == "access_denied31m"),
            "{err}"
        );

        let server = bound(29_300).await;
        let port = server.port();
        let wait = tokio::spawn(server.wait("st-1", Duration::from_secs(30)));
        get(port, "/callback?state=st-1").await;
        assert!(matches!(
            wait.await.unwrap(),
            Err(CallbackError::MissingCode)
        ));
    }

    #[tokio::test]
    async fn the_wait_has_a_deadline() {
        let server = bound(29_400).await;
        let err = server
            .wait("st", Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(matches!(err, CallbackError::Timeout(_)));
    }
}
