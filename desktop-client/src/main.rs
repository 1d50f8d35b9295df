//! `msguide-desktop`: the desktop guidance client. Without a command it opens the window
//! (pick a window, review, consent, send, outline); `observe` and `guide` do one capture or
//! one round trip from a script.

use std::process::ExitCode;

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
    },
}

fn main() -> ExitCode {
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
        } => gui::run(window_title, prompt.unwrap_or_default(), args.verbose),
        Command::Observe {
            window_title,
            share_pixels,
        } => cli::observe(&window_title, share_pixels, args.verbose),
        Command::Guide {
            window_title,
            prompt,
            consent,
            share_pixels,
        } => cli::guide(&window_title, &prompt, consent, share_pixels, args.verbose),
    }
}
