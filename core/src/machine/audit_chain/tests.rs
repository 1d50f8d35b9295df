//! Tests of [`super`] on real files in a temporary directory: known answers from the original,
//! tampering, rotation, key files, reading back and following.

use std::{io::Write, path::PathBuf, sync::Arc, time::SystemTime};

use time::OffsetDateTime;

use super::{
    canonical::{
        Json, ascii_only, hmac_hex, parse_line, record_hmac, write_canonical_object, write_python,
    },
    key::encode_hex,
    logs::rotation_target,
    verify::verify_bytes,
    writer::TAIL_WINDOW,
    *,
};
use crate::{clock::ManualClock, test_dir};

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

/// A fresh directory for one test, removed when it ends.
struct TempDir(test_dir::TempDir);

impl TempDir {
    fn new() -> Self {
        Self(test_dir::TempDir::new("audit-chain"))
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.0.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
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
        stamp
            .chars()
            .enumerate()
            .all(|(i, c)| if i == 8 { c == '-' } else { c.is_ascii_digit() }),
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

/// The `seq` of every record in `path`, in file order.
fn seqs(path: &Path) -> Vec<u64> {
    lines(path)
        .iter()
        .map(|line| match field(line, "seq") {
            Json::Int(seq) => seq.parse().unwrap(),
            other => panic!("seq is {other:?}"),
        })
        .collect()
}

#[test]
fn two_writers_of_one_file_take_turns_on_one_chain() {
    let dir = TempDir::new();
    let path = dir.join("audit.log");
    let mut a = AuditChain::open(&path, KEY, identity()).unwrap();
    let mut b = AuditChain::open(&path, KEY, identity()).unwrap();
    append_n(&mut a, 2);
    append_n(&mut b, 1);
    append_n(&mut a, 1);
    append_n(&mut b, 2);
    assert_eq!(seqs(&path), (1..=6).collect::<Vec<_>>());
    assert_eq!(
        verify(&path, &KEY).unwrap(),
        VerifyReport {
            records: 6,
            issues: vec![]
        }
    );
}

#[test]
fn concurrent_writers_each_with_its_own_handle_keep_one_chain() {
    // Each thread opens the file itself, as another process would: the lock is per open file,
    // so this is the lock two processes meet.
    const WRITERS: usize = 4;
    const BATCHES: usize = 40;
    let dir = TempDir::new();
    let path = dir.join("audit.log");
    let threads: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut chain = AuditChain::open(&path, KEY, identity()).unwrap();
                for batch in 0..BATCHES {
                    let records = (0..=(batch + writer) % 3)
                        .map(|i| PendingRecord {
                            session_id: Some(format!("w-{writer}")),
                            request_id: Some(format!("r-{batch}-{i}")),
                            op: "FILE_STAT".to_owned(),
                            details: details(&[("path", "/tmp/a".into())]),
                            result: ok(),
                        })
                        .collect();
                    chain.append_batch(records).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let total: usize = (0..WRITERS)
        .map(|w| (0..BATCHES).map(|b| (b + w) % 3 + 1).sum::<usize>())
        .sum();
    let written = seqs(&path);
    assert_eq!(written, (1..=total as u64).collect::<Vec<_>>());
    let report = verify(&path, &KEY).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.records, total);
}

#[test]
fn a_writer_follows_the_other_writers_rotation() {
    let dir = TempDir::new();
    let path = dir.join("audit.log");
    let rotation = Rotation {
        max_bytes: 600,
        max_age: MAX_LOG_AGE,
    };
    let mut a = AuditChain::open_with(&path, KEY, identity(), rotation).unwrap();
    let mut b = AuditChain::open_with(&path, KEY, identity(), rotation).unwrap();
    // Records are ~400 bytes: a writes 1, b writes 2 onto it, a finds 800 >= 600 and rotates.
    append_n(&mut a, 1);
    append_n(&mut b, 1);
    append_n(&mut a, 1);
    // b's kept handle is the rotated file now: it writes the new one, after a's record.
    append_n(&mut b, 1);
    assert_eq!(seqs(&path), vec![1, 2]);
    let rotated = rotated_files(&path).unwrap();
    assert_eq!(rotated.len(), 1, "{rotated:?}");
    assert_eq!(seqs(&rotated[0]), vec![1, 2]);
    for file in [&path, &rotated[0]] {
        assert!(verify(file, &KEY).unwrap().is_clean());
    }
}
