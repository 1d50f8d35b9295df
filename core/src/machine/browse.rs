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

use cap_std::fs::Dir;
use sha2::{Digest, Sha256};

use crate::machine::audit_chain::python_json_string;

/// At most this many directory entries are scanned per listing (`MAX_SCANNED_ENTRIES`).
pub const MAX_SCANNED_ENTRIES: usize = 1000;
/// At most this many virtual roots.
pub const MAX_ROOTS: usize = 200;

/// The reference's Windows drive types offered as roots: `DRIVE_REMOVABLE` (2) and
/// `DRIVE_FIXED` (3) from `GetDriveTypeW`; network, optical and RAM drives are not.
pub const OFFERED_DRIVE_TYPES: [u32; 2] = [2, 3];

/// Names the reference never lists on Windows (compared case-insensitively): system folders
/// a chat should not be rooted in.
pub const WINDOWS_SKIPPED_NAMES: &[&str] = &[
    "$recycle.bin",
    "documents and settings",
    "program files",
    "program files (x86)",
    "programdata",
    "recovery",
    "system volume information",
    "windows",
];

/// The OS families whose virtual roots differ (the reference's `darwin`, `linux`, `wsl2`,
/// `windows`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostOs {
    /// Native Linux (and the other Unixes, which follow its branch).
    Linux,
    /// A WSL2 distro: Linux whose `/proc/version` names Microsoft.
    Wsl2,
    /// macOS.
    MacOs,
    /// Windows.
    Windows,
}

impl HostOs {
    /// The OS this process runs on; on Linux, WSL2 is told by `/proc/version`.
    #[must_use]
    pub fn detect() -> Self {
        if cfg!(target_os = "macos") {
            Self::MacOs
        } else if cfg!(windows) {
            Self::Windows
        } else {
            // Read errors leave plain Linux: the WSL2 roots are only an addition.
            let version = std::fs::read_to_string("/proc/version").unwrap_or_default();
            Self::from_proc_version(&version)
        }
    }

    /// Linux or WSL2 from the text of `/proc/version`: WSL kernels carry `microsoft` in
    /// their release (`...-microsoft-standard-WSL2`), in either case.
    #[must_use]
    pub fn from_proc_version(text: &str) -> Self {
        if text.to_ascii_lowercase().contains("microsoft") {
            Self::Wsl2
        } else {
            Self::Linux
        }
    }

    /// Roots that are never offered even when something is mounted there.
    #[must_use]
    pub const fn special_roots(self) -> &'static [&'static str] {
        match self {
            Self::Linux | Self::Wsl2 => &["/dev", "/proc", "/sys", "/run"],
            Self::MacOs => &["/System", "/private"],
            Self::Windows => &[],
        }
    }
}

/// A directory whose subdirectories are mounted volumes, offered as virtual roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountParent {
    /// The directory to list.
    pub path: PathBuf,
    /// Only one-letter names (WSL2's `/mnt/c`, `/mnt/d`: the Windows drives), not other
    /// mounts that may live under `/mnt`.
    pub drive_letters_only: bool,
}

impl MountParent {
    fn any(path: PathBuf) -> Self {
        Self {
            path,
            drive_letters_only: false,
        }
    }

    /// Whether a subdirectory called `name` is offered.
    #[must_use]
    pub fn offers(&self, name: &str) -> bool {
        !self.drive_letters_only || is_drive_letter(name)
    }
}

/// Where the reference looks for mounted volumes: Linux the children of `/media/<user>` and
/// `/run/media/<user>` (user = the home directory's name); WSL2 those and the one-letter
/// directories under `/mnt`; macOS the children of `/Volumes`; Windows none (its roots are
/// the drives, [`windows_drive_roots`] of [`present_drives`]).
#[must_use]
pub fn mount_parents(os: HostOs, home: Option<&Path>) -> Vec<MountParent> {
    let user = home.and_then(Path::file_name);
    let removable = |user: &std::ffi::OsStr| {
        [
            MountParent::any(Path::new("/media").join(user)),
            MountParent::any(Path::new("/run/media").join(user)),
        ]
    };
    match os {
        HostOs::Linux => user
            .map(|user| removable(user).to_vec())
            .unwrap_or_default(),
        HostOs::Wsl2 => {
            let mut parents = user
                .map(|user| removable(user).to_vec())
                .unwrap_or_default();
            parents.push(MountParent {
                path: PathBuf::from("/mnt"),
                drive_letters_only: true,
            });
            parents
        }
        HostOs::MacOs => vec![MountParent::any(PathBuf::from("/Volumes"))],
        HostOs::Windows => Vec::new(),
    }
}

/// One ASCII letter: a drive's name under WSL2's `/mnt`.
#[must_use]
pub fn is_drive_letter(name: &str) -> bool {
    let mut chars = name.chars();
    matches!((chars.next(), chars.next()), (Some(letter), None) if letter.is_ascii_alphabetic())
}

/// The Windows drive roots offered, from each present drive's letter and its
/// `GetDriveTypeW` code: removable and fixed drives only, as `C:\`, in letter order,
/// each letter once. [`present_drives`] gives the drives of this machine.
#[must_use]
pub fn windows_drive_roots(drives: impl IntoIterator<Item = (char, u32)>) -> Vec<PathBuf> {
    let mut letters: Vec<char> = drives
        .into_iter()
        .filter(|(letter, kind)| letter.is_ascii_alphabetic() && OFFERED_DRIVE_TYPES.contains(kind))
        .map(|(letter, _)| letter.to_ascii_uppercase())
        .collect();
    letters.sort_unstable();
    letters.dedup();
    letters
        .into_iter()
        .map(|letter| PathBuf::from(format!("{letter}:\\")))
        .collect()
}

/// This machine's drive letters with their `GetDriveTypeW` code, through sysinfo, which
/// lists only removable and fixed volumes; empty off Windows.
#[must_use]
pub fn present_drives() -> Vec<(char, u32)> {
    #[cfg(windows)]
    {
        const REMOVABLE: u32 = 2;
        const FIXED: u32 = 3;
        // No drive list (the query failed) leaves the home directory as the only root.
        let Ok(disks) = sysinfo::Disks::new_with_refreshed_list() else {
            return Vec::new();
        };
        disks
            .iter()
            .filter_map(|disk| {
                let mount = disk.mount_point().to_str()?;
                let mut chars = mount.chars();
                let letter = chars.next()?;
                // Volumes mounted on folders rather than letters are not drive roots.
                (chars.as_str() == ":\\").then_some((
                    letter,
                    if disk.is_removable() {
                        REMOVABLE
                    } else {
                        FIXED
                    },
                ))
            })
            .collect()
    }
    #[cfg(not(windows))]
    {
        Vec::new()
    }
}

/// Whether the reference skips a directory of this name when listing on Windows.
#[must_use]
pub fn skipped_on_windows(name: &str) -> bool {
    let folded = name.to_lowercase();
    WINDOWS_SKIPPED_NAMES.contains(&folded.as_str())
}

/// The key two roots are the same under: the reference's `normcase`, which folds case on
/// Windows only.
fn same_root_key(os: HostOs, path: &Path) -> String {
    let text = path.to_string_lossy();
    if os == HostOs::Windows {
        text.to_lowercase()
    } else {
        text.into_owned()
    }
}

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
    /// The identity of the directory behind `dir`, whose metadata is `meta`.
    fn of(dir: &Dir, meta: &cap_std::fs::Metadata) -> io::Result<Self> {
        let (device, inode) = file_id(dir, meta)?;
        let birth_ns = meta.created().ok().and_then(|created| {
            let created = created.into_std();
            match created.duration_since(std::time::UNIX_EPOCH) {
                Ok(after) => i128::try_from(after.as_nanos()).ok(),
                Err(before) => i128::try_from(before.duration().as_nanos())
                    .ok()
                    .map(|n| -n),
            }
        });
        Ok(Self {
            device,
            inode,
            birth_ns,
        })
    }
}

/// `(st_dev, st_ino)` of the open directory.
#[cfg(unix)]
fn file_id(_dir: &Dir, meta: &cap_std::fs::Metadata) -> io::Result<(u64, u64)> {
    use cap_std::fs::MetadataExt as _;
    Ok((meta.dev(), meta.ino()))
}

/// The volume serial number and file index of the open directory: what Windows has for
/// `st_dev` and `st_ino`. Stable std and cap-std expose them only behind an unstable
/// feature, so the handle is asked directly.
#[cfg(windows)]
fn file_id(dir: &Dir, _meta: &cap_std::fs::Metadata) -> io::Result<(u64, u64)> {
    let handle = dir.try_clone()?.into_std_file();
    let info = winapi_util::file::information(&handle)?;
    Ok((info.volume_serial_number(), info.file_index()))
}

/// Whether the object `lstat` saw at `path` (`seen`) is the one now open (`identity`).
#[cfg(unix)]
fn is_what_was_seen(_path: &Path, seen: &std::fs::Metadata, identity: &Identity) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    seen.dev() == identity.device && seen.ino() == identity.inode
}

/// Whether the object at `path` itself (a link is not followed: Windows' `lstat` has no
/// file index, so the path is opened as the reparse point it may be) is the one now open.
#[cfg(windows)]
fn is_what_was_seen(path: &Path, _seen: &std::fs::Metadata, identity: &Identity) -> bool {
    use std::os::windows::fs::OpenOptionsExt as _;
    // Values from the Windows SDK: a directory opens only with backup semantics, and a link
    // must be opened as itself rather than as its target.
    const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
    const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
    // Attributes only: the identity is read without asking for the contents.
    std::fs::OpenOptions::new()
        .access_mode(0)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)
        .and_then(|file| winapi_util::file::information(&file))
        .is_ok_and(|info| {
            info.volume_serial_number() == identity.device && info.file_index() == identity.inode
        })
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
    let identity = Identity::of(&dir, &meta).map_err(|_| BrowseError::Unavailable)?;
    if !meta.is_dir() || !is_what_was_seen(&canonical, &seen, &identity) {
        return Err(BrowseError::Unavailable);
    }
    if !accessible(&dir, ".") {
        return Err(BrowseError::Unavailable);
    }
    Ok(OpenDir {
        path: canonical,
        identity,
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
        if !clean_name(&name)
            || (cfg!(windows) && skipped_on_windows(&name))
            || !accessible(&open.dir, &name)
        {
            continue;
        }
        let Ok(child) = open.dir.open_dir(&name) else {
            continue;
        };
        let Ok(meta) = child.dir_metadata() else {
            continue;
        };
        let Ok(identity) = Identity::of(&child, &meta) else {
            continue;
        };
        children.push(Child {
            path: open.path.join(&name),
            identity,
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

/// The virtual roots of this host: the canonical home directory and its mounted volumes
/// ([`virtual_roots_on`] with [`HostOs::detect`]).
#[must_use]
pub fn virtual_roots(home: Option<&Path>) -> Vec<OpenDir> {
    virtual_roots_on(HostOs::detect(), home)
}

/// The virtual roots for `os`: the canonical home directory, then the volumes under its
/// [`mount_parents`], deduplicated, accessible, never a special root, at most
/// [`MAX_ROOTS`].
#[must_use]
pub fn virtual_roots_on(os: HostOs, home: Option<&Path>) -> Vec<OpenDir> {
    let mut candidates: Vec<PathBuf> = home.map(Path::to_path_buf).into_iter().collect();
    if os == HostOs::Windows {
        candidates.extend(windows_drive_roots(present_drives()));
    }
    for parent in mount_parents(os, home) {
        if let Ok(open) = open_canonical(&parent.path)
            && let Ok(listing) = list(&open)
        {
            candidates.extend(
                listing
                    .children
                    .into_iter()
                    .filter(|child| parent.offers(&child.name))
                    .map(|child| child.path),
            );
        }
    }
    let mut roots: Vec<OpenDir> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for candidate in candidates {
        if roots.len() == MAX_ROOTS {
            break;
        }
        let Ok(open) = open_canonical(&candidate) else {
            continue;
        };
        let special = os
            .special_roots()
            .iter()
            .any(|special| open.path == Path::new(special));
        let key = same_root_key(os, &open.path);
        if special || seen.contains(&key) {
            continue;
        }
        seen.push(key);
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
#[cfg(unix)]
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

/// Whether this user can read and search `name` under `dir`: it opens and lists. Write
/// access is not known in advance on Windows (that takes the ACL check of the Win32 API,
/// which safe code cannot reach), so a read-only directory is offered and a write into it
/// is refused by the write itself.
#[cfg(windows)]
fn accessible(dir: &Dir, name: &str) -> bool {
    dir.open_dir(name)
        .and_then(|child| child.entries().map(drop))
        .is_ok()
}

#[cfg(test)]
mod tests;
