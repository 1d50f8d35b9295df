//! The guidance window (`msguide-desktop gui`) on a Wayland compositor started by the test: on a
//! headless weston, which has no layer shell, it opens and says at once, in one sentence, that
//! the outline cannot be shown above other windows there; on a headless sway at scale 2 with a
//! session bus, `observe` finds the demo's elements on its floating window where sway put it.

use std::time::{Duration, Instant};

use e2e::platform::{WAIT, binary};
use e2e::wayland::Compositor;
use serde_json::Value;

use super::desktop_client::{DEMO, Running, wait_for_line};

/// What the window says where the compositor has no layer shell.
const NO_LAYER_SHELL: &str = "msguide-desktop: This Wayland compositor cannot show a frame above other windows (it has no layer shell): follow the instruction by hand, or use sway, Hyprland, river or labwc to see the outline";

#[test]
fn on_weston_the_window_says_in_one_sentence_that_it_cannot_outline() {
    let weston = Compositor::weston();
    let gui = Running::start({
        let mut command = weston.command(binary("msguide-desktop"));
        command.arg("gui");
        command
    });
    let line = wait_for_line(&gui.stderr, "the sentence about the layer shell", |l| {
        l.contains("layer shell")
    });
    assert_eq!(line, NO_LAYER_SHELL);
    drop(gui);
    drop(weston);
}

/// `msguide-desktop observe` of the demo on `sway` until it lists `label`.
fn observe_until(sway: &Compositor, label: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let out = sway
            .command(binary("msguide-desktop"))
            .args(["observe", "--window-title", DEMO, "--share-pixels"])
            .output()
            .unwrap();
        if out.status.success() {
            let observation: Value = serde_json::from_slice(&out.stdout).unwrap();
            if observation["elements"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["label"] == label)
            {
                return observation;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no {label:?} observed within {WAIT:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn on_sway_at_scale_2_the_demos_elements_are_found_where_sway_put_its_window() {
    let mut sway = Compositor::sway(2);
    sway.start_session_bus();
    let demo = Running::start(sway.command(binary("msguide-demo")));
    wait_for_line(&demo.stdout, "the demo's first stage", |l| l == "stage 0");
    sway.wait_for_app(DEMO);
    let moved = sway
        .command("swaymsg")
        .arg(format!(
            "[app_id=\"{DEMO}\"] floating enable, resize set 480 240, move position 200 150"
        ))
        .output()
        .unwrap();
    assert!(moved.status.success(), "{moved:?}");
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
