//! Test support: a fresh directory under the system's temporary directory, removed with
//! everything in it when the test ends (however it ends).

use std::path::{Path, PathBuf};

/// A fresh, canonical directory removed on drop.
#[derive(Debug)]
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// Creates `<tmp>/<tag>-<uuid>`; canonical, so it can serve as a resolved path.
    pub(crate) fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{tag}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir.canonicalize().unwrap())
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// A path inside it.
    pub(crate) fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
