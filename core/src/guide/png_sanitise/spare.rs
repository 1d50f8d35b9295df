//! The encoder's output buffers, kept for the next image while image work goes on, so a load of
//! images reuses pages instead of mapping and faulting in a fresh buffer for every image.
//!
//! Why: every output buffer is a mapping of its own (`crate::bulk`), so it goes back to the
//! system when freed; but then each 1600×1600 screenshot's 1.2 MB output faulted in 300 fresh
//! pages, half a millisecond of the API's CPU per image under load. Buffers are kept only while
//! some image is being sanitised, and freed when the last one ends, so nothing stays resident
//! after a load.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::bulk;

/// Buffers kept at most: the API sanitises two images at once.
const MAX_KEPT: usize = 2;

/// Spare output buffers and the image work they are kept for.
#[derive(Debug)]
pub(super) struct Spare {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Sanitisings running now.
    running: usize,
    /// Buffers given back while one ran.
    kept: Vec<Vec<u8>>,
}

/// The process's spare buffers.
pub(super) static SPARE: Spare = Spare::new();

impl Spare {
    const fn new() -> Self {
        Self {
            state: Mutex::new(State {
                running: 0,
                kept: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts image work as running until the guard is dropped.
    pub(super) fn running(&self) -> Running<'_> {
        self.lock().running += 1;
        Running { spare: self }
    }

    /// An empty buffer for up to `len` bytes: a kept one, or a new one (`crate::bulk`).
    pub(super) fn take(&self, len: usize) -> Vec<u8> {
        let kept = self.lock().kept.pop();
        match kept {
            Some(mut buffer) if buffer.capacity() >= len => {
                buffer.clear();
                buffer
            }
            _ => Vec::with_capacity(bulk::capacity(len)),
        }
    }

    /// Keeps `buffer` for the next image while image work is running and fewer than
    /// [`MAX_KEPT`] are kept; frees it otherwise. Buffers too small to be mappings of their
    /// own are ordinary allocations, and not kept.
    pub(super) fn give_back(&self, buffer: Vec<u8>) {
        if buffer.capacity() < bulk::MAPPED_CAPACITY {
            return;
        }
        let mut buffer = Some(buffer);
        {
            let mut state = self.lock();
            if state.running > 0 && state.kept.len() < MAX_KEPT {
                state.kept.extend(buffer.take());
            }
        }
        // Unmapped, when not kept, outside the lock.
        drop(buffer);
    }

    #[cfg(test)]
    fn kept(&self) -> usize {
        self.lock().kept.len()
    }
}

/// Image work in progress; the last one to end frees the kept buffers.
pub(super) struct Running<'a> {
    spare: &'a Spare,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let freed = {
            let mut state = self.spare.lock();
            state.running = state.running.saturating_sub(1);
            if state.running == 0 {
                std::mem::take(&mut state.kept)
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

    fn bulk_buffer() -> Vec<u8> {
        let mut buffer = Vec::with_capacity(bulk::MAPPED_CAPACITY);
        buffer.extend_from_slice(b"old image");
        buffer
    }

    #[test]
    fn a_buffer_is_kept_only_while_image_work_runs_and_comes_back_empty() {
        let spare = Spare::new();
        spare.give_back(bulk_buffer());
        assert_eq!(spare.kept(), 0, "kept with no work running");

        let running = spare.running();
        let buffer = bulk_buffer();
        let address = buffer.as_ptr();
        spare.give_back(buffer);
        assert_eq!(spare.kept(), 1);
        let again = spare.take(1_000);
        assert_eq!(again.as_ptr(), address, "not the kept buffer");
        assert!(again.is_empty());
        assert_eq!(spare.kept(), 0);

        spare.give_back(again);
        assert_eq!(spare.kept(), 1);
        drop(running);
        assert_eq!(spare.kept(), 0, "still kept after the last work ended");
    }

    #[test]
    fn at_most_two_are_kept_and_small_buffers_never() {
        let spare = Spare::new();
        let outer = spare.running();
        let inner = spare.running();
        for _ in 0..4 {
            spare.give_back(bulk_buffer());
        }
        spare.give_back(Vec::with_capacity(1024));
        assert_eq!(spare.kept(), MAX_KEPT);
        drop(inner);
        assert_eq!(spare.kept(), MAX_KEPT, "freed while other work still runs");
        drop(outer);
        assert_eq!(spare.kept(), 0);
    }

    #[test]
    fn a_new_buffer_is_a_bulk_one() {
        let spare = Spare::new();
        assert!(spare.take(2_000_000).capacity() >= bulk::MAPPED_CAPACITY);
        assert_eq!(spare.take(10).capacity(), 10);
    }
}
