//! Computer use through the real `autogpt-shim` binary on a private X desktop (Xvfb 1920×1080,
//! openbox, a session bus): screenshots checked pixel by pixel against a red GTK window, input
//! checked by what that window reports it received (and by xdotool), windows, apps, the
//! clipboard (checked with xclip), permissions and the accessibility snapshot.

use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use e2e::display::{Desktop, require};
use e2e::platform::{Conn, Platform, error_code};
use e2e::witness::Witness;
use serde_json::{Value, json};

use super::connector::{ShimIn, audit_records, home_and_root, spawn_env};

/// Starts the shim with computer use (and `extra` flags) on `desktop`.
/// The shim with computer use on `desktop`, in a home removed with it.
fn shim_on(desktop: &Desktop, platform: &Platform, tag: &str, extra: &[&str]) -> ShimIn {
    ShimIn::start(&desktop.env(), platform, tag, extra)
}

pub(crate) fn decode_png(reply: &Value) -> (u32, u32, Vec<u8>) {
    assert_eq!(reply["type"], "SCREENSHOT_RESPONSE", "{reply}");
    assert_eq!(reply["payload"]["mime_type"], "image/png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(reply["payload"]["image_base64"].as_str().unwrap())
        .unwrap();
    let mut decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgba);
    pixels.truncate(info.buffer_size());
    (info.width, info.height, pixels)
}

fn pixel(pixels: &[u8], width: u32, [x, y]: [i64; 2]) -> [u8; 4] {
    let at = usize::try_from((y * i64::from(width) + x) * 4).unwrap();
    pixels[at..at + 4].try_into().unwrap()
}

/// Refused input on one display of `size`: a click out of bounds (answered with the display
/// rects), a drag from `inside` that leaves the display, a click without a point, an unknown
/// key; none of it reaches the witness.
pub(super) async fn refused_input_reaches_nothing(
    conn: &mut Conn,
    witness: &mut Witness,
    inside: [i64; 2],
    size: [i64; 2],
) {
    drop(witness.drain(Duration::from_millis(300)));
    let oob = conn
        .call(
            "INPUT_ACTION",
            "oob",
            json!({"action": "left_click", "coordinate": [5000, 10]}),
        )
        .await;
    assert_eq!(error_code(&oob), "INPUT_OUT_OF_BOUNDS");
    assert_eq!(
        oob["payload"]["details"],
        json!({"requested_coordinate": [5000, 10],
               "displays": [{"index": 0, "origin": [0, 0], "size": size}]})
    );
    for (id, payload, code) in [
        (
            "oob2",
            json!({"action": "drag", "path": [inside, [size[0], 0]]}),
            "INPUT_OUT_OF_BOUNDS",
        ),
        (
            "nocoord",
            json!({"action": "left_click"}),
            "FEATURE_NOT_SUPPORTED",
        ),
        (
            "badkey",
            json!({"action": "key", "key": "ctrl+hyperspace"}),
            "FEATURE_NOT_SUPPORTED",
        ),
    ] {
        let refused = conn.call("INPUT_ACTION", id, payload).await;
        assert_eq!(error_code(&refused), code, "{refused}");
    }
    let seen = witness.drain(Duration::from_millis(500));
    assert!(
        !seen
            .iter()
            .any(|e| e["event"] == "press" || e["event"] == "key"),
        "refused input arrived: {seen:?}"
    );
}

/// One operation at a time: a cursor query sent during a 500 ms wait is answered after it.
pub(super) async fn a_wait_holds_the_next_operation_back(conn: &mut Conn) {
    conn.request(
        "INPUT_ACTION",
        "wait",
        json!({"action": "wait", "duration_ms": 500}),
    )
    .await;
    // Sent once the wait is surely under way; its answer can only come after the wait's.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let sent = Instant::now();
    conn.request("CURSOR_POSITION_REQUEST", "after", json!({}))
        .await;
    assert_eq!(conn.recv().await["id"], "wait");
    assert_eq!(conn.recv().await["id"], "after");
    assert!(
        sent.elapsed() >= Duration::from_millis(300),
        "the query overlapped the wait"
    );
}

/// A capture of an all-red region whose top-left is `origin` (display-global), `width` pixels
/// wide, with the pointer at `pointer` drawn in: some pixels are not red, all of them near the
/// pointer, and the top-left corner is still red.
pub(super) fn the_pointer_is_drawn_over_red(
    pixels: &[u8],
    width: u32,
    origin: [i64; 2],
    pointer: [i64; 2],
) {
    let w = i64::from(width);
    let changed: Vec<[i64; 2]> = (0_i64..)
        .zip(pixels.chunks(4))
        .filter(|(_, p)| *p != [255, 0, 0, 255])
        .map(|(i, _)| [origin[0] + i % w, origin[1] + i / w])
        .collect();
    assert!(!changed.is_empty(), "no pointer drawn at {pointer:?}");
    assert!(
        changed
            .iter()
            .all(|[x, y]| (x - pointer[0]).abs() <= 48 && (y - pointer[1]).abs() <= 48),
        "pixels changed away from the pointer: {changed:?}"
    );
    assert_eq!(pixel(pixels, width, [0, 0]), [255, 0, 0, 255]);
}

/// The size a baseline JPEG declares in its SOF0 segment.
pub(super) fn jpeg_size(reply: &Value) -> (u16, u16) {
    assert_eq!(reply["payload"]["mime_type"], "image/jpeg", "{reply}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(reply["payload"]["image_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(&bytes[..2], &[0xFF, 0xD8]);
    let sof = bytes.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
    let height = u16::from_be_bytes([bytes[sof + 5], bytes[sof + 6]]);
    let width = u16::from_be_bytes([bytes[sof + 7], bytes[sof + 8]]);
    (width, height)
}

/// The listed window titled `title`.
async fn listed_window(conn: &mut Conn, title: &str) -> Value {
    windows_titled(conn, title)
        .await
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{title} not listed"))
}

async fn act(conn: &mut Conn, id: &str, payload: Value) -> Value {
    conn.call("INPUT_ACTION", id, payload).await
}

fn assert_ack(reply: &Value) {
    assert_eq!(reply["type"], "ACK", "{reply}");
}

#[tokio::test]
async fn screenshots_show_the_screen_at_its_size_and_respect_the_rate_limit() {
    let desktop = Desktop::start();
    let witness = Witness::start(&desktop, "Witness A");
    let platform = Platform::bind().await;
    let shim = shim_on(&desktop, &platform, "cu-shot", &[]);
    let (mut conn, hello) = platform.session(&["files", "computer_use"], |_| {}).await;
    let payload = &hello["payload"];
    assert_eq!(payload["capabilities"], json!(["files", "computer_use"]));
    assert_eq!(payload["screen_resolution"], json!([1920, 1080]));
    assert_eq!(
        payload["computer_use_features_coarse"],
        json!(["screenshot", "input", "windows", "apps", "permissions"]),
        "no clipboard bucket unless the clipboard is enabled"
    );
    let fine = payload["computer_use_features"].as_array().unwrap();
    for feature in [
        "screenshot.region",
        "input.drag.path",
        "window.focus",
        "a11y.snapshot",
    ] {
        assert!(
            fine.contains(&json!(feature)),
            "{feature} missing: {fine:?}"
        );
    }
    assert!(!fine.contains(&json!("clipboard.read")));

    let info = conn.call("DISPLAY_INFO_REQUEST", "d", json!({})).await;
    assert_eq!(
        info["payload"]["monitors"],
        json!([{"index": 0, "primary": true, "physical_size": [1920, 1080],
                "logical_size": [1920, 1080], "scale": 1.0, "origin": [0, 0]}])
    );

    // 1: the whole primary monitor, PNG; the witness's red area is where it says it is.
    let full = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s1",
            json!({"format": "png", "include_cursor": false}),
        )
        .await;
    let (width, height, pixels) = decode_png(&full);
    assert_eq!((width, height), (1920, 1080));
    assert_eq!(pixel(&pixels, width, witness.centre()), [255, 0, 0, 255]);
    assert_eq!(full["payload"]["monitor"], 0);
    assert_eq!(full["payload"]["meta"]["origin"], json!([0, 0]));
    assert_eq!(full["payload"]["logical_size"], json!([1920, 1080]));
    assert_eq!(full["payload"]["display_scale"], 1.0);
    let screen = pixels.clone();

    // 2: JPEG by default.
    let jpeg = conn.call("SCREENSHOT_REQUEST", "s2", json!({})).await;
    assert_eq!(jpeg_size(&jpeg), (1920, 1080));

    // 3: a display-global region inside the red area, the pointer over it but not asked for:
    // every pixel red, origin echoed.
    let [cx, cy] = witness.centre();
    let pointer = [cx + 20, cy - 5];
    assert_ack(
        &act(
            &mut conn,
            "to-red",
            json!({"action": "mouse_move", "coordinate": pointer}),
        )
        .await,
    );
    let region = json!([cx - 50, cy - 25, cx + 50, cy + 25]);
    let part = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s3",
            json!({"format": "png", "region": region, "include_cursor": false}),
        )
        .await;
    let (w, h, pixels) = decode_png(&part);
    assert_eq!((w, h), (100, 50));
    assert!(pixels.chunks(4).all(|p| p == [255, 0, 0, 255]));
    assert_eq!(part["payload"]["region"], region);
    assert_eq!(part["payload"]["meta"]["origin"], json!([cx - 50, cy - 25]));

    // 4: clipped to the screen; 5: wholly outside it.
    let edge = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s4",
            json!({"format": "png", "region": [1900, 1060, 2000, 1100]}),
        )
        .await;
    let (w, h, _) = decode_png(&edge);
    assert_eq!((w, h), (20, 20));
    assert_eq!(edge["payload"]["meta"]["origin"], json!([1900, 1060]));
    let outside = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s5",
            json!({"region": [3000, 3000, 3100, 3100]}),
        )
        .await;
    assert_eq!(error_code(&outside), "FEATURE_NOT_SUPPORTED");
    assert_eq!(
        outside["payload"]["details"]["feature"],
        "screenshot.region"
    );

    // 6: one window by its listed id, at its own size, its pixels those the whole screen showed
    // there (it is on top; its red area includes the centre).
    let window = listed_window(&mut conn, "Witness A").await;
    let bounds: Vec<i64> = serde_json::from_value(window["bounds"].clone()).unwrap();
    let shot = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s6",
            json!({"format": "png", "window_id": window["window_id"], "include_cursor": false}),
        )
        .await;
    let (w, h, own) = decode_png(&shot);
    assert_eq!(
        (i64::from(w), i64::from(h)),
        (bounds[2] - bounds[0], bounds[3] - bounds[1])
    );
    assert_eq!(
        shot["payload"]["meta"]["origin"],
        json!([bounds[0], bounds[1]])
    );
    let same = (0..i64::from(h))
        .flat_map(|y| (0..i64::from(w)).map(move |x| [x, y]))
        .filter(|&[x, y]| {
            pixel(&own, w, [x, y]) == pixel(&screen, width, [x + bounds[0], y + bounds[1]])
        })
        .count();
    assert_eq!(
        same,
        usize::try_from(w * h).unwrap(),
        "window pixels differ from the screen's"
    );
    assert_eq!(
        pixel(&own, w, [cx - bounds[0], cy - bounds[1]]),
        [255, 0, 0, 255]
    );

    // 7: every monitor stitched (one here).
    let all = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s7",
            json!({"format": "png", "monitor": -1}),
        )
        .await;
    assert_eq!(decode_png(&all).0, 1920);
    assert_eq!(all["payload"]["monitor"], -1);

    // 8: the same region with the pointer drawn by default, as XFIXES reports its image: some
    // pixels change, all of them near the pointer, the far corner stays red.
    let drawn = conn
        .call(
            "SCREENSHOT_REQUEST",
            "s8",
            json!({"format": "png", "region": region}),
        )
        .await;
    let (w, _, pixels) = decode_png(&drawn);
    the_pointer_is_drawn_over_red(&pixels, w, [cx - 50, cy - 25], pointer);

    // 9-10 use up the minute's ten; the eleventh is refused.
    for id in ["s9", "s10"] {
        let small = conn
            .call("SCREENSHOT_REQUEST", id, json!({"region": [0, 0, 8, 8]}))
            .await;
        assert_eq!(small["type"], "SCREENSHOT_RESPONSE", "{small}");
    }
    let refused = conn.call("SCREENSHOT_REQUEST", "s11", json!({})).await;
    assert_eq!(error_code(&refused), "SHIM_OVERLOADED");

    // The clipboard was not enabled: refused before any backend call.
    let clip = conn.call("CLIPBOARD_READ", "c", json!({})).await;
    assert_eq!(error_code(&clip), "FEATURE_NOT_SUPPORTED");
    assert_eq!(clip["payload"]["details"]["feature"], "clipboard.read");

    let records = audit_records(&shim);
    let first = records
        .iter()
        .find(|r| r["op"] == "SCREENSHOT_REQUEST" && r["request_id"] == "s1")
        .expect("audited");
    assert_eq!(first["details"]["width"], 1920);
    assert!(first["details"]["image_bytes_returned"].as_u64().unwrap() > 0);
    assert_eq!(first["details"]["cursor_drawn"], false);
    let with_pointer = records
        .iter()
        .find(|r| r["op"] == "SCREENSHOT_REQUEST" && r["request_id"] == "s8")
        .expect("audited");
    assert_eq!(with_pointer["details"]["cursor_drawn"], true);

    // A new connection's HELLO wipes every window id minted before it.
    conn.close(1011).await;
    let (mut conn, _) = platform.session(&["files", "computer_use"], |_| {}).await;
    let after = conn
        .call(
            "WINDOW_FOCUS",
            "f",
            json!({"window_id": window["window_id"]}),
        )
        .await;
    assert_eq!(error_code(&after), "WINDOW_STALE");
    drop(witness);
}

/// A window partly off the screen cannot be read from the window itself (the X server refuses
/// GetImage there): its capture is the part on the screen, with that part's origin.
#[tokio::test]
async fn a_window_partly_off_the_screen_is_captured_where_it_shows() {
    let desktop = Desktop::start();
    let witness = Witness::start_at(&desktop, "Witness Edge", [1200, 300]);
    let platform = Platform::bind().await;
    let _shim = shim_on(&desktop, &platform, "cu-edge", &[]);
    let (mut conn, _) = platform.session(&["files", "computer_use"], |_| {}).await;
    let bounds_of =
        |window: &Value| -> Vec<i64> { serde_json::from_value(window["bounds"].clone()).unwrap() };
    let before = bounds_of(&listed_window(&mut conn, "Witness Edge").await);
    // The window manager keeps new windows on the screen: moved past its edge afterwards.
    let moved = desktop
        .command("xdotool")
        .args([
            "search",
            "--name",
            "^Witness Edge$",
            "windowmove",
            "--sync",
            "1600",
            "300",
        ])
        .status()
        .unwrap();
    assert!(moved.success());
    // `--sync` waits for the X server; the window manager may place the frame a moment later.
    let deadline = Instant::now() + e2e::platform::WAIT;
    let (window, bounds) = loop {
        let window = listed_window(&mut conn, "Witness Edge").await;
        let bounds = bounds_of(&window);
        if bounds[0] < 1920 && bounds[2] > 1920 {
            break (window, bounds);
        }
        assert!(
            Instant::now() < deadline,
            "the window should reach past the right edge: {bounds:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let shot = conn
        .call(
            "SCREENSHOT_REQUEST",
            "e",
            json!({"format": "png", "window_id": window["window_id"], "include_cursor": false}),
        )
        .await;
    let (w, h, pixels) = decode_png(&shot);
    assert_eq!(
        (i64::from(w), i64::from(h)),
        (1920 - bounds[0], bounds[3] - bounds[1])
    );
    assert_eq!(
        shot["payload"]["meta"]["origin"],
        json!([bounds[0], bounds[1]])
    );
    // The red area's top-left corner, moved with the window, is red in the capture.
    let [x, y] = witness.at(4, 4);
    let corner = [x + bounds[0] - before[0], y + bounds[1] - before[1]];
    assert_eq!(
        pixel(&pixels, w, [corner[0] - bounds[0], corner[1] - bounds[1]]),
        [255, 0, 0, 255]
    );
}

#[tokio::test]
async fn input_reaches_a_real_window_as_sent_and_out_of_bounds_input_sends_nothing() {
    require("xdotool", "xdotool");
    let desktop = Desktop::start();
    let mut witness = Witness::start(&desktop, "Witness B");
    let platform = Platform::bind().await;
    let shim = shim_on(&desktop, &platform, "cu-input", &[]);
    let (mut conn, _) = platform
        .session(&["files", "computer_use"], |ack| {
            ack["payload"]["max_file_size_bytes"] = json!(4096);
        })
        .await;
    let window = listed_window(&mut conn, "Witness B").await;
    assert_ack(
        &conn
            .call(
                "WINDOW_FOCUS",
                "f",
                json!({"window_id": window["window_id"]}),
            )
            .await,
    );
    let [cx, cy] = witness.centre();
    let at = |v: &Value| [v["x"].as_i64().unwrap(), v["y"].as_i64().unwrap()];

    for (action, button) in [("left_click", 1), ("right_click", 3), ("middle_click", 2)] {
        assert_ack(
            &act(
                &mut conn,
                action,
                json!({"action": action, "coordinate": [cx, cy]}),
            )
            .await,
        );
        let press = witness.expect("press", |_| true);
        assert_eq!(
            (press["button"].as_i64(), at(&press)),
            (Some(button), [cx, cy]),
            "{action}"
        );
        witness.expect("release", |r| r["button"] == button);
    }
    assert_ack(
        &act(
            &mut conn,
            "dbl",
            json!({"action": "double_click", "coordinate": [cx, cy]}),
        )
        .await,
    );
    witness.expect("press", |p| p["count"] == 2);
    assert_ack(
        &act(
            &mut conn,
            "tpl",
            json!({"action": "triple_click", "coordinate": [cx + 1, cy]}),
        )
        .await,
    );
    witness.expect("press", |p| p["count"] == 3);
    let held = act(
        &mut conn,
        "mod",
        json!({"action": "left_click", "coordinate": [cx - 40, cy], "modifiers": ["shift", "ctrl"]}),
    )
    .await;
    assert_ack(&held);
    let press = witness.expect("press", |p| at(p) == [cx - 40, cy]);
    assert_eq!(press["modifiers"], json!(["shift", "ctrl"]));

    // The pointer goes where it was sent, by the shim's account and by xdotool's.
    assert_ack(
        &act(
            &mut conn,
            "mv",
            json!({"action": "mouse_move", "coordinate": [cx + 10, cy + 5]}),
        )
        .await,
    );
    let cursor = conn.call("CURSOR_POSITION_REQUEST", "cp", json!({})).await;
    assert_eq!(
        (
            cursor["payload"]["x"].as_i64(),
            cursor["payload"]["y"].as_i64(),
            cursor["payload"]["monitor"].as_i64()
        ),
        (Some(cx + 10), Some(cy + 5), Some(0))
    );
    let located = desktop
        .command("xdotool")
        .arg("getmouselocation")
        .output()
        .unwrap();
    let located = String::from_utf8_lossy(&located.stdout);
    assert!(
        located.starts_with(&format!("x:{} y:{} ", cx + 10, cy + 5)),
        "{located}"
    );

    // Press, move, release; then a drag along a path.
    let (p1, p2) = ([cx - 100, cy - 50], [cx + 100, cy + 60]);
    assert_ack(
        &act(
            &mut conn,
            "down",
            json!({"action": "mouse_down", "coordinate": p1}),
        )
        .await,
    );
    assert_ack(
        &act(
            &mut conn,
            "mv2",
            json!({"action": "mouse_move", "coordinate": p2}),
        )
        .await,
    );
    assert_ack(
        &act(
            &mut conn,
            "up",
            json!({"action": "mouse_up", "coordinate": p2}),
        )
        .await,
    );
    assert_eq!(at(&witness.expect("press", |_| true)), p1);
    witness.expect("motion", |_| true);
    assert_eq!(at(&witness.expect("release", |_| true)), p2);
    let path = json!([p2, [cx, cy], [cx - 120, cy + 10]]);
    assert_ack(&act(&mut conn, "drag", json!({"action": "drag", "path": path})).await);
    assert_eq!(at(&witness.expect("press", |_| true)), p2);
    // GTK may merge motion events within a frame: some motion, then the release at the end.
    witness.expect("motion", |_| true);
    assert_eq!(
        at(&witness.expect("release", |_| true)),
        [cx - 120, cy + 10]
    );

    // Scrolling by clicks, by amount, and sideways.
    for (payload, direction, steps) in [
        (
            json!({"action": "scroll", "coordinate": [cx, cy], "direction": "down", "clicks": 3}),
            "down",
            3,
        ),
        (
            json!({"action": "scroll", "coordinate": [cx, cy], "scroll_direction": "up", "scroll_amount": 2}),
            "up",
            2,
        ),
        (
            json!({"action": "scroll", "coordinate": [cx, cy], "scroll_direction": "left", "clicks": 1}),
            "left",
            1,
        ),
        (
            json!({"action": "scroll", "coordinate": [cx, cy], "direction": "right", "clicks": 1}),
            "right",
            1,
        ),
    ] {
        assert_ack(&act(&mut conn, "sc", payload).await);
        for _ in 0..steps {
            witness.expect("scroll", |s| s["direction"] == direction);
        }
    }

    // Typing, non-ASCII included, lands in the focused entry exactly.
    let text = "héllo wörld ✓";
    assert_ack(&act(&mut conn, "type", json!({"action": "type", "text": text})).await);
    witness.expect("text", |t| t["text"] == text);
    // A chord selects everything; a key deletes it.
    assert_ack(&act(&mut conn, "all", json!({"action": "key", "key": "ctrl+a"})).await);
    let chord = witness.expect("key", |k| k["name"] == "a");
    assert_eq!(chord["modifiers"], json!(["ctrl"]));
    assert_ack(
        &act(
            &mut conn,
            "del",
            json!({"action": "key", "key": "BackSpace"}),
        )
        .await,
    );
    witness.expect("text", |t| t["text"] == "");

    // A held key stays down for its duration (X server timestamps, in ms).
    let started = Instant::now();
    assert_ack(
        &act(
            &mut conn,
            "hold",
            json!({"action": "hold_key", "key": "shift", "duration_ms": 400}),
        )
        .await,
    );
    assert!(started.elapsed() >= Duration::from_millis(400));
    let down = witness.expect("key", |k| k["name"] == "Shift_L");
    let up = witness.expect("key_release", |k| k["name"] == "Shift_L");
    assert!(up["time"].as_i64().unwrap() - down["time"].as_i64().unwrap() >= 350);

    a_wait_holds_the_next_operation_back(&mut conn).await;

    refused_input_reaches_nothing(&mut conn, &mut witness, [cx, cy], [1920, 1080]).await;

    // Screenshots over the negotiated 4096 bytes are refused before base64; small ones pass.
    let big = conn
        .call("SCREENSHOT_REQUEST", "big", json!({"format": "png"}))
        .await;
    assert_eq!(error_code(&big), "FILE_TOO_LARGE");
    assert_eq!(big["payload"]["details"]["limit"], 4096);
    let small = conn
        .call(
            "SCREENSHOT_REQUEST",
            "small",
            json!({"format": "png", "region": [cx, cy, cx + 8, cy + 8]}),
        )
        .await;
    assert_eq!(decode_png(&small).0, 8);

    // The audit has the typed text's length, never the text.
    let log = std::fs::read_to_string(shim.audit_log()).unwrap();
    assert!(!log.contains("héllo") && !log.contains("wörld"));
    let typed = audit_records(&shim)
        .into_iter()
        .find(|r| r["request_id"] == "type")
        .unwrap();
    assert_eq!(typed["details"]["text_length"], 13);
    assert_eq!(typed["details"]["action"], "type");
}

/// The clipboard under the default writeback-only policy, with a 4096-byte file size limit
/// negotiated, `paste` reading it as another program does and `copy` setting it as one:
/// nothing of ours yet, then our own write (which `paste` sees), then someone else's; the size
/// limit at its boundary, before the clipboard is touched; images not offered; the audit log
/// with the writes' sizes and none of the text.
pub(super) async fn the_clipboard_is_writeback_only_up_to_its_limit(
    conn: &mut Conn,
    shim: &e2e::platform::Shim,
    paste: impl Fn() -> String,
    copy: impl Fn(&str),
) {
    let concealed = conn
        .call("CLIPBOARD_READ", "r1", json!({"format": "text"}))
        .await;
    assert_eq!(error_code(&concealed), "CLIPBOARD_CONCEALED", "{concealed}");
    assert_eq!(concealed["payload"]["details"]["reason"], "writeback_only");
    let text = "clip ✓ text";
    assert_ack(
        &conn
            .call("CLIPBOARD_WRITE", "w1", json!({"content": text}))
            .await,
    );
    assert_eq!(paste(), text, "the other program sees the write");
    let back = conn.call("CLIPBOARD_READ", "r2", json!({})).await;
    assert_eq!(
        back["payload"],
        json!({"format": "text", "content": text, "size_bytes": text.len()})
    );
    copy("someone else");
    let deadline = Instant::now() + Duration::from_secs(10);
    while paste() != "someone else" {
        assert!(
            Instant::now() < deadline,
            "the other program never took the clipboard"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let overwritten = conn.call("CLIPBOARD_READ", "r3", json!({})).await;
    assert_eq!(error_code(&overwritten), "CLIPBOARD_CONCEALED");
    assert_eq!(
        overwritten["payload"]["details"]["reason"],
        "writeback_overwritten"
    );
    let over = conn
        .call(
            "CLIPBOARD_WRITE",
            "w2",
            json!({"content": "x".repeat(4097)}),
        )
        .await;
    assert_eq!(error_code(&over), "FILE_TOO_LARGE", "{over}");
    assert_eq!(paste(), "someone else");
    assert_ack(
        &conn
            .call(
                "CLIPBOARD_WRITE",
                "w3",
                json!({"content": "y".repeat(4096)}),
            )
            .await,
    );
    assert_eq!(paste(), "y".repeat(4096));
    let image = conn
        .call("CLIPBOARD_READ", "r4", json!({"format": "image"}))
        .await;
    assert_eq!(error_code(&image), "FEATURE_NOT_SUPPORTED");
    // The audit log has each write's size, never its text (its writer may still be
    // appending).
    let deadline = Instant::now() + Duration::from_secs(10);
    let write = loop {
        let records = audit_records(shim);
        if records.iter().any(|r| r["request_id"] == "w3") {
            break records
                .into_iter()
                .find(|r| r["request_id"] == "w1")
                .expect("the first write is audited");
        }
        assert!(
            Instant::now() < deadline,
            "the last clipboard write was never audited"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(write["details"]["size_bytes"], text.len());
    let log = std::fs::read_to_string(shim.audit_log()).unwrap();
    assert!(!log.contains("clip ✓") && !log.contains("someone else"));
}

fn xclip_out(desktop: &Desktop) -> String {
    let out = desktop
        .command("xclip")
        .args(["-o", "-selection", "clipboard"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn windows_apps_clipboard_permissions_and_the_accessibility_snapshot() {
    require("xclip", "xclip");
    let desktop = Desktop::start();
    let mut witness = Witness::start(&desktop, "Witness C");
    let other = Witness::start(&desktop, "Other C");
    let platform = Platform::bind().await;
    let shim = shim_on(&desktop, &platform, "cu-win", &["--enable-clipboard"]);
    let (mut conn, hello) = platform
        .session(&["files", "computer_use"], |ack| {
            ack["payload"]["max_file_size_bytes"] = json!(4096);
        })
        .await;
    let coarse = &hello["payload"]["computer_use_features_coarse"];
    assert_eq!(
        coarse,
        &json!([
            "screenshot",
            "input",
            "windows",
            "apps",
            "clipboard",
            "permissions"
        ])
    );

    // Windows: listed with their pids and bounds; focus moves to the one asked for.
    let mine = listed_window(&mut conn, "Witness C").await;
    assert_eq!(mine["pid"], witness.pid);
    assert!(mine["window_id"].as_str().unwrap().starts_with("win_"));
    let bounds: Vec<i64> = serde_json::from_value(mine["bounds"].clone()).unwrap();
    assert!(bounds[0] <= witness.area[0] && bounds[2] >= witness.area[0] + witness.area[2]);
    let theirs = listed_window(&mut conn, "Other C").await;
    assert_eq!(theirs["pid"], other.pid);
    // The first listing's ids died with the second listing.
    let focus = conn
        .call(
            "WINDOW_FOCUS",
            "f1",
            json!({"window_id": mine["window_id"], "raise": true}),
        )
        .await;
    assert_eq!(error_code(&focus), "WINDOW_STALE");
    assert_eq!(
        focus["payload"]["details"],
        json!({"window_id": mine["window_id"], "hint": "re-list windows"})
    );
    assert_ack(
        &conn
            .call(
                "WINDOW_FOCUS",
                "f2",
                json!({"window_id": theirs["window_id"], "raise": true}),
            )
            .await,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let active = desktop
            .command("xdotool")
            .args(["getactivewindow", "getwindowname"])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&active.stdout).trim() == "Other C" {
            break;
        }
        assert!(Instant::now() < deadline, "focus did not move to Other C");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        listed_window(&mut conn, "Other C").await["is_focused"],
        true
    );
    // A window that closed: its id is stale.
    let gone = listed_window(&mut conn, "Other C").await;
    drop(other);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stale = conn
        .call(
            "WINDOW_FOCUS",
            "f3",
            json!({"window_id": gone["window_id"]}),
        )
        .await;
    assert_eq!(error_code(&stale), "WINDOW_STALE");

    // Apps: the witness is listed; a launched program's pid comes back and is real.
    let apps = conn.call("APP_LIST_REQUEST", "al", json!({})).await;
    let app = apps["payload"]["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pid"] == witness.pid)
        .cloned()
        .expect("the witness is listed");
    assert_eq!(app["window_count"], 1);
    let launched = conn
        .call(
            "APP_LAUNCH",
            "la",
            json!({"executable_path": "/bin/sleep", "args": ["30"]}),
        )
        .await;
    assert_ack(&launched);
    let pid = launched["payload"]["pid"].as_u64().unwrap();
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "sleep");
    let _ = Command::new("kill").arg(pid.to_string()).status();

    let permissions = conn.call("PERMISSIONS_CHECK_REQUEST", "p", json!({})).await;
    assert_eq!(
        permissions["payload"]["permissions"],
        json!({"accessibility": "granted", "input_monitoring": "granted", "screen_recording": "granted"})
    );

    // Clipboard, writeback only, and its size limit, with xclip as the other program.
    the_clipboard_is_writeback_only_up_to_its_limit(
        &mut conn,
        &shim,
        || xclip_out(&desktop),
        |text| {
            let mut xclip = desktop
                .command("xclip")
                .args(["-i", "-selection", "clipboard"])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            std::io::Write::write_all(&mut xclip.stdin.take().unwrap(), text.as_bytes()).unwrap();
            // xclip's background child takes the selection after the parent exits.
            xclip.wait().unwrap();
        },
    )
    .await;

    // Paste-typing goes through the clipboard and puts the previous content back.
    assert_ack(
        &conn
            .call("CLIPBOARD_WRITE", "w4", json!({"content": "keep me"}))
            .await,
    );
    let mine = listed_window(&mut conn, "Witness C").await;
    assert_ack(
        &conn
            .call(
                "WINDOW_FOCUS",
                "f4",
                json!({"window_id": mine["window_id"]}),
            )
            .await,
    );
    let pasted = "pasted ✓ text";
    let typed = act(
        &mut conn,
        "paste",
        json!({"action": "type", "text": pasted, "paste": true, "preserve_clipboard": true}),
    )
    .await;
    assert_ack(&typed);
    // The paste chord arrives before the text it inserts.
    witness.expect("key", |k| {
        k["name"] == "v" && k["modifiers"] == json!(["ctrl"])
    });
    witness.expect("text", |t| t["text"] == pasted);
    assert_eq!(xclip_out(&desktop), "keep me");

    // The accessibility snapshot of the GTK window: its button, inside the window.
    let (_, button, b) = snapshot_button(&mut conn, "a11y", &mine["window_id"]).await;
    let w: Vec<i64> = serde_json::from_value(mine["bounds"].clone()).unwrap();
    assert!(
        b[0] >= w[0] && b[1] >= w[1] && b[2] <= w[2] && b[3] <= w[3],
        "{b:?} in {w:?}"
    );
    assert!(
        button["states"]
            .as_array()
            .unwrap()
            .contains(&json!("enabled"))
    );

    let log = std::fs::read_to_string(shim.audit_log()).unwrap();
    assert!(!log.contains("keep me") && !log.contains("pasted"));
}

#[tokio::test]
async fn two_monitors_make_one_virtual_desktop_for_capture_and_input() {
    let desktop = Desktop::two_monitors();
    let mut witness = Witness::start_at(&desktop, "Witness D", [2200, 200]);
    let platform = Platform::bind().await;
    let _shim = shim_on(&desktop, &platform, "cu-two", &[]);
    let (mut conn, hello) = platform.session(&["files", "computer_use"], |_| {}).await;
    assert_eq!(hello["payload"]["screen_resolution"], json!([1920, 1080]));
    let info = conn.call("DISPLAY_INFO_REQUEST", "d", json!({})).await;
    assert_eq!(
        info["payload"]["monitors"],
        json!([
            {"index": 0, "primary": true, "physical_size": [1920, 1080],
             "logical_size": [1920, 1080], "scale": 1.0, "origin": [0, 0]},
            {"index": 1, "primary": false, "physical_size": [1280, 1024],
             "logical_size": [1280, 1024], "scale": 1.0, "origin": [1920, 0]}
        ])
    );
    let [cx, cy] = witness.centre();
    assert!(
        cx > 1920,
        "the witness sits on the second monitor: {:?}",
        witness.area
    );

    // The second monitor alone: its own size and origin, the witness inside it.
    let second = conn
        .call(
            "SCREENSHOT_REQUEST",
            "m1",
            json!({"format": "png", "monitor": 1}),
        )
        .await;
    let (w, h, pixels) = decode_png(&second);
    assert_eq!((w, h), (1280, 1024));
    assert_eq!(second["payload"]["monitor"], 1);
    assert_eq!(second["payload"]["meta"]["origin"], json!([1920, 0]));
    assert_eq!(pixel(&pixels, w, [cx - 1920, cy]), [255, 0, 0, 255]);

    // All monitors stitched: the virtual desktop, black where no monitor is.
    let all = conn
        .call(
            "SCREENSHOT_REQUEST",
            "all",
            json!({"format": "png", "monitor": -1}),
        )
        .await;
    let (w, h, pixels) = decode_png(&all);
    assert_eq!((w, h), (3200, 1080));
    assert_eq!(pixel(&pixels, w, [cx, cy]), [255, 0, 0, 255]);
    assert_eq!(pixel(&pixels, w, [2500, 1050]), [0, 0, 0, 255]);

    // A region across the seam comes from both monitors.
    let seam = conn
        .call(
            "SCREENSHOT_REQUEST",
            "seam",
            json!({"format": "png", "region": [1800, 300, 2300, 400]}),
        )
        .await;
    let (w, h, pixels) = decode_png(&seam);
    assert_eq!((w, h), (500, 100));
    assert_eq!(seam["payload"]["meta"]["origin"], json!([1800, 300]));
    // The witness's left edge is inside the region; the first monitor's part is black desktop.
    let [left, top] = witness.at(10, 0);
    assert!(left < 2300 && top < 350, "{:?}", witness.area);
    assert_eq!(pixel(&pixels, w, [left - 1800, 50]), [255, 0, 0, 255]);
    assert_eq!(pixel(&pixels, w, [10, 50]), [0, 0, 0, 255]);

    // Input on the second monitor lands where it was sent.
    assert_ack(
        &act(
            &mut conn,
            "click",
            json!({"action": "left_click", "coordinate": [cx, cy]}),
        )
        .await,
    );
    let press = witness.expect("press", |_| true);
    assert_eq!(
        (press["x"].as_i64(), press["y"].as_i64()),
        (Some(cx), Some(cy))
    );
    let cursor = conn.call("CURSOR_POSITION_REQUEST", "c", json!({})).await;
    assert_eq!(cursor["payload"]["monitor"], 1);

    // Inside the bounding box but below the shorter monitor: on no display.
    let below = act(
        &mut conn,
        "below",
        json!({"action": "mouse_move", "coordinate": [2500, 1050]}),
    )
    .await;
    assert_eq!(error_code(&below), "INPUT_OUT_OF_BOUNDS");
    assert_eq!(
        below["payload"]["details"]["displays"],
        json!([{"index": 0, "origin": [0, 0], "size": [1920, 1080]},
               {"index": 1, "origin": [1920, 0], "size": [1280, 1024]}])
    );
}

/// A real xterm on a private desktop, killed and reaped on drop (its `sleep` goes with the
/// terminal's hang-up).
pub(super) struct Xterm {
    child: std::process::Child,
    /// The X window id the window manager lists it under.
    pub(super) window: u32,
}

impl Xterm {
    /// Starts `xterm -T title` in the C.UTF-8 locale, so it reads the title's UTF-8 and, as
    /// xterm does with a title Latin-1 can hold, sets it only as the ICCCM `WM_NAME` of type
    /// `STRING`; waits until the window manager lists it.
    pub(super) fn start(desktop: &Desktop, title: &str) -> Self {
        require("xterm", "xterm");
        let child = desktop
            .command("xterm")
            .env("LC_ALL", "C.UTF-8")
            .args(["+ut", "-T", title, "-e", "sleep", "600"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start xterm");
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(30);
        let window = loop {
            if let Some(window) = managed_window_of(desktop, pid) {
                break window;
            }
            assert!(Instant::now() < deadline, "xterm {pid} was never managed");
            std::thread::sleep(Duration::from_millis(50));
        };
        Self { child, window }
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Xterm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The A11Y_SNAPSHOT of `window_id` (request `id`), the GTK witness's "Press me" button in it
/// (a button) and the button's box.
pub(super) async fn snapshot_button(
    conn: &mut Conn,
    id: &str,
    window_id: &Value,
) -> (Value, Value, Vec<i64>) {
    let snapshot = conn
        .call(
            "A11Y_SNAPSHOT_REQUEST",
            id,
            json!({"window_id": window_id, "deadline_ms": 8000}),
        )
        .await;
    assert_eq!(snapshot["type"], "A11Y_SNAPSHOT_RESPONSE", "{snapshot}");
    let button = snapshot["payload"]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["label"] == "Press me")
        .unwrap_or_else(|| panic!("no button: {snapshot}"))
        .clone();
    assert_eq!(button["role"], "button");
    let b = serde_json::from_value(button["box"].clone()).unwrap();
    (snapshot, button, b)
}

/// `xprop -id <window> args…` on `desktop` (in C.UTF-8): the independent view of a window's
/// properties.
pub(super) fn xprop(desktop: &Desktop, window: u32, args: &[&str]) -> String {
    let out = desktop
        .command("xprop")
        .env("LC_ALL", "C.UTF-8")
        .arg("-id")
        .arg(window.to_string())
        .args(args)
        .output()
        .expect("run xprop");
    assert!(out.status.success(), "xprop {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Fails unless `window` is named `title` only in `WM_NAME`, as `STRING` holding the title's
/// Latin-1 bytes (é as the one byte 0xE9, not UTF-8's two): the premise that makes a test of
/// this window a test of the Latin-1 decoding.
pub(super) fn assert_named_only_in_latin1_wm_name(desktop: &Desktop, window: u32, title: &str) {
    let names = xprop(desktop, window, &["_NET_WM_NAME"]);
    assert!(
        names.contains("_NET_WM_NAME:  not found."),
        "the window has a _NET_WM_NAME: {names}"
    );
    let latin1: Vec<String> = title
        .chars()
        .map(|c| {
            format!(
                "0x{:x}",
                u8::try_from(u32::from(c)).expect("a Latin-1 title")
            )
        })
        .collect();
    let raw = xprop(desktop, window, &["-f", "WM_NAME", "8x", "WM_NAME"]);
    assert_eq!(
        raw.trim(),
        format!("WM_NAME(STRING) = {}", latin1.join(", ")),
        "WM_NAME is not {title:?} as a Latin-1 STRING"
    );
}

/// The window the window manager lists (`_NET_CLIENT_LIST`) for the process `pid`.
pub(super) fn managed_window_of(desktop: &Desktop, pid: u32) -> Option<u32> {
    let out = desktop
        .command("xprop")
        .args(["-root", "_NET_CLIENT_LIST"])
        .output()
        .expect("run xprop");
    let list = String::from_utf8_lossy(&out.stdout).into_owned();
    list.split(['#', ','])
        .skip(1)
        .filter_map(|id| u32::from_str_radix(id.trim().trim_start_matches("0x"), 16).ok())
        .find(|&window| {
            xprop(desktop, window, &["_NET_WM_PID"]).trim()
                == format!("_NET_WM_PID(CARDINAL) = {pid}")
        })
}

/// A directory removed with everything in it when dropped; declared before the shim whose
/// home it is, so the shim has stopped by then.
struct RemovedOnDrop(std::path::PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The listed windows titled `title`.
async fn windows_titled(conn: &mut Conn, title: &str) -> Vec<Value> {
    let list = conn.call("WINDOW_LIST_REQUEST", "wl", json!({})).await;
    assert_eq!(list["type"], "WINDOW_LIST_RESPONSE", "{list}");
    list["payload"]["windows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["title"] == title)
        .cloned()
        .collect()
}

#[tokio::test]
async fn an_xterm_naming_itself_only_in_icccm_wm_name_is_listed_and_focused_by_that_title() {
    require("xdotool", "xdotool");
    let desktop = Desktop::start();
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let title = format!("café-{tag}");
    let xterm = Xterm::start(&desktop, &title);
    assert_named_only_in_latin1_wm_name(&desktop, xterm.window, &title);
    // A second terminal, started later, holds the focus.
    let other = Xterm::start(&desktop, &format!("other-{tag}"));
    let platform = Platform::bind().await;
    let (home, root) = home_and_root("cu-xterm");
    let home = RemovedOnDrop(home);
    let env = desktop.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let _shim = spawn_env(&home.0, &platform, &root, &["--enable-computer-use"], &env);
    let (mut conn, _) = platform.session(&["files", "computer_use"], |_| {}).await;

    // Listed exactly once, under its Latin-1 title, with its application and pid.
    let listed = windows_titled(&mut conn, &title).await;
    assert_eq!(listed.len(), 1, "{title} listed {} times", listed.len());
    let mine = &listed[0];
    assert_eq!(mine["app_name"], "XTerm");
    assert_eq!(mine["pid"], xterm.pid());
    assert_eq!(mine["is_focused"], false);
    assert_eq!(
        windows_titled(&mut conn, &format!("other-{tag}")).await[0]["pid"],
        other.pid()
    );

    // Focus by that listing's id: the window manager activates it, as xdotool sees.
    let listed = windows_titled(&mut conn, &title).await;
    assert_ack(
        &conn
            .call(
                "WINDOW_FOCUS",
                "fx",
                json!({"window_id": listed[0]["window_id"], "raise": true}),
            )
            .await,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let active = desktop
            .command("xdotool")
            .arg("getactivewindow")
            .output()
            .unwrap();
        if String::from_utf8_lossy(&active.stdout).trim() == xterm.window.to_string() {
            break;
        }
        assert!(Instant::now() < deadline, "focus did not move to {title}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        windows_titled(&mut conn, &title).await[0]["is_focused"],
        true
    );

    // The same window renamed through Xlib in COMPOUND_TEXT (xprop's `8t`), which encodes €
    // by designating Latin-9 (ESC - b): listed under the new title.
    let renamed = format!("crème €-{tag}");
    xprop(
        &desktop,
        xterm.window,
        &["-f", "WM_NAME", "8t", "-set", "WM_NAME", &renamed],
    );
    let raw = xprop(&desktop, xterm.window, &["-f", "WM_NAME", "8x", "WM_NAME"]);
    assert!(
        raw.starts_with("WM_NAME(COMPOUND_TEXT) = ") && raw.contains("0x1b, 0x2d, 0x62"),
        "Xlib did not encode the title as COMPOUND_TEXT with Latin-9: {raw}"
    );
    let listed = windows_titled(&mut conn, &renamed).await;
    assert_eq!(listed.len(), 1, "{renamed} listed {} times", listed.len());
    assert_eq!(listed[0]["pid"], xterm.pid());
}
