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

use local_core::llm::BackendKind as LlmBackend;
use local_core::machine::own_files::{self, PrivateFileError};

use crate::protocol::{
    DEFAULT_COMMAND_TIMEOUT_SECONDS, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_FILE_SIZE_BYTES,
    is_valid_session_id,
};
use crate::ws::{Backoff, ConnectError, DEFAULT_PLATFORM_URL, Token, ws_base};

/// The largest config file read; a config file is a few hundred bytes.
pub const MAX_CONFIG_FILE_BYTES: u64 = 1024 * 1024;
/// The largest token file read.
pub const MAX_TOKEN_FILE_BYTES: u64 = 16 * 1024;
/// Prefix of the configuration environment variables.
pub const ENV_PREFIX: &str = "AUTOGPT_SHIM_";
/// The variable holding the bearer token itself.
pub const TOKEN_ENV: &str = "AUTOGPT_SHIM_TOKEN";
/// The directory name under the per-OS config and state directories.
pub const APP_DIR: &str = "autogpt-local-executor";
/// Default `ollama_url`.
pub const DEFAULT_OLLAMA_URL: &str = "http://localhost:11434";
/// Default `max_concurrent_commands`.
pub const DEFAULT_MAX_CONCURRENT_COMMANDS: NonZeroU32 = non_zero(10);
/// Default `max_commands_per_minute`.
pub const DEFAULT_MAX_COMMANDS_PER_MINUTE: NonZeroU32 = non_zero(60);
/// Default `max_screenshots_per_minute`.
pub const DEFAULT_MAX_SCREENSHOTS_PER_MINUTE: NonZeroU32 = non_zero(10);
/// Default `idle_session_timeout`: the reference's 10 minutes.
pub const DEFAULT_IDLE_SESSION_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest `display_name`, in characters.
pub const MAX_DISPLAY_NAME_CHARS: usize = 128;
/// Longest configured `machine_id`, in characters.
pub const MAX_MACHINE_ID_CHARS: usize = 256;

/// Keys of the reference's file that this build accepts and does not use; they get their own
/// warning, so a drop-in file does not look wrong.
const UNUSED_REFERENCE_KEYS: &[&str] = &[
    "recording_buffer_dir",
    "recording_default_interpretation_route",
    "recording_channels",
    "recording_retention_limit",
];

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
}

impl ShimConfig {
    /// The defaults, with per-OS paths from `env`.
    pub fn defaults(env: &impl Env) -> Self {
        let backoff = Backoff::default();
        Self {
            platform_url: DEFAULT_PLATFORM_URL.to_owned(),
            platform_ws_url: None,
            platform_oauth_url: None,
            oauth_client_id: crate::auth::DEFAULT_CLIENT_ID.to_owned(),
            oauth_redirect_port: crate::auth::DEFAULT_REDIRECT_PORT,
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
            max_concurrent_commands: DEFAULT_MAX_CONCURRENT_COMMANDS,
            command_timeout_seconds: DEFAULT_COMMAND_TIMEOUT_SECONDS,
            max_file_size_bytes: DEFAULT_MAX_FILE_SIZE_BYTES,
            max_commands_per_minute: DEFAULT_MAX_COMMANDS_PER_MINUTE,
            max_screenshots_per_minute: DEFAULT_MAX_SCREENSHOTS_PER_MINUTE,
            reconnect_base_delay: backoff.base,
            reconnect_max_delay: backoff.max,
            reconnect_jitter_seconds: backoff.jitter,
            ollama_url: DEFAULT_OLLAMA_URL.to_owned(),
            local_llm_backend: LlmBackend::Ollama,
            token_file: None,
            token: None,
            config_file: None,
            idle_session_timeout: DEFAULT_IDLE_SESSION_TIMEOUT,
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
    #[error("cannot read the config file {} ({}): make it readable by this user (`chmod 600` on it) or point --config elsewhere", path.display(), source.kind())]
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
    /// A value has the wrong type or is out of range.
    #[error("{origin} must be {expected}")]
    Invalid {
        /// Where it came from.
        origin: Origin,
        /// What it must be.
        expected: &'static str,
    },
    /// The token file is missing, unreadable, too open or too large.
    #[error("cannot use the token file: {0}")]
    TokenFile(#[from] PrivateFileError),
    /// The token file holds only whitespace.
    #[error("the token file {} is empty: write the platform's token into it, or log in with `autogpt-shim auth` instead", path.display())]
    EmptyToken {
        /// The file.
        path: PathBuf,
    },
}

/// Loads the configuration: defaults, then the file, then the environment, then `overrides`.
/// Returns it with the warnings the caller should show (unknown keys, shadowed token
/// sources); nothing is printed here.
///
/// # Errors
/// [`ConfigError`] for a missing `--config` file, an unreadable or malformed file, or any
/// value of the wrong type or out of range, naming where it came from.
pub fn load(
    overrides: &Overrides,
    env: &impl Env,
) -> Result<(ShimConfig, Vec<String>), ConfigError> {
    let mut config = ShimConfig::defaults(env);
    let mut warnings = Vec::new();
    let file = match &overrides.config_file {
        Some(path) => Some((path.clone(), true)),
        None => config_path(env).map(|path| (path, false)),
    };
    if let Some((path, explicit)) = file
        && let Some(text) = read_config_file(&path, explicit)?
    {
        apply_file(&mut config, &path, &text, &mut warnings)?;
        config.config_file = Some(path);
    }
    apply_env(&mut config, env, &mut warnings)?;
    apply_overrides(&mut config, overrides, &mut warnings)?;
    Ok((config, warnings))
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
        set(&mut config, field, Raw::Text(&value)).map_err(|expected| ConfigError::Invalid {
            origin: Origin::Env { name: name.clone() },
            expected,
        })?;
        given.push((field, Origin::Env { name }));
    }
    apply_overrides(&mut config, overrides, &mut Vec::new())?;
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
    apply_file(&mut config, path, text, &mut warnings)?;
    config.config_file = Some(path.to_path_buf());
    Ok((config, warnings))
}

/// `field`'s value in `config` as the file writes it; the inverse of [`set`] for a file.
fn file_value(config: &ShimConfig, field: Field, cwd: &Path) -> Result<toml::Value, &'static str> {
    use toml::Value;
    const EXPECT_UTF8_PATH: &str = "a UTF-8 path (the config file is TOML text)";
    const EXPECT_TOML_INTEGER: &str = "at most 9223372036854775807 (the largest TOML integer)";
    let text = |value: Option<&str>| Value::String(value.unwrap_or_default().to_owned());
    let path = |value: Option<&PathBuf>| -> Result<Value, &'static str> {
        let value = value.ok_or(EXPECT_PATH)?;
        let absolute = if value.is_absolute() {
            value.clone()
        } else {
            cwd.join(value)
        };
        absolute
            .to_str()
            .map(|path| Value::String(path.to_owned()))
            .ok_or(EXPECT_UTF8_PATH)
    };
    let integer = |value: u64| {
        i64::try_from(value)
            .map(Value::Integer)
            .map_err(|_| EXPECT_TOML_INTEGER)
    };
    let seconds = |value: Duration| Value::Float(value.as_secs_f64());
    Ok(match field {
        Field::PlatformUrl => text(Some(&config.platform_url)),
        Field::PlatformWsUrl => text(config.platform_ws_url.as_deref()),
        Field::PlatformOauthUrl => text(config.platform_oauth_url.as_deref()),
        Field::OauthClientId => text(Some(&config.oauth_client_id)),
        Field::OauthRedirectPort => Value::Integer(i64::from(config.oauth_redirect_port)),
        // Blank is control mode, and detect, as in the file.
        Field::SessionId => text(config.session_id.as_deref()),
        Field::MachineId => text(config.machine_id.as_deref()),
        Field::DisplayName => text(config.display_name.as_deref()),
        Field::AllowedRoot => path(config.allowed_root.as_ref())?,
        Field::AuditLogPath => path(config.audit_log_path.as_ref())?,
        Field::TokenFile => path(config.token_file.as_ref())?,
        Field::EnableShell => Value::Boolean(config.enable_shell),
        Field::EnableComputerUse => Value::Boolean(config.enable_computer_use),
        Field::EnableLocalLlm => Value::Boolean(config.enable_local_llm),
        Field::EnableHardware => Value::Boolean(config.enable_hardware),
        Field::EnableRecording => Value::Boolean(config.enable_recording),
        Field::EnableClipboard => Value::Boolean(config.enable_clipboard),
        Field::EnableClipboardReadForeign => Value::Boolean(config.enable_clipboard_read_foreign),
        Field::MaxConcurrent => integer(config.max_concurrent.get().into())?,
        Field::MaxConcurrentCommands => integer(config.max_concurrent_commands.get().into())?,
        Field::CommandTimeoutSeconds => integer(config.command_timeout_seconds.get())?,
        Field::MaxFileSizeBytes => integer(config.max_file_size_bytes.get())?,
        Field::MaxCommandsPerMinute => integer(config.max_commands_per_minute.get().into())?,
        Field::MaxScreenshotsPerMinute => integer(config.max_screenshots_per_minute.get().into())?,
        Field::ReconnectBaseDelay => seconds(config.reconnect_base_delay),
        Field::ReconnectMaxDelay => seconds(config.reconnect_max_delay),
        Field::ReconnectJitterSeconds => seconds(config.reconnect_jitter_seconds),
        Field::IdleSessionTimeout => seconds(config.idle_session_timeout),
        Field::OllamaUrl => text(Some(&config.ollama_url)),
        Field::LocalLlmBackend => text(Some(match config.local_llm_backend {
            LlmBackend::Ollama => "ollama",
            LlmBackend::OpenAiCompatible => "openai-compatible",
        })),
    })
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

/// The daemon's status file: `status.json` in [`state_dir`].
pub fn status_path(env: &impl Env) -> Option<PathBuf> {
    Some(state_dir(env)?.join("status.json"))
}

/// The reference's default jail root: `~/Documents/autogpt-workspace` on macOS, else
/// `~/autogpt-workspace`.
pub fn default_allowed_root(env: &impl Env) -> Option<PathBuf> {
    default_allowed_root_for(Os::CURRENT, env)
}

/// Which per-OS branch a path follows; a parameter so every branch is testable on one OS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Os {
    Linux,
    Mac,
    Windows,
}

impl Os {
    /// WSL2 and the BSDs follow the Linux branch, as in the reference.
    const CURRENT: Self = if cfg!(target_os = "macos") {
        Self::Mac
    } else if cfg!(windows) {
        Self::Windows
    } else {
        Self::Linux
    };
}

fn non_blank(env: &impl Env, name: &str) -> Option<String> {
    env.var(name).filter(|value| !value.trim().is_empty())
}

/// The user's home directory from the environment (the first virtual root of a browse).
pub fn home_dir(env: &impl Env) -> Option<PathBuf> {
    home(Os::CURRENT, env)
}

fn home(os: Os, env: &impl Env) -> Option<PathBuf> {
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

fn config_path_for(os: Os, env: &impl Env) -> Option<PathBuf> {
    let base = match os {
        Os::Linux => xdg(env, "XDG_CONFIG_HOME").or_else(|| Some(home(os, env)?.join(".config"))),
        Os::Mac => Some(home(os, env)?.join("Library").join("Application Support")),
        Os::Windows => windows_dir(env, "APPDATA", &["AppData", "Roaming"]),
    }?;
    Some(base.join(APP_DIR).join("config.toml"))
}

fn state_dir_for(os: Os, env: &impl Env) -> Option<PathBuf> {
    let base = match os {
        Os::Linux => {
            xdg(env, "XDG_STATE_HOME").or_else(|| Some(home(os, env)?.join(".local").join("state")))
        }
        Os::Mac => Some(home(os, env)?.join("Library").join("Logs")),
        Os::Windows => windows_dir(env, "LOCALAPPDATA", &["AppData", "Local"]),
    }?;
    Some(base.join(APP_DIR))
}

fn default_audit_log_path_for(os: Os, env: &impl Env) -> Option<PathBuf> {
    let dir = state_dir_for(os, env)?;
    Some(match os {
        Os::Windows => dir.join("logs").join("audit.log"),
        Os::Linux | Os::Mac => dir.join("audit.log"),
    })
}

fn default_allowed_root_for(os: Os, env: &impl Env) -> Option<PathBuf> {
    let home = home(os, env)?;
    Some(match os {
        Os::Mac => home.join("Documents").join("autogpt-workspace"),
        Os::Linux | Os::Windows => home.join("autogpt-workspace"),
    })
}

/// Every setting of the file and the environment, in the reference table's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    PlatformUrl,
    PlatformWsUrl,
    PlatformOauthUrl,
    OauthClientId,
    OauthRedirectPort,
    SessionId,
    MachineId,
    DisplayName,
    AllowedRoot,
    AuditLogPath,
    EnableShell,
    EnableComputerUse,
    EnableLocalLlm,
    EnableHardware,
    MaxConcurrent,
    MaxConcurrentCommands,
    CommandTimeoutSeconds,
    MaxFileSizeBytes,
    MaxCommandsPerMinute,
    ReconnectBaseDelay,
    ReconnectMaxDelay,
    ReconnectJitterSeconds,
    OllamaUrl,
    LocalLlmBackend,
    MaxScreenshotsPerMinute,
    EnableClipboard,
    EnableClipboardReadForeign,
    EnableRecording,
    TokenFile,
    IdleSessionTimeout,
}

impl Field {
    const ALL: [Self; 30] = [
        Self::PlatformUrl,
        Self::PlatformWsUrl,
        Self::PlatformOauthUrl,
        Self::OauthClientId,
        Self::OauthRedirectPort,
        Self::SessionId,
        Self::MachineId,
        Self::DisplayName,
        Self::AllowedRoot,
        Self::AuditLogPath,
        Self::EnableShell,
        Self::EnableComputerUse,
        Self::EnableLocalLlm,
        Self::EnableHardware,
        Self::MaxConcurrent,
        Self::MaxConcurrentCommands,
        Self::CommandTimeoutSeconds,
        Self::MaxFileSizeBytes,
        Self::MaxCommandsPerMinute,
        Self::ReconnectBaseDelay,
        Self::ReconnectMaxDelay,
        Self::ReconnectJitterSeconds,
        Self::OllamaUrl,
        Self::LocalLlmBackend,
        Self::MaxScreenshotsPerMinute,
        Self::EnableClipboard,
        Self::EnableClipboardReadForeign,
        Self::EnableRecording,
        Self::TokenFile,
        Self::IdleSessionTimeout,
    ];

    const fn name(self) -> &'static str {
        match self {
            Self::PlatformUrl => "platform_url",
            Self::PlatformWsUrl => "platform_ws_url",
            Self::PlatformOauthUrl => "platform_oauth_url",
            Self::OauthClientId => "oauth_client_id",
            Self::OauthRedirectPort => "oauth_redirect_port",
            Self::SessionId => "session_id",
            Self::MachineId => "machine_id",
            Self::DisplayName => "display_name",
            Self::AllowedRoot => "allowed_root",
            Self::AuditLogPath => "audit_log_path",
            Self::EnableShell => "enable_shell",
            Self::EnableComputerUse => "enable_computer_use",
            Self::EnableLocalLlm => "enable_local_llm",
            Self::EnableHardware => "enable_hardware",
            Self::MaxConcurrent => "max_concurrent",
            Self::MaxConcurrentCommands => "max_concurrent_commands",
            Self::CommandTimeoutSeconds => "command_timeout_seconds",
            Self::MaxFileSizeBytes => "max_file_size_bytes",
            Self::MaxCommandsPerMinute => "max_commands_per_minute",
            Self::ReconnectBaseDelay => "reconnect_base_delay",
            Self::ReconnectMaxDelay => "reconnect_max_delay",
            Self::ReconnectJitterSeconds => "reconnect_jitter_seconds",
            Self::OllamaUrl => "ollama_url",
            Self::LocalLlmBackend => "local_llm_backend",
            Self::MaxScreenshotsPerMinute => "max_screenshots_per_minute",
            Self::EnableClipboard => "enable_clipboard",
            Self::EnableClipboardReadForeign => "enable_clipboard_read_foreign",
            Self::EnableRecording => "enable_recording",
            Self::TokenFile => "token_file",
            Self::IdleSessionTimeout => "idle_session_timeout",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|field| field.name() == name)
    }

    fn env_var(self) -> String {
        format!("{ENV_PREFIX}{}", self.name().to_ascii_uppercase())
    }
}

/// A value as a layer supplies it: typed in the file, text in the environment and on the
/// command line.
#[derive(Debug, Clone, Copy)]
enum Raw<'a> {
    Toml(&'a toml::Value),
    Text(&'a str),
}

const EXPECT_WS_URL: &str = "a wss, ws, https or http URL with a host";
const EXPECT_OPTIONAL_WS_URL: &str = "blank or a wss, ws, https or http URL with a host";
const EXPECT_HTTP_URL: &str = "an http or https URL with a host";
const EXPECT_SESSION_ID: &str = "blank (control mode) or 1-256 characters of letters, digits, '.', '_', ':' or '-' starting with a letter or digit";
const EXPECT_MACHINE_ID: &str =
    "blank (detect) or at most 256 characters without control characters";
const EXPECT_DISPLAY_NAME: &str = "1-128 characters without control characters";
const EXPECT_PATH: &str = "a non-empty path";
const EXPECT_BOOL: &str = "true or false";
const EXPECT_BOOL_TEXT: &str = "one of true/false, 1/0, yes/no, on/off";
const EXPECT_POSITIVE_U32: &str = "a whole number from 1 to 4294967295";
const EXPECT_POSITIVE_U64: &str = "a whole number from 1 to 18446744073709551615";
const EXPECT_SECONDS: &str = "a non-negative number of seconds";
const EXPECT_TOKEN: &str = "one line of UTF-8 text without control characters";

/// Parses `raw` as `field` into `config`; the error is what the value must be.
fn set(config: &mut ShimConfig, field: Field, raw: Raw<'_>) -> Result<(), &'static str> {
    match field {
        Field::PlatformUrl => config.platform_url = ws_url(raw, EXPECT_WS_URL)?,
        Field::PlatformWsUrl => {
            config.platform_ws_url = match blank_is_none(raw, EXPECT_OPTIONAL_WS_URL)? {
                None => None,
                Some(_) => Some(ws_url(raw, EXPECT_OPTIONAL_WS_URL)?),
            };
        }
        Field::PlatformOauthUrl => {
            config.platform_oauth_url = match blank_is_none(raw, EXPECT_OPTIONAL_WS_URL)? {
                None => None,
                Some(_) => Some(ws_url(raw, EXPECT_OPTIONAL_WS_URL)?),
            };
        }
        Field::OauthClientId => {
            let id = text(raw, EXPECT_CLIENT_ID)?.trim();
            if id.is_empty() || id.len() > 256 || !id.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(EXPECT_CLIENT_ID);
            }
            config.oauth_client_id = id.to_owned();
        }
        Field::OauthRedirectPort => {
            let port = positive(raw, EXPECT_REDIRECT_PORT)?.get();
            config.oauth_redirect_port = u16::try_from(port)
                .ok()
                .filter(|port| {
                    port.checked_add(crate::auth::REDIRECT_PORT_COUNT - 1)
                        .is_some()
                })
                .ok_or(EXPECT_REDIRECT_PORT)?;
        }
        Field::SessionId => {
            config.session_id = match blank_is_none(raw, EXPECT_SESSION_ID)? {
                None => None,
                Some(id) if is_valid_session_id(id) => Some(id.to_owned()),
                Some(_) => return Err(EXPECT_SESSION_ID),
            };
        }
        Field::MachineId => {
            config.machine_id = match blank_is_none(raw, EXPECT_MACHINE_ID)? {
                None => None,
                Some(id)
                    if id.chars().count() <= MAX_MACHINE_ID_CHARS
                        && !id.chars().any(char::is_control) =>
                {
                    Some(id.to_owned())
                }
                Some(_) => return Err(EXPECT_MACHINE_ID),
            };
        }
        Field::DisplayName => {
            let name = display_name(text(raw, EXPECT_DISPLAY_NAME)?);
            config.display_name = Some(name.ok_or(EXPECT_DISPLAY_NAME)?);
        }
        Field::AllowedRoot => config.allowed_root = Some(path(raw)?),
        Field::AuditLogPath => config.audit_log_path = Some(path(raw)?),
        Field::TokenFile => config.token_file = Some(path(raw)?),
        Field::EnableShell => config.enable_shell = boolean(raw)?,
        Field::EnableComputerUse => config.enable_computer_use = boolean(raw)?,
        Field::EnableLocalLlm => config.enable_local_llm = boolean(raw)?,
        Field::EnableHardware => config.enable_hardware = boolean(raw)?,
        Field::EnableRecording => config.enable_recording = boolean(raw)?,
        Field::EnableClipboard => config.enable_clipboard = boolean(raw)?,
        Field::EnableClipboardReadForeign => config.enable_clipboard_read_foreign = boolean(raw)?,
        Field::MaxConcurrent => config.max_concurrent = positive_u32(raw)?,
        Field::MaxConcurrentCommands => config.max_concurrent_commands = positive_u32(raw)?,
        Field::CommandTimeoutSeconds => config.command_timeout_seconds = positive_u64(raw)?,
        Field::MaxFileSizeBytes => config.max_file_size_bytes = positive_u64(raw)?,
        Field::MaxCommandsPerMinute => config.max_commands_per_minute = positive_u32(raw)?,
        Field::MaxScreenshotsPerMinute => config.max_screenshots_per_minute = positive_u32(raw)?,
        Field::ReconnectBaseDelay => config.reconnect_base_delay = seconds(raw)?,
        Field::ReconnectMaxDelay => config.reconnect_max_delay = seconds(raw)?,
        Field::ReconnectJitterSeconds => config.reconnect_jitter_seconds = seconds(raw)?,
        Field::IdleSessionTimeout => config.idle_session_timeout = seconds(raw)?,
        Field::OllamaUrl => config.ollama_url = http_url(raw)?,
        Field::LocalLlmBackend => {
            config.local_llm_backend = match text(raw, EXPECT_LLM_BACKEND)?.trim() {
                "ollama" => LlmBackend::Ollama,
                "openai-compatible" => LlmBackend::OpenAiCompatible,
                _ => return Err(EXPECT_LLM_BACKEND),
            };
        }
    }
    Ok(())
}

const EXPECT_CLIENT_ID: &str = "1-256 printable ASCII characters without spaces";
const EXPECT_REDIRECT_PORT: &str =
    "a port from 1 to 65524 (the login tries it and the 11 after it)";
const EXPECT_LLM_BACKEND: &str = "`ollama` or `openai-compatible`";

fn text<'a>(raw: Raw<'a>, expected: &'static str) -> Result<&'a str, &'static str> {
    match raw {
        Raw::Text(text) => Ok(text),
        Raw::Toml(toml::Value::String(text)) => Ok(text),
        Raw::Toml(_) => Err(expected),
    }
}

/// The trimmed text, or `None` when it is blank.
fn blank_is_none<'a>(
    raw: Raw<'a>,
    expected: &'static str,
) -> Result<Option<&'a str>, &'static str> {
    let value = text(raw, expected)?.trim();
    Ok((!value.is_empty()).then_some(value))
}

fn ws_url(raw: Raw<'_>, expected: &'static str) -> Result<String, &'static str> {
    let url = text(raw, expected)?.trim();
    // `ws_base`'s own message quotes the URL, which may carry credentials.
    ws_base(url).map(|_| url.to_owned()).map_err(|_| expected)
}

fn http_url(raw: Raw<'_>) -> Result<String, &'static str> {
    let url = text(raw, EXPECT_HTTP_URL)?.trim();
    let (scheme, rest) = url.split_once("://").ok_or(EXPECT_HTTP_URL)?;
    let scheme_ok = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
    if !scheme_ok || rest.trim_end_matches('/').is_empty() {
        return Err(EXPECT_HTTP_URL);
    }
    Ok(url.to_owned())
}

fn display_name(value: &str) -> Option<String> {
    let name = value.trim();
    let chars = name.chars().count();
    ((1..=MAX_DISPLAY_NAME_CHARS).contains(&chars) && !name.chars().any(char::is_control))
        .then(|| name.to_owned())
}

fn path(raw: Raw<'_>) -> Result<PathBuf, &'static str> {
    // Not trimmed: a path may legitimately end in a space; blank is refused.
    let value = text(raw, EXPECT_PATH)?;
    if value.trim().is_empty() {
        return Err(EXPECT_PATH);
    }
    Ok(PathBuf::from(value))
}

fn boolean(raw: Raw<'_>) -> Result<bool, &'static str> {
    match raw {
        Raw::Toml(toml::Value::Boolean(value)) => Ok(*value),
        Raw::Toml(_) => Err(EXPECT_BOOL),
        Raw::Text(text) => parse_bool(text).ok_or(EXPECT_BOOL_TEXT),
    }
}

/// The environment's booleans: `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`, any case.
fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn positive_u64(raw: Raw<'_>) -> Result<NonZeroU64, &'static str> {
    positive(raw, EXPECT_POSITIVE_U64)
}

fn positive_u32(raw: Raw<'_>) -> Result<NonZeroU32, &'static str> {
    positive(raw, EXPECT_POSITIVE_U32)
        .and_then(|n| NonZeroU32::try_from(n).map_err(|_| EXPECT_POSITIVE_U32))
}

fn positive(raw: Raw<'_>, expected: &'static str) -> Result<NonZeroU64, &'static str> {
    let value = match raw {
        Raw::Toml(toml::Value::Integer(n)) => u64::try_from(*n).ok(),
        Raw::Toml(_) => None,
        Raw::Text(text) => text.trim().parse::<u64>().ok(),
    };
    value.and_then(NonZeroU64::new).ok_or(expected)
}

fn seconds(raw: Raw<'_>) -> Result<Duration, &'static str> {
    let value = match raw {
        Raw::Toml(toml::Value::Integer(n)) => {
            return u64::try_from(*n)
                .map(Duration::from_secs)
                .map_err(|_| EXPECT_SECONDS);
        }
        Raw::Toml(toml::Value::Float(value)) => *value,
        Raw::Toml(_) => return Err(EXPECT_SECONDS),
        Raw::Text(text) => text.trim().parse::<f64>().map_err(|_| EXPECT_SECONDS)?,
    };
    // Refuses negatives, NaN and infinities.
    Duration::try_from_secs_f64(value).map_err(|_| EXPECT_SECONDS)
}

fn read_config_file(path: &Path, explicit: bool) -> Result<Option<String>, ConfigError> {
    match own_files::read_capped(path, MAX_CONFIG_FILE_BYTES) {
        Ok(Some(bytes)) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| ConfigError::NotUtf8 {
                path: path.to_path_buf(),
            }),
        Ok(None) if explicit => Err(ConfigError::MissingFile {
            path: path.to_path_buf(),
        }),
        Ok(None) => Ok(None),
        Err(source) => Err(ConfigError::ReadFile {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn apply_file(
    config: &mut ShimConfig,
    path: &Path,
    text: &str,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let table: toml::Table = text
        .parse()
        .map_err(|err: toml::de::Error| syntax_error(path, text, &err))?;
    let mut unknown = Vec::new();
    let mut unused = Vec::new();
    for (key, value) in &table {
        if let Some(field) = Field::from_name(key) {
            set(config, field, Raw::Toml(value)).map_err(|expected| ConfigError::Invalid {
                origin: Origin::File {
                    path: path.to_path_buf(),
                    key: field.name(),
                },
                expected,
            })?;
        } else if key == "token" {
            warnings.push(format!(
                "`token` in {} is ignored: the config file is no place for a secret; put the token in a file only you can read and point `token_file` at it",
                path.display()
            ));
        } else if UNUSED_REFERENCE_KEYS.contains(&key.as_str()) {
            unused.push(printable_key(key));
        } else {
            unknown.push(printable_key(key));
        }
    }
    for (keys, what) in [
        (unused, "keys this build does not use"),
        (unknown, "unknown keys"),
    ] {
        if !keys.is_empty() {
            warnings.push(format!(
                "{} has {what}, ignored: {}",
                path.display(),
                sorted(keys).join(", ")
            ));
        }
    }
    Ok(())
}

fn sorted(mut keys: Vec<String>) -> Vec<String> {
    keys.sort();
    keys
}

/// A key for a warning: quoted and escaped, so a crafted key cannot add lines or hide text,
/// and capped, since only the name is useful.
fn printable_key(key: &str) -> String {
    const MAX_CHARS: usize = 64;
    let mut shown: String = key.chars().take(MAX_CHARS).collect();
    if key.chars().count() > MAX_CHARS {
        shown.push('…');
    }
    format!("{shown:?}")
}

fn syntax_error(path: &Path, text: &str, err: &toml::de::Error) -> ConfigError {
    let offset = err.span().map_or(0, |span| span.start).min(text.len());
    // Spans are byte offsets on character boundaries; `get` keeps a wrong one harmless.
    let before = text.get(..offset).unwrap_or_default();
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |line| line.chars().count())
        + 1;
    ConfigError::Syntax {
        path: path.to_path_buf(),
        line,
        column,
        message: one_line(err.message()),
    }
}

/// Control characters become spaces, so a message stays one line.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn apply_env(
    config: &mut ShimConfig,
    env: &impl Env,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    for field in Field::ALL {
        let name = field.env_var();
        let Some(value) = non_blank(env, &name) else {
            continue;
        };
        set(config, field, Raw::Text(&value)).map_err(|expected| ConfigError::Invalid {
            origin: Origin::Env { name },
            expected,
        })?;
    }
    if let Some(value) = non_blank(env, TOKEN_ENV) {
        let token = value.trim();
        if token.chars().any(char::is_control) {
            return Err(ConfigError::Invalid {
                origin: Origin::Env {
                    name: TOKEN_ENV.to_owned(),
                },
                expected: EXPECT_TOKEN,
            });
        }
        if let Some(path) = config.token_file.take() {
            warnings.push(format!(
                "{TOKEN_ENV} is set, so the token file {} is not read",
                path.display()
            ));
        }
        config.token = Token::from_configured(Some(token));
    }
    Ok(())
}

fn apply_overrides(
    config: &mut ShimConfig,
    overrides: &Overrides,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let flag = |flag: &'static str| {
        move |expected| ConfigError::Invalid {
            origin: Origin::Flag { flag },
            expected,
        }
    };
    if let Some(url) = &overrides.platform_url {
        set(config, Field::PlatformUrl, Raw::Text(url)).map_err(flag("--platform-url"))?;
    }
    if let Some(id) = &overrides.session_id {
        set(config, Field::SessionId, Raw::Text(id)).map_err(flag("--session-id"))?;
    }
    if let Some(root) = &overrides.allowed_root {
        config.allowed_root = Some(non_empty_path(root).map_err(flag("--allowed-root"))?);
    }
    if let Some(path) = &overrides.token_file {
        let path = non_empty_path(path).map_err(flag("--token-file"))?;
        if config.token.take().is_some() {
            warnings.push(format!("--token-file is given, so {TOKEN_ENV} is not used"));
        }
        config.token_file = Some(path);
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
    Ok(())
}

fn non_empty_path(path: &Path) -> Result<PathBuf, &'static str> {
    if path.as_os_str().is_empty() {
        Err(EXPECT_PATH)
    } else {
        Ok(path.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    #[cfg(unix)]
    use local_core::machine::own_files::PRIVATE_FILE_MODE;
    use local_core::machine::own_files::write_atomic;

    use super::*;

    /// Each refusal a person reads says what is wrong and what to do, in words: no Rust
    /// debug text and no `(os error N)`.
    #[test]
    fn config_refusals_name_their_remedy_without_debug_noise() {
        let path = PathBuf::from("/home/me/.config/autogpt-local-executor/config.toml");
        let denied = io::Error::from_raw_os_error(13);
        let cases: [(ConfigError, &str); 6] = [
            (
                ConfigError::MissingFile { path: path.clone() },
                "autogpt-shim install",
            ),
            (
                ConfigError::ReadFile {
                    path: path.clone(),
                    source: denied,
                },
                "chmod 600",
            ),
            (
                ConfigError::NotUtf8 { path: path.clone() },
                "save it as UTF-8",
            ),
            (
                ConfigError::Syntax {
                    path: path.clone(),
                    line: 3,
                    column: 7,
                    message: "expected `=`".to_owned(),
                },
                "fix that line",
            ),
            (
                ConfigError::EmptyToken { path: path.clone() },
                "autogpt-shim auth",
            ),
            (
                ConfigError::TokenFile(PrivateFileError::Io {
                    path,
                    source: io::Error::from_raw_os_error(2),
                }),
                "check that it exists",
            ),
        ];
        for (error, remedy) in cases {
            let text = error.to_string();
            assert!(text.contains(remedy), "{text}");
            for noise in ["{", "Os {", "Error(", "os error", "Kind("] {
                assert!(!text.contains(noise), "{noise} in {text}");
            }
        }
    }

    type Check = fn(&ShimConfig) -> bool;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    /// A scratch directory, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "shim-config-{tag}-{}",
                local_core::secret::new_id().simple()
            ));
            own_files::ensure_dir(&dir).unwrap();
            Self(dir)
        }

        fn write(&self, name: &str, content: &str, mode: u32) -> PathBuf {
            let path = self.0.join(name);
            write_atomic(&path, content.as_bytes(), mode).unwrap();
            path
        }

        fn path(&self) -> String {
            self.0.to_string_lossy().into_owned()
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            // Tests clean up directly; only the code under test is held to own_files.
            #[allow(clippy::disallowed_methods)]
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn explicit(path: &Path) -> Overrides {
        Overrides {
            config_file: Some(path.to_path_buf()),
            ..Overrides::default()
        }
    }

    fn load_file(content: &str) -> (Result<(ShimConfig, Vec<String>), ConfigError>, TempDir) {
        let dir = TempDir::new("file");
        let path = dir.write("config.toml", content, 0o644);
        (load(&explicit(&path), &env(&[])), dir)
    }

    #[test]
    fn defaults_follow_the_reference_table() {
        let config = ShimConfig::defaults(&env(&[("HOME", "/home/u")]));
        let expected = ShimConfig {
            platform_url: "wss://platform.autogpt.net".to_owned(),
            platform_ws_url: None,
            platform_oauth_url: None,
            oauth_client_id: "autogpt-local-executor".to_owned(),
            oauth_redirect_port: 41899,
            session_id: None,
            machine_id: None,
            display_name: system_hostname(),
            allowed_root: Some(PathBuf::from("/home/u/autogpt-workspace")),
            audit_log_path: Some(PathBuf::from(
                "/home/u/.local/state/autogpt-local-executor/audit.log",
            )),
            enable_shell: false,
            enable_computer_use: false,
            enable_local_llm: false,
            enable_hardware: false,
            enable_recording: false,
            enable_clipboard: false,
            enable_clipboard_read_foreign: false,
            max_concurrent: NonZeroU32::new(4).unwrap(),
            max_concurrent_commands: NonZeroU32::new(10).unwrap(),
            command_timeout_seconds: NonZeroU64::new(30).unwrap(),
            max_file_size_bytes: NonZeroU64::new(10 * 1024 * 1024).unwrap(),
            max_commands_per_minute: NonZeroU32::new(60).unwrap(),
            max_screenshots_per_minute: NonZeroU32::new(10).unwrap(),
            reconnect_base_delay: Duration::from_secs(1),
            reconnect_max_delay: Duration::from_secs(60),
            reconnect_jitter_seconds: Duration::from_secs(5),
            ollama_url: "http://localhost:11434".to_owned(),
            local_llm_backend: LlmBackend::Ollama,
            token_file: None,
            token: None,
            config_file: None,
            idle_session_timeout: Duration::from_secs(600),
        };
        if cfg!(target_os = "linux") {
            assert_eq!(config, expected);
        }
        assert_eq!(config.backoff(), Backoff::default());

        // Without a home directory there is nothing to default the paths to.
        let bare = ShimConfig::defaults(&env(&[]));
        assert_eq!(bare.allowed_root, None);
        assert_eq!(bare.audit_log_path, None);
        assert_eq!(config_path(&env(&[])), None);
    }

    // Unix paths: a relative path joins `/cwd` with `/`.
    #[cfg(unix)]
    #[test]
    fn explicit_settings_are_the_flags_and_variables_given() {
        let vars = env(&[
            ("HOME", "/home/u"),
            ("AUTOGPT_SHIM_PLATFORM_URL", "https://env.example"),
            ("AUTOGPT_SHIM_MAX_CONCURRENT", "3"),
            ("AUTOGPT_SHIM_RECONNECT_BASE_DELAY", "0.5"),
            ("AUTOGPT_SHIM_TOKEN", "never-written"),
            ("AUTOGPT_SHIM_SESSION_ID", " "),
        ]);
        let overrides = Overrides {
            config_file: Some(PathBuf::from("/c.toml")),
            platform_url: Some("https://flag.example".to_owned()),
            allowed_root: Some(PathBuf::from("work")),
            token_file: Some(PathBuf::from("/t/token")),
            enable_shell: Some(true),
            ..Overrides::default()
        };
        let table = explicit_settings(&overrides, &vars, Path::new("/cwd")).unwrap();
        let text = toml::to_string(&table).unwrap();
        assert_eq!(
            text,
            "allowed_root = \"/cwd/work\"\n\
             enable_shell = true\n\
             max_concurrent = 3\n\
             platform_url = \"https://flag.example\"\n\
             reconnect_base_delay = 0.5\n\
             token_file = \"/t/token\"\n"
        );
        assert!(!text.contains("never-written"));

        // Written and read back, the file means what the flags and variables meant.
        let mut expected = ShimConfig::defaults(&vars);
        apply_env(&mut expected, &vars, &mut Vec::new()).unwrap();
        apply_overrides(&mut expected, &overrides, &mut Vec::new()).unwrap();
        expected.token = None;
        expected.allowed_root = Some(PathBuf::from("/cwd/work"));
        let (read, _) = parse_file(Path::new("/c.toml"), &text, &vars).unwrap();
        assert_eq!(
            ShimConfig {
                config_file: None,
                ..read
            },
            expected
        );

        let bad = env(&[("AUTOGPT_SHIM_MAX_CONCURRENT", "0")]);
        let err = explicit_settings(&Overrides::default(), &bad, Path::new("/")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("AUTOGPT_SHIM_MAX_CONCURRENT must be"),
            "{err}"
        );
    }

    #[test]
    fn display_name_defaults_to_a_valid_hostname_only() {
        let named = ShimConfig::defaults(&env(&[("HOSTNAME", " box-1 ")]));
        assert_eq!(named.display_name.as_deref(), Some("box-1"));
        let windows = ShimConfig::defaults(&env(&[("COMPUTERNAME", "DESKTOP-7")]));
        assert_eq!(windows.display_name.as_deref(), Some("DESKTOP-7"));
        let long = "h".repeat(129);
        // An unusable variable falls back to the system's name, as an absent one does.
        let too_long = ShimConfig::defaults(&env(&[("HOSTNAME", &long)]));
        assert_eq!(too_long.display_name, system_hostname());
        let unexported = ShimConfig::defaults(&env(&[]));
        assert_eq!(unexported.display_name, system_hostname());
        #[cfg(unix)]
        {
            // The kernel's node name, the same as `uname -n` prints.
            let node = rustix::system::uname();
            let node = node.nodename().to_str().unwrap();
            assert!(!node.is_empty());
            assert_eq!(system_hostname().as_deref(), Some(node));
            assert_eq!(unexported.display_name.as_deref(), Some(node));
        }

        let exact = "n".repeat(128);
        let vars = env(&[("AUTOGPT_SHIM_DISPLAY_NAME", &exact)]);
        let (config, _) = load(&Overrides::default(), &vars).unwrap();
        assert_eq!(config.display_name.as_deref(), Some(exact.as_str()));
        let vars = env(&[("AUTOGPT_SHIM_DISPLAY_NAME", &long)]);
        let err = load(&Overrides::default(), &vars).unwrap_err();
        assert!(
            err.to_string().contains("AUTOGPT_SHIM_DISPLAY_NAME"),
            "{err}"
        );
        let (result, _dir) = load_file("display_name = \"\"\n");
        assert!(result.unwrap_err().to_string().contains("`display_name`"));
    }

    #[test]
    fn precedence_is_flags_then_environment_then_file_then_defaults() {
        let dir = TempDir::new("precedence");
        let path = dir.write(
            "config.toml",
            r#"
platform_url = "https://file.example"
session_id = "from-file"
max_concurrent = 5
command_timeout_seconds = 7
enable_shell = true
enable_local_llm = true
reconnect_base_delay = 0.25
"#,
            0o644,
        );
        let vars = env(&[
            ("AUTOGPT_SHIM_PLATFORM_URL", "https://env.example"),
            ("AUTOGPT_SHIM_SESSION_ID", "from-env"),
            ("AUTOGPT_SHIM_MAX_CONCURRENT", "6"),
            ("AUTOGPT_SHIM_ENABLE_SHELL", "off"),
            ("AUTOGPT_SHIM_RECONNECT_BASE_DELAY", "   "),
        ]);

        let (config, warnings) = load(&explicit(&path), &vars).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(config.config_file.as_deref(), Some(path.as_path()));
        assert_eq!(config.platform_url, "https://env.example");
        assert_eq!(config.session_id.as_deref(), Some("from-env"));
        assert_eq!(config.max_concurrent.get(), 6);
        assert_eq!(config.command_timeout_seconds.get(), 7);
        assert!(!config.enable_shell);
        assert!(config.enable_local_llm);
        // A blank variable is unset, so the file's value stands.
        assert_eq!(config.reconnect_base_delay, Duration::from_millis(250));
        assert_eq!(config.max_file_size_bytes, DEFAULT_MAX_FILE_SIZE_BYTES);

        let flags = Overrides {
            platform_url: Some("http://127.0.0.1:9".to_owned()),
            session_id: Some("from-flag".to_owned()),
            enable_shell: Some(true),
            ..explicit(&path)
        };
        let (config, _) = load(&flags, &vars).unwrap();
        assert_eq!(config.platform_url, "http://127.0.0.1:9");
        assert_eq!(config.session_id.as_deref(), Some("from-flag"));
        assert!(config.enable_shell);
        assert_eq!(config.max_concurrent.get(), 6);

        // A blank flag asks for control mode even over the environment and the file.
        let blank = Overrides {
            session_id: Some("  ".to_owned()),
            ..explicit(&path)
        };
        assert_eq!(load(&blank, &vars).unwrap().0.session_id, None);
    }

    /// One valid non-default value per field: (key, environment text, TOML literal, check).
    const EVERY_FIELD: &[(&str, &str, &str, Check)] = &[
        (
            "platform_url",
            "https://x.example",
            "\"https://x.example\"",
            |c| c.platform_url == "https://x.example",
        ),
        (
            "platform_ws_url",
            "wss://ws.example/ws",
            "\"wss://ws.example/ws\"",
            |c| c.platform_ws_url.as_deref() == Some("wss://ws.example/ws"),
        ),
        (
            "platform_oauth_url",
            "https://id.example/o",
            "\"https://id.example/o\"",
            |c| c.platform_oauth_url.as_deref() == Some("https://id.example/o"),
        ),
        ("oauth_client_id", "client-9", "\"client-9\"", |c| {
            c.oauth_client_id == "client-9"
        }),
        ("oauth_redirect_port", "65524", "65524", |c| {
            c.oauth_redirect_port == 65524
        }),
        ("session_id", "s-9", "\"s-9\"", |c| {
            c.session_id.as_deref() == Some("s-9")
        }),
        ("machine_id", "m-9", "\"m-9\"", |c| {
            c.machine_id.as_deref() == Some("m-9")
        }),
        ("display_name", "Desk 9", "\"Desk 9\"", |c| {
            c.display_name.as_deref() == Some("Desk 9")
        }),
        ("allowed_root", "/srv/root", "\"/srv/root\"", |c| {
            c.allowed_root.as_deref() == Some(Path::new("/srv/root"))
        }),
        (
            "audit_log_path",
            "/srv/audit.log",
            "\"/srv/audit.log\"",
            |c| c.audit_log_path.as_deref() == Some(Path::new("/srv/audit.log")),
        ),
        ("enable_shell", "yes", "true", |c| c.enable_shell),
        ("enable_computer_use", "on", "true", |c| {
            c.enable_computer_use
        }),
        ("enable_local_llm", "1", "true", |c| c.enable_local_llm),
        ("enable_hardware", "on", "true", |c| c.enable_hardware),
        ("max_concurrent", "2", "2", |c| c.max_concurrent.get() == 2),
        ("max_concurrent_commands", "3", "3", |c| {
            c.max_concurrent_commands.get() == 3
        }),
        ("command_timeout_seconds", "4", "4", |c| {
            c.command_timeout_seconds.get() == 4
        }),
        ("max_file_size_bytes", "5", "5", |c| {
            c.max_file_size_bytes.get() == 5
        }),
        ("max_commands_per_minute", "6", "6", |c| {
            c.max_commands_per_minute.get() == 6
        }),
        ("reconnect_base_delay", "0.5", "0.5", |c| {
            c.reconnect_base_delay == Duration::from_millis(500)
        }),
        ("reconnect_max_delay", "9", "9", |c| {
            c.reconnect_max_delay == Duration::from_secs(9)
        }),
        ("reconnect_jitter_seconds", "0", "0.0", |c| {
            c.reconnect_jitter_seconds == Duration::ZERO
        }),
        (
            "ollama_url",
            "https://llm.example:1",
            "\"https://llm.example:1\"",
            |c| c.ollama_url == "https://llm.example:1",
        ),
        (
            "local_llm_backend",
            "openai-compatible",
            "\"openai-compatible\"",
            |c| c.local_llm_backend == LlmBackend::OpenAiCompatible,
        ),
        ("max_screenshots_per_minute", "7", "7", |c| {
            c.max_screenshots_per_minute.get() == 7
        }),
        ("enable_clipboard", "TRUE", "true", |c| c.enable_clipboard),
        ("enable_clipboard_read_foreign", "True", "true", |c| {
            c.enable_clipboard_read_foreign
        }),
        ("enable_recording", "true", "true", |c| c.enable_recording),
        ("token_file", "/srv/token", "\"/srv/token\"", |c| {
            c.token_file.as_deref() == Some(Path::new("/srv/token"))
        }),
        ("idle_session_timeout", "1.5", "1.5", |c| {
            c.idle_session_timeout == Duration::from_millis(1500)
        }),
    ];

    #[test]
    fn every_field_has_a_file_key_and_an_environment_variable() {
        let mut covered: Vec<&str> = EVERY_FIELD.iter().map(|(key, ..)| *key).collect();
        covered.sort_unstable();
        let mut all: Vec<&str> = Field::ALL.iter().map(|field| field.name()).collect();
        all.sort_unstable();
        assert_eq!(covered, all);

        let defaults = ShimConfig::defaults(&env(&[]));
        for (key, text, literal, check) in EVERY_FIELD {
            let field = Field::from_name(key).unwrap();
            let name = field.env_var();
            assert_eq!(name, format!("AUTOGPT_SHIM_{}", key.to_uppercase()));
            assert!(!check(&defaults), "{key}: the table's value is the default");

            let (config, warnings) = load(&Overrides::default(), &env(&[(&name, text)]))
                .unwrap_or_else(|err| panic!("{name}: {err}"));
            assert!(check(&config), "{name}");
            assert!(warnings.is_empty(), "{name}: {warnings:?}");

            let (result, _dir) = load_file(&format!("{key} = {literal}\n"));
            let (config, warnings) = result.unwrap_or_else(|err| panic!("{key}: {err}"));
            assert!(check(&config), "{key} in the file");
            assert!(warnings.is_empty(), "{key}: {warnings:?}");
        }
    }

    #[test]
    fn booleans_accept_the_usual_spellings_only() {
        for (text, expected) in [
            ("true", true),
            ("TRUE", true),
            ("Yes", true),
            ("on", true),
            ("1", true),
            (" false ", false),
            ("No", false),
            ("OFF", false),
            ("0", false),
        ] {
            let vars = env(&[("AUTOGPT_SHIM_ENABLE_SHELL", text)]);
            let (config, _) = load(&Overrides::default(), &vars).unwrap();
            assert_eq!(config.enable_shell, expected, "{text:?}");
        }
        for text in ["maybe", "2", "tru", "y", "enabled", "hunter2"] {
            let vars = env(&[("AUTOGPT_SHIM_ENABLE_SHELL", text)]);
            let message = load(&Overrides::default(), &vars).unwrap_err().to_string();
            assert!(
                message.starts_with("AUTOGPT_SHIM_ENABLE_SHELL must be"),
                "{message}"
            );
            assert!(!message.contains("hunter2"), "{message}");
        }
        // The file has real booleans; a string there is a type error.
        let (result, _dir) = load_file("enable_shell = \"yes\"\n");
        let message = result.unwrap_err().to_string();
        assert!(message.contains("`enable_shell`"), "{message}");
    }

    #[test]
    fn zero_negative_and_oversized_limits_are_refused_by_name() {
        let limits = [
            "max_concurrent",
            "max_concurrent_commands",
            "command_timeout_seconds",
            "max_file_size_bytes",
            "max_commands_per_minute",
            "max_screenshots_per_minute",
        ];
        for key in limits {
            let name = Field::from_name(key).unwrap().env_var();
            for bad in ["0", "-3", "1.5", "many", "99999999999999999999"] {
                let err = load(&Overrides::default(), &env(&[(&name, bad)])).unwrap_err();
                assert!(
                    matches!(&err, ConfigError::Invalid { origin: Origin::Env { name: n }, .. } if *n == name),
                    "{name}={bad}: {err}"
                );
            }
            for bad in ["0", "-3", "2.0", "\"4\""] {
                let (result, _dir) = load_file(&format!("{key} = {bad}\n"));
                let err = result.unwrap_err();
                assert!(err.to_string().contains(&format!("`{key}`")), "{err}");
            }
        }
        let vars = env(&[("AUTOGPT_SHIM_MAX_CONCURRENT", "4294967296")]);
        assert!(load(&Overrides::default(), &vars).is_err());
        // The login tries the port and the 11 after it, so the last usable first port is
        // 65524.
        let port = |value: &str| {
            load(
                &Overrides::default(),
                &env(&[("AUTOGPT_SHIM_OAUTH_REDIRECT_PORT", value)]),
            )
            .map(|(config, _)| config.oauth_redirect_port)
        };
        assert_eq!(port("65524").unwrap(), 65524);
        assert!(port("65525").is_err());
        assert!(port("0").is_err());
        let vars = env(&[("AUTOGPT_SHIM_MAX_FILE_SIZE_BYTES", "4294967296")]);
        assert!(load(&Overrides::default(), &vars).is_ok());

        for key in [
            "reconnect_base_delay",
            "reconnect_max_delay",
            "reconnect_jitter_seconds",
        ] {
            let name = Field::from_name(key).unwrap().env_var();
            for bad in ["-1", "NaN", "inf", "soon"] {
                let message = load(&Overrides::default(), &env(&[(&name, bad)]))
                    .unwrap_err()
                    .to_string();
                assert!(message.contains(&name), "{message}");
            }
            let (result, _dir) = load_file(&format!("{key} = -0.5\n"));
            assert!(
                result
                    .unwrap_err()
                    .to_string()
                    .contains(&format!("`{key}`"))
            );
        }
    }

    #[test]
    fn urls_session_ids_and_paths_are_checked_without_echoing_them() {
        let secret_url = "ftp://user:hunter2@example";
        let cases = [
            ("AUTOGPT_SHIM_PLATFORM_URL", secret_url),
            ("AUTOGPT_SHIM_PLATFORM_WS_URL", secret_url),
            ("AUTOGPT_SHIM_OLLAMA_URL", secret_url),
            ("AUTOGPT_SHIM_SESSION_ID", "../hunter2"),
            ("AUTOGPT_SHIM_MACHINE_ID", "hunter2\nx"),
        ];
        for (name, value) in cases {
            let message = load(&Overrides::default(), &env(&[(name, value)]))
                .unwrap_err()
                .to_string();
            assert!(message.starts_with(name), "{message}");
            assert!(!message.contains("hunter2"), "{message}");
            assert_eq!(message.lines().count(), 1);
        }
        let flags = Overrides {
            allowed_root: Some(PathBuf::new()),
            ..Overrides::default()
        };
        let message = load(&flags, &env(&[])).unwrap_err().to_string();
        assert!(message.starts_with("--allowed-root"), "{message}");
    }

    #[test]
    fn the_websocket_endpoint_follows_the_override() {
        let mut config = ShimConfig::defaults(&env(&[]));
        config.platform_url = "https://p.example/".to_owned();
        assert_eq!(
            config.ws_endpoint().unwrap(),
            "wss://p.example/ws/local-executor"
        );
        assert_eq!(
            config.data_url("s-1").unwrap(),
            "wss://p.example/ws/local-executor/s-1"
        );
        config.platform_ws_url = Some("http://127.0.0.1:9/custom/".to_owned());
        assert_eq!(
            config.data_url("s-1").unwrap(),
            "ws://127.0.0.1:9/custom/s-1"
        );
        assert!(config.data_url("../x").is_err());

        // Blank means no override, as for the session id.
        let (result, _dir) = load_file("platform_ws_url = \"\"\nsession_id = \" \"\n");
        let (config, _) = result.unwrap();
        assert_eq!(config.platform_ws_url, None);
        assert_eq!(config.session_id, None);
    }

    #[test]
    fn unknown_and_unused_file_keys_are_warnings() {
        let (result, _dir) = load_file(
            r#"
zeta = 1
"bad\nkey" = 2
recording_default_interpretation_route = "extract_then_cloud"
recording_channels = ["floor"]
token = "hunter2"
max_concurrent = 3

[alpha]
x = 1
"#,
        );
        let (config, warnings) = result.unwrap();
        assert_eq!(config.max_concurrent.get(), 3);
        assert_eq!(config.token, None);
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[0].contains("`token`"), "{warnings:?}");
        assert!(
            warnings[1].ends_with(
                r#"keys this build does not use, ignored: "recording_channels", "recording_default_interpretation_route""#
            ),
            "{warnings:?}"
        );
        assert!(
            warnings[2].ends_with(r#"unknown keys, ignored: "alpha", "bad\nkey", "zeta""#),
            "{warnings:?}"
        );
        for warning in &warnings {
            assert!(!warning.contains("hunter2"));
            assert_eq!(warning.lines().count(), 1);
        }
    }

    #[test]
    fn malformed_files_name_the_place_not_the_value() {
        let (result, _dir) =
            load_file("max_concurrent = 2\nsecret = \"hunter2\nenable_shell = true\n");
        let err = result.unwrap_err();
        let ConfigError::Syntax { line, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!(*line, 2);
        let message = err.to_string();
        assert!(message.contains("line 2, column"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
        assert_eq!(message.lines().count(), 1);

        let (result, _dir) = load_file("\n\nmax_concurrent = \"hunter2\"\n");
        let message = result.unwrap_err().to_string();
        assert!(message.contains("`max_concurrent`"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");

        let (result, _dir) = load_file("platform_url = \"ftp://hunter2\"\n");
        let message = result.unwrap_err().to_string();
        assert!(message.contains("`platform_url`"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");

        let dir = TempDir::new("binary");
        let path = dir.0.join("config.toml");
        write_atomic(&path, b"\xff\xfe", 0o644).unwrap();
        let err = load(&explicit(&path), &env(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::NotUtf8 { .. }), "{err}");

        let big = format!("# {}\n", "x".repeat(1024 * 1024));
        let path = dir.write("big.toml", &big, 0o644);
        let err = load(&explicit(&path), &env(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::ReadFile { .. }), "{err}");
    }

    #[test]
    fn a_missing_default_file_is_fine_and_a_missing_explicit_one_is_not() {
        let dir = TempDir::new("default");
        let vars = env(&[("XDG_CONFIG_HOME", &dir.path()), ("HOME", "/nowhere")]);
        if cfg!(target_os = "linux") {
            let (config, warnings) = load(&Overrides::default(), &vars).unwrap();
            assert_eq!(config.config_file, None);
            assert!(warnings.is_empty());

            let path = dir.write(
                "autogpt-local-executor/config.toml",
                "max_concurrent = 8\n",
                0o644,
            );
            let (config, _) = load(&Overrides::default(), &vars).unwrap();
            assert_eq!(config.max_concurrent.get(), 8);
            assert_eq!(config.config_file, Some(path));
        }

        let missing = dir.0.join("absent.toml");
        let err = load(&explicit(&missing), &vars).unwrap_err();
        assert!(matches!(err, ConfigError::MissingFile { .. }), "{err}");
        assert!(err.to_string().contains("absent.toml"));
    }

    #[cfg(unix)]
    #[test]
    fn token_files_must_be_private_small_and_non_empty() {
        let dir = TempDir::new("token");
        let secret = "tok-hunter2-secret";
        let good = dir.write("good", &format!("  {secret}\r\n"), PRIVATE_FILE_MODE);
        assert_eq!(
            read_token_file(&good).unwrap(),
            Token::from_configured(Some(secret)).unwrap()
        );

        let open = dir.write("open", secret, 0o644);
        let empty = dir.write("empty", " \n\t", PRIVATE_FILE_MODE);
        let big = "t".repeat(16 * 1024 + 1);
        let oversize = dir.write("big", &big, PRIVATE_FILE_MODE);
        let two_lines = dir.write("lines", &format!("{secret}\n{secret}\n"), PRIVATE_FILE_MODE);
        let absent = dir.0.join("absent");
        for (path, matches) in [
            (
                &open,
                (|err| {
                    matches!(
                        err,
                        ConfigError::TokenFile(PrivateFileError::TooOpen { .. })
                    )
                }) as fn(&ConfigError) -> bool,
            ),
            (&empty, |err| matches!(err, ConfigError::EmptyToken { .. })),
            (&oversize, |err| {
                matches!(
                    err,
                    ConfigError::TokenFile(PrivateFileError::TooLarge { .. })
                )
            }),
            (&two_lines, |err| matches!(err, ConfigError::Invalid { .. })),
            (&absent, |err| {
                matches!(err, ConfigError::TokenFile(PrivateFileError::Io { .. }))
            }),
        ] {
            let err = read_token_file(path).unwrap_err();
            assert!(matches(&err), "{}: {err}", path.display());
            let text = format!("{err} {err:?}");
            assert!(!text.contains("hunter2"), "{text}");
            assert_eq!(err.to_string().lines().count(), 1);
        }
        let exact = dir.write("exact", &"t".repeat(16 * 1024), PRIVATE_FILE_MODE);
        assert!(read_token_file(&exact).is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn token_sources_follow_the_precedence() {
        let dir = TempDir::new("token-sources");
        let file_token = dir.write("file-token", "from-file", PRIVATE_FILE_MODE);
        let env_file = dir.write("env-token", "from-env-file", PRIVATE_FILE_MODE);
        // Too open, so any attempt to read it would fail the load.
        let shadowed = dir.write("shadowed", "never-read", 0o644);
        let config = dir.write(
            "config.toml",
            &format!("token_file = {:?}\n", shadowed.to_string_lossy()),
            0o644,
        );
        let token = |value: &str| Token::from_configured(Some(value));

        let (loaded, warnings) = load(&explicit(&config), &env(&[])).unwrap();
        assert!(warnings.is_empty());
        assert!(loaded.read_token().is_err());

        let env_file_var = env_file.to_string_lossy().into_owned();
        let vars = env(&[("AUTOGPT_SHIM_TOKEN_FILE", &env_file_var)]);
        let (loaded, _) = load(&explicit(&config), &vars).unwrap();
        assert_eq!(loaded.read_token().unwrap(), token("from-env-file"));

        let vars = env(&[
            ("AUTOGPT_SHIM_TOKEN_FILE", &env_file_var),
            ("AUTOGPT_SHIM_TOKEN", " tok-hunter2 "),
        ]);
        let (loaded, warnings) = load(&explicit(&config), &vars).unwrap();
        assert_eq!(loaded.read_token().unwrap(), token("tok-hunter2"));
        assert_eq!(loaded.token_file, None);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(!format!("{loaded:?} {warnings:?}").contains("hunter2"));

        let flags = Overrides {
            token_file: Some(file_token),
            ..explicit(&config)
        };
        let (loaded, warnings) = load(&flags, &vars).unwrap();
        assert_eq!(loaded.read_token().unwrap(), token("from-file"));
        assert_eq!(loaded.token, None);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[1].contains("--token-file"), "{warnings:?}");

        let vars = env(&[("AUTOGPT_SHIM_TOKEN", "tok\u{7}hunter2")]);
        let message = load(&Overrides::default(), &vars).unwrap_err().to_string();
        assert!(message.starts_with("AUTOGPT_SHIM_TOKEN"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");

        let (loaded, _) = load(&Overrides::default(), &env(&[])).unwrap();
        assert_eq!(loaded.read_token().unwrap(), None);
    }

    #[test]
    fn linux_paths_come_from_xdg_with_a_home_fallback() {
        let xdg = env(&[
            ("HOME", "/home/u"),
            ("XDG_CONFIG_HOME", "/cfg"),
            ("XDG_STATE_HOME", "/state"),
        ]);
        let os = Os::Linux;
        assert_eq!(
            config_path_for(os, &xdg),
            Some(PathBuf::from("/cfg/autogpt-local-executor/config.toml"))
        );
        assert_eq!(
            state_dir_for(os, &xdg),
            Some(PathBuf::from("/state/autogpt-local-executor"))
        );
        assert_eq!(
            default_audit_log_path_for(os, &xdg),
            Some(PathBuf::from("/state/autogpt-local-executor/audit.log"))
        );
        assert_eq!(
            default_allowed_root_for(os, &xdg),
            Some(PathBuf::from("/home/u/autogpt-workspace"))
        );

        // Unset, blank or relative XDG variables fall back to the home directory.
        for (config_home, state_home) in [("", ""), ("relative/cfg", "relative/state")] {
            let vars = env(&[
                ("HOME", "/home/u"),
                ("XDG_CONFIG_HOME", config_home),
                ("XDG_STATE_HOME", state_home),
            ]);
            assert_eq!(
                config_path_for(os, &vars),
                Some(PathBuf::from(
                    "/home/u/.config/autogpt-local-executor/config.toml"
                ))
            );
            assert_eq!(
                state_dir_for(os, &vars),
                Some(PathBuf::from("/home/u/.local/state/autogpt-local-executor"))
            );
        }
        assert_eq!(state_dir_for(os, &env(&[])), None);

        if cfg!(target_os = "linux") {
            assert_eq!(
                audit_key_path(&xdg),
                Some(PathBuf::from("/state/autogpt-local-executor/audit.key"))
            );
            assert_eq!(
                status_path(&xdg),
                Some(PathBuf::from("/state/autogpt-local-executor/status.json"))
            );
            assert_eq!(config_path(&xdg), config_path_for(os, &xdg));
            assert_eq!(
                default_audit_log_path(&xdg),
                default_audit_log_path_for(os, &xdg)
            );
        }
    }

    #[test]
    fn mac_and_windows_paths_follow_the_reference() {
        let mac = env(&[("HOME", "/Users/u"), ("XDG_CONFIG_HOME", "/ignored")]);
        assert_eq!(
            config_path_for(Os::Mac, &mac),
            Some(PathBuf::from(
                "/Users/u/Library/Application Support/autogpt-local-executor/config.toml"
            ))
        );
        assert_eq!(
            default_audit_log_path_for(Os::Mac, &mac),
            Some(PathBuf::from(
                "/Users/u/Library/Logs/autogpt-local-executor/audit.log"
            ))
        );
        assert_eq!(
            default_allowed_root_for(Os::Mac, &mac),
            Some(PathBuf::from("/Users/u/Documents/autogpt-workspace"))
        );

        let windows = env(&[
            ("USERPROFILE", "C:/Users/u"),
            ("HOME", "/c/Users/u"),
            ("APPDATA", "C:/Users/u/AppData/Roaming"),
            ("LOCALAPPDATA", "C:/Users/u/AppData/Local"),
        ]);
        let windows_base = |parts: &[&str]| {
            let mut path = PathBuf::from("C:/Users/u");
            path.extend(parts);
            Some(path)
        };
        let app = "autogpt-local-executor";
        assert_eq!(
            config_path_for(Os::Windows, &windows),
            windows_base(&["AppData", "Roaming", app, "config.toml"])
        );
        assert_eq!(
            default_audit_log_path_for(Os::Windows, &windows),
            windows_base(&["AppData", "Local", app, "logs", "audit.log"])
        );
        assert_eq!(
            default_allowed_root_for(Os::Windows, &windows),
            windows_base(&["autogpt-workspace"])
        );
        // Without APPDATA and LOCALAPPDATA the profile's usual folders are used.
        let profile_only = env(&[("USERPROFILE", "C:/Users/u")]);
        assert_eq!(
            config_path_for(Os::Windows, &profile_only),
            windows_base(&["AppData", "Roaming", app, "config.toml"])
        );
        assert_eq!(
            state_dir_for(Os::Windows, &profile_only),
            windows_base(&["AppData", "Local", app])
        );
    }
}
