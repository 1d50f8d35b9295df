//! Payloads shared across capabilities: empty bodies, ACK, ERROR, keepalive, STATUS and
//! session revocation.

use serde::{Deserialize, Serialize};

use super::codes::{ErrorCode, OrUnknown, RevokeReason};
use super::messages::Payload;

/// `{}`: PING, PONG, CURSOR_POSITION_REQUEST, DISPLAY_INFO_REQUEST.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EmptyPayload {}

impl Payload for EmptyPayload {}

/// `ACK` (shim → platform) for writes and fire-and-forget operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AckPayload {
    /// Always true when the shim sends it.
    pub ok: bool,
    /// The spec's APP_LAUNCH row says its ACK carries the pid; omitted otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

impl AckPayload {
    /// `{"ok": true}`.
    pub const OK: Self = Self {
        ok: true,
        pid: None,
    };
}

impl Payload for AckPayload {}

/// `ERROR` (either direction), echoing the request id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorPayload {
    /// Machine-readable code; codes from a newer peer are kept verbatim, so an ERROR is
    /// never itself rejected (which would risk answering an ERROR with an ERROR).
    pub code: OrUnknown<ErrorCode>,
    /// Human-readable message.
    pub message: String,
    /// The connection cannot continue.
    #[serde(default)]
    pub fatal: bool,
    /// Code-specific structured detail; omitted when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

impl Payload for ErrorPayload {}

/// `STATUS` (shim → platform, unsolicited): advisory; the envelope's `pending_capacity`
/// stays authoritative.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusPayload {
    /// Requests executing.
    pub in_flight: u32,
    /// Negotiated cap.
    pub max_concurrent: u32,
    /// Admitted but waiting.
    pub queue_depth: u32,
    /// Size of the audit log file.
    pub audit_log_bytes: u64,
    /// Seconds since the session began.
    pub uptime_seconds: f64,
}

impl Payload for StatusPayload {}

/// `SESSION_REVOKED` (platform → shim): send nothing more, close 4428, never reconnect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRevokedPayload {
    /// Why; unknown future reasons are accepted.
    pub reason: OrUnknown<RevokeReason>,
    /// Set when another shim took over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_shim_machine_id: Option<String>,
}

impl Payload for SessionRevokedPayload {}

/// Body of the workflow-recording design-preview messages, kept as raw JSON: the contract
/// names the messages but not their fields, and the shim refuses them anyway.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PreviewPayload(pub serde_json::Map<String, serde_json::Value>);

impl Payload for PreviewPayload {}
