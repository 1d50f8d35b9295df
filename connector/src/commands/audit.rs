//! `autogpt-shim audit ...`: reading, checking, exporting, rotating and pruning the HMAC-chained
//! audit log (shim-reference-behaviour.md sections 2 and 13).
//!
//! Every command takes its paths, key and clock from the caller and writes its report to the
//! given writer, so the CLI decides where files live and tests need no process state. All file
//! access goes through `local_core::machine::audit_chain` (the audit files) and `local_core::machine::own_files`
//! (the export archive).
//!
//! Only `audit show`, which is asked for exactly one record, prints a record's `details`
//! whole; `tail` shows one line of metadata per record (path, exit code, bytes, duration),
//! never a command line.

use std::io::{self, Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use local_core::machine::audit_chain::{
    self, IssueKind, KEY_LEN, LogFollower, ManifestFile, RecordSummary, VerifyReport,
};
use local_core::machine::own_files;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

/// Exit code: the command did what was asked (or the chain is clean).
pub const EXIT_OK: u8 = 0;
/// Exit code: chain violations, a missing record, or a file that could not be read or written.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: the audit key could not be loaded (`verify`, `verify-all`, `export`), or
/// `prune --older-than` was not understood.
pub const EXIT_USAGE: u8 = 2;

/// How often `tail --follow` looks for appended lines, as the reference does.
pub const TAIL_POLL: Duration = Duration::from_millis(500);
/// How often a following `tail` checks its stop flag while it waits for the next poll.
const STOP_CHECK: Duration = Duration::from_millis(50);
/// How much of an unparseable line `tail` shows.
const UNPARSEABLE_SHOWN: usize = 120;
/// `prune`'s threshold when the caller has none, as the reference's `--older-than` default.
pub const DEFAULT_PRUNE_AGE: &str = "90d";
/// Mode of the export archive: it names every operation the platform asked for.
const EXPORT_MODE: u32 = own_files::PRIVATE_FILE_MODE;

/// `audit tail`: prints the records of the live file (the last `last` of them, or all), one
/// line each (`seq=00042  2024-04-05T19:34:38Z  FILE_READ  ok  path=a.txt bytes=12`), then,
/// when `follow` holds a stop flag, keeps printing lines as they are appended (across
/// rotations) every [`TAIL_POLL`] until the flag is set.
///
/// With a key, a record that does not match its own `hmac` is marked `[hmac_mismatch]` (only
/// `verify` checks the links between records). Returns [`EXIT_FAILED`] when the log does not
/// exist and is not being followed, or on a read error.
pub fn tail(
    path: &Path,
    key: Option<&[u8; KEY_LEN]>,
    out: &mut dyn Write,
    follow: Option<&AtomicBool>,
    last: Option<usize>,
) -> u8 {
    guard(out, |out| {
        let mut follower = LogFollower::new(path);
        let mut first = follower.poll()?;
        if !follower.is_open() {
            if follow.is_none() {
                writeln!(out, "no audit log at {} yet", path.display())?;
                return Ok(EXIT_FAILED);
            }
            writeln!(out, "waiting for {} to appear", path.display())?;
        }
        if follow.is_none()
            && let Some(rest) = follower.take_partial()
        {
            first.push(rest);
        }
        // Blank lines are not records, so they do not count towards `last`.
        first.retain(|line| !line.iter().all(u8::is_ascii_whitespace));
        let skip = last.map_or(0, |last| first.len().saturating_sub(last));
        print_tail_lines(&first[skip..], key, out)?;
        let Some(stop) = follow else {
            return Ok(EXIT_OK);
        };
        out.flush()?;
        while !wait_or_stop(stop) {
            let lines = follower.poll()?;
            print_tail_lines(&lines, key, out)?;
            out.flush()?;
        }
        Ok(EXIT_OK)
    })
}

/// `audit show SEQ`: pretty-prints the record with that `seq` from the live file or, failing
/// that, the newest rotated file holding one ([`EXIT_FAILED`] when none does). `seq` restarts
/// at 1 in every file, so the most recent match is shown.
pub fn show(path: &Path, seq: u64, out: &mut dyn Write) -> u8 {
    guard(out, |out| match audit_chain::find_record(path, seq)? {
        Some(found) => {
            writeln!(out, "{}", found.pretty)?;
            Ok(EXIT_OK)
        }
        None => {
            writeln!(
                out,
                "no record with seq {seq} in {} or its rotated files",
                path.display()
            )?;
            Ok(EXIT_FAILED)
        }
    })
}

/// `audit verify`: checks the live file's chain. Prints every issue with its line and kind and
/// returns [`EXIT_OK`] when clean, [`EXIT_FAILED`] on any violation or read error, and
/// [`EXIT_USAGE`] when `key` (as the caller could load it) is an error. A missing live file
/// counts as an empty one (clean): `audit rotate` leaves none until the daemon writes again.
pub fn verify(path: &Path, key: &io::Result<[u8; KEY_LEN]>, out: &mut dyn Write) -> u8 {
    guard(out, |out| {
        let key = match key {
            Ok(key) => key,
            Err(err) => return key_error(err, out),
        };
        match audit_chain::verify(path, key) {
            Ok(report) => {
                print_report(path, &report, out)?;
                Ok(if report.is_clean() {
                    EXIT_OK
                } else {
                    EXIT_FAILED
                })
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                writeln!(out, "no audit log at {}: nothing to verify", path.display())?;
                Ok(EXIT_OK)
            }
            Err(err) => Err(err),
        }
    })
}

/// `audit verify-all`: [`verify`] over the rotated files (oldest first) and then the live one,
/// ending with a summary line. Each file is its own chain starting at `seq` 1, so a rotated
/// file deleted as a whole cannot be detected here.
pub fn verify_all(path: &Path, key: &io::Result<[u8; KEY_LEN]>, out: &mut dyn Write) -> u8 {
    guard(out, |out| {
        let key = match key {
            Ok(key) => key,
            Err(err) => return key_error(err, out),
        };
        let mut files = audit_chain::rotated_files(path)?;
        files.push(path.to_path_buf());
        let (mut checked, mut records, mut issues, mut bad_files) = (0, 0, 0, 0);
        for file in &files {
            match audit_chain::verify(file, key) {
                Ok(report) => {
                    print_report(file, &report, out)?;
                    checked += 1;
                    records += report.records;
                    if !report.is_clean() {
                        issues += report.issues.len();
                        bad_files += 1;
                    }
                }
                // The live file is absent after `audit rotate` until the next record.
                Err(err) if err.kind() == io::ErrorKind::NotFound && file == path => {}
                Err(err) => {
                    writeln!(out, "{}: cannot read: {err}", file.display())?;
                    bad_files += 1;
                    issues += 1;
                }
            }
        }
        if checked == 0 && bad_files == 0 {
            writeln!(out, "no audit log files at {}", path.display())?;
            return Ok(EXIT_OK);
        }
        if bad_files == 0 {
            writeln!(
                out,
                "verified {checked} {}, {records} records: all clean",
                plural(checked, "file", "files")
            )?;
            Ok(EXIT_OK)
        } else {
            writeln!(
                out,
                "verified {checked} {}, {records} records: {issues} {} in {bad_files} {}",
                plural(checked, "file", "files"),
                plural(issues, "issue", "issues"),
                plural(bad_files, "file", "files")
            )?;
            Ok(EXIT_FAILED)
        }
    })
}

/// `audit export`: writes a zip (stored, not compressed) of the live and rotated files plus
/// `manifest.json` (`exported_at`, `files[{name, size, sha256}]`, `key_username`) and
/// `manifest.sig` (hex HMAC-SHA256 of the manifest under the audit key), to `output` or
/// `./audit-export-YYYYMMDD-HHMMSS.zip` (UTC). The archive is built in memory and written
/// atomically with mode 0600.
///
/// Returns [`EXIT_USAGE`] for a key error and [`EXIT_FAILED`] when there is nothing to export
/// or a file cannot be read or written.
pub fn export(
    path: &Path,
    key: &io::Result<[u8; KEY_LEN]>,
    output: Option<&Path>,
    now: SystemTime,
    out: &mut dyn Write,
) -> u8 {
    guard(out, |out| {
        let key = match key {
            Ok(key) => key,
            Err(err) => return key_error(err, out),
        };
        let output = output.map_or_else(|| default_export_path(now), Path::to_path_buf);
        let mut files = vec![path.to_path_buf()];
        files.extend(audit_chain::rotated_files(path)?);

        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Stored)
            .unix_permissions(EXPORT_MODE)
            .last_modified_time(zip_time(now));
        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        let mut listed = Vec::new();
        for file in &files {
            // The live file may be absent (after `audit rotate`); rotated ones were just listed.
            let Some(bytes) = audit_chain::read_log(file)? else {
                continue;
            };
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let large = u32::try_from(bytes.len()).is_err();
            zip.start_file(name.as_str(), options.large_file(large))
                .map_err(io::Error::other)?;
            zip.write_all(&bytes)?;
            // Described from the bytes stored, so a record appended meanwhile cannot skew it.
            listed.push(ManifestFile::describe(&name, &bytes));
        }
        if listed.is_empty() {
            writeln!(
                out,
                "nothing to export: no audit log files at {}",
                path.display()
            )?;
            return Ok(EXIT_FAILED);
        }
        let manifest = audit_chain::export_manifest(now, &listed);
        let signature = audit_chain::sign_manifest(key, manifest.as_bytes())?;
        zip.start_file("manifest.json", options)
            .map_err(io::Error::other)?;
        zip.write_all(manifest.as_bytes())?;
        zip.start_file("manifest.sig", options)
            .map_err(io::Error::other)?;
        zip.write_all(signature.as_bytes())?;
        let archive = zip.finish().map_err(io::Error::other)?.into_inner();
        own_files::write_atomic(&output, &archive, EXPORT_MODE)?;

        let total: u64 = listed.iter().map(|file| file.size).sum();
        writeln!(
            out,
            "exported {} audit {} ({total} bytes) to {}",
            listed.len(),
            plural(listed.len(), "file", "files"),
            output.display()
        )?;
        writeln!(
            out,
            "manifest.sig is an HMAC under the audit key: whoever checks it needs that key"
        )?;
        Ok(EXIT_OK)
    })
}

/// `audit rotate`: moves the live file aside now (a message and [`EXIT_OK`] when it is missing
/// or empty). Safe beside a running daemon: its next record starts a new chain at `seq` 1.
/// The rotated name is stamped with `now` in UTC.
pub fn rotate(path: &Path, now: SystemTime, out: &mut dyn Write) -> u8 {
    guard(out, |out| {
        match audit_chain::rotate_file(path, now)? {
            Some(rotated) => writeln!(
                out,
                "rotated {} to {}; the next record starts a new chain at seq 1",
                path.display(),
                rotated.display()
            )?,
            None => writeln!(
                out,
                "nothing to rotate: {} is missing or empty",
                path.display()
            )?,
        }
        Ok(EXIT_OK)
    })
}

/// `audit prune --older-than SPEC`: deletes the rotated files whose last record's `ts` is
/// strictly older than `now - SPEC`, where SPEC is a whole number and a unit `d`, `h`, `m` or
/// `s` (`90d`). The live file is never deleted, nor a rotated one whose last record cannot be
/// read. A bad SPEC is [`EXIT_USAGE`]; a failed deletion is [`EXIT_FAILED`].
pub fn prune(path: &Path, older_than: &str, now: SystemTime, out: &mut dyn Write) -> u8 {
    guard(out, |out| {
        let Some(age) = parse_age(older_than) else {
            writeln!(
                out,
                "invalid --older-than {older_than:?}: use a whole number followed by d, h, m or s (for example {DEFAULT_PRUNE_AGE})"
            )?;
            return Ok(EXIT_USAGE);
        };
        let cutoff = epoch_seconds(now) - age.as_secs_f64();
        let rotated = audit_chain::rotated_files(path)?;
        let mut deleted = 0;
        let mut failed = false;
        for file in &rotated {
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let last = match audit_chain::last_record_ts(file) {
                Ok(Some(ts)) => ts,
                Ok(None) => {
                    writeln!(out, "kept {name}: its last line is not a readable record")?;
                    continue;
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => {
                    writeln!(out, "kept {name}: cannot read it: {err}")?;
                    failed = true;
                    continue;
                }
            };
            if last >= cutoff {
                continue;
            }
            match audit_chain::remove_rotated(path, file) {
                Ok(_) => {
                    deleted += 1;
                    writeln!(
                        out,
                        "deleted {name} (last record {})",
                        audit_chain::format_epoch(last)
                    )?;
                }
                Err(err) => {
                    writeln!(out, "cannot delete {name}: {err}")?;
                    failed = true;
                }
            }
        }
        writeln!(
            out,
            "pruned {deleted} of {} rotated {} whose last record is older than {older_than} (before {})",
            rotated.len(),
            plural(rotated.len(), "file", "files"),
            audit_chain::format_epoch(cutoff)
        )?;
        Ok(if failed { EXIT_FAILED } else { EXIT_OK })
    })
}

/// Parses `--older-than`: a whole number and one of `d`, `h`, `m`, `s`.
fn parse_age(spec: &str) -> Option<Duration> {
    let spec = spec.trim();
    let unit = spec.chars().last()?;
    let per_unit: u64 = match unit {
        'd' => 86_400,
        'h' => 3_600,
        'm' => 60,
        's' => 1,
        _ => return None,
    };
    let digits = &spec[..spec.len() - 1];
    // `u64::from_str` would also take a leading `+`, which the reference's pattern refuses.
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let count: u64 = digits.parse().ok()?;
    count.checked_mul(per_unit).map(Duration::from_secs)
}

fn print_tail_lines(
    lines: &[Vec<u8>],
    key: Option<&[u8; KEY_LEN]>,
    out: &mut dyn Write,
) -> io::Result<()> {
    for line in lines {
        print_tail_line(line, key, out)?;
    }
    Ok(())
}

fn print_tail_line(
    line: &[u8],
    key: Option<&[u8; KEY_LEN]>,
    out: &mut dyn Write,
) -> io::Result<()> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    match audit_chain::summarize_line(line, key) {
        Some(summary) => {
            let record = serde_json::from_slice(line).unwrap_or(serde_json::Value::Null);
            writeln!(out, "{}", tail_text(&summary, &record))
        }
        None => writeln!(
            out,
            "[unparseable] {}",
            terminal_safe(&String::from_utf8_lossy(line), UNPARSEABLE_SHOWN)
        ),
    }
}

/// `seq=00042  2024-04-05T19:34:38Z  FILE_READ  ok  path=a.txt bytes=12`: the reference's
/// `seq=%05d`, op and outcome (`err:<code>` on failure), with the time and [`tail_detail`].
fn tail_text(summary: &RecordSummary, record: &serde_json::Value) -> String {
    let seq = summary
        .seq
        .map_or_else(|| "?????".to_owned(), |seq| format!("{seq:05}"));
    let time = summary.ts.map_or_else(|| "?".to_owned(), tail_time);
    let op = summary
        .op
        .as_deref()
        .map_or_else(|| "?".to_owned(), |op| terminal_safe(op, 64));
    let outcome = match summary.ok {
        Some(true) => "ok".to_owned(),
        Some(false) => format!(
            "err:{}",
            summary
                .error_code
                .as_deref()
                .map_or_else(|| "-".to_owned(), |code| terminal_safe(code, 64))
        ),
        None => "?".to_owned(),
    };
    let mut text = format!("seq={seq}  {time}  {op}  {outcome}");
    let detail = tail_detail(record);
    if !detail.is_empty() {
        text.push_str("  ");
        text.push_str(&detail);
    }
    if summary.hmac_ok == Some(false) {
        text.push_str("  [hmac_mismatch]");
    }
    text
}

/// The record's time to the second, in UTC (`2024-04-05T19:34:38Z`).
fn tail_time(ts: f64) -> String {
    let full = audit_chain::format_epoch(ts);
    match (full.get(..19), full.ends_with("+00:00")) {
        (Some(seconds), true) => format!("{seconds}Z"),
        _ => full,
    }
}

/// How much of a path `tail` shows.
const TAIL_PATH_SHOWN: usize = 80;

/// The short detail of a record, from metadata the audit log already holds and never a
/// command line or content: the path (or `src` and `dst`), the exit code, the bytes moved
/// and the duration, whichever it has. `audit show` prints the whole record.
fn tail_detail(record: &serde_json::Value) -> String {
    let details = &record["details"];
    let result = &record["result"];
    let mut parts = Vec::new();
    for key in ["path", "src", "dst"] {
        if let Some(path) = details[key].as_str() {
            parts.push(format!("{key}={}", terminal_safe(path, TAIL_PATH_SHOWN)));
        }
    }
    if let Some(code) = result["exit_code"].as_i64() {
        parts.push(format!("exit={code}"));
    }
    let bytes = [
        "size_bytes_written",
        "size_bytes_returned",
        "image_bytes_returned",
        "size_bytes",
    ]
    .iter()
    .find_map(|key| details[*key].as_u64());
    if let Some(bytes) = bytes {
        parts.push(format!("bytes={bytes}"));
    }
    if let Some(ms) = result["duration_ms"].as_u64() {
        parts.push(format!("ms={ms}"));
    }
    parts.join(" ")
}

/// At most `max` characters of `text` with control and formatting characters escaped: the log
/// is a file others may have edited, and an escape sequence must not reach the terminal.
fn terminal_safe(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push_str("...");
            break;
        }
        if c == ' ' || c.is_ascii_graphic() {
            out.push(c);
        } else if c.is_ascii() {
            out.extend(c.escape_default());
        } else {
            // Escapes C1 controls and bidirectional overrides, keeps printable letters.
            out.extend(c.escape_debug());
        }
    }
    out
}

/// Sleeps until the next poll; `true` once `stop` is set.
fn wait_or_stop(stop: &AtomicBool) -> bool {
    let mut waited = Duration::ZERO;
    while waited < TAIL_POLL {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        thread::sleep(STOP_CHECK);
        waited += STOP_CHECK;
    }
    stop.load(Ordering::Relaxed)
}

fn print_report(path: &Path, report: &VerifyReport, out: &mut dyn Write) -> io::Result<()> {
    for issue in &report.issues {
        writeln!(
            out,
            "{}: line {}: {} ({})",
            path.display(),
            issue.line,
            issue.kind,
            explain(issue.kind)
        )?;
    }
    if report.is_clean() {
        writeln!(
            out,
            "{}: ok ({} {})",
            path.display(),
            report.records,
            plural(report.records, "record", "records")
        )
    } else {
        writeln!(
            out,
            "{}: FAILED ({} {} in {} {})",
            path.display(),
            report.issues.len(),
            plural(report.issues.len(), "issue", "issues"),
            report.records,
            plural(report.records, "record", "records")
        )
    }
}

const fn explain(kind: IssueKind) -> &'static str {
    match kind {
        IssueKind::Truncated => "the last line has no newline: a write was cut short",
        IssueKind::ParseError => "not a JSON record; checking stopped here",
        IssueKind::MissingField => "seq or hmac missing; checking stopped here",
        IssueKind::SequenceGap => "records were removed or inserted before this one",
        IssueKind::ChainBreak => "prev_hmac does not name the previous record",
        IssueKind::HmacMismatch => "the record was changed, or signed with another key",
    }
}

fn key_error(err: &io::Error, out: &mut dyn Write) -> io::Result<u8> {
    writeln!(out, "cannot load the audit key: {err}")?;
    Ok(EXIT_USAGE)
}

/// Runs a command body, turning an I/O error into one line and [`EXIT_FAILED`]. A closed
/// pipe (`audit tail | head`) ends the command quietly.
fn guard(out: &mut dyn Write, body: impl FnOnce(&mut dyn Write) -> io::Result<u8>) -> u8 {
    match body(out) {
        Ok(code) => code,
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => EXIT_OK,
        Err(err) => {
            let _ = writeln!(out, "error: {err}");
            EXIT_FAILED
        }
    }
}

fn default_export_path(now: SystemTime) -> PathBuf {
    Path::new(".").join(format!("audit-export-{}.zip", audit_chain::utc_stamp(now)))
}

/// The zip entries' modification time: `now` in UTC, read back from the rotation stamp so the
/// connector needs no calendar code of its own.
fn zip_time(now: SystemTime) -> DateTime {
    let stamp = audit_chain::utc_stamp(now);
    let field = |range: std::ops::Range<usize>| -> Option<u16> { stamp.get(range)?.parse().ok() };
    let parts = (|| {
        Some((
            field(0..4)?,
            u8::try_from(field(4..6)?).ok()?,
            u8::try_from(field(6..8)?).ok()?,
            u8::try_from(field(9..11)?).ok()?,
            u8::try_from(field(11..13)?).ok()?,
            u8::try_from(field(13..15)?).ok()?,
        ))
    })();
    parts
        .and_then(|(year, month, day, hour, minute, second)| {
            DateTime::from_date_and_time(year, month, day, hour, minute, second).ok()
        })
        .unwrap_or_default()
}

fn epoch_seconds(at: SystemTime) -> f64 {
    match at.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    }
}

const fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// A temporary directory for the command tests, removed on drop. It lives here rather than in
/// `commands/mod.rs` so the command modules stay the only files these tests add.
#[cfg(test)]
pub(crate) mod test_dir {
    use std::path::{Path, PathBuf};

    use local_core::machine::own_files;

    pub(crate) struct TempDir(PathBuf);

    impl TempDir {
        pub(crate) fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "shim-commands-{tag}-{}",
                local_core::secret::new_id().simple()
            ));
            own_files::ensure_dir(&dir).unwrap();
            Self(dir)
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }

        pub(crate) fn join(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }
    }

    impl Drop for TempDir {
        #[allow(
            clippy::disallowed_methods,
            reason = "test cleanup of a directory the test created; no jail applies"
        )]
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests;
