//! A private headless desktop whose compositor offers input only through the XDG desktop
//! portal, for the portal's tests: GNOME (mutter, or GNOME Shell) or KDE (KWin), with one
//! 1280×800 virtual monitor on a session bus of its own, with PipeWire and WirePlumber (the
//! portal's screen casts need them), AT-SPI (so the test can answer the portal's dialog as a
//! person would, `fixtures/portal_consent.py`), and the real xdg-desktop-portal with the
//! desktop's backend, started by the bus on first use. Everything lives in one runtime folder,
//! also its HOME, and is stopped, waited for and removed when the value drops.
//! A missing program fails the test and names the package to install; nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::display::require;

/// How long the compositor and the portal may take to come up on a loaded machine.
pub const START_DEADLINE: Duration = Duration::from_secs(30);
/// The Wayland socket's name, chosen here so the bus can give it to the portal from the start.
const WAYLAND_DISPLAY: &str = "wayland-msguide";
/// The fine computer-use features HELLO advertises where input goes through the portal and
/// nothing else does (no wlr protocol, no screenshots): on a bare mutter and on KWin.
pub const PORTAL_INPUT_FEATURES: [&str; 12] = [
    "input.click.modifiers",
    "input.click.button",
    "input.drag.path",
    "input.key.hold",
    "input.mouse.down_up",
    "input.scroll.amount",
    "input.wait",
    "cursor.position",
    "display.info",
    "app.list",
    "app.launch",
    "permissions.check",
];
/// The compositor's log, in the runtime folder: see [`PortalDesktop::log`].
pub const COMPOSITOR_LOG: &str = "compositor.log";

/// Which compositor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compositor {
    Mutter,
    GnomeShell,
    KWin,
}

/// A running headless desktop.
pub struct PortalDesktop {
    compositor: Compositor,
    /// Started first to last; stopped in reverse.
    children: Vec<Child>,
    runtime_dir: PathBuf,
    bus_address: String,
    /// A bus of its own standing in for the system bus, which GNOME Shell will not start
    /// without (it asks logind there, and tolerates nobody answering).
    system_bus: Option<String>,
}

impl PortalDesktop {
    /// A GNOME: starts the bus, mutter, PipeWire, WirePlumber and the accessibility bus, and
    /// waits until mutter listens.
    pub fn gnome() -> Self {
        Self::launch(Compositor::Mutter)
    }

    /// A KDE Plasma desktop's compositor and portal: the same with KWin in place of mutter
    /// (`kwin_wayland --virtual`) and the portal's KDE backend.
    pub fn kde() -> Self {
        require("kwin_wayland", "kwin-wayland");
        for (path, package) in [
            (
                "/usr/lib/x86_64-linux-gnu/libexec/xdg-desktop-portal-kde",
                "xdg-desktop-portal-kde",
            ),
            // The portal's KDE backend is a Qt program, on Wayland here.
            (
                "/usr/lib/x86_64-linux-gnu/qt5/plugins/platforms/libqwayland-generic.so",
                "qtwayland5",
            ),
        ] {
            assert!(
                Path::new(path).exists(),
                "`{path}` is missing: install the `{package}` package (scripts/test installs it)"
            );
        }
        Self::launch(Compositor::KWin)
    }

    /// The same desktop with GNOME Shell in place of the bare mutter (the shell is mutter with
    /// its services, the screenshot service among them), on a private system bus, and waits
    /// until its screenshot service is on the session bus.
    pub fn gnome_shell() -> Self {
        require("gnome-shell", "gnome-shell");
        require("gdbus", "libglib2.0-bin");
        let gnome = Self::launch(Compositor::GnomeShell);
        let deadline = Instant::now() + START_DEADLINE;
        while !gnome.has_owner("org.gnome.Shell.Screenshot") {
            assert!(
                Instant::now() < deadline,
                "GNOME Shell offered no screenshot service within {START_DEADLINE:?}: {}",
                gnome.log(COMPOSITOR_LOG)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        gnome
    }

    fn launch(compositor: Compositor) -> Self {
        for (program, package) in [
            ("dbus-daemon", "dbus"),
            ("mutter", "mutter"),
            ("pipewire", "pipewire"),
            ("wireplumber", "wireplumber"),
            ("foot", "foot"),
        ] {
            require(program, package);
        }
        for (path, package) in [
            ("/usr/libexec/xdg-desktop-portal", "xdg-desktop-portal"),
            // Also on KDE: the portal's GTK backend serves what KDE's leaves out.
            (
                "/usr/libexec/xdg-desktop-portal-gnome",
                "xdg-desktop-portal-gnome",
            ),
            ("/usr/libexec/at-spi-bus-launcher", "at-spi2-core"),
            (
                "/usr/lib/x86_64-linux-gnu/girepository-1.0/Atspi-2.0.typelib",
                "gir1.2-atspi-2.0",
            ),
        ] {
            assert!(
                Path::new(path).exists(),
                "`{path}` is missing: install the `{package}` package (scripts/test installs it)"
            );
        }
        let runtime_dir = crate::platform::fresh_dir("gnome-runtime");
        std::fs::set_permissions(
            &runtime_dir,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        let mut gnome = Self {
            compositor,
            children: Vec::new(),
            runtime_dir,
            bus_address: String::new(),
            system_bus: None,
        };
        if compositor == Compositor::GnomeShell {
            let dir = gnome.runtime_dir.join("system-bus");
            std::fs::create_dir(&dir).unwrap();
            let (bus, address) = gnome.bus_daemon(&dir, "system-bus.log");
            gnome.children.push(bus);
            gnome.system_bus = Some(address);
        }

        // The bus passes its environment to the services it starts: the portal must know the
        // Wayland display and which desktop this is before its first call.
        let (bus, address) = gnome.bus_daemon(&gnome.runtime_dir.clone(), "bus.log");
        gnome.children.push(bus);
        gnome.bus_address = address;

        let log = |name: &str| std::fs::File::create(gnome.runtime_dir.join(name)).unwrap();
        let mut command = match compositor {
            Compositor::Mutter | Compositor::GnomeShell => {
                let mut command = gnome.command(if compositor == Compositor::GnomeShell {
                    "gnome-shell"
                } else {
                    "mutter"
                });
                command
                    .args([
                        "--headless",
                        "--virtual-monitor",
                        "1280x800",
                        "--wayland",
                        "--no-x11",
                    ])
                    .arg(format!("--wayland-display={WAYLAND_DISPLAY}"));
                command
            }
            Compositor::KWin => {
                // New windows fill the output, so a witness's surface point is the output's.
                let config = gnome.runtime_dir.join(".config");
                std::fs::create_dir_all(&config).unwrap();
                std::fs::write(config.join("kwinrc"), "[Windows]\nPlacement=Maximizing\n").unwrap();
                let mut command = gnome.command(&gnome.kwin_without_capabilities());
                command.args([
                    "--virtual",
                    "--width",
                    "1280",
                    "--height",
                    "800",
                    "--socket",
                    WAYLAND_DISPLAY,
                    "--no-lockscreen",
                    "--no-global-shortcuts",
                    "--no-kactivities",
                ]);
                command
            }
        };
        command
            .stdout(log(COMPOSITOR_LOG))
            .stderr(log(COMPOSITOR_LOG));
        // KWin's fresh copy can be "busy" for a moment: another thread of this test process
        // that forks while the copy is written leaves its child holding it open until exec.
        let mut tries = 0;
        let compositor_process = loop {
            match command.spawn() {
                Err(err) if err.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                started => break started.expect("start the compositor"),
            }
        };
        gnome.children.push(compositor_process);
        let socket = gnome.runtime_dir.join(WAYLAND_DISPLAY);
        let deadline = Instant::now() + START_DEADLINE;
        while !socket.exists() {
            assert!(
                Instant::now() < deadline,
                "the compositor did not listen within {START_DEADLINE:?}: {}",
                gnome.log(COMPOSITOR_LOG)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Listening is not yet ready: a client that connects before the compositor has its
        // (virtual) monitor finds no output and no display. weston-info lists the globals; a
        // compositor that took the connection but never answers would hold it forever, so each
        // try is cut off after a few seconds (coreutils' timeout) and the deadline still holds.
        require("weston-info", "weston");
        loop {
            let globals = gnome
                .command("timeout")
                .args(["5", "weston-info"])
                .output()
                .expect("run weston-info");
            if String::from_utf8_lossy(&globals.stdout).contains("interface: 'wl_output'") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the compositor showed no output within {START_DEADLINE:?}: {}",
                gnome.log(COMPOSITOR_LOG)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        for (program, name) in [
            ("pipewire", "pipewire.log"),
            ("wireplumber", "wireplumber.log"),
            ("/usr/libexec/at-spi-bus-launcher", "at-spi.log"),
        ] {
            let mut command = gnome.command(program);
            if program.ends_with("launcher") {
                command.arg("--launch-immediately");
            }
            let child = command
                .stdout(log(name))
                .stderr(log(name))
                .spawn()
                .unwrap_or_else(|e| panic!("start {program}: {e}"));
            gnome.children.push(child);
        }
        gnome
    }

    /// A copy of `kwin_wayland` without its file capability (`cap_sys_resource`), which a
    /// container that may not grant it refuses to execute ("Operation not permitted"); the
    /// capability only lets KWin raise its own limits. The copy keeps the program's name, which
    /// KWin's own Qt platform plugin checks.
    fn kwin_without_capabilities(&self) -> String {
        let installed = Command::new("sh")
            .args(["-c", "command -v kwin_wayland"])
            .output()
            .expect("find kwin_wayland");
        let installed = String::from_utf8_lossy(&installed.stdout).trim().to_owned();
        let dir = self.runtime_dir.join("bin");
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("kwin_wayland");
        std::fs::copy(&installed, &copy).unwrap_or_else(|e| panic!("copy {installed}: {e}"));
        copy.display().to_string()
    }

    /// A dbus-daemon listening in `dir`, logging to `log`, and its address.
    fn bus_daemon(&self, dir: &Path, log: &str) -> (Child, String) {
        let mut bus = self
            .bare("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
            .arg(format!("--address=unix:dir={}", dir.display()))
            .stdout(Stdio::piped())
            // The services it starts (the portal and its backends) write here too.
            .stderr(std::fs::File::create(self.runtime_dir.join(log)).unwrap())
            .spawn()
            .expect("start dbus-daemon");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(bus.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let address = line.trim().to_owned();
        assert!(!address.is_empty(), "dbus-daemon gave no address");
        (bus, address)
    }

    /// Whether `name` has an owner on the session bus.
    #[must_use]
    pub fn has_owner(&self, name: &str) -> bool {
        self.gdbus(&[
            "--dest",
            "org.freedesktop.DBus",
            "--object-path",
            "/org/freedesktop/DBus",
            "--method",
            "org.freedesktop.DBus.NameHasOwner",
            name,
        ])
        .is_some_and(|out| out.contains("true"))
    }

    /// Says in the desktop portal's permission store, as the person's answer to its dialog
    /// would, whether programs outside a sandbox may take screenshots (`yes` or `no`).
    pub fn screenshots_allowed(&self, answer: &str) {
        let permissions = format!("['{answer}']");
        let args = ["true", "screenshot", "", &permissions];
        assert!(
            self.permission_store("SetPermission", &args).is_some(),
            "the permission store took no answer"
        );
    }

    /// Forgets the answer about screenshots in the desktop portal's permission store, so the
    /// next one asks again.
    pub fn screenshots_unanswered(&self) {
        assert!(
            self.permission_store("DeletePermission", &["screenshot", ""])
                .is_some(),
            "the permission store kept its answer"
        );
    }

    /// `method` of the permission store on its `screenshot` table, with `args` after the table.
    fn permission_store(&self, method: &str, args: &[&str]) -> Option<String> {
        let method = format!("org.freedesktop.impl.portal.PermissionStore.{method}");
        let mut all = vec![
            "--dest",
            "org.freedesktop.impl.portal.PermissionStore",
            "--object-path",
            "/org/freedesktop/impl/portal/PermissionStore",
            "--method",
            &method,
            "screenshot",
        ];
        all.extend_from_slice(args);
        self.gdbus(&all)
    }

    /// Leaves the overview GNOME Shell opens with, so windows show as they are.
    pub fn leave_overview(&self) {
        let out = self.gdbus(&[
            "--dest",
            "org.gnome.Shell",
            "--object-path",
            "/org/gnome/Shell",
            "--method",
            "org.freedesktop.DBus.Properties.Set",
            "org.gnome.Shell",
            "OverviewActive",
            "<false>",
        ]);
        assert!(out.is_some(), "GNOME Shell did not leave its overview");
    }

    /// `gdbus call --session` with `args`; its output when it succeeded.
    fn gdbus(&self, args: &[&str]) -> Option<String> {
        let out = self
            .command("gdbus")
            .args(["call", "--session"])
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The session bus's address.
    #[must_use]
    pub fn bus_address(&self) -> &str {
        &self.bus_address
    }

    /// What a program outside this desktop (the shim under test) needs to reach it: the
    /// Wayland display, the session bus with its portal, and which desktop this is.
    #[must_use]
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("WAYLAND_DISPLAY", WAYLAND_DISPLAY.to_owned()),
            ("XDG_RUNTIME_DIR", self.runtime_dir.display().to_string()),
            ("DBUS_SESSION_BUS_ADDRESS", self.bus_address.clone()),
            ("XDG_CURRENT_DESKTOP", self.desktop_name().to_owned()),
        ]
    }

    /// `XDG_CURRENT_DESKTOP`, by which the portal picks its backend.
    fn desktop_name(&self) -> &'static str {
        match self.compositor {
            Compositor::Mutter | Compositor::GnomeShell => "GNOME",
            Compositor::KWin => "KDE",
        }
    }

    /// The runtime folder, removed on drop: a place for a test's files.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.runtime_dir
    }

    /// What runs scripts in this desktop's KWin, to be moved to another thread.
    #[must_use]
    pub fn kwin_scripts(&self) -> KwinScripts {
        assert_eq!(self.compositor, Compositor::KWin, "KWin scripts need KWin");
        require("gdbus", "libglib2.0-bin");
        KwinScripts {
            env: self.env(),
            dir: self.runtime_dir.clone(),
        }
    }

    /// [`KwinScripts::run`] in this desktop's KWin.
    pub fn kwin_script(&self, body: &str) -> String {
        self.kwin_scripts().run(body)
    }

    /// `program` with this desktop's environment and nothing else of the test's.
    #[must_use]
    pub fn command(&self, program: &str) -> Command {
        let mut command = self.bare(program);
        command.env("DBUS_SESSION_BUS_ADDRESS", &self.bus_address);
        command
    }

    /// Starts `command` as a client that is stopped with the desktop.
    pub fn keep(&mut self, child: Child) {
        self.children.push(child);
    }

    /// Starts a terminal whose `cat` writes what it reads to `file`, and waits until it runs:
    /// the shell's redirect creates the file once the terminal runs its child in its window.
    /// foot (app id `typetarget`) on GNOME; weston-terminal on KWin, whose virtual output foot
    /// 1.13 stops on at once with a division by zero.
    pub fn foot_cat(&mut self, file: &Path) {
        let command = format!("exec cat > '{}'", file.display());
        let terminal = if self.compositor == Compositor::KWin {
            require("weston-terminal", "weston");
            let shell = self.runtime_dir.join("cat-shell");
            std::fs::write(&shell, format!("#!/bin/sh\n{command}\n")).unwrap();
            std::fs::set_permissions(&shell, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .unwrap();
            self.command("weston-terminal")
                .arg(format!("--shell={}", shell.display()))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start weston-terminal")
        } else {
            require("foot", "foot");
            self.command("foot")
                .args(["--app-id=typetarget", "sh", "-c"])
                .arg(command)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start foot")
        };
        self.keep(terminal);
        let deadline = Instant::now() + START_DEADLINE;
        while !file.exists() {
            assert!(
                Instant::now() < deadline,
                "the terminal did not start: {}",
                self.log(COMPOSITOR_LOG)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// wev, logging to `log` a line at a time, once its window is configured.
    pub fn wev(&mut self, log: &Path) {
        let wev = crate::wayland::wev_command(self.command("stdbuf"), log)
            .spawn()
            .expect("start wev");
        self.keep(wev);
        let deadline = Instant::now() + START_DEADLINE;
        while !crate::wayland::file_contains(log, "xdg_toplevel] configure") {
            assert!(
                Instant::now() < deadline,
                "wev did not map its window: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends INPUT_ACTION `payload` on `conn`, which must be acknowledged; the desktop's logs
    /// otherwise.
    pub async fn act(
        &self,
        conn: &mut crate::platform::Conn,
        id: &str,
        payload: serde_json::Value,
    ) {
        let reply = conn.call("INPUT_ACTION", id, payload).await;
        assert_eq!(
            reply["type"],
            "ACK",
            "{reply}\nthe session bus and its services said: {}\nthe compositor said: {}",
            self.log("bus.log"),
            self.log(COMPOSITOR_LOG)
        );
    }

    /// After `typed_before` has arrived in the terminal that writes to `typed` ([`foot_cat`]):
    /// named keys and a chord (ctrl+u erases the line in the tty's editing) arrive as typed; a
    /// character the US layout lacks is refused with its sentence and nothing is sent, so a `z`
    /// typed next arrives alone; PERMISSIONS_CHECK then says input is granted.
    ///
    /// [`foot_cat`]: Self::foot_cat
    pub async fn check_keys(
        &self,
        conn: &mut crate::platform::Conn,
        typed: &Path,
        typed_before: &str,
    ) {
        let holds =
            |text: String| move || std::fs::read_to_string(typed).unwrap_or_default() == text;
        for (id, payload) in [
            ("t2", serde_json::json!({"action": "type", "text": "xyz"})),
            (
                "k1",
                serde_json::json!({"action": "key", "key": "BackSpace"}),
            ),
            ("k2", serde_json::json!({"action": "key", "key": "Return"})),
            ("t3", serde_json::json!({"action": "type", "text": "junk"})),
            ("k3", serde_json::json!({"action": "key", "key": "ctrl+u"})),
            ("t4", serde_json::json!({"action": "type", "text": "ok\n"})),
        ] {
            self.act(conn, id, payload).await;
        }
        let so_far = format!("{typed_before}xy\nok\n");
        crate::wayland::eventually(
            "xy after a BackSpace, then ok after ctrl+u",
            holds(so_far.clone()),
        )
        .await;
        let refused = conn
            .call(
                "INPUT_ACTION",
                "t5",
                serde_json::json!({"action": "type", "text": "a✓"}),
            )
            .await;
        assert_eq!(
            crate::platform::error_code(&refused),
            "FEATURE_NOT_SUPPORTED",
            "{refused}"
        );
        assert_eq!(refused["payload"]["details"]["feature"], "input.type");
        assert_eq!(
            refused["payload"]["details"]["reason"],
            "the keyboard layout has no key for “✓” (U+2713), and the desktop portal types only what the layout has: nothing was sent; add a layout that has it"
        );
        self.act(
            conn,
            "t6",
            serde_json::json!({"action": "type", "text": "z\n"}),
        )
        .await;
        crate::wayland::eventually("z alone after the refusal", holds(format!("{so_far}z\n")))
            .await;
        let permissions = conn
            .call("PERMISSIONS_CHECK_REQUEST", "perm1", serde_json::json!({}))
            .await;
        assert_eq!(
            permissions["payload"]["permissions"]["input_monitoring"], "granted",
            "{permissions}"
        );
    }

    /// Answers the portal's next remote-desktop dialog (`share` or `cancel`) as a person
    /// would, through AT-SPI; the returned child prints what it did and exits.
    #[must_use]
    pub fn person(&self, answer: &str) -> Child {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/portal_consent.py");
        self.command("/usr/bin/python3")
            .arg(script)
            .arg(answer)
            .arg(START_DEADLINE.as_secs().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the AT-SPI person")
    }

    /// One of the desktop's logs, for a failure's message.
    #[must_use]
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.runtime_dir.join(name)).unwrap_or_default()
    }

    fn bare(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .env("HOME", &self.runtime_dir)
            .env("XDG_RUNTIME_DIR", &self.runtime_dir)
            .env("XDG_CURRENT_DESKTOP", self.desktop_name())
            .env("WAYLAND_DISPLAY", WAYLAND_DISPLAY)
            .env("GTK_A11Y", "atspi")
            // Qt programs (the portal's KDE backend) on Wayland, not X11.
            .env("QT_QPA_PLATFORM", "wayland")
            .stdin(Stdio::null());
        if let Some(system) = &self.system_bus {
            command.env("DBUS_SYSTEM_BUS_ADDRESS", system);
        }
        command
    }
}

impl Drop for PortalDesktop {
    fn drop(&mut self) {
        // Clients and servers in reverse order; the bus last, whose services (the portal and
        // its backends) end with it.
        while let Some(mut child) = self.children.pop() {
            let _ = crate::sigterm(child.id());
            let deadline = Instant::now() + Duration::from_secs(5);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        // The bus's services (the document portal with its FUSE mount under `doc`, the
        // permission store) end a moment after the bus and may still write here: a first
        // removal can fail, and then a folder was left in the temp dir.
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::remove_dir_all(&self.runtime_dir).is_err()
            && self.runtime_dir.exists()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Runs scripts in a headless KWin through its scripting interface, as `qdbus` would: the
/// tests' own view of KWin's windows, and their way to place them.
#[derive(Debug, Clone)]
pub struct KwinScripts {
    env: Vec<(&'static str, String)>,
    dir: PathBuf,
}

impl KwinScripts {
    /// Runs `body` and returns the text it passes to `report(text)`, read back from KWin's log.
    pub fn run(&self, body: &str) -> String {
        use std::sync::atomic::{AtomicU32, Ordering};
        static SCRIPTS: AtomicU32 = AtomicU32::new(0);
        let mark = format!(
            "test-script-{}-{}",
            std::process::id(),
            SCRIPTS.fetch_add(1, Ordering::Relaxed)
        );
        let path = self.dir.join(format!("{mark}.js"));
        std::fs::write(
            &path,
            format!("function report(text) {{ print(\"{mark} \" + text); }}\n{body}"),
        )
        .unwrap();
        let call = |method: &str, args: &[&str]| {
            let out = Command::new("gdbus")
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .args(["call", "--session", "--dest", "org.kde.KWin"])
                .args(["--object-path", "/Scripting", "--method"])
                .arg(format!("org.kde.kwin.Scripting.{method}"))
                .args(args)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success(), "{method}: {out:?}");
        };
        call("loadScript", &[&path.display().to_string(), &mark]);
        // Every loaded script not yet running: a script's own object path can name another's
        // (see `core::desktop::portal::kwin`).
        call("start", &[]);
        let prefix = format!("js: {mark} ");
        let log = self.dir.join(COMPOSITOR_LOG);
        let deadline = Instant::now() + START_DEADLINE;
        let reported = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(line) = text.lines().find_map(|l| l.strip_prefix(&prefix)) {
                break line.to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "KWin's script reported nothing: {text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        call("unloadScript", &[&mark]);
        std::fs::remove_file(&path).unwrap();
        reported
    }
}
