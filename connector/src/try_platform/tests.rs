//! Tests of the typed lines and of how a frame is shown; the platform itself is tested
//! against the real binary (tests/tests/suite/connector_try.rs).

use serde_json::json;

use super::lines::{Action, READY, Target, parse};
use super::show::{brief, hint};

#[test]
fn every_ready_request_parses_and_numbers_pick_them() {
    for (n, (line, _)) in READY.iter().enumerate() {
        assert_eq!(parse(&(n + 1).to_string()), parse(line), "{line}");
        assert!(matches!(parse(line), Ok(Action::Request { .. })), "{line}");
    }
    assert_eq!(
        parse("write notes/a.txt  hello there").unwrap(),
        Action::Request {
            target: Target::Data,
            kind: "FILE_WRITE".to_owned(),
            payload: json!({"path": "notes/a.txt", "content": "hello there", "create_parents": true}),
        }
    );
    assert_eq!(
        parse("list").unwrap(),
        Action::Request {
            target: Target::Data,
            kind: "FILE_LIST".to_owned(),
            payload: json!({"path": "."}),
        }
    );
    assert!(matches!(
        parse("send DIRECTORY_LIST_REQUEST {\"browse_id\": null, \"directory_ref\": null}"),
        Ok(Action::Request {
            target: Target::Control,
            ..
        })
    ));
    assert_eq!(parse("folders").unwrap(), Action::Folders(None));
    assert_eq!(parse("folders 2").unwrap(), Action::Folders(Some(2)));
    assert_eq!(parse("use 1").unwrap(), Action::Use(1));
    assert_eq!(parse("  ").unwrap(), Action::Nothing);
    assert_eq!(parse("quit").unwrap(), Action::Quit);
}

#[test]
fn a_line_that_cannot_be_sent_says_what_to_type() {
    for (line, says) in [
        (
            "frobnicate",
            "unknown command frobnicate; type help for the list",
        ),
        ("read", "read needs a path; type help for the list"),
        ("write onlypath", "write needs a path and the text to write"),
        ("9", "there is no ready request 9: type 1 to 5"),
        (
            "use zero",
            "use takes the number of an entry of the last listing",
        ),
        ("send FILE_STAT {nope", "the payload is not JSON"),
    ] {
        let problem = parse(line).unwrap_err();
        assert!(problem.starts_with(says), "{line}: {problem}");
    }
}

#[test]
fn long_text_and_images_are_shown_short_and_refusals_get_a_hint() {
    let payload = json!({"content": "x".repeat(1000), "image_base64": "QUJD", "size_bytes": 1000});
    let shown = brief(&payload);
    assert!(shown.contains("…(+600 characters)"), "{shown}");
    assert!(shown.contains("<4 characters of base64>"), "{shown}");
    assert!(shown.len() < 600, "{shown}");
    let refused = json!({"type": "ERROR", "payload": {"code": "CAPABILITY_NOT_GRANTED",
        "details": {"required_capability": "shell"}}});
    assert!(hint(&refused).unwrap().contains("--enable-shell"));
    assert_eq!(hint(&json!({"type": "ACK", "payload": {"ok": true}})), None);
}
