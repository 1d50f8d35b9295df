//! `msguide-demo`: the "MSGuide Demo" window the demo provider knows, a four-stage build
//! troubleshooting workflow drawn with egui so AccessKit exposes its widgets to AT-SPI and
//! UI Automation. Each stage change is printed as `stage <n>` for scripts.

use std::process::ExitCode;

use clap::Parser;
use eframe::egui;
use local_core::guide::guidance::demo::DEMO_APPLICATION;
use msguide_desktop::problem::{demo_window, display_set};

/// The "MSGuide Demo" window: a four-stage build troubleshooting workflow for trying MSGuide.
///
/// It opens at the top left of the screen (the guidance window opens at the top right), shows
/// one stage and one button at a time, and prints `stage N` on stdout at each change.
#[derive(Debug, Parser)]
#[command(version, about, long_about)]
struct Args {
    /// Also print the technical detail of a failure (the library's own error text).
    #[arg(long)]
    verbose: bool,
}

/// The stages: the text on screen and the button that moves on (none on the last).
const STAGES: [(&str, Option<&str>); 4] = [
    ("Build overview", Some("View logs")),
    ("Build failed: exit code 1", Some("Open troubleshooting")),
    (
        "Check compiler errors and missing dependencies",
        Some("Mark resolved"),
    ),
    ("Issue resolved", None),
];

#[derive(Default)]
struct Demo {
    stage: usize,
}

impl eframe::App for Demo {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        msguide_desktop::gui::name_window(ui.ctx(), DEMO_APPLICATION);
        egui::CentralPanel::default().show(ui, |ui| {
            let (text, button) = STAGES[self.stage];
            ui.heading(text);
            ui.add_space(24.0);
            if let Some(button) = button
                && ui.button(button).clicked()
            {
                self.stage += 1;
                println!("stage {}", self.stage);
            }
        });
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title(DEMO_APPLICATION)
            .with_position([0.0, 0.0])
            .with_inner_size([480.0, 240.0]),
        ..Default::default()
    };
    match eframe::run_native(
        DEMO_APPLICATION,
        options,
        // Once the window exists: a demo that cannot open says only why.
        Box::new(|_| {
            println!("stage 0");
            Ok(Box::new(Demo::default()))
        }),
    ) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let problem = demo_window(&e, display_set());
            eprintln!("msguide-demo: {}", problem.message());
            if args.verbose
                && let Some(detail) = problem.detail()
            {
                eprintln!("msguide-demo: detail: {detail}");
            }
            ExitCode::FAILURE
        }
    }
}
