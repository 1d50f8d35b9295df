//! The window list and focus through wlr-foreign-toplevel-management: title, app id and state
//! of every toplevel, kept up to date on the connection, and activation on the seat.
//!
//! The protocol names no process and no geometry: on sway, both come from its IPC ([`super::sway`],
//! matched by app id and title); elsewhere, or when two windows share both, a window's bounds are
//! the outputs it is on and [`geometry`] says why there is none.
//! Each toplevel gets its own number for as long as it lives, never re-used, so an id minted
//! for a closed window is stale, never another window's.

use std::collections::BTreeMap;

use wayland_client::protocol::wl_output;
use wayland_client::{Connection, Dispatch, Proxy, QueueHandle, event_created_child};
use wayland_protocols_wlr::foreign_toplevel::v1::client::{
    zwlr_foreign_toplevel_handle_v1::{self, ZwlrForeignToplevelHandleV1},
    zwlr_foreign_toplevel_manager_v1::{self, ZwlrForeignToplevelManagerV1},
};

use super::sway::{self, Matched, SwayWindow};
use super::{State, run};
use crate::desktop::{DesktopError, NativeWindow, Rect};

/// The toplevels the compositor has announced, by this shim's number for each.
#[derive(Debug, Default)]
pub(super) struct Toplevels {
    pub(super) manager: Option<ZwlrForeignToplevelManagerV1>,
    windows: BTreeMap<u32, Toplevel>,
    next: u32,
}

#[derive(Debug)]
struct Toplevel {
    handle: ZwlrForeignToplevelHandleV1,
    title: String,
    app_id: String,
    /// The protocol's states: 0 maximised, 1 minimised, 2 activated, 3 fullscreen.
    states: Vec<u32>,
    outputs: Vec<wl_output::WlOutput>,
    /// Whether a `done` has described it completely once.
    described: bool,
}

impl Toplevels {
    fn number_of(&self, handle: &ZwlrForeignToplevelHandleV1) -> Option<u32> {
        self.windows
            .iter()
            .find(|(_, t)| t.handle.id() == handle.id())
            .map(|(n, _)| *n)
    }
}

/// Every toplevel, the activated one first.
///
/// # Errors
/// [`DesktopError::NotSupported`] (`window.list`) without the protocol.
pub fn all() -> Result<Vec<NativeWindow>, DesktopError> {
    Ok(located()?.into_iter().map(|(window, _)| window).collect())
}

/// Whether the compositor offers the window list protocol.
#[must_use]
pub fn protocol() -> bool {
    run(|wl| Ok(wl.state.toplevels.manager.is_some())).unwrap_or(false)
}

/// Where the window numbered `id` is drawn, display-global: its content (without sway's border
/// and title bar), what a window screenshot crops to.
///
/// # Errors
/// [`DesktopError::Failed`] when it closed, and
/// [`DesktopError::NotSupported`] (`screenshot.window`) when its geometry is unknown (not sway,
/// two windows with one app id and title, or not shown now), with the reason.
pub fn geometry(id: u32) -> Result<Rect, DesktopError> {
    let (_, place) = located()?
        .into_iter()
        .find(|(w, _)| w.id == id)
        .ok_or_else(|| DesktopError::Failed("the window closed".to_owned()))?;
    place.map_err(|reason| DesktopError::unsupported("screenshot.window", &reason))
}

/// Whether window geometry can be known here (sway's IPC answers), or why not.
///
/// # Errors
/// The reason in one sentence.
pub fn geometry_available() -> Result<(), String> {
    sway::windows().map(|_| ())
}

/// A listed window and its real place, or why it has none.
type Located = (NativeWindow, Result<Rect, String>);

/// Every toplevel with its real place, or why it has none.
fn located() -> Result<Vec<Located>, DesktopError> {
    let tree = sway::windows();
    run(move |wl| {
        if wl.state.toplevels.manager.is_none() {
            return Err(DesktopError::unsupported(
                "window.list",
                "this Wayland compositor has no window list protocol",
            ));
        }
        wl.roundtrip()?;
        wl.sync_outputs()?;
        let displays = wl.displays();
        let rect_of = |output: &wl_output::WlOutput| {
            let global = wl
                .state
                .outputs
                .iter()
                .find(|o| o.wl.id() == output.id())?
                .global;
            displays.iter().find(|d| d.os_id == global).map(|d| d.rect)
        };
        let factor = displays.iter().map(|d| d.scale).fold(1.0_f64, f64::max);
        let mut windows: Vec<Located> = wl
            .state
            .toplevels
            .windows
            .iter()
            .filter(|(_, t)| t.described)
            .map(|(number, t)| {
                let bounds = t
                    .outputs
                    .iter()
                    .filter_map(rect_of)
                    .reduce(|a, b| a.union(&b))
                    .or_else(|| displays.first().map(|d| d.rect))
                    .unwrap_or(Rect {
                        x: 0,
                        y: 0,
                        width: 0,
                        height: 0,
                    });
                let found = tree
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|tree| placed(tree, &t.app_id, &t.title));
                let window = NativeWindow {
                    id: *number,
                    pid: found.as_ref().ok().and_then(|w| w.pid),
                    app_name: t.app_id.clone(),
                    title: t.title.clone(),
                    bounds: found
                        .as_ref()
                        .map_or(bounds, |w| physical(w.content, factor)),
                    minimized: t.states.contains(&1),
                    maximized: t.states.contains(&0) || t.states.contains(&3),
                    focused: t.states.contains(&2),
                    placed: found.is_ok(),
                };
                let place = found.and_then(|w| {
                    if w.visible {
                        Ok(physical(w.content, factor))
                    } else {
                        Err("the window is not shown now (another workspace, a hidden tab or the scratchpad); focus it first".to_owned())
                    }
                });
                (window, place)
            })
            .collect();
        windows.sort_by_key(|(w, _)| !w.focused);
        Ok(windows)
    })
}

/// The sway window of the toplevel with `app_id` and `title`, or why there is none.
fn placed<'a>(tree: &'a [SwayWindow], app_id: &str, title: &str) -> Result<&'a SwayWindow, String> {
    match sway::matching(tree, app_id, title) {
        Matched::One(window) => Ok(window),
        Matched::None => Err("sway's window tree has no window with this app id and title now; list the windows again".to_owned()),
        Matched::Ambiguous => Err("several windows share this app id and title, and neither sway nor the window list protocol tells them apart".to_owned()),
    }
}

/// A rectangle of sway's logical layout in display-global physical pixels: times the largest
/// output scale, as the outputs are placed (the module doc of [`super`]).
fn physical(rect: sway::LayoutRect, factor: f64) -> Rect {
    // Layout coordinates are far below 2^52, so these conversions are exact.
    let at = |v: i64| (v as f64 * factor).round() as i64;
    Rect {
        x: at(rect.x),
        y: at(rect.y),
        width: u64::try_from(at(rect.width)).unwrap_or(0),
        height: u64::try_from(at(rect.height)).unwrap_or(0),
    }
}

/// Activates the toplevel numbered `id` on the seat (which raises and focuses it).
///
/// # Errors
/// [`DesktopError::Failed`] when it closed meanwhile or the compositor goes away.
pub fn focus(id: u32) -> Result<(), DesktopError> {
    run(move |wl| {
        let seat = wl.seat("window.focus")?;
        let handle = wl
            .state
            .toplevels
            .windows
            .get(&id)
            .map(|t| t.handle.clone())
            .ok_or_else(|| DesktopError::Failed("the window closed".to_owned()))?;
        handle.activate(&seat);
        wl.roundtrip()
    })
}

impl Dispatch<ZwlrForeignToplevelManagerV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &ZwlrForeignToplevelManagerV1,
        event: zwlr_foreign_toplevel_manager_v1::Event,
        (): &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let zwlr_foreign_toplevel_manager_v1::Event::Toplevel { toplevel } = event {
            let toplevels = &mut state.toplevels;
            toplevels.next = toplevels.next.wrapping_add(1);
            toplevels.windows.insert(
                toplevels.next,
                Toplevel {
                    handle: toplevel,
                    title: String::new(),
                    app_id: String::new(),
                    states: Vec::new(),
                    outputs: Vec::new(),
                    described: false,
                },
            );
        }
    }

    event_created_child!(State, ZwlrForeignToplevelManagerV1, [
        zwlr_foreign_toplevel_manager_v1::EVT_TOPLEVEL_OPCODE => (ZwlrForeignToplevelHandleV1, ()),
    ]);
}

impl Dispatch<ZwlrForeignToplevelHandleV1, ()> for State {
    fn event(
        state: &mut Self,
        handle: &ZwlrForeignToplevelHandleV1,
        event: zwlr_foreign_toplevel_handle_v1::Event,
        (): &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        use zwlr_foreign_toplevel_handle_v1::Event as E;
        let toplevels = &mut state.toplevels;
        let Some(number) = toplevels.number_of(handle) else {
            return;
        };
        if matches!(event, E::Closed) {
            toplevels.windows.remove(&number);
            handle.destroy();
            return;
        }
        let Some(window) = toplevels.windows.get_mut(&number) else {
            return;
        };
        match event {
            E::Title { title } => window.title = title,
            E::AppId { app_id } => window.app_id = app_id,
            E::State { state } => {
                window.states = state
                    .chunks_exact(4)
                    .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
            }
            E::OutputEnter { output } => window.outputs.push(output),
            E::OutputLeave { output } => window.outputs.retain(|o| o.id() != output.id()),
            E::Done => window.described = true,
            _ => {}
        }
    }
}
