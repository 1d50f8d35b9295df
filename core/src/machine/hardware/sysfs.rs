//! Bounded, contained reads of a sysfs tree and of device nodes under a `/dev` root.
//!
//! sysfs is a forest of symlinks (`/sys/class/tty/ttyUSB0 -> ../../devices/...`), so reads
//! must follow links; every path is canonicalised and refused unless it stays under the
//! canonical sysfs root, so a planted link cannot make the listers read elsewhere.

use std::{
    ffi::OsString,
    fs::{self, File, FileType},
    io::Read,
    path::{Path, PathBuf},
};

use super::{MAX_SCANNED, clean};

/// sysfs attributes are at most one page; anything longer is not an attribute we want.
const MAX_ATTRIBUTE_BYTES: u64 = 4096;

/// Device nodes must be character devices. A unit test cannot create one without
/// privileges, so only local-core's own tests also accept regular files in the fake `/dev`.
const ACCEPT_REGULAR_FILES: bool = cfg!(test);

/// A canonical sysfs root that resolved paths must stay under.
#[derive(Debug)]
pub(super) struct SysRoot {
    root: PathBuf,
}

impl SysRoot {
    /// `None` when the root does not exist (no sysfs: nothing to list).
    pub(super) fn new(root: &Path) -> Option<Self> {
        let root = fs::canonicalize(root).ok()?;
        root.is_dir().then_some(Self { root })
    }

    /// The canonical form of `path` when it exists and stays under the root.
    pub(super) fn resolve(&self, path: &Path) -> Option<PathBuf> {
        let resolved = fs::canonicalize(path).ok()?;
        self.contains(&resolved).then_some(resolved)
    }

    /// Whether a canonical path lies strictly below the root.
    pub(super) fn contains(&self, canonical: &Path) -> bool {
        canonical != self.root && canonical.starts_with(&self.root)
    }

    /// One attribute of `dir`, cleaned, when it is a regular file under the root.
    pub(super) fn attribute(&self, dir: &Path, name: &str) -> Option<String> {
        let path = self.resolve(&dir.join(name))?;
        if !fs::metadata(&path).ok()?.is_file() {
            return None;
        }
        let mut bytes = Vec::new();
        File::open(&path)
            .ok()?
            .take(MAX_ATTRIBUTE_BYTES)
            .read_to_end(&mut bytes)
            .ok()?;
        clean(&String::from_utf8_lossy(&bytes))
    }
}

/// The UTF-8 names in `dir`, at most [`MAX_SCANNED`] of them; unreadable → none.
pub(super) fn entry_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .take(MAX_SCANNED)
        .filter_map(Result::ok)
        .map(|entry| entry.file_name())
        .filter_map(|name: OsString| name.into_string().ok())
        .collect()
}

/// Whether `path` is a device node itself (a symlink is not followed, so it does not count).
pub(super) fn is_device_node(path: &Path) -> bool {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return false;
    };
    let file_type = meta.file_type();
    is_char_device(file_type) || (ACCEPT_REGULAR_FILES && file_type.is_file())
}

#[cfg(unix)]
fn is_char_device(file_type: FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    file_type.is_char_device()
}

#[cfg(not(unix))]
fn is_char_device(_file_type: FileType) -> bool {
    false
}

/// `name` is `prefix` followed by one to five ASCII digits.
pub(super) fn numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| (1..=5).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A device node path as text, when it is UTF-8 and short enough to report unabridged
/// (a truncated path would name a different file).
pub(super) fn node_text(path: &Path) -> Option<String> {
    let text = path.to_str()?;
    (text.chars().count() <= super::MAX_STRING_CHARS).then(|| text.to_owned())
}
