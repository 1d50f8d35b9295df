//! Signed root grants: the durable, tamper-evident record that a session was bound to a
//! folder, `v1.<base64url claims>.<base64url HMAC-SHA256>`, byte-compatible with the
//! reference shim's grants (shim-reference-behaviour.md section 5, "Root grant format and
//! key"). Not encrypted; never expires.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::Deserialize;
use sha2::Sha256;

use crate::machine::audit_chain::{python_float_repr, python_json_string};
use crate::secret::Redacted;

fn json_ascii_string(text: &str) -> String {
    python_json_string(text, true)
}

type HmacSha256 = Hmac<Sha256>;

/// The label the grant key is derived with from the machine audit key.
pub const KEY_LABEL: &[u8] = b"autogpt-root-grant-v1";
/// The only grant version.
const VERSION: &str = "v1";

/// What a grant says.
#[derive(Debug, Clone, PartialEq)]
pub struct Claims {
    /// Canonical root.
    pub allowed_root: String,
    /// The root's fingerprint when the grant was issued.
    pub fingerprint: String,
    /// Epoch seconds of issue (informational; never checked).
    pub issued_at: f64,
    /// The issuing machine.
    pub machine_id: String,
    /// Binding revision, at least 1.
    pub revision: u64,
    /// The bound session.
    pub session_id: String,
}

/// Why a grant does not verify; the messages are the reference's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// Not three segments, not `v1`, undecodable claims or claims of the wrong shape.
    #[error("Root grant is malformed")]
    Malformed,
    /// The signature does not match.
    #[error("Root grant signature is invalid")]
    Signature,
    /// Signed for another session.
    #[error("Root grant belongs to another session")]
    OtherSession,
    /// Signed by another machine.
    #[error("Root grant belongs to another machine")]
    OtherMachine,
}

/// The grant signer, keyed from the machine audit key.
#[derive(Clone, Debug)]
pub struct GrantKey(Redacted<[u8; 32]>);

impl GrantKey {
    /// `HMAC-SHA256(audit_key, "autogpt-root-grant-v1")`.
    #[must_use]
    pub fn derive(audit_key: &[u8; 32]) -> Self {
        Self(Redacted::new(mac(audit_key, KEY_LABEL)))
    }

    /// Signs `claims` into a grant string.
    #[must_use]
    pub fn sign(&self, claims: &Claims) -> String {
        let segment = URL_SAFE_NO_PAD.encode(canonical_claims(claims));
        let signature = URL_SAFE_NO_PAD.encode(mac(self.0.expose(), segment.as_bytes()));
        format!("{VERSION}.{segment}.{signature}")
    }

    /// Checks the signature and the session and machine bindings and returns the claims;
    /// the caller still checks the root and its fingerprint against the filesystem.
    ///
    /// # Errors
    /// See [`GrantError`].
    pub fn verify(
        &self,
        grant: &str,
        session_id: &str,
        machine_id: &str,
    ) -> Result<Claims, GrantError> {
        let mut parts = grant.splitn(3, '.');
        let (Some(version), Some(segment), Some(signature)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(GrantError::Malformed);
        };
        if version != VERSION {
            return Err(GrantError::Malformed);
        }
        let expected = URL_SAFE_NO_PAD.encode(mac(self.0.expose(), segment.as_bytes()));
        if !crate::secret::ct_eq(expected.as_bytes(), signature.as_bytes()) {
            return Err(GrantError::Signature);
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(segment)
            .map_err(|_| GrantError::Malformed)?;
        let wire: WireClaims = serde_json::from_slice(&bytes).map_err(|_| GrantError::Malformed)?;
        let revision = wire
            .revision
            .as_u64()
            .filter(|&r| r >= 1)
            .ok_or(GrantError::Malformed)?;
        let issued_at = wire.issued_at.as_f64().ok_or(GrantError::Malformed)?;
        if wire.session_id != session_id {
            return Err(GrantError::OtherSession);
        }
        if wire.machine_id != machine_id {
            return Err(GrantError::OtherMachine);
        }
        Ok(Claims {
            allowed_root: wire.allowed_root,
            fingerprint: wire.fingerprint,
            issued_at,
            machine_id: wire.machine_id,
            revision,
            session_id: wire.session_id,
        })
    }
}

#[derive(Deserialize)]
struct WireClaims {
    allowed_root: String,
    fingerprint: String,
    issued_at: serde_json::Number,
    machine_id: String,
    revision: serde_json::Number,
    session_id: String,
}

/// The claims as Python's `json.dumps(sort_keys=True, separators=(",", ":"))` writes them:
/// sorted keys, no spaces, non-ASCII escaped, `issued_at` in Python's float repr.
fn canonical_claims(claims: &Claims) -> String {
    let issued_at = python_float_repr(claims.issued_at).unwrap_or_else(|| "0.0".to_owned());
    format!(
        r#"{{"allowed_root":{},"fingerprint":{},"issued_at":{issued_at},"machine_id":{},"revision":{},"session_id":{}}}"#,
        json_ascii_string(&claims.allowed_root),
        json_ascii_string(&claims.fingerprint),
        json_ascii_string(&claims.machine_id),
        claims.revision,
        json_ascii_string(&claims.session_id),
    )
}

fn mac(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length.
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(message);
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            allowed_root: "/home/alice/Projekté".to_owned(),
            fingerprint: "a".repeat(64),
            issued_at: 1_712_345_678.125,
            machine_id: "m-1".to_owned(),
            revision: 3,
            session_id: "sess-1".to_owned(),
        }
    }

    /// Computed with the reference's recipe in Python:
    /// `k = hmac.new(bytes(range(32)), b"autogpt-root-grant-v1", sha256).digest()`,
    /// `c = json.dumps(claims, sort_keys=True, separators=(",", ":")).encode()`,
    /// `seg = urlsafe_b64encode(c).rstrip(b"=")`,
    /// `"v1." + seg + "." + urlsafe_b64encode(hmac.new(k, seg, sha256).digest()).rstrip(b"=")`.
    const KNOWN: &str = "v1.eyJhbGxvd2VkX3Jvb3QiOiIvaG9tZS9hbGljZS9Qcm9qZWt0XHUwMGU5IiwiZmluZ2VycHJpbnQiOiJhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhIiwiaXNzdWVkX2F0IjoxNzEyMzQ1Njc4LjEyNSwibWFjaGluZV9pZCI6Im0tMSIsInJldmlzaW9uIjozLCJzZXNzaW9uX2lkIjoic2Vzcy0xIn0.plwbCtITcQB4WPTYZrT5qXFy640MuTSbh2nk3VbrrIg";

    #[test]
    fn signs_byte_compatibly_with_the_reference() {
        let key: [u8; 32] = std::array::from_fn(|i| u8::try_from(i).unwrap());
        let grant = GrantKey::derive(&key).sign(&claims());
        assert_eq!(grant, KNOWN);
    }

    #[test]
    fn verifies_and_refuses_tampering_and_foreign_bindings() {
        let key = GrantKey::derive(&[9u8; 32]);
        let grant = key.sign(&claims());
        assert_eq!(key.verify(&grant, "sess-1", "m-1"), Ok(claims()));
        let mut tampered = grant.clone();
        let last = tampered.pop().unwrap();
        tampered.push(if last == 'A' { 'B' } else { 'A' });
        assert_eq!(
            key.verify(&tampered, "sess-1", "m-1"),
            Err(GrantError::Signature)
        );
        assert_eq!(
            key.verify(&grant, "sess-2", "m-1"),
            Err(GrantError::OtherSession)
        );
        assert_eq!(
            key.verify(&grant, "sess-1", "m-2"),
            Err(GrantError::OtherMachine)
        );
        let other = GrantKey::derive(&[8u8; 32]);
        assert_eq!(
            other.verify(&grant, "sess-1", "m-1"),
            Err(GrantError::Signature)
        );
        for bad in ["", "v1", "v1.abc", "v2.a.b", "garbage.x.y"] {
            assert!(key.verify(bad, "sess-1", "m-1").is_err(), "{bad}");
        }
        assert!(!format!("{key:?}").contains('9'));
    }
}
