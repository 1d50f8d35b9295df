//! The `autogpt-shim` subcommands on a real home: `audit verify` against a tampered, a
//! deleted and a truncated record, `audit show/export/rotate/verify-all`, `status` before,
//! during and after a daemon, `doctor`, and `install`/`uninstall` of the systemd user unit.

use e2e::platform::{Platform, run_shim};
use serde_json::json;

use super::connector::{home_and_root, spawn};

/// A home whose audit log holds a short session: SHIM_START, WS_CONNECTED, three FILE_*,
/// WS_DISCONNECTED, SHIM_STOP.
async fn home_with_a_session() -> (std::path::PathBuf, std::path::PathBuf) {
    let (home, root) = home_and_root("shim-cli");
    let platform = Platform::bind().await;
    let mut shim = spawn(&home, &platform, &root, &[]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    for (i, name) in ["a.txt", "b.txt", "c.txt"].iter().enumerate() {
        let ack = conn
            .call(
                "FILE_WRITE",
                &format!("w{i}"),
                json!({"path": name, "content": "x"}),
            )
            .await;
        assert_eq!(ack["type"], "ACK");
    }
    shim.signal("TERM");
    let (status, stderr) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let log = shim.audit_log();
    (home, log)
}

#[tokio::test]
async fn audit_verify_detects_a_tampered_a_deleted_and_a_truncated_record() {
    let (home, log) = home_with_a_session().await;
    let original = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    assert!(lines.len() >= 7, "{original}");
    let (code, out, _) = run_shim(&home, &["audit", "verify"]);
    assert_eq!(code, Some(0), "{out}");

    // One character of a record's details changed.
    let tampered = original.replacen("\"b.txt\"", "\"B.txt\"", 1);
    assert_ne!(tampered, original);
    std::fs::write(&log, &tampered).unwrap();
    let (code, out, _) = run_shim(&home, &["audit", "verify"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("hmac_mismatch"), "{out}");

    // A record in the middle deleted.
    let mut deleted: Vec<&str> = lines.clone();
    deleted.remove(3);
    std::fs::write(&log, deleted.join("\n") + "\n").unwrap();
    let (code, out, _) = run_shim(&home, &["audit", "verify"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("sequence_gap") || out.contains("chain_break"),
        "{out}"
    );

    // The last record cut short.
    std::fs::write(&log, &original[..original.len() - 10]).unwrap();
    let (code, out, _) = run_shim(&home, &["audit", "verify"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("truncated"), "{out}");

    std::fs::write(&log, &original).unwrap();
    let (code, out, _) = run_shim(&home, &["audit", "show", "3"]);
    assert_eq!(code, Some(0), "{out}");
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["seq"], 3);
    let (code, _, _) = run_shim(&home, &["audit", "show", "999"]);
    assert_eq!(code, Some(1));

    let zip = home.join("export.zip");
    let (code, out, _) = run_shim(
        &home,
        &["audit", "export", "--output", &zip.to_string_lossy()],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(std::fs::read(&zip).unwrap().starts_with(b"PK"));

    let (code, out, _) = run_shim(&home, &["audit", "rotate"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(!log.exists() || std::fs::metadata(&log).unwrap().len() == 0);
    let (code, out, _) = run_shim(&home, &["audit", "verify-all"]);
    assert_eq!(code, Some(0), "{out}");
    // Nothing is old enough to prune.
    let (code, out, _) = run_shim(&home, &["audit", "prune", "--older-than", "1d"]);
    assert_eq!(code, Some(0), "{out}");
    let (code, _, _) = run_shim(&home, &["audit", "prune", "--older-than", "soon"]);
    assert_eq!(code, Some(2));
}

#[tokio::test]
async fn status_tells_a_running_daemon_from_a_stopped_one() {
    let (home, root) = home_and_root("shim-status");
    let (code, out, _) = run_shim(&home, &["status"]);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("no daemon has run"), "{out}");

    let platform = Platform::bind().await;
    let mut shim = spawn(&home, &platform, &root, &[]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    assert_eq!(conn.call("PING", "p", json!({})).await["type"], "PONG");
    let (code, out, _) = run_shim(&home, &["status"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(&format!("running (pid {})", shim.pid())),
        "{out}"
    );
    assert!(out.contains("connected"), "{out}");
    assert!(!out.contains(e2e::platform::TOKEN));

    shim.signal("TERM");
    shim.exit().await;
    let (code, out, _) = run_shim(&home, &["status"]);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("stopped"), "{out}");
}

#[test]
fn doctor_passes_a_sound_setup_and_blocks_a_broken_one() {
    let (home, root) = home_and_root("shim-doctor");
    let root_arg = root.to_string_lossy().into_owned();
    let (code, out, _) = run_shim(
        &home,
        &["--session-id", "s-1", "--allowed-root", &root_arg, "doctor"],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("[OK  ]"), "{out}");
    assert!(!out.contains("[FAIL]"), "{out}");

    // An allowed root that cannot exist: its parent is a regular file.
    let file = home.join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let impossible = file.join("root").to_string_lossy().into_owned();
    let (code, out, _) = run_shim(
        &home,
        &[
            "--session-id",
            "s-1",
            "--allowed-root",
            &impossible,
            "doctor",
        ],
    );
    assert_eq!(code, Some(78), "{out}");
    assert!(out.contains("[FAIL]"), "{out}");
    std::fs::remove_dir_all(&home).unwrap();
}

/// Every path under `dir` with its modification time: what a look-only command leaves as it was.
fn tree(dir: &std::path::Path) -> Vec<(std::path::PathBuf, std::time::SystemTime)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
        found.push((path, meta.modified().unwrap()));
    }
    found.sort();
    found
}

#[test]
fn doctor_reports_a_missing_root_with_mkdir_and_creates_nothing() {
    // A fresh account: HOME and its XDG folders exist and are empty, so any folder, key, log
    // or probe file doctor made would show.
    let home = e2e::platform::fresh_dir("shim-doctor-typo");
    for dir in [".config", ".local/state"] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    let typo = home.join("a/typo");
    let typo_arg = typo.to_string_lossy().into_owned();
    let before = tree(&home);

    let (code, out, err) = run_shim(
        &home,
        &["--session-id", "s-1", "--allowed-root", &typo_arg, "doctor"],
    );
    assert_eq!(code, Some(78), "{out}{err}");
    assert!(
        out.contains(&format!(
            "[FAIL] allowed root  {typo_arg} does not exist: create it with `mkdir -p {typo_arg}`"
        )),
        "{out}"
    );
    // The audit log and key are left for `start` to create.
    assert!(out.contains("[OK  ] audit key  "), "{out}");
    assert!(out.contains("`start` creates it"), "{out}");
    // Control mode runs the other checks (virtual roots): they create nothing either.
    let (code, out, err) = run_shim(&home, &["doctor"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(tree(&home), before, "doctor changed the home");
    assert!(!typo.exists());

    // `start` refuses the same root in one readable line naming the same fix.
    let (code, _, err) = run_shim(
        &home,
        &["--session-id", "s-1", "--allowed-root", &typo_arg, "start"],
    );
    assert_eq!(code, Some(78), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    super::support::assert_readable(&err, &format!("mkdir -p {typo_arg}"));
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn install_writes_the_user_unit_and_uninstall_is_idempotent() {
    let (home, _) = home_and_root("shim-install");
    let unit = home.join(".config/systemd/user/autogpt-shim.service");
    let (code, out, _) = run_shim(&home, &["install"]);
    assert_eq!(code, Some(0), "{out}");
    let text = std::fs::read_to_string(&unit).unwrap();
    let binary = e2e::platform::binary("autogpt-shim");
    assert!(text.contains(&*binary.to_string_lossy()), "{text}");
    assert!(text.contains("start"), "{text}");
    assert!(text.contains("Restart=on-failure"), "{text}");
    assert!(out.contains("systemctl --user"), "{out}");

    let (code, _, _) = run_shim(&home, &["install", "--at-login=false"]);
    assert_ne!(code, Some(0));

    for _ in 0..2 {
        let (code, out, _) = run_shim(&home, &["uninstall"]);
        assert_eq!(code, Some(0), "{out}");
        assert!(!unit.exists());
    }
}
