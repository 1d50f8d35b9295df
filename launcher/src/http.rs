//! The two readiness calls, over hyper's bare HTTP/1.1 connection: one request per connection
//! (`Connection: close`), the whole exchange under one deadline, the answer's head and body
//! each under a size cap.
//!
//! hyper does the framing (`Content-Length`, chunked, read until close). No pool, redirects,
//! proxies or TLS: a loopback API needs none of them, so `client::conn::http1` is enough.

use std::{io, net::SocketAddr, time::Duration};

use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper::{
    Method, Request,
    body::Bytes,
    client::conn::http1,
    header::{self, HeaderValue},
};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// The most bytes an answer's head (status line, headers, blank line) may have. It is also
/// the connection's read buffer, which hyper requires to be at least 8 KiB.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;
/// The most bytes an answer's body may have once unframed. With the head, 64 KiB: `/health`
/// and a new session are far below it.
pub const MAX_BODY_BYTES: usize = 56 * 1024;

/// An answer: its status and its decoded body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body, with any chunked framing removed.
    pub body: Vec<u8>,
}

/// Why a request got no usable answer. Messages name what failed, never what was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The connection could not be opened (usually: nothing listens yet).
    #[error("connect: {0}")]
    Connect(io::ErrorKind),
    /// The request could not be put together (a path or token that is not valid HTTP).
    #[error("the request cannot be built")]
    Request,
    /// No complete answer within the deadline.
    #[error("no answer within {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// The answer's head is bigger than [`MAX_HEAD_BYTES`].
    #[error("answer head over {MAX_HEAD_BYTES} bytes")]
    HeadTooLarge,
    /// The answer's body is bigger than [`MAX_BODY_BYTES`].
    #[error("answer body over {MAX_BODY_BYTES} bytes")]
    BodyTooLarge,
    /// The answer is not well-formed HTTP/1.x (hyper's description).
    #[error("malformed answer: {0}")]
    Malformed(String),
    /// Sending or receiving failed, e.g. the connection closed early (hyper's description).
    #[error("exchange: {0}")]
    Exchange(String),
}

/// Sends one request without a body to `addr` and reads the answer, all within `deadline`.
/// With `bearer`, the request carries `Authorization: Bearer <bearer>`.
pub async fn request(
    addr: SocketAddr,
    method: Method,
    path: &str,
    bearer: Option<&str>,
    deadline: Duration,
) -> Result<Response, HttpError> {
    let request = build(addr, method, path, bearer)?;
    tokio::time::timeout(deadline, exchange(addr, request))
        .await
        .map_err(|_| HttpError::TimedOut(deadline))?
}

/// The API wants a local `Host`; `Content-Length: 0` frames the empty body of a POST (hyper
/// sends no length for an empty body). The bearer is marked sensitive; hyper copies it into
/// its write buffer, which, like `Command`'s copies, is beyond [`crate::token::wipe`]'s reach.
fn build(
    addr: SocketAddr,
    method: Method,
    path: &str,
    bearer: Option<&str>,
) -> Result<Request<Empty<Bytes>>, HttpError> {
    let mut builder = Request::builder()
        .uri(path)
        .header(header::HOST, addr.to_string())
        .header(header::CONNECTION, "close");
    if let Some(token) = bearer {
        let mut value =
            HeaderValue::try_from(format!("Bearer {token}")).map_err(|_| HttpError::Request)?;
        value.set_sensitive(true);
        builder = builder.header(header::AUTHORIZATION, value);
    }
    if method != Method::GET {
        builder = builder.header(header::CONTENT_LENGTH, "0");
    }
    builder
        .method(method)
        .body(Empty::new())
        .map_err(|_| HttpError::Request)
}

async fn exchange(addr: SocketAddr, request: Request<Empty<Bytes>>) -> Result<Response, HttpError> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| HttpError::Connect(e.kind()))?;
    let (mut sender, connection) = http1::Builder::new()
        .max_header_size(MAX_HEAD_BYTES)
        .max_buf_size(MAX_HEAD_BYTES)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| failed(&e))?;
    let answer = async {
        let response = sender.send_request(request).await.map_err(|e| failed(&e))?;
        let status = response.status().as_u16();
        let body = Limited::new(response.into_body(), MAX_BODY_BYTES)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<LengthLimitError>() {
                    HttpError::BodyTooLarge
                } else {
                    e.downcast_ref::<hyper::Error>()
                        .map_or_else(|| HttpError::Exchange(e.to_string()), failed)
                }
            })?;
        Ok(Response {
            status,
            body: body.to_bytes().to_vec(),
        })
    };
    // The connection does the reading and writing and ends once the answer is in (the request
    // says `Connection: close`); a failure of its own also reaches `answer`, which reports it.
    let (answer, _) = tokio::join!(answer, connection);
    answer
}

/// hyper's description, with the OS's error kind when a socket failed.
fn failed(error: &hyper::Error) -> HttpError {
    if error.is_parse_too_large() {
        return HttpError::HeadTooLarge;
    }
    let mut text = error.to_string();
    if let Some(io) = std::error::Error::source(error).and_then(|s| s.downcast_ref::<io::Error>()) {
        text = format!("{text}: {}", io.kind());
    }
    if error.is_parse() || error.is_parse_status() {
        HttpError::Malformed(text)
    } else {
        HttpError::Exchange(text)
    }
}

#[cfg(test)]
mod tests;
