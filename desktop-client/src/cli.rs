//! The scriptable commands: one capture (`observe`) or one round trip (`guide`), JSON on
//! stdout, and on stderr only metadata (counts, timings, the outline's pixels), never screen
//! text.

use std::{process::ExitCode, time::Instant};

use local_core::{
    a11y::Budget,
    observe::{self, WindowObservation},
};
use time::OffsetDateTime;

use crate::{api::ApiClient, checks::check_before_drawing, wire::ObservationOut};

/// Exit status when the user did not consent: nothing was sent.
const NO_CONSENT: u8 = 2;

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// Captures the window titled `title`, reporting the element count and time on stderr.
pub async fn capture(title: &str, share_pixels: bool) -> Result<WindowObservation, String> {
    let started = Instant::now();
    let window = observe::find_window(title).map_err(|e| e.to_string())?;
    let capture = observe::observe(&window, share_pixels, Budget::default())
        .await
        .map_err(|e| e.to_string())?;
    eprintln!(
        "captured {} elements in {} ms (complete: {}, pixels: {})",
        capture.observation.elements.len(),
        started.elapsed().as_millis(),
        capture.observation.automation_complete,
        capture.observation.image.is_some(),
    );
    Ok(capture)
}

fn print_json(value: &impl serde::Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}

fn finish(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("msguide-desktop: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `observe`: prints the observation JSON exactly as `guide` would send it.
pub fn observe(title: &str, share_pixels: bool) -> ExitCode {
    finish(runtime().and_then(|rt| {
        rt.block_on(async {
            let capture = capture(title, share_pixels).await?;
            print_json(&ObservationOut::from(&capture.observation))
        })
    }))
}

/// `guide`: one capture, one round trip, the guidance JSON as received. Without `consent`
/// the capture is printed for review and nothing is sent.
pub fn guide(title: &str, prompt: &str, consent: bool, share_pixels: bool) -> ExitCode {
    if !consent {
        eprintln!(
            "msguide-desktop: nothing was sent: review what `observe` captures, then pass --consent to send it to the local API"
        );
        return ExitCode::from(NO_CONSENT);
    }
    finish(runtime().and_then(|rt| rt.block_on(guide_once(title, prompt, share_pixels))))
}

async fn guide_once(title: &str, prompt: &str, share_pixels: bool) -> Result<(), String> {
    let mut client = ApiClient::from_env().map_err(|e| e.to_string())?;
    let capture = capture(title, share_pixels).await?;
    // Session first, so both timings below run on the same warm connection.
    client.ensure_session().await.map_err(|e| e.to_string())?;
    let health = client.health().await.map_err(|e| e.to_string())?;
    let started = Instant::now();
    let (answer, raw) = client
        .guide(prompt, &ObservationOut::from(&capture.observation))
        .await
        .map_err(|e| e.to_string())?;
    eprintln!(
        "health round trip {} us, guidance round trip {} us",
        health.as_micros(),
        started.elapsed().as_micros()
    );
    print_json(&raw)?;
    // The same checks the window makes before drawing, so scripts see what would be outlined.
    if answer.target.is_some() {
        let now_window = observe::windows()
            .map_err(|e| e.to_string())?
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
