//! Computer use through the real `autogpt-shim` binary on a headless KDE compositor
//! (`e2e::portal_desktop`: KWin 5.27's virtual backend, xdg-desktop-portal with its KDE backend,
//! PipeWire), which offers none of the wlr protocols: input goes through the desktop portal's
//! RemoteDesktop. Debian 12's KDE backend (Plasma 5.27.5) grants a program outside a sandbox
//! its session without a dialog, so no person answers here.
//! The witnesses the compositor does not own are weston-terminal running `cat` (typed text and
//! keys) and wev (pointer motion and buttons), each filling the output.
//! Screenshots come from KWin's own ScreenShot2 interface, only for the copy `install` wrote a
//! desktop entry for (KDE's portal would ask in a dialog for every one). The clipboard
//! goes through KWin's wlr-data-control, checked by wl-clipboard. Windows are listed and
//! focused through KWin's scripting; the GTK witness that then gets the typed keys shows which
//! window has the focus, and the one a click at an accessibility box's centre presses shows
//! that the box is in the right place.

use e2e::platform::{Platform, error_code};
use e2e::portal_desktop::{PORTAL_INPUT_FEATURES, PortalDesktop};
use e2e::wayland::{eventually, file_contains};
use e2e::witness::Witness;
use serde_json::json;

use super::connector::{ShimIn, doctor_in_env};
use super::connector_wayland::listed_window;

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
    // No wlr protocol and no screenshots KDE's portal would not ask for: input, and windows
    // through KWin's scripting.
    assert_eq!(
        payload["computer_use_features_coarse"],
        json!(["input", "windows", "apps", "permissions"])
    );
    let mut features = PORTAL_INPUT_FEATURES.to_vec();
    let at = features.iter().position(|f| *f == "display.info").unwrap() + 1;
    features.splice(at..at, ["window.list", "window.focus"]);
    features.push("a11y.snapshot");
    assert_eq!(payload["computer_use_features"], json!(features));

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
fn doctor_says_why_kwin_takes_no_screenshots_for_a_binary_no_entry_names() {
    let kde = PortalDesktop::kde();
    let (_, out) = doctor_in_env(kde.env(), "kde-doctor");
    let wayland: Vec<&str> = out.lines().filter(|l| l.contains("] Wayland  ")).collect();
    assert_eq!(
        wayland.first().copied(),
        Some(
            format!(
                "[WARN] Wayland  no screen capture protocol (zwlr_screencopy_manager_v1): screenshots are unavailable: KWin gives screenshots only to programs whose desktop entry lists org.kde.KWin.ScreenShot2 under X-KDE-DBUS-Restricted-Interfaces, and no entry names this program ({}); `autogpt-shim install` writes one for the copy it installs, which then takes them",
                e2e::platform::binary("autogpt-shim").display()
            )
            .as_str()
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

/// The window list and focus through KWin's scripting: two witnesses listed with their titles
/// and processes, the later one focused; focusing the other moves the keyboard to it (the key
/// typed next reaches it, not the one focused before); a closed window's id is stale.
#[tokio::test]
async fn kde_lists_and_focuses_windows_through_kwin_scripting() {
    let kde = PortalDesktop::kde();
    let start = |title: &str| {
        Witness::start_with(
            |python| kde.command(python.to_str().expect("a UTF-8 path")),
            title,
        )
    };
    let mut first = start("Witness ✓ one");
    let mut second = start("Witness two");
    let platform = Platform::bind().await;
    let _shim = ShimIn::start(&kde.env(), &platform, "kde-windows", &[]);
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let coarse = hello["payload"]["computer_use_features_coarse"].to_string();
    assert!(coarse.contains("\"windows\""), "{hello}");

    let list = conn.call("WINDOW_LIST_REQUEST", "w1", json!({})).await;
    assert_eq!(list["type"], "WINDOW_LIST_RESPONSE", "{list}");
    let windows = list["payload"]["windows"].as_array().unwrap().clone();
    let listed = |title: &str| {
        windows
            .iter()
            .find(|w| w["title"] == title)
            .cloned()
            .unwrap_or_else(|| panic!("{title} not listed: {windows:?}"))
    };
    let (one, two) = (listed("Witness ✓ one"), listed("Witness two"));
    assert_eq!(one["pid"], first.pid, "{one}");
    assert_eq!(two["pid"], second.pid, "{two}");
    // KWin maximises new windows here (the harness's placement): the client area fills the
    // output below KWin's title bar. The newest window has the focus.
    let bounds: Vec<i64> = serde_json::from_value(one["bounds"].clone()).unwrap();
    assert!(
        bounds[0] == 0 && (20..80).contains(&bounds[1]) && bounds[2..] == [1280, 800],
        "{one}"
    );
    assert_eq!(
        (one["is_focused"].clone(), two["is_focused"].clone()),
        (json!(false), json!(true))
    );
    assert_eq!(
        windows[0]["window_id"], two["window_id"],
        "the focused window comes first"
    );

    // Ids come from the latest listing: each listing mints new ones.
    async fn id_of(conn: &mut e2e::platform::Conn, title: &str) -> serde_json::Value {
        listed_window(conn, "title", title).await["window_id"].clone()
    }
    for (id, title, key) in [("f1", "Witness ✓ one", "q"), ("f2", "Witness two", "w")] {
        let window_id = id_of(&mut conn, title).await;
        let focus = conn
            .call("WINDOW_FOCUS", id, json!({"window_id": window_id}))
            .await;
        assert_eq!(focus["type"], "ACK", "{focus}");
        let list = conn.call("WINDOW_LIST_REQUEST", "w", json!({})).await;
        assert_eq!(list["payload"]["windows"][0]["title"], title, "{list}");
        assert_eq!(list["payload"]["windows"][0]["is_focused"], true, "{list}");
        kde.act(
            &mut conn,
            &format!("{id}-type"),
            json!({"action": "type", "text": key}),
        )
        .await;
        let witness = if title == "Witness two" {
            &mut second
        } else {
            &mut first
        };
        witness.expect("key", |k| k["name"] == key);
    }
    // "q" reached only the first witness, "w" only the second.
    let keys = |events: Vec<serde_json::Value>| {
        events
            .into_iter()
            .filter(|e| e["event"] == "key")
            .map(|e| e["name"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    let quiet = std::time::Duration::from_millis(300);
    assert!(!keys(first.drain(quiet)).contains(&"w".to_owned()));
    assert!(!keys(second.drain(quiet)).contains(&"q".to_owned()));

    // Another program's KWin scripts loading and unloading meanwhile (kdotool, the guidance
    // client) do not disturb the shim's: every listing still answers, with both windows.
    let scripts = kde.kwin_scripts();
    let churn = std::thread::spawn(move || {
        for i in 0..20 {
            assert_eq!(scripts.run(&format!("report({i});")), i.to_string());
        }
    });
    for i in 0..20 {
        let list = conn
            .call("WINDOW_LIST_REQUEST", &format!("churn-{i}"), json!({}))
            .await;
        assert_eq!(list["type"], "WINDOW_LIST_RESPONSE", "{list}");
        assert_eq!(
            list["payload"]["windows"].as_array().map(Vec::len),
            Some(2),
            "{list}"
        );
    }
    churn.join().unwrap();

    // A closed window's id is stale: one from the last listing, used once KWin has let the
    // window go (until then it works, on that window alone).
    let window_id = id_of(&mut conn, "Witness ✓ one").await;
    drop(first);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let stale = loop {
        let focus = conn
            .call("WINDOW_FOCUS", "f3", json!({"window_id": window_id}))
            .await;
        if focus["type"] != "ACK" {
            break focus;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the closed window's id still works"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(error_code(&stale), "WINDOW_STALE", "{stale}");
    assert_eq!(stale["payload"]["details"]["window_id"], window_id);
}

/// Accessibility on KDE: KWin's list gives the window's frame, so A11Y_SNAPSHOT is advertised
/// and places the GTK witness's button where the witness says it is (from its window's corner);
/// a click at the box's centre through the portal presses it, and ELEMENT_ACTION types into
/// the entry it names.
#[tokio::test]
async fn kde_places_accessibility_boxes_where_a_click_reaches_them() {
    let kde = PortalDesktop::kde();
    let platform = Platform::bind().await;
    let _shim = ShimIn::start(&kde.env(), &platform, "kde-a11y", &[]);
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let fine = hello["payload"]["computer_use_features"].to_string();
    assert!(fine.contains("\"a11y.snapshot\""), "{hello}");
    // The headless seat has no pointer until the portal's session makes one (a person's desktop
    // always has one), and GTK takes the seat's pointer as it starts: the session first.
    kde.act(
        &mut conn,
        "m",
        json!({"action": "mouse_move", "coordinate": [1, 1]}),
    )
    .await;
    let mut witness = Witness::start_with(
        |python| kde.command(python.to_str().expect("a UTF-8 path")),
        "Witness A",
    );
    let listed = listed_window(&mut conn, "title", "Witness A").await;
    let bounds: Vec<i64> = serde_json::from_value(listed["bounds"].clone()).unwrap();

    let (snapshot, _, b) =
        super::connector_computer::snapshot_button(&mut conn, "a", &listed["window_id"]).await;
    assert_eq!(
        b,
        super::connector_wayland::button_box(&witness, &bounds),
        "the button's box in {bounds:?}"
    );
    let centre = [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2];
    kde.act(
        &mut conn,
        "c",
        json!({"action": "left_click", "coordinate": centre}),
    )
    .await;
    witness.expect("clicked", |c| c["widget"] == "Press me");

    super::connector_wayland::types_into_the_entry(&mut conn, &snapshot, &mut witness).await;
}

/// Screenshots on KDE through KWin's own ScreenShot2 interface, which KWin opens only to a
/// program an installed desktop entry names: the binary as built is refused (its doctor says
/// so), then `install`, run in KWin's home as a person would, writes that entry for the copy it
/// installs; KWin notices it without a restart (the copy's doctor says screenshots go through
/// KWin), and the copy, started as the entry and the service start it, advertises screenshots. Its captures show the GTK witness's red area
/// where the witness and KWin's window list place it, a region is the same pixels as the
/// whole screen there, and a window's capture is its client area; the same copy's MCP face
/// (`mcp`, raw JSON-RPC on stdio) gives the region's pixels too. `uninstall` removes the entry
/// again.
#[tokio::test]
async fn kde_takes_screenshots_through_kwin_once_installed() {
    use super::connector_computer::decode_png;
    use e2e::platform::{SESSION, Shim};
    let kde = PortalDesktop::kde();
    let home = kde.dir().to_path_buf();
    let root = home.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let env: Vec<(&str, String)> = kde.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let doctor = |program: &std::path::Path, args: &[&str]| {
        let mut args = args.to_vec();
        args.extend(["--allowed-root", root.to_str().unwrap(), "doctor"]);
        let out = e2e::platform::shim_command_with(program, &home, &args, &env)
            .env("AUTOGPT_SHIM_ENABLE_COMPUTER_USE", "1")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let built = doctor(
        &e2e::platform::binary("autogpt-shim"),
        &["--session-id", SESSION],
    );
    assert!(
        built.contains("and no entry names this program ("),
        "{built}"
    );
    let platform = Platform::bind().await;
    let out = super::connector_first_hour::install_for(
        &home,
        &platform,
        &root,
        &["--enable-computer-use"],
    );
    let entry = home.join(".local/share/applications/autogpt-shim.desktop");
    assert!(
        out.contains(&format!(
            "wrote {}, with which KDE's KWin lets the installed binary take screenshots",
            entry.display()
        )),
        "{out}"
    );
    let copy = home.join(".local/bin/autogpt-shim");
    let config = home.join(".config/autogpt-local-executor/config.toml");
    let config_arg = config.to_string_lossy();
    let deadline = std::time::Instant::now() + e2e::platform::WAIT;
    loop {
        let said = doctor(&copy, &["--config", &config_arg]);
        if said.contains("screenshots go through KWin's own ScreenShot2 interface instead") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "KWin never let the installed copy take screenshots: {said}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let _shim = Shim::spawn_binary(&copy, &home, &["--config", &config_arg, "start"], &env);
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let payload = &hello["payload"];
    assert_eq!(
        payload["computer_use_features_coarse"],
        json!(["screenshot", "input", "windows", "apps", "permissions"]),
        "{hello}"
    );
    let fine = payload["computer_use_features"].to_string();
    for feature in [
        "screenshot.region",
        "screenshot.all_monitors",
        "screenshot.window",
    ] {
        assert!(
            fine.contains(&format!("\"{feature}\"")),
            "{feature}: {hello}"
        );
    }
    let permission = conn.call("PERMISSIONS_CHECK_REQUEST", "p", json!({})).await;
    assert_eq!(
        permission["payload"]["permissions"]["screen_recording"], "granted",
        "{permission}"
    );

    let witness = Witness::start_with(
        |python| kde.command(python.to_str().expect("a UTF-8 path")),
        "Witness S",
    );
    let listed = listed_window(&mut conn, "title", "Witness S").await;
    let bounds: Vec<i64> = serde_json::from_value(listed["bounds"].clone()).unwrap();
    // The red area's centre, where KWin placed the window's client area.
    let [ax, ay, aw, ah] = witness.area;
    let red = [bounds[0] + ax + aw / 2, bounds[1] + ay + ah / 2];
    let pixel = |(w, _, px): &(u32, u32, Vec<u8>), [x, y]: [i64; 2]| {
        let at = usize::try_from((y * i64::from(*w) + x) * 4).unwrap();
        <[u8; 4]>::try_from(&px[at..at + 4]).unwrap()
    };
    let full = conn
        .call("SCREENSHOT_REQUEST", "s-full", json!({"format": "png"}))
        .await;
    let full = decode_png(&full);
    assert_eq!((full.0, full.1), (1280, 800));
    assert_eq!(
        pixel(&full, red),
        [255, 0, 0, 255],
        "the red area at {red:?}"
    );
    // KWin's title bar above the client area is not red.
    assert_ne!(
        pixel(&full, [bounds[0] + 20, bounds[1] - 10]),
        [255, 0, 0, 255]
    );

    // A region around that point: the same pixels as the whole screen there.
    let region = [red[0] - 40, red[1] - 30, red[0] + 40, red[1] + 30];
    let part = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s-region",
            json!({"format": "png", "region": region}),
        )
        .await;
    let part = decode_png(&part);
    assert_eq!((part.0, part.1), (80, 60));
    for (x, y) in [(0, 0), (79, 0), (40, 30), (0, 59), (79, 59)] {
        assert_eq!(
            pixel(&part, [x, y]),
            pixel(&full, [region[0] + x, region[1] + y]),
            "({x}, {y}) of the region"
        );
    }

    // The pointer over the red area: drawn in by default and only near it, left out when
    // not asked for.
    let pointer = [red[0] + 7, red[1] + 5];
    let moved = conn
        .call(
            "INPUT_ACTION",
            "to-red",
            json!({"action": "mouse_move", "coordinate": pointer}),
        )
        .await;
    assert_eq!(moved["type"], "ACK", "{moved}");
    let drawn = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s-pointer",
            json!({"format": "png", "region": region}),
        )
        .await;
    let drawn = decode_png(&drawn);
    super::connector_computer::the_pointer_is_drawn_over_red(
        &drawn.2,
        drawn.0,
        [region[0], region[1]],
        pointer,
    );
    let bare = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s-bare",
            json!({"format": "png", "region": region, "include_cursor": false}),
        )
        .await;
    let bare = decode_png(&bare);
    assert!(
        bare.2.chunks(4).all(|p| p == [255, 0, 0, 255]),
        "the pointer is in a capture that did not ask for it"
    );

    // The window: its client area, clipped to the output.
    let window = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s-window",
            json!({"format": "png", "window_id": listed["window_id"]}),
        )
        .await;
    let window = decode_png(&window);
    // `bounds` are the client area's corners.
    let visible = [
        u32::try_from(bounds[2].min(1280) - bounds[0]).unwrap(),
        u32::try_from(bounds[3].min(800) - bounds[1]).unwrap(),
    ];
    assert_eq!([window.0, window.1], visible, "{bounds:?}");
    assert_eq!(pixel(&window, [ax + aw / 2, ay + ah / 2]), [255, 0, 0, 255]);

    // The MCP face of the same installed copy, through KWin too: the region's pixels again.
    let mcp_args = ["--config", &config_arg, "mcp", "--enable-computer-use"];
    let mut mcp = super::mcp::Raw::start(
        e2e::platform::shim_command_with(&copy, &home, &mcp_args, &env),
        home.join("mcp.stderr"),
    );
    mcp.initialize();
    let result = mcp.call(7, "screenshot", json!({"format": "png", "region": region}));
    assert_ne!(result["isError"], true, "{result}");
    let png = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        result["content"][0]["data"].as_str().expect("an image"),
    )
    .unwrap();
    let through_mcp = super::connector_wayland::decode_png(&png);
    assert_eq!((through_mcp.0, through_mcp.1), (80, 60));
    assert_eq!(
        pixel(&through_mcp, [40, 30]),
        pixel(&full, [region[0] + 40, region[1] + 30])
    );
    mcp.close();
    drop(witness);

    // `uninstall` takes the entry away with the unit.
    let (code, out, err) = e2e::platform::run_shim(&home, &["uninstall"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(!entry.exists(), "{out}");
}

/// Lets the shim as built take screenshots on `kde`'s KWin, as `install` does for its copy: a
/// desktop entry naming it in KWin's home, waited for until the shim's doctor says KWin takes
/// them (KWin notices a new entry within seconds).
pub(super) fn let_kwin_take_the_built_shims_screenshots(kde: &PortalDesktop) {
    let applications = kde.dir().join(".local/share/applications");
    std::fs::create_dir_all(&applications).unwrap();
    std::fs::write(
        applications.join("autogpt-shim.desktop"),
        format!(
            "[Desktop Entry]\nType=Application\nName=AutoGPT local executor\nExec={} start\nNoDisplay=true\nX-KDE-DBUS-Restricted-Interfaces=org.kde.KWin.ScreenShot2\n",
            e2e::platform::binary("autogpt-shim").display()
        ),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + e2e::platform::WAIT;
    loop {
        let (_, said) = doctor_in_env(kde.env(), "kde-shot-doctor");
        if said.contains("screenshots go through KWin's own ScreenShot2 interface instead") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "KWin never let the shim take screenshots: {said}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}
