//! `msguide.exe start --headless` under Wine: it starts `msguide-api.exe` and prints the
//! token; the API serves over loopback to the Linux side; the diagnostic log lands under
//! `%LOCALAPPDATA%\msguide`; and the API ends with a launcher killed outright.

use std::{
    fs::File,
    net::SocketAddr,
    process::{Child, Stdio},
    time::Instant,
};

use e2e::platform::WAIT;
use serde_json::json;

use super::Wine;
use crate::suite::support::{Req, announcement, b64, button, free_port, png_bytes, stdout_lines};

/// The launcher under Wine; killed (with its prefix) when the test ends.
struct Launcher {
    child: Child,
    wine: Wine,
}

impl Launcher {
    /// Starts it and reads its announcement: the lines, and the token.
    fn headless(name: &str, port: u16) -> (Self, Vec<String>, String) {
        let wine = Wine::new(name);
        let stderr = wine.scratch().join("launcher.stderr");
        let mut child = wine
            .command(
                "msguide.exe",
                &["start", "--headless", "--port", &port.to_string()],
            )
            .stdout(Stdio::piped())
            .stderr(File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let receiver = stdout_lines(child.stdout.take().unwrap());
        let launcher = Self { child, wine };
        let lines = announcement(&receiver, || {
            std::fs::read_to_string(&stderr).unwrap_or_default()
        });
        // On Windows the announcement says how to set the token in PowerShell or cmd.
        let token = lines
            .iter()
            .find_map(|line| {
                let rest = line.split("MSGUIDE_LOCAL_TOKEN").nth(1)?;
                let value = rest.trim_start_matches(['=', ' ', '"', '\'']);
                Some(value.trim_end_matches(['"', '\'']).trim().to_owned())
            })
            .unwrap_or_else(|| panic!("no token line in {lines:?}"));
        (launcher, lines, token)
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until nothing accepts on `addr`: wineserver holds a socket's descriptor too, and
/// closes it a moment after the process that owned it is gone.
async fn refused(addr: SocketAddr) -> bool {
    let deadline = Instant::now() + WAIT;
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    true
}

#[tokio::test]
async fn the_launcher_serves_the_api_with_its_token_and_takes_it_down_when_killed() {
    let port = free_port();
    let (mut launcher, lines, token) = Launcher::headless("launcher", port);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    assert!(
        lines[0].starts_with(&format!("MSGuide API ready at http://127.0.0.1:{port}")),
        "{lines:?}"
    );
    assert_eq!(
        token.len(),
        43,
        "32 bytes, base64 without padding: {lines:?}"
    );
    assert_eq!(launcher.wine.pids_of("msguide-api.exe").len(), 1);

    // The API, from the Linux side: health, the boundary, a session and a guidance round
    // with a PNG.
    let health = Req::new(addr, "GET", "/health").send().await;
    assert_eq!(
        health.text(),
        r#"{"status":"ok","mode":"demo","version":"0.2.0"}"#
    );
    let unauthenticated = Req::new(addr, "POST", "/v1/sessions").send().await;
    assert_eq!(unauthenticated.status, 401);
    let wrong = Req::new(addr, "POST", "/v1/sessions")
        .bearer("not-the-token")
        .send()
        .await;
    assert_eq!(wrong.status, 401);
    let browser = Req::new(addr, "POST", "/v1/sessions")
        .bearer(&token)
        .header("Origin", "http://example.com")
        .send()
        .await;
    assert_eq!(browser.status, 403);
    let session = Req::new(addr, "POST", "/v1/sessions")
        .bearer(&token)
        .send()
        .await;
    assert_eq!(session.status, 200, "{}", session.text());
    let session = session.json()["sessionId"].as_str().unwrap().to_owned();
    let captured = time::OffsetDateTime::now_utc() - time::Duration::seconds(1);
    let body = json!({
        "sessionId": session,
        "prompt": "What should I do next?",
        "consent": true,
        "observation": {
            "id": "obs-1",
            "windowId": "win-1",
            "application": "MSGuide Demo",
            "capturedAt": captured.format(&time::format_description::well_known::Rfc3339).unwrap(),
            "width": 64,
            "height": 48,
            "ocrText": "Build overview",
            "elements": [button("View logs"), button("Other")],
            "imageBase64": b64(&png_bytes(64, 48, Some("private-exif"))),
        },
    });
    let guidance = Req::new(addr, "POST", "/v1/guidance")
        .bearer(&token)
        .json(&body)
        .send()
        .await;
    assert_eq!(guidance.status, 200, "{}", guidance.text());
    let answer = guidance.json();
    assert_eq!(
        answer["instruction"], "Demo: select View logs yourself, then check the screen again.",
        "{answer}"
    );
    assert_eq!(answer["status"], "next_step");

    // The diagnostic log is under %LOCALAPPDATA%\msguide, and holds no token.
    let log = launcher
        .wine
        .local_app_data()
        .join("msguide")
        .join("backend.log");
    let events =
        std::fs::read_to_string(&log).unwrap_or_else(|err| panic!("{}: {err}", log.display()));
    assert!(events.contains(r#""event":"backend_started""#), "{events}");
    assert!(events.contains(r#""event":"guidance"#), "{events}");
    assert!(!events.contains(&token));

    // Killed outright (no handler of its own runs), the launcher still takes the API with it.
    launcher.child.kill().unwrap();
    launcher.child.wait().unwrap();
    assert!(
        launcher.wine.until_none("msguide-api.exe").await,
        "msguide-api.exe outlived the launcher"
    );
    assert!(refused(addr).await, "the API's port still accepts");
}

#[tokio::test]
async fn ctrl_c_stops_the_launcher_and_the_api_cleanly() {
    let port = free_port();
    let (mut launcher, _, _) = Launcher::headless("launcher-ctrl-c", port);
    assert_eq!(launcher.wine.pids_of("msguide-api.exe").len(), 1);
    // Wine turns SIGINT into the console's Ctrl-C event, which the launcher waits for.
    let pid = launcher.child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = launcher.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the launcher did not stop");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let stderr = std::fs::read_to_string(launcher.wine.scratch().join("launcher.stderr")).unwrap();
    assert!(status.success(), "{status}\n{stderr}");
    assert!(stderr.contains("msguide: stopped"), "{stderr}");
    assert!(
        launcher.wine.until_none("msguide-api.exe").await,
        "msguide-api.exe outlived the launcher"
    );
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    assert!(refused(addr).await, "the API's port still accepts");
}
