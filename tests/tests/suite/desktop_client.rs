//! The desktop client on a real window: `msguide start --headless` serves the API, the egui
//! "MSGuide Demo" window runs on a private Xvfb + openbox + session bus, and for each stage
//! `msguide-desktop observe` and `guide` capture it over AT-SPI and ask the API; the target's
//! box, placed with the window's geometry as `xwininfo` reports it, is clicked with real
//! XTEST input (enigo) and the demo moves on. Withheld consent sends nothing; pixels go
//! only when shared. The guidance window itself is driven with real clicks, and `msguide start`
//! opens it and closes it with the API.

use std::{
    fs::File,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::mpsc::Receiver,
    time::{Duration, Instant},
};

use e2e::{
    display::{Desktop, require},
    platform::{WAIT, binary},
};
use serde_json::Value;

use super::support::{Req, assert_readable, free_port, stdout_lines, temp_dir};

pub(super) const DEMO: &str = "MSGuide Demo";
pub(super) const PROMPT: &str = "My build is broken, what next?";

/// The four stages: the text the demo shows and the button the demo provider points at.
const STAGES: [(&str, Option<&str>); 4] = [
    ("Build overview", Some("View logs")),
    ("Build failed: exit code 1", Some("Open troubleshooting")),
    (
        "Check compiler errors and missing dependencies",
        Some("Mark resolved"),
    ),
    ("Issue resolved", None),
];

/// The next line from `lines` that satisfies `wanted`, or a failure naming `what`.
pub(super) fn wait_for_line(
    lines: &Receiver<String>,
    what: &str,
    wanted: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if wanted(&line) => return line,
            Ok(_) => {}
            Err(_) => panic!("no {what} within {WAIT:?}"),
        }
    }
}

/// A headless launcher serving the API on a free port; stopped with SIGTERM (which stops
/// its API too) when dropped.
pub(super) struct Api {
    launcher: Child,
    addr: SocketAddr,
    pub(super) token: String,
    /// The launcher's home, removed once it has stopped.
    home: PathBuf,
}

impl Api {
    pub(super) fn start(home: &Path) -> Self {
        let port = free_port();
        let mut launcher = Command::new(binary("msguide"))
            .args(["start", "--headless", "--port", &port.to_string()])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("XDG_STATE_HOME", home.join("state"))
            .env("MSGUIDE_ENABLE_AUDIT", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(home.join("launcher.stderr")).unwrap())
            .spawn()
            .unwrap();
        let stdout = stdout_lines(launcher.stdout.take().unwrap());
        let line = wait_for_line(&stdout, "token line from the launcher", |l| {
            l.trim().starts_with("export MSGUIDE_LOCAL_TOKEN=")
        });
        let token = line
            .trim()
            .trim_start_matches("export MSGUIDE_LOCAL_TOKEN=")
            .to_owned();
        Self {
            launcher,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            token,
            home: home.to_path_buf(),
        }
    }

    pub(super) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many events the API's audit holds.
    pub(super) async fn audit_count(&self) -> u64 {
        let resp = Req::new(self.addr, "GET", "/admin/audit-log")
            .bearer(&self.token)
            .send()
            .await;
        assert_eq!(resp.status, 200, "{}", resp.text());
        resp.json()["count"].as_u64().unwrap()
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = e2e::sigterm(self.launcher.id());
        let deadline = Instant::now() + WAIT;
        while matches!(self.launcher.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.launcher.kill();
        let _ = self.launcher.wait();
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// A program on the desktop, killed when dropped.
pub(super) struct Running {
    child: Child,
    pub(super) stdout: Receiver<String>,
    pub(super) stderr: Receiver<String>,
}

impl Running {
    pub(super) fn start(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = stdout_lines(child.stdout.take().unwrap());
        let stderr = stdout_lines_of_stderr(&mut child);
        Self {
            child,
            stdout,
            stderr,
        }
    }

    /// The program's process id.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `msguide-desktop` on `desktop`, pointed at `api`.
fn client(desktop: &Desktop, api: &Api, args: &[&str]) -> Output {
    desktop
        .command(binary("msguide-desktop"))
        .args(args)
        .env("MSGUIDE_API_URL", api.url())
        .env("MSGUIDE_LOCAL_TOKEN", &api.token)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `guide` on the demo window with consent and `extra` options: one real round trip.
fn guide_with_consent(desktop: &Desktop, api: &Api, extra: &[&str]) -> Output {
    let mut args = vec![
        "guide",
        "--window-title",
        DEMO,
        "--prompt",
        PROMPT,
        "--consent",
    ];
    args.extend_from_slice(extra);
    client(desktop, api, &args)
}

pub(super) fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "msguide-desktop failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// The number after `key` (like `captured `) in the tool's stderr.
fn figure(stderr: &[u8], key: &str) -> u64 {
    let text = String::from_utf8_lossy(stderr);
    text.split(key)
        .nth(1)
        .and_then(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .find(|s| !s.is_empty())
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `{key}` figure in {text}"))
}

/// A window's client area on screen, as the X server reports it; `None` while it does not
/// exist.
pub(super) fn try_geometry(desktop: &Desktop, title: &str) -> Option<(i64, i64, i64, i64)> {
    let out = desktop
        .command("xwininfo")
        .args(["-name", title])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> i64 {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in xwininfo's {text}"))
    };
    Some((
        field("Absolute upper-left X:"),
        field("Absolute upper-left Y:"),
        field("Width:"),
        field("Height:"),
    ))
}

pub(super) fn window_geometry(desktop: &Desktop, title: &str) -> (i64, i64, i64, i64) {
    try_geometry(desktop, title).unwrap_or_else(|| panic!("no window {title:?}"))
}

/// The screen pixel at the centre of a normalised `[x, y, w, h]` box of the window `title`.
pub(super) fn centre(desktop: &Desktop, title: &str, bounds: &Value) -> (i64, i64) {
    let (x, y, width, height) = window_geometry(desktop, title);
    let b: Vec<f64> = (0..4).map(|i| bounds[i].as_f64().unwrap()).collect();
    (
        x + ((b[0] + b[2] / 2.0) * width as f64).round() as i64,
        y + ((b[1] + b[3] / 2.0) * height as f64).round() as i64,
    )
}

/// A real left click (XTEST, through enigo) at `(x, y)` on `desktop`'s display.
pub(super) fn click(desktop: &Desktop, (x, y): (i64, i64)) {
    use enigo::{Button, Coordinate, Direction, Enigo, Mouse, Settings};
    let settings = Settings {
        x11_display: Some(desktop.display().to_owned()),
        ..Settings::default()
    };
    let mut enigo = Enigo::new(&settings).unwrap();
    let at = |v: i64| i32::try_from(v).unwrap();
    enigo.move_mouse(at(x), at(y), Coordinate::Abs).unwrap();
    enigo.button(Button::Left, Direction::Click).unwrap();
}

/// The guidance window (`msguide-desktop gui`) over the demo window, talking to the API at
/// `url` with `token`; killed when dropped.
pub(super) fn demo_window(desktop: &Desktop, url: &str, token: &str) -> Running {
    let mut command = desktop.command(binary("msguide-desktop"));
    command
        .args(["gui", "--window-title", DEMO, "--prompt", PROMPT])
        .env("MSGUIDE_API_URL", url)
        .env("MSGUIDE_LOCAL_TOKEN", token);
    Running::start(command)
}

/// Clicks the guidance window's element `label`, which must be enabled.
pub(super) fn press_in_window(desktop: &Desktop, label: &str) {
    let found = element(desktop, "MSGuide", label);
    assert_eq!(found["isEnabled"], true, "{label:?} is disabled");
    click(desktop, centre(desktop, "MSGuide", &found["box"]));
}

/// The element labelled `label` in a fresh observation of the window `title`, waiting for it
/// to appear.
pub(super) fn element(desktop: &Desktop, title: &str, label: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let observation = wait_for_window(desktop, title);
        let found = observation["elements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["label"] == label)
            .cloned();
        if let Some(found) = found {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "no {label:?} in {title:?}: {observation}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `msguide-desktop observe --window-title title` on `desktop`, with no API to talk to.
fn observe_without_api(desktop: &Desktop, title: &str) -> Output {
    desktop
        .command(binary("msguide-desktop"))
        .args(["observe", "--window-title", title])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Waits until `msguide-desktop observe` sees the window titled `title`: the app prints
/// before it maps, the window manager lists it a moment later, and its accessibility tree
/// comes after that. Observing needs no API.
pub(super) fn wait_for_window(desktop: &Desktop, title: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let out = observe_without_api(desktop, title);
        if out.status.success() {
            return json_of(&out);
        }
        assert!(
            Instant::now() < deadline,
            "no window {title:?} within {WAIT:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A private desktop with the API and the demo window at its first stage. Fields drop in
/// order: the demo, the API, then the display.
struct Scene {
    demo: Running,
    api: Api,
    desktop: Desktop,
}

impl Scene {
    fn start(tag: &str) -> Self {
        let desktop = Desktop::start();
        let api = Api::start(&temp_dir(tag));
        let demo = Running::start(desktop.command(binary("msguide-demo")));
        wait_for_line(&demo.stdout, "first stage of the demo", |l| l == "stage 0");
        wait_for_window(&desktop, DEMO);
        Self { demo, api, desktop }
    }
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

#[tokio::test(flavor = "multi_thread")]
async fn the_demo_workflow_completes_by_clicking_each_outlined_target() {
    require("xdotool", "xdotool");
    let Scene { desktop, api, demo } = &Scene::start("desktop-client");

    let (mut capture_ms, mut guidance_us, mut health_us) = (Vec::new(), Vec::new(), Vec::new());
    for (stage, (text, button)) in STAGES.iter().enumerate() {
        // What would be sent: the demo's elements, boxes inside the window.
        let observed = client(desktop, api, &["observe", "--window-title", DEMO]);
        let observation = json_of(&observed);
        capture_ms.push(figure(&observed.stderr, "elements in "));
        assert_eq!(observation["application"], DEMO);
        assert_eq!(observation["automationComplete"], true);
        assert!(
            observation.get("imageBase64").is_none(),
            "no pixels unless shared"
        );
        let ocr = observation["ocrText"].as_str().unwrap();
        assert!(ocr.contains(text), "stage {stage}: {ocr}");

        let guided = guide_with_consent(desktop, api, &[]);
        let guidance = json_of(&guided);
        guidance_us.push(figure(&guided.stderr, "guidance round trip "));
        health_us.push(figure(&guided.stderr, "health round trip "));
        assert_eq!(guidance["mode"], "demo");
        let Some(label) = button else {
            assert_eq!(guidance["status"], "completed", "{guidance}");
            assert!(guidance["target"].is_null());
            break;
        };
        assert_eq!(guidance["status"], "next_step", "{guidance}");
        let target = &guidance["target"];
        assert_eq!(target["label"], *label);

        // The centre of the target's box, placed with the X server's own geometry of the
        // window, is where the client's outline is and where the button is.
        let (cx, cy) = centre(desktop, DEMO, &target["box"]);
        let outline = String::from_utf8_lossy(&guided.stderr).into_owned();
        assert!(
            outline.contains("outline at"),
            "the checks refused: {outline}"
        );
        let ox = figure(&guided.stderr, "outline at x=") as i64;
        let oy = figure(&guided.stderr, " y=") as i64;
        let ow = figure(&guided.stderr, "width=") as i64;
        let oh = figure(&guided.stderr, "height=") as i64;
        assert!(
            (ox..ox + ow).contains(&cx) && (oy..oy + oh).contains(&cy),
            "{outline}"
        );

        click(desktop, (cx, cy));
        let next = format!("stage {}", stage + 1);
        wait_for_line(&demo.stdout, &next, |l| l == next);
    }
    // One audit event per session and per guidance round trip: all came from this API.
    assert!(api.audit_count().await >= 8);

    eprintln!(
        "figures (debug build): capture of the demo's elements median {} ms {capture_ms:?}; guidance round trip median {} us {guidance_us:?}; /health round trip median {} us {health_us:?}",
        median(capture_ms.clone()),
        median(guidance_us.clone()),
        median(health_us.clone()),
    );
}

/// `guide --task file` on the demo window (with `--plan` when `plan`): one round of a task.
fn task_round(desktop: &Desktop, api: &Api, file: &Path, plan: bool) -> Output {
    let file = file.to_str().unwrap();
    let mut extra = vec!["--task", file];
    if plan {
        extra.push("--plan");
    }
    let out = guide_with_consent(desktop, api, &extra);
    assert!(
        out.status.success(),
        "msguide-desktop failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The task file's JSON.
fn task_file(file: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap()
}

/// The demo's plan from `stage` on: the tail of its workflow, then the completion boundary.
fn demo_plan(stage: usize) -> String {
    let mut text = String::new();
    for (n, (_, button)) in STAGES[stage..].iter().enumerate() {
        if let Some(label) = button {
            text.push_str(&format!("{}. Demo: select {label}.\n", n + 1));
        }
    }
    text + "then: completion_candidate: Review the demo's Issue resolved state; goal completion is not independently verified.\n"
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_carried_in_a_file_walks_the_demo_with_a_growing_history_and_plans_that_follow_the_stage()
 {
    let Scene { desktop, api, demo } = &Scene::start("desktop-task");
    let dir = temp_dir("desktop-task-file");
    let file = dir.join("task.json");

    // Each stage: first a plan round (the person reads the plan and does not act yet), then a
    // single-step round; then the target is clicked. All are steps of one task, and each step
    // that pointed at a button enters the history at the next round, `no_progress` when the
    // screen had not changed and `screen_changed` after the click.
    let mut expected: Vec<Value> = Vec::new();
    let mut echoed: Vec<(u64, String)> = Vec::new();
    let mut task_id = String::new();
    let mut step = 0_u64;
    let mut taken: Option<(u64, &str)> = None;
    let mut clicked = false;
    for (stage, (_, button)) in STAGES.iter().enumerate() {
        for plan in [true, false] {
            step += 1;
            let out = task_round(desktop, api, &file, plan);
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            let state = task_file(&file);
            if step == 1 {
                task_id = state["taskId"].as_str().unwrap().to_owned();
                let id = uuid::Uuid::parse_str(&task_id).unwrap();
                assert_eq!((id.get_version_num(), id.to_string()), (4, task_id.clone()));
            }
            if let Some((at, label)) = taken.take() {
                let outcome = if clicked {
                    "screen_changed"
                } else {
                    "no_progress"
                };
                expected.push(serde_json::json!(
                    {"step": at, "label": label, "action": "invoke", "outcome": outcome}
                ));
            }
            // What this round sent, as the file keeps it: one task, the step, the history.
            let history = state["history"].as_array().unwrap();
            assert_eq!(state["taskId"], task_id.as_str(), "one task throughout");
            assert_eq!(state["step"], step + 1, "stage {stage}, plan {plan}");
            let seen: Vec<Value> = history
                .iter()
                .map(|h| {
                    serde_json::json!({"step": h["step"], "label": h["label"],
                        "action": h["action"], "outcome": h["outcome"]})
                })
                .collect();
            assert_eq!(seen, expected, "the history sent at step {step}");
            assert!(
                stderr.contains(&format!(
                    "task {task_id} step {step} sent with {} history steps; next step {}",
                    expected.len(),
                    step + 1
                )),
                "{stderr}"
            );
            // Each step's after-capture is the next step's capture; ids are the elements'.
            for pair in history.windows(2) {
                assert_eq!(pair[0]["afterObservationId"], pair[1]["observationId"]);
            }
            for h in history {
                assert!(
                    h["targetId"].as_str().unwrap().starts_with("element-"),
                    "{h}"
                );
                if let Some((_, id)) = echoed.iter().find(|(at, _)| h["step"] == *at) {
                    assert_eq!(h["observationId"], id.as_str(), "{h}");
                }
            }
            if plan {
                // The plan is the tail of the workflow after this stage, numbered.
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                assert_eq!(text, demo_plan(stage), "stage {stage}");
            } else {
                let guidance = json_of(&out);
                assert_eq!(guidance["taskId"], task_id.as_str());
                assert_eq!(guidance["step"], step);
                let id = guidance["observationId"].as_str().unwrap().to_owned();
                echoed.push((step, id));
            }
            let Some(label) = button else {
                assert!(!stderr.contains("outline at"), "{stderr}");
                continue;
            };
            // The plan's current step, or the target, is outlined on the button.
            let (cx, cy) = centre(desktop, DEMO, &element(desktop, DEMO, label)["box"]);
            assert!(
                stderr.contains("outline at"),
                "the checks refused: {stderr}"
            );
            let ox = figure(&out.stderr, "outline at x=") as i64;
            let oy = figure(&out.stderr, " y=") as i64;
            let ow = figure(&out.stderr, "width=") as i64;
            let oh = figure(&out.stderr, "height=") as i64;
            assert!(
                (ox..ox + ow).contains(&cx) && (oy..oy + oh).contains(&cy),
                "{stderr}"
            );
            taken = Some((step, *label));
            clicked = !plan;
            if !plan {
                click(desktop, (cx, cy));
                let next = format!("stage {}", stage + 1);
                wait_for_line(&demo.stdout, &next, |l| l == next);
            }
        }
    }
    assert_eq!(step, 8);
    assert_eq!(expected.len(), 6, "{expected:?}");

    // The API saw the task: each request's diagnostic lines carry its id and step, and no
    // history label or screen text.
    let log = std::fs::read_to_string(api.home.join("state/msguide/backend.log")).unwrap();
    for n in 1..=8 {
        assert!(
            log.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|l| l["taskId"] == task_id.as_str() && l["step"] == n),
            "no diagnostic line for step {n}"
        );
    }
    assert!(!log.contains("Mark resolved") && !log.contains("Build failed"));

    // --new-task starts over in the same file.
    let out = task_round(desktop, api, &file, false);
    let guidance = json_of(&out);
    assert_eq!(guidance["step"], 9);
    let out = guide_with_consent(
        desktop,
        api,
        &["--task", file.to_str().unwrap(), "--new-task"],
    );
    let guidance = json_of(&out);
    assert_eq!(guidance["step"], 1);
    assert_ne!(guidance["taskId"], task_id.as_str());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_consent_nothing_reaches_the_api_and_pixels_only_when_shared() {
    let Scene { desktop, api, .. } = &Scene::start("desktop-consent");
    // The launcher's readiness check made a session; that is the baseline.
    let before = api.audit_count().await;

    let refused = client(
        desktop,
        api,
        &["guide", "--window-title", DEMO, "--prompt", PROMPT],
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(refused.stdout.is_empty());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("nothing was sent"), "{message}");
    assert!(message.contains("--consent"), "{message}");
    assert_eq!(api.audit_count().await, before, "no request arrived");

    // The same command with consent does reach it, so the count above could have moved.
    let sent = guide_with_consent(desktop, api, &[]);
    assert_eq!(json_of(&sent)["status"], "next_step");
    assert_eq!(
        api.audit_count().await,
        before + 2,
        "a session and a guidance"
    );

    // Pixels only when asked for: the window's PNG, which the API's sanitiser accepts.
    let observed = client(
        desktop,
        api,
        &["observe", "--window-title", DEMO, "--share-pixels"],
    );
    let image = json_of(&observed)["imageBase64"].as_str().unwrap().len();
    assert!(image > 0 && image <= 2_666_668, "{image} base64 characters");
    let with_pixels = guide_with_consent(desktop, api, &["--share-pixels"]);
    assert_eq!(json_of(&with_pixels)["status"], "next_step");
}

pub(super) const CONSENT: &str =
    "I consent to sending this snapshot and my request to the local MSGuide service";

#[tokio::test(flavor = "multi_thread")]
async fn the_window_sends_only_after_consent_and_outlines_a_click_through_target() {
    require("xdotool", "xdotool");
    let Scene { desktop, api, demo } = &Scene::start("desktop-outline");
    let _gui = demo_window(desktop, &api.url(), &api.token);
    let before = api.audit_count().await;
    let press = |label: &str| press_in_window(desktop, label);

    // Review first: the element list that will be sent, and Send waits for consent.
    press("Capture / review");
    let send = element(desktop, "MSGuide", "Send");
    assert_eq!(send["isEnabled"], false, "Send before consent");
    element(desktop, "MSGuide", "Application: MSGuide Demo");
    assert_eq!(
        api.audit_count().await,
        before,
        "capture alone sends nothing"
    );

    press(CONSENT);
    press("Send");
    element(
        desktop,
        "MSGuide",
        "Next step: Demo: select View logs yourself, then check the screen again.",
    );
    assert_eq!(
        api.audit_count().await,
        before + 2,
        "a session and a guidance"
    );

    // The outline surrounds the demo's button by three pixels on every side.
    let deadline = Instant::now() + WAIT;
    let outline = loop {
        if let Some(geometry) = try_geometry(desktop, "MSGuide outline") {
            break geometry;
        }
        assert!(Instant::now() < deadline, "no outline window");
        std::thread::sleep(Duration::from_millis(50));
    };
    let button = element(desktop, DEMO, "View logs");
    let (bx, by) = centre(desktop, DEMO, &button["box"]);
    let (ox, oy, ow, oh) = outline;
    assert!(
        (ox + 3..ox + ow - 3).contains(&bx) && (oy + 3..oy + oh - 3).contains(&by),
        "outline {outline:?} is not around the button's centre ({bx}, {by})"
    );

    // Once the window moves, the outline no longer marks the target: it goes, and says why.
    let moved = desktop
        .command("xdotool")
        .args([
            "search",
            "--name",
            "^MSGuide Demo$",
            "windowmove",
            "700",
            "600",
        ])
        .status()
        .unwrap();
    assert!(moved.success());
    element(
        desktop,
        "MSGuide",
        "Not outlined: the window moved or was resized since the capture: capture again",
    );
    assert_eq!(try_geometry(desktop, "MSGuide outline"), None);

    // Check next step: a fresh capture for review, the outline gone, consent asked again.
    press("Check next step");
    element(desktop, "MSGuide", "Application: MSGuide Demo");
    let send = element(desktop, "MSGuide", "Send");
    assert_eq!(send["isEnabled"], false, "consent is per upload");
    assert_eq!(try_geometry(desktop, "MSGuide outline"), None);
    assert_eq!(api.audit_count().await, before + 2, "nothing resent");

    // Sent again: the outline lies over the button where it now is, and lets the click
    // through to it (suite::desktop_outline checks what a person sees through it).
    press(CONSENT);
    press("Send");
    let deadline = Instant::now() + WAIT;
    let (ox, oy, ow, oh) = loop {
        if let Some(geometry) = try_geometry(desktop, "MSGuide outline") {
            break geometry;
        }
        assert!(Instant::now() < deadline, "no outline window");
        std::thread::sleep(Duration::from_millis(50));
    };
    let (bx, by) = centre(desktop, DEMO, &element(desktop, DEMO, "View logs")["box"]);
    assert!((ox + 3..ox + ow - 3).contains(&bx) && (oy + 3..oy + oh - 3).contains(&by));
    click(desktop, (bx, by));
    wait_for_line(&demo.stdout, "stage 1", |l| l == "stage 1");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_past_16_steps_sends_only_its_last_16_and_a_bad_task_file_names_the_remedy() {
    let Scene { desktop, api, .. } = &Scene::start("desktop-task-16");
    let dir = temp_dir("desktop-task-16-file");
    let file = dir.join("task.json");
    // Nobody clicks: each round points at View logs again, a step without progress.
    for step in 1..=19_u64 {
        let out = task_round(desktop, api, &file, false);
        let guidance = json_of(&out);
        assert_eq!(guidance["step"], step);
        let sent: Vec<u64> = task_file(&file)["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                assert_eq!(h["outcome"], "no_progress", "{h}");
                h["step"].as_u64().unwrap()
            })
            .collect();
        let first = step.saturating_sub(16).max(1);
        assert_eq!(sent, (first..step).collect::<Vec<_>>(), "at step {step}");
    }
    // A task file that is not one: nothing is sent, and the sentence names the way out.
    std::fs::write(&file, "{}").unwrap();
    let out = task_round_failing(desktop, api, &file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_readable(
        &stderr,
        "is not a task msguide-desktop wrote: pass --new-task to start a new task in it",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `guide --task file` that must fail.
fn task_round_failing(desktop: &Desktop, api: &Api, file: &Path) -> Output {
    let out = guide_with_consent(desktop, api, &["--task", file.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    out
}

#[test]
fn a_send_that_reaches_nothing_keeps_the_consent_and_says_why_below_the_review_and_on_stderr() {
    require("xdotool", "xdotool");
    let desktop = &Desktop::start();
    let demo = Running::start(desktop.command(binary("msguide-demo")));
    wait_for_line(&demo.stdout, "the demo's first stage", |l| l == "stage 0");
    wait_for_window(desktop, DEMO);
    // An API address nothing listens on: the send cannot leave this machine's loopback.
    let url = format!("http://127.0.0.1:{}", free_port());
    let gui = demo_window(desktop, &url, "a-token-nobody-checks");
    let press = |label: &str| press_in_window(desktop, label);

    press("Capture / review");
    press(CONSENT);
    press("Send");
    let said = format!(
        "The local MSGuide API is not answering at {url}: start it with `msguide start` (or point MSGUIDE_API_URL at the running one), then try again"
    );
    let error = element(desktop, "MSGuide", &said);
    assert_readable(&said, "then try again");
    // The same sentence on stderr, without the library's words (no --verbose).
    let printed = wait_for_line(&gui.stderr, "the failure on stderr", |l| {
        l.contains("not answering")
    });
    assert_eq!(printed, format!("msguide-desktop: {said}"));
    // Nothing was sent, so the tick stays and Send can be pressed again at once.
    let send = element(desktop, "MSGuide", "Send");
    assert_eq!(send["isEnabled"], true, "the consent tick was cleared");
    // The error sits below the review, at the bottom of the window, where every error goes.
    let top = |e: &Value| e["box"][1].as_f64().unwrap();
    let review = element(desktop, "MSGuide", "Application: MSGuide Demo");
    assert!(
        top(&error) > top(&send) && top(&send) > top(&review),
        "error {error} is not below Send {send} and the review {review}"
    );
    assert!(
        top(&error) + error["box"][3].as_f64().unwrap() > 0.9,
        "the error is not at the bottom of the window: {error}"
    );

    // A second failure shows in the same place.
    press("Send");
    wait_for_line(&gui.stderr, "the second failure on stderr", |l| {
        l.contains("not answering")
    });
    let again = element(desktop, "MSGuide", &said);
    assert_eq!(again["box"], error["box"], "the error moved");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_window_keeps_a_task_and_lists_the_plan_with_its_current_step_outlined() {
    require("xdotool", "xdotool");
    let Scene { desktop, api, demo } = &Scene::start("desktop-plan");
    let _gui = demo_window(desktop, &api.url(), &api.token);
    let press = |label: &str| press_in_window(desktop, label);
    // The heading is the status and the plan's first step.
    let send = |first: &str| {
        press(CONSENT);
        press("Send");
        element(
            desktop,
            "MSGuide",
            &format!("Next step: Demo: select {first}."),
        );
    };
    let outline = || {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(geometry) = try_geometry(desktop, "MSGuide outline") {
                break geometry;
            }
            assert!(Instant::now() < deadline, "no outline window");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    element(
        desktop,
        "MSGuide",
        "Task step 1, 0 earlier steps in its history",
    );
    press("Ask for a plan: the next several steps, numbered");
    press("Capture / review");
    send("View logs");

    // The whole workflow, numbered; the first step's button is outlined.
    element(desktop, "MSGuide", "Plan (3 steps):");
    element(desktop, "MSGuide", "1. Demo: select View logs.");
    element(desktop, "MSGuide", "2. Demo: select Open troubleshooting.");
    element(desktop, "MSGuide", "3. Demo: select Mark resolved.");
    element(
        desktop,
        "MSGuide",
        "Then: After these steps the task may be done. Review the demo's Issue resolved state; goal completion is not independently verified.",
    );
    element(
        desktop,
        "MSGuide",
        "Task step 2, 0 earlier steps in its history",
    );
    let (ox, oy, ow, oh) = outline();
    let (bx, by) = centre(desktop, DEMO, &element(desktop, DEMO, "View logs")["box"]);
    assert!((ox + 3..ox + ow - 3).contains(&bx) && (oy + 3..oy + oh - 3).contains(&by));
    click(desktop, (bx, by));
    wait_for_line(&demo.stdout, "stage 1", |l| l == "stage 1");

    // The next round: the step taken is in the history sent, and the plan is the rest.
    press("Check next step");
    element(desktop, "MSGuide", "Application: MSGuide Demo");
    send("Open troubleshooting");
    element(desktop, "MSGuide", "Plan (2 steps):");
    element(desktop, "MSGuide", "1. Demo: select Open troubleshooting.");
    element(desktop, "MSGuide", "2. Demo: select Mark resolved.");
    element(
        desktop,
        "MSGuide",
        "Task step 3, 1 earlier step in its history",
    );
    let (ox, oy, ow, oh) = outline();
    let (bx, by) = centre(
        desktop,
        DEMO,
        &element(desktop, DEMO, "Open troubleshooting")["box"],
    );
    assert!((ox + 3..ox + ow - 3).contains(&bx) && (oy + 3..oy + oh - 3).contains(&by));
    let log = std::fs::read_to_string(api.home.join("state/msguide/backend.log")).unwrap();
    let steps: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["taskId"].is_string())
        .map(|l| l["step"].clone())
        .collect();
    assert!(steps.contains(&Value::from(1)) && steps.contains(&Value::from(2)));

    // New task: back to step 1 with no history.
    press("New task");
    element(
        desktop,
        "MSGuide",
        "Task step 1, 0 earlier steps in its history",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn msguide_start_opens_the_window_and_sigterm_closes_it_with_the_api() {
    let desktop = Desktop::start();
    let home = temp_dir("desktop-launcher");
    let port = free_port();
    let mut launcher = desktop
        .command(binary("msguide"))
        .args(["start", "--port", &port.to_string()])
        .env("HOME", &home)
        .env("XDG_STATE_HOME", home.join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(home.join("launcher.stderr")).unwrap())
        .spawn()
        .unwrap();

    // The launcher opens the window once the API is ready; a window found before its first
    // frame is drawn has no text yet (one loaded run saw it empty), so its text is waited for.
    let deadline = Instant::now() + WAIT;
    loop {
        let observation = wait_for_window(&desktop, "MSGuide");
        let text = observation["ocrText"].as_str().unwrap_or_default();
        if text.contains("Capture / review") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the window never showed its review within {WAIT:?}: {text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
        "the API serves"
    );

    let _ = e2e::sigterm(launcher.id());
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = launcher.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the launcher did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(home.join("launcher.stderr")).unwrap();
    assert!(stderr.contains("msguide: stopped"), "{status}: {stderr}");
    assert_eq!(try_geometry(&desktop, "MSGuide"), None, "the window closed");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the API stopped"
    );
    std::fs::remove_dir_all(&home).unwrap();
}

/// The processes whose environment names `XDG_RUNTIME_DIR=dir` (read from /proc).
fn processes_of_runtime_dir(dir: &Path) -> Vec<String> {
    let wanted = format!("XDG_RUNTIME_DIR={}", dir.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let environ = std::fs::read(path.join("environ")).ok()?;
            environ
                .split(|b| *b == 0)
                .any(|var| var == wanted.as_bytes())
                .then(|| std::fs::read_to_string(path.join("comm")).unwrap_or_default())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn msguide_start_on_a_desktop_without_a_session_bus_starts_one_and_stops_it() {
    let desktop = Desktop::start();
    // Short names: dbus-daemon refuses a socket path of about 100 characters, which the
    // scripts/test temporary folder and a long name reached.
    let home = temp_dir("bus");
    // The person's runtime directory, with no session bus in it and none named.
    let runtime = home.join("r");
    std::fs::create_dir(&runtime).unwrap();
    let bare = |program: &str| {
        let mut command = desktop.command(binary(program));
        command
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env("XDG_RUNTIME_DIR", &runtime);
        command
    };
    let port = free_port();
    let mut launcher = bare("msguide")
        .args(["start", "--port", &port.to_string()])
        .env("HOME", &home)
        .env("XDG_STATE_HOME", home.join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = stdout_lines_of_stderr(&mut launcher);
    let said = wait_for_line(&stderr, "the launcher's word on the session bus", |l| {
        l.contains("session bus")
    });
    let socket = runtime.join("bus");
    assert_eq!(
        said,
        format!(
            "msguide: no session bus was running, so one was started at unix:path={},guid={}; applications started from now on find it, and it stops with msguide",
            socket.display(),
            said.rsplit("guid=")
                .next()
                .unwrap()
                .split(';')
                .next()
                .unwrap()
        )
    );
    assert_readable(&said, "it stops with msguide");

    // An application started afterwards finds the bus at the usual place by itself, and the
    // client reads its controls through the AT-SPI bus the session bus started.
    let demo = Running::start(bare("msguide-demo"));
    wait_for_line(&demo.stdout, "the demo's first stage", |l| l == "stage 0");
    let deadline = Instant::now() + WAIT;
    loop {
        let out = bare("msguide-desktop")
            .args(["observe", "--window-title", DEMO])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if out.status.success() {
            assert!(
                json_of(&out)["ocrText"]
                    .as_str()
                    .unwrap()
                    .contains("View logs")
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the demo was not readable over the launched bus: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(demo);

    // Stopping the launch stops the bus, the AT-SPI bus it started, and removes its socket.
    let _ = e2e::sigterm(launcher.id());
    let deadline = Instant::now() + WAIT;
    while launcher.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the launcher did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!socket.exists(), "the session bus's socket is left");
    let deadline = Instant::now() + WAIT;
    loop {
        let left = processes_of_runtime_dir(&runtime);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "still running: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::remove_dir_all(&home).unwrap();
}

/// The lines of the child's stderr.
fn stdout_lines_of_stderr(child: &mut Child) -> Receiver<String> {
    use std::io::BufRead;
    let stderr = child.stderr.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

#[test]
fn observe_finds_windows_by_the_title_they_set_only_in_icccm_wm_name() {
    use super::connector_computer::{
        Xterm, assert_named_only_in_latin1_wm_name, managed_window_of, xprop,
    };
    let desktop = Desktop::start();
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];

    // A GTK window (so it has an accessibility tree) stripped of its EWMH name: GTK also
    // sets WM_NAME, as Latin-1 STRING for this title. Observed by that title, whole.
    let title = format!("crème-{tag}");
    let witness = e2e::witness::Witness::start(&desktop, &title);
    let window = managed_window_of(&desktop, witness.pid).expect("the witness is managed");
    xprop(&desktop, window, &["-remove", "_NET_WM_NAME"]);
    assert_named_only_in_latin1_wm_name(&desktop, window, &title);
    let observation = wait_for_window(&desktop, &title);
    assert_eq!(observation["application"], title.as_str());

    // A real xterm: found by its title, so observing gets as far as the accessibility tree,
    // which xterm does not have; a title nobody has stops before that.
    let xterm_title = format!("café-{tag}");
    let xterm = Xterm::start(&desktop, &xterm_title);
    assert_named_only_in_latin1_wm_name(&desktop, xterm.window, &xterm_title);
    let observe = |title: &str| {
        let out = observe_without_api(&desktop, title);
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let found = observe(&xterm_title);
    assert!(
        found.contains("did not show up in the accessibility tree"),
        "{found}"
    );
    let absent = observe(&format!("absent-{tag}"));
    assert!(
        absent.contains("No open window has exactly that title"),
        "{absent}"
    );
}

/// `msguide-desktop` on a machine where something is missing: one sentence saying what and
/// what to do, and the library's own words only with `--verbose`.
#[tokio::test(flavor = "multi_thread")]
async fn each_failure_is_one_readable_sentence_naming_the_remedy() {
    let no_display = |args: &[&str]| {
        let out = Command::new(binary("msguide-desktop"))
            .args(args)
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // No display: neither the window list nor the window itself.
    for args in [&["observe", "--window-title", DEMO][..], &[][..]] {
        let stderr = no_display(args);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("No display: DISPLAY is not set"),
            "{stderr}"
        );
        assert_readable(&stderr, "run msguide-desktop inside your desktop session");
    }
    let verbose = no_display(&["--verbose", "observe", "--window-title", DEMO]);
    assert!(
        verbose
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("msguide-desktop: detail: "),
        "{verbose}"
    );

    let Scene { desktop, api, .. } = &Scene::start("desktop-errors");
    let on_desktop = |args: &[&str], env: &[(&str, String)]| {
        let mut command = desktop.command(binary("msguide-desktop"));
        command
            .args(args)
            .env("MSGUIDE_API_URL", api.url())
            .env("MSGUIDE_LOCAL_TOKEN", &api.token)
            .stdin(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let guide = [
        "guide",
        "--window-title",
        DEMO,
        "--prompt",
        PROMPT,
        "--consent",
    ];

    // The window is there but the session bus it names (and so AT-SPI) is not.
    let missing = std::env::temp_dir().join(format!("no-bus-{}", std::process::id()));
    let stderr = on_desktop(
        &["observe", "--window-title", DEMO],
        &[
            (
                "DBUS_SESSION_BUS_ADDRESS",
                format!("unix:path={}", missing.display()),
            ),
            // No bus at the usual place either.
            ("XDG_RUNTIME_DIR", missing.display().to_string()),
        ],
    );
    assert!(
        stderr.contains("No session bus is running, so the window's controls cannot be read"),
        "{stderr}"
    );
    assert_readable(
        &stderr,
        "start MSGuide with `msguide start`, which starts one",
    );

    // The API is not running: nothing listens on the port.
    let closed = free_port();
    let stderr = on_desktop(
        &guide,
        &[("MSGUIDE_API_URL", format!("http://127.0.0.1:{closed}"))],
    );
    assert!(
        stderr.contains(&format!("is not answering at http://127.0.0.1:{closed}")),
        "{stderr}"
    );
    assert_readable(&stderr, "start it with `msguide start`");

    // The API refuses the token.
    let stderr = on_desktop(
        &guide,
        &[("MSGUIDE_LOCAL_TOKEN", "not-the-token".to_owned())],
    );
    assert!(
        stderr.contains("Local service returned HTTP 401"),
        "{stderr}"
    );
    assert_readable(
        &stderr,
        "the token was refused, so restart with `msguide start`",
    );

    // A window that is not open.
    let stderr = on_desktop(&["observe", "--window-title", "No Such Window"], &[]);
    assert_readable(&stderr, "check the title");
}

/// A TCP proxy in front of the API that keeps the JSON body of every `POST /v1/guidance`
/// passing through it, in the order they arrived: what the desktop client really sent.
struct Recorder {
    addr: SocketAddr,
    sent: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Recorder {
    async fn start(api: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let sent = std::sync::Arc::default();
        let record = std::sync::Arc::clone(&sent);
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let record = std::sync::Arc::clone(&record);
                tokio::spawn(Self::relay(client, api, record));
            }
        });
        Self { addr, sent, accept }
    }

    async fn relay(
        client: tokio::net::TcpStream,
        api: SocketAddr,
        record: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Ok(server) = tokio::net::TcpStream::connect(api).await else {
            return;
        };
        let (mut client_read, mut client_write) = client.into_split();
        let (mut server_read, mut server_write) = server.into_split();
        let back = tokio::spawn(async move {
            let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
            let _ = client_write.shutdown().await;
        });
        let mut pending = Vec::new();
        let mut chunk = vec![0_u8; 64 * 1024];
        while let Ok(n) = client_read.read(&mut chunk).await {
            if n == 0 || server_write.write_all(&chunk[..n]).await.is_err() {
                break;
            }
            pending.extend_from_slice(&chunk[..n]);
            while let Some((request, used)) = whole_request(&pending) {
                if let Some(body) = request {
                    record.lock().unwrap().push(body);
                }
                pending.drain(..used);
            }
        }
        let _ = server_write.shutdown().await;
        let _ = back.await;
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every guidance body sent so far.
    fn sent(&self) -> Vec<Value> {
        self.sent.lock().unwrap().clone()
    }

    /// The `task` of the last guidance body sent.
    fn last_task(&self) -> Value {
        let sent = self.sent();
        sent.last().expect("no guidance request went through")["task"].clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The first whole request in `raw` and the bytes it takes: its JSON body when it is a
/// guidance request; `None` until the request is whole.
fn whole_request(raw: &[u8]) -> Option<(Option<Value>, usize)> {
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse::<usize>().unwrap());
    let end = head_end + 4 + length;
    let body = raw.get(head_end + 4..end)?;
    let guidance = head.starts_with("post /v1/guidance ");
    Some((guidance.then(|| serde_json::from_slice(body).unwrap()), end))
}

/// `guide` on the window titled `title` through `recorder`, with consent and `extra`.
fn guide_via(
    desktop: &Desktop,
    api: &Api,
    recorder: &Recorder,
    title: &str,
    extra: &[&str],
) -> Output {
    let mut args = vec![
        "guide",
        "--window-title",
        title,
        "--prompt",
        PROMPT,
        "--consent",
    ];
    args.extend_from_slice(extra);
    let out = desktop
        .command(binary("msguide-desktop"))
        .args(&args)
        .env("MSGUIDE_API_URL", recorder.url())
        .env("MSGUIDE_LOCAL_TOKEN", &api.token)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "msguide-desktop failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn the_client_sends_the_plan_back_with_its_cursor_and_says_its_status_and_answers() {
    require("xdotool", "xdotool");
    let Scene { desktop, api, demo } = &Scene::start("desktop-task-state");
    let recorder = Recorder::start(api.addr).await;
    let _gui = demo_window(desktop, &recorder.url(), &api.token);
    let press = |label: &str| press_in_window(desktop, label);
    let send = |answer: &str| {
        press(CONSENT);
        press("Send");
        element(desktop, "MSGuide", answer);
    };
    let single = |label: &str| {
        format!("Next step: Demo: select {label} yourself, then check the screen again.")
    };

    // A plan round: no plan is followed yet, so none goes back and there is no reason.
    press("Ask for a plan: the next several steps, numbered");
    press("Capture / review");
    send("Next step: Demo: select View logs.");
    element(desktop, "MSGuide", "Plan (3 steps):");
    let first = recorder.last_task();
    assert_eq!(first["step"], 1, "{first}");
    assert_eq!(first["status"], "running", "{first}");
    for absent in ["plan", "planCursor", "replanReason", "userInput"] {
        assert!(first.get(absent).is_none(), "{absent} in {first}");
    }
    assert_eq!(recorder.sent()[0]["planSegments"], true);

    // The person does the plan's first step, then asks for a single step: the plan goes back
    // whole, the person on its second step.
    let (bx, by) = centre(desktop, DEMO, &element(desktop, DEMO, "View logs")["box"]);
    click(desktop, (bx, by));
    wait_for_line(&demo.stdout, "stage 1", |l| l == "stage 1");
    press("Ask for a plan: the next several steps, numbered");
    press("Check next step");
    element(desktop, "MSGuide", "Application: MSGuide Demo");
    send(&single("Open troubleshooting"));
    let second = recorder.last_task();
    assert_eq!(second["step"], 2, "{second}");
    assert_eq!(second["status"], "running", "{second}");
    assert_eq!(second["planCursor"], 1, "{second}");
    let plan = &second["plan"];
    let labels: Vec<&str> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["intent"]["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["View logs", "Open troubleshooting", "Mark resolved"],
        "{plan}"
    );
    assert_eq!(plan["windowId"], first_window(&recorder));
    assert!(recorder.sent()[1].get("planSegments").is_none());
    assert_eq!(second["history"][0]["outcome"], "screen_changed");
    // The window lists the plan followed with the person's step framed.
    element(desktop, "MSGuide", "2. Demo: select Open troubleshooting.");

    // Nothing done this time: the next round says so, and the cursor stays.
    press("Check next step");
    element(desktop, "MSGuide", "Application: MSGuide Demo");
    send("Task step 4, 2 earlier steps in its history");
    let third = recorder.last_task();
    assert_eq!(third["status"], "no_progress", "{third}");
    assert_eq!(third["planCursor"], 1, "{third}");
    assert_eq!(third["history"][1]["outcome"], "no_progress", "{third}");

    // From a script: a plan on the demo window, then a round on another window (the guidance
    // window itself) drops it with the fixed reason; then a typed answer reaches the API.
    let dir = temp_dir("desktop-task-state-file");
    let file = dir.join("task.json");
    let file = file.to_str().unwrap();
    guide_via(desktop, api, &recorder, DEMO, &["--task", file, "--plan"]);
    let saved = std::fs::read_to_string(file).unwrap();
    assert!(saved.contains("\"planId\""), "{saved}");
    let other = guide_via(desktop, api, &recorder, "MSGuide", &["--task", file]);
    let sent = recorder.last_task();
    assert_eq!(
        sent["replanReason"], "The window or page changed since this plan was made.",
        "{sent}"
    );
    assert!(sent.get("plan").is_none(), "{sent}");
    assert_eq!(json_of(&other)["step"], 2);
    let answer = "Project Falcon";
    let typed = guide_via(
        desktop,
        api,
        &recorder,
        "MSGuide",
        &["--task", file, "--input", answer],
    );
    let sent = recorder.last_task();
    assert_eq!(
        (sent["status"].as_str(), sent["userInput"].as_str()),
        (Some("needs_input"), Some(answer))
    );
    assert!(
        sent.get("replanReason").is_none(),
        "the reason went once: {sent}"
    );
    let accepted = json_of(&typed);
    assert_eq!(
        (accepted["step"].as_u64(), accepted["taskId"].as_str()),
        (Some(3), sent["taskId"].as_str())
    );
    let saved = std::fs::read_to_string(file).unwrap();
    assert!(!saved.contains(answer), "{saved}");
    // An answer over 1000 characters is refused with one sentence, and nothing is sent.
    let before = recorder.sent().len();
    let long = "x".repeat(1001);
    let out = client(
        desktop,
        api,
        &[
            "guide",
            "--window-title",
            "MSGuide",
            "--prompt",
            PROMPT,
            "--consent",
            "--task",
            file,
            "--input",
            &long,
        ],
    );
    assert!(!out.status.success());
    assert_readable(
        &String::from_utf8_lossy(&out.stderr),
        "Your answer is longer than 1000 characters, the most the local API takes: shorten it and send again",
    );
    assert_eq!(recorder.sent().len(), before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The window id of the first guidance request's observation.
fn first_window(recorder: &Recorder) -> Value {
    recorder.sent()[0]["observation"]["windowId"].clone()
}
