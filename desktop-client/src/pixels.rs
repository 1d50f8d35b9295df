//! Letting KDE Plasma give this client a window's pixels: KWin takes screenshots only for a
//! program an installed desktop entry allows (`local_core::desktop_entry`), and KDE's portal
//! asks in a dialog for every screenshot instead, so the client writes its own entry when the
//! person asks it to.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use local_core::{
    desktop_entry::{exec_word, screenshot_entry, user_applications},
    guide::observe::kwin_allows_this_program as kwin_allows,
};

use crate::problem::Problem;

/// The entry's file name, in the user's applications folder.
pub const ENTRY_NAME: &str = "msguide-desktop.desktop";
/// How long KWin gets to notice a new entry (about two seconds on KWin 5.27).
const NOTICED_WITHIN: Duration = Duration::from_secs(10);

/// What [`allow`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// KWin already gave this program screenshots; nothing was written.
    Already,
    /// The entry was written there, and KWin now gives this program screenshots.
    Written(PathBuf),
}

/// Writes this program's desktop entry (hidden, `Exec` this executable's `gui`) and waits
/// until KWin gives it screenshots.
///
/// # Errors
/// The [`Problem`] to show when this is not KDE Plasma, the entry cannot be written, or KWin
/// does not take it in time.
pub fn allow() -> Result<Allowed, Problem> {
    match kwin_allows() {
        None => return Err(not_kde()),
        Some(true) => return Ok(Allowed::Already),
        Some(false) => {}
    }
    let exe = std::env::current_exe().map_err(|e| {
        Problem::new(
            "msguide-desktop cannot tell where its own program file is, so it cannot name it in a desktop entry: start it by its full path and try again",
            Some(e.to_string()),
        )
    })?;
    let folder = user_applications().ok_or_else(|| {
        Problem::new(
            "Neither XDG_DATA_HOME nor HOME is set, so the desktop entry has nowhere to go: set HOME and try again",
            None,
        )
    })?;
    let path = folder.join(ENTRY_NAME);
    let entry = screenshot_entry(
        "MSGuide desktop client",
        "Lets KDE give the MSGuide desktop client a window's pixels (written by msguide-desktop)",
        &format!("{} gui", exec_word(&exe.to_string_lossy())),
    );
    std::fs::create_dir_all(&folder)
        .and_then(|()| std::fs::write(&path, entry))
        .map_err(|e| {
            Problem::new(
                format!(
                    "The desktop entry could not be written to {}: check that the folder is yours and writable, then try again",
                    path.display()
                ),
                Some(e.to_string()),
            )
        })?;
    let deadline = Instant::now() + NOTICED_WITHIN;
    while kwin_allows() != Some(true) {
        if Instant::now() >= deadline {
            return Err(Problem::new(
                format!(
                    "KWin has not taken the desktop entry written to {} within {} s: try again in a moment, or log out and in again",
                    path.display(),
                    NOTICED_WITHIN.as_secs()
                ),
                None,
            ));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Ok(Allowed::Written(path))
}

fn not_kde() -> Problem {
    Problem::new(
        "This desktop is not KDE Plasma, whose KWin is the one that needs a desktop entry to share a window's pixels: nothing was written",
        None,
    )
}
