//! The connector (`autogpt-shim`): the platform protocol and, as they land, the session loop and
//! dispatch that execute platform requests through `local-core`.

pub mod audit;
pub mod auth;
pub mod cli;
pub mod commands;
pub mod config;
pub mod control;
pub mod daemon;
pub mod protocol;
pub mod request_log;
pub mod session;
pub mod ws;
