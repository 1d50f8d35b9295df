//! What a person is told when something fails: one sentence saying what is wrong and what to
//! do, with the technical detail (the library's own error text) kept apart, printed only with
//! `--verbose`.
//!
//! Library errors (zbus, xcap, x11rb, reqwest, winit) print their innards, often as `Debug`
//! dumps; they never reach a person as the message, only as the detail.

use std::fmt;

use local_core::{a11y::A11yError, guide::observe::ObserveError};

use crate::api::ApiError;

/// A failure as a person reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// One sentence: what is wrong, then what to do.
    message: String,
    /// The technical cause, for `--verbose`.
    detail: Option<String>,
    /// What the client can do about it when the person asks (a button beside the sentence).
    remedy: Option<Remedy>,
}

/// Something the client can do about a problem, once the person asks it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// Write the desktop entry that lets KDE Plasma give the client a window's pixels
    /// ([`crate::pixels::allow`]), then capture again.
    AllowPixels,
}

impl Remedy {
    /// The button's label.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::AllowPixels => "Allow pixels",
        }
    }
}

impl Problem {
    /// A problem with `message` and, when there is one, its technical `detail`.
    #[must_use]
    pub fn new(message: impl Into<String>, detail: Option<String>) -> Self {
        Self {
            message: message.into(),
            detail,
            remedy: None,
        }
    }

    /// What the client can do about this problem, when the person asks.
    #[must_use]
    pub const fn remedy(&self) -> Option<Remedy> {
        self.remedy
    }

    /// The sentence shown to the person.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The technical cause, when there is one.
    #[must_use]
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// What goes to stderr: the sentence, and with `verbose` the detail on a line of its own.
    #[must_use]
    pub fn report(&self, verbose: bool) -> String {
        match (&self.detail, verbose) {
            (Some(detail), true) => format!(
                "msguide-desktop: {}\nmsguide-desktop: detail: {detail}",
                self.message
            ),
            _ => format!("msguide-desktop: {}", self.message),
        }
    }

    /// Why a window could not be listed or observed; `display` is the display this process
    /// was given ([`display`]), which decides the advice when the window list fails.
    #[must_use]
    pub fn observe(err: &ObserveError, display: Display) -> Self {
        let detail = Some(err.to_string());
        let message = match err {
            ObserveError::WindowList(_) if display == Display::None => {
                "No display: DISPLAY is not set, so no window can be listed; run msguide-desktop inside your desktop session"
            }
            ObserveError::WindowList(_) => {
                "The windows on this display cannot be listed: run msguide-desktop inside an X11 desktop session with a window manager running"
            }
            ObserveError::WindowListFailed(_) => {
                "The desktop did not answer when asked for its windows: try again in a moment"
            }
            ObserveError::NoSuchWindow => {
                return Self::new(
                    "No open window has exactly that title: check the title, or open the window first",
                    None,
                );
            }
            ObserveError::Minimised => {
                return Self::new(
                    "The window is minimised: restore it, then capture again",
                    None,
                );
            }
            ObserveError::Untitled => {
                return Self::new(
                    "The window has no title to report as its application: pick a window with a title",
                    None,
                );
            }
            ObserveError::BadSize => {
                return Self::new(
                    "The window is smaller than 1 pixel or larger than 16384 pixels: resize it, then capture again",
                    None,
                );
            }
            ObserveError::Accessibility(A11yError::Unavailable(_)) => {
                return Self::accessibility(session_bus_found(), detail);
            }
            ObserveError::Accessibility(A11yError::WindowNotFound) => {
                "The window did not show up in the accessibility tree in time: check that the application supports accessibility (AT-SPI), then capture again"
            }
            ObserveError::Accessibility(A11yError::Unsupported) => {
                "Reading a window's controls is not supported on this system: use msguide-desktop on Linux (AT-SPI) or Windows (UI Automation)"
            }
            ObserveError::Pixels(_) => {
                "The window's pixels could not be captured: capture again without sharing pixels, or check that the window is still open"
            }
            ObserveError::PixelsNeedDesktopEntry => {
                return Self {
                    remedy: Some(Remedy::AllowPixels),
                    ..Self::new(
                        "KDE Plasma lets msguide-desktop capture a window's pixels only once you allow it: press Allow pixels (or run `msguide-desktop allow-pixels`), or capture again without sharing pixels",
                        detail,
                    )
                };
            }
            ObserveError::PixelsNotAllowed(_) => {
                "This desktop does not let msguide-desktop capture a window's pixels: capture again without sharing pixels"
            }
            ObserveError::Image(_) => {
                "The window's image is too large to share even when shrunk: capture again without sharing pixels"
            }
        };
        Self::new(message, detail)
    }

    /// The accessibility service cannot be reached; on Linux `session_bus` says whether a
    /// session bus is there (then the AT-SPI bus is what is missing).
    #[must_use]
    pub fn accessibility(session_bus: bool, detail: Option<String>) -> Self {
        let message = if !cfg!(target_os = "linux") {
            "The accessibility service cannot be reached, so the window's controls cannot be read: run msguide-desktop inside your desktop session"
        } else if session_bus {
            "The accessibility bus (AT-SPI) cannot be reached, so the window's controls cannot be read: install it with `sudo apt install at-spi2-core`, then start MSGuide again with `msguide start`"
        } else {
            "No session bus is running, so the window's controls cannot be read: start MSGuide with `msguide start`, which starts one (install it first with `sudo apt install dbus at-spi2-core` if it says dbus-daemon is missing)"
        };
        Self::new(message, detail)
    }

    /// Why the local API gave no answer.
    #[must_use]
    pub fn api(err: &ApiError) -> Self {
        Self::new(err.to_string(), err.detail().map(str::to_owned))
    }

    /// The async runtime or the worker thread could not start.
    #[must_use]
    pub fn runtime(err: &std::io::Error) -> Self {
        Self::new(
            "msguide-desktop could not start its background worker, probably for lack of memory or threads: close some programs and try again",
            Some(err.to_string()),
        )
    }

    /// The guidance window could not be opened.
    #[must_use]
    pub fn window(err: &eframe::Error, display_set: bool) -> Self {
        let message = if display_set {
            "The guidance window could not be opened on this display: run msguide-desktop inside your desktop session, or use the `observe` and `guide` commands"
        } else {
            "No display: DISPLAY is not set, so the guidance window cannot open; run msguide-desktop inside your desktop session, or use the `observe` and `guide` commands"
        };
        Self::new(message, Some(err.to_string()))
    }
}

/// Why `msguide-demo`'s window could not open, in the words of [`Problem::window`].
#[must_use]
pub fn demo_window(err: &eframe::Error, display_set: bool) -> Problem {
    let message = if display_set {
        "The demo window could not be opened on this display: run msguide-demo inside your desktop session"
    } else {
        "No display: DISPLAY is not set, so the demo window cannot open; run msguide-demo inside your desktop session"
    };
    Problem::new(message, Some(err.to_string()))
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<ObserveError> for Problem {
    fn from(err: ObserveError) -> Self {
        Self::observe(&err, display())
    }
}

impl From<ApiError> for Problem {
    fn from(err: ApiError) -> Self {
        Self::api(&err)
    }
}

/// Whether a session bus is there to reach: `DBUS_SESSION_BUS_ADDRESS` names one whose socket
/// exists, or the usual socket `$XDG_RUNTIME_DIR/bus` exists.
#[must_use]
pub fn session_bus_found() -> bool {
    let named = std::env::var("DBUS_SESSION_BUS_ADDRESS").is_ok_and(|a| bus_may_be_there(&a));
    named
        || std::env::var_os("XDG_RUNTIME_DIR")
            .is_some_and(|dir| std::path::Path::new(&dir).join("bus").exists())
}

/// Whether the bus `address` names may be there: not empty, and when every place it lists is
/// a socket file (`unix:path=…`), one of those files exists. Other transports (abstract
/// sockets, TCP) cannot be judged without connecting, so they count as there.
fn bus_may_be_there(address: &str) -> bool {
    let mut paths = Vec::new();
    for place in address.split(';').filter(|p| !p.trim().is_empty()) {
        let Some(path) = place
            .strip_prefix("unix:")
            .and_then(|keys| keys.split(',').find_map(|kv| kv.strip_prefix("path=")))
        else {
            return true;
        };
        paths.push(path);
    }
    paths.iter().any(|path| std::path::Path::new(path).exists())
}

/// The display this process was given, as far as the advice for a failed window list goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// Neither `DISPLAY` nor `WAYLAND_DISPLAY` names one (and on Windows and macOS, never set).
    None,
    /// A Wayland compositor (`WAYLAND_DISPLAY` names a live socket).
    Wayland,
    /// An X display, or a `WAYLAND_DISPLAY` whose socket is gone.
    X11,
}

/// The display this process was given.
#[must_use]
pub fn display() -> Display {
    use local_core::desktop::session::Session;
    if Session::detect() == Session::Wayland {
        Display::Wayland
    } else if display_set() {
        Display::X11
    } else {
        Display::None
    }
}

/// Whether this process was given a display (X11 or Wayland).
#[must_use]
pub fn display_set() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
}

#[cfg(test)]
mod tests;
