//! Local LLM client: Ollama native and OpenAI-compatible backends, bounded, shared by the API
//! (the model guidance provider) and the connector (LOCAL_LLM_COMPLETION).
//!
//! The only HTTP client in `core` (reqwest with rustls): no redirects, no environment proxies,
//! connect and total timeouts, capped response sizes. Errors keep the backend's message for
//! `details.backend_error` (truncated to 200 characters) and never carry prompt or completion
//! text; nothing here logs.
//!
//! SKELETON: the types and signatures are final; the bodies are being written.

use std::time::Duration;

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
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    #[must_use]
    pub const fn new(key: String) -> Self {
        Self(key)
    }

    /// The key, for the one header that carries it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
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
}

impl LlmClient {
    /// A client for `config`.
    ///
    /// # Errors
    /// The HTTP client cannot be built (TLS provider missing) or the base URL is not http(s).
    pub fn new(config: BackendConfig) -> Result<Self, LlmError> {
        Ok(Self { config })
    }

    /// The configuration.
    #[must_use]
    pub const fn config(&self) -> &BackendConfig {
        &self.config
    }

    /// The model names the backend offers (Ollama `models[].name`, OpenAI `data[].id`).
    ///
    /// # Errors
    /// [`LlmError`] when the backend cannot be reached or answers badly.
    pub async fn list_models(&self) -> Result<Vec<String>, LlmError> {
        Err(LlmError::Failed {
            backend_error: "not implemented yet".to_owned(),
        })
    }

    /// Runs a streaming completion, calling `on_delta` for every non-empty text delta, and
    /// returns the assembled completion. Dropping the future aborts the backend call.
    ///
    /// # Errors
    /// [`LlmError`].
    pub async fn chat_stream(
        &self,
        request: &ChatRequest,
        on_delta: impl FnMut(&str) + Send,
    ) -> Result<Completion, LlmError> {
        let _ = (request, on_delta);
        Err(LlmError::Failed {
            backend_error: "not implemented yet".to_owned(),
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
        let _ = (url, body, max_body, deadline);
        Err(TransportError::Failed)
    }
}
