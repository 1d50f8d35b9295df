//! The connector's one error path: every failure a core operation can return maps to the
//! PROTOCOL.md `ERROR.code` the connector answers it with, here and only here, in matches
//! with no catch-all (a new core variant does not compile until it is given a code), and
//! [`reply`] is the one function that builds an ERROR message.
//!
//! Where the spec names no code for a failure the reference answers `INTERNAL_ERROR`, and so
//! do these maps, variant by variant.

use std::fmt;
use std::num::NonZeroU32;

use local_core::desktop::DesktopError;
use local_core::llm::LlmError;
use local_core::machine::exec::{ExecError, LimitExceeded};
use local_core::machine::files::FileError;
use local_core::machine::jail::JailError;
use local_core::machine::root_grant::GrantError;
use serde_json::{Value, json};

use crate::protocol::{ErrorCode, ErrorPayload, Message};

/// A core failure as the wire reports it.
pub trait WireError: fmt::Display {
    /// The spec code the connector answers this failure with.
    fn error_code(&self) -> ErrorCode;

    /// The reference's `details` object for this failure, when it has one of its own.
    fn error_details(&self) -> Option<Value> {
        None
    }
}

/// The one builder of an ERROR message (`fatal: false`: no request error ends a connection).
pub fn reply(code: ErrorCode, message: impl Into<String>, details: Option<Value>) -> Message {
    Message::Error(ErrorPayload {
        code: code.into(),
        message: message.into(),
        fatal: false,
        details,
    })
}

/// The ERROR for a core failure: its code, its display text and its own details. Core
/// display texts name at most jail-relative paths, sizes and names, never content, so they
/// are safe to send.
pub fn failure(err: &impl WireError) -> Message {
    reply(err.error_code(), err.to_string(), err.error_details())
}

/// The ERROR for a request beyond `max_concurrent` in flight, on a connection or on the MCP
/// face: refused at once, never queued (reference §6).
pub fn overloaded(max_concurrent: NonZeroU32) -> Message {
    reply(
        ErrorCode::ShimOverloaded,
        "The local executor is at its concurrent request limit.",
        Some(json!({ "max_concurrent": max_concurrent.get() })),
    )
}

/// The ERROR for a failure nothing more specific can be said about (a task that panicked).
pub fn internal() -> Message {
    reply(
        ErrorCode::InternalError,
        "The operation failed unexpectedly.",
        None,
    )
}

impl WireError for JailError {
    fn error_code(&self) -> ErrorCode {
        match self {
            // The reference reports an over-long path as invalid characters.
            Self::PathInvalidChars | Self::PathTooLong => ErrorCode::PathInvalidChars,
            Self::PathReservedName => ErrorCode::PathReservedName,
            Self::PathOutsideAllowedRoot | Self::RootUnavailable { .. } => {
                ErrorCode::PathOutsideAllowedRoot
            }
            Self::PathNotFound { .. } => ErrorCode::PathNotFound,
            Self::PathExists { .. } => ErrorCode::PathExists,
            Self::PathNotEmpty { .. } => ErrorCode::PathNotEmpty,
            Self::NotADirectory { .. }
            | Self::IsADirectory { .. }
            | Self::PermissionDenied { .. }
            | Self::SymlinkLoop { .. }
            | Self::RootOperation
            | Self::Io { .. } => ErrorCode::InternalError,
        }
    }
}

impl WireError for FileError {
    fn error_code(&self) -> ErrorCode {
        match self {
            Self::Jail(err) => err.error_code(),
            Self::FileTooLarge { .. } => ErrorCode::FileTooLarge,
            Self::BadBase64
            | Self::NotARegularFile { .. }
            | Self::NestedMove
            | Self::CrossDeviceSymlink { .. } => ErrorCode::InternalError,
        }
    }
}

impl WireError for ExecError {
    fn error_code(&self) -> ErrorCode {
        match self {
            // The reference reports a missing argv[0] as an unavailable shell too.
            Self::ShellNotAvailable { .. } | Self::ExecutableNotFound { .. } => {
                ErrorCode::ShellNotAvailable
            }
            Self::CwdNotFound => ErrorCode::PathNotFound,
            Self::EmptyArgv | Self::CwdNotADirectory | Self::Spawn(_) => ErrorCode::InternalError,
        }
    }
}

impl WireError for LimitExceeded {
    fn error_code(&self) -> ErrorCode {
        match self {
            Self::RateLimit { .. } | Self::Concurrency { .. } => ErrorCode::ShimOverloaded,
        }
    }
}

impl WireError for DesktopError {
    fn error_code(&self) -> ErrorCode {
        match self {
            Self::NotSupported { .. } => ErrorCode::FeatureNotSupported,
            Self::WindowStale { .. } | Self::ElementStale { .. } => ErrorCode::WindowStale,
            Self::OutOfBounds { .. } => ErrorCode::InputOutOfBounds,
            Self::Concealed { .. } => ErrorCode::ClipboardConcealed,
            Self::TooLarge { .. } => ErrorCode::FileTooLarge,
            Self::PermissionPending { .. } => ErrorCode::PermissionPending,
            Self::RateLimited { .. } => ErrorCode::ShimOverloaded,
            Self::Failed(_) => ErrorCode::InternalError,
        }
    }

    fn error_details(&self) -> Option<Value> {
        self.details()
    }
}

impl WireError for LlmError {
    fn error_code(&self) -> ErrorCode {
        match self {
            Self::ModelNotAvailable => ErrorCode::ModelNotAvailable,
            Self::Timeout | Self::Failed { .. } => ErrorCode::LocalLlmFailed,
        }
    }
}

impl WireError for GrantError {
    fn error_code(&self) -> ErrorCode {
        match self {
            Self::Malformed | Self::Signature | Self::OtherSession | Self::OtherMachine => {
                ErrorCode::RootGrantInvalid
            }
        }
    }
}

#[cfg(test)]
mod tests;
