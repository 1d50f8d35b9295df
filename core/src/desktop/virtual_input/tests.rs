//! The steps each action becomes, recorded by a device that only writes them down.

use super::*;
use std::time::Duration;

/// Records every step.
#[derive(Default)]
struct Recorder {
    steps: Vec<String>,
    fail_button: bool,
    /// A clipboard's text, for a backend that has one.
    clipboard: Option<String>,
}

impl Device for Recorder {
    fn move_to(&mut self, at: [i64; 2]) -> Result<(), DesktopError> {
        self.steps.push(format!("move {at:?}"));
        Ok(())
    }
    fn button(&mut self, button: Button, pressed: bool) -> Result<(), DesktopError> {
        self.steps.push(format!("button {button:?} {pressed}"));
        if self.fail_button && pressed {
            return Err(DesktopError::Failed("stuck".to_owned()));
        }
        Ok(())
    }
    fn key(&mut self, _: &[Key], key: Key, pressed: bool) -> Result<(), DesktopError> {
        self.steps
            .push(format!("key {:#x} {pressed}", key.keysym()));
        Ok(())
    }
    fn type_text(&mut self, text: &str) -> Result<(), DesktopError> {
        self.steps.push(format!("type {text}"));
        Ok(())
    }
    fn scroll(&mut self, direction: ScrollDirection, clicks: i32) -> Result<(), DesktopError> {
        self.steps.push(format!("scroll {direction:?} {clicks}"));
        Ok(())
    }
    fn settle(&mut self) -> Result<(), DesktopError> {
        self.steps.push("settle".to_owned());
        Ok(())
    }
    fn pause(&mut self, duration: Duration) {
        self.steps.push(format!("pause {duration:?}"));
    }
    fn clipboard_text(&mut self) -> Option<String> {
        self.clipboard.clone()
    }
    fn set_clipboard(&mut self, text: &str) -> Result<(), DesktopError> {
        let Some(clipboard) = self.clipboard.as_mut() else {
            return Err(DesktopError::Failed("no clipboard".to_owned()));
        };
        text.clone_into(clipboard);
        self.steps.push(format!("clipboard {text}"));
        Ok(())
    }
}

#[test]
fn a_modified_double_click_holds_the_modifier_around_both_clicks() {
    let mut device = Recorder::default();
    let click = Action::Click {
        at: [5, 6],
        button: Button::Right,
        count: 2,
        modifiers: vec![Modifier::Ctrl, Modifier::Shift],
    };
    perform(&mut device, &click, false).unwrap();
    assert_eq!(
        device.steps,
        [
            "move [5, 6]",
            "key 0xffe3 true",
            "key 0xffe1 true",
            "button Right true",
            "button Right false",
            "button Right true",
            "button Right false",
            "key 0xffe1 false",
            "key 0xffe3 false",
        ]
    );
}

#[test]
fn chords_tap_the_last_key_and_a_failed_drag_still_releases() {
    let mut device = Recorder::default();
    let chord = Chord::parse("ctrl+shift+T").unwrap();
    perform(&mut device, &Action::Key { chord }, false).unwrap();
    assert_eq!(
        device.steps,
        [
            "key 0xffe3 true",
            "key 0xffe1 true",
            "key 0x74 true",
            "key 0x74 false",
            "key 0xffe1 false",
            "key 0xffe3 false",
        ]
    );
    let mut device = Recorder {
        fail_button: true,
        ..Recorder::default()
    };
    let drag = Action::Drag {
        path: vec![[1, 1], [2, 2]],
        button: Button::Left,
    };
    assert!(perform(&mut device, &drag, false).is_err());
    assert_eq!(
        device.steps,
        ["move [1, 1]", "button Left true"],
        "the press itself failed, so nothing is held"
    );
    let mut device = Recorder::default();
    let hold = Action::HoldKey {
        chord: Chord::parse("alt+F4").unwrap(),
        duration: Duration::from_millis(1),
    };
    perform(&mut device, &hold, false).unwrap();
    assert_eq!(
        device.steps,
        [
            "key 0xffe9 true",
            "key 0xffc1 true",
            "settle",
            "key 0xffc1 false",
            "key 0xffe9 false",
        ]
    );
}

#[test]
fn a_paste_without_a_clipboard_types_and_scrolls_keep_their_modifiers() {
    let mut device = Recorder::default();
    let typed = Action::Type {
        text: "hi".to_owned(),
        paste: true,
        preserve_clipboard: true,
    };
    perform(&mut device, &typed, true).unwrap();
    assert_eq!(device.steps, ["type hi"]);
    let mut device = Recorder::default();
    let scroll = Action::Scroll {
        at: None,
        direction: ScrollDirection::Left,
        clicks: 2,
        modifiers: vec![Modifier::Shift],
    };
    perform(&mut device, &scroll, false).unwrap();
    assert_eq!(
        device.steps,
        ["key 0xffe1 true", "scroll Left 2", "key 0xffe1 false"]
    );
}

#[test]
fn a_paste_sets_the_text_sends_the_chord_and_restores_after_a_pause() {
    let mut device = Recorder {
        clipboard: Some("kept".to_owned()),
        ..Recorder::default()
    };
    let typed = Action::Type {
        text: "a ✓".to_owned(),
        paste: true,
        preserve_clipboard: true,
    };
    perform(&mut device, &typed, true).unwrap();
    assert_eq!(
        device.steps,
        [
            "clipboard a ✓",
            "key 0xffe3 true",
            "key 0x76 true",
            "key 0x76 false",
            "key 0xffe3 false",
            "settle",
            // The backend's pause: a Wayland one answers the target's read meanwhile.
            "pause 150ms",
            "clipboard kept",
        ]
    );
    // Not asked to, or with paste not enabled, nothing touches the clipboard.
    for (wanted, enabled) in [(false, true), (true, false)] {
        let mut device = Recorder {
            clipboard: Some("kept".to_owned()),
            ..Recorder::default()
        };
        let typed = Action::Type {
            text: "a".to_owned(),
            paste: wanted,
            preserve_clipboard: true,
        };
        perform(&mut device, &typed, enabled).unwrap();
        assert_eq!(device.steps, ["type a"]);
    }
}

#[test]
fn characters_and_named_keys_have_their_keysyms() {
    assert_eq!(keysym('a'), 0x61);
    assert_eq!(keysym('A'), 0x41);
    assert_eq!(keysym(' '), 0x20);
    assert_eq!(keysym('é'), 0xe9);
    assert_eq!(keysym('\n'), 0xff0d);
    assert_eq!(keysym('\t'), 0xff09);
    assert_eq!(keysym('✓'), 0x0100_2713);
    assert_eq!(keysym('日'), 0x0100_65e5);
    assert_eq!(keysym('🙂'), 0x0101_f642);
    assert_eq!(char_keysyms('€'), [0x20ac, 0x0100_20ac]);
    assert_eq!(char_keysyms('a'), [0x61]);
    assert_eq!(char_keysyms('\n'), [0xff0d]);
    assert_eq!(keysym_names(0x61)[0], "a");
    assert_eq!(keysym_names(0xff55)[0], "Prior");
    assert_eq!(keysym_names(0x20ac)[0], "EuroSign");
    assert!(keysym_names(0x0100_2713).contains(&"U2713".to_owned()));
    assert_eq!(keysym_names(0x1008_ff14)[0], "XF86AudioPlay");
    assert_eq!(named("Return").keysym(), 0xff0d);
    assert_eq!(named("F12").keysym(), 0xffc9);
    assert_eq!(named("Control_L").modifier_bit(), 4);
    assert_eq!(named("Super_L").modifier_bit(), 64);
    assert_eq!(Key::Char('t').modifier_bit(), 0);
    assert_eq!(
        keys(&Chord::parse("alt+F4").unwrap()).unwrap()[1],
        named("F4")
    );
}
