//! LOCAL_LLM_* payloads (capability `local_llm`): the request, streamed chunks and the
//! terminal response.

use serde::{Deserialize, Serialize};

use super::codes::OrUnknown;
use super::messages::Payload;

/// `max_tokens` when omitted.
pub const DEFAULT_MAX_TOKENS: u32 = 1024;

/// Chat roles of v1; later minors may add more, which receivers must ignore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// System prompt.
    System,
    /// User turn.
    User,
    /// Assistant turn.
    Assistant,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who speaks; an unknown role is kept so the caller can skip the message.
    pub role: OrUnknown<ChatRole>,
    /// The text.
    pub content: String,
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// Natural end.
    Stop,
    /// `max_tokens` reached.
    Length,
    /// Filtered.
    ContentFilter,
}

/// `LOCAL_LLM_COMPLETION` (platform → shim).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalLlmCompletionPayload {
    /// One of HELLO's `local_llm_models`.
    pub model: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Upper bound on the response length.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// Sampling temperature; optional, backend default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling; optional, backend default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Stream LOCAL_LLM_COMPLETION_CHUNK frames before the response.
    #[serde(default = "yes")]
    pub stream: bool,
}

impl Payload for LocalLlmCompletionPayload {}

const fn default_max_tokens() -> u32 {
    DEFAULT_MAX_TOKENS
}

const fn yes() -> bool {
    true
}

/// `LOCAL_LLM_COMPLETION_CHUNK` (shim → platform), same id as the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalLlmCompletionChunkPayload {
    /// Text added by this chunk.
    pub delta: String,
    /// Null on every chunk except the last.
    pub finish_reason: Option<FinishReason>,
}

impl Payload for LocalLlmCompletionChunkPayload {}

/// Token counts; backends that do not report them send nulls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TokenCounts {
    /// Prompt tokens.
    pub prompt: Option<u64>,
    /// Completion tokens.
    pub completion: Option<u64>,
    /// Sum.
    pub total: Option<u64>,
}

/// `LOCAL_LLM_COMPLETION_RESPONSE` (shim → platform, terminal frame).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalLlmCompletionResponsePayload {
    /// The whole output.
    pub content: String,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
    /// Best-effort token counts.
    pub tokens: TokenCounts,
    /// Backend wall-clock seconds.
    pub duration_seconds: f64,
}

impl Payload for LocalLlmCompletionResponsePayload {}
