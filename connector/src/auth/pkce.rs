//! PKCE (RFC 7636, method S256) and the OAuth `state`, drawn from the operating system's
//! random source: a 64-byte verifier and a 32-byte state, both base64url without padding, as
//! the reference's `secrets.token_urlsafe` makes them.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::TryRng;
use rand::rngs::SysRng;
use sha2::{Digest, Sha256};

use super::Secret;

/// Random bytes in the PKCE verifier (86 characters once encoded, inside RFC 7636's 43-128).
pub const VERIFIER_BYTES: usize = 64;
/// Random bytes in the state.
pub const STATE_BYTES: usize = 32;

/// The challenge method sent with the authorize request.
pub const METHOD: &str = "S256";

/// Why no random value could be drawn.
#[derive(Debug, thiserror::Error)]
#[error("the operating system's random source failed: {0}")]
pub struct RandomError(String);

/// One login's verifier and its challenge.
#[derive(Debug, Clone)]
pub struct Pkce {
    /// Sent only to the token endpoint, with the code.
    pub verifier: Secret,
    /// `base64url(SHA-256(verifier))`, sent with the authorize request.
    pub challenge: String,
}

impl Pkce {
    /// A fresh verifier and its S256 challenge.
    ///
    /// # Errors
    /// The OS random source failed.
    pub fn generate() -> Result<Self, RandomError> {
        let verifier = random_urlsafe(VERIFIER_BYTES)?;
        let challenge = challenge(&verifier);
        let verifier = Secret::new(&verifier).ok_or_else(|| RandomError("empty".to_owned()))?;
        Ok(Self {
            verifier,
            challenge,
        })
    }
}

/// The S256 challenge of a verifier.
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A fresh state value.
///
/// # Errors
/// The OS random source failed.
pub fn state() -> Result<String, RandomError> {
    random_urlsafe(STATE_BYTES)
}

/// `bytes` bytes from the OS random source, base64url without padding.
///
/// # Errors
/// The OS random source failed.
pub fn random_urlsafe(bytes: usize) -> Result<String, RandomError> {
    let mut buf = vec![0u8; bytes];
    SysRng
        .try_fill_bytes(&mut buf)
        .map_err(|err| RandomError(err.to_string()))?;
    Ok(URL_SAFE_NO_PAD.encode(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636_s256() {
        // RFC 7636 appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn verifiers_and_states_are_long_urlsafe_and_distinct() {
        let a = Pkce::generate().unwrap();
        let b = Pkce::generate().unwrap();
        let verifier = a.verifier.expose();
        assert_eq!(verifier.len(), 86);
        assert!((43..=128).contains(&verifier.len()));
        assert!(
            verifier
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
        assert_ne!(a.verifier, b.verifier);
        assert_eq!(a.challenge, challenge(verifier));
        let (s1, s2) = (state().unwrap(), state().unwrap());
        assert_eq!(s1.len(), 43);
        assert_ne!(s1, s2);
    }
}
