//! Tests of what a task sends besides its history: the plan followed and the person's step in
//! it, the replan reason when the plan is dropped, the status, and the person's typed answer;
//! and that the task file keeps none of their text.

use super::*;

/// The answer to a plan round: no target, the plan of `labels` on `sent`'s window.
fn plan_answer(sent: &ObservationOut, task: &Task, labels: &[&str]) -> GuidanceIn {
    let mut planned = answer(sent, task.id(), task.step());
    planned.target = None;
    planned.plan = Some(plan(labels));
    planned
}

/// Sends one round showing `text` (with `input`, asking for a plan when `new_plan`) and takes
/// `reply` to it, built from the capture and the task; returns what was sent.
fn send(
    task: &mut Task,
    n: u32,
    text: &str,
    input: &str,
    new_plan: bool,
    reply: impl Fn(&ObservationOut, &Task) -> GuidanceIn,
) -> TaskProgressOut {
    let sent = observation(&format!("obs-{n}"), text);
    let progress = task.progress(&sent, input, new_plan).unwrap();
    let answer = reply(&sent, task);
    task.answered(&sent, &answer).unwrap();
    progress
}

fn step_answer(sent: &ObservationOut, task: &Task) -> GuidanceIn {
    answer(sent, task.id(), task.step())
}

#[test]
fn the_plan_goes_back_with_the_step_the_person_is_on() {
    let mut task = Task::new();
    let labels = ["View logs", "Open troubleshooting"];
    let first = send(&mut task, 1, "Build overview", "", true, |s, t| {
        plan_answer(s, t, &labels)
    });
    assert_eq!((first.plan.as_ref(), first.plan_cursor), (None, 0));
    assert_eq!(first.replan_reason, None);
    // The person read the plan and did nothing yet: the plan goes back at its first step, and
    // the round says the last step made no progress.
    let second = send(&mut task, 2, "Build overview", "", false, step_answer);
    assert_eq!(
        second.plan,
        Some(plan(&labels)).map(|mut p| {
            p.plan_id.clone_from(&second.plan.as_ref().unwrap().plan_id);
            p
        })
    );
    assert_eq!(second.plan_cursor, 0);
    assert_eq!(second.status, NO_PROGRESS);
    // That round pointed at View logs, the plan's current step; the screen changed, so the
    // person is on the plan's second step.
    let third = send(&mut task, 3, "Build failed", "", false, step_answer);
    assert_eq!((third.plan_cursor, third.status.as_str()), (1, RUNNING));
    assert_eq!(third.history.last().unwrap().outcome, "screen_changed");
    // The wire form: the plan exactly as the API sent it, and the cursor.
    let json = serde_json::to_value(&third).unwrap();
    assert_eq!(json["planCursor"], 1);
    assert_eq!(
        json["plan"]["steps"][1]["intent"]["label"],
        "Open troubleshooting"
    );
    assert_eq!(
        json["plan"]["planId"],
        task.plan().unwrap().0.plan_id.as_str()
    );
    assert!(json.get("replanReason").is_none() && json.get("userInput").is_none());
    // View logs is no longer the plan's current step: pointing at it again and a changed screen
    // do not move the cursor.
    let fourth = send(&mut task, 4, "Build failed again", "", false, step_answer);
    assert_eq!(fourth.plan_cursor, 1);
}

#[test]
fn the_cursor_stops_at_the_plans_end() {
    let mut task = Task::new();
    send(&mut task, 1, "Build overview", "", true, |s, t| {
        plan_answer(s, t, &["View logs"])
    });
    let mut texts = ["a", "b", "c", "d"].into_iter();
    for n in 2..6 {
        let sent = send(&mut task, n, texts.next().unwrap(), "", false, step_answer);
        assert!(sent.plan_cursor <= 1, "{}", sent.plan_cursor);
        assert_eq!(sent.plan.as_ref().map(|p| p.steps.len()), Some(1));
    }
    assert_eq!(task.plan().map(|(_, cursor)| cursor), Some(1));
}

#[test]
fn another_window_or_a_new_plan_drops_the_plan_and_says_why_once() {
    let mut task = Task::new();
    send(&mut task, 1, "Build overview", "", true, |s, t| {
        plan_answer(s, t, &["View logs"])
    });
    // The next capture is of another window: no plan, and the fixed reason.
    let sent = {
        let mut other = observation("obs-2", "Settings");
        other.window_id = "window-8".to_owned();
        let progress = task.progress(&other, "", false).unwrap();
        task.answered(&other, &step_answer(&other, &task)).unwrap();
        progress
    };
    assert_eq!((sent.plan.as_ref(), sent.plan_cursor), (None, 0));
    assert_eq!(sent.replan_reason.as_deref(), Some(WINDOW_CHANGED));
    let after = send(&mut task, 3, "Settings", "", false, step_answer);
    assert_eq!(after.replan_reason, None, "the reason goes out once");

    // The person asks for a new plan while following one.
    let mut task = Task::new();
    send(&mut task, 1, "Build overview", "", true, |s, t| {
        plan_answer(s, t, &["View logs"])
    });
    let again = send(&mut task, 2, "Build overview", "", true, |s, t| {
        plan_answer(s, t, &["Open troubleshooting"])
    });
    assert_eq!(again.plan, None);
    assert_eq!(again.replan_reason.as_deref(), Some(NEW_PLAN_ASKED));
    // The new plan is followed from its start.
    let next = send(&mut task, 3, "Build overview", "", false, step_answer);
    assert_eq!(
        next.plan.unwrap().steps[0].instruction,
        "Demo: select Open troubleshooting."
    );
    assert_eq!((next.plan_cursor, next.replan_reason), (0, None));
    // Asking for a plan with none followed gives no reason.
    let mut fresh = Task::new();
    let first = fresh
        .progress(&observation("obs-1", "x"), "", true)
        .unwrap();
    assert_eq!(first.replan_reason, None);
}

#[test]
fn a_typed_answer_is_sent_once_as_needs_input_and_never_kept() {
    let mut task = Task::new();
    send(&mut task, 1, "Build overview", "", false, step_answer);
    let typed = "Project Falcon";
    let sent = send(&mut task, 2, "Build overview", typed, false, step_answer);
    // The answer is the news of this round, even though the screen did not change.
    assert_eq!(
        (sent.status.as_str(), sent.user_input.as_str()),
        (NEEDS_INPUT, typed)
    );
    assert_eq!(serde_json::to_value(&sent).unwrap()["userInput"], typed);
    let next = send(&mut task, 3, "Build overview", "", false, step_answer);
    assert_eq!(
        (next.status.as_str(), next.user_input.as_str()),
        (NO_PROGRESS, "")
    );
    // 1000 characters go; 1001 are refused with a sentence, and the task does not move.
    let mut edge = task.clone();
    let sent = observation("obs-4", "x");
    assert!(edge.progress(&sent, &"é".repeat(1000), false).is_ok());
    let before = task.clone();
    let problem = task.progress(&sent, &"é".repeat(1001), false).unwrap_err();
    assert_eq!(
        problem.message(),
        "Your answer is longer than 1000 characters, the most the local API takes: shorten it and send again"
    );
    assert_eq!(task, before);
}

#[test]
fn the_task_file_keeps_the_plans_ids_and_cursor_but_no_text() {
    let dir = std::env::temp_dir().join(format!("msguide-task-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("task.json");
    let mut task = Task::new();
    send(&mut task, 1, "Build overview", "", true, |s, t| {
        plan_answer(s, t, &["View logs", "Open troubleshooting"])
    });
    send(
        &mut task,
        2,
        "Build overview",
        "Project Falcon",
        false,
        step_answer,
    );
    send(&mut task, 3, "Build failed", "", false, step_answer);
    task.save(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let saved: serde_json::Value = serde_json::from_str(&text).unwrap();
    let plan_id = task.plan().unwrap().0.plan_id.clone();
    assert_eq!(saved["plan"]["planId"], plan_id.as_str());
    assert_eq!(saved["plan"]["cursor"], 1);
    for secret in [
        "Demo: select",
        "Open troubleshooting",
        "Project Falcon",
        "Build",
    ] {
        assert!(!text.contains(secret), "{secret} in the task file: {text}");
    }
    // A later run has the ids but no steps, so it sends no plan (the API would refuse a
    // cursor without one).
    let mut again = Task::load(&path, false).unwrap();
    assert_eq!(again.plan(), None);
    let sent = again
        .progress(&observation("obs-4", "x"), "", false)
        .unwrap();
    assert_eq!((sent.plan, sent.plan_cursor), (None, 0));
    // A hand-edited cursor out of range is refused with the remedy.
    std::fs::write(&path, text.replace("\"cursor\": 1", "\"cursor\": 33")).unwrap();
    let problem = Task::load(&path, false).unwrap_err();
    assert!(
        problem.message().contains("pass --new-task"),
        "{}",
        problem.message()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
