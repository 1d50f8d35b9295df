//! The warm spare launcher: one launcher started and confined ahead of the next confined
//! command, waiting on its stdin for the program, so that command's start costs one process
//! start (the program's) instead of two.
//!
//! Why: every process start costs about 0.75 ms of CPU on a small VM (glibc's start-up) and
//! the namespaces 0.2 ms more, which put `EXECUTE_COMMAND [true]` under `workspace` at 1.9
//! times `off`; with the spare the launcher's start and confinement happen between commands,
//! which holds the benchmark's row (`workspace` ≤ 1.5 × `off`, docs/connector.md).
//! The spare is spawned as a command is (a direct child with its own process group and its
//! stdout and stderr piped), so [`exec`](crate::machine::exec) supervises it as it would a
//! command spawned on demand.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::{Confinement, LAUNCH_ARG, PrivateTmp};

/// A started launcher, confined (or holding why it could not be) for `root`, and its `TMPDIR`.
#[derive(Debug)]
pub(crate) struct Spare {
    pub(super) root: PathBuf,
    /// The root's identity when the spare was started: a root removed and made again, or
    /// another folder moved in its place, is not the one the spare's mounts hold.
    pub(super) identity: Option<Identity>,
    pub(crate) child: Child,
    pub(crate) tmp: PrivateTmp,
    /// This process's `/proc/self/mountinfo`, open since the spare started: the spare copied
    /// the mount table then, so a mount made since (a disk plugged in, a share mounted) would
    /// be missing from its view.
    #[cfg(target_os = "linux")]
    pub(super) mounts: std::fs::File,
}

impl Spare {
    /// Whether the spare still sees the file system as a launcher started now would: made
    /// for `root` as it is now, and no mount made or removed since.
    fn current(&self, root: &Path) -> bool {
        self.root == root && self.identity.is_some() && self.identity == identity(root) && {
            #[cfg(target_os = "linux")]
            {
                !mounts_changed(&self.mounts)
            }
            #[cfg(not(target_os = "linux"))]
            true
        }
    }
}

/// Whether the mount table changed since `mounts` (an open `/proc/self/mountinfo`) was
/// opened: the kernel then marks it readable with priority (POLLPRI and POLLERR) until it is
/// read again, which it never is here.
#[cfg(target_os = "linux")]
fn mounts_changed(mounts: &std::fs::File) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut watched = [PollFd::new(mounts, PollFlags::PRI)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // An error answers "changed": a spare is only an optimisation.
    !matches!(poll(&mut watched, Some(&now)), Ok(0))
}

/// A sandbox's one spare, whether one is being started, and whether the sandbox was shut
/// down, after which no spare started in the background is kept.
#[derive(Debug, Default)]
pub(super) struct Slot {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    spare: Option<Spare>,
    starting: bool,
    closed: bool,
}

impl Slot {
    /// The spare if it was made for `root` as it is now and the mounts have not changed since;
    /// any other is discarded.
    pub(super) fn take(&self, root: &Path) -> Option<Spare> {
        let spare = self.lock().spare.take()?;
        if spare.current(root) {
            return Some(spare);
        }
        discard(spare);
        None
    }

    /// Stores `spare` unless there is one already or the slot is closed.
    pub(super) fn put(&self, spare: Spare) {
        let mut state = self.lock();
        state.starting = false;
        if state.spare.is_none() && !state.closed {
            state.spare = Some(spare);
            return;
        }
        drop(state);
        discard(spare);
    }

    /// Ends the spare, if any, and takes no more: nothing left running or in the temporary
    /// folder.
    pub(super) fn close(&self) {
        let spare = {
            let mut state = self.lock();
            state.closed = true;
            state.spare.take()
        };
        if let Some(spare) = spare {
            discard(spare);
        }
    }

    /// Whether a spare should be started now: none waiting, none being started, not closed;
    /// if so, the slot counts it as being started.
    fn claim(&self) -> bool {
        let mut state = self.lock();
        let free = state.spare.is_none() && !state.starting && !state.closed;
        state.starting |= free;
        free
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.close();
    }
}

/// A folder's device, inode and birth time (where the file system keeps one).
pub(super) type Identity = (u64, u64, Option<std::time::SystemTime>);

/// What tells the folder at `root` from another one later at the same path: an inode number
/// is reused at once, so the birth time goes with it (a folder made again with the same
/// inode within the clock's tick, a few milliseconds, is not told apart).
pub(super) fn identity(root: &Path) -> Option<Identity> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(root)
            .ok()
            .map(|meta| (meta.dev(), meta.ino(), meta.created().ok()))
    }
    #[cfg(not(unix))]
    {
        let _ = root;
        None
    }
}

/// Starts a spare for `confinement` in the background, unless one is waiting or being
/// started already.
pub(super) fn refill(confinement: &Confinement) {
    if !cfg!(target_os = "linux") || !confinement.sandbox.spare.claim() {
        return;
    }
    let confinement = confinement.clone();
    // The spawn (a fork and exec, a millisecond or more) runs on a blocking thread: on the
    // connector's one runtime thread it ran before the reply of the command that just ended
    // was written, and delayed it by that much. The launcher confines itself in its own
    // process, after the spawn returned.
    drop(tokio::task::spawn_blocking(move || {
        let slot = &confinement.sandbox.spare;
        match start(&confinement) {
            Ok(spare) => slot.put(spare),
            Err(_) => slot.lock().starting = false,
        }
    }));
}

fn start(confinement: &Confinement) -> std::io::Result<Spare> {
    let identity = identity(&confinement.root);
    // Opened before the launcher copies the mount table, so no mount falls in between.
    #[cfg(target_os = "linux")]
    let mounts = std::fs::File::open("/proc/self/mountinfo")?;
    let tmp = PrivateTmp::create()?;
    let mut command = Command::new(&confinement.sandbox.launcher);
    command
        .args([LAUNCH_ARG, "spare", confinement.mode().as_str()])
        .arg(&confinement.root)
        .arg(tmp.path())
        .current_dir(&confinement.root)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let child = command.spawn()?;
    Ok(Spare {
        root: confinement.root.clone(),
        identity,
        child,
        tmp,
        #[cfg(target_os = "linux")]
        mounts,
    })
}

/// Kills the spare, reaps it and removes its `TMPDIR`. Killed by SIGKILL it is gone within
/// milliseconds; a second bounds the wait.
pub(crate) fn discard(mut spare: Spare) {
    let _ = spare.child.start_kill();
    let until = Instant::now() + Duration::from_secs(1);
    while matches!(spare.child.try_wait(), Ok(None)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
    spare.tmp.remove();
}

/// What the spare reads on its stdin: `cwd`, `name`, `program`, `arg0`, the number of
/// arguments, the arguments, then each variable's name and value, every field ended by NUL;
/// `None` when a field holds a NUL (an argument or a value from the request can), which the
/// spare could not tell from the end of a field: the caller spawns the launcher, whose spawn
/// refuses it as it always did.
pub(crate) fn request(
    cwd: &Path,
    name: &std::ffi::OsStr,
    program: &std::ffi::OsStr,
    arg0: &std::ffi::OsStr,
    args: &[OsString],
    env: &[(OsString, OsString)],
) -> Option<Vec<u8>> {
    let count = args.len().to_string();
    let fields = [
        cwd.as_os_str(),
        name,
        program,
        arg0,
        std::ffi::OsStr::new(&count),
    ]
    .into_iter()
    .chain(args.iter().map(OsString::as_os_str))
    .chain(
        env.iter()
            .flat_map(|(name, value)| [name.as_os_str(), value.as_os_str()]),
    );
    let mut bytes = Vec::new();
    for field in fields {
        let field = field.as_encoded_bytes();
        if field.contains(&0) {
            return None;
        }
        bytes.extend_from_slice(field);
        bytes.push(0);
    }
    Some(bytes)
}
