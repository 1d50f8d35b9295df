//! The FILE_* capability (read, write, stat, list, delete, move) executed through the [`Jail`].
//!
//! Everything here is synchronous and wire-free: the connector turns its payloads into the
//! request types below, runs the function in `spawn_blocking` and turns the result (or the
//! [`FileError`] code) back into a reply. Every filesystem access goes through the [`Jail`], so
//! nothing done here can leave the allowed root even if a path is swapped mid-operation.
//!
//! Where the reference shim is worse than its specification this module follows the
//! specification: writes are atomic, deleting or moving a symlink acts on the link, an
//! overwriting move never destroys the destination before the source is in place, listings are
//! sorted, and `max_entries` has a hard cap.
//!
//! Layout (every operation is re-exported here, so callers name `files::…`):
//! - this file: the limits, [`FileError`] and the request and result types;
//! - `read_write`: FILE_READ and FILE_WRITE;
//! - `stat_list`: FILE_STAT and FILE_LIST, with the metadata they report;
//! - `delete`: FILE_DELETE;
//! - `move_copy`: FILE_MOVE, with the copy-then-delete fallback across devices;
//! - `glob`: the `fnmatch` patterns of FILE_LIST.

mod delete;
mod glob;
mod move_copy;
mod read_write;
mod stat_list;

pub use delete::delete;
pub use move_copy::move_path;
pub use read_write::{read, write};
pub use stat_list::{list, stat};

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::machine::jail::{Jail, JailError, JailedPath, Metadata};

/// `HELLO_ACK.max_file_size_bytes` when the platform does not lower it (10 MiB).
pub const DEFAULT_MAX_FILE_SIZE_BYTES: u64 = 10 * 1024 * 1024;

/// FILE_LIST `max_entries` when the request omits it.
pub const DEFAULT_MAX_LIST_ENTRIES: u64 = 1000;

/// Largest `max_entries` honoured whatever the request asks; the reference has none, which
/// lets one request build an arbitrarily large reply.
pub const DEFAULT_MAX_LIST_ENTRIES_HARD_CAP: usize = 10_000;

/// Room the 16 MiB frame must keep for the envelope around a payload.
const FRAME_BUDGET_BYTES: u64 = crate::limits::MAX_FRAME_BYTES as u64 - 64 * 1024;

/// Raw bytes a text read may return: every byte could become a six-byte JSON escape.
pub const TEXT_READ_BUDGET_BYTES: u64 = FRAME_BUDGET_BYTES / 6;

/// Raw bytes a base64 read may return: base64 grows data by 4/3.
pub const BASE64_READ_BUDGET_BYTES: u64 = FRAME_BUDGET_BYTES * 3 / 4;

/// The size limits the FILE_* operations enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimits {
    /// Largest range one FILE_READ returns (further capped by the encoding's frame budget).
    pub max_read_bytes: u64,
    /// Largest content one FILE_WRITE accepts; also the largest file a cross-device move copies.
    pub max_write_bytes: u64,
    /// Largest effective FILE_LIST `max_entries`.
    pub max_list_entries_hard_cap: usize,
}

impl FileLimits {
    /// Limits for a negotiated `HELLO_ACK.max_file_size_bytes`.
    #[must_use]
    pub const fn for_max_file_size(max_file_size_bytes: u64) -> Self {
        Self {
            max_read_bytes: max_file_size_bytes,
            max_write_bytes: max_file_size_bytes,
            max_list_entries_hard_cap: DEFAULT_MAX_LIST_ENTRIES_HARD_CAP,
        }
    }

    /// The most bytes a read in `encoding` may return.
    #[must_use]
    pub const fn effective_read_limit(&self, encoding: Encoding) -> u64 {
        let budget = match encoding {
            Encoding::Text => TEXT_READ_BUDGET_BYTES,
            Encoding::Base64 => BASE64_READ_BUDGET_BYTES,
        };
        if self.max_read_bytes < budget {
            self.max_read_bytes
        } else {
            budget
        }
    }
}

impl Default for FileLimits {
    fn default() -> Self {
        Self::for_max_file_size(DEFAULT_MAX_FILE_SIZE_BYTES)
    }
}

/// Why a FILE_* operation failed. Display texts name at most jail-relative paths and sizes,
/// never file contents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// The jail refused the path or the operation failed underneath it.
    #[error(transparent)]
    Jail(#[from] JailError),
    /// The requested range or the content to write exceeds the limit.
    #[error("file too large: {requested} bytes exceed the limit of {limit} bytes")]
    FileTooLarge {
        /// Bytes requested (read) or supplied (write, copy).
        requested: u64,
        /// The effective limit.
        limit: u64,
    },
    /// FILE_WRITE base64 content that does not decode strictly.
    #[error("Bad base64")]
    BadBase64,
    /// A FIFO, socket or device where a regular file was needed; reading one could block.
    #[error("not a regular file: {}", .path.display())]
    NotARegularFile {
        /// Jail-relative path.
        path: PathBuf,
    },
    /// Moving a directory into itself, or over one of its own ancestors.
    #[error("cannot move a directory into itself or over one of its ancestors")]
    NestedMove,
    /// A cross-device move met a symlink, which the jail cannot recreate on the other side.
    #[error("cannot move a symbolic link across devices: {}", .path.display())]
    CrossDeviceSymlink {
        /// Jail-relative path of the link.
        path: PathBuf,
    },
}

impl FileError {
    /// The wire `ERROR.code` of PROTOCOL.md for this failure.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Self::Jail(err) => err.code(),
            Self::FileTooLarge { .. } => "FILE_TOO_LARGE",
            // The spec names no code for these; the reference answers them with INTERNAL_ERROR.
            Self::BadBase64
            | Self::NotARegularFile { .. }
            | Self::NestedMove
            | Self::CrossDeviceSymlink { .. } => "INTERNAL_ERROR",
        }
    }
}

/// How content travels: `utf-8` text or base64 of the raw bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Encoding {
    /// UTF-8 text; invalid sequences read as U+FFFD, line endings untouched.
    #[default]
    Text,
    /// Standard base64 with padding.
    Base64,
}

/// FILE_READ. The wire's `format: bytes` means [`Encoding::Base64`] whatever `encoding` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    /// Wire path.
    pub path: String,
    /// Encoding of the returned content.
    pub encoding: Encoding,
    /// Byte offset to start at.
    pub offset: u64,
    /// Bytes to read; `None` reads to the end.
    pub length: Option<u64>,
}

impl ReadRequest {
    /// A whole-file text read, the wire defaults.
    #[must_use]
    pub fn new(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            encoding: Encoding::Text,
            offset: 0,
            length: None,
        }
    }
}

/// FILE_CONTENTS plus what the audit record needs.
#[derive(Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// The bytes read, in `encoding`.
    pub content: String,
    /// How `content` is encoded.
    pub encoding: Encoding,
    /// Bytes read from disk (the wire `size_bytes`).
    pub size_bytes: u64,
    /// Size of the whole file when it was opened.
    pub file_size: u64,
    /// The file continues past what was returned.
    pub truncated: bool,
    /// Canonical absolute path that was read.
    pub path: PathBuf,
}

impl fmt::Debug for ReadResult {
    // Content stays out of logs and panic messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadResult")
            .field("content", &format_args!("<{} chars>", self.content.len()))
            .field("encoding", &self.encoding)
            .field("size_bytes", &self.size_bytes)
            .field("file_size", &self.file_size)
            .field("truncated", &self.truncated)
            .field("path", &self.path)
            .finish()
    }
}

/// FILE_WRITE content as it arrived; decoding happens after the jail check, as in the spec.
#[derive(Clone, PartialEq, Eq)]
pub enum WriteContent {
    /// UTF-8 text, written as its bytes.
    Text(String),
    /// Base64 that must decode strictly.
    Base64(String),
}

impl fmt::Debug for WriteContent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(text) => write!(f, "Text(<{} bytes>)", text.len()),
            Self::Base64(text) => write!(f, "Base64(<{} chars>)", text.len()),
        }
    }
}

/// FILE_WRITE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRequest {
    /// Wire path.
    pub path: String,
    /// What to write.
    pub content: WriteContent,
    /// Create missing parent directories (`mkdir -p`).
    pub create_parents: bool,
}

/// What FILE_WRITE did, for the audit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteResult {
    /// Canonical absolute path written.
    pub path: PathBuf,
    /// Bytes written.
    pub size_bytes_written: u64,
}

/// FILE_STAT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatRequest {
    /// Wire path.
    pub path: String,
    /// Stat the target of a final symlink (`true`, the default) or the link itself.
    pub follow_symlinks: bool,
}

impl StatRequest {
    /// A stat following symlinks, the wire default.
    #[must_use]
    pub fn new(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            follow_symlinks: true,
        }
    }
}

/// FILE_STAT_RESPONSE: `info` is `None` when nothing exists at `path` (`exists: false`).
#[derive(Debug, Clone, PartialEq)]
pub struct StatResult {
    /// Canonical path, set even when nothing exists there (the spec allows it; the reference
    /// sends null) so callers can tell "gone" from "elsewhere". Realpath-resolved when
    /// following symlinks; otherwise the final component is the link itself.
    pub path: PathBuf,
    /// Everything else, present iff the path exists.
    pub info: Option<StatInfo>,
}

impl StatResult {
    /// The wire `exists`.
    #[must_use]
    pub const fn exists(&self) -> bool {
        self.info.is_some()
    }
}

/// The FILE_STAT fields of an existing path.
#[derive(Debug, Clone, PartialEq)]
pub struct StatInfo {
    /// Regular file.
    pub is_file: bool,
    /// Directory.
    pub is_dir: bool,
    /// The requested path itself is a symlink (also when following it).
    pub is_symlink: bool,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: Option<f64>,
    /// Status-change time (creation time on Windows), seconds since the epoch.
    pub ctime: Option<f64>,
    /// Four-digit octal permission bits such as `"0644"`.
    pub mode: String,
    /// Owner uid; `None` on Windows.
    pub owner_uid: Option<u32>,
    /// Owner gid; `None` on Windows.
    pub owner_gid: Option<u32>,
    /// Guessed from the extension; `None` when unknown.
    pub mime_type: Option<&'static str>,
}

/// FILE_LIST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    /// Wire path of the directory.
    pub path: String,
    /// `fnmatch` glob (`*`, `?`, `[...]`, `[!...]`) on the basename; `None` lists everything.
    pub pattern: Option<String>,
    /// Walk subdirectories (symlinked directories are listed, not entered).
    pub recursive: bool,
    /// Include names starting with `.` (and, when recursive, enter such directories).
    pub include_hidden: bool,
    /// Entries to return at most (capped by [`FileLimits::max_list_entries_hard_cap`]).
    pub max_entries: u64,
}

impl ListRequest {
    /// A flat listing of everything visible, the wire defaults.
    #[must_use]
    pub fn new(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            pattern: None,
            recursive: false,
            include_hidden: false,
            max_entries: DEFAULT_MAX_LIST_ENTRIES,
        }
    }
}

/// One FILE_LIST entry; about the entry itself (`lstat`), except that `is_file` and `is_dir`
/// follow a symlink whose target is inside the root, as the reference's `Path.is_file` does.
#[derive(Debug, Clone, PartialEq)]
pub struct ListEntry {
    /// Basename (lossy for names that are not UTF-8).
    pub name: String,
    /// Absolute path: the listed directory's canonical path joined with the names walked.
    pub path: PathBuf,
    /// Regular file (or a symlink to one inside the root).
    pub is_file: bool,
    /// Directory (or a symlink to one inside the root).
    pub is_dir: bool,
    /// Symbolic link.
    pub is_symlink: bool,
    /// Size of the entry itself (of the link for links).
    pub size_bytes: u64,
    /// Modification time of the entry itself, seconds since the epoch (0 if unavailable).
    pub mtime: f64,
}

/// FILE_LIST_RESPONSE.
#[derive(Debug, Clone, PartialEq)]
pub struct ListResult {
    /// Canonical path of the listed directory.
    pub path: PathBuf,
    /// Entries, each directory's sorted by name, subdirectories walked depth-first after.
    pub entries: Vec<ListEntry>,
    /// More matching entries existed than were returned.
    pub truncated: bool,
}

/// FILE_DELETE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRequest {
    /// Wire path.
    pub path: String,
    /// Required to delete a non-empty directory.
    pub recursive: bool,
    /// Succeed when nothing exists at the path.
    pub missing_ok: bool,
}

/// What FILE_DELETE did, for the audit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteResult {
    /// Canonical path (the final component unfollowed).
    pub path: PathBuf,
    /// Something was there and is gone now; `false` only with `missing_ok`.
    pub existed: bool,
}

/// FILE_MOVE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveRequest {
    /// Wire path of the source (`src`).
    pub from: String,
    /// Wire path of the destination (`dst`).
    pub to: String,
    /// Replace an existing destination.
    pub overwrite: bool,
}

/// What FILE_MOVE did, for the audit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveResult {
    /// Canonical source path.
    pub from: PathBuf,
    /// Canonical destination path.
    pub to: PathBuf,
    /// The source was on another device, so it was copied and then deleted.
    pub copied: bool,
}

pub(super) fn sorted_names(jail: &Jail, dir: &JailedPath) -> Result<Vec<OsString>, JailError> {
    let mut names = Vec::new();
    for entry in jail.read_dir(dir)? {
        names.push(
            entry
                .map_err(|err| JailError::from_io(&err, dir))?
                .file_name(),
        );
    }
    names.sort();
    Ok(names)
}

/// Nothing there: not found, or a component on the way is a file (`test -e` says false too).
pub(super) const fn is_missing(err: &JailError) -> bool {
    matches!(
        err,
        JailError::PathNotFound { .. } | JailError::NotADirectory { .. }
    )
}

/// Metadata following symlinks, with anything [`is_missing`] reported as `PATH_NOT_FOUND`.
pub(super) fn existing(jail: &Jail, path: &JailedPath) -> Result<Metadata, FileError> {
    jail.metadata(path).map_err(|err| {
        if is_missing(&err) {
            not_found(path.relative())
        } else {
            err.into()
        }
    })
}

pub(super) fn not_found(relative: &Path) -> FileError {
    JailError::PathNotFound {
        path: relative.to_path_buf(),
    }
    .into()
}

pub(super) fn not_regular(path: &JailedPath) -> FileError {
    FileError::NotARegularFile {
        path: path.relative().to_path_buf(),
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "tests set up and inspect real trees directly, around the jail"
)]
mod tests;
