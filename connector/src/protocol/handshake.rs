//! HELLO and HELLO_ACK payloads, the values they carry, and the defaults a HELLO_ACK
//! implies when the platform omits a limit.

use std::num::{NonZeroU32, NonZeroU64};

use serde::{Deserialize, Serialize};

use super::codes::{Capability, OrUnknown};
use super::messages::{Invalid, Payload};
use super::version::PROTOCOL_VERSION_STR;

/// `max_file_size_bytes` when HELLO_ACK omits it (10 MiB).
pub const DEFAULT_MAX_FILE_SIZE_BYTES: NonZeroU64 = non_zero_u64(10 * 1024 * 1024);
/// `command_timeout_seconds` when HELLO_ACK omits it.
pub const DEFAULT_COMMAND_TIMEOUT_SECONDS: NonZeroU64 = non_zero_u64(30);
/// `max_concurrent` when HELLO_ACK omits it.
pub const DEFAULT_MAX_CONCURRENT: NonZeroU32 = match NonZeroU32::new(4) {
    Some(n) => n,
    None => panic!("default max_concurrent must be positive"),
};
/// Longest session id the platform may use (`^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$`).
pub const MAX_SESSION_ID_CHARS: usize = 256;

/// Whether `id` matches the session-id pattern; the id becomes a URL path segment, so
/// anything like `../control?admin=true` must be refused before it is used.
pub fn is_valid_session_id(id: &str) -> bool {
    let mut bytes = id.bytes();
    let Some(first) = bytes.next() else {
        return false;
    };
    id.len() <= MAX_SESSION_ID_CHARS
        && first.is_ascii_alphanumeric()
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

pub(crate) fn check_session_id(id: &str) -> Result<(), String> {
    if is_valid_session_id(id) {
        Ok(())
    } else {
        Err("session_id does not match the session id pattern".to_owned())
    }
}

/// `HELLO.platform`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// macOS.
    Darwin,
    /// Native Linux.
    Linux,
    /// Windows 10/11.
    Windows,
    /// A WSL2 distro on a Windows host.
    Wsl2,
}

/// `HELLO.arch`, normalised by the shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Arch {
    /// 64-bit x86.
    #[serde(rename = "x86_64")]
    X86_64,
    /// 64-bit ARM.
    #[serde(rename = "arm64")]
    Arm64,
}

impl Arch {
    /// Normalises a machine name with the spec's alias table; `None` means the platform
    /// would answer `UNSUPPORTED_ARCH`.
    pub fn normalise(machine: &str) -> Option<Self> {
        match machine {
            "x86_64" | "AMD64" | "amd64" => Some(Self::X86_64),
            "arm64" | "aarch64" | "ARM64" => Some(Self::Arm64),
            _ => None,
        }
    }
}

/// One entry of `HELLO.hardware_devices`; which keys appear depends on `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HardwareDevice {
    /// `"serial"`, `"usb"`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Serial port path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// USB vendor id (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vid: Option<String>,
    /// USB product id (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<String>,
    /// Human description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desc: Option<String>,
    /// Stable id within its kind (`ttyUSB0`, USB `1-1.2`, `gpiochip0`); an additive field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Device node of a GPIO chip; an additive field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// USB serial number; an additive field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    /// USB manufacturer string; an additive field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    /// USB product string; an additive field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
}

/// `HELLO` (shim → platform, first frame on connect).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelloPayload {
    /// The shim's own version.
    pub shim_version: String,
    /// Highest wire version this shim supports.
    #[serde(default = "current_version")]
    pub protocol_version: String,
    /// Stable machine identifier.
    pub machine_id: String,
    /// Beyond PROTOCOL.md: a display name the reference shim sends.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Host OS family.
    pub platform: Platform,
    /// Normalised CPU architecture.
    pub arch: Arch,
    /// `[width, height]`, null without computer use.
    #[serde(default)]
    pub screen_resolution: Option<[u32; 2]>,
    /// Advertised capabilities.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Null on the control connection; the canonical root on a data connection.
    #[serde(default)]
    pub allowed_root: Option<String>,
    /// Local models; empty without `local_llm`.
    #[serde(default)]
    pub local_llm_models: Vec<String>,
    /// Attached hardware.
    #[serde(default)]
    pub hardware_devices: Vec<HardwareDevice>,
    /// Fine-grained computer-use features (`screenshot.region`, ...), see COMPUTER_USE.md.
    #[serde(default)]
    pub computer_use_features: Vec<String>,
    /// Coarse computer-use buckets (`screenshot`, `input`, ...).
    #[serde(default)]
    pub computer_use_features_coarse: Vec<String>,
    /// Design preview: recording channels (always empty).
    #[serde(default)]
    pub recording_channels: Vec<String>,
    /// Design preview: recording routes (always empty; shape unspecified).
    #[serde(default)]
    pub recording_routes: Vec<serde_json::Value>,
}

impl Payload for HelloPayload {}

fn current_version() -> String {
    PROTOCOL_VERSION_STR.to_owned()
}

/// `HELLO_ACK` (platform → shim, same id as the HELLO).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloAckPayload {
    /// Null or empty on the control connection; the exact session id on a data connection.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Opaque platform presence generation; required (non-empty) on the control connection.
    #[serde(default)]
    pub connection_id: Option<String>,
    /// Highest wire version the platform supports.
    #[serde(default = "current_version")]
    pub protocol_version: String,
    /// Subset of the advertised capabilities; unknown names are kept so the handshake
    /// can close with 4400 instead of failing to parse.
    #[serde(default)]
    pub granted_capabilities: Vec<OrUnknown<Capability>>,
    /// Per-operation payload ceiling.
    #[serde(default = "default_max_file_size")]
    pub max_file_size_bytes: NonZeroU64,
    /// Command timeout ceiling.
    #[serde(default = "default_command_timeout")]
    pub command_timeout_seconds: NonZeroU64,
    /// In-flight request cap.
    #[serde(default = "default_max_concurrent")]
    pub max_concurrent: NonZeroU32,
}

impl HelloAckPayload {
    /// Granted names the shim did not advertise (including names it does not know); a
    /// non-empty result means the ACK must be refused.
    pub fn unadvertised<'a>(&'a self, advertised: &[Capability]) -> Vec<&'a OrUnknown<Capability>> {
        self.granted_capabilities
            .iter()
            .filter(|granted| granted.known().is_none_or(|cap| !advertised.contains(cap)))
            .collect()
    }
}

impl Payload for HelloAckPayload {
    fn validate(&self) -> Result<(), Invalid> {
        match self.session_id.as_deref() {
            None | Some("") => Ok(()),
            Some(id) => check_session_id(id).map_err(|reason| Invalid::at("session_id", reason)),
        }
    }
}

// Only ever evaluated in const items, so a zero is a compile error, not a runtime panic.
const fn non_zero_u64(value: u64) -> NonZeroU64 {
    match NonZeroU64::new(value) {
        Some(n) => n,
        None => panic!("default limits must be positive"),
    }
}

const fn default_max_file_size() -> NonZeroU64 {
    DEFAULT_MAX_FILE_SIZE_BYTES
}
const fn default_command_timeout() -> NonZeroU64 {
    DEFAULT_COMMAND_TIMEOUT_SECONDS
}
const fn default_max_concurrent() -> NonZeroU32 {
    DEFAULT_MAX_CONCURRENT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_id_pattern() {
        for good in ["a", "A1", "session-uuid", "a.b_c:d-e", &"x".repeat(256)] {
            assert!(is_valid_session_id(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            ".a",
            "../control?admin=true",
            "a/b",
            "a b",
            "é",
            &"x".repeat(257),
        ] {
            assert!(!is_valid_session_id(bad), "{bad}");
        }
    }

    #[test]
    fn arch_aliases() {
        for (raw, arch) in [
            ("x86_64", Arch::X86_64),
            ("AMD64", Arch::X86_64),
            ("amd64", Arch::X86_64),
            ("arm64", Arch::Arm64),
            ("aarch64", Arch::Arm64),
            ("ARM64", Arch::Arm64),
        ] {
            assert_eq!(Arch::normalise(raw), Some(arch));
        }
        assert_eq!(Arch::normalise("riscv64"), None);
    }

    #[test]
    fn hello_ack_defaults_and_positive_limits() {
        let ack: HelloAckPayload = serde_json::from_str("{}").unwrap();
        assert_eq!(ack.max_concurrent.get(), 4);
        assert_eq!(ack.command_timeout_seconds.get(), 30);
        assert_eq!(ack.max_file_size_bytes.get(), 10_485_760);
        assert_eq!(ack.protocol_version, "1.1");
        for field in [
            "max_concurrent",
            "command_timeout_seconds",
            "max_file_size_bytes",
        ] {
            for value in ["0", "-1"] {
                let text = format!(r#"{{"{field}": {value}}}"#);
                assert!(
                    serde_json::from_str::<HelloAckPayload>(&text).is_err(),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn unadvertised_grants() {
        let ack: HelloAckPayload =
            serde_json::from_str(r#"{"granted_capabilities": ["files", "shell", "teleport"]}"#)
                .unwrap();
        let extra = ack.unadvertised(&[Capability::Files]);
        assert_eq!(
            extra,
            [
                &OrUnknown::Known(Capability::Shell),
                &OrUnknown::Unknown("teleport".to_owned())
            ]
        );
        assert!(
            ack.unadvertised(&[Capability::Files, Capability::Shell])
                .len()
                == 1
        );
    }
}
