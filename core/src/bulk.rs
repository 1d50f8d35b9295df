//! The capacity of a buffer that carries bulk content (a file read's text or base64, the frame
//! that carries it, a re-encoded screenshot), chosen so that the allocator maps it on its own
//! and unmaps it when freed.
//!
//! Why: glibc's malloc serves a large request from a mapping of its own only while the request
//! is above a threshold, and it raises that threshold to the size of every such mapping freed,
//! up to 32 MiB. After one 8 MiB FILE_READ the next reply's 11 MB buffers therefore came from
//! a thread's arena, and an arena keeps what it once held: twenty reads left the idle connector
//! 58 MiB resident (issue 21), and the API's sanitiser threads kept megabytes after an image
//! load the same way. A request above 32 MiB is always mapped and freeing it never
//! moves the threshold; only the pages written become resident, so reserving 33 MiB for an
//! 11 MB buffer costs address space, not memory. Windows' heap and macOS's malloc also map a
//! request this large by itself and back its pages as they are touched.

/// Buffers shorter than this are ordinary allocations: a small read's copy is not worth a
/// mapping of its own.
pub const BULK_MIN: usize = 1024 * 1024;

/// The capacity a bulk buffer is given at least: above glibc's largest mmap threshold
/// (`DEFAULT_MMAP_THRESHOLD_MAX`, 32 MiB on 64-bit targets).
pub const MAPPED_CAPACITY: usize = 33 * 1024 * 1024;

/// The capacity to allocate for a buffer that will hold `len` bytes.
#[must_use]
pub const fn capacity(len: usize) -> usize {
    if len < BULK_MIN || len > MAPPED_CAPACITY {
        len
    } else {
        MAPPED_CAPACITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bulk_buffers_below_the_mapped_capacity_grow_to_it() {
        assert_eq!(capacity(0), 0);
        assert_eq!(capacity(BULK_MIN - 1), BULK_MIN - 1);
        assert_eq!(capacity(BULK_MIN), MAPPED_CAPACITY);
        assert_eq!(capacity(11_184_812), MAPPED_CAPACITY);
        assert_eq!(capacity(MAPPED_CAPACITY), MAPPED_CAPACITY);
        assert_eq!(capacity(MAPPED_CAPACITY + 1), MAPPED_CAPACITY + 1);
    }
}
