//! Synthetic input on Wayland: one virtual pointer per output (`zwlr_virtual_pointer_v1`
//! version 2, so a point is a fraction of that output's box and needs no scale arithmetic)
//! and one virtual keyboard whose keymap this shim writes and uploads, with a key for each
//! character to type, so any Unicode text types whatever the user's layout.
//!
//! The devices live as long as the connection: wlroots drops the first events a brand-new
//! device sends, so each is given a moment once, when created.

use std::collections::HashMap;
use std::io::Write;
use std::os::fd::AsFd;
use std::thread::sleep;
use std::time::Duration;

use wayland_client::delegate_noop;
use wayland_client::protocol::wl_pointer;
use wayland_protocols_misc::zwp_virtual_keyboard_v1::client::{
    zwp_virtual_keyboard_manager_v1::ZwpVirtualKeyboardManagerV1, zwp_virtual_keyboard_v1,
};
use wayland_protocols_wlr::virtual_pointer::v1::client::{
    zwlr_virtual_pointer_manager_v1::ZwlrVirtualPointerManagerV1, zwlr_virtual_pointer_v1,
};

use super::{State, Wl, failed, memfd, now_ms, run};
use crate::desktop::action::{
    Action, Button, Chord, DRAG_STEP, MAX_HOLD, MAX_WAIT, Modifier, PASTE_SETTLE, ScrollDirection,
    TRIPLE_CLICK_GAP, subsample,
};
use crate::desktop::{DesktopError, Display};

/// What a new device is given before its first event counts (measured on sway: 100 ms was
/// always enough for the keyboard, the pointer's enter reached clients after 300 ms).
const NEW_DEVICE_SETTLE: Duration = Duration::from_millis(300);
/// How long the keys of a typed chunk are given to reach the client before the keymap changes.
const CHUNK_SETTLE: Duration = Duration::from_millis(30);
/// Keycodes reserved for named keys; the rest of XKB's 8..=255 carry characters.
const NAMED: &[(&str, &str)] = &[
    ("LFSH", "Shift_L"),
    ("LCTL", "Control_L"),
    ("LALT", "Alt_L"),
    ("LWIN", "Super_L"),
    ("RTRN", "Return"),
    ("ESC", "Escape"),
    ("TAB", "Tab"),
    ("BKSP", "BackSpace"),
    ("DELE", "Delete"),
    ("HOME", "Home"),
    ("END", "End"),
    ("PGUP", "Prior"),
    ("PGDN", "Next"),
    ("UP", "Up"),
    ("DOWN", "Down"),
    ("LEFT", "Left"),
    ("RGHT", "Right"),
    ("CAPS", "Caps_Lock"),
    ("INS", "Insert"),
    ("FK01", "F1"),
    ("FK02", "F2"),
    ("FK03", "F3"),
    ("FK04", "F4"),
    ("FK05", "F5"),
    ("FK06", "F6"),
    ("FK07", "F7"),
    ("FK08", "F8"),
    ("FK09", "F9"),
    ("FK10", "F10"),
    ("FK11", "F11"),
    ("FK12", "F12"),
];
/// Characters one keymap can carry: XKB keycodes 9..=255 less the named keys.
const CHARS_PER_KEYMAP: usize = 247 - NAMED.len();

/// The input devices of one connection.
#[derive(Debug, Default)]
pub(super) struct Devices {
    pointers: HashMap<u32, zwlr_virtual_pointer_v1::ZwlrVirtualPointerV1>,
    keyboard: Option<zwp_virtual_keyboard_v1::ZwpVirtualKeyboardV1>,
    /// The characters of the keymap uploaded last, in keycode order.
    keymap: Option<Vec<char>>,
    /// Modifier bits held now (XKB's real modifiers in the keymap: Shift 1, Control 4,
    /// Mod1 8, Mod4 64).
    mods: u32,
}

/// A key of this shim's keymap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    /// A named key by its index in [`NAMED`].
    Named(usize),
    /// A character.
    Char(char),
}

fn named(name: &str) -> Key {
    Key::Named(NAMED.iter().position(|(_, sym)| *sym == name).unwrap_or(0))
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

/// The modifier bit a named key sets, if it is a modifier.
fn modifier_bit(key: Key) -> u32 {
    match key {
        Key::Named(i) => match NAMED.get(i).map(|(_, s)| *s) {
            Some("Shift_L") => 1,
            Some("Control_L") => 4,
            Some("Alt_L") => 8,
            Some("Super_L") => 64,
            _ => 0,
        },
        Key::Char(_) => 0,
    }
}

fn modifier(m: Modifier) -> Key {
    named(match m {
        Modifier::Shift => "Shift_L",
        Modifier::Ctrl => "Control_L",
        Modifier::Alt => "Alt_L",
        Modifier::Super => "Super_L",
    })
}

/// The XKB keysym of a character: Latin-1 keysyms are the code point, the rest Unicode's.
fn keysym(c: char) -> String {
    let code = u32::from(c);
    match c {
        '\n' | '\r' => "Return".to_owned(),
        '\t' => "Tab".to_owned(),
        '\u{8}' => "BackSpace".to_owned(),
        '\u{20}'..='\u{7e}' | '\u{a0}'..='\u{ff}' => format!("{code:#06x}"),
        _ => format!("{:#010x}", 0x0100_0000 + code),
    }
}

/// An XKB keymap with the named keys first, then one key per character of `chars`.
fn keymap(chars: &[char]) -> String {
    let mut codes = String::new();
    let mut symbols = String::new();
    let names = NAMED
        .iter()
        .map(|(code, sym)| ((*code).to_owned(), (*sym).to_owned()))
        .chain(
            chars
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("C{i}"), keysym(*c))),
        );
    for (i, (code, sym)) in names.enumerate() {
        codes.push_str(&format!("<{code}> = {};\n", i + 9));
        symbols.push_str(&format!("key <{code}> {{ [ {sym} ] }};\n"));
    }
    format!(
        "xkb_keymap {{\nxkb_keycodes \"shim\" {{\nminimum = 8;\nmaximum = 255;\n{codes}}};\n\
         xkb_types \"shim\" {{ include \"complete\" }};\n\
         xkb_compatibility \"shim\" {{ include \"complete\" }};\n\
         xkb_symbols \"shim\" {{\n{symbols}\
         modifier_map Shift {{ <LFSH> }};\nmodifier_map Control {{ <LCTL> }};\n\
         modifier_map Mod1 {{ <LALT> }};\nmodifier_map Mod4 {{ <LWIN> }};\n}};\n}};\n"
    )
}

impl Wl {
    /// The output's virtual pointer, created (and given its moment) on first use.
    fn pointer(
        &mut self,
        os_id: u32,
    ) -> Result<zwlr_virtual_pointer_v1::ZwlrVirtualPointerV1, DesktopError> {
        if let Some(pointer) = self.devices.pointers.get(&os_id) {
            return Ok(pointer.clone());
        }
        let seat = self.seat("input")?;
        let manager = self
            .globals
            .bind::<ZwlrVirtualPointerManagerV1, _, _>(&self.qh, 2..=2, ())
            .map_err(|_| {
                DesktopError::unsupported(
                    "input",
                    "this Wayland compositor has no virtual pointer protocol (version 2)",
                )
            })?;
        let output = self.output(os_id)?.wl.clone();
        let pointer =
            manager.create_virtual_pointer_with_output(Some(&seat), Some(&output), &self.qh, ());
        manager.destroy();
        self.roundtrip()?;
        sleep(NEW_DEVICE_SETTLE);
        self.devices.pointers.insert(os_id, pointer.clone());
        Ok(pointer)
    }

    /// The virtual keyboard with a keymap holding `chars`, uploaded when it differs.
    fn keyboard(
        &mut self,
        chars: &[char],
    ) -> Result<zwp_virtual_keyboard_v1::ZwpVirtualKeyboardV1, DesktopError> {
        let keyboard = match self.devices.keyboard.clone() {
            Some(keyboard) => keyboard,
            None => {
                let seat = self.seat("input")?;
                let manager = self
                    .globals
                    .bind::<ZwpVirtualKeyboardManagerV1, _, _>(&self.qh, 1..=1, ())
                    .map_err(|_| {
                        DesktopError::unsupported(
                            "input",
                            "this Wayland compositor has no virtual keyboard protocol",
                        )
                    })?;
                let keyboard = manager.create_virtual_keyboard(&seat, &self.qh, ());
                self.devices.keyboard = Some(keyboard.clone());
                self.devices.keymap = None;
                keyboard
            }
        };
        if self.devices.keymap.as_deref() != Some(chars) {
            let fresh = self.devices.keymap.is_none();
            let mut text = keymap(chars).into_bytes();
            // The protocol's keymap is a NUL-terminated string, its size counting the NUL.
            text.push(0);
            let mut file = memfd("keymap", 0)?;
            file.write_all(&text)
                .map_err(|e| failed("could not write the keymap", e))?;
            let size = u32::try_from(text.len()).unwrap_or(u32::MAX);
            keyboard.keymap(1, file.as_fd(), size);
            self.roundtrip()?;
            self.devices.keymap = Some(chars.to_vec());
            if fresh {
                sleep(NEW_DEVICE_SETTLE);
            }
        }
        Ok(keyboard)
    }

    fn key(&mut self, chars: &[char], key: Key, pressed: bool) -> Result<(), DesktopError> {
        let code = match key {
            Key::Named(i) => i,
            Key::Char(c) => {
                NAMED.len()
                    + chars.iter().position(|x| *x == c).ok_or_else(|| {
                        DesktopError::Failed("a character missing from the keymap".to_owned())
                    })?
            }
        };
        let keyboard = self.keyboard(chars)?;
        // Evdev codes are XKB's minus 8; the keymap starts at XKB 9.
        keyboard.key(
            now_ms(),
            u32::try_from(code + 1).unwrap_or(0),
            u32::from(pressed),
        );
        let bit = modifier_bit(key);
        if bit != 0 {
            if pressed {
                self.devices.mods |= bit;
            } else {
                self.devices.mods &= !bit;
            }
            keyboard.modifiers(self.devices.mods, 0, 0, 0);
        }
        self.conn
            .flush()
            .map_err(|e| failed("the compositor went away", e))
    }

    fn move_to(&mut self, displays: &[Display], [x, y]: [i64; 2]) -> Result<(), DesktopError> {
        let Some(display) = display_at(displays, x, y) else {
            return Err(DesktopError::OutOfBounds {
                coordinate: [x, y],
                displays: displays.iter().map(|d| (d.index, d.rect)).collect(),
            });
        };
        let pointer = self.pointer(display.os_id)?;
        let part = |v: i64| u32::try_from(v).unwrap_or(0);
        let side = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        pointer.motion_absolute(
            now_ms(),
            part(x - display.rect.x),
            part(y - display.rect.y),
            side(display.rect.width),
            side(display.rect.height),
        );
        pointer.frame();
        self.state.cursor = Some([x, y]);
        self.conn
            .flush()
            .map_err(|e| failed("the compositor went away", e))
    }

    /// The pointer to press buttons with: the one on the output under the last point sent.
    fn current_pointer(
        &mut self,
        displays: &[Display],
    ) -> Result<zwlr_virtual_pointer_v1::ZwlrVirtualPointerV1, DesktopError> {
        let [x, y] = self.state.cursor.unwrap_or([0, 0]);
        let display = display_at(displays, x, y)
            .or_else(|| displays.first())
            .ok_or_else(|| DesktopError::unsupported("input", "no output is connected"))?;
        self.pointer(display.os_id)
    }

    fn button(
        &mut self,
        displays: &[Display],
        button: Button,
        pressed: bool,
    ) -> Result<(), DesktopError> {
        let pointer = self.current_pointer(displays)?;
        // Linux input event codes BTN_LEFT, BTN_RIGHT, BTN_MIDDLE.
        let code = match button {
            Button::Left => 0x110,
            Button::Right => 0x111,
            Button::Middle => 0x112,
        };
        let state = if pressed {
            wl_pointer::ButtonState::Pressed
        } else {
            wl_pointer::ButtonState::Released
        };
        pointer.button(now_ms(), code, state);
        pointer.frame();
        self.conn
            .flush()
            .map_err(|e| failed("the compositor went away", e))
    }

    fn modifiers_then(
        &mut self,
        modifiers: &[Modifier],
        inner: impl FnOnce(&mut Self) -> Result<(), DesktopError>,
    ) -> Result<(), DesktopError> {
        let keys: Vec<Key> = modifiers.iter().map(|m| modifier(*m)).collect();
        self.chord_then(&keys, inner)
    }

    /// Holds `keys` in order, runs `inner`, and releases them in reverse whatever happened.
    fn chord_then(
        &mut self,
        keys: &[Key],
        inner: impl FnOnce(&mut Self) -> Result<(), DesktopError>,
    ) -> Result<(), DesktopError> {
        let chars = chars_of(keys);
        let mut pressed = Vec::new();
        let mut outcome = Ok(());
        for key in keys {
            outcome = self.key(&chars, *key, true);
            if outcome.is_err() {
                break;
            }
            pressed.push(*key);
        }
        if outcome.is_ok() {
            outcome = inner(self);
        }
        let released = pressed
            .iter()
            .rev()
            .map(|key| self.key(&chars, *key, false))
            .fold(Ok(()), Result::and);
        outcome.and(released)
    }

    fn tap(&mut self, keys: &[Key]) -> Result<(), DesktopError> {
        let Some((last, held)) = keys.split_last() else {
            return Ok(());
        };
        let chars = chars_of(keys);
        let last = *last;
        self.chord_then(held, |wl| {
            wl.key(&chars, last, true)?;
            wl.key(&chars, last, false)
        })
    }

    fn type_text(&mut self, text: &str) -> Result<(), DesktopError> {
        let all: Vec<char> = text.chars().collect();
        let mut start = 0;
        while start < all.len() {
            // The longest run whose distinct characters fit one keymap.
            let mut chars: Vec<char> = Vec::new();
            let mut end = start;
            while end < all.len() {
                let c = all[end];
                if !chars.contains(&c) {
                    if chars.len() == CHARS_PER_KEYMAP {
                        break;
                    }
                    chars.push(c);
                }
                end += 1;
            }
            chars.sort_unstable();
            for c in &all[start..end] {
                self.key(&chars, Key::Char(*c), true)?;
                self.key(&chars, Key::Char(*c), false)?;
            }
            self.roundtrip()?;
            start = end;
            if start < all.len() {
                sleep(CHUNK_SETTLE);
            }
        }
        Ok(())
    }

    fn scroll(
        &mut self,
        displays: &[Display],
        direction: ScrollDirection,
        clicks: i32,
    ) -> Result<(), DesktopError> {
        let pointer = self.current_pointer(displays)?;
        let (axis, sign) = match direction {
            ScrollDirection::Up => (wl_pointer::Axis::VerticalScroll, -1),
            ScrollDirection::Down => (wl_pointer::Axis::VerticalScroll, 1),
            ScrollDirection::Left => (wl_pointer::Axis::HorizontalScroll, -1),
            ScrollDirection::Right => (wl_pointer::Axis::HorizontalScroll, 1),
        };
        let steps = clicks.saturating_mul(sign);
        pointer.axis_source(wl_pointer::AxisSource::Wheel);
        // 15 units a notch, as libinput reports a wheel.
        pointer.axis_discrete(now_ms(), axis, f64::from(steps) * 15.0, steps);
        pointer.frame();
        self.conn
            .flush()
            .map_err(|e| failed("the compositor went away", e))
    }

    fn act(
        &mut self,
        action: &Action,
        displays: &[Display],
        clipboard: bool,
    ) -> Result<(), DesktopError> {
        match action {
            Action::Click {
                at,
                button,
                count,
                modifiers,
            } => {
                self.move_to(displays, *at)?;
                self.modifiers_then(modifiers, |wl| {
                    for n in 0..*count {
                        if n > 0 && *count > 2 {
                            sleep(TRIPLE_CLICK_GAP);
                        }
                        wl.button(displays, *button, true)?;
                        wl.button(displays, *button, false)?;
                    }
                    Ok(())
                })
            }
            Action::Move { to } => self.move_to(displays, *to),
            Action::Down { at, button } | Action::Up { at, button } => {
                if let Some(at) = at {
                    self.move_to(displays, *at)?;
                }
                self.button(displays, *button, matches!(action, Action::Down { .. }))
            }
            Action::Drag { path, button } => {
                let points = subsample(path);
                let Some((first, rest)) = points.split_first() else {
                    return Ok(());
                };
                self.move_to(displays, *first)?;
                self.button(displays, *button, true)?;
                let moved = rest.iter().try_for_each(|point| {
                    sleep(DRAG_STEP);
                    self.move_to(displays, *point)
                });
                let released = self.button(displays, *button, false);
                moved.and(released)
            }
            Action::Type {
                text,
                paste,
                preserve_clipboard,
            } => {
                if clipboard && *paste {
                    self.paste(text, *preserve_clipboard)
                } else {
                    self.type_text(text)
                }
            }
            Action::Key { chord } => self.tap(&keys(chord)?),
            Action::HoldKey { chord, duration } => {
                let keys = keys(chord)?;
                self.chord_then(&keys, |wl| {
                    wl.roundtrip()?;
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
                    self.move_to(displays, *at)?;
                }
                self.modifiers_then(modifiers, |wl| wl.scroll(displays, *direction, *clicks))
            }
            Action::Wait { duration } => {
                sleep((*duration).min(MAX_WAIT));
                Ok(())
            }
        }
    }

    fn paste(&mut self, text: &str, preserve: bool) -> Result<(), DesktopError> {
        // The clipboard is served by this very thread, so it is set here, not through a job.
        let previous = preserve
            .then(|| super::clipboard::get(self, u64::MAX).ok())
            .flatten();
        if super::clipboard::set(self, text).is_err() {
            return self.type_text(text);
        }
        let pasted = self.tap(&[named("Control_L"), Key::Char('v')]);
        if let Some(previous) = previous {
            let _ = self.roundtrip();
            sleep(PASTE_SETTLE);
            let _ = super::clipboard::set(self, &previous);
        }
        pasted
    }
}

fn keys(chord: &Chord) -> Result<Vec<Key>, DesktopError> {
    chord.keys().iter().map(|k| from_enigo(*k)).collect()
}

fn chars_of(keys: &[Key]) -> Vec<char> {
    let mut chars: Vec<char> = keys
        .iter()
        .filter_map(|k| match k {
            Key::Char(c) => Some(*c),
            Key::Named(_) => None,
        })
        .collect();
    chars.sort_unstable();
    chars.dedup();
    chars
}

/// The display holding `(x, y)`.
fn display_at(displays: &[Display], x: i64, y: i64) -> Option<&Display> {
    displays.iter().find(|d| d.rect.contains(x, y))
}

/// Performs `action`, whose points the caller has checked against `displays`; `paste` says
/// whether the clipboard is enabled for `type` with `paste`.
///
/// # Errors
/// [`DesktopError::NotSupported`] without the protocol, [`DesktopError::Failed`] when the
/// compositor goes away.
pub fn perform(action: &Action, displays: &[Display], paste: bool) -> Result<(), DesktopError> {
    if let Action::Wait { duration } = action {
        sleep((*duration).min(MAX_WAIT));
        return Ok(());
    }
    let action = action.clone();
    let displays = displays.to_vec();
    run(move |wl| {
        let outcome = wl.act(&action, &displays, paste);
        let _ = wl.roundtrip();
        outcome
    })
}

/// The last point this shim moved the pointer to.
///
/// # Errors
/// [`DesktopError::NotSupported`] (`cursor.position`) before the first move: Wayland tells no
/// client where the pointer is.
pub fn cursor() -> Result<[i64; 2], DesktopError> {
    run(|wl| {
        wl.state.cursor.ok_or_else(|| {
            DesktopError::unsupported(
                "cursor.position",
                "Wayland tells no client where the pointer is; it is known once the shim has moved it",
            )
        })
    })
}

delegate_noop!(State: zwlr_virtual_pointer_v1::ZwlrVirtualPointerV1);
delegate_noop!(State: zwp_virtual_keyboard_v1::ZwpVirtualKeyboardV1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keymap_has_the_named_keys_then_one_key_per_character() {
        let map = keymap(&['a', 'é', '✓', '🙂', '\n']);
        assert!(map.contains("<LFSH> = 9;"));
        assert!(map.contains(&format!("<C0> = {};", NAMED.len() + 9)));
        assert!(map.contains("key <C0> { [ 0x0061 ] };"));
        assert!(map.contains("key <C1> { [ 0x00e9 ] };"));
        assert!(map.contains("key <C2> { [ 0x01002713 ] };"));
        assert!(map.contains("key <C3> { [ 0x0101f642 ] };"));
        assert!(map.contains("key <C4> { [ Return ] };"));
        assert!(map.contains("modifier_map Control { <LCTL> };"));
        // 255 is XKB's last keycode.
        assert_eq!(9 + NAMED.len() + CHARS_PER_KEYMAP - 1, 255);
    }

    #[test]
    fn chords_map_to_named_keys_and_characters() {
        let chord = Chord::parse("ctrl+shift+T").unwrap();
        assert_eq!(
            keys(&chord).unwrap(),
            vec![named("Control_L"), named("Shift_L"), Key::Char('t')]
        );
        assert_eq!(modifier_bit(named("Control_L")), 4);
        assert_eq!(modifier_bit(Key::Char('t')), 0);
        assert_eq!(
            keys(&Chord::parse("alt+F4").unwrap()).unwrap()[1],
            named("F4")
        );
    }
}
