//! The connector (`autogpt-shim`): it dials the agent platform over WebSocket and executes the
//! platform's requests on this machine through `local-core`, jailed, limited and audited
//! (PROTOCOL.md; shim-reference-behaviour.md).
//!
//! # Layout
//! - [`cli`] and [`daemon`]: the command line, and `start` (preflight, the connection, the
//!   exit code); [`commands`]: every other subcommand (`auth`, `revoke`, `audit`, `doctor`,
//!   `status`, `install`, `uninstall`).
//! - [`preflight`]: the one list of start-up checks `doctor` prints and `start` and `install`
//!   refuse on.
//! - [`config`]: flags over `AUTOGPT_SHIM_*` over the TOML file over defaults, and the per-OS
//!   paths of the connector's own files.
//! - [`ws`]: the WebSocket transport, the dial (with [`auth`]'s tokens) and the reconnect loop.
//! - [`protocol`]: the wire, as types: the envelope, every message, codes, versions.
//! - [`session`]: one connection's life: the handshake, the loop, dispatch, and one
//!   `Handler` per capability (files, shell, local LLM, computer use) on one
//!   admit/spawn/audit/reply path.
//! - [`error`]: the one map from core's failures to the wire's error codes, and the one ERROR
//!   builder.
//! - [`mcp`]: `autogpt-shim mcp`, the same capabilities served to a local MCP client over
//!   stdio, each tool a conversion onto the one capability path.
//! - [`try_platform`]: `autogpt-shim try`, a small platform on loopback to try the
//!   connector against.
//! - [`control`]: machine control mode: folder browsing, root grants, one in-process child
//!   connection per active session.
//! - [`audit`] and [`request_log`]: the machine's HMAC-chained audit log (every record durable
//!   before its reply) and the one content-free log line per request.
//!
//! A request's path: `ws` → `session::run` → `session::dispatch` → `session::capability` →
//! the capability's module → `local_core::machine` → back through `error` on failure.

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
pub mod link;
pub mod mcp;
pub mod preflight;
pub mod protocol;
pub mod request_log;
pub mod session;
pub mod try_platform;
pub mod ws;
