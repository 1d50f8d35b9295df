//! A private desktop for the tests that need one: Xvfb with the screen size asked for, openbox as
//! the EWMH window manager (window listing and focus need one), and a session D-Bus (AT-SPI is
//! reached through it), all started by the test and killed when the value drops. A missing
//! program fails the test and names the package to install; nothing is skipped.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

/// How long the display, the window manager or the bus may take to come up on a loaded machine.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// Xvfb + openbox + a session bus, private to one test.
pub struct Desktop {
    /// Killed in reverse order of start.
    children: Vec<Child>,
    display: String,
    bus_address: String,
    runtime_dir: PathBuf,
}

impl Desktop {
    /// A 1920×1080 desktop.
    pub fn start() -> Self {
        Self::with_size(1920, 1080)
    }

    /// A desktop of one screen of `width`×`height` pixels at 24-bit depth.
    pub fn with_size(width: u32, height: u32) -> Self {
        for (program, package) in [
            ("Xvfb", "xvfb"),
            ("openbox", "openbox"),
            ("dbus-daemon", "dbus"),
            ("xprop", "x11-utils"),
        ] {
            require(program, package);
        }
        let runtime_dir = crate::platform::fresh_dir("desktop-runtime");
        set_private(&runtime_dir);
        let mut desktop = Self {
            children: Vec::new(),
            display: String::new(),
            bus_address: String::new(),
            runtime_dir,
        };

        // -displayfd 1: Xvfb picks a free display number and writes it to stdout once it listens.
        let mut xvfb = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-nolisten",
                "tcp",
                "-noreset",
                "-screen",
                "0",
            ])
            .arg(format!("{width}x{height}x24"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Xvfb");
        let number = first_line(
            xvfb.stdout.take().expect("Xvfb stdout"),
            "Xvfb's display number",
        );
        desktop.children.push(xvfb);
        desktop.display = format!(":{}", number.trim());

        let mut bus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
            .env("XDG_RUNTIME_DIR", &desktop.runtime_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dbus-daemon");
        let address = first_line(bus.stdout.take().expect("dbus stdout"), "the bus address");
        desktop.children.push(bus);
        desktop.bus_address = address.trim().to_owned();

        let wm = desktop
            .command("openbox")
            .arg("--sm-disable")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start openbox");
        desktop.children.push(wm);
        desktop.wait_for_window_manager();
        desktop
    }

    /// The X display name, like `:99`.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// The session bus address.
    pub fn bus_address(&self) -> &str {
        &self.bus_address
    }

    /// What a program needs to live on this desktop: the display, the bus, a private runtime
    /// directory, and an X11 session type (xcap and the input backends pick Wayland otherwise
    /// when the outer environment says so).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("DISPLAY", self.display.clone()),
            ("DBUS_SESSION_BUS_ADDRESS", self.bus_address.clone()),
            ("XDG_RUNTIME_DIR", self.runtime_dir.display().to_string()),
            ("XDG_SESSION_TYPE", "x11".to_owned()),
        ]
    }

    /// A command for `program` on this desktop (see [`Desktop::env`]), with no Wayland display.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command.env_remove("WAYLAND_DISPLAY");
        for (key, value) in self.env() {
            command.env(key, value);
        }
        command
    }

    /// Polls until openbox has claimed the screen (`_NET_SUPPORTING_WM_CHECK` on the root).
    fn wait_for_window_manager(&self) {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            let out = self
                .command("xprop")
                .args(["-root", "_NET_SUPPORTING_WM_CHECK"])
                .output()
                .expect("run xprop");
            if String::from_utf8_lossy(&out.stdout).contains("window id") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "openbox did not take the display {} within {START_DEADLINE:?}",
                self.display
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Desktop {
    fn drop(&mut self) {
        while let Some(mut child) = self.children.pop() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}

/// Fails the test, naming the Debian package, when `program` is not on PATH.
pub fn require(program: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()));
    assert!(
        found,
        "`{program}` is missing: install the `{package}` package (scripts/test installs it)"
    );
}

fn first_line(stdout: ChildStdout, what: &str) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    let what_owned = what.to_owned();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(START_DEADLINE)
        .unwrap_or_else(|_| panic!("no {what_owned} within {START_DEADLINE:?}"));
    assert!(!line.trim().is_empty(), "{what} was empty");
    line
}

fn set_private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
}
