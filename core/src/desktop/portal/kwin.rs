//! The window list and focus on KDE Plasma through KWin's scripting interface on the session
//! bus, since KWin offers other programs no window list protocol.
//!
//! Each call writes a short script, has KWin load and start it (`org.kde.kwin.Scripting`), and
//! waits for the script's answer: the script calls a method on this process's own bus
//! connection (`callDBus`), which is read here from the connection's message stream. The
//! script is unloaded and its file removed before the call returns. Scripts are written here
//! whole; the only value placed in one is the connection's bus name or an id KWin gave, each
//! checked first and written as a JSON string.
//!
//! KWin names a window by a UUID (`internalId`); each gets a number of its own here for as
//! long as this process runs, never re-used, so an id minted for a closed window stays stale.
//! Geometry is KWin's logical layout, which is the pointer's space on KDE.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt as _;
use serde::Deserialize;

use super::{ask, call_bounded, on_own_thread};
use crate::desktop::{DesktopError, NativeWindow, Rect};
use crate::machine::own_files;

/// KWin's bus name.
pub const KWIN: &str = "org.kde.KWin";
const SCRIPTING_PATH: &str = "/Scripting";
const SCRIPTING: &str = "org.kde.kwin.Scripting";
/// Where and under what name the scripts answer on this process's connection.
const REPLY_PATH: &str = "/org/autogpt/shim/KWinScript";
const REPLY_INTERFACE: &str = "org.autogpt.shim.KWinScript";
const REPLY_METHOD: &str = "Answer";
/// How long a script may take to answer: KWin runs it on its main thread at once.
const ANSWER_DEADLINE: Duration = Duration::from_secs(5);

/// What every script starts with: KWin's windows (KWin 6 names the list differently from KWin
/// 5; the script takes whichever this KWin has), and which of them are listed: normal windows
/// that show in the task bar, not the desktop, panels, pop-ups or layer-shell surfaces (the
/// guidance client's outline is one, of the same process as its window).
const PRELUDE: &str = r"
var all = workspace.windowList ? workspace.windowList() : workspace.clientList();
function listed(w) { return w.normalWindow && !w.skipTaskbar; }
";

/// Every listed window, in KWin's stacking order, topmost first. A window's place is its client area,
/// without KWin's title bar and borders, as on X11 and sway: KWin 6 names it `clientGeometry`;
/// KWin 5 has only the surface's `bufferGeometry`, the same for a window KWin decorates (GTK 3
/// and Qt ask it to), shadows included for one that draws its own frame.
const LIST: &str = r"
var active = workspace.activeWindow !== undefined ? workspace.activeWindow : workspace.activeClient;
var out = [];
for (var i = all.length - 1; i >= 0; i--) {
  var w = all[i];
  if (!listed(w)) continue;
  var g = w.clientGeometry || w.bufferGeometry;
  out.push({id: String(w.internalId), pid: w.pid, app: String(w.resourceClass),
            title: String(w.caption), x: g.x, y: g.y, width: g.width, height: g.height,
            minimized: !!w.minimized, fullScreen: !!w.fullScreen, active: w === active});
}
answer(JSON.stringify(out));
";

/// Activates the window whose id is `target`, answering whether it was there.
const FOCUS: &str = r#"
var found = "";
for (var i = 0; i < all.length; i++) {
  var w = all[i];
  if (!listed(w) || String(w.internalId) !== target) continue;
  if (w.minimized) w.minimized = false;
  if (workspace.activeWindow !== undefined) workspace.activeWindow = w; else workspace.activeClient = w;
  found = "yes";
}
answer(found);
"#;

/// The frame (title bar and borders included) of the normal window of process `pid`, and the
/// area of the output it is on; an empty answer when it has none.
const FRAME: &str = r#"
var found = "";
for (var i = 0; i < all.length; i++) {
  var w = all[i];
  if (!listed(w) || String(w.pid) !== pid) continue;
  var g = w.frameGeometry;
  var a = workspace.clientArea(typeof KWin !== "undefined" ? KWin.FullScreenArea : 4, w);
  found = JSON.stringify({frame: {x: g.x, y: g.y, width: g.width, height: g.height},
                          output: {x: a.x, y: a.y, width: a.width, height: a.height}});
}
answer(found);
"#;

/// Moves the frame of the normal window of process `pid` to (`x`, `y`), keeping its size.
const MOVE: &str = r#"
var found = "";
for (var i = 0; i < all.length; i++) {
  var w = all[i];
  if (!listed(w) || String(w.pid) !== pid) continue;
  var g = w.frameGeometry;
  w.frameGeometry = {x: Number(x), y: Number(y), width: g.width, height: g.height};
  found = "yes";
}
answer(found);
"#;

/// A rectangle as the scripts describe one.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
struct Box4 {
    x: f64,
    y: f64,
    width: f64,
    height: f64,
}

impl From<Box4> for Rect {
    fn from(b: Box4) -> Self {
        // KWin's geometry is in whole logical pixels, sent as JSON numbers.
        let whole = |v: f64| v.round() as i64;
        Self {
            x: whole(b.x),
            y: whole(b.y),
            width: u64::try_from(whole(b.width)).unwrap_or(0),
            height: u64::try_from(whole(b.height)).unwrap_or(0),
        }
    }
}

/// What the frame script answers.
#[derive(Debug, Deserialize)]
struct Framed {
    frame: Box4,
    output: Box4,
}

/// One window as the list script describes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Described {
    id: String,
    pid: Option<i64>,
    app: String,
    title: String,
    x: f64,
    y: f64,
    width: f64,
    height: f64,
    minimized: bool,
    full_screen: bool,
    active: bool,
}

/// This process's number for each KWin window id it has listed.
static NUMBERS: Mutex<Numbers> = Mutex::new(Numbers {
    by_id: None,
    next: 0,
});

struct Numbers {
    by_id: Option<HashMap<String, u32>>,
    next: u32,
}

impl Numbers {
    fn of(&mut self, id: &str) -> u32 {
        let next = &mut self.next;
        *self
            .by_id
            .get_or_insert_with(HashMap::new)
            .entry(id.to_owned())
            .or_insert_with(|| {
                *next = next.wrapping_add(1);
                *next
            })
    }

    fn id_of(&self, number: u32) -> Option<String> {
        self.by_id
            .as_ref()?
            .iter()
            .find(|(_, n)| **n == number)
            .map(|(id, _)| id.clone())
    }
}

/// Whether KWin is on this process's session bus (where the window list protocol is
/// missing, it lists windows instead).
pub async fn offered(bus: &zbus::Connection) -> bool {
    super::screenshot::has_owner(bus, KWIN).await
}

/// Whether KWin is on this process's session bus.
#[must_use]
pub fn present() -> bool {
    on_own_thread(|| ask(|bus| async move { Some(offered(&bus).await) }).unwrap_or(false))
}

/// Every normal window KWin has, topmost first.
///
/// # Errors
/// [`DesktopError::NotSupported`] (`window.list`) without a session bus or KWin on it, and
/// [`DesktopError::Failed`] when KWin does not run the script or it does not answer.
pub fn all() -> Result<Vec<NativeWindow>, DesktopError> {
    let answer = run_script(LIST, &[], "window.list")?;
    let described: Vec<Described> = serde_json::from_str(&answer)
        .map_err(|e| DesktopError::Failed(format!("KWin's window list was not understood: {e}")))?;
    let mut numbers = NUMBERS.lock().unwrap_or_else(PoisonError::into_inner);
    let mut windows: Vec<NativeWindow> = described
        .into_iter()
        .map(|w| native(&w, numbers.of(&w.id)))
        .collect();
    windows.sort_by_key(|w| !w.focused);
    Ok(windows)
}

/// Activates (raises and focuses) the window numbered `number`, un-minimising it first.
///
/// # Errors
/// [`DesktopError::Failed`] when it closed or KWin does not answer.
pub fn focus(number: u32) -> Result<(), DesktopError> {
    let id = NUMBERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .id_of(number)
        .ok_or_else(|| DesktopError::Failed("the window closed".to_owned()))?;
    match run_script(FOCUS, &[("target", &id)], "window.focus")?.as_str() {
        "yes" => Ok(()),
        _ => Err(DesktopError::Failed("the window closed".to_owned())),
    }
}

/// The frame of process `pid`'s window (KWin's title bar and borders included) and the area
/// of its output, in KWin's layout; `None` when it has no normal window.
///
/// # Errors
/// [`DesktopError::NotSupported`] without KWin on the session bus, and
/// [`DesktopError::Failed`] when KWin does not answer.
pub fn frame_of(pid: u32) -> Result<Option<(Rect, Rect)>, DesktopError> {
    let answer = run_script(FRAME, &[("pid", &pid.to_string())], "window.move")?;
    if answer.is_empty() {
        return Ok(None);
    }
    let framed: Framed = serde_json::from_str(&answer)
        .map_err(|e| DesktopError::Failed(format!("KWin's answer was not understood: {e}")))?;
    Ok(Some((framed.frame.into(), framed.output.into())))
}

/// Moves the frame of process `pid`'s window to (`x`, `y`) in KWin's layout.
///
/// # Errors
/// [`DesktopError::Failed`] when it has no window or KWin does not answer.
pub fn move_frame(pid: u32, x: i64, y: i64) -> Result<(), DesktopError> {
    let (pid, x, y) = (pid.to_string(), x.to_string(), y.to_string());
    match run_script(MOVE, &[("pid", &pid), ("x", &x), ("y", &y)], "window.move")?.as_str() {
        "yes" => Ok(()),
        _ => Err(DesktopError::Failed("the window closed".to_owned())),
    }
}

fn native(w: &Described, number: u32) -> NativeWindow {
    NativeWindow {
        id: number,
        pid: w.pid.and_then(|p| u32::try_from(p).ok()).filter(|p| *p > 0),
        app_name: w.app.clone(),
        title: w.title.clone(),
        bounds: Box4 {
            x: w.x,
            y: w.y,
            width: w.width,
            height: w.height,
        }
        .into(),
        minimized: w.minimized,
        maximized: w.full_screen,
        focused: w.active,
        placed: true,
    }
}

/// The script `body` with `values` declared before it and `answer` defined to call back
/// `reply_to` on this connection.
fn script(body: &str, reply_to: &str, values: &[(&str, &str)]) -> String {
    let quoted = |v: &str| serde_json::to_string(v).unwrap_or_default();
    let mut text = format!(
        "function answer(text) {{ callDBus({}, {}, {}, {}, text); }}\n",
        quoted(reply_to),
        quoted(REPLY_PATH),
        quoted(REPLY_INTERFACE),
        quoted(REPLY_METHOD),
    );
    for (name, value) in values {
        text.push_str(&format!("var {name} = {};\n", quoted(value)));
    }
    text.push_str(PRELUDE);
    text.push_str(body);
    text
}

/// Whether `value` may go into a script: a bus name or a KWin id has only these characters.
fn plain(value: &str) -> bool {
    !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '-' | '_' | '{' | '}'))
}

/// Runs `body` in KWin and returns the text it answers.
fn run_script(body: &str, values: &[(&str, &str)], feature: &str) -> Result<String, DesktopError> {
    let body = body.to_owned();
    let values: Vec<(String, String)> = values
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    on_own_thread(|| ask(|bus| async move { Some(run_on(&bus, &body, &values, feature).await) }))
        .unwrap_or_else(|| {
            Err(DesktopError::unsupported(
                feature,
                "no session bus to reach KWin on (DBUS_SESSION_BUS_ADDRESS is unset)",
            ))
        })
}

async fn run_on(
    bus: &zbus::Connection,
    body: &str,
    values: &[(String, String)],
    feature: &str,
) -> Result<String, DesktopError> {
    // Only KWin's own connection may answer: another program on the bus could call the same
    // method with a list of its making.
    let kwin = call_bounded(
        bus,
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
        "GetNameOwner",
        &(KWIN,),
    )
    .await
    .and_then(|reply| reply.body().deserialize::<String>().ok())
    .ok_or_else(|| DesktopError::unsupported(feature, "KWin is not on the session bus"))?;
    let reply_to = bus
        .unique_name()
        .map(ToString::to_string)
        .unwrap_or_default();
    let values: Vec<(&str, &str)> = values
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    if !plain(&reply_to) || values.iter().any(|(_, v)| !plain(v)) {
        return Err(DesktopError::Failed(
            "a value for KWin's script has unexpected characters".to_owned(),
        ));
    }
    let file = ScriptFile::write(&script(body, &reply_to, &values))?;
    // Subscribed before the script runs, so its answer cannot come first.
    let mut messages = zbus::MessageStream::from(bus);
    let plugin = file.plugin.clone();
    let path = file.path.to_string_lossy().into_owned();
    let loaded = call_bounded(
        bus,
        KWIN,
        SCRIPTING_PATH,
        SCRIPTING,
        "loadScript",
        &(path, plugin.as_str()),
    )
    .await;
    let answered = if loaded
        .and_then(|reply| reply.body().deserialize::<i32>().ok())
        .is_some_and(|number| number >= 0)
    {
        // `start` runs every loaded script not yet running. Running this one by its object
        // path instead is not safe: KWin 5 numbers a script by how many are loaded, so with
        // another program's scripts loading and unloading two can get one number, and the
        // path then names the other.
        if call_bounded(bus, KWIN, SCRIPTING_PATH, SCRIPTING, "start", &())
            .await
            .is_some()
        {
            wait_answer(bus, &mut messages, &kwin).await
        } else {
            Err(DesktopError::Failed(
                "KWin did not run the script".to_owned(),
            ))
        }
    } else {
        Err(DesktopError::Failed(
            "KWin did not load the script".to_owned(),
        ))
    };
    let _ = call_bounded(
        bus,
        KWIN,
        SCRIPTING_PATH,
        SCRIPTING,
        "unloadScript",
        &(plugin.as_str(),),
    )
    .await;
    answered
}

/// The first answer a script sends this connection from KWin's, whose unique name is `kwin`.
async fn wait_answer(
    bus: &zbus::Connection,
    messages: &mut zbus::MessageStream,
    kwin: &str,
) -> Result<String, DesktopError> {
    let waiting = async {
        while let Some(Ok(message)) = messages.next().await {
            let header = message.header();
            if header.message_type() != zbus::message::Type::MethodCall
                || header.sender().is_none_or(|s| s.as_str() != kwin)
                || header.path().is_none_or(|p| p.as_str() != REPLY_PATH)
                || header.member().is_none_or(|m| m.as_str() != REPLY_METHOD)
            {
                continue;
            }
            let text = message.body().deserialize::<String>().ok();
            let _ = bus.reply(&header, &()).await;
            return text;
        }
        None
    };
    match tokio::time::timeout(ANSWER_DEADLINE, waiting).await {
        Ok(Some(text)) => Ok(text),
        Ok(None) => Err(DesktopError::Failed("the session bus closed".to_owned())),
        Err(_) => Err(DesktopError::Failed(format!(
            "KWin's script did not answer within {} s",
            ANSWER_DEADLINE.as_secs()
        ))),
    }
}

/// A script's file, removed when dropped; KWin reads it when the script is loaded.
struct ScriptFile {
    path: PathBuf,
    plugin: String,
}

impl ScriptFile {
    fn write(text: &str) -> Result<Self, DesktopError> {
        let plugin = format!("autogpt-shim-{}", uuid::Uuid::new_v4().simple());
        let path = std::env::temp_dir().join(format!("{plugin}.js"));
        own_files::write_atomic_unsynced(&path, text.as_bytes(), 0o600).map_err(|e| {
            DesktopError::Failed(format!("the script for KWin could not be written: {e}"))
        })?;
        Ok(Self { path, plugin })
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        let _ = own_files::remove(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_declares_its_values_as_json_strings_before_its_body() {
        let text = script("answer(target);", ":1.42", &[("target", "{abc-1}")]);
        assert_eq!(
            text,
            format!(
                "function answer(text) {{ callDBus(\":1.42\", \"/org/autogpt/shim/KWinScript\", \"org.autogpt.shim.KWinScript\", \"Answer\", text); }}\nvar target = \"{{abc-1}}\";\n{PRELUDE}answer(target);"
            )
        );
    }

    #[test]
    fn only_bus_names_and_kwin_ids_go_into_a_script() {
        assert!(plain(":1.42"));
        assert!(plain("{52d0cdad-84ab-4dd6-bbb4-9636fc060cf5}"));
        for bad in ["", "\"", "a\"); evil(\"", "x\ny", "a b", "’"] {
            assert!(!plain(bad), "{bad:?}");
        }
    }

    #[test]
    fn each_kwin_window_keeps_one_number_and_numbers_are_never_reused() {
        let mut numbers = Numbers {
            by_id: None,
            next: 0,
        };
        let a = numbers.of("{a}");
        let b = numbers.of("{b}");
        assert_ne!(a, b);
        assert_eq!(numbers.of("{a}"), a);
        assert_eq!(numbers.id_of(b).as_deref(), Some("{b}"));
        assert_eq!(numbers.id_of(b + 100), None);
    }

    #[test]
    fn a_described_window_becomes_a_native_window() {
        let listed: Vec<Described> = serde_json::from_str(
            r#"[{"id":"{a}","pid":17385,"app":"org.freedesktop.weston.wayland-terminal","title":"Wayland Terminal ✓","x":0,"y":10.4,"width":1280,"height":790,"minimized":false,"fullScreen":true,"active":true}]"#,
        )
        .unwrap();
        let window = native(&listed[0], 7);
        assert_eq!(window.id, 7);
        assert_eq!(window.pid, Some(17385));
        assert_eq!(window.title, "Wayland Terminal ✓");
        assert_eq!(
            window.bounds,
            Rect {
                x: 0,
                y: 10,
                width: 1280,
                height: 790
            }
        );
        assert!(window.focused && window.maximized && !window.minimized);
    }
}
