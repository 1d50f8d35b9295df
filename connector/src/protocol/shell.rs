//! EXECUTE_COMMAND (capability `shell`, only with the local opt-in) and COMMAND_RESULT.

use std::collections::BTreeMap;

use local_core::machine::exec::ShellKind;
use serde::{Deserialize, Serialize};

use super::messages::{Invalid, Payload};

/// The `shell` field as its wire name: core's [`ShellKind`] is the one shell enum, and its
/// names are the contract's.
mod shell_name {
    use local_core::machine::exec::ShellKind;
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub(super) fn serialize<S: Serializer>(shell: &ShellKind, out: S) -> Result<S::Ok, S::Error> {
        out.serialize_str(shell.as_str())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<ShellKind, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(input)?;
        ShellKind::from_name(&name)
            .ok_or_else(|| D::Error::unknown_variant(&name, &ShellKind::NAMES))
    }
}

/// `EXECUTE_COMMAND` (platform → shim): exactly one of `command` and `argv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecuteCommandPayload {
    /// Command line for the selected shell.
    #[serde(default)]
    pub command: Option<String>,
    /// Program and arguments, run without a shell.
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// Shell for `command`; ignored when `argv` is set.
    #[serde(default, with = "shell_name")]
    pub shell: ShellKind,
    /// Working directory (jail-checked); null means the allowed root.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Seconds; null uses the negotiated ceiling.
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
    /// Variables merged over the safe baseline.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

impl Payload for ExecuteCommandPayload {
    fn validate(&self) -> Result<(), Invalid> {
        match (&self.command, &self.argv) {
            (Some(_), Some(_)) | (None, None) => {
                return Err("exactly one of command and argv must be set"
                    .to_owned()
                    .into());
            }
            (None, Some(argv)) if argv.is_empty() => {
                return Err(Invalid::at("argv", "argv must not be empty"));
            }
            _ => {}
        }
        match self.timeout_seconds {
            Some(t) if !(t.is_finite() && t > 0.0) => Err(Invalid::at(
                "timeout_seconds",
                "timeout_seconds must be positive",
            )),
            _ => Ok(()),
        }
    }
}

/// `COMMAND_RESULT` (shim → platform); a non-zero exit is a normal result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommandResultPayload {
    /// Retained stdout.
    pub stdout: String,
    /// Retained stderr (plus the truncation marker when truncated).
    pub stderr: String,
    /// Exit status; -1 when unknown.
    pub exit_code: i64,
    /// The timeout fired.
    pub timed_out: bool,
    /// Wall-clock seconds.
    pub duration_seconds: f64,
    /// Output exceeded the shared byte budget.
    pub output_truncated: bool,
}

impl Payload for CommandResultPayload {}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<ExecuteCommandPayload, String> {
        let payload: ExecuteCommandPayload =
            serde_json::from_str(text).map_err(|e| e.to_string())?;
        payload
            .validate()
            .map(|()| payload)
            .map_err(|invalid| invalid.reason)
    }

    #[test]
    fn exactly_one_of_command_and_argv() {
        let argv = check(r#"{"argv": ["ls", "-la"]}"#).unwrap();
        assert_eq!(argv.shell, ShellKind::Auto);
        assert!(check(r#"{"command": "ls", "argv": null}"#).is_ok());
        assert!(check(r#"{"command": "ls", "argv": ["ls"]}"#).is_err());
        assert!(check(r#"{"command": null, "argv": null}"#).is_err());
        assert!(check(r#"{"argv": []}"#).is_err());
    }

    #[test]
    fn timeout_must_be_positive() {
        assert!(check(r#"{"command": "ls", "timeout_seconds": 0}"#).is_err());
        assert!(check(r#"{"command": "ls", "timeout_seconds": -1}"#).is_err());
        assert!(check(r#"{"command": "ls", "timeout_seconds": 0.5}"#).is_ok());
        assert!(check(r#"{"command": "ls", "shell": "fish"}"#).is_err());
    }
}
