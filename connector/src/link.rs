//! Where and how the connector dials, as plain values that the configuration, the OAuth client
//! and the transport all name: the platform URL's forms, the bearer token, why a dial failed,
//! the reconnect delays and the OAuth client's defaults. It depends on none of those modules,
//! which is what keeps them out of an import cycle.

use std::time::Duration;

use tokio_tungstenite::tungstenite::Error as WsError;

use local_core::io_words::io_words;
use local_core::secret::Redacted;

use crate::protocol::is_valid_session_id;

/// The reference's default public client id.
pub const DEFAULT_CLIENT_ID: &str = "autogpt-local-executor";
/// The first loopback callback port tried.
pub const DEFAULT_REDIRECT_PORT: u16 = 41899;
/// How many consecutive ports are tried for the callback, from the first (41899..=41910).
pub const REDIRECT_PORT_COUNT: u16 = 12;

/// The reference's default platform base URL.
pub const DEFAULT_PLATFORM_URL: &str = "wss://platform.autogpt.net";

/// A bearer token whose `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Token(Redacted<String>);

impl Token {
    /// A token from configuration; blank means none, as the reference treats a missing one.
    pub fn from_configured(value: Option<&str>) -> Option<Self> {
        value
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(|value| Self(Redacted::new(value.to_owned())))
    }

    /// Whether `presented` is this token, compared in constant time (the `try` platform
    /// checks the bearer it is dialled with).
    #[must_use]
    pub fn matches(&self, presented: &str) -> bool {
        self.0.matches(presented.as_bytes())
    }

    /// The secret itself, for the upgrade's `Authorization` header only.
    pub(crate) fn expose(&self) -> &str {
        self.0.expose()
    }
}

/// Why a dial failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The platform refused the upgrade with 401 or 403: retrying with the same token
    /// cannot help, so this ends the daemon (exit 77).
    #[error("the platform refused the connection with HTTP {status}: authentication failed")]
    Unauthorized {
        /// 401 or 403.
        status: u16,
    },
    /// Any other HTTP status on the upgrade: the reconnect loop tries again.
    #[error("{}", http_words(*status))]
    Http {
        /// The HTTP status.
        status: u16,
    },
    /// The URL, the token or the session id cannot make a valid upgrade request.
    #[error("invalid connection request: {0}")]
    InvalidRequest(String),
    /// TCP, TLS or WebSocket failure, in words with what to check: the reconnect loop tries
    /// again.
    #[error("{0}")]
    Transport(String),
}

/// An upgrade refused with `status`, and what to check.
fn http_words(status: u16) -> String {
    match status {
        404 => "the platform answered the WebSocket upgrade with HTTP 404 (not found): check the platform URL (--platform-url), and the session id of a direct session".to_owned(),
        500..=599 => format!(
            "the platform answered the WebSocket upgrade with HTTP {status}: it has a problem of its own, so the connector keeps trying"
        ),
        _ => format!(
            "the platform answered the WebSocket upgrade with HTTP {status}: check the platform URL (--platform-url)"
        ),
    }
}

/// Why a dial to `url` failed, in words, with what to check: never tungstenite's `IO error:
/// Connection refused (os error 111)`.
pub(crate) fn transport_words(url: &str, err: &WsError) -> String {
    let uri = url
        .parse::<tokio_tungstenite::tungstenite::http::Uri>()
        .ok();
    let host = uri
        .as_ref()
        .and_then(|uri| uri.host())
        .unwrap_or("the platform")
        .to_owned();
    let place = match uri
        .as_ref()
        .and_then(tokio_tungstenite::tungstenite::http::Uri::port_u16)
    {
        Some(port) => format!("{host}:{port}"),
        None => host.clone(),
    };
    let check = "check the platform URL (--platform-url) and that the platform is running";
    match err {
        WsError::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                format!("nothing is listening at {place} (connection refused): {check}")
            }
            std::io::ErrorKind::TimedOut => {
                format!("{place} did not answer in time: {check}, and your network")
            }
            std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::UnexpectedEof => format!(
                "{place} closed the connection during the WebSocket upgrade: check that the URL's scheme matches the platform (wss:// where it speaks TLS, ws:// where it does not)"
            ),
            std::io::ErrorKind::NetworkUnreachable | std::io::ErrorKind::HostUnreachable => {
                format!(
                    "{place} cannot be reached from this machine: check your network and the platform URL"
                )
            }
            // tokio's resolver reports a name it cannot resolve as an uncategorised error.
            _ if io.to_string().contains("lookup") => {
                format!(
                    "cannot find the host {host}: check the platform URL (--platform-url) and your network"
                )
            }
            _ => format!("cannot connect to {place} ({}): {check}", io_words(io)),
        },
        WsError::Tls(tls) => format!(
            "the TLS handshake with {place} failed ({tls}): check that the platform speaks TLS there (wss:// or https://; ws:// where it does not) and that its certificate is valid"
        ),
        WsError::Http(_) | WsError::HttpFormat(_) | WsError::Protocol(_) => format!(
            "{place} did not answer as a WebSocket endpoint ({err}): check the platform URL (--platform-url), its scheme (ws:// or wss://) and its path"
        ),
        other => format!("cannot connect to {place} ({other}): {check}"),
    }
}

/// The WebSocket base for a configured platform URL: `https` becomes `wss`, `http`
/// becomes `ws`, and a trailing slash is dropped.
///
/// # Errors
/// [`ConnectError::InvalidRequest`] for any other scheme.
pub fn ws_base(platform_url: &str) -> Result<String, ConnectError> {
    let trimmed = platform_url.trim().trim_end_matches('/');
    let (scheme, rest) = trimmed
        .split_once("://")
        .ok_or_else(|| ConnectError::InvalidRequest(format!("{trimmed:?} has no scheme")))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "wss" | "https" => "wss",
        "ws" | "http" => "ws",
        other => {
            return Err(ConnectError::InvalidRequest(format!(
                "unsupported platform URL scheme {other:?} (use wss, ws, https or http)"
            )));
        }
    };
    if rest.is_empty() {
        return Err(ConnectError::InvalidRequest(
            "the platform URL has no host".to_owned(),
        ));
    }
    Ok(format!("{scheme}://{rest}"))
}

/// The data endpoint: `{base}/ws/local-executor/{session_id}`.
///
/// # Errors
/// [`ConnectError::InvalidRequest`] for a bad scheme or a session id outside the pattern
/// (the id becomes a path segment, so it is never escaped, only refused).
pub fn data_url(platform_url: &str, session_id: &str) -> Result<String, ConnectError> {
    if !is_valid_session_id(session_id) {
        return Err(ConnectError::InvalidRequest(
            "the session id does not match the session id pattern".to_owned(),
        ));
    }
    Ok(format!(
        "{}/ws/local-executor/{session_id}",
        ws_base(platform_url)?
    ))
}

/// Reconnect delays: `min(base * 2^attempt, max) + uniform(0, jitter)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay (reference `reconnect_base_delay`, 1 s).
    pub base: Duration,
    /// The ceiling before jitter (reference `reconnect_max_delay`, 60 s).
    pub max: Duration,
    /// Upper bound of the uniform jitter (reference `reconnect_jitter_seconds`, 5 s).
    pub jitter: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
            jitter: Duration::from_secs(5),
        }
    }
}

impl Backoff {
    /// The delay before dial number `attempt + 1`, without jitter.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(31));
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The delay before dial number `attempt + 1`, with jitter.
    pub fn delay(&self, attempt: u32) -> Duration {
        self.ceiling(attempt) + self.jitter.mul_f64(unit_random())
    }
}

/// A uniform sample in `[0, 1)`; the jitters only spread reconnects and token refreshes, so a
/// v4 UUID's random bits are plenty and spare a dependency.
pub(crate) fn unit_random() -> f64 {
    let bits = local_core::secret::new_id().as_u128() >> 75;
    // 53 bits fit an f64 mantissa exactly.
    #[allow(clippy::cast_precision_loss)]
    let sample = bits as f64 / (1u64 << 53) as f64;
    sample
}

/// The HTTP base of a platform URL: `wss`→`https`, `ws`→`http`, no trailing slash.
///
/// # Errors
/// [`ConnectError::InvalidRequest`] for another scheme or no host.
pub fn http_base(url: &str) -> Result<String, ConnectError> {
    let ws = ws_base(url)?;
    Ok(match ws.strip_prefix("wss://") {
        Some(rest) => format!("https://{rest}"),
        None => format!("http://{}", ws.trim_start_matches("ws://")),
    })
}
