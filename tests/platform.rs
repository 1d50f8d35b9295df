//! A test platform for the real `autogpt-shim` binary: a WebSocket server on 127.0.0.1:0 that
//! accepts the shim's dial, checks the upgrade, plays HELLO_ACK and sends requests, plus the
//! shim process itself in a private home so its audit log, key and status file are the
//! test's. Shared by the end-to-end suite and the connector benchmark.

use std::{
    fs::File,
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
        self, Message,
        handshake::server::{ErrorResponse, Request, Response},
        http::StatusCode,
        protocol::{CloseFrame, WebSocketConfig, frame::coding::CloseCode},
    },
};

/// Generous: the machine running the suite is loaded.
pub const WAIT: Duration = Duration::from_secs(60);
/// The session id the helpers use unless told otherwise.
pub const SESSION: &str = "sess-e2e.1";
/// The bearer the helpers give the shim.
pub const TOKEN: &str = "shim-e2e-secret-token-4f1c";

/// A binary cargo built next to the running test or bench executable.
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins --examples` first",
        path.display()
    );
    path
}

/// A fresh directory under the system temp dir.
pub fn fresh_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// A running shim in its own home, killed on every path out of the test.
pub struct Shim {
    child: Child,
    home: PathBuf,
    stderr: PathBuf,
}

impl Shim {
    /// Starts `autogpt-shim` with `args` (see [`shim_command`] for its environment).
    pub fn spawn(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn_binary(&binary("autogpt-shim"), home, args, env)
    }

    /// [`Self::spawn`] with another build of the shim (the benchmark's before and after).
    pub fn spawn_binary(program: &Path, home: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let stderr = home.join(format!("shim-{}.stderr", uuid::Uuid::new_v4().simple()));
        let mut command = shim_command_with(program, home, args, env);
        command
            .stdout(Stdio::null())
            // A file, not a pipe: a chatty shim must never block on a full pipe.
            .stderr(File::create(&stderr).unwrap());
        Self {
            child: command.spawn().unwrap(),
            home: home.to_path_buf(),
            stderr,
        }
    }

    /// The shim's state directory (`$XDG_STATE_HOME/autogpt-local-executor`).
    pub fn state_dir(&self) -> PathBuf {
        self.home.join(".local/state/autogpt-local-executor")
    }

    /// The shim's audit log.
    pub fn audit_log(&self) -> PathBuf {
        self.state_dir().join("audit.log")
    }

    /// Everything written to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits for the exit and returns the status and stderr.
    pub async fn exit(&mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "the shim did not exit");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        (status, self.stderr())
    }

    /// Kills the shim and reaps it, as dropping it does: call it before removing its home,
    /// where a shim still running writes its state again.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops the shim as a person's Ctrl-C would: SIGTERM, then SIGKILL if it has not exited
    /// within 5 s, and reaps it. A shim with a shell sandbox then ends its spare launcher and
    /// removes that launcher's `TMPDIR`, which SIGKILL leaves for the next shim to sweep.
    pub fn terminate(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.signal("TERM");
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.stop();
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal by name (`TERM`, `KILL`, ...) with kill(1).
    pub fn signal(&self, name: &str) {
        let sent = Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -{name} failed");
    }

    /// Resident set size in bytes, from /proc.
    pub fn rss_bytes(&self) -> u64 {
        self.proc_status_bytes("VmRSS:")
    }

    /// Peak resident set size in bytes (VmHWM) since the start or the last
    /// [`Self::reset_peak_rss`].
    pub fn peak_rss_bytes(&self) -> u64 {
        self.proc_status_bytes("VmHWM:")
    }

    /// Resets the kernel's peak RSS to the current RSS (`5` to `/proc/<pid>/clear_refs`,
    /// Linux 4.0+), so each phase of a test reads its own peak.
    pub fn reset_peak_rss(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").unwrap();
    }

    /// A `kB` field of `/proc/<pid>/status`, in bytes.
    fn proc_status_bytes(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        kib * 1024
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `autogpt-shim` with only the environment given here: `PATH`, a private `HOME` (with XDG
/// config and state inside it), fast reconnects, and `env`. Nothing of the test runner's
/// environment leaks in.
pub fn shim_command(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    shim_command_with(&binary("autogpt-shim"), home, args, env)
}

/// [`shim_command`] for another build of the shim at `program`.
pub fn shim_command_with(
    program: &Path,
    home: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        // The run's own temporary folder (scripts/test makes one and removes it), so what the
        // shim leaves there when a test kills it mid-command (a command's private TMPDIR) is
        // removed with the run instead of staying in /tmp.
        .env("TMPDIR", std::env::temp_dir())
        // Tests must not wait the reference's seconds between dials.
        .env("AUTOGPT_SHIM_RECONNECT_BASE_DELAY", "0.05")
        .env("AUTOGPT_SHIM_RECONNECT_JITTER_SECONDS", "0")
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// Runs a short `autogpt-shim` subcommand to its end: exit code, stdout, stderr.
pub fn run_shim(home: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let output = shim_command(home, args, &[]).output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// What the platform saw on one upgrade.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// The request path.
    pub path: String,
    /// The Authorization header, if any.
    pub authorization: Option<String>,
    /// The status the upgrade was refused with: the test's, or 401 for an expired JWT.
    pub refused: Option<u16>,
}

/// The platform's listening socket.
pub struct Platform {
    listener: TcpListener,
    addr: SocketAddr,
}

impl Platform {
    /// Listens on 127.0.0.1:0.
    pub async fn bind() -> Self {
        Self::bind_at(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap()
    }

    /// Listens on `addr` (a port a test chose).
    ///
    /// # Errors
    /// The bind's error (port taken, no permission).
    pub async fn bind_at(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        Ok(Self { listener, addr })
    }

    /// The base URL to give the shim.
    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// Accepts one upgrade; `refuse` answers it with that HTTP status instead.
    pub async fn accept(&self, refuse: Option<u16>) -> (Option<Conn>, Seen) {
        Self::upgrade(self.accept_tcp().await, refuse).await
    }

    /// Accepts the next dial at the TCP level, the upgrade left to the caller (a platform
    /// that drops, refuses or stalls it).
    pub async fn accept_tcp(&self) -> TcpStream {
        let (tcp, _) = tokio::time::timeout(WAIT, self.listener.accept())
            .await
            .expect("the shim never dialled")
            .unwrap();
        // As a platform on Python's asyncio (uvicorn, websockets) has it: asyncio turns Nagle
        // off on every TCP connection, so a request is not held back while an earlier one is
        // unacknowledged.
        tcp.set_nodelay(true).unwrap();
        tcp
    }

    /// Answers the upgrade on an accepted dial; `refuse` answers it with that HTTP status
    /// instead.
    pub async fn upgrade(tcp: TcpStream, refuse: Option<u16>) -> (Option<Conn>, Seen) {
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
            // As the real platform does, an expired JWT bearer is refused with 401, whatever
            // the test asked for (checking its signature is the fake OAuth server's business).
            let expired = seen
                .authorization
                .as_deref()
                .and_then(|value| value.strip_prefix("Bearer "))
                .is_some_and(jwt_expired);
            seen.refused = if expired { Some(401) } else { refuse };
            if let Some(status) = seen.refused {
                let mut refusal = ErrorResponse::new(None);
                *refusal.status_mut() = StatusCode::from_u16(status).unwrap();
                return Err(refusal);
            }
            Ok(response)
        };
        // The platform accepts the protocol's 16 MiB frames, like the shim.
        let config = WebSocketConfig::default()
            .max_message_size(Some(local_core::limits::MAX_FRAME_BYTES))
            .max_frame_size(Some(local_core::limits::MAX_FRAME_BYTES));
        let socket = tokio_tungstenite::accept_hdr_async_with_config(tcp, callback, Some(config))
            .await
            .ok();
        let seen = seen.lock().unwrap().clone();
        (socket.map(|socket| Conn { socket }), seen)
    }

    /// `autogpt-shim` arguments for a direct session against this platform: `--session-id`,
    /// `--allowed-root root`, `--platform-url`, `--log-level level`, `start`, then `extra`.
    pub fn start_args(&self, root: &Path, level: &str, extra: &[&str]) -> Vec<String> {
        let root = root.to_string_lossy();
        let url = self.url();
        let base = [
            "--session-id",
            SESSION,
            "--allowed-root",
            &root,
            "--platform-url",
            &url,
            "--log-level",
            level,
            "start",
        ];
        base.iter()
            .chain(extra)
            .map(|arg| (*arg).to_owned())
            .collect()
    }

    /// Whether the shim dials within `window`.
    pub async fn dials_within(&self, window: Duration) -> bool {
        tokio::time::timeout(window, self.listener.accept())
            .await
            .is_ok()
    }

    /// Accepts the next dial, checks path and bearer, reads HELLO, answers HELLO_ACK granting
    /// `grants` (with `edit` applied to the ACK), and returns the socket and the HELLO.
    pub async fn session(&self, grants: &[&str], edit: impl FnOnce(&mut Value)) -> (Conn, Value) {
        let path = format!("/ws/local-executor/{SESSION}");
        self.handshake(&path, json!(SESSION), Value::Null, grants, edit)
            .await
    }

    /// `autogpt-shim` arguments for machine control mode against this platform: no
    /// `--session-id`; `--platform-url`, `--log-level level`, `start`, then `extra`.
    pub fn control_args(&self, level: &str, extra: &[&str]) -> Vec<String> {
        let url = self.url();
        let base = ["--platform-url", &url, "--log-level", level, "start"];
        base.iter()
            .chain(extra)
            .map(|arg| (*arg).to_owned())
            .collect()
    }

    /// Accepts the next dial as the control connection (`/ws/local-executor` with the
    /// bearer), reads HELLO and answers a control HELLO_ACK (null session id, connection id
    /// `conn-1`, `directory_browse` and `files` granted) with `edit` applied.
    pub async fn control(&self, edit: impl FnOnce(&mut Value)) -> (Conn, Value) {
        let grants = ["directory_browse", "files"];
        self.handshake(
            "/ws/local-executor",
            Value::Null,
            json!("conn-1"),
            &grants,
            edit,
        )
        .await
    }

    /// Accepts the next dial as a child's data connection for `session_id`
    /// (`/ws/local-executor/{session_id}`), reads HELLO and answers its HELLO_ACK granting
    /// `grants`; returns the socket and the HELLO.
    pub async fn child(&self, session_id: &str, grants: &[&str]) -> (Conn, Value) {
        let path = format!("/ws/local-executor/{session_id}");
        self.handshake(&path, json!(session_id), Value::Null, grants, |_| {})
            .await
    }

    /// Accepts the next dial, checks its path and bearer, reads HELLO and answers HELLO_ACK
    /// with these session and connection ids and grants, `edit` applied.
    async fn handshake(
        &self,
        path: &str,
        session_id: Value,
        connection_id: Value,
        grants: &[&str],
        edit: impl FnOnce(&mut Value),
    ) -> (Conn, Value) {
        let (conn, seen) = self.accept(None).await;
        let mut conn = conn.expect("the upgrade failed");
        assert_eq!(seen.path, path);
        assert_eq!(seen.authorization, Some(format!("Bearer {TOKEN}")));
        let hello = conn.recv().await;
        assert_eq!(hello["type"], "HELLO", "{hello}");
        conn.acknowledge(&hello, session_id, connection_id, grants, edit)
            .await;
        (conn, hello)
    }
}

/// Whether `token` is a JWT whose `exp` has passed (RFC 7519: it is accepted only before).
fn jwt_expired(token: &str) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    jsonwebtoken::dangerous::insecure_decode_claims::<Value>(token)
        .ok()
        .and_then(|claims| claims["exp"].as_f64())
        .is_some_and(|exp| now >= exp)
}

/// One accepted WebSocket.
pub struct Conn {
    socket: WebSocketStream<TcpStream>,
}

impl Conn {
    /// Answers `hello` with a HELLO_ACK carrying these session and connection ids and
    /// grants and the protocol's default limits, `edit` applied.
    pub async fn acknowledge(
        &mut self,
        hello: &Value,
        session_id: Value,
        connection_id: Value,
        grants: &[&str],
        edit: impl FnOnce(&mut Value),
    ) {
        let mut ack = json!({
            "type": "HELLO_ACK", "id": hello["id"], "ts": 1.0, "version": "1.1",
            "payload": {
                "session_id": session_id,
                "connection_id": connection_id,
                "protocol_version": "1.1",
                "granted_capabilities": grants,
                "max_file_size_bytes": 10_485_760,
                "command_timeout_seconds": 30,
                "max_concurrent": 4
            }
        });
        edit(&mut ack);
        self.send(&ack).await;
    }

    /// The next envelope, STATUS included; `None` when the shim closed (with the code).
    pub async fn next(&mut self) -> Result<Value, Option<u16>> {
        loop {
            let message = tokio::time::timeout(WAIT, self.socket.next())
                .await
                .expect("no frame from the shim");
            match message {
                Some(Ok(Message::Text(text))) => {
                    return Ok(serde_json::from_str(text.as_str()).unwrap());
                }
                Some(Ok(Message::Close(frame))) => {
                    return Err(frame.map(|frame| u16::from(frame.code)));
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return Err(None),
            }
        }
    }

    /// The next envelope other than STATUS.
    pub async fn recv(&mut self) -> Value {
        loop {
            match self.next().await {
                Ok(value) if value["type"] == "STATUS" => {}
                Ok(value) => return value,
                Err(code) => panic!("the shim closed the socket ({code:?})"),
            }
        }
    }

    /// Sends one JSON value as a text frame.
    pub async fn send(&mut self, value: &Value) {
        self.send_text(value.to_string()).await;
    }

    /// Sends raw text.
    pub async fn send_text(&mut self, text: String) {
        self.socket.send(Message::text(text)).await.unwrap();
    }

    /// Sends one WebSocket message as it is: binary, a ping, or a hand-built
    /// [`Message::Frame`] (a text frame that is not UTF-8, a fragment).
    ///
    /// # Errors
    /// The transport's, when the shim has dropped the connection.
    pub async fn send_raw(&mut self, message: Message) -> Result<(), tungstenite::Error> {
        self.socket.send(message).await
    }

    /// Sends `messages` while reading the shim's messages at the same time (so neither side
    /// stalls on a full buffer), until `done` says the last one read completes the exchange
    /// or the connection ends; returns every message read (text, pong, close). Sending stops
    /// quietly when the shim drops the connection.
    pub async fn pipeline(
        &mut self,
        messages: impl IntoIterator<Item = Message>,
        mut done: impl FnMut(&Message) -> bool,
    ) -> Vec<Message> {
        let (mut sink, mut stream) = (&mut self.socket).split();
        let send = async move {
            for message in messages {
                if sink.feed(message).await.is_err() {
                    return;
                }
            }
            let _ = sink.flush().await;
        };
        let receive = async move {
            let mut read = Vec::new();
            loop {
                let message = tokio::time::timeout(WAIT, stream.next())
                    .await
                    .expect("the shim stopped sending");
                let Some(Ok(message)) = message else {
                    return read;
                };
                let finished = done(&message);
                read.push(message);
                if finished {
                    return read;
                }
            }
        };
        tokio::join!(send, receive).1
    }

    /// Sends a request without waiting.
    pub async fn request(&mut self, kind: &str, id: &str, payload: Value) {
        let envelope =
            json!({"type": kind, "id": id, "ts": 1.0, "version": "1.1", "payload": payload});
        self.send(&envelope).await;
    }

    /// Sends a request and returns its reply, which must be the next non-STATUS frame.
    pub async fn call(&mut self, kind: &str, id: &str, payload: Value) -> Value {
        self.request(kind, id, payload).await;
        let reply = self.recv().await;
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    /// Closes with `code` and drains until the shim's side is closed too.
    pub async fn close(&mut self, code: u16) {
        let frame = CloseFrame {
            code: CloseCode::from(code),
            reason: "test".into(),
        };
        let _ = self.socket.close(Some(frame)).await;
        while let Ok(Some(_)) = tokio::time::timeout(WAIT, self.socket.next()).await {}
    }

    /// Waits for the shim's close frame, failing on any envelope but STATUS on the way.
    pub async fn closed(&mut self) -> Option<u16> {
        loop {
            match self.next().await {
                Ok(value) if value["type"] == "STATUS" => {}
                Ok(value) => panic!("a frame before the close: {value}"),
                Err(code) => return code,
            }
        }
    }
}

impl Conn {
    /// On a control connection: starts a browse and lists the home root; returns the browse
    /// id and the reference of `home`'s subdirectory `name`.
    pub async fn reference(&mut self, home: &Path, name: &str) -> (String, String) {
        let roots = self
            .call(
                "DIRECTORY_LIST_REQUEST",
                "browse",
                json!({"browse_id": null, "directory_ref": null}),
            )
            .await;
        let browse_id = roots["payload"]["browse_id"].as_str().unwrap().to_owned();
        let home_ref = listed(&roots, home)["directory_ref"].clone();
        let listing = self
            .call(
                "DIRECTORY_LIST_REQUEST",
                "drill",
                json!({"browse_id": browse_id, "directory_ref": home_ref}),
            )
            .await;
        let found = listed(&listing, &home.join(name))["directory_ref"]
            .as_str()
            .unwrap()
            .to_owned();
        (browse_id, found)
    }

    /// On a control connection: attaches `session` to `home`'s subdirectory `name` through a
    /// fresh browse; returns SESSION_ATTACHED's payload.
    pub async fn attach(&mut self, home: &Path, session: &str, name: &str) -> Value {
        let (browse_id, directory_ref) = self.reference(home, name).await;
        let payload = json!({"session_id": session, "browse_id": browse_id, "directory_ref": directory_ref, "expected_connection_id": "conn-1"});
        let reply = self.call("ATTACH_SESSION", "attach", payload).await;
        assert_eq!(reply["type"], "SESSION_ATTACHED", "{reply}");
        reply["payload"].clone()
    }

    /// On a control connection: attaches `home`'s subdirectory `name` to `session`,
    /// activates it at revision 1 and accepts the child's data connection from `platform`,
    /// granting `grants`.
    pub async fn activate(
        &mut self,
        platform: &Platform,
        home: &Path,
        session: &str,
        name: &str,
        grants: &[&str],
    ) -> Self {
        self.attach(home, session, name).await;
        let payload = json!({"session_id": session, "revision": 1});
        let reply = self
            .call("ACTIVATE_SESSION", &format!("activate-{session}"), payload)
            .await;
        assert_eq!(reply["type"], "SESSION_ACTIVATED", "{reply}");
        platform.child(session, grants).await.0
    }
}

/// The entry of a DIRECTORY_LIST_RESPONSE whose path is `path` (asserting there is one).
pub fn listed<'a>(listing: &'a Value, path: &Path) -> &'a Value {
    assert_eq!(listing["type"], "DIRECTORY_LIST_RESPONSE", "{listing}");
    let path = path.to_string_lossy();
    listing["payload"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == path.as_ref())
        .unwrap_or_else(|| panic!("{path} not listed: {listing}"))
}

/// The `code` of an ERROR reply (asserting it is one).
pub fn error_code(reply: &Value) -> &str {
    assert_eq!(reply["type"], "ERROR", "{reply}");
    reply["payload"]["code"].as_str().unwrap()
}
