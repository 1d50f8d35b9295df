//! Every setting as one [`Field`]: its file key and environment variable, the parser that
//! checks a value from any layer ([`set`]) and its inverse for writing a file ([`file_value`]).
//! A refusal is what the value must be, never the value.

use std::num::{NonZeroU32, NonZeroU64};
use std::path::{Path, PathBuf};
use std::time::Duration;

use local_core::llm::BackendKind as LlmBackend;
use local_core::machine::sandbox::SandboxMode;

use super::{
    ConfigError, ENV_PREFIX, MAX_DISPLAY_NAME_CHARS, MAX_MACHINE_ID_CHARS, Origin, ShimConfig,
};
use crate::link::{REDIRECT_PORT_COUNT, ws_base};
use crate::protocol::is_valid_session_id;

/// Every setting of the file and the environment, in the reference table's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
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
    ShellSandbox,
}

impl Field {
    pub(super) const ALL: [Self; 31] = [
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
        Self::ShellSandbox,
    ];

    pub(super) const fn name(self) -> &'static str {
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
            Self::ShellSandbox => "shell_sandbox",
        }
    }

    pub(super) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|field| field.name() == name)
    }

    pub(super) fn env_var(self) -> String {
        format!("{ENV_PREFIX}{}", self.name().to_ascii_uppercase())
    }
}

/// A value as a layer supplies it: typed in the file, text in the environment and on the
/// command line.
#[derive(Debug, Clone, Copy)]
pub(super) enum Raw<'a> {
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
pub(super) const EXPECT_PATH: &str = "a non-empty path";
const EXPECT_BOOL: &str = "true or false";
const EXPECT_BOOL_TEXT: &str = "one of true/false, 1/0, yes/no, on/off";
const EXPECT_POSITIVE_U32: &str = "a whole number from 1 to 4294967295";
const EXPECT_POSITIVE_U64: &str = "a whole number from 1 to 18446744073709551615";
const EXPECT_SECONDS: &str = "a non-negative number of seconds";
pub(super) const EXPECT_TOKEN: &str = "one line of UTF-8 text without control characters";

/// The refusal of `raw` as `field` from `origin`, which must be `expected`: a platform URL
/// without a scheme (`127.0.0.1:8770`) gets the scheme it most likely lacks, since that is
/// the commonest slip and "must be a URL" does not say which part is missing.
pub(super) fn refusal(
    field: Field,
    raw: Raw<'_>,
    origin: Origin,
    expected: &'static str,
) -> ConfigError {
    let url = matches!(
        field,
        Field::PlatformUrl | Field::PlatformWsUrl | Field::PlatformOauthUrl
    );
    let text = match raw {
        Raw::Text(value) => Some(value),
        Raw::Toml(toml::Value::String(value)) => Some(value.as_str()),
        Raw::Toml(_) => None,
    };
    match text {
        Some(value) if url && !value.trim().is_empty() && !value.contains("://") => {
            ConfigError::NoScheme {
                origin,
                hint: scheme_hint(value),
            }
        }
        _ => ConfigError::Invalid { origin, expected },
    }
}

/// What to put in front of a URL without a scheme: `ws://` for this machine, `wss://` for
/// any other. The value is repeated only when it is a plain `host[:port][/path]`, never
/// when it could hold credentials (`user:password@host`) or a query.
fn scheme_hint(value: &str) -> String {
    let value = value.trim();
    let plain = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ".-_:[]/".contains(c));
    let host = value.split('/').next().unwrap_or_default();
    let host = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None if host.matches(':').count() == 1 => host.split(':').next().unwrap_or_default(),
        None => host,
    };
    let local = local_core::loopback::is_loopback_host(host);
    let scheme = if local { "ws" } else { "wss" };
    let why = "ws:// for a platform on this machine, wss:// for one across the network";
    if plain {
        format!("did you mean {scheme}://{value}? ({why})")
    } else {
        format!("put {scheme}:// in front of it ({why})")
    }
}

/// Parses `raw` as `field` into `config`; the error is what the value must be.
pub(super) fn set(config: &mut ShimConfig, field: Field, raw: Raw<'_>) -> Result<(), &'static str> {
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
                .filter(|port| port.checked_add(REDIRECT_PORT_COUNT - 1).is_some())
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
        Field::ShellSandbox => {
            config.shell_sandbox = SandboxMode::from_name(text(raw, EXPECT_SHELL_SANDBOX)?)
                .ok_or(EXPECT_SHELL_SANDBOX)?;
        }
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
const EXPECT_SHELL_SANDBOX: &str = "`off`, `workspace` or `strict`";

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

pub(super) fn display_name(value: &str) -> Option<String> {
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

/// `field`'s value in `config` as the file writes it; the inverse of [`set`] for a file.
pub(super) fn file_value(
    config: &ShimConfig,
    field: Field,
    cwd: &Path,
) -> Result<toml::Value, &'static str> {
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
        Field::ShellSandbox => text(Some(config.shell_sandbox.as_str())),
        Field::LocalLlmBackend => text(Some(match config.local_llm_backend {
            LlmBackend::Ollama => "ollama",
            LlmBackend::OpenAiCompatible => "openai-compatible",
        })),
    })
}
