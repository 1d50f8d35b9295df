//! `msguide-desktop`: the desktop guidance client. Without a command it opens the window
//! (pick a window, review, consent, send, outline); `observe` and `guide` do one capture or
//! one round trip from a script; `allow-pixels` lets KDE Plasma share windows' pixels with it.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};

use msguide_desktop::{cli, gui};

/// The MSGuide desktop guidance client (talks only to the local API).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Also print the technical detail of a failure (the library's own error text).
    #[arg(long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Open the guidance window (the default).
    Gui {
        /// Preselect the window with this exact title.
        #[arg(long)]
        window_title: Option<String>,
        /// Prefill the request.
        #[arg(long)]
        prompt: Option<String>,
    },
    /// Capture one window and print the observation JSON that would be sent; sends nothing.
    Observe {
        /// The exact title of the window to observe.
        #[arg(long)]
        window_title: String,
        /// Include the window's pixels (off by default).
        #[arg(long)]
        share_pixels: bool,
    },
    /// Capture one window, send it with the prompt, and print the guidance JSON.
    Guide {
        /// The exact title of the window to observe.
        #[arg(long)]
        window_title: String,
        /// What you want to do.
        #[arg(long)]
        prompt: String,
        /// Consent to sending this capture to the local API; without it nothing is sent.
        #[arg(long)]
        consent: bool,
        /// Include the window's pixels (off by default).
        #[arg(long)]
        share_pixels: bool,
        /// Carry a task between runs in this file: each run sends the task it holds (id, step,
        /// history, and status no_progress when the last step changed nothing on screen) and
        /// records the step taken; a missing file starts a new task. The file keeps ids, steps
        /// and the plan's id and cursor, never screen text or --input.
        #[arg(long, value_name = "FILE")]
        task: Option<PathBuf>,
        /// Start a new task in the --task file instead of continuing the one it holds.
        #[arg(long, requires = "task")]
        new_task: bool,
        /// Ask for a plan segment and print its numbered steps instead of the JSON.
        #[arg(long)]
        plan: bool,
        /// Your answer to the question the last run asked (needs_input or clarification), sent
        /// once as the task's userInput with status needs_input; at most 1000 characters.
        #[arg(long, value_name = "TEXT", requires = "task")]
        input: Option<String>,
    },
    /// On KDE Plasma, let this client capture a window's pixels: writes its hidden desktop
    /// entry (~/.local/share/applications/msguide-desktop.desktop), which KWin asks for, and
    /// waits until KWin takes it.
    AllowPixels,
}

fn main() -> ExitCode {
    // The time zone is read while this is the only thread (the C library's local time is not
    // safe to read while other threads may change the environment).
    let offset = msguide_desktop::words::local_offset();
    let args = Args::parse();
    if local_core::lifetime::follow_launcher() == Some(local_core::lifetime::Tie::Orphaned) {
        eprintln!(
            "msguide-desktop: the launcher that started it has already exited: start MSGuide again with `msguide start`"
        );
        return ExitCode::FAILURE;
    }
    let command = args.command.unwrap_or(Command::Gui {
        window_title: None,
        prompt: None,
    });
    match command {
        Command::Gui {
            window_title,
            prompt,
        } => gui::run(
            window_title,
            prompt.unwrap_or_default(),
            args.verbose,
            offset,
        ),
        Command::Observe {
            window_title,
            share_pixels,
        } => cli::observe(&window_title, share_pixels, args.verbose),
        Command::Guide {
            window_title,
            prompt,
            consent,
            share_pixels,
            task,
            new_task,
            plan,
            input,
        } => cli::guide(
            &cli::GuideArgs {
                title: window_title,
                prompt,
                consent,
                share_pixels,
                task,
                new_task,
                plan,
                input,
            },
            args.verbose,
        ),
        Command::AllowPixels => cli::allow_pixels(args.verbose),
    }
}
