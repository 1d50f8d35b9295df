//! Folder browsing for the connector's control mode: the virtual roots, strict opening of a
//! canonical directory, one bounded listing of its immediate real subdirectories, and the
//! fingerprint that tells a directory from one recreated under the same name
//! (shim-reference-behaviour.md section 5). No wire types: the connector maps these.
//!
//! Race-freedom: a directory is opened once as a `cap_std` [`Dir`] and its identity
//! (device, inode) compared with what `lstat` of the path said, so a path swapped for a link
//! between the check and the open is refused; children are listed through that handle with
//! their own type (never following a link), and each child's identity is taken from the
//! child opened through the parent handle.

use std::io;
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, MetadataExt};
use sha2::{Digest, Sha256};

use crate::audit_chain::python_json_string;

/// At most this many directory entries are scanned per listing (`MAX_SCANNED_ENTRIES`).
pub const MAX_SCANNED_ENTRIES: usize = 1000;
/// At most this many virtual roots.
pub const MAX_ROOTS: usize = 200;

/// Roots that are never offered even when mounted there.
const SPECIAL_ROOTS: &[&str] = if cfg!(target_os = "macos") {
    &["/System", "/private"]
} else {
    &["/dev", "/proc", "/sys", "/run"]
};

/// Why a directory cannot be browsed or attached.
#[derive(Debug, thiserror::Error)]
pub enum BrowseError {
    /// The path is itself a symbolic link (or a junction).
    #[error("The selected directory cannot be a symbolic link.")]
    Link,
    /// Missing, not a directory, not canonical, not readable, writable and searchable, or
    /// not the directory it was when it was listed.
    #[error("The selected directory is no longer available.")]
    Unavailable,
}

/// What identifies one directory object: its filesystem identity and, where the filesystem
/// records it, its birth time (which tells a recreated directory from the old one even when
/// the inode number is reused, as ext4 does after rmdir + mkdir).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// `st_dev`.
    pub device: u64,
    /// `st_ino`.
    pub inode: u64,
    /// Birth time in nanoseconds since the epoch (statx `btime`), when known.
    pub birth_ns: Option<i128>,
}

impl Identity {
    fn of(meta: &cap_std::fs::Metadata) -> Self {
        let birth_ns = meta.created().ok().and_then(|created| {
            let created = created.into_std();
            match created.duration_since(std::time::UNIX_EPOCH) {
                Ok(after) => i128::try_from(after.as_nanos()).ok(),
                Err(before) => i128::try_from(before.duration().as_nanos())
                    .ok()
                    .map(|n| -n),
            }
        });
        Self {
            device: meta.dev(),
            inode: meta.ino(),
            birth_ns,
        }
    }
}

/// A directory opened strictly: canonical path, handle and identity.
#[derive(Debug)]
pub struct OpenDir {
    /// The canonical absolute path.
    pub path: PathBuf,
    /// The open handle; listings go through it.
    pub dir: Dir,
    /// What the handle is.
    pub identity: Identity,
}

/// One listed subdirectory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    /// Its name (the display name).
    pub name: String,
    /// Its canonical absolute path.
    pub path: PathBuf,
    /// Its identity when listed, to notice a later swap.
    pub identity: Identity,
}

/// One listing: sorted subdirectories and whether the scan bound omitted entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// Real, accessible subdirectories sorted case-insensitively.
    pub children: Vec<Child>,
    /// The directory has more than [`MAX_SCANNED_ENTRIES`] entries.
    pub truncated: bool,
}

/// Opens `path` strictly: it must not be a link, must already be canonical (no link among
/// its ancestors either), must be a directory this user can read, write and search, and
/// the handle must be the object `lstat` saw.
///
/// # Errors
/// [`BrowseError::Link`] when `path` itself is a link; [`BrowseError::Unavailable`] otherwise.
pub fn open_strict(path: &Path) -> Result<OpenDir, BrowseError> {
    let seen = std::fs::symlink_metadata(path).map_err(|_| BrowseError::Unavailable)?;
    if seen.file_type().is_symlink() {
        return Err(BrowseError::Link);
    }
    if !seen.is_dir() {
        return Err(BrowseError::Unavailable);
    }
    let canonical = std::fs::canonicalize(path).map_err(|_| BrowseError::Unavailable)?;
    if canonical != path {
        return Err(BrowseError::Unavailable);
    }
    let dir = Dir::open_ambient_dir(&canonical, cap_std::ambient_authority())
        .map_err(|_| BrowseError::Unavailable)?;
    let meta = dir.dir_metadata().map_err(|_| BrowseError::Unavailable)?;
    {
        use std::os::unix::fs::MetadataExt as _;
        if !meta.is_dir() || meta.dev() != seen.dev() || meta.ino() != seen.ino() {
            return Err(BrowseError::Unavailable);
        }
    }
    if !accessible(&dir, ".") {
        return Err(BrowseError::Unavailable);
    }
    Ok(OpenDir {
        path: canonical,
        identity: Identity::of(&meta),
        dir,
    })
}

/// Canonicalises `path` (following links, as the reference's strict realpath does) and
/// opens the result strictly; a path that is itself a link is refused first.
///
/// # Errors
/// As [`open_strict`].
pub fn open_canonical(path: &Path) -> Result<OpenDir, BrowseError> {
    let seen = std::fs::symlink_metadata(path).map_err(|_| BrowseError::Unavailable)?;
    if seen.file_type().is_symlink() {
        return Err(BrowseError::Link);
    }
    let canonical = std::fs::canonicalize(path).map_err(|_| BrowseError::Unavailable)?;
    open_strict(&canonical)
}

/// Lists the immediate real subdirectories of `open`: at most [`MAX_SCANNED_ENTRIES`]
/// entries are looked at; files, links, names that are not clean Unicode and directories
/// this user cannot read, write and search are skipped.
///
/// # Errors
/// The directory could not be read.
pub fn list(open: &OpenDir) -> io::Result<Listing> {
    let mut children = Vec::new();
    let mut truncated = false;
    for (scanned, entry) in open.dir.entries()?.enumerate() {
        if scanned == MAX_SCANNED_ENTRIES {
            truncated = true;
            break;
        }
        let Ok(entry) = entry else { continue };
        // The entry's own type: a link to a directory is a link.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !kind.is_dir() {
            continue;
        }
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !clean_name(&name) || !accessible(&open.dir, &name) {
            continue;
        }
        let Ok(child) = open.dir.open_dir(&name) else {
            continue;
        };
        let Ok(meta) = child.dir_metadata() else {
            continue;
        };
        children.push(Child {
            path: open.path.join(&name),
            identity: Identity::of(&meta),
            name,
        });
    }
    children.sort_by(|a, b| {
        a.name
            .to_lowercase()
            .cmp(&b.name.to_lowercase())
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(Listing {
        children,
        truncated,
    })
}

/// The display name of a directory: its last component, or the whole path for `/`.
#[must_use]
pub fn display_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.to_string_lossy().into_owned(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// The virtual roots: the canonical home directory and mounted volumes (Linux: children of
/// `/media/<user>` and `/run/media/<user>`; macOS: `/Volumes/*`), deduplicated, accessible,
/// never a special root, at most [`MAX_ROOTS`].
#[must_use]
pub fn virtual_roots(home: Option<&Path>) -> Vec<OpenDir> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(home) = home {
        candidates.push(home.to_path_buf());
        let user = home.file_name().map(|name| name.to_os_string());
        let mounts: Vec<PathBuf> = if cfg!(target_os = "macos") {
            vec![PathBuf::from("/Volumes")]
        } else {
            user.map(|user| {
                vec![
                    Path::new("/media").join(&user),
                    Path::new("/run/media").join(&user),
                ]
            })
            .unwrap_or_default()
        };
        for mount in mounts {
            if let Ok(open) = open_canonical(&mount)
                && let Ok(listing) = list(&open)
            {
                candidates.extend(listing.children.into_iter().map(|child| child.path));
            }
        }
    }
    let mut roots: Vec<OpenDir> = Vec::new();
    for candidate in candidates {
        if roots.len() == MAX_ROOTS {
            break;
        }
        let Ok(open) = open_canonical(&candidate) else {
            continue;
        };
        let special = SPECIAL_ROOTS
            .iter()
            .any(|special| open.path == Path::new(special));
        if special || roots.iter().any(|root| root.path == open.path) {
            continue;
        }
        roots.push(open);
    }
    roots
}

/// The fingerprint of a canonical directory: SHA-256 hex of the compact, key-sorted JSON
/// `{"birth_ns":…,"device":…,"inode":…,"path":…}`. The reference hashed only device, inode
/// and path ([`legacy_fingerprint`]), which misses a directory removed and recreated with
/// the same inode; the birth time tells them apart. Change and modification times are left
/// out on purpose: they move whenever a file is created in the directory, which would
/// invalidate the grant of every chat that writes a file.
#[must_use]
pub fn fingerprint(path: &Path, identity: &Identity) -> String {
    let birth = identity
        .birth_ns
        .map_or_else(|| "null".to_owned(), |ns| ns.to_string());
    let text = format!(
        r#"{{"birth_ns":{birth},"device":{},"inode":{},"path":{}}}"#,
        identity.device,
        identity.inode,
        json_ascii_string(&path.to_string_lossy())
    );
    hex(&Sha256::digest(text.as_bytes()))
}

/// The reference's fingerprint: SHA-256 hex of `{"device":…,"inode":…,"path":…}`. Grants it
/// issued carry this form; they verify with this check's weaker guarantee.
#[must_use]
pub fn legacy_fingerprint(path: &Path, identity: &Identity) -> String {
    let text = format!(
        r#"{{"device":{},"inode":{},"path":{}}}"#,
        identity.device,
        identity.inode,
        json_ascii_string(&path.to_string_lossy())
    );
    hex(&Sha256::digest(text.as_bytes()))
}

/// A JSON string as Python's `json.dumps` writes it by default (`ensure_ascii`).
fn json_ascii_string(text: &str) -> String {
    python_json_string(text, true)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Names that can be shown: non-empty, no control or other category-C characters.
fn clean_name(name: &str) -> bool {
    !name.is_empty()
        && !name.chars().any(|c| {
            c.is_control()
                || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}')
        })
}

/// Whether this user can read, write and search `name` under `dir`.
fn accessible(dir: &Dir, name: &str) -> bool {
    use rustix::fs::{Access, AtFlags, accessat};
    accessat(
        dir,
        name,
        Access::READ_OK | Access::WRITE_OK | Access::EXEC_OK,
        AtFlags::empty(),
    )
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("browse-{tag}-{}", crate::secret::new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::canonicalize(dir).unwrap()
    }

    #[test]
    fn lists_only_real_accessible_directories_sorted_case_insensitively() {
        let root = temp_dir("list");
        for name in ["beta", "Alpha", "gamma"] {
            std::fs::create_dir(root.join(name)).unwrap();
        }
        std::fs::create_dir_all(root.join("Alpha/nested")).unwrap();
        std::fs::write(root.join("file.txt"), b"x").unwrap();
        std::os::unix::fs::symlink(root.join("beta"), root.join("link")).unwrap();
        let open = open_strict(&root).unwrap();
        let listing = list(&open).unwrap();
        let names: Vec<&str> = listing.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Alpha", "beta", "gamma"]);
        assert!(!listing.truncated);
        assert_eq!(listing.children[0].path, root.join("Alpha"));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn the_scan_bound_truncates_at_its_boundary() {
        let root = temp_dir("bound");
        for i in 0..MAX_SCANNED_ENTRIES {
            std::fs::create_dir(root.join(format!("d{i:04}"))).unwrap();
        }
        let open = open_strict(&root).unwrap();
        let exact = list(&open).unwrap();
        assert_eq!(exact.children.len(), MAX_SCANNED_ENTRIES);
        assert!(!exact.truncated);
        std::fs::create_dir(root.join("one-more")).unwrap();
        let open = open_strict(&root).unwrap();
        let over = list(&open).unwrap();
        assert!(over.truncated);
        assert_eq!(over.children.len(), MAX_SCANNED_ENTRIES);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn links_and_non_canonical_paths_are_refused() {
        let root = temp_dir("links");
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert!(matches!(
            open_strict(&root.join("link")),
            Err(BrowseError::Link)
        ));
        assert!(matches!(
            open_canonical(&root.join("link")),
            Err(BrowseError::Link)
        ));
        assert!(matches!(
            open_strict(&root.join("real/../real")),
            Err(BrowseError::Unavailable)
        ));
        assert!(matches!(
            open_strict(&root.join("missing")),
            Err(BrowseError::Unavailable)
        ));
        assert_eq!(
            open_strict(&root.join("real")).unwrap().path,
            root.join("real")
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn the_home_directory_is_a_virtual_root() {
        let home = temp_dir("home");
        let roots = virtual_roots(Some(&home));
        assert_eq!(roots[0].path, home);
        assert_eq!(
            display_name(&home),
            home.file_name().unwrap().to_string_lossy()
        );
        assert_eq!(display_name(Path::new("/")), "/");
        std::fs::remove_dir(home).unwrap();
    }

    #[test]
    fn a_directory_recreated_under_the_same_name_changes_the_fingerprint() {
        let root = temp_dir("fingerprint");
        let path = root.join("project");
        std::fs::create_dir(&path).unwrap();
        let first = open_strict(&path).unwrap();
        let before = fingerprint(&first.path, &first.identity);
        assert_eq!(before.len(), 64);
        assert!(
            before
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        // Writing a file into it must not change it (its mtime and ctime move).
        std::fs::write(path.join("notes.txt"), b"x").unwrap();
        let again = open_strict(&path).unwrap();
        assert_eq!(fingerprint(&again.path, &again.identity), before);
        drop((first, again));
        std::fs::remove_file(path.join("notes.txt")).unwrap();
        // rmdir + mkdir: ext4 typically hands the same inode back.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::remove_dir(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let recreated = open_strict(&path).unwrap();
        assert!(
            recreated.identity.birth_ns.is_some(),
            "this filesystem reports no birth time; the fingerprint cannot tell a recreated directory"
        );
        assert_ne!(fingerprint(&recreated.path, &recreated.identity), before);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn the_legacy_fingerprint_matches_the_reference_form() {
        // sha256 of {"device":2049,"inode":1234,"path":"/home/alice/Projekt\u00e9"}
        let identity = Identity {
            device: 2049,
            inode: 1234,
            birth_ns: None,
        };
        let text = r#"{"device":2049,"inode":1234,"path":"/home/alice/Projekt\u00e9"}"#;
        assert_eq!(
            legacy_fingerprint(Path::new("/home/alice/Projekté"), &identity),
            hex(&Sha256::digest(text.as_bytes()))
        );
        // The same, computed by Python's json.dumps(sort_keys=True, separators=(",", ":")).
        assert_eq!(
            legacy_fingerprint(Path::new("/home/alice/Projekté"), &identity),
            "c195058e1950055e971523cc0be7a55229627f6c082fdc5ba60932d885217ec3"
        );
        assert_eq!(json_ascii_string("a\"😀"), r#""a\"\ud83d\ude00""#);
    }
}
