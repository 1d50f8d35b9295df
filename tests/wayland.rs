//! A private Wayland compositor for the tests that need one: a headless sway (wlroots'
//! headless backend, pixman rendering, no input devices) in a user namespace that maps root to
//! uid 1000 (sway refuses to run as root), a headless cage (wlroots too, in the same way) that
//! offers screen capture alone, or a headless weston, which offers none of the wlr protocols. Each runs as a child of the test with its own runtime directory (owned by root,
//! mode 0700), and is stopped, waited for and its directory removed when the value drops.
//! Witness programs (grim, wev, foot, swaymsg, wl-clipboard, the GTK witness) run on it through [`Compositor::command`], with a session bus of their own when a test starts one.
//! A missing program fails the test and names the package to install; nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::display::require;

/// How long a compositor or a client may take to come up on a loaded machine.
pub const START_DEADLINE: Duration = Duration::from_secs(30);

/// A running compositor and the clients started on it.
pub struct Compositor {
    /// Clients first, the compositor last: stopped in reverse order of start.
    children: Vec<Child>,
    runtime_dir: PathBuf,
    display: String,
    swaysock: Option<PathBuf>,
    /// The session bus [`Compositor::start_session_bus`] started, where AT-SPI is asked for.
    bus_address: Option<String>,
}

impl Compositor {
    /// A headless sway with one 1280×800 output at `scale`.
    pub fn sway(scale: u32) -> Self {
        Self::sway_sized(scale, (1280, 800))
    }

    /// A headless sway with one output of `width`×`height` physical pixels at `scale`.
    pub fn sway_sized(scale: u32, (width, height): (u32, u32)) -> Self {
        require("sway", "sway");
        require("swaymsg", "sway");
        require("unshare", "util-linux");
        let runtime_dir = private_dir("sway-runtime");
        let config = runtime_dir.join("sway.conf");
        std::fs::write(
            &config,
            format!(
                "xwayland disable\noutput HEADLESS-1 resolution {width}x{height} position 0 0 scale {scale}\n\
                 default_border none\nfocus_follows_mouse no\n"
            ),
        )
        .unwrap();
        let mut command = headless_wlroots(&runtime_dir, "sway");
        command.arg("-c").arg(&config);
        let mut compositor = Self {
            children: vec![command.spawn().expect("start sway")],
            runtime_dir,
            display: String::new(),
            swaysock: None,
            bus_address: None,
        };
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            let (display, sock) = compositor.sockets();
            if let (Some(display), Some(sock)) = (display, sock) {
                compositor.display = display;
                compositor.swaysock = Some(sock);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "sway did not start within {START_DEADLINE:?}: {}",
                compositor.log("sway.log")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Ready once its IPC answers.
        compositor.wait_for("sway's IPC", |c| {
            c.command("swaymsg")
                .args(["-t", "get_outputs"])
                .output()
                .is_ok_and(|o| o.status.success())
        });
        compositor
    }

    /// A headless cage (a wlroots kiosk compositor, 1280×720, the headless backend's size)
    /// showing `app` fullscreen: it offers screen capture, but no virtual input, window list or
    /// clipboard protocol.
    pub fn cage(app: &[&str]) -> Self {
        require("cage", "cage");
        require("unshare", "util-linux");
        let runtime_dir = private_dir("cage-runtime");
        let mut command = headless_wlroots(&runtime_dir, "cage");
        command.arg("--").args(app);
        let compositor = Self {
            children: vec![command.spawn().expect("start cage")],
            runtime_dir,
            display: "wayland-0".to_owned(),
            swaysock: None,
            bus_address: None,
        };
        compositor.wait_for("cage's socket", |c| {
            std::os::unix::net::UnixStream::connect(c.runtime_dir.join("wayland-0")).is_ok()
        });
        compositor
    }

    /// A headless weston (pixman, 1280×800): no wlr protocols, no seat.
    pub fn weston() -> Self {
        Self::weston_with(&[])
    }

    /// A headless weston that lets any client take screenshots ([`Compositor::screenshot`]):
    /// `--debug` opens weston's own screenshooter to every client, as a debugging user would.
    pub fn weston_allowing_screenshots() -> Self {
        require("weston-screenshooter", "weston");
        Self::weston_with(&["--debug"])
    }

    fn weston_with(extra: &[&str]) -> Self {
        require("weston", "weston");
        let runtime_dir = private_dir("weston-runtime");
        let log = runtime_dir.join("weston.log");
        let mut command = Command::new("weston");
        command
            .args(extra)
            .args([
                "--backend=headless-backend.so",
                "--use-pixman",
                "--width=1280",
                "--height=800",
                "--socket=wayland-w",
                "--no-config",
            ])
            .arg(format!("--log={}", log.display()))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &runtime_dir)
            .env("XDG_RUNTIME_DIR", &runtime_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let compositor = Self {
            children: vec![command.spawn().expect("start weston")],
            runtime_dir,
            display: "wayland-w".to_owned(),
            swaysock: None,
            bus_address: None,
        };
        compositor.wait_for("weston's socket", |c| {
            std::os::unix::net::UnixStream::connect(c.runtime_dir.join("wayland-w")).is_ok()
        });
        compositor
    }

    /// The whole screen as weston itself captures it (`weston-screenshooter`, which a
    /// [`Compositor::weston_allowing_screenshots`] allows).
    pub fn screenshot(&self) -> crate::display::Pixels {
        let dir = private_dir("weston-shot");
        let status = self
            .command("weston-screenshooter")
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run weston-screenshooter");
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|entry| entry.path())
            .find(|path| path.extension().is_some_and(|e| e == "png"));
        let bytes = file.map(std::fs::read);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(status.success(), "weston-screenshooter failed: {status}");
        let bytes = bytes.expect("weston-screenshooter wrote no PNG").unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        let step = info.color_type.samples();
        crate::display::Pixels {
            width: info.width,
            height: info.height,
            rgb: buf[..info.buffer_size()]
                .chunks_exact(step)
                .map(|p| [p[0], p[1], p[2]])
                .collect(),
        }
    }

    /// Starts a session bus for this compositor's clients (its socket in the runtime
    /// directory), stopped before the compositor: the bus starts AT-SPI's accessibility bus on
    /// demand, which ends with it.
    pub fn start_session_bus(&mut self) {
        assert!(
            Path::new("/usr/libexec/at-spi-bus-launcher").exists(),
            "`/usr/libexec/at-spi-bus-launcher` is missing: install the `at-spi2-core` package"
        );
        self.start_bus("--session".to_owned());
    }

    /// Starts a session bus that starts no service on demand (no service folders), so no
    /// accessibility bus can be had through it.
    pub fn start_session_bus_without_services(&mut self) {
        let config = self.runtime_dir.join("bus-without-services.conf");
        // The `--address` given as the bus starts takes the place of this `listen`.
        std::fs::write(
            &config,
            format!(
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\" \
                 \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n\
                 <busconfig><type>session</type><listen>unix:dir={}</listen>\
                 <policy context=\"default\"><allow send_destination=\"*\" eavesdrop=\"true\"/>\
                 <allow eavesdrop=\"true\"/><allow own=\"*\"/></policy></busconfig>\n",
                self.runtime_dir.display()
            ),
        )
        .unwrap();
        self.start_bus(format!("--config-file={}", config.display()));
    }

    fn start_bus(&mut self, config: String) {
        require("dbus-daemon", "dbus");
        let mut bus = self
            .command("dbus-daemon")
            .arg(config)
            .args(["--nofork", "--nopidfile", "--print-address=1"])
            .arg(format!("--address=unix:dir={}", self.runtime_dir.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dbus-daemon");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(bus.stdout.take().expect("dbus stdout")),
            &mut line,
        )
        .expect("read the bus address");
        self.children.push(bus);
        assert!(!line.trim().is_empty(), "dbus-daemon gave no address");
        self.bus_address = Some(line.trim().to_owned());
    }

    /// The address of the session bus [`Compositor::start_session_bus`] started.
    #[must_use]
    pub fn session_bus(&self) -> &str {
        self.bus_address
            .as_deref()
            .expect("start_session_bus first")
    }

    fn sockets(&self) -> (Option<String>, Option<PathBuf>) {
        let mut display = None;
        let mut sock = None;
        for entry in std::fs::read_dir(&self.runtime_dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("wayland-") && !name.ends_with(".lock") {
                display = Some(name);
            } else if name.starts_with("sway-ipc.") && name.ends_with(".sock") {
                sock = Some(entry.path());
            }
        }
        (display, sock)
    }

    /// Polls `ready` until it holds, failing the test after [`START_DEADLINE`].
    pub fn wait_for(&self, what: &str, ready: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + START_DEADLINE;
        while !ready(self) {
            assert!(
                Instant::now() < deadline,
                "{what} not ready within {START_DEADLINE:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The environment a client of this compositor needs (and no X display).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("WAYLAND_DISPLAY", self.display.clone()),
            ("XDG_RUNTIME_DIR", self.runtime_dir.display().to_string()),
        ];
        if let Some(sock) = &self.swaysock {
            env.push(("SWAYSOCK", sock.display().to_string()));
        }
        if let Some(bus) = &self.bus_address {
            env.push(("DBUS_SESSION_BUS_ADDRESS", bus.clone()));
        }
        env
    }

    /// A command for `program` on this compositor (see [`Compositor::env`]).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command.env_remove("DISPLAY");
        for (key, value) in self.env() {
            command.env(key, value);
        }
        command
    }

    /// Starts a client kept until the compositor stops (stopped first).
    pub fn spawn(&mut self, mut command: Command) -> u32 {
        let child = command
            .stdin(Stdio::null())
            .spawn()
            .expect("start a Wayland client");
        let pid = child.id();
        self.children.push(child);
        pid
    }

    /// A file in the runtime directory (removed with it).
    pub fn path(&self, name: &str) -> PathBuf {
        self.runtime_dir.join(name)
    }

    /// A file of the runtime directory as text (empty when missing).
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.runtime_dir.join(name)).unwrap_or_default()
    }

    /// `swaymsg -t get_tree`, parsed.
    pub fn tree(&self) -> serde_json::Value {
        let out = self
            .command("swaymsg")
            .args(["-r", "-t", "get_tree"])
            .output()
            .expect("run swaymsg");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The app id of the focused window, per sway's tree.
    pub fn focused_app(&self) -> Option<String> {
        fn walk(node: &serde_json::Value) -> Option<String> {
            if node["focused"] == true {
                return node["app_id"].as_str().map(str::to_owned);
            }
            ["nodes", "floating_nodes"]
                .iter()
                .filter_map(|k| node[*k].as_array())
                .flatten()
                .find_map(walk)
        }
        walk(&self.tree())
    }

    /// Waits until sway's tree lists a window with `app_id`.
    pub fn wait_for_app(&self, app_id: &str) {
        self.wait_for(app_id, |c| {
            serde_json::to_string(&c.tree())
                .unwrap()
                .contains(&format!("\"app_id\":\"{app_id}\""))
        });
    }
}

impl Drop for Compositor {
    fn drop(&mut self) {
        let pids: Vec<u32> = self.children.iter().map(Child::id).collect();
        while let Some(mut child) = self.children.pop() {
            let asked = crate::sigterm(child.id());
            let deadline = Instant::now() + Duration::from_secs(3);
            while asked && Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        crate::display::remove_x_locks_of(&pids);
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}

/// The wlroots compositor `program` on the headless backend with the pixman renderer and no
/// input devices, logging to `<program>.log` in `runtime_dir`; in a user namespace that maps
/// root to uid 1000, since sway and cage refuse to run as root.
fn headless_wlroots(runtime_dir: &Path, program: &str) -> Command {
    let log = std::fs::File::create(runtime_dir.join(format!("{program}.log"))).unwrap();
    let mut command = Command::new("unshare");
    command
        .args(["-U", "--map-user=1000", "--map-group=1000", program])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", runtime_dir)
        .env("XDG_RUNTIME_DIR", runtime_dir)
        .env("WLR_BACKENDS", "headless")
        .env("WLR_RENDERER", "pixman")
        .env("WLR_LIBINPUT_NO_DEVICES", "1")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    command
}

/// A fresh directory owned by this (root) process, mode 0700: inside sway's user namespace
/// it belongs to the mapped uid, which is what a Wayland runtime directory must be.
fn private_dir(tag: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = crate::platform::fresh_dir(tag);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// `stdbuf` (the given command, with the desktop's environment) set to run wev with its output
/// line-buffered into `log`: wev's stdout to a file is otherwise never flushed. stdbuf execs
/// wev, so the test's own child is wev itself and is stopped with the desktop; under `script`,
/// which held it before, wev outlived the test and spun on its dead connection.
pub fn wev_command(mut stdbuf: Command, log: &Path) -> Command {
    require("wev", "wev");
    require("stdbuf", "coreutils");
    stdbuf
        .args(["-oL", "wev"])
        .stdout(std::fs::File::create(log).expect("create wev's log"))
        .stderr(Stdio::null());
    stdbuf
}

/// How long a witness may take to see what the shim did, on a loaded machine.
pub const SEEN_DEADLINE: Duration = Duration::from_secs(20);

/// Polls `seen` until it holds, failing with `what` after [`SEEN_DEADLINE`].
pub async fn eventually(what: &str, seen: impl Fn() -> bool) {
    let deadline = Instant::now() + SEEN_DEADLINE;
    while !seen() {
        assert!(Instant::now() < deadline, "{what} within {SEEN_DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `path` exists and holds `needle`.
pub fn file_contains(path: &Path, needle: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| text.contains(needle))
}
