//! `autogpt-shim doctor`: preflight checks of what `start` will need, printed one per line as
//! `[OK  ] label  detail` (or `WARN`, `FAIL`, `INFO`), exit 78 when any check fails
//! (shim-reference-behaviour.md section 16).
//!
//! The caller resolves the configuration and the environment into [`DoctorInputs`]; nothing
//! here reads configuration or environment variables. The checks only look: they create no
//! folder, key or file of any kind (writability is asked of the OS, not probed with a file),
//! and each failure says how to fix it (`mkdir -p <root>`, `chmod 600 <file>`).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use local_core::machine::audit_chain;
use local_core::machine::own_files::{self, PrivateFileError};
use local_core::machine::sandbox::{SandboxMode, Support};
use tokio_tungstenite::tungstenite::http::Uri;

use super::service::Os;
use super::status::redact_url;
use crate::ws::ws_base;

/// Exit code when a blocking check failed (the reference's preflight code).
pub const EXIT_BLOCKED: u8 = 78;
/// The largest token file the check reads.
const TOKEN_FILE_CAP: u64 = 64 * 1024;

/// Everything the checks look at, already resolved by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)]
pub struct DoctorInputs {
    /// The system, for the checks that only apply to one.
    pub os: Os,
    /// The legacy direct session id; `None` is control mode.
    pub session_id: Option<String>,
    /// The FILE_* jail root.
    pub allowed_root: PathBuf,
    /// The home directory: control mode browses from it and the mounted volumes.
    pub home: Option<PathBuf>,
    /// The live audit log.
    pub audit_log_path: PathBuf,
    /// The audit key file.
    pub audit_key_path: PathBuf,
    /// Whether a non-blank token is set in the environment.
    pub token_in_env: bool,
    /// The token file, when one is configured.
    pub token_file: Option<PathBuf>,
    /// The platform URL as configured.
    pub platform_url: String,
    /// `enable_shell`.
    pub enable_shell: bool,
    /// `shell_sandbox`.
    pub shell_sandbox: SandboxMode,
    /// What the sandbox probe found on this machine (Linux only).
    pub sandbox_support: Option<Support>,
    /// `enable_computer_use`.
    pub enable_computer_use: bool,
    /// `enable_recording`.
    pub enable_recording: bool,
    /// `XDG_SESSION_TYPE`.
    pub xdg_session_type: Option<String>,
    /// `WAYLAND_DISPLAY`.
    pub wayland_display: Option<String>,
    /// `DISPLAY`.
    pub display: Option<String>,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Ok,
    Info,
    Warn,
    /// Blocking: `start` would refuse or fail.
    Fail,
}

impl Level {
    const fn marker(self) -> &'static str {
        match self {
            Self::Ok => "[OK  ]",
            Self::Info => "[INFO]",
            Self::Warn => "[WARN]",
            Self::Fail => "[FAIL]",
        }
    }
}

/// Runs every check, prints one line each and a summary, and returns 0, or [`EXIT_BLOCKED`]
/// when any check failed (1 if the report itself cannot be printed).
pub fn doctor(inputs: &DoctorInputs, out: &mut dyn Write) -> u8 {
    let checks = [
        mode(inputs),
        allowed_root(inputs),
        virtual_roots(inputs),
        audit_log(&inputs.audit_log_path),
        audit_key(&inputs.audit_key_path),
        token(inputs),
        platform_url(&inputs.platform_url),
        shell(inputs.enable_shell, inputs.shell_sandbox),
        shell_sandbox(inputs),
        session_type(inputs),
        computer_use(inputs.enable_computer_use),
        recording(inputs.enable_recording),
    ];
    let printed = (|| -> io::Result<usize> {
        let mut failed = 0;
        for (level, label, detail) in checks.into_iter().flatten() {
            writeln!(out, "{} {label}  {detail}", level.marker())?;
            failed += usize::from(level == Level::Fail);
        }
        if failed == 0 {
            writeln!(out, "no blocking problems: the daemon can start")?;
        } else {
            writeln!(
                out,
                "{failed} blocking {}: fix {} before starting the daemon",
                if failed == 1 { "problem" } else { "problems" },
                if failed == 1 { "it" } else { "them" }
            )?;
        }
        Ok(failed)
    })();
    match printed {
        Ok(0) => 0,
        Ok(_) => EXIT_BLOCKED,
        Err(_) => 1,
    }
}

type Check = Option<(Level, &'static str, String)>;

fn mode(inputs: &DoctorInputs) -> Check {
    let detail = match &inputs.session_id {
        Some(id) => format!("legacy direct session {id}"),
        None => "persistent machine control".to_owned(),
    };
    Some((Level::Info, "mode", detail))
}

/// The reference's control-mode check: the folders the platform can browse from (the home
/// directory and mounted volumes); none blocks, since no chat could pick a folder.
fn virtual_roots(inputs: &DoctorInputs) -> Check {
    /// Paths named in the line; the rest are counted.
    const SHOWN: usize = 5;
    const LABEL: &str = "virtual roots";
    if inputs.session_id.is_some() {
        return None;
    }
    let roots = local_core::machine::browse::virtual_roots(inputs.home.as_deref());
    if roots.is_empty() {
        let detail = match inputs.home.as_deref() {
            Some(home) if !home.exists() => format!(
                "no folder to browse from: the home directory {} does not exist; create it with `mkdir -p {}`, or set HOME to your home folder",
                home.display(),
                shell_quote(home)
            ),
            Some(home) => format!(
                "no folder to browse from: the home directory {} is not readable, writable and searchable by you; run `chmod u+rwx {}`, or set HOME to your home folder",
                home.display(),
                shell_quote(home)
            ),
            None => {
                "no folder to browse from: HOME is not set; set it to your home folder".to_owned()
            }
        };
        return Some((Level::Fail, LABEL, detail));
    }
    let mut shown: Vec<String> = roots
        .iter()
        .take(SHOWN)
        .map(|root| root.path.display().to_string())
        .collect();
    if roots.len() > SHOWN {
        shown.push(format!("and {} more", roots.len() - SHOWN));
    }
    Some((Level::Ok, LABEL, shown.join(", ")))
}

fn allowed_root(inputs: &DoctorInputs) -> Check {
    const LABEL: &str = "allowed root";
    let root = &inputs.allowed_root;
    if inputs.session_id.is_none() {
        return Some((
            Level::Info,
            LABEL,
            format!(
                "{} is not used in control mode: sessions get the folder chosen on the platform",
                root.display()
            ),
        ));
    }
    // `start` refuses a missing root, so doctor reports it and leaves creating it to the user
    // (a typo in --allowed-root must not become a folder).
    Some(match own_files::look(root) {
        Err(err) if err.kind() == io::ErrorKind::NotADirectory => (
            Level::Fail,
            LABEL,
            format!(
                "{} cannot be a folder because a file stands in its path: pass --allowed-root with a folder",
                root.display()
            ),
        ),
        Err(err) if err.kind() == io::ErrorKind::NotFound => (
            Level::Fail,
            LABEL,
            format!(
                "{} does not exist: create it with `mkdir -p {}`, or pass --allowed-root with an existing folder",
                root.display(),
                shell_quote(root)
            ),
        ),
        Err(err) => (
            Level::Fail,
            LABEL,
            format!(
                "{} cannot be read ({}): check the folders above it, or pass --allowed-root with another folder",
                root.display(),
                describe(&err)
            ),
        ),
        Ok(meta) if !meta.is_dir() => (
            Level::Fail,
            LABEL,
            format!(
                "{} is not a folder: pass --allowed-root with a folder",
                root.display()
            ),
        ),
        Ok(_) => match own_files::writable(root) {
            Ok(()) => (Level::Ok, LABEL, format!("{} is writable", root.display())),
            Err(err) => (
                Level::Fail,
                LABEL,
                format!(
                    "{} is not writable by you ({}): run `chmod u+rwx {}`, or pass --allowed-root with another folder",
                    root.display(),
                    describe(&err),
                    shell_quote(root)
                ),
            ),
        },
    })
}

/// Whether `start` could create the folder `dir` (and any missing parents): `Ok(None)` when it
/// exists and is writable, `Ok(Some(ancestor))` when it is missing and its nearest existing
/// ancestor is writable, or the ancestor at fault and why.
fn creatable(dir: &Path) -> Result<Option<&Path>, (&Path, io::Error)> {
    let mut current = dir;
    loop {
        match own_files::look(current) {
            Ok(meta) if meta.is_dir() => {
                own_files::writable(current).map_err(|err| (current, err))?;
                return Ok((current != dir).then_some(current));
            }
            Ok(_) => {
                return Err((
                    current,
                    io::Error::new(io::ErrorKind::NotADirectory, "not a folder"),
                ));
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => match current.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => current = parent,
                _ => return Err((current, err)),
            },
            Err(err) => return Err((current, err)),
        }
    }
}

/// An I/O error in words, without the `(os error N)` suffix.
fn describe(err: &io::Error) -> String {
    match err.kind() {
        io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        io::ErrorKind::NotADirectory => "not a folder".to_owned(),
        io::ErrorKind::NotFound => "it does not exist".to_owned(),
        io::ErrorKind::ReadOnlyFilesystem => "the file system is read-only".to_owned(),
        kind => kind.to_string(),
    }
}

/// `path` as a POSIX shell word, quoted only when it needs to be.
fn shell_quote(path: &Path) -> String {
    let text = path.display().to_string();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c));
    if plain {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

fn audit_log(path: &Path) -> Check {
    const LABEL: &str = "audit log";
    let unaudited = "the daemon refuses to run unaudited";
    match own_files::writable(path) {
        Ok(()) => return Some((Level::Ok, LABEL, format!("{} is writable", path.display()))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => {
            return Some((
                Level::Fail,
                LABEL,
                format!(
                    "cannot write {} ({}): run `chmod u+rw {}`, or set audit_log_path; {unaudited}",
                    path.display(),
                    describe(&err),
                    shell_quote(path)
                ),
            ));
        }
    }
    Some(new_file(LABEL, path, "audit_log_path", unaudited))
}

/// A file `start` will create at `path`: fine when its folder exists and is writable or can
/// be created; otherwise how to make one that can.
fn new_file(
    label: &'static str,
    path: &Path,
    setting: &str,
    consequence: &str,
) -> (Level, &'static str, String) {
    let dir = path.parent().unwrap_or(Path::new("."));
    match creatable(dir) {
        Ok(None) => (
            Level::Ok,
            label,
            format!("{} does not exist yet; `start` creates it", path.display()),
        ),
        Ok(Some(_)) => (
            Level::Ok,
            label,
            format!(
                "{} does not exist yet; `start` creates it and its folder {}",
                path.display(),
                dir.display()
            ),
        ),
        Err((at, err)) => (
            Level::Fail,
            label,
            format!(
                "{} cannot be created: {} is {} ({}); run `mkdir -p {}` as a user who can, or set {setting}; {consequence}",
                path.display(),
                at.display(),
                if err.kind() == io::ErrorKind::NotADirectory {
                    "not a folder"
                } else {
                    "not writable"
                },
                describe(&err),
                shell_quote(dir)
            ),
        ),
    }
}

fn audit_key(path: &Path) -> Check {
    const LABEL: &str = "audit key";
    // Loading only: a missing key is left for `start` to create, and a file holding no key is
    // reported, not replaced.
    let level_detail = match audit_chain::load_key_file(path) {
        Ok(_) => (Level::Ok, format!("loaded from {}", path.display())),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            let (level, _, detail) = new_file(
                LABEL,
                path,
                "XDG_STATE_HOME",
                "the daemon cannot sign its audit log without it",
            );
            (level, detail)
        }
        Err(err) if err.kind() == io::ErrorKind::InvalidData => (
            Level::Warn,
            format!(
                "{err}; the daemon will replace it, and records signed with the old key will no longer verify"
            ),
        ),
        // The key file's own check already says `chmod 600`.
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied && err.get_ref().is_some() => {
            (Level::Fail, err.to_string())
        }
        Err(err) => (
            Level::Fail,
            format!(
                "cannot read {} ({}): run `chmod 600 {}` if it is yours, or remove it so `start` makes a new one",
                path.display(),
                describe(&err),
                shell_quote(path)
            ),
        ),
    };
    Some((level_detail.0, LABEL, level_detail.1))
}

fn token(inputs: &DoctorInputs) -> Check {
    const LABEL: &str = "token";
    const NONE: &str = "the daemon connects without an Authorization header";
    let env = inputs.token_in_env;
    let Some(path) = &inputs.token_file else {
        return Some(if env {
            (Level::Ok, LABEL, "from the environment".to_owned())
        } else {
            (Level::Warn, LABEL, format!("none configured: {NONE}"))
        });
    };
    // A secret file open to others is a problem even when the environment's token wins.
    Some(match own_files::read_private(path, TOKEN_FILE_CAP) {
        Ok(bytes) if env => (
            Level::Ok,
            LABEL,
            format!(
                "from the environment ({} is private{})",
                path.display(),
                if bytes.trim_ascii().is_empty() {
                    " but empty"
                } else {
                    ""
                }
            ),
        ),
        Ok(bytes) if bytes.trim_ascii().is_empty() => (
            Level::Warn,
            LABEL,
            format!("{} is empty: {NONE}", path.display()),
        ),
        Ok(_) => (
            Level::Ok,
            LABEL,
            format!("{} is readable by you only", path.display()),
        ),
        Err(PrivateFileError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            if env {
                (
                    Level::Info,
                    LABEL,
                    format!("from the environment ({} does not exist)", path.display()),
                )
            } else {
                (
                    Level::Warn,
                    LABEL,
                    format!("{} does not exist: {NONE}", path.display()),
                )
            }
        }
        Err(err) => (Level::Fail, LABEL, err.to_string()),
    })
}

fn platform_url(url: &str) -> Check {
    const LABEL: &str = "platform URL";
    let shown = redact_url(url);
    let base = match ws_base(url) {
        Ok(base) => base,
        Err(err) => {
            return Some((
                Level::Fail,
                LABEL,
                format!("{shown}: {err}; pass --platform-url with a wss:// or https:// URL"),
            ));
        }
    };
    let host = base
        .parse::<Uri>()
        .ok()
        .and_then(|uri| uri.host().map(str::to_owned))
        .filter(|host| !host.is_empty());
    let Some(host) = host else {
        return Some((
            Level::Fail,
            LABEL,
            format!(
                "{shown}: not a URL with a host; pass --platform-url with a wss:// or https:// URL"
            ),
        ));
    };
    let loopback = local_core::loopback::is_loopback_host(&host);
    Some(if base.starts_with("ws://") && !loopback {
        (
            Level::Warn,
            LABEL,
            format!(
                "{shown}: unencrypted; the token and every request cross the network in clear text"
            ),
        )
    } else {
        (Level::Ok, LABEL, shown)
    })
}

fn shell(enabled: bool, sandbox: SandboxMode) -> Check {
    Some(match (enabled, sandbox) {
        (false, _) => (Level::Ok, "shell", "disabled".to_owned()),
        (true, SandboxMode::Off) => (
            Level::Warn,
            "shell",
            "enabled: shell gives the platform full user-level access to this machine; --shell-sandbox workspace keeps commands from changing anything outside the allowed root, strict also from reading your other files and reaching the network".to_owned(),
        ),
        (true, mode) => (
            Level::Ok,
            "shell",
            format!("enabled in the `{mode}` sandbox: {}", mode.protects()),
        ),
    })
}

/// What the kernel offers the shell sandbox, and whether the configured mode can be enforced.
fn shell_sandbox(inputs: &DoctorInputs) -> Check {
    const LABEL: &str = "shell sandbox";
    let mode = inputs.shell_sandbox;
    let Some(support) = &inputs.sandbox_support else {
        return (mode != SandboxMode::Off).then(|| {
            (
                Level::Fail,
                LABEL,
                format!("`{mode}` is configured, but the shell sandbox is Linux-only for now: set shell_sandbox to off"),
            )
        });
    };
    let found = support.summary();
    if let Some(missing) = support.missing(mode) {
        return Some((
            Level::Fail,
            LABEL,
            format!(
                "`{mode}` cannot be enforced here: {missing}; start would refuse it (found: {found})"
            ),
        ));
    }
    let usable: Vec<&str> = [SandboxMode::Workspace, SandboxMode::Strict]
        .into_iter()
        .filter(|mode| support.missing(*mode).is_none())
        .map(SandboxMode::as_str)
        .collect();
    let offered = if usable.is_empty() {
        "no mode can be enforced here".to_owned()
    } else {
        format!("{} can be enforced", usable.join(" and "))
    };
    Some((
        if mode == SandboxMode::Off {
            Level::Info
        } else {
            Level::Ok
        },
        LABEL,
        format!("`{mode}`; {found}: {offered}"),
    ))
}

/// Which graphical session this is, as computer use will need to know; Linux only.
fn session_type(inputs: &DoctorInputs) -> Check {
    if inputs.os != Os::Linux {
        return None;
    }
    let set = |value: &Option<String>| {
        value
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let detail = match set(&inputs.xdg_session_type).map(|t| t.to_ascii_lowercase()) {
        Some(kind) if kind == "wayland" => "Wayland (XDG_SESSION_TYPE)".to_owned(),
        Some(kind) if kind == "x11" => "X11 (XDG_SESSION_TYPE)".to_owned(),
        other => match (set(&inputs.wayland_display), set(&inputs.display)) {
            (Some(display), _) => format!("Wayland (WAYLAND_DISPLAY={display})"),
            (None, Some(display)) => format!("X11 (DISPLAY={display})"),
            (None, None) => match other {
                Some(kind) => format!("{kind}: no graphical session"),
                None => "no graphical session".to_owned(),
            },
        },
    };
    Some((Level::Info, "session type", detail))
}

fn computer_use(enabled: bool) -> Check {
    enabled.then(|| {
        (
            Level::Fail,
            "computer use",
            "enabled, but this build has no computer use yet; turn enable_computer_use off"
                .to_owned(),
        )
    })
}

fn recording(enabled: bool) -> Check {
    enabled.then(|| {
        (
            Level::Fail,
            "recording",
            "enabled, but workflow recording is a design preview and start-up always refuses it"
                .to_owned(),
        )
    })
}

#[cfg(test)]
mod tests;
