//! Bearer tokens and grant digests: validated shapes and constant-time comparison.

use subtle::ConstantTimeEq;

/// A fresh random (version 4) id from the thread's CSPRNG, which is seeded from the OS once
/// instead of costing a system call per id.
#[must_use]
pub fn new_id() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid()
}

/// True when `text` is an RFC 6750 `b64token`: `[A-Za-z0-9._~+/-]+=*`.
#[must_use]
pub fn is_b64token(text: &str) -> bool {
    let body = text.trim_end_matches('=');
    !body.is_empty()
        && body.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'+' | b'/' | b'-')
        })
}

/// Compares two secrets without leaking where they differ through timing.
#[must_use]
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// The launcher's bearer token, held only when it has the shape the boundary accepts.
pub struct LocalToken(Vec<u8>);

impl LocalToken {
    /// The configured token, or `None` when it is empty or malformed (protected routes then
    /// answer 503 instead of start-up failing).
    #[must_use]
    pub fn from_configured(value: Option<&str>) -> Option<Self> {
        value
            .filter(|v| is_b64token(v))
            .map(|v| Self(v.as_bytes().to_vec()))
    }

    /// Whether a presented token equals this one, compared in constant time.
    #[must_use]
    pub fn matches(&self, presented: &str) -> bool {
        ct_eq(&self.0, presented.as_bytes())
    }
}

impl std::fmt::Debug for LocalToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_version_4_and_distinct() {
        let (a, b) = (new_id(), new_id());
        assert_eq!(a.get_version_num(), 4);
        assert_eq!(a.get_variant(), uuid::Variant::RFC4122);
        assert_ne!(a, b);
    }

    #[test]
    fn b64token_shapes() {
        for good in ["a", "abc123", "A-._~+/z", "abc==", "x="] {
            assert!(is_b64token(good), "{good}");
        }
        for bad in ["", "=", "a b", "a\tb", "ab=c", "é", "a,b"] {
            assert!(!is_b64token(bad), "{bad}");
        }
    }

    #[test]
    fn token_matches_only_itself_and_never_prints() {
        let token = LocalToken::from_configured(Some("private-token")).unwrap();
        assert!(token.matches("private-token"));
        assert!(!token.matches("private-toke"));
        assert!(!token.matches("private-tokenn"));
        assert!(!format!("{token:?}").contains("private"));
        assert!(LocalToken::from_configured(Some("bad token")).is_none());
        assert!(LocalToken::from_configured(Some("")).is_none());
    }
}
