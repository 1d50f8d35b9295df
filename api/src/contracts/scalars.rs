//! Constrained scalars of the request contracts: each checks its rule while deserialising and
//! declares the same rule in the OpenAPI schema, so the rule lives in one place.
//!
//! Deserialisation errors carry only a pydantic-style error type (`string_too_long`, ...),
//! never the input value.

use serde::{Deserialize, Deserializer, de::Error as _};
use utoipa::{
    PartialSchema, ToSchema,
    openapi::{
        RefOr, Schema,
        schema::{ArrayBuilder, ObjectBuilder, SchemaFormat, Type},
    },
};

use local_core::limits;

fn is_identifier(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

fn is_value_hash(text: &str) -> bool {
    local_core::guide::guidance::validate::is_value_hash(text)
}

fn is_task_id(text: &str) -> bool {
    local_core::guide::guidance::plan::is_task_id(text)
}

/// Declares a string newtype with a length range in characters and an optional pattern.
macro_rules! bounded_string {
    ($(#[$doc:meta])* $name:ident, $min:expr, $max:expr $(, $pattern:literal, $check:path)?) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(pub String);

        impl<'de> Deserialize<'de> for $name {
            #[allow(unused_comparisons, reason = "some strings may be empty")]
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                // Most text is ASCII, whose length is its count of characters.
                let n = if text.is_ascii() { text.len() } else { text.chars().count() };
                if n < $min {
                    return Err(D::Error::custom("string_too_short"));
                }
                if n > $max {
                    return Err(D::Error::custom("string_too_long"));
                }
                $(if !$check(&text) {
                    return Err(D::Error::custom("string_pattern_mismatch"));
                })?
                Ok(Self(text))
            }
        }

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                let pattern: Option<&str> = None $(.or(Some($pattern)))?;
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some($min))
                    .max_length(Some($max))
                    .pattern(pattern)
                    .into()
            }
        }

        impl ToSchema for $name {}
    };
}

bounded_string!(
    /// 1–128 characters of letters, digits, `_`, `.`, `:` or `-`.
    Identifier, 1, limits::MAX_IDENTIFIER_CHARS, "^[A-Za-z0-9_.:-]+$", is_identifier
);
bounded_string!(
    /// The user's request: 1–4000 characters.
    Prompt, 1, limits::MAX_PROMPT_CHARS
);
bounded_string!(
    /// Screen text: at most 16000 characters, may be empty.
    Text, 0, limits::MAX_TEXT_CHARS
);
bounded_string!(
    /// A label or title: 1–256 characters.
    Label, 1, limits::MAX_LABEL_CHARS
);
bounded_string!(
    /// A UI Automation role: 1–64 characters.
    Role, 1, limits::MAX_ROLE_CHARS
);
bounded_string!(
    /// Free element metadata: at most 256 characters, may be empty.
    ShortText, 0, limits::MAX_HELP_TEXT_CHARS
);
bounded_string!(
    /// An element's item status: at most 128 characters.
    ItemStatus, 0, limits::MAX_ITEM_STATUS_CHARS
);
bounded_string!(
    /// A SHA-256 value digest in lower-case hex.
    ValueHash, 64, 64, "^[a-f0-9]{64}$", is_value_hash
);
bounded_string!(
    /// An evidence id: 1–128 characters of letters, digits, `_`, `.`, `:` or `-` (a JSON string).
    EvidenceId, 1, limits::MAX_IDENTIFIER_CHARS, "^[A-Za-z0-9_.:-]+$", is_identifier
);
bounded_string!(
    /// A mock tool name: 1–64 characters.
    ToolName, 1, limits::MAX_TOOL_CHARS
);
bounded_string!(
    /// A grant token as confirm issued it: 1–256 characters.
    GrantToken, 1, limits::MAX_GRANT_TOKEN_CHARS
);
bounded_string!(
    /// An image reference of an assist context: at most 2048 characters.
    ImageRef, 0, limits::MAX_IMAGE_REF_CHARS
);
bounded_string!(
    /// A task or plan id: a lower-case hyphenated UUID (`8-4-4-4-12` hex).
    TaskId, 36, 36,
    "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", is_task_id
);
bounded_string!(
    /// What is left of a task, or what its user typed: at most 1000 characters, may be empty.
    #[derive(Default)]
    TaskNote, 0, limits::MAX_USER_INPUT_CHARS
);
bounded_string!(
    /// Why the client asks for a new plan: at most 500 characters, may be empty.
    ReplanReason, 0, limits::MAX_PLAN_TEXT_CHARS
);
bounded_string!(
    /// A plan step's instruction or a boundary's reason: 1–500 characters, not blank.
    PlanText, 1, limits::MAX_PLAN_TEXT_CHARS
);
bounded_string!(
    /// What a plan boundary needs to go on: at most 1000 characters; not blank unless the
    /// boundary is `completion_candidate`.
    BoundaryNeeded, 0, limits::MAX_BOUNDARY_NEEDED_CHARS
);
bounded_string!(
    /// A value a plan step types: at most 1000 characters.
    InputValue, 0, limits::MAX_INPUT_VALUE_CHARS
);
bounded_string!(
    /// Raw canonical base64 of a PNG (no `data:` prefix): 1–2,666,668 characters.
    ImageBase64, 1, local_core::guide::png_sanitise::MAX_BASE64_CHARS
);

/// Declares an integer newtype with an inclusive range; floats, strings and booleans are refused.
macro_rules! bounded_int {
    ($(#[$doc:meta])* $name:ident, $inner:ty, $min:expr, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub $inner);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = i64::deserialize(deserializer)?;
                if value < $min {
                    return Err(D::Error::custom("greater_than_equal"));
                }
                if value > $max {
                    return Err(D::Error::custom("less_than_equal"));
                }
                <$inner>::try_from(value).map(Self).map_err(|_| D::Error::custom("less_than_equal"))
            }
        }

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .format(Some(SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Int64)))
                    .minimum(Some::<i64>($min))
                    .maximum(Some::<i64>($max))
                    .into()
            }
        }

        impl ToSchema for $name {}
    };
}

bounded_int!(
    /// A process id: 1–4294967295.
    ProcessId, u32, 1, 4_294_967_295
);
bounded_int!(
    /// A declared window side in pixels: 1–16384.
    Side, u32, 1, 16_384
);
bounded_int!(
    /// The length of a field's current value: 0–1000.
    ValueLength, u32, 0, 1000
);
bounded_int!(
    /// A task's step number: 1–10000.
    StepNumber, u32, 1, 10_000
);
bounded_int!(
    /// How many of the plan's steps are done: 0–32, at most the plan's step count.
    #[derive(Default)]
    PlanCursor, u32, 0, 32
);
bounded_int!(
    /// Frames the local camera verifier saw: 2–120.
    FramesObserved, u32, 2, 120
);

/// The boolean `true` and nothing else: `false` is a `value_error`, any non-boolean `bool_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnlyTrue;

impl<'de> Deserialize<'de> for OnlyTrue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if bool::deserialize(deserializer)? {
            Ok(Self)
        } else {
            Err(D::Error::custom("value_error"))
        }
    }
}

impl PartialSchema for OnlyTrue {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Boolean)
            .enum_values(Some([true]))
            .into()
    }
}

impl ToSchema for OnlyTrue {}

/// Declares a finite float newtype with an inclusive range; integers are accepted, booleans and
/// strings are not.
macro_rules! bounded_float {
    ($(#[$doc:meta])* $name:ident, $min:expr, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $name(pub f64);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = f64::deserialize(deserializer)?;
                if !value.is_finite() {
                    return Err(D::Error::custom("finite_number"));
                }
                if value < $min {
                    return Err(D::Error::custom("greater_than_equal"));
                }
                if value > $max {
                    return Err(D::Error::custom("less_than_equal"));
                }
                Ok(Self(value))
            }
        }

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                ObjectBuilder::new()
                    .schema_type(Type::Number)
                    .format(Some(SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Double)))
                    .minimum(Some($min))
                    .maximum(Some($max))
                    .into()
            }
        }

        impl ToSchema for $name {}
    };
}

bounded_float!(
    /// A fraction of the window, or a confidence: 0–1.
    Unit, 0.0, 1.0
);
bounded_float!(
    /// A scroll position in percent, or -1 when the element cannot scroll that way.
    ScrollPercent, -1.0, 100.0
);

/// Declares a list newtype with at most `$max` entries.
macro_rules! bounded_list {
    ($(#[$doc:meta])* $name:ident, $item:ty, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default)]
        pub struct $name(pub Vec<$item>);

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let items = <Vec<$item> as ::serde::Deserialize>::deserialize(deserializer)?;
                if items.len() > $max {
                    return Err(<D::Error as ::serde::de::Error>::custom("too_long"));
                }
                Ok(Self(items))
            }
        }

        impl ::utoipa::PartialSchema for $name {
            fn schema() -> ::utoipa::openapi::RefOr<::utoipa::openapi::Schema> {
                ::utoipa::openapi::schema::ArrayBuilder::new()
                    .items(::utoipa::openapi::RefOr::Ref(::utoipa::openapi::Ref::from_schema_name(<$item as ::utoipa::ToSchema>::name())))
                    .max_items(Some($max))
                    .into()
            }
        }

        impl ::utoipa::ToSchema for $name {
            fn schemas(schemas: &mut Vec<(String, ::utoipa::openapi::RefOr<::utoipa::openapi::Schema>)>) {
                schemas.push((<$item as ::utoipa::ToSchema>::name().into_owned(), <$item as ::utoipa::PartialSchema>::schema()));
                <$item as ::utoipa::ToSchema>::schemas(schemas);
            }
        }
    };
}

pub(crate) use bounded_list;

/// A normalised box `[x, y, width, height]`: four units, non-empty, entirely inside the window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxIn(pub local_core::guide::guidance::model::Bounds);

impl<'de> Deserialize<'de> for BoxIn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let values = Vec::<Unit>::deserialize(deserializer)?;
        let [x, y, width, height] = values[..] else {
            return Err(D::Error::custom(if values.len() < 4 {
                "too_short"
            } else {
                "too_long"
            }));
        };
        let bounds = local_core::guide::guidance::model::Bounds {
            x: x.0,
            y: y.0,
            width: width.0,
            height: height.0,
        };
        if !bounds.is_inside_unit_square() {
            return Err(D::Error::custom("value_error"));
        }
        Ok(Self(bounds))
    }
}

impl PartialSchema for BoxIn {
    fn schema() -> RefOr<Schema> {
        ArrayBuilder::new()
            .items(Unit::schema())
            .min_items(Some(4))
            .max_items(Some(4))
            .description(Some(
                "[x, y, width, height], normalised; non-empty and entirely inside [0, 1]",
            ))
            .into()
    }
}

impl ToSchema for BoxIn {
    fn name() -> std::borrow::Cow<'static, str> {
        "Box".into()
    }
}

/// A timestamp with an explicit UTC offset (`Z` or `±HH:MM`); naive timestamps are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp(pub time::OffsetDateTime);

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        local_core::clock::parse_aware(&text)
            .map(Self)
            .ok_or_else(|| D::Error::custom("value_error"))
    }
}

impl PartialSchema for Timestamp {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::DateTime,
            )))
            .into()
    }
}

impl ToSchema for Timestamp {}

#[cfg(test)]
mod tests {
    use super::*;

    fn err<T: for<'de> Deserialize<'de> + std::fmt::Debug>(json: &str) -> String {
        let e = serde_json::from_str::<T>(json).unwrap_err().to_string();
        e.split(" at line").next().unwrap().to_owned()
    }

    #[test]
    fn strings_check_length_and_pattern_without_echo() {
        assert_eq!(err::<Identifier>(r#""a b""#), "string_pattern_mismatch");
        assert_eq!(err::<Identifier>(r#""""#), "string_too_short");
        assert!(serde_json::from_str::<Identifier>(&format!(r#""{}""#, "a".repeat(128))).is_ok());
        assert_eq!(
            err::<Identifier>(&format!(r#""{}""#, "a".repeat(129))),
            "string_too_long"
        );
        assert!(err::<Prompt>("5").starts_with("invalid type"));
    }

    #[test]
    fn task_scalars_at_their_edges() {
        let id = "0b8e6f0e-4c1a-4f3e-9a57-2d9c7e1f3a10";
        assert!(serde_json::from_str::<TaskId>(&format!(r#""{id}""#)).is_ok());
        assert_eq!(
            err::<TaskId>(&format!(r#""{}""#, id.to_uppercase())),
            "string_pattern_mismatch"
        );
        assert_eq!(err::<TaskId>(&format!(r#""{id}0""#)), "string_too_long");
        assert!(err::<TaskId>("1").starts_with("invalid type"));
        assert!(serde_json::from_str::<StepNumber>("1").is_ok());
        assert!(serde_json::from_str::<StepNumber>("10000").is_ok());
        assert_eq!(err::<StepNumber>("0"), "greater_than_equal");
        assert_eq!(err::<StepNumber>("10001"), "less_than_equal");
        assert!(err::<StepNumber>("1.0").starts_with("invalid type"));
        assert!(err::<StepNumber>("true").starts_with("invalid type"));
        assert!(serde_json::from_str::<PlanCursor>("32").is_ok());
        assert_eq!(err::<PlanCursor>("33"), "less_than_equal");
        assert_eq!(err::<PlanCursor>("-1"), "greater_than_equal");
        let text = |n: usize| format!(r#""{}""#, "x".repeat(n));
        assert!(serde_json::from_str::<TaskNote>(&text(1000)).is_ok());
        assert_eq!(err::<TaskNote>(&text(1001)), "string_too_long");
        assert!(serde_json::from_str::<ReplanReason>(&text(500)).is_ok());
        assert_eq!(err::<ReplanReason>(&text(501)), "string_too_long");
        assert!(serde_json::from_str::<PlanText>(&text(500)).is_ok());
        assert_eq!(err::<PlanText>(&text(501)), "string_too_long");
        assert_eq!(err::<PlanText>(&text(0)), "string_too_short");
        assert!(serde_json::from_str::<BoundaryNeeded>(&text(1000)).is_ok());
        assert_eq!(err::<BoundaryNeeded>(&text(1001)), "string_too_long");
        assert!(serde_json::from_str::<InputValue>(&text(1000)).is_ok());
        assert_eq!(err::<InputValue>(&text(1001)), "string_too_long");
    }

    #[test]
    fn numbers_are_strict() {
        assert!(serde_json::from_str::<Side>("16384").is_ok());
        assert_eq!(err::<Side>("16385"), "less_than_equal");
        assert_eq!(err::<Side>("0"), "greater_than_equal");
        assert!(err::<Side>("10.0").starts_with("invalid type"));
        assert!(err::<Side>("true").starts_with("invalid type"));
        assert!(serde_json::from_str::<Unit>("1").is_ok());
        assert!(err::<Unit>("true").starts_with("invalid type"));
        assert!(err::<Unit>(r#""0.5""#).starts_with("invalid type"));
        assert_eq!(err::<Unit>("1.0000001"), "less_than_equal");
    }

    #[test]
    fn camera_scalars_at_their_edges() {
        assert!(serde_json::from_str::<FramesObserved>("2").is_ok());
        assert!(serde_json::from_str::<FramesObserved>("120").is_ok());
        assert_eq!(err::<FramesObserved>("1"), "greater_than_equal");
        assert_eq!(err::<FramesObserved>("121"), "less_than_equal");
        assert!(err::<FramesObserved>("2.0").starts_with("invalid type"));
        assert!(err::<FramesObserved>("true").starts_with("invalid type"));
        assert!(serde_json::from_str::<OnlyTrue>("true").is_ok());
        assert_eq!(err::<OnlyTrue>("false"), "value_error");
        assert!(err::<OnlyTrue>(r#""true""#).starts_with("invalid type"));
        assert!(err::<OnlyTrue>("1").starts_with("invalid type"));
        assert!(serde_json::from_str::<EvidenceId>(&format!(r#""{}""#, "e".repeat(128))).is_ok());
        assert_eq!(
            err::<EvidenceId>(&format!(r#""{}""#, "e".repeat(129))),
            "string_too_long"
        );
        assert_eq!(err::<EvidenceId>(r#""a/b""#), "string_pattern_mismatch");
        assert!(err::<EvidenceId>("7").starts_with("invalid type"));
    }

    #[test]
    fn boxes() {
        assert!(serde_json::from_str::<BoxIn>("[0,0,1,1]").is_ok());
        assert!(serde_json::from_str::<BoxIn>("[0.8,0.8,0.2,0.2]").is_ok());
        assert_eq!(err::<BoxIn>("[0.9,0,0.2,1]"), "value_error");
        assert_eq!(err::<BoxIn>("[0,0,0,1]"), "value_error");
        assert_eq!(err::<BoxIn>("[0,0,1]"), "too_short");
        assert_eq!(err::<BoxIn>("[-0.1,0,0.5,0.5]"), "greater_than_equal");
    }
}
