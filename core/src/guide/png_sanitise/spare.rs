//! The re-encoder's spare output buffers, kept only while images are being sanitised.
//!
//! Why they exist: the launcher fixes glibc's mmap threshold at 1 MiB (`crate::malloc_tunables`),
//! so each image's output buffer (2 MB of capacity) is mapped on its own and its pages are
//! faulted in afresh. Without a spare a 1600×1600 upload took 327 page faults instead of 87
//! and about 12 % more server CPU ("server CPU per PNG" in `cargo bench -p e2e --bench api`).
//! The spares go when the last image in flight is gone, so the private memory left 10 s after
//! an image load (the same bench's RssAnon row) is not raised by them.

use std::sync::{Mutex, PoisonError};

/// Spares kept at most: one per image the API sanitises at once.
const MAX_SPARES: usize = 2;

/// The process's spares.
pub(super) static SPARE: Spare = Spare::new();

/// Output buffers of answered images, and how many images are in flight.
pub(super) struct Spare {
    state: Mutex<State>,
}

struct State {
    /// Images being sanitised plus sanitised images not yet dropped.
    in_flight: usize,
    buffers: Vec<Vec<u8>>,
}

/// One image in flight: while any is, given-back buffers are kept.
pub(super) struct InFlight(&'static Spare);

impl Spare {
    const fn new() -> Self {
        Self {
            state: Mutex::new(State {
                in_flight: 0,
                buffers: Vec::new(),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts an image in flight until the returned value is dropped.
    pub(super) fn in_flight(&'static self) -> InFlight {
        self.state().in_flight += 1;
        InFlight(self)
    }

    /// An empty buffer of at least `capacity` bytes: a spare if one is big enough.
    pub(super) fn take(&self, capacity: usize) -> Vec<u8> {
        let spare = {
            let mut state = self.state();
            let found = state.buffers.iter().position(|b| b.capacity() >= capacity);
            found.map(|at| state.buffers.swap_remove(at))
        };
        spare.unwrap_or_else(|| Vec::with_capacity(capacity))
    }

    /// Keeps `buffer` for the next image if one is in flight and it can hold any image's
    /// output; frees it otherwise, so a smaller one (a clone's) never takes a spare's place.
    pub(super) fn give_back(&self, mut buffer: Vec<u8>) {
        let mut state = self.state();
        if state.in_flight > 0
            && state.buffers.len() < MAX_SPARES
            && buffer.capacity() >= super::MAX_PNG_BYTES
        {
            buffer.clear();
            state.buffers.push(buffer);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Freed outside the lock: unmapping megabytes need not hold up other images.
        let freed = {
            let mut state = self.0.state();
            state.in_flight -= 1;
            if state.in_flight == 0 {
                std::mem::take(&mut state.buffers)
            } else {
                Vec::new()
            }
        };
        drop(freed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(spare: &Spare) -> usize {
        spare.state().buffers.len()
    }

    #[test]
    fn buffers_are_kept_while_an_image_is_in_flight_and_freed_after() {
        static ONE: Spare = Spare::new();
        const FULL: usize = super::super::MAX_PNG_BYTES;
        let first = ONE.in_flight();
        let second = ONE.in_flight();
        let buffer = ONE.take(FULL);
        assert!(buffer.capacity() >= FULL);
        let pointer = buffer.as_ptr();
        ONE.give_back(buffer);
        let again = ONE.take(1000);
        assert_eq!(again.as_ptr(), pointer, "the spare is reused");
        assert!(again.is_empty());
        ONE.give_back(again);
        ONE.give_back(Vec::with_capacity(FULL - 1));
        assert_eq!(
            kept(&ONE),
            1,
            "a buffer too small for any image is not kept"
        );
        ONE.give_back(Vec::with_capacity(FULL));
        ONE.give_back(Vec::with_capacity(FULL));
        assert_eq!(kept(&ONE), MAX_SPARES, "no more than MAX_SPARES are kept");
        assert!(
            ONE.take(FULL + 1).capacity() > FULL,
            "a spare too small is not used"
        );
        drop(first);
        assert_eq!(kept(&ONE), MAX_SPARES);
        drop(second);
        assert_eq!(kept(&ONE), 0, "the last image gone frees the spares");
        ONE.give_back(Vec::with_capacity(FULL));
        assert_eq!(kept(&ONE), 0, "nothing is kept with no image in flight");
    }
}
