//! One data connection's life: HELLO/HELLO_ACK, then the request loop with capability
//! gating, admission against `max_concurrent`, `pending_capacity`, STATUS, PING and
//! session revocation (PROTOCOL.md; shim-reference-behaviour.md sections 4, 6 and 7).
//!
//! The loop is generic over a [`Stream`] and a [`Sink`] of [`Frame`]s so it does not depend
//! on a WebSocket crate: the transport adapter maps WebSocket text and close frames to
//! [`Frame`], answers WebSocket-level pings itself, and ends the stream on a read error.
//!
//! # Layout
//! - `run.rs`: the loop itself ([`run_session`]), the one writer of outbound frames.
//! - `handshake.rs`: what HELLO offers, HELLO itself, the HELLO_ACK checks and close codes.
//! - `host.rs`: what connections share ([`Host`]) and what sets one apart ([`Role`]:
//!   data session, control connection, control-mode child with [`Activity`] and the
//!   [`MachineWork`] gate).
//! - `dispatch.rs`: inbound frames to replies, the refusals by type, `max_concurrent`.
//! - `capability.rs`: the `Handler` trait and the one admit/spawn/audit/reply path of every
//!   capability request, with the list of capabilities.
//! - `files.rs`, `shell.rs`, `llm.rs`, `computer.rs`: one capability each (a `Handler`), wire
//!   to core and back, with its audit records.
//!
//! [`Stream`]: futures_util::Stream
//! [`Sink`]: futures_util::Sink

mod capability;
mod computer;
mod dispatch;
mod files;
mod handshake;
mod host;
mod llm;
mod run;
mod shell;

pub(crate) use capability::{Served, serve};
pub use computer::Computer;
pub use host::{Activity, ControlPlane, Host, MachineWork, Role};
pub use llm::LocalLlm;
use run::Hooks;
pub use run::run_session;
#[cfg(test)]
use run::run_session_with;
pub(crate) use shell::{ShellLimits, command_error_code};

use std::time::Duration;

use local_core::machine::files::FileLimits;

use crate::protocol::{
    Arch, Capability, DEFAULT_COMMAND_TIMEOUT_SECONDS, DEFAULT_MAX_CONCURRENT, Platform,
    SessionRevokedPayload,
};

/// The reference shim's STATUS cadence (`STATUS_INTERVAL_SECONDS`).
pub const DEFAULT_STATUS_INTERVAL: Duration = Duration::from_secs(30);
/// How long the reference shim waits for HELLO_ACK.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Capabilities this build can serve on a data connection. HELLO advertises only these, so
/// the platform can never grant something the loop would have to refuse after the gate.
pub const SERVABLE_CAPABILITIES: &[Capability] = &[
    Capability::Files,
    Capability::Shell,
    Capability::ComputerUse,
    Capability::LocalLlm,
];

/// What the loop reads and writes: the two WebSocket frame kinds the protocol uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// One JSON envelope.
    Text(String),
    /// A close frame; `reason` is at most 123 bytes when the loop sends it.
    Close {
        /// WebSocket close code.
        code: u16,
        /// Close reason.
        reason: String,
    },
}

/// Local policy for one data connection; HELLO_ACK can only lower these limits.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The data connection's session id; HELLO_ACK must carry exactly this one.
    pub session_id: String,
    /// Stable machine identifier for HELLO.
    pub machine_id: String,
    /// Display name for HELLO (beyond PROTOCOL.md; the reference sends one).
    pub display_name: Option<String>,
    /// This shim's version for HELLO.
    pub shim_version: String,
    /// Host OS family for HELLO.
    pub platform: Platform,
    /// Normalised architecture for HELLO.
    pub arch: Arch,
    /// Capabilities the operator enabled; HELLO advertises those in
    /// [`SERVABLE_CAPABILITIES`], in the spec's order.
    pub advertised: Vec<Capability>,
    /// Local in-flight request cap.
    pub max_concurrent: u32,
    /// Local command timeout ceiling (negotiated and kept for the shell handler to come).
    pub command_timeout_seconds: u64,
    /// Local FILE_* limits; `max_read_bytes` and `max_write_bytes` are each lowered to
    /// HELLO_ACK's `max_file_size_bytes`.
    pub limits: FileLimits,
    /// STATUS cadence; zero disables the periodic STATUS (the edge STATUS stays).
    pub status_interval: Duration,
    /// How long to wait for HELLO_ACK.
    pub handshake_timeout: Duration,
}

impl SessionConfig {
    /// A configuration with the protocol's defaults: `files` advertised, max_concurrent 4,
    /// 30 s command timeout, 10 MiB files, STATUS every 30 s, 10 s for HELLO_ACK.
    pub fn new(
        session_id: impl Into<String>,
        machine_id: impl Into<String>,
        shim_version: impl Into<String>,
        platform: Platform,
        arch: Arch,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            machine_id: machine_id.into(),
            display_name: None,
            shim_version: shim_version.into(),
            platform,
            arch,
            advertised: vec![Capability::Files],
            max_concurrent: DEFAULT_MAX_CONCURRENT.get(),
            command_timeout_seconds: DEFAULT_COMMAND_TIMEOUT_SECONDS.get(),
            limits: FileLimits::default(),
            status_interval: DEFAULT_STATUS_INTERVAL,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }

    /// The HELLO capabilities: enabled and servable, deduplicated, in the spec's order.
    pub fn hello_capabilities(&self) -> Vec<Capability> {
        Capability::ALL
            .iter()
            .copied()
            .filter(|cap| SERVABLE_CAPABILITIES.contains(cap) && self.advertised.contains(cap))
            .collect()
    }
}

/// How a session ended, and so whether the caller may reconnect.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEnd {
    /// The platform closed with a code below 4426 (1000, 1011, ...): reconnect with backoff.
    Closed {
        /// The close code received.
        code: u16,
        /// The close reason received.
        reason: String,
    },
    /// The platform closed with 4426–4429: do not reconnect until an operator restarts.
    Fatal {
        /// The close code received.
        code: u16,
        /// The close reason received.
        reason: String,
    },
    /// SESSION_REVOKED arrived; the loop sent close 4428 and nothing else. No reconnect.
    Revoked(SessionRevokedPayload),
    /// HELLO_ACK's major differs or its version is malformed; the loop sent 4426 with the
    /// JSON reason. No reconnect.
    VersionMismatch {
        /// The platform's advertised maximum, as received.
        platform_max: String,
    },
    /// The loop refused HELLO_ACK with 4400 (wrong id, unadvertised grant, invalid limits,
    /// oversized HELLO) or 4403 (session mismatch). No reconnect.
    HandshakeRejected {
        /// The close code sent.
        code: u16,
    },
    /// No HELLO_ACK in time, or another frame came first; the loop sent close 1002.
    /// Reconnect with backoff.
    HandshakeFailed,
    /// The stream ended or the sink failed: reconnect with backoff.
    TransportEnded,
}

impl SessionEnd {
    /// Whether the reconnect loop may dial again (after its backoff).
    pub const fn may_reconnect(&self) -> bool {
        matches!(
            self,
            Self::Closed { .. } | Self::HandshakeFailed | Self::TransportEnded
        )
    }
}

/// A fresh random id for the frames the shim originates (HELLO, STATUS).
fn new_id() -> String {
    local_core::secret::new_id().to_string()
}

#[cfg(test)]
mod tests;
