//! Tests of [`super`]: one lock per instance, the survey of the daemons folder, and the
//! `now:` section for a running, a cleanly stopped, a crashed and a never-started daemon.

use super::super::audit::test_dir::TempDir;
use super::*;

fn status(pid: u32, state: DaemonState) -> DaemonStatus {
    DaemonStatus {
        pid,
        state,
        mode: "legacy".to_owned(),
        session_id: Some("s-1".to_owned()),
        platform_url: redact_url("wss://user:secret@platform.example/base?token=x"),
        allowed_root: Some("/home/me/autogpt-workspace".to_owned()),
        live_sessions: None,
        since: 1_712_345_678.5,
        last_error: None,
        stop_reason: None,
        exit_code: None,
        updated_at: 1_712_345_700.0,
    }
}

fn now(dir: &Path) -> (u8, String) {
    let survey = survey(dir);
    let mut out = Vec::new();
    print_now(&survey, dir, &mut out).unwrap();
    (survey.code(), String::from_utf8(out).unwrap())
}

#[test]
fn one_daemon_per_instance_and_the_second_is_told_the_first_ones_pid() {
    let dir = TempDir::new("status-claim");
    let daemons = dir.join("daemons");
    let session = Instance::Session("s-1".to_owned());
    let held = claim(&daemons, &session).unwrap();
    let refused = claim(&daemons, &session).unwrap_err();
    assert!(
        refused.starts_with(&format!(
            "a daemon for direct session s-1 is already running (pid {})",
            std::process::id()
        )),
        "{refused}"
    );
    // Another session, and control mode, are other instances.
    let other = claim(&daemons, &Instance::Session("s-2".to_owned())).unwrap();
    let control = claim(&daemons, &Instance::Control).unwrap();
    assert!(claim(&daemons, &Instance::Control).is_err());
    drop((held, other, control));
    drop(claim(&daemons, &session).unwrap());
}

#[test]
fn instance_files_have_portable_names() {
    let long = "a".repeat(200) + ":b";
    for instance in [
        Instance::Control,
        Instance::Session("s-1".to_owned()),
        Instance::Session(long),
    ] {
        let key = instance.key();
        assert!(key.len() <= 24, "{key}");
        assert!(
            key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'),
            "{key}"
        );
    }
    assert_ne!(
        Instance::Session("a:b".to_owned()).key(),
        Instance::Session("a_b".to_owned()).key()
    );
    assert_eq!(Instance::of(None), Instance::Control);
}

#[test]
fn a_running_daemon_is_one_whose_lock_is_held() {
    let dir = TempDir::new("status-running");
    let daemons = dir.join("daemons");
    let (code, out) = now(&daemons);
    assert_eq!(code, EXIT_NOT_RUNNING);
    assert!(
        out.starts_with("now: not running (no daemon has run as this user yet"),
        "{out}"
    );

    let session = Instance::Session("s-1".to_owned());
    let lock = claim(&daemons, &session).unwrap();
    let path = session.status_file(&daemons);
    write(&path, &status(std::process::id(), DaemonState::Connected)).unwrap();
    let (code, out) = now(&daemons);
    assert_eq!(code, EXIT_RUNNING, "{out}");
    assert_eq!(
        out,
        format!(
            "now: running (pid {}), direct session s-1\n  state: connected since 2024-04-05T19:34:38.500000+00:00\n  \
             platform: wss://platform.example/base\n  allowed root: /home/me/autogpt-workspace\n  \
             last error: none\n",
            std::process::id()
        )
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        #[allow(clippy::disallowed_methods, reason = "the test inspects the mode")]
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // The lock released without a clean stop: a crash, whatever the file says.
    drop(lock);
    let (code, out) = now(&daemons);
    assert_eq!(code, EXIT_NOT_RUNNING, "{out}");
    assert!(
        out.contains("ended without stopping cleanly (it crashed or was killed) while connected"),
        "{out}"
    );

    // A clean stop says so, with its reason and no error.
    let mut stopped = status(std::process::id(), DaemonState::Stopped);
    stopped.stop_reason = Some("stopped by Ctrl-C or SIGTERM".to_owned());
    stopped.exit_code = Some(0);
    write(&path, &stopped).unwrap();
    let (code, out) = now(&daemons);
    assert_eq!(code, EXIT_NOT_RUNNING, "{out}");
    assert!(out.starts_with("now: not running\n"), "{out}");
    assert!(
        out.contains(&format!(
            "  last daemon: pid {}, direct session s-1, stopped at 2024-04-05T19:34:38.500000+00:00 (stopped by Ctrl-C or SIGTERM)",
            std::process::id()
        )),
        "{out}"
    );
    assert!(!out.contains("last error"), "{out}");
}

#[test]
fn control_mode_reports_no_root_and_its_live_sessions_and_garbage_is_unknown() {
    let dir = TempDir::new("status-control");
    let daemons = dir.join("daemons");
    let _lock = claim(&daemons, &Instance::Control).unwrap();
    let mut control = status(std::process::id(), DaemonState::Connected);
    control.mode = "control".to_owned();
    control.session_id = None;
    control.allowed_root = None;
    control.live_sessions = Some(3);
    write(&Instance::Control.status_file(&daemons), &control).unwrap();
    let (code, out) = now(&daemons);
    assert_eq!(code, EXIT_RUNNING, "{out}");
    assert!(out.contains(", machine control mode\n"), "{out}");
    assert!(
        out.contains("  allowed root: none (each chat's session is jailed to the folder picked for it)\n  live sessions: 3\n"),
        "{out}"
    );

    let other = TempDir::new("status-garbage");
    own_files::write_atomic(&other.join("control.json"), b"{\"pid\": 1}", 0o600).unwrap();
    let (code, out) = now(other.path());
    assert_eq!(code, EXIT_UNKNOWN, "{out}");
    assert!(
        out.contains("unreadable: ") && out.contains("is not a daemon status file"),
        "{out}"
    );
}

#[test]
fn urls_lose_credentials() {
    assert_eq!(
        redact_url(" wss://a:b@host:443/x/y?token=t#frag "),
        "wss://host:443/x/y"
    );
    assert_eq!(redact_url("https://host"), "https://host");
    assert_eq!(redact_url("wss://u@h/p@q"), "wss://h/p@q");
    assert_eq!(redact_url("no scheme?x"), "no scheme");
}
