//! The seam between the guidance route and whatever produces an answer (demo rules or a model).

use std::{future::Future, pin::Pin, time::Duration};

use super::model::{GuidanceResult, Mode, Observation, TaskProgress};
use crate::guide::error::ProviderFailure;

/// What a provider is asked.
#[derive(Debug, Clone, Copy)]
pub struct ProviderRequest<'a> {
    /// The user's request, untrusted.
    pub prompt: &'a str,
    /// The consented, sanitised observation, untrusted.
    pub observation: &'a Observation,
    /// How long the provider has; the route also enforces it.
    pub budget: Duration,
    /// The task the request belongs to, untrusted, when the client sent one.
    pub task: Option<&'a TaskProgress>,
    /// Whether a plan segment is asked for instead of a single step.
    pub plan: bool,
}

/// How a provider can fail. None of these carries provider text: it never reaches a client or log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderError {
    /// The provider ran out of time on its own.
    Timeout,
    /// The provider classified its own failure.
    Failed(ProviderFailure),
    /// The provider produced something that is not a valid result.
    InvalidResult,
    /// Anything else.
    Unexpected {
        /// A short type name such as `RuntimeError`; sanitised before anyone sees it.
        error_type: String,
    },
}

/// The future a provider returns: boxed so providers can be chosen at run time.
pub type ProviderFuture<'a> =
    Pin<Box<dyn Future<Output = Result<GuidanceResult, ProviderError>> + Send + 'a>>;

/// Turns one observation into one guidance result. Dropping the future cancels the work.
pub trait GuidanceProvider: Send + Sync + std::fmt::Debug {
    /// The provider's configuration name (`demo`, `openai-compatible`).
    fn name(&self) -> &'static str;
    /// Whether its answers are demo or model answers.
    fn mode(&self) -> Mode;
    /// Produces one result.
    fn guide<'a>(&'a self, request: ProviderRequest<'a>) -> ProviderFuture<'a>;
}

/// An exception type name fit for a header: an ASCII identifier, or `Unknown`.
#[must_use]
pub fn sanitised_type_name(name: &str) -> String {
    let mut chars = name.chars();
    let starts_well = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if starts_well && name.len() <= 128 && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        name.to_owned()
    } else {
        "Unknown".to_owned()
    }
}
