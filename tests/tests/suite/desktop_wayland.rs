//! The guidance window (`msguide-desktop gui`) on a Wayland compositor started by the test: on a
//! headless weston, which has no layer shell, it opens and says at once, in one sentence, that
//! the target will be framed on the capture in its own window instead; without a session bus it
//! then says how to get one (the accessibility bus lists the windows weston lists to no other
//! program), never to run inside an X11 session. With a session bus the person walks the demo's
//! three steps on weston, every button pressed through AT-SPI, and weston's own screenshots show
//! each target framed on the capture inside the guidance window; on a headless GNOME Shell, one
//! step, with the connector's portal screenshots as witness; and on a headless sway whose IPC
//! the client is not given (a wlroots compositor that says nothing of window geometry), with
//! grim as witness. On a headless KWin,
//! `observe` finds a window through KWin's scripting; on a headless sway at
//! scale 2 with a session bus, `observe` finds the demo's elements on its floating window where
//! sway put it.
//!
//! On a headless sway with a session bus, at scale 1 and at scale 2, the person walks the
//! demo's three steps with the guidance window over the demo's right half (both floating, where
//! the test puts them), every click real (the wlr virtual pointer of `examples/wl-pointer`,
//! delivered by sway to whatever surface takes input at that point). After Send, sway's own
//! capture (grim) shows the outline's cyan frame just outside the target's box at the target's
//! place on screen, nothing cyan a pixel further out, and the target's pixels inside exactly as
//! they were, and the guidance window moves off the demo (through sway's IPC); a click at the
//! target's centre reaches the demo through the overlay (its empty input region), the demo moves
//! to its next stage, the outline goes once the guidance window reads that the target changed,
//! saying so in one sentence, and the guidance window comes back to where it was.
//!
//! On a headless KWin the same walk, with the connector's clicks through the desktop portal:
//! KWin moves the guidance window off the demo and back, and each click reaches the demo
//! through the outline.

use std::io::Write as _;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use e2e::display::{Pixels, require};
use e2e::platform::{WAIT, binary};
use e2e::portal_desktop::PortalDesktop;
use e2e::wayland::Compositor;
use serde_json::Value;

use super::connector_wayland::{grim_region, window_content};
use super::desktop_client::{Api, CONSENT, DEMO, PROMPT, Running, wait_for_line};
use super::support::{stdout_lines, temp_dir};

/// What the client says on KDE Plasma while no desktop entry lets KWin give it pixels.
const ALLOW_PIXELS: &str = "KDE Plasma lets msguide-desktop capture a window's pixels only once you allow it: press Allow pixels (or run `msguide-desktop allow-pixels`), or capture again without sharing pixels";

/// What the window says at once where the compositor has no layer shell.
const NO_LAYER_SHELL: &str = "msguide-desktop: This Wayland compositor cannot show a frame above other windows (it has no layer shell), so the target will be framed on the capture in this window instead; sway, Hyprland, river, labwc and KDE Plasma show it on screen";

/// What the window says where the only window list, the accessibility bus, has no session bus
/// to start from.
const NO_SESSION_BUS: &str = "msguide-desktop: No session bus is running, so the window's controls cannot be read: start MSGuide with `msguide start`, which starts one (install it first with `sudo apt install dbus at-spi2-core` if it says dbus-daemon is missing)";

#[test]
fn on_weston_the_window_says_in_one_sentence_that_it_cannot_outline() {
    let weston = Compositor::weston();
    let gui = Running::start({
        let mut command = weston.command(binary("msguide-desktop"));
        command.arg("gui").env_remove("DBUS_SESSION_BUS_ADDRESS");
        command
    });
    let line = wait_for_line(&gui.stderr, "the sentence about the layer shell", |l| {
        l.contains("layer shell")
    });
    assert_eq!(line, NO_LAYER_SHELL);
    // Weston lists no windows to other programs; the accessibility bus, which lists them
    // instead, needs a session bus, and the window says how to get one, never to run inside an
    // X11 session.
    let line = wait_for_line(&gui.stderr, "the sentence about the session bus", |l| {
        l.contains("session bus")
    });
    assert_eq!(line, NO_SESSION_BUS);
    drop(gui);
    // Only KWin needs the desktop entry: elsewhere `allow-pixels` writes nothing and says why.
    let home = temp_dir("weston-allow-pixels");
    let out = weston
        .command(binary("msguide-desktop"))
        .arg("allow-pixels")
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "msguide-desktop: This desktop is not KDE Plasma, whose KWin is the one that needs a desktop entry to share a window's pixels: nothing was written\n"
    );
    assert_eq!(std::fs::read_dir(&home).unwrap().count(), 0);
    std::fs::remove_dir(&home).unwrap();
    drop(weston);
}

/// On weston, which has no layer shell and lists its windows to no other program, the person
/// walks the demo's three steps with the windows listed by the accessibility bus, and each
/// target is framed on the capture inside the guidance window. Weston's own screenshots show
/// nothing cyan before Send, then one cyan frame, hollow, as large as the target's box plus the
/// frame on each side, and nothing cyan once the demo's button was used, when the window says
/// so. Weston's headless backend has no seat, so every button, the guidance window's and the
/// demo's, is pressed through its accessibility action, as a screen reader presses it.
#[test]
fn on_weston_the_target_is_framed_on_the_capture_in_the_guidance_window() {
    let mut weston = Compositor::weston_allowing_screenshots();
    weston.start_session_bus();
    let bus = weston.session_bus().to_owned();
    let api = Api::start(&temp_dir("desktop-weston-walk"));
    let demo = Running::start(weston.command(binary("msguide-demo")));
    wait_for_line(&demo.stdout, "the demo's first stage", |l| l == "stage 0");
    let gui = guide_without_layer_shell(weston.command(binary("msguide-desktop")), &api);
    for (stage, label) in STEPS.iter().enumerate() {
        let press = |label: &str| e2e::accessibility::press(&bus, GUIDE, label);
        press(if stage == 0 {
            "Capture / review"
        } else {
            "Check next step"
        });
        press(CONSENT);
        assert!(cyan(&weston.screenshot()).is_empty(), "cyan before Send");
        press("Send");
        let target = framed_on_capture(&gui, &client_on(&weston), label);
        // Weston's screenshot: one hollow cyan frame, the target's size plus the frame.
        let mut seen = Vec::new();
        wait_until("the frame on the capture", || {
            seen = cyan(&weston.screenshot());
            !seen.is_empty()
        });
        one_frame_around(&seen, target, label);

        // The person uses the target: the frame goes, and the window says why.
        e2e::accessibility::press(&bus, DEMO, label);
        let next = format!("stage {}", stage + 1);
        wait_for_line(&demo.stdout, &next, |l| l == next);
        wait_until("the window saying the target changed", || {
            e2e::accessibility::names(&bus, GUIDE)
                .iter()
                .any(|name| name == TARGET_CHANGED)
        });
        assert!(
            cyan(&weston.screenshot()).is_empty(),
            "cyan after the click"
        );
    }
    drop(gui);
    drop(demo);
    drop(api);
    drop(weston);
}

/// The guidance window for the demo (`command` is `msguide-desktop` on the compositor), once it
/// said that the compositor has no layer shell.
fn guide_without_layer_shell(mut command: Command, api: &Api) -> Running {
    command
        .args(["gui", "--window-title", DEMO, "--prompt", PROMPT])
        .env("MSGUIDE_API_URL", api.url())
        .env("MSGUIDE_LOCAL_TOKEN", &api.token);
    let gui = Running::start(command);
    let line = wait_for_line(&gui.stderr, "the sentence about the layer shell", |l| {
        l.contains("layer shell")
    });
    assert_eq!(line, NO_LAYER_SHELL);
    gui
}

/// The target's size in the line the guidance window prints once it framed `label` on the
/// capture, checked against where the demo's button is in its capture as the client reads it.
fn framed_on_capture(gui: &Running, client: &dyn Fn() -> Command, label: &str) -> (i64, i64) {
    let line = wait_for_line(&gui.stderr, "where the frame is drawn", |l| {
        l.starts_with("outline on the capture in this window at ")
    });
    let (observation, button) = observed(client, DEMO, &[], |l| l == label);
    let side = |name: &str| observation[name].as_i64().unwrap();
    let (width, height) = (side("width"), side("height"));
    let (x, y, w, h) = on_screen((0, 0, width, height), &button["box"]);
    assert_eq!(
        line,
        format!(
            "outline on the capture in this window at x={x} y={y} width={w} height={h} of its {width}x{height}"
        )
    );
    (w, h)
}

/// Where `shot` is exactly the outline's cyan.
fn cyan(shot: &Pixels) -> Vec<(u32, u32)> {
    (0..shot.height)
        .flat_map(|y| (0..shot.width).map(move |x| (x, y)))
        .filter(|&(x, y)| shot.at(x, y) == CYAN)
        .collect()
}

/// That the cyan pixels `seen` are one whole, hollow frame around a target of `(w, h)`: their
/// extent the target's plus the frame on each side, every one on the frame's border, and as
/// many as the border has.
fn one_frame_around(seen: &[(u32, u32)], (w, h): (i64, i64), label: &str) {
    let left = seen.iter().map(|p| p.0).min().unwrap();
    let right = seen.iter().map(|p| p.0).max().unwrap();
    let top = seen.iter().map(|p| p.1).min().unwrap();
    let bottom = seen.iter().map(|p| p.1).max().unwrap();
    let (outer_w, outer_h) = (i64::from(right - left + 1), i64::from(bottom - top + 1));
    assert_eq!(
        (outer_w, outer_h),
        (w + 2 * FRAME, h + 2 * FRAME),
        "the cyan pixels' extent for {label:?}"
    );
    let frame = u32::try_from(FRAME).unwrap();
    let on_border = |&(x, y): &(u32, u32)| {
        x < left + frame || x > right - frame || y < top + frame || y > bottom - frame
    };
    assert!(seen.iter().all(on_border), "cyan inside the frame");
    let ring = 2 * (outer_w + outer_h) * FRAME - 4 * FRAME * FRAME;
    assert_eq!(
        i64::try_from(seen.len()).unwrap(),
        ring,
        "the frame is not whole"
    );
}

/// On a wlroots compositor that says nothing of window geometry (sway without its IPC, as
/// Hyprland, river and labwc are to the client), windows are listed but not placed: the target
/// is framed on the capture in the guidance window, never on the layer shell where the window
/// is not known to be. sway's own capture (grim) shows one hollow cyan frame the target's size
/// plus the frame, and none once the demo's button was used. Buttons are pressed through AT-SPI.
#[test]
fn on_wlroots_without_window_geometry_the_target_is_framed_on_the_capture() {
    require("grim", "grim");
    let mut sway = Compositor::sway_sized(1, (1280, 800));
    sway.start_session_bus();
    let bus = sway.session_bus().to_owned();
    let api = Api::start(&temp_dir("desktop-wlroots-walk"));
    let demo = Running::start(sway.command(binary("msguide-demo")));
    wait_for_line(&demo.stdout, "the demo's first stage", |l| l == "stage 0");
    sway.wait_for_app(DEMO);
    // The client, and its `observe`, without sway's IPC: the window list protocol alone.
    let client = || {
        let mut command = sway.command(binary("msguide-desktop"));
        command.env_remove("SWAYSOCK");
        command
    };
    let mut command = client();
    command
        .args(["gui", "--window-title", DEMO, "--prompt", PROMPT])
        .env("MSGUIDE_API_URL", api.url())
        .env("MSGUIDE_LOCAL_TOKEN", &api.token);
    let gui = Running::start(command);
    sway.wait_for_app(GUIDE);
    place(
        &sway,
        1,
        &[(DEMO, (480, 300), (20, 20)), (GUIDE, (620, 770), (640, 20))],
    );
    let screen = || cyan(&grab(&sway, (0, 0, 1280, 800), 1));
    let label = STEPS[0];
    let press = |window: &str, label: &str| e2e::accessibility::press(&bus, window, label);
    press(GUIDE, "Capture / review");
    press(GUIDE, CONSENT);
    assert!(screen().is_empty(), "cyan before Send");
    press(GUIDE, "Send");
    let target = framed_on_capture(&gui, &client, label);
    let mut seen = Vec::new();
    wait_until("the frame on the capture", || {
        seen = screen();
        !seen.is_empty()
    });
    one_frame_around(&seen, target, label);
    // In the guidance window, not where the demo is.
    let (gx, gy, gw, gh) = window_rect(&sway, GUIDE, 1);
    assert!(
        seen.iter().all(|&(x, y)| {
            let (x, y) = (i64::from(x), i64::from(y));
            (gx..gx + gw).contains(&x) && (gy..gy + gh).contains(&y)
        }),
        "the frame is outside the guidance window"
    );
    press(DEMO, label);
    wait_for_line(&demo.stdout, "the demo's next stage", |l| l == "stage 1");
    wait_until("the window saying the target changed", || {
        e2e::accessibility::names(&bus, GUIDE)
            .iter()
            .any(|name| name == TARGET_CHANGED)
    });
    assert!(screen().is_empty(), "cyan after the click");
    drop(gui);
    drop(demo);
    drop(api);
    drop(sway);
}

/// On GNOME Shell, which has no layer shell either and lists its windows to no other program,
/// the windows come from the accessibility bus too and the target is framed on the capture in
/// the guidance window. The connector's screenshots (GNOME's portal, allowed in its permission
/// store) show nothing cyan before Send, one hollow cyan frame the target's size plus the frame
/// after it, and nothing cyan once the demo's button was used, when the window says so. The
/// buttons are pressed through AT-SPI; one step, as the shell gives ten screenshots a minute.
#[tokio::test]
async fn on_gnome_shell_the_target_is_framed_on_the_capture_in_the_guidance_window() {
    use e2e::platform::Platform;
    use serde_json::json;
    let gnome = PortalDesktop::gnome_shell();
    gnome.screenshots_allowed("yes");
    let platform = Platform::bind().await;
    let _shim = super::connector::ShimIn::start(&gnome.env(), &platform, "gnome-walk", &[]);
    let (mut conn, _) = platform.session(&["computer_use"], |_| {}).await;
    let api = Api::start(&temp_dir("desktop-gnome-walk"));
    let gui = guide_without_layer_shell(
        gnome.command(&binary("msguide-desktop").to_string_lossy()),
        &api,
    );
    // The demo after the guidance window, so it is on top where the person would click it: the
    // shell lets a window that shows nothing stop painting, and the demo with it.
    let demo = Running::start(gnome.command(&binary("msguide-demo").to_string_lossy()));
    wait_for_line(&demo.stdout, "the demo's first stage", |l| l == "stage 0");
    // The shell opens its overview once started, which shows windows shrunk.
    gnome.leave_overview();
    let bus = gnome.bus_address().to_owned();
    // The presses run a bus connection of their own, off this test's runtime.
    let press = |window: &'static str, label: &'static str| {
        let bus = bus.clone();
        tokio::task::spawn_blocking(move || e2e::accessibility::press(&bus, window, label))
    };
    let mut shots = 0;
    let mut screen = async |conn: &mut e2e::platform::Conn| {
        shots += 1;
        let reply = conn
            .call(
                "SCREENSHOT_REQUEST",
                &format!("s{shots}"),
                json!({"format": "png"}),
            )
            .await;
        let (width, height, rgba) = super::connector_wayland::shot_pixels(&reply);

        let rgb = rgba.chunks_exact(4).map(|p| [p[0], p[1], p[2]]).collect();
        cyan(&Pixels { width, height, rgb })
    };
    let label = STEPS[0];
    press(GUIDE, "Capture / review").await.unwrap();
    press(GUIDE, CONSENT).await.unwrap();
    assert!(screen(&mut conn).await.is_empty(), "cyan before Send");
    press(GUIDE, "Send").await.unwrap();
    let client = || gnome.command(&binary("msguide-desktop").to_string_lossy());
    let target = framed_on_capture(&gui, &client, label);
    // The window paints a moment after it printed; the shell's screenshots are seconds apart.
    let deadline = Instant::now() + WAIT;
    let seen = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let seen = screen(&mut conn).await;
        if !seen.is_empty() {
            break seen;
        }
        assert!(Instant::now() < deadline, "no frame on the capture");
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    one_frame_around(&seen, target, label);

    press(DEMO, label).await.unwrap();
    wait_for_line(&demo.stdout, "the demo's next stage", |l| l == "stage 1");
    let names = {
        let bus = bus.clone();
        move || e2e::accessibility::names(&bus, GUIDE)
    };
    let deadline = Instant::now() + WAIT;
    while !tokio::task::spawn_blocking(names.clone())
        .await
        .unwrap()
        .iter()
        .any(|name| name == TARGET_CHANGED)
    {
        assert!(
            Instant::now() < deadline,
            "the window did not say the target changed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(screen(&mut conn).await.is_empty(), "cyan after the click");
    drop(gui);
    drop(demo);
    drop(api);
}

/// On KWin (KDE), which lists no windows to other programs through a protocol, `observe`
/// finds the window through KWin's scripting, and its elements (AT-SPI) are where the witness
/// says they are, relative to the window's client area that KWin gives.
/// Its pixels are refused in a sentence until a desktop entry names the client; the guidance
/// window's `Allow pixels` (pressed through AT-SPI) writes that entry and captures again with
/// the pixels, `allow-pixels` then finds it there, and the pixels are the window's client area,
/// with the witness's red area where it is.
#[test]
fn on_kwin_observe_finds_the_window_through_kwins_scripting() {
    let kde = PortalDesktop::kde();
    let witness = e2e::witness::Witness::start_with(
        |python| kde.command(python.to_str().expect("a UTF-8 path")),
        "Witness K",
    );
    let out = kde
        .command(&binary("msguide-desktop").to_string_lossy())
        .args(["observe", "--window-title", "Witness K"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let observed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(observed["application"], "Witness K", "{observed}");
    // The maximised window's client area: the output below KWin's title bar.
    let (width, height) = (
        observed["width"].as_f64().unwrap(),
        observed["height"].as_f64().unwrap(),
    );
    assert!(
        width == 1280.0 && (720.0..780.0).contains(&height),
        "{observed}"
    );
    let button = observed["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["label"] == "Press me")
        .unwrap_or_else(|| panic!("no button observed: {observed}"));
    let observed_px: Vec<f64> = button["box"]
        .as_array()
        .unwrap()
        .iter()
        .zip([width, height, width, height])
        .map(|(v, side)| v.as_f64().unwrap() * side)
        .collect();
    let expected = &witness.ready["button"];
    for (got, want) in observed_px.iter().zip(expected.as_array().unwrap()) {
        assert!(
            (got - want.as_f64().unwrap()).abs() <= 1.0,
            "observed {observed_px:?}, the witness says {expected}"
        );
    }

    // Pixels: refused in words, with a button that writes the desktop entry KWin asks for.
    let client = binary("msguide-desktop");
    let observe_pixels = || {
        kde.command(&client.to_string_lossy())
            .args(["observe", "--window-title", "Witness K", "--share-pixels"])
            .output()
            .unwrap()
    };
    let refused = observe_pixels();
    assert!(!refused.status.success());
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr).trim_end(),
        format!("msguide-desktop: {ALLOW_PIXELS}")
    );
    let entry = kde
        .dir()
        .join(".local/share/applications/msguide-desktop.desktop");
    assert!(!entry.exists());
    let gui = Running::start({
        let mut command = kde.command(&client.to_string_lossy());
        command.args(["gui", "--window-title", "Witness K"]);
        command
    });
    let bus = kde.bus_address().to_owned();
    let press = |label: &str| e2e::accessibility::press(&bus, GUIDE, label);
    press("Share the window's pixels too (off by default)");
    press("Capture / review");
    wait_for_line(&gui.stderr, "the refusal", |l| l.contains("Allow pixels"));
    press("Allow pixels");
    // The capture again, with the window's pixels in the review.
    wait_until("the review of a capture with pixels", || {
        let names = e2e::accessibility::names(&bus, GUIDE);
        names.iter().any(|n| n == "Application: Witness K")
            && !names.iter().any(|n| n.starts_with("No pixels"))
    });
    let written = std::fs::read_to_string(&entry).unwrap();
    assert!(
        written.contains(&format!("\nExec=\"{}\" gui\n", client.display()))
            && written.contains("\nNoDisplay=true\n")
            && written.contains("\nX-KDE-DBUS-Restricted-Interfaces=org.kde.KWin.ScreenShot2\n"),
        "{written}"
    );
    drop(gui);
    // The command says the same entry is there, and writes nothing.
    let again = kde
        .command(&client.to_string_lossy())
        .arg("allow-pixels")
        .output()
        .unwrap();
    assert!(again.status.success(), "{again:?}");
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        "KDE Plasma already lets msguide-desktop capture a window's pixels\n"
    );
    assert_eq!(std::fs::read_to_string(&entry).unwrap(), written);
    let shared = observe_pixels();
    assert!(shared.status.success(), "{shared:?}");
    let observed: Value = serde_json::from_slice(&shared.stdout).unwrap();
    let png = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        observed["imageBase64"]
            .as_str()
            .expect("the window's pixels"),
    )
    .unwrap();
    let (w, h, pixels) = super::connector_wayland::decode_png(&png);
    assert_eq!((f64::from(w), f64::from(h)), (width, height));
    let [ax, ay, aw, ah] = witness.area;
    let at = usize::try_from(((ay + ah / 2) * i64::from(w) + ax + aw / 2) * 4).unwrap();
    assert_eq!(pixels[at..at + 4], [255, 0, 0, 255]);
}

/// A window's app id, size and position, in sway's logical pixels.
type Placed<'a> = (&'a str, (i64, i64), (i64, i64));

/// Floats each `(app_id, size, position)` window (sway's logical pixels) and asks again until
/// sway shows every one there, at the output's integer `scale`: a client that commits a frame
/// sized for an earlier configure keeps that size when floated, and on a loaded machine one
/// request can land before the client's first frame.
fn place(sway: &Compositor, scale: i64, windows: &[Placed<'_>]) {
    let deadline = Instant::now() + WAIT;
    loop {
        for (app_id, (w, h), (x, y)) in windows {
            let placed = sway
                .command("swaymsg")
                .arg(format!(
                    "[app_id=\"^{app_id}$\"] floating enable, resize set {w} {h}, move position {x} {y}"
                ))
                .output()
                .unwrap();
            assert!(placed.status.success(), "{placed:?}");
        }
        std::thread::sleep(Duration::from_millis(500));
        let misplaced: Vec<(&str, Rect)> = windows
            .iter()
            .map(|(app_id, _, _)| (*app_id, window_rect(sway, app_id, scale)))
            .zip(windows)
            .filter(|((_, at), (_, (w, h), (x, y)))| {
                *at != (x * scale, y * scale, w * scale, h * scale)
            })
            .map(|(shown, _)| shown)
            .collect();
        if misplaced.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "windows not where they were put: {misplaced:?}"
        );
    }
}

/// `msguide-desktop observe` of the demo on `sway`, with its pixels, until it lists `label`.
fn observe_until(sway: &Compositor, label: &str) -> Value {
    observed(&client_on(sway), DEMO, &["--share-pixels"], |l| l == label).0
}

#[test]
fn on_sway_at_scale_2_the_demos_elements_are_found_where_sway_put_its_window() {
    let mut sway = Compositor::sway(2);
    sway.start_session_bus();
    let demo = Running::start(sway.command(binary("msguide-demo")));
    wait_for_line(&demo.stdout, "the demo's first stage", |l| l == "stage 0");
    sway.wait_for_app(DEMO);
    place(&sway, 2, &[(DEMO, (480, 240), (200, 150))]);
    // AccessKit reports the window at 0, 0 on Wayland: without moving its boxes onto the
    // window (at 400, 300 physical), every element fell outside it and none was listed.
    let observation = observe_until(&sway, "View logs");
    assert_eq!(
        (
            observation["width"].as_u64(),
            observation["height"].as_u64()
        ),
        (Some(960), Some(480)),
        "the window's content in physical pixels"
    );
    let button = observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["label"] == "View logs")
        .unwrap();
    let b: Vec<f64> = (0..4).map(|i| button["box"][i].as_f64().unwrap()).collect();
    // egui's 8-point panel margin and the heading above: (16, about 112) physical in the
    // window, as at scale 1 it is (8, 56).
    let (x, y) = ((b[0] * 960.0).round(), (b[1] * 480.0).round());
    assert!(x == 16.0 && (108.0..=116.0).contains(&y), "{button}");
    assert!(
        observation["imageBase64"]
            .as_str()
            .is_some_and(|i| !i.is_empty()),
        "the window's pixels, cropped from the output's capture"
    );
    drop(demo);
    drop(sway);
}

/// The frame's width, just outside the target's box.
const FRAME: i64 = 3;
/// The outline's colour.
const CYAN: [u8; 3] = [0, 255, 255];
/// The demo's steps: the button the demo provider points at in each stage.
const STEPS: [&str; 3] = ["View logs", "Open troubleshooting", "Mark resolved"];
/// The guidance window's title and app id.
const GUIDE: &str = "MSGuide";
/// What the guidance window says once the target changed after the click.
const TARGET_CHANGED: &str = "The outlined element changed, most likely because you used it: press Check next step to see what comes next.";
/// How soon after the click the outline must be gone: the guidance window reads the demo's
/// controls twice a second, each read taking well under a second even on a loaded machine.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// A rectangle in display-global physical pixels: x, y, width, height.
type Rect = (i64, i64, i64, i64);

/// A real pointer on the compositor: `examples/wl-pointer`, stopped when dropped.
struct Pointer {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: Receiver<String>,
}

impl Pointer {
    /// Starts the pointer and creates its device with a first move to `at`.
    fn start(sway: &Compositor, at: (i64, i64)) -> Self {
        let mut child = sway
            .command(binary("examples/wl-pointer"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start wl-pointer");
        let answers = stdout_lines(child.stdout.take().unwrap());
        let mut pointer = Self {
            stdin: child.stdin.take(),
            child,
            answers,
        };
        pointer.send("move", at);
        pointer
    }

    fn send(&mut self, verb: &str, (x, y): (i64, i64)) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{verb} {x} {y}").unwrap();
        stdin.flush().unwrap();
        let answer = wait_for_line(&self.answers, "the pointer's answer", |_| true);
        assert_eq!(answer, "done", "{verb} at ({x}, {y})");
    }

    /// A left click at `at`.
    fn click(&mut self, at: (i64, i64)) {
        self.send("click", at);
    }
}

impl Drop for Pointer {
    fn drop(&mut self) {
        // The end of its stdin ends it.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(3);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `done` until it holds, failing with `what` after [`WAIT`].
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "waited {WAIT:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The window with `app_id` on screen, as sway placed it (its content, physical pixels).
fn window_rect(sway: &Compositor, app_id: &str, scale: i64) -> Rect {
    let ([x, y, w, h], _) = window_content(sway, app_id);
    (x * scale, y * scale, w * scale, h * scale)
}

/// sway's own capture (grim) of `rect` on an output at integer `scale`: the logical rectangle
/// around it, cut to its physical pixels.
fn grab(sway: &Compositor, (x, y, w, h): Rect, scale: i64) -> Pixels {
    let (left, top) = (x.div_euclid(scale), y.div_euclid(scale));
    let right = (x + w + scale - 1).div_euclid(scale);
    let bottom = (y + h + scale - 1).div_euclid(scale);
    let (width, _, rgba) = grim_region(sway, [left, top, right - left, bottom - top]);
    let (dx, dy) = (x - left * scale, y - top * scale);
    let width = i64::from(width);
    let rgb = (0..h)
        .flat_map(|row| (0..w).map(move |col| (col, row)))
        .map(|(col, row)| {
            let at = usize::try_from(((dy + row) * width + dx + col) * 4).unwrap();
            [rgba[at], rgba[at + 1], rgba[at + 2]]
        })
        .collect();
    Pixels {
        width: u32::try_from(w).unwrap(),
        height: u32::try_from(h).unwrap(),
        rgb,
    }
}

/// The screen in `rect` once two captures 100 ms apart agree.
fn settled(sway: &Compositor, rect: Rect, scale: i64) -> Pixels {
    let mut last = grab(sway, rect, scale);
    wait_until("the screen settled", || {
        std::thread::sleep(Duration::from_millis(100));
        let now = grab(sway, rect, scale);
        let same = now == last;
        last = now;
        same
    });
    last
}

/// The element labelled `label` in a fresh observation of the window `title`, waiting for it.
fn element(client: &dyn Fn() -> Command, title: &str, label: impl Fn(&str) -> bool) -> Value {
    observed(client, title, &[], label).1
}

/// `msguide-desktop` on `sway`, for [`element`] and [`observed`].
fn client_on(sway: &Compositor) -> impl Fn() -> Command + '_ {
    || sway.command(binary("msguide-desktop"))
}

/// `msguide-desktop observe` of the window `title` with `extra` flags, again until it lists
/// an element whose label passes `label`: the observation and that element.
fn observed(
    client: &dyn Fn() -> Command,
    title: &str,
    extra: &[&str],
    label: impl Fn(&str) -> bool,
) -> (Value, Value) {
    let deadline = Instant::now() + WAIT;
    loop {
        let out = client()
            .args(["observe", "--window-title", title])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if out.status.success() {
            let observation: Value = serde_json::from_slice(&out.stdout).unwrap();
            let found = observation["elements"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["label"].as_str().is_some_and(&label))
                .cloned();
            if let Some(found) = found {
                return (observation, found);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no such element in {title:?} within {WAIT:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A normalised box of `window` on screen, rounded as the client places it.
fn on_screen((x, y, w, h): Rect, bounds: &Value) -> Rect {
    let b: Vec<f64> = (0..4).map(|i| bounds[i].as_f64().unwrap()).collect();
    let px = |fraction: f64, side: i64| (fraction * side as f64).round() as i64;
    (x + px(b[0], w), y + px(b[1], h), px(b[2], w), px(b[3], h))
}

fn centre((x, y, w, h): Rect) -> (i64, i64) {
    (x + w / 2, y + h / 2)
}

/// Clicks the guidance window's element `label`, which must be enabled.
fn press(sway: &Compositor, pointer: &mut Pointer, scale: i64, label: &str) {
    let found = element(&client_on(sway), GUIDE, |l| l == label);
    assert_eq!(found["isEnabled"], true, "{label:?} is disabled");
    let window = window_rect(sway, GUIDE, scale);
    pointer.click(centre(on_screen(window, &found["box"])));
}

/// Whether two rectangles share a pixel.
fn overlap((ax, ay, aw, ah): Rect, (bx, by, bw, bh): Rect) -> bool {
    ax < bx + bw && bx < ax + aw && ay < by + bh && by < ay + ah
}

/// `rect` grown by `by` on every side.
fn grown((x, y, w, h): Rect, by: i64) -> Rect {
    (x - by, y - by, w + 2 * by, h + 2 * by)
}

/// Whether the ring of the frame and one pixel around it shows the outline, `before` and
/// `after` Send: the frame cyan on its whole border, nothing cyan a pixel further out, and
/// through it the target exactly as it was (which shows something to compare); else what is
/// seen instead, in words.
fn outline_shown(before: &Pixels, after: &Pixels) -> Result<(), String> {
    let inset = u32::try_from(FRAME + 1).unwrap();
    let was = before.inside(inset);
    assert!(
        was.rgb.iter().any(|p| *p != was.rgb[0]),
        "the target showed nothing to compare"
    );
    let framed = after.inside(1).border(3).all(|(_, c)| c == CYAN);
    let outside = after.border(1).filter(|(_, c)| *c == CYAN).count();
    let is = after.inside(inset);
    let changed = was.rgb.iter().zip(&is.rgb).filter(|(a, b)| a != b).count();
    if framed && outside == 0 && changed == 0 {
        return Ok(());
    }
    Err(format!(
        "frame all cyan {framed}, {outside} cyan pixels outside it, {changed} of the target's {} pixels changed",
        was.rgb.len()
    ))
}

#[test]
fn on_sway_the_outline_frames_the_target_and_a_click_reaches_it_through_the_overlay() {
    walk_the_demo(1);
}

#[test]
fn on_sway_at_scale_2_the_outline_frames_the_target_and_a_click_reaches_it_through_the_overlay() {
    walk_the_demo(2);
}

/// The demo's three steps with the guidance window on a headless sway whose output is
/// 1280×800 logical pixels at integer `scale`.
fn walk_the_demo(scale: i64) {
    require("grim", "grim");
    let side = |logical: u32| logical * u32::try_from(scale).unwrap();
    let mut sway = Compositor::sway_sized(u32::try_from(scale).unwrap(), (side(1280), side(800)));
    sway.start_session_bus();
    let api = Api::start(&temp_dir("desktop-wayland-walk"));
    let demo = Running::start(sway.command(binary("msguide-demo")));
    wait_for_line(&demo.stdout, "the demo's first stage", |l| l == "stage 0");
    sway.wait_for_app(DEMO);
    let gui = Running::start({
        let mut command = sway.command(binary("msguide-desktop"));
        command
            .args(["gui", "--window-title", DEMO, "--prompt", PROMPT])
            .env("MSGUIDE_API_URL", api.url())
            .env("MSGUIDE_LOCAL_TOKEN", &api.token);
        command
    });
    sway.wait_for_app(GUIDE);
    // Neither at the output's corner, so the frame must land where the target is; the guidance
    // window over the demo's right half (the targets are on its left), with room beside the demo
    // to move to.
    place(
        &sway,
        scale,
        &[
            (DEMO, (480, 300), (60, 140)),
            (GUIDE, (600, 780), (300, 10)),
        ],
    );
    let home = window_rect(&sway, GUIDE, scale);
    assert!(overlap(home, window_rect(&sway, DEMO, scale)));
    // Sway's seat has no pointer until this one is made; it starts away from both windows.
    let mut pointer = Pointer::start(&sway, (620 * scale, 790 * scale));

    let mut gone = Vec::new();
    for (stage, label) in STEPS.iter().enumerate() {
        press(
            &sway,
            &mut pointer,
            scale,
            if stage == 0 {
                "Capture / review"
            } else {
                "Check next step"
            },
        );
        // The review of this stage, its button's box in window pixels on one line.
        let listed = format!("button \"{label}\" at ");
        element(&client_on(&sway), GUIDE, |l| {
            l.starts_with(&listed) && l.ends_with(" px")
        });
        press(&sway, &mut pointer, scale, CONSENT);

        let demo_at = window_rect(&sway, DEMO, scale);
        let target = on_screen(
            demo_at,
            &element(&client_on(&sway), DEMO, |l| l == *label)["box"],
        );
        // The frame and one pixel around it, as the person sees it before the outline.
        let ring = grown(target, FRAME + 1);
        let before = settled(&sway, ring, scale);
        press(&sway, &mut pointer, scale, "Send");

        // grim: the outline as `outline_shown` says; polled until it shows or the time is up.
        let deadline = Instant::now() + WAIT;
        while let Err(seen) = outline_shown(&before, &grab(&sway, ring, scale)) {
            assert!(
                Instant::now() < deadline,
                "after Send on {label:?} at {target:?}: {seen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // The guidance window moves off the demo window, and so off the target.
        wait_until("the guidance window off the demo window", || {
            !overlap(window_rect(&sway, GUIDE, scale), demo_at)
        });

        // A real click at the target's centre: through the overlay, the demo takes it.
        pointer.click(centre(target));
        let clicked = Instant::now();
        let next = format!("stage {}", stage + 1);
        wait_for_line(&demo.stdout, &next, |l| l == next);
        let frame_area = grown(target, FRAME);
        wait_until("the outline gone after the click", || {
            grab(&sway, frame_area, scale)
                .border(3)
                .all(|(_, c)| c != CYAN)
        });
        gone.push(clicked.elapsed());
        element(&client_on(&sway), GUIDE, |l| l == TARGET_CHANGED);
        // The guidance window comes back to where the person put it.
        wait_until("the guidance window back", || {
            window_rect(&sway, GUIDE, scale) == home
        });
    }
    gone.sort_unstable();
    eprintln!(
        "desktop_wayland (sway, scale {scale}): outline gone {gone:?} after the click (sorted)"
    );
    assert!(gone[1] < GONE_WITHIN, "median {:?}: {gone:?}", gone[1]);
    drop(pointer);
    drop(gui);
    drop(demo);
    drop(api);
    drop(sway);
}

/// On KDE the person walks the demo's three steps with the guidance window over the demo's
/// right half, every click real: the connector's, through the desktop portal, which KWin
/// delivers to whatever surface takes input at that point. After Send the guidance window moves
/// off the demo (KWin moves it, through its scripting), a click at the target's centre reaches
/// the demo through the outline, and the guidance window comes back once the target changed.
/// KWin's windows are read through the connector's window list (their client areas) and
/// placed by a KWin script of the test's own. The connector's screenshots (KWin's own capture,
/// allowed by a desktop entry) show the outline's cyan frame just outside the target's box,
/// nothing cyan a pixel further out, and the target's pixels inside exactly as they were.
#[tokio::test]
async fn on_kwin_the_guidance_window_keeps_off_the_target_and_a_click_reaches_it() {
    use e2e::platform::Platform;
    use serde_json::json;
    let kde = PortalDesktop::kde();
    super::connector_kde::let_kwin_take_the_built_shims_screenshots(&kde);
    let platform = Platform::bind().await;
    let _shim = super::connector::ShimIn::start(&kde.env(), &platform, "kde-walk", &[]);
    let (mut conn, _) = platform.session(&["computer_use"], |_| {}).await;
    // The headless seat has a pointer once the portal's session makes one (a person's desktop
    // always has one), and a client takes the seat's pointer as it starts: the session first.
    kde.act(
        &mut conn,
        "m0",
        json!({"action": "mouse_move", "coordinate": [1279, 799]}),
    )
    .await;
    let api = Api::start(&temp_dir("desktop-kwin-walk"));
    let demo = Running::start(kde.command(&binary("msguide-demo").to_string_lossy()));
    wait_for_line(&demo.stdout, "the demo's first stage", |l| l == "stage 0");
    let gui = Running::start({
        let mut command = kde.command(&binary("msguide-desktop").to_string_lossy());
        command
            .args([
                "--verbose",
                "gui",
                "--window-title",
                DEMO,
                "--prompt",
                PROMPT,
            ])
            .env("MSGUIDE_API_URL", api.url())
            .env("MSGUIDE_LOCAL_TOKEN", &api.token);
        command
    });
    let client = || kde.command(&binary("msguide-desktop").to_string_lossy());
    element(&client, GUIDE, |l| l == "Capture / review");
    // KWin maximises new windows here: the demo goes to the left, the guidance window over its
    // right half (the targets are on its left), with room beside the demo to move to.
    let placed = kde.kwin_script(&format!(
        r#"
        var all = workspace.clientList();
        var want = {{{DEMO:?}: [60, 140, 480, 340], {GUIDE:?}: [300, 10, 600, 780]}};
        var done = 0;
        for (var i = 0; i < all.length; i++) {{
          var r = want[all[i].caption];
          if (!r) continue;
          all[i].setMaximize(false, false);
          all[i].frameGeometry = {{x: r[0], y: r[1], width: r[2], height: r[3]}};
          done++;
        }}
        report(done);
        "#
    ));
    assert_eq!(placed, "2", "KWin placed {placed} of the two windows");
    // The client areas follow once each client has drawn at its new size.
    let deadline = Instant::now() + WAIT;
    loop {
        let (demo, guide) = (
            window_on_kwin(&mut conn, DEMO).await,
            window_on_kwin(&mut conn, GUIDE).await,
        );
        if (demo.0, demo.2, guide.0, guide.2) == (60, 480, 300, 600) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "KWin did not place the windows: {demo:?}, {guide:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let home = window_on_kwin(&mut conn, GUIDE).await;
    assert!(
        overlap(home, window_on_kwin(&mut conn, DEMO).await),
        "{home:?}"
    );

    for (stage, label) in STEPS.iter().enumerate() {
        let button = if stage == 0 {
            "Capture / review"
        } else {
            "Check next step"
        };
        press_on_kwin(&kde, &mut conn, &client, button).await;
        let listed = format!("button \"{label}\" at ");
        element(&client, GUIDE, |l| {
            l.starts_with(&listed) && l.ends_with(" px")
        });
        press_on_kwin(&kde, &mut conn, &client, CONSENT).await;
        let demo_at = window_on_kwin(&mut conn, DEMO).await;
        let target = on_screen(demo_at, &element(&client, DEMO, |l| l == *label)["box"]);
        // The frame and one pixel around it, as the person sees it before the outline.
        let ring = grown(target, FRAME + 1);
        let before = shot_on_kwin(&mut conn, ring).await;
        press_on_kwin(&kde, &mut conn, &client, "Send").await;

        // KWin's capture: the outline as `outline_shown` says.
        let deadline = Instant::now() + WAIT;
        while let Err(seen) = outline_shown(&before, &shot_on_kwin(&mut conn, ring).await) {
            assert!(
                Instant::now() < deadline,
                "after Send on {label:?} at {target:?}: {seen}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }

        // The guidance window moves off the demo window, and so off the target.
        let deadline = Instant::now() + WAIT;
        while overlap(window_on_kwin(&mut conn, GUIDE).await, demo_at) {
            assert!(
                Instant::now() < deadline,
                "the guidance window stayed on the demo; it said: {:?}",
                gui.stderr.try_iter().collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // A click at the target's centre: through the outline, the demo takes it.
        let (x, y) = centre(target);
        kde.act(
            &mut conn,
            &format!("c{stage}"),
            json!({"action": "left_click", "coordinate": [x, y]}),
        )
        .await;
        let next = format!("stage {}", stage + 1);
        wait_for_line(&demo.stdout, &next, |l| l == next);
        element(&client, GUIDE, |l| l == TARGET_CHANGED);
        // The guidance window comes back to where the person put it.
        let deadline = Instant::now() + WAIT;
        while window_on_kwin(&mut conn, GUIDE).await != home {
            assert!(
                Instant::now() < deadline,
                "the guidance window did not come back to {home:?}: {:?}; it said: {:?}",
                window_on_kwin(&mut conn, GUIDE).await,
                gui.stderr.try_iter().collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The screen in `(x, y, w, h)` through the connector's screenshot on KWin, waiting out the
/// shim's ten screenshots a minute.
async fn shot_on_kwin(conn: &mut e2e::platform::Conn, (x, y, w, h): Rect) -> Pixels {
    loop {
        let shot = conn
            .call(
                "SCREENSHOT_REQUEST",
                "ring",
                serde_json::json!({"format": "png", "region": [x, y, x + w, y + h]}),
            )
            .await;
        if shot["type"] == "ERROR" && shot["payload"]["code"] == "SHIM_OVERLOADED" {
            tokio::time::sleep(Duration::from_secs(3)).await;
            continue;
        }
        let (width, height, rgba) = super::connector_computer::decode_png(&shot);
        assert_eq!(
            (i64::from(width), i64::from(height)),
            (w, h),
            "{}",
            shot["payload"]["meta"]
        );
        let rgb = rgba.chunks(4).map(|p| [p[0], p[1], p[2]]).collect();
        return Pixels { width, height, rgb };
    }
}

/// The client area of the window `title`, from the connector's window list on KWin.
async fn window_on_kwin(conn: &mut e2e::platform::Conn, title: &str) -> Rect {
    let found = super::connector_wayland::listed_window(conn, "title", title).await;
    let b: Vec<i64> = serde_json::from_value(found["bounds"].clone()).unwrap();
    (b[0], b[1], b[2] - b[0], b[3] - b[1])
}

/// Clicks the guidance window's element `label` through the connector, on KWin.
async fn press_on_kwin(
    kde: &PortalDesktop,
    conn: &mut e2e::platform::Conn,
    client: &dyn Fn() -> Command,
    label: &str,
) {
    let found = element(client, GUIDE, |l| l == label);
    assert_eq!(found["isEnabled"], true, "{label:?} is disabled");
    let (x, y) = centre(on_screen(window_on_kwin(conn, GUIDE).await, &found["box"]));
    kde.act(
        conn,
        "press",
        serde_json::json!({"action": "left_click", "coordinate": [x, y]}),
    )
    .await;
}
