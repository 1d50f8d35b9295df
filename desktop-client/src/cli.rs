//! The scriptable commands: one capture (`observe`) or one round trip (`guide`), JSON on
//! stdout, and on stderr only metadata (counts, timings, the outline's pixels), never screen
//! text. A failure is one sentence on stderr ([`Problem`]); `--verbose` adds its technical
//! detail.

use std::{process::ExitCode, time::Instant};

use local_core::{
    a11y::Budget,
    guide::observe::{self, WindowObservation},
};
use time::OffsetDateTime;

use crate::{api::ApiClient, checks::check_before_drawing, problem::Problem, wire::ObservationOut};

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

/// `guide`: one capture, one round trip, the guidance JSON as received. Without `consent`
/// the capture is printed for review and nothing is sent.
pub fn guide(
    title: &str,
    prompt: &str,
    consent: bool,
    share_pixels: bool,
    verbose: bool,
) -> ExitCode {
    if !consent {
        eprintln!(
            "msguide-desktop: nothing was sent: review what `observe` captures, then pass --consent to send it to the local API"
        );
        return ExitCode::from(NO_CONSENT);
    }
    let result = runtime().and_then(|rt| rt.block_on(guide_once(title, prompt, share_pixels)));
    finish(result, verbose)
}

async fn guide_once(title: &str, prompt: &str, share_pixels: bool) -> Result<(), Problem> {
    let mut client = ApiClient::from_env()?;
    let capture = capture(title, share_pixels).await?;
    // Session first, so both timings below run on the same warm connection.
    client.ensure_session().await?;
    let health = client.health().await?;
    let started = Instant::now();
    let (answer, raw) = client
        .guide(prompt, &ObservationOut::from(&capture.observation))
        .await?;
    eprintln!(
        "health round trip {} us, guidance round trip {} us",
        health.as_micros(),
        started.elapsed().as_micros()
    );
    print_json(&raw)?;
    // The same checks the window makes before drawing, so scripts see what would be outlined.
    if answer.target.is_some() {
        let now_window = observe::windows()?
            .into_iter()
            .find(|w| w.id == capture.window.id);
        match check_before_drawing(
            &capture,
            &answer,
            now_window.as_ref(),
            OffsetDateTime::now_utc(),
        ) {
            Ok(rect) => eprintln!(
                "outline at x={} y={} width={} height={}",
                rect.x, rect.y, rect.width, rect.height
            ),
            Err(refusal) => eprintln!("no outline: {refusal}"),
        }
    }
    Ok(())
}
