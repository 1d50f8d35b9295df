//! The witness window (`fixtures/witness.py`, GTK 3) on a private [`Desktop`] or a Wayland
//! [`Compositor`]: the input it really received, read from its JSON-lines report, so
//! computer-use tests check arrivals independently of the connector's replies.

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::mpsc::{Receiver, RecvTimeoutError, channel},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::display::{Desktop, require};
use crate::wayland::Compositor;

/// How long an expected report may take on a loaded machine.
const REPORT_DEADLINE: Duration = Duration::from_secs(20);

/// A running witness window, killed on drop.
pub struct Witness {
    child: Child,
    events: Receiver<Value>,
    /// The red drawing area's root geometry `[x, y, width, height]`.
    pub area: [i64; 4],
    pub pid: u32,
    /// Its ready report, whole (with `WITNESS_ELEMENTS`, the button's and entry's geometry).
    pub ready: Value,
}

impl Witness {
    /// Starts the witness titled `title` on `desktop` at (100, 100) and waits until it is
    /// placed and drawn.
    pub fn start(desktop: &Desktop, title: &str) -> Self {
        Self::start_at(desktop, title, [100, 100])
    }

    /// [`Witness::start`] asking to be placed at `at`.
    pub fn start_at(desktop: &Desktop, title: &str, at: [i64; 2]) -> Self {
        Self::launch(desktop, title, at, &[])
    }

    /// [`Witness::start`] for the element tools: its entry is named "Your name" for
    /// accessibility, and its button is relabelled "Pressed" once clicked.
    pub fn start_for_elements(desktop: &Desktop, title: &str) -> Self {
        Self::launch(desktop, title, [100, 100], &[("WITNESS_ELEMENTS", "1")])
    }

    /// [`Witness::start_for_elements`] with GTK scaling the window by `scale` itself
    /// (`GDK_SCALE`): twice as large on screen, while GTK's own coordinates (and its
    /// accessibility boxes) stay in its logical pixels. It asks for (100, 100) logical.
    pub fn start_for_elements_scaled(desktop: &Desktop, title: &str, scale: u32) -> Self {
        let scale = scale.to_string();
        let env = [("WITNESS_ELEMENTS", "1"), ("GDK_SCALE", scale.as_str())];
        Self::launch(desktop, title, [100, 100], &env)
    }

    /// [`Witness::start_for_elements`] as a client of a Wayland `compositor` (GTK's Wayland
    /// backend): it cannot place itself there, and its reports' coordinates (the area's, the
    /// button's and the entry's, a press's) are relative to its window, in physical pixels.
    pub fn start_on_wayland(compositor: &Compositor, title: &str) -> Self {
        Self::start_with(|python| compositor.command(python), title)
    }

    /// [`Witness::start_on_wayland`] on a desktop whose clients `command` makes, given the
    /// program to run.
    pub fn start_with(command: impl FnOnce(&std::path::Path) -> Command, title: &str) -> Self {
        Self::run(
            command(&python()),
            title,
            [0, 0],
            &[("WITNESS_ELEMENTS", "1")],
        )
    }

    fn launch(desktop: &Desktop, title: &str, at: [i64; 2], env: &[(&str, &str)]) -> Self {
        require("xdotool", "xdotool");
        Self::run(desktop.command(python()), title, at, env)
    }

    fn run(mut command: Command, title: &str, at: [i64; 2], env: &[(&str, &str)]) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/witness.py");
        let mut child = command
            .arg(script)
            .arg(title)
            .args(at.map(|v| v.to_string()))
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the witness window");
        let stdout = child.stdout.take().expect("witness stdout");
        let (tx, events) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(value) = serde_json::from_str::<Value>(&line)
                    && tx.send(value).is_err()
                {
                    break;
                }
            }
        });
        let mut witness = Self {
            child,
            events,
            area: [0; 4],
            pid: 0,
            ready: Value::Null,
        };
        let ready = witness.expect("ready", |_| true);
        let area: Vec<i64> = ready["area"]
            .as_array()
            .expect("area")
            .iter()
            .map(|v| v.as_i64().expect("area number"))
            .collect();
        witness.area = [area[0], area[1], area[2], area[3]];
        witness.pid = u32::try_from(ready["pid"].as_u64().expect("pid")).expect("pid fits");
        witness.ready = ready;
        witness
    }

    /// A point inside the red area, `(dx, dy)` from its top-left.
    pub fn at(&self, dx: i64, dy: i64) -> [i64; 2] {
        [self.area[0] + dx, self.area[1] + dy]
    }

    /// The centre of the red area.
    pub fn centre(&self) -> [i64; 2] {
        self.at(self.area[2] / 2, self.area[3] / 2)
    }

    /// The next report of kind `event` that `accept` takes, skipping others; fails the test
    /// after [`REPORT_DEADLINE`].
    pub fn expect(&mut self, event: &str, accept: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + REPORT_DEADLINE;
        let mut skipped = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(value) if value["event"] == event && accept(&value) => return value,
                Ok(value) => skipped.push(value),
                Err(RecvTimeoutError::Timeout) => {
                    let recent = &skipped[skipped.len().saturating_sub(8)..];
                    panic!(
                        "the witness reported no matching {event} in time; last seen: {recent:?}"
                    )
                }
                Err(RecvTimeoutError::Disconnected) => panic!("the witness exited"),
            }
        }
    }

    /// Every report that arrives within `quiet` of the previous one, from now on.
    pub fn drain(&mut self, quiet: Duration) -> Vec<Value> {
        let mut seen = Vec::new();
        while let Ok(value) = self.events.recv_timeout(quiet) {
            seen.push(value);
        }
        seen
    }
}

/// Debian's own python3, which has `gi` (a python3 earlier on PATH, pyenv's, may not).
fn python() -> PathBuf {
    let python = PathBuf::from("/usr/bin/python3");
    assert!(
        python.is_file(),
        "/usr/bin/python3 is missing: install python3-gi and gir1.2-gtk-3.0"
    );
    python
}

impl Drop for Witness {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
