//! Pointer and keyboard through the XDG desktop portal's RemoteDesktop interface, for Wayland
//! compositors that offer no wlr virtual-input protocol (GNOME's mutter, KDE's KWin).
//!
//! The portal asks the person once per session, in a dialog of the desktop's own, which
//! monitors to share and whether to allow remote interaction; the session then lives as long
//! as the D-Bus connection that opened it, so one thread owns that connection (on a tokio
//! runtime of its own, zbus's executor) and every input is a job sent to it.
//!
//! Input goes through the portal's `Notify*` calls. The libei route (`ConnectToEIS`, portal
//! version 2) would add nothing the calls lack for our messages; restore tokens exist only
//! from RemoteDesktop version 2, and this code asks for one when the portal offers it.
//! Absolute pointer motion is relative to a screen-cast stream, so the session also selects
//! every monitor as a source; the streams' PipeWire frames are never read.
//!
//! The connector keeps one session for the whole run ([`perform`]): opened at the first input
//! action, kept, and opened again (a new dialog, unless the portal gave a restore token) only
//! when the portal closes it. mutter and KWin type only keysyms of the current keyboard layout
//! and drop the rest without a word, so a text or chord with any other is refused before a key
//! is sent.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt as _;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

pub mod kwin;
pub mod kwin_screenshot;
pub mod screenshot;

use super::action::{Action, Button, MAX_WAIT, ScrollDirection};
use super::virtual_input::{self, Device, Key};
use super::{DesktopError, Display};

const DESTINATION: &str = "org.freedesktop.portal.Desktop";
const PATH: &str = "/org/freedesktop/portal/desktop";
const REMOTE_DESKTOP: &str = "org.freedesktop.portal.RemoteDesktop";
const SCREEN_CAST: &str = "org.freedesktop.portal.ScreenCast";
/// The accessibility bus's launcher (at-spi2-core), started by the session bus when called.
const ACCESSIBILITY_BUS: &str = "org.a11y.Bus";
const REQUEST: &str = "org.freedesktop.portal.Request";
/// What a declined RemoteDesktop dialog is named in `PERMISSION_PENDING`.
const REMOTE_DESKTOP_PERMISSION: &str = "remote desktop";

/// `AvailableDeviceTypes` and `types` bits.
const KEYBOARD: u32 = 1;
const POINTER: u32 = 2;
/// ScreenCast source type: a monitor.
const MONITOR: u32 = 1;
/// `persist_mode`: until the person revokes it.
const PERSIST_UNTIL_REVOKED: u32 = 2;

/// How long a new session's keyboard takes to wake (see [`wake`]).
const WAKE: Duration = Duration::from_millis(300);
/// How long a portal call other than the consent may take.
const CALL_DEADLINE: Duration = Duration::from_secs(10);
/// How long the first input action waits for the person to answer the portal's dialog.
pub const CONSENT_DEADLINE: Duration = Duration::from_secs(60);

/// What the portal offers, asked without opening a session (no dialog). Declared with the
/// rest of what a Wayland session offers, so `wayland` needs nothing of this module.
pub use super::wayland::PortalOffer as Offer;

/// One shared monitor: the stream that absolute motion is relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stream {
    /// The PipeWire node id, which names the stream in `NotifyPointerMotionAbsolute`.
    pub node: u32,
    /// Its top-left corner in the compositor's logical layout.
    pub position: (i32, i32),
    /// Its size in logical pixels.
    pub size: (i32, i32),
}

/// The stream holding a logical point and the point relative to it, when one does.
#[must_use]
pub fn locate(streams: &[Stream], x: f64, y: f64) -> Option<(u32, f64, f64)> {
    streams.iter().find_map(|s| {
        let (dx, dy) = (x - f64::from(s.position.0), y - f64::from(s.position.1));
        let inside =
            (0.0..f64::from(s.size.0)).contains(&dx) && (0.0..f64::from(s.size.1)).contains(&dy);
        inside.then_some((s.node, dx, dy))
    })
}

/// One input event for the portal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event {
    /// The pointer to a point of a stream, in its logical pixels.
    Motion {
        /// The stream's node.
        stream: u32,
        /// Across.
        x: f64,
        /// Down.
        y: f64,
    },
    /// A button (a Linux evdev code, `BTN_LEFT` = 0x110) pressed or released.
    Button {
        /// The evdev code.
        code: i32,
        /// Pressed (true) or released.
        pressed: bool,
    },
    /// Wheel clicks: axis 0 vertical, 1 horizontal; positive is down or right.
    Scroll {
        /// The axis.
        axis: u32,
        /// How many clicks.
        steps: i32,
    },
    /// A key, by its X keysym, pressed or released.
    Key {
        /// The keysym.
        keysym: u32,
        /// Pressed (true) or released.
        pressed: bool,
    },
}

impl Event {
    fn method(self) -> &'static str {
        match self {
            Self::Motion { .. } => "NotifyPointerMotionAbsolute",
            Self::Button { .. } => "NotifyPointerButton",
            Self::Scroll { .. } => "NotifyPointerAxisDiscrete",
            Self::Key { .. } => "NotifyKeyboardKeysym",
        }
    }
}

/// Asks the portal what it offers; `None` when no portal answers or it has no RemoteDesktop.
pub async fn offer(bus: &zbus::Connection) -> Option<Offer> {
    let version = property_u32(bus, REMOTE_DESKTOP, "version").await?;
    let types = property_u32(bus, REMOTE_DESKTOP, "AvailableDeviceTypes")
        .await
        .unwrap_or(0);
    Some(Offer {
        version,
        keyboard: types & KEYBOARD != 0,
        pointer: types & POINTER != 0,
    })
}

/// A `u32` property of one of the portal's interfaces; `None` when the portal does not answer
/// within [`CALL_DEADLINE`] or has no such property.
pub(super) async fn property_u32(
    bus: &zbus::Connection,
    interface: &str,
    name: &str,
) -> Option<u32> {
    let reply = call_bounded(
        bus,
        DESTINATION,
        PATH,
        "org.freedesktop.DBus.Properties",
        "Get",
        &(interface, name),
    )
    .await?;
    let value: OwnedValue = reply.body().deserialize().ok()?;
    u32::try_from(value).ok()
}

/// One method call on any object of the bus, given up after [`CALL_DEADLINE`]; `None` when it
/// failed or took longer.
pub(super) async fn call_bounded<B>(
    bus: &zbus::Connection,
    destination: &str,
    path: &str,
    interface: &str,
    method: &str,
    body: &B,
) -> Option<zbus::Message>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    let called = bus.call_method(Some(destination), path, Some(interface), method, body);
    tokio::time::timeout(CALL_DEADLINE, called).await.ok()?.ok()
}

/// An open RemoteDesktop session: the person said yes. Dropping it closes the session.
#[derive(Debug)]
pub struct Session {
    jobs: tokio::sync::mpsc::UnboundedSender<(Event, std_mpsc::Sender<Result<(), DesktopError>>)>,
    streams: Vec<Stream>,
    restore_token: Option<String>,
    /// Set when the portal closed the session (the person stopped sharing) or its connection
    /// broke.
    ended: Arc<AtomicBool>,
}

impl Session {
    /// Opens a session, showing the portal's dialog unless `restore_token` (from an earlier
    /// session, portal version 2 and later) spares it, and waits up to `consent` for the
    /// person's answer.
    ///
    /// # Errors
    /// [`DesktopError::PermissionPending`] when the person declines, closes the dialog, does
    /// not allow remote interaction or does not answer in time; [`DesktopError::Failed`] when
    /// the portal fails.
    /// `bus` is the session bus's address, `None` for this process's own
    /// (`DBUS_SESSION_BUS_ADDRESS`).
    pub fn open(
        bus: Option<String>,
        restore_token: Option<String>,
        consent: Duration,
    ) -> Result<Self, DesktopError> {
        let (jobs, mut queue) = tokio::sync::mpsc::unbounded_channel::<(
            Event,
            std_mpsc::Sender<Result<(), DesktopError>>,
        )>();
        let (ready, opened) = std_mpsc::channel();
        let ended = Arc::new(AtomicBool::new(false));
        let ending = Arc::clone(&ended);
        let owner = move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    let _ = ready.send(Err(failed("start its thread", &err)));
                    return;
                }
            };
            runtime.block_on(async move {
                let opened = start(bus, restore_token, consent).await;
                let (bus, session) = match opened {
                    Ok((bus, session, streams, token)) => {
                        wake(&bus, &session).await;
                        let _ = ready.send(Ok((streams, token)));
                        (bus, session)
                    }
                    Err(err) => {
                        let _ = ready.send(Err(err));
                        return;
                    }
                };
                let closed = async {
                    let proxy = zbus::Proxy::new(
                        &bus,
                        DESTINATION,
                        session.as_ref(),
                        "org.freedesktop.portal.Session",
                    )
                    .await
                    .ok()?;
                    proxy.receive_signal("Closed").await.ok()
                }
                .await;
                let Some(mut closed) = closed else {
                    ending.store(true, Ordering::SeqCst);
                    return;
                };
                loop {
                    tokio::select! {
                        job = queue.recv() => {
                            let Some((event, done)) = job else { break };
                            let _ = done.send(notify(&bus, &session, event).await);
                        }
                        // The portal closed it, or the bus went away: nothing more can be sent.
                        _ = closed.next() => {
                            ending.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                }
                // The session ends with its connection anyway; closing says so at once.
                let _ = bus
                    .call_method(
                        Some(DESTINATION),
                        session.as_ref(),
                        Some("org.freedesktop.portal.Session"),
                        "Close",
                        &(),
                    )
                    .await;
            });
        };
        std::thread::Builder::new()
            .name("desktop-portal".to_owned())
            .spawn(owner)
            .map_err(|err| failed("start its thread", &err))?;
        let (streams, restore_token) = opened
            .recv()
            .map_err(|_| DesktopError::Failed("the desktop portal's thread ended".to_owned()))??;
        Ok(Self {
            jobs,
            streams,
            restore_token,
            ended,
        })
    }

    /// Whether the session still takes input: the portal has not closed it.
    #[must_use]
    pub fn is_open(&self) -> bool {
        !self.ended.load(Ordering::SeqCst) && !self.jobs.is_closed()
    }

    /// The shared monitors.
    #[must_use]
    pub fn streams(&self) -> &[Stream] {
        &self.streams
    }

    /// The token that opens the next session without a dialog, when the portal gave one.
    #[must_use]
    pub fn restore_token(&self) -> Option<&str> {
        self.restore_token.as_deref()
    }

    /// Sends one event and waits for the portal to take it.
    ///
    /// # Errors
    /// [`DesktopError::Failed`] when the portal refuses it or the session has ended (the
    /// person stopped sharing); a new session asks again.
    pub fn send(&self, event: Event) -> Result<(), DesktopError> {
        let (done, taken) = std_mpsc::channel();
        self.jobs.send((event, done)).map_err(|_| ended())?;
        taken.recv().map_err(|_| ended())?
    }
}

/// The session kept for the connector's run, and what outlives one session.
struct Kept {
    session: Option<Session>,
    /// The session bus it was opened on (`DBUS_SESSION_BUS_ADDRESS`).
    bus: Option<String>,
    /// The portal's last restore token (RemoteDesktop version 2 and later).
    restore_token: Option<String>,
    /// The last point the pointer was moved to, display-global.
    cursor: Option<[i64; 2]>,
}

static KEPT: Mutex<Kept> = Mutex::new(Kept {
    session: None,
    bus: None,
    restore_token: None,
    cursor: None,
});

/// Performs `action`, whose points the caller has checked against `displays`, through the
/// kept session, opening it first (the portal's dialog, waiting up to [`CONSENT_DEADLINE`]
/// for the person) when there is none or the portal closed it.
///
/// `paste` says whether the clipboard is enabled for `type` with `paste`: where the
/// compositor offers its clipboard to the shim (KWin's wlr-data-control), the text goes
/// through it and only the paste chord through the portal, so characters the layout lacks
/// arrive too.
///
/// # Errors
/// [`DesktopError::NotSupported`] (`input.type`, `input.key`) for a character or key the
/// keyboard layout lacks, before anything is sent; [`DesktopError::PermissionPending`] when
/// the person declines; [`DesktopError::Failed`] when the portal fails or the session ends
/// mid-action.
pub fn perform(action: &Action, displays: &[Display], paste: bool) -> Result<(), DesktopError> {
    if let Action::Wait { duration } = action {
        std::thread::sleep((*duration).min(MAX_WAIT));
        return Ok(());
    }
    let clipboard = paste
        && matches!(action, Action::Type { paste: true, .. })
        && super::wayland::protocols().is_ok_and(|offered| offered.clipboard());
    let wanted = keys_of(action, clipboard)?;
    // The layout is known once a keyboard exists; a new session makes one (mutter), so when
    // it cannot be read yet it is read again once the session is open.
    let mut chosen = if wanted.is_empty() {
        Some(HashMap::new())
    } else {
        match super::wayland::layout() {
            Ok(layout) => Some(choose(action, &wanted, &layout)?),
            Err(_) => None,
        }
    };
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    let bus = std::env::var("DBUS_SESSION_BUS_ADDRESS").ok();
    let open = kept
        .session
        .as_ref()
        .is_some_and(|session| session.is_open() && kept.bus == bus);
    if !open {
        kept.session = None;
        let session = Session::open(None, kept.restore_token.clone(), CONSENT_DEADLINE)?;
        if let Some(token) = session.restore_token() {
            kept.restore_token = Some(token.to_owned());
        }
        kept.session = Some(session);
        kept.bus = bus;
    }
    let chosen = match chosen.take() {
        Some(chosen) => chosen,
        None => choose(action, &wanted, &super::wayland::layout()?)?,
    };
    let Kept {
        session, cursor, ..
    } = &mut *kept;
    let Some(session) = session.as_ref() else {
        return Err(ended());
    };
    let mut device = Remote {
        session,
        displays,
        cursor,
        chosen,
        clipboard,
    };
    virtual_input::perform(&mut device, action, clipboard)
}

/// The last point the kept session moved the pointer to.
#[must_use]
pub fn cursor() -> Option<[i64; 2]> {
    KEPT.lock().unwrap_or_else(PoisonError::into_inner).cursor
}

/// Whether a session is open now: the person consented and has not stopped sharing. `None`
/// while a session is being opened.
#[must_use]
pub fn consented() -> Option<bool> {
    let kept = KEPT.try_lock().ok()?;
    Some(kept.session.as_ref().is_some_and(Session::is_open))
}

/// What the compositor offers ([`super::wayland::protocols`]), and where its protocols are
/// missing, what the portal offers instead (asked on the session bus, with no dialog): its
/// RemoteDesktop for input, its Screenshot or KWin's ScreenShot2 for screenshots, KWin's
/// scripting for the window list.
///
/// # Errors
/// [`DesktopError::Failed`] when the compositor cannot be reached.
pub fn protocols_with_offer() -> Result<super::wayland::Protocols, DesktopError> {
    let mut protocols = super::wayland::protocols()?;
    let (input, shots) = (!protocols.input(), !protocols.screenshots());
    let windows = !protocols.has(super::wayland::FOREIGN_TOPLEVEL);
    if input || shots || windows {
        let asked = ask(|bus| async move {
            let portal = if input { offer(&bus).await } else { None };
            let portal_shots = if shots {
                screenshot::offer(&bus).await
            } else {
                None
            };
            // KWin lists windows and takes screenshots where the protocols are missing; else
            // the applications list theirs on the accessibility bus, where there is one.
            let kwin = kwin::offered(&bus).await;
            let accessible =
                windows && !kwin && screenshot::has_owner_or_starter(&bus, ACCESSIBILITY_BUS).await;
            let kwin_shots = if shots && kwin {
                kwin_screenshot::offered_by_running_kwin(&bus).await
            } else {
                None
            };
            Some((
                portal,
                portal_shots,
                windows && kwin,
                kwin_shots,
                accessible,
            ))
        });
        if let Some((portal, shots, kwin, kwin_shots, accessible)) = asked {
            protocols.portal = portal;
            protocols.portal_shots = shots;
            protocols.kwin_windows = kwin;
            protocols.accessible_windows = accessible;
            protocols.kwin_shots = kwin_shots;
        }
    }
    Ok(protocols)
}

/// What the portal on this process's session bus offers, asked without a dialog; `None`
/// without a session bus or a portal with RemoteDesktop.
#[must_use]
pub fn offered() -> Option<Offer> {
    ask(|bus| async move { offer(&bus).await })
}

/// Runs `work` on a thread of its own: [`ask`] starts a runtime, which a thread that already
/// drives one (the desktop client's) may not do.
fn on_own_thread<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(work)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Runs `asking` on a connection to this process's session bus, on a runtime of its own;
/// `None` without a session bus.
fn ask<T, F: Future<Output = Option<T>>>(asking: impl FnOnce(zbus::Connection) -> F) -> Option<T> {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async {
        let bus = tokio::time::timeout(
            CALL_DEADLINE,
            zbus::connection::Builder::session().ok()?.build(),
        )
        .await
        .ok()?
        .ok()?;
        asking(bus).await
    })
}

/// Every key the action sends; a `type` that goes through the clipboard (`pastes`) sends only
/// the paste chord.
fn keys_of(action: &Action, pastes: bool) -> Result<Vec<Key>, DesktopError> {
    Ok(match action {
        Action::Type { .. } if pastes => virtual_input::paste_chord().to_vec(),
        Action::Type { text, .. } => text.chars().map(Key::Char).collect(),
        Action::Key { chord } | Action::HoldKey { chord, .. } => virtual_input::keys(chord)?,
        Action::Click { modifiers, .. } | Action::Scroll { modifiers, .. } => modifiers
            .iter()
            .map(|m| virtual_input::modifier(*m))
            .collect(),
        _ => Vec::new(),
    })
}

/// The keysym each character of `wanted` is sent as: one the keyboard layout has. Refuses,
/// before anything is sent, an action with a key the layout lacks: the compositor would drop
/// it without a word.
fn choose(
    action: &Action,
    wanted: &[Key],
    layout: &super::wayland::Layout,
) -> Result<HashMap<char, u32>, DesktopError> {
    let mut chosen = HashMap::new();
    for key in wanted {
        let found = match key {
            Key::Char(c) => virtual_input::char_keysyms(*c)
                .into_iter()
                .find(|sym| layout.has(*sym))
                .map(|sym| {
                    chosen.insert(*c, sym);
                }),
            Key::Named(_) => layout.has(key.keysym()).then_some(()),
        };
        if found.is_some() {
            continue;
        }
        let what = match key {
            Key::Char(c) => format!("“{c}” (U+{:04X})", u32::from(*c)),
            Key::Named(i) => virtual_input::NAMED
                .get(*i)
                .map_or_else(String::new, |(_, name, _, _)| (*name).to_owned()),
        };
        let feature = match action {
            Action::Type { .. } => "input.type",
            Action::Key { .. } => "input.key",
            Action::HoldKey { .. } => "input.key.hold",
            _ => "input.click.modifiers",
        };
        return Err(DesktopError::unsupported(
            feature,
            format!(
                "the keyboard layout has no key for {what}, and the desktop portal types only what the layout has: nothing was sent; add a layout that has it"
            ),
        ));
    }
    Ok(chosen)
}

/// The kept session, on the displays of one action.
struct Remote<'a> {
    session: &'a Session,
    displays: &'a [Display],
    cursor: &'a mut Option<[i64; 2]>,
    /// The keysym each character is sent as (see [`choose`]).
    chosen: HashMap<char, u32>,
    /// Whether a paste may go through the compositor's clipboard.
    clipboard: bool,
}

impl Remote<'_> {
    fn keysym(&self, key: Key) -> u32 {
        match key {
            Key::Char(c) => self
                .chosen
                .get(&c)
                .copied()
                .unwrap_or_else(|| virtual_input::keysym(c)),
            Key::Named(_) => key.keysym(),
        }
    }
}

impl Device for Remote<'_> {
    fn move_to(&mut self, at: [i64; 2]) -> Result<(), DesktopError> {
        let (x, y) = logical(self.displays, at).ok_or_else(|| DesktopError::OutOfBounds {
            coordinate: at,
            displays: self.displays.iter().map(|d| (d.index, d.rect)).collect(),
        })?;
        let (stream, x, y) = locate(self.session.streams(), x, y).ok_or_else(|| {
            DesktopError::unsupported(
                "input",
                "that point is on a monitor the person did not share in the desktop portal's dialog",
            )
        })?;
        self.session.send(Event::Motion { stream, x, y })?;
        *self.cursor = Some(at);
        Ok(())
    }

    fn button(&mut self, button: Button, pressed: bool) -> Result<(), DesktopError> {
        let code = i32::try_from(virtual_input::evdev(button)).unwrap_or(0);
        self.session.send(Event::Button { code, pressed })
    }

    fn key(&mut self, _chord: &[Key], key: Key, pressed: bool) -> Result<(), DesktopError> {
        self.session.send(Event::Key {
            keysym: self.keysym(key),
            pressed,
        })
    }

    fn type_text(&mut self, text: &str) -> Result<(), DesktopError> {
        for c in text.chars() {
            let keysym = self.keysym(Key::Char(c));
            for pressed in [true, false] {
                self.session.send(Event::Key { keysym, pressed })?;
            }
        }
        Ok(())
    }

    fn scroll(&mut self, direction: ScrollDirection, clicks: i32) -> Result<(), DesktopError> {
        let (axis, step) = match direction {
            ScrollDirection::Up => (0, -1),
            ScrollDirection::Down => (0, 1),
            ScrollDirection::Left => (1, -1),
            ScrollDirection::Right => (1, 1),
        };
        // One call a notch: each is one wheel click whatever the compositor does with more.
        for _ in 0..clicks.max(0) {
            self.session.send(Event::Scroll { axis, steps: step })?;
        }
        Ok(())
    }

    // Every event waits for the portal's reply, so everything sent has been taken.
    fn settle(&mut self) -> Result<(), DesktopError> {
        Ok(())
    }

    fn clipboard_text(&mut self) -> Option<String> {
        self.clipboard
            .then(|| super::wayland::clipboard::get_text(u64::MAX).ok())
            .flatten()
    }

    fn set_clipboard(&mut self, text: &str) -> Result<(), DesktopError> {
        if !self.clipboard {
            return Err(DesktopError::unsupported(
                "clipboard.write",
                "this compositor offers the shim no clipboard",
            ));
        }
        super::wayland::clipboard::set_text(text)
    }
}

/// A display-global point in the compositor's logical layout, where the portal's streams are:
/// each display sits at its logical position times the largest scale (`wayland`'s coordinates).
fn logical(displays: &[Display], [x, y]: [i64; 2]) -> Option<(f64, f64)> {
    let display = displays.iter().find(|d| d.rect.contains(x, y))?;
    let factor = displays.iter().map(|d| d.scale).fold(1.0_f64, f64::max);
    // Coordinates are far below 2^52, so these conversions are exact.
    let along = |origin: i64, v: i64| origin as f64 / factor + (v - origin) as f64 / display.scale;
    Some((along(display.rect.x, x), along(display.rect.y, y)))
}

fn ended() -> DesktopError {
    DesktopError::Failed(
        "the desktop portal's session has ended (the person stopped sharing); the next input action asks again".to_owned(),
    )
}

async fn notify(
    bus: &zbus::Connection,
    session: &OwnedObjectPath,
    event: Event,
) -> Result<(), DesktopError> {
    let options: HashMap<&str, Value<'_>> = HashMap::new();
    let path = session.as_ref();
    let method = event.method();
    let sent = match event {
        Event::Motion { stream, x, y } => {
            call(bus, REMOTE_DESKTOP, method, &(path, &options, stream, x, y)).await
        }
        Event::Button { code, pressed } => {
            call(
                bus,
                REMOTE_DESKTOP,
                method,
                &(path, &options, code, u32::from(pressed)),
            )
            .await
        }
        Event::Scroll { axis, steps } => {
            call(bus, REMOTE_DESKTOP, method, &(path, &options, axis, steps)).await
        }
        Event::Key { keysym, pressed } => {
            // The call takes an i32; keysyms end at 0x1110ffff.
            let keysym = i32::try_from(keysym).unwrap_or(0);
            call(
                bus,
                REMOTE_DESKTOP,
                method,
                &(path, &options, keysym, u32::from(pressed)),
            )
            .await
        }
    };
    sent.map(drop).map_err(|err| failed("take the input", &err))
}

/// mutter drops the first keys of a new session's virtual keyboard (two characters in our
/// test); a Shift press and release, and a moment, wake it before anything real is sent.
async fn wake(bus: &zbus::Connection, session: &OwnedObjectPath) {
    const SHIFT: u32 = 0xffe1;
    for pressed in [true, false] {
        let _ = notify(
            bus,
            session,
            Event::Key {
                keysym: SHIFT,
                pressed,
            },
        )
        .await;
    }
    tokio::time::sleep(WAKE).await;
}

type Opened = (
    zbus::Connection,
    OwnedObjectPath,
    Vec<Stream>,
    Option<String>,
);

/// CreateSession, SelectDevices, SelectSources and Start, each answered through its Request.
async fn start(
    address: Option<String>,
    restore_token: Option<String>,
    consent: Duration,
) -> Result<Opened, DesktopError> {
    let builder = match address {
        Some(address) => zbus::connection::Builder::address(address.as_str()),
        None => zbus::connection::Builder::session(),
    };
    let bus = match builder {
        Ok(builder) => builder.build().await,
        Err(err) => Err(err),
    }
    .map_err(|err| failed("reach the session bus", &err))?;
    let offered = offer(&bus).await.ok_or_else(|| {
        DesktopError::unsupported(
            "input",
            "no desktop portal with a RemoteDesktop interface answers on the session bus",
        )
    })?;
    let portal = Portal {
        bus: &bus,
        permission: REMOTE_DESKTOP_PERMISSION,
    };

    let created = portal
        .request(
            REMOTE_DESKTOP,
            "CreateSession",
            CALL_DEADLINE,
            |mut options| {
                options.insert("session_handle_token", Value::from(token()));
                Body::Options(options)
            },
        )
        .await?;
    let session = created
        .get("session_handle")
        .and_then(|value| match &**value {
            Value::Str(text) => OwnedObjectPath::try_from(text.as_str()).ok(),
            Value::ObjectPath(path) => Some(OwnedObjectPath::from(path.clone())),
            _ => None,
        })
        .ok_or_else(|| DesktopError::Failed("the desktop portal named no session".to_owned()))?;

    let mut wanted = 0;
    if offered.keyboard {
        wanted |= KEYBOARD;
    }
    if offered.pointer {
        wanted |= POINTER;
    }
    let persist = offered.version >= 2;
    portal
        .request(
            REMOTE_DESKTOP,
            "SelectDevices",
            CALL_DEADLINE,
            |mut options| {
                options.insert("types", Value::from(wanted));
                if persist {
                    options.insert("persist_mode", Value::from(PERSIST_UNTIL_REVOKED));
                    if let Some(token) = &restore_token {
                        options.insert("restore_token", Value::from(token.clone()));
                    }
                }
                Body::Session(session.clone(), options)
            },
        )
        .await?;
    portal
        .request(
            SCREEN_CAST,
            "SelectSources",
            CALL_DEADLINE,
            |mut options| {
                options.insert("types", Value::from(MONITOR));
                options.insert("multiple", Value::from(true));
                Body::Session(session.clone(), options)
            },
        )
        .await?;
    let started = portal
        .request(REMOTE_DESKTOP, "Start", consent, |options| {
            Body::Start(session.clone(), options)
        })
        .await?;

    let devices = started
        .get("devices")
        .and_then(|value| u32::try_from(&**value).ok())
        .unwrap_or(0);
    if devices & (KEYBOARD | POINTER) == 0 {
        return Err(declined(REMOTE_DESKTOP_PERMISSION));
    }
    let streams = started
        .get("streams")
        .map(|value| parse_streams(value))
        .unwrap_or_default();
    let token = started
        .get("restore_token")
        .and_then(|value| String::try_from(value.try_clone().ok()?).ok());
    Ok((bus, session, streams, token))
}

/// The `streams` result: `a(ua{sv})` with `position` and `size` as `(ii)`.
fn parse_streams(value: &Value<'_>) -> Vec<Stream> {
    let Value::Array(items) = value else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| {
            let Value::Structure(fields) = item else {
                return None;
            };
            let [Value::U32(node), Value::Dict(properties)] = fields.fields() else {
                return None;
            };
            let pair = |key: &str| -> Option<(i32, i32)> {
                let value: Value<'_> = properties.get(&key).ok()??;
                <(i32, i32)>::try_from(value).ok()
            };
            Some(Stream {
                node: *node,
                position: pair("position").unwrap_or((0, 0)),
                size: pair("size")?,
            })
        })
        .collect()
}

/// A call's arguments after the options are filled in.
enum Body<'a> {
    Options(HashMap<&'static str, Value<'a>>),
    /// No parent window, then the options (Screenshot).
    Parent(HashMap<&'static str, Value<'a>>),
    Session(OwnedObjectPath, HashMap<&'static str, Value<'a>>),
    Start(OwnedObjectPath, HashMap<&'static str, Value<'a>>),
}

struct Portal<'a> {
    bus: &'a zbus::Connection,
    /// What a refusal is named in `PERMISSION_PENDING`.
    permission: &'static str,
}

impl Portal<'_> {
    /// One portal request: the call, then its Request object's Response within `deadline`.
    async fn request(
        &self,
        interface: &'static str,
        method: &'static str,
        deadline: Duration,
        body: impl FnOnce(HashMap<&'static str, Value<'static>>) -> Body<'static>,
    ) -> Result<HashMap<String, OwnedValue>, DesktopError> {
        let handle = token();
        // The Request's path is known before the call, so its Response cannot be missed.
        let sender = self
            .bus
            .unique_name()
            .map(|name| name.trim_start_matches(':').replace('.', "_"))
            .unwrap_or_default();
        let path = format!("{PATH}/request/{sender}/{handle}");
        let request = zbus::Proxy::new(self.bus, DESTINATION, path, REQUEST)
            .await
            .map_err(|err| failed("follow its request", &err))?;
        let mut responses = request
            .receive_signal("Response")
            .await
            .map_err(|err| failed("follow its request", &err))?;

        let mut options = HashMap::new();
        options.insert("handle_token", Value::from(handle));
        let called = match body(options) {
            Body::Options(options) => call(self.bus, interface, method, &(options,)).await,
            Body::Parent(options) => call(self.bus, interface, method, &("", options)).await,
            Body::Session(session, options) => {
                call(self.bus, interface, method, &(session, options)).await
            }
            Body::Start(session, options) => {
                // No parent window: the dialog is the desktop's own.
                call(self.bus, interface, method, &(session, "", options)).await
            }
        };
        called.map_err(|err| failed(method, &err))?;

        let answer = tokio::time::timeout(deadline, responses.next())
            .await
            .map_err(|_| declined(self.permission))?
            .ok_or_else(|| DesktopError::Failed("the desktop portal went away".to_owned()))?;
        let (code, results): (u32, HashMap<String, OwnedValue>) = answer
            .body()
            .deserialize()
            .map_err(|err| failed(method, &err))?;
        match code {
            0 => Ok(results),
            1 => Err(declined(self.permission)),
            _ => Err(DesktopError::Failed(format!(
                "the desktop portal ended {method} without an answer"
            ))),
        }
    }
}

/// One method call on the portal's object.
async fn call<B>(
    bus: &zbus::Connection,
    interface: &str,
    method: &str,
    body: &B,
) -> zbus::Result<zbus::Message>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    bus.call_method(Some(DESTINATION), PATH, Some(interface), method, body)
        .await
}

/// A fresh handle token: the portal wants one unique per connection.
fn token() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!("msguide{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The person said no, in one of the ways the portal allows (declined, closed the dialog, did
/// not allow interaction, did not answer); the caller cannot tell them apart, and asks again
/// at the next request.
fn declined(permission: &str) -> DesktopError {
    DesktopError::PermissionPending {
        permission: permission.to_owned(),
    }
}

fn failed(what: &str, err: &dyn std::fmt::Display) -> DesktopError {
    DesktopError::Failed(format!("the desktop portal could not {what}: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_found_in_its_stream_and_made_relative() {
        let streams = [
            Stream {
                node: 37,
                position: (0, 0),
                size: (640, 400),
            },
            Stream {
                node: 38,
                position: (640, 0),
                size: (800, 600),
            },
        ];
        assert_eq!(locate(&streams, 10.5, 20.0), Some((37, 10.5, 20.0)));
        assert_eq!(locate(&streams, 640.0, 0.0), Some((38, 0.0, 0.0)));
        assert_eq!(locate(&streams, 639.9, 399.9), Some((37, 639.9, 399.9)));
        // Below the shorter stream, beside the taller one: no stream.
        assert_eq!(locate(&streams, 100.0, 450.0), None);
        assert_eq!(locate(&streams, -1.0, 0.0), None);
        assert_eq!(locate(&streams, 1440.0, 10.0), None);
    }

    #[test]
    fn display_points_become_logical_points_and_unknown_keys_are_refused() {
        let display = |index: usize, x: i64, width: u64, scale: f64| Display {
            index,
            primary: index == 0,
            rect: super::super::Rect {
                x,
                y: 0,
                width,
                height: 800,
            },
            scale,
            os_id: 1,
        };
        // One output at scale 2 (1280×800 physical): (801, 501) is the logical (400.5, 250.5).
        assert_eq!(
            logical(&[display(0, 0, 1280, 2.0)], [801, 501]),
            Some((400.5, 250.5))
        );
        // Scale 1 beside it at logical x 640, display-global x 1280.
        let two = [display(0, 0, 1280, 2.0), display(1, 1280, 800, 1.0)];
        assert_eq!(logical(&two, [1290, 4]), Some((650.0, 4.0)));
        assert_eq!(logical(&two, [2080, 4]), None);

        let layout = super::super::wayland::Layout::parse(
            "xkb_symbols \"us\" {\n key <AC01> { [ a, A ] };\n key <AB03> { [ c, C ] };\n\
             key <SPCE> { [ space ] };\n key <RTRN> { [ Return ] };\n key <AE10> { [ EuroSign ] };\n};",
            0,
        );
        let typed = Action::Type {
            text: "a✓c".to_owned(),
            paste: false,
            preserve_clipboard: false,
        };
        let err = choose(&typed, &keys_of(&typed, false).unwrap(), &layout).unwrap_err();
        assert_eq!(err.code(), "FEATURE_NOT_SUPPORTED");
        assert_eq!(
            err.details().unwrap(),
            serde_json::json!({"feature": "input.type", "reason": "the keyboard layout has no key for “✓” (U+2713), and the desktop portal types only what the layout has: nothing was sent; add a layout that has it"})
        );
        // € goes as the layout's EuroSign, not as its Unicode keysym.
        let fine = Action::Type {
            text: "cA €\n".to_owned(),
            paste: false,
            preserve_clipboard: false,
        };
        let chosen = choose(&fine, &keys_of(&fine, false).unwrap(), &layout).unwrap();
        assert_eq!(chosen[&'€'], 0x20ac);
        assert_eq!(chosen[&'\n'], 0xff0d);
        // Through the compositor's clipboard only the paste chord is sent, so a character the
        // layout lacks is no reason to refuse; without one, the text is typed and checked.
        let pasted = Action::Type {
            text: "a✓c".to_owned(),
            paste: true,
            preserve_clipboard: true,
        };
        assert_eq!(
            keys_of(&pasted, true).unwrap(),
            virtual_input::paste_chord().to_vec()
        );
        assert_eq!(
            keys_of(&pasted, false).unwrap(),
            [Key::Char('a'), Key::Char('✓'), Key::Char('c')]
        );
        let chord = Action::Key {
            chord: super::super::action::Chord::parse("ctrl+a").unwrap(),
        };
        let err = choose(&chord, &keys_of(&chord, false).unwrap(), &layout).unwrap_err();
        assert!(err.to_string().contains("no key for Control_L"), "{err}");
    }

    #[test]
    fn streams_are_read_from_the_portals_answer() {
        let mut first = HashMap::new();
        first.insert("position", Value::from((0_i32, 0_i32)));
        first.insert("size", Value::from((1280_i32, 800_i32)));
        first.insert("source_type", Value::from(1_u32));
        let mut no_size = HashMap::new();
        no_size.insert("position", Value::from((5_i32, 5_i32)));
        let answer = Value::from(vec![(37_u32, first), (38_u32, no_size)]);
        assert_eq!(
            parse_streams(&answer),
            [Stream {
                node: 37,
                position: (0, 0),
                size: (1280, 800)
            }]
        );
        assert!(parse_streams(&Value::from(7_u32)).is_empty());
    }
}
