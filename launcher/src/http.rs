//! A minimal HTTP/1.1 client for the two readiness calls: one request per connection
//! (`Connection: close`), the answer read to the end under a size cap and a deadline, then
//! parsed with `Content-Length`, chunked or read-until-close framing.
//!
//! It is not a general client: no redirects, no proxies, no keep-alive, no TLS. That is what
//! the readiness check needs, and it keeps an HTTP stack out of the launcher.

use std::{io, net::SocketAddr, time::Duration};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::token::wipe;

/// The most bytes an answer may have; `/health` and a new session are far below it.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;

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
    /// The request could not be written.
    #[error("send: {0}")]
    Send(io::ErrorKind),
    /// The answer could not be read.
    #[error("receive: {0}")]
    Receive(io::ErrorKind),
    /// No complete answer within the deadline.
    #[error("no answer within {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// The answer is bigger than [`MAX_RESPONSE_BYTES`].
    #[error("answer over {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
    /// The answer is not well-formed HTTP/1.1.
    #[error("malformed answer: {0}")]
    Malformed(&'static str),
}

/// Sends one request without a body to `addr` and reads the answer, all within `deadline`.
/// With `bearer`, the request carries `Authorization: Bearer <bearer>`.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    deadline: Duration,
) -> Result<Response, HttpError> {
    let raw = tokio::time::timeout(deadline, exchange(addr, method, path, bearer))
        .await
        .map_err(|_| HttpError::TimedOut(deadline))??;
    parse_response(&raw)
}

async fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
) -> Result<Vec<u8>, HttpError> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| HttpError::Connect(e.kind()))?;
    let head = request_head(addr, method, path, bearer);
    let sent = stream.write_all(head.as_bytes()).await;
    wipe(head.into_bytes());
    sent.map_err(|e| HttpError::Send(e.kind()))?;
    let mut raw = Vec::new();
    let limit = u64::try_from(MAX_RESPONSE_BYTES + 1).unwrap_or(u64::MAX);
    (&mut stream)
        .take(limit)
        .read_to_end(&mut raw)
        .await
        .map_err(|e| HttpError::Receive(e.kind()))?;
    if raw.len() > MAX_RESPONSE_BYTES {
        return Err(HttpError::TooLarge);
    }
    Ok(raw)
}

/// The request's bytes. The API wants a local `Host`; `Content-Length: 0` frames the empty
/// body of a POST.
fn request_head(addr: SocketAddr, method: &str, path: &str, bearer: Option<&str>) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
    if let Some(token) = bearer {
        head.push_str("Authorization: Bearer ");
        head.push_str(token);
        head.push_str("\r\n");
    }
    if method != "GET" {
        head.push_str("Content-Length: 0\r\n");
    }
    head.push_str("Connection: close\r\n\r\n");
    head
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Parses a complete answer (everything the server sent before closing).
pub fn parse_response(raw: &[u8]) -> Result<Response, HttpError> {
    let head_end = find(raw, b"\r\n\r\n").ok_or(HttpError::Malformed("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..head_end])
        .map_err(|_| HttpError::Malformed("headers are not text"))?;
    let rest = &raw[head_end + 4..];
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(status_code)
        .ok_or(HttpError::Malformed("no HTTP/1.x status line"))?;
    let mut chunked = false;
    let mut length: Option<usize> = None;
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or(HttpError::Malformed("header without a colon"))?;
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("transfer-encoding") {
            // Chunked must be the last coding; any other framing is read until close.
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|coding| coding.trim().eq_ignore_ascii_case("chunked"));
        } else if name.eq_ignore_ascii_case("content-length") {
            let n = digits(value)
                .and_then(|d| d.parse::<usize>().ok())
                .ok_or(HttpError::Malformed("bad Content-Length"))?;
            if length.is_some_and(|seen| seen != n) {
                return Err(HttpError::Malformed("conflicting Content-Length"));
            }
            length = Some(n);
        }
    }
    // Transfer-Encoding wins over Content-Length (RFC 9112, section 6.3).
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(n) = length {
        rest.get(..n)
            .ok_or(HttpError::Malformed("body shorter than its Content-Length"))?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response { status, body })
}

/// The code of `HTTP/1.x NNN reason`.
fn status_code(line: &str) -> Option<u16> {
    let mut parts = line.splitn(3, ' ');
    let version = parts.next()?;
    if !matches!(version, "HTTP/1.0" | "HTTP/1.1") {
        return None;
    }
    let code = parts.next().filter(|c| c.len() == 3)?;
    digits(code)?.parse().ok()
}

/// `text` when it is one or more ASCII digits (`parse` alone would also take a sign).
fn digits(text: &str) -> Option<&str> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())).then_some(text)
}

/// Removes chunked framing: size lines (extensions ignored), data, a zero chunk, trailers.
fn dechunk(mut input: &[u8]) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    loop {
        let line_end = find(input, b"\r\n").ok_or(HttpError::Malformed("truncated chunk size"))?;
        let size = std::str::from_utf8(&input[..line_end])
            .ok()
            .and_then(|line| line.split(';').next())
            .map(str::trim)
            .filter(|hex| !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|hex| usize::from_str_radix(hex, 16).ok())
            .ok_or(HttpError::Malformed("bad chunk size"))?;
        input = &input[line_end + 2..];
        if size == 0 {
            // Trailers, each ended by CRLF, then an empty line.
            loop {
                let end = find(input, b"\r\n").ok_or(HttpError::Malformed("truncated trailers"))?;
                let trailer_was_empty = end == 0;
                input = &input[end + 2..];
                if trailer_was_empty {
                    return Ok(body);
                }
            }
        }
        let end = size
            .checked_add(2)
            .filter(|end| *end <= input.len())
            .ok_or(HttpError::Malformed("truncated chunk"))?;
        if &input[size..end] != b"\r\n" {
            return Err(HttpError::Malformed("chunk without its CRLF"));
        }
        body.extend_from_slice(&input[..size]);
        input = &input[end..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(raw: &str) -> Result<Response, HttpError> {
        parse_response(raw.as_bytes())
    }

    fn ok(status: u16, body: &str) -> Result<Response, HttpError> {
        Ok(Response {
            status,
            body: body.as_bytes().to_vec(),
        })
    }

    #[test]
    fn content_length_bodies() {
        assert_eq!(
            parsed(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 15\r\n\r\n{\"status\":\"ok\"}"
            ),
            ok(200, "{\"status\":\"ok\"}")
        );
        assert_eq!(
            parsed("HTTP/1.1 204 No Content\r\ncontent-length:0\r\n\r\n"),
            ok(204, "")
        );
        // Equal duplicates are harmless; anything past the length is not body.
        assert_eq!(
            parsed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCONTENT-LENGTH: 2\r\n\r\nhiXX"),
            ok(200, "hi")
        );
        assert_eq!(
            parsed("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhi"),
            Err(HttpError::Malformed("body shorter than its Content-Length"))
        );
        assert_eq!(
            parsed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi!"),
            Err(HttpError::Malformed("conflicting Content-Length"))
        );
        for bad in ["+2", "-1", "", "2 2", "0x2"] {
            assert_eq!(
                parsed(&format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {bad}\r\n\r\nhi"
                )),
                Err(HttpError::Malformed("bad Content-Length")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn chunked_bodies() {
        assert_eq!(
            parsed(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n{\"a\":1}\r\n0\r\n\r\n"
            ),
            ok(200, "{\"a\":1}")
        );
        // Several chunks, upper-case hex, an extension, trailers, and a stale Content-Length.
        assert_eq!(
            parsed(
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\ntransfer-encoding: gzip, Chunked\r\n\r\n\
                 3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n"
            ),
            ok(200, "abc0123456789")
        );
        for (truncated, why) in [
            ("3\r\nab", "truncated chunk"),
            ("3\r\nabcX\r\n0\r\n\r\n", "chunk without its CRLF"),
            ("3\r\nabc\r\n", "truncated chunk size"),
            ("3\r\nabc\r\n0\r\n", "truncated trailers"),
            ("zz\r\n", "bad chunk size"),
            ("+3\r\nabc\r\n0\r\n\r\n", "bad chunk size"),
            ("fffffffffffffffffffff\r\n", "bad chunk size"),
            ("ffffffffffffffff\r\n", "truncated chunk"),
        ] {
            assert_eq!(
                parsed(&format!(
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{truncated}"
                )),
                Err(HttpError::Malformed(why)),
                "{truncated:?}"
            );
        }
    }

    #[test]
    fn bodies_read_until_close() {
        assert_eq!(
            parsed("HTTP/1.0 503 Service Unavailable\r\n\r\nnot yet"),
            ok(503, "not yet")
        );
    }

    #[test]
    fn broken_heads() {
        for (raw, why) in [
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n",
                "no end of headers",
            ),
            ("", "no end of headers"),
            ("HTTP/2 200\r\n\r\n", "no HTTP/1.x status line"),
            ("HTTP/1.1 20 OK\r\n\r\n", "no HTTP/1.x status line"),
            ("HTTP/1.1 +20 OK\r\n\r\n", "no HTTP/1.x status line"),
            ("SSH-2.0-OpenSSH\r\n\r\n", "no HTTP/1.x status line"),
            (
                "HTTP/1.1 200 OK\r\nbroken\r\n\r\n",
                "header without a colon",
            ),
        ] {
            assert_eq!(parsed(raw), Err(HttpError::Malformed(why)), "{raw:?}");
        }
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nX: \xff\r\n\r\n"),
            Err(HttpError::Malformed("headers are not text"))
        );
        // A status line without a reason phrase is still one.
        assert_eq!(parsed("HTTP/1.1 200\r\n\r\n"), ok(200, ""));
    }

    #[test]
    fn the_request_is_local_and_framed() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 8765));
        assert_eq!(
            request_head(addr, "GET", "/health", None),
            "GET /health HTTP/1.1\r\nHost: 127.0.0.1:8765\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(
            request_head(addr, "POST", "/v1/sessions", Some("tok")),
            "POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1:8765\r\nAuthorization: Bearer tok\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n"
        );
    }

    /// A one-shot server: reads the request head, answers `answer`, closes.
    async fn serve_once(answer: Vec<u8>) -> (SocketAddr, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while find(&head, b"\r\n\r\n").is_none() {
                let mut byte = [0u8; 1];
                if socket.read(&mut byte).await.unwrap() == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            socket.write_all(&answer).await.unwrap();
            socket.shutdown().await.unwrap();
            String::from_utf8(head).unwrap()
        });
        (addr, task)
    }

    #[tokio::test]
    async fn a_round_trip_over_loopback() {
        let (addr, server) = serve_once(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n".to_vec(),
        )
        .await;
        let answer = request(
            addr,
            "POST",
            "/v1/sessions",
            Some("t0k"),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(
            answer,
            Response {
                status: 200,
                body: b"ok".to_vec()
            }
        );
        let head = server.await.unwrap();
        assert!(head.contains("Authorization: Bearer t0k\r\n"), "{head}");
    }

    #[tokio::test]
    async fn oversized_silent_and_absent_servers() {
        let mut huge = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        huge.resize(MAX_RESPONSE_BYTES + 10, b'x');
        let (addr, _server) = serve_once(huge).await;
        assert_eq!(
            request(addr, "GET", "/health", None, Duration::from_secs(5)).await,
            Err(HttpError::TooLarge)
        );

        // Accepts but never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let deadline = Duration::from_millis(200);
        assert_eq!(
            request(addr, "GET", "/health", None, deadline).await,
            Err(HttpError::TimedOut(deadline))
        );
        drop(listener);

        // Nothing listens any more.
        let refused = request(addr, "GET", "/health", None, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(
            refused,
            HttpError::Connect(io::ErrorKind::ConnectionRefused)
        );
        assert_eq!(refused.to_string(), "connect: connection refused");
    }
}
