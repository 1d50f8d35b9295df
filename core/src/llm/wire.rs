//! The two wire dialects, decoded without I/O: request bodies, model lists, error bodies, and
//! the incremental NDJSON (Ollama) and SSE (OpenAI-compatible) stream decoders.
//!
//! Decoders take bytes as they arrive, in pieces of any size: a line or an event may be split
//! across any number of network reads. Malformed lines and events are skipped, as the
//! reference does, so one bad line from a backend does not lose the completion.

use serde_json::{Value, json};

use super::{BackendKind, ChatRequest, FinishReason, LlmError, TokenCounts, failed, truncate};

/// The JSON body of a streaming completion request.
pub(super) fn chat_body(kind: BackendKind, request: &ChatRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| json!({"role": m.role, "content": m.content}))
        .collect();
    match kind {
        BackendKind::Ollama => json!({
            "model": request.model,
            "messages": messages,
            "stream": true,
            "options": {
                "temperature": request.temperature,
                "top_p": request.top_p,
                "num_predict": request.max_tokens,
            },
        }),
        BackendKind::OpenAiCompatible => json!({
            "model": request.model,
            "messages": messages,
            "stream": true,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "stream_options": {"include_usage": true},
        }),
    }
}

/// Model names from a model listing (`models[].name` or `data[].id`); `None` when the document
/// does not have the expected shape. Entries without a string name are skipped.
pub(super) fn model_names(kind: BackendKind, body: &[u8]) -> Option<Vec<String>> {
    let document: Value = serde_json::from_slice(body).ok()?;
    let (list, field) = match kind {
        BackendKind::Ollama => ("models", "name"),
        BackendKind::OpenAiCompatible => ("data", "id"),
    };
    let entries = document.get(list)?.as_array()?;
    Some(
        entries
            .iter()
            .filter_map(|entry| entry.get(field)?.as_str())
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}

/// Maps a backend's stop reason; anything unknown (or absent) is a natural stop.
pub(super) fn finish_reason(reason: Option<&str>) -> FinishReason {
    match reason {
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        _ => FinishReason::Stop,
    }
}

/// Whether an error document says the model does not exist (`model_not_found` in the
/// OpenAI `error.code`/`error.type`, or at the top level as some servers put it).
pub(super) fn says_model_not_found(document: &Value) -> bool {
    let says = |object: &Value| {
        ["code", "type"]
            .iter()
            .any(|key| object.get(key).and_then(Value::as_str) == Some("model_not_found"))
    };
    says(document) || document.get("error").is_some_and(says)
}

/// What the decoder found in the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Event {
    /// A non-empty text delta.
    Delta(String),
    /// The end of the completion.
    Done(FinishReason, TokenCounts),
    /// The backend reported an error inside the stream.
    Error(LlmError),
}

/// Splits bytes into lines, whatever the chunking; a trailing `\r` is dropped.
#[derive(Debug, Default)]
struct Lines {
    pending: Vec<u8>,
    /// How far `pending` is known to hold no newline, so long lines are scanned once.
    scanned: usize,
}

impl Lines {
    fn push(&mut self, chunk: &[u8], mut line: impl FnMut(&[u8])) {
        self.pending.extend_from_slice(chunk);
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(offset) = self.pending[from..].iter().position(|b| *b == b'\n') {
            let end = from + offset;
            line(strip_cr(&self.pending[start..end]));
            start = end + 1;
            from = start;
        }
        self.pending.drain(..start);
        self.scanned = self.pending.len();
    }

    /// The last line, when the stream ended without a newline after it.
    fn finish(&mut self, mut line: impl FnMut(&[u8])) {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            line(strip_cr(&rest));
        }
        self.scanned = 0;
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The incremental decoder of a completion stream.
#[derive(Debug)]
pub(super) struct StreamDecoder {
    kind: BackendKind,
    lines: Lines,
    /// SSE: the `data` lines of the event being read, joined with `\n`.
    data: Option<Vec<u8>>,
    /// SSE: the finish reason and usage arrive in events before `[DONE]`.
    finish: Option<FinishReason>,
    tokens: TokenCounts,
}

impl StreamDecoder {
    pub(super) fn new(kind: BackendKind) -> Self {
        Self {
            kind,
            lines: Lines::default(),
            data: None,
            finish: None,
            tokens: TokenCounts::default(),
        }
    }

    /// Decodes `chunk`, appending what it completes to `out`.
    pub(super) fn feed(&mut self, chunk: &[u8], out: &mut Vec<Event>) {
        let mut lines = std::mem::take(&mut self.lines);
        lines.push(chunk, |line| self.line(line, out));
        self.lines = lines;
    }

    /// The stream ended: decodes what is left (a last line without a newline, an SSE event
    /// without its blank line), being lenient with backends that end abruptly but completely.
    pub(super) fn end(&mut self, out: &mut Vec<Event>) {
        let mut lines = std::mem::take(&mut self.lines);
        lines.finish(|line| self.line(line, out));
        if self.kind == BackendKind::OpenAiCompatible {
            self.dispatch(out);
        }
    }

    /// Decodes a whole non-stream OpenAI completion document as if it had been streamed.
    pub(super) fn whole(&mut self, document: &[u8], out: &mut Vec<Event>) {
        let before = out.len();
        self.data = Some(document.to_vec());
        self.dispatch(out);
        let failed = out[before..].iter().any(|e| matches!(e, Event::Error(_)));
        let completion = serde_json::from_slice::<Value>(document)
            .is_ok_and(|d| d.get("choices").is_some_and(Value::is_array));
        if completion && !failed {
            let finish = self.finish.unwrap_or(FinishReason::Stop);
            out.push(Event::Done(finish, self.tokens));
        }
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<Event>) {
        match self.kind {
            BackendKind::Ollama => ndjson_line(line, out),
            BackendKind::OpenAiCompatible => self.sse_line(line, out),
        }
    }

    fn sse_line(&mut self, line: &[u8], out: &mut Vec<Event>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(b":") {
            return;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            let data = self.data.get_or_insert_with(Vec::new);
            if !data.is_empty() {
                data.push(b'\n');
            }
            data.extend_from_slice(value);
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        let Some(data) = self.data.take() else {
            return;
        };
        if data.trim_ascii() == b"[DONE]" {
            let finish = self.finish.unwrap_or(FinishReason::Stop);
            out.push(Event::Done(finish, self.tokens));
            return;
        }
        let Ok(event) = serde_json::from_slice::<Value>(&data) else {
            return;
        };
        if let Some(error) = event.get("error").filter(|e| !e.is_null()) {
            out.push(Event::Error(stream_error(&event, error)));
            return;
        }
        if let Some(choice) = first_choice(&event) {
            // `message` is where a non-stream completion puts the text.
            if let Some(delta) = choice
                .get("delta")
                .or_else(|| choice.get("message"))
                .and_then(|d| d.get("content"))
                .and_then(Value::as_str)
                .filter(|d| !d.is_empty())
            {
                out.push(Event::Delta(delta.to_owned()));
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(finish_reason(Some(reason)));
            }
        }
        if let Some(usage) = event.get("usage").filter(|u| u.is_object()) {
            let count = |key: &str| usage.get(key).and_then(Value::as_u64);
            let prompt = count("prompt_tokens");
            let completion = count("completion_tokens");
            self.tokens = TokenCounts {
                prompt,
                completion,
                total: count("total_tokens").or_else(|| sum(prompt, completion)),
            };
        }
    }
}

/// The choice with index 0 (servers that send one choice may omit the index).
fn first_choice(event: &Value) -> Option<&Value> {
    let choices = event.get("choices")?.as_array()?;
    choices
        .iter()
        .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
}

fn ndjson_line(line: &[u8], out: &mut Vec<Event>) {
    let line = line.trim_ascii();
    if line.is_empty() {
        return;
    }
    let Ok(event) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    if !event.is_object() {
        return;
    }
    if let Some(error) = event.get("error").filter(|e| !e.is_null()) {
        out.push(Event::Error(stream_error(&event, error)));
        return;
    }
    if let Some(delta) = event
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .filter(|d| !d.is_empty())
    {
        out.push(Event::Delta(delta.to_owned()));
    }
    if event.get("done").and_then(Value::as_bool) == Some(true) {
        let count = |key: &str| event.get(key).and_then(Value::as_u64);
        let prompt = count("prompt_eval_count");
        let completion = count("eval_count");
        let reason = event.get("done_reason").and_then(Value::as_str);
        out.push(Event::Done(
            finish_reason(reason),
            TokenCounts {
                prompt,
                completion,
                total: sum(prompt, completion),
            },
        ));
    }
}

/// An error reported inside a 200 stream: `{"error": "..."}` (Ollama) or
/// `{"error": {"message": ..., "code": ...}}` (OpenAI-compatible).
fn stream_error(event: &Value, error: &Value) -> LlmError {
    if says_model_not_found(event) {
        return LlmError::ModelNotAvailable;
    }
    let message = error
        .as_str()
        .or_else(|| error.get("message").and_then(Value::as_str))
        .map_or_else(|| error.to_string(), str::to_owned);
    failed(&truncate(&message))
}

fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    a?.checked_add(b?)
}

#[cfg(test)]
mod tests;
