//! Tests of [`super`]: parsing inbound frames into their outcome (error codes, kept ids, version
//! handling) and building outbound frames.

use super::*;
use crate::protocol::common::{AckPayload, EmptyPayload};
use crate::protocol::files::FileReadPayload;
use crate::protocol::{FileEncoding, FileFormat, OrUnknown};

fn message(text: &str) -> Envelope {
    match parse_frame(text) {
        Parsed::Message(envelope) => *envelope,
        other => panic!("expected a message, got {other:?}"),
    }
}

#[test]
fn error_replies_never_quote_the_payload() {
    let frame = r#"{"type":"FILE_WRITE","id":"w1","ts":1.0,"version":"1.1",
        "payload":{"path":"/w/a","content":"private-secret","encoding":"private-encoding"}}"#;
    let parsed = parse_frame(frame);
    assert!(
        matches!(parsed, Parsed::InvalidPayload { .. }),
        "{parsed:?}"
    );
    let reply = parsed.error_reply(2.0, 3).unwrap().to_json().unwrap();
    assert!(reply.contains(r#""id":"w1""#), "{reply}");
    assert!(!reply.contains("private-"), "{reply}");
    let broken = parse_frame(r#"{"type":"FILE_READ","id":"r9","ts":"private-ts"}"#);
    let reply = broken.error_reply(2.0, 3).unwrap().to_json().unwrap();
    assert!(
        reply.contains(r#""id":"r9""#) && !reply.contains("private-"),
        "{reply}"
    );
}

#[test]
fn unknown_envelope_and_payload_fields_are_ignored() {
    let envelope = message(
        r#"{"type":"FILE_READ","id":"r1","ts":1.5,"version":"1.1","trace":{"x":1},
            "payload":{"path":"/w/a","future_flag":true,"nested":{"deep":[1]}}}"#,
    );
    assert_eq!(envelope.id, "r1");
    assert_eq!(
        envelope.message,
        Message::FileRead(FileReadPayload {
            path: "/w/a".to_owned(),
            encoding: FileEncoding::Utf8,
            format: FileFormat::Text,
            offset: 0,
            length: None,
        })
    );
}

#[test]
fn missing_version_defaults_and_other_minor_is_kept() {
    let envelope = message(r#"{"type":"PING","id":"p","ts":1.0,"payload":{}}"#);
    assert_eq!(envelope.version, "1.1");
    assert_eq!(envelope.pending_capacity, None);
    let envelope = message(r#"{"type":"PING","id":"p","ts":1.0,"version":"1.4"}"#);
    assert_eq!(envelope.version, "1.4");
    assert_eq!(envelope.message, Message::Ping(EmptyPayload {}));
    let envelope =
        message(r#"{"type":"PING","id":"p","ts":1.0,"version":"nonsense","payload":null}"#);
    assert_eq!(envelope.version, "nonsense");
}

#[test]
fn unknown_type_is_unknown_with_id() {
    let parsed = parse_frame(r#"{"type":"TELEPORT","id":"t-1","ts":1.0,"payload":{"to":"mars"}}"#);
    assert_eq!(
        parsed,
        Parsed::Unknown {
            id: "t-1".to_owned(),
            message_type: "TELEPORT".to_owned()
        }
    );
    let reply = parsed.error_reply(2.0, 3).unwrap();
    let json: Value = serde_json::from_str(&reply.to_json().unwrap()).unwrap();
    assert_eq!(
        json,
        json!({"type":"ERROR","id":"t-1","ts":2.0,"version":"1.1","pending_capacity":3,
               "payload":{"code":"FEATURE_NOT_SUPPORTED","message":"unknown message type TELEPORT",
                          "fatal":false,"details":{"message_type":"TELEPORT"}}})
    );
}

#[test]
fn invalid_payload_is_invalid_with_id() {
    for text in [
        r#"{"type":"FILE_READ","id":"x","ts":1.0,"payload":{"path":7}}"#,
        r#"{"type":"FILE_READ","id":"x","ts":1.0,"payload":{}}"#,
        r#"{"type":"FILE_READ","id":"x","ts":1.0,"payload":[1,2]}"#,
        r#"{"type":"FILE_READ","id":"x","ts":1.0,"payload":{"path":"/a","encoding":"latin-1"}}"#,
        r#"{"type":"FILE_READ","id":"x","ts":1.0,"payload":{"path":"/a","length":0}}"#,
    ] {
        match parse_frame(text) {
            Parsed::InvalidPayload {
                id,
                message_type,
                reason,
                ..
            } => {
                assert_eq!(
                    (id.as_str(), message_type),
                    ("x", MessageType::FileRead),
                    "{text}"
                );
                assert!(!reason.is_empty());
            }
            other => panic!("{text}: {other:?}"),
        }
    }
    let parsed = parse_frame(
        r#"{"type":"EXECUTE_COMMAND","id":"c","ts":1.0,"payload":{"command":"ls","argv":["ls"]}}"#,
    );
    let reply = parsed.error_reply(1.0, 0).unwrap();
    assert_eq!(reply.id, "c");
    match reply.message {
        Message::Error(error) => {
            assert_eq!(error.code, OrUnknown::Known(ErrorCode::InternalError))
        }
        other => panic!("{other:?}"),
    }
}

/// Every way a control-mode or computer-use payload can be wrong answers the most
/// specific code of PROTOCOL.md's list, naming the field at fault (never its value).
#[test]
fn malformed_control_and_computer_use_payloads_get_their_specific_codes() {
    const REF: &str = "DIRECTORY_REFERENCE_INVALID";
    const GRANT: &str = "ROOT_GRANT_INVALID";
    const REVISION: &str = "SESSION_REVISION_MISMATCH";
    const STALE: &str = "WINDOW_STALE";
    const FEATURE: &str = "FEATURE_NOT_SUPPORTED";
    const GENERIC: &str = "INTERNAL_ERROR";
    let long = "r".repeat(257);
    let sid = "session-1";
    let cases: Vec<(&str, Value, &str, Option<&str>)> = vec![
        // DIRECTORY_LIST_REQUEST: the pair half null, wrong types, shapes, cursor alone.
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"browse_id": "b", "directory_ref": null}),
            REF,
            Some("browse_id"),
        ),
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"browse_id": null, "directory_ref": "d"}),
            REF,
            Some("browse_id"),
        ),
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"browse_id": "b"}),
            REF,
            Some("browse_id"),
        ),
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"directory_ref": "d"}),
            REF,
            Some("browse_id"),
        ),
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"browse_id": 7, "directory_ref": "d"}),
            REF,
            Some("browse_id"),
        ),
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"browse_id": "b", "directory_ref": ["d"]}),
            REF,
            Some("directory_ref"),
        ),
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"browse_id": "b", "directory_ref": {"x": 1}}),
            REF,
            Some("directory_ref"),
        ),
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"browse_id": "", "directory_ref": "d"}),
            REF,
            Some("browse_id"),
        ),
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"browse_id": long, "directory_ref": "d"}),
            REF,
            Some("browse_id"),
        ),
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"browse_id": "b", "directory_ref": long}),
            REF,
            Some("directory_ref"),
        ),
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"browse_id": null, "directory_ref": null, "cursor": "c"}),
            REF,
            Some("cursor"),
        ),
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"browse_id": "b", "directory_ref": "d", "cursor": 3}),
            REF,
            Some("cursor"),
        ),
        (
            "DIRECTORY_LIST_REQUEST",
            json!({"browse_id": "b", "directory_ref": "d", "cursor": ""}),
            REF,
            Some("cursor"),
        ),
        ("DIRECTORY_LIST_REQUEST", json!("browse"), GENERIC, None),
        // ATTACH_SESSION: the reference pair, then the session id (no code of its own).
        (
            "ATTACH_SESSION",
            json!({"session_id": sid, "directory_ref": "d"}),
            REF,
            Some("browse_id"),
        ),
        (
            "ATTACH_SESSION",
            json!({"session_id": sid, "browse_id": "b"}),
            REF,
            Some("directory_ref"),
        ),
        (
            "ATTACH_SESSION",
            json!({"session_id": sid, "browse_id": null, "directory_ref": "d"}),
            REF,
            Some("browse_id"),
        ),
        (
            "ATTACH_SESSION",
            json!({"session_id": sid, "browse_id": "b", "directory_ref": 1}),
            REF,
            Some("directory_ref"),
        ),
        (
            "ATTACH_SESSION",
            json!({"session_id": sid, "browse_id": long, "directory_ref": "d"}),
            REF,
            Some("browse_id"),
        ),
        (
            "ATTACH_SESSION",
            json!({"session_id": sid, "browse_id": "b", "directory_ref": ""}),
            REF,
            Some("directory_ref"),
        ),
        (
            "ATTACH_SESSION",
            json!({"browse_id": "b", "directory_ref": "d"}),
            GENERIC,
            Some("session_id"),
        ),
        (
            "ATTACH_SESSION",
            json!({"session_id": 5, "browse_id": "b", "directory_ref": "d"}),
            GENERIC,
            Some("session_id"),
        ),
        (
            "ATTACH_SESSION",
            json!({"session_id": "bad id!", "browse_id": "b", "directory_ref": "d"}),
            GENERIC,
            Some("session_id"),
        ),
        // ACTIVATE_SESSION: a revision that can match no binding.
        (
            "ACTIVATE_SESSION",
            json!({"session_id": sid}),
            REVISION,
            Some("revision"),
        ),
        (
            "ACTIVATE_SESSION",
            json!({"session_id": sid, "revision": 0}),
            REVISION,
            Some("revision"),
        ),
        (
            "ACTIVATE_SESSION",
            json!({"session_id": sid, "revision": -1}),
            REVISION,
            Some("revision"),
        ),
        (
            "ACTIVATE_SESSION",
            json!({"session_id": sid, "revision": 1.5}),
            REVISION,
            Some("revision"),
        ),
        (
            "ACTIVATE_SESSION",
            json!({"session_id": sid, "revision": "1"}),
            REVISION,
            Some("revision"),
        ),
        (
            "ACTIVATE_SESSION",
            json!({"session_id": sid, "revision": null}),
            REVISION,
            Some("revision"),
        ),
        (
            "ACTIVATE_SESSION",
            json!({"revision": 1}),
            GENERIC,
            Some("session_id"),
        ),
        // RESTORE_SESSION: a missing or ill-typed grant is a malformed grant.
        (
            "RESTORE_SESSION",
            json!({"session_id": sid}),
            GRANT,
            Some("root_grant"),
        ),
        (
            "RESTORE_SESSION",
            json!({"session_id": sid, "root_grant": ""}),
            GRANT,
            Some("root_grant"),
        ),
        (
            "RESTORE_SESSION",
            json!({"session_id": sid, "root_grant": 12}),
            GRANT,
            Some("root_grant"),
        ),
        (
            "RESTORE_SESSION",
            json!({"session_id": sid, "root_grant": ["v1"]}),
            GRANT,
            Some("root_grant"),
        ),
        (
            "RESTORE_SESSION",
            json!({"root_grant": "v1.a.b"}),
            GENERIC,
            Some("session_id"),
        ),
        // DETACH_SESSION: only a session id, which has no code of its own.
        ("DETACH_SESSION", json!({}), GENERIC, Some("session_id")),
        (
            "DETACH_SESSION",
            json!({"session_id": false}),
            GENERIC,
            Some("session_id"),
        ),
        // SCREENSHOT_REQUEST.
        (
            "SCREENSHOT_REQUEST",
            json!({"format": "webp"}),
            FEATURE,
            Some("format"),
        ),
        (
            "SCREENSHOT_REQUEST",
            json!({"region": [0, 0, 5, 5], "window_id": "win_1"}),
            FEATURE,
            Some("region"),
        ),
        (
            "SCREENSHOT_REQUEST",
            json!({"window_id": 3}),
            STALE,
            Some("window_id"),
        ),
        (
            "SCREENSHOT_REQUEST",
            json!({"quality": 0}),
            GENERIC,
            Some("quality"),
        ),
        (
            "SCREENSHOT_REQUEST",
            json!({"quality": 101}),
            GENERIC,
            Some("quality"),
        ),
        // A region that cannot be captured, like an empty one (the reference), is unsupported.
        (
            "SCREENSHOT_REQUEST",
            json!({"region": [0, 0, 5]}),
            FEATURE,
            Some("region"),
        ),
        (
            "SCREENSHOT_REQUEST",
            json!({"monitor": "all"}),
            GENERIC,
            Some("monitor"),
        ),
        (
            "SCREENSHOT_REQUEST",
            json!({"include_cursor": "yes"}),
            GENERIC,
            Some("include_cursor"),
        ),
        // INPUT_ACTION: unknown operations, buttons, modifiers and directions.
        ("INPUT_ACTION", json!({}), FEATURE, None),
        (
            "INPUT_ACTION",
            json!({"action": "quadruple_click"}),
            FEATURE,
            Some("action"),
        ),
        (
            "INPUT_ACTION",
            json!({"action": 1}),
            FEATURE,
            Some("action"),
        ),
        (
            "INPUT_ACTION",
            json!({"action": "mouse_down", "button": "fourth"}),
            FEATURE,
            Some("button"),
        ),
        (
            "INPUT_ACTION",
            json!({"action": "left_click", "coordinate": [1, 1], "modifiers": ["hyper"]}),
            FEATURE,
            Some("modifiers"),
        ),
        (
            "INPUT_ACTION",
            json!({"action": "scroll", "direction": "inward"}),
            FEATURE,
            Some("direction"),
        ),
        (
            "INPUT_ACTION",
            json!({"action": "scroll", "scroll_direction": "back"}),
            FEATURE,
            Some("scroll_direction"),
        ),
        (
            "INPUT_ACTION",
            json!({"action": "left_click", "coordinate": [1]}),
            GENERIC,
            Some("coordinate"),
        ),
        (
            "INPUT_ACTION",
            json!({"action": "drag", "path": [[1, 2], "x"]}),
            GENERIC,
            Some("path"),
        ),
        (
            "INPUT_ACTION",
            json!({"action": "type", "text": 5}),
            GENERIC,
            Some("text"),
        ),
        (
            "INPUT_ACTION",
            json!({"action": "hold_key", "duration_ms": -5}),
            GENERIC,
            Some("duration_ms"),
        ),
        // WINDOW_FOCUS and A11Y_SNAPSHOT_REQUEST: an id that names no live window.
        ("WINDOW_FOCUS", json!({}), STALE, None),
        (
            "WINDOW_FOCUS",
            json!({"window_id": null}),
            STALE,
            Some("window_id"),
        ),
        (
            "WINDOW_FOCUS",
            json!({"window_id": 42}),
            STALE,
            Some("window_id"),
        ),
        (
            "WINDOW_FOCUS",
            json!({"window_id": "win_1", "raise": "no"}),
            GENERIC,
            Some("raise"),
        ),
        ("A11Y_SNAPSHOT_REQUEST", json!({}), STALE, None),
        (
            "A11Y_SNAPSHOT_REQUEST",
            json!({"window_id": []}),
            STALE,
            Some("window_id"),
        ),
        (
            "A11Y_SNAPSHOT_REQUEST",
            json!({"window_id": "win_1", "max_elements": 0}),
            GENERIC,
            Some("max_elements"),
        ),
        (
            "A11Y_SNAPSHOT_REQUEST",
            json!({"window_id": "win_1", "max_depth": 65}),
            GENERIC,
            Some("max_depth"),
        ),
        (
            "A11Y_SNAPSHOT_REQUEST",
            json!({"window_id": "win_1", "deadline_ms": 10_001}),
            GENERIC,
            Some("deadline_ms"),
        ),
        // ELEMENT_ACTION: the text belongs to `type` alone.
        ("ELEMENT_ACTION", json!({"action": "click"}), GENERIC, None),
        (
            "ELEMENT_ACTION",
            json!({"element_id": "e1", "action": "type"}),
            GENERIC,
            Some("text"),
        ),
        (
            "ELEMENT_ACTION",
            json!({"element_id": "e1", "action": "click", "text": "x"}),
            GENERIC,
            Some("text"),
        ),
        (
            "ELEMENT_ACTION",
            json!({"element_id": "e1", "action": "drag"}),
            GENERIC,
            Some("action"),
        ),
        // The clipboard: a format no shim offers.
        (
            "CLIPBOARD_READ",
            json!({"format": "rtf"}),
            FEATURE,
            Some("format"),
        ),
        (
            "CLIPBOARD_WRITE",
            json!({"format": "html", "content": "x"}),
            FEATURE,
            Some("format"),
        ),
        ("CLIPBOARD_WRITE", json!({"format": "text"}), GENERIC, None),
        (
            "CLIPBOARD_WRITE",
            json!({"content": 9}),
            GENERIC,
            Some("content"),
        ),
        // The rest have no code of their own in the spec.
        (
            "WINDOW_LIST_REQUEST",
            json!({"include_minimized": "yes"}),
            GENERIC,
            Some("include_minimized"),
        ),
        (
            "APP_LIST_REQUEST",
            json!({"include_background": 1}),
            GENERIC,
            Some("include_background"),
        ),
        ("APP_LAUNCH", json!({"args": "one"}), GENERIC, Some("args")),
        (
            "PERMISSIONS_CHECK_REQUEST",
            json!({"permissions": "all"}),
            GENERIC,
            Some("permissions"),
        ),
        ("CURSOR_POSITION_REQUEST", json!([1]), GENERIC, None),
        ("DISPLAY_INFO_REQUEST", json!(5), GENERIC, None),
    ];
    for (kind, payload, code, field) in cases {
        let frame = json!({"type": kind, "id": "q", "ts": 1.0, "payload": payload}).to_string();
        let reply = parse_frame(&frame)
            .error_reply(2.0, 1)
            .unwrap_or_else(|| panic!("{frame}: no reply"));
        let json: Value = serde_json::from_str(&reply.to_json().unwrap()).unwrap();
        assert_eq!(json["id"], "q", "{frame}");
        assert_eq!(json["payload"]["code"], code, "{frame}");
        assert_eq!(
            json["payload"]["message"],
            format!("invalid {kind} payload"),
            "{frame}"
        );
        assert_eq!(
            json["payload"]["details"],
            match field {
                Some(field) => json!({"message_type": kind, "field": field}),
                None => json!({"message_type": kind}),
            },
            "{frame}"
        );
    }
}

#[test]
fn invalid_error_frames_are_never_answered() {
    let parsed = parse_frame(r#"{"type":"ERROR","id":"e","ts":1.0,"payload":{"code":5}}"#);
    assert!(matches!(
        parsed,
        Parsed::InvalidPayload {
            message_type: MessageType::Error,
            ..
        }
    ));
    assert_eq!(parsed.error_reply(1.0, 0), None);
    // An unknown code from a newer peer is not a parse failure at all.
    let envelope = message(
        r#"{"type":"ERROR","id":"e","ts":1.0,"payload":{"code":"NEW_CODE","message":"m"}}"#,
    );
    match envelope.message {
        Message::Error(error) => {
            assert_eq!(error.code, OrUnknown::Unknown("NEW_CODE".to_owned()))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn not_json_is_unreadable_without_id() {
    for text in ["", "not json", "{\"id\":", "[1,2]", "\"HELLO\"", "null"] {
        assert!(
            matches!(parse_frame(text), Parsed::Unreadable { id: None, .. }),
            "{text:?}"
        );
        assert_eq!(parse_frame(text).error_reply(1.0, 1), None);
    }
    assert!(matches!(
        parse_frame(r#"{"type":"PING","ts":1.0,"payload":{}}"#),
        Parsed::Unreadable { id: None, .. }
    ));
    assert!(matches!(
        parse_frame(r#"{"type":"PING","id":42,"ts":1.0,"payload":{}}"#),
        Parsed::Unreadable { id: None, .. }
    ));
}

#[test]
fn broken_envelope_with_id_keeps_the_id() {
    for text in [
        r#"{"id":"k","ts":1.0,"payload":{}}"#,
        r#"{"type":"PING","id":"k","payload":{}}"#,
        r#"{"type":"PING","id":"k","ts":"now","payload":{}}"#,
        r#"{"type":"PING","id":"k","ts":1.0,"version":1.1}"#,
        r#"{"type":"PING","id":"k","ts":1.0,"pending_capacity":-1}"#,
    ] {
        let parsed = parse_frame(text);
        assert!(
            matches!(&parsed, Parsed::Unreadable { id: Some(id), .. } if id == "k"),
            "{text}: {parsed:?}"
        );
        assert_eq!(parsed.error_reply(1.0, 0).unwrap().id, "k");
    }
}

#[test]
fn other_major_is_dropped_but_handshake_is_negotiated() {
    let parsed = parse_frame(
        r#"{"type":"FILE_READ","id":"v","ts":1.0,"version":"2.0","payload":{"path":"/a"}}"#,
    );
    assert_eq!(
        parsed,
        Parsed::OtherMajor {
            id: "v".to_owned(),
            version: "2.0".to_owned()
        }
    );
    assert_eq!(parsed.error_reply(1.0, 1), None);
    // A v2 frame of a type v1 does not know is still just another major.
    let parsed = parse_frame(r#"{"type":"V2_ONLY","id":"v","ts":1.0,"version":"2.3"}"#);
    assert!(matches!(parsed, Parsed::OtherMajor { .. }));
    let parsed = parse_frame(r#"{"type":"PING","id":"v","ts":1.0,"version":"0.9"}"#);
    assert!(matches!(parsed, Parsed::OtherMajor { .. }));
    let ack = message(
        r#"{"type":"HELLO_ACK","id":"h","ts":1.0,"version":"2.0","payload":{"protocol_version":"2.0"}}"#,
    );
    assert_eq!(ack.version, "2.0");
}

#[test]
fn responses_carry_pending_capacity_and_requests_omit_it() {
    let ack = Envelope::response("r", 1.0, 2, Message::Ack(AckPayload::OK));
    assert_eq!(
        ack.to_json().unwrap(),
        r#"{"type":"ACK","id":"r","ts":1.0,"version":"1.1","pending_capacity":2,"payload":{"ok":true}}"#
    );
    let ping = Envelope::new("p", 1.0, Message::Ping(EmptyPayload {}));
    assert_eq!(
        ping.to_json().unwrap(),
        r#"{"type":"PING","id":"p","ts":1.0,"version":"1.1","payload":{}}"#
    );
    let zero = Envelope::response("r", 1.0, 0, Message::Ack(AckPayload::OK));
    assert!(zero.to_json().unwrap().contains(r#""pending_capacity":0"#));
}

#[test]
fn error_builder_echoes_id_and_details() {
    let without = Envelope::error("req-9", 3.0, 1, ErrorCode::PathNotFound, "missing", None);
    assert_eq!(
        without.to_json().unwrap(),
        r#"{"type":"ERROR","id":"req-9","ts":3.0,"version":"1.1","pending_capacity":1,"payload":{"code":"PATH_NOT_FOUND","message":"missing","fatal":false}}"#
    );
    let with = Envelope::error(
        "req-9",
        3.0,
        0,
        ErrorCode::ShimOverloaded,
        "busy",
        Some(json!({"max_concurrent": 4})),
    )
    .with_version(ProtocolVersion { major: 1, minor: 0 });
    let json: Value = serde_json::from_str(&with.to_json().unwrap()).unwrap();
    assert_eq!(json["version"], "1.0");
    assert_eq!(json["payload"]["details"], json!({"max_concurrent": 4}));
    assert_eq!(json["payload"]["code"], "SHIM_OVERLOADED");
}

#[test]
fn unix_now_is_recent() {
    assert!(unix_now() > 1_700_000_000.0);
}

#[test]
fn a_frame_with_bulk_text_is_the_same_json_written_into_a_presized_buffer() {
    use crate::protocol::files::FileContentsPayload;
    for content in ["", "aGVsbG8=", "a \"quoted\" line\nand a tab\t and é"] {
        let envelope = Envelope::response(
            "r-1".to_owned(),
            1.5,
            3,
            Message::FileContents(FileContentsPayload {
                content: content.repeat(1000),
                encoding: FileEncoding::Base64,
                size_bytes: 42,
                truncated: false,
            }),
        );
        assert_eq!(
            envelope.to_json().unwrap(),
            serde_json::to_string(&envelope).unwrap()
        );
    }
}
