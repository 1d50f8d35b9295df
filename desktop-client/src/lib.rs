//! The desktop guidance client: it observes one window, shows exactly what would be sent,
//! sends it to the local API only after the user consents, and outlines the target.
//!
//! # Layout
//! - [`api`]: the HTTP client of the local API (the only way out of this process).
//! - [`wire`]: the JSON of `/v1/sessions` and `/v1/guidance`.
//! - [`checks`]: what must hold before an outline is drawn.
//! - [`cli`]: the scriptable `observe` and `guide` commands.
//! - [`task`]: the task kept across rounds (id, step, history) and which element a plan step means.
//! - [`gui`]: the guidance window.
//! - [`outline`]: the hollow frame around the target on screen, one backend per window system.
//! - [`place`]: where the guidance window goes, at start and while an outline is shown.
//! - [`words`]: the status, time, boxes and plan boundaries in the words a person reads.
//! - [`problem`]: the one sentence a person reads when something fails, and its detail.
//! - [`pixels`]: the desktop entry that lets KDE Plasma give the client a window's pixels.
//!
//! Capture itself (`local_core::guide::observe`, `local_core::a11y`) lives in `core`, so the
//! connector can reuse it.

pub mod api;
pub mod checks;
pub mod cli;
pub mod gui;
pub mod outline;
pub mod pixels;
pub mod place;
pub mod problem;
pub mod task;
pub mod wire;
pub mod words;
