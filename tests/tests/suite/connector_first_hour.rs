//! A person's first hour with the connector, on the real binary in a private home: `install`
//! writes a configuration and a systemd user unit whose exact `ExecStart` command connects to
//! the test platform, refuses what could not start, and `uninstall` asks for the disable first;
//! the foreground daemon logs one content-free line per request; `status` and `audit tail`
//! say which facts are which.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use e2e::platform::{Platform, SESSION, TOKEN, WAIT, fresh_dir, run_shim, shim_command};
use serde_json::json;

use super::connector::{home_and_root, spawn};

/// The unit `install` writes under the test's `XDG_CONFIG_HOME`.
fn unit_path(home: &Path) -> PathBuf {
    home.join(".config/systemd/user/autogpt-shim.service")
}

/// The words of a systemd command line as systemd unquotes them: double-quoted words with
/// `\\` and `\"` escapes, then `%%` and `$$` (specifier and variable escapes) undone.
fn systemd_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        if c == '"' {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => word.push(chars.next().expect("a dangling escape")),
                    c => word.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
        }
        words.push(word.replace("%%", "%").replace("$$", "$"));
    }
    words
}

/// A process started from a unit's command line, killed and reaped on every way out.
struct Started {
    child: Child,
    stderr: PathBuf,
}

impl Started {
    /// Runs `argv` with only what a systemd user manager gives a unit here: `HOME` and
    /// `PATH`, none of the `AUTOGPT_SHIM_*` variables `install` saw.
    fn spawn(argv: &[String], home: &Path) -> Self {
        let stderr = home.join("unit.stderr");
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .env_clear()
            .env("HOME", home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Self { child, stderr }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    async fn stop(&mut self) -> Option<i32> {
        assert!(e2e::sigterm(self.child.id()));
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "the unit's daemon did not stop");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A token file only its owner can read.
pub(super) fn token_file(home: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = home.join("token");
    std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// `install` in `home` with a token file there, for `platform`'s session in `root`, with the
/// `switches` for the service; its output, once it succeeded.
pub(super) fn install_for(
    home: &Path,
    platform: &Platform,
    root: &Path,
    switches: &[&str],
) -> String {
    let token = token_file(home);
    let (url, root, token) = (
        platform.url(),
        root.to_string_lossy(),
        token.to_string_lossy(),
    );
    let mut args = vec![
        "--platform-url",
        &url,
        "--session-id",
        SESSION,
        "--allowed-root",
        &root,
        "--token-file",
        &token,
        "install",
    ];
    args.extend_from_slice(switches);
    let (code, out, err) = run_shim(home, &args);
    assert_eq!(code, Some(0), "{out}{err}");
    out
}

#[tokio::test]
async fn install_writes_a_unit_whose_exec_start_connects_to_the_platform() {
    let (home, root) = home_and_root("shim-first-install");
    let platform = Platform::bind().await;
    let out = install_for(&home, &platform, &root, &["--enable-shell"]);
    let config = home.join(".config/autogpt-local-executor/config.toml");
    assert!(
        out.contains(&format!(
            "wrote the configuration {} (mode 0600): ",
            config.display()
        )),
        "{out}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let config_text = std::fs::read_to_string(&config).unwrap();
    assert!(!config_text.contains(TOKEN), "{config_text}");

    let unit = std::fs::read_to_string(unit_path(&home)).unwrap();
    println!("--- the unit `install` wrote ---\n{unit}--- its config.toml ---\n{config_text}");
    let lines: Vec<&str> = unit.lines().collect();
    assert!(lines.contains(&"Restart=on-failure"), "{unit}");
    assert!(lines.contains(&"RestartPreventExitStatus=77 78"), "{unit}");
    let exec = lines
        .iter()
        .find_map(|line| line.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let argv = systemd_words(exec);
    assert_eq!(
        argv[1..],
        ["--config", &*config.to_string_lossy(), "start"],
        "{exec}"
    );

    // The unit's exact command, with a unit's environment: it connects, with the flags
    // `install` was given.
    let mut daemon = Started::spawn(&argv, &home);
    let (mut conn, hello) = platform.session(&["files", "shell"], |_| {}).await;
    let capabilities = hello["payload"]["capabilities"].as_array().unwrap().clone();
    assert!(capabilities.contains(&json!("shell")), "{hello}");
    assert_eq!(
        hello["payload"]["allowed_root"],
        root.to_string_lossy().as_ref()
    );
    let ack = conn
        .call(
            "FILE_WRITE",
            "w1",
            json!({"path": "installed.txt", "content": "from the unit"}),
        )
        .await;
    assert_eq!(ack["type"], "ACK", "{ack}");
    assert_eq!(
        std::fs::read_to_string(root.join("installed.txt")).unwrap(),
        "from the unit"
    );
    assert_eq!(daemon.stop().await, Some(0), "{}", daemon.stderr());
    let log = daemon.stderr();
    println!("--- the unit command's stderr ---\n{log}");
    assert!(!log.contains(TOKEN), "{log}");
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn install_refuses_what_the_service_could_not_start_with() {
    let home = fresh_dir("shim-first-refused");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let output = shim_command(&home, args, env).output().unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    // The token only in this shell's environment: the service would never see it.
    let (code, out) = run(&["install"], &[("AUTOGPT_SHIM_TOKEN", TOKEN)]);
    assert_eq!(code, Some(78), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.contains("AUTOGPT_SHIM_TOKEN") && out.contains("--token-file"),
        "{out}"
    );
    assert!(!out.contains(TOKEN), "{out}");

    // A legacy session whose allowed root does not exist.
    let missing = home.join("missing-root");
    let (code, out) = run(
        &[
            "--session-id",
            SESSION,
            "--allowed-root",
            &missing.to_string_lossy(),
            "install",
        ],
        &[],
    );
    assert_eq!(code, Some(78), "{out}");
    assert!(out.contains("does not exist"), "{out}");
    assert!(!home.join(".config").exists(), "nothing may be written");

    // An existing file is not changed without --force.
    let (code, out) = run(&["--platform-url", "https://a.example", "install"], &[]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = run(&["--platform-url", "https://b.example", "install"], &[]);
    assert_eq!(code, Some(78), "{out}");
    assert!(
        out.contains("platform_url") && out.contains("--force"),
        "{out}"
    );
    let (code, out) = run(
        &["--platform-url", "https://b.example", "install", "--force"],
        &[],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("updated the configuration"), "{out}");
    let config =
        std::fs::read_to_string(home.join(".config/autogpt-local-executor/config.toml")).unwrap();
    assert!(config.contains("https://b.example"), "{config}");

    // Enabled, the unit is not removed until it is disabled: `systemctl disable` needs it.
    let wants = home.join(".config/systemd/user/default.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    let link = wants.join("autogpt-shim.service");
    std::os::unix::fs::symlink(unit_path(&home), &link).unwrap();
    let (code, out) = run(&["uninstall"], &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("is still enabled; disable it first with: systemctl --user disable --now autogpt-shim.service"),
        "{out}"
    );
    assert!(unit_path(&home).exists());
    std::fs::remove_file(&link).unwrap();
    let (code, out) = run(&["uninstall"], &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(!unit_path(&home).exists());
    std::fs::remove_dir_all(&home).unwrap();
}

#[tokio::test]
async fn each_request_logs_one_line_without_its_path_or_content() {
    let (home, root) = home_and_root("shim-first-log");
    let platform = Platform::bind().await;
    let args = platform.start_args(&root, "INFO", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut shim = e2e::platform::Shim::spawn(&home, &args, &[("AUTOGPT_SHIM_TOKEN", TOKEN)]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    let path = "quarterly-secret-plans-7c1e.txt";
    let content = "the launch code is 7c1e-zebra";
    let ack = conn
        .call(
            "FILE_WRITE",
            "w-log-1",
            json!({"path": path, "content": content}),
        )
        .await;
    assert_eq!(ack["type"], "ACK", "{ack}");
    let missing = conn
        .call("FILE_READ", "r-log-2", json!({"path": "absent-9f2d.txt"}))
        .await;
    assert_eq!(missing["type"], "ERROR", "{missing}");
    shim.signal("TERM");
    let (status, log) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{log}");
    println!("--- the daemon's stderr at INFO ---\n{log}");

    let lines: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("request"))
        .collect();
    let write: Vec<&&str> = lines
        .iter()
        .filter(|line| line.contains("op=FILE_WRITE"))
        .collect();
    assert_eq!(write.len(), 1, "{log}");
    let line = write[0];
    for field in ["INFO", "outcome=ok", "duration_ms=", "id=\"w-log-1\""] {
        assert!(line.contains(field), "{field} in {line}");
    }
    // An ISO 8601 timestamp leads the line.
    assert!(line.as_bytes()[4] == b'-' && line.contains('T'), "{line}");
    let read = lines
        .iter()
        .find(|line| line.contains("op=FILE_READ"))
        .expect("a FILE_READ line");
    assert!(read.contains("outcome=PATH_NOT_FOUND"), "{read}");
    for secret in [path, content, "quarterly", "zebra", "absent-9f2d"] {
        assert!(!log.contains(secret), "{secret} leaked into {log}");
    }
    std::fs::remove_dir_all(&home).unwrap();
}

#[tokio::test]
async fn status_heads_its_sections_and_audit_tail_prints_the_last_records() {
    let (home, root) = home_and_root("shim-first-status");
    let platform = Platform::bind().await;
    let mut shim = spawn(&home, &platform, &root, &[]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    for (i, name) in ["a.txt", "b.txt", "c.txt"].iter().enumerate() {
        let ack = conn
            .call(
                "FILE_WRITE",
                &format!("w{i}"),
                json!({"path": name, "content": "twelve bytes"}),
            )
            .await;
        assert_eq!(ack["type"], "ACK");
    }

    let (code, out, _) = run_shim(&home, &["status"]);
    assert_eq!(code, Some(0), "{out}");
    let headings: Vec<&str> = out
        .lines()
        .filter(|line| !line.starts_with(' '))
        .map(|line| line.split(':').next().unwrap())
        .collect();
    assert_eq!(headings, ["now", "configured", "autostart"], "{out}");
    assert!(
        out.starts_with(&format!("now: running (pid {})", shim.pid())),
        "{out}"
    );

    let (code, out, _) = run_shim(&home, &["status", "--json"]);
    assert_eq!(code, Some(0), "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["now"]["running"], true, "{report}");
    assert_eq!(
        report["now"]["daemons"][0]["state"], "connected",
        "{report}"
    );
    assert_eq!(report["now"]["daemons"][0]["pid"], shim.pid(), "{report}");
    assert_eq!(report["configured"]["mode"], "control", "{report}");
    assert_eq!(report["configured"]["running"], false, "{report}");
    assert_eq!(report["autostart"]["installed"], false, "{report}");
    assert!(!out.contains(TOKEN));

    // `-n 2 --no-follow`: the last two records, with time and detail, and then it exits.
    let (code, out, _) = run_shim(&home, &["audit", "tail", "-n", "2", "--no-follow"]);
    assert_eq!(code, Some(0), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[1].contains("  FILE_WRITE  ok  path=c.txt bytes=12"),
        "{out}"
    );
    assert!(lines[0].contains("path=b.txt"), "{out}");
    assert!(!out.contains("twelve"), "{out}");

    shim.signal("TERM");
    shim.exit().await;
    let (code, out, _) = run_shim(&home, &["status", "--json"]);
    assert_eq!(code, Some(3), "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["now"]["running"], false, "{report}");
    assert_eq!(report["now"]["daemons"][0]["state"], "stopped", "{report}");
    std::fs::remove_dir_all(&home).unwrap();
}
