//! Computer use through the real `autogpt-shim` binary on a headless KDE compositor
//! (`e2e::portal_desktop`: KWin 5.27's virtual backend, xdg-desktop-portal with its KDE backend,
//! PipeWire), which offers none of the wlr protocols: input goes through the desktop portal's
//! RemoteDesktop. Debian 12's KDE backend (Plasma 5.27.5) grants a program outside a sandbox
//! its session without a dialog, so no person answers here.
//! The witnesses the compositor does not own are weston-terminal running `cat` (typed text and
//! keys) and wev (pointer motion and buttons), each filling the output.
//! Screenshots are not offered: KDE's backend asks in a dialog for every one. The clipboard
//! goes through KWin's wlr-data-control, checked by wl-clipboard.

use e2e::platform::{Platform, error_code};
use e2e::portal_desktop::{PORTAL_INPUT_FEATURES, PortalDesktop};
use e2e::wayland::{eventually, file_contains};
use e2e::witness::Witness;
use serde_json::json;

use super::connector::{ShimIn, doctor_in_env};

#[tokio::test]
async fn kde_serves_input_through_the_desktop_portal() {
    let mut kde = PortalDesktop::kde();
    let typed = kde.dir().join("typed.txt");
    kde.foot_cat(&typed);
    let platform = Platform::bind().await;
    let _shim = ShimIn::start(&kde.env(), &platform, "kde-portal", &[]);
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let payload = &hello["payload"];
    assert_eq!(payload["screen_resolution"], json!([1280, 800]));
    // No wlr protocol and no screenshots KDE's portal would not ask for: input only.
    assert_eq!(
        payload["computer_use_features_coarse"],
        json!(["input", "apps", "permissions"])
    );
    assert_eq!(
        payload["computer_use_features"],
        json!(PORTAL_INPUT_FEATURES)
    );

    let text = "Hello, KDE! 123 ~#\n";
    kde.act(&mut conn, "t1", json!({"action": "type", "text": text}))
        .await;
    eventually("the typed line in the terminal", || {
        file_contains(&typed, text)
    })
    .await;
    kde.check_keys(&mut conn, &typed, text).await;

    // The pointer, witnessed by wev filling the output: motion at the point moved to, and the
    // buttons pressed there.
    let wev_log = kde.dir().join("wev.log");
    kde.wev(&wev_log);
    let target = [677, 423];
    kde.act(
        &mut conn,
        "m1",
        json!({"action": "mouse_move", "coordinate": target}),
    )
    .await;
    eventually("wev seeing the pointer at (677, 423)", || {
        file_contains(&wev_log, "x, y: 677.000000, 423.000000")
    })
    .await;
    for (id, payload) in [
        ("c1", json!({"action": "left_click", "coordinate": target})),
        (
            "c2",
            json!({"action": "right_click", "coordinate": target, "modifiers": ["shift"]}),
        ),
        (
            "s1",
            json!({"action": "scroll", "coordinate": target, "scroll_direction": "down", "clicks": 3}),
        ),
    ] {
        kde.act(&mut conn, id, payload).await;
    }
    eventually("wev seeing the left and right buttons pressed", || {
        let log = std::fs::read_to_string(&wev_log).unwrap_or_default();
        log.contains("button: 272 (left), state: 1 (pressed)")
            && log.contains("button: 273 (right), state: 1 (pressed)")
    })
    .await;
    let cursor = conn.call("CURSOR_POSITION_REQUEST", "p", json!({})).await;
    assert_eq!(
        cursor["payload"],
        json!({"x": target[0], "y": target[1], "monitor": 0}),
        "{cursor}"
    );
    // Screenshots: not advertised, so refused before any backend call.
    let shot = conn.call("SCREENSHOT_REQUEST", "shot", json!({})).await;
    assert_eq!(error_code(&shot), "FEATURE_NOT_SUPPORTED", "{shot}");
    assert_eq!(shot["payload"]["details"]["feature"], "screenshot");
}

#[test]
fn doctor_says_why_kde_offers_no_screenshots() {
    let kde = PortalDesktop::kde();
    let (_, out) = doctor_in_env(kde.env(), "kde-doctor");
    let wayland: Vec<&str> = out.lines().filter(|l| l.contains("] Wayland  ")).collect();
    assert_eq!(
        wayland.first().copied(),
        Some(
            "[WARN] Wayland  no screen capture protocol (zwlr_screencopy_manager_v1): screenshots are unavailable: KDE's desktop portal asks the person in a dialog for every screenshot, so none can be taken for an agent; sway, Hyprland, river and labwc offer it"
        ),
        "{out}"
    );
    assert!(
        wayland
            .iter()
            .any(|l| l.contains("input goes through the desktop portal's RemoteDesktop instead")),
        "{out}"
    );
}

/// The clipboard both ways on KDE: KWin 5.27 offers wlr-data-control to every client, so the
/// shim's own clipboard code serves it, checked by wl-clipboard. A paste goes through it too,
/// with only Ctrl+V through the portal, so a character the layout lacks arrives (typed, it
/// is refused above).
#[tokio::test]
async fn kde_serves_the_clipboard_through_wlr_data_control() {
    let kde = PortalDesktop::kde();
    let platform = Platform::bind().await;
    let _shim = ShimIn::start(
        &kde.env(),
        &platform,
        "kde-clipboard",
        &["--enable-clipboard", "--enable-clipboard-read-foreign"],
    );
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let coarse = hello["payload"]["computer_use_features_coarse"].to_string();
    let fine = hello["payload"]["computer_use_features"].to_string();
    assert!(coarse.contains("\"clipboard\""), "{hello}");
    assert!(
        fine.contains("\"clipboard.read\"") && fine.contains("\"clipboard.write\""),
        "{hello}"
    );
    super::connector_wayland::clipboard_both_ways(&mut conn, |program| kde.command(program)).await;
    // KWin gives the keyboard to the one window there is.
    let mut witness = Witness::start_with(
        |python| kde.command(python.to_str().expect("a UTF-8 path")),
        "Witness K",
    );
    super::connector_wayland::paste_keeping_the_clipboard(&mut conn, |program| {
        kde.command(program)
    })
    .await;
    // The paste chord arrives before the text it inserts.
    witness.expect("key", |k| {
        k["name"] == "v" && k["modifiers"] == json!(["ctrl"])
    });
    witness.expect("text", |t| t["text"] == super::connector_wayland::PASTED);
}
