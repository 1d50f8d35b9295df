//! Window geometry and owning processes from sway's IPC (the i3-ipc protocol on the Unix
//! socket `SWAYSOCK` names, `GET_TREE`), which wlr-foreign-toplevel does not give.
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
    let tree = request(&path, GET_TREE).map_err(|e| {
        format!("sway's IPC socket (SWAYSOCK) did not answer ({e}); check that sway is running")
    })?;
    let tree: Value = serde_json::from_slice(&tree)
        .map_err(|e| format!("sway's window tree could not be read ({e})"))?;
    let mut found = Vec::new();
    walk(&tree, &mut found);
    found.sort_by_key(|w| w.con_id);
    Ok(found)
}

/// Sends one empty-payload message of `kind` and reads its reply.
fn request(path: &PathBuf, kind: u32) -> std::io::Result<Vec<u8>> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(IPC_DEADLINE))?;
    stream.set_write_timeout(Some(IPC_DEADLINE))?;
    let mut message = Vec::with_capacity(14);
    message.extend_from_slice(MAGIC);
    message.extend_from_slice(&0_u32.to_ne_bytes());
    message.extend_from_slice(&kind.to_ne_bytes());
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

/// Collects the views under `node`.
fn walk(node: &Value, found: &mut Vec<SwayWindow>) {
    if let Some(window) = view(node) {
        found.push(window);
    }
    for key in ["nodes", "floating_nodes"] {
        for child in node[key].as_array().into_iter().flatten() {
            walk(child, found);
        }
    }
}

/// The window `node` is, when it is a view (a container with a client).
fn view(node: &Value) -> Option<SwayWindow> {
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
    let number = |v: &Value| v.as_i64().unwrap_or(0);
    let rect = &node["rect"];
    let window_rect = &node["window_rect"];
    Some(SwayWindow {
        con_id: number(&node["id"]),
        app_id: app_id.unwrap_or_default().to_owned(),
        title: node["name"].as_str().unwrap_or_default().to_owned(),
        pid: node["pid"].as_u64().and_then(|p| u32::try_from(p).ok()),
        content: LayoutRect {
            x: number(&rect["x"]) + number(&window_rect["x"]),
            y: number(&rect["y"]) + number(&window_rect["y"]),
            width: number(&window_rect["width"]),
            height: number(&window_rect["height"]),
        },
        // sway's own answer: on a shown workspace, not behind a tab, not in the scratchpad.
        visible: node["visible"].as_bool().unwrap_or(false),
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
                {"id": 2, "type": "output", "name": "HEADLESS-1", "nodes": [
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
        walk(&tree(), &mut found);
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
        assert_eq!(
            matching(&found, "XTerm", "x"),
            Matched::One(&found[2]),
            "a unique app id and title match"
        );
        assert_eq!(matching(&found, "foot", "cat"), Matched::Ambiguous);
        assert_eq!(matching(&found, "foot", "gone"), Matched::None);
    }
}
