//! Where the autostart entry's program lives, and whether a service manager can start it.
//!
//! The entry must outlive the folder `install` was run from: a binary inside a cargo `target/`
//! folder disappears with `cargo clean` and changes with the next build, and a download folder
//! gets tidied. So `install` copies the running binary to a stable per-user place
//! ([`stable_binary`]) and names the copy in the entry; `--in-place` keeps it where it is (a
//! package's `/usr/bin`, which the package manager keeps current), refused inside `target/`.
//!
//! On Linux a systemd user unit needs a running user manager, which a shell reached by
//! `su`, `sudo`, some SSH set-ups, containers and WSL without systemd do not have; there
//! `systemctl --user` fails with "Failed to connect to bus". [`user_manager`] tells from the
//! files systemd keeps (without running `systemctl`) and [`print_activation`] says what to do
//! instead.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use local_core::machine::own_files;

use super::{Os, ServiceError, Unit};
use crate::config::Env;

/// The program's file name on this system.
const PROGRAM: &str = if cfg!(windows) {
    "autogpt-shim.exe"
} else {
    "autogpt-shim"
};

/// Where `install` puts the service's binary: `~/.local/bin` on Linux and macOS (the
/// per-user program folder of the XDG and systemd file hierarchies, which pipx and others
/// use on macOS too), `%LOCALAPPDATA%\Programs\autogpt-shim` on Windows (the per-user
/// program folder installers use). `None` without the variable it hangs on.
pub fn stable_binary(os: Os, env: &impl Env) -> Option<PathBuf> {
    let var = |name: &str| env.var(name).filter(|value| !value.trim().is_empty());
    match os {
        Os::Linux | Os::Macos => Some(
            PathBuf::from(var("HOME")?)
                .join(".local")
                .join("bin")
                .join(PROGRAM),
        ),
        Os::Windows => Some(
            PathBuf::from(var("LOCALAPPDATA")?)
                .join("Programs")
                .join("autogpt-shim")
                .join(PROGRAM),
        ),
    }
}

/// Whether `path` is inside a folder named `target`, where cargo builds.
#[must_use]
pub fn in_build_folder(path: &Path) -> bool {
    path.parent().is_some_and(|dir| {
        dir.components()
            .any(|part| part.as_os_str() == OsStr::new("target"))
    })
}

/// What `install` does with the binary the entry runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binary {
    /// The running binary is the stable copy already.
    AlreadyThere(PathBuf),
    /// Copy the running binary `from` to the stable place `to`.
    Copy {
        /// The running binary.
        from: PathBuf,
        /// The stable place.
        to: PathBuf,
    },
    /// `--in-place`: the entry names the running binary.
    InPlace(PathBuf),
}

impl Binary {
    /// The path the entry names.
    #[must_use]
    pub fn path(&self) -> &Path {
        match self {
            Self::AlreadyThere(path) | Self::InPlace(path) | Self::Copy { to: path, .. } => path,
        }
    }
}

/// Decides where the entry's binary comes from: `exe` (the running binary) copied to
/// `stable`, or `exe` itself with `in_place`.
///
/// # Errors
/// One sentence: `--in-place` for a binary inside a cargo `target/` folder, or no stable
/// place known.
pub fn plan_binary(exe: &Path, stable: Option<&Path>, in_place: bool) -> Result<Binary, String> {
    if in_place {
        if in_build_folder(exe) {
            return Err(format!(
                "{} is inside a cargo target/ folder, which `cargo clean` empties and the next build replaces, so a service must not run it from there: install without --in-place to copy it to {}, or copy it somewhere stable and run `install --in-place` with the copy",
                exe.display(),
                stable.map_or_else(|| "~/.local/bin".to_owned(), |p| p.display().to_string())
            ));
        }
        return Ok(Binary::InPlace(exe.to_path_buf()));
    }
    let stable = stable.ok_or(
        "no per-user program folder is known (HOME, or LOCALAPPDATA on Windows, is not set): set it, or pass --in-place to run this binary where it is",
    )?;
    if same_file(exe, stable) {
        Ok(Binary::AlreadyThere(stable.to_path_buf()))
    } else {
        Ok(Binary::Copy {
            from: exe.to_path_buf(),
            to: stable.to_path_buf(),
        })
    }
}

/// Whether the two paths name one file (device and inode on Unix, the path elsewhere).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (own_files::look(a), own_files::look(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        a == b
    }
}

/// Carries out [`plan_binary`]'s plan and says what it did; returns the path the entry names.
///
/// # Errors
/// The copy failed, or the report cannot be printed.
pub fn place_binary(binary: &Binary, out: &mut dyn Write) -> Result<PathBuf, ServiceError> {
    match binary {
        Binary::AlreadyThere(path) => writeln!(out, "the service runs {}", path.display())?,
        Binary::InPlace(path) => writeln!(
            out,
            "the service runs {} where it is (--in-place): keep it there",
            path.display()
        )?,
        Binary::Copy { from, to } => {
            own_files::copy_atomic(from, to, 0o755).map_err(|source| ServiceError::Io {
                path: to.clone(),
                source,
            })?;
            writeln!(
                out,
                "copied {} to {}, which the service runs (run install again after an update)",
                from.display(),
                to.display()
            )?;
            if cfg!(target_os = "linux") {
                place_launcher(from, to, out)?;
            }
        }
    }
    Ok(binary.path().to_path_buf())
}

/// Copies the shell sandbox's launcher from beside `from` to beside `to`: the connector runs
/// the one beside its own file (`crate::preflight::SANDBOX_LAUNCHER`). Without it the copy
/// runs, but refuses every `--shell-sandbox` mode; the note says so.
fn place_launcher(from: &Path, to: &Path, out: &mut dyn Write) -> Result<(), ServiceError> {
    let name = crate::preflight::SANDBOX_LAUNCHER;
    let (source, copy) = (from.with_file_name(name), to.with_file_name(name));
    if own_files::look(&source).is_err() {
        writeln!(
            out,
            "note: {} is missing, so the service cannot confine commands (--shell-sandbox): put it beside {} and run install again",
            source.display(),
            from.display()
        )?;
        return Ok(());
    }
    own_files::copy_atomic(&source, &copy, 0o755).map_err(|source| ServiceError::Io {
        path: copy.clone(),
        source,
    })?;
    writeln!(
        out,
        "copied {} to {}, the shell sandbox's launcher beside it",
        source.display(),
        copy.display()
    )?;
    Ok(())
}

/// Whether the folder `dir` is on `PATH`.
pub fn on_path(dir: &Path, env: &impl Env) -> bool {
    env.var("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|entry| entry == dir))
}

/// Whether a service manager can start the entry from here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manager {
    /// launchd, Task Scheduler, or a reachable systemd user manager.
    Reachable,
    /// Linux not booted with systemd (no `/run/systemd/system`): a container, WSL without
    /// systemd, another init.
    NoSystemd,
    /// systemd runs, but no user manager answers this shell; why, in words.
    Unreachable(String),
}

/// Whether `systemctl --user` would reach a user manager, told from the files systemd keeps:
/// `run_systemd` (`/run/systemd`) holds `system` when systemd is the init, and the user
/// manager listens on `$XDG_RUNTIME_DIR/systemd/private`.
pub fn user_manager(os: Os, run_systemd: &Path, env: &impl Env) -> Manager {
    if os != Os::Linux {
        return Manager::Reachable;
    }
    if !own_files::look(&run_systemd.join("system")).is_ok_and(|meta| meta.is_dir()) {
        return Manager::NoSystemd;
    }
    let Some(runtime) = env
        .var("XDG_RUNTIME_DIR")
        .filter(|dir| Path::new(dir).is_absolute())
    else {
        return Manager::Unreachable("XDG_RUNTIME_DIR is not set in this shell".to_owned());
    };
    let socket = Path::new(&runtime).join("systemd").join("private");
    if own_files::look(&socket).is_ok() {
        Manager::Reachable
    } else {
        Manager::Unreachable(format!(
            "{} does not exist, so no user manager runs for you",
            socket.display()
        ))
    }
}

/// After the entry is written: the command that enables it where a manager can, or else what
/// to do instead (start by hand with `by_hand`, the entry's own command; enable lingering).
///
/// # Errors
/// The report cannot be printed.
pub fn print_activation(
    unit: &Unit,
    manager: &Manager,
    by_hand: &str,
    user: Option<&str>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let user = user.unwrap_or("$USER");
    match manager {
        Manager::Reachable => {
            writeln!(out, "enable it with: {}", unit.enable_command)?;
            for note in &unit.notes {
                writeln!(out, "note: {note}")?;
            }
        }
        Manager::NoSystemd => {
            writeln!(
                out,
                "this machine does not run systemd (there is no /run/systemd/system), so nothing will start the unit and `systemctl --user` cannot enable it."
            )?;
            writeln!(
                out,
                "start the daemon by hand instead, in a terminal or from your login script (~/.profile): {by_hand}"
            )?;
            writeln!(
                out,
                "on WSL2, turn systemd on instead (`[boot]` `systemd=true` in /etc/wsl.conf, then `wsl --shutdown`) and run install again."
            )?;
        }
        Manager::Unreachable(why) => {
            writeln!(
                out,
                "no systemd user manager is reachable from this shell ({why}), so `systemctl --user` would fail with \"Failed to connect to bus\"."
            )?;
            writeln!(
                out,
                "either start the daemon by hand, in a terminal or from your login script: {by_hand}"
            )?;
            writeln!(
                out,
                "or enable lingering, which starts your user manager at boot: sudo loginctl enable-linger {user}; then, logged in as {user} (not through su or sudo): {}",
                unit.enable_command
            )?;
        }
    }
    Ok(())
}
