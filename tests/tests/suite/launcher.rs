//! The real `msguide` launcher: a headless start that serves with the printed token, the
//! refusals that come before anything starts, and both the API and the launcher ending
//! together whichever is stopped first.

use std::{
    fs::File,
    net::{SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use e2e::platform::WAIT;

use super::support::{Req, announcement, assert_readable, free_port, stdout_lines, temp_dir};

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// `msguide` with nothing of the test runner's environment but `PATH`, a private `HOME`, and
/// its state directory inside it.
fn msguide(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(e2e::platform::binary("msguide"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_STATE_HOME", home.join("state"))
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// The launcher's per-user state directory under `home`.
fn state_dir(home: &Path) -> PathBuf {
    home.join("state/msguide")
}

/// Runs `msguide` to its end: status, stdout, stderr.
fn run(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (ExitStatus, String, String) {
    let output = msguide(home, args, env).output().unwrap();
    (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Sends a signal by name with kill(1); whether it was delivered.
fn signal(pid: u32, name: &str) -> bool {
    Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// Whether a process with this pid exists (kill -0).
fn alive(pid: u32) -> bool {
    signal(pid, "0")
}

/// Whether anything accepts connections on the port.
async fn listening(port: u16) -> bool {
    tokio::net::TcpStream::connect(loopback(port)).await.is_ok()
}

/// Waits until `pid` is gone.
async fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + WAIT;
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Waits until `pid` has ended: gone, or a zombie its new parent has yet to reap.
#[cfg(target_os = "linux")]
async fn ended(pid: u32) -> bool {
    let deadline = Instant::now() + WAIT;
    while super::support::running(&pid.to_string()) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// What a headless launcher prints on stdout once the API is ready.
struct Announcement {
    lines: Vec<String>,
    token: String,
    api_pid: u32,
}

/// A headless launcher; on a failed test it and its API are killed.
struct Launcher {
    child: Child,
    stderr: PathBuf,
    api_pid: Option<u32>,
}

impl Launcher {
    /// Starts `msguide start --headless --port <port>` and reads stdout until the token line.
    fn headless(home: &Path, port: u16, env: &[(&str, &str)]) -> (Self, Announcement) {
        let stderr = home.join("launcher.stderr");
        let mut child = msguide(
            home,
            &["start", "--headless", "--port", &port.to_string()],
            env,
        )
        .stdout(Stdio::piped())
        // A file, not a pipe: nothing reads stderr while the launcher runs.
        .stderr(File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut launcher = Self {
            child,
            stderr,
            api_pid: None,
        };
        let receiver = stdout_lines(stdout);
        let lines = announcement(&receiver, || launcher.stderr());
        let api_pid: u32 = lines[0]
            .split("(msguide-api pid ")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .and_then(|pid| pid.parse().ok())
            .unwrap_or_else(|| panic!("no pid in {:?}", lines[0]));
        launcher.api_pid = Some(api_pid);
        let token = lines
            .iter()
            .find_map(|line| line.trim().strip_prefix("export MSGUIDE_LOCAL_TOKEN="))
            .unwrap_or_else(|| panic!("no token line in {lines:?}"))
            .to_owned();
        (
            launcher,
            Announcement {
                lines,
                token,
                api_pid,
            },
        )
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn signal(&self, name: &str) {
        assert!(signal(self.child.id(), name), "kill -{name} failed");
    }

    /// Waits for the launcher to exit; its status and stderr.
    async fn exit(&mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "the launcher did not exit");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        (status, self.stderr())
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Only on a failed test: after a passing one the pid may already belong to another
        // process.
        if std::thread::panicking()
            && let Some(pid) = self.api_pid
        {
            signal(pid, "KILL");
        }
    }
}

/// Every file under `dir` that contains `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if String::from_utf8_lossy(&std::fs::read(&path).unwrap()).contains(needle) {
            found.push(path);
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[tokio::test]
async fn headless_serves_with_the_printed_token_until_sigterm() {
    let home = temp_dir("launcher-headless");
    let port = free_port();
    let (mut launcher, announced) = Launcher::headless(&home, port, &[]);
    let Announcement {
        lines,
        token,
        api_pid,
    } = &announced;
    let addr = loopback(port);

    // The announcement: URL, the token once, and a request to try.
    assert!(
        lines[0].starts_with(&format!("MSGuide API ready at http://127.0.0.1:{port} ")),
        "{lines:?}"
    );
    assert_eq!(token.len(), 43, "32 bytes, base64 without padding");
    assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );
    assert_eq!(
        lines.iter().filter(|l| l.contains(token.as_str())).count(),
        1
    );
    assert!(lines[3].contains(&format!("http://127.0.0.1:{port}/v1/sessions")));

    // The API runs in demo mode and takes exactly that token.
    let health = Req::new(addr, "GET", "/health").send().await;
    assert_eq!(
        health.text(),
        r#"{"status":"ok","mode":"demo","version":"0.2.0"}"#
    );
    let session = Req::new(addr, "POST", "/v1/sessions")
        .bearer(token)
        .send()
        .await;
    assert_eq!(session.status, 200, "{}", session.text());
    assert!(session.json()["sessionId"].is_string());
    assert_eq!(
        Req::new(addr, "POST", "/v1/sessions").send().await.status,
        401
    );
    assert_eq!(
        Req::new(addr, "POST", "/v1/sessions")
            .bearer("not-the-token")
            .send()
            .await
            .status,
        401
    );

    // The token reaches the child through its environment, never its argv.
    let log = state_dir(&home).join("backend.log");
    if cfg!(target_os = "linux") {
        let cmdline = std::fs::read(format!("/proc/{api_pid}/cmdline")).unwrap();
        assert!(contains(
            &cmdline,
            &format!("--host\0127.0.0.1\0--port\0{port}\0")
        ));
        assert!(!contains(&cmdline, token));
        let launcher_cmdline = std::fs::read(format!("/proc/{}/cmdline", launcher.child.id()));
        assert!(!contains(&launcher_cmdline.unwrap(), token));
        let environ = std::fs::read(format!("/proc/{api_pid}/environ")).unwrap();
        for variable in [
            format!("MSGUIDE_LOCAL_TOKEN={token}\0"),
            "MSGUIDE_MODE=demo\0".to_owned(),
            format!("MSGUIDE_DIAGNOSTIC_LOG={}\0", log.display()),
        ] {
            assert!(contains(&environ, &variable), "{variable}");
        }
    }

    // The diagnostic log is in the per-user state directory; no file holds the token.
    let events = std::fs::read_to_string(&log).unwrap();
    assert!(events.contains(r#""event":"backend_started""#), "{events}");
    assert_eq!(files_containing(&home, token), Vec::<PathBuf>::new());

    launcher.signal("TERM");
    let (status, stderr) = launcher.exit().await;
    assert!(
        status.success(),
        "SIGTERM is a clean stop: {status}\n{stderr}"
    );
    assert!(gone(*api_pid).await, "the API outlived the launcher");
    assert!(!listening(port).await);
    // SIGTERM reached the API, which shut down gracefully.
    let events = std::fs::read_to_string(&log).unwrap();
    assert!(events.contains(r#""event":"backend_stopping""#), "{events}");

    assert!(
        stderr.contains(&format!(
            "msguide: starting msguide-api on 127.0.0.1:{port}"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("msguide: ready\n"), "{stderr}");
    assert!(stderr.contains("msguide: stopped\n"), "{stderr}");
    assert!(
        !stderr.contains(token.as_str()),
        "the token never reaches stderr"
    );
}

#[tokio::test]
async fn a_busy_port_is_refused_and_its_holder_keeps_it() {
    let home = temp_dir("launcher-busy");
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let (status, stdout, stderr) = run(
        &home,
        &["start", "--headless", "--port", &port.to_string()],
        &[],
    );
    assert!(!status.success());
    assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
    assert!(
        stderr.contains(&format!("port {port} is in use")),
        "{stderr}"
    );
    assert_readable(&stderr, "choose another with --port");
    assert!(stdout.is_empty(), "no token without an API: {stdout}");
    // The holder is untouched and still accepts.
    let client = std::net::TcpStream::connect(loopback(port)).unwrap();
    let (accepted, _) = holder.accept().unwrap();
    assert_eq!(accepted.peer_addr().unwrap(), client.local_addr().unwrap());
    assert!(!state_dir(&home).join("backend.log").exists());
}

#[tokio::test]
async fn without_the_desktop_client_start_refuses_before_serving() {
    let home = temp_dir("launcher-desktop");
    // The launcher and the API alone, without the desktop client that the build puts next to
    // them (hard links: the binaries are large and on the same file system).
    let alone = home.join("bin");
    std::fs::create_dir(&alone).unwrap();
    for name in ["msguide", "msguide-api"] {
        let from = e2e::platform::binary(name);
        let to = alone.join(from.file_name().unwrap());
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).unwrap();
        }
    }
    let port = free_port();
    let output = Command::new(alone.join(e2e::platform::binary("msguide").file_name().unwrap()))
        .args(["start", "--port", &port.to_string()])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("XDG_STATE_HOME", home.join("state"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (status, stdout, stderr) = (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert!(!status.success());
    assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
    assert!(stderr.contains("msguide-desktop"), "{stderr}");
    assert!(stderr.contains("--headless"), "{stderr}");
    assert!(stdout.is_empty());
    assert!(!listening(port).await, "nothing was started");
    assert!(!state_dir(&home).join("backend.log").exists());
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_api_ends_with_a_launcher_killed_outright() {
    let home = temp_dir("launcher-sigkill");
    let port = free_port();
    let (mut launcher, announced) = Launcher::headless(&home, port, &[]);
    // No handler in the launcher runs on SIGKILL: only the kernel can tell the API.
    launcher.signal("KILL");
    let (status, _) = launcher.exit().await;
    assert_eq!(status.code(), None, "killed by a signal");
    assert!(
        ended(announced.api_pid).await,
        "the API outlived a SIGKILLed launcher"
    );
    assert!(!listening(port).await);
    // It was SIGTERM, so the API shut down gracefully.
    let events = std::fs::read_to_string(state_dir(&home).join("backend.log")).unwrap();
    assert!(events.contains(r#""event":"backend_stopping""#), "{events}");
}

#[tokio::test]
async fn the_launcher_fails_when_the_api_dies() {
    let home = temp_dir("launcher-api-dies");
    let port = free_port();
    let (mut launcher, announced) = Launcher::headless(&home, port, &[]);
    assert!(signal(announced.api_pid, "KILL"));
    let (status, stderr) = launcher.exit().await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("msguide: msguide-api exited on its own"),
        "{stderr}"
    );
    assert!(!listening(port).await);
    assert!(!stderr.contains(announced.token.as_str()));
}

#[tokio::test]
async fn an_api_that_never_gets_ready_is_reported_with_its_stage() {
    let home = temp_dir("launcher-not-ready");
    let port = free_port();
    // The API refuses this configuration at start-up.
    let (status, stdout, stderr) = run(
        &home,
        &["start", "--headless", "--port", &port.to_string()],
        &[("MSGUIDE_GUIDANCE_PROVIDER", "no-such-provider")],
    );
    assert!(!status.success());
    assert!(stdout.is_empty(), "no token for an API that is not ready");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with("msguide: msguide-api was not ready: it exited"),
        "{stderr}"
    );
    assert!(last.contains("stage=health"), "{stderr}");
    assert!(last.contains("lastError="), "{stderr}");
    assert!(last.contains(&state_dir(&home).join("backend.log").display().to_string()));
    assert!(
        stderr.contains("Unknown guidance provider"),
        "the API's own reason: {stderr}"
    );
    assert!(!listening(port).await);
}

#[test]
fn ports_outside_1024_to_65535_are_refused_and_help_names_the_options() {
    let home = temp_dir("launcher-cli");
    for port in ["80", "1023", "65536"] {
        let (status, stdout, stderr) = run(&home, &["start", "--headless", "--port", port], &[]);
        assert_eq!(status.code(), Some(2), "{port}: {stderr}");
        assert!(stderr.contains("1024..=65535"), "{port}: {stderr}");
        assert!(stdout.is_empty());
    }
    let (status, help, _) = run(&home, &["start", "--help"], &[]);
    assert!(status.success());
    for option in ["--port", "--headless", "1024-65535"] {
        assert!(help.contains(option), "{option}: {help}");
    }
    let (status, help, _) = run(&home, &["--help"], &[]);
    assert!(status.success());
    assert!(help.contains("start"), "{help}");
}
