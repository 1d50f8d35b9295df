//! The bearer token of one launch: 32 bytes from the operating system's random source,
//! base64url without padding (43 characters, inside the API's `[A-Za-z0-9._~+/-]+=*`).
//!
//! The token lives in memory only: it reaches the children through `MSGUIDE_LOCAL_TOKEN`,
//! never through argv or a file, and is printed once, to stdout, in headless mode only.
//! Its type has no `Display` and a redacted `Debug`, so it cannot slip into a log line.
//! Dropping it overwrites its bytes (best effort: copies that std's `Command` makes while
//! spawning, the one hyper writes the readiness request from, and the children's own copies
//! are beyond reach without `unsafe`).

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use local_core::secret::Redacted;
use rand::{TryRng, rngs::SysRng};

/// How many random bytes a token carries.
pub const TOKEN_BYTES: usize = 32;

/// The token could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the token from the operating system's random source: {0}")]
pub struct TokenError(rand::rngs::SysError);

/// The launch's bearer token.
#[derive(Debug)]
pub struct LaunchToken(Redacted<String>);

impl LaunchToken {
    /// A fresh token straight from the OS CSPRNG (`getrandom`), not from a user-space PRNG.
    pub fn mint() -> Result<Self, TokenError> {
        let mut raw = [0u8; TOKEN_BYTES];
        SysRng.try_fill_bytes(&mut raw).map_err(TokenError)?;
        let token = Self::from_bytes(&raw);
        raw.fill(0);
        std::hint::black_box(&raw);
        Ok(token)
    }

    fn from_bytes(raw: &[u8; TOKEN_BYTES]) -> Self {
        Self(Redacted::new(URL_SAFE_NO_PAD.encode(raw)))
    }

    /// The token's text, for the children's environment, the `Authorization` header and the
    /// one headless print.
    #[must_use]
    pub fn expose(&self) -> &str {
        self.0.expose()
    }
}

impl Drop for LaunchToken {
    fn drop(&mut self) {
        wipe(std::mem::take(&mut self.0).into_inner().into_bytes());
    }
}

/// Overwrites bytes that held a secret before freeing them. `black_box` keeps the compiler
/// from dropping the writes as dead stores.
pub fn wipe(mut bytes: Vec<u8>) {
    bytes.fill(0);
    std::hint::black_box(&bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_tokens_have_the_apis_shape() {
        let a = LaunchToken::mint().unwrap();
        let b = LaunchToken::mint().unwrap();
        assert_ne!(a.expose(), b.expose(), "every launch gets its own token");
        for token in [&a, &b] {
            // 32 bytes in base64 without padding: ceil(32 * 4 / 3) characters.
            assert_eq!(token.expose().len(), 43);
            assert!(
                token
                    .expose()
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'),
                "base64url alphabet only"
            );
            assert!(
                local_core::secret::is_b64token(token.expose()),
                "accepted by the API's MSGUIDE_LOCAL_TOKEN rule"
            );
        }
    }

    #[test]
    fn encodes_all_32_bytes() {
        let raw: [u8; TOKEN_BYTES] = std::array::from_fn(|i| (i * 37) as u8);
        let token = LaunchToken::from_bytes(&raw);
        assert_eq!(URL_SAFE_NO_PAD.decode(token.expose()).unwrap(), raw);
        // Every byte value keeps the shape, including the ones base64 maps to `-` and `_`.
        let high = LaunchToken::from_bytes(&[0xFF; TOKEN_BYTES]);
        assert!(high.expose().contains('_'));
        assert!(local_core::secret::is_b64token(high.expose()));
    }

    #[test]
    fn never_prints() {
        let token = LaunchToken::mint().unwrap();
        let shown = format!("{token:?}");
        assert_eq!(shown, "LaunchToken(<redacted>)");
        assert!(!shown.contains(token.expose()));
    }
}
