//! `autogpt-shim install` / `uninstall`: the per-user autostart entry (a systemd user unit, a
//! launchd agent or a Task Scheduler task) that runs `<shim> --config <cfg> start` at login
//! (shim-reference-behaviour.md section 16).
//!
//! Like the reference, this only writes or removes the file and prints the command that
//! activates it; it never runs `systemctl`, `launchctl` or `schtasks` itself. Every path is
//! escaped for the format it lands in, and paths no format can carry (control characters,
//! non-UTF-8) are refused rather than written broken.
//!
//! Unlike the reference, `install` also makes sure the entry can start: the service sees
//! neither the flags nor the shell's environment, so [`plan_config`] turns them into the
//! config file the entry names, and refuses with one sentence when the result could not
//! start. A refused start (exit 77, 78) is never restarted: it would fail the same way.
//!
//! The entry runs a copy of the binary in a stable per-user place, not the one `install` was
//! run as, and where no service manager can start it (no systemd, no user manager), `install`
//! says what to do instead of printing a command that would fail (`place`).
//!
//! Layout: this file holds the entry's types and `install`, `uninstall` and `describe`;
//! `formats` writes the systemd unit (and the desktop entry KDE needs for screenshots), launchd
//! plist and Task Scheduler XML with their quoting;
//! `config_plan` turns the flags into the config file the entry starts with; `place` puts the
//! binary and tells whether a manager can start it (both re-exported here).

mod config_plan;
mod formats;
mod place;

pub use config_plan::{ConfigPlan, check_startable, plan_config, write_config};
pub use place::{
    Binary, Manager, in_build_folder, on_path, place_binary, plan_binary, print_activation,
    stable_binary, user_manager,
};

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use local_core::machine::own_files;

use formats::{launchd_agent, scheduled_task, systemd_unit};

/// The systemd unit's file name.
pub const SYSTEMD_UNIT_NAME: &str = "autogpt-shim.service";

/// The desktop entry's file name (Linux).
pub const DESKTOP_ENTRY_NAME: &str = "autogpt-shim.desktop";

/// The launchd agent's label (and plist file stem).
pub const LAUNCHD_LABEL: &str = "net.autogpt.shim";

/// The Task Scheduler task's path.
pub const WINDOWS_TASK_NAME: &str = r"\AutoGPT\Shim";

/// The directory name the reference uses under the per-user data roots.
const APP_DIR: &str = "autogpt-local-executor";

/// Autostart files are read by the service manager, so they are not private.
const UNIT_MODE: u32 = 0o644;

/// Far above any unit this module writes; a larger file is not ours.
const UNIT_CAP: u64 = 1024 * 1024;

/// The operating systems with an autostart template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    /// Linux and WSL2: a systemd user unit.
    Linux,
    /// macOS: a launchd agent.
    Macos,
    /// Windows: a Task Scheduler task.
    Windows,
}

impl Os {
    /// The system this binary was built for; other Unixes get the systemd template.
    #[must_use]
    pub const fn current() -> Self {
        if cfg!(target_os = "macos") {
            Self::Macos
        } else if cfg!(windows) {
            Self::Windows
        } else {
            Self::Linux
        }
    }
}

/// The per-user directories the autostart entry goes under, resolved by the caller (from
/// `XDG_CONFIG_HOME`, `HOME`, `LOCALAPPDATA`, ...); each OS needs only its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locations {
    /// Linux: `$XDG_CONFIG_HOME`, or `~/.config`.
    pub config_home: Option<PathBuf>,
    /// Linux: `$XDG_DATA_HOME`, or `~/.local/share`, where desktop entries go.
    pub data_home: Option<PathBuf>,
    /// macOS: the home directory.
    pub home: Option<PathBuf>,
    /// Windows: `%LOCALAPPDATA%`.
    pub local_app_data: Option<PathBuf>,
    /// Windows: `DOMAIN\user`, which limits the logon trigger and the principal to that user;
    /// without it the task triggers at any user's logon, which needs an administrator.
    pub windows_user: Option<String>,
}

/// One autostart entry: where it goes, what it holds, and how to activate it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The system it is for.
    pub os: Os,
    /// The file to write.
    pub path: PathBuf,
    /// The file's contents.
    pub contents: String,
    /// The command that activates it (printed, never run).
    pub enable_command: String,
    /// The command that deactivates it (printed, never run).
    pub disable_command: String,
    /// Advice printed after installing.
    pub notes: Vec<String>,
    /// The directory the service manager appends the daemon's output to, which must exist
    /// before it starts; `None` where output is not redirected (Windows).
    pub log_dir: Option<PathBuf>,
    /// A file that exists while the entry is enabled (systemd's `default.target.wants`
    /// link), so `uninstall` can ask for the disable first: `systemctl disable` needs the
    /// unit file. `None` where this cannot be told from a file.
    pub enabled_marker: Option<PathBuf>,
    /// What `uninstall` advises once the file is gone: how to stop what the service manager
    /// may still have loaded, with a command that needs no file.
    pub after_removal: String,
    /// Linux: a desktop entry (its path and text) naming the binary the entry runs, through which
    /// KDE's KWin lets that binary take screenshots; written and removed with the entry.
    pub desktop_entry: Option<(PathBuf, String)>,
}

/// Why an autostart entry cannot be made, written or removed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// `--at-login false`: the only trigger is the login one.
    #[error(
        "only --at-login is supported: this build cannot install an autostart entry with another trigger"
    )]
    UnsupportedTrigger,
    /// The directory the entry goes under is unknown.
    #[error("cannot place the autostart entry: {0} is not set")]
    MissingLocation(&'static str),
    /// A path cannot be written into the entry's format.
    #[error("{path:?} cannot be written into {format}: {reason}")]
    UnsupportedPath {
        /// The path, lossily.
        path: String,
        /// The file format.
        format: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The entry could not be written or removed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// `uninstall` while the entry is still enabled.
    #[error(
        "{} is still enabled; disable it first with: {disable}, then run `autogpt-shim uninstall` again",
        path.display()
    )]
    StillEnabled {
        /// The entry.
        path: PathBuf,
        /// The command that disables it.
        disable: String,
    },
    /// The configuration the entry would start with is missing something or cannot work.
    #[error("{0}")]
    Config(String),
    /// The report could not be printed.
    #[error("cannot print: {0}")]
    Output(#[from] io::Error),
}

/// Builds the autostart entry running `<shim_path> --config <config_path> start`, with the
/// daemon's output appended to `shim.out.log` and `shim.err.log` in `log_dir` (Linux, macOS).
///
/// # Errors
/// [`ServiceError::MissingLocation`] when `locations` lacks this OS's directory, and
/// [`ServiceError::UnsupportedPath`] for a path that is not UTF-8 or holds a control character.
pub fn unit_for(
    os: Os,
    locations: &Locations,
    shim_path: &Path,
    config_path: &Path,
    log_dir: &Path,
) -> Result<Unit, ServiceError> {
    match os {
        Os::Linux => systemd_unit(locations, shim_path, config_path, log_dir),
        Os::Macos => launchd_agent(locations, shim_path, config_path, log_dir),
        Os::Windows => scheduled_task(locations, shim_path, config_path),
    }
}

/// Writes the entry (mode 0644, parents created) and the directory its logs go to, then prints
/// the path; [`print_activation`] says how to activate it.
///
/// # Errors
/// [`ServiceError::UnsupportedTrigger`] unless `at_login`; the I/O error otherwise.
pub fn install(unit: &Unit, at_login: bool, out: &mut dyn Write) -> Result<(), ServiceError> {
    if !at_login {
        return Err(ServiceError::UnsupportedTrigger);
    }
    if let Some(dir) = &unit.log_dir {
        own_files::ensure_dir(dir).map_err(|source| ServiceError::Io {
            path: dir.clone(),
            source,
        })?;
    }
    own_files::write_atomic(&unit.path, unit.contents.as_bytes(), UNIT_MODE).map_err(|source| {
        ServiceError::Io {
            path: unit.path.clone(),
            source,
        }
    })?;
    writeln!(out, "wrote {}", unit.path.display())?;
    if let Some((path, contents)) = &unit.desktop_entry {
        own_files::write_atomic(path, contents.as_bytes(), UNIT_MODE).map_err(|source| {
            ServiceError::Io {
                path: path.clone(),
                source,
            }
        })?;
        writeln!(
            out,
            "wrote {}, with which KDE's KWin lets the installed binary take screenshots",
            path.display()
        )?;
    }
    Ok(())
}

/// Removes the entry if present (so running it twice is fine) and prints the command that
/// stops what the service manager may still have loaded. An entry known to be enabled is
/// left in place: its disable command needs the file, so that comes first.
///
/// # Errors
/// [`ServiceError::StillEnabled`]; the file exists but cannot be removed, or the report
/// cannot be printed.
pub fn uninstall(unit: &Unit, out: &mut dyn Write) -> Result<(), ServiceError> {
    if let Some(marker) = &unit.enabled_marker {
        // The link resolves only while the unit file it points at exists.
        let enabled = own_files::read_capped(marker, UNIT_CAP)
            .map_err(|source| ServiceError::Io {
                path: marker.clone(),
                source,
            })?
            .is_some();
        if enabled {
            return Err(ServiceError::StillEnabled {
                path: unit.path.clone(),
                disable: unit.disable_command.clone(),
            });
        }
    }
    let removed = own_files::remove(&unit.path).map_err(|source| ServiceError::Io {
        path: unit.path.clone(),
        source,
    })?;
    if removed {
        writeln!(out, "removed {}", unit.path.display())?;
    } else {
        writeln!(
            out,
            "nothing to remove: {} does not exist",
            unit.path.display()
        )?;
    }
    if let Some((path, _)) = &unit.desktop_entry {
        let removed = own_files::remove(path).map_err(|source| ServiceError::Io {
            path: path.clone(),
            source,
        })?;
        if removed {
            writeln!(out, "removed {}", path.display())?;
        }
    }
    writeln!(out, "{}", unit.after_removal)?;
    Ok(())
}

/// Prints whether the entry is installed (and whether it matches this build's template), its
/// path and its commands, for `status`; returns whether it is installed.
///
/// # Errors
/// The file exists but cannot be read, or the report cannot be printed.
pub fn describe(unit: &Unit, out: &mut dyn Write) -> Result<bool, ServiceError> {
    let current = installed(unit)?;
    match current {
        Some(true) => {
            writeln!(out, "autostart: installed at {}", unit.path.display())?;
        }
        Some(false) => writeln!(
            out,
            "autostart: installed at {} (differs from this build's entry; run install again to update it)",
            unit.path.display()
        )?,
        None => writeln!(
            out,
            "autostart: not installed ({} does not exist)",
            unit.path.display()
        )?,
    }
    writeln!(out, "  enable: {}", unit.enable_command)?;
    writeln!(out, "  disable: {}", unit.disable_command)?;
    for note in &unit.notes {
        writeln!(out, "  note: {note}")?;
    }
    Ok(current.is_some())
}

/// The entry's state for `status --json`: `path`, `installed`, `current` (whether it is this
/// build's entry; null when not installed), `enable_command` and `disable_command`.
///
/// # Errors
/// The file exists but cannot be read.
pub fn describe_json(unit: &Unit) -> Result<serde_json::Value, ServiceError> {
    let current = installed(unit)?;
    Ok(serde_json::json!({
        "path": unit.path.display().to_string(),
        "installed": current.is_some(),
        "current": current,
        "enable_command": unit.enable_command,
        "disable_command": unit.disable_command,
    }))
}

/// `None` when the entry is not installed, else whether it is this build's entry.
fn installed(unit: &Unit) -> Result<Option<bool>, ServiceError> {
    let current =
        own_files::read_capped(&unit.path, UNIT_CAP).map_err(|source| ServiceError::Io {
            path: unit.path.clone(),
            source,
        })?;
    Ok(current.map(|bytes| bytes.as_slice() == unit.contents.as_bytes()))
}

#[cfg(test)]
mod tests;
