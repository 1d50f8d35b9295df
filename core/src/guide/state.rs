//! [`LocalState`]: the bounded, volatile state all operations of the local API share.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use time::OffsetDateTime;

use crate::{
    clock::{Clock, SystemClock},
    guide::actions::Actions,
    guide::audit_ring::AuditLog,
    guide::diagnostics::{DiagnosticLog, Field},
    guide::guidance::{demo::DemoProvider, provider::GuidanceProvider},
    guide::sessions::Session,
    guide::store::Store,
    limits::MAX_RECORDS,
    secret::Redacted,
};

/// How [`LocalState`] is put together; the binary builds it once from its configuration.
#[derive(Debug)]
pub struct LocalConfig {
    /// Whether the audit ring records.
    pub audit_enabled: bool,
    /// Where diagnostics go, if anywhere.
    pub diagnostic_log: Option<DiagnosticLog>,
    /// Who answers guidance requests.
    pub provider: Arc<dyn GuidanceProvider>,
    /// Where "now" comes from.
    pub clock: Arc<dyn Clock>,
    /// Records each store may hold (1..=1000).
    pub max_records: usize,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            audit_enabled: false,
            diagnostic_log: None,
            provider: Arc::new(DemoProvider),
            clock: Arc::new(SystemClock),
            max_records: MAX_RECORDS,
        }
    }
}

/// Sessions, previews, grants, jobs, audit and diagnostics: everything is in memory and bounded,
/// and a restart forgets it.
#[derive(Debug)]
pub struct LocalState {
    pub(crate) clock: Arc<dyn Clock>,
    sessions: Mutex<Store<Session>>,
    pub(crate) actions: Arc<Actions>,
    pub(crate) audit: AuditLog,
    diagnostics: Option<DiagnosticLog>,
    pub(crate) provider: Arc<dyn GuidanceProvider>,
    /// The key of the camera branch's `tgt.` target ids, made at start-up and never shown.
    camera_key: Redacted<[u8; 32]>,
}

impl LocalState {
    /// Builds the state.
    #[must_use]
    pub fn new(config: LocalConfig) -> Self {
        let state = Self {
            sessions: Mutex::new(Store::new(config.max_records)),
            actions: Arc::new(Actions::new(config.max_records, Arc::clone(&config.clock))),
            clock: config.clock,
            audit: AuditLog::new(config.audit_enabled),
            diagnostics: config.diagnostic_log,
            provider: config.provider,
            camera_key: Redacted::new(rand::random()),
        };
        state.diagnose(
            "backend_starting",
            None,
            &[("provider", Field::Word(state.provider.name()))],
        );
        state
    }

    /// The current time by this state's clock.
    #[must_use]
    pub fn now(&self) -> OffsetDateTime {
        self.clock.now()
    }

    /// The configured provider's name and mode.
    #[must_use]
    pub fn provider(&self) -> &dyn GuidanceProvider {
        self.provider.as_ref()
    }

    /// The audit ring.
    #[must_use]
    pub const fn audit(&self) -> &AuditLog {
        &self.audit
    }

    pub(crate) fn camera_key(&self) -> &[u8] {
        self.camera_key.expose()
    }

    pub(crate) fn sessions(&self) -> MutexGuard<'_, Store<Session>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes a diagnostic event when a diagnostic log is configured.
    pub fn diagnose(
        &self,
        event: &'static str,
        correlation_id: Option<&str>,
        fields: &[(&'static str, Field)],
    ) {
        if let Some(log) = &self.diagnostics {
            log.write(self.now(), event, correlation_id, fields);
        }
    }

    /// Whether events are written anywhere, so a caller can skip assembling them.
    pub(crate) const fn diagnosing(&self) -> bool {
        self.diagnostics.is_some()
    }

    /// Marks the service as serving.
    pub fn started(&self) {
        self.diagnose(
            "backend_started",
            None,
            &[("provider", Field::Word(self.provider.name()))],
        );
    }

    /// Cancels every job and forgets all state, as the reference does on shutdown.
    pub fn shutdown(&self) {
        self.diagnose("backend_stopping", None, &[]);
        self.actions.shutdown();
        self.sessions().clear();
        self.audit.clear();
    }
}
