//! What this session's desktop can do, asked at every HELLO: the kind of session (X11,
//! Wayland, Windows, macOS, none), the coarse and fine computer-use features it offers, the
//! primary screen's resolution, and the OS permissions.

pub use super::session::Session;
use super::{screen, windows};

/// Coarse buckets in the order HELLO lists them.
pub const COARSE: &[&str] = &[
    "screenshot",
    "input",
    "windows",
    "apps",
    "clipboard",
    "permissions",
];

/// What HELLO advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The kind of session.
    pub session: Session,
    /// The coarse feature buckets offered (`screenshot`, `input`, ...).
    pub coarse: Vec<&'static str>,
    /// The fine feature names offered (`screenshot.region`, `input.drag.path`, ...).
    pub fine: Vec<&'static str>,
    /// The primary display's size, `None` when no display is reachable.
    pub screen_resolution: Option<(u64, u64)>,
}

impl Probe {
    /// Whether the fine feature `name` was advertised.
    #[must_use]
    pub fn offers(&self, name: &str) -> bool {
        self.fine.contains(&name)
    }
}

/// Asks the desktop what works now. `clipboard` is the operator's clipboard opt-in.
#[must_use]
pub fn probe(clipboard: bool) -> Probe {
    let session = Session::detect();
    #[cfg(target_os = "linux")]
    if session == Session::Wayland {
        return wayland_probe(clipboard);
    }
    let primary = match session {
        Session::None => None,
        _ => screen::displays().ok().and_then(|d| d.into_iter().next()),
    };
    let Some(primary) = primary else {
        return Probe {
            session: Session::None,
            coarse: Vec::new(),
            fine: Vec::new(),
            screen_resolution: None,
        };
    };
    let listing = matches!(session, Session::X11 | Session::Windows | Session::MacOs)
        && windows::all().is_ok();
    let accessibility = match session {
        Session::X11 => session_bus(),
        Session::Windows => true,
        Session::Wayland | Session::MacOs | Session::None => false,
    };
    let input = matches!(session, Session::X11 | Session::Windows | Session::MacOs);
    let mut coarse = vec!["screenshot"];
    let mut fine = vec!["screenshot.region", "screenshot.all_monitors"];
    if listing {
        fine.push("screenshot.window");
    }
    if input {
        coarse.push("input");
        fine.extend(INPUT_FEATURES);
    }
    // Waiting needs no input device, so it is offered wherever there is a display.
    fine.push("input.wait");
    if input {
        fine.push("cursor.position");
    }
    fine.push("display.info");
    if listing {
        coarse.push("windows");
        fine.push("window.list");
        if !cfg!(target_os = "macos") {
            fine.push("window.focus");
        }
    }
    if session != Session::Wayland {
        coarse.push("apps");
    }
    if cfg!(target_os = "linux") {
        fine.push("app.list");
    }
    fine.push("app.launch");
    if clipboard && session != Session::Wayland {
        coarse.push("clipboard");
        fine.extend(["clipboard.read", "clipboard.write"]);
    }
    if session != Session::Wayland {
        coarse.push("permissions");
    }
    fine.push("permissions.check");
    if accessibility && listing {
        fine.push("a11y.snapshot");
    }
    Probe {
        session,
        coarse,
        fine,
        screen_resolution: Some((primary.rect.width, primary.rect.height)),
    }
}

/// Whether this process has a session bus, where AT-SPI's accessibility bus is asked for.
#[must_use]
pub fn session_bus() -> bool {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty())
}

/// The fine input features that come with the coarse `input`, on every backend that has it.
const INPUT_FEATURES: [&str; 6] = [
    "input.click.modifiers",
    "input.click.button",
    "input.drag.path",
    "input.key.hold",
    "input.mouse.down_up",
    "input.scroll.amount",
];

/// What a Wayland compositor offers, from the protocols in its registry now.
#[cfg(target_os = "linux")]
fn wayland_probe(clipboard: bool) -> Probe {
    let protocols = super::portal::protocols_with_offer().unwrap_or_default();
    let Some(primary) = protocols.displays.first() else {
        return Probe {
            session: Session::None,
            coarse: Vec::new(),
            fine: Vec::new(),
            screen_resolution: None,
        };
    };
    // The wlr protocols, or the desktop portal's RemoteDesktop where they are missing (GNOME,
    // KDE): the same actions either way, the portal's after one consent per run.
    let input = protocols.input() || protocols.portal_input();
    let mut coarse = Vec::new();
    let mut fine = Vec::new();
    // A window's place comes from sway's IPC or KWin's list: no protocol says where one is.
    let geometry = protocols.windows() && protocols.window_geometry().is_ok();
    // Screencopy, or where it is missing the desktop portal's Screenshot (GNOME Shell) or
    // KWin's ScreenShot2 (KDE).
    if protocols.screenshots() || protocols.portal_screenshots() || protocols.kwin_screenshots() {
        coarse.push("screenshot");
        fine.extend(["screenshot.region", "screenshot.all_monitors"]);
        if geometry {
            fine.push("screenshot.window");
        }
    }
    if input {
        coarse.push("input");
        fine.extend(INPUT_FEATURES);
    }
    fine.push("input.wait");
    if input {
        fine.push("cursor.position");
    }
    fine.push("display.info");
    if protocols.windows() {
        coarse.push("windows");
        fine.extend(["window.list", "window.focus"]);
    } else if protocols.accessible_windows {
        // Listed by the applications themselves: no compositor lets another program focus one.
        coarse.push("windows");
        fine.push("window.list");
    }
    coarse.push("apps");
    fine.extend(["app.list", "app.launch"]);
    if clipboard && protocols.clipboard() {
        coarse.push("clipboard");
        fine.extend(["clipboard.read", "clipboard.write"]);
    }
    coarse.push("permissions");
    fine.push("permissions.check");
    // AT-SPI boxes are window-relative on Wayland: they need the window's place, as on X11 they
    // need the window list.
    if geometry && session_bus() {
        fine.push("a11y.snapshot");
    }
    Probe {
        session: Session::Wayland,
        coarse,
        fine,
        screen_resolution: Some((primary.rect.width, primary.rect.height)),
    }
}

/// The state of one OS permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// The OS has granted it.
    Granted,
    /// The OS has refused it.
    Denied,
    /// It cannot be told from here.
    Unknown,
    /// This OS or session has no such permission.
    NotApplicable,
}

/// The permissions computer use depends on, checked when a request names none.
pub const PERMISSIONS: &[&str] = &["screen_recording", "accessibility", "input_monitoring"];

/// The state of `name` in `session`: X11 grants everything to every client, a Wayland
/// compositor grants capture and input to every client exactly when it offers their
/// protocols (and nothing outside the portal otherwise), Windows has no such permissions, and
/// macOS cannot be asked without its Objective-C APIs.
#[must_use]
pub fn permission(session: Session, name: &str) -> Permission {
    if !PERMISSIONS.contains(&name) {
        return Permission::NotApplicable;
    }
    match session {
        Session::X11 => Permission::Granted,
        Session::Wayland => wayland_permission(name),
        Session::MacOs => Permission::Unknown,
        Session::Windows | Session::None => Permission::NotApplicable,
    }
}

#[cfg(target_os = "linux")]
fn wayland_permission(name: &str) -> Permission {
    let Ok(protocols) = super::wayland::protocols() else {
        return Permission::Denied;
    };
    let granted = match name {
        "screen_recording" if !protocols.screenshots() => {
            // KWin says whether it takes this program's screenshots, else the portal's
            // permission store says, or nobody was asked yet.
            if let Some(allowed) = super::portal::kwin_screenshot::allowed() {
                return if allowed {
                    Permission::Granted
                } else {
                    Permission::Denied
                };
            }
            return match super::portal::screenshot::offered() {
                Some(offer) if offer.service => match offer.allowed {
                    Some(true) => Permission::Granted,
                    None => Permission::Unknown,
                    Some(false) => Permission::Denied,
                },
                _ => Permission::Denied,
            };
        }
        "screen_recording" => true,
        "input_monitoring" if !protocols.input() => {
            // The portal asks the person at the first input action; until then nobody knows.
            return match super::portal::consented() {
                Some(true) => Permission::Granted,
                _ if super::portal::offered().is_some_and(|p| p.pointer && p.keyboard) => {
                    Permission::Unknown
                }
                _ => Permission::Denied,
            };
        }
        "input_monitoring" => true,
        _ => return Permission::Unknown,
    };
    if granted {
        Permission::Granted
    } else {
        Permission::Denied
    }
}

#[cfg(not(target_os = "linux"))]
fn wayland_permission(_name: &str) -> Permission {
    Permission::Denied
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_follow_the_session() {
        assert_eq!(
            permission(Session::X11, "accessibility"),
            Permission::Granted
        );
        assert_eq!(
            permission(Session::Wayland, "screen_recording"),
            Permission::Denied
        );
        assert_eq!(
            permission(Session::None, "input_monitoring"),
            Permission::NotApplicable
        );
        assert_eq!(
            permission(Session::X11, "full_disk_access"),
            Permission::NotApplicable
        );
        assert_eq!(
            permission(Session::MacOs, "accessibility"),
            Permission::Unknown
        );
    }
}
