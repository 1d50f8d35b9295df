//! When a stored OAuth access token is due for a refresh, read from the token itself: the
//! platform's access tokens are JWTs whose `exp` claim says when it stops accepting them, so
//! the connector can refresh shortly before instead of spending a dial on the 401. A token
//! that is not a JWT, or has no usable `exp`, has no expiry here and is refreshed only when
//! the platform rejects it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use super::Secret;

/// A token is refreshed at least this long before its `exp`.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// Up to this much more margin, drawn afresh for every dial, so the connections of a machine
/// (and machines whose tokens were issued together) do not all refresh at the same instant.
pub const REFRESH_JITTER: Duration = Duration::from_secs(30);

/// The two registered claims read; anything else in the token is ignored.
#[derive(Deserialize)]
struct Claims {
    exp: Option<f64>,
    iat: Option<f64>,
}

/// When an access token stops being accepted, and how long it was issued for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    /// The `exp` claim.
    pub at: SystemTime,
    /// `exp - iat`, or `exp` minus the time the token was received when it has no `iat`.
    pub lifetime: Duration,
}

impl Expiry {
    /// The expiry of `token`, received at `received`; `None` when it is not a JWT or carries
    /// no usable `exp`.
    pub fn of(token: &Secret, received: SystemTime) -> Option<Self> {
        // Decoded WITHOUT verifying the signature, on purpose: we are the token's holder, not
        // its audience. The platform verifies it on every upgrade, and we have no key to
        // verify it with. Nothing is trusted from it but a hint of when to refresh: a wrong
        // `exp` can at worst cost an early refresh, or a late one that the 401 fallback still
        // catches.
        let claims: Claims =
            jsonwebtoken::dangerous::insecure_decode_claims(token.expose()).ok()?;
        let at = instant(claims.exp?)?;
        // Both claims come from the issuer's clock, so their difference is skew-free.
        let issued = claims
            .iat
            .and_then(instant)
            .filter(|iat| *iat < at)
            .unwrap_or(received);
        let lifetime = at.duration_since(issued).unwrap_or(Duration::ZERO);
        Some(Self { at, lifetime })
    }

    /// Whether a dial at `now` should refresh first: when less than the margin is left, that
    /// is [`REFRESH_MARGIN`] plus `jitter` (a sample in `[0, 1)`) times [`REFRESH_JITTER`],
    /// but never more than half the token's lifetime, so that a token issued for less than
    /// two minutes is not refreshed on every dial. An expired token is always due.
    pub fn due(&self, now: SystemTime, jitter: f64) -> bool {
        let margin = (REFRESH_MARGIN + REFRESH_JITTER.mul_f64(jitter.clamp(0.0, 1.0)))
            .min(self.lifetime / 2);
        self.at.checked_sub(margin).is_none_or(|point| now >= point)
    }
}

/// A NumericDate (seconds since the epoch, possibly fractional) as a time; `None` when it is
/// negative, not finite, or beyond what the platform's clock can hold.
fn instant(seconds: f64) -> Option<SystemTime> {
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    UNIX_EPOCH.checked_add(Duration::try_from_secs_f64(seconds).ok()?)
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    use super::*;

    /// A JWT with these claims and a signature nobody checks here.
    fn jwt(claims: &serde_json::Value) -> Secret {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        Secret::new(&format!("{header}.{payload}.c2lnbmF0dXJl")).unwrap()
    }

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    const EXP: u64 = 1_900_000_000;

    #[test]
    fn tokens_without_a_usable_exp_have_no_expiry() {
        let received = at(EXP - 3600);
        let opaque = Secret::new("fake-access-0123456789abcdef").unwrap();
        assert_eq!(Expiry::of(&opaque, received), None);
        assert_eq!(
            Expiry::of(&Secret::new("a.b.c").unwrap(), received),
            None,
            "three parts that are not base64 JSON"
        );
        for claims in [
            serde_json::json!({"sub": "user-1"}),
            serde_json::json!({"exp": "tomorrow"}),
            serde_json::json!({"exp": -5}),
            serde_json::json!({"exp": 1e300}),
            serde_json::json!({"exp": null}),
        ] {
            assert_eq!(Expiry::of(&jwt(&claims), received), None, "{claims}");
        }
    }

    #[test]
    fn exp_and_iat_give_the_expiry_and_the_lifetime() {
        let token = jwt(&serde_json::json!({"sub": "u", "iat": EXP - 3600, "exp": EXP}));
        // The lifetime is the issuer's, whenever the token arrived.
        let expiry = Expiry::of(&token, at(EXP - 10)).unwrap();
        assert_eq!(expiry.at, at(EXP));
        assert_eq!(expiry.lifetime, Duration::from_secs(3600));
        // Without `iat` (or with one not before `exp`) it runs from receipt.
        for claims in [
            serde_json::json!({"exp": EXP}),
            serde_json::json!({"exp": EXP, "iat": EXP + 1}),
        ] {
            let expiry = Expiry::of(&jwt(&claims), at(EXP - 100)).unwrap();
            assert_eq!(expiry.lifetime, Duration::from_secs(100), "{claims}");
        }
        // Received after its `exp`: no lifetime left.
        let late = Expiry::of(&jwt(&serde_json::json!({"exp": EXP})), at(EXP + 5)).unwrap();
        assert_eq!(late.lifetime, Duration::ZERO);
        // A fractional NumericDate is allowed by RFC 7519.
        let fraction = Expiry::of(&jwt(&serde_json::json!({"exp": 1.5})), UNIX_EPOCH).unwrap();
        assert_eq!(fraction.at, UNIX_EPOCH + Duration::from_millis(1500));
    }

    #[test]
    fn an_hour_token_is_due_sixty_to_ninety_seconds_before_exp() {
        let expiry = Expiry {
            at: at(EXP),
            lifetime: Duration::from_secs(3600),
        };
        assert!(!expiry.due(at(EXP - 61), 0.0));
        assert!(expiry.due(at(EXP - 60), 0.0));
        // The jitter widens the margin up to 90 s, never below 60 s.
        assert!(expiry.due(at(EXP - 89), 0.999));
        assert!(!expiry.due(at(EXP - 91), 0.999));
        assert!(!expiry.due(at(EXP - 76), 0.5));
        assert!(expiry.due(at(EXP - 75), 0.5));
        // Out-of-range samples are clamped.
        assert!(!expiry.due(at(EXP - 91), 7.0));
        assert!(!expiry.due(at(EXP - 61), -1.0));
        // Expired: due, whatever the jitter.
        assert!(expiry.due(at(EXP), 0.0));
        assert!(expiry.due(at(EXP + 3600), 0.3));
    }

    #[test]
    fn a_short_token_is_due_at_half_its_lifetime() {
        let expiry = Expiry {
            at: at(EXP),
            lifetime: Duration::from_secs(10),
        };
        assert!(!expiry.due(at(EXP - 6), 0.9));
        assert!(expiry.due(at(EXP - 5), 0.0));
        let spent = Expiry {
            at: at(EXP),
            lifetime: Duration::ZERO,
        };
        assert!(!spent.due(at(EXP - 1), 0.5));
        assert!(spent.due(at(EXP), 0.5));
        // An `exp` too close to the epoch for the margin is due at once.
        let early = Expiry {
            at: at(30),
            lifetime: Duration::from_secs(3600),
        };
        assert!(early.due(at(0), 0.0));
    }
}
