//! Closed vocabularies of the wire: error codes, WebSocket close codes, capability names,
//! and the `OrUnknown` wrapper that keeps forward-compatible fields parseable.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A value from a closed vocabulary, or a string this version does not know.
///
/// Fields the spec declares open for minor-version extension (revocation reasons, chat
/// roles, granted capabilities, error codes received from the peer) use this so an
/// unknown value never turns a whole frame into a parse failure.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OrUnknown<T> {
    /// A value this version knows.
    Known(T),
    /// Any other string, kept verbatim.
    Unknown(String),
}

impl<T> OrUnknown<T> {
    /// The known value, if it is one.
    pub const fn known(&self) -> Option<&T> {
        match self {
            Self::Known(value) => Some(value),
            Self::Unknown(_) => None,
        }
    }
}

impl<T> From<T> for OrUnknown<T> {
    fn from(value: T) -> Self {
        Self::Known(value)
    }
}

macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $wire:literal, )* }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $wire)] $variant, )*
        }

        impl $name {
            /// Every value, in the order the spec lists them.
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];

            /// The exact wire string.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)*
                }
            }

            /// The value for a wire string, if it is one of ours.
            pub fn from_wire(value: &str) -> Option<Self> {
                match value {
                    $($wire => Some(Self::$variant),)*
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum! {
    /// `ERROR.payload.code`: the spec's list in its order, then the design-preview
    /// recording codes of the reference shim.
    ErrorCode {
        /// A file operation tried to escape `allowed_root`.
        PathOutsideAllowedRoot = "PATH_OUTSIDE_ALLOWED_ROOT",
        /// A Windows reserved device name (CON, PRN, NUL, COM*, LPT*).
        PathReservedName = "PATH_RESERVED_NAME",
        /// The path contains characters illegal on this OS (or is too long).
        PathInvalidChars = "PATH_INVALID_CHARS",
        /// The path does not exist.
        PathNotFound = "PATH_NOT_FOUND",
        /// FILE_DELETE of a non-empty directory without `recursive`.
        PathNotEmpty = "PATH_NOT_EMPTY",
        /// FILE_MOVE onto an existing destination without `overwrite`.
        PathExists = "PATH_EXISTS",
        /// Reserved; a timed-out command today answers COMMAND_RESULT with `timed_out`.
        CommandTimeout = "COMMAND_TIMEOUT",
        /// The requested shell is not installed on this OS.
        ShellNotAvailable = "SHELL_NOT_AVAILABLE",
        /// HELLO `arch` was not recognised.
        UnsupportedArch = "UNSUPPORTED_ARCH",
        /// The message needs a capability that was not granted.
        CapabilityNotGranted = "CAPABILITY_NOT_GRANTED",
        /// Token invalid or expired.
        AuthFailed = "AUTH_FAILED",
        /// More requests in flight than `max_concurrent`.
        ShimOverloaded = "SHIM_OVERLOADED",
        /// Unexpected shim error.
        InternalError = "INTERNAL_ERROR",
        /// A file, screenshot, clipboard or output exceeded `max_file_size_bytes`.
        FileTooLarge = "FILE_TOO_LARGE",
        /// A runtime dependency of the operation is missing on this host.
        DependencyMissing = "DEPENDENCY_MISSING",
        /// Browse/reference pair malformed, expired, consumed or from an older connection.
        DirectoryReferenceInvalid = "DIRECTORY_REFERENCE_INVALID",
        /// The selected directory vanished, became a link, or is no longer accessible.
        DirectoryUnavailable = "DIRECTORY_UNAVAILABLE",
        /// A root grant is malformed, forged, bound elsewhere, or its directory changed.
        RootGrantInvalid = "ROOT_GRANT_INVALID",
        /// Activation before a folder was attached.
        SessionNotAttached = "SESSION_NOT_ATTACHED",
        /// Root replacement while the child runtime is active.
        SessionAlreadyActive = "SESSION_ALREADY_ACTIVE",
        /// A stale or conflicting root revision.
        SessionRevisionMismatch = "SESSION_REVISION_MISMATCH",
        /// A `window_id` no longer maps to a live window.
        WindowStale = "WINDOW_STALE",
        /// An OS-level permission is missing or was revoked.
        PermissionPending = "PERMISSION_PENDING",
        /// The operation is not supported here (feature, OS, session or connection kind).
        FeatureNotSupported = "FEATURE_NOT_SUPPORTED",
        /// Clipboard contents are concealed by the active policy.
        ClipboardConcealed = "CLIPBOARD_CONCEALED",
        /// A coordinate is outside every connected display.
        InputOutOfBounds = "INPUT_OUT_OF_BOUNDS",
        /// The requested local model is not available.
        ModelNotAvailable = "MODEL_NOT_AVAILABLE",
        /// The local LLM backend is serving another request.
        LocalLlmBusy = "LOCAL_LLM_BUSY",
        /// The local LLM backend failed.
        LocalLlmFailed = "LOCAL_LLM_FAILED",
        /// Design preview: no such recording.
        RecordingNotFound = "RECORDING_NOT_FOUND",
        /// Design preview: the recording channel is unavailable.
        RecordingChannelUnavailable = "RECORDING_CHANNEL_UNAVAILABLE",
        /// Design preview: a recording is already active.
        RecordingAlreadyActive = "RECORDING_ALREADY_ACTIVE",
        /// Design preview: the review does not fit the recording.
        RecordingReviewInvalid = "RECORDING_REVIEW_INVALID",
        /// Design preview: local consent is required first.
        ConsentRequired = "CONSENT_REQUIRED",
        /// Design preview: interpretation is unavailable.
        InterpretationUnavailable = "INTERPRETATION_UNAVAILABLE",
    }
}

impl ErrorCode {
    /// The codes listed in PROTOCOL.md's "Error codes" section (the rest are design preview).
    pub const SPEC_LISTED: &'static [Self] = Self::ALL.split_at(29).0;
}

wire_enum! {
    /// Capability names, in the order PROTOCOL.md's HELLO example lists them; `recording`
    /// (design preview, never advertised) last.
    Capability {
        /// Directory browsing and session management on the control connection.
        DirectoryBrowse = "directory_browse",
        /// EXECUTE_COMMAND; only with the local `--enable-shell` opt-in.
        Shell = "shell",
        /// FILE_* operations.
        Files = "files",
        /// Screenshots, input, windows, apps, clipboard, permissions.
        ComputerUse = "computer_use",
        /// LOCAL_LLM_COMPLETION.
        LocalLlm = "local_llm",
        /// Serial hardware.
        HardwareSerial = "hardware_serial",
        /// USB hardware.
        HardwareUsb = "hardware_usb",
        /// GPIO hardware.
        HardwareGpio = "hardware_gpio",
        /// Workflow recording (design preview).
        Recording = "recording",
    }
}

wire_enum! {
    /// `SESSION_REVOKED.payload.reason` values of v1.0; others arrive as [`OrUnknown::Unknown`].
    RevokeReason {
        /// A shim with the same `machine_id` took over.
        AnotherShimConnected = "another_shim_connected",
        /// The user revoked the session.
        UserRevoked = "user_revoked",
        /// The platform is shutting down.
        PlatformShutdown = "platform_shutdown",
    }
}

/// WebSocket close codes the protocol names.
///
/// Codes below 4426 follow RFC 6455 and allow reconnecting with backoff; the four
/// application codes from 4426 up are fatal until an operator restarts the shim.
pub mod close_code {
    /// Normal closure (RFC 6455).
    pub const NORMAL: u16 = 1000;
    /// Server error (RFC 6455).
    pub const SERVER_ERROR: u16 = 1011;
    /// Sent by the shim: the HELLO_ACK is unacceptable (wrong id, ungranted-by-us
    /// capabilities) or the HELLO would be too large. No reconnect.
    pub const BAD_HANDSHAKE: u16 = 4400;
    /// Sent by the shim: HELLO_ACK names another session than the one configured.
    pub const SESSION_MISMATCH: u16 = 4403;
    /// Major-version disagreement; the reason is JSON (see `version_mismatch_close_reason`).
    pub const PROTOCOL_VERSION_MISMATCH: u16 = 4426;
    /// Another shim took over this session.
    pub const SESSION_TAKEN_OVER: u16 = 4427;
    /// The session was revoked (also what the shim sends after SESSION_REVOKED).
    pub const SESSION_REVOKED: u16 = 4428;
    /// The platform is shutting down.
    pub const PLATFORM_SHUTDOWN: u16 = 4429;

    /// Reason text the shim sends with [`SESSION_REVOKED`] after a SESSION_REVOKED frame.
    pub const SESSION_REVOKED_REASON: &str = "session_revoked";

    /// Whether a close with this code received from the platform forbids auto-reconnect.
    pub const fn is_fatal(code: u16) -> bool {
        matches!(
            code,
            PROTOCOL_VERSION_MISMATCH | SESSION_TAKEN_OVER | SESSION_REVOKED | PLATFORM_SHUTDOWN
        )
    }

    /// The label of the spec's close-code table (for logs and audit records); the
    /// shim-sent 4400 and 4403 have none there, so they log as unknown like any other.
    pub const fn label(code: u16) -> Option<&'static str> {
        match code {
            PROTOCOL_VERSION_MISMATCH => Some("PROTOCOL_VERSION_MISMATCH"),
            SESSION_TAKEN_OVER => Some("SESSION_TAKEN_OVER"),
            SESSION_REVOKED => Some("SESSION_REVOKED"),
            PLATFORM_SHUTDOWN => Some("PLATFORM_SHUTDOWN"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Copied from PROTOCOL.md, "Error codes", in order.
    const SPEC_ERROR_CODES: &[&str] = &[
        "PATH_OUTSIDE_ALLOWED_ROOT",
        "PATH_RESERVED_NAME",
        "PATH_INVALID_CHARS",
        "PATH_NOT_FOUND",
        "PATH_NOT_EMPTY",
        "PATH_EXISTS",
        "COMMAND_TIMEOUT",
        "SHELL_NOT_AVAILABLE",
        "UNSUPPORTED_ARCH",
        "CAPABILITY_NOT_GRANTED",
        "AUTH_FAILED",
        "SHIM_OVERLOADED",
        "INTERNAL_ERROR",
        "FILE_TOO_LARGE",
        "DEPENDENCY_MISSING",
        "DIRECTORY_REFERENCE_INVALID",
        "DIRECTORY_UNAVAILABLE",
        "ROOT_GRANT_INVALID",
        "SESSION_NOT_ATTACHED",
        "SESSION_ALREADY_ACTIVE",
        "SESSION_REVISION_MISMATCH",
        "WINDOW_STALE",
        "PERMISSION_PENDING",
        "FEATURE_NOT_SUPPORTED",
        "CLIPBOARD_CONCEALED",
        "INPUT_OUT_OF_BOUNDS",
        "MODEL_NOT_AVAILABLE",
        "LOCAL_LLM_BUSY",
        "LOCAL_LLM_FAILED",
    ];

    /// From shim-reference-behaviour.md section 15 (design preview).
    const PREVIEW_ERROR_CODES: &[&str] = &[
        "RECORDING_NOT_FOUND",
        "RECORDING_CHANNEL_UNAVAILABLE",
        "RECORDING_ALREADY_ACTIVE",
        "RECORDING_REVIEW_INVALID",
        "CONSENT_REQUIRED",
        "INTERPRETATION_UNAVAILABLE",
    ];

    #[test]
    fn error_codes_match_the_spec_list_exactly() {
        let listed: Vec<&str> = ErrorCode::SPEC_LISTED.iter().map(|c| c.as_str()).collect();
        assert_eq!(listed, SPEC_ERROR_CODES);
        let all: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        let expected: Vec<&str> = SPEC_ERROR_CODES
            .iter()
            .chain(PREVIEW_ERROR_CODES)
            .copied()
            .collect();
        assert_eq!(all, expected);
    }

    #[test]
    fn error_code_serde_uses_wire_strings() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            let back: ErrorCode = serde_json::from_str(&json).unwrap();
            assert_eq!(back, *code);
            assert_eq!(ErrorCode::from_wire(code.as_str()), Some(*code));
        }
        assert_eq!(ErrorCode::from_wire("path_not_found"), None);
    }

    #[test]
    fn capabilities_in_spec_order() {
        let names: Vec<&str> = Capability::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            names,
            [
                "directory_browse",
                "shell",
                "files",
                "computer_use",
                "local_llm",
                "hardware_serial",
                "hardware_usb",
                "hardware_gpio",
                "recording"
            ]
        );
    }

    #[test]
    fn or_unknown_keeps_unknown_strings() {
        let parsed: Vec<OrUnknown<RevokeReason>> =
            serde_json::from_str(r#"["user_revoked","maintenance"]"#).unwrap();
        assert_eq!(
            parsed,
            [
                OrUnknown::Known(RevokeReason::UserRevoked),
                OrUnknown::Unknown("maintenance".into())
            ]
        );
        assert_eq!(
            serde_json::to_string(&parsed).unwrap(),
            r#"["user_revoked","maintenance"]"#
        );
    }

    #[test]
    fn close_codes() {
        assert_eq!(
            [
                close_code::BAD_HANDSHAKE,
                close_code::SESSION_MISMATCH,
                close_code::PROTOCOL_VERSION_MISMATCH,
                close_code::SESSION_TAKEN_OVER,
                close_code::SESSION_REVOKED,
                close_code::PLATFORM_SHUTDOWN
            ],
            [4400, 4403, 4426, 4427, 4428, 4429]
        );
        for code in [4426, 4427, 4428, 4429] {
            assert!(close_code::is_fatal(code), "{code}");
        }
        for code in [1000, 1001, 1011, 4400, 4403, 4425, 4430] {
            assert!(!close_code::is_fatal(code), "{code}");
        }
        assert_eq!(close_code::label(4429), Some("PLATFORM_SHUTDOWN"));
        assert_eq!(close_code::label(1000), None);
        assert_eq!(close_code::label(4400), None);
    }
}
