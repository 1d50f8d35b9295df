//! Generated-input property of the audit chain's canonical JSON: for arbitrary records
//! (floats of every class including subnormals and large exponents, arbitrary Unicode with
//! control characters, nesting), our canonical bytes equal what the original computes,
//! Python's `json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=...)`,
//! with the machine's `python3` as the oracle, so a chain written by either verifies with the
//! other. Both `ensure_ascii` settings are compared.
//!
//! The case count and seed are fixed (reproducible runs); `PROPTEST_CASES` and
//! `PROPTEST_RNG_SEED` override both (docs/security.md has the long run). Each case sends its
//! batch of records to one Python process.

use std::io::Write;
use std::process::{Command, Stdio};

use proptest::prelude::*;
use serde_json::{Number, Value};

use super::canonical::{ascii_only, parse_line, write_canonical};

/// The default run's seed: the same cases every run, so a failure reproduces as is.
const SEED: u64 = 0x5EED_0016_0005;

fn config(default_cases: u32) -> ProptestConfig {
    crate::proptest_config::config(SEED, default_cases)
}

/// Finite floats of every class, and the exponents where Python's repr switches notation.
fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        (-330_i32..=310, -9_i64..=9).prop_map(|(exp, mantissa)| {
            format!("{mantissa}e{exp}").parse::<f64>().unwrap_or(0.0)
        }),
        Just(f64::MIN_POSITIVE / 2.0),
        Just(5e-324),
        Just(-0.0),
        Just(1e16),
        Just(1e-5),
        Just(0.1),
    ]
    .prop_filter("finite", |f| f.is_finite())
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\\x00-\\x1f\\x7f\"\\\\/é\u{2028}\u{1f600}a]{0,12}",
    ]
}

/// A JSON value whose objects keep the generated key order (serde_json's own map would sort
/// them, and the sort is part of what is under test).
#[derive(Debug, Clone)]
enum Tree {
    Leaf(Value),
    Array(Vec<Self>),
    Object(Vec<(String, Self)>),
}

impl Tree {
    fn write(&self, out: &mut String) {
        match self {
            Self::Leaf(value) => out.push_str(&value.to_string()),
            Self::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Self::Object(fields) => {
                out.push('{');
                for (i, (key, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// Fields in generated order, each key once (Python keeps the last of a repeated key; no
/// record has one).
fn fields(inner: impl Strategy<Value = Tree>, most: usize) -> impl Strategy<Value = Tree> {
    prop::collection::vec((text(), inner), 0..most).prop_map(|pairs| {
        let mut seen = std::collections::HashSet::new();
        Tree::Object(
            pairs
                .into_iter()
                .filter(|(key, _)| seen.insert(key.clone()))
                .collect(),
        )
    })
}

fn value() -> impl Strategy<Value = Tree> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        float().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ]
    .prop_map(Tree::Leaf);
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Tree::Array),
            fields(inner, 6),
        ]
    })
}

/// A record: an object at the top, as every audit line is, as its JSON text.
fn record() -> impl Strategy<Value = String> {
    fields(value(), 8).prop_map(|tree| {
        let mut text = String::new();
        tree.write(&mut text);
        text
    })
}

/// Python's two canonical forms of each JSON line, from one `python3` run.
fn python_canonical(lines: &[String]) -> Vec<(String, String)> {
    const ORACLE: &str = r#"
import json, sys
for line in sys.stdin.read().split("\n")[:-1]:
    value = json.loads(line)
    both = [json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=flag) for flag in (False, True)]
    sys.stdout.write(json.dumps(both) + "\n")
"#;
    let mut child = Command::new("python3")
        .args(["-c", ORACLE])
        .env("PYTHONIOENCODING", "utf-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| {
            panic!(
                "python3 is the oracle of this test and could not start ({err}): install python3"
            )
        });
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "python3 failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<(String, String)>(line).unwrap())
        .collect()
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn canonical_bytes_equal_pythons(lines in prop::collection::vec(record(), 1..24)) {
        let expected = python_canonical(&lines);
        prop_assert_eq!(expected.len(), lines.len());
        for (line, (unicode, ascii)) in lines.iter().zip(expected) {
            let parsed = parse_line(line.as_bytes());
            prop_assert!(parsed.is_some(), "our parser refused {}", line);
            let mut ours = String::new();
            write_canonical(&parsed.unwrap(), &mut ours).unwrap();
            prop_assert_eq!(&ours, &unicode, "ensure_ascii=False for {}", line);
            prop_assert_eq!(ascii_only(&ours), ascii, "ensure_ascii=True for {}", line);
        }
    }
}
