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

use std::borrow::Cow;
use std::ffi::OsString;
use std::fmt;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
#[cfg(unix)]
use cap_std::fs::MetadataExt as _;
use uuid::Uuid;

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

/// Whether basename globs ignore case. The reference probes the filesystem; the platform
/// default is what such a probe reports on a default install.
const GLOB_CASE_INSENSITIVE: bool = cfg!(any(windows, target_os = "macos"));

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

/// FILE_READ: reads `length` bytes (or to the end) from `offset`.
///
/// Only the requested range counts against the limit, so a bounded range of a file larger than
/// the limit is fine; a whole-file read of such a file, or a `length` above the limit, is
/// [`FileError::FileTooLarge`]. An offset past the end reads nothing.
///
/// # Errors
/// `PATH_NOT_FOUND` when missing, `INTERNAL_ERROR` for a directory or a special file,
/// `FILE_TOO_LARGE`, or any jail error.
pub fn read(
    jail: &Jail,
    request: &ReadRequest,
    limits: &FileLimits,
) -> Result<ReadResult, FileError> {
    let path = jail.resolve(&request.path)?;
    // Checked before opening because opening a FIFO for reading blocks until a writer comes.
    let meta = existing(jail, &path)?;
    if meta.is_dir() {
        return Err(JailError::IsADirectory {
            path: path.relative().to_path_buf(),
        }
        .into());
    }
    if !meta.is_file() {
        return Err(not_regular(&path));
    }
    let mut file = jail.open_read(&path)?;
    let io_error = |err: io::Error| FileError::from(JailError::from_io(&err, &path));
    // The handle's size, not the name's: the name may have been replaced since the check.
    let file_size = file.metadata().map_err(io_error)?.len();
    let requested = request
        .length
        .unwrap_or_else(|| file_size.saturating_sub(request.offset));
    let limit = limits.effective_read_limit(request.encoding);
    if requested > limit {
        return Err(FileError::FileTooLarge { requested, limit });
    }
    let available = file_size.saturating_sub(request.offset);
    let mut bytes = Vec::with_capacity(usize::try_from(requested.min(available)).unwrap_or(0));
    if request.offset > 0 {
        file.seek(SeekFrom::Start(request.offset))
            .map_err(io_error)?;
    }
    file.take(requested)
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    let size_bytes = bytes.len() as u64;
    let content = match request.encoding {
        Encoding::Text => match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
        },
        Encoding::Base64 => STANDARD.encode(&bytes),
    };
    Ok(ReadResult {
        content,
        encoding: request.encoding,
        size_bytes,
        file_size,
        truncated: request.offset.saturating_add(size_bytes) < file_size,
        path: path.absolute().to_path_buf(),
    })
}

/// FILE_WRITE: replaces the file atomically (readers see the old or the new content, never a
/// mix). An existing symlink at the path is followed to its target inside the root, whose
/// content is replaced; the link stays. With `create_parents` missing directories are created;
/// without it a missing parent is `PATH_NOT_FOUND`.
///
/// The order of checks is the spec's: jail, then base64, then size.
///
/// # Errors
/// Any jail error, `INTERNAL_ERROR` "Bad base64", `FILE_TOO_LARGE`, `PATH_NOT_FOUND`.
pub fn write(
    jail: &Jail,
    request: &WriteRequest,
    limits: &FileLimits,
) -> Result<WriteResult, FileError> {
    // Resolving follows every existing symlink and keeps a missing tail lexical, so both the
    // nearest existing ancestor and the lexical parent are inside the root once this succeeds;
    // the directories are then created through the jail and cannot leave it either.
    let path = jail.resolve(&request.path)?;
    let bytes: Cow<'_, [u8]> = match &request.content {
        WriteContent::Text(text) => Cow::Borrowed(text.as_bytes()),
        WriteContent::Base64(text) => Cow::Owned(decode_base64(text)?),
    };
    let size = bytes.len() as u64;
    if size > limits.max_write_bytes {
        return Err(FileError::FileTooLarge {
            requested: size,
            limit: limits.max_write_bytes,
        });
    }
    jail.write_atomic(&path, &bytes, request.create_parents)?;
    Ok(WriteResult {
        path: path.absolute().to_path_buf(),
        size_bytes_written: size,
    })
}

/// Strict standard base64: no whitespace, canonical padding. Non-zero trailing bits are
/// accepted because Python's `b64decode(validate=True)` accepts them.
fn decode_base64(text: &str) -> Result<Vec<u8>, FileError> {
    const ENGINE: GeneralPurpose = GeneralPurpose::new(
        &alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
    );
    ENGINE.decode(text).map_err(|_| FileError::BadBase64)
}

/// FILE_STAT. A missing path is `Ok` with `info: None`; a path outside the root is an error,
/// so the two stay distinguishable.
///
/// # Errors
/// Any jail error (`PATH_OUTSIDE_ALLOWED_ROOT`, `PATH_INVALID_CHARS`, ...).
pub fn stat(jail: &Jail, request: &StatRequest) -> Result<StatResult, FileError> {
    let path = if request.follow_symlinks {
        jail.resolve(&request.path)?
    } else {
        jail.resolve_no_follow(&request.path)?
    };
    let found = if request.follow_symlinks {
        jail.metadata(&path)
    } else {
        jail.symlink_metadata(&path)
    };
    let meta = match found {
        Ok(meta) => meta,
        Err(err) if is_missing(&err) => {
            return Ok(StatResult {
                path: path.absolute().to_path_buf(),
                info: None,
            });
        }
        Err(err) => return Err(err.into()),
    };
    let is_symlink = if request.follow_symlinks {
        // The resolved path is never a link; whether the caller named one is a question about
        // the path as requested.
        jail.resolve_no_follow(&request.path)
            .and_then(|raw| jail.symlink_metadata(&raw))
            .is_ok_and(|raw| raw.is_symlink())
    } else {
        meta.is_symlink()
    };
    let info = StatInfo {
        is_file: meta.is_file(),
        is_dir: meta.is_dir(),
        is_symlink,
        size_bytes: meta.len(),
        mtime: meta
            .modified()
            .ok()
            .map(|time| epoch_seconds(time.into_std())),
        ctime: change_time(&meta),
        mode: mode_string(&meta),
        owner_uid: owner_uid(&meta),
        owner_gid: owner_gid(&meta),
        mime_type: guess_mime(path.absolute()),
    };
    Ok(StatResult {
        path: path.absolute().to_path_buf(),
        info: Some(info),
    })
}

/// FILE_LIST: a directory's entries, optionally recursive, filtered by a basename glob.
///
/// Entries of one directory come sorted by name (the reference uses directory order, which is
/// not deterministic); a recursive listing gives a directory's entries, then walks its
/// subdirectories in name order. Hidden names are skipped unless `include_hidden`, but hidden
/// directories are still entered, as the reference does: only the basename decides.
/// Symlinked directories are listed, never entered.
/// `max_entries` (0 included) is capped by the hard cap; `truncated` is set only when another
/// matching entry exists.
///
/// # Errors
/// `PATH_NOT_FOUND` when missing, `INTERNAL_ERROR` when not a directory, any jail error.
pub fn list(
    jail: &Jail,
    request: &ListRequest,
    limits: &FileLimits,
) -> Result<ListResult, FileError> {
    let dir = jail.resolve(&request.path)?;
    if !existing(jail, &dir)?.is_dir() {
        return Err(JailError::NotADirectory {
            path: dir.relative().to_path_buf(),
        }
        .into());
    }
    let cap = usize::try_from(request.max_entries)
        .unwrap_or(usize::MAX)
        .min(limits.max_list_entries_hard_cap);
    let glob = request.pattern.as_deref().map(Glob::new);
    let mut entries = Vec::new();
    let mut pending = vec![dir.clone()];
    let mut first = true;
    while let Some(current) = pending.pop() {
        let names = match sorted_names(jail, &current) {
            Ok(names) => names,
            Err(err) if first => return Err(err.into()),
            // A subdirectory that vanished or is unreadable is skipped, as rglob does.
            Err(_) => continue,
        };
        first = false;
        let mut subdirs = Vec::new();
        for name in names {
            let text = name.to_string_lossy().into_owned();
            let shown = request.include_hidden || !text.starts_with('.');
            let child = jail.child(&current, &name)?;
            // Gone since it was listed: nothing to report.
            let Ok(meta) = jail.symlink_metadata(&child) else {
                continue;
            };
            if shown && glob.as_ref().is_none_or(|glob| glob.matches(&text)) {
                if entries.len() == cap {
                    return Ok(ListResult {
                        path: dir.absolute().to_path_buf(),
                        entries,
                        truncated: true,
                    });
                }
                entries.push(list_entry(jail, &child, text, &meta));
            }
            if request.recursive && meta.is_dir() {
                subdirs.push(child);
            }
        }
        pending.extend(subdirs.into_iter().rev());
    }
    Ok(ListResult {
        path: dir.absolute().to_path_buf(),
        entries,
        truncated: false,
    })
}

fn list_entry(jail: &Jail, child: &JailedPath, name: String, meta: &Metadata) -> ListEntry {
    let is_symlink = meta.is_symlink();
    let (is_file, is_dir) = if is_symlink {
        // The jail refuses to follow a link out of the root, which reads as neither.
        jail.metadata(child)
            .map_or((false, false), |target| (target.is_file(), target.is_dir()))
    } else {
        (meta.is_file(), meta.is_dir())
    };
    ListEntry {
        name,
        path: child.absolute().to_path_buf(),
        is_file,
        is_dir,
        is_symlink,
        size_bytes: meta.len(),
        mtime: meta
            .modified()
            .map_or(0.0, |time| epoch_seconds(time.into_std())),
    }
}

/// FILE_DELETE. A symlink is removed as a link, never its target (the reference follows it and
/// deletes the target). A real directory needs `recursive` unless empty; the root itself is
/// never removed.
///
/// # Errors
/// `PATH_NOT_FOUND` (without `missing_ok`), `PATH_NOT_EMPTY`, any jail error.
pub fn delete(jail: &Jail, request: &DeleteRequest) -> Result<DeleteResult, FileError> {
    let path = jail.resolve_no_follow(&request.path)?;
    let absent = || DeleteResult {
        path: path.absolute().to_path_buf(),
        existed: false,
    };
    let meta = match jail.symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(err) if is_missing(&err) => {
            return if request.missing_ok {
                Ok(absent())
            } else {
                Err(not_found(path.relative()))
            };
        }
        Err(err) => return Err(err.into()),
    };
    let removed = if meta.is_dir() {
        if request.recursive {
            jail.remove_dir_all(&path)
        } else {
            jail.remove_dir(&path)
        }
    } else {
        jail.remove_file(&path)
    };
    match removed {
        Ok(()) => Ok(DeleteResult {
            path: path.absolute().to_path_buf(),
            existed: true,
        }),
        // Someone else deleted it first: the caller asked for it to be gone and it is.
        Err(JailError::PathNotFound { .. }) if request.missing_ok => Ok(absent()),
        Err(err) => Err(err.into()),
    }
}

/// FILE_MOVE: renames `from` to `to` (a symlink moves as a link). A destination that is a
/// symlink must resolve inside the root (else `PATH_OUTSIDE_ALLOWED_ROOT`, with or without
/// `overwrite`, nothing changed); one that does is replaced as a link, never moved through.
/// Without `overwrite` an existing destination is `PATH_EXISTS`. With it the rename replaces the destination
/// atomically where the OS can (file over file, directory over empty directory); otherwise the
/// destination is first renamed aside and only deleted once the source is in place, so a
/// failure leaves it as it was. Across devices the source is copied, then deleted.
///
/// The destination's parent must exist. Between the existence check and the rename there is a
/// window in which a new destination could appear and be replaced: the jail offers no
/// no-replace rename.
///
/// # Errors
/// `PATH_NOT_FOUND`, `PATH_EXISTS`, `INTERNAL_ERROR` for nested moves, `FILE_TOO_LARGE` when a
/// cross-device copy meets a file above `max_write_bytes`, any jail error.
pub fn move_path(
    jail: &Jail,
    request: &MoveRequest,
    limits: &FileLimits,
) -> Result<MoveResult, FileError> {
    let from = jail.resolve_no_follow(&request.from)?;
    let to = jail.resolve_no_follow(&request.to)?;
    match jail.symlink_metadata(&from) {
        Ok(_) => {}
        Err(err) if is_missing(&err) => return Err(not_found(from.relative())),
        Err(err) => return Err(err.into()),
    }
    let to_exists = match jail.symlink_metadata(&to) {
        Ok(meta) => {
            if meta.is_symlink() {
                // The destination rule (docs/connector.md): a link where something will be
                // created or replaced must lead inside the root, dangling or not, even though
                // the move replaces only the link itself.
                let _ = jail.resolve(&request.to)?;
            }
            true
        }
        Err(err) if is_missing(&err) => false,
        Err(err) => return Err(err.into()),
    };
    if to_exists && !request.overwrite {
        return Err(JailError::PathExists {
            path: to.relative().to_path_buf(),
        }
        .into());
    }
    let done = |copied| MoveResult {
        from: from.absolute().to_path_buf(),
        to: to.absolute().to_path_buf(),
        copied,
    };
    if from == to {
        return Ok(done(false));
    }
    if to.relative().starts_with(from.relative()) || from.relative().starts_with(to.relative()) {
        return Err(FileError::NestedMove);
    }
    let copied = if to_exists {
        match jail.rename(&from, &to) {
            Ok(()) => false,
            Err(err) if is_cross_device(&err) => {
                with_aside(jail, &to, || copy_then_delete(jail, &from, &to, limits))?;
                true
            }
            Err(
                JailError::PathExists { .. }
                | JailError::PathNotEmpty { .. }
                | JailError::IsADirectory { .. }
                | JailError::NotADirectory { .. },
            ) => with_aside(jail, &to, || rename_or_copy(jail, &from, &to, limits))?,
            Err(err) => return Err(err.into()),
        }
    } else {
        rename_or_copy(jail, &from, &to, limits)?
    };
    Ok(done(copied))
}

/// Renames, falling back to copy-then-delete across devices; `true` when it copied.
fn rename_or_copy(
    jail: &Jail,
    from: &JailedPath,
    to: &JailedPath,
    limits: &FileLimits,
) -> Result<bool, FileError> {
    match jail.rename(from, to) {
        Ok(()) => Ok(false),
        Err(err) if is_cross_device(&err) => {
            copy_then_delete(jail, from, to, limits).map(|()| true)
        }
        // The jail names the source for any NotFound; say which side is really missing.
        Err(JailError::PathNotFound { .. }) if jail.symlink_metadata(from).is_ok() => Err(
            not_found(to.relative().parent().unwrap_or_else(|| Path::new(""))),
        ),
        Err(err) => Err(err.into()),
    }
}

/// Runs `operation` with `to` renamed to a temporary sibling, deleting that only on success
/// and putting it back on failure, so an overwriting move never loses the destination to a
/// move that did not happen.
fn with_aside<T>(
    jail: &Jail,
    to: &JailedPath,
    operation: impl FnOnce() -> Result<T, FileError>,
) -> Result<T, FileError> {
    let aside = sibling(jail, to, &format!(".move-{}.tmp", Uuid::new_v4().simple()))?;
    jail.rename(to, &aside)?;
    match operation() {
        Ok(value) => {
            // The move has happened; failing it now would tell the platform the destination
            // still holds its old content. A leftover hidden temporary is the lesser harm.
            let _ = remove_any(jail, &aside);
            Ok(value)
        }
        Err(err) => {
            // Best effort: the operation's error is the one worth reporting.
            let _ = jail.rename(&aside, to);
            Err(err)
        }
    }
}

/// Copies `from` to the not-yet-existing `to` through the jail, then deletes `from`. On a
/// failed copy the partial destination is removed and the source is untouched.
///
/// The jail has no copy, so files go through `open_read` and `write_atomic`: each is held in
/// memory (hence the `max_write_bytes` cap), permissions and times are not carried over, and
/// symlinks cannot be recreated.
fn copy_then_delete(
    jail: &Jail,
    from: &JailedPath,
    to: &JailedPath,
    limits: &FileLimits,
) -> Result<(), FileError> {
    // create_dir_all would also make a missing parent, which a move must not do.
    let parent = sibling(jail, to, ".")?;
    match jail.metadata(&parent) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(JailError::NotADirectory {
                path: parent.relative().to_path_buf(),
            }
            .into());
        }
        Err(err) if is_missing(&err) => return Err(not_found(parent.relative())),
        Err(err) => return Err(err.into()),
    }
    if let Err(err) = copy_tree(jail, from, to, limits) {
        // Best effort: the copy's error is the one worth reporting.
        let _ = remove_any(jail, to);
        return Err(err);
    }
    remove_any(jail, from)
}

fn copy_tree(
    jail: &Jail,
    from: &JailedPath,
    to: &JailedPath,
    limits: &FileLimits,
) -> Result<(), FileError> {
    // An explicit stack: recursion depth would follow the tree's depth.
    let mut pending = vec![(from.clone(), to.clone())];
    while let Some((source, target)) = pending.pop() {
        let meta = jail.symlink_metadata(&source)?;
        if meta.is_symlink() {
            return Err(FileError::CrossDeviceSymlink {
                path: source.relative().to_path_buf(),
            });
        } else if meta.is_dir() {
            jail.create_dir_all(&target)?;
            for name in sorted_names(jail, &source)? {
                pending.push((jail.child(&source, &name)?, jail.child(&target, &name)?));
            }
        } else if meta.is_file() {
            let file = jail.open_read(&source)?;
            let mut bytes = Vec::new();
            // One byte past the limit is enough to know it is too large.
            file.take(limits.max_write_bytes.saturating_add(1))
                .read_to_end(&mut bytes)
                .map_err(|err| JailError::from_io(&err, &source))?;
            let size = bytes.len() as u64;
            if size > limits.max_write_bytes {
                return Err(FileError::FileTooLarge {
                    requested: size,
                    limit: limits.max_write_bytes,
                });
            }
            jail.write_atomic(&target, &bytes, false)?;
        } else {
            return Err(not_regular(&source));
        }
    }
    Ok(())
}

/// Removes whatever is at `path` without following a final symlink.
fn remove_any(jail: &Jail, path: &JailedPath) -> Result<(), FileError> {
    if jail.symlink_metadata(path)?.is_dir() {
        jail.remove_dir_all(path)?;
    } else {
        jail.remove_file(path)?;
    }
    Ok(())
}

/// Names `name` next to `path` (`"."` names the parent). The jail only makes children of a
/// path it already holds, so the sibling is resolved from the canonical absolute path.
fn sibling(jail: &Jail, path: &JailedPath, name: &str) -> Result<JailedPath, FileError> {
    let parent = path.absolute().parent().unwrap_or_else(|| jail.root());
    let joined = if name == "." {
        parent.to_path_buf()
    } else {
        parent.join(name)
    };
    let Some(text) = joined.to_str() else {
        return Err(JailError::Io {
            path: path.relative().to_path_buf(),
            kind: io::ErrorKind::InvalidData,
        }
        .into());
    };
    Ok(jail.resolve_no_follow(text)?)
}

fn sorted_names(jail: &Jail, dir: &JailedPath) -> Result<Vec<OsString>, JailError> {
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
const fn is_missing(err: &JailError) -> bool {
    matches!(
        err,
        JailError::PathNotFound { .. } | JailError::NotADirectory { .. }
    )
}

/// Metadata following symlinks, with anything [`is_missing`] reported as `PATH_NOT_FOUND`.
fn existing(jail: &Jail, path: &JailedPath) -> Result<Metadata, FileError> {
    jail.metadata(path).map_err(|err| {
        if is_missing(&err) {
            not_found(path.relative())
        } else {
            err.into()
        }
    })
}

fn is_cross_device(err: &JailError) -> bool {
    matches!(
        err,
        JailError::Io {
            kind: io::ErrorKind::CrossesDevices,
            ..
        }
    )
}

fn not_found(relative: &Path) -> FileError {
    JailError::PathNotFound {
        path: relative.to_path_buf(),
    }
    .into()
}

fn not_regular(path: &JailedPath) -> FileError {
    FileError::NotARegularFile {
        path: path.relative().to_path_buf(),
    }
}

fn epoch_seconds(time: SystemTime) -> f64 {
    match time.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(after) => after.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    }
}

#[cfg(unix)]
#[allow(clippy::cast_precision_loss)] // f64 seconds are the wire format
fn change_time(meta: &Metadata) -> Option<f64> {
    Some(meta.ctime() as f64 + meta.ctime_nsec() as f64 / 1e9)
}

#[cfg(not(unix))]
fn change_time(meta: &Metadata) -> Option<f64> {
    meta.created()
        .ok()
        .map(|time| epoch_seconds(time.into_std()))
}

#[cfg(unix)]
fn mode_string(meta: &Metadata) -> String {
    format!("{:04o}", meta.mode() & 0o7777)
}

/// Windows has only the read-only bit; the reference synthesises these four modes from it.
#[cfg(not(unix))]
fn mode_string(meta: &Metadata) -> String {
    let readonly = meta.permissions().readonly();
    let mode = match (meta.is_dir(), readonly) {
        (true, true) => "0555",
        (true, false) => "0755",
        (false, true) => "0444",
        (false, false) => "0644",
    };
    mode.to_owned()
}

#[cfg(unix)]
fn owner_uid(meta: &Metadata) -> Option<u32> {
    Some(meta.uid())
}

#[cfg(unix)]
fn owner_gid(meta: &Metadata) -> Option<u32> {
    Some(meta.gid())
}

#[cfg(not(unix))]
fn owner_uid(_meta: &Metadata) -> Option<u32> {
    None
}

#[cfg(not(unix))]
fn owner_gid(_meta: &Metadata) -> Option<u32> {
    None
}

/// Best-effort MIME type by extension, after Python's `mimetypes` for the common cases.
fn guess_mime(path: &Path) -> Option<&'static str> {
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    let mime = match extension.as_str() {
        "txt" | "text" | "log" | "c" | "h" | "ksh" | "pl" => "text/plain",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "md" | "markdown" => "text/markdown",
        "xml" => "text/xml",
        "py" => "text/x-python",
        "json" => "application/json",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "tar" => "application/x-tar",
        "sh" => "application/x-sh",
        "wasm" => "application/wasm",
        "doc" => "application/msword",
        "xls" => "application/vnd.ms-excel",
        "ppt" => "application/vnd.ms-powerpoint",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "png" => "image/png",
        "jpg" | "jpeg" | "jpe" => "image/jpeg",
        "gif" => "image/gif",
        "bmp" => "image/bmp",
        "svg" => "image/svg+xml",
        "webp" => "image/webp",
        "tif" | "tiff" => "image/tiff",
        "ico" => "image/vnd.microsoft.icon",
        "mp3" => "audio/mpeg",
        "wav" => "audio/x-wav",
        "mp4" => "video/mp4",
        "mov" => "video/quicktime",
        "webm" => "video/webm",
        _ => return None,
    };
    Some(mime)
}

/// One element of a parsed `fnmatch` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    /// `?`
    AnyOne,
    /// `*`
    AnyRun,
    /// `[...]` or `[!...]`, as inclusive ranges.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Token {
    fn matches_one(&self, c: char) -> bool {
        match self {
            Self::Literal(literal) => *literal == c,
            Self::AnyOne => true,
            Self::AnyRun => false,
            Self::Class { negated, ranges } => {
                ranges.iter().any(|&(low, high)| low <= c && c <= high) != *negated
            }
        }
    }
}

/// A Python `fnmatch` pattern: `*`, `?`, `[seq]`, `[!seq]`; a `[` without a closing `]` is
/// literal, and `]` right after `[` or `[!` is a member. No escapes, as in `fnmatch`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Glob {
    tokens: Vec<Token>,
}

impl Glob {
    fn new(pattern: &str) -> Self {
        let folded;
        let pattern = if GLOB_CASE_INSENSITIVE {
            folded = pattern.to_lowercase();
            folded.as_str()
        } else {
            pattern
        };
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' => {
                    if tokens.last() != Some(&Token::AnyRun) {
                        tokens.push(Token::AnyRun);
                    }
                    i += 1;
                }
                '?' => {
                    tokens.push(Token::AnyOne);
                    i += 1;
                }
                '[' => {
                    let mut end = i + 1;
                    let negated = chars.get(end) == Some(&'!');
                    if negated {
                        end += 1;
                    }
                    let start = end;
                    if chars.get(end) == Some(&']') {
                        end += 1;
                    }
                    while end < chars.len() && chars[end] != ']' {
                        end += 1;
                    }
                    if end >= chars.len() {
                        tokens.push(Token::Literal('['));
                        i += 1;
                    } else {
                        tokens.push(Token::Class {
                            negated,
                            ranges: class_ranges(&chars[start..end]),
                        });
                        i = end + 1;
                    }
                }
                c => {
                    tokens.push(Token::Literal(c));
                    i += 1;
                }
            }
        }
        Self { tokens }
    }

    fn matches(&self, name: &str) -> bool {
        let folded;
        let name = if GLOB_CASE_INSENSITIVE {
            folded = name.to_lowercase();
            folded.as_str()
        } else {
            name
        };
        let name: Vec<char> = name.chars().collect();
        let tokens = &self.tokens;
        let (mut t, mut n) = (0, 0);
        // Where the last `*` was and how much of the name it has swallowed so far.
        let mut backtrack: Option<(usize, usize)> = None;
        while n < name.len() {
            match tokens.get(t) {
                Some(Token::AnyRun) => {
                    backtrack = Some((t, n));
                    t += 1;
                    continue;
                }
                Some(token) if token.matches_one(name[n]) => {
                    t += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
            let Some((star, swallowed)) = backtrack else {
                return false;
            };
            t = star + 1;
            n = swallowed + 1;
            backtrack = Some((star, swallowed + 1));
        }
        tokens[t..].iter().all(|token| *token == Token::AnyRun)
    }
}

fn class_ranges(body: &[char]) -> Vec<(char, char)> {
    let mut ranges = Vec::new();
    let mut k = 0;
    while k < body.len() {
        if k + 2 < body.len() && body[k + 1] == '-' {
            ranges.push((body[k], body[k + 2]));
            k += 3;
        } else {
            ranges.push((body[k], body[k]));
            k += 1;
        }
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A scratch tree: `base/root` is the jail, `base/outside` holds what must stay untouched.
    struct Sandbox {
        base: PathBuf,
        root: PathBuf,
        outside: PathBuf,
    }

    impl Sandbox {
        fn new() -> Self {
            let base = std::env::temp_dir().join(format!("files-test-{}", Uuid::new_v4()));
            let root = base.join("root");
            let outside = base.join("outside");
            fs::create_dir_all(&root).unwrap();
            fs::create_dir_all(&outside).unwrap();
            fs::write(outside.join("secret.txt"), "outside").unwrap();
            Self {
                base,
                root,
                outside,
            }
        }

        fn jail(&self) -> Jail {
            Jail::open(&self.root).unwrap()
        }

        fn file(&self, relative: &str, contents: impl AsRef<[u8]>) {
            let path = self.root.join(relative);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, contents).unwrap();
        }

        fn canonical_root(&self) -> PathBuf {
            fs::canonicalize(&self.root).unwrap()
        }
    }

    impl Drop for Sandbox {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.base);
        }
    }

    fn limits(max_read: u64, max_write: u64, hard_cap: usize) -> FileLimits {
        FileLimits {
            max_read_bytes: max_read,
            max_write_bytes: max_write,
            max_list_entries_hard_cap: hard_cap,
        }
    }

    fn read_range(path: &str, encoding: Encoding, offset: u64, length: Option<u64>) -> ReadRequest {
        ReadRequest {
            path: path.to_owned(),
            encoding,
            offset,
            length,
        }
    }

    fn write_text(path: &str, text: &str, create_parents: bool) -> WriteRequest {
        WriteRequest {
            path: path.to_owned(),
            content: WriteContent::Text(text.to_owned()),
            create_parents,
        }
    }

    fn code<T: fmt::Debug>(result: Result<T, FileError>) -> &'static str {
        result.unwrap_err().code()
    }

    fn names(result: &ListResult) -> Vec<&str> {
        result.entries.iter().map(|e| e.name.as_str()).collect()
    }

    fn delete_request(path: &str, recursive: bool, missing_ok: bool) -> DeleteRequest {
        DeleteRequest {
            path: path.to_owned(),
            recursive,
            missing_ok,
        }
    }

    fn move_request(from: &str, to: &str, overwrite: bool) -> MoveRequest {
        MoveRequest {
            from: from.to_owned(),
            to: to.to_owned(),
            overwrite,
        }
    }

    // ---- FILE_READ ----

    #[test]
    fn read_at_exactly_the_limit_is_whole_and_one_byte_more_is_too_large() {
        let sb = Sandbox::new();
        sb.file("exact.txt", "x".repeat(16));
        sb.file("over.txt", "x".repeat(17));
        let jail = sb.jail();
        let lim = limits(16, 16, 100);
        let whole = read(&jail, &ReadRequest::new("exact.txt"), &lim).unwrap();
        assert_eq!(whole.content, "x".repeat(16));
        assert_eq!(whole.size_bytes, 16);
        assert_eq!(whole.file_size, 16);
        assert!(!whole.truncated);
        assert_eq!(whole.path, sb.canonical_root().join("exact.txt"));
        let err = read(&jail, &ReadRequest::new("over.txt"), &lim).unwrap_err();
        assert_eq!(err.code(), "FILE_TOO_LARGE");
        assert_eq!(
            err,
            FileError::FileTooLarge {
                requested: 17,
                limit: 16
            }
        );
    }

    #[test]
    fn a_bounded_range_of_a_larger_file_reads_and_is_truncated() {
        let sb = Sandbox::new();
        let data: String = (0..64).map(|i| char::from(b'a' + (i % 26))).collect();
        sb.file("big.txt", &data);
        let jail = sb.jail();
        let lim = limits(16, 16, 100);
        let range = read(
            &jail,
            &read_range("big.txt", Encoding::Text, 10, Some(8)),
            &lim,
        )
        .unwrap();
        assert_eq!(range.content, &data[10..18]);
        assert_eq!(range.size_bytes, 8);
        assert_eq!(range.file_size, 64);
        assert!(range.truncated);
        // A range of exactly the limit is fine, one byte more is not, whatever the file size.
        let full = read(
            &jail,
            &read_range("big.txt", Encoding::Text, 0, Some(16)),
            &lim,
        )
        .unwrap();
        assert_eq!(full.content, &data[..16]);
        assert_eq!(
            code(read(
                &jail,
                &read_range("big.txt", Encoding::Text, 0, Some(17)),
                &lim
            )),
            "FILE_TOO_LARGE"
        );
        // Reading to the end from an offset counts only what is left.
        let tail = read(
            &jail,
            &read_range("big.txt", Encoding::Text, 48, None),
            &lim,
        )
        .unwrap();
        assert_eq!(tail.content, &data[48..]);
        assert!(!tail.truncated);
        assert_eq!(
            code(read(
                &jail,
                &read_range("big.txt", Encoding::Text, 47, None),
                &lim
            )),
            "FILE_TOO_LARGE"
        );
        // A range running past the end returns what exists and is not truncated.
        let end = read(
            &jail,
            &read_range("big.txt", Encoding::Text, 60, Some(10)),
            &lim,
        )
        .unwrap();
        assert_eq!(end.content, &data[60..]);
        assert_eq!(end.size_bytes, 4);
        assert!(!end.truncated);
    }

    #[test]
    fn offsets_past_the_end_read_nothing() {
        let sb = Sandbox::new();
        sb.file("short.txt", "0123456789");
        let jail = sb.jail();
        let lim = FileLimits::default();
        for length in [None, Some(5)] {
            let past = read(
                &jail,
                &read_range("short.txt", Encoding::Text, 100, length),
                &lim,
            )
            .unwrap();
            assert_eq!(past.content, "");
            assert_eq!(past.size_bytes, 0);
            assert!(!past.truncated);
        }
        let at_end = read(
            &jail,
            &read_range("short.txt", Encoding::Base64, 10, None),
            &lim,
        )
        .unwrap();
        assert_eq!(at_end.content, "");
        assert_eq!(at_end.encoding, Encoding::Base64);
    }

    #[test]
    fn crlf_is_preserved_and_invalid_utf8_becomes_replacement_chars() {
        let sb = Sandbox::new();
        sb.file("dos.txt", "a\r\nb\r\n");
        sb.file("latin1.txt", b"caf\xe9\r\n");
        let jail = sb.jail();
        let lim = FileLimits::default();
        assert_eq!(
            read(&jail, &ReadRequest::new("dos.txt"), &lim)
                .unwrap()
                .content,
            "a\r\nb\r\n"
        );
        let lossy = read(&jail, &ReadRequest::new("latin1.txt"), &lim).unwrap();
        assert_eq!(lossy.content, "caf\u{fffd}\r\n");
        assert_eq!(lossy.size_bytes, 6);
    }

    #[test]
    fn base64_round_trips_binary() {
        let sb = Sandbox::new();
        let jail = sb.jail();
        let lim = FileLimits::default();
        let bytes: Vec<u8> = (0..=255).collect();
        let written = write(
            &jail,
            &WriteRequest {
                path: "bin/all.bin".to_owned(),
                content: WriteContent::Base64(STANDARD.encode(&bytes)),
                create_parents: true,
            },
            &lim,
        )
        .unwrap();
        assert_eq!(written.size_bytes_written, 256);
        assert_eq!(fs::read(sb.root.join("bin/all.bin")).unwrap(), bytes);
        let back = read(
            &jail,
            &read_range("bin/all.bin", Encoding::Base64, 0, None),
            &lim,
        )
        .unwrap();
        assert_eq!(back.encoding, Encoding::Base64);
        assert_eq!(back.size_bytes, 256);
        assert_eq!(STANDARD.decode(&back.content).unwrap(), bytes);
        let slice = read(
            &jail,
            &read_range("bin/all.bin", Encoding::Base64, 250, Some(3)),
            &lim,
        )
        .unwrap();
        assert_eq!(
            STANDARD.decode(&slice.content).unwrap(),
            vec![250, 251, 252]
        );
        assert!(slice.truncated);
    }

    #[test]
    fn the_encoding_budget_caps_a_large_max_read() {
        let sb = Sandbox::new();
        let size = usize::try_from(TEXT_READ_BUDGET_BYTES).unwrap() + 1;
        sb.file("wide.txt", vec![b'a'; size]);
        let jail = sb.jail();
        let lim = FileLimits::default();
        assert!(lim.max_read_bytes > TEXT_READ_BUDGET_BYTES);
        assert_eq!(
            read(&jail, &ReadRequest::new("wide.txt"), &lim).unwrap_err(),
            FileError::FileTooLarge {
                requested: size as u64,
                limit: TEXT_READ_BUDGET_BYTES
            }
        );
        let binary = read(
            &jail,
            &read_range("wide.txt", Encoding::Base64, 0, None),
            &lim,
        )
        .unwrap();
        assert_eq!(binary.size_bytes, size as u64);
        assert_eq!(
            lim.effective_read_limit(Encoding::Base64),
            DEFAULT_MAX_FILE_SIZE_BYTES
        );
        assert_eq!(
            limits(u64::MAX, 1, 1).effective_read_limit(Encoding::Base64),
            BASE64_READ_BUDGET_BYTES
        );
        assert_eq!(limits(5, 5, 5).effective_read_limit(Encoding::Text), 5);
    }

    #[test]
    fn read_missing_directory_and_escape_have_their_codes() {
        let sb = Sandbox::new();
        fs::create_dir(sb.root.join("dir")).unwrap();
        let jail = sb.jail();
        let lim = FileLimits::default();
        assert_eq!(
            code(read(&jail, &ReadRequest::new("nope.txt"), &lim)),
            "PATH_NOT_FOUND"
        );
        fs::write(sb.root.join("plain"), "x").unwrap();
        assert_eq!(
            code(read(&jail, &ReadRequest::new("plain/x"), &lim)),
            "PATH_NOT_FOUND"
        );
        assert_eq!(
            code(read(&jail, &ReadRequest::new("dir"), &lim)),
            "INTERNAL_ERROR"
        );
        let outside = sb.outside.join("secret.txt");
        for escape in ["../outside/secret.txt", outside.to_str().unwrap()] {
            assert_eq!(
                code(read(&jail, &ReadRequest::new(escape), &lim)),
                "PATH_OUTSIDE_ALLOWED_ROOT"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn read_refuses_a_symlink_out_of_the_root() {
        let sb = Sandbox::new();
        std::os::unix::fs::symlink(sb.outside.join("secret.txt"), sb.root.join("link")).unwrap();
        let jail = sb.jail();
        let err = read(&jail, &ReadRequest::new("link"), &FileLimits::default()).unwrap_err();
        assert_eq!(err.code(), "PATH_OUTSIDE_ALLOWED_ROOT");
        let text = err.to_string();
        assert!(
            !text.contains("secret") && !text.contains(sb.outside.to_str().unwrap()),
            "{text}"
        );
    }

    // ---- FILE_WRITE ----

    #[test]
    fn write_then_read_and_overwrite_leave_no_temporaries() {
        let sb = Sandbox::new();
        let jail = sb.jail();
        let lim = FileLimits::default();
        let first = write(&jail, &write_text("note.txt", "one\r\n", false), &lim).unwrap();
        assert_eq!(first.path, sb.canonical_root().join("note.txt"));
        assert_eq!(first.size_bytes_written, 5);
        assert_eq!(
            read(&jail, &ReadRequest::new("note.txt"), &lim)
                .unwrap()
                .content,
            "one\r\n"
        );
        write(&jail, &write_text("note.txt", "two", false), &lim).unwrap();
        assert_eq!(
            read(&jail, &ReadRequest::new("note.txt"), &lim)
                .unwrap()
                .content,
            "two"
        );
        write(&jail, &write_text("empty.txt", "", false), &lim).unwrap();
        assert_eq!(fs::read(sb.root.join("empty.txt")).unwrap(), b"");
        let mut left: Vec<_> = fs::read_dir(&sb.root)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["empty.txt", "note.txt"]);
    }

    #[test]
    fn create_parents_off_needs_the_parent_and_on_makes_it() {
        let sb = Sandbox::new();
        let jail = sb.jail();
        let lim = FileLimits::default();
        assert_eq!(
            code(write(&jail, &write_text("a/b/c.txt", "x", false), &lim)),
            "PATH_NOT_FOUND"
        );
        assert!(!sb.root.join("a").exists());
        write(&jail, &write_text("a/b/c.txt", "x", true), &lim).unwrap();
        assert_eq!(fs::read_to_string(sb.root.join("a/b/c.txt")).unwrap(), "x");
        // An existing parent needs no flag.
        write(&jail, &write_text("a/b/d.txt", "y", false), &lim).unwrap();
        assert_eq!(
            code(write(&jail, &write_text("a", "over a dir", false), &lim)),
            "INTERNAL_ERROR"
        );
    }

    #[test]
    fn write_size_limit_and_bad_base64() {
        let sb = Sandbox::new();
        let jail = sb.jail();
        let lim = limits(100, 4, 100);
        write(&jail, &write_text("four.txt", "1234", false), &lim).unwrap();
        assert_eq!(
            write(&jail, &write_text("five.txt", "12345", false), &lim).unwrap_err(),
            FileError::FileTooLarge {
                requested: 5,
                limit: 4
            }
        );
        assert!(!sb.root.join("five.txt").exists());
        let b64 = |content: &str| WriteRequest {
            path: "b.bin".to_owned(),
            content: WriteContent::Base64(content.to_owned()),
            create_parents: false,
        };
        // Decoded size counts: 8 base64 chars are 5 bytes.
        assert_eq!(code(write(&jail, &b64("MTIzNDU="), &lim)), "FILE_TOO_LARGE");
        for bad in ["MTIz NA==", "MTIzNA", "MTIzNA=", "!!!!", "MTIzNA==\n"] {
            let err = write(&jail, &b64(bad), &lim).unwrap_err();
            assert_eq!(err, FileError::BadBase64, "{bad:?}");
            assert_eq!(err.code(), "INTERNAL_ERROR");
            assert_eq!(err.to_string(), "Bad base64");
        }
        write(&jail, &b64("MTIzNA=="), &lim).unwrap();
        assert_eq!(fs::read(sb.root.join("b.bin")).unwrap(), b"1234");
    }

    #[test]
    fn write_escapes_are_refused_before_anything_is_created() {
        let sb = Sandbox::new();
        let jail = sb.jail();
        let lim = FileLimits::default();
        let bad_base64_outside = WriteRequest {
            path: "../outside/x.bin".to_owned(),
            content: WriteContent::Base64("not base64".to_owned()),
            create_parents: false,
        };
        // The jail is checked first, as in the spec.
        assert_eq!(
            code(write(&jail, &bad_base64_outside, &lim)),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
        for (path, parents) in [("../outside/new/x.txt", true), ("../outside/x.txt", false)] {
            assert_eq!(
                code(write(&jail, &write_text(path, "x", parents), &lim)),
                "PATH_OUTSIDE_ALLOWED_ROOT"
            );
        }
        assert!(!sb.outside.join("new").exists());
        assert!(!sb.outside.join("x.txt").exists());
    }

    #[cfg(unix)]
    #[test]
    fn write_through_symlinks_stays_inside() {
        use std::os::unix::fs::symlink;
        let sb = Sandbox::new();
        symlink(&sb.outside, sb.root.join("out_dir")).unwrap();
        sb.file("real.txt", "old");
        symlink("real.txt", sb.root.join("alias.txt")).unwrap();
        let jail = sb.jail();
        let lim = FileLimits::default();
        assert_eq!(
            code(write(
                &jail,
                &write_text("out_dir/new/x.txt", "x", true),
                &lim
            )),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
        assert!(!sb.outside.join("new").exists());
        // A link inside the root is followed: the target's content changes, the link stays.
        let done = write(&jail, &write_text("alias.txt", "new", false), &lim).unwrap();
        assert_eq!(done.path, sb.canonical_root().join("real.txt"));
        assert_eq!(fs::read_to_string(sb.root.join("real.txt")).unwrap(), "new");
        assert!(
            fs::symlink_metadata(sb.root.join("alias.txt"))
                .unwrap()
                .is_symlink()
        );
    }

    // ---- FILE_STAT ----

    #[test]
    fn stat_reports_every_field_of_a_file_and_a_dir() {
        let sb = Sandbox::new();
        sb.file("data.csv", "col1,col2\n1,2\n");
        fs::create_dir(sb.root.join("sub")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(sb.root.join("data.csv"), fs::Permissions::from_mode(0o640))
                .unwrap();
        }
        let jail = sb.jail();
        let result = stat(&jail, &StatRequest::new("data.csv")).unwrap();
        assert!(result.exists());
        assert_eq!(result.path, sb.canonical_root().join("data.csv"));
        let info = result.info.unwrap();
        assert!(info.is_file && !info.is_dir && !info.is_symlink);
        assert_eq!(info.size_bytes, 14);
        assert_eq!(info.mime_type, Some("text/csv"));
        let now = epoch_seconds(SystemTime::now());
        let mtime = info.mtime.unwrap();
        assert!((now - mtime).abs() < 300.0, "{mtime} vs {now}");
        assert!((now - info.ctime.unwrap()).abs() < 300.0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let real = fs::metadata(sb.root.join("data.csv")).unwrap();
            assert_eq!(info.mode, "0640");
            assert_eq!(info.owner_uid, Some(real.uid()));
            assert_eq!(info.owner_gid, Some(real.gid()));
        }
        let dir = stat(&jail, &StatRequest::new("sub")).unwrap().info.unwrap();
        assert!(dir.is_dir && !dir.is_file);
        assert_eq!(dir.mime_type, None);
        assert_eq!(dir.mode.len(), 4);
    }

    #[test]
    fn stat_missing_is_exists_false_with_the_canonical_path() {
        let sb = Sandbox::new();
        sb.file("file.txt", "x");
        let jail = sb.jail();
        let missing = stat(&jail, &StatRequest::new("gone/child.txt")).unwrap();
        assert!(!missing.exists());
        assert_eq!(missing.info, None);
        assert_eq!(missing.path, sb.canonical_root().join("gone/child.txt"));
        // Under a file, as `test -e` would say.
        assert!(
            !stat(&jail, &StatRequest::new("file.txt/x"))
                .unwrap()
                .exists()
        );
        let absolute = sb.root.join("gone.txt");
        assert!(
            !stat(&jail, &StatRequest::new(absolute.to_str().unwrap()))
                .unwrap()
                .exists()
        );
    }

    #[test]
    fn stat_escape_is_an_error_not_a_missing_file() {
        let sb = Sandbox::new();
        let jail = sb.jail();
        for escape in [
            "../outside/secret.txt",
            "../outside/missing.txt",
            "/etc/passwd",
        ] {
            assert_eq!(
                code(stat(&jail, &StatRequest::new(escape))),
                "PATH_OUTSIDE_ALLOWED_ROOT",
                "{escape}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn stat_of_a_symlink_follows_or_reports_the_link() {
        use std::os::unix::fs::symlink;
        let sb = Sandbox::new();
        sb.file("target.json", "{\"k\": 1}");
        symlink("target.json", sb.root.join("link.txt")).unwrap();
        symlink(sb.outside.join("secret.txt"), sb.root.join("out_link")).unwrap();
        symlink("missing", sb.root.join("dangling")).unwrap();
        let jail = sb.jail();
        let canonical = sb.canonical_root();

        let followed = stat(&jail, &StatRequest::new("link.txt")).unwrap();
        assert_eq!(followed.path, canonical.join("target.json"));
        let info = followed.info.unwrap();
        assert!(info.is_file && info.is_symlink);
        assert_eq!(info.size_bytes, 8);
        assert_eq!(info.mime_type, Some("application/json"));

        let request = StatRequest {
            path: "link.txt".to_owned(),
            follow_symlinks: false,
        };
        let link = stat(&jail, &request).unwrap();
        assert_eq!(link.path, canonical.join("link.txt"));
        let info = link.info.unwrap();
        assert!(info.is_symlink && !info.is_file && !info.is_dir);
        assert_eq!(info.size_bytes, "target.json".len() as u64);

        // The target itself is not a link.
        assert!(
            !stat(&jail, &StatRequest::new("target.json"))
                .unwrap()
                .info
                .unwrap()
                .is_symlink
        );
        // Following out of the root is refused; the link itself may be looked at.
        assert_eq!(
            code(stat(&jail, &StatRequest::new("out_link"))),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
        let out = StatRequest {
            path: "out_link".to_owned(),
            follow_symlinks: false,
        };
        assert!(stat(&jail, &out).unwrap().info.unwrap().is_symlink);
        // A dangling link: its target does not exist, the link does.
        let dangling = stat(&jail, &StatRequest::new("dangling")).unwrap();
        assert!(!dangling.exists());
        assert_eq!(dangling.path, canonical.join("missing"));
        let dangling_link = StatRequest {
            path: "dangling".to_owned(),
            follow_symlinks: false,
        };
        assert!(stat(&jail, &dangling_link).unwrap().exists());
    }

    // ---- FILE_LIST ----

    #[test]
    fn list_filters_by_basename_glob_and_hides_dot_files() {
        let sb = Sandbox::new();
        for name in ["b.csv", "a.csv", "c.txt", ".hidden.csv", "sub/d.csv"] {
            sb.file(name, "1,2\n");
        }
        let jail = sb.jail();
        let lim = FileLimits::default();
        let mut request = ListRequest::new(".");
        assert_eq!(
            names(&list(&jail, &request, &lim).unwrap()),
            ["a.csv", "b.csv", "c.txt", "sub"]
        );
        request.pattern = Some("*.csv".to_owned());
        let csv = list(&jail, &request, &lim).unwrap();
        assert_eq!(names(&csv), ["a.csv", "b.csv"]);
        assert!(!csv.truncated);
        assert_eq!(csv.path, sb.canonical_root());
        let entry = &csv.entries[0];
        assert_eq!(entry.path, sb.canonical_root().join("a.csv"));
        assert!(entry.is_file && !entry.is_dir && !entry.is_symlink);
        assert_eq!(entry.size_bytes, 4);
        assert!(entry.mtime > 0.0);
        request.include_hidden = true;
        assert_eq!(
            names(&list(&jail, &request, &lim).unwrap()),
            [".hidden.csv", "a.csv", "b.csv"]
        );
        request.pattern = Some("?.[!c]*".to_owned());
        assert_eq!(names(&list(&jail, &request, &lim).unwrap()), ["c.txt"]);
        let sub = list(&jail, &ListRequest::new("sub"), &lim).unwrap();
        assert_eq!(names(&sub), ["d.csv"]);
        assert_eq!(sub.entries[0].path, sb.canonical_root().join("sub/d.csv"));
    }

    #[test]
    fn list_recursive_walks_in_a_deterministic_order() {
        let sb = Sandbox::new();
        for name in [
            "z.txt",
            "a/2.txt",
            "a/1.txt",
            "a/deep/x.txt",
            "b/y.txt",
            ".git/config",
            "a/.cache/c.txt",
        ] {
            sb.file(name, "x");
        }
        let jail = sb.jail();
        let lim = FileLimits::default();
        let mut request = ListRequest::new(".");
        request.recursive = true;
        let walk = list(&jail, &request, &lim).unwrap();
        assert_eq!(
            names(&walk),
            [
                "a", "b", "z.txt", "config", "1.txt", "2.txt", "deep", "c.txt", "x.txt", "y.txt"
            ]
        );
        let root = sb.canonical_root();
        assert_eq!(walk.entries[8].path, root.join("a/deep/x.txt"));
        request.include_hidden = true;
        assert_eq!(
            names(&list(&jail, &request, &lim).unwrap()),
            [
                ".git", "a", "b", "z.txt", "config", ".cache", "1.txt", "2.txt", "deep", "c.txt",
                "x.txt", "y.txt"
            ]
        );
        request.include_hidden = false;
        request.pattern = Some("*.txt".to_owned());
        assert_eq!(
            names(&list(&jail, &request, &lim).unwrap()),
            ["z.txt", "1.txt", "2.txt", "c.txt", "x.txt", "y.txt"]
        );
    }

    #[test]
    fn list_max_entries_and_the_hard_cap_truncate() {
        let sb = Sandbox::new();
        for name in ["1", "2", "3", "4", "5"] {
            sb.file(name, "x");
        }
        let jail = sb.jail();
        let lim = limits(100, 100, 3);
        let mut request = ListRequest::new(".");
        request.max_entries = 2;
        let two = list(&jail, &request, &lim).unwrap();
        assert_eq!(names(&two), ["1", "2"]);
        assert!(two.truncated);
        request.max_entries = 0;
        let none = list(&jail, &request, &lim).unwrap();
        assert!(none.entries.is_empty() && none.truncated);
        // The default of 1000 is far above the hard cap of 3.
        request.max_entries = DEFAULT_MAX_LIST_ENTRIES;
        let capped = list(&jail, &request, &lim).unwrap();
        assert_eq!(names(&capped), ["1", "2", "3"]);
        assert!(capped.truncated);
        // Exactly as many as allowed is not truncated.
        request.max_entries = 5;
        let exact = list(&jail, &request, &limits(100, 100, 5)).unwrap();
        assert_eq!(exact.entries.len(), 5);
        assert!(!exact.truncated);
        // Entries filtered out by the glob do not count.
        request.max_entries = 1;
        request.pattern = Some("[45]".to_owned());
        let filtered = list(&jail, &request, &lim).unwrap();
        assert_eq!(names(&filtered), ["4"]);
        assert!(filtered.truncated);
        request.pattern = Some("5".to_owned());
        assert!(!list(&jail, &request, &lim).unwrap().truncated);
    }

    #[test]
    fn list_missing_file_and_escape_have_their_codes() {
        let sb = Sandbox::new();
        sb.file("file.txt", "x");
        let jail = sb.jail();
        let lim = FileLimits::default();
        assert_eq!(
            code(list(&jail, &ListRequest::new("missing"), &lim)),
            "PATH_NOT_FOUND"
        );
        assert_eq!(
            code(list(&jail, &ListRequest::new("file.txt"), &lim)),
            "INTERNAL_ERROR"
        );
        assert_eq!(
            code(list(&jail, &ListRequest::new("file.txt/x"), &lim)),
            "PATH_NOT_FOUND"
        );
        assert_eq!(
            code(list(&jail, &ListRequest::new("../outside"), &lim)),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
    }

    #[cfg(unix)]
    #[test]
    fn list_shows_symlinks_without_entering_or_leaving() {
        use std::os::unix::fs::symlink;
        let sb = Sandbox::new();
        sb.file("real/inner.txt", "x");
        symlink("real", sb.root.join("linked")).unwrap();
        symlink(sb.outside.join("secret.txt"), sb.root.join("out_file")).unwrap();
        symlink(&sb.outside, sb.root.join("out_dir")).unwrap();
        let jail = sb.jail();
        let mut request = ListRequest::new(".");
        request.recursive = true;
        let walk = list(&jail, &request, &FileLimits::default()).unwrap();
        assert_eq!(
            names(&walk),
            ["linked", "out_dir", "out_file", "real", "inner.txt"]
        );
        let linked = &walk.entries[0];
        assert!(linked.is_symlink && linked.is_dir && !linked.is_file);
        for out in &walk.entries[1..3] {
            assert!(out.is_symlink && !out.is_file && !out.is_dir, "{out:?}");
        }
        assert_eq!(
            code(list(
                &jail,
                &ListRequest::new("out_dir"),
                &FileLimits::default()
            )),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
    }

    #[test]
    fn glob_matches_like_fnmatch() {
        let cases: &[(&str, &str, bool)] = &[
            ("*.csv", "data.csv", true),
            ("*.csv", "data.csv.bak", false),
            ("*", ".hidden", true),
            ("*", "", true),
            ("", "", true),
            ("", "a", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("?", "ab", false),
            ("??", "ab", true),
            ("[abc]x", "bx", true),
            ("[abc]x", "dx", false),
            ("[!abc]x", "dx", true),
            ("[!abc]x", "ax", false),
            ("[a-c]", "b", true),
            ("[a-c]", "d", false),
            ("[a-]", "-", true),
            ("[]]", "]", true),
            ("[!]]", "a", true),
            ("[!]]", "]", false),
            ("[unclosed", "[unclosed", true),
            ("[unclosed", "u", false),
            ("***x", "abcx", true),
            ("\\*", "\\abc", true),
            ("é?", "éa", true),
        ];
        for &(pattern, name, expected) in cases {
            assert_eq!(
                Glob::new(pattern).matches(name),
                expected,
                "{pattern:?} vs {name:?}"
            );
        }
        assert_eq!(Glob::new("*.CSV").matches("a.csv"), GLOB_CASE_INSENSITIVE);
    }

    // ---- FILE_DELETE ----

    #[test]
    fn delete_files_and_missing_ok() {
        let sb = Sandbox::new();
        sb.file("old.csv", "x");
        let jail = sb.jail();
        let done = delete(&jail, &delete_request("old.csv", false, false)).unwrap();
        assert!(done.existed);
        assert_eq!(done.path, sb.canonical_root().join("old.csv"));
        assert!(!sb.root.join("old.csv").exists());
        assert_eq!(
            code(delete(&jail, &delete_request("old.csv", false, false))),
            "PATH_NOT_FOUND"
        );
        let again = delete(&jail, &delete_request("old.csv", false, true)).unwrap();
        assert!(!again.existed);
        assert_eq!(
            code(delete(&jail, &delete_request("a/b/c", true, false))),
            "PATH_NOT_FOUND"
        );
        assert!(
            !delete(&jail, &delete_request("a/b/c", true, true))
                .unwrap()
                .existed
        );
    }

    #[test]
    fn delete_directories_needs_recursive_unless_empty() {
        let sb = Sandbox::new();
        sb.file("full/inner/x.txt", "x");
        fs::create_dir(sb.root.join("empty")).unwrap();
        let jail = sb.jail();
        assert_eq!(
            code(delete(&jail, &delete_request("full", false, false))),
            "PATH_NOT_EMPTY"
        );
        assert!(sb.root.join("full/inner/x.txt").exists());
        delete(&jail, &delete_request("full", true, false)).unwrap();
        assert!(!sb.root.join("full").exists());
        delete(&jail, &delete_request("empty", false, false)).unwrap();
        assert!(!sb.root.join("empty").exists());
        // The root itself never goes, recursive or not.
        for root in [".", sb.root.to_str().unwrap()] {
            assert_eq!(
                code(delete(&jail, &delete_request(root, true, false))),
                "INTERNAL_ERROR"
            );
        }
        assert!(sb.root.exists());
    }

    #[test]
    fn delete_escape_is_refused() {
        let sb = Sandbox::new();
        let jail = sb.jail();
        for (recursive, missing_ok) in [(false, false), (true, true)] {
            assert_eq!(
                code(delete(
                    &jail,
                    &delete_request("../outside/secret.txt", recursive, missing_ok)
                )),
                "PATH_OUTSIDE_ALLOWED_ROOT"
            );
            assert_eq!(
                code(delete(
                    &jail,
                    &delete_request("../outside", recursive, missing_ok)
                )),
                "PATH_OUTSIDE_ALLOWED_ROOT"
            );
        }
        assert_eq!(
            fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
            "outside"
        );
    }

    #[cfg(unix)]
    #[test]
    fn delete_removes_a_symlink_never_its_target() {
        use std::os::unix::fs::symlink;
        let sb = Sandbox::new();
        sb.file("kept.txt", "kept");
        sb.file("dir/inner.txt", "inner");
        symlink(sb.outside.join("secret.txt"), sb.root.join("out_link")).unwrap();
        symlink(&sb.outside, sb.root.join("out_dir")).unwrap();
        symlink("kept.txt", sb.root.join("in_link")).unwrap();
        symlink("dir", sb.root.join("dir_link")).unwrap();
        let jail = sb.jail();
        for link in ["out_link", "out_dir", "in_link", "dir_link"] {
            let done = delete(&jail, &delete_request(link, true, false)).unwrap();
            assert!(done.existed);
            assert_eq!(done.path, sb.canonical_root().join(link));
            assert!(
                fs::symlink_metadata(sb.root.join(link)).is_err(),
                "{link} still there"
            );
        }
        assert_eq!(
            fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
            "outside"
        );
        assert_eq!(
            fs::read_to_string(sb.root.join("kept.txt")).unwrap(),
            "kept"
        );
        assert_eq!(
            fs::read_to_string(sb.root.join("dir/inner.txt")).unwrap(),
            "inner"
        );
    }

    // ---- FILE_MOVE ----

    #[test]
    fn move_renames_and_refuses_an_existing_destination() {
        let sb = Sandbox::new();
        sb.file("a.csv", "a");
        sb.file("b.csv", "b");
        let jail = sb.jail();
        let lim = FileLimits::default();
        let done = move_path(&jail, &move_request("a.csv", "c.csv", false), &lim).unwrap();
        assert_eq!(done.from, sb.canonical_root().join("a.csv"));
        assert_eq!(done.to, sb.canonical_root().join("c.csv"));
        assert!(!done.copied);
        assert!(!sb.root.join("a.csv").exists());
        assert_eq!(fs::read_to_string(sb.root.join("c.csv")).unwrap(), "a");
        assert_eq!(
            code(move_path(
                &jail,
                &move_request("c.csv", "b.csv", false),
                &lim
            )),
            "PATH_EXISTS"
        );
        assert_eq!(fs::read_to_string(sb.root.join("b.csv")).unwrap(), "b");
        assert_eq!(fs::read_to_string(sb.root.join("c.csv")).unwrap(), "a");
        assert_eq!(
            code(move_path(
                &jail,
                &move_request("a.csv", "d.csv", false),
                &lim
            )),
            "PATH_NOT_FOUND"
        );
        // Replaying a finished move finds no source, as the idempotency table says.
        assert_eq!(
            code(move_path(
                &jail,
                &move_request("a.csv", "c.csv", true),
                &lim
            )),
            "PATH_NOT_FOUND"
        );
    }

    #[test]
    fn move_with_overwrite_replaces_files_and_directories() {
        let sb = Sandbox::new();
        sb.file("new.txt", "new");
        sb.file("old.txt", "old");
        sb.file("src_dir/x.txt", "x");
        sb.file("dst_dir/y.txt", "y");
        sb.file("file_src.txt", "f");
        sb.file("over_dir/z.txt", "z");
        fs::create_dir(sb.root.join("empty_dst")).unwrap();
        sb.file("dir2/w.txt", "w");
        let jail = sb.jail();
        let lim = FileLimits::default();
        move_path(&jail, &move_request("new.txt", "old.txt", true), &lim).unwrap();
        assert_eq!(fs::read_to_string(sb.root.join("old.txt")).unwrap(), "new");
        assert!(!sb.root.join("new.txt").exists());
        // Directory over a non-empty directory.
        move_path(&jail, &move_request("src_dir", "dst_dir", true), &lim).unwrap();
        assert_eq!(
            fs::read_to_string(sb.root.join("dst_dir/x.txt")).unwrap(),
            "x"
        );
        assert!(!sb.root.join("dst_dir/y.txt").exists());
        assert!(!sb.root.join("src_dir").exists());
        // File over a directory.
        move_path(&jail, &move_request("file_src.txt", "over_dir", true), &lim).unwrap();
        assert_eq!(fs::read_to_string(sb.root.join("over_dir")).unwrap(), "f");
        // Directory over an empty directory (a plain rename).
        move_path(&jail, &move_request("dir2", "empty_dst", true), &lim).unwrap();
        assert_eq!(
            fs::read_to_string(sb.root.join("empty_dst/w.txt")).unwrap(),
            "w"
        );
        // Directory over a file.
        move_path(&jail, &move_request("empty_dst", "old.txt", true), &lim).unwrap();
        assert_eq!(
            fs::read_to_string(sb.root.join("old.txt/w.txt")).unwrap(),
            "w"
        );
        // Moving onto itself is a no-op.
        move_path(&jail, &move_request("old.txt", "old.txt", true), &lim).unwrap();
        let mut left: Vec<_> = fs::read_dir(&sb.root)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["dst_dir", "old.txt", "over_dir"],
            "no temporaries left"
        );
    }

    #[test]
    fn move_into_a_missing_directory_or_into_itself_fails_and_keeps_the_source() {
        let sb = Sandbox::new();
        sb.file("a.txt", "a");
        sb.file("tree/leaf.txt", "l");
        let jail = sb.jail();
        let lim = FileLimits::default();
        let err = move_path(
            &jail,
            &move_request("a.txt", "missing/dir/a.txt", false),
            &lim,
        )
        .unwrap_err();
        assert_eq!(err.code(), "PATH_NOT_FOUND");
        assert_eq!(err, not_found(Path::new("missing/dir")));
        assert!(sb.root.join("a.txt").exists());
        assert_eq!(
            move_path(&jail, &move_request("tree", "tree/sub", false), &lim).unwrap_err(),
            FileError::NestedMove
        );
        assert_eq!(
            code(move_path(
                &jail,
                &move_request("tree/leaf.txt", "tree", true),
                &lim
            )),
            "INTERNAL_ERROR"
        );
        assert_eq!(
            fs::read_to_string(sb.root.join("tree/leaf.txt")).unwrap(),
            "l"
        );
    }

    #[test]
    fn move_escapes_are_refused_on_either_side() {
        let sb = Sandbox::new();
        sb.file("a.txt", "a");
        let jail = sb.jail();
        let lim = FileLimits::default();
        for (from, to) in [
            ("../outside/secret.txt", "stolen.txt"),
            ("a.txt", "../outside/a.txt"),
            ("a.txt", "../outside/secret.txt"),
        ] {
            for overwrite in [false, true] {
                assert_eq!(
                    code(move_path(&jail, &move_request(from, to, overwrite), &lim)),
                    "PATH_OUTSIDE_ALLOWED_ROOT"
                );
            }
        }
        assert!(sb.root.join("a.txt").exists());
        assert!(!sb.root.join("stolen.txt").exists());
        assert_eq!(
            fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
            "outside"
        );
    }

    #[cfg(unix)]
    #[test]
    fn move_carries_a_symlink_as_a_link() {
        use std::os::unix::fs::symlink;
        let sb = Sandbox::new();
        sb.file("target.txt", "t");
        symlink("target.txt", sb.root.join("link")).unwrap();
        let jail = sb.jail();
        move_path(
            &jail,
            &move_request("link", "moved", false),
            &FileLimits::default(),
        )
        .unwrap();
        assert!(
            fs::symlink_metadata(sb.root.join("moved"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(sb.root.join("target.txt")).unwrap(), "t");
    }

    /// The destination rule: a `to` that is a link leading out of the root (to a directory
    /// or a file, dangling or not, absolute or relative) is refused with or without
    /// `overwrite`, and nothing changes on disk.
    #[cfg(unix)]
    #[test]
    fn move_onto_a_link_out_of_the_root_is_refused_and_changes_nothing() {
        use std::os::unix::fs::symlink;
        let sb = Sandbox::new();
        sb.file("src.txt", "source");
        fs::create_dir(sb.root.join("srcdir")).unwrap();
        let links = [
            ("to_dir", sb.outside.clone()),
            ("to_file", sb.outside.join("secret.txt")),
            ("dangling_abs", sb.outside.join("missing")),
            ("dangling_rel", PathBuf::from("../outside/missing")),
            ("to_file_rel", PathBuf::from("../outside/secret.txt")),
        ];
        for (name, target) in &links {
            symlink(target, sb.root.join(name)).unwrap();
        }
        let outside_before: Vec<_> = fs::read_dir(&sb.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let jail = sb.jail();
        for (name, target) in &links {
            for from in ["src.txt", "srcdir"] {
                for overwrite in [false, true] {
                    assert_eq!(
                        code(move_path(
                            &jail,
                            &move_request(from, name, overwrite),
                            &FileLimits::default()
                        )),
                        "PATH_OUTSIDE_ALLOWED_ROOT",
                        "{from} -> {name} overwrite={overwrite}"
                    );
                }
            }
            assert_eq!(&fs::read_link(sb.root.join(name)).unwrap(), target);
        }
        assert_eq!(
            fs::read_to_string(sb.root.join("src.txt")).unwrap(),
            "source"
        );
        assert!(sb.root.join("srcdir").is_dir());
        let outside_after: Vec<_> = fs::read_dir(&sb.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(outside_before, outside_after);
        assert_eq!(
            fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
            "outside"
        );
    }

    /// A destination link that resolves inside the root is replaced as a link (its target
    /// keeps its content), as `rename(2)` does; without `overwrite` it is `PATH_EXISTS`.
    #[cfg(unix)]
    #[test]
    fn move_onto_a_link_inside_the_root_replaces_the_link() {
        use std::os::unix::fs::symlink;
        let sb = Sandbox::new();
        sb.file("src.txt", "source");
        sb.file("target.txt", "target");
        symlink("target.txt", sb.root.join("alias")).unwrap();
        symlink("missing-inside", sb.root.join("dangling")).unwrap();
        let jail = sb.jail();
        let lim = FileLimits::default();
        assert_eq!(
            code(move_path(
                &jail,
                &move_request("src.txt", "alias", false),
                &lim
            )),
            "PATH_EXISTS"
        );
        move_path(&jail, &move_request("src.txt", "alias", true), &lim).unwrap();
        let alias = sb.root.join("alias");
        assert!(!fs::symlink_metadata(&alias).unwrap().is_symlink());
        assert_eq!(fs::read_to_string(&alias).unwrap(), "source");
        assert_eq!(
            fs::read_to_string(sb.root.join("target.txt")).unwrap(),
            "target"
        );
        move_path(&jail, &move_request("alias", "dangling", true), &lim).unwrap();
        assert_eq!(
            fs::read_to_string(sb.root.join("dangling")).unwrap(),
            "source"
        );
        assert!(!sb.root.join("missing-inside").exists());
    }

    /// FILE_WRITE follows the same rule for the file it creates or replaces: a link out of
    /// the root (dangling or not) is refused and nothing outside appears.
    #[cfg(unix)]
    #[test]
    fn write_onto_a_link_out_of_the_root_is_refused() {
        use std::os::unix::fs::symlink;
        let sb = Sandbox::new();
        symlink(sb.outside.join("secret.txt"), sb.root.join("to_file")).unwrap();
        symlink(sb.outside.join("new.txt"), sb.root.join("dangling_abs")).unwrap();
        symlink("../outside/new2.txt", sb.root.join("dangling_rel")).unwrap();
        let jail = sb.jail();
        for name in ["to_file", "dangling_abs", "dangling_rel"] {
            for create_parents in [false, true] {
                assert_eq!(
                    code(write(
                        &jail,
                        &write_text(name, "x", create_parents),
                        &FileLimits::default()
                    )),
                    "PATH_OUTSIDE_ALLOWED_ROOT",
                    "{name}"
                );
            }
            assert!(
                fs::symlink_metadata(sb.root.join(name))
                    .unwrap()
                    .is_symlink()
            );
        }
        assert_eq!(
            fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
            "outside"
        );
        assert!(!sb.outside.join("new.txt").exists());
        assert!(!sb.outside.join("new2.txt").exists());
    }

    #[test]
    fn the_cross_device_fallback_copies_then_deletes() {
        // A real cross-device rename needs a second mount inside the root; the fallback itself
        // is exercised directly on one device.
        let sb = Sandbox::new();
        sb.file("tree/a.txt", "a");
        sb.file("tree/sub/b.bin", [0_u8, 255, 1]);
        fs::create_dir(sb.root.join("tree/empty")).unwrap();
        sb.file("big.txt", "12345");
        let jail = sb.jail();
        let lim = limits(100, 4, 100);
        let from = jail.resolve("tree").unwrap();
        let to = jail.resolve("copy").unwrap();
        copy_then_delete(&jail, &from, &to, &lim).unwrap();
        assert!(!sb.root.join("tree").exists());
        assert_eq!(fs::read_to_string(sb.root.join("copy/a.txt")).unwrap(), "a");
        assert_eq!(
            fs::read(sb.root.join("copy/sub/b.bin")).unwrap(),
            [0, 255, 1]
        );
        assert!(sb.root.join("copy/empty").is_dir());
        // Too large for the in-memory copy: refused, source kept, nothing left behind.
        let big = jail.resolve("big.txt").unwrap();
        let big_to = jail.resolve("copy/big.txt").unwrap();
        assert_eq!(
            code(copy_then_delete(&jail, &big, &big_to, &lim)),
            "FILE_TOO_LARGE"
        );
        assert!(sb.root.join("big.txt").exists());
        assert!(!sb.root.join("copy/big.txt").exists());
        // Missing destination parent: nothing is created.
        let nowhere = jail.resolve("nowhere/x").unwrap();
        let small = jail.resolve("copy/a.txt").unwrap();
        assert_eq!(
            code(copy_then_delete(&jail, &small, &nowhere, &lim)),
            "PATH_NOT_FOUND"
        );
        assert!(!sb.root.join("nowhere").exists());
        assert!(is_cross_device(&JailError::Io {
            path: PathBuf::new(),
            kind: io::ErrorKind::CrossesDevices
        }));
    }

    #[cfg(unix)]
    #[test]
    fn the_cross_device_fallback_refuses_symlinks_and_cleans_up() {
        let sb = Sandbox::new();
        sb.file("tree/a.txt", "a");
        std::os::unix::fs::symlink("a.txt", sb.root.join("tree/z_link")).unwrap();
        let jail = sb.jail();
        let from = jail.resolve("tree").unwrap();
        let to = jail.resolve("copy").unwrap();
        assert_eq!(
            copy_then_delete(&jail, &from, &to, &FileLimits::default()).unwrap_err(),
            FileError::CrossDeviceSymlink {
                path: PathBuf::from("tree/z_link")
            }
        );
        assert!(!sb.root.join("copy").exists());
        assert!(sb.root.join("tree/a.txt").exists());
    }

    // ---- errors ----

    #[test]
    fn error_codes_are_the_wire_codes() {
        let path = PathBuf::from("p");
        let cases = [
            (
                FileError::from(JailError::PathOutsideAllowedRoot),
                "PATH_OUTSIDE_ALLOWED_ROOT",
            ),
            (
                FileError::from(JailError::PathNotFound { path: path.clone() }),
                "PATH_NOT_FOUND",
            ),
            (
                FileError::from(JailError::PathNotEmpty { path: path.clone() }),
                "PATH_NOT_EMPTY",
            ),
            (
                FileError::from(JailError::PathExists { path: path.clone() }),
                "PATH_EXISTS",
            ),
            (
                FileError::from(JailError::PathInvalidChars),
                "PATH_INVALID_CHARS",
            ),
            (
                FileError::FileTooLarge {
                    requested: 2,
                    limit: 1,
                },
                "FILE_TOO_LARGE",
            ),
            (FileError::BadBase64, "INTERNAL_ERROR"),
            (
                FileError::NotARegularFile { path: path.clone() },
                "INTERNAL_ERROR",
            ),
            (FileError::NestedMove, "INTERNAL_ERROR"),
            (FileError::CrossDeviceSymlink { path }, "INTERNAL_ERROR"),
        ];
        for (err, expected) in cases {
            assert_eq!(err.code(), expected, "{err}");
        }
    }

    #[test]
    fn debug_output_never_shows_content() {
        let secret = "SECRET-CONTENT";
        let request = write_text("x", secret, false);
        assert!(!format!("{request:?}").contains(secret));
        let result = ReadResult {
            content: secret.to_owned(),
            encoding: Encoding::Text,
            size_bytes: 14,
            file_size: 14,
            truncated: false,
            path: PathBuf::from("/x"),
        };
        assert!(!format!("{result:?}").contains(secret));
    }

    #[cfg(unix)]
    #[test]
    fn reading_a_fifo_is_refused_instead_of_blocking() {
        let sb = Sandbox::new();
        let status = std::process::Command::new("mkfifo")
            .arg(sb.root.join("pipe"))
            .status();
        // Without mkfifo there is nothing to test.
        if !status.is_ok_and(|s| s.success()) {
            return;
        }
        let jail = sb.jail();
        assert_eq!(
            read(&jail, &ReadRequest::new("pipe"), &FileLimits::default()).unwrap_err(),
            FileError::NotARegularFile {
                path: PathBuf::from("pipe")
            }
        );
    }
}
