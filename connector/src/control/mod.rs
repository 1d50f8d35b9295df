//! Machine control mode: the state behind the control connection (browse tables, session
//! bindings with their signed root grants, live child runtimes) and its handlers for
//! DIRECTORY_LIST_REQUEST and ATTACH/ACTIVATE/RESTORE/DETACH_SESSION (PROTOCOL.md "Machine
//! control and per-chat roots"; shim-reference-behaviour.md section 5).
//!
//! The session loop admits control requests like any other and calls [`Control::handle`];
//! each runs on a blocking thread under one state lock, which also serialises the operations
//! of one session id.

mod browser;
mod children;

pub use browser::{
    BROWSE_TTL, BrowseFailure, Browser, MAX_BROWSE_SESSIONS, MAX_CURSORS_PER_BROWSE,
    MAX_REFS_PER_BROWSE,
};
pub use children::{Child, ChildTemplate};

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use local_core::machine::browse::{self, BrowseError};
use local_core::machine::root_grant::{Claims, GrantError, GrantKey};
use serde_json::{Value, json};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::audit::{Entry, details};
use crate::error::WireError;
use crate::protocol::{
    AckPayload, ActivateSessionPayload, AttachSessionPayload, DetachSessionPayload,
    DirectoryListRequestPayload, ErrorCode, Message, RestoreSessionPayload,
    SessionActivatedPayload, SessionAttachedPayload, SessionRestoredPayload, unix_now,
};
use crate::session::{ControlPlane, Host, MachineWork};
use crate::ws::Outcome;

/// At most this many child runtimes run at once.
pub const MAX_LIVE_CHILDREN: usize = 8;
/// At most this many session bindings are remembered; the least recently used one without
/// a live child is forgotten first.
pub const MAX_SESSION_BINDINGS: usize = 64;
/// The idle reaper's period (shortened when the idle timeout is shorter).
pub const REAP_INTERVAL: Duration = Duration::from_secs(30);
/// The reference's message when a grant's folder no longer matches.
const CHANGED: &str = "The selected directory changed after the grant was issued";

/// What the control plane needs from the daemon.
#[derive(Debug, Clone)]
pub struct ControlConfig {
    /// How children are started.
    pub template: ChildTemplate,
    /// This machine's id, bound into every grant.
    pub machine_id: String,
    /// The home directory, the first virtual root.
    pub home: Option<PathBuf>,
    /// A child without a data request for this long is stopped.
    pub idle_timeout: Duration,
    /// Told the number of live children whenever it may have changed (the status file).
    pub on_live: Option<LiveObserver>,
}

/// Receives the number of live children.
#[derive(Clone)]
pub struct LiveObserver(Arc<dyn Fn(usize) + Send + Sync>);

impl LiveObserver {
    /// An observer calling `tell` with each new count.
    pub fn new(tell: impl Fn(usize) + Send + Sync + 'static) -> Self {
        Self(Arc::new(tell))
    }
}

impl fmt::Debug for LiveObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LiveObserver")
    }
}

/// A session's attached root.
#[derive(Debug, Clone)]
struct Binding {
    root: PathBuf,
    fingerprint: String,
    revision: u64,
    used: u64,
}

#[derive(Debug, Default)]
struct State {
    browser: Browser,
    bindings: HashMap<String, Binding>,
    children: HashMap<String, Child>,
    clock: u64,
    /// The machine work gate of the current control connection, shared by its children.
    work: Option<MachineWork>,
    /// The live count last reported to the observer.
    reported: Option<usize>,
}

impl State {
    fn live(&self) -> usize {
        self.children
            .values()
            .filter(|child| child.is_live())
            .count()
    }

    fn live_child(&self, session_id: &str) -> Option<&Child> {
        self.children
            .get(session_id)
            .filter(|child| child.is_live())
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

#[derive(Debug)]
struct Inner {
    config: ControlConfig,
    machine: Host,
    key: GrantKey,
    runtime: Handle,
    state: Mutex<State>,
    /// Test seam: this many next child starts fail as if the root could not be opened.
    #[cfg(test)]
    failing_starts: std::sync::atomic::AtomicUsize,
}

/// The control plane; cheap to clone.
#[derive(Debug, Clone)]
pub struct Control {
    inner: Arc<Inner>,
}

/// A refusal: the wire code, its message and optional details.
struct Refused(ErrorCode, String, Option<Value>);

impl Refused {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self(code, message.into(), None)
    }
}

impl From<BrowseFailure> for Refused {
    fn from(failure: BrowseFailure) -> Self {
        Self::new(failure.code(), failure.to_string())
    }
}

impl From<GrantError> for Refused {
    fn from(err: GrantError) -> Self {
        Self::new(err.error_code(), err.to_string())
    }
}

impl Control {
    /// A control plane signing grants with `key`, starting children on the current runtime
    /// with `machine`'s limits and audit chain. Starts the idle reaper.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn new(config: ControlConfig, machine: Host, key: GrantKey) -> Self {
        let control = Self {
            inner: Arc::new(Inner {
                config,
                machine,
                key,
                runtime: Handle::current(),
                state: Mutex::new(State::default()),
                #[cfg(test)]
                failing_starts: std::sync::atomic::AtomicUsize::new(0),
            }),
        };
        let period = REAP_INTERVAL.min(
            control
                .inner
                .config
                .idle_timeout
                .max(Duration::from_millis(100)),
        );
        tokio::spawn(reap(Arc::downgrade(&control.inner), period));
        control
    }

    /// Stops every child and waits (briefly) for their connections to close.
    pub async fn stop_all(&self) {
        let stopping: Vec<JoinHandle<Outcome>> = {
            let mut state = self.inner.lock();
            let stopping = state
                .children
                .drain()
                .map(|(_, child)| child.stop())
                .collect();
            self.inner.report(&mut state);
            stopping
        };
        for task in stopping {
            let _ = tokio::time::timeout(Duration::from_secs(3), task).await;
        }
    }
}

impl ControlPlane for Control {
    fn connected(&self, max_concurrent: NonZeroU32) {
        let mut state = self.inner.lock();
        state.browser.reset();
        for (_, child) in state.children.drain() {
            drop(child.stop());
        }
        // The reference sizes the children's shared work semaphore by the control
        // connection's negotiated max_concurrent; a new connection may negotiate another.
        state.work = Some(MachineWork::new(max_concurrent));
        self.inner.report(&mut state);
    }

    fn handle(&self, message: Message) -> Pin<Box<dyn Future<Output = Message> + Send>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || inner.handle(message)).await {
                Ok(reply) => reply,
                Err(_) => error(Refused::new(
                    ErrorCode::InternalError,
                    "The operation failed unexpectedly.",
                )),
            }
        })
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn handle(&self, message: Message) -> Message {
        let reply = match message {
            Message::DirectoryListRequest(request) => self.list(&request),
            Message::AttachSession(request) => self.attach(&request),
            Message::ActivateSession(request) => self.activate(&request),
            Message::RestoreSession(request) => self.restore(&request),
            Message::DetachSession(request) => Ok(self.detach(&request)),
            other => Err(Refused::new(
                ErrorCode::FeatureNotSupported,
                format!("{} is not a control request.", other.message_type()),
            )),
        };
        self.report(&mut self.lock());
        reply.unwrap_or_else(error)
    }

    fn list(&self, request: &DirectoryListRequestPayload) -> Result<Message, Refused> {
        let listed = self.lock().browser.list(
            request.browse_id.as_deref(),
            request.directory_ref.as_deref(),
            request.cursor.as_deref(),
            self.config.home.as_deref(),
            SystemTime::now(),
        );
        match listed {
            Ok(page) => {
                // Metadata only: never entry names or references.
                let path = page.current.as_ref().map(|current| current.path.clone());
                self.audit(Entry::ok(
                    "DIRECTORY_LIST",
                    details([
                        ("browse_id", json!(page.browse_id)),
                        ("path", json!(path)),
                        ("entries_returned", json!(page.entries.len())),
                        ("truncated", json!(page.truncated)),
                    ]),
                ));
                Ok(Message::DirectoryListResponse(page))
            }
            Err(failure) => {
                self.audit(Entry::failed(
                    "DIRECTORY_LIST",
                    details([("browse_id", json!(request.browse_id))]),
                    failure.code().as_str(),
                ));
                Err(failure.into())
            }
        }
    }

    fn attach(&self, request: &AttachSessionPayload) -> Result<Message, Refused> {
        let session_id = &request.session_id;
        let mut state = self.lock();
        if state.live_child(session_id).is_some() {
            return Err(Refused::new(
                ErrorCode::SessionAlreadyActive,
                "The session is active; detach it before attaching another folder.",
            ));
        }
        let open = state.browser.take(
            &request.browse_id,
            &request.directory_ref,
            SystemTime::now(),
        )?;
        let previous = state.bindings.get(session_id).cloned();
        let revision = previous.as_ref().map_or(1, |binding| binding.revision + 1);
        let fingerprint = browse::fingerprint(&open.path, &open.identity);
        let root = open.path.to_string_lossy().into_owned();
        let grant = self.sign(session_id, &root, &fingerprint, revision);
        self.audit_strict(
            session_id,
            Entry::ok(
                "SESSION_ALLOWED_ROOT_SET",
                details([
                    (
                        "previous_allowed_root",
                        json!(previous.map(|binding| binding.root.to_string_lossy().into_owned())),
                    ),
                    ("allowed_root", json!(root)),
                    ("fingerprint", json!(fingerprint)),
                    ("revision", json!(revision)),
                ]),
            ),
        )?;
        let used = state.tick();
        bind(
            &mut state,
            session_id,
            Binding {
                root: open.path,
                fingerprint: fingerprint.clone(),
                revision,
                used,
            },
        );
        Ok(Message::SessionAttached(SessionAttachedPayload {
            session_id: session_id.clone(),
            allowed_root: root,
            fingerprint,
            revision,
            root_grant: grant,
        }))
    }

    fn activate(&self, request: &ActivateSessionPayload) -> Result<Message, Refused> {
        let session_id = &request.session_id;
        let mut state = self.lock();
        let Some(binding) = state.bindings.get(session_id).cloned() else {
            return Err(Refused::new(
                ErrorCode::SessionNotAttached,
                "No folder is attached to this session.",
            ));
        };
        if binding.revision != request.revision {
            return Err(Refused(
                ErrorCode::SessionRevisionMismatch,
                "The session's root revision differs.".to_owned(),
                Some(json!({ "current_revision": binding.revision })),
            ));
        }
        let root = binding.root.to_string_lossy().into_owned();
        if !unchanged(&binding.root, &binding.fingerprint) {
            self.audit_failed(
                session_id,
                "ACTIVATE_SESSION",
                &root,
                ErrorCode::RootGrantInvalid,
            );
            return Err(Refused::new(ErrorCode::RootGrantInvalid, CHANGED));
        }
        let started = state.live_child(session_id).is_none();
        if started {
            self.start_child(&mut state, session_id, &binding)?;
        }
        let used = state.tick();
        if let Some(binding) = state.bindings.get_mut(session_id) {
            binding.used = used;
        }
        let audited = self.audit_strict(
            session_id,
            Entry::ok(
                "ACTIVATE_SESSION",
                details([
                    ("allowed_root", json!(root)),
                    ("fingerprint", json!(binding.fingerprint)),
                    ("revision", json!(binding.revision)),
                ]),
            ),
        );
        // An activation nobody could audit is undone: the child it started stops.
        if let Err(refused) = audited {
            if started && let Some(child) = state.children.remove(session_id) {
                drop(child.stop());
            }
            return Err(refused);
        }
        Ok(Message::SessionActivated(SessionActivatedPayload {
            session_id: session_id.clone(),
            allowed_root: root,
            fingerprint: binding.fingerprint,
            revision: binding.revision,
        }))
    }

    fn restore(&self, request: &RestoreSessionPayload) -> Result<Message, Refused> {
        let session_id = &request.session_id;
        let claims = self
            .inner_verify(&request.root_grant, session_id)
            .inspect_err(|refused| {
                self.audit_failed(session_id, "RESTORE_SESSION", "", refused.0);
            })?;
        let root = PathBuf::from(&claims.allowed_root);
        let mut state = self.lock();
        if let Some(current) = state.bindings.get(session_id)
            && (current.revision > claims.revision
                || (current.revision == claims.revision
                    && current.fingerprint != claims.fingerprint))
        {
            return Err(Refused(
                ErrorCode::SessionRevisionMismatch,
                "A newer root is attached to this session.".to_owned(),
                Some(json!({ "current_revision": current.revision })),
            ));
        }
        let used = state.tick();
        let binding = Binding {
            root,
            fingerprint: claims.fingerprint.clone(),
            revision: claims.revision,
            used,
        };
        let keep = state.live_child(session_id).is_some_and(|child| {
            child.revision == binding.revision && child.fingerprint == binding.fingerprint
        });
        let previous_binding = state.bindings.get(session_id).cloned();
        // A live child serving another binding is stopped first, as the reference does, so
        // its slot counts for the new one.
        let previous_child = if keep {
            None
        } else {
            state.children.remove(session_id).map(|old| {
                let replaced = Binding {
                    root: old.root.clone(),
                    fingerprint: old.fingerprint.clone(),
                    revision: old.revision,
                    used,
                };
                drop(old.stop());
                replaced
            })
        };
        let restored = (|| {
            if !keep {
                self.start_child(&mut state, session_id, &binding)?;
            }
            bind(&mut state, session_id, binding);
            self.audit_strict(
                session_id,
                Entry::ok(
                    "RESTORE_SESSION",
                    details([
                        ("allowed_root", json!(claims.allowed_root)),
                        ("fingerprint", json!(claims.fingerprint)),
                        ("revision", json!(claims.revision)),
                    ]),
                ),
            )
        })();
        if let Err(refused) = restored {
            self.roll_back(
                &mut state,
                session_id,
                keep,
                previous_binding,
                previous_child,
            );
            return Err(refused);
        }
        Ok(Message::SessionRestored(SessionRestoredPayload {
            session_id: session_id.clone(),
            allowed_root: claims.allowed_root,
            fingerprint: claims.fingerprint,
            revision: claims.revision,
            root_grant: request.root_grant.clone(),
        }))
    }

    fn detach(&self, request: &DetachSessionPayload) -> Message {
        let session_id = &request.session_id;
        let mut state = self.lock();
        if let Some(child) = state.children.remove(session_id) {
            drop(child.stop());
        }
        let binding = state.bindings.remove(session_id);
        drop(state);
        self.audit_session(
            session_id,
            Entry::ok(
                "DETACH_SESSION",
                details([
                    (
                        "allowed_root",
                        json!(
                            binding
                                .as_ref()
                                .map(|b| b.root.to_string_lossy().into_owned())
                        ),
                    ),
                    ("revision", json!(binding.as_ref().map(|b| b.revision))),
                ]),
            ),
        );
        Message::Ack(AckPayload {
            ok: true,
            pid: None,
        })
    }

    /// Undoes a failed RESTORE_SESSION (the reference: "roll back and try to restart the
    /// previous child"): stops the child it started, puts the earlier binding back (or
    /// forgets the new one) and restarts the child it replaced, if any.
    fn roll_back(
        &self,
        state: &mut State,
        session_id: &str,
        kept: bool,
        previous_binding: Option<Binding>,
        previous_child: Option<Binding>,
    ) {
        if !kept && let Some(started) = state.children.remove(session_id) {
            drop(started.stop());
        }
        match previous_binding {
            Some(binding) => {
                state.bindings.insert(session_id.to_owned(), binding);
            }
            None => {
                state.bindings.remove(session_id);
            }
        }
        if let Some(previous) = previous_child
            && self.start_child(state, session_id, &previous).is_err()
        {
            tracing::warn!(
                session_id = %session_id,
                "a failed restore could not restart the session's previous child"
            );
        }
    }

    /// Tells the observer the live count when it changed since the last report; finished
    /// children (a fatal close ends one by itself) are forgotten first.
    fn report(&self, state: &mut State) {
        state.children.retain(|_, child| child.is_live());
        let live = state.children.len();
        if state.reported != Some(live) {
            state.reported = Some(live);
            if let Some(observer) = &self.config.on_live {
                (observer.0)(live);
            }
        }
    }

    /// Verifies a grant's signature and bindings, then its folder against the filesystem.
    fn inner_verify(&self, grant: &str, session_id: &str) -> Result<Claims, Refused> {
        let claims = self
            .key
            .verify(grant, session_id, &self.config.machine_id)?;
        let fresh = match browse::open_canonical(Path::new(&claims.allowed_root)) {
            Ok(open) => open,
            Err(BrowseError::Link) => {
                return Err(Refused::new(
                    ErrorCode::RootGrantInvalid,
                    "The selected directory cannot be a symbolic link.",
                ));
            }
            Err(BrowseError::Unavailable) => {
                return Err(Refused::new(ErrorCode::RootGrantInvalid, CHANGED));
            }
        };
        let same_path = fresh.path.to_string_lossy() == claims.allowed_root;
        // Grants the reference issued carry its weaker fingerprint (no birth time).
        let same_object = browse::fingerprint(&fresh.path, &fresh.identity) == claims.fingerprint
            || browse::legacy_fingerprint(&fresh.path, &fresh.identity) == claims.fingerprint;
        if same_path && same_object {
            Ok(claims)
        } else {
            Err(Refused::new(ErrorCode::RootGrantInvalid, CHANGED))
        }
    }

    fn start_child(
        &self,
        state: &mut State,
        session_id: &str,
        binding: &Binding,
    ) -> Result<(), Refused> {
        state.children.retain(|_, child| child.is_live());
        if state.live() >= MAX_LIVE_CHILDREN {
            return Err(Refused(
                ErrorCode::ShimOverloaded,
                format!(
                    "Active local-executor session limit reached ({MAX_LIVE_CHILDREN}); detach a session first."
                ),
                Some(json!({ "max_live_sessions": MAX_LIVE_CHILDREN })),
            ));
        }
        #[cfg(test)]
        if self
            .failing_starts
            .fetch_update(
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
                |n| n.checked_sub(1),
            )
            .is_ok()
        {
            return Err(Refused::new(ErrorCode::RootGrantInvalid, CHANGED));
        }
        let child = Child::start(
            &self.runtime,
            &self.config.template,
            &self.machine,
            state.work.clone(),
            session_id,
            &binding.root,
            binding.revision,
            binding.fingerprint.clone(),
        )
        .map_err(|_| Refused::new(ErrorCode::RootGrantInvalid, CHANGED))?;
        state.children.insert(session_id.to_owned(), child);
        Ok(())
    }

    fn sign(&self, session_id: &str, root: &str, fingerprint: &str, revision: u64) -> String {
        self.key.sign(&Claims {
            allowed_root: root.to_owned(),
            fingerprint: fingerprint.to_owned(),
            issued_at: unix_now(),
            machine_id: self.config.machine_id.clone(),
            revision,
            session_id: session_id.to_owned(),
        })
    }

    fn audit(&self, entry: Entry) {
        self.machine.audit.record(None, entry);
    }

    fn audit_session(&self, session_id: &str, entry: Entry) {
        self.machine
            .audit
            .for_session(session_id)
            .record(None, entry);
    }

    /// Control-plane records must be written: a binding nobody can audit is refused.
    fn audit_strict(&self, session_id: &str, entry: Entry) -> Result<(), Refused> {
        self.machine
            .audit
            .for_session(session_id)
            .record_strict(None, entry)
            .map_err(|_| {
                Refused::new(
                    ErrorCode::InternalError,
                    "The audit log could not be written.",
                )
            })
    }

    fn audit_failed(&self, session_id: &str, op: &'static str, root: &str, code: ErrorCode) {
        let root = (!root.is_empty()).then_some(root);
        self.audit_session(
            session_id,
            Entry::failed(op, details([("allowed_root", json!(root))]), code.as_str()),
        );
    }
}

/// Whether `root` is still the directory whose fingerprint is `fingerprint`.
fn unchanged(root: &Path, fingerprint: &str) -> bool {
    browse::open_strict(root).is_ok_and(|open| {
        browse::fingerprint(&open.path, &open.identity) == fingerprint
            || browse::legacy_fingerprint(&open.path, &open.identity) == fingerprint
    })
}

/// Remembers a binding, forgetting the least recently used one without a live child when
/// the table is full (there are always such: live children are far fewer than bindings).
fn bind(state: &mut State, session_id: &str, binding: Binding) {
    if !state.bindings.contains_key(session_id) && state.bindings.len() >= MAX_SESSION_BINDINGS {
        let oldest = state
            .bindings
            .iter()
            .filter(|(id, _)| state.live_child(id).is_none())
            .min_by_key(|(_, binding)| binding.used)
            .map(|(id, _)| id.clone());
        if let Some(id) = oldest {
            state.bindings.remove(&id);
        }
    }
    state.bindings.insert(session_id.to_owned(), binding);
}

fn error(Refused(code, message, details): Refused) -> Message {
    crate::error::reply(code, message, details)
}

/// Every `period`, stops children idle for longer than the timeout; their bindings stay.
async fn reap(inner: Weak<Inner>, period: Duration) {
    let mut timer = tokio::time::interval(period);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        timer.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let idle_timeout = inner.config.idle_timeout;
        let stale: Vec<(String, Duration, Child)> = {
            let mut state = inner.lock();
            let ids: Vec<String> = state
                .children
                .iter()
                .filter(|(_, child)| child.activity.idle() >= idle_timeout)
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| {
                    let child = state.children.remove(&id)?;
                    Some((id, child.activity.idle(), child))
                })
                .collect()
        };
        inner.report(&mut inner.lock());
        for (session_id, idle, child) in stale {
            let audit = inner.machine.audit.for_session(&session_id);
            audit
                .record_async(
                    None,
                    Entry::ok(
                        "IDLE_SESSION_DETACH",
                        details([("idle_seconds", json!(idle.as_secs_f64()))]),
                    ),
                )
                .await;
            tracing::info!(session_id = %session_id, "stopped an idle session; its binding stays");
            drop(child.stop());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use local_core::machine::jail::Jail;

    use super::*;
    use crate::commands::audit::test_dir::TempDir;
    use crate::link::Backoff;
    use crate::protocol::{Arch, Platform};
    use crate::session::SessionConfig;

    const MACHINE: &str = "machine-unit";
    const SESSION: &str = "chat-1";

    /// A control plane whose children dial a listener that never answers, so they stay live.
    async fn plane(listener: &tokio::net::TcpListener) -> Control {
        let endpoint = format!("ws://{}/ws/local-executor", listener.local_addr().unwrap());
        let config = ControlConfig {
            template: ChildTemplate {
                endpoint,
                token: None,
                oauth: None,
                backoff: Backoff::default(),
                session: SessionConfig::new("", MACHINE, "0.0.0", Platform::Linux, Arch::X86_64),
            },
            machine_id: MACHINE.to_owned(),
            home: None,
            idle_timeout: Duration::from_secs(600),
            on_live: None,
        };
        let host = Host::new(Arc::new(Jail::open(&std::env::temp_dir()).unwrap()));
        let control = Control::new(config, host, GrantKey::derive(&[7; 32]));
        control.connected(NonZeroU32::new(2).unwrap());
        control
    }

    /// A fresh folder, removed when the guard drops, and its canonical path.
    fn folder(tag: &str) -> (TempDir, PathBuf) {
        let dir = TempDir::new(&format!("control-{tag}"));
        #[allow(clippy::disallowed_methods, reason = "test set-up")]
        let path = std::fs::canonicalize(dir.path()).unwrap();
        (dir, path)
    }

    fn grant(inner: &Inner, root: &Path, revision: u64) -> String {
        let open = browse::open_strict(root).unwrap();
        let fingerprint = browse::fingerprint(&open.path, &open.identity);
        inner.sign(SESSION, &root.to_string_lossy(), &fingerprint, revision)
    }

    fn restore(inner: &Inner, root_grant: String) -> Result<Message, Refused> {
        inner.restore(&RestoreSessionPayload {
            session_id: SESSION.to_owned(),
            root_grant,
        })
    }

    fn served(inner: &Inner) -> Option<(PathBuf, u64)> {
        let state = inner.lock();
        state
            .live_child(SESSION)
            .map(|child| (child.root.clone(), child.revision))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_restore_rolls_back_and_restarts_the_previous_child() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let control = plane(&listener).await;
        let inner = &control.inner;
        let ((_first_dir, first), (_second_dir, second)) = (folder("first"), folder("second"));
        assert!(restore(inner, grant(inner, &first, 1)).is_ok());
        assert_eq!(served(inner), Some((first.clone(), 1)));

        // Replacing the live child with another binding fails when the new child starts:
        // the earlier binding comes back and its child runs again.
        inner.failing_starts.store(1, Ordering::SeqCst);
        let refused = restore(inner, grant(inner, &second, 2)).err().unwrap();
        assert_eq!(refused.0, ErrorCode::RootGrantInvalid);
        assert_eq!(served(inner), Some((first.clone(), 1)));
        assert_eq!(inner.lock().bindings[SESSION].revision, 1);
        assert_eq!(inner.lock().bindings[SESSION].root, first);

        // Without the fault the same grant replaces it.
        assert!(restore(inner, grant(inner, &second, 2)).is_ok());
        assert_eq!(served(inner), Some((second.clone(), 2)));

        // A failure with no child to restart forgets the binding it would have made.
        control.inner.lock().children.clear();
        inner.lock().bindings.clear();
        inner.failing_starts.store(1, Ordering::SeqCst);
        assert!(restore(inner, grant(inner, &first, 3)).is_err());
        assert!(inner.lock().bindings.is_empty());
        assert_eq!(served(inner), None);
        control.stop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn children_get_the_work_gate_of_the_current_control_connection() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let control = plane(&listener).await;
        assert_eq!(
            control.inner.lock().work.as_ref().map(MachineWork::size),
            Some(2)
        );
        // A reconnect negotiates again and sizes a new gate.
        control.connected(NonZeroU32::new(5).unwrap());
        assert_eq!(
            control.inner.lock().work.as_ref().map(MachineWork::size),
            Some(5)
        );
        control.stop_all().await;
    }

    fn binding(used: u64) -> Binding {
        Binding {
            root: PathBuf::from("/r"),
            fingerprint: "f".repeat(64),
            revision: 1,
            used,
        }
    }

    #[test]
    fn bindings_are_bounded_and_the_least_recently_used_is_forgotten() {
        let mut state = State::default();
        for i in 0..MAX_SESSION_BINDINGS {
            let used = state.tick();
            bind(&mut state, &format!("s-{i}"), binding(used));
        }
        assert_eq!(state.bindings.len(), MAX_SESSION_BINDINGS);
        // Re-binding a known session never evicts.
        let used = state.tick();
        bind(&mut state, "s-0", binding(used));
        assert_eq!(state.bindings.len(), MAX_SESSION_BINDINGS);
        assert!(state.bindings.contains_key("s-1"));
        let used = state.tick();
        bind(&mut state, "s-new", binding(used));
        assert_eq!(state.bindings.len(), MAX_SESSION_BINDINGS);
        // s-0 was used again, so s-1 is now the least recently used.
        assert!(state.bindings.contains_key("s-0"));
        assert!(!state.bindings.contains_key("s-1"));
        assert!(state.bindings.contains_key("s-new"));
    }
}
