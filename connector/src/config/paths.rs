//! The per-OS places of the connector's own files (config file, state directory, audit log,
//! audit key, the daemons' locks and status files, default jail root), from the environment
//! so every branch is testable on one OS.

use std::path::PathBuf;

use super::{APP_DIR, Env};

/// The config file: Linux `$XDG_CONFIG_HOME/autogpt-local-executor/config.toml` (fallback
/// `~/.config`), macOS `~/Library/Application Support/autogpt-local-executor/config.toml`,
/// Windows `%APPDATA%\autogpt-local-executor\config.toml`. `None` without a home directory.
pub fn config_path(env: &impl Env) -> Option<PathBuf> {
    config_path_for(Os::CURRENT, env)
}

/// The connector's state directory, home of the default audit log, the audit key file and
/// the status file: Linux `$XDG_STATE_HOME/autogpt-local-executor` (fallback
/// `~/.local/state`), macOS `~/Library/Logs/autogpt-local-executor` (where the reference keeps
/// its audit log), Windows `%LOCALAPPDATA%\autogpt-local-executor`.
pub fn state_dir(env: &impl Env) -> Option<PathBuf> {
    state_dir_for(Os::CURRENT, env)
}

/// The default audit log: `audit.log` in [`state_dir`], under `logs\` on Windows as in the
/// reference.
pub fn default_audit_log_path(env: &impl Env) -> Option<PathBuf> {
    default_audit_log_path_for(Os::CURRENT, env)
}

/// The audit key file: `audit.key` in [`state_dir`].
pub fn audit_key_path(env: &impl Env) -> Option<PathBuf> {
    Some(state_dir(env)?.join("audit.key"))
}

/// The folder of the daemons' locks and status files: `daemons` in [`state_dir`] (see
/// [`crate::commands::status`]).
pub fn daemons_dir(env: &impl Env) -> Option<PathBuf> {
    Some(state_dir(env)?.join("daemons"))
}

/// The reference's default jail root: `~/Documents/autogpt-workspace` on macOS, else
/// `~/autogpt-workspace`.
pub fn default_allowed_root(env: &impl Env) -> Option<PathBuf> {
    default_allowed_root_for(Os::CURRENT, env)
}

/// Which per-OS branch a path follows; a parameter so every branch is testable on one OS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Os {
    Linux,
    Mac,
    Windows,
}

impl Os {
    /// WSL2 and the BSDs follow the Linux branch, as in the reference.
    pub(super) const CURRENT: Self = if cfg!(target_os = "macos") {
        Self::Mac
    } else if cfg!(windows) {
        Self::Windows
    } else {
        Self::Linux
    };
}

pub(super) fn non_blank(env: &impl Env, name: &str) -> Option<String> {
    env.var(name).filter(|value| !value.trim().is_empty())
}

/// The user's home directory from the environment (the first virtual root of a browse).
pub fn home_dir(env: &impl Env) -> Option<PathBuf> {
    home(Os::CURRENT, env)
}

pub(super) fn home(os: Os, env: &impl Env) -> Option<PathBuf> {
    // Python's `Path.home()` prefers USERPROFILE on Windows; a HOME there is often a
    // Unix-style path from a POSIX shell.
    let names: &[&str] = match os {
        Os::Windows => &["USERPROFILE", "HOME"],
        Os::Linux | Os::Mac => &["HOME"],
    };
    names
        .iter()
        .find_map(|name| non_blank(env, name))
        .map(PathBuf::from)
}

/// An XDG base directory; the XDG spec says relative values are invalid and must be ignored.
fn xdg(env: &impl Env, name: &str) -> Option<PathBuf> {
    non_blank(env, name)
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
}

fn windows_dir(env: &impl Env, name: &str, fallback: &[&str]) -> Option<PathBuf> {
    non_blank(env, name).map(PathBuf::from).or_else(|| {
        let mut path = home(Os::Windows, env)?;
        path.extend(fallback);
        Some(path)
    })
}

pub(super) fn config_path_for(os: Os, env: &impl Env) -> Option<PathBuf> {
    let base = match os {
        Os::Linux => xdg(env, "XDG_CONFIG_HOME").or_else(|| Some(home(os, env)?.join(".config"))),
        Os::Mac => Some(home(os, env)?.join("Library").join("Application Support")),
        Os::Windows => windows_dir(env, "APPDATA", &["AppData", "Roaming"]),
    }?;
    Some(base.join(APP_DIR).join("config.toml"))
}

pub(super) fn state_dir_for(os: Os, env: &impl Env) -> Option<PathBuf> {
    let base = match os {
        Os::Linux => {
            xdg(env, "XDG_STATE_HOME").or_else(|| Some(home(os, env)?.join(".local").join("state")))
        }
        Os::Mac => Some(home(os, env)?.join("Library").join("Logs")),
        Os::Windows => windows_dir(env, "LOCALAPPDATA", &["AppData", "Local"]),
    }?;
    Some(base.join(APP_DIR))
}

pub(super) fn default_audit_log_path_for(os: Os, env: &impl Env) -> Option<PathBuf> {
    let dir = state_dir_for(os, env)?;
    Some(match os {
        Os::Windows => dir.join("logs").join("audit.log"),
        Os::Linux | Os::Mac => dir.join("audit.log"),
    })
}

pub(super) fn default_allowed_root_for(os: Os, env: &impl Env) -> Option<PathBuf> {
    let home = home(os, env)?;
    Some(match os {
        Os::Mac => home.join("Documents").join("autogpt-workspace"),
        Os::Linux | Os::Windows => home.join("autogpt-workspace"),
    })
}
