//! [`AuditChain`], one writer of an audit file: it recovers the chain from the file's tail,
//! appends signed batches with one fsync under a lock that other writers of the file (another
//! process) wait on, and rotates by size and age.

use std::{
    fmt,
    fs::{self, File, OpenOptions},
    io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    sync::Arc,
};

use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::{
    AuditIdentity, AuditResult, KEY_LEN, PendingRecord, Rotation,
    canonical::{Json, parse_line, record_hmac, write_python},
    create_private_dir,
    logs::rotate_at,
    private_mode,
};
use crate::clock::{Clock, SystemClock};

/// How much of the file's end tail recovery reads at a time.
pub(super) const TAIL_WINDOW: u64 = 8 * 1024;

/// The reference reads only the last 8 KiB, so a longer last record restarted its chain at 1;
/// searching a little further keeps the chain, and the bound keeps a corrupt file cheap.
const TAIL_SEARCH_LIMIT: u64 = 1024 * 1024;

/// One writer of an audit file and its chain state. Several may share a file, in one process
/// or several (`autogpt-shim mcp` beside `start`): each batch is written under an exclusive
/// lock on the file, and the chain goes on from what the file holds when another wrote last.
pub struct AuditChain {
    path: PathBuf,
    key: [u8; KEY_LEN],
    identity: AuditIdentity,
    rotation: Rotation,
    clock: Arc<dyn Clock>,
    pub(super) next_seq: u64,
    prev_hmac: Option<String>,
    /// `ts` of the file's first record, cached so the age check does not reread the file.
    first_ts: Option<f64>,
    /// The live file kept open between batches (unlocked), reused while the path names it.
    live: Option<File>,
    /// The file and its length as our last batch left them (ending with a newline): anything
    /// else found under the lock was written, rotated or replaced by someone else.
    written: Option<(FileIdentity, u64)>,
}

/// The live file locked for one batch.
struct Locked {
    file: File,
    identity: FileIdentity,
    len: u64,
    /// The file ends in someone else's partial line, which the batch must not glue onto.
    partial: bool,
}

/// What tells two opens of a path apart: on Unix the device and inode. Elsewhere nothing
/// does (std has no stable file index there), so every batch opens the file again and only
/// its length tells whether someone else wrote.
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
}

/// Whether `path` still names the file whose metadata is `meta`. Without file identities a
/// handle kept from an earlier batch may be a rotated file, so only a fresh open counts.
fn names(path: &Path, meta: &fs::Metadata, reused: bool) -> io::Result<bool> {
    let identity = FileIdentity::of(meta);
    if identity.0.is_none() {
        return Ok(!reused);
    }
    match fs::metadata(path) {
        Ok(now) => Ok(FileIdentity::of(&now) == identity),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Waits for the other writers of the file. A filesystem without locks keeps the one-writer
/// behaviour rather than losing the audit.
fn lock(file: &File) -> io::Result<()> {
    match file.lock() {
        Err(e) if e.kind() == io::ErrorKind::Unsupported => Ok(()),
        other => other,
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
            written: None,
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
        let mut locked = self.lock_live()?;
        let result = self.write_locked(&mut locked, records);
        if result.is_err() {
            // A write cut short (a full disk) leaves part of a record; the chain would go on
            // after it and `audit verify` stop at it, so the file goes back to where it was.
            // The next batch looks at how it was left.
            let _ = locked.file.set_len(locked.len);
            self.written = None;
        }
        // Closing the file also releases the lock, so a file that cannot be unlocked is not
        // kept.
        if locked.file.unlock().is_ok() && result.is_ok() {
            self.live = Some(locked.file);
        }
        result
    }

    /// The live file, locked against the other writers, after rotating it when due and
    /// bringing the chain up to date with what the file holds.
    fn lock_live(&mut self) -> io::Result<Locked> {
        // The path may change while we wait for its lock (another writer rotated it); a few
        // rounds settle that, and a path that keeps changing gets the last file opened.
        let mut rounds = 0;
        loop {
            rounds += 1;
            let settle = rounds < 4;
            let reused = self.live.is_some();
            let mut file = match self.live.take() {
                Some(file) => file,
                None => open_for_append(&self.path)?,
            };
            lock(&file)?;
            let meta = file.metadata()?;
            if settle && !names(&self.path, &meta, reused)? {
                continue;
            }
            let identity = FileIdentity::of(&meta);
            let len = meta.len();
            let mut partial = false;
            if self.written != Some((identity, len)) {
                if len == 0 {
                    self.reset_chain();
                } else {
                    // Written by another process, or replaced: continue after its last
                    // record. An unreadable tail keeps our own chain, which is all we know.
                    self.recover(&mut file)?;
                    partial = !ends_with_newline(&mut file, len)?;
                }
            }
            if settle && self.rotation_due(len) {
                rotate_at(&self.path, self.clock.now())?;
                self.reset_chain();
                continue;
            }
            return Ok(Locked {
                file,
                identity,
                len,
                partial,
            });
        }
    }

    fn write_locked(
        &mut self,
        locked: &mut Locked,
        records: Vec<PendingRecord>,
    ) -> io::Result<u64> {
        let mut lines = String::new();
        if locked.partial {
            lines.push('\n');
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
        locked.file.write_all(lines.as_bytes())?;
        locked.file.sync_data()?;
        self.written = Some((locked.identity, locked.len + lines.len() as u64));
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
            self.written = None;
        }
        Ok(rotated)
    }

    /// The record without its `hmac`, keys in the original's order.
    pub(super) fn record(
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

    /// Whether the live file, `len` bytes long, is too big or too old to take another batch.
    fn rotation_due(&self, len: u64) -> bool {
        len > 0
            && (len >= self.rotation.max_bytes
                || self.first_ts.is_some_and(|first| {
                    epoch_seconds(self.clock.now()) - first > self.rotation.max_age.as_secs_f64()
                }))
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

fn dash_or(value: Option<&str>) -> Json {
    Json::Str(value.unwrap_or("-").to_owned())
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

fn ends_with_newline(file: &mut File, len: u64) -> io::Result<bool> {
    let mut last = [0_u8; 1];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// The last non-blank line, read backwards in [`TAIL_WINDOW`] steps up to [`TAIL_SEARCH_LIMIT`].
pub(super) fn last_line(file: &mut File, len: u64) -> io::Result<Option<Vec<u8>>> {
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
