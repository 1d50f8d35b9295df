//! How the `try` platform shows a frame: one line, `-> TYPE id {payload}` for what it sends
//! and `<- TYPE id (N ms) {payload}` for what it receives, with long text cut short and an
//! image replaced by its size, and a hint for the refusals a first try runs into.

use serde_json::Value;

/// Longest string shown whole; a file's content or a command's output beyond it is cut.
const SHOWN_CHARS: usize = 400;

/// `value`'s payload as compact JSON, long strings cut to [`SHOWN_CHARS`] characters and a
/// screenshot's base64 replaced by its length.
pub(super) fn brief(payload: &Value) -> String {
    shorten(payload, None).to_string()
}

fn shorten(value: &Value, key: Option<&str>) -> Value {
    match value {
        Value::String(text) if key == Some("image_base64") => {
            Value::String(format!("<{} characters of base64>", text.len()))
        }
        Value::String(text) if text.chars().count() > SHOWN_CHARS => {
            let cut: String = text.chars().take(SHOWN_CHARS).collect();
            let rest = text.chars().count() - SHOWN_CHARS;
            Value::String(format!("{cut}…(+{rest} characters)"))
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| shorten(v, None)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), shorten(v, Some(k))))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What to do about an ERROR reply a first try commonly gets, if anything.
pub(super) fn hint(reply: &Value) -> Option<&'static str> {
    if reply["type"] != "ERROR" {
        return None;
    }
    let needs = reply["payload"]["details"]["required_capability"].as_str();
    match (reply["payload"]["code"].as_str()?, needs) {
        ("CAPABILITY_NOT_GRANTED", Some("shell")) => Some(
            "the connector does not offer shell: stop it and start it again with `start --enable-shell`",
        ),
        ("CAPABILITY_NOT_GRANTED", Some("computer_use")) => Some(
            "the connector does not offer computer use: stop it and start it again with `start --enable-computer-use`, from a desktop session",
        ),
        ("FEATURE_NOT_SUPPORTED", _) => Some(
            "this connection or this desktop does not serve that request; the message says which",
        ),
        ("PATH_OUTSIDE_ALLOWED_ROOT", _) => Some(
            "the connector serves only paths inside its allowed root; use a path relative to it",
        ),
        _ => None,
    }
}
