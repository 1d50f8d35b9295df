//! Tests of [`super`] against a real server on loopback: the request sent, head and body caps
//! whatever the framing, broken answers, one deadline for the exchange, a closed port.

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
