//! Tests of `ws`.

use std::sync::Mutex;

use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http;

use super::*;
use crate::link::{DEFAULT_PLATFORM_URL, data_url};
use crate::protocol::{Arch, Platform};

const TOKEN: &str = "tok-unit-test";

#[test]
fn backoff_doubles_to_the_ceiling_and_adds_bounded_jitter() {
    let backoff = Backoff::default();
    let ceilings: Vec<u64> = (0..8).map(|n| backoff.ceiling(n).as_secs()).collect();
    assert_eq!(ceilings, [1, 2, 4, 8, 16, 32, 60, 60]);
    assert_eq!(backoff.ceiling(u32::MAX), Duration::from_secs(60));
    for attempt in 0..10 {
        let delay = backoff.delay(attempt);
        assert!(delay >= backoff.ceiling(attempt));
        assert!(delay < backoff.ceiling(attempt) + backoff.jitter);
    }
    let fixed = Backoff {
        jitter: Duration::ZERO,
        ..backoff
    };
    assert_eq!(fixed.delay(2), Duration::from_secs(4));
}

#[test]
fn urls_map_schemes_and_refuse_bad_session_ids() {
    assert_eq!(
        data_url("https://p.example/", "s-1").unwrap(),
        "wss://p.example/ws/local-executor/s-1"
    );
    assert_eq!(
        data_url("http://127.0.0.1:80", "a.b:c_d").unwrap(),
        "ws://127.0.0.1:80/ws/local-executor/a.b:c_d"
    );
    assert_eq!(
        data_url(DEFAULT_PLATFORM_URL, "s").unwrap(),
        "wss://platform.autogpt.net/ws/local-executor/s"
    );
    for (base, id) in [
        ("ftp://x", "s"),
        ("no-scheme", "s"),
        ("wss://", "s"),
        ("wss://x", "../control"),
        ("wss://x", ""),
        ("wss://x", "a?b"),
    ] {
        assert!(
            matches!(data_url(base, id), Err(ConnectError::InvalidRequest(_))),
            "{base} {id}"
        );
    }
}

#[test]
fn tokens_are_redacted_and_blank_means_none() {
    let token = Token::from_configured(Some(TOKEN)).unwrap();
    assert!(!format!("{token:?}").contains(TOKEN));
    assert_eq!(Token::from_configured(Some("  ")), None);
    assert_eq!(Token::from_configured(None), None);
}

#[test]
fn frames_map_both_ways() {
    assert_eq!(to_message(Frame::Text("x".to_owned())), Message::text("x"));
    let Message::Close(Some(close)) = to_message(Frame::Close {
        code: 4428,
        reason: "session_revoked".to_owned(),
    }) else {
        panic!("not a close");
    };
    assert_eq!(u16::from(close.code), 4428);
    assert_eq!(close.reason.as_str(), "session_revoked");
}

#[tokio::test]
async fn a_refused_message_leaves_its_rfc_6455_close_code() {
    use tokio_tungstenite::tungstenite::error::CapacityError;
    let too_long = CapacityError::MessageTooLong {
        size: MAX_FRAME_BYTES + 1,
        max_size: MAX_FRAME_BYTES,
    };
    let cases = [
        (WsError::Capacity(too_long), Some(1009)),
        (WsError::Utf8("invalid utf-8".to_owned()), Some(1007)),
        (WsError::ConnectionClosed, None),
    ];
    for (error, code) in cases {
        let inner = futures_util::stream::iter([Ok(Message::binary(vec![1])), Err(error)]);
        let mut stream = FrameStream::new(inner);
        // The binary message is dropped and the error ends the stream.
        assert!(stream.next().await.is_none());
        assert_eq!(stream.failure().map(|(code, _)| code), code);
    }
}

/// What the test platform saw on one upgrade.
#[derive(Debug, Clone, Default)]
struct Seen {
    path: String,
    authorization: Option<String>,
}

/// Accepts one upgrade, recording its path and header; `refuse` answers with that status.
async fn accept(
    listener: &TcpListener,
    refuse: Option<u16>,
) -> (Option<WebSocketStream<TcpStream>>, Seen) {
    let (tcp, _) = listener.accept().await.unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = Arc::clone(&seen);
    // tungstenite's `Callback` fixes this error type.
    #[allow(clippy::result_large_err)]
    let callback = move |request: &Request, response: Response| {
        let mut seen = record.lock().unwrap();
        seen.path = request.uri().path().to_owned();
        seen.authorization = request
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap().to_owned());
        match refuse {
            Some(status) => {
                let mut refusal = ErrorResponse::new(None);
                *refusal.status_mut() = http::StatusCode::from_u16(status).unwrap();
                Err(refusal)
            }
            None => Ok(response),
        }
    };
    let socket = tokio_tungstenite::accept_hdr_async(tcp, callback)
        .await
        .ok();
    let seen = seen.lock().unwrap().clone();
    (socket, seen)
}

async fn next_text(socket: &mut WebSocketStream<TcpStream>) -> serde_json::Value {
    loop {
        match socket.next().await.unwrap().unwrap() {
            Message::Text(text) => return serde_json::from_str(text.as_str()).unwrap(),
            Message::Pong(_) | Message::Ping(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

async fn close(socket: &mut WebSocketStream<TcpStream>, code: u16) {
    socket
        .close(Some(CloseFrame {
            code: CloseCode::from(code),
            reason: "test".into(),
        }))
        .await
        .unwrap();
    while socket.next().await.is_some() {}
}

fn connection(addr: std::net::SocketAddr, token: Option<&str>) -> DataConnection {
    DataConnection {
        url: data_url(&format!("ws://{addr}"), "sess-1").unwrap(),
        token: Token::from_configured(token),
        oauth: None,
        session: SessionConfig::new("sess-1", "m-1", "0.0.0", Platform::Linux, Arch::X86_64),
        observer: None,
        backoff: Backoff {
            base: Duration::from_millis(10),
            max: Duration::from_millis(40),
            jitter: Duration::ZERO,
        },
    }
}

fn jail() -> Host {
    Host::new(Arc::new(
        local_core::machine::jail::Jail::open(&std::env::temp_dir()).unwrap(),
    ))
}

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn reconnects_after_1011_answers_pings_and_stops_on_4428() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_stop, shutdown) = Shutdown::new();
    let run = tokio::spawn(run_data_connection(
        connection(addr, Some(TOKEN)),
        jail(),
        shutdown,
    ));

    let (socket, seen) = accept(&listener, None).await;
    let mut socket = socket.unwrap();
    assert_eq!(seen.path, "/ws/local-executor/sess-1");
    assert_eq!(seen.authorization.as_deref(), Some("Bearer tok-unit-test"));
    assert_eq!(next_text(&mut socket).await["type"], "HELLO");
    socket.send(Message::Ping("p".into())).await.unwrap();
    let pong = loop {
        match socket.next().await.unwrap().unwrap() {
            Message::Pong(data) => break data,
            Message::Text(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(&pong[..], b"p");
    // Binary frames are ignored rather than ending the session.
    socket.send(Message::binary(vec![1, 2, 3])).await.unwrap();
    close(&mut socket, 1011).await;

    let (socket, _) = tokio::time::timeout(LIMIT, accept(&listener, None))
        .await
        .unwrap();
    let mut socket = socket.unwrap();
    assert_eq!(next_text(&mut socket).await["type"], "HELLO");
    close(&mut socket, 4428).await;

    let outcome = tokio::time::timeout(LIMIT, run).await.unwrap().unwrap();
    assert!(
        matches!(
            outcome,
            Outcome::Stopped(SessionEnd::Fatal { code: 4428, .. })
        ),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn refused_upgrades_end_as_unauthorized_and_other_statuses_retry() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_stop, shutdown) = Shutdown::new();
    let run = tokio::spawn(run_data_connection(
        connection(addr, None),
        jail(),
        shutdown,
    ));
    let (_, seen) = accept(&listener, Some(503)).await;
    assert_eq!(seen.authorization, None, "no token means no header");
    let (_, _) = tokio::time::timeout(LIMIT, accept(&listener, Some(401)))
        .await
        .unwrap();
    let outcome = tokio::time::timeout(LIMIT, run).await.unwrap().unwrap();
    assert_eq!(outcome, Outcome::Unauthorized { status: 401 });

    let url = connection(addr, None).url;
    let err = connect(&url, None);
    let (result, _) = tokio::join!(err, accept(&listener, Some(403)));
    assert!(matches!(
        result,
        Err(ConnectError::Unauthorized { status: 403 })
    ));
}

#[tokio::test]
async fn shutdown_closes_the_socket_with_1001() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, shutdown) = Shutdown::new();
    let run = tokio::spawn(run_data_connection(
        connection(addr, None),
        jail(),
        shutdown,
    ));
    let (socket, _) = accept(&listener, None).await;
    let mut socket = socket.unwrap();
    assert_eq!(next_text(&mut socket).await["type"], "HELLO");
    stop.send(true).unwrap();
    let code = loop {
        match socket.next().await {
            Some(Ok(Message::Close(Some(close)))) => break u16::from(close.code),
            Some(Ok(_)) => {}
            other => panic!("no close frame: {other:?}"),
        }
    };
    assert_eq!(code, GOING_AWAY);
    let outcome = tokio::time::timeout(LIMIT, run).await.unwrap().unwrap();
    assert_eq!(outcome, Outcome::Shutdown);
}

#[test]
fn long_text_goes_out_in_fragments_cut_between_characters() {
    // 'é' is two bytes and 'x' one: the fragment size falls inside a character.
    let text = format!("x{}", "é".repeat(FRAGMENT_BYTES));
    let messages = to_messages(Frame::Text(text.clone()));
    assert_eq!(messages.len(), 3);
    let mut joined = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let Message::Frame(frame) = message else {
            panic!("fragment {i} is not a frame");
        };
        let expected = if i == 0 {
            OpData::Text
        } else {
            OpData::Continue
        };
        assert_eq!(
            frame.header().opcode,
            OpCode::Data(expected),
            "fragment {i}"
        );
        assert_eq!(frame.header().is_final, i == 2, "fragment {i}");
        assert!(frame.payload().len() <= FRAGMENT_BYTES);
        assert!(std::str::from_utf8(frame.payload()).is_ok(), "fragment {i}");
        joined.extend_from_slice(frame.payload());
    }
    assert_eq!(joined, text.as_bytes());
    // Up to the fragment size, one message as before.
    let short = "y".repeat(FRAGMENT_BYTES);
    assert_eq!(
        to_messages(Frame::Text(short.clone())),
        [Message::text(short)]
    );
}

#[tokio::test]
async fn a_fragmented_reply_arrives_as_the_one_message_sent() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let text = format!("{{\"content\": \"{}\"}}", "é9".repeat(3 * FRAGMENT_BYTES));
    let expected = text.clone();
    let platform = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut socket = tokio_tungstenite::accept_async(tcp).await.unwrap();
        socket.next().await.unwrap().unwrap()
    });
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (socket, _) = tokio_tungstenite::client_async(format!("ws://{addr}/"), tcp)
        .await
        .unwrap();
    let (_stream, mut sink) = frames(socket);
    sink.send(Frame::Text(text)).await.unwrap();
    assert_eq!(platform.await.unwrap(), Message::text(expected));
}

/// A dial nobody answers says so in words, with what to check, and no `os error`.
#[tokio::test]
async fn a_refused_dial_says_to_check_the_platform_url() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let url = format!("ws://127.0.0.1:{port}/ws/local-executor/s-1");
    let Err(err) = connect(&url, None).await else {
        panic!("nothing listens there");
    };
    assert!(matches!(err, ConnectError::Transport(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "nothing is listening at 127.0.0.1:{port} (connection refused): check the platform URL (--platform-url) and that the platform is running"
        )
    );
    assert!(
        ConnectError::Http { status: 404 }
            .to_string()
            .contains("check the platform URL")
    );
}
