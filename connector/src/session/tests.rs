//! Drives the session loop through in-memory channels, the platform played by the test,
//! with a real temporary directory as the jail root.
//!
//! Nothing here depends on timing: requests that must stay in flight wait on the loop's
//! request gate, "nothing was sent" is shown by the next PING's PONG arriving first, and every
//! wait is bounded by a generous timeout that only matters when the loop is broken.

// Tests build and inspect their sandbox directly; only the code under test must use the jail.
#![allow(clippy::disallowed_methods)]

use std::future::Future;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use futures_util::{sink, stream};
use local_core::machine::exec::CommandLimiter;
use local_core::machine::jail::Jail;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

use super::*;
use crate::audit::Auditor;
use crate::protocol::{Message, close_code};

const AUDIT_KEY: [u8; 32] = [42; 32];

/// Upper bound for any single wait; a correct loop answers in milliseconds.
const WAIT: Duration = Duration::from_secs(30);

struct TempRoot(PathBuf);

impl TempRoot {
    fn new() -> Self {
        let base = std::env::temp_dir().join(format!("shim-session-{}", new_id()));
        let root = base.join("root");
        std::fs::create_dir_all(&root).unwrap();
        Self(base)
    }

    /// The jail root (a child, so the test can put files just outside it).
    fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.0.join("root")).unwrap()
    }

    fn outside(&self) -> PathBuf {
        std::fs::canonicalize(&self.0).unwrap()
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The platform's side of one session.
struct Peer {
    to_shim: Option<mpsc::UnboundedSender<Frame>>,
    from_shim: mpsc::UnboundedReceiver<Frame>,
    session: JoinHandle<SessionEnd>,
    dir: TempRoot,
    hello_id: String,
}

fn config() -> SessionConfig {
    let mut config = SessionConfig::new(
        "session-1",
        "machine-1",
        "0.2.0",
        Platform::Linux,
        Arch::X86_64,
    );
    // Periodic STATUS would interleave with the frames a test expects; the tests that want
    // it set a short interval themselves.
    config.status_interval = Duration::ZERO;
    config
}

fn start(config: SessionConfig, hooks: Hooks) -> Peer {
    start_audited(config, hooks, None)
}

/// [`start`], auditing to `audit_log` (a path outside the jail root) when given.
fn start_audited(config: SessionConfig, hooks: Hooks, audit_log: Option<&Path>) -> Peer {
    start_host(config, hooks, audit_log, |host| host)
}

fn start_host(
    config: SessionConfig,
    hooks: Hooks,
    audit_log: Option<&Path>,
    edit: impl FnOnce(Host) -> Host,
) -> Peer {
    let dir = TempRoot::new();
    let jail = Arc::new(Jail::open(&dir.root()).unwrap());
    let mut host = edit(Host::new(jail));
    if let Some(path) = audit_log {
        let identity = local_core::machine::audit_chain::AuditIdentity {
            session_id: Some("session-1".to_owned()),
            machine_id: Some("machine-1".to_owned()),
            shim_version: "0.2.0".to_owned(),
        };
        let chain =
            local_core::machine::audit_chain::AuditChain::open(path, AUDIT_KEY, identity).unwrap();
        host = host.with_audit(Auditor::new(chain).unwrap());
    }
    let (to_shim, mut inbound) = mpsc::unbounded_channel::<Frame>();
    let (outbound, from_shim) = mpsc::unbounded_channel::<Frame>();
    let stream = stream::poll_fn(move |cx| inbound.poll_recv(cx));
    let sink = Box::pin(sink::unfold(outbound, |tx, frame: Frame| async move {
        tx.send(frame).map_err(|_| ())?;
        Ok::<_, ()>(tx)
    }));
    let session =
        tokio::spawn(async move { run_session_with(stream, sink, &config, host, hooks).await });
    Peer {
        to_shim: Some(to_shim),
        from_shim,
        session,
        dir,
        hello_id: String::new(),
    }
}

fn ack_for(id: &str) -> Value {
    json!({
        "type": "HELLO_ACK", "id": id, "ts": 1.0, "version": "1.1",
        "payload": {
            "session_id": "session-1",
            "connection_id": null,
            "protocol_version": "1.1",
            "granted_capabilities": ["files"],
            "max_file_size_bytes": 10_485_760,
            "command_timeout_seconds": 30,
            "max_concurrent": 4
        }
    })
}

impl Peer {
    async fn recv(&mut self) -> Option<Frame> {
        tokio::time::timeout(WAIT, self.from_shim.recv())
            .await
            .expect("the shim sent nothing in time")
    }

    async fn recv_json(&mut self) -> Value {
        match self.recv().await {
            Some(Frame::Text(text)) => serde_json::from_str(&text).unwrap(),
            other => panic!("expected a text frame, got {other:?}"),
        }
    }

    async fn recv_close(&mut self) -> (u16, String) {
        match self.recv().await {
            Some(Frame::Close { code, reason }) => (code, reason),
            other => panic!("expected a close frame, got {other:?}"),
        }
    }

    fn send(&self, frame: Frame) {
        self.to_shim.as_ref().unwrap().send(frame).unwrap();
    }

    fn send_json(&self, value: &Value) {
        self.send(Frame::Text(value.to_string()));
    }

    /// Reads HELLO and remembers its id.
    async fn hello(&mut self) -> Value {
        let hello = self.recv_json().await;
        assert_eq!(hello["type"], "HELLO", "{hello}");
        hello["id"].as_str().unwrap().clone_into(&mut self.hello_id);
        hello
    }

    /// Reads HELLO and answers `ack` after letting the test edit it.
    async fn handshake(&mut self, edit: impl FnOnce(&mut Value)) {
        self.hello().await;
        let mut ack = ack_for(&self.hello_id);
        edit(&mut ack);
        self.send_json(&ack);
    }

    fn request(&self, kind: &str, id: &str, payload: &Value) {
        self.send_json(&json!({
            "type": kind, "id": id, "ts": 1.0, "version": "1.1", "payload": payload
        }));
    }

    /// Sends a request and returns the next frame, which must be its reply.
    async fn call(&mut self, kind: &str, id: &str, payload: &Value) -> Value {
        self.request(kind, id, payload);
        let reply = self.recv_json().await;
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    /// PING answered by PONG as the very next frame: nothing else was sent before it.
    async fn ping(&mut self, id: &str) {
        let pong = self.call("PING", id, &json!({})).await;
        assert_eq!(pong["type"], "PONG", "{pong}");
    }

    async fn end(mut self) -> SessionEnd {
        self.to_shim.take();
        tokio::time::timeout(WAIT, &mut self.session)
            .await
            .expect("the session did not end in time")
            .unwrap()
    }

    /// Waits for the session to end while the platform side stays open.
    async fn ended(&mut self) -> SessionEnd {
        tokio::time::timeout(WAIT, &mut self.session)
            .await
            .expect("the session did not end in time")
            .unwrap()
    }

    fn root(&self) -> PathBuf {
        self.dir.root()
    }
}

async fn established() -> Peer {
    let mut platform = start(config(), Hooks::default());
    platform.handshake(|_| {}).await;
    platform
}

fn error_code(reply: &Value) -> &str {
    assert_eq!(reply["type"], "ERROR", "{reply}");
    assert_eq!(reply["payload"]["fatal"], false, "{reply}");
    reply["payload"]["code"].as_str().unwrap()
}

// ---- handshake ----------------------------------------------------------------------------

#[tokio::test]
async fn hello_has_the_spec_fields_and_the_session_starts() {
    let mut config = config();
    config.advertised = vec![
        Capability::Recording,
        Capability::Files,
        Capability::DirectoryBrowse,
        Capability::Shell,
        Capability::Files,
    ];
    let mut platform = start(config, Hooks::default());
    let hello = platform.hello().await;
    let id = hello["id"].as_str().unwrap();
    assert_eq!(id.len(), 36, "{id}");
    assert_eq!(&id[14..15], "4", "uuid v4 shape: {id}");
    assert_eq!(hello["version"], "1.1");
    assert!(hello.get("pending_capacity").is_none(), "{hello}");
    let payload = &hello["payload"];
    assert_eq!(payload["shim_version"], "0.2.0");
    assert_eq!(payload["protocol_version"], "1.1");
    assert_eq!(payload["machine_id"], "machine-1");
    assert_eq!(payload["platform"], "linux");
    assert_eq!(payload["arch"], "x86_64");
    assert!(payload["screen_resolution"].is_null());
    // Only what this build serves, once, in spec order; never recording or the control
    // connection's directory_browse.
    assert_eq!(payload["capabilities"], json!(["shell", "files"]));
    assert_eq!(
        payload["allowed_root"],
        platform.root().to_string_lossy().as_ref()
    );
    assert_eq!(payload["local_llm_models"], json!([]));
    assert_eq!(payload["hardware_devices"], json!([]));

    let ack = ack_for(&platform.hello_id);
    platform.send_json(&ack);
    platform.ping("p1").await;
    assert_eq!(platform.end().await, SessionEnd::TransportEnded);
}

#[test]
fn hello_capabilities_follow_the_spec_order() {
    let mut config = config();
    config.advertised = vec![Capability::HardwareGpio, Capability::Files];
    assert_eq!(config.hello_capabilities(), [Capability::Files]);
    config.advertised.clear();
    assert!(config.hello_capabilities().is_empty());
}

#[tokio::test]
async fn ack_with_another_id_closes_4400() {
    let mut platform = start(config(), Hooks::default());
    platform.hello().await;
    platform.send_json(&ack_for("not-the-hello-id"));
    assert_eq!(platform.recv_close().await.0, close_code::BAD_HANDSHAKE);
    assert_eq!(
        platform.ended().await,
        SessionEnd::HandshakeRejected { code: 4400 }
    );
    assert!(!SessionEnd::HandshakeRejected { code: 4400 }.may_reconnect());
}

#[tokio::test]
async fn granting_unadvertised_capabilities_closes_4400() {
    for extra in ["shell", "teleport"] {
        let mut platform = start(config(), Hooks::default());
        platform
            .handshake(|ack| {
                ack["payload"]["granted_capabilities"] = json!(["files", extra]);
            })
            .await;
        assert_eq!(platform.recv_close().await.0, 4400, "{extra}");
        assert_eq!(
            platform.ended().await,
            SessionEnd::HandshakeRejected { code: 4400 }
        );
    }
}

#[tokio::test]
async fn another_session_id_closes_4403() {
    for session in [json!("session-2"), Value::Null, json!("")] {
        let mut platform = start(config(), Hooks::default());
        platform
            .handshake(|ack| ack["payload"]["session_id"] = session.clone())
            .await;
        assert_eq!(platform.recv_close().await.0, 4403, "{session}");
        assert_eq!(
            platform.ended().await,
            SessionEnd::HandshakeRejected { code: 4403 }
        );
    }
}

#[tokio::test]
async fn another_major_closes_4426_with_a_short_json_reason() {
    let huge = format!("{}.0", "9".repeat(500));
    for platform_max in ["2.0", "v1.1", huge.as_str()] {
        let mut platform = start(config(), Hooks::default());
        platform
            .handshake(|ack| ack["payload"]["protocol_version"] = json!(platform_max))
            .await;
        let (code, reason) = platform.recv_close().await;
        assert_eq!(code, close_code::PROTOCOL_VERSION_MISMATCH);
        assert!(reason.len() <= 123, "{} bytes", reason.len());
        let reason: Value = serde_json::from_str(&reason).unwrap();
        assert_eq!(reason["error"], "PROTOCOL_VERSION_MISMATCH");
        assert_eq!(reason["shim_max"], "1.1");
        assert!(platform_max.starts_with(reason["platform_max"].as_str().unwrap()));
        let end = platform.ended().await;
        assert_eq!(
            end,
            SessionEnd::VersionMismatch {
                platform_max: platform_max.to_owned()
            }
        );
        assert!(!end.may_reconnect());
    }
}

#[tokio::test]
async fn a_zero_limit_from_either_side_closes_4400() {
    let mut platform = start(config(), Hooks::default());
    platform
        .handshake(|ack| ack["payload"]["max_concurrent"] = json!(0))
        .await;
    assert_eq!(platform.recv_close().await.0, 4400);

    let mut local = config();
    local.max_concurrent = 0;
    let mut platform = start(local, Hooks::default());
    platform.handshake(|_| {}).await;
    assert_eq!(platform.recv_close().await.0, 4400);
    assert_eq!(
        platform.ended().await,
        SessionEnd::HandshakeRejected { code: 4400 }
    );
}

#[tokio::test]
async fn limits_are_the_lower_of_local_and_ack() {
    // Local 1 beats the ACK's 4: the second request is refused.
    let mut local = config();
    local.max_concurrent = 1;
    local.limits = FileLimits::for_max_file_size(1 << 20);
    let gate = Arc::new(Semaphore::new(0));
    let mut platform = start(
        local,
        Hooks {
            request_gate: Some(Arc::clone(&gate)),
        },
    );
    // The ACK's 5 bytes beat the local 1 MiB.
    platform
        .handshake(|ack| ack["payload"]["max_file_size_bytes"] = json!(5))
        .await;
    platform.request("FILE_LIST", "l1", &json!({"path": "."}));
    let refused = platform
        .call("FILE_LIST", "l2", &json!({"path": "."}))
        .await;
    assert_eq!(error_code(&refused), "SHIM_OVERLOADED");
    gate.add_permits(10);
    assert_eq!(platform.recv_json().await["id"], "l1");
    assert_eq!(platform.recv_json().await["type"], "STATUS");
    let write = json!({"path": "big.txt", "content": "123456"});
    let reply = platform.call("FILE_WRITE", "w1", &write).await;
    assert_eq!(error_code(&reply), "FILE_TOO_LARGE");
}

#[tokio::test]
async fn no_ack_in_time_closes_1002_and_may_reconnect() {
    let mut config = config();
    config.handshake_timeout = Duration::from_millis(20);
    let mut platform = start(config, Hooks::default());
    platform.hello().await;
    assert_eq!(platform.recv_close().await.0, 1002);
    let end = platform.ended().await;
    assert_eq!(end, SessionEnd::HandshakeFailed);
    assert!(end.may_reconnect());
}

#[tokio::test]
async fn another_frame_before_the_ack_fails_the_handshake() {
    let mut platform = start(config(), Hooks::default());
    platform.hello().await;
    platform.request("PING", "p0", &json!({}));
    assert_eq!(platform.recv_close().await.0, 1002);
    assert_eq!(platform.ended().await, SessionEnd::HandshakeFailed);
}

// ---- the loop -----------------------------------------------------------------------------

#[tokio::test]
async fn ping_gets_pong_with_the_negotiated_version() {
    let mut platform = start(config(), Hooks::default());
    platform
        .handshake(|ack| ack["payload"]["protocol_version"] = json!("1.0"))
        .await;
    let pong = platform.call("PING", "ping-7", &json!({})).await;
    assert_eq!(pong["type"], "PONG");
    assert_eq!(pong["version"], "1.0");
    assert_eq!(pong["payload"], json!({}));
    assert!(pong.get("pending_capacity").is_none(), "{pong}");
}

#[tokio::test]
async fn unknown_type_gets_error_and_the_session_goes_on() {
    let mut platform = established().await;
    let reply = platform
        .call("TELEPORT_REQUEST", "u1", &json!({"to": "mars"}))
        .await;
    assert_eq!(error_code(&reply), "FEATURE_NOT_SUPPORTED");
    assert_eq!(reply["pending_capacity"], 4);
    platform.ping("p1").await;
    assert_eq!(platform.end().await, SessionEnd::TransportEnded);
}

#[tokio::test]
async fn malformed_frames_are_answered_only_when_they_have_an_id() {
    let mut platform = established().await;
    platform.send(Frame::Text(
        r#"{"type":"FILE_READ","id":"m1","ts":"yesterday"}"#.to_owned(),
    ));
    let reply = platform.recv_json().await;
    assert_eq!(reply["id"], "m1");
    assert_eq!(error_code(&reply), "INTERNAL_ERROR");
    // An invalid payload with an id is answered too.
    let reply = platform
        .call("FILE_READ", "m2", &json!({"nopath": 1}))
        .await;
    assert_eq!(error_code(&reply), "INTERNAL_ERROR");

    for silent in [
        "not json at all",
        "[1, 2]",
        r#"{"type":"FILE_READ","ts":1.0,"payload":{"path":"a"}}"#,
        r#"{"type":"PING","id":"old","ts":1.0,"version":"2.0","payload":{}}"#,
        r#"{"type":"ERROR","id":"e1","ts":1.0,"payload":{"code":"X","message":"m"}}"#,
        r#"{"type":"FILE_CONTENTS","id":"c2","ts":1.0,"payload":{}}"#,
        r#"{"type":"FILE_CONTENTS","id":"c1","ts":1.0,"payload":{"content":"","encoding":"utf-8","size_bytes":0,"truncated":false}}"#,
    ] {
        platform.send(Frame::Text(silent.to_owned()));
    }
    platform.ping("p1").await;
}

#[tokio::test]
async fn ungranted_capabilities_are_refused_before_any_work() {
    let mut platform = start(config(), Hooks::default());
    platform
        .handshake(|ack| ack["payload"]["granted_capabilities"] = json!([]))
        .await;
    let cases = [
        (
            "FILE_WRITE",
            json!({"path": "x.txt", "content": "x"}),
            "files",
        ),
        ("EXECUTE_COMMAND", json!({"argv": ["ls"]}), "shell"),
        ("SCREENSHOT_REQUEST", json!({}), "computer_use"),
        (
            "LOCAL_LLM_COMPLETION",
            json!({"model": "m", "messages": []}),
            "local_llm",
        ),
        ("START_RECORDING", json!({}), "recording"),
    ];
    for (n, (kind, payload, capability)) in cases.into_iter().enumerate() {
        let id = format!("c{n}");
        let reply = platform.call(kind, &id, &payload).await;
        assert_eq!(error_code(&reply), "CAPABILITY_NOT_GRANTED", "{kind}");
        assert_eq!(
            reply["payload"]["details"],
            json!({"required_capability": capability, "granted_capabilities": []}),
            "{kind}"
        );
        assert_eq!(reply["pending_capacity"], 4);
    }
    assert!(!platform.root().join("x.txt").exists());
    // Control messages belong to the control connection, whatever was granted.
    let browse = platform
        .call("DIRECTORY_LIST_REQUEST", "browse", &json!({}))
        .await;
    assert_eq!(error_code(&browse), "FEATURE_NOT_SUPPORTED");
    // A malformed request is refused for its connection and grant first: its payload's own
    // code (here DIRECTORY_REFERENCE_INVALID, FEATURE_NOT_SUPPORTED) is only for a caller
    // allowed to send it.
    let half = platform
        .call(
            "DIRECTORY_LIST_REQUEST",
            "half",
            &json!({"browse_id": "b", "directory_ref": null}),
        )
        .await;
    assert_eq!(error_code(&half), "FEATURE_NOT_SUPPORTED");
    let screenshot = platform
        .call("SCREENSHOT_REQUEST", "shot", &json!({"format": "webp"}))
        .await;
    assert_eq!(error_code(&screenshot), "CAPABILITY_NOT_GRANTED");
    assert_eq!(
        screenshot["payload"]["details"],
        json!({"required_capability": "computer_use", "granted_capabilities": []})
    );
}

#[tokio::test]
async fn file_write_then_read_round_trip() {
    let mut platform = established().await;
    let text = "h\u{e9}llo\r\nworld\n";
    let write = json!({"path": "notes/a.txt", "content": text, "create_parents": true});
    let ack = platform.call("FILE_WRITE", "w1", &write).await;
    assert_eq!(ack["type"], "ACK", "{ack}");
    assert_eq!(ack["payload"], json!({"ok": true}));
    assert_eq!(ack["pending_capacity"], 4);
    assert_eq!(
        std::fs::read_to_string(platform.root().join("notes/a.txt")).unwrap(),
        text
    );

    let read = platform
        .call("FILE_READ", "r1", &json!({"path": "notes/a.txt"}))
        .await;
    assert_eq!(read["type"], "FILE_CONTENTS", "{read}");
    assert_eq!(read["pending_capacity"], 4);
    assert_eq!(
        read["payload"],
        json!({"content": text, "encoding": "utf-8", "size_bytes": text.len(), "truncated": false})
    );

    // format bytes alone selects base64, and an absolute path under the root works.
    let absolute = platform.root().join("notes/a.txt");
    let read = platform
        .call(
            "FILE_READ",
            "r2",
            &json!({"path": absolute.to_string_lossy(), "format": "bytes", "offset": 1, "length": 2}),
        )
        .await;
    assert_eq!(
        read["payload"],
        json!({"content": "w6k=", "encoding": "base64", "size_bytes": 2, "truncated": true})
    );

    let binary = json!({"path": "b.bin", "content": "AAEC/w==", "encoding": "base64"});
    assert_eq!(
        platform.call("FILE_WRITE", "w2", &binary).await["type"],
        "ACK"
    );
    assert_eq!(
        std::fs::read(platform.root().join("b.bin")).unwrap(),
        [0, 1, 2, 255]
    );
    let bad = json!({"path": "c.bin", "content": "***", "encoding": "base64"});
    let reply = platform.call("FILE_WRITE", "w3", &bad).await;
    assert_eq!(error_code(&reply), "INTERNAL_ERROR");
    assert!(
        !reply["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("***")
    );
    // No STATUS came between any of these replies, because the loop was never saturated.
    platform.ping("p1").await;
}

#[tokio::test]
async fn stat_list_move_and_delete_through_the_loop() {
    let mut platform = established().await;
    let root = platform.root();
    std::fs::write(root.join("data.csv"), "a,b\n").unwrap();
    std::fs::write(root.join(".hidden"), "h").unwrap();

    let stat = platform
        .call("FILE_STAT", "s1", &json!({"path": "data.csv"}))
        .await;
    assert_eq!(stat["type"], "FILE_STAT_RESPONSE", "{stat}");
    let payload = &stat["payload"];
    assert_eq!(payload["exists"], true);
    assert_eq!(payload["is_file"], true);
    assert_eq!(payload["is_dir"], false);
    assert_eq!(payload["size_bytes"], 4);
    assert_eq!(payload["mime_type"], "text/csv");
    assert_eq!(
        payload["path"],
        root.join("data.csv").to_string_lossy().as_ref()
    );

    let list = platform
        .call("FILE_LIST", "l1", &json!({"path": "."}))
        .await;
    assert_eq!(list["type"], "FILE_LIST_RESPONSE", "{list}");
    assert_eq!(list["payload"]["truncated"], false);
    let entries = list["payload"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "hidden entries are skipped: {list}");
    assert_eq!(entries[0]["name"], "data.csv");
    assert_eq!(entries[0]["is_file"], true);
    assert_eq!(
        entries[0]["path"],
        root.join("data.csv").to_string_lossy().as_ref()
    );

    let mv = json!({"src": "data.csv", "dst": "moved.csv"});
    assert_eq!(platform.call("FILE_MOVE", "m1", &mv).await["type"], "ACK");
    let again = platform.call("FILE_MOVE", "m2", &mv).await;
    assert_eq!(error_code(&again), "PATH_NOT_FOUND");

    std::fs::write(root.join("other.csv"), "x").unwrap();
    let clash = json!({"src": "other.csv", "dst": "moved.csv"});
    assert_eq!(
        error_code(&platform.call("FILE_MOVE", "m3", &clash).await),
        "PATH_EXISTS"
    );

    let gone = platform
        .call("FILE_STAT", "s2", &json!({"path": "data.csv"}))
        .await;
    assert_eq!(gone["payload"]["exists"], false);
    assert!(gone["payload"]["is_file"].is_null());

    let delete = json!({"path": "moved.csv"});
    assert_eq!(
        platform.call("FILE_DELETE", "d1", &delete).await["type"],
        "ACK"
    );
    assert!(!root.join("moved.csv").exists());
    assert_eq!(
        error_code(&platform.call("FILE_DELETE", "d2", &delete).await),
        "PATH_NOT_FOUND"
    );
    let missing_ok = json!({"path": "moved.csv", "missing_ok": true});
    assert_eq!(
        platform.call("FILE_DELETE", "d3", &missing_ok).await["type"],
        "ACK"
    );
}

#[tokio::test]
async fn jail_escapes_are_refused_without_leaking_content() {
    let mut platform = established().await;
    let secret = platform.dir.outside().join("secret.txt");
    std::fs::write(&secret, "top-secret-content").unwrap();
    // Only Unix adds a link case below; elsewhere the list stays as written.
    #[cfg_attr(not(unix), allow(unused_mut, clippy::useless_vec))]
    let mut paths = vec![
        "../secret.txt".to_owned(),
        secret.to_string_lossy().into_owned(),
    ];
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&secret, platform.root().join("link")).unwrap();
        paths.push("link".to_owned());
    }
    for (n, path) in paths.iter().enumerate() {
        let reply = platform
            .call("FILE_READ", &format!("r{n}"), &json!({"path": path}))
            .await;
        assert_eq!(error_code(&reply), "PATH_OUTSIDE_ALLOWED_ROOT", "{path}");
        assert!(!reply.to_string().contains("top-secret"), "{reply}");
    }
    let write = json!({"path": "../escape.txt", "content": "x"});
    let reply = platform.call("FILE_WRITE", "w1", &write).await;
    assert_eq!(error_code(&reply), "PATH_OUTSIDE_ALLOWED_ROOT");
    assert!(!platform.dir.outside().join("escape.txt").exists());
}

#[tokio::test]
async fn over_the_cap_is_refused_and_the_freeing_reply_is_followed_by_status() {
    let mut local = config();
    local.max_concurrent = 1;
    let gate = Arc::new(Semaphore::new(0));
    let mut platform = start(
        local,
        Hooks {
            request_gate: Some(Arc::clone(&gate)),
        },
    );
    platform.handshake(|_| {}).await;
    std::fs::write(platform.root().join("a.txt"), "a").unwrap();

    platform.request("FILE_LIST", "slow", &json!({"path": "."}));
    let refused = platform
        .call("FILE_STAT", "next", &json!({"path": "a.txt"}))
        .await;
    assert_eq!(error_code(&refused), "SHIM_OVERLOADED");
    assert_eq!(refused["pending_capacity"], 0);
    assert_eq!(
        refused["payload"]["message"],
        "The local executor is at its concurrent request limit."
    );
    assert_eq!(refused["payload"]["details"], json!({"max_concurrent": 1}));
    // PING is not counted, so it is still answered at the cap.
    platform.ping("p1").await;

    gate.add_permits(1);
    let reply = platform.recv_json().await;
    assert_eq!(reply["id"], "slow");
    assert_eq!(reply["type"], "FILE_LIST_RESPONSE");
    assert_eq!(reply["pending_capacity"], 1);
    let status = platform.recv_json().await;
    assert_eq!(status["type"], "STATUS", "{status}");
    assert_eq!(status["pending_capacity"], 1);
    assert_ne!(status["id"], "slow");
    let payload = &status["payload"];
    assert_eq!(payload["in_flight"], 0);
    assert_eq!(payload["max_concurrent"], 1);
    assert_eq!(payload["queue_depth"], 0);
    assert_eq!(payload["audit_log_bytes"], 0);
    assert!(payload["uptime_seconds"].as_f64().unwrap() >= 0.0);

    // The slot is free again.
    gate.add_permits(1);
    let stat = platform
        .call("FILE_STAT", "again", &json!({"path": "a.txt"}))
        .await;
    assert_eq!(stat["type"], "FILE_STAT_RESPONSE");
}

#[tokio::test]
async fn a_childs_requests_wait_on_the_machine_gate_and_status_shows_them_queued() {
    let mut local = config();
    local.status_interval = Duration::from_millis(20);
    let gate = Arc::new(Semaphore::new(0));
    let work = MachineWork::new(NonZeroU32::new(1).unwrap());
    let mut platform = start_host(
        local,
        Hooks {
            request_gate: Some(Arc::clone(&gate)),
        },
        None,
        |mut host| {
            host.role = Role::Child {
                activity: Activity::default(),
                work: Some(work),
            };
            host
        },
    );
    platform.handshake(|_| {}).await;
    // One request holds the machine's only permit (then waits on the test gate); the
    // second is admitted and waits for the permit instead of being refused.
    platform.request("FILE_LIST", "first", &json!({"path": "."}));
    platform.request("FILE_LIST", "second", &json!({"path": "."}));
    let status = loop {
        let frame = platform.recv_json().await;
        assert_eq!(frame["type"], "STATUS", "nothing is answered yet: {frame}");
        if frame["payload"]["queue_depth"] == 1 {
            break frame;
        }
    };
    assert_eq!(status["payload"]["in_flight"], 1, "{status}");
    assert_eq!(status["pending_capacity"], 2, "{status}");
    gate.add_permits(2);
    let mut answered = Vec::new();
    while answered.len() < 2 {
        let frame = platform.recv_json().await;
        if frame["type"] != "STATUS" {
            assert_eq!(frame["type"], "FILE_LIST_RESPONSE", "{frame}");
            answered.push(frame["id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(answered, ["first", "second"]);
}

#[tokio::test]
async fn status_without_saturation_only_comes_from_the_timer() {
    let mut local = config();
    local.status_interval = Duration::from_millis(20);
    let mut platform = start(local, Hooks::default());
    platform.handshake(|_| {}).await;
    let status = platform.recv_json().await;
    assert_eq!(status["type"], "STATUS", "{status}");
    assert_eq!(status["pending_capacity"], 4);
    assert_eq!(status["payload"]["in_flight"], 0);
    assert_eq!(status["payload"]["max_concurrent"], 4);
    assert!(status["payload"]["uptime_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(status["version"], "1.1");
}

#[tokio::test]
async fn session_revoked_closes_4428_and_sends_nothing_else() {
    let gate = Arc::new(Semaphore::new(0));
    let mut platform = start(
        config(),
        Hooks {
            request_gate: Some(Arc::clone(&gate)),
        },
    );
    platform.handshake(|_| {}).await;
    let write = json!({"path": "late.txt", "content": "x"});
    platform.request("FILE_WRITE", "w1", &write);
    platform.request(
        "SESSION_REVOKED",
        "rev",
        &json!({"reason": "another_shim_connected", "new_shim_machine_id": "m2"}),
    );
    assert_eq!(
        platform.recv_close().await,
        (4428, "session_revoked".to_owned())
    );
    let end = platform.ended().await;
    let SessionEnd::Revoked(payload) = &end else {
        panic!("{end:?}");
    };
    assert_eq!(payload.new_shim_machine_id.as_deref(), Some("m2"));
    assert!(!end.may_reconnect());
    // The in-flight write was aborted with the session: releasing it changes nothing.
    gate.add_permits(10);
    assert_eq!(platform.recv().await, None, "a frame after the close");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!platform.root().join("late.txt").exists());
}

#[tokio::test]
async fn file_ops_violations_and_revocation_are_audited_without_content() {
    let log_dir = TempRoot::new();
    let log = log_dir.outside().join("audit.log");
    let mut local = config();
    // Long enough that the three calls are answered first even on a loaded machine.
    local.status_interval = Duration::from_secs(2);
    let mut platform = start_audited(local, Hooks::default(), Some(&log));
    platform.handshake(|_| {}).await;
    let secret = "file content that must never reach the audit log";
    let write = json!({"path": "a.txt", "content": secret});
    assert_eq!(
        platform.call("FILE_WRITE", "w", &write).await["type"],
        "ACK"
    );
    let read = platform
        .call("FILE_READ", "r", &json!({"path": "a.txt"}))
        .await;
    assert_eq!(read["payload"]["content"], secret);
    let escape = platform
        .call("FILE_READ", "x", &json!({"path": "../a.txt"}))
        .await;
    assert_eq!(error_code(&escape), "PATH_OUTSIDE_ALLOWED_ROOT");
    let status = platform.recv_json().await;
    assert_eq!(status["type"], "STATUS", "{status}");
    let logged = std::fs::metadata(&log).unwrap().len();
    assert_eq!(status["payload"]["audit_log_bytes"], logged);
    platform.request("SESSION_REVOKED", "rev", &json!({"reason": "user_revoked"}));
    assert_eq!(platform.recv_close().await.0, 4428);
    platform.ended().await;

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(secret));
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ops: Vec<&str> = records.iter().map(|r| r["op"].as_str().unwrap()).collect();
    assert_eq!(
        ops,
        [
            "FILE_WRITE",
            "FILE_READ",
            "FILE_READ",
            "JAIL_VIOLATION",
            "SESSION_REVOKED"
        ]
    );
    assert_eq!(records[0]["request_id"], "w");
    assert_eq!(records[0]["details"]["size_bytes_written"], secret.len());
    assert_eq!(records[1]["details"]["size_bytes_returned"], secret.len());
    assert_eq!(
        records[2]["result"]["error_code"],
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
    assert_eq!(records[3]["details"]["attempted_op"], "FILE_READ");
    assert_eq!(records[4]["details"]["source"], "frame");
    assert_eq!(records[4]["details"]["reason"], "user_revoked");
    assert_eq!(records[4]["session_id"], "session-1");
    let report = local_core::machine::audit_chain::verify(&log, &AUDIT_KEY).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

/// A session with `shell` advertised and granted, and the given command limits.
async fn with_shell(commands: CommandLimiter, audit_log: Option<&Path>) -> Peer {
    let mut local = config();
    local.advertised = vec![Capability::Files, Capability::Shell];
    let mut platform = start_host(local, Hooks::default(), audit_log, |host| {
        host.with_commands(commands)
    });
    let hello = platform.hello().await;
    assert_eq!(hello["payload"]["capabilities"], json!(["shell", "files"]));
    let mut ack = ack_for(&platform.hello_id);
    ack["payload"]["granted_capabilities"] = json!(["files", "shell"]);
    ack["payload"]["command_timeout_seconds"] = json!(1);
    platform.send_json(&ack);
    platform
}

#[tokio::test]
async fn commands_run_in_the_jail_with_the_safe_environment() {
    let mut platform = with_shell(CommandLimiter::new(10, 60), None).await;
    std::fs::create_dir(platform.root().join("sub")).unwrap();
    let reply = platform
        .call(
            "EXECUTE_COMMAND",
            "c1",
            &json!({"command": "pwd; echo \"$GREETING\"; echo err >&2; exit 3",
                    "cwd": "sub", "env": {"GREETING": "hi there"}}),
        )
        .await;
    assert_eq!(reply["type"], "COMMAND_RESULT", "{reply}");
    let payload = &reply["payload"];
    let sub = platform.root().join("sub");
    assert_eq!(payload["stdout"], format!("{}\nhi there\n", sub.display()));
    assert_eq!(payload["stderr"], "err\n");
    assert_eq!(payload["exit_code"], 3);
    assert_eq!(payload["timed_out"], false);
    assert_eq!(payload["output_truncated"], false);

    // argv: no shell parsing, and the default cwd is the root.
    let reply = platform
        .call(
            "EXECUTE_COMMAND",
            "c2",
            &json!({"argv": ["sh", "-c", "pwd", "$HOME"]}),
        )
        .await;
    assert_eq!(
        reply["payload"]["stdout"],
        format!("{}\n", platform.root().display())
    );

    let outside = platform
        .call(
            "EXECUTE_COMMAND",
            "c3",
            &json!({"argv": ["true"], "cwd": ".."}),
        )
        .await;
    assert_eq!(error_code(&outside), "PATH_OUTSIDE_ALLOWED_ROOT");
    let missing = platform
        .call(
            "EXECUTE_COMMAND",
            "c4",
            &json!({"argv": ["no-such-program-xyz"]}),
        )
        .await;
    assert_eq!(error_code(&missing), "SHELL_NOT_AVAILABLE");
    let cmd = platform
        .call(
            "EXECUTE_COMMAND",
            "c5",
            &json!({"command": "dir", "shell": "cmd"}),
        )
        .await;
    assert_eq!(error_code(&cmd), "SHELL_NOT_AVAILABLE");
}

#[tokio::test]
async fn command_timeouts_are_capped_by_the_negotiated_ceiling() {
    let mut platform = with_shell(CommandLimiter::new(10, 60), None).await;
    // The request asks for 60 s; the ACK's ceiling of 1 s wins.
    let reply = platform
        .call(
            "EXECUTE_COMMAND",
            "slow",
            &json!({"argv": ["sleep", "30"], "timeout_seconds": 60}),
        )
        .await;
    let payload = &reply["payload"];
    assert_eq!(payload["timed_out"], true, "{reply}");
    assert_eq!(payload["exit_code"], -1);
    let took = payload["duration_seconds"].as_f64().unwrap();
    assert!((1.0..10.0).contains(&took), "{took}");
}

#[tokio::test]
async fn command_limits_refuse_with_shim_overloaded_and_are_audited() {
    let log_dir = TempRoot::new();
    let log = log_dir.outside().join("audit.log");
    let mut platform = with_shell(CommandLimiter::new(10, 2), Some(&log)).await;
    for id in ["a", "b"] {
        let ok = platform
            .call(
                "EXECUTE_COMMAND",
                id,
                &json!({"argv": ["true"], "env": {"SECRET": "v4lue"}}),
            )
            .await;
        assert_eq!(ok["type"], "COMMAND_RESULT", "{ok}");
    }
    let refused = platform
        .call("EXECUTE_COMMAND", "c", &json!({"argv": ["true"]}))
        .await;
    assert_eq!(error_code(&refused), "SHIM_OVERLOADED");
    assert_eq!(
        refused["payload"]["details"]["limit"],
        "commands_per_minute"
    );
    platform.ping("p").await;
    drop(platform);
    // The refusal's record is written behind the reply; give it a moment.
    let deadline = Instant::now() + WAIT;
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() >= 3 || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        !text.contains("v4lue"),
        "an env value reached the audit log"
    );
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 3, "{text}");
    assert_eq!(records[0]["op"], "EXECUTE_COMMAND");
    assert_eq!(records[0]["details"]["argv"], json!(["true"]));
    assert!(
        records[0]["details"]["env_keys"]
            .as_array()
            .unwrap()
            .contains(&json!("SECRET"))
    );
    assert_eq!(records[0]["result"]["exit_code"], 0);
    assert_eq!(records[2]["result"]["error_code"], "SHIM_OVERLOADED");
}

#[tokio::test]
async fn fatal_and_ordinary_closes_from_the_platform() {
    for (code, fatal) in [
        (4427, true),
        (4426, true),
        (4429, true),
        (1000, false),
        (1011, false),
    ] {
        let mut platform = established().await;
        platform.send(Frame::Close {
            code,
            reason: "bye".to_owned(),
        });
        let end = platform.ended().await;
        let reason = "bye".to_owned();
        let expected = if fatal {
            SessionEnd::Fatal { code, reason }
        } else {
            SessionEnd::Closed { code, reason }
        };
        assert_eq!(end, expected);
        assert_eq!(end.may_reconnect(), !fatal);
    }
}

#[tokio::test]
async fn a_close_during_the_handshake_ends_it_the_same_way() {
    let mut platform = start(config(), Hooks::default());
    platform.hello().await;
    platform.send(Frame::Close {
        code: 4427,
        reason: String::new(),
    });
    assert!(matches!(
        platform.ended().await,
        SessionEnd::Fatal { code: 4427, .. }
    ));
}

#[tokio::test]
async fn transport_end_aborts_in_flight_requests() {
    let gate = Arc::new(Semaphore::new(0));
    let mut platform = start(
        config(),
        Hooks {
            request_gate: Some(Arc::clone(&gate)),
        },
    );
    platform.handshake(|_| {}).await;
    platform.request(
        "FILE_WRITE",
        "w1",
        &json!({"path": "never.txt", "content": "x"}),
    );
    platform.ping("p1").await;
    let root = platform.root();
    let gate_after = Arc::clone(&gate);
    assert_eq!(platform.end().await, SessionEnd::TransportEnded);
    gate_after.add_permits(10);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!Path::new(&root).join("never.txt").exists());
}

#[test]
fn ids_look_like_distinct_uuid_v4() {
    let a = new_id();
    let b = new_id();
    assert_ne!(a, b);
    for id in [&a, &b] {
        let groups: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
        assert!(id.starts_with(|c: char| c.is_ascii_hexdigit()));
        assert_eq!(&id[14..15], "4", "{id}");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
    }
}

/// A control plane that answers every request with ACK and counts connections.
#[derive(Debug, Default)]
struct CountingPlane {
    connected: std::sync::atomic::AtomicUsize,
}

impl ControlPlane for CountingPlane {
    fn connected(&self, _max_concurrent: NonZeroU32) {
        self.connected
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn handle(&self, _message: Message) -> Pin<Box<dyn Future<Output = Message> + Send>> {
        Box::pin(async {
            Message::Ack(crate::protocol::AckPayload {
                ok: true,
                pid: None,
            })
        })
    }
}

fn control_ack(ack: &mut Value) {
    ack["payload"]["session_id"] = Value::Null;
    ack["payload"]["connection_id"] = json!("conn-1");
    ack["payload"]["granted_capabilities"] = json!(["files", "directory_browse"]);
}

#[tokio::test]
async fn a_control_connection_checks_its_ack_and_serves_only_control_messages() {
    let plane = Arc::new(CountingPlane::default());
    let shared: Arc<dyn ControlPlane> = plane.clone();
    let mut platform = start_host(config(), Hooks::default(), None, move |mut host| {
        host.role = Role::Control(shared);
        host
    });
    let hello = platform.hello().await;
    assert_eq!(hello["payload"]["allowed_root"], Value::Null);
    assert!(
        hello["payload"]["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("directory_browse"))
    );
    let mut ack = ack_for(&platform.hello_id);
    control_ack(&mut ack);
    platform.send_json(&ack);
    let detach = platform
        .call("DETACH_SESSION", "d", &json!({"session_id": "s"}))
        .await;
    assert_eq!(detach["type"], "ACK", "{detach}");
    assert_eq!(plane.connected.load(std::sync::atomic::Ordering::SeqCst), 1);
    let stat = platform.call("FILE_STAT", "f", &json!({"path": "x"})).await;
    assert_eq!(error_code(&stat), "FEATURE_NOT_SUPPORTED");
    // Malformed, a control request gets its own code; a keepalive belongs to every
    // connection, so it is the generic validation failure here as on a data connection.
    let half = platform
        .call(
            "DIRECTORY_LIST_REQUEST",
            "half",
            &json!({"browse_id": null, "directory_ref": "d"}),
        )
        .await;
    assert_eq!(error_code(&half), "DIRECTORY_REFERENCE_INVALID");
    let ping = platform.call("PING", "p", &json!([1])).await;
    assert_eq!(error_code(&ping), "INTERNAL_ERROR");

    // The ACK checks: a session id closes 4403; no connection id, no browse grant or a
    // negotiated 1.0 closes 4426.
    type Edit = fn(&mut Value);
    let cases: [(Edit, u16); 4] = [
        (|ack| ack["payload"]["session_id"] = json!("s-1"), 4403),
        (|ack| ack["payload"]["connection_id"] = json!(""), 4426),
        (
            |ack| ack["payload"]["granted_capabilities"] = json!(["files"]),
            4426,
        ),
        (
            |ack| ack["payload"]["protocol_version"] = json!("1.0"),
            4426,
        ),
    ];
    for (edit, code) in cases {
        let shared: Arc<dyn ControlPlane> = Arc::new(CountingPlane::default());
        let mut platform = start_host(config(), Hooks::default(), None, move |mut host| {
            host.role = Role::Control(shared);
            host
        });
        platform
            .handshake(|ack| {
                control_ack(ack);
                edit(ack);
            })
            .await;
        assert_eq!(platform.recv_close().await.0, code);
        assert_eq!(
            platform.ended().await,
            SessionEnd::HandshakeRejected { code }
        );
    }
}
