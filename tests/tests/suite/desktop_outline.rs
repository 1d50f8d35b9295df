//! What a person sees of the outline, on a 1280×800 desktop with openbox, without a compositor
//! (where an opaque outline hid its target) and with one (picom): the guidance window
//! (`msguide-desktop gui`) and the demo window open side by side; the person drags the
//! guidance window over the demo and walks the demo's three steps. For each, after Send the
//! target's pixels show through the frame exactly as they were before, the frame is the
//! outline's cyan on its whole border, the guidance window has moved off the demo window, a
//! real click on the target removes the outline within a second (the median of the three
//! steps, polled), and the guidance window comes back to where the person put it.
//!
//! With `E2E_SHOTS=<folder>` the whole screen before and after each Send is also saved there as
//! PNGs (`<case>-start.png`, `<case>-step<N>-before.png`, `…-after.png`), for a person to look at.

use std::time::{Duration, Instant};

use e2e::{
    display::{Desktop, Pixels, require},
    platform::{WAIT, binary},
};
use serde_json::Value;

use super::{
    desktop_client::{
        Api, CONSENT, DEMO, Running, click, demo_window, element, press_in_window, try_geometry,
        wait_for_line, wait_for_window, window_geometry,
    },
    support::temp_dir,
};

/// The frame's width, just outside the target's box.
const FRAME: i64 = 3;
/// The outline's colour.
const CYAN: [u8; 3] = [0, 255, 255];
/// How soon after the click the outline must be gone (the median of the steps).
const GONE_WITHIN: Duration = Duration::from_secs(1);
/// The demo's steps: the button the demo provider points at in each stage.
const STEPS: [&str; 3] = ["View logs", "Open troubleshooting", "Mark resolved"];
/// What the guidance window says once the target was clicked.
const STEP_TAKEN: &str =
    "You used the outlined element: press Check next step to see what comes next.";

/// A rectangle on screen: x, y, width, height.
type Rect = (i64, i64, i64, i64);

fn overlap((ax, ay, aw, ah): Rect, (bx, by, bw, bh): Rect) -> bool {
    ax < bx + bw && bx < ax + aw && ay < by + bh && by < ay + ah
}

/// A window's whole frame on screen (its client area grown by the window manager's
/// `_NET_FRAME_EXTENTS`).
fn frame(desktop: &Desktop, title: &str) -> Rect {
    let (x, y, w, h) = window_geometry(desktop, title);
    let out = desktop
        .command("xprop")
        .args(["-name", title, "_NET_FRAME_EXTENTS"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let extents: Vec<i64> = text
        .split('=')
        .nth(1)
        .unwrap_or_else(|| panic!("no frame extents for {title:?}: {text}"))
        .split(',')
        .map(|v| v.trim().parse().unwrap())
        .collect();
    let [left, right, top, bottom] = extents[..] else {
        panic!("{text}")
    };
    (x - left, y - top, w + left + right, h + top + bottom)
}

/// Polls `done` until it holds, failing with `what` after [`WAIT`].
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The demo element's box on screen, as the client places it (the window's client area and
/// the box's fractions, rounded).
fn on_screen(desktop: &Desktop, bounds: &Value) -> Rect {
    let (x, y, w, h) = window_geometry(desktop, DEMO);
    let b: Vec<f64> = (0..4).map(|i| bounds[i].as_f64().unwrap()).collect();
    let px = |fraction: f64, side: i64| (fraction * side as f64).round() as i64;
    (x + px(b[0], w), y + px(b[1], h), px(b[2], w), px(b[3], h))
}

fn grab(desktop: &Desktop, (x, y, w, h): Rect) -> Pixels {
    desktop.grab(x, y, u32::try_from(w).unwrap(), u32::try_from(h).unwrap())
}

/// The screen in `rect` once two reads 100 ms apart agree (a window just raised has repainted).
fn settled(desktop: &Desktop, rect: Rect) -> Pixels {
    let mut last = grab(desktop, rect);
    let deadline = Instant::now() + WAIT;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = grab(desktop, rect);
        if now == last {
            return now;
        }
        assert!(Instant::now() < deadline, "the screen kept changing");
        last = now;
    }
}

/// With `E2E_SHOTS` set, saves the whole screen as `<E2E_SHOTS>/<name>.png`.
fn shoot(desktop: &Desktop, name: &str) {
    let Some(folder) = std::env::var_os("E2E_SHOTS") else {
        return;
    };
    let screen = grab(desktop, (0, 0, 1280, 800));
    std::fs::create_dir_all(&folder).unwrap();
    let file =
        std::fs::File::create(std::path::Path::new(&folder).join(format!("{name}.png"))).unwrap();
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), screen.width, screen.height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let bytes: Vec<u8> = screen.rgb.iter().flatten().copied().collect();
    encoder
        .write_header()
        .unwrap()
        .write_image_data(&bytes)
        .unwrap();
}

fn walk_the_demo(tag: &str, compositor: bool) {
    require("xdotool", "xdotool");
    let mut desktop = Desktop::with_size(1280, 800);
    if compositor {
        desktop.start_compositor();
    }
    let desktop = &desktop;
    let api = Api::start(&temp_dir(tag));
    let demo = Running::start(desktop.command(binary("msguide-demo")));
    wait_for_line(&demo.stdout, "the demo's first stage", |l| l == "stage 0");
    wait_for_window(desktop, DEMO);
    let _gui = demo_window(desktop, &api.url(), &api.token);
    wait_for_window(desktop, "MSGuide");

    // At start neither window covers the other, and both are wholly on the screen.
    let screen = (0, 0, 1280, 800);
    let started = |title: &str| {
        let rect = frame(desktop, title);
        let (x, y, w, h) = rect;
        (x >= 0 && y >= 0 && x + w <= screen.2 && y + h <= screen.3).then_some(rect)
    };
    let mut demo_at = None;
    let mut gui_at = None;
    wait_until(
        "the guidance window at the top right, beside the demo",
        || {
            demo_at = started(DEMO);
            gui_at = started("MSGuide");
            matches!((demo_at, gui_at), (Some(d), Some(g)) if !overlap(d, g))
        },
    );
    shoot(desktop, &format!("{tag}-start"));

    // The person puts the guidance window over the demo window.
    let moved = desktop
        .command("xdotool")
        .args(["search", "--name", "^MSGuide$", "windowmove", "100", "40"])
        .status()
        .unwrap();
    assert!(moved.success());
    let demo_frame = frame(desktop, DEMO);
    wait_until("the guidance window over the demo", || {
        overlap(frame(desktop, "MSGuide"), demo_frame)
    });
    let home = frame(desktop, "MSGuide");

    let mut gone = Vec::new();
    for (stage, label) in STEPS.iter().enumerate() {
        press_in_window(
            desktop,
            if stage == 0 {
                "Capture / review"
            } else {
                "Check next step"
            },
        );
        // The review of this stage, its button's box in window pixels on one line.
        let listed = format!("button \"{label}\" at ");
        wait_until("the review of the stage", || {
            wait_for_window(desktop, "MSGuide")["elements"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| {
                    e["label"]
                        .as_str()
                        .is_some_and(|l| l.starts_with(&listed) && l.ends_with(" px"))
                })
        });
        press_in_window(desktop, CONSENT);

        // The target as the person sees it before the outline: the guidance window, back
        // where the person put it, may cover it, so the demo window is raised first (Send
        // stays in sight below it), and the screen read once it has settled.
        let target = on_screen(desktop, &element(desktop, DEMO, label)["box"]);
        let (tx, ty, tw, th) = target;
        let around = (tx - FRAME, ty - FRAME, tw + 2 * FRAME, th + 2 * FRAME);
        let raised = desktop
            .command("xdotool")
            .args(["search", "--name", "^MSGuide Demo$", "windowraise"])
            .status()
            .unwrap();
        assert!(raised.success());
        let before = settled(desktop, around);
        shoot(desktop, &format!("{tag}-step{}-before", stage + 1));
        press_in_window(desktop, "Send");

        // The frame lies just outside the target's box.
        let mut outline = None;
        wait_until("the outline", || {
            outline = try_geometry(desktop, "MSGuide outline");
            outline.is_some()
        });
        assert_eq!(outline, Some(around), "the outline is not around {label:?}");
        // What a person sees: the frame in cyan on its whole border (a compositor paints it a
        // moment after it is mapped), and through it the target exactly as it was.
        // The guidance window, raised by the click on Send, moves aside a moment later and
        // the demo repaints what it uncovers, so the screen is read until it shows the target
        // or the time is up.
        let inside = u32::try_from(FRAME).unwrap();
        let was = before.inside(inside);
        let deadline = Instant::now() + WAIT;
        let changed = loop {
            let after = grab(desktop, around);
            let is = after.inside(inside);
            let changed = was.rgb.iter().zip(&is.rgb).filter(|(a, b)| a != b).count();
            let framed = after.border(inside).all(|(_, colour)| colour == CYAN);
            if (framed && changed == 0) || Instant::now() > deadline {
                assert!(framed, "the frame around {label:?} is not all cyan");
                break changed;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(
            changed,
            0,
            "{changed} of the {} pixels of {label:?} changed under the outline",
            was.rgb.len()
        );
        assert!(
            was.rgb.iter().any(|p| *p != was.rgb[0]),
            "the target showed nothing to compare"
        );
        // The guidance window moves off the demo window, and so off the target.
        wait_until("the guidance window off the demo window", || {
            !overlap(frame(desktop, "MSGuide"), frame(desktop, DEMO))
        });
        shoot(desktop, &format!("{tag}-step{}-after", stage + 1));
        assert!(!overlap(frame(desktop, "MSGuide"), target));

        // A real click on the target: it goes through, and the outline goes at once.
        click(desktop, (tx + tw / 2, ty + th / 2));
        let clicked = Instant::now();
        wait_until("the outline gone after the click", || {
            try_geometry(desktop, "MSGuide outline").is_none()
        });
        gone.push(clicked.elapsed());
        let next = format!("stage {}", stage + 1);
        wait_for_line(&demo.stdout, &next, |l| l == next);
        element(desktop, "MSGuide", STEP_TAKEN);
        // The guidance window comes back to where the person put it.
        wait_until("the guidance window back", || {
            frame(desktop, "MSGuide") == home
        });
    }
    gone.sort_unstable();
    eprintln!(
        "desktop_outline ({}): outline gone {:?} after the click (sorted)",
        if compositor { "picom" } else { "no compositor" },
        gone
    );
    assert!(gone[1] < GONE_WITHIN, "median {:?}: {gone:?}", gone[1]);
}

#[test]
fn without_a_compositor_the_target_shows_through_the_frame_and_a_click_removes_it() {
    walk_the_demo("desktop-outline-bare", false);
}

#[test]
fn with_a_compositor_the_target_shows_through_the_frame_and_a_click_removes_it() {
    walk_the_demo("desktop-outline-picom", true);
}
