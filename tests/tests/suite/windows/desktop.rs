//! Computer use of `autogpt-shim.exe start --enable-computer-use` under Wine on a private Xvfb
//! desktop, where Wine's X11 driver gives Windows programs real X windows: the screenshot
//! against an X11 capture of the same screen, SendInput clicks and typing into Wine's notepad
//! (its text read back from the file it saves), the clipboard against xclip, DISPLAY_INFO, and
//! where Wine 8.0 falls short of Windows, the exact call that fails, asserted as such so that a
//! Wine that fixes it is noticed:
//! - the window list is empty: `DwmGetWindowAttribute(DWMWA_EXTENDED_FRAME_BOUNDS)` is a stub;
//! - with a stand-in `dwmapi.dll` answering it (`tests/wine/dwm_frame_bounds.c`), windows are
//!   listed, but without their application name (`GetModuleFileNameExW` and
//!   `GetModuleBaseNameW` refuse a `PROCESS_QUERY_LIMITED_INFORMATION` handle, as Windows 7
//!   did), a window's own capture is black (`PrintWindow` sends `WM_PRINT`, which Wine cannot
//!   pass to another process), and WINDOW_FOCUS and A11Y_SNAPSHOT fail because the UI
//!   Automation object (`CLSID_CUIAutomation`) is not registered.

use std::process::Stdio;
use std::time::{Duration, Instant};

use e2e::display::{Desktop, require};
use e2e::platform::{Conn, Platform, WAIT, error_code};
use serde_json::{Value, json};
use x11rb::connection::Connection as _;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, Window};
use x11rb::rust_connection::RustConnection;

use super::Wine;
use super::connector::{WindowsShim, state_dir};
use crate::suite::connector_computer::decode_png;

/// The private screen: small, so each PNG screenshot is quick to encode in a debug build.
const WIDTH: u32 = 1024;
const HEIGHT: u32 = 768;
/// What notepad opens: an empty UTF-8 file (its byte order mark alone), so it saves UTF-8 too.
const BOM: &str = "\u{feff}";
/// What SendInput types into notepad: a long first word for the click to land in.
const TYPED: &str = "alphaalphaalphaalpha beta ✓ gamma";
/// `REGDB_E_CLASSNOTREG`: Wine 8.0 registers no `CLSID_CUIAutomation` class.
const CLASS_NOT_REGISTERED: &str = "HRESULT 0x80040154";

/// The environment that puts a Wine program on `desktop`, with Wine's debug channels `debug`.
fn on(desktop: &Desktop, debug: &str) -> Vec<(&'static str, String)> {
    let mut env = desktop.env();
    env.push(("WINEDEBUG", debug.to_owned()));
    env
}

/// The shim's HELLO_ACK granting files and computer use, and the HELLO it answered.
async fn session(platform: &Platform) -> (Conn, Value) {
    platform.session(&["files", "computer_use"], |_| {}).await
}

fn assert_ack(reply: &Value) {
    assert_eq!(reply["type"], "ACK", "{reply}");
}

/// Starts notepad through APP_LAUNCH (with `args`), and waits for its X window titled `title`.
async fn notepad(conn: &mut Conn, desktop: &Desktop, args: &[&str], title: &str) -> (u64, Window) {
    let launched = conn
        .call(
            "APP_LAUNCH",
            "notepad",
            json!({"executable_path": r"C:\windows\system32\notepad.exe", "args": args}),
        )
        .await;
    assert_ack(&launched);
    let pid = launched["payload"]["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("no pid: {launched}"));
    (pid, X11::open(desktop).window_titled(title).await)
}

/// The desktop seen from the Linux side, over its own X connection.
struct X11 {
    conn: RustConnection,
    root: Window,
}

impl X11 {
    fn open(desktop: &Desktop) -> Self {
        let (conn, screen) = x11rb::connect(Some(desktop.display())).unwrap();
        let root = conn.setup().roots[screen].root;
        Self { conn, root }
    }

    fn atom(&self, name: &str) -> u32 {
        self.conn
            .intern_atom(false, name.as_bytes())
            .unwrap()
            .reply()
            .unwrap()
            .atom
    }

    /// The 32-bit values of `property` on `window`.
    fn cardinals(&self, window: Window, property: &str, kind: impl Into<u32>) -> Vec<u32> {
        let reply = self
            .conn
            .get_property(false, window, self.atom(property), kind, 0, 1024)
            .unwrap()
            .reply()
            .unwrap();
        reply.value32().map(Iterator::collect).unwrap_or_default()
    }

    /// The window the window manager lists (`_NET_CLIENT_LIST`) whose `_NET_WM_NAME` is
    /// `title`, waited for.
    async fn window_titled(&self, title: &str) -> Window {
        let deadline = Instant::now() + WAIT;
        let utf8 = self.atom("UTF8_STRING");
        loop {
            for window in self.cardinals(self.root, "_NET_CLIENT_LIST", AtomEnum::WINDOW) {
                let name = self
                    .conn
                    .get_property(false, window, self.atom("_NET_WM_NAME"), utf8, 0, 1024)
                    .unwrap()
                    .reply();
                if name.is_ok_and(|n| n.value == title.as_bytes()) {
                    return window;
                }
            }
            assert!(Instant::now() < deadline, "no X window titled {title:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Where `window` is on the screen: `[x, y, width, height]`.
    fn placed(&self, window: Window) -> [i64; 4] {
        let size = self.conn.get_geometry(window).unwrap().reply().unwrap();
        let at = self
            .conn
            .translate_coordinates(window, self.root, 0, 0)
            .unwrap()
            .reply()
            .unwrap();
        [
            at.dst_x.into(),
            at.dst_y.into(),
            size.width.into(),
            size.height.into(),
        ]
    }

    fn pointer(&self) -> [i64; 2] {
        let reply = self.conn.query_pointer(self.root).unwrap().reply().unwrap();
        [reply.root_x.into(), reply.root_y.into()]
    }
}

fn xclip_out(desktop: &Desktop) -> String {
    let out = desktop
        .command("xclip")
        .args(["-o", "-selection", "clipboard"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until xclip reads `text` from the X clipboard.
async fn until_xclip_reads(desktop: &Desktop, text: &str) {
    let deadline = Instant::now() + WAIT;
    while xclip_out(desktop) != text {
        assert!(Instant::now() < deadline, "xclip never read {text:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A PNG screenshot of `payload`, checked against X11 captures of the same rectangle `[x, y,
/// width, height]` just before and just after it: its pixels are opaque, and their colours are
/// those of one of the two captures. Anything that moves (notepad's caret blinks every half
/// second) can make the three differ, so a mismatch is tried again, ten times at most.
async fn assert_screenshot_shows_x11(
    conn: &mut Conn,
    desktop: &Desktop,
    payload: Value,
    [x, y, width, height]: [i64; 4],
) -> Value {
    let side = |v: i64| u32::try_from(v).unwrap();
    let mut differing = Vec::new();
    for attempt in 0..10 {
        let before = desktop.grab(x, y, side(width), side(height));
        let shot = conn
            .call(
                "SCREENSHOT_REQUEST",
                &format!("shot-{attempt}"),
                payload.clone(),
            )
            .await;
        let after = desktop.grab(x, y, side(width), side(height));
        let (shot_width, shot_height, rgba) = decode_png(&shot);
        assert_eq!((shot_width, shot_height), (before.width, before.height));
        // A screen has no transparency (GDI's unused fourth byte came through as alpha).
        let translucent = rgba.chunks(4).filter(|p| p[3] != 255).count();
        assert_eq!(
            translucent, 0,
            "pixels of the screenshot that are not opaque"
        );
        let rgb: Vec<[u8; 3]> = rgba.chunks(4).map(|p| [p[0], p[1], p[2]]).collect();
        if rgb == before.rgb || rgb == after.rgb {
            return shot;
        }
        let width = usize::try_from(shot_width).unwrap();
        differing.push(
            rgb.iter()
                .zip(&before.rgb)
                .enumerate()
                .filter(|(_, (a, b))| a != b)
                .map(|(i, _)| (i % width, i / width))
                .collect::<Vec<_>>(),
        );
    }
    let counts: Vec<usize> = differing.iter().map(Vec::len).collect();
    panic!(
        "the screenshot never matched X11: pixels differing each time {counts:?}, first at {:?}",
        differing.last().and_then(|d| d.first())
    );
}

#[tokio::test]
async fn computer_use_reaches_the_wine_desktop_and_the_window_list_meets_wines_dwm_stub() {
    require("xclip", "xclip");
    let desktop = Desktop::with_size(WIDTH, HEIGHT);
    let wine = Wine::new("desktop");
    let jail = wine.drive_c().join("jail");
    std::fs::create_dir_all(&jail).unwrap();
    std::fs::write(jail.join("typed.txt"), BOM).unwrap();
    let platform = Platform::bind().await;
    let shim = WindowsShim::start_in(
        &wine,
        "msguide",
        &platform,
        &["--enable-computer-use", "--enable-clipboard"],
        &on(&desktop, "-all,fixme+dwmapi"),
    );
    let (mut conn, hello) = session(&platform).await;
    let payload = &hello["payload"];
    assert_eq!(payload["capabilities"], json!(["files", "computer_use"]));
    assert_eq!(payload["screen_resolution"], json!([WIDTH, HEIGHT]));
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
    // Windows advertises what Linux does but `app.list`, which it lacks.
    assert_eq!(
        payload["computer_use_features"],
        json!([
            "screenshot.region",
            "screenshot.all_monitors",
            "screenshot.window",
            "input.click.modifiers",
            "input.click.button",
            "input.drag.path",
            "input.key.hold",
            "input.mouse.down_up",
            "input.scroll.amount",
            "input.wait",
            "cursor.position",
            "display.info",
            "window.list",
            "window.focus",
            "app.launch",
            "clipboard.read",
            "clipboard.write",
            "permissions.check",
            "a11y.snapshot"
        ])
    );
    let info = conn.call("DISPLAY_INFO_REQUEST", "d", json!({})).await;
    assert_eq!(
        info["payload"]["monitors"],
        json!([{"index": 0, "primary": true, "physical_size": [WIDTH, HEIGHT],
                "logical_size": [WIDTH, HEIGHT], "scale": 1.0, "origin": [0, 0]}])
    );
    let permissions = conn.call("PERMISSIONS_CHECK_REQUEST", "p", json!({})).await;
    assert_eq!(
        permissions["payload"]["permissions"],
        json!({"accessibility": "not_applicable", "input_monitoring": "not_applicable",
               "screen_recording": "not_applicable"})
    );

    // APP_LAUNCH starts notepad on the file; its window is a real X window.
    let x11 = X11::open(&desktop);
    let (_, window) = notepad(
        &mut conn,
        &desktop,
        &[r"C:\jail\typed.txt"],
        "typed.txt - Notepad",
    )
    .await;
    let [x, y, width, height] = x11.placed(window);

    // SendInput: a click in the middle of the text area puts the pointer there; typing fills
    // the line; a click on the first word moves the caret into it, and what is typed then
    // lands there; ctrl+s saves the file.
    let centre = [x + width / 2, y + height / 2];
    assert_ack(
        &conn
            .call(
                "INPUT_ACTION",
                "click",
                json!({"action": "left_click", "coordinate": centre}),
            )
            .await,
    );
    let cursor = conn.call("CURSOR_POSITION_REQUEST", "c", json!({})).await;
    assert_eq!(
        cursor["payload"],
        json!({"x": centre[0], "y": centre[1], "monitor": 0})
    );
    assert_eq!(
        x11.pointer(),
        centre,
        "the X pointer is not where SendInput put it"
    );
    for (id, action) in [
        ("type", json!({"action": "type", "text": TYPED})),
        // 40 pixels into the first line, below the menu bar: inside the first word.
        (
            "into-word",
            json!({"action": "left_click", "coordinate": [x + 40, y + 28]}),
        ),
        ("mark", json!({"action": "type", "text": "|"})),
        ("save", json!({"action": "key", "key": "ctrl+s"})),
    ] {
        assert_ack(&conn.call("INPUT_ACTION", id, action).await);
    }
    let deadline = Instant::now() + WAIT;
    let saved = loop {
        let saved = std::fs::read_to_string(jail.join("typed.txt")).unwrap_or_default();
        if saved.contains('|') {
            break saved;
        }
        assert!(Instant::now() < deadline, "notepad never saved: {saved:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let text = saved
        .strip_prefix(BOM)
        .unwrap_or_else(|| panic!("{saved:?}"));
    assert_eq!(text.replacen('|', "", 1), TYPED, "{text:?}");
    let mark = text.find('|').unwrap();
    assert!(
        (1..20).contains(&mark),
        "the click did not land in the first word: {text:?}"
    );

    // The screenshot is what X11 shows, pixel for pixel and opaque: the whole monitor, then
    // notepad's rectangle.
    let screen = [0, 0, i64::from(WIDTH), i64::from(HEIGHT)];
    let request = json!({"format": "png", "include_cursor": false});
    let full = assert_screenshot_shows_x11(&mut conn, &desktop, request, screen).await;
    assert_eq!(full["payload"]["meta"]["origin"], json!([0, 0]));
    let region = [x, y, x + width, y + height];
    let request = json!({"format": "png", "region": region});
    let placed = [x, y, width, height];
    let part = assert_screenshot_shows_x11(&mut conn, &desktop, request, placed).await;
    assert_eq!(part["payload"]["meta"]["origin"], json!([x, y]));
    assert_eq!(part["payload"]["region"], json!(region));

    // The clipboard, writeback only: nothing of ours yet, our own write (which X11 sees),
    // then someone else's.
    let concealed = conn
        .call("CLIPBOARD_READ", "r1", json!({"format": "text"}))
        .await;
    assert_eq!(error_code(&concealed), "CLIPBOARD_CONCEALED", "{concealed}");
    assert_eq!(concealed["payload"]["details"]["reason"], "writeback_only");
    let clip = "clip ✓ from Windows";
    assert_ack(
        &conn
            .call("CLIPBOARD_WRITE", "w1", json!({"content": clip}))
            .await,
    );
    until_xclip_reads(&desktop, clip).await;
    let back = conn.call("CLIPBOARD_READ", "r2", json!({})).await;
    assert_eq!(
        back["payload"],
        json!({"format": "text", "content": clip, "size_bytes": clip.len()})
    );
    let mut xclip = desktop
        .command("xclip")
        .args(["-i", "-selection", "clipboard"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut xclip.stdin.take().unwrap(), b"someone else").unwrap();
    xclip.wait().unwrap();
    until_xclip_reads(&desktop, "someone else").await;
    // Wine learns of a new X11 selection owner on its clipboard thread, a moment after xclip
    // reads the text back, so a read may still see our own write until then.
    let deadline = Instant::now() + WAIT;
    let overwritten = loop {
        let read = conn.call("CLIPBOARD_READ", "r3", json!({})).await;
        if read["payload"]["content"] != clip {
            break read;
        }
        assert!(
            Instant::now() < deadline,
            "Wine never saw xclip's text: {read}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        error_code(&overwritten),
        "CLIPBOARD_CONCEALED",
        "{overwritten}"
    );
    assert_eq!(
        overwritten["payload"]["details"]["reason"],
        "writeback_overwritten"
    );

    // Wine 8.0 only: no window is listed, notepad included, because xcap keeps a window only
    // when DwmGetWindowAttribute gives its DWMWA_EXTENDED_FRAME_BOUNDS (9), which Wine stubs.
    let list = conn.call("WINDOW_LIST_REQUEST", "wl", json!({})).await;
    assert_eq!(list["payload"], json!({"windows": [], "truncated": false}));
    let stderr = shim.stderr();
    assert!(
        stderr
            .lines()
            .any(|line| line.contains("fixme:dwmapi:DwmGetWindowAttribute")
                && line.contains(" 9 ")
                && line.ends_with(" 16) stub")),
        "Wine no longer stubs DWMWA_EXTENDED_FRAME_BOUNDS: the window list may work now\n{stderr}"
    );

    // Nothing typed or copied reaches the audit log: only sizes and names.
    drop(conn);
    drop(shim);
    let log = std::fs::read_to_string(state_dir(&wine).join("logs").join("audit.log")).unwrap();
    assert!(
        log.contains("INPUT_ACTION") && log.contains("CLIPBOARD_WRITE"),
        "{log}"
    );
    assert!(!log.contains("alpha") && !log.contains(clip), "{log}");
}

#[tokio::test]
async fn with_dwm_frame_bounds_supplied_windows_are_listed_and_ui_automation_is_what_wine_lacks() {
    let desktop = Desktop::with_size(WIDTH, HEIGHT);
    let wine = Wine::new("desktop-dwm");
    // A copy of the executables beside the stand-in dwmapi.dll, which Wine loads before its
    // own from the program's folder.
    wine.install("dwm", &["dwmapi.dll"]);
    std::fs::create_dir_all(wine.drive_c().join("jail")).unwrap();
    let platform = Platform::bind().await;
    let shim = WindowsShim::start_in(
        &wine,
        "dwm",
        &platform,
        &["--enable-computer-use"],
        &on(&desktop, "-all,err+ole,fixme+msg"),
    );
    let (mut conn, _) = session(&platform).await;
    let (pid, window) = notepad(&mut conn, &desktop, &[], "Untitled - Notepad").await;
    let [x, y, width, height] = X11::open(&desktop).placed(window);

    // Listed with its process, title, frame and focus; its application name is missing.
    let list = conn.call("WINDOW_LIST_REQUEST", "wl", json!({})).await;
    let windows = list["payload"]["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 1, "{list}");
    let listed = &windows[0];
    assert_eq!(listed["title"], "Untitled - Notepad");
    assert_eq!(listed["pid"], pid);
    // Its rectangle holds the X window (menu bar and text area) and the frame Wine reckons
    // around it, a caption's height above at most.
    let bounds: [i64; 4] = serde_json::from_value(listed["bounds"].clone()).unwrap();
    let margins = [
        x - bounds[0],
        y - bounds[1],
        bounds[2] - x - width,
        bounds[3] - y - height,
    ];
    assert!(
        margins.iter().all(|m| (0..40).contains(m)),
        "{listed} around the X window at {:?}",
        [x, y, width, height]
    );
    assert_eq!(listed["is_focused"], true, "{listed}");
    assert_eq!(listed["is_minimized"], false);
    assert_eq!(listed["monitor"], 0);
    // Wine 8.0 only: xcap opens the process with PROCESS_QUERY_LIMITED_INFORMATION, which
    // Windows 10 accepts for GetModuleFileNameExW; Wine, like Windows 7, also wants
    // PROCESS_VM_READ, so the path comes back empty and GetModuleBaseNameW is denied.
    assert_eq!(listed["app_name"], Value::Null, "{listed}");
    let stderr = shim.stderr();
    assert!(
        stderr
            .lines()
            .any(|line| line.contains("GetModuleBaseNameW(")
                && line.ends_with("failed: WIN32_ERROR(5)")),
        "Wine now names a window's application: assert the name\n{stderr}"
    );

    // Wine 8.0 only: the window's own capture is black, though X11 shows notepad there:
    // PrintWindow sends WM_PRINT, which Wine cannot carry to another process, and says it
    // succeeded.
    let shot = conn
        .call(
            "SCREENSHOT_REQUEST",
            "ws",
            json!({"format": "png", "window_id": listed["window_id"]}),
        )
        .await;
    let (shot_width, shot_height, rgba) = decode_png(&shot);
    assert_eq!(
        [i64::from(shot_width), i64::from(shot_height)],
        [bounds[2] - bounds[0], bounds[3] - bounds[1]]
    );
    assert!(
        rgba.chunks(4).all(|p| p == [0, 0, 0, 255]),
        "Wine now captures a window"
    );
    let side = |v: i64| u32::try_from(v).unwrap();
    let shown = desktop.grab(x, y, side(width), side(height));
    assert!(shown.rgb.iter().any(|p| *p != [0, 0, 0]));
    assert!(
        shim.stderr()
            .contains("fixme:msg:pack_message msg 317 (WM_PRINT) not supported yet"),
        "{}",
        shim.stderr()
    );

    // Wine 8.0 only: focus and the accessibility snapshot both need the UI Automation object,
    // whose class Wine does not register (CoCreateInstance: REGDB_E_CLASSNOTREG).
    let focus = conn
        .call(
            "WINDOW_FOCUS",
            "f",
            json!({"window_id": listed["window_id"], "raise": true}),
        )
        .await;
    assert_eq!(
        focus["payload"]["details"],
        json!({"feature": "window.focus",
               "reason": format!("UI Automation is unavailable: {CLASS_NOT_REGISTERED}")}),
        "{focus}"
    );
    let snapshot = conn
        .call(
            "A11Y_SNAPSHOT_REQUEST",
            "a11y",
            json!({"window_id": listed["window_id"], "deadline_ms": 5000}),
        )
        .await;
    assert_eq!(
        snapshot["payload"]["details"],
        json!({"feature": "a11y.snapshot",
               "reason": format!("the accessibility service is unavailable: {CLASS_NOT_REGISTERED}")}),
        "{snapshot}"
    );
    let stderr = shim.stderr();
    assert!(
        stderr.contains(
            "err:ole:com_get_class_object class {ff48dba4-60ef-4201-aa87-54103eef594e} not registered"
        ),
        "{stderr}"
    );
}
