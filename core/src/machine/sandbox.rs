//! The kernel sandbox of commands (`--shell-sandbox`): what each mode means, the launcher that
//! confines a command between fork and exec, the private temporary folder a confined command
//! gets, and the probe that tells whether this kernel can enforce a mode.
//!
//! A confined command is started as the launcher (a small executable of the connector's whose
//! `main` calls [`launch_if_asked`]; the caller names it) with [`LAUNCH_ARG`] and the policy
//! before the program. The launcher is a fresh single-threaded process: it confines itself
//! (`confine.rs`) and then `exec`s the program, so the command keeps the pid, the process group
//! and the pipes that [`exec`](super::exec) supervises, and nothing of the connector itself is
//! confined. The workspace forbids `unsafe`, which rules out `pre_exec`; a binary that calls
//! [`launch_if_asked`] first thing in `main` needs none. Usually the launcher was started and
//! confined ahead, after the previous command, and waits on its stdin for the program
//! (`spare.rs`), so the request pays for one process start, the program's.
//!
//! The modes, on Linux (elsewhere a mode other than `off` is refused):
//! - `workspace`: the command and its descendants read and run what the user can, and change
//!   nothing outside the allowed root and their private `TMPDIR`. A user namespace with a
//!   mount namespace in which every mount is read-only except those two (so no `chmod`,
//!   `chown`, `utimes` or xattr change outside, which Landlock does not cover), Landlock
//!   rules allowing writes only beneath them (and to `/dev/null` and its kind), no
//!   capabilities left, `no_new_privs`, and a seccomp filter refusing the `ioctl`s that type
//!   into a terminal and io_uring.
//! - `strict`: `workspace`, plus no reads outside the system folders, the root and `TMPDIR`
//!   (Landlock read rules, and empty read-only folders over everything else so no Unix socket
//!   outside the root can be reached by its path), and no network: a network namespace with no
//!   interface up, a seccomp filter refusing every socket family but `AF_UNIX` and io_uring,
//!   and Landlock TCP rules where the kernel has them.
//!
//! The launcher exits 125 when it cannot confine the command (the one line on stderr says
//! why; nothing was run), 126 when the program cannot be executed and 127 when it is not found,
//! as `env` and the shells do.

#[cfg(target_os = "linux")]
mod confine;
#[cfg(target_os = "linux")]
mod mounts;
#[cfg(target_os = "linux")]
mod rules;
mod spare;
#[cfg(test)]
mod tests;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) use spare::{Spare, request as spare_request};

/// The first argument that turns the connector's executable into the launcher.
pub const LAUNCH_ARG: &str = "__sandbox-exec";

/// The oldest Landlock ABI a mode needs: 3 (Linux 6.2) handles truncation, 2 moves and links
/// across folders, 1 everything else written; the rights of later ABIs (device ioctls, TCP,
/// signal and abstract-socket scopes) are added where the kernel has them.
pub const MIN_LANDLOCK_ABI: u32 = 3;

/// Exit status of the launcher when it could not confine the command.
pub const EXIT_NOT_CONFINED: u8 = 125;

/// The `--shell-sandbox` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SandboxMode {
    /// Commands run with all of the user's permissions (the contract's default).
    #[default]
    Off,
    /// Nothing changed outside the allowed root and the command's `TMPDIR`.
    Workspace,
    /// `Workspace`, no reads of the user's files outside the root, and no network.
    Strict,
}

impl SandboxMode {
    /// Every mode, in order of strength.
    pub const ALL: [Self; 3] = [Self::Off, Self::Workspace, Self::Strict];

    /// The setting's name: `off`, `workspace` or `strict`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Workspace => "workspace",
            Self::Strict => "strict",
        }
    }

    /// Parses a setting's name (surrounding blanks ignored, case-sensitive as documented).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|mode| mode.as_str() == name.trim())
    }

    /// What the mode protects, in one clause for a person.
    #[must_use]
    pub const fn protects(self) -> &'static str {
        match self {
            Self::Off => "nothing: commands run with all of this user's permissions",
            Self::Workspace => {
                "commands read what this user can but change nothing outside the allowed root"
            }
            Self::Strict => {
                "commands change nothing outside the allowed root, read no file of this user outside it and reach no network"
            }
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A sandbox mode other than `off`, the launcher that enforces it, and the spare launcher
/// waiting for the next command (`spare.rs`), shared by the clones.
#[derive(Debug, Clone)]
pub struct Sandbox {
    mode: SandboxMode,
    launcher: PathBuf,
    spare: Arc<spare::Slot>,
}

impl PartialEq for Sandbox {
    fn eq(&self, other: &Self) -> bool {
        self.mode == other.mode && self.launcher == other.launcher
    }
}

impl Eq for Sandbox {}

impl Sandbox {
    /// `mode` enforced by `launcher`, an executable that calls [`launch_if_asked`] before
    /// anything else; `None` for [`SandboxMode::Off`]. Whether this kernel can enforce the mode
    /// is [`probe`]'s to say, before the first command.
    #[must_use]
    pub fn new(mode: SandboxMode, launcher: PathBuf) -> Option<Self> {
        (mode != SandboxMode::Off).then(|| {
            // Folders of connectors killed before they could clean up go now, not never.
            sweep_orphans();
            Self {
                mode,
                launcher,
                spare: Arc::default(),
            }
        })
    }

    /// Ends the spare launcher, if one is waiting, and starts no more: call it when the
    /// connector stops, so nothing is left running or in the temporary folder (dropping the
    /// last clone does the same).
    pub fn shutdown(&self) {
        self.spare.close();
    }

    /// The mode.
    #[must_use]
    pub const fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// This sandbox for commands whose allowed root is `root` (absolute, canonical).
    #[must_use]
    pub fn confine(&self, root: &Path) -> Confinement {
        Confinement {
            sandbox: self.clone(),
            root: root.to_path_buf(),
        }
    }
}

/// A sandbox with the one folder tree a command may change besides its `TMPDIR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    sandbox: Sandbox,
    root: PathBuf,
}

impl Confinement {
    /// The mode.
    #[must_use]
    pub const fn mode(&self) -> SandboxMode {
        self.sandbox.mode
    }

    /// The spare launcher, if one is waiting for this root; one for another root is
    /// discarded (the caller then spawns the launcher as [`Self::launcher_command`] says).
    pub(crate) fn take_spare(&self) -> Option<Spare> {
        self.sandbox.spare.take(&self.root)
    }

    /// Starts a spare launcher for this confinement in the background, for the next command.
    pub(crate) fn refill_spare(&self) {
        spare::refill(self);
    }

    /// The launcher and its arguments, which run `program` (found by the caller; `name` is
    /// looked for again on `PATH` inside the sandbox when the caller's find is hidden there)
    /// as `arg0` with `args`, in `cwd`, with `tmp` as its private temporary folder.
    pub(crate) fn launcher_command(
        &self,
        tmp: &Path,
        cwd: &Path,
        name: &OsStr,
        program: &OsStr,
        arg0: &OsStr,
        args: &[OsString],
    ) -> (PathBuf, Vec<OsString>) {
        let mut argv: Vec<OsString> = vec![
            LAUNCH_ARG.into(),
            "run".into(),
            self.mode().as_str().into(),
            self.root.clone().into_os_string(),
            tmp.into(),
            cwd.into(),
            name.into(),
            program.into(),
            arg0.into(),
        ];
        argv.extend(args.iter().cloned());
        (self.sandbox.launcher.clone(), argv)
    }
}

/// How the launcher ended when it did not become the program: what the binary prints (the
/// library prints nothing) and the exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launched {
    /// Confinement or exec failed: one line for stderr, and 125, 126 or 127.
    Failed {
        /// The line (without the program's name before it).
        message: String,
        /// The exit status.
        code: u8,
    },
    /// A probe's report, for stdout; exit 0.
    Report(String),
}

/// If this process was started as the launcher (`argv[1]` is [`LAUNCH_ARG`]), confines itself
/// and executes the program, and returns only when that failed (or for a probe); `None` for
/// any other command line. Call it first thing in `main`, before any thread or runtime starts:
/// a user namespace can only be entered by a single-threaded process.
#[must_use]
pub fn launch_if_asked() -> Option<Launched> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(OsStr::new(LAUNCH_ARG)) {
        return None;
    }
    #[cfg(target_os = "linux")]
    {
        Some(confine::launch(args.collect()))
    }
    #[cfg(not(target_os = "linux"))]
    {
        drop(args);
        Some(Launched::Failed {
            message: "the shell sandbox is Linux-only for now".to_owned(),
            code: EXIT_NOT_CONFINED,
        })
    }
}

/// What the kernel offers the sandbox, as the launcher found it by trying each part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// The launcher that was probed, and that confines the commands, or why it cannot be run.
    pub launcher: Result<PathBuf, String>,
    /// The Landlock ABI, or why Landlock is unavailable.
    pub landlock: Result<u32, String>,
    /// Whether user, mount and network namespaces (with the mounts a mode makes) work, or why not.
    pub namespaces: Result<(), String>,
    /// Whether a seccomp filter can be installed, or why not.
    pub seccomp: Result<(), String>,
}

impl Support {
    /// What this machine cannot give `mode`, in one clause; `None` when the mode can be
    /// enforced in full.
    #[must_use]
    pub fn missing(&self, mode: SandboxMode) -> Option<String> {
        if mode == SandboxMode::Off {
            return None;
        }
        if !cfg!(target_os = "linux") {
            return Some("the shell sandbox is Linux-only for now".to_owned());
        }
        if let Err(why) = &self.launcher {
            return Some(format!("the sandbox launcher {why}"));
        }
        let mut missing = Vec::new();
        match &self.landlock {
            Ok(abi) if *abi >= MIN_LANDLOCK_ABI => {}
            Ok(abi) => missing.push(format!(
                "Landlock ABI {abi} is too old ({MIN_LANDLOCK_ABI} or later, Linux 6.2, is needed)"
            )),
            Err(why) => missing.push(format!("Landlock is not available ({why})")),
        }
        if let Err(why) = &self.namespaces {
            missing.push(format!(
                "user and mount namespaces are not available ({why})"
            ));
        }
        if let Err(why) = &self.seccomp {
            missing.push(format!("seccomp filters are not available ({why})"));
        }
        (!missing.is_empty()).then(|| missing.join(", and "))
    }

    /// The findings in one line: `Landlock ABI 7, user namespaces available, seccomp available`.
    #[must_use]
    pub fn summary(&self) -> String {
        if self.launcher.is_err() {
            return "no sandbox launcher, so nothing was tried".to_owned();
        }
        let landlock = match &self.landlock {
            Ok(abi) => format!("Landlock ABI {abi}"),
            Err(why) => format!("no Landlock ({why})"),
        };
        let namespaces = match &self.namespaces {
            Ok(()) => "user namespaces available".to_owned(),
            Err(why) => format!("no user namespaces ({why})"),
        };
        let seccomp = match &self.seccomp {
            Ok(()) => "seccomp available".to_owned(),
            Err(why) => format!("no seccomp ({why})"),
        };
        format!("{landlock}, {namespaces}, {seccomp}")
    }

    /// The launcher these findings are for, when it could be run.
    #[must_use]
    pub fn launcher(&self) -> Option<&Path> {
        self.launcher.as_deref().ok()
    }

    /// No launcher to probe with, and why (`is missing …`, completing "the sandbox launcher"):
    /// every mode is refused with that.
    #[must_use]
    pub fn without_launcher(why: String) -> Self {
        let unknown = Self::unknown(Path::new(""), &why);
        Self {
            launcher: Err(why),
            ..unknown
        }
    }

    /// Reads `launcher`'s probe report (see `confine::probe`).
    fn from_report(launcher: &Path, report: &str) -> Self {
        let mut support = Self::unknown(launcher, "the probe did not report it");
        for line in report.lines() {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            let outcome = match value.strip_prefix("error ") {
                Some(why) => Err(why.to_owned()),
                None => Ok(value),
            };
            match key {
                "landlock" => {
                    support.landlock = outcome.and_then(|abi| {
                        abi.parse()
                            .map_err(|_| "the probe's report was garbled".to_owned())
                    });
                }
                "namespaces" => support.namespaces = outcome.map(drop),
                "seccomp" => support.seccomp = outcome.map(drop),
                _ => {}
            }
        }
        support
    }

    fn unknown(launcher: &Path, why: &str) -> Self {
        Self {
            launcher: Ok(launcher.to_path_buf()),
            landlock: Err(why.to_owned()),
            namespaces: Err(why.to_owned()),
            seccomp: Err(why.to_owned()),
        }
    }
}

/// Asks `launcher` to try every part of the sandbox in a throwaway process (a user, mount and
/// network namespace with the `strict` mounts over a scratch root, a seccomp filter, a
/// Landlock ruleset) and report what worked. Nothing of this process is confined; the scratch
/// folders are removed.
#[must_use]
pub fn probe(launcher: &Path) -> Support {
    if !cfg!(target_os = "linux") {
        return Support::unknown(launcher, "the shell sandbox is Linux-only for now");
    }
    let scratch = match PrivateTmp::create() {
        Ok(scratch) => scratch,
        Err(err) => {
            return Support::unknown(
                launcher,
                &format!("no scratch folder in the temporary folder: {}", err.kind()),
            );
        }
    };
    let (root, tmp) = (scratch.path().join("root"), scratch.path().join("tmp"));
    let made = std::fs::create_dir(&root).and_then(|()| std::fs::create_dir(&tmp));
    let report = made.and_then(|()| {
        std::process::Command::new(launcher)
            .args([OsStr::new(LAUNCH_ARG), OsStr::new("probe")])
            .args([&root, &tmp])
            .current_dir(&root)
            .env_clear()
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
    });
    scratch.remove();
    match report {
        Ok(output) => Support::from_report(launcher, &String::from_utf8_lossy(&output.stdout)),
        Err(err) => Support::without_launcher(format!(
            "{} cannot be run ({})",
            launcher.display(),
            err.kind()
        )),
    }
}

/// A command's private temporary folder (`TMPDIR`): made owner-only under the connector's
/// temporary folder, removed with everything in it once the command has ended.
#[derive(Debug)]
pub(crate) struct PrivateTmp {
    path: Option<PathBuf>,
    /// The folder, open with a shared lock for as long as this value lives: a connector killed
    /// before it could remove its folders lets go of their locks as it dies, which is how
    /// [`sweep_orphans`] tells them from a running connector's (in any pid namespace).
    _held: Option<std::fs::File>,
}

/// The start of every private temporary folder's name.
const TMP_PREFIX: &str = "autogpt-shim-cmd-";

/// Removes the private temporary folders that connectors killed before they could remove them
/// left in the temporary folder: this user's `autogpt-shim-cmd-*` folders that no live
/// connector holds. Called once as a sandbox is set up.
pub(crate) fn sweep_orphans() {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        let me = rustix::process::geteuid().as_raw();
        for entry in entries.flatten() {
            if !entry
                .file_name()
                .as_encoded_bytes()
                .starts_with(TMP_PREFIX.as_bytes())
            {
                continue;
            }
            let path = entry.path();
            // Only folders of this user, never followed through a symbolic link.
            let ours = std::fs::symlink_metadata(&path)
                .is_ok_and(|meta| meta.is_dir() && meta.uid() == me);
            let Some(folder) = ours.then(|| std::fs::File::open(&path).ok()).flatten() else {
                continue;
            };
            // The exclusive lock is held while the folder goes, so a connector making this
            // very folder at the same moment waits and then sees it gone (`create`).
            if folder.try_lock().is_ok() {
                remove_tree(&path);
            }
        }
    }
}

impl PrivateTmp {
    /// Makes a fresh folder, `autogpt-shim-cmd-<random>`, mode 0700, held (a shared lock) for
    /// as long as the value lives.
    pub(crate) fn create() -> io::Result<Self> {
        // A sweep by another connector starting can take a folder between its making and its
        // lock: then it is made again under another name.
        let mut tries = 0;
        loop {
            tries += 1;
            match Self::try_create() {
                Err(err) if err.kind() == io::ErrorKind::NotFound && tries < 3 => {}
                made => return made,
            }
        }
    }

    fn try_create() -> io::Result<Self> {
        let path =
            std::env::temp_dir().join(format!("{TMP_PREFIX}{}", uuid::Uuid::new_v4().simple()));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        // Elsewhere the folder keeps the temporary folder's own access rules.
        #[cfg(not(unix))]
        let _ = &mut builder;
        builder.create(&path)?;
        let made = Self::hold(&path);
        if made.is_err() {
            remove_tree(&path);
        }
        made
    }

    /// The folder just made at `path`, locked and named by its real path (the mounts need it:
    /// the temporary folder may be reached through a symbolic link); `NotFound` when a sweep
    /// removed it first.
    fn hold(path: &Path) -> io::Result<Self> {
        #[cfg(unix)]
        let held = {
            use std::os::unix::fs::MetadataExt as _;
            let folder = std::fs::File::open(path)?;
            folder.lock_shared()?;
            let (now, locked) = (std::fs::symlink_metadata(path)?, folder.metadata()?);
            if (now.dev(), now.ino()) != (locked.dev(), locked.ino()) {
                return Err(io::ErrorKind::NotFound.into());
            }
            Some(folder)
        };
        #[cfg(not(unix))]
        let held = None;
        Ok(Self {
            path: Some(std::fs::canonicalize(path)?),
            _held: held,
        })
    }

    /// The folder.
    pub(crate) fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }

    /// Removes the folder and its content now.
    pub(crate) fn remove(mut self) {
        if let Some(path) = self.path.take() {
            remove_tree(&path);
        }
    }

    /// Removes the folder and waits for it: an empty one (most commands leave it so) at once,
    /// one with content on a blocking thread, so a command that filled its folder does not
    /// stall the runtime.
    pub(crate) async fn remove_async(mut self) {
        if let Some(path) = self.path.take() {
            // One rmdir instead of a round trip through the blocking pool, on every command.
            if std::fs::remove_dir(&path).is_ok() {
                return;
            }
            let _ = tokio::task::spawn_blocking(move || remove_tree(&path)).await;
        }
    }
}

impl Drop for PrivateTmp {
    // An aborted command (the request was dropped) still leaves nothing behind. An empty
    // folder goes at once: a runtime shutting down (the connector stopped by a signal while a
    // command ran) never runs a blocking task it is handed, which left empty folders in the
    // temporary folder. One with content goes to a blocking thread where a runtime runs this,
    // inline otherwise.
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            if std::fs::remove_dir(&path).is_ok() {
                return;
            }
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn_blocking(move || remove_tree(&path))),
                Err(_) => remove_tree(&path),
            }
        }
    }
}

/// Removes `path` and everything beneath it; folders the command made unreadable or
/// unwritable to itself get their owner's permissions back first. Symbolic links are removed,
/// never followed.
fn remove_tree(path: &Path) {
    if std::fs::remove_dir_all(path).is_ok() {
        return;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mut folders = vec![path.to_path_buf()];
        while let Some(folder) = folders.pop() {
            let _ = std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700));
            for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    folders.push(entry.path());
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(path);
}
