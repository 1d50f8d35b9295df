//! Faults in loops against the real `autogpt-shim`: SIGKILL at a random moment of a large
//! FILE_WRITE (the file is old or new, never torn; a killed write's temporary file is swept by
//! the next one; the audit chain verifies), SIGKILL while audit records are appended under load
//! (the chain continues after the restart), a torn last audit line (the chain restarts as the
//! spec says and `audit verify` names the loss), and a full disk (a 1 MiB tmpfs as the allowed
//! root and the state directory).
//!
//! The kill moments come from a seeded generator; the seed is printed and `E2E_FAULT_SEED`
//! replays it. `E2E_LONG=1` runs 200 write rounds and 100 audit rounds instead of CI's budget.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use e2e::platform::{Platform, Shim, WAIT, error_code, fresh_dir, run_shim, shim_command};
use serde_json::{Value, json};

use super::connector::{audit_records, home_and_root, spawn, spawn_env};
use super::support::{Tmpfs, rerun_as_namespace_root};

/// The long variant's switch (not in CI).
fn long() -> bool {
    std::env::var_os("E2E_LONG").is_some_and(|value| value != "0")
}

/// SplitMix64: a seeded generator so a failing run can be replayed with `E2E_FAULT_SEED`.
struct Rng(u64);

impl Rng {
    fn seeded(test: &str) -> Self {
        let seed = std::env::var("E2E_FAULT_SEED")
            .ok()
            .and_then(|seed| seed.parse().ok())
            .unwrap_or_else(|| {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap();
                now.as_nanos() as u64
            });
        eprintln!("{test}: E2E_FAULT_SEED={seed}");
        Self(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A duration uniformly in `[0, max)`.
    fn below(&mut self, max: Duration) -> Duration {
        let nanos = u64::try_from(max.as_nanos()).unwrap().max(1);
        Duration::from_nanos(self.next() % nanos)
    }
}

/// The names of [`Jail::write_atomic`]'s temporary files in `dir`.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".jail-") && name.ends_with(".tmp"))
        .collect()
}

/// `audit <command>` on the home's chain: its exit code and output.
fn audit(home: &Path, command: &str) -> (Option<i32>, String) {
    let (code, out, err) = run_shim(home, &["audit", command]);
    (code, format!("{out}{err}"))
}

async fn kill(shim: &mut Shim) {
    shim.signal("KILL");
    let (status, _) = shim.exit().await;
    assert_eq!(status.code(), None, "killed by a signal");
}

/// Rounds of a 2 MiB base64 FILE_WRITE killed at a random moment (a third anywhere between its
/// send and a quarter past a whole write's duration, the rest within a millisecond of its
/// temporary file appearing): the file is always the complete old or the complete new content,
/// the next start's first write into the directory sweeps the temporary file a kill left, and
/// the audit chain of all the killed processes verifies.
#[tokio::test]
async fn sigkill_during_a_large_write_leaves_the_old_or_the_new_file_and_no_temporary() {
    const SIZE: usize = 2 * 1024 * 1024;
    let rounds = if long() { 200 } else { 50 };
    let mut rng = Rng::seeded("sigkill_during_a_large_write");
    let (home, root) = home_and_root("shim-kill-write");
    let target = root.join("data.bin");
    let contents = [vec![b'a'; SIZE], vec![b'b'; SIZE]];
    let encoded = [STANDARD.encode(&contents[0]), STANDARD.encode(&contents[1])];
    let write =
        |which: usize| json!({"path": "data.bin", "content": encoded[which], "encoding": "base64"});
    let platform = Platform::bind().await;

    // One whole write, timed, so the kills land before, during and after the bytes go down:
    // `full` from the send to the reply, `span` the part of it a temporary file exists.
    let (full, span) = {
        let mut shim = spawn(&home, &platform, &root, &[]);
        let (mut conn, _) = platform.session(&["files"], |_| {}).await;
        let started = Instant::now();
        conn.request("FILE_WRITE", "timed", write(0)).await;
        while temporaries(&root).is_empty() && started.elapsed() < WAIT {
            tokio::task::yield_now().await;
        }
        let appeared = Instant::now();
        let ack = conn.recv().await;
        assert_eq!(ack["type"], "ACK", "{ack}");
        kill(&mut shim).await;
        (started.elapsed(), appeared.elapsed())
    };
    let mut current = 0;
    let (mut saw_old, mut saw_new, mut left_by_kills, mut mid_write) = (0, 0, 0, 0);
    let started = Instant::now();
    for round in 0..rounds {
        let mut shim = spawn(&home, &platform, &root, &[]);
        let (mut conn, _) = platform.session(&["files"], |_| {}).await;
        // The previous kill may have left a temporary file: this write into the same
        // directory must sweep it.
        let ack = conn
            .call(
                "FILE_WRITE",
                "marker",
                json!({"path": "marker.txt", "content": "m"}),
            )
            .await;
        assert_eq!(ack["type"], "ACK", "{ack}");
        let left = temporaries(&root);
        assert!(
            left.is_empty(),
            "round {round}: the next write left {left:?}"
        );
        let new = 1 - current;
        conn.request("FILE_WRITE", "big", write(new)).await;
        // A third of the kills land anywhere from the send to past the reply; the others while
        // the bytes go down, the short window where a temporary file exists.
        if rng.next().is_multiple_of(3) {
            tokio::time::sleep(rng.below(full.mul_f64(1.25))).await;
        } else {
            let deadline = Instant::now() + full * 2;
            while temporaries(&root).is_empty() && Instant::now() < deadline {
                tokio::task::yield_now().await;
            }
            // Within a millisecond of its appearance: the file lives only a few (an fsync).
            tokio::time::sleep(rng.below(Duration::from_millis(1))).await;
        }
        kill(&mut shim).await;
        let after = std::fs::read(&target).unwrap();
        if after == contents[new] {
            saw_new += 1;
            current = new;
        } else if after == contents[current] {
            saw_old += 1;
        } else {
            panic!("round {round}: a torn file of {} bytes", after.len());
        }
        let left = temporaries(&root).len();
        left_by_kills += left;
        mid_write += usize::from(left > 0);
    }
    let elapsed = started.elapsed();

    // The last kill's temporary file goes with the next start's first write too.
    let mut shim = spawn(&home, &platform, &root, &[]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    let ack = conn
        .call(
            "FILE_WRITE",
            "marker",
            json!({"path": "marker.txt", "content": "m"}),
        )
        .await;
    assert_eq!(ack["type"], "ACK", "{ack}");
    assert_eq!(temporaries(&root), Vec::<String>::new());
    kill(&mut shim).await;
    let (code, out) = audit(&home, "verify");
    assert_eq!(code, Some(0), "{out}");
    eprintln!(
        "{rounds} rounds in {elapsed:?} ({:?} a round; a whole write {full:?}, {span:?} of it with a temporary file): {saw_old} old, {saw_new} new, 0 torn; {mid_write} kills mid-write left {left_by_kills} temporary files, all swept by the next write",
        elapsed / rounds
    );
    // Both outcomes are legal; what matters is that nothing in between ever shows.
    assert_eq!(saw_old + saw_new, usize::try_from(rounds).unwrap());
    assert!(mid_write > 0, "no kill landed while the bytes were written");
    std::fs::remove_dir_all(&home).unwrap();
}

/// The last record of the audit log, parsed.
fn last_record(home: &Path) -> Option<Value> {
    let log = home.join(".local/state/autogpt-local-executor/audit.log");
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .last()
        .map(|line| serde_json::from_str(line).unwrap())
}

/// Rounds of a session flooded with FILE_STATs (four run, the rest are refused at once, and
/// every one is audited) killed at a random moment: each restart's SHIM_START continues the
/// chain (`seq` + 1, `prev_hmac` the last `hmac`), the line count equals the last `seq`, and
/// `audit verify-all` passes after every kill.
#[tokio::test]
async fn sigkill_during_audit_appends_under_load_keeps_one_verifiable_chain() {
    let rounds = if long() { 100 } else { 20 };
    let mut rng = Rng::seeded("sigkill_during_audit_appends");
    let (home, root) = home_and_root("shim-kill-audit");
    std::fs::write(root.join("a.txt"), "a").unwrap();
    let platform = Platform::bind().await;
    let stat = json!({"path": "a.txt"});
    for round in 0..rounds {
        let before = last_record(&home);
        let mut shim = spawn(&home, &platform, &root, &[]);
        let (mut conn, _) = platform.session(&["files"], |_| {}).await;
        let records = audit_records(&shim);
        let start = records
            .iter()
            .rev()
            .find(|r| r["op"] == "SHIM_START")
            .unwrap();
        if let Some(before) = before {
            assert_eq!(
                start["seq"],
                before["seq"].as_u64().unwrap() + 1,
                "round {round}"
            );
            assert_eq!(start["prev_hmac"], before["hmac"], "round {round}");
        }
        let deadline = Instant::now() + rng.below(Duration::from_millis(150));
        let mut sent = 0;
        while Instant::now() < deadline {
            for _ in 0..8 {
                conn.request("FILE_STAT", &format!("s{sent}"), stat.clone())
                    .await;
                sent += 1;
            }
            for _ in 0..8 {
                conn.recv().await;
            }
        }
        for _ in 0..64 {
            conn.request("FILE_STAT", &format!("s{sent}"), stat.clone())
                .await;
            sent += 1;
        }
        tokio::time::sleep(rng.below(Duration::from_millis(5))).await;
        kill(&mut shim).await;
        let (code, out) = audit(&home, "verify-all");
        assert_eq!(code, Some(0), "round {round}: {out}");
    }
    let log = home.join(".local/state/autogpt-local-executor/audit.log");
    let lines = std::fs::read_to_string(&log).unwrap().lines().count();
    let last = last_record(&home).unwrap();
    assert_eq!(last["seq"], lines, "no record dropped from the count");
    eprintln!("{rounds} kills under load: {lines} records, one chain, verify-all clean");
    std::fs::remove_dir_all(&home).unwrap();
}

/// A last audit line torn by hand (the file cut inside it, as a crash mid-append on a
/// filesystem without atomic appends would leave it): the next start restarts the chain at 1
/// after it, as the spec's tail recovery says, on a line of its own, and `audit verify` reports
/// the torn record (`parse_error`) instead of passing over it.
#[tokio::test]
async fn a_torn_last_audit_line_restarts_the_chain_and_verify_reports_it() {
    let (home, root) = home_and_root("shim-torn-audit");
    let platform = Platform::bind().await;
    let mut shim = spawn(&home, &platform, &root, &[]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    let stat = conn.call("FILE_STAT", "s", json!({"path": "."})).await;
    assert_eq!(stat["type"], "FILE_STAT_RESPONSE", "{stat}");
    kill(&mut shim).await;
    let log = shim.audit_log();
    let text = std::fs::read_to_string(&log).unwrap();
    let complete = text.lines().count();
    let last_len = text.lines().last().unwrap().len();
    // Cut inside the last record: its newline and the second half of it are gone.
    let cut = text.len() - 1 - last_len / 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(cut as u64)
        .unwrap();
    let (code, out) = audit(&home, "verify");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("truncated"), "{out}");

    let mut shim = spawn(&home, &platform, &root, &[]);
    let (_conn, _) = platform.session(&["files"], |_| {}).await;
    let fragment = text[..cut].lines().last().unwrap().to_owned();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The fragment keeps a line of its own; the chain restarts after it.
    assert_eq!(lines[complete - 1], fragment);
    let restarted: Value = serde_json::from_str(lines[complete]).unwrap();
    assert_eq!(restarted["op"], "SHIM_START");
    assert_eq!(restarted["seq"], 1);
    assert_eq!(restarted["prev_hmac"], Value::Null);
    kill(&mut shim).await;
    let (code, out) = audit(&home, "verify");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("parse_error"), "{out}");
    std::fs::remove_dir_all(&home).unwrap();
}

/// Fills what is left of `disk` with one file; returns its path.
fn fill(disk: &Tmpfs) -> PathBuf {
    let filler = disk.path().join("filler");
    let mut file = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0_u8; 4096];
    while file.write_all(&chunk).is_ok() {}
    // Whatever a page holds less than a whole chunk.
    while file.write_all(&[0]).is_ok() {}
    filler
}

/// A 1 MiB tmpfs as the allowed root and the state directory (audit log and key): a write
/// larger than the space left fails with INTERNAL_ERROR and a message saying the disk is full,
/// the file it would have replaced keeps its content, no temporary file stays, and the failures
/// are audited in a chain that verifies. With the disk full to the last byte and a fresh audit
/// file, `start` refuses to run unaudited: exit 78 naming the audit log, before any dial.
#[tokio::test]
async fn a_full_disk_fails_writes_cleanly_and_start_refuses_to_run_unaudited() {
    if rerun_as_namespace_root(
        "suite::connector_faults::a_full_disk_fails_writes_cleanly_and_start_refuses_to_run_unaudited",
        "the disk-full test mounts a 1 MiB tmpfs",
    ) {
        return;
    }
    let home = fresh_dir("shim-disk-full");
    let disk = Tmpfs::mount(&home.join("disk"), "1m");
    let root = disk.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let state = disk.path().join("state");
    let state_env = state.to_string_lossy().into_owned();
    let env = [("XDG_STATE_HOME", state_env.as_str())];
    let log = state.join("autogpt-local-executor/audit.log");
    let platform = Platform::bind().await;
    let mut shim = spawn_env(&home, &platform, &root, &[], &env);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;

    let ack = conn
        .call(
            "FILE_WRITE",
            "keep",
            json!({"path": "keep.txt", "content": "kept"}),
        )
        .await;
    assert_eq!(ack["type"], "ACK", "{ack}");
    let big = STANDARD.encode(vec![b'x'; 2 * 1024 * 1024]);
    for (id, path) in [("new", "big.bin"), ("over", "keep.txt")] {
        let payload = json!({"path": path, "content": big, "encoding": "base64"});
        let reply = conn.call("FILE_WRITE", id, payload).await;
        assert_eq!(error_code(&reply), "INTERNAL_ERROR", "{reply}");
        let message = reply["payload"]["message"].as_str().unwrap();
        assert!(
            message.contains("storage") || message.contains("space"),
            "{message}"
        );
        assert_eq!(temporaries(&root), Vec::<String>::new());
    }
    assert!(!root.join("big.bin").exists());
    assert_eq!(std::fs::read(root.join("keep.txt")).unwrap(), b"kept");
    // The disk full while the session runs: a normal operation's record that cannot be
    // written is logged (WARN, no path) and its reply still goes out, the spec's policy for
    // normal operations (section 13); a record cut short is rolled back, so once space
    // returns the chain goes on and verifies.
    let filler = fill(&disk);
    for i in 0..30 {
        let reply = conn
            .call(
                "FILE_STAT",
                &format!("full{i}"),
                json!({"path": "keep.txt"}),
            )
            .await;
        assert_eq!(reply["type"], "FILE_STAT_RESPONSE", "{reply}");
    }
    std::fs::remove_file(&filler).unwrap();
    let reply = conn
        .call("FILE_STAT", "after", json!({"path": "keep.txt"}))
        .await;
    assert_eq!(reply["type"], "FILE_STAT_RESPONSE", "{reply}");
    kill(&mut shim).await;
    let stderr = shim.stderr();
    let unaudited = stderr
        .lines()
        .filter(|line| line.contains("WARN") && line.contains("could not write an audit record"))
        .count();
    assert!(unaudited > 0, "{stderr}");
    assert!(!stderr.contains("keep.txt"), "{stderr}");
    let verify = shim_command(&home, &["audit", "verify"], &env)
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(0), "{verify:?}");
    let records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let failed: Vec<&Value> = records
        .iter()
        .filter(|r| r["op"] == "FILE_WRITE" && r["result"]["ok"] == false)
        .collect();
    assert_eq!(failed.len(), 2, "{records:?}");
    let stats = records.iter().filter(|r| r["op"] == "FILE_STAT").count();
    assert_eq!(stats + unaudited, 31, "{records:?}");
    assert_eq!(records.last().unwrap()["request_id"], "after");
    eprintln!(
        "disk full: 2 writes refused, {unaudited} of 31 FILE_STAT records not written (WARN), chain clean"
    );

    // A fresh audit file on a full disk: its first record, SHIM_START, cannot be written.
    let rotate = shim_command(&home, &["audit", "rotate"], &env)
        .output()
        .unwrap();
    assert_eq!(rotate.status.code(), Some(0), "{rotate:?}");
    let filler = fill(&disk);
    let mut refused = spawn_env(&home, &platform, &root, &[], &env);
    let (status, stderr) = refused.exit().await;
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("cannot write to the audit log"), "{stderr}");
    assert!(!platform.dials_within(Duration::from_millis(200)).await);
    std::fs::remove_file(filler).unwrap();
    drop(disk);
    std::fs::remove_dir_all(&home).unwrap();
}
