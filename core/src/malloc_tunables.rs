//! The one allocator decision: glibc's own malloc, with its mmap threshold fixed at 1 MiB
//! through `GLIBC_TUNABLES`, set by whoever starts a long-running program (the launcher for
//! the API and the desktop client, the systemd unit for the connector).
//!
//! Left alone, glibc raises its mmap threshold each time a large block is freed, so the next
//! image or 8 MiB file read is served from an arena that keeps the pages: 11.7 MiB of private
//! memory stayed in the API 10 s after image load, 54.6 MiB in the connector after twenty
//! 8 MiB reads. With the threshold fixed, blocks of 1 MiB and more go back to the kernel when
//! freed: 4.6 MiB and 1.3 MiB, at the same CPU per image and the same read throughput.
//! mimalloc (12.3 / 56.5 MiB) and jemalloc (9.1 / 3.5 MiB) as preloaded allocators did worse
//! on the same benches. Other C libraries ignore the variable.
//! The one cost, a fresh mapping for every image's output buffer, is what the sanitiser's
//! spare buffers (`guide::png_sanitise::spare`) take back.

use std::ffi::{OsStr, OsString};

/// The environment variable glibc reads its tunables from, once, at a program's start.
pub const VAR: &str = "GLIBC_TUNABLES";

/// The tunable: allocations of 1 MiB and more are mapped and unmapped on their own.
pub const MMAP_THRESHOLD: &str = "glibc.malloc.mmap_threshold=1048576";

/// The value of [`VAR`] for a child, given the one it would inherit: the person's own tunables
/// are kept, and ours is added unless they chose a threshold themselves.
#[must_use]
pub fn for_child(inherited: Option<&OsStr>) -> OsString {
    match inherited.filter(|value| !value.is_empty()) {
        None => OsString::from(MMAP_THRESHOLD),
        Some(value) => {
            let chose_threshold = value
                .to_string_lossy()
                .split(':')
                .any(|tunable| tunable.starts_with("glibc.malloc.mmap_threshold="));
            let mut value = value.to_os_string();
            if !chose_threshold {
                value.push(":");
                value.push(MMAP_THRESHOLD);
            }
            value
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ours_alone_when_nothing_is_inherited() {
        assert_eq!(for_child(None), MMAP_THRESHOLD);
        assert_eq!(for_child(Some(OsStr::new(""))), MMAP_THRESHOLD);
    }

    #[test]
    fn the_persons_tunables_are_kept() {
        assert_eq!(
            for_child(Some(OsStr::new("glibc.malloc.arena_max=2"))),
            format!("glibc.malloc.arena_max=2:{MMAP_THRESHOLD}").as_str()
        );
        let theirs = "glibc.malloc.mmap_threshold=65536:glibc.malloc.arena_max=2";
        assert_eq!(for_child(Some(OsStr::new(theirs))), theirs);
    }
}
