//! The JSON the original's Python writes and reads: its `json.dumps` spacing and escaping, the
//! sorted canonical form each record's HMAC covers, floats as Python's `repr`, and a parser
//! that reads lines back the way `json.loads` does.

use std::fmt::Write as _;

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

use super::{KEY_LEN, key::encode_hex};

/// Deep enough for any record; shallow enough that hostile nesting cannot exhaust the stack.
const MAX_NESTING: usize = 128;

type HmacSha256 = Hmac<Sha256>;

/// Python's `json.dumps(value, indent=2)` before the ASCII escaping [`ascii_only`] applies.
pub(super) fn write_pretty(
    value: &Json,
    depth: usize,
    out: &mut String,
) -> Result<(), RecordError> {
    let indent = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    match value {
        Json::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, depth + 1);
                write_pretty(item, depth + 1, out)?;
            }
            indent(out, depth);
            out.push(']');
        }
        Json::Object(fields) if !fields.is_empty() => {
            out.push('{');
            for (i, (key, item)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, depth + 1);
                write_string(key, out);
                out.push_str(": ");
                write_pretty(item, depth + 1, out)?;
            }
            indent(out, depth);
            out.push('}');
        }
        other => write_python(other, out)?,
    }
    Ok(())
}

/// Python's `ensure_ascii=True` applied to JSON written with it off. Outside strings JSON is
/// ASCII without DEL, so every character escaped here is inside a string, where `\uXXXX` is
/// what Python writes.
pub(super) fn ascii_only(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() && c != '\u{7f}' {
            out.push(c);
        } else {
            let mut units = [0_u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
    }
    out
}

/// Formats a float exactly as Python's `repr` does; `None` for NaN and infinities, which the
/// canonical form refuses.
#[must_use]
pub fn python_float_repr(value: f64) -> Option<String> {
    if !value.is_finite() {
        return None;
    }
    let abs = value.abs();
    // Rust's `{:e}` gives the shortest round-trip digit count, like Python's repr, but when two
    // last digits both round-trip it may not take the nearest one (ties to even) as Python
    // does; re-rounding exactly to that many digits does, unless that leaves the round-trip
    // interval at a power-of-two boundary.
    let shortest = format!("{abs:e}");
    let count = shortest
        .split('e')
        .next()?
        .bytes()
        .filter(u8::is_ascii_digit)
        .count();
    let nearest = format!("{abs:.prec$e}", prec = count.saturating_sub(1));
    let sci = if nearest.parse::<f64>().ok() == Some(abs) {
        nearest
    } else {
        shortest
    };
    let (mantissa, exponent) = sci.split_once('e')?;
    let exponent: i32 = exponent.parse().ok()?;
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let len = i32::try_from(digits.len()).ok()?;
    // Position of the decimal point relative to the digit string, as in Python's float_repr.
    let point = exponent + 1;
    let mut out = String::new();
    if value.is_sign_negative() {
        out.push('-');
    }
    if (-4 < point) && (point <= 16) {
        if point <= 0 {
            out.push_str("0.");
            for _ in 0..-point {
                out.push('0');
            }
            out.push_str(&digits);
        } else if point >= len {
            out.push_str(&digits);
            for _ in 0..point - len {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            let (int, frac) = digits.split_at(usize::try_from(point).ok()?);
            out.push_str(int);
            out.push('.');
            out.push_str(frac);
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let sign = if exponent < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{:02}", exponent.unsigned_abs());
    }
    Some(out)
}

/// A JSON value as the original's Python sees it: integers keep their exact digits, objects
/// keep their order (the written line is not sorted).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Json {
    Null,
    Bool(bool),
    Int(String),
    Float(f64),
    Str(String),
    Array(Vec<Self>),
    Object(Vec<(String, Self)>),
}

impl Json {
    pub(super) fn opt_str(value: Option<String>) -> Self {
        value.map_or(Self::Null, Self::Str)
    }

    fn from_value(value: Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(b) => Self::Bool(b),
            Value::Number(n) => {
                if n.is_f64() {
                    // serde_json cannot hold NaN or infinities, so this stays finite.
                    n.as_f64().map_or(Self::Null, Self::Float)
                } else {
                    Self::Int(n.to_string())
                }
            }
            Value::String(s) => Self::Str(s),
            Value::Array(items) => Self::Array(items.into_iter().map(Self::from_value).collect()),
            Value::Object(map) => Self::from_map(map),
        }
    }

    pub(super) fn from_map(map: Map<String, Value>) -> Self {
        Self::Object(
            map.into_iter()
                .map(|(k, v)| (k, Self::from_value(v)))
                .collect(),
        )
    }

    pub(super) fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Self::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            _ => None,
        }
    }

    pub(super) fn as_int(&self) -> Option<i128> {
        match self {
            Self::Int(digits) => digits.parse().ok(),
            _ => None,
        }
    }

    pub(super) fn as_u64(&self) -> Option<u64> {
        self.as_int().and_then(|i| u64::try_from(i).ok())
    }

    pub(super) fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Float(f) => Some(*f),
            Self::Int(digits) => digits.parse().ok(),
            _ => None,
        }
    }
}

/// Why a record could not be serialised or signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum RecordError {
    /// The canonical form refuses what JSON cannot carry.
    #[error("audit records cannot carry NaN or infinite numbers")]
    NonFiniteFloat,
    #[error("the audit key was refused")]
    Key,
}

pub(super) fn record_hmac(
    key: &[u8; KEY_LEN],
    fields: &[(String, Json)],
) -> Result<String, RecordError> {
    let mut canonical = String::new();
    write_canonical_object(fields, &mut canonical)?;
    hmac_hex(key, canonical.as_bytes())
}

pub(super) fn hmac_hex(key: &[u8; KEY_LEN], message: &[u8]) -> Result<String, RecordError> {
    // HMAC takes keys of any length, so this never fails; the API just cannot say so.
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).map_err(|_| RecordError::Key)?;
    mac.update(message);
    Ok(encode_hex(&mac.finalize().into_bytes()))
}

pub(super) fn write_canonical(value: &Json, out: &mut String) -> Result<(), RecordError> {
    match value {
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out)?;
            }
            out.push(']');
        }
        Json::Object(fields) => write_canonical_object(fields, out)?,
        scalar => write_scalar(scalar, out)?,
    }
    Ok(())
}

pub(super) fn write_canonical_object(
    fields: &[(String, Json)],
    out: &mut String,
) -> Result<(), RecordError> {
    // UTF-8 byte order is code point order, which is what Python's `sorted` uses.
    let mut sorted: Vec<&(String, Json)> = fields.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    out.push('{');
    for (i, (key, value)) in sorted.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(key, out);
        out.push(':');
        write_canonical(value, out)?;
    }
    out.push('}');
    Ok(())
}

/// Python's `json.dumps(value, ensure_ascii=False)`: insertion order, `", "` and `": "`.
pub(super) fn write_python(value: &Json, out: &mut String) -> Result<(), RecordError> {
    match value {
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python(item, out)?;
            }
            out.push(']');
        }
        Json::Object(fields) => {
            out.push('{');
            for (i, (key, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(key, out);
                out.push_str(": ");
                write_python(value, out)?;
            }
            out.push('}');
        }
        scalar => write_scalar(scalar, out)?,
    }
    Ok(())
}

fn write_scalar(value: &Json, out: &mut String) -> Result<(), RecordError> {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Int(digits) => out.push_str(digits),
        Json::Float(f) => out.push_str(&python_float_repr(*f).ok_or(RecordError::NonFiniteFloat)?),
        Json::Str(s) => write_string(s, out),
        Json::Array(_) | Json::Object(_) => write_canonical(value, out)?,
    }
    Ok(())
}

/// Python's string escaping with `ensure_ascii=False`: only quote, backslash and C0 controls.
fn write_string(s: &str, out: &mut String) {
    write_python_string(s, false, out);
}

/// A JSON string as Python's `json.dumps` writes it: with `ensure_ascii` (its default) every
/// non-ASCII character becomes `\uXXXX` (astral ones as a surrogate pair); without, only
/// quote, backslash and C0 controls are escaped.
#[must_use]
pub fn python_json_string(s: &str, ensure_ascii: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_python_string(s, ensure_ascii, &mut out);
    out
}

fn write_python_string(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 || (ensure_ascii && u32::from(c) > 0x7e) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Parses one line the way Python's `json.loads` would, or `None`. Unlike Python it refuses
/// `NaN`/`Infinity` and lone surrogates, which no record the original writes can contain.
pub(super) fn parse_line(raw: &[u8]) -> Option<Json> {
    let text = std::str::from_utf8(raw).ok()?;
    let mut parser = Parser {
        bytes: text.as_bytes(),
        text,
        pos: 0,
    };
    let value = parser.value(0)?;
    parser.skip_ws();
    (parser.pos == parser.bytes.len() && matches!(value, Json::Object(_))).then_some(value)
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while matches!(self.bytes.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, literal: &str) -> Option<()> {
        self.text[self.pos..]
            .starts_with(literal)
            .then(|| self.pos += literal.len())
    }

    fn value(&mut self, depth: usize) -> Option<Json> {
        if depth > MAX_NESTING {
            return None;
        }
        self.skip_ws();
        match *self.bytes.get(self.pos)? {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => self.string().map(Json::Str),
            b't' => self.eat("true").map(|()| Json::Bool(true)),
            b'f' => self.eat("false").map(|()| Json::Bool(false)),
            b'n' => self.eat("null").map(|()| Json::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn object(&mut self, depth: usize) -> Option<Json> {
        self.pos += 1;
        let mut fields: Vec<(String, Json)> = Vec::new();
        self.skip_ws();
        if self.eat("}").is_some() {
            return Some(Json::Object(fields));
        }
        loop {
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return None;
            }
            let key = self.string()?;
            self.skip_ws();
            self.eat(":")?;
            let value = self.value(depth + 1)?;
            // Python's dict keeps the first position and the last value of a repeated key.
            if let Some(slot) = fields.iter_mut().find(|(k, _)| *k == key) {
                slot.1 = value;
            } else {
                fields.push((key, value));
            }
            self.skip_ws();
            if self.eat(",").is_some() {
                continue;
            }
            self.eat("}")?;
            return Some(Json::Object(fields));
        }
    }

    fn array(&mut self, depth: usize) -> Option<Json> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.eat("]").is_some() {
            return Some(Json::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            if self.eat(",").is_some() {
                continue;
            }
            self.eat("]")?;
            return Some(Json::Array(items));
        }
    }

    fn string(&mut self) -> Option<String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let start = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            // The stops are ASCII, so both ends are char boundaries.
            out.push_str(self.text.get(start..self.pos)?);
            match *self.bytes.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(out);
                }
                b'\\' => {
                    let escape = *self.bytes.get(self.pos + 1)?;
                    self.pos += 2;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{08}'),
                        b'f' => out.push('\u{0c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return None,
                    }
                }
                // Python's strict mode refuses raw control characters inside strings.
                _ => return None,
            }
        }
    }

    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) {
            self.eat("\\u")?;
            let second = self.hex4()?;
            if !(0xDC00..0xE000).contains(&second) {
                return None;
            }
            char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
        } else {
            char::from_u32(first)
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.text.get(self.pos..self.pos + 4)?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.pos += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    fn number(&mut self) -> Option<Json> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while p.bytes.get(p.pos).is_some_and(u8::is_ascii_digit) {
                p.pos += 1;
            }
            p.pos > from
        };
        if self.bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        match self.bytes.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return None,
        }
        let mut is_float = false;
        if self.bytes.get(self.pos) == Some(&b'.') {
            let save = self.pos;
            self.pos += 1;
            if digits(self) {
                is_float = true;
            } else {
                // Python's scanner stops before a dot without digits; the caller then fails.
                self.pos = save;
            }
        }
        if matches!(self.bytes.get(self.pos), Some(b'e' | b'E')) {
            let save = self.pos;
            self.pos += 1;
            if matches!(self.bytes.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) {
                is_float = true;
            } else {
                self.pos = save;
            }
        }
        let text = &self.text[start..self.pos];
        if is_float {
            // Rust's parse is correctly rounded, so the float Python wrote comes back bit-exact.
            let value: f64 = text.parse().ok()?;
            value.is_finite().then_some(Json::Float(value))
        } else if text == "-0" {
            Some(Json::Int("0".to_owned()))
        } else {
            Some(Json::Int(text.to_owned()))
        }
    }
}
