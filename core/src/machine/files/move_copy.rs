//! FILE_MOVE: a rename that never loses an overwritten destination, falling back to copying
//! through the jail and deleting the source when the two sides are on different devices.

use std::io::{self, Read};
use std::path::Path;

use uuid::Uuid;

use super::{
    FileError, FileLimits, MoveRequest, MoveResult, is_missing, not_found, not_regular,
    sorted_names,
};
use crate::machine::jail::{Jail, JailError, JailedPath};

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
pub(super) fn copy_then_delete(
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

pub(super) fn is_cross_device(err: &JailError) -> bool {
    matches!(
        err,
        JailError::Io {
            kind: io::ErrorKind::CrossesDevices,
            ..
        }
    )
}
