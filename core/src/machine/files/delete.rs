//! FILE_DELETE: removes a file, a link (never its target) or a directory.

use super::{DeleteRequest, DeleteResult, FileError, is_missing, not_found};
use crate::machine::jail::{Jail, JailError};

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
