//! `autogpt-shim status`: whether a daemon is running for this user, read from the status file
//! the daemon keeps up to date, which the reference lacked (it could not tell; section 19).
//!
//! The daemon rewrites the file atomically (mode 0600) on every state change with [`write()`];
//! [`report`] trusts it only as far as its pid is alive. The exit codes follow `systemctl
//! is-active` and the LSB `status` convention: 0 running, 3 not running, 4 status unknown.

use std::io::{self, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use local_core::machine::{audit_chain, own_files};
use serde::{Deserialize, Serialize};

/// Exit code: a daemon is running.
pub const EXIT_RUNNING: u8 = 0;
/// Exit code: no daemon is running (never started, stopped, or gone without a trace).
pub const EXIT_NOT_RUNNING: u8 = 3;
/// Exit code: the status file exists but cannot be read or understood.
pub const EXIT_UNKNOWN: u8 = 4;

/// The status file is a few hundred bytes; anything far larger is not ours.
const STATUS_CAP: u64 = 64 * 1024;

/// Where the daemon is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DaemonState {
    /// Reading its stored OAuth tokens (the keyring) before the first dial; a start with a
    /// configured token goes straight to `Connecting`.
    Starting,
    /// Dialling the platform for the first time.
    Connecting,
    /// The platform accepted HELLO; serving requests.
    Connected,
    /// Lost the connection and waiting to dial again.
    Reconnecting,
    /// Exited cleanly; the last write before it does.
    Stopped,
}

impl DaemonState {
    /// The name written in the file.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Connecting => "connecting",
            Self::Connected => "connected",
            Self::Reconnecting => "reconnecting",
            Self::Stopped => "stopped",
        }
    }
}

/// What the daemon last said about itself. Metadata only: no token, and the platform URL
/// without credentials (see [`redact_url`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonStatus {
    /// The daemon's process id.
    pub pid: u32,
    /// Its state.
    pub state: DaemonState,
    /// `legacy` (direct session) or `control`.
    pub mode: String,
    /// The legacy session id, if any.
    pub session_id: Option<String>,
    /// The platform URL, without user info, query or fragment.
    pub platform_url: String,
    /// The jail root of a legacy session; null in control mode, where each child session is
    /// jailed to the folder its chat picked.
    pub allowed_root: Option<String>,
    /// Control mode: how many child sessions are live (absent for a legacy session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_sessions: Option<usize>,
    /// When the current state began, in epoch seconds.
    pub since: f64,
    /// The last connection or start-up error, if any; never secret-bearing text.
    pub last_error: Option<String>,
    /// When this was written, in epoch seconds.
    pub updated_at: f64,
}

/// Replaces the status file at `path` atomically, mode 0600 (parents created 0700).
///
/// # Errors
/// The file cannot be written.
pub fn write(path: &Path, status: &DaemonStatus) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(status).map_err(io::Error::other)?;
    bytes.push(b'\n');
    // Not fsynced: it is rewritten at every state change, on the start path too, and says
    // nothing true after a crash.
    own_files::write_atomic_unsynced(path, &bytes, own_files::PRIVATE_FILE_MODE)
}

/// What the status file says about the last daemon, for the text and the JSON report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastRun {
    /// [`EXIT_RUNNING`], [`EXIT_NOT_RUNNING`] or [`EXIT_UNKNOWN`]: `status`'s exit code.
    #[serde(skip)]
    pub code: u8,
    /// Whether a daemon is running now.
    pub running: bool,
    /// One line: `running (pid 42)`, `not running (stopped cleanly; ...)`, ...
    pub summary: String,
    /// The status file.
    pub status_file: String,
    /// What the daemon last wrote, when the file could be read.
    pub daemon: Option<DaemonStatus>,
}

/// Reads the status file: a daemon is running when the file exists, its pid is alive and it
/// has not reported `stopped`. `is_alive` is [`pid_alive`] outside tests.
///
/// A pid reused by an unrelated process makes a crashed daemon's file look alive; the state
/// and `updated_at` lines let the reader judge.
pub fn last_run(path: &Path, is_alive: impl Fn(u32) -> bool) -> LastRun {
    let unknown = |summary: String| LastRun {
        code: EXIT_UNKNOWN,
        running: false,
        summary,
        status_file: path.display().to_string(),
        daemon: None,
    };
    let bytes = match own_files::read_capped(path, STATUS_CAP) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            return LastRun {
                code: EXIT_NOT_RUNNING,
                ..unknown(format!(
                    "not running: no daemon has run as this user yet (no status file at {})",
                    path.display()
                ))
            };
        }
        Err(err) => {
            return unknown(format!("status unknown: {err}"));
        }
    };
    let status: DaemonStatus = match serde_json::from_slice(&bytes) {
        Ok(status) => status,
        Err(err) => {
            return unknown(format!(
                "status unknown: {} is not a daemon status file ({err})",
                path.display()
            ));
        }
    };
    let alive = status.state != DaemonState::Stopped && is_alive(status.pid);
    let summary = if alive {
        format!("running (pid {})", status.pid)
    } else if status.state == DaemonState::Stopped {
        format!("not running (stopped cleanly; last pid {})", status.pid)
    } else {
        format!(
            "not running (stale status from pid {}: the daemon exited without updating it, so it crashed or was killed)",
            status.pid
        )
    };
    LastRun {
        code: if alive {
            EXIT_RUNNING
        } else {
            EXIT_NOT_RUNNING
        },
        running: alive,
        summary,
        status_file: path.display().to_string(),
        daemon: Some(status),
    }
}

/// Prints the "last run" section: whether a daemon is running, with its last state, since
/// when, and its last error. Returns the exit code of [`LastRun::code`].
pub fn report(path: &Path, out: &mut dyn Write, is_alive: impl Fn(u32) -> bool) -> u8 {
    let last = last_run(path, is_alive);
    match print_last_run(&last, out) {
        Ok(()) => last.code,
        Err(_) => EXIT_UNKNOWN,
    }
}

/// Prints the "last run" section of `last`.
///
/// # Errors
/// The report cannot be printed.
pub fn print_last_run(last: &LastRun, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "last run: {}", last.summary)?;
    let Some(status) = &last.daemon else {
        return Ok(());
    };
    let state_label = if last.running { "state" } else { "last state" };
    writeln!(
        out,
        "  {state_label}: {} since {}",
        status.state.as_str(),
        audit_chain::format_epoch(status.since)
    )?;
    match &status.session_id {
        Some(session) => writeln!(out, "  mode: {} (session {session})", status.mode)?,
        None => writeln!(out, "  mode: {}", status.mode)?,
    }
    writeln!(out, "  platform: {}", status.platform_url)?;
    match (&status.allowed_root, status.live_sessions) {
        (Some(root), _) => writeln!(out, "  allowed root: {root}")?,
        (None, live) => {
            writeln!(
                out,
                "  allowed root: none (each session is jailed to the folder its chat picked)"
            )?;
            if let Some(live) = live {
                writeln!(out, "  live sessions: {live}")?;
            }
        }
    }
    writeln!(
        out,
        "  last error: {}",
        status.last_error.as_deref().unwrap_or("none")
    )?;
    writeln!(
        out,
        "  updated: {}",
        audit_chain::format_epoch(status.updated_at)
    )
}

/// Whether a process with this pid exists. `kill(pid, 0)` answering `EPERM` means it exists
/// but belongs to someone else, so that counts as alive.
#[cfg(unix)]
#[must_use]
pub fn pid_alive(pid: u32) -> bool {
    use rustix::process::{Pid, test_kill_process};
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    match test_kill_process(pid) {
        Ok(()) => true,
        Err(err) => err == rustix::io::Errno::PERM,
    }
}

/// Without a portable liveness check, every status file reads as stale rather than running.
#[cfg(not(unix))]
#[must_use]
pub const fn pid_alive(_pid: u32) -> bool {
    false
}

/// `at` in epoch seconds, as [`DaemonStatus::since`] and [`DaemonStatus::updated_at`] hold it.
#[must_use]
pub fn epoch_seconds(at: SystemTime) -> f64 {
    match at.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    }
}

/// A URL fit for the status file and for printing: user info (`user:password@`), query and
/// fragment removed, since any of them may carry a credential.
#[must_use]
pub fn redact_url(url: &str) -> String {
    let url = url.trim();
    let cut = url.find(['?', '#']).unwrap_or(url.len());
    let url = &url[..cut];
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
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
            last_error: Some("connection failed: refused".to_owned()),
            updated_at: 1_712_345_700.0,
        }
    }

    fn run(path: &Path, is_alive: impl Fn(u32) -> bool) -> (u8, String) {
        let mut out = Vec::new();
        let code = report(path, &mut out, is_alive);
        (code, String::from_utf8(out).unwrap())
    }

    #[test]
    fn our_own_pid_is_running() {
        let dir = TempDir::new("status-running");
        let path = dir.join("state/status.json");
        write(&path, &status(std::process::id(), DaemonState::Connected)).unwrap();
        let (code, out) = run(&path, pid_alive);
        assert_eq!(code, EXIT_RUNNING, "{out}");
        assert_eq!(
            out,
            format!(
                "last run: running (pid {})\n  state: connected since 2024-04-05T19:34:38.500000+00:00\n  \
                 mode: legacy (session s-1)\n  platform: wss://platform.example/base\n  \
                 allowed root: /home/me/autogpt-workspace\n  \
                 last error: connection failed: refused\n  \
                 updated: 2024-04-05T19:35:00.000000+00:00\n",
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

        // A clean stop wins over a live pid.
        write(&path, &status(std::process::id(), DaemonState::Stopped)).unwrap();
        let (code, out) = run(&path, pid_alive);
        assert_eq!(code, EXIT_NOT_RUNNING);
        assert!(
            out.starts_with("last run: not running (stopped cleanly"),
            "{out}"
        );
        assert!(out.contains("  last state: stopped since "), "{out}");
    }

    #[cfg(unix)]
    #[test]
    // The test needs a pid that surely belonged to a process that has exited.
    #[allow(clippy::disallowed_methods)]
    fn a_dead_pid_is_a_stale_status() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!pid_alive(pid));
        assert!(pid_alive(std::process::id()));
        // pid 1 belongs to root: EPERM still means alive.
        assert!(pid_alive(1));
        assert!(!pid_alive(0));
        assert!(!pid_alive(u32::MAX));

        let dir = TempDir::new("status-stale");
        let path = dir.join("status.json");
        write(&path, &status(pid, DaemonState::Reconnecting)).unwrap();
        let (code, out) = run(&path, pid_alive);
        assert_eq!(code, EXIT_NOT_RUNNING);
        assert!(
            out.starts_with(&format!(
                "last run: not running (stale status from pid {pid}"
            )),
            "{out}"
        );
        assert!(out.contains("  last state: reconnecting since "), "{out}");
    }

    #[test]
    fn control_mode_reports_no_root_and_its_live_sessions() {
        let dir = TempDir::new("status-control");
        let path = dir.join("status.json");
        let mut control = status(std::process::id(), DaemonState::Connected);
        control.mode = "control".to_owned();
        control.session_id = None;
        control.allowed_root = None;
        control.live_sessions = Some(3);
        write(&path, &control).unwrap();
        let (code, out) = run(&path, |_| true);
        assert_eq!(code, EXIT_RUNNING, "{out}");
        assert!(out.contains("  mode: control\n"), "{out}");
        assert!(
            out.contains("  allowed root: none (each session is jailed to the folder its chat picked)\n  live sessions: 3\n"),
            "{out}"
        );
        let written: serde_json::Value =
            serde_json::from_slice(&own_files::read_capped(&path, STATUS_CAP).unwrap().unwrap())
                .unwrap();
        assert_eq!(written["allowed_root"], serde_json::Value::Null);
        assert_eq!(written["live_sessions"], 3);

        // A file an older build wrote (a string root, no count) still reads.
        own_files::write_atomic(
            &path,
            br#"{"pid":1,"state":"connected","mode":"control","session_id":null,"platform_url":"wss://p","allowed_root":"/home/me","since":1.0,"last_error":null,"updated_at":1.0}"#,
            0o600,
        )
        .unwrap();
        let (_, out) = run(&path, |_| true);
        assert!(out.contains("  allowed root: /home/me\n"), "{out}");
    }

    #[test]
    fn an_absent_file_means_no_daemon_has_run_and_garbage_is_unknown() {
        let dir = TempDir::new("status-absent");
        let path = dir.join("status.json");
        let (code, out) = run(&path, |_| true);
        assert_eq!(code, EXIT_NOT_RUNNING);
        assert!(
            out.starts_with("last run: not running: no daemon has run as this user yet"),
            "{out}"
        );

        own_files::write_atomic(&path, b"{\"pid\": 1}", 0o600).unwrap();
        let (code, out) = run(&path, |_| true);
        assert_eq!(code, EXIT_UNKNOWN);
        assert!(out.starts_with("last run: status unknown: "), "{out}");
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
}
