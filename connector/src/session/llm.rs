//! LOCAL_LLM_COMPLETION on a data connection: the model list HELLO advertises, the
//! machine-wide one-at-a-time rule (`LOCAL_LLM_BUSY`), streamed chunks, the terminal response,
//! and one audit record with sizes and token counts, never text.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use local_core::llm::{self, ChatRequest, Completion, LlmClient, LlmError};
use serde_json::{Map, Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Host;
use super::capability::{Done, Handler, Refusal, Run};
use crate::audit::{Entry, details};
use crate::error::{WireError, reply};
use crate::protocol::{
    ChatMessage, ErrorCode, FinishReason, LocalLlmCompletionChunkPayload,
    LocalLlmCompletionPayload, LocalLlmCompletionResponsePayload, Message, MessageType, OrUnknown,
    TokenCounts,
};

/// The reference's sampling defaults when the request leaves them out.
const DEFAULT_TEMPERATURE: f64 = 0.0;
const DEFAULT_TOP_P: f64 = 1.0;

/// The machine's local model backend, shared by every connection.
#[derive(Debug, Clone)]
pub struct LocalLlm {
    client: LlmClient,
    /// One completion at a time per machine; the next is refused, never queued.
    busy: Arc<Semaphore>,
    /// The list the last HELLO advertised, for the MODEL_NOT_AVAILABLE pre-check.
    models: Arc<Mutex<Vec<String>>>,
}

impl LocalLlm {
    /// Serves completions through `client`.
    pub fn new(client: LlmClient) -> Self {
        Self {
            client,
            busy: Arc::new(Semaphore::new(1)),
            models: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Asks the backend for its models (at each HELLO) and remembers them; an unreachable
    /// backend or an empty list means the capability is not advertised.
    pub async fn refresh_models(&self) -> Vec<String> {
        let models = self.client.list_models().await.unwrap_or_default();
        models.clone_into(&mut self.models.lock().unwrap_or_else(PoisonError::into_inner));
        models
    }

    fn known_models(&self) -> Vec<String> {
        self.models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A LOCAL_LLM_COMPLETION request.
#[derive(Debug)]
pub(super) struct LlmRequest(LocalLlmCompletionPayload);

impl Handler for LlmRequest {
    type Admitted = LlmOp;

    fn from_message(message: Message) -> Result<Self, Message> {
        match message {
            Message::LocalLlmCompletion(payload) => Ok(Self(payload)),
            other => Err(other),
        }
    }

    // Unreachable: HELLO advertises local_llm only with a backend.
    fn check(&self, host: &Host) -> Result<(), Box<Refusal>> {
        match host.llm {
            Some(_) => Ok(()),
            None => Err(not_configured()),
        }
    }

    fn admit(self, host: &Host) -> Result<LlmOp, Box<Refusal>> {
        let Some(llm) = &host.llm else {
            return Err(not_configured());
        };
        LlmOp::admit(self.0, llm)
    }

    /// Aborting the future drops the backend call with it.
    async fn run(op: LlmOp, ctx: Run) -> Done {
        let (message, entry) = op.complete(&ctx).await;
        Done(message, vec![entry])
    }
}

fn not_configured() -> Box<Refusal> {
    Refusal::unaudited(reply(
        ErrorCode::FeatureNotSupported,
        "No local model backend is configured.",
        Some(json!({
            "feature": MessageType::LocalLlmCompletion.as_str(),
            "reason": "not configured",
        })),
    ))
}

/// An admitted completion, holding the machine's model slot until it is dropped.
#[derive(Debug)]
pub(super) struct LlmOp {
    payload: LocalLlmCompletionPayload,
    client: LlmClient,
    _slot: OwnedSemaphorePermit,
}

impl LlmOp {
    /// The pre-checks of the reference, in its order: the model against the advertised
    /// list, then the one-at-a-time slot. A refusal comes back as the ERROR to send.
    fn admit(payload: LocalLlmCompletionPayload, llm: &LocalLlm) -> Result<Self, Box<Refusal>> {
        let known = llm.known_models();
        if !known.is_empty() && !known.contains(&payload.model) {
            let refusal = reply(
                ErrorCode::ModelNotAvailable,
                "The requested model is not available on the local backend.",
                Some(json!({
                    "requested_model": payload.model,
                    "available_models": known,
                })),
            );
            let entry = failed(&payload, ErrorCode::ModelNotAvailable);
            return Err(Refusal::audited(refusal, entry));
        }
        let Ok(slot) = Arc::clone(&llm.busy).try_acquire_owned() else {
            let refusal = reply(
                ErrorCode::LocalLlmBusy,
                "Another local model completion is running.",
                None,
            );
            let entry = failed(&payload, ErrorCode::LocalLlmBusy);
            return Err(Refusal::audited(refusal, entry));
        };
        Ok(Self {
            payload,
            client: llm.client.clone(),
            _slot: slot,
        })
    }

    /// Runs the completion. With `stream`, every delta goes out through `ctx` as a
    /// LOCAL_LLM_COMPLETION_CHUNK (finish_reason null), then one empty chunk with the
    /// finish_reason; the returned message is the terminal response or the ERROR.
    async fn complete(self, ctx: &Run) -> (Message, Entry) {
        let started = Instant::now();
        let request = chat_request(&self.payload);
        let stream = self.payload.stream;
        let outcome = self
            .client
            .chat_stream(&request, |delta| {
                if stream {
                    ctx.stream(chunk(delta.to_owned(), None));
                }
            })
            .await;
        match outcome {
            Ok(completion) => {
                let finish_reason = finish_reason(completion.finish_reason);
                if stream {
                    ctx.stream(chunk(String::new(), Some(finish_reason)));
                }
                let entry = completed(&self.payload, &completion).with_duration(started.elapsed());
                (response(completion), entry)
            }
            Err(err) => {
                // The details name the request's model, which the error does not carry.
                let details_value = match &err {
                    LlmError::ModelNotAvailable => {
                        json!({ "requested_model": self.payload.model })
                    }
                    LlmError::Timeout => json!({ "backend_error": "timed out" }),
                    LlmError::Failed { backend_error } => {
                        json!({ "backend_error": backend_error })
                    }
                };
                let code = err.error_code();
                let entry = failed(&self.payload, code).with_duration(started.elapsed());
                (reply(code, err.to_string(), Some(details_value)), entry)
            }
        }
    }
}

fn chat_request(payload: &LocalLlmCompletionPayload) -> ChatRequest {
    ChatRequest {
        model: payload.model.clone(),
        messages: payload
            .messages
            .iter()
            .map(|ChatMessage { role, content }| llm::ChatMessage {
                role: match role {
                    OrUnknown::Known(role) => serde_json::to_value(role)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_else(|| "user".to_owned()),
                    OrUnknown::Unknown(other) => other.clone(),
                },
                content: content.clone(),
            })
            .collect(),
        max_tokens: payload.max_tokens,
        temperature: payload.temperature.unwrap_or(DEFAULT_TEMPERATURE),
        top_p: payload.top_p.unwrap_or(DEFAULT_TOP_P),
    }
}

const fn chunk(delta: String, finish_reason: Option<FinishReason>) -> Message {
    Message::LocalLlmCompletionChunk(LocalLlmCompletionChunkPayload {
        delta,
        finish_reason,
    })
}

const fn finish_reason(reason: llm::FinishReason) -> FinishReason {
    match reason {
        llm::FinishReason::Stop => FinishReason::Stop,
        llm::FinishReason::Length => FinishReason::Length,
        llm::FinishReason::ContentFilter => FinishReason::ContentFilter,
    }
}

fn response(completion: Completion) -> Message {
    Message::LocalLlmCompletionResponse(LocalLlmCompletionResponsePayload {
        finish_reason: finish_reason(completion.finish_reason),
        tokens: TokenCounts {
            prompt: completion.tokens.prompt,
            completion: completion.tokens.completion,
            total: completion.tokens.total,
        },
        duration_seconds: (completion.duration.as_secs_f64() * 1000.0).round() / 1000.0,
        content: completion.content,
    })
}

/// The reference's record: model, sizes and token counts, never the text.
fn request_details(payload: &LocalLlmCompletionPayload) -> Map<String, Value> {
    let prompt_chars: usize = payload
        .messages
        .iter()
        .map(|m| m.content.chars().count())
        .sum();
    details([
        ("model", json!(payload.model)),
        ("stream", json!(payload.stream)),
        ("prompt_chars", json!(prompt_chars)),
    ])
}

fn failed(payload: &LocalLlmCompletionPayload, code: ErrorCode) -> Entry {
    Entry::failed(
        "LOCAL_LLM_COMPLETION",
        request_details(payload),
        code.as_str(),
    )
}

fn completed(payload: &LocalLlmCompletionPayload, completion: &Completion) -> Entry {
    let mut details = request_details(payload);
    details.insert(
        "response_chars".to_owned(),
        json!(completion.content.chars().count()),
    );
    details.insert(
        "finish_reason".to_owned(),
        json!(completion.finish_reason.as_str()),
    );
    details.insert("tokens_prompt".to_owned(), json!(completion.tokens.prompt));
    details.insert(
        "tokens_completion".to_owned(),
        json!(completion.tokens.completion),
    );
    details.insert("tokens_total".to_owned(), json!(completion.tokens.total));
    Entry::ok("LOCAL_LLM_COMPLETION", details)
}
