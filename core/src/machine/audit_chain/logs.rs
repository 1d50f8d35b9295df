//! Reading the log back, for the `audit` subcommands: rotated files, rotation from outside,
//! whole files, lookup by `seq`, following like `tail -F`, and one-line summaries.
//!
//! They run beside a daemon that may be appending or rotating, so nothing here holds a lock
//! or assumes the files stand still.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, BufRead, BufReader, Read, Seek, SeekFrom},
    path::{Path, PathBuf},
    time::SystemTime,
};

use time::{OffsetDateTime, macros::format_description};

use super::{
    KEY_LEN,
    canonical::{Json, ascii_only, parse_line, record_hmac, write_pretty},
    create_private_dir, private_mode,
    writer::last_line,
};

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

/// Moves the live file at `path` aside as [`AuditChain::rotate`](super::AuditChain::rotate) does, for `audit rotate` run
/// beside a daemon: its next append finds the live file gone or empty and restarts the chain
/// at 1, exactly as after its own rotation. Returns the rotated path, or `None` when the file
/// is missing or empty.
///
/// # Errors
/// The file cannot be inspected or renamed.
pub fn rotate_file(path: &Path, now: SystemTime) -> io::Result<Option<PathBuf>> {
    rotate_at(path, OffsetDateTime::from(now))
}

pub(super) fn rotate_at(path: &Path, now: OffsetDateTime) -> io::Result<Option<PathBuf>> {
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
/// [`MAX_LOG_BYTES`](super::MAX_LOG_BYTES), so one file is that size plus at most one record.
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
/// (created 0700 with its parents, as [`AuditChain::open`](super::AuditChain::open) would) accepts a new file, which is
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

pub(super) fn rotation_target(path: &Path, now: OffsetDateTime) -> io::Result<PathBuf> {
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
