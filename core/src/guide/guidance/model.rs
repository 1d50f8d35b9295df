//! The observation a client consented to share, and the guidance result a provider returns.

use time::OffsetDateTime;

use crate::guide::png_sanitise::SanitisedPng;

/// A normalised box `[x, y, width, height]` inside the observed window.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Bounds {
    /// Left edge, 0–1.
    pub x: f64,
    /// Top edge, 0–1.
    pub y: f64,
    /// Width, above 0.
    pub width: f64,
    /// Height, above 0.
    pub height: f64,
}

impl Bounds {
    /// True when the box is non-empty and lies entirely inside the unit square.
    #[must_use]
    pub fn is_inside_unit_square(&self) -> bool {
        let unit = |v: f64| v.is_finite() && (0.0..=1.0).contains(&v);
        unit(self.x)
            && unit(self.y)
            && unit(self.width)
            && unit(self.height)
            && self.width > 0.0
            && self.height > 0.0
            && self.x + self.width <= 1.0
            && self.y + self.height <= 1.0
    }

    /// The four numbers in wire order.
    #[must_use]
    pub const fn to_array(self) -> [f64; 4] {
        [self.x, self.y, self.width, self.height]
    }
}

/// A UI Automation pattern action an element offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UiAction {
    /// Press it (a button, a link, a menu item).
    Invoke,
    /// Flip it between on and off (a checkbox).
    Toggle,
    /// Select it (a list item, a tab, a radio button).
    Select,
    /// Open it (a tree node, a combo box).
    Expand,
    /// Close it (a tree node, a combo box).
    Collapse,
    /// Replace its text with a value.
    SetValue,
    /// Scroll it in one of its directions.
    Scroll,
}

/// A direction an element can scroll in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScrollDirection {
    /// Towards the top.
    Up,
    /// Towards the bottom.
    Down,
    /// Towards the left edge.
    Left,
    /// Towards the right edge.
    Right,
}

/// The state of a toggle control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToggleState {
    /// Not checked.
    Off,
    /// Checked.
    On,
    /// Neither (a mixed tri-state checkbox).
    Indeterminate,
}

impl UiAction {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Invoke => "invoke",
            Self::Toggle => "toggle",
            Self::Select => "select",
            Self::Expand => "expand",
            Self::Collapse => "collapse",
            Self::SetValue => "set_value",
            Self::Scroll => "scroll",
        }
    }
}

impl ScrollDirection {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
            Self::Left => "left",
            Self::Right => "right",
        }
    }
}

impl ToggleState {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On => "on",
            Self::Indeterminate => "indeterminate",
        }
    }
}

/// One accessibility element of the observed window.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Element {
    /// The control type (`button`, `edit`, ...), 1–64 characters.
    pub role: String,
    /// Its accessible name, 1–256 characters.
    pub label: String,
    /// Where it is in the window.
    pub bounds: Bounds,
    /// How sure the capture is of this element, 0–1.
    pub confidence: f64,
    /// The process that owns it.
    pub process_id: Option<u32>,
    /// The id a guidance target names it by, unique in the observation.
    pub target_id: Option<String>,
    /// The id a plan step names it by, unique in the observation.
    pub control_id: Option<String>,
    /// The UI framework's automation id (may be empty).
    pub automation_id: Option<String>,
    /// The UI framework it belongs to (`WPF`, `Win32`, ...; may be empty).
    pub framework_id: Option<String>,
    /// Whether it accepts input.
    pub is_enabled: Option<bool>,
    /// Whether it is scrolled or hidden out of view.
    pub is_offscreen: Option<bool>,
    /// Whether the client lets guidance point at it.
    pub targetable: Option<bool>,
    /// Whether it is a password field.
    pub is_password: Option<bool>,
    /// Whether its value cannot be edited.
    pub is_read_only: Option<bool>,
    /// Whether it is selected.
    pub is_selected: Option<bool>,
    /// The state of a toggle control.
    pub toggle_state: Option<ToggleState>,
    /// The one action it offers.
    pub action: Option<UiAction>,
    /// The SHA-256 (lower-case hex) of its current value; the value itself is never sent.
    pub value_hash: Option<String>,
    /// The length of its current value, 0–1000.
    pub value_length: Option<u32>,
    /// The directions it can scroll in (at most four).
    pub scroll_directions: Vec<ScrollDirection>,
}

impl Element {
    /// Whether a provider may point the user at this element to act on it: the reference's
    /// "executable element" rule.
    #[must_use]
    pub fn is_executable(&self) -> bool {
        let Some(action) = self.action else {
            return false;
        };
        let basic = self.target_id.is_some()
            && self.confidence >= crate::limits::MIN_TARGET_CONFIDENCE
            && self.is_enabled == Some(true)
            && self.is_offscreen == Some(false)
            && self.targetable == Some(true)
            && self.is_password != Some(true);
        basic
            && match action {
                UiAction::SetValue => {
                    self.is_password == Some(false)
                        && self.is_read_only == Some(false)
                        && self.value_hash.is_some()
                        && self.value_length.is_some()
                }
                UiAction::Scroll => !self.scroll_directions.is_empty(),
                UiAction::Toggle => {
                    matches!(self.toggle_state, Some(ToggleState::On | ToggleState::Off))
                }
                UiAction::Invoke | UiAction::Select | UiAction::Expand | UiAction::Collapse => true,
            }
    }
}

/// What the user consented to share about one window.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// The client's id for this observation, echoed in the answer.
    pub id: String,
    /// The observed window's id, echoed in the answer.
    pub window_id: String,
    /// The application's name, 1–256 characters.
    pub application: String,
    /// When the client captured it.
    pub captured_at: OffsetDateTime,
    /// The window's width in pixels, 1–16384.
    pub width: u32,
    /// The window's height in pixels, 1–16384.
    pub height: u32,
    /// The window's text (on the desktop, its UI Automation names), at most 16000 characters.
    pub ocr_text: String,
    /// Its accessibility elements, at most 200.
    pub elements: Vec<Element>,
    /// The sanitised screenshot, only when pixel sharing was approved.
    pub image: Option<SanitisedPng>,
    /// Whether the element list is the whole window (the client did not stop at a budget).
    pub automation_complete: bool,
    /// The resource (document, ticket, ...) the window shows, when the client names one.
    pub resource_id: Option<String>,
}

/// The kind of answer a guidance result gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuidanceStatus {
    /// Here is the next step to take.
    NextStep,
    /// No step can be pointed at with confidence; the instruction asks the user to clarify.
    Clarification,
    /// The task is done.
    Completed,
    /// The task cannot go on from here.
    Blocked,
    /// The user must supply something first.
    NeedsInput,
    /// The task may be done; the user verifies it.
    CompletionCandidate,
}

impl GuidanceStatus {
    /// The wire spelling, also used in audit outcomes.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NextStep => "next_step",
            Self::Clarification => "clarification",
            Self::Completed => "completed",
            Self::Blocked => "blocked",
            Self::NeedsInput => "needs_input",
            Self::CompletionCandidate => "completion_candidate",
        }
    }
}

/// Whether the answer came from the deterministic demo or a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The deterministic demo provider answered.
    Demo,
    /// A model provider answered.
    Model,
}

impl Mode {
    /// The wire spelling.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Demo => "demo",
            Self::Model => "model",
        }
    }
}

/// The element a result points the user at.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Target {
    /// The element's accessible name.
    pub label: String,
    /// Where the element is in the window.
    pub bounds: Bounds,
    /// How sure the provider is, 0.8–1.
    pub confidence: f64,
    /// The process that owns the element.
    pub process_id: Option<u32>,
    /// The observed element's target id.
    pub target_id: Option<String>,
    /// The observed element's control id.
    pub control_id: Option<String>,
    /// The observed element's automation id.
    pub automation_id: Option<String>,
    /// The observed element's UI framework.
    pub framework_id: Option<String>,
    /// Whether the element accepts input.
    pub is_enabled: Option<bool>,
    /// Whether the element is out of view.
    pub is_offscreen: Option<bool>,
    /// The element's toggle state.
    pub toggle_state: Option<ToggleState>,
    /// The action the user should take on it.
    pub action: Option<UiAction>,
    /// The value to enter, only with `set_value`.
    pub value: Option<String>,
    /// The direction to scroll, only with `scroll`.
    pub scroll_direction: Option<ScrollDirection>,
    /// The element's value hash the step was planned against (`set_value`).
    pub value_hash: Option<String>,
    /// Whether the element is selected.
    pub is_selected: Option<bool>,
}

impl Target {
    /// A target copied from an observed element, as the demo provider builds it.
    #[must_use]
    pub fn from_element(element: &Element) -> Self {
        Self {
            label: element.label.clone(),
            bounds: element.bounds,
            confidence: element.confidence,
            process_id: element.process_id,
            target_id: element.target_id.clone(),
            control_id: element.control_id.clone(),
            automation_id: element.automation_id.clone(),
            framework_id: element.framework_id.clone(),
            is_enabled: element.is_enabled,
            is_offscreen: element.is_offscreen,
            toggle_state: element.toggle_state,
            action: element.action,
            value: None,
            scroll_direction: None,
            value_hash: None,
            is_selected: None,
        }
    }
}

/// A source a result cites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Citation {
    /// Where it comes from (a URL or a document name).
    pub source: String,
    /// Its title.
    pub title: String,
}

/// One guidance answer, as a provider returns it and as the route re-validates it.
#[derive(Debug, Clone, PartialEq)]
pub struct GuidanceResult {
    /// What to tell the user to do.
    pub instruction: String,
    /// The kind of answer.
    pub status: GuidanceStatus,
    /// The element the instruction points at, if any.
    pub target: Option<Target>,
    /// Sources the answer cites (none for the demo).
    pub citations: Vec<Citation>,
    /// Which provider answered.
    pub mode: Mode,
    /// What is left of the task after this step, when the provider says.
    pub remaining_work: Option<String>,
    /// A segment of several steps, when the request asked for one (`planSegments`).
    pub plan: Option<PlanSegment>,
}

/// Where a multi-step task stands, as the client reports it (`task`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskProgress {
    /// The client's id of the task: a lower-case UUID.
    pub task_id: String,
    /// The number of the step now asked for, 1–10000.
    pub step: u32,
    /// How the client sees the task.
    pub status: TaskStatus,
    /// Earlier steps, at most 16, numbered strictly increasing and all below `step`.
    pub history: Vec<TaskStep>,
    /// What the client says is left, at most 1000 characters (may be empty).
    pub remaining_work: String,
    /// What the user typed for the task, at most 1000 characters (may be empty).
    pub user_input: String,
    /// The plan the client is following, if any.
    pub plan: Option<PlanSegment>,
    /// How many of the plan's steps are done, 0–32 and at most the plan's step count.
    pub plan_cursor: u32,
    /// Why the client asks for a new plan, at most 500 characters.
    pub replan_reason: Option<String>,
}

/// How the client sees its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Under way (the default).
    Running,
    /// At a checkpoint the user confirmed.
    Checkpoint,
    /// Cannot go on.
    Blocked,
    /// Waits for the user's input.
    NeedsInput,
    /// Waits for the user's review.
    ReviewRequired,
    /// The last step changed nothing.
    NoProgress,
    /// The client cannot tell.
    Unknown,
    /// The user stopped it.
    Cancelled,
    /// It failed.
    Failed,
}

/// One step the task already took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStep {
    /// Its number, 1–10000.
    pub step: u32,
    /// The observation it was planned on.
    pub observation_id: String,
    /// The observation taken after it, when there was one.
    pub after_observation_id: Option<String>,
    /// The element it acted on.
    pub target_id: String,
    /// That element's label.
    pub label: String,
    /// What was done to it.
    pub action: UiAction,
    /// What the client saw happen.
    pub outcome: StepOutcome,
}

/// What a step the task took led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome {
    /// The intended effect was seen.
    EffectObserved,
    /// The screen changed.
    ScreenChanged,
    /// Nothing changed.
    NoProgress,
    /// The client cannot tell.
    Unknown,
    /// The step was not taken.
    NotInvoked,
}

/// Several steps planned on one observation, and where the plan stops (`plan`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanSegment {
    /// A fresh lower-case UUIDv4 per answer.
    pub plan_id: String,
    /// The observed window's id.
    pub window_id: String,
    /// The observed resource's id, when the observation named one.
    pub resource_id: Option<String>,
    /// At most 32 steps.
    pub steps: Vec<PlanStep>,
    /// Why the plan stops where it does.
    pub boundary: PlanBoundary,
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanStep {
    /// An action on an element, or something the user does by hand.
    pub kind: PlanStepKind,
    /// What to tell the user, 1–500 characters, not blank.
    pub instruction: String,
    /// The element the action is meant for (action steps only).
    pub intent: Option<PlanIntent>,
    /// The observed element's control id, when the step is bound to one.
    pub control_id: Option<String>,
    /// The value to enter (`set_value` only).
    pub value: Option<String>,
    /// The direction to scroll (`scroll` only).
    pub scroll_direction: Option<ScrollDirection>,
    /// The element's value hash the step was planned against (`set_value` only).
    pub value_hash: Option<String>,
}

/// Whether a plan step is an action on an element or a manual step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanStepKind {
    /// An action on an element the intent describes.
    Action,
    /// Something the user does that no element stands for; only ever the last step.
    Manual,
}

/// The element a plan step is meant for, described rather than pointed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanIntent {
    /// The control type, 1–64 characters.
    pub role: String,
    /// Its accessible name, 1–256 characters.
    pub label: String,
    /// What to do with it.
    pub action: UiAction,
    /// Its automation id, at most 256 characters.
    pub automation_id: Option<String>,
    /// Its UI framework, at most 256 characters.
    pub framework_id: Option<String>,
    /// Its toggle state: on or off for `toggle`, absent otherwise.
    pub toggle_state: Option<ToggleState>,
    /// `false` for `select`, absent otherwise.
    pub is_selected: Option<bool>,
}

/// Where and why a plan stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanBoundary {
    /// The kind of stop.
    pub kind: BoundaryKind,
    /// Why, 1–500 characters, not blank.
    pub reason: String,
    /// What is needed to go on, at most 1000 characters; not blank unless `completion_candidate`.
    pub needed: String,
}

/// The kind of stop at a plan's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundaryKind {
    /// The task may be done once the steps are taken.
    CompletionCandidate,
    /// Another resource is needed.
    Resource,
    /// The user must supply something.
    NeedsInput,
    /// A permission is needed.
    Permission,
    /// A fresh observation is needed.
    Observation,
    /// The rest is not supported.
    Unsupported,
    /// The plan reached its step limit.
    PlanLimit,
}

crate::guide::wire_names! {
    TaskStatus {
        Running => "running",
        Checkpoint => "checkpoint",
        Blocked => "blocked",
        NeedsInput => "needs_input",
        ReviewRequired => "review_required",
        NoProgress => "no_progress",
        Unknown => "unknown",
        Cancelled => "cancelled",
        Failed => "failed",
    }
    StepOutcome {
        EffectObserved => "effect_observed",
        ScreenChanged => "screen_changed",
        NoProgress => "no_progress",
        Unknown => "unknown",
        NotInvoked => "not_invoked",
    }
    PlanStepKind {
        Action => "action",
        Manual => "manual",
    }
    BoundaryKind {
        CompletionCandidate => "completion_candidate",
        Resource => "resource",
        NeedsInput => "needs_input",
        Permission => "permission",
        Observation => "observation",
        Unsupported => "unsupported",
        PlanLimit => "plan_limit",
    }
}
