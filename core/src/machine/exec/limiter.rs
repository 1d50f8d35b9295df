//! Machine-wide command admission: concurrent commands and starts per sliding minute.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Length of the [`CommandLimiter`] sliding window.
const RATE_WINDOW: Duration = Duration::from_secs(60);

/// Which machine-wide command limit refused a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LimitExceeded {
    /// `per_minute` commands were already started in the last 60 s.
    #[error("The local executor started too many commands in the last minute.")]
    RateLimit {
        /// The configured limit, for the ERROR details.
        per_minute: usize,
    },
    /// `max` commands are already running.
    #[error("The local executor is at its concurrent command limit.")]
    Concurrency {
        /// The configured limit, for the ERROR details.
        max: usize,
    },
}

impl LimitExceeded {
    /// The protocol error code (both limits answer `SHIM_OVERLOADED`).
    #[must_use]
    pub const fn code(&self) -> &'static str {
        "SHIM_OVERLOADED"
    }
}

/// Machine-wide command admission: at most `max_concurrent` commands running and at most
/// `per_minute` started in any sliding 60 s window. Cloning shares the limits.
///
/// Only admitted commands count towards the rate: a command refused for concurrency does not
/// use up a start.
#[derive(Debug, Clone)]
pub struct CommandLimiter {
    inner: Arc<LimiterInner>,
}

#[derive(Debug)]
struct LimiterInner {
    max_concurrent: usize,
    per_minute: usize,
    state: Mutex<LimiterState>,
}

#[derive(Debug, Default)]
struct LimiterState {
    starts: VecDeque<std::time::Instant>,
    running: usize,
}

impl CommandLimiter {
    /// A limiter allowing `max_concurrent` running commands and `per_minute` starts per 60 s.
    #[must_use]
    pub fn new(max_concurrent: usize, per_minute: usize) -> Self {
        Self {
            inner: Arc::new(LimiterInner {
                max_concurrent,
                per_minute,
                state: Mutex::new(LimiterState::default()),
            }),
        }
    }

    /// Admits one command now.
    ///
    /// # Errors
    /// [`LimitExceeded`] naming the limit that refused it (the rate is checked first).
    pub fn try_acquire(&self) -> Result<CommandPermit, LimitExceeded> {
        self.try_acquire_at(std::time::Instant::now())
    }

    /// [`try_acquire`](Self::try_acquire) at `now`, so the window can be tested without waiting.
    ///
    /// # Errors
    /// As [`try_acquire`](Self::try_acquire).
    pub fn try_acquire_at(&self, now: std::time::Instant) -> Result<CommandPermit, LimitExceeded> {
        let inner = &self.inner;
        let mut state = inner.state.lock().unwrap_or_else(PoisonError::into_inner);
        // retain rather than popping the front: injected instants need not be monotonic.
        state
            .starts
            .retain(|&start| now.saturating_duration_since(start) < RATE_WINDOW);
        if state.starts.len() >= inner.per_minute {
            return Err(LimitExceeded::RateLimit {
                per_minute: inner.per_minute,
            });
        }
        if state.running >= inner.max_concurrent {
            return Err(LimitExceeded::Concurrency {
                max: inner.max_concurrent,
            });
        }
        state.starts.push_back(now);
        state.running += 1;
        Ok(CommandPermit {
            limiter: Arc::clone(inner),
        })
    }

    /// Commands currently holding a permit.
    #[must_use]
    pub fn running(&self) -> usize {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .running
    }
}

/// One admitted command; dropping it frees its concurrency slot (its start still counts
/// towards the rate until it leaves the window).
#[derive(Debug)]
#[must_use = "the command is only admitted while the permit is held"]
pub struct CommandPermit {
    limiter: Arc<LimiterInner>,
}

impl Drop for CommandPermit {
    fn drop(&mut self) {
        let mut state = self
            .limiter
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.running = state.running.saturating_sub(1);
    }
}
