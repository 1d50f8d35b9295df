//! The `autogpt-shim` command line and its configuration: flags over `AUTOGPT_SHIM_*`
//! environment variables over defaults (shim-reference-behaviour.md sections 2 and 3).
//!
//! Everything here is pure so the precedence and the refusals are testable without
//! starting the daemon; `main.rs` only acts on what [`resolve`] decides.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::protocol::is_valid_session_id;
use crate::ws::{Backoff, DEFAULT_PLATFORM_URL, Token, data_url};

/// Exit code for a refused start-up (the reference's `DaemonPreflightError`).
pub const EXIT_PREFLIGHT: u8 = 78;
/// Exit code for an authentication failure (the reference's `DaemonAuthenticationError`).
pub const EXIT_AUTH: u8 = 77;

/// The local executor: connects this machine to the agent platform.
#[derive(Debug, Parser)]
#[command(name = "autogpt-shim", version)]
pub struct Cli {
    /// Override the FILE_* jail root.
    #[arg(long, global = true, value_name = "PATH")]
    pub allowed_root: Option<PathBuf>,
    /// Platform base URL (wss, ws, https or http).
    #[arg(long, global = true, value_name = "URL")]
    pub platform_url: Option<String>,
    /// Legacy direct session id; without it the shim would run in control mode.
    #[arg(long, global = true, value_name = "ID")]
    pub session_id: Option<String>,
    /// Log level: DEBUG, INFO, WARNING, ERROR or CRITICAL.
    #[arg(long, global = true, value_name = "LEVEL", default_value = "INFO")]
    pub log_level: String,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands of this build.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground.
    Start(StartArgs),
}

/// `start` flags.
#[derive(Debug, clap::Args)]
#[allow(clippy::struct_excessive_bools)]
pub struct StartArgs {
    /// Advertise and accept `shell` (not available in this build).
    #[arg(long)]
    pub enable_shell: bool,
    /// Design-preview workflow recording; start-up always refuses it.
    #[arg(long)]
    pub enable_recording: bool,
}

/// The environment as the resolver sees it, so tests need not touch the process's.
pub trait Env {
    /// The variable's value, if set and valid Unicode.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl<F: Fn(&str) -> Option<String>> Env for F {
    fn var(&self, name: &str) -> Option<String> {
        self(name)
    }
}

/// A resolved `start`.
#[derive(Debug, Clone)]
pub struct StartConfig {
    /// The data URL to dial.
    pub url: String,
    /// The session id.
    pub session_id: String,
    /// The jail root, as configured; not yet checked (the jail canonicalises it).
    pub allowed_root: PathBuf,
    /// The bearer token, if any.
    pub token: Option<Token>,
    /// Reconnect delays.
    pub backoff: Backoff,
    /// `tracing` level directive.
    pub log_level: &'static str,
    /// The machine id for HELLO.
    pub machine_id: Option<String>,
}

/// A start-up refusal: one line for stderr, and the exit code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The line to print.
    pub message: String,
    /// The exit code.
    pub code: u8,
}

impl Refusal {
    fn preflight(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: EXIT_PREFLIGHT,
        }
    }
}

/// The `tracing` level for a Python logging level name (case-insensitive).
pub fn tracing_level(level: &str) -> Option<&'static str> {
    match level.trim().to_ascii_uppercase().as_str() {
        "DEBUG" => Some("debug"),
        "INFO" => Some("info"),
        "WARNING" | "WARN" => Some("warn"),
        "ERROR" | "CRITICAL" => Some("error"),
        _ => None,
    }
}

/// Resolves flags, environment and defaults into a start configuration, or the refusal.
///
/// # Errors
/// A [`Refusal`] (exit 78) for features this build lacks, control mode, a bad URL, session
/// id, log level or reconnect setting. Whether the allowed root exists is checked when the
/// jail opens it.
pub fn resolve(cli: &Cli, env: &impl Env) -> Result<StartConfig, Refusal> {
    let Command::Start(start) = &cli.command;
    // Fail closed before anything else: these flags ask for more than this build can do.
    if start.enable_recording {
        return Err(Refusal::preflight(
            "--enable-recording is a design preview and always fails closed; start without it",
        ));
    }
    if start.enable_shell {
        return Err(Refusal::preflight(
            "--enable-shell is not available: this build has no shell capability",
        ));
    }
    let log_level = tracing_level(&cli.log_level).ok_or_else(|| {
        Refusal::preflight(format!(
            "unknown --log-level {:?} (use DEBUG, INFO, WARNING, ERROR or CRITICAL)",
            cli.log_level
        ))
    })?;
    let env_var = |name: &str| env.var(name).filter(|value| !value.trim().is_empty());

    // Blank means none, as the reference treats it.
    let session_id = cli
        .session_id
        .clone()
        .filter(|id| !id.trim().is_empty())
        .or_else(|| env_var("AUTOGPT_SHIM_SESSION_ID"))
        .map(|id| id.trim().to_owned())
        .ok_or_else(|| {
            Refusal::preflight(
                "control mode is not in this build: pass --session-id or set AUTOGPT_SHIM_SESSION_ID",
            )
        })?;
    if !is_valid_session_id(&session_id) {
        return Err(Refusal::preflight(
            "the session id must be 1-256 characters of letters, digits, '.', '_', ':' or '-'",
        ));
    }

    let platform_url = cli
        .platform_url
        .clone()
        .or_else(|| env_var("AUTOGPT_SHIM_PLATFORM_URL"))
        .unwrap_or_else(|| DEFAULT_PLATFORM_URL.to_owned());
    let url = data_url(&platform_url, &session_id)
        .map_err(|err| Refusal::preflight(format!("bad platform URL: {err}")))?;

    let allowed_root = cli
        .allowed_root
        .clone()
        .or_else(|| env_var("AUTOGPT_SHIM_ALLOWED_ROOT").map(PathBuf::from))
        .or_else(|| default_allowed_root(env))
        .ok_or_else(|| Refusal::preflight("no allowed root: pass --allowed-root or set HOME"))?;

    let defaults = Backoff::default();
    let backoff = Backoff {
        base: seconds(env, "AUTOGPT_SHIM_RECONNECT_BASE_DELAY", defaults.base)?,
        max: seconds(env, "AUTOGPT_SHIM_RECONNECT_MAX_DELAY", defaults.max)?,
        jitter: seconds(
            env,
            "AUTOGPT_SHIM_RECONNECT_JITTER_SECONDS",
            defaults.jitter,
        )?,
    };

    Ok(StartConfig {
        url,
        session_id,
        allowed_root,
        token: Token::from_configured(env.var("AUTOGPT_SHIM_TOKEN").as_deref()),
        backoff,
        log_level,
        machine_id: env_var("AUTOGPT_SHIM_MACHINE_ID").map(|id| id.trim().to_owned()),
    })
}

/// The reference's default: `~/Documents/autogpt-workspace` on macOS, else
/// `~/autogpt-workspace`.
fn default_allowed_root(env: &impl Env) -> Option<PathBuf> {
    let home = PathBuf::from(env.var("HOME").filter(|home| !home.is_empty())?);
    Some(if cfg!(target_os = "macos") {
        home.join("Documents").join("autogpt-workspace")
    } else {
        home.join("autogpt-workspace")
    })
}

/// A non-negative number of seconds from the environment (the reference's float fields).
fn seconds(env: &impl Env, name: &str, default: Duration) -> Result<Duration, Refusal> {
    let Some(raw) = env.var(name).filter(|raw| !raw.trim().is_empty()) else {
        return Ok(default);
    };
    raw.trim()
        .parse::<f64>()
        .ok()
        .and_then(|value| Duration::try_from_secs_f64(value).ok())
        .ok_or_else(|| {
            Refusal::preflight(format!("{name} must be a non-negative number of seconds"))
        })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("autogpt-shim").chain(args.iter().copied())).unwrap()
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn root() -> String {
        std::env::temp_dir().to_string_lossy().into_owned()
    }

    #[test]
    fn flags_beat_environment_and_both_positions_work() {
        let root = root();
        let vars = env(&[
            ("AUTOGPT_SHIM_SESSION_ID", "from-env"),
            ("AUTOGPT_SHIM_PLATFORM_URL", "https://env.example"),
            ("AUTOGPT_SHIM_ALLOWED_ROOT", "/definitely/missing"),
        ]);
        let cli = parse(&[
            "--session-id",
            "s-1",
            "--allowed-root",
            &root,
            "start",
            "--platform-url",
            "http://127.0.0.1:9/",
        ]);
        let config = resolve(&cli, &vars).unwrap();
        assert_eq!(config.session_id, "s-1");
        assert_eq!(config.url, "ws://127.0.0.1:9/ws/local-executor/s-1");
        assert_eq!(config.allowed_root, PathBuf::from(&root));

        let cli = parse(&["start", "--allowed-root", &root]);
        let config = resolve(&cli, &vars).unwrap();
        assert_eq!(config.session_id, "from-env");
        assert_eq!(config.url, "wss://env.example/ws/local-executor/from-env");
        assert_eq!(config.log_level, "info");
        assert_eq!(config.backoff, Backoff::default());
        assert!(config.token.is_none());
    }

    #[test]
    fn refusals_are_preflight_failures() {
        let root = root();
        let none = env(&[]);
        let cases: &[&[&str]] = &[
            &[
                "--session-id",
                "s",
                "--allowed-root",
                &root,
                "start",
                "--enable-shell",
            ],
            &[
                "--session-id",
                "s",
                "--allowed-root",
                &root,
                "start",
                "--enable-recording",
            ],
            &["--allowed-root", &root, "start"],
            &["--session-id", "   ", "--allowed-root", &root, "start"],
            &["--session-id", "../x", "--allowed-root", &root, "start"],
            &[
                "--session-id",
                "s",
                "--allowed-root",
                &root,
                "--platform-url",
                "ftp://x",
                "start",
            ],
            &[
                "--session-id",
                "s",
                "--allowed-root",
                &root,
                "--log-level",
                "LOUD",
                "start",
            ],
        ];
        for args in cases {
            let refusal = resolve(&parse(args), &none).unwrap_err();
            assert_eq!(refusal.code, EXIT_PREFLIGHT, "{args:?}");
            assert_eq!(refusal.message.lines().count(), 1, "{args:?}");
        }
    }

    #[test]
    fn token_and_reconnect_settings_come_from_the_environment() {
        let root = root();
        let vars = env(&[
            ("AUTOGPT_SHIM_TOKEN", " secret-token "),
            ("AUTOGPT_SHIM_RECONNECT_BASE_DELAY", "0.05"),
            ("AUTOGPT_SHIM_RECONNECT_JITTER_SECONDS", "0"),
        ]);
        let cli = parse(&[
            "--session-id",
            "s",
            "--allowed-root",
            &root,
            "--log-level",
            "warning",
            "start",
        ]);
        let config = resolve(&cli, &vars).unwrap();
        assert_eq!(config.token, Token::from_configured(Some("secret-token")));
        assert!(!format!("{config:?}").contains("secret-token"));
        assert_eq!(config.backoff.base, Duration::from_millis(50));
        assert_eq!(config.backoff.jitter, Duration::ZERO);
        assert_eq!(config.log_level, "warn");

        let bad = env(&[("AUTOGPT_SHIM_RECONNECT_BASE_DELAY", "-1")]);
        assert_eq!(resolve(&cli, &bad).unwrap_err().code, EXIT_PREFLIGHT);
    }
}
