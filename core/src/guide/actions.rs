//! Simulated actions: preview by risk tier, a single-use grant, and a 250 ms mock job.
//!
//! Nothing here touches the machine. The grant token is shown once and stored only as its
//! SHA-256 digest; consuming it and starting the job happen under one lock, so two racing
//! executes with the same token give exactly one job.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    Error, LocalState,
    clock::{Clock, after, whole_seconds_until},
    guide::error::Denial,
    guide::guidance::demo::DEMO_APPLICATION,
    guide::store::{Expiring, Store, parse_id},
    limits::{
        GRANT_TOKEN_BYTES, JOB_LIFETIME, JOB_RUN_TIME, MAX_ACTIVE_JOBS, MAX_DESCRIPTION_CHARS,
        MAX_LABEL_CHARS, PREVIEW_LIFETIME,
    },
    secret::ct_eq,
};

/// What every preview and job says about its effects.
pub const EFFECTS: &str = "Simulation only; no external effects.";
/// The message of a finished mock job.
pub const JOB_MESSAGE: &str = "Simulation completed; no external action was performed.";

/// The risk tier of a tool name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Risk {
    /// Read-only (`view_logs`).
    Low,
    /// Creates something (`create_work_item`).
    Medium,
    /// Needs a step-up, which does not exist: refused with 403.
    High,
    /// Unknown or forbidden: refused.
    Blocked,
}

impl Risk {
    /// The tier of a tool; anything unknown is blocked.
    #[must_use]
    pub fn of(tool: &str) -> Self {
        match tool {
            "view_logs" => Self::Low,
            "create_work_item" => Self::Medium,
            "modify_service_config" | "delete_personal_data" => Self::High,
            _ => Self::Blocked,
        }
    }

    /// The wire spelling of a permitted tier.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Blocked => "blocked",
        }
    }

    const fn permitted(self) -> bool {
        matches!(self, Self::Low | Self::Medium)
    }
}

/// A job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    /// Accepted, not started.
    Pending,
    /// Being simulated.
    Running,
    /// Simulated to the end.
    Success,
    /// Ended without success (part of the contract; the simulator never fails).
    Failed,
    /// Cancelled by its owner before it finished.
    Cancelled,
}

impl JobStatus {
    /// The wire spelling.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Success => "success",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    const fn is_active(self) -> bool {
        matches!(self, Self::Pending | Self::Running)
    }
}

#[derive(Debug)]
struct Grant {
    digest: [u8; 32],
    expires_at: OffsetDateTime,
    consumed: bool,
}

#[derive(Debug)]
struct Preview {
    owner: String,
    expires_at: OffsetDateTime,
    tool: String,
    /// The parameters as canonical JSON (sorted keys, compact); never changed after preview.
    canonical_parameters: String,
    grant: Option<Grant>,
}

impl Expiring for Preview {
    fn owner(&self) -> &str {
        &self.owner
    }
    fn expires_at(&self) -> OffsetDateTime {
        self.expires_at
    }
}

#[derive(Debug)]
struct Job {
    owner: String,
    expires_at: OffsetDateTime,
    tool: String,
    status: JobStatus,
    task: Option<tokio::task::AbortHandle>,
}

impl Expiring for Job {
    fn owner(&self) -> &str {
        &self.owner
    }
    fn expires_at(&self) -> OffsetDateTime {
        self.expires_at
    }
}

/// A stored preview, as the caller sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviewView {
    /// The id to confirm it by.
    pub preview_id: Uuid,
    /// The tool it would run.
    pub tool: String,
    /// The normalised parameters it would run with.
    pub parameters: Map<String, Value>,
    /// The tool's risk tier.
    pub risk: Risk,
    /// When it can no longer be confirmed.
    pub expires_at: OffsetDateTime,
}

/// A freshly issued grant: the only time its token exists outside the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantView {
    /// The one-use token that executes the preview.
    pub token: String,
    /// Whole seconds until it expires.
    pub expires_in: u64,
    /// When it expires.
    pub expires_at: OffsetDateTime,
}

/// A job, as the caller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobView {
    /// The id to poll or cancel it by.
    pub job_id: Uuid,
    /// Its state.
    pub status: JobStatus,
    /// The tool of a successful job (its result names it).
    pub succeeded_tool: Option<String>,
}

impl JobView {
    /// 100 once the job succeeded, else 0.
    #[must_use]
    pub const fn progress(&self) -> u8 {
        if matches!(self.status, JobStatus::Success) {
            100
        } else {
            0
        }
    }
}

#[derive(Debug)]
struct Tables {
    previews: Store<Preview>,
    jobs: Store<Job>,
}

/// The previews, grants and jobs of the simulator, behind one lock.
#[derive(Debug)]
pub(crate) struct Actions {
    tables: Mutex<Tables>,
    clock: Arc<dyn Clock>,
}

/// Checks a tool's parameters against its schema and fills the defaults.
pub fn normalise_parameters(
    tool: &str,
    parameters: &Map<String, Value>,
) -> Result<Map<String, Value>, Error> {
    let text = |key: &str, min: usize, max: usize, default: Option<&str>| -> Result<Value, Error> {
        match parameters.get(key) {
            None => default.map(Value::from).ok_or(Error::InvalidToolParameters),
            Some(Value::String(s)) if (min..=max).contains(&s.chars().count()) => {
                Ok(Value::from(s.as_str()))
            }
            Some(_) => Err(Error::InvalidToolParameters),
        }
    };
    let allowed: &[&str] = match tool {
        "create_work_item" => &["title", "description"],
        "view_logs" => &["application"],
        _ => return Err(Error::InvalidToolParameters),
    };
    if parameters.keys().any(|k| !allowed.contains(&k.as_str())) {
        return Err(Error::InvalidToolParameters);
    }
    let mut normalised = Map::new();
    if tool == "create_work_item" {
        normalised.insert("title".to_owned(), text("title", 1, MAX_LABEL_CHARS, None)?);
        normalised.insert(
            "description".to_owned(),
            text("description", 0, MAX_DESCRIPTION_CHARS, Some(""))?,
        );
    } else {
        normalised.insert(
            "application".to_owned(),
            text("application", 1, MAX_LABEL_CHARS, Some(DEMO_APPLICATION))?,
        );
    }
    Ok(normalised)
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Actions {
    pub(crate) fn new(capacity: usize, clock: Arc<dyn Clock>) -> Self {
        Self {
            tables: Mutex::new(Tables {
                previews: Store::new(capacity),
                jobs: Store::new(capacity),
            }),
            clock,
        }
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn view(job_id: Uuid, job: &Job) -> JobView {
        JobView {
            job_id,
            status: job.status,
            succeeded_tool: (job.status == JobStatus::Success).then(|| job.tool.clone()),
        }
    }

    /// The mock job: running at once, success after [`JOB_RUN_TIME`], unless cancelled first.
    async fn run_job(self: Arc<Self>, job_id: Uuid) {
        self.set_status(job_id, JobStatus::Pending, JobStatus::Running);
        tokio::time::sleep(JOB_RUN_TIME).await;
        self.set_status(job_id, JobStatus::Running, JobStatus::Success);
    }

    fn set_status(&self, job_id: Uuid, from: JobStatus, to: JobStatus) {
        if let Some(job) = self
            .tables()
            .jobs
            .get_mut(job_id)
            .filter(|job| job.status == from)
        {
            job.status = to;
        }
    }

    pub(crate) fn shutdown(&self) {
        let mut tables = self.tables();
        for job in tables.jobs.values_mut() {
            if let Some(task) = job.task.take() {
                task.abort();
            }
        }
        tables.jobs.clear();
        tables.previews.clear();
    }
}

impl LocalState {
    /// Validates and stores a preview of a low- or medium-risk mock tool.
    pub fn preview_action(
        &self,
        owner: &str,
        tool: &str,
        parameters: &Map<String, Value>,
    ) -> Result<PreviewView, Error> {
        let now = self.now();
        let risk = Risk::of(tool);
        let denial = match risk {
            Risk::High => Some(Denial::StepUpRequired),
            Risk::Blocked => Some(Denial::Denied),
            Risk::Low | Risk::Medium => None,
        };
        if let Some(denial) = denial {
            self.audit
                .record(crate::secret::new_id().to_string(), denial.as_str(), now);
            return Err(Error::ActionDenied(denial));
        }
        let parameters = normalise_parameters(tool, parameters)?;
        let mut tables = self.actions.tables();
        tables.previews.make_room(now)?;
        let preview_id = crate::secret::new_id();
        let expires_at = after(now, PREVIEW_LIFETIME);
        // serde_json's map is ordered by key, so this is the canonical sorted, compact form.
        let canonical_parameters = Value::Object(parameters.clone()).to_string();
        tables.previews.insert(
            preview_id,
            Preview {
                owner: owner.to_owned(),
                expires_at,
                tool: tool.to_owned(),
                canonical_parameters,
                grant: None,
            },
        );
        drop(tables);
        self.audit
            .record(preview_id.to_string(), "preview_created", now);
        Ok(PreviewView {
            preview_id,
            tool: tool.to_owned(),
            parameters,
            risk,
            expires_at,
        })
    }

    /// The stored, canonical parameters of a preview (what execute will use).
    pub fn preview_parameters(&self, owner: &str, preview_id: &str) -> Result<String, Error> {
        let id = parse_id(preview_id)?;
        let tables = self.actions.tables();
        Ok(tables
            .previews
            .owned(id, owner, self.now())?
            .canonical_parameters
            .clone())
    }

    /// Issues the one grant a preview ever gets.
    pub fn confirm_action(&self, owner: &str, preview_id: &str) -> Result<GrantView, Error> {
        let id = parse_id(preview_id)?;
        let now = self.now();
        let mut tables = self.actions.tables();
        let preview = tables.previews.owned_mut(id, owner, now)?;
        if preview.grant.is_some() {
            return Err(Error::AlreadyConfirmed);
        }
        let mut bytes = [0u8; GRANT_TOKEN_BYTES];
        rand::fill(&mut bytes);
        let token = URL_SAFE_NO_PAD.encode(bytes);
        let expires_at = preview.expires_at.min(after(now, PREVIEW_LIFETIME));
        preview.grant = Some(Grant {
            digest: digest(&token),
            expires_at,
            consumed: false,
        });
        drop(tables);
        self.audit.record(id.to_string(), "confirmed", now);
        Ok(GrantView {
            token,
            expires_in: whole_seconds_until(now, expires_at),
            expires_at,
        })
    }

    /// Consumes a grant and starts the mock job, in the reference's check order. The job runs
    /// on the current Tokio runtime, so this must be called from within one.
    pub fn execute_action(
        &self,
        owner: &str,
        preview_id: &str,
        grant_token: &str,
    ) -> Result<JobView, Error> {
        let id = parse_id(preview_id)?;
        let now = self.now();
        let mut tables = self.actions.tables();
        let preview = tables.previews.owned(id, owner, now)?;
        let grant = preview
            .grant
            .as_ref()
            .filter(|g| ct_eq(&g.digest, &digest(grant_token)))
            .ok_or(Error::InvalidGrant)?;
        if grant.consumed {
            return Err(Error::GrantConsumed);
        }
        if grant.expires_at <= now {
            return Err(Error::GrantExpired);
        }
        let tool = preview.tool.clone();
        if !Risk::of(&tool).permitted() {
            return Err(Error::ToolNoLongerPermitted);
        }
        tables.jobs.make_room(now)?;
        if tables
            .jobs
            .values()
            .filter(|job| job.status.is_active())
            .count()
            >= MAX_ACTIVE_JOBS
        {
            return Err(Error::TooManyActiveJobs);
        }
        if let Some(grant) = tables.previews.get_mut(id).and_then(|p| p.grant.as_mut()) {
            grant.consumed = true;
        }
        let job_id = crate::secret::new_id();
        let task = tokio::spawn(Arc::clone(&self.actions).run_job(job_id));
        let job = Job {
            owner: owner.to_owned(),
            expires_at: after(now, JOB_LIFETIME),
            tool,
            status: JobStatus::Pending,
            task: Some(task.abort_handle()),
        };
        let view = Actions::view(job_id, &job);
        tables.jobs.insert(job_id, job);
        drop(tables);
        self.audit
            .record(id.to_string(), "mock_execution_started", now);
        Ok(view)
    }

    /// Reads a job.
    pub fn job(&self, owner: &str, job_id: &str) -> Result<JobView, Error> {
        let id = parse_id(job_id)?;
        let tables = self.actions.tables();
        let job = tables.jobs.owned(id, owner, self.actions.clock.now())?;
        Ok(Actions::view(id, job))
    }

    /// Cancels a pending or running job; a finished job is returned unchanged.
    pub fn cancel_job(&self, owner: &str, job_id: &str) -> Result<JobView, Error> {
        let id = parse_id(job_id)?;
        let now = self.now();
        let mut tables = self.actions.tables();
        let job = tables.jobs.owned_mut(id, owner, now)?;
        if job.status.is_active() {
            job.status = JobStatus::Cancelled;
            if let Some(task) = job.task.take() {
                task.abort();
            }
        }
        let view = Actions::view(id, job);
        drop(tables);
        self.audit.record(
            id.to_string(),
            format!("cancel_{}", view.status.as_str()),
            now,
        );
        Ok(view)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(json: &str) -> Map<String, Value> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn parameter_schemas() {
        let work = normalise_parameters("create_work_item", &params(r#"{"title":"T"}"#)).unwrap();
        assert_eq!(
            Value::Object(work).to_string(),
            r#"{"description":"","title":"T"}"#
        );
        let logs = normalise_parameters("view_logs", &params("{}")).unwrap();
        assert_eq!(logs["application"], "MSGuide Demo");
        for bad in [
            r"{}",
            r#"{"title":""}"#,
            r#"{"title":"T","command":"rm"}"#,
            r#"{"title":5}"#,
            r#"{"title":"T","description":null}"#,
        ] {
            assert_eq!(
                normalise_parameters("create_work_item", &params(bad)),
                Err(Error::InvalidToolParameters),
                "{bad}"
            );
        }
        let title_256 = format!(r#"{{"title":"{}"}}"#, "a".repeat(256));
        assert!(normalise_parameters("create_work_item", &params(&title_256)).is_ok());
        let title_257 = format!(r#"{{"title":"{}"}}"#, "a".repeat(257));
        assert_eq!(
            normalise_parameters("create_work_item", &params(&title_257)),
            Err(Error::InvalidToolParameters)
        );
        let description_4000 = format!(r#"{{"title":"T","description":"{}"}}"#, "a".repeat(4000));
        assert!(normalise_parameters("create_work_item", &params(&description_4000)).is_ok());
        let description_4001 = format!(r#"{{"title":"T","description":"{}"}}"#, "a".repeat(4001));
        assert_eq!(
            normalise_parameters("create_work_item", &params(&description_4001)),
            Err(Error::InvalidToolParameters)
        );
    }

    #[test]
    fn risk_tiers() {
        assert_eq!(Risk::of("view_logs"), Risk::Low);
        assert_eq!(Risk::of("create_work_item"), Risk::Medium);
        assert_eq!(Risk::of("delete_personal_data"), Risk::High);
        assert_eq!(Risk::of("deploy_production"), Risk::Blocked);
    }
}
