//! The config file layer: read it (capped, UTF-8), parse it as TOML and apply its keys,
//! warning about unknown and unused keys and about a `token` key; syntax errors point at the
//! line and column.

use std::path::Path;

use local_core::machine::own_files;

use super::fields::{Field, Raw, refusal, set};
use super::{ConfigError, MAX_CONFIG_FILE_BYTES, McpSection, Origin, ShimConfig};

/// Keys of the reference's file that this build accepts and does not use; they get their own
/// warning, so a drop-in file does not look wrong.
const UNUSED_REFERENCE_KEYS: &[&str] = &[
    "recording_buffer_dir",
    "recording_default_interpretation_route",
    "recording_channels",
    "recording_retention_limit",
];

pub(super) fn read_config_file(path: &Path, explicit: bool) -> Result<Option<String>, ConfigError> {
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

/// Applies the file's keys to `config`, each refused value added to `problems` (a file that
/// is not TOML is one problem, and changes nothing).
pub(super) fn apply_file(
    config: &mut ShimConfig,
    path: &Path,
    text: &str,
    warnings: &mut Vec<String>,
    problems: &mut Vec<ConfigError>,
) {
    let table: toml::Table = match text.parse() {
        Ok(table) => table,
        Err(err) => {
            problems.push(syntax_error(path, text, &err));
            return;
        }
    };
    let mut unknown = Vec::new();
    let mut unused = Vec::new();
    for (key, value) in &table {
        if let Some(field) = Field::from_name(key) {
            if let Err(expected) = set(config, field, Raw::Toml(value)) {
                let origin = Origin::File {
                    path: path.to_path_buf(),
                    key: field.name(),
                };
                problems.push(refusal(field, Raw::Toml(value), origin, expected));
            }
        } else if key == "mcp" {
            // The MCP face's own section; serde names no value in its refusal here.
            match value.clone().try_into::<McpSection>() {
                Ok(section) => config.mcp = section,
                Err(_) => problems.push(ConfigError::McpSection {
                    path: path.to_path_buf(),
                }),
            }
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
