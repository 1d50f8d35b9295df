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
        // Creating a link on Windows needs a privilege a test cannot count on.
        #[cfg(unix)]
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

    #[cfg(unix)]
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
    fn wsl2_is_told_by_proc_version() {
        let wsl = "Linux version 5.15.167.4-microsoft-standard-WSL2 (root@f9c826d3017f) (gcc (GCC) 11.2.0) #1 SMP";
        assert_eq!(HostOs::from_proc_version(wsl), HostOs::Wsl2);
        assert_eq!(
            HostOs::from_proc_version(
                "Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com)"
            ),
            HostOs::Wsl2
        );
        assert_eq!(
            HostOs::from_proc_version(
                "Linux version 6.12.48+deb13-amd64 (debian-kernel@lists.debian.org)"
            ),
            HostOs::Linux
        );
        assert_eq!(HostOs::from_proc_version(""), HostOs::Linux);
    }

    #[test]
    fn mount_parents_follow_the_reference_per_os() {
        let home = Path::new("/home/alice");
        let any = |path: &str| MountParent {
            path: PathBuf::from(path),
            drive_letters_only: false,
        };
        assert_eq!(
            mount_parents(HostOs::Linux, Some(home)),
            [any("/media/alice"), any("/run/media/alice")]
        );
        assert_eq!(
            mount_parents(HostOs::Wsl2, Some(home)),
            [
                any("/media/alice"),
                any("/run/media/alice"),
                MountParent {
                    path: PathBuf::from("/mnt"),
                    drive_letters_only: true
                }
            ]
        );
        // Without a home there is no user for /media, but WSL2's drives are still there.
        assert!(mount_parents(HostOs::Linux, None).is_empty());
        assert_eq!(mount_parents(HostOs::Wsl2, None).len(), 1);
        assert_eq!(mount_parents(HostOs::MacOs, None), [any("/Volumes")]);
        assert!(mount_parents(HostOs::Windows, Some(home)).is_empty());

        let mnt = &mount_parents(HostOs::Wsl2, None)[0];
        for (name, offered) in [
            ("c", true),
            ("D", true),
            ("wsl", false),
            ("wslg", false),
            ("cd", false),
            ("", false),
            ("1", false),
            ("é", false),
        ] {
            assert_eq!(mnt.offers(name), offered, "{name:?}");
        }
        assert!(any("/media/alice").offers("USB STICK"));
    }

    #[test]
    fn windows_offers_removable_and_fixed_drives_only() {
        // GetDriveTypeW: 2 removable, 3 fixed, 4 remote, 5 CD-ROM, 6 RAM disk, 0/1 unknown.
        let drives = [
            ('D', 2),
            ('c', 3),
            ('Z', 4),
            ('E', 5),
            ('R', 6),
            ('X', 1),
            ('C', 3),
            ('1', 3),
        ];
        assert_eq!(
            windows_drive_roots(drives),
            [PathBuf::from("C:\\"), PathBuf::from("D:\\")]
        );
        assert!(windows_drive_roots([]).is_empty());
        for name in [
            "Windows",
            "Program Files (x86)",
            "$Recycle.Bin",
            "ProgramData",
        ] {
            assert!(skipped_on_windows(name), "{name}");
        }
        assert!(!skipped_on_windows("Projects"));
        assert!(!skipped_on_windows("Windows Stuff"));
    }

    #[test]
    fn special_roots_and_case_folding_differ_per_os() {
        assert!(HostOs::Linux.special_roots().contains(&"/proc"));
        assert!(HostOs::Wsl2.special_roots().contains(&"/run"));
        assert_eq!(HostOs::MacOs.special_roots(), ["/System", "/private"]);
        assert_eq!(
            same_root_key(HostOs::Windows, Path::new("C:\\Users")),
            same_root_key(HostOs::Windows, Path::new("c:\\users"))
        );
        assert_ne!(
            same_root_key(HostOs::Linux, Path::new("/media/a/USB")),
            same_root_key(HostOs::Linux, Path::new("/media/a/usb"))
        );
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
