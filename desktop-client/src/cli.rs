//! The scriptable commands: one capture (`observe`) or one round trip (`guide`), JSON on
//! stdout (with `--plan`, the plan's numbered steps instead), and on stderr only metadata
//! (counts, ids, timings, the outline's pixels), never screen text. `guide --task FILE` carries
//! a task between runs in that file. A failure is one sentence on stderr ([`Problem`]);
//! `--verbose` adds its technical detail.

use std::{path::PathBuf, process::ExitCode, time::Instant};

use local_core::{
    a11y::Budget,
    guide::observe::{self, WindowObservation},
};
use time::OffsetDateTime;

use crate::{
    api::ApiClient,
    checks::check_before_drawing,
    problem::Problem,
    task::{Task, with_plan_target},
    wire::{GuidanceIn, ObservationOut, PlanIn},
};

/// Exit status when the user did not consent: nothing was sent.
const NO_CONSENT: u8 = 2;

fn runtime() -> Result<tokio::runtime::Runtime, Problem> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Problem::runtime(&e))
}

/// Captures the window titled `title`, reporting the element count and time on stderr.
///
/// # Errors
/// The [`Problem`] to show when the window cannot be found or observed.
pub async fn capture(title: &str, share_pixels: bool) -> Result<WindowObservation, Problem> {
    let started = Instant::now();
    let window = observe::find_window(title)?;
    let capture = observe::observe(&window, share_pixels, Budget::default()).await?;
    eprintln!(
        "captured {} elements in {} ms (complete: {}, pixels: {})",
        capture.observation.elements.len(),
        started.elapsed().as_millis(),
        capture.observation.automation_complete,
        capture.observation.image.is_some(),
    );
    Ok(capture)
}

fn print_json(value: &impl serde::Serialize) -> Result<(), Problem> {
    // Our own wire types always serialise; a failure here is a bug, said as one.
    let text = serde_json::to_string_pretty(value).map_err(|e| {
        Problem::new(
            "msguide-desktop could not write its JSON output: please report this with the output of --verbose",
            Some(e.to_string()),
        )
    })?;
    println!("{text}");
    Ok(())
}

/// The exit status of a command, printing its problem (with the detail when `verbose`).
fn finish(result: Result<(), Problem>, verbose: bool) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(problem) => {
            eprintln!("{}", problem.report(verbose));
            ExitCode::FAILURE
        }
    }
}

/// `allow-pixels`: writes the desktop entry KDE Plasma's KWin asks for, and says what it did.
pub fn allow_pixels(verbose: bool) -> ExitCode {
    let result = crate::pixels::allow().map(|allowed| match allowed {
        crate::pixels::Allowed::Already => {
            println!("KDE Plasma already lets msguide-desktop capture a window's pixels");
        }
        crate::pixels::Allowed::Written(path) => println!(
            "KDE Plasma now lets msguide-desktop capture a window's pixels (desktop entry: {})",
            path.display()
        ),
    });
    finish(result, verbose)
}

/// `observe`: prints the observation JSON exactly as `guide` would send it.
pub fn observe(title: &str, share_pixels: bool, verbose: bool) -> ExitCode {
    let result = runtime().and_then(|rt| {
        rt.block_on(async {
            let capture = capture(title, share_pixels).await?;
            print_json(&ObservationOut::from(&capture.observation))
        })
    });
    finish(result, verbose)
}

/// What `guide` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct GuideArgs {
    /// The exact title of the window to observe.
    pub title: String,
    /// What the person wants to do.
    pub prompt: String,
    /// The person consented to this upload.
    pub consent: bool,
    /// Include the window's pixels.
    pub share_pixels: bool,
    /// The file that carries the task between runs (created when missing).
    pub task: Option<PathBuf>,
    /// Start a new task in that file instead of continuing the one it holds.
    pub new_task: bool,
    /// Ask for a plan segment and print its numbered steps instead of the JSON.
    pub plan: bool,
    /// The person's answer to the last question, sent as the task's `userInput` (needs a task).
    pub input: Option<String>,
}

/// `guide`: one capture, one round trip, the guidance JSON as received (or, with `plan`, the
/// plan's numbered steps). Without `consent` nothing is captured or sent. With a task file the
/// request carries the task it holds, and the file is updated with the step taken.
pub fn guide(args: &GuideArgs, verbose: bool) -> ExitCode {
    if !args.consent {
        eprintln!(
            "msguide-desktop: nothing was sent: review what `observe` captures, then pass --consent to send it to the local API"
        );
        return ExitCode::from(NO_CONSENT);
    }
    let result = runtime().and_then(|rt| rt.block_on(guide_once(args)));
    finish(result, verbose)
}

async fn guide_once(args: &GuideArgs) -> Result<(), Problem> {
    let input = args.input.as_deref().unwrap_or_default();
    if !input.is_empty() && args.task.is_none() {
        return Err(Problem::new(
            "--input answers a question within a task: pass --task FILE as well",
            None,
        ));
    }
    let mut task = match &args.task {
        Some(path) => Some((Task::load(path, args.new_task)?, path)),
        None => None,
    };
    let mut client = ApiClient::from_env()?;
    let capture = capture(&args.title, args.share_pixels).await?;
    let observation = ObservationOut::from(&capture.observation);
    let progress = match &mut task {
        Some((task, _)) => Some(task.progress(&observation, input, args.plan)?),
        None => None,
    };
    // Session first, so both timings below run on the same warm connection.
    client.ensure_session().await?;
    let health = client.health().await?;
    let started = Instant::now();
    let (answer, raw) = client
        .guide(&args.prompt, &observation, progress.as_ref(), args.plan)
        .await?;
    eprintln!(
        "health round trip {} us, guidance round trip {} us",
        health.as_micros(),
        started.elapsed().as_micros()
    );
    if let (Some((task, path)), Some(sent)) = (&mut task, &progress) {
        task.answered(&observation, &answer)?;
        task.save(path)?;
        eprintln!(
            "task {} step {} sent with {} history steps; next step {}",
            sent.task_id,
            sent.step,
            sent.history.len(),
            task.step()
        );
        // What else went with the task, as counts and fixed words, never the text.
        eprintln!(
            "task status {}, plan {}, plan cursor {}, replan reason {}, user input {} characters",
            sent.status,
            sent.plan.as_ref().map_or(0, |p| p.steps.len()),
            sent.plan_cursor,
            if sent.replan_reason.is_some() {
                "sent"
            } else {
                "none"
            },
            sent.user_input.chars().count()
        );
    }
    if args.plan {
        let plan = answer.plan.as_ref().ok_or_else(|| {
            Problem::new(
                "The local MSGuide API answered without the plan asked for: make sure msguide-api and msguide-desktop come from the same release, or run without --plan",
                None,
            )
        })?;
        print!("{}", numbered(plan));
    } else {
        print_json(&raw)?;
    }
    report_outline(&capture, &observation, &answer)
}

/// A plan as a person reads it: one numbered line per step (the first is the current one),
/// then where it stops.
#[must_use]
pub fn numbered(plan: &PlanIn) -> String {
    let mut text = String::new();
    for (n, step) in plan.steps.iter().enumerate() {
        text.push_str(&format!("{}. {}\n", n + 1, step.instruction));
    }
    let boundary = &plan.boundary;
    text.push_str(&format!("then: {}: {}", boundary.kind, boundary.reason));
    if !boundary.needed.is_empty() {
        text.push_str(&format!(" (needed: {})", boundary.needed));
    }
    text.push('\n');
    text
}

/// The same checks the window makes before drawing, so scripts see what would be outlined: the
/// target, or the plan's current step.
fn report_outline(
    capture: &WindowObservation,
    observation: &ObservationOut,
    answer: &GuidanceIn,
) -> Result<(), Problem> {
    let drawn = if answer.target.is_some() {
        answer.clone()
    } else if answer.plan.as_ref().is_some_and(|p| !p.steps.is_empty()) {
        match with_plan_target(observation, answer) {
            Some(drawn) => drawn,
            None => {
                eprintln!(
                    "no outline: the plan's current step matches no single captured element: follow its instruction by hand"
                );
                return Ok(());
            }
        }
    } else {
        return Ok(());
    };
    let now_window = observe::windows()?
        .into_iter()
        .find(|w| w.id == capture.window.id);
    match check_before_drawing(
        capture,
        &drawn,
        now_window.as_ref(),
        OffsetDateTime::now_utc(),
    ) {
        // A window the compositor does not place is at its own corner, so the box is in it.
        Ok(rect) if !capture.window.placed => eprintln!(
            "outline at x={} y={} width={} height={} in the window (the compositor does not say where it is)",
            rect.x, rect.y, rect.width, rect.height
        ),
        Ok(rect) => eprintln!(
            "outline at x={} y={} width={} height={}",
            rect.x, rect.y, rect.width, rect.height
        ),
        Err(refusal) => eprintln!("no outline: {refusal}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{PlanBoundaryIn, PlanStepIn};

    #[test]
    fn a_plan_prints_as_numbered_steps_then_its_boundary() {
        let step = |text: &str| PlanStepIn {
            kind: "action".to_owned(),
            instruction: text.to_owned(),
            intent: None,
            control_id: None,
            value: None,
            scroll_direction: None,
            value_hash: None,
        };
        let mut plan = PlanIn {
            plan_id: "p".to_owned(),
            window_id: "w".to_owned(),
            resource_id: None,
            steps: vec![step("Demo: select View logs."), step("Type the name.")],
            boundary: PlanBoundaryIn {
                kind: "needs_input".to_owned(),
                reason: "The name is yours to choose.".to_owned(),
                needed: "A project name.".to_owned(),
            },
        };
        assert_eq!(
            numbered(&plan),
            "1. Demo: select View logs.\n2. Type the name.\nthen: needs_input: The name is yours to choose. (needed: A project name.)\n"
        );
        plan.steps.clear();
        plan.boundary.needed.clear();
        plan.boundary.kind = "completion_candidate".to_owned();
        assert_eq!(
            numbered(&plan),
            "then: completion_candidate: The name is yours to choose.\n"
        );
    }
}
