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
mod tests {
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpListener,
        task::JoinHandle,
    };

    use super::*;

    const PATIENT: Duration = Duration::from_secs(5);

    /// A one-shot server on loopback: reads the request head, writes `answer`, then closes
    /// (or, with `hold`, keeps the connection open without another byte). Returns the head.
    async fn serve_once(answer: Vec<u8>, hold: bool) -> (SocketAddr, JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                if socket.read(&mut byte).await.unwrap() == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            // The client may hang up mid-answer (that is what a cap does): not a failure here.
            let _ = socket.write_all(&answer).await;
            if hold {
                std::future::pending::<()>().await;
            }
            let _ = socket.shutdown().await;
            String::from_utf8(head).unwrap()
        });
        (addr, task)
    }

    async fn get(answer: Vec<u8>) -> Result<Response, HttpError> {
        let (addr, _server) = serve_once(answer, false).await;
        request(addr, Method::GET, "/health", None, PATIENT).await
    }

    /// A 200 whose head is exactly `head_len` bytes (padded with an `x-pad` header).
    fn head_of(head_len: usize) -> Vec<u8> {
        let bare = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nx-pad: \r\n\r\n";
        let pad = head_len - bare.len();
        format!(
            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nx-pad: {}\r\n\r\n",
            "p".repeat(pad)
        )
        .into_bytes()
    }

    fn with_length(len: usize) -> Vec<u8> {
        let mut raw = format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\n").into_bytes();
        raw.resize(raw.len() + len, b'x');
        raw
    }

    /// A chunked body of `len` bytes in 1000-byte chunks, with an extension and a trailer.
    fn chunked(len: usize) -> Vec<u8> {
        let mut raw = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        let mut left = len;
        while left > 0 {
            let n = left.min(1000);
            raw.extend_from_slice(format!("{n:x};ext=1\r\n").as_bytes());
            raw.resize(raw.len() + n, b'c');
            raw.extend_from_slice(b"\r\n");
            left -= n;
        }
        raw.extend_from_slice(b"0\r\nx-trailer: t\r\n\r\n");
        raw
    }

    /// A body delimited by the server closing the connection (HTTP/1.0, no length).
    fn until_close(len: usize) -> Vec<u8> {
        let mut raw = b"HTTP/1.0 200 OK\r\n\r\n".to_vec();
        raw.resize(raw.len() + len, b'u');
        raw
    }

    #[tokio::test]
    async fn a_round_trip_sends_a_local_framed_request() {
        let (addr, server) = serve_once(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n".to_vec(),
            false,
        )
        .await;
        let answer = request(addr, Method::POST, "/v1/sessions", Some("t0k"), PATIENT)
            .await
            .unwrap();
        assert_eq!(
            answer,
            Response {
                status: 200,
                body: b"ok".to_vec()
            }
        );
        let head = server.await.unwrap().to_ascii_lowercase();
        assert!(head.starts_with("post /v1/sessions http/1.1\r\n"), "{head}");
        for line in [
            format!("host: {addr}\r\n"),
            "authorization: bearer t0k\r\n".to_owned(),
            "content-length: 0\r\n".to_owned(),
            "connection: close\r\n".to_owned(),
        ] {
            assert!(head.contains(&line), "no {line:?} in {head:?}");
        }

        let (addr, server) = serve_once(with_length(0), false).await;
        request(addr, Method::GET, "/health", None, PATIENT)
            .await
            .unwrap();
        let head = server.await.unwrap().to_ascii_lowercase();
        assert!(head.starts_with("get /health http/1.1\r\n"), "{head}");
        assert!(!head.contains("content-length"), "{head}");
        assert!(!head.contains("authorization"), "{head}");
    }

    #[tokio::test]
    async fn the_head_is_capped_at_its_limit() {
        let at_limit = get(head_of(MAX_HEAD_BYTES)).await.unwrap();
        assert_eq!((at_limit.status, at_limit.body.len()), (200, 0));
        assert_eq!(
            get(head_of(MAX_HEAD_BYTES + 1)).await,
            Err(HttpError::HeadTooLarge)
        );
        // A head that never ends is refused once the read buffer is full, not read forever.
        let mut endless = b"HTTP/1.1 200 OK\r\n".to_vec();
        endless.resize(4 * MAX_HEAD_BYTES, b'h');
        let (addr, _server) = serve_once(endless, true).await;
        assert_eq!(
            request(addr, Method::GET, "/health", None, PATIENT).await,
            Err(HttpError::HeadTooLarge)
        );
    }

    #[tokio::test]
    async fn the_body_is_capped_at_its_limit_whatever_the_framing() {
        for framing in [with_length, chunked, until_close] {
            let at_limit = get(framing(MAX_BODY_BYTES)).await.unwrap();
            assert_eq!(
                (at_limit.status, at_limit.body.len()),
                (200, MAX_BODY_BYTES)
            );
            // Compared by length: a failure should not print 56 KiB.
            assert_eq!(
                get(framing(MAX_BODY_BYTES + 1))
                    .await
                    .map(|answer| answer.body.len()),
                Err(HttpError::BodyTooLarge)
            );
        }
        // The chunked framing is gone from the body, trailers included.
        assert_eq!(get(chunked(2500)).await.unwrap().body, vec![b'c'; 2500]);
    }

    #[tokio::test]
    async fn broken_answers_are_malformed_or_cut_short() {
        let malformed = |why: &str| Err(HttpError::Malformed(why.to_owned()));
        for (raw, expected) in [
            (
                &b"SSH-2.0-OpenSSH\r\n\r\n"[..],
                malformed("invalid HTTP version parsed"),
            ),
            (
                b"HTTP/1.1 20 OK\r\n\r\n",
                malformed("invalid HTTP status-code parsed"),
            ),
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nhi!",
                malformed("invalid content-length parsed"),
            ),
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: +2\r\n\r\nhi",
                malformed("invalid content-length parsed"),
            ),
            (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
                Err(HttpError::Exchange(
                    "error reading a body from connection: invalid input parameter".to_owned(),
                )),
            ),
        ] {
            assert_eq!(get(raw.to_vec()).await, expected, "{raw:?}");
        }
        assert_eq!(
            get(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhi".to_vec()).await,
            Err(HttpError::Exchange(
                "error reading a body from connection: unexpected end of file".to_owned()
            ))
        );
        assert_eq!(
            get(Vec::new()).await,
            Err(HttpError::Exchange(
                "connection closed before message completed".to_owned()
            ))
        );
    }

    #[tokio::test]
    async fn one_deadline_covers_the_whole_exchange() {
        let deadline = Duration::from_millis(200);
        // Accepts but never answers.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        assert_eq!(
            request(addr, Method::GET, "/health", None, deadline).await,
            Err(HttpError::TimedOut(deadline))
        );
        drop(listener);
        // Answers the head, then stalls in the body.
        let (addr, _server) = serve_once(
            b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf".to_vec(),
            true,
        )
        .await;
        assert_eq!(
            request(addr, Method::GET, "/health", None, deadline).await,
            Err(HttpError::TimedOut(deadline))
        );
    }

    #[tokio::test]
    async fn a_closed_port_is_a_readable_connect_failure() {
        let addr = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let refused = request(addr, Method::GET, "/health", None, PATIENT)
            .await
            .unwrap_err();
        assert_eq!(
            refused,
            HttpError::Connect(io::ErrorKind::ConnectionRefused)
        );
        assert_eq!(refused.to_string(), "connect: connection refused");
    }
}
