//! Computer use through the real `autogpt-shim` binary on Wayland compositors started by the
//! test: a headless sway (wlroots protocols; witnesses grim, wev, foot running `cat`, swaymsg
//! and wl-clipboard; the GTK witness for the accessibility snapshot, with a session bus), at
//! scale 1 and at scale 2; a headless cage, a wlroots compositor that offers screen capture
//! alone; and a headless weston, which offers none of the wlr protocols and must be refused
//! before any backend call (with a session bus, its windows are listed from the accessibility
//! bus).

use std::time::{Duration, Instant};

use base64::Engine as _;
use e2e::display::{on_path, require};
use e2e::platform::{Conn, Platform, binary, error_code};
use e2e::wayland::{Compositor, SEEN_DEADLINE, eventually, file_contains};
use e2e::witness::Witness;
use serde_json::{Value, json};

use super::connector::{ShimIn, doctor_in_env};
use super::desktop_client::{DEMO, Running, wait_for_line};

fn shim_on(compositor: &Compositor, platform: &Platform, tag: &str, extra: &[&str]) -> ShimIn {
    shim_in_env(compositor.env(), platform, tag, extra)
}

/// The compositor's environment without `SWAYSOCK`: sway as any other wlroots compositor,
/// whose protocols give no window geometry.
fn without_swaysock(compositor: &Compositor) -> Vec<(&'static str, String)> {
    let mut env = compositor.env();
    env.retain(|(key, _)| *key != "SWAYSOCK");
    env
}

fn shim_in_env(
    env: Vec<(&'static str, String)>,
    platform: &Platform,
    tag: &str,
    extra: &[&str],
) -> ShimIn {
    ShimIn::start(&env, platform, tag, extra)
}

/// `autogpt-shim doctor` with computer use enabled on `compositor`: its exit code and output.
fn doctor(compositor: &Compositor, tag: &str) -> (Option<i32>, String) {
    doctor_in_env(compositor.env(), tag)
}

pub(super) fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    pixels.truncate(info.buffer_size());
    // To RGBA, whatever grim wrote (RGB) or we did (RGBA).
    let rgba = match info.color_type {
        png::ColorType::Rgba => pixels,
        png::ColorType::Rgb => pixels
            .chunks(3)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect(),
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    (info.width, info.height, rgba)
}

pub(super) fn shot_pixels(reply: &Value) -> (u32, u32, Vec<u8>) {
    assert_eq!(reply["type"], "SCREENSHOT_RESPONSE", "{reply}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(reply["payload"]["image_base64"].as_str().unwrap())
        .unwrap();
    decode_png(&bytes)
}

/// The compositor's own capture of the whole layout, by grim.
fn grim(compositor: &Compositor) -> (u32, u32, Vec<u8>) {
    grim_capture(compositor, None)
}

/// The compositor's own capture of the layout rectangle `[x, y, width, height]`, by grim
/// (`grim -g`, at the outputs' scale).
pub(super) fn grim_region(compositor: &Compositor, rect: [i64; 4]) -> (u32, u32, Vec<u8>) {
    let [x, y, w, h] = rect;
    grim_capture(compositor, Some(format!("{x},{y} {w}x{h}")))
}

/// grim's PNG of the whole layout or of `geometry` (its `-g` syntax), decoded.
fn grim_capture(compositor: &Compositor, geometry: Option<String>) -> (u32, u32, Vec<u8>) {
    require("grim", "grim");
    let mut command = compositor.command("grim");
    command.args(["-t", "png"]);
    if let Some(geometry) = &geometry {
        command.args(["-g", geometry]);
    }
    let out = command.arg("-").output().expect("run grim");
    assert!(
        out.status.success(),
        "grim {geometry:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    decode_png(&out.stdout)
}

/// A SCREENSHOT of the listed window `window_id` against grim's capture of sway's content
/// rectangle for `app_id`, at `scale`: the same size, origin and (nearly all) pixels.
async fn window_shot_matches_grim(
    conn: &mut Conn,
    compositor: &Compositor,
    window_id: &Value,
    app_id: &str,
    scale: i64,
) {
    let (content, _) = window_content(compositor, app_id);
    let shot = conn
        .call(
            "SCREENSHOT_REQUEST",
            "sw",
            json!({"window_id": window_id, "format": "png", "include_cursor": false}),
        )
        .await;
    let (w, h, ours) = shot_pixels(&shot);
    let (gw, gh, theirs) = grim_region(compositor, content);
    assert_eq!(
        (i64::from(w), i64::from(h)),
        (content[2] * scale, content[3] * scale),
        "the window's content at scale {scale}"
    );
    assert_eq!((w, h), (gw, gh), "grim's capture of the same rectangle");
    assert_eq!(
        shot["payload"]["meta"]["origin"],
        json!([content[0] * scale, content[1] * scale]),
        "{}",
        shot["payload"]["meta"]
    );
    let differ = differing(&ours, &theirs);
    assert!(
        differ < (gw * gh / 200) as usize,
        "{differ} of {gw}x{gh} pixels differ from grim's capture of the window"
    );
}

/// A PNG SCREENSHOT without the pointer, with `options` (a region or a window), against grim's
/// capture of the layout rectangle `rect` at scale 1: the same size and origin, and fewer than
/// one pixel in `per` differing.
async fn shot_matches_grim(
    conn: &mut Conn,
    compositor: &Compositor,
    mut options: Value,
    rect: [i64; 4],
    per: usize,
) {
    options["format"] = json!("png");
    options["include_cursor"] = json!(false);
    let shot = conn.call("SCREENSHOT_REQUEST", "sg", options).await;
    let (w, h, ours) = shot_pixels(&shot);
    assert_eq!([i64::from(w), i64::from(h)], [rect[2], rect[3]], "the size");
    assert_eq!(shot["payload"]["meta"]["origin"], json!([rect[0], rect[1]]));
    let (_, _, theirs) = grim_region(compositor, rect);
    let differ = differing(&ours, &theirs);
    assert!(
        differ < (w * h) as usize / per,
        "{differ} of {w}x{h} pixels differ from grim's capture of {rect:?}"
    );
}

/// Pixels that differ between two same-sized RGBA images.
fn differing(a: &[u8], b: &[u8]) -> usize {
    assert_eq!(a.len(), b.len());
    a.chunks(4).zip(b.chunks(4)).filter(|(x, y)| x != y).count()
}

/// A SCREENSHOT of the whole output (`size` pixels, without the pointer) against grim's
/// capture of it: foot's text cursor may blink between the two, so it is judged on counts.
/// The reply and our pixels (RGBA).
async fn full_shot_matches_grim(
    conn: &mut Conn,
    compositor: &Compositor,
    size: (u32, u32),
) -> (Value, Vec<u8>) {
    let full = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s1",
            json!({"format": "png", "include_cursor": false}),
        )
        .await;
    let (w, h, ours) = shot_pixels(&full);
    assert_eq!((w, h), size);
    let (gw, gh, theirs) = grim(compositor);
    assert_eq!((gw, gh), size);
    let differ = differing(&ours, &theirs);
    assert!(
        differ < usize::try_from(size.0 * size.1 / 200).unwrap(),
        "{differ} pixels differ from grim's capture"
    );
    (full, ours)
}

/// Sends each `(kind, payload, feature)` request and expects it refused
/// `FEATURE_NOT_SUPPORTED` naming `feature`, with the reason that this compositor lacks the
/// protocol: refused before any backend call.
async fn refused_for_want_of_a_protocol(conn: &mut Conn, requests: Vec<(&str, Value, &str)>) {
    for (n, (kind, body, feature)) in requests.into_iter().enumerate() {
        let reply = conn.call(kind, &format!("r{n}"), body).await;
        assert_eq!(error_code(&reply), "FEATURE_NOT_SUPPORTED", "{reply}");
        let details = &reply["payload"]["details"];
        assert_eq!(details["feature"], feature, "{reply}");
        assert!(
            details["reason"]
                .as_str()
                .unwrap()
                .contains("Wayland compositor offers no protocol"),
            "{reply}"
        );
    }
}

/// A request of each kind that needs the wlr input, window list or clipboard protocols, and
/// the feature its refusal names.
fn input_windows_and_clipboard() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        (
            "INPUT_ACTION",
            json!({"action": "left_click", "coordinate": [5, 5]}),
            "input",
        ),
        (
            "INPUT_ACTION",
            json!({"action": "type", "text": "x"}),
            "input",
        ),
        ("CURSOR_POSITION_REQUEST", json!({}), "cursor.position"),
        ("WINDOW_LIST_REQUEST", json!({}), "window.list"),
        (
            "CLIPBOARD_READ",
            json!({"format": "text"}),
            "clipboard.read",
        ),
        (
            "CLIPBOARD_WRITE",
            json!({"format": "text", "content": "x"}),
            "clipboard.write",
        ),
    ]
}

/// What `doctor` says, with computer use enabled, for each wlr protocol named (`pointer`,
/// `keyboard`, `windows`, `clipboard`) that the compositor lacks.
fn doctor_says_missing(protocols: &[&str]) -> Vec<String> {
    let wlroots = "sway, Hyprland, river and labwc offer it";
    protocols
        .iter()
        .map(|protocol| {
            let (what, cost) = match *protocol {
                "pointer" => (
                    "virtual pointer protocol (zwlr_virtual_pointer_manager_v1 version 2)",
                    "clicks and pointer moves are unavailable",
                ),
                "keyboard" => (
                    "virtual keyboard protocol (zwp_virtual_keyboard_manager_v1)",
                    "typing is unavailable",
                ),
                "windows" => (
                    "window list protocol (zwlr_foreign_toplevel_manager_v1)",
                    "listing and focusing windows is unavailable",
                ),
                "clipboard" => (
                    "clipboard protocol (zwlr_data_control_manager_v1)",
                    "the clipboard is unavailable",
                ),
                other => panic!("no doctor line for {other}"),
            };
            format!("[WARN] Wayland  no {what}: {cost}; {wlroots}")
        })
        .collect()
}

async fn act(conn: &mut Conn, id: &str, payload: Value) -> Value {
    let reply = conn.call("INPUT_ACTION", id, payload).await;
    assert_eq!(reply["type"], "ACK", "{reply}");
    reply
}

/// A foot terminal with `app_id` whose `cat` writes what it reads to `file` (a tty in canonical
/// mode: a line arrives once Return is typed).
fn foot_cat(compositor: &mut Compositor, app_id: &str, file: &std::path::Path) {
    require("foot", "foot");
    // Ctrl+V pastes, as in most programs (foot's own default is Ctrl+Shift+V).
    let config = compositor.path(&format!("{app_id}-foot.ini"));
    std::fs::write(
        &config,
        "[key-bindings]\nclipboard-paste=Control+v Control+Shift+v XF86Paste\n",
    )
    .expect("write foot's configuration");
    let mut foot = compositor.command("foot");
    foot.arg("--config")
        .arg(&config)
        .args(["--app-id", app_id, "--title", app_id, "sh", "-c"])
        .arg(format!("exec cat > '{}'", file.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    compositor.spawn(foot);
    compositor.wait_for_app(app_id);
}

/// wev, logging to `log` a line at a time.
fn wev(compositor: &mut Compositor, log: &std::path::Path) {
    let stdbuf = e2e::wayland::wev_command(compositor.command("stdbuf"), log);
    compositor.spawn(stdbuf);
    compositor.wait_for_app("wev");
}

/// A move to `target` (display-global, at scale 1) reaches wev, whose window's corner is
/// `corner`, at the surface point it should, and a left click there as a press and a release.
async fn wev_sees_a_move_and_a_click(
    conn: &mut Conn,
    wev_log: &std::path::Path,
    target: [i64; 2],
    corner: [i64; 2],
) {
    act(
        conn,
        "move",
        json!({"action": "mouse_move", "coordinate": target}),
    )
    .await;
    let expected = format!(
        "x, y: {}.000000, {}.000000",
        target[0] - corner[0],
        target[1] - corner[1]
    );
    eventually(&format!("wev seeing motion at {expected}"), || {
        file_contains(wev_log, &expected)
    })
    .await;
    act(
        conn,
        "click",
        json!({"action": "left_click", "coordinate": target}),
    )
    .await;
    eventually("wev seeing a left press and release", || {
        let log = std::fs::read_to_string(wev_log).unwrap_or_default();
        log.contains("button: 272 (left), state: 1 (pressed)")
            && log.contains("button: 272 (left), state: 0 (released)")
    })
    .await;
}

/// The rectangle sway gives the window with `app_id` (layout coordinates).
fn window_rect(compositor: &Compositor, app_id: &str) -> [i64; 4] {
    fn walk(node: &Value, app_id: &str) -> Option<[i64; 4]> {
        if node["app_id"] == app_id {
            let r = &node["rect"];
            return Some(["x", "y", "width", "height"].map(|k| r[k].as_i64().unwrap()));
        }
        ["nodes", "floating_nodes"]
            .iter()
            .filter_map(|k| node[*k].as_array())
            .flatten()
            .find_map(|n| walk(n, app_id))
    }
    walk(&compositor.tree(), app_id).unwrap_or_else(|| panic!("{app_id} not in sway's tree"))
}

/// The content sway gives the window with `app_id` (its `rect` moved by its `window_rect`,
/// layout coordinates) and its process.
pub(super) fn window_content(compositor: &Compositor, app_id: &str) -> ([i64; 4], Value) {
    fn walk(node: &Value, app_id: &str) -> Option<([i64; 4], Value)> {
        if node["app_id"] == app_id {
            let (r, w) = (&node["rect"], &node["window_rect"]);
            let n = |v: &Value, k: &str| v[k].as_i64().unwrap();
            return Some((
                [
                    n(r, "x") + n(w, "x"),
                    n(r, "y") + n(w, "y"),
                    n(w, "width"),
                    n(w, "height"),
                ],
                node["pid"].clone(),
            ));
        }
        ["nodes", "floating_nodes"]
            .iter()
            .filter_map(|k| node[*k].as_array())
            .flatten()
            .find_map(|n| walk(n, app_id))
    }
    walk(&compositor.tree(), app_id).unwrap_or_else(|| panic!("{app_id} not in sway's tree"))
}

/// The clipboard both ways on a compositor with wlr-data-control, checked by wl-clipboard,
/// which `wl` starts with the compositor's environment: what the shim writes `wl-paste` reads,
/// and what `wl-copy` sets the shim reads.
pub(super) async fn clipboard_both_ways(
    conn: &mut Conn,
    wl: impl Fn(&str) -> std::process::Command,
) {
    require("wl-paste", "wl-clipboard");
    let written = conn
        .call(
            "CLIPBOARD_WRITE",
            "cw",
            json!({"format": "text", "content": "héllo ✓ clip"}),
        )
        .await;
    assert_eq!(written["type"], "ACK", "{written}");
    let pasted = wl("wl-paste")
        .arg("--no-newline")
        .output()
        .expect("run wl-paste");
    assert_eq!(String::from_utf8_lossy(&pasted.stdout), "héllo ✓ clip");
    let copy = wl("wl-copy")
        .arg("from wl-copy ✓")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(copy.success());
    let read = conn
        .call("CLIPBOARD_READ", "cr", json!({"format": "text"}))
        .await;
    assert_eq!(read["payload"]["content"], "from wl-copy ✓", "{read}");
    // wl-copy forks a server that serves until another selection replaces it: replace it.
    let done = conn
        .call(
            "CLIPBOARD_WRITE",
            "cw2",
            json!({"format": "text", "content": "done"}),
        )
        .await;
    assert_eq!(done["type"], "ACK", "{done}");
}

/// The text [`paste_keeping_the_clipboard`] pastes: "✓" is in no keyboard layout here.
pub(super) const PASTED: &str = "pasted ✓ text";

/// `type` with `paste` and `preserve_clipboard` of [`PASTED`] into the window with the keyboard
/// focus; afterwards the clipboard holds what it held before, as `wl-paste` reads it. Whether
/// the text arrived is the caller's witness's to say.
pub(super) async fn paste_keeping_the_clipboard(
    conn: &mut Conn,
    wl: impl Fn(&str) -> std::process::Command,
) {
    let kept = conn
        .call(
            "CLIPBOARD_WRITE",
            "keep",
            json!({"format": "text", "content": "keep me"}),
        )
        .await;
    assert_eq!(kept["type"], "ACK", "{kept}");
    act(
        conn,
        "paste",
        json!({"action": "type", "text": PASTED, "paste": true, "preserve_clipboard": true}),
    )
    .await;
    let now = wl("wl-paste")
        .arg("--no-newline")
        .output()
        .expect("run wl-paste");
    assert_eq!(String::from_utf8_lossy(&now.stdout), "keep me");
}

#[tokio::test]
async fn sway_serves_every_computer_use_message_through_the_wlr_protocols() {
    require("wl-paste", "wl-clipboard");
    let mut sway = Compositor::sway(1);
    let typed = sway.path("typed.txt");
    foot_cat(&mut sway, "typetarget", &typed);
    let platform = Platform::bind().await;
    let _shim = shim_on(
        &sway,
        &platform,
        "wl-sway",
        &["--enable-clipboard", "--enable-clipboard-read-foreign"],
    );
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let payload = &hello["payload"];
    assert_eq!(payload["screen_resolution"], json!([1280, 800]));
    assert_eq!(
        payload["computer_use_features_coarse"],
        json!([
            "screenshot",
            "input",
            "windows",
            "apps",
            "clipboard",
            "permissions"
        ])
    );
    let fine = payload["computer_use_features"].as_array().unwrap();
    for feature in [
        "screenshot.region",
        "screenshot.all_monitors",
        "screenshot.window",
        "input.drag.path",
        "input.key.hold",
        "cursor.position",
        "display.info",
        "window.list",
        "window.focus",
        "clipboard.read",
        "clipboard.write",
    ] {
        assert!(
            fine.contains(&json!(feature)),
            "{feature} missing: {fine:?}"
        );
    }

    // DISPLAY_INFO: the one output.
    let info = conn.call("DISPLAY_INFO_REQUEST", "d", json!({})).await;
    assert_eq!(
        info["payload"]["monitors"],
        json!([{"index": 0, "primary": true, "physical_size": [1280, 800],
                "logical_size": [1280, 800], "scale": 1.0, "origin": [0, 0]}])
    );

    // Typing: any Unicode text, through the keymap the shim uploads, into foot's cat; then a
    // key chord (BackSpace erases in the tty's line editing).
    act(
        &mut conn,
        "t1",
        json!({"action": "type", "text": "Grüße ✓ 日本語 🙂 ½\n"}),
    )
    .await;
    eventually("the typed line in foot", || {
        file_contains(&typed, "Grüße ✓ 日本語 🙂 ½\n")
    })
    .await;
    act(&mut conn, "t2", json!({"action": "type", "text": "xyz"})).await;
    act(
        &mut conn,
        "k1",
        json!({"action": "key", "key": "BackSpace"}),
    )
    .await;
    act(&mut conn, "k2", json!({"action": "key", "key": "Return"})).await;
    eventually("xy after a BackSpace", || file_contains(&typed, "½\nxy\n")).await;

    // Screenshots: the whole output, pixel for pixel what grim sees; a region cut from it.
    let (full, ours) = full_shot_matches_grim(&mut conn, &sway, (1280, 800)).await;
    assert_eq!(full["payload"]["display_scale"], 1.0);
    let region = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s2",
            json!({"format": "png", "region": [100, 50, 300, 150]}),
        )
        .await;
    let (rw, rh, part) = shot_pixels(&region);
    assert_eq!((rw, rh), (200, 100));
    assert_eq!(region["payload"]["meta"]["origin"], json!([100, 50]));
    let same = (0..100_usize)
        .flat_map(|y| (0..200_usize).map(move |x| (x, y)))
        .filter(|&(x, y)| {
            let a = (y * 200 + x) * 4;
            let b = ((y + 50) * 1280 + x + 100) * 4;
            part[a..a + 4] == ours[b..b + 4]
        })
        .count();
    assert!(
        same > 200 * 100 * 99 / 100,
        "only {same} region pixels match"
    );

    // Windows: foot listed by its app id; wev opens beside it and takes the focus.
    let wev_log = sway.path("wev.log");
    wev(&mut sway, &wev_log);
    eventually("wev focused", || {
        sway.focused_app().as_deref() == Some("wev")
    })
    .await;
    let list = conn.call("WINDOW_LIST_REQUEST", "w1", json!({})).await;
    assert_eq!(list["type"], "WINDOW_LIST_RESPONSE", "{list}");
    let windows = list["payload"]["windows"].as_array().unwrap().clone();
    let foot = windows
        .iter()
        .find(|w| w["app_name"] == "typetarget")
        .unwrap_or_else(|| panic!("foot not listed: {windows:?}"));
    assert_eq!(foot["title"], "typetarget");
    assert_eq!(foot["is_focused"], false);
    // The geometry and process come from sway's IPC: its content rectangle, at scale 1 the
    // same numbers.
    let (content, pid) = window_content(&sway, "typetarget");
    assert_eq!(foot["bounds"], json!(content), "{foot}");
    assert_eq!(foot["pid"], pid, "{foot}");
    window_shot_matches_grim(&mut conn, &sway, &foot["window_id"], "typetarget", 1).await;
    assert!(
        windows
            .iter()
            .any(|w| w["is_focused"] == true && w["app_name"] == "wev")
    );
    let focus = conn
        .call(
            "WINDOW_FOCUS",
            "f1",
            json!({"window_id": foot["window_id"]}),
        )
        .await;
    assert_eq!(focus["type"], "ACK", "{focus}");
    eventually("foot focused per swaymsg", || {
        sway.focused_app().as_deref() == Some("typetarget")
    })
    .await;

    // A window that closes leaves a stale id.
    let doomed = sway.path("doomed.txt");
    foot_cat(&mut sway, "doomed", &doomed);
    let doomed_id = listed_window(&mut conn, "app_name", "doomed").await["window_id"].clone();
    let kill = sway
        .command("swaymsg")
        .args(["[app_id=doomed]", "kill"])
        .output()
        .unwrap();
    assert!(kill.status.success());
    eventually("the doomed window gone", || {
        !serde_json::to_string(&sway.tree())
            .unwrap()
            .contains("\"app_id\":\"doomed\"")
    })
    .await;
    let stale = conn
        .call("WINDOW_FOCUS", "f2", json!({"window_id": doomed_id}))
        .await;
    assert_eq!(error_code(&stale), "WINDOW_STALE");
    let stale_shot = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s-stale",
            json!({"window_id": doomed_id}),
        )
        .await;
    assert_eq!(error_code(&stale_shot), "WINDOW_STALE", "{stale_shot}");
    assert_eq!(stale["payload"]["details"]["window_id"], doomed_id);

    // The pointer: a move into wev's window arrives at the surface coordinates it should, and
    // a click there as a left press and release.
    let [wx, wy, ww, wh] = window_rect(&sway, "wev");
    let target = [wx + ww / 2 + 7, wy + wh / 3 + 3];
    wev_sees_a_move_and_a_click(&mut conn, &wev_log, target, [wx, wy]).await;
    let cursor = conn.call("CURSOR_POSITION_REQUEST", "p", json!({})).await;
    assert_eq!(
        cursor["payload"],
        json!({"x": target[0], "y": target[1], "monitor": 0}),
        "{cursor}"
    );
    let outside = conn
        .call(
            "INPUT_ACTION",
            "o",
            json!({"action": "mouse_move", "coordinate": [1280, 10]}),
        )
        .await;
    assert_eq!(error_code(&outside), "INPUT_OUT_OF_BOUNDS");

    // The clipboard both ways, checked by wl-clipboard; then a paste into foot, focused again
    // (its `cat` gets the line at the Return).
    clipboard_both_ways(&mut conn, |program| sway.command(program)).await;
    let foot = listed_window(&mut conn, "app_name", "typetarget").await;
    let focus = conn
        .call(
            "WINDOW_FOCUS",
            "fp",
            json!({"window_id": foot["window_id"]}),
        )
        .await;
    assert_eq!(focus["type"], "ACK", "{focus}");
    paste_keeping_the_clipboard(&mut conn, |program| sway.command(program)).await;
    act(&mut conn, "ret", json!({"action": "key", "key": "Return"})).await;
    eventually("the pasted line in foot", || {
        file_contains(&typed, &format!("\n{PASTED}\n"))
    })
    .await;

    let permissions = conn
        .call("PERMISSIONS_CHECK_REQUEST", "perm", json!({}))
        .await;
    assert_eq!(
        permissions["payload"]["permissions"]["screen_recording"],
        "granted"
    );
    assert_eq!(
        permissions["payload"]["permissions"]["input_monitoring"],
        "granted"
    );

    // doctor finds every protocol on sway; without a session bus, it names what that costs
    // (with one, it finds nothing missing: the accessibility tests below).
    let (code, out) = doctor(&sway, "wl-sway-doctor");
    assert_eq!(code, Some(0), "{out}");
    let wayland: Vec<&str> = out.lines().filter(|l| l.contains("] Wayland  ")).collect();
    assert_eq!(
        wayland,
        [
            "[WARN] Wayland  no session bus (DBUS_SESSION_BUS_ADDRESS is unset): accessibility snapshots are unavailable; start the shim inside the desktop session"
        ],
        "{out}"
    );
}

/// What the X11 suite checks beyond the backends, on sway: a screenshot over the negotiated
/// file size is refused before it is encoded and the minute's tenth is the last; the clipboard
/// under the default writeback-only policy, its size limit at the boundary, checked with
/// wl-clipboard; and a program APP_LAUNCH starts opens its window on the compositor, where
/// WINDOW_LIST and APP_LIST find it by its pid.
#[tokio::test]
async fn sway_keeps_the_limits_and_the_clipboard_policy_and_launches_apps() {
    require("wl-paste", "wl-clipboard");
    require("foot", "foot");
    let sway = Compositor::sway(1);
    let platform = Platform::bind().await;
    let shim = shim_on(&sway, &platform, "wl-limits", &["--enable-clipboard"]);
    let (mut conn, _) = platform
        .session(&["computer_use"], |ack| {
            ack["payload"]["max_file_size_bytes"] = json!(4096);
        })
        .await;
    let wl_paste = || {
        let out = sway
            .command("wl-paste")
            .arg("--no-newline")
            .output()
            .expect("run wl-paste");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    // Screenshots: the whole output is over 4096 bytes; an 8×8 region is not. That refusal
    // counted as the minute's first, so nine more pass and the eleventh is refused.
    let big = conn
        .call("SCREENSHOT_REQUEST", "big", json!({"format": "png"}))
        .await;
    assert_eq!(error_code(&big), "FILE_TOO_LARGE", "{big}");
    assert_eq!(big["payload"]["details"]["limit"], 4096);
    for n in 2..=10 {
        let small = conn
            .call(
                "SCREENSHOT_REQUEST",
                &format!("s{n}"),
                json!({"format": "png", "region": [0, 0, 8, 8]}),
            )
            .await;
        assert_eq!(shot_pixels(&small).0, 8, "{small}");
    }
    let refused = conn.call("SCREENSHOT_REQUEST", "s11", json!({})).await;
    assert_eq!(error_code(&refused), "SHIM_OVERLOADED", "{refused}");
    assert_eq!(
        refused["payload"]["details"],
        json!({"screenshots_per_minute": 10})
    );

    // The clipboard, writeback only, and its size limit, with wl-clipboard as the other
    // program; the last write also replaces wl-copy's selection, so its server exits.
    super::connector_computer::the_clipboard_is_writeback_only_up_to_its_limit(
        &mut conn,
        &shim,
        wl_paste,
        |text| {
            let copied = sway
                .command("wl-copy")
                .arg(text)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(copied.success());
        },
    )
    .await;

    // A launched program inherits the compositor the shim serves: foot's window opens there,
    // with the pid APP_LAUNCH answered.
    let foot = on_path("foot").expect("foot is on PATH");
    let launched = conn
        .call(
            "APP_LAUNCH",
            "la",
            json!({"executable_path": foot, "args": ["--app-id", "launched", "--title", "launched", "cat"]}),
        )
        .await;
    assert_eq!(launched["type"], "ACK", "{launched}");
    let pid = launched["payload"]["pid"].as_u64().unwrap();
    let _stop = KillOnDrop(u32::try_from(pid).unwrap());
    sway.wait_for_app("launched");
    assert_eq!(window_content(&sway, "launched").1, json!(pid));
    let window = listed_window(&mut conn, "app_name", "launched").await;
    assert_eq!(window["pid"], json!(pid), "{window}");
    let apps = conn.call("APP_LIST_REQUEST", "al", json!({})).await;
    let app = apps["payload"]["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pid"] == json!(pid))
        .cloned()
        .unwrap_or_else(|| panic!("the launched foot is not among the apps: {apps}"));
    assert_eq!(app["window_count"], 1, "{app}");
}

/// Every INPUT_ACTION the X11 suite checks, on sway, witnessed by the GTK witness window
/// floating at (40, 30): clicks counted as GTK counts them, modifiers held for a click, a press
/// and release apart, a drag along a path, scrolling four ways, text, a chord, a held key for
/// its duration, and a wait that holds the next operation back. The witness reports points
/// from its window's corner; sway's content origin makes them the display's.
#[tokio::test]
async fn sway_delivers_every_input_action_the_x11_suite_checks() {
    let sway = Compositor::sway(1);
    let mut witness = floating_witness(&sway, "Witness I").await;
    let origin = [40, 30];
    let at = |report: &Value| {
        [
            origin[0] + report["x"].as_i64().unwrap(),
            origin[1] + report["y"].as_i64().unwrap(),
        ]
    };
    let [cx, cy] = witness.centre();
    let (cx, cy) = (cx + origin[0], cy + origin[1]);
    let platform = Platform::bind().await;
    let _shim = shim_on(&sway, &platform, "wl-input", &[]);
    let (mut conn, _) = platform.session(&["computer_use"], |_| {}).await;

    // Clicks, counted by GTK from their timing, and a click with modifiers held.
    act(
        &mut conn,
        "dbl",
        json!({"action": "double_click", "coordinate": [cx, cy]}),
    )
    .await;
    witness.expect("press", |p| p["count"] == 2);
    act(
        &mut conn,
        "tpl",
        json!({"action": "triple_click", "coordinate": [cx + 1, cy]}),
    )
    .await;
    witness.expect("press", |p| p["count"] == 3);
    act(
        &mut conn,
        "mod",
        json!({"action": "left_click", "coordinate": [cx - 40, cy], "modifiers": ["shift", "ctrl"]}),
    )
    .await;
    let press = witness.expect("press", |p| at(p) == [cx - 40, cy]);
    assert_eq!(press["modifiers"], json!(["shift", "ctrl"]), "{press}");
    act(
        &mut conn,
        "right",
        json!({"action": "right_click", "coordinate": [cx, cy + 20]}),
    )
    .await;
    let press = witness.expect("press", |p| p["button"] == 3);
    assert_eq!(at(&press), [cx, cy + 20]);
    witness.expect("release", |r| r["button"] == 3);

    // Press, move, release; then a drag along a path.
    let (p1, p2) = ([cx - 100, cy - 50], [cx + 100, cy + 60]);
    act(
        &mut conn,
        "down",
        json!({"action": "mouse_down", "coordinate": p1}),
    )
    .await;
    act(
        &mut conn,
        "mv",
        json!({"action": "mouse_move", "coordinate": p2}),
    )
    .await;
    act(
        &mut conn,
        "up",
        json!({"action": "mouse_up", "coordinate": p2}),
    )
    .await;
    assert_eq!(at(&witness.expect("press", |_| true)), p1);
    witness.expect("motion", |_| true);
    assert_eq!(at(&witness.expect("release", |_| true)), p2);
    let end = [cx - 120, cy + 10];
    act(
        &mut conn,
        "drag",
        json!({"action": "drag", "path": [p2, [cx, cy], end]}),
    )
    .await;
    assert_eq!(at(&witness.expect("press", |_| true)), p2);
    witness.expect("motion", |_| true);
    assert_eq!(at(&witness.expect("release", |_| true)), end);
    let cursor = conn.call("CURSOR_POSITION_REQUEST", "cp", json!({})).await;
    assert_eq!(
        cursor["payload"],
        json!({"x": end[0], "y": end[1], "monitor": 0})
    );

    // Scrolling by clicks, by amount, and sideways. A wheel's notch reaches a GTK 3 widget that
    // takes smooth scrolling (the witness's area) as a smooth event of 1.5 on its axis, one a
    // notch, where X11 sends a button press a notch.
    for (payload, axis, delta, steps) in [
        (
            json!({"action": "scroll", "coordinate": [cx, cy], "direction": "down", "clicks": 3}),
            "dy",
            1.5,
            3,
        ),
        (
            json!({"action": "scroll", "coordinate": [cx, cy], "scroll_direction": "up", "scroll_amount": 2}),
            "dy",
            -1.5,
            2,
        ),
        (
            json!({"action": "scroll", "coordinate": [cx, cy], "scroll_direction": "left", "clicks": 1}),
            "dx",
            -1.5,
            1,
        ),
        (
            json!({"action": "scroll", "coordinate": [cx, cy], "direction": "right", "clicks": 1}),
            "dx",
            1.5,
            1,
        ),
    ] {
        act(&mut conn, "sc", payload).await;
        for _ in 0..steps {
            witness.expect("scroll", |s| {
                s["direction"] == "smooth" && s[axis].as_f64() == Some(delta)
            });
        }
    }
    let extra: Vec<Value> = witness
        .drain(Duration::from_millis(300))
        .into_iter()
        .filter(|e| e["event"] == "scroll")
        .collect();
    assert!(extra.is_empty(), "more scrolling than asked for: {extra:?}");

    // Typing into the entry, clicked first; a chord selects everything; a key deletes it.
    let entry: Vec<i64> = serde_json::from_value(witness.ready["entry"].clone()).unwrap();
    let in_entry = [
        origin[0] + entry[0] + entry[2] / 2,
        origin[1] + entry[1] + entry[3] / 2,
    ];
    act(
        &mut conn,
        "focus",
        json!({"action": "left_click", "coordinate": in_entry}),
    )
    .await;
    let text = "héllo wörld ✓";
    act(&mut conn, "type", json!({"action": "type", "text": text})).await;
    witness.expect("text", |t| t["text"] == text);
    act(&mut conn, "all", json!({"action": "key", "key": "ctrl+a"})).await;
    let chord = witness.expect("key", |k| k["name"] == "a");
    assert_eq!(chord["modifiers"], json!(["ctrl"]));
    act(
        &mut conn,
        "del",
        json!({"action": "key", "key": "BackSpace"}),
    )
    .await;
    witness.expect("text", |t| t["text"] == "");

    // A held key stays down for its duration (the compositor's timestamps, in ms).
    let started = Instant::now();
    act(
        &mut conn,
        "hold",
        json!({"action": "hold_key", "key": "shift", "duration_ms": 400}),
    )
    .await;
    assert!(started.elapsed() >= Duration::from_millis(400));
    let down = witness.expect("key", |k| k["name"] == "Shift_L");
    let up = witness.expect("key_release", |k| k["name"] == "Shift_L");
    let held = up["time"].as_i64().unwrap() - down["time"].as_i64().unwrap();
    assert!(held >= 350, "Shift_L held {held} ms");

    super::connector_computer::a_wait_holds_the_next_operation_back(&mut conn).await;

    super::connector_computer::refused_input_reaches_nothing(
        &mut conn,
        &mut witness,
        [cx, cy],
        [1280, 800],
    )
    .await;
}

/// Two outputs on sway make one virtual desktop, as two monitors do on X11: DISPLAY_INFO lists
/// both where sway placed them, each output's capture and the stitched one are grim's pixels
/// (black where no output is), a region across the seam comes from both, input on the second
/// output reaches wev there at the surface point it should, and the strip below the shorter
/// output is on no display.
#[tokio::test]
async fn two_sway_outputs_make_one_virtual_desktop_for_capture_and_input() {
    let (sway, wev_log, [wx, wy, ww, wh]) =
        sway_with_wev_on_a_second_output(1, [1280, 0, 1024, 768], "wev-two.log");

    let platform = Platform::bind().await;
    let _shim = shim_on(&sway, &platform, "wl-two", &[]);
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    assert_eq!(hello["payload"]["screen_resolution"], json!([1280, 800]));
    let info = conn.call("DISPLAY_INFO_REQUEST", "d", json!({})).await;
    assert_eq!(
        info["payload"]["monitors"],
        json!([
            {"index": 0, "primary": true, "physical_size": [1280, 800],
             "logical_size": [1280, 800], "scale": 1.0, "origin": [0, 0]},
            {"index": 1, "primary": false, "physical_size": [1024, 768],
             "logical_size": [1024, 768], "scale": 1.0, "origin": [1280, 0]}
        ])
    );

    let theirs =
        second_output_matches_grim(&mut conn, &sway, [1280, 0, 1024, 768], [1280, 0]).await;

    // Both stitched: grim's capture of each output where it is, black below the shorter one.
    let all = conn
        .call(
            "SCREENSHOT_REQUEST",
            "all",
            json!({"format": "png", "monitor": -1, "include_cursor": false}),
        )
        .await;
    let (w, h, ours) = shot_pixels(&all);
    assert_eq!((w, h), (2304, 800));
    let (_, _, first) = grim_region(&sway, [0, 0, 1280, 800]);
    let part = |image: &[u8], [x, y, width, height]: [usize; 4]| -> Vec<u8> {
        (y..y + height)
            .flat_map(|row| image[(row * 2304 + x) * 4..(row * 2304 + x + width) * 4].to_vec())
            .collect()
    };
    let differ = differing(&part(&ours, [0, 0, 1280, 800]), &first);
    assert!(
        differ < 1280 * 800 / 200,
        "{differ} pixels differ on the first"
    );
    let differ = differing(&part(&ours, [1280, 0, 1024, 768]), &theirs);
    assert!(
        differ < 1024 * 768 / 200,
        "{differ} pixels differ on the second"
    );
    assert!(
        part(&ours, [1280, 768, 1024, 32])
            .chunks(4)
            .all(|p| p == [0, 0, 0, 255]),
        "the strip below the second output is not black"
    );

    // A region across the seam comes from both outputs.
    let seam = json!({"region": [1200, 300, 1400, 400]});
    shot_matches_grim(&mut conn, &sway, seam, [1200, 300, 200, 100], 200).await;

    // Input on the second output: wev sees the motion at its surface point, and the click.
    let target = [wx + ww / 2 + 5, wy + wh / 3 + 2];
    wev_sees_a_move_and_a_click(&mut conn, &wev_log, target, [wx, wy]).await;
    // The pointer is there by the shim's account; below the shorter output is on no display.
    the_pointer_is_on_the_second_output(
        &mut conn,
        target,
        [1500, 790],
        json!([{"index": 0, "origin": [0, 0], "size": [1280, 800]},
               {"index": 1, "origin": [1280, 0], "size": [1024, 768]}]),
    )
    .await;
}

/// A sway with a second output ([`second_output`]) and wev open on it, logging to `log` in
/// sway's runtime directory; the log's path and wev's window rectangle.
fn sway_with_wev_on_a_second_output(
    scale: u32,
    rect: [i64; 4],
    log: &str,
) -> (Compositor, std::path::PathBuf, [i64; 4]) {
    let mut sway = Compositor::sway(1);
    second_output(&sway, scale, rect);
    let wev_log = sway.path(log);
    wev(&mut sway, &wev_log);
    let window = window_rect(&sway, "wev");
    assert!(
        window[0] >= rect[0],
        "wev opened on the second output: {window:?}"
    );
    (sway, wev_log, window)
}

/// Adds a 1024×768 output HEADLESS-2 at `scale` to the right of sway's first (1280×800 at
/// scale 1), where it covers the layout rectangle `rect`, and focuses it, so the next window
/// opens there.
fn second_output(sway: &Compositor, scale: u32, rect: [i64; 4]) {
    let (x, y) = (rect[0].to_string(), rect[1].to_string());
    let scale = scale.to_string();
    for args in [
        vec!["create_output"],
        vec![
            "output",
            "HEADLESS-2",
            "resolution",
            "1024x768",
            "scale",
            &scale,
            "position",
            &x,
            &y,
        ],
        vec!["focus", "output", "HEADLESS-2"],
    ] {
        let out = sway
            .command("swaymsg")
            .args(&args)
            .output()
            .expect("run swaymsg");
        assert!(out.status.success(), "swaymsg {args:?}: {out:?}");
    }
    let wanted = vec![
        ("HEADLESS-1".to_owned(), [0, 0, 1280, 800]),
        ("HEADLESS-2".to_owned(), rect),
    ];
    let deadline = Instant::now() + SEEN_DEADLINE;
    while output_rects(sway) != wanted {
        assert!(
            Instant::now() < deadline,
            "sway never placed its second output: {:?}",
            output_rects(sway)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Outputs of two scales: each sits at its logical position times the largest scale with its
/// physical size, so on a 1024×768 output at scale 2 beside a 1280×800 one at scale 1, the
/// second starts at x 2560 and a point there reaches wev at half its distance from that
/// corner; the part of the first output's doubled box it does not cover is on no display.
#[tokio::test]
async fn outputs_of_two_scales_sit_at_their_logical_place_times_the_largest_scale() {
    let (sway, wev_log, [wx, wy, _, _]) =
        sway_with_wev_on_a_second_output(2, [1280, 0, 512, 384], "wev-scales.log");

    let platform = Platform::bind().await;
    let _shim = shim_on(&sway, &platform, "wl-scales", &[]);
    let (mut conn, _) = platform.session(&["computer_use"], |_| {}).await;
    let info = conn.call("DISPLAY_INFO_REQUEST", "d", json!({})).await;
    assert_eq!(
        info["payload"]["monitors"],
        json!([
            {"index": 0, "primary": true, "physical_size": [1280, 800],
             "logical_size": [1280, 800], "scale": 1.0, "origin": [0, 0]},
            {"index": 1, "primary": false, "physical_size": [1024, 768],
             "logical_size": [512, 384], "scale": 2.0, "origin": [2560, 0]}
        ])
    );
    second_output_matches_grim(&mut conn, &sway, [1280, 0, 512, 384], [2560, 0]).await;

    let target = [2560 + 2 * (wx - 1280) + 301, 2 * wy + 151];
    act(
        &mut conn,
        "m",
        json!({"action": "mouse_move", "coordinate": target}),
    )
    .await;
    let expected = "x, y: 150.500000, 75.500000";
    eventually(&format!("wev seeing motion at {expected}"), || {
        file_contains(&wev_log, expected)
    })
    .await;
    the_pointer_is_on_the_second_output(
        &mut conn,
        target,
        [1500, 100],
        json!([{"index": 0, "origin": [0, 0], "size": [1280, 800]},
               {"index": 1, "origin": [2560, 0], "size": [1024, 768]}]),
    )
    .await;
}

/// A SCREENSHOT of the second output (1024×768 physical, wev filling it) against grim's
/// capture of its layout rectangle `layout`: at `origin` (display-global), grim's pixels, and
/// not the first output's. Returns grim's pixels.
async fn second_output_matches_grim(
    conn: &mut Conn,
    sway: &Compositor,
    layout: [i64; 4],
    origin: [i64; 2],
) -> Vec<u8> {
    let second = conn
        .call(
            "SCREENSHOT_REQUEST",
            "m1",
            json!({"format": "png", "monitor": 1, "include_cursor": false}),
        )
        .await;
    let (w, h, ours) = shot_pixels(&second);
    assert_eq!((w, h), (1024, 768));
    assert_eq!(second["payload"]["monitor"], 1);
    assert_eq!(second["payload"]["meta"]["origin"], json!(origin));
    let (gw, gh, theirs) = grim_region(sway, layout);
    assert_eq!(
        (gw, gh),
        (1024, 768),
        "grim captures the output at its scale"
    );
    let differ = differing(&ours, &theirs);
    assert!(
        differ < 1024 * 768 / 200,
        "{differ} pixels differ from grim's"
    );
    let (_, _, first) = grim_region(sway, [0, 0, 1024, 768]);
    assert!(
        differing(&ours, &first) > 1024 * 768 / 2,
        "the second output's capture looks like the first's"
    );
    theirs
}

/// The pointer, moved to `target` on the second output, is reported there; a move to `off`,
/// on no output, is refused with the outputs' rects `displays`.
async fn the_pointer_is_on_the_second_output(
    conn: &mut Conn,
    target: [i64; 2],
    off: [i64; 2],
    displays: Value,
) {
    let cursor = conn.call("CURSOR_POSITION_REQUEST", "p", json!({})).await;
    assert_eq!(
        cursor["payload"],
        json!({"x": target[0], "y": target[1], "monitor": 1})
    );
    let refused = conn
        .call(
            "INPUT_ACTION",
            "off",
            json!({"action": "mouse_move", "coordinate": off}),
        )
        .await;
    assert_eq!(error_code(&refused), "INPUT_OUT_OF_BOUNDS", "{refused}");
    assert_eq!(refused["payload"]["details"]["displays"], displays);
}

/// Each output's name and layout rectangle, as `swaymsg -t get_outputs` reports them.
fn output_rects(compositor: &Compositor) -> Vec<(String, [i64; 4])> {
    let out = compositor
        .command("swaymsg")
        .args(["-r", "-t", "get_outputs"])
        .output()
        .expect("run swaymsg");
    let outputs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    outputs
        .iter()
        .map(|o| {
            let r = &o["rect"];
            let n = |k: &str| r[k].as_i64().unwrap_or_default();
            (
                o["name"].as_str().unwrap_or_default().to_owned(),
                [n("x"), n("y"), n("width"), n("height")],
            )
        })
        .collect()
}

/// The screenshot options the X11 suite checks, on sway, over the GTK witness floating at
/// (40, 30): JPEG by default, a region inside the witness's red area all red with its origin
/// echoed, the pointer drawn over that region and only near the pointer, a region clipped at
/// the output's edge, and one wholly outside refused.
#[tokio::test]
async fn sway_screenshots_take_the_options_the_x11_suite_checks() {
    use super::connector_computer::{jpeg_size, the_pointer_is_drawn_over_red};
    let sway = Compositor::sway(1);
    let witness = floating_witness(&sway, "Witness S").await;
    let [cx, cy] = witness.centre();
    let (cx, cy) = (cx + 40, cy + 30);
    let platform = Platform::bind().await;
    let _shim = shim_on(&sway, &platform, "wl-shots", &[]);
    let (mut conn, _) = platform.session(&["computer_use"], |_| {}).await;

    let jpeg = conn.call("SCREENSHOT_REQUEST", "s1", json!({})).await;
    assert_eq!(jpeg_size(&jpeg), (1280, 800));

    // The pointer away from the region: every pixel red, the region and origin echoed.
    act(
        &mut conn,
        "away",
        json!({"action": "mouse_move", "coordinate": [5, 5]}),
    )
    .await;
    let region = json!([cx - 50, cy - 25, cx + 50, cy + 25]);
    let part = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s2",
            json!({"format": "png", "region": region}),
        )
        .await;
    let (w, h, pixels) = shot_pixels(&part);
    assert_eq!((w, h), (100, 50));
    assert!(pixels.chunks(4).all(|p| p == [255, 0, 0, 255]));
    assert_eq!(part["payload"]["region"], region);
    assert_eq!(part["payload"]["meta"]["origin"], json!([cx - 50, cy - 25]));

    // The pointer over it: drawn, and only near the pointer. sway draws its pointer in software
    // on a headless output, into every capture, so there it shows even when not asked for.
    let pointer = [cx + 20, cy - 5];
    act(
        &mut conn,
        "to-red",
        json!({"action": "mouse_move", "coordinate": pointer}),
    )
    .await;
    for (id, include_cursor) in [("s3", true), ("s3b", false)] {
        let drawn = conn
            .call(
                "SCREENSHOT_REQUEST",
                id,
                json!({"format": "png", "region": region, "include_cursor": include_cursor}),
            )
            .await;
        let (w, _, pixels) = shot_pixels(&drawn);
        the_pointer_is_drawn_over_red(&pixels, w, [cx - 50, cy - 25], pointer);
    }

    let edge = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s4",
            json!({"format": "png", "region": [1260, 780, 1360, 880]}),
        )
        .await;
    assert_eq!(shot_pixels(&edge).0, 20);
    assert_eq!(shot_pixels(&edge).1, 20);
    assert_eq!(edge["payload"]["meta"]["origin"], json!([1260, 780]));
    let outside = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s5",
            json!({"region": [3000, 3000, 3100, 3100]}),
        )
        .await;
    assert_eq!(error_code(&outside), "FEATURE_NOT_SUPPORTED", "{outside}");
    assert_eq!(
        outside["payload"]["details"]["feature"],
        "screenshot.region"
    );
}

/// A window reaching past the output's edge, as on X11: listed with its whole content
/// rectangle, and captured where it shows, with that part's origin and grim's pixels.
#[tokio::test]
async fn sway_captures_a_window_partly_off_the_output_where_it_shows() {
    let mut sway = Compositor::sway(1);
    sway_rules(
        &sway,
        "app_id=\"edge\"",
        &[
            "floating enable",
            "resize set 400 300",
            "move position 1100 650",
        ],
    );
    let typed = sway.path("edge.txt");
    foot_cat(&mut sway, "edge", &typed);
    eventually("sway floating foot past the corner", || {
        window_content(&sway, "edge").0 == [1100, 650, 400, 300]
    })
    .await;
    let platform = Platform::bind().await;
    let _shim = shim_on(&sway, &platform, "wl-edge", &[]);
    let (mut conn, _) = platform.session(&["computer_use"], |_| {}).await;
    let window = listed_window(&mut conn, "app_name", "edge").await;
    assert_eq!(window["bounds"], json!([1100, 650, 1500, 950]), "{window}");
    let shown = json!({"window_id": window["window_id"]});
    shot_matches_grim(&mut conn, &sway, shown, [1100, 650, 180, 150], 50).await;
}

/// Rules sway applies to each new window that `criteria` matches, one rule a command:
/// swaymsg would run what follows a comma at once, not in the rule.
fn sway_rules(sway: &Compositor, criteria: &str, commands: &[&str]) {
    for command in commands {
        let rule = sway
            .command("swaymsg")
            .arg(format!("for_window [{criteria}] {command}"))
            .output()
            .expect("run swaymsg");
        assert!(rule.status.success(), "{rule:?}");
    }
}

/// The GTK witness titled `title` on `sway`, once sway floats it at (40, 30) of its layout.
async fn floating_witness(sway: &Compositor, title: &str) -> Witness {
    sway_rules(
        sway,
        &format!("title=\"{title}\""),
        &["floating enable", "move position 40 30"],
    );
    let witness = Witness::start_on_wayland(sway, title);
    eventually("sway floating the witness at (40, 30)", || {
        window_content(sway, "witness.py").0[..2] == [40, 30]
    })
    .await;
    witness
}

/// Stops a process the test did not start itself when dropped.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = e2e::sigterm(self.0);
    }
}

/// The accessibility snapshot on a sway at `scale`, with a session bus: the GTK witness
/// floating at (40, 30) in sway's layout is found by its title, its button is listed where
/// sway shows it (GTK reports it from its window's corner, in logical pixels), a click at
/// the button's centre reaches the button, and an element action types into the entry by its id.
async fn a_gtk_buttons_box_is_where_a_click_reaches_it(scale: i64) {
    let mut sway = Compositor::sway(u32::try_from(scale).unwrap());
    sway.start_session_bus();
    let title = format!("Witness W{scale}");
    let mut witness = floating_witness(&sway, &title).await;
    let (content, pid) = window_content(&sway, "witness.py");
    assert_eq!(pid, witness.pid);

    let platform = Platform::bind().await;
    let _shim = shim_on(&sway, &platform, &format!("wl-a11y{scale}"), &[]);
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let fine = hello["payload"]["computer_use_features"]
        .as_array()
        .unwrap();
    assert!(fine.contains(&json!("a11y.snapshot")), "{fine:?}");
    let listed = listed_window(&mut conn, "title", &title).await;
    let physical = content.map(|v| v * scale);
    let bounds = [
        physical[0],
        physical[1],
        physical[0] + physical[2],
        physical[1] + physical[3],
    ];
    assert_eq!(listed["bounds"], json!(bounds), "{listed}");

    let (snapshot, _, b) =
        super::connector_computer::snapshot_button(&mut conn, "a", &listed["window_id"]).await;
    assert_eq!(witness.ready["scale"], scale, "{}", witness.ready);
    assert_eq!(
        b,
        button_box(&witness, &bounds),
        "the button's box in {bounds:?}"
    );
    assert!(b[0] >= bounds[0] && b[1] >= bounds[1] && b[2] <= bounds[2] && b[3] <= bounds[3]);

    let centre = [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2];
    act(
        &mut conn,
        "c",
        json!({"action": "left_click", "coordinate": centre}),
    )
    .await;
    let press = witness.expect("press", |p| p["widget"] == "button");
    // Where GTK saw it, from its window's corner: the centre, less the window's origin.
    let within = [press["x"].as_i64().unwrap(), press["y"].as_i64().unwrap()];
    let want = [centre[0] - bounds[0], centre[1] - bounds[1]];
    assert!(
        (within[0] - want[0]).abs() <= scale && (within[1] - want[1]).abs() <= scale,
        "pressed at {within:?} of the window, sent {want:?}"
    );
    witness.expect("clicked", |c| c["widget"] == "Press me");

    // An element id is found again (its box placed the same way) and acted on at its centre.
    types_into_the_entry(&mut conn, &snapshot, &mut witness).await;

    // doctor finds nothing missing: every protocol, the window geometry and the session bus.
    let (code, out) = doctor(&sway, &format!("wl-a11y{scale}-doctor"));
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("[OK  ] Wayland  the compositor offers screen capture, a virtual pointer and keyboard, the window list and the clipboard\n"),
        "{out}"
    );
}

#[tokio::test]
async fn the_accessibility_snapshot_places_a_gtk_button_where_a_click_reaches_it() {
    a_gtk_buttons_box_is_where_a_click_reaches_it(1).await;
}

#[tokio::test]
async fn on_a_scale_2_output_the_accessibility_snapshot_is_in_physical_pixels() {
    a_gtk_buttons_box_is_where_a_click_reaches_it(2).await;
}

#[tokio::test]
async fn on_a_scale_2_output_coordinates_are_the_screenshots_pixels() {
    let mut sway = Compositor::sway(2);
    let wev_log = sway.path("wev.log");
    wev(&mut sway, &wev_log);
    let platform = Platform::bind().await;
    let _shim = shim_on(&sway, &platform, "wl-scale", &[]);
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    assert_eq!(hello["payload"]["screen_resolution"], json!([1280, 800]));
    let info = conn.call("DISPLAY_INFO_REQUEST", "d", json!({})).await;
    assert_eq!(
        info["payload"]["monitors"],
        json!([{"index": 0, "primary": true, "physical_size": [1280, 800],
                "logical_size": [640, 400], "scale": 2.0, "origin": [0, 0]}])
    );
    let full = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s",
            json!({"format": "png", "include_cursor": false}),
        )
        .await;
    let (w, h, ours) = shot_pixels(&full);
    assert_eq!((w, h), (1280, 800));
    assert_eq!(full["payload"]["display_scale"], 2.0);
    assert_eq!(full["payload"]["logical_size"], json!([640, 400]));
    let (gw, gh, theirs) = grim(&sway);
    assert_eq!((gw, gh), (1280, 800));
    let differ = differing(&ours, &theirs);
    assert!(
        differ < 1280 * 800 / 200,
        "{differ} pixels differ from grim's capture"
    );
    // wev fills the output (logical 640×400): the screenshot pixel (801, 501) is its surface
    // point (400.5, 250.5).
    assert_eq!(window_rect(&sway, "wev"), [0, 0, 640, 400]);
    // The window list gives wev's content in the same physical pixels: sway's layout rectangle
    // times 2.
    let listed = listed_window(&mut conn, "app_name", "wev").await;
    let (content, pid) = window_content(&sway, "wev");
    assert_eq!(listed["bounds"], json!(content.map(|v| v * 2)), "{listed}");
    assert_eq!(listed["pid"], pid);
    window_shot_matches_grim(&mut conn, &sway, &listed["window_id"], "wev", 2).await;
    act(
        &mut conn,
        "m",
        json!({"action": "mouse_move", "coordinate": [801, 501]}),
    )
    .await;
    eventually("wev seeing motion at (400.5, 250.5)", || {
        file_contains(&wev_log, "x, y: 400.500000, 250.500000")
    })
    .await;
    let outside = conn
        .call(
            "INPUT_ACTION",
            "o",
            json!({"action": "left_click", "coordinate": [1280, 400]}),
        )
        .await;
    assert_eq!(error_code(&outside), "INPUT_OUT_OF_BOUNDS");
    assert_eq!(
        outside["payload"]["details"]["displays"],
        json!([{"index": 0, "origin": [0, 0], "size": [1280, 800]}])
    );
}

#[tokio::test]
async fn without_sways_ipc_window_bounds_are_the_outputs_and_window_screenshots_are_refused() {
    let mut sway = Compositor::sway(1);
    let file = sway.path("cat.txt");
    foot_cat(&mut sway, "plain", &file);
    let platform = Platform::bind().await;
    let _shim = shim_in_env(without_swaysock(&sway), &platform, "wl-nosock", &[]);
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let fine = hello["payload"]["computer_use_features"]
        .as_array()
        .unwrap()
        .clone();
    assert!(fine.contains(&json!("window.list")), "{fine:?}");
    assert!(fine.contains(&json!("screenshot.region")), "{fine:?}");
    assert!(!fine.contains(&json!("screenshot.window")), "{fine:?}");
    let plain = listed_window(&mut conn, "app_name", "plain").await;
    assert_eq!(plain["bounds"], json!([0, 0, 1280, 800]), "its output");
    assert_eq!(plain["pid"], Value::Null);
    let shot = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s",
            json!({"window_id": plain["window_id"]}),
        )
        .await;
    assert_eq!(error_code(&shot), "FEATURE_NOT_SUPPORTED", "{shot}");
    assert_eq!(shot["payload"]["details"]["feature"], "screenshot.window");
    let (_, out) = doctor_in_env(without_swaysock(&sway), "wl-nosock-doctor");
    assert!(
        out.contains("[WARN] Wayland  no window geometry (this compositor is not sway (no SWAYSOCK), and the other wlroots protocols give no window geometry): window screenshots and accessibility snapshots are unavailable; sway gives it through its IPC socket\n"),
        "{out}"
    );
}

#[tokio::test]
async fn weston_advertises_only_what_works_and_refuses_the_rest_before_the_backend() {
    let weston = Compositor::weston();
    let platform = Platform::bind().await;
    let shim = shim_on(&weston, &platform, "wl-weston", &["--enable-clipboard"]);
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let payload = &hello["payload"];
    assert_eq!(payload["screen_resolution"], json!([1280, 800]));
    assert_eq!(
        payload["computer_use_features_coarse"],
        json!(["apps", "permissions"])
    );
    assert_eq!(
        payload["computer_use_features"],
        json!([
            "input.wait",
            "display.info",
            "app.list",
            "app.launch",
            "permissions.check"
        ])
    );
    let info = conn.call("DISPLAY_INFO_REQUEST", "d", json!({})).await;
    assert_eq!(
        info["payload"]["monitors"][0]["physical_size"],
        json!([1280, 800]),
        "{info}"
    );
    let mut requests = vec![("SCREENSHOT_REQUEST", json!({}), "screenshot")];
    requests.extend(input_windows_and_clipboard());
    refused_for_want_of_a_protocol(&mut conn, requests).await;
    // Each refusal is audited as such (a refusal's record may land just after its reply).
    let log = shim.audit_log();
    let refused = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|r| r["result"]["error_code"] == "FEATURE_NOT_SUPPORTED")
            .count()
    };
    eventually("seven audited refusals", || refused() >= 7).await;
    assert_eq!(refused(), 7);
}

/// With a session bus, weston's windows are listed from the accessibility bus, as GNOME's are
/// (`listed_from_the_accessibility_bus`): HELLO adds `windows` and `window.list` alone.
#[tokio::test]
async fn weston_with_a_session_bus_lists_the_windows_the_accessibility_bus_knows() {
    let mut weston = Compositor::weston();
    weston.start_session_bus();
    let demo = Running::start(weston.command(binary("msguide-demo")));
    wait_for_line(&demo.stdout, "the demo's first stage", |l| l == "stage 0");
    let platform = Platform::bind().await;
    let _shim = shim_on(&weston, &platform, "wl-weston-bus", &[]);
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let payload = &hello["payload"];
    assert_eq!(
        payload["computer_use_features_coarse"],
        json!(["windows", "apps", "permissions"])
    );
    assert_eq!(
        payload["computer_use_features"],
        json!([
            "input.wait",
            "display.info",
            "window.list",
            "app.list",
            "app.launch",
            "permissions.check"
        ])
    );
    listed_from_the_accessibility_bus(&mut conn, demo, [0, 0, 1280, 800]).await;
}

/// On a session bus that cannot start the accessibility bus, weston's windows cannot be listed:
/// HELLO advertises no `windows`, the list is refused before any backend call, and `doctor`
/// says listing is unavailable.
#[tokio::test]
async fn weston_without_an_accessibility_bus_advertises_no_window_list() {
    let mut weston = Compositor::weston();
    weston.start_session_bus_without_services();
    let platform = Platform::bind().await;
    let _shim = shim_on(&weston, &platform, "wl-weston-nobus", &[]);
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    assert_eq!(
        hello["payload"]["computer_use_features_coarse"],
        json!(["apps", "permissions"]),
        "{hello}"
    );
    refused_for_want_of_a_protocol(
        &mut conn,
        vec![("WINDOW_LIST_REQUEST", json!({}), "window.list")],
    )
    .await;
    let (code, out) = doctor(&weston, "wl-weston-nobus-doctor");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("no window list protocol (zwlr_foreign_toplevel_manager_v1): listing and focusing windows is unavailable"),
        "{out}"
    );
}

/// Where the compositor lists its windows to no other program (GNOME's mutter, weston), the
/// applications on the accessibility bus list them: the demo window (egui, through AccessKit)
/// is listed with its title and process, with the output as its bounds (nothing says where it
/// is), focusing it is refused before any backend call, the app list counts its window, and
/// once it has closed it is no longer listed.
pub(super) async fn listed_from_the_accessibility_bus(
    conn: &mut Conn,
    demo: Running,
    output: [u64; 4],
) {
    let mut calls = 0;
    let mut list = async |conn: &mut Conn| {
        calls += 1;
        let reply = conn
            .call("WINDOW_LIST_REQUEST", &format!("w{calls}"), json!({}))
            .await;
        assert_eq!(reply["type"], "WINDOW_LIST_RESPONSE", "{reply}");
        reply["payload"]["windows"].as_array().unwrap().clone()
    };
    // AccessKit starts serving the bus a moment after the shim switched accessibility on.
    let deadline = Instant::now() + SEEN_DEADLINE;
    let window = loop {
        let windows = list(conn).await;
        if let Some(window) = windows.iter().find(|w| w["title"] == DEMO) {
            break window.clone();
        }
        assert!(
            Instant::now() < deadline,
            "the demo never listed: {windows:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(window["pid"], json!(demo.pid()), "{window}");
    assert_eq!(window["bounds"], json!(output), "{window}");
    assert!(
        window["window_id"].as_str().unwrap().starts_with("win_"),
        "{window}"
    );
    let focus = conn
        .call(
            "WINDOW_FOCUS",
            "f1",
            json!({"window_id": window["window_id"]}),
        )
        .await;
    assert_eq!(error_code(&focus), "FEATURE_NOT_SUPPORTED", "{focus}");
    assert_eq!(
        focus["payload"]["details"]["feature"], "window.focus",
        "{focus}"
    );
    // The app list counts the windows the bus listed.
    let apps = conn.call("APP_LIST_REQUEST", "al", json!({})).await;
    let app = apps["payload"]["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pid"] == json!(demo.pid()))
        .cloned()
        .unwrap_or_else(|| panic!("the demo is not among the apps: {apps}"));
    assert_eq!(app["window_count"], 1, "{app}");

    drop(demo);
    let deadline = Instant::now() + SEEN_DEADLINE;
    loop {
        let windows = list(conn).await;
        if !windows.iter().any(|w| w["title"] == DEMO) {
            break;
        }
        assert!(Instant::now() < deadline, "the closed demo is still listed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A headless cage (wlroots' kiosk compositor) offers screen capture and nothing for input,
/// windows or the clipboard: HELLO advertises screenshots and display information, a screenshot
/// of the output and one of a region have grim's pixels, and the rest is refused before any
/// backend call with what is missing; `doctor` names each missing protocol.
#[tokio::test]
async fn cage_advertises_screenshots_alone_and_they_are_the_compositors_pixels() {
    require("foot", "foot");
    let cage = Compositor::cage(&[
        "foot",
        "sh",
        "-c",
        "printf 'cage \\342\\234\\223 123\\n'; exec cat",
    ]);
    // Once foot has drawn its text, grim's capture is no longer one colour.
    eventually("foot's text on cage's output", || {
        let (_, _, rgba) = grim(&cage);
        rgba.chunks(4).any(|p| p != &rgba[..4])
    })
    .await;
    let platform = Platform::bind().await;
    let _shim = shim_on(&cage, &platform, "wl-cage", &["--enable-clipboard"]);
    let (mut conn, hello) = platform.session(&["computer_use"], |_| {}).await;
    let payload = &hello["payload"];
    assert_eq!(payload["screen_resolution"], json!([1280, 720]));
    assert_eq!(
        payload["computer_use_features_coarse"],
        json!(["screenshot", "apps", "permissions"])
    );
    let fine = payload["computer_use_features"].as_array().unwrap();
    for feature in [
        "screenshot.region",
        "screenshot.all_monitors",
        "display.info",
    ] {
        assert!(
            fine.contains(&json!(feature)),
            "{feature} missing: {fine:?}"
        );
    }
    for feature in [
        "input.type",
        "cursor.position",
        "window.list",
        "clipboard.read",
    ] {
        assert!(
            !fine.contains(&json!(feature)),
            "{feature} offered: {fine:?}"
        );
    }

    full_shot_matches_grim(&mut conn, &cage, (1280, 720)).await;
    let region = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s2",
            json!({"format": "png", "region": [0, 0, 300, 60]}),
        )
        .await;
    let (rw, rh, part) = shot_pixels(&region);
    assert_eq!((rw, rh), (300, 60));
    let (_, _, grims) = grim_region(&cage, [0, 0, 300, 60]);
    let differ = differing(&part, &grims);
    assert!(
        differ < 300 * 60 / 50,
        "{differ} region pixels differ from grim's"
    );
    assert!(
        part.chunks(4).any(|p| p != &part[..4]),
        "the region holds foot's text, not one colour"
    );

    refused_for_want_of_a_protocol(&mut conn, input_windows_and_clipboard()).await;

    let (code, out) = doctor(&cage, "wl-cage-doctor");
    assert_eq!(code, Some(0), "{out}");
    let wayland: Vec<&str> = out.lines().filter(|l| l.contains("] Wayland  ")).collect();
    assert_eq!(
        wayland,
        doctor_says_missing(&["pointer", "keyboard", "windows", "clipboard"]),
        "{out}"
    );
}

#[test]
fn doctor_names_each_protocol_weston_lacks_and_what_it_costs() {
    let weston = Compositor::weston();
    let (code, out) = doctor(&weston, "wl-weston-doctor");
    // Missing protocols narrow what HELLO offers; they never stop `start`.
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(
            "[INFO] session type  Wayland (WAYLAND_DISPLAY=wayland-w, a live compositor)\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("[WARN] computer use  enabled on Wayland: HELLO offers only what this compositor's protocols allow"),
        "{out}"
    );
    let wayland: Vec<&str> = out.lines().filter(|l| l.contains("] Wayland  ")).collect();
    let mut expected = vec![
        "[WARN] Wayland  no screen capture protocol (zwlr_screencopy_manager_v1): screenshots are unavailable; sway, Hyprland, river and labwc offer it".to_owned(),
        "[WARN] Wayland  no seat (wl_seat): input, the window focus and the clipboard are unavailable; every desktop compositor has one".to_owned(),
    ];
    expected.extend(doctor_says_missing(&[
        "pointer",
        "keyboard",
        "windows",
        "clipboard",
    ]));
    assert_eq!(wayland, expected, "{out}");
}

/// GTK 3 finds shortcuts by the keycodes of a US keymap, so the shim's keymap keeps the US
/// keys' keycodes: Ctrl+A from the shim selects the GTK entry's text (the next key replaces
/// it), and a paste's Ctrl+V inserts the clipboard's text, not only key events.
#[tokio::test]
async fn a_gtk_entry_takes_the_shims_shortcuts() {
    shortcuts_reach_a_gtk_entry(None).await;
}

/// The person's keyboard layout is the compositor's business, not the shim's: with every
/// keyboard set to a German layout (Y and Z swapped, @ on AltGr+Q) or a Russian one (no Latin
/// letter at all), `type` still writes exactly the text asked for and the shortcuts still act.
#[tokio::test]
async fn typing_and_shortcuts_do_not_depend_on_the_compositors_keyboard_layout() {
    for layout in ["de", "ru"] {
        shortcuts_reach_a_gtk_entry(Some(layout)).await;
    }
}

/// Types into a GTK entry on a headless sway whose keyboards use `layout` (sway's default when
/// `None`), selects all with Ctrl+A, replaces the text, and pastes with Ctrl+V.
async fn shortcuts_reach_a_gtk_entry(layout: Option<&str>) {
    let mut sway = Compositor::sway(1);
    if let Some(layout) = layout {
        let set = sway
            .command("swaymsg")
            .args(["input", "type:keyboard", "xkb_layout", layout])
            .output()
            .unwrap();
        assert!(
            set.status.success(),
            "swaymsg could not set the layout {layout}: {set:?}"
        );
    }
    sway.start_session_bus();
    let mut witness = Witness::start_on_wayland(&sway, "Witness S");
    let platform = Platform::bind().await;
    let _shim = shim_on(&sway, &platform, "wl-shortcuts", &["--enable-clipboard"]);
    let (mut conn, _) = platform.session(&["computer_use"], |_| {}).await;
    let text = "zy@ü abc";
    act(&mut conn, "t1", json!({"action": "type", "text": text})).await;
    witness.expect("text", |t| t["text"] == text);
    act(&mut conn, "k1", json!({"action": "key", "key": "ctrl+a"})).await;
    act(&mut conn, "t2", json!({"action": "type", "text": "X"})).await;
    witness.expect("text", |t| t["text"] == "X");
    paste_keeping_the_clipboard(&mut conn, |program| sway.command(program)).await;
    witness.expect("text", |t| t["text"] == format!("X{PASTED}"));
}

/// ELEMENT_ACTION `type` on the witness's entry, named by its id in `snapshot`: the witness
/// sees the text arrive.
pub(super) async fn types_into_the_entry(
    conn: &mut e2e::platform::Conn,
    snapshot: &serde_json::Value,
    witness: &mut Witness,
) {
    let entry = snapshot["payload"]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["label"] == "Your name")
        .unwrap_or_else(|| panic!("no entry: {snapshot}"));
    let typed = conn
        .call(
            "ELEMENT_ACTION",
            "t",
            json!({"element_id": entry["id"], "action": "type", "text": "hi"}),
        )
        .await;
    assert_eq!(typed["type"], "ACK", "{typed}");
    witness.expect("text", |t| t["text"] == "hi");
}

/// The window in a fresh WINDOW_LIST whose `key` (`title`, `app_name`) is `value`.
pub(super) async fn listed_window(
    conn: &mut e2e::platform::Conn,
    key: &str,
    value: &str,
) -> serde_json::Value {
    let list = conn.call("WINDOW_LIST_REQUEST", "w", json!({})).await;
    list["payload"]["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w[key] == value)
        .cloned()
        .unwrap_or_else(|| panic!("no window with {key} {value:?} is listed: {list}"))
}

/// Where the witness's button is, display-global `[x1, y1, x2, y2]`, for a window whose listed
/// `bounds` start at its content's corner: the witness reports the button from that corner, in
/// physical pixels.
pub(super) fn button_box(witness: &Witness, bounds: &[i64]) -> [i64; 4] {
    let r: Vec<i64> = serde_json::from_value(witness.ready["button"].clone()).unwrap();
    [
        bounds[0] + r[0],
        bounds[1] + r[1],
        bounds[0] + r[0] + r[2],
        bounds[1] + r[1] + r[3],
    ]
}
