//! Where the launcher finds the binaries it starts and keeps the children's logs.
//!
//! The binaries are siblings of the launcher's own executable, as cargo and an installer both
//! lay them out. The per-user state directory is `$XDG_STATE_HOME/msguide` (or
//! `~/.local/state/msguide`) on Linux, `~/Library/Logs/msguide` on macOS and
//! `%LOCALAPPDATA%\msguide` on Windows. Lookups take the variables through a closure, so tests
//! never touch the process environment.

use std::{
    ffi::OsString,
    io,
    path::{Path, PathBuf},
};

/// The folder under the per-user state directory.
pub const APP_DIR: &str = "msguide";
/// The API server binary.
pub const API_BINARY: &str = "msguide-api";
/// The desktop client binary (not in this build yet).
pub const DESKTOP_BINARY: &str = "msguide-desktop";
/// The API's diagnostic log, in the state directory.
pub const BACKEND_LOG: &str = "backend.log";
/// The desktop client's log, in the state directory.
pub const DESKTOP_LOG: &str = "desktop.log";

/// The operating systems with their own state directory convention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    /// Linux and the other Unix systems: the XDG base directories.
    Linux,
    /// macOS.
    Mac,
    /// Windows.
    Windows,
}

impl Os {
    /// The system this launcher was built for.
    pub const CURRENT: Self = if cfg!(windows) {
        Self::Windows
    } else if cfg!(target_os = "macos") {
        Self::Mac
    } else {
        Self::Linux
    };
}

/// The path a binary called `name` has next to the launcher in `own_dir`.
#[must_use]
pub fn sibling(own_dir: &Path, name: &str) -> PathBuf {
    own_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

/// The per-user state directory, or `None` when neither its variable nor a home directory is
/// set.
pub fn state_dir(os: Os, var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| {
        var(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    let home = || match os {
        Os::Windows => set("USERPROFILE").or_else(|| set("HOME")),
        Os::Linux | Os::Mac => set("HOME"),
    };
    let base = match os {
        // The XDG spec says a relative value is invalid and must be ignored.
        Os::Linux => set("XDG_STATE_HOME")
            .filter(|path| path.is_absolute())
            .or_else(|| Some(home()?.join(".local").join("state"))),
        Os::Mac => Some(home()?.join("Library").join("Logs")),
        Os::Windows => set("LOCALAPPDATA").or_else(|| Some(home()?.join("AppData").join("Local"))),
    }?;
    Some(base.join(APP_DIR))
}

/// Creates `dir` and its missing parents, readable by this user only on Unix.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(os: Os, vars: &[(&str, &str)]) -> Option<PathBuf> {
        state_dir(os, |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn per_user_state_directories() {
        let linux = [("HOME", "/home/u"), ("XDG_STATE_HOME", "/state")];
        assert_eq!(dir(Os::Linux, &linux), Some("/state/msguide".into()));
        for ignored in ["", "relative/state"] {
            assert_eq!(
                dir(
                    Os::Linux,
                    &[("HOME", "/home/u"), ("XDG_STATE_HOME", ignored)]
                ),
                Some("/home/u/.local/state/msguide".into()),
                "{ignored:?}"
            );
        }
        assert_eq!(
            dir(Os::Mac, &linux),
            Some("/home/u/Library/Logs/msguide".into()),
            "macOS ignores XDG"
        );
        assert_eq!(
            dir(
                Os::Windows,
                &[("LOCALAPPDATA", "C:/Users/u/AppData/Local"), ("HOME", "/x")]
            ),
            Some(PathBuf::from("C:/Users/u/AppData/Local").join("msguide"))
        );
        assert_eq!(
            dir(Os::Windows, &[("USERPROFILE", "C:/Users/u")]),
            Some(PathBuf::from("C:/Users/u/AppData/Local/msguide"))
        );
        for os in [Os::Linux, Os::Mac, Os::Windows] {
            assert_eq!(dir(os, &[("HOME", "")]), None, "{os:?}");
        }
    }

    #[test]
    fn siblings_sit_next_to_the_launcher() {
        let api = sibling(Path::new("/opt/msguide/bin"), API_BINARY);
        assert_eq!(api.parent(), Some(Path::new("/opt/msguide/bin")));
        assert_eq!(
            api.file_name().unwrap().to_string_lossy(),
            format!("msguide-api{}", std::env::consts::EXE_SUFFIX)
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_state_directory_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let root =
            std::env::temp_dir().join(format!("msguide-launcher-paths-{}", std::process::id()));
        let dir = root.join("state/msguide");
        create_private_dir(&dir).unwrap();
        create_private_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(mode & 0o777, 0o700);
    }
}
