//! `autogpt-shim doctor`: preflight checks of what `start` will need, printed one per line as
//! `[OK  ] label  detail` (or `WARN`, `FAIL`, `INFO`), exit 78 when any check fails
//! (shim-reference-behaviour.md section 16).
//!
//! The caller resolves the configuration and the environment into [`DoctorInputs`]; nothing
//! here reads configuration or environment variables. The checks do what the daemon would do
//! at start-up and no more: they create the allowed root (legacy mode), the audit directory
//! and the audit key when missing, and leave no probe file behind.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use local_core::audit_chain;
use local_core::own_files::{self, PrivateFileError};
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
        shell(inputs.enable_shell),
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
    let roots = local_core::browse::virtual_roots(inputs.home.as_deref());
    if roots.is_empty() {
        return Some((
            Level::Fail,
            LABEL,
            "no folder to browse from: the home directory is missing or not readable, writable and searchable".to_owned(),
        ));
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
    // The daemon creates it in legacy mode too, so creating it here is no surprise.
    if let Err(err) = own_files::ensure_dir(root) {
        return Some((
            Level::Fail,
            LABEL,
            format!("cannot create {}: {err}", root.display()),
        ));
    }
    Some(match probe_dir(root) {
        Ok(()) => (Level::Ok, LABEL, format!("{} is writable", root.display())),
        Err(err) => (
            Level::Fail,
            LABEL,
            format!("{} is not writable: {err}", root.display()),
        ),
    })
}

/// Creates and removes an empty file in `dir`.
fn probe_dir(dir: &Path) -> io::Result<()> {
    let probe = dir.join(format!(
        ".autogpt-shim-doctor-{}",
        local_core::secret::new_id().simple()
    ));
    own_files::write_atomic(&probe, b"", own_files::PRIVATE_FILE_MODE)?;
    own_files::remove(&probe).map(drop)
}

fn audit_log(path: &Path) -> Check {
    const LABEL: &str = "audit log";
    Some(match audit_chain::probe_writable(path) {
        Ok(()) => (Level::Ok, LABEL, format!("{} is writable", path.display())),
        Err(err) => (
            Level::Fail,
            LABEL,
            format!(
                "cannot write {}: {err}; the daemon refuses to run unaudited",
                path.display()
            ),
        ),
    })
}

fn audit_key(path: &Path) -> Check {
    const LABEL: &str = "audit key";
    // Loading without creating first: a file holding no key must be reported, not replaced.
    let level_detail = match audit_chain::load_key_file(path) {
        Ok(_) => (Level::Ok, format!("loaded from {}", path.display())),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            match audit_chain::load_or_create_key_file(path) {
                Ok(_) => (Level::Ok, format!("created {}", path.display())),
                Err(err) => (
                    Level::Fail,
                    format!("cannot create {}: {err}", path.display()),
                ),
            }
        }
        Err(err) if err.kind() == io::ErrorKind::InvalidData => (
            Level::Warn,
            format!(
                "{err}; the daemon will replace it, and records signed with the old key will no longer verify"
            ),
        ),
        Err(err) => (Level::Fail, err.to_string()),
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
        Err(err) => return Some((Level::Fail, LABEL, format!("{shown}: {err}"))),
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
            format!("{shown}: not a URL with a host"),
        ));
    };
    let loopback = matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]" | "::1");
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

fn shell(enabled: bool) -> Check {
    Some(if enabled {
        (
            Level::Warn,
            "shell",
            "enabled: shell gives the platform full user-level access to this machine".to_owned(),
        )
    } else {
        (Level::Ok, "shell", "disabled".to_owned())
    })
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
mod tests {
    use super::super::audit::test_dir::TempDir;
    use super::*;

    fn inputs(dir: &TempDir) -> DoctorInputs {
        DoctorInputs {
            os: Os::Linux,
            session_id: Some("s-1".to_owned()),
            allowed_root: dir.join("workspace/root"),
            home: Some(dir.join("home")),
            audit_log_path: dir.join("state/audit.log"),
            audit_key_path: dir.join("state/audit-key"),
            token_in_env: false,
            token_file: Some(dir.join("token")),
            platform_url: "https://user:pw@platform.example/".to_owned(),
            enable_shell: false,
            enable_computer_use: false,
            enable_recording: false,
            xdg_session_type: None,
            wayland_display: Some("wayland-0".to_owned()),
            display: Some(":0".to_owned()),
        }
    }

    fn run(inputs: &DoctorInputs) -> (u8, String) {
        let mut out = Vec::new();
        let code = doctor(inputs, &mut out);
        (code, String::from_utf8(out).unwrap())
    }

    #[test]
    fn a_clean_setup_passes() {
        let dir = TempDir::new("doctor-clean");
        let inputs = inputs(&dir);
        own_files::write_atomic(&dir.join("token"), b"secret\n", 0o600).unwrap();
        let (code, out) = run(&inputs);
        assert_eq!(code, 0, "{out}");
        let root = dir.join("workspace/root");
        let expected = [
            "[INFO] mode  legacy direct session s-1".to_owned(),
            format!("[OK  ] allowed root  {} is writable", root.display()),
            format!(
                "[OK  ] audit log  {} is writable",
                dir.join("state/audit.log").display()
            ),
            format!(
                "[OK  ] audit key  created {}",
                dir.join("state/audit-key").display()
            ),
            format!(
                "[OK  ] token  {} is readable by you only",
                dir.join("token").display()
            ),
            "[OK  ] platform URL  https://platform.example/".to_owned(),
            "[OK  ] shell  disabled".to_owned(),
            "[INFO] session type  Wayland (WAYLAND_DISPLAY=wayland-0)".to_owned(),
            "no blocking problems: the daemon can start".to_owned(),
        ];
        assert_eq!(out.lines().collect::<Vec<_>>(), expected);
        assert!(!out.contains("secret") && !out.contains("pw@"));
        // The root exists and no probe file was left in it or in the audit directory.
        assert!(
            own_files::read_capped(&dir.join("state/audit.log"), 1)
                .unwrap()
                .is_none()
        );

        // A second run loads the key it created.
        let (code, out) = run(&inputs);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("[OK  ] audit key  loaded from "), "{out}");
    }

    #[test]
    fn an_allowed_root_under_a_regular_file_blocks() {
        let dir = TempDir::new("doctor-root");
        own_files::write_atomic(&dir.join("file"), b"x", 0o600).unwrap();
        let mut inputs = inputs(&dir);
        inputs.allowed_root = dir.join("file/root");
        let (code, out) = run(&inputs);
        assert_eq!(code, EXIT_BLOCKED, "{out}");
        assert!(out.contains("[FAIL] allowed root  cannot create "), "{out}");
        assert!(out.contains("[WARN] token  "), "{out}");
        assert!(out.ends_with("1 blocking problem: fix it before starting the daemon\n"));

        // Control mode does not use the allowed root, but needs a folder to browse from.
        inputs.session_id = None;
        let (code, out) = run(&inputs);
        assert_eq!(code, EXIT_BLOCKED, "{out}");
        assert!(out.contains("[INFO] allowed root  "), "{out}");
        assert!(
            out.contains("[FAIL] virtual roots  no folder to browse from"),
            "{out}"
        );
        own_files::ensure_dir(&dir.join("home")).unwrap();
        let (code, out) = run(&inputs);
        assert_eq!(code, 0, "{out}");
        let line = out
            .lines()
            .find(|line| line.starts_with("[OK  ] virtual roots  "))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(line.ends_with("/home"), "{out}");
    }

    #[cfg(unix)]
    #[test]
    fn an_open_token_file_blocks() {
        let dir = TempDir::new("doctor-token");
        own_files::write_atomic(&dir.join("token"), b"secret\n", 0o644).unwrap();
        let mut inputs = inputs(&dir);
        let (code, out) = run(&inputs);
        assert_eq!(code, EXIT_BLOCKED, "{out}");
        assert!(out.contains("[FAIL] token  "), "{out}");
        assert!(out.contains("mode 0644"), "{out}");
        assert!(!out.contains("secret\n"));

        // Even when the environment supplies the token.
        inputs.token_in_env = true;
        assert_eq!(run(&inputs).0, EXIT_BLOCKED);
    }

    #[test]
    fn features_urls_and_sessions() {
        let dir = TempDir::new("doctor-features");
        let mut inputs = inputs(&dir);
        inputs.token_file = None;
        inputs.token_in_env = true;
        inputs.enable_shell = true;
        inputs.platform_url = "ftp://platform.example".to_owned();
        inputs.xdg_session_type = Some("x11".to_owned());
        let (code, out) = run(&inputs);
        assert_eq!(code, EXIT_BLOCKED, "{out}");
        assert!(
            out.contains("[OK  ] token  from the environment\n"),
            "{out}"
        );
        assert!(
            out.contains("[WARN] shell  enabled: shell gives the platform full user-level access"),
            "{out}"
        );
        assert!(
            out.contains("[FAIL] platform URL  ftp://platform.example: "),
            "{out}"
        );
        assert!(
            out.contains("[INFO] session type  X11 (XDG_SESSION_TYPE)\n"),
            "{out}"
        );

        inputs.platform_url = "ws://platform.example".to_owned();
        inputs.enable_computer_use = true;
        inputs.enable_recording = true;
        inputs.os = Os::Macos;
        let (code, out) = run(&inputs);
        assert_eq!(code, EXIT_BLOCKED);
        assert!(
            out.contains("[WARN] platform URL  ws://platform.example: unencrypted"),
            "{out}"
        );
        assert!(out.contains("[FAIL] computer use  "), "{out}");
        assert!(out.contains("[FAIL] recording  "), "{out}");
        assert!(!out.contains("session type"), "{out}");
        assert!(out.ends_with("2 blocking problems: fix them before starting the daemon\n"));

        inputs.platform_url = "ws://localhost:8000".to_owned();
        assert!(
            run(&inputs)
                .1
                .contains("[OK  ] platform URL  ws://localhost:8000\n")
        );
        inputs.platform_url = "wss://".to_owned();
        assert!(run(&inputs).1.contains("[FAIL] platform URL  "));
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_open_to_others_blocks_and_a_bad_key_warns() {
        let dir = TempDir::new("doctor-key");
        let mut inputs = inputs(&dir);
        inputs.token_file = None;
        own_files::write_atomic(&inputs.audit_key_path, &[b'a'; 64], 0o644).unwrap();
        let (code, out) = run(&inputs);
        assert_eq!(code, EXIT_BLOCKED, "{out}");
        assert!(out.contains("[FAIL] audit key  "), "{out}");

        own_files::write_atomic(&inputs.audit_key_path, b"not a key", 0o600).unwrap();
        let (code, out) = run(&inputs);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("[WARN] audit key  "), "{out}");
        // Reported, not replaced.
        assert_eq!(
            own_files::read_capped(&inputs.audit_key_path, 64)
                .unwrap()
                .unwrap(),
            b"not a key"
        );
    }
}
