//! The window list where the Wayland compositor gives none to other programs (GNOME's mutter,
//! weston): the top-level windows the applications on the accessibility bus list. No one says
//! where such a window is, so its bounds are the outputs, as for a wlroots compositor other
//! than sway, and it cannot be focused.

use crate::a11y::{self, A11yError, AccessibleWindow};
use crate::desktop::{DesktopError, NativeWindow, Rect, screen};

/// Every showing top-level window the accessibility bus lists, the active one first.
///
/// # Errors
/// [`DesktopError::NotSupported`] (`window.list`) when the accessibility bus cannot be reached,
/// [`DesktopError::Failed`] when the outputs cannot be read.
pub fn all() -> Result<Vec<NativeWindow>, DesktopError> {
    let listed = listed().map_err(|e| match e {
        A11yError::Unavailable(reason) => DesktopError::unsupported(
            "window.list",
            format!("this Wayland compositor has no window list protocol, and the accessibility bus that lists windows instead cannot be reached ({reason})"),
        ),
        other => DesktopError::Failed(other.to_string()),
    })?;
    Ok(from_listed(listed, screen::spanned(&screen::displays()?)))
}

/// The windows `listed` as the connector gives them, each with `outputs` as its bounds, the
/// active one first; one with neither a title nor an application name is left out.
fn from_listed(listed: Vec<AccessibleWindow>, outputs: Rect) -> Vec<NativeWindow> {
    let mut windows: Vec<NativeWindow> = listed
        .into_iter()
        .filter_map(|w| {
            let title = w.name()?.to_owned();
            Some(NativeWindow {
                id: id_of(&w.key),
                pid: w.pid,
                app_name: w.app_name,
                title,
                bounds: outputs,
                // A minimised window is not showing, so it is not listed.
                minimized: false,
                maximized: false,
                focused: w.active,
                placed: false,
            })
        })
        .collect();
    windows.sort_by_key(|w| !w.focused);
    windows
}

/// The windows as the accessibility bus lists them, read on a thread and runtime of their own:
/// the bus is asynchronous, and the list is asked for from plain threads (the guidance window's)
/// and from inside a runtime (the connector's) alike.
///
/// # Errors
/// The bus's, or [`A11yError::Unavailable`] when the reading thread stopped.
pub fn listed() -> Result<Vec<AccessibleWindow>, A11yError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| A11yError::Unavailable(e.to_string()))?
                    .block_on(a11y::windows())
            })
            .join()
    })
    .map_err(|_| A11yError::Unavailable("the accessibility bus reader stopped".to_owned()))?
}

/// A window id for a window the accessibility bus names by `key`: the same for as long as the
/// window is open, as a window system's id is.
#[must_use]
pub fn id_of(key: &str) -> u32 {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::hash::DefaultHasher::new();
    key.hash(&mut hasher);
    // Half the hash's bits are plenty to tell a desktop's windows apart.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a 32-bit id from a 64-bit hash"
    )]
    let id = hasher.finish() as u32;
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a11y::ScreenRect;

    fn window(key: &str, title: &str, app: &str, active: bool) -> AccessibleWindow {
        AccessibleWindow {
            key: key.to_owned(),
            pid: Some(7),
            app_name: app.to_owned(),
            title: title.to_owned(),
            bounds: ScreenRect {
                x: 5,
                y: 6,
                width: 10,
                height: 20,
            },
            active,
        }
    }

    #[test]
    fn the_active_window_comes_first_focused_and_every_window_spans_the_outputs() {
        let outputs = Rect {
            x: 0,
            y: 0,
            width: 2560,
            height: 800,
        };
        let listed = vec![
            window(":1.5/a", "Editor", "gedit", false),
            window(":1.6/b", "", "", false),
            window(":1.7/c", "", "Terminal", true),
            window(":1.8/d", "Viewer", "eog", false),
        ];
        let windows = from_listed(listed, outputs);
        let seen: Vec<(&str, bool)> = windows
            .iter()
            .map(|w| (w.title.as_str(), w.focused))
            .collect();
        // The unnamed window is left out, the active one leads, the rest keep their order.
        assert_eq!(
            seen,
            [("Terminal", true), ("Editor", false), ("Viewer", false)]
        );
        assert!(windows.iter().all(|w| w.bounds == outputs && !w.placed));
        assert_eq!(windows[0].id, id_of(":1.7/c"));
        assert_eq!(windows[1].pid, Some(7));
    }
}
