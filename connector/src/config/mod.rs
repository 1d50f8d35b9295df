//! The connector's configuration (shim-reference-behaviour.md section 3): defaults, a TOML
//! file, `AUTOGPT_SHIM_*` environment variables and command-line flags, resolved once into a
//! [`ShimConfig`], plus the per-OS paths of the connector's own files.
//!
//! # Precedence
//!
//! Flags beat the environment, which beats the file, which beats the defaults. The reference's
//! docstring promises this order although its code lets the file beat the environment
//! (section 17); this build keeps the documented promise, so a service manager's environment
//! can adjust a shared file.
//!
//! Each layer is checked as it is applied, so a malformed value is refused even where a higher
//! layer replaces it: a broken setting surfaces at once, not the day the override goes away.
//!
//! # The file
//!
//! `--config PATH`, else [`config_path`]. A missing default file is ignored; a missing
//! `--config` file is an error. At most [`MAX_CONFIG_FILE_BYTES`]. Keys are the field names
//! of [`ShimConfig`] (except `token` and `config_file`); other keys are ignored and listed in
//! the warnings [`load`] returns, since this module prints nothing.
//!
//! # The environment
//!
//! `AUTOGPT_SHIM_` and the field name upper-cased, for every file key. A blank value means
//! unset. Booleans take `true`/`false`, `1`/`0`, `yes`/`no` or `on`/`off` in any case.
//!
//! # The bearer token
//!
//! Sources, highest first: `--token-file`; then `AUTOGPT_SHIM_TOKEN`; then
//! `AUTOGPT_SHIM_TOKEN_FILE`; then `token_file` in the file. The token itself is never read
//! from the config file, which is usually world-readable; a token file must be a regular file
//! with no group or other permission bits. When none of these is set, `start` uses the OAuth
//! tokens `autogpt-shim auth` stored (OS keyring, else a 0600 file; see [`crate::auth`]), which
//! are refreshed once on a 401; a configured token cannot be refreshed.
//!
//! # Errors
//!
//! Errors name the key, variable or flag and what it must be, never the value: a value can be
//! a secret or a URL with credentials in it.

use std::fmt;
use std::io;
use std::num::{NonZeroU32, NonZeroU64};
use std::path::{Path, PathBuf};
use std::time::Duration;

use local_core::limits;
use local_core::llm::BackendKind as LlmBackend;
use local_core::machine::own_files::{self, PrivateFileError};
use local_core::machine::sandbox::SandboxMode;

use crate::link::{
    Backoff, ConnectError, DEFAULT_CLIENT_ID, DEFAULT_PLATFORM_URL, DEFAULT_REDIRECT_PORT, Token,
    ws_base,
};
use crate::protocol::{
    DEFAULT_COMMAND_TIMEOUT_SECONDS, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_FILE_SIZE_BYTES,
    is_valid_session_id,
};
use local_core::io_words::io_words;

mod fields;
mod file;
mod paths;
#[cfg(test)]
mod tests;

use fields::{EXPECT_PATH, EXPECT_TOKEN, Field, Raw, display_name, file_value, refusal, set};
use file::{apply_file, read_config_file};
use paths::non_blank;
pub use paths::{
    audit_key_path, config_path, daemons_dir, default_allowed_root, default_audit_log_path,
    home_dir, state_dir,
};

/// The largest config file read; a config file is a few hundred bytes.
pub const MAX_CONFIG_FILE_BYTES: u64 = 1024 * 1024;
/// The largest token file read.
pub const MAX_TOKEN_FILE_BYTES: u64 = 16 * 1024;
/// Prefix of the configuration environment variables.
pub const ENV_PREFIX: &str = "AUTOGPT_SHIM_";
/// The variable holding the bearer token itself.
pub const TOKEN_ENV: &str = "AUTOGPT_SHIM_TOKEN";
/// The variable through which `auth` hands the authorize address to the desktop's opener,
/// so it never passes through shell parsing.
pub const AUTHORIZE_URL_ENV: &str = "AUTOGPT_SHIM_AUTHORIZE_URL";
/// The directory name under the per-OS config and state directories.
pub const APP_DIR: &str = "autogpt-local-executor";
/// Default `ollama_url`.
pub const DEFAULT_OLLAMA_URL: &str = "http://localhost:11434";
/// Default `idle_session_timeout`: the reference's 10 minutes.
pub const DEFAULT_IDLE_SESSION_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest `display_name`, in characters.
pub const MAX_DISPLAY_NAME_CHARS: usize = 128;
/// Longest configured `machine_id`, in characters.
pub const MAX_MACHINE_ID_CHARS: usize = 256;

const fn non_zero(n: u32) -> NonZeroU32 {
    match NonZeroU32::new(n) {
        Some(n) => n,
        None => panic!("a default limit must be positive"),
    }
}

/// The environment as configuration sees it, so tests need not touch the process's.
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

/// The resolved configuration. `Debug` never shows the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimConfig {
    /// Platform base URL (wss, ws, https or http).
    pub platform_url: String,
    /// Full override of the WebSocket base; the session id is appended as a path segment.
    pub platform_ws_url: Option<String>,
    /// Override of the OAuth authorize base (default `<http base>/auth`).
    pub platform_oauth_url: Option<String>,
    /// The public OAuth client id.
    pub oauth_client_id: String,
    /// The first loopback port tried for the login callback.
    pub oauth_redirect_port: u16,
    /// Legacy direct session; `None` (or blank anywhere) means control mode.
    pub session_id: Option<String>,
    /// Machine id for HELLO; `None` means detect it.
    pub machine_id: Option<String>,
    /// Display name for HELLO, 1-128 characters; defaults to `HOSTNAME` or `COMPUTERNAME`
    /// when the environment has one, else the system's host name ([`system_hostname`]), else
    /// `None`.
    pub display_name: Option<String>,
    /// The FILE_* jail root; `None` only when no home directory is known.
    pub allowed_root: Option<PathBuf>,
    /// The audit log; `None` only when no home or state directory is known.
    pub audit_log_path: Option<PathBuf>,
    /// Advertise and accept `shell`.
    pub enable_shell: bool,
    /// Advertise `computer_use`.
    pub enable_computer_use: bool,
    /// Advertise `local_llm`.
    pub enable_local_llm: bool,
    /// List serial ports, USB devices and GPIO chips in HELLO (and advertise `hardware_*`).
    pub enable_hardware: bool,
    /// Design-preview recording; start-up refuses it.
    pub enable_recording: bool,
    /// Allow clipboard operations.
    pub enable_clipboard: bool,
    /// With `enable_clipboard`, also read clipboard content this shim did not write.
    pub enable_clipboard_read_foreign: bool,
    /// In-flight request cap per connection.
    pub max_concurrent: NonZeroU32,
    /// Concurrent EXECUTE_COMMAND cap.
    pub max_concurrent_commands: NonZeroU32,
    /// Ceiling for a command's timeout.
    pub command_timeout_seconds: NonZeroU64,
    /// Budget for files, clipboard, screenshots and command output.
    pub max_file_size_bytes: NonZeroU64,
    /// Commands per sliding 60 s window.
    pub max_commands_per_minute: NonZeroU32,
    /// Screenshots per sliding 60 s window.
    pub max_screenshots_per_minute: NonZeroU32,
    /// First reconnect delay.
    pub reconnect_base_delay: Duration,
    /// Reconnect delay ceiling before jitter.
    pub reconnect_max_delay: Duration,
    /// Upper bound of the uniform reconnect jitter.
    pub reconnect_jitter_seconds: Duration,
    /// The Ollama server for `local_llm`.
    pub ollama_url: String,
    /// The local model backend's dialect at `ollama_url`: Ollama's native API (default) or
    /// any OpenAI-compatible server (llama.cpp, LM Studio, vLLM).
    pub local_llm_backend: LlmBackend,
    /// The file the token is read from, when the token comes from a file. At most one of
    /// `token_file` and `token` is set: the higher-precedence source clears the other.
    pub token_file: Option<PathBuf>,
    /// The token from `AUTOGPT_SHIM_TOKEN`.
    pub token: Option<Token>,
    /// The config file that was read, if any.
    pub config_file: Option<PathBuf>,
    /// Control mode: a child runtime without a data request for this long is stopped
    /// (its binding stays for RESTORE_SESSION). The reference's 10 minutes by default.
    pub idle_session_timeout: Duration,
    /// The kernel sandbox every command runs in (`off`, the contract's default, `workspace`
    /// or `strict`; see `local_core::machine::sandbox`).
    pub shell_sandbox: SandboxMode,
    /// The file's `[mcp]` section: the MCP face's own switches and tool lists.
    pub mcp: McpSection,
}

/// The config file's `[mcp]` section: what `autogpt-shim mcp` offers, apart from the daemon's
/// switches (which never turn on a tool there). `mcp`'s flags add to it; `--tools` replaces
/// `tools`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpSection {
    /// Offer `run_command`.
    pub enable_shell: bool,
    /// Offer the desktop tools.
    pub enable_computer_use: bool,
    /// With `enable_computer_use`, offer the clipboard.
    pub enable_clipboard: bool,
    /// With `enable_clipboard`, also read what other programs copied.
    pub enable_clipboard_read_foreign: bool,
    /// Offer only these tools (among those enabled); `None` offers every enabled tool.
    pub tools: Option<Vec<String>>,
    /// Never offer these tools.
    pub exclude_tools: Vec<String>,
    /// `mcp --http`'s bearer token: the one in this file, not a new one each start.
    pub http_token_file: Option<PathBuf>,
}

impl ShimConfig {
    /// The defaults, with per-OS paths from `env`.
    pub fn defaults(env: &impl Env) -> Self {
        let backoff = Backoff::default();
        Self {
            platform_url: DEFAULT_PLATFORM_URL.to_owned(),
            platform_ws_url: None,
            platform_oauth_url: None,
            oauth_client_id: DEFAULT_CLIENT_ID.to_owned(),
            oauth_redirect_port: DEFAULT_REDIRECT_PORT,
            session_id: None,
            machine_id: None,
            // Shells set HOSTNAME without exporting it, so a daemon rarely sees it: the OS
            // knows the name either way.
            display_name: ["HOSTNAME", "COMPUTERNAME"]
                .into_iter()
                .find_map(|name| env.var(name).and_then(|host| display_name(&host)))
                .or_else(|| system_hostname().and_then(|host| display_name(&host))),
            allowed_root: default_allowed_root(env),
            audit_log_path: default_audit_log_path(env),
            enable_shell: false,
            enable_computer_use: false,
            enable_local_llm: false,
            enable_hardware: false,
            enable_recording: false,
            enable_clipboard: false,
            enable_clipboard_read_foreign: false,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            max_concurrent_commands: const { non_zero(limits::DEFAULT_MAX_CONCURRENT_COMMANDS) },
            command_timeout_seconds: DEFAULT_COMMAND_TIMEOUT_SECONDS,
            max_file_size_bytes: DEFAULT_MAX_FILE_SIZE_BYTES,
            max_commands_per_minute: const { non_zero(limits::DEFAULT_MAX_COMMANDS_PER_MINUTE) },
            max_screenshots_per_minute: const { non_zero(limits::SCREENSHOTS_PER_MINUTE) },
            reconnect_base_delay: backoff.base,
            reconnect_max_delay: backoff.max,
            reconnect_jitter_seconds: backoff.jitter,
            ollama_url: DEFAULT_OLLAMA_URL.to_owned(),
            local_llm_backend: LlmBackend::Ollama,
            token_file: None,
            token: None,
            config_file: None,
            idle_session_timeout: DEFAULT_IDLE_SESSION_TIMEOUT,
            shell_sandbox: SandboxMode::Off,
            mcp: McpSection::default(),
        }
    }

    /// The reconnect delays.
    pub const fn backoff(&self) -> Backoff {
        Backoff {
            base: self.reconnect_base_delay,
            max: self.reconnect_max_delay,
            jitter: self.reconnect_jitter_seconds,
        }
    }

    /// The WebSocket base: `platform_ws_url` when set, else `<ws(s) base>/ws/local-executor`.
    ///
    /// # Errors
    /// [`ConnectError::InvalidRequest`] for a bad scheme; [`load`] has already refused those.
    pub fn ws_endpoint(&self) -> Result<String, ConnectError> {
        match &self.platform_ws_url {
            Some(url) => ws_base(url),
            None => Ok(format!(
                "{}/ws/local-executor",
                ws_base(&self.platform_url)?
            )),
        }
    }

    /// The data URL of a session: `<ws endpoint>/<session_id>`.
    ///
    /// # Errors
    /// [`ConnectError::InvalidRequest`] for a session id outside the pattern (it becomes a
    /// path segment, so it is refused, never escaped) or a bad URL.
    pub fn data_url(&self, session_id: &str) -> Result<String, ConnectError> {
        if !is_valid_session_id(session_id) {
            return Err(ConnectError::InvalidRequest(
                "the session id does not match the session id pattern".to_owned(),
            ));
        }
        Ok(format!("{}/{session_id}", self.ws_endpoint()?))
    }

    /// The bearer token: `token`, else the content of `token_file`, else none.
    ///
    /// # Errors
    /// The token file's problem (see [`read_token_file`]).
    pub fn read_token(&self) -> Result<Option<Token>, ConfigError> {
        if let Some(token) = &self.token {
            return Ok(Some(token.clone()));
        }
        self.token_file.as_deref().map(read_token_file).transpose()
    }
}

/// The command-line layer: `None` leaves the lower layers alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--config`: an explicit file, which must exist.
    pub config_file: Option<PathBuf>,
    /// `--platform-url`.
    pub platform_url: Option<String>,
    /// `--session-id`; blank asks for control mode even over the environment.
    pub session_id: Option<String>,
    /// `--allowed-root`.
    pub allowed_root: Option<PathBuf>,
    /// `--token-file`; it beats `AUTOGPT_SHIM_TOKEN`.
    pub token_file: Option<PathBuf>,
    /// `start --enable-shell`.
    pub enable_shell: Option<bool>,
    /// `start --enable-computer-use`.
    pub enable_computer_use: Option<bool>,
    /// `start --enable-local-llm`.
    pub enable_local_llm: Option<bool>,
    /// `start --enable-hardware`.
    pub enable_hardware: Option<bool>,
    /// `start --enable-clipboard`.
    pub enable_clipboard: Option<bool>,
    /// `start --enable-clipboard-read-foreign`.
    pub enable_clipboard_read_foreign: Option<bool>,
    /// `start --enable-recording`.
    pub enable_recording: Option<bool>,
    /// `start --shell-sandbox MODE` (and `mcp`'s), as given: checked like every layer.
    pub shell_sandbox: Option<String>,
}

/// Where a refused value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A key of the config file.
    File {
        /// The file.
        path: PathBuf,
        /// The key.
        key: &'static str,
    },
    /// An environment variable.
    Env {
        /// The variable.
        name: String,
    },
    /// A command-line flag.
    Flag {
        /// The flag, with its dashes.
        flag: &'static str,
    },
    /// A token file's content.
    TokenFile {
        /// The file.
        path: PathBuf,
    },
}

impl Origin {
    /// The config key the value was for (`token` for `AUTOGPT_SHIM_TOKEN`): what a report
    /// groups the problem under.
    #[must_use]
    pub fn key(&self) -> String {
        match self {
            Self::File { key, .. } => (*key).to_owned(),
            Self::Env { name } => name
                .strip_prefix(ENV_PREFIX)
                .unwrap_or(name)
                .to_ascii_lowercase(),
            Self::Flag { flag } => flag.trim_start_matches('-').replace('-', "_"),
            Self::TokenFile { .. } => "token_file".to_owned(),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File { path, key } => write!(f, "`{key}` in {}", path.display()),
            Self::Env { name } => f.write_str(name),
            Self::Flag { flag } => f.write_str(flag),
            Self::TokenFile { path } => write!(f, "the token file {}", path.display()),
        }
    }
}

/// Why the configuration cannot be loaded. The text never contains a configured value.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `--config` names a file that does not exist.
    #[error("the config file {} does not exist: create it (`autogpt-shim install` writes one from its flags) or leave out --config", path.display())]
    MissingFile {
        /// The file.
        path: PathBuf,
    },
    /// The config file exists but cannot be read, or is larger than the cap.
    #[error("cannot read the config file {} ({}): make it a file readable by this user (`chmod 600` on it), or point --config at another file", path.display(), io_words(source))]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The config file is not UTF-8.
    #[error("the config file {} is not UTF-8 text: save it as UTF-8", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// The config file is not TOML.
    #[error("the config file {} is not valid TOML at line {line}, column {column} ({message}): fix that line; the keys are listed in docs/connector.md, Configuration", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// The parser's description, which quotes the grammar and never the input.
        message: String,
    },
    /// The `[mcp]` section is not a table of its known keys.
    #[error("the [mcp] section of the config file {} must hold only enable_shell, enable_computer_use, enable_clipboard and enable_clipboard_read_foreign (true or false), tools and exclude_tools (lists of tool names) and http_token_file (a path): fix it as docs/mcp.md shows", path.display())]
    McpSection {
        /// The file.
        path: PathBuf,
    },
    /// A value has the wrong type or is out of range.
    #[error("{origin} must be {expected}")]
    Invalid {
        /// Where it came from.
        origin: Origin,
        /// What it must be.
        expected: &'static str,
    },
    /// A platform URL without its scheme (`127.0.0.1:8770`).
    #[error("{origin} has no scheme: {hint}")]
    NoScheme {
        /// Where it came from.
        origin: Origin,
        /// The scheme it most likely lacks, and why.
        hint: String,
    },
    /// The token file is missing, unreadable, too open or too large.
    #[error("{}", token_file_problem(.0))]
    TokenFile(#[from] PrivateFileError),
    /// The token file holds only whitespace.
    #[error("the token file {} is empty: write the platform's token into it, or log in with `autogpt-shim auth` instead", path.display())]
    EmptyToken {
        /// The file.
        path: PathBuf,
    },
}

/// The token file's problem in words, naming the file and what to do.
fn token_file_problem(err: &PrivateFileError) -> String {
    match err {
        PrivateFileError::Io { path, source } if source.kind() == io::ErrorKind::NotFound => {
            format!(
                "the token file {} does not exist: create it holding the platform's token, readable only by you (chmod 600), or pass --token-file with the right file",
                path.display()
            )
        }
        PrivateFileError::Io { path, source } => format!(
            "cannot read the token file {} ({}): make it a file you own and can read (chmod 600), or pass --token-file with another file",
            path.display(),
            io_words(source)
        ),
        other => format!("the token file {other}"),
    }
}

/// The configuration with every problem found in it, not just the first: what `doctor`,
/// `start` and `install` report. A refused value leaves the setting as the layers below it
/// had it.
#[derive(Debug)]
pub struct Loaded {
    /// The configuration, refused values left out.
    pub config: ShimConfig,
    /// For the operator: unknown keys, shadowed token sources.
    pub warnings: Vec<String>,
    /// Every refused value or unreadable file, in layer order (file, environment, flags).
    pub problems: Vec<ConfigError>,
}

/// Loads the configuration: defaults, then the file, then the environment, then `overrides`.
/// Returns it with the warnings the caller should show (unknown keys, shadowed token
/// sources); nothing is printed here.
///
/// # Errors
/// The first [`ConfigError`] [`load_all`] finds: a missing `--config` file, an unreadable or
/// malformed file, or a value of the wrong type or out of range, naming where it came from.
pub fn load(
    overrides: &Overrides,
    env: &impl Env,
) -> Result<(ShimConfig, Vec<String>), ConfigError> {
    let Loaded {
        config,
        warnings,
        problems,
    } = load_all(overrides, env);
    match problems.into_iter().next() {
        Some(problem) => Err(problem),
        None => Ok((config, warnings)),
    }
}

/// [`load`], going on past each problem so that all of them can be reported at once.
pub fn load_all(overrides: &Overrides, env: &impl Env) -> Loaded {
    let mut config = ShimConfig::defaults(env);
    let mut warnings = Vec::new();
    let mut problems = Vec::new();
    let file = match &overrides.config_file {
        Some(path) => Some((path.clone(), true)),
        None => config_path(env).map(|path| (path, false)),
    };
    if let Some((path, explicit)) = file {
        match read_config_file(&path, explicit) {
            Ok(Some(text)) => {
                apply_file(&mut config, &path, &text, &mut warnings, &mut problems);
                config.config_file = Some(path);
            }
            Ok(None) => {}
            Err(problem) => problems.push(problem),
        }
    }
    apply_env(&mut config, env, &mut warnings, &mut problems);
    apply_overrides(&mut config, overrides, &mut warnings, &mut problems);
    Loaded {
        config,
        warnings,
        problems,
    }
}

/// The host name the OS reports (`uname`'s node name on Unix, `COMPUTERNAME` on Windows,
/// which the system sets for every process), if it is UTF-8 and not empty.
#[must_use]
pub fn system_hostname() -> Option<String> {
    #[cfg(unix)]
    let name = rustix::system::uname()
        .nodename()
        .to_str()
        .ok()
        .map(str::to_owned);
    #[cfg(windows)]
    let name = std::env::var("COMPUTERNAME").ok();
    #[cfg(not(any(unix, windows)))]
    let name = None;
    name.filter(|name| !name.trim().is_empty())
}

/// The settings given explicitly, by `AUTOGPT_SHIM_*` variables and by `overrides` (flags
/// win), as config-file values keyed by config key: what `install` writes, since the service
/// it installs sees neither the flags nor this shell's environment. Each value is checked as
/// [`load`] checks it, and relative paths are made absolute against `cwd` because a service
/// starts elsewhere. `overrides.config_file` is not a setting; the token itself
/// (`AUTOGPT_SHIM_TOKEN`) never belongs in the file and is left to the caller.
///
/// # Errors
/// [`ConfigError::Invalid`] naming the variable or flag whose value is malformed or cannot be
/// written into a TOML file (a path that is not UTF-8, a number beyond TOML's integers).
pub fn explicit_settings(
    overrides: &Overrides,
    env: &impl Env,
    cwd: &Path,
) -> Result<toml::Table, ConfigError> {
    let mut config = ShimConfig::defaults(env);
    let mut given: Vec<(Field, Origin)> = Vec::new();
    for field in Field::ALL {
        let name = field.env_var();
        let Some(value) = non_blank(env, &name) else {
            continue;
        };
        set(&mut config, field, Raw::Text(&value)).map_err(|expected| {
            refusal(
                field,
                Raw::Text(&value),
                Origin::Env { name: name.clone() },
                expected,
            )
        })?;
        given.push((field, Origin::Env { name }));
    }
    let mut problems = Vec::new();
    apply_overrides(&mut config, overrides, &mut Vec::new(), &mut problems);
    if let Some(problem) = problems.into_iter().next() {
        return Err(problem);
    }
    let flags = [
        (
            overrides.platform_url.is_some(),
            Field::PlatformUrl,
            "--platform-url",
        ),
        (
            overrides.session_id.is_some(),
            Field::SessionId,
            "--session-id",
        ),
        (
            overrides.allowed_root.is_some(),
            Field::AllowedRoot,
            "--allowed-root",
        ),
        (
            overrides.token_file.is_some(),
            Field::TokenFile,
            "--token-file",
        ),
        (
            overrides.enable_shell.is_some(),
            Field::EnableShell,
            "--enable-shell",
        ),
        (
            overrides.enable_computer_use.is_some(),
            Field::EnableComputerUse,
            "--enable-computer-use",
        ),
        (
            overrides.enable_local_llm.is_some(),
            Field::EnableLocalLlm,
            "--enable-local-llm",
        ),
        (
            overrides.enable_hardware.is_some(),
            Field::EnableHardware,
            "--enable-hardware",
        ),
        (
            overrides.enable_clipboard.is_some(),
            Field::EnableClipboard,
            "--enable-clipboard",
        ),
        (
            overrides.enable_clipboard_read_foreign.is_some(),
            Field::EnableClipboardReadForeign,
            "--enable-clipboard-read-foreign",
        ),
        (
            overrides.enable_recording.is_some(),
            Field::EnableRecording,
            "--enable-recording",
        ),
        (
            overrides.shell_sandbox.is_some(),
            Field::ShellSandbox,
            "--shell-sandbox",
        ),
    ];
    for (set_by_flag, field, flag) in flags {
        if set_by_flag {
            given.retain(|(seen, _)| *seen != field);
            given.push((field, Origin::Flag { flag }));
        }
    }
    let mut table = toml::Table::new();
    for (field, origin) in given {
        let value = file_value(&config, field, cwd)
            .map_err(|expected| ConfigError::Invalid { origin, expected })?;
        table.insert(field.name().to_owned(), value);
    }
    Ok(table)
}

/// Parses `text` as the config file at `path` over the defaults of `env`, without reading
/// the environment's `AUTOGPT_SHIM_*` variables: the configuration a service started with
/// `--config path` gets when its environment has none of them.
///
/// # Errors
/// As [`load`] for the file's content.
pub fn parse_file(
    path: &Path,
    text: &str,
    env: &impl Env,
) -> Result<(ShimConfig, Vec<String>), ConfigError> {
    let mut config = ShimConfig::defaults(env);
    let mut warnings = Vec::new();
    let mut problems = Vec::new();
    apply_file(&mut config, path, text, &mut warnings, &mut problems);
    if let Some(problem) = problems.into_iter().next() {
        return Err(problem);
    }
    config.config_file = Some(path.to_path_buf());
    Ok((config, warnings))
}

/// Reads a token file: a regular file of at most [`MAX_TOKEN_FILE_BYTES`] with no group or
/// other permission bits, holding one line of UTF-8 (surrounding whitespace is trimmed).
///
/// # Errors
/// [`ConfigError::TokenFile`], [`ConfigError::EmptyToken`], or [`ConfigError::Invalid`] for
/// content that is not one line of UTF-8; none of them quotes the content.
pub fn read_token_file(path: &Path) -> Result<Token, ConfigError> {
    let malformed = || ConfigError::Invalid {
        origin: Origin::TokenFile {
            path: path.to_path_buf(),
        },
        expected: EXPECT_TOKEN,
    };
    let bytes = own_files::read_private(path, MAX_TOKEN_FILE_BYTES)?;
    let text = String::from_utf8(bytes).map_err(|_| malformed())?;
    let token = text.trim();
    if token.chars().any(char::is_control) {
        return Err(malformed());
    }
    Token::from_configured(Some(token)).ok_or_else(|| ConfigError::EmptyToken {
        path: path.to_path_buf(),
    })
}

fn apply_env(
    config: &mut ShimConfig,
    env: &impl Env,
    warnings: &mut Vec<String>,
    problems: &mut Vec<ConfigError>,
) {
    for field in Field::ALL {
        let name = field.env_var();
        let Some(value) = non_blank(env, &name) else {
            continue;
        };
        if let Err(expected) = set(config, field, Raw::Text(&value)) {
            problems.push(refusal(
                field,
                Raw::Text(&value),
                Origin::Env { name },
                expected,
            ));
        }
    }
    if let Some(value) = non_blank(env, TOKEN_ENV) {
        let token = value.trim();
        if token.chars().any(char::is_control) {
            problems.push(ConfigError::Invalid {
                origin: Origin::Env {
                    name: TOKEN_ENV.to_owned(),
                },
                expected: EXPECT_TOKEN,
            });
            return;
        }
        if let Some(path) = config.token_file.take() {
            warnings.push(format!(
                "{TOKEN_ENV} is set, so the token file {} is not read",
                path.display()
            ));
        }
        config.token = Token::from_configured(Some(token));
    }
}

fn apply_overrides(
    config: &mut ShimConfig,
    overrides: &Overrides,
    warnings: &mut Vec<String>,
    problems: &mut Vec<ConfigError>,
) {
    let flag = |field: Field, flag: &'static str, value: &str, expected| {
        refusal(field, Raw::Text(value), Origin::Flag { flag }, expected)
    };
    if let Some(url) = &overrides.platform_url
        && let Err(expected) = set(config, Field::PlatformUrl, Raw::Text(url))
    {
        problems.push(flag(Field::PlatformUrl, "--platform-url", url, expected));
    }
    if let Some(id) = &overrides.session_id
        && let Err(expected) = set(config, Field::SessionId, Raw::Text(id))
    {
        problems.push(flag(Field::SessionId, "--session-id", id, expected));
    }
    if let Some(root) = &overrides.allowed_root {
        match non_empty_path(root) {
            Ok(root) => config.allowed_root = Some(root),
            Err(expected) => problems.push(ConfigError::Invalid {
                origin: Origin::Flag {
                    flag: "--allowed-root",
                },
                expected,
            }),
        }
    }
    if let Some(mode) = &overrides.shell_sandbox
        && let Err(expected) = set(config, Field::ShellSandbox, Raw::Text(mode))
    {
        problems.push(flag(Field::ShellSandbox, "--shell-sandbox", mode, expected));
    }
    if let Some(path) = &overrides.token_file {
        match non_empty_path(path) {
            Ok(path) => {
                if config.token.take().is_some() {
                    warnings.push(format!("--token-file is given, so {TOKEN_ENV} is not used"));
                }
                config.token_file = Some(path);
            }
            Err(expected) => problems.push(ConfigError::Invalid {
                origin: Origin::Flag {
                    flag: "--token-file",
                },
                expected,
            }),
        }
    }
    let switches = [
        (overrides.enable_shell, &mut config.enable_shell),
        (
            overrides.enable_computer_use,
            &mut config.enable_computer_use,
        ),
        (overrides.enable_local_llm, &mut config.enable_local_llm),
        (overrides.enable_hardware, &mut config.enable_hardware),
        (overrides.enable_clipboard, &mut config.enable_clipboard),
        (
            overrides.enable_clipboard_read_foreign,
            &mut config.enable_clipboard_read_foreign,
        ),
        (overrides.enable_recording, &mut config.enable_recording),
    ];
    for (value, target) in switches {
        if let Some(value) = value {
            *target = value;
        }
    }
}

fn non_empty_path(path: &Path) -> Result<PathBuf, &'static str> {
    if path.as_os_str().is_empty() {
        Err(EXPECT_PATH)
    } else {
        Ok(path.to_path_buf())
    }
}
