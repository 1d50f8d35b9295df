//! `autogpt-shim try`, the platform shipped in the connector's binary, driven as a person
//! would: it prints the `start` command, a real `autogpt-shim start` run with it connects,
//! and the lines typed on its stdin (a ready request's number, or a line) become FILE_WRITE,
//! FILE_READ and EXECUTE_COMMAND whose answers it shows; a connector with another token is
//! refused; in control mode a folder is picked with `folders` and `use N`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use e2e::platform::{Shim, WAIT, fresh_dir, shim_command};

/// A running `autogpt-shim try` whose stdout is read line by line, killed on every way out.
struct Try {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Try {
    fn spawn(home: &Path, extra: &[&str]) -> Self {
        let args: Vec<&str> = ["try", "--port", "0"]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        let mut child = shim_command(home, &args, &[])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The next line containing `needle` (every line read is kept for the failure message).
    fn wait_for(&mut self, needle: &str) -> String {
        loop {
            let Ok(line) = self.lines.recv_timeout(WAIT) else {
                panic!("no {needle:?} in:\n{}", self.seen.join("\n"));
            };
            self.seen.push(line.clone());
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// Waits until every one of `needles` has been in a line, in any order.
    fn wait_for_all(&mut self, needles: &[&str]) {
        let mut missing: Vec<&str> = needles.to_vec();
        while !missing.is_empty() {
            let Ok(line) = self.lines.recv_timeout(WAIT) else {
                panic!("no {missing:?} in:\n{}", self.seen.join("\n"));
            };
            missing.retain(|needle| !line.contains(needle));
            self.seen.push(line);
        }
    }

    fn type_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// The `start` command it printed for a direct session, without the program.
    fn start_command(&mut self) -> Vec<String> {
        let line = self.wait_for(" --session-id ");
        let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        assert!(words[0].ends_with("autogpt-shim"), "{line}");
        words[1..].to_vec()
    }
}

impl Drop for Try {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn try_serves_a_real_start_through_write_read_and_a_command() {
    let home = fresh_dir("shim-try");
    let mut platform = Try::spawn(&home, &[]);
    let args = platform.start_command();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(args.ends_with(&["start", "--enable-shell"]), "{args:?}");
    // The token file it made is private, and the command names it.
    let token = home.join(".local/state/autogpt-local-executor/try/token");
    assert!(args.contains(&&*token.to_string_lossy()), "{args:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&token).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // The allowed root it names is the default one, which the guide creates first.
    let root = home.join("autogpt-workspace");
    assert!(args.contains(&&*root.to_string_lossy()), "{args:?}");
    std::fs::create_dir_all(&root).unwrap();

    // A connector with another token is refused, as the platform refuses one.
    let wrong = home.join("wrong-token");
    std::fs::write(&wrong, "not-the-token\n").unwrap();
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut wrong_args = args.clone();
    let at = wrong_args
        .iter()
        .position(|a| *a == "--token-file")
        .unwrap();
    let wrong_path = wrong.to_string_lossy().into_owned();
    wrong_args[at + 1] = &wrong_path;
    let mut refused = Shim::spawn(&home, &wrong_args, &[]);
    let (status, stderr) = refused.exit().await;
    assert_eq!(status.code(), Some(77), "{stderr}");
    platform.wait_for("Refused a connection: its bearer token is not this platform's (HTTP 401)");

    let mut shim = Shim::spawn(&home, &args, &[]);
    let hello = platform.wait_for("<- HELLO from ");
    assert!(hello.contains(&*root.to_string_lossy()), "{hello}");
    let granted = platform.wait_for("-> HELLO_ACK grants ");
    assert!(granted.contains(r#"["shell","files"]"#), "{granted}");
    platform.wait_for("Ready requests");

    // Ready request 1 (FILE_WRITE) and 2 (FILE_READ) by number.
    platform.type_line("1");
    platform.wait_for("-> FILE_WRITE try-1 ");
    platform.wait_for(r#"<- ACK try-1 ("#);
    assert_eq!(
        std::fs::read_to_string(root.join("hello.txt")).unwrap(),
        "Hello from the try platform"
    );
    platform.type_line("2");
    let read = platform.wait_for("<- FILE_CONTENTS try-2 ");
    assert!(
        read.contains(r#""content":"Hello from the try platform""#),
        "{read}"
    );
    // A command typed as a line.
    platform.type_line("run echo try-ok");
    let ran = platform.wait_for("<- COMMAND_RESULT try-3 ");
    assert!(ran.contains(r#""stdout":"try-ok\n""#), "{ran}");
    // A refusal shows its code and what to do.
    platform.type_line("read ../outside.txt");
    platform.wait_for(r#""code":"PATH_OUTSIDE_ALLOWED_ROOT""#);
    platform.wait_for("use a path relative to it");
    platform.type_line("frobnicate");
    platform.wait_for("unknown command frobnicate; type help for the list");

    platform.type_line("quit");
    platform.wait_for("Closed.");
    assert!(platform.child.wait().unwrap().success());
    shim.signal("TERM");
    let (status, log) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{log}");
    for op in ["FILE_WRITE", "FILE_READ", "EXECUTE_COMMAND"] {
        assert!(log.contains(&format!("op={op} outcome=ok")), "{op}: {log}");
    }
    drop(platform);
    std::fs::remove_dir_all(&home).unwrap();
}

#[tokio::test]
async fn in_control_mode_a_folder_is_picked_and_then_served() {
    let home = fresh_dir("shim-try-control");
    let chat = home.join("chat-folder");
    std::fs::create_dir_all(&chat).unwrap();
    let mut platform = Try::spawn(&home, &[]);
    let direct = platform.start_command();
    // The control-mode command is the direct one without --session-id and --allowed-root.
    let mut args: Vec<&str> = Vec::new();
    let mut words = direct.iter().map(String::as_str);
    while let Some(word) = words.next() {
        if word == "--session-id" || word == "--allowed-root" {
            words.next();
        } else {
            args.push(word);
        }
    }
    let mut shim = Shim::spawn(&home, &args, &[]);
    platform.wait_for("Connected: the control connection (machine control mode).");
    platform.wait_for("use N");
    platform.type_line("folders");
    platform.wait_for("<- DIRECTORY_LIST_RESPONSE try-1 ");
    platform.wait_for(&format!(
        "1  {}",
        home.file_name().unwrap().to_string_lossy()
    ));
    platform.type_line("folders 1");
    let entry = platform.wait_for("chat-folder  (");
    let number = entry.split_whitespace().next().unwrap().to_owned();
    platform.type_line(&format!("use {number}"));
    platform.wait_for("<- SESSION_ATTACHED try-3 ");
    // The child's dial and the activation's answer race each other.
    platform.wait_for_all(&[
        "Connected: a data connection for session try-it.",
        "<- SESSION_ACTIVATED try-4 ",
        "session try-it is active",
        "Ready requests",
    ]);
    platform.type_line("write picked.txt from the chat");
    platform.wait_for("<- ACK try-5 ");
    assert_eq!(
        std::fs::read_to_string(chat.join("picked.txt")).unwrap(),
        "from the chat"
    );
    platform.type_line("quit");
    platform.wait_for("Closed.");
    shim.signal("TERM");
    let (status, log) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{log}");
    drop(platform);
    std::fs::remove_dir_all(&home).unwrap();
}

/// `--send`: the requests given on the command line, then it ends on its own; exit 1 when one
/// of them was answered with an ERROR.
#[tokio::test]
async fn send_mode_runs_the_given_requests_and_ends() {
    let home = fresh_dir("shim-try-send");
    std::fs::create_dir_all(home.join("autogpt-workspace")).unwrap();
    for (lines, code) in [(&["1", "2"][..], 0), (&["read absent.txt"][..], 1)] {
        let mut extra = Vec::new();
        for line in lines {
            extra.extend(["--send", *line]);
        }
        let mut platform = Try::spawn(&home, &extra);
        let args = platform.start_command();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let _shim = Shim::spawn(&home, &args, &[]);
        platform.wait_for("Closed.");
        let status = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                if let Some(status) = platform.child.try_wait().unwrap() {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap();
        assert_eq!(status.code(), Some(code), "{lines:?}: {:#?}", platform.seen);
    }
    std::fs::remove_dir_all(&home).unwrap();
}
