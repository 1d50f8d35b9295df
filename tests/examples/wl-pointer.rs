//! A pointer on a Wayland compositor with the wlr virtual-pointer protocol (sway), for the
//! tests whose compositor has no input device: the first line it reads creates the pointer
//! through `local_core::desktop::wayland::input`, the shim's own backend, and the compositor
//! delivers its moves and clicks to whatever surface takes input at that point.
//!
//! `wl-pointer` on the compositor named by `WAYLAND_DISPLAY` reads lines on stdin:
//! `move X Y` moves the pointer, `click X Y` clicks the left button there (display-global
//! pixels); each is answered `done` (or `failed: <why>`) on stdout. It ends at the end of stdin.
//! Linux only.

// Test support: a failure ends the run with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(target_os = "linux")]
fn main() {
    use std::io::{BufRead as _, Write as _};

    use local_core::desktop::action::{Action, Button};
    use local_core::desktop::wayland::{displays, input};

    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        let [verb, x, y] = words[..] else {
            panic!("not `move X Y` or `click X Y`: {line:?}")
        };
        let at = [x.parse().unwrap(), y.parse().unwrap()];
        let action = match verb {
            "move" => Action::Move { to: at },
            "click" => Action::Click {
                at,
                button: Button::Left,
                count: 1,
                modifiers: Vec::new(),
            },
            _ => panic!("not `move X Y` or `click X Y`: {line:?}"),
        };
        let answer = displays()
            .and_then(|displays| input::perform(&action, &displays, false))
            .map_or_else(|e| format!("failed: {e}"), |()| "done".to_owned());
        let mut out = stdout.lock();
        writeln!(out, "{answer}").unwrap();
        out.flush().unwrap();
    }
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("wl-pointer runs on Linux only");
    std::process::exit(2);
}
