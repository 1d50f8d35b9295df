//! Child runtimes: one in-process data connection per activated session, jailed to the
//! attached folder, sharing the machine's command limits and audit chain
//! (shim-reference-behaviour.md section 5, "Children").

use std::path::{Path, PathBuf};
use std::sync::Arc;

use local_core::machine::jail::Jail;
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::auth::Credentials;
use crate::link::{Backoff, Token};
use crate::session::{Activity, Host, MachineWork, Role, SessionConfig};
use crate::ws::{DataConnection, Outcome, Shutdown, run_data_connection};

/// What a child is started from: the control connection's configuration, copied.
#[derive(Debug, Clone)]
pub struct ChildTemplate {
    /// `{platform}/ws/local-executor`; a child dials `{endpoint}/{session_id}`.
    pub endpoint: String,
    /// The bearer token, if any.
    pub token: Option<Token>,
    /// The stored OAuth tokens when no token is configured, shared with the control
    /// connection so concurrent 401s refresh once.
    pub oauth: Option<Credentials>,
    /// Reconnect delays.
    pub backoff: Backoff,
    /// The local policy; each child gets a deep copy with its own session id.
    pub session: SessionConfig,
}

/// One live child runtime.
#[derive(Debug)]
pub struct Child {
    /// The root it is jailed to.
    pub root: PathBuf,
    /// The binding revision it serves.
    pub revision: u64,
    /// The fingerprint of the root it serves.
    pub fingerprint: String,
    /// Touched by each data request, read by the idle reaper.
    pub activity: Activity,
    stop: watch::Sender<bool>,
    task: JoinHandle<Outcome>,
}

impl Child {
    /// Starts a child for `session_id` jailed to `root` on `runtime`, its requests waiting
    /// on the machine-wide `work` gate.
    ///
    /// # Errors
    /// The root cannot be opened as a jail.
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site, each argument a distinct part of the child"
    )]
    pub fn start(
        runtime: &Handle,
        template: &ChildTemplate,
        machine: &Host,
        work: Option<MachineWork>,
        session_id: &str,
        root: &Path,
        revision: u64,
        fingerprint: String,
    ) -> Result<Self, String> {
        let jail = Jail::open(root).map_err(|err| err.to_string())?;
        let activity = Activity::default();
        let host = Host {
            jail: Arc::new(jail),
            audit: machine.audit.for_session(session_id),
            // Clones share the machine-wide counters.
            commands: machine.commands.clone(),
            llm: machine.llm.clone(),
            computer: machine.computer.clone(),
            hardware: machine.hardware,
            // The machine's mode, over this child's own root.
            sandbox: machine.sandbox.clone(),
            role: Role::Child {
                activity: activity.clone(),
                work,
            },
        };
        let mut session = template.session.clone();
        session.session_id = session_id.to_owned();
        let connection = DataConnection {
            url: format!("{}/{session_id}", template.endpoint),
            token: template.token.clone(),
            oauth: template.oauth.clone(),
            session,
            backoff: template.backoff,
            observer: None,
        };
        let (stop, shutdown) = Shutdown::new();
        let task = runtime.spawn(run_data_connection(connection, host, shutdown));
        Ok(Self {
            root: root.to_path_buf(),
            revision,
            fingerprint,
            activity,
            stop,
            task,
        })
    }

    /// Whether its connection still runs (it ends by itself on a fatal close).
    pub fn is_live(&self) -> bool {
        !self.task.is_finished()
    }

    /// Asks it to close its connection (1001) and end; does not wait.
    pub fn stop(self) -> JoinHandle<Outcome> {
        let _ = self.stop.send(true);
        self.task
    }
}
