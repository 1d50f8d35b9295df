//! The guidance window (`msguide-desktop gui`) on a Wayland compositor started by the test: on a
//! headless weston, which has no layer shell, it opens and says at once, in one sentence, that
//! the outline cannot be shown above other windows there.

use e2e::platform::binary;
use e2e::wayland::Compositor;

use super::desktop_client::{Running, wait_for_line};

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
