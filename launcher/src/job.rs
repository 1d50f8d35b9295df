//! On Windows, the launcher's children end with it however it ends: at its start the launcher
//! puts itself in a Job Object that kills every process in it when its last handle closes,
//! and the children it spawns are born in that job. When the launcher is killed outright
//! (Task Manager, `taskkill /F`), the system closes the handle and the API goes too: the
//! counterpart of `PR_SET_PDEATHSIG` on Linux (`local_core::lifetime`).
//!
//! `win32job` wraps the calls, so no `unsafe` is needed here. Elsewhere this does nothing.

/// Holds the job for the launcher's life; dropping it ends every process in the job.
#[derive(Debug)]
pub struct Job {
    #[cfg(windows)]
    _job: win32job::Job,
}

/// Puts this process in a new kill-on-close job. A failure (an old system that refuses
/// nested jobs) is returned as the sentence to warn with; the launcher still runs, its
/// children then stopped only by its own clean stop.
///
/// # Errors
/// The job could not be created or joined.
pub fn contain() -> Result<Job, String> {
    #[cfg(windows)]
    {
        let refused = |err: win32job::JobError| {
            format!(
                "cannot tie the API to the launcher ({err}): if the launcher is killed, end msguide-api in Task Manager"
            )
        };
        let mut limits = win32job::ExtendedLimitInfo::new();
        limits.limit_kill_on_job_close();
        let job = win32job::Job::create_with_limit_info(&limits).map_err(refused)?;
        job.assign_current_process().map_err(refused)?;
        Ok(Job { _job: job })
    }
    #[cfg(not(windows))]
    {
        Ok(Job {})
    }
}
