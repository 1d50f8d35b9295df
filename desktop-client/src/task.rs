//! The task a person works through across `Check next step` rounds (reference sections 5 and
//! 10): a fresh lower-case UUIDv4 per task, a step number that grows by one each round, and a
//! history entry for each step the person was pointed at, settled by the next capture
//! (`screen_changed` when the window shows something else, `no_progress` when not). The history
//! keeps the last 16 entries, strictly increasing and all below the current step, as the API
//! requires. The script form lives in a task file ([`Task::load`], [`Task::save`]).
//!
//! The plan last shown goes back with each round (`plan`, and `planCursor`, the step the person
//! is on, which moves on when the screen changed after its step) while the capture is of the
//! plan's window and the person did not ask for a new plan; otherwise it is dropped and the next
//! round says why in `replanReason`, a fixed sentence. The status is `needs_input` when the
//! person typed an answer (`userInput`), `no_progress` when the last step changed nothing, else
//! `running`. The task file keeps the plan's ids and cursor, never its text, and never what the
//! person typed, so a later script run has no plan to send back.
//!
//! Also here: which captured element a plan step means (its intent's role and label, exactly one
//! element), so the current plan step can be outlined with the same checks as a target.

use std::{
    io::Write,
    path::{Path, PathBuf},
};

use local_core::limits::{
    MAX_REMAINING_WORK_CHARS, MAX_TASK_HISTORY, MAX_TASK_STEP, MAX_USER_INPUT_CHARS,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::{
    checks::BOX_TOLERANCE,
    problem::Problem,
    wire::{
        GuidanceIn, ObservationOut, PlanIn, PlanStepIn, TargetIn, TaskProgressOut, TaskStepOut,
    },
};

/// The status of a round that is neither of the two below.
pub const RUNNING: &str = "running";
/// The status of a round after a step that changed nothing on screen.
pub const NO_PROGRESS: &str = "no_progress";
/// The status of a round that carries the person's typed answer.
pub const NEEDS_INPUT: &str = "needs_input";
/// `replanReason` when the capture is of another window or resource than the plan's.
pub const WINDOW_CHANGED: &str = "The window or page changed since this plan was made.";
/// `replanReason` when the person asked for a new plan.
pub const NEW_PLAN_ASKED: &str = "The person asked for a new plan.";

/// One task: what the next request carries, and the step waiting for its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    task_id: String,
    step: u32,
    history: Vec<TaskStepOut>,
    #[serde(default)]
    remaining_work: String,
    #[serde(default)]
    taken: Option<Taken>,
    /// The plan being followed.
    #[serde(default)]
    plan: Option<Following>,
    /// Why the last plan was dropped, sent with the next round only.
    #[serde(default)]
    replan_reason: Option<String>,
}

/// The plan being followed: its ids and the person's place in it; its steps (the provider's
/// text and the screen's labels) stay in memory, never in the task file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Following {
    plan_id: String,
    window_id: String,
    #[serde(default)]
    resource_id: Option<String>,
    cursor: u32,
    #[serde(skip)]
    segment: Option<PlanIn>,
}

/// The step the last answer pointed at; its outcome is known once the next capture is made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Taken {
    step: u32,
    observation_id: String,
    target_id: String,
    label: String,
    action: String,
    /// SHA-256 of what the window showed (its text and elements), never the text itself.
    screen: String,
    /// It was the plan's current step, so the cursor moves on once the screen changes.
    #[serde(default)]
    plan_step: bool,
}

impl Default for Task {
    fn default() -> Self {
        Self::new()
    }
}

impl Task {
    /// A new task: a fresh id, step 1, no history.
    #[must_use]
    pub fn new() -> Self {
        Self {
            task_id: Uuid::new_v4().to_string(),
            step: 1,
            history: Vec::new(),
            remaining_work: String::new(),
            taken: None,
            plan: None,
            replan_reason: None,
        }
    }

    /// The task's id.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.task_id
    }

    /// The step the next request carries.
    #[must_use]
    pub const fn step(&self) -> u32 {
        self.step
    }

    /// The steps taken so far (at most the last 16).
    #[must_use]
    pub fn history(&self) -> &[TaskStepOut] {
        &self.history
    }

    /// The plan being followed, if its steps are known, and the index of the person's step.
    #[must_use]
    pub fn plan(&self) -> Option<(&PlanIn, u32)> {
        let following = self.plan.as_ref()?;
        Some((following.segment.as_ref()?, following.cursor))
    }

    /// The `task` to send with `observation`: the step last pointed at is settled against this
    /// capture first, so it enters the history with its outcome (and the plan's cursor moves on
    /// when it was the plan's step and the screen changed). `user_input` is what the person
    /// typed in answer, empty when nothing; `new_plan` says this round asks for a new plan, so
    /// the one followed is dropped.
    ///
    /// # Errors
    /// A [`Problem`] once the task has used all 10000 steps, or when `user_input` is longer than
    /// the API takes.
    pub fn progress(
        &mut self,
        observation: &ObservationOut,
        user_input: &str,
        new_plan: bool,
    ) -> Result<TaskProgressOut, Problem> {
        if user_input.chars().count() > MAX_USER_INPUT_CHARS {
            return Err(Problem::new(
                format!(
                    "Your answer is longer than {MAX_USER_INPUT_CHARS} characters, the most the local API takes: shorten it and send again"
                ),
                None,
            ));
        }
        if self.step > MAX_TASK_STEP {
            return Err(Problem::new(
                format!(
                    "This task has reached {MAX_TASK_STEP} steps, the most one task may take: start a new task"
                ),
                None,
            ));
        }
        let mut stalled = false;
        if let Some(taken) = self.taken.take() {
            stalled = taken.screen == screen_of(observation);
            let outcome = if stalled {
                NO_PROGRESS
            } else {
                "screen_changed"
            };
            if taken.plan_step && !stalled {
                self.advance_plan();
            }
            self.history.push(TaskStepOut {
                step: taken.step,
                observation_id: taken.observation_id,
                after_observation_id: Some(observation.id.clone()),
                target_id: taken.target_id,
                label: taken.label,
                action: taken.action,
                outcome: outcome.to_owned(),
            });
            let extra = self.history.len().saturating_sub(MAX_TASK_HISTORY);
            self.history.drain(..extra);
        }
        let other_window = self.plan.as_ref().is_some_and(|p| {
            p.window_id != observation.window_id || p.resource_id != observation_resource()
        });
        if other_window || (new_plan && self.plan.is_some()) {
            self.plan = None;
            self.replan_reason = Some(
                if other_window {
                    WINDOW_CHANGED
                } else {
                    NEW_PLAN_ASKED
                }
                .to_owned(),
            );
        }
        let status = if !user_input.is_empty() {
            NEEDS_INPUT
        } else if stalled {
            NO_PROGRESS
        } else {
            RUNNING
        };
        let (plan, plan_cursor) = match self.plan() {
            Some((plan, cursor)) => (Some(plan.clone()), cursor),
            None => (None, 0),
        };
        Ok(TaskProgressOut {
            task_id: self.task_id.clone(),
            step: self.step,
            status: status.to_owned(),
            history: self.history.clone(),
            remaining_work: self.remaining_work.clone(),
            user_input: user_input.to_owned(),
            plan,
            plan_cursor,
            replan_reason: self.replan_reason.clone(),
        })
    }

    /// The person did the plan's current step: the cursor moves to the next one (it may reach
    /// the number of steps, the plan's end, never beyond).
    fn advance_plan(&mut self) {
        if let Some(following) = &mut self.plan {
            let steps = following.segment.as_ref().map_or(0, |plan| {
                u32::try_from(plan.steps.len()).unwrap_or(u32::MAX)
            });
            following.cursor = following.cursor.saturating_add(1).min(steps);
        }
    }

    /// Takes `answer` to the request sent with `observation`: it must echo this task and step;
    /// the element it points at (its target, or a plan's first step) becomes the step taken,
    /// and the task moves to its next step.
    ///
    /// # Errors
    /// A [`Problem`] when the answer echoes another task or step.
    pub fn answered(
        &mut self,
        observation: &ObservationOut,
        answer: &GuidanceIn,
    ) -> Result<(), Problem> {
        if answer.task_id.as_deref() != Some(self.task_id.as_str())
            || answer.step != Some(self.step)
        {
            return Err(Problem::new(
                "The local MSGuide API answered for another task or step, so the answer is not used: start a new task, and make sure msguide-api and msguide-desktop come from the same release",
                None,
            ));
        }
        // The reason went out with this round; a new plan replaces the one followed.
        self.replan_reason = None;
        if let Some(plan) = answer
            .plan
            .as_ref()
            .filter(|p| answer.target.is_none() && p.window_id == observation.window_id)
        {
            self.plan = Some(Following {
                plan_id: plan.plan_id.clone(),
                window_id: plan.window_id.clone(),
                resource_id: plan.resource_id.clone(),
                cursor: 0,
                segment: Some(plan.clone()),
            });
        }
        let current = self
            .plan()
            .and_then(|(plan, cursor)| plan.steps.get(usize::try_from(cursor).ok()?))
            .and_then(|step| plan_step_element(observation, step));
        self.taken = pointed_at(observation, answer).map(|(index, target_id, action)| {
            let element = &observation.elements[index];
            Taken {
                step: self.step,
                observation_id: observation.id.clone(),
                target_id,
                label: element.label.clone(),
                action,
                screen: screen_of(observation),
                plan_step: current == Some(index),
            }
        });
        self.remaining_work = answer
            .remaining_work
            .as_deref()
            .unwrap_or_default()
            .chars()
            .take(MAX_REMAINING_WORK_CHARS)
            .collect();
        self.step += 1;
        Ok(())
    }

    /// The task kept in `path` by earlier runs, or a new one when the file does not exist yet
    /// or `fresh` asks for one.
    ///
    /// # Errors
    /// A [`Problem`] when the file cannot be read or is not a task this client wrote.
    pub fn load(path: &Path, fresh: bool) -> Result<Self, Problem> {
        if fresh {
            return Ok(Self::new());
        }
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::new()),
            Err(e) => {
                return Err(Problem::new(
                    format!(
                        "The task file {} cannot be read: check its permissions, or pass --new-task to start a new task",
                        path.display()
                    ),
                    Some(e.to_string()),
                ));
            }
        };
        let task: Self = serde_json::from_str(&text).map_err(|e| unusable(path, e.to_string()))?;
        task.check().map_err(|why| unusable(path, why.to_owned()))?;
        Ok(task)
    }

    /// Writes the task to `path` (readable by this user only), replacing it whole.
    ///
    /// # Errors
    /// A [`Problem`] when the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), Problem> {
        let failed = |e: std::io::Error| {
            Problem::new(
                format!(
                    "The task file {} cannot be written: check that its folder exists and is writable, then run again",
                    path.display()
                ),
                Some(e.to_string()),
            )
        };
        // Our own type always serialises.
        let text = serde_json::to_string_pretty(self).unwrap_or_default();
        let mut partial = PathBuf::from(path);
        partial.as_mut_os_string().push(".partial");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&partial).map_err(failed)?;
        file.write_all(text.as_bytes()).map_err(failed)?;
        file.sync_all().map_err(failed)?;
        std::fs::rename(&partial, path).map_err(failed)
    }

    /// Whether a loaded task keeps the API's rules, so a hand-edited file fails here, clearly.
    fn check(&self) -> Result<(), &'static str> {
        let id_ok = Uuid::parse_str(&self.task_id)
            .is_ok_and(|id| id.get_version_num() == 4 && id.to_string() == self.task_id);
        if !id_ok {
            return Err("taskId is not a lower-case UUIDv4");
        }
        if !(1..=MAX_TASK_STEP + 1).contains(&self.step) {
            return Err("step is out of range");
        }
        let steps = self
            .history
            .iter()
            .map(|h| h.step)
            .chain(self.taken.as_ref().map(|t| t.step));
        let mut below = 0;
        for step in steps {
            if step <= below || step >= self.step {
                return Err("history steps do not increase below the current step");
            }
            below = step;
        }
        if self.history.len() > MAX_TASK_HISTORY {
            return Err("history is longer than 16 steps");
        }
        let plan_ok = self.plan.as_ref().is_none_or(|p| {
            Uuid::parse_str(&p.plan_id).is_ok_and(|id| id.to_string() == p.plan_id)
                && usize::try_from(p.cursor).is_ok_and(|c| c <= local_core::limits::MAX_PLAN_STEPS)
        });
        if !plan_ok {
            return Err("the plan's id or cursor is out of range");
        }
        Ok(())
    }
}

fn unusable(path: &Path, detail: String) -> Problem {
    Problem::new(
        format!(
            "The task file {} is not a task msguide-desktop wrote: pass --new-task to start a new task in it, or pass another file",
            path.display()
        ),
        Some(detail),
    )
}

/// The resource the client's captures name: none yet (an opaque per-page id is the Windows
/// companion's, from the browser's chrome), so a plan is for a window and no resource.
const fn observation_resource() -> Option<String> {
    None
}

/// A digest of what the window showed: its text and elements.
fn screen_of(observation: &ObservationOut) -> String {
    let mut digest = Sha256::new();
    digest.update(observation.ocr_text.as_bytes());
    // Our own wire type always serialises.
    digest.update(serde_json::to_vec(&observation.elements).unwrap_or_default());
    digest
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The element `answer` points the person at (its target, else its plan's first step), with the
/// evidence id and action recorded for it: the target's own when set, else `element-<n>` (its
/// place in the capture) and `invoke`.
fn pointed_at(
    observation: &ObservationOut,
    answer: &GuidanceIn,
) -> Option<(usize, String, String)> {
    let (index, target_id, action) = match (&answer.target, &answer.plan) {
        (Some(target), _) => (
            target_index(observation, target)?,
            target.target_id.clone(),
            target.action.clone(),
        ),
        (None, Some(plan)) if plan.window_id == observation.window_id => {
            let step = plan.steps.first()?;
            (
                plan_step_element(observation, step)?,
                step.control_id.clone(),
                step.intent.as_ref().map(|i| i.action.clone()),
            )
        }
        (None, _) => return None,
    };
    Some((
        index,
        target_id.unwrap_or_else(|| format!("element-{index}")),
        action.unwrap_or_else(|| "invoke".to_owned()),
    ))
}

/// The one captured element with the target's label and box.
fn target_index(observation: &ObservationOut, target: &TargetIn) -> Option<usize> {
    unique(observation.elements.iter().enumerate().filter(|(_, e)| {
        e.label == target.label
            && e.bounds
                .iter()
                .zip(target.bounds)
                .all(|(a, b)| (a - b).abs() <= BOX_TOLERANCE)
    }))
}

/// The one captured element a plan step's intent describes (same role, ignoring case, and
/// label); `None` for a manual step or when none or several match.
#[must_use]
pub fn plan_step_element(observation: &ObservationOut, step: &PlanStepIn) -> Option<usize> {
    let intent = step.intent.as_ref().filter(|_| step.kind == "action")?;
    unique(
        observation
            .elements
            .iter()
            .enumerate()
            .filter(|(_, e)| e.role.eq_ignore_ascii_case(&intent.role) && e.label == intent.label),
    )
}

/// `answer` with its plan's first step as the target, so the checks before drawing outline the
/// element it means; `None` without a plan or when its first step names no single element. The
/// plan's own `windowId` stands as the answer's, so a plan about another window is refused there.
#[must_use]
pub fn with_plan_target(observation: &ObservationOut, answer: &GuidanceIn) -> Option<GuidanceIn> {
    let plan = answer.plan.as_ref().filter(|_| answer.target.is_none())?;
    let element = &observation.elements[plan_step_element(observation, plan.steps.first()?)?];
    let mut drawn = answer.clone();
    drawn.window_id.clone_from(&plan.window_id);
    drawn.target = Some(TargetIn {
        label: element.label.clone(),
        bounds: element.bounds,
        confidence: element.confidence,
        is_enabled: element.is_enabled,
        is_offscreen: element.is_offscreen,
        target_id: None,
        action: None,
    });
    Some(drawn)
}

fn unique<'a, T: 'a>(mut found: impl Iterator<Item = (usize, T)>) -> Option<usize> {
    let (index, _) = found.next()?;
    found.next().is_none().then_some(index)
}

#[cfg(test)]
mod tests;
