//! Top-level windows: the list (on X11 from the EWMH client list on one x11rb connection, with
//! titles read from `_NET_WM_NAME`, then the ICCCM `WM_NAME` in whichever encoding it is, then
//! `WM_CLASS`; on Wayland the wlr protocol, KWin's scripting on KDE, or the accessibility bus
//! where the compositor lists none; xcap elsewhere),
//! shim-minted `win_<uuid>` ids bound to a fingerprint of the window they name, and focusing
//! one (EWMH `_NET_ACTIVE_WINDOW` on X11, UI Automation on Windows).
//!
//! An id is only as good as its fingerprint: when the window is gone, or its OS id now
//! belongs to a window of another process or application, the id is dropped and the caller
//! told to list again (`WINDOW_STALE`), never pointed at the wrong window.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use uuid::Uuid;

pub use super::NativeWindow;
use super::{DesktopError, Rect};

/// Every top-level window the window system lists, topmost first.
///
/// # Errors
/// [`DesktopError::NotSupported`] (`window.list`) when it cannot list windows (X11 needs an
/// EWMH window manager for this).
pub fn all() -> Result<Vec<NativeWindow>, DesktopError> {
    #[cfg(target_os = "linux")]
    if super::session::Session::detect() == super::session::Session::Wayland {
        return WaylandLister::here().windows();
    }
    platform::all()
}

/// What must still hold for an id to name the same window.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Fingerprint {
    id: u32,
    pid: Option<u32>,
    app_name: String,
}

impl Fingerprint {
    pub(crate) fn of(window: &NativeWindow) -> Self {
        Self {
            id: window.id,
            pid: window.pid,
            app_name: window.app_name.clone(),
        }
    }
}

/// The ids minted by the last listing. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    ids: Arc<Mutex<HashMap<String, Fingerprint>>>,
}

impl Registry {
    /// Forgets every id (at each HELLO: ids never outlive a connection's handshake).
    pub fn clear(&self) {
        self.ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Replaces every id with fresh ones for `windows`, in order.
    pub fn mint(&self, windows: &[NativeWindow]) -> Vec<String> {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        ids.clear();
        windows
            .iter()
            .map(|window| {
                let id = format!("win_{}", Uuid::new_v4());
                ids.insert(id.clone(), Fingerprint::of(window));
                id
            })
            .collect()
    }

    /// The live window `window_id` names, checked against its fingerprint in `live`.
    ///
    /// # Errors
    /// [`DesktopError::WindowStale`] when the id is unknown, the window is gone or its OS id
    /// now belongs to something else; the id is forgotten then.
    pub fn resolve(
        &self,
        window_id: &str,
        live: &[NativeWindow],
    ) -> Result<NativeWindow, DesktopError> {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        let found = ids.get(window_id).and_then(|fingerprint| {
            live.iter()
                .find(|w| w.id == fingerprint.id)
                .filter(|w| Fingerprint::of(w) == *fingerprint)
                .cloned()
        });
        found.ok_or_else(|| {
            ids.remove(window_id);
            DesktopError::WindowStale {
                window_id: window_id.to_owned(),
            }
        })
    }
}

/// Gives `window` the input focus; with `raise`, also activates it above the others.
///
/// # Errors
/// [`DesktopError::Failed`] when the window system refuses, [`DesktopError::NotSupported`]
/// where focusing is not implemented.
pub fn focus(window: &NativeWindow, raise: bool) -> Result<(), DesktopError> {
    // Activation on Wayland always raises: the protocol has no focus without it.
    #[cfg(target_os = "linux")]
    if super::session::Session::detect() == super::session::Session::Wayland {
        return match WaylandLister::here() {
            WaylandLister::Compositor => super::wayland::windows::focus(window.id),
            WaylandLister::Kwin => super::portal::kwin::focus(window.id),
            WaylandLister::Accessibility => Err(DesktopError::unsupported(
                "window.focus",
                "this Wayland compositor lets no other program focus a window",
            )),
        };
    }
    platform::focus(window.id, raise)
}

/// Who lists the windows of a Wayland session.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaylandLister {
    /// The compositor, through the wlr window list protocol (sway, Hyprland, river, labwc).
    Compositor,
    /// KWin, through its scripting on the session bus, where the protocol is missing (KDE
    /// Plasma).
    Kwin,
    /// The applications, on the accessibility bus, where neither lists them (GNOME's mutter,
    /// weston).
    Accessibility,
}

#[cfg(target_os = "linux")]
impl WaylandLister {
    /// Who lists the windows of this process's Wayland session now.
    #[must_use]
    pub fn here() -> Self {
        if super::wayland::windows::protocol() {
            Self::Compositor
        } else if super::portal::kwin::present() {
            Self::Kwin
        } else {
            Self::Accessibility
        }
    }

    /// Every top-level window this lister lists, topmost (or active) first: [`all`] for a
    /// caller that has already asked who lists them.
    ///
    /// # Errors
    /// As [`all`].
    pub fn windows(self) -> Result<Vec<NativeWindow>, DesktopError> {
        match self {
            Self::Compositor => super::wayland::windows::all(),
            Self::Kwin => super::portal::kwin::all(),
            Self::Accessibility => accessible::all(),
        }
    }
}

#[cfg(target_os = "linux")]
pub mod accessible;

#[cfg(all(unix, not(target_os = "macos")))]
mod text;
#[cfg(all(unix, not(target_os = "macos")))]
mod x11;

#[cfg(all(unix, not(target_os = "macos")))]
use x11 as platform;

/// The list through xcap where no X server is asked directly.
#[cfg(any(windows, target_os = "macos"))]
fn xcap_all() -> Result<Vec<NativeWindow>, DesktopError> {
    let all =
        xcap::Window::all().map_err(|e| DesktopError::unsupported("window.list", e.to_string()))?;
    Ok(all
        .iter()
        .filter_map(|w| {
            Some(NativeWindow {
                id: w.id().ok()?,
                pid: w.pid().ok(),
                app_name: w.app_name().unwrap_or_default(),
                title: w.title().unwrap_or_default(),
                bounds: Rect {
                    x: i64::from(w.x().ok()?),
                    y: i64::from(w.y().ok()?),
                    width: u64::from(w.width().ok()?),
                    height: u64::from(w.height().ok()?),
                },
                minimized: w.is_minimized().unwrap_or(false),
                maximized: w.is_maximized().unwrap_or(false),
                placed: true,
                focused: w.is_focused().unwrap_or(false),
            })
        })
        .collect())
}

#[cfg(windows)]
mod platform {
    use super::DesktopError;
    pub(super) use super::xcap_all as all;

    pub(super) fn focus(window: u32, _raise: bool) -> Result<(), DesktopError> {
        use crate::a11y::uia::describe;
        let failed = |e: uiautomation::Error| DesktopError::Failed(describe(&e));
        // Without the UI Automation object this machine cannot focus windows at all.
        let automation = uiautomation::UIAutomation::new().map_err(|e| {
            DesktopError::unsupported(
                "window.focus",
                format!("UI Automation is unavailable: {}", describe(&e)),
            )
        })?;
        let handle = uiautomation::types::Handle::from(isize::try_from(window).unwrap_or_default());
        automation
            .element_from_handle(handle)
            .map_err(failed)?
            .set_focus()
            .map_err(failed)
    }
}

#[cfg(target_os = "macos")]
mod platform {
    use super::DesktopError;
    pub(super) use super::xcap_all as all;

    pub(super) fn focus(_window: u32, _raise: bool) -> Result<(), DesktopError> {
        Err(DesktopError::unsupported(
            "window.focus",
            "focusing a window is not implemented on macOS",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(id: u32, pid: u32, app: &str) -> NativeWindow {
        NativeWindow {
            id,
            pid: Some(pid),
            app_name: app.to_owned(),
            title: "t".to_owned(),
            bounds: Rect::from_corners([0, 0, 10, 10]).unwrap(),
            minimized: false,
            maximized: false,
            focused: false,
            placed: true,
        }
    }

    #[test]
    fn ids_are_fresh_per_listing_and_die_with_their_window() {
        let registry = Registry::default();
        let live = vec![
            window(0x40_0001, 10, "gedit"),
            window(0x40_0002, 11, "xterm"),
        ];
        let first = registry.mint(&live);
        assert!(
            first
                .iter()
                .all(|id| id.starts_with("win_") && id.len() == 40)
        );
        assert_eq!(registry.resolve(&first[1], &live).unwrap().id, 0x40_0002);

        // A new listing re-mints: the old ids are gone.
        let second = registry.mint(&live);
        assert_ne!(first, second);
        assert_eq!(
            registry.resolve(&first[0], &live).unwrap_err().code(),
            "WINDOW_STALE"
        );

        // The OS id re-used by another process: stale, and forgotten.
        let reused = vec![
            window(0x40_0001, 99, "gedit"),
            window(0x40_0002, 11, "xterm"),
        ];
        assert!(registry.resolve(&second[0], &reused).is_err());
        assert!(registry.resolve(&second[0], &live).is_err());
        // Gone altogether.
        assert!(registry.resolve(&second[1], &[]).is_err());

        let third = registry.mint(&live);
        registry.clear();
        assert!(registry.resolve(&third[0], &live).is_err());
    }
}
