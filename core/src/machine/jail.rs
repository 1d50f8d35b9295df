//! The connector's path jail: platform-supplied paths resolved under the allowed root, race-free.
//!
//! Checking a path and then using it by name is a TOCTOU hole: a symlink swapped in between
//! escapes the check. So the jail holds an open handle to the root and performs every operation
//! through it with root-relative paths (cap-std, which on Linux uses `openat2` with
//! `RESOLVE_BENEATH` and otherwise resolves component by component). [`Jail::resolve`] only names
//! the target and computes the canonical path the spec wants in responses; it is not what keeps
//! an operation inside the root, so a swap after it can make an operation fail but never leave.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

use cap_std::fs::{Dir, OpenOptions};
pub use cap_std::fs::{DirEntry, Metadata, ReadDir};
use uuid::Uuid;

/// How many symlinks one resolution may expand before it counts as a loop (Linux's own limit).
const MAX_SYMLINK_EXPANSIONS: u32 = 40;

/// Longest accepted wire path in characters, per platform (section 8, step 2).
#[cfg(windows)]
const PATH_MAX_CHARS: usize = 32_767;
#[cfg(any(target_os = "macos", target_os = "ios"))]
const PATH_MAX_CHARS: usize = 1024;
#[cfg(not(any(windows, target_os = "macos", target_os = "ios")))]
const PATH_MAX_CHARS: usize = 4096;

/// `ELOOP`: `ErrorKind::FilesystemLoop` is still unstable, so the raw number identifies it.
#[cfg(any(target_os = "linux", target_os = "android"))]
const ELOOP: Option<i32> = Some(40);
#[cfg(any(
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "netbsd",
    target_os = "dragonfly"
))]
const ELOOP: Option<i32> = Some(62);
#[cfg(windows)]
const ELOOP: Option<i32> = Some(1921); // ERROR_CANT_RESOLVE_FILENAME
#[cfg(not(any(
    windows,
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "netbsd",
    target_os = "dragonfly"
)))]
const ELOOP: Option<i32> = None;

/// Why a path was refused or an operation under the jail failed.
///
/// Display texts name at most the jail-relative path: never the raw wire path of a refused
/// request, the root, or any file content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JailError {
    /// NUL (or, on Windows, another illegal character or an alternate data stream), or empty.
    #[error("path contains characters that are not allowed on this platform")]
    PathInvalidChars,
    /// Longer than the platform's `PATH_MAX`; the reference reports it as invalid characters.
    #[error("path is longer than this platform allows")]
    PathTooLong,
    /// A Windows reserved device name (`CON`, `NUL`, `COM1`, ...) in some component.
    #[error("path contains a reserved device name")]
    PathReservedName,
    /// The path, or a symlink on the way, leads outside the allowed root.
    #[error("path is outside the allowed root")]
    PathOutsideAllowedRoot,
    /// The allowed root itself is missing or not a directory; the reference treats that as
    /// every path being outside it.
    #[error("the allowed root is unavailable ({kind})")]
    RootUnavailable {
        /// What the OS said about the root.
        kind: io::ErrorKind,
    },
    /// Nothing exists at the path.
    #[error("path not found: {}", show(.path))]
    PathNotFound {
        /// Jail-relative path.
        path: PathBuf,
    },
    /// Something already exists where the operation needed nothing.
    #[error("path already exists: {}", show(.path))]
    PathExists {
        /// Jail-relative path.
        path: PathBuf,
    },
    /// A directory that had to be empty is not.
    #[error("directory is not empty: {}", show(.path))]
    PathNotEmpty {
        /// Jail-relative path.
        path: PathBuf,
    },
    /// A directory was required (for example to list) but this is something else.
    #[error("not a directory: {}", show(.path))]
    NotADirectory {
        /// Jail-relative path.
        path: PathBuf,
    },
    /// A file was required (for example to read or write) but this is a directory.
    #[error("is a directory: {}", show(.path))]
    IsADirectory {
        /// Jail-relative path.
        path: PathBuf,
    },
    /// The OS refused access (a real permission problem, not an escape attempt).
    #[error("permission denied: {}", show(.path))]
    PermissionDenied {
        /// Jail-relative path.
        path: PathBuf,
    },
    /// Symlinks that never resolve to a real entry.
    #[error("too many levels of symbolic links: {}", show(.path))]
    SymlinkLoop {
        /// Jail-relative path.
        path: PathBuf,
    },
    /// Removing, renaming or overwriting the allowed root itself.
    #[error("the allowed root itself cannot be removed, renamed or replaced")]
    RootOperation,
    /// Any other OS failure; only the kind is kept so no OS text leaks.
    #[error("I/O error ({kind}): {}", show(.path))]
    Io {
        /// Jail-relative path.
        path: PathBuf,
        /// What the OS said.
        kind: io::ErrorKind,
    },
}

impl JailError {
    /// The wire `ERROR.code` of PROTOCOL.md for this failure.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Self::PathInvalidChars | Self::PathTooLong => "PATH_INVALID_CHARS",
            Self::PathReservedName => "PATH_RESERVED_NAME",
            Self::PathOutsideAllowedRoot | Self::RootUnavailable { .. } => {
                "PATH_OUTSIDE_ALLOWED_ROOT"
            }
            Self::PathNotFound { .. } => "PATH_NOT_FOUND",
            Self::PathExists { .. } => "PATH_EXISTS",
            Self::PathNotEmpty { .. } => "PATH_NOT_EMPTY",
            // The spec has no codes for these; the reference answers them with INTERNAL_ERROR.
            Self::NotADirectory { .. }
            | Self::IsADirectory { .. }
            | Self::PermissionDenied { .. }
            | Self::SymlinkLoop { .. }
            | Self::RootOperation
            | Self::Io { .. } => "INTERNAL_ERROR",
        }
    }

    /// Maps an I/O error of an operation on `path` (for example from iterating a [`ReadDir`]).
    #[must_use]
    pub fn from_io(err: &io::Error, path: &JailedPath) -> Self {
        map_io(err, &path.relative)
    }
}

fn show(path: &Path) -> std::path::Display<'_> {
    if path.as_os_str().is_empty() {
        Path::new(".").display()
    } else {
        path.display()
    }
}

fn map_io(err: &io::Error, rel: &Path) -> JailError {
    let path = rel.to_path_buf();
    if ELOOP.is_some() && err.raw_os_error() == ELOOP {
        return JailError::SymlinkLoop { path };
    }
    match err.kind() {
        // cap-std reports escapes as a synthetic PermissionDenied with no OS error number; a real
        // EACCES always carries one.
        io::ErrorKind::PermissionDenied if err.raw_os_error().is_none() => {
            JailError::PathOutsideAllowedRoot
        }
        io::ErrorKind::PermissionDenied => JailError::PermissionDenied { path },
        io::ErrorKind::NotFound => JailError::PathNotFound { path },
        io::ErrorKind::AlreadyExists => JailError::PathExists { path },
        io::ErrorKind::DirectoryNotEmpty => JailError::PathNotEmpty { path },
        io::ErrorKind::NotADirectory => JailError::NotADirectory { path },
        io::ErrorKind::IsADirectory => JailError::IsADirectory { path },
        kind => JailError::Io { path, kind },
    }
}

/// A path the jail has accepted: root-relative, with every symlink that existed at resolution
/// time already followed. Only [`Jail`] makes one.
#[must_use]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JailedPath {
    relative: PathBuf,
    absolute: PathBuf,
}

impl JailedPath {
    /// The path relative to the root; empty for the root itself.
    #[must_use]
    pub fn relative(&self) -> &Path {
        &self.relative
    }

    /// The canonical absolute path, for responses and audit records.
    #[must_use]
    pub fn absolute(&self) -> &Path {
        &self.absolute
    }

    /// Whether this is the allowed root itself.
    #[must_use]
    pub fn is_root(&self) -> bool {
        self.relative.as_os_str().is_empty()
    }

    /// The name to hand to cap-std, which wants `.` rather than an empty path for the root.
    fn target(&self) -> &Path {
        if self.is_root() {
            Path::new(".")
        } else {
            &self.relative
        }
    }
}

/// One step still to walk while resolving.
enum Step {
    Parent,
    Name(OsString),
}

/// The allowed root, held open so that nothing done through it can leave it.
#[derive(Debug)]
pub struct Jail {
    /// Canonical root, as reported in responses.
    root: PathBuf,
    /// The root as configured, made absolute; wire paths may be spelled under it.
    given_root: PathBuf,
    dir: Dir,
}

impl Jail {
    /// Opens the jail at `root`, which must exist and be a directory.
    ///
    /// # Errors
    /// [`JailError::RootUnavailable`] when the root is missing, not a directory or unreadable.
    pub fn open(root: &Path) -> Result<Self, JailError> {
        let unavailable = |err: io::Error| JailError::RootUnavailable { kind: err.kind() };
        let canonical = std::fs::canonicalize(root).map_err(unavailable)?;
        let given_root = std::path::absolute(root).map_err(unavailable)?;
        let dir =
            Dir::open_ambient_dir(&canonical, cap_std::ambient_authority()).map_err(unavailable)?;
        // Opening a regular file as a directory can succeed on some platforms.
        if !dir.dir_metadata().map_err(unavailable)?.is_dir() {
            return Err(JailError::RootUnavailable {
                kind: io::ErrorKind::NotADirectory,
            });
        }
        Ok(Self {
            root: canonical,
            given_root,
            dir,
        })
    }

    /// The canonical allowed root.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a wire path: absolute under the root, relative to the root, or `~`-prefixed.
    /// Every existing symlink is followed (like `realpath`); a missing tail is kept as spelled.
    ///
    /// # Errors
    /// [`JailError::PathInvalidChars`], [`JailError::PathTooLong`],
    /// [`JailError::PathReservedName`], [`JailError::PathOutsideAllowedRoot`],
    /// [`JailError::SymlinkLoop`], or another error met while looking at the path.
    pub fn resolve(&self, wire_path: &str) -> Result<JailedPath, JailError> {
        self.resolve_with(wire_path, std::env::home_dir().as_deref(), true)
    }

    /// Like [`Jail::resolve`] but leaves the final component unfollowed, for operations that
    /// concern a symlink itself (`lstat`, deleting the link rather than its target).
    ///
    /// # Errors
    /// As [`Jail::resolve`].
    pub fn resolve_no_follow(&self, wire_path: &str) -> Result<JailedPath, JailError> {
        self.resolve_with(wire_path, std::env::home_dir().as_deref(), false)
    }

    /// Names an entry of the directory `parent` (as listed by [`Jail::read_dir`]) without
    /// following it, so a recursive listing can descend.
    ///
    /// # Errors
    /// [`JailError::PathInvalidChars`] unless `name` is one plain component.
    pub fn child(&self, parent: &JailedPath, name: &OsStr) -> Result<JailedPath, JailError> {
        let mut components = Path::new(name).components();
        let valid = matches!(
            (components.next(), components.next()),
            (Some(Component::Normal(only)), None) if only == name
        );
        if !valid || name.as_encoded_bytes().contains(&0) {
            return Err(JailError::PathInvalidChars);
        }
        Ok(self.jailed(parent.relative.join(name)))
    }

    fn resolve_with(
        &self,
        wire_path: &str,
        home: Option<&Path>,
        follow_last: bool,
    ) -> Result<JailedPath, JailError> {
        check_chars(wire_path)?;
        let expanded = expand_home(wire_path, home);
        let relative = if expanded.is_absolute() {
            self.relative_of_absolute(&expanded)
                .ok_or(JailError::PathOutsideAllowedRoot)?
        } else {
            expanded
        };
        let canonical = self.realpath(&relative, follow_last)?;
        Ok(self.jailed(canonical))
    }

    fn jailed(&self, relative: PathBuf) -> JailedPath {
        JailedPath {
            absolute: if relative.as_os_str().is_empty() {
                self.root.clone()
            } else {
                self.root.join(&relative)
            },
            relative,
        }
    }

    /// Maps an absolute path to one relative to the root, or `None` if it lies elsewhere.
    fn relative_of_absolute(&self, absolute: &Path) -> Option<PathBuf> {
        let has_parent = absolute.components().any(|c| c == Component::ParentDir);
        if !has_parent {
            for root in [&self.root, &self.given_root] {
                // Component-wise, so `/root2` never counts as inside `/root`.
                if let Ok(rest) = absolute.strip_prefix(root) {
                    return Some(rest.to_path_buf());
                }
            }
        }
        // Spelled via `..` or via a symlinked ancestor of the root (macOS `/var` ->
        // `/private/var`): ask the OS where the longest existing prefix really is. This lookup is
        // outside the jail, but its answer only names a path; every use still goes through `dir`.
        let mut existing = absolute;
        let mut tail = Vec::new();
        loop {
            if let Ok(real) = std::fs::canonicalize(existing) {
                let mut relative = real.strip_prefix(&self.root).ok()?.to_path_buf();
                relative.extend(tail.iter().rev());
                return Some(relative);
            }
            tail.push(existing.file_name()?);
            existing = existing.parent()?;
        }
    }

    /// `realpath` beneath the root: symlinks followed one by one through `dir`, a missing
    /// component kept as spelled, and any climb above the root refused.
    fn realpath(&self, relative: &Path, follow_last: bool) -> Result<PathBuf, JailError> {
        let mut pending = Vec::new();
        push_steps(&mut pending, relative)?;
        let mut resolved = PathBuf::new();
        let mut expansions = 0_u32;
        while let Some(step) = pending.pop() {
            let name = match step {
                Step::Parent => {
                    if !resolved.pop() {
                        return Err(JailError::PathOutsideAllowedRoot);
                    }
                    continue;
                }
                Step::Name(name) => name,
            };
            let candidate = resolved.join(&name);
            if pending.is_empty() && !follow_last {
                resolved = candidate;
                continue;
            }
            let is_symlink = match self.dir.symlink_metadata(&candidate) {
                Ok(meta) => meta.is_symlink(),
                Err(err)
                    if matches!(
                        err.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                    ) =>
                {
                    false
                }
                Err(err) => return Err(map_io(&err, &candidate)),
            };
            if !is_symlink {
                resolved = candidate;
                continue;
            }
            expansions += 1;
            if expansions > MAX_SYMLINK_EXPANSIONS {
                return Err(JailError::SymlinkLoop { path: candidate });
            }
            let target = match self.dir.read_link_contents(&candidate) {
                Ok(target) => target,
                // Replaced by a non-link since the lstat: look at it again.
                Err(err) if err.kind() == io::ErrorKind::InvalidInput => {
                    pending.push(Step::Name(name));
                    continue;
                }
                Err(err) => return Err(map_io(&err, &candidate)),
            };
            if target.is_absolute() {
                let inside = self
                    .relative_of_absolute(&target)
                    .ok_or(JailError::PathOutsideAllowedRoot)?;
                resolved = PathBuf::new();
                push_steps(&mut pending, &inside)?;
            } else {
                push_steps(&mut pending, &target)?;
            }
        }
        Ok(resolved)
    }

    /// Opens a file for reading; the handle stays valid whatever happens to the name later.
    ///
    /// # Errors
    /// [`JailError::IsADirectory`] for a directory, else the mapped I/O error.
    pub fn open_read(&self, path: &JailedPath) -> Result<std::fs::File, JailError> {
        let file = self
            .dir
            .open(path.target())
            .map_err(|err| map_io(&err, &path.relative))?;
        // Ask the open handle, not the name, so a swap after the open cannot mislead.
        let meta = file
            .metadata()
            .map_err(|err| map_io(&err, &path.relative))?;
        if meta.is_dir() {
            return Err(JailError::IsADirectory {
                path: path.relative.clone(),
            });
        }
        Ok(file.into_std())
    }

    /// Metadata, following a final symlink (only to a target inside the root).
    ///
    /// # Errors
    /// The mapped I/O error.
    pub fn metadata(&self, path: &JailedPath) -> Result<Metadata, JailError> {
        self.dir
            .metadata(path.target())
            .map_err(|err| map_io(&err, &path.relative))
    }

    /// Metadata of the entry itself, not following a final symlink.
    ///
    /// # Errors
    /// The mapped I/O error.
    pub fn symlink_metadata(&self, path: &JailedPath) -> Result<Metadata, JailError> {
        self.dir
            .symlink_metadata(path.target())
            .map_err(|err| map_io(&err, &path.relative))
    }

    /// Lists a directory; map per-entry errors with [`JailError::from_io`].
    ///
    /// # Errors
    /// [`JailError::NotADirectory`] for a file, else the mapped I/O error.
    pub fn read_dir(&self, path: &JailedPath) -> Result<ReadDir, JailError> {
        self.dir
            .read_dir(path.target())
            .map_err(|err| map_io(&err, &path.relative))
    }

    /// Creates a directory and any missing parents (`mkdir -p`).
    ///
    /// # Errors
    /// The mapped I/O error.
    pub fn create_dir_all(&self, path: &JailedPath) -> Result<(), JailError> {
        if path.is_root() {
            return Ok(());
        }
        self.dir
            .create_dir_all(&path.relative)
            .map_err(|err| map_io(&err, &path.relative))
    }

    /// Removes a file or a symlink (the link itself).
    ///
    /// # Errors
    /// [`JailError::RootOperation`] for the root, else the mapped I/O error.
    pub fn remove_file(&self, path: &JailedPath) -> Result<(), JailError> {
        let relative = not_root(path)?;
        self.dir
            .remove_file(relative)
            .map_err(|err| map_io(&err, relative))
    }

    /// Removes an empty directory.
    ///
    /// # Errors
    /// [`JailError::PathNotEmpty`] when it has entries, [`JailError::RootOperation`] for the
    /// root, else the mapped I/O error.
    pub fn remove_dir(&self, path: &JailedPath) -> Result<(), JailError> {
        let relative = not_root(path)?;
        self.dir
            .remove_dir(relative)
            .map_err(|err| map_io(&err, relative))
    }

    /// Removes a directory and everything in it; symlinks inside are removed, not followed.
    ///
    /// # Errors
    /// [`JailError::RootOperation`] for the root, else the mapped I/O error.
    pub fn remove_dir_all(&self, path: &JailedPath) -> Result<(), JailError> {
        let relative = not_root(path)?;
        self.dir
            .remove_dir_all(relative)
            .map_err(|err| map_io(&err, relative))
    }

    /// Renames within the jail, replacing a file at `to` as `rename(2)` does.
    ///
    /// # Errors
    /// [`JailError::RootOperation`] if either side is the root, else the mapped I/O error
    /// (naming `to` when the destination is the problem).
    pub fn rename(&self, from: &JailedPath, to: &JailedPath) -> Result<(), JailError> {
        let source = not_root(from)?;
        let destination = not_root(to)?;
        self.dir
            .rename(source, &self.dir, destination)
            .map_err(|err| match err.kind() {
                io::ErrorKind::AlreadyExists | io::ErrorKind::DirectoryNotEmpty => {
                    map_io(&err, destination)
                }
                _ => map_io(&err, source),
            })
    }

    /// Replaces `path` with `contents` atomically: a randomly named temporary file in the same
    /// directory is written, synced and renamed over the target, then the directory is synced.
    /// Readers see the old or the new content, never a mix; a symlink found at the target at
    /// rename time is replaced, never written through.
    ///
    /// # Errors
    /// [`JailError::PathNotFound`] when the parent is missing and `create_parents` is false,
    /// [`JailError::IsADirectory`] for a directory, [`JailError::PermissionDenied`] for a
    /// read-only file, [`JailError::PathOutsideAllowedRoot`] if a parent became a way out, else
    /// the mapped I/O error. No temporary file is left behind on failure.
    pub fn write_atomic(
        &self,
        path: &JailedPath,
        contents: &[u8],
        create_parents: bool,
    ) -> Result<(), JailError> {
        let relative = &path.relative;
        if path.is_root() {
            return Err(JailError::IsADirectory {
                path: relative.clone(),
            });
        }
        let parent = relative.parent().unwrap_or_else(|| Path::new(""));
        let map = |err: io::Error| map_io(&err, relative);
        if create_parents && !parent.as_os_str().is_empty() {
            self.dir.create_dir_all(parent).map_err(map)?;
        }
        let permissions = match self.dir.symlink_metadata(relative) {
            Ok(meta) if meta.is_dir() => {
                return Err(JailError::IsADirectory {
                    path: relative.clone(),
                });
            }
            // Replacing by rename would ignore the read-only bit that a plain write honours.
            Ok(meta) if meta.is_file() && meta.permissions().readonly() => {
                return Err(JailError::PermissionDenied {
                    path: relative.clone(),
                });
            }
            Ok(meta) if meta.is_file() => Some(meta.permissions()),
            Ok(_) => None,
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(map(err)),
        };
        let temporary = parent.join(format!(".jail-{}.tmp", Uuid::new_v4().simple()));
        let mut options = OpenOptions::new();
        // create_new never follows a symlink planted at the temporary name.
        options.write(true).create_new(true);
        let file = self.dir.open_with(&temporary, &options).map_err(map)?;
        let written = (|| {
            let mut file = file;
            file.write_all(contents)?;
            if let Some(permissions) = permissions {
                file.set_permissions(permissions)?;
            }
            file.sync_all()?;
            drop(file);
            self.dir.rename(&temporary, &self.dir, relative)
        })();
        if let Err(err) = written {
            // Best effort: the write already failed and that is the error worth reporting.
            let _ = self.dir.remove_file(&temporary);
            return Err(map(err));
        }
        self.sync_dir(parent);
        Ok(())
    }

    /// Makes the rename durable. Not every platform can open or sync a directory (Windows
    /// cannot), and the data is already in place, so failures are ignored.
    fn sync_dir(&self, relative: &Path) {
        let target = if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative
        };
        if let Ok(dir) = self.dir.open_dir(target) {
            let _ = dir.into_std_file().sync_all();
        }
    }
}

fn not_root(path: &JailedPath) -> Result<&Path, JailError> {
    if path.is_root() {
        Err(JailError::RootOperation)
    } else {
        Ok(&path.relative)
    }
}

/// Pushes the components of `path` so that popping yields them in order.
fn push_steps(pending: &mut Vec<Step>, path: &Path) -> Result<(), JailError> {
    let mut steps = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => steps.push(Step::Parent),
            Component::Normal(name) => steps.push(Step::Name(name.to_os_string())),
            // A relative path naming a root or a drive (`C:foo`) is somewhere else.
            Component::RootDir | Component::Prefix(_) => {
                return Err(JailError::PathOutsideAllowedRoot);
            }
        }
    }
    pending.extend(steps.into_iter().rev());
    Ok(())
}

/// `expanduser` for `~` and `~/...`; `~user` forms stay literal names inside the root.
fn expand_home(wire_path: &str, home: Option<&Path>) -> PathBuf {
    let rest = wire_path.strip_prefix('~');
    let is_home =
        rest.is_some_and(|rest| rest.is_empty() || rest.starts_with(std::path::is_separator));
    match (rest, home) {
        (Some(rest), Some(home)) if is_home => {
            home.join(rest.trim_start_matches(std::path::is_separator))
        }
        _ => PathBuf::from(wire_path),
    }
}

fn check_chars(wire_path: &str) -> Result<(), JailError> {
    // An empty path is almost certainly a missing field; reading it as the root would let a
    // defaulted FILE_DELETE remove the whole tree.
    if wire_path.is_empty() || wire_path.contains('\0') {
        return Err(JailError::PathInvalidChars);
    }
    if wire_path.chars().count() > PATH_MAX_CHARS {
        return Err(JailError::PathTooLong);
    }
    #[cfg(windows)]
    check_windows(wire_path)?;
    Ok(())
}

/// Windows naming rules of section 8, step 3. Compiled in tests everywhere so they run on CI.
#[cfg(any(windows, test))]
fn check_windows(wire_path: &str) -> Result<(), JailError> {
    const RESERVED: [&str; 4] = ["con", "prn", "aux", "nul"];
    let unprefixed = wire_path.strip_prefix(r"\\?\").unwrap_or(wire_path);
    let bytes = unprefixed.as_bytes();
    let has_drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    let after_drive = if has_drive {
        &unprefixed[2..]
    } else {
        unprefixed
    };
    if after_drive
        .chars()
        .any(|c| c == ':' || c < ' ' || matches!(c, '<' | '>' | '"' | '|' | '?' | '*'))
    {
        return Err(JailError::PathInvalidChars);
    }
    for component in after_drive.split(['/', '\\']) {
        let stem = component
            .split('.')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let numbered = ["com", "lpt"].iter().any(|prefix| {
            stem.strip_prefix(prefix)
                .is_some_and(|n| n.len() == 1 && matches!(n.as_bytes()[0], b'1'..=b'9'))
        });
        if numbered || RESERVED.contains(&stem.as_str()) {
            return Err(JailError::PathReservedName);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::io::Read;

    /// A scratch tree: `base/root` is the jail, `base/root2` a sibling sharing its prefix, and
    /// `base/outside` holds a secret nothing may read through the jail.
    struct Sandbox {
        base: PathBuf,
        root: PathBuf,
        // Only the link tests, which are Unix-only, point into it.
        #[cfg_attr(not(unix), allow(dead_code))]
        outside: PathBuf,
    }

    const SECRET: &str = "SECRET-MARKER-outside-the-root";

    impl Sandbox {
        fn new() -> Self {
            let base = std::env::temp_dir().join(format!("jail-test-{}", Uuid::new_v4()));
            let root = base.join("root");
            let outside = base.join("outside");
            fs::create_dir_all(root.join("a/b")).unwrap();
            fs::create_dir_all(base.join("root2")).unwrap();
            fs::create_dir_all(&outside).unwrap();
            fs::write(root.join("a/b/c.txt"), "nested").unwrap();
            fs::write(root.join("top.txt"), "top").unwrap();
            fs::write(base.join("root2/file.txt"), "sibling").unwrap();
            fs::write(outside.join("secret.txt"), SECRET).unwrap();
            Self {
                base,
                root,
                outside,
            }
        }

        fn jail(&self) -> Jail {
            Jail::open(&self.root).unwrap()
        }
    }

    impl Drop for Sandbox {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.base);
        }
    }

    fn read(jail: &Jail, path: &JailedPath) -> Result<String, JailError> {
        let mut text = String::new();
        jail.open_read(path)?.read_to_string(&mut text).unwrap();
        Ok(text)
    }

    fn code_of<T: std::fmt::Debug>(result: Result<T, JailError>) -> &'static str {
        result.unwrap_err().code()
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[cfg(unix)]
    #[test]
    fn escape_attempts_are_refused_with_exact_codes() {
        use std::os::unix::fs::symlink;
        let sb = Sandbox::new();
        symlink(sb.outside.join("secret.txt"), sb.root.join("abs_out")).unwrap();
        symlink(&sb.outside, sb.root.join("abs_out_dir")).unwrap();
        symlink("../outside/secret.txt", sb.root.join("rel_out")).unwrap();
        symlink("../../../outside", sb.root.join("a/b/rel_out_dir")).unwrap();
        symlink("loop_b", sb.root.join("loop_a")).unwrap();
        symlink("loop_a", sb.root.join("loop_b")).unwrap();
        symlink(sb.outside.join("not-there"), sb.root.join("dangling_out")).unwrap();
        symlink("../outside/not-there", sb.root.join("dangling_rel_out")).unwrap();
        let jail = sb.jail();
        let outside_abs = sb.outside.join("secret.txt").display().to_string();
        let sibling = sb.base.join("root2/file.txt").display().to_string();
        let sibling_dir = sb.base.join("root2").display().to_string();
        let climbing_abs = format!("{}/../outside/secret.txt", sb.root.display());
        let long = "x/".repeat(PATH_MAX_CHARS);
        let cases: Vec<(&str, &str)> = vec![
            ("..", "PATH_OUTSIDE_ALLOWED_ROOT"),
            ("../..", "PATH_OUTSIDE_ALLOWED_ROOT"),
            ("a/../../x", "PATH_OUTSIDE_ALLOWED_ROOT"),
            (
                "a/b/../../../outside/secret.txt",
                "PATH_OUTSIDE_ALLOWED_ROOT",
            ),
            ("missing/../../x", "PATH_OUTSIDE_ALLOWED_ROOT"),
            (&outside_abs, "PATH_OUTSIDE_ALLOWED_ROOT"),
            (&climbing_abs, "PATH_OUTSIDE_ALLOWED_ROOT"),
            (&sibling, "PATH_OUTSIDE_ALLOWED_ROOT"),
            (&sibling_dir, "PATH_OUTSIDE_ALLOWED_ROOT"),
            ("/", "PATH_OUTSIDE_ALLOWED_ROOT"),
            ("/etc/passwd", "PATH_OUTSIDE_ALLOWED_ROOT"),
            ("abs_out", "PATH_OUTSIDE_ALLOWED_ROOT"),
            ("abs_out_dir/secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
            ("abs_out_dir/new/file.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
            ("rel_out", "PATH_OUTSIDE_ALLOWED_ROOT"),
            ("a/b/rel_out_dir/secret.txt", "PATH_OUTSIDE_ALLOWED_ROOT"),
            ("dangling_out", "PATH_OUTSIDE_ALLOWED_ROOT"),
            ("dangling_rel_out", "PATH_OUTSIDE_ALLOWED_ROOT"),
            ("loop_a", "INTERNAL_ERROR"),
            ("a/\0b", "PATH_INVALID_CHARS"),
            ("", "PATH_INVALID_CHARS"),
            (&long, "PATH_INVALID_CHARS"),
        ];
        for (wire, expected) in &cases {
            let shown = wire.chars().take(80).collect::<String>();
            assert_eq!(code_of(jail.resolve(wire)), *expected, "resolve({shown:?})");
        }
        assert!(matches!(
            jail.resolve("loop_a"),
            Err(JailError::SymlinkLoop { .. })
        ));
        // A write through a dangling link out must not create the file outside.
        for wire in ["dangling_out", "dangling_rel_out"] {
            let err = jail
                .resolve(wire)
                .and_then(|p| jail.write_atomic(&p, b"x", true))
                .unwrap_err();
            assert_eq!(err.code(), "PATH_OUTSIDE_ALLOWED_ROOT");
        }
        assert!(!sb.outside.join("not-there").exists());
        assert_eq!(entries(&sb.outside), ["secret.txt"]);
    }

    #[cfg(unix)]
    #[test]
    fn the_handle_refuses_escapes_even_for_names_resolve_never_checked() {
        use std::os::unix::fs::symlink;
        let sb = Sandbox::new();
        let jail = sb.jail();
        // Made before the links exist, as if a swap happened right after resolution.
        let link = jail.resolve("later_link").unwrap();
        let through_dir = jail.resolve("later_dir/secret.txt").unwrap();
        symlink(sb.outside.join("secret.txt"), sb.root.join("later_link")).unwrap();
        symlink(&sb.outside, sb.root.join("later_dir")).unwrap();
        assert_eq!(code_of(jail.open_read(&link)), "PATH_OUTSIDE_ALLOWED_ROOT");
        assert_eq!(code_of(jail.metadata(&link)), "PATH_OUTSIDE_ALLOWED_ROOT");
        assert_eq!(
            code_of(jail.open_read(&through_dir)),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
        assert_eq!(
            code_of(jail.remove_file(&through_dir)),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
        assert!(jail.symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(
            fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
            SECRET
        );
        // cap-std's own escape error is the one recognised as an escape.
        let raw = jail.dir.open("../outside/secret.txt").unwrap_err();
        assert_eq!(
            map_io(&raw, Path::new("x")),
            JailError::PathOutsideAllowedRoot
        );
    }

    #[cfg(unix)]
    #[test]
    fn inside_paths_resolve_to_canonical_names() {
        use std::os::unix::fs::symlink;
        let sb = Sandbox::new();
        symlink("a/b/c.txt", sb.root.join("inside_link")).unwrap();
        symlink(sb.root.join("a/b"), sb.root.join("abs_inside_dir")).unwrap();
        symlink("../top.txt", sb.root.join("a/up_link")).unwrap();
        let jail = sb.jail();
        let root_abs = jail.root().to_path_buf();
        let nested_abs = root_abs.join("a/b/c.txt").display().to_string();
        let given_abs = sb.root.join("a/b/c.txt").display().to_string();
        let cases: Vec<(&str, &str)> = vec![
            ("a/b/c.txt", "a/b/c.txt"),
            ("./a/./b/../b/c.txt", "a/b/c.txt"),
            (&nested_abs, "a/b/c.txt"),
            (&given_abs, "a/b/c.txt"),
            ("inside_link", "a/b/c.txt"),
            ("abs_inside_dir/c.txt", "a/b/c.txt"),
            ("a/up_link", "top.txt"),
            ("top.txt", "top.txt"),
            ("missing/new.txt", "missing/new.txt"),
            ("missing/../top.txt", "top.txt"),
            (".", ""),
        ];
        for (wire, expected) in &cases {
            let path = jail.resolve(wire).unwrap();
            assert_eq!(path.relative(), Path::new(expected), "resolve({wire:?})");
            let expected_abs = if expected.is_empty() {
                root_abs.clone()
            } else {
                root_abs.join(expected)
            };
            assert_eq!(path.absolute(), expected_abs, "resolve({wire:?})");
        }
        assert!(jail.resolve(".").unwrap().is_root());
        assert_eq!(
            read(&jail, &jail.resolve("inside_link").unwrap()).unwrap(),
            "nested"
        );
        let root_path = jail.resolve(&root_abs.display().to_string()).unwrap();
        assert!(root_path.is_root());
        // Not following the last component names the link itself.
        let link = jail.resolve_no_follow("inside_link").unwrap();
        assert_eq!(link.relative(), Path::new("inside_link"));
        assert!(jail.symlink_metadata(&link).unwrap().is_symlink());
        assert!(jail.metadata(&link).unwrap().is_file());
        let home = jail
            .resolve_with("~/root/top.txt", Some(&sb.base), true)
            .unwrap();
        assert_eq!(home.relative(), Path::new("top.txt"));
        assert_eq!(
            code_of(jail.resolve_with("~/outside/secret.txt", Some(&sb.base), true)),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
        let literal = jail.resolve_with("~alice/x", Some(&sb.base), true).unwrap();
        assert_eq!(literal.relative(), Path::new("~alice/x"));
    }

    #[test]
    fn atomic_write_replaces_content_and_leaves_no_temporary() {
        let sb = Sandbox::new();
        let jail = sb.jail();
        let target = jail.resolve("a/b/c.txt").unwrap();
        jail.write_atomic(&target, b"replaced", false).unwrap();
        assert_eq!(read(&jail, &target).unwrap(), "replaced");
        jail.write_atomic(&target, b"", false).unwrap();
        assert_eq!(read(&jail, &target).unwrap(), "");
        let fresh = jail.resolve("fresh.txt").unwrap();
        jail.write_atomic(&fresh, b"new", false).unwrap();
        assert_eq!(
            fs::read_to_string(sb.root.join("fresh.txt")).unwrap(),
            "new"
        );
        assert_eq!(entries(&sb.root.join("a/b")), ["c.txt"]);
        assert_eq!(entries(&sb.root), ["a", "fresh.txt", "top.txt"]);
        let dir = jail.resolve("a").unwrap();
        assert_eq!(
            code_of(jail.write_atomic(&dir, b"x", false)),
            "INTERNAL_ERROR"
        );
        assert_eq!(
            code_of(jail.write_atomic(&jail.resolve(".").unwrap(), b"x", false)),
            "INTERNAL_ERROR"
        );
        assert_eq!(entries(&sb.root.join("a")), ["b"]);
    }

    #[cfg(unix)]
    #[test]
    fn atomic_write_keeps_mode_refuses_read_only_and_updates_through_inside_links() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let sb = Sandbox::new();
        symlink("a/b/c.txt", sb.root.join("inside_link")).unwrap();
        fs::set_permissions(sb.root.join("top.txt"), fs::Permissions::from_mode(0o640)).unwrap();
        let jail = sb.jail();
        let top = jail.resolve("top.txt").unwrap();
        jail.write_atomic(&top, b"t2", false).unwrap();
        let mode = fs::metadata(sb.root.join("top.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
        let via_link = jail.resolve("inside_link").unwrap();
        jail.write_atomic(&via_link, b"via link", false).unwrap();
        assert!(
            fs::symlink_metadata(sb.root.join("inside_link"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(
            fs::read_to_string(sb.root.join("a/b/c.txt")).unwrap(),
            "via link"
        );
        fs::set_permissions(sb.root.join("top.txt"), fs::Permissions::from_mode(0o444)).unwrap();
        assert!(matches!(
            jail.write_atomic(&top, b"nope", false),
            Err(JailError::PermissionDenied { .. })
        ));
        assert_eq!(fs::read_to_string(sb.root.join("top.txt")).unwrap(), "t2");
    }

    #[cfg(unix)]
    #[test]
    fn create_parents_creates_inside_and_refuses_a_parent_link_out() {
        use std::os::unix::fs::symlink;
        let sb = Sandbox::new();
        symlink(&sb.outside, sb.root.join("out_dir")).unwrap();
        let jail = sb.jail();
        let deep = jail.resolve("x/y/z/file.txt").unwrap();
        assert_eq!(
            code_of(jail.write_atomic(&deep, b"d", false)),
            "PATH_NOT_FOUND"
        );
        assert!(!sb.root.join("x").exists());
        jail.write_atomic(&deep, b"deep", true).unwrap();
        assert_eq!(
            fs::read_to_string(sb.root.join("x/y/z/file.txt")).unwrap(),
            "deep"
        );
        assert_eq!(entries(&sb.root.join("x/y/z")), ["file.txt"]);
        // Refused at resolution...
        assert_eq!(
            code_of(jail.resolve("out_dir/new/file.txt")),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
        // ...and, when the parent turns into a link out after resolution, by the handle.
        let late = jail.resolve("late/new/file.txt").unwrap();
        symlink(&sb.outside, sb.root.join("late")).unwrap();
        assert_eq!(
            code_of(jail.write_atomic(&late, b"x", true)),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
        let flat = jail.resolve("late2/file.txt").unwrap();
        symlink(&sb.outside, sb.root.join("late2")).unwrap();
        assert_eq!(
            code_of(jail.write_atomic(&flat, b"x", false)),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
        assert_eq!(entries(&sb.outside), ["secret.txt"]);
        // A dangling link out planted at the target after resolution is replaced, not followed.
        let target = jail.resolve("planted").unwrap();
        symlink(sb.outside.join("planted-out"), sb.root.join("planted")).unwrap();
        jail.write_atomic(&target, b"inside", false).unwrap();
        assert!(!sb.outside.join("planted-out").exists());
        assert_eq!(
            fs::read_to_string(sb.root.join("planted")).unwrap(),
            "inside"
        );
        assert!(
            fs::symlink_metadata(sb.root.join("planted"))
                .unwrap()
                .is_file()
        );
    }

    #[test]
    fn operations_map_errors_precisely() {
        let sb = Sandbox::new();
        let jail = sb.jail();
        let missing = jail.resolve("nope.txt").unwrap();
        assert_eq!(code_of(jail.open_read(&missing)), "PATH_NOT_FOUND");
        assert_eq!(code_of(jail.metadata(&missing)), "PATH_NOT_FOUND");
        assert_eq!(code_of(jail.remove_file(&missing)), "PATH_NOT_FOUND");
        let dir = jail.resolve("a").unwrap();
        assert!(matches!(
            jail.open_read(&dir),
            Err(JailError::IsADirectory { .. })
        ));
        assert_eq!(code_of(jail.remove_dir(&dir)), "PATH_NOT_EMPTY");
        let file = jail.resolve("top.txt").unwrap();
        assert!(matches!(
            jail.read_dir(&file),
            Err(JailError::NotADirectory { .. })
        ));
        let names: Vec<OsString> = jail
            .read_dir(&jail.resolve("a/b").unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [OsString::from("c.txt")]);
        let child = jail.child(&dir, OsStr::new("b")).unwrap();
        assert_eq!(child.relative(), Path::new("a/b"));
        assert!(jail.metadata(&child).unwrap().is_dir());
        for bad in ["..", ".", "b/c.txt", "", "/etc"] {
            assert_eq!(
                code_of(jail.child(&dir, OsStr::new(bad))),
                "PATH_INVALID_CHARS"
            );
        }
        let root = jail.resolve(".").unwrap();
        assert_eq!(jail.remove_dir_all(&root), Err(JailError::RootOperation));
        assert_eq!(jail.remove_dir(&root), Err(JailError::RootOperation));
        assert_eq!(jail.rename(&root, &file), Err(JailError::RootOperation));
        assert!(jail.metadata(&root).unwrap().is_dir());
        // Rename within the jail and remove what is left.
        let moved = jail.resolve("moved/top.txt").unwrap();
        assert_eq!(code_of(jail.rename(&file, &moved)), "PATH_NOT_FOUND");
        jail.create_dir_all(&jail.resolve("moved").unwrap())
            .unwrap();
        jail.rename(&file, &moved).unwrap();
        assert_eq!(read(&jail, &moved).unwrap(), "top");
        let target_dir = jail.resolve("moved").unwrap();
        assert_eq!(code_of(jail.rename(&dir, &target_dir)), "PATH_NOT_EMPTY");
        jail.remove_file(&moved).unwrap();
        jail.remove_dir(&target_dir).unwrap();
        jail.remove_dir_all(&dir).unwrap();
        assert_eq!(entries(&sb.root), Vec::<String>::new());
        // Genuine OS errors versus cap-std's escape report.
        let p = Path::new("p");
        let escape = io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a path led outside of the filesystem",
        );
        assert_eq!(map_io(&escape, p), JailError::PathOutsideAllowedRoot);
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        assert_eq!(map_io(&denied, p), JailError::PathOutsideAllowedRoot);
        #[cfg(unix)]
        assert_eq!(
            map_io(&io::Error::from_raw_os_error(13), p).code(),
            "INTERNAL_ERROR"
        );
        #[cfg(unix)]
        assert!(matches!(
            map_io(&io::Error::from_raw_os_error(13), p),
            JailError::PermissionDenied { .. }
        ));
        let exists = io::Error::from(io::ErrorKind::AlreadyExists);
        assert_eq!(map_io(&exists, p).code(), "PATH_EXISTS");
        let other = io::Error::from(io::ErrorKind::StorageFull);
        assert_eq!(
            map_io(&other, p),
            JailError::Io {
                path: p.to_path_buf(),
                kind: io::ErrorKind::StorageFull
            }
        );
    }

    #[test]
    fn missing_or_file_root_is_unavailable() {
        let sb = Sandbox::new();
        assert_eq!(
            code_of(Jail::open(&sb.base.join("absent"))),
            "PATH_OUTSIDE_ALLOWED_ROOT"
        );
        assert!(matches!(
            Jail::open(&sb.root.join("top.txt")),
            Err(JailError::RootUnavailable { .. })
        ));
    }

    #[test]
    fn every_variant_has_its_wire_code_and_a_content_free_message() {
        let p = || PathBuf::from("dir/file.txt");
        let table = [
            (JailError::PathInvalidChars, "PATH_INVALID_CHARS"),
            (JailError::PathTooLong, "PATH_INVALID_CHARS"),
            (JailError::PathReservedName, "PATH_RESERVED_NAME"),
            (
                JailError::PathOutsideAllowedRoot,
                "PATH_OUTSIDE_ALLOWED_ROOT",
            ),
            (
                JailError::RootUnavailable {
                    kind: io::ErrorKind::NotFound,
                },
                "PATH_OUTSIDE_ALLOWED_ROOT",
            ),
            (JailError::PathNotFound { path: p() }, "PATH_NOT_FOUND"),
            (JailError::PathExists { path: p() }, "PATH_EXISTS"),
            (JailError::PathNotEmpty { path: p() }, "PATH_NOT_EMPTY"),
            (JailError::NotADirectory { path: p() }, "INTERNAL_ERROR"),
            (JailError::IsADirectory { path: p() }, "INTERNAL_ERROR"),
            (JailError::PermissionDenied { path: p() }, "INTERNAL_ERROR"),
            (JailError::SymlinkLoop { path: p() }, "INTERNAL_ERROR"),
            (JailError::RootOperation, "INTERNAL_ERROR"),
            (
                JailError::Io {
                    path: p(),
                    kind: io::ErrorKind::StorageFull,
                },
                "INTERNAL_ERROR",
            ),
        ];
        for (err, code) in &table {
            assert_eq!(err.code(), *code, "{err:?}");
            let text = err.to_string();
            assert!(
                !text.contains('/') || text.contains("dir/file.txt"),
                "{text}"
            );
        }
        let root = JailError::PathNotFound {
            path: PathBuf::new(),
        };
        assert_eq!(root.to_string(), "path not found: .");
        assert_eq!(
            JailError::IsADirectory { path: p() }.to_string(),
            "is a directory: dir/file.txt"
        );
    }

    #[test]
    fn windows_naming_rules() {
        let cases = [
            (r"C:\work\con", Err(JailError::PathReservedName)),
            (r"C:\work\CON.txt", Err(JailError::PathReservedName)),
            ("dir/Lpt9.log", Err(JailError::PathReservedName)),
            ("com1", Err(JailError::PathReservedName)),
            (r"\\?\C:\work\aux", Err(JailError::PathReservedName)),
            (r"C:\work\file.txt:stream", Err(JailError::PathInvalidChars)),
            (r"\\?\C:\work\a:b", Err(JailError::PathInvalidChars)),
            ("a<b", Err(JailError::PathInvalidChars)),
            ("a\u{1f}b", Err(JailError::PathInvalidChars)),
            ("what?", Err(JailError::PathInvalidChars)),
            (r"C:\work\com0.txt", Ok(())),
            (r"C:\work\console.txt", Ok(())),
            (r"C:\work\com10", Ok(())),
            (r"C:\work\file.txt", Ok(())),
        ];
        for (wire, expected) in cases {
            assert_eq!(check_windows(wire), expected, "{wire:?}");
        }
    }

    /// One thread keeps swapping `target` between a file inside the root and a symlink to the
    /// secret outside; another reads it through the jail. A naive `std::fs` read of the same
    /// name runs alongside as a control, proving the race really is exercised.
    #[cfg(unix)]
    #[test]
    fn swapping_symlinks_never_leak_outside_content() {
        use std::os::unix::fs::symlink;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::time::{Duration, Instant};

        let sb = Sandbox::new();
        let jail = sb.jail();
        fs::write(sb.root.join("target"), "inside").unwrap();
        let pre_resolved = jail.resolve("target").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let stop = Arc::clone(&stop);
            let root = sb.root.clone();
            let secret = sb.outside.join("secret.txt");
            std::thread::spawn(move || {
                let mut swaps = 0_u64;
                while !stop.load(Ordering::Relaxed) {
                    fs::write(root.join("staging_file"), "inside").unwrap();
                    fs::rename(root.join("staging_file"), root.join("target")).unwrap();
                    symlink(&secret, root.join("staging_link")).unwrap();
                    fs::rename(root.join("staging_link"), root.join("target")).unwrap();
                    swaps += 1;
                }
                swaps
            })
        };
        let (mut leaks, mut inside_reads, mut refusals, mut naive_leaks) = (0, 0, 0, 0);
        let mut unexpected = Vec::new();
        let started = Instant::now();
        let mut iterations = 0_u32;
        while iterations < 3000
            || ((naive_leaks == 0 || refusals == 0) && started.elapsed() < Duration::from_secs(20))
        {
            iterations += 1;
            let fresh = jail.resolve("target").and_then(|p| read(&jail, &p));
            for outcome in [fresh, read(&jail, &pre_resolved)] {
                match outcome {
                    Ok(text) if text.contains(SECRET) => leaks += 1,
                    Ok(_) => inside_reads += 1,
                    Err(JailError::PathOutsideAllowedRoot) => refusals += 1,
                    Err(err) => unexpected.push(err),
                }
            }
            if fs::read_to_string(sb.root.join("target")).is_ok_and(|t| t.contains(SECRET)) {
                naive_leaks += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        assert_eq!(leaks, 0, "read the outside secret through the jail");
        assert!(unexpected.is_empty(), "unexpected errors: {unexpected:?}");
        assert!(
            swaps > 0 && inside_reads > 0 && refusals > 0,
            "race not exercised"
        );
        assert!(
            naive_leaks > 0,
            "control never saw the secret: race not exercised"
        );
    }
}
