//! Synthetic input through enigo: clicks with modifiers, pointer moves, presses, drags along a
//! path, typing (or pasting) text, key chords, held keys, scrolling and waiting. Every point is
//! checked against the displays before anything is sent, so a refused action sends nothing.

use std::thread::sleep;
use std::time::Duration;

use enigo::{Axis, Coordinate, Direction, Enigo, Keyboard, Mouse, Settings};

use super::DesktopError;
pub use crate::guide::guidance::model::ScrollDirection;

use super::clipboard::Clipboard;
use super::screen::{self, Display};

/// Longest `hold_key`.
pub const MAX_HOLD: Duration = Duration::from_secs(5);
/// Longest `wait`.
pub const MAX_WAIT: Duration = Duration::from_millis(5000);
/// Most points a drag path is walked through; longer paths are evenly sub-sampled.
pub const MAX_DRAG_POINTS: usize = 100;
/// Scroll clicks when the request names no amount.
pub const DEFAULT_SCROLL_CLICKS: i32 = 3;
/// How long keycodes mapped for unusual characters stay mapped after the last key event.
const REMAP_SETTLE: Duration = Duration::from_millis(200);
/// Pause between the points of a drag path (at most [`MAX_DRAG_POINTS`] of them).
const DRAG_STEP: Duration = Duration::from_millis(8);
/// Gap between the clicks of a triple click (the reference's X11 timing).
const TRIPLE_CLICK_GAP: Duration = Duration::from_millis(50);
/// How long a pasted text stays on the clipboard before the previous content comes back:
/// the target application reads the clipboard asynchronously after the paste chord.
const PASTE_SETTLE: Duration = Duration::from_millis(150);

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
pub struct Chord(Vec<enigo::Key>);

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

/// Performs `action` on this desktop after checking every point against `displays`.
///
/// # Errors
/// [`DesktopError::OutOfBounds`] before anything is sent; [`DesktopError::Failed`] or
/// [`DesktopError::PermissionPending`] when the input system refuses.
pub fn perform(
    action: &Action,
    displays: &[Display],
    clipboard: Option<&Clipboard>,
) -> Result<(), DesktopError> {
    for point in action.points() {
        screen::check_point(displays, point)?;
    }
    if let Action::Wait { duration } = action {
        sleep((*duration).min(MAX_WAIT));
        return Ok(());
    }
    let mut enigo = connect()?;
    let outcome = run(&mut enigo, action, clipboard);
    if remaps_keys(action) {
        // On X11, characters missing from the keyboard map are typed through keycodes enigo
        // maps for the purpose and unmaps when the connection drops; a client still behind in
        // its event queue would read those key events through the restored map as nothing.
        sleep(REMAP_SETTLE);
    }
    drop(enigo);
    outcome.map_err(|e| DesktopError::Failed(e.to_string()))
}

/// Where the pointer is, in display-global pixels.
///
/// # Errors
/// [`DesktopError::Failed`] when the input system cannot be asked.
pub fn cursor() -> Result<[i64; 2], DesktopError> {
    let enigo = connect()?;
    let (x, y) = enigo
        .location()
        .map_err(|e| DesktopError::Failed(e.to_string()))?;
    Ok([i64::from(x), i64::from(y)])
}

fn connect() -> Result<Enigo, DesktopError> {
    Enigo::new(&Settings::default()).map_err(|e| match e {
        #[cfg(target_os = "macos")]
        enigo::NewConError::NoPermission => DesktopError::PermissionPending {
            permission: "accessibility".to_owned(),
        },
        other => DesktopError::Failed(other.to_string()),
    })
}

fn run(
    enigo: &mut Enigo,
    action: &Action,
    clipboard: Option<&Clipboard>,
) -> enigo::InputResult<()> {
    match action {
        Action::Click {
            at,
            button,
            count,
            modifiers,
        } => {
            move_to(enigo, *at)?;
            with_modifiers(enigo, modifiers, |enigo| {
                for n in 0..*count {
                    if n > 0 && *count > 2 {
                        sleep(TRIPLE_CLICK_GAP);
                    }
                    enigo.button(mouse(*button), Direction::Click)?;
                }
                Ok(())
            })
        }
        Action::Move { to } => move_to(enigo, *to),
        Action::Down { at, button } | Action::Up { at, button } => {
            if let Some(at) = at {
                move_to(enigo, *at)?;
            }
            let direction = if matches!(action, Action::Down { .. }) {
                Direction::Press
            } else {
                Direction::Release
            };
            enigo.button(mouse(*button), direction)
        }
        Action::Drag { path, button } => {
            let points = subsample(path);
            let Some((first, rest)) = points.split_first() else {
                return Ok(());
            };
            move_to(enigo, *first)?;
            enigo.button(mouse(*button), Direction::Press)?;
            let moved = rest.iter().try_for_each(|point| {
                // Applications sample the pointer per frame; a path walked at once would
                // reach them as a jump from the first point to the last.
                sleep(DRAG_STEP);
                move_to(enigo, *point)
            });
            // Released whatever happened, so no button is left stuck down.
            let released = enigo.button(mouse(*button), Direction::Release);
            moved.and(released)
        }
        Action::Type {
            text,
            paste,
            preserve_clipboard,
        } => match clipboard.filter(|_| *paste) {
            Some(clipboard) => paste_text(enigo, clipboard, text, *preserve_clipboard),
            None => enigo.text(text),
        },
        Action::Key { chord } => tap(enigo, chord),
        Action::HoldKey { chord, duration } => {
            for key in &chord.0 {
                enigo.key(*key, Direction::Press)?;
            }
            sleep((*duration).min(MAX_HOLD));
            release_all(enigo, &chord.0)
        }
        Action::Scroll {
            at,
            direction,
            clicks,
            modifiers,
        } => {
            if let Some(at) = at {
                move_to(enigo, *at)?;
            }
            let (length, axis) = match direction {
                ScrollDirection::Up => (-clicks, Axis::Vertical),
                ScrollDirection::Down => (*clicks, Axis::Vertical),
                ScrollDirection::Left => (-clicks, Axis::Horizontal),
                ScrollDirection::Right => (*clicks, Axis::Horizontal),
            };
            with_modifiers(enigo, modifiers, |enigo| enigo.scroll(length, axis))
        }
        Action::Wait { duration } => {
            sleep((*duration).min(MAX_WAIT));
            Ok(())
        }
    }
}

/// Whether `action` types characters a US keyboard map may lack (enigo maps them on the fly).
fn remaps_keys(action: &Action) -> bool {
    let unusual = |key: &enigo::Key| matches!(key, enigo::Key::Unicode(c) if !c.is_ascii());
    match action {
        Action::Type { text, .. } => !text.is_ascii(),
        Action::Key { chord } | Action::HoldKey { chord, .. } => chord.0.iter().any(unusual),
        _ => false,
    }
}

fn move_to(enigo: &mut Enigo, [x, y]: [i64; 2]) -> enigo::InputResult<()> {
    // Checked against the displays already, so these fit.
    let clamp = |v: i64| i32::try_from(v).unwrap_or(0);
    enigo.move_mouse(clamp(x), clamp(y), Coordinate::Abs)
}

const fn mouse(button: Button) -> enigo::Button {
    match button {
        Button::Left => enigo::Button::Left,
        Button::Middle => enigo::Button::Middle,
        Button::Right => enigo::Button::Right,
    }
}

const fn modifier_key(modifier: Modifier) -> enigo::Key {
    match modifier {
        Modifier::Shift => enigo::Key::Shift,
        Modifier::Ctrl => enigo::Key::Control,
        Modifier::Alt => enigo::Key::Alt,
        Modifier::Super => enigo::Key::Meta,
    }
}

/// Runs `inner` with `modifiers` held, releasing them even when it fails.
fn with_modifiers(
    enigo: &mut Enigo,
    modifiers: &[Modifier],
    inner: impl FnOnce(&mut Enigo) -> enigo::InputResult<()>,
) -> enigo::InputResult<()> {
    let keys: Vec<enigo::Key> = modifiers.iter().map(|m| modifier_key(*m)).collect();
    let mut pressed = Vec::new();
    let mut outcome = Ok(());
    for key in &keys {
        outcome = enigo.key(*key, Direction::Press);
        if outcome.is_err() {
            break;
        }
        pressed.push(*key);
    }
    if outcome.is_ok() {
        outcome = inner(enigo);
    }
    let released = release_all(enigo, &pressed);
    outcome.and(released)
}

fn tap(enigo: &mut Enigo, chord: &Chord) -> enigo::InputResult<()> {
    let Some((last, held)) = chord.0.split_last() else {
        return Ok(());
    };
    let mut pressed = Vec::new();
    let mut outcome = Ok(());
    for key in held {
        outcome = enigo.key(*key, Direction::Press);
        if outcome.is_err() {
            break;
        }
        pressed.push(*key);
    }
    if outcome.is_ok() {
        outcome = enigo.key(*last, Direction::Click);
    }
    let released = release_all(enigo, &pressed);
    outcome.and(released)
}

/// Releases `keys` in reverse order, trying every one even if one fails.
fn release_all(enigo: &mut Enigo, keys: &[enigo::Key]) -> enigo::InputResult<()> {
    keys.iter()
        .rev()
        .map(|key| enigo.key(*key, Direction::Release))
        .fold(Ok(()), enigo::InputResult::and)
}

fn paste_text(
    enigo: &mut Enigo,
    clipboard: &Clipboard,
    text: &str,
    preserve: bool,
) -> enigo::InputResult<()> {
    let previous = preserve.then(|| clipboard.raw_text()).flatten();
    if clipboard.set_raw_text(text).is_err() {
        // No clipboard to paste through: type it instead, which always works.
        return enigo.text(text);
    }
    let paste_modifier = if cfg!(target_os = "macos") {
        enigo::Key::Meta
    } else {
        enigo::Key::Control
    };
    let pasted = tap(
        enigo,
        &Chord(vec![paste_modifier, enigo::Key::Unicode('v')]),
    );
    if let Some(previous) = previous {
        sleep(PASTE_SETTLE);
        // The pasted text is already in place; failing to restore is not the action failing.
        let _ = clipboard.set_raw_text(&previous);
    }
    pasted
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

    #[test]
    fn a_refused_point_anywhere_on_a_path_refuses_the_action() {
        let displays = vec![Display {
            index: 0,
            primary: true,
            rect: super::super::Rect::from_corners([0, 0, 100, 100]).unwrap(),
            scale: 1.0,
            os_id: 1,
        }];
        let drag = Action::Drag {
            path: vec![[1, 1], [50, 50], [100, 50]],
            button: Button::Left,
        };
        // Refused before any input connection is opened, so this runs without a display.
        let err = perform(&drag, &displays, None).unwrap_err();
        assert_eq!(
            err.details().unwrap()["requested_coordinate"],
            serde_json::json!([100, 50])
        );
    }
}
