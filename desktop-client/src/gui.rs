//! The guidance window: pick a window, type a request, capture and review exactly what would
//! be sent, consent, send, read the instruction, and see the target outlined on screen.
//!
//! Work (window listing, capture, the HTTP round trip) runs one job at a time on a worker
//! thread, so the window stays responsive; every upload needs a fresh tick of the consent box,
//! "Check next step" captures afresh and never resends, and a failure is shown as the one
//! sentence of its [`Problem`] (its detail goes to stderr with `--verbose`), with no retry. A drawn outline is checked again twice a second and removed once the
//! capture is 60 s old or the window moved, changed or closed.
//!
//! Every send belongs to a task ([`Task`]): its step grows each round and the step the person
//! was pointed at enters its history; "New task" starts another. With "Ask for a plan" the
//! answer's plan is listed, numbered, with the current step framed and outlined on screen.

use std::{
    process::ExitCode,
    sync::mpsc::{self, Receiver, Sender},
    time::{Duration, Instant},
};

use eframe::egui::{
    self, Color32, ColorImage, Stroke, StrokeKind, TextureHandle, TextureOptions, ViewportBuilder,
    ViewportId,
};
use local_core::{
    a11y::{Budget, ScreenRect},
    guide::observe::{self, WindowInfo, WindowObservation},
    limits::MAX_USER_INPUT_CHARS,
};
use time::OffsetDateTime;

use crate::{
    api::ApiClient,
    checks::check_before_drawing,
    problem::{Problem, display_set},
    task::{Task, with_plan_target},
    wire::{GuidanceIn, ObservationOut, PlanIn, TaskProgressOut},
};

/// The client's own window title.
pub const WINDOW_TITLE: &str = "MSGuide";
/// How often a drawn outline is checked again (age, window position and title).
const RECHECK: Duration = Duration::from_millis(500);
/// The outline's colour and width, as the original draws it.
const OUTLINE: Stroke = Stroke {
    width: 3.0,
    color: Color32::from_rgb(0, 255, 255),
};

enum Job {
    ListWindows,
    Capture {
        title: String,
        share_pixels: bool,
    },
    Send {
        capture: Box<WindowObservation>,
        prompt: String,
        task: Box<TaskProgressOut>,
        plan: bool,
    },
}

enum Done {
    Windows(Result<Vec<WindowInfo>, Problem>),
    Captured(Result<Box<WindowObservation>, Problem>),
    Answered(Result<Box<(GuidanceIn, Option<WindowInfo>)>, Problem>),
}

/// Runs jobs in order until the window closes (the sender drops).
fn worker(jobs: &Receiver<Job>, done: &Sender<Done>, ctx: &egui::Context) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = done.send(Done::Windows(Err(Problem::runtime(&e))));
            return;
        }
    };
    let mut client = ApiClient::from_env().map_err(Problem::from);
    while let Ok(job) = jobs.recv() {
        let result = match job {
            Job::ListWindows => Done::Windows(observe::windows().map_err(Problem::from)),
            Job::Capture {
                title,
                share_pixels,
            } => Done::Captured(runtime.block_on(async {
                let window = observe::find_window(&title)?;
                Ok(Box::new(
                    observe::observe(&window, share_pixels, Budget::default()).await?,
                ))
            })),
            Job::Send {
                capture,
                prompt,
                task,
                plan,
            } => Done::Answered(match client.as_mut() {
                Err(e) => Err(e.clone()),
                Ok(client) => runtime.block_on(async {
                    let body = ObservationOut::from(&capture.observation);
                    let (answer, _) = client.guide(&prompt, &body, Some(&task), plan).await?;
                    // Where the window is now, for the before-drawing checks.
                    let window_now = observe::windows()?
                        .into_iter()
                        .find(|w| w.id == capture.window.id);
                    Ok(Box::new((answer, window_now)))
                }),
            }),
        };
        if done.send(result).is_err() {
            return;
        }
        ctx.request_repaint();
    }
}

struct Client {
    jobs: Sender<Job>,
    done: Receiver<Done>,
    busy: bool,
    windows: Vec<WindowInfo>,
    selected: Option<String>,
    prompt: String,
    share_pixels: bool,
    capture: Option<Box<WindowObservation>>,
    preview: Option<TextureHandle>,
    consent: bool,
    /// The task every send belongs to.
    task: Task,
    /// Ask for a plan segment rather than a single step.
    ask_plan: bool,
    /// The person's answer to a question, sent once with the next round as `userInput`.
    user_input: String,
    answer: Option<GuidanceIn>,
    /// The answer as the checks see it: with a plan, its current step as the target.
    drawn: Option<GuidanceIn>,
    /// Why the target is not outlined, when it is not.
    refusal: Option<String>,
    error: Option<Problem>,
    /// Print each problem's technical detail to stderr.
    verbose: bool,
    outline: Option<ScreenRect>,
    /// When the drawn outline was last checked.
    checked_at: Instant,
}

impl Client {
    fn new(ctx: &egui::Context, selected: Option<String>, prompt: String, verbose: bool) -> Self {
        let (jobs, job_rx) = mpsc::channel();
        let (done_tx, done) = mpsc::channel();
        let worker_ctx = ctx.clone();
        std::thread::spawn(move || worker(&job_rx, &done_tx, &worker_ctx));
        let mut client = Self {
            jobs,
            done,
            busy: false,
            windows: Vec::new(),
            selected,
            prompt,
            share_pixels: false,
            capture: None,
            preview: None,
            consent: false,
            task: Task::new(),
            ask_plan: false,
            user_input: String::new(),
            answer: None,
            drawn: None,
            refusal: None,
            error: None,
            verbose,
            outline: None,
            checked_at: Instant::now(),
        };
        client.start(Job::ListWindows);
        client
    }

    fn start(&mut self, job: Job) {
        self.error = None;
        self.busy = self.jobs.send(job).is_ok();
        if !self.busy {
            self.error = Some(Problem::new(
                "The background worker stopped, so nothing more can be captured or sent: close this window and start MSGuide again",
                None,
            ));
        }
    }

    /// A fresh capture for review: the previous one, its answer and its outline are dropped.
    fn capture_for_review(&mut self, title: String) {
        self.capture = None;
        self.preview = None;
        self.consent = false;
        self.answer = None;
        self.drawn = None;
        self.refusal = None;
        self.outline = None;
        self.start(Job::Capture {
            title,
            share_pixels: self.share_pixels,
        });
    }

    fn receive(&mut self, ctx: &egui::Context) {
        while let Ok(done) = self.done.try_recv() {
            self.busy = false;
            match done {
                Done::Windows(Ok(windows)) => {
                    self.windows = windows
                        .into_iter()
                        .filter(|w| w.title != WINDOW_TITLE)
                        .collect();
                }
                Done::Captured(Ok(capture)) => {
                    self.preview = capture.observation.image.as_ref().and_then(|png| {
                        let rgba = image::load_from_memory(&png.bytes).ok()?.to_rgba8();
                        let size = [rgba.width() as usize, rgba.height() as usize];
                        let image = ColorImage::from_rgba_unmultiplied(size, rgba.as_raw());
                        Some(ctx.load_texture("preview", image, TextureOptions::default()))
                    });
                    self.capture = Some(capture);
                }
                Done::Answered(Ok(answered)) => {
                    let (answer, window_now) = *answered;
                    if let Some(capture) = &self.capture {
                        let sent = ObservationOut::from(&capture.observation);
                        if let Err(problem) = self.task.answered(&sent, &answer) {
                            self.error = Some(problem);
                            continue;
                        }
                        let drawn = with_plan_target(&sent, &answer);
                        let drawn = drawn.as_ref().unwrap_or(&answer);
                        let checked = check_before_drawing(
                            capture,
                            drawn,
                            window_now.as_ref(),
                            OffsetDateTime::now_utc(),
                        );
                        match checked {
                            Ok(rect) => {
                                self.outline = Some(rect);
                                self.checked_at = Instant::now();
                            }
                            Err(refusal) => self.refusal = Some(refusal.to_string()),
                        }
                        self.drawn = Some(drawn.clone());
                    }
                    self.answer = Some(answer);
                }
                Done::Windows(Err(problem))
                | Done::Captured(Err(problem))
                | Done::Answered(Err(problem)) => {
                    if self.verbose {
                        eprintln!("{}", problem.report(true));
                    }
                    self.error = Some(problem);
                }
            }
        }
    }

    fn review(&mut self, ui: &mut egui::Ui) {
        let Some(capture) = &self.capture else { return };
        let o = &capture.observation;
        ui.separator();
        ui.strong("Exactly this will be sent:");
        ui.label(format!("Application: {}", o.application));
        ui.label(format!(
            "Window: {}×{} px, captured at {}, {} elements{}",
            o.width,
            o.height,
            o.captured_at.time(),
            o.elements.len(),
            if o.automation_complete {
                ""
            } else {
                " (walk cut short)"
            }
        ));
        egui::ScrollArea::vertical()
            .max_height(160.0)
            .show(ui, |ui| {
                for e in &o.elements {
                    let [x, y, w, h] = e.bounds.to_array();
                    ui.monospace(format!(
                        "{:<10} {:<40} [{x:.3}, {y:.3}, {w:.3}, {h:.3}]",
                        e.role, e.label
                    ));
                }
            });
        match &self.preview {
            Some(texture) => {
                let size = texture.size_vec2();
                let scale = (400.0 / size.x).min(1.0);
                ui.add(egui::Image::new(egui::load::SizedTexture::new(
                    texture.id(),
                    size * scale,
                )));
            }
            None => {
                ui.label("No pixels: only the element list above is shared.");
            }
        }
        ui.label(format!("Request: {}", self.prompt));
        ui.checkbox(
            &mut self.consent,
            "I consent to sending this snapshot and my request to the local MSGuide service",
        );
        let can_send = self.consent && !self.busy && !self.prompt.trim().is_empty();
        if ui
            .add_enabled(can_send, egui::Button::new("Send"))
            .clicked()
        {
            self.consent = false;
            self.answer = None;
            self.drawn = None;
            self.refusal = None;
            self.outline = None;
            let capture = capture.clone();
            let prompt = self.prompt.clone();
            let sent = self.task.progress(
                &ObservationOut::from(&capture.observation),
                &self.user_input,
                self.ask_plan,
            );
            match sent {
                Ok(task) => {
                    self.user_input.clear();
                    self.start(Job::Send {
                        capture,
                        prompt,
                        task: Box::new(task),
                        plan: self.ask_plan,
                    });
                }
                Err(problem) => self.error = Some(problem),
            }
        }
    }

    /// The task's line: its step and history, and the way to start another.
    fn task_line(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            let taken = self.task.history().len();
            ui.label(format!(
                "Task step {}, {taken} earlier step{} in its history",
                self.task.step(),
                if taken == 1 { "" } else { "s" }
            ));
            if ui
                .add_enabled(!self.busy, egui::Button::new("New task"))
                .on_hover_text("Forget this task's steps; the next send starts a new task")
                .clicked()
            {
                self.task = Task::new();
                // An answer typed for the old task's question is not the new task's.
                self.user_input.clear();
            }
        });
    }

    fn answer(&mut self, ui: &mut egui::Ui) {
        let Some(answer) = &self.answer else { return };
        ui.separator();
        ui.strong(format!("{} ({})", answer.instruction, answer.status));
        if let Some(plan) = &answer.plan {
            plan_list(ui, plan, 0);
        } else if let Some((plan, cursor)) = self.task.plan() {
            // A single step while a plan is followed: the plan, the person's step framed.
            plan_list(ui, plan, cursor);
        }
        // A question gets an answer box; what is typed goes with the next send only.
        if matches!(answer.status.as_str(), "needs_input" | "clarification") {
            ui.horizontal(|ui| {
                ui.label("Answer:");
                ui.add(
                    egui::TextEdit::singleline(&mut self.user_input)
                        .char_limit(MAX_USER_INPUT_CHARS),
                );
            });
        }
        if let Some(refusal) = &self.refusal {
            ui.colored_label(Color32::YELLOW, format!("Not outlined: {refusal}"));
        }
        let title = self.capture.as_ref().map(|c| c.window.title.clone());
        if let Some(title) = title
            && ui
                .add_enabled(!self.busy, egui::Button::new("Check next step"))
                .clicked()
        {
            self.capture_for_review(title);
        }
    }

    /// Checks a drawn outline again: it goes away, with the reason shown, once the capture is
    /// 60 s old or the window moved, changed or closed.
    fn recheck(&mut self, ctx: &egui::Context) {
        if self.outline.is_none() {
            return;
        }
        ctx.request_repaint_after(RECHECK);
        if self.checked_at.elapsed() < RECHECK {
            return;
        }
        self.checked_at = Instant::now();
        let (Some(capture), Some(answer)) = (&self.capture, &self.drawn) else {
            return;
        };
        let window_now = match observe::windows() {
            Ok(windows) => windows.into_iter().find(|w| w.id == capture.window.id),
            Err(e) => {
                let problem = Problem::from(e);
                if self.verbose {
                    eprintln!("{}", problem.report(true));
                }
                self.outline = None;
                self.refusal = Some(problem.message().to_owned());
                return;
            }
        };
        let checked = check_before_drawing(
            capture,
            answer,
            window_now.as_ref(),
            OffsetDateTime::now_utc(),
        );
        if let Err(refusal) = checked {
            self.outline = None;
            self.refusal = Some(refusal.to_string());
        }
    }

    /// The always-on-top, click-through, undecorated outline around the target.
    fn outline(&self, ctx: &egui::Context) {
        let Some(rect) = self.outline else { return };
        let points = ctx.pixels_per_point();
        // Three pixels of margin so the border sits around the element, not on it.
        let margin = 3.0;
        let builder = ViewportBuilder::default()
            .with_title("MSGuide outline")
            .with_decorations(false)
            .with_transparent(true)
            .with_always_on_top()
            .with_mouse_passthrough(true)
            .with_taskbar(false)
            .with_active(false)
            .with_resizable(false)
            // Unmanaged on X11: a window manager's frame would keep taking the clicks that the
            // empty input shape lets through, and could move the outline off the target.
            .with_override_redirect(true)
            .with_window_type(egui::X11WindowType::Notification)
            .with_position([
                (rect.x as f32 - margin) / points,
                (rect.y as f32 - margin) / points,
            ])
            .with_inner_size([
                (rect.width as f32 + 2.0 * margin) / points,
                (rect.height as f32 + 2.0 * margin) / points,
            ]);
        ctx.show_viewport_immediate(ViewportId::from_hash_of("outline"), builder, |ui, _| {
            let area = ui.max_rect();
            ui.painter()
                .rect_stroke(area.shrink(1.5), 4.0, OUTLINE, StrokeKind::Inside);
        });
    }
}

impl eframe::App for Client {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        let ctx = ui.ctx().clone();
        self.receive(&ctx);
        egui::CentralPanel::default().show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.label("Window:");
                egui::ComboBox::from_id_salt("window")
                    .selected_text(
                        self.selected
                            .clone()
                            .unwrap_or_else(|| "pick one".to_owned()),
                    )
                    .show_ui(ui, |ui| {
                        for w in &self.windows {
                            ui.selectable_value(
                                &mut self.selected,
                                Some(w.title.clone()),
                                &w.title,
                            );
                        }
                    });
                if ui
                    .add_enabled(!self.busy, egui::Button::new("Refresh"))
                    .clicked()
                {
                    self.start(Job::ListWindows);
                }
            });
            ui.label("Request:");
            ui.text_edit_multiline(&mut self.prompt);
            ui.checkbox(
                &mut self.share_pixels,
                "Share the window's pixels too (off by default)",
            );
            ui.checkbox(
                &mut self.ask_plan,
                "Ask for a plan: the next several steps, numbered",
            );
            self.task_line(ui);
            let can_capture = !self.busy && self.selected.is_some();
            if ui
                .add_enabled(can_capture, egui::Button::new("Capture / review"))
                .clicked()
                && let Some(title) = self.selected.clone()
            {
                self.capture_for_review(title);
            }
            if self.busy {
                ui.spinner();
            }
            if let Some(problem) = &self.error {
                ui.colored_label(Color32::RED, problem.message());
            }
            self.review(ui);
            self.answer(ui);
        });
        self.recheck(&ctx);
        self.outline(&ctx);
    }
}

/// The plan as a numbered list, the person's current step (`cursor`) framed in the outline's
/// colour, then where the plan stops.
fn plan_list(ui: &mut egui::Ui, plan: &PlanIn, cursor: u32) {
    ui.label(format!("Plan ({} steps):", plan.steps.len()));
    for (n, step) in plan.steps.iter().enumerate() {
        let line = format!("{}. {}", n + 1, step.instruction);
        if u32::try_from(n).is_ok_and(|n| n == cursor) {
            egui::Frame::group(ui.style())
                .stroke(OUTLINE)
                .show(ui, |ui| ui.strong(line));
        } else {
            ui.label(line);
        }
    }
    let boundary = &plan.boundary;
    let needed = if boundary.needed.is_empty() {
        String::new()
    } else {
        format!(" Needed: {}", boundary.needed)
    };
    ui.label(format!("Then: {}{needed}", boundary.reason));
}

/// Opens the window, with a window preselected and the request prefilled when given, and
/// runs until it is closed. Nothing is captured or sent until the user asks. With `verbose`,
/// each failure's technical detail is printed to stderr too.
pub fn run(selected: Option<String>, prompt: String, verbose: bool) -> ExitCode {
    let options = eframe::NativeOptions {
        viewport: ViewportBuilder::default()
            .with_title(WINDOW_TITLE)
            .with_inner_size([640.0, 720.0]),
        ..Default::default()
    };
    let result = eframe::run_native(
        WINDOW_TITLE,
        options,
        Box::new(move |cc| {
            Ok(Box::new(Client::new(
                &cc.egui_ctx,
                selected,
                prompt,
                verbose,
            )))
        }),
    );
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", Problem::window(&e, display_set()).report(verbose));
            ExitCode::FAILURE
        }
    }
}
