//! The guard of a child's process group: it signals the whole group, and kills it when dropped
//! while armed.

#[cfg(windows)]
use std::process::Stdio;

/// Kills the child's process group when dropped while armed, so an aborted request leaves
/// nothing running.
///
/// Signalling the group after the leader was reaped is safe: Linux keeps a pid allocated while
/// it names a live group, and an empty group just yields ESRCH, which is ignored.
pub(super) struct GroupGuard {
    pid: Option<u32>,
}

impl GroupGuard {
    pub(super) const fn new(pid: Option<u32>) -> Self {
        Self { pid }
    }

    /// Leaves the group alone from now on.
    pub(super) const fn disarm(&mut self) {
        self.pid = None;
    }

    /// Asks the group to exit (POSIX SIGTERM); on Windows there is no such request, so this
    /// kills the tree.
    pub(super) fn terminate(&self) {
        #[cfg(unix)]
        self.signal(rustix::process::Signal::TERM);
        #[cfg(windows)]
        self.kill();
    }

    /// Kills the whole group.
    pub(super) fn kill(&self) {
        #[cfg(unix)]
        self.signal(rustix::process::Signal::KILL);
        #[cfg(windows)]
        if let Some(pid) = self.pid {
            // Without unsafe code there is no job object; taskkill walks the tree for us.
            let _ = std::process::Command::new("taskkill")
                .args(["/T", "/F", "/PID", &pid.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
        }
    }

    #[cfg(unix)]
    fn signal(&self, signal: rustix::process::Signal) {
        let pgid = self
            .pid
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pgid) = pgid {
            // ESRCH (the group is gone) is the expected outcome more often than not.
            let _ = rustix::process::kill_process_group(pgid, signal);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}
