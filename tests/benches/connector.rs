//! Connector figures through the test platform on loopback, each beside a baseline measured
//! in the same run: FILE_READ of 8 MiB, EXECUTE_COMMAND `["true"]`, FILE_STAT with 4 in flight
//! (against PING, and against the disk's ceiling of 4 records per fdatasync, with the context
//! switches and CPU the shim spent on each), idle RSS after HELLO, and start-up to HELLO. Run
//! with `cargo bench -p e2e --bench connector` after `cargo build --release --workspace --bins`
//! (it measures the binary next to it).

// Bench support: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    path::Path,
    process::{Command, ExitCode},
    time::{Duration, Instant},
};

use e2e::platform::{Conn, Platform, Shim, TOKEN, fresh_dir};
use serde_json::json;

const READ_BYTES: usize = 8 * 1024 * 1024;
const READ_ROUNDS: usize = 10;
const EXEC_ROUNDS: usize = 50;
const STAT_TOTAL: usize = 20_000;
const IN_FLIGHT: usize = 4;
const STARTS: usize = 10;

struct Figure {
    name: &'static str,
    value: f64,
    unit: &'static str,
    target: &'static str,
    met: bool,
    baseline: f64,
    baseline_name: &'static str,
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("connector bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (figures, stat_cost) = runtime.block_on(run());
    println!();
    println!("connector bench (loopback, real autogpt-shim binary)");
    for f in &figures {
        println!(
            "  {:<34} {:>10.2} {:<6} target {:<10} {}  | baseline {:<28} {:>10.2}  ratio {:.3}",
            f.name,
            f.value,
            f.unit,
            f.target,
            if f.met { "met " } else { "MISS" },
            f.baseline_name,
            f.baseline,
            f.value / f.baseline,
        );
    }
    println!(
        "  FILE_STAT cost inside the shim: {:.2} context switches and {:.0} µs of CPU a request",
        stat_cost.switches, stat_cost.cpu_us
    );
    ExitCode::SUCCESS
}

/// What the shim process spent on each request of a phase.
struct Cost {
    switches: f64,
    cpu_us: f64,
}

/// Context switches (voluntary and not, over all threads) and CPU seconds of `pid` so far.
fn process_load(pid: u32) -> (u64, f64) {
    let mut switches = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let status =
            std::fs::read_to_string(task.unwrap().path().join("status")).unwrap_or_default();
        switches += status
            .lines()
            .filter_map(|line| {
                line.strip_prefix("voluntary_ctxt_switches:")
                    .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            })
            .filter_map(|count| count.trim().parse::<u64>().ok())
            .sum::<u64>();
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name: utime and stime are the 12th and 13th, in clock ticks
    // (100 a second on Linux).
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    (switches, ticks / 100.0)
}

fn start_shim(home: &Path, root: &Path, platform: &Platform) -> Shim {
    let args = platform.start_args(root, "WARNING", &["--enable-shell"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Shim::spawn(
        home,
        &args,
        &[
            ("AUTOGPT_SHIM_TOKEN", TOKEN),
            // The bench issues far more than the default 60 commands a minute.
            ("AUTOGPT_SHIM_MAX_COMMANDS_PER_MINUTE", "100000"),
        ],
    )
}

async fn run() -> (Vec<Figure>, Cost) {
    let home = fresh_dir("connector-bench");
    let root = home.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let data: Vec<u8> = (0..READ_BYTES).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(root.join("big.bin"), &data).unwrap();

    // Start-up to HELLO, against spawning `true` to its exit.
    let mut to_hello = Vec::new();
    let mut spawn_true = Vec::new();
    for _ in 0..STARTS {
        let platform = Platform::bind().await;
        let started = Instant::now();
        let shim = start_shim(&home, &root, &platform);
        let (_conn, _hello) = platform.session(&["files", "shell"], |_| {}).await;
        to_hello.push(started.elapsed());
        drop(shim);
        let started = Instant::now();
        Command::new("true").status().unwrap();
        spawn_true.push(started.elapsed());
    }

    let platform = Platform::bind().await;
    let shim = start_shim(&home, &root, &platform);
    let (mut conn, _) = platform.session(&["files", "shell"], |_| {}).await;
    // Idle RSS once the handshake is done and the loop is waiting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss = shim.rss_bytes() as f64 / 1e6;
    let sleep_rss = {
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        let _ = child.kill();
        let _ = child.wait();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0)
            * 1024.0
            / 1e6
    };

    // FILE_READ of 8 MiB (base64: the text budget is below 8 MiB), against std::fs::read.
    let mut read_best = f64::MAX;
    for round in 0..READ_ROUNDS {
        let started = Instant::now();
        let reply = conn
            .call(
                "FILE_READ",
                &format!("read-{round}"),
                json!({"path": "big.bin", "encoding": "base64"}),
            )
            .await;
        let elapsed = started.elapsed().as_secs_f64();
        assert_eq!(reply["payload"]["size_bytes"], READ_BYTES, "{reply}");
        read_best = read_best.min(elapsed);
    }
    let mut fs_best = f64::MAX;
    for _ in 0..READ_ROUNDS {
        let started = Instant::now();
        let bytes = std::fs::read(root.join("big.bin")).unwrap();
        assert_eq!(bytes.len(), READ_BYTES);
        fs_best = fs_best.min(started.elapsed().as_secs_f64());
    }
    let read_mbs = READ_BYTES as f64 / 1e6 / read_best;
    let fs_mbs = READ_BYTES as f64 / 1e6 / fs_best;

    // EXECUTE_COMMAND argv ["true"], median round trip, against spawning `true` here.
    let mut exec = Vec::new();
    for round in 0..EXEC_ROUNDS {
        let started = Instant::now();
        let reply = conn
            .call(
                "EXECUTE_COMMAND",
                &format!("exec-{round}"),
                json!({"argv": ["true"]}),
            )
            .await;
        exec.push(started.elapsed());
        assert_eq!(reply["type"], "COMMAND_RESULT", "{reply}");
    }
    let mut direct = Vec::new();
    for _ in 0..EXEC_ROUNDS {
        let started = Instant::now();
        Command::new("true").status().unwrap();
        direct.push(started.elapsed());
    }

    // FILE_STAT with 4 in flight, against PING/PONG with 4 in flight (transport only).
    let (switches, cpu) = process_load(shim.pid());
    let stat_rate = pipelined(&mut conn, "FILE_STAT", json!({"path": "big.bin"})).await;
    let (switches_after, cpu_after) = process_load(shim.pid());
    let stat_cost = Cost {
        switches: (switches_after - switches) as f64 / STAT_TOTAL as f64,
        cpu_us: (cpu_after - cpu) * 1e6 / STAT_TOTAL as f64,
    };
    let ping_rate = pipelined(&mut conn, "PING", json!({})).await;
    // Every FILE_STAT's audit record is durable before its reply, and at most IN_FLIGHT
    // records can share one fdatasync: this disk's ceiling for the figure.
    let sync_ceiling = IN_FLIGHT as f64 * fdatasync_rate(&home);

    conn.close(1000).await;
    drop(shim);
    let _ = std::fs::remove_dir_all(&home);

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let figures = vec![
        Figure {
            name: "FILE_READ 8 MiB (base64)",
            value: read_mbs,
            unit: "MB/s",
            target: ">= 200",
            met: read_mbs >= 200.0,
            baseline: fs_mbs,
            baseline_name: "std::fs::read MB/s",
        },
        Figure {
            name: "EXECUTE_COMMAND [true] median",
            value: ms(median(&mut exec)),
            unit: "ms",
            target: "<= 5",
            met: ms(median(&mut exec)) <= 5.0,
            baseline: ms(median(&mut direct)),
            baseline_name: "spawn `true` median ms",
        },
        Figure {
            name: "FILE_STAT, 4 in flight",
            value: stat_rate,
            unit: "/s",
            target: ">= 5000",
            met: stat_rate >= 5000.0,
            baseline: ping_rate,
            baseline_name: "PING, 4 in flight /s",
        },
        Figure {
            name: "FILE_STAT, same run, vs fsync",
            value: stat_rate,
            unit: "/s",
            target: ">= 5000",
            met: stat_rate >= 5000.0,
            baseline: sync_ceiling,
            baseline_name: "4 x fdatasync'd appends /s",
        },
        Figure {
            name: "idle RSS after HELLO",
            value: rss,
            unit: "MB",
            target: "<= 15",
            met: rss <= 15.0,
            baseline: sleep_rss,
            baseline_name: "RSS of sleep(1) MB",
        },
        Figure {
            name: "start to HELLO median",
            value: ms(median(&mut to_hello)),
            unit: "ms",
            target: "<= 50",
            met: ms(median(&mut to_hello)) <= 50.0,
            baseline: ms(median(&mut spawn_true)),
            baseline_name: "spawn+exit `true` median ms",
        },
    ];
    (figures, stat_cost)
}

/// fdatasync'd 300-byte appends per second in `dir` (the audit log's file system).
fn fdatasync_rate(dir: &Path) -> f64 {
    use std::io::Write;
    const ROUNDS: usize = 2000;
    let path = dir.join("fdatasync-probe");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    let record = [b'x'; 300];
    let started = Instant::now();
    for _ in 0..ROUNDS {
        file.write_all(&record).unwrap();
        file.sync_data().unwrap();
    }
    let rate = ROUNDS as f64 / started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&path);
    rate
}

/// Requests per second with `IN_FLIGHT` outstanding at all times.
async fn pipelined(conn: &mut Conn, kind: &str, payload: serde_json::Value) -> f64 {
    let started = Instant::now();
    let mut sent = 0;
    let mut done = 0;
    while sent < IN_FLIGHT {
        conn.request(kind, &format!("{kind}-{sent}"), payload.clone())
            .await;
        sent += 1;
    }
    while done < STAT_TOTAL {
        let reply = conn.recv().await;
        assert_ne!(reply["type"], "ERROR", "{reply}");
        done += 1;
        if sent < STAT_TOTAL {
            conn.request(kind, &format!("{kind}-{sent}"), payload.clone())
                .await;
            sent += 1;
        }
    }
    STAT_TOTAL as f64 / started.elapsed().as_secs_f64()
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}
