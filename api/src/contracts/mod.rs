//! The wire contracts of the local API and the strict JSON extractor that enforces them.
//!
//! Bodies are parsed straight into typed contracts; the first rule a body breaks becomes a
//! pydantic-style 422 item (`loc`, `type`, fixed `msg`) that never carries the input.

mod convert;
pub(crate) mod examples;
pub mod requests;
pub mod responses;
pub mod scalars;

use axum::{
    extract::{FromRequest, Request},
    http::{HeaderValue, StatusCode, header::CONTENT_TYPE},
    response::{IntoResponse, Response},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

pub use self::convert::{assist_answer, audit_tail, guidance_upload, job};
use self::responses::ValidationItem;
use crate::error::ApiError;

/// The fixed message of every validation item.
pub const INVALID_VALUE: &str = "Invalid request value";

/// Builds one validation item.
#[must_use]
pub fn invalid(loc: Vec<Value>, kind: &'static str) -> ValidationItem {
    ValidationItem {
        loc,
        kind,
        msg: INVALID_VALUE,
    }
}

/// The error types our own deserialisers raise, which are passed through as they are.
const OWN_TYPES: [&str; 9] = [
    "string_too_short",
    "string_too_long",
    "string_pattern_mismatch",
    "greater_than_equal",
    "less_than_equal",
    "too_long",
    "too_short",
    "value_error",
    "finite_number",
];

/// Names the pydantic error type for a serde error message, and the field it names, if any.
/// The message itself may quote input, so it goes no further than this function.
fn classify(message: &str, at_root: bool) -> (&'static str, Option<String>) {
    let message = message.split(" at line ").next().unwrap_or(message);
    let quoted = || message.split('`').nth(1).map(str::to_owned);
    if let Some(own) = OWN_TYPES.iter().find(|t| **t == message) {
        return (own, None);
    }
    if message.starts_with("missing field") {
        return ("missing", quoted());
    }
    if message.starts_with("unknown field") {
        return ("extra_forbidden", quoted());
    }
    if message.starts_with("unknown variant") {
        return ("enum", None);
    }
    if message.starts_with("invalid length") {
        return ("too_short", None);
    }
    if let Some(expected) = message
        .strip_prefix("invalid type: ")
        .and_then(|m| m.split(", expected ").nth(1))
    {
        let kind = match expected {
            "a string" => "string_type",
            "a boolean" => "bool_type",
            "f64" => "float_type",
            "i64" | "u64" | "u32" | "u8" => "int_type",
            "a sequence" => "list_type",
            "a map" => "dict_type",
            e if e.starts_with("struct") => {
                if at_root {
                    "model_attributes_type"
                } else {
                    "model_type"
                }
            }
            e if e.contains("variant") || e.starts_with("enum") => "enum",
            _ => "value_error",
        };
        return (kind, None);
    }
    ("value_error", None)
}

/// Where a JSON syntax error sits, as a character offset like the reference reports it.
fn char_offset(body: &[u8], line: usize, column: usize) -> usize {
    let text = String::from_utf8_lossy(body);
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let byte = (line_start + column.saturating_sub(1)).min(text.len());
    text.char_indices().take_while(|(i, _)| *i < byte).count()
}

/// Parses a body into a contract, or into the one 422 item it earned.
pub fn parse_body<T: DeserializeOwned>(body: &[u8], is_json: bool) -> Result<T, ValidationItem> {
    if !is_json {
        return Err(invalid(vec!["body".into()], "model_attributes_type"));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(invalid(vec!["body".into()], "missing"));
    }
    // The happy path parses without path tracking; only a body that fails is parsed again to
    // learn where it broke. A body checked as UTF-8 once is parsed as text, which spares
    // serde_json a check of every string in it (a sixth of a small request's parsing).
    if let Ok(Ok(value)) = std::str::from_utf8(body).map(serde_json::from_str::<T>) {
        return Ok(value);
    }
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let syntax = |error: &serde_json::Error| {
        let offset = char_offset(body, error.line(), error.column());
        invalid(vec!["body".into(), offset.into()], "json_invalid")
    };
    let parsed = serde_path_to_error::deserialize::<_, T>(&mut deserializer).map_err(|error| {
        let inner = error.inner();
        if inner.is_syntax() || inner.is_eof() {
            return syntax(inner);
        }
        let mut loc: Vec<Value> = vec!["body".into()];
        for segment in error.path().iter() {
            match segment {
                serde_path_to_error::Segment::Seq { index } => loc.push((*index).into()),
                serde_path_to_error::Segment::Map { key } => loc.push(key.as_str().into()),
                serde_path_to_error::Segment::Enum { .. }
                | serde_path_to_error::Segment::Unknown => {}
            }
        }
        let (kind, field) = classify(&inner.to_string(), loc.len() == 1);
        if let Some(field) = field.filter(|f| loc.last() != Some(&Value::from(f.as_str()))) {
            loc.push(field.into());
        }
        invalid(loc, kind)
    })?;
    deserializer.end().map_err(|error| syntax(&error))?;
    Ok(parsed)
}

/// True when the request's body is to be read as JSON: no `Content-Type`, or a JSON one.
fn is_json(request: &Request) -> bool {
    let Some(value) = request.headers().get(CONTENT_TYPE) else {
        return true;
    };
    let Ok(value) = value.to_str() else {
        return false;
    };
    // Bytes compared in any case: the value is visible ASCII here, and this runs on every
    // request, where string searches and a lower-cased copy cost a third more.
    let essence = value.as_bytes();
    let essence = essence
        .iter()
        .position(|&b| b == b';')
        .map_or(essence, |end| &essence[..end])
        .trim_ascii();
    let Some(subtype) = essence
        .get(..12)
        .filter(|kind| kind.eq_ignore_ascii_case(b"application/"))
        .map(|_| &essence[12..])
    else {
        return false;
    };
    subtype.eq_ignore_ascii_case(b"json")
        || subtype
            .get(subtype.len().saturating_sub(5)..)
            .is_some_and(|suffix| suffix.eq_ignore_ascii_case(b"+json"))
}

/// A JSON body parsed strictly into `T`; failures answer 422 in the reference's shape.
#[derive(Debug)]
pub struct StrictJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for StrictJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let json = is_json(&request);
        // The boundary already buffered the body under the 3,000,000-byte cap, so no second
        // limit applies here (axum's `Bytes` extractor would impose its own 2 MiB default and
        // refuse a valid near-cap screenshot).
        let body = axum::body::to_bytes(request.into_body(), usize::MAX)
            .await
            .map_err(|_| ApiError::Validation(vec![invalid(vec!["body".into()], "missing")]))?;
        parse_body(&body, json)
            .map(Self)
            .map_err(|item| ApiError::Validation(vec![item]))
    }
}

/// A JSON answer, sent as `application/json`.
///
/// It is serialised into one buffer through `Vec`'s own `Write`: axum's `Json` grows a
/// `BytesMut` from 128 bytes behind a generic writer, which cost a guidance answer of 442
/// bytes about 1,200 instructions more (2 % of its request).
#[derive(Debug)]
pub struct Reply<T>(pub T);

/// Room for every answer but a long audit tail or plan in one allocation.
const REPLY_CAPACITY: usize = 1024;

impl<T: Serialize> IntoResponse for Reply<T> {
    fn into_response(self) -> Response {
        let mut body = Vec::with_capacity(REPLY_CAPACITY);
        let (status, body) = match serde_json::to_writer(&mut body, &self.0) {
            Ok(()) => (StatusCode::OK, body),
            // Only a map with non-string keys fails, and no answer has one; should one appear,
            // the client gets the reference's generic 500 rather than half a document.
            Err(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                br#"{"detail":"Internal Server Error"}"#.to_vec(),
            ),
        };
        (
            status,
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            body,
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::{requests::ExecuteRequest, *};

    fn item(body: &str) -> (Vec<Value>, &'static str) {
        let e = parse_body::<ExecuteRequest>(body.as_bytes(), true).unwrap_err();
        (e.loc, e.kind)
    }

    #[test]
    fn errors_name_the_place_and_type_only() {
        assert_eq!(
            item("{}"),
            (vec!["body".into(), "grantToken".into()], "missing")
        );
        assert_eq!(
            item(r#"{"grantToken":"a","x":1}"#),
            (vec!["body".into(), "x".into()], "extra_forbidden")
        );
        assert_eq!(
            item(r#"{"grantToken":5}"#),
            (vec!["body".into(), "grantToken".into()], "string_type")
        );
        assert_eq!(
            item(r#"{"grantToken":"a"#),
            (vec!["body".into(), 15.into()], "json_invalid")
        );
        assert_eq!(
            item(r#""private-text""#),
            (vec!["body".into()], "model_attributes_type")
        );
        assert_eq!(item(r#"{"grantToken":"a"} x"#).1, "json_invalid");
        assert_eq!(item(""), (vec!["body".into()], "missing"));
        assert_eq!(item("NaN").1, "json_invalid");
        // Not UTF-8: refused as a syntax error where it stops being text, on either path.
        let e = parse_body::<ExecuteRequest>(b"{\"grantToken\":\"a\xff\"}", true).unwrap_err();
        assert_eq!(e.kind, "json_invalid");
    }

    #[tokio::test]
    async fn replies_are_json_documents_with_their_status() {
        let answer = responses::Health {
            status: "ok",
            mode: "demo",
            version: "0.2.0",
        };
        let response = (StatusCode::CONFLICT, Reply(answer)).into_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert_eq!(
            response.headers().get(CONTENT_TYPE).unwrap(),
            "application/json"
        );
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(
            &body[..],
            br#"{"status":"ok","mode":"demo","version":"0.2.0"}"#
        );
    }

    #[test]
    fn json_media_types_in_any_case() {
        let is = |content_type: Option<&str>| {
            let mut request = Request::new(axum::body::Body::empty());
            if let Some(value) = content_type {
                request
                    .headers_mut()
                    .insert(CONTENT_TYPE, value.parse().unwrap());
            }
            is_json(&request)
        };
        for json in [
            None,
            Some("application/json"),
            Some("Application/JSON; charset=utf-8"),
            Some(" application/json "),
            Some("application/problem+json"),
            Some("APPLICATION/VND.API+JSON;x=1"),
            Some("application/+json"),
        ] {
            assert!(is(json), "{json:?}");
        }
        for other in [
            Some("text/plain"),
            Some("text/json"),
            Some("application/jsonx"),
            Some("application/json-seq"),
            Some("application"),
            Some("json"),
            Some("application/ json"),
            Some("text/x+json"),
            Some(""),
        ] {
            assert!(!is(other), "{other:?}");
        }
    }
}
