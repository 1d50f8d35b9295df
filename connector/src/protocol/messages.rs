//! The message catalogue: every wire `type` of PROTOCOL.md as a [`MessageType`], and
//! [`Message`], one variant per type carrying its typed payload.
//!
//! The table below is the single place a message type is declared; the macro only
//! expands it into the enum pair and their exhaustive matches.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Serialize, Serializer};

use super::codes::{Capability, ErrorCode};
use super::common::{
    AckPayload, EmptyPayload, ErrorPayload, PreviewPayload, SessionRevokedPayload, StatusPayload,
};
use super::computer_use::{
    A11ySnapshotRequestPayload, A11ySnapshotResponsePayload, AppLaunchPayload,
    AppListRequestPayload, AppListResponsePayload, ClipboardReadPayload,
    ClipboardReadResponsePayload, ClipboardWritePayload, CursorPositionResponsePayload,
    DisplayInfoResponsePayload, ElementActionPayload, InputActionPayload,
    PermissionsCheckRequestPayload, PermissionsCheckResponsePayload, ScreenshotRequestPayload,
    ScreenshotResponsePayload, WindowFocusPayload, WindowListRequestPayload,
    WindowListResponsePayload,
};
use super::control::{
    ActivateSessionPayload, AttachSessionPayload, DetachSessionPayload,
    DirectoryListRequestPayload, DirectoryListResponsePayload, RestoreSessionPayload,
    SessionActivatedPayload, SessionAttachedPayload, SessionRestoredPayload,
};
use super::files::{
    FileContentsPayload, FileDeletePayload, FileListPayload, FileListResponsePayload,
    FileMovePayload, FileReadPayload, FileStatPayload, FileStatResponsePayload, FileWritePayload,
};
use super::handshake::{HelloAckPayload, HelloPayload};
use super::llm::{
    LocalLlmCompletionChunkPayload, LocalLlmCompletionPayload, LocalLlmCompletionResponsePayload,
};
use super::shell::{CommandResultPayload, ExecuteCommandPayload};

/// A message body.
pub trait Payload: Serialize + DeserializeOwned {
    /// Constraints serde cannot express (exclusive fields, ranges, id patterns); a
    /// violation makes an inbound frame [`Parsed::InvalidPayload`](super::Parsed).
    fn validate(&self) -> Result<(), Invalid> {
        Ok(())
    }

    /// The most specific code of the spec's error list for a payload whose `field` is
    /// wrong (`None`: no single field is to blame, for example a required one is missing).
    /// The generic `INTERNAL_ERROR`, the reference's answer to any validation failure,
    /// unless the payload's own module names a better one.
    fn invalid_code(field: Option<&str>) -> ErrorCode {
        let _ = field;
        ErrorCode::InternalError
    }
}

impl<T: Payload> Payload for Box<T> {
    fn validate(&self) -> Result<(), Invalid> {
        T::validate(self)
    }

    fn invalid_code(field: Option<&str>) -> ErrorCode {
        T::invalid_code(field)
    }
}

/// Why a payload was refused by [`Payload::validate`]: the field at fault, when one is, and
/// what was wrong with it (for tests and the log; never sent, since it may quote the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The top-level payload field at fault.
    pub field: Option<&'static str>,
    /// What did not fit.
    pub reason: String,
}

impl Invalid {
    /// A violation of one field's rule.
    pub fn at(field: &'static str, reason: impl Into<String>) -> Self {
        Self {
            field: Some(field),
            reason: reason.into(),
        }
    }
}

impl From<String> for Invalid {
    fn from(reason: String) -> Self {
        Self {
            field: None,
            reason,
        }
    }
}

/// A payload that did not decode or validate, with the code its ERROR reply carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadFault {
    /// From [`Payload::invalid_code`].
    pub code: ErrorCode,
    /// The top-level payload field at fault, when one is.
    pub field: Option<String>,
    /// What did not fit (may quote the payload: never sent or logged).
    pub reason: String,
}

/// Decodes and validates one payload, naming the field at fault on failure.
fn decode<T: Payload>(payload: serde_json::Value) -> Result<T, PayloadFault> {
    let whole = !payload.is_object();
    let decoded = match serde_path_to_error::deserialize::<_, T>(payload) {
        Ok(decoded) => decoded,
        Err(err) => {
            let field = match err.path().iter().next() {
                Some(serde_path_to_error::Segment::Map { key }) => Some(key.clone()),
                _ => None,
            };
            // A payload that is not an object at all is malformed as a whole, whatever
            // its type's most likely field would be.
            let code = if whole && field.is_none() {
                ErrorCode::InternalError
            } else {
                T::invalid_code(field.as_deref())
            };
            return Err(PayloadFault {
                code,
                field,
                reason: err.into_inner().to_string(),
            });
        }
    };
    match decoded.validate() {
        Ok(()) => Ok(decoded),
        Err(invalid) => Err(PayloadFault {
            code: T::invalid_code(invalid.field),
            field: invalid.field.map(str::to_owned),
            reason: invalid.reason,
        }),
    }
}

/// Who sends a message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Platform → shim.
    PlatformToShim,
    /// Shim → platform.
    ShimToPlatform,
    /// Either side (ERROR).
    Either,
}

macro_rules! catalogue {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $wire:literal, $payload:ty, $direction:ident, $capability:expr;
    )*) => {
        /// Every message `type` of the protocol.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum MessageType {
            $( $(#[$doc])* $variant, )*
        }

        impl MessageType {
            /// Every message type, in the order of the catalogue.
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];

            /// The exact wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)*
                }
            }

            /// The type for a wire name; `None` for names this version does not know.
            pub fn from_wire(name: &str) -> Option<Self> {
                match name {
                    $($wire => Some(Self::$variant),)*
                    _ => None,
                }
            }

            /// Who sends this type.
            pub const fn direction(self) -> Direction {
                match self {
                    $(Self::$variant => Direction::$direction,)*
                }
            }

            /// The capability that must be granted for the shim to act on (or emit) this
            /// type; `None` for handshake, keepalive and generic replies.
            /// `directory_browse` marks the control-connection messages.
            pub const fn required_capability(self) -> Option<Capability> {
                match self {
                    $(Self::$variant => $capability,)*
                }
            }
        }

        /// A message: its type and typed payload in one value.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Message {
            $( $(#[$doc])* $variant($payload), )*
        }

        impl Message {
            /// The wire type of this message.
            pub const fn message_type(&self) -> MessageType {
                match self {
                    $(Self::$variant(_) => MessageType::$variant,)*
                }
            }

            /// Decodes and validates a payload of the given type; unknown payload fields
            /// are ignored.
            pub fn from_payload(
                message_type: MessageType,
                payload: serde_json::Value,
            ) -> Result<Self, PayloadFault> {
                match message_type {
                    $(MessageType::$variant => decode::<$payload>(payload).map(Self::$variant),)*
                }
            }
        }

        /// Serialises the payload only; the envelope adds `type` and the other fields.
        impl Serialize for Message {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(Self::$variant(payload) => payload.serialize(serializer),)*
                }
            }
        }
    };
}

impl Message {
    /// The length of the message's bulk text (file content, a screenshot's base64), 0 when
    /// it has none: what sizes the buffer the frame is written into.
    pub fn bulk_text_len(&self) -> usize {
        match self {
            Self::FileContents(payload) => payload.content.len(),
            Self::ScreenshotResponse(payload) => payload.image_base64.len(),
            _ => 0,
        }
    }
}

catalogue! {
    /// Handshake: the shim's first frame.
    Hello = "HELLO", Box<HelloPayload>, ShimToPlatform, None;
    /// Handshake: the platform's answer, same id as HELLO.
    HelloAck = "HELLO_ACK", HelloAckPayload, PlatformToShim, None;
    /// Keepalive probe, every 30 s.
    Ping = "PING", EmptyPayload, PlatformToShim, None;
    /// Keepalive answer, same id, within 10 s.
    Pong = "PONG", EmptyPayload, ShimToPlatform, None;
    /// Unsolicited health and capacity report.
    Status = "STATUS", StatusPayload, ShimToPlatform, None;
    /// Success without data.
    Ack = "ACK", AckPayload, ShimToPlatform, None;
    /// Failure of the request with the same id.
    Error = "ERROR", ErrorPayload, Either, None;
    /// The platform revoked this session.
    SessionRevoked = "SESSION_REVOKED", SessionRevokedPayload, PlatformToShim, None;

    /// Control: list virtual roots or a directory.
    DirectoryListRequest = "DIRECTORY_LIST_REQUEST", DirectoryListRequestPayload, PlatformToShim, Some(Capability::DirectoryBrowse);
    /// Control: a page of directories.
    DirectoryListResponse = "DIRECTORY_LIST_RESPONSE", DirectoryListResponsePayload, ShimToPlatform, Some(Capability::DirectoryBrowse);
    /// Control: bind a session to a browsed folder.
    AttachSession = "ATTACH_SESSION", AttachSessionPayload, PlatformToShim, Some(Capability::DirectoryBrowse);
    /// Control: the binding and its grant.
    SessionAttached = "SESSION_ATTACHED", SessionAttachedPayload, ShimToPlatform, Some(Capability::DirectoryBrowse);
    /// Control: start the child runtime.
    ActivateSession = "ACTIVATE_SESSION", ActivateSessionPayload, PlatformToShim, Some(Capability::DirectoryBrowse);
    /// Control: the child runtime was started.
    SessionActivated = "SESSION_ACTIVATED", SessionActivatedPayload, ShimToPlatform, Some(Capability::DirectoryBrowse);
    /// Control: restore a binding from its grant and start the child.
    RestoreSession = "RESTORE_SESSION", RestoreSessionPayload, PlatformToShim, Some(Capability::DirectoryBrowse);
    /// Control: the binding was restored.
    SessionRestored = "SESSION_RESTORED", SessionRestoredPayload, ShimToPlatform, Some(Capability::DirectoryBrowse);
    /// Control: stop the child and drop the binding; answered with ACK.
    DetachSession = "DETACH_SESSION", DetachSessionPayload, PlatformToShim, Some(Capability::DirectoryBrowse);

    /// Run a command.
    ExecuteCommand = "EXECUTE_COMMAND", ExecuteCommandPayload, PlatformToShim, Some(Capability::Shell);
    /// A command's outcome.
    CommandResult = "COMMAND_RESULT", CommandResultPayload, ShimToPlatform, Some(Capability::Shell);

    /// Read a file.
    FileRead = "FILE_READ", FileReadPayload, PlatformToShim, Some(Capability::Files);
    /// File content.
    FileContents = "FILE_CONTENTS", FileContentsPayload, ShimToPlatform, Some(Capability::Files);
    /// Write a file; answered with ACK.
    FileWrite = "FILE_WRITE", FileWritePayload, PlatformToShim, Some(Capability::Files);
    /// Stat a path.
    FileStat = "FILE_STAT", FileStatPayload, PlatformToShim, Some(Capability::Files);
    /// Stat result.
    FileStatResponse = "FILE_STAT_RESPONSE", FileStatResponsePayload, ShimToPlatform, Some(Capability::Files);
    /// List a directory.
    FileList = "FILE_LIST", FileListPayload, PlatformToShim, Some(Capability::Files);
    /// Listing result.
    FileListResponse = "FILE_LIST_RESPONSE", FileListResponsePayload, ShimToPlatform, Some(Capability::Files);
    /// Delete a path; answered with ACK.
    FileDelete = "FILE_DELETE", FileDeletePayload, PlatformToShim, Some(Capability::Files);
    /// Move or rename; answered with ACK.
    FileMove = "FILE_MOVE", FileMovePayload, PlatformToShim, Some(Capability::Files);

    /// Run a local chat completion.
    LocalLlmCompletion = "LOCAL_LLM_COMPLETION", LocalLlmCompletionPayload, PlatformToShim, Some(Capability::LocalLlm);
    /// A streamed piece of a completion.
    LocalLlmCompletionChunk = "LOCAL_LLM_COMPLETION_CHUNK", LocalLlmCompletionChunkPayload, ShimToPlatform, Some(Capability::LocalLlm);
    /// The assembled completion (terminal frame).
    LocalLlmCompletionResponse = "LOCAL_LLM_COMPLETION_RESPONSE", LocalLlmCompletionResponsePayload, ShimToPlatform, Some(Capability::LocalLlm);

    /// Capture the screen.
    ScreenshotRequest = "SCREENSHOT_REQUEST", ScreenshotRequestPayload, PlatformToShim, Some(Capability::ComputerUse);
    /// A capture.
    ScreenshotResponse = "SCREENSHOT_RESPONSE", ScreenshotResponsePayload, ShimToPlatform, Some(Capability::ComputerUse);
    /// Mouse or keyboard input; answered with ACK.
    InputAction = "INPUT_ACTION", InputActionPayload, PlatformToShim, Some(Capability::ComputerUse);
    /// Where the cursor is.
    CursorPositionRequest = "CURSOR_POSITION_REQUEST", EmptyPayload, PlatformToShim, Some(Capability::ComputerUse);
    /// The cursor position.
    CursorPositionResponse = "CURSOR_POSITION_RESPONSE", CursorPositionResponsePayload, ShimToPlatform, Some(Capability::ComputerUse);
    /// Describe the monitors.
    DisplayInfoRequest = "DISPLAY_INFO_REQUEST", EmptyPayload, PlatformToShim, Some(Capability::ComputerUse);
    /// Monitor descriptions.
    DisplayInfoResponse = "DISPLAY_INFO_RESPONSE", DisplayInfoResponsePayload, ShimToPlatform, Some(Capability::ComputerUse);
    /// List windows (mints fresh window ids).
    WindowListRequest = "WINDOW_LIST_REQUEST", WindowListRequestPayload, PlatformToShim, Some(Capability::ComputerUse);
    /// Windows.
    WindowListResponse = "WINDOW_LIST_RESPONSE", WindowListResponsePayload, ShimToPlatform, Some(Capability::ComputerUse);
    /// Focus a window; answered with ACK or WINDOW_STALE.
    WindowFocus = "WINDOW_FOCUS", WindowFocusPayload, PlatformToShim, Some(Capability::ComputerUse);
    /// List running apps.
    AppListRequest = "APP_LIST_REQUEST", AppListRequestPayload, PlatformToShim, Some(Capability::ComputerUse);
    /// Running apps.
    AppListResponse = "APP_LIST_RESPONSE", AppListResponsePayload, ShimToPlatform, Some(Capability::ComputerUse);
    /// Launch an app; answered with ACK.
    AppLaunch = "APP_LAUNCH", AppLaunchPayload, PlatformToShim, Some(Capability::ComputerUse);
    /// Read the clipboard.
    ClipboardRead = "CLIPBOARD_READ", ClipboardReadPayload, PlatformToShim, Some(Capability::ComputerUse);
    /// Clipboard content.
    ClipboardReadResponse = "CLIPBOARD_READ_RESPONSE", ClipboardReadResponsePayload, ShimToPlatform, Some(Capability::ComputerUse);
    /// Write the clipboard; answered with ACK.
    ClipboardWrite = "CLIPBOARD_WRITE", ClipboardWritePayload, PlatformToShim, Some(Capability::ComputerUse);
    /// Check OS permissions.
    PermissionsCheckRequest = "PERMISSIONS_CHECK_REQUEST", PermissionsCheckRequestPayload, PlatformToShim, Some(Capability::ComputerUse);
    /// Permission states.
    PermissionsCheckResponse = "PERMISSIONS_CHECK_RESPONSE", PermissionsCheckResponsePayload, ShimToPlatform, Some(Capability::ComputerUse);
    /// Additive 1.x extension (feature `a11y.snapshot`): one window's accessibility elements.
    A11ySnapshotRequest = "A11Y_SNAPSHOT_REQUEST", A11ySnapshotRequestPayload, PlatformToShim, Some(Capability::ComputerUse);
    /// The elements, display-global boxes.
    A11ySnapshotResponse = "A11Y_SNAPSHOT_RESPONSE", A11ySnapshotResponsePayload, ShimToPlatform, Some(Capability::ComputerUse);
    /// Additive 1.x extension (features `a11y.snapshot` and `input`): click or type into an
    /// element of a snapshot, re-checked first; answered with ACK.
    ElementAction = "ELEMENT_ACTION", ElementActionPayload, PlatformToShim, Some(Capability::ComputerUse);

    /// Design preview: ask the local user for recording consent.
    RequestRecordingConsent = "REQUEST_RECORDING_CONSENT", PreviewPayload, PlatformToShim, Some(Capability::Recording);
    /// Design preview: the consent outcome.
    RecordingConsentResult = "RECORDING_CONSENT_RESULT", PreviewPayload, ShimToPlatform, Some(Capability::Recording);
    /// Design preview: begin capture.
    StartRecording = "START_RECORDING", PreviewPayload, PlatformToShim, Some(Capability::Recording);
    /// Design preview: capture began.
    RecordingStarted = "RECORDING_STARTED", PreviewPayload, ShimToPlatform, Some(Capability::Recording);
    /// Design preview: finish capture.
    StopRecording = "STOP_RECORDING", PreviewPayload, PlatformToShim, Some(Capability::Recording);
    /// Design preview: summary of a finished recording.
    RecordingSummary = "RECORDING_SUMMARY", PreviewPayload, ShimToPlatform, Some(Capability::Recording);
    /// Design preview: fetch a finished recording.
    RecordingFetch = "RECORDING_FETCH", PreviewPayload, PlatformToShim, Some(Capability::Recording);
    /// Design preview: a recording's data.
    RecordingData = "RECORDING_DATA", PreviewPayload, ShimToPlatform, Some(Capability::Recording);
    /// Design preview: apply step removals and redactions.
    ApplyRecordingReview = "APPLY_RECORDING_REVIEW", PreviewPayload, PlatformToShim, Some(Capability::Recording);
    /// Design preview: the review was applied.
    RecordingReviewApplied = "RECORDING_REVIEW_APPLIED", PreviewPayload, ShimToPlatform, Some(Capability::Recording);
    /// Design preview: unsolicited co-pilot step stream, not acked.
    RecordingStep = "RECORDING_STEP", PreviewPayload, ShimToPlatform, Some(Capability::Recording);
}

impl fmt::Display for MessageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for MessageType {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `type` name PROTOCOL.md mentions (including the computer-use cross-reference
    /// table and the recording names of its idempotency table), plus the recording replies
    /// of the reference shim.
    const SPEC_TYPES: &[&str] = &[
        "HELLO",
        "HELLO_ACK",
        "PING",
        "PONG",
        "STATUS",
        "ACK",
        "ERROR",
        "SESSION_REVOKED",
        "DIRECTORY_LIST_REQUEST",
        "DIRECTORY_LIST_RESPONSE",
        "ATTACH_SESSION",
        "SESSION_ATTACHED",
        "ACTIVATE_SESSION",
        "SESSION_ACTIVATED",
        "RESTORE_SESSION",
        "SESSION_RESTORED",
        "DETACH_SESSION",
        "EXECUTE_COMMAND",
        "COMMAND_RESULT",
        "FILE_READ",
        "FILE_CONTENTS",
        "FILE_WRITE",
        "FILE_STAT",
        "FILE_STAT_RESPONSE",
        "FILE_LIST",
        "FILE_LIST_RESPONSE",
        "FILE_DELETE",
        "FILE_MOVE",
        "LOCAL_LLM_COMPLETION",
        "LOCAL_LLM_COMPLETION_CHUNK",
        "LOCAL_LLM_COMPLETION_RESPONSE",
        "SCREENSHOT_REQUEST",
        "SCREENSHOT_RESPONSE",
        "INPUT_ACTION",
        "CURSOR_POSITION_REQUEST",
        "CURSOR_POSITION_RESPONSE",
        "DISPLAY_INFO_REQUEST",
        "DISPLAY_INFO_RESPONSE",
        "WINDOW_LIST_REQUEST",
        "WINDOW_LIST_RESPONSE",
        "WINDOW_FOCUS",
        "APP_LIST_REQUEST",
        "APP_LIST_RESPONSE",
        "APP_LAUNCH",
        "CLIPBOARD_READ",
        "CLIPBOARD_READ_RESPONSE",
        "CLIPBOARD_WRITE",
        "PERMISSIONS_CHECK_REQUEST",
        "PERMISSIONS_CHECK_RESPONSE",
        // Beyond PROTOCOL.md: the additive accessibility snapshot and element actions
        // (docs/computer-use.md).
        "A11Y_SNAPSHOT_REQUEST",
        "A11Y_SNAPSHOT_RESPONSE",
        "ELEMENT_ACTION",
        "REQUEST_RECORDING_CONSENT",
        "RECORDING_CONSENT_RESULT",
        "START_RECORDING",
        "RECORDING_STARTED",
        "STOP_RECORDING",
        "RECORDING_SUMMARY",
        "RECORDING_FETCH",
        "RECORDING_DATA",
        "APPLY_RECORDING_REVIEW",
        "RECORDING_REVIEW_APPLIED",
        "RECORDING_STEP",
    ];

    #[test]
    fn catalogue_is_exactly_the_spec_types() {
        let names: Vec<&str> = MessageType::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(names, SPEC_TYPES);
        for t in MessageType::ALL {
            assert_eq!(MessageType::from_wire(t.as_str()), Some(*t));
            assert_eq!(serde_json::to_string(t).unwrap(), format!("\"{t}\""));
        }
        assert_eq!(MessageType::from_wire("hello"), None);
    }

    #[test]
    fn control_messages_need_directory_browse() {
        assert_eq!(
            MessageType::AttachSession.required_capability(),
            Some(Capability::DirectoryBrowse)
        );
        assert_eq!(
            MessageType::FileRead.required_capability(),
            Some(Capability::Files)
        );
        assert_eq!(MessageType::Ping.required_capability(), None);
        assert_eq!(MessageType::Error.direction(), Direction::Either);
    }
}
