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
use crate::desktop::action::{Action, Button, MAX_WAIT, ScrollDirection};
use crate::desktop::virtual_input::{self, Device, Key, NAMED, evdev, keysym};
use crate::desktop::{DesktopError, Display};

/// What a new device is given before its first event counts (measured on sway: 100 ms was
/// always enough for the keyboard, the pointer's enter reached clients after 300 ms).
const NEW_DEVICE_SETTLE: Duration = Duration::from_millis(300);
/// How long the keys of a typed chunk are given to reach the client before the keymap changes.
const CHUNK_SETTLE: Duration = Duration::from_millis(30);
/// The US layout's unshifted characters, each with its key's XKB keycode.
///
/// GTK 3 on Wayland resolves shortcuts (Ctrl+V, Ctrl+A) through the keycodes of the US keymap
/// it starts with and does not look again when the keyboard's keymap changes, so a shortcut
/// sent on any other keycode did nothing there (the text of plain keys still arrived). The
/// shim's keymaps therefore keep these characters, and the named keys ([`NAMED`]), where a US
/// keyboard has them.
const US_CHARS: &[(char, u32)] = &[
    ('`', 49),
    ('1', 10),
    ('2', 11),
    ('3', 12),
    ('4', 13),
    ('5', 14),
    ('6', 15),
    ('7', 16),
    ('8', 17),
    ('9', 18),
    ('0', 19),
    ('-', 20),
    ('=', 21),
    ('q', 24),
    ('w', 25),
    ('e', 26),
    ('r', 27),
    ('t', 28),
    ('y', 29),
    ('u', 30),
    ('i', 31),
    ('o', 32),
    ('p', 33),
    ('[', 34),
    (']', 35),
    ('\\', 51),
    ('a', 38),
    ('s', 39),
    ('d', 40),
    ('f', 41),
    ('g', 42),
    ('h', 43),
    ('j', 44),
    ('k', 45),
    ('l', 46),
    (';', 47),
    ('\'', 48),
    ('z', 52),
    ('x', 53),
    ('c', 54),
    ('v', 55),
    ('b', 56),
    ('n', 57),
    ('m', 58),
    (',', 59),
    ('.', 60),
    ('/', 61),
    (' ', 65),
];
/// Characters one keymap can carry: XKB keycodes 9..=255 less those kept for the named keys
/// and the US characters, which every character outside them takes in turn.
const CHARS_PER_KEYMAP: usize = 247 - NAMED.len() - US_CHARS.len();

/// The keycode of each character of `chars`, in order: a US character's own, every other the
/// next keycode no named key or US character keeps, those past a US keyboard's keys (134 and
/// up) first, so a client reading them with a US keymap sees no modifier or other known key.
fn char_codes(chars: &[char]) -> Vec<u32> {
    let kept = |code: &u32| {
        NAMED.iter().any(|(.., c)| c == code) || US_CHARS.iter().any(|(_, c)| c == code)
    };
    let mut free = (134..=255_u32).chain(9..134).filter(|code| !kept(code));
    chars
        .iter()
        .map(|c| match US_CHARS.iter().find(|(us, _)| us == c) {
            Some((_, code)) => *code,
            None => free.next().unwrap_or(0),
        })
        .collect()
}

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

/// How a character's keysym is written in a keymap.
fn keymap_sym(c: char) -> String {
    let sym = keysym(c);
    if sym < 0x100 {
        format!("{sym:#06x}")
    } else {
        format!("{sym:#010x}")
    }
}

/// An XKB keymap with the named keys, then one key per character of `chars`, at the keycodes
/// [`NAMED`] and [`char_codes`] give.
fn keymap(chars: &[char]) -> String {
    let mut codes = String::new();
    let mut symbols = String::new();
    let names = NAMED
        .iter()
        .map(|(name, sym, _, code)| ((*name).to_owned(), (*sym).to_owned(), *code))
        .chain(
            chars
                .iter()
                .zip(char_codes(chars))
                .enumerate()
                .map(|(i, (c, code))| (format!("C{i}"), keymap_sym(*c), code)),
        );
    for (name, sym, code) in names {
        codes.push_str(&format!("<{name}> = {code};\n"));
        symbols.push_str(&format!("key <{name}> {{ [ {sym} ] }};\n"));
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
            Key::Named(i) => NAMED.get(i).map(|(.., code)| *code),
            Key::Char(c) => chars
                .iter()
                .position(|x| *x == c)
                .and_then(|i| char_codes(chars).get(i).copied()),
        }
        .ok_or_else(|| DesktopError::Failed("a key missing from the keymap".to_owned()))?;
        let keyboard = self.keyboard(chars)?;
        // Evdev codes are XKB's minus 8.
        keyboard.key(now_ms(), code - 8, u32::from(pressed));
        let bit = key.modifier_bit();
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
        let code = evdev(button);
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
        // One frame a notch, 15 units each, as libinput reports a wheel turned slowly: a
        // toolkit turns a frame's discrete steps into one scroll event however many they are
        // (GTK 3 does), so one frame for every click would scroll an app that reads only those
        // events once.
        for _ in 0..clicks.max(0) {
            pointer.axis_source(wl_pointer::AxisSource::Wheel);
            pointer.axis_discrete(now_ms(), axis, f64::from(sign) * 15.0, sign);
            pointer.frame();
        }
        self.conn
            .flush()
            .map_err(|e| failed("the compositor went away", e))
    }
}

/// The wlr devices of one connection, on the displays of one action.
struct Wlr<'a> {
    wl: &'a mut Wl,
    displays: &'a [Display],
}

impl Device for Wlr<'_> {
    fn move_to(&mut self, at: [i64; 2]) -> Result<(), DesktopError> {
        self.wl.move_to(self.displays, at)
    }

    fn button(&mut self, button: Button, pressed: bool) -> Result<(), DesktopError> {
        self.wl.button(self.displays, button, pressed)
    }

    fn key(&mut self, chord: &[Key], key: Key, pressed: bool) -> Result<(), DesktopError> {
        self.wl.key(&chars_of(chord), key, pressed)
    }

    fn type_text(&mut self, text: &str) -> Result<(), DesktopError> {
        self.wl.type_text(text)
    }

    fn scroll(&mut self, direction: ScrollDirection, clicks: i32) -> Result<(), DesktopError> {
        self.wl.scroll(self.displays, direction, clicks)
    }

    fn settle(&mut self) -> Result<(), DesktopError> {
        self.wl.roundtrip()
    }

    // The clipboard is served by this very thread, so it is used here, not through a job,
    // and a pause answers the target's read of a paste instead of sleeping through it.
    fn pause(&mut self, duration: Duration) {
        let _ = self.wl.serve_for(duration);
    }

    fn clipboard_text(&mut self) -> Option<String> {
        super::clipboard::get(self.wl, u64::MAX).ok()
    }

    fn set_clipboard(&mut self, text: &str) -> Result<(), DesktopError> {
        super::clipboard::set(self.wl, text)
    }
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

/// Whether this compositor offers the wlr virtual pointer and keyboard; where it does not
/// (GNOME, KDE), `desktop::input` sends input through the desktop portal instead.
///
/// # Errors
/// [`DesktopError::Failed`] when the compositor cannot be reached.
pub fn offered() -> Result<bool, DesktopError> {
    run(|wl| Ok(wl.offered().input()))
}

/// Performs `action`, whose points the caller has checked against `displays`, through the
/// wlr protocols; `paste` says whether the clipboard is enabled for `type` with `paste`.
///
/// # Errors
/// [`DesktopError::NotSupported`] without them, [`DesktopError::Failed`] when the compositor
/// goes away.
pub fn perform(action: &Action, displays: &[Display], paste: bool) -> Result<(), DesktopError> {
    if let Action::Wait { duration } = action {
        sleep((*duration).min(MAX_WAIT));
        return Ok(());
    }
    let (job_action, job_displays) = (action.clone(), displays.to_vec());
    run(move |wl| {
        if !wl.offered().input() {
            return Err(DesktopError::unsupported(
                "input",
                "this Wayland compositor has no virtual pointer or keyboard protocol",
            ));
        }
        let mut device = Wlr {
            wl,
            displays: &job_displays,
        };
        let outcome = virtual_input::perform(&mut device, &job_action, paste);
        let _ = device.wl.roundtrip();
        outcome
    })
}

/// The last point this shim moved the pointer to through the wlr protocols, `None` before the
/// first move: Wayland tells no client where the pointer is.
///
/// # Errors
/// [`DesktopError::Failed`] when the compositor cannot be reached.
pub fn cursor() -> Result<Option<[i64; 2]>, DesktopError> {
    run(|wl| Ok(wl.state.cursor))
}

delegate_noop!(State: zwlr_virtual_pointer_v1::ZwlrVirtualPointerV1);
delegate_noop!(State: zwp_virtual_keyboard_v1::ZwpVirtualKeyboardV1);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desktop::virtual_input::named;

    #[test]
    fn the_keymap_has_the_named_keys_then_one_key_per_character() {
        let map = keymap(&['a', 'é', '✓', '🙂', '\n', 'v']);
        // The named keys and US characters where a US keyboard has them (Ctrl+V in GTK 3).
        assert!(map.contains("<LFSH> = 50;"));
        assert!(map.contains("<LCTL> = 37;"));
        assert!(map.contains("<BKSP> = 22;"));
        assert!(map.contains("<C0> = 38;"));
        assert!(map.contains("<C5> = 55;"));
        assert!(map.contains("key <C0> { [ 0x0061 ] };"));
        // The others at the first keycodes nothing keeps.
        assert!(map.contains("<C1> = 134;"), "{map}");
        assert!(map.contains("<C4> = 137;"), "{map}");
        assert!(map.contains("key <C1> { [ 0x00e9 ] };"));
        assert!(map.contains("key <C2> { [ 0x01002713 ] };"));
        assert!(map.contains("key <C3> { [ 0x0101f642 ] };"));
        assert!(map.contains("key <C4> { [ 0x0000ff0d ] };"));
        assert!(map.contains("key <C5> { [ 0x0076 ] };"));
        assert!(map.contains("modifier_map Control { <LCTL> };"));
    }

    #[test]
    fn every_key_has_its_own_keycode_and_a_full_keymap_uses_each_once() {
        let mut all: Vec<u32> = NAMED.iter().map(|(.., code)| *code).collect();
        all.extend(US_CHARS.iter().map(|(_, code)| *code));
        let others: Vec<char> = ('\u{100}'..).take(CHARS_PER_KEYMAP).collect();
        all.extend(char_codes(&others));
        let mut unique = all.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), all.len(), "a keycode used twice");
        // Every keycode from 9 to 255 (XKB's last) is used once.
        assert_eq!(unique, (9..=255).collect::<Vec<u32>>());
        // Named keys' names and codes are a US keyboard's.
        let named_at = |name: &str| NAMED.iter().find(|n| n.1 == name).unwrap().3;
        assert_eq!(
            ["Escape", "Return", "Tab", "Up", "F12"].map(named_at),
            [9, 36, 23, 111, 96]
        );
    }

    #[test]
    fn chords_use_the_named_keys_and_the_chords_characters() {
        let keys =
            virtual_input::keys(&crate::desktop::action::Chord::parse("ctrl+shift+T").unwrap())
                .unwrap();
        assert_eq!(
            keys,
            vec![named("Control_L"), named("Shift_L"), Key::Char('t')]
        );
        assert_eq!(chars_of(&keys), ['t']);
    }
}
