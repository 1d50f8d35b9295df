//! The guidance window: pick a window, type a request, capture and review exactly what would
//! be sent, consent, send, read the instruction, and see the target outlined on screen.
//!
//! Work (window listing, capture, the HTTP round trip) runs one job at a time on a worker
//! thread, so the window stays responsive; every upload needs a fresh tick of the consent box,
//! "Check next step" captures afresh and never resends, and a failure is shown as the one
//! sentence of its [`Problem`] at the bottom of the window and on stderr (its detail too with
//! `--verbose`), with no retry. The consent tick is cleared once an upload reached the API,
//! and kept when nothing was sent.
//!
//! The outline ([`crate::outline`]) is a hollow frame around the target; while it is shown the
//! window moves beside the target's window ([`crate::place`]) and comes back when the person
//! clicks inside the frame (which removes the outline at once and offers the next capture) or
//! captures again. The outline is also checked again twice a second, and at once when the
//! target window changes, and removed once the capture is 60 s old or the window moved,
//! changed or closed. Where the outline cannot see the person's clicks (Wayland), the target
//! window's controls are read again twice a second on a thread of their own, and the outline
//! goes once the target changed or went away, most likely because the person used it.
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
    self, Color32, ColorImage, Pos2, Rect, Stroke, TextureHandle, TextureOptions, Vec2,
    ViewportBuilder, ViewportCommand, pos2, vec2,
};
use local_core::{
    a11y::{Budget, ScreenRect},
    guide::observe::{self, WindowInfo, WindowObservation},
    limits::MAX_USER_INPUT_CHARS,
};
use time::{OffsetDateTime, UtcOffset};

use crate::{
    api::ApiClient,
    checks::{check_before_drawing, target_still_there},
    outline::{self, Outline, Seen},
    place,
    problem::{Problem, Remedy, display_set},
    task::{Task, with_plan_target},
    wire::{GuidanceIn, ObservationOut, PlanIn, TaskProgressOut},
    words,
};

/// The client's own window title.
pub const WINDOW_TITLE: &str = "MSGuide";
/// How often a drawn outline is checked again (age, window position and title).
const RECHECK: Duration = Duration::from_millis(500);
/// The frame of the plan's current step in the window: the outline's colour and width.
const OUTLINE: Stroke = Stroke {
    width: outline::FRAME as f32,
    color: Color32::from_rgb(outline::COLOUR[0], outline::COLOUR[1], outline::COLOUR[2]),
};
/// How long after opening the window is put at its start place (the window manager's frame
/// arrives a moment after the window).
const PLACING: Duration = Duration::from_secs(2);
/// The guidance window's inner size, in points.
const SIZE: [f32; 2] = [640.0, 720.0];
/// What the window says once the person clicked inside the outline.
pub const STEP_TAKEN: &str =
    "You used the outlined element: press Check next step to see what comes next.";
/// What the window says once the outlined element changed or went away, where the outline
/// cannot see clicks (Wayland).
pub const TARGET_CHANGED: &str = "The outlined element changed, most likely because you used it: press Check next step to see what comes next.";
/// What the window says above the capture it frames the target on, where no frame can be shown
/// on screen.
pub const ON_CAPTURE: &str =
    "This desktop cannot show a frame on screen, so the target is framed here, on the capture:";
/// The largest the capture is drawn in this window, in points; a smaller window is drawn at its
/// own size, so its boxes keep their pixels.
const PICTURE: Vec2 = vec2(600.0, 360.0);

enum Job {
    ListWindows,
    Capture {
        title: String,
        share_pixels: bool,
    },
    /// Writes the desktop entry KDE Plasma asks for, then captures `title` with its pixels.
    AllowPixels {
        title: String,
    },
    Send {
        capture: Box<WindowObservation>,
        prompt: String,
        task: Box<TaskProgressOut>,
        plan: bool,
    },
}

/// Why a send gave no answer, and whether the capture reached the API anyway.
struct Unanswered {
    problem: Problem,
    /// The observation was uploaded (an error status came back, or the connection broke after
    /// it went); false when nothing of it left this process.
    uploaded: bool,
}

enum Done {
    Windows(Result<Vec<WindowInfo>, Problem>),
    Captured(Result<Box<WindowObservation>, Problem>),
    Answered(Result<Box<(GuidanceIn, Option<WindowInfo>)>, Unanswered>),
}

/// A capture of the window titled `title`, for review.
async fn capture(title: &str, share_pixels: bool) -> Result<Box<WindowObservation>, Problem> {
    let window = observe::find_window(title)?;
    Ok(Box::new(
        observe::observe(&window, share_pixels, Budget::default()).await?,
    ))
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
            } => Done::Captured(runtime.block_on(capture(&title, share_pixels))),
            Job::AllowPixels { title } => Done::Captured(
                crate::pixels::allow().and_then(|_| runtime.block_on(capture(&title, true))),
            ),
            Job::Send {
                capture,
                prompt,
                task,
                plan,
            } => Done::Answered(match client.as_mut() {
                Err(e) => Err(Unanswered {
                    problem: e.clone(),
                    uploaded: false,
                }),
                Ok(client) => runtime.block_on(async {
                    let body = ObservationOut::from(&capture.observation);
                    let (answer, _) = client
                        .guide(&prompt, &body, Some(&task), plan)
                        .await
                        .map_err(|e| Unanswered {
                            problem: e.into(),
                            uploaded: client.uploaded(),
                        })?;
                    // Where the window is now, for the before-drawing checks.
                    let window_now = observe::windows()
                        .map_err(|e| Unanswered {
                            problem: e.into(),
                            uploaded: true,
                        })?
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

/// Where the window was before it moved out of the target's way, to come back to.
enum Home {
    /// Its outer position, where egui can move it (X11, Windows, macOS).
    Here(Pos2),
    /// Its place on sway, which moved it.
    #[cfg(target_os = "linux")]
    Sway(place::sway::Moved),
    /// Its place on KDE, where KWin moved it.
    #[cfg(target_os = "linux")]
    Kwin(place::kwin::Moved),
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
    /// The target's box while its outline is on screen (or on the capture, with `on_capture`).
    outline: Option<ScreenRect>,
    /// Whether the outline is drawn on the capture in this window, not on screen: the
    /// compositor has no layer shell, or does not say where the window is.
    on_capture: bool,
    /// The window system's outline, or why there is none.
    outliner: Result<Box<dyn Outline>, Problem>,
    /// When the drawn outline was last checked.
    checked_at: Instant,
    /// Check the outline at the next frame, without waiting for [`RECHECK`].
    recheck_now: bool,
    /// What the window says once the outline went because the step was taken
    /// ([`STEP_TAKEN`] or [`TARGET_CHANGED`]).
    step_note: Option<&'static str>,
    /// The target window's controls read again while the outline is shown, where the outline
    /// cannot see clicks.
    watch: Option<Watch>,
    /// Where this window was before it moved out of the target's way.
    home: Option<Home>,
    /// When the window opened: it is placed at its start position during [`PLACING`].
    opened: Instant,
    /// The outer size the window was last placed for: it is placed again only when that size
    /// changes (the window manager's frame arrived), never because someone moved it.
    placed_for: Option<Vec2>,
    /// The person's time zone, for the capture time.
    offset: UtcOffset,
}

impl Client {
    fn new(
        ctx: &egui::Context,
        selected: Option<String>,
        prompt: String,
        verbose: bool,
        offset: UtcOffset,
    ) -> Self {
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
            on_capture: false,
            outliner: outline::open(ctx),
            checked_at: Instant::now(),
            recheck_now: false,
            step_note: None,
            watch: None,
            home: None,
            opened: Instant::now(),
            placed_for: None,
            offset,
        };
        // Said at once, not first when an answer comes: the person knows from the start that
        // the target will not be framed on screen (a Wayland compositor without the layer shell).
        if let Err(problem) = &client.outliner {
            eprintln!("{}", problem.report(verbose));
        }
        client.start(Job::ListWindows);
        client
    }

    fn start(&mut self, job: Job) {
        self.error = None;
        self.busy = self.jobs.send(job).is_ok();
        if !self.busy {
            self.fail(Problem::new(
                "The background worker stopped, so nothing more can be captured or sent: close this window and start MSGuide again",
                None,
            ));
        }
    }

    /// Shows `problem` at the bottom of the window and prints it on stderr (with its detail
    /// when verbose).
    fn fail(&mut self, problem: Problem) {
        eprintln!("{}", problem.report(self.verbose));
        self.error = Some(problem);
    }

    /// Says why the target is not outlined, in the window and on stderr.
    fn refuse(&mut self, reason: String) {
        eprintln!("msguide-desktop: no outline: {reason}");
        self.refusal = Some(reason);
    }

    /// A fresh capture for review: the previous one, its answer and its outline are dropped,
    /// and this window comes back to where it was.
    fn capture_for_review(&mut self, ctx: &egui::Context, title: String) {
        let share_pixels = self.share_pixels;
        self.review_afresh(
            ctx,
            Job::Capture {
                title,
                share_pixels,
            },
        );
    }

    /// Drops the capture under review, its answer and its outline, brings this window back
    /// to where it was, and starts `job`, which captures afresh.
    fn review_afresh(&mut self, ctx: &egui::Context, job: Job) {
        self.capture = None;
        self.preview = None;
        self.consent = false;
        self.answer = None;
        self.drawn = None;
        self.refusal = None;
        self.step_note = None;
        self.remove_outline();
        self.come_back(ctx);
        self.start(job);
    }

    /// Puts the window at the monitor's top right corner (the demo window opens at the top
    /// left). The window manager frames the window a moment after it opens, which changes its
    /// outer size, so during [`PLACING`] the place is set again whenever the outer size changes;
    /// a move by the person (same size) is left alone.
    fn place_at_start(&mut self, ctx: &egui::Context) {
        if self.opened.elapsed() > PLACING {
            return;
        }
        ctx.request_repaint_after(Duration::from_millis(100));
        let (outer, monitor) = ctx.input(|i| (i.viewport().outer_rect, i.viewport().monitor_size));
        if let (Some(outer), Some(monitor)) = (outer, monitor)
            && self.placed_for != Some(outer.size())
        {
            self.placed_for = Some(outer.size());
            ctx.send_viewport_cmd(ViewportCommand::OuterPosition(place::start(
                monitor,
                outer.size(),
            )));
        }
    }

    /// Draws the outline around `rect`, on `window`, and moves this window out of its way.
    fn draw_outline(&mut self, ctx: &egui::Context, rect: ScreenRect, window: &WindowInfo) {
        if !window.placed || self.outliner.is_err() {
            // Nothing can be drawn where the target is: the capture in this window shows it.
            let Some(area) = self.capture.as_ref().map(|capture| capture.area()) else {
                return;
            };
            let at = ScreenRect {
                x: rect.x - area.x,
                y: rect.y - area.y,
                ..rect
            };
            eprintln!(
                "outline on the capture in this window at x={} y={} width={} height={} of its {}x{}",
                at.x, at.y, at.width, at.height, area.width, area.height
            );
            self.outline = Some(rect);
            self.on_capture = true;
            self.checked_at = Instant::now();
            return;
        }
        let shown = match self.outliner.as_mut() {
            Ok(outliner) => outliner.show(rect, window.id),
            Err(problem) => Err(problem.clone()),
        };
        if let Err(problem) = shown {
            self.fail(problem);
            return;
        }
        self.outline = Some(rect);
        self.checked_at = Instant::now();
        let points = ctx.pixels_per_point();
        let to_points = |r: ScreenRect| {
            Rect::from_min_size(
                pos2(r.x as f32 / points, r.y as f32 / points),
                vec2(r.width as f32 / points, r.height as f32 / points),
            )
        };
        let (window, target) = (to_points(window.bounds), to_points(outline::outer(rect)));
        #[cfg(target_os = "linux")]
        if local_core::desktop::session::Session::detect()
            == local_core::desktop::session::Session::Wayland
        {
            // egui cannot move a Wayland window; sway can, through its IPC, and KWin through
            // its scripting.
            if let Some(moved) = place::sway::aside(window, target) {
                self.home.get_or_insert(Home::Sway(moved));
            } else if let Some(moved) = place::kwin::aside(window, target) {
                self.home.get_or_insert(Home::Kwin(moved));
            }
            return;
        }
        let (outer, monitor) = ctx.input(|i| (i.viewport().outer_rect, i.viewport().monitor_size));
        if let (Some(outer), Some(monitor)) = (outer, monitor)
            && let Some(at) = place::aside(monitor, outer, window, target)
        {
            self.home.get_or_insert(Home::Here(outer.min));
            ctx.send_viewport_cmd(ViewportCommand::OuterPosition(at));
        }
    }

    fn remove_outline(&mut self) {
        // Dropping the watch stops its thread.
        self.watch = None;
        let on_capture = std::mem::take(&mut self.on_capture);
        if self.outline.take().is_some()
            && !on_capture
            && let Ok(outliner) = self.outliner.as_mut()
        {
            outliner.hide();
        }
    }

    /// Back to where the window was before it moved out of the target's way.
    fn come_back(&mut self, ctx: &egui::Context) {
        match self.home.take() {
            Some(Home::Here(at)) => ctx.send_viewport_cmd(ViewportCommand::OuterPosition(at)),
            #[cfg(target_os = "linux")]
            Some(Home::Sway(moved)) => place::sway::back(moved),
            #[cfg(target_os = "linux")]
            Some(Home::Kwin(moved)) => place::kwin::back(moved),
            None => {}
        }
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
                    // The upload went: the next one needs its own consent.
                    self.consent = false;
                    let (answer, window_now) = *answered;
                    self.answered(ctx, answer, window_now.as_ref());
                }
                Done::Answered(Err(unanswered)) => {
                    if unanswered.uploaded {
                        self.consent = false;
                    }
                    self.fail(unanswered.problem);
                }
                Done::Windows(Err(problem)) | Done::Captured(Err(problem)) => self.fail(problem),
            }
        }
    }

    /// Takes an answer: records the step in the task, and outlines its target when every
    /// check passes.
    fn answered(
        &mut self,
        ctx: &egui::Context,
        answer: GuidanceIn,
        window_now: Option<&WindowInfo>,
    ) {
        let Some(capture) = self.capture.clone() else {
            self.answer = Some(answer);
            return;
        };
        let sent = ObservationOut::from(&capture.observation);
        if let Err(problem) = self.task.answered(&sent, &answer) {
            self.fail(problem);
            self.answer = Some(answer);
            return;
        }
        let drawn = with_plan_target(&sent, &answer).unwrap_or_else(|| answer.clone());
        let checked = check_before_drawing(&capture, &drawn, window_now, OffsetDateTime::now_utc());
        match (checked, window_now) {
            (Ok(rect), Some(window)) => self.draw_outline(ctx, rect, window),
            (Ok(_), None) => self.refuse(crate::checks::DrawRefusal::WindowGone.to_string()),
            (Err(refusal), _) => self.refuse(refusal.to_string()),
        }
        if self.outline.is_some()
            && (self.on_capture
                || self
                    .outliner
                    .as_ref()
                    .is_ok_and(|outliner| !outliner.sees_clicks()))
        {
            self.watch = Some(Watch::start(ctx, &capture, &drawn));
        }
        self.drawn = Some(drawn);
        self.answer = Some(answer);
    }

    fn review(&mut self, ui: &mut egui::Ui) {
        let Some(capture) = &self.capture else { return };
        let o = &capture.observation;
        ui.separator();
        ui.strong("Exactly this will be sent:");
        ui.label(format!("Application: {}", o.application));
        ui.label(words::window_line(
            o.width,
            o.height,
            &words::local_time(o.captured_at, self.offset),
            o.elements.len(),
            o.automation_complete,
        ));
        egui::ScrollArea::both()
            .id_salt("elements")
            .max_height(160.0)
            .show(ui, |ui| {
                for e in &o.elements {
                    // One line each, however long: the area scrolls sideways instead.
                    ui.add(
                        egui::Label::new(
                            egui::RichText::new(words::element_line(e, o.width, o.height))
                                .monospace(),
                        )
                        .wrap_mode(egui::TextWrapMode::Extend),
                    );
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
            // The tick stays until the upload has gone (Client::receive).
            self.answer = None;
            self.drawn = None;
            self.refusal = None;
            self.step_note = None;
            let capture = capture.clone();
            self.remove_outline();
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
                Err(problem) => self.fail(problem),
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
        // With a plan, what to do now is its first step; the plan's own instruction is the
        // provider's note about the plan.
        let now = answer
            .plan
            .as_ref()
            .and_then(|plan| plan.steps.first())
            .map_or(answer.instruction.as_str(), |step| {
                step.instruction.as_str()
            });
        ui.strong(words::heading(&answer.status, now));
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
        if let Some(note) = self.step_note {
            ui.strong(note);
        }
        self.framed_capture(ui);
        let title = self.capture.as_ref().map(|c| c.window.title.clone());
        if let Some(title) = title
            && ui
                .add_enabled(!self.busy, egui::Button::new("Check next step"))
                .clicked()
        {
            self.capture_for_review(ui.ctx(), title);
        }
    }

    /// The capture with the target framed, where the frame cannot be shown on screen: the
    /// window's pixels when they were shared, else its controls' boxes and names.
    fn framed_capture(&self, ui: &mut egui::Ui) {
        let (true, Some(target), Some(capture)) = (self.on_capture, self.outline, &self.capture)
        else {
            return;
        };
        ui.label(ON_CAPTURE);
        let window = capture.area();
        let points = ui.ctx().pixels_per_point();
        let scale = picture_scale(
            window,
            points,
            PICTURE.min(vec2(ui.available_width(), PICTURE.y)),
        );
        let size = vec2(window.width as f32, window.height as f32) * scale;
        let (response, painter) = ui.allocate_painter(size, egui::Sense::hover());
        let picture = egui::emath::GuiRounding::round_to_pixels(response.rect, points);
        let place = |r: ScreenRect| {
            egui::emath::GuiRounding::round_to_pixels(
                on_picture(r, window, picture.min, scale),
                points,
            )
        };
        match &self.preview {
            Some(texture) => {
                let whole = Rect::from_min_max(pos2(0.0, 0.0), pos2(1.0, 1.0));
                painter.image(texture.id(), picture, whole, Color32::WHITE);
            }
            None => {
                painter.rect_filled(picture, 0.0, Color32::from_gray(32));
                let font = egui::FontId::proportional(11.0);
                for element in &capture.observation.elements {
                    let at = place(observe::on_screen(element.bounds, window));
                    painter.rect_stroke(
                        at,
                        0.0,
                        Stroke::new(1.0, Color32::GRAY),
                        egui::StrokeKind::Inside,
                    );
                    painter.text(
                        at.left_center() + vec2(2.0, 0.0),
                        egui::Align2::LEFT_CENTER,
                        &element.label,
                        font.clone(),
                        Color32::LIGHT_GRAY,
                    );
                }
            }
        }
        let frame = Stroke::new(outline::FRAME as f32 / points, OUTLINE.color);
        painter.rect_stroke(place(target), 0.0, frame, egui::StrokeKind::Outside);
    }

    /// What the outline saw: a click inside it (or, where it cannot see clicks, a change of the
    /// target element) takes the outline away at once and brings this window back; a change of
    /// the target window runs the checks at once.
    fn follow_outline(&mut self, ctx: &egui::Context) {
        let seen = match self.outliner.as_mut() {
            Ok(outliner) => outliner.poll(ctx),
            Err(_) => Vec::new(),
        };
        if self.outline.is_none() {
            return;
        }
        let changed = self
            .watch
            .as_ref()
            .is_some_and(|watch| watch.changed.try_recv().is_ok());
        if seen.contains(&Seen::ClickedInside) || changed {
            self.remove_outline();
            self.step_note = Some(if changed { TARGET_CHANGED } else { STEP_TAKEN });
            self.come_back(ctx);
            ctx.request_repaint();
        } else if seen.contains(&Seen::TargetChanged) {
            self.recheck_now = true;
        }
    }

    /// Checks a drawn outline again: it goes away, with the reason shown, once the capture is
    /// 60 s old or the window moved, changed or closed.
    fn recheck(&mut self, ctx: &egui::Context) {
        if self.outline.is_none() {
            return;
        }
        ctx.request_repaint_after(RECHECK);
        if !self.recheck_now && self.checked_at.elapsed() < RECHECK {
            return;
        }
        self.recheck_now = false;
        self.checked_at = Instant::now();
        let (Some(capture), Some(answer)) = (&self.capture, &self.drawn) else {
            return;
        };
        let window_now = match observe::windows() {
            Ok(windows) => windows.into_iter().find(|w| w.id == capture.window.id),
            Err(e) => {
                let problem = Problem::from(e);
                self.remove_outline();
                self.refuse(problem.message().to_owned());
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
            self.remove_outline();
            self.refuse(refusal.to_string());
        }
    }
}

/// Names the window's accessible frame after its title, as GTK and Qt do: egui leaves it
/// unnamed, and a screen reader, or a Wayland desktop whose only window list is the
/// accessibility bus (weston, GNOME), would have nothing else to call the window by.
pub fn name_window(ctx: &egui::Context, title: &str) {
    ctx.accesskit_node_builder(egui::accesskit_root_id(), |root| root.set_label(title));
}

impl eframe::App for Client {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        let ctx = ui.ctx().clone();
        name_window(&ctx, WINDOW_TITLE);
        self.place_at_start(&ctx);
        self.receive(&ctx);
        self.follow_outline(&ctx);
        // Errors in one place, below everything else, whatever is shown above.
        if let Some(problem) = &self.error {
            let (message, remedy) = (problem.message().to_owned(), problem.remedy());
            let mut asked = None;
            egui::Panel::bottom("problem").show(ui, |ui| {
                ui.add_space(4.0);
                ui.colored_label(Color32::RED, message);
                if let Some(remedy) = remedy
                    && ui
                        .add_enabled(!self.busy, egui::Button::new(remedy.label()))
                        .clicked()
                {
                    asked = Some(remedy);
                }
                ui.add_space(4.0);
            });
            if let (Some(Remedy::AllowPixels), Some(title)) = (asked, self.selected.clone()) {
                // The person asked for pixels: the next captures share them too.
                self.share_pixels = true;
                self.review_afresh(&ctx, Job::AllowPixels { title });
            }
        }
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
                self.capture_for_review(ui.ctx(), title);
            }
            if self.busy {
                ui.spinner();
            }
            egui::ScrollArea::vertical()
                .id_salt("review")
                .show(ui, |ui| {
                    self.review(ui);
                    self.answer(ui);
                });
        });
        self.recheck(&ctx);
    }
}

/// Points per window pixel for a capture of `window` drawn in at most `room` points: its own
/// size when it fits (one window pixel a screen pixel), else as large as fits.
fn picture_scale(window: ScreenRect, points_per_pixel: f32, room: Vec2) -> f32 {
    let own = 1.0 / points_per_pixel;
    let fit = (room.x / window.width.max(1) as f32).min(room.y / window.height.max(1) as f32);
    own.min(fit).max(0.0)
}

/// Where `r` (screen pixels) lies on a picture of `window` drawn from `origin` at `scale`
/// points per window pixel.
fn on_picture(r: ScreenRect, window: ScreenRect, origin: Pos2, scale: f32) -> Rect {
    let x = (i64::from(r.x) - i64::from(window.x)) as f32 * scale;
    let y = (i64::from(r.y) - i64::from(window.y)) as f32 * scale;
    Rect::from_min_size(
        origin + vec2(x, y),
        vec2(r.width as f32 * scale, r.height as f32 * scale),
    )
}

/// The target window's controls read again every [`RECHECK`] on a thread of their own, while
/// the outline is shown: a message comes once the target is no longer exactly one of them as
/// captured. A window that moved, changed title or closed is left to [`Client::recheck`].
struct Watch {
    /// Dropped to stop the thread.
    _stop: Sender<()>,
    /// One message once the target changed or went away.
    changed: Receiver<()>,
}

impl Watch {
    fn start(ctx: &egui::Context, capture: &WindowObservation, drawn: &GuidanceIn) -> Self {
        let (stop, stopped) = mpsc::channel();
        let (seen, changed) = mpsc::channel();
        let (window, drawn, ctx) = (capture.window.clone(), drawn.clone(), ctx.clone());
        std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(RECHECK) {
                let unchanged = observe::windows().is_ok_and(|windows| windows.contains(&window));
                if !unchanged {
                    continue;
                }
                let now = runtime.block_on(observe::observe(&window, false, Budget::default()));
                if let Ok(now) = now
                    && !target_still_there(&drawn, &now.observation)
                {
                    let _ = seen.send(());
                    ctx.request_repaint();
                    return;
                }
            }
        });
        Self {
            _stop: stop,
            changed,
        }
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
    ui.label(words::boundary(
        &boundary.kind,
        &boundary.reason,
        &boundary.needed,
    ));
}

/// Opens the window, with a window preselected and the request prefilled when given, and
/// runs until it is closed. Nothing is captured or sent until the user asks. With `verbose`,
/// each failure's technical detail is printed to stderr too. `offset` is the person's time
/// zone, read before any thread starts.
pub fn run(selected: Option<String>, prompt: String, verbose: bool, offset: UtcOffset) -> ExitCode {
    let options = eframe::NativeOptions {
        viewport: ViewportBuilder::default()
            .with_title(WINDOW_TITLE)
            .with_inner_size(SIZE),
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
                offset,
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

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: ScreenRect = ScreenRect {
        x: 0,
        y: 0,
        width: 480,
        height: 240,
    };

    #[test]
    fn a_capture_that_fits_is_drawn_at_its_own_pixels() {
        assert!((picture_scale(WINDOW, 1.0, PICTURE) - 1.0).abs() < f32::EPSILON);
        // At two pixels a point, a window pixel is half a point.
        assert!((picture_scale(WINDOW, 2.0, PICTURE) - 0.5).abs() < f32::EPSILON);
    }

    #[test]
    fn a_capture_too_large_is_shrunk_to_fit_both_ways() {
        let wide = ScreenRect {
            width: 1200,
            height: 300,
            ..WINDOW
        };
        assert!((picture_scale(wide, 1.0, PICTURE) - 0.5).abs() < f32::EPSILON);
        let tall = ScreenRect {
            width: 300,
            height: 720,
            ..WINDOW
        };
        assert!((picture_scale(tall, 1.0, PICTURE) - 0.5).abs() < f32::EPSILON);
    }

    #[test]
    fn the_target_lands_where_it_is_in_the_window() {
        let window = ScreenRect {
            x: 100,
            y: 50,
            ..WINDOW
        };
        let target = ScreenRect {
            x: 108,
            y: 106,
            width: 71,
            height: 20,
        };
        let at = on_picture(target, window, pos2(10.0, 20.0), 0.5);
        assert_eq!(at, Rect::from_min_size(pos2(14.0, 48.0), vec2(35.5, 10.0)));
    }
}
