//! Computer use through the real `autogpt-shim` binary on a headless GNOME (`e2e::portal_desktop`:
//! mutter, xdg-desktop-portal with its GNOME backend, PipeWire), which offers none of the wlr
//! protocols: input goes through the desktop portal's RemoteDesktop after one consent, given
//! by the person (`fixtures/portal_consent.py`) in GNOME's own dialog at the first action.
//! The witness the compositor does not own is foot running `cat` (typed text and keys);
//! pointer events have none, as headless mutter 43 offers clients no pointer (wev shows it).
//! Screenshots go through the portal's Screenshot on GNOME Shell (`PortalDesktop::gnome_shell`), whose
//! witness is a fullscreen foot of a colour the test chose; a bare mutter does not offer them.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use e2e::display::require;
use e2e::platform::{Platform, binary, error_code};
use e2e::portal_desktop::{PORTAL_INPUT_FEATURES, PortalDesktop};
use e2e::wayland::{SEEN_DEADLINE, eventually, file_contains};
use serde_json::json;

use super::connector::{ShimIn, doctor_in_env};
use super::connector_wayland::listed_from_the_accessibility_bus;
use super::desktop_client::{Running, wait_for_line};

fn shim_on(gnome: &PortalDesktop, platform: &Platform, tag: &str) -> ShimIn {
    ShimIn::start(&gnome.env(), platform, tag, &[])
}

/// The portal's input features with the window list the accessibility bus gives, in HELLO's
/// order.
fn features_listing() -> Vec<&'static str> {
    let mut features = PORTAL_INPUT_FEATURES.to_vec();
    let at = features.iter().position(|f| *f == "display.info").unwrap() + 1;
    features.insert(at, "window.list");
    features
}

/// The person's answer and what it printed.
fn answered(person: Child) -> String {
    let out = person.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the person could not answer: {said}");
    said
}

#[tokio::test]
async fn gnome_serves_input_through_the_desktop_portal_after_one_consent() {
    let mut gnome = PortalDesktop::gnome();
    let typed = gnome.dir().join("typed.txt");
    gnome.foot_cat(&typed);
    let platform = Platform::bind().await;
    let _shim = shim_on(&gnome, &platform, "gnome-portal");
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let payload = &hello["payload"];
    assert_eq!(payload["screen_resolution"], json!([1280, 800]));
    // No wlr protocol: no screenshots or clipboard; input through the portal, and the window
    // list from the accessibility bus (see `gnome_lists_the_windows_the_accessibility_bus_knows`).
    assert_eq!(
        payload["computer_use_features_coarse"],
        json!(["input", "windows", "apps", "permissions"])
    );
    assert_eq!(payload["computer_use_features"], json!(features_listing()));
    let permissions = conn
        .call("PERMISSIONS_CHECK_REQUEST", "perm0", json!({}))
        .await;
    assert_eq!(
        permissions["payload"]["permissions"]["input_monitoring"], "unknown",
        "{permissions}"
    );

    // The first action opens the portal's session: GNOME asks the person, who shares.
    let person = gnome.person("share");
    let text = "Hello, Portal! 123 ~#\n";
    gnome
        .act(&mut conn, "t1", json!({"action": "type", "text": text}))
        .await;
    let said = answered(person);
    eventually(&format!("the typed line in foot ({said})"), || {
        file_contains(&typed, text)
    })
    .await;

    gnome.check_keys(&mut conn, &typed, text).await;

    // The pointer: headless mutter 43's seat offers its clients a keyboard and no pointer
    // (wev, started after the session, reports `capabilities: keyboard`), so no client can
    // witness pointer events there; the portal takes every one (each Notify* call answered).
    let wev_log = gnome.dir().join("wev.log");
    gnome.wev(&wev_log);
    assert!(
        file_contains(&wev_log, "capabilities: keyboard \n")
            || file_contains(&wev_log, "capabilities: keyboard \r\n"),
        "the seat now has a pointer: witness the pointer through wev here: {}",
        std::fs::read_to_string(&wev_log).unwrap_or_default()
    );
    let target = [677, 423];
    let end = [target[0] + 20, target[1] + 10];
    for (id, payload) in [
        ("m1", json!({"action": "mouse_move", "coordinate": target})),
        ("c1", json!({"action": "left_click", "coordinate": target})),
        (
            "c2",
            json!({"action": "double_click", "coordinate": target}),
        ),
        (
            "c3",
            json!({"action": "right_click", "coordinate": target, "modifiers": ["shift"]}),
        ),
        ("c4", json!({"action": "mouse_down", "button": "middle"})),
        ("c5", json!({"action": "mouse_up", "button": "middle"})),
        (
            "s1",
            json!({"action": "scroll", "coordinate": target, "scroll_direction": "down", "clicks": 3}),
        ),
        (
            "s2",
            json!({"action": "scroll", "coordinate": target, "scroll_direction": "right", "clicks": 1}),
        ),
        (
            "d1",
            json!({"action": "drag", "path": [target, [target[0] + 10, target[1] + 5], end]}),
        ),
    ] {
        gnome.act(&mut conn, id, payload).await;
    }

    let cursor = conn.call("CURSOR_POSITION_REQUEST", "p", json!({})).await;
    assert_eq!(
        cursor["payload"],
        json!({"x": end[0], "y": end[1], "monitor": 0}),
        "{cursor}"
    );
    let outside = conn
        .call(
            "INPUT_ACTION",
            "o",
            json!({"action": "mouse_move", "coordinate": [1280, 10]}),
        )
        .await;
    assert_eq!(error_code(&outside), "INPUT_OUT_OF_BOUNDS", "{outside}");
    // Screenshots need ScreenCast, not used yet: refused before any backend call.
    let shot = conn.call("SCREENSHOT_REQUEST", "shot", json!({})).await;
    assert_eq!(error_code(&shot), "FEATURE_NOT_SUPPORTED", "{shot}");
    assert_eq!(shot["payload"]["details"]["feature"], "screenshot");
}

/// GNOME lists its windows to no other program, so the applications on the accessibility bus
/// list them: the demo window (egui, through AccessKit) is listed with its title and process,
/// its bounds the output (nothing says where it is), and focusing it is refused before any
/// backend call; once it has closed, it is no longer listed.
#[tokio::test]
async fn gnome_lists_the_windows_the_accessibility_bus_knows() {
    let gnome = PortalDesktop::gnome();
    let demo = Running::start(gnome.command(&binary("msguide-demo").to_string_lossy()));
    wait_for_line(&demo.stdout, "the demo's first stage", |l| l == "stage 0");
    let platform = Platform::bind().await;
    let _shim = shim_on(&gnome, &platform, "gnome-windows");
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    assert_eq!(
        hello["payload"]["computer_use_features"],
        json!(features_listing())
    );
    listed_from_the_accessibility_bus(&mut conn, demo, [0, 0, 1280, 800]).await;
}

#[test]
fn doctor_says_input_goes_through_the_portal_and_why_screenshots_do_not() {
    let gnome = PortalDesktop::gnome();
    let (_, out) = doctor_in_env(gnome.env(), "gnome-doctor");
    let wayland: Vec<&str> = out.lines().filter(|l| l.contains("] Wayland  ")).collect();
    let wlroots = "sway, Hyprland, river and labwc offer it";
    assert_eq!(
        wayland,
        [
            format!("[WARN] Wayland  no screen capture protocol (zwlr_screencopy_manager_v1): screenshots are unavailable: the desktop portal's Screenshot has no compositor service to call (GNOME Shell's; a bare mutter has none); {wlroots}"),
            "[WARN] Wayland  no virtual pointer or keyboard protocol: input goes through the desktop portal's RemoteDesktop instead, which asks the person once per connector run in the desktop's own dialog and types only what the keyboard layout has; this portal (RemoteDesktop version 1) cannot keep the consent, so every connector run asks again".to_owned(),
            format!("[WARN] Wayland  no window list protocol (zwlr_foreign_toplevel_manager_v1): windows are listed from the accessibility bus instead, without where they are, and cannot be focused; {wlroots}"),
            format!("[WARN] Wayland  no clipboard protocol (zwlr_data_control_manager_v1): the clipboard is unavailable; {wlroots}"),
        ],
        "{out}"
    );
}

/// Pixels of `rgba` (RGBA rows of `width`) inside `[x0, y0, x1, y1)` that are exactly `colour`.
fn count_colour(rgba: &[u8], width: u32, [x0, y0, x1, y1]: [u32; 4], colour: [u8; 3]) -> usize {
    (y0..y1)
        .flat_map(|y| (x0..x1).map(move |x| (x, y)))
        .filter(|&(x, y)| {
            let at = ((y * width + x) * 4) as usize;
            rgba[at..at + 3] == colour
        })
        .count()
}

/// GNOME Shell, where the desktop portal's Screenshot works: advertised once its service is on
/// the bus, refused while the person's answer in the permission store is no, and the witness is
/// a fullscreen foot whose background colour the test chose (none of it on screen before).
#[tokio::test]
async fn gnome_shell_serves_screenshots_through_the_desktop_portal() {
    const MAGENTA: [u8; 3] = [255, 0, 255];
    let mut gnome = PortalDesktop::gnome_shell();
    gnome.screenshots_allowed("no");
    let platform = Platform::bind().await;
    let refused_run = shim_on(&gnome, &platform, "gnome-shot-no");
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let coarse = hello["payload"]["computer_use_features_coarse"].clone();
    assert!(!coarse.to_string().contains("screenshot"), "{hello}");
    let refused = conn
        .call("SCREENSHOT_REQUEST", "n1", json!({"format": "png"}))
        .await;
    assert_eq!(error_code(&refused), "FEATURE_NOT_SUPPORTED", "{refused}");
    drop(conn);
    drop(refused_run);

    // The person allows screenshots: a new run advertises them, with no dialog.
    gnome.screenshots_allowed("yes");
    let platform = Platform::bind().await;
    let _shim = shim_on(&gnome, &platform, "gnome-shot");
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let payload = &hello["payload"];
    assert_eq!(payload["screen_resolution"], json!([1280, 800]));
    assert_eq!(
        payload["computer_use_features_coarse"][0], "screenshot",
        "{hello}"
    );
    let fine = payload["computer_use_features"].to_string();
    assert!(
        fine.contains("\"screenshot.region\"") && fine.contains("\"screenshot.all_monitors\""),
        "{hello}"
    );
    assert!(!fine.contains("screenshot.window"), "{hello}");
    let permissions = conn
        .call("PERMISSIONS_CHECK_REQUEST", "perm0", json!({}))
        .await;
    assert_eq!(
        permissions["payload"]["permissions"]["screen_recording"], "granted",
        "{permissions}"
    );

    // Before the witness: the region the test watches holds none of its colour.
    let region = json!({"format": "png", "region": [1000, 500, 1400, 900]});
    let before = conn.call("SCREENSHOT_REQUEST", "s0", region.clone()).await;
    let (bw, bh, pixels) = super::connector_wayland::shot_pixels(&before);
    assert_eq!((bw, bh), (280, 300), "clipped to the display");
    assert_eq!(count_colour(&pixels, bw, [0, 0, bw, bh], MAGENTA), 0);

    require("foot", "foot");
    let foot = gnome
        .command("foot")
        .args([
            "--fullscreen",
            "--app-id=shotwitness",
            "-o",
            "colors.background=ff00ff",
            "-o",
            "cursor.color=ff00ff ff00ff",
            "sleep",
            "600",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start foot");
    gnome.keep(foot);

    // The whole screen: the fullscreen window's colour below the shell's notification banner.
    let deadline = Instant::now() + SEEN_DEADLINE;
    let (w, h, full) = loop {
        // The shell opens its overview once started, which shows windows shrunk.
        gnome.leave_overview();
        let shot = conn
            .call("SCREENSHOT_REQUEST", "s1", json!({"format": "png"}))
            .await;
        let (w, h, full) = super::connector_wayland::shot_pixels(&shot);
        assert_eq!((w, h), (1280, 800), "{}", shot["payload"]["meta"]);
        if count_colour(&full, w, [0, 100, w, h], MAGENTA) == (w * (h - 100)) as usize {
            break (w, h, full);
        }
        assert!(
            Instant::now() < deadline,
            "the fullscreen window's colour did not fill the screenshot: {} of {} pixels",
            count_colour(&full, w, [0, 100, w, h], MAGENTA),
            w * (h - 100)
        );
        // Ten screenshots a minute: a few tries, seconds apart.
        tokio::time::sleep(Duration::from_secs(4)).await;
    };
    assert_eq!(count_colour(&full, w, [0, 0, 300, 100], MAGENTA), 300 * 100);
    assert_eq!(h, 800);

    // A region, cut from one picture of the desktop at its display-global place.
    let after = conn.call("SCREENSHOT_REQUEST", "s2", region).await;
    let (rw, rh, part) = super::connector_wayland::shot_pixels(&after);
    assert_eq!((rw, rh), (280, 300));
    assert_eq!(after["payload"]["meta"]["origin"], json!([1000, 500]));
    assert_eq!(
        count_colour(&part, rw, [0, 0, rw, rh], MAGENTA),
        (rw * rh) as usize
    );
    // Every monitor stitched: the one monitor.
    let all = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s3",
            json!({"format": "png", "monitor": -1}),
        )
        .await;
    assert_eq!(super::connector_wayland::shot_pixels(&all).0, 1280);
    // The portal's files are read and removed: none stays in the home it writes to.
    let left: Vec<_> = std::fs::read_dir(gnome.dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".png"))
        .collect();
    assert!(left.is_empty(), "screenshot files left behind: {left:?}");
}

/// GNOME Shell before anyone was asked about screenshots: HELLO offers them, PERMISSIONS_CHECK
/// says `screen_recording` is unknown, and the first screenshot waits for the shell's own
/// dialog ("Allow Applications to Take Screenshots?"). The person answers with the keyboard,
/// which the shell's dialog takes and its buttons' AT-SPI does not; the headless shell's only
/// keyboard is the portal's, so a second connector, whose remote-desktop session the person
/// shared first, is their hands.
/// Escape denies: the screenshot is `PERMISSION_PENDING` naming `screen_recording`, the
/// permission store keeps the answer (PERMISSIONS_CHECK: denied; the next screenshot is
/// refused the same way without a dialog; the next run advertises none). With the answer
/// forgotten, Tab and Return allow: the picture comes, PERMISSIONS_CHECK says granted, and the
/// next screenshot comes without a dialog.
#[tokio::test]
async fn gnome_shell_asks_the_person_at_the_first_screenshot() {
    let gnome = PortalDesktop::gnome_shell();
    let hands_platform = Platform::bind().await;
    let _hands_shim = shim_on(&gnome, &hands_platform, "gnome-hands");
    let (mut hands, _) = hands_platform.session(&["computer_use"], |_| {}).await;
    let person = gnome.person("share");
    gnome
        .act(&mut hands, "k0", json!({"action": "key", "key": "shift"}))
        .await;
    answered(person);
    let recording = |permissions: &serde_json::Value| {
        permissions["payload"]["permissions"]["screen_recording"].clone()
    };
    // One screenshot on `conn`, the person pressing `keys` once the shell's dialog shows.
    async fn answering(
        gnome: &PortalDesktop,
        conn: &mut e2e::platform::Conn,
        hands: &mut e2e::platform::Conn,
        id: &str,
        keys: &[&str],
    ) -> serde_json::Value {
        let sees = gnome.person("screenshot-dialog");
        let (shot, seen) = tokio::join!(
            conn.call("SCREENSHOT_REQUEST", id, json!({"format": "png"})),
            async {
                let seen = tokio::task::spawn_blocking(move || answered(sees))
                    .await
                    .unwrap();
                for key in keys {
                    gnome
                        .act(
                            hands,
                            &format!("{id}-{key}"),
                            json!({"action": "key", "key": key}),
                        )
                        .await;
                }
                seen
            }
        );
        assert!(
            seen.contains("Allow Applications to Take Screenshots?"),
            "{seen}"
        );
        shot
    }

    let platform = Platform::bind().await;
    let shim = shim_on(&gnome, &platform, "gnome-shot-ask");
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    assert_eq!(
        hello["payload"]["computer_use_features_coarse"][0], "screenshot",
        "{hello}"
    );
    let before = conn
        .call("PERMISSIONS_CHECK_REQUEST", "perm0", json!({}))
        .await;
    assert_eq!(recording(&before), "unknown", "{before}");
    let denied = answering(&gnome, &mut conn, &mut hands, "s-deny", &["Escape"]).await;
    assert_eq!(error_code(&denied), "PERMISSION_PENDING", "{denied}");
    assert_eq!(
        denied["payload"]["details"]["permission"],
        "screen_recording"
    );
    let after = conn
        .call("PERMISSIONS_CHECK_REQUEST", "perm1", json!({}))
        .await;
    assert_eq!(recording(&after), "denied", "{after}");
    let again = conn
        .call("SCREENSHOT_REQUEST", "s-again", json!({"format": "png"}))
        .await;
    assert_eq!(error_code(&again), "PERMISSION_PENDING", "{again}");
    drop(conn);
    drop(shim);

    let platform = Platform::bind().await;
    let shim = shim_on(&gnome, &platform, "gnome-shot-denied");
    let (_, hello) = platform.session(&["computer_use"], |_| {}).await;
    let coarse = hello["payload"]["computer_use_features_coarse"].to_string();
    assert!(!coarse.contains("screenshot"), "{hello}");
    drop(shim);

    gnome.screenshots_unanswered();
    let platform = Platform::bind().await;
    let _shim = shim_on(&gnome, &platform, "gnome-shot-allow");
    let (mut conn, _) = platform.session(&["computer_use"], |_| {}).await;
    let allowed = answering(&gnome, &mut conn, &mut hands, "s-allow", &["Tab", "Return"]).await;
    let (w, h, _) = super::connector_wayland::shot_pixels(&allowed);
    assert_eq!((w, h), (1280, 800));
    let after = conn
        .call("PERMISSIONS_CHECK_REQUEST", "perm2", json!({}))
        .await;
    assert_eq!(recording(&after), "granted", "{after}");
    let next = conn
        .call("SCREENSHOT_REQUEST", "s-next", json!({"format": "png"}))
        .await;
    assert_eq!(next["type"], "SCREENSHOT_RESPONSE", "{next}");
}
