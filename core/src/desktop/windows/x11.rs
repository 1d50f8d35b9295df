//! X11 windows on one x11rb connection: the list from the EWMH `_NET_CLIENT_LIST_STACKING`,
//! every window's names, class, pid, geometry and state asked for before any answer is read
//! (xcap opened a connection per property and read `WM_NAME` only as `COMPOUND_TEXT`, so
//! windows naming themselves in `STRING` were listed untitled), and focus through EWMH.

use x11rb::connection::Connection;
use x11rb::cookie::Cookie;
use x11rb::errors::ConnectionError;
use x11rb::protocol::xproto::{
    AtomEnum, ClientMessageEvent, ConnectionExt as _, EventMask, GetGeometryReply,
    GetPropertyReply, InputFocus, TranslateCoordinatesReply, Window,
};
use x11rb::rust_connection::RustConnection;

use super::text::{self, Encoding, WmClass};
use super::{DesktopError, NativeWindow, Rect};

x11rb::atom_manager! {
    Atoms: AtomsCookie {
        _NET_CLIENT_LIST_STACKING,
        _NET_ACTIVE_WINDOW,
        _NET_WM_NAME,
        _NET_WM_PID,
        _NET_WM_STATE,
        _NET_WM_STATE_HIDDEN,
        _NET_WM_STATE_MAXIMIZED_VERT,
        _NET_WM_STATE_MAXIMIZED_HORZ,
        UTF8_STRING,
        COMPOUND_TEXT,
    }
}

/// How much of a name is read, in 32-bit units: 16 KiB, beyond any title a person reads.
const NAME_LONGS: u32 = 4096;
/// How many windows the client list is read for.
const CLIENT_LIST_LONGS: u32 = 1 << 16;

/// EWMH's source indication for a pager or a tool acting for the user: window managers
/// honour these without focus-stealing prevention.
const SOURCE_PAGER: u32 = 2;

fn failed(err: impl std::fmt::Display) -> DesktopError {
    DesktopError::Failed(err.to_string())
}

fn unlisted(err: impl std::fmt::Display) -> DesktopError {
    DesktopError::unsupported("window.list", err.to_string())
}

/// A connection to the X server named by `DISPLAY` and its default screen's root window;
/// `error` makes the failure the caller's kind.
fn connect(error: fn(String) -> DesktopError) -> Result<(RustConnection, Window), DesktopError> {
    let (conn, screen) = x11rb::connect(None).map_err(|e| error(e.to_string()))?;
    let root = conn
        .setup()
        .roots
        .get(screen)
        .map(|s| s.root)
        .ok_or_else(|| error("the X server has no such screen".to_owned()))?;
    Ok((conn, root))
}

/// The questions asked about one window, answered after all have been sent.
struct Asked<'c> {
    id: Window,
    net_wm_name: Cookie<'c, RustConnection, GetPropertyReply>,
    wm_name: Cookie<'c, RustConnection, GetPropertyReply>,
    wm_class: Cookie<'c, RustConnection, GetPropertyReply>,
    pid: Cookie<'c, RustConnection, GetPropertyReply>,
    state: Cookie<'c, RustConnection, GetPropertyReply>,
    geometry: Cookie<'c, RustConnection, GetGeometryReply>,
    origin: Cookie<'c, RustConnection, TranslateCoordinatesReply>,
}

/// Every managed top-level window, topmost first.
pub(super) fn all() -> Result<Vec<NativeWindow>, DesktopError> {
    let (conn, root) = connect(unlisted)?;
    let atoms = Atoms::new(&conn)
        .map_err(unlisted)?
        .reply()
        .map_err(unlisted)?;
    let stacking = conn
        .get_property(
            false,
            root,
            atoms._NET_CLIENT_LIST_STACKING,
            AtomEnum::WINDOW,
            0,
            CLIENT_LIST_LONGS,
        )
        .map_err(unlisted)?;
    let active = conn
        .get_property(
            false,
            root,
            atoms._NET_ACTIVE_WINDOW,
            AtomEnum::WINDOW,
            0,
            1,
        )
        .map_err(unlisted)?;
    let stacking = stacking.reply().map_err(unlisted)?;
    let Some(bottom_up) = stacking.value32() else {
        return Err(unlisted(
            "no EWMH window manager lists the windows (_NET_CLIENT_LIST_STACKING is missing)",
        ));
    };
    let ids: Vec<Window> = bottom_up.collect();
    let active = active
        .reply()
        .ok()
        .and_then(|r| r.value32().and_then(|mut v| v.next()));
    let asked = ids
        .iter()
        .rev()
        .map(|&id| ask(&conn, &atoms, root, id))
        .collect::<Result<Vec<_>, _>>()
        .map_err(unlisted)?;
    Ok(asked
        .into_iter()
        .filter_map(|a| window(a, &atoms, active))
        .collect())
}

/// Sends every question about `id` without waiting for an answer.
fn ask<'c>(
    conn: &'c RustConnection,
    atoms: &Atoms,
    root: Window,
    id: Window,
) -> Result<Asked<'c>, ConnectionError> {
    let property =
        |name: u32, kind: AtomEnum, longs: u32| conn.get_property(false, id, name, kind, 0, longs);
    Ok(Asked {
        id,
        net_wm_name: property(atoms._NET_WM_NAME, AtomEnum::ANY, NAME_LONGS)?,
        wm_name: property(AtomEnum::WM_NAME.into(), AtomEnum::ANY, NAME_LONGS)?,
        wm_class: property(AtomEnum::WM_CLASS.into(), AtomEnum::STRING, 256)?,
        pid: property(atoms._NET_WM_PID, AtomEnum::CARDINAL, 1)?,
        state: property(atoms._NET_WM_STATE, AtomEnum::ATOM, 64)?,
        geometry: conn.get_geometry(id)?,
        origin: conn.translate_coordinates(id, root, 0, 0)?,
    })
}

/// The window the answers describe; `None` when it closed while being asked about (its
/// geometry is then an error).
fn window(asked: Asked<'_>, atoms: &Atoms, active: Option<Window>) -> Option<NativeWindow> {
    // Every reply is read, so no error is left to arrive later as an event.
    let net_wm_name = asked.net_wm_name.reply().ok();
    let wm_name = asked.wm_name.reply().ok();
    let wm_class = asked.wm_class.reply().ok();
    let pid = asked.pid.reply().ok();
    let state = asked.state.reply().ok();
    let geometry = asked.geometry.reply().ok()?;
    let origin = asked.origin.reply().ok()?;

    let name = |reply: Option<GetPropertyReply>| {
        let reply = reply.filter(|r| r.format == 8)?;
        let encoding = match reply.type_ {
            t if t == u32::from(AtomEnum::STRING) => Encoding::Latin1,
            t if t == atoms.UTF8_STRING => Encoding::Utf8,
            t if t == atoms.COMPOUND_TEXT => Encoding::CompoundText,
            _ => Encoding::Other,
        };
        Some(text::decode(encoding, &reply.value))
    };
    // EWMH defines _NET_WM_NAME as UTF8_STRING only.
    let net_wm_name = net_wm_name
        .filter(|r| r.type_ == atoms.UTF8_STRING)
        .and_then(|r| name(Some(r)));
    let class = wm_class
        .filter(|r| r.format == 8)
        .map(|r| WmClass::parse(&r.value))
        .unwrap_or_default();
    let states: Vec<u32> = state
        .and_then(|r| r.value32().map(Iterator::collect))
        .unwrap_or_default();
    let minimized = states.contains(&atoms._NET_WM_STATE_HIDDEN);
    let maximized = !minimized
        && states.contains(&atoms._NET_WM_STATE_MAXIMIZED_VERT)
        && states.contains(&atoms._NET_WM_STATE_MAXIMIZED_HORZ);
    Some(NativeWindow {
        id: asked.id,
        pid: pid.and_then(|r| r.value32().and_then(|mut v| v.next())),
        title: text::title(net_wm_name, name(wm_name), &class),
        app_name: class.application().to_owned(),
        bounds: Rect {
            x: i64::from(origin.dst_x),
            y: i64::from(origin.dst_y),
            width: u64::from(geometry.width),
            height: u64::from(geometry.height),
        },
        minimized,
        maximized,
        focused: active == Some(asked.id),
        placed: true,
    })
}

/// Gives `window` the input focus; with `raise`, asks the window manager to activate it.
pub(super) fn focus(window: Window, raise: bool) -> Result<(), DesktopError> {
    let (conn, root) = connect(failed)?;
    if raise {
        let active = conn
            .intern_atom(false, b"_NET_ACTIVE_WINDOW")
            .map_err(failed)?
            .reply()
            .map_err(failed)?
            .atom;
        let event = ClientMessageEvent::new(
            32,
            window,
            active,
            [SOURCE_PAGER, x11rb::CURRENT_TIME, 0, 0, 0],
        );
        conn.send_event(
            false,
            root,
            EventMask::SUBSTRUCTURE_REDIRECT | EventMask::SUBSTRUCTURE_NOTIFY,
            event,
        )
        .map_err(failed)?;
    } else {
        conn.set_input_focus(InputFocus::PARENT, window, x11rb::CURRENT_TIME)
            .map_err(failed)?;
    }
    // A round trip, so the request has reached the server before the ACK goes out.
    conn.get_input_focus()
        .map_err(failed)?
        .reply()
        .map_err(failed)?;
    Ok(())
}
