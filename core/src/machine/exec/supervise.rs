//! Waiting for a started child within its deadline while its pipes are drained: the bounded
//! wait for output after exit, and SIGTERM, the grace, then SIGKILL for the whole group.

use std::future::Future;
use std::pin::{Pin, pin};
use std::process::ExitStatus;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use tokio::process::Child;
use tokio::time::{Instant, sleep_until, timeout_at};

use super::{
    group::GroupGuard,
    output::{Capture, drain},
};

/// How long a timed-out child gets between SIGTERM and SIGKILL.
pub(super) const TERM_GRACE: Duration = Duration::from_secs(2);

/// How long we wait for the direct child to be reaped after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// How long the pipes may stay open once the group has been killed: a process that left the
/// group can hold them forever, so we stop reading after this.
const KILL_DRAIN_GRACE: Duration = Duration::from_secs(2);

/// How long the pipes may stay open after the direct child exited before the group is killed.
const POST_EXIT_DRAIN: Duration = Duration::from_secs(2);

/// Lower bound for [`POST_EXIT_DRAIN`] when the deadline is closer: what is already buffered in
/// the pipes must still be read even if the child exits just before the deadline.
const MIN_POST_EXIT_DRAIN: Duration = Duration::from_millis(250);

/// Waits for the child and its output; returns the exit status (if collected) and whether the
/// deadline was reached.
pub(super) async fn supervise(
    child: &mut Child,
    group: &mut GroupGuard,
    deadline: Instant,
    term_grace: Duration,
    budget: usize,
    stdout: &mut Capture,
    stderr: &mut Capture,
) -> (Option<ExitStatus>, bool) {
    let out_pipe = child.stdout.take();
    let err_pipe = child.stderr.take();
    let remaining = AtomicUsize::new(budget);
    let mut drains = pin!(async {
        tokio::join!(
            drain(out_pipe, &remaining, stdout),
            drain(err_pipe, &remaining, stderr)
        );
    });
    let mut drained = false;

    match with_drains(drains.as_mut(), &mut drained, child.wait(), deadline).await {
        Some(Ok(status)) => {
            let exited = Instant::now();
            let until = (exited + POST_EXIT_DRAIN)
                .min(deadline)
                .max(exited + MIN_POST_EXIT_DRAIN);
            if finish_drains(drains.as_mut(), &mut drained, until).await {
                group.disarm();
            } else {
                group.kill();
                finish_drains(
                    drains.as_mut(),
                    &mut drained,
                    Instant::now() + KILL_DRAIN_GRACE,
                )
                .await;
            }
            (Some(status), false)
        }
        Some(Err(_)) => {
            // The status is lost; make sure nothing of the command survives it.
            group.kill();
            finish_drains(
                drains.as_mut(),
                &mut drained,
                Instant::now() + KILL_DRAIN_GRACE,
            )
            .await;
            (None, false)
        }
        None => {
            group.terminate();
            let mut status = with_drains(
                drains.as_mut(),
                &mut drained,
                child.wait(),
                Instant::now() + term_grace,
            )
            .await;
            // Also when the child obeyed: a grandchild may have ignored SIGTERM.
            group.kill();
            if status.is_none() {
                status = with_drains(
                    drains.as_mut(),
                    &mut drained,
                    child.wait(),
                    Instant::now() + KILL_WAIT,
                )
                .await;
            }
            finish_drains(
                drains.as_mut(),
                &mut drained,
                Instant::now() + KILL_DRAIN_GRACE,
            )
            .await;
            (status.and_then(Result::ok), true)
        }
    }
}

/// Awaits `fut` until `until` while keeping the pipes drained; `None` when `until` came first.
async fn with_drains<F: Future>(
    mut drains: Pin<&mut impl Future<Output = ()>>,
    drained: &mut bool,
    fut: F,
    until: Instant,
) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut sleep = pin!(sleep_until(until));
    loop {
        tokio::select! {
            biased;
            output = &mut fut => return Some(output),
            () = &mut sleep => return None,
            () = drains.as_mut(), if !*drained => *drained = true,
        }
    }
}

/// Lets the drains run until both pipes are closed or `until`; true if they closed.
async fn finish_drains(
    drains: Pin<&mut impl Future<Output = ()>>,
    drained: &mut bool,
    until: Instant,
) -> bool {
    if !*drained && timeout_at(until, drains).await.is_ok() {
        *drained = true;
    }
    *drained
}
