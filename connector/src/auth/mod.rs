//! OAuth for the connector (shim-reference-behaviour.md section 14): the endpoints derived from
//! the configuration, the `auth` login (authorization code with PKCE and a loopback callback),
//! refresh and revocation, where the tokens and the audit key are kept (the OS keyring when
//! there is one, else 0600 files in the state directory), and the refresh-once rule of the
//! WebSocket upgrade shared by every connection of the machine.
//!
//! # Layout
//!
//! - [`pkce`]: the verifier, challenge and state, from the OS random source.
//! - [`callback`]: the loopback server that receives the browser's redirect, once.
//! - [`oauth`]: the token endpoint (code exchange, refresh) and the revocation endpoint.
//! - [`keyring`]: the OS keyring; on Linux the Secret Service over the session bus.
//! - [`store`]: the stored tokens and the audit key, in the keyring or in private files.
//! - [`expiry`]: when a JWT access token is due for a refresh, from its unverified `exp`.
//! - [`credentials`]: the tokens one daemon dials with, refreshed at most once per generation:
//!   shortly before a JWT's `exp`, else on a 401.
//!
//! Nothing here logs or audits a token, a code, a verifier or a state: only which store was
//! used and whether an exchange worked.

pub mod callback;
pub mod credentials;
pub mod expiry;
pub mod keyring;
pub mod oauth;
pub mod pkce;
pub mod store;

use local_core::secret::Redacted;

use crate::config::ShimConfig;
use crate::link::{ConnectError, Token, http_base};

pub use credentials::Credentials;

/// The keyring service name of the reference's tokens and audit key.
pub const KEYRING_SERVICE: &str = "autogpt-local-executor";
/// The scope the reference asks for.
pub const SCOPE: &str = "USE_TOOLS";

/// A secret string (access token, refresh token) whose `Debug` never shows it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Secret(Redacted<String>);

impl Secret {
    /// Wraps a secret; blank (after trimming) means none.
    pub fn new(value: &str) -> Option<Self> {
        let value = value.trim();
        (!value.is_empty() && !value.chars().any(char::is_control))
            .then(|| Self(Redacted::new(value.to_owned())))
    }

    /// The secret itself, for the one place that must send or store it.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }

    /// The bearer token the WebSocket upgrade sends.
    pub fn bearer(&self) -> Option<Token> {
        Token::from_configured(Some(self.expose()))
    }
}

/// The tokens a login or a refresh yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokens {
    /// The bearer for the WebSocket upgrade.
    pub access: Secret,
    /// What a refresh spends; `None` when the server issued none.
    pub refresh: Option<Secret>,
}

/// Where OAuth requests go, derived as the reference does: the authorize base is
/// `platform_oauth_url` or `<http base>/auth`; token and revocation always use the http base
/// of `platform_url` (`ws`/`wss` become `http`/`https`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// `<authorize base>/authorize`.
    pub authorize: String,
    /// `<http base>/api/oauth/token`.
    pub token: String,
    /// `<http base>/api/oauth/revoke`.
    pub revoke: String,
    /// The public client id.
    pub client_id: String,
    /// The first callback port tried.
    pub redirect_port: u16,
}

impl Endpoints {
    /// The endpoints of `config`.
    ///
    /// # Errors
    /// [`ConnectError::InvalidRequest`] for a platform URL without a usable scheme or host.
    pub fn from_config(config: &ShimConfig) -> Result<Self, ConnectError> {
        let base = http_base(&config.platform_url)?;
        let authorize_base = match &config.platform_oauth_url {
            Some(url) => http_base(url)?,
            None => format!("{base}/auth"),
        };
        Ok(Self {
            authorize: format!("{authorize_base}/authorize"),
            token: format!("{base}/api/oauth/token"),
            revoke: format!("{base}/api/oauth/revoke"),
            client_id: config.oauth_client_id.clone(),
            redirect_port: config.oauth_redirect_port,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(platform: &str, oauth: Option<&str>) -> ShimConfig {
        let mut config = ShimConfig::defaults(&|_: &str| None);
        config.platform_url = platform.to_owned();
        config.platform_oauth_url = oauth.map(str::to_owned);
        config
    }

    #[test]
    fn endpoints_follow_the_reference_derivation() {
        let endpoints =
            Endpoints::from_config(&config("wss://platform.autogpt.net", None)).unwrap();
        assert_eq!(
            endpoints,
            Endpoints {
                authorize: "https://platform.autogpt.net/auth/authorize".to_owned(),
                token: "https://platform.autogpt.net/api/oauth/token".to_owned(),
                revoke: "https://platform.autogpt.net/api/oauth/revoke".to_owned(),
                client_id: "autogpt-local-executor".to_owned(),
                redirect_port: 41899,
            }
        );
        let endpoints =
            Endpoints::from_config(&config("ws://127.0.0.1:9/", Some("https://id.example/o/")))
                .unwrap();
        assert_eq!(endpoints.authorize, "https://id.example/o/authorize");
        // Token and revocation ignore the authorize override, as in the reference.
        assert_eq!(endpoints.token, "http://127.0.0.1:9/api/oauth/token");
        assert_eq!(endpoints.revoke, "http://127.0.0.1:9/api/oauth/revoke");
        assert_eq!(http_base("HTTPS://x.example").unwrap(), "https://x.example");
        assert!(http_base("ftp://x").is_err());
    }

    #[test]
    fn secrets_are_redacted_and_blank_means_none() {
        let secret = Secret::new(" tok-123 ").unwrap();
        assert_eq!(secret.expose(), "tok-123");
        assert!(!format!("{secret:?}").contains("tok-123"));
        assert_eq!(Secret::new("  "), None);
        assert_eq!(Secret::new("a\nb"), None);
        let tokens = Tokens {
            access: secret,
            refresh: Secret::new("ref-456"),
        };
        let shown = format!("{tokens:?}");
        assert!(!shown.contains("tok-123") && !shown.contains("ref-456"));
    }
}
