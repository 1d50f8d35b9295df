//! Start-up configuration from the original's environment variables, validated once.

use std::{net::IpAddr, path::PathBuf};

use local_core::{
    env_names::{
        ALLOW_REMOTE_MODEL, DIAGNOSTIC_LOG, ENABLE_AUDIT, GUIDANCE_PROVIDER, LOCAL_TOKEN, MODE,
        MODEL_API_KEY, MODEL_AUTH_HEADER, MODEL_NAME, MODEL_URL,
    },
    guide::guidance::openai::{InvalidModelConfig, ModelConfig, ModelSettings},
    llm::ApiKey,
    loopback::loopback_ip,
    secret::LocalToken,
};

/// Why the service refuses to start; each message is one clear line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `MSGUIDE_MODE` is anything but `demo`.
    #[error("Only local MSGUIDE_MODE=demo is supported")]
    Mode,
    /// `MSGUIDE_GUIDANCE_PROVIDER` names no provider. The reference's sentence comes first.
    #[error(
        "Unknown guidance provider: set MSGUIDE_GUIDANCE_PROVIDER to demo (the default) or openai-compatible"
    )]
    UnknownProvider,
    /// `openai-compatible` was chosen but its settings are missing, malformed or not approved:
    /// the reference's sentence, then the variable that is missing, or the ones to check.
    /// The message names no value, so the API key never reaches the terminal.
    #[error("{}: {}", InvalidModelConfig, match .0 {
        Some(variable) => format!("{variable} is not set"),
        None => "check MSGUIDE_MODEL_URL, MSGUIDE_MODEL_NAME, MSGUIDE_MODEL_API_KEY, MSGUIDE_ALLOW_REMOTE_MODEL and MSGUIDE_MODEL_AUTH_HEADER (docs/running.md)".to_owned(),
    })]
    Model(Option<&'static str>),
    /// The provider exists in the reference but is not part of this build yet.
    #[error(
        "Guidance provider {0} is not available in this build; use MSGUIDE_GUIDANCE_PROVIDER=demo"
    )]
    UnavailableProvider(&'static str),
    /// `--host` is not a loopback address.
    #[error(
        "Refusing to listen on {0}: msguide-api binds loopback addresses only (127.0.0.1, ::1 or localhost)"
    )]
    NonLoopbackHost(String),
}

/// Which provider answers guidance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderChoice {
    /// The deterministic demo.
    Demo,
    /// A model behind an OpenAI-compatible chat-completions URL.
    OpenAiCompatible(ModelConfig),
}

/// The validated configuration.
#[derive(Debug)]
pub struct Config {
    /// The bearer token, when configured and well-formed; otherwise protected routes answer 503.
    pub token: Option<LocalToken>,
    /// Whether the audit ring records.
    pub audit_enabled: bool,
    /// Where diagnostics go.
    pub diagnostic_log: Option<PathBuf>,
    /// Who answers guidance.
    pub provider: ProviderChoice,
}

impl Config {
    /// Reads the configuration through `var`, so tests need not touch the process environment.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        if var(MODE).is_some_and(|mode| mode != "demo") {
            return Err(ConfigError::Mode);
        }
        let provider = match var(GUIDANCE_PROVIDER).as_deref() {
            None | Some("demo") => ProviderChoice::Demo,
            Some("openai-compatible") => {
                // The variables without a default, named when absent; the core judges the rest.
                let missing = [MODEL_URL, MODEL_NAME]
                    .into_iter()
                    .find(|name| var(name).is_none());
                ProviderChoice::OpenAiCompatible(
                    ModelConfig::from_settings(ModelSettings {
                        allow_remote: var(ALLOW_REMOTE_MODEL),
                        url: var(MODEL_URL),
                        name: var(MODEL_NAME),
                        api_key: var(MODEL_API_KEY).map(ApiKey::new),
                        auth_header: var(MODEL_AUTH_HEADER),
                    })
                    .map_err(|InvalidModelConfig| ConfigError::Model(missing))?,
                )
            }
            Some("copilot-sdk") => return Err(ConfigError::UnavailableProvider("copilot-sdk")),
            Some(_) => return Err(ConfigError::UnknownProvider),
        };
        Ok(Self {
            token: LocalToken::from_configured(var(LOCAL_TOKEN).as_deref()),
            audit_enabled: var(ENABLE_AUDIT).is_some_and(|v| v.to_lowercase() == "true"),
            diagnostic_log: var(DIAGNOSTIC_LOG)
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
            provider,
        })
    }
}

/// The address to bind, refusing anything that is not loopback (`localhost` binds 127.0.0.1).
pub fn loopback_host(host: &str) -> Result<IpAddr, ConfigError> {
    loopback_ip(host).ok_or_else(|| ConfigError::NonLoopbackHost(host.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_vars(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn mode_and_provider_refusals() {
        assert!(config(&[]).is_ok());
        assert!(config(&[("MSGUIDE_MODE", "demo")]).is_ok());
        assert_eq!(
            config(&[("MSGUIDE_MODE", "production")]).unwrap_err(),
            ConfigError::Mode
        );
        assert_eq!(
            config(&[("MSGUIDE_MODE", "")]).unwrap_err(),
            ConfigError::Mode
        );
        assert_eq!(
            config(&[("MSGUIDE_GUIDANCE_PROVIDER", "model")]).unwrap_err(),
            ConfigError::UnknownProvider
        );
        assert!(matches!(
            config(&[("MSGUIDE_GUIDANCE_PROVIDER", "copilot-sdk")]),
            Err(ConfigError::UnavailableProvider(_))
        ));
    }

    const KEY: &str = "sk-SECRET-test-key";

    fn model(extra: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut vars = vec![
            ("MSGUIDE_GUIDANCE_PROVIDER", "openai-compatible"),
            ("MSGUIDE_ALLOW_REMOTE_MODEL", "true"),
            (
                "MSGUIDE_MODEL_URL",
                "https://models.example.com/v1/chat/completions",
            ),
            ("MSGUIDE_MODEL_NAME", "gpt-test"),
            ("MSGUIDE_MODEL_API_KEY", KEY),
        ];
        for (name, value) in extra {
            vars.retain(|(n, _)| n != name);
            vars.push((name, value));
        }
        config(&vars)
    }

    #[test]
    fn openai_compatible_is_validated() {
        let c = model(&[]).unwrap();
        let ProviderChoice::OpenAiCompatible(model_config) = &c.provider else {
            panic!("not the model provider");
        };
        assert_eq!(
            model_config.url(),
            "https://models.example.com/v1/chat/completions"
        );
        assert_eq!(model_config.name(), "gpt-test");
        assert!(!format!("{c:?}").contains(KEY), "the key never prints");

        // Each variable is read: breaking any one refuses to start.
        for broken in [
            ("MSGUIDE_ALLOW_REMOTE_MODEL", "yes"),
            ("MSGUIDE_MODEL_URL", "http://models.example.com/v1"),
            ("MSGUIDE_MODEL_NAME", " "),
            ("MSGUIDE_MODEL_API_KEY", "has space"),
            ("MSGUIDE_MODEL_AUTH_HEADER", "basic"),
        ] {
            let error = model(&[broken]).unwrap_err();
            assert_eq!(error, ConfigError::Model(None), "{broken:?}");
            assert!(
                error.to_string().starts_with(
                    "Invalid or unapproved model configuration: check MSGUIDE_MODEL_URL"
                ),
                "{error}"
            );
            assert!(!error.to_string().contains(KEY));
        }
        let no_key = config(&[
            ("MSGUIDE_GUIDANCE_PROVIDER", "openai-compatible"),
            ("MSGUIDE_ALLOW_REMOTE_MODEL", "true"),
            ("MSGUIDE_MODEL_URL", "https://models.example.com/v1"),
            ("MSGUIDE_MODEL_NAME", "gpt-test"),
        ]);
        assert_eq!(no_key.unwrap_err(), ConfigError::Model(None));
        let bare = config(&[("MSGUIDE_GUIDANCE_PROVIDER", "openai-compatible")]).unwrap_err();
        assert_eq!(
            bare,
            ConfigError::Model(Some("MSGUIDE_MODEL_URL")),
            "no defaults for URL, name or key"
        );
        assert_eq!(
            bare.to_string(),
            "Invalid or unapproved model configuration: MSGUIDE_MODEL_URL is not set"
        );
        assert_eq!(
            config(&[
                ("MSGUIDE_GUIDANCE_PROVIDER", "openai-compatible"),
                (
                    "MSGUIDE_MODEL_URL",
                    "http://127.0.0.1:8080/v1/chat/completions"
                ),
            ])
            .unwrap_err(),
            ConfigError::Model(Some("MSGUIDE_MODEL_NAME"))
        );

        // A model on this machine needs neither the approval flag nor a key.
        let local = config(&[
            ("MSGUIDE_GUIDANCE_PROVIDER", "openai-compatible"),
            (
                "MSGUIDE_MODEL_URL",
                "http://127.0.0.1:8080/v1/chat/completions",
            ),
            ("MSGUIDE_MODEL_NAME", "smollm2"),
        ])
        .unwrap();
        let ProviderChoice::OpenAiCompatible(local) = local.provider else {
            panic!("not the model provider");
        };
        assert!(local.api_key().is_none());
    }

    #[test]
    fn token_audit_and_log() {
        let c = config(&[
            ("MSGUIDE_LOCAL_TOKEN", "bad token"),
            ("MSGUIDE_ENABLE_AUDIT", "TRUE"),
        ])
        .unwrap();
        assert!(c.token.is_none());
        assert!(c.audit_enabled);
        assert!(
            !config(&[("MSGUIDE_ENABLE_AUDIT", "1")])
                .unwrap()
                .audit_enabled
        );
        assert!(
            config(&[("MSGUIDE_DIAGNOSTIC_LOG", "")])
                .unwrap()
                .diagnostic_log
                .is_none()
        );
    }

    #[test]
    fn only_loopback_binds() {
        assert!(loopback_host("127.0.0.1").is_ok());
        assert!(loopback_host("127.1.2.3").is_ok());
        assert!(loopback_host("::1").is_ok());
        assert!(loopback_host("[::1]").is_ok());
        assert!(loopback_host("localhost").is_ok());
        assert!(loopback_host("0.0.0.0").is_err());
        assert!(loopback_host("192.168.1.2").is_err());
        assert!(loopback_host("example.com").is_err());
    }
}
