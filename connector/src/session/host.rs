//! What every connection of this machine shares ([`Host`]: the jail, the audit chain, the
//! command limits, the local model and computer use) and what sets one connection apart from
//! another ([`Role`]: a direct data session, the control connection, or a control-mode child
//! with its activity clock and the machine-wide work gate).

use std::fmt;
use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use local_core::limits;
use local_core::machine::exec::CommandLimiter;
use local_core::machine::jail::Jail;
use local_core::machine::sandbox::{Sandbox, SandboxMode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Computer, LocalLlm};
use crate::audit::Auditor;
use crate::protocol::Message;

/// The machine control plane that a control connection serves (`crate::control`): the
/// session loop admits and counts its requests like any other and hands them over.
pub trait ControlPlane: fmt::Debug + Send + Sync {
    /// A control connection was established with this negotiated `max_concurrent`: every
    /// reference of an earlier one dies, every child runtime stops, and the children started
    /// from now on share a machine-wide work gate of that size.
    fn connected(&self, max_concurrent: NonZeroU32);
    /// Answers one control request (DIRECTORY_LIST_REQUEST, ATTACH/ACTIVATE/RESTORE/DETACH).
    fn handle(&self, message: Message) -> Pin<Box<dyn Future<Output = Message> + Send>>;
}

/// What a connection is for. It decides what HELLO advertises, how HELLO_ACK is checked,
/// which messages are served, and whether data requests count as activity and wait on the
/// machine work gate.
#[derive(Debug, Clone, Default)]
pub enum Role {
    /// A direct data session (`--session-id`): data requests run as soon as they are admitted.
    #[default]
    Data,
    /// The machine control connection: HELLO advertises `directory_browse` with a null
    /// root, HELLO_ACK is checked as a control ACK, and only control messages are served,
    /// by this plane.
    Control(Arc<dyn ControlPlane>),
    /// A control-mode child's data connection.
    Child {
        /// Touched by every data request, for the control plane's idle reaper.
        activity: Activity,
        /// The machine-wide work gate its requests wait on; `None` only for a child started
        /// before the control connection's first handshake sized the gate.
        work: Option<MachineWork>,
    },
}

impl Role {
    /// Whether this is the control connection.
    pub const fn is_control(&self) -> bool {
        matches!(self, Self::Control(_))
    }

    /// The machine work gate this connection's requests wait on (children only).
    pub const fn work(&self) -> Option<&MachineWork> {
        match self {
            Self::Child {
                work: Some(work), ..
            } => Some(work),
            Self::Data | Self::Control(_) | Self::Child { work: None, .. } => None,
        }
    }
}

/// When a child runtime last received a data request (keepalives do not count), for the
/// control plane's idle reaper.
#[derive(Debug, Clone)]
pub struct Activity(Arc<Mutex<Instant>>);

impl Default for Activity {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(Instant::now())))
    }
}

impl Activity {
    /// Records a data request now.
    pub fn touch(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// How long since the last data request (or since creation).
    pub fn idle(&self) -> Duration {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }
}

/// The machine-wide work gate every control-mode child shares (the reference's "machine work
/// semaphore", sized by the control connection's negotiated `max_concurrent`): an admitted
/// data request waits here for a permit before it runs, and is never refused by it; each
/// child's own `max_concurrent` admission still applies on top.
#[derive(Debug, Clone)]
pub struct MachineWork {
    permits: Arc<Semaphore>,
    size: u32,
}

impl MachineWork {
    /// A gate letting `size` requests run at once across every child.
    pub fn new(size: NonZeroU32) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(
                usize::try_from(size.get()).unwrap_or(usize::MAX),
            )),
            size: size.get(),
        }
    }

    /// How many requests may run at once.
    pub const fn size(&self) -> u32 {
        self.size
    }

    /// Waits for a permit; `queued` counts this request while it waits (also when the wait
    /// is cancelled, the guard gives the count back).
    async fn enter(&self, queued: &Arc<AtomicU32>) -> Option<OwnedSemaphorePermit> {
        struct Waiting<'a>(&'a AtomicU32);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        queued.fetch_add(1, Ordering::Relaxed);
        let _waiting = Waiting(queued);
        // The semaphore is never closed, so this only fails if that changes; running
        // without a permit would then be the wrong failure, so the request is refused.
        Arc::clone(&self.permits).acquire_owned().await.ok()
    }
}

/// A request task's way through the machine work gate.
pub(super) struct Gate {
    pub(super) work: Option<MachineWork>,
    pub(super) queued: Arc<AtomicU32>,
}

impl Gate {
    /// `Some` when the request may run: at once without a gate, else once a permit is
    /// granted (the permit inside is held until the task ends). `None` only if the gate
    /// was closed, which nothing does.
    pub(super) async fn enter(self) -> Option<Option<OwnedSemaphorePermit>> {
        match &self.work {
            None => Some(None),
            Some(work) => work.enter(&self.queued).await.map(Some),
        }
    }
}

/// What every connection of this machine shares: the jail, the one audit chain and the
/// machine-wide command limits, and this connection's [`Role`].
#[derive(Debug, Clone)]
pub struct Host {
    /// The FILE_* jail (and the shell's cwd jail).
    pub jail: Arc<Jail>,
    /// The machine's audit chain.
    pub audit: Auditor,
    /// Concurrent commands and commands per minute, across every connection.
    pub commands: CommandLimiter,
    /// The local model backend, when the operator enabled it.
    pub llm: Option<LocalLlm>,
    /// Computer use, when the operator enabled it.
    pub computer: Option<Computer>,
    /// Whether HELLO lists serial ports, USB devices and GPIO chips (`enable_hardware`).
    pub hardware: bool,
    /// The kernel sandbox every command runs in (`shell_sandbox`), checked at start-up; `None`
    /// is `off`.
    pub sandbox: Option<Sandbox>,
    /// What this connection is for.
    pub role: Role,
}

impl Host {
    /// A host with `jail` that audits nothing, with the reference's command limits
    /// (10 concurrent, 60 a minute), for a direct data session.
    pub fn new(jail: Arc<Jail>) -> Self {
        Self {
            jail,
            audit: Auditor::disabled(),
            commands: CommandLimiter::new(
                usize::try_from(limits::DEFAULT_MAX_CONCURRENT_COMMANDS).unwrap_or(usize::MAX),
                usize::try_from(limits::DEFAULT_MAX_COMMANDS_PER_MINUTE).unwrap_or(usize::MAX),
            ),
            llm: None,
            computer: None,
            hardware: false,
            sandbox: None,
            role: Role::Data,
        }
    }

    /// The same host, serving LOCAL_LLM_COMPLETION through `llm`.
    #[must_use]
    pub fn with_llm(mut self, llm: LocalLlm) -> Self {
        self.llm = Some(llm);
        self
    }

    /// The same host, serving computer use through `computer`.
    #[must_use]
    pub fn with_computer(mut self, computer: Computer) -> Self {
        self.computer = Some(computer);
        self
    }

    /// The same host with other command limits.
    #[must_use]
    pub fn with_commands(mut self, commands: CommandLimiter) -> Self {
        self.commands = commands;
        self
    }

    /// The same host, running every command in `sandbox` (`None`: `off`).
    #[must_use]
    pub fn with_sandbox(mut self, sandbox: Option<Sandbox>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The sandbox mode commands run in.
    pub fn sandbox_mode(&self) -> SandboxMode {
        self.sandbox
            .as_ref()
            .map_or(SandboxMode::Off, Sandbox::mode)
    }

    /// The same host, auditing to `audit`.
    #[must_use]
    pub fn with_audit(mut self, audit: Auditor) -> Self {
        self.audit = audit;
        self
    }
}
