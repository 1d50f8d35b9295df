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
    /// Set when the session reports the handshake done (the daemon's "connected").
    established: Arc<std::sync::atomic::AtomicBool>,
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
    let established = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&established);
    let session = tokio::spawn(async move {
        let on_established = move || flag.store(true, std::sync::atomic::Ordering::SeqCst);
        run_session_with(stream, sink, &config, host, hooks, on_established).await
    });
    Peer {
        to_shim: Some(to_shim),
        from_shim,
        session,
        dir,
        hello_id: String::new(),
        established,
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

    /// Whether the session has reported its handshake done.
    fn established(&self) -> bool {
        self.established.load(std::sync::atomic::Ordering::SeqCst)
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

mod control;
mod handshake;
mod requests;
mod shell;
