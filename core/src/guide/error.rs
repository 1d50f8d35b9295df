//! The failures a caller of the local API can see, each with its exact message and kind.
//!
//! The `Display` text of each variant is the exact `detail` string of the reference; the edge
//! maps [`Error::kind`] to its transport once, with no catch-all arm.

use uuid::Uuid;

/// Why a provider's work failed, as the short code that follows `provider-` in diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderFailure {
    /// The provider was never started.
    NotStarted,
    /// The provider failed while starting.
    Startup,
    /// The provider refused the context it was given.
    InvalidContext,
    /// The provider produced a result it could not use.
    InvalidResult,
    /// The provider failed while running.
    Runtime,
}

impl ProviderFailure {
    /// The code's wire spelling.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NotStarted => "not_started",
            Self::Startup => "startup",
            Self::InvalidContext => "invalid_context",
            Self::InvalidResult => "invalid_result",
            Self::Runtime => "runtime",
        }
    }
}

/// Which action denial a preview met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// A high-risk tool: it would need a step-up that does not exist here.
    StepUpRequired,
    /// An unknown or blocked tool.
    Denied,
}

impl Denial {
    /// The `status` string of the 403 body.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::StepUpRequired => "STEP_UP_REQUIRED",
            Self::Denied => "DENIED",
        }
    }
}

/// How the provider's part of a guidance request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuidanceFailure {
    /// The provider ran out of time, or there was no time left to start it.
    #[error("Guidance timed out")]
    Timeout,
    /// The provider reported one of its own failure codes.
    #[error("Guidance provider failed")]
    Provider(ProviderFailure),
    /// The result, its target or its shape did not validate.
    #[error("Invalid guidance result")]
    InvalidResult,
    /// The provider failed in a way it did not classify.
    #[error("Guidance provider failed")]
    Unexpected {
        /// A sanitised type name (such as `RuntimeError`), never the failure's message.
        error_type: String,
    },
}

impl GuidanceFailure {
    /// The sanitised code a client may see (`x-msguide-error-code`), when there is one.
    #[must_use]
    pub fn error_code(&self) -> Option<String> {
        match self {
            Self::Timeout => None,
            Self::Provider(failure) => Some(format!("provider-{}", failure.as_str())),
            Self::InvalidResult => Some("guidance-invalid-result".to_owned()),
            Self::Unexpected { .. } => Some("guidance-unexpected".to_owned()),
        }
    }
}

/// Every failure of an operation, with the reference's exact message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The resource does not exist or belongs to another owner.
    #[error("Unknown resource")]
    UnknownResource,
    /// The resource exists but its time has passed.
    #[error("Resource expired")]
    ResourceExpired,
    /// A store is full even after its expired records were purged.
    #[error("Local state capacity reached; retry after expiry")]
    CapacityReached,
    /// Guidance was requested without explicit consent.
    #[error("Explicit capture consent is required")]
    ConsentRequired,
    /// An observation (or assist context) is too old or too far in the future.
    #[error("Observation must be at most 60 seconds old and at most 5 seconds in the future")]
    StaleObservation,
    /// The provider's part failed; the client may quote the correlation id.
    #[error("{failure}")]
    Guidance {
        /// The request's id, which the client may quote.
        correlation_id: Uuid,
        /// What failed.
        failure: GuidanceFailure,
    },
    /// The assist context names another session.
    #[error("Context session does not match request")]
    ContextSessionMismatch,
    /// The assist context is not public sample data.
    #[error("Only synthetic/public demo context is supported")]
    NonPublicContext,
    /// The tool may not be previewed at all.
    #[error("External actions are disabled")]
    ActionDenied(Denial),
    /// The tool's parameters do not fit its schema.
    #[error("Invalid mock tool parameters")]
    InvalidToolParameters,
    /// Confirm was called twice for one preview.
    #[error("Preview already confirmed or consumed")]
    AlreadyConfirmed,
    /// The grant is missing, wrong, or belongs to another preview.
    #[error("Invalid execution grant")]
    InvalidGrant,
    /// The grant was used before.
    #[error("Grant already consumed")]
    GrantConsumed,
    /// The grant's time has passed.
    #[error("Grant expired")]
    GrantExpired,
    /// The previewed tool is no longer low or medium risk.
    #[error("Tool no longer permitted")]
    ToolNoLongerPermitted,
    /// The simulator already runs as many jobs as it may.
    #[error("Too many active mock jobs")]
    TooManyActiveJobs,
    /// The audit route was called while the audit is off.
    #[error("Audit is disabled")]
    AuditDisabled,
    /// The camera-recovery branch refused the request; the sentence says why.
    #[error("{0}")]
    CameraRecovery(#[from] CameraRefusal),
}

/// The class of an [`Error`], which is what a transport maps to its own status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Unknown or not owned.
    NotFound,
    /// Past its expiry.
    Gone,
    /// Refused by policy or consent.
    Forbidden,
    /// Already used.
    Conflict,
    /// A rule about the request's content.
    Unprocessable,
    /// A bound of the local state.
    TooManyRequests,
    /// The provider's result or failure.
    BadGateway,
    /// The provider's deadline.
    GatewayTimeout,
}

impl Error {
    /// The class of this failure.
    #[must_use]
    pub const fn kind(&self) -> ErrorKind {
        match self {
            Self::UnknownResource | Self::AuditDisabled => ErrorKind::NotFound,
            Self::ResourceExpired | Self::GrantExpired => ErrorKind::Gone,
            Self::ConsentRequired
            | Self::NonPublicContext
            | Self::ActionDenied(_)
            | Self::InvalidGrant
            | Self::ToolNoLongerPermitted => ErrorKind::Forbidden,
            Self::AlreadyConfirmed | Self::GrantConsumed => ErrorKind::Conflict,
            Self::StaleObservation
            | Self::ContextSessionMismatch
            | Self::InvalidToolParameters
            | Self::CameraRecovery(_) => ErrorKind::Unprocessable,
            Self::CapacityReached | Self::TooManyActiveJobs => ErrorKind::TooManyRequests,
            Self::Guidance {
                failure: GuidanceFailure::Timeout,
                ..
            } => ErrorKind::GatewayTimeout,
            Self::Guidance {
                failure:
                    GuidanceFailure::Provider(_)
                    | GuidanceFailure::InvalidResult
                    | GuidanceFailure::Unexpected { .. },
                ..
            } => ErrorKind::BadGateway,
        }
    }

    /// The correlation id and failure of a guidance request whose provider part failed.
    #[must_use]
    pub const fn guidance_failure(&self) -> Option<(Uuid, &GuidanceFailure)> {
        if let Self::Guidance {
            correlation_id,
            failure,
        } = self
        {
            Some((*correlation_id, failure))
        } else {
            None
        }
    }
}

/// Why the camera branch refused a request (422, the sentence is the `detail`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CameraRefusal {
    /// `task` or `planSegments: true` came with `cameraRecovery`.
    #[error("Generic task context cannot authorize camera recovery")]
    TaskContext,
    /// The verification names another session, observation or window.
    #[error(
        "Camera verification must name this request's session, observation and window; send the verifier's report for this capture"
    )]
    VerificationMismatch,
    /// The verification was made more than 5 s away from the observation.
    #[error("Camera verification must be captured with the same observation")]
    VerificationNotWithObservation,
    /// The observation was captured before one this session already sent.
    #[error(
        "Camera recovery observations must arrive in capture order: this one was captured before the last one; send a fresh capture"
    )]
    OutOfOrder,
    /// The observation reuses an id this session already sent for different content.
    #[error(
        "This observation id was already used for a different capture in this session; give every capture a new id"
    )]
    ObservationIdReused,
    /// An element carries a `tgt.` id that was not issued for it here.
    #[error(
        "An element carries a tgt. target id that was not issued for it in this observation and session; send the element without that id"
    )]
    ForgedTarget,
    /// The verification came before Teams was back with the permission on.
    #[error(
        "Camera verification is premature: send it only with the Teams observation that was answered return_to_teams"
    )]
    PrematureVerification,
    /// The verification says the camera runs while the observation shows it off.
    #[error(
        "Camera verification conflicts with the observation: Teams shows the camera off; turn the camera on in Teams and capture again"
    )]
    ConflictingVerification,
    /// A verification was sent with the live probe profile, which never completes.
    #[error("The live probe profile never completes camera recovery; send no verification with it")]
    LiveProbeVerification,
    /// The pinned profile's verification did not say how the camera was restarted.
    #[error(
        "Camera verification for the pinned profile must say how the camera was reinitialized (reinitializationMethod)"
    )]
    ReinitializationMethodMissing,
}
