//! Capabilities shared by the local API and the connector, with no HTTP, WebSocket or MCP in them.
//!
//! Core serves two programs, and its folders say which part serves which:
//! - [`guide`]: the local API's half (`msguide-api`): sessions, consented guidance, legacy
//!   assist, simulated actions, the in-memory audit ring, PNG sanitising, the content-free
//!   diagnostic log and the bounded state they all run against.
//! - [`machine`]: the connector's half (`autogpt-shim`): the jail, jailed files, commands, the
//!   HMAC-chained audit log, the connector's own files, folder browsing, root grants, hardware.
//! - The modules at the top level are what both halves share:
//!   - [`limits`]: every numeric limit of the specifications, named once.
//!   - [`bulk`]: the capacity of bulk-content buffers, which the allocator returns when freed.
//!   - [`clock`]: the one source of "now", replaceable in tests.
//!   - [`secret`]: the redacting wrapper of every secret, bearer token shapes and
//!     constant-time comparison.
//!   - [`env_names`]: the `MSGUIDE_*` environment variable names the programs share.
//!   - [`loopback`]: what counts as this machine (host names, addresses, peers).
//!   - [`signals`]: the signals that ask a program to stop.
//!   - [`llm`]: the local model backends.
//!   - [`lifetime`]: the launcher's children end with it, even when it is killed.
//!   - [`desktop_entry`]: the hidden desktop entries that let KDE's KWin give a program screenshots.
//!   - `a11y`, `desktop` (feature `desktop`): budgeted accessibility capture of one window,
//!     and computer use (screenshots, synthetic input, windows, apps, the clipboard and the
//!     session probe).

// A library says nothing on the terminal itself: it logs through tracing or returns what a
// program prints (tests/tests/suite/tidy.rs checks this attribute stays).
#![deny(clippy::print_stdout, clippy::print_stderr)]
// Every public item says what it is in one line (CI's -D warnings makes this an error).
#![warn(missing_docs)]

#[cfg(feature = "desktop")]
pub mod a11y;
pub mod clock;
#[cfg(feature = "desktop")]
pub mod desktop;
pub mod desktop_entry;
pub mod env_names;
pub mod guide;
pub mod io_words;
pub mod lifetime;
pub mod limits;
pub mod llm;
pub mod loopback;
pub mod machine;
pub mod malloc_tunables;
#[cfg(test)]
mod proptest_config;
pub mod secret;
pub mod signals;
#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "test support: makes and removes its own temporary directory"
)]
mod test_dir;

pub use guide::{error::Error, state::LocalState};
