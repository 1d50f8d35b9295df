//! `msguide start`: every refusal first (missing binaries, busy port, no state directory),
//! then the token, the API child and its readiness, then the session bus when none is running
//! ([`crate::bus`]) and the desktop child (or, headless, the one message saying how to reach
//! the API), and supervision until a child exits or a stop signal arrives. Every way out stops
//! the children (the session bus it started among them) and drops the token.

use std::{
    ffi::{OsStr, OsString},
    io::{self, Write},
    path::PathBuf,
    process::ExitStatus,
};

use local_core::{env_names, signals::StopSignals};
use tokio::process::Child;

use crate::{
    bus::{self, Plan, SessionBus},
    children,
    cli::StartArgs,
    env::{self, ChildEnv},
    paths::{self, API_BINARY, BACKEND_LOG, DESKTOP_BINARY, Os},
    probe::{self, PortError},
    readiness::{Probe, READINESS_BUDGET, Stage},
    token::{LaunchToken, TokenError, wipe},
};

/// What `start` needs from the outside world, gathered once in `main`.
#[derive(Debug)]
pub struct Context {
    /// The directory of the launcher's own executable, where its siblings are.
    pub own_dir: PathBuf,
    /// The system, for the state directory's convention.
    pub os: Os,
    /// The launcher's environment, which the children inherit.
    pub vars: Vec<(OsString, OsString)>,
}

/// Why `start` refused or failed; each message is one line.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The stop signals could not be hooked.
    #[error(
        "cannot watch for Ctrl-C and SIGTERM ({}), so the API could not be stopped cleanly: start again, and report it if it stays",
        local_core::io_words::kind_words(.0.kind())
    )]
    Signals(io::Error),
    /// `msguide-api` is not next to the launcher.
    #[error(
        "{API_BINARY} is missing next to the launcher ({}); build it first: cargo build --release -p msguide-api",
        .0.display()
    )]
    ApiMissing(PathBuf),
    /// The desktop client is not next to the launcher (it is not in this build yet).
    #[error(
        "the desktop client is not in this build ({} is missing); run `msguide start --headless` to serve the API alone",
        .0.display()
    )]
    DesktopMissing(PathBuf),
    /// The port is busy or cannot be bound.
    #[error(transparent)]
    Port(#[from] PortError),
    /// Neither the state directory's variable nor a home directory is set.
    #[error(
        "cannot find the per-user state directory for the logs: set HOME (LOCALAPPDATA on Windows)"
    )]
    NoStateDir,
    /// The state directory cannot be created.
    #[error(
        "cannot create the state directory {} for the logs ({}): fix the permissions of its parent, or set XDG_STATE_HOME (LOCALAPPDATA on Windows) to a writable folder",
        .path.display(),
        local_core::io_words::kind_words(*.kind)
    )]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        kind: io::ErrorKind,
    },
    /// No token could be drawn.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// A child could not be started.
    #[error(
        "cannot start {name} ({}): check that it is an executable file next to the launcher, or rebuild with cargo build --release --workspace --bins",
        local_core::io_words::kind_words(*.kind)
    )]
    Spawn {
        /// The binary.
        name: &'static str,
        /// What went wrong.
        kind: io::ErrorKind,
    },
    /// The API did not become ready; it has been stopped.
    #[error(
        "{API_BINARY} was not ready: {cause} (stage={stage}, lastError={last_error}); its diagnostic log {} says why, fix that and start again",
        .log.display()
    )]
    NotReady {
        /// The deadline, or the child's exit.
        cause: String,
        /// Where readiness was stuck.
        stage: Stage,
        /// The last failed attempt's error.
        last_error: String,
        /// The API's diagnostic log.
        log: PathBuf,
    },
}

/// How a started launch ended, once every child is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Ctrl-C, SIGTERM or SIGHUP, before or after the API was ready.
    Signal,
    /// The API exited by itself (`None`: its status could not be read).
    ApiExited(Option<ExitStatus>),
    /// The desktop client exited, normally because the user closed it.
    DesktopExited(Option<ExitStatus>),
}

impl Ended {
    /// The launcher's exit code: 0 after a stop signal or a desktop client that exited
    /// cleanly; otherwise the child's code, or 1 when it has none (killed) or it is 0 (the API
    /// never ends by itself when all is well).
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Signal => 0,
            Self::DesktopExited(Some(status)) if status.success() => 0,
            Self::ApiExited(status) | Self::DesktopExited(status) => status
                .and_then(|status| status.code())
                .and_then(|code| u8::try_from(code).ok())
                .filter(|code| *code != 0)
                .unwrap_or(1),
        }
    }
}

/// What ended the wait for readiness.
enum Readiness {
    Ready,
    Interrupted,
    Exited(Option<ExitStatus>),
    Deadline,
}

/// Runs `msguide start` to its end.
pub async fn run(args: &StartArgs, context: Context) -> Result<Ended, StartError> {
    let api_program = paths::sibling(&context.own_dir, API_BINARY);
    if !api_program.is_file() {
        return Err(StartError::ApiMissing(api_program));
    }
    let desktop_program = if args.headless {
        None
    } else {
        let program = paths::sibling(&context.own_dir, DESKTOP_BINARY);
        if !program.is_file() {
            return Err(StartError::DesktopMissing(program));
        }
        Some(program)
    };
    probe::ensure_free(args.port)?;
    let inherited = ChildEnv::inherit(context.vars);
    let state_dir = paths::state_dir(context.os, |name| {
        inherited.get(name).map(OsStr::to_os_string)
    })
    .ok_or(StartError::NoStateDir)?;
    paths::create_private_dir(&state_dir).map_err(|err| StartError::StateDir {
        path: state_dir.clone(),
        kind: err.kind(),
    })?;
    let log = state_dir.join(BACKEND_LOG);

    let token = LaunchToken::mint()?;
    // Before any child exists, so a stop signal can never kill the launcher and orphan one.
    // Ctrl-C, SIGTERM and SIGHUP (the terminal went away), hooked before any child starts so
    // none of them can kill the launcher while a child runs.
    let mut signals = StopSignals::install(true).map_err(StartError::Signals)?;
    let api_env = env::api_env(inherited, &token, args.port, &state_dir);
    eprintln!(
        "msguide: starting {API_BINARY} on 127.0.0.1:{} (diagnostic log {})",
        args.port,
        log.display()
    );
    let port = args.port.to_string();
    let api_args = ["--host", "127.0.0.1", "--port", &port].map(OsStr::new);
    let mut api =
        children::spawn(&api_program, &api_args, &api_env).map_err(|err| StartError::Spawn {
            name: API_BINARY,
            kind: err.kind(),
        })?;

    let mut probe = Probe::new(probe::loopback(args.port));
    let readiness = tokio::select! {
        biased;
        () = signals.recv() => Readiness::Interrupted,
        status = api.wait() => Readiness::Exited(status.ok()),
        ready = tokio::time::timeout(READINESS_BUDGET, probe.until_ready(&token)) => {
            ready.map_or(Readiness::Deadline, |()| Readiness::Ready)
        }
    };
    let cause = match readiness {
        Readiness::Ready => None,
        Readiness::Interrupted => {
            eprintln!("msguide: stopping {API_BINARY} before it was ready");
            shut(&mut api, API_BINARY).await;
            return Ok(Ended::Signal);
        }
        Readiness::Exited(status) => Some(format!("it exited ({})", describe(status))),
        Readiness::Deadline => Some(format!("not ready within {} s", READINESS_BUDGET.as_secs())),
    };
    if let Some(cause) = cause {
        shut(&mut api, API_BINARY).await;
        let (stage, last_error) = probe.last_failure();
        return Err(StartError::NotReady {
            cause,
            stage,
            last_error: last_error.to_owned(),
            log,
        });
    }
    eprintln!("msguide: ready");

    // The desktop client reads windows through the session bus: started here when missing.
    let mut session_bus = match desktop_program {
        Some(_) => session_bus(&api_env, &state_dir).await,
        None => None,
    };
    let bus_address = session_bus.as_ref().map(|bus| bus.address.as_str());
    let mut desktop = match desktop_program {
        Some(program) => match start_desktop(&program, &api_env, &state_dir, bus_address) {
            Ok(child) => Some(child),
            Err(err) => {
                if let Some(bus) = session_bus.as_mut() {
                    shut(&mut bus.child, "the session bus").await;
                }
                shut(&mut api, API_BINARY).await;
                return Err(err);
            }
        },
        None => {
            announce_headless(context.os, args.port, api.id(), &token);
            None
        }
    };

    // Supervision: whichever comes first ends the launch. A stop signal is checked first, so
    // a Ctrl-C that also reached the children (same process group) counts as a stop, not as
    // a child dying.
    let ended = tokio::select! {
        biased;
        () = signals.recv() => Ended::Signal,
        status = api.wait() => Ended::ApiExited(status.ok()),
        status = children::wait_optional(&mut desktop) => Ended::DesktopExited(status.ok()),
    };
    match ended {
        Ended::Signal => eprintln!("msguide: stopping"),
        Ended::ApiExited(status) => eprintln!(
            "msguide: {API_BINARY} exited on its own ({}); stopping",
            describe(status)
        ),
        Ended::DesktopExited(status) => eprintln!(
            "msguide: {DESKTOP_BINARY} exited ({}); stopping",
            describe(status)
        ),
    }
    if let Some(desktop) = desktop.as_mut() {
        shut(desktop, DESKTOP_BINARY).await;
    }
    if let Some(bus) = session_bus.as_mut() {
        shut(&mut bus.child, "the session bus").await;
    }
    shut(&mut api, API_BINARY).await;
    drop(api_env);
    drop(token);
    eprintln!("msguide: stopped");
    Ok(ended)
}

/// The session bus this launch starts for the desktop client, when none is running; each
/// way it can be missing is said in one line naming the fix, and the launch goes on (the
/// client then says the same when it cannot read a window).
async fn session_bus(env: &ChildEnv, state_dir: &std::path::Path) -> Option<SessionBus> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let Plan::Start { address, shared } = bus::plan(env, state_dir) else {
        return None;
    };
    let started = match bus::start(&address, env).await {
        Ok(started) => started,
        Err(err) => {
            eprintln!("msguide: {err}");
            return None;
        }
    };
    if shared {
        eprintln!(
            "msguide: no session bus was running, so one was started at {}; applications started from now on find it, and it stops with msguide",
            started.address
        );
    } else {
        eprintln!(
            "msguide: no session bus was running, so one was started for the desktop client; start the application to guide with DBUS_SESSION_BUS_ADDRESS={} so its controls can be read",
            started.address
        );
    }
    if !bus::at_spi_installed(env) {
        eprintln!("msguide: {}", bus::AT_SPI_MISSING);
    }
    Some(started)
}

/// Starts the desktop client against the ready API: the API's environment without model
/// credentials, with the session bus this launch started (if it started one), and no
/// arguments (it reads `MSGUIDE_API_URL` and `MSGUIDE_LOCAL_TOKEN`).
fn start_desktop(
    program: &std::path::Path,
    api_env: &ChildEnv,
    state_dir: &std::path::Path,
    bus_address: Option<&str>,
) -> Result<Child, StartError> {
    eprintln!("msguide: starting {DESKTOP_BINARY}");
    let desktop_env = env::desktop_env(api_env, state_dir, bus_address);
    children::spawn(program, &[], &desktop_env).map_err(|err| StartError::Spawn {
        name: DESKTOP_BINARY,
        kind: err.kind(),
    })
}

/// Stops a child, saying so when that fails (it then dies with the launcher's `kill_on_drop`).
async fn shut(child: &mut Child, name: &str) {
    if let Err(err) = children::stop(child).await {
        eprintln!("msguide: cannot stop {name}: {err}");
    }
}

fn describe(status: Option<ExitStatus>) -> String {
    status.map_or_else(|| "status unknown".to_owned(), |status| status.to_string())
}

/// Prints, once and to stdout only, how to reach the headless API: its URL, the token and an
/// example request. This is the only place the token is ever shown; a headless user has no
/// other way to call the API, and the token dies with the launcher.
fn announce_headless(os: Os, port: u16, pid: Option<u32>, token: &LaunchToken) {
    let message = headless_message(os, port, pid, token);
    let mut out = io::stdout().lock();
    let written = out.write_all(message.as_bytes()).and_then(|()| out.flush());
    wipe(message.into_bytes());
    if let Err(err) = written {
        eprintln!(
            "msguide: cannot print the token to stdout ({}); the API runs but nothing can call it",
            err.kind()
        );
    }
}

/// The headless message: the URL and pid, the token as a line to paste into another shell,
/// and a request that uses it.
fn headless_message(os: Os, port: u16, pid: Option<u32>, token: &LaunchToken) -> String {
    let url = env::api_url(port);
    let pid = pid.map_or_else(String::new, |pid| format!(" ({API_BINARY} pid {pid})"));
    let (set, curl, variable) = match os {
        Os::Windows => (
            format!("$env:{} = \"{}\"", env_names::LOCAL_TOKEN, token.expose()),
            "curl.exe",
            format!("$env:{}", env_names::LOCAL_TOKEN),
        ),
        Os::Linux | Os::Mac => (
            format!("export {}={}", env_names::LOCAL_TOKEN, token.expose()),
            "curl",
            format!("${}", env_names::LOCAL_TOKEN),
        ),
    };
    format!(
        "MSGuide API ready at {url}{pid}; Ctrl-C stops it.\n\
         Its token is valid until this launcher stops. In another shell:\n  \
         {set}\n  \
         {curl} -s -X POST -H \"Authorization: Bearer {variable}\" {url}/v1/sessions\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headless_message_shows_the_token_once() {
        let token = LaunchToken::mint().unwrap();
        let message = headless_message(Os::Linux, 8765, Some(42), &token);
        assert_eq!(message.matches(token.expose()).count(), 1);
        let lines: Vec<_> = message.lines().collect();
        assert_eq!(
            lines[0],
            "MSGuide API ready at http://127.0.0.1:8765 (msguide-api pid 42); Ctrl-C stops it."
        );
        assert_eq!(
            lines[2],
            format!("  export MSGUIDE_LOCAL_TOKEN={}", token.expose())
        );
        assert_eq!(
            lines[3],
            "  curl -s -X POST -H \"Authorization: Bearer $MSGUIDE_LOCAL_TOKEN\" \
             http://127.0.0.1:8765/v1/sessions"
        );
        let windows = headless_message(Os::Windows, 9000, None, &token);
        assert!(windows.contains(&format!(
            "$env:MSGUIDE_LOCAL_TOKEN = \"{}\"",
            token.expose()
        )));
        assert!(windows.contains("curl.exe"));
        assert!(windows.starts_with("MSGuide API ready at http://127.0.0.1:9000; "));
    }

    #[cfg(unix)]
    #[test]
    fn exit_codes() {
        use std::os::unix::process::ExitStatusExt;
        let code = |c: i32| Some(ExitStatus::from_raw(c << 8));
        let killed = Some(ExitStatus::from_raw(9));
        assert_eq!(Ended::Signal.exit_code(), 0);
        assert_eq!(Ended::ApiExited(code(3)).exit_code(), 3);
        assert_eq!(Ended::ApiExited(code(0)).exit_code(), 1);
        assert_eq!(Ended::ApiExited(killed).exit_code(), 1);
        assert_eq!(Ended::ApiExited(None).exit_code(), 1);
        assert_eq!(Ended::DesktopExited(code(0)).exit_code(), 0);
        assert_eq!(Ended::DesktopExited(code(2)).exit_code(), 2);
        assert_eq!(Ended::DesktopExited(killed).exit_code(), 1);
    }

    fn context(dir: &std::path::Path) -> Context {
        Context {
            own_dir: dir.to_path_buf(),
            os: Os::Linux,
            vars: vec![("HOME".into(), dir.into())],
        }
    }

    /// One line a person can act on: no dump of a library's innards, and the remedy named.
    fn assert_readable(message: &str, remedy: &str) {
        for noise in ["{", "Os {", "Error(", "\n", "os error", "Kind("] {
            assert!(!message.contains(noise), "{noise:?} in {message:?}");
        }
        assert!(message.contains(remedy), "no {remedy:?} in {message:?}");
    }

    #[test]
    fn every_refusal_names_its_remedy() {
        for (refusal, remedy) in [
            (
                StartError::Signals(io::Error::from_raw_os_error(24)),
                "start again",
            ),
            (
                StartError::ApiMissing(PathBuf::from("/opt/msguide-api")),
                "cargo build --release -p msguide-api",
            ),
            (
                StartError::DesktopMissing(PathBuf::from("/opt/msguide-desktop")),
                "--headless",
            ),
            (StartError::Port(PortError::InUse(8765)), "--port"),
            (StartError::NoStateDir, "set HOME"),
            (
                StartError::StateDir {
                    path: PathBuf::from("/var/empty/msguide"),
                    kind: io::ErrorKind::PermissionDenied,
                },
                "set XDG_STATE_HOME",
            ),
            (
                StartError::Spawn {
                    name: API_BINARY,
                    kind: io::ErrorKind::PermissionDenied,
                },
                "cargo build --release --workspace --bins",
            ),
            (
                StartError::NotReady {
                    cause: "not ready within 60 s".to_owned(),
                    stage: Stage::Health,
                    last_error: crate::http::HttpError::Connect(io::ErrorKind::ConnectionRefused)
                        .to_string(),
                    log: PathBuf::from("/home/u/.local/state/msguide/backend.log"),
                },
                "says why, fix that and start again",
            ),
        ] {
            assert_readable(&refusal.to_string(), remedy);
        }
    }

    #[tokio::test]
    async fn missing_binaries_are_refused_before_anything_starts() {
        let dir =
            std::env::temp_dir().join(format!("msguide-launcher-start-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let headless = StartArgs {
            port: 8765,
            headless: true,
        };
        let refusal = run(&headless, context(&dir)).await.unwrap_err();
        assert!(matches!(refusal, StartError::ApiMissing(_)), "{refusal}");
        assert!(
            refusal
                .to_string()
                .contains("cargo build --release -p msguide-api")
        );

        std::fs::write(paths::sibling(&dir, API_BINARY), b"").unwrap();
        let desktop = StartArgs {
            port: 8765,
            headless: false,
        };
        let refusal = run(&desktop, context(&dir)).await.unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(refusal.contains("--headless"), "{refusal}");
        assert!(!refusal.contains('\n'));
    }
}
