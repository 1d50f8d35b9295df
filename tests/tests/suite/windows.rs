//! Windows at run time: the `x86_64-pc-windows-gnu` builds run under Wine, as black boxes
//! seen from the Linux side (loopback sockets, and the files on the Wine drive).
//! `scripts/windows-env` cross-builds them, builds the `ProcessPrng` forwarder Wine 8.0 lacks
//! and boots a Wine prefix once; every test here takes a private hard-linked copy of it.

mod connector;
mod desktop;
mod launcher;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use e2e::platform::WAIT;

use super::support::temp_dir;

/// The three variables `scripts/windows-env` prints.
fn prepared(name: &str) -> PathBuf {
    e2e::prepared(
        name,
        "the Windows suite needs Wine and the Windows build",
        "scripts/windows-env",
    )
}

/// The executables a test copies beside the forwarder.
const EXECUTABLES: [&str; 3] = ["msguide.exe", "msguide-api.exe", "autogpt-shim.exe"];

/// How `wine` is started: through bash, which first closes every descriptor above stderr that
/// the test inherited. `flock /work/cpu.lock cargo test` hands the lock's descriptor down, and
/// Wine's services (`services.exe`, `winedevice.exe`, `explorer.exe`) would otherwise hold it
/// for as long as they live; dash takes only one-digit descriptors, hence bash.
const CLOSE_INHERITED: &str = r#"for fd in /proc/$$/fd/*; do n=${fd##*/}; if [ "$n" -gt 2 ]; then eval "exec $n>&-"; fi; done; exec "$@""#;

/// A private Wine prefix: a hard-linked copy of the one `scripts/windows-env` booted, with the
/// Windows executables and `bcryptprimitives.dll` in `C:\msguide`. Dropping it kills its
/// wineserver (and with it every Windows process of the prefix), then any process of the
/// prefix still there, and removes the folder.
pub(crate) struct Wine {
    root: PathBuf,
    prefix: PathBuf,
}

impl Wine {
    pub(crate) fn new(name: &str) -> Self {
        let cache = prepared("MSGUIDE_TEST_WINE_PREFIX");
        let root = temp_dir(&format!("wine-{name}"));
        let prefix = root.join("prefix");
        // Hard links: the prefix is 700 MB of DLLs Wine only reads. Wine rewrites the registry
        // files, so those are real copies.
        let linked = Command::new("cp")
            .arg("-al")
            .arg(&cache)
            .arg(&prefix)
            .status()
            .unwrap()
            .success();
        if !linked {
            let _ = std::fs::remove_dir_all(&prefix);
            assert!(
                Command::new("cp")
                    .arg("-a")
                    .arg(&cache)
                    .arg(&prefix)
                    .status()
                    .unwrap()
                    .success(),
                "copying the Wine prefix failed"
            );
        }
        for entry in std::fs::read_dir(&prefix).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "reg") {
                let bytes = std::fs::read(&path).unwrap();
                std::fs::remove_file(&path).unwrap();
                std::fs::write(&path, bytes).unwrap();
            }
        }
        let wine = Self { root, prefix };
        wine.install("msguide", &[]);
        wine
    }

    /// Puts the executables, `bcryptprimitives.dll` and the support DLLs `extra` (built by
    /// `scripts/windows-env` from `tests/wine/`) in `C:\<folder>`, hard-linked.
    pub(crate) fn install(&self, folder: &str, extra: &[&str]) {
        let bin = prepared("MSGUIDE_TEST_WINDOWS_BIN");
        let support = prepared("MSGUIDE_TEST_WINDOWS_SUPPORT");
        let dir = self.drive_c().join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        let files = EXECUTABLES.iter().map(|exe| bin.join(exe)).chain(
            ["bcryptprimitives.dll"]
                .iter()
                .chain(extra)
                .map(|dll| support.join(dll)),
        );
        for from in files {
            assert!(
                from.exists(),
                "{} is missing: run `eval \"$(scripts/windows-env)\"` again",
                from.display()
            );
            let to = dir.join(from.file_name().unwrap());
            if std::fs::hard_link(&from, &to).is_err() {
                std::fs::copy(&from, &to).unwrap();
            }
        }
    }

    /// The Linux side of `C:\`.
    pub(crate) fn drive_c(&self) -> PathBuf {
        self.prefix.join("drive_c")
    }

    /// A folder of the test's own outside the prefix.
    pub(crate) fn scratch(&self) -> &Path {
        &self.root
    }

    /// The Windows per-user folder `%LOCALAPPDATA%` on the Linux side: the prefix has one user.
    pub(crate) fn local_app_data(&self) -> PathBuf {
        let users = self.drive_c().join("users");
        let user = std::fs::read_dir(&users)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| path.file_name().is_some_and(|n| n != "Public"))
            .unwrap_or_else(|| panic!("no user profile under {}", users.display()));
        user.join("AppData/Local")
    }

    /// `wine C:\msguide\<exe> args…` with nothing of the runner's environment but `PATH` and
    /// `HOME` (Wine passes the Unix environment on to the Windows program).
    pub(crate) fn command(&self, exe: &str, args: &[&str]) -> Command {
        self.command_in("msguide", exe, args)
    }

    /// [`Wine::command`] for `C:\<folder>\<exe>`.
    pub(crate) fn command_in(&self, folder: &str, exe: &str, args: &[&str]) -> Command {
        let program = format!("C:\\{folder}\\{exe}");
        let mut command = Command::new("bash");
        command
            .args(["-c", CLOSE_INHERITED, "bash", "wine", &program])
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.root)
            .env("WINEPREFIX", &self.prefix)
            .env("WINEDEBUG", "-all")
            // Wine keeps its server's socket folder under TMPDIR: inside the test's folder.
            .env("TMPDIR", &self.root)
            .stdin(Stdio::null());
        command
    }

    /// The Linux pids of this prefix's Windows processes whose command line names `exe`.
    pub(crate) fn pids_of(&self, exe: &str) -> Vec<u32> {
        self.processes(|cmdline| String::from_utf8_lossy(cmdline).contains(exe))
    }

    /// The Linux pids of this prefix's running processes whose command line passes `named`.
    fn processes(&self, named: impl Fn(&[u8]) -> bool) -> Vec<u32> {
        let mine = format!("WINEPREFIX={}", self.prefix.display());
        let mut pids = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let (Ok(cmdline), Ok(environ)) = (
                std::fs::read(entry.path().join("cmdline")),
                std::fs::read(entry.path().join("environ")),
            ) else {
                continue;
            };
            let ours = environ.split(|b| *b == 0).any(|v| v == mine.as_bytes());
            if ours && named(&cmdline) && super::support::running(&pid.to_string()) {
                pids.push(pid);
            }
        }
        pids
    }

    /// Waits until no process of this prefix names `exe`.
    pub(crate) async fn until_none(&self, exe: &str) -> bool {
        let deadline = Instant::now() + WAIT;
        while !self.pids_of(exe).is_empty() {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }
}

impl Drop for Wine {
    fn drop(&mut self) {
        // Kills every process of the prefix and waits for its wineserver to end.
        let _ = Command::new("wineserver")
            .arg("-k")
            .env("WINEPREFIX", &self.prefix)
            .env("TMPDIR", &self.root)
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("wineserver")
            .arg("-w")
            .env("WINEPREFIX", &self.prefix)
            .env("TMPDIR", &self.root)
            .stderr(Stdio::null())
            .status();
        // A process the wineserver no longer knows of (its server gone before it) survives
        // `-k`; it is this test's own, so it goes too.
        for pid in self.processes(|_| true) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
