//! WebSocket transport for one data connection, and the reconnect loop around
//! [`run_session`] (PROTOCOL.md "Connection"; shim-reference-behaviour.md section 7).
//!
//! The session loop speaks [`Frame`]s; this module dials the platform with the bearer token
//! on the upgrade, adapts tokio-tungstenite's stream and sink to frames, and decides after
//! each session whether to dial again.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::{Sink, SinkExt, Stream, StreamExt, ready};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Bytes;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::frame::Frame as WsFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data as OpData, OpCode};
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::audit::{Entry, details};
use crate::auth::Credentials;
use crate::commands::status::DaemonState;
use crate::link::{Backoff, ConnectError, Token, transport_words};
use crate::protocol::{MAX_FRAME_BYTES, close_code};
use crate::session::{Frame, Host, SessionConfig, SessionEnd, run_session};

/// A session that lasted this long counts as healthy: the next backoff starts over.
pub const HEALTHY_SESSION: Duration = Duration::from_secs(60);
/// How long one dial (TCP, TLS and upgrade) may take before it counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a shutdown waits for the platform to answer our close frame.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// RFC 6455 "no status code present", reported when a close frame carries no code.
const NO_STATUS: u16 = 1005;
/// Close code sent when the operator stops the shim.
const GOING_AWAY: u16 = 1001;
/// RFC 6455 close code for a text message that is not UTF-8.
const INVALID_PAYLOAD: u16 = 1007;
/// RFC 6455 close code for a message over the 16 MiB limit.
const MESSAGE_TOO_BIG: u16 = 1009;
/// tungstenite's read buffer (see [`websocket_config`]).
const READ_BUFFER_BYTES: usize = 16 * 1024;
/// Outbound text longer than this goes out in RFC 6455 fragments of this size: tungstenite
/// copies each frame whole into a write buffer that never shrinks, so one 11 MB FILE_READ
/// reply sent as a single frame kept 11 MB resident for the rest of the connection.
pub const FRAGMENT_BYTES: usize = 64 * 1024;

/// Dials `url` for a data or control connection. With stored OAuth `credentials` the token
/// comes from them, refreshed first when it is a JWT near its `exp`
/// ([`Credentials::for_dial`]); a 401 on the upgrade (a token without `exp`, or one the
/// platform refused early) spends one refresh (shared with every other connection that saw the
/// same token rejected) before dialling once more; a second 401, a 403 or a failed refresh is
/// [`ConnectError::Unauthorized`]. A token from the environment or a token file (`token`)
/// cannot be refreshed, so its 401 is final at once.
///
/// # Errors
/// See [`ConnectError`].
pub async fn dial(
    url: &str,
    token: Option<&Token>,
    credentials: Option<&Credentials>,
) -> Result<Socket, ConnectError> {
    let Some(credentials) = credentials else {
        return connect(url, token).await;
    };
    let (current, generation) = credentials.for_dial().await;
    match connect(url, current.as_ref()).await {
        Err(ConnectError::Unauthorized { status: 401 }) => {
            if let Err(err) = credentials.refresh(generation).await {
                tracing::error!(error = %err, "could not refresh the OAuth token");
                return Err(ConnectError::Unauthorized { status: 401 });
            }
            let (fresh, _) = credentials.current().await;
            connect(url, fresh.as_ref()).await
        }
        other => other,
    }
}

/// The transport limits: the spec's 16 MiB per message and per frame, read in 16 KiB steps.
pub fn websocket_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES))
        // tungstenite zeroes this much of its read buffer before every read, even one that
        // finds nothing (the default 128 KiB was 1% of the shim's CPU under FILE_STAT), and
        // keeps it resident; requests are small, and a 16 MiB one only takes more reads.
        .read_buffer_size(READ_BUFFER_BYTES)
}

/// An open data connection.
pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Dials `url`, sending `Authorization: Bearer <token>` when there is a token.
///
/// # Errors
/// See [`ConnectError`]; 401 and 403 are [`ConnectError::Unauthorized`].
pub async fn connect(url: &str, token: Option<&Token>) -> Result<Socket, ConnectError> {
    let mut request = url
        .into_client_request()
        .map_err(|err| ConnectError::InvalidRequest(err.to_string()))?;
    if let Some(token) = token {
        let mut value =
            HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
                ConnectError::InvalidRequest("the token is not a valid header value".to_owned())
            })?;
        value.set_sensitive(true);
        request.headers_mut().insert(header::AUTHORIZATION, value);
    }
    let dial =
        tokio_tungstenite::connect_async_with_config(request, Some(websocket_config()), true);
    let Ok(dialled) = tokio::time::timeout(CONNECT_TIMEOUT, dial).await else {
        return Err(ConnectError::Transport(format!(
            "no WebSocket connection to {} within {} s: check the platform URL (--platform-url) and your network",
            crate::commands::status::redact_url(url),
            CONNECT_TIMEOUT.as_secs()
        )));
    };
    match dialled {
        Ok((socket, _response)) => Ok(socket),
        Err(WsError::Http(response)) => {
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
                Err(ConnectError::Unauthorized {
                    status: status.as_u16(),
                })
            } else {
                Err(ConnectError::Http {
                    status: status.as_u16(),
                })
            }
        }
        Err(WsError::Url(err)) => Err(ConnectError::InvalidRequest(err.to_string())),
        Err(err) => Err(ConnectError::Transport(transport_words(url, &err))),
    }
}

/// Inbound WebSocket messages as [`Frame`]s: text and close pass, binary and pong are
/// dropped, and a read error ends the stream (the session reconnects); a message that broke
/// the transport's rules leaves the close code owed to the platform in [`Self::failure`].
///
/// Pings need no handling here: tungstenite queues the pong itself and flushes it on the
/// next read or write.
#[derive(Debug)]
pub struct FrameStream<S> {
    inner: S,
    done: bool,
    failure: Option<(u16, &'static str)>,
}

impl<S> FrameStream<S> {
    /// Wraps a stream of WebSocket messages.
    pub const fn new(inner: S) -> Self {
        Self {
            inner,
            done: false,
            failure: None,
        }
    }

    /// The RFC 6455 close code and reason for the message that ended the stream, when it was
    /// refused rather than lost: 1009 over 16 MiB, 1007 for text that is not UTF-8.
    pub const fn failure(&self) -> Option<(u16, &'static str)> {
        self.failure
    }
}

impl<S> Stream for FrameStream<S>
where
    S: Stream<Item = Result<Message, WsError>> + Unpin,
{
    type Item = Frame;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Frame>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            match ready!(self.inner.poll_next_unpin(cx)) {
                None => self.done = true,
                Some(Err(err)) => {
                    self.done = true;
                    self.failure = match err {
                        WsError::Capacity(_) => Some((MESSAGE_TOO_BIG, "message too big")),
                        WsError::Utf8(_) => Some((INVALID_PAYLOAD, "text is not UTF-8")),
                        _ => None,
                    };
                }
                Some(Ok(Message::Text(text))) => {
                    return Poll::Ready(Some(Frame::Text(text.as_str().to_owned())));
                }
                Some(Ok(Message::Close(close))) => {
                    // Nothing useful follows a close; tungstenite has already answered it.
                    self.done = true;
                    let (code, reason) = close.map_or((NO_STATUS, String::new()), |close| {
                        (u16::from(close.code), close.reason.as_str().to_owned())
                    });
                    return Poll::Ready(Some(Frame::Close { code, reason }));
                }
                Some(Ok(_)) => {}
            }
        }
    }
}

/// The outbound [`Frame`] as a WebSocket message.
pub fn to_message(frame: Frame) -> Message {
    match frame {
        Frame::Text(text) => Message::text(text),
        Frame::Close { code, reason } => Message::Close(Some(CloseFrame {
            code: CloseCode::from(code),
            reason: reason.into(),
        })),
    }
}

/// The outbound [`Frame`] as the WebSocket messages to send: one, or for text over
/// [`FRAGMENT_BYTES`] one message in fragments (a text frame, continuations, the last final),
/// cut at character boundaries so every fragment is UTF-8 on its own.
pub fn to_messages(frame: Frame) -> Vec<Message> {
    let text = match frame {
        Frame::Text(text) if text.len() > FRAGMENT_BYTES => text,
        other => return vec![to_message(other)],
    };
    let mut cuts = Vec::new();
    let mut start = 0;
    while text.len() - start > FRAGMENT_BYTES {
        let mut end = start + FRAGMENT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        cuts.push((start, end));
        start = end;
    }
    cuts.push((start, text.len()));
    let last = cuts.len() - 1;
    let bytes = Bytes::from(text);
    cuts.into_iter()
        .enumerate()
        .map(|(i, (from, to))| {
            let opcode = if i == 0 {
                OpCode::Data(OpData::Text)
            } else {
                OpCode::Data(OpData::Continue)
            };
            Message::Frame(WsFrame::message(bytes.slice(from..to), opcode, i == last))
        })
        .collect()
}

/// Splits a connected socket into the session's frame stream and sink.
pub fn frames<T>(
    socket: WebSocketStream<T>,
) -> (
    FrameStream<impl Stream<Item = Result<Message, WsError>> + Unpin>,
    impl Sink<Frame, Error = WsError> + Unpin,
)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (sink, stream) = socket.split();
    let sink = sink.with_flat_map(|frame: Frame| {
        futures_util::stream::iter(to_messages(frame).into_iter().map(Ok::<_, WsError>))
    });
    (FrameStream::new(stream), sink)
}

/// What a [`StateObserver`] calls.
type ObserveFn = dyn Fn(DaemonState, Option<&str>) + Send + Sync;

/// Told about each connection state change (connecting, connected, reconnecting), with the
/// last error when there is one (a short description: never a token, a frame or a payload).
#[derive(Clone)]
pub struct StateObserver(Arc<ObserveFn>);

impl StateObserver {
    /// Wraps `observe`.
    pub fn new(observe: impl Fn(DaemonState, Option<&str>) + Send + Sync + 'static) -> Self {
        Self(Arc::new(observe))
    }

    fn tell(&self, state: DaemonState, error: Option<&str>) {
        (self.0)(state, error);
    }
}

impl fmt::Debug for StateObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StateObserver")
    }
}

/// Everything one data connection needs.
#[derive(Debug, Clone)]
pub struct DataConnection {
    /// The full data URL (see [`data_url`]).
    pub url: String,
    /// The bearer token, if any.
    pub token: Option<Token>,
    /// Stored OAuth credentials, used instead of `token` and refreshed once on a 401.
    pub oauth: Option<crate::auth::Credentials>,
    /// The session's local policy.
    pub session: SessionConfig,
    /// Reconnect delays.
    pub backoff: Backoff,
    /// Told about state changes (the daemon's status file), if anyone listens.
    pub observer: Option<StateObserver>,
}

/// How [`run_data_connection`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Shutdown was requested.
    Shutdown,
    /// A session ended in a way that forbids reconnecting (fatal close, revocation,
    /// version mismatch, refused HELLO_ACK).
    Stopped(SessionEnd),
    /// The upgrade was refused with 401 or 403.
    Unauthorized {
        /// The HTTP status.
        status: u16,
    },
    /// The request itself is invalid (URL, token); dialling again cannot help.
    InvalidRequest(String),
}

/// Requests shutdown of [`run_data_connection`]; dropping every sender also shuts it down.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// A shutdown signal and the sender that fires it (`send(true)`).
    pub fn new() -> (watch::Sender<bool>, Self) {
        let (sender, receiver) = watch::channel(false);
        (sender, Self(receiver))
    }

    /// Resolves once shutdown is requested.
    pub async fn requested(&mut self) {
        let _ = self.0.wait_for(|&stop| stop).await;
    }
}

/// Dials, runs a session, and dials again with backoff while the end allows it.
pub async fn run_data_connection(
    config: DataConnection,
    host: Host,
    mut shutdown: Shutdown,
) -> Outcome {
    let mut attempt: u32 = 0;
    // Why the last dial failed, told with the delay before the next.
    let mut failed: Option<String> = None;
    let tell = |state, error: Option<&str>| {
        if let Some(observer) = &config.observer {
            observer.tell(state, error);
        }
    };
    loop {
        tell(DaemonState::Connecting, None);
        let dialled = tokio::select! {
            () = shutdown.requested() => return Outcome::Shutdown,
            dialled = dial(&config.url, config.token.as_ref(), config.oauth.as_ref()) => dialled,
        };
        match dialled {
            Ok(socket) => {
                tracing::info!(url = %config.url, "connected");
                let audit = &host.audit;
                let url = serde_json::json!(config.url);
                // Not waited for: HELLO answers no request, and the fsync of any request's
                // record (queued after this one) makes it durable before that request's reply.
                // Waiting put one more fdatasync between the dial and HELLO.
                let connected = Entry::ok("WS_CONNECTED", details([("url", url)]));
                drop(tokio::spawn(audit.submit(None, vec![connected]).wait()));
                let started = Instant::now();
                // "connected" once the platform accepted HELLO: the status file's write (a
                // rename, 0.3 ms on ext4) then no longer comes between the dial and HELLO.
                let established = || tell(DaemonState::Connected, None);
                let end = session(
                    socket,
                    &config.session,
                    host.clone(),
                    &mut shutdown,
                    established,
                )
                .await;
                let reason = end
                    .as_ref()
                    .map_or_else(|| "clean_exit".to_owned(), disconnect_reason);
                let reason = serde_json::json!(reason);
                audit
                    .record_async(
                        None,
                        Entry::ok("WS_DISCONNECTED", details([("reason", reason)])),
                    )
                    .await;
                let Some(end) = end else {
                    return Outcome::Shutdown;
                };
                log_end(&end);
                if let SessionEnd::Fatal { code, .. } = &end {
                    audit.record_async(None, fatal_close_entry(*code)).await;
                }
                if !end.may_reconnect() {
                    return Outcome::Stopped(end);
                }
                let clean = matches!(
                    end,
                    SessionEnd::Closed {
                        code: close_code::NORMAL,
                        ..
                    }
                );
                if clean || started.elapsed() >= HEALTHY_SESSION {
                    attempt = 0;
                }
                let reason = disconnect_reason(&end);
                tell(DaemonState::Reconnecting, Some(&reason));
            }
            Err(ConnectError::Unauthorized { status }) => {
                return Outcome::Unauthorized { status };
            }
            Err(ConnectError::InvalidRequest(reason)) => {
                return Outcome::InvalidRequest(reason);
            }
            Err(err) => {
                failed = Some(err.to_string());
                tell(DaemonState::Reconnecting, failed.as_deref());
            }
        }
        let delay = config.backoff.delay(attempt);
        attempt = attempt.saturating_add(1);
        if let Some(failed) = failed.take() {
            // One line a person can act on, the retry included: the loop keeps trying.
            tracing::warn!("{failed}; trying again in {:.1} s", delay.as_secs_f64());
        }
        tracing::info!(delay_ms = delay.as_millis(), "reconnecting after a delay");
        tokio::select! {
            () = shutdown.requested() => return Outcome::Shutdown,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// One session on `socket`, `None` on shutdown. A shutdown closes with 1001 and waits
/// briefly for the platform's answer, so the platform sees a deliberate stop rather than a
/// dropped socket.
async fn session(
    socket: Socket,
    config: &SessionConfig,
    host: Host,
    shutdown: &mut Shutdown,
    established: impl FnOnce(),
) -> Option<SessionEnd> {
    let (mut stream, mut sink) = frames(socket);
    let end = tokio::select! {
        end = run_session(&mut stream, &mut sink, config.clone(), host, established) => end,
        () = shutdown.requested() => {
            let close = Frame::Close { code: GOING_AWAY, reason: "shutdown".to_owned() };
            let _ = tokio::time::timeout(CLOSE_GRACE, async {
                if sink.send(close).await.is_ok() {
                    while stream.next().await.is_some() {}
                }
            })
            .await;
            return None;
        }
    };
    // Flush whatever close the session sent before the socket is dropped; a message refused
    // by the transport is first answered with RFC 6455's code for it, as the reference's
    // websockets library does, so the platform learns why rather than seeing a bare close.
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        if let Some((code, reason)) = stream.failure() {
            let reason = reason.to_owned();
            let _ = sink.send(Frame::Close { code, reason }).await;
        }
        sink.close().await
    })
    .await;
    Some(end)
}

/// The reference's WS_DISCONNECTED reason: `ws_closed_<code>_<LABEL|unknown>` for closes,
/// and a short name for the ends it never had.
fn disconnect_reason(end: &SessionEnd) -> String {
    let closed = |code: u16| {
        format!(
            "ws_closed_{code}_{}",
            close_code::label(code).unwrap_or("unknown")
        )
    };
    match end {
        SessionEnd::Closed { code, .. } | SessionEnd::Fatal { code, .. } => closed(*code),
        SessionEnd::Revoked(_) => closed(close_code::SESSION_REVOKED),
        SessionEnd::VersionMismatch { .. } => closed(close_code::PROTOCOL_VERSION_MISMATCH),
        SessionEnd::HandshakeRejected { code } => format!("handshake_rejected_{code}"),
        SessionEnd::HandshakeFailed => "handshake_failed".to_owned(),
        SessionEnd::TransportEnded => "transport_ended".to_owned(),
    }
}

/// The reference audits a fatal close code as SESSION_REVOKED with its lowercase label.
fn fatal_close_entry(code: u16) -> Entry {
    let reason = close_code::label(code)
        .unwrap_or("unknown")
        .to_ascii_lowercase();
    Entry::ok(
        "SESSION_REVOKED",
        details([
            ("reason", serde_json::json!(reason)),
            ("source", serde_json::json!("ws_close_code")),
            ("close_code", serde_json::json!(code)),
        ]),
    )
}

fn log_end(end: &SessionEnd) {
    match end {
        SessionEnd::Closed { code, reason } => {
            tracing::warn!(code, reason = %reason, "the platform closed the connection");
        }
        SessionEnd::Fatal { code, reason } => tracing::warn!(
            code,
            label = close_code::label(*code).unwrap_or("unknown"),
            reason = %reason,
            "the platform ended the session; not reconnecting"
        ),
        SessionEnd::Revoked(payload) => {
            tracing::warn!(?payload, "the session was revoked; not reconnecting");
        }
        SessionEnd::VersionMismatch { platform_max } => tracing::error!(
            platform_max = %platform_max,
            "protocol major version mismatch; not reconnecting"
        ),
        SessionEnd::HandshakeRejected { code } => {
            tracing::error!(code, "refused the platform's HELLO_ACK; not reconnecting");
        }
        SessionEnd::HandshakeFailed => tracing::warn!("the handshake failed"),
        SessionEnd::TransportEnded => tracing::warn!("the connection dropped"),
    }
}

#[cfg(test)]
mod tests;
