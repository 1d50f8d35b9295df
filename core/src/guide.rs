//! The local API's half of core: everything `msguide-api` runs, and nothing the connector uses.
//!
//! - [`state`]: [`state::LocalState`], the bounded in-memory state every operation runs against,
//!   over the expiring owned records of `store`.
//! - [`error`]: the failures callers can see, each with its exact message.
//! - [`sessions`], [`guidance`], [`assist`], [`actions`], [`audit_ring`]: the operations.
//! - [`camera`]: the camera-recovery branch of guidance, a deterministic state machine.
//! - [`png_sanitise`]: strict PNG validation and re-encoding from pixels only.
//! - [`diagnostics`]: the content-free JSON-lines diagnostic log.
//! - `observe` (feature `desktop`): the observation of one window a desktop client sends.

/// `as_str`, the wire name of each variant, for the fixed vocabularies of guidance (task and
/// plan words, camera states and evidence): one name a variant, written once beside it.
macro_rules! wire_names {
    ($($ty:ident { $($variant:ident => $name:literal),+ $(,)? })+) => {$(
        impl $ty {
            /// The wire name.
            #[must_use]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name),+
                }
            }
        }
    )+};
}
pub(crate) use wire_names;

pub mod actions;
pub mod assist;
pub mod audit_ring;
// The local API's own log file, at the path its person configures, appended and rotated
// (core/clippy.toml bans std::fs elsewhere in core; no jail applies to it).
#[allow(clippy::disallowed_methods, reason = "owns the diagnostic log's files")]
pub mod diagnostics;
pub mod error;
pub mod guidance;
#[cfg(feature = "desktop")]
pub mod observe;
pub mod png_sanitise;
pub mod sessions;
pub mod state;
mod store;
