//! The camera-recovery branch of guidance (reference §14): a deterministic engine that walks a
//! Teams camera-permission scenario from what an observation shows, never through a provider.
//!
//! - `fixture`: the element set each profile recognises (one place; docs/api.md has it as a table).
//! - `evidence`: the predicates, ranking an exact automation id over an exact label.
//! - `engine`: the state machine, pure: observation + session record in, one step out.
//! - `record`: the volatile per-session record (capture order, observation ids, progress).
//! - `binding`: the HMAC-derived `tgt.` target ids bound to session, observation, index, element.
//!
//! [`LocalState::camera_recovery`] runs one request against the session's record.

mod binding;
mod engine;
mod evidence;
pub mod fixture;
pub(crate) mod record;

use time::OffsetDateTime;

use self::{
    binding::TargetKey,
    engine::{Facts, evaluate},
};
use crate::{
    Error, LocalState,
    guide::error::{CameraRefusal, GuidanceFailure},
    guide::guidance::{
        check_freshness,
        model::{GuidanceResult, GuidanceStatus, Mode, Observation, Target},
        validate::result_is_valid,
    },
    limits::MAX_OBSERVATION_SKEW,
};

pub use self::binding::TARGET_PREFIX;

/// Which scenario definition a client asks the engine to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `teams-camera-recovery-win11-24h2-en-US-fixture-v1`: the synthetic fixture; completes.
    Fixture,
    /// `teams-camera-recovery-new-teams-uia-probe-20260916-v1`: a live probe; never completes.
    LiveProbe,
    /// `teams-camera-recovery-pinned-20260916-v2`: a pinned machine whose Settings page is proven.
    Pinned,
}

impl Profile {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Fixture => "teams-camera-recovery-win11-24h2-en-US-fixture-v1",
            Self::LiveProbe => "teams-camera-recovery-new-teams-uia-probe-20260916-v1",
            Self::Pinned => "teams-camera-recovery-pinned-20260916-v2",
        }
    }

    /// `fixture` for the synthetic fixture, `liveProbe` for what a live machine showed.
    #[must_use]
    pub const fn evidence_basis(self) -> &'static str {
        match self {
            Self::Fixture => "fixture",
            Self::LiveProbe | Self::Pinned => "liveProbe",
        }
    }
}

/// How Teams reports its camera session in the observation (`teamsCameraSessionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TeamsCameraSession {
    /// The camera was not started since Teams came up.
    NotInitialized,
    /// The camera runs.
    Active,
    /// Teams is restarting the camera.
    Reinitializing,
    /// Teams restarted the camera since the permission changed.
    Reinitialized,
    /// Teams did not say.
    Unknown,
}

/// How the client restarted the camera after the permission changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reinitialization {
    /// The pre-join screen was closed and opened again.
    PrejoinReopened,
    /// Teams was quit and started again.
    TeamsRelaunched,
    /// The camera device was restarted.
    CameraDeviceReinitialized,
}

/// The desktop verifier's report that the local camera delivers frames (`verification`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// The verifier's id of its evidence.
    pub evidence_id: String,
    /// The session it was made for.
    pub session_id: String,
    /// The observation it was made with.
    pub observation_id: String,
    /// The window it was made with.
    pub window_id: String,
    /// When the verifier looked.
    pub captured_at: OffsetDateTime,
    /// Frames the verifier saw, 2–120.
    pub frames_observed: u32,
    /// How the camera was restarted, when the client says.
    pub reinitialization: Option<Reinitialization>,
}

/// A request's `cameraRecovery`, with the one observation field only this branch reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CameraRecovery {
    /// The scenario to follow.
    pub profile: Profile,
    /// The local verifier's report, sent once Teams is back with the camera on.
    pub verification: Option<Verification>,
    /// The observation's `teamsCameraSessionState`, when it carried one.
    pub teams_session: Option<TeamsCameraSession>,
}

/// Where the scenario stands: the 17 states of the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(
    missing_docs,
    reason = "the names are the reference's states; docs/api.md explains each"
)]
pub enum CameraState {
    Start,
    TeamsPrejoinObserved,
    CameraBlockConfirmed,
    TeamsSettingsMenuOpen,
    TeamsDevicesOpen,
    CameraSettingsOpen,
    SystemCameraSettingsUnverified,
    SystemCameraSettingsUninspectable,
    ApplicablePermissionOff,
    UserActionRequired,
    ApplicablePermissionOn,
    CameraReinitializationRequired,
    ReturnToTeams,
    CameraReadyVerified,
    Unsupported,
    AdminManaged,
    Ambiguous,
}

/// What the engine knows of the Teams camera permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "the reference's four values")]
pub enum PermissionState {
    Unknown,
    Off,
    On,
    Managed,
}

/// One kind of evidence an answer rests on (at most 12 per answer; there are 12 kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "docs/api.md lists what each kind means")]
pub enum EvidenceKind {
    CameraToggleOff,
    CameraToggleOn,
    CameraBlockIndicator,
    CameraSettingsButton,
    TeamsSettingsMenuItem,
    TeamsDevicesTab,
    TeamsDevicesPage,
    SettingsCameraPage,
    PermissionToggle,
    ManagedNotice,
    CameraReinitialized,
    LocalVerifier,
}

crate::guide::wire_names! {
    CameraState {
        Start => "start",
        TeamsPrejoinObserved => "teams_prejoin_observed",
        CameraBlockConfirmed => "camera_block_confirmed",
        TeamsSettingsMenuOpen => "teams_settings_menu_open",
        TeamsDevicesOpen => "teams_devices_open",
        CameraSettingsOpen => "camera_settings_open",
        SystemCameraSettingsUnverified => "system_camera_settings_unverified",
        SystemCameraSettingsUninspectable => "system_camera_settings_uninspectable",
        ApplicablePermissionOff => "applicable_permission_off",
        UserActionRequired => "user_action_required",
        ApplicablePermissionOn => "applicable_permission_on",
        CameraReinitializationRequired => "camera_reinitialization_required",
        ReturnToTeams => "return_to_teams",
        CameraReadyVerified => "camera_ready_verified",
        Unsupported => "unsupported",
        AdminManaged => "admin_managed",
        Ambiguous => "ambiguous",
    }
    PermissionState {
        Unknown => "unknown",
        Off => "off",
        On => "on",
        Managed => "managed",
    }
    EvidenceKind {
        CameraToggleOff => "cameraToggleOff",
        CameraToggleOn => "cameraToggleOn",
        CameraBlockIndicator => "cameraBlockIndicator",
        CameraSettingsButton => "cameraSettingsButton",
        TeamsSettingsMenuItem => "teamsSettingsMenuItem",
        TeamsDevicesTab => "teamsDevicesTab",
        TeamsDevicesPage => "teamsDevicesPage",
        SettingsCameraPage => "settingsCameraPage",
        PermissionToggle => "permissionToggle",
        ManagedNotice => "managedNotice",
        CameraReinitialized => "cameraReinitialized",
        LocalVerifier => "localVerifier",
    }
}

/// The `cameraRecovery` object of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CameraReport {
    /// The profile followed.
    pub profile: Profile,
    /// The state reached.
    pub state: CameraState,
    /// What this answer rests on, in the order it was found.
    pub evidence: Vec<EvidenceKind>,
    /// What is known of the permission.
    pub permission: PermissionState,
    /// `ms-settings:privacy-webcam`, for the pinned profile in `teams_devices_open` only.
    pub settings_launch_uri: Option<&'static str>,
}

impl CameraReport {
    /// True only for the synthetic fixture.
    #[must_use]
    pub fn fixture_supported(&self) -> bool {
        self.profile == Profile::Fixture
    }

    /// True only for the pinned profile, whose Settings page automation is proven.
    #[must_use]
    pub fn settings_uia_proven(&self) -> bool {
        self.profile == Profile::Pinned
    }

    /// False until the local verifier confirmed the camera (`camera_ready_verified`).
    #[must_use]
    pub fn verification_required(&self) -> bool {
        self.state != CameraState::CameraReadyVerified
    }
}

/// The request-level rules of the branch, checked before the session is looked up: no task
/// context or plan beside it, and a verification that names this session, observation and window.
///
/// # Errors
/// [`CameraRefusal::TaskContext`] or [`CameraRefusal::VerificationMismatch`].
pub fn check_request(
    camera: &CameraRecovery,
    session_id: &str,
    observation: &Observation,
    has_task: bool,
    plan_segments: bool,
) -> Result<(), CameraRefusal> {
    if has_task || plan_segments {
        return Err(CameraRefusal::TaskContext);
    }
    if let Some(v) = &camera.verification
        && (v.session_id != session_id
            || v.observation_id != observation.id
            || v.window_id != observation.window_id)
    {
        return Err(CameraRefusal::VerificationMismatch);
    }
    Ok(())
}

/// The camera branch's answer: the result the client sees and the `cameraRecovery` object.
#[derive(Debug, Clone)]
pub struct CameraAnswer {
    /// The instruction, status and target (no citations, no plan).
    pub result: GuidanceResult,
    /// The `cameraRecovery` object.
    pub report: CameraReport,
}

impl LocalState {
    /// Runs the engine for one observation of `session_id` (already owned by the caller and
    /// fresh): the verification's own freshness and closeness to the capture, the session
    /// record's order and id rules, the state machine, and the target's binding.
    ///
    /// # Errors
    /// [`Error::StaleObservation`] for a stale verification, [`Error::CameraRecovery`] for a
    /// refusal, [`Error::UnknownResource`]/[`Error::ResourceExpired`] for the session, and an
    /// invalid result should a target ever fail its own binding.
    pub(crate) fn camera_recovery(
        &self,
        owner: &str,
        session_id: &str,
        observation: &Observation,
        camera: &CameraRecovery,
        correlation_id: uuid::Uuid,
    ) -> Result<CameraAnswer, Error> {
        if let Some(v) = &camera.verification {
            check_freshness(v.captured_at, self.now())?;
            if (v.captured_at - observation.captured_at).unsigned_abs() > MAX_OBSERVATION_SKEW {
                return Err(CameraRefusal::VerificationNotWithObservation.into());
            }
        }
        let key = TargetKey::new(self.camera_key(), session_id);
        if observation
            .elements
            .iter()
            .enumerate()
            .any(|(i, e)| !key.element_id_holds(observation, i, e))
        {
            return Err(CameraRefusal::ForgedTarget.into());
        }
        let step = self.with_camera_record(owner, session_id, |record| {
            record.admit(camera.profile, observation, camera.teams_session)?;
            let facts = Facts::of(record);
            let step = evaluate(camera, observation, &facts)?;
            record.apply(&step);
            Ok::<_, CameraRefusal>(step)
        })??;
        let target = step.target.map(|index| {
            let element = &observation.elements[index];
            let mut target = Target::from_element(element);
            target.target_id = Some(
                element
                    .target_id
                    .clone()
                    .unwrap_or_else(|| key.derive(observation, index, element)),
            );
            (index, target)
        });
        let invalid = || Error::Guidance {
            correlation_id,
            failure: GuidanceFailure::InvalidResult,
        };
        // The route's own check: the target handed out is still the element it was bound to.
        if let Some((index, target)) = &target
            && !key.target_holds(observation, *index, target)
        {
            return Err(invalid());
        }
        let result = GuidanceResult {
            instruction: step.instruction.to_owned(),
            status: step.status,
            target: target.map(|(_, t)| t),
            citations: Vec::new(),
            mode: Mode::Demo,
            remaining_work: None,
            plan: None,
        };
        if !result_is_valid(&result)
            || (result.status == GuidanceStatus::Completed)
                != (step.report.state == CameraState::CameraReadyVerified)
        {
            return Err(invalid());
        }
        Ok(CameraAnswer {
            result,
            report: step.report,
        })
    }
}

#[cfg(test)]
mod tests;
