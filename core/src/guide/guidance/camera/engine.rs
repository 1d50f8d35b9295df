//! The camera-recovery state machine, without I/O: what one observation shows, with what the
//! session established before, gives one state, its instruction, its target and the facts the
//! session keeps. Anything it cannot place with certainty ends in a fail-closed clarification.

use super::{
    CameraRecovery, CameraRefusal, CameraReport, CameraState, EvidenceKind, PermissionState,
    Profile, TeamsCameraSession,
    evidence::{Found, find},
    fixture::{
        APP_PERMISSION_TOGGLE, BLOCK_INDICATOR, CAMERA_TOGGLE, DEVICES_CAMERA_SETTINGS,
        DEVICES_TAB, MANAGED_NOTICE, OPEN_CAMERA_SETTINGS, SETTINGS_APPLICATIONS,
        SETTINGS_LAUNCH_URI, SETTINGS_MENU_ITEM, SETTINGS_PAGE_TITLE, TEAMS_APPLICATION,
    },
    record::CameraRecord,
};
use crate::guide::guidance::model::{Element, GuidanceStatus, Observation, ToggleState};

/// What a session established so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Teams showed the Windows block with its settings button.
    pub(super) block_confirmed: bool,
    /// Settings showed the permission off after the block was confirmed.
    pub(super) permission_off_seen: bool,
    /// Settings then showed it on.
    pub(super) permission_on: bool,
    /// The permission as last seen on a trusted Settings page.
    pub(super) permission: PermissionState,
}

impl Default for Facts {
    fn default() -> Self {
        Self {
            block_confirmed: false,
            permission_off_seen: false,
            permission_on: false,
            permission: PermissionState::Unknown,
        }
    }
}

impl Facts {
    pub(super) const fn of(record: &CameraRecord) -> Self {
        record.facts()
    }
}

/// One answered step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    pub(super) report: CameraReport,
    pub(super) status: GuidanceStatus,
    pub(super) instruction: &'static str,
    /// The index of the element the next step points at.
    pub(super) target: Option<usize>,
    /// What the session keeps after this step.
    pub(super) facts: Facts,
}

/// The instructions, one per situation; each says what was seen and what to do.
pub(super) mod say {
    pub(crate) const UNSUPPORTED: &str = "Camera recovery covers only the Microsoft Teams and Windows Settings windows; bring one of them to the front and check again.";
    pub(crate) const AMBIGUOUS: &str = "Two elements fit the same part of the camera screen, so no step is safe to point at; close the extra window or dialog and check again.";
    pub(crate) const START: &str = "Teams shows no camera screen yet; open the meeting pre-join screen (or Settings > Devices) and check again.";
    pub(crate) const WRONG_CAUSE: &str = "The camera is off in Teams but Teams reports no Windows block, so the permission is not the cause; turn the camera on with the Camera switch.";
    pub(crate) const ALREADY_ON: &str = "The camera is already on in Teams and no permission change was made in this session, so there is nothing to recover.";
    pub(crate) const NO_SETTINGS_BUTTON: &str = "Teams reports the Windows camera block but its Open camera settings button is not available; open Windows Settings > Privacy & security > Camera yourself.";
    pub(crate) const TOGGLE_UNREADABLE: &str = "The Teams Camera switch shows neither on nor off; wait for the pre-join screen to settle and check again.";
    pub(crate) const BLOCK_CONFIRMED: &str =
        "Windows blocks the camera for Teams; select Open camera settings.";
    pub(crate) const SETTINGS_MENU: &str = "Select Settings to open the Teams settings.";
    pub(crate) const DEVICES_TAB: &str = "Select Devices to see the camera settings of Teams.";
    pub(crate) const DEVICES_OPEN: &str =
        "Select Camera privacy settings to open the Windows camera permissions.";
    pub(crate) const DEVICES_OUT_OF_REACH: &str = "The Devices page is open but its Camera privacy settings link is out of reach; scroll it into view and check again.";
    pub(crate) const UNINSPECTABLE: &str = "The Settings window could not be read; close and reopen Settings > Privacy & security > Camera and check again.";
    pub(crate) const UNVERIFIED_PROBE: &str = "This profile cannot verify the Settings page; check yourself that Microsoft Teams may use the camera, then return to Teams.";
    pub(crate) const UNVERIFIED_PAGE: &str = "This Settings page is not proven to be Privacy & security > Camera; open that page and check again.";
    pub(crate) const MANAGED: &str = "Your organization manages the camera permission on this device, so it cannot be changed here; ask your administrator.";
    pub(crate) const NO_APP_TOGGLE: &str = "The camera settings are open but the Microsoft Teams switch is not in view; scroll to Microsoft Teams and check again.";
    pub(crate) const APP_TOGGLE_UNREADABLE: &str = "The Microsoft Teams camera switch shows neither on nor off; wait for Settings to settle and check again.";
    pub(crate) const ALREADY_PERMITTED: &str = "Microsoft Teams may already use the camera, so this permission is not what blocks it; return to Teams and check its camera settings.";
    pub(crate) const REVOKED: &str = "The camera permission for Microsoft Teams was turned off again after it was on; start over from the Teams pre-join screen.";
    pub(crate) const OFF_UNCONFIRMED: &str = "The camera permission for Microsoft Teams is off, but no Teams camera block was confirmed in this session; show the Teams pre-join screen first.";
    pub(crate) const USER_ACTION: &str = "Turn on the Microsoft Teams camera switch yourself.";
    pub(crate) const PERMISSION_ON: &str = "Microsoft Teams may now use the camera; return to the Teams pre-join screen and check again.";
    pub(crate) const REINITIALIZE: &str = "Teams has not restarted its camera since the permission changed; reopen the pre-join screen or restart Teams, then check again.";
    pub(crate) const RETURN_TO_TEAMS: &str = "Teams is back with the camera on; run the local camera check and send its report with this same observation.";
    pub(crate) const READY: &str = "The camera works in Teams again.";
}

/// An element the user can act on: enabled, on screen, and not withheld by the client.
fn reachable(element: &Element) -> bool {
    element.is_enabled == Some(true)
        && element.is_offscreen != Some(true)
        && element.targetable != Some(false)
}

struct Draft {
    state: CameraState,
    instruction: &'static str,
    target: Option<usize>,
    evidence: Vec<EvidenceKind>,
    facts: Facts,
}

impl Draft {
    fn new(facts: Facts) -> Self {
        Self {
            state: CameraState::Start,
            instruction: say::START,
            target: None,
            evidence: Vec::new(),
            facts,
        }
    }

    /// Settles on a state (and target) with its instruction.
    fn at(mut self, state: CameraState, instruction: &'static str, target: Option<usize>) -> Self {
        self.state = state;
        self.instruction = instruction;
        self.target = target;
        self
    }

    fn saw(&mut self, kind: EvidenceKind) {
        self.evidence.push(kind);
    }
}

/// Runs the state machine on one observation.
///
/// # Errors
/// A verification the observation does not support: sent with the live probe, before
/// `return_to_teams`, against a camera Teams shows off, or (pinned) without its method.
pub(super) fn evaluate(
    camera: &CameraRecovery,
    observation: &Observation,
    facts: &Facts,
) -> Result<Step, CameraRefusal> {
    if camera.verification.is_some() && camera.profile == Profile::LiveProbe {
        return Err(CameraRefusal::LiveProbeVerification);
    }
    let draft = Draft::new(*facts);
    let application = observation.application.as_str();
    let mut draft = if application == TEAMS_APPLICATION {
        teams(camera, &observation.elements, draft)
    } else if SETTINGS_APPLICATIONS.contains(&application) {
        settings(camera.profile, observation, draft)
    } else {
        draft.at(CameraState::Unsupported, say::UNSUPPORTED, None)
    };
    if let Some(verification) = &camera.verification {
        if draft.state != CameraState::ReturnToTeams {
            return Err(if draft.evidence.contains(&EvidenceKind::CameraToggleOff) {
                CameraRefusal::ConflictingVerification
            } else {
                CameraRefusal::PrematureVerification
            });
        }
        if camera.profile == Profile::Pinned && verification.reinitialization.is_none() {
            return Err(CameraRefusal::ReinitializationMethodMissing);
        }
        draft.saw(EvidenceKind::LocalVerifier);
        draft = draft.at(CameraState::CameraReadyVerified, say::READY, None);
    }
    let status = if draft.state == CameraState::CameraReadyVerified {
        GuidanceStatus::Completed
    } else if draft.target.is_some() {
        GuidanceStatus::NextStep
    } else {
        GuidanceStatus::Clarification
    };
    let uri = (camera.profile == Profile::Pinned && draft.state == CameraState::TeamsDevicesOpen)
        .then_some(SETTINGS_LAUNCH_URI);
    Ok(Step {
        report: CameraReport {
            profile: camera.profile,
            state: draft.state,
            evidence: draft.evidence,
            permission: draft.facts.permission,
            settings_launch_uri: uri,
        },
        status,
        instruction: draft.instruction,
        target: draft.target,
        facts: draft.facts,
    })
}

/// The Teams window: the pre-join screen, or Teams' own settings on the way to Devices.
fn teams(camera: &CameraRecovery, elements: &[Element], mut draft: Draft) -> Draft {
    let found = [
        CAMERA_TOGGLE,
        BLOCK_INDICATOR,
        OPEN_CAMERA_SETTINGS,
        SETTINGS_MENU_ITEM,
        DEVICES_TAB,
        DEVICES_CAMERA_SETTINGS,
    ]
    .map(|spec| find(&spec, elements));
    if found.contains(&Found::Ambiguous) {
        return draft.at(CameraState::Ambiguous, say::AMBIGUOUS, None);
    }
    let [toggle, block, button, menu, tab, link] = found.map(Found::index);
    if let Some(toggle) = toggle {
        return prejoin(camera, elements, &elements[toggle], block, button, draft);
    }
    let devices_page = tab.is_some_and(|t| elements[t].is_selected == Some(true));
    match (devices_page, link, tab, menu) {
        (true, Some(link), _, _) => {
            draft.saw(EvidenceKind::TeamsDevicesPage);
            if reachable(&elements[link]) {
                draft.at(CameraState::TeamsDevicesOpen, say::DEVICES_OPEN, Some(link))
            } else {
                draft.at(CameraState::Start, say::DEVICES_OUT_OF_REACH, None)
            }
        }
        (false, _, Some(tab), _) if reachable(&elements[tab]) => {
            draft.saw(EvidenceKind::TeamsDevicesTab);
            draft.at(
                CameraState::TeamsSettingsMenuOpen,
                say::DEVICES_TAB,
                Some(tab),
            )
        }
        (_, _, _, Some(menu)) if reachable(&elements[menu]) => {
            draft.saw(EvidenceKind::TeamsSettingsMenuItem);
            draft.at(
                CameraState::TeamsSettingsMenuOpen,
                say::SETTINGS_MENU,
                Some(menu),
            )
        }
        _ => draft,
    }
}

/// The pre-join screen, by its Camera switch.
fn prejoin(
    camera: &CameraRecovery,
    elements: &[Element],
    toggle: &Element,
    block: Option<usize>,
    button: Option<usize>,
    mut draft: Draft,
) -> Draft {
    match toggle.toggle_state {
        Some(ToggleState::On) => {
            draft.saw(EvidenceKind::CameraToggleOn);
            if !draft.facts.permission_on {
                return draft.at(CameraState::TeamsPrejoinObserved, say::ALREADY_ON, None);
            }
            if camera.profile == Profile::Pinned {
                if camera.teams_session != Some(TeamsCameraSession::Reinitialized) {
                    return draft.at(
                        CameraState::CameraReinitializationRequired,
                        say::REINITIALIZE,
                        None,
                    );
                }
                draft.saw(EvidenceKind::CameraReinitialized);
            }
            draft.at(CameraState::ReturnToTeams, say::RETURN_TO_TEAMS, None)
        }
        Some(ToggleState::Off) => {
            draft.saw(EvidenceKind::CameraToggleOff);
            if block.is_none() {
                return draft.at(CameraState::TeamsPrejoinObserved, say::WRONG_CAUSE, None);
            }
            draft.saw(EvidenceKind::CameraBlockIndicator);
            match button {
                Some(button) if reachable(&elements[button]) => {
                    draft.saw(EvidenceKind::CameraSettingsButton);
                    draft.facts.block_confirmed = true;
                    draft.at(
                        CameraState::CameraBlockConfirmed,
                        say::BLOCK_CONFIRMED,
                        Some(button),
                    )
                }
                _ => draft.at(
                    CameraState::TeamsPrejoinObserved,
                    say::NO_SETTINGS_BUTTON,
                    None,
                ),
            }
        }
        Some(ToggleState::Indeterminate) | None => draft.at(
            CameraState::TeamsPrejoinObserved,
            say::TOGGLE_UNREADABLE,
            None,
        ),
    }
}

/// The Windows Settings window, on its camera privacy page.
fn settings(profile: Profile, observation: &Observation, mut draft: Draft) -> Draft {
    let elements = observation.elements.as_slice();
    let found = [SETTINGS_PAGE_TITLE, APP_PERMISSION_TOGGLE, MANAGED_NOTICE]
        .map(|spec| find(&spec, elements));
    if found.contains(&Found::Ambiguous) {
        return draft.at(CameraState::Ambiguous, say::AMBIGUOUS, None);
    }
    let [title, toggle, managed] = found.map(Found::index);
    if elements.is_empty() || (!observation.automation_complete && toggle.is_none()) {
        return draft.at(
            CameraState::SystemCameraSettingsUninspectable,
            say::UNINSPECTABLE,
            None,
        );
    }
    // The live probe never trusts what Settings shows, and the pinned profile only on its
    // proven page: the permission stays as it was.
    if profile == Profile::LiveProbe {
        return draft.at(
            CameraState::SystemCameraSettingsUnverified,
            say::UNVERIFIED_PROBE,
            None,
        );
    }
    if title.is_some() {
        draft.saw(EvidenceKind::SettingsCameraPage);
    } else if profile == Profile::Pinned {
        return draft.at(
            CameraState::SystemCameraSettingsUnverified,
            say::UNVERIFIED_PAGE,
            None,
        );
    }
    let disabled = toggle.is_some_and(|t| elements[t].is_enabled == Some(false));
    if managed.is_some() || disabled {
        draft.saw(if managed.is_some() {
            EvidenceKind::ManagedNotice
        } else {
            EvidenceKind::PermissionToggle
        });
        draft.facts.permission = PermissionState::Managed;
        return draft.at(CameraState::AdminManaged, say::MANAGED, None);
    }
    let Some(toggle) = toggle else {
        return draft.at(CameraState::CameraSettingsOpen, say::NO_APP_TOGGLE, None);
    };
    let element = &elements[toggle];
    draft.saw(EvidenceKind::PermissionToggle);
    match element.toggle_state {
        Some(ToggleState::Off) => {
            draft.facts.permission = PermissionState::Off;
            if draft.facts.permission_on {
                // Revoked after it was on: everything established is void.
                draft.facts = Facts {
                    permission: PermissionState::Off,
                    ..Facts::default()
                };
                draft.at(CameraState::ApplicablePermissionOff, say::REVOKED, None)
            } else if !draft.facts.block_confirmed {
                draft.at(
                    CameraState::ApplicablePermissionOff,
                    say::OFF_UNCONFIRMED,
                    None,
                )
            } else if !reachable(element) {
                draft.at(CameraState::CameraSettingsOpen, say::NO_APP_TOGGLE, None)
            } else {
                draft.facts.permission_off_seen = true;
                draft.at(
                    CameraState::UserActionRequired,
                    say::USER_ACTION,
                    Some(toggle),
                )
            }
        }
        Some(ToggleState::On) => {
            draft.facts.permission = PermissionState::On;
            if draft.facts.permission_on || draft.facts.permission_off_seen {
                draft.facts.permission_on = true;
                draft.at(
                    CameraState::ApplicablePermissionOn,
                    say::PERMISSION_ON,
                    None,
                )
            } else {
                draft.at(
                    CameraState::CameraSettingsOpen,
                    say::ALREADY_PERMITTED,
                    None,
                )
            }
        }
        Some(ToggleState::Indeterminate) | None => draft.at(
            CameraState::CameraSettingsOpen,
            say::APP_TOGGLE_UNREADABLE,
            None,
        ),
    }
}
