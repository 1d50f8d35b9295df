//! What this session's desktop can do, asked at every HELLO: the kind of session (X11,
//! Wayland, Windows, macOS, none), the coarse and fine computer-use features it offers, the
//! primary screen's resolution, and the OS permissions.

use super::{screen, windows};

/// The kind of desktop session this process can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Session {
    /// An X11 session (Xorg, Xvfb, or XWayland reachable through `DISPLAY`).
    X11,
    /// Wayland without an X server: capture through the compositor only, no synthetic input.
    Wayland,
    /// A Windows desktop.
    Windows,
    /// A macOS desktop.
    MacOs,
    /// No display reachable (a service without a session, WSL2 without WSLg, SSH).
    None,
}

impl Session {
    /// The session of this process, from its environment the way toolkits decide it.
    #[must_use]
    pub fn detect() -> Self {
        Self::detect_from(|name| std::env::var(name).ok())
    }

    /// [`Session::detect`] reading the environment through `var`.
    #[must_use]
    pub fn detect_from(var: impl Fn(&str) -> Option<String>) -> Self {
        if cfg!(windows) {
            return Self::Windows;
        }
        if cfg!(target_os = "macos") {
            return Self::MacOs;
        }
        let set = |name: &str| var(name).is_some_and(|v| !v.is_empty());
        let wayland = set("WAYLAND_DISPLAY")
            || var("XDG_SESSION_TYPE").is_some_and(|t| t.eq_ignore_ascii_case("wayland"));
        // XWayland sets DISPLAY too, but input through it reaches only X clients: a Wayland
        // session is treated as Wayland.
        if wayland {
            Self::Wayland
        } else if set("DISPLAY") {
            Self::X11
        } else {
            Self::None
        }
    }

    /// Why nothing works, for `FEATURE_NOT_SUPPORTED` on an unreachable display.
    #[must_use]
    pub const fn reason(self) -> &'static str {
        match self {
            Self::Wayland => "not available on Wayland",
            Self::None => "no display reachable",
            Self::X11 | Self::Windows | Self::MacOs => "not available in this session",
        }
    }
}

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
        Session::X11 => std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some(),
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
        fine.extend([
            "input.click.modifiers",
            "input.click.button",
            "input.drag.path",
            "input.key.hold",
            "input.mouse.down_up",
            "input.scroll.amount",
        ]);
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

/// The state of `name` in `session`: X11 grants everything to every client, Wayland grants
/// no client capture or input outside the portal, Windows has no such permissions, and macOS
/// cannot be asked without its Objective-C APIs.
#[must_use]
pub fn permission(session: Session, name: &str) -> Permission {
    if !PERMISSIONS.contains(&name) {
        return Permission::NotApplicable;
    }
    match session {
        Session::X11 => Permission::Granted,
        Session::Wayland => Permission::Denied,
        Session::MacOs => Permission::Unknown,
        Session::Windows | Session::None => Permission::NotApplicable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(all(unix, not(target_os = "macos")))]
    #[test]
    fn the_session_kind_comes_from_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            Session::detect_from(env(&[("DISPLAY", ":0")])),
            Session::X11
        );
        assert_eq!(
            Session::detect_from(env(&[("DISPLAY", ":0"), ("WAYLAND_DISPLAY", "wayland-0")])),
            Session::Wayland
        );
        assert_eq!(
            Session::detect_from(env(&[("DISPLAY", ":0"), ("XDG_SESSION_TYPE", "Wayland")])),
            Session::Wayland
        );
        assert_eq!(
            Session::detect_from(env(&[("DISPLAY", ""), ("XDG_SESSION_TYPE", "tty")])),
            Session::None
        );
        assert_eq!(Session::None.reason(), "no display reachable");
    }

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
