//! The signals that ask a program to stop, handled once for the API, the connector's daemon
//! and the launcher: Ctrl-C and SIGTERM, and for the launcher also SIGHUP (its terminal went
//! away).

use std::io;

/// Installed stop-signal handlers: while this lives, the signals it listens for no longer
/// kill the process and are waited on with [`StopSignals::recv`] instead.
#[derive(Debug)]
pub struct StopSignals {
    #[cfg(unix)]
    listeners: Vec<tokio::signal::unix::Signal>,
}

impl StopSignals {
    /// Installs handlers for Ctrl-C (SIGINT) and SIGTERM, and for SIGHUP when `hangup`.
    /// Outside Unix only Ctrl-C exists, and it is listened for on each [`Self::recv`].
    ///
    /// # Errors
    /// The runtime could not install a handler.
    pub fn install(hangup: bool) -> io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let mut listeners = vec![
                signal(SignalKind::interrupt())?,
                signal(SignalKind::terminate())?,
            ];
            if hangup {
                listeners.push(signal(SignalKind::hangup())?);
            }
            Ok(Self { listeners })
        }
        #[cfg(not(unix))]
        {
            let _ = hangup;
            Ok(Self {})
        }
    }

    /// Waits for the next stop request.
    pub async fn recv(&mut self) {
        #[cfg(unix)]
        {
            let waits = self
                .listeners
                .iter_mut()
                .map(|listener| Box::pin(listener.recv()));
            futures_util::future::select_all(waits).await;
        }
        #[cfg(not(unix))]
        {
            // A handler that cannot be installed is no stop request.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM: what a service awaits before it shuts down gracefully.
/// When the handlers cannot be installed, Ctrl-C alone is waited for, as tokio offers it.
pub async fn stop_requested() {
    match StopSignals::install(false) {
        Ok(mut signals) => signals.recv().await,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
