//! Element ids: the short ids (`e1`, `e2`, ...) an accessibility snapshot gives its elements,
//! each bound to the window and the element it named, and the re-check that an id still names
//! them before anything acts on it.
//!
//! An id stands for one element of one window: the window's fingerprint (its OS id, process
//! and application, as window ids have) and the element's role, name and place in the tree
//! ([`Element::path`]). A later snapshot that finds the same element gives it the same id, and
//! an element that changed gets a new one; so an id of an older snapshot is re-checked like
//! any other and refused once its window or element is not the same. Ids are never re-used;
//! the store keeps the last [`MAX_IDS`], and an older id is refused as unknown.
//!
//! Coordinates are the snapshot's: display-global physical pixels, the space of input
//! actions, so an element's centre is the point that clicks it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::windows::Fingerprint;
use super::{DesktopError, NativeWindow};
use crate::a11y::{self, A11yError, Element, ScreenRect, WindowTarget};

/// Most ids kept: far more than one snapshot has (500 at most), few enough to stay small.
pub const MAX_IDS: usize = 4096;

/// What must still hold for an id to name the same element.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    window: Fingerprint,
    role: String,
    label: String,
    path: Vec<u32>,
}

#[derive(Debug, Default)]
struct Ids {
    /// The number the next new element gets.
    next: u64,
    by_key: HashMap<Key, u64>,
    by_number: BTreeMap<u64, Key>,
}

/// The element ids minted so far. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct Store {
    ids: Arc<Mutex<Ids>>,
}

/// An element found again: its live window and the element as it is now (its box current).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The window, as the window system lists it now.
    pub window: NativeWindow,
    /// The element now.
    pub element: Element,
}

/// The accessibility lookup of `window`: its title, and its process and place to choose among
/// windows of one title; on Wayland its place is also where the toolkit's window-relative
/// boxes start.
#[must_use]
pub fn target(window: &NativeWindow) -> WindowTarget {
    let window_relative = super::session::Session::detect() == super::session::Session::Wayland;
    let side = |v: u64| i32::try_from(v).unwrap_or(i32::MAX);
    WindowTarget {
        title: window.title.clone(),
        pid: window.pid,
        bounds: ScreenRect::from_extents(
            i32::try_from(window.bounds.x).unwrap_or(0),
            i32::try_from(window.bounds.y).unwrap_or(0),
            side(window.bounds.width),
            side(window.bounds.height),
        ),
        window_relative,
    }
}

impl Store {
    /// Forgets every id (at each HELLO, as window ids are).
    pub fn clear(&self) {
        *self.ids.lock().unwrap_or_else(PoisonError::into_inner) = Ids::default();
    }

    /// The ids of `elements`, a snapshot of `window`, in order: an element seen before keeps
    /// its id, a new or changed one gets the next number.
    pub fn mint(&self, window: &NativeWindow, elements: &[Element]) -> Vec<String> {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        let window = Fingerprint::of(window);
        let numbers: Vec<u64> = elements
            .iter()
            .map(|element| {
                let key = Key {
                    window: window.clone(),
                    role: element.role.clone(),
                    label: element.label.clone(),
                    path: element.path.clone(),
                };
                if let Some(number) = ids.by_key.get(&key) {
                    return *number;
                }
                ids.next += 1;
                let number = ids.next;
                ids.by_key.insert(key.clone(), number);
                ids.by_number.insert(number, key);
                number
            })
            .collect();
        // The oldest ids go first; this snapshot's are the newest or were just seen, and an
        // id seen again keeps its number, so it may be among the oldest: keep those.
        while ids.by_number.len() > MAX_IDS {
            let Some((&oldest, _)) = ids.by_number.iter().find(|(n, _)| !numbers.contains(*n))
            else {
                break;
            };
            if let Some(key) = ids.by_number.remove(&oldest) {
                ids.by_key.remove(&key);
            }
        }
        numbers.into_iter().map(|n| format!("e{n}")).collect()
    }

    /// The element `element_id` names, found again in `live` (the windows listed now) and in
    /// its window's accessibility tree within `deadline`, after checking it is the same: the
    /// same window (OS id, process, application) and the same role, name and place.
    ///
    /// # Errors
    /// [`DesktopError::ElementStale`] for an id no snapshot gave (or one too old to be kept),
    /// a window that is gone or replaced, and an element that changed or is gone;
    /// [`DesktopError::NotSupported`] (`a11y.snapshot`) when the accessibility service cannot
    /// be asked.
    pub async fn locate(
        &self,
        element_id: &str,
        live: &[NativeWindow],
        deadline: Duration,
    ) -> Result<Located, DesktopError> {
        let stale = |reason| DesktopError::ElementStale {
            element_id: element_id.to_owned(),
            reason,
        };
        let key = self
            .key(element_id)
            .ok_or_else(|| stale("is unknown (no snapshot gave it, or it is too old)"))?;
        let window = live
            .iter()
            .find(|w| Fingerprint::of(w) == key.window)
            .ok_or_else(|| stale("is stale: its window is gone"))?;
        let found = match a11y::element_at(&target(window), &key.path, deadline).await {
            Ok(found) => found,
            Err(A11yError::WindowNotFound) => {
                return Err(stale("is stale: its window left the accessibility tree"));
            }
            Err(err) => return Err(DesktopError::unsupported("a11y.snapshot", err.to_string())),
        };
        let element = found
            .filter(|e| e.role == key.role && e.label == key.label)
            .ok_or_else(|| stale("is stale: the element changed or is gone"))?;
        Ok(Located {
            window: window.clone(),
            element,
        })
    }

    fn key(&self, element_id: &str) -> Option<Key> {
        let number: u64 = element_id
            .strip_prefix('e')
            .filter(|digits| !digits.starts_with('0'))?
            .parse()
            .ok()?;
        let ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        ids.by_number.get(&number).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a11y::ElementStates;
    use crate::desktop::Rect;

    fn window(id: u32, pid: u32) -> NativeWindow {
        NativeWindow {
            id,
            pid: Some(pid),
            app_name: "app".to_owned(),
            title: "A window".to_owned(),
            bounds: Rect {
                x: 0,
                y: 0,
                width: 100,
                height: 100,
            },
            minimized: false,
            maximized: false,
            focused: false,
            placed: true,
        }
    }

    fn element(label: &str, path: &[u32]) -> Element {
        Element {
            role: "button".to_owned(),
            label: label.to_owned(),
            bounds: ScreenRect::from_extents(1, 2, 3, 4).unwrap_or(ScreenRect {
                x: 0,
                y: 0,
                width: 1,
                height: 1,
            }),
            states: ElementStates::default(),
            path: path.to_vec(),
        }
    }

    #[test]
    fn ids_are_unique_in_a_snapshot_and_kept_for_the_same_element() {
        let store = Store::default();
        let w = window(7, 70);
        let first = store.mint(&w, &[element("OK", &[0]), element("Cancel", &[1])]);
        assert_eq!(first, ["e1", "e2"]);
        // The same elements keep their ids; a renamed one and a new one get new numbers.
        let again = store.mint(&w, &[element("OK", &[0]), element("Stop", &[1])]);
        assert_eq!(again, ["e1", "e3"]);
        // Another window's element at the same place is another element.
        assert_eq!(store.mint(&window(8, 70), &[element("OK", &[0])]), ["e4"]);
        // Its window re-used by another process: another element too.
        assert_eq!(store.mint(&window(7, 71), &[element("OK", &[0])]), ["e5"]);
    }

    #[tokio::test]
    async fn an_unknown_id_and_a_gone_window_are_refused_with_what_to_do() {
        let store = Store::default();
        let w = window(7, 70);
        assert_eq!(store.mint(&w, &[element("OK", &[0])]), ["e1"]);
        for id in ["e9", "e01", "x1", "e", ""] {
            let err = store
                .locate(id, std::slice::from_ref(&w), Duration::from_millis(1))
                .await;
            let Err(err) = err else {
                panic!("{id} was found")
            };
            assert_eq!(
                err.to_string(),
                format!(
                    "the element id {id} is unknown (no snapshot gave it, or it is too old); take a new accessibility snapshot and use its ids"
                )
            );
            assert_eq!(err.code(), "WINDOW_STALE");
        }
        // The window closed (or its id now belongs to another process).
        let err = store
            .locate("e1", &[window(7, 71)], Duration::from_millis(1))
            .await;
        assert_eq!(
            err.map(|_| ()),
            Err(DesktopError::ElementStale {
                element_id: "e1".to_owned(),
                reason: "is stale: its window is gone",
            })
        );
        let details = DesktopError::ElementStale {
            element_id: "e1".to_owned(),
            reason: "",
        }
        .details();
        assert_eq!(
            details,
            Some(
                serde_json::json!({"element_id": "e1", "hint": "take a new accessibility snapshot"})
            )
        );
    }

    #[test]
    fn the_store_keeps_the_newest_ids_and_this_snapshots() {
        let store = Store::default();
        let w = window(7, 70);
        let first = store.mint(&w, &[element("kept", &[0])]);
        let many: Vec<Element> = (0..MAX_IDS)
            .map(|i| element(&format!("b{i}"), &[1, u32::try_from(i).unwrap_or(0)]))
            .collect();
        store.mint(&w, &many);
        // The oldest went; seen again, the element is new.
        assert!(store.key(&first[0]).is_none());
        // One seen in the snapshot that overflows stays, whatever its age.
        let mut with_old = many;
        with_old.push(element("kept again", &[2]));
        let ids = store.mint(&w, &with_old);
        assert!(ids.iter().all(|id| store.key(id).is_some()));
    }
}
