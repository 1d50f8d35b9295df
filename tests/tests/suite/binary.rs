//! The real `msguide-api` binary: start-up refusals and a served request.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use super::support::{Req, TOKEN, free_port, temp_dir};

/// The `msguide-api` cargo built next to this test executable.
pub(super) fn binary() -> PathBuf {
    e2e::platform::binary("msguide-api")
}

/// Waits until the child listens on `port`.
pub(super) async fn listening(port: u16) -> std::net::SocketAddr {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < deadline, "the binary never listened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    addr
}

fn refusal(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut command = Command::new(binary());
    command
        .args(args)
        .env_remove("MSGUIDE_MODE")
        .env_remove("MSGUIDE_GUIDANCE_PROVIDER")
        .env_remove("MSGUIDE_MODEL_URL")
        .env_remove("MSGUIDE_MODEL_NAME")
        .env_remove("MSGUIDE_MODEL_API_KEY")
        .env_remove("MSGUIDE_ALLOW_REMOTE_MODEL")
        .env("MSGUIDE_LOCAL_TOKEN", TOKEN);
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.stdin(Stdio::null()).output().unwrap();
    assert!(!output.status.success(), "{args:?} {env:?} started");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
    assert!(!stderr.contains(TOKEN));
    stderr
}

#[test]
fn refuses_bad_configuration_with_one_line() {
    assert!(
        refusal(&["--port", "0"], &[("MSGUIDE_MODE", "production")])
            .contains("Only local MSGUIDE_MODE=demo is supported")
    );
    assert!(
        refusal(&["--port", "0"], &[("MSGUIDE_MODE", "enterprise")])
            .contains("Only local MSGUIDE_MODE=demo is supported")
    );
    // Each refusal names what would be valid.
    let provider = refusal(&["--port", "0"], &[("MSGUIDE_GUIDANCE_PROVIDER", "model")]);
    assert!(
        provider.contains(
            "Unknown guidance provider: set MSGUIDE_GUIDANCE_PROVIDER to demo (the default) or openai-compatible"
        ),
        "{provider}"
    );
    let model = |extra: &[(&str, &str)]| {
        let mut env = vec![("MSGUIDE_GUIDANCE_PROVIDER", "openai-compatible")];
        env.extend_from_slice(extra);
        refusal(&["--port", "0"], &env)
    };
    assert!(
        model(&[])
            .contains("Invalid or unapproved model configuration: MSGUIDE_MODEL_URL is not set"),
        "the first missing variable is named"
    );
    assert!(
        model(&[(
            "MSGUIDE_MODEL_URL",
            "http://127.0.0.1:9/v1/chat/completions"
        )])
        .contains("Invalid or unapproved model configuration: MSGUIDE_MODEL_NAME is not set")
    );
    let remote = model(&[
        (
            "MSGUIDE_MODEL_URL",
            "https://models.example.com/v1/chat/completions",
        ),
        ("MSGUIDE_MODEL_NAME", "m"),
    ]);
    assert!(
        remote.contains("Invalid or unapproved model configuration: check MSGUIDE_MODEL_URL"),
        "{remote}"
    );
    assert!(refusal(&["--host", "0.0.0.0", "--port", "0"], &[]).contains("loopback"));
    assert!(refusal(&["--host", "192.0.2.1", "--port", "0"], &[]).contains("loopback"));
    // Named a launcher that is not its parent: that launcher is gone, so nothing is served.
    if cfg!(target_os = "linux") {
        assert!(
            refusal(&["--port", "0"], &[("MSGUIDE_LAUNCHER_PID", "1")])
                .contains("the launcher that started it has already exited")
        );
    }
}

#[tokio::test]
async fn serves_with_a_token_and_answers_503_without_one() {
    for (token, expected) in [(Some(TOKEN), 200), (None, 503)] {
        let port = free_port();
        let mut command = Command::new(binary());
        command
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .env_remove("MSGUIDE_LOCAL_TOKEN")
            .stderr(Stdio::null());
        if let Some(token) = token {
            command.env("MSGUIDE_LOCAL_TOKEN", token);
        }
        let mut child = command.spawn().unwrap();
        let addr = listening(port).await;
        let health = Req::new(addr, "GET", "/health").send().await;
        assert_eq!(
            health.text(),
            r#"{"status":"ok","mode":"demo","version":"0.2.0"}"#
        );
        let session = Req::new(addr, "POST", "/v1/sessions")
            .bearer(TOKEN)
            .send()
            .await;
        assert_eq!(session.status, expected);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

#[tokio::test]
async fn lifecycle_is_logged_and_sigterm_stops_cleanly() {
    let log = temp_dir("lifecycle").join("logs/backend.log");
    let port = free_port();
    let mut child = Command::new(binary())
        .args(["--port", &port.to_string()])
        .env("MSGUIDE_LOCAL_TOKEN", TOKEN)
        .env("MSGUIDE_DIAGNOSTIC_LOG", &log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = listening(port).await;
    assert_eq!(
        Req::new(addr, "POST", "/v1/sessions")
            .bearer(TOKEN)
            .send()
            .await
            .status,
        200
    );
    assert!(e2e::sigterm(child.id()));
    let status = child.wait().unwrap();
    assert!(status.success(), "SIGTERM is a clean stop: {status}");
    let events: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        events,
        ["backend_starting", "backend_started", "backend_stopping"]
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!stderr.contains(TOKEN), "the token never reaches a log");
    std::fs::remove_dir_all(log.parent().and_then(Path::parent).unwrap()).unwrap();
}

/// Started without a usable token, the service says so once at start-up, naming the variable
/// and the shape it must have, never the value; its log has no colour codes when stderr is a
/// file (the launcher's backend.log), only when it is a terminal.
#[tokio::test]
async fn start_up_explains_a_missing_or_malformed_token_in_a_plain_log() {
    let dir = temp_dir("token-warning");
    for (token, says) in [
        (None, "MSGUIDE_LOCAL_TOKEN is not set"),
        (
            Some("not a token"),
            "MSGUIDE_LOCAL_TOKEN is not a valid token",
        ),
    ] {
        let log = dir.join("backend.log");
        let port = free_port();
        let mut command = Command::new(binary());
        command
            .args(["--port", &port.to_string()])
            .env_remove("MSGUIDE_LOCAL_TOKEN")
            .env_remove("NO_COLOR")
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(token) = token {
            command.env("MSGUIDE_LOCAL_TOKEN", token);
        }
        let mut child = command.spawn().unwrap();
        let addr = listening(port).await;
        assert_eq!(
            Req::new(addr, "POST", "/v1/sessions").send().await.status,
            503
        );
        child.kill().unwrap();
        child.wait().unwrap();
        let text = std::fs::read(&log).unwrap();
        assert!(!text.contains(&0x1b), "no ANSI escape in a log file");
        let text = String::from_utf8(text).unwrap();
        let warning = text
            .lines()
            .find(|l| l.contains(says))
            .unwrap_or_else(|| panic!("no start-up warning in {text}"));
        assert!(warning.contains("503"), "{warning}");
        assert!(
            warning.contains("letters, digits, '-', '.', '_', '~', '+' or '/'"),
            "the shape is named: {warning}"
        );
        if let Some(token) = token {
            assert!(!text.contains(token), "the value is never logged");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
