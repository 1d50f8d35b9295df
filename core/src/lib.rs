//! Capabilities shared by the local API and the connector, with no HTTP or WebSocket in them.
//!
//! # Layout
//! - [`limits`]: every numeric limit of the specifications, named once.
//! - [`clock`]: the one source of "now", replaceable in tests.
//! - [`error`]: the failures callers can see, each with its exact message.
//! - [`secret`]: bearer tokens and constant-time comparison.
//! - [`state`]: [`state::LocalState`], the bounded in-memory state every operation runs against.
//! - [`sessions`], [`guidance`], [`assist`], [`actions`], [`audit`]: the operations.
//! - [`jail`], [`files`], [`exec`], [`audit_chain`], [`own_files`]: the connector's capabilities: the jailed filesystem, commands, the HMAC-chained audit log.
//! - [`diagnostics`]: the content-free JSON-lines diagnostic log.
//! - [`lifetime`]: the launcher's children end with it, even when it is killed.
//! - [`png_sanitise`]: strict PNG validation and re-encoding from pixels only.
//! - `a11y`, `observe` (feature `desktop`): budgeted accessibility capture of one window, and
//!   the observation a desktop client sends; `desktop` (same feature): computer use, i.e.
//!   screenshots, synthetic input, windows, apps, the clipboard and the session probe.

#[cfg(feature = "desktop")]
pub mod a11y;
pub mod actions;
pub mod assist;
pub mod audit;
pub mod audit_chain;
pub mod browse;
pub mod clock;
#[cfg(feature = "desktop")]
pub mod desktop;
pub mod diagnostics;
pub mod error;
pub mod exec;
pub mod files;
pub mod guidance;
pub mod hardware;
pub mod jail;
pub mod lifetime;
pub mod limits;
pub mod llm;
#[cfg(feature = "desktop")]
pub mod observe;
pub mod own_files;
pub mod png_sanitise;
#[cfg(test)]
mod proptest_config;
pub mod root_grant;
pub mod secret;
pub mod sessions;
pub mod state;
mod store;

pub use error::Error;
pub use state::LocalState;
