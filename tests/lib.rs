//! End-to-end tests of the workspace; the suite lives in `tests/all.rs` and its `suite/` modules.
