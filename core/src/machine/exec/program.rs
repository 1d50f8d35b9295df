//! Finding what to start: the requested shell (or the OS default) and `argv[0]`, on the child's
//! PATH, absolute directories only.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::{ExecError, ShellKind};

/// Searched when neither the child's environment nor the daemon's has a PATH; the usual
/// `confstr(_CS_PATH)` answer.
#[cfg(unix)]
const DEFAULT_SEARCH_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Windows has no such default; `CreateProcess` searches the system directories itself for
/// the bare names we fall back to.
#[cfg(windows)]
const DEFAULT_SEARCH_PATH: &str = "";

/// The argv of the shell invocation for `command`, per the OS table of the specification.
///
/// `path_env` is the PATH searched for the shell (the child's, see [`run`](super::run)); `None` searches
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

/// The first executable file called `name` in an absolute directory of `path_env`.
pub(super) fn find_on_path(name: &OsStr, path_env: Option<&OsStr>) -> Option<PathBuf> {
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
pub(super) fn resolve_program(
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
