//! A fake local LLM backend on 127.0.0.1:0 for tests: Ollama (`/api/tags`, `/api/chat` NDJSON)
//! or OpenAI-compatible (`/v1/models`, `/v1/chat/completions` SSE or JSON), answering with a
//! scripted [`Reply`], recording every request, and counting answers the client abandoned.
//!
//! Streams are real: chunked bodies written piece by piece with the configured delay between
//! pieces, so a client that drops its call mid-stream closes the connection and the fake sees
//! the body dropped before its end ([`FakeLlm::cancelled`]).

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{Request, State},
    http::{Method, StatusCode, header},
    response::Response,
};
use serde_json::{Value, json};
use tokio::{net::TcpListener, task::JoinHandle};

/// Which API the fake speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeKind {
    /// `GET /api/tags`, `POST /api/chat` (NDJSON).
    Ollama,
    /// `GET /v1/models`, `POST /v1/chat/completions` (SSE when `stream: true`, else JSON).
    OpenAi,
}

/// What the fake answers. Build with [`Reply::text`], [`Reply::status`], [`Reply::json`] or
/// [`Reply::redirect`], then adjust with the builder methods; the fields are public too.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The text deltas streamed, one per line or event.
    pub deltas: Vec<String>,
    /// Ollama `done_reason` / OpenAI `finish_reason` (`None`: omitted / null).
    pub finish_reason: Option<String>,
    /// Ollama `prompt_eval_count` / OpenAI `usage.prompt_tokens` (`None`: omitted).
    pub prompt_tokens: Option<u64>,
    /// Ollama `eval_count` / OpenAI `usage.completion_tokens` (`None`: omitted).
    pub completion_tokens: Option<u64>,
    /// The pause before every piece of a stream but the first.
    pub chunk_delay: Duration,
    /// The pause before the response head, for every request.
    pub first_byte_delay: Duration,
    /// A status answered to every request, with [`Reply::body`], instead of the normal answer.
    pub status: Option<u16>,
    /// The body of a forced status.
    pub body: String,
    /// Extra response headers (any answer).
    pub headers: Vec<(String, String)>,
    /// Malformed lines (NDJSON) or events (SSE), plus comments and blank lines, between deltas.
    pub malformed: bool,
    /// Whether the stream ends with `done: true` / `data: [DONE]`.
    pub terminated: bool,
    /// Every line or event is written as two pieces, split mid-way (even mid-character).
    pub split: bool,
    /// Answer chat (and any other POST) with one non-stream JSON completion of this content.
    pub json_content: Option<String>,
}

impl Default for Reply {
    fn default() -> Self {
        Self {
            deltas: Vec::new(),
            finish_reason: Some("stop".to_owned()),
            prompt_tokens: None,
            completion_tokens: None,
            chunk_delay: Duration::ZERO,
            first_byte_delay: Duration::ZERO,
            status: None,
            body: String::new(),
            headers: Vec::new(),
            malformed: false,
            terminated: true,
            split: false,
            json_content: None,
        }
    }
}

impl Reply {
    /// A stream of `deltas` ending with `stop`.
    pub fn text(deltas: &[&str]) -> Self {
        Self {
            deltas: deltas.iter().map(|d| (*d).to_owned()).collect(),
            ..Self::default()
        }
    }

    /// `status` with `body` for every request.
    pub fn status(status: u16, body: &str) -> Self {
        Self {
            status: Some(status),
            body: body.to_owned(),
            ..Self::default()
        }
    }

    /// One non-stream JSON chat completion whose message content is `content`.
    pub fn json(content: &str) -> Self {
        Self {
            json_content: Some(content.to_owned()),
            ..Self::default()
        }
    }

    /// `307 Temporary Redirect` to `location`.
    pub fn redirect(location: &str) -> Self {
        Self::status(307, "").header("location", location)
    }

    /// The finish (done) reason; `None` omits it.
    #[must_use]
    pub fn finish(mut self, reason: Option<&str>) -> Self {
        self.finish_reason = reason.map(str::to_owned);
        self
    }

    /// Token counts reported at the end.
    #[must_use]
    pub const fn tokens(mut self, prompt: u64, completion: u64) -> Self {
        self.prompt_tokens = Some(prompt);
        self.completion_tokens = Some(completion);
        self
    }

    /// The pause between stream pieces.
    #[must_use]
    pub const fn chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// The pause before the response head.
    #[must_use]
    pub const fn first_byte_delay(mut self, delay: Duration) -> Self {
        self.first_byte_delay = delay;
        self
    }

    /// An extra response header.
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Interleaves malformed lines or events.
    #[must_use]
    pub const fn malformed(mut self) -> Self {
        self.malformed = true;
        self
    }

    /// Ends the stream without its end marker.
    #[must_use]
    pub const fn unterminated(mut self) -> Self {
        self.terminated = false;
        self
    }

    /// Splits every line or event in two pieces.
    #[must_use]
    pub const fn split(mut self) -> Self {
        self.split = true;
        self
    }
}

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path with its query, as sent.
    pub path: String,
    /// Every header, lower-case names, repeated values joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// The body, when it was JSON.
    pub body: Option<Value>,
}

impl Recorded {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

struct Shared {
    kind: FakeKind,
    models: Mutex<Vec<String>>,
    reply: Mutex<Reply>,
    requests: Mutex<Vec<Recorded>>,
    in_flight: AtomicUsize,
    completed: AtomicUsize,
    cancelled: AtomicUsize,
}

/// A running fake backend; stops accepting when dropped.
pub struct FakeLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl FakeLlm {
    /// Starts a fake speaking `kind`, offering `models`, answering with `reply`.
    pub async fn start(kind: FakeKind, models: &[&str], reply: Reply) -> Self {
        let shared = Arc::new(Shared {
            kind,
            models: Mutex::new(models.iter().map(|m| (*m).to_owned()).collect()),
            reply: Mutex::new(reply),
            requests: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            completed: AtomicUsize::new(0),
            cancelled: AtomicUsize::new(0),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let server = tokio::spawn(async move {
            // The test ends by dropping the fake, which aborts this; an error has no one to go to.
            let _ = axum::serve(listener, app).await;
        });
        Self {
            addr,
            shared,
            server,
        }
    }

    /// [`FakeLlm::start`] as Ollama.
    pub async fn ollama(models: &[&str], reply: Reply) -> Self {
        Self::start(FakeKind::Ollama, models, reply).await
    }

    /// [`FakeLlm::start`] as OpenAI-compatible.
    pub async fn openai(models: &[&str], reply: Reply) -> Self {
        Self::start(FakeKind::OpenAi, models, reply).await
    }

    /// The base URL, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The socket address.
    pub const fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers the following requests with `reply`.
    pub fn set_reply(&self, reply: Reply) {
        *self.shared.reply.lock().unwrap() = reply;
    }

    /// Offers `models` from now on.
    pub fn set_models(&self, models: &[&str]) {
        *self.shared.models.lock().unwrap() = models.iter().map(|m| (*m).to_owned()).collect();
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The latest request.
    pub fn last_request(&self) -> Option<Recorded> {
        self.shared.requests.lock().unwrap().last().cloned()
    }

    /// Answers being produced now (from the request's arrival to the body's end or drop).
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    /// Answers whose body was written to its end.
    pub fn completed(&self) -> usize {
        self.shared.completed.load(Ordering::SeqCst)
    }

    /// Answers dropped before their end: the client went away mid-answer.
    pub fn cancelled(&self) -> usize {
        self.shared.cancelled.load(Ordering::SeqCst)
    }

    /// Polls `condition` until it holds or `within` passes; whether it held.
    pub async fn wait_until(&self, condition: impl Fn(&Self) -> bool, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if condition(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// A base URL nothing listens on (a port bound and released), for connection-refused tests.
pub fn closed_port_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

/// One answer's life: counted in flight from the request's arrival, and cancelled if dropped
/// (handler or body stream) before it is marked finished.
struct Flight {
    shared: Arc<Shared>,
    finished: bool,
}

impl Flight {
    fn new(shared: &Arc<Shared>) -> Self {
        shared.in_flight.fetch_add(1, Ordering::SeqCst);
        Self {
            shared: Arc::clone(shared),
            finished: false,
        }
    }
}

impl Flight {
    /// Through a reference: the flag is read by `drop`, which the unused-assignment lint
    /// does not see.
    const fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        self.shared.in_flight.fetch_sub(1, Ordering::SeqCst);
        let counter = if self.finished {
            &self.shared.completed
        } else {
            &self.shared.cancelled
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let mut flight = Flight::new(&shared);
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 16 << 20)
        .await
        .unwrap_or_default();
    let json: Option<Value> = serde_json::from_slice(&bytes).ok();
    let headers = parts
        .headers
        .keys()
        .map(|name| {
            let values: Vec<String> = parts
                .headers
                .get_all(name)
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect();
            (name.as_str().to_owned(), values.join(", "))
        })
        .collect();
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned());
    shared.requests.lock().unwrap().push(Recorded {
        method: parts.method.to_string(),
        path,
        headers,
        body: json.clone(),
    });
    let reply = shared.reply.lock().unwrap().clone();
    let models = shared.models.lock().unwrap().clone();
    if !reply.first_byte_delay.is_zero() {
        tokio::time::sleep(reply.first_byte_delay).await;
    }

    let answer = answer(
        shared.kind,
        &parts.method,
        parts.uri.path(),
        json.as_ref(),
        &models,
        &reply,
    );
    let mut response = Response::builder().status(answer.status);
    if let Some(content_type) = answer.content_type {
        response = response.header(header::CONTENT_TYPE, content_type);
    }
    for (name, value) in &reply.headers {
        response = response.header(name.as_str(), value.as_str());
    }
    let body = match answer.body {
        Answer::Whole(bytes) => {
            flight.finish();
            Body::from(bytes)
        }
        Answer::Pieces(pieces) => stream(pieces, reply.chunk_delay, flight),
    };
    response.body(body).unwrap()
}

struct Planned {
    status: StatusCode,
    content_type: Option<&'static str>,
    body: Answer,
}

enum Answer {
    Whole(Vec<u8>),
    Pieces(Vec<Bytes>),
}

fn whole(status: StatusCode, content_type: Option<&'static str>, body: Vec<u8>) -> Planned {
    Planned {
        status,
        content_type,
        body: Answer::Whole(body),
    }
}

fn answer(
    kind: FakeKind,
    method: &Method,
    path: &str,
    body: Option<&Value>,
    models: &[String],
    reply: &Reply,
) -> Planned {
    if let Some(status) = reply.status {
        let status = StatusCode::from_u16(status).unwrap();
        return whole(status, None, reply.body.clone().into_bytes());
    }
    let json_type = Some("application/json");
    let model = body
        .and_then(|b| b.get("model"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    match (kind, method.as_str(), path) {
        (FakeKind::Ollama, "GET", "/api/tags") => {
            let list: Vec<Value> = models
                .iter()
                .map(|m| json!({"name": m, "model": m, "size": 1, "digest": "0"}))
                .collect();
            whole(
                StatusCode::OK,
                json_type,
                json!({"models": list}).to_string().into_bytes(),
            )
        }
        (FakeKind::OpenAi, "GET", "/v1/models") => {
            let list: Vec<Value> = models
                .iter()
                .map(|m| json!({"id": m, "object": "model", "owned_by": "fake"}))
                .collect();
            whole(
                StatusCode::OK,
                json_type,
                json!({"object": "list", "data": list})
                    .to_string()
                    .into_bytes(),
            )
        }
        (FakeKind::Ollama, "POST", "/api/chat")
        | (FakeKind::OpenAi, "POST", "/v1/chat/completions") => {
            if !models.contains(&model) {
                let error = match kind {
                    FakeKind::Ollama => {
                        json!({"error": format!("model '{model}' not found, try pulling it first")})
                    }
                    FakeKind::OpenAi => json!({"error": {
                        "message": format!("The model `{model}` does not exist."),
                        "type": "invalid_request_error",
                        "code": "model_not_found",
                    }}),
                };
                return whole(
                    StatusCode::NOT_FOUND,
                    json_type,
                    error.to_string().into_bytes(),
                );
            }
            // Ollama streams unless told not to; OpenAI only when asked.
            let streaming = body
                .and_then(|b| b.get("stream"))
                .and_then(Value::as_bool)
                .unwrap_or(kind == FakeKind::Ollama);
            if reply.json_content.is_some() || !streaming {
                return whole(
                    StatusCode::OK,
                    json_type,
                    completion_json(kind, &model, reply),
                );
            }
            let include_usage = body
                .and_then(|b| b.pointer("/stream_options/include_usage"))
                .and_then(Value::as_bool)
                == Some(true);
            let pieces = match kind {
                FakeKind::Ollama => ndjson(&model, reply),
                FakeKind::OpenAi => sse(&model, reply, include_usage),
            };
            let pieces = if reply.split { split(pieces) } else { pieces };
            Planned {
                status: StatusCode::OK,
                content_type: Some(match kind {
                    FakeKind::Ollama => "application/x-ndjson",
                    FakeKind::OpenAi => "text/event-stream",
                }),
                body: Answer::Pieces(pieces),
            }
        }
        // Anything else posted (the exact URL of an OpenAI-style provider) gets a completion.
        (_, "POST", _) => whole(
            StatusCode::OK,
            json_type,
            completion_json(FakeKind::OpenAi, &model, reply),
        ),
        _ => whole(StatusCode::NOT_FOUND, None, b"404 page not found".to_vec()),
    }
}

/// A non-stream completion: the scripted content, or the deltas joined.
fn completion_json(kind: FakeKind, model: &str, reply: &Reply) -> Vec<u8> {
    let content = reply
        .json_content
        .clone()
        .unwrap_or_else(|| reply.deltas.concat());
    let document = match kind {
        FakeKind::Ollama => {
            let mut done = ollama_done(model, reply);
            done["message"]["content"] = Value::String(content);
            done
        }
        FakeKind::OpenAi => {
            let mut document = json!({
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": reply.finish_reason,
                }],
            });
            if let Some(usage) = usage(reply) {
                document["usage"] = usage;
            }
            document
        }
    };
    document.to_string().into_bytes()
}

fn usage(reply: &Reply) -> Option<Value> {
    if reply.prompt_tokens.is_none() && reply.completion_tokens.is_none() {
        return None;
    }
    let total = reply
        .prompt_tokens
        .zip(reply.completion_tokens)
        .map(|(p, c)| p + c);
    Some(json!({
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": total,
    }))
}

fn ollama_done(model: &str, reply: &Reply) -> Value {
    let mut done = json!({
        "model": model,
        "created_at": "2025-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": ""},
        "done": true,
        "total_duration": 1000,
    });
    if let Some(reason) = &reply.finish_reason {
        done["done_reason"] = json!(reason);
    }
    if let Some(prompt) = reply.prompt_tokens {
        done["prompt_eval_count"] = json!(prompt);
    }
    if let Some(completion) = reply.completion_tokens {
        done["eval_count"] = json!(completion);
    }
    done
}

fn ndjson(model: &str, reply: &Reply) -> Vec<Bytes> {
    let mut lines = Vec::new();
    for (i, delta) in reply.deltas.iter().enumerate() {
        let line = json!({
            "model": model,
            "created_at": "2025-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": delta},
            "done": false,
        });
        lines.push(format!("{line}\n"));
        if reply.malformed && i == 0 {
            lines.push("this is not json\n".to_owned());
            lines.push("\n".to_owned());
            lines.push("{\"message\": {\"content\": \"lost\"\n".to_owned());
            lines.push("[\"an array\"]\n".to_owned());
        }
    }
    if reply.terminated {
        lines.push(format!("{}\n", ollama_done(model, reply)));
    }
    lines.into_iter().map(Bytes::from).collect()
}

fn sse(model: &str, reply: &Reply, include_usage: bool) -> Vec<Bytes> {
    let chunk = |delta: Value, finish: Option<&str>| {
        let event = json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        format!("data: {event}\n\n")
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for (i, delta) in reply.deltas.iter().enumerate() {
        events.push(chunk(json!({"content": delta}), None));
        if reply.malformed && i == 0 {
            events.push(": keep-alive\n\n".to_owned());
            events.push("data: {not json\n\n".to_owned());
            events.push("\n".to_owned());
            events.push("event: ping\ndata: \"a string\"\n\n".to_owned());
        }
    }
    if let Some(reason) = &reply.finish_reason {
        events.push(chunk(json!({}), Some(reason)));
    }
    if include_usage && let Some(usage) = usage(reply) {
        let event = json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [],
            "usage": usage,
        });
        events.push(format!("data: {event}\n\n"));
    }
    if reply.terminated {
        events.push("data: [DONE]\n\n".to_owned());
    }
    events.into_iter().map(Bytes::from).collect()
}

fn split(pieces: Vec<Bytes>) -> Vec<Bytes> {
    pieces
        .into_iter()
        .flat_map(|piece| {
            let middle = piece.len() / 2;
            [piece.slice(..middle), piece.slice(middle..)]
        })
        .filter(|piece| !piece.is_empty())
        .collect()
}

/// The pieces as a chunked body, paced by `delay`; `flight` ends with the stream, finished
/// only if every piece was taken.
fn stream(pieces: Vec<Bytes>, delay: Duration, flight: Flight) -> Body {
    let state = (pieces.into_iter(), delay, flight, true);
    let stream =
        futures_util::stream::unfold(state, |(mut pieces, delay, mut flight, first)| async move {
            let Some(piece) = pieces.next() else {
                flight.finish();
                return None;
            };
            if !first && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Some((
                Ok::<_, std::convert::Infallible>(piece),
                (pieces, delay, flight, false),
            ))
        });
    Body::from_stream(stream)
}
