//! What a person types at the `try` platform: one line, one request (or a number from the
//! menu of ready requests), turned into the message the real platform would send.

use serde_json::{Value, json};

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// The data connection (a direct session, or a control-mode child).
    Data,
    /// The control connection (machine control mode).
    Control,
}

/// One typed line, understood.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Action {
    /// Send `kind` with `payload` over `target`.
    Request {
        /// The connection.
        target: Target,
        /// The message type.
        kind: String,
        /// Its payload.
        payload: Value,
    },
    /// List the folders of the last listing's entry `n` (1-based), or the roots (`None`).
    Folders(Option<usize>),
    /// Attach the last listing's entry `n` (1-based) and activate it as the session.
    Use(usize),
    /// Show the menu again.
    Help,
    /// Close the connections and stop.
    Quit,
    /// Nothing to do (a blank line).
    Nothing,
}

/// The ready requests, numbered as the menu shows them: the line typed for each.
pub(super) const READY: [(&str, &str); 5] = [
    (
        "write hello.txt Hello from the try platform",
        "FILE_WRITE: creates hello.txt in the allowed root",
    ),
    ("read hello.txt", "FILE_READ: reads it back"),
    ("list", "FILE_LIST of the allowed root"),
    (
        "run echo hello from $(hostname)",
        "EXECUTE_COMMAND (the connector needs `start --enable-shell`)",
    ),
    (
        "screenshot",
        "SCREENSHOT_REQUEST (needs `start --enable-computer-use` and a desktop); saved to a file",
    ),
];

/// The menu of a data connection.
pub(super) fn data_menu() -> String {
    let mut menu =
        String::from("Ready requests: type a number, or the line itself (edit it as you like):\n");
    for (n, (line, what)) in READY.iter().enumerate() {
        menu.push_str(&format!("  {}  {line:<46} {what}\n", n + 1));
    }
    menu.push_str(
        "Also: read PATH, write PATH TEXT, list PATH, stat PATH, delete PATH, run COMMAND, send TYPE {JSON}, help, quit",
    );
    menu
}

/// The menu of a control connection.
pub(super) const CONTROL_MENU: &str = "\
Machine control mode: the platform lets the person pick a folder per chat.
  folders      DIRECTORY_LIST_REQUEST: the folders you may pick from (numbered)
  folders N    the folders inside entry N of the last listing
  use N        ATTACH_SESSION and ACTIVATE_SESSION of entry N: the connector then opens a
               data connection jailed to that folder, and the ready requests work on it
Also: send TYPE {JSON} (to the control connection), help, quit";

/// Understands one typed line.
///
/// # Errors
/// What is wrong with the line, and what to type instead.
pub(super) fn parse(line: &str) -> Result<Action, String> {
    let line = line.trim();
    if let Ok(n) = line.parse::<usize>() {
        let (ready, _) = READY
            .get(n.wrapping_sub(1))
            .ok_or_else(|| format!("there is no ready request {n}: type 1 to {}", READY.len()))?;
        return parse(ready);
    }
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    let need = |what: &str| {
        if rest.is_empty() {
            Err(format!("{word} needs {what}; type help for the list"))
        } else {
            Ok(rest)
        }
    };
    let data = |kind: &str, payload: Value| Action::Request {
        target: Target::Data,
        kind: kind.to_owned(),
        payload,
    };
    Ok(match word {
        "" => Action::Nothing,
        "help" | "?" => Action::Help,
        "quit" | "exit" => Action::Quit,
        "read" => data("FILE_READ", json!({"path": need("a path")?})),
        "write" => {
            let (path, text) = rest
                .split_once(char::is_whitespace)
                .ok_or("write needs a path and the text to write, e.g. write notes/a.txt hello")?;
            data(
                "FILE_WRITE",
                json!({"path": path, "content": text.trim_start(), "create_parents": true}),
            )
        }
        "list" => data(
            "FILE_LIST",
            json!({"path": if rest.is_empty() { "." } else { rest }}),
        ),
        "stat" => data("FILE_STAT", json!({"path": need("a path")?})),
        "delete" => data("FILE_DELETE", json!({"path": need("a path")?})),
        "run" => data("EXECUTE_COMMAND", json!({"command": need("a command")?})),
        "screenshot" => data("SCREENSHOT_REQUEST", json!({"format": "png"})),
        "folders" => Action::Folders(if rest.is_empty() {
            None
        } else {
            Some(number(rest, "folders")?)
        }),
        "use" => Action::Use(number(need("the number of a folder")?, "use")?),
        "send" => {
            let (kind, payload) = rest
                .split_once(char::is_whitespace)
                .ok_or("send needs a message type and a JSON payload, e.g. send FILE_STAT {\"path\": \"hello.txt\"}")?;
            let payload: Value = serde_json::from_str(payload).map_err(|_| {
                "the payload is not JSON: write it as send FILE_STAT {\"path\": \"hello.txt\"}"
                    .to_owned()
            })?;
            let target = if is_control_type(kind) {
                Target::Control
            } else {
                Target::Data
            };
            Action::Request {
                target,
                kind: kind.to_owned(),
                payload,
            }
        }
        _ => return Err(format!("unknown command {word}; type help for the list")),
    })
}

fn number(text: &str, word: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            format!("{word} takes the number of an entry of the last listing, e.g. {word} 1")
        })
}

/// The message types the control connection serves (PROTOCOL.md, "Machine control").
fn is_control_type(kind: &str) -> bool {
    matches!(
        kind,
        "DIRECTORY_LIST_REQUEST"
            | "ATTACH_SESSION"
            | "ACTIVATE_SESSION"
            | "RESTORE_SESSION"
            | "DETACH_SESSION"
    )
}
