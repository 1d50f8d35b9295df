//! Every failure a core operation can return maps to a code of PROTOCOL.md's error list, and
//! to the code the connector sent for it before this map existed (core's `code()` string
//! parsed back with an `INTERNAL_ERROR` fallback, or the code written at the call site).

use std::io;
use std::path::PathBuf;

use local_core::desktop::{ConcealReason, Rect};

use super::*;
use crate::protocol::OrUnknown;

fn path() -> PathBuf {
    PathBuf::from("a/b")
}

/// One value of every `JailError` variant.
fn jail_errors() -> Vec<JailError> {
    vec![
        JailError::PathInvalidChars,
        JailError::PathTooLong,
        JailError::PathReservedName,
        JailError::PathOutsideAllowedRoot,
        JailError::RootUnavailable {
            kind: io::ErrorKind::NotFound,
        },
        JailError::PathNotFound { path: path() },
        JailError::PathExists { path: path() },
        JailError::PathNotEmpty { path: path() },
        JailError::NotADirectory { path: path() },
        JailError::IsADirectory { path: path() },
        JailError::PermissionDenied { path: path() },
        JailError::SymlinkLoop { path: path() },
        JailError::RootOperation,
        JailError::Io {
            path: path(),
            kind: io::ErrorKind::Other,
        },
    ]
}

/// What the connector answered each `JailError` with before (written out, not derived).
/// Exhaustive, so a new variant fails here until its expected code is written down.
const fn jail_before(err: &JailError) -> &'static str {
    match err {
        JailError::PathInvalidChars | JailError::PathTooLong => "PATH_INVALID_CHARS",
        JailError::PathReservedName => "PATH_RESERVED_NAME",
        JailError::PathOutsideAllowedRoot | JailError::RootUnavailable { .. } => {
            "PATH_OUTSIDE_ALLOWED_ROOT"
        }
        JailError::PathNotFound { .. } => "PATH_NOT_FOUND",
        JailError::PathExists { .. } => "PATH_EXISTS",
        JailError::PathNotEmpty { .. } => "PATH_NOT_EMPTY",
        JailError::NotADirectory { .. }
        | JailError::IsADirectory { .. }
        | JailError::PermissionDenied { .. }
        | JailError::SymlinkLoop { .. }
        | JailError::RootOperation
        | JailError::Io { .. } => "INTERNAL_ERROR",
    }
}

fn file_errors() -> Vec<FileError> {
    let mut errors: Vec<FileError> = jail_errors().into_iter().map(FileError::Jail).collect();
    errors.extend([
        FileError::FileTooLarge {
            requested: 11,
            limit: 10,
        },
        FileError::BadBase64,
        FileError::NotARegularFile { path: path() },
        FileError::NestedMove,
        FileError::CrossDeviceSymlink { path: path() },
    ]);
    errors
}

const fn file_before(err: &FileError) -> &'static str {
    match err {
        FileError::Jail(err) => jail_before(err),
        FileError::FileTooLarge { .. } => "FILE_TOO_LARGE",
        FileError::BadBase64
        | FileError::NotARegularFile { .. }
        | FileError::NestedMove
        | FileError::CrossDeviceSymlink { .. } => "INTERNAL_ERROR",
    }
}

fn exec_errors() -> Vec<ExecError> {
    vec![
        ExecError::ShellNotAvailable {
            shell: "zsh".to_owned(),
        },
        ExecError::ExecutableNotFound {
            program: "nope".to_owned(),
        },
        ExecError::EmptyArgv,
        ExecError::CwdNotFound,
        ExecError::CwdNotADirectory,
        ExecError::Spawn(io::Error::from(io::ErrorKind::PermissionDenied)),
    ]
}

const fn exec_before(err: &ExecError) -> &'static str {
    match err {
        ExecError::ShellNotAvailable { .. } | ExecError::ExecutableNotFound { .. } => {
            "SHELL_NOT_AVAILABLE"
        }
        ExecError::CwdNotFound => "PATH_NOT_FOUND",
        ExecError::EmptyArgv | ExecError::CwdNotADirectory | ExecError::Spawn(_) => {
            "INTERNAL_ERROR"
        }
    }
}

fn desktop_errors() -> Vec<DesktopError> {
    vec![
        DesktopError::unsupported("screenshot.region", "not here"),
        DesktopError::WindowStale {
            window_id: "w-1".to_owned(),
        },
        DesktopError::ElementStale {
            element_id: "e3".to_owned(),
            reason: "is stale: its window is gone",
        },
        DesktopError::OutOfBounds {
            coordinate: [-5, 9],
            displays: vec![(
                0,
                Rect {
                    x: 0,
                    y: 0,
                    width: 10,
                    height: 10,
                },
            )],
        },
        DesktopError::Concealed {
            reason: ConcealReason::WritebackOnly,
            writeback_age_seconds: Some(3),
        },
        DesktopError::TooLarge {
            size: 11,
            limit: 10,
        },
        DesktopError::PermissionPending {
            permission: "screen_recording".to_owned(),
        },
        DesktopError::RateLimited { per_minute: 10 },
        DesktopError::Failed("the display went away".to_owned()),
    ]
}

const fn desktop_before(err: &DesktopError) -> &'static str {
    match err {
        DesktopError::NotSupported { .. } => "FEATURE_NOT_SUPPORTED",
        DesktopError::WindowStale { .. } | DesktopError::ElementStale { .. } => "WINDOW_STALE",
        DesktopError::OutOfBounds { .. } => "INPUT_OUT_OF_BOUNDS",
        DesktopError::Concealed { .. } => "CLIPBOARD_CONCEALED",
        DesktopError::TooLarge { .. } => "FILE_TOO_LARGE",
        DesktopError::PermissionPending { .. } => "PERMISSION_PENDING",
        DesktopError::RateLimited { .. } => "SHIM_OVERLOADED",
        DesktopError::Failed(_) => "INTERNAL_ERROR",
    }
}

fn llm_errors() -> Vec<LlmError> {
    vec![
        LlmError::ModelNotAvailable,
        LlmError::Timeout,
        LlmError::Failed {
            backend_error: "connection refused".to_owned(),
        },
    ]
}

const fn llm_before(err: &LlmError) -> &'static str {
    match err {
        LlmError::ModelNotAvailable => "MODEL_NOT_AVAILABLE",
        LlmError::Timeout | LlmError::Failed { .. } => "LOCAL_LLM_FAILED",
    }
}

const fn limit_before(err: &LimitExceeded) -> &'static str {
    match err {
        LimitExceeded::RateLimit { .. } | LimitExceeded::Concurrency { .. } => "SHIM_OVERLOADED",
    }
}

const fn grant_before(err: &GrantError) -> &'static str {
    match err {
        GrantError::Malformed
        | GrantError::Signature
        | GrantError::OtherSession
        | GrantError::OtherMachine => "ROOT_GRANT_INVALID",
    }
}

/// The code is one of PROTOCOL.md's error list, equals `before`, and the ERROR built for
/// the failure carries it with the failure's own text and details, never fatal.
fn check(err: &impl WireError, before: &str, details: Option<&Value>) {
    let code = err.error_code();
    assert!(
        ErrorCode::SPEC_LISTED.contains(&code),
        "{err}: {code} is not a PROTOCOL.md error code"
    );
    assert_eq!(code.as_str(), before, "{err}");
    let Message::Error(payload) = failure(err) else {
        panic!("{err}: not an ERROR");
    };
    assert_eq!(payload.code, OrUnknown::Known(code));
    assert_eq!(payload.message, err.to_string());
    assert_eq!(payload.details.as_ref(), details, "{err}");
    assert!(!payload.fatal);
}

#[test]
fn every_core_failure_maps_to_a_spec_code_and_the_code_sent_before() {
    for err in jail_errors() {
        check(&err, jail_before(&err), None);
        // Core's own code string, which the connector used to parse back, agrees.
        assert_eq!(err.code(), jail_before(&err));
    }
    for err in file_errors() {
        check(&err, file_before(&err), None);
        assert_eq!(err.code(), file_before(&err));
    }
    for err in exec_errors() {
        check(&err, exec_before(&err), None);
        assert_eq!(err.code(), exec_before(&err));
    }
    for err in desktop_errors() {
        check(&err, desktop_before(&err), err.details().as_ref());
        assert_eq!(err.code(), desktop_before(&err));
    }
    for err in [
        LimitExceeded::RateLimit { per_minute: 60 },
        LimitExceeded::Concurrency { max: 10 },
    ] {
        check(&err, limit_before(&err), None);
        assert_eq!(err.code(), limit_before(&err));
    }
    for err in llm_errors() {
        check(&err, llm_before(&err), None);
    }
    for err in [
        GrantError::Malformed,
        GrantError::Signature,
        GrantError::OtherSession,
        GrantError::OtherMachine,
    ] {
        check(&err, grant_before(&err), None);
    }
}

#[test]
fn desktop_failures_keep_the_references_details() {
    let stale = DesktopError::WindowStale {
        window_id: "w-1".to_owned(),
    };
    let Message::Error(payload) = failure(&stale) else {
        panic!("not an ERROR");
    };
    let details = payload.details.unwrap_or_default();
    assert_eq!(details["window_id"], "w-1");
    assert_eq!(details["hint"], "re-list windows");
}

#[test]
fn the_internal_error_is_generic_and_not_fatal() {
    let Message::Error(payload) = internal() else {
        panic!("not an ERROR");
    };
    assert_eq!(payload.code, OrUnknown::Known(ErrorCode::InternalError));
    assert_eq!(payload.message, "The operation failed unexpectedly.");
    assert!(payload.details.is_none() && !payload.fatal);
}
