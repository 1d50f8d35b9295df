//! The JSON Schemas the tools publish, and the sentence a refused argument gets.
//!
//! The schemas are schemars' (JSON Schema 2020-12), shaped so that every client can fill
//! them in: an optional parameter has one JSON type (`["integer", "null"]` is what the MCP
//! Inspector and other form-filling clients cannot convert a value to) and is simply not
//! `required`; a default is stated with `default`. A refusal names the field and the rule
//! the schema states, in a sentence, and never quotes the value (it may be file content).

use std::sync::Arc;

use rmcp::model::JsonObject;
use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema};
use serde_json::{Value, json};

/// A tool's `inputSchema`: an object whose optional parameters have a single type.
pub(super) fn input<T: JsonSchema>() -> Result<Arc<JsonObject>, String> {
    let mut settings = SchemaSettings::draft2020_12();
    settings
        .transforms
        .push(Box::new(RecursiveTransform(single_type)));
    let mut object = root_object::<T>(settings)?;
    // A tool without parameters still lists none: some clients read `properties` unasked.
    object
        .entry("properties")
        .or_insert_with(|| Value::Object(JsonObject::new()));
    Ok(Arc::new(object))
}

/// A tool's `outputSchema`: what its `structuredContent` holds, as the reply serialises
/// (a nullable field stays nullable here: `stat` of a missing path has no size).
pub(super) fn output<T: JsonSchema>(withheld: &[&str]) -> Result<Arc<JsonObject>, String> {
    let mut settings = SchemaSettings::draft2020_12().for_serialize();
    settings
        .transforms
        .push(Box::new(RecursiveTransform(branch_per_type)));
    let mut object = root_object::<T>(settings)?;
    // Fields that travel elsewhere in the result (a screenshot's pixels, as image content).
    for field in withheld {
        if let Some(Value::Object(properties)) = object.get_mut("properties") {
            properties.remove(*field);
        }
        if let Some(Value::Array(required)) = object.get_mut("required") {
            required.retain(|name| name != *field);
        }
    }
    // What a cut answer adds (`budget.rs`): optional, as most answers are never cut.
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.insert(
            "note".to_owned(),
            json!({"type": "string", "description": "Said when the answer was cut to its budget: what was left out and how to go on."}),
        );
        properties.insert(
            "next_offset".to_owned(),
            json!({"type": "integer", "minimum": 0, "description": "Where a cut read or listing goes on: pass it as offset."}),
        );
        if !withheld.is_empty() {
            // An image's result: how a scaled image's pixels map back to the screen.
            properties.insert(
                super::results::SCALE_FIELD.to_owned(),
                json!({"type": "number", "description": "Physical screen pixels per image pixel, when the image was scaled down."}),
            );
        }
    }
    admit_failures(&mut object);
    Ok(Arc::new(object))
}

/// A failure's `structuredContent` (`results.rs`: `{code, message, details}`) fits the output
/// schema too: the TypeScript SDK's client checks it against `outputSchema` even when
/// `isError` is true, and without this turned every refusal into a -32602 error of its own that
/// hid the code and message. The answer's own required fields become one branch of an `anyOf`,
/// the failure's the other.
fn admit_failures(object: &mut JsonObject) {
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.insert(
            "code".to_owned(),
            json!({"type": "string", "description": "On a failure (isError): the connector's error code."}),
        );
        properties.insert(
            "message".to_owned(),
            json!({"type": "string", "description": "On a failure: what went wrong, in a sentence."}),
        );
        properties.insert(
            "details".to_owned(),
            json!({"anyOf": [{"type": "object"}, {"type": "null"}], "description": "On a failure: the code's structured detail, when it has one."}),
        );
    }
    let answer = object.remove("required").unwrap_or_else(|| json!([]));
    object.insert(
        "anyOf".to_owned(),
        json!([{"required": answer}, {"required": ["code", "message"]}]),
    );
}

/// The schema of `T` with its subschemas inline (a client that does not follow `$ref` still
/// sees every parameter), rooted at an object as MCP requires, without the type's own
/// title and description (the tool's are given beside it).
fn root_object<T: JsonSchema>(mut settings: SchemaSettings) -> Result<JsonObject, String> {
    settings.inline_subschemas = true;
    let schema = settings.into_generator().into_root_schema_for::<T>();
    match schema.to_value() {
        Value::Object(mut object) if object.get("type") == Some(&Value::from("object")) => {
            object.remove("title");
            object.remove("description");
            Ok(object)
        }
        other => Err(format!(
            "the schema of {} is no object: {other}",
            T::schema_name()
        )),
    }
}

/// `["integer", "null"]` → `"integer"`: an optional parameter is one that may be left out,
/// not one that takes `null` (which is still accepted, and means the same).
fn single_type(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|kind| kind != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            object.insert("type".to_owned(), only);
        }
    }
}

/// `{"type": ["integer", "null"], "minimum": 0}` → `{"anyOf": [{"type": "integer",
/// "minimum": 0}, {"type": "null"}]}`: a nullable answer field with one type per branch,
/// which clients that map schemas onto a single-type dialect can read (the MCP Inspector
/// reports a type array as unportable).
fn branch_per_type(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if !object.get("type").is_some_and(Value::is_array) {
        return;
    }
    let Some(Value::Array(types)) = object.remove("type") else {
        return;
    };
    let branches = types
        .into_iter()
        .map(|kind| {
            let mut branch = JsonObject::new();
            let nullable = kind == "null";
            branch.insert("type".to_owned(), kind);
            if !nullable {
                // The type's own keywords go with its branch; the rest (description) stay.
                for keyword in TYPED_KEYWORDS {
                    if let Some(value) = object.remove(*keyword) {
                        branch.insert((*keyword).to_owned(), value);
                    }
                }
            }
            Value::Object(branch)
        })
        .collect();
    object.insert("anyOf".to_owned(), Value::Array(branches));
}

/// The keywords that constrain one type's values, moved into that type's branch.
const TYPED_KEYWORDS: &[&str] = &[
    "format",
    "minimum",
    "maximum",
    "items",
    "minItems",
    "maxItems",
    "properties",
    "required",
    "additionalProperties",
    "enum",
];

/// What went wrong with a tool's arguments, for the sentence.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fault<'a> {
    /// A required field was left out.
    Missing(&'a str),
    /// A field the tool does not take.
    Unknown(&'a str),
    /// A field whose value does not fit its rule.
    Unfit(&'a str),
    /// The arguments as a whole (not an object).
    Whole,
}

impl<'a> Fault<'a> {
    /// Reads serde's error: its wording for missing and unknown fields is fixed ("missing
    /// field `x`", "unknown field `x`, expected ..."); any other error is the value at `path`.
    pub(super) fn of(message: &'a str, path: Option<&'a str>) -> Self {
        let quoted = |prefix: &str| {
            message
                .strip_prefix(prefix)
                .and_then(|rest| rest.split('`').next())
        };
        if let Some(field) = quoted("missing field `") {
            Self::Missing(field)
        } else if let Some(field) = quoted("unknown field `") {
            Self::Unknown(field)
        } else {
            path.map_or(Self::Whole, Self::Unfit)
        }
    }

    /// The sentence: the field and the rule, from the tool's input schema.
    pub(super) fn sentence(&self, tool: &str, schema: &JsonObject) -> String {
        let properties = schema.get("properties").and_then(Value::as_object);
        match self {
            Self::Missing(field) => format!("`{field}` is required; see {tool}'s inputSchema"),
            Self::Unknown(field) => {
                let names: Vec<&str> = properties
                    .into_iter()
                    .flat_map(|properties| properties.keys().map(String::as_str))
                    .collect();
                let shown: String = field.chars().take(64).collect();
                format!(
                    "`{shown}` is not a parameter of {tool}, which takes {}",
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                )
            }
            Self::Unfit(field) => match properties.and_then(|properties| properties.get(*field)) {
                Some(property) => format!("`{field}` must be {}", rule(property)),
                None => format!("`{field}` does not fit {tool}'s inputSchema"),
            },
            Self::Whole => format!("the arguments of {tool} must be an object"),
        }
    }
}

/// The rule a schema states, as the end of "`x` must be ...".
fn rule(schema: &Value) -> String {
    noun(schema, false)
}

/// A value of `schema` in words: "a non-negative integer", or plural ("non-negative
/// integers") for the items of a list.
fn noun(schema: &Value, plural: bool) -> String {
    let pick = |one: &str, many: &str| if plural { many } else { one }.to_owned();
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let words: Vec<String> = values.iter().map(Value::to_string).collect();
        return format!("{} {}", pick("one of", "each one of"), words.join(", "));
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("boolean") => pick("true or false", "true or false values"),
        Some("integer") => integer(schema, plural),
        Some("number") => pick("a number", "numbers"),
        Some("string") => pick("a string", "strings"),
        Some("array") => {
            let items = schema
                .get("items")
                .map_or_else(|| "values".to_owned(), |items| noun(items, true));
            let count = |key| schema.get(key).and_then(Value::as_u64);
            let list = match (count("minItems"), count("maxItems")) {
                (Some(min), Some(max)) if min == max => format!("{min} {items}"),
                (Some(min), _) if min > 0 => format!("at least {min} {items}"),
                _ => items,
            };
            format!("{} {list}", pick("a list of", "lists of"))
        }
        Some("object") => {
            let values = schema
                .get("additionalProperties")
                .filter(|values| values.is_object())
                .map_or_else(|| "values".to_owned(), |values| noun(values, true));
            format!("{} {values}", pick("an object of", "objects of"))
        }
        _ => pick(
            "a value of the type its schema states",
            "values of their schema's type",
        ),
    }
}

/// An integer's range in words; a bound at a machine type's edge (`u32`, `i32`) is no rule
/// a person needs, so only small bounds are said.
fn integer(schema: &Value, plural: bool) -> String {
    const EDGE: i64 = 2_147_483_647;
    let bound = |key| {
        schema
            .get(key)
            .and_then(Value::as_i64)
            .filter(|bound| bound.abs() < EDGE)
    };
    let text = match (bound("minimum"), bound("maximum")) {
        (Some(min), Some(max)) => format!("integer from {min} to {max}"),
        (Some(0), None) => "non-negative integer".to_owned(),
        (Some(1), None) => "positive integer".to_owned(),
        (Some(min), None) => format!("integer of at least {min}"),
        (None, Some(max)) => format!("integer of at most {max}"),
        (None, None) => "integer".to_owned(),
    };
    if plural {
        format!("{text}s")
    } else if text.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {text}")
    } else {
        format!("a {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Probe {
        path: String,
        offset: Option<u64>,
        quality: Option<u8>,
        create_parents: Option<bool>,
        region: Option<[i64; 4]>,
        env: Option<std::collections::BTreeMap<String, String>>,
        #[schemars(range(min = 1, max = 500))]
        max_elements: Option<u32>,
        monitor: Option<i32>,
    }

    #[derive(serde::Serialize, JsonSchema)]
    #[allow(dead_code)]
    struct Answer {
        size_bytes: Option<u64>,
        name: String,
    }

    #[test]
    fn a_nullable_answer_field_has_one_type_per_branch() {
        let schema = output::<Answer>(&[]).unwrap();
        assert_eq!(schema["properties"]["name"]["type"], "string");
        assert_eq!(
            schema["properties"]["size_bytes"]["anyOf"],
            json!([{"type": "integer", "format": "uint64", "minimum": 0}, {"type": "null"}])
        );
    }

    #[test]
    fn optional_parameters_have_one_type_and_are_not_required() {
        let schema = input::<Probe>().unwrap();
        assert_eq!(schema["required"], json!(["path"]));
        assert_eq!(schema["properties"]["offset"]["type"], "integer");
        assert_eq!(schema["properties"]["create_parents"]["type"], "boolean");
        assert_eq!(schema["properties"]["region"]["type"], "array");
        assert_eq!(schema["properties"]["env"]["type"], "object");
        assert!(
            !Value::Object((*schema).clone())
                .to_string()
                .contains("null")
        );
    }

    fn refused(arguments: Value) -> String {
        let schema = input::<Probe>().unwrap();
        let err = serde_path_to_error::deserialize::<_, Probe>(arguments)
            .err()
            .unwrap();
        let path = match err.path().iter().next() {
            Some(serde_path_to_error::Segment::Map { key }) => Some(key.clone()),
            _ => None,
        };
        let message = err.inner().to_string();
        Fault::of(&message, path.as_deref()).sentence("probe", &schema)
    }

    #[test]
    fn a_refusal_names_the_field_and_its_rule_and_never_the_value() {
        assert_eq!(
            refused(json!({})),
            "`path` is required; see probe's inputSchema"
        );
        let cases = [
            (
                json!({"path": "a", "offset": "secret"}),
                "`offset` must be a non-negative integer",
            ),
            (
                json!({"path": "a", "offset": -1}),
                "`offset` must be a non-negative integer",
            ),
            (
                json!({"path": "a", "quality": 300}),
                "`quality` must be an integer from 0 to 255",
            ),
            (
                json!({"path": "a", "create_parents": "yes"}),
                "`create_parents` must be true or false",
            ),
            (
                json!({"path": "a", "region": [1, 2]}),
                "`region` must be a list of 4 integers",
            ),
            (
                json!({"path": "a", "env": {"A": 1}}),
                "`env` must be an object of strings",
            ),
            (
                json!({"path": "a", "max_elements": "many"}),
                "`max_elements` must be an integer from 1 to 500",
            ),
            (
                json!({"path": "a", "monitor": 1.5}),
                "`monitor` must be an integer",
            ),
            (json!({"path": 7}), "`path` must be a string"),
        ];
        for (arguments, sentence) in cases {
            assert_eq!(refused(arguments), sentence);
        }
        let unknown = refused(json!({"path": "a", "secret": "x"}));
        assert!(
            unknown.starts_with("`secret` is not a parameter of probe, which takes ")
                && unknown.contains("path")
                && unknown.contains("max_elements"),
            "{unknown}"
        );
        assert_eq!(
            refused(json!([1])),
            "the arguments of probe must be an object"
        );
    }
}
