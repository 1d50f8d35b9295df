//! Test support: the real service on 127.0.0.1:0 and a raw HTTP/1.1 client that can send
//! exactly the bytes a test needs (duplicate headers, chunked bodies, stalls).

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use base64::Engine;
use local_core::{
    LocalState,
    clock::ManualClock,
    guide::{
        diagnostics::DiagnosticLog,
        guidance::{
            demo::DemoProvider,
            model::GuidanceResult,
            provider::{GuidanceProvider, ProviderError, ProviderFuture, ProviderRequest},
        },
        state::LocalConfig,
    },
};
use msguide_api::{boundary::Boundary, server::ConnectionLimits};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// A loopback port nothing listens on (released at once; the program under test binds it
/// moments later).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) const TOKEN: &str = "test-token_0123456789.~+/abc==";

/// How to start a test server.
pub(crate) struct Options {
    pub(crate) token: Option<String>,
    pub(crate) audit: bool,
    pub(crate) diagnostic_log: Option<PathBuf>,
    pub(crate) provider: Arc<dyn GuidanceProvider>,
    pub(crate) max_records: usize,
    pub(crate) limits: ConnectionLimits,
    pub(crate) body_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            token: Some(TOKEN.to_owned()),
            audit: true,
            diagnostic_log: None,
            provider: Arc::new(DemoProvider),
            max_records: 1000,
            limits: ConnectionLimits::default(),
            body_timeout: Duration::from_secs(30),
        }
    }
}

/// A running server and handles on its state.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    pub(crate) clock: ManualClock,
    pub(crate) local: Arc<LocalState>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Server {
    pub(crate) async fn start() -> Self {
        Self::with(Options::default()).await
    }

    pub(crate) async fn with(options: Options) -> Self {
        let clock = ManualClock::new();
        let local = Arc::new(LocalState::new(LocalConfig {
            audit_enabled: options.audit,
            diagnostic_log: options
                .diagnostic_log
                .map(|p| DiagnosticLog::open(&p).unwrap()),
            provider: options.provider,
            clock: Arc::new(clock.clone()),
            max_records: options.max_records,
        }));
        let boundary = Boundary {
            token: local_core::secret::LocalToken::from_configured(options.token.as_deref()),
            max_body_bytes: local_core::limits::MAX_BODY_BYTES,
            body_timeout: options.body_timeout,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = msguide_api::app(Arc::clone(&local), boundary);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(msguide_api::server::serve(
            listener,
            app,
            options.limits,
            async {
                let _ = stopped.await;
            },
        ));
        Self {
            addr,
            clock,
            local,
            _stop: stop,
        }
    }

    /// A request builder aimed at this server, authenticated with [`TOKEN`].
    pub(crate) fn post(&self, path: &str) -> Req {
        Req::new(self.addr, "POST", path).bearer(TOKEN)
    }

    pub(crate) fn get(&self, path: &str) -> Req {
        Req::new(self.addr, "GET", path).bearer(TOKEN)
    }

    pub(crate) async fn session(&self) -> String {
        let res = self.post("/v1/sessions").send().await;
        assert_eq!(res.status, 200, "{}", res.text());
        res.json()["sessionId"].as_str().unwrap().to_owned()
    }

    pub(crate) async fn guidance(&self, body: &Value) -> Resp {
        self.post("/v1/guidance").json(body).send().await
    }
}

/// A response as read off the socket.
#[derive(Debug)]
pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Resp {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `detail` string of an error body.
    pub(crate) fn detail(&self) -> String {
        self.json()["detail"]
            .as_str()
            .unwrap_or_else(|| panic!("no string detail: {}", self.text()))
            .to_owned()
    }

    /// Asserts a 422 in the validation-list shape and returns its first item's type.
    pub(crate) fn validation_type(&self) -> String {
        assert_eq!(self.status, 422, "{}", self.text());
        let body = self.json();
        let items = body["detail"]
            .as_array()
            .unwrap_or_else(|| panic!("not a list: {}", self.text()));
        for item in items {
            assert_eq!(item["msg"], "Invalid request value");
            assert!(item["loc"].is_array());
            assert_eq!(item.as_object().unwrap().len(), 3, "{item}");
        }
        items[0]["type"].as_str().unwrap().to_owned()
    }
}

/// Parses one HTTP/1.1 response from the front of `raw`; returns it and the bytes it used.
pub(crate) fn parse_response(raw: &[u8]) -> Option<(Resp, usize)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &raw[end + 4..];
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    if let Some(length) = find("content-length") {
        let length: usize = length.parse().ok()?;
        if rest.len() < length {
            return None;
        }
        let body = rest[..length].to_vec();
        return Some((
            Resp {
                status,
                headers,
                body,
            },
            end + 4 + length,
        ));
    }
    if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut body = Vec::new();
        let mut at = 0;
        loop {
            let line_end = rest[at..].windows(2).position(|w| w == b"\r\n")? + at;
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[at..line_end]).ok()?.trim(), 16)
                    .ok()?;
            at = line_end + 2;
            if size == 0 {
                return Some((
                    Resp {
                        status,
                        headers,
                        body,
                    },
                    end + 4 + at + 2,
                ));
            }
            body.extend_from_slice(rest.get(at..at + size)?);
            at += size + 2;
        }
    }
    Some((
        Resp {
            status,
            headers,
            body: Vec::new(),
        },
        end + 4,
    ))
}

/// A response whose body never came (HEAD, or a closed connection): headers only.
fn head_only(raw: &[u8]) -> Option<Resp> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let kept: Vec<&str> = head
        .lines()
        .filter(|l| !l.to_ascii_lowercase().starts_with("content-length:"))
        .collect();
    parse_response(format!("{}\r\n\r\n", kept.join("\r\n")).as_bytes()).map(|(r, _)| r)
}

/// Writes raw bytes on a fresh connection and reads one response (the connection is closed).
pub(crate) async fn send_raw(addr: SocketAddr, raw: &[u8]) -> Resp {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // A server that answers before reading everything (413, 401) may reset the rest of a big write.
    let _ = stream.write_all(raw).await;
    read_response(&mut stream).await.expect("no response")
}

/// Reads one response, or `None` when the connection closes first.
pub(crate) async fn read_response(stream: &mut TcpStream) -> Option<Resp> {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if let Some((resp, _)) = parse_response(&buf) {
            return Some(resp);
        }
        match tokio::time::timeout(Duration::from_secs(20), stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                return parse_response(&buf)
                    .map(|(r, _)| r)
                    .or_else(|| head_only(&buf));
            }
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => panic!("no response within 20 s"),
        }
    }
}

/// A request under construction.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    addr: SocketAddr,
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    host: Option<String>,
}

impl Req {
    pub(crate) fn new(addr: SocketAddr, method: &str, path: &str) -> Self {
        Self {
            addr,
            method: method.to_owned(),
            path: path.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
            host: Some(format!("127.0.0.1:{}", addr.port())),
        }
    }

    pub(crate) fn bearer(self, token: &str) -> Self {
        self.header("Authorization", &format!("Bearer {token}"))
    }

    pub(crate) fn without(mut self, name: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        if name.eq_ignore_ascii_case("host") {
            self.host = None;
        }
        self
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub(crate) fn json(self, body: &Value) -> Self {
        self.header("Content-Type", "application/json")
            .body(serde_json::to_vec(body).unwrap())
    }

    pub(crate) fn body(mut self, body: Vec<u8>) -> Self {
        self.body = body;
        self
    }

    /// The request's bytes, with `Content-Length` unless `chunked` framing is set by a test.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, self.path);
        if let Some(host) = &self.host {
            head.push_str(&format!("Host: {host}\r\n"));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        let framed = self.headers.iter().any(|(n, _)| {
            n.eq_ignore_ascii_case("content-length") || n.eq_ignore_ascii_case("transfer-encoding")
        });
        if !framed {
            head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        head.push_str("Connection: close\r\n\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }

    pub(crate) async fn send(&self) -> Resp {
        send_raw(self.addr, &self.to_bytes()).await
    }
}

/// Now, minus `age_secs`, as an RFC 3339 timestamp with `Z`.
pub(crate) fn captured(server: &Server, age_secs: f64) -> String {
    let at = server.local.now() - time::Duration::seconds_f64(age_secs);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

pub(crate) fn button(label: &str) -> Value {
    json!({"role": "button", "label": label, "box": [0.1, 0.2, 0.3, 0.1], "confidence": 0.95})
}

/// A demo observation of the given age with the given OCR text and elements.
pub(crate) fn observation(server: &Server, ocr: &str, elements: Vec<Value>) -> Value {
    json!({
        "id": "obs-1",
        "windowId": "win-1",
        "application": "MSGuide Demo",
        "capturedAt": captured(server, 1.0),
        "width": 800,
        "height": 600,
        "ocrText": ocr,
        "elements": elements,
    })
}

pub(crate) fn guidance_body(session: &str, observation: Value) -> Value {
    json!({"sessionId": session, "prompt": "What should I do next?", "consent": true, "observation": observation})
}

/// A valid `width`×`height` RGB PNG, optionally carrying a tEXt chunk.
pub(crate) fn png_bytes(width: u32, height: u32, text: Option<&str>) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        if let Some(text) = text {
            encoder
                .add_text_chunk("Comment".to_owned(), text.to_owned())
                .unwrap();
        }
        let mut writer = encoder.write_header().unwrap();
        let pixels: Vec<u8> = (0..width * height * 3)
            .map(|i| ((i / 3) % 251) as u8)
            .collect();
        writer.write_image_data(&pixels).unwrap();
    }
    out
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A provider scripted by a closure, which records whether its work was dropped unfinished.
pub(crate) struct Scripted {
    pub(crate) behaviour: Box<dyn Fn(ProviderRequest<'_>) -> ProviderFuture<'_> + Send + Sync>,
    pub(crate) calls: AtomicUsize,
    pub(crate) cancelled: Arc<AtomicBool>,
}

impl std::fmt::Debug for Scripted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scripted")
    }
}

/// Sets a flag when dropped unless defused: how a test sees that provider work was cancelled.
pub(crate) struct DropFlag(pub Arc<AtomicBool>, pub bool);

impl Drop for DropFlag {
    fn drop(&mut self) {
        if !self.1 {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

impl Scripted {
    pub(crate) fn new(
        behaviour: impl Fn(ProviderRequest<'_>) -> ProviderFuture<'_> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            behaviour: Box::new(behaviour),
            calls: AtomicUsize::new(0),
            cancelled: Arc::new(AtomicBool::new(false)),
        })
    }

    /// A provider that fails at once with `error`.
    pub(crate) fn failing(error: ProviderError) -> Arc<Self> {
        Self::new(move |_| {
            let error = error.clone();
            Box::pin(async move { Err(error) })
        })
    }

    /// A provider that answers with `make(request)`.
    pub(crate) fn answering(
        make: impl Fn(ProviderRequest<'_>) -> GuidanceResult + Send + Sync + 'static,
    ) -> Arc<Self> {
        Self::new(move |request| {
            let result = make(request);
            Box::pin(async move { Ok(result) })
        })
    }
}

impl GuidanceProvider for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn mode(&self) -> local_core::guide::guidance::model::Mode {
        local_core::guide::guidance::model::Mode::Model
    }

    fn guide<'a>(&'a self, request: ProviderRequest<'a>) -> ProviderFuture<'a> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let flag = DropFlag(Arc::clone(&self.cancelled), false);
        let inner = (self.behaviour)(request);
        Box::pin(async move {
            let mut flag = flag;
            let out = inner.await;
            flag.1 = true;
            out
        })
    }
}

/// A fresh temporary folder.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("msguide-e2e-{name}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Req {
    /// Like [`Req::send`], for spawning.
    pub(crate) async fn send_owned(self) -> Resp {
        self.send().await
    }
}

/// CRC-32 (PNG's) for hand-built chunks.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A valid PNG of exactly `total` bytes: a small image padded with a private ancillary chunk
/// before IEND (which the sanitiser must drop).
pub(crate) fn padded_png(width: u32, height: u32, total: usize, fill: &str) -> Vec<u8> {
    let mut png = png_bytes(width, height, None);
    let iend = png.split_off(png.len() - 12);
    let data_len = total - png.len() - iend.len() - 12;
    let data: Vec<u8> = fill.bytes().cycle().take(data_len).collect();
    let mut chunk = b"prIv".to_vec();
    chunk.extend_from_slice(&data);
    png.extend_from_slice(&u32::try_from(data_len).unwrap().to_be_bytes());
    png.extend_from_slice(&chunk);
    png.extend_from_slice(&crc32(&chunk).to_be_bytes());
    png.extend_from_slice(&iend);
    assert_eq!(png.len(), total);
    png
}

/// A child's stdout as lines, read on a thread so a test can wait for one with a deadline.
pub(crate) fn stdout_lines(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// The launcher's announcement: its first four lines on stdout, within [`WAIT`]; panics
/// with what arrived and the launcher's stderr (`stderr()`, read only then) when they do not.
pub(crate) fn announcement(
    receiver: &std::sync::mpsc::Receiver<String>,
    stderr: impl Fn() -> String,
) -> Vec<String> {
    let mut lines = Vec::new();
    let deadline = std::time::Instant::now() + e2e::platform::WAIT;
    while lines.len() < 4 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match receiver.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(_) => panic!("no announcement on stdout: {lines:?}\nstderr: {}", stderr()),
        }
    }
    lines
}

/// Whether the process runs: gone, or a zombie waiting for a reaper, both count as not.
pub(crate) fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

/// What a binary told a person on stderr is readable: no `Debug` dump of a library error
/// (`{`, `Os {`, `Error(`), and the remedy named.
pub(crate) fn assert_readable(stderr: &str, remedy: &str) {
    for noise in ["{", "Os {", "Error(", "os error"] {
        assert!(
            !stderr.contains(noise),
            "{noise:?} in what a person reads: {stderr}"
        );
    }
    assert!(
        stderr.contains(remedy),
        "the remedy {remedy:?} is not named: {stderr}"
    );
}

/// Whether this process's effective uid is 0 (in its user namespace).
#[cfg(target_os = "linux")]
pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .is_some_and(|euid| euid == "0")
}

/// For a test that mounts: when this process is not root, runs the test `name` (its full path)
/// again in an unprivileged user namespace, which gives it a root and a mount table of its own,
/// asserts that it passed there, and returns true (the caller returns at once); returns false
/// when this process is root and the test should go on. `what` says what the test mounts, for
/// the failure's sentence.
#[cfg(target_os = "linux")]
pub(crate) fn rerun_as_namespace_root(name: &str, what: &str) -> bool {
    if is_root() {
        return false;
    }
    let output = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "--"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && out.contains("1 passed"),
        "{what}: run the suite as root, or allow unprivileged user namespaces (`unshare --user --map-root-user --mount true` must work)\n{out}\n{err}"
    );
    eprintln!("{err}");
    true
}

/// A tmpfs mounted for one test, unmounted (and its mount point removed) however it ends.
#[cfg(target_os = "linux")]
pub(crate) struct Tmpfs(PathBuf);

#[cfg(target_os = "linux")]
impl Tmpfs {
    /// Mounts a tmpfs of `size` (mount(8)'s syntax) at a new directory `dir`; mounting needs
    /// root or CAP_SYS_ADMIN, which the test states when it fails.
    pub(crate) fn mount(dir: &std::path::Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let output = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "could not mount a {size} tmpfs ({}): run the suite as root, or allow unprivileged user namespaces",
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Self(dir.to_path_buf())
    }

    /// Where it is mounted.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.0
    }
}

#[cfg(target_os = "linux")]
impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}
