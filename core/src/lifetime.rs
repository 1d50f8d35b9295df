//! A child of the launcher ends with it: on Linux the kernel sends the child SIGTERM when
//! the launcher dies, even by SIGKILL, which no handler in the launcher could cover.
//!
//! The child asks for this itself, at its start (`PR_SET_PDEATHSIG` through rustix's safe
//! call), because arranging it from the launcher would need an `unsafe` `pre_exec`. The
//! launcher names itself in [`LAUNCHER_PID`]: a child whose parent is no longer that
//! process was orphaned before it could ask, and stops at once. The signal follows the thread
//! that spawned the child, which is the launcher's main thread (it runs a single-threaded
//! runtime).

use crate::env_names::LAUNCHER_PID;

/// How the process's life is tied to the launcher's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tie {
    /// SIGTERM arrives when the launcher dies.
    Tied,
    /// The launcher is already gone: the process should stop now.
    Orphaned,
    /// Not tied: this system cannot (not Linux), the call failed, or the variable holds no
    /// pid. The launcher's own stop on SIGTERM, SIGINT and SIGHUP still applies.
    Untied,
}

/// Ties this process to the launcher that started it; `None` when no launcher did (the
/// variable is unset).
#[must_use]
pub fn follow_launcher() -> Option<Tie> {
    let value = std::env::var(LAUNCHER_PID).ok()?;
    Some(follow(&value))
}

/// Ties this process to the launcher whose pid is `value`.
fn follow(value: &str) -> Tie {
    value.trim().parse::<u32>().map_or(Tie::Untied, tie)
}

#[cfg(target_os = "linux")]
fn tie(launcher: u32) -> Tie {
    use rustix::process::{Signal, getppid, set_parent_process_death_signal};
    if set_parent_process_death_signal(Some(Signal::TERM)).is_err() {
        return Tie::Untied;
    }
    // Checked after the request, so a launcher dying in between is still seen.
    let parent = getppid().map(|pid| pid.as_raw_nonzero().get().unsigned_abs());
    if parent == Some(launcher) {
        Tie::Tied
    } else {
        Tie::Orphaned
    }
}

#[cfg(not(target_os = "linux"))]
const fn tie(_launcher: u32) -> Tie {
    Tie::Untied
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_that_is_no_pid_ties_nothing() {
        assert_eq!(follow("launcher"), Tie::Untied);
        assert_eq!(follow(""), Tie::Untied);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn only_the_named_parent_ties_and_any_other_means_orphaned() {
        let parent = std::os::unix::process::parent_id();
        assert_eq!(follow(&(parent + 1).to_string()), Tie::Orphaned);
        assert_eq!(follow(&format!(" {parent}\n")), Tie::Tied);
        // The test harness is no launcher: take the request back.
        let _ = rustix::process::set_parent_process_death_signal(None);
    }
}
