//! The AT-SPI backend: the window's frame is found among the registered applications'
//! top-level children by title, then walked over D-Bus.
//!
//! Toolkits built on AccessKit (egui) only register once the session's accessibility flag is
//! on, a second or so after it is set, and a fresh session's registry may not answer at
//! once; so the flag is switched on first and the frame is looked for until the deadline.

use std::time::{Duration, Instant};

use atspi::{
    AccessibilityConnection, CoordType, Role, State, StateSet,
    proxy::{
        accessible::{AccessibleProxy, ObjectRefExt},
        proxy_ext::ProxyExt,
    },
};

use super::{
    A11yError, AccessibleWindow, Budget, Collector, Element, ElementStates, Placement, ScreenRect,
    Snapshot, Visit, WindowTarget, clean_label,
};

/// How often the registry is asked again while a toolkit has not registered its window yet.
const REGISTRATION_POLL: Duration = Duration::from_millis(100);

pub(super) async fn snapshot(target: &WindowTarget, budget: Budget) -> Result<Snapshot, A11yError> {
    let started = Instant::now();
    let mut collector = Collector::new(budget, started);
    let (connection, frame) = frame(target, collector.deadline()).await?;
    let bus = connection.connection();
    let reported = reported(bus, &frame).await;
    let placement = Placement::of(target, reported);

    // Depth-first, document order: children are pushed in reverse.
    let mut stack = vec![(frame, 0_usize, Vec::new())];
    while let Some((node, depth, path)) = stack.pop() {
        let Ok(proxy) = node.as_accessible_proxy(bus).await else {
            collector.lost_part();
            continue;
        };
        let (Ok(role), Ok(states)) = (proxy.get_role().await, proxy.get_state().await) else {
            collector.lost_part();
            continue;
        };
        let password = role == Role::PasswordText;
        match collector.visit(depth, password, showing(states)) {
            Visit::Stop => break,
            Visit::SkipSubtree => continue,
            Visit::Enter => {}
        }
        // The window itself is the observation, not one of its elements.
        if depth > 0 {
            let label = proxy.name().await.unwrap_or_default();
            if !label.trim().is_empty() {
                let bounds = extents(&proxy).await.map(|b| placement.place(b));
                let states = element_states(states);
                if !collector.keep_at(uia_role(role), &label, bounds, states, path.clone()) {
                    break;
                }
            }
        }
        if collector.descends(depth) {
            match proxy.get_children().await {
                Ok(children) => stack.extend(children.into_iter().enumerate().rev().map(
                    |(index, child)| {
                        let mut below = path.clone();
                        below.push(u32::try_from(index).unwrap_or(u32::MAX));
                        (child, depth + 1, below)
                    },
                )),
                Err(_) => collector.lost_part(),
            }
        }
        if collector.out_of_time() {
            break;
        }
    }
    Ok(collector.finish(reported))
}

/// The accessibility bus and `target`'s frame, looked for until `deadline`: the session's
/// accessibility flag is switched on first, a fresh session starts the registry on demand and
/// it may not answer for a moment, and a toolkit registers its window a second or so after
/// the flag is set.
async fn frame(
    target: &WindowTarget,
    deadline: Instant,
) -> Result<(AccessibilityConnection, atspi::ObjectRefOwned), A11yError> {
    let connection = connect().await?;
    loop {
        let failure = match find_frame(&connection, target).await {
            Ok(Some(frame)) => return Ok((connection, frame)),
            Ok(None) => A11yError::WindowNotFound,
            Err(e) => e,
        };
        if Instant::now() + REGISTRATION_POLL >= deadline {
            return Err(failure);
        }
        tokio::time::sleep(REGISTRATION_POLL).await;
    }
}

/// The node at `path` below `target`'s frame as it is now, read as [`snapshot`] reads it;
/// `None` when the path leads nowhere or to a node a snapshot would not keep (gone, hidden,
/// a password field, unnamed, without an area).
pub(super) async fn element_at(
    target: &WindowTarget,
    path: &[u32],
    deadline: Duration,
) -> Result<Option<Element>, A11yError> {
    let (connection, mut node) = frame(target, Instant::now() + deadline).await?;
    let bus = connection.connection();
    let placement = placement(bus, &node, target).await;
    let lost = |e: &dyn std::fmt::Display| A11yError::Unavailable(e.to_string());
    for (depth, index) in path.iter().enumerate() {
        let proxy = node.as_accessible_proxy(bus).await.map_err(|e| lost(&e))?;
        // Every node on the way must be showing, as the walk that found it skipped hidden ones.
        if depth > 0 && !showing(proxy.get_state().await.map_err(|e| lost(&e))?) {
            return Ok(None);
        }
        let children = proxy.get_children().await.map_err(|e| lost(&e))?;
        let Some(child) = usize::try_from(*index)
            .ok()
            .and_then(|i| children.into_iter().nth(i))
        else {
            return Ok(None);
        };
        node = child;
    }
    let Ok(proxy) = node.as_accessible_proxy(bus).await else {
        return Ok(None);
    };
    let (Ok(role), Ok(states)) = (proxy.get_role().await, proxy.get_state().await) else {
        return Ok(None);
    };
    if role == Role::PasswordText || !showing(states) {
        return Ok(None);
    }
    let label = clean_label(&proxy.name().await.unwrap_or_default());
    let Some(bounds) = extents(&proxy)
        .await
        .filter(|_| !label.is_empty())
        .map(|b| placement.place(b))
    else {
        return Ok(None);
    };
    Ok(Some(Element {
        role: uia_role(role).to_owned(),
        label,
        bounds,
        states: element_states(states),
        path: path.to_vec(),
    }))
}

/// Whether a node is on screen for the user: showing and visible.
fn showing(states: StateSet) -> bool {
    states.contains(State::Showing) && states.contains(State::Visible)
}

/// The top-level accessible of `target`. AccessKit leaves a frame's name empty, so a frame
/// qualifies by its title or by its application's process; among several, the one titled
/// like the window, then the one at its position, then the first.
async fn find_frame(
    connection: &AccessibilityConnection,
    target: &WindowTarget,
) -> Result<Option<atspi::ObjectRefOwned>, A11yError> {
    let bus = connection.connection();
    let mut candidates = Vec::new();
    for application in applications(connection).await? {
        // An application that vanished or hangs is not the one we look for.
        let Ok(app) = application.as_accessible_proxy(bus).await else {
            continue;
        };
        let same_process = match (target.pid, application.name_as_str()) {
            (Some(pid), Some(name)) => process_of(bus, name).await == Some(pid),
            _ => false,
        };
        let Ok(windows) = app.get_children().await else {
            continue;
        };
        for window in windows {
            let Ok(proxy) = window.as_accessible_proxy(bus).await else {
                continue;
            };
            let titled = proxy.name().await.is_ok_and(|name| name == target.title);
            if titled || same_process {
                let at_bounds = target.bounds.is_some() && extents(&proxy).await == target.bounds;
                candidates.push((titled, at_bounds, window));
            }
        }
    }
    // Best first: titled, then at the window's position; stable, so ties keep tree order.
    candidates.sort_by_key(|(titled, at_bounds, _)| (!titled, !at_bounds));
    Ok(candidates.into_iter().next().map(|(_, _, window)| window))
}

/// Every showing top-level window the applications on the accessibility bus list, in
/// their order: for a Wayland compositor that lists its windows to no other program (weston,
/// GNOME), this is the only list there is. Its boxes are the toolkits' own, so on Wayland a
/// window's position is its surface's corner, not where it is on screen.
pub(super) async fn windows() -> Result<Vec<AccessibleWindow>, A11yError> {
    let connection = connect().await?;
    let bus = connection.connection();
    let mut found = Vec::new();
    for application in applications(&connection).await? {
        // An application that vanished or hangs lists no windows.
        let Ok(app) = application.as_accessible_proxy(bus).await else {
            continue;
        };
        let Ok(children) = app.get_children().await else {
            continue;
        };
        let app_name = app.name().await.unwrap_or_default();
        let pid = match application.name_as_str() {
            Some(name) => process_of(bus, name).await,
            None => None,
        };
        for window in children {
            let Ok(proxy) = window.as_accessible_proxy(bus).await else {
                continue;
            };
            let (Ok(role), Ok(states)) = (proxy.get_role().await, proxy.get_state().await) else {
                continue;
            };
            if !matches!(role, Role::Frame | Role::Window | Role::Dialog) || !showing(states) {
                continue;
            }
            let Some(bounds) = extents(&proxy).await else {
                continue;
            };
            let title = proxy.name().await.unwrap_or_default();
            found.push(AccessibleWindow {
                key: format!(
                    "{}{}",
                    window.name_as_str().unwrap_or_default(),
                    window.path_as_str()
                ),
                pid,
                app_name: app_name.clone(),
                title,
                bounds,
                active: states.contains(State::Active),
            });
        }
    }
    Ok(found)
}

/// The accessibility bus, with the session's accessibility flag switched on first (see the
/// module's comment).
async fn connect() -> Result<AccessibilityConnection, A11yError> {
    let unavailable = |e: atspi::AtspiError| A11yError::Unavailable(e.to_string());
    atspi::connection::set_session_accessibility(true)
        .await
        .map_err(unavailable)?;
    AccessibilityConnection::new().await.map_err(unavailable)
}

/// The applications registered on the accessibility bus.
async fn applications(
    connection: &AccessibilityConnection,
) -> Result<Vec<atspi::ObjectRefOwned>, A11yError> {
    let desktop = connection
        .root_accessible_on_registry()
        .await
        .map_err(|e| A11yError::Unavailable(e.to_string()))?;
    desktop
        .get_children()
        .await
        .map_err(|e| A11yError::Unavailable(e.to_string()))
}

/// The process that owns `bus_name` on the accessibility bus.
async fn process_of(bus: &zbus::Connection, bus_name: &str) -> Option<u32> {
    let reply = bus
        .call_method(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            Some("org.freedesktop.DBus"),
            "GetConnectionUnixProcessID",
            &(bus_name,),
        )
        .await
        .ok()?;
    reply.body().deserialize::<u32>().ok()
}

/// Where `frame`'s boxes land on the screen ([`Placement`]): scaled when the toolkit reports
/// its own logical pixels (GTK 3 under `GDK_SCALE=2` on X11, any toolkit on a scaled Wayland
/// output), and moved to the window's content on Wayland, where GTK reports boxes from its
/// surface's corner (checked on sway: the frame is at (0, 0) with sway's content size).
async fn placement(
    bus: &zbus::Connection,
    frame: &atspi::ObjectRefOwned,
    target: &WindowTarget,
) -> Placement {
    Placement::of(target, reported(bus, frame).await)
}

/// `frame`'s box as its toolkit reports it.
async fn reported(bus: &zbus::Connection, frame: &atspi::ObjectRefOwned) -> Option<ScreenRect> {
    match frame.as_accessible_proxy(bus).await {
        Ok(proxy) => extents(&proxy).await,
        Err(_) => None,
    }
}

/// The node's box as the toolkit reports it, when it has the Component interface and an area.
async fn extents(proxy: &AccessibleProxy<'_>) -> Option<ScreenRect> {
    let component = proxy.proxies().await.ok()?.component().await.ok()?;
    let (x, y, width, height) = component.get_extents(CoordType::Screen).await.ok()?;
    ScreenRect::from_extents(x, y, width, height)
}

fn element_states(states: StateSet) -> ElementStates {
    ElementStates {
        enabled: states.contains(State::Enabled) || states.contains(State::Sensitive),
        focusable: states.contains(State::Focusable),
        focused: states.contains(State::Focused),
        checked: states.contains(State::Checked) || states.contains(State::Pressed),
        selected: states.contains(State::Selected),
        expanded: states.contains(State::Expanded),
        read_only: states.contains(State::ReadOnly),
    }
}

/// The UI Automation control type name closest to an AT-SPI role, lower case, so one
/// vocabulary reaches providers on every platform; roles with no counterpart keep their
/// AT-SPI name without spaces.
fn uia_role(role: Role) -> &'static str {
    match role {
        Role::Button | Role::ToggleButton | Role::PushButtonMenu => "button",
        Role::CheckBox => "checkbox",
        Role::RadioButton => "radiobutton",
        Role::ComboBox => "combobox",
        Role::Entry | Role::PasswordText | Role::SpinButton => "edit",
        Role::Label
        | Role::Static
        | Role::Text
        | Role::Paragraph
        | Role::Heading
        | Role::Caption => "text",
        Role::Link => "hyperlink",
        Role::Image | Role::Icon => "image",
        Role::List | Role::ListBox => "list",
        Role::ListItem => "listitem",
        Role::Menu | Role::PopupMenu => "menu",
        Role::MenuBar => "menubar",
        Role::MenuItem | Role::CheckMenuItem | Role::RadioMenuItem | Role::TearoffMenuItem => {
            "menuitem"
        }
        Role::PageTabList => "tab",
        Role::PageTab => "tabitem",
        Role::ProgressBar | Role::LevelBar => "progressbar",
        Role::ScrollBar => "scrollbar",
        Role::Slider => "slider",
        Role::StatusBar => "statusbar",
        Role::Table | Role::TreeTable => "table",
        Role::TableCell => "dataitem",
        Role::ToolBar => "toolbar",
        Role::ToolTip => "tooltip",
        Role::Tree => "tree",
        Role::TreeItem => "treeitem",
        Role::Frame | Role::Window | Role::Dialog => "window",
        Role::Panel | Role::Filler | Role::ScrollPane | Role::Viewport | Role::Section => "pane",
        Role::Grouping | Role::Form => "group",
        Role::Separator => "separator",
        Role::TitleBar => "titlebar",
        Role::DocumentFrame
        | Role::DocumentText
        | Role::DocumentWeb
        | Role::DocumentEmail
        | Role::DocumentSpreadsheet
        | Role::DocumentPresentation => "document",
        other => atspi_name(other),
    }
}

/// An AT-SPI role name without its spaces (`"color chooser"` → `"colorchooser"`).
fn atspi_name(role: Role) -> &'static str {
    // Role names are static; the few multi-word ones we pass through are spelled out here so
    // no allocation or leak is needed.
    match role.name() {
        "color chooser" => "colorchooser",
        "date editor" => "dateeditor",
        "file chooser" => "filechooser",
        "font chooser" => "fontchooser",
        "drawing area" => "drawingarea",
        name if !name.contains(' ') => name,
        _ => "custom",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_spi_roles_speak_ui_automation() {
        assert_eq!(uia_role(Role::Button), "button");
        assert_eq!(uia_role(Role::Label), "text");
        assert_eq!(uia_role(Role::Entry), "edit");
        assert_eq!(uia_role(Role::Alert), "alert");
        assert_eq!(uia_role(Role::ColorChooser), "colorchooser");
        assert_eq!(uia_role(Role::InternalFrame), "custom");
    }
}
