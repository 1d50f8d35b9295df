//! Secrets: the one redacting wrapper every token and key type is built on ([`Redacted`]),
//! bearer token shapes and the bearer rule every loopback listener applies, and constant-time
//! comparison.

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

/// A secret that cannot slip into a log line: its `Debug` shows only `<redacted>` and it has
/// no `Display`, so a type wrapping it with a derived `Debug` prints `Name(<redacted>)`. The
/// value comes out only through [`Redacted::expose`], for the one place that must send or
/// store it. Equality of byte-like secrets is constant-time.
#[derive(Clone, Default)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    /// Wraps a secret.
    #[must_use]
    pub const fn new(value: T) -> Self {
        Self(value)
    }

    /// The secret itself.
    #[must_use]
    pub const fn expose(&self) -> &T {
        &self.0
    }

    /// The secret, unwrapped (to wipe it, say).
    #[must_use]
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T: AsRef<[u8]>> Redacted<T> {
    /// Whether `presented` equals this secret, compared in constant time.
    #[must_use]
    pub fn matches(&self, presented: &[u8]) -> bool {
        ct_eq(self.0.as_ref(), presented)
    }
}

impl<T> std::fmt::Debug for Redacted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl<T: AsRef<[u8]>> PartialEq for Redacted<T> {
    fn eq(&self, other: &Self) -> bool {
        self.matches(other.0.as_ref())
    }
}

impl<T: AsRef<[u8]>> Eq for Redacted<T> {}

/// The launcher's bearer token, held only when it has the shape the boundary accepts.
#[derive(Debug)]
pub struct LocalToken(Redacted<Vec<u8>>);

impl LocalToken {
    /// The configured token, or `None` when it is empty or malformed (protected routes then
    /// answer 503 instead of start-up failing).
    #[must_use]
    pub fn from_configured(value: Option<&str>) -> Option<Self> {
        value
            .filter(|v| is_b64token(v))
            .map(|v| Self(Redacted::new(v.as_bytes().to_vec())))
    }

    /// Whether a presented token equals this one, compared in constant time.
    #[must_use]
    pub fn matches(&self, presented: &str) -> bool {
        self.0.matches(presented.as_bytes())
    }
}

/// Why a presented bearer was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BearerFault {
    /// No `Authorization` value.
    Missing,
    /// Not exactly one value of the form `Bearer <b64token>`.
    Malformed,
    /// Well-formed, but not the expected token.
    Wrong,
}

/// The bearer rule (RFC 6750): exactly one `Authorization` value, of scheme `Bearer` (any
/// case), one space and a b64token equal to `token`, compared in constant time. `values` are
/// the request's `Authorization` header values, as bytes.
///
/// # Errors
/// The [`BearerFault`]; it never holds the presented value.
pub fn check_bearer<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
    token: &LocalToken,
) -> Result<(), BearerFault> {
    let mut values = values.into_iter();
    let value = match (values.next(), values.next()) {
        (None, _) => return Err(BearerFault::Missing),
        (Some(value), None) => value,
        (Some(_), Some(_)) => return Err(BearerFault::Malformed),
    };
    let Ok(value) = std::str::from_utf8(value) else {
        return Err(BearerFault::Malformed);
    };
    let Some((scheme, presented)) = value.split_once(' ') else {
        return Err(BearerFault::Malformed);
    };
    if !scheme.eq_ignore_ascii_case("bearer") || !is_b64token(presented) {
        return Err(BearerFault::Malformed);
    }
    if token.matches(presented) {
        Ok(())
    } else {
        Err(BearerFault::Wrong)
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

    #[test]
    fn bearer_rules() {
        let token = LocalToken::from_configured(Some("good")).unwrap();
        let check = |values: &[&str]| check_bearer(values.iter().map(|v| v.as_bytes()), &token);
        assert_eq!(check(&["Bearer good"]), Ok(()));
        assert_eq!(check(&["bEaReR good"]), Ok(()));
        for bad in [
            "",
            "Bearer",
            "Bearer ",
            "Basic good",
            "Bearer a b",
            "Bearer\tgood",
            "Bearer  good",
            "Bearer good ",
            "Bearer g\u{e9}od",
        ] {
            assert_eq!(check(&[bad]), Err(BearerFault::Malformed), "{bad:?}");
        }
        assert_eq!(
            check_bearer([b"Bearer \xff".as_slice()], &token),
            Err(BearerFault::Malformed)
        );
        assert_eq!(check(&["Bearer wrong"]), Err(BearerFault::Wrong));
        assert_eq!(check(&["Bearer goo"]), Err(BearerFault::Wrong));
        assert_eq!(
            check(&["Bearer good", "Bearer good"]),
            Err(BearerFault::Malformed)
        );
        assert_eq!(check(&[]), Err(BearerFault::Missing));
    }

    #[test]
    fn redacted_values_never_print_and_compare_by_content() {
        #[derive(Debug)]
        struct Key(Redacted<String>);
        let key = Key(Redacted::new("sk-private".to_owned()));
        assert_eq!(format!("{key:?}"), "Key(<redacted>)");
        assert_eq!(key.0.expose(), "sk-private");
        assert!(key.0.matches(b"sk-private"));
        assert!(!key.0.matches(b"sk-privat"));
        assert_eq!(key.0, Redacted::new("sk-private".to_owned()));
        assert_ne!(key.0, Redacted::new("sk-other".to_owned()));
    }
}
