//! Table tests of the task and plan segment rules, at each boundary.

use super::*;
use crate::guide::guidance::model::{
    Bounds, PlanBoundary, ScrollDirection, StepOutcome, TaskStatus, TaskStep,
};

const PLAN_ID: &str = "0b8e6f0e-4c1a-4f3e-9a57-2d9c7e1f3a10";
const HASH: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn intent(action: UiAction) -> PlanIntent {
    PlanIntent {
        role: "button".to_owned(),
        label: "View logs".to_owned(),
        action,
        automation_id: None,
        framework_id: Some("WPF".to_owned()),
        toggle_state: None,
        is_selected: None,
    }
}

fn action(action_kind: UiAction) -> PlanStep {
    PlanStep {
        kind: PlanStepKind::Action,
        instruction: "Select View logs.".to_owned(),
        intent: Some(intent(action_kind)),
        control_id: None,
        value: None,
        scroll_direction: None,
        value_hash: None,
    }
}

fn manual() -> PlanStep {
    PlanStep {
        kind: PlanStepKind::Manual,
        intent: None,
        ..action(UiAction::Invoke)
    }
}

fn segment(steps: Vec<PlanStep>, kind: BoundaryKind) -> PlanSegment {
    PlanSegment {
        plan_id: PLAN_ID.to_owned(),
        window_id: "win".to_owned(),
        resource_id: None,
        steps,
        boundary: PlanBoundary {
            kind,
            reason: "Check the result.".to_owned(),
            needed: "A fresh observation.".to_owned(),
        },
    }
}

fn one(step: PlanStep) -> bool {
    segment_is_valid(&segment(vec![step], BoundaryKind::Observation))
}

#[test]
fn task_ids_are_lower_case_uuids() {
    assert!(is_task_id(PLAN_ID));
    for bad in [
        "0B8E6F0E-4C1A-4F3E-9A57-2D9C7E1F3A10",
        "0b8e6f0e-4c1a-4f3e-9a57-2d9c7e1f3a1",
        "0b8e6f0e-4c1a-4f3e-9a57-2d9c7e1f3a100",
        "0b8e6f0e4c1a-4f3e-9a57-2d9c7e1f3a10-",
        "0b8e6f0g-4c1a-4f3e-9a57-2d9c7e1f3a10",
        "",
    ] {
        assert!(!is_task_id(bad), "{bad}");
    }
}

#[test]
fn step_counts_and_boundaries() {
    let n = |count: usize, kind| {
        segment_is_valid(&segment(vec![action(UiAction::Invoke); count], kind))
    };
    assert!(n(0, BoundaryKind::Observation));
    assert!(n(0, BoundaryKind::CompletionCandidate));
    assert!(n(31, BoundaryKind::CompletionCandidate));
    assert!(
        !n(32, BoundaryKind::CompletionCandidate),
        "32 steps cannot end in completion"
    );
    assert!(n(32, BoundaryKind::PlanLimit));
    assert!(!n(33, BoundaryKind::PlanLimit));
    for kind in [
        BoundaryKind::Resource,
        BoundaryKind::NeedsInput,
        BoundaryKind::Permission,
        BoundaryKind::Observation,
        BoundaryKind::Unsupported,
        BoundaryKind::PlanLimit,
    ] {
        let mut blank = segment(vec![], kind);
        blank.boundary.needed = " ".to_owned();
        assert!(!segment_is_valid(&blank), "{kind:?} needs what is needed");
    }
    let mut done = segment(vec![], BoundaryKind::CompletionCandidate);
    done.boundary.needed = String::new();
    assert!(segment_is_valid(&done));
    let boundary = |reason: &str, needed: &str| {
        let mut plan = segment(vec![], BoundaryKind::Observation);
        plan.boundary.reason = reason.to_owned();
        plan.boundary.needed = needed.to_owned();
        segment_is_valid(&plan)
    };
    assert!(boundary(&"r".repeat(500), &"n".repeat(1000)));
    assert!(!boundary(&"r".repeat(501), "n"));
    assert!(!boundary("r", &"n".repeat(1001)));
    assert!(!boundary("", "n"));
    assert!(!boundary(" \t", "n"));
}

#[test]
fn ids_of_a_segment() {
    let mut plan = segment(vec![], BoundaryKind::Observation);
    assert!(segment_is_valid(&plan));
    plan.resource_id = Some("doc:1".to_owned());
    assert!(segment_is_valid(&plan));
    plan.resource_id = Some("doc 1".to_owned());
    assert!(!segment_is_valid(&plan));
    plan.resource_id = None;
    plan.window_id = "w".repeat(129);
    assert!(!segment_is_valid(&plan));
    plan.window_id = "win".to_owned();
    plan.plan_id = PLAN_ID.to_uppercase();
    assert!(!segment_is_valid(&plan));
}

#[test]
fn manual_steps_only_last_and_bare() {
    let plan = |steps, kind| segment_is_valid(&segment(steps, kind));
    assert!(plan(
        vec![action(UiAction::Invoke), manual()],
        BoundaryKind::NeedsInput
    ));
    assert!(!plan(
        vec![manual(), action(UiAction::Invoke)],
        BoundaryKind::NeedsInput
    ));
    assert!(!plan(
        vec![action(UiAction::Invoke), manual()],
        BoundaryKind::CompletionCandidate
    ));
    let carrying: [fn(&mut PlanStep); 5] = [
        |s| s.intent = Some(intent(UiAction::Invoke)),
        |s| s.control_id = Some("c1".to_owned()),
        |s| s.value = Some(String::new()),
        |s| s.scroll_direction = Some(ScrollDirection::Up),
        |s| s.value_hash = Some(HASH.to_owned()),
    ];
    for add in carrying {
        let mut step = manual();
        add(&mut step);
        assert!(!one(step));
    }
}

#[test]
fn action_steps_fit_their_action() {
    assert!(one(action(UiAction::Invoke)));
    let mut no_intent = action(UiAction::Invoke);
    no_intent.intent = None;
    assert!(!one(no_intent));
    let instruction = |text: &str| {
        let mut step = action(UiAction::Invoke);
        step.instruction = text.to_owned();
        one(step)
    };
    assert!(instruction(&"i".repeat(500)));
    assert!(!instruction(&"i".repeat(501)));
    assert!(!instruction(""));
    assert!(!instruction("  "));

    let mut deferred = action(UiAction::SetValue);
    deferred.value = Some("v".repeat(1000));
    deferred.value_hash = Some(EMPTY_VALUE_HASH.to_owned());
    assert!(
        one(deferred.clone()),
        "a deferred write into an empty field"
    );
    let mut long = deferred.clone();
    long.value = Some("v".repeat(1001));
    assert!(!one(long));
    let mut control = deferred.clone();
    control.value = Some("a\u{7}".to_owned());
    assert!(!one(control));
    let mut other_hash = deferred.clone();
    other_hash.value_hash = Some(HASH.to_owned());
    assert!(
        !one(other_hash.clone()),
        "deferred writes require an empty field"
    );
    other_hash.control_id = Some("c1".to_owned());
    assert!(one(other_hash), "a bound write carries the element's hash");
    let mut no_value = deferred.clone();
    no_value.value = None;
    assert!(!one(no_value));
    let mut no_hash = deferred;
    no_hash.value_hash = None;
    assert!(!one(no_hash));
    let mut stray_value = action(UiAction::Invoke);
    stray_value.value = Some("x".to_owned());
    assert!(!one(stray_value));

    let mut scroll = action(UiAction::Scroll);
    assert!(!one(scroll.clone()), "scroll needs a direction");
    scroll.scroll_direction = Some(ScrollDirection::Down);
    assert!(one(scroll));
    let mut stray = action(UiAction::Invoke);
    stray.scroll_direction = Some(ScrollDirection::Down);
    assert!(!one(stray));
}

#[test]
fn intents_declare_only_what_their_action_needs() {
    let with = |action_kind, edit: fn(&mut PlanIntent)| {
        let mut step = action(action_kind);
        if let Some(intent) = step.intent.as_mut() {
            edit(intent);
        }
        one(step)
    };
    assert!(with(UiAction::Toggle, |i| i.toggle_state = Some(ToggleState::On)));
    assert!(with(UiAction::Toggle, |i| i.toggle_state =
        Some(ToggleState::Off)));
    assert!(!with(UiAction::Toggle, |i| i.toggle_state =
        Some(ToggleState::Indeterminate)));
    assert!(!with(UiAction::Toggle, |_| {}));
    assert!(!with(UiAction::Invoke, |i| i.toggle_state = Some(ToggleState::On)));
    assert!(with(UiAction::Select, |i| i.is_selected = Some(false)));
    assert!(!with(UiAction::Select, |i| i.is_selected = Some(true)));
    assert!(!with(UiAction::Select, |_| {}));
    assert!(!with(UiAction::Invoke, |i| i.is_selected = Some(false)));
    assert!(with(UiAction::Invoke, |i| i.role = "r".repeat(64)));
    assert!(!with(UiAction::Invoke, |i| i.role = "r".repeat(65)));
    assert!(!with(UiAction::Invoke, |i| i.role = String::new()));
    assert!(with(UiAction::Invoke, |i| i.label = "l".repeat(256)));
    assert!(!with(UiAction::Invoke, |i| i.label = "l".repeat(257)));
    assert!(!with(UiAction::Invoke, |i| i.label = String::new()));
    assert!(with(UiAction::Invoke, |i| i.automation_id = Some(String::new())));
    assert!(with(UiAction::Invoke, |i| i.automation_id =
        Some("a".repeat(256))));
    assert!(!with(UiAction::Invoke, |i| i.automation_id =
        Some("a".repeat(257))));
    assert!(!with(UiAction::Invoke, |i| i.framework_id = Some("f".repeat(257))));
}

fn task(step: u32, history: &[u32]) -> TaskProgress {
    TaskProgress {
        task_id: PLAN_ID.to_owned(),
        step,
        status: TaskStatus::Running,
        history: history
            .iter()
            .map(|&n| TaskStep {
                step: n,
                observation_id: "o".to_owned(),
                after_observation_id: None,
                target_id: "t".to_owned(),
                label: "l".to_owned(),
                action: UiAction::Invoke,
                outcome: StepOutcome::EffectObserved,
            })
            .collect(),
        remaining_work: String::new(),
        user_input: String::new(),
        plan: None,
        plan_cursor: 0,
        replan_reason: None,
    }
}

#[test]
fn task_history_and_cursor() {
    let sixteen: Vec<u32> = (1..=16).collect();
    let seventeen: Vec<u32> = (1..=17).collect();
    let cases: [(TaskProgress, Result<(), TaskRefusal>); 11] = [
        (task(1, &[]), Ok(())),
        (task(10_000, &[9_999]), Ok(())),
        (task(0, &[]), Err(TaskRefusal::History)),
        (task(10_001, &[]), Err(TaskRefusal::History)),
        (task(17, &sixteen), Ok(())),
        (task(18, &seventeen), Err(TaskRefusal::History)),
        (task(5, &[1, 3, 4]), Ok(())),
        (task(5, &[1, 3, 3]), Err(TaskRefusal::History)),
        (task(5, &[3, 1]), Err(TaskRefusal::History)),
        (task(5, &[1, 5]), Err(TaskRefusal::History)),
        (task(5, &[0]), Err(TaskRefusal::History)),
    ];
    for (i, (task, expected)) in cases.into_iter().enumerate() {
        assert_eq!(check_task(&task), expected, "case {i}");
    }
    let mut cursor = task(2, &[1]);
    cursor.plan_cursor = 1;
    assert_eq!(
        check_task(&cursor),
        Err(TaskRefusal::PlanCursor),
        "no plan: 0 only"
    );
    cursor.plan = Some(segment(
        vec![action(UiAction::Invoke)],
        BoundaryKind::Observation,
    ));
    assert_eq!(check_task(&cursor), Ok(()));
    cursor.plan_cursor = 2;
    assert_eq!(check_task(&cursor), Err(TaskRefusal::PlanCursor));
    cursor.plan_cursor = 0;
    cursor.plan = Some(segment(vec![manual(), manual()], BoundaryKind::Observation));
    assert_eq!(check_task(&cursor), Err(TaskRefusal::Plan));
}

fn observation(elements: Vec<Element>) -> Observation {
    Observation {
        id: "obs".to_owned(),
        window_id: "win".to_owned(),
        application: "App".to_owned(),
        captured_at: time::OffsetDateTime::now_utc(),
        width: 10,
        height: 10,
        ocr_text: String::new(),
        elements,
        image: None,
        automation_complete: true,
        resource_id: None,
    }
}

fn field() -> Element {
    Element {
        role: "edit".to_owned(),
        label: "Name".to_owned(),
        bounds: Bounds {
            x: 0.1,
            y: 0.1,
            width: 0.2,
            height: 0.1,
        },
        confidence: 0.9,
        target_id: Some("t1".to_owned()),
        control_id: Some("c1".to_owned()),
        is_enabled: Some(true),
        is_offscreen: Some(false),
        targetable: Some(true),
        is_password: Some(false),
        is_read_only: Some(false),
        action: Some(UiAction::SetValue),
        value_hash: Some(HASH.to_owned()),
        value_length: Some(3),
        ..Element::default()
    }
}

fn bound_write() -> PlanStep {
    PlanStep {
        kind: PlanStepKind::Action,
        instruction: "Type the name.".to_owned(),
        intent: intent_of(&field()),
        control_id: Some("c1".to_owned()),
        value: Some("Ada".to_owned()),
        scroll_direction: None,
        value_hash: Some(HASH.to_owned()),
    }
}

#[test]
fn plans_are_bound_to_their_observation() {
    let obs = observation(vec![field()]);
    let good = segment(vec![bound_write()], BoundaryKind::Observation);
    assert!(segment_is_valid(&good));
    assert!(plan_matches_observation(&good, &obs));
    let mut forged: Vec<(&str, PlanSegment, Observation)> = Vec::new();
    let mut window = good.clone();
    window.window_id = "other".to_owned();
    forged.push(("window", window, obs.clone()));
    let mut resource = good.clone();
    resource.resource_id = Some("doc".to_owned());
    forged.push(("resource", resource, obs.clone()));
    let mut control = good.clone();
    control.steps[0].control_id = Some("c2".to_owned());
    forged.push(("control", control, obs.clone()));
    let mut hash = good.clone();
    hash.steps[0].value_hash = Some("b".repeat(64));
    forged.push(("value hash", hash, obs.clone()));
    let mut label = good.clone();
    if let Some(i) = label.steps[0].intent.as_mut() {
        i.label = "Other".to_owned();
    }
    forged.push(("intent", label, obs.clone()));
    let mut incomplete = obs.clone();
    incomplete.automation_complete = false;
    forged.push(("incomplete", good.clone(), incomplete));
    let mut read_only = obs.clone();
    read_only.elements[0].is_read_only = Some(true);
    forged.push(("not executable", good.clone(), read_only));
    let mut twice = obs;
    twice.elements.push(field());
    forged.push(("two elements", good, twice));
    for (what, plan, obs) in forged {
        assert!(!plan_matches_observation(&plan, &obs), "{what}");
    }
    let mut elsewhere = observation(vec![field()]);
    elsewhere.resource_id = Some("doc".to_owned());
    let mut intents_only = segment(vec![action(UiAction::Invoke)], BoundaryKind::Observation);
    intents_only.resource_id = Some("doc".to_owned());
    assert!(plan_matches_observation(&intents_only, &elsewhere));
}
