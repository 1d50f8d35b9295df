//! `autogpt-shim mcp`, the MCP face, driven over stdio by a real client no one here wrote: the
//! official MCP Python SDK (PyPI `mcp`, pinned in `scripts/mcp-env`, which prepares a cached venv
//! and exports `MSGUIDE_TEST_MCP_PYTHON`; without it these tests fail with directions).
//!
//! `tests/mcp/driver.py` runs each scenario against the real binary and asserts the exact codes
//! and messages; this side checks it passed every step, then that `autogpt-shim audit verify`
//! accepts the chain and that the calls are in it as `mcp` records of the connector's shapes.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use e2e::display::Desktop;
use e2e::platform::{
    Platform, SESSION, Shim, TOKEN, WAIT, binary, fresh_dir, run_shim, shim_command,
};
use e2e::witness::Witness;
use serde_json::{Value, json};

const PYTHON_VAR: &str = "MSGUIDE_TEST_MCP_PYTHON";
const INSPECTOR_VAR: &str = "MSGUIDE_TEST_MCP_INSPECTOR";

/// The venv interpreter `scripts/mcp-env` prepared; panics with directions when missing.
fn python() -> PathBuf {
    e2e::prepared(
        PYTHON_VAR,
        "this test drives the server with the MCP Python SDK from the venv scripts/mcp-env prepares",
        "scripts/mcp-env",
    )
}

/// The MCP Inspector launcher `scripts/inspector-env` prepared; panics with directions when
/// missing.
fn inspector() -> PathBuf {
    let value = std::env::var_os(INSPECTOR_VAR)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "{INSPECTOR_VAR} is not set: this test drives the server with the MCP Inspector's \
                 CLI (npm @modelcontextprotocol/inspector) that scripts/inspector-env installs. \
                 Run `scripts/test`, or `eval \"$(scripts/inspector-env)\"` before cargo."
            )
        });
    let path = PathBuf::from(value);
    assert!(
        path.is_file(),
        "{INSPECTOR_VAR}={} is not a file: run scripts/inspector-env again",
        path.display()
    );
    path
}

/// A home, an allowed root and a folder outside it holding `secret.txt`, removed on drop.
pub(super) struct Place {
    dir: PathBuf,
}

impl Place {
    pub(super) fn new() -> Self {
        let dir = fresh_dir("mcp");
        for sub in ["home", "root", "outside"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        std::fs::write(dir.join("outside/secret.txt"), "secret").unwrap();
        Self { dir }
    }

    pub(super) fn home(&self) -> PathBuf {
        self.dir.join("home")
    }

    /// Runs one scenario of the driver; returns the names of the checks it passed.
    pub(super) fn drive(&self, scenario: &str, env: &[(&str, String)]) -> Vec<String> {
        drive_in(&self.dir, scenario, env)
    }

    /// `audit verify` passes; the records, each checked to be the MCP face's.
    pub(super) fn audit(&self) -> Vec<Value> {
        let (code, out, err) = run_shim(&self.home(), &["audit", "verify"]);
        assert_eq!(code, Some(0), "audit verify: {out}{err}");
        let records = audit_of(&self.home());
        for record in &records {
            assert_eq!(record["session_id"], "mcp", "{record}");
        }
        assert_eq!(records.first().unwrap()["op"], "SHIM_START");
        assert_eq!(records.last().unwrap()["op"], "SHIM_STOP");
        records
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs one scenario of the driver in the place at `dir`; returns the checks it passed.
fn drive_in(dir: &Path, scenario: &str, env: &[(&str, String)]) -> Vec<String> {
    // A scenario of its own file (`elements`) runs that file; the others are driver.py's.
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("mcp/{scenario}.py"));
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/driver.py");
    let script = if own.is_file() { own } else { driver };
    let mut command = Command::new(python());
    command.arg(script).arg(scenario);
    run_driver(command, dir, env, &format!("scenario {scenario}"))
}

/// Runs a client driver (`command`, its script and arguments given) against the shim in the
/// place at `dir`, with `env` added; asserts it succeeded and returns the checks it passed
/// (its `ok NAME` lines). `what` names the run in a failure.
pub(super) fn run_driver(
    mut command: Command,
    dir: &Path,
    env: &[(&str, String)],
    what: &str,
) -> Vec<String> {
    let output = command
        .env("MCP_SHIM", binary("autogpt-shim"))
        .env("MCP_HOME", dir.join("home"))
        .env("MCP_ROOT", dir.join("root"))
        .env("MCP_OUTSIDE", dir.join("outside"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{what} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("ok "))
        .map(str::to_owned)
        .collect()
}

pub(super) fn has(records: &[Value], op: &str, code: Option<&str>) -> bool {
    records.iter().any(|r| {
        r["op"] == op
            && match code {
                Some(code) => r["result"]["error_code"] == code,
                None => r["result"]["ok"] == true,
            }
    })
}

#[test]
fn file_tools_through_the_python_sdk_are_jailed_limited_and_audited() {
    let place = Place::new();
    let passed = place.drive("files", &[]);
    assert_eq!(
        passed,
        [
            "initialize_and_list_files_only",
            "read_and_write",
            "stat_and_list",
            "move_and_delete",
            "jail_escapes_refused",
            "file_too_large",
            "bad_input",
        ]
    );
    let records = place.audit();
    for (op, code) in [
        ("FILE_WRITE", None),
        ("FILE_READ", None),
        ("FILE_STAT", None),
        ("FILE_LIST", None),
        ("FILE_MOVE", Some("PATH_EXISTS")),
        ("FILE_DELETE", Some("PATH_NOT_EMPTY")),
        ("FILE_READ", Some("PATH_OUTSIDE_ALLOWED_ROOT")),
        ("JAIL_VIOLATION", Some("PATH_OUTSIDE_ALLOWED_ROOT")),
        ("FILE_WRITE", Some("FILE_TOO_LARGE")),
    ] {
        assert!(has(&records, op, code), "no {op} {code:?} record");
    }
    // Metadata only: the content written never reaches the log.
    let log = std::fs::read_to_string(
        place
            .home()
            .join(".local/state/autogpt-local-executor/audit.log"),
    )
    .unwrap();
    assert!(!log.contains("hello world"), "content in the audit log");
    assert!(!log.contains("pwned"), "content in the audit log");
}

/// The shell leak of issue 36: `install --enable-shell` writes `enable_shell = true` into the
/// shared config file, and `mcp` without its own switch must still offer no `run_command`.
/// Only `mcp`'s switches or the file's `[mcp]` section offer it (said once on stderr), and
/// `--tools`/`--exclude-tools` narrow the listing; a refused list is exit 78 with one line.
#[test]
fn only_mcps_own_switches_offer_the_shell_and_tool_lists_narrow() {
    let place = Place::new();
    let passed = place.drive("powers", &[]);
    assert_eq!(
        passed,
        [
            "daemon_shell_not_offered",
            "shell_offered_when_asked_and_said_once",
            "tools_and_exclude_tools"
        ]
    );
    let root = place.dir.join("root");
    let (code, out, err) = run_shim(
        &place.home(),
        &[
            "--allowed-root",
            root.to_str().unwrap(),
            "mcp",
            "--tools",
            "run_command",
        ],
    );
    assert_eq!(code, Some(78), "{out}{err}");
    assert_eq!(
        err.trim(),
        "autogpt-shim: --tools names run_command, which needs --enable-shell: add that switch (or set it in the config file's [mcp] section), or leave the name out"
    );
    // A name that is no tool (a typo) refuses start-up with the names there are.
    let every = "read_file, write_file, stat, list_directory, delete, move, run_command, screenshot, input_action, cursor_position, display_info, list_windows, focus_window, list_apps, launch_app, accessibility_snapshot, click_element, type_into_element, read_clipboard, write_clipboard";
    for (list, names) in [
        ("--tools", "stat,read_flie"),
        ("--exclude-tools", "delete,read_flie"),
    ] {
        let (code, out, err) = run_shim(
            &place.home(),
            &["--allowed-root", root.to_str().unwrap(), "mcp", list, names],
        );
        assert_eq!(code, Some(78), "{out}{err}");
        assert_eq!(
            err.trim(),
            format!(
                "autogpt-shim: {list} names \"read_flie\", which is no tool of this server: use names from {every}"
            )
        );
        assert!(out.is_empty(), "stdout carries protocol frames only: {out}");
    }
}

/// Runs the MCP Inspector's CLI against `autogpt-shim --allowed-root ROOT mcp SWITCHES` with
/// `method_args`; returns its exit code, stdout and stderr.
fn inspect(
    place: &Place,
    switches: &[&str],
    method_args: &[&str],
) -> (Option<i32>, String, String) {
    let root = place.dir.join("root");
    let output = Command::new(inspector())
        .arg("--cli")
        .args(method_args)
        .arg("--")
        .arg(binary("autogpt-shim"))
        .args(["--allowed-root", root.to_str().unwrap(), "mcp"])
        .args(switches)
        // The Inspector passes the server HOME (and PATH, USER...) only: the audit log and the
        // config file are the test's.
        .env("HOME", place.home())
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// One `tools/call` through the Inspector's CLI, each `key=value` a `--tool-arg` (the CLI
/// converts the text to the schema's type); the result, which must not be an error.
fn inspect_call(place: &Place, switches: &[&str], tool: &str, arguments: &[&str]) -> Value {
    let mut args = vec!["--method", "tools/call", "--tool-name", tool];
    for argument in arguments {
        args.extend(["--tool-arg", argument]);
    }
    let (code, out, err) = inspect(place, switches, &args);
    assert_eq!(
        code,
        Some(0),
        "{tool} {arguments:?}\nstdout:\n{out}\nstderr:\n{err}"
    );
    let result: Value = serde_json::from_str(&out).unwrap();
    assert_ne!(result["isError"], true, "{result}");
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        result["structuredContent"], text,
        "text and structured content agree"
    );
    result["structuredContent"].clone()
}

/// The MCP Inspector's CLI (issue 36): its schema check finds nothing to report in any tool
/// (a type array such as `["boolean", "null"]` is its "type-union" warning), and it fills in
/// booleans, integers and lists from `--tool-arg` text by the schema's one type, which the
/// server takes; a missing field is refused with a sentence naming it.
#[test]
fn the_inspector_cli_finds_portable_schemas_and_fills_in_every_type() {
    let place = Place::new();
    let every = [
        "--enable-shell",
        "--enable-computer-use",
        "--enable-clipboard",
    ];
    let (code, out, err) = inspect(&place, &every, &["--method", "tools/list", "--strict"]);
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        !err.contains("Warning") && !err.contains("Error") && !err.contains("portability"),
        "the Inspector found schema problems:\n{err}"
    );
    let listed: Value = serde_json::from_str(&out).unwrap();
    let tools = listed["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 20, "{listed}");
    for tool in tools {
        let hints = &tool["annotations"];
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(hints[hint].is_boolean(), "{} has no {hint}", tool["name"]);
        }
        assert!(
            tool["title"].is_string() && tool["outputSchema"].is_object(),
            "{tool}"
        );
    }

    let written = inspect_call(
        &place,
        &[],
        "write_file",
        &[
            "path=deep/er/note.txt",
            "content=hello world",
            "create_parents=true",
        ],
    );
    assert_eq!(written, json!({"ok": true}));
    let on_disk = std::fs::read_to_string(place.dir.join("root/deep/er/note.txt")).unwrap();
    assert_eq!(on_disk, "hello world");
    let read = inspect_call(
        &place,
        &[],
        "read_file",
        &[
            "path=deep/er/note.txt",
            "offset=6",
            "length=3",
            "encoding=utf-8",
        ],
    );
    assert_eq!(read["content"], "wor", "{read}");
    let listing = inspect_call(
        &place,
        &[],
        "list_directory",
        &[
            "path=.",
            "recursive=true",
            "include_hidden=false",
            "max_entries=2",
        ],
    );
    assert_eq!(listing["entries"].as_array().unwrap().len(), 2, "{listing}");
    assert_eq!(listing["truncated"], true, "{listing}");
    let stat = inspect_call(&place, &[], "stat", &["path=deep", "follow_symlinks=false"]);
    assert_eq!(stat["is_dir"], true, "{stat}");
    let ran = inspect_call(
        &place,
        &["--enable-shell"],
        "run_command",
        &[
            "argv=[\"echo\", \"hi\"]",
            "timeout_seconds=5",
            "env={\"A\": \"1\"}",
        ],
    );
    assert_eq!(ran["stdout"], "hi\n", "{ran}");
    let removed = inspect_call(
        &place,
        &[],
        "delete",
        &["path=deep", "recursive=true", "missing_ok=true"],
    );
    assert_eq!(removed, json!({"ok": true}));
    assert!(!place.dir.join("root/deep").exists());

    let (code, out, err) = inspect(
        &place,
        &[],
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "read_file",
            "--tool-arg",
            "offset=1",
        ],
    );
    assert_ne!(code, Some(0), "{out}");
    assert!(
        format!("{out}{err}").contains("`path` is required; see read_file's inputSchema"),
        "stdout:\n{out}\nstderr:\n{err}"
    );
    let records = place.audit();
    assert!(has(&records, "FILE_WRITE", None) && has(&records, "EXECUTE_COMMAND", None));
}

/// Bounded answers (issue 36), under `--max-answer-chars 5000`: a text file of two- and
/// four-byte characters and a binary file read in pages through `next_offset` back to their
/// exact content, a folder of 300 entries pages through `offset` with each name once and in
/// order, and a command's long output keeps its first and last lines around a marker; no
/// answer's text is over the budget.
#[test]
fn every_answer_stays_within_its_budget_and_says_how_to_go_on() {
    let place = Place::new();
    let passed = place.drive("budget", &[]);
    assert_eq!(
        passed,
        [
            "long_files_read_in_pages",
            "listings_page_with_offset",
            "command_output_keeps_head_and_tail"
        ]
    );
    let records = place.audit();
    assert!(has(&records, "FILE_READ", None) && has(&records, "FILE_LIST", None));
}

/// MCP Roots (issue 36), through the Python SDK's roots callback: the roots narrow the file
/// tools and a command's working folder to those folders, through symlinks too; a root outside
/// the allowed root is ignored with a log line; a change of roots applies; a root holding the
/// allowed root widens nothing.
#[test]
fn the_clients_roots_narrow_the_tools_and_never_widen_the_root() {
    let place = Place::new();
    let passed = place.drive("roots", &[]);
    assert_eq!(
        passed,
        [
            "roots_narrow_the_tools",
            "a_change_of_roots_applies",
            "no_root_widens_the_allowed_root"
        ]
    );
    let records = place.audit();
    assert!(has(
        &records,
        "JAIL_VIOLATION",
        Some("PATH_OUTSIDE_ALLOWED_ROOT")
    ));
    assert!(has(&records, "FILE_WRITE", None));
}

#[test]
fn run_command_times_out_and_cancels_with_its_tree() {
    let place = Place::new();
    let passed = place.drive("shell", &[]);
    assert_eq!(
        passed,
        [
            "run_command",
            "timeout_kills_the_tree",
            "cancel_kills_the_tree"
        ]
    );
    let records = place.audit();
    assert!(has(&records, "EXECUTE_COMMAND", None));
    assert!(has(&records, "EXECUTE_COMMAND", Some("COMMAND_TIMEOUT")));
    assert!(has(
        &records,
        "EXECUTE_COMMAND",
        Some("SHELL_NOT_AVAILABLE")
    ));
    assert!(has(
        &records,
        "EXECUTE_COMMAND",
        Some("PATH_OUTSIDE_ALLOWED_ROOT")
    ));
    // The cancelled call is on record as stopped.
    assert!(has(&records, "EXECUTE_COMMAND", Some("CANCELLED")));
}

#[test]
fn closing_stdin_ends_the_server_and_its_running_command() {
    let place = Place::new();
    let passed = place.drive("stdin", &[]);
    assert_eq!(passed, ["stdin_close_stops_everything"]);
    let records = place.audit();
    let stop = records.last().unwrap();
    assert_eq!(stop["details"]["reason"], "stdin_closed", "{stop}");
    assert!(has(&records, "EXECUTE_COMMAND", Some("CANCELLED")));
}

/// The private desktop's variables and its screen size, for the driver.
pub(super) fn desktop_env(desktop: &Desktop) -> Vec<(&'static str, String)> {
    let mut env = desktop.env();
    env.extend([
        ("MCP_SCREEN_WIDTH", "1280".to_owned()),
        ("MCP_SCREEN_HEIGHT", "720".to_owned()),
    ]);
    env
}

/// The input records of one action word, as the audit has them.
fn actions<'a>(records: &'a [Value], action: &'a str) -> impl Iterator<Item = &'a Value> {
    records
        .iter()
        .filter(move |r| r["op"] == "INPUT_ACTION" && r["details"]["action"] == action)
}

#[test]
fn screenshots_input_windows_and_clipboard_reach_a_real_desktop() {
    let desktop = Desktop::with_size(1280, 720);
    let mut witness = Witness::start(&desktop, "Witness MCP");
    let [x, y] = witness.centre();
    let place = Place::new();
    let mut env = desktop_env(&desktop);
    env.extend([
        ("MCP_CLICK_X", x.to_string()),
        ("MCP_CLICK_Y", y.to_string()),
    ]);
    let passed = place.drive("computer", &env);
    assert_eq!(
        passed,
        ["screenshot", "input_action", "windows", "clipboard"]
    );
    // What the server reported done is what the window received, in order: the click, the
    // double click beside it, two scroll steps down, then the typed text.
    let at = |event: &Value| [event["x"].as_i64(), event["y"].as_i64()];
    let press = witness.expect("press", |p| p["button"] == 1);
    assert_eq!(at(&press), [Some(x), Some(y)], "{press}");
    let double = witness.expect("press", |p| p["count"] == 2);
    assert_eq!(at(&double), [Some(x + 40), Some(y + 30)], "{double}");
    assert_eq!(double["button"], 1, "{double}");
    for _ in 0..2 {
        witness.expect("scroll", |s| s["direction"] == "down");
    }
    // Nothing else arrived: the refused action word and key chord sent no press and no key.
    let rest = witness.drain(Duration::from_millis(500));
    assert!(
        !rest.iter().any(|e| e["event"] == "press"),
        "a refused action arrived: {rest:?}"
    );
    let keys: String = rest
        .iter()
        .filter(|e| e["event"] == "key")
        .map(|e| e["char"].as_str().unwrap_or("<no char>"))
        .collect();
    assert_eq!(keys, "typed through mcp");
    let text = rest.iter().rev().find(|e| e["event"] == "text");
    assert_eq!(text.map(|t| &t["text"]), Some(&json!("typed through mcp")));

    let records = place.audit();
    assert!(has(&records, "SCREENSHOT_REQUEST", None));
    assert!(has(&records, "INPUT_ACTION", None));
    assert!(has(&records, "INPUT_ACTION", Some("INPUT_OUT_OF_BOUNDS")));
    for action in ["left_click", "double_click", "scroll", "type"] {
        assert!(
            actions(&records, action).any(|r| r["result"]["ok"] == true),
            "no {action} record"
        );
    }
    let typed = actions(&records, "type").next().unwrap();
    assert_eq!(typed["details"]["text_length"], 17, "{typed}");
    let chord = actions(&records, "key").next().unwrap();
    assert_eq!(
        (&chord["result"]["error_code"], &chord["details"]["key"]),
        (&json!("FEATURE_NOT_SUPPORTED"), &json!("ctrl+hyperspace")),
        "{chord}"
    );
    assert!(has(&records, "WINDOW_FOCUS", None));
    assert!(has(&records, "WINDOW_FOCUS", Some("WINDOW_STALE")));
    assert!(has(&records, "SCREENSHOT_REQUEST", Some("FILE_TOO_LARGE")));
    assert!(has(&records, "CLIPBOARD_WRITE", None));
    assert!(has(&records, "CLIPBOARD_READ", None));
    let log = std::fs::read_to_string(
        place
            .home()
            .join(".local/state/autogpt-local-executor/audit.log"),
    )
    .unwrap();
    assert!(
        !log.contains("typed through"),
        "typed text in the audit log"
    );
    assert!(!log.contains("from mcp"), "clipboard text in the audit log");
}

#[test]
fn displays_pointer_apps_and_accessibility_reach_a_real_desktop() {
    let desktop = Desktop::with_size(1280, 720);
    let title = "Witness Apps";
    let witness = Witness::start(&desktop, title);
    let place = Place::new();
    let mut env = desktop_env(&desktop);
    env.extend([
        ("MCP_WITNESS_TITLE", title.to_owned()),
        ("MCP_WITNESS_PID", witness.pid.to_string()),
    ]);
    let passed = place.drive("desktop", &env);
    assert_eq!(
        passed,
        [
            "display_info",
            "cursor_position",
            "list_apps",
            "launch_app",
            "accessibility_snapshot"
        ]
    );
    let records = place.audit();
    for (op, code) in [
        ("DISPLAY_INFO_REQUEST", None),
        ("CURSOR_POSITION_REQUEST", None),
        ("APP_LIST_REQUEST", None),
        ("APP_LAUNCH", None),
        ("APP_LAUNCH", Some("INTERNAL_ERROR")),
        ("APP_LAUNCH", Some("FEATURE_NOT_SUPPORTED")),
        ("WINDOW_LIST_REQUEST", None),
        ("A11Y_SNAPSHOT_REQUEST", None),
        ("A11Y_SNAPSHOT_REQUEST", Some("WINDOW_STALE")),
    ] {
        assert!(has(&records, op, code), "no {op} {code:?} record");
    }
    assert!(actions(&records, "mouse_move").any(|r| r["result"]["ok"] == true));
    // The launch is on record with its program and pid, its arguments only counted.
    let launch = records
        .iter()
        .find(|r| r["op"] == "APP_LAUNCH" && r["result"]["ok"] == true)
        .unwrap();
    assert_eq!(
        launch["details"]["executable_path"], "/bin/sleep",
        "{launch}"
    );
    assert_eq!(launch["details"]["args_count"], 1, "{launch}");
    assert!(launch["details"]["pid"].as_u64().is_some(), "{launch}");
    let snapshot = records
        .iter()
        .find(|r| r["op"] == "A11Y_SNAPSHOT_REQUEST" && r["result"]["ok"] == true)
        .unwrap();
    assert_eq!(snapshot["details"]["elements_returned"], 1, "{snapshot}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_and_start_write_one_chain_at_the_same_time() {
    // Both processes append to the same audit log while the other does: the file lock makes
    // them take turns, and each continues after the other's records.
    let place = Place::new();
    let home = place.home();
    let platform = Platform::bind().await;
    let args = platform.start_args(&place.dir.join("root"), "info", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut shim = Shim::spawn(&home, &args, &[("AUTOGPT_SHIM_TOKEN", TOKEN)]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    let dir = place.dir.clone();
    let driver = tokio::task::spawn_blocking(move || drive_in(&dir, "files", &[]));
    let mut stats = 0;
    while !driver.is_finished() {
        let reply = conn
            .call("FILE_STAT", &format!("s{stats}"), json!({"path": "."}))
            .await;
        assert_eq!(reply["type"], "FILE_STAT_RESPONSE", "{reply}");
        stats += 1;
    }
    assert_eq!(driver.await.unwrap().len(), 7);
    conn.close(4428).await;
    let (status, stderr) = shim.exit().await;
    assert!(status.success(), "{stderr}");

    let (code, out, err) = run_shim(&home, &["audit", "verify"]);
    assert_eq!(code, Some(0), "audit verify: {out}{err}");
    let records = audit_of(&home);
    let sessions: Vec<&str> = records
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=records.len() as u64).collect::<Vec<_>>());
    // Interleaved, not one after the other: some MCP record lies between two of the
    // connector's FILE_STATs.
    let first = sessions.iter().position(|s| *s == SESSION).unwrap();
    let last = sessions.iter().rposition(|s| *s == SESSION).unwrap();
    assert!(
        sessions[first..last].contains(&"mcp"),
        "the faces did not write at the same time ({stats} stats): {sessions:?}"
    );
}

/// `autogpt-shim mcp` driven with raw lines, for what no SDK client sends: the test writes its
/// stdin and reads every stdout line, each of which must be one JSON-RPC frame.
pub(super) struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    /// stdout's lines, from a reader thread, so a missing answer fails after `WAIT` instead of
    /// hanging the test.
    lines: mpsc::Receiver<Vec<u8>>,
    stderr: PathBuf,
}

impl Raw {
    fn spawn(place: &Place, switches: &[&str], env: &[(&str, &str)]) -> Self {
        let root = place.dir.join("root");
        let mut args = vec![
            "--allowed-root",
            root.to_str().unwrap(),
            "--log-level",
            "DEBUG",
            "mcp",
        ];
        args.extend_from_slice(switches);
        let stderr = place.dir.join("raw-mcp.stderr");
        Self::start(shim_command(&place.home(), &args, env), stderr)
    }

    /// `command` (an `autogpt-shim ... mcp` of the caller's making) as a raw server, its
    /// stderr in the file `stderr`.
    pub(super) fn start(mut command: Command, stderr: PathBuf) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // A file, not a pipe: a pipe nobody reads would fill and stall the server.
            .stderr(File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            loop {
                let mut line = Vec::new();
                match stdout.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if sender.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.write(&line);
    }

    /// The next frame on stdout: one whole line of JSON.
    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(WAIT)
            .expect("no answer on stdout in time");
        assert!(line.ends_with(b"\n"), "a partial line on stdout");
        serde_json::from_slice(&line).expect("stdout carries only JSON-RPC frames")
    }

    pub(super) fn initialize(&mut self) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        );
        let answer = self.next();
        assert_eq!(answer["id"], 1, "{answer}");
        assert!(answer["result"].is_object(), "{answer}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn request_call(&mut self, id: u64, tool: &str, arguments: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
    }

    /// One tool call answered before anything else: its `result`.
    pub(super) fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        self.request_call(id, tool, arguments);
        let answer = self.next();
        assert_eq!(answer["id"], id, "{answer}");
        answer["result"].clone()
    }

    /// Closes stdin: the server must exit 0 by itself. Returns its stderr.
    pub(super) fn close(mut self) -> String {
        drop(self.stdin.take());
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit when stdin closed"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let stderr = std::fs::read_to_string(&self.stderr).unwrap();
        assert!(status.success(), "{status}: {stderr}");
        stderr
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The longest line the server takes, its newline included (rmcp's limit).
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// A `tools/call` of `write_file` exactly `len` bytes long (its newline included), its id
/// before or after the content.
fn long_write(len: usize, id: u64, id_first: bool) -> Vec<u8> {
    let (head, tail) = if id_first {
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"write_file","arguments":{{"path":"big.txt","content":""#
            ),
            "\"}}}\n".to_owned(),
        )
    } else {
        (
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"path":"big.txt","content":""#.to_owned(),
            format!("\"}}}},\"id\":{id}}}\n"),
        )
    };
    let mut line = head.into_bytes();
    line.resize(len - tail.len(), b'a');
    line.extend_from_slice(tail.as_bytes());
    assert_eq!(line.len(), len);
    line
}

#[test]
fn lines_the_server_cannot_read_are_answered_and_serving_goes_on() {
    let place = Place::new();
    std::fs::write(place.dir.join("root/kept.txt"), "kept").unwrap();
    let mut server = Raw::spawn(&place, &[], &[]);
    server.initialize();
    let parse_error = |message: &str| json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": message}});
    server.write(b"this is not json\n");
    assert_eq!(
        server.next(),
        parse_error("Parse error: the line is not valid JSON.")
    );
    server.write(b"\xff\xfe{\"id\": 3}\n");
    assert_eq!(
        server.next(),
        parse_error("Parse error: the line is not UTF-8 text.")
    );
    // One byte over the limit (its newline). The id comes first, as clients write it: the
    // call it carried fails at once. An id past the first 16 MiB cannot be read: null.
    let too_long = |id: Value| {
        json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32600,
            "message": "Invalid Request: the line is longer than 16777216 bytes.",
            "data": {"max_line_bytes": MAX_LINE_BYTES}}})
    };
    server.write(&long_write(MAX_LINE_BYTES + 1, 5, true));
    assert_eq!(server.next(), too_long(json!(5)));
    server.write(&long_write(MAX_LINE_BYTES + 64, 6, false));
    assert_eq!(server.next(), too_long(Value::Null));

    // Serving goes on, and nothing of the refused lines ran.
    let stat = server.call(7, "stat", json!({"path": "kept.txt"}));
    assert_ne!(stat["isError"], true, "{stat}");
    assert_eq!(stat["structuredContent"]["size_bytes"], 4, "{stat}");
    assert!(!place.dir.join("root/big.txt").exists());
    let stderr = server.close();
    // Even at DEBUG, the log holds nothing of the lines.
    assert!(!stderr.contains("this is not json"), "{stderr}");
    assert!(!stderr.contains("aaaa"), "content in the log");
    let records = place.audit();
    assert!(has(&records, "FILE_STAT", None));
    assert!(
        !records.iter().any(|r| r["op"] == "FILE_WRITE"),
        "a refused line ran"
    );
}

#[test]
fn calls_beyond_max_concurrent_are_refused_with_shim_overloaded() {
    let place = Place::new();
    let root = place.dir.join("root");
    let mut server = Raw::spawn(
        &place,
        &["--enable-shell"],
        &[("AUTOGPT_SHIM_MAX_CONCURRENT", "2")],
    );
    server.initialize();
    // Two commands that run until the test lets them go.
    let release = root.join("release");
    for id in [2, 3] {
        let started = root.join(format!("started-{id}"));
        server.request_call(
            id,
            "run_command",
            json!({
                "command": format!(
                    "touch {}; while [ ! -e {} ]; do sleep 0.05; done",
                    started.display(),
                    release.display()
                ),
                "shell": "sh",
                "timeout_seconds": 60
            }),
        );
    }
    let deadline = Instant::now() + WAIT;
    while !(root.join("started-2").exists() && root.join("started-3").exists()) {
        assert!(Instant::now() < deadline, "the commands never started");
        std::thread::sleep(Duration::from_millis(10));
    }

    // The third call is refused at once, as the connector refuses a request beyond the cap.
    let refused = server.call(4, "stat", json!({"path": "."}));
    let message = "The local executor is at its concurrent request limit.";
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["content"][0]["text"],
        format!("SHIM_OVERLOADED: {message}")
    );
    assert_eq!(
        refused["structuredContent"],
        json!({"code": "SHIM_OVERLOADED", "message": message, "details": {"max_concurrent": 2}})
    );

    // Once they finish, their slots are free again.
    std::fs::write(&release, "").unwrap();
    let mut finished: Vec<u64> = (0..2)
        .map(|_| {
            let answer = server.next();
            assert_ne!(answer["result"]["isError"], true, "{answer}");
            assert_eq!(
                answer["result"]["structuredContent"]["exit_code"], 0,
                "{answer}"
            );
            answer["id"].as_u64().unwrap()
        })
        .collect();
    finished.sort_unstable();
    assert_eq!(finished, [2, 3]);
    let stat = server.call(5, "stat", json!({"path": "."}));
    assert_ne!(stat["isError"], true, "{stat}");
    server.close();

    let records = place.audit();
    let of = |id: &'static str| records.iter().filter(move |r| r["request_id"] == id);
    for id in ["2", "3"] {
        assert!(of(id).any(|r| r["op"] == "EXECUTE_COMMAND" && r["result"]["ok"] == true));
    }
    assert!(of("5").any(|r| r["op"] == "FILE_STAT"));
    // As on a connection, the refusal is not audited: nothing was attempted.
    assert_eq!(of("4").count(), 0);
}

/// `run_command` runs in the sandbox `--shell-sandbox` names, as EXECUTE_COMMAND does: here
/// `strict`, so nothing outside the root is written or read, and `no_new_privs` is set.
#[test]
fn run_command_runs_in_the_shell_sandbox() {
    let place = Place::new();
    let root = place.dir.join("root");
    let outside = place.dir.join("outside");
    let mut server = Raw::spawn(
        &place,
        &["--enable-shell", "--shell-sandbox", "strict"],
        &[],
    );
    server.initialize();
    let result = server.call(
        2,
        "run_command",
        json!({
            "command": format!(
                "echo in > inside.txt; echo out > {0}/escape.txt; cat {0}/secret.txt; grep NoNewPrivs /proc/self/status",
                outside.display()
            ),
            "shell": "sh"
        }),
    );
    let stdout = result["structuredContent"]["stdout"].as_str().unwrap();
    assert!(stdout.contains("NoNewPrivs:\t1"), "{result}");
    assert!(!stdout.contains("secret"), "{result}");
    assert!(root.join("inside.txt").is_file());
    assert!(!outside.join("escape.txt").exists());
    let stderr = server.close();
    assert!(
        stderr.contains("shell is enabled in the `strict` sandbox"),
        "{stderr}"
    );
    let records = place.audit();
    let command = records
        .iter()
        .find(|r| r["op"] == "EXECUTE_COMMAND")
        .unwrap();
    assert_eq!(command["details"]["sandbox"], "strict", "{command}");
}

/// Whether `pid` has ended: gone, or a zombie nobody has reaped yet.
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            == Some("Z")
    })
}

/// `mcp` reads the TOML file as `start` does (its limits reach the tool descriptions and the
/// calls), and SIGTERM stops it as closing stdin does: the running command's tree is killed,
/// SHIM_STOP says `signal`, the exit is 0.
#[test]
fn the_config_file_applies_and_a_signal_stops_the_server_and_its_command() {
    let place = Place::new();
    let config = place.home().join(".config/autogpt-local-executor");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        "max_file_size_bytes = 3000\ncommand_timeout_seconds = 77\n",
    )
    .unwrap();
    let root = place.dir.join("root");
    std::fs::write(root.join("big.txt"), "x".repeat(3001)).unwrap();
    let mut server = Raw::spawn(&place, &["--enable-shell"], &[]);
    server.initialize();
    server.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = server.next();
    let description = |name: &str| {
        listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|tool| tool["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {listed}"))["description"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(description("read_file").contains("(and 3000 bytes)"));
    assert!(description("run_command").contains("capped at 77 s"));
    // The configured limit bounds one page of a read; the file reads on from next_offset.
    let page = server.call(3, "read_file", json!({"path": "big.txt"}));
    assert_ne!(page["isError"], true, "{page}");
    let content = &page["structuredContent"];
    assert_eq!(
        content["content"].as_str().unwrap().len(),
        3000,
        "{content}"
    );
    assert_eq!(content["next_offset"], 3000, "{content}");

    // A command whose grandchild would outlive it, then SIGTERM.
    let pidfile = root.join("sleep.pid");
    server.request_call(
        4,
        "run_command",
        json!({"command": format!("sleep 60 & echo $! > {}; wait", pidfile.display()),
            "shell": "sh", "timeout_seconds": 60}),
    );
    let deadline = Instant::now() + WAIT;
    let grandchild: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|text| text.trim().parse().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(e2e::sigterm(server.child.id()));
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "SIGTERM did not stop the server");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "SIGTERM is a clean stop: {status}");
    let deadline = Instant::now() + WAIT;
    while !ended(grandchild) {
        assert!(
            Instant::now() < deadline,
            "the command's tree outlived the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let records = place.audit();
    assert_eq!(
        records.last().unwrap()["details"]["reason"],
        "signal",
        "{:?}",
        records.last()
    );
    assert!(has(&records, "FILE_READ", None));
    assert!(has(&records, "EXECUTE_COMMAND", Some("CANCELLED")));
}

/// The records of the audit log under `home`, parsed.
fn audit_of(home: &Path) -> Vec<Value> {
    let log = home.join(".local/state/autogpt-local-executor/audit.log");
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}
