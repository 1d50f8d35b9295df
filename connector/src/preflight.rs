//! The one list of start-up checks: `doctor` prints it, `start` refuses on any failure in it,
//! and `install` runs it on the configuration the service will start with, so the three never
//! disagree (what refuses `start` is a `[FAIL]` in `doctor`, never a `[WARN]`).
//!
//! [`checks`] looks at everything and reports every problem it finds, not the first: the
//! configuration's refused values ([`crate::config::load_all`]), then each check in turn.
//! A check whose setting was refused reports that refusal instead of checking the value the
//! layers below left in its place.
//!
//! The checks only look: they create no folder, key or file (writability is asked of the OS),
//! and each failure says what to do (`mkdir -p <root>`, `chmod 600 <file>`, `--platform-url`).
//! The caller resolves the configuration and the environment into [`Inputs`]; nothing here
//! reads an environment variable.

use std::io;
use std::path::{Path, PathBuf};

use local_core::machine::audit_chain;
use local_core::machine::jail::Jail;
use local_core::machine::own_files;
use local_core::machine::sandbox::{self, SandboxMode, Support};
use tokio_tungstenite::tungstenite::http::Uri;

use crate::cli::tracing_level;
use crate::commands::service::Os;
use crate::commands::status::redact_url;
use crate::config::{self, ConfigError, Env, Loaded, ShimConfig, read_token_file};
use crate::protocol::Arch;
use local_core::io_words::io_words;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Fine.
    Ok,
    /// A fact worth knowing.
    Info,
    /// `start` runs, but something will not work or is risky.
    Warn,
    /// Blocking: `start` and `install` refuse.
    Fail,
}

impl Level {
    /// The marker `doctor` prints.
    #[must_use]
    pub const fn marker(self) -> &'static str {
        match self {
            Self::Ok => "[OK  ]",
            Self::Info => "[INFO]",
            Self::Warn => "[WARN]",
            Self::Fail => "[FAIL]",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How it came out.
    pub level: Level,
    /// What was checked: `allowed root`, `token`, `platform URL`, ...
    pub label: &'static str,
    /// What was found and, for a problem, what to do; never a secret.
    pub detail: String,
}

impl Finding {
    fn new(level: Level, label: &'static str, detail: impl Into<String>) -> Self {
        Self {
            level,
            label,
            detail: detail.into(),
        }
    }

    /// The finding as one line on its own (`start`'s refusal): `label: detail`.
    #[must_use]
    pub fn sentence(&self) -> String {
        format!("{}: {}", self.label, self.detail)
    }
}

/// The failures among `findings`: what refuses `start` and `install`.
pub fn blocking(findings: &[Finding]) -> impl Iterator<Item = &Finding> {
    findings.iter().filter(|f| f.level == Level::Fail)
}

/// Everything the checks look at, resolved by the caller.
#[derive(Debug)]
pub struct Inputs {
    /// The system, for the checks that only apply to one.
    pub os: Os,
    /// The configuration, refused values left out.
    pub config: ShimConfig,
    /// The refused values and unreadable files ([`Loaded::problems`]).
    pub problems: Vec<ConfigError>,
    /// `--log-level` as given.
    pub log_level: String,
    /// The home directory: control mode browses from it and the mounted volumes.
    pub home: Option<PathBuf>,
    /// The audit key file.
    pub audit_key_path: Option<PathBuf>,
    /// `XDG_SESSION_TYPE`.
    pub xdg_session_type: Option<String>,
    /// `WAYLAND_DISPLAY`.
    pub wayland_display: Option<String>,
    /// `DISPLAY`.
    pub display: Option<String>,
    /// What the shell sandbox's probe found on this machine (Linux only; probed when a mode is
    /// configured, and always by `doctor`).
    pub sandbox_support: Option<Support>,
    /// What the Wayland compositor offers computer use, when this is a Wayland session (Linux,
    /// `WAYLAND_DISPLAY` naming a live socket; asked by `doctor` only).
    pub compositor: Option<Compositor>,
}

/// What a Wayland compositor's registry offers computer use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compositor {
    /// Each protocol it lacks, in a sentence saying what that costs; empty when none is missing.
    Missing(Vec<String>),
    /// It could not be asked; why.
    Unreachable(String),
}

impl Compositor {
    /// Asks the compositor this process would use, when this is a Wayland session.
    #[must_use]
    pub fn probe() -> Option<Self> {
        #[cfg(target_os = "linux")]
        {
            use local_core::desktop::{portal, session::Session};
            if Session::detect() != Session::Wayland {
                return None;
            }
            Some(match portal::protocols_with_offer() {
                Ok(protocols) => {
                    let mut missing = protocols.missing();
                    // The window list protocol says where no window is: sway's IPC and KWin do.
                    if protocols.windows()
                        && let Err(why) = protocols.window_geometry()
                    {
                        missing.push(format!(
                            "no window geometry ({why}): window screenshots and accessibility snapshots are unavailable; sway gives it through its IPC socket"
                        ));
                    } else if protocols.windows() && !local_core::desktop::probe::session_bus() {
                        missing.push("no session bus (DBUS_SESSION_BUS_ADDRESS is unset): accessibility snapshots are unavailable; start the shim inside the desktop session".to_owned());
                    }
                    Self::Missing(missing)
                }
                Err(err) => Self::Unreachable(err.to_string()),
            })
        }
        #[cfg(not(target_os = "linux"))]
        None
    }
}

impl Inputs {
    /// The inputs for `loaded` and `--log-level` in this environment.
    pub fn gather(loaded: Loaded, log_level: &str, env: &impl Env) -> Self {
        Self {
            os: Os::current(),
            config: loaded.config,
            problems: loaded.problems,
            log_level: log_level.to_owned(),
            home: config::home_dir(env),
            audit_key_path: config::audit_key_path(env),
            xdg_session_type: env.var("XDG_SESSION_TYPE"),
            wayland_display: env.var("WAYLAND_DISPLAY"),
            display: env.var("DISPLAY"),
            sandbox_support: None,
            compositor: None,
        }
        .probed(false)
    }

    /// These inputs with the sandbox probed: when a mode is configured, or `always` (`doctor`
    /// reports what the kernel offers even when the sandbox is off). A throwaway process tries
    /// each part; nothing of this one is confined.
    /// `always` also asks a Wayland compositor which protocols it offers (`start` leaves that to
    /// each HELLO).
    #[must_use]
    pub fn probed(mut self, always: bool) -> Self {
        if always && self.compositor.is_none() {
            self.compositor = Compositor::probe();
        }
        if cfg!(target_os = "linux")
            && self.sandbox_support.is_none()
            && (always || self.config.shell_sandbox != SandboxMode::Off)
        {
            self.sandbox_support = Some(probe_sandbox());
        }
        self
    }
}

/// The shell sandbox's launcher: this file name beside the connector's own executable, where
/// the build and `install` put it (`connector/src/bin/autogpt-shim-sandbox.rs`).
pub(crate) const SANDBOX_LAUNCHER: &str = "autogpt-shim-sandbox";

/// What the kernel offers the shell sandbox, tried by the launcher beside this executable; a
/// missing launcher is what the findings say then, so every mode is refused.
fn probe_sandbox() -> Support {
    let launcher = match std::env::current_exe() {
        // A replaced executable reads as `name (deleted)`: its folder is still the one.
        Ok(exe) => exe.with_file_name(SANDBOX_LAUNCHER),
        Err(err) => {
            return Support::without_launcher(format!(
                "cannot be found, since this program's own file cannot be ({}); start autogpt-shim by its full path",
                local_core::io_words::io_words(&err)
            ));
        }
    };
    if !launcher.is_file() {
        return Support::without_launcher(format!(
            "{} is missing (it ships beside autogpt-shim, and `autogpt-shim install` copies both)",
            launcher.display()
        ));
    }
    sandbox::probe(&launcher)
}

const MODE: &str = "mode";
const CONFIG_FILE: &str = "config file";
const CONFIGURATION: &str = "configuration";
const LOG_LEVEL: &str = "log level";
const ALLOWED_ROOT: &str = "allowed root";
const VIRTUAL_ROOTS: &str = "virtual roots";
const AUDIT_LOG: &str = "audit log";
const AUDIT_KEY: &str = "audit key";
const TOKEN: &str = "token";
const PLATFORM_URL: &str = "platform URL";
const SHELL: &str = "shell";
const SHELL_SANDBOX: &str = "shell sandbox";
const COMPUTER_USE: &str = "computer use";
const LOCAL_LLM: &str = "local LLM";
const RECORDING: &str = "recording";
const ARCHITECTURE: &str = "architecture";
const SESSION_TYPE: &str = "session type";
const WAYLAND: &str = "Wayland";

/// The check a refused configuration value belongs to.
fn label_of(problem: &ConfigError) -> &'static str {
    let key = match problem {
        ConfigError::Invalid { origin, .. } | ConfigError::NoScheme { origin, .. } => origin.key(),
        ConfigError::TokenFile(_) | ConfigError::EmptyToken { .. } => return TOKEN,
        ConfigError::MissingFile { .. }
        | ConfigError::ReadFile { .. }
        | ConfigError::NotUtf8 { .. }
        | ConfigError::Syntax { .. }
        | ConfigError::McpSection { .. } => return CONFIG_FILE,
    };
    match key.as_str() {
        "session_id" => MODE,
        "platform_url" | "platform_ws_url" | "platform_oauth_url" => PLATFORM_URL,
        "allowed_root" => ALLOWED_ROOT,
        "audit_log_path" => AUDIT_LOG,
        "token" | "token_file" => TOKEN,
        "enable_shell" => SHELL,
        "shell_sandbox" => SHELL_SANDBOX,
        "enable_computer_use" | "enable_clipboard" | "enable_clipboard_read_foreign" => {
            COMPUTER_USE
        }
        "enable_local_llm" | "ollama_url" | "local_llm_backend" => LOCAL_LLM,
        "enable_recording" => RECORDING,
        _ => CONFIGURATION,
    }
}

/// Runs every check and returns one finding per line, problems first where a setting was
/// refused; [`blocking`] picks the failures.
pub fn checks(inputs: &Inputs) -> Vec<Finding> {
    let mut findings = Vec::new();
    // The refused values of `label`, as failures; else the check itself.
    let mut add = |label: &'static str, check: &dyn Fn() -> Option<Finding>| {
        let refused: Vec<Finding> = inputs
            .problems
            .iter()
            .filter(|problem| label_of(problem) == label)
            .map(|problem| Finding::new(Level::Fail, label, problem.to_string()))
            .collect();
        if refused.is_empty() {
            findings.extend(check());
        } else {
            findings.extend(refused);
        }
    };
    add(MODE, &|| Some(mode(&inputs.config)));
    add(CONFIG_FILE, &|| None);
    add(CONFIGURATION, &|| None);
    add(LOG_LEVEL, &|| log_level(&inputs.log_level));
    add(ARCHITECTURE, &architecture);
    add(RECORDING, &|| recording(inputs.config.enable_recording));
    if inputs.config.session_id.is_some() {
        add(ALLOWED_ROOT, &|| Some(allowed_root(&inputs.config)));
    } else {
        add(VIRTUAL_ROOTS, &|| {
            Some(virtual_roots(inputs.home.as_deref()))
        });
    }
    add(AUDIT_LOG, &|| Some(audit_log(&inputs.config)));
    add(AUDIT_KEY, &|| {
        Some(audit_key(inputs.audit_key_path.as_deref()))
    });
    add(TOKEN, &|| Some(token(&inputs.config)));
    add(PLATFORM_URL, &|| Some(platform_url(&inputs.config)));
    add(SHELL, &|| {
        Some(shell(
            inputs.config.enable_shell,
            inputs.config.shell_sandbox,
        ))
    });
    add(SHELL_SANDBOX, &|| shell_sandbox(inputs));
    add(COMPUTER_USE, &|| computer_use(inputs));
    add(LOCAL_LLM, &|| local_llm(&inputs.config));
    add(SESSION_TYPE, &|| {
        session_type(inputs).map(|detail| Finding::new(Level::Info, SESSION_TYPE, detail))
    });
    findings.extend(wayland(inputs));
    findings
}

fn mode(config: &ShimConfig) -> Finding {
    let detail = match &config.session_id {
        Some(id) => format!("direct session {id} (--session-id)"),
        None => "machine control: the platform picks a folder for each chat (no --session-id)"
            .to_owned(),
    };
    Finding::new(Level::Info, MODE, detail)
}

fn log_level(level: &str) -> Option<Finding> {
    tracing_level(level).is_none().then(|| {
        Finding::new(
            Level::Fail,
            LOG_LEVEL,
            "--log-level must be DEBUG, INFO, WARNING, ERROR or CRITICAL",
        )
    })
}

fn architecture() -> Option<Finding> {
    let arch = std::env::consts::ARCH;
    Arch::normalise(arch).is_none().then(|| {
        Finding::new(
            Level::Fail,
            ARCHITECTURE,
            format!("{arch} is not one the protocol knows (x86_64 or arm64): use a build for one of those"),
        )
    })
}

fn recording(enabled: bool) -> Option<Finding> {
    enabled.then(|| {
        Finding::new(
            Level::Fail,
            RECORDING,
            "enable_recording is a design preview and start-up always refuses it: leave out --enable-recording and remove enable_recording from the config file and the environment",
        )
    })
}

/// A direct session's jail: it must be a folder `start` can open; one it cannot write warns.
fn allowed_root(config: &ShimConfig) -> Finding {
    let fail = |detail: String| Finding::new(Level::Fail, ALLOWED_ROOT, detail);
    let Some(root) = &config.allowed_root else {
        return fail(
            "no allowed root: pass --allowed-root, set AUTOGPT_SHIM_ALLOWED_ROOT, or set HOME"
                .to_owned(),
        );
    };
    // `start` refuses a missing root, so this reports it and leaves creating it to the user
    // (a typo in --allowed-root must not become a folder).
    match own_files::look(root) {
        Err(err) if err.kind() == io::ErrorKind::NotADirectory => {
            return fail(format!(
                "{} cannot be a folder because a file stands in its path: pass --allowed-root with a folder",
                root.display()
            ));
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return fail(format!(
                "{} does not exist: create it with `mkdir -p {}`, or pass --allowed-root with an existing folder",
                root.display(),
                shell_quote(root)
            ));
        }
        Err(err) => {
            return fail(format!(
                "{} cannot be read ({}): check the folders above it, or pass --allowed-root with another folder",
                root.display(),
                io_words(&err)
            ));
        }
        Ok(meta) if !meta.is_dir() => {
            return fail(format!(
                "{} is not a folder: pass --allowed-root with a folder",
                root.display()
            ));
        }
        Ok(_) => {}
    }
    // What `start` does with it: open a handle on it.
    if let Err(err) = Jail::open(root) {
        return fail(format!(
            "{} cannot be opened ({err}): run `chmod u+rwx {}`, or pass --allowed-root with another folder",
            root.display(),
            shell_quote(root)
        ));
    }
    match own_files::writable(root) {
        Ok(()) => Finding::new(
            Level::Ok,
            ALLOWED_ROOT,
            format!("{} is writable", root.display()),
        ),
        Err(err) => Finding::new(
            Level::Warn,
            ALLOWED_ROOT,
            format!(
                "{} is not writable by you ({}): the platform can read but not write there; run `chmod u+rwx {}` if it should",
                root.display(),
                io_words(&err),
                shell_quote(root)
            ),
        ),
    }
}

/// Control mode: the folders the platform can browse from (the home directory and mounted
/// volumes); none blocks, since no chat could pick a folder.
fn virtual_roots(home: Option<&Path>) -> Finding {
    /// Paths named in the line; the rest are counted.
    const SHOWN: usize = 5;
    let Some(home) = home else {
        return Finding::new(
            Level::Fail,
            VIRTUAL_ROOTS,
            "no folder to browse from: HOME is not set; set it to your home folder",
        );
    };
    let roots = local_core::machine::browse::virtual_roots(Some(home));
    // `start` opens the home directory for the control connection.
    if roots.is_empty() || Jail::open(home).is_err() {
        let detail = if home.exists() {
            format!(
                "no folder to browse from: the home directory {} is not readable, writable and searchable by you; run `chmod u+rwx {}`, or set HOME to your home folder",
                home.display(),
                shell_quote(home)
            )
        } else {
            format!(
                "no folder to browse from: the home directory {} does not exist; create it with `mkdir -p {}`, or set HOME to your home folder",
                home.display(),
                shell_quote(home)
            )
        };
        return Finding::new(Level::Fail, VIRTUAL_ROOTS, detail);
    }
    let mut shown: Vec<String> = roots
        .iter()
        .take(SHOWN)
        .map(|root| root.path.display().to_string())
        .collect();
    if roots.len() > SHOWN {
        shown.push(format!("and {} more", roots.len() - SHOWN));
    }
    Finding::new(Level::Ok, VIRTUAL_ROOTS, shown.join(", "))
}

/// Whether `start` could create the folder `dir` (and any missing parents): `Ok(None)` when it
/// exists and is writable, `Ok(Some(ancestor))` when it is missing and its nearest existing
/// ancestor is writable, or the ancestor at fault and why.
fn creatable(dir: &Path) -> Result<Option<&Path>, (&Path, io::Error)> {
    let mut current = dir;
    loop {
        match own_files::look(current) {
            Ok(meta) if meta.is_dir() => {
                own_files::writable(current).map_err(|err| (current, err))?;
                return Ok((current != dir).then_some(current));
            }
            Ok(_) => {
                return Err((
                    current,
                    io::Error::new(io::ErrorKind::NotADirectory, "not a folder"),
                ));
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => match current.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => current = parent,
                _ => return Err((current, err)),
            },
            Err(err) => return Err((current, err)),
        }
    }
}

/// `path` as a POSIX shell word, quoted only when it needs to be.
#[must_use]
pub fn shell_quote(path: &Path) -> String {
    let text = path.display().to_string();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c));
    if plain {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

fn audit_log(config: &ShimConfig) -> Finding {
    let unaudited = "the daemon refuses to run unaudited";
    let Some(path) = &config.audit_log_path else {
        return Finding::new(
            Level::Fail,
            AUDIT_LOG,
            "no audit log path: set HOME, XDG_STATE_HOME or audit_log_path",
        );
    };
    match own_files::writable(path) {
        Ok(()) => {
            return Finding::new(
                Level::Ok,
                AUDIT_LOG,
                format!("{} is writable", path.display()),
            );
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => {
            return Finding::new(
                Level::Fail,
                AUDIT_LOG,
                format!(
                    "cannot write {} ({}): run `chmod u+rw {}`, or set audit_log_path; {unaudited}",
                    path.display(),
                    io_words(&err),
                    shell_quote(path)
                ),
            );
        }
    }
    new_file(AUDIT_LOG, path, "audit_log_path", unaudited)
}

/// A file `start` will create at `path`: fine when its folder exists and is writable or can
/// be created; otherwise how to make one that can.
fn new_file(label: &'static str, path: &Path, setting: &str, consequence: &str) -> Finding {
    let dir = path.parent().unwrap_or(Path::new("."));
    match creatable(dir) {
        Ok(None) => Finding::new(
            Level::Ok,
            label,
            format!("{} does not exist yet; `start` creates it", path.display()),
        ),
        Ok(Some(_)) => Finding::new(
            Level::Ok,
            label,
            format!(
                "{} does not exist yet; `start` creates it and its folder {}",
                path.display(),
                dir.display()
            ),
        ),
        Err((at, err)) => Finding::new(
            Level::Fail,
            label,
            format!(
                "{} cannot be created: {} is {} ({}); run `mkdir -p {}` as a user who can, or set {setting}; {consequence}",
                path.display(),
                at.display(),
                if err.kind() == io::ErrorKind::NotADirectory {
                    "not a folder"
                } else {
                    "not writable"
                },
                io_words(&err),
                shell_quote(dir)
            ),
        ),
    }
}

fn audit_key(path: Option<&Path>) -> Finding {
    let Some(path) = path else {
        return Finding::new(
            Level::Fail,
            AUDIT_KEY,
            "no state directory for the audit key: set HOME or XDG_STATE_HOME",
        );
    };
    // Loading only: a missing key is left for `start` to create, and a file holding no key is
    // reported, not replaced.
    match audit_chain::load_key_file(path) {
        Ok(_) => Finding::new(
            Level::Ok,
            AUDIT_KEY,
            format!("loaded from {}", path.display()),
        ),
        Err(err) if err.kind() == io::ErrorKind::NotFound => new_file(
            AUDIT_KEY,
            path,
            "XDG_STATE_HOME",
            "the daemon cannot sign its audit log without it",
        ),
        Err(err) if err.kind() == io::ErrorKind::InvalidData => Finding::new(
            Level::Warn,
            AUDIT_KEY,
            format!(
                "{err}; the daemon will replace it, and records signed with the old key will no longer verify"
            ),
        ),
        // The key file's own check already says `chmod 600`.
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied && err.get_ref().is_some() => {
            Finding::new(Level::Fail, AUDIT_KEY, err.to_string())
        }
        Err(err) => Finding::new(
            Level::Fail,
            AUDIT_KEY,
            format!(
                "cannot read {} ({}): run `chmod 600 {}` if it is yours, or remove it so `start` makes a new one",
                path.display(),
                io_words(&err),
                shell_quote(path)
            ),
        ),
    }
}

/// The bearer token as `start` reads it.
fn token(config: &ShimConfig) -> Finding {
    if config.token.is_some() {
        return Finding::new(Level::Ok, TOKEN, format!("from {}", config::TOKEN_ENV));
    }
    let Some(path) = &config.token_file else {
        return Finding::new(
            Level::Warn,
            TOKEN,
            "none configured: `start` uses the tokens `autogpt-shim auth` stored, and without them connects with no Authorization header, which a real platform refuses; pass --token-file, or run `autogpt-shim auth`",
        );
    };
    match read_token_file(path) {
        Ok(_) => Finding::new(
            Level::Ok,
            TOKEN,
            format!("{} is readable by you only", path.display()),
        ),
        Err(err) => Finding::new(Level::Fail, TOKEN, err.to_string()),
    }
}

/// The URL `start` dials, as it builds it.
fn platform_url(config: &ShimConfig) -> Finding {
    let endpoint = match &config.session_id {
        Some(id) => config.data_url(id),
        None => config.ws_endpoint(),
    };
    let url = match endpoint {
        Ok(url) => url,
        Err(err) => {
            return Finding::new(
                Level::Fail,
                PLATFORM_URL,
                format!("{err}; pass --platform-url with a wss:// or https:// URL"),
            );
        }
    };
    let shown = redact_url(&url);
    let host = url
        .parse::<Uri>()
        .ok()
        .and_then(|uri| uri.host().map(str::to_owned))
        .filter(|host| !host.is_empty());
    let Some(host) = host else {
        return Finding::new(
            Level::Fail,
            PLATFORM_URL,
            format!(
                "{shown} is not a URL with a host; pass --platform-url with a wss:// or https:// URL"
            ),
        );
    };
    let loopback = local_core::loopback::is_loopback_host(&host);
    if url.starts_with("ws://") && !loopback {
        Finding::new(
            Level::Warn,
            PLATFORM_URL,
            format!(
                "{shown} is unencrypted: the token and every request cross the network in clear text; use wss://"
            ),
        )
    } else {
        Finding::new(Level::Ok, PLATFORM_URL, format!("`start` dials {shown}"))
    }
}

fn shell(enabled: bool, sandbox: SandboxMode) -> Finding {
    match (enabled, sandbox) {
        (false, _) => Finding::new(Level::Ok, SHELL, "disabled"),
        (true, mode) => Finding::new(
            if mode == SandboxMode::Off {
                Level::Warn
            } else {
                Level::Ok
            },
            SHELL,
            shell_enabled("the platform", mode),
        ),
    }
}

/// What an enabled shell lets `who` (the platform, an MCP client) do in `mode`: `doctor`'s
/// line, and after "shell is " the warning `start` and `mcp` give once.
pub(crate) fn shell_enabled(who: &str, mode: SandboxMode) -> String {
    match mode {
        SandboxMode::Off => format!(
            "enabled: {who} can run any command with this user's permissions; --shell-sandbox workspace keeps commands from changing anything outside the allowed root, and strict also from reading your other files and reaching the network"
        ),
        mode => format!("enabled in the `{mode}` sandbox: {}", mode.protects()),
    }
}

/// Why `mode` cannot be used with what the probe found (`None`: not on Linux), or `None` when
/// it can: the refusal `start` (through the checks) and `mcp` give, in the same words.
pub(crate) fn sandbox_refusal(mode: SandboxMode, support: Option<&Support>) -> Option<Finding> {
    if mode == SandboxMode::Off {
        return None;
    }
    let refusal = |detail: String| Finding::new(Level::Fail, SHELL_SANDBOX, detail);
    let Some(support) = support else {
        return Some(refusal(format!(
            "`{mode}` is configured, but the shell sandbox is Linux-only for now: start with --shell-sandbox off, or set shell_sandbox to off"
        )));
    };
    support.missing(mode).map(|missing| {
        refusal(format!(
            "`{mode}` cannot be enforced here: {missing}; fix that, or start with --shell-sandbox off to run commands unconfined (found: {})",
            support.summary()
        ))
    })
}

/// What the kernel offers the shell sandbox, and whether the configured mode can be enforced.
fn shell_sandbox(inputs: &Inputs) -> Option<Finding> {
    let mode = inputs.config.shell_sandbox;
    if let Some(refusal) = sandbox_refusal(mode, inputs.sandbox_support.as_ref()) {
        return Some(refusal);
    }
    let support = inputs.sandbox_support.as_ref()?;
    let found = support.summary();
    let usable: Vec<&str> = [SandboxMode::Workspace, SandboxMode::Strict]
        .into_iter()
        .filter(|mode| support.missing(*mode).is_none())
        .map(SandboxMode::as_str)
        .collect();
    let offered = if usable.is_empty() {
        "no mode can be enforced here".to_owned()
    } else {
        format!("{} can be enforced", usable.join(" and "))
    };
    let level = if mode == SandboxMode::Off {
        Level::Info
    } else {
        Level::Ok
    };
    Some(Finding::new(
        level,
        SHELL_SANDBOX,
        format!("`{mode}`; {found}: {offered}"),
    ))
}

/// Computer use starts anywhere; HELLO offers only what works in this session.
fn computer_use(inputs: &Inputs) -> Option<Finding> {
    if !inputs.config.enable_computer_use {
        return None;
    }
    let session = session_type(inputs);
    Some(match session.as_deref() {
        Some(kind) if kind.contains("no graphical session") => Finding::new(
            Level::Warn,
            COMPUTER_USE,
            "enabled, but this session has no display (no DISPLAY or WAYLAND_DISPLAY): HELLO will offer no computer-use feature; start it from your desktop session",
        ),
        _ if inputs.compositor == Some(Compositor::Missing(Vec::new())) => Finding::new(
            Level::Ok,
            COMPUTER_USE,
            "enabled on Wayland: this compositor offers every protocol computer use needs",
        ),
        Some(kind) if kind.starts_with("Wayland") => Finding::new(
            Level::Warn,
            COMPUTER_USE,
            "enabled on Wayland: HELLO offers only what this compositor's protocols allow (the Wayland lines name what is missing; docs/computer-use.md)",
        ),
        _ => Finding::new(Level::Ok, COMPUTER_USE, "enabled"),
    })
}

/// The local model backend `start` builds when it is on.
fn local_llm(config: &ShimConfig) -> Option<Finding> {
    if !config.enable_local_llm {
        return None;
    }
    Some(match crate::daemon::llm_client(config) {
        Ok(_) => Finding::new(
            Level::Ok,
            LOCAL_LLM,
            format!(
                "enabled: each HELLO lists the models at {}",
                redact_url(&config.ollama_url)
            ),
        ),
        Err(err) => Finding::new(
            Level::Fail,
            LOCAL_LLM,
            format!("the local model backend URL is unusable ({err}): fix ollama_url"),
        ),
    })
}

/// Each protocol the Wayland compositor lacks and what that costs (a warning when computer use
/// is enabled, a fact otherwise), or that it offers them all.
fn wayland(inputs: &Inputs) -> Vec<Finding> {
    let level = if inputs.config.enable_computer_use {
        Level::Warn
    } else {
        Level::Info
    };
    match &inputs.compositor {
        None => Vec::new(),
        Some(Compositor::Unreachable(why)) => vec![Finding::new(
            level,
            WAYLAND,
            format!(
                "the compositor could not be asked which protocols it offers ({why}): computer use will offer nothing on it; check that WAYLAND_DISPLAY names your session's compositor"
            ),
        )],
        Some(Compositor::Missing(missing)) if missing.is_empty() => vec![Finding::new(
            Level::Ok,
            WAYLAND,
            "the compositor offers screen capture, a virtual pointer and keyboard, the window list and the clipboard",
        )],
        Some(Compositor::Missing(missing)) => missing
            .iter()
            .map(|sentence| Finding::new(level, WAYLAND, sentence.clone()))
            .collect(),
    }
}

/// Which graphical session this is, as computer use will need to know; Linux only.
fn session_type(inputs: &Inputs) -> Option<String> {
    if inputs.os != Os::Linux {
        return None;
    }
    // A live compositor was asked: this is Wayland whatever XDG_SESSION_TYPE says, as HELLO
    // decides.
    if inputs.compositor.is_some() {
        let display = inputs.wayland_display.as_deref().unwrap_or_default();
        return Some(format!(
            "Wayland (WAYLAND_DISPLAY={display}, a live compositor)"
        ));
    }
    let set = |value: &Option<String>| {
        value
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    Some(
        match set(&inputs.xdg_session_type).map(|t| t.to_ascii_lowercase()) {
            Some(kind) if kind == "wayland" => "Wayland (XDG_SESSION_TYPE)".to_owned(),
            Some(kind) if kind == "x11" => "X11 (XDG_SESSION_TYPE)".to_owned(),
            other => match (set(&inputs.wayland_display), set(&inputs.display)) {
                (Some(display), _) => format!("Wayland (WAYLAND_DISPLAY={display})"),
                (None, Some(display)) => format!("X11 (DISPLAY={display})"),
                (None, None) => match other {
                    Some(kind) => format!("{kind}: no graphical session"),
                    None => "no graphical session".to_owned(),
                },
            },
        },
    )
}

#[cfg(test)]
mod tests;
