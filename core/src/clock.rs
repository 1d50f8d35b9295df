//! The one source of "now": the system clock in production, a settable clock in tests.

use std::sync::{Arc, Mutex, PoisonError};

use time::{
    OffsetDateTime, UtcOffset, format_description::BorrowedFormatItem, macros::format_description,
};

/// Where every operation reads the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time in UTC.
    fn now(&self) -> OffsetDateTime;
}

/// The machine's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// A clock that starts at the system time and moves only when told to, so expiry is testable.
#[derive(Debug, Clone)]
pub struct ManualClock {
    offset: Arc<Mutex<time::Duration>>,
}

impl ManualClock {
    /// A clock that reads the system time until it is advanced.
    #[must_use]
    pub fn new() -> Self {
        Self {
            offset: Arc::new(Mutex::new(time::Duration::ZERO)),
        }
    }

    /// Moves this clock (and every clone of it) forward.
    pub fn advance(&self, by: std::time::Duration) {
        let mut offset = self.offset.lock().unwrap_or_else(PoisonError::into_inner);
        *offset += by;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        let offset = *self.offset.lock().unwrap_or_else(PoisonError::into_inner);
        OffsetDateTime::now_utc() + offset
    }
}

const ISO_MICROS: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]+00:00");

/// Formats a time the way the reference does: microseconds and an explicit `+00:00`.
#[must_use]
pub fn iso_utc(at: OffsetDateTime) -> String {
    at.to_offset(UtcOffset::UTC)
        .format(ISO_MICROS)
        .unwrap_or_default()
}

/// Whole seconds from `now` until `at`, floored and never negative.
#[must_use]
pub fn whole_seconds_until(now: OffsetDateTime, at: OffsetDateTime) -> u64 {
    u64::try_from((at - now).whole_seconds()).unwrap_or(0)
}

/// Adds a std duration to a time, saturating instead of panicking.
#[must_use]
pub fn after(at: OffsetDateTime, by: std::time::Duration) -> OffsetDateTime {
    at.checked_add(time::Duration::try_from(by).unwrap_or(time::Duration::MAX))
        .unwrap_or(at)
}

/// Parses an ISO-8601 timestamp that carries an explicit offset (`Z` or `±HH:MM`).
///
/// Naive timestamps are refused: an observation's age cannot be judged without its offset.
#[must_use]
pub fn parse_aware(text: &str) -> Option<OffsetDateTime> {
    use time::format_description::well_known::Rfc3339;
    let normalised: String;
    let mut candidate = text;
    // The reference also accepts a space between date and time; RFC 3339 wants a `T`.
    if text.len() > 10 && text.as_bytes()[10] == b' ' {
        normalised = format!("{}T{}", &text[..10], &text[11..]);
        candidate = &normalised;
    }
    OffsetDateTime::parse(candidate, &Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_has_micros_and_explicit_offset() {
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_796_206_740_968_261_000).unwrap();
        assert_eq!(iso_utc(at), "2026-12-02T10:19:00.968261+00:00");
    }

    #[test]
    fn only_aware_timestamps_parse() {
        assert!(parse_aware("2026-12-02T10:19:00Z").is_some());
        assert!(parse_aware("2026-12-02T10:19:00.5+02:00").is_some());
        assert!(parse_aware("2026-12-02 10:19:00+00:00").is_some());
        assert!(parse_aware("2026-12-02T10:19:00").is_none());
        assert!(parse_aware("yesterday").is_none());
    }

    #[test]
    fn manual_clock_advances_all_clones() {
        let clock = ManualClock::new();
        let other = clock.clone();
        let before = other.now();
        clock.advance(std::time::Duration::from_secs(3600));
        assert!(other.now() - before >= time::Duration::seconds(3600));
    }
}
