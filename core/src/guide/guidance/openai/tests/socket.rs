//! The provider's transport timeouts against a real TCP server on loopback that stalls: the
//! socket timeout abandons a silent server long before the whole-call deadline, and a server
//! that keeps sending is not cut off by it.

use std::time::Instant;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};

use super::*;

/// Short enough for a unit test, long enough that a busy machine's scheduling does not trip it.
const SHORT_SOCKET: Duration = Duration::from_millis(300);

/// What the fake model server does once it has read the request.
#[derive(Clone)]
enum Reply {
    /// Sends nothing at all, holding the connection open.
    Silent,
    /// Sends the status line, the headers and the first bytes of the body, then nothing.
    StallMidBody,
    /// Sends the whole `body` in pieces `gap` apart.
    Trickle { body: Vec<u8>, gap: Duration },
}

/// A server answering one connection as `reply` says; the URL is a loopback model URL.
async fn fake_model(reply: Reply) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        read_request(&mut stream).await;
        match reply {
            Reply::Silent => {}
            Reply::StallMidBody => {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                            content-length: 4000\r\n\r\n{\"id\": \"chatcmpl-1\", ";
                stream.write_all(head.as_bytes()).await.unwrap();
                stream.flush().await.unwrap();
            }
            Reply::Trickle { body, gap } => {
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\n\r\n",
                    body.len()
                );
                stream.write_all(head.as_bytes()).await.unwrap();
                for piece in body.chunks(body.len().div_ceil(8)) {
                    tokio::time::sleep(gap).await;
                    stream.write_all(piece).await.unwrap();
                    stream.flush().await.unwrap();
                }
            }
        }
        // Holds the connection open, silent, until the test aborts the task.
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(stream);
    });
    (url, server)
}

/// Reads the request's head and its `content-length` bytes of body.
async fn read_request(stream: &mut TcpStream) {
    let mut request = Vec::new();
    let mut buffer = [0_u8; 4096];
    loop {
        let read = stream.read(&mut buffer).await.unwrap();
        assert!(read > 0, "the client closed before sending its request");
        request.extend_from_slice(&buffer[..read]);
        let Some(head_end) = request.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&request[..head_end]).to_lowercase();
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .map_or(0, |value| value.trim().parse::<usize>().unwrap());
        if request.len() >= head_end + 4 + length {
            return;
        }
    }
}

fn provider_at(url: &str, timeouts: Timeouts) -> OpenAiProvider {
    let config = ModelConfig::from_settings(ModelSettings {
        url: Some(url.to_owned()),
        ..local()
    })
    .unwrap();
    OpenAiProvider::with_timeouts(config, Arc::new(ManualClock::new()), timeouts).unwrap()
}

fn short_sockets() -> Timeouts {
    Timeouts {
        connect: CONNECT_TIMEOUT,
        socket: SHORT_SOCKET,
        plan_socket: SHORT_SOCKET,
    }
}

fn request(obs: &Observation, plan: bool) -> ProviderRequest<'_> {
    ProviderRequest {
        prompt: "What next?",
        observation: obs,
        budget: Duration::from_secs(52),
        task: None,
        plan,
    }
}

#[test]
fn the_reference_timeouts() {
    assert_eq!(
        Timeouts::REFERENCE,
        Timeouts {
            connect: Duration::from_secs(3),
            socket: Duration::from_secs(8),
            plan_socket: Duration::from_secs(48),
        }
    );
    assert_eq!(CONNECT_TIMEOUT, Duration::from_secs(3));
    assert_eq!(SOCKET_TIMEOUT, Duration::from_secs(8));
    assert_eq!(PLAN_SOCKET_TIMEOUT, Duration::from_secs(48));
    // The socket timeout only matters because it is shorter than the whole call.
    assert!(SOCKET_TIMEOUT < CALL_TIMEOUT);
    assert!(PLAN_SOCKET_TIMEOUT < PLAN_CALL_TIMEOUT);
}

#[tokio::test]
async fn a_stalled_server_is_abandoned_after_the_socket_timeout() {
    let obs = observed();
    for plan in [false, true] {
        for reply in [Reply::Silent, Reply::StallMidBody] {
            let (url, server) = fake_model(reply).await;
            let provider = provider_at(&url, short_sockets());
            let started = Instant::now();
            let outcome = provider.guide(request(&obs, plan)).await;
            let took = started.elapsed();
            server.abort();
            // A timeout, which the route answers 504, not an invalid result (502).
            assert_eq!(outcome, Err(ProviderError::Timeout), "plan {plan}");
            // The whole call may take 10 s (plan: 50 s); the socket timeout ends it at 0.3 s.
            assert!(took >= SHORT_SOCKET, "plan {plan}: gave up after {took:?}");
            assert!(
                took < Duration::from_secs(5),
                "plan {plan}: waited {took:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_server_that_keeps_sending_outlasts_the_socket_timeout() {
    let content = json!({
        "instruction": "Select View logs yourself, then check the screen again.",
        "status": "next_step",
        "targetIndex": 0,
    });
    let body = answer(&content.to_string()).body;
    // Eight pieces 150 ms apart: 1.2 s in all, four times a 300 ms socket timeout, but never
    // 300 ms without a byte.
    let gap = Duration::from_millis(150);
    let (url, server) = fake_model(Reply::Trickle { body, gap }).await;
    let provider = provider_at(&url, short_sockets());
    let obs = observed();
    let started = Instant::now();
    let outcome = provider.guide(request(&obs, false)).await;
    let took = started.elapsed();
    server.abort();
    let result = outcome.unwrap();
    assert_eq!(result.target, Some(Target::from_element(&button())));
    assert!(took >= gap * 8, "the answer took only {took:?}");
}
