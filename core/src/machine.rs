//! The connector's half of core: the machine a remote agent acts on, and nothing the local API uses.
//!
//! - [`jail`]: the one way to reach the filesystem, an open root handle no path can leave.
//! - [`files`]: the FILE_* operations over the jail (reads, atomic writes, listings, moves).
//! - [`exec`]: commands with a safe environment, output budgets and process-tree kills.
//! - [`sandbox`]: the kernel sandbox a command may run in (`--shell-sandbox`).
//! - [`audit_chain`]: the HMAC-chained audit log, its verification and tooling.
//! - [`own_files`]: the connector's own configuration, credential and state files.
//! - [`browse`]: folder browsing for control mode.
//! - [`root_grant`]: signed root grants of control mode.
//! - [`hardware`]: serial, USB and GPIO listing for HELLO.

// core/clippy.toml bans `std::fs` and `std::process::Command` in core; the modules that own
// them are allowed here, in one place: the jail (every user file), the connector's own files,
// the audit log (append-only, its own folder) and exec (every command: safe environment,
// process group, budgets, and its cwd and PATH checks).
#[allow(clippy::disallowed_methods, reason = "owns the audit log's files")]
pub mod audit_chain;
// Browsing happens before any jail exists: it names and stats folders for a person choosing a
// root (and reads /proc/version), never a file's content.
#[allow(
    clippy::disallowed_methods,
    reason = "stats folders to choose a root, outside any jail by design"
)]
pub mod browse;
#[allow(clippy::disallowed_methods, reason = "owns running programs")]
pub mod exec;
pub mod files;
pub mod hardware;
#[allow(
    clippy::disallowed_methods,
    reason = "owns the filesystem under a root"
)]
pub mod jail;
#[allow(clippy::disallowed_methods, reason = "owns the connector's own files")]
pub mod own_files;
pub mod root_grant;
// The sandbox's launcher builds its own view of the filesystem (mount table, uid map, the
// reduced /dev) and executes the program; its parent makes and removes the private TMPDIR.
#[allow(
    clippy::disallowed_methods,
    reason = "owns the sandbox's mounts, its launcher's exec and each command's TMPDIR"
)]
pub mod sandbox;
