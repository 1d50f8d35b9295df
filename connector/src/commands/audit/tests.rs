//! Tests of [`super`] on real chains in a temporary directory: tail, follow, show, verify,
//! export, rotate and prune, as the reference prints them.

use std::io::Read as _;
use std::sync::{Arc, Mutex};

use local_core::machine::audit_chain::{AuditChain, AuditIdentity, AuditResult};
use serde_json::{Map, Value};
use zip::ZipArchive;

use super::test_dir::TempDir;
use super::*;

const KEY: [u8; KEY_LEN] = [7; KEY_LEN];

fn identity() -> AuditIdentity {
    AuditIdentity {
        session_id: Some("s-1".to_owned()),
        machine_id: None,
        shim_version: "test".to_owned(),
    }
}

fn append(chain: &mut AuditChain, n: usize) {
    for i in 0..n {
        let mut details = Map::new();
        details.insert("path".to_owned(), Value::from(format!("/tmp/file-{i}")));
        let result = if i % 2 == 0 {
            AuditResult {
                ok: true,
                ..AuditResult::default()
            }
        } else {
            AuditResult {
                ok: false,
                error_code: Some("FILE_NOT_FOUND".to_owned()),
                ..AuditResult::default()
            }
        };
        chain
            .append(Some(&format!("r-{i}")), "FILE_STAT", details, result)
            .unwrap();
    }
}

fn chain_with(path: &Path, n: usize) -> AuditChain {
    let mut chain = AuditChain::open(path, KEY, identity()).unwrap();
    append(&mut chain, n);
    chain
}

fn read(path: &Path) -> Vec<u8> {
    own_files::read_capped(path, 1 << 30).unwrap().unwrap()
}

fn write(path: &Path, bytes: &[u8]) {
    own_files::write_atomic(path, bytes, 0o600).unwrap();
}

fn lines(path: &Path) -> Vec<String> {
    String::from_utf8(read(path))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    write(path, format!("{}\n", lines.join("\n")).as_bytes());
}

/// Runs a command and returns its exit code and output.
fn run(command: impl FnOnce(&mut dyn Write) -> u8) -> (u8, String) {
    let mut out = Vec::new();
    let code = command(&mut out);
    (code, String::from_utf8(out).unwrap())
}

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

#[test]
fn tail_prints_terse_lines_and_marks_tampering() {
    let dir = TempDir::new("tail");
    let log = dir.join("audit.log");
    drop(chain_with(&log, 3));
    let mut text = lines(&log);
    text[2] = text[2].replace("/tmp/file-2", "/tmp/other");
    text.push("not json \u{1b}[31m".to_owned());
    write_lines(&log, &text);

    let (code, out) = run(|out| tail(&log, None, out, None, None));
    assert_eq!(code, EXIT_OK);
    let time = |line: &str| line.split("  ").nth(1).unwrap_or_default().to_owned();
    let first = out.lines().next().unwrap_or_default();
    let stamp = time(first);
    // `2024-04-05T19:34:38Z`: the record's time to the second, in UTC.
    assert_eq!(stamp.len(), 20, "{out}");
    assert!(
        stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
        "{out}"
    );
    let expected: Vec<String> = [
        "seq=00001  {t}  FILE_STAT  ok  path=/tmp/file-0",
        "seq=00002  {t}  FILE_STAT  err:FILE_NOT_FOUND  path=/tmp/file-1",
        "seq=00003  {t}  FILE_STAT  ok  path=/tmp/other",
        "[unparseable] not json \\u{1b}[31m",
    ]
    .iter()
    .zip(out.lines())
    .map(|(pattern, line)| pattern.replace("{t}", &time(line)))
    .collect();
    assert_eq!(out, expected.join("\n") + "\n");

    let (_, out) = run(|out| tail(&log, Some(&KEY), out, None, None));
    assert!(
        out.contains("FILE_STAT  ok  path=/tmp/other  [hmac_mismatch]\n"),
        "{out}"
    );
    assert!(
        out.contains("FILE_STAT  err:FILE_NOT_FOUND  path=/tmp/file-1\n"),
        "{out}"
    );

    // `-n 2`: the last two lines only.
    let (code, out) = run(|out| tail(&log, None, out, None, Some(2)));
    assert_eq!(code, EXIT_OK);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.starts_with("seq=00003  "), "{out}");
    assert!(
        out.ends_with("[unparseable] not json \\u{1b}[31m\n"),
        "{out}"
    );
    let (_, out) = run(|out| tail(&log, None, out, None, Some(0)));
    assert_eq!(out, "");

    let (code, out) = run(|out| tail(&dir.join("absent.log"), None, out, None, None));
    assert_eq!(code, EXIT_FAILED);
    assert!(out.starts_with("no audit log at "), "{out}");
}

#[test]
fn tail_detail_is_metadata_without_command_lines() {
    let record = serde_json::json!({
        "details": {"command": "echo secret", "argv": ["x"], "cwd": "/w",
                    "src": "a\u{1b}b", "dst": "c", "size_bytes_written": 12},
        "result": {"ok": true, "exit_code": 3, "duration_ms": 40, "error_code": null},
    });
    assert_eq!(
        tail_detail(&record),
        "src=a\\u{1b}b dst=c exit=3 bytes=12 ms=40"
    );
    assert_eq!(tail_detail(&serde_json::json!({"details": {}})), "");
    assert_eq!(tail_time(1_712_345_678.5), "2024-04-05T19:34:38Z");
}

/// A writer the test can read while `tail` holds it on another thread.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    fn wait_for(&self, needle: &str) {
        for _ in 0..200 {
            if self.text().contains(needle) {
                return;
            }
            thread::sleep(Duration::from_millis(25));
        }
        panic!("{needle:?} never appeared in {:?}", self.text());
    }
}

#[test]
fn tail_follows_appends_and_rotation_until_stopped() {
    let dir = TempDir::new("follow");
    let log = dir.join("audit.log");
    let mut chain = chain_with(&log, 1);
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Shared::default();
    let handle = {
        let (stop, mut out) = (Arc::clone(&stop), shared.clone());
        thread::spawn(move || tail(&log, None, &mut out, Some(&stop), None))
    };
    shared.wait_for("seq=00001");
    append(&mut chain, 2);
    shared.wait_for("seq=00003");
    chain.rotate().unwrap();
    append(&mut chain, 1);
    shared.wait_for("path=/tmp/file-1\nseq=00001");
    let before = shared.text();
    assert_eq!(before.matches("seq=00001").count(), 2, "{before}");

    stop.store(true, Ordering::Relaxed);
    assert_eq!(handle.join().unwrap(), EXIT_OK);
    assert_eq!(shared.text().lines().count(), 4, "{}", shared.text());
}

#[test]
fn verify_names_each_kind_of_damage() {
    let dir = TempDir::new("verify");
    let log = dir.join("audit.log");
    drop(chain_with(&log, 4));
    let good = lines(&log);

    let (code, out) = run(|out| verify(&log, &Ok(KEY), out));
    assert_eq!(code, EXIT_OK, "{out}");
    assert!(out.ends_with(": ok (4 records)\n"), "{out}");

    // A flipped character in details breaks that record's hmac.
    let mut tampered = good.clone();
    tampered[1] = tampered[1].replacen("file-1", "file-X", 1);
    write_lines(&log, &tampered);
    let (code, out) = run(|out| verify(&log, &Ok(KEY), out));
    assert_eq!(code, EXIT_FAILED);
    assert!(out.contains("line 2: hmac_mismatch"), "{out}");

    // A deleted middle record is a gap and a broken link.
    let mut deleted = good.clone();
    deleted.remove(1);
    write_lines(&log, &deleted);
    let (code, out) = run(|out| verify(&log, &Ok(KEY), out));
    assert_eq!(code, EXIT_FAILED);
    assert!(out.contains("line 2: sequence_gap"), "{out}");
    assert!(out.contains("line 2: chain_break"), "{out}");

    // A last line cut short.
    let mut bytes = format!("{}\n", good.join("\n")).into_bytes();
    bytes.truncate(bytes.len() - 7);
    write(&log, &bytes);
    let (code, out) = run(|out| verify(&log, &Ok(KEY), out));
    assert_eq!(code, EXIT_FAILED);
    assert!(out.contains("line 4: truncated"), "{out}");

    let missing_key = Err(io::Error::new(io::ErrorKind::NotFound, "no key file"));
    let (code, out) = run(|out| verify(&log, &missing_key, out));
    assert_eq!(code, EXIT_USAGE);
    assert!(
        out.contains("cannot load the audit key: no key file"),
        "{out}"
    );

    let (code, out) = run(|out| verify(&dir.join("absent.log"), &Ok(KEY), out));
    assert_eq!(code, EXIT_OK, "{out}");
}

#[test]
fn verify_all_covers_rotated_files_and_summarises() {
    let dir = TempDir::new("verify-all");
    let log = dir.join("audit.log");
    let mut chain = chain_with(&log, 3);
    let rotated = chain.rotate().unwrap().unwrap();
    append(&mut chain, 2);

    let (code, out) = run(|out| verify_all(&log, &Ok(KEY), out));
    assert_eq!(code, EXIT_OK, "{out}");
    assert!(
        out.ends_with("verified 2 files, 5 records: all clean\n"),
        "{out}"
    );

    let mut text = lines(&rotated);
    text[0] = text[0].replacen("file-0", "file-Z", 1);
    write_lines(&rotated, &text);
    let (code, out) = run(|out| verify_all(&log, &Ok(KEY), out));
    assert_eq!(code, EXIT_FAILED);
    assert!(out.contains("line 1: hmac_mismatch"), "{out}");
    assert!(
        out.ends_with("verified 2 files, 5 records: 1 issue in 1 file\n"),
        "{out}"
    );
}

#[test]
fn show_searches_the_live_file_then_rotated_ones() {
    let dir = TempDir::new("show");
    let log = dir.join("audit.log");
    let mut chain = chain_with(&log, 5);
    chain.rotate().unwrap();
    for _ in 0..2 {
        let ok = AuditResult {
            ok: true,
            ..AuditResult::default()
        };
        chain.append(None, "WS_CONNECTED", Map::new(), ok).unwrap();
    }

    let (code, out) = run(|out| show(&log, 4, out));
    assert_eq!(code, EXIT_OK);
    assert!(out.starts_with("{\n  \"ts\": "), "{out}");
    assert!(out.contains("\n  \"seq\": 4,\n"), "{out}");
    assert!(out.contains("\"path\": \"/tmp/file-3\""), "{out}");
    assert!(
        out.contains("\n  \"result\": {\n    \"ok\": false,"),
        "{out}"
    );

    // seq 2 is in both files: the live one wins.
    let (_, out) = run(|out| show(&log, 2, out));
    assert!(out.contains("\"op\": \"WS_CONNECTED\""), "{out}");
    assert!(out.contains("\"details\": {},"), "{out}");

    let (code, out) = run(|out| show(&log, 6, out));
    assert_eq!(code, EXIT_FAILED);
    assert!(out.starts_with("no record with seq 6"), "{out}");
}

#[test]
fn export_zips_every_file_with_a_signed_manifest() {
    let dir = TempDir::new("export");
    let log = dir.join("logs/audit.log");
    let mut chain = chain_with(&log, 3);
    let rotated = chain.rotate().unwrap().unwrap();
    append(&mut chain, 1);
    let zip_path = dir.join("out/export.zip");
    let now = at(1_712_345_678);

    let (code, out) = run(|out| export(&log, &Ok(KEY), Some(&zip_path), now, out));
    assert_eq!(code, EXIT_OK, "{out}");
    assert!(out.starts_with("exported 2 audit files ("), "{out}");

    let mut archive = ZipArchive::new(Cursor::new(read(&zip_path))).unwrap();
    let mut names: Vec<String> = archive
        .file_names()
        .map(|name| name.unwrap().into_owned())
        .collect();
    names.sort();
    let rotated_name = rotated.file_name().unwrap().to_str().unwrap().to_owned();
    let mut expected = vec![
        "audit.log".to_owned(),
        rotated_name.clone(),
        "manifest.json".to_owned(),
        "manifest.sig".to_owned(),
    ];
    expected.sort();
    assert_eq!(names, expected);

    let entry = |archive: &mut ZipArchive<Cursor<Vec<u8>>>, name: &str| {
        let mut bytes = Vec::new();
        archive
            .by_name(name)
            .unwrap()
            .read_to_end(&mut bytes)
            .unwrap();
        bytes
    };
    assert_eq!(entry(&mut archive, "audit.log"), read(&log));
    assert_eq!(entry(&mut archive, &rotated_name), read(&rotated));
    let manifest = entry(&mut archive, "manifest.json");
    let signature = String::from_utf8(entry(&mut archive, "manifest.sig")).unwrap();
    assert_eq!(
        signature,
        audit_chain::sign_manifest(&KEY, &manifest).unwrap()
    );
    assert_ne!(
        signature,
        audit_chain::sign_manifest(&[8; KEY_LEN], &manifest).unwrap()
    );

    let text = String::from_utf8(manifest).unwrap();
    assert!(
        text.starts_with(r#"{"exported_at": "2024-04-05T19:34:38.000000+00:00", "files": [{"name": "audit.log", "sha256": ""#),
        "{text}"
    );
    assert!(
        text.ends_with(r#"], "key_username": "audit_key"}"#),
        "{text}"
    );
    let parsed: Value = serde_json::from_str(&text).unwrap();
    let files = parsed["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(files[1]["name"], rotated_name.as_str());
    assert_eq!(files[1]["size"], read(&rotated).len());

    #[cfg(unix)]
    {
        let mode = archive.by_name("audit.log").unwrap().unix_mode().unwrap();
        assert_eq!(mode & 0o777, 0o600);
    }

    let (code, out) = run(|out| {
        export(
            &log,
            &Err(io::Error::other("locked")),
            Some(&zip_path),
            now,
            out,
        )
    });
    assert_eq!(code, EXIT_USAGE, "{out}");
    let (code, _) = run(|out| {
        export(
            &dir.join("none/audit.log"),
            &Ok(KEY),
            Some(&zip_path),
            now,
            out,
        )
    });
    assert_eq!(code, EXIT_FAILED);
    assert_eq!(
        default_export_path(now),
        Path::new("./audit-export-20240405-193438.zip")
    );
}

#[test]
fn rotate_moves_the_live_file_and_is_a_no_op_when_empty() {
    let dir = TempDir::new("rotate");
    let log = dir.join("audit.log");
    let (code, out) = run(|out| rotate(&log, at(1_712_345_678), out));
    assert_eq!(code, EXIT_OK);
    assert!(out.starts_with("nothing to rotate"), "{out}");

    let mut chain = chain_with(&log, 2);
    let (code, out) = run(|out| rotate(&log, at(1_712_345_678), out));
    assert_eq!(code, EXIT_OK);
    assert!(out.contains("audit.log.20240405-193438;"), "{out}");
    let rotated = dir.join("audit.log.20240405-193438");
    assert_eq!(lines(&rotated).len(), 2);
    // The daemon's next record starts the new file's chain at 1.
    append(&mut chain, 1);
    assert_eq!(lines(&log).len(), 1);
    let (code, out) = run(|out| verify_all(&log, &Ok(KEY), out));
    assert_eq!(code, EXIT_OK, "{out}");
}

/// A rotated file whose only record has `ts` = `ts`; prune does not check hmacs.
fn rotated_with_ts(dir: &TempDir, stamp: &str, ts: u64) -> PathBuf {
    let path = dir.join(&format!("audit.log.{stamp}"));
    write(
        &path,
        format!("{{\"ts\": {ts}.0, \"op\": \"SHIM_START\", \"seq\": 1}}\n").as_bytes(),
    );
    path
}

#[test]
fn prune_deletes_only_rotated_files_strictly_older_than_the_threshold() {
    let dir = TempDir::new("prune");
    let log = dir.join("audit.log");
    let now = 1_800_000_000;
    let ninety_days = 90 * 86_400;
    let older = rotated_with_ts(&dir, "20240101-000000", now - ninety_days - 1);
    let boundary = rotated_with_ts(&dir, "20240102-000000", now - ninety_days);
    let newer = rotated_with_ts(&dir, "20240103-000000", now - 10);
    let cut_short = dir.join("audit.log.20231231-000000");
    write(&cut_short, b"{\"ts\": 1.0, \"seq\": 1}\n{\"ts\": 2.0, \"se");
    let unrelated = dir.join("audit.log.old");
    write(&unrelated, b"{\"ts\": 1.0}\n");
    drop(chain_with(&log, 1));

    let (code, out) = run(|out| prune(&log, "90d", at(now), out));
    assert_eq!(code, EXIT_OK, "{out}");
    assert!(out.contains("deleted audit.log.20240101-000000"), "{out}");
    assert!(out.contains("kept audit.log.20231231-000000"), "{out}");
    assert!(out.contains("pruned 1 of 4 rotated files"), "{out}");
    let exists = |p: &Path| own_files::read_capped(p, 1 << 20).unwrap().is_some();
    assert!(!exists(&older));
    assert!(exists(&boundary) && exists(&newer) && exists(&cut_short));
    assert!(exists(&unrelated) && exists(&log));

    // One second more makes the boundary file older than the threshold.
    let (code, _) = run(|out| prune(&log, "7776000s", at(now + 1), out));
    assert_eq!(code, EXIT_OK);
    assert!(!exists(&boundary) && exists(&newer));

    for bad in [
        "",
        "90",
        "d",
        "-1d",
        "+1d",
        "1.5d",
        "90w",
        "1 d",
        "99999999999999999999d",
    ] {
        let (code, out) = run(|out| prune(&log, bad, at(now), out));
        assert_eq!(code, EXIT_USAGE, "{bad:?}");
        assert!(out.starts_with("invalid --older-than"), "{out}");
    }
    assert_eq!(parse_age("0s"), Some(Duration::ZERO));
    assert_eq!(parse_age("2h"), Some(Duration::from_secs(7_200)));
    assert_eq!(parse_age("5m"), Some(Duration::from_secs(300)));
}
