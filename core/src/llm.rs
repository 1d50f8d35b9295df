//! Local LLM client: Ollama native and OpenAI-compatible backends, bounded, shared by the API
//! (the model guidance provider) and the connector (LOCAL_LLM_COMPLETION).
//!
//! The only HTTP client in `core` (reqwest with rustls): no redirects, no environment proxies,
//! connect, total and (when asked) socket read timeouts, capped response sizes. Errors keep the backend's message for
//! `details.backend_error` (truncated to 200 characters) and never carry prompt or completion
//! text; nothing here logs.
//!
//! Every call is one future with no task behind it: dropping it drops the connection, which is
//! how a cancelled completion stops the backend's generation.

mod wire;

use std::time::{Duration, Instant};

use reqwest::{
    Method, RequestBuilder, Response, StatusCode,
    header::{self, HeaderName, HeaderValue},
};

use wire::{Event, StreamDecoder};

use crate::secret::Redacted;

/// The most characters of a backend's message kept in [`LlmError::Failed`].
pub const BACKEND_ERROR_MAX_CHARS: usize = 200;
/// The largest model listing read.
pub const MODEL_LIST_MAX_BYTES: usize = 1 << 20;
/// The most bytes one completion stream may carry.
pub const STREAM_MAX_BYTES: usize = 16 << 20;
/// How much of an error response is read: enough for its JSON, never the whole of a runaway.
const ERROR_BODY_MAX_BYTES: usize = 64 << 10;

/// Which wire dialect the backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// Ollama's native API: `GET /api/tags`, `POST /api/chat` (NDJSON stream).
    Ollama,
    /// The OpenAI-compatible API: `GET /v1/models`, `POST /v1/chat/completions` (JSON or SSE).
    /// llama.cpp's server, LM Studio, vLLM and Ollama's own `/v1` all speak it.
    OpenAiCompatible,
}

/// How the API key is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthHeader {
    /// `Authorization: Bearer <key>`.
    #[default]
    Bearer,
    /// `api-key: <key>`.
    ApiKey,
}

/// An API key; its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ApiKey(Redacted<String>);

impl ApiKey {
    /// Wraps a key.
    #[must_use]
    pub const fn new(key: String) -> Self {
        Self(Redacted::new(key))
    }

    /// The key, for the one header that carries it.
    #[must_use]
    pub fn expose(&self) -> &str {
        self.0.expose()
    }
}

/// Where the backend is and how to talk to it.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// The dialect.
    pub kind: BackendKind,
    /// Base URL, e.g. `http://localhost:11434` (Ollama) or `http://127.0.0.1:8080`
    /// (OpenAI-compatible; the `/v1/...` paths are appended).
    pub base_url: String,
    /// Optional API key.
    pub api_key: Option<ApiKey>,
    /// How the key is sent.
    pub auth_header: AuthHeader,
    /// TCP/TLS connect timeout.
    pub connect_timeout: Duration,
    /// Whole-call timeout of a completion (the reference: 60 s).
    pub total_timeout: Duration,
    /// Timeout of a model listing (the reference: 2 s).
    pub list_timeout: Duration,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// A completion request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// Model name as the backend lists it.
    pub model: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Most tokens to generate.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: f64,
    /// Nucleus sampling.
    pub top_p: f64,
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// A natural stop.
    Stop,
    /// `max_tokens` reached.
    Length,
    /// The backend filtered the content.
    ContentFilter,
}

impl FinishReason {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ContentFilter => "content_filter",
        }
    }
}

/// Token counts as the backend reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenCounts {
    /// Prompt tokens.
    pub prompt: Option<u64>,
    /// Generated tokens.
    pub completion: Option<u64>,
    /// Their sum, when both are known.
    pub total: Option<u64>,
}

/// A finished completion.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Every delta joined.
    pub content: String,
    /// Why it stopped.
    pub finish_reason: FinishReason,
    /// Token counts.
    pub tokens: TokenCounts,
    /// From the request to the last byte.
    pub duration: Duration,
}

/// How a backend call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// The backend does not have the model (Ollama 404, OpenAI `model_not_found`).
    #[error("the model is not available on the local backend")]
    ModelNotAvailable,
    /// The call timed out.
    #[error("the local model backend timed out")]
    Timeout,
    /// Anything else: connection refused, 5xx, malformed stream, response too large.
    /// `backend_error` is the backend's message or the transport error, at most 200 chars.
    #[error("the local model backend failed")]
    Failed {
        /// What the backend said, for `details.backend_error`; never logged.
        backend_error: String,
    },
}

/// A raw HTTP answer to [`LlmClient::post_exact`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    /// HTTP status.
    pub status: u16,
    /// The `Content-Encoding` header, if any.
    pub content_encoding: Option<String>,
    /// The body (at most the cap given).
    pub body: Vec<u8>,
}

/// How [`LlmClient::post_exact`] failed before a full answer arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The deadline passed (connect, send or read).
    #[error("timed out")]
    Timeout,
    /// Connection or protocol failure.
    #[error("transport failure")]
    Failed,
    /// The body exceeded the cap.
    #[error("response too large")]
    TooLarge,
}

/// The client. Cheap to clone; share one per process.
#[derive(Debug, Clone)]
pub struct LlmClient {
    config: BackendConfig,
    /// Reference-counted inside: clones share the connection pool.
    http: reqwest::Client,
    /// `config.base_url` validated, without a trailing slash.
    base: String,
    /// The auth header, built once; marked sensitive so no `Debug` shows it.
    auth: Option<(HeaderName, HeaderValue)>,
}

impl LlmClient {
    /// A client for `config`.
    ///
    /// # Errors
    /// The HTTP client cannot be built (TLS provider missing) or the base URL is not http(s).
    pub fn new(config: BackendConfig) -> Result<Self, LlmError> {
        Self::build(config, None)
    }

    /// A client that also gives up on a server silent for `read_timeout`: waiting for the
    /// answer's headers, or between any two reads of its body (each read that brings bytes
    /// starts the wait again). A stalled server is then abandoned long before a generous
    /// whole-call deadline; the failure is a timeout like the others.
    ///
    /// # Errors
    /// As [`LlmClient::new`].
    pub fn with_read_timeout(
        config: BackendConfig,
        read_timeout: Duration,
    ) -> Result<Self, LlmError> {
        Self::build(config, Some(read_timeout))
    }

    fn build(config: BackendConfig, read_timeout: Option<Duration>) -> Result<Self, LlmError> {
        let base = validate_base_url(&config.base_url)?;
        let auth = auth_header(&config)?;
        let builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(config.connect_timeout);
        let builder = match read_timeout {
            Some(timeout) => builder.read_timeout(timeout),
            None => builder,
        };
        let http = builder.build().map_err(|err| failed(&describe(err, &[])))?;
        Ok(Self {
            config,
            http,
            base,
            auth,
        })
    }

    /// The configuration.
    #[must_use]
    pub const fn config(&self) -> &BackendConfig {
        &self.config
    }

    /// The dialect the backend speaks.
    #[must_use]
    pub const fn kind(&self) -> BackendKind {
        self.config.kind
    }

    /// The model names the backend offers (Ollama `models[].name`, OpenAI `data[].id`).
    ///
    /// # Errors
    /// [`LlmError`] when the backend cannot be reached or answers badly.
    pub async fn list_models(&self) -> Result<Vec<String>, LlmError> {
        tokio::time::timeout(self.config.list_timeout, self.list_models_within())
            .await
            .unwrap_or(Err(LlmError::Timeout))
    }

    /// Runs a streaming completion, calling `on_delta` for every non-empty text delta, and
    /// returns the assembled completion. Dropping the future aborts the backend call.
    ///
    /// # Errors
    /// [`LlmError`].
    pub async fn chat_stream(
        &self,
        request: &ChatRequest,
        mut on_delta: impl FnMut(&str) + Send,
    ) -> Result<Completion, LlmError> {
        let started = Instant::now();
        let (content, finish_reason, tokens) =
            tokio::time::timeout(self.config.total_timeout, self.chat(request, &mut on_delta))
                .await
                .unwrap_or(Err(LlmError::Timeout))?;
        Ok(Completion {
            content,
            finish_reason,
            tokens,
            duration: started.elapsed(),
        })
    }

    /// One POST of `body` (JSON) to exactly `url` with the configured auth header and
    /// `Accept-Encoding: identity`, no redirects, within `deadline`; the body is read up to
    /// `max_body` bytes (more: [`TransportError::TooLarge`]). For the model guidance provider,
    /// which validates the answer itself.
    ///
    /// # Errors
    /// [`TransportError`].
    pub async fn post_exact(
        &self,
        url: &str,
        body: &serde_json::Value,
        max_body: usize,
        deadline: Duration,
    ) -> Result<RawResponse, TransportError> {
        // No time left means nothing is sent at all.
        if deadline.is_zero() {
            return Err(TransportError::Timeout);
        }
        let url = reqwest::Url::parse(url).map_err(|_| TransportError::Failed)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(TransportError::Failed);
        }
        tokio::time::timeout(deadline, self.post_exact_within(url, body, max_body))
            .await
            .unwrap_or(Err(TransportError::Timeout))
    }

    async fn list_models_within(&self) -> Result<Vec<String>, LlmError> {
        let url = self.endpoint(Endpoint::Models);
        let mut response = self
            .request(Method::GET, &url)
            .send()
            .await
            .map_err(|err| self.transport_failure(err, &url))?;
        let status = response.status();
        if status != StatusCode::OK {
            return Err(status_failure(status, &read_prefix(response).await));
        }
        let body = match read_capped(&mut response, MODEL_LIST_MAX_BYTES).await {
            Ok(body) => body,
            Err(ReadError::TooLarge) => return Err(failed("the model list is too large")),
            Err(ReadError::Transport(err)) => return Err(self.transport_failure(err, &url)),
        };
        wire::model_names(self.config.kind, &body)
            .ok_or_else(|| failed("the model list is malformed"))
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(String, FinishReason, TokenCounts), LlmError> {
        let url = self.endpoint(Endpoint::Chat);
        let body = wire::chat_body(self.config.kind, request);
        let mut response = self
            .request(Method::POST, &url)
            .json(&body)
            .send()
            .await
            .map_err(|err| self.transport_failure(err, &url))?;
        let status = response.status();
        if status == StatusCode::NOT_FOUND {
            return Err(LlmError::ModelNotAvailable);
        }
        if status != StatusCode::OK {
            let body = read_prefix(response).await;
            let model_not_found = serde_json::from_slice::<serde_json::Value>(&body)
                .is_ok_and(|document| wire::says_model_not_found(&document));
            if model_not_found {
                return Err(LlmError::ModelNotAvailable);
            }
            return Err(status_failure(status, &body));
        }

        // Some OpenAI-compatible servers ignore `stream: true` and send one JSON completion.
        let whole = self.config.kind == BackendKind::OpenAiCompatible
            && response
                .headers()
                .get(header::CONTENT_TYPE)
                .is_some_and(|value| value.as_bytes().starts_with(b"application/json"));
        let mut document = Vec::new();
        let mut decoder = StreamDecoder::new(self.config.kind);
        let mut events = Vec::new();
        let mut content = String::new();
        let mut received = 0_usize;
        loop {
            let chunk = response
                .chunk()
                .await
                .map_err(|err| self.transport_failure(err, &url))?;
            match &chunk {
                Some(bytes) => {
                    received = received.saturating_add(bytes.len());
                    if received > STREAM_MAX_BYTES {
                        return Err(failed("the completion stream is too large"));
                    }
                    if whole {
                        document.extend_from_slice(bytes);
                    } else {
                        decoder.feed(bytes, &mut events);
                    }
                }
                None if whole => decoder.whole(&document, &mut events),
                None => decoder.end(&mut events),
            }
            for event in events.drain(..) {
                match event {
                    Event::Delta(delta) => {
                        on_delta(&delta);
                        content.push_str(&delta);
                    }
                    // Nothing after the end marker is read: a backend that keeps sending has
                    // its connection closed when the response is dropped.
                    Event::Done(finish_reason, tokens) => {
                        return Ok((content, finish_reason, tokens));
                    }
                    Event::Error(err) => return Err(err),
                }
            }
            if chunk.is_none() {
                return Err(failed("the completion stream ended before it was done"));
            }
        }
    }

    async fn post_exact_within(
        &self,
        url: reqwest::Url,
        body: &serde_json::Value,
        max_body: usize,
    ) -> Result<RawResponse, TransportError> {
        let mut response = self
            .authorize(self.http.post(url))
            .header(header::ACCEPT_ENCODING, "identity")
            .header(header::ACCEPT, "application/json")
            .json(body)
            .send()
            .await
            .map_err(|err| transport_error(&err))?;
        let status = response.status().as_u16();
        let content_encoding = response
            .headers()
            .get(header::CONTENT_ENCODING)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
        let body = read_capped(&mut response, max_body)
            .await
            .map_err(|err| match err {
                ReadError::TooLarge => TransportError::TooLarge,
                ReadError::Transport(err) => transport_error(&err),
            })?;
        Ok(RawResponse {
            status,
            content_encoding,
            body,
        })
    }

    fn endpoint(&self, endpoint: Endpoint) -> String {
        let base = &self.base;
        match (self.config.kind, endpoint) {
            (BackendKind::Ollama, Endpoint::Models) => format!("{base}/api/tags"),
            (BackendKind::Ollama, Endpoint::Chat) => format!("{base}/api/chat"),
            // A base already ending in `/v1` (as the OpenAI SDKs configure it) is not doubled.
            (BackendKind::OpenAiCompatible, endpoint) => {
                let v1 = if base.ends_with("/v1") { "" } else { "/v1" };
                let path = match endpoint {
                    Endpoint::Models => "models",
                    Endpoint::Chat => "chat/completions",
                };
                format!("{base}{v1}/{path}")
            }
        }
    }

    /// A request with the auth header, and without compression: the client has no decoder
    /// for it, and a compressed stream could not be read line by line.
    fn request(&self, method: Method, url: &str) -> RequestBuilder {
        self.authorize(self.http.request(method, url))
            .header(header::ACCEPT_ENCODING, "identity")
    }

    fn authorize(&self, request: RequestBuilder) -> RequestBuilder {
        match &self.auth {
            Some((name, value)) => request.header(name.clone(), value.clone()),
            None => request,
        }
    }

    fn transport_failure(&self, err: reqwest::Error, url: &str) -> LlmError {
        if err.is_timeout() {
            return LlmError::Timeout;
        }
        failed(&describe(err, &[url, &self.base, &self.config.base_url]))
    }
}

#[derive(Debug, Clone, Copy)]
enum Endpoint {
    Models,
    Chat,
}

/// Checks the base URL and returns it without its trailing slash, ready for paths.
fn validate_base_url(raw: &str) -> Result<String, LlmError> {
    let url = reqwest::Url::parse(raw).map_err(|_| failed("the base URL is not a valid URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(failed("the base URL must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(failed("the base URL has no host"));
    }
    // Paths are appended to the base, so a query or fragment would end up in the wrong place.
    if url.query().is_some() || url.fragment().is_some() {
        return Err(failed("the base URL must not have a query or fragment"));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

fn auth_header(config: &BackendConfig) -> Result<Option<(HeaderName, HeaderValue)>, LlmError> {
    let Some(key) = &config.api_key else {
        return Ok(None);
    };
    let (name, value) = match config.auth_header {
        AuthHeader::Bearer => (
            header::AUTHORIZATION,
            HeaderValue::try_from(format!("Bearer {}", key.expose())),
        ),
        AuthHeader::ApiKey => (
            HeaderName::from_static("api-key"),
            HeaderValue::try_from(key.expose()),
        ),
    };
    let mut value = value.map_err(|_| failed("the API key cannot be sent in a header"))?;
    value.set_sensitive(true);
    Ok(Some((name, value)))
}

fn failed(reason: &str) -> LlmError {
    LlmError::Failed {
        backend_error: reason.to_owned(),
    }
}

/// At most [`BACKEND_ERROR_MAX_CHARS`] characters of `text`.
fn truncate(text: &str) -> String {
    text.chars().take(BACKEND_ERROR_MAX_CHARS).collect()
}

/// A non-200 answer: the backend's own words if it gave any, else the status.
fn status_failure(status: StatusCode, body: &[u8]) -> LlmError {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        failed(&format!("HTTP {}", status.as_u16()))
    } else {
        failed(&truncate(text))
    }
}

/// A transport error as a short text: the error and its causes, without any URL, since a
/// URL may carry credentials (`user:password@`) and `backend_error` reaches the platform.
fn describe(err: reqwest::Error, urls: &[&str]) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    // Causes are other crates' errors; none should name the URL, but this is not left to them.
    for url in urls.iter().filter(|url| !url.is_empty()) {
        text = text.replace(url, "<backend>");
    }
    truncate(&text)
}

fn transport_error(err: &reqwest::Error) -> TransportError {
    if err.is_timeout() {
        TransportError::Timeout
    } else {
        TransportError::Failed
    }
}

enum ReadError {
    TooLarge,
    Transport(reqwest::Error),
}

/// The whole body, failing as soon as it would exceed `cap` (an announced length over the cap
/// fails before reading).
async fn read_capped(response: &mut Response, cap: usize) -> Result<Vec<u8>, ReadError> {
    let announced = response.content_length().unwrap_or(0);
    if usize::try_from(announced).ok().is_none_or(|len| len > cap) {
        return Err(ReadError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Transport)? {
        if chunk.len() > cap - body.len() {
            return Err(ReadError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The start of an error body, for the message; read failures just end it.
async fn read_prefix(mut response: Response) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = ERROR_BODY_MAX_BYTES - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= ERROR_BODY_MAX_BYTES {
            break;
        }
    }
    body
}

#[cfg(test)]
mod tests;
