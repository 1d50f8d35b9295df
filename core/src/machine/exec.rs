//! Running one EXECUTE_COMMAND: shell selection, safe environment, process group, output budget, timeout, rate limits.
//!
//! Nothing here knows the wire format: the connector turns its payload into an [`ExecRequest`]
//! (with the cwd already jail-resolved and the timeout already capped), takes a
//! [`CommandPermit`] from the machine-wide [`CommandLimiter`], awaits [`run`] and turns the
//! [`ExecOutcome`] or the [`ExecError`] code back into a reply.
//!
//! Where the reference shim is worse than the specification this module follows the
//! specification or improves on both:
//! - stdin of the child is `/dev/null` (the reference inherits the daemon's stdin);
//! - a timed-out command reports `exit_code: -1` as the specification says (the reference
//!   reports the signal, -15), and the 2 s TERM grace ends as soon as the child exits instead
//!   of always being slept through;
//! - a background process that keeps the output pipes open cannot hang the request: once the
//!   direct child has exited the pipes get a short bounded time, then the group is killed;
//! - dropping the [`run`] future (the request task is aborted on disconnect) SIGKILLs the
//!   whole process group, not only the direct child.
//!
//! Messages of [`ExecError`] never contain command text or environment values; at most the
//! name of the program that was looked for.
//!
//! Layout (everything public is re-exported here, so callers name `exec::…`):
//! - this file: the request, outcome and error types, and [`run`];
//! - `env`: the safe environment a child gets;
//! - `program`: finding the shell or `argv[0]` on the child's PATH;
//! - `supervise`: waiting for the child within its deadline, the TERM/KILL sequence;
//! - `output`: draining stdout and stderr into one budget, the truncation marker;
//! - `group`: the guard that kills the process group when the run is dropped;
//! - `limiter`: machine-wide admission (concurrency and starts per minute).

mod env;
mod group;
mod limiter;
mod output;
mod program;
mod supervise;

pub use env::safe_env;
pub use limiter::{CommandLimiter, CommandPermit, LimitExceeded};
pub use program::resolve_shell;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::Command;
use tokio::time::Instant;

use super::sandbox::{Confinement, PrivateTmp, Spare, spare_request};
use env::env_lookup;
use group::GroupGuard;
use output::{Capture, fit_output};
use program::resolve_program;
use supervise::supervise;

/// Appended to stderr (inside the output budget) when output had to be dropped.
pub const OUTPUT_TRUNCATED_MARKER: &str = "\n[command output truncated]\n";

/// The `shell` selector of EXECUTE_COMMAND.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ShellKind {
    /// `bash` if on PATH else `sh` (POSIX); `cmd.exe` (Windows).
    #[default]
    Auto,
    /// `bash -c`.
    Bash,
    /// `sh -c` (POSIX only).
    Sh,
    /// `zsh -c` (POSIX only).
    Zsh,
    /// PowerShell Core: `pwsh -NoLogo -NoProfile -Command`.
    Pwsh,
    /// Windows PowerShell 5.1 (Windows only).
    Powershell,
    /// `cmd.exe /C` (Windows only).
    Cmd,
}

impl ShellKind {
    /// Every shell, in the contract's order.
    pub const ALL: [Self; 7] = [
        Self::Auto,
        Self::Bash,
        Self::Sh,
        Self::Zsh,
        Self::Pwsh,
        Self::Powershell,
        Self::Cmd,
    ];

    /// Every shell's wire name, in the same order.
    pub const NAMES: [&'static str; 7] = {
        let mut names = [""; 7];
        let mut i = 0;
        while i < names.len() {
            names[i] = Self::ALL[i].as_str();
            i += 1;
        }
        names
    };

    /// The wire name (`"auto"`, `"bash"`, ...).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Bash => "bash",
            Self::Sh => "sh",
            Self::Zsh => "zsh",
            Self::Pwsh => "pwsh",
            Self::Powershell => "powershell",
            Self::Cmd => "cmd",
        }
    }

    /// Parses a wire name; `None` for anything else.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }
}

impl fmt::Display for ShellKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to run.
#[derive(Clone, PartialEq, Eq)]
pub enum Program {
    /// `command`: handed to the selected shell, subject to its parsing.
    Shell {
        /// Which shell.
        shell: ShellKind,
        /// The command line.
        command: String,
    },
    /// `argv`: executed directly, no shell parsing. `argv[0]` containing a path separator is
    /// used as is (relative to the request's cwd), otherwise it is looked up on PATH.
    Argv(Vec<String>),
}

// Command text may hold secrets, so debug output only says how much there is.
impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Shell { shell, command } => f
                .debug_struct("Shell")
                .field("shell", shell)
                .field("command_bytes", &command.len())
                .finish(),
            Self::Argv(argv) => f.debug_struct("Argv").field("args", &argv.len()).finish(),
        }
    }
}

/// One command to run.
#[derive(Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// Shell command or argv.
    pub program: Program,
    /// Working directory, already jail-resolved by the caller (absolute, canonical).
    pub cwd: PathBuf,
    /// Wire env, merged on top of the safe baseline (see [`safe_env`]).
    pub env: BTreeMap<String, String>,
    /// Effective timeout: the caller computes min(request, negotiated ceiling).
    pub timeout: Duration,
    /// Bytes of stdout plus stderr kept, marker included.
    pub output_budget: usize,
    /// The kernel sandbox to run it in (`--shell-sandbox`); `None` runs it with all of the
    /// user's permissions.
    pub sandbox: Option<Confinement>,
}

// Env values may hold secrets, so debug output lists only the names.
impl fmt::Debug for ExecRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecRequest")
            .field("program", &self.program)
            .field("cwd", &self.cwd)
            .field("env_keys", &self.env.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("output_budget", &self.output_budget)
            .field("sandbox", &self.sandbox.as_ref().map(Confinement::mode))
            .finish()
    }
}

/// What a command that was started produced. A non-zero exit is a normal outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutcome {
    /// Kept stdout, decoded as UTF-8 with replacement characters.
    pub stdout: String,
    /// Kept stderr, decoded likewise; ends with [`OUTPUT_TRUNCATED_MARKER`] (or as much of it as
    /// fits the budget) when `output_truncated`.
    pub stderr: String,
    /// The exit code; `-signal` when killed by a signal without a timeout; `-1` on timeout or
    /// when the status could not be collected.
    pub exit_code: i32,
    /// The timeout was reached and the process group was terminated.
    pub timed_out: bool,
    /// From spawn to return.
    pub duration: Duration,
    /// Some output was dropped to stay within the budget.
    pub output_truncated: bool,
    /// Sorted names of the environment the child got (for the audit; values are never kept).
    pub env_keys: Vec<String>,
}

/// Why a command could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The selected shell does not exist on this OS or is not on PATH.
    #[error("Shell not available: {shell}")]
    ShellNotAvailable {
        /// The shell selector, e.g. `"zsh"`.
        shell: String,
    },
    /// `argv[0]` is not on PATH, or the given path is not an executable file.
    #[error("Executable not found: {program}")]
    ExecutableNotFound {
        /// `argv[0]` as given.
        program: String,
    },
    /// `argv` was empty.
    #[error("argv must contain at least the program")]
    EmptyArgv,
    /// The working directory does not exist (any more).
    #[error("Working directory not found")]
    CwdNotFound,
    /// The working directory is not a directory.
    #[error("Working directory is not a directory")]
    CwdNotADirectory,
    /// The OS refused to start the process (or to inspect its cwd).
    #[error("Could not start the command: {0}")]
    Spawn(#[source] io::Error),
}

impl ExecError {
    /// The protocol error code for the ERROR reply.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            // The reference reports a missing argv[0] as an unavailable shell too.
            Self::ShellNotAvailable { .. } | Self::ExecutableNotFound { .. } => {
                "SHELL_NOT_AVAILABLE"
            }
            Self::CwdNotFound => "PATH_NOT_FOUND",
            // The spec has no code for these; the reference answers them with INTERNAL_ERROR.
            Self::EmptyArgv | Self::CwdNotADirectory | Self::Spawn(_) => "INTERNAL_ERROR",
        }
    }
}

/// Runs `request` to completion (or timeout) with the daemon's environment as the parent of
/// [`safe_env`].
///
/// The child gets the cwd, the safe environment and nothing else of the daemon's environment,
/// stdin from `/dev/null`, and its own process group. Shells and `argv[0]` are looked up on the
/// PATH of that environment (the daemon's PATH if it has none). stdout and stderr are drained
/// concurrently into one shared budget (first come, first kept; the rest is read and
/// discarded so the child never blocks).
///
/// At the deadline the group gets SIGTERM, then SIGKILL after at most 2 s, and the result is
/// `timed_out` with `exit_code` -1. Once the direct child has exited, output still arriving
/// through pipes held by background processes is awaited for at most 2 s (less near the
/// deadline), after which the group is killed; if the pipes close in time, background
/// processes that redirected their output are left running, as in the reference. Dropping
/// the future kills the whole group with SIGKILL.
///
/// On Windows the tree is killed with `taskkill /T /F` at the deadline without a grace period.
///
/// # Errors
/// [`ExecError`] when the command could not be started; everything after a successful spawn
/// is an [`ExecOutcome`].
pub async fn run(request: ExecRequest) -> Result<ExecOutcome, ExecError> {
    run_with_parent_env(
        request,
        std::env::vars_os().collect(),
        supervise::TERM_GRACE,
    )
    .await
}

/// [`run`] with an explicit daemon environment, so tests need not touch the real one, and
/// SIGTERM's grace, so tests can tell "returned early" from "waited the grace" by a margin no
/// loaded machine reaches. A `Vec` rather than an iterator: `VarsOs` is not `Send`, and the
/// connector spawns this future.
async fn run_with_parent_env(
    request: ExecRequest,
    parent_env: Vec<(OsString, OsString)>,
    term_grace: Duration,
) -> Result<ExecOutcome, ExecError> {
    let ExecRequest {
        program,
        cwd,
        env: wire_env,
        timeout,
        output_budget,
        sandbox,
    } = request;

    // One stat; not worth a blocking-pool round trip.
    match std::fs::metadata(&cwd) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(ExecError::CwdNotADirectory),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ExecError::CwdNotFound),
        Err(e) => return Err(ExecError::Spawn(e)),
    }

    let daemon_path = env_lookup(&parent_env, "PATH").map(OsStr::to_owned);
    let mut env = safe_env(parent_env, &wire_env);
    let path_env = env_lookup(&env, "PATH").or(daemon_path.as_deref());

    // What to execute, the argv[0] it sees, its arguments, and the name it was asked by.
    let (executable, arg0, args, name): (OsString, OsString, Vec<OsString>, OsString) =
        match &program {
            Program::Shell { shell, command } => {
                let mut argv = resolve_shell(*shell, command, path_env)?.into_iter();
                let Some(executable) = argv.next() else {
                    return Err(ExecError::ShellNotAvailable {
                        shell: shell.as_str().to_owned(),
                    });
                };
                let name = std::path::Path::new(&executable)
                    .file_name()
                    .map(OsStr::to_owned)
                    .unwrap_or_default();
                (executable.clone(), executable, argv.collect(), name)
            }
            Program::Argv(argv) => {
                let Some((first, rest)) = argv.split_first() else {
                    return Err(ExecError::EmptyArgv);
                };
                let resolved = resolve_program(first, &cwd, path_env)?;
                // The child sees argv[0] as the caller wrote it, as with execvp.
                (
                    resolved.into_os_string(),
                    first.into(),
                    rest.iter().map(OsString::from).collect(),
                    first.into(),
                )
            }
        };
    // A confined command gets a private TMPDIR, the one folder besides the root it may
    // change; it is removed once the command has ended (or its run was dropped). A spare
    // launcher waiting for this root (`sandbox/spare.rs`) comes with its own.
    let (private_tmp, spare) = match &sandbox {
        Some(confinement) => match confinement.take_spare() {
            Some(Spare { child, tmp, .. }) => (Some(tmp), Some(child)),
            None => (Some(PrivateTmp::create().map_err(ExecError::Spawn)?), None),
        },
        None => (None, None),
    };
    if let Some(tmp) = &private_tmp {
        env.retain(|(name, _)| name != "TMPDIR");
        env.push(("TMPDIR".into(), tmp.path().as_os_str().to_owned()));
        env.sort();
    }
    let mut command = match (&sandbox, &private_tmp) {
        (Some(confinement), Some(tmp)) => {
            let (launcher, launcher_args) =
                confinement.launcher_command(tmp.path(), &cwd, &name, &executable, &arg0, &args);
            let mut cmd = Command::new(launcher);
            cmd.args(launcher_args);
            cmd
        }
        _ => {
            let mut cmd = Command::new(&executable);
            #[cfg(unix)]
            cmd.arg0(&arg0);
            #[cfg(windows)]
            let _ = &arg0;
            cmd.args(&args);
            cmd
        }
    };
    command
        .current_dir(&cwd)
        .env_clear()
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    #[cfg(windows)]
    {
        const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
        command.creation_flags(CREATE_NEW_PROCESS_GROUP);
    }

    let mut env_keys: Vec<String> = env
        .iter()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .collect();
    env_keys.sort();

    let started = Instant::now();
    // An absurd timeout must not overflow the clock; a century is forever enough.
    let deadline = started
        .checked_add(timeout)
        .unwrap_or_else(|| started + Duration::from_secs(100 * 365 * 24 * 3600));
    let adopted = match spare {
        Some(spare) => {
            let request = spare_request(&cwd, &name, &executable, &arg0, &args, &env);
            adopt(spare, request).await
        }
        None => None,
    };
    let mut child = match adopted {
        Some(child) => child,
        None => command.spawn().map_err(ExecError::Spawn)?,
    };
    let mut group = GroupGuard::new(&child);
    let mut stdout = Capture::default();
    let mut stderr = Capture::default();
    let (status, timed_out) = supervise(
        &mut child,
        &mut group,
        deadline,
        term_grace,
        output_budget,
        &mut stdout,
        &mut stderr,
    )
    .await;

    let exit_code = match status {
        Some(status) if !timed_out => exit_code_of(status),
        _ => -1,
    };
    if let Some(tmp) = private_tmp {
        tmp.remove_async().await;
    }
    // The next spare is made once this command has ended, not beside it: its start and
    // confinement (about a millisecond of CPU) then never slow the command the person is
    // waiting for, and the agent's next command, which follows this reply, finds it ready.
    if let Some(confinement) = &sandbox {
        confinement.refill_spare();
    }
    let (stdout, stderr, output_truncated) = fit_output(stdout, stderr, output_budget);
    Ok(ExecOutcome {
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        exit_code,
        timed_out,
        duration: started.elapsed(),
        output_truncated,
        env_keys,
    })
}

/// Hands `request` to a spare launcher and closes its stdin, upon which it runs the command;
/// `None` (the spare killed and reaped) when there is no request or it could not be written
/// (the spare died), and the caller spawns the launcher.
async fn adopt(
    mut spare: tokio::process::Child,
    request: Option<Vec<u8>>,
) -> Option<tokio::process::Child> {
    use tokio::io::AsyncWriteExt as _;
    let written = match (spare.stdin.take(), request) {
        (Some(mut stdin), Some(request)) => stdin.write_all(&request).await.is_ok(),
        _ => false,
    };
    if written {
        return Some(spare);
    }
    let _ = spare.kill().await;
    None
}

fn exit_code_of(status: ExitStatus) -> i32 {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        status
            .code()
            .or_else(|| status.signal().map(|signal| -signal))
            .unwrap_or(-1)
    }
    #[cfg(windows)]
    {
        status.code().unwrap_or(-1)
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests;
