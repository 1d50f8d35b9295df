//! What an input action is, apart from how any backend performs it: buttons, modifiers, key
//! chords, the actions themselves with their required parts, and their limits. The enigo
//! backend (`input`) and the Wayland one (`wayland::input`) both perform these.

use std::time::Duration;

use super::DesktopError;

pub use crate::guide::guidance::model::ScrollDirection;

/// Longest `hold_key`.
pub const MAX_HOLD: Duration = Duration::from_secs(5);
/// Longest `wait`.
pub const MAX_WAIT: Duration = Duration::from_millis(5000);
/// Most points a drag path is walked through; longer paths are evenly sub-sampled.
pub const MAX_DRAG_POINTS: usize = 100;
/// Scroll clicks when the request names no amount.
pub const DEFAULT_SCROLL_CLICKS: i32 = 3;
/// Pause between the points of a drag path (at most [`MAX_DRAG_POINTS`] of them).
pub(super) const DRAG_STEP: Duration = Duration::from_millis(8);
/// Gap between the clicks of a triple click (the reference's X11 timing).
pub(super) const TRIPLE_CLICK_GAP: Duration = Duration::from_millis(50);
/// How long a pasted text stays on the clipboard before the previous content comes back:
/// the target application reads the clipboard asynchronously after the paste chord.
pub(super) const PASTE_SETTLE: Duration = Duration::from_millis(150);

/// A mouse button.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Button {
    /// The primary button.
    Left,
    /// The wheel button.
    Middle,
    /// The secondary button.
    Right,
}

/// A modifier held during a click or scroll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Modifier {
    /// Shift.
    Shift,
    /// Control.
    Ctrl,
    /// Alt (Option on macOS).
    Alt,
    /// The Windows, Command or Super key.
    Super,
}

/// A key chord such as `ctrl+shift+t`: modifiers pressed in order, the last key tapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chord(pub(super) Vec<enigo::Key>);

impl Chord {
    /// Parses `+`-separated key names, case-insensitively (`ctrl+s`, `Return`, `alt+F4`,
    /// `super`, a single character such as `a` or `é`).
    ///
    /// # Errors
    /// [`DesktopError::NotSupported`] (`input.key`) for an empty chord or an unknown name.
    pub fn parse(text: &str) -> Result<Self, DesktopError> {
        let keys = text
            .split('+')
            .map(|name| key(name.trim()))
            .collect::<Option<Vec<_>>>()
            .filter(|keys| !keys.is_empty())
            .ok_or_else(|| {
                DesktopError::unsupported("input.key", "the key chord names an unknown key")
            })?;
        Ok(Self(keys))
    }

    /// The keys, modifiers first (the Wayland backend maps them to its own keymap; enigo takes
    /// them as they are).
    #[cfg(target_os = "linux")]
    pub(super) fn keys(&self) -> &[enigo::Key] {
        &self.0
    }
}

fn key(name: &str) -> Option<enigo::Key> {
    use enigo::Key as K;
    let lower = name.to_lowercase();
    let mut chars = lower.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return Some(K::Unicode(c));
    }
    Some(match lower.as_str() {
        "ctrl" | "control" => K::Control,
        "shift" => K::Shift,
        "alt" | "option" => K::Alt,
        "super" | "meta" | "cmd" | "command" | "win" | "windows" => K::Meta,
        "enter" | "return" => K::Return,
        "esc" | "escape" => K::Escape,
        "tab" => K::Tab,
        "space" => K::Space,
        "backspace" => K::Backspace,
        "delete" | "del" => K::Delete,
        "home" => K::Home,
        "end" => K::End,
        "pageup" | "pgup" => K::PageUp,
        "pagedown" | "pgdn" => K::PageDown,
        "up" => K::UpArrow,
        "down" => K::DownArrow,
        "left" => K::LeftArrow,
        "right" => K::RightArrow,
        "capslock" => K::CapsLock,
        #[cfg(not(target_os = "macos"))]
        "insert" => K::Insert,
        "f1" => K::F1,
        "f2" => K::F2,
        "f3" => K::F3,
        "f4" => K::F4,
        "f5" => K::F5,
        "f6" => K::F6,
        "f7" => K::F7,
        "f8" => K::F8,
        "f9" => K::F9,
        "f10" => K::F10,
        "f11" => K::F11,
        "f12" => K::F12,
        _ => return None,
    })
}

/// One input action, with its required parts already present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `count` clicks (1 to 3) of `button` at `at`, with `modifiers` held.
    Click {
        /// Where, display-global.
        at: [i64; 2],
        /// Which button.
        button: Button,
        /// How many clicks.
        count: u8,
        /// Modifiers held meanwhile.
        modifiers: Vec<Modifier>,
    },
    /// Move the pointer.
    Move {
        /// Where to, display-global.
        to: [i64; 2],
    },
    /// Press `button`, first moving to `at` when given.
    Down {
        /// Where to press, display-global; `None` where the pointer is.
        at: Option<[i64; 2]>,
        /// Which button.
        button: Button,
    },
    /// Release `button`, first moving to `at` when given.
    Up {
        /// Where to release, display-global; `None` where the pointer is.
        at: Option<[i64; 2]>,
        /// Which button.
        button: Button,
    },
    /// Press at the first point, move through the rest, release at the last.
    Drag {
        /// The points, display-global, at least two.
        path: Vec<[i64; 2]>,
        /// Which button.
        button: Button,
    },
    /// Type `text`; with `paste` (and a clipboard) paste it instead, restoring the previous
    /// clipboard text afterwards when `preserve_clipboard`.
    Type {
        /// What to type.
        text: String,
        /// Whether to paste it through the clipboard instead.
        paste: bool,
        /// Whether a paste restores the clipboard's previous text.
        preserve_clipboard: bool,
    },
    /// Tap a chord.
    Key {
        /// The keys.
        chord: Chord,
    },
    /// Hold a chord down for `duration` (at most [`MAX_HOLD`]).
    HoldKey {
        /// The keys.
        chord: Chord,
        /// How long.
        duration: Duration,
    },
    /// Scroll `clicks` notches, at `at` when given, with `modifiers` held.
    Scroll {
        /// Where, display-global; `None` where the pointer is.
        at: Option<[i64; 2]>,
        /// Which way.
        direction: ScrollDirection,
        /// How many notches.
        clicks: i32,
        /// Modifiers held meanwhile.
        modifiers: Vec<Modifier>,
    },
    /// Do nothing for `duration` (at most [`MAX_WAIT`]).
    Wait {
        /// How long.
        duration: Duration,
    },
}

impl Action {
    /// Every display-global point the action touches.
    #[must_use]
    pub fn points(&self) -> Vec<[i64; 2]> {
        match self {
            Self::Click { at, .. } | Self::Move { to: at } => vec![*at],
            Self::Down { at, .. } | Self::Up { at, .. } | Self::Scroll { at, .. } => {
                at.iter().copied().collect()
            }
            Self::Drag { path, .. } => path.clone(),
            Self::Type { .. } | Self::Key { .. } | Self::HoldKey { .. } | Self::Wait { .. } => {
                Vec::new()
            }
        }
    }
}

/// At most [`MAX_DRAG_POINTS`] points of `path`, evenly spread, always keeping both ends.
#[must_use]
pub fn subsample(path: &[[i64; 2]]) -> Vec<[i64; 2]> {
    if path.len() <= MAX_DRAG_POINTS {
        return path.to_vec();
    }
    let last = path.len() - 1;
    (0..MAX_DRAG_POINTS)
        .map(|i| path[i * last / (MAX_DRAG_POINTS - 1)])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chords_parse_case_insensitively_and_unknown_names_are_refused() {
        assert_eq!(
            Chord::parse("Ctrl+S").unwrap(),
            Chord(vec![enigo::Key::Control, enigo::Key::Unicode('s')])
        );
        assert_eq!(
            Chord::parse("alt+F4").unwrap(),
            Chord(vec![enigo::Key::Alt, enigo::Key::F4])
        );
        assert_eq!(
            Chord::parse("é").unwrap(),
            Chord(vec![enigo::Key::Unicode('é')])
        );
        assert_eq!(
            Chord::parse("return").unwrap(),
            Chord(vec![enigo::Key::Return])
        );
        for bad in ["", "ctrl+", "hyper+x", "ctrl++"] {
            let err = Chord::parse(bad).unwrap_err();
            assert_eq!(err.code(), "FEATURE_NOT_SUPPORTED", "{bad:?}");
        }
    }

    #[test]
    fn long_paths_are_subsampled_keeping_both_ends() {
        let path: Vec<[i64; 2]> = (0..1000).map(|i| [i, i * 2]).collect();
        let out = subsample(&path);
        assert_eq!(out.len(), MAX_DRAG_POINTS);
        assert_eq!(out[0], [0, 0]);
        assert_eq!(out[MAX_DRAG_POINTS - 1], [999, 1998]);
        assert!(out.windows(2).all(|w| w[0][0] < w[1][0]));
        let short: Vec<[i64; 2]> = (0..100).map(|i| [i, 0]).collect();
        assert_eq!(subsample(&short), short);
    }
}
