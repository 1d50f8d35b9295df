//! The `autogpt-shim` command line (shim-reference-behaviour.md section 2) and what `start`
//! resolves to. Configuration itself (file, environment, precedence) is [`crate::config`].
//!
//! Everything here is pure so the precedence and the refusals are testable without
//! starting the daemon; `main.rs` only acts on what [`resolve`] and [`load_config`] decide.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::{self, ConfigError, Overrides, ShimConfig};
use crate::link::{Backoff, Token};
use crate::preflight;
use local_core::machine::sandbox::Support;

pub use crate::config::{Env, ProcessEnv};

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
    /// TOML config file (default: the per-OS path; a missing default file is ignored).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Platform base URL (wss, ws, https or http; default wss://platform.autogpt.net).
    #[arg(long, global = true, value_name = "URL")]
    pub platform_url: Option<String>,
    /// Legacy direct session id; without it the shim runs in control mode.
    #[arg(long, global = true, value_name = "ID")]
    pub session_id: Option<String>,
    /// File holding the bearer token; it must not be readable by group or others.
    #[arg(long, global = true, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Log level: DEBUG, INFO, WARNING, ERROR or CRITICAL.
    #[arg(long, global = true, value_name = "LEVEL", default_value = "INFO")]
    pub log_level: String,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Log in with OAuth in the browser and store the tokens (keyring, else a 0600 file).
    Auth {
        /// Do not open a browser; only print the URL to open (headless machines).
        #[arg(long)]
        no_browser: bool,
    },
    /// Revoke the stored OAuth tokens at the platform and forget them.
    Revoke,
    /// Run the daemon in the foreground.
    Start(StartArgs),
    /// Serve this machine to a local MCP client (a desktop chat app, a coding agent) over
    /// stdin/stdout: files in the allowed root by default, more only with the switches below.
    Mcp(McpArgs),
    /// Check that this machine can run the daemon (the checks `start` and `install` run);
    /// exit 78 when it cannot.
    Doctor,
    /// Serve a small platform on 127.0.0.1 to try the connector against: it prints the
    /// `start` command to run, then sends the requests you type and shows every answer.
    Try(TryArgs),
    /// Show the last daemon's state, the configuration and the autostart entry.
    Status {
        /// Print one JSON object (`last_run`, `configuration`, `autostart`) for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Write the configuration the service starts with (from the flags and `AUTOGPT_SHIM_*`
    /// variables given) and the per-user autostart entry; the service manager command is
    /// printed, not run.
    Install {
        /// Start at login, the only supported trigger: `--at-login=false` is refused.
        #[arg(
            long,
            default_value_t = true,
            action = clap::ArgAction::Set,
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_name = "BOOL"
        )]
        at_login: bool,
        /// Replace settings an existing config file already holds.
        #[arg(long)]
        force: bool,
        /// Run this binary where it is (a package's /usr/bin) instead of a copy in
        /// ~/.local/bin; refused inside a cargo target/ folder.
        #[arg(long)]
        in_place: bool,
        /// The switches the service starts with, as for `start`.
        #[command(flatten)]
        switches: StartArgs,
    },
    /// Remove the autostart entry (idempotent).
    Uninstall,
    /// Read, verify, export and maintain the audit log.
    Audit {
        /// What to do with it.
        #[command(subcommand)]
        command: AuditCommand,
    },
}

impl Command {
    /// The subcommand's name on the command line.
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Auth { .. } => "auth",
            Self::Revoke => "revoke",
            Self::Start(_) => "start",
            Self::Mcp(_) => "mcp",
            Self::Doctor => "doctor",
            Self::Try(_) => "try",
            Self::Status { .. } => "status",
            Self::Install { .. } => "install",
            Self::Uninstall => "uninstall",
            Self::Audit { .. } => "audit",
        }
    }
}

/// `audit` subcommands.
#[derive(Debug, Subcommand, PartialEq, Eq)]
pub enum AuditCommand {
    /// Print the last records with their time and a short detail, then follow the file.
    Tail {
        /// How many of the last records to print first (all of them when absent).
        #[arg(short = 'n', long = "lines", value_name = "N")]
        lines: Option<usize>,
        /// Print and exit instead of following the file.
        #[arg(long)]
        no_follow: bool,
    },
    /// Pretty-print the record with this sequence number (current, then rotated files).
    Show {
        /// The record's `seq`.
        seq: u64,
    },
    /// Verify the current file's chain.
    Verify,
    /// Verify the current and the rotated files.
    VerifyAll,
    /// Zip the current and rotated files with a signed manifest.
    Export {
        /// The zip to write (default `./audit-export-YYYYMMDD-HHMMSS.zip`).
        #[arg(long, value_name = "ZIP")]
        output: Option<PathBuf>,
    },
    /// Rotate the current file now.
    Rotate,
    /// Delete rotated files whose last record is older than the threshold.
    Prune {
        /// Age as an integer count with a unit: `d`, `h`, `m` or `s`.
        #[arg(long, default_value = "90d", value_name = "AGE")]
        older_than: String,
    },
}

/// `start` flags.
#[derive(Debug, Default, clap::Args)]
#[allow(clippy::struct_excessive_bools)]
pub struct StartArgs {
    /// Advertise and accept `shell` (run commands on this machine).
    #[arg(long)]
    pub enable_shell: bool,
    /// Advertise `computer_use` (screenshots, input, windows).
    #[arg(long)]
    pub enable_computer_use: bool,
    /// Advertise `local_llm` when the local model backend lists a model.
    #[arg(long)]
    pub enable_local_llm: bool,
    /// List serial ports, USB devices and GPIO chips in HELLO.
    #[arg(long)]
    pub enable_hardware: bool,
    /// Allow clipboard operations (reading only what this shim wrote).
    #[arg(long)]
    pub enable_clipboard: bool,
    /// With --enable-clipboard, also read clipboard content from other programs.
    #[arg(long)]
    pub enable_clipboard_read_foreign: bool,
    /// Design-preview workflow recording; start-up always refuses it.
    #[arg(long)]
    pub enable_recording: bool,
    /// Run every command in a kernel sandbox (Linux): `off` (default), `workspace` (nothing
    /// changed outside the allowed root) or `strict` (also no reads of your files outside it
    /// and no network).
    #[arg(long, value_name = "MODE")]
    pub shell_sandbox: Option<String>,
}

/// `try` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct TryArgs {
    /// The loopback port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8770, value_name = "PORT")]
    pub port: u16,
    /// Send this request line once the connector is connected, instead of reading them from
    /// the terminal (repeatable; `try` ends after the last reply, exit 1 if any was an ERROR).
    #[arg(long, value_name = "LINE")]
    pub send: Vec<String>,
}

/// `mcp` flags: the switches of `start` that have an MCP tool, and which tools to offer.
///
/// These switches (or the config file's `[mcp]` section) alone give the MCP face its powers:
/// the daemon's settings (`enable_shell` at the file's top level, `AUTOGPT_SHIM_ENABLE_*`) are
/// meant for `start` and never turn on a tool here.
#[derive(Debug, clap::Args)]
#[allow(clippy::struct_excessive_bools)]
pub struct McpArgs {
    /// Offer `run_command` (any command, with this user's permissions).
    #[arg(long)]
    pub enable_shell: bool,
    /// Offer screenshots, input, windows, apps and the accessibility snapshot.
    #[arg(long)]
    pub enable_computer_use: bool,
    /// With --enable-computer-use, offer the clipboard (reading only what this shim wrote).
    #[arg(long)]
    pub enable_clipboard: bool,
    /// With --enable-clipboard, also read clipboard content from other programs.
    #[arg(long)]
    pub enable_clipboard_read_foreign: bool,
    /// Run every command in a kernel sandbox (Linux): `off` (default), `workspace` or `strict`.
    #[arg(long, value_name = "MODE")]
    pub shell_sandbox: Option<String>,
    /// Offer only these tools (comma-separated names), among those the switches enable.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub tools: Option<Vec<String>>,
    /// Never offer these tools (comma-separated names).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub exclude_tools: Vec<String>,
    /// The most characters of text one tool answer has; longer ones are cut, saying how to go
    /// on (at least 2000).
    #[arg(long, value_name = "CHARS", default_value_t = DEFAULT_MAX_ANSWER_CHARS, value_parser = max_answer_chars)]
    pub max_answer_chars: usize,
    /// The longest side a screenshot has, in pixels; a larger capture is scaled down (at least
    /// 64).
    #[arg(long, value_name = "PIXELS", default_value_t = DEFAULT_MAX_IMAGE_EDGE, value_parser = max_image_edge)]
    pub max_image_edge: u32,
    /// Serve MCP's Streamable HTTP transport on 127.0.0.1 instead of stdio, at PORT (8766
    /// when no port is given; 0 picks a free one); clients send the bearer token it prints.
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "8766")]
    pub http: Option<u16>,
    /// With --http, the bearer token is the one in this file (readable only by you) instead of
    /// a new one printed at start.
    #[arg(long, value_name = "PATH")]
    pub http_token_file: Option<PathBuf>,
}

/// `mcp --max-answer-chars` when not given: the most characters of text one tool answer has.
pub const DEFAULT_MAX_ANSWER_CHARS: usize = 100_000;

/// The least `--max-answer-chars` takes: room for a note and some content.
pub const MIN_MAX_ANSWER_CHARS: usize = 2_000;

/// `mcp --max-image-edge` when not given: the longest side vision models take without
/// scaling the image down themselves.
pub const DEFAULT_MAX_IMAGE_EDGE: u32 = 1568;

/// `--max-image-edge`: a side of at least 64 pixels.
fn max_image_edge(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(edge) if edge >= 64 => Ok(edge),
        _ => Err("give a whole number of pixels, at least 64".to_owned()),
    }
}

/// `--max-answer-chars`: a count with room for a note and some content.
fn max_answer_chars(text: &str) -> Result<usize, String> {
    let least = MIN_MAX_ANSWER_CHARS;
    match text.parse::<usize>() {
        Ok(chars) if chars >= least => Ok(chars),
        _ => Err(format!(
            "give a whole number of characters, at least {least}"
        )),
    }
}

/// A resolved `start`. `Debug` never shows the token.
#[derive(Debug, Clone)]
pub struct StartConfig {
    /// The URL to dial: the data URL of a legacy session, or the control endpoint.
    pub url: String,
    /// The legacy session id; `None` runs control mode.
    pub session_id: Option<String>,
    /// The jail root, as configured; not yet checked (the jail canonicalises it).
    pub allowed_root: PathBuf,
    /// The bearer token, if any.
    pub token: Option<Token>,
    /// Reconnect delays.
    pub backoff: Backoff,
    /// `tracing` level directive.
    pub log_level: &'static str,
    /// The configured machine id for HELLO; `None` means detect it.
    pub machine_id: Option<String>,
    /// Everything configured, for the settings above and the rest (limits, switches, paths).
    pub config: ShimConfig,
    /// Warnings for the operator (unknown config keys, shadowed token sources).
    pub warnings: Vec<String>,
    /// What the checks' probe found the kernel offers the shell sandbox, so `start` probes once.
    pub sandbox_support: Option<Support>,
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
    /// A refusal of several problems, one line each.
    fn preflight_lines(lines: impl IntoIterator<Item = String>) -> Self {
        let lines: Vec<String> = lines
            .into_iter()
            .map(|line| Self::preflight(line).message)
            .collect();
        Self {
            message: lines.join("\n"),
            code: EXIT_PREFLIGHT,
        }
    }

    fn preflight(message: impl Into<String>) -> Self {
        let message: String = message.into();
        Self {
            // Paths in messages come from the operator and could hold line breaks.
            message: message
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect(),
            code: EXIT_PREFLIGHT,
        }
    }
}

impl From<ConfigError> for Refusal {
    fn from(err: ConfigError) -> Self {
        Self::preflight(err.to_string())
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

/// The command-line layer of the configuration: global flags, and `start`'s switches when
/// the command is `start`. A switch that is absent leaves the lower layers alone. `mcp`'s
/// switches are not in it: they are the MCP face's own (`crate::mcp`), not the daemon's.
pub fn overrides(cli: &Cli) -> Overrides {
    // `install` takes `start`'s switches so the service starts with them.
    let start = match &cli.command {
        Command::Start(start)
        | Command::Install {
            switches: start, ..
        } => Some(start),
        _ => None,
    };
    let switch = |on: fn(&StartArgs) -> bool| start.filter(|start| on(start)).map(|_| true);
    Overrides {
        config_file: cli.config.clone(),
        platform_url: cli.platform_url.clone(),
        session_id: cli.session_id.clone(),
        allowed_root: cli.allowed_root.clone(),
        token_file: cli.token_file.clone(),
        enable_shell: switch(|start| start.enable_shell),
        enable_computer_use: switch(|start| start.enable_computer_use),
        enable_local_llm: switch(|start| start.enable_local_llm),
        enable_hardware: switch(|start| start.enable_hardware),
        enable_clipboard: switch(|start| start.enable_clipboard),
        enable_clipboard_read_foreign: switch(|start| start.enable_clipboard_read_foreign),
        enable_recording: switch(|start| start.enable_recording),
        // A confinement, not a power: `mcp` takes it as `start` does.
        shell_sandbox: match &cli.command {
            Command::Mcp(mcp) => mcp.shell_sandbox.clone(),
            _ => start.and_then(|start| start.shell_sandbox.clone()),
        },
    }
}

/// Loads the configuration for any subcommand (CLI > environment > file > defaults), with
/// the warnings the caller should print. The token file is not read here.
///
/// # Errors
/// A [`Refusal`] (exit 78) naming the file, key, variable or flag at fault.
pub fn load_config(cli: &Cli, env: &impl Env) -> Result<(ShimConfig, Vec<String>), Refusal> {
    Ok(config::load(&overrides(cli), env)?)
}

/// The configuration as [`load_config`] loads it, and the checks' inputs gathered from it (the
/// shell sandbox probed once when a mode is configured): `mcp` starts here. [`resolve`] gathers
/// the same inputs for `start` (going on past refused values, so the checks list them all).
/// Returns the inputs and the warnings for the operator.
///
/// # Errors
/// A [`Refusal`] (exit 78) for the first refused value or unreadable file, as [`load_config`].
pub fn gather(cli: &Cli, env: &impl Env) -> Result<(preflight::Inputs, Vec<String>), Refusal> {
    let mut loaded = config::load_all(&overrides(cli), env);
    if !loaded.problems.is_empty() {
        return Err(loaded.problems.remove(0).into());
    }
    let warnings = loaded.warnings.clone();
    Ok((
        preflight::Inputs::gather(loaded, &cli.log_level, env),
        warnings,
    ))
}

/// Resolves `start` into a start configuration, or the refusal: every failed check of
/// [`crate::preflight`] (the list `doctor` prints), one line each.
///
/// # Errors
/// A [`Refusal`] (exit 78) for another subcommand, or listing every problem the checks found:
/// recording, a bad log level, refused configuration values, a missing allowed root, an
/// unusable token file, audit log or key, a bad platform URL.
pub fn resolve(cli: &Cli, env: &impl Env) -> Result<StartConfig, Refusal> {
    let Command::Start(_) = &cli.command else {
        return Err(Refusal::preflight(format!(
            "`{}` is not available in this build",
            cli.command.name()
        )));
    };
    let loaded = config::load_all(&overrides(cli), env);
    let warnings = loaded.warnings.clone();
    let inputs = preflight::Inputs::gather(loaded, &cli.log_level, env);
    let findings = preflight::checks(&inputs);
    let refused: Vec<String> = preflight::blocking(&findings)
        .map(preflight::Finding::sentence)
        .collect();
    if !refused.is_empty() {
        return Err(Refusal::preflight_lines(refused));
    }
    let config = inputs.config;
    // The checks passed, so what follows cannot fail unless a file changed in between.
    let log_level = tracing_level(&cli.log_level).ok_or_else(|| {
        Refusal::preflight("--log-level must be DEBUG, INFO, WARNING, ERROR or CRITICAL")
    })?;
    let session_id = config.session_id.clone();
    let url = match &session_id {
        Some(session_id) => config.data_url(session_id),
        None => config.ws_endpoint(),
    }
    .map_err(|err| Refusal::preflight(format!("bad platform URL: {err}")))?;
    let allowed_root = config.allowed_root.clone().ok_or_else(|| {
        Refusal::preflight(
            "no allowed root: pass --allowed-root, set AUTOGPT_SHIM_ALLOWED_ROOT or set HOME",
        )
    })?;
    let token = config.read_token()?;

    Ok(StartConfig {
        url,
        session_id,
        allowed_root,
        token,
        backoff: config.backoff(),
        log_level,
        machine_id: config.machine_id.clone(),
        sandbox_support: inputs.sandbox_support,
        config,
        warnings,
    })
}

#[cfg(test)]
mod tests;
