//! The clipboard (text), with the reference's read policy: by default only what this shim
//! itself wrote in the last 30 seconds can be read back ("writeback only"); reading what
//! someone else put there needs the operator's explicit opt-in.
//!
//! One arboard handle lives as long as the process: on X11 the clipboard's content is served
//! by its owner, so dropping the handle right after a write would lose the content.
//! On Wayland the content goes through the compositor's data-control protocol instead
//! (`desktop::wayland::clipboard`), served by the Wayland connection's thread.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::{ConcealReason, DesktopError};

/// How long this shim's own write stays readable in writeback-only mode.
pub const WRITEBACK_WINDOW: Duration = Duration::from_secs(30);

/// What reads may return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Return content this shim did not write.
    pub read_foreign: bool,
}

/// The machine's clipboard handle and its writeback record.
#[derive(Debug, Clone)]
pub struct Clipboard {
    policy: Policy,
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    handle: Option<arboard::Clipboard>,
    last_write: Option<([u8; 32], Instant)>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("open", &self.handle.is_some())
            .field("written", &self.last_write.is_some())
            .finish()
    }
}

impl Clipboard {
    /// A clipboard reading under `policy`; the OS handle is opened on first use.
    #[must_use]
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            inner: Arc::new(Mutex::new(Inner::default())),
        }
    }

    fn with<T>(
        &self,
        f: impl FnOnce(
            &mut arboard::Clipboard,
            &mut Option<([u8; 32], Instant)>,
        ) -> Result<T, arboard::Error>,
    ) -> Result<T, DesktopError> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let Inner { handle, last_write } = &mut *inner;
        if handle.is_none() {
            *handle =
                Some(arboard::Clipboard::new().map_err(|e| DesktopError::Failed(e.to_string()))?);
        }
        let Some(handle) = handle.as_mut() else {
            return Err(DesktopError::Failed(
                "the clipboard could not be opened".to_owned(),
            ));
        };
        f(handle, last_write).map_err(|e| DesktopError::Failed(e.to_string()))
    }

    /// CLIPBOARD_WRITE of text: refused over `limit` UTF-8 bytes before the clipboard is
    /// touched, remembered for writeback reads.
    ///
    /// # Errors
    /// [`DesktopError::TooLarge`], or [`DesktopError::Failed`] when the clipboard fails.
    pub fn write(&self, text: &str, limit: u64) -> Result<(), DesktopError> {
        let size = u64::try_from(text.len()).unwrap_or(u64::MAX);
        if size > limit {
            return Err(DesktopError::TooLarge { size, limit });
        }
        let digest = hash(text);
        if let Some(set) = wayland_set(text) {
            set?;
            self.inner
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .last_write = Some((digest, Instant::now()));
            return Ok(());
        }
        self.with(|handle, last_write| {
            handle.set_text(text)?;
            *last_write = Some((digest, Instant::now()));
            Ok(())
        })
    }

    /// CLIPBOARD_READ of text under the policy.
    ///
    /// # Errors
    /// [`DesktopError::Concealed`] when the policy withholds it, [`DesktopError::TooLarge`]
    /// over `limit` bytes, [`DesktopError::Failed`] when the clipboard fails.
    pub fn read(&self, limit: u64) -> Result<String, DesktopError> {
        let (text, last_write) = if let Some(text) = wayland_get(limit) {
            let last_write = self
                .inner
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .last_write;
            (text?, last_write)
        } else {
            self.with(|handle, last_write| {
                // An empty or non-text clipboard reads as empty text, as the reference's tools do.
                let text = handle.get_text().or_else(|e| match e {
                    arboard::Error::ContentNotAvailable => Ok(String::new()),
                    other => Err(other),
                })?;
                Ok((text, *last_write))
            })?
        };
        if !self.policy.read_foreign {
            writeback_check(last_write, &text, Instant::now())?;
        }
        let size = u64::try_from(text.len()).unwrap_or(u64::MAX);
        if size > limit {
            return Err(DesktopError::TooLarge { size, limit });
        }
        Ok(text)
    }

    /// The live text, ignoring the policy: for restoring it after a paste, never returned
    /// to the platform.
    pub(super) fn raw_text(&self) -> Option<String> {
        if let Some(text) = wayland_get(u64::MAX) {
            return text.ok();
        }
        self.with(|handle, _| handle.get_text()).ok()
    }

    /// Sets the text without recording a writeback: a paste's temporary content.
    pub(super) fn set_raw_text(&self, text: &str) -> Result<(), DesktopError> {
        if let Some(set) = wayland_set(text) {
            return set;
        }
        self.with(|handle, _| handle.set_text(text))
    }
}

/// The Wayland clipboard's text, `None` outside a Wayland session.
fn wayland_get(limit: u64) -> Option<Result<String, DesktopError>> {
    #[cfg(target_os = "linux")]
    if super::session::Session::detect() == super::session::Session::Wayland {
        return Some(super::wayland::clipboard::get_text(limit));
    }
    let _ = limit;
    None
}

/// Sets the Wayland clipboard's text, `None` outside a Wayland session.
fn wayland_set(text: &str) -> Option<Result<(), DesktopError>> {
    #[cfg(target_os = "linux")]
    if super::session::Session::detect() == super::session::Session::Wayland {
        return Some(super::wayland::clipboard::set_text(text));
    }
    let _ = text;
    None
}

fn hash(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// The writeback-only rule: `live` is readable only if it is what this shim wrote, less
/// than [`WRITEBACK_WINDOW`] ago.
///
/// # Errors
/// [`DesktopError::Concealed`] naming why not.
pub fn writeback_check(
    last_write: Option<([u8; 32], Instant)>,
    live: &str,
    now: Instant,
) -> Result<(), DesktopError> {
    let Some((digest, at)) = last_write else {
        return Err(DesktopError::Concealed {
            reason: ConcealReason::WritebackOnly,
            writeback_age_seconds: None,
        });
    };
    let age = now.saturating_duration_since(at);
    if age > WRITEBACK_WINDOW {
        return Err(DesktopError::Concealed {
            reason: ConcealReason::WritebackOnly,
            writeback_age_seconds: Some(age.as_secs()),
        });
    }
    if hash(live) != digest {
        return Err(DesktopError::Concealed {
            reason: ConcealReason::WritebackOverwritten,
            writeback_age_seconds: Some(age.as_secs()),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_fresh_own_write_reads_back() {
        let t0 = Instant::now();
        let mine = Some((hash("secret"), t0));
        assert_eq!(
            writeback_check(mine, "secret", t0 + Duration::from_secs(29)),
            Ok(())
        );
        let reason = |r: Result<(), DesktopError>| match r {
            Err(DesktopError::Concealed {
                reason,
                writeback_age_seconds,
            }) => (reason, writeback_age_seconds),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            reason(writeback_check(None, "anything", t0)),
            (ConcealReason::WritebackOnly, None)
        );
        assert_eq!(
            reason(writeback_check(
                mine,
                "secret",
                t0 + Duration::from_secs(31)
            )),
            (ConcealReason::WritebackOnly, Some(31))
        );
        assert_eq!(
            reason(writeback_check(
                mine,
                "someone else's",
                t0 + Duration::from_secs(2)
            )),
            (ConcealReason::WritebackOverwritten, Some(2))
        );
    }
}
