//! The config file the autostart entry names: the flags and environment of `install` turned
//! into settings, an existing file kept unless `--force`, and a check that the service could
//! start with the result.

use std::io::Write;
use std::path::Path;

use local_core::machine::own_files;

use super::ServiceError;
use crate::config::{self, Env, ShimConfig};
use crate::preflight;

/// What `install` does with the config file the entry starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigPlan {
    /// The file exists and already holds every setting given.
    Keep,
    /// Write `text`: a new file, or with `--force` an existing one updated.
    Write {
        /// The whole file.
        text: String,
        /// The keys set from the flags and environment.
        keys: Vec<String>,
        /// Whether a file was there before.
        updated: bool,
    },
}

/// The first line of a config file `install` creates.
const CONFIG_HEADER: &str = "# autogpt-shim configuration, written by `autogpt-shim install` from its flags and\n\
     # AUTOGPT_SHIM_* variables. Keys and meanings: docs/connector.md, \"Configuration\".\n";

/// Decides what the config file at `path` (holding `existing`, if any) must become so a
/// service started with `--config path start` gets `settings`, and checks that it could start
/// with it ([`check_startable`]); returns the plan and the advice to print. `env` is this
/// shell's environment; the service is assumed to see none of its `AUTOGPT_SHIM_*`.
///
/// An existing file is kept when it already means the same; changing it needs `force`, and
/// then only the given keys change (comments are not kept: the file is rewritten from its
/// parsed form).
///
/// # Errors
/// [`ServiceError::Config`] with one sentence naming what is missing or wrong.
pub fn plan_config(
    path: &Path,
    existing: Option<&str>,
    settings: &toml::Table,
    force: bool,
    env: &impl Env,
) -> Result<(ConfigPlan, Vec<String>), ServiceError> {
    let service_env = |name: &str| {
        if name.starts_with(config::ENV_PREFIX) {
            None
        } else {
            env.var(name)
        }
    };
    let parse = |text: &str| {
        config::parse_file(path, text, &service_env)
            .map(|(config, _)| config)
            .map_err(|err| ServiceError::Config(err.to_string()))
    };
    let (plan, config) = match existing {
        None => {
            let body = toml::to_string(settings).map_err(|err| config_text_error(&err))?;
            let text = format!("{CONFIG_HEADER}{body}");
            let config = parse(&text)?;
            let keys = settings.keys().cloned().collect();
            (
                ConfigPlan::Write {
                    text,
                    keys,
                    updated: false,
                },
                config,
            )
        }
        Some(current_text) => {
            let current = parse(current_text)?;
            let mut table: toml::Table = current_text.parse().map_err(|_| {
                ServiceError::Config(format!(
                    "the config file {} is not valid TOML: fix it, or replace it with --force",
                    path.display()
                ))
            })?;
            let changed: Vec<String> = settings
                .iter()
                .filter(|(key, value)| table.get(key.as_str()) != Some(value))
                .map(|(key, _)| key.clone())
                .collect();
            table.extend(settings.clone());
            let text = toml::to_string(&table).map_err(|err| config_text_error(&err))?;
            let config = parse(&text)?;
            if config == current {
                (ConfigPlan::Keep, current)
            } else if !force {
                return Err(ServiceError::Config(format!(
                    "{} already sets {} differently; pass --force to change {} (its other settings are kept), or edit the file",
                    path.display(),
                    changed.join(", "),
                    if changed.len() == 1 { "it" } else { "them" }
                )));
            } else {
                (
                    ConfigPlan::Write {
                        text,
                        keys: changed,
                        updated: true,
                    },
                    config,
                )
            }
        }
    };
    if config.token_file.is_none()
        && env
            .var(config::TOKEN_ENV)
            .is_some_and(|t| !t.trim().is_empty())
    {
        return Err(ServiceError::Config(format!(
            "the token is in {}, which the service will not see and the config file never holds; put it in a file only you can read (chmod 600) and pass --token-file FILE",
            config::TOKEN_ENV
        )));
    }
    let notes = check_startable(&config, &service_env)?;
    Ok((plan, notes))
}

/// What `start` would refuse in `config`, checked as `start` and `doctor` check it (the one
/// list of [`crate::preflight`]) in the service's environment `env`: every failure, one line
/// each, or the warnings to pass on as notes (a token only `auth` stores, shell enabled).
///
/// # Errors
/// [`ServiceError::Config`] listing every failed check with what to pass or do.
pub fn check_startable(config: &ShimConfig, env: &impl Env) -> Result<Vec<String>, ServiceError> {
    let inputs = preflight::Inputs::gather(
        config::Loaded {
            config: config.clone(),
            warnings: Vec::new(),
            problems: Vec::new(),
        },
        // The entry starts `start` with the default level.
        "INFO",
        env,
    );
    let findings = preflight::checks(&inputs);
    let refused: Vec<String> = preflight::blocking(&findings)
        .map(preflight::Finding::sentence)
        .collect();
    if !refused.is_empty() {
        return Err(ServiceError::Config(refused.join("\n")));
    }
    Ok(findings
        .iter()
        .filter(|finding| finding.level == preflight::Level::Warn)
        .map(preflight::Finding::sentence)
        .collect())
}

/// Writes the planned config file atomically with mode 0600 (it names the token file and may
/// hold a URL with credentials) and says what it wrote; prints that a kept file is used.
///
/// # Errors
/// The file cannot be written, or the report cannot be printed.
pub fn write_config(
    path: &Path,
    plan: &ConfigPlan,
    out: &mut dyn Write,
) -> Result<(), ServiceError> {
    match plan {
        ConfigPlan::Keep => {
            writeln!(out, "using the existing configuration {}", path.display())?;
        }
        ConfigPlan::Write {
            text,
            keys,
            updated,
        } => {
            own_files::write_atomic(path, text.as_bytes(), own_files::PRIVATE_FILE_MODE).map_err(
                |source| ServiceError::Io {
                    path: path.to_path_buf(),
                    source,
                },
            )?;
            let verb = if *updated { "updated" } else { "wrote" };
            let what = if keys.is_empty() {
                "no settings, so the defaults apply".to_owned()
            } else {
                keys.join(", ")
            };
            writeln!(
                out,
                "{verb} the configuration {} (mode 0600): {what}",
                path.display()
            )?;
        }
    }
    Ok(())
}

fn config_text_error(err: &toml::ser::Error) -> ServiceError {
    ServiceError::Config(format!("cannot write the settings as TOML: {err}"))
}
