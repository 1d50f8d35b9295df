//! The example platform of docs/connector.md (`cargo run -p e2e --example platform`) driven as
//! a person would: it prints where it listens, the real `autogpt-shim` dials it, and lines
//! typed on its stdin become requests whose replies it prints.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use e2e::platform::{Shim, binary, fresh_dir};

#[test]
fn the_example_platform_serves_a_person_typing_requests() {
    let home = fresh_dir("example-platform");
    let root = home.join("workspace");
    std::fs::create_dir_all(&root).unwrap();
    let example = binary("examples/platform");
    let mut platform = Command::new(example)
        .args(["--port", "0", "--session-id", "try-1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = platform.stdout.take().unwrap();
    let (lines_tx, lines) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut wait_for = |needle: &str| -> String {
        loop {
            let line = lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no {needle:?} in {seen:#?}"));
            seen.push(line.clone());
            if line.contains(needle) {
                return line;
            }
        }
    };
    let listening = wait_for("listening on ws://");
    let url = listening
        .split_whitespace()
        .find(|word| word.starts_with("ws://"))
        .unwrap()
        .trim_end_matches('.')
        .to_owned();
    let root_arg = root.to_string_lossy().into_owned();
    let shim = Shim::spawn(
        &home,
        &[
            "--platform-url",
            &url,
            "--session-id",
            "try-1",
            "--allowed-root",
            &root_arg,
            "start",
            "--enable-shell",
        ],
        &[],
    );
    let granted = wait_for("granted");
    assert!(granted.contains(r#"["files", "shell"]"#), "{granted}");
    let mut stdin = platform.stdin.take().unwrap();
    writeln!(stdin, "write notes/a.txt hello from the example").unwrap();
    wait_for(r#""type": "ACK""#);
    assert_eq!(
        std::fs::read_to_string(root.join("notes/a.txt")).unwrap(),
        "hello from the example"
    );
    writeln!(stdin, "read notes/a.txt").unwrap();
    wait_for(r#""content": "hello from the example""#);
    writeln!(stdin, "list notes").unwrap();
    wait_for(r#""name": "a.txt""#);
    writeln!(stdin, "run echo shell-ok").unwrap();
    wait_for(r#""stdout": "shell-ok\n""#);
    writeln!(stdin, "read ../outside.txt").unwrap();
    wait_for(r#""code": "PATH_OUTSIDE_ALLOWED_ROOT""#);
    writeln!(stdin, "frobnicate").unwrap();
    wait_for("unknown command frobnicate; type help for the list");
    writeln!(stdin, "quit").unwrap();
    wait_for("Closed the connection (1000).");
    let status = platform.wait().unwrap();
    assert!(status.success(), "{status}");
    reader.join().unwrap();
    // The shim reconnects after the close and would write into its home again.
    drop(shim);
    std::fs::remove_dir_all(&home).unwrap();
}
