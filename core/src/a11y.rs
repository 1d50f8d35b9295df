//! Budgeted accessibility capture of one window: AT-SPI on Linux, UI Automation on Windows.
//!
//! [`snapshot`] walks the window's accessibility tree depth first, in document order, and
//! returns the named elements with their screen boxes. The walk is bounded four ways
//! ([`Budget`]): elements kept, nodes visited, depth, and a deadline; hitting any of them sets
//! [`Snapshot::truncated`] and returns what was gathered so far. Password fields are skipped
//! with their whole subtree before their name is read, and so are elements that are not
//! showing (offscreen, hidden, collapsed away), since the user cannot see them.
//!
//! Nothing here logs names or labels: they are screen text.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::limits::{A11Y_DEADLINE, A11Y_MAX_DEPTH, A11Y_MAX_NODES, MAX_ELEMENTS, MAX_LABEL_CHARS};

#[cfg(target_os = "linux")]
mod atspi;
#[cfg(windows)]
pub(crate) mod uia;

/// How far one walk may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Most elements kept (the API takes at most [`MAX_ELEMENTS`]).
    pub max_elements: usize,
    /// Most tree nodes visited, named or not.
    pub max_nodes: usize,
    /// Deepest level visited below the window (the window is depth 0).
    pub max_depth: usize,
    /// Wall-clock limit of the whole walk, including finding the window.
    pub deadline: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_elements: MAX_ELEMENTS,
            max_nodes: A11Y_MAX_NODES,
            max_depth: A11Y_MAX_DEPTH,
            deadline: A11Y_DEADLINE,
        }
    }
}

/// A rectangle in screen pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ScreenRect {
    /// Left edge.
    pub x: i32,
    /// Top edge.
    pub y: i32,
    /// Width, above 0.
    pub width: u32,
    /// Height, above 0.
    pub height: u32,
}

impl ScreenRect {
    /// The rectangle of a toolkit's `(x, y, width, height)`, `None` when it has no area.
    #[must_use]
    pub fn from_extents(x: i32, y: i32, width: i32, height: i32) -> Option<Self> {
        let width = u32::try_from(width).ok().filter(|w| *w > 0)?;
        let height = u32::try_from(height).ok().filter(|h| *h > 0)?;
        Some(Self {
            x,
            y,
            width,
            height,
        })
    }

    /// This rectangle of a toolkit's own pixels in screen pixels, `scale` screen pixels to one
    /// of its pixels, the screen's origin shared (a toolkit that scales itself, GTK under
    /// `GDK_SCALE`, divides every screen coordinate by its scale, root origin included). The
    /// edges are scaled rather than the size, so a box keeps touching its neighbours.
    #[must_use]
    pub fn scaled(&self, scale: f64) -> Self {
        let at = |v: i64| (v as f64 * scale).round() as i64;
        let x = at(i64::from(self.x));
        let y = at(i64::from(self.y));
        let right = at(i64::from(self.x) + i64::from(self.width));
        let bottom = at(i64::from(self.y) + i64::from(self.height));
        let side = |from: i64, to: i64| u32::try_from((to - from).max(1)).unwrap_or(u32::MAX);
        let clamp = |v: i64| i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX });
        Self {
            x: clamp(x),
            y: clamp(y),
            width: side(x, right),
            height: side(y, bottom),
        }
    }

    /// The centre pixel.
    #[must_use]
    pub fn centre(&self) -> (i32, i32) {
        let half = |side: u32| i32::try_from(side / 2).unwrap_or(i32::MAX);
        (
            self.x.saturating_add(half(self.width)),
            self.y.saturating_add(half(self.height)),
        )
    }
}

/// Within this fraction of a whole number, a toolkit's scale is that whole number: the frame a
/// toolkit reports includes the window manager's decorations (a few pixels at the sides), which
/// the window's own size lacks, so its ratio falls a little short of the real scale.
const WHOLE_SCALE_SLACK: f64 = 0.02;

/// Above this, a ratio of sizes is no toolkit's scale but a frame that is not the window's.
const MAX_TOOLKIT_SCALE: f64 = 4.0;

/// How many screen pixels make one pixel of a toolkit whose accessibility boxes are in its own
/// logical pixels, from `real`, the window as the window system lists it (screen pixels), and
/// `reported`, its frame as the toolkit reports it; `None` when the toolkit reports screen
/// pixels (the sizes agree, give or take its decorations).
///
/// On X11 a toolkit may scale its windows itself (GTK 3 under `GDK_SCALE=2`, Qt under
/// `QT_SCALE_FACTOR`) and then report boxes in its logical pixels, a fraction of the screen's,
/// while window bounds, screenshots and input are in screen pixels; this ratio brings the boxes
/// into that one space. The larger ratio of the two sides is taken, as decorations (a title bar)
/// only make the reported frame larger; a ratio near a whole number is that number (GTK scales
/// by whole numbers only), and any other above 1 is kept as it is (a fractional scale, to
/// within the decorations' share of the window). `GDK_DPI_SCALE` only scales fonts, not
/// geometry, so it needs nothing here. Both sides must be larger than reported: a frame smaller
/// on one side only is another window's, not a scaled one.
#[must_use]
pub fn toolkit_scale(real: ScreenRect, reported: ScreenRect) -> Option<f64> {
    let ratio = |real: u32, reported: u32| f64::from(real) / f64::from(reported);
    let across = ratio(real.width, reported.width);
    let down = ratio(real.height, reported.height);
    if across.min(down) <= 1.0 + WHOLE_SCALE_SLACK {
        return None;
    }
    let scale = across.max(down);
    let whole = scale.round();
    let scale = if (scale - whole).abs() <= whole * WHOLE_SCALE_SLACK {
        whole
    } else {
        scale
    };
    (scale <= MAX_TOOLKIT_SCALE).then_some(scale)
}

/// The states of an element that matter to guidance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementStates {
    /// It accepts input.
    pub enabled: bool,
    /// It can take the keyboard focus.
    pub focusable: bool,
    /// It has the keyboard focus.
    pub focused: bool,
    /// It is checked (a checkbox, a toggle).
    pub checked: bool,
    /// It is selected.
    pub selected: bool,
    /// It is expanded (a tree node, a combo box).
    pub expanded: bool,
    /// Its value cannot be edited.
    pub read_only: bool,
}

/// One named, showing element of the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Element {
    /// Lower-case UI Automation control type name (`button`, `text`, `edit`…), whatever the
    /// platform, so providers see one vocabulary.
    pub role: String,
    /// The accessible name, at most [`MAX_LABEL_CHARS`] characters.
    pub label: String,
    /// Where it is, in screen pixels.
    #[serde(rename = "box")]
    pub bounds: ScreenRect,
    /// Its states.
    pub states: ElementStates,
    /// Where it sits below the window: the index of each ancestor among its siblings, then its
    /// own, so a later look at the same window finds the same node (empty where the backend
    /// does not say).
    #[serde(skip)]
    pub path: Vec<u32>,
}

/// The elements of one window, in document order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    /// The elements kept, in document order.
    pub elements: Vec<Element>,
    /// Whether a budget cut the walk short (or a part of the tree failed to answer).
    pub truncated: bool,
    /// The window's own box as its toolkit reports it, when it does: on Wayland its size at
    /// its surface's corner. Not part of any answer's JSON.
    #[serde(skip)]
    pub frame: Option<ScreenRect>,
}

/// Which window to walk: the one whose title is `title`; among several, the one of `pid`
/// and then the one at `bounds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowTarget {
    /// The window's exact title.
    pub title: String,
    /// The process that owns it, to choose among windows of one title.
    pub pid: Option<u32>,
    /// Where it is, to choose among windows of one title and process (and, with
    /// `window_relative`, where its content starts).
    pub bounds: Option<ScreenRect>,
    /// Whether the toolkit reports boxes relative to its own window rather than the screen:
    /// on Wayland a client does not know where its window is, so GTK's "screen" extents start
    /// at its surface's corner; [`Placement`] moves them to `bounds`' origin.
    pub window_relative: bool,
}

/// How a toolkit's reported boxes become display-global physical pixels, the space of window
/// bounds, screenshots and input: the one place that converts them.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "UI Automation reports screen pixels")
)]
pub(crate) struct Placement {
    /// Screen pixels per toolkit pixel ([`toolkit_scale`]), `None` for one.
    scale: Option<f64>,
    /// Where the toolkit's origin lands on the screen, after scaling: `(0, 0)` where it
    /// reports screen coordinates (X11), the window's content origin minus its frame's scaled
    /// corner where it reports window-relative ones (Wayland).
    offset: (i64, i64),
}

#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "UI Automation reports screen pixels")
)]
impl Placement {
    /// The placement of `target`'s boxes, from the frame as its toolkit reports it (`None`
    /// when it reports none: boxes taken as they are, moved to the window on Wayland).
    pub(crate) fn of(target: &WindowTarget, frame: Option<ScreenRect>) -> Self {
        let scale = match (target.bounds, frame) {
            (Some(real), Some(reported)) => toolkit_scale(real, reported),
            _ => None,
        };
        let offset = match target.bounds.filter(|_| target.window_relative) {
            Some(real) => {
                let corner = frame.map_or((0, 0), |f| {
                    let f = ScreenRect {
                        width: 1,
                        height: 1,
                        ..f
                    };
                    let at = scale.map_or(f, |s| f.scaled(s));
                    (i64::from(at.x), i64::from(at.y))
                });
                (i64::from(real.x) - corner.0, i64::from(real.y) - corner.1)
            }
            None => (0, 0),
        };
        Self { scale, offset }
    }

    /// A box as the toolkit reported it, in display-global physical pixels.
    pub(crate) fn place(&self, reported: ScreenRect) -> ScreenRect {
        let scaled = self.scale.map_or(reported, |s| reported.scaled(s));
        let moved = |v: i32, by: i64| {
            let v = i64::from(v) + by;
            i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX })
        };
        ScreenRect {
            x: moved(scaled.x, self.offset.0),
            y: moved(scaled.y, self.offset.1),
            ..scaled
        }
    }
}

/// Why no snapshot could be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum A11yError {
    /// The platform's accessibility service cannot be reached (no session bus, no AT-SPI
    /// registry, no UI Automation).
    #[error("the accessibility service is unavailable: {0}")]
    Unavailable(String),
    /// No accessible window has that title (yet: toolkits register lazily).
    #[error("no accessible window with that title appeared before the deadline")]
    WindowNotFound,
    /// This platform has no accessibility backend here.
    #[error("accessibility capture is not supported on this platform")]
    Unsupported,
}

impl A11yError {
    /// The stable code of the failure, for logs and wire errors.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "a11y_unavailable",
            Self::WindowNotFound => "a11y_window_not_found",
            Self::Unsupported => "a11y_unsupported",
        }
    }
}

/// A top-level window as an application lists it on the accessibility bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessibleWindow {
    /// What names it on the bus (its application's bus name and its object path): stable for
    /// as long as the window is open.
    pub key: String,
    /// The process that owns it, when the bus says.
    pub pid: Option<u32>,
    /// Its application's name.
    pub app_name: String,
    /// Its title (empty where the toolkit gives its frame no name).
    pub title: String,
    /// Its box as the toolkit reports it: on Wayland at the surface's corner, not where the
    /// compositor put it.
    pub bounds: ScreenRect,
    /// Whether it is the active window, the one the keyboard's input goes to.
    pub active: bool,
}

impl AccessibleWindow {
    /// What it goes by: its title, or its application's name where the toolkit left the frame
    /// unnamed (as X11 falls back to the window's class); `None` when it has neither.
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        [self.title.trim(), self.app_name.trim()]
            .into_iter()
            .find(|t| !t.is_empty())
    }
}

/// Every showing top-level window the applications on the accessibility bus list.
///
/// # Errors
/// [`A11yError::Unavailable`] when the bus cannot be reached; [`A11yError::Unsupported`] off
/// Linux (the window system lists windows there).
pub async fn windows() -> Result<Vec<AccessibleWindow>, A11yError> {
    #[cfg(target_os = "linux")]
    {
        atspi::windows().await
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(A11yError::Unsupported)
    }
}

/// Walks `target`'s accessibility tree within `budget`.
///
/// # Errors
/// [`A11yError`] when the service is unreachable or the window never shows up in it.
pub async fn snapshot(target: &WindowTarget, budget: Budget) -> Result<Snapshot, A11yError> {
    #[cfg(target_os = "linux")]
    {
        atspi::snapshot(target, budget).await
    }
    #[cfg(windows)]
    {
        uia::snapshot(target, budget).await
    }
    #[cfg(not(any(target_os = "linux", windows)))]
    {
        let _ = (target, budget);
        Err(A11yError::Unsupported)
    }
}

/// The element at `path` (an [`Element::path`] from an earlier snapshot) in `target`'s window
/// as it is now, found within `deadline`; `Ok(None)` when no element a snapshot would keep is
/// there any more.
///
/// # Errors
/// [`A11yError`] when the service is unreachable or the window is not in it;
/// [`A11yError::Unsupported`] where the backend keeps no paths (UI Automation, for now).
pub async fn element_at(
    target: &WindowTarget,
    path: &[u32],
    deadline: Duration,
) -> Result<Option<Element>, A11yError> {
    #[cfg(target_os = "linux")]
    {
        atspi::element_at(target, path, deadline).await
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (target, path, deadline);
        Err(A11yError::Unsupported)
    }
}

/// What the walker should do with one node, decided before its name is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Visit {
    /// Read it and walk its children.
    Enter,
    /// Leave it and everything below it (a password field, something not showing).
    SkipSubtree,
    /// The budget is spent: stop the walk.
    Stop,
}

/// The platform-neutral half of a walk: the budgets, the skips and the element list.
#[derive(Debug)]
pub(crate) struct Collector {
    budget: Budget,
    started: Instant,
    visited: usize,
    snapshot: Snapshot,
}

impl Collector {
    pub(crate) fn new(budget: Budget, started: Instant) -> Self {
        Self {
            budget,
            started,
            visited: 0,
            snapshot: Snapshot::default(),
        }
    }

    /// The instant the walk must end.
    pub(crate) fn deadline(&self) -> Instant {
        self.started + self.budget.deadline
    }

    /// Whether the deadline has passed; marks the snapshot truncated if so.
    pub(crate) fn out_of_time(&mut self) -> bool {
        let late = Instant::now() >= self.deadline();
        self.snapshot.truncated |= late;
        late
    }

    /// Counts a node at `depth` and decides whether to read it. `password` and `showing`
    /// come from the node's role and states, read before its name.
    pub(crate) fn visit(&mut self, depth: usize, password: bool, showing: bool) -> Visit {
        if self.visited >= self.budget.max_nodes || self.out_of_time() {
            self.snapshot.truncated = true;
            return Visit::Stop;
        }
        self.visited += 1;
        if password || !showing {
            return Visit::SkipSubtree;
        }
        if depth > self.budget.max_depth {
            self.snapshot.truncated = true;
            return Visit::SkipSubtree;
        }
        Visit::Enter
    }

    /// Whether children at `depth + 1` would still be visited.
    pub(crate) fn descends(&mut self, depth: usize) -> bool {
        if depth >= self.budget.max_depth {
            self.snapshot.truncated = true;
            return false;
        }
        true
    }

    /// Keeps a named element with an area; `false` once the element budget is spent (the
    /// element that did not fit marks the snapshot truncated).
    #[cfg_attr(
        not(windows),
        allow(dead_code, reason = "the UI Automation walk keeps no path")
    )]
    pub(crate) fn keep(
        &mut self,
        role: &str,
        label: &str,
        bounds: Option<ScreenRect>,
        states: ElementStates,
    ) -> bool {
        self.keep_at(role, label, bounds, states, Vec::new())
    }

    /// [`Collector::keep`] with the element's [`Element::path`].
    pub(crate) fn keep_at(
        &mut self,
        role: &str,
        label: &str,
        bounds: Option<ScreenRect>,
        states: ElementStates,
        path: Vec<u32>,
    ) -> bool {
        let label = clean_label(label);
        let Some(bounds) = bounds else { return true };
        if label.is_empty() {
            return true;
        }
        if self.snapshot.elements.len() >= self.budget.max_elements {
            self.snapshot.truncated = true;
            return false;
        }
        self.snapshot.elements.push(Element {
            role: role.to_owned(),
            label,
            bounds,
            states,
            path,
        });
        true
    }

    /// Marks the snapshot truncated because part of the tree did not answer.
    pub(crate) fn lost_part(&mut self) {
        self.snapshot.truncated = true;
    }

    pub(crate) fn finish(self, frame: Option<ScreenRect>) -> Snapshot {
        Snapshot {
            frame,
            ..self.snapshot
        }
    }
}

/// A label as sent: control characters become spaces, trimmed, at most [`MAX_LABEL_CHARS`].
fn clean_label(raw: &str) -> String {
    let spaced: String = raw
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    spaced
        .trim()
        .chars()
        .take(MAX_LABEL_CHARS)
        .collect::<String>()
        .trim_end()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(max_elements: usize, max_nodes: usize, max_depth: usize) -> Budget {
        Budget {
            max_elements,
            max_nodes,
            max_depth,
            deadline: Duration::from_secs(60),
        }
    }

    fn rect() -> Option<ScreenRect> {
        ScreenRect::from_extents(1, 2, 3, 4)
    }

    #[test]
    fn the_element_budget_keeps_n_and_refuses_n_plus_one() {
        let mut c = Collector::new(Budget::default(), Instant::now());
        for i in 0..MAX_ELEMENTS {
            assert!(c.keep("button", &format!("b{i}"), rect(), ElementStates::default()));
        }
        assert!(
            !c.finish(None).truncated,
            "exactly 200 elements is complete"
        );

        let mut c = Collector::new(Budget::default(), Instant::now());
        for i in 0..MAX_ELEMENTS {
            assert!(c.keep("button", &format!("b{i}"), rect(), ElementStates::default()));
        }
        assert!(!c.keep("button", "one more", rect(), ElementStates::default()));
        let snap = c.finish(None);
        assert_eq!(snap.elements.len(), MAX_ELEMENTS);
        assert!(snap.truncated);
    }

    #[test]
    fn the_node_cap_visits_n_and_stops_at_n_plus_one() {
        let mut c = Collector::new(budget(10, 3, 64), Instant::now());
        for _ in 0..3 {
            assert_eq!(c.visit(0, false, true), Visit::Enter);
        }
        assert!(!c.snapshot.truncated);
        assert_eq!(c.visit(0, false, true), Visit::Stop);
        assert!(c.finish(None).truncated);
    }

    #[test]
    fn the_depth_cap_enters_its_level_and_not_the_next() {
        let mut c = Collector::new(budget(10, 100, 2), Instant::now());
        assert_eq!(c.visit(2, false, true), Visit::Enter);
        assert!(!c.snapshot.truncated);
        assert!(!c.descends(2));
        assert_eq!(c.visit(3, false, true), Visit::SkipSubtree);
        assert!(c.finish(None).truncated);
    }

    #[test]
    fn passwords_and_hidden_subtrees_are_skipped_without_truncation() {
        let mut c = Collector::new(budget(10, 100, 64), Instant::now());
        assert_eq!(c.visit(1, true, true), Visit::SkipSubtree);
        assert_eq!(c.visit(1, false, false), Visit::SkipSubtree);
        assert!(!c.finish(None).truncated);
    }

    #[test]
    fn a_spent_deadline_stops_the_walk() {
        let budget = Budget {
            deadline: Duration::ZERO,
            ..Budget::default()
        };
        let mut c = Collector::new(budget, Instant::now());
        assert_eq!(c.visit(0, false, true), Visit::Stop);
        assert!(c.finish(None).truncated);
    }

    #[test]
    fn unnamed_or_empty_elements_are_not_kept() {
        let mut c = Collector::new(Budget::default(), Instant::now());
        assert!(c.keep("button", "  \n ", rect(), ElementStates::default()));
        assert!(c.keep("button", "no area", None, ElementStates::default()));
        assert!(ScreenRect::from_extents(0, 0, 0, 5).is_none());
        assert!(ScreenRect::from_extents(0, 0, 5, -1).is_none());
        assert!(c.finish(None).elements.is_empty());
    }

    #[test]
    fn labels_are_cleaned_and_capped_at_256_characters() {
        assert_eq!(clean_label(" a\tb\n"), "a b");
        let exact = "é".repeat(MAX_LABEL_CHARS);
        assert_eq!(clean_label(&exact), exact);
        let long = "é".repeat(MAX_LABEL_CHARS + 1);
        assert_eq!(clean_label(&long).chars().count(), MAX_LABEL_CHARS);
    }

    #[test]
    fn a_toolkit_scaled_by_two_is_found_through_its_decorations() {
        let at = |x, y, w, h| ScreenRect::from_extents(x, y, w, h).unwrap();
        // What openbox and GTK 3 gave: the window's client area, and the frame GTK reports.
        // Undecorated at GDK_SCALE=2, decorated (1, 1, 20, 5) at 2, and decorated at 1.
        assert_eq!(
            toolkit_scale(at(200, 200, 600, 400), at(100, 100, 300, 200)),
            Some(2.0)
        );
        assert_eq!(
            toolkit_scale(at(201, 220, 600, 400), at(100, 100, 301, 213)),
            Some(2.0)
        );
        assert_eq!(
            toolkit_scale(at(101, 120, 300, 200), at(100, 100, 302, 225)),
            None
        );
        assert_eq!(toolkit_scale(at(0, 0, 640, 480), at(0, 0, 640, 480)), None);
        // A fractional scale is kept as it is; a frame smaller on one side only is not a scale.
        assert_eq!(
            toolkit_scale(at(0, 0, 960, 720), at(0, 0, 640, 480)),
            Some(1.5)
        );
        assert_eq!(toolkit_scale(at(0, 0, 960, 400), at(0, 0, 640, 480)), None);
        assert_eq!(toolkit_scale(at(0, 0, 1000, 1000), at(0, 0, 10, 10)), None);
    }

    #[test]
    fn a_scaled_box_scales_its_edges() {
        let r = ScreenRect::from_extents(100, 110, 300, 34).unwrap();
        assert_eq!(
            r.scaled(2.0),
            ScreenRect::from_extents(200, 220, 600, 68).unwrap()
        );
        assert_eq!(r.scaled(1.0), r);
        let odd = ScreenRect::from_extents(3, 5, 3, 1).unwrap();
        assert_eq!(
            odd.scaled(1.5),
            ScreenRect::from_extents(5, 8, 4, 1).unwrap()
        );
    }

    #[test]
    fn window_relative_boxes_are_moved_to_the_window_and_scaled_with_it() {
        let rect = |x, y, w, h| ScreenRect::from_extents(x, y, w, h).unwrap();
        let target = |bounds, window_relative| WindowTarget {
            title: "t".to_owned(),
            pid: None,
            bounds: Some(bounds),
            window_relative,
        };
        let button = rect(0, 0, 640, 34);
        // Wayland at scale 1: GTK's frame at (0, 0), the window's content at (170, 100).
        let one = Placement::of(
            &target(rect(170, 100, 640, 400), true),
            Some(rect(0, 0, 640, 400)),
        );
        assert_eq!(one.place(button), rect(170, 100, 640, 34));
        // Scale 2: logical boxes, the window's content in physical pixels.
        let two = Placement::of(
            &target(rect(340, 200, 1280, 800), true),
            Some(rect(0, 0, 640, 400)),
        );
        assert_eq!(two.place(rect(0, 34, 640, 34)), rect(340, 268, 1280, 68));
        assert_eq!(two.place(button).centre(), (980, 234));
        // X11: screen coordinates, left where they are (and scaled with the root's origin).
        let x11 = Placement::of(
            &target(rect(100, 100, 640, 480), false),
            Some(rect(100, 100, 640, 480)),
        );
        assert_eq!(x11.place(rect(100, 100, 640, 34)), rect(100, 100, 640, 34));
        // No frame reported: moved to the window on Wayland all the same.
        let bare = Placement::of(&target(rect(5, 6, 10, 10), true), None);
        assert_eq!(bare.place(rect(1, 2, 3, 4)), rect(6, 8, 3, 4));
    }

    #[test]
    fn the_centre_of_a_box() {
        let r = ScreenRect::from_extents(10, 20, 30, 41).unwrap();
        assert_eq!(r.centre(), (25, 40));
    }
}
