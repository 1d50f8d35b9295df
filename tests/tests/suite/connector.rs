//! The real `autogpt-shim` binary against a WebSocket test platform on loopback: handshake,
//! FILE_* through the jail, reconnect after 1011, fatal ends, auth refusal and start-up
//! refusals, with the token kept out of its logs.

use std::{
    io::Read,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::{
    WebSocketStream,
    tungstenite::{
        Message,
        handshake::server::{ErrorResponse, Request, Response},
        http::StatusCode,
        protocol::{CloseFrame, frame::coding::CloseCode},
    },
};

use super::support::temp_dir;

const TOKEN: &str = "shim-e2e-secret-token-4f1c";
const SESSION: &str = "sess-e2e.1";
/// Generous: the machine running the suite is loaded.
const WAIT: Duration = Duration::from_secs(60);

/// The binary cargo built next to this test executable.
fn binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = dir.join(format!("autogpt-shim{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p autogpt-shim` (or `cargo build --workspace --bins`)",
        path.display()
    );
    path
}

/// A running shim, killed on every path out of the test.
struct Shim {
    child: Child,
}

impl Shim {
    fn spawn(args: &[&str], token: Option<&str>) -> Self {
        let mut command = Command::new(binary());
        command
            .args(args)
            .env_remove("AUTOGPT_SHIM_TOKEN")
            .env_remove("AUTOGPT_SHIM_SESSION_ID")
            .env_remove("AUTOGPT_SHIM_PLATFORM_URL")
            .env_remove("AUTOGPT_SHIM_ALLOWED_ROOT")
            .env_remove("RUST_LOG")
            // Tests must not wait the reference's seconds between dials.
            .env("AUTOGPT_SHIM_RECONNECT_BASE_DELAY", "0.05")
            .env("AUTOGPT_SHIM_RECONNECT_JITTER_SECONDS", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(token) = token {
            command.env("AUTOGPT_SHIM_TOKEN", token);
        }
        Self {
            child: command.spawn().unwrap(),
        }
    }

    /// Waits for the exit and returns the status and everything written to stderr.
    async fn exit(&mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "the shim did not exit");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            pipe.read_to_string(&mut stderr).unwrap();
        }
        (status, stderr)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the platform saw on one upgrade.
#[derive(Debug, Clone, Default)]
struct Seen {
    path: String,
    authorization: Option<String>,
}

type Socket = WebSocketStream<TcpStream>;

/// Accepts one upgrade; `refuse` answers it with that HTTP status instead.
async fn accept(listener: &TcpListener, refuse: Option<u16>) -> (Option<Socket>, Seen) {
    let (tcp, _) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .expect("the shim never dialled")
        .unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = Arc::clone(&seen);
    // tungstenite's `Callback` fixes this error type.
    #[allow(clippy::result_large_err)]
    let callback = move |request: &Request, response: Response| {
        let mut seen = record.lock().unwrap();
        seen.path = request.uri().path().to_owned();
        seen.authorization = request
            .headers()
            .get("authorization")
            .map(|value| value.to_str().unwrap().to_owned());
        if let Some(status) = refuse {
            let mut refusal = ErrorResponse::new(None);
            *refusal.status_mut() = StatusCode::from_u16(status).unwrap();
            return Err(refusal);
        }
        Ok(response)
    };
    let socket = tokio_tungstenite::accept_hdr_async(tcp, callback)
        .await
        .ok();
    let seen = seen.lock().unwrap().clone();
    (socket, seen)
}

/// The next envelope other than STATUS.
async fn recv(socket: &mut Socket) -> Value {
    loop {
        let message = tokio::time::timeout(WAIT, socket.next())
            .await
            .expect("no frame from the shim")
            .expect("the shim closed the socket")
            .unwrap();
        if let Message::Text(text) = message {
            let value: Value = serde_json::from_str(text.as_str()).unwrap();
            if value["type"] != "STATUS" {
                return value;
            }
        }
    }
}

async fn send(socket: &mut Socket, value: &Value) {
    socket.send(Message::text(value.to_string())).await.unwrap();
}

async fn request(socket: &mut Socket, kind: &str, id: &str, payload: Value) -> Value {
    send(
        socket,
        &json!({"type": kind, "id": id, "ts": 1.0, "version": "1.1", "payload": payload}),
    )
    .await;
    let reply = recv(socket).await;
    assert_eq!(reply["id"], id, "{reply}");
    reply
}

/// Checks the upgrade and HELLO, answers HELLO_ACK, and returns the open socket.
async fn handshake(listener: &TcpListener, root: &Path) -> Socket {
    let (socket, seen) = accept(listener, None).await;
    let mut socket = socket.expect("the upgrade failed");
    assert_eq!(seen.path, format!("/ws/local-executor/{SESSION}"));
    assert_eq!(seen.authorization, Some(format!("Bearer {TOKEN}")));
    let hello = recv(&mut socket).await;
    assert_eq!(hello["type"], "HELLO", "{hello}");
    let payload = &hello["payload"];
    assert_eq!(payload["protocol_version"], "1.1");
    assert_eq!(payload["capabilities"], json!(["files"]));
    let canonical = root.canonicalize().unwrap();
    assert_eq!(
        payload["allowed_root"],
        canonical.to_string_lossy().as_ref()
    );
    send(
        &mut socket,
        &json!({
            "type": "HELLO_ACK", "id": hello["id"], "ts": 1.0, "version": "1.1",
            "payload": {
                "session_id": SESSION,
                "connection_id": null,
                "protocol_version": "1.1",
                "granted_capabilities": ["files"],
                "max_file_size_bytes": 10_485_760,
                "command_timeout_seconds": 30,
                "max_concurrent": 4
            }
        }),
    )
    .await;
    socket
}

async fn close(socket: &mut Socket, code: u16) {
    let frame = CloseFrame {
        code: CloseCode::from(code),
        reason: "test".into(),
    };
    let _ = socket.close(Some(frame)).await;
    while let Ok(Some(_)) = tokio::time::timeout(WAIT, socket.next()).await {}
}

async fn platform() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

fn start_args(addr: SocketAddr, root: &Path) -> Vec<String> {
    vec![
        "--session-id".to_owned(),
        SESSION.to_owned(),
        "--allowed-root".to_owned(),
        root.to_string_lossy().into_owned(),
        "--platform-url".to_owned(),
        format!("ws://{addr}"),
        // The most verbose level is the likeliest to leak the token.
        "--log-level".to_owned(),
        "DEBUG".to_owned(),
        "start".to_owned(),
    ]
}

fn spawn(args: &[String], token: Option<&str>) -> Shim {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Shim::spawn(&args, token)
}

#[tokio::test]
async fn serves_files_reconnects_after_1011_and_stops_on_4428() {
    let root = temp_dir("shim");
    let (listener, addr) = platform().await;
    let mut shim = spawn(&start_args(addr, &root), Some(TOKEN));

    let mut socket = handshake(&listener, &root).await;
    let target = root.canonicalize().unwrap().join("out").join("hello.txt");
    let target_wire = target.to_string_lossy().into_owned();
    let ack = request(
        &mut socket,
        "FILE_WRITE",
        "w1",
        json!({"path": target_wire, "content": "hello from the platform\n",
               "encoding": "utf-8", "create_parents": true}),
    )
    .await;
    assert_eq!(ack["type"], "ACK", "{ack}");
    assert_eq!(ack["payload"]["ok"], true);
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "hello from the platform\n"
    );
    let contents = request(
        &mut socket,
        "FILE_READ",
        "r1",
        json!({"path": target_wire, "encoding": "utf-8", "format": "text",
               "offset": 0, "length": null}),
    )
    .await;
    assert_eq!(contents["type"], "FILE_CONTENTS", "{contents}");
    assert_eq!(contents["payload"]["content"], "hello from the platform\n");

    let escape = request(
        &mut socket,
        "FILE_READ",
        "r2",
        json!({"path": "/etc/passwd", "encoding": "utf-8", "format": "text"}),
    )
    .await;
    assert_eq!(escape["type"], "ERROR", "{escape}");
    assert_eq!(escape["payload"]["code"], "PATH_OUTSIDE_ALLOWED_ROOT");
    let dotdot = request(
        &mut socket,
        "FILE_READ",
        "r3",
        json!({"path": "../../../../etc/passwd", "encoding": "utf-8", "format": "text"}),
    )
    .await;
    assert_eq!(
        dotdot["payload"]["code"], "PATH_OUTSIDE_ALLOWED_ROOT",
        "{dotdot}"
    );

    // A server error is transient: the shim dials again and says HELLO again.
    close(&mut socket, 1011).await;
    let mut socket = handshake(&listener, &root).await;
    let again = request(
        &mut socket,
        "FILE_READ",
        "r4",
        json!({"path": "out/hello.txt", "encoding": "utf-8", "format": "text"}),
    )
    .await;
    assert_eq!(
        again["payload"]["content"], "hello from the platform\n",
        "{again}"
    );

    // 4428 is fatal: exit 0 and no further dial.
    close(&mut socket, 4428).await;
    let (status, stderr) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        tokio::time::timeout(Duration::from_secs(1), listener.accept())
            .await
            .is_err(),
        "the shim dialled again after 4428"
    );
    assert!(!stderr.contains(TOKEN), "the token leaked: {stderr}");
    assert!(stderr.contains(SESSION), "logs go to stderr: {stderr}");
}

#[tokio::test]
async fn session_revoked_closes_with_4428_and_exits_0() {
    let root = temp_dir("shim-revoked");
    let (listener, addr) = platform().await;
    let mut shim = spawn(&start_args(addr, &root), Some(TOKEN));
    let mut socket = handshake(&listener, &root).await;
    send(
        &mut socket,
        &json!({"type": "SESSION_REVOKED", "id": "rv1", "ts": 1.0, "version": "1.1",
                "payload": {"reason": "user_revoked"}}),
    )
    .await;
    let code = loop {
        match tokio::time::timeout(WAIT, socket.next()).await.unwrap() {
            Some(Ok(Message::Close(Some(frame)))) => break u16::from(frame.code),
            Some(Ok(Message::Text(text))) => {
                assert!(
                    text.as_str().contains("STATUS"),
                    "a frame after SESSION_REVOKED: {text}"
                );
            }
            other => panic!("no close frame: {other:?}"),
        }
    };
    assert_eq!(code, 4428);
    let (status, stderr) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains(TOKEN), "the token leaked: {stderr}");
}

#[tokio::test]
async fn a_refused_upgrade_exits_77() {
    let root = temp_dir("shim-401");
    let (listener, addr) = platform().await;
    let mut shim = spawn(&start_args(addr, &root), Some(TOKEN));
    let (_, seen) = accept(&listener, Some(401)).await;
    assert_eq!(seen.authorization, Some(format!("Bearer {TOKEN}")));
    let (status, stderr) = shim.exit().await;
    assert_eq!(status.code(), Some(77), "{stderr}");
    assert!(stderr.contains("401"), "{stderr}");
    assert!(!stderr.contains(TOKEN), "the token leaked: {stderr}");
}

#[tokio::test]
async fn no_token_means_no_header_and_sigterm_exits_0() {
    let root = temp_dir("shim-term");
    let (listener, addr) = platform().await;
    let mut shim = spawn(&start_args(addr, &root), None);
    let (socket, seen) = accept(&listener, None).await;
    let mut socket = socket.unwrap();
    assert_eq!(seen.authorization, None);
    assert_eq!(recv(&mut socket).await["type"], "HELLO");
    let killed = Command::new("kill")
        .args(["-TERM", &shim.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let (status, stderr) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
}

/// Runs a start-up that must be refused; returns its exit code and its single line.
async fn refusal(args: &[&str]) -> (Option<i32>, String) {
    let mut shim = Shim::spawn(args, Some(TOKEN));
    let (status, stderr) = shim.exit().await;
    assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
    assert!(!stderr.contains(TOKEN));
    (status.code(), stderr)
}

#[tokio::test]
async fn refuses_what_this_build_cannot_do_with_one_line() {
    let root = temp_dir("shim-refuse");
    let root = root.to_string_lossy().into_owned();
    let base = ["--session-id", SESSION, "--allowed-root", root.as_str()];
    let shell: Vec<&str> = base
        .iter()
        .copied()
        .chain(["start", "--enable-shell"])
        .collect();
    let (code, line) = refusal(&shell).await;
    assert_eq!(code, Some(78));
    assert!(line.contains("--enable-shell"), "{line}");

    let recording: Vec<&str> = base
        .iter()
        .copied()
        .chain(["start", "--enable-recording"])
        .collect();
    assert_eq!(refusal(&recording).await.0, Some(78));

    let (code, line) = refusal(&["--allowed-root", root.as_str(), "start"]).await;
    assert_eq!(code, Some(78));
    assert!(line.contains("control mode"), "{line}");

    let missing = format!("{root}/does-not-exist");
    let (code, line) =
        refusal(&["--session-id", SESSION, "--allowed-root", &missing, "start"]).await;
    assert_eq!(code, Some(78));
    assert!(line.contains("does-not-exist"), "{line}");
}
