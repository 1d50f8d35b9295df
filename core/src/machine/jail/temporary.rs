//! The temporary files of [`Jail::write_atomic`]: created locked, and swept once their writer
//! died, so a write killed between creating its temporary file and renaming it into place
//! (SIGKILL, a crash, power loss) leaves nothing behind after the next write into that folder.

use std::io;
use std::path::{Path, PathBuf};

use cap_std::fs::OpenOptions;
use uuid::Uuid;

use super::Jail;

impl Jail {
    /// Creates a new temporary file in `parent` for [`Self::write_atomic`]. On Unix it is
    /// locked for as long as its handle lives, so [`Self::sweep`] can tell a live write from one
    /// whose writer was killed.
    pub(super) fn create_temporary(&self, parent: &Path) -> io::Result<(PathBuf, std::fs::File)> {
        let mut options = OpenOptions::new();
        // create_new never follows a symlink planted at the temporary name.
        options.write(true).create_new(true);
        for _ in 0..3 {
            let temporary = parent.join(format!(
                "{TEMPORARY_PREFIX}{}{TEMPORARY_SUFFIX}",
                Uuid::new_v4().simple()
            ));
            let file = self.dir.open_with(&temporary, &options)?.into_std();
            if lock_live(&file)? {
                return Ok((temporary, file));
            }
        }
        Err(io::Error::other(
            "another process removed each new temporary file as it was created",
        ))
    }

    /// Removes from `parent` the temporary files of writes whose process died mid-write
    /// (SIGKILL, a crash): names of [`Self::create_temporary`]'s shape that no live handle
    /// locks. Each directory is swept at its first write through this jail, so a busy one is
    /// not listed on every write; failures are ignored, the write itself does not need it.
    #[cfg(unix)]
    pub(super) fn sweep(&self, parent: &Path) {
        /// Past this many directories the set starts over rather than grow without bound.
        const MAX_REMEMBERED: usize = 4096;
        {
            let Ok(mut swept) = self.swept.lock() else {
                return;
            };
            if swept.len() >= MAX_REMEMBERED {
                swept.clear();
            }
            if !swept.insert(parent.to_path_buf()) {
                return;
            }
        }
        let dir = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let Ok(entries) = self.dir.read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !is_temporary_name(&name) || !entry.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let path = parent.join(&name);
            let Ok(file) = self.dir.open(&path) else {
                continue;
            };
            // Locked: a write in flight, here or in another process.
            if file.into_std().try_lock().is_ok() {
                let _ = self.dir.remove_file(&path);
            }
        }
    }
}

/// How [`Jail::write_atomic`]'s temporary files are named: prefix, 32 hex digits, suffix.
const TEMPORARY_PREFIX: &str = ".jail-";
const TEMPORARY_SUFFIX: &str = ".tmp";

/// Locks a new temporary file; false when another process's sweep removed it between its
/// creation and the lock (a name is never reused, so the caller simply takes a fresh one).
#[cfg(unix)]
fn lock_live(file: &std::fs::File) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    file.lock()?;
    Ok(file.metadata()?.nlink() > 0)
}

/// No sweep runs here, so nothing needs the lock.
#[cfg(not(unix))]
fn lock_live(_file: &std::fs::File) -> io::Result<bool> {
    Ok(true)
}

/// Whether `name` has the exact shape of a write's temporary file.
#[cfg(unix)]
fn is_temporary_name(name: &std::ffi::OsStr) -> bool {
    name.to_str()
        .and_then(|name| name.strip_prefix(TEMPORARY_PREFIX))
        .and_then(|name| name.strip_suffix(TEMPORARY_SUFFIX))
        .is_some_and(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::path::Path;

    use uuid::Uuid;

    use crate::machine::jail::Jail;

    /// Removed however the test ends.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A killed writer's file goes at the next write into its folder; a live writer's (locked)
    /// and a name of another shape stay, and a folder is swept only at its first write.
    #[test]
    fn the_first_write_into_a_folder_sweeps_only_dead_writers_temporary_files() {
        let base = std::env::temp_dir().join(format!("jail-sweep-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&base).unwrap();
        let dir = TempDir(base);
        let stale = ".jail-0123456789abcdef0123456789abcdef.tmp";
        let live = ".jail-fedcba9876543210fedcba9876543210.tmp";
        let other = ".jail-mine.tmp";
        for name in [stale, live, other] {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        let held = std::fs::File::open(dir.path().join(live)).unwrap();
        held.lock().unwrap();
        let jail = Jail::open(dir.path()).unwrap();
        let target = jail.resolve("a.txt").unwrap();
        jail.write_atomic(&target, b"a", false).unwrap();
        assert_eq!(names(dir.path()), [live, other, "a.txt"]);

        // Swept once per folder: a file left later stays until the next jail.
        std::fs::write(dir.path().join(stale), "x").unwrap();
        jail.write_atomic(&target, b"b", false).unwrap();
        assert!(dir.path().join(stale).exists());
        drop(held);
        let jail = Jail::open(dir.path()).unwrap();
        jail.write_atomic(&target, b"c", false).unwrap();
        assert_eq!(names(dir.path()), [other, "a.txt"]);
        assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), b"c");
    }
}
