//! Computer-use payloads (capability `computer_use`): screenshots, input, cursor,
//! displays, windows, apps, clipboard and OS permissions.
//!
//! PROTOCOL.md gives full examples only for SCREENSHOT_* and INPUT_ACTION; the other
//! shapes follow the reference shim's field lists (COMPUTER_USE.md is not available here).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::codes::ErrorCode;
use super::messages::{Invalid, Payload};

/// SCREENSHOT_REQUEST `quality` when omitted.
pub const DEFAULT_SCREENSHOT_QUALITY: u8 = 75;

/// `[x1, y1, x2, y2]` in display-global, unscaled, top-left-origin pixels.
pub type Rect = [i64; 4];
/// `[x, y]` in display-global pixels.
pub type Point = [i64; 2];
/// `[width, height]`.
pub type Size = [u32; 2];

/// Screenshot encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    /// JPEG at `quality`.
    #[default]
    Jpeg,
    /// PNG.
    Png,
}

/// `SCREENSHOT_REQUEST` (platform → shim); `region` and `window_id` are exclusive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenshotRequestPayload {
    /// 0 = primary, -1 = all monitors stitched.
    #[serde(default)]
    pub monitor: i32,
    /// JPEG quality 1..=100.
    #[serde(default = "default_quality")]
    pub quality: u8,
    /// Optional capture rectangle.
    #[serde(default)]
    pub region: Option<Rect>,
    /// Optional window from WINDOW_LIST_RESPONSE.
    #[serde(default)]
    pub window_id: Option<String>,
    /// Encoding.
    #[serde(default)]
    pub format: ImageFormat,
    /// Overlay the OS cursor.
    #[serde(default = "yes")]
    pub include_cursor: bool,
}

impl Payload for ScreenshotRequestPayload {
    fn validate(&self) -> Result<(), Invalid> {
        if !(1..=100).contains(&self.quality) {
            return Err(Invalid::at("quality", "quality must be 1 to 100"));
        }
        if self.region.is_some() && self.window_id.is_some() {
            return Err(Invalid::at(
                "region",
                "region and window_id are mutually exclusive",
            ));
        }
        Ok(())
    }

    /// A format this shim cannot encode, a region it cannot capture, or region and window
    /// together (the reference's answer to an empty region and to both) is an unsupported
    /// feature; a window id of the wrong type names no live window.
    fn invalid_code(field: Option<&str>) -> ErrorCode {
        match field {
            Some("format" | "region") => ErrorCode::FeatureNotSupported,
            Some("window_id") => ErrorCode::WindowStale,
            _ => ErrorCode::InternalError,
        }
    }
}

const fn default_quality() -> u8 {
    DEFAULT_SCREENSHOT_QUALITY
}

const fn yes() -> bool {
    true
}

/// Where a capture sits in the virtual display (COMPUTER_USE.md Q1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScreenshotMeta {
    /// Top-left of the capture in display-global pixels.
    pub origin: Point,
    /// OS display identifier; kept as JSON because its type differs per OS.
    #[schemars(schema_with = "display_id_schema")]
    pub display_id: serde_json::Value,
}

/// `display_id`'s schema: a number where the OS numbers its displays (this shim sends the
/// output's id), a string where it names them.
fn display_id_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "anyOf": [{ "type": "integer" }, { "type": "string" }] })
}

/// `SCREENSHOT_RESPONSE` (shim → platform).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScreenshotResponsePayload {
    /// Base64 image bytes.
    pub image_base64: String,
    /// `image/jpeg` or `image/png`.
    pub mime_type: String,
    /// Pixel width.
    pub width: u32,
    /// Pixel height.
    pub height: u32,
    /// Monitor captured.
    pub monitor: i32,
    /// Echo of the requested region.
    pub region: Option<Rect>,
    /// Physical-to-logical scale.
    pub display_scale: f64,
    /// Logical size.
    pub logical_size: Size,
    /// Placement metadata.
    pub meta: ScreenshotMeta,
}

impl Payload for ScreenshotResponsePayload {}

/// `INPUT_ACTION.action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputActionKind {
    /// Left click at `coordinate`.
    LeftClick,
    /// Right click.
    RightClick,
    /// Double click.
    DoubleClick,
    /// Middle click.
    MiddleClick,
    /// Triple click.
    TripleClick,
    /// Move the pointer.
    MouseMove,
    /// Press `button`.
    MouseDown,
    /// Release `button`.
    MouseUp,
    /// Drag along `path`.
    Drag,
    /// Type `text`.
    Type,
    /// Press the chord in `key`.
    Key,
    /// Hold `key` for `duration_ms`.
    HoldKey,
    /// Scroll.
    Scroll,
    /// Wait `duration_ms`.
    Wait,
}

/// Mouse buttons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MouseButton {
    /// Left.
    Left,
    /// Middle.
    Middle,
    /// Right.
    Right,
}

/// Click/scroll modifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Modifier {
    /// Shift.
    Shift,
    /// Control.
    Ctrl,
    /// Alt / Option.
    Alt,
    /// Super / Command / Windows.
    Super,
}

/// Scroll direction; the spec lists up and down, the reference shim also scrolls sideways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScrollDirection {
    /// Up.
    Up,
    /// Down.
    Down,
    /// Left.
    Left,
    /// Right.
    Right,
}

/// `INPUT_ACTION` (platform → shim); answered with ACK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputActionPayload {
    /// What to do.
    pub action: InputActionKind,
    /// For click, move and scroll.
    #[serde(default)]
    pub coordinate: Option<Point>,
    /// For `type`.
    #[serde(default)]
    pub text: Option<String>,
    /// For `key` and `hold_key`, e.g. `ctrl+s`.
    #[serde(default)]
    pub key: Option<String>,
    /// For `scroll`.
    #[serde(default)]
    pub direction: Option<ScrollDirection>,
    /// For `scroll`: number of clicks.
    #[serde(default)]
    pub clicks: Option<u32>,
    /// For mouse_down, mouse_up and drag.
    #[serde(default)]
    pub button: Option<MouseButton>,
    /// For click and scroll.
    #[serde(default)]
    pub modifiers: Option<Vec<Modifier>>,
    /// Alternative to `clicks`.
    #[serde(default)]
    pub scroll_amount: Option<i64>,
    /// Alternative to `direction`.
    #[serde(default)]
    pub scroll_direction: Option<ScrollDirection>,
    /// For `hold_key` and `wait`.
    #[serde(default)]
    pub duration_ms: Option<u64>,
    /// For `drag`: `[[x, y], ...]`.
    #[serde(default)]
    pub path: Option<Vec<Point>>,
    /// For `type`: paste through the clipboard.
    #[serde(default)]
    pub paste: bool,
    /// For `type` with `paste`: restore the clipboard afterwards.
    #[serde(default)]
    pub preserve_clipboard: bool,
}

impl Payload for InputActionPayload {
    /// An action, button, modifier or direction this protocol does not define (or no action
    /// at all) is an operation the shim does not offer.
    fn invalid_code(field: Option<&str>) -> ErrorCode {
        match field {
            None | Some("action" | "button" | "modifiers" | "direction" | "scroll_direction") => {
                ErrorCode::FeatureNotSupported
            }
            _ => ErrorCode::InternalError,
        }
    }
}

/// `CURSOR_POSITION_RESPONSE` (shim → platform).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CursorPositionResponsePayload {
    /// Display-global x.
    pub x: i64,
    /// Display-global y.
    pub y: i64,
    /// Monitor index under the cursor.
    pub monitor: i64,
}

impl Payload for CursorPositionResponsePayload {}

/// One monitor of DISPLAY_INFO_RESPONSE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MonitorInfo {
    /// Index as used by `monitor` fields.
    pub index: i64,
    /// Primary display.
    pub primary: bool,
    /// Size in physical pixels.
    pub physical_size: Size,
    /// Size in logical pixels.
    pub logical_size: Size,
    /// Physical-to-logical scale.
    pub scale: f64,
    /// Top-left in display-global pixels.
    pub origin: Point,
}

/// `DISPLAY_INFO_RESPONSE` (shim → platform).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DisplayInfoResponsePayload {
    /// Every connected monitor.
    pub monitors: Vec<MonitorInfo>,
}

impl Payload for DisplayInfoResponsePayload {}

/// `WINDOW_LIST_REQUEST` (platform → shim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowListRequestPayload {
    /// Only windows of this app.
    #[serde(default)]
    pub app_bundle_id: Option<String>,
    /// Include minimised windows.
    #[serde(default)]
    pub include_minimized: bool,
    /// Include off-screen windows.
    #[serde(default)]
    pub include_offscreen: bool,
}

impl Payload for WindowListRequestPayload {}

/// One window of WINDOW_LIST_RESPONSE.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WindowInfo {
    /// Shim-minted `win_<uuid>`, valid until the next listing or HELLO.
    pub window_id: String,
    /// Owning process.
    pub pid: Option<u32>,
    /// Owning application.
    pub app_name: Option<String>,
    /// Application bundle id, where the OS has one.
    pub app_bundle_id: Option<String>,
    /// Title.
    pub title: Option<String>,
    /// `[x1, y1, x2, y2]`.
    pub bounds: Rect,
    /// Monitor index.
    pub monitor: Option<i64>,
    /// Has focus.
    pub is_focused: bool,
    /// Minimised.
    pub is_minimized: bool,
    /// Full screen.
    pub is_fullscreen: bool,
}

/// `WINDOW_LIST_RESPONSE` (shim → platform).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WindowListResponsePayload {
    /// Windows found.
    pub windows: Vec<WindowInfo>,
    /// The listing was cut short.
    pub truncated: bool,
}

impl Payload for WindowListResponsePayload {}

/// `WINDOW_FOCUS` (platform → shim); answered with ACK or `WINDOW_STALE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowFocusPayload {
    /// From WINDOW_LIST_RESPONSE.
    pub window_id: String,
    /// Also raise the window.
    #[serde(default = "yes")]
    pub raise: bool,
}

impl Payload for WindowFocusPayload {
    /// A missing or ill-typed window id maps to no live window.
    fn invalid_code(field: Option<&str>) -> ErrorCode {
        window_code(field)
    }
}

/// For requests whose only required field is `window_id`: that field missing (`None`) or of
/// the wrong type names no live window, so `WINDOW_STALE` tells the caller to list again.
fn window_code(field: Option<&str>) -> ErrorCode {
    match field {
        None | Some("window_id") => ErrorCode::WindowStale,
        _ => ErrorCode::InternalError,
    }
}

/// `APP_LIST_REQUEST` (platform → shim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppListRequestPayload {
    /// Include background processes.
    #[serde(default)]
    pub include_background: bool,
}

impl Payload for AppListRequestPayload {}

/// One app of APP_LIST_RESPONSE.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppInfo {
    /// Process id.
    pub pid: u32,
    /// Display name.
    pub name: String,
    /// Bundle id, where the OS has one.
    pub bundle_id: Option<String>,
    /// Executable path.
    pub executable_path: Option<String>,
    /// Frontmost app.
    pub is_frontmost: bool,
    /// Window count, when known.
    pub window_count: Option<u32>,
}

/// `APP_LIST_RESPONSE` (shim → platform).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppListResponsePayload {
    /// Running apps.
    pub apps: Vec<AppInfo>,
}

impl Payload for AppListResponsePayload {}

/// `APP_LAUNCH` (platform → shim); answered with ACK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppLaunchPayload {
    /// Bundle id (macOS).
    #[serde(default)]
    pub bundle_id: Option<String>,
    /// Executable or `.desktop` path.
    #[serde(default)]
    pub executable_path: Option<String>,
    /// Arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Bring to the front.
    #[serde(default = "yes")]
    pub activate: bool,
}

impl Payload for AppLaunchPayload {}

/// Clipboard content kind.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ClipboardFormat {
    /// Text.
    #[default]
    Text,
    /// Image (base64).
    Image,
}

/// `CLIPBOARD_READ` (platform → shim).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClipboardReadPayload {
    /// Kind to read.
    #[serde(default)]
    pub format: ClipboardFormat,
}

impl Payload for ClipboardReadPayload {
    fn invalid_code(field: Option<&str>) -> ErrorCode {
        clipboard_code(field)
    }
}

/// A clipboard format other than text and image is a feature no shim offers.
fn clipboard_code(field: Option<&str>) -> ErrorCode {
    match field {
        Some("format") => ErrorCode::FeatureNotSupported,
        _ => ErrorCode::InternalError,
    }
}

/// `CLIPBOARD_READ_RESPONSE` (shim → platform).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClipboardReadResponsePayload {
    /// Kind read.
    pub format: ClipboardFormat,
    /// The content.
    pub content: String,
    /// UTF-8 size in bytes.
    pub size_bytes: u64,
}

impl Payload for ClipboardReadResponsePayload {}

/// `CLIPBOARD_WRITE` (platform → shim); answered with ACK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClipboardWritePayload {
    /// Kind to write.
    #[serde(default)]
    pub format: ClipboardFormat,
    /// The content.
    pub content: String,
}

impl Payload for ClipboardWritePayload {
    fn invalid_code(field: Option<&str>) -> ErrorCode {
        clipboard_code(field)
    }
}

/// `PERMISSIONS_CHECK_REQUEST` (platform → shim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionsCheckRequestPayload {
    /// Permission names (`screen_recording`, `accessibility`, ...); empty asks for all.
    #[serde(default)]
    pub permissions: Vec<String>,
}

impl Payload for PermissionsCheckRequestPayload {}

/// The state of one OS permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionState {
    /// Granted.
    Granted,
    /// Denied.
    Denied,
    /// Could not be determined.
    Unknown,
    /// Does not exist on this OS.
    NotApplicable,
}

/// `PERMISSIONS_CHECK_RESPONSE` (shim → platform).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionsCheckResponsePayload {
    /// Permission name → state.
    pub permissions: BTreeMap<String, PermissionState>,
}

impl Payload for PermissionsCheckResponsePayload {}

/// Elements an A11Y_SNAPSHOT_REQUEST may ask for at most.
pub const MAX_A11Y_ELEMENTS: u32 = 500;
/// Deepest walk an A11Y_SNAPSHOT_REQUEST may ask for.
pub const MAX_A11Y_DEPTH: u32 = 64;
/// Longest deadline an A11Y_SNAPSHOT_REQUEST may ask for.
pub const MAX_A11Y_DEADLINE_MS: u64 = 10_000;

/// `A11Y_SNAPSHOT_REQUEST` (platform → shim), an additive 1.x extension advertised as the
/// fine feature `a11y.snapshot`: the accessibility elements of one listed window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct A11ySnapshotRequestPayload {
    /// From WINDOW_LIST_RESPONSE.
    pub window_id: String,
    /// Most elements returned, 1 to 500 (default 200).
    #[serde(default = "default_a11y_elements")]
    pub max_elements: u32,
    /// Deepest level walked below the window, 1 to 64 (default 32).
    #[serde(default = "default_a11y_depth")]
    pub max_depth: u32,
    /// Wall-clock budget of the walk in ms, 1 to 10000 (default 2000).
    #[serde(default = "default_a11y_deadline")]
    pub deadline_ms: u64,
}

const fn default_a11y_elements() -> u32 {
    200
}
const fn default_a11y_depth() -> u32 {
    32
}
const fn default_a11y_deadline() -> u64 {
    2000
}

impl Payload for A11ySnapshotRequestPayload {
    fn validate(&self) -> Result<(), Invalid> {
        if !(1..=MAX_A11Y_ELEMENTS).contains(&self.max_elements) {
            return Err(Invalid::at(
                "max_elements",
                format!("max_elements must be 1 to {MAX_A11Y_ELEMENTS}"),
            ));
        }
        if !(1..=MAX_A11Y_DEPTH).contains(&self.max_depth) {
            return Err(Invalid::at(
                "max_depth",
                format!("max_depth must be 1 to {MAX_A11Y_DEPTH}"),
            ));
        }
        if !(1..=MAX_A11Y_DEADLINE_MS).contains(&self.deadline_ms) {
            return Err(Invalid::at(
                "deadline_ms",
                format!("deadline_ms must be 1 to {MAX_A11Y_DEADLINE_MS}"),
            ));
        }
        Ok(())
    }

    fn invalid_code(field: Option<&str>) -> ErrorCode {
        window_code(field)
    }
}

/// One element of A11Y_SNAPSHOT_RESPONSE.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct A11yElement {
    /// A short id (`e12`) for ELEMENT_ACTION, unique within the snapshot; a later snapshot
    /// gives the same element the same id, and a changed one a new id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Lower-case UI Automation control type name (`button`, `edit`, `text`, ...).
    pub role: String,
    /// The accessible name.
    pub label: String,
    /// `[x1, y1, x2, y2]` in display-global pixels, like INPUT_ACTION coordinates.
    #[serde(rename = "box")]
    pub bounds: Rect,
    /// The states that hold: `enabled`, `focusable`, `focused`, `checked`, `selected`,
    /// `expanded`, `read_only`.
    pub states: Vec<String>,
}

/// `A11Y_SNAPSHOT_RESPONSE` (shim → platform).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct A11ySnapshotResponsePayload {
    /// Named, showing elements in document order; password fields are never included.
    pub elements: Vec<A11yElement>,
    /// A budget cut the walk short.
    pub truncated: bool,
}

impl Payload for A11ySnapshotResponsePayload {}

/// What ELEMENT_ACTION does to its element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElementActionKind {
    /// A left click at its centre.
    Click,
    /// A left click at its centre (to focus it), then `text` typed.
    Type,
}

/// `ELEMENT_ACTION` (platform → shim), an additive 1.x extension needing the fine features
/// `a11y.snapshot` and `input`: act on an element an A11Y_SNAPSHOT_RESPONSE named, at its
/// centre as it is now, once its window and the element are checked to be the same.
/// Answered with ACK, or WINDOW_STALE when the id is unknown or its window or element changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElementActionPayload {
    /// An element's `id` from A11Y_SNAPSHOT_RESPONSE.
    pub element_id: String,
    /// What to do.
    pub action: ElementActionKind,
    /// The text for `type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl Payload for ElementActionPayload {
    fn validate(&self) -> Result<(), Invalid> {
        match (self.action, &self.text) {
            (ElementActionKind::Type, None) => Err(Invalid::at("text", "type needs text")),
            (ElementActionKind::Click, Some(_)) => Err(Invalid::at("text", "click takes no text")),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screenshot_rules() {
        let ok: ScreenshotRequestPayload = serde_json::from_str("{}").unwrap();
        assert_eq!(
            (ok.quality, ok.format, ok.include_cursor),
            (75, ImageFormat::Jpeg, true)
        );
        assert_eq!(ok.validate(), Ok(()));
        for bad in [
            r#"{"quality": 0}"#,
            r#"{"quality": 101}"#,
            r#"{"region": [0,0,1,1], "window_id": "win_1"}"#,
        ] {
            let payload: ScreenshotRequestPayload = serde_json::from_str(bad).unwrap();
            assert!(payload.validate().is_err(), "{bad}");
        }
    }
}
