//! The launcher's mount namespace (Linux): every mount read-only but the allowed root and
//! `TMPDIR`, a private `/dev/shm`, and in `strict` empty read-only folders over everything
//! that is not a system folder, with a reduced `/dev`.
//!
//! The order is what makes it hold. The root and `TMPDIR` are cloned (`open_tree`) while their
//! mounts are still writable; then every mount this namespace lists is remounted read-only,
//! keeping the flags the kernel locked when the namespace was made (`nosuid`, `nodev`,
//! `noexec`, the atime mode), or the remount is refused; then the clones are attached at their
//! own paths. A hard link or rename between the root and anything outside crosses mounts and
//! fails; `chmod`, `chown`, `utimes` and xattr changes outside fail with `EROFS`. The command
//! keeps no capability, and Landlock refuses it any mount, so none of this can be undone.

use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::CWD;
use rustix::io::Errno;
use rustix::mount::{
    MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags, mount, mount_bind,
    mount_change, mount_remount, move_mount, open_tree,
};

use super::confine::{Failure, Policy};
use super::rules::SYSTEM_FOLDERS;

/// The private shared-memory folder every confined command gets.
pub(super) const SHM: &str = "/dev/shm";

/// The devices `strict`'s reduced `/dev` keeps.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// One mount of `/proc/self/mountinfo`: where it is and its per-mount flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MountEntry {
    pub(super) point: PathBuf,
    pub(super) flags: MountFlags,
}

/// The mounts of a `mountinfo` text, in its order (parents before children).
pub(super) fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let point = fields.nth(4)?;
            let options = fields.next()?;
            Some(MountEntry {
                point: unescape(point),
                flags: flags_of(options),
            })
        })
        .collect()
}

/// The kernel writes space, tab, newline and backslash in paths as octal escapes.
fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt as _;
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 4)
            .filter(|digits| bytes[i] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)))
            .map(|digits| {
                digits
                    .iter()
                    .fold(0u32, |value, digit| value * 8 + u32::from(digit - b'0'))
            })
            .and_then(|value| u8::try_from(value).ok());
        if let Some(byte) = escaped {
            out.push(byte);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// The per-mount options that a read-only remount must repeat: the kernel locks them when an
/// unprivileged namespace copies the mount, and refuses a remount that changes them.
fn flags_of(options: &str) -> MountFlags {
    let mut flags = MountFlags::empty();
    let mut atime = MountFlags::STRICTATIME;
    for option in options.split(',') {
        match option {
            "nosuid" => flags |= MountFlags::NOSUID,
            "nodev" => flags |= MountFlags::NODEV,
            "noexec" => flags |= MountFlags::NOEXEC,
            "nodiratime" => flags |= MountFlags::NODIRATIME,
            "nosymfollow" => flags |= MountFlags::NOSYMFOLLOW,
            "noatime" => atime = MountFlags::NOATIME,
            "relatime" => atime = MountFlags::RELATIME,
            _ => {}
        }
    }
    flags | atime
}

/// Builds the mode's view of the filesystem in this (new, private) mount namespace.
pub(super) fn isolate(policy: &Policy) -> Result<(), Failure> {
    // Nothing mounted outside from now on shows up here (it would come in writable).
    mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(|err| Failure::mounts("making the mounts private", err))?;
    let root = clone_tree(&policy.root)?;
    let tmp = clone_tree(&policy.tmp)?;
    read_only_everything()?;
    if policy.strict {
        let hidden = hide_all_but_the_system()?;
        attach(&root, &policy.root)?;
        attach(&tmp, &policy.tmp)?;
        for folder in hidden {
            seal(&folder)?;
        }
    } else {
        private_tmpfs(Path::new(SHM), "mode=1777")?;
        attach(&root, &policy.root)?;
        attach(&tmp, &policy.tmp)?;
    }
    Ok(())
}

/// A detached copy of the mounts at and beneath `path`, as writable as they are now.
fn clone_tree(path: &Path) -> Result<OwnedFd, Failure> {
    open_tree(
        CWD,
        path,
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE,
    )
    .map_err(|err| Failure::mounts(&format!("cloning {}", path.display()), err))
}

/// Mounts `tree` at `path`, creating the folders on the way when they are missing (inside an
/// empty folder of `strict`).
fn attach(tree: &OwnedFd, path: &Path) -> Result<(), Failure> {
    if !path.exists() {
        std::fs::create_dir_all(path).map_err(|err| {
            Failure::new(
                "mounts",
                format!("making {}: {}", path.display(), err.kind()),
            )
        })?;
    }
    move_mount(
        tree.as_fd(),
        "",
        CWD,
        path,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .map_err(|err| Failure::mounts(&format!("mounting {}", path.display()), err))
}

/// Remounts every mount of this namespace read-only with its locked flags.
fn read_only_everything() -> Result<(), Failure> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").map_err(|err| {
        Failure::new(
            "mounts",
            format!("reading /proc/self/mountinfo: {}", err.kind()),
        )
    })?;
    for entry in parse_mountinfo(&text) {
        match mount_remount(
            &entry.point,
            MountFlags::BIND | MountFlags::RDONLY | entry.flags,
            "",
        ) {
            Ok(()) => {}
            // Covered by a later mount (ENOENT, ENOTDIR, or a folder of the same name that is
            // no mount: EINVAL), or behind a folder this user cannot enter: no path reaches it.
            Err(Errno::NOENT | Errno::NOTDIR | Errno::INVAL | Errno::ACCESS) => {}
            Err(err) => {
                return Err(Failure::mounts(
                    &format!("making {} read-only", entry.point.display()),
                    err,
                ));
            }
        }
    }
    Ok(())
}

/// A fresh tmpfs at `path` (no set-id programs, no devices).
fn private_tmpfs(path: &Path, options: &str) -> Result<(), Failure> {
    if !path.is_dir() {
        return Ok(());
    }
    let options = std::ffi::CString::new(options)
        .map_err(|_| Failure::new("mounts", "a tmpfs option held a NUL".to_owned()))?;
    mount(
        "tmpfs",
        path,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        options.as_c_str(),
    )
    .map_err(|err| Failure::mounts(&format!("mounting a tmpfs on {}", path.display()), err))
}

/// Makes a folder `strict` mounted read-only.
fn seal(path: &Path) -> Result<(), Failure> {
    mount_remount(
        path,
        MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV,
        "",
    )
    .map_err(|err| Failure::mounts(&format!("sealing {}", path.display()), err))
}

/// `strict`: an empty tmpfs over every top-level folder but the system's (the root's and
/// `TMPDIR`'s paths are made inside, then sealed by the caller), the reduced `/dev`, and
/// `/dev/null` over any socket at the top. Returns the folders to seal.
fn hide_all_but_the_system() -> Result<Vec<PathBuf>, Failure> {
    use std::os::unix::fs::FileTypeExt as _;
    let listing = std::fs::read_dir("/")
        .map_err(|err| Failure::new("mounts", format!("listing /: {}", err.kind())))?;
    let entries: Vec<(std::ffi::OsString, std::fs::FileType)> = listing
        .filter_map(Result::ok)
        .filter_map(|entry| Some((entry.file_name(), entry.file_type().ok()?)))
        .collect();
    let mut hidden = Vec::new();
    let reduced_dev = entries.iter().any(|(name, _)| name == "dev");
    if reduced_dev {
        hidden.push(reduced_dev_folder()?);
    }
    for (name, kind) in &entries {
        let path = Path::new("/").join(name);
        let system = name
            .to_str()
            .is_some_and(|name| SYSTEM_FOLDERS.contains(&name));
        if kind.is_dir() && !system {
            private_tmpfs(&path, "mode=0755,size=1m,nr_inodes=4096")?;
            hidden.push(path);
        } else if kind.is_socket() && reduced_dev {
            mount_bind("/dev/null", &path).map_err(|err| {
                Failure::mounts(&format!("covering the socket {}", path.display()), err)
            })?;
        }
    }
    Ok(hidden)
}

/// `strict`'s `/dev`: a tmpfs with the harmless devices (bound from the read-only original),
/// the `fd` and standard-stream links, and a private `/dev/shm`; sockets such as `/dev/log`
/// are left out.
fn reduced_dev_folder() -> Result<PathBuf, Failure> {
    let dev = Path::new("/dev");
    let devices: Vec<(&str, OwnedFd)> = DEVICES
        .iter()
        .filter_map(|name| {
            let device = dev.join(name);
            let tree = open_tree(
                CWD,
                &device,
                OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
            );
            tree.ok().map(|tree| (*name, tree))
        })
        .collect();
    let options = std::ffi::CString::new("mode=0755,size=1m,nr_inodes=4096")
        .map_err(|_| Failure::new("mounts", "a tmpfs option held a NUL".to_owned()))?;
    mount(
        "tmpfs",
        dev,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        options.as_c_str(),
    )
    .map_err(|err| Failure::mounts("mounting the reduced /dev", err))?;
    let made = |what: &str, err: io::Error| {
        Failure::new("mounts", format!("making /dev/{what}: {}", err.kind()))
    };
    for (name, tree) in devices {
        let path = dev.join(name);
        std::fs::File::create(&path).map_err(|err| made(name, err))?;
        move_mount(
            tree.as_fd(),
            "",
            CWD,
            &path,
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )
        .map_err(|err| Failure::mounts(&format!("mounting {}", path.display()), err))?;
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(link)).map_err(|err| made(link, err))?;
    }
    std::fs::create_dir(SHM).map_err(|err| made("shm", err))?;
    private_tmpfs(Path::new(SHM), "mode=1777")?;
    Ok(dev.to_path_buf())
}
