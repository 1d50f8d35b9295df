//! A small example platform for trying the connector by hand, without the agent platform:
//! it listens on loopback, takes one `autogpt-shim` connection, completes the handshake
//! (granting `files`, and `shell` when the shim offers it), then turns lines typed on stdin
//! into requests and prints each reply. Walked through in docs/connector.md.
//!
//! `cargo run -p e2e --example platform -- [--port 8770] [--session-id try-it]`

use std::io::BufRead;
use std::net::SocketAddr;
use std::process::ExitCode;

use e2e::platform::{Conn, Platform};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const USAGE: &str = "usage: platform [--port N] [--session-id ID]";

const HELP: &str = "\
Type one request a line:
  read PATH              FILE_READ
  write PATH TEXT...     FILE_WRITE (parent folders created)
  list [PATH]            FILE_LIST (default: the allowed root)
  stat PATH              FILE_STAT
  delete PATH            FILE_DELETE
  run COMMAND...         EXECUTE_COMMAND through the default shell (needs --enable-shell)
  send TYPE JSON         any request type with a JSON payload
  help                   this list
  quit                   close the connection (end of input does too)";

struct Options {
    port: u16,
    session_id: String,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        port: 8770,
        session_id: "try-it".to_owned(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or(format!("{flag} needs a value; {USAGE}"))?;
        match flag.as_str() {
            "--port" => {
                options.port = value
                    .parse()
                    .map_err(|_| format!("--port takes a number from 1 to 65535; {USAGE}"))?;
            }
            "--session-id" => options.session_id = value,
            _ => return Err(format!("unknown option {flag}; {USAGE}")),
        }
    }
    Ok(options)
}

/// One typed line as a request type and payload; `Err` says what was wrong with the line.
fn request(line: &str) -> Result<(String, Value), String> {
    let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
    let rest = rest.trim();
    let need = |what: &str| {
        if rest.is_empty() {
            Err(format!("{word} needs {what}; type help for the list"))
        } else {
            Ok(())
        }
    };
    let (kind, payload) = match word {
        "read" => {
            need("a path")?;
            ("FILE_READ", json!({"path": rest}))
        }
        "write" => {
            let (path, text) = rest
                .split_once(' ')
                .ok_or("write needs a path and the text to write; type help for the list")?;
            (
                "FILE_WRITE",
                json!({"path": path, "content": text, "create_parents": true}),
            )
        }
        "list" => (
            "FILE_LIST",
            json!({"path": if rest.is_empty() { "." } else { rest }}),
        ),
        "stat" => {
            need("a path")?;
            ("FILE_STAT", json!({"path": rest}))
        }
        "delete" => {
            need("a path")?;
            ("FILE_DELETE", json!({"path": rest}))
        }
        "run" => {
            need("a command")?;
            ("EXECUTE_COMMAND", json!({"command": rest}))
        }
        "send" => {
            let (kind, payload) = rest
                .split_once(' ')
                .ok_or("send needs a message type and a JSON payload")?;
            let payload: Value = serde_json::from_str(payload).map_err(|err| {
                format!(
                    "the payload is not JSON ({err}); try send FILE_STAT {{\"path\": \"a.txt\"}}"
                )
            })?;
            return Ok((kind.to_owned(), payload));
        }
        _ => return Err(format!("unknown command {word}; type help for the list")),
    };
    Ok((kind.to_owned(), payload))
}

/// Sends one request and prints everything up to its reply (STATUS frames in between are
/// shown as one line). `false` when the shim has closed the connection.
async fn exchange(conn: &mut Conn, id: &str, kind: &str, payload: Value) -> bool {
    conn.request(kind, id, payload).await;
    loop {
        match conn.next().await {
            Ok(frame) if frame["type"] == "STATUS" => {
                println!("(STATUS: {})", frame["payload"]);
            }
            Ok(frame) => {
                let text = serde_json::to_string_pretty(&frame).unwrap_or_default();
                println!("{text}");
                if frame["id"] == id {
                    return true;
                }
            }
            Err(code) => {
                let code = code.map_or("none".to_owned(), |code| code.to_string());
                println!("The connector closed the connection (close code {code}).");
                return false;
            }
        }
    }
}

async fn run(options: Options) -> Result<(), String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], options.port));
    let platform = Platform::bind_at(addr)
        .await
        .map_err(|err| format!("cannot listen on {addr} ({err}); pick another port with --port"))?;
    let url = platform.url();
    println!("Example platform listening on {url}.");
    println!("In another shell, start the connector against it, for example:");
    println!(
        "  autogpt-shim --platform-url {url} --session-id {} --allowed-root ~/autogpt-workspace start --enable-shell",
        options.session_id
    );
    let (conn, seen) = platform.accept_patiently().await.map_err(|err| {
        format!("accepting the connection failed ({err}); start the example again")
    })?;
    let mut conn = conn.ok_or("the WebSocket upgrade failed; start the example again")?;
    let expected = format!("/ws/local-executor/{}", options.session_id);
    if seen.path != expected {
        println!(
            "Note: the connector dialled {}, not {expected}; answering anyway.",
            seen.path
        );
    }
    // Whether a bearer came, never the token itself.
    println!(
        "Connected (bearer token {}).",
        if seen.authorization.is_some() {
            "present"
        } else {
            "absent"
        }
    );
    let hello = match conn.next().await {
        Ok(hello) if hello["type"] == "HELLO" => hello,
        Ok(other) => return Err(format!("expected HELLO, got {}", other["type"])),
        Err(_) => return Err("the connector closed before its HELLO".to_owned()),
    };
    let offered: Vec<&str> = hello["payload"]["capabilities"]
        .as_array()
        .map(|caps| caps.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let grants: Vec<&str> = ["files", "shell"]
        .into_iter()
        .filter(|cap| offered.contains(cap))
        .collect();
    conn.acknowledge(
        &hello,
        json!(options.session_id),
        Value::Null,
        &grants,
        |_| {},
    )
    .await;
    let payload = &hello["payload"];
    println!(
        "HELLO from {} on {} (connector {}), allowed root {}; offered {offered:?}, granted {grants:?}.",
        payload["display_name"],
        payload["platform"],
        payload["shim_version"],
        payload["allowed_root"]
    );
    println!("{HELP}");

    // stdin is read on its own thread: the async side keeps the socket.
    let (lines_tx, mut lines) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut count = 0_u32;
    while let Some(line) = lines.recv().await {
        let line = line.trim();
        match line {
            "" => continue,
            "quit" => break,
            "help" => {
                println!("{HELP}");
                continue;
            }
            _ => {}
        }
        match request(line) {
            Ok((kind, payload)) => {
                count += 1;
                if !exchange(&mut conn, &format!("req-{count}"), &kind, payload).await {
                    return Ok(());
                }
            }
            Err(problem) => println!("{problem}"),
        }
    }
    conn.close(1000).await;
    println!("Closed the connection (1000).");
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let result = match options() {
        Ok(options) => run(options).await,
        Err(problem) => Err(problem),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(problem) => {
            eprintln!("platform: {problem}");
            ExitCode::FAILURE
        }
    }
}
