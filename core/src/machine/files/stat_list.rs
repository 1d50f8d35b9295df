//! FILE_STAT and FILE_LIST, and the metadata they report (times, mode, owner, MIME type).

use std::path::Path;
use std::time::SystemTime;

#[cfg(unix)]
use cap_std::fs::MetadataExt as _;

use super::{
    FileError, FileLimits, ListEntry, ListRequest, ListResult, StatInfo, StatRequest, StatResult,
    existing, glob::Glob, is_missing, sorted_names,
};
use crate::machine::jail::{Jail, JailError, JailedPath, Metadata};

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

pub(super) fn epoch_seconds(time: SystemTime) -> f64 {
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
