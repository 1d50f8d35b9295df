//! An input action as the steps of a virtual pointer and keyboard, shared by the two Wayland
//! backends (the wlr protocols in `wayland::input`, the desktop portal in `portal`): the named
//! keys and their X keysyms, the keysym of a character, and the one decomposition of every
//! action (clicks with modifiers and counts, drags, chords, held keys, scrolls, pastes) into
//! moves, buttons, keys and scroll notches that each backend sends its own way.

use std::thread::sleep;
use std::time::Duration;

use super::DesktopError;
use super::action::{
    Action, Button, Chord, DRAG_STEP, MAX_HOLD, MAX_WAIT, Modifier, PASTE_SETTLE, ScrollDirection,
    TRIPLE_CLICK_GAP, subsample,
};

/// The named keys: an XKB keycode name (for a keymap the shim writes), the X keysym name, its
/// value, and the XKB keycode a US keyboard gives the key (evdev's plus 8), where the shim's
/// keymaps keep it (see `wayland::input`). Modifiers first; every name a chord may use is here.
pub const NAMED: &[(&str, &str, u32, u32)] = &[
    ("LFSH", "Shift_L", 0xffe1, 50),
    ("LCTL", "Control_L", 0xffe3, 37),
    ("LALT", "Alt_L", 0xffe9, 64),
    ("LWIN", "Super_L", 0xffeb, 133),
    ("RTRN", "Return", 0xff0d, 36),
    ("ESC", "Escape", 0xff1b, 9),
    ("TAB", "Tab", 0xff09, 23),
    ("BKSP", "BackSpace", 0xff08, 22),
    ("DELE", "Delete", 0xffff, 119),
    ("HOME", "Home", 0xff50, 110),
    ("END", "End", 0xff57, 115),
    ("PGUP", "Prior", 0xff55, 112),
    ("PGDN", "Next", 0xff56, 117),
    ("UP", "Up", 0xff52, 111),
    ("DOWN", "Down", 0xff54, 116),
    ("LEFT", "Left", 0xff51, 113),
    ("RGHT", "Right", 0xff53, 114),
    ("CAPS", "Caps_Lock", 0xffe5, 66),
    ("INS", "Insert", 0xff63, 118),
    ("FK01", "F1", 0xffbe, 67),
    ("FK02", "F2", 0xffbf, 68),
    ("FK03", "F3", 0xffc0, 69),
    ("FK04", "F4", 0xffc1, 70),
    ("FK05", "F5", 0xffc2, 71),
    ("FK06", "F6", 0xffc3, 72),
    ("FK07", "F7", 0xffc4, 73),
    ("FK08", "F8", 0xffc5, 74),
    ("FK09", "F9", 0xffc6, 75),
    ("FK10", "F10", 0xffc7, 76),
    ("FK11", "F11", 0xffc8, 95),
    ("FK12", "F12", 0xffc9, 96),
];

/// A key: a named one (its index in [`NAMED`]) or a character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A named key by its index in [`NAMED`].
    Named(usize),
    /// A character.
    Char(char),
}

impl Key {
    /// The X keysym this key sends.
    #[must_use]
    pub fn keysym(self) -> u32 {
        match self {
            Self::Named(i) => NAMED.get(i).map_or(0, |(_, _, sym, _)| *sym),
            Self::Char(c) => keysym(c),
        }
    }

    /// The modifier bit it sets (XKB's real modifiers: Shift 1, Control 4, Mod1 8, Mod4 64),
    /// 0 when it is no modifier.
    #[must_use]
    pub fn modifier_bit(self) -> u32 {
        match self {
            Self::Named(0) => 1,
            Self::Named(1) => 4,
            Self::Named(2) => 8,
            Self::Named(3) => 64,
            Self::Named(_) | Self::Char(_) => 0,
        }
    }
}

/// The named key whose keysym is called `name`.
#[must_use]
pub fn named(name: &str) -> Key {
    Key::Named(
        NAMED
            .iter()
            .position(|(_, sym, _, _)| *sym == name)
            .unwrap_or(0),
    )
}

/// The chord that pastes the clipboard: Ctrl+V.
#[must_use]
pub fn paste_chord() -> [Key; 2] {
    [named("Control_L"), Key::Char('v')]
}

/// The key that holds `modifier`.
#[must_use]
pub fn modifier(modifier: Modifier) -> Key {
    named(match modifier {
        Modifier::Shift => "Shift_L",
        Modifier::Ctrl => "Control_L",
        Modifier::Alt => "Alt_L",
        Modifier::Super => "Super_L",
    })
}

/// The X keysym that types `c`: Return, Tab and BackSpace have named ones, Latin-1 characters
/// are their own keysyms, and every other character is its Unicode keysym.
#[must_use]
pub fn keysym(c: char) -> u32 {
    let code = u32::from(c);
    match c {
        '\n' | '\r' => 0xff0d,
        '\t' => 0xff09,
        '\u{8}' => 0xff08,
        ' '..='~' | '\u{a0}'..='\u{ff}' => code,
        _ => 0x0100_0000 + code,
    }
}

/// The keysyms that type `c`, the likelier first: the legacy keysym XKB layouts list it
/// under (`EuroSign` for €), then [`keysym`]'s.
#[must_use]
pub fn char_keysyms(c: char) -> Vec<u32> {
    let mut syms = vec![xkeysym::Keysym::from_char(c).raw(), keysym(c)];
    if c == '\n' {
        // Its legacy keysym is Linefeed, which no layout has; Return types it.
        syms.remove(0);
    }
    syms.dedup();
    syms.retain(|sym| *sym != 0);
    syms
}

/// The names an XKB keymap's text may give `keysym`: its name, `U2713` for a Unicode keysym,
/// and its number.
#[must_use]
pub fn keysym_names(keysym: u32) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(name) = xkeysym::Keysym::new(keysym).name() {
        // xkeysym names them as C macros: XK_a, XF86XK_AudioPlay.
        let name = name
            .strip_prefix("XF86XK_")
            .map(|rest| format!("XF86{rest}"))
            .unwrap_or_else(|| name.trim_start_matches("XK_").to_owned());
        names.push(name);
    }
    if keysym & 0xff00_0000 == 0x0100_0000 {
        names.push(format!("U{:04X}", keysym & 0x00ff_ffff));
    }
    names.push(format!("{keysym:#x}"));
    names.push(format!("{keysym:#010x}"));
    names
}

/// A chord's keys, modifiers first.
///
/// # Errors
/// [`DesktopError::NotSupported`] (`input.key`) for a key no keysym here names.
pub fn keys(chord: &Chord) -> Result<Vec<Key>, DesktopError> {
    chord.keys().iter().map(|k| from_enigo(*k)).collect()
}

fn from_enigo(key: enigo::Key) -> Result<Key, DesktopError> {
    use enigo::Key as K;
    Ok(match key {
        K::Shift | K::LShift | K::RShift => named("Shift_L"),
        K::Control | K::LControl | K::RControl => named("Control_L"),
        K::Alt => named("Alt_L"),
        K::Meta => named("Super_L"),
        K::Return => named("Return"),
        K::Escape => named("Escape"),
        K::Tab => named("Tab"),
        K::Space => Key::Char(' '),
        K::Backspace => named("BackSpace"),
        K::Delete => named("Delete"),
        K::Home => named("Home"),
        K::End => named("End"),
        K::PageUp => named("Prior"),
        K::PageDown => named("Next"),
        K::UpArrow => named("Up"),
        K::DownArrow => named("Down"),
        K::LeftArrow => named("Left"),
        K::RightArrow => named("Right"),
        K::CapsLock => named("Caps_Lock"),
        K::Insert => named("Insert"),
        K::F1 => named("F1"),
        K::F2 => named("F2"),
        K::F3 => named("F3"),
        K::F4 => named("F4"),
        K::F5 => named("F5"),
        K::F6 => named("F6"),
        K::F7 => named("F7"),
        K::F8 => named("F8"),
        K::F9 => named("F9"),
        K::F10 => named("F10"),
        K::F11 => named("F11"),
        K::F12 => named("F12"),
        K::Unicode(c) => Key::Char(c),
        _ => {
            return Err(DesktopError::unsupported(
                "input.key",
                "that key has no Wayland keysym here",
            ));
        }
    })
}

/// The Linux input event code of a button (`BTN_LEFT`, `BTN_RIGHT`, `BTN_MIDDLE`).
#[must_use]
pub const fn evdev(button: Button) -> u32 {
    match button {
        Button::Left => 0x110,
        Button::Right => 0x111,
        Button::Middle => 0x112,
    }
}

/// A virtual pointer and keyboard: what a backend sends for each step of an action.
pub trait Device {
    /// Moves the pointer to a display-global point (already checked against the displays).
    ///
    /// # Errors
    /// Whatever the backend cannot do.
    fn move_to(&mut self, at: [i64; 2]) -> Result<(), DesktopError>;

    /// Presses or releases `button` where the pointer is.
    ///
    /// # Errors
    /// Whatever the backend cannot do.
    fn button(&mut self, button: Button, pressed: bool) -> Result<(), DesktopError>;

    /// Presses or releases `key`, one of `chord`: every key held together, which a backend
    /// with a keymap of its own needs all at once.
    ///
    /// # Errors
    /// Whatever the backend cannot do.
    fn key(&mut self, chord: &[Key], key: Key, pressed: bool) -> Result<(), DesktopError>;

    /// Types `text`.
    ///
    /// # Errors
    /// Whatever the backend cannot do.
    fn type_text(&mut self, text: &str) -> Result<(), DesktopError>;

    /// Scrolls `clicks` wheel notches where the pointer is.
    ///
    /// # Errors
    /// Whatever the backend cannot do.
    fn scroll(&mut self, direction: ScrollDirection, clicks: i32) -> Result<(), DesktopError>;

    /// Waits until what was sent has been taken (before a hold, after a paste chord).
    ///
    /// # Errors
    /// Whatever the backend cannot do.
    fn settle(&mut self) -> Result<(), DesktopError>;

    /// Waits `duration` while the target reads a paste; a backend that serves the clipboard
    /// from the thread performing the action keeps answering meanwhile.
    fn pause(&mut self, duration: Duration) {
        sleep(duration);
    }

    /// The clipboard's text, when this backend has a clipboard and it holds text.
    fn clipboard_text(&mut self) -> Option<String> {
        None
    }

    /// Puts `text` on the clipboard.
    ///
    /// # Errors
    /// [`DesktopError::NotSupported`] when this backend has no clipboard.
    fn set_clipboard(&mut self, _text: &str) -> Result<(), DesktopError> {
        Err(DesktopError::unsupported(
            "clipboard.write",
            "this backend has no clipboard",
        ))
    }
}

/// Performs `action` on `device`, whose points the caller has checked; `paste` says whether
/// `type` with `paste` may go through the clipboard.
///
/// # Errors
/// The first step that fails; held buttons and keys are released whatever happened.
pub fn perform(device: &mut impl Device, action: &Action, paste: bool) -> Result<(), DesktopError> {
    match action {
        Action::Click {
            at,
            button,
            count,
            modifiers,
        } => {
            device.move_to(*at)?;
            with_modifiers(device, modifiers, |device| {
                for n in 0..*count {
                    if n > 0 && *count > 2 {
                        sleep(TRIPLE_CLICK_GAP);
                    }
                    device.button(*button, true)?;
                    device.button(*button, false)?;
                }
                Ok(())
            })
        }
        Action::Move { to } => device.move_to(*to),
        Action::Down { at, button } | Action::Up { at, button } => {
            if let Some(at) = at {
                device.move_to(*at)?;
            }
            device.button(*button, matches!(action, Action::Down { .. }))
        }
        Action::Drag { path, button } => {
            let points = subsample(path);
            let Some((first, rest)) = points.split_first() else {
                return Ok(());
            };
            device.move_to(*first)?;
            device.button(*button, true)?;
            let moved = rest.iter().try_for_each(|point| {
                // Applications sample the pointer per frame; a path walked at once would reach
                // them as a jump from the first point to the last.
                sleep(DRAG_STEP);
                device.move_to(*point)
            });
            // Released whatever happened, so no button is left stuck down.
            let released = device.button(*button, false);
            moved.and(released)
        }
        Action::Type {
            text,
            paste: wanted,
            preserve_clipboard,
        } => {
            if paste && *wanted {
                paste_text(device, text, *preserve_clipboard)
            } else {
                device.type_text(text)
            }
        }
        Action::Key { chord } => tap(device, &keys(chord)?),
        Action::HoldKey { chord, duration } => {
            let keys = keys(chord)?;
            chord_then(device, &keys, |device| {
                device.settle()?;
                sleep((*duration).min(MAX_HOLD));
                Ok(())
            })
        }
        Action::Scroll {
            at,
            direction,
            clicks,
            modifiers,
        } => {
            if let Some(at) = at {
                device.move_to(*at)?;
            }
            with_modifiers(device, modifiers, |device| {
                device.scroll(*direction, *clicks)
            })
        }
        Action::Wait { duration } => {
            sleep((*duration).min(MAX_WAIT));
            Ok(())
        }
    }
}

fn with_modifiers<D: Device>(
    device: &mut D,
    modifiers: &[Modifier],
    inner: impl FnOnce(&mut D) -> Result<(), DesktopError>,
) -> Result<(), DesktopError> {
    let keys: Vec<Key> = modifiers.iter().map(|m| modifier(*m)).collect();
    chord_then(device, &keys, inner)
}

/// Holds `keys` in order, runs `inner`, and releases them in reverse whatever happened.
fn chord_then<D: Device>(
    device: &mut D,
    keys: &[Key],
    inner: impl FnOnce(&mut D) -> Result<(), DesktopError>,
) -> Result<(), DesktopError> {
    hold_then(device, keys, keys, inner)
}

/// Holds `held`, part of `chord`, in order, runs `inner`, and releases them in reverse
/// whatever happened.
fn hold_then<D: Device>(
    device: &mut D,
    chord: &[Key],
    held: &[Key],
    inner: impl FnOnce(&mut D) -> Result<(), DesktopError>,
) -> Result<(), DesktopError> {
    let mut pressed = Vec::new();
    let mut outcome = Ok(());
    for key in held {
        outcome = device.key(chord, *key, true);
        if outcome.is_err() {
            break;
        }
        pressed.push(*key);
    }
    if outcome.is_ok() {
        outcome = inner(device);
    }
    let released = pressed
        .iter()
        .rev()
        .map(|key| device.key(chord, *key, false))
        .fold(Ok(()), Result::and);
    outcome.and(released)
}

/// Taps the last key of `keys` with the others held.
fn tap(device: &mut impl Device, keys: &[Key]) -> Result<(), DesktopError> {
    let Some((last, held)) = keys.split_last() else {
        return Ok(());
    };
    let last = *last;
    hold_then(device, keys, held, |device| {
        device.key(keys, last, true)?;
        device.key(keys, last, false)
    })
}

fn paste_text(device: &mut impl Device, text: &str, preserve: bool) -> Result<(), DesktopError> {
    let previous = if preserve {
        device.clipboard_text()
    } else {
        None
    };
    if device.set_clipboard(text).is_err() {
        // No clipboard to paste through: type it instead, which always works.
        return device.type_text(text);
    }
    let pasted = tap(device, &paste_chord());
    if let Some(previous) = previous {
        let _ = device.settle();
        device.pause(PASTE_SETTLE);
        // The pasted text is already in place; failing to restore is not the action failing.
        let _ = device.set_clipboard(&previous);
    }
    pasted
}

#[cfg(test)]
mod tests;
