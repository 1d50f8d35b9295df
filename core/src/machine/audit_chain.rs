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
//! The free functions after [`load_or_create_key_file`] read the files back for the connector's
//! `audit` subcommands (listing, following, finding, rotating, pruning, export manifests), so
//! the connector itself never touches the filesystem.
//!
//! Rotated file names use UTC: the `time` crate's local-offset lookup is not enabled in this
//! workspace (and refuses to answer in multi-threaded processes on Unix anyway).

use std::{
    fmt::{self, Write as _},
    fs::{self, File, OpenOptions},
    io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime},
};

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;
use time::{OffsetDateTime, macros::format_description};

use crate::clock::{Clock, SystemClock};

/// Rotate before a write once the file has reached this size.
pub const MAX_LOG_BYTES: u64 = 64 * 1024 * 1024;
/// Rotate before a write once the file's first record is older than this.
pub const MAX_LOG_AGE: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// How much of the file's end tail recovery reads at a time.
const TAIL_WINDOW: u64 = 8 * 1024;
/// The reference reads only the last 8 KiB, so a longer last record restarted its chain at 1;
/// searching a little further keeps the chain, and the bound keeps a corrupt file cheap.
const TAIL_SEARCH_LIMIT: u64 = 1024 * 1024;
/// Deep enough for any record; shallow enough that hostile nesting cannot exhaust the stack.
const MAX_NESTING: usize = 128;
/// The length of the audit key in bytes.
pub const KEY_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;

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

/// The single writer of one audit file and its chain state.
pub struct AuditChain {
    path: PathBuf,
    key: [u8; KEY_LEN],
    identity: AuditIdentity,
    rotation: Rotation,
    clock: Arc<dyn Clock>,
    next_seq: u64,
    prev_hmac: Option<String>,
    /// `ts` of the file's first record, cached so the age check does not reread the file.
    first_ts: Option<f64>,
    /// The live file as the last batch left it, reused while the path still names it.
    live: Option<Live>,
}

/// The live file kept open between batches, and what this chain last wrote of it.
struct Live {
    file: File,
    identity: FileIdentity,
    /// Its length after our last write, which ended with a newline.
    len: u64,
}

/// What tells two opens of a path apart: on Unix the device and inode. Elsewhere nothing
/// does (std has no stable file index there), so every batch opens the file again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity(Option<(u64, u64)>);

impl FileIdentity {
    #[cfg(unix)]
    fn of(meta: &fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self(Some((meta.dev(), meta.ino())))
    }

    #[cfg(not(unix))]
    fn of(_meta: &fs::Metadata) -> Self {
        Self(None)
    }

    /// Whether `meta`, read from the path, is the file this chain holds open at `len` bytes.
    fn still(self, meta: &fs::Metadata, len: u64) -> bool {
        self.0.is_some() && self == Self::of(meta) && meta.len() == len
    }
}

impl fmt::Debug for AuditChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key stays out of logs and panic messages.
        f.debug_struct("AuditChain")
            .field("path", &self.path)
            .field("identity", &self.identity)
            .field("rotation", &self.rotation)
            .field("next_seq", &self.next_seq)
            .field("prev_hmac", &self.prev_hmac)
            .finish_non_exhaustive()
    }
}

impl AuditChain {
    /// Opens (creating it 0600, with its parents) the log at `path` and continues its chain.
    ///
    /// # Errors
    /// The directory or file cannot be created, opened or read.
    pub fn open(path: &Path, key: [u8; KEY_LEN], identity: AuditIdentity) -> io::Result<Self> {
        Self::open_with(path, key, identity, Rotation::default())
    }

    /// [`Self::open`] with other rotation thresholds.
    ///
    /// # Errors
    /// The directory or file cannot be created, opened or read.
    pub fn open_with(
        path: &Path,
        key: [u8; KEY_LEN],
        identity: AuditIdentity,
        rotation: Rotation,
    ) -> io::Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_private_dir(parent)?;
        }
        let mut file = open_for_append(path)?;
        tighten_mode(&file)?;
        let mut chain = Self {
            path: path.to_path_buf(),
            key,
            identity,
            rotation,
            clock: Arc::new(SystemClock),
            next_seq: 1,
            prev_hmac: None,
            first_ts: None,
            live: None,
        };
        chain.recover(&mut file)?;
        Ok(chain)
    }

    /// Replaces the clock that stamps records and judges their age (tests move it forward).
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The live file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `seq` the next record will get.
    #[must_use]
    pub const fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The `hmac` of the last record, which the next one will carry as `prev_hmac`.
    #[must_use]
    pub fn last_hmac(&self) -> Option<&str> {
        self.prev_hmac.as_deref()
    }

    /// Appends one record (rotating first when due), fsyncs it, and returns its `seq`.
    ///
    /// `request_id` is `None` for internal events. `details` must be metadata only (sizes,
    /// counts, paths, codes), never contents.
    ///
    /// # Errors
    /// The file cannot be rotated, opened, written or synced; the chain state then stays
    /// where it was, so the next append reuses the same `seq`.
    pub fn append(
        &mut self,
        request_id: Option<&str>,
        op: &str,
        details: Map<String, Value>,
        result: AuditResult,
    ) -> io::Result<u64> {
        let record = PendingRecord {
            session_id: None,
            request_id: request_id.map(str::to_owned),
            op: op.to_owned(),
            details,
            result,
        };
        self.append_batch(vec![record])
    }

    /// Appends several records with one write and one fsync (group commit), in order, and
    /// returns the `seq` of the last. Each record is chained and signed exactly as
    /// [`Self::append`] would; the batch is durable when this returns.
    ///
    /// # Errors
    /// As [`Self::append`]; on failure none of the batch counts as written and the chain
    /// state stays where it was.
    pub fn append_batch(&mut self, records: Vec<PendingRecord>) -> io::Result<u64> {
        let result = self.write_batch(records);
        if result.is_err() {
            // The next batch opens the file again and checks how our write left it.
            self.live = None;
        }
        result
    }

    fn write_batch(&mut self, records: Vec<PendingRecord>) -> io::Result<u64> {
        let seen = self.rotate_if_due()?;
        // The path may have been rotated, replaced or appended to by another process (the
        // `audit rotate` command) since our last batch: only the very file at the length we
        // left it is reused, without a reopen or a look at its last byte.
        let reusable = match (&self.live, &seen) {
            (Some(live), Some(meta)) => live.identity.still(meta, live.len),
            _ => false,
        };
        let mut lines = String::new();
        if !reusable {
            let mut file = open_for_append(&self.path)?;
            let meta = file.metadata()?;
            let len = meta.len();
            // A file emptied or replaced behind our back starts over, as tail recovery would.
            if len == 0 {
                self.reset_chain();
            }
            // A write cut short earlier left a partial line; glueing onto it would lose this
            // record too.
            if len > 0 && !ends_with_newline(&mut file, len)? {
                lines.push('\n');
            }
            self.live = Some(Live {
                file,
                identity: FileIdentity::of(&meta),
                len,
            });
        }
        let mut seq = self.next_seq;
        let mut prev = self.prev_hmac.clone();
        let mut first_ts = self.first_ts;
        for record in records {
            let ts = epoch_seconds(self.clock.now());
            let mut fields = self.record(ts, seq, prev.take(), record);
            let mac = record_hmac(&self.key, &fields).map_err(io::Error::other)?;
            fields.push(("hmac".to_owned(), Json::Str(mac.clone())));
            write_python(&Json::Object(fields), &mut lines).map_err(io::Error::other)?;
            lines.push('\n');
            if seq == 1 {
                first_ts = Some(ts);
            }
            seq += 1;
            prev = Some(mac);
        }
        let live = self
            .live
            .as_mut()
            .ok_or_else(|| io::Error::other("the audit log is not open"))?;
        live.file.write_all(lines.as_bytes())?;
        live.file.sync_data()?;
        live.len += lines.len() as u64;
        self.first_ts = first_ts;
        self.next_seq = seq;
        self.prev_hmac = prev;
        Ok(seq - 1)
    }

    /// Moves the live file aside as `<name>.YYYYMMDD-HHMMSS` (UTC, `-N` on collision) and
    /// starts a new chain at `seq` 1. Returns the rotated path, or `None` when the file is
    /// missing or empty and there is nothing to rotate.
    ///
    /// # Errors
    /// The file cannot be inspected or renamed.
    pub fn rotate(&mut self) -> io::Result<Option<PathBuf>> {
        let rotated = rotate_at(&self.path, self.clock.now())?;
        if rotated.is_some() {
            self.reset_chain();
            self.live = None;
        }
        Ok(rotated)
    }

    /// The record without its `hmac`, keys in the original's order.
    fn record(
        &self,
        ts: f64,
        seq: u64,
        prev_hmac: Option<String>,
        record: PendingRecord,
    ) -> Vec<(String, Json)> {
        let field = |name: &str, value| (name.to_owned(), value);
        vec![
            field("ts", Json::Float(ts)),
            field(
                "session_id",
                dash_or(
                    record
                        .session_id
                        .as_deref()
                        .or(self.identity.session_id.as_deref()),
                ),
            ),
            field("machine_id", dash_or(self.identity.machine_id.as_deref())),
            field(
                "shim_version",
                Json::Str(self.identity.shim_version.clone()),
            ),
            field("request_id", Json::opt_str(record.request_id)),
            field("op", Json::Str(record.op)),
            field("details", Json::from_map(record.details)),
            field("result", record.result.into_json()),
            field("seq", Json::Int(seq.to_string())),
            field("prev_hmac", Json::opt_str(prev_hmac)),
        ]
    }

    /// Rotates when the live file is too big or too old, and returns what the path names now
    /// (`None`: nothing there, as after a rotation).
    fn rotate_if_due(&mut self) -> io::Result<Option<fs::Metadata>> {
        let meta = match fs::metadata(&self.path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let len = meta.len();
        if len == 0 {
            return Ok(Some(meta));
        }
        let too_big = len >= self.rotation.max_bytes;
        let too_old = self.first_ts.is_some_and(|first| {
            epoch_seconds(self.clock.now()) - first > self.rotation.max_age.as_secs_f64()
        });
        if too_big || too_old {
            self.rotate()?;
            return Ok(None);
        }
        Ok(Some(meta))
    }

    fn reset_chain(&mut self) {
        self.next_seq = 1;
        self.prev_hmac = None;
        self.first_ts = None;
    }

    /// Continues after the last record, or restarts at 1 when it cannot be read.
    fn recover(&mut self, file: &mut File) -> io::Result<()> {
        let len = file.metadata()?.len();
        if len == 0 {
            return Ok(());
        }
        if let Some(last) = last_line(file, len)?.as_deref().and_then(parse_line) {
            let seq = last.get("seq").and_then(Json::as_u64);
            let mac = last.get("hmac").and_then(Json::as_str);
            if let (Some(seq), Some(mac)) = (seq, mac) {
                self.next_seq = seq.saturating_add(1);
                self.prev_hmac = Some(mac.to_owned());
            }
        }
        self.first_ts = first_record_ts(file)?;
        Ok(())
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

fn verify_bytes(bytes: &[u8], key: &[u8; KEY_LEN]) -> VerifyReport {
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

/// Loads the 32-byte audit key from a 0600 file of 64 hex characters, creating it (and its
/// parents) with fresh random bytes when missing and replacing it when it holds no valid key.
///
/// # Errors
/// The file cannot be read or written, or (on Unix) it is readable or writable by group or
/// others: a key others can read lets them forge a verifying chain.
pub fn load_or_create_key_file(path: &Path) -> io::Result<[u8; KEY_LEN]> {
    match File::open(path) {
        Ok(file) => {
            check_key_mode(path, &file)?;
            let mut raw = Vec::new();
            file.take(4096).read_to_end(&mut raw)?;
            if let Some(key) = std::str::from_utf8(&raw)
                .ok()
                .and_then(|s| decode_hex_key(s.trim()))
            {
                return Ok(key);
            }
            // The reference regenerates a key that is not hex; the old chain stops verifying,
            // which `audit verify` then reports, rather than the daemon refusing to start.
            let key = random_key();
            replace_key_file(path, &key)?;
            Ok(key)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                create_private_dir(parent)?;
            }
            let key = random_key();
            let mut options = OpenOptions::new();
            options.write(true).create_new(true);
            private_mode(&mut options);
            match options.open(path) {
                Ok(mut file) => {
                    file.write_all(encode_hex(&key).as_bytes())?;
                    file.sync_all()?;
                    Ok(key)
                }
                // Another process created it between our open and create: use theirs.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let file = File::open(path)?;
                    check_key_mode(path, &file)?;
                    let mut raw = String::new();
                    file.take(4096).read_to_string(&mut raw)?;
                    decode_hex_key(raw.trim()).ok_or_else(|| {
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            "audit key file is being created concurrently",
                        )
                    })
                }
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// Loads the audit key for reading a chain back. Unlike [`load_or_create_key_file`] it never
/// creates or replaces the file: a fresh key would make every record fail to verify, and
/// replacing an unreadable one would destroy the only way to check the old chain.
///
/// # Errors
/// `NotFound` when there is no key file, `InvalidData` when it holds no key, `PermissionDenied`
/// when (on Unix) group or others may read or write it, or the read error.
pub fn load_key_file(path: &Path) -> io::Result<[u8; KEY_LEN]> {
    let file = File::open(path)?;
    check_key_mode(path, &file)?;
    let mut raw = Vec::new();
    file.take(4096).read_to_end(&mut raw)?;
    std::str::from_utf8(&raw)
        .ok()
        .and_then(|text| decode_hex_key(text.trim()))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} holds no audit key (64 hex characters)", path.display()),
            )
        })
}

// Reading the log back, for the `audit` subcommands. They run beside a daemon that may be
// appending or rotating, so nothing here holds a lock or assumes the files stand still.

/// The rotated siblings of the live file at `path` (`<name>.YYYYMMDD-HHMMSS`, with `-N` on
/// collision), oldest first. Symbolic links and other non-files are left out, so pruning and
/// exporting never follow a link out of the log directory.
///
/// # Errors
/// `path` has no file name, or its directory cannot be listed (a missing one has no files).
pub fn rotated_files(path: &Path) -> io::Result<Vec<PathBuf>> {
    let live = live_name(path)?;
    let entries = match fs::read_dir(log_dir(path)) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(order) = name.to_str().and_then(|n| rotation_order(&live, n)) else {
            continue;
        };
        if entry.file_type()?.is_file() {
            found.push((order, entry.path()));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, path)| path).collect())
}

/// Moves the live file at `path` aside as [`AuditChain::rotate`] does, for `audit rotate` run
/// beside a daemon: its next append finds the live file gone or empty and restarts the chain
/// at 1, exactly as after its own rotation. Returns the rotated path, or `None` when the file
/// is missing or empty.
///
/// # Errors
/// The file cannot be inspected or renamed.
pub fn rotate_file(path: &Path, now: SystemTime) -> io::Result<Option<PathBuf>> {
    rotate_at(path, OffsetDateTime::from(now))
}

fn rotate_at(path: &Path, now: OffsetDateTime) -> io::Result<Option<PathBuf>> {
    let len = match fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e),
    };
    if len == 0 {
        return Ok(None);
    }
    let target = rotation_target(path, now)?;
    fs::rename(path, &target)?;
    Ok(Some(target))
}

/// Deletes one rotated file of the live log at `path`; `Ok(false)` when it was already gone.
///
/// # Errors
/// `InvalidInput` when `rotated` is not a rotated sibling of `path` (so the live file, or any
/// other file, can never be deleted through here), or the I/O error.
pub fn remove_rotated(path: &Path, rotated: &Path) -> io::Result<bool> {
    let live = live_name(path)?;
    let sibling = rotated.parent().map(|p| {
        if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        }
    }) == Some(log_dir(path));
    let named = rotated
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| rotation_order(&live, n))
        .is_some();
    if !sibling || !named {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not a rotated file of {}",
                rotated.display(),
                path.display()
            ),
        ));
    }
    match fs::remove_file(rotated) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The whole file, or `None` when it does not exist. Live files rotate at
/// [`MAX_LOG_BYTES`], so one file is that size plus at most one record.
///
/// # Errors
/// The file cannot be read.
pub fn read_log(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The `ts` of the file's last record, or `None` when the file is empty or its last line is
/// not a record (a write cut short): callers that delete by age must then keep the file.
///
/// # Errors
/// The file cannot be opened or read.
pub fn last_record_ts(path: &Path) -> io::Result<Option<f64>> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    Ok(last_line(&mut file, len)?
        .as_deref()
        .and_then(parse_line)
        .and_then(|record| record.get("ts").and_then(Json::as_f64)))
}

/// Checks, without writing a record, that the daemon will be able to append to the log at
/// `path`: the file opens for appending, or, when it does not exist yet, its directory
/// (created 0700 with its parents, as [`AuditChain::open`] would) accepts a new file, which is
/// removed again.
///
/// # Errors
/// The I/O error that would stop the daemon.
pub fn probe_writable(path: &Path) -> io::Result<()> {
    match OpenOptions::new().append(true).open(path) {
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let dir = log_dir(path);
    create_private_dir(dir)?;
    let probe = dir.join(format!(
        ".{}.{}.probe",
        live_name(path)?,
        uuid::Uuid::new_v4().simple()
    ));
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    private_mode(&mut options);
    drop(options.open(&probe)?);
    fs::remove_file(&probe)
}

/// `YYYYMMDD-HHMMSS` in UTC, as in rotated file names.
#[must_use]
pub fn utc_stamp(at: SystemTime) -> String {
    OffsetDateTime::from(at)
        .format(format_description!(
            "[year][month][day]-[hour][minute][second]"
        ))
        .unwrap_or_default()
}

/// A record's `ts` (epoch seconds) as ISO 8601 UTC with microseconds, or the number itself
/// when it is out of range.
#[must_use]
pub fn format_epoch(ts: f64) -> String {
    // Whole seconds and microseconds apart: `ts * 1e9` would lose the last digits to the
    // float's precision. Float to integer `as` saturates, so the checked arithmetic and the
    // range check of `from_unix_timestamp_nanos` refuse what is out of range.
    let whole = ts.floor();
    #[allow(clippy::cast_possible_truncation)]
    let (secs, micros) = (whole as i128, ((ts - whole) * 1e6).round() as i128);
    secs.checked_mul(1_000_000_000)
        .and_then(|nanos| nanos.checked_add(micros * 1_000))
        .filter(|_| ts.is_finite())
        .and_then(|nanos| OffsetDateTime::from_unix_timestamp_nanos(nanos).ok())
        .map_or_else(|| ts.to_string(), crate::clock::iso_utc)
}

/// What `audit tail` shows of one record: identification and outcome, never `details`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordSummary {
    /// The record's `seq`, when it is a non-negative integer.
    pub seq: Option<u64>,
    /// Its `ts`.
    pub ts: Option<f64>,
    /// Its `op`.
    pub op: Option<String>,
    /// `result.ok`.
    pub ok: Option<bool>,
    /// `result.error_code`.
    pub error_code: Option<String>,
    /// Whether the record matches its own `hmac` (its link to the previous record is not
    /// checked); `None` without a key or without an `hmac` field.
    pub hmac_ok: Option<bool>,
}

/// Summarises one line of a log, or `None` when it is not a JSON object.
#[must_use]
pub fn summarize_line(line: &[u8], key: Option<&[u8; KEY_LEN]>) -> Option<RecordSummary> {
    let record = parse_line(line)?;
    let result = record.get("result");
    let hmac_ok = key.and_then(|key| {
        let mac = record.get("hmac").and_then(Json::as_str)?;
        let Json::Object(fields) = &record else {
            return None;
        };
        let unsigned: Vec<(String, Json)> = fields
            .iter()
            .filter(|(k, _)| k != "hmac")
            .cloned()
            .collect();
        Some(record_hmac(key, &unsigned).is_ok_and(|actual| actual == mac))
    });
    Some(RecordSummary {
        seq: record.get("seq").and_then(Json::as_u64),
        ts: record.get("ts").and_then(Json::as_f64),
        op: record.get("op").and_then(Json::as_str).map(str::to_owned),
        ok: match result.and_then(|r| r.get("ok")) {
            Some(Json::Bool(ok)) => Some(*ok),
            _ => None,
        },
        error_code: result
            .and_then(|r| r.get("error_code"))
            .and_then(Json::as_str)
            .map(str::to_owned),
        hmac_ok,
    })
}

/// A record found by [`find_record`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundRecord {
    /// The file it is in.
    pub file: PathBuf,
    /// Its 1-based line number.
    pub line: usize,
    /// The record as Python's `json.dumps(record, indent=2)` prints it: fields in file order,
    /// everything outside ASCII escaped, so a hostile path cannot drive the terminal.
    pub pretty: String,
}

/// Finds the record with `seq` in the live file at `path`, then in its rotated files newest
/// first. `seq` restarts at 1 in every file, so the first match wins: the most recent one.
///
/// # Errors
/// A file cannot be listed or read (a missing live file is skipped).
pub fn find_record(path: &Path, seq: u64) -> io::Result<Option<FoundRecord>> {
    let mut files = vec![path.to_path_buf()];
    files.extend(rotated_files(path)?.into_iter().rev());
    for file in files {
        let handle = match File::open(&file) {
            Ok(handle) => handle,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut reader = BufReader::new(handle);
        let mut raw = Vec::new();
        let mut number = 0;
        loop {
            raw.clear();
            if reader.read_until(b'\n', &mut raw)? == 0 {
                break;
            }
            number += 1;
            let Some(record) = parse_line(raw.strip_suffix(b"\n").unwrap_or(&raw)) else {
                continue;
            };
            if record.get("seq").and_then(Json::as_u64) == Some(seq) {
                let mut pretty = String::new();
                write_pretty(&record, 0, &mut pretty).map_err(io::Error::other)?;
                return Ok(Some(FoundRecord {
                    file,
                    line: number,
                    pretty: ascii_only(&pretty),
                }));
            }
        }
    }
    Ok(None)
}

/// Reads the lines appended to a log as they arrive, like `tail -F`: it keeps reading the file
/// it has open until that is drained, and when the path then names another file (the log was
/// rotated or replaced) it continues with that one from its start.
#[derive(Debug)]
pub struct LogFollower {
    path: PathBuf,
    file: Option<File>,
    id: Option<FileId>,
    offset: u64,
    /// The start of a line whose newline has not been written yet.
    partial: Vec<u8>,
}

impl LogFollower {
    /// Follows the log at `path`, starting at its beginning; the file need not exist yet.
    #[must_use]
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            file: None,
            id: None,
            offset: 0,
            partial: Vec::new(),
        }
    }

    /// Whether a file has been opened (the log existed at some poll).
    #[must_use]
    pub const fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// The complete lines (without their newline) written since the last call, across at most
    /// one switch to a new file.
    ///
    /// # Errors
    /// The file cannot be opened or read; a missing file is not an error.
    pub fn poll(&mut self) -> io::Result<Vec<Vec<u8>>> {
        let mut lines = Vec::new();
        if self.file.is_none() && !self.open()? {
            return Ok(lines);
        }
        self.drain(&mut lines)?;
        let current = match fs::metadata(&self.path) {
            Ok(meta) => Some(file_id(&meta)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let replaced = match (current, self.id) {
            (Some(Some(now)), Some(then)) => now != then,
            // Without file ids, a file shorter than what was read must be a new one.
            (Some(None), _) | (Some(_), None) => fs::metadata(&self.path)?.len() < self.offset,
            (None, _) => true,
        };
        if replaced {
            // A write that began before the rename may have landed after the first drain.
            self.drain(&mut lines)?;
            // A rotated file ends with a complete record; a leftover fragment stays a line.
            if !self.partial.is_empty() {
                lines.push(std::mem::take(&mut self.partial));
            }
            self.file = None;
            if self.open()? {
                self.drain(&mut lines)?;
            }
        }
        Ok(lines)
    }

    /// The unterminated rest of the file, once no more is expected (a non-following read).
    pub fn take_partial(&mut self) -> Option<Vec<u8>> {
        (!self.partial.is_empty()).then(|| std::mem::take(&mut self.partial))
    }

    fn open(&mut self) -> io::Result<bool> {
        match File::open(&self.path) {
            Ok(file) => {
                self.id = file_id(&file.metadata()?);
                self.file = Some(file);
                self.offset = 0;
                self.partial.clear();
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn drain(&mut self, lines: &mut Vec<Vec<u8>>) -> io::Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        // Emptied in place (not renamed): start over from its beginning.
        if file.metadata()?.len() < self.offset {
            file.seek(SeekFrom::Start(0))?;
            self.offset = 0;
            self.partial.clear();
        }
        let mut fresh = Vec::new();
        let read = file.read_to_end(&mut fresh)?;
        self.offset += read as u64;
        self.partial.extend_from_slice(&fresh);
        if let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') {
            let rest = self.partial.split_off(end + 1);
            let complete = std::mem::replace(&mut self.partial, rest);
            lines.extend(complete[..end].split(|&b| b == b'\n').map(<[u8]>::to_vec));
        }
        Ok(())
    }
}

/// Identifies a file independently of its name, where the platform can say.
type FileId = (u64, u64);

#[cfg(unix)]
#[allow(clippy::unnecessary_wraps)]
fn file_id(meta: &fs::Metadata) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn file_id(_meta: &fs::Metadata) -> Option<FileId> {
    None
}

/// The name `audit export` stores with the key's signature, as the reference's keyring user.
pub const EXPORT_KEY_USERNAME: &str = "audit_key";

/// One file of an export as its manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestFile {
    /// The file name inside the archive.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
}

impl ManifestFile {
    /// Describes `bytes` stored as `name`.
    #[must_use]
    pub fn describe(name: &str, bytes: &[u8]) -> Self {
        use sha2::Digest as _;
        Self {
            name: name.to_owned(),
            size: bytes.len() as u64,
            sha256: encode_hex(&Sha256::digest(bytes)),
        }
    }
}

/// The export manifest as the reference writes it: `json.dumps(manifest, sort_keys=True)`, so
/// `", "` and `": "` separators and everything outside ASCII escaped.
#[must_use]
pub fn export_manifest(exported_at: SystemTime, files: &[ManifestFile]) -> String {
    let files = files
        .iter()
        .map(|file| {
            Json::Object(vec![
                ("name".to_owned(), Json::Str(file.name.clone())),
                ("sha256".to_owned(), Json::Str(file.sha256.clone())),
                ("size".to_owned(), Json::Int(file.size.to_string())),
            ])
        })
        .collect();
    let manifest = Json::Object(vec![
        (
            "exported_at".to_owned(),
            Json::Str(crate::clock::iso_utc(OffsetDateTime::from(exported_at))),
        ),
        ("files".to_owned(), Json::Array(files)),
        (
            "key_username".to_owned(),
            Json::Str(EXPORT_KEY_USERNAME.to_owned()),
        ),
    ]);
    let mut out = String::new();
    // Only strings and integers here, which always serialise.
    let _ = write_python(&manifest, &mut out);
    ascii_only(&out)
}

/// `manifest.sig`: the hex HMAC-SHA256 of the manifest's bytes under the audit key. The
/// signature is symmetric: whoever checks it needs the key.
///
/// # Errors
/// Never in practice (HMAC takes keys of any length); the MAC API just cannot say so.
pub fn sign_manifest(key: &[u8; KEY_LEN], manifest: &[u8]) -> io::Result<String> {
    hmac_hex(key, manifest).map_err(io::Error::other)
}

/// The live file's name.
fn live_name(path: &Path) -> io::Result<String> {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "audit log path has no file name",
            )
        })
}

/// The directory of the live file, `.` for a bare name.
fn log_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// How a rotated name of `live` sorts (its stamp, then its collision counter), or `None` when
/// `candidate` is not one.
fn rotation_order(live: &str, candidate: &str) -> Option<(String, u64)> {
    let rest = candidate.strip_prefix(live)?.strip_prefix('.')?;
    let stamp = rest.get(..15)?;
    let is_stamp = stamp.bytes().enumerate().all(|(i, b)| {
        if i == 8 {
            b == b'-'
        } else {
            b.is_ascii_digit()
        }
    });
    if !is_stamp {
        return None;
    }
    let counter = match rest.get(15..)? {
        "" => 0,
        tail => {
            let digits = tail.strip_prefix('-')?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse().ok()?
        }
    };
    Some((stamp.to_owned(), counter))
}

/// Python's `json.dumps(value, indent=2)` before the ASCII escaping [`ascii_only`] applies.
fn write_pretty(value: &Json, depth: usize, out: &mut String) -> Result<(), RecordError> {
    let indent = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    match value {
        Json::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, depth + 1);
                write_pretty(item, depth + 1, out)?;
            }
            indent(out, depth);
            out.push(']');
        }
        Json::Object(fields) if !fields.is_empty() => {
            out.push('{');
            for (i, (key, item)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, depth + 1);
                write_string(key, out);
                out.push_str(": ");
                write_pretty(item, depth + 1, out)?;
            }
            indent(out, depth);
            out.push('}');
        }
        other => write_python(other, out)?,
    }
    Ok(())
}

/// Python's `ensure_ascii=True` applied to JSON written with it off. Outside strings JSON is
/// ASCII without DEL, so every character escaped here is inside a string, where `\uXXXX` is
/// what Python writes.
fn ascii_only(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() && c != '\u{7f}' {
            out.push(c);
        } else {
            let mut units = [0_u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
    }
    out
}

/// Formats a float exactly as Python's `repr` does; `None` for NaN and infinities, which the
/// canonical form refuses.
#[must_use]
pub fn python_float_repr(value: f64) -> Option<String> {
    if !value.is_finite() {
        return None;
    }
    let abs = value.abs();
    // Rust's `{:e}` gives the shortest round-trip digit count, like Python's repr, but when two
    // last digits both round-trip it may not take the nearest one (ties to even) as Python
    // does; re-rounding exactly to that many digits does, unless that leaves the round-trip
    // interval at a power-of-two boundary.
    let shortest = format!("{abs:e}");
    let count = shortest
        .split('e')
        .next()?
        .bytes()
        .filter(u8::is_ascii_digit)
        .count();
    let nearest = format!("{abs:.prec$e}", prec = count.saturating_sub(1));
    let sci = if nearest.parse::<f64>().ok() == Some(abs) {
        nearest
    } else {
        shortest
    };
    let (mantissa, exponent) = sci.split_once('e')?;
    let exponent: i32 = exponent.parse().ok()?;
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let len = i32::try_from(digits.len()).ok()?;
    // Position of the decimal point relative to the digit string, as in Python's float_repr.
    let point = exponent + 1;
    let mut out = String::new();
    if value.is_sign_negative() {
        out.push('-');
    }
    if (-4 < point) && (point <= 16) {
        if point <= 0 {
            out.push_str("0.");
            for _ in 0..-point {
                out.push('0');
            }
            out.push_str(&digits);
        } else if point >= len {
            out.push_str(&digits);
            for _ in 0..point - len {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            let (int, frac) = digits.split_at(usize::try_from(point).ok()?);
            out.push_str(int);
            out.push('.');
            out.push_str(frac);
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let sign = if exponent < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{:02}", exponent.unsigned_abs());
    }
    Some(out)
}

/// A JSON value as the original's Python sees it: integers keep their exact digits, objects
/// keep their order (the written line is not sorted).
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Int(String),
    Float(f64),
    Str(String),
    Array(Vec<Self>),
    Object(Vec<(String, Self)>),
}

impl Json {
    fn opt_str(value: Option<String>) -> Self {
        value.map_or(Self::Null, Self::Str)
    }

    fn from_value(value: Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(b) => Self::Bool(b),
            Value::Number(n) => {
                if n.is_f64() {
                    // serde_json cannot hold NaN or infinities, so this stays finite.
                    n.as_f64().map_or(Self::Null, Self::Float)
                } else {
                    Self::Int(n.to_string())
                }
            }
            Value::String(s) => Self::Str(s),
            Value::Array(items) => Self::Array(items.into_iter().map(Self::from_value).collect()),
            Value::Object(map) => Self::from_map(map),
        }
    }

    fn from_map(map: Map<String, Value>) -> Self {
        Self::Object(
            map.into_iter()
                .map(|(k, v)| (k, Self::from_value(v)))
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Self::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            _ => None,
        }
    }

    fn as_int(&self) -> Option<i128> {
        match self {
            Self::Int(digits) => digits.parse().ok(),
            _ => None,
        }
    }

    fn as_u64(&self) -> Option<u64> {
        self.as_int().and_then(|i| u64::try_from(i).ok())
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Float(f) => Some(*f),
            Self::Int(digits) => digits.parse().ok(),
            _ => None,
        }
    }
}

impl AuditResult {
    fn into_json(self) -> Json {
        Json::Object(vec![
            ("ok".to_owned(), Json::Bool(self.ok)),
            (
                "exit_code".to_owned(),
                self.exit_code
                    .map_or(Json::Null, |c| Json::Int(c.to_string())),
            ),
            (
                "duration_ms".to_owned(),
                self.duration_ms
                    .map_or(Json::Null, |d| Json::Int(d.to_string())),
            ),
            ("error_code".to_owned(), Json::opt_str(self.error_code)),
        ])
    }
}

/// Why a record could not be serialised or signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum RecordError {
    /// The canonical form refuses what JSON cannot carry.
    #[error("audit records cannot carry NaN or infinite numbers")]
    NonFiniteFloat,
    #[error("the audit key was refused")]
    Key,
}

fn dash_or(value: Option<&str>) -> Json {
    Json::Str(value.unwrap_or("-").to_owned())
}

fn record_hmac(key: &[u8; KEY_LEN], fields: &[(String, Json)]) -> Result<String, RecordError> {
    let mut canonical = String::new();
    write_canonical_object(fields, &mut canonical)?;
    hmac_hex(key, canonical.as_bytes())
}

fn hmac_hex(key: &[u8; KEY_LEN], message: &[u8]) -> Result<String, RecordError> {
    // HMAC takes keys of any length, so this never fails; the API just cannot say so.
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).map_err(|_| RecordError::Key)?;
    mac.update(message);
    Ok(encode_hex(&mac.finalize().into_bytes()))
}

fn write_canonical(value: &Json, out: &mut String) -> Result<(), RecordError> {
    match value {
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out)?;
            }
            out.push(']');
        }
        Json::Object(fields) => write_canonical_object(fields, out)?,
        scalar => write_scalar(scalar, out)?,
    }
    Ok(())
}

fn write_canonical_object(fields: &[(String, Json)], out: &mut String) -> Result<(), RecordError> {
    // UTF-8 byte order is code point order, which is what Python's `sorted` uses.
    let mut sorted: Vec<&(String, Json)> = fields.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    out.push('{');
    for (i, (key, value)) in sorted.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(key, out);
        out.push(':');
        write_canonical(value, out)?;
    }
    out.push('}');
    Ok(())
}

/// Python's `json.dumps(value, ensure_ascii=False)`: insertion order, `", "` and `": "`.
fn write_python(value: &Json, out: &mut String) -> Result<(), RecordError> {
    match value {
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python(item, out)?;
            }
            out.push(']');
        }
        Json::Object(fields) => {
            out.push('{');
            for (i, (key, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(key, out);
                out.push_str(": ");
                write_python(value, out)?;
            }
            out.push('}');
        }
        scalar => write_scalar(scalar, out)?,
    }
    Ok(())
}

fn write_scalar(value: &Json, out: &mut String) -> Result<(), RecordError> {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Int(digits) => out.push_str(digits),
        Json::Float(f) => out.push_str(&python_float_repr(*f).ok_or(RecordError::NonFiniteFloat)?),
        Json::Str(s) => write_string(s, out),
        Json::Array(_) | Json::Object(_) => write_canonical(value, out)?,
    }
    Ok(())
}

/// Python's string escaping with `ensure_ascii=False`: only quote, backslash and C0 controls.
fn write_string(s: &str, out: &mut String) {
    write_python_string(s, false, out);
}

/// A JSON string as Python's `json.dumps` writes it: with `ensure_ascii` (its default) every
/// non-ASCII character becomes `\uXXXX` (astral ones as a surrogate pair); without, only
/// quote, backslash and C0 controls are escaped.
#[must_use]
pub fn python_json_string(s: &str, ensure_ascii: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_python_string(s, ensure_ascii, &mut out);
    out
}

fn write_python_string(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 || (ensure_ascii && u32::from(c) > 0x7e) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Parses one line the way Python's `json.loads` would, or `None`. Unlike Python it refuses
/// `NaN`/`Infinity` and lone surrogates, which no record the original writes can contain.
fn parse_line(raw: &[u8]) -> Option<Json> {
    let text = std::str::from_utf8(raw).ok()?;
    let mut parser = Parser {
        bytes: text.as_bytes(),
        text,
        pos: 0,
    };
    let value = parser.value(0)?;
    parser.skip_ws();
    (parser.pos == parser.bytes.len() && matches!(value, Json::Object(_))).then_some(value)
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while matches!(self.bytes.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, literal: &str) -> Option<()> {
        self.text[self.pos..]
            .starts_with(literal)
            .then(|| self.pos += literal.len())
    }

    fn value(&mut self, depth: usize) -> Option<Json> {
        if depth > MAX_NESTING {
            return None;
        }
        self.skip_ws();
        match *self.bytes.get(self.pos)? {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => self.string().map(Json::Str),
            b't' => self.eat("true").map(|()| Json::Bool(true)),
            b'f' => self.eat("false").map(|()| Json::Bool(false)),
            b'n' => self.eat("null").map(|()| Json::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn object(&mut self, depth: usize) -> Option<Json> {
        self.pos += 1;
        let mut fields: Vec<(String, Json)> = Vec::new();
        self.skip_ws();
        if self.eat("}").is_some() {
            return Some(Json::Object(fields));
        }
        loop {
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return None;
            }
            let key = self.string()?;
            self.skip_ws();
            self.eat(":")?;
            let value = self.value(depth + 1)?;
            // Python's dict keeps the first position and the last value of a repeated key.
            if let Some(slot) = fields.iter_mut().find(|(k, _)| *k == key) {
                slot.1 = value;
            } else {
                fields.push((key, value));
            }
            self.skip_ws();
            if self.eat(",").is_some() {
                continue;
            }
            self.eat("}")?;
            return Some(Json::Object(fields));
        }
    }

    fn array(&mut self, depth: usize) -> Option<Json> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.eat("]").is_some() {
            return Some(Json::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            if self.eat(",").is_some() {
                continue;
            }
            self.eat("]")?;
            return Some(Json::Array(items));
        }
    }

    fn string(&mut self) -> Option<String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let start = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            // The stops are ASCII, so both ends are char boundaries.
            out.push_str(self.text.get(start..self.pos)?);
            match *self.bytes.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(out);
                }
                b'\\' => {
                    let escape = *self.bytes.get(self.pos + 1)?;
                    self.pos += 2;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{08}'),
                        b'f' => out.push('\u{0c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return None,
                    }
                }
                // Python's strict mode refuses raw control characters inside strings.
                _ => return None,
            }
        }
    }

    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) {
            self.eat("\\u")?;
            let second = self.hex4()?;
            if !(0xDC00..0xE000).contains(&second) {
                return None;
            }
            char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
        } else {
            char::from_u32(first)
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.text.get(self.pos..self.pos + 4)?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.pos += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    fn number(&mut self) -> Option<Json> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while p.bytes.get(p.pos).is_some_and(u8::is_ascii_digit) {
                p.pos += 1;
            }
            p.pos > from
        };
        if self.bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        match self.bytes.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return None,
        }
        let mut is_float = false;
        if self.bytes.get(self.pos) == Some(&b'.') {
            let save = self.pos;
            self.pos += 1;
            if digits(self) {
                is_float = true;
            } else {
                // Python's scanner stops before a dot without digits; the caller then fails.
                self.pos = save;
            }
        }
        if matches!(self.bytes.get(self.pos), Some(b'e' | b'E')) {
            let save = self.pos;
            self.pos += 1;
            if matches!(self.bytes.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) {
                is_float = true;
            } else {
                self.pos = save;
            }
        }
        let text = &self.text[start..self.pos];
        if is_float {
            // Rust's parse is correctly rounded, so the float Python wrote comes back bit-exact.
            let value: f64 = text.parse().ok()?;
            value.is_finite().then_some(Json::Float(value))
        } else if text == "-0" {
            Some(Json::Int("0".to_owned()))
        } else {
            Some(Json::Int(text.to_owned()))
        }
    }
}

fn epoch_seconds(at: OffsetDateTime) -> f64 {
    // Python's time.time() divides nanoseconds the same way.
    #[allow(clippy::cast_precision_loss)]
    let nanos = at.unix_timestamp_nanos() as f64;
    nanos / 1e9
}

fn open_for_append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).append(true).create(true);
    private_mode(&mut options);
    options.open(path)
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

/// A log created by someone else with a wider mode is narrowed rather than refused: it holds
/// metadata, not secrets, and refusing would stop the daemon from starting.
#[cfg(unix)]
fn tighten_mode(file: &File) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = file.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn tighten_mode(_file: &File) -> io::Result<()> {
    Ok(())
}

#[cfg(unix)]
fn check_key_mode(path: &Path, file: &File) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = file.metadata()?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "audit key file {} has mode {mode:o}; it must be readable by its owner only (chmod 600)",
                path.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_key_mode(_path: &Path, _file: &File) -> io::Result<()> {
    Ok(())
}

fn ends_with_newline(file: &mut File, len: u64) -> io::Result<bool> {
    let mut last = [0_u8; 1];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// The last non-blank line, read backwards in [`TAIL_WINDOW`] steps up to [`TAIL_SEARCH_LIMIT`].
fn last_line(file: &mut File, len: u64) -> io::Result<Option<Vec<u8>>> {
    let mut start = len;
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let step = TAIL_WINDOW.min(start);
        start -= step;
        let mut chunk = vec![0_u8; usize::try_from(step).map_err(io::Error::other)?];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&buf);
        buf = chunk;
        let end = buf.iter().rposition(|b| !b.is_ascii_whitespace());
        if let Some(end) = end
            && let Some(newline) = buf[..end].iter().rposition(|&b| b == b'\n')
        {
            return Ok(Some(buf[newline + 1..=end].to_vec()));
        }
        if start == 0 || len - start >= TAIL_SEARCH_LIMIT {
            // Either the whole file is one line or we gave up; a fragment fails to parse and
            // the chain restarts at 1, as in the reference.
            return Ok(end.map(|end| buf[..=end].to_vec()));
        }
    }
}

fn first_record_ts(file: &mut File) -> io::Result<Option<f64>> {
    file.seek(SeekFrom::Start(0))?;
    let mut line = Vec::new();
    BufReader::new(file.take(TAIL_SEARCH_LIMIT)).read_until(b'\n', &mut line)?;
    Ok(parse_line(&line).and_then(|r| r.get("ts").and_then(Json::as_f64)))
}

fn rotation_target(path: &Path, now: OffsetDateTime) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "audit log path has no file name",
            )
        })?
        .to_string_lossy()
        .into_owned();
    let stamp = now
        .format(format_description!(
            "[year][month][day]-[hour][minute][second]"
        ))
        .map_err(io::Error::other)?;
    let base = format!("{name}.{stamp}");
    let mut candidate = path.with_file_name(&base);
    let mut n = 1_u32;
    while fs::symlink_metadata(&candidate).is_ok() {
        candidate = path.with_file_name(format!("{base}-{n}"));
        n += 1;
    }
    Ok(candidate)
}

fn random_key() -> [u8; KEY_LEN] {
    let mut key = [0_u8; KEY_LEN];
    rand::fill(&mut key);
    key
}

/// Writes a new key next to the old file and renames it over, so a crash never leaves half a key.
fn replace_key_file(path: &Path, key: &[u8; KEY_LEN]) -> io::Result<()> {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let temp = path.with_file_name(format!(".{name}.{}.tmp", uuid::Uuid::new_v4()));
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    private_mode(&mut options);
    let written = options.open(&temp).and_then(|mut file| {
        file.write_all(encode_hex(key).as_bytes())?;
        file.sync_all()
    });
    let renamed = written.and_then(|()| fs::rename(&temp, path));
    if renamed.is_err() {
        let _ = fs::remove_file(&temp);
    }
    renamed
}

fn encode_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

fn decode_hex_key(text: &str) -> Option<[u8; KEY_LEN]> {
    let bytes = text.as_bytes();
    if bytes.len() != KEY_LEN * 2 {
        return None;
    }
    let mut key = [0_u8; KEY_LEN];
    for (slot, pair) in key.iter_mut().zip(bytes.chunks_exact(2)) {
        *slot = (hex_value(pair[0])? << 4) | hex_value(pair[1])?;
    }
    Some(key)
}

const fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    const KEY: [u8; KEY_LEN] = {
        let mut key = [0_u8; KEY_LEN];
        let mut i = 0;
        while i < KEY_LEN {
            #[allow(clippy::cast_possible_truncation)]
            {
                key[i] = i as u8;
            }
            i += 1;
        }
        key
    };

    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            let dir = std::env::temp_dir().join(format!("audit-chain-{}", uuid::Uuid::new_v4()));
            fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        fn join(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }

        fn names(&self) -> Vec<String> {
            let mut names: Vec<String> = fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn identity() -> AuditIdentity {
        AuditIdentity {
            session_id: Some("s-1".to_owned()),
            machine_id: None,
            shim_version: "1.1.0".to_owned(),
        }
    }

    fn details(pairs: &[(&str, Value)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    fn ok() -> AuditResult {
        AuditResult {
            ok: true,
            duration_ms: Some(3),
            ..AuditResult::default()
        }
    }

    fn append_n(chain: &mut AuditChain, n: usize) {
        for i in 0..n {
            chain
                .append(
                    Some(&format!("r-{i}")),
                    "FILE_STAT",
                    details(&[("path", Value::from(format!("/tmp/{i}")))]),
                    ok(),
                )
                .unwrap();
        }
    }

    fn lines(path: &Path) -> Vec<String> {
        fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn write_lines(path: &Path, lines: &[String]) {
        let mut text = lines.join("\n");
        text.push('\n');
        fs::write(path, text).unwrap();
    }

    fn issue(line: usize, kind: IssueKind) -> Issue {
        Issue { line, kind }
    }

    fn field(line: &str, name: &str) -> Json {
        parse_line(line.as_bytes())
            .unwrap()
            .get(name)
            .unwrap()
            .clone()
    }

    #[test]
    fn float_repr_matches_python() {
        // Each right-hand side is what CPython 3 prints for `repr(left)`.
        let table: &[(f64, &str)] = &[
            (1712345678.123, "1712345678.123"),
            (1e-05, "1e-05"),
            (0.0001, "0.0001"),
            (1e+16, "1e+16"),
            (1.5e+300, "1.5e+300"),
            (123456789012345.6, "123456789012345.6"),
            (0.1, "0.1"),
            (100.0, "100.0"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (1000000000000000.0, "1000000000000000.0"),
            (9999999999999998.0, "9999999999999998.0"),
            (5e-324, "5e-324"),
            (1.7976931348623157e+308, "1.7976931348623157e+308"),
            (0.30000000000000004, "0.30000000000000004"),
            (-1e-07, "-1e-07"),
            (1.2345e-07, "1.2345e-07"),
            (2.5, "2.5"),
            (-123.456, "-123.456"),
            (1e+22, "1e+22"),
            (1.0, "1.0"),
            (1.2345678901234567e+19, "1.2345678901234567e+19"),
            (0.00012345, "0.00012345"),
            (1712345678.1234567, "1712345678.1234567"),
            (9007199254740992.0, "9007199254740992.0"),
            (0.00015000000000000001, "0.00015000000000000001"),
            // A tie between two round-tripping last digits: Python takes the even one.
            (-1113178120592002.2, "-1113178120592002.2"),
        ];
        for &(value, expected) in table {
            assert_eq!(
                python_float_repr(value).as_deref(),
                Some(expected),
                "{value:e}"
            );
        }
        assert_eq!(python_float_repr(f64::NAN), None);
        assert_eq!(python_float_repr(f64::INFINITY), None);
        assert_eq!(python_float_repr(f64::NEG_INFINITY), None);
    }

    #[test]
    fn known_answer_record() {
        let dir = TempDir::new();
        let chain = AuditChain::open(&dir.join("audit.log"), KEY, identity()).unwrap();
        let details = details(&[
            ("path", Value::from("/tmp/é\"x\n")),
            ("ratio", Value::from(0.5)),
            ("size", Value::from(12)),
            ("tiny", Value::from(1e-05)),
            ("ctl", Value::from("\t\u{1}\u{7f}")),
            ("big", Value::from(1e16)),
            ("nested", serde_json::json!([true, null, -3])),
        ]);
        let result = AuditResult {
            ok: true,
            exit_code: None,
            duration_ms: Some(7),
            error_code: None,
        };
        let record = PendingRecord {
            session_id: None,
            request_id: Some("r-1".to_owned()),
            op: "FILE_READ".to_owned(),
            details,
            result,
        };
        let mut fields = chain.record(1712345678.123, chain.next_seq, None, record);

        let mut canonical = String::new();
        write_canonical_object(&fields, &mut canonical).unwrap();
        // Derived by hand from the rules, and checked against Python's
        // json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False).
        assert_eq!(
            canonical,
            concat!(
                r#"{"details":{"big":1e+16,"ctl":"\t\u0001"#,
                "\u{7f}",
                r#"","nested":[true,null,-3],"path":"/tmp/é\"x\n","ratio":0.5,"size":12,"#,
                r#""tiny":1e-05},"machine_id":"-","op":"FILE_READ","prev_hmac":null,"#,
                r#""request_id":"r-1","result":{"duration_ms":7,"error_code":null,"#,
                r#""exit_code":null,"ok":true},"seq":1,"session_id":"s-1","#,
                r#""shim_version":"1.1.0","ts":1712345678.123}"#
            )
        );
        // HMAC-SHA256 with key 00 01 .. 1f over that string, from Python's hmac module.
        let mac = record_hmac(&KEY, &fields).unwrap();
        assert_eq!(
            mac,
            "bc450baf0bd5724394493fe138fc42e16ab0167a4be1d1c30e8e42513f8df39d"
        );

        fields.push(("hmac".to_owned(), Json::Str(mac)));
        let mut line = String::new();
        write_python(&Json::Object(fields), &mut line).unwrap();
        // Python's json.dumps(record, ensure_ascii=False) for the same record.
        assert_eq!(
            line,
            concat!(
                r#"{"ts": 1712345678.123, "session_id": "s-1", "machine_id": "-", "#,
                r#""shim_version": "1.1.0", "request_id": "r-1", "op": "FILE_READ", "#,
                r#""details": {"big": 1e+16, "ctl": "\t\u0001"#,
                "\u{7f}",
                r#"", "nested": [true, null, -3], "#,
                r#""path": "/tmp/é\"x\n", "ratio": 0.5, "size": 12, "tiny": 1e-05}, "#,
                r#""result": {"ok": true, "exit_code": null, "duration_ms": 7, "error_code": null}, "#,
                r#""seq": 1, "prev_hmac": null, "#,
                r#""hmac": "bc450baf0bd5724394493fe138fc42e16ab0167a4be1d1c30e8e42513f8df39d"}"#
            )
        );

        // What the original wrote verifies here.
        let report = verify_bytes(format!("{line}\n").as_bytes(), &KEY);
        assert_eq!(
            report,
            VerifyReport {
                records: 1,
                issues: vec![]
            }
        );
    }

    #[test]
    fn three_appends_verify_clean() {
        let dir = TempDir::new();
        let path = dir.join("logs/audit.log");
        let mut chain = AuditChain::open(&path, KEY, identity()).unwrap();
        assert_eq!(
            chain
                .append(
                    None,
                    "SHIM_START",
                    details(&[("shim_version", "1.1.0".into())]),
                    ok()
                )
                .unwrap(),
            1
        );
        append_n(&mut chain, 2);
        assert_eq!(chain.next_seq(), 4);

        let written = lines(&path);
        assert_eq!(written.len(), 3);
        assert_eq!(field(&written[0], "request_id"), Json::Null);
        assert_eq!(field(&written[0], "prev_hmac"), Json::Null);
        assert_eq!(
            field(&written[0], "session_id"),
            Json::Str("s-1".to_owned())
        );
        assert_eq!(field(&written[0], "machine_id"), Json::Str("-".to_owned()));
        assert_eq!(field(&written[1], "prev_hmac"), field(&written[0], "hmac"));
        assert_eq!(field(&written[2], "seq"), Json::Int("3".to_owned()));
        assert!(written[0].starts_with(r#"{"ts": "#), "{}", written[0]);
        let report = verify(&path, &KEY).unwrap();
        assert_eq!(
            report,
            VerifyReport {
                records: 3,
                issues: vec![]
            }
        );
        assert!(report.is_clean());

        // A different key must not verify.
        let other = verify(&path, &[7; KEY_LEN]).unwrap();
        assert_eq!(
            other.issues,
            (1..=3)
                .map(|l| issue(l, IssueKind::HmacMismatch))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn chain_continues_across_reopen() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        let mut chain = AuditChain::open(&path, KEY, identity()).unwrap();
        append_n(&mut chain, 3);
        let last = chain.last_hmac().unwrap().to_owned();
        drop(chain);

        let mut chain = AuditChain::open(&path, KEY, identity()).unwrap();
        assert_eq!(chain.next_seq(), 4);
        assert_eq!(chain.last_hmac(), Some(last.as_str()));
        append_n(&mut chain, 1);
        let written = lines(&path);
        assert_eq!(field(&written[3], "seq"), Json::Int("4".to_owned()));
        assert_eq!(field(&written[3], "prev_hmac"), Json::Str(last));
        assert!(verify(&path, &KEY).unwrap().is_clean());
    }

    #[test]
    fn a_batch_is_chained_like_single_appends_and_written_at_once() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        let mut chain = AuditChain::open(&path, KEY, identity()).unwrap();
        append_n(&mut chain, 1);
        let batch = (0..3)
            .map(|i| PendingRecord {
                session_id: None,
                request_id: Some(format!("r-{i}")),
                op: "FILE_STAT".to_owned(),
                details: Map::new(),
                result: AuditResult::default(),
            })
            .collect();
        assert_eq!(chain.append_batch(batch).unwrap(), 4);
        assert_eq!(chain.append_batch(Vec::new()).unwrap(), 4);
        append_n(&mut chain, 1);
        let written = lines(&path);
        assert_eq!(written.len(), 5);
        assert_eq!(
            field(&written[2], "request_id"),
            Json::Str("r-1".to_owned())
        );
        assert_eq!(field(&written[4], "seq"), Json::Int("5".to_owned()));
        assert!(verify(&path, &KEY).unwrap().is_clean());
    }

    #[test]
    fn verify_flags_a_tampered_record() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        append_n(&mut AuditChain::open(&path, KEY, identity()).unwrap(), 3);
        let mut written = lines(&path);
        written[1] = written[1].replace("/tmp/1", "/tmp/X");
        write_lines(&path, &written);
        let report = verify(&path, &KEY).unwrap();
        assert_eq!(report.issues, vec![issue(2, IssueKind::HmacMismatch)]);
        assert_eq!(report.records, 3);
    }

    #[test]
    fn verify_flags_a_deleted_record() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        append_n(&mut AuditChain::open(&path, KEY, identity()).unwrap(), 3);
        let mut written = lines(&path);
        written.remove(1);
        write_lines(&path, &written);
        assert_eq!(
            verify(&path, &KEY).unwrap().issues,
            vec![
                issue(2, IssueKind::SequenceGap),
                issue(2, IssueKind::ChainBreak)
            ]
        );
    }

    #[test]
    fn verify_flags_a_truncated_last_line() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        append_n(&mut AuditChain::open(&path, KEY, identity()).unwrap(), 3);
        let text = fs::read(&path).unwrap();
        fs::write(&path, &text[..text.len() - 5]).unwrap();
        let report = verify(&path, &KEY).unwrap();
        assert_eq!(report.issues, vec![issue(3, IssueKind::Truncated)]);
        assert_eq!(report.records, 2);
    }

    #[test]
    fn verify_stops_at_garbage_and_missing_fields() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        append_n(&mut AuditChain::open(&path, KEY, identity()).unwrap(), 3);
        let good = lines(&path);

        let mut garbage = good.clone();
        garbage.insert(1, "not json at all".to_owned());
        write_lines(&path, &garbage);
        let report = verify(&path, &KEY).unwrap();
        assert_eq!(report.issues, vec![issue(2, IssueKind::ParseError)]);
        assert_eq!(report.records, 1);

        let mut no_seq = good.clone();
        no_seq[1] = no_seq[1].replace(r#""seq": 2"#, r#""seq": "2""#);
        write_lines(&path, &no_seq);
        assert_eq!(
            verify(&path, &KEY).unwrap().issues,
            vec![issue(2, IssueKind::MissingField)]
        );

        let mut no_hmac = good;
        let cut = no_hmac[2].find(r#", "hmac""#).unwrap();
        no_hmac[2] = format!("{}}}", &no_hmac[2][..cut]);
        write_lines(&path, &no_hmac);
        assert_eq!(
            verify(&path, &KEY).unwrap().issues,
            vec![issue(3, IssueKind::MissingField)]
        );
    }

    #[test]
    fn empty_file_is_clean_and_missing_file_is_an_error() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        fs::write(&path, b"").unwrap();
        assert_eq!(verify(&path, &KEY).unwrap(), VerifyReport::default());
        assert!(verify(&dir.join("absent.log"), &KEY).is_err());
    }

    #[test]
    fn unreadable_tail_restarts_the_chain_on_its_own_line() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        append_n(&mut AuditChain::open(&path, KEY, identity()).unwrap(), 2);
        let text = fs::read(&path).unwrap();
        fs::write(&path, &text[..text.len() - 10]).unwrap();

        let mut chain = AuditChain::open(&path, KEY, identity()).unwrap();
        assert_eq!(chain.next_seq(), 1);
        assert_eq!(chain.last_hmac(), None);
        append_n(&mut chain, 1);
        let written = lines(&path);
        assert_eq!(written.len(), 3);
        assert_eq!(field(&written[2], "seq"), Json::Int("1".to_owned()));
        // The partial line stops verification, but the new record was not glued onto it.
        assert_eq!(
            verify(&path, &KEY).unwrap().issues,
            vec![issue(2, IssueKind::ParseError)]
        );
    }

    #[test]
    fn a_record_longer_than_the_tail_window_keeps_the_chain() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        let mut chain = AuditChain::open(&path, KEY, identity()).unwrap();
        let long = "x".repeat(3 * usize::try_from(TAIL_WINDOW).unwrap());
        chain
            .append(
                None,
                "EXECUTE_COMMAND",
                details(&[("command", long.into())]),
                ok(),
            )
            .unwrap();
        append_n(&mut chain, 1);
        chain
            .append(
                None,
                "EXECUTE_COMMAND",
                details(&[("command", "y".repeat(20_000).into())]),
                ok(),
            )
            .unwrap();
        let last = chain.last_hmac().unwrap().to_owned();
        drop(chain);
        let chain = AuditChain::open(&path, KEY, identity()).unwrap();
        assert_eq!(chain.next_seq(), 4);
        assert_eq!(chain.last_hmac(), Some(last.as_str()));
    }

    #[test]
    fn rotates_by_size() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        let rotation = Rotation {
            max_bytes: 600,
            max_age: MAX_LOG_AGE,
        };
        let mut chain = AuditChain::open_with(&path, KEY, identity(), rotation).unwrap();
        let mut seqs = Vec::new();
        for _ in 0..3 {
            seqs.push(
                chain
                    .append(
                        None,
                        "FILE_STAT",
                        details(&[("path", "/tmp/a".into())]),
                        ok(),
                    )
                    .unwrap(),
            );
        }
        // Each record is ~400 bytes: the second write finds 400 < 600, the third finds >= 600.
        assert_eq!(seqs, vec![1, 2, 1]);
        let names = dir.names();
        assert_eq!(names.len(), 2, "{names:?}");
        assert_eq!(names[0], "audit.log");
        let rotated = dir.join(&names[1]);
        assert!(names[1].starts_with("audit.log."), "{names:?}");
        assert_eq!(
            verify(&rotated, &KEY).unwrap(),
            VerifyReport {
                records: 2,
                issues: vec![]
            }
        );
        assert_eq!(
            verify(&path, &KEY).unwrap(),
            VerifyReport {
                records: 1,
                issues: vec![]
            }
        );
        assert_eq!(field(&lines(&path)[0], "prev_hmac"), Json::Null);
    }

    #[test]
    fn rotates_by_age_of_the_first_record() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        let clock = ManualClock::new();
        let mut chain = AuditChain::open(&path, KEY, identity())
            .unwrap()
            .with_clock(Arc::new(clock.clone()));
        append_n(&mut chain, 2);
        clock.advance(MAX_LOG_AGE - Duration::from_secs(60));
        append_n(&mut chain, 1);
        assert_eq!(dir.names().len(), 1);
        drop(chain);

        // The age comes from the file's first record, also after a restart.
        let mut chain = AuditChain::open(&path, KEY, identity())
            .unwrap()
            .with_clock(Arc::new(clock.clone()));
        clock.advance(Duration::from_secs(120));
        assert_eq!(
            chain.append(None, "SHIM_START", Map::new(), ok()).unwrap(),
            1
        );
        assert_eq!(dir.names().len(), 2);
    }

    #[test]
    fn explicit_rotation_and_collision_names() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        let mut chain = AuditChain::open(&path, KEY, identity()).unwrap();
        assert_eq!(chain.rotate().unwrap(), None);
        append_n(&mut chain, 2);
        let rotated = chain.rotate().unwrap().unwrap();
        let name = rotated.file_name().unwrap().to_string_lossy().into_owned();
        let stamp = name.strip_prefix("audit.log.").unwrap();
        assert_eq!(stamp.len(), 15, "{name}");
        assert!(
            stamp.chars().enumerate().all(|(i, c)| if i == 8 {
                c == '-'
            } else {
                c.is_ascii_digit()
            }),
            "{name}"
        );
        assert_eq!(chain.next_seq(), 1);
        assert_eq!(chain.last_hmac(), None);
        assert_eq!(verify(&rotated, &KEY).unwrap().records, 2);

        let at = OffsetDateTime::from_unix_timestamp(1_712_345_678).unwrap();
        let first = rotation_target(&path, at).unwrap();
        assert_eq!(first, dir.join("audit.log.20240405-193438"));
        fs::write(&first, b"x").unwrap();
        let second = rotation_target(&path, at).unwrap();
        assert_eq!(second, dir.join("audit.log.20240405-193438-1"));
        fs::write(&second, b"x").unwrap();
        assert_eq!(
            rotation_target(&path, at).unwrap(),
            dir.join("audit.log.20240405-193438-2")
        );
    }

    #[cfg(unix)]
    #[test]
    fn log_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        append_n(&mut AuditChain::open(&path, KEY, identity()).unwrap(), 1);
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);

        let loose = dir.join("loose.log");
        fs::write(&loose, b"").unwrap();
        fs::set_permissions(&loose, fs::Permissions::from_mode(0o644)).unwrap();
        drop(AuditChain::open(&loose, KEY, identity()).unwrap());
        assert_eq!(mode(&loose), 0o600);
    }

    #[test]
    fn key_file_is_created_reloaded_and_repaired() {
        let dir = TempDir::new();
        let path = dir.join("keys/audit-key");
        let key = load_or_create_key_file(&path).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text, encode_hex(&key));
        assert_eq!(text.len(), 64);
        assert_eq!(load_or_create_key_file(&path).unwrap(), key);
        assert_ne!(
            key,
            load_or_create_key_file(&dir.join("other-key")).unwrap()
        );

        fs::write(&path, format!("{}\n", encode_hex(&KEY).to_uppercase())).unwrap();
        assert_eq!(load_or_create_key_file(&path).unwrap(), KEY);

        fs::write(&path, "not a key").unwrap();
        let fresh = load_or_create_key_file(&path).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), encode_hex(&fresh));
        assert_eq!(dir.names(), vec!["keys".to_owned(), "other-key".to_owned()]);
    }

    #[cfg(unix)]
    #[test]
    fn key_file_must_be_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new();
        let path = dir.join("audit-key");
        load_or_create_key_file(&path).unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_or_create_key_file(&path).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    }

    #[test]
    fn parser_reads_what_python_writes() {
        let parse = |s: &str| parse_line(s.as_bytes());
        assert_eq!(
            parse(r#"{"a": 1, "a": 2, "b": -0, "c": 1.5e3, "d": "\ud83d\ude00\u00e9"}"#),
            Some(Json::Object(vec![
                ("a".to_owned(), Json::Int("2".to_owned())),
                ("b".to_owned(), Json::Int("0".to_owned())),
                ("c".to_owned(), Json::Float(1500.0)),
                ("d".to_owned(), Json::Str("😀é".to_owned())),
            ]))
        );
        for bad in [
            r#"{"a": NaN}"#,
            r#"{"a": Infinity}"#,
            r#"{"a": 1e400}"#,
            r#"{"a": "\ud83d"}"#,
            r#"{"a": 01}"#,
            r#"{"a": 1.}"#,
            "{\"a\": \"raw\ttab\"}",
            r#"{"a": 1} x"#,
            r#"[1]"#,
            "",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(parse(&deep), None);
        // Floats come back bit-exact, so recomputed hmacs match.
        for text in [
            "1712345678.1234567",
            "0.30000000000000004",
            "5e-324",
            "1.7976931348623157e+308",
        ] {
            let Some(Json::Float(f)) = parse(&format!("{{\"t\": {text}}}"))
                .unwrap()
                .get("t")
                .cloned()
            else {
                panic!("{text}");
            };
            assert_eq!(python_float_repr(f).unwrap(), text);
        }
    }

    #[test]
    fn rotated_files_are_listed_oldest_first_and_only_they_can_be_removed() {
        let dir = TempDir::new();
        let live = dir.join("audit.log");
        for name in [
            "audit.log",
            "audit.log.20240102-000000-10",
            "audit.log.20240102-000000",
            "audit.log.20240102-000000-2",
            "audit.log.20240101-235959",
            "audit.log.2024010-000000",
            "audit.log.20240101-000000-",
            "audit.log.20240101-000000-+1",
            "audit.log.20240101-000000.gz",
            "other.log.20240101-000000",
        ] {
            fs::write(dir.join(name), b"x").unwrap();
        }
        fs::create_dir(dir.join("audit.log.20230101-000000")).unwrap();
        let names: Vec<String> = rotated_files(&live)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "audit.log.20240101-235959",
                "audit.log.20240102-000000",
                "audit.log.20240102-000000-2",
                "audit.log.20240102-000000-10",
            ]
        );
        assert!(
            rotated_files(&dir.join("missing/audit.log"))
                .unwrap()
                .is_empty()
        );

        for refused in [
            live.clone(),
            dir.join("other.log.20240101-000000"),
            dir.join("sub/audit.log.20240101-235959"),
        ] {
            assert_eq!(
                remove_rotated(&live, &refused).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{}",
                refused.display()
            );
        }
        let rotated = dir.join("audit.log.20240101-235959");
        assert!(remove_rotated(&live, &rotated).unwrap());
        assert!(!remove_rotated(&live, &rotated).unwrap());
        assert!(live.exists());
    }

    #[test]
    fn rotate_file_works_without_a_chain_and_the_writer_restarts_at_one() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_712_345_678);
        assert_eq!(rotate_file(&path, at).unwrap(), None);
        let mut chain = AuditChain::open(&path, KEY, identity()).unwrap();
        assert_eq!(rotate_file(&path, at).unwrap(), None);
        append_n(&mut chain, 2);
        let rotated = rotate_file(&path, at).unwrap().unwrap();
        assert_eq!(rotated, dir.join("audit.log.20240405-193438"));
        assert_eq!(utc_stamp(at), "20240405-193438");
        append_n(&mut chain, 1);
        assert_eq!(field(&lines(&path)[0], "seq"), Json::Int("1".to_owned()));
        assert!(verify(&path, &KEY).unwrap().is_clean());
        assert_eq!(verify(&rotated, &KEY).unwrap().records, 2);
    }

    #[test]
    fn a_file_changed_behind_the_open_handle_is_opened_again() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        let mut chain = AuditChain::open(&path, KEY, identity()).unwrap();
        append_n(&mut chain, 1);
        // Someone else's partial line: the kept handle's length no longer matches.
        let mut other = OpenOptions::new().append(true).open(&path).unwrap();
        other.write_all(b"{\"partial\": ").unwrap();
        append_n(&mut chain, 1);
        let written = lines(&path);
        assert_eq!(written.len(), 3, "{written:?}");
        assert_eq!(field(&written[2], "seq"), Json::Int("2".to_owned()));

        // Replaced by a copy of the same length: another inode, so the new file is written.
        let copy = dir.join("copy.log");
        fs::copy(&path, &copy).unwrap();
        fs::rename(&copy, &path).unwrap();
        append_n(&mut chain, 1);
        assert_eq!(lines(&path).len(), 4);
        assert_eq!(field(&lines(&path)[3], "seq"), Json::Int("3".to_owned()));
    }

    #[test]
    fn load_key_file_never_creates_or_replaces() {
        let dir = TempDir::new();
        let path = dir.join("audit-key");
        assert_eq!(
            load_key_file(&path).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(!path.exists());
        let key = load_or_create_key_file(&path).unwrap();
        assert_eq!(load_key_file(&path).unwrap(), key);
        fs::write(&path, "not a key").unwrap();
        assert_eq!(
            load_key_file(&path).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), "not a key");
    }

    #[test]
    fn summaries_pretty_records_and_last_timestamps() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        let mut chain = AuditChain::open(&path, KEY, identity()).unwrap();
        chain
            .append(
                Some("r-1"),
                "FILE_READ",
                details(&[
                    ("path", "/tmp/é\u{202e}".into()),
                    ("list", Value::Array(vec![])),
                ]),
                AuditResult {
                    ok: false,
                    error_code: Some("FILE_NOT_FOUND".to_owned()),
                    ..AuditResult::default()
                },
            )
            .unwrap();
        let line = lines(&path).remove(0);
        let summary = summarize_line(line.as_bytes(), Some(&KEY)).unwrap();
        assert_eq!(summary.seq, Some(1));
        assert_eq!(summary.op.as_deref(), Some("FILE_READ"));
        assert_eq!(summary.ok, Some(false));
        assert_eq!(summary.error_code.as_deref(), Some("FILE_NOT_FOUND"));
        assert_eq!(summary.hmac_ok, Some(true));
        assert_eq!(summarize_line(line.as_bytes(), None).unwrap().hmac_ok, None);
        let tampered = line.replace("r-1", "r-2");
        assert_eq!(
            summarize_line(tampered.as_bytes(), Some(&KEY))
                .unwrap()
                .hmac_ok,
            Some(false)
        );
        assert_eq!(summarize_line(b"nope", None), None);

        let found = find_record(&path, 1).unwrap().unwrap();
        assert_eq!(found.line, 1);
        assert!(
            found.pretty.contains(
                "  \"details\": {\n    \"list\": [],\n    \"path\": \"/tmp/\\u00e9\\u202e\"\n  },\n"
            ),
            "{}",
            found.pretty
        );
        assert!(
            found.pretty.contains("\n  \"prev_hmac\": null,\n"),
            "{}",
            found.pretty
        );
        assert!(found.pretty.ends_with("\"\n}"), "{}", found.pretty);
        assert_eq!(find_record(&path, 2).unwrap(), None);

        let ts = summary.ts.unwrap();
        assert_eq!(last_record_ts(&path).unwrap(), Some(ts));
        let text = fs::read(&path).unwrap();
        fs::write(&path, &text[..text.len() - 3]).unwrap();
        assert_eq!(last_record_ts(&path).unwrap(), None);
        assert_eq!(
            format_epoch(1_712_345_678.25),
            "2024-04-05T19:34:38.250000+00:00"
        );
        assert_eq!(format_epoch(f64::INFINITY), "inf");
    }

    #[test]
    fn follower_reads_appends_partial_lines_rotation_and_truncation() {
        let dir = TempDir::new();
        let path = dir.join("audit.log");
        let mut follower = LogFollower::new(&path);
        assert!(follower.poll().unwrap().is_empty());
        assert!(!follower.is_open());

        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"one\ntw").unwrap();
        assert_eq!(follower.poll().unwrap(), vec![b"one".to_vec()]);
        assert!(follower.is_open());
        file.write_all(b"o\n\nthree\n").unwrap();
        assert_eq!(
            follower.poll().unwrap(),
            vec![b"two".to_vec(), Vec::new(), b"three".to_vec()]
        );
        assert!(follower.poll().unwrap().is_empty());

        // Renamed away with an unfinished line, and a new file in its place.
        file.write_all(b"four\nfi").unwrap();
        fs::rename(&path, dir.join("audit.log.1")).unwrap();
        fs::write(&path, b"new\n").unwrap();
        assert_eq!(
            follower.poll().unwrap(),
            vec![b"four".to_vec(), b"fi".to_vec(), b"new".to_vec()]
        );

        // Emptied in place and rewritten.
        fs::write(&path, b"").unwrap();
        assert!(follower.poll().unwrap().is_empty());
        fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"again\nx")
            .unwrap();
        assert_eq!(follower.poll().unwrap(), vec![b"again".to_vec()]);
        assert_eq!(follower.take_partial(), Some(b"x".to_vec()));
        assert_eq!(follower.take_partial(), None);
    }

    #[test]
    fn manifest_is_sorted_python_json_and_signed() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_712_345_678);
        let files = [
            ManifestFile::describe("audit.log", b""),
            ManifestFile::describe("audit.lög", b"abc"),
        ];
        assert_eq!(
            export_manifest(at, &files),
            concat!(
                r#"{"exported_at": "2024-04-05T19:34:38.000000+00:00", "files": ["#,
                r#"{"name": "audit.log", "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "size": 0}, "#,
                r#"{"name": "audit.l\u00f6g", "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "size": 3}], "#,
                r#""key_username": "audit_key"}"#
            )
        );
        let sig = sign_manifest(&KEY, b"manifest").unwrap();
        assert_eq!(sig.len(), 64);
        assert_eq!(sig, hmac_hex(&KEY, b"manifest").unwrap());
        assert_ne!(sig, sign_manifest(&[1; KEY_LEN], b"manifest").unwrap());
        assert_eq!(ascii_only("a\u{7f}😀"), "a\\u007f\\ud83d\\ude00");
    }

    #[cfg(unix)]
    #[test]
    fn probe_writable_leaves_nothing_behind() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new();
        let path = dir.join("logs/deeper/audit.log");
        probe_writable(&path).unwrap();
        assert_eq!(fs::read_dir(dir.join("logs/deeper")).unwrap().count(), 0);
        let mode = fs::metadata(dir.join("logs")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        fs::write(&path, b"").unwrap();
        probe_writable(&path).unwrap();

        fs::write(dir.join("file"), b"x").unwrap();
        assert!(probe_writable(&dir.join("file/audit.log")).is_err());
    }
}
