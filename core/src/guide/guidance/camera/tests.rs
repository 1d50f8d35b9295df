//! The camera engine without HTTP: every state from some profile and evidence, the evidence
//! ranking and its ties, the `tgt.` binding, and the session record's order and id rules.

use std::collections::HashSet;

use time::OffsetDateTime;

use super::{
    binding::TargetKey,
    engine::{Facts, Step, evaluate, say},
    evidence::{Found, find},
    fixture::{
        APP_PERMISSION_TOGGLE, BLOCK_INDICATOR, CAMERA_TOGGLE, DEVICES_CAMERA_SETTINGS,
        DEVICES_TAB, ELEMENTS, ElementSpec, MANAGED_NOTICE, OPEN_CAMERA_SETTINGS,
        SETTINGS_MENU_ITEM, SETTINGS_PAGE_TITLE,
    },
    record::{CameraRecord, REMEMBERED_OBSERVATIONS},
    *,
};
use crate::guide::{
    guidance::model::{Bounds, Element, ToggleState},
    state::LocalConfig,
};

fn el(spec: &ElementSpec) -> Element {
    Element {
        role: spec.role.to_owned(),
        label: spec.label.to_owned(),
        bounds: Bounds {
            x: 0.1,
            y: 0.1,
            width: 0.2,
            height: 0.1,
        },
        confidence: 0.95,
        automation_id: Some(spec.automation_id.to_owned()),
        framework_id: Some(spec.framework_id.to_owned()),
        is_enabled: Some(true),
        is_offscreen: Some(false),
        ..Element::default()
    }
}

fn switch(spec: &ElementSpec, state: ToggleState) -> Element {
    Element {
        toggle_state: Some(state),
        ..el(spec)
    }
}

fn obs(application: &str, elements: Vec<Element>) -> Observation {
    Observation {
        id: "obs-1".to_owned(),
        window_id: "win-1".to_owned(),
        application: application.to_owned(),
        captured_at: OffsetDateTime::now_utc(),
        width: 800,
        height: 600,
        ocr_text: String::new(),
        elements,
        image: None,
        automation_complete: true,
        resource_id: None,
    }
}

fn camera(profile: Profile) -> CameraRecovery {
    CameraRecovery {
        profile,
        verification: None,
        teams_session: None,
    }
}

fn verified(profile: Profile, method: Option<Reinitialization>) -> CameraRecovery {
    let now = OffsetDateTime::now_utc();
    CameraRecovery {
        verification: Some(Verification {
            evidence_id: "ev-1".to_owned(),
            session_id: "s".to_owned(),
            observation_id: "obs-1".to_owned(),
            window_id: "win-1".to_owned(),
            captured_at: now,
            frames_observed: 2,
            reinitialization: method,
        }),
        ..camera(profile)
    }
}

fn prejoin_blocked() -> Observation {
    obs(
        "Microsoft Teams",
        vec![
            switch(&CAMERA_TOGGLE, ToggleState::Off),
            el(&BLOCK_INDICATOR),
            el(&OPEN_CAMERA_SETTINGS),
        ],
    )
}

fn prejoin_on() -> Observation {
    obs(
        "Microsoft Teams",
        vec![switch(&CAMERA_TOGGLE, ToggleState::On)],
    )
}

fn settings_page(state: ToggleState) -> Observation {
    obs(
        "Settings",
        vec![
            el(&SETTINGS_PAGE_TITLE),
            switch(&APP_PERMISSION_TOGGLE, state),
        ],
    )
}

/// Facts after the fixture's block, permission off and permission on.
fn after(block: bool, off: bool, on: bool) -> Facts {
    let permission = match (off, on) {
        (_, true) => PermissionState::On,
        (true, false) => PermissionState::Off,
        _ => PermissionState::Unknown,
    };
    Facts {
        block_confirmed: block,
        permission_off_seen: off,
        permission_on: on,
        permission,
    }
}

fn step(camera: &CameraRecovery, observation: &Observation, facts: Facts) -> Step {
    evaluate(camera, observation, &facts).unwrap()
}

/// (state, status, target index, instruction) of one step.
fn look(s: &Step) -> (CameraState, GuidanceStatus, Option<usize>, &'static str) {
    (s.report.state, s.status, s.target, s.instruction)
}

#[test]
fn the_fixture_flow_walks_to_a_verified_camera() {
    let fixture = camera(Profile::Fixture);
    let mut record = CameraRecord::default();
    let mut n = 0;
    let mut run = |camera: &CameraRecovery, mut observation: Observation| {
        // A fresh id per capture; the verification resends the last one as it was.
        if camera.verification.is_none() {
            n += 1;
            observation.id = format!("obs-{n}");
        } else {
            observation.id = format!("obs-{n}");
        }
        record.admit(camera.profile, &observation, None).unwrap();
        let s = evaluate(camera, &observation, &record.facts()).unwrap();
        record.apply(&s);
        s
    };
    let s = run(&fixture, prejoin_blocked());
    assert_eq!(
        look(&s),
        (
            CameraState::CameraBlockConfirmed,
            GuidanceStatus::NextStep,
            Some(2),
            say::BLOCK_CONFIRMED
        )
    );
    assert_eq!(
        s.report.evidence,
        [
            EvidenceKind::CameraToggleOff,
            EvidenceKind::CameraBlockIndicator,
            EvidenceKind::CameraSettingsButton
        ]
    );
    assert_eq!(s.report.permission, PermissionState::Unknown);
    let s = run(&fixture, settings_page(ToggleState::Off));
    assert_eq!(
        look(&s),
        (
            CameraState::UserActionRequired,
            GuidanceStatus::NextStep,
            Some(1),
            say::USER_ACTION
        )
    );
    assert_eq!(s.report.permission, PermissionState::Off);
    let s = run(&fixture, settings_page(ToggleState::On));
    assert_eq!(
        look(&s),
        (
            CameraState::ApplicablePermissionOn,
            GuidanceStatus::Clarification,
            None,
            say::PERMISSION_ON
        )
    );
    assert_eq!(s.report.permission, PermissionState::On);
    let teams = prejoin_on();
    let s = run(&fixture, teams.clone());
    assert_eq!(
        look(&s),
        (
            CameraState::ReturnToTeams,
            GuidanceStatus::Clarification,
            None,
            say::RETURN_TO_TEAMS
        )
    );
    assert!(s.report.verification_required());
    let s = run(&verified(Profile::Fixture, None), teams);
    assert_eq!(
        look(&s),
        (
            CameraState::CameraReadyVerified,
            GuidanceStatus::Completed,
            None,
            say::READY
        )
    );
    assert!(!s.report.verification_required());
    assert_eq!(
        s.report.evidence,
        [EvidenceKind::CameraToggleOn, EvidenceKind::LocalVerifier]
    );
    assert!(s.report.fixture_supported() && !s.report.settings_uia_proven());
    assert_eq!(s.report.profile.evidence_basis(), "fixture");
}

#[test]
fn every_state_is_reachable_and_only_next_steps_carry_a_target() {
    use CameraState as S;
    let (fixture, probe, pinned) = (
        camera(Profile::Fixture),
        camera(Profile::LiveProbe),
        camera(Profile::Pinned),
    );
    let none = Facts::default();
    let teams = |elements| obs("Microsoft Teams", elements);
    let reinitialized = CameraRecovery {
        teams_session: Some(TeamsCameraSession::Reinitialized),
        ..camera(Profile::Pinned)
    };
    let devices_page = || {
        teams(vec![
            Element {
                is_selected: Some(true),
                ..el(&DEVICES_TAB)
            },
            el(&DEVICES_CAMERA_SETTINGS),
        ])
    };
    let cases: Vec<(&str, &CameraRecovery, Observation, Facts, S, &str)> = vec![
        (
            "teams, nothing known",
            &fixture,
            teams(vec![]),
            none,
            S::Start,
            say::START,
        ),
        (
            "unsupported app",
            &fixture,
            obs("Notepad", vec![el(&CAMERA_TOGGLE)]),
            none,
            S::Unsupported,
            say::UNSUPPORTED,
        ),
        (
            "wrong cause",
            &fixture,
            teams(vec![switch(&CAMERA_TOGGLE, ToggleState::Off)]),
            none,
            S::TeamsPrejoinObserved,
            say::WRONG_CAUSE,
        ),
        (
            "already on",
            &fixture,
            prejoin_on(),
            none,
            S::TeamsPrejoinObserved,
            say::ALREADY_ON,
        ),
        (
            "no settings button",
            &fixture,
            teams(vec![
                switch(&CAMERA_TOGGLE, ToggleState::Off),
                el(&BLOCK_INDICATOR),
            ]),
            none,
            S::TeamsPrejoinObserved,
            say::NO_SETTINGS_BUTTON,
        ),
        (
            "disabled settings button",
            &fixture,
            teams(vec![
                switch(&CAMERA_TOGGLE, ToggleState::Off),
                el(&BLOCK_INDICATOR),
                Element {
                    is_enabled: Some(false),
                    ..el(&OPEN_CAMERA_SETTINGS)
                },
            ]),
            none,
            S::TeamsPrejoinObserved,
            say::NO_SETTINGS_BUTTON,
        ),
        (
            "indeterminate switch",
            &fixture,
            teams(vec![switch(&CAMERA_TOGGLE, ToggleState::Indeterminate)]),
            none,
            S::TeamsPrejoinObserved,
            say::TOGGLE_UNREADABLE,
        ),
        (
            "block confirmed",
            &probe,
            prejoin_blocked(),
            none,
            S::CameraBlockConfirmed,
            say::BLOCK_CONFIRMED,
        ),
        (
            "settings menu item",
            &probe,
            teams(vec![el(&SETTINGS_MENU_ITEM)]),
            none,
            S::TeamsSettingsMenuOpen,
            say::SETTINGS_MENU,
        ),
        (
            "devices tab",
            &probe,
            teams(vec![el(&DEVICES_TAB), el(&SETTINGS_MENU_ITEM)]),
            none,
            S::TeamsSettingsMenuOpen,
            say::DEVICES_TAB,
        ),
        (
            "devices page",
            &probe,
            devices_page(),
            none,
            S::TeamsDevicesOpen,
            say::DEVICES_OPEN,
        ),
        (
            "probe settings untrusted",
            &probe,
            settings_page(ToggleState::Off),
            after(true, false, false),
            S::SystemCameraSettingsUnverified,
            say::UNVERIFIED_PROBE,
        ),
        (
            "settings unreadable",
            &probe,
            obs("Windows Settings", vec![]),
            none,
            S::SystemCameraSettingsUninspectable,
            say::UNINSPECTABLE,
        ),
        (
            "settings budget hit",
            &fixture,
            Observation {
                automation_complete: false,
                ..obs("Settings", vec![el(&SETTINGS_PAGE_TITLE)])
            },
            none,
            S::SystemCameraSettingsUninspectable,
            say::UNINSPECTABLE,
        ),
        (
            "pinned page unproven",
            &pinned,
            obs(
                "Settings",
                vec![switch(&APP_PERMISSION_TOGGLE, ToggleState::Off)],
            ),
            after(true, false, false),
            S::SystemCameraSettingsUnverified,
            say::UNVERIFIED_PAGE,
        ),
        (
            "app switch missing",
            &fixture,
            obs("Settings", vec![el(&SETTINGS_PAGE_TITLE)]),
            after(true, false, false),
            S::CameraSettingsOpen,
            say::NO_APP_TOGGLE,
        ),
        (
            "app switch out of reach",
            &fixture,
            obs(
                "Settings",
                vec![Element {
                    targetable: Some(false),
                    ..switch(&APP_PERMISSION_TOGGLE, ToggleState::Off)
                }],
            ),
            after(true, false, false),
            S::CameraSettingsOpen,
            say::NO_APP_TOGGLE,
        ),
        (
            "already permitted",
            &fixture,
            settings_page(ToggleState::On),
            after(true, false, false),
            S::CameraSettingsOpen,
            say::ALREADY_PERMITTED,
        ),
        (
            "app switch indeterminate",
            &fixture,
            settings_page(ToggleState::Indeterminate),
            after(true, false, false),
            S::CameraSettingsOpen,
            say::APP_TOGGLE_UNREADABLE,
        ),
        (
            "managed notice",
            &fixture,
            obs(
                "Settings",
                vec![
                    el(&MANAGED_NOTICE),
                    switch(&APP_PERMISSION_TOGGLE, ToggleState::Off),
                ],
            ),
            after(true, false, false),
            S::AdminManaged,
            say::MANAGED,
        ),
        (
            "disabled app switch",
            &pinned,
            obs(
                "Settings",
                vec![
                    el(&SETTINGS_PAGE_TITLE),
                    Element {
                        is_enabled: Some(false),
                        ..switch(&APP_PERMISSION_TOGGLE, ToggleState::Off)
                    },
                ],
            ),
            none,
            S::AdminManaged,
            say::MANAGED,
        ),
        (
            "off before any block",
            &fixture,
            settings_page(ToggleState::Off),
            none,
            S::ApplicablePermissionOff,
            say::OFF_UNCONFIRMED,
        ),
        (
            "revoked",
            &fixture,
            settings_page(ToggleState::Off),
            after(true, true, true),
            S::ApplicablePermissionOff,
            say::REVOKED,
        ),
        (
            "user action",
            &pinned,
            settings_page(ToggleState::Off),
            after(true, false, false),
            S::UserActionRequired,
            say::USER_ACTION,
        ),
        (
            "permission on",
            &pinned,
            settings_page(ToggleState::On),
            after(true, true, false),
            S::ApplicablePermissionOn,
            say::PERMISSION_ON,
        ),
        (
            "reinitialisation",
            &pinned,
            prejoin_on(),
            after(true, true, true),
            S::CameraReinitializationRequired,
            say::REINITIALIZE,
        ),
        (
            "back in teams",
            &reinitialized,
            prejoin_on(),
            after(true, true, true),
            S::ReturnToTeams,
            say::RETURN_TO_TEAMS,
        ),
        (
            "ambiguous",
            &fixture,
            teams(vec![
                switch(&CAMERA_TOGGLE, ToggleState::Off),
                switch(&CAMERA_TOGGLE, ToggleState::Off),
            ]),
            none,
            S::Ambiguous,
            say::AMBIGUOUS,
        ),
        (
            "ambiguous settings",
            &fixture,
            obs("Settings", vec![el(&MANAGED_NOTICE), el(&MANAGED_NOTICE)]),
            none,
            S::Ambiguous,
            say::AMBIGUOUS,
        ),
    ];
    let mut reached = HashSet::new();
    for (name, camera, observation, facts, state, instruction) in cases {
        let s = step(camera, &observation, facts);
        assert_eq!(
            (s.report.state, s.instruction),
            (state, instruction),
            "{name}"
        );
        let next = s.status == GuidanceStatus::NextStep;
        assert_eq!(next, s.target.is_some(), "{name}");
        assert!(s.report.evidence.len() <= 12, "{name}");
        assert!(s.report.verification_required(), "{name}");
        reached.insert(s.report.state);
    }
    // Pinned's verification also needs the reinitialised session.
    assert_eq!(
        evaluate(
            &verified(Profile::Pinned, Some(Reinitialization::TeamsRelaunched)),
            &prejoin_on(),
            &after(true, true, true),
        ),
        Err(CameraRefusal::PrematureVerification)
    );
    let ready = step(
        &CameraRecovery {
            teams_session: Some(TeamsCameraSession::Reinitialized),
            ..verified(Profile::Pinned, Some(Reinitialization::TeamsRelaunched))
        },
        &prejoin_on(),
        after(true, true, true),
    );
    assert_eq!(ready.report.state, S::CameraReadyVerified);
    reached.insert(ready.report.state);
    assert_eq!(reached.len(), 17, "{reached:?}");
}

#[test]
fn profiles_shape_the_report() {
    let page = || {
        obs(
            "Microsoft Teams",
            vec![
                Element {
                    is_selected: Some(true),
                    ..el(&DEVICES_TAB)
                },
                el(&DEVICES_CAMERA_SETTINGS),
            ],
        )
    };
    let pinned = step(&camera(Profile::Pinned), &page(), Facts::default());
    assert_eq!(pinned.report.state, CameraState::TeamsDevicesOpen);
    assert_eq!(
        pinned.report.settings_launch_uri,
        Some("ms-settings:privacy-webcam")
    );
    assert!(pinned.report.settings_uia_proven() && !pinned.report.fixture_supported());
    assert_eq!(pinned.report.profile.evidence_basis(), "liveProbe");
    let probe = step(&camera(Profile::LiveProbe), &page(), Facts::default());
    assert_eq!(probe.report.settings_launch_uri, None);
    assert!(!probe.report.settings_uia_proven() && !probe.report.fixture_supported());
    // The URI belongs to teams_devices_open only.
    let other = step(
        &camera(Profile::Pinned),
        &prejoin_blocked(),
        Facts::default(),
    );
    assert_eq!(other.report.settings_launch_uri, None);
    // The live probe never trusts Settings, so its permission stays unknown.
    let probe = step(
        &camera(Profile::LiveProbe),
        &settings_page(ToggleState::On),
        after(true, false, false),
    );
    assert_eq!(probe.report.permission, PermissionState::Unknown);
    // Revocation voids what was established.
    let revoked = step(
        &camera(Profile::Fixture),
        &settings_page(ToggleState::Off),
        after(true, true, true),
    );
    assert_eq!(
        revoked.facts,
        Facts {
            permission: PermissionState::Off,
            ..Facts::default()
        }
    );
}

#[test]
fn verification_is_refused_unless_teams_is_back_with_the_permission_on() {
    let refuse = |camera: &CameraRecovery, observation: &Observation, facts: Facts| {
        evaluate(camera, observation, &facts).unwrap_err()
    };
    let fixture = verified(Profile::Fixture, None);
    assert_eq!(
        refuse(&fixture, &prejoin_blocked(), Facts::default()),
        CameraRefusal::ConflictingVerification
    );
    assert_eq!(
        refuse(&fixture, &prejoin_on(), Facts::default()),
        CameraRefusal::PrematureVerification
    );
    assert_eq!(
        refuse(
            &fixture,
            &settings_page(ToggleState::On),
            after(true, true, false)
        ),
        CameraRefusal::PrematureVerification
    );
    assert_eq!(
        refuse(
            &verified(Profile::LiveProbe, Some(Reinitialization::PrejoinReopened)),
            &prejoin_on(),
            after(true, true, true)
        ),
        CameraRefusal::LiveProbeVerification
    );
    let pinned = CameraRecovery {
        teams_session: Some(TeamsCameraSession::Reinitialized),
        ..verified(Profile::Pinned, None)
    };
    assert_eq!(
        refuse(&pinned, &prejoin_on(), after(true, true, true)),
        CameraRefusal::ReinitializationMethodMissing
    );
}

#[test]
fn automation_id_outranks_label_and_ties_are_ambiguous() {
    let by_label = Element {
        automation_id: None,
        ..el(&OPEN_CAMERA_SETTINGS)
    };
    let empty_id = Element {
        automation_id: Some(String::new()),
        ..el(&OPEN_CAMERA_SETTINGS)
    };
    let wrong_id = Element {
        automation_id: Some("another-button".to_owned()),
        ..el(&OPEN_CAMERA_SETTINGS)
    };
    let spec = &OPEN_CAMERA_SETTINGS;
    assert_eq!(
        find(spec, &[by_label.clone(), el(spec)]),
        Found::One(1),
        "automation id 100 over label 50"
    );
    assert_eq!(find(spec, std::slice::from_ref(&by_label)), Found::One(0));
    assert_eq!(find(spec, std::slice::from_ref(&empty_id)), Found::One(0));
    assert_eq!(
        find(spec, std::slice::from_ref(&wrong_id)),
        Found::None,
        "no label fallback for a wrong automation id"
    );
    assert_eq!(find(spec, &[by_label, empty_id]), Found::Ambiguous);
    assert_eq!(
        find(spec, &[el(spec), wrong_id, el(spec)]),
        Found::Ambiguous
    );
    let with = |f: fn(&mut Element)| {
        let mut e = el(spec);
        f(&mut e);
        find(spec, &[e])
    };
    assert_eq!(with(|e| e.role = "Button".to_owned()), Found::None);
    assert_eq!(
        with(|e| e.framework_id = Some("XAML".to_owned())),
        Found::None
    );
    assert_eq!(with(|e| e.framework_id = None), Found::None);
    assert_eq!(with(|e| e.confidence = 0.8), Found::One(0));
    assert_eq!(with(|e| e.confidence = 0.799), Found::None);
    // A wrong automation id in the observation also leaves the whole step unplaced.
    let mut blocked = prejoin_blocked();
    blocked.elements[2].automation_id = Some("another-button".to_owned());
    let s = step(&camera(Profile::Fixture), &blocked, Facts::default());
    assert_eq!(s.instruction, say::NO_SETTINGS_BUTTON);
}

#[test]
fn target_ids_are_bound_to_session_observation_index_and_element() {
    let key = [7u8; 32];
    let observation = prejoin_blocked();
    let button = &observation.elements[2];
    let id = TargetKey::new(&key, "s1").derive(&observation, 2, button);
    assert!(id.starts_with("tgt.") && id.len() == 47, "{id}");
    assert!(
        id[4..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );
    assert_eq!(
        id,
        TargetKey::new(&key, "s1").derive(&observation, 2, button)
    );
    assert_ne!(
        id,
        TargetKey::new(&key, "s2").derive(&observation, 2, button)
    );
    assert_ne!(
        id,
        TargetKey::new(&[8u8; 32], "s1").derive(&observation, 2, button)
    );
    assert_ne!(
        id,
        TargetKey::new(&key, "s1").derive(&observation, 1, button)
    );
    let other = Observation {
        id: "obs-2".to_owned(),
        ..observation.clone()
    };
    assert_ne!(id, TargetKey::new(&key, "s1").derive(&other, 2, button));
    let mut moved = button.clone();
    moved.bounds.x = 0.2;
    assert_ne!(
        id,
        TargetKey::new(&key, "s1").derive(&observation, 2, &moved)
    );
    // The element may carry the id it was given (a resend), and only that one.
    let carrying = Element {
        target_id: Some(id.clone()),
        ..button.clone()
    };
    let k = TargetKey::new(&key, "s1");
    assert!(k.element_id_holds(&observation, 2, &carrying));
    assert!(!TargetKey::new(&key, "s2").element_id_holds(&observation, 2, &carrying));
    assert!(!k.element_id_holds(&observation, 1, &carrying));
    assert!(!k.element_id_holds(&other, 2, &carrying));
    let own = Element {
        target_id: Some("camera-button".to_owned()),
        ..button.clone()
    };
    assert!(k.element_id_holds(&other, 0, &own));
    // The route's check of a target.
    let mut target = Target::from_element(button);
    target.target_id = Some(id);
    assert!(k.target_holds(&observation, 2, &target));
    assert!(!TargetKey::new(&key, "s2").target_holds(&observation, 2, &target));
    assert!(!k.target_holds(&observation, 1, &target));
    assert!(!k.target_holds(&observation, 9, &target));
    target.bounds.x = 0.3;
    assert!(!k.target_holds(&observation, 2, &target));
}

#[test]
fn the_record_keeps_capture_order_and_one_content_per_id() {
    let mut record = CameraRecord::default();
    let first = prejoin_blocked();
    let profile = Profile::Fixture;
    record.admit(profile, &first, None).unwrap();
    // A resend is fine; the same id with other content is not.
    record.admit(profile, &first, None).unwrap();
    let mut changed = first.clone();
    changed.elements.pop();
    assert_eq!(
        record.admit(profile, &changed, None),
        Err(CameraRefusal::ObservationIdReused)
    );
    assert_eq!(
        record.admit(profile, &first, Some(TeamsCameraSession::Active)),
        Err(CameraRefusal::ObservationIdReused),
        "teamsCameraSessionState is part of the content"
    );
    let earlier = Observation {
        id: "obs-0".to_owned(),
        captured_at: first.captured_at - time::Duration::milliseconds(1),
        ..first.clone()
    };
    assert_eq!(
        record.admit(profile, &earlier, None),
        Err(CameraRefusal::OutOfOrder)
    );
    let same_time = Observation {
        id: "obs-2".to_owned(),
        ..first.clone()
    };
    record.admit(profile, &same_time, None).unwrap();
    // A change of profile starts the scenario over.
    let s = evaluate(&camera(profile), &first, &record.facts()).unwrap();
    record.apply(&s);
    assert!(record.facts().block_confirmed);
    record.admit(Profile::Pinned, &same_time, None).unwrap();
    assert_eq!(record.facts(), Facts::default());
    // The record is bounded: the oldest ids are forgotten.
    for n in 0..REMEMBERED_OBSERVATIONS {
        let o = Observation {
            id: format!("n-{n}"),
            ..same_time.clone()
        };
        record.admit(Profile::Pinned, &o, None).unwrap();
    }
    record.admit(Profile::Pinned, &changed, None).unwrap();
}

#[test]
fn the_fixture_table_has_distinct_ids_and_two_frameworks() {
    let ids: HashSet<_> = ELEMENTS.iter().map(|e| e.automation_id).collect();
    assert_eq!(ids.len(), ELEMENTS.len());
    assert!(
        ELEMENTS
            .iter()
            .all(|e| e.framework_id == "Chrome" || e.framework_id == "XAML")
    );
}

#[tokio::test]
async fn the_record_lives_in_the_session_and_refusals_reach_the_caller() {
    let state = LocalState::new(LocalConfig::default());
    let session = state
        .create_session("local")
        .unwrap()
        .session_id
        .to_string();
    let cid = uuid::Uuid::nil();
    let fixture = camera(Profile::Fixture);
    let run = |observation: &Observation, camera: &CameraRecovery| {
        state.camera_recovery("local", &session, observation, camera, cid)
    };
    let blocked = prejoin_blocked();
    let answer = run(&blocked, &fixture).unwrap();
    let target = answer.result.target.unwrap();
    let id = target.target_id.unwrap();
    assert!(id.starts_with("tgt."));
    assert_eq!(target.label, "Open camera settings");
    // The same capture resent with the issued id is accepted; on another element it is not.
    let mut resent = blocked.clone();
    resent.elements[2].target_id = Some(id.clone());
    assert!(run(&resent, &fixture).is_ok());
    let mut forged = blocked.clone();
    forged.elements[0].target_id = Some(id);
    assert_eq!(
        run(&forged, &fixture).unwrap_err(),
        Error::CameraRecovery(CameraRefusal::ForgedTarget)
    );
    // An element's own id is its target id.
    let mut owned = blocked.clone();
    owned.id = "obs-own".to_owned();
    owned.elements[2].target_id = Some("button-1".to_owned());
    let answer = run(&owned, &fixture).unwrap();
    assert_eq!(
        answer.result.target.unwrap().target_id.as_deref(),
        Some("button-1")
    );
    // A verification far from its observation, and a stale one.
    let mut far = verified(Profile::Fixture, None);
    let v = far.verification.as_mut().unwrap();
    v.captured_at = blocked.captured_at - time::Duration::milliseconds(5001);
    assert_eq!(
        run(&blocked, &far).unwrap_err(),
        Error::CameraRecovery(CameraRefusal::VerificationNotWithObservation)
    );
    let mut stale_obs = blocked.clone();
    stale_obs.captured_at -= time::Duration::seconds(61);
    let mut stale = verified(Profile::Fixture, None);
    stale.verification.as_mut().unwrap().captured_at = stale_obs.captured_at;
    assert_eq!(
        run(&stale_obs, &stale).unwrap_err(),
        Error::StaleObservation
    );
    // Other owners and unknown sessions have no record.
    assert_eq!(
        state
            .camera_recovery("other", &session, &blocked, &fixture, cid)
            .unwrap_err(),
        Error::UnknownResource
    );
    state.shutdown();
    assert_eq!(run(&blocked, &fixture).unwrap_err(), Error::UnknownResource);
}

#[test]
fn cross_field_rules_come_before_the_session() {
    let observation = prejoin_blocked();
    let fixture = camera(Profile::Fixture);
    let check =
        |camera: &CameraRecovery, task, plan| check_request(camera, "s", &observation, task, plan);
    assert_eq!(check(&fixture, false, false), Ok(()));
    assert_eq!(
        check(&fixture, true, false),
        Err(CameraRefusal::TaskContext)
    );
    assert_eq!(
        check(&fixture, false, true),
        Err(CameraRefusal::TaskContext)
    );
    assert_eq!(
        check(&verified(Profile::Fixture, None), false, false),
        Ok(())
    );
    for edit in [
        |v: &mut Verification| v.session_id = "t".to_owned(),
        |v: &mut Verification| v.observation_id = "obs-2".to_owned(),
        |v: &mut Verification| v.window_id = "win-2".to_owned(),
    ] {
        let mut camera = verified(Profile::Fixture, None);
        edit(camera.verification.as_mut().unwrap());
        assert_eq!(
            check(&camera, false, false),
            Err(CameraRefusal::VerificationMismatch)
        );
    }
    assert_eq!(
        CameraRefusal::TaskContext.to_string(),
        "Generic task context cannot authorize camera recovery"
    );
    assert_eq!(
        CameraRefusal::VerificationNotWithObservation.to_string(),
        "Camera verification must be captured with the same observation"
    );
}

#[test]
fn the_record_goes_with_its_session() {
    let clock = crate::clock::ManualClock::new();
    let state = LocalState::new(LocalConfig {
        clock: std::sync::Arc::new(clock.clone()),
        max_records: 1,
        ..LocalConfig::default()
    });
    let session = state
        .create_session("local")
        .unwrap()
        .session_id
        .to_string();
    let fixture = camera(Profile::Fixture);
    let mut blocked = prejoin_blocked();
    blocked.captured_at = state.now();
    let cid = uuid::Uuid::nil();
    assert!(
        state
            .camera_recovery("local", &session, &blocked, &fixture, cid)
            .is_ok()
    );
    clock.advance(std::time::Duration::from_secs(3600));
    blocked.captured_at = state.now();
    assert_eq!(
        state
            .camera_recovery("local", &session, &blocked, &fixture, cid)
            .unwrap_err(),
        Error::ResourceExpired
    );
    // A new session purges the expired one, its camera record with it.
    state.create_session("local").unwrap();
    assert_eq!(
        state
            .camera_recovery("local", &session, &blocked, &fixture, cid)
            .unwrap_err(),
        Error::UnknownResource
    );
}
