//! Hostile local clients against the real `msguide-api` binary: 1,000 slowloris connections,
//! a flood of wrong tokens, bodies that stall, and 32 full-size PNG uploads held open, each
//! while two well-behaved clients keep asking for `/health` and guidance, one on a new
//! connection per request (as the launcher's health check), one on a kept-alive connection
//! (as the desktop client). Their latency under each attack is compared with a baseline from
//! the same run, the server's memory and descriptors
//! are sampled throughout, and a marker planted in every hostile byte must reach no log.
//!
//! `E2E_LONG=1` makes every phase ten times longer (docs/security.md has the figures).

use std::{
    fs::File,
    net::SocketAddr,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    task::JoinSet,
};

use super::{
    binary::{binary, listening},
    support::{Req, Resp, TOKEN, b64, button, free_port, png_bytes, read_response, temp_dir},
};

/// Planted in every hostile request's path, header names and values, token and body: no log
/// of the server may contain it.
const MARKER: &str = "HostileMarker7q2Z";
/// Slowloris connections the attacker keeps open, reopening each one the server closes (it
/// keeps at most 256, closing the one that has waited longest when a newcomer arrives).
const SLOWLORIS: usize = 1000;
/// Pause between two header bytes of one slowloris connection.
const SLOWLORIS_GAP: Duration = Duration::from_millis(200);
/// Concurrent wrong-token clients, each sending as fast as it is answered.
const FLOODERS: usize = 16;
/// Authenticated requests whose body stops after its first kilobyte.
const STALLED_BODIES: usize = 64;
/// Concurrent 1600×1600 PNG uploads, each holding back its last byte for [`UPLOAD_HOLD`].
const UPLOADS: usize = 32;
const UPLOAD_HOLD: Duration = Duration::from_millis(250);
const SIDE: u32 = 1600;
/// Longest the well-behaved client waits for one answer before counting it as failed.
const CLIENT_DEADLINE: Duration = Duration::from_secs(15);
/// Pause between two rounds of the well-behaved client: a client, not a load generator.
const CLIENT_PACE: Duration = Duration::from_millis(20);
/// The well-behaved client's p99 under attack stays under the larger of ten times its baseline
/// p99 from the same run and half a second: well inside the launcher's health deadline and
/// under what a person takes for a hang. Measured here (debug build, 2 cores shared with the
/// attackers): baseline p99 1-10 ms; the worst attack, slowloris churning ~6,000 connections a
/// second through the cap, 30-60 ms, and 27-43 ms with two busy loops beside it (it was 165-567
/// ms while each newcomer waited for its evicted predecessor's thread to close it).
const P99_FACTOR: u32 = 10;
const P99_FLOOR: Duration = Duration::from_millis(500);
/// The kept-alive client's floor: on a two-core machine that other tests load, one time slice
/// of a busy sanitiser thread is tens of milliseconds, far below what a person notices.
/// Measured alone: baseline p99 1.3-3 ms, 14-20 ms under slowloris (19-21 ms with two busy
/// loops beside it), 9 ms under PNG uploads.
const KEPT_ALIVE_FLOOR: Duration = Duration::from_millis(50);
/// The server's peak resident memory (VmHWM) over the whole run: the 245 MiB that 32
/// concurrent 1600×1600 PNG sanitisings reach today (issue 21's bench, which will lower it)
/// plus a margin; this run's uploads measure 125-150 MiB.
const RSS_BOUND: u64 = 320 << 20;

/// Every phase is this many times longer with `E2E_LONG=1`.
fn scale() -> u32 {
    if std::env::var_os("E2E_LONG").is_some() {
        10
    } else {
        1
    }
}

/// The real binary, its logs in a private folder (removed, and the process reaped, on drop).
struct Api {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Api {
    async fn start() -> Self {
        let dir = temp_dir("hostile");
        let port = free_port();
        let child = Command::new(binary())
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .env_remove("MSGUIDE_MODE")
            .env_remove("MSGUIDE_GUIDANCE_PROVIDER")
            .env_remove("MSGUIDE_ENABLE_AUDIT")
            .env("MSGUIDE_LOCAL_TOKEN", TOKEN)
            .env("MSGUIDE_DIAGNOSTIC_LOG", dir.join("diagnostic.log"))
            // The most the service ever says: nothing it logs at any level may carry content.
            .env("RUST_LOG", "trace")
            .stdin(Stdio::null())
            .stdout(File::create(dir.join("stdout.log")).unwrap())
            .stderr(File::create(dir.join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let mut api = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
        };
        api.addr = listening(port).await;
        api
    }

    /// A `/proc/<pid>/status` figure in bytes (`VmRSS:`, `VmHWM:`).
    fn status_bytes(&self, field: &str) -> u64 {
        status_kib(self.child.id(), field) * 1024
    }

    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).map_or(0, Iterator::count)
    }

    /// Every log the service wrote: stdout, stderr and the diagnostic log with its backups.
    fn logs(&self) -> Vec<(String, Vec<u8>)> {
        std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|entry| {
                let path = entry.unwrap().path();
                (
                    path.file_name().unwrap().to_string_lossy().into_owned(),
                    std::fs::read(&path).unwrap(),
                )
            })
            .collect()
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `kB` figure of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`); 0 once the process is gone.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// The server's memory and descriptors, sampled every 20 ms while an attack runs.
#[derive(Default)]
struct Peaks {
    rss: AtomicU64,
    fds: AtomicUsize,
}

/// What the well-behaved client saw in one phase.
#[derive(Default)]
struct Latencies {
    health: Vec<Duration>,
    guidance: Vec<Duration>,
    failures: Vec<String>,
}

impl Latencies {
    fn all(&self) -> Vec<Duration> {
        let mut all: Vec<Duration> = self.health.iter().chain(&self.guidance).copied().collect();
        all.sort_unstable();
        all
    }

    fn percentile(&self, p: f64) -> Duration {
        let all = self.all();
        assert!(!all.is_empty(), "the well-behaved client got no answer");
        let at = ((all.len() as f64 * p).ceil() as usize).clamp(1, all.len()) - 1;
        all[at]
    }

    fn served(&self) -> usize {
        self.health.len() + self.guidance.len()
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// An observation from now, of the demo's first stage, optionally carrying a PNG.
fn guidance_body(session: &str, prompt: &str, image: Option<&str>) -> Value {
    let captured = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let mut observation = json!({
        "id": "obs-1",
        "windowId": "win-1",
        "application": "MSGuide Demo",
        "capturedAt": captured,
        "width": SIDE,
        "height": SIDE,
        "ocrText": "Build overview",
        "elements": [button("View logs"), button("Other")],
    });
    if let Some(image) = image {
        observation["imageBase64"] = json!(image);
    }
    json!({"sessionId": session, "prompt": prompt, "consent": true, "observation": observation})
}

/// Sends `req` on a fresh connection; the time to its whole answer, or why there was none.
async fn timed(req: Req) -> (Duration, Result<Resp, String>) {
    let started = Instant::now();
    // A task, so a connection the support client cannot make is a failure here, not a panic.
    let answer = tokio::time::timeout(CLIENT_DEADLINE, tokio::spawn(req.send_owned())).await;
    let answer = match answer {
        Ok(Ok(resp)) => Ok(resp),
        Ok(Err(e)) => Err(format!("no answer: {e}")),
        Err(_) => Err(format!("no answer within {CLIENT_DEADLINE:?}")),
    };
    (started.elapsed(), answer)
}

/// The well-behaved client for `period`: a session, then `/health` and a guidance request
/// (no image) in turn, each on its own connection as the launcher's health check does.
async fn well_behaved(addr: SocketAddr, period: Duration) -> Latencies {
    let mut seen = Latencies::default();
    let started = Instant::now();
    let (took, session) = timed(Req::new(addr, "POST", "/v1/sessions").bearer(TOKEN)).await;
    let session = match session {
        Ok(resp) if resp.status == 200 => resp.json()["sessionId"].as_str().unwrap().to_owned(),
        other => {
            seen.failures.push(format!("session: {other:?}"));
            return seen;
        }
    };
    seen.guidance.push(took);
    while started.elapsed() < period {
        let (took, health) = timed(Req::new(addr, "GET", "/health")).await;
        match health {
            Ok(resp) if resp.status == 200 => seen.health.push(took),
            other => seen.failures.push(format!("/health: {other:?}")),
        }
        let body = guidance_body(&session, "What should I do next?", None);
        let (took, guidance) = timed(
            Req::new(addr, "POST", "/v1/guidance")
                .bearer(TOKEN)
                .json(&body),
        )
        .await;
        match guidance {
            Ok(resp) if resp.status == 200 && resp.json()["status"] == "next_step" => {
                seen.guidance.push(took);
            }
            Ok(resp) => seen
                .failures
                .push(format!("guidance: {} {}", resp.status, resp.text())),
            Err(e) => seen.failures.push(format!("guidance: {e}")),
        }
        tokio::time::sleep(CLIENT_PACE).await;
    }
    seen
}

/// Why a request on the kept-alive connection got no answer there.
#[derive(Debug)]
enum KeptAlive {
    /// The server had closed the connection before the request: a new one answered it.
    Reconnected,
    /// The server closed the connection during the exchange.
    Closed,
    /// A new connection could not be made or written.
    Io(std::io::Error),
    /// Nothing within the client's deadline.
    NoAnswer,
}

impl std::fmt::Display for KeptAlive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Reconnected => {
                f.write_str("had to reconnect: the kept-alive connection was closed")
            }
            Self::Closed => f.write_str("the server closed the kept-alive connection"),
            Self::Io(err) => write!(f, "no connection: {err}"),
            Self::NoAnswer => write!(f, "no answer within {CLIENT_DEADLINE:?}"),
        }
    }
}

/// One request on the kept-alive `stream` (opened again if the server closed it, which counts
/// as a failure): the time to its whole answer.
async fn on_kept_alive(
    stream: &mut Option<TcpStream>,
    addr: SocketAddr,
    req: &Req,
) -> (Duration, Result<Resp, KeptAlive>) {
    let started = Instant::now();
    let bytes = req.to_bytes();
    // The support client asks the server to close; this one keeps its connection.
    let close = b"Connection: close\r\n";
    let at = bytes.windows(close.len()).position(|w| w == close).unwrap();
    let bytes = [&bytes[..at], &bytes[at + close.len()..]].concat();
    let exchange = async {
        let reopened = stream.is_none();
        if reopened {
            *stream = Some(TcpStream::connect(addr).await.map_err(KeptAlive::Io)?);
        }
        let conn = stream.as_mut().unwrap();
        conn.write_all(&bytes).await.map_err(KeptAlive::Io)?;
        let mut raw = Vec::new();
        let mut chunk = [0_u8; 8192];
        loop {
            if let Some((resp, _)) = super::support::parse_response(&raw) {
                return Ok((resp, reopened));
            }
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return Err(KeptAlive::Closed),
                Ok(n) => raw.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let answer = match tokio::time::timeout(CLIENT_DEADLINE, exchange).await {
        Ok(Ok((resp, false))) => Ok(resp),
        Ok(Ok((_, true))) => Err(KeptAlive::Reconnected),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(KeptAlive::NoAnswer),
    };
    // A reconnection leaves a good connection to keep; any other failure leaves none.
    if answer
        .as_ref()
        .is_err_and(|e| !matches!(e, KeptAlive::Reconnected))
    {
        *stream = None;
    }
    (started.elapsed(), answer)
}

/// The well-behaved client on one kept-alive connection, as the desktop client talks to the
/// API: `/health` and guidance in turn for `period`, in `session`.
async fn kept_alive(addr: SocketAddr, period: Duration, session: String) -> Latencies {
    let mut seen = Latencies::default();
    let mut stream = None;
    // The first exchange opens the connection; it is not a kept-alive one yet.
    let _ = on_kept_alive(&mut stream, addr, &Req::new(addr, "GET", "/health")).await;
    let started = Instant::now();
    while started.elapsed() < period {
        let (took, health) =
            on_kept_alive(&mut stream, addr, &Req::new(addr, "GET", "/health")).await;
        match health {
            Ok(resp) if resp.status == 200 => seen.health.push(took),
            Ok(resp) => seen.failures.push(format!("/health: {}", resp.status)),
            Err(e) => seen.failures.push(format!("/health: {e}")),
        }
        let body = guidance_body(&session, "What should I do next?", None);
        let req = Req::new(addr, "POST", "/v1/guidance")
            .bearer(TOKEN)
            .json(&body);
        let (took, guidance) = on_kept_alive(&mut stream, addr, &req).await;
        match guidance {
            Ok(resp) if resp.status == 200 => seen.guidance.push(took),
            Ok(resp) => seen
                .failures
                .push(format!("guidance: {} {}", resp.status, resp.text())),
            Err(e) => seen.failures.push(format!("guidance: {e}")),
        }
        tokio::time::sleep(CLIENT_PACE).await;
    }
    seen
}

/// Both well-behaved clients for `period`, on a thread and runtime of their own: their
/// latencies are then the server's, not those of the attackers' thousand tasks that share this
/// test's runtime on a loaded machine.
async fn well_behaved_clients(
    addr: SocketAddr,
    period: Duration,
    session: String,
) -> (Latencies, Latencies) {
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let both = runtime.block_on(async {
            tokio::join!(
                well_behaved(addr, period),
                kept_alive(addr, period, session)
            )
        });
        let _ = done.send(both);
    });
    result.await.unwrap()
}

/// Counts kept by the attackers of one phase.
#[derive(Default, Debug)]
struct Tally {
    /// Connections opened (slowloris, stalled bodies) or requests sent.
    sent: AtomicUsize,
    /// Answers of the expected kind (401 to a wrong token, 200 to an upload).
    expected: AtomicUsize,
    /// Anything else: a wrong status, a reset of a request that was whole.
    unexpected: AtomicUsize,
    /// Hostile connections the server closed (deadline reached or its place needed).
    closed_by_server: AtomicUsize,
}

fn count(counter: &AtomicUsize) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Waits for `deadline`, or returns early when the server closes `stream` (or answers on it).
async fn hold(stream: &mut TcpStream, deadline: Instant) -> bool {
    let mut buf = [0u8; 1024];
    tokio::select! {
        () = tokio::time::sleep_until(deadline.into()) => false,
        _ = stream.read(&mut buf) => true,
    }
}

/// 1,000 connections that send a never-ending header one byte at a time.
fn slowloris(set: &mut JoinSet<()>, addr: SocketAddr, tally: &Arc<Tally>, deadline: Instant) {
    for i in 0..SLOWLORIS {
        let tally = Arc::clone(tally);
        set.spawn(async move {
            let head = format!(
                "GET /health?{MARKER} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {MARKER}{i}\r\n"
            );
            let endless = format!("X-{MARKER}: {MARKER}\r\n");
            while Instant::now() < deadline {
                let Ok(Ok(mut stream)) =
                    tokio::time::timeout_at(deadline.into(), TcpStream::connect(addr)).await
                else {
                    break;
                };
                count(&tally.sent);
                let mut closed = false;
                for byte in head.bytes().chain(endless.bytes().cycle()) {
                    if stream.write_all(&[byte]).await.is_err()
                        || hold(&mut stream, Instant::now() + SLOWLORIS_GAP).await
                    {
                        closed = true;
                        break;
                    }
                    if Instant::now() >= deadline {
                        break;
                    }
                }
                if closed {
                    count(&tally.closed_by_server);
                }
            }
        });
    }
}

/// Wrong, malformed and foreign-scheme bearers, each on a fresh connection, as fast as answered.
fn flood(set: &mut JoinSet<()>, addr: SocketAddr, tally: &Arc<Tally>, deadline: Instant) {
    for i in 0..FLOODERS {
        let tally = Arc::clone(tally);
        set.spawn(async move {
            let mut n = 0usize;
            while Instant::now() < deadline {
                n += 1;
                let authorization = match n % 3 {
                    0 => format!("Bearer {MARKER}{i}x{n}"),
                    1 => format!("Bearer {MARKER} {n}"),
                    _ => format!("Basic {MARKER}"),
                };
                let body = guidance_body(MARKER, MARKER, None);
                let req = Req::new(addr, "POST", &format!("/v1/guidance?{MARKER}"))
                    .header("Authorization", &authorization)
                    .header(&format!("X-{MARKER}"), MARKER)
                    .json(&body);
                count(&tally.sent);
                match tokio::time::timeout(CLIENT_DEADLINE, req.send()).await {
                    Ok(resp) if resp.status == 401 && resp.header("www-authenticate").is_some() => {
                        count(&tally.expected);
                    }
                    _ => count(&tally.unexpected),
                }
            }
        });
    }
}

/// Authenticated guidance requests whose body stops after its first kilobyte and is held.
fn stalled_bodies(set: &mut JoinSet<()>, addr: SocketAddr, tally: &Arc<Tally>, deadline: Instant) {
    for _ in 0..STALLED_BODIES {
        let tally = Arc::clone(tally);
        set.spawn(async move {
            while Instant::now() < deadline {
                let Ok(mut stream) = TcpStream::connect(addr).await else {
                    break;
                };
                count(&tally.sent);
                let head = format!(
                    "POST /v1/guidance HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
                     Content-Type: application/json\r\nContent-Length: 200000\r\n\r\n{{\"prompt\":\""
                );
                let start: Vec<u8> = head.bytes().chain(MARKER.bytes().cycle().take(1000)).collect();
                if stream.write_all(&start).await.is_err() || hold(&mut stream, deadline).await {
                    // The body deadline (30 s) answered 408: only in the long run.
                    count(&tally.closed_by_server);
                }
            }
        });
    }
}

/// 32 clients, each posting a 1600×1600 PNG and holding back the last byte for a moment, then
/// waiting for its answer, again and again.
fn uploads(
    set: &mut JoinSet<()>,
    addr: SocketAddr,
    tally: &Arc<Tally>,
    deadline: Instant,
    session: &str,
) {
    let png = b64(&png_bytes(SIDE, SIDE, Some(MARKER)));
    let png = Arc::new(png);
    for _ in 0..UPLOADS {
        let (tally, png, session) = (Arc::clone(tally), Arc::clone(&png), session.to_owned());
        set.spawn(async move {
            while Instant::now() < deadline {
                let body = guidance_body(&session, &format!("{MARKER} what next?"), Some(&png));
                let bytes = Req::new(addr, "POST", "/v1/guidance")
                    .bearer(TOKEN)
                    .header(&format!("X-{MARKER}"), MARKER)
                    .json(&body)
                    .to_bytes();
                let Ok(mut stream) = TcpStream::connect(addr).await else {
                    count(&tally.unexpected);
                    break;
                };
                count(&tally.sent);
                let (most, last) = bytes.split_at(bytes.len() - 1);
                let sent = stream.write_all(most).await.is_ok() && {
                    tokio::time::sleep(UPLOAD_HOLD).await;
                    stream.write_all(last).await.is_ok()
                };
                let answer =
                    tokio::time::timeout(CLIENT_DEADLINE, read_response(&mut stream)).await;
                match (sent, answer) {
                    (true, Ok(Some(resp))) if resp.status == 200 => count(&tally.expected),
                    _ => count(&tally.unexpected),
                }
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_well_behaved_client_is_served_through_hostile_clients() {
    raise_fd_limit(SLOWLORIS as u64 + 512);
    let api = Api::start().await;
    let addr = api.addr;
    let scale = scale();
    let idle_rss = api.status_bytes("VmRSS:");
    let peaks = Arc::new(Peaks::default());
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peaks, sampling) = (Arc::clone(&peaks), Arc::clone(&sampling));
        let pid = api.child.id();
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                let rss = status_kib(pid, "VmRSS:") * 1024;
                peaks.rss.fetch_max(rss, Ordering::Relaxed);
                let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count);
                peaks.fds.fetch_max(fds, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    let session = {
        let resp = Req::new(addr, "POST", "/v1/sessions")
            .bearer(TOKEN)
            .send()
            .await;
        resp.json()["sessionId"].as_str().unwrap().to_owned()
    };
    let (baseline, baseline_kept) =
        well_behaved_clients(addr, Duration::from_secs(3) * scale, session.clone()).await;
    assert!(
        baseline.failures.is_empty() && baseline_kept.failures.is_empty(),
        "baseline: {:?} {:?}",
        baseline.failures,
        baseline_kept.failures
    );
    // A new connection is served within half a second (or ten times its baseline on a slow
    // machine); a kept-alive one within ten times its baseline, as if nothing were happening.
    let bound = (baseline.percentile(0.99) * P99_FACTOR).max(P99_FLOOR);
    let kept_bound = (baseline_kept.percentile(0.99) * P99_FACTOR).max(KEPT_ALIVE_FLOOR);
    let mut report = vec![format!(
        "baseline: new connections p50 {:.1} ms, p99 {:.1} ms over {} answers, bound under attack {:.1} ms; kept-alive p50 {:.2} ms, p99 {:.2} ms over {} answers, bound {:.2} ms",
        ms(baseline.percentile(0.5)),
        ms(baseline.percentile(0.99)),
        baseline.served(),
        ms(bound),
        ms(baseline_kept.percentile(0.5)),
        ms(baseline_kept.percentile(0.99)),
        baseline_kept.served(),
        ms(kept_bound),
    )];
    type Attack = fn(&mut JoinSet<()>, SocketAddr, &Arc<Tally>, Instant, &str);
    let attacks: [(&str, Attack); 4] = [
        ("slowloris", |set, addr, tally, deadline, _| {
            slowloris(set, addr, tally, deadline)
        }),
        ("wrong-token flood", |set, addr, tally, deadline, _| {
            flood(set, addr, tally, deadline)
        }),
        ("stalled bodies", |set, addr, tally, deadline, _| {
            stalled_bodies(set, addr, tally, deadline)
        }),
        ("PNG uploads", uploads),
    ];
    let mut failed = Vec::new();
    for (name, attack) in attacks {
        let warm_up = Duration::from_millis(1000);
        let measured = Duration::from_secs(4) * scale;
        let tally = Arc::new(Tally::default());
        let mut set = JoinSet::new();
        let started = Instant::now();
        attack(
            &mut set,
            addr,
            &tally,
            started + warm_up + measured,
            &session,
        );
        tokio::time::sleep(warm_up).await;
        let fds_under_attack = api.open_fds();
        let (seen, kept) = well_behaved_clients(addr, measured, session.clone()).await;
        // The attack lasts as long as the client measures; then its sockets close.
        set.abort_all();
        while set.join_next().await.is_some() {}
        let line = format!(
            "{name}: new connections p50 {:.1} ms, p99 {:.1} ms over {} answers, {} failed; kept-alive p50 {:.2} ms, p99 {:.2} ms over {} answers, {} failed; server fds {fds_under_attack}; {tally:?}",
            ms(seen.percentile(0.5)),
            ms(seen.percentile(0.99)),
            seen.served(),
            seen.failures.len(),
            ms(kept.percentile(0.5)),
            ms(kept.percentile(0.99)),
            kept.served(),
            kept.failures.len(),
        );
        eprintln!("{line}");
        // As many answers as a client gets whose every round trip takes the whole bound: fewer
        // means it was not served, whatever the latency of the few it got.
        let rounds = |bound: Duration| {
            2 * (measured.as_secs_f64() / (2.0 * bound.as_secs_f64() + CLIENT_PACE.as_secs_f64()))
                as usize
        };
        if !seen.failures.is_empty()
            || seen.served() < rounds(bound)
            || seen.percentile(0.99) > bound
            || !kept.failures.is_empty()
            || kept.served() < rounds(kept_bound)
            || kept.percentile(0.99) > kept_bound
        {
            failed.push(format!(
                "{line}: {:?}",
                seen.failures
                    .iter()
                    .chain(&kept.failures)
                    .take(3)
                    .collect::<Vec<_>>()
            ));
        }
        report.push(line);
        match name {
            "wrong-token flood" => {
                assert_eq!(tally.unexpected.load(Ordering::Relaxed), 0, "{tally:?}")
            }
            "PNG uploads" => {
                assert_eq!(tally.unexpected.load(Ordering::Relaxed), 0, "{tally:?}");
                // Every uploader had its image on the wire at once, and some were answered.
                assert!(tally.sent.load(Ordering::Relaxed) >= UPLOADS, "{tally:?}");
                assert!(tally.expected.load(Ordering::Relaxed) > 0, "{tally:?}");
            }
            _ => {}
        }
    }
    sampling.store(false, Ordering::Relaxed);
    sampler.await.unwrap();
    let hwm = api.status_bytes("VmHWM:");
    report.push(format!(
        "server: idle RSS {:.1} MiB, sampled peak RSS {:.1} MiB, VmHWM {:.1} MiB (bound {} MiB), peak fds {}",
        idle_rss as f64 / 1048576.0,
        peaks.rss.load(Ordering::Relaxed) as f64 / 1048576.0,
        hwm as f64 / 1048576.0,
        RSS_BOUND >> 20,
        peaks.fds.load(Ordering::Relaxed),
    ));

    let logs = api.logs();
    let mut markers = 0;
    for (name, text) in &logs {
        for secret in [MARKER.as_bytes(), TOKEN.as_bytes()] {
            let found = text.windows(secret.len()).filter(|w| *w == secret).count();
            assert_eq!(
                found,
                0,
                "{name} holds {} bytes of hostile content",
                secret.len()
            );
            markers += found;
        }
    }
    let diagnostic = logs
        .iter()
        .find(|(name, _)| name == "diagnostic.log")
        .map(|(_, t)| t.len());
    report.push(format!(
        "markers in {} logs: {markers}; diagnostic log {diagnostic:?} bytes",
        logs.len()
    ));
    eprintln!("{}", report.join("\n"));
    assert!(
        failed.is_empty(),
        "the well-behaved client suffered:\n{}",
        failed.join("\n")
    );
    assert!(hwm <= RSS_BOUND, "peak RSS {hwm} over {RSS_BOUND}");
    assert!(
        diagnostic.is_some_and(|n| n > 0),
        "the diagnostic log was not written, so it proves nothing"
    );
}

/// Raises this process's soft descriptor limit to `wanted` (capped by the hard limit); the
/// server inherits it. Fails, naming the remedy, when the hard limit is lower.
fn raise_fd_limit(wanted: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    assert!(
        hard >= wanted,
        "the hard open-file limit ({hard}) is under the {wanted} this test needs; raise it with `ulimit -Hn {wanted}` (as root) or in /etc/security/limits.conf"
    );
    if limit.current.is_some_and(|soft| soft < wanted) {
        setrlimit(
            Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(wanted),
                maximum: limit.maximum,
            },
        )
        .unwrap();
    }
}
