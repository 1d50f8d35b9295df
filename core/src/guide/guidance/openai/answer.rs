//! Strict parsing of the model server's answer: the envelope's shape, then the model's JSON
//! (no duplicate keys, only known fields, bounded text, no URLs), then the same contract and
//! target checks the route applies. Anything short of that is refused, without saying why.

use serde::{
    Deserialize, Deserializer,
    de::{Error as _, MapAccess, SeqAccess, Visitor},
};
use serde_json::{Map, Value};

use super::{
    COMPLETION_PREFIX, MAX_CONTENT_BYTES, MAX_MODEL_INSTRUCTION_CHARS, MAX_PLAN_CONTENT_BYTES,
    plan::parse_plan,
};
use crate::{
    guide::guidance::{
        model::{GuidanceResult, GuidanceStatus, Mode, Observation, ScrollDirection, Target},
        plan::plan_matches_observation,
        provider::ProviderError,
        validate::{result_is_valid, target_matches_observation},
    },
    limits::{MAX_ELEMENTS, MAX_INPUT_VALUE_CHARS, MAX_REMAINING_WORK_CHARS},
    llm::RawResponse,
};

fn parse_scroll(text: &str) -> Option<ScrollDirection> {
    match text {
        "up" => Some(ScrollDirection::Up),
        "down" => Some(ScrollDirection::Down),
        "left" => Some(ScrollDirection::Left),
        "right" => Some(ScrollDirection::Right),
        _ => None,
    }
}

fn parse_status(text: &str) -> Option<GuidanceStatus> {
    match text {
        "next_step" => Some(GuidanceStatus::NextStep),
        "clarification" => Some(GuidanceStatus::Clarification),
        "completed" => Some(GuidanceStatus::Completed),
        "needs_input" => Some(GuidanceStatus::NeedsInput),
        "blocked" => Some(GuidanceStatus::Blocked),
        "completion_candidate" => Some(GuidanceStatus::CompletionCandidate),
        _ => None,
    }
}

/// A JSON value parsed with duplicate object keys refused; serde_json already refuses `NaN`,
/// `Infinity` and trailing data.
struct UniqueKeyJson(Value);

impl<'de> Deserialize<'de> for UniqueKeyJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueKeyVisitor).map(Self)
    }
}

struct UniqueKeyVisitor;

impl<'de> Visitor<'de> for UniqueKeyVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON without duplicate keys")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(UniqueKeyJson(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(A::Error::custom("duplicate key"));
            }
            let UniqueKeyJson(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

fn strict_json(bytes: &[u8]) -> Option<Value> {
    serde_json::from_slice::<UniqueKeyJson>(bytes)
        .ok()
        .map(|v| v.0)
}

/// `null` or an empty list: inert metadata a server may add to the message.
fn null_or_empty(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Array(items)) => items.is_empty(),
        Some(_) => false,
    }
}

const MESSAGE_KEYS: [&str; 6] = [
    "role",
    "content",
    "refusal",
    "annotations",
    "tool_calls",
    "function_call",
];

const OUTPUT_KEYS: [&str; 7] = [
    "instruction",
    "status",
    "targetIndex",
    "value",
    "scrollDirection",
    "remainingWork",
    "plan",
];

/// The assistant's `content` from an envelope that passes every check; `None` otherwise.
fn envelope_content(response: &RawResponse, max_content: usize) -> Option<String> {
    if response.status != 200 {
        return None;
    }
    // The client asked for identity; anything else means the body is not the JSON we check.
    if response
        .content_encoding
        .as_deref()
        .is_some_and(|e| !e.trim().eq_ignore_ascii_case("identity"))
    {
        return None;
    }
    let Value::Object(mut envelope) = strict_json(&response.body)? else {
        return None;
    };
    let Value::Array(mut choices) = envelope.remove("choices")? else {
        return None;
    };
    let choice = choices.pop()?;
    if !choices.is_empty() {
        return None;
    }
    let Value::Object(mut choice) = choice else {
        return None;
    };
    if choice.get("finish_reason").and_then(Value::as_str) != Some("stop") {
        return None;
    }
    let Value::Object(mut message) = choice.remove("message")? else {
        return None;
    };
    let inert = message.keys().all(|k| MESSAGE_KEYS.contains(&k.as_str()))
        && message.get("role").and_then(Value::as_str) == Some("assistant")
        && message.get("refusal").is_none_or(Value::is_null)
        && message.get("function_call").is_none_or(Value::is_null)
        && null_or_empty(message.get("tool_calls"))
        && null_or_empty(message.get("annotations"));
    if !inert {
        return None;
    }
    let Value::String(content) = message.remove("content")? else {
        return None;
    };
    (content.len() <= max_content).then_some(content)
}

/// Whether text contains anything that reads as a link: `scheme://`, `www.`, `mailto:`,
/// `javascript:` or `data:`, in any case. A guide that cannot cite must not send the user off
/// to an address either.
pub(super) fn looks_like_url(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let scheme = lower.match_indices("://").any(|(at, _)| {
        lower[..at]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .any(|c| c.is_ascii_alphabetic())
    });
    scheme
        || ["www.", "mailto:", "javascript:", "data:"]
            .iter()
            .any(|p| lower.contains(p))
}

/// Model prose fit to show: not blank, no control characters but LF and TAB, nothing that
/// reads as a link.
pub(super) fn is_model_text(text: &str) -> bool {
    !text.trim().is_empty()
        && !text
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\t'))
        && !looks_like_url(text)
}

fn is_model_instruction(text: &str) -> bool {
    let length = text.chars().count();
    (1..=MAX_MODEL_INSTRUCTION_CHARS).contains(&length) && is_model_text(text)
}

/// An optional field that, when present and non-null, must be a string.
fn optional_string(output: &Map<String, Value>, key: &str) -> Option<Option<String>> {
    match output.get(key) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(text)) => Some(Some(text.clone())),
        Some(_) => None,
    }
}

/// Turns a model server's answer into a guidance result, or refuses it.
///
/// # Errors
/// [`ProviderError::InvalidResult`] for anything short of a fully valid answer; which check
/// failed is deliberately not said, and nothing from the answer is kept.
pub fn parse_response(
    response: &RawResponse,
    observation: &Observation,
    plan: bool,
) -> Result<GuidanceResult, ProviderError> {
    let max_content = if plan {
        MAX_PLAN_CONTENT_BYTES
    } else {
        MAX_CONTENT_BYTES
    };
    let content = envelope_content(response, max_content).ok_or(ProviderError::InvalidResult)?;
    let output = if plan {
        plan_output(&content, observation)
    } else {
        model_output(&content, observation)
    };
    output.ok_or(ProviderError::InvalidResult)
}

/// The model's JSON object, when it is one with known keys only.
fn output_object(content: &str) -> Option<Map<String, Value>> {
    let Value::Object(output) = strict_json(content.as_bytes())? else {
        return None;
    };
    output
        .keys()
        .all(|k| OUTPUT_KEYS.contains(&k.as_str()))
        .then_some(output)
}

/// Plan mode: a `next_step` with a plan and nothing pointed at from the root.
fn plan_output(content: &str, observation: &Observation) -> Option<GuidanceResult> {
    let output = output_object(content)?;
    let unset = |key| output.get(key).is_none_or(Value::is_null);
    if !(unset("targetIndex") && unset("value") && unset("scrollDirection")) {
        return None;
    }
    let instruction = output
        .get("instruction")
        .and_then(Value::as_str)
        .filter(|i| is_model_instruction(i))?;
    if parse_status(output.get("status").and_then(Value::as_str)?)? != GuidanceStatus::NextStep {
        return None;
    }
    let remaining_work = optional_string(&output, "remainingWork")?;
    if remaining_work
        .as_deref()
        .is_some_and(|w| w.chars().count() > MAX_REMAINING_WORK_CHARS)
    {
        return None;
    }
    let plan = parse_plan(output.get("plan").filter(|p| !p.is_null())?, observation)?;
    let result = GuidanceResult {
        instruction: instruction.to_owned(),
        status: GuidanceStatus::NextStep,
        target: None,
        citations: Vec::new(),
        mode: Mode::Model,
        remaining_work,
        plan: Some(plan),
    };
    // The same segment rules and binding the route applies.
    let bound = result
        .plan
        .as_ref()
        .is_some_and(|p| plan_matches_observation(p, observation));
    (result_is_valid(&result) && bound).then_some(result)
}

fn model_output(content: &str, observation: &Observation) -> Option<GuidanceResult> {
    let output = output_object(content)?;
    // A plan belongs to plan mode only.
    if !output.get("plan").is_none_or(Value::is_null) {
        return None;
    }
    let instruction = output
        .get("instruction")
        .and_then(Value::as_str)
        .filter(|i| is_model_instruction(i))?;
    let status = parse_status(output.get("status").and_then(Value::as_str)?)?;
    let target_index = match output.get("targetIndex") {
        None | Some(Value::Null) => None,
        // Only JSON integers count: `as_u64` is `None` for floats such as `1.0`, for negative
        // numbers, and booleans and strings are not numbers at all.
        Some(Value::Number(n)) => Some(n.as_u64().filter(|i| *i < MAX_ELEMENTS as u64)?),
        Some(_) => return None,
    };
    let value = optional_string(&output, "value")?;
    if value
        .as_deref()
        .is_some_and(|v| v.chars().count() > MAX_INPUT_VALUE_CHARS)
    {
        return None;
    }
    let scroll_direction = match optional_string(&output, "scrollDirection")? {
        None => None,
        Some(text) => Some(parse_scroll(&text)?),
    };
    let remaining_work = optional_string(&output, "remainingWork")?;
    if remaining_work
        .as_deref()
        .is_some_and(|w| w.chars().count() > MAX_REMAINING_WORK_CHARS)
    {
        return None;
    }

    let target = match target_index {
        None if value.is_some() || scroll_direction.is_some() => return None,
        None => None,
        Some(index) => {
            if status != GuidanceStatus::NextStep {
                return None;
            }
            let element = observation.elements.get(usize::try_from(index).ok()?)?;
            // The element's own facts, never the model's: it only chose which one.
            Some(Target {
                value,
                scroll_direction,
                value_hash: element.value_hash.clone(),
                is_selected: element.is_selected,
                ..Target::from_element(element)
            })
        }
    };
    let (status, instruction) = if status == GuidanceStatus::Completed {
        (
            GuidanceStatus::CompletionCandidate,
            format!("{COMPLETION_PREFIX}{instruction}"),
        )
    } else {
        (status, instruction.to_owned())
    };
    let result = GuidanceResult {
        instruction,
        status,
        target,
        citations: Vec::new(),
        mode: Mode::Model,
        remaining_work,
        plan: None,
    };
    // The same contract and target checks the route applies: confidence ≥ 0.8, value and
    // scroll direction consistent with the action, an acting element executable.
    let target_ok = result
        .target
        .as_ref()
        .is_none_or(|t| target_matches_observation(t, observation));
    (result_is_valid(&result) && target_ok).then_some(result)
}
