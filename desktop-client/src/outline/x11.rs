//! The outline on X11: an unmanaged (override-redirect) window whose bounding shape is the
//! frame alone and whose input shape is empty (the SHAPE extension), so the target shows
//! through and every click reaches it, with or without a compositor.
//!
//! One thread waits for the X server's events on the backend's own connection: XInput2 raw
//! button presses on the root window (delivered whoever has the pointer, so a click passed
//! through to the target is seen too), changes of the target window (moved, resized, retitled,
//! hidden, closed), and restacking of other top-level windows, after which the frame is raised
//! again (clicking the target raises it above an unmanaged window).

use std::sync::{Arc, Mutex, PoisonError, mpsc};

use eframe::egui;
use local_core::a11y::ScreenRect;
use x11rb::{
    connection::Connection,
    errors::{ConnectionError, ReplyError},
    protocol::{
        Event,
        shape::{self, ConnectionExt as _},
        xinput::{self, ConnectionExt as _},
        xproto::{
            AtomEnum, ChangeWindowAttributesAux, ClipOrdering, ConfigureWindowAux,
            ConnectionExt as _, CreateWindowAux, EventMask, PropMode, Rectangle, StackMode, Window,
            WindowClass,
        },
    },
    rust_connection::RustConnection,
    wrapper::ConnectionExt as _,
};

use super::{COLOUR, Outline, Seen, TITLE, bars, contains, outer};
use crate::problem::Problem;

x11rb::atom_manager! {
    Atoms: AtomsCookie {
        _NET_WM_NAME,
        _NET_WM_WINDOW_TYPE,
        _NET_WM_WINDOW_TYPE_NOTIFICATION,
        UTF8_STRING,
    }
}

/// XInput2's "all master devices": the pointer the person moves, whichever device drives it.
const ALL_MASTER_DEVICES: u16 = 1;
/// The buttons that click (left, middle, right); 4 to 7 are the wheel, which only scrolls.
const CLICK_BUTTONS: std::ops::RangeInclusive<u32> = 1..=3;

/// The frame on screen, as the event thread needs to know it.
#[derive(Debug, Clone, Copy)]
struct Shown {
    /// The outline's own window.
    frame: Window,
    /// The target's box on screen.
    target: ScreenRect,
    /// The target's top-level window.
    window: Window,
}

type SharedShown = Arc<Mutex<Option<Shown>>>;

/// The X11 outline: one connection, at most one frame window.
pub struct X11Outline {
    conn: Arc<RustConnection>,
    root: Window,
    /// The frame colour's pixel value in the default colormap.
    pixel: u32,
    atoms: Atoms,
    shown: SharedShown,
    seen: mpsc::Receiver<Seen>,
}

/// The sentence shown when the X server cannot be used for the outline.
fn no_outline(detail: impl std::fmt::Display) -> Problem {
    Problem::new(
        "The outline cannot be drawn on this display: run msguide-desktop inside an X11 desktop session, and follow the instruction by hand meanwhile",
        Some(detail.to_string()),
    )
}

fn lost(err: impl std::fmt::Display) -> Problem {
    Problem::new(
        "The connection to the X server broke, so the outline cannot be drawn: close MSGuide and start it again",
        Some(err.to_string()),
    )
}

impl X11Outline {
    /// Connects to the X server named by `DISPLAY` and starts watching clicks; `ctx` is woken
    /// whenever something is seen.
    ///
    /// # Errors
    /// A [`Problem`] when there is no X server, or it lacks SHAPE 1.1 (the empty input shape).
    pub fn open(ctx: &egui::Context) -> Result<Self, Problem> {
        let (conn, screen) = x11rb::connect(None).map_err(no_outline)?;
        let screen = conn
            .setup()
            .roots
            .get(screen)
            .ok_or_else(|| no_outline("the X server has no such screen"))?;
        let (root, colormap) = (screen.root, screen.default_colormap);
        let version = conn
            .shape_query_version()
            .map_err(no_outline)?
            .reply()
            .map_err(no_outline)?;
        if (version.major_version, version.minor_version) < (1, 1) {
            return Err(no_outline(format!(
                "SHAPE {}.{} has no input shape",
                version.major_version, version.minor_version
            )));
        }
        let atoms = Atoms::new(&conn)
            .map_err(no_outline)?
            .reply()
            .map_err(no_outline)?;
        let [red, green, blue] = COLOUR.map(|c| u16::from(c) * 257);
        let pixel = conn
            .alloc_color(colormap, red, green, blue)
            .map_err(no_outline)?
            .reply()
            .map_err(no_outline)?
            .pixel;
        // Raw presses need XInput 2.1 or later; without it a click is seen only through the
        // target window's change at the next check.
        let raw = conn
            .xinput_xi_query_version(2, 2)
            .map_err(ReplyError::from)
            .and_then(|cookie| cookie.reply())
            .is_ok_and(|v| (v.major_version, v.minor_version) >= (2, 1));
        if raw {
            conn.xinput_xi_select_events(
                root,
                &[xinput::EventMask {
                    deviceid: ALL_MASTER_DEVICES,
                    mask: vec![xinput::XIEventMask::RAW_BUTTON_PRESS],
                }],
            )
            .map_err(no_outline)?;
        }
        conn.change_window_attributes(
            root,
            &ChangeWindowAttributesAux::new().event_mask(EventMask::SUBSTRUCTURE_NOTIFY),
        )
        .map_err(no_outline)?;
        conn.flush().map_err(no_outline)?;

        let conn = Arc::new(conn);
        let shown = SharedShown::default();
        let (tx, seen) = mpsc::channel();
        let watcher = Watcher {
            conn: Arc::clone(&conn),
            root,
            shown: Arc::clone(&shown),
            seen: tx,
            ctx: ctx.clone(),
        };
        std::thread::Builder::new()
            .name("outline-events".to_owned())
            .spawn(move || watcher.run())
            .map_err(|e| Problem::runtime(&e))?;
        Ok(Self {
            conn,
            root,
            pixel,
            atoms,
            shown,
            seen,
        })
    }

    fn create(&self, target: ScreenRect) -> Result<Window, ConnectionError> {
        let conn = &*self.conn;
        let frame = outer(target);
        let frame_window = conn
            .generate_id()
            .map_err(|_| ConnectionError::InsufficientMemory)?;
        let coordinate =
            |v: i32| i16::try_from(v).unwrap_or(if v < 0 { i16::MIN } else { i16::MAX });
        let side = |v: u32| u16::try_from(v).unwrap_or(u16::MAX).max(1);
        let (width, height) = (side(frame.width), side(frame.height));
        conn.create_window(
            x11rb::COPY_DEPTH_FROM_PARENT,
            frame_window,
            self.root,
            coordinate(frame.x),
            coordinate(frame.y),
            width,
            height,
            0,
            WindowClass::INPUT_OUTPUT,
            x11rb::COPY_FROM_PARENT,
            // Unmanaged: a window manager would frame it and take the clicks, or move it.
            &CreateWindowAux::new()
                .background_pixel(self.pixel)
                .override_redirect(1),
        )?;
        conn.change_property8(
            PropMode::REPLACE,
            frame_window,
            AtomEnum::WM_NAME,
            AtomEnum::STRING,
            TITLE.as_bytes(),
        )?;
        conn.change_property8(
            PropMode::REPLACE,
            frame_window,
            self.atoms._NET_WM_NAME,
            self.atoms.UTF8_STRING,
            TITLE.as_bytes(),
        )?;
        conn.change_property32(
            PropMode::REPLACE,
            frame_window,
            self.atoms._NET_WM_WINDOW_TYPE,
            AtomEnum::ATOM,
            &[self.atoms._NET_WM_WINDOW_TYPE_NOTIFICATION],
        )?;
        let rectangle = |[x, y, w, h]: [u32; 4]| Rectangle {
            x: i16::try_from(x).unwrap_or(i16::MAX),
            y: i16::try_from(y).unwrap_or(i16::MAX),
            width: u16::try_from(w).unwrap_or(u16::MAX),
            height: u16::try_from(h).unwrap_or(u16::MAX),
        };
        let frame_bars = bars(u32::from(width), u32::from(height)).map(rectangle);
        conn.shape_rectangles(
            shape::SO::SET,
            shape::SK::BOUNDING,
            ClipOrdering::UNSORTED,
            frame_window,
            0,
            0,
            &frame_bars,
        )?;
        // No input region at all: clicks fall through to whatever is below, the target first.
        conn.shape_rectangles(
            shape::SO::SET,
            shape::SK::INPUT,
            ClipOrdering::UNSORTED,
            frame_window,
            0,
            0,
            &[],
        )?;
        conn.map_window(frame_window)?;
        conn.configure_window(
            frame_window,
            &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE),
        )?;
        Ok(frame_window)
    }

    fn watch_target(&self, window: Window, mask: EventMask) -> Result<(), ConnectionError> {
        // The window may be gone already; the error arrives as an event and is ignored there.
        self.conn
            .change_window_attributes(window, &ChangeWindowAttributesAux::new().event_mask(mask))?;
        Ok(())
    }

    fn shown(&self) -> Option<Shown> {
        *self.shown.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_shown(&self, shown: Option<Shown>) {
        *self.shown.lock().unwrap_or_else(PoisonError::into_inner) = shown;
    }
}

impl Outline for X11Outline {
    fn show(&mut self, target: ScreenRect, window: u32) -> Result<(), Problem> {
        self.hide();
        let frame = self.create(target).map_err(lost)?;
        self.watch_target(
            window,
            EventMask::STRUCTURE_NOTIFY | EventMask::PROPERTY_CHANGE,
        )
        .map_err(lost)?;
        self.set_shown(Some(Shown {
            frame,
            target,
            window,
        }));
        // Anything seen before this frame was shown is about an earlier one.
        while self.seen.try_recv().is_ok() {}
        self.conn.flush().map_err(lost)
    }

    fn hide(&mut self) {
        let Some(shown) = self.shown() else { return };
        self.set_shown(None);
        // Failures here mean the connection is gone, and the window with it.
        let _ = self.conn.destroy_window(shown.frame);
        let _ = self.watch_target(shown.window, EventMask::NO_EVENT);
        let _ = self.conn.flush();
    }

    fn poll(&mut self, _ctx: &egui::Context) -> Vec<Seen> {
        let seen: Vec<Seen> = self.seen.try_iter().collect();
        if self.shown().is_some() {
            seen
        } else {
            Vec::new()
        }
    }
}

impl Drop for X11Outline {
    fn drop(&mut self) {
        self.hide();
    }
}

/// The event thread's half.
struct Watcher {
    conn: Arc<RustConnection>,
    root: Window,
    shown: SharedShown,
    seen: mpsc::Sender<Seen>,
    ctx: egui::Context,
}

impl Watcher {
    /// Waits for events until the connection breaks or the outline is gone.
    fn run(&self) {
        while let Ok(event) = self.conn.wait_for_event() {
            let shown = *self.shown.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(shown) = shown else { continue };
            let Some(seen) = self.judge(&event, shown) else {
                continue;
            };
            if self.seen.send(seen).is_err() {
                return;
            }
            self.ctx.request_repaint();
        }
    }

    /// What `event` means while `shown` is on screen.
    fn judge(&self, event: &Event, shown: Shown) -> Option<Seen> {
        match event {
            Event::XinputRawButtonPress(press) if CLICK_BUTTONS.contains(&press.detail) => {
                // Raw events carry no position; the pointer is still where the press was.
                let pointer = self.conn.query_pointer(self.root).ok()?.reply().ok()?;
                contains(
                    shown.target,
                    i32::from(pointer.root_x),
                    i32::from(pointer.root_y),
                )
                .then_some(Seen::ClickedInside)
            }
            Event::ConfigureNotify(e) if e.window == shown.window => Some(Seen::TargetChanged),
            Event::ConfigureNotify(e) if e.event == self.root && e.window != shown.frame => {
                // Another top-level window was restacked (the target raised by a click):
                // the frame goes back on top.
                let _ = self.conn.configure_window(
                    shown.frame,
                    &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE),
                );
                let _ = self.conn.flush();
                None
            }
            Event::PropertyNotify(e) if e.window == shown.window => Some(Seen::TargetChanged),
            Event::UnmapNotify(e) if e.window == shown.window => Some(Seen::TargetChanged),
            Event::DestroyNotify(e) if e.window == shown.window => Some(Seen::TargetChanged),
            _ => None,
        }
    }
}
