//! The connector (`autogpt-shim`): the platform protocol and, as they land, the session loop and
//! dispatch that execute platform requests through `local-core`.

// A library says nothing on the terminal itself: it logs through tracing or returns what a
// program prints (tests/tests/suite/tidy.rs checks this attribute stays).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod audit;
pub mod auth;
pub mod cli;
pub mod commands;
pub mod config;
pub mod control;
pub mod daemon;
pub mod error;
pub mod protocol;
pub mod request_log;
pub mod session;
pub mod ws;
