//! A hostile platform at volume against the real `autogpt-shim` binary: frames at and over
//! the 16 MiB limit (whole and fragmented), binary frames, text that is not UTF-8, JSON nested
//! 100,000 deep, bursts of unknown types, of requests beyond `max_concurrent` and of pings.
//! Each reply is checked (type, code, details, id, exactly once), the connection survives
//! where the protocol keeps it and closes with RFC 6455's code where it does not, the shim
//! redials and serves again, and its peak RSS (VmHWM, reset per case) stays under a bound.
//!
//! `E2E_LONG=1` multiplies the burst sizes by ten (100,000 frames each); not run in CI.

use std::collections::HashSet;
use std::time::Instant;

use e2e::platform::{Conn, Platform, Shim, error_code};
use local_core::limits::MAX_FRAME_BYTES;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};

use super::connector::{home_and_root, spawn};

const MIB: u64 = 1024 * 1024;
/// RFC 6455: a message too big to process.
const MESSAGE_TOO_BIG: u16 = 1009;
/// RFC 6455: data inconsistent with the message type (a text frame that is not UTF-8).
const INCONSISTENT_DATA: u16 = 1007;
/// The HELLO_ACK's `max_concurrent` (the protocol's default).
const MAX_CONCURRENT: u64 = 4;
/// How far a burst may lift the shim's RSS over its base: nothing of a burst's frames may stay
/// behind, so 10,000 of them retaining even 1.6 KiB each would break it.
const BURST_ALLOWANCE_MIB: u64 = 16;
/// Planted in every hostile frame: the shim's log must never quote one.
const MARKER: &str = "HOSTILE-MARKER-7c1e";

/// Frames per burst: 10,000, or ten times that with `E2E_LONG=1`.
fn burst() -> usize {
    if std::env::var_os("E2E_LONG").is_some_and(|v| v == "1") {
        100_000
    } else {
        10_000
    }
}

/// One envelope as a text message.
fn text(value: &Value) -> Message {
    Message::text(value.to_string())
}

fn envelope(kind: &str, id: &str, payload: Value) -> Value {
    json!({"type": kind, "id": id, "ts": 1.0, "version": "1.1", "payload": payload})
}

/// A FILE_STAT of `data.txt` whose payload carries `pad` bytes of an unknown field.
fn padded_stat(id: &str, pad: usize) -> String {
    let head = format!(
        r#"{{"type":"FILE_STAT","id":"{id}","ts":1.0,"version":"1.1","payload":{{"path":"data.txt","follow_symlinks":true,"pad":""#
    );
    let tail = r#""}}"#;
    let mut frame = String::with_capacity(head.len() + pad + tail.len());
    frame.push_str(&head);
    frame.push_str(&MARKER.repeat(pad / MARKER.len()));
    frame.push_str(&"x".repeat(pad % MARKER.len()));
    frame.push_str(tail);
    frame
}

/// A FILE_STAT frame exactly `len` bytes long.
fn stat_of_length(id: &str, len: usize) -> String {
    let frame = padded_stat(id, len - padded_stat(id, 0).len());
    assert_eq!(frame.len(), len);
    frame
}

/// The decoded text envelopes among `messages`, STATUS left out.
fn envelopes(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Text(text) => Some(serde_json::from_str::<Value>(text.as_str()).unwrap()),
            _ => None,
        })
        .filter(|v| v["type"] != "STATUS")
        .collect()
}

/// The code of the close frame among `messages`, if one came.
fn close_code(messages: &[Message]) -> Option<u16> {
    messages.iter().find_map(|m| match m {
        Message::Close(frame) => frame.as_ref().map(|f| u16::from(f.code)),
        _ => None,
    })
}

/// A FILE_STAT of `data.txt` answered as it must be: the connection serves.
async fn serves(conn: &mut Conn, id: &str) {
    let reply = conn
        .call(
            "FILE_STAT",
            id,
            json!({"path": "data.txt", "follow_symlinks": true}),
        )
        .await;
    assert_eq!(reply["type"], "FILE_STAT_RESPONSE", "{reply}");
    assert_eq!(reply["payload"]["exists"], true, "{reply}");
    assert_eq!(reply["payload"]["size_bytes"], 4, "{reply}");
}

/// Peak RSS per case: the RSS after the warm-up is the base, and each case's peak (VmHWM,
/// reset before it) may exceed it by at most its allowance.
struct Peaks<'a> {
    shim: &'a Shim,
    base: u64,
    lines: Vec<String>,
}

impl<'a> Peaks<'a> {
    fn start(shim: &'a Shim) -> Self {
        shim.reset_peak_rss();
        Self {
            shim,
            base: shim.rss_bytes(),
            lines: Vec::new(),
        }
    }

    /// Checks the case just run against `allowance_mib` over the base, records it, and resets.
    fn check(&mut self, case: &str, allowance_mib: u64) {
        let peak = self.shim.peak_rss_bytes();
        let mib = |bytes: u64| bytes as f64 / MIB as f64;
        let line = format!(
            "{case}: peak {:.1} MiB (base {:.1}, allowed +{allowance_mib})",
            mib(peak),
            mib(self.base)
        );
        eprintln!("{line}");
        self.lines.push(line);
        assert!(
            peak <= self.base + allowance_mib * MIB,
            "{case}: peak RSS {peak} B exceeds the base {} B by more than {allowance_mib} MiB",
            self.base
        );
        self.shim.reset_peak_rss();
    }
}

/// Whether `message` is an envelope other than STATUS.
fn is_reply(message: &Message) -> bool {
    match message {
        Message::Text(text) => serde_json::from_str::<Value>(text.as_str())
            .is_ok_and(|value| value["type"] != "STATUS"),
        _ => false,
    }
}

/// A text frame whose payload is `bytes` as they are, UTF-8 or not.
fn raw_text(bytes: Vec<u8>, kind: Data, last: bool) -> Message {
    Message::Frame(Frame::message(bytes, OpCode::Data(kind), last))
}

/// The shim with a session granting files and a four-byte `data.txt` in its root.
async fn hostile_session(tag: &str) -> (std::path::PathBuf, Platform, Shim, Conn) {
    let (home, root) = home_and_root(tag);
    std::fs::write(root.join("data.txt"), "data").unwrap();
    let platform = Platform::bind().await;
    let shim = spawn(&home, &platform, &root, &[]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    serves(&mut conn, "warm-up").await;
    (home, platform, shim, conn)
}

/// Sends `messages` and expects the shim to close with `code`, answering nothing; then
/// accepts its redial and checks the new session serves.
async fn closes_with(
    platform: &Platform,
    conn: &mut Conn,
    messages: Vec<Message>,
    code: u16,
    case: &str,
) {
    let read = conn
        .pipeline(messages, |m| matches!(m, Message::Close(_)))
        .await;
    assert_eq!(envelopes(&read), Vec::<Value>::new(), "{case}: answered");
    assert_eq!(close_code(&read), Some(code), "{case}: {read:?}");
    let (mut again, _) = platform.session(&["files"], |_| {}).await;
    serves(&mut again, &format!("after-{case}")).await;
    *conn = again;
}

#[tokio::test]
async fn frames_at_and_over_the_limit_binary_undecodable_and_deep_ones() {
    let started = Instant::now();
    let (home, platform, shim, mut conn) = hostile_session("shim-hostile-frames").await;
    let mut peaks = Peaks::start(&shim);

    // One byte over, first, while the heap holds no frame yet: RFC 6455's "message too big",
    // refused at the frame header, so the 16 MiB are never buffered (allowance: a quarter).
    let over = stat_of_length("over", MAX_FRAME_BYTES + 1);
    let message = Message::text(over.clone());
    closes_with(&platform, &mut conn, vec![message], MESSAGE_TOO_BIG, "over").await;
    peaks.check("16 MiB + 1 in one frame", 4);
    // The same in three fragments: buffered up to the limit, then refused (one frame's worth).
    let third = over.len() / 3;
    let fragments = vec![
        raw_text(over.as_bytes()[..third].to_vec(), Data::Text, false),
        raw_text(
            over.as_bytes()[third..2 * third].to_vec(),
            Data::Continue,
            false,
        ),
        raw_text(over.as_bytes()[2 * third..].to_vec(), Data::Continue, true),
    ];
    drop(over);
    closes_with(
        &platform,
        &mut conn,
        fragments,
        MESSAGE_TOO_BIG,
        "fragments",
    )
    .await;
    peaks.check("16 MiB + 1 in fragments", 20);

    // A text frame that is not UTF-8: RFC 6455's "inconsistent data".
    let mut bytes =
        br#"{"type":"FILE_STAT","id":"utf","ts":1.0,"payload":{"path":"data.txt","x":""#.to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe, 0xc3]);
    bytes.extend_from_slice(br#""}}"#);
    let message = raw_text(bytes, Data::Text, true);
    closes_with(
        &platform,
        &mut conn,
        vec![message],
        INCONSISTENT_DATA,
        "utf8",
    )
    .await;
    peaks.check("invalid UTF-8", 4);

    // Binary frames carry no envelope: dropped unanswered (even a valid request), the session
    // goes on; `serves` fails if any of them was answered first.
    let request = envelope(
        "FILE_STAT",
        "binary",
        json!({"path": "data.txt", "marker": MARKER}),
    );
    let binary = |bytes: Vec<u8>| Message::binary(bytes);
    conn.send_raw(binary(request.to_string().into_bytes()))
        .await
        .unwrap();
    conn.send_raw(binary(vec![0xa5; MIB as usize]))
        .await
        .unwrap();
    for i in 0..1_000u32 {
        conn.send_raw(binary(i.to_le_bytes().to_vec()))
            .await
            .unwrap();
    }
    serves(&mut conn, "after-binary").await;
    peaks.check("binary frames", 8);

    // 100,000 levels of nesting: no id can be read, so nothing is answered, and the parser's
    // depth limit keeps the stack whole.
    let depth = 100_000;
    let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let objects = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    let in_payload = format!(
        r#"{{"type":"FILE_STAT","id":"deep","ts":1.0,"payload":{{"path":"data.txt","x":{arrays}}}}}"#
    );
    for frame in [arrays, objects, in_payload] {
        conn.send_text(frame).await;
    }
    serves(&mut conn, "after-nesting").await;
    peaks.check("nested 100,000 deep", 8);

    // Exactly 16 MiB, last (its copies stay in the allocator): inside the limit; the unknown
    // payload field is ignored and it is served. Allowance: six copies of the frame (the
    // transport's buffer, the text, the parsed string and the payload's, and slack for two).
    conn.send_text(stat_of_length("limit", MAX_FRAME_BYTES))
        .await;
    let reply = conn.recv().await;
    assert_eq!(reply["id"], "limit", "{reply}");
    assert_eq!(reply["type"], "FILE_STAT_RESPONSE", "{reply}");
    peaks.check("16 MiB frame", 96);
    serves(&mut conn, "after-limit").await;

    let stderr = shim.stderr();
    assert!(!stderr.contains(MARKER), "the log quotes a frame");
    assert!(!stderr.contains("panicked"), "{stderr}");
    eprintln!(
        "hostile frames: {:.1} s; {}",
        started.elapsed().as_secs_f64(),
        peaks.lines.join("; ")
    );
    drop(peaks);
    drop(shim);
    std::fs::remove_dir_all(home).unwrap();
}

#[tokio::test]
async fn bursts_of_unknown_types_requests_beyond_max_concurrent_and_pings() {
    let started = Instant::now();
    let (home, _platform, shim, mut conn) = hostile_session("shim-hostile-bursts").await;
    let n = burst();
    let mut peaks = Peaks::start(&shim);

    // Unknown types: each answered in order with FEATURE_NOT_SUPPORTED naming its type.
    let kind = |i: usize| format!("HOSTILE_{}", i % 16);
    let frames: Vec<Message> = (0..n)
        .map(|i| {
            text(&envelope(
                &kind(i),
                &format!("u{i}"),
                json!({"marker": MARKER}),
            ))
        })
        .collect();
    let mut answered = 0;
    let read = conn
        .pipeline(frames, |m| {
            answered += usize::from(is_reply(m));
            answered == n
        })
        .await;
    let replies = envelopes(&read);
    assert_eq!(replies.len(), n);
    for (i, reply) in replies.iter().enumerate() {
        assert_eq!(reply["id"], format!("u{i}"), "{reply}");
        assert_eq!(error_code(reply), "FEATURE_NOT_SUPPORTED", "{reply}");
        assert_eq!(
            reply["payload"]["details"],
            json!({"message_type": kind(i)}),
            "{reply}"
        );
        assert_eq!(reply["pending_capacity"], MAX_CONCURRENT, "{reply}");
    }
    serves(&mut conn, "after-unknown").await;
    peaks.check("unknown-type burst", BURST_ALLOWANCE_MIB);

    // Requests far faster than max_concurrent: each answered once, served or refused at once
    // with SHIM_OVERLOADED; never more than max_concurrent in flight.
    let frames: Vec<Message> = (0..n)
        .map(|i| {
            text(&envelope(
                "FILE_STAT",
                &format!("s{i}"),
                json!({"path": "data.txt", "follow_symlinks": true}),
            ))
        })
        .collect();
    let mut answered = 0;
    let read = conn
        .pipeline(frames, |m| {
            answered += usize::from(is_reply(m));
            answered == n
        })
        .await;
    let replies = envelopes(&read);
    let ids: HashSet<&str> = replies.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!((replies.len(), ids.len()), (n, n), "an id answered twice");
    let (mut served, mut overloaded) = (0, 0);
    for reply in &replies {
        let capacity = reply["pending_capacity"].as_u64().unwrap();
        assert!(capacity <= MAX_CONCURRENT, "{reply}");
        if reply["type"] == "FILE_STAT_RESPONSE" {
            assert_eq!(reply["payload"]["size_bytes"], 4, "{reply}");
            served += 1;
        } else {
            assert_eq!(error_code(reply), "SHIM_OVERLOADED", "{reply}");
            assert_eq!(
                reply["payload"]["details"],
                json!({"max_concurrent": MAX_CONCURRENT}),
                "{reply}"
            );
            assert_eq!(capacity, 0, "refused with a free slot: {reply}");
            overloaded += 1;
        }
    }
    assert!(
        served > 0 && overloaded > 0,
        "served {served}, overloaded {overloaded}"
    );
    let statuses = read.len() - replies.len();
    serves(&mut conn, "after-overload").await;
    peaks.check("request burst", BURST_ALLOWANCE_MIB);

    // PING envelopes and WebSocket pings interleaved at line rate: every PING gets its PONG,
    // in order, and the last WebSocket ping its pong (the transport may fold earlier ones).
    let last = (n - 1).to_string();
    let frames: Vec<Message> = (0..n)
        .flat_map(|i| {
            [
                text(&envelope("PING", &format!("p{i}"), json!({}))),
                Message::Ping(i.to_string().into_bytes().into()),
            ]
        })
        .collect();
    let (mut pongs, mut last_pong) = (0, false);
    let read = conn
        .pipeline(frames, |m| {
            pongs += usize::from(is_reply(m));
            last_pong |= matches!(m, Message::Pong(data) if data.as_ref() == last.as_bytes());
            pongs == n && last_pong
        })
        .await;
    let replies = envelopes(&read);
    for (i, reply) in replies.iter().enumerate() {
        assert_eq!(
            (reply["type"].as_str(), reply["id"].as_str()),
            (Some("PONG"), Some(format!("p{i}").as_str())),
            "{reply}"
        );
    }
    let transport_pongs = read
        .iter()
        .filter(|m| matches!(m, Message::Pong(_)))
        .count();
    serves(&mut conn, "after-pings").await;
    peaks.check("ping flood", BURST_ALLOWANCE_MIB);

    let stderr = shim.stderr();
    assert!(!stderr.contains(MARKER), "the log quotes a frame");
    assert!(!stderr.contains("panicked"), "{stderr}");
    eprintln!(
        "hostile bursts of {n}: served {served}, overloaded {overloaded}, {statuses} STATUS, {transport_pongs} transport pongs, {:.1} s; {}",
        started.elapsed().as_secs_f64(),
        peaks.lines.join("; ")
    );
    drop(peaks);
    drop(shim);
    std::fs::remove_dir_all(home).unwrap();
}
