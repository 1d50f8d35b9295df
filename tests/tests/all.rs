//! One test binary for the whole end-to-end suite, so it links once.

// Helpers outside `#[test]` functions are test code too: a failed unwrap is a failed test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::needless_pass_by_value
)]

mod suite;
