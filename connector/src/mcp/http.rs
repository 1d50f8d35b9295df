//! `autogpt-shim mcp --http [PORT]`: the same tools over MCP's Streamable HTTP transport, on
//! 127.0.0.1 only. The protocol (sessions, SSE streams, its header rules) is rmcp's
//! `StreamableHttpService`; this file is the listener and the boundary in front of it.
//!
//! Every request passes the boundary before the SDK sees it, in the local API's order: a
//! loopback peer, exactly one `Host` naming this machine (403 otherwise: a web page can point a
//! name of its own at 127.0.0.1), no `Origin` (403: only a browser sends one), then exactly one
//! `Authorization: Bearer <token>` equal to this server's, compared in constant time (401). The
//! rules themselves are core's (`loopback::is_local_authority`, `secret::check_bearer`), the
//! ones the local API applies. Each refusal answers one sentence and logs only its reason,
//! never a header's value. The token is generated at start and printed once on stdout (which
//! `--http` leaves free of protocol frames), or read from `--http-token-file` (or the config
//! file's `[mcp] http_token_file`), a file only its owner may read.
//!
//! Each client's session gets a handler of its own (its MCP roots are its own); the calls of
//! every session share the one host, `max_concurrent`, the budget and the audit chain.

use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdListener};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue, ORIGIN, WWW_AUTHENTICATE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use local_core::machine::own_files;
use local_core::secret::{BearerFault, LocalToken, check_bearer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::Service as _;

use super::Server;

/// The one path MCP is served at.
pub(super) const ENDPOINT: &str = "/mcp";

/// A token file larger than this is not a token file.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// Longest a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections open at once; a further one waits to be accepted.
const MAX_CONNECTIONS: usize = 64;

/// How long a stop waits for open connections to close once their calls have ended.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// What `--http` opened at start-up, before anything else is written.
pub(super) struct Listener {
    listener: StdListener,
    token: LocalToken,
    /// How the person learns the token: printed now, or where they put it.
    announce: Announce,
}

enum Announce {
    /// A new token, printed once.
    Generated(String),
    /// The token in this file.
    File(String),
}

/// Binds 127.0.0.1:`port` and takes the token from `token_file`, or makes one.
///
/// # Errors
/// One sentence for the person: the token file's fault, or the port's.
pub(super) fn open(port: u16, token_file: Option<&Path>) -> Result<Listener, String> {
    let (token, announce) = match token_file {
        Some(path) => (
            read_token(path)?,
            Announce::File(path.display().to_string()),
        ),
        None => {
            let text =
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
            let token = LocalToken::from_configured(Some(&text))
                .ok_or_else(|| "a generated token has no bearer shape".to_owned())?;
            (token, Announce::Generated(text))
        }
    };
    let listener = StdListener::bind((Ipv4Addr::LOCALHOST, port))
        .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
        .map_err(|err| match err.kind() {
            io::ErrorKind::AddrInUse => format!(
                "port {port} on 127.0.0.1 is already in use: pass another with --http PORT (0 picks a free one)"
            ),
            io::ErrorKind::PermissionDenied => format!(
                "this user may not listen on port {port}: pass a port above 1023 with --http PORT"
            ),
            _ => format!(
                "cannot listen on 127.0.0.1:{port} ({}): pass another port with --http PORT",
                local_core::io_words::io_words(&err)
            ),
        })?;
    Ok(Listener {
        listener,
        token,
        announce,
    })
}

/// The token in a private file: one line, a bearer token's characters (RFC 6750 b64token).
fn read_token(path: &Path) -> Result<LocalToken, String> {
    let bytes =
        own_files::read_private(path, MAX_TOKEN_FILE_BYTES).map_err(|err| err.to_string())?;
    let text = String::from_utf8(bytes).unwrap_or_default();
    LocalToken::from_configured(Some(text.trim())).ok_or_else(|| {
        format!(
            "the HTTP token file {} must hold one token of letters, digits and -._~+/ (at least one character): write one into it, e.g. `openssl rand -hex 32 > {}`",
            path.display(),
            path.display()
        )
    })
}

/// Serves `server`'s tools (a fresh handler per session) until `stop` resolves; on return no
/// connection is accepted any more and the SDK's sessions are closed.
#[allow(
    clippy::print_stdout,
    reason = "the token is shown once to the person who started the server, never logged: --http leaves stdout to this"
)]
pub(super) async fn serve(listener: Listener, server: &Server, stop: impl Future<Output = ()>) {
    let Listener {
        listener,
        token,
        announce,
    } = listener;
    let url = format!(
        "http://127.0.0.1:{}{ENDPOINT}",
        listener.local_addr().map_or(0, |addr| addr.port())
    );
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(err) => {
            tracing::error!(error = %local_core::io_words::io_words(&err), "cannot serve the HTTP socket");
            return;
        }
    };
    println!("MCP over Streamable HTTP: {url}");
    match &announce {
        Announce::Generated(text) => {
            println!("Bearer token (shown only now): {text}");
            println!(
                "Clients send it with every request as the header \"Authorization: Bearer <token>\"; start with --http-token-file PATH to keep a token of your own instead."
            );
        }
        Announce::File(path) => println!(
            "Clients send the token in {path} with every request as the header \"Authorization: Bearer <token>\"."
        ),
    }
    let sessions = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(sessions.clone())
        // The boundary below refuses first; the SDK's own checks stay as a second guard.
        .with_allowed_hosts(["localhost", "127.0.0.1", "::1"])
        .enforce_origin_validation()
        // As stdio's line limit: a whole file of max_file_size_bytes, base64, fits.
        .with_max_request_body_bytes(super::stdio::MAX_LINE_BYTES);
    let factory = {
        let server = server.clone();
        move || Ok(server.for_client())
    };
    let mcp = StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), config);
    let boundary = Arc::new(Boundary { token, mcp });
    let graceful = GracefulShutdown::new();
    let places = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tracing::info!(url = %url, "serving MCP over Streamable HTTP");
    tokio::pin!(stop);
    loop {
        let place = tokio::select! {
            () = &mut stop => break,
            place = Arc::clone(&places).acquire_owned() => match place {
                Ok(place) => place,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %local_core::io_words::io_words(&err), "a connection could not be accepted");
                    // Out of descriptors, say: a moment's pause instead of a busy loop.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        if !local_core::loopback::is_loopback_peer(peer.ip()) {
            continue;
        }
        let boundary = Arc::clone(&boundary);
        let service = hyper::service::service_fn(move |request| {
            let boundary = Arc::clone(&boundary);
            async move { Ok::<_, Infallible>(boundary.answer(request, peer).await) }
        });
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A client that went away mid-request is no news.
            let _ = connection.await;
            drop(place);
        });
    }
    drop(listener);
    // Closes every session's streams, so the connections holding them can end.
    sessions.cancel();
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await;
}

/// The response type of rmcp's service, which every refusal shares.
type Answer = Response<BoxBody<Bytes, Infallible>>;

/// The checks in front of the SDK's service, and the service.
struct Boundary {
    token: LocalToken,
    mcp: StreamableHttpService<Server, LocalSessionManager>,
}

/// Why a request was refused before the SDK saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    Host,
    Origin,
    Bearer(BearerFault),
    Path,
}

impl Refusal {
    const fn status(self) -> StatusCode {
        match self {
            Self::Host | Self::Origin => StatusCode::FORBIDDEN,
            Self::Bearer(_) => StatusCode::UNAUTHORIZED,
            Self::Path => StatusCode::NOT_FOUND,
        }
    }

    /// The one sentence the client gets: what is wrong and what to do.
    const fn sentence(self) -> &'static str {
        match self {
            Self::Host => {
                "The Host header must name this machine as localhost, 127.0.0.1 or [::1]; another name is refused because a web page could have pointed it here."
            }
            Self::Origin => {
                "Requests with an Origin header come from a web page and are refused; connect from an MCP client program instead."
            }
            Self::Bearer(BearerFault::Missing) => {
                "No bearer token was sent; send the header \"Authorization: Bearer <token>\" with the token autogpt-shim mcp --http printed at start (or the one in its --http-token-file)."
            }
            Self::Bearer(BearerFault::Malformed) => {
                "The Authorization header is malformed; send exactly one header of the form \"Authorization: Bearer <token>\"."
            }
            Self::Bearer(BearerFault::Wrong) => {
                "The bearer token is not this server's; use the token autogpt-shim mcp --http printed at start (a new one each start) or the one in its --http-token-file."
            }
            Self::Path => {
                "MCP is served at /mcp only; point the client at http://127.0.0.1:PORT/mcp."
            }
        }
    }

    /// The log's word for it (never a header's value).
    const fn reason(self) -> &'static str {
        match self {
            Self::Host => "Host is not this machine",
            Self::Origin => "an Origin header",
            Self::Bearer(BearerFault::Missing) => "no bearer token",
            Self::Bearer(BearerFault::Malformed) => "a malformed Authorization header",
            Self::Bearer(BearerFault::Wrong) => "a wrong bearer token",
            Self::Path => "a path other than /mcp",
        }
    }

    /// RFC 6750's challenge for a refused bearer.
    const fn challenge(self) -> Option<&'static str> {
        match self {
            Self::Bearer(BearerFault::Missing) => Some("Bearer realm=\"autogpt-shim mcp\""),
            Self::Bearer(BearerFault::Malformed) => {
                Some("Bearer realm=\"autogpt-shim mcp\", error=\"invalid_request\"")
            }
            Self::Bearer(BearerFault::Wrong) => {
                Some("Bearer realm=\"autogpt-shim mcp\", error=\"invalid_token\"")
            }
            _ => None,
        }
    }

    fn answer(self) -> Answer {
        let mut response =
            Response::new(Full::new(Bytes::from_static(self.sentence().as_bytes())).boxed());
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if let Some(challenge) = self.challenge() {
            headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        response
    }
}

impl Boundary {
    /// The request's refusal, in the local API's order; `None` lets it through.
    fn judge(&self, request: &Request<Incoming>) -> Option<Refusal> {
        let headers = request.headers();
        let mut hosts = headers.get_all(HOST).iter();
        let local = match (hosts.next(), hosts.next()) {
            (Some(host), None) => host
                .to_str()
                .is_ok_and(local_core::loopback::is_local_authority),
            _ => false,
        };
        if !local {
            return Some(Refusal::Host);
        }
        if headers.contains_key(ORIGIN) {
            return Some(Refusal::Origin);
        }
        let presented = headers
            .get_all(AUTHORIZATION)
            .iter()
            .map(HeaderValue::as_bytes);
        if let Err(fault) = check_bearer(presented, &self.token) {
            return Some(Refusal::Bearer(fault));
        }
        if request.uri().path() != ENDPOINT {
            return Some(Refusal::Path);
        }
        None
    }

    async fn answer(&self, request: Request<Incoming>, peer: SocketAddr) -> Answer {
        if let Some(refusal) = self.judge(&request) {
            tracing::info!(
                method = %request.method(),
                status = refusal.status().as_u16(),
                peer_port = peer.port(),
                "HTTP request refused: {}",
                refusal.reason()
            );
            return refusal.answer();
        }
        match self.mcp.clone().call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_sentences_with_their_status() {
        for refusal in [
            Refusal::Host,
            Refusal::Origin,
            Refusal::Bearer(BearerFault::Missing),
            Refusal::Bearer(BearerFault::Malformed),
            Refusal::Bearer(BearerFault::Wrong),
            Refusal::Path,
        ] {
            let sentence = refusal.sentence();
            assert!(sentence.ends_with('.'), "{sentence}");
            assert_eq!(sentence.matches(". ").count(), 0, "{sentence}");
            let answer = refusal.answer();
            assert_eq!(answer.status(), refusal.status());
            assert_eq!(
                answer.headers().contains_key(WWW_AUTHENTICATE),
                matches!(refusal, Refusal::Bearer(_))
            );
        }
    }
}
