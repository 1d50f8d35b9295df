//! Wire-protocol versions: the constant this shim speaks, HELLO-time negotiation, and the
//! JSON close reason sent when majors disagree.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The highest protocol version this shim speaks.
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion { major: 1, minor: 1 };

/// [`PROTOCOL_VERSION`] as it appears on the wire.
pub const PROTOCOL_VERSION_STR: &str = "1.1";

/// RFC 6455 caps a close frame's reason at 123 bytes (125 minus the status code).
pub const MAX_CLOSE_REASON_BYTES: usize = 123;

/// A `"major.minor"` protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProtocolVersion {
    /// Incompatible changes bump this.
    pub major: u32,
    /// Forward-compatible additions bump this.
    pub minor: u32,
}

impl ProtocolVersion {
    /// Parses exactly two runs of ASCII digits joined by one dot; `"1"`, `"v1.0"` and
    /// `"1.0.1"` are malformed.
    pub fn parse(value: &str) -> Result<Self, VersionError> {
        let malformed = || VersionError::Malformed {
            value: value.to_owned(),
        };
        let (major, minor) = value.split_once('.').ok_or_else(malformed)?;
        let number = |part: &str| {
            // `u32::from_str` alone would also accept a leading `+`.
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            part.parse::<u32>().ok()
        };
        match (number(major), number(minor)) {
            (Some(major), Some(minor)) => Ok(Self { major, minor }),
            _ => Err(malformed()),
        }
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Why two advertised versions cannot be used together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// A version string is not `"major.minor"`.
    #[error("malformed protocol version {value:?}")]
    Malformed {
        /// The string as received.
        value: String,
    },
    /// The majors differ: close with 4426 and do not reconnect.
    #[error("protocol major mismatch: shim supports {shim_max}, platform supports {platform_max}")]
    MajorMismatch {
        /// The shim's maximum.
        shim_max: ProtocolVersion,
        /// The platform's maximum.
        platform_max: ProtocolVersion,
    },
}

/// The effective version for a shim maximum and a platform maximum: same major and the
/// lower minor, or an error when either is malformed or the majors differ.
pub fn negotiate(shim_max: &str, platform_max: &str) -> Result<ProtocolVersion, VersionError> {
    let shim = ProtocolVersion::parse(shim_max)?;
    let platform = ProtocolVersion::parse(platform_max)?;
    if shim.major != platform.major {
        return Err(VersionError::MajorMismatch {
            shim_max: shim,
            platform_max: platform,
        });
    }
    Ok(ProtocolVersion {
        major: shim.major,
        minor: shim.minor.min(platform.minor),
    })
}

/// The JSON close reason of a 4426 close, field order as in the spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionMismatchReason {
    /// Always `"PROTOCOL_VERSION_MISMATCH"` when we build it.
    pub error: String,
    /// The shim's maximum version as advertised.
    pub shim_max: String,
    /// The platform's maximum version as advertised.
    pub platform_max: String,
    /// Free text for the operator.
    pub hint: String,
}

/// Builds the 4426 close reason, guaranteed to fit [`MAX_CLOSE_REASON_BYTES`].
///
/// The hint is shortened first; only if the skeleton alone is too long (a peer can send
/// an arbitrarily long garbage version) are the versions shortened too, platform first.
/// Cuts fall on character boundaries and account for JSON escaping.
pub fn version_mismatch_close_reason(shim_max: &str, platform_max: &str, hint: &str) -> String {
    let render = |shim: &str, platform: &str, hint: &str| {
        let reason = VersionMismatchReason {
            error: "PROTOCOL_VERSION_MISMATCH".to_owned(),
            shim_max: shim.to_owned(),
            platform_max: platform.to_owned(),
            hint: hint.to_owned(),
        };
        serde_json::to_string(&reason).unwrap_or_default()
    };
    let fits = |text: &String| !text.is_empty() && text.len() <= MAX_CLOSE_REASON_BYTES;

    let hint = longest_prefix(hint, |h| fits(&render(shim_max, platform_max, h)));
    let platform_max = longest_prefix(platform_max, |p| fits(&render(shim_max, p, hint)));
    let shim_max = longest_prefix(shim_max, |s| fits(&render(s, platform_max, hint)));
    let reason = render(shim_max, platform_max, hint);
    if fits(&reason) { reason } else { String::new() }
}

/// The longest prefix of `text` (cut at a char boundary) that `fits`; fitting is assumed
/// monotone in length, which holds for "serialised length ≤ limit".
fn longest_prefix(text: &str, fits: impl Fn(&str) -> bool) -> &str {
    if fits(text) {
        return text;
    }
    let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    // Invariant: prefix ending at boundaries[lo] fits (index 0 is the empty prefix, which
    // the caller's skeleton makes fit), prefix ending at boundaries[hi] does not.
    let (mut lo, mut hi) = (0usize, boundaries.len());
    let end = |i: usize| boundaries.get(i).copied().unwrap_or(text.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(&text[..end(mid)]) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    &text[..end(lo)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(major: u32, minor: u32) -> ProtocolVersion {
        ProtocolVersion { major, minor }
    }

    #[test]
    fn constant_is_1_1() {
        assert_eq!(PROTOCOL_VERSION, v(1, 1));
        assert_eq!(PROTOCOL_VERSION.to_string(), PROTOCOL_VERSION_STR);
    }

    #[test]
    fn negotiation_floors_the_minor_in_both_directions() {
        assert_eq!(negotiate("1.1", "1.0"), Ok(v(1, 0)));
        assert_eq!(negotiate("1.0", "1.1"), Ok(v(1, 0)));
        assert_eq!(negotiate("1.1", "1.5"), Ok(v(1, 1)));
        assert_eq!(negotiate("1.5", "1.1"), Ok(v(1, 1)));
        assert_eq!(negotiate("1.1", "1.1"), Ok(v(1, 1)));
    }

    #[test]
    fn negotiation_rejects_another_major_both_ways() {
        assert_eq!(
            negotiate("1.1", "2.0"),
            Err(VersionError::MajorMismatch {
                shim_max: v(1, 1),
                platform_max: v(2, 0)
            })
        );
        assert_eq!(
            negotiate("2.0", "1.1"),
            Err(VersionError::MajorMismatch {
                shim_max: v(2, 0),
                platform_max: v(1, 1)
            })
        );
    }

    #[test]
    fn malformed_versions_are_rejected() {
        for bad in [
            "1", "v1.0", "1.0.1", "", ".", "1.", ".1", "+1.0", "1.-1", " 1.0", "1.0 ", "a.b",
            "１.０",
        ] {
            assert_eq!(
                negotiate("1.1", bad),
                Err(VersionError::Malformed {
                    value: bad.to_owned()
                }),
                "{bad:?}"
            );
            assert!(negotiate(bad, "1.1").is_err(), "{bad:?}");
        }
        assert_eq!(ProtocolVersion::parse("10.20"), Ok(v(10, 20)));
        assert!(ProtocolVersion::parse("99999999999.0").is_err());
    }

    #[test]
    fn close_reason_has_the_spec_fields() {
        let reason = version_mismatch_close_reason("1.1", "2.0", "upgrade the shim");
        assert_eq!(
            reason,
            r#"{"error":"PROTOCOL_VERSION_MISMATCH","shim_max":"1.1","platform_max":"2.0","hint":"upgrade the shim"}"#
        );
        assert!(reason.len() <= MAX_CLOSE_REASON_BYTES);
    }

    #[test]
    fn close_reason_truncates_a_huge_hint_first() {
        let hint = "é\"\\\n".repeat(10_000);
        let reason = version_mismatch_close_reason("1.1", "2.0", &hint);
        assert!(reason.len() <= MAX_CLOSE_REASON_BYTES, "{}", reason.len());
        let parsed: VersionMismatchReason = serde_json::from_str(&reason).unwrap();
        assert_eq!(parsed.error, "PROTOCOL_VERSION_MISMATCH");
        assert_eq!(parsed.shim_max, "1.1");
        assert_eq!(parsed.platform_max, "2.0");
        assert!(!parsed.hint.is_empty());
        assert!(hint.starts_with(&parsed.hint));
        // Maximal: one more character of hint would not fit.
        let longer: String = hint.chars().take(parsed.hint.chars().count() + 1).collect();
        let bigger = VersionMismatchReason {
            hint: longer,
            ..parsed
        };
        assert!(serde_json::to_string(&bigger).unwrap().len() > MAX_CLOSE_REASON_BYTES);
    }

    #[test]
    fn close_reason_fits_even_with_huge_versions() {
        let junk = "9".repeat(5_000);
        let reason = version_mismatch_close_reason(&junk, &junk, &junk);
        assert!(reason.len() <= MAX_CLOSE_REASON_BYTES);
        let parsed: VersionMismatchReason = serde_json::from_str(&reason).unwrap();
        assert_eq!(parsed.hint, "");
    }
}
