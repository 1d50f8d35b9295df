//! Control-connection payloads: directory browsing and attaching, activating, restoring
//! and detaching per-chat sessions.

use serde::{Deserialize, Serialize};

use super::codes::ErrorCode;
use super::handshake::check_session_id;
use super::messages::{Invalid, Payload};

/// Browse ids, directory references and cursors are 1..=256 characters.
pub const MAX_REFERENCE_CHARS: usize = 256;
/// At most this many entries per DIRECTORY_LIST_RESPONSE page.
pub const MAX_DIRECTORY_ENTRIES: usize = 200;

fn check_reference(name: &'static str, value: Option<&str>) -> Result<(), Invalid> {
    match value {
        Some(v) if v.is_empty() || v.chars().count() > MAX_REFERENCE_CHARS => Err(Invalid::at(
            name,
            format!("{name} must be 1 to {MAX_REFERENCE_CHARS} characters"),
        )),
        _ => Ok(()),
    }
}

fn check_session(session_id: &str) -> Result<(), Invalid> {
    check_session_id(session_id).map_err(|reason| Invalid::at("session_id", reason))
}

/// `DIRECTORY_LIST_REQUEST` (platform → shim): both references null starts a browse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectoryListRequestPayload {
    /// Opaque browse id minted by the shim, or null to start one.
    #[serde(default)]
    pub browse_id: Option<String>,
    /// Opaque directory reference minted by the shim, or null to start a browse.
    #[serde(default)]
    pub directory_ref: Option<String>,
    /// A `next_cursor` from an earlier page of the same browse and directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl Payload for DirectoryListRequestPayload {
    fn validate(&self) -> Result<(), Invalid> {
        check_reference("browse_id", self.browse_id.as_deref())?;
        check_reference("directory_ref", self.directory_ref.as_deref())?;
        check_reference("cursor", self.cursor.as_deref())?;
        if self.browse_id.is_some() != self.directory_ref.is_some() {
            return Err(Invalid::at(
                "browse_id",
                "browse_id and directory_ref must both be null or both be set",
            ));
        }
        if self.cursor.is_some() && self.browse_id.is_none() {
            return Err(Invalid::at(
                "cursor",
                "cursor requires browse_id and directory_ref",
            ));
        }
        Ok(())
    }

    /// PROTOCOL.md: a malformed browse/reference pair is `DIRECTORY_REFERENCE_INVALID`, and
    /// every field of this request is part of that pair or its cursor.
    fn invalid_code(_field: Option<&str>) -> ErrorCode {
        ErrorCode::DirectoryReferenceInvalid
    }
}

/// One directory of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectoryEntry {
    /// Opaque reference for a later request or ATTACH_SESSION.
    pub directory_ref: String,
    /// Display name.
    pub name: String,
    /// Canonical absolute path.
    pub path: String,
}

/// `DIRECTORY_LIST_RESPONSE` (shim → platform).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectoryListResponsePayload {
    /// The browse these references belong to.
    pub browse_id: String,
    /// The listed directory; null for the virtual roots.
    pub current: Option<DirectoryEntry>,
    /// Reference of the parent; null at the roots.
    pub parent_ref: Option<String>,
    /// Immediate real subdirectories (at most [`MAX_DIRECTORY_ENTRIES`]).
    pub entries: Vec<DirectoryEntry>,
    /// Another page is available with this cursor.
    pub next_cursor: Option<String>,
    /// The hard scan or reference bound omitted entries.
    pub truncated: bool,
    /// Epoch seconds when the browse expires.
    pub expires_at: f64,
}

impl Payload for DirectoryListResponsePayload {}

/// `ATTACH_SESSION` (platform → shim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachSessionPayload {
    /// The platform's session id.
    #[serde(default)]
    pub session_id: String,
    /// Browse the reference came from.
    #[serde(default)]
    pub browse_id: String,
    /// The folder the user picked.
    #[serde(default)]
    pub directory_ref: String,
    /// For platform race detection; the shim ignores it by design.
    #[serde(default)]
    pub expected_connection_id: Option<String>,
}

impl Payload for AttachSessionPayload {
    fn validate(&self) -> Result<(), Invalid> {
        check_session(&self.session_id)?;
        check_reference("browse_id", Some(&self.browse_id))?;
        check_reference("directory_ref", Some(&self.directory_ref))
    }

    /// A malformed (or missing) reference is `DIRECTORY_REFERENCE_INVALID`; the session id
    /// has no code of its own in the spec.
    fn invalid_code(field: Option<&str>) -> ErrorCode {
        match field {
            Some("browse_id" | "directory_ref") => ErrorCode::DirectoryReferenceInvalid,
            _ => ErrorCode::InternalError,
        }
    }
}

/// `SESSION_ATTACHED` (shim → platform).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionAttachedPayload {
    /// The session now bound to a root.
    pub session_id: String,
    /// Canonical root.
    pub allowed_root: String,
    /// 64 lowercase hex characters identifying path and filesystem object.
    pub fingerprint: String,
    /// Binding revision, starting at 1.
    pub revision: u64,
    /// Signed, durable grant for RESTORE_SESSION.
    pub root_grant: String,
}

impl Payload for SessionAttachedPayload {}

/// `ACTIVATE_SESSION` (platform → shim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivateSessionPayload {
    /// Session to start a child runtime for.
    #[serde(default)]
    pub session_id: String,
    /// The binding revision the platform expects (missing reads as 0, which is refused).
    #[serde(default)]
    pub revision: u64,
}

impl Payload for ActivateSessionPayload {
    fn validate(&self) -> Result<(), Invalid> {
        check_session(&self.session_id)?;
        if self.revision == 0 {
            Err(Invalid::at("revision", "revision must be at least 1"))
        } else {
            Ok(())
        }
    }

    /// A revision that is missing, not a positive integer or out of range can match no
    /// binding: `SESSION_REVISION_MISMATCH`, the spec's code for a stale or conflicting one.
    fn invalid_code(field: Option<&str>) -> ErrorCode {
        match field {
            Some("revision") => ErrorCode::SessionRevisionMismatch,
            _ => ErrorCode::InternalError,
        }
    }
}

/// `SESSION_ACTIVATED` (shim → platform).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionActivatedPayload {
    /// The activated session.
    pub session_id: String,
    /// Its root.
    pub allowed_root: String,
    /// Root fingerprint.
    pub fingerprint: String,
    /// Binding revision.
    pub revision: u64,
}

impl Payload for SessionActivatedPayload {}

/// `RESTORE_SESSION` (platform → shim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreSessionPayload {
    /// Session to restore.
    #[serde(default)]
    pub session_id: String,
    /// Grant from an earlier SESSION_ATTACHED or SESSION_RESTORED.
    #[serde(default)]
    pub root_grant: String,
}

impl Payload for RestoreSessionPayload {
    fn validate(&self) -> Result<(), Invalid> {
        check_session(&self.session_id)?;
        if self.root_grant.is_empty() {
            return Err(Invalid::at("root_grant", "root_grant is required"));
        }
        Ok(())
    }

    /// PROTOCOL.md: a malformed grant is `ROOT_GRANT_INVALID`.
    fn invalid_code(field: Option<&str>) -> ErrorCode {
        match field {
            Some("root_grant") => ErrorCode::RootGrantInvalid,
            _ => ErrorCode::InternalError,
        }
    }
}

/// `SESSION_RESTORED` (shim → platform).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRestoredPayload {
    /// The restored session.
    pub session_id: String,
    /// Its root.
    pub allowed_root: String,
    /// Root fingerprint.
    pub fingerprint: String,
    /// Binding revision.
    pub revision: u64,
    /// The grant that was verified.
    pub root_grant: String,
}

impl Payload for SessionRestoredPayload {}

/// `DETACH_SESSION` (platform → shim); answered with ACK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetachSessionPayload {
    /// Session to stop and unbind.
    #[serde(default)]
    pub session_id: String,
}

impl Payload for DetachSessionPayload {
    fn validate(&self) -> Result<(), Invalid> {
        check_session(&self.session_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> Result<(), String> {
        let payload: DirectoryListRequestPayload =
            serde_json::from_str(text).map_err(|e| e.to_string())?;
        payload.validate().map_err(|invalid| invalid.reason)
    }

    #[test]
    fn browse_pair_rules() {
        assert_eq!(
            request(r#"{"browse_id": null, "directory_ref": null}"#),
            Ok(())
        );
        assert_eq!(request("{}"), Ok(()));
        assert_eq!(
            request(r#"{"browse_id": "b", "directory_ref": "d", "cursor": "c"}"#),
            Ok(())
        );
        assert!(
            request(r#"{"browse_id": "b", "directory_ref": null}"#)
                .unwrap_err()
                .contains("both")
        );
        assert!(
            request(r#"{"browse_id": null, "directory_ref": "d"}"#)
                .unwrap_err()
                .contains("both")
        );
        assert!(
            request(r#"{"cursor": "c"}"#)
                .unwrap_err()
                .contains("cursor requires")
        );
        assert!(request(r#"{"browse_id": "", "directory_ref": "d"}"#).is_err());
        let long = "r".repeat(257);
        assert!(
            request(&format!(
                r#"{{"browse_id": "b", "directory_ref": "{long}"}}"#
            ))
            .is_err()
        );
        let edge = "r".repeat(256);
        assert_eq!(
            request(&format!(
                r#"{{"browse_id": "b", "directory_ref": "{edge}"}}"#
            )),
            Ok(())
        );
    }

    #[test]
    fn session_ids_are_checked() {
        let bad = DetachSessionPayload {
            session_id: "../control?admin=true".to_owned(),
        };
        assert!(bad.validate().is_err());
        let zero = ActivateSessionPayload {
            session_id: "s".to_owned(),
            revision: 0,
        };
        assert!(zero.validate().is_err());
    }
}
