//! The connector's own files: its configuration, token file, status file, instance lock,
//! autostart unit, installed copy of itself and audit exports. Their paths come from the local user (flags, environment, per-OS defaults),
//! never from the platform, so they live outside the jail; platform-supplied paths go through
//! [`crate::machine::jail`] only.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Mode of files that hold secrets or private state.
pub const PRIVATE_FILE_MODE: u32 = 0o600;
/// Mode of directories the connector creates for its state.
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// Why a private file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PrivateFileError {
    /// The file could not be read.
    #[error("cannot read {} ({}): check that it exists and this user may read it", path.display(), source.kind())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// Group or others may read or write it.
    #[error("{} must not be readable by group or others (mode {mode:04o}); run chmod 600 on it", path.display())]
    TooOpen {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It is larger than the caller accepts.
    #[error("{} is larger than {cap} bytes: it is not the file expected there; replace it", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        cap: u64,
    },
    /// It is not a regular file.
    #[error("{} is not a regular file: replace it with one", path.display())]
    NotAFile {
        /// The file.
        path: PathBuf,
    },
}

/// Reads at most `cap` bytes of a file; `Ok(None)` when it does not exist.
///
/// # Errors
/// I/O errors other than "not found", and `InvalidData` when the file exceeds `cap`.
pub fn read_capped(path: &Path, cap: u64) -> io::Result<Option<Vec<u8>>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    read_at_most(file, cap).map(Some)
}

fn read_at_most(file: File, cap: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {cap} bytes"),
        ));
    }
    Ok(bytes)
}

/// Reads a secret file that must be a regular file of at most `cap` bytes with no group or
/// other permission bits (the `--token-file` rule). The mode is checked on the open handle, so
/// a file swapped after the check cannot slip through.
///
/// # Errors
/// [`PrivateFileError`] naming the file and what is wrong with it (never its content).
pub fn read_private(path: &Path, cap: u64) -> Result<Vec<u8>, PrivateFileError> {
    let io_err = |source| PrivateFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    let metadata = file.metadata().map_err(io_err)?;
    if !metadata.is_file() {
        return Err(PrivateFileError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(PrivateFileError::TooOpen {
                path: path.to_path_buf(),
                mode,
            });
        }
    }
    if metadata.len() > cap {
        return Err(PrivateFileError::TooLarge {
            path: path.to_path_buf(),
            cap,
        });
    }
    read_at_most(file, cap).map_err(|err| match err.kind() {
        io::ErrorKind::InvalidData => PrivateFileError::TooLarge {
            path: path.to_path_buf(),
            cap,
        },
        _ => io_err(err),
    })
}

/// What is at `path`, following symbolic links: for reports on the operator's own paths
/// (`doctor`), which look without opening or creating anything.
///
/// # Errors
/// The I/O error (`NotFound` when nothing is there).
pub fn look(path: &Path) -> io::Result<fs::Metadata> {
    fs::metadata(path)
}

/// Whether this user may write the file at `path`, or create entries in the folder at
/// `path`, asked of the OS (`access(2)` on Unix, the read-only attribute elsewhere) without
/// opening or creating anything.
///
/// # Errors
/// `PermissionDenied`, `ReadOnlyFilesystem`, `NotFound` and the like.
pub fn writable(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use rustix::fs::{Access, access};
        let wanted = if fs::metadata(path)?.is_dir() {
            Access::WRITE_OK | Access::EXEC_OK
        } else {
            Access::WRITE_OK
        };
        access(path, wanted).map_err(io::Error::from)
    }
    #[cfg(not(unix))]
    {
        if fs::metadata(path)?.permissions().readonly() {
            Err(io::Error::from(io::ErrorKind::PermissionDenied))
        } else {
            Ok(())
        }
    }
}

/// Creates a directory and its missing parents; the ones created get mode 0700 on Unix.
///
/// # Errors
/// The I/O error of the first directory that cannot be created.
pub fn ensure_dir(path: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(PRIVATE_DIR_MODE);
    }
    builder.create(path)
}

/// Replaces `path` with `bytes` atomically: a temporary file in the same directory, written,
/// fsynced, given `mode`, then renamed over the target. Missing parents are created (0700).
///
/// # Errors
/// The I/O error; the temporary file is removed on failure.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    replace(path, bytes, mode, true)
}

/// [`write_atomic`] without the fsync, for a file that only describes the moment (the daemon's
/// status): readers still see the old or the new content, never a mix, but after a power loss
/// the file may be empty. The fsync cost the connector's start up to milliseconds twice before
/// it dialled, for a file whose content is stale after any crash anyway.
///
/// # Errors
/// The I/O error; the temporary file is removed on failure.
pub fn write_atomic_unsynced(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    replace(path, bytes, mode, false)
}

fn replace(path: &Path, bytes: &[u8], mode: u32, sync: bool) -> io::Result<()> {
    let temp = temporary_beside(path)?;
    let result = (|| {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(mode);
        }
        let mut file = options.open(&temp)?;
        file.write_all(bytes)?;
        #[cfg(unix)]
        {
            // The umask may have narrowed the creation mode; set exactly what was asked.
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        if sync {
            file.sync_all()?;
        }
        fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    #[cfg(not(unix))]
    let _ = mode;
    result
}

/// Copies the file at `from` to `to` atomically with `mode` (a temporary file beside `to`,
/// renamed over it), so a program running from `to` keeps its old image and a reader never
/// sees half a file. Missing parents are created (0700).
///
/// # Errors
/// The I/O error; the temporary file is removed on failure.
pub fn copy_atomic(from: &Path, to: &Path, mode: u32) -> io::Result<()> {
    let temp = temporary_beside(to)?;
    let result = (|| {
        // `fs::copy` uses the kernel's in-place copy where there is one (copy_file_range).
        fs::copy(from, &temp)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&temp, fs::Permissions::from_mode(mode))?;
        }
        File::open(&temp)?.sync_all()?;
        fs::rename(&temp, to)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    #[cfg(not(unix))]
    let _ = mode;
    result
}

/// A fresh temporary path in `path`'s folder (created if missing), for a write renamed over
/// `path` once complete.
fn temporary_beside(path: &Path) -> io::Result<PathBuf> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    ensure_dir(parent)?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp", crate::secret::new_id().simple()));
    Ok(parent.join(temp_name))
}

/// An exclusive lock on a file (`flock(2)`, `LockFileEx`), held until dropped or until the
/// process ends, however it ends: nothing is left to clean up after a crash.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

/// Why [`lock`] did not take the lock.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it; what it wrote into the file, if that could be read.
    #[error("held by another process")]
    Held {
        /// The holder's note (its pid), when readable.
        note: Option<String>,
    },
    /// The file could not be opened or locked.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Takes the exclusive lock on `path` without waiting (creating it 0600, and its folder,
/// when missing) and writes `note` into it for whoever finds it held.
///
/// # Errors
/// [`LockError::Held`] when another process holds it; [`LockError::Io`] otherwise.
pub fn lock(path: &Path, note: &str) -> Result<FileLock, LockError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        ensure_dir(parent)?;
    }
    let mut options = OpenOptions::new();
    // Not truncated on open: the holder's note must survive a failed attempt.
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(PRIVATE_FILE_MODE);
    }
    let mut file = options.open(path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let mut note = String::new();
            let note = file
                .take(256)
                .read_to_string(&mut note)
                .ok()
                .map(|_| note.trim().to_owned())
                .filter(|note| !note.is_empty());
            return Err(LockError::Held { note });
        }
        Err(fs::TryLockError::Error(err)) => return Err(LockError::Io(err)),
    }
    // The note only names the holder to the next taker: a full disk must not cost the lock.
    let _ = file
        .set_len(0)
        .and_then(|()| file.write_all(note.as_bytes()));
    Ok(FileLock { _file: file })
}

/// Whether another process holds the lock on `path` ([`lock`]), asked without taking it for
/// longer than the question; `false` when there is no such file.
///
/// # Errors
/// The file exists but cannot be opened or locked.
pub fn is_locked(path: &Path) -> io::Result<bool> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(err) => return Err(err),
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(false),
        Err(fs::TryLockError::WouldBlock) => Ok(true),
        Err(fs::TryLockError::Error(err)) => Err(err),
    }
}

/// The names in the folder at `path`, unsorted; empty when the folder does not exist.
///
/// # Errors
/// The folder exists but cannot be listed.
pub fn list_names(path: &Path) -> io::Result<Vec<std::ffi::OsString>> {
    let entries = match fs::read_dir(path) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    entries.map(|entry| entry.map(|e| e.file_name())).collect()
}

/// The size of a file in bytes.
///
/// # Errors
/// The file cannot be inspected.
pub fn file_len(path: &Path) -> io::Result<u64> {
    fs::metadata(path).map(|metadata| metadata.len())
}

/// Removes a file; `Ok(false)` when it was already absent.
///
/// # Errors
/// I/O errors other than "not found".
pub fn remove(path: &Path) -> io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "own-files-{tag}-{}",
            crate::secret::new_id().simple()
        ));
        ensure_dir(&dir).unwrap();
        dir
    }

    #[test]
    fn atomic_writes_synced_or_not_create_parents_and_set_the_mode() {
        type Write = fn(&Path, &[u8], u32) -> io::Result<()>;
        for (tag, write) in [
            ("synced", write_atomic as Write),
            ("unsynced", write_atomic_unsynced as Write),
        ] {
            let dir = temp_dir(tag);
            let path = dir.join("a/b/status.json");
            write(&path, b"one", PRIVATE_FILE_MODE).unwrap();
            write(&path, b"two", PRIVATE_FILE_MODE).unwrap();
            assert_eq!(read_capped(&path, 10).unwrap().unwrap(), b"two", "{tag}");
            assert_eq!(file_len(&path).unwrap(), 3);
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{tag}");
                let mode = fs::metadata(dir.join("a")).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o700, "{tag}");
            }
            // No temporary file is left behind.
            assert_eq!(fs::read_dir(dir.join("a/b")).unwrap().count(), 1, "{tag}");
            assert!(remove(&path).unwrap());
            assert!(!remove(&path).unwrap());
            fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn capped_reads_refuse_larger_files_and_report_missing_ones() {
        let dir = temp_dir("capped");
        let path = dir.join("f");
        assert!(read_capped(&path, 4).unwrap().is_none());
        write_atomic(&path, b"1234", 0o644).unwrap();
        assert_eq!(read_capped(&path, 4).unwrap().unwrap(), b"1234");
        assert_eq!(
            read_capped(&path, 3).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_lock_is_held_once_and_tells_the_next_taker_who_holds_it() {
        let dir = temp_dir("lock");
        let path = dir.join("daemons/control.lock");
        assert!(!is_locked(&path).unwrap());
        let held = lock(&path, "4242").unwrap();
        assert!(is_locked(&path).unwrap());
        // A second open file description is refused, and reads the first one's note.
        match lock(&path, "9999") {
            Err(LockError::Held { note }) => assert_eq!(note.as_deref(), Some("4242")),
            other => panic!("{other:?}"),
        }
        drop(held);
        assert!(!is_locked(&path).unwrap());
        let again = lock(&path, "7").unwrap();
        assert_eq!(read_capped(&path, 16).unwrap().unwrap(), b"7");
        drop(again);
        assert_eq!(list_names(&dir.join("daemons")).unwrap(), ["control.lock"]);
        assert!(list_names(&dir.join("absent")).unwrap().is_empty());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_atomic_copy_replaces_the_target_with_the_mode_asked() {
        let dir = temp_dir("copy");
        let from = dir.join("program");
        write_atomic(&from, b"new image", 0o600).unwrap();
        let to = dir.join("bin/program");
        write_atomic(&to, b"old", 0o755).unwrap();
        copy_atomic(&from, &to, 0o755).unwrap();
        assert_eq!(read_capped(&to, 64).unwrap().unwrap(), b"new image");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&to).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o755);
        }
        assert_eq!(fs::read_dir(dir.join("bin")).unwrap().count(), 1);
        assert!(copy_atomic(&dir.join("absent"), &to, 0o755).is_err());
        assert_eq!(fs::read_dir(dir.join("bin")).unwrap().count(), 1);
        fs::remove_dir_all(dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn private_files_must_be_closed_to_group_and_others() {
        let dir = temp_dir("private");
        let path = dir.join("token");
        write_atomic(&path, b"secret-value\n", 0o640).unwrap();
        let err = read_private(&path, 64).unwrap_err();
        assert!(matches!(err, PrivateFileError::TooOpen { mode: 0o640, .. }));
        assert!(!err.to_string().contains("secret-value"));
        write_atomic(&path, b"secret-value\n", 0o600).unwrap();
        assert_eq!(read_private(&path, 64).unwrap(), b"secret-value\n");
        assert!(matches!(
            read_private(&path, 4).unwrap_err(),
            PrivateFileError::TooLarge { cap: 4, .. }
        ));
        assert!(matches!(
            read_private(&dir, 64).unwrap_err(),
            PrivateFileError::NotAFile { .. } | PrivateFileError::TooOpen { .. }
        ));
        fs::remove_dir_all(dir).unwrap();
    }
}
