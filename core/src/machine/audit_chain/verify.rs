//! Checking the chain of one file: sequence, links and HMACs, line by line.

use std::{fmt, fs, io, path::Path};

use super::{
    KEY_LEN,
    canonical::{Json, parse_line, record_hmac},
};

/// What [`verify`] found wrong with a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IssueKind {
    /// The file does not end with a newline: the last write was cut short.
    Truncated,
    /// A line is not a JSON object; verification stops there.
    ParseError,
    /// `seq` or `hmac` is missing or of the wrong type; verification stops there.
    MissingField,
    /// `seq` is not the expected one (records deleted or inserted); checking resumes after it.
    SequenceGap,
    /// `prev_hmac` does not name the previous record's `hmac`.
    ChainBreak,
    /// The record's content does not match its `hmac`.
    HmacMismatch,
}

impl IssueKind {
    /// The name the original's `audit verify` prints.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::ParseError => "parse_error",
            Self::MissingField => "missing_field",
            Self::SequenceGap => "sequence_gap",
            Self::ChainBreak => "chain_break",
            Self::HmacMismatch => "hmac_mismatch",
        }
    }
}

impl fmt::Display for IssueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem, at a 1-based line number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issue {
    /// The 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub kind: IssueKind,
}

/// The outcome of [`verify`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Records that were checked (parsed, with an integer `seq`).
    pub records: usize,
    /// Every problem, in file order.
    pub issues: Vec<Issue>,
}

impl VerifyReport {
    /// Whether the chain verified without any issue.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.issues.is_empty()
    }
}

/// Checks the chain of the file at `path`.
///
/// # Errors
/// The file cannot be read (a missing file is an error, an empty one is clean).
pub fn verify(path: &Path, key: &[u8; KEY_LEN]) -> io::Result<VerifyReport> {
    let bytes = fs::read(path)?;
    Ok(verify_bytes(&bytes, key))
}

pub(super) fn verify_bytes(bytes: &[u8], key: &[u8; KEY_LEN]) -> VerifyReport {
    let mut report = VerifyReport::default();
    let mut expected: i128 = 1;
    let mut prev: Option<String> = None;
    let mut lines = bytes.split(|&b| b == b'\n').peekable();
    let mut number = 0;
    while let Some(raw) = lines.next() {
        number += 1;
        let is_last = lines.peek().is_none();
        if is_last {
            // The piece after the final newline is empty in a well-formed file.
            if !raw.is_empty() {
                report.issues.push(Issue {
                    line: number,
                    kind: IssueKind::Truncated,
                });
            }
            break;
        }
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let mut push = |kind| report.issues.push(Issue { line: number, kind });
        let Some(record) = parse_line(raw) else {
            push(IssueKind::ParseError);
            break;
        };
        let Some(seq) = record.get("seq").and_then(Json::as_int) else {
            push(IssueKind::MissingField);
            break;
        };
        report.records += 1;
        if seq != expected {
            push(IssueKind::SequenceGap);
        }
        expected = seq.saturating_add(1);
        // A missing prev_hmac reads as null, as with Python's `record.get`.
        if record.get("prev_hmac").unwrap_or(&Json::Null) != &Json::opt_str(prev.clone()) {
            push(IssueKind::ChainBreak);
        }
        let Some(mac) = record.get("hmac").and_then(Json::as_str).map(str::to_owned) else {
            push(IssueKind::MissingField);
            break;
        };
        let Json::Object(mut fields) = record else {
            break;
        };
        fields.retain(|(k, _)| k != "hmac");
        match record_hmac(key, &fields) {
            Ok(actual) if actual == mac => {}
            _ => push(IssueKind::HmacMismatch),
        }
        prev = Some(mac);
    }
    report
}
