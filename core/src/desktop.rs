//! Computer use on this machine's desktop: displays and screenshots, synthetic input, the
//! window list and focus, running apps and launching one, the clipboard, OS permissions, and
//! which of these this session can offer ([`probe`]). [`screenshot`] is the whole screenshot
//! sequence (rate slot, window lookup, capture, pointer, encoding, size limit) in one call.
//!
//! Everything here blocks (X11 round trips, pixel copies, encoders): callers run it on a
//! blocking thread, one operation at a time per machine ([`Desktop::one_at_a_time`]).
//! Nothing here logs what is on the screen, what is typed or what the clipboard holds.

pub mod action;
pub mod apps;
pub mod clipboard;
pub mod elements;
pub mod input;
#[cfg(target_os = "linux")]
pub mod portal;
pub mod probe;
pub mod screen;
pub mod screenshot;
pub mod session;
#[cfg(target_os = "linux")]
pub mod virtual_input;
#[cfg(target_os = "linux")]
pub mod wayland;
pub mod windows;

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::machine::exec::CommandLimiter;

/// Screenshots allowed per sliding minute (the reference's limit).
pub const SCREENSHOTS_PER_MINUTE: usize = crate::limits::SCREENSHOTS_PER_MINUTE as usize;

/// A rectangle in display-global pixels: origin at the primary display's top-left, x to the
/// right, y down, half-open (`x + width` is just outside).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rect {
    /// Left edge.
    pub x: i64,
    /// Top edge.
    pub y: i64,
    /// Width in pixels.
    pub width: u64,
    /// Height in pixels.
    pub height: u64,
}

impl Rect {
    /// The rectangle `[x1, y1, x2, y2]`, `None` when it has no area.
    #[must_use]
    pub fn from_corners([x1, y1, x2, y2]: [i64; 4]) -> Option<Self> {
        let width = u64::try_from(x2.checked_sub(x1)?).ok().filter(|w| *w > 0)?;
        let height = u64::try_from(y2.checked_sub(y1)?).ok().filter(|h| *h > 0)?;
        Some(Self {
            x: x1,
            y: y1,
            width,
            height,
        })
    }

    /// `[x1, y1, x2, y2]`.
    #[must_use]
    pub fn corners(&self) -> [i64; 4] {
        [self.x, self.y, self.right(), self.bottom()]
    }

    /// Just right of the last column.
    #[must_use]
    pub fn right(&self) -> i64 {
        self.x
            .saturating_add(i64::try_from(self.width).unwrap_or(i64::MAX))
    }

    /// Just below the last row.
    #[must_use]
    pub fn bottom(&self) -> i64 {
        self.y
            .saturating_add(i64::try_from(self.height).unwrap_or(i64::MAX))
    }

    /// Whether the pixel `(x, y)` lies inside.
    #[must_use]
    pub fn contains(&self, x: i64, y: i64) -> bool {
        (self.x..self.right()).contains(&x) && (self.y..self.bottom()).contains(&y)
    }

    /// The overlap of two rectangles, `None` when they do not overlap.
    #[must_use]
    pub fn intersect(&self, other: &Self) -> Option<Self> {
        let x1 = self.x.max(other.x);
        let y1 = self.y.max(other.y);
        Self::from_corners([
            x1,
            y1,
            self.right().min(other.right()),
            self.bottom().min(other.bottom()),
        ])
    }

    /// The smallest rectangle holding both.
    #[must_use]
    pub fn union(&self, other: &Self) -> Self {
        let x1 = self.x.min(other.x);
        let y1 = self.y.min(other.y);
        let x2 = self.right().max(other.right());
        let y2 = self.bottom().max(other.bottom());
        Self {
            x: x1,
            y: y1,
            width: u64::try_from(x2 - x1).unwrap_or(0),
            height: u64::try_from(y2 - y1).unwrap_or(0),
        }
    }
}

/// One monitor. Index 0 is the primary (the first one listed when none says it is primary,
/// as on Xvfb, which has no RandR primary).
#[derive(Debug, Clone, PartialEq)]
pub struct Display {
    /// Its place in the list: 0 for the primary.
    pub index: usize,
    /// Whether it is the primary display (always index 0).
    pub primary: bool,
    /// Where it sits in display-global physical pixels.
    pub rect: Rect,
    /// Physical pixels per logical pixel.
    pub scale: f64,
    /// The OS's own identifier of the monitor.
    pub os_id: u32,
}

impl Display {
    /// The size in logical pixels.
    #[must_use]
    pub fn logical_size(&self) -> (u64, u64) {
        let logical = |side: u64| {
            // Monitor sides are far below 2^52, so these conversions are exact.
            (side as f64 / self.scale).round() as u64
        };
        (logical(self.rect.width), logical(self.rect.height))
    }
}

/// One top-level window as the window system reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeWindow {
    /// The window system's id (an X11 window id, a Windows HWND).
    pub id: u32,
    /// The owning process, when the window system says.
    pub pid: Option<u32>,
    /// The application (X11 `WM_CLASS`, the process name elsewhere).
    pub app_name: String,
    /// The window's title.
    pub title: String,
    /// Where it is, display-global.
    pub bounds: Rect,
    /// Whether it is minimised.
    pub minimized: bool,
    /// Whether it is maximised.
    pub maximized: bool,
    /// Whether it has the input focus.
    pub focused: bool,
    /// Whether `bounds` is where the window is. A wlroots compositor other than sway says
    /// nothing of a window's geometry: there `bounds` is the outputs the window is on.
    pub placed: bool,
}

/// Why clipboard content was withheld.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConcealReason {
    /// Only what this shim wrote may be read back, and it wrote nothing recently.
    WritebackOnly,
    /// This shim wrote the clipboard, but something else has replaced it since.
    WritebackOverwritten,
    /// The owner marked the content as concealed (a password manager).
    ConcealedType,
}

impl ConcealReason {
    /// The wire name of the reason.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::WritebackOnly => "writeback_only",
            Self::WritebackOverwritten => "writeback_overwritten",
            Self::ConcealedType => "concealed_type",
        }
    }
}

/// Why a computer-use operation failed. Each variant carries what the wire's `details` needs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DesktopError {
    /// This session, OS or request shape cannot do it.
    #[error("{feature} is not supported here: {reason}")]
    NotSupported {
        /// The fine-grained feature name (`screenshot.region`, `input.key`, ...).
        feature: String,
        /// Why, in words.
        reason: String,
    },
    /// The window id names no live window any more, or its id was re-used.
    #[error("the window is gone or its id was re-used; list the windows again")]
    WindowStale {
        /// The id as the caller sent it.
        window_id: String,
    },
    /// A coordinate lies outside every display.
    #[error("the coordinate ({}, {}) is outside every display", .coordinate[0], .coordinate[1])]
    OutOfBounds {
        /// The offending point.
        coordinate: [i64; 2],
        /// Every display's index and rectangle.
        displays: Vec<(usize, Rect)>,
    },
    /// The clipboard holds something this policy does not reveal.
    #[error("the clipboard content is not readable under the current policy")]
    Concealed {
        /// Why.
        reason: ConcealReason,
        /// Seconds since this shim's own last write, when there was one.
        writeback_age_seconds: Option<u64>,
    },
    /// Bytes over the limit (a screenshot, clipboard content).
    #[error("{size} bytes exceed the limit of {limit} bytes")]
    TooLarge {
        /// The size found.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// An OS permission the operation needs is not granted.
    #[error("the {permission} permission has not been granted")]
    PermissionPending {
        /// The permission's name.
        permission: String,
    },
    /// Too many screenshots in the last minute.
    #[error("at most {per_minute} screenshots a minute")]
    RateLimited {
        /// The limit.
        per_minute: usize,
    },
    /// An element id from an accessibility snapshot names no element any more: unknown, or
    /// its window or the element itself changed since.
    #[error(
        "the element id {element_id} {reason}; take a new accessibility snapshot and use its ids"
    )]
    ElementStale {
        /// The id as the caller sent it.
        element_id: String,
        /// What is wrong, in words (`is unknown`, `is stale: its window is gone`, ...).
        reason: &'static str,
    },
    /// The window system or a device failed.
    #[error("the desktop operation failed: {0}")]
    Failed(String),
}

impl DesktopError {
    /// A [`DesktopError::NotSupported`].
    #[must_use]
    pub fn unsupported(feature: &str, reason: impl Into<String>) -> Self {
        Self::NotSupported {
            feature: feature.to_owned(),
            reason: reason.into(),
        }
    }

    /// The wire `ERROR.code` of PROTOCOL.md.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Self::NotSupported { .. } => "FEATURE_NOT_SUPPORTED",
            Self::WindowStale { .. } | Self::ElementStale { .. } => "WINDOW_STALE",
            Self::OutOfBounds { .. } => "INPUT_OUT_OF_BOUNDS",
            Self::Concealed { .. } => "CLIPBOARD_CONCEALED",
            Self::TooLarge { .. } => "FILE_TOO_LARGE",
            Self::PermissionPending { .. } => "PERMISSION_PENDING",
            Self::RateLimited { .. } => "SHIM_OVERLOADED",
            Self::Failed(_) => "INTERNAL_ERROR",
        }
    }

    /// The `details` object of the reference for this failure.
    #[must_use]
    pub fn details(&self) -> Option<Value> {
        Some(match self {
            Self::NotSupported { feature, reason } => {
                json!({ "feature": feature, "reason": reason })
            }
            Self::WindowStale { window_id } => {
                json!({ "window_id": window_id, "hint": "re-list windows" })
            }
            Self::ElementStale { element_id, .. } => {
                json!({ "element_id": element_id, "hint": "take a new accessibility snapshot" })
            }
            Self::OutOfBounds {
                coordinate,
                displays,
            } => json!({
                "requested_coordinate": coordinate,
                "displays": displays
                    .iter()
                    .map(|(index, rect)| json!({
                        "index": index,
                        "origin": [rect.x, rect.y],
                        "size": [rect.width, rect.height],
                    }))
                    .collect::<Vec<_>>(),
            }),
            Self::Concealed {
                reason,
                writeback_age_seconds,
            } => {
                let mut details = json!({ "reason": reason.as_str() });
                if let Some(age) = writeback_age_seconds {
                    details["writeback_age_seconds"] = json!(age);
                }
                details
            }
            Self::TooLarge { size, limit } => json!({ "size_bytes": size, "limit": limit }),
            Self::PermissionPending { permission } => {
                json!({ "permission": permission, "platform": std::env::consts::OS })
            }
            Self::RateLimited { per_minute } => json!({ "screenshots_per_minute": per_minute }),
            Self::Failed(_) => return None,
        })
    }
}

#[cfg(any(windows, target_os = "macos"))]
impl From<xcap::XCapError> for DesktopError {
    fn from(err: xcap::XCapError) -> Self {
        Self::Failed(err.to_string())
    }
}

/// The machine's computer-use state, shared by every connection: one operation at a time,
/// the screenshot rate, the minted window ids and the clipboard.
#[derive(Debug, Clone)]
pub struct Desktop {
    turn: Arc<Semaphore>,
    screenshots: CommandLimiter,
    /// Window ids minted by the last listing.
    pub windows: windows::Registry,
    /// Element ids minted by accessibility snapshots.
    pub elements: elements::Store,
    /// The clipboard, `None` unless the operator enabled it.
    pub clipboard: Option<clipboard::Clipboard>,
}

impl Desktop {
    /// The state for this machine; `clipboard` is the operator's clipboard policy, if any.
    #[must_use]
    pub fn new(clipboard: Option<clipboard::Policy>) -> Self {
        Self {
            turn: Arc::new(Semaphore::new(1)),
            screenshots: CommandLimiter::new(usize::MAX, SCREENSHOTS_PER_MINUTE),
            windows: windows::Registry::default(),
            elements: elements::Store::default(),
            clipboard: clipboard.map(clipboard::Clipboard::new),
        }
    }

    /// Waits for this machine's turn: computer-use operations never overlap, since two input
    /// sequences interleaved would each do something nobody asked for.
    pub async fn one_at_a_time(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.turn).acquire_owned().await.ok()
    }

    /// Counts one screenshot against the per-minute limit.
    ///
    /// # Errors
    /// [`DesktopError::RateLimited`] when the last minute already had its share.
    pub fn take_screenshot_slot(&self) -> Result<(), DesktopError> {
        self.screenshots
            .try_acquire()
            .map(drop)
            .map_err(|_| DesktopError::RateLimited {
                per_minute: SCREENSHOTS_PER_MINUTE,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rectangles_are_half_open() {
        let r = Rect::from_corners([0, 0, 1920, 1080]).unwrap();
        assert!(r.contains(0, 0) && r.contains(1919, 1079));
        assert!(!r.contains(1920, 0) && !r.contains(0, 1080) && !r.contains(-1, 5));
        assert_eq!(Rect::from_corners([5, 5, 5, 9]), None);
        assert_eq!(Rect::from_corners([5, 5, 4, 9]), None);
        let other = Rect::from_corners([1920, 0, 3200, 1024]).unwrap();
        assert_eq!(r.intersect(&other), None);
        assert_eq!(r.union(&other).corners(), [0, 0, 3200, 1080]);
        let part = Rect::from_corners([1900, 1000, 2000, 1100]).unwrap();
        assert_eq!(
            r.intersect(&part).unwrap().corners(),
            [1900, 1000, 1920, 1080]
        );
    }

    #[test]
    fn errors_carry_the_reference_details() {
        let err = DesktopError::OutOfBounds {
            coordinate: [5000, 10],
            displays: vec![(0, Rect::from_corners([0, 0, 1920, 1080]).unwrap())],
        };
        assert_eq!(err.code(), "INPUT_OUT_OF_BOUNDS");
        assert_eq!(
            err.details().unwrap(),
            json!({"requested_coordinate": [5000, 10],
                   "displays": [{"index": 0, "origin": [0, 0], "size": [1920, 1080]}]})
        );
        let concealed = DesktopError::Concealed {
            reason: ConcealReason::WritebackOnly,
            writeback_age_seconds: Some(31),
        };
        assert_eq!(
            concealed.details().unwrap(),
            json!({"reason": "writeback_only", "writeback_age_seconds": 31})
        );
        assert_eq!(
            DesktopError::WindowStale {
                window_id: "win_x".into()
            }
            .details()
            .unwrap(),
            json!({"window_id": "win_x", "hint": "re-list windows"})
        );
    }
}
