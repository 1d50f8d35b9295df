//! Checking the provider's settings: a remote `https` model only with approval and a key, a
//! loopback one without; URL, model name and key bounded; nothing of a refused value kept.

use std::net::Ipv6Addr;

use super::{MAX_API_KEY_BYTES, MAX_MODEL_NAME_CHARS, MAX_URL_CHARS};
use crate::llm::{ApiKey, AuthHeader};
use crate::loopback::is_loopback_host;

/// The refusal for any invalid or unapproved setting; it names no value, so the key cannot
/// leak through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("Invalid or unapproved model configuration")]
pub struct InvalidModelConfig;

/// The provider's settings as the environment gave them, unvalidated.
///
/// The edge reads the variables (`MSGUIDE_ALLOW_REMOTE_MODEL`, `MSGUIDE_MODEL_URL`,
/// `MSGUIDE_MODEL_NAME`, `MSGUIDE_MODEL_API_KEY`, `MSGUIDE_MODEL_AUTH_HEADER`); `None` means
/// unset. The key is an [`ApiKey`] already so that even a rejected one never prints.
#[derive(Debug, Clone, Default)]
pub struct ModelSettings {
    /// Must lower-case to `true` for a remote model.
    pub allow_remote: Option<String>,
    /// The exact chat-completions URL.
    pub url: Option<String>,
    /// The `model` field of every request.
    pub name: Option<String>,
    /// Required for a remote model, optional for a loopback one.
    pub api_key: Option<ApiKey>,
    /// `bearer` (the default) or `api-key`.
    pub auth_header: Option<String>,
}

/// A validated, approved model configuration; only [`ModelConfig::from_settings`] makes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    pub(super) url: String,
    pub(super) name: String,
    pub(super) api_key: Option<ApiKey>,
    pub(super) auth_header: AuthHeader,
}

impl ModelConfig {
    /// Validates the settings by the reference's start-up rules (see the module docs for the
    /// loopback extension).
    ///
    /// # Errors
    /// [`InvalidModelConfig`] when any rule fails; the service must not start.
    pub fn from_settings(settings: ModelSettings) -> Result<Self, InvalidModelConfig> {
        let ModelSettings {
            allow_remote,
            url,
            name,
            api_key,
            auth_header,
        } = settings;
        let url = url.ok_or(InvalidModelConfig)?;
        let loopback = checked_url(&url).ok_or(InvalidModelConfig)?;
        // Sending screenshots off this machine needs the user's explicit approval.
        let approved = loopback || allow_remote.is_some_and(|v| v.to_lowercase() == "true");
        if !approved {
            return Err(InvalidModelConfig);
        }
        let name = name
            .filter(|n| is_model_name(n))
            .ok_or(InvalidModelConfig)?;
        let api_key = match api_key {
            Some(key) if is_api_key(key.expose()) => Some(key),
            None if loopback => None,
            Some(_) | None => return Err(InvalidModelConfig),
        };
        let auth_header = match auth_header.as_deref() {
            None | Some("bearer") => AuthHeader::Bearer,
            Some("api-key") => AuthHeader::ApiKey,
            Some(_) => return Err(InvalidModelConfig),
        };
        Ok(Self {
            url,
            name,
            api_key,
            auth_header,
        })
    }

    /// The exact URL every request is posted to.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The model name sent as `model`.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The API key, if any.
    #[must_use]
    pub const fn api_key(&self) -> Option<&ApiKey> {
        self.api_key.as_ref()
    }

    /// How the key is sent.
    #[must_use]
    pub const fn auth_header(&self) -> AuthHeader {
        self.auth_header
    }
}

fn is_model_name(name: &str) -> bool {
    !name.trim().is_empty()
        && name.chars().count() <= MAX_MODEL_NAME_CHARS
        && !name.chars().any(char::is_control)
}

fn is_api_key(key: &str) -> bool {
    (1..=MAX_API_KEY_BYTES).contains(&key.len()) && key.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// Checks the model URL the way the reference splits it (scheme, `//authority`, path), and
/// returns whether its host is loopback; `None` when the URL is refused.
///
/// Anything the client's own URL parser might read differently (backslashes, fragments,
/// whitespace, userinfo, odd host characters) is refused outright, so the host judged here is
/// the host the request goes to.
fn checked_url(url: &str) -> Option<bool> {
    let length = url.chars().count();
    if length == 0 || length > MAX_URL_CHARS {
        return None;
    }
    if url
        .chars()
        .any(|c| c <= ' ' || c == '\u{7f}' || c == '\\' || c == '#')
    {
        return None;
    }
    let (scheme, rest) = url.split_once(':')?;
    let rest = rest.strip_prefix("//")?;
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let path = tail.split_once('?').map_or(tail, |(path, _)| path);
    if path.is_empty() || path == "/" || authority.contains('@') {
        return None;
    }
    let (host, port, loopback) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (literal, after) = bracketed.split_once(']')?;
        literal.parse::<Ipv6Addr>().ok()?;
        let port = if after.is_empty() {
            None
        } else {
            Some(after.strip_prefix(':')?)
        };
        (literal, port, is_loopback_host(literal))
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        // Non-ASCII stays allowed for internationalised names; ASCII punctuation a URL parser
        // could treat as structure (`%`, `[`, `<`, `^`, …) is not a host.
        let host_chars = host
            .chars()
            .all(|c| !c.is_ascii() || c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        if !host_chars {
            return None;
        }
        (host, port, is_loopback_host(host))
    };
    if host.is_empty() || port.is_some_and(|p| !is_port(p)) {
        return None;
    }
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Some(loopback),
        // Plain http never leaves this machine.
        "http" if loopback => Some(true),
        _ => None,
    }
}

/// `scheme://authority` of a URL [`checked_url`] accepted.
pub(super) fn origin(url: &str) -> &str {
    let authority_start = url.find("://").map_or(0, |at| at + 3);
    let authority_end = url[authority_start..]
        .find(['/', '?'])
        .map_or(url.len(), |at| authority_start + at);
    &url[..authority_end]
}

fn is_port(port: &str) -> bool {
    !port.is_empty()
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u32>().is_ok_and(|p| (1..=65_535).contains(&p))
}
