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
    Invoke,
    Toggle,
    Select,
    Expand,
    Collapse,
    SetValue,
    Scroll,
}

/// A direction an element can scroll in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScrollDirection {
    Up,
    Down,
    Left,
    Right,
}

/// The state of a toggle control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToggleState {
    Off,
    On,
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
    pub role: String,
    pub label: String,
    pub bounds: Bounds,
    pub confidence: f64,
    pub process_id: Option<u32>,
    pub target_id: Option<String>,
    pub control_id: Option<String>,
    pub automation_id: Option<String>,
    pub framework_id: Option<String>,
    pub is_enabled: Option<bool>,
    pub is_offscreen: Option<bool>,
    pub targetable: Option<bool>,
    pub is_password: Option<bool>,
    pub is_read_only: Option<bool>,
    pub is_selected: Option<bool>,
    pub toggle_state: Option<ToggleState>,
    pub action: Option<UiAction>,
    pub value_hash: Option<String>,
    pub value_length: Option<u32>,
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
    pub id: String,
    pub window_id: String,
    pub application: String,
    pub captured_at: OffsetDateTime,
    pub width: u32,
    pub height: u32,
    pub ocr_text: String,
    pub elements: Vec<Element>,
    /// The sanitised screenshot, only when pixel sharing was approved.
    pub image: Option<SanitisedPng>,
    pub automation_complete: bool,
    pub resource_id: Option<String>,
}

/// The kind of answer a guidance result gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuidanceStatus {
    NextStep,
    Clarification,
    Completed,
    Blocked,
    NeedsInput,
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
    Demo,
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
    pub label: String,
    pub bounds: Bounds,
    pub confidence: f64,
    pub process_id: Option<u32>,
    pub target_id: Option<String>,
    pub control_id: Option<String>,
    pub automation_id: Option<String>,
    pub framework_id: Option<String>,
    pub is_enabled: Option<bool>,
    pub is_offscreen: Option<bool>,
    pub toggle_state: Option<ToggleState>,
    pub action: Option<UiAction>,
    pub value: Option<String>,
    pub scroll_direction: Option<ScrollDirection>,
    pub value_hash: Option<String>,
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
    pub source: String,
    pub title: String,
}

/// One guidance answer, as a provider returns it and as the route re-validates it.
#[derive(Debug, Clone, PartialEq)]
pub struct GuidanceResult {
    pub instruction: String,
    pub status: GuidanceStatus,
    pub target: Option<Target>,
    pub citations: Vec<Citation>,
    pub mode: Mode,
    pub remaining_work: Option<String>,
}
