//! `autogpt-shim.exe start` under Wine against the test platform on loopback: HELLO, the
//! FILE_* jail's Windows path rules checked on the Linux side of the Wine drive, and the audit
//! chain verified by the Linux build.

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::SystemTime,
};

use e2e::platform::{Platform, SESSION, TOKEN, error_code};
use serde_json::{Value, json};

use super::Wine;

/// The content every hostile write carries, looked for on the Linux side afterwards.
const MARKER: &str = "wine-jail-marker-7c1d";
/// A fixed audit key (64 hex characters): the Windows build signs with it, the Linux build
/// verifies with it.
const AUDIT_KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// The shim under Wine, with `C:\jail` as its root; killed when dropped.
pub(super) struct WindowsShim {
    child: Child,
    stderr: PathBuf,
}

impl WindowsShim {
    fn start(wine: &Wine, platform: &Platform, extra: &[&str]) -> Self {
        Self::start_in(wine, "msguide", platform, extra, &[])
    }

    /// `C:\<folder>\autogpt-shim.exe … start extra…`, with `env` added to its environment.
    pub(super) fn start_in(
        wine: &Wine,
        folder: &str,
        platform: &Platform,
        extra: &[&str],
        env: &[(&str, String)],
    ) -> Self {
        let stderr = wine.scratch().join(format!("shim-{folder}.stderr"));
        let url = platform.url();
        let mut args = vec![
            "--session-id",
            SESSION,
            "--allowed-root",
            r"C:\jail",
            "--platform-url",
            &url,
            "--log-level",
            "info",
            "start",
        ];
        args.extend_from_slice(extra);
        let child = wine
            .command_in(folder, "autogpt-shim.exe", &args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("AUTOGPT_SHIM_TOKEN", TOKEN)
            .env("AUTOGPT_SHIM_RECONNECT_BASE_DELAY", "0.05")
            .env("AUTOGPT_SHIM_RECONNECT_JITTER_SECONDS", "0")
            .stdout(Stdio::null())
            .stderr(File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Self { child, stderr }
    }

    /// What it (and Wine for it) wrote on stderr so far.
    pub(super) fn stderr(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.stderr).unwrap_or_default()).into_owned()
    }
}

impl Drop for WindowsShim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The connector's state folder, `%LOCALAPPDATA%\autogpt-local-executor`, on the Linux side.
pub(super) fn state_dir(wine: &Wine) -> PathBuf {
    wine.local_app_data().join("autogpt-local-executor")
}

/// Every file under `dir` changed since `since` whose content holds the marker, but those
/// under `except` (only changed files are read: the drive holds 700 MB of Wine's DLLs).
fn marked_files(dir: &Path, except: &Path, since: SystemTime, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && path != except {
            marked_files(&path, except, since, found);
        } else if kind.is_file()
            && entry
                .metadata()
                .and_then(|meta| meta.modified())
                .is_ok_and(|modified| modified >= since)
            && std::fs::read(&path)
                .is_ok_and(|bytes| bytes.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()))
        {
            found.push(path);
        }
    }
}

fn write(path: &str) -> Value {
    json!({"path": path, "content": format!("{MARKER} {path}"), "create_parents": true})
}

#[tokio::test]
async fn the_jail_keeps_windows_paths_inside_the_root_and_linux_verifies_the_audit_chain() {
    let wine = Wine::new("connector-jail");
    let since = SystemTime::now();
    let jail = wine.drive_c().join("jail");
    std::fs::create_dir_all(jail.join("sub")).unwrap();
    std::fs::write(jail.join("Inside.txt"), "inside").unwrap();
    // A secret outside the root the paths below aim at.
    std::fs::write(wine.drive_c().join("secret.txt"), "outside").unwrap();
    // An audit key file the Windows build keeps using, and the Linux build verifies with.
    let state = state_dir(&wine);
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("audit.key"), AUDIT_KEY).unwrap();

    let platform = Platform::bind().await;
    let shim = WindowsShim::start(&wine, &platform, &[]);
    let (mut conn, hello) = platform.session(&["files"], |_| {}).await;
    let payload = &hello["payload"];
    assert_eq!(payload["protocol_version"], "1.1", "{hello}");
    assert_eq!(payload["capabilities"], json!(["files"]), "{hello}");

    // Inside the root: both separators, the drive-letter form of the root, names in any case.
    let mut ids = 0..;
    let mut call = async |kind: &str, payload: Value| {
        let id = format!("r{}", ids.next().unwrap_or_default());
        conn.call(kind, &id, payload).await
    };
    for path in [r"sub\back.txt", "sub/fwd.txt", r"C:\jail\sub\drive.txt"] {
        let reply = call("FILE_WRITE", write(path)).await;
        assert_ne!(reply["type"], "ERROR", "{path}: {reply}");
    }
    for (path, file) in [
        ("sub/back.txt", "back.txt"),
        (r"sub\fwd.txt", "fwd.txt"),
        ("sub/drive.txt", "drive.txt"),
    ] {
        let expected = std::fs::read_to_string(jail.join("sub").join(file)).unwrap();
        let reply = call("FILE_READ", json!({"path": path})).await;
        assert_eq!(reply["payload"]["content"], expected, "{path}: {reply}");
    }
    let reply = call("FILE_READ", json!({"path": "INSIDE.TXT"})).await;
    assert_eq!(reply["payload"]["content"], "inside", "{reply}");
    let reply = call("FILE_STAT", json!({"path": r"c:\JAIL\inside.txt"})).await;
    assert_eq!(reply["payload"]["exists"], true, "{reply}");

    // Refused with their code.
    let refused: &[(&str, &str)] = &[
        ("CON", "PATH_RESERVED_NAME"),
        ("nul", "PATH_RESERVED_NAME"),
        ("COM1", "PATH_RESERVED_NAME"),
        ("con.txt", "PATH_RESERVED_NAME"),
        (r"sub\NUL.log", "PATH_RESERVED_NAME"),
        ("lpt9", "PATH_RESERVED_NAME"),
        ("a.txt:secret", "PATH_INVALID_CHARS"),
        ("Inside.txt::$DATA", "PATH_INVALID_CHARS"),
        ("what?.txt", "PATH_INVALID_CHARS"),
        (r"..\secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("../secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (r"sub\..\..\secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (r"sub/../..\secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("..", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (r"C:\jail\..\secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (r"C:\secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        ("C:/secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (r"D:\secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (r"Z:\tmp\secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (r"\secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (r"\\?\C:\secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (r"\\?\C:\jail\..\secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (r"\\localhost\C$\secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        (r"\\server\share\secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
        // The device namespace: its colon is not a drive's.
        (r"\\.\C:\secret.txt", "PATH_INVALID_CHARS"),
    ];
    let mut wrong = Vec::new();
    for (path, code) in refused {
        for kind in ["FILE_WRITE", "FILE_READ"] {
            let payload = if kind == "FILE_WRITE" {
                write(path)
            } else {
                json!({"path": path})
            };
            let reply = call(kind, payload).await;
            if reply["type"] != "ERROR" || error_code(&reply) != *code {
                wrong.push(format!("{kind} {path}: {reply}"));
            }
        }
    }
    // Trailing dots and spaces: Windows drops them, so these three name one file.
    for path in ["trail.txt.", "trail.txt ", "trail.txt. ."] {
        let reply = call("FILE_WRITE", write(path)).await;
        assert_eq!(reply["type"], "ACK", "{path:?}: {reply}");
    }
    // A folder named so: refused (PATH_EXISTS under Wine, the folder `sub` being there) or
    // written inside the root; the scan below decides.
    let mut trailing = Vec::new();
    for path in [r"sub.\x.txt", "sub \\y.txt"] {
        let reply = call("FILE_WRITE", write(path)).await;
        trailing.push(format!("{path:?}: {}", reply["payload"]));
    }
    assert!(wrong.is_empty(), "{wrong:#?}\ntrailing: {trailing:#?}");

    // Nothing the connector wrote is outside C:\jail, and the secret is untouched.
    let mut outside = Vec::new();
    marked_files(&wine.drive_c(), &jail, since, &mut outside);
    assert_eq!(outside, Vec::<PathBuf>::new(), "trailing: {trailing:#?}");
    assert_eq!(
        std::fs::read_to_string(wine.drive_c().join("secret.txt")).unwrap(),
        "outside"
    );
    let trail: Vec<String> = std::fs::read_dir(&jail)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("trail"))
        .collect();
    assert_eq!(trail, ["trail.txt"]);
    assert_eq!(
        std::fs::read_to_string(jail.join("trail.txt")).unwrap(),
        format!("{MARKER} trail.txt. .")
    );

    // The audit chain the Windows build wrote verifies with the Linux build.
    conn.close(1000).await;
    drop(conn);
    // In a `logs` folder on Windows, as in the reference.
    let log = state.join("logs").join("audit.log");
    assert!(log.exists(), "{}", shim.stderr());
    drop(shim);
    // Windows has no mode bits; the Linux build reads a key only when it is private.
    std::fs::set_permissions(
        state.join("audit.key"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let home = wine.scratch().join("linux-home");
    std::fs::create_dir_all(&home).unwrap();
    let output = std::process::Command::new(e2e::platform::binary("autogpt-shim"))
        .args(["audit", "verify"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("XDG_STATE_HOME", wine.local_app_data())
        .env("AUTOGPT_SHIM_AUDIT_LOG_PATH", &log)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let records = std::fs::read_to_string(&log).unwrap();
    assert!(
        output.status.success(),
        "{}\n{}\n{records}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(records.contains("FILE_WRITE"), "{records}");
}

#[tokio::test]
async fn commands_run_through_cmd_and_a_timeout_kills_the_tree() {
    let wine = Wine::new("connector-shell");
    let jail = wine.drive_c().join("jail");
    std::fs::create_dir_all(jail.join("work")).unwrap();
    let platform = Platform::bind().await;
    let shim = WindowsShim::start(&wine, &platform, &["--enable-shell"]);
    let (mut conn, hello) = platform
        .session(&["shell", "files"], |ack| {
            ack["payload"]["command_timeout_seconds"] = json!(2);
        })
        .await;
    assert_eq!(
        hello["payload"]["capabilities"],
        json!(["shell", "files"]),
        "{hello}\n{}",
        shim.stderr()
    );

    // cmd.exe runs the command in the working folder, with the wire's variables.
    let reply = execute(
            &mut conn,
            "cmd",
            json!({"command": "echo hello %FROM_WIRE%& cd& exit /b 3", "cwd": "work", "env": {"FROM_WIRE": "wire"}}),
        )
        .await;
    assert_eq!(reply["type"], "COMMAND_RESULT", "{reply}");
    let stdout = reply["payload"]["stdout"].as_str().unwrap();
    assert!(stdout.contains("hello wire"), "{reply}");
    assert!(
        stdout.to_ascii_lowercase().contains(r"c:\jail\work"),
        "{reply}"
    );
    assert_eq!(reply["payload"]["exit_code"], 3, "{reply}");
    let argv = execute(
        &mut conn,
        "argv",
        json!({"argv": ["cmd.exe", "/c", "echo", "from argv"]}),
    )
    .await;
    assert!(
        argv["payload"]["stdout"]
            .as_str()
            .is_some_and(|s| s.contains("from argv")),
        "{argv}"
    );
    let outside = execute(
        &mut conn,
        "out",
        json!({"command": "cd", "cwd": r"C:\windows"}),
    )
    .await;
    assert_eq!(
        error_code(&outside),
        "PATH_OUTSIDE_ALLOWED_ROOT",
        "{outside}"
    );

    // A command with a child of its own outlives its deadline: both are killed.
    let slow = execute(
        &mut conn,
        "slow",
        json!({"command": "start /b ping -n 120 127.0.0.1 >NUL & ping -n 120 127.0.0.1 >NUL"}),
    )
    .await;
    assert_eq!(slow["payload"]["timed_out"], true, "{slow}");
    assert_eq!(slow["payload"]["exit_code"], -1, "{slow}");
    assert!(
        wine.until_none("ping").await,
        "ping outlived the timeout: {:?}",
        wine.pids_of("ping")
    );
    drop(conn);
    drop(shim);
    let log = std::fs::read_to_string(state_dir(&wine).join("logs").join("audit.log")).unwrap();
    assert!(log.contains("COMMAND_TIMEOUT"), "{log}");

    // Without an audit.key file the key lives in the Credential Manager (CredWrite), where
    // the Windows build's `audit verify` finds it again (CredRead).
    assert!(
        !state_dir(&wine).join("audit.key").exists(),
        "the key went to a file, not the Credential Manager"
    );
    let verify = wine
        .command("autogpt-shim.exe", &["audit", "verify"])
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// EXECUTE_COMMAND's reply. Wine answers a process that died while it was starting, before its
/// program ran, with ERROR_INTERNAL_ERROR (os error 1359); it happened once to cmd.exe, the
/// first process of a fresh prefix, in a full CI run on a busy machine. That is Wine's, so
/// the request is sent once more then; a second such answer fails the test as any other.
async fn execute(conn: &mut e2e::platform::Conn, id: &str, payload: Value) -> Value {
    let reply = conn.call("EXECUTE_COMMAND", id, payload.clone()).await;
    let wine_failed_to_start = reply["type"] == "ERROR"
        && reply["payload"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("(os error 1359)"));
    if wine_failed_to_start {
        eprintln!("Wine failed to start the command ({reply}): sending it once more");
        return conn.call("EXECUTE_COMMAND", id, payload).await;
    }
    reply
}
