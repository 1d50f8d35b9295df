//! The optional in-memory audit ring: correlation id, time and outcome, never any content.

use std::{
    collections::VecDeque,
    sync::{Mutex, PoisonError},
};

use time::OffsetDateTime;

use crate::{Error, limits::MAX_AUDIT_EVENTS};

/// One audited outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// The request's correlation id (or the resource id the reference uses instead).
    pub correlation_id: String,
    /// When it happened.
    pub timestamp: OffsetDateTime,
    /// What happened, e.g. `session_created` or `guidance_next_step`.
    pub outcome: String,
}

/// The ring of the last [`MAX_AUDIT_EVENTS`] events, or nothing when the audit is off.
#[derive(Debug)]
pub struct AuditLog {
    ring: Option<Mutex<VecDeque<AuditEvent>>>,
}

impl AuditLog {
    /// An audit that records only when `enabled`.
    #[must_use]
    pub fn new(enabled: bool) -> Self {
        Self {
            ring: enabled.then(|| Mutex::new(VecDeque::with_capacity(MAX_AUDIT_EVENTS))),
        }
    }

    /// Whether events are recorded, so callers can skip building them.
    #[must_use]
    pub const fn enabled(&self) -> bool {
        self.ring.is_some()
    }

    /// Records an outcome; a no-op when the audit is off.
    pub fn record(
        &self,
        correlation_id: impl Into<String>,
        outcome: impl Into<String>,
        at: OffsetDateTime,
    ) {
        let Some(ring) = &self.ring else { return };
        let mut ring = ring.lock().unwrap_or_else(PoisonError::into_inner);
        if ring.len() == MAX_AUDIT_EVENTS {
            ring.pop_front();
        }
        ring.push_back(AuditEvent {
            correlation_id: correlation_id.into(),
            timestamp: at,
            outcome: outcome.into(),
        });
    }

    /// How many events are held, and the last `limit` of them, oldest first.
    pub fn tail(&self, limit: usize) -> Result<(usize, Vec<AuditEvent>), Error> {
        let ring = self.ring.as_ref().ok_or(Error::AuditDisabled)?;
        let ring = ring.lock().unwrap_or_else(PoisonError::into_inner);
        let skip = ring.len().saturating_sub(limit);
        Ok((ring.len(), ring.iter().skip(skip).cloned().collect()))
    }

    /// Forgets every event (at shutdown).
    pub fn clear(&self) {
        if let Some(ring) = &self.ring {
            ring.lock().unwrap_or_else(PoisonError::into_inner).clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_audit_refuses_reads() {
        let audit = AuditLog::new(false);
        audit.record("a", "session_created", OffsetDateTime::now_utc());
        assert_eq!(audit.tail(10), Err(Error::AuditDisabled));
    }

    #[test]
    fn ring_keeps_the_last_thousand_and_tails_oldest_first() {
        let audit = AuditLog::new(true);
        let now = OffsetDateTime::now_utc();
        for n in 0..=MAX_AUDIT_EVENTS {
            audit.record(n.to_string(), "x", now);
        }
        let (count, events) = audit.tail(2).unwrap();
        assert_eq!(count, MAX_AUDIT_EVENTS);
        let ids: Vec<_> = events.iter().map(|e| e.correlation_id.as_str()).collect();
        assert_eq!(ids, ["999", "1000"]);
        let (_, all) = audit.tail(MAX_AUDIT_EVENTS).unwrap();
        assert_eq!(all.first().unwrap().correlation_id, "1");
    }
}
