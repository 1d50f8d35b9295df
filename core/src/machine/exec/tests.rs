//! Tests of [`super`] against real processes (`sh`, `bash`, coreutils).

use super::{env::BASELINE_NAMES, output::drop_partial_char, program::find_on_path, *};

use std::path::Path;

use crate::test_dir::TempDir;
use std::time::Instant as StdInstant;

/// A scratch directory removed on drop; canonical so it can serve as a jail-resolved cwd.
struct Scratch(TempDir);

impl Scratch {
    fn new() -> Self {
        Self(TempDir::new("exec-test"))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

fn request(program: Program) -> ExecRequest {
    ExecRequest {
        program,
        cwd: std::env::temp_dir().canonicalize().unwrap(),
        env: BTreeMap::new(),
        timeout: Duration::from_secs(60),
        output_budget: 1024 * 1024,
        sandbox: None,
    }
}

fn sh(command: &str) -> Program {
    Program::Shell {
        shell: ShellKind::Sh,
        command: command.to_owned(),
    }
}

fn argv(args: &[&str]) -> Program {
    Program::Argv(args.iter().map(|&arg| arg.to_owned()).collect())
}

fn daemon_path() -> Option<OsString> {
    std::env::var_os("PATH")
}

/// Gone, or a zombie nobody reaped yet: either way no longer running.
#[cfg(target_os = "linux")]
fn is_dead(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')')
            .is_none_or(|(_, rest)| matches!(rest.trim_start().chars().next(), Some('Z' | 'X')))
    })
}

#[cfg(target_os = "linux")]
async fn wait_dead(pid: u32) -> bool {
    for _ in 0..200 {
        if is_dead(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn pids(text: &str) -> Vec<u32> {
    text.lines()
        .map(|line| line.trim().parse().unwrap())
        .collect()
}

#[tokio::test]
async fn argv_is_executed_without_shell_parsing() {
    let out = run(request(argv(&[
        "printf", "%s\\n", "a b", "$HOME", "*", "'q'",
    ])))
    .await
    .unwrap();
    assert_eq!(out.stdout, "a b\n$HOME\n*\n'q'\n");
    assert_eq!(out.stderr, "");
    assert_eq!(out.exit_code, 0);
    assert!(!out.timed_out);
    assert!(!out.output_truncated);
}

#[tokio::test]
async fn shell_command_runs_a_pipeline() {
    let program = Program::Shell {
        shell: ShellKind::Auto,
        command: "echo hello | tr a-z A-Z".to_owned(),
    };
    let out = run(request(program)).await.unwrap();
    assert_eq!(out.stdout, "HELLO\n");
    assert_eq!(out.exit_code, 0);
}

#[tokio::test]
async fn nonzero_exit_is_a_normal_outcome() {
    let out = run(request(sh("echo out; echo err >&2; exit 3")))
        .await
        .unwrap();
    assert_eq!(out.exit_code, 3);
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");
    assert!(!out.timed_out);
}

#[tokio::test]
async fn death_by_signal_reports_the_negative_signal() {
    let out = run(request(sh("kill -9 $$"))).await.unwrap();
    assert_eq!(out.exit_code, -9);
    assert!(!out.timed_out);
}

#[tokio::test]
async fn the_cwd_is_used_and_checked() {
    let scratch = Scratch::new();
    let mut req = request(argv(&["pwd"]));
    req.cwd = scratch.path().to_path_buf();
    let out = run(req).await.unwrap();
    assert_eq!(out.stdout, format!("{}\n", scratch.path().display()));

    let file = scratch.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let mut req = request(argv(&["pwd"]));
    req.cwd = file;
    let err = run(req).await.unwrap_err();
    assert!(matches!(err, ExecError::CwdNotADirectory), "{err:?}");
    assert_eq!(err.code(), "INTERNAL_ERROR");

    let mut req = request(argv(&["pwd"]));
    req.cwd = scratch.path().join("missing");
    let err = run(req).await.unwrap_err();
    assert!(matches!(err, ExecError::CwdNotFound), "{err:?}");
    assert_eq!(err.code(), "PATH_NOT_FOUND");
}

#[test]
fn shell_table_on_this_os() {
    let path = daemon_path();
    let path = path.as_deref();
    let file_name = |argv: &[OsString]| {
        let program = Path::new(&argv[0]);
        assert!(program.is_absolute(), "{program:?}");
        program.file_name().unwrap().to_owned()
    };

    let bash = resolve_shell(ShellKind::Bash, "echo hi", path).unwrap();
    assert_eq!(file_name(&bash), "bash");
    assert_eq!(bash[1..], [OsString::from("-c"), OsString::from("echo hi")]);

    let auto = resolve_shell(ShellKind::Auto, "echo hi", path).unwrap();
    assert_eq!(auto, bash);

    let sh = resolve_shell(ShellKind::Sh, "echo hi", path).unwrap();
    assert_eq!(file_name(&sh), "sh");
    assert_eq!(sh[1..], bash[1..]);

    match find_on_path(OsStr::new("zsh"), path) {
        Some(zsh) => {
            let argv = resolve_shell(ShellKind::Zsh, "x", path).unwrap();
            assert_eq!(argv, [zsh.into_os_string(), "-c".into(), "x".into()]);
        }
        None => {
            let err = resolve_shell(ShellKind::Zsh, "x", path).unwrap_err();
            assert!(matches!(&err, ExecError::ShellNotAvailable { shell } if shell == "zsh"));
        }
    }
    match find_on_path(OsStr::new("pwsh"), path) {
        Some(pwsh) => {
            let argv = resolve_shell(ShellKind::Pwsh, "x", path).unwrap();
            let expected: Vec<OsString> = vec![
                pwsh.into_os_string(),
                "-NoLogo".into(),
                "-NoProfile".into(),
                "-Command".into(),
                "x".into(),
            ];
            assert_eq!(argv, expected);
        }
        None => {
            let err = resolve_shell(ShellKind::Pwsh, "x", path).unwrap_err();
            assert_eq!(err.code(), "SHELL_NOT_AVAILABLE");
        }
    }

    for (shell, name) in [
        (ShellKind::Powershell, "powershell"),
        (ShellKind::Cmd, "cmd"),
    ] {
        let err = resolve_shell(shell, "secret-command-text", path).unwrap_err();
        assert!(matches!(&err, ExecError::ShellNotAvailable { shell } if shell == name));
        assert_eq!(err.code(), "SHELL_NOT_AVAILABLE");
        assert_eq!(err.to_string(), format!("Shell not available: {name}"));
    }
}

#[test]
fn shell_names_round_trip() {
    for name in ["auto", "bash", "sh", "zsh", "pwsh", "powershell", "cmd"] {
        assert_eq!(ShellKind::from_name(name).unwrap().as_str(), name);
    }
    assert_eq!(ShellKind::from_name("fish"), None);
    assert_eq!(ShellKind::default(), ShellKind::Auto);
}

/// A PATH holding only `sh`: `auto` falls back to it; with no shell at all `auto` fails.
#[tokio::test]
async fn auto_follows_the_childs_path() {
    let only_sh = Scratch::new();
    let real_sh = find_on_path(OsStr::new("sh"), daemon_path().as_deref()).unwrap();
    std::os::unix::fs::symlink(real_sh, only_sh.path().join("sh")).unwrap();
    let empty = Scratch::new();

    let argv = resolve_shell(ShellKind::Auto, "x", Some(only_sh.path().as_os_str())).unwrap();
    assert_eq!(argv[0], only_sh.path().join("sh").into_os_string());
    let err = resolve_shell(ShellKind::Bash, "x", Some(only_sh.path().as_os_str())).unwrap_err();
    assert!(matches!(&err, ExecError::ShellNotAvailable { shell } if shell == "bash"));
    let err = resolve_shell(ShellKind::Auto, "x", Some(empty.path().as_os_str())).unwrap_err();
    assert!(matches!(&err, ExecError::ShellNotAvailable { shell } if shell == "auto"));
    // Relative entries never count, so the current directory cannot provide a shell.
    assert!(resolve_shell(ShellKind::Sh, "x", Some(OsStr::new("."))).is_err());

    // End to end: the wire PATH is what the lookup uses.
    let mut req = request(Program::Shell {
        shell: ShellKind::Auto,
        command: "echo \"$0\"".to_owned(),
    });
    req.env
        .insert("PATH".to_owned(), only_sh.path().display().to_string());
    let out = run(req.clone()).await.unwrap();
    assert_eq!(
        out.stdout,
        format!("{}\n", only_sh.path().join("sh").display())
    );

    req.env
        .insert("PATH".to_owned(), empty.path().display().to_string());
    let err = run(req).await.unwrap_err();
    assert_eq!(err.code(), "SHELL_NOT_AVAILABLE");
}

#[tokio::test]
async fn missing_executables_are_reported() {
    let scratch = Scratch::new();
    std::fs::write(scratch.path().join("data.txt"), "not a program").unwrap();
    let script = scratch.path().join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho \"script $0 $1\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    for program in [
        "definitely-not-a-program-8f3a",
        "/nonexistent/program",
        "./data.txt",
        "./missing.sh",
    ] {
        let mut req = request(argv(&[program, "secret-argument"]));
        req.cwd = scratch.path().to_path_buf();
        let err = run(req).await.unwrap_err();
        assert!(
            matches!(&err, ExecError::ExecutableNotFound { program: p } if p == program),
            "{err:?}"
        );
        assert_eq!(err.code(), "SHELL_NOT_AVAILABLE");
        assert_eq!(err.to_string(), format!("Executable not found: {program}"));
    }

    let err = run(request(Program::Argv(Vec::new()))).await.unwrap_err();
    assert!(matches!(err, ExecError::EmptyArgv));
    assert_eq!(err.code(), "INTERNAL_ERROR");

    // A relative path is taken relative to the request's cwd; argv[0] stays as given.
    let mut req = request(argv(&["./script.sh", "arg"]));
    req.cwd = scratch.path().to_path_buf();
    let out = run(req).await.unwrap();
    // The kernel hands the interpreter the resolved path, so that is what `$0` shows.
    assert_eq!(out.stdout, format!("script {} arg\n", script.display()));

    if cfg!(target_os = "linux") {
        let out = run(request(argv(&["cat", "/proc/self/cmdline"])))
            .await
            .unwrap();
        assert_eq!(out.stdout, "cat\0/proc/self/cmdline\0");
    }
}

fn pairs(entries: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    entries
        .iter()
        .map(|&(name, value)| (name.into(), value.into()))
        .collect()
}

#[test]
fn safe_env_keeps_the_baseline_and_merges_the_wire() {
    let parent = pairs(&[
        ("HOME", "/home/u"),
        ("PATH", "/usr/bin:/bin"),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C"),
        ("LC_CTYPE", "C.UTF-8"),
        ("TMPDIR", "/tmp"),
        ("TZ", "UTC"),
        ("USER", "u"),
        ("SHELL", "/bin/bash"),
        ("SECRET_TOKEN_FOR_TEST", "s3cret"),
        ("AUTOGPT_SHIM_TOKEN", "tok"),
        ("LD_PRELOAD", "/evil.so"),
        ("PYTHONIOENCODING", "latin-1"),
        ("home", "lowercase is another variable on POSIX"),
        ("XLC_ALL", "no"),
    ]);
    let wire: BTreeMap<String, String> = [
        ("MY_VAR", "value with spaces"),
        ("PATH", "/custom/bin"),
        ("PYTHONIOENCODING", "ascii"),
        ("BAD=NAME", "x"),
        ("", "x"),
        ("NUL\0NAME", "x"),
        ("NUL_VALUE", "a\0b"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();

    let env = safe_env(parent, &wire);
    let expected = pairs(&[
        ("HOME", "/home/u"),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C"),
        ("LC_CTYPE", "C.UTF-8"),
        ("MY_VAR", "value with spaces"),
        ("PATH", "/custom/bin"),
        ("PYTHONIOENCODING", "utf-8"),
        ("SHELL", "/bin/bash"),
        ("TMPDIR", "/tmp"),
        ("TZ", "UTC"),
        ("USER", "u"),
    ]);
    assert_eq!(env, expected);

    // Without a parent environment only the wire and the forced encoding remain.
    let env = safe_env(Vec::new(), &BTreeMap::new());
    assert_eq!(env, pairs(&[("PYTHONIOENCODING", "utf-8")]));
}

fn env_lines(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .map(|line| {
            let (name, value) = line.split_once('=').unwrap();
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn the_child_sees_only_the_safe_environment() {
    let mut parent: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    parent.push(("SECRET_TOKEN_FOR_TEST".into(), "s3cret-value".into()));
    parent.push(("AUTOGPT_SHIM_TOKEN".into(), "shim-token".into()));
    let mut req = request(argv(&["env"]));
    req.env
        .insert("MY_VAR".to_owned(), "hello world".to_owned());
    req.env.insert("BAD=NAME".to_owned(), "x".to_owned());
    req.env.insert("NUL_VALUE".to_owned(), "a\0b".to_owned());

    let out = run_with_parent_env(req, parent, supervise::TERM_GRACE)
        .await
        .unwrap();
    assert_eq!(out.exit_code, 0);
    assert!(!out.stdout.contains("s3cret-value"));
    assert!(!out.stdout.contains("shim-token"));
    let seen = env_lines(&out.stdout);
    assert_eq!(seen.get("MY_VAR").map(String::as_str), Some("hello world"));
    assert_eq!(
        seen.get("PYTHONIOENCODING").map(String::as_str),
        Some("utf-8")
    );
    assert_eq!(seen.keys().cloned().collect::<Vec<_>>(), out.env_keys);
    assert!(
        !out.env_keys
            .iter()
            .any(|k| k == "BAD=NAME" || k == "NUL_VALUE")
    );

    // The real daemon environment (cargo sets CARGO_* for tests) is filtered the same way.
    let out = run(request(argv(&["env"]))).await.unwrap();
    for name in env_lines(&out.stdout).keys() {
        assert!(
            BASELINE_NAMES.contains(&name.as_str())
                || name.starts_with("LC_")
                || name == "PYTHONIOENCODING",
            "{name} leaked into the child"
        );
    }
}

#[tokio::test]
async fn stdin_is_closed() {
    let mut req = request(argv(&["cat"]));
    req.timeout = Duration::from_secs(30);
    let out = run(req).await.unwrap();
    assert_eq!(out.stdout, "");
    assert_eq!(out.exit_code, 0);
    assert!(!out.timed_out);
    assert!(out.duration < Duration::from_secs(10));
}

async fn with_budget(program: Program, budget: usize) -> ExecOutcome {
    let mut req = request(program);
    req.output_budget = budget;
    run(req).await.unwrap()
}

fn x_bytes(count: usize) -> Program {
    sh(&format!("head -c {count} /dev/zero | tr '\\0' x"))
}

#[tokio::test]
async fn output_budget_boundary() {
    let marker = OUTPUT_TRUNCATED_MARKER;

    let out = with_budget(x_bytes(100), 100).await;
    assert_eq!(out.stdout, "x".repeat(100));
    assert_eq!(out.stderr, "");
    assert!(!out.output_truncated);

    let out = with_budget(sh("printf aaaa; printf bbbb >&2"), 8).await;
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("aaaa", "bbbb"));
    assert!(!out.output_truncated);

    let out = with_budget(x_bytes(101), 100).await;
    assert!(out.output_truncated);
    assert_eq!(out.stdout, "x".repeat(100 - marker.len()));
    assert_eq!(out.stderr, marker);
    assert!(out.stdout.len() + out.stderr.len() <= 100);

    let out = with_budget(sh("printf aaaa >&2; printf %040d 0"), 32).await;
    assert!(out.output_truncated);
    assert_eq!(out.stdout.len() + out.stderr.len(), 32);
    assert!(out.stderr.ends_with(marker));

    // A budget smaller than the marker keeps what fits of the marker.
    let out = with_budget(x_bytes(10), 5).await;
    assert!(out.output_truncated);
    assert_eq!(out.stdout, "");
    assert_eq!(out.stderr, &marker[..5]);

    let out = with_budget(x_bytes(1), 0).await;
    assert!(out.output_truncated);
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("", ""));
    let out = with_budget(sh("true"), 0).await;
    assert!(!out.output_truncated);
}

#[tokio::test]
async fn truncation_does_not_split_characters() {
    let text = "é".repeat(50);
    let budget = OUTPUT_TRUNCATED_MARKER.len() + 11;
    let out = with_budget(argv(&["printf", "%s", &text]), budget).await;
    assert!(out.output_truncated);
    assert_eq!(out.stdout, "é".repeat(5));
    assert_eq!(out.stderr, OUTPUT_TRUNCATED_MARKER);
}

fn capture(bytes: &[u8], cut: bool) -> Capture {
    Capture {
        bytes: bytes.to_vec(),
        cut,
    }
}

#[test]
fn room_for_the_marker_comes_from_stdout_first() {
    let marker = OUTPUT_TRUNCATED_MARKER.as_bytes();
    let budget = marker.len() + 10;

    let (out, err, truncated) =
        fit_output(capture(b"0123456789", true), capture(b"", false), budget);
    assert!(truncated);
    assert_eq!(out, b"0123456789");
    assert_eq!(err, marker);

    // The streams filled the budget: stdout gives up everything before stderr gives up a byte.
    let (out, err, _) = fit_output(
        capture(&[b'o'; 20], true),
        capture(&[b'e'; 18], false),
        budget,
    );
    assert!(out.is_empty());
    assert_eq!(err, [&[b'e'; 10][..], marker].concat());

    let (out, err, _) = fit_output(
        capture(&[b'o'; 30], false),
        capture(&[b'e'; 8], true),
        budget,
    );
    assert_eq!(out, b"oo");
    assert_eq!(err, [&[b'e'; 8][..], marker].concat());
    assert_eq!(out.len() + err.len(), budget);

    // Untruncated output is returned untouched, however close to the budget.
    let (out, err, truncated) = fit_output(capture(b"ab", false), capture(b"cd", false), 4);
    assert!(!truncated);
    assert_eq!((out.as_slice(), err.as_slice()), (&b"ab"[..], &b"cd"[..]));
}

#[test]
fn partial_characters_are_dropped_only_at_the_end() {
    let mut bytes = "aé".as_bytes()[..2].to_vec();
    drop_partial_char(&mut bytes);
    assert_eq!(bytes, b"a");
    let mut bytes = "a€".as_bytes().to_vec();
    drop_partial_char(&mut bytes);
    assert_eq!(bytes, "a€".as_bytes());
    let mut bytes = "😀".as_bytes()[..3].to_vec();
    drop_partial_char(&mut bytes);
    assert!(bytes.is_empty());
    let mut bytes = vec![b'a', 0x80, 0x80, 0x80, 0x80];
    drop_partial_char(&mut bytes);
    assert_eq!(bytes.len(), 5);
}

#[tokio::test]
async fn large_concurrent_output_does_not_deadlock() {
    let budget = 1024 * 1024;
    let mut req = request(sh(
        "head -c 5000000 /dev/zero | tr '\\0' a & head -c 5000000 /dev/zero | tr '\\0' b >&2; wait",
    ));
    req.output_budget = budget;
    req.timeout = Duration::from_secs(120);
    let out = run(req).await.unwrap();
    assert!(!out.timed_out);
    assert_eq!(out.exit_code, 0);
    assert!(out.output_truncated);
    assert!(out.stdout.len() + out.stderr.len() <= budget);
    assert!(out.stdout.bytes().all(|b| b == b'a'));
    let stderr = out.stderr.strip_suffix(OUTPUT_TRUNCATED_MARKER).unwrap();
    assert!(stderr.bytes().all(|b| b == b'b'));
    assert!(out.stdout.len() + stderr.len() + OUTPUT_TRUNCATED_MARKER.len() == budget);
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn timeout_kills_a_group_that_ignores_sigterm() {
    let mut req = request(sh("echo $$; trap '' TERM; sleep 30 & echo $!; wait"));
    req.timeout = Duration::from_secs(1);
    let started = StdInstant::now();
    let out = with_grace(req, Duration::from_secs(2)).await;
    let elapsed = started.elapsed();

    assert!(out.timed_out);
    assert_eq!(out.exit_code, -1);
    // The 1 s timeout plus the full 2 s grace, since SIGTERM is ignored; well before the
    // 30 s sleep would have ended on its own.
    assert!(elapsed >= Duration::from_millis(2900), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(25), "{elapsed:?}");
    assert!(out.duration <= elapsed);
    let pids = pids(&out.stdout);
    assert_eq!(pids.len(), 2, "{}", out.stdout);
    for pid in pids {
        assert!(wait_dead(pid).await, "{pid} survived the timeout");
    }
}

/// Runs `req` with SIGTERM's grace set to `grace`.
async fn with_grace(req: ExecRequest, grace: Duration) -> ExecOutcome {
    run_with_parent_env(req, std::env::vars_os().collect(), grace)
        .await
        .unwrap()
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn timeout_returns_as_soon_as_the_group_obeys_sigterm() {
    let mut req = request(sh("sleep 30 & echo $!; wait"));
    req.timeout = Duration::from_secs(1);
    let started = StdInstant::now();
    // A grace of a minute: waiting it out instead of returning when the group obeyed would
    // take over 60 s, a margin no loaded machine closes (the reference always sleeps it).
    let out = with_grace(req, Duration::from_secs(60)).await;
    let elapsed = started.elapsed();

    assert!(out.timed_out);
    assert_eq!(out.exit_code, -1);
    assert!(elapsed >= Duration::from_secs(1), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(25), "{elapsed:?}");
    for pid in pids(&out.stdout) {
        assert!(wait_dead(pid).await);
    }
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_background_process_holding_the_pipe_does_not_hang() {
    let started = StdInstant::now();
    let out = run(request(sh("sleep 30 & echo $!"))).await.unwrap();
    let elapsed = started.elapsed();

    assert!(!out.timed_out);
    assert_eq!(out.exit_code, 0);
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    let pids = pids(&out.stdout);
    assert_eq!(pids.len(), 1);
    assert!(wait_dead(pids[0]).await, "the pipe holder was not killed");
}

/// A background process that does not hold the pipes is left alone, as in the reference.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_detached_background_process_is_left_running() {
    let started = StdInstant::now();
    let out = run(request(sh("sleep 30 >/dev/null 2>&1 & echo $!")))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    let pid = pids(&out.stdout)[0];
    let alive = !is_dead(pid);
    let raw = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    let _ = rustix::process::kill_process(raw, rustix::process::Signal::KILL);
    assert!(alive);
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn dropping_the_future_kills_the_whole_group() {
    let scratch = Scratch::new();
    let mut req = request(sh(
        "echo $$ > pids.tmp; sleep 30 & echo $! >> pids.tmp; mv pids.tmp pids; wait",
    ));
    req.cwd = scratch.path().to_path_buf();
    let task = tokio::spawn(run(req));

    let pid_file = scratch.path().join("pids");
    let mut content = String::new();
    for _ in 0..400 {
        if let Ok(text) = std::fs::read_to_string(&pid_file) {
            content = text;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let pids = pids(&content);
    assert_eq!(pids.len(), 2, "{content:?}");
    assert!(pids.iter().all(|&pid| !is_dead(pid)));

    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    for pid in pids {
        assert!(wait_dead(pid).await, "{pid} survived the dropped request");
    }
}

#[tokio::test]
async fn duration_is_measured() {
    let started = StdInstant::now();
    let out = run(request(sh("sleep 0.3"))).await.unwrap();
    assert!(out.duration >= Duration::from_millis(300));
    assert!(out.duration <= started.elapsed());

    let mut req = request(sh("true"));
    req.timeout = Duration::MAX;
    let out = run(req).await.unwrap();
    assert_eq!(out.exit_code, 0);
    assert!(!out.timed_out);
}

#[test]
fn debug_output_hides_command_text_and_env_values() {
    let mut req = request(sh("echo secret-command-text"));
    req.env
        .insert("NAME".to_owned(), "secret-env-value".to_owned());
    let debug = format!("{req:?}");
    assert!(!debug.contains("secret-command-text"), "{debug}");
    assert!(!debug.contains("secret-env-value"), "{debug}");
    assert!(debug.contains("NAME"));
    let debug = format!("{:?}", argv(&["tool", "--password=hunter2"]));
    assert!(!debug.contains("hunter2"));
}

#[test]
fn limiter_concurrency_boundary() {
    let limiter = CommandLimiter::new(2, 100);
    let now = StdInstant::now();
    let a = limiter.try_acquire_at(now).unwrap();
    let b = limiter.try_acquire_at(now).unwrap();
    let refused = limiter.try_acquire_at(now).unwrap_err();
    assert_eq!(refused, LimitExceeded::Concurrency { max: 2 });
    assert_eq!(refused.code(), "SHIM_OVERLOADED");
    assert_eq!(limiter.running(), 2);

    drop(a);
    assert_eq!(limiter.running(), 1);
    let c = limiter.try_acquire_at(now).unwrap();
    // A clone shares the limits.
    let shared = limiter.clone();
    assert!(shared.try_acquire_at(now).is_err());
    drop((b, c));
    assert_eq!(limiter.running(), 0);
    assert!(limiter.try_acquire().is_ok());
}

#[test]
fn limiter_rate_window_slides() {
    let limiter = CommandLimiter::new(10, 3);
    let t0 = StdInstant::now();
    for offset in [0, 10, 20] {
        drop(
            limiter
                .try_acquire_at(t0 + Duration::from_secs(offset))
                .unwrap(),
        );
    }
    let refused = limiter
        .try_acquire_at(t0 + Duration::from_secs(30))
        .unwrap_err();
    assert_eq!(refused, LimitExceeded::RateLimit { per_minute: 3 });
    assert_eq!(refused.code(), "SHIM_OVERLOADED");
    assert!(
        limiter
            .try_acquire_at(t0 + Duration::from_millis(59_999))
            .is_err()
    );
    // The start at t0 leaves the window exactly 60 s later.
    let permit = limiter
        .try_acquire_at(t0 + Duration::from_secs(60))
        .unwrap();
    assert!(
        limiter
            .try_acquire_at(t0 + Duration::from_secs(61))
            .is_err()
    );
    drop(permit);
    assert!(limiter.try_acquire_at(t0 + Duration::from_secs(71)).is_ok());
}

#[test]
fn limiter_checks_the_rate_before_concurrency() {
    let limiter = CommandLimiter::new(1, 1);
    let now = StdInstant::now();
    let _held = limiter.try_acquire_at(now).unwrap();
    assert_eq!(
        limiter.try_acquire_at(now).unwrap_err(),
        LimitExceeded::RateLimit { per_minute: 1 }
    );
    // Once the window has moved on, the running command is what refuses.
    assert_eq!(
        limiter
            .try_acquire_at(now + Duration::from_secs(60))
            .unwrap_err(),
        LimitExceeded::Concurrency { max: 1 }
    );
}
