//! The connector's HMAC-chained JSON-lines audit log, byte-compatible with the original shim's.
//!
//! Each line is one record written the way Python's `json.dumps(record, ensure_ascii=False)`
//! writes it, and each record carries `hmac = HMAC-SHA256(key, canonical(record without hmac))`
//! plus the previous record's `hmac`, so chains written by the original verify here and the
//! other way round. The canonical form is the original's hand-rolled JCS subset: keys sorted
//! by code point, no whitespace, non-ASCII kept raw, floats as Python's `repr` (not JCS's
//! JavaScript formatting), which is why this module formats and parses JSON itself instead of
//! going through `serde_json`'s number handling.
//!
//! Records hold metadata only. [`AuditChain::append`] writes whatever `details` it is given,
//! so callers must pass sizes, counts, paths and codes, never file contents, command output,
//! clipboard text or pixels.
//!
//! The functions of `logs` and `export` read the files back for the connector's `audit`
//! subcommands (listing, following, finding, rotating, pruning, export manifests), so the
//! connector itself never touches the filesystem.
//!
//! Rotated file names use UTC: the `time` crate's local-offset lookup is not enabled in this
//! workspace (and refuses to answer in multi-threaded processes on Unix anyway).
//!
//! Layout (everything public is re-exported here, so callers name `audit_chain::…`):
//! - `writer`: [`AuditChain`], the single writer: tail recovery, batches, rotation.
//! - `canonical`: the Python-compatible JSON encoder and parser, and the record HMAC.
//! - `verify`: checking a file's chain line by line.
//! - `key`: the 0600 hex key file.
//! - `logs`: rotated files, reading back, lookup by `seq`, following, summaries.
//! - `export`: the signed export manifest.

mod canonical;
mod export;
mod key;
mod logs;
mod verify;
mod writer;

pub use canonical::{python_float_repr, python_json_string};
pub use export::{EXPORT_KEY_USERNAME, ManifestFile, export_manifest, sign_manifest};
pub use key::{load_key_file, load_or_create_key_file};
pub use logs::{
    FoundRecord, LogFollower, RecordSummary, find_record, format_epoch, last_record_ts,
    probe_writable, read_log, remove_rotated, rotate_file, rotated_files, summarize_line,
    utc_stamp,
};
pub use verify::{Issue, IssueKind, VerifyReport, verify};
pub use writer::AuditChain;

use std::{
    fs::{self, OpenOptions},
    io,
    path::Path,
    time::Duration,
};

use serde_json::{Map, Value};

/// Rotate before a write once the file has reached this size.
pub const MAX_LOG_BYTES: u64 = 64 * 1024 * 1024;

/// Rotate before a write once the file's first record is older than this.
pub const MAX_LOG_AGE: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// The length of the audit key in bytes.
pub const KEY_LEN: usize = 32;

/// Who is writing: copied into every record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditIdentity {
    /// The session the writer serves, written as `"-"` when there is none (the daemon itself).
    pub session_id: Option<String>,
    /// This machine's id, written as `"-"` when unknown.
    pub machine_id: Option<String>,
    /// The connector's version.
    pub shim_version: String,
}

/// How an audited operation ended; normalised to exactly these four keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditResult {
    /// Whether the operation succeeded.
    pub ok: bool,
    /// A process exit code, for commands.
    pub exit_code: Option<i64>,
    /// How long the operation took.
    pub duration_ms: Option<u64>,
    /// The wire error code on failure.
    pub error_code: Option<String>,
}

/// One record waiting to be appended (see [`AuditChain::append_batch`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRecord {
    /// The session the record belongs to when it is not the writer's own (a control-mode
    /// child writing to the machine's one chain); `None` uses the writer's identity.
    pub session_id: Option<String>,
    /// The request it answers; `None` for internal events.
    pub request_id: Option<String>,
    /// The op name.
    pub op: String,
    /// Metadata only.
    pub details: Map<String, Value>,
    /// How it ended.
    pub result: AuditResult,
}

/// When the live file is moved aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Rotate when the file has at least this many bytes.
    pub max_bytes: u64,
    /// Rotate when the first record is older than this.
    pub max_age: Duration,
}

impl Default for Rotation {
    fn default() -> Self {
        Self {
            max_bytes: MAX_LOG_BYTES,
            max_age: MAX_LOG_AGE,
        }
    }
}

#[cfg(unix)]
fn private_mode(options: &mut OpenOptions) {
    use std::os::unix::fs::OpenOptionsExt;
    options.mode(0o600);
}

#[cfg(not(unix))]
fn private_mode(_options: &mut OpenOptions) {}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests;
