//! The platform WebSocket protocol of PROTOCOL.md as typed Rust: envelope, every message
//! type and payload, error codes, close codes, capabilities, and version negotiation.
//!
//! # Layout
//! - [`parse_frame`] turns inbound text into a [`Parsed`] outcome; [`Envelope`] builds
//!   outbound frames (`Envelope::response`, `Envelope::error`).
//! - [`MessageType`] and [`Message`] (in `messages.rs`) are the catalogue; payload structs
//!   live by area: `handshake`, `control`, `files`, `shell`, `llm`, `computer_use`, `common`.
//! - `codes.rs`: [`ErrorCode`], [`close_code`], [`Capability`], [`OrUnknown`].
//! - `version.rs`: [`PROTOCOL_VERSION`], [`negotiate`], [`version_mismatch_close_reason`].
//!
//! Inbound types never deny unknown fields: the spec requires tolerating forward-compatible
//! additions within a major. Nothing here performs I/O or knows about sockets.

mod codes;
mod common;
mod computer_use;
mod control;
mod envelope;
mod files;
mod handshake;
mod llm;
mod messages;
mod shell;
mod version;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod spec_examples;

pub use codes::{Capability, ErrorCode, OrUnknown, RevokeReason, close_code};
pub use common::*;
pub use computer_use::*;
pub use control::*;
pub use envelope::{Envelope, MAX_FRAME_BYTES, Parsed, parse_frame, unix_now};
pub use files::*;
pub use handshake::*;
pub use llm::*;
pub use messages::{Direction, Message, MessageType, Payload};
pub use shell::*;
pub use version::{
    MAX_CLOSE_REASON_BYTES, PROTOCOL_VERSION, PROTOCOL_VERSION_STR, ProtocolVersion, VersionError,
    VersionMismatchReason, negotiate, version_mismatch_close_reason,
};
