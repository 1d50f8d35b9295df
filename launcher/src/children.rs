//! The children: spawning one with an exact environment and stopping a child (SIGTERM, then
//! SIGKILL after a grace period). The signals that stop the launcher are `local_core::signals`.
//!
//! Children share the launcher's process group, so a Ctrl-C in the terminal reaches them too;
//! the launcher still stops each one itself, which also covers SIGTERM and SIGHUP sent to the
//! launcher alone. If the launcher is killed with SIGKILL, each child on Linux gets SIGTERM
//! from the kernel, having asked for it at its own start (`local_core::lifetime`); on
//! Windows the launcher's Job Object ends them ([`crate::job`]); elsewhere they keep running.
//! `kill_on_drop` is the backstop for every other way out (a
//! panic, an early return).

use std::{
    ffi::OsStr,
    io,
    path::Path,
    process::{ExitStatus, Stdio},
    time::Duration,
};

use tokio::process::{Child, Command};

use crate::env::ChildEnv;

/// How long a child may take to stop after SIGTERM before it gets SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// Starts `program` with `args` and exactly `env`. stdin is closed, stdout is discarded (the
/// launcher's stdout carries only its own headless message), stderr is shared with the
/// launcher.
pub fn spawn(program: &Path, args: &[&OsStr], env: &ChildEnv) -> io::Result<Child> {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    env.apply(&mut command);
    command.spawn()
}

/// Waits for `child` to exit, or forever when there is none.
pub async fn wait_optional(child: &mut Option<Child>) -> io::Result<ExitStatus> {
    match child {
        Some(child) => child.wait().await,
        None => std::future::pending().await,
    }
}

/// Stops `child` and reaps it: SIGTERM first (the API shuts down gracefully on it), SIGKILL
/// after [`STOP_GRACE`]. A child that has already exited is just reaped.
pub async fn stop(child: &mut Child) -> io::Result<ExitStatus> {
    if let Some(status) = child.try_wait()? {
        return Ok(status);
    }
    // The child is not reaped yet, so its pid cannot have been reused by another process.
    terminate(child)?;
    match tokio::time::timeout(STOP_GRACE, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            child.start_kill()?;
            child.wait().await
        }
    }
}

/// Asks `child` to stop: SIGTERM on Unix; elsewhere there is no graceful signal for a
/// console-less child, so it is killed.
fn terminate(child: &mut Child) -> io::Result<()> {
    #[cfg(unix)]
    {
        use rustix::process::{Pid, Signal, kill_process};
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw);
        match pid {
            Some(pid) => match kill_process(pid, Signal::TERM) {
                // Exited in between: `wait` reaps it.
                Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
                Err(err) => Err(err.into()),
            },
            None => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        child.start_kill()
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::{ffi::OsString, time::Instant};

    use super::*;

    fn sh(script: &str) -> Child {
        let env = ChildEnv::inherit(std::env::var_os("PATH").map(|p| (OsString::from("PATH"), p)));
        spawn(
            Path::new("/bin/sh"),
            &[OsStr::new("-c"), OsStr::new(script)],
            &env,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn sigterm_stops_a_willing_child() {
        let mut child = sh("exec sleep 30");
        let status = stop(&mut child).await.unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(15)
        );
    }

    #[tokio::test]
    async fn sigkill_follows_when_sigterm_is_ignored() {
        // The shell ignores TERM (once it has had time to set the trap), so the grace runs out.
        let mut child = sh("trap '' TERM; while :; do sleep 1; done");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        let status = stop(&mut child).await.unwrap();
        assert!(started.elapsed() >= STOP_GRACE);
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
    }

    #[tokio::test]
    async fn an_exited_child_is_only_reaped() {
        let mut child = sh("exit 3");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(stop(&mut child).await.unwrap().code(), Some(3));
    }

    #[tokio::test]
    async fn the_child_gets_only_its_environment() {
        let env = ChildEnv::inherit([(OsString::from("ONLY"), OsString::from("this"))]);
        let mut command = Command::new("/usr/bin/env");
        command.stdout(Stdio::piped());
        env.apply(&mut command);
        let output = command.output().await.unwrap();
        assert_eq!(String::from_utf8(output.stdout).unwrap(), "ONLY=this\n");
    }
}
