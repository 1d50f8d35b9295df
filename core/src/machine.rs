//! The connector's half of core: the machine a remote agent acts on, and nothing the local API uses.
//!
//! - [`jail`]: the one way to reach the filesystem, an open root handle no path can leave.
//! - [`files`]: the FILE_* operations over the jail (reads, atomic writes, listings, moves).
//! - [`exec`]: commands with a safe environment, output budgets and process-tree kills.
//! - [`audit_chain`]: the HMAC-chained audit log, its verification and tooling.
//! - [`own_files`]: the connector's own configuration, credential and state files.
//! - [`browse`]: folder browsing for control mode.
//! - [`root_grant`]: signed root grants of control mode.
//! - [`hardware`]: serial, USB and GPIO listing for HELLO.

pub mod audit_chain;
pub mod browse;
pub mod exec;
pub mod files;
pub mod hardware;
pub mod jail;
pub mod own_files;
pub mod root_grant;
