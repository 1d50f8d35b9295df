//! The OpenAI-compatible model provider (`MSGUIDE_GUIDANCE_PROVIDER=openai-compatible`).
//!
//! One POST per guidance request to exactly the configured URL, in JSON mode, with the
//! sanitised screenshot only when the user shared it; the answer is checked strictly and fails
//! closed. The model can only pick an observed element by index: it cannot invent a target,
//! cite sources, call tools or point the user at a URL.
//!
//! Configuration follows the reference (remote `https` model only with
//! `MSGUIDE_ALLOW_REMOTE_MODEL=true` and an API key) plus one local extension: a loopback model
//! (host `localhost`, `127.0.0.0/8` or `[::1]`, `http` or `https`) needs no approval flag, and
//! its API key is optional, because a llama.cpp server on this machine usually has no auth; with
//! no key no auth header is sent.
//!
//! This module builds requests and judges answers; the HTTP exchange itself is
//! [`LlmClient::post_exact`]'s. It never logs, and no provider text leaves it: every failure
//! becomes [`ProviderError::Timeout`] or [`ProviderError::InvalidResult`].
//!
//! Layout (everything public is re-exported here, so callers name `openai::…`):
//! - this file: the limits, the transport [`Timeouts`] and [`OpenAiProvider`], which runs one
//!   call;
//! - `config`: checking the settings into a [`ModelConfig`] (URL, loopback, name, key);
//! - `request`: the chat-completions body and the call's deadline;
//! - `answer`: strict parsing of the envelope and the model's JSON into a guidance result.

mod answer;
mod config;
mod plan;
mod request;

pub use answer::parse_response;
pub use config::{InvalidModelConfig, ModelConfig, ModelSettings};
pub use plan::{parse_plan, plan_schema, task_json};
pub use request::{SYSTEM_POLICY, call_deadline, plan_call_deadline, request_body};

use std::{sync::Arc, time::Duration};

use super::{
    model::{GuidanceResult, Mode},
    provider::{GuidanceProvider, ProviderError, ProviderFuture, ProviderRequest},
};
use crate::{
    clock::Clock,
    llm::{BackendConfig, BackendKind, LlmClient, LlmError, TransportError},
};
use config::origin;

/// The provider's configuration name.
pub const PROVIDER_NAME: &str = "openai-compatible";

/// Longest model URL, in characters.
pub const MAX_URL_CHARS: usize = 4096;

/// Longest model name, in characters.
pub const MAX_MODEL_NAME_CHARS: usize = 256;

/// Longest API key, in bytes (all printable ASCII).
pub const MAX_API_KEY_BYTES: usize = 8192;

/// Tokens a legacy (single-step) answer may use.
pub const MAX_TOKENS: u32 = 1200;

/// Largest response envelope read from the model server.
pub const MAX_ENVELOPE_BYTES: usize = 128 * 1024;

/// Largest `message.content`, in UTF-8 bytes.
pub const MAX_CONTENT_BYTES: usize = 16 * 1024;

/// Largest `message.content` of a plan answer, in UTF-8 bytes.
pub const MAX_PLAN_CONTENT_BYTES: usize = 64 * 1024;

/// Tokens a plan answer may use.
pub const PLAN_MAX_TOKENS: u32 = 8000;

/// The whole call's cap for a plan answer.
pub const PLAN_CALL_TIMEOUT: Duration = Duration::from_secs(50);

/// Longest instruction the model may write, in characters; the completion prefix still fits the
/// result contract's 4000.
pub const MAX_MODEL_INSTRUCTION_CHARS: usize = 3800;

/// Prepended to a model's `completed` answer, which becomes a `completion_candidate`: a model
/// cannot prove the task is done, only suggest that the user check.
pub const COMPLETION_PREFIX: &str =
    "Suggested completion only; verify with fresh screen evidence: ";
/// The whole call's cap for a legacy answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// TCP/TLS connect timeout.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The socket (read) timeout of a legacy call: the longest the model server may stay silent,
/// before its answer's headers or between two reads of the body.
pub const SOCKET_TIMEOUT: Duration = Duration::from_secs(8);

/// The socket (read) timeout of a plan call.
pub const PLAN_SOCKET_TIMEOUT: Duration = Duration::from_secs(48);

/// The transport timeouts of one provider. The whole-call deadlines ([`CALL_TIMEOUT`],
/// [`PLAN_CALL_TIMEOUT`], shortened by the observation's age) apply on top.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP/TLS connect.
    pub connect: Duration,
    /// Socket timeout of a legacy (single-step) call.
    pub socket: Duration,
    /// Socket timeout of a plan call.
    pub plan_socket: Duration,
}

impl Timeouts {
    /// The reference's figures: connect 3 s, socket 8 s (legacy) and 48 s (plan).
    pub const REFERENCE: Self = Self {
        connect: CONNECT_TIMEOUT,
        socket: SOCKET_TIMEOUT,
        plan_socket: PLAN_SOCKET_TIMEOUT,
    };
}

/// Listing models is never used by this provider; the client still wants a value.
const LIST_TIMEOUT: Duration = Duration::from_secs(2);

/// The OpenAI-compatible guidance provider.
#[derive(Debug)]
pub struct OpenAiProvider {
    /// The client of legacy calls, with the legacy socket timeout.
    client: LlmClient,
    /// The client of plan calls: the same settings but the plan's socket timeout, which the
    /// HTTP client library fixes per client, not per request.
    plan_client: LlmClient,
    config: ModelConfig,
    clock: Arc<dyn Clock>,
}

impl OpenAiProvider {
    /// A provider for a validated configuration with the reference's [`Timeouts`]; `clock`
    /// must be the one the route uses, so that the observation's age is judged the same way on
    /// both sides.
    ///
    /// # Errors
    /// [`LlmError`] when the HTTP client cannot be built.
    pub fn new(config: ModelConfig, clock: Arc<dyn Clock>) -> Result<Self, LlmError> {
        Self::with_timeouts(config, clock, Timeouts::REFERENCE)
    }

    /// As [`OpenAiProvider::new`] with other transport timeouts (tests use short ones).
    ///
    /// # Errors
    /// [`LlmError`] when the HTTP client cannot be built.
    pub fn with_timeouts(
        config: ModelConfig,
        clock: Arc<dyn Clock>,
        timeouts: Timeouts,
    ) -> Result<Self, LlmError> {
        let backend = BackendConfig {
            kind: BackendKind::OpenAiCompatible,
            // Every request goes to the exact URL; the client's base is only checked, and it
            // refuses a query, which a chat-completions URL may carry (`?api-version=`).
            base_url: origin(&config.url).to_owned(),
            api_key: config.api_key.clone(),
            auth_header: config.auth_header,
            connect_timeout: timeouts.connect,
            total_timeout: CALL_TIMEOUT,
            list_timeout: LIST_TIMEOUT,
        };
        let plan_client = LlmClient::with_read_timeout(
            BackendConfig {
                total_timeout: PLAN_CALL_TIMEOUT,
                ..backend.clone()
            },
            timeouts.plan_socket,
        )?;
        let client = LlmClient::with_read_timeout(backend, timeouts.socket)?;
        Ok(Self {
            client,
            plan_client,
            config,
            clock,
        })
    }

    async fn call(&self, request: ProviderRequest<'_>) -> Result<GuidanceResult, ProviderError> {
        let observation = request.observation;
        let now = self.clock.now();
        let deadline = if request.plan {
            plan_call_deadline(observation.captured_at, now)
        } else {
            call_deadline(observation.captured_at, now)
        };
        let deadline = deadline
            .map(|d| d.min(request.budget))
            .filter(|d| !d.is_zero())
            .ok_or(ProviderError::Timeout)?;
        let body = request_body(&self.config.name, &request)?;
        let client = if request.plan {
            &self.plan_client
        } else {
            &self.client
        };
        let post = client.post_exact(&self.config.url, &body, MAX_ENVELOPE_BYTES, deadline);
        // The client enforces the deadline too; this outer bound keeps the 10-second (plan:
        // 50-second) promise whatever the transport does. A socket timeout, like the connect
        // timeout and the deadline, is a timeout (504), not an invalid result.
        let response = match tokio::time::timeout(deadline, post).await {
            Err(_) | Ok(Err(TransportError::Timeout)) => return Err(ProviderError::Timeout),
            Ok(Err(TransportError::Failed | TransportError::TooLarge)) => {
                return Err(ProviderError::InvalidResult);
            }
            Ok(Ok(response)) => response,
        };
        parse_response(&response, observation, request.plan)
    }
}

impl GuidanceProvider for OpenAiProvider {
    fn name(&self) -> &'static str {
        PROVIDER_NAME
    }

    fn mode(&self) -> Mode {
        Mode::Model
    }

    fn guide<'a>(&'a self, request: ProviderRequest<'a>) -> ProviderFuture<'a> {
        Box::pin(self.call(request))
    }
}

#[cfg(test)]
mod tests;
