//! The legacy assist route: intent words and two bundled public sample passages.

use time::OffsetDateTime;
use uuid::Uuid;

use crate::{Error, LocalState, guide::guidance::check_freshness};

/// What kind of answer the prompt asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestType {
    /// How to do something (`how`, `steps`, `show`, ...).
    Guide,
    /// A request to act (`run`, `create`, `delete`, ...); answered without passages.
    Action,
    /// A question to look up (`what`, `where`, `find`, ...).
    Retrieve,
    /// Anything else.
    Explain,
}

impl RequestType {
    /// The wire spelling.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Guide => "guide",
            Self::Action => "action",
            Self::Retrieve => "retrieve",
            Self::Explain => "explain",
        }
    }
}

/// How sensitive an assist context claims to be; only public sample data is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sensitivity {
    /// Public data: the only kind accepted.
    Public,
    /// Internal to an organisation.
    Internal,
    /// Confidential.
    Confidential,
    /// Restricted.
    Restricted,
}

/// The parts of an assist context the rules look at.
#[derive(Debug, Clone)]
pub struct AssistContext {
    /// The session it claims to belong to; must be the request's.
    pub session_id: String,
    /// How sensitive it claims to be.
    pub sensitivity: Sensitivity,
    /// When it was produced; checked for freshness when given.
    pub timestamp: Option<OffsetDateTime>,
}

/// A bundled sample passage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Passage {
    /// Its title.
    pub title: &'static str,
    /// Where it is published.
    pub source: &'static str,
    /// When it last changed (RFC 3339).
    pub modified: &'static str,
    /// Its text, the answer when it is cited.
    pub content: &'static str,
    keywords: &'static [&'static str],
}

const PASSAGES: [Passage; 2] = [
    Passage {
        title: "Sample Deployment Guide",
        source: "https://example.invalid/msguide/samples/deployment",
        modified: "2026-09-01T00:00:00+00:00",
        content: "Sample only: deploy to a test environment, run smoke tests, and review the result before considering production.",
        keywords: &["deploy", "deployment", "deployments", "staging"],
    },
    Passage {
        title: "Sample Build Troubleshooting",
        source: "https://example.invalid/msguide/samples/build",
        modified: "2026-09-01T00:00:00+00:00",
        content: "Sample only: for build exit code 1, inspect compiler errors and missing dependencies in the build log.",
        keywords: &[
            "build",
            "compiler",
            "error",
            "errors",
            "troubleshooting",
            "dependencies",
        ],
    },
];

const NO_PASSAGE: &str =
    "Demo only: no supporting sample passage was found; no action was performed.";

/// The answer to an assist request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistAnswer {
    /// The id of this answer in the audit ring.
    pub correlation_id: Uuid,
    /// How the prompt was classified.
    pub request_type: RequestType,
    /// The cited passages' text, or the no-passage notice.
    pub answer: String,
    /// The passages cited.
    pub citations: Vec<Passage>,
}

/// Case-folded word tokens, as `\b\w+\b` finds them.
fn words(prompt: &str) -> Vec<String> {
    prompt
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Classifies a prompt by its words; the first matching class wins.
#[must_use]
pub fn classify(prompt: &str) -> RequestType {
    let words = words(prompt);
    let any = |set: &[&str]| words.iter().any(|w| set.contains(&w.as_str()));
    if any(&["how", "step", "steps", "show", "guide", "highlight"]) {
        RequestType::Guide
    } else if any(&["execute", "run", "perform", "create", "delete", "modify"]) {
        RequestType::Action
    } else if any(&["what", "where", "find", "search", "tell", "explain"]) {
        RequestType::Retrieve
    } else {
        RequestType::Explain
    }
}

/// The sample passages whose keywords the prompt mentions, in bundled order.
#[must_use]
pub fn retrieve(prompt: &str) -> Vec<Passage> {
    let words = words(prompt);
    PASSAGES
        .into_iter()
        .filter(|p| p.keywords.iter().any(|k| words.iter().any(|w| w == k)))
        .collect()
}

impl LocalState {
    /// Answers a legacy assist request from the bundled samples.
    ///
    /// # Errors
    /// The session's errors, [`Error::ContextSessionMismatch`], [`Error::NonPublicContext`] or
    /// a stale context timestamp.
    pub fn assist(
        &self,
        owner: &str,
        session_id: &str,
        prompt: &str,
        context: Option<&AssistContext>,
    ) -> Result<AssistAnswer, Error> {
        self.check_session(owner, session_id)?;
        if let Some(context) = context {
            if context.session_id != session_id {
                return Err(Error::ContextSessionMismatch);
            }
            if context.sensitivity != Sensitivity::Public {
                return Err(Error::NonPublicContext);
            }
            if let Some(timestamp) = context.timestamp {
                check_freshness(timestamp, self.now())?;
            }
        }
        let request_type = classify(prompt);
        let citations = if request_type == RequestType::Action {
            Vec::new()
        } else {
            retrieve(prompt)
        };
        let answer = if citations.is_empty() {
            NO_PASSAGE.to_owned()
        } else {
            citations
                .iter()
                .map(|p| p.content)
                .collect::<Vec<_>>()
                .join("\n\n")
        };
        let correlation_id = crate::secret::new_id();
        self.audit.record(
            correlation_id.to_string(),
            format!("assist_{}", request_type.as_str()),
            self.now(),
        );
        Ok(AssistAnswer {
            correlation_id,
            request_type,
            answer,
            citations,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intent_words() {
        for (prompt, kind) in [
            ("How do I deploy?", RequestType::Guide),
            ("How do I create a work item?", RequestType::Guide),
            ("Create a work item", RequestType::Action),
            ("documentation about runtime", RequestType::Explain),
            ("Find build errors", RequestType::Retrieve),
            ("HOW", RequestType::Guide),
        ] {
            assert_eq!(classify(prompt), kind, "{prompt}");
        }
    }

    #[test]
    fn retrieval_is_keyword_only_and_ordered() {
        let titles = |p: &str| retrieve(p).iter().map(|p| p.title).collect::<Vec<_>>();
        assert_eq!(titles("How do I deploy?"), ["Sample Deployment Guide"]);
        assert_eq!(
            titles("build errors before deployment"),
            ["Sample Deployment Guide", "Sample Build Troubleshooting"]
        );
        assert!(titles("deploying").is_empty());
    }
}
