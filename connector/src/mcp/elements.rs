//! `click_element` and `type_into_element`: acting on an element of an accessibility snapshot
//! by its id instead of by pixels. Each becomes the wire's ELEMENT_ACTION, so the capability
//! path re-checks the element (same window, same role, name and place), acts at its centre as
//! it is now, and audits it as input is audited.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::tools::{ACTS, Input, Needs, Spec, spec};
use crate::protocol::{AckPayload, ElementActionKind, MessageType};

/// The two element tools, in the order `tools/list` shows them.
pub(super) fn specs() -> Vec<Spec> {
    vec![
        spec::<ClickElement>(
            "click_element",
            "Click an element",
            Needs::ComputerUse,
            ACTS,
            |_| {
                "Left-click an element by the id accessibility_snapshot gave it (e.g. \"e12\"), at the centre of its box as it is now. The window and the element are checked first: if the window closed or was replaced, or the element is gone or changed its role or name, the id is stale and the call is refused (WINDOW_STALE) without clicking; take a new snapshot. Returns {ok: true}.".to_owned()
            },
        ),
        spec::<TypeIntoElement>(
            "type_into_element",
            "Type into an element",
            Needs::ComputerUse,
            ACTS,
            |_| {
                "Click an element by the id accessibility_snapshot gave it, at the centre of its box as it is now, to focus it, then type text (any Unicode) there. The window and the element are checked first, as click_element does: a stale id is refused (WINDOW_STALE) and nothing is typed. Returns {ok: true}.".to_owned()
            },
        ),
    ]
}

const fn click() -> ElementActionKind {
    ElementActionKind::Click
}

const fn typing() -> ElementActionKind {
    ElementActionKind::Type
}

/// `click_element` → ELEMENT_ACTION `click`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ClickElement {
    /// An element's id from accessibility_snapshot, e.g. "e12".
    element_id: String,
    /// The wire's action word: this tool's own, never an argument.
    #[serde(skip_deserializing, default = "click")]
    #[schemars(skip)]
    action: ElementActionKind,
}

impl Input for ClickElement {
    const TYPE: MessageType = MessageType::ElementAction;
    type Output = AckPayload;
}

/// `type_into_element` → ELEMENT_ACTION `type`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TypeIntoElement {
    /// An element's id from accessibility_snapshot, e.g. "e12".
    element_id: String,
    /// The text to type.
    text: String,
    #[serde(skip_deserializing, default = "typing")]
    #[schemars(skip)]
    action: ElementActionKind,
}

impl Input for TypeIntoElement {
    const TYPE: MessageType = MessageType::ElementAction;
    type Output = AckPayload;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tools::Rejected;
    use crate::protocol::{ElementActionPayload, Message};
    use serde_json::{Value, json};

    fn call(name: &str, arguments: &Value) -> Result<Message, String> {
        let tools = specs();
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        match (tool.message)(name, arguments.as_object().cloned().unwrap()) {
            Ok((message, _)) => Ok(message),
            Err(Rejected::Schema(text)) => Err(text),
            Err(Rejected::Payload(reply)) => Err(format!("{reply:?}")),
        }
    }

    #[test]
    fn the_tools_become_element_actions_and_take_only_their_parameters() {
        assert_eq!(
            call("click_element", &json!({"element_id": "e3"})),
            Ok(Message::ElementAction(ElementActionPayload {
                element_id: "e3".to_owned(),
                action: ElementActionKind::Click,
                text: None,
            }))
        );
        assert_eq!(
            call(
                "type_into_element",
                &json!({"element_id": "e4", "text": "hé"})
            ),
            Ok(Message::ElementAction(ElementActionPayload {
                element_id: "e4".to_owned(),
                action: ElementActionKind::Type,
                text: Some("hé".to_owned()),
            }))
        );
        // The action word is the tool's: a client cannot turn a click into typing.
        let sneaky = call(
            "click_element",
            &json!({"element_id": "e3", "action": "type"}),
        );
        assert_eq!(
            sneaky,
            Err("`action` is not a parameter of click_element, which takes element_id".to_owned())
        );
        assert_eq!(
            call("type_into_element", &json!({"element_id": "e4"})),
            Err("`text` is required; see type_into_element's inputSchema".to_owned())
        );
        assert_eq!(
            call("click_element", &json!({"element_id": 12})),
            Err("`element_id` must be a string".to_owned())
        );
    }

    #[test]
    fn the_schemas_list_only_what_a_client_gives() {
        for spec in specs() {
            let schema = (spec.schema)().unwrap();
            let properties = schema["properties"].as_object().unwrap();
            assert!(!properties.contains_key("action"), "{}", spec.name);
            assert!(
                schema["required"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("element_id"))
            );
        }
    }
}
