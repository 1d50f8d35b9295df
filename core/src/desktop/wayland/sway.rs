//! Window geometry and owning processes from sway's IPC (the i3-ipc protocol on the Unix
//! socket `SWAYSOCK` names, `GET_TREE`), which wlr-foreign-toplevel does not give; and moving a
//! floating window (`RUN_COMMAND`), which no Wayland protocol lets a client do to its own.
//!
//! Other wlroots compositors have no `SWAYSOCK`: there, [`windows`] says so in words and a
//! window's bounds stay the outputs it is on.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

/// The i3-ipc magic string that starts every message.
const MAGIC: &[u8; 6] = b"i3-ipc";
/// The `RUN_COMMAND` message type.
const RUN_COMMAND: u32 = 0;
/// The `GET_TREE` message type.
const GET_TREE: u32 = 4;
/// How long sway may take to answer.
const IPC_DEADLINE: Duration = Duration::from_secs(3);
/// The largest reply read (a tree of thousands of windows is far below this).
const MAX_REPLY: u32 = 64 << 20;

/// A rectangle in sway's logical layout pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayoutRect {
    /// Left edge.
    pub x: i64,
    /// Top edge.
    pub y: i64,
    /// Width.
    pub width: i64,
    /// Height.
    pub height: i64,
}

/// One window (a view) in sway's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwayWindow {
    /// sway's container id.
    pub con_id: i64,
    /// The Wayland app id, or the X11 class of an Xwayland window.
    pub app_id: String,
    /// The title.
    pub title: String,
    /// The client's process.
    pub pid: Option<u32>,
    /// The client's content (its surface's window geometry, without sway's border and title
    /// bar), in logical layout pixels.
    pub content: LayoutRect,
    /// Whether it is on a visible workspace and not hidden behind a tab or stack.
    pub visible: bool,
    /// Whether sway floats it (a tiled window never overlaps another).
    pub floating: bool,
    /// Its container with sway's border and title bar, in logical layout pixels: what
    /// [`move_floating`] places.
    pub frame: LayoutRect,
    /// The output it is on, in logical layout pixels.
    pub output: LayoutRect,
}

/// The socket `SWAYSOCK` names, when set.
#[must_use]
pub fn socket() -> Option<PathBuf> {
    std::env::var_os("SWAYSOCK")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
}

/// Every window in sway's tree, in container-id (creation) order.
///
/// # Errors
/// Why there is no geometry, in one sentence: no `SWAYSOCK` (not sway), or sway did not answer.
pub fn windows() -> Result<Vec<SwayWindow>, String> {
    let path = socket().ok_or_else(|| {
        "this compositor is not sway (no SWAYSOCK), and the other wlroots protocols give no window geometry".to_owned()
    })?;
    let tree = request(&path, GET_TREE, b"").map_err(|e| {
        format!("sway's IPC socket (SWAYSOCK) did not answer ({e}); check that sway is running")
    })?;
    let tree: Value = serde_json::from_slice(&tree)
        .map_err(|e| format!("sway's window tree could not be read ({e})"))?;
    let mut found = Vec::new();
    walk(&tree, None, &mut found);
    found.sort_by_key(|w| w.con_id);
    Ok(found)
}

/// Moves the floating window `con_id` so that its frame's corner is at (`x`, `y`) in the
/// layout.
///
/// # Errors
/// Why not, in one sentence: not sway, sway did not answer, or it refused the move.
pub fn move_floating(con_id: i64, x: i64, y: i64) -> Result<(), String> {
    let path = socket().ok_or_else(|| "this compositor is not sway (no SWAYSOCK)".to_owned())?;
    let command = format!("[con_id={con_id}] move absolute position {x} {y}");
    let reply = request(&path, RUN_COMMAND, command.as_bytes()).map_err(|e| {
        format!("sway's IPC socket (SWAYSOCK) did not answer ({e}); check that sway is running")
    })?;
    let outcomes: Value = serde_json::from_slice(&reply)
        .map_err(|e| format!("sway's answer could not be read ({e})"))?;
    refusal(&outcomes).map_or(Ok(()), Err)
}

/// The first refusal in sway's answer to a command (one outcome a command), if any.
fn refusal(outcomes: &Value) -> Option<String> {
    let Some(all) = outcomes.as_array() else {
        return Some("sway's answer is not a list of outcomes".to_owned());
    };
    all.iter()
        .find(|o| o["success"] != true)
        .map(|o| match o["error"].as_str() {
            Some(error) => format!("sway refused to move the window ({error})"),
            None => "sway refused to move the window".to_owned(),
        })
}

/// Sends one message of `kind` with `payload` and reads its reply.
fn request(path: &PathBuf, kind: u32, payload: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(IPC_DEADLINE))?;
    stream.set_write_timeout(Some(IPC_DEADLINE))?;
    let length = u32::try_from(payload.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "payload too large"))?;
    let mut message = Vec::with_capacity(14 + payload.len());
    message.extend_from_slice(MAGIC);
    message.extend_from_slice(&length.to_ne_bytes());
    message.extend_from_slice(&kind.to_ne_bytes());
    message.extend_from_slice(payload);
    stream.write_all(&message)?;
    let mut header = [0_u8; 14];
    stream.read_exact(&mut header)?;
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    if &header[..6] != MAGIC {
        return Err(invalid("the reply is not i3-ipc"));
    }
    let length = u32::from_ne_bytes([header[6], header[7], header[8], header[9]]);
    let reply_kind = u32::from_ne_bytes([header[10], header[11], header[12], header[13]]);
    if reply_kind != kind {
        return Err(invalid("the reply answers another message"));
    }
    if length > MAX_REPLY {
        return Err(invalid("the reply is too large"));
    }
    let mut payload = vec![0_u8; usize::try_from(length).unwrap_or(0)];
    stream.read_exact(&mut payload)?;
    Ok(payload)
}

/// Collects the views under `node`, on `output` (the rectangle of the output above it).
fn walk(node: &Value, output: Option<LayoutRect>, found: &mut Vec<SwayWindow>) {
    let output = if node["type"] == "output" {
        Some(rect(&node["rect"]))
    } else {
        output
    };
    if let Some(window) = view(node, output) {
        found.push(window);
    }
    for key in ["nodes", "floating_nodes"] {
        for child in node[key].as_array().into_iter().flatten() {
            walk(child, output, found);
        }
    }
}

/// A rectangle of sway's tree.
fn rect(value: &Value) -> LayoutRect {
    let number = |k: &str| value[k].as_i64().unwrap_or(0);
    LayoutRect {
        x: number("x"),
        y: number("y"),
        width: number("width"),
        height: number("height"),
    }
}

/// The window `node` is, when it is a view (a container with a client), on `output`.
fn view(node: &Value, output: Option<LayoutRect>) -> Option<SwayWindow> {
    let kind = node["type"].as_str()?;
    if kind != "con" && kind != "floating_con" {
        return None;
    }
    let app_id = node["app_id"]
        .as_str()
        .or_else(|| node["window_properties"]["class"].as_str());
    // A split container has no app id, no X11 window and no pid.
    if app_id.is_none() && node["pid"].as_u64().is_none() {
        return None;
    }
    let frame = rect(&node["rect"]);
    let window_rect = rect(&node["window_rect"]);
    Some(SwayWindow {
        con_id: node["id"].as_i64().unwrap_or(0),
        app_id: app_id.unwrap_or_default().to_owned(),
        title: node["name"].as_str().unwrap_or_default().to_owned(),
        pid: node["pid"].as_u64().and_then(|p| u32::try_from(p).ok()),
        content: LayoutRect {
            x: frame.x + window_rect.x,
            y: frame.y + window_rect.y,
            width: window_rect.width,
            height: window_rect.height,
        },
        // sway's own answer: on a shown workspace, not behind a tab, not in the scratchpad.
        visible: node["visible"].as_bool().unwrap_or(false),
        floating: kind == "floating_con",
        frame,
        // A view in the scratchpad is on no output; a 0×0 one leaves it nowhere to go.
        output: output.unwrap_or(LayoutRect {
            x: 0,
            y: 0,
            width: 0,
            height: 0,
        }),
    })
}

/// How a foreign toplevel matched sway's windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matched<'a> {
    /// Exactly one window has its app id and title.
    One(&'a SwayWindow),
    /// None has (it closed or was retitled between the two reads).
    None,
    /// Several have: neither protocol tells them apart, so none is chosen.
    Ambiguous,
}

/// The sway window of the toplevel with `app_id` and `title`.
///
/// The toplevel protocol names no process and no id sway knows, so the app id and title are
/// all there is to match on: two windows that share both are left unmatched rather than guessed.
#[must_use]
pub fn matching<'a>(windows: &'a [SwayWindow], app_id: &str, title: &str) -> Matched<'a> {
    let mut same = windows
        .iter()
        .filter(|w| w.app_id == app_id && w.title == title);
    match (same.next(), same.next()) {
        (Some(one), None) => Matched::One(one),
        (None, _) => Matched::None,
        (Some(_), Some(_)) => Matched::Ambiguous,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> Value {
        serde_json::json!({
            "id": 1, "type": "root", "name": "root", "nodes": [
                {"id": 2, "type": "output", "name": "HEADLESS-1",
                 "rect": {"x": 0, "y": 0, "width": 1280, "height": 800}, "nodes": [
                    {"id": 3, "type": "workspace", "name": "1", "visible": true, "nodes": [
                        {"id": 4, "type": "con", "name": null, "nodes": [
                            {"id": 7, "type": "con", "name": "cat", "app_id": "foot", "pid": 70,
                             "visible": true,
                             "rect": {"x": 0, "y": 0, "width": 640, "height": 400},
                             "window_rect": {"x": 2, "y": 2, "width": 636, "height": 396},
                             "nodes": []}
                        ]}
                    ], "floating_nodes": [
                        {"id": 9, "type": "floating_con", "name": "x", "app_id": null,
                         "window_properties": {"class": "XTerm"}, "pid": 90, "visible": true,
                         "rect": {"x": 100, "y": 50, "width": 200, "height": 100},
                         "window_rect": {"x": 0, "y": 0, "width": 200, "height": 100},
                         "nodes": []}
                    ]},
                    {"id": 5, "type": "workspace", "name": "2", "visible": false, "nodes": [
                        {"id": 8, "type": "con", "name": "cat", "app_id": "foot", "pid": 80,
                         "visible": false,
                         "rect": {"x": 0, "y": 0, "width": 640, "height": 400},
                         "window_rect": {"x": 0, "y": 0, "width": 640, "height": 400},
                         "nodes": []}
                    ]}
                ]}
            ]
        })
    }

    #[test]
    fn views_are_found_with_their_content_and_visibility() {
        let mut found = Vec::new();
        walk(&tree(), None, &mut found);
        found.sort_by_key(|w| w.con_id);
        let ids: Vec<i64> = found.iter().map(|w| w.con_id).collect();
        assert_eq!(ids, [7, 8, 9], "the split container 4 is no window");
        assert_eq!(
            found[0].content,
            LayoutRect {
                x: 2,
                y: 2,
                width: 636,
                height: 396
            }
        );
        assert_eq!(found[0].pid, Some(70));
        assert!(found[0].visible);
        assert!(!found[1].visible, "workspace 2 is not shown");
        assert_eq!(found[2].app_id, "XTerm", "an Xwayland window's class");
        assert!(found[2].floating && !found[0].floating);
        assert_eq!(
            found[2].frame,
            LayoutRect {
                x: 100,
                y: 50,
                width: 200,
                height: 100
            }
        );
        let output = LayoutRect {
            x: 0,
            y: 0,
            width: 1280,
            height: 800,
        };
        assert!(found.iter().all(|w| w.output == output), "{found:?}");
        assert_eq!(
            matching(&found, "XTerm", "x"),
            Matched::One(&found[2]),
            "a unique app id and title match"
        );
        assert_eq!(matching(&found, "foot", "cat"), Matched::Ambiguous);
        assert_eq!(matching(&found, "foot", "gone"), Matched::None);
    }

    #[test]
    fn a_refused_command_is_said_in_a_sentence() {
        assert_eq!(refusal(&serde_json::json!([{"success": true}])), None);
        assert_eq!(
            refusal(&serde_json::json!([{"success": false, "parse_error": false,
                "error": "Only floating containers can be moved to an absolute position"}])),
            Some("sway refused to move the window (Only floating containers can be moved to an absolute position)".to_owned())
        );
        assert_eq!(
            refusal(&serde_json::json!({"success": true})),
            Some("sway's answer is not a list of outcomes".to_owned())
        );
    }
}
