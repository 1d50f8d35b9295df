//! `autogpt-shim status` and what it reads: one daemon per session (or one in control mode),
//! each holding a lock and keeping a status file, which the reference lacked (it could not
//! tell whether a daemon ran; section 19).
//!
//! Each daemon is an [`Instance`]: machine control mode, or one direct session id. Its files
//! live in the state directory's `daemons/` folder: `<key>.lock`, locked for the daemon's
//! whole life ([`claim`]; a second daemon for the same instance is refused with its pid), and
//! `<key>.json`, rewritten atomically (mode 0600) on every state change ([`write()`]).
//! Whether a daemon runs is whether its lock is held ([`survey`]), which a crash releases and
//! a reused pid cannot fake. The exit codes follow `systemctl is-active` and the LSB `status`
//! convention: 0 a daemon runs, 3 none runs, 4 the status is unknown.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use local_core::machine::{audit_chain, own_files};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Exit code: a daemon is running.
pub const EXIT_RUNNING: u8 = 0;
/// Exit code: no daemon is running (never started, stopped, or gone without a trace).
pub const EXIT_NOT_RUNNING: u8 = 3;
/// Exit code: a status file exists but cannot be read or understood, and no daemon runs.
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
    /// Exited; the last write before it does.
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

/// What one daemon runs: the machine control connection, or one direct session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instance {
    /// Machine control mode (no session id): one per user.
    Control,
    /// A direct session: one per session id.
    Session(String),
}

impl Instance {
    /// The instance for a configured session id.
    #[must_use]
    pub fn of(session_id: Option<&str>) -> Self {
        session_id.map_or(Self::Control, |id| Self::Session(id.to_owned()))
    }

    /// The name of its files: `control`, or `session-` and 16 hex digits of the id's SHA-256
    /// (an id may hold `:` and run to 256 characters, which no file name everywhere can).
    #[must_use]
    pub fn key(&self) -> String {
        match self {
            Self::Control => "control".to_owned(),
            Self::Session(id) => {
                let digest = Sha256::digest(id.as_bytes());
                let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
                format!("session-{hex}")
            }
        }
    }

    /// In words: `machine control mode` or `direct session ID`.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Control => "machine control mode".to_owned(),
            Self::Session(id) => format!("direct session {id}"),
        }
    }

    /// Its status file in the daemons folder `dir`.
    #[must_use]
    pub fn status_file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.json", self.key()))
    }

    /// Its lock file in the daemons folder `dir`.
    #[must_use]
    pub fn lock_file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.lock", self.key()))
    }
}

/// Takes `instance`'s lock in the daemons folder `dir` for this process, held until the
/// returned lock is dropped (or the process ends).
///
/// # Errors
/// One sentence: `already running (pid N)` with what to do, or why the lock could not be
/// taken.
pub fn claim(dir: &Path, instance: &Instance) -> Result<own_files::FileLock, String> {
    let path = instance.lock_file(dir);
    match own_files::lock(&path, &std::process::id().to_string()) {
        Ok(lock) => Ok(lock),
        Err(own_files::LockError::Held { note }) => {
            // The lock file names the holder; where it cannot be read (Windows keeps a locked
            // file from other readers), its status file does.
            let pid = note
                .and_then(|note| note.parse::<u32>().ok())
                .or_else(|| read(&instance.status_file(dir)).ok().map(|s| s.pid));
            let pid = pid.map_or_else(|| "pid unknown".to_owned(), |pid| format!("pid {pid}"));
            Err(format!(
                "a daemon for {} is already running ({pid}): stop it first (Ctrl-C in its terminal, or `systemctl --user stop autogpt-shim.service` for the service), or see it with `autogpt-shim status`",
                instance.describe()
            ))
        }
        Err(own_files::LockError::Io(err)) => Err(format!(
            "cannot take the daemon lock {} ({}): check that the state folder is yours and writable",
            path.display(),
            local_core::io_words::io_words(&err)
        )),
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
    /// The direct session id, if any.
    pub session_id: Option<String>,
    /// The URL it dials, without user info, query or fragment.
    pub platform_url: String,
    /// The jail root of a direct session; null in control mode, where each child session is
    /// jailed to the folder its chat picked.
    pub allowed_root: Option<String>,
    /// Control mode: how many child sessions are live (absent for a direct session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_sessions: Option<usize>,
    /// When the current state began, in epoch seconds.
    pub since: f64,
    /// The last connection or start-up error, if any; never secret-bearing text. A clean
    /// stop is no error.
    pub last_error: Option<String>,
    /// Once stopped: why, in words (`stopped by Ctrl-C or SIGTERM`, the platform's close).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Once stopped: the exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// When this was written, in epoch seconds.
    pub updated_at: f64,
}

impl DaemonStatus {
    /// The instance it ran.
    #[must_use]
    pub fn instance(&self) -> Instance {
        Instance::of(self.session_id.as_deref())
    }
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

/// Reads one status file.
///
/// # Errors
/// In words: the file cannot be read, or is not a daemon status file.
pub fn read(path: &Path) -> Result<DaemonStatus, String> {
    let bytes = own_files::read_capped(path, STATUS_CAP)
        .map_err(|err| {
            format!(
                "cannot read {} ({})",
                path.display(),
                local_core::io_words::io_words(&err)
            )
        })?
        .ok_or_else(|| format!("{} does not exist", path.display()))?;
    serde_json::from_slice(&bytes)
        .map_err(|_| format!("{} is not a daemon status file", path.display()))
}

/// One daemon a status file describes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Seen {
    /// Whether it runs now: its lock is held.
    pub running: bool,
    /// What it last wrote.
    #[serde(flatten)]
    pub status: DaemonStatus,
}

/// Every daemon the daemons folder knows of.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Survey {
    /// The daemons, the running ones first, then the most recently updated.
    pub daemons: Vec<Seen>,
    /// Status files that could not be read, in words.
    pub unreadable: Vec<String>,
}

impl Survey {
    /// The running daemons.
    pub fn running(&self) -> impl Iterator<Item = &Seen> {
        self.daemons.iter().filter(|seen| seen.running)
    }

    /// `status`'s exit code.
    #[must_use]
    pub fn code(&self) -> u8 {
        if self.running().next().is_some() {
            EXIT_RUNNING
        } else if self.unreadable.is_empty() {
            EXIT_NOT_RUNNING
        } else {
            EXIT_UNKNOWN
        }
    }

    /// The daemon of `instance`, if it ran here.
    #[must_use]
    pub fn of(&self, instance: &Instance) -> Option<&Seen> {
        self.daemons
            .iter()
            .find(|seen| &seen.status.instance() == instance)
    }
}

/// Reads every status file in the daemons folder `dir` and asks each lock whether its daemon
/// still runs.
pub fn survey(dir: &Path) -> Survey {
    let mut survey = Survey::default();
    let names = match own_files::list_names(dir) {
        Ok(names) => names,
        Err(err) => {
            survey.unreadable.push(format!(
                "cannot list {} ({})",
                dir.display(),
                local_core::io_words::io_words(&err)
            ));
            return survey;
        }
    };
    for name in names {
        let Some(key) = name.to_str().and_then(|name| name.strip_suffix(".json")) else {
            continue;
        };
        let status = match read(&dir.join(&name)) {
            Ok(status) => status,
            Err(problem) => {
                survey.unreadable.push(problem);
                continue;
            }
        };
        let running = own_files::is_locked(&dir.join(format!("{key}.lock"))).unwrap_or(false);
        survey.daemons.push(Seen { running, status });
    }
    survey.daemons.sort_by(|a, b| {
        b.running
            .cmp(&a.running)
            .then(b.status.updated_at.total_cmp(&a.status.updated_at))
    });
    survey
}

/// The `now:` section: each running daemon, or the last one and how it ended.
///
/// # Errors
/// The report cannot be printed.
pub fn print_now(survey: &Survey, dir: &Path, out: &mut dyn Write) -> io::Result<()> {
    let mut any = false;
    for seen in survey.running() {
        any = true;
        let status = &seen.status;
        writeln!(
            out,
            "now: running (pid {}), {}",
            status.pid,
            status.instance().describe()
        )?;
        writeln!(
            out,
            "  state: {} since {}",
            status.state.as_str(),
            audit_chain::format_epoch(status.since)
        )?;
        print_place(status, out)?;
        writeln!(
            out,
            "  last error: {}",
            status.last_error.as_deref().unwrap_or("none")
        )?;
    }
    if any {
        return Ok(());
    }
    match survey.daemons.first() {
        None if survey.unreadable.is_empty() => writeln!(
            out,
            "now: not running (no daemon has run as this user yet; none in {})",
            dir.display()
        )?,
        None => writeln!(out, "now: not running, as far as can be told")?,
        Some(last) => {
            let status = &last.status;
            writeln!(out, "now: not running")?;
            let ended = if status.state == DaemonState::Stopped {
                format!(
                    "stopped at {} ({})",
                    audit_chain::format_epoch(status.since),
                    status.stop_reason.as_deref().unwrap_or("stopped")
                )
            } else {
                format!(
                    "ended without stopping cleanly (it crashed or was killed) while {}, last heard of at {}",
                    status.state.as_str(),
                    audit_chain::format_epoch(status.updated_at)
                )
            };
            writeln!(
                out,
                "  last daemon: pid {}, {}, {ended}",
                status.pid,
                status.instance().describe()
            )?;
            print_place(status, out)?;
            if let Some(error) = &status.last_error {
                writeln!(out, "  last error: {error}")?;
            }
        }
    }
    for problem in &survey.unreadable {
        writeln!(out, "  unreadable: {problem}")?;
    }
    Ok(())
}

fn print_place(status: &DaemonStatus, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "  platform: {}", status.platform_url)?;
    match (&status.allowed_root, status.live_sessions) {
        (Some(root), _) => writeln!(out, "  allowed root: {root}"),
        (None, live) => {
            writeln!(
                out,
                "  allowed root: none (each chat's session is jailed to the folder picked for it)"
            )?;
            match live {
                Some(live) => writeln!(out, "  live sessions: {live}"),
                None => Ok(()),
            }
        }
    }
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
mod tests;
