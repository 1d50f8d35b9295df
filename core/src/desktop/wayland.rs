//! Computer use on a Wayland compositor through its own protocols (wlroots: sway, Hyprland,
//! river, labwc): one long-lived connection per process, owned by one thread that keeps
//! reading it (a clipboard this shim set must be served whenever someone pastes), with every
//! operation sent to that thread as a job.
//!
//! Which protocols the compositor offers decides what works ([`protocols`], asked at every
//! HELLO); nothing here depends on `XDG_SESSION_TYPE`.
//!
//! Coordinates: each output sits at its xdg-output logical position times the largest output
//! scale, with its physical (buffer) size, so on one output, or outputs of one scale, a
//! screenshot's pixel and the coordinate that clicks it are the same numbers, as on X11.

pub mod capture;
pub mod clipboard;
pub mod input;
pub mod sway;
pub mod windows;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use wayland_client::globals::{GlobalList, GlobalListContents, registry_queue_init};
use wayland_client::protocol::{wl_keyboard, wl_output, wl_registry, wl_seat, wl_shm};
use wayland_client::{Connection, Dispatch, EventQueue, QueueHandle, delegate_noop};
use wayland_protocols::xdg::xdg_output::zv1::client::{zxdg_output_manager_v1, zxdg_output_v1};
use wayland_protocols_misc::zwp_virtual_keyboard_v1::client::zwp_virtual_keyboard_manager_v1::ZwpVirtualKeyboardManagerV1;
use wayland_protocols_wlr::data_control::v1::client::zwlr_data_control_manager_v1::ZwlrDataControlManagerV1;
use wayland_protocols_wlr::foreign_toplevel::v1::client::zwlr_foreign_toplevel_manager_v1::ZwlrForeignToplevelManagerV1;
use wayland_protocols_wlr::screencopy::v1::client::zwlr_screencopy_manager_v1::ZwlrScreencopyManagerV1;
use wayland_protocols_wlr::virtual_pointer::v1::client::zwlr_virtual_pointer_manager_v1::ZwlrVirtualPointerManagerV1;

use super::{DesktopError, Display, Rect};

/// How long one job may take before the caller gives up on the compositor.
const JOB_DEADLINE: Duration = Duration::from_secs(15);
/// How long the compositor may take to send its keymap.
const KEYMAP_DEADLINE: Duration = Duration::from_secs(3);
/// How long the owner thread sleeps in poll(2) when there is nothing to read: the most a job
/// waits before it starts.
const IDLE_POLL: Duration = Duration::from_millis(5);

/// The protocol interfaces computer use asks for, by their registry names.
pub const SCREENCOPY: &str = "zwlr_screencopy_manager_v1";
/// The virtual pointer manager.
pub const VIRTUAL_POINTER: &str = "zwlr_virtual_pointer_manager_v1";
/// The virtual keyboard manager.
pub const VIRTUAL_KEYBOARD: &str = "zwp_virtual_keyboard_manager_v1";
/// The foreign toplevel manager.
pub const FOREIGN_TOPLEVEL: &str = "zwlr_foreign_toplevel_manager_v1";
/// The data control manager.
pub const DATA_CONTROL: &str = "zwlr_data_control_manager_v1";
/// The xdg-output manager (logical geometry).
pub const XDG_OUTPUT: &str = "zxdg_output_manager_v1";

/// Whether `WAYLAND_DISPLAY` (read through `var`) names a socket a compositor listens on: an
/// absolute path, or a name under `XDG_RUNTIME_DIR`.
#[must_use]
pub fn live_socket(var: &impl Fn(&str) -> Option<String>) -> bool {
    socket_path(var).is_some_and(|path| std::os::unix::net::UnixStream::connect(path).is_ok())
}

fn socket_path(var: &impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let name = var("WAYLAND_DISPLAY").filter(|v| !v.is_empty())?;
    let name = PathBuf::from(name);
    if name.is_absolute() {
        return Some(name);
    }
    let runtime = var("XDG_RUNTIME_DIR").filter(|v| !v.is_empty())?;
    Some(PathBuf::from(runtime).join(name))
}

/// What the XDG desktop portal's RemoteDesktop offers, asked without opening a session (no
/// dialog); `portal` asks and opens sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortalOffer {
    /// The RemoteDesktop interface's version.
    pub version: u32,
    /// A keyboard can be asked for.
    pub keyboard: bool,
    /// A pointer can be asked for.
    pub pointer: bool,
}

/// What the XDG desktop portal's Screenshot offers, asked without a dialog; `portal::screenshot`
/// asks and takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortalShots {
    /// GNOME Shell's screenshot service, which the portal's GNOME backend calls, is on the
    /// session bus; without it the portal never answers.
    pub service: bool,
    /// KWin is on the session bus instead: the portal's KDE backend (Plasma 5.27) answers a
    /// screenshot only through a dialog of its own, each time, non-interactive ones included
    /// (seen under a headless KWin: it answered "cancelled"), so they are not advertised.
    pub kwin: bool,
    /// What the portal's permission store says of screenshots by programs outside a sandbox:
    /// allowed, refused, or `None` when nobody was asked yet (the first screenshot asks).
    pub allowed: Option<bool>,
}

/// Why KWin takes no screenshot for this program.
pub const KWIN_SHOTS_REFUSED: &str = "KWin gives screenshots only to programs whose desktop entry lists org.kde.KWin.ScreenShot2 under X-KDE-DBUS-Restricted-Interfaces, and no entry names this program";

/// What this compositor offers computer use, from its registry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Protocols {
    /// The registry's interface names.
    pub globals: Vec<String>,
    /// The outputs, as displays.
    pub displays: Vec<Display>,
    /// The virtual pointer manager's version (2 is needed: one pointer per output).
    pub virtual_pointer_version: u32,
    /// What the desktop portal's RemoteDesktop offers, when it was asked (only where the wlr
    /// input protocols are missing) and answered.
    pub portal: Option<PortalOffer>,
    /// What the desktop portal's Screenshot offers, when it was asked (only where screencopy
    /// is missing) and answered.
    pub portal_shots: Option<PortalShots>,
    /// Whether KWin lists windows through its scripting interface on the session bus (asked
    /// only where the window list protocol is missing).
    pub kwin_windows: bool,
    /// Whether the accessibility bus lists the windows instead: the window list protocol is
    /// missing, KWin does not list them, and the session bus has the accessibility bus (GNOME's
    /// mutter, weston).
    /// Such a list says nothing of where a window is, and no window can be focused.
    pub accessible_windows: bool,
    /// Whether KWin's ScreenShot2 interface takes this program's screenshots (asked only where
    /// screencopy is missing): `None` without it, `Some(false)` when KWin refuses this program
    /// for want of a desktop entry that allows it.
    pub kwin_shots: Option<bool>,
}

impl Protocols {
    /// Whether the registry has `interface`.
    #[must_use]
    pub fn has(&self, interface: &str) -> bool {
        self.globals.iter().any(|g| g == interface)
    }

    /// Whether there is a seat (input and the clipboard need one).
    #[must_use]
    pub fn seat(&self) -> bool {
        self.has("wl_seat")
    }

    /// Screenshots: wlr-screencopy and shared memory.
    #[must_use]
    pub fn screenshots(&self) -> bool {
        self.has(SCREENCOPY) && self.has("wl_shm") && !self.displays.is_empty()
    }

    /// Screenshots through the desktop portal instead (GNOME Shell): no screencopy, a portal
    /// whose backend has the compositor's service to call, and the person has not refused.
    #[must_use]
    pub fn portal_screenshots(&self) -> bool {
        !self.screenshots()
            && self
                .portal_shots
                .is_some_and(|s| s.service && s.allowed != Some(false))
    }

    /// Screenshots through KWin's ScreenShot2 instead (KDE): no screencopy, and KWin lets this
    /// program take them.
    #[must_use]
    pub fn kwin_screenshots(&self) -> bool {
        !self.screenshots() && self.kwin_shots == Some(true)
    }

    /// The pointer: a virtual pointer bound to an output (version 2) on a seat.
    #[must_use]
    pub fn pointer(&self) -> bool {
        self.seat() && self.virtual_pointer_version >= 2
    }

    /// The keyboard: a virtual keyboard on a seat.
    #[must_use]
    pub fn keyboard(&self) -> bool {
        self.seat() && self.has(VIRTUAL_KEYBOARD)
    }

    /// Input through the wlr protocols: a virtual pointer and a virtual keyboard.
    #[must_use]
    pub fn input(&self) -> bool {
        self.pointer() && self.keyboard()
    }

    /// Input through the desktop portal instead (GNOME, KDE): no wlr input, and a RemoteDesktop
    /// interface that offers a pointer and a keyboard.
    #[must_use]
    pub fn portal_input(&self) -> bool {
        !self.input() && self.portal.is_some_and(|p| p.pointer && p.keyboard)
    }

    /// The window list and focus: the wlr protocol, or KWin's scripting where it is missing.
    #[must_use]
    pub fn windows(&self) -> bool {
        (self.seat() && self.has(FOREIGN_TOPLEVEL)) || self.kwin_windows
    }

    /// Whether a listed window's place is known (what window screenshots and accessibility
    /// boxes need), or why not: KWin's list gives each window's frame; elsewhere only sway's
    /// IPC says where a window is.
    ///
    /// # Errors
    /// The reason in one sentence.
    pub fn window_geometry(&self) -> Result<(), String> {
        if self.kwin_windows {
            return Ok(());
        }
        windows::geometry_available()
    }

    /// The clipboard.
    #[must_use]
    pub fn clipboard(&self) -> bool {
        self.seat() && self.has(DATA_CONTROL)
    }

    /// Where screencopy is missing, what takes screenshots instead, or why nothing does.
    fn shots_instead(&self) -> String {
        let wlroots = "sway, Hyprland, river and labwc offer it";
        match self.portal_shots {
            _ if self.kwin_screenshots() => {
                "screenshots go through KWin's own ScreenShot2 interface instead, which KWin opens to this program because its desktop entry allows it".to_owned()
            }
            _ if self.kwin_shots == Some(false) => {
                let this = std::env::current_exe()
                    .map(|exe| format!(" ({})", exe.display()))
                    .unwrap_or_default();
                format!(
                    "screenshots are unavailable: {KWIN_SHOTS_REFUSED}{this}; `autogpt-shim install` writes one for the copy it installs, which then takes them"
                )
            }
            _ if self.portal_screenshots() => {
                let ask = if self.portal_shots.is_some_and(|s| s.allowed == Some(true)) {
                    "the person has allowed them"
                } else {
                    "the first one asks the person in the desktop's own dialog, once"
                };
                format!(
                    "screenshots go through the desktop portal's Screenshot instead, a picture of the whole desktop the compositor writes to a file that the shim reads and removes; {ask}"
                )
            }
            Some(PortalShots {
                service: false,
                kwin: true,
                ..
            }) => format!(
                "screenshots are unavailable: KDE's desktop portal asks the person in a dialog for every screenshot, so none can be taken for an agent; {wlroots}"
            ),
            Some(PortalShots {
                allowed: Some(false),
                ..
            }) => "screenshots are unavailable: the person refused them in the desktop portal's permission store; allow them with `gdbus call --session --dest org.freedesktop.impl.portal.PermissionStore --object-path /org/freedesktop/impl/portal/PermissionStore --method org.freedesktop.impl.portal.PermissionStore.SetPermission screenshot true screenshot '' \"['yes']\"`".to_owned(),
            Some(_) => format!(
                "screenshots are unavailable: the desktop portal's Screenshot has no compositor service to call (GNOME Shell's; a bare mutter has none); {wlroots}"
            ),
            None => format!("screenshots are unavailable; {wlroots}"),
        }
    }

    /// Each missing protocol, what it costs, and which compositors offer it: one sentence
    /// each, for `doctor`.
    #[must_use]
    pub fn missing(&self) -> Vec<String> {
        let wlroots = "sway, Hyprland, river and labwc offer it";
        let mut out = Vec::new();
        if !self.has(SCREENCOPY) {
            out.push(format!(
                "no screen capture protocol ({SCREENCOPY}): {}",
                self.shots_instead()
            ));
        }
        if !self.seat() {
            out.push(
                "no seat (wl_seat): input, the window focus and the clipboard are unavailable; every desktop compositor has one"
                    .to_owned(),
            );
        }
        if let Some(offer) = self.portal.filter(|_| self.portal_input()) {
            let keep = if offer.version >= 2 {
                "a restore token spares the dialog when the session is reopened"
            } else {
                "this portal (RemoteDesktop version 1) cannot keep the consent, so every connector run asks again"
            };
            out.push(format!(
                "no virtual pointer or keyboard protocol: input goes through the desktop portal's RemoteDesktop instead, which asks the person once per connector run in the desktop's own dialog and types only what the keyboard layout has; {keep}"
            ));
        } else {
            if self.virtual_pointer_version < 2 {
                out.push(format!(
                    "no virtual pointer protocol ({VIRTUAL_POINTER} version 2): clicks and pointer moves are unavailable; {wlroots}"
                ));
            }
            if !self.has(VIRTUAL_KEYBOARD) {
                out.push(format!(
                    "no virtual keyboard protocol ({VIRTUAL_KEYBOARD}): typing is unavailable; {wlroots}"
                ));
            }
        }
        if !self.has(FOREIGN_TOPLEVEL) && !self.kwin_windows {
            out.push(if self.accessible_windows {
                format!(
                    "no window list protocol ({FOREIGN_TOPLEVEL}): windows are listed from the accessibility bus instead, without where they are, and cannot be focused; {wlroots}"
                )
            } else {
                format!(
                    "no window list protocol ({FOREIGN_TOPLEVEL}): listing and focusing windows is unavailable; {wlroots}"
                )
            });
        }
        if !self.has(DATA_CONTROL) {
            out.push(format!(
                "no clipboard protocol ({DATA_CONTROL}): the clipboard is unavailable; {wlroots}"
            ));
        }
        out
    }
}

/// The registry and outputs as the compositor has them now.
///
/// # Errors
/// [`DesktopError::Failed`] when the compositor cannot be reached.
pub fn protocols() -> Result<Protocols, DesktopError> {
    run(|wl| {
        wl.roundtrip()?;
        wl.sync_outputs()?;
        Ok(wl.offered())
    })
}

/// The compositor's current keyboard layout, from the keymap it sends its clients.
///
/// # Errors
/// [`DesktopError::Failed`] when the compositor sends no keymap.
pub fn layout() -> Result<Layout, DesktopError> {
    let (text, group) = run(|wl| {
        if wl.keyboard.is_none() {
            let seat = wl.seat("input")?;
            wl.roundtrip()?;
            // Asked before the seat has one (mutter before the portal's session makes one),
            // a keyboard would never get a keymap.
            if !wl.state.seat_keyboard {
                return Err(DesktopError::Failed(
                    "the compositor's seat has no keyboard yet".to_owned(),
                ));
            }
            wl.keyboard = Some(seat.get_keyboard(&wl.qh, ()));
        }
        wl.until(KEYMAP_DEADLINE, "the compositor sent no keymap", |state| {
            state.keymap.is_some()
        })?;
        Ok((wl.state.keymap.clone().unwrap_or_default(), wl.state.group))
    })?;
    Ok(Layout::parse(&text, group))
}

/// The keysyms one layout of a keymap has, by the names the keymap's text gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    names: std::collections::HashSet<String>,
}

impl Layout {
    /// The keysym names of XKB group `group` (0-based) in a keymap's text (the format
    /// `xkb_keymap_get_as_string` writes: a key with one group as `[ a, A ]`, one with more, or
    /// with explicit types or actions, as `symbols[Group1]= [ … ]`). A key without the group
    /// wraps to its first, as XKB does.
    #[must_use]
    pub fn parse(keymap: &str, group: u32) -> Self {
        let mut names = std::collections::HashSet::new();
        let Some(start) = keymap.find("xkb_symbols") else {
            return Self { names };
        };
        let wanted = format!("symbols[Group{}]", group + 1);
        for block in keymap[start..].split("key <").skip(1) {
            let block = block.split("};").next().unwrap_or_default();
            let list = [wanted.as_str(), "symbols[Group1]"]
                .iter()
                .find_map(|label| block.find(label).map(|at| &block[at + label.len()..]))
                .unwrap_or(block);
            let Some((_, rest)) = list.split_once('[') else {
                continue;
            };
            let levels = rest.split(']').next().unwrap_or_default();
            names.extend(
                levels
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '+'))
                    .filter(|name| !name.is_empty())
                    .map(str::to_owned),
            );
        }
        Self { names }
    }

    /// Whether some key of the layout has `keysym`.
    #[must_use]
    pub fn has(&self, keysym: u32) -> bool {
        super::virtual_input::keysym_names(keysym)
            .iter()
            .any(|name| self.names.contains(name))
    }
}

/// Every output as a display (see the module's coordinates).
///
/// # Errors
/// [`DesktopError::Failed`] when the compositor cannot be reached.
pub fn displays() -> Result<Vec<Display>, DesktopError> {
    run(|wl| {
        wl.roundtrip()?;
        wl.sync_outputs()?;
        Ok(wl.displays())
    })
}

/// One output as the compositor describes it.
#[derive(Debug)]
struct Output {
    /// The registry name of its global: the display's OS id.
    global: u32,
    wl: wl_output::WlOutput,
    xdg: Option<zxdg_output_v1::ZxdgOutputV1>,
    /// The current mode in physical pixels.
    mode: (i32, i32),
    /// `wl_output.scale` (an integer; fractional scales show only in the logical size).
    scale: i32,
    /// `wl_output.geometry`'s position, used without xdg-output.
    position: (i32, i32),
    /// The xdg-output logical position and size.
    logical_position: Option<(i32, i32)>,
    logical_size: Option<(i32, i32)>,
}

impl Output {
    fn logical(&self) -> (i64, i64, f64, f64) {
        let (pw, ph) = (f64::from(self.mode.0), f64::from(self.mode.1));
        let scale = f64::from(self.scale.max(1));
        let (x, y) = self.logical_position.unwrap_or(self.position);
        let (w, h) = self
            .logical_size
            .map_or((pw / scale, ph / scale), |(w, h)| {
                (f64::from(w), f64::from(h))
            });
        (i64::from(x), i64::from(y), w, h)
    }

    /// Physical pixels per logical pixel: the mode over the logical size, which is what a
    /// fractional scale really is.
    fn scale(&self) -> f64 {
        let (_, _, w, _) = self.logical();
        let scale = f64::from(self.mode.0) / w;
        if scale.is_finite() && scale > 0.0 {
            scale
        } else {
            1.0
        }
    }
}

/// A screencopy frame in flight.
#[derive(Debug, Default)]
struct Frame {
    shm: Option<(wl_shm::Format, u32, u32, u32)>,
    buffer_done: bool,
    y_invert: bool,
    ready: bool,
    failed: bool,
}

/// Everything the connection's events update.
#[derive(Default)]
struct State {
    outputs: Vec<Output>,
    frame: Frame,
    toplevels: windows::Toplevels,
    clipboard: clipboard::ClipboardState,
    /// The last point the virtual pointer was sent to, display-global: Wayland has no way to
    /// ask where the pointer is.
    cursor: Option<[i64; 2]>,
    /// The keyboard's keymap as the compositor last sent it (XKB text), once asked for.
    keymap: Option<String>,
    /// The keyboard's current layout (XKB group).
    group: u32,
    /// Whether the seat has a keyboard now (mutter has none until a portal session makes one).
    seat_keyboard: bool,
}

/// The connection and what lives on it, owned by the connection's thread.
struct Wl {
    conn: Connection,
    queue: EventQueue<State>,
    qh: QueueHandle<State>,
    globals: GlobalList,
    state: State,
    seat: Option<wl_seat::WlSeat>,
    xdg_manager: Option<zxdg_output_manager_v1::ZxdgOutputManagerV1>,
    devices: input::Devices,
    /// The seat's keyboard, created when the layout is first asked for.
    keyboard: Option<wl_keyboard::WlKeyboard>,
}

fn failed(what: &str, err: impl std::fmt::Display) -> DesktopError {
    DesktopError::Failed(format!("{what}: {err}"))
}

impl Wl {
    fn connect() -> Result<Self, DesktopError> {
        let conn = Connection::connect_to_env()
            .map_err(|e| failed("could not connect to the Wayland compositor", e))?;
        let (globals, queue) = registry_queue_init::<State>(&conn)
            .map_err(|e| failed("the Wayland registry failed", e))?;
        let qh = queue.handle();
        let seat = globals.bind::<wl_seat::WlSeat, _, _>(&qh, 1..=7, ()).ok();
        let xdg_manager = globals
            .bind::<zxdg_output_manager_v1::ZxdgOutputManagerV1, _, _>(&qh, 1..=3, ())
            .ok();
        let mut wl = Self {
            conn,
            queue,
            qh,
            globals,
            state: State::default(),
            seat,
            xdg_manager,
            devices: input::Devices::default(),
            keyboard: None,
        };
        // Windows are tracked from the start, so a listing is a snapshot of what is known.
        if let Ok(manager) =
            wl.globals
                .bind::<ZwlrForeignToplevelManagerV1, _, _>(&wl.qh, 1..=3, ())
        {
            wl.state.toplevels.manager = Some(manager);
        }
        wl.sync_outputs()?;
        Ok(wl)
    }

    /// What the registry offers now (the outputs as last synced).
    fn offered(&self) -> Protocols {
        let globals = self.globals.contents().clone_list();
        let virtual_pointer_version = globals
            .iter()
            .filter(|g| g.interface == VIRTUAL_POINTER)
            .map(|g| g.version)
            .max()
            .unwrap_or(0);
        Protocols {
            globals: globals.into_iter().map(|g| g.interface).collect(),
            displays: self.displays(),
            virtual_pointer_version,
            portal: None,
            portal_shots: None,
            kwin_windows: false,
            accessible_windows: false,
            kwin_shots: None,
        }
    }

    fn roundtrip(&mut self) -> Result<(), DesktopError> {
        self.queue
            .roundtrip(&mut self.state)
            .map(drop)
            .map_err(|e| failed("the Wayland compositor stopped answering", e))
    }

    /// Dispatches events until `done` holds or `deadline` passes.
    fn until(
        &mut self,
        deadline: Duration,
        what: &str,
        done: impl Fn(&State) -> bool,
    ) -> Result<(), DesktopError> {
        if self.dispatch_until(deadline, what, done)? {
            Ok(())
        } else {
            Err(DesktopError::Failed(format!("{what}: no answer in time")))
        }
    }

    /// Dispatches events (answering the compositor's requests) for `duration`.
    fn serve_for(&mut self, duration: Duration) -> Result<(), DesktopError> {
        self.dispatch_until(duration, "the Wayland compositor went away", |_| false)
            .map(drop)
    }

    /// Dispatches events until `done` holds (true) or `deadline` passes (false).
    fn dispatch_until(
        &mut self,
        deadline: Duration,
        what: &str,
        done: impl Fn(&State) -> bool,
    ) -> Result<bool, DesktopError> {
        let end = Instant::now() + deadline;
        loop {
            self.queue
                .dispatch_pending(&mut self.state)
                .map_err(|e| failed(what, e))?;
            if done(&self.state) {
                return Ok(true);
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            self.read_events(left.min(Duration::from_millis(100)))
                .map_err(|e| failed(what, e))?;
        }
    }

    /// Flushes, then reads what arrives within `wait` (dispatching is the caller's).
    fn read_events(&mut self, wait: Duration) -> Result<(), wayland_client::backend::WaylandError> {
        self.conn.flush()?;
        let Some(guard) = self.queue.prepare_read() else {
            return Ok(());
        };
        let readable = {
            let fd = guard.connection_fd();
            let mut fds = [rustix::event::PollFd::new(
                &fd,
                rustix::event::PollFlags::IN,
            )];
            let timeout = rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: i64::from(wait.subsec_nanos()),
            };
            rustix::event::poll(&mut fds, Some(&timeout)).unwrap_or(0) > 0
        };
        if readable {
            guard.read()?;
        }
        Ok(())
    }

    /// Binds the outputs the registry lists and forgets those it no longer does.
    fn sync_outputs(&mut self) -> Result<(), DesktopError> {
        let listed: Vec<(u32, u32)> = self
            .globals
            .contents()
            .clone_list()
            .into_iter()
            .filter(|g| g.interface == "wl_output")
            .map(|g| (g.name, g.version))
            .collect();
        let (kept, gone): (Vec<Output>, Vec<Output>) = std::mem::take(&mut self.state.outputs)
            .into_iter()
            .partition(|o| listed.iter().any(|(name, _)| *name == o.global));
        self.state.outputs = kept;
        for output in gone {
            if let Some(xdg) = output.xdg {
                xdg.destroy();
            }
        }
        let mut added = false;
        for (name, version) in listed {
            if self.state.outputs.iter().any(|o| o.global == name) {
                continue;
            }
            let wl = self.globals.registry().bind::<wl_output::WlOutput, _, _>(
                name,
                version.min(4),
                &self.qh,
                name,
            );
            let xdg = self
                .xdg_manager
                .as_ref()
                .map(|m| m.get_xdg_output(&wl, &self.qh, name));
            self.state.outputs.push(Output {
                global: name,
                wl,
                xdg,
                mode: (0, 0),
                scale: 1,
                position: (0, 0),
                logical_position: None,
                logical_size: None,
            });
            added = true;
        }
        if added {
            // The output's events, then the xdg-output's that follow them.
            self.roundtrip()?;
            self.roundtrip()?;
        }
        Ok(())
    }

    /// The outputs as displays in display-global coordinates (the module's doc).
    fn displays(&self) -> Vec<Display> {
        let outputs: Vec<&Output> = self
            .state
            .outputs
            .iter()
            .filter(|o| o.mode.0 > 0 && o.mode.1 > 0)
            .collect();
        let factor = outputs.iter().map(|o| o.scale()).fold(1.0_f64, f64::max);
        outputs
            .iter()
            .enumerate()
            .map(|(index, o)| {
                let (x, y, _, _) = o.logical();
                let at = |v: i64| (v as f64 * factor).round() as i64;
                Display {
                    index,
                    primary: index == 0,
                    rect: Rect {
                        x: at(x),
                        y: at(y),
                        width: u64::try_from(o.mode.0).unwrap_or(0),
                        height: u64::try_from(o.mode.1).unwrap_or(0),
                    },
                    scale: o.scale(),
                    os_id: o.global,
                }
            })
            .collect()
    }

    fn output(&self, os_id: u32) -> Result<&Output, DesktopError> {
        self.state
            .outputs
            .iter()
            .find(|o| o.global == os_id)
            .ok_or_else(|| DesktopError::Failed("the output went away".to_owned()))
    }

    fn seat(&self, feature: &str) -> Result<wl_seat::WlSeat, DesktopError> {
        self.seat.clone().ok_or_else(|| {
            DesktopError::unsupported(feature, "this Wayland compositor has no seat")
        })
    }
}

type Job = Box<dyn FnOnce(&mut Wl) + Send>;

/// The connection's thread: its job queue and the display it talks to.
struct Owner {
    jobs: mpsc::Sender<Job>,
    display: (Option<OsString>, Option<OsString>),
}

static OWNER: Mutex<Option<Owner>> = Mutex::new(None);

/// The display this process would connect to now.
fn target() -> (Option<OsString>, Option<OsString>) {
    (
        std::env::var_os("WAYLAND_DISPLAY"),
        std::env::var_os("XDG_RUNTIME_DIR"),
    )
}

/// Runs `job` on the connection's thread and waits for its answer; connects (again) when
/// there is no live connection to the display the environment names.
fn run<T: Send + 'static>(
    job: impl FnOnce(&mut Wl) -> Result<T, DesktopError> + Send + 'static,
) -> Result<T, DesktopError> {
    let (answer, answered) = mpsc::sync_channel(1);
    let job: Job = Box::new(move |wl| {
        let _ = answer.send(job(wl));
    });
    let mut owner = OWNER.lock().unwrap_or_else(PoisonError::into_inner);
    let mut job = Some(job);
    for _ in 0..2 {
        if owner.as_ref().is_none_or(|o| o.display != target()) {
            *owner = Some(spawn()?);
        }
        let Some(current) = owner.as_ref() else {
            break;
        };
        match current
            .jobs
            .send(job.take().unwrap_or_else(|| Box::new(|_| {})))
        {
            Ok(()) => break,
            // The thread ended (the compositor went away): connect afresh, once.
            Err(mpsc::SendError(returned)) => {
                job = Some(returned);
                *owner = None;
            }
        }
    }
    drop(owner);
    answered.recv_timeout(JOB_DEADLINE).unwrap_or_else(|_| {
        Err(DesktopError::Failed(
            "the Wayland compositor did not answer in time".to_owned(),
        ))
    })
}

/// Connects and starts the thread that owns the connection.
fn spawn() -> Result<Owner, DesktopError> {
    let (ready, connected) = mpsc::sync_channel(1);
    let (jobs, queue) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("wayland".to_owned())
        .spawn(move || {
            let mut wl = match Wl::connect() {
                Ok(wl) => {
                    let _ = ready.send(Ok(()));
                    wl
                }
                Err(err) => {
                    let _ = ready.send(Err(err));
                    return;
                }
            };
            serve(&mut wl, &queue);
        })
        .map_err(|e| failed("could not start the Wayland thread", e))?;
    connected.recv_timeout(JOB_DEADLINE).unwrap_or_else(|_| {
        Err(DesktopError::Failed(
            "the Wayland compositor did not answer".to_owned(),
        ))
    })?;
    Ok(Owner {
        jobs,
        display: target(),
    })
}

/// Runs jobs and reads events until the connection breaks or nobody can send jobs any more.
fn serve(wl: &mut Wl, queue: &mpsc::Receiver<Job>) {
    loop {
        loop {
            match queue.try_recv() {
                Ok(job) => job(wl),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        }
        if wl.queue.dispatch_pending(&mut wl.state).is_err() || wl.read_events(IDLE_POLL).is_err() {
            return;
        }
        if wl.queue.dispatch_pending(&mut wl.state).is_err() {
            return;
        }
    }
}

/// Milliseconds for event timestamps (only their order and spacing matter to clients).
fn now_ms() -> u32 {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    u32::try_from(ms % (1 << 32)).unwrap_or(0)
}

/// An anonymous in-memory file (memfd) of `len` bytes: shared memory for buffers and keymaps
/// without mapping it (pread/pwrite instead of mmap, which would need unsafe code).
fn memfd(name: &str, len: u64) -> Result<std::fs::File, DesktopError> {
    let fd = rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)
        .map_err(|e| failed("could not create shared memory", e))?;
    let file = std::fs::File::from(fd);
    file.set_len(len)
        .map_err(|e| failed("could not size shared memory", e))?;
    Ok(file)
}

impl Dispatch<wl_registry::WlRegistry, GlobalListContents> for State {
    fn event(
        _: &mut Self,
        _: &wl_registry::WlRegistry,
        _: wl_registry::Event,
        _: &GlobalListContents,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        // GlobalList keeps the list itself; outputs are re-synced from it when asked.
    }
}

impl Dispatch<wl_seat::WlSeat, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_seat::WlSeat,
        event: wl_seat::Event,
        (): &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_seat::Event::Capabilities {
            capabilities: wayland_client::WEnum::Value(capabilities),
        } = event
        {
            state.seat_keyboard = capabilities.contains(wl_seat::Capability::Keyboard);
        }
    }
}
delegate_noop!(State: ignore wl_shm::WlShm);
delegate_noop!(State: zxdg_output_manager_v1::ZxdgOutputManagerV1);
delegate_noop!(State: ZwlrScreencopyManagerV1);
delegate_noop!(State: ZwlrVirtualPointerManagerV1);
delegate_noop!(State: ZwpVirtualKeyboardManagerV1);
delegate_noop!(State: ZwlrDataControlManagerV1);

impl Dispatch<wl_output::WlOutput, u32> for State {
    fn event(
        state: &mut Self,
        _: &wl_output::WlOutput,
        event: wl_output::Event,
        global: &u32,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let Some(output) = state.outputs.iter_mut().find(|o| o.global == *global) else {
            return;
        };
        match event {
            wl_output::Event::Mode {
                flags,
                width,
                height,
                ..
            } => {
                let current = match flags {
                    wayland_client::WEnum::Value(f) => f.contains(wl_output::Mode::Current),
                    wayland_client::WEnum::Unknown(bits) => bits & 1 == 1,
                };
                if current {
                    output.mode = (width, height);
                }
            }
            wl_output::Event::Scale { factor } => output.scale = factor,
            wl_output::Event::Geometry { x, y, .. } => output.position = (x, y),
            _ => {}
        }
    }
}

impl Dispatch<wl_keyboard::WlKeyboard, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_keyboard::WlKeyboard,
        event: wl_keyboard::Event,
        (): &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            wl_keyboard::Event::Keymap { format, fd, size } => {
                if format != wayland_client::WEnum::Value(wl_keyboard::KeymapFormat::XkbV1) {
                    return;
                }
                // Read, not mapped (mapping would need unsafe code); the text ends in a NUL.
                let mut text = vec![0; usize::try_from(size).unwrap_or(0)];
                let file = std::fs::File::from(fd);
                if std::os::unix::fs::FileExt::read_exact_at(&file, &mut text, 0).is_ok() {
                    let end = text.iter().position(|b| *b == 0).unwrap_or(text.len());
                    text.truncate(end);
                    state.keymap = Some(String::from_utf8_lossy(&text).into_owned());
                }
            }
            wl_keyboard::Event::Modifiers { group, .. } => state.group = group,
            _ => {}
        }
    }
}

impl Dispatch<zxdg_output_v1::ZxdgOutputV1, u32> for State {
    fn event(
        state: &mut Self,
        _: &zxdg_output_v1::ZxdgOutputV1,
        event: zxdg_output_v1::Event,
        global: &u32,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let Some(output) = state.outputs.iter_mut().find(|o| o.global == *global) else {
            return;
        };
        match event {
            zxdg_output_v1::Event::LogicalPosition { x, y } => {
                output.logical_position = Some((x, y));
            }
            zxdg_output_v1::Event::LogicalSize { width, height } => {
                output.logical_size = Some((width, height));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_found_under_the_runtime_dir_or_by_absolute_path() {
        let dir = crate::test_dir::TempDir::new("wl-socket");
        let path = dir.path().join("wayland-7");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let runtime = dir.path().to_string_lossy().into_owned();
        let env = |display: &'static str, runtime: String| {
            move |name: &str| match name {
                "WAYLAND_DISPLAY" => Some(display.to_owned()),
                "XDG_RUNTIME_DIR" => Some(runtime.clone()),
                _ => None,
            }
        };
        assert!(live_socket(&env("wayland-7", runtime.clone())));
        assert!(!live_socket(&env("wayland-8", runtime.clone())));
        assert!(!live_socket(&env("", runtime.clone())));
        let absolute = path.to_string_lossy().into_owned();
        assert!(live_socket(&move |name: &str| {
            (name == "WAYLAND_DISPLAY").then(|| absolute.clone())
        }));
        // A socket file nobody listens on any more is not a session.
        drop(listener);
        assert!(!live_socket(&env("wayland-7", runtime)));
    }

    #[test]
    fn a_layout_is_read_from_the_keymaps_text() {
        // As mutter sends it, cut short: simple keys, a key with an explicit type, a key with
        // two groups, and a modifier with its actions.
        let keymap = "xkb_keymap {\nxkb_keycodes \"evdev+aliases(qwerty)\" {\n\t<AE01> = 10;\n};\n\
            xkb_symbols \"pc+us+ru:2\" {\n\tname[Group1]=\"English (US)\";\n\
            \tkey <AE01>                {\t[               1,          exclam ] };\n\
            \tkey <AD01>                {\n\t\ttype= \"ALPHABETIC\",\n\t\tsymbols[Group1]= [               q,               Q ]\n\t};\n\
            \tkey <AC01>                {\n\t\tsymbols[Group1]= [               a,               A ],\n\t\tsymbols[Group2]= [ Cyrillic_ef, Cyrillic_EF ]\n\t};\n\
            \tkey <LFSH>                {\n\t\tsymbols[Group1]= [ Shift_L ],\n\t\tactions[Group1]= [ SetMods(modifiers=Shift) ]\n\t};\n\
            \tkey <I147>                {\t[     XF86MenuKB ] };\n\
            \tmodifier_map Shift { <LFSH> };\n};\n};\n";
        let us = Layout::parse(keymap, 0);
        for keysym in [0x31, 0x21, 0x71, 0x51, 0x61, 0x41, 0xffe1] {
            assert!(us.has(keysym), "{keysym:#x}");
        }
        assert!(!us.has(0x6c6), "Cyrillic_ef is in the second group");
        assert!(!us.has(0x2713) && !us.has(0x0100_2713));
        let ru = Layout::parse(keymap, 1);
        assert!(ru.has(0x6c6) && !ru.has(0x61));
        // Keys with one group wrap to it in any group.
        assert!(ru.has(0x21) && ru.has(0xffe1));
        assert!(!us.names.contains("SetMods") && !us.names.contains("ALPHABETIC"));
    }

    #[test]
    fn doctor_names_every_missing_protocol_in_a_sentence() {
        let weston = Protocols {
            globals: vec!["wl_shm".to_owned(), "wl_output".to_owned()],
            displays: Vec::new(),
            virtual_pointer_version: 0,
            portal: None,
            portal_shots: None,
            kwin_windows: false,
            accessible_windows: false,
            kwin_shots: None,
        };
        let missing = weston.missing();
        assert_eq!(missing.len(), 6, "{missing:?}");
        assert!(missing.iter().any(|m| m.starts_with(
            "no virtual keyboard protocol (zwp_virtual_keyboard_manager_v1): typing is unavailable; sway"
        )));
        let sway = Protocols {
            globals: [
                "wl_seat",
                "wl_shm",
                SCREENCOPY,
                VIRTUAL_POINTER,
                VIRTUAL_KEYBOARD,
                FOREIGN_TOPLEVEL,
                DATA_CONTROL,
            ]
            .map(str::to_owned)
            .to_vec(),
            displays: Vec::new(),
            virtual_pointer_version: 2,
            portal: None,
            portal_shots: None,
            kwin_windows: false,
            accessible_windows: false,
            kwin_shots: None,
        };
        // A bare mutter: no wlr protocol, input through the portal's RemoteDesktop version 1,
        // and a Screenshot portal with no compositor service to call.
        let mut gnome = Protocols {
            globals: ["wl_seat", "wl_shm", "wl_output", XDG_OUTPUT]
                .map(str::to_owned)
                .to_vec(),
            displays: Vec::new(),
            virtual_pointer_version: 0,
            portal: Some(PortalOffer {
                version: 1,
                keyboard: true,
                pointer: true,
            }),
            portal_shots: Some(PortalShots {
                service: false,
                kwin: false,
                allowed: None,
            }),
            kwin_windows: false,
            accessible_windows: false,
            kwin_shots: None,
        };
        assert!(gnome.portal_input() && !gnome.input());
        assert!(!gnome.portal_screenshots());
        let missing = gnome.missing();
        assert_eq!(missing.len(), 4, "{missing:?}");
        assert!(missing[0].ends_with("the desktop portal's Screenshot has no compositor service to call (GNOME Shell's; a bare mutter has none); sway, Hyprland, river and labwc offer it"), "{missing:?}");
        assert!(missing[1].starts_with("no virtual pointer or keyboard protocol: input goes through the desktop portal's RemoteDesktop instead, which asks the person once per connector run"), "{missing:?}");
        assert!(missing[1].ends_with("this portal (RemoteDesktop version 1) cannot keep the consent, so every connector run asks again"), "{missing:?}");
        assert!(
            missing[2].contains("listing and focusing windows is unavailable"),
            "{missing:?}"
        );
        // With a session bus the applications list their windows there.
        gnome.accessible_windows = true;
        assert!(!gnome.windows(), "no focus without a protocol");
        assert_eq!(
            gnome.missing()[2],
            "no window list protocol (zwlr_foreign_toplevel_manager_v1): windows are listed from the accessibility bus instead, without where they are, and cannot be focused; sway, Hyprland, river and labwc offer it"
        );
        gnome.accessible_windows = false;
        // GNOME Shell: its service is there; the first screenshot asks, unless allowed before.
        gnome.portal_shots = Some(PortalShots {
            service: true,
            kwin: false,
            allowed: None,
        });
        assert!(gnome.portal_screenshots() && !gnome.screenshots());
        assert!(
            gnome.missing()[0]
                .ends_with("the first one asks the person in the desktop's own dialog, once")
        );
        gnome.portal_shots = Some(PortalShots {
            service: true,
            kwin: false,
            allowed: Some(true),
        });
        assert!(gnome.missing()[0].starts_with("no screen capture protocol (zwlr_screencopy_manager_v1): screenshots go through the desktop portal's Screenshot instead"));
        assert!(gnome.missing()[0].ends_with("the person has allowed them"));
        gnome.portal_shots = Some(PortalShots {
            service: true,
            kwin: false,
            allowed: Some(false),
        });
        assert!(!gnome.portal_screenshots());
        assert!(gnome.missing()[0].contains("the person refused them in the desktop portal's permission store; allow them with `gdbus call"));
        // KDE: KWin on the bus, whose portal backend would ask for every screenshot.
        let mut kde = gnome;
        kde.portal_shots = Some(PortalShots {
            service: false,
            kwin: true,
            allowed: None,
        });
        assert!(kde.portal_input() && !kde.portal_screenshots());
        assert!(kde.missing()[0].ends_with("screenshots are unavailable: KDE's desktop portal asks the person in a dialog for every screenshot, so none can be taken for an agent; sway, Hyprland, river and labwc offer it"), "{:?}", kde.missing());
        // KWin's own ScreenShot2, which refuses a program without a desktop entry allowing it.
        kde.kwin_shots = Some(false);
        assert!(!kde.kwin_screenshots());
        assert!(kde.missing()[0].contains("KWin gives screenshots only to programs whose desktop entry lists org.kde.KWin.ScreenShot2 under X-KDE-DBUS-Restricted-Interfaces, and no entry names this program ("), "{:?}", kde.missing());
        assert!(kde.missing()[0].ends_with(
            "`autogpt-shim install` writes one for the copy it installs, which then takes them"
        ));
        kde.kwin_shots = Some(true);
        assert!(kde.kwin_screenshots() && !kde.portal_screenshots());
        assert!(kde.missing()[0].ends_with("screenshots go through KWin's own ScreenShot2 interface instead, which KWin opens to this program because its desktop entry allows it"));
        kde.kwin_shots = None;
        // KWin lists windows through its scripting: the window list is not missing there.
        assert!(!kde.windows());
        assert!(
            kde.missing()
                .iter()
                .any(|m| m.starts_with("no window list protocol"))
        );
        kde.kwin_windows = true;
        assert!(kde.windows());
        assert!(
            !kde.missing()
                .iter()
                .any(|m| m.starts_with("no window list protocol"))
        );
        assert_eq!(sway.missing(), Vec::<String>::new());
        assert!(sway.pointer() && sway.keyboard() && sway.windows() && sway.clipboard());
        assert!(!sway.screenshots(), "no output, no screenshot");
    }
}
