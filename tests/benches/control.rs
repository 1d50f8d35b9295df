//! Control-mode figures through the test platform on loopback with the real binary: the time
//! from sending ACTIVATE_SESSION to the child's HELLO on its own data connection (median and
//! p90 of 20), and the private memory one live child costs (RssAnon with 8 live children minus
//! RssAnon with none, over 8; PSS and VmRSS beside). Run with `cargo bench -p e2e --bench control` after
//! `cargo build --release --workspace --bins` (it measures the binary next to it).

// Bench support: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::ExitCode;
use std::time::{Duration, Instant};

use e2e::memory::{Memory, mib};
use e2e::platform::{Platform, Shim, TOKEN, fresh_dir};
use serde_json::json;

const ROUNDS: usize = 20;
const CHILDREN: usize = 8;

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("control bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (latencies, zero, eight) = runtime.block_on(run());
    let median = percentile(&latencies, 50);
    let p90 = percentile(&latencies, 90);
    let per_child = eight.rss_anon_kib.saturating_sub(zero.rss_anon_kib) as f64 / CHILDREN as f64;
    println!();
    println!("control bench (loopback, real autogpt-shim binary)");
    println!(
        "  ACTIVATE_SESSION -> child HELLO   median {median:>8.2} ms   p90 {p90:>8.2} ms   ({ROUNDS} rounds)"
    );
    println!(
        "  RssAnon with 0 children {:>6.1} MiB, with {CHILDREN} {:>6.1} MiB: {per_child:>6.1} KiB per live child",
        mib(zero.rss_anon_kib),
        mib(eight.rss_anon_kib),
    );
    println!(
        "  with 0 children {}; with {CHILDREN} {}",
        zero.describe(),
        eight.describe()
    );
    ExitCode::SUCCESS
}

fn percentile(samples: &[f64], pct: usize) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let index = (sorted.len() * pct / 100).min(sorted.len() - 1);
    sorted[index]
}

async fn run() -> (Vec<f64>, Memory, Memory) {
    let home = fresh_dir("control-bench");
    for i in 0..CHILDREN {
        std::fs::create_dir_all(home.join(format!("chat{i}"))).unwrap();
    }
    let platform = Platform::bind().await;
    let args = platform.control_args("WARNING", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let shim = Shim::spawn(&home, &args, &[("AUTOGPT_SHIM_TOKEN", TOKEN)]);
    let (mut control, _) = platform.control(|_| {}).await;

    let mut latencies = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let session = format!("bench-{round}");
        control.attach(&home, &session, "chat0").await;
        let started = Instant::now();
        let reply = control
            .call(
                "ACTIVATE_SESSION",
                &format!("act-{round}"),
                json!({"session_id": session, "revision": 1}),
            )
            .await;
        assert_eq!(reply["type"], "SESSION_ACTIVATED", "{reply}");
        let (conn, _) = platform.accept(None).await;
        let mut conn = conn.unwrap();
        let hello = conn.recv().await;
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(hello["type"], "HELLO");
        control
            .call(
                "DETACH_SESSION",
                &format!("detach-{round}"),
                json!({"session_id": session}),
            )
            .await;
    }

    // Let the detached children's sockets and tasks wind down before the baseline.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let zero = Memory::of(shim.pid()).unwrap();
    let mut children = Vec::new();
    for i in 0..CHILDREN {
        let session = format!("live-{i}");
        control.attach(&home, &session, &format!("chat{i}")).await;
        let reply = control
            .call(
                "ACTIVATE_SESSION",
                &format!("live-act-{i}"),
                json!({"session_id": session, "revision": 1}),
            )
            .await;
        assert_eq!(reply["type"], "SESSION_ACTIVATED", "{reply}");
        let (mut child, _) = platform.child(&session, &["files"]).await;
        let stat = child.call("FILE_STAT", "stat", json!({"path": "."})).await;
        assert_eq!(stat["type"], "FILE_STAT_RESPONSE", "{stat}");
        children.push(child);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let eight = Memory::of(shim.pid()).unwrap();
    // The shim goes first: it writes into its home until it is killed.
    drop(children);
    drop(shim);
    let _ = std::fs::remove_dir_all(&home);
    (latencies, zero, eight)
}
