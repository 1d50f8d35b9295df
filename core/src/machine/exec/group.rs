//! The guard of a child's process group: it signals the whole group, and kills it when dropped
//! while armed. On Windows the group is a Job Object the child is put in as soon as it is
//! spawned, so its descendants are in it too.

/// Kills the child's process group when dropped while armed, so an aborted request leaves
/// nothing running.
///
/// Signalling the group after the leader was reaped is safe: Linux keeps a pid allocated while
/// it names a live group, and an empty group just yields ESRCH, which is ignored.
pub(super) struct GroupGuard {
    pid: Option<u32>,
    /// A kill-on-close job holding the child and everything it starts; `None` when the
    /// system refused one, and then `taskkill /T` walks the tree instead.
    #[cfg(windows)]
    job: Option<win32job::Job>,
}

impl GroupGuard {
    pub(super) fn new(child: &tokio::process::Child) -> Self {
        Self {
            pid: child.id(),
            #[cfg(windows)]
            job: job_of(child),
        }
    }

    /// Leaves the group alone from now on.
    pub(super) fn disarm(&mut self) {
        self.pid = None;
        #[cfg(windows)]
        if let Some(job) = self.job.take() {
            // Closing a kill-on-close job kills what is still in it: lift the limit first.
            let _ = job.set_extended_limit_info(&win32job::ExtendedLimitInfo::new());
        }
    }

    /// Asks the group to exit (POSIX SIGTERM); on Windows there is no such request, so this
    /// kills the tree.
    pub(super) fn terminate(&mut self) {
        #[cfg(unix)]
        self.signal(rustix::process::Signal::TERM);
        #[cfg(windows)]
        self.kill();
    }

    /// Kills the whole group.
    pub(super) fn kill(&mut self) {
        #[cfg(unix)]
        self.signal(rustix::process::Signal::KILL);
        #[cfg(windows)]
        {
            // Closing the job's only handle ends every process in it. taskkill stays as the
            // fallback: Wine 8.0's taskkill, for one, has no /T.
            if self.job.take().is_some() {
                return;
            }
            if let Some(pid) = self.pid {
                let _ = std::process::Command::new("taskkill")
                    .args(["/T", "/F", "/PID", &pid.to_string()])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn();
            }
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

/// A new kill-on-close job with `child` in it. The child has only just been spawned; what it
/// starts from now on is born in the job.
#[cfg(windows)]
fn job_of(child: &tokio::process::Child) -> Option<win32job::Job> {
    let handle = child.raw_handle()?;
    let mut limits = win32job::ExtendedLimitInfo::new();
    limits.limit_kill_on_job_close();
    let job = win32job::Job::create_with_limit_info(&limits).ok()?;
    job.assign_process(handle as isize).ok()?;
    Some(job)
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}
