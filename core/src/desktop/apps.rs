//! Running applications and launching one.
//!
//! Linux lists every process in `/proc` with its name and executable; without
//! `include_background` kernel threads (no executable) are left out. A launched program gets
//! its own process group, no inherited standard streams, only the safe environment of commands
//! plus the graphical session's variables, and is reaped when it exits.

// Launching here is not a command of `machine::exec` (no output captured, no budget, no
// timeout: the program outlives the request), but it takes exec's safe environment; and
// `/proc` is the process table, not a user's files, so neither goes through the owners.
#![allow(
    clippy::disallowed_methods,
    reason = "detached app launch with exec's safe environment; /proc reads"
)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

use super::DesktopError;
use super::windows::NativeWindow;
use crate::machine::exec::safe_env;

/// What a launched program keeps of the daemon's environment beyond exec's safe baseline: the
/// names that connect it to this graphical session (display and its authority, session bus,
/// runtime directory, session type and desktop, where `.desktop` entries and settings live).
const SESSION_NAMES: [&str; 9] = [
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "XDG_RUNTIME_DIR",
    "XDG_SESSION_TYPE",
    "XDG_CURRENT_DESKTOP",
    "XDG_DATA_DIRS",
    "XDG_CONFIG_DIRS",
    "DBUS_SESSION_BUS_ADDRESS",
];

/// A launched program's environment: [`safe_env`]'s baseline of `parent` (the daemon's
/// environment) with the [`SESSION_NAMES`] it has on top, and nothing else of it (no token, no
/// configuration).
fn launch_env(parent: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<(OsString, OsString)> {
    let parent: Vec<(OsString, OsString)> = parent.into_iter().collect();
    let session: BTreeMap<String, String> = parent
        .iter()
        .filter_map(|(name, value)| Some((name.to_str()?, value.to_str()?)))
        .filter(|(name, _)| SESSION_NAMES.contains(name))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    safe_env(parent, &session)
}

/// One running application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct App {
    /// Its process id.
    pub pid: u32,
    /// Its process name (Linux: `/proc/<pid>/comm`).
    pub name: String,
    /// The path of its executable, when this user may read it.
    pub executable: Option<String>,
    /// Whether one of its windows has the focus (known only with the window list).
    pub frontmost: bool,
    /// Top-level windows it owns, when the window list was available.
    pub window_count: Option<u32>,
}

/// The running applications; `windows` (when listed) gives window counts and the
/// frontmost one.
///
/// # Errors
/// [`DesktopError::NotSupported`] where listing is not implemented,
/// [`DesktopError::Failed`] when the process table cannot be read.
pub fn list(
    include_background: bool,
    windows: Option<&[NativeWindow]>,
) -> Result<Vec<App>, DesktopError> {
    let mut apps = platform::processes(include_background)?;
    for app in &mut apps {
        if let Some(windows) = windows {
            let owned = windows.iter().filter(|w| w.pid == Some(app.pid));
            app.window_count = Some(u32::try_from(owned.clone().count()).unwrap_or(u32::MAX));
            app.frontmost = owned.clone().any(|w| w.focused);
        }
    }
    Ok(apps)
}

/// What to launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// An executable (a path, or a name looked up on `PATH`), or on Linux a `.desktop` entry.
    pub executable: Option<String>,
    /// A macOS bundle id.
    pub bundle_id: Option<String>,
    /// Arguments for the program.
    pub args: Vec<String>,
}

/// Starts the program and returns its pid.
///
/// # Errors
/// [`DesktopError::NotSupported`] (`app.launch`) when nothing launchable was named here,
/// [`DesktopError::Failed`] when it cannot be started.
pub fn launch(request: &Launch) -> Result<u32, DesktopError> {
    let mut command = match (&request.executable, &request.bundle_id) {
        (Some(path), _) if Path::new(path).extension().is_some_and(|e| e == "desktop") => {
            desktop_entry(path)?
        }
        (Some(path), _) => {
            let mut command = Command::new(path);
            command.args(&request.args);
            command
        }
        (None, Some(bundle)) if cfg!(target_os = "macos") => {
            let mut command = Command::new("open");
            command
                .arg("-b")
                .arg(bundle)
                .arg("--args")
                .args(&request.args);
            command
        }
        (None, _) => {
            return Err(DesktopError::unsupported(
                "app.launch",
                "name the executable_path to launch on this OS",
            ));
        }
    };
    command
        .env_clear()
        .envs(launch_env(std::env::vars_os()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: a signal to the shim's group does not reach it.
        command.process_group(0);
    }
    let mut child = command
        .spawn()
        .map_err(|e| DesktopError::Failed(format!("the program could not be started: {e}")))?;
    let pid = child.id();
    // Reaped in the background so an exited program leaves no zombie behind.
    std::thread::spawn(move || child.wait());
    Ok(pid)
}

/// A `.desktop` entry is started by the desktop's own launcher, which reads its Exec line.
fn desktop_entry(path: &str) -> Result<Command, DesktopError> {
    let name = Path::new(path)
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| DesktopError::unsupported("app.launch", "the .desktop entry has no name"))?;
    let launcher = ["gtk-launch", "dex"]
        .into_iter()
        .find(|tool| on_path(tool))
        .ok_or_else(|| {
            DesktopError::unsupported(
                "app.launch",
                ".desktop entries need gtk-launch or dex; give the executable instead",
            )
        })?;
    let mut command = Command::new(launcher);
    command.arg(if launcher == "dex" { path } else { name });
    Ok(command)
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
}

#[cfg(target_os = "linux")]
mod platform {
    use super::{App, DesktopError};

    pub(super) fn processes(include_background: bool) -> Result<Vec<App>, DesktopError> {
        let entries = std::fs::read_dir("/proc")
            .map_err(|e| DesktopError::Failed(format!("the process table is unreadable: {e}")))?;
        let mut apps: Vec<App> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
                let dir = entry.path();
                let name = std::fs::read_to_string(dir.join("comm"))
                    .ok()?
                    .trim_end()
                    .to_owned();
                let executable = std::fs::read_link(dir.join("exe"))
                    .ok()
                    .map(|p| p.to_string_lossy().into_owned());
                // Kernel threads have no command line; other users' processes hide their
                // executable link but still show one.
                let kernel = std::fs::read(dir.join("cmdline")).map_or(true, |c| c.is_empty());
                (include_background || !kernel).then_some(App {
                    pid,
                    name,
                    executable,
                    frontmost: false,
                    window_count: None,
                })
            })
            .collect();
        apps.sort_by_key(|app| app.pid);
        Ok(apps)
    }
}

#[cfg(not(target_os = "linux"))]
mod platform {
    use super::{App, DesktopError};

    pub(super) fn processes(_include_background: bool) -> Result<Vec<App>, DesktopError> {
        Err(DesktopError::unsupported(
            "app.list",
            "listing applications is not implemented on this OS",
        ))
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_launched_program_is_listed_with_its_executable_and_gets_its_pid_back() {
        let pid = launch(&Launch {
            executable: Some("sleep".to_owned()),
            bundle_id: None,
            args: vec!["5".to_owned()],
        })
        .unwrap();
        // The kernel renames the child during exec a moment after spawn has returned, so a
        // listing at once may still show the parent's thread name.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let apps = loop {
            let apps = list(false, None).unwrap();
            let name = apps.iter().find(|a| a.pid == pid).map(|a| a.name.clone());
            if name.as_deref() == Some("sleep") || std::time::Instant::now() > deadline {
                break apps;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let app = apps
            .iter()
            .find(|a| a.pid == pid)
            .expect("the launched sleep is listed");
        assert_eq!(app.name, "sleep");
        assert!(
            app.executable
                .as_deref()
                .is_some_and(|e| e.ends_with("/sleep"))
        );
        assert!(apps.iter().any(|a| a.pid == std::process::id()));
        // Kernel threads (kthreadd is pid 2 on a normal kernel) only with include_background;
        // containers may have none, so only the inclusion direction is checked.
        assert!(list(true, None).unwrap().len() >= apps.len());
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }

    /// The daemon's own variables (here cargo's, which `cargo test` sets) stay behind; the
    /// safe baseline and the session's display come along. Read back from the real child.
    #[test]
    fn a_launched_program_gets_the_safe_environment_and_the_session() {
        let own: Vec<OsString> = std::env::vars_os()
            .map(|(name, _)| name)
            .filter(|name| name.to_str().is_some_and(|n| n.starts_with("CARGO")))
            .collect();
        assert!(!own.is_empty(), "run under cargo test, which sets CARGO_*");
        let pid = launch(&Launch {
            executable: Some("sleep".to_owned()),
            bundle_id: None,
            args: vec!["5".to_owned()],
        })
        .unwrap();
        // The environment is the exec'd program's once the kernel has renamed the child.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let environ = loop {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim_end() == "sleep" || std::time::Instant::now() > deadline {
                break std::fs::read(format!("/proc/{pid}/environ")).unwrap();
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let _ = Command::new("kill").arg(pid.to_string()).status();
        let names: Vec<&[u8]> = environ
            .split(|b| *b == 0)
            .filter_map(|entry| entry.split(|b| *b == b'=').next())
            .filter(|name| !name.is_empty())
            .collect();
        for name in &own {
            assert!(
                !names.contains(&name.as_encoded_bytes()),
                "{name:?} leaked into the launched program"
            );
        }
        assert!(names.contains(&b"PATH".as_slice()), "{names:?}");

        let parent = [
            ("PATH", "/usr/bin"),
            ("DISPLAY", ":7"),
            ("MSGUIDE_LOCAL_TOKEN", "secret"),
            ("AUTOGPT_SHIM_KEYCHAIN_PASSPHRASE", "secret"),
        ]
        .map(|(n, v)| (OsString::from(n), OsString::from(v)));
        let env = launch_env(parent);
        let names: Vec<&str> = env.iter().filter_map(|(n, _)| n.to_str()).collect();
        assert!(
            names.contains(&"PATH") && names.contains(&"DISPLAY"),
            "{names:?}"
        );
        assert!(!env.iter().any(|(_, value)| value == "secret"), "{names:?}");
    }

    #[test]
    fn launching_nothing_or_a_missing_program_is_a_clear_error() {
        let none = Launch {
            executable: None,
            bundle_id: Some("com.example".to_owned()),
            args: Vec::new(),
        };
        assert_eq!(launch(&none).unwrap_err().code(), "FEATURE_NOT_SUPPORTED");
        let missing = Launch {
            executable: Some("/nonexistent/program".to_owned()),
            ..none
        };
        assert!(
            launch(&missing)
                .unwrap_err()
                .to_string()
                .contains("could not be started")
        );
    }
}
