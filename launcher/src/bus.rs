//! The session bus the desktop client reads windows through: AT-SPI, the accessibility bus,
//! is found and started through it. On a bare X desktop with none running, `msguide start`
//! starts one (`dbus-daemon`) for the launch and stops it with the launch; the AT-SPI bus is
//! then started by the session bus on first use (at-spi2-core's activation file), and ends
//! when the session bus does. When `dbus-daemon` or at-spi2-core is missing, one line says
//! which package and command fix it, and the launch goes on without.

use std::{
    ffi::OsStr,
    io,
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::env::{ADDRESS_VARIABLE, ChildEnv};

/// How long `dbus-daemon` may take to print its address on a loaded machine.
const START_BUDGET: Duration = Duration::from_secs(10);
/// The session bus's activation file for the AT-SPI bus, which at-spi2-core installs.
const AT_SPI_SERVICE: &str = "dbus-1/services/org.a11y.Bus.service";

/// Where the desktop client's session bus comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// One is running (the environment names it, or the usual socket answers).
    Running,
    /// None is: start one listening at this address. `shared` when it is the usual socket
    /// (`$XDG_RUNTIME_DIR/bus`), which applications started later find by themselves.
    Start {
        /// The `--address` for `dbus-daemon`.
        address: String,
        /// The address is the usual socket.
        shared: bool,
    },
}

/// Decides from `env` (the launcher's environment): a bus named by
/// `DBUS_SESSION_BUS_ADDRESS` or answering at `$XDG_RUNTIME_DIR/bus` is used; otherwise one
/// is started at `$XDG_RUNTIME_DIR/bus` when that directory exists and holds no such file,
/// else in `private_dir`.
#[must_use]
pub fn plan(env: &ChildEnv, private_dir: &Path) -> Plan {
    if env.get(ADDRESS_VARIABLE).is_some_and(|a| !a.is_empty()) {
        return Plan::Running;
    }
    let runtime_dir = env
        .get("XDG_RUNTIME_DIR")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .filter(|dir| dir.is_dir());
    if let Some(dir) = runtime_dir {
        let socket = dir.join("bus");
        if answers(&socket) {
            return Plan::Running;
        }
        // A stale socket file is left alone: it may be another program's.
        if !socket.exists() {
            return Plan::Start {
                address: format!("unix:path={}", socket.display()),
                shared: true,
            };
        }
    }
    Plan::Start {
        address: format!("unix:dir={}", private_dir.display()),
        shared: false,
    }
}

#[cfg(unix)]
fn answers(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

#[cfg(not(unix))]
fn answers(_socket: &Path) -> bool {
    false
}

/// Whether the AT-SPI bus can be started by a session bus: its activation file is in one of
/// `XDG_DATA_DIRS` (default `/usr/local/share:/usr/share`).
#[must_use]
pub fn at_spi_installed(env: &ChildEnv) -> bool {
    let dirs = env
        .get("XDG_DATA_DIRS")
        .filter(|dirs| !dirs.is_empty())
        .unwrap_or_else(|| OsStr::new("/usr/local/share:/usr/share"));
    std::env::split_paths(dirs).any(|dir| dir.join(AT_SPI_SERVICE).is_file())
}

/// Why no session bus could be started; each message is one line naming the fix.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// `dbus-daemon` is not installed.
    #[error(
        "no session bus is running and dbus-daemon is not installed, so the desktop client cannot read windows' controls: install it with `sudo apt install dbus`, then start again"
    )]
    Missing,
    /// It started but said no address in time, or could not be started.
    #[error(
        "no session bus is running and dbus-daemon could not start one ({0}), so the desktop client cannot read windows' controls: start msguide inside your desktop session, or start a session bus with `dbus-launch`"
    )]
    Failed(String),
}

/// The message when the AT-SPI bus is not installed.
pub const AT_SPI_MISSING: &str = "the AT-SPI accessibility bus is not installed, so the desktop client cannot read windows' controls: install it with `sudo apt install at-spi2-core`, then start again";

/// A session bus this launch started; stopped with it.
#[derive(Debug)]
pub struct SessionBus {
    /// The `dbus-daemon`.
    pub child: Child,
    /// The address it listens at, for the desktop client's `DBUS_SESSION_BUS_ADDRESS`.
    pub address: String,
}

/// Starts `dbus-daemon` as a session bus at `address` with `env` (which its activated
/// services, the AT-SPI bus among them, inherit: the display above all), and waits for the
/// address it prints.
///
/// # Errors
/// [`BusError`] when it is not installed, cannot start or says nothing in time.
pub async fn start(address: &str, env: &ChildEnv) -> Result<SessionBus, BusError> {
    let mut command = Command::new("dbus-daemon");
    command
        .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
        .arg(format!("--address={address}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // Its activation notes are not for the person at the terminal.
        .stderr(Stdio::null())
        .kill_on_drop(true);
    env.apply(&mut command);
    let mut child = command.spawn().map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => BusError::Missing,
        kind => BusError::Failed(kind.to_string()),
    })?;
    let Some(stdout) = child.stdout.take() else {
        return Err(BusError::Failed("no output to read".to_owned()));
    };
    let mut line = String::new();
    let mut stdout = BufReader::new(stdout);
    match tokio::time::timeout(START_BUDGET, stdout.read_line(&mut line)).await {
        Ok(Ok(n)) if n > 0 && !line.trim().is_empty() => Ok(SessionBus {
            child,
            address: line.trim().to_owned(),
        }),
        Ok(Ok(_)) => Err(BusError::Failed("it exited at once".to_owned())),
        Ok(Err(err)) => Err(BusError::Failed(err.kind().to_string())),
        Err(_) => Err(BusError::Failed(format!(
            "no address within {} s",
            START_BUDGET.as_secs()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;

    fn env(vars: &[(&str, &OsStr)]) -> ChildEnv {
        ChildEnv::inherit(
            vars.iter()
                .map(|(n, v)| (OsString::from(n), v.to_os_string())),
        )
    }

    fn temp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("msguide-bus-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_named_bus_is_used_as_it_is() {
        let named = env(&[(ADDRESS_VARIABLE, OsStr::new("unix:path=/run/user/1/bus"))]);
        assert_eq!(plan(&named, Path::new("/private")), Plan::Running);
    }

    #[test]
    fn without_one_it_starts_at_the_usual_socket_or_privately() {
        let runtime = temp("plan");
        let with_runtime = env(&[("XDG_RUNTIME_DIR", runtime.as_os_str())]);
        assert_eq!(
            plan(&with_runtime, Path::new("/private")),
            Plan::Start {
                address: format!("unix:path={}", runtime.join("bus").display()),
                shared: true,
            }
        );
        // A file named bus that does not answer is not replaced.
        std::fs::write(runtime.join("bus"), b"").unwrap();
        assert_eq!(
            plan(&with_runtime, Path::new("/private")),
            Plan::Start {
                address: "unix:dir=/private".to_owned(),
                shared: false,
            }
        );
        std::fs::remove_dir_all(&runtime).unwrap();
        assert_eq!(
            plan(&env(&[]), Path::new("/private")),
            Plan::Start {
                address: "unix:dir=/private".to_owned(),
                shared: false,
            }
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_live_socket_is_used_and_a_stale_one_is_left_alone() {
        use std::os::unix::net::UnixListener;
        let runtime = temp("stale");
        let with_runtime = env(&[("XDG_RUNTIME_DIR", runtime.as_os_str())]);
        let listener = UnixListener::bind(runtime.join("bus")).unwrap();
        assert_eq!(plan(&with_runtime, Path::new("/private")), Plan::Running);
        // The listener is gone but its socket file stays, as after a bus that was killed.
        drop(listener);
        assert!(runtime.join("bus").exists());
        assert_eq!(
            plan(&with_runtime, Path::new("/private")),
            Plan::Start {
                address: "unix:dir=/private".to_owned(),
                shared: false,
            }
        );
        std::fs::remove_dir_all(&runtime).unwrap();
    }

    #[test]
    fn at_spi_is_found_by_its_activation_file() {
        let data = temp("data");
        let with = env(&[("XDG_DATA_DIRS", data.as_os_str())]);
        assert!(!at_spi_installed(&with));
        let services = data.join("dbus-1/services");
        std::fs::create_dir_all(&services).unwrap();
        std::fs::write(services.join("org.a11y.Bus.service"), b"[D-BUS Service]\n").unwrap();
        assert!(at_spi_installed(&with));
        std::fs::remove_dir_all(&data).unwrap();
    }

    #[test]
    fn every_message_names_the_package_and_the_command() {
        assert!(
            BusError::Missing
                .to_string()
                .contains("`sudo apt install dbus`")
        );
        assert!(AT_SPI_MISSING.contains("`sudo apt install at-spi2-core`"));
        let failed = BusError::Failed("no address within 10 s".to_owned()).to_string();
        assert!(
            failed.contains("`dbus-launch`") && !failed.contains('\n'),
            "{failed}"
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_started_bus_answers_and_its_socket_goes_with_it() {
        let dir = temp("start");
        let socket = dir.join("bus");
        let path = env(&[("PATH", OsStr::new("/usr/bin:/bin"))]);
        let mut bus = start(&format!("unix:path={}", socket.display()), &path)
            .await
            .unwrap();
        assert!(
            bus.address
                .starts_with(&format!("unix:path={}", socket.display()))
        );
        assert!(answers(&socket));
        crate::children::stop(&mut bus.child).await.unwrap();
        assert!(!answers(&socket));
        // The socket may stay behind as a file (dbus-daemon does not always unlink it on
        // SIGTERM); `plan` then leaves it alone and the next launch starts a private bus.
        std::fs::remove_dir_all(&dir).unwrap();
        let nowhere = env(&[("PATH", OsStr::new("/nonexistent"))]);
        assert!(matches!(
            start("unix:dir=/tmp", &nowhere).await,
            Err(BusError::Missing)
        ));
    }
}
