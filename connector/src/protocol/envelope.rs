//! The envelope `{type, id, ts, version, pending_capacity, payload}`: parsing an inbound
//! frame into a [`Parsed`] outcome, and building outbound frames (responses, ERROR).

use std::time::{SystemTime, UNIX_EPOCH};

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value, json};

use super::codes::ErrorCode;
use super::messages::{Message, MessageType};
use super::version::{PROTOCOL_VERSION, PROTOCOL_VERSION_STR, ProtocolVersion};

/// Largest WebSocket message either side accepts (16 MiB, the platform relay's cap).
pub use local_core::limits::MAX_FRAME_BYTES;

/// Room for a frame's envelope and small payload fields around its bulk text (ids, a path,
/// sizes); text that JSON escapes beyond this grows the buffer as usual.
const ENVELOPE_ALLOWANCE: usize = 4096;

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
        let message = crate::error::reply(code, message, details);
        Self::response(request_id, ts, pending_capacity, message)
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
    ///
    /// A frame carrying file or image content is written into one buffer of about its final
    /// size: growing by doubling would allocate up to twice the frame (16 MiB for an 8 MiB
    /// read's 10.7 MiB) and copy it on the way, and the allocator keeps what it once held.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        let bulk = self.message.bulk_text_len();
        if bulk == 0 {
            return serde_json::to_string(self);
        }
        // Mapped on its own and returned when the last fragment is sent (`local_core::bulk`).
        let mut out = Vec::with_capacity(bulk + ENVELOPE_ALLOWANCE);
        serde_json::to_writer(&mut out, self)?;
        String::from_utf8(out).map_err(serde::ser::Error::custom)
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
mod tests;
