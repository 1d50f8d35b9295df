//! Computer use on a data connection: the one place wire payloads become
//! `local_core::desktop` calls and their results (or errors, with the reference's `details`)
//! become reply payloads, each with one audit record of metadata only: never typed text,
//! clipboard content or pixels, only their sizes.
//!
//! A request for a feature HELLO did not advertise is refused before any backend call.
//! Backend calls block, so each runs on a blocking thread, one at a time per machine.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use local_core::a11y::{self, Budget};
use local_core::desktop::input::{self, Action, Button, Chord, Modifier, ScrollDirection};
use local_core::desktop::probe::{self, Permission, Probe, Session};
use local_core::desktop::screen::{self, Display, Encoding};
use local_core::desktop::screenshot::{ScreenshotRequest, Target};
use local_core::desktop::windows::{self as desktop_windows, NativeWindow};
use local_core::desktop::{Desktop, DesktopError, Rect, apps, clipboard, elements};
use serde_json::{Map, Value, json};

use super::Host;
use super::capability::{self, Done, Handler, Refusal, Run};
use crate::audit::{Entry, details};
use crate::error::{self, reply};
use crate::protocol::{
    self as wire, A11yElement, A11ySnapshotRequestPayload, A11ySnapshotResponsePayload, AckPayload,
    AppInfo, AppLaunchPayload, AppListResponsePayload, Capability, ClipboardFormat,
    ClipboardReadResponsePayload, CursorPositionResponsePayload, DisplayInfoResponsePayload,
    ElementActionKind, ElementActionPayload, ErrorCode, ImageFormat, InputActionKind,
    InputActionPayload, MAX_FRAME_BYTES, Message, MonitorInfo, PermissionState,
    PermissionsCheckResponsePayload, ScreenshotMeta, ScreenshotRequestPayload,
    ScreenshotResponsePayload, WindowInfo, WindowListRequestPayload, WindowListResponsePayload,
};

/// Most windows one listing returns.
const MAX_WINDOWS: usize = 500;
/// `hold_key` without a duration.
const DEFAULT_HOLD: Duration = Duration::from_millis(100);
/// Bytes of an envelope around the base64 image (fields, ids), kept free under the frame cap.
const ENVELOPE_ALLOWANCE: usize = 4096;
/// How long an ELEMENT_ACTION may look for its element again (a snapshot's default deadline).
const RECHECK_DEADLINE: Duration = Duration::from_secs(2);

/// The machine's computer use: its desktop state and what the last HELLO advertised.
#[derive(Debug, Clone)]
pub struct Computer {
    desktop: Desktop,
    probe: Arc<Mutex<Option<Probe>>>,
    /// The longest side a screenshot may have (`None`: every captured pixel, as the
    /// platform's contract has it).
    max_image_edge: Option<u32>,
}

impl Computer {
    /// Computer use for this machine; `clipboard` is the operator's clipboard policy, `None`
    /// when the clipboard is not enabled.
    pub fn new(clipboard: Option<clipboard::Policy>) -> Self {
        Self {
            desktop: Desktop::new(clipboard),
            probe: Arc::new(Mutex::new(None)),
            max_image_edge: None,
        }
    }

    /// The same, with screenshots scaled down to at most `edge` pixels on their longer side.
    #[must_use]
    pub const fn with_max_image_edge(mut self, edge: u32) -> Self {
        self.max_image_edge = Some(edge);
        self
    }

    /// At each HELLO (blocking): every window id dies and the desktop is probed afresh.
    pub(crate) fn hello(&self) -> Probe {
        self.desktop.windows.clear();
        self.desktop.elements.clear();
        let probe = probe::probe(self.desktop.clipboard.is_some());
        *self.probe.lock().unwrap_or_else(PoisonError::into_inner) = Some(probe.clone());
        probe
    }

    fn advertised(&self) -> Option<Probe> {
        self.probe
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits for the machine's turn at the desktop.
    pub(super) async fn turn(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.desktop.one_at_a_time().await
    }
}

/// A computer-use request, ready to run on a blocking thread.
#[derive(Debug)]
pub(super) enum ComputerOp {
    Screenshot(ScreenshotRequestPayload),
    Input(Box<InputActionPayload>),
    Cursor,
    DisplayInfo,
    WindowList(WindowListRequestPayload),
    WindowFocus {
        window_id: String,
        raise: bool,
    },
    AppList {
        include_background: bool,
    },
    AppLaunch(AppLaunchPayload),
    ClipboardRead(ClipboardFormat),
    ClipboardWrite {
        format: ClipboardFormat,
        content: String,
    },
    Permissions(Vec<String>),
    A11ySnapshot(A11ySnapshotRequestPayload),
    ElementAction(ElementActionPayload),
}

impl Handler for ComputerOp {
    type Admitted = (Self, Computer);

    fn from_message(message: Message) -> Result<Self, Message> {
        Ok(match message {
            Message::ScreenshotRequest(p) => Self::Screenshot(p),
            Message::InputAction(p) => Self::Input(Box::new(p)),
            Message::CursorPositionRequest(_) => Self::Cursor,
            Message::DisplayInfoRequest(_) => Self::DisplayInfo,
            Message::WindowListRequest(p) => Self::WindowList(p),
            Message::WindowFocus(p) => Self::WindowFocus {
                window_id: p.window_id,
                raise: p.raise,
            },
            Message::AppListRequest(p) => Self::AppList {
                include_background: p.include_background,
            },
            Message::AppLaunch(p) => Self::AppLaunch(p),
            Message::ClipboardRead(p) => Self::ClipboardRead(p.format),
            Message::ClipboardWrite(p) => Self::ClipboardWrite {
                format: p.format,
                content: p.content,
            },
            Message::PermissionsCheckRequest(p) => Self::Permissions(p.permissions),
            Message::A11ySnapshotRequest(p) => Self::A11ySnapshot(p),
            Message::ElementAction(p) => Self::ElementAction(p),
            other => return Err(other),
        })
    }

    fn check(&self, host: &Host) -> Result<(), Box<Refusal>> {
        match &host.computer {
            Some(computer) => self.check_advertised(computer),
            None => Err(not_enabled()),
        }
    }

    fn admit(self, host: &Host) -> Result<(Self, Computer), Box<Refusal>> {
        match &host.computer {
            Some(computer) => Ok((self, computer.clone())),
            None => Err(not_enabled()),
        }
    }

    /// One request at a time per machine, each on a blocking thread.
    async fn run((op, computer): (Self, Computer), ctx: Run) -> Done {
        let Some(_turn) = computer.turn().await else {
            return Done(error::internal(), Vec::new());
        };
        let max_bytes = ctx.limits.max_read_bytes;
        ctx.blocking(move || {
            let (message, entry) = op.perform(&computer, max_bytes);
            (message, vec![entry])
        })
        .await
    }
}

// Unreachable: HELLO advertises computer_use only with a desktop.
fn not_enabled() -> Box<Refusal> {
    Refusal::unaudited(reply(
        ErrorCode::CapabilityNotGranted,
        "Computer use is not enabled",
        Some(json!({ "required_capability": Capability::ComputerUse })),
    ))
}

impl ComputerOp {
    /// The features (coarse bucket or fine name) this request needs, all of which HELLO
    /// must have advertised.
    fn features(&self) -> Vec<&'static str> {
        match self {
            Self::Screenshot(p) => {
                let mut needs = vec!["screenshot"];
                if p.region.is_some() {
                    needs.push("screenshot.region");
                }
                if p.window_id.is_some() {
                    needs.push("screenshot.window");
                }
                if p.monitor == -1 {
                    needs.push("screenshot.all_monitors");
                }
                needs
            }
            Self::Input(p) => input_features(p),
            Self::Cursor => vec!["cursor.position"],
            Self::DisplayInfo => vec!["display.info"],
            Self::WindowList(_) => vec!["window.list"],
            Self::WindowFocus { .. } => vec!["window.focus"],
            Self::AppList { .. } => vec!["app.list"],
            Self::AppLaunch(_) => vec!["app.launch"],
            Self::ClipboardRead(_) => vec!["clipboard.read"],
            Self::ClipboardWrite { .. } => vec!["clipboard.write"],
            Self::Permissions(_) => vec!["permissions.check"],
            Self::A11ySnapshot(_) => vec!["a11y.snapshot"],
            Self::ElementAction(_) => vec!["a11y.snapshot", "input"],
        }
    }

    /// Refuses a request that needs a feature HELLO did not advertise, before any backend
    /// call: the reply and its audit record.
    fn check_advertised(&self, computer: &Computer) -> Result<(), Box<Refusal>> {
        let probe = computer.advertised();
        let missing = self.features().into_iter().find(|feature| {
            probe
                .as_ref()
                .is_none_or(|p| !p.offers(feature) && !p.coarse.contains(feature))
        });
        let Some(feature) = missing else {
            return Ok(());
        };
        let session = probe.map_or(Session::None, |p| p.session);
        let reason = match session {
            Session::None | Session::Wayland => session.reason(),
            _ => "not advertised in HELLO for this session",
        };
        let err = DesktopError::unsupported(feature, reason);
        let (op, details) = self.audit_details();
        Err(Refusal::failed(op, details, &err))
    }

    /// Runs the operation (blocking) and returns the reply and its audit record.
    /// `max_bytes` is the negotiated `max_file_size_bytes`.
    fn perform(self, computer: &Computer, max_bytes: u64) -> (Message, Entry) {
        let (op, mut details) = self.audit_details();
        let desktop = &computer.desktop;
        let outcome = match self {
            Self::Screenshot(p) => {
                let limits = (max_bytes, computer.max_image_edge);
                screenshot(desktop, &p, limits, &mut details)
            }
            Self::Input(p) => input_action(desktop, &p),
            Self::Cursor => cursor(),
            Self::DisplayInfo => screen::displays().map(|displays| {
                details.insert("monitor_count".to_owned(), json!(displays.len()));
                display_info(&displays)
            }),
            Self::WindowList(p) => window_list(desktop, &p).map(|listing| {
                details.insert("windows_returned".to_owned(), json!(listing.windows.len()));
                Message::WindowListResponse(listing)
            }),
            Self::WindowFocus { window_id, raise } => desktop_windows::all()
                .and_then(|live| desktop.windows.resolve(&window_id, &live))
                .and_then(|window| desktop_windows::focus(&window, raise))
                .map(|()| Message::Ack(AckPayload::OK)),
            Self::AppList { include_background } => {
                let windows = desktop_windows::all().ok();
                apps::list(include_background, windows.as_deref()).map(|apps| {
                    details.insert("apps_returned".to_owned(), json!(apps.len()));
                    app_list(apps)
                })
            }
            Self::AppLaunch(p) => app_launch(&p).map(|pid| {
                details.insert("pid".to_owned(), json!(pid));
                Message::Ack(AckPayload {
                    ok: true,
                    pid: Some(pid),
                })
            }),
            Self::ClipboardRead(format) => clipboard_read(desktop, format, max_bytes).map(|text| {
                details.insert("size_bytes".to_owned(), json!(text.len()));
                Message::ClipboardReadResponse(ClipboardReadResponsePayload {
                    format,
                    size_bytes: u64::try_from(text.len()).unwrap_or(u64::MAX),
                    content: text,
                })
            }),
            Self::ClipboardWrite { format, content } => {
                clipboard_write(desktop, format, &content, max_bytes)
            }
            Self::Permissions(names) => Ok(permissions(&names)),
            Self::A11ySnapshot(p) => a11y_snapshot(desktop, &p).map(|snapshot| {
                details.insert(
                    "elements_returned".to_owned(),
                    json!(snapshot.elements.len()),
                );
                details.insert("truncated".to_owned(), json!(snapshot.truncated));
                Message::A11ySnapshotResponse(snapshot)
            }),
            Self::ElementAction(p) => element_action(desktop, &p).map(|element| {
                details.insert("coordinate".to_owned(), json!(element.at));
                details.insert("role".to_owned(), json!(element.role));
                Message::Ack(AckPayload::OK)
            }),
        };
        capability::conclude(op, details, outcome)
    }

    /// The reference's audit op and request metadata: sizes and names, never content.
    fn audit_details(&self) -> (&'static str, Map<String, Value>) {
        match self {
            Self::Screenshot(p) => (
                "SCREENSHOT_REQUEST",
                details([
                    ("monitor", json!(p.monitor)),
                    ("quality", json!(p.quality)),
                    ("region", json!(p.region)),
                    ("window_id", json!(p.window_id)),
                    ("format", json!(p.format)),
                ]),
            ),
            Self::Input(p) => (
                "INPUT_ACTION",
                details([
                    ("action", json!(p.action)),
                    ("coordinate", json!(p.coordinate)),
                    ("key", json!(p.key)),
                    ("direction", json!(p.direction.or(p.scroll_direction))),
                    ("clicks", json!(p.clicks)),
                    (
                        "text_length",
                        json!(p.text.as_ref().map(|t| t.chars().count())),
                    ),
                    ("modifiers", json!(p.modifiers)),
                    ("button", json!(p.button)),
                    ("paste", json!(p.paste)),
                ]),
            ),
            Self::Cursor => ("CURSOR_POSITION_REQUEST", Map::new()),
            Self::DisplayInfo => ("DISPLAY_INFO_REQUEST", Map::new()),
            Self::WindowList(p) => (
                "WINDOW_LIST_REQUEST",
                details([
                    ("app_bundle_id", json!(p.app_bundle_id)),
                    ("include_minimized", json!(p.include_minimized)),
                    ("include_offscreen", json!(p.include_offscreen)),
                ]),
            ),
            Self::WindowFocus { window_id, raise } => (
                "WINDOW_FOCUS",
                details([("window_id", json!(window_id)), ("raise", json!(raise))]),
            ),
            Self::AppList { include_background } => (
                "APP_LIST_REQUEST",
                details([("include_background", json!(include_background))]),
            ),
            Self::AppLaunch(p) => (
                "APP_LAUNCH",
                details([
                    ("bundle_id", json!(p.bundle_id)),
                    ("executable_path", json!(p.executable_path)),
                    ("args_count", json!(p.args.len())),
                    ("activate", json!(p.activate)),
                ]),
            ),
            Self::ClipboardRead(format) => ("CLIPBOARD_READ", details([("format", json!(format))])),
            Self::ClipboardWrite { format, content } => (
                "CLIPBOARD_WRITE",
                details([
                    ("format", json!(format)),
                    ("size_bytes", json!(content.len())),
                ]),
            ),
            Self::Permissions(names) => (
                "PERMISSIONS_CHECK_REQUEST",
                details([("permissions", json!(names))]),
            ),
            Self::A11ySnapshot(p) => (
                "A11Y_SNAPSHOT_REQUEST",
                details([
                    ("window_id", json!(p.window_id)),
                    ("max_elements", json!(p.max_elements)),
                ]),
            ),
            // As INPUT_ACTION's: the element's id and role and the point, never its name or
            // the typed text.
            Self::ElementAction(p) => (
                "ELEMENT_ACTION",
                details([
                    ("element_id", json!(p.element_id)),
                    ("action", json!(p.action)),
                    (
                        "text_length",
                        json!(p.text.as_ref().map(|t| t.chars().count())),
                    ),
                ]),
            ),
        }
    }
}

fn input_features(p: &InputActionPayload) -> Vec<&'static str> {
    use InputActionKind as K;
    if p.action == K::Wait {
        return vec!["input.wait"];
    }
    let mut needs = vec!["input"];
    match p.action {
        K::MouseDown | K::MouseUp => needs.push("input.mouse.down_up"),
        K::Drag => needs.push("input.drag.path"),
        K::HoldKey => needs.push("input.key.hold"),
        K::Scroll if p.scroll_amount.is_some() => needs.push("input.scroll.amount"),
        _ => {}
    }
    if p.modifiers.as_ref().is_some_and(|m| !m.is_empty()) {
        needs.push("input.click.modifiers");
    }
    needs
}

/// `limits`: the most bytes and the longest side the image may have.
fn screenshot(
    desktop: &Desktop,
    p: &ScreenshotRequestPayload,
    (max_bytes, max_edge): (u64, Option<u32>),
    details: &mut Map<String, Value>,
) -> Result<Message, DesktopError> {
    let target = match (&p.window_id, p.region) {
        (Some(window_id), _) => Target::Window(window_id.clone()),
        (None, Some(region)) => Target::Region(region),
        (None, None) => Target::Monitor(p.monitor),
    };
    let encoding = match p.format {
        ImageFormat::Jpeg => Encoding::Jpeg { quality: p.quality },
        ImageFormat::Png => Encoding::Png,
    };
    // The raw bytes must fit a frame once base64 makes a third more of them.
    let frame_budget =
        u64::try_from((MAX_FRAME_BYTES - ENVELOPE_ALLOWANCE) / 4 * 3).unwrap_or(u64::MAX);
    let shot = desktop.screenshot(&ScreenshotRequest {
        target,
        include_cursor: p.include_cursor,
        encoding,
        max_bytes: max_bytes.min(frame_budget),
        max_edge,
    })?;
    if let Some(err) = &shot.pointer_failure {
        tracing::debug!(code = err.code(), "the pointer was not drawn");
    }
    details.insert("image_bytes_returned".to_owned(), json!(shot.bytes.len()));
    details.insert("width".to_owned(), json!(shot.width));
    details.insert("height".to_owned(), json!(shot.height));
    details.insert("cursor_drawn".to_owned(), json!(shot.cursor_drawn));
    Ok(Message::ScreenshotResponse(ScreenshotResponsePayload {
        image_base64: base64::engine::general_purpose::STANDARD.encode(&shot.bytes),
        mime_type: encoding.mime_type().to_owned(),
        width: shot.width,
        height: shot.height,
        monitor: shot.monitor,
        region: p.region,
        display_scale: shot.scale,
        logical_size: shot.logical_size(),
        meta: ScreenshotMeta {
            origin: shot.origin,
            display_id: json!(shot.os_id),
        },
    }))
}

fn input_action(desktop: &Desktop, p: &InputActionPayload) -> Result<Message, DesktopError> {
    let action = action(p)?;
    let displays = screen::displays()?;
    input::perform(&action, &displays, desktop.clipboard.as_ref())?;
    Ok(Message::Ack(AckPayload::OK))
}

/// The core action for a wire INPUT_ACTION, with the parts its kind needs.
fn action(p: &InputActionPayload) -> Result<Action, DesktopError> {
    use InputActionKind as K;
    let name = serde_json::to_value(p.action)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let needs = |what: &str| {
        DesktopError::unsupported(&format!("input.{name}"), format!("{name} needs {what}"))
    };
    let coordinate = || p.coordinate.ok_or_else(|| needs("a coordinate"));
    let modifiers = || {
        p.modifiers
            .iter()
            .flatten()
            .map(|m| match m {
                wire::Modifier::Shift => Modifier::Shift,
                wire::Modifier::Ctrl => Modifier::Ctrl,
                wire::Modifier::Alt => Modifier::Alt,
                wire::Modifier::Super => Modifier::Super,
            })
            .collect::<Vec<_>>()
    };
    let button = |default: Button| {
        p.button.map_or(default, |b| match b {
            wire::MouseButton::Left => Button::Left,
            wire::MouseButton::Middle => Button::Middle,
            wire::MouseButton::Right => Button::Right,
        })
    };
    let click = |button: Button, count: u8| -> Result<Action, DesktopError> {
        Ok(Action::Click {
            at: coordinate()?,
            button,
            count,
            modifiers: modifiers(),
        })
    };
    let chord = || Chord::parse(p.key.as_deref().ok_or_else(|| needs("a key"))?);
    Ok(match p.action {
        K::LeftClick => click(Button::Left, 1)?,
        K::RightClick => click(Button::Right, 1)?,
        K::MiddleClick => click(Button::Middle, 1)?,
        K::DoubleClick => click(button(Button::Left), 2)?,
        K::TripleClick => click(button(Button::Left), 3)?,
        K::MouseMove => Action::Move { to: coordinate()? },
        K::MouseDown => Action::Down {
            at: p.coordinate,
            button: button(Button::Left),
        },
        K::MouseUp => Action::Up {
            at: p.coordinate,
            button: button(Button::Left),
        },
        K::Drag => {
            let path = p.path.clone().unwrap_or_default();
            if path.len() < 2 {
                return Err(needs("a path of at least two points"));
            }
            Action::Drag {
                path,
                button: button(Button::Left),
            }
        }
        K::Type => Action::Type {
            text: p.text.clone().ok_or_else(|| needs("text"))?,
            paste: p.paste,
            preserve_clipboard: p.preserve_clipboard,
        },
        K::Key => Action::Key { chord: chord()? },
        K::HoldKey => Action::HoldKey {
            chord: chord()?,
            duration: p.duration_ms.map_or(DEFAULT_HOLD, Duration::from_millis),
        },
        K::Scroll => {
            let direction = match p.scroll_direction.or(p.direction) {
                Some(wire::ScrollDirection::Up) => ScrollDirection::Up,
                Some(wire::ScrollDirection::Left) => ScrollDirection::Left,
                Some(wire::ScrollDirection::Right) => ScrollDirection::Right,
                Some(wire::ScrollDirection::Down) | None => ScrollDirection::Down,
            };
            let amount = p
                .scroll_amount
                .or(p.clicks.map(i64::from))
                .unwrap_or(i64::from(input::DEFAULT_SCROLL_CLICKS));
            Action::Scroll {
                at: p.coordinate,
                direction,
                clicks: i32::try_from(amount.clamp(0, 1000)).unwrap_or(0),
                modifiers: modifiers(),
            }
        }
        K::Wait => Action::Wait {
            duration: Duration::from_millis(p.duration_ms.unwrap_or(0)),
        },
    })
}

fn cursor() -> Result<Message, DesktopError> {
    let [x, y] = input::cursor()?;
    let displays = screen::displays()?;
    let monitor =
        screen::display_at(&displays, x, y).map_or(-1, |i| i64::try_from(i).unwrap_or(-1));
    Ok(Message::CursorPositionResponse(
        CursorPositionResponsePayload { x, y, monitor },
    ))
}

fn size(width: u64, height: u64) -> [u32; 2] {
    [
        u32::try_from(width).unwrap_or(u32::MAX),
        u32::try_from(height).unwrap_or(u32::MAX),
    ]
}

fn display_info(displays: &[Display]) -> Message {
    Message::DisplayInfoResponse(DisplayInfoResponsePayload {
        monitors: displays
            .iter()
            .map(|d| {
                let (lw, lh) = d.logical_size();
                MonitorInfo {
                    index: i64::try_from(d.index).unwrap_or(i64::MAX),
                    primary: d.primary,
                    physical_size: size(d.rect.width, d.rect.height),
                    logical_size: size(lw, lh),
                    scale: d.scale,
                    origin: [d.rect.x, d.rect.y],
                }
            })
            .collect(),
    })
}

fn window_list(
    desktop: &Desktop,
    p: &WindowListRequestPayload,
) -> Result<WindowListResponsePayload, DesktopError> {
    let displays = screen::displays()?;
    let on_screen = |w: &NativeWindow| {
        displays
            .iter()
            .any(|d| d.rect.intersect(&w.bounds).is_some())
    };
    let mut windows: Vec<NativeWindow> = desktop_windows::all()?
        .into_iter()
        .filter(|w| p.include_minimized || !w.minimized)
        .filter(|w| p.include_offscreen || w.minimized || on_screen(w))
        .filter(|w| {
            p.app_bundle_id
                .as_deref()
                .is_none_or(|app| w.app_name.eq_ignore_ascii_case(app))
        })
        .collect();
    let truncated = windows.len() > MAX_WINDOWS;
    windows.truncate(MAX_WINDOWS);
    let ids = desktop.windows.mint(&windows);
    Ok(WindowListResponsePayload {
        windows: windows
            .into_iter()
            .zip(ids)
            .map(|(w, window_id)| {
                let monitor = screen::display_at(&displays, w.bounds.x, w.bounds.y)
                    .and_then(|i| i64::try_from(i).ok());
                WindowInfo {
                    window_id,
                    pid: w.pid,
                    app_name: Some(w.app_name).filter(|a| !a.is_empty()),
                    app_bundle_id: None,
                    title: Some(w.title),
                    bounds: w.bounds.corners(),
                    monitor,
                    is_focused: w.focused,
                    is_minimized: w.minimized,
                    is_fullscreen: w.maximized && displays.iter().any(|d| d.rect == w.bounds),
                }
            })
            .collect(),
        truncated,
    })
}

fn app_list(apps: Vec<apps::App>) -> Message {
    Message::AppListResponse(AppListResponsePayload {
        apps: apps
            .into_iter()
            .map(|app| AppInfo {
                pid: app.pid,
                name: app.name,
                bundle_id: None,
                executable_path: app.executable,
                is_frontmost: app.frontmost,
                window_count: app.window_count,
            })
            .collect(),
    })
}

fn app_launch(p: &AppLaunchPayload) -> Result<u32, DesktopError> {
    apps::launch(&apps::Launch {
        executable: p.executable_path.clone(),
        bundle_id: p.bundle_id.clone(),
        args: p.args.clone(),
    })
}

fn text_only(format: ClipboardFormat) -> Result<(), DesktopError> {
    match format {
        ClipboardFormat::Text => Ok(()),
        ClipboardFormat::Image => Err(DesktopError::unsupported(
            "clipboard.image",
            "only text goes through the clipboard",
        )),
    }
}

fn clipboard_read(
    desktop: &Desktop,
    format: ClipboardFormat,
    max_bytes: u64,
) -> Result<String, DesktopError> {
    text_only(format)?;
    let clipboard = desktop.clipboard.as_ref().ok_or_else(|| {
        DesktopError::unsupported("clipboard.read", "the clipboard is not enabled")
    })?;
    clipboard.read(max_bytes)
}

fn clipboard_write(
    desktop: &Desktop,
    format: ClipboardFormat,
    content: &str,
    max_bytes: u64,
) -> Result<Message, DesktopError> {
    text_only(format)?;
    let clipboard = desktop.clipboard.as_ref().ok_or_else(|| {
        DesktopError::unsupported("clipboard.write", "the clipboard is not enabled")
    })?;
    clipboard.write(content, max_bytes)?;
    Ok(Message::Ack(AckPayload::OK))
}

fn permissions(names: &[String]) -> Message {
    let session = Session::detect();
    let names: Vec<&str> = if names.is_empty() {
        probe::PERMISSIONS.to_vec()
    } else {
        names.iter().map(String::as_str).collect()
    };
    let permissions: BTreeMap<String, PermissionState> = names
        .into_iter()
        .map(|name| {
            let state = match probe::permission(session, name) {
                Permission::Granted => PermissionState::Granted,
                Permission::Denied => PermissionState::Denied,
                Permission::Unknown => PermissionState::Unknown,
                Permission::NotApplicable => PermissionState::NotApplicable,
            };
            (name.to_owned(), state)
        })
        .collect();
    Message::PermissionsCheckResponse(PermissionsCheckResponsePayload { permissions })
}

fn a11y_snapshot(
    desktop: &Desktop,
    p: &A11ySnapshotRequestPayload,
) -> Result<A11ySnapshotResponsePayload, DesktopError> {
    let live = desktop_windows::all()?;
    let window = desktop.windows.resolve(&p.window_id, &live)?;
    let target = elements::target(&window);
    let defaults = Budget::default();
    let budget = Budget {
        max_elements: usize::try_from(p.max_elements).unwrap_or(defaults.max_elements),
        max_nodes: defaults.max_nodes,
        max_depth: usize::try_from(p.max_depth).unwrap_or(defaults.max_depth),
        deadline: Duration::from_millis(p.deadline_ms),
    };
    // The walk is async (D-Bus); this runs on a blocking thread, which may block on it.
    let snapshot = tokio::runtime::Handle::current()
        .block_on(a11y::snapshot(&target, budget))
        .map_err(|e| DesktopError::unsupported("a11y.snapshot", e.to_string()))?;
    let ids = desktop.elements.mint(&window, &snapshot.elements);
    Ok(A11ySnapshotResponsePayload {
        elements: snapshot
            .elements
            .into_iter()
            .zip(ids)
            .map(|(e, id)| {
                let rect = Rect {
                    x: i64::from(e.bounds.x),
                    y: i64::from(e.bounds.y),
                    width: u64::from(e.bounds.width),
                    height: u64::from(e.bounds.height),
                };
                let s = e.states;
                let states = [
                    ("enabled", s.enabled),
                    ("focusable", s.focusable),
                    ("focused", s.focused),
                    ("checked", s.checked),
                    ("selected", s.selected),
                    ("expanded", s.expanded),
                    ("read_only", s.read_only),
                ]
                .into_iter()
                .filter(|(_, on)| *on)
                .map(|(name, _)| name.to_owned())
                .collect();
                A11yElement {
                    id: Some(id),
                    role: e.role,
                    label: e.label,
                    bounds: rect.corners(),
                    states,
                }
            })
            .collect(),
        truncated: snapshot.truncated,
    })
}

/// Where an ELEMENT_ACTION acted, for its audit record.
struct Acted {
    at: [i64; 2],
    role: String,
}

/// Finds the element again (same window, same role, name and place), then clicks its centre
/// as it is now and, for `type`, types the text into what the click focused.
fn element_action(desktop: &Desktop, p: &ElementActionPayload) -> Result<Acted, DesktopError> {
    let live = desktop_windows::all()?;
    // The lookup is async (D-Bus); this runs on a blocking thread, which may block on it.
    let located = tokio::runtime::Handle::current().block_on(desktop.elements.locate(
        &p.element_id,
        &live,
        RECHECK_DEADLINE,
    ))?;
    let (x, y) = located.element.bounds.centre();
    let at = [i64::from(x), i64::from(y)];
    let displays = screen::displays()?;
    let click = Action::Click {
        at,
        button: Button::Left,
        count: 1,
        modifiers: Vec::new(),
    };
    input::perform(&click, &displays, desktop.clipboard.as_ref())?;
    if let (ElementActionKind::Type, Some(text)) = (p.action, &p.text) {
        let typing = Action::Type {
            text: text.clone(),
            paste: false,
            preserve_clipboard: false,
        };
        input::perform(&typing, &displays, desktop.clipboard.as_ref())?;
    }
    Ok(Acted {
        at,
        role: located.element.role,
    })
}

#[cfg(test)]
mod tests;
