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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use futures_util::StreamExt as _;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

use super::DesktopError;

const DESTINATION: &str = "org.freedesktop.portal.Desktop";
const PATH: &str = "/org/freedesktop/portal/desktop";
const REMOTE_DESKTOP: &str = "org.freedesktop.portal.RemoteDesktop";
const SCREEN_CAST: &str = "org.freedesktop.portal.ScreenCast";
const REQUEST: &str = "org.freedesktop.portal.Request";

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

/// What the portal offers, asked without opening a session (no dialog).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// The RemoteDesktop interface's version.
    pub version: u32,
    /// A keyboard can be asked for.
    pub keyboard: bool,
    /// A pointer can be asked for.
    pub pointer: bool,
}

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

/// The X keysym that types `c`: Latin-1 characters are their own keysyms, Return and Tab have
/// named ones, and every other character is its Unicode keysym. The compositor still needs
/// the keysym in its current layout: mutter drops the rest (said in docs/computer-use.md).
#[must_use]
pub fn keysym(c: char) -> i32 {
    let code = u32::from(c);
    let sym = match c {
        '\n' | '\r' => 0xff0d,
        '\t' => 0xff09,
        '\u{8}' => 0xff08,
        ' '..='~' | '\u{a0}'..='\u{ff}' => code,
        _ => 0x0100_0000 + code,
    };
    // Unicode ends at 0x10ffff, so every keysym fits an i32.
    i32::try_from(sym).unwrap_or(0)
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
        keysym: i32,
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
    let get = |name: &'static str| async move {
        let reply = bus
            .call_method(
                Some(DESTINATION),
                PATH,
                Some("org.freedesktop.DBus.Properties"),
                "Get",
                &(REMOTE_DESKTOP, name),
            )
            .await
            .ok()?;
        let value: OwnedValue = reply.body().deserialize().ok()?;
        u32::try_from(value).ok()
    };
    let version = tokio::time::timeout(CALL_DEADLINE, get("version"))
        .await
        .ok()??;
    let types = get("AvailableDeviceTypes").await.unwrap_or(0);
    Some(Offer {
        version,
        keyboard: types & KEYBOARD != 0,
        pointer: types & POINTER != 0,
    })
}

/// An open RemoteDesktop session: the person said yes. Dropping it closes the session.
#[derive(Debug)]
pub struct Session {
    jobs: tokio::sync::mpsc::UnboundedSender<(Event, std_mpsc::Sender<Result<(), DesktopError>>)>,
    streams: Vec<Stream>,
    restore_token: Option<String>,
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
                while let Some((event, done)) = queue.recv().await {
                    let _ = done.send(notify(&bus, &session, event).await);
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
        })
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
        let ended = || DesktopError::Failed("the desktop portal's session has ended".to_owned());
        self.jobs.send((event, done)).map_err(|_| ended())?;
        taken.recv().map_err(|_| ended())?
    }
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
    const SHIFT: i32 = 0xffe1;
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
    let portal = Portal { bus: &bus };

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
        return Err(declined());
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
    Session(OwnedObjectPath, HashMap<&'static str, Value<'a>>),
    Start(OwnedObjectPath, HashMap<&'static str, Value<'a>>),
}

struct Portal<'a> {
    bus: &'a zbus::Connection,
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
            .map_err(|_| declined())?
            .ok_or_else(|| DesktopError::Failed("the desktop portal went away".to_owned()))?;
        let (code, results): (u32, HashMap<String, OwnedValue>) = answer
            .body()
            .deserialize()
            .map_err(|err| failed(method, &err))?;
        match code {
            0 => Ok(results),
            1 => Err(declined()),
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
fn declined() -> DesktopError {
    DesktopError::PermissionPending {
        permission: "remote desktop".to_owned(),
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
    fn characters_become_their_keysyms() {
        assert_eq!(keysym('a'), 0x61);
        assert_eq!(keysym('A'), 0x41);
        assert_eq!(keysym(' '), 0x20);
        assert_eq!(keysym('é'), 0xe9);
        assert_eq!(keysym('\n'), 0xff0d);
        assert_eq!(keysym('\t'), 0xff09);
        assert_eq!(keysym('✓'), 0x0100_2713);
        assert_eq!(keysym('日'), 0x0100_65e5);
        assert_eq!(keysym('🙂'), 0x0101_f642);
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
