//! Tests of `task`: ids, step numbers, history and its outcomes, the echo, plan binding, the
//! task file; following a plan, status and user input in `following`.

use crate::wire::{ElementOut, PlanBoundaryIn, PlanIn, PlanIntentIn};

use super::*;

fn element(role: &str, label: &str, x: f64) -> ElementOut {
    ElementOut {
        role: role.to_owned(),
        label: label.to_owned(),
        bounds: [x, 0.5, 0.25, 0.25],
        confidence: 0.95,
        is_enabled: Some(true),
        is_offscreen: Some(false),
        is_selected: None,
    }
}

/// A demo-like capture showing `text`, with a `View logs` button and a label.
fn observation(id: &str, text: &str) -> ObservationOut {
    ObservationOut {
        id: id.to_owned(),
        window_id: "window-7".to_owned(),
        application: "MSGuide Demo".to_owned(),
        captured_at: "2026-12-03T20:00:00Z".to_owned(),
        width: 400,
        height: 200,
        ocr_text: text.to_owned(),
        elements: vec![
            element("label", text, 0.0),
            element("button", "View logs", 0.5),
        ],
        image_base64: None,
        automation_complete: true,
    }
}

/// The answer to `sent`, echoing `task` and `step`, pointing at `View logs`.
fn answer(sent: &ObservationOut, task: &str, step: u32) -> GuidanceIn {
    GuidanceIn {
        instruction: "Demo: select View logs yourself, then check the screen again.".to_owned(),
        status: "next_step".to_owned(),
        target: Some(TargetIn {
            label: "View logs".to_owned(),
            bounds: [0.5, 0.5, 0.25, 0.25],
            confidence: 0.95,
            is_enabled: Some(true),
            is_offscreen: Some(false),
            target_id: None,
            action: None,
        }),
        mode: "demo".to_owned(),
        correlation_id: "c".to_owned(),
        observation_id: sent.id.clone(),
        window_id: sent.window_id.clone(),
        remaining_work: None,
        plan: None,
        task_id: Some(task.to_owned()),
        step: Some(step),
    }
}

fn plan(labels: &[&str]) -> PlanIn {
    PlanIn {
        plan_id: Uuid::new_v4().to_string(),
        window_id: "window-7".to_owned(),
        resource_id: None,
        steps: labels
            .iter()
            .map(|label| PlanStepIn {
                kind: "action".to_owned(),
                instruction: format!("Demo: select {label}."),
                intent: Some(PlanIntentIn {
                    role: "button".to_owned(),
                    label: (*label).to_owned(),
                    action: "invoke".to_owned(),
                    automation_id: None,
                    framework_id: None,
                    toggle_state: None,
                    is_selected: None,
                }),
                control_id: None,
                value: None,
                scroll_direction: None,
                value_hash: None,
            })
            .collect(),
        boundary: PlanBoundaryIn {
            kind: "completion_candidate".to_owned(),
            reason: "Review".to_owned(),
            needed: String::new(),
        },
    }
}

/// One round: the task sent with a capture showing `text`, then the answer taken.
fn round(task: &mut Task, n: u32, text: &str) -> TaskProgressOut {
    let sent = observation(&format!("obs-{n}"), text);
    let progress = task.progress(&sent, "", false).unwrap();
    task.answered(&sent, &answer(&sent, task.id(), task.step()))
        .unwrap();
    progress
}

#[test]
fn each_task_has_a_fresh_lower_case_uuid_v4_and_starts_at_step_1() {
    let (a, b) = (Task::new(), Task::new());
    assert_ne!(a.id(), b.id());
    for task in [a, b] {
        let id = Uuid::parse_str(task.id()).unwrap();
        assert_eq!(id.get_version_num(), 4);
        assert_eq!(id.to_string(), task.id());
        assert_eq!((task.step(), task.history().len()), (1, 0));
    }
}

#[test]
fn the_history_grows_by_the_step_taken_with_its_outcome_from_the_next_capture() {
    let mut task = Task::new();
    let first = round(&mut task, 1, "Build overview");
    assert_eq!((first.step, first.history.len()), (1, 0));
    assert_eq!(first.status, "running");
    let second = round(&mut task, 2, "Build failed: exit code 1");
    assert_eq!(second.step, 2);
    assert_eq!(
        second.history,
        vec![TaskStepOut {
            step: 1,
            observation_id: "obs-1".to_owned(),
            after_observation_id: Some("obs-2".to_owned()),
            target_id: "element-1".to_owned(),
            label: "View logs".to_owned(),
            action: "invoke".to_owned(),
            outcome: "screen_changed".to_owned(),
        }]
    );
    // The same screen again: the step made no progress.
    let third = round(&mut task, 3, "Build failed: exit code 1");
    assert_eq!(third.history[1].outcome, "no_progress");
    assert_eq!(third.history[1].step, 2);
    // The wire form of a history entry is the reference's TaskStep.
    let json = serde_json::to_value(&third).unwrap();
    assert_eq!(json["taskId"], task.id());
    assert_eq!(json["history"][0]["afterObservationId"], "obs-2");
    assert_eq!(json["history"][0]["targetId"], "element-1");
    assert!(json.get("remainingWork").is_none());
}

#[test]
fn the_history_keeps_the_last_16_steps_increasing_below_the_current_step() {
    let mut task = Task::new();
    for n in 1..=40 {
        let sent = round(&mut task, n, &format!("screen {n}"));
        assert_eq!(sent.step, n);
        assert_eq!(sent.history.len(), (n as usize - 1).min(16));
        let steps: Vec<u32> = sent.history.iter().map(|h| h.step).collect();
        assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
        assert!(steps.iter().all(|s| *s < sent.step), "{steps:?}");
        if n == 40 {
            assert_eq!(steps, (24..=39).collect::<Vec<_>>());
        }
    }
}

#[test]
fn an_answer_without_a_target_is_a_step_but_no_history_entry() {
    let mut task = Task::new();
    let sent = observation("obs-1", "Issue resolved");
    task.progress(&sent, "", false).unwrap();
    let mut done = answer(&sent, task.id(), 1);
    done.status = "completed".to_owned();
    done.target = None;
    task.answered(&sent, &done).unwrap();
    let next = task
        .progress(&observation("obs-2", "Issue resolved"), "", false)
        .unwrap();
    assert_eq!((next.step, next.history.len()), (2, 0));
}

#[test]
fn an_answer_for_another_task_or_step_is_refused_and_changes_nothing() {
    let mut task = Task::new();
    let sent = observation("obs-1", "Build overview");
    task.progress(&sent, "", false).unwrap();
    let before = task.clone();
    let other = Task::new();
    for wrong in [
        answer(&sent, other.id(), 1),
        answer(&sent, task.id(), 2),
        GuidanceIn {
            task_id: None,
            step: None,
            ..answer(&sent, task.id(), 1)
        },
    ] {
        let problem = task.answered(&sent, &wrong).unwrap_err();
        assert!(
            problem.message().contains("start a new task"),
            "{}",
            problem.message()
        );
        assert_eq!(task, before);
    }
}

#[test]
fn a_plans_first_step_is_the_element_its_intent_names_once() {
    let sent = observation("obs-1", "Build overview");
    let mut planned = answer(&sent, "t", 1);
    planned.target = None;
    planned.plan = Some(plan(&["View logs", "Open troubleshooting"]));
    let drawn = with_plan_target(&sent, &planned).unwrap();
    let target = drawn.target.unwrap();
    assert_eq!(
        (target.label.as_str(), target.bounds),
        ("View logs", [0.5, 0.5, 0.25, 0.25])
    );
    // The step taken in plan mode is that element.
    let mut task = Task::new();
    task.progress(&sent, "", false).unwrap();
    planned.task_id = Some(task.id().to_owned());
    task.answered(&sent, &planned).unwrap();
    let next = task
        .progress(&observation("obs-2", "Build failed"), "", false)
        .unwrap();
    assert_eq!(next.history[0].label, "View logs");
    // A plan about another window is refused by the checks before drawing, and is no step.
    let mut elsewhere = planned.clone();
    if let Some(plan) = elsewhere.plan.as_mut() {
        plan.window_id = "window-8".to_owned();
    }
    assert_eq!(
        with_plan_target(&sent, &elsewhere).unwrap().window_id,
        "window-8"
    );
    let mut other = Task::new();
    other.progress(&sent, "", false).unwrap();
    elsewhere.task_id = Some(other.id().to_owned());
    other.answered(&sent, &elsewhere).unwrap();
    let next = other
        .progress(&observation("obs-2", "Build failed"), "", false)
        .unwrap();
    assert!(next.history.is_empty());
    // No element, two elements, or a manual step: nothing to outline.
    planned.plan = Some(plan(&["Mark resolved"]));
    assert!(with_plan_target(&sent, &planned).is_none());
    let mut twice = sent.clone();
    twice.elements.push(element("Button", "View logs", 0.0));
    planned.plan = Some(plan(&["View logs"]));
    assert!(with_plan_target(&twice, &planned).is_none());
    let mut manual = plan(&["View logs"]);
    manual.steps[0].kind = "manual".to_owned();
    assert_eq!(plan_step_element(&sent, &manual.steps[0]), None);
}

#[test]
fn the_task_file_carries_the_task_between_runs() {
    let dir = std::env::temp_dir().join(format!("msguide-task-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("task.json");
    // A missing file is a new task.
    let mut task = Task::load(&path, false).unwrap();
    round(&mut task, 1, "Build overview");
    task.save(&path).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let mut again = Task::load(&path, false).unwrap();
    assert_eq!(again, task);
    let sent = round(&mut again, 2, "Build failed: exit code 1");
    assert_eq!((sent.step, sent.history.len()), (2, 1));
    // --new-task starts over.
    let fresh = Task::load(&path, true).unwrap();
    assert_ne!(fresh.id(), task.id());
    assert_eq!(fresh.step(), 1);
    // A file that is not a task, or breaks the API's rules, is refused with the remedy.
    for bad in [
        "not json".to_owned(),
        serde_json::to_string(&Task {
            task_id: "NOT-A-UUID".to_owned(),
            ..Task::new()
        })
        .unwrap(),
        serde_json::to_string(&Task {
            step: 2,
            history: vec![sent.history[0].clone(), sent.history[0].clone()],
            ..Task::new()
        })
        .unwrap(),
    ] {
        std::fs::write(&path, bad).unwrap();
        let problem = Task::load(&path, false).unwrap_err();
        assert!(
            problem.message().contains("pass --new-task"),
            "{}",
            problem.message()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_task_past_10000_steps_asks_for_a_new_task() {
    let mut task = Task {
        step: MAX_TASK_STEP,
        ..Task::new()
    };
    round(&mut task, 1, "Build overview");
    let problem = task
        .progress(&observation("obs-2", "Build overview"), "", false)
        .unwrap_err();
    assert!(problem.message().contains("start a new task"));
}

mod following;
