//! The kind of desktop session this process can reach (X11, Wayland, Windows, macOS, none),
//! decided from its environment; every backend asks it before choosing its path.

/// The kind of desktop session this process can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Session {
    /// An X11 session (Xorg, Xvfb, or XWayland reachable through `DISPLAY`).
    X11,
    /// A Wayland compositor reachable through `WAYLAND_DISPLAY`: what works depends on the
    /// protocols it offers (`desktop::wayland`).
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
        // A live compositor socket decides, whatever XDG_SESSION_TYPE says: a session type
        // left over from a login, or missing under a service manager, is no evidence.
        #[cfg(target_os = "linux")]
        let wayland = super::wayland::live_socket(&var);
        #[cfg(not(target_os = "linux"))]
        let wayland = set("WAYLAND_DISPLAY");
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
            Self::Wayland => {
                "this Wayland compositor offers no protocol for it (`autogpt-shim doctor` names what is missing)"
            }
            Self::None => "no display reachable",
            Self::X11 | Self::Windows | Self::MacOs => "not available in this session",
        }
    }
}

// Windows and macOS are their own sessions whatever the environment says.
#[cfg(all(test, unix, not(target_os = "macos")))]
mod tests {
    use super::*;

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
        // A Wayland display that names no live socket, or a session type alone, is not
        // Wayland (the live socket is `wayland::tests`').
        assert_eq!(
            Session::detect_from(env(&[
                ("DISPLAY", ":0"),
                ("WAYLAND_DISPLAY", "/nonexistent/wayland-0")
            ])),
            Session::X11
        );
        assert_eq!(
            Session::detect_from(env(&[("DISPLAY", ":0"), ("XDG_SESSION_TYPE", "Wayland")])),
            Session::X11
        );
        assert_eq!(
            Session::detect_from(env(&[("DISPLAY", ""), ("XDG_SESSION_TYPE", "tty")])),
            Session::None
        );
        assert_eq!(Session::None.reason(), "no display reachable");
    }
}
