//! The launcher `msguide`: starts `msguide-api` on loopback with a fresh token, checks that it
//! is ready, then starts the desktop client (or, with `--headless`, says how to reach the API)
//! and stops every child when one of them ends or the launcher is asked to stop.
//!
//! # Layout
//!
//! - [`cli`]: the clap surface, `msguide start [--port N] [--headless]`.
//! - [`token`]: the 32-byte bearer, drawn from the OS and held in a redacted type.
//! - [`paths`]: the sibling binaries and the per-user state directory.
//! - [`env`](mod@env): the children's environment (token, demo mode, logs; no model credentials for
//!   the desktop).
//! - [`probe`]: the port check before anything starts.
//! - [`http`]: the two readiness calls over hyper's HTTP/1.1 connection, under a deadline and
//!   size caps.
//! - [`readiness`]: `/health`, then an authenticated `POST /v1/sessions`, within 60 s.
//! - [`children`]: spawning, and stopping a child (SIGTERM, then SIGKILL).
//! - [`bus`]: the session bus for the desktop client when none is running, and the one line
//!   naming the package when dbus-daemon or the AT-SPI bus is missing.
//! - [`job`]: on Windows, the Job Object that ends the children with a launcher killed outright.
//! - [`start`]: the `start` sequence and its supervision loop.
//!
//! The launcher links nothing of ours: it talks to `msguide-api` only over HTTP, like the
//! desktop client does.

pub mod bus;
pub mod children;
pub mod cli;
pub mod env;
pub mod http;
pub mod job;
pub mod paths;
pub mod probe;
pub mod readiness;
pub mod start;
pub mod token;
