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

use cap_std::fs::Dir;
pub use cap_std::fs::{DirEntry, Metadata, ReadDir};

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
    /// Directories [`Self::write_atomic`] already swept of stale temporary files.
    #[cfg(unix)]
    swept: std::sync::Mutex<std::collections::HashSet<PathBuf>>,
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
            #[cfg(unix)]
            swept: std::sync::Mutex::default(),
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
        #[cfg(unix)]
        self.sweep(parent);
        let (temporary, file) = self.create_temporary(parent).map_err(map)?;
        let written = (|| {
            let mut file = file;
            file.write_all(contents)?;
            if let Some(permissions) = permissions {
                file.set_permissions(permissions.into_std(&file)?)?;
            }
            file.sync_all()?;
            // On Unix the handle, and with it the lock that tells a sweep this file is live, is
            // held through the rename; elsewhere it is closed first, as renaming an open file
            // depends on share modes.
            let held = if cfg!(unix) {
                Some(file)
            } else {
                drop(file);
                None
            };
            let renamed = self.dir.rename(&temporary, &self.dir, relative);
            drop(held);
            renamed
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

mod temporary;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;
