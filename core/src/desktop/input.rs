//! Synthetic input through enigo: clicks with modifiers, pointer moves, presses, drags along a
//! path, typing (or pasting) text, key chords, held keys, scrolling and waiting. Every point is
//! checked against the displays before anything is sent, so a refused action sends nothing.

use std::thread::sleep;
use std::time::Duration;

use enigo::{Axis, Coordinate, Direction, Enigo, Keyboard, Mouse, Settings};

use super::DesktopError;
pub use super::action::{
    Action, Button, Chord, DEFAULT_SCROLL_CLICKS, MAX_DRAG_POINTS, MAX_HOLD, MAX_WAIT, Modifier,
    ScrollDirection, subsample,
};
use super::action::{DRAG_STEP, PASTE_SETTLE, TRIPLE_CLICK_GAP};

use super::clipboard::Clipboard;
use super::screen::{self, Display};

/// How long keycodes mapped for unusual characters stay mapped after the last key event.
const REMAP_SETTLE: Duration = Duration::from_millis(200);

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
    #[cfg(target_os = "linux")]
    if super::session::Session::detect() == super::session::Session::Wayland {
        return if super::wayland::input::offered()? {
            super::wayland::input::perform(action, displays, clipboard.is_some())
        } else {
            super::portal::perform(action, displays, clipboard.is_some())
        };
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
    #[cfg(target_os = "linux")]
    if super::session::Session::detect() == super::session::Session::Wayland {
        let moved = if super::wayland::input::offered()? {
            super::wayland::input::cursor()?
        } else {
            super::portal::cursor()
        };
        return moved.ok_or_else(|| {
            DesktopError::unsupported(
                "cursor.position",
                "Wayland tells no client where the pointer is; it is known once the shim has moved it",
            )
        });
    }
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
#[cfg(test)]
mod tests {
    use super::*;

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
