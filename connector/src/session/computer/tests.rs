//! Wire input actions to core actions, the features each request needs, and audit details
//! without typed text or clipboard content.

use super::*;

fn payload(json: Value) -> InputActionPayload {
    serde_json::from_value(json).unwrap()
}

#[test]
fn input_actions_become_core_actions_with_their_defaults() {
    assert_eq!(
        action(&payload(
            json!({"action": "triple_click", "coordinate": [5, 6]})
        ))
        .unwrap(),
        Action::Click {
            at: [5, 6],
            button: Button::Left,
            count: 3,
            modifiers: vec![]
        }
    );
    assert_eq!(
        action(&payload(json!({"action": "scroll", "direction": "up"}))).unwrap(),
        Action::Scroll {
            at: None,
            direction: ScrollDirection::Up,
            clicks: 3,
            modifiers: vec![]
        }
    );
    // scroll_amount and scroll_direction win over clicks and direction.
    let scroll = action(&payload(
        json!({"action": "scroll", "clicks": 2, "scroll_amount": 7,
        "direction": "up", "scroll_direction": "left", "modifiers": ["ctrl"]}),
    ))
    .unwrap();
    assert_eq!(
        scroll,
        Action::Scroll {
            at: None,
            direction: ScrollDirection::Left,
            clicks: 7,
            modifiers: vec![Modifier::Ctrl]
        }
    );
    for (bad, what) in [
        (json!({"action": "left_click"}), "input.left_click"),
        (json!({"action": "drag", "path": [[1, 1]]}), "input.drag"),
        (json!({"action": "type"}), "input.type"),
        (json!({"action": "key", "key": "ctrl+hyper"}), "input.key"),
    ] {
        let err = action(&payload(bad.clone())).unwrap_err();
        assert_eq!(err.code(), "FEATURE_NOT_SUPPORTED", "{bad}");
        assert_eq!(err.details().unwrap()["feature"], what, "{bad}");
    }
}

#[test]
fn each_request_names_the_features_it_needs() {
    let wait = payload(json!({"action": "wait", "duration_ms": 5}));
    assert_eq!(input_features(&wait), ["input.wait"]);
    let drag = payload(json!({"action": "drag", "path": [[0, 0], [1, 1]], "modifiers": ["shift"]}));
    assert_eq!(
        input_features(&drag),
        ["input", "input.drag.path", "input.click.modifiers"]
    );
    let shot: ScreenshotRequestPayload =
        serde_json::from_value(json!({"monitor": -1, "region": [0, 0, 5, 5]})).unwrap();
    assert_eq!(
        ComputerOp::Screenshot(shot).features(),
        ["screenshot", "screenshot.region", "screenshot.all_monitors"]
    );
}

#[test]
fn the_audit_has_lengths_never_typed_text_or_clipboard_content() {
    let typed = ComputerOp::Input(Box::new(payload(
        json!({"action": "type", "text": "hunter2 é", "paste": true}),
    )));
    let (op, details) = typed.audit_details();
    assert_eq!(op, "INPUT_ACTION");
    assert_eq!(details["text_length"], 9);
    assert!(!Value::Object(details).to_string().contains("hunter2"));
    let write = ComputerOp::ClipboardWrite {
        format: ClipboardFormat::Text,
        content: "s3cret".to_owned(),
    };
    let (_, details) = write.audit_details();
    assert_eq!(details["size_bytes"], 6);
    assert!(!Value::Object(details).to_string().contains("s3cret"));
}
