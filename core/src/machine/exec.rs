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

use std::collections::{BTreeMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::{Pin, pin};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep_until, timeout_at};

/// Appended to stderr (inside the output budget) when output had to be dropped.
pub const OUTPUT_TRUNCATED_MARKER: &str = "\n[command output truncated]\n";

/// Size of one read from a child's pipe, as in the reference.
const READ_CHUNK: usize = 64 * 1024;
/// How long a timed-out child gets between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);
/// How long we wait for the direct child to be reaped after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(2);
/// How long the pipes may stay open once the group has been killed: a process that left the
/// group can hold them forever, so we stop reading after this.
const KILL_DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How long the pipes may stay open after the direct child exited before the group is killed.
const POST_EXIT_DRAIN: Duration = Duration::from_secs(2);
/// Lower bound for [`POST_EXIT_DRAIN`] when the deadline is closer: what is already buffered in
/// the pipes must still be read even if the child exits just before the deadline.
const MIN_POST_EXIT_DRAIN: Duration = Duration::from_millis(250);
/// Length of the [`CommandLimiter`] sliding window.
const RATE_WINDOW: Duration = Duration::from_secs(60);
/// Searched when neither the child's environment nor the daemon's has a PATH; the usual
/// `confstr(_CS_PATH)` answer.
#[cfg(unix)]
const DEFAULT_SEARCH_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Windows has no such default; `CreateProcess` searches the system directories itself for
/// the bare names we fall back to.
#[cfg(windows)]
const DEFAULT_SEARCH_PATH: &str = "";

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
        [
            Self::Auto,
            Self::Bash,
            Self::Sh,
            Self::Zsh,
            Self::Pwsh,
            Self::Powershell,
            Self::Cmd,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == name)
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

/// The argv of the shell invocation for `command`, per the OS table of the specification.
///
/// `path_env` is the PATH searched for the shell (the child's, see [`run`]); `None` searches
/// `/usr/local/bin:/usr/bin:/bin` on POSIX. Empty and relative PATH entries are skipped so a
/// shell is never picked up from whatever directory happens to be current. On POSIX the first
/// element is the absolute path of the shell found.
///
/// # Errors
/// [`ExecError::ShellNotAvailable`] when the shell does not exist on this OS or is not found.
pub fn resolve_shell(
    shell: ShellKind,
    command: &str,
    path_env: Option<&OsStr>,
) -> Result<Vec<OsString>, ExecError> {
    let not_available = || ExecError::ShellNotAvailable {
        shell: shell.as_str().to_owned(),
    };
    let find = |name: &str| find_on_path(OsStr::new(name), path_env);
    let dash_c = |program: PathBuf| vec![program.into_os_string(), "-c".into(), command.into()];
    let pwsh = |program: PathBuf| {
        vec![
            program.into_os_string(),
            "-NoLogo".into(),
            "-NoProfile".into(),
            "-Command".into(),
            command.into(),
        ]
    };
    #[cfg(unix)]
    {
        match shell {
            ShellKind::Auto => find("bash")
                .or_else(|| find("sh"))
                .map(dash_c)
                .ok_or_else(not_available),
            ShellKind::Bash => find("bash").map(dash_c).ok_or_else(not_available),
            ShellKind::Sh => find("sh").map(dash_c).ok_or_else(not_available),
            ShellKind::Zsh => find("zsh").map(dash_c).ok_or_else(not_available),
            ShellKind::Pwsh => find("pwsh").map(pwsh).ok_or_else(not_available),
            ShellKind::Powershell | ShellKind::Cmd => Err(not_available()),
        }
    }
    #[cfg(windows)]
    {
        // CreateProcess searches the system directories for these bare names itself.
        let system = |name: &str| find(name).unwrap_or_else(|| PathBuf::from(name));
        match shell {
            ShellKind::Auto | ShellKind::Cmd => Ok(vec![
                system("cmd.exe").into_os_string(),
                "/C".into(),
                format!("chcp 65001 >NUL & {command}").into(),
            ]),
            ShellKind::Bash => find("bash").map(dash_c).ok_or_else(not_available),
            ShellKind::Pwsh => find("pwsh").map(pwsh).ok_or_else(not_available),
            ShellKind::Powershell => Ok(pwsh(system("powershell.exe"))),
            ShellKind::Sh | ShellKind::Zsh => Err(not_available()),
        }
    }
}

/// Names of the daemon's environment a child may see on POSIX (plus every `LC_*`).
#[cfg(unix)]
const BASELINE_NAMES: &[&str] = &["HOME", "PATH", "LANG", "TZ", "TMPDIR", "USER", "SHELL"];
/// Names of the daemon's environment a child may see on Windows (compared case-insensitively).
#[cfg(windows)]
const BASELINE_NAMES: &[&str] = &[
    "USERPROFILE",
    "HOMEDRIVE",
    "HOMEPATH",
    "PATH",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "COMSPEC",
    "OS",
    "WINDIR",
    "LOCALAPPDATA",
    "APPDATA",
];

/// The environment a child gets: the safe baseline of `parent` (the daemon's environment),
/// `wire` merged on top, then `PYTHONIOENCODING=utf-8` forced. Sorted by name.
///
/// POSIX keeps only `HOME PATH LANG TZ TMPDIR USER SHELL` and `LC_*` from `parent`; Windows
/// keeps `USERPROFILE HOMEDRIVE HOMEPATH PATH SYSTEMROOT TEMP TMP COMSPEC OS WINDIR
/// LOCALAPPDATA APPDATA` case-insensitively, and a wire name replaces a baseline name that
/// differs only in case. The wire may set anything, PATH included.
///
/// Wire entries the OS cannot represent (an empty name, a name containing `=` or NUL, a value
/// containing NUL) are skipped rather than failing the request; the caller sees which names
/// were applied in [`ExecOutcome::env_keys`].
pub fn safe_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    wire: &BTreeMap<String, String>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for (name, value) in parent {
        if in_baseline(&name) && representable(&name, &value) {
            set_env(&mut env, name, value);
        }
    }
    for (name, value) in wire {
        let (name, value) = (OsString::from(name), OsString::from(value));
        if representable(&name, &value) {
            set_env(&mut env, name, value);
        }
    }
    set_env(&mut env, "PYTHONIOENCODING".into(), "utf-8".into());
    env.sort();
    env
}

fn in_baseline(name: &OsStr) -> bool {
    #[cfg(unix)]
    {
        name.as_encoded_bytes().starts_with(b"LC_")
            || BASELINE_NAMES.iter().any(|keep| name == *keep)
    }
    #[cfg(windows)]
    {
        BASELINE_NAMES
            .iter()
            .any(|keep| env_name_eq(name, OsStr::new(keep)))
    }
}

fn representable(name: &OsStr, value: &OsStr) -> bool {
    let name = name.as_encoded_bytes();
    !name.is_empty()
        && !name.contains(&b'=')
        && !name.contains(&0)
        && !value.as_encoded_bytes().contains(&0)
}

/// Whether two variable names denote the same variable on this OS.
fn env_name_eq(a: &OsStr, b: &OsStr) -> bool {
    if cfg!(windows) {
        a.to_string_lossy().to_uppercase() == b.to_string_lossy().to_uppercase()
    } else {
        a == b
    }
}

fn set_env(env: &mut Vec<(OsString, OsString)>, name: OsString, value: OsString) {
    match env
        .iter_mut()
        .find(|(existing, _)| env_name_eq(existing, &name))
    {
        // The later name wins too, so a wire `Path` really replaces the baseline `PATH`.
        Some(entry) => *entry = (name, value),
        None => env.push((name, value)),
    }
}

fn env_lookup<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a OsStr> {
    env.iter()
        .find(|(existing, _)| env_name_eq(existing, OsStr::new(name)))
        .map(|(_, value)| value.as_os_str())
}

/// The first executable file called `name` in an absolute directory of `path_env`.
fn find_on_path(name: &OsStr, path_env: Option<&OsStr>) -> Option<PathBuf> {
    let path_env = path_env.unwrap_or(OsStr::new(DEFAULT_SEARCH_PATH));
    std::env::split_paths(path_env)
        .filter(|dir| dir.is_absolute())
        .find_map(|dir| executable_candidate(&dir.join(name)))
}

/// `path` itself if it is an executable file (on Windows also `path` plus a PATHEXT suffix).
fn executable_candidate(path: &Path) -> Option<PathBuf> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let meta = std::fs::metadata(path).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then(|| path.to_path_buf())
    }
    #[cfg(windows)]
    {
        if path.extension().is_some() && path.is_file() {
            return Some(path.to_path_buf());
        }
        let pathext = std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".to_owned());
        pathext
            .split(';')
            .filter(|ext| !ext.is_empty())
            .map(|ext| {
                let mut candidate = path.as_os_str().to_owned();
                candidate.push(ext);
                PathBuf::from(candidate)
            })
            .find(|candidate| candidate.is_file())
    }
}

/// The program to start for `argv[0]`.
fn resolve_program(
    program: &str,
    cwd: &Path,
    path_env: Option<&OsStr>,
) -> Result<PathBuf, ExecError> {
    let not_found = || ExecError::ExecutableNotFound {
        program: program.to_owned(),
    };
    if program.is_empty() {
        return Err(not_found());
    }
    let found = if program.contains(std::path::is_separator) {
        // Resolved here because std leaves a relative program with a changed cwd unspecified.
        // Collecting the components drops `.` segments, for a tidy `$0` in scripts.
        executable_candidate(&cwd.join(program).components().collect::<PathBuf>())
    } else {
        find_on_path(OsStr::new(program), path_env)
    };
    found.ok_or_else(not_found)
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
    run_with_parent_env(request, std::env::vars_os().collect()).await
}

/// [`run`] with an explicit daemon environment, so tests need not touch the real one. A `Vec`
/// rather than an iterator: `VarsOs` is not `Send`, and the connector spawns this future.
async fn run_with_parent_env(
    request: ExecRequest,
    parent_env: Vec<(OsString, OsString)>,
) -> Result<ExecOutcome, ExecError> {
    let ExecRequest {
        program,
        cwd,
        env: wire_env,
        timeout,
        output_budget,
    } = request;

    // One stat; not worth a blocking-pool round trip.
    match std::fs::metadata(&cwd) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(ExecError::CwdNotADirectory),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ExecError::CwdNotFound),
        Err(e) => return Err(ExecError::Spawn(e)),
    }

    let daemon_path = env_lookup(&parent_env, "PATH").map(OsStr::to_owned);
    let env = safe_env(parent_env, &wire_env);
    let path_env = env_lookup(&env, "PATH").or(daemon_path.as_deref());

    let mut command = match &program {
        Program::Shell { shell, command } => {
            let argv = resolve_shell(*shell, command, path_env)?;
            let mut argv = argv.into_iter();
            let Some(program) = argv.next() else {
                return Err(ExecError::ShellNotAvailable {
                    shell: shell.as_str().to_owned(),
                });
            };
            let mut cmd = Command::new(program);
            cmd.args(argv);
            cmd
        }
        Program::Argv(argv) => {
            let Some((first, rest)) = argv.split_first() else {
                return Err(ExecError::EmptyArgv);
            };
            let resolved = resolve_program(first, &cwd, path_env)?;
            let mut cmd = Command::new(resolved);
            // The child sees argv[0] as the caller wrote it, as with execvp.
            #[cfg(unix)]
            cmd.arg0(first);
            cmd.args(rest);
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
    let mut child = command.spawn().map_err(ExecError::Spawn)?;
    let mut group = GroupGuard::new(child.id());
    let mut stdout = Capture::default();
    let mut stderr = Capture::default();
    let (status, timed_out) = supervise(
        &mut child,
        &mut group,
        deadline,
        output_budget,
        &mut stdout,
        &mut stderr,
    )
    .await;

    let exit_code = match status {
        Some(status) if !timed_out => exit_code_of(status),
        _ => -1,
    };
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

/// Waits for the child and its output; returns the exit status (if collected) and whether the
/// deadline was reached.
async fn supervise(
    child: &mut Child,
    group: &mut GroupGuard,
    deadline: Instant,
    budget: usize,
    stdout: &mut Capture,
    stderr: &mut Capture,
) -> (Option<ExitStatus>, bool) {
    let out_pipe = child.stdout.take();
    let err_pipe = child.stderr.take();
    let remaining = AtomicUsize::new(budget);
    let mut drains = pin!(async {
        tokio::join!(
            drain(out_pipe, &remaining, stdout),
            drain(err_pipe, &remaining, stderr)
        );
    });
    let mut drained = false;

    match with_drains(drains.as_mut(), &mut drained, child.wait(), deadline).await {
        Some(Ok(status)) => {
            let exited = Instant::now();
            let until = (exited + POST_EXIT_DRAIN)
                .min(deadline)
                .max(exited + MIN_POST_EXIT_DRAIN);
            if finish_drains(drains.as_mut(), &mut drained, until).await {
                group.disarm();
            } else {
                group.kill();
                finish_drains(
                    drains.as_mut(),
                    &mut drained,
                    Instant::now() + KILL_DRAIN_GRACE,
                )
                .await;
            }
            (Some(status), false)
        }
        Some(Err(_)) => {
            // The status is lost; make sure nothing of the command survives it.
            group.kill();
            finish_drains(
                drains.as_mut(),
                &mut drained,
                Instant::now() + KILL_DRAIN_GRACE,
            )
            .await;
            (None, false)
        }
        None => {
            group.terminate();
            let mut status = with_drains(
                drains.as_mut(),
                &mut drained,
                child.wait(),
                Instant::now() + TERM_GRACE,
            )
            .await;
            // Also when the child obeyed: a grandchild may have ignored SIGTERM.
            group.kill();
            if status.is_none() {
                status = with_drains(
                    drains.as_mut(),
                    &mut drained,
                    child.wait(),
                    Instant::now() + KILL_WAIT,
                )
                .await;
            }
            finish_drains(
                drains.as_mut(),
                &mut drained,
                Instant::now() + KILL_DRAIN_GRACE,
            )
            .await;
            (status.and_then(Result::ok), true)
        }
    }
}

/// Awaits `fut` until `until` while keeping the pipes drained; `None` when `until` came first.
async fn with_drains<F: Future>(
    mut drains: Pin<&mut impl Future<Output = ()>>,
    drained: &mut bool,
    fut: F,
    until: Instant,
) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut sleep = pin!(sleep_until(until));
    loop {
        tokio::select! {
            biased;
            output = &mut fut => return Some(output),
            () = &mut sleep => return None,
            () = drains.as_mut(), if !*drained => *drained = true,
        }
    }
}

/// Lets the drains run until both pipes are closed or `until`; true if they closed.
async fn finish_drains(
    drains: Pin<&mut impl Future<Output = ()>>,
    drained: &mut bool,
    until: Instant,
) -> bool {
    if !*drained && timeout_at(until, drains).await.is_ok() {
        *drained = true;
    }
    *drained
}

/// What was kept of one stream.
#[derive(Debug, Default)]
struct Capture {
    bytes: Vec<u8>,
    /// Bytes of this stream were dropped (so its end may split a character).
    cut: bool,
}

/// Reads `pipe` to its end, keeping what the shared `remaining` budget allows.
async fn drain<R: AsyncRead + Unpin>(
    pipe: Option<R>,
    remaining: &AtomicUsize,
    capture: &mut Capture,
) {
    let Some(mut pipe) = pipe else { return };
    let mut buf = vec![0_u8; READ_CHUNK];
    loop {
        let read = match pipe.read(&mut buf).await {
            Ok(0) => return,
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let before = remaining
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                Some(left.saturating_sub(read))
            })
            .unwrap_or_else(|left| left);
        let kept = before.min(read);
        capture.bytes.extend_from_slice(&buf[..kept]);
        if kept < read {
            capture.cut = true;
        }
    }
}

/// Makes room for the marker within `budget` when output was dropped, trimming stdout first,
/// then stderr. Returns the bytes of both streams and whether output was truncated.
fn fit_output(mut stdout: Capture, mut stderr: Capture, budget: usize) -> (Vec<u8>, Vec<u8>, bool) {
    if !stdout.cut && !stderr.cut {
        return (stdout.bytes, stderr.bytes, false);
    }
    let marker = OUTPUT_TRUNCATED_MARKER.as_bytes();
    let marker = &marker[..marker.len().min(budget)];
    let room = budget - marker.len();
    let mut excess = (stdout.bytes.len() + stderr.bytes.len()).saturating_sub(room);
    for capture in [&mut stdout, &mut stderr] {
        let trim = excess.min(capture.bytes.len());
        if trim > 0 {
            capture.bytes.truncate(capture.bytes.len() - trim);
            capture.cut = true;
            excess -= trim;
        }
        if capture.cut {
            drop_partial_char(&mut capture.bytes);
        }
    }
    stderr.bytes.extend_from_slice(marker);
    (stdout.bytes, stderr.bytes, true)
}

/// Drops a UTF-8 sequence left incomplete by a cut, so decoding does not add a replacement
/// character that was not in the output.
fn drop_partial_char(bytes: &mut Vec<u8>) {
    let tail_start = bytes.len().saturating_sub(4);
    let Some(lead) = (tail_start..bytes.len())
        .rev()
        .find(|&i| bytes[i] & 0xC0 != 0x80)
    else {
        return;
    };
    let expected = match bytes[lead] {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    };
    if bytes.len() - lead < expected {
        bytes.truncate(lead);
    }
}

/// Kills the child's process group when dropped while armed, so an aborted request leaves
/// nothing running.
///
/// Signalling the group after the leader was reaped is safe: Linux keeps a pid allocated while
/// it names a live group, and an empty group just yields ESRCH, which is ignored.
struct GroupGuard {
    pid: Option<u32>,
}

impl GroupGuard {
    const fn new(pid: Option<u32>) -> Self {
        Self { pid }
    }

    /// Leaves the group alone from now on.
    const fn disarm(&mut self) {
        self.pid = None;
    }

    /// Asks the group to exit (POSIX SIGTERM); on Windows there is no such request, so this
    /// kills the tree.
    fn terminate(&self) {
        #[cfg(unix)]
        self.signal(rustix::process::Signal::TERM);
        #[cfg(windows)]
        self.kill();
    }

    /// Kills the whole group.
    fn kill(&self) {
        #[cfg(unix)]
        self.signal(rustix::process::Signal::KILL);
        #[cfg(windows)]
        if let Some(pid) = self.pid {
            // Without unsafe code there is no job object; taskkill walks the tree for us.
            let _ = std::process::Command::new("taskkill")
                .args(["/T", "/F", "/PID", &pid.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
        }
    }

    #[cfg(unix)]
    fn signal(&self, signal: rustix::process::Signal) {
        let pgid = self
            .pid
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pgid) = pgid {
            // ESRCH (the group is gone) is the expected outcome more often than not.
            let _ = rustix::process::kill_process_group(pgid, signal);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Which machine-wide command limit refused a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LimitExceeded {
    /// `per_minute` commands were already started in the last 60 s.
    #[error("The local executor started too many commands in the last minute.")]
    RateLimit {
        /// The configured limit, for the ERROR details.
        per_minute: usize,
    },
    /// `max` commands are already running.
    #[error("The local executor is at its concurrent command limit.")]
    Concurrency {
        /// The configured limit, for the ERROR details.
        max: usize,
    },
}

impl LimitExceeded {
    /// The protocol error code (both limits answer `SHIM_OVERLOADED`).
    #[must_use]
    pub const fn code(&self) -> &'static str {
        "SHIM_OVERLOADED"
    }
}

/// Machine-wide command admission: at most `max_concurrent` commands running and at most
/// `per_minute` started in any sliding 60 s window. Cloning shares the limits.
///
/// Only admitted commands count towards the rate: a command refused for concurrency does not
/// use up a start.
#[derive(Debug, Clone)]
pub struct CommandLimiter {
    inner: Arc<LimiterInner>,
}

#[derive(Debug)]
struct LimiterInner {
    max_concurrent: usize,
    per_minute: usize,
    state: Mutex<LimiterState>,
}

#[derive(Debug, Default)]
struct LimiterState {
    starts: VecDeque<std::time::Instant>,
    running: usize,
}

impl CommandLimiter {
    /// A limiter allowing `max_concurrent` running commands and `per_minute` starts per 60 s.
    #[must_use]
    pub fn new(max_concurrent: usize, per_minute: usize) -> Self {
        Self {
            inner: Arc::new(LimiterInner {
                max_concurrent,
                per_minute,
                state: Mutex::new(LimiterState::default()),
            }),
        }
    }

    /// Admits one command now.
    ///
    /// # Errors
    /// [`LimitExceeded`] naming the limit that refused it (the rate is checked first).
    pub fn try_acquire(&self) -> Result<CommandPermit, LimitExceeded> {
        self.try_acquire_at(std::time::Instant::now())
    }

    /// [`try_acquire`](Self::try_acquire) at `now`, so the window can be tested without waiting.
    ///
    /// # Errors
    /// As [`try_acquire`](Self::try_acquire).
    pub fn try_acquire_at(&self, now: std::time::Instant) -> Result<CommandPermit, LimitExceeded> {
        let inner = &self.inner;
        let mut state = inner.state.lock().unwrap_or_else(PoisonError::into_inner);
        // retain rather than popping the front: injected instants need not be monotonic.
        state
            .starts
            .retain(|&start| now.saturating_duration_since(start) < RATE_WINDOW);
        if state.starts.len() >= inner.per_minute {
            return Err(LimitExceeded::RateLimit {
                per_minute: inner.per_minute,
            });
        }
        if state.running >= inner.max_concurrent {
            return Err(LimitExceeded::Concurrency {
                max: inner.max_concurrent,
            });
        }
        state.starts.push_back(now);
        state.running += 1;
        Ok(CommandPermit {
            limiter: Arc::clone(inner),
        })
    }

    /// Commands currently holding a permit.
    #[must_use]
    pub fn running(&self) -> usize {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .running
    }
}

/// One admitted command; dropping it frees its concurrency slot (its start still counts
/// towards the rate until it leaves the window).
#[derive(Debug)]
#[must_use = "the command is only admitted while the permit is held"]
pub struct CommandPermit {
    limiter: Arc<LimiterInner>,
}

impl Drop for CommandPermit {
    fn drop(&mut self) {
        let mut state = self
            .limiter
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.running = state.running.saturating_sub(1);
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests;
