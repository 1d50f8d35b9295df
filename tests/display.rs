//! A private desktop for the tests that need one: Xvfb with the screen size asked for (or, for two
//! monitors, Xorg with the dummy driver, whose RandR outputs Xvfb lacks), openbox as the EWMH
//! window manager (window listing and focus need one), and a session D-Bus (AT-SPI is reached
//! through it), all started by the test and killed when the value drops; on request a
//! compositing manager (picom) too. [`Desktop::grab`] reads what the screen shows. A missing
//! program fails the test and names the package to install; nothing is skipped.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use x11rb::{
    connection::Connection as _,
    protocol::xproto::{ConnectionExt as _, ImageFormat},
};

/// How long the display, the window manager or the bus may take to come up on a loaded machine.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// Xvfb + openbox + a session bus, private to one test.
pub struct Desktop {
    /// Killed in reverse order of start.
    children: Vec<Child>,
    display: String,
    /// The X server's process, whose lock file and socket are removed after it if it left them.
    server: Option<u32>,
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
        require("Xvfb", "xvfb");
        let mut desktop = Self::empty();
        // -displayfd 1: the server picks a free display number and writes it to stdout once it
        // listens.
        let mut xvfb = Command::new("Xvfb");
        xvfb.args([
            "-displayfd",
            "1",
            "-nolisten",
            "tcp",
            "-noreset",
            "-screen",
            "0",
        ])
        .arg(format!("{width}x{height}x24"));
        desktop.start_server(xvfb, "Xvfb");
        desktop.start_session();
        desktop
    }

    /// Two monitors side by side: 1920×1080 (primary) at (0, 0) and 1280×1024 at (1920, 0), so
    /// the virtual desktop is 3200×1080 with a strip below the second monitor on no display.
    /// Xvfb has a single RandR output; Xorg's dummy driver has sixteen, set up with xrandr.
    pub fn two_monitors() -> Self {
        require("Xorg", "xserver-xorg-core");
        require("xrandr", "x11-xserver-utils");
        assert!(
            std::path::Path::new("/usr/lib/xorg/modules/drivers/dummy_drv.so").exists(),
            "Xorg's dummy driver is missing: install the `xserver-xorg-video-dummy` package"
        );
        let mut desktop = Self::empty();
        let config = desktop.runtime_dir.join("xorg-dummy.conf");
        std::fs::write(&config, DUMMY_XORG_CONFIG).unwrap();
        let mut xorg = Command::new("Xorg");
        xorg.args(["-displayfd", "1", "-nolisten", "tcp", "-noreset", "-config"])
            .arg(&config)
            .arg("-logfile")
            .arg(desktop.runtime_dir.join("xorg.log"));
        desktop.start_server(xorg, "Xorg");
        let _ = desktop
            .command("xrandr")
            .args(["--addmode", "DUMMY1", "1280x1024"])
            .output()
            .expect("run xrandr");
        let layout = desktop
            .command("xrandr")
            .args([
                "--output",
                "DUMMY0",
                "--mode",
                "1920x1080",
                "--pos",
                "0x0",
                "--primary",
                "--output",
                "DUMMY1",
                "--mode",
                "1280x1024",
                "--pos",
                "1920x0",
            ])
            .output()
            .expect("run xrandr");
        assert!(
            layout.status.success(),
            "xrandr could not lay out two monitors: {}",
            String::from_utf8_lossy(&layout.stderr)
        );
        desktop.start_session();
        desktop
    }

    fn empty() -> Self {
        for (program, package) in [
            ("openbox", "openbox"),
            ("dbus-daemon", "dbus"),
            ("xprop", "x11-utils"),
        ] {
            require(program, package);
        }
        let runtime_dir = crate::platform::fresh_dir("desktop-runtime");
        set_private(&runtime_dir);
        Self {
            children: Vec::new(),
            display: String::new(),
            server: None,
            bus_address: String::new(),
            runtime_dir,
        }
    }

    /// Starts the X server `command` (which must take `-displayfd 1`) and records its display.
    fn start_server(&mut self, mut command: Command, name: &str) {
        let mut server = command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let number = first_line(
            server.stdout.take().expect("server stdout"),
            "the X server's display number",
        );
        self.server = Some(server.id());
        self.children.push(server);
        self.display = format!(":{}", number.trim());
    }

    /// The session bus and the window manager on the running X server.
    fn start_session(&mut self) {
        let desktop = self;
        // The socket in the runtime directory, removed with it: the session default
        // (`unix:tmpdir=/tmp`) would leave one `dbus-*` file in /tmp per test.
        let address = format!("--address=unix:dir={}", desktop.runtime_dir.display());
        let mut bus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
            .arg(address)
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
    }

    /// Starts picom as the compositing manager (its XRender back end, as Xvfb has no GL, and
    /// no configuration file: no shadows, fading or transparency rules) and waits until it owns
    /// the screen's compositing selection `_NET_WM_CM_S0`.
    pub fn start_compositor(&mut self) {
        require("picom", "picom");
        let picom = self
            .command("picom")
            .args(["--backend", "xrender", "--config", "/dev/null"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start picom");
        self.children.push(picom);
        let (conn, _) = x11rb::connect(Some(&self.display)).expect("connect to the display");
        let atom = conn
            .intern_atom(false, b"_NET_WM_CM_S0")
            .unwrap()
            .reply()
            .unwrap()
            .atom;
        let deadline = Instant::now() + START_DEADLINE;
        while conn
            .get_selection_owner(atom)
            .unwrap()
            .reply()
            .unwrap()
            .owner
            == x11rb::NONE
        {
            assert!(
                Instant::now() < deadline,
                "picom did not take the display {} within {START_DEADLINE:?}",
                self.display
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the screen shows in the rectangle at `(x, y)` of `width`×`height` pixels, read
    /// from the root window (with a compositor, what it painted).
    pub fn grab(&self, x: i64, y: i64, width: u32, height: u32) -> Pixels {
        let (conn, screen) = x11rb::connect(Some(&self.display)).expect("connect to the display");
        let root = &conn.setup().roots[screen];
        assert_eq!(root.root_depth, 24, "the desktop is not 24-bit");
        let image = conn
            .get_image(
                ImageFormat::Z_PIXMAP,
                root.root,
                i16::try_from(x).unwrap(),
                i16::try_from(y).unwrap(),
                u16::try_from(width).unwrap(),
                u16::try_from(height).unwrap(),
                !0,
            )
            .unwrap()
            .reply()
            .unwrap();
        // 24-bit depth is stored 32 bits a pixel, blue first.
        let rgb = image
            .data
            .chunks_exact(4)
            .map(|p| [p[2], p[1], p[0]])
            .collect::<Vec<_>>();
        assert_eq!(rgb.len(), (width * height) as usize);
        Pixels { width, height, rgb }
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

/// A rectangle of the screen's pixels, row by row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pixels {
    /// Its width.
    pub width: u32,
    /// Its height.
    pub height: u32,
    /// `[red, green, blue]`, row by row from the top left.
    pub rgb: Vec<[u8; 3]>,
}

impl Pixels {
    /// The pixel at `(x, y)` of the rectangle.
    #[must_use]
    pub fn at(&self, x: u32, y: u32) -> [u8; 3] {
        self.rgb[(y * self.width + x) as usize]
    }

    /// The part `inset` pixels in from every edge, as its own rectangle.
    #[must_use]
    pub fn inside(&self, inset: u32) -> Self {
        let (width, height) = (self.width - 2 * inset, self.height - 2 * inset);
        let rgb = (inset..inset + height)
            .flat_map(|y| (inset..inset + width).map(move |x| (x, y)))
            .map(|(x, y)| self.at(x, y))
            .collect();
        Self { width, height, rgb }
    }

    /// The pixels of the border `width` pixels wide, with where each is.
    pub fn border(&self, width: u32) -> impl Iterator<Item = ((u32, u32), [u8; 3])> + '_ {
        (0..self.height)
            .flat_map(move |y| (0..self.width).map(move |x| (x, y)))
            .filter(move |&(x, y)| {
                x < width || y < width || x >= self.width - width || y >= self.height - width
            })
            .map(|(x, y)| ((x, y), self.at(x, y)))
    }
}

impl Drop for Desktop {
    fn drop(&mut self) {
        while let Some(mut child) = self.children.pop() {
            stop(&mut child);
        }
        remove_x_locks_of(self.server.as_slice());
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}

/// Removes the X display lock files in /tmp (and their sockets) that name one of `pids`, once
/// those processes have stopped: an X server killed outright leaves them behind, and so does a
/// wlroots compositor that reserved a display for Xwayland. A lock naming another process is
/// left alone: another test's server may have taken the number over since.
pub fn remove_x_locks_of(pids: &[u32]) {
    let Ok(entries) = std::fs::read_dir("/tmp") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(number) = name
            .strip_prefix(".X")
            .and_then(|rest| rest.strip_suffix("-lock"))
        else {
            continue;
        };
        // "%10d\n", which wlroots follows with a NUL.
        let held = std::fs::read_to_string(entry.path()).unwrap_or_default();
        if held
            .trim_matches(|c: char| c.is_whitespace() || c == '\0')
            .parse::<u32>()
            .is_ok_and(|pid| pids.contains(&pid))
        {
            let _ = std::fs::remove_file(format!("/tmp/.X11-unix/X{number}"));
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// SIGTERM, then SIGKILL after two seconds: an X server ended with SIGTERM removes its socket
/// from /tmp/.X11-unix, one killed outright leaves it behind.
fn stop(child: &mut Child) {
    let asked = crate::sigterm(child.id());
    let deadline = Instant::now() + Duration::from_secs(2);
    while asked && Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Xorg with the dummy driver: one screen whose RandR outputs DUMMY0..DUMMY15 xrandr can lay
/// out; the modes the layout uses are declared here.
const DUMMY_XORG_CONFIG: &str = r#"Section "Device"
  Identifier "dummy"
  Driver "dummy"
  VideoRam 256000
EndSection
Section "Monitor"
  Identifier "monitor"
  HorizSync 5.0-1000.0
  VertRefresh 5.0-200.0
  Modeline "1920x1080" 148.50 1920 2008 2052 2200 1080 1084 1089 1125 +hsync +vsync
  Modeline "1280x1024" 108.00 1280 1328 1440 1688 1024 1025 1028 1066 +hsync +vsync
EndSection
Section "Screen"
  Identifier "screen"
  Device "dummy"
  Monitor "monitor"
  DefaultDepth 24
  SubSection "Display"
    Depth 24
    Virtual 3200 1080
  EndSubSection
EndSection
Section "ServerFlags"
  Option "AutoAddDevices" "false"
  Option "DontVTSwitch" "true"
EndSection
"#;

/// Fails the test, naming the Debian package, when `program` is not on PATH.
pub fn require(program: &str, package: &str) {
    assert!(
        on_path(program).is_some(),
        "`{program}` is missing: install the `{package}` package (scripts/test installs it)"
    );
}

/// Where `program` is on `PATH`, if anywhere.
#[must_use]
pub fn on_path(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
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
