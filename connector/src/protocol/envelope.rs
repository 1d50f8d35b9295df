//! The envelope `{type, id, ts, version, pending_capacity, payload}`: parsing an inbound
//! frame into a [`Parsed`] outcome, and building outbound frames (responses, ERROR).

use std::time::{SystemTime, UNIX_EPOCH};

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value, json};

use super::codes::ErrorCode;
use super::common::ErrorPayload;
use super::messages::{Message, MessageType};
use super::version::{PROTOCOL_VERSION, PROTOCOL_VERSION_STR, ProtocolVersion};

/// Largest WebSocket message either side accepts (16 MiB, the platform relay's cap).
pub use local_core::limits::MAX_FRAME_BYTES;

/// One frame: envelope fields plus the typed message.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// Correlation id; a response repeats its request's id.
    pub id: String,
    /// Sender's epoch seconds.
    pub ts: f64,
    /// Wire version of the sender, `"major.minor"`; `"1.1"` when absent inbound.
    pub version: String,
    /// Free request slots after this response; omitted on requests and shim-internal
    /// frames, where the receiver treats absence as "no signal".
    pub pending_capacity: Option<u32>,
    /// The typed message (gives `type` and `payload`).
    pub message: Message,
}

impl Envelope {
    /// A frame without a capacity signal (HELLO, PONG, requests), at version 1.1.
    pub fn new(id: impl Into<String>, ts: f64, message: Message) -> Self {
        Self {
            id: id.into(),
            ts,
            version: PROTOCOL_VERSION_STR.to_owned(),
            pending_capacity: None,
            message,
        }
    }

    /// A shim response: echoes the request id and carries `pending_capacity`.
    pub fn response(
        request_id: impl Into<String>,
        ts: f64,
        pending_capacity: u32,
        message: Message,
    ) -> Self {
        Self::new(request_id, ts, message).with_pending_capacity(pending_capacity)
    }

    /// An `ERROR` response to `request_id` (`fatal: false`).
    pub fn error(
        request_id: impl Into<String>,
        ts: f64,
        pending_capacity: u32,
        code: ErrorCode,
        message: impl Into<String>,
        details: Option<Value>,
    ) -> Self {
        let payload = ErrorPayload {
            code: code.into(),
            message: message.into(),
            fatal: false,
            details,
        };
        Self::response(request_id, ts, pending_capacity, Message::Error(payload))
    }

    /// Sets `pending_capacity` (responses, STATUS).
    #[must_use]
    pub const fn with_pending_capacity(mut self, pending_capacity: u32) -> Self {
        self.pending_capacity = Some(pending_capacity);
        self
    }

    /// Stamps the negotiated version instead of this shim's maximum.
    #[must_use]
    pub fn with_version(mut self, version: ProtocolVersion) -> Self {
        self.version = version.to_string();
        self
    }

    /// The wire `type`.
    pub const fn message_type(&self) -> MessageType {
        self.message.message_type()
    }

    /// Compact JSON text of the frame.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

/// Field order follows the spec's envelope; `pending_capacity` is the only field ever
/// omitted, because the spec says receivers treat it as absent-or-null.
impl Serialize for Envelope {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len = if self.pending_capacity.is_some() {
            6
        } else {
            5
        };
        let mut map = serializer.serialize_map(Some(len))?;
        map.serialize_entry("type", self.message.message_type().as_str())?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("ts", &self.ts)?;
        map.serialize_entry("version", &self.version)?;
        if let Some(capacity) = self.pending_capacity {
            map.serialize_entry("pending_capacity", &capacity)?;
        }
        map.serialize_entry("payload", &self.message)?;
        map.end()
    }
}

/// Seconds since the Unix epoch, for `ts`.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What an inbound frame turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// A known message with a valid payload.
    Message(Box<Envelope>),
    /// A readable envelope whose `type` this version does not know: answer ERROR.
    Unknown {
        /// The request id to echo.
        id: String,
        /// The unknown type name.
        message_type: String,
    },
    /// A known type whose payload does not fit: answer ERROR.
    InvalidPayload {
        /// The request id to echo.
        id: String,
        /// The frame's type.
        message_type: MessageType,
        /// The most specific spec code for what is wrong (see [`Payload::invalid_code`]).
        ///
        /// [`Payload::invalid_code`]: super::messages::Payload::invalid_code
        code: ErrorCode,
        /// The top-level payload field at fault, when one is (a name, never a value).
        field: Option<String>,
        /// What did not fit.
        reason: String,
    },
    /// A non-HELLO frame of another major version: drop and log, never execute or answer.
    OtherMajor {
        /// The frame's id.
        id: String,
        /// The frame's `version`.
        version: String,
    },
    /// Not JSON, not an object, or an envelope field (`id`, `type`, `ts`, `version`,
    /// `pending_capacity`) missing or of the wrong type.
    Unreadable {
        /// The id, when one could still be read: answer ERROR to it.
        id: Option<String>,
        /// What was wrong.
        reason: String,
    },
}

impl Parsed {
    /// The ERROR frame the shim should send for this outcome, if any.
    ///
    /// Unknown types answer `FEATURE_NOT_SUPPORTED`; invalid payloads answer the most
    /// specific code the spec gives for the field at fault (`INTERNAL_ERROR`, the code the
    /// reference shim uses for request validation failures, where it gives none), and broken
    /// envelopes with a readable id `INTERNAL_ERROR`. Nothing answers an ERROR frame, a frame
    /// of another major, or a frame without an id.
    pub fn error_reply(&self, ts: f64, pending_capacity: u32) -> Option<Envelope> {
        match self {
            Self::Message(_) | Self::OtherMajor { .. } | Self::Unreadable { id: None, .. } => None,
            Self::Unknown { id, message_type } => Some(Envelope::error(
                id.clone(),
                ts,
                pending_capacity,
                ErrorCode::FeatureNotSupported,
                format!("unknown message type {message_type}"),
                Some(json!({ "message_type": message_type })),
            )),
            Self::InvalidPayload {
                message_type: MessageType::Error,
                ..
            } => None,
            // The serde reason may quote the payload (file contents, command text): it is kept
            // for tests and never sent or logged.
            Self::InvalidPayload {
                id,
                message_type,
                code,
                field,
                ..
            } => Some(Envelope::error(
                id.clone(),
                ts,
                pending_capacity,
                *code,
                format!("invalid {message_type} payload"),
                Some(match field {
                    Some(field) => json!({ "message_type": message_type.as_str(), "field": field }),
                    None => json!({ "message_type": message_type.as_str() }),
                }),
            )),
            Self::Unreadable { id: Some(id), .. } => Some(Envelope::error(
                id.clone(),
                ts,
                pending_capacity,
                ErrorCode::InternalError,
                "malformed envelope".to_owned(),
                None,
            )),
        }
    }
}

/// Parses one inbound text frame.
///
/// Unknown envelope and payload fields are ignored. A missing `version` means 1.1 and a
/// missing or null `payload` means `{}`. The frame-level version check skips HELLO and
/// HELLO_ACK (their payloads negotiate) and tolerates a malformed `version`, since only
/// the negotiated version is authoritative.
pub fn parse_frame(text: &str) -> Parsed {
    let root = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(root)) => root,
        Ok(_) => return unreadable(None, "frame is not a JSON object"),
        Err(err) => return unreadable(None, &format!("frame is not JSON: {err}")),
    };
    let Some(id) = root.get("id").and_then(Value::as_str).map(str::to_owned) else {
        return unreadable(None, "id is missing or not a string");
    };
    match read_envelope(&root) {
        Ok((type_name, ts, version, pending_capacity)) => {
            let handshake = matches!(type_name, "HELLO" | "HELLO_ACK");
            if let Ok(frame_version) = ProtocolVersion::parse(&version)
                && frame_version.major != PROTOCOL_VERSION.major
                && !handshake
            {
                return Parsed::OtherMajor { id, version };
            }
            let Some(message_type) = MessageType::from_wire(type_name) else {
                return Parsed::Unknown {
                    id,
                    message_type: type_name.to_owned(),
                };
            };
            let payload = match root.get("payload") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(payload) => payload.clone(),
            };
            match Message::from_payload(message_type, payload) {
                Ok(message) => Parsed::Message(Box::new(Envelope {
                    id,
                    ts,
                    version,
                    pending_capacity,
                    message,
                })),
                Err(fault) => Parsed::InvalidPayload {
                    id,
                    message_type,
                    code: fault.code,
                    field: fault.field,
                    reason: fault.reason,
                },
            }
        }
        Err(reason) => unreadable(Some(id), reason),
    }
}

fn unreadable(id: Option<String>, reason: &str) -> Parsed {
    Parsed::Unreadable {
        id,
        reason: reason.to_owned(),
    }
}

/// `type`, `ts`, `version` and `pending_capacity` of an object whose `id` was readable.
fn read_envelope(
    root: &Map<String, Value>,
) -> Result<(&str, f64, String, Option<u32>), &'static str> {
    let type_name = root
        .get("type")
        .and_then(Value::as_str)
        .ok_or("type is missing or not a string")?;
    let ts = root
        .get("ts")
        .and_then(Value::as_f64)
        .ok_or("ts is missing or not a number")?;
    let version = match root.get("version") {
        None | Some(Value::Null) => PROTOCOL_VERSION_STR.to_owned(),
        Some(Value::String(version)) => version.clone(),
        Some(_) => return Err("version is not a string"),
    };
    let pending_capacity = match root.get("pending_capacity") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or("pending_capacity is not a non-negative integer")?,
        ),
    };
    Ok((type_name, ts, version, pending_capacity))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::common::{AckPayload, EmptyPayload};
    use crate::protocol::files::FileReadPayload;
    use crate::protocol::{FileEncoding, FileFormat, OrUnknown};

    fn message(text: &str) -> Envelope {
        match parse_frame(text) {
            Parsed::Message(envelope) => *envelope,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    #[test]
    fn error_replies_never_quote_the_payload() {
        let frame = r#"{"type":"FILE_WRITE","id":"w1","ts":1.0,"version":"1.1",
            "payload":{"path":"/w/a","content":"private-secret","encoding":"private-encoding"}}"#;
        let parsed = parse_frame(frame);
        assert!(
            matches!(parsed, Parsed::InvalidPayload { .. }),
            "{parsed:?}"
        );
        let reply = parsed.error_reply(2.0, 3).unwrap().to_json().unwrap();
        assert!(reply.contains(r#""id":"w1""#), "{reply}");
        assert!(!reply.contains("private-"), "{reply}");
        let broken = parse_frame(r#"{"type":"FILE_READ","id":"r9","ts":"private-ts"}"#);
        let reply = broken.error_reply(2.0, 3).unwrap().to_json().unwrap();
        assert!(
            reply.contains(r#""id":"r9""#) && !reply.contains("private-"),
            "{reply}"
        );
    }

    #[test]
    fn unknown_envelope_and_payload_fields_are_ignored() {
        let envelope = message(
            r#"{"type":"FILE_READ","id":"r1","ts":1.5,"version":"1.1","trace":{"x":1},
                "payload":{"path":"/w/a","future_flag":true,"nested":{"deep":[1]}}}"#,
        );
        assert_eq!(envelope.id, "r1");
        assert_eq!(
            envelope.message,
            Message::FileRead(FileReadPayload {
                path: "/w/a".to_owned(),
                encoding: FileEncoding::Utf8,
                format: FileFormat::Text,
                offset: 0,
                length: None,
            })
        );
    }

    #[test]
    fn missing_version_defaults_and_other_minor_is_kept() {
        let envelope = message(r#"{"type":"PING","id":"p","ts":1.0,"payload":{}}"#);
        assert_eq!(envelope.version, "1.1");
        assert_eq!(envelope.pending_capacity, None);
        let envelope = message(r#"{"type":"PING","id":"p","ts":1.0,"version":"1.4"}"#);
        assert_eq!(envelope.version, "1.4");
        assert_eq!(envelope.message, Message::Ping(EmptyPayload {}));
        let envelope =
            message(r#"{"type":"PING","id":"p","ts":1.0,"version":"nonsense","payload":null}"#);
        assert_eq!(envelope.version, "nonsense");
    }

    #[test]
    fn unknown_type_is_unknown_with_id() {
        let parsed =
            parse_frame(r#"{"type":"TELEPORT","id":"t-1","ts":1.0,"payload":{"to":"mars"}}"#);
        assert_eq!(
            parsed,
            Parsed::Unknown {
                id: "t-1".to_owned(),
                message_type: "TELEPORT".to_owned()
            }
        );
        let reply = parsed.error_reply(2.0, 3).unwrap();
        let json: Value = serde_json::from_str(&reply.to_json().unwrap()).unwrap();
        assert_eq!(
            json,
            json!({"type":"ERROR","id":"t-1","ts":2.0,"version":"1.1","pending_capacity":3,
                   "payload":{"code":"FEATURE_NOT_SUPPORTED","message":"unknown message type TELEPORT",
                              "fatal":false,"details":{"message_type":"TELEPORT"}}})
        );
    }

    #[test]
    fn invalid_payload_is_invalid_with_id() {
        for text in [
            r#"{"type":"FILE_READ","id":"x","ts":1.0,"payload":{"path":7}}"#,
            r#"{"type":"FILE_READ","id":"x","ts":1.0,"payload":{}}"#,
            r#"{"type":"FILE_READ","id":"x","ts":1.0,"payload":[1,2]}"#,
            r#"{"type":"FILE_READ","id":"x","ts":1.0,"payload":{"path":"/a","encoding":"latin-1"}}"#,
            r#"{"type":"FILE_READ","id":"x","ts":1.0,"payload":{"path":"/a","length":0}}"#,
        ] {
            match parse_frame(text) {
                Parsed::InvalidPayload {
                    id,
                    message_type,
                    reason,
                    ..
                } => {
                    assert_eq!(
                        (id.as_str(), message_type),
                        ("x", MessageType::FileRead),
                        "{text}"
                    );
                    assert!(!reason.is_empty());
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        let parsed = parse_frame(
            r#"{"type":"EXECUTE_COMMAND","id":"c","ts":1.0,"payload":{"command":"ls","argv":["ls"]}}"#,
        );
        let reply = parsed.error_reply(1.0, 0).unwrap();
        assert_eq!(reply.id, "c");
        match reply.message {
            Message::Error(error) => {
                assert_eq!(error.code, OrUnknown::Known(ErrorCode::InternalError))
            }
            other => panic!("{other:?}"),
        }
    }

    /// Every way a control-mode or computer-use payload can be wrong answers the most
    /// specific code of PROTOCOL.md's list, naming the field at fault (never its value).
    #[test]
    fn malformed_control_and_computer_use_payloads_get_their_specific_codes() {
        const REF: &str = "DIRECTORY_REFERENCE_INVALID";
        const GRANT: &str = "ROOT_GRANT_INVALID";
        const REVISION: &str = "SESSION_REVISION_MISMATCH";
        const STALE: &str = "WINDOW_STALE";
        const FEATURE: &str = "FEATURE_NOT_SUPPORTED";
        const GENERIC: &str = "INTERNAL_ERROR";
        let long = "r".repeat(257);
        let sid = "session-1";
        let cases: Vec<(&str, Value, &str, Option<&str>)> = vec![
            // DIRECTORY_LIST_REQUEST: the pair half null, wrong types, shapes, cursor alone.
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"browse_id": "b", "directory_ref": null}),
                REF,
                Some("browse_id"),
            ),
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"browse_id": null, "directory_ref": "d"}),
                REF,
                Some("browse_id"),
            ),
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"browse_id": "b"}),
                REF,
                Some("browse_id"),
            ),
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"directory_ref": "d"}),
                REF,
                Some("browse_id"),
            ),
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"browse_id": 7, "directory_ref": "d"}),
                REF,
                Some("browse_id"),
            ),
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"browse_id": "b", "directory_ref": ["d"]}),
                REF,
                Some("directory_ref"),
            ),
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"browse_id": "b", "directory_ref": {"x": 1}}),
                REF,
                Some("directory_ref"),
            ),
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"browse_id": "", "directory_ref": "d"}),
                REF,
                Some("browse_id"),
            ),
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"browse_id": long, "directory_ref": "d"}),
                REF,
                Some("browse_id"),
            ),
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"browse_id": "b", "directory_ref": long}),
                REF,
                Some("directory_ref"),
            ),
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"browse_id": null, "directory_ref": null, "cursor": "c"}),
                REF,
                Some("cursor"),
            ),
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"browse_id": "b", "directory_ref": "d", "cursor": 3}),
                REF,
                Some("cursor"),
            ),
            (
                "DIRECTORY_LIST_REQUEST",
                json!({"browse_id": "b", "directory_ref": "d", "cursor": ""}),
                REF,
                Some("cursor"),
            ),
            ("DIRECTORY_LIST_REQUEST", json!("browse"), GENERIC, None),
            // ATTACH_SESSION: the reference pair, then the session id (no code of its own).
            (
                "ATTACH_SESSION",
                json!({"session_id": sid, "directory_ref": "d"}),
                REF,
                Some("browse_id"),
            ),
            (
                "ATTACH_SESSION",
                json!({"session_id": sid, "browse_id": "b"}),
                REF,
                Some("directory_ref"),
            ),
            (
                "ATTACH_SESSION",
                json!({"session_id": sid, "browse_id": null, "directory_ref": "d"}),
                REF,
                Some("browse_id"),
            ),
            (
                "ATTACH_SESSION",
                json!({"session_id": sid, "browse_id": "b", "directory_ref": 1}),
                REF,
                Some("directory_ref"),
            ),
            (
                "ATTACH_SESSION",
                json!({"session_id": sid, "browse_id": long, "directory_ref": "d"}),
                REF,
                Some("browse_id"),
            ),
            (
                "ATTACH_SESSION",
                json!({"session_id": sid, "browse_id": "b", "directory_ref": ""}),
                REF,
                Some("directory_ref"),
            ),
            (
                "ATTACH_SESSION",
                json!({"browse_id": "b", "directory_ref": "d"}),
                GENERIC,
                Some("session_id"),
            ),
            (
                "ATTACH_SESSION",
                json!({"session_id": 5, "browse_id": "b", "directory_ref": "d"}),
                GENERIC,
                Some("session_id"),
            ),
            (
                "ATTACH_SESSION",
                json!({"session_id": "bad id!", "browse_id": "b", "directory_ref": "d"}),
                GENERIC,
                Some("session_id"),
            ),
            // ACTIVATE_SESSION: a revision that can match no binding.
            (
                "ACTIVATE_SESSION",
                json!({"session_id": sid}),
                REVISION,
                Some("revision"),
            ),
            (
                "ACTIVATE_SESSION",
                json!({"session_id": sid, "revision": 0}),
                REVISION,
                Some("revision"),
            ),
            (
                "ACTIVATE_SESSION",
                json!({"session_id": sid, "revision": -1}),
                REVISION,
                Some("revision"),
            ),
            (
                "ACTIVATE_SESSION",
                json!({"session_id": sid, "revision": 1.5}),
                REVISION,
                Some("revision"),
            ),
            (
                "ACTIVATE_SESSION",
                json!({"session_id": sid, "revision": "1"}),
                REVISION,
                Some("revision"),
            ),
            (
                "ACTIVATE_SESSION",
                json!({"session_id": sid, "revision": null}),
                REVISION,
                Some("revision"),
            ),
            (
                "ACTIVATE_SESSION",
                json!({"revision": 1}),
                GENERIC,
                Some("session_id"),
            ),
            // RESTORE_SESSION: a missing or ill-typed grant is a malformed grant.
            (
                "RESTORE_SESSION",
                json!({"session_id": sid}),
                GRANT,
                Some("root_grant"),
            ),
            (
                "RESTORE_SESSION",
                json!({"session_id": sid, "root_grant": ""}),
                GRANT,
                Some("root_grant"),
            ),
            (
                "RESTORE_SESSION",
                json!({"session_id": sid, "root_grant": 12}),
                GRANT,
                Some("root_grant"),
            ),
            (
                "RESTORE_SESSION",
                json!({"session_id": sid, "root_grant": ["v1"]}),
                GRANT,
                Some("root_grant"),
            ),
            (
                "RESTORE_SESSION",
                json!({"root_grant": "v1.a.b"}),
                GENERIC,
                Some("session_id"),
            ),
            // DETACH_SESSION: only a session id, which has no code of its own.
            ("DETACH_SESSION", json!({}), GENERIC, Some("session_id")),
            (
                "DETACH_SESSION",
                json!({"session_id": false}),
                GENERIC,
                Some("session_id"),
            ),
            // SCREENSHOT_REQUEST.
            (
                "SCREENSHOT_REQUEST",
                json!({"format": "webp"}),
                FEATURE,
                Some("format"),
            ),
            (
                "SCREENSHOT_REQUEST",
                json!({"region": [0, 0, 5, 5], "window_id": "win_1"}),
                FEATURE,
                Some("region"),
            ),
            (
                "SCREENSHOT_REQUEST",
                json!({"window_id": 3}),
                STALE,
                Some("window_id"),
            ),
            (
                "SCREENSHOT_REQUEST",
                json!({"quality": 0}),
                GENERIC,
                Some("quality"),
            ),
            (
                "SCREENSHOT_REQUEST",
                json!({"quality": 101}),
                GENERIC,
                Some("quality"),
            ),
            // A region that cannot be captured, like an empty one (the reference), is unsupported.
            (
                "SCREENSHOT_REQUEST",
                json!({"region": [0, 0, 5]}),
                FEATURE,
                Some("region"),
            ),
            (
                "SCREENSHOT_REQUEST",
                json!({"monitor": "all"}),
                GENERIC,
                Some("monitor"),
            ),
            (
                "SCREENSHOT_REQUEST",
                json!({"include_cursor": "yes"}),
                GENERIC,
                Some("include_cursor"),
            ),
            // INPUT_ACTION: unknown operations, buttons, modifiers and directions.
            ("INPUT_ACTION", json!({}), FEATURE, None),
            (
                "INPUT_ACTION",
                json!({"action": "quadruple_click"}),
                FEATURE,
                Some("action"),
            ),
            (
                "INPUT_ACTION",
                json!({"action": 1}),
                FEATURE,
                Some("action"),
            ),
            (
                "INPUT_ACTION",
                json!({"action": "mouse_down", "button": "fourth"}),
                FEATURE,
                Some("button"),
            ),
            (
                "INPUT_ACTION",
                json!({"action": "left_click", "coordinate": [1, 1], "modifiers": ["hyper"]}),
                FEATURE,
                Some("modifiers"),
            ),
            (
                "INPUT_ACTION",
                json!({"action": "scroll", "direction": "inward"}),
                FEATURE,
                Some("direction"),
            ),
            (
                "INPUT_ACTION",
                json!({"action": "scroll", "scroll_direction": "back"}),
                FEATURE,
                Some("scroll_direction"),
            ),
            (
                "INPUT_ACTION",
                json!({"action": "left_click", "coordinate": [1]}),
                GENERIC,
                Some("coordinate"),
            ),
            (
                "INPUT_ACTION",
                json!({"action": "drag", "path": [[1, 2], "x"]}),
                GENERIC,
                Some("path"),
            ),
            (
                "INPUT_ACTION",
                json!({"action": "type", "text": 5}),
                GENERIC,
                Some("text"),
            ),
            (
                "INPUT_ACTION",
                json!({"action": "hold_key", "duration_ms": -5}),
                GENERIC,
                Some("duration_ms"),
            ),
            // WINDOW_FOCUS and A11Y_SNAPSHOT_REQUEST: an id that names no live window.
            ("WINDOW_FOCUS", json!({}), STALE, None),
            (
                "WINDOW_FOCUS",
                json!({"window_id": null}),
                STALE,
                Some("window_id"),
            ),
            (
                "WINDOW_FOCUS",
                json!({"window_id": 42}),
                STALE,
                Some("window_id"),
            ),
            (
                "WINDOW_FOCUS",
                json!({"window_id": "win_1", "raise": "no"}),
                GENERIC,
                Some("raise"),
            ),
            ("A11Y_SNAPSHOT_REQUEST", json!({}), STALE, None),
            (
                "A11Y_SNAPSHOT_REQUEST",
                json!({"window_id": []}),
                STALE,
                Some("window_id"),
            ),
            (
                "A11Y_SNAPSHOT_REQUEST",
                json!({"window_id": "win_1", "max_elements": 0}),
                GENERIC,
                Some("max_elements"),
            ),
            (
                "A11Y_SNAPSHOT_REQUEST",
                json!({"window_id": "win_1", "max_depth": 65}),
                GENERIC,
                Some("max_depth"),
            ),
            (
                "A11Y_SNAPSHOT_REQUEST",
                json!({"window_id": "win_1", "deadline_ms": 10_001}),
                GENERIC,
                Some("deadline_ms"),
            ),
            // The clipboard: a format no shim offers.
            (
                "CLIPBOARD_READ",
                json!({"format": "rtf"}),
                FEATURE,
                Some("format"),
            ),
            (
                "CLIPBOARD_WRITE",
                json!({"format": "html", "content": "x"}),
                FEATURE,
                Some("format"),
            ),
            ("CLIPBOARD_WRITE", json!({"format": "text"}), GENERIC, None),
            (
                "CLIPBOARD_WRITE",
                json!({"content": 9}),
                GENERIC,
                Some("content"),
            ),
            // The rest have no code of their own in the spec.
            (
                "WINDOW_LIST_REQUEST",
                json!({"include_minimized": "yes"}),
                GENERIC,
                Some("include_minimized"),
            ),
            (
                "APP_LIST_REQUEST",
                json!({"include_background": 1}),
                GENERIC,
                Some("include_background"),
            ),
            ("APP_LAUNCH", json!({"args": "one"}), GENERIC, Some("args")),
            (
                "PERMISSIONS_CHECK_REQUEST",
                json!({"permissions": "all"}),
                GENERIC,
                Some("permissions"),
            ),
            ("CURSOR_POSITION_REQUEST", json!([1]), GENERIC, None),
            ("DISPLAY_INFO_REQUEST", json!(5), GENERIC, None),
        ];
        for (kind, payload, code, field) in cases {
            let frame = json!({"type": kind, "id": "q", "ts": 1.0, "payload": payload}).to_string();
            let reply = parse_frame(&frame)
                .error_reply(2.0, 1)
                .unwrap_or_else(|| panic!("{frame}: no reply"));
            let json: Value = serde_json::from_str(&reply.to_json().unwrap()).unwrap();
            assert_eq!(json["id"], "q", "{frame}");
            assert_eq!(json["payload"]["code"], code, "{frame}");
            assert_eq!(
                json["payload"]["message"],
                format!("invalid {kind} payload"),
                "{frame}"
            );
            assert_eq!(
                json["payload"]["details"],
                match field {
                    Some(field) => json!({"message_type": kind, "field": field}),
                    None => json!({"message_type": kind}),
                },
                "{frame}"
            );
        }
    }

    #[test]
    fn invalid_error_frames_are_never_answered() {
        let parsed = parse_frame(r#"{"type":"ERROR","id":"e","ts":1.0,"payload":{"code":5}}"#);
        assert!(matches!(
            parsed,
            Parsed::InvalidPayload {
                message_type: MessageType::Error,
                ..
            }
        ));
        assert_eq!(parsed.error_reply(1.0, 0), None);
        // An unknown code from a newer peer is not a parse failure at all.
        let envelope = message(
            r#"{"type":"ERROR","id":"e","ts":1.0,"payload":{"code":"NEW_CODE","message":"m"}}"#,
        );
        match envelope.message {
            Message::Error(error) => {
                assert_eq!(error.code, OrUnknown::Unknown("NEW_CODE".to_owned()))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn not_json_is_unreadable_without_id() {
        for text in ["", "not json", "{\"id\":", "[1,2]", "\"HELLO\"", "null"] {
            assert!(
                matches!(parse_frame(text), Parsed::Unreadable { id: None, .. }),
                "{text:?}"
            );
            assert_eq!(parse_frame(text).error_reply(1.0, 1), None);
        }
        assert!(matches!(
            parse_frame(r#"{"type":"PING","ts":1.0,"payload":{}}"#),
            Parsed::Unreadable { id: None, .. }
        ));
        assert!(matches!(
            parse_frame(r#"{"type":"PING","id":42,"ts":1.0,"payload":{}}"#),
            Parsed::Unreadable { id: None, .. }
        ));
    }

    #[test]
    fn broken_envelope_with_id_keeps_the_id() {
        for text in [
            r#"{"id":"k","ts":1.0,"payload":{}}"#,
            r#"{"type":"PING","id":"k","payload":{}}"#,
            r#"{"type":"PING","id":"k","ts":"now","payload":{}}"#,
            r#"{"type":"PING","id":"k","ts":1.0,"version":1.1}"#,
            r#"{"type":"PING","id":"k","ts":1.0,"pending_capacity":-1}"#,
        ] {
            let parsed = parse_frame(text);
            assert!(
                matches!(&parsed, Parsed::Unreadable { id: Some(id), .. } if id == "k"),
                "{text}: {parsed:?}"
            );
            assert_eq!(parsed.error_reply(1.0, 0).unwrap().id, "k");
        }
    }

    #[test]
    fn other_major_is_dropped_but_handshake_is_negotiated() {
        let parsed = parse_frame(
            r#"{"type":"FILE_READ","id":"v","ts":1.0,"version":"2.0","payload":{"path":"/a"}}"#,
        );
        assert_eq!(
            parsed,
            Parsed::OtherMajor {
                id: "v".to_owned(),
                version: "2.0".to_owned()
            }
        );
        assert_eq!(parsed.error_reply(1.0, 1), None);
        // A v2 frame of a type v1 does not know is still just another major.
        let parsed = parse_frame(r#"{"type":"V2_ONLY","id":"v","ts":1.0,"version":"2.3"}"#);
        assert!(matches!(parsed, Parsed::OtherMajor { .. }));
        let parsed = parse_frame(r#"{"type":"PING","id":"v","ts":1.0,"version":"0.9"}"#);
        assert!(matches!(parsed, Parsed::OtherMajor { .. }));
        let ack = message(
            r#"{"type":"HELLO_ACK","id":"h","ts":1.0,"version":"2.0","payload":{"protocol_version":"2.0"}}"#,
        );
        assert_eq!(ack.version, "2.0");
    }

    #[test]
    fn responses_carry_pending_capacity_and_requests_omit_it() {
        let ack = Envelope::response("r", 1.0, 2, Message::Ack(AckPayload::OK));
        assert_eq!(
            ack.to_json().unwrap(),
            r#"{"type":"ACK","id":"r","ts":1.0,"version":"1.1","pending_capacity":2,"payload":{"ok":true}}"#
        );
        let ping = Envelope::new("p", 1.0, Message::Ping(EmptyPayload {}));
        assert_eq!(
            ping.to_json().unwrap(),
            r#"{"type":"PING","id":"p","ts":1.0,"version":"1.1","payload":{}}"#
        );
        let zero = Envelope::response("r", 1.0, 0, Message::Ack(AckPayload::OK));
        assert!(zero.to_json().unwrap().contains(r#""pending_capacity":0"#));
    }

    #[test]
    fn error_builder_echoes_id_and_details() {
        let without = Envelope::error("req-9", 3.0, 1, ErrorCode::PathNotFound, "missing", None);
        assert_eq!(
            without.to_json().unwrap(),
            r#"{"type":"ERROR","id":"req-9","ts":3.0,"version":"1.1","pending_capacity":1,"payload":{"code":"PATH_NOT_FOUND","message":"missing","fatal":false}}"#
        );
        let with = Envelope::error(
            "req-9",
            3.0,
            0,
            ErrorCode::ShimOverloaded,
            "busy",
            Some(json!({"max_concurrent": 4})),
        )
        .with_version(ProtocolVersion { major: 1, minor: 0 });
        let json: Value = serde_json::from_str(&with.to_json().unwrap()).unwrap();
        assert_eq!(json["version"], "1.0");
        assert_eq!(json["payload"]["details"], json!({"max_concurrent": 4}));
        assert_eq!(json["payload"]["code"], "SHIM_OVERLOADED");
    }

    #[test]
    fn unix_now_is_recent() {
        assert!(unix_now() > 1_700_000_000.0);
    }
}
