//! `autogpt-shim mcp` driven by the official MCP TypeScript SDK's client (npm
//! `@modelcontextprotocol/sdk`, pinned in `scripts/inspector-env`, which exports
//! `MSGUIDE_TEST_MCP_NODE`; without it these tests fail with directions), over stdio and over
//! Streamable HTTP (`mcp --http`), and the HTTP listener's boundary from here: no token, a wrong
//! token, a foreign `Host` and an `Origin` refused in a sentence, the right request served.
//!
//! `tests/mcp/sdk.mjs` runs each scenario against the real binary and asserts the exact codes
//! and messages; this side checks it passed every step, then that `autogpt-shim audit verify`
//! accepts the chain and that the calls are in it as `mcp` records.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use e2e::display::Desktop;
use e2e::platform::{WAIT, binary, fresh_dir, run_shim};
use e2e::witness::Witness;
use serde_json::Value;

const NODE_VAR: &str = "MSGUIDE_TEST_MCP_NODE";

/// The Node.js with the TypeScript SDK that `scripts/inspector-env` prepared; panics with
/// directions when missing.
fn node() -> PathBuf {
    e2e::prepared(
        NODE_VAR,
        "this test drives the server with the MCP TypeScript SDK (npm @modelcontextprotocol/sdk) that scripts/inspector-env installs",
        "scripts/inspector-env",
    )
}

/// A home, an allowed root and a folder outside it holding `secret.txt`, removed on drop.
struct Place {
    dir: PathBuf,
}

impl Place {
    fn new() -> Self {
        let dir = fresh_dir("mcp-http");
        for sub in ["home", "root", "outside"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        std::fs::write(dir.join("outside/secret.txt"), "secret").unwrap();
        Self { dir }
    }

    fn home(&self) -> PathBuf {
        self.dir.join("home")
    }

    fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// Runs one scenario of the driver over `transport`; returns the checks it passed.
    fn drive(&self, transport: &str, scenario: &str) -> Vec<String> {
        self.drive_with(transport, scenario, &[])
    }

    /// As `drive`, with more variables for the driver (a private desktop's).
    fn drive_with(&self, transport: &str, scenario: &str, env: &[(&str, String)]) -> Vec<String> {
        let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/sdk.mjs");
        let mut command = Command::new(node());
        command.arg(driver).args([transport, scenario]);
        super::mcp::run_driver(
            command,
            &self.dir,
            env,
            &format!("{transport} scenario {scenario}"),
        )
    }

    /// `audit verify` passes; the records, each the MCP face's, between SHIM_START and SHIM_STOP.
    fn audit(&self) -> Vec<Value> {
        let (code, out, err) = run_shim(&self.home(), &["audit", "verify"]);
        assert_eq!(code, Some(0), "audit verify: {out}{err}");
        let log = self
            .home()
            .join(".local/state/autogpt-local-executor/audit.log");
        let records: Vec<Value> = std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
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

fn has(records: &[Value], op: &str, code: Option<&str>) -> bool {
    records.iter().any(|r| {
        r["op"] == op
            && match code {
                Some(code) => r["result"]["error_code"] == code,
                None => r["result"]["ok"] == true,
            }
    })
}

const TOOLS_CHECKS: [&str; 6] = [
    "list_tools",
    "file_tools_with_every_parameter",
    "run_command_with_every_parameter",
    "every_parameter_was_set",
    "out_of_root_refused",
    "bad_arguments_are_protocol_errors",
];

/// Every file tool and `run_command` with every optional parameter, then escapes of the root,
/// through the TypeScript SDK over stdio and over Streamable HTTP.
#[test]
fn the_typescript_sdk_calls_every_tool_over_stdio_and_http() {
    for transport in ["stdio", "http"] {
        let place = Place::new();
        assert_eq!(place.drive(transport, "tools"), TOOLS_CHECKS, "{transport}");
        let records = place.audit();
        for op in [
            "FILE_READ",
            "FILE_WRITE",
            "FILE_STAT",
            "FILE_LIST",
            "FILE_DELETE",
            "FILE_MOVE",
            "EXECUTE_COMMAND",
        ] {
            assert!(has(&records, op, None), "{transport}: no {op} record");
        }
        assert!(
            has(
                &records,
                "JAIL_VIOLATION",
                Some("PATH_OUTSIDE_ALLOWED_ROOT")
            ),
            "{transport}"
        );
        let stop = &records.last().unwrap()["details"]["reason"];
        let expected = if transport == "http" {
            "signal"
        } else {
            "stdin_closed"
        };
        assert_eq!(stop, expected, "{transport}");
    }
}

/// The budget cut and its continuation (pages of a file, of a listing, a command's head and
/// tail) through the TypeScript SDK over both transports.
#[test]
fn the_typescript_sdk_pages_through_the_budget_over_stdio_and_http() {
    for transport in ["stdio", "http"] {
        let place = Place::new();
        assert_eq!(
            place.drive(transport, "budget"),
            [
                "long_files_read_in_pages",
                "listings_page_with_offset",
                "command_output_keeps_head_and_tail"
            ],
            "{transport}"
        );
        place.audit();
    }
}

/// The client's MCP roots narrow the tools over both transports (over HTTP the server asks for
/// them on the session's own stream), and a change applies.
#[test]
fn the_typescript_sdks_roots_narrow_the_tools_over_stdio_and_http() {
    for transport in ["stdio", "http"] {
        let place = Place::new();
        assert_eq!(
            place.drive(transport, "roots"),
            ["roots_narrow_the_tools", "a_change_of_roots_applies"],
            "{transport}"
        );
        let records = place.audit();
        assert!(has(
            &records,
            "JAIL_VIOLATION",
            Some("PATH_OUTSIDE_ALLOWED_ROOT")
        ));
    }
}

/// Every desktop tool with every optional parameter, through the TypeScript SDK over both
/// transports, on a private Xvfb desktop beside a GTK witness window (the Python suite checks
/// what the window receives; here each call is served and its record is in the chain).
#[test]
fn the_typescript_sdk_calls_every_desktop_tool_over_stdio_and_http() {
    let desktop = Desktop::with_size(1280, 720);
    let title = "Witness TS";
    let witness = Witness::start_for_elements(&desktop, title);
    for transport in ["stdio", "http"] {
        let place = Place::new();
        let mut env = desktop.env();
        env.extend([
            ("MCP_SCREEN_WIDTH", "1280".to_owned()),
            ("MCP_SCREEN_HEIGHT", "720".to_owned()),
            ("MCP_WITNESS_TITLE", title.to_owned()),
            ("MCP_WITNESS_PID", witness.pid.to_string()),
        ]);
        assert_eq!(
            place.drive_with(transport, "desktop", &env),
            [
                "windows",
                "screenshot",
                "input_action",
                "apps",
                "accessibility_and_clipboard",
                "every_parameter_was_set"
            ],
            "{transport}"
        );
        let records = place.audit();
        for op in [
            "DISPLAY_INFO_REQUEST",
            "WINDOW_LIST_REQUEST",
            "WINDOW_FOCUS",
            "SCREENSHOT_REQUEST",
            "INPUT_ACTION",
            "CURSOR_POSITION_REQUEST",
            "APP_LIST_REQUEST",
            "APP_LAUNCH",
            "A11Y_SNAPSHOT_REQUEST",
            "ELEMENT_ACTION",
            "CLIPBOARD_WRITE",
            "CLIPBOARD_READ",
        ] {
            assert!(has(&records, op, None), "{transport}: no {op} record");
        }
        assert!(has(&records, "INPUT_ACTION", Some("INPUT_OUT_OF_BOUNDS")));
        assert!(has(&records, "A11Y_SNAPSHOT_REQUEST", Some("WINDOW_STALE")));
    }
}

/// SIGTERM under a running command over HTTP stops as stdio does: the tree killed, exit 0,
/// the call recorded CANCELLED and SHIM_STOP `signal`.
#[test]
fn a_signal_stops_the_http_server_and_its_running_command() {
    let place = Place::new();
    assert_eq!(
        place.drive("http", "signal"),
        ["a_signal_stops_the_server_and_its_command"]
    );
    let records = place.audit();
    assert!(has(&records, "EXECUTE_COMMAND", Some("CANCELLED")));
    assert_eq!(records.last().unwrap()["details"]["reason"], "signal");
}

/// `mcp --http 0` with a token file, its printed address read from stdout.
struct Served {
    child: Child,
    port: u16,
    printed: String,
    stderr: mpsc::Receiver<String>,
}

impl Served {
    fn start(place: &Place, extra: &[&str]) -> Self {
        let root = place.root();
        let mut args = vec![
            "--allowed-root",
            root.to_str().unwrap(),
            "mcp",
            "--http",
            "0",
        ];
        args.extend_from_slice(extra);
        let mut child = Command::new(binary("autogpt-shim"))
            .args(&args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("HOME", place.home())
            .env("XDG_CONFIG_HOME", place.home().join(".config"))
            .env("XDG_STATE_HOME", place.home().join(".local/state"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (lines, stderr) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(err).read_to_string(&mut text);
            let _ = lines.send(text);
        });
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut printed = String::new();
        let port = loop {
            let mut line = String::new();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "the server printed no address: {printed}"
            );
            printed.push_str(&line);
            if let Some(url) = line.trim().strip_prefix("MCP over Streamable HTTP: ") {
                let port = url
                    .strip_prefix("http://127.0.0.1:")
                    .and_then(|rest| rest.strip_suffix("/mcp"))
                    .unwrap_or_else(|| panic!("not a loopback /mcp address: {url}"));
                break port.parse().unwrap();
            }
        };
        let mut rest = String::new();
        out.read_line(&mut rest).unwrap();
        printed.push_str(&rest);
        Self {
            child,
            port,
            printed,
            stderr,
        }
    }

    /// One HTTP/1.1 request with these headers (Host included by the caller); the status, the
    /// headers (lower-cased names) and the body as text.
    fn request(
        &self,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, Vec<(String, String)>, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        let code = status
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no HTTP status: {status:?}"));
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
        }
        // An SSE answer stays open for more events: read what has come once the result is in.
        let mut body = Vec::new();
        let mut chunk = [0u8; 4096];
        let deadline = Instant::now() + WAIT;
        loop {
            match reader.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => body.extend_from_slice(&chunk[..n]),
                Err(err) => panic!("reading the answer: {err}"),
            }
            if String::from_utf8_lossy(&body).contains("\"result\"") {
                break;
            }
            assert!(Instant::now() < deadline, "no answer");
        }
        (code, headers, String::from_utf8_lossy(&body).into_owned())
    }

    fn stop(mut self) -> String {
        assert!(e2e::sigterm(self.child.id()));
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "SIGTERM did not stop the server");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "SIGTERM is a clean stop: {status}");
        self.stderr.recv_timeout(WAIT).unwrap()
    }
}

/// A refused request: what it is, its headers, and the status and sentence it gets.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, u16, &'a str);

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"boundary-test","version":"1"}}}"#;

/// The boundary in front of the SDK: no token and a wrong or malformed one are 401 with a
/// challenge, a foreign `Host` and any `Origin` 403, each in one sentence, and nothing of the
/// refused requests reaches the SDK or the log; the right request is served; the token from
/// `--http-token-file` is never printed.
#[test]
fn the_http_boundary_refuses_in_a_sentence_and_serves_the_right_request() {
    let place = Place::new();
    let token = "tok-Boundary_9f3c";
    let token_file = place.home().join("mcp-token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let served = Served::start(&place, &["--http-token-file", token_file.to_str().unwrap()]);
    assert!(!served.printed.contains(token), "{}", served.printed);
    assert!(
        served.printed.contains(&format!(
            "Clients send the token in {} with every request",
            token_file.display()
        )),
        "{}",
        served.printed
    );
    let host = format!("127.0.0.1:{}", served.port);
    let bearer = format!("Bearer {token}");
    let local = [("Host", host.as_str()), ("Authorization", bearer.as_str())];

    let cases: [Case<'_>; 6] = [
        (
            "no token",
            vec![("Host", host.as_str())],
            401,
            "No bearer token was sent; send the header \"Authorization: Bearer <token>\" with the token autogpt-shim mcp --http printed at start (or the one in its --http-token-file).",
        ),
        (
            "a wrong token",
            vec![
                ("Host", host.as_str()),
                ("Authorization", "Bearer tok-Boundary_9f3"),
            ],
            401,
            "The bearer token is not this server's; use the token autogpt-shim mcp --http printed at start (a new one each start) or the one in its --http-token-file.",
        ),
        (
            "a malformed header",
            vec![("Host", host.as_str()), ("Authorization", token)],
            401,
            "The Authorization header is malformed; send exactly one header of the form \"Authorization: Bearer <token>\".",
        ),
        (
            "a foreign Host",
            vec![("Host", "evil.example"), ("Authorization", bearer.as_str())],
            403,
            "The Host header must name this machine as localhost, 127.0.0.1 or [::1]; another name is refused because a web page could have pointed it here.",
        ),
        (
            "a loopback address that is not one of the three names",
            vec![("Host", "127.0.0.2"), ("Authorization", bearer.as_str())],
            403,
            "The Host header must name this machine as localhost, 127.0.0.1 or [::1]; another name is refused because a web page could have pointed it here.",
        ),
        (
            "an Origin",
            [local.as_slice(), &[("Origin", "http://127.0.0.1:8080")]].concat(),
            403,
            "Requests with an Origin header come from a web page and are refused; connect from an MCP client program instead.",
        ),
    ];
    for (what, headers, status, sentence) in &cases {
        let (code, answered, body) = served.request(headers, INITIALIZE);
        assert_eq!(code, *status, "{what}: {body}");
        assert_eq!(body, *sentence, "{what}");
        let challenge = answered.iter().find(|(name, _)| name == "www-authenticate");
        assert_eq!(challenge.is_some(), *status == 401, "{what}: {answered:?}");
        assert!(
            answered.iter().all(|(name, _)| name != "mcp-session-id"),
            "{what} reached the SDK: {answered:?}"
        );
    }

    for host in [host.as_str(), "localhost", "[::1]:1"] {
        let (code, answered, body) = served.request(
            &[("Host", host), ("Authorization", bearer.as_str())],
            INITIALIZE,
        );
        assert_eq!(code, 200, "{host}: {body}");
        assert!(
            body.contains("\"serverInfo\"") && body.contains("autogpt-shim"),
            "{body}"
        );
        assert!(
            answered.iter().any(|(name, _)| name == "mcp-session-id"),
            "{answered:?}"
        );
    }
    let stderr = served.stop();
    assert!(
        !stderr.contains(token) && !stderr.contains("tok-Boundary"),
        "{stderr}"
    );
    assert!(!stderr.contains("boundary-test"), "{stderr}");
    assert_eq!(
        stderr.matches("HTTP request refused").count(),
        cases.len(),
        "{stderr}"
    );
    let records = place.audit();
    assert_eq!(records.last().unwrap()["details"]["reason"], "signal");
}

/// Start-up refusals of `--http`, each one line and exit 78: a token file others may read, a
/// token file with no token in it, `--http-token-file` without `--http`, a port in use.
#[test]
fn http_start_up_refusals_say_what_to_change() {
    let place = Place::new();
    let root = place.root();
    let root = root.to_str().unwrap();
    let open = place.home().join("open-token");
    std::fs::write(&open, "tok-open\n").unwrap();
    let empty = place.home().join("empty-token");
    std::fs::write(&empty, "two words\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let cases: [(Vec<&str>, String); 4] = [
        (
            vec!["--http", "0", "--http-token-file", open.to_str().unwrap()],
            format!(
                "autogpt-shim: {} must not be readable by group or others (mode 0644); run chmod 600 on it",
                open.display()
            ),
        ),
        (
            vec!["--http", "0", "--http-token-file", empty.to_str().unwrap()],
            format!(
                "autogpt-shim: the HTTP token file {} must hold one token of letters, digits and -._~+/ (at least one character): write one into it, e.g. `openssl rand -hex 32 > {}`",
                empty.display(),
                empty.display()
            ),
        ),
        (
            vec!["--http-token-file", empty.to_str().unwrap()],
            "autogpt-shim: --http-token-file is the token of --http: add --http [PORT], or leave it out to serve stdio".to_owned(),
        ),
        (
            vec!["--http", &port],
            format!(
                "autogpt-shim: port {port} on 127.0.0.1 is already in use: pass another with --http PORT (0 picks a free one)"
            ),
        ),
    ];
    for (args, line) in &cases {
        let mut all = vec!["--allowed-root", root, "mcp"];
        all.extend_from_slice(args);
        let (code, out, err) = run_shim(&place.home(), &all);
        assert_eq!(code, Some(78), "{args:?}: {out}{err}");
        assert_eq!(err.trim_end(), line, "{args:?}");
        assert!(
            !err.contains("tok-open") && !err.contains("two words"),
            "{err}"
        );
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    drop(taken);
}
