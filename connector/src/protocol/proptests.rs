//! Generated-input properties of [`parse_frame`] and [`Parsed::error_reply`]: arbitrary
//! bytes, arbitrary JSON, and mutations of every spec example never panic, always answer a
//! broken platform request by its id with a known code, never let another major through,
//! ignore unknown fields, and never quote a generated string in an ERROR.
//!
//! Case counts are fixed per property and the seed is fixed (reproducible runs, no flakes);
//! `PROPTEST_CASES` and `PROPTEST_RNG_SEED` override both (docs/security.md has the long run).
//! Failures are not persisted to files: each one found becomes an example test instead.

use std::sync::LazyLock;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::RngSeed;
use serde_json::{Map, Number, Value};

use super::spec_examples::{PROSE_EXAMPLES, SPEC_EXAMPLES, strip_comments};
use super::{
    Direction, Message, MessageType, OrUnknown, PROTOCOL_VERSION, Parsed, ProtocolVersion,
    parse_frame,
};

/// Planted in every generated string value; no ERROR reply may ever carry it.
const MARKER: &str = "PLANTED-q7Zx";
/// The default run's seed: the same cases every run, so a failure reproduces as is.
const SEED: u64 = 0x5EED_F4A3_0016;

/// `default_cases` cases from the fixed seed, unless the environment asks for others.
fn config(default_cases: u32) -> ProptestConfig {
    // `default()` is what reads PROPTEST_CASES and PROPTEST_RNG_SEED.
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = default_cases;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(SEED);
    }
    config.failure_persistence = None;
    config
}

/// Every spec and prose example as a JSON value, parsed once for all cases.
static EXAMPLES: LazyLock<Vec<Value>> = LazyLock::new(|| {
    SPEC_EXAMPLES
        .iter()
        .chain(PROSE_EXAMPLES)
        .map(|text| serde_json::from_str(&strip_comments(text)).unwrap())
        .collect()
});

/// The examples whose type the platform sends.
static REQUEST_EXAMPLES: LazyLock<Vec<Value>> = LazyLock::new(|| {
    EXAMPLES
        .iter()
        .filter(|frame| {
            frame["type"]
                .as_str()
                .and_then(MessageType::from_wire)
                .is_some_and(|t| t.direction() == Direction::PlatformToShim)
        })
        .cloned()
        .collect()
});

fn marked_string() -> impl Strategy<Value = String> {
    ".{0,10}".prop_map(|s| format!("{s}{MARKER}"))
}

/// Field names of the envelope and of many payloads, so generated objects hit real fields.
const FIELD_NAMES: &[&str] = &[
    "type",
    "id",
    "ts",
    "version",
    "payload",
    "pending_capacity",
    "path",
    "content",
    "encoding",
    "format",
    "offset",
    "length",
    "command",
    "argv",
    "cwd",
    "timeout",
    "session_id",
    "browse_id",
    "directory_ref",
    "cursor",
    "action",
    "x",
    "y",
    "text",
    "keys",
    "window_id",
    "recording_id",
    "protocol_version",
    "granted_capabilities",
    "code",
    "message",
    "details",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(FIELD_NAMES).prop_map(str::to_owned),
        "[a-z_]{1,8}",
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..300).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
    ]
}

/// Arbitrary JSON whose every string value carries [`MARKER`].
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        marked_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((key(), inner), 0..4)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

fn type_name() -> impl Strategy<Value = Value> {
    let wire: Vec<&'static str> = MessageType::ALL.iter().map(|t| t.as_str()).collect();
    prop_oneof![
        4 => proptest::sample::select(wire).prop_map(Value::from),
        1 => "[A-Z_]{0,20}".prop_map(Value::from),
        1 => json_value(),
    ]
}

fn version() -> impl Strategy<Value = Value> {
    prop_oneof![
        proptest::sample::select(vec![
            "1.0", "1.1", "1.9", "2.0", "2.1", "0.9", "0.1", "10.0"
        ])
        .prop_map(Value::from),
        "[0-9]{1,2}\\.[0-9]{1,3}".prop_map(Value::from),
        ".{0,6}".prop_map(Value::from),
        json_value(),
    ]
}

fn id() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => "[a-z0-9-]{0,12}".prop_map(Value::from),
        1 => json_value(),
    ]
}

/// One change to a frame. Indexes pick a container (object or array) of the frame in
/// pre-order, then a child of it.
#[derive(Debug, Clone)]
enum Mutation {
    Delete(Index, Index),
    Replace(Index, Index, Value),
    Add(Index, String, Value),
    SetType(Value),
    SetId(Value),
    SetVersion(Value),
    DropEnvelopeField(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), any::<Index>()).prop_map(|(c, f)| Mutation::Delete(c, f)),
        4 => (any::<Index>(), any::<Index>(), json_value())
            .prop_map(|(c, f, v)| Mutation::Replace(c, f, v)),
        3 => (any::<Index>(), key(), json_value()).prop_map(|(c, k, v)| Mutation::Add(c, k, v)),
        2 => type_name().prop_map(Mutation::SetType),
        1 => id().prop_map(Mutation::SetId),
        2 => version().prop_map(Mutation::SetVersion),
        1 => any::<Index>().prop_map(Mutation::DropEnvelopeField),
    ]
}

/// JSON pointers of every object and array in `value`, itself first.
fn containers(value: &Value, at: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            out.push(at.to_owned());
            for (key, child) in map {
                let key = key.replace('~', "~0").replace('/', "~1");
                containers(child, &format!("{at}/{key}"), out);
            }
        }
        Value::Array(items) => {
            out.push(at.to_owned());
            for (i, child) in items.iter().enumerate() {
                containers(child, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn pick_container<'v>(frame: &'v mut Value, which: &Index) -> &'v mut Value {
    let mut all = Vec::new();
    containers(frame, "", &mut all);
    let pointer = which.get(&all).clone();
    frame.pointer_mut(&pointer).unwrap()
}

fn apply(frame: &mut Value, mutation: Mutation) {
    match mutation {
        Mutation::Delete(container, field) => match pick_container(frame, &container) {
            Value::Object(map) if !map.is_empty() => {
                let key = field.get(&map.keys().cloned().collect::<Vec<_>>()).clone();
                map.remove(&key);
            }
            Value::Array(items) if !items.is_empty() => {
                items.remove(field.index(items.len()));
            }
            _ => {}
        },
        Mutation::Replace(container, field, value) => match pick_container(frame, &container) {
            Value::Object(map) if !map.is_empty() => {
                let key = field.get(&map.keys().cloned().collect::<Vec<_>>()).clone();
                map.insert(key, value);
            }
            Value::Array(items) if !items.is_empty() => {
                let at = field.index(items.len());
                items[at] = value;
            }
            _ => {}
        },
        Mutation::Add(container, key, value) => match pick_container(frame, &container) {
            Value::Object(map) => {
                map.insert(key, value);
            }
            Value::Array(items) => items.push(value),
            _ => {}
        },
        Mutation::SetType(value) => set(frame, "type", value),
        Mutation::SetId(value) => set(frame, "id", value),
        Mutation::SetVersion(value) => set(frame, "version", value),
        Mutation::DropEnvelopeField(which) => {
            if let Value::Object(map) = frame {
                let field = which.get(&["type", "id", "ts", "version", "payload"]);
                map.remove(*field);
            }
        }
    }
}

fn set(frame: &mut Value, field: &str, value: Value) {
    if let Value::Object(map) = frame {
        map.insert(field.to_owned(), value);
    }
}

/// The properties every parse must keep; `frame` is the JSON the text was, if it was JSON.
fn check(parsed: &Parsed, frame: Option<&Value>) -> Result<(), TestCaseError> {
    let reply = parsed.error_reply(2.0, 1);
    if let Some(reply) = &reply {
        let Message::Error(error) = &reply.message else {
            return Err(TestCaseError::fail(format!(
                "reply is not ERROR: {reply:?}"
            )));
        };
        prop_assert!(
            matches!(error.code, OrUnknown::Known(_)),
            "unknown code {:?}",
            error.code
        );
        // The id is echoed by design, and so is an unknown `type` (docs/protocol.md);
        // nothing else of the frame may be.
        let mut json: Value = serde_json::from_str(&reply.to_json().unwrap()).unwrap();
        json.as_object_mut().unwrap().remove("id");
        let mut text = json.to_string();
        if let Some(kind) = frame.and_then(|f| f.get("type")).and_then(Value::as_str)
            && !kind.is_empty()
        {
            // As the reply's JSON spells it (escapes included), without the quotes.
            let spelled = serde_json::to_string(kind).unwrap();
            text = text.replace(&spelled[1..spelled.len() - 1], "");
        }
        prop_assert!(!text.contains(MARKER), "reply quotes the frame: {text}");
        let frame_id = frame.and_then(|f| f.get("id")).and_then(Value::as_str);
        prop_assert_eq!(Some(reply.id.as_str()), frame_id);
    }
    let Some(Value::Object(frame)) = frame else {
        prop_assert!(reply.is_none(), "a reply without an id to echo");
        return Ok(());
    };
    if !frame.get("id").is_some_and(Value::is_string) {
        prop_assert!(reply.is_none(), "a reply without an id to echo");
        return Ok(());
    }
    let type_name = frame.get("type").and_then(Value::as_str);
    let handshake = matches!(type_name, Some("HELLO" | "HELLO_ACK"));
    let other_major = frame
        .get("version")
        .and_then(Value::as_str)
        .and_then(|v| ProtocolVersion::parse(v).ok())
        .is_some_and(|v| v.major != PROTOCOL_VERSION.major);
    if other_major && !handshake {
        prop_assert!(
            !matches!(parsed, Parsed::Message(_)),
            "another major became a message: {parsed:?}"
        );
        return Ok(());
    }
    let request = type_name
        .and_then(MessageType::from_wire)
        .is_some_and(|t| t.direction() == Direction::PlatformToShim);
    if request {
        prop_assert!(
            matches!(parsed, Parsed::Message(_)) || reply.is_some(),
            "a broken request goes unanswered: {parsed:?}"
        );
    }
    Ok(())
}

fn check_value(frame: &Value) -> Result<(), TestCaseError> {
    check(&parse_frame(&frame.to_string()), Some(frame))
}

/// An envelope of generated fields around an arbitrary payload.
fn envelope() -> impl Strategy<Value = Value> {
    (
        type_name(),
        id(),
        prop_oneof![number(), json_value()],
        proptest::option::of(version()),
        proptest::option::of(json_value()),
        proptest::option::of(prop_oneof![(0u64..10).prop_map(Value::from), json_value()]),
    )
        .prop_map(|(kind, id, ts, version, payload, capacity)| {
            let mut frame = Map::new();
            frame.insert("type".to_owned(), kind);
            frame.insert("id".to_owned(), id);
            frame.insert("ts".to_owned(), ts);
            for (name, value) in [
                ("version", version),
                ("payload", payload),
                ("pending_capacity", capacity),
            ] {
                if let Some(value) = value {
                    frame.insert(name.to_owned(), value);
                }
            }
            Value::Object(frame)
        })
}

proptest! {
    #![proptest_config(config(2048))]

    #[test]
    fn arbitrary_bytes_never_panic_and_replies_hold(
        bytes in proptest::collection::vec(any::<u8>(), 0..200)
    ) {
        let text = String::from_utf8_lossy(&bytes);
        let frame = serde_json::from_str::<Value>(&text).ok();
        check(&parse_frame(&text), frame.as_ref())?;
    }
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn arbitrary_json_never_panics_and_replies_hold(frame in json_value()) {
        check_value(&frame)?;
    }

    #[test]
    fn generated_envelopes_are_answered_by_id_without_quoting(frame in envelope()) {
        check_value(&frame)?;
    }

    #[test]
    fn mutated_spec_examples_are_answered_by_id_without_quoting(
        example in any::<Index>(),
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let mut frame = example.get(&EXAMPLES).clone();
        for mutation in mutations {
            apply(&mut frame, mutation);
        }
        check_value(&frame)?;
    }

    #[test]
    fn another_major_never_becomes_a_message(
        example in any::<Index>(),
        major in prop_oneof![Just(0u32), 2u32..100],
        minor in 0u32..20,
    ) {
        let mut frame = example.get(&EXAMPLES).clone();
        set(&mut frame, "version", Value::from(format!("{major}.{minor}")));
        let parsed = parse_frame(&frame.to_string());
        if !matches!(frame["type"].as_str(), Some("HELLO" | "HELLO_ACK")) {
            prop_assert!(matches!(parsed, Parsed::OtherMajor { .. }), "{:?}", parsed);
            prop_assert!(parsed.error_reply(2.0, 1).is_none());
        }
        check(&parsed, Some(&frame))?;
    }

    #[test]
    fn unknown_fields_anywhere_in_a_request_change_nothing(
        example in any::<Index>(),
        additions in proptest::collection::vec(
            (any::<Index>(), "[a-z]{1,6}", json_value()), 1..5),
    ) {
        let original = example.get(&REQUEST_EXAMPLES).clone();
        let expected = parse_frame(&original.to_string());
        prop_assert!(matches!(expected, Parsed::Message(_)), "{:?}", expected);
        let mut frame = original;
        for (container, name, value) in additions {
            if let Value::Object(map) = pick_objects(&mut frame, &container) {
                map.entry(format!("zz_unknown_{name}")).or_insert(value);
            }
        }
        prop_assert_eq!(parse_frame(&frame.to_string()), expected, "{}", frame);
    }
}

/// The requests of the workflow-recording preview, whose payload is kept as raw JSON by
/// design (common.rs `PreviewPayload`): an added payload field is kept, not ignored.
const RAW_PAYLOAD_REQUESTS: &[&str] = &[
    "REQUEST_RECORDING_CONSENT",
    "START_RECORDING",
    "STOP_RECORDING",
    "RECORDING_FETCH",
    "APPLY_RECORDING_REVIEW",
];

/// Like [`pick_container`], among objects only (outside a raw payload).
fn pick_objects<'v>(frame: &'v mut Value, which: &Index) -> &'v mut Value {
    let mut all = Vec::new();
    containers(frame, "", &mut all);
    let raw_payload = frame["type"]
        .as_str()
        .is_some_and(|t| RAW_PAYLOAD_REQUESTS.contains(&t));
    all.retain(|pointer| {
        frame.pointer(pointer).is_some_and(Value::is_object)
            && !(raw_payload && pointer.starts_with("/payload"))
            // EXECUTE_COMMAND's `env` is a map of variables: its keys are data, not fields.
            && !pointer.starts_with("/payload/env")
    });
    let pointer = which.get(&all).clone();
    frame.pointer_mut(&pointer).unwrap()
}
