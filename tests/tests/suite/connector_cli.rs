//! The `autogpt-shim` subcommands on a real home: `audit verify` against a tampered, a
//! deleted and a truncated record, `audit show/export/rotate/verify-all`, `status` before,
//! during and after a daemon, one daemon per session, `doctor` and `start` agreeing on a table
//! of broken set-ups, and `install`/`uninstall` of the systemd user unit where no user manager
//! runs.

use std::path::Path;

use e2e::platform::{Platform, SESSION, Shim, TOKEN, run_shim, shim_command};
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
    // Asked with the daemon's own flags, and without any: the running daemon is reported
    // either way, and what a start would run is a section of its own.
    let root_arg = root.to_string_lossy().into_owned();
    let flags = [
        "--session-id",
        SESSION,
        "--allowed-root",
        &root_arg,
        "status",
    ];
    for args in [&flags[..], &["status"]] {
        let (code, out, _) = run_shim(&home, args);
        assert_eq!(code, Some(0), "{out}");
        assert!(
            out.starts_with(&format!(
                "now: running (pid {}), direct session {SESSION}\n  state: connected since ",
                shim.pid()
            )),
            "{out}"
        );
        assert!(
            out.contains("\nconfigured: what `autogpt-shim start` would run"),
            "{out}"
        );
        assert!(!out.contains(TOKEN));
    }
    let (_, out, _) = run_shim(&home, &flags);
    assert!(
        out.contains(&format!("  its daemon: running (pid {})", shim.pid())),
        "{out}"
    );
    let (_, out, _) = run_shim(&home, &["status"]);
    assert!(out.contains("  mode: machine control mode\n"), "{out}");
    assert!(out.contains("  its daemon: not running\n"), "{out}");

    // A clean stop: stopped, with its reason, and no error.
    shim.signal("TERM");
    let (status, stderr) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let (code, out, _) = run_shim(&home, &flags);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.starts_with("now: not running\n"), "{out}");
    assert!(
        out.contains(&format!(
            "  last daemon: pid {}, direct session {SESSION}, stopped at ",
            shim.pid()
        )) && out.contains(" (stopped by Ctrl-C or SIGTERM)\n"),
        "{out}"
    );
    assert!(!out.contains("last error"), "{out}");
    assert!(out.contains("  its daemon: not running\n"), "{out}");
    let (code, out, _) = run_shim(&home, &["status", "--json"]);
    assert_eq!(code, Some(3), "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let last = &report["now"]["daemons"][0];
    assert_eq!(report["now"]["running"], false, "{report}");
    assert_eq!(last["state"], "stopped", "{report}");
    assert_eq!(last["running"], false, "{report}");
    assert_eq!(last["exit_code"], 0, "{report}");
    assert_eq!(last["last_error"], serde_json::Value::Null, "{report}");
    std::fs::remove_dir_all(&home).unwrap();
}

/// A second daemon for the same session, or a second one in control mode, is refused before
/// it dials or writes anything, naming the first one's pid; the first one goes on.
#[tokio::test]
async fn a_second_daemon_for_the_same_session_is_refused() {
    let (home, root) = home_and_root("shim-second");
    let platform = Platform::bind().await;
    let first = spawn(&home, &platform, &root, &[]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    // The first daemon's own records may still be arriving; the second's would be a SHIM_START.
    let starts = |log: &str| log.matches("\"op\": \"SHIM_START\"").count();
    assert_eq!(
        starts(&std::fs::read_to_string(first.audit_log()).unwrap()),
        1
    );

    let mut second = spawn(&home, &platform, &root, &[]);
    let (status, stderr) = second.exit().await;
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [format!(
            "autogpt-shim: a daemon for direct session {SESSION} is already running (pid {}): stop it first (Ctrl-C in its terminal, or `systemctl --user stop autogpt-shim.service` for the service), or see it with `autogpt-shim status`",
            first.pid()
        )]
    );
    assert!(
        !platform
            .dials_within(std::time::Duration::from_millis(300))
            .await
    );
    assert_eq!(conn.call("PING", "p", json!({})).await["type"], "PONG");
    // No SHIM_START of its own in the chain.
    let after = std::fs::read_to_string(first.audit_log()).unwrap();
    assert_eq!(starts(&after), 1, "{after}");
    let (code, out, _) = run_shim(&home, &["status"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.starts_with(&format!("now: running (pid {})", first.pid())),
        "{out}"
    );

    // Another session id is another daemon.
    let root_arg = root.to_string_lossy().into_owned();
    let url = platform.url();
    let other = [
        "--session-id",
        "other-session",
        "--allowed-root",
        &root_arg,
        "--platform-url",
        &url,
        "start",
    ];
    let _other = Shim::spawn(&home, &other, &[("AUTOGPT_SHIM_TOKEN", TOKEN)]);
    let _other_conn = platform.child("other-session", &["files"]).await;

    // Control mode: one per machine.
    let control = platform.control_args("INFO", &[]);
    let control: Vec<&str> = control.iter().map(String::as_str).collect();
    let _control = Shim::spawn(&home, &control, &[("AUTOGPT_SHIM_TOKEN", TOKEN)]);
    let (_control_conn, _) = platform.control(|_| {}).await;
    let mut again = Shim::spawn(&home, &control, &[("AUTOGPT_SHIM_TOKEN", TOKEN)]);
    let (status, stderr) = again.exit().await;
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("a daemon for machine control mode is already running (pid "),
        "{stderr}"
    );
    drop((first, _other, _control));
    std::fs::remove_dir_all(&home).unwrap();
}

/// Runs `doctor` and then `start` with the same flags: both refuse (78), and `start`'s lines
/// are `doctor`'s `[FAIL]` lines, one for one.
fn doctor_and_start(home: &Path, flags: &[&str]) -> Vec<String> {
    let run = |last: &str| {
        let args: Vec<&str> = flags.iter().copied().chain([last]).collect();
        let output = shim_command(home, &args, &[]).output().unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, doctor, _) = run("doctor");
    assert_eq!(code, Some(78), "{doctor}");
    let failed: Vec<String> = doctor
        .lines()
        .filter_map(|line| line.strip_prefix("[FAIL] "))
        .map(|line| line.replacen("  ", ": ", 1))
        .collect();
    assert!(!failed.is_empty(), "{doctor}");
    assert!(
        doctor.ends_with("before starting the daemon (`start` refuses until then)\n"),
        "{doctor}"
    );
    let (code, _, start) = run("start");
    assert_eq!(code, Some(78), "{start}");
    let refused: Vec<String> = start
        .lines()
        .map(|line| {
            line.strip_prefix("autogpt-shim: ")
                .unwrap_or(line)
                .to_owned()
        })
        .collect();
    assert_eq!(refused, failed, "doctor:\n{doctor}\nstart:\n{start}");
    super::support::assert_readable(&start, "");
    failed
}

#[test]
fn doctor_and_start_agree_on_every_broken_setup() {
    let (home, root) = home_and_root("shim-agree");
    let root_arg = root.to_string_lossy().into_owned();
    let missing_token = home.join("no-such-token").to_string_lossy().into_owned();
    let missing_root = home.join("no-such-root").to_string_lossy().into_owned();
    // A folder where the config file should be: unreadable, even for root.
    let config_dir = home.join("config-is-a-folder");
    std::fs::create_dir_all(&config_dir).unwrap();
    let config_arg = config_dir.to_string_lossy().into_owned();
    let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        (
            "missing token file",
            vec![
                "--session-id",
                "s-1",
                "--allowed-root",
                &root_arg,
                "--token-file",
                &missing_token,
            ],
            vec!["token: the token file ", "does not exist: create it"],
        ),
        (
            "URL without a scheme",
            vec![
                "--session-id",
                "s-1",
                "--allowed-root",
                &root_arg,
                "--platform-url",
                "127.0.0.1:8770",
            ],
            vec!["platform URL: --platform-url has no scheme: did you mean ws://127.0.0.1:8770?"],
        ),
        (
            "missing root",
            vec!["--session-id", "s-1", "--allowed-root", &missing_root],
            vec![
                "allowed root: ",
                "does not exist: create it with `mkdir -p ",
            ],
        ),
        (
            "unreadable config",
            vec![
                "--session-id",
                "s-1",
                "--allowed-root",
                &root_arg,
                "--config",
                &config_arg,
            ],
            vec![
                "config file: cannot read the config file ",
                "(it is a folder)",
            ],
        ),
    ];
    for (name, flags, says) in &cases {
        let failed = doctor_and_start(&home, flags);
        assert_eq!(failed.len(), 1, "{name}: {failed:?}");
        for part in says {
            assert!(failed[0].contains(part), "{name}: {part:?} in {failed:?}");
        }
    }
    // Three at once: all three, not the first.
    let three = [
        "--session-id",
        "s-1",
        "--allowed-root",
        &missing_root,
        "--token-file",
        &missing_token,
        "--platform-url",
        "127.0.0.1:8770",
    ];
    let failed = doctor_and_start(&home, &three);
    assert_eq!(failed.len(), 3, "{failed:?}");
    assert!(failed[0].starts_with("allowed root: "), "{failed:?}");
    assert!(failed[1].starts_with("token: "), "{failed:?}");
    assert!(failed[2].starts_with("platform URL: "), "{failed:?}");
    // Nothing was created for any of them: no folder, no state.
    assert!(!home.join("no-such-root").exists());
    assert!(!home.join(".local/state").exists());
    std::fs::remove_dir_all(&home).unwrap();
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

/// `install` where no systemd user manager runs (the suite's environment has no
/// `XDG_RUNTIME_DIR`): the unit runs a copy of the binary in ~/.local/bin, and instead of a
/// `systemctl --user` command that would fail, it says how to start the daemon by hand.
// A systemd user unit and Unix file modes.
#[cfg(target_os = "linux")]
#[test]
fn install_without_a_user_manager_says_what_to_do_and_runs_a_stable_copy() {
    let (home, _) = home_and_root("shim-install");
    let unit = home.join(".config/systemd/user/autogpt-shim.service");
    let (code, out, err) = run_shim(&home, &["install"]);
    assert_eq!(code, Some(0), "{out}{err}");
    println!("--- install where no user manager runs ---\n{out}");
    let copy = home.join(".local/bin/autogpt-shim");
    let config = home.join(".config/autogpt-local-executor/config.toml");
    assert!(
        out.contains(&format!(
            "copied {} to {}",
            e2e::platform::binary("autogpt-shim").display(),
            copy.display()
        )),
        "{out}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    // The shell sandbox's launcher goes beside it: the copy runs the one beside its own file.
    let launcher = home.join(".local/bin/autogpt-shim-sandbox");
    assert!(
        out.contains(&format!(
            "copied {} to {}, the shell sandbox's launcher beside it",
            e2e::platform::binary("autogpt-shim-sandbox").display(),
            launcher.display()
        )),
        "{out}"
    );
    let mode = std::fs::metadata(&launcher).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(
        text.contains(&format!("ExecStart=\"{}\" --config", copy.display())),
        "{text}"
    );
    assert!(!text.contains("/target/"), "{text}");
    // No command that would fail, and the one that works, exactly.
    assert!(!out.contains("enable it with:"), "{out}");
    assert!(out.contains("start the daemon by hand"), "{out}");
    assert!(
        out.contains(&format!(
            ": {} --config {} start\n",
            copy.display(),
            config.display()
        )),
        "{out}"
    );
    if std::path::Path::new("/run/systemd/system").is_dir() {
        assert!(out.contains("loginctl enable-linger"), "{out}");
    } else {
        assert!(out.contains("does not run systemd"), "{out}");
    }
    // The copy runs: its own version.
    let version = std::process::Command::new(&copy)
        .arg("--version")
        .output()
        .unwrap();
    assert!(version.status.success());
    assert!(out.contains("is not on your PATH"), "{out}");

    // Left where it was built, the service would break with the next `cargo clean`.
    let (code, out, _) = run_shim(&home, &["install", "--in-place", "--force"]);
    assert_eq!(code, Some(78), "{out}");
    assert!(
        out.contains("is inside a cargo target/ folder")
            && out.contains("install without --in-place"),
        "{out}"
    );
    let (code, _, _) = run_shim(&home, &["install", "--at-login=false"]);
    assert_ne!(code, Some(0));

    for _ in 0..2 {
        let (code, out, _) = run_shim(&home, &["uninstall"]);
        assert_eq!(code, Some(0), "{out}");
        assert!(!unit.exists());
    }
    std::fs::remove_dir_all(&home).unwrap();
}
