//! `autogpt-shim start`: the preflight (jail, audit key and chain, features this build
//! lacks), then either one data connection for a legacy `--session-id` session or, without
//! one, the machine control connection with its child runtimes (`crate::control`), each
//! with reconnects until it ends for good, with the status file and the
//! SHIM_START/SHIM_STOP records around it.
//!
//! Exit codes follow the reference: 0 after a fatal close, revocation or Ctrl-C/SIGTERM,
//! 77 when the platform refuses the token, 78 when start-up is refused.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use local_core::llm::{AuthHeader, BackendConfig, LlmClient};
use local_core::machine::audit_chain::{AuditChain, AuditIdentity, KEY_LEN};
use local_core::machine::exec::CommandLimiter;
use local_core::machine::files::FileLimits;
use local_core::machine::jail::Jail;
use serde_json::json;

use crate::audit::{Auditor, Entry, StartError, details};
use crate::auth::oauth::OAuthClient;
use crate::auth::store::{Places, TokenStore, load_or_create_audit_key};
use crate::auth::{Credentials, Endpoints};
use crate::cli::{EXIT_AUTH, EXIT_PREFLIGHT, Env, Refusal, StartConfig};
use crate::commands::status::{self, DaemonState, DaemonStatus, Instance};
use crate::config;
use crate::control::{ChildTemplate, Control, ControlConfig, LiveObserver};
use crate::protocol::{Arch, Capability, Platform, close_code};
use crate::session::{Computer, ControlPlane, Host, LocalLlm, Role, SessionConfig, SessionEnd};
use crate::ws::{DataConnection, Outcome, Shutdown, StateObserver, run_data_connection};
use local_core::desktop::clipboard::Policy as ClipboardPolicy;
use local_core::machine::own_files::FileLock;
use local_core::machine::root_grant::GrantKey;
use local_core::machine::sandbox::{Sandbox, SandboxMode, Support};

/// The reference's backend timeouts: 2 s to list the models at HELLO, 60 s per completion.
const LLM_LIST_TIMEOUT: Duration = Duration::from_secs(2);
const LLM_TOTAL_TIMEOUT: Duration = Duration::from_secs(60);
const LLM_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Everything the preflight opened, ready to run.
#[derive(Debug)]
pub struct Prepared {
    config: StartConfig,
    host: Host,
    session: SessionConfig,
    status: Option<StatusFile>,
    /// Control mode only: what the control plane needs.
    control: Option<ControlConfig>,
    grant_key: GrantKey,
    places: Places,
    /// This daemon's claim on its instance, held until it has written its last status.
    lock: FileLock,
}

/// The local model client `start` serves LOCAL_LLM_COMPLETION with; `preflight` builds it
/// too, so a backend `start` cannot use is a failed check.
///
/// # Errors
/// The client cannot be built for the configured backend URL.
pub fn llm_client(settings: &config::ShimConfig) -> Result<LlmClient, String> {
    let backend = BackendConfig {
        kind: settings.local_llm_backend,
        base_url: settings.ollama_url.clone(),
        api_key: None,
        auth_header: AuthHeader::Bearer,
        connect_timeout: LLM_CONNECT_TIMEOUT,
        total_timeout: LLM_TOTAL_TIMEOUT,
        list_timeout: LLM_LIST_TIMEOUT,
    };
    LlmClient::new(backend).map_err(|err| err.to_string())
}

/// Claims this daemon's instance (refused while another daemon runs the same session, or
/// control mode), then opens what `start` needs: the jail, the audit key and chain, and
/// writes SHIM_START. Nothing here touches the network; [`crate::preflight`] has checked
/// all of it already, so a refusal here means something changed in between.
///
/// # Errors
/// A [`Refusal`] (exit 78) with one line naming what is wrong.
pub fn prepare(config: StartConfig, env: &impl Env) -> Result<Prepared, Refusal> {
    let settings = &config.config;
    let home = config::home_dir(env);
    let daemons = config::daemons_dir(env)
        .ok_or_else(|| preflight("no state directory: set HOME or XDG_STATE_HOME"))?;
    let instance = Instance::of(config.session_id.as_deref());
    // First, before SHIM_START or the status file: a second daemon changes nothing.
    let lock = status::claim(&daemons, &instance).map_err(preflight)?;
    let jail = match (&config.session_id, &home) {
        (Some(_), _) => Jail::open(&config.allowed_root).map_err(|_| {
            preflight(format!(
                "the allowed root {} does not exist or is not a readable folder: create it with `mkdir -p {}`, or pass --allowed-root with an existing folder",
                config.allowed_root.display(),
                config.allowed_root.display()
            ))
        })?,
        // The control connection serves no files: its jail only completes the host, and each
        // child gets its own on the folder the user picked.
        (None, Some(home)) => Jail::open(home).map_err(|_| {
            preflight(format!(
                "the home directory {} is not a readable directory; control mode browses from it",
                home.display()
            ))
        })?,
        (None, None) => {
            return Err(preflight(
                "control mode needs a home directory to browse from: set HOME",
            ));
        }
    };
    let arch = Arch::normalise(std::env::consts::ARCH).ok_or_else(|| {
        preflight(format!(
            "unsupported architecture {}",
            std::env::consts::ARCH
        ))
    })?;
    let machine_id = config.machine_id.clone().unwrap_or_else(machine_id);

    let sandbox = shell_sandbox(settings, config.sandbox_support.as_ref())?;
    let places = Places::from_env(env);
    let (audit, key) = open_audit(settings, env, config.session_id.clone(), &machine_id)?;
    let grant_key = GrantKey::derive(&key);

    let mut host = Host::new(Arc::new(jail))
        .with_audit(audit)
        .with_commands(CommandLimiter::new(
            usize::try_from(settings.max_concurrent_commands.get()).unwrap_or(usize::MAX),
            usize::try_from(settings.max_commands_per_minute.get()).unwrap_or(usize::MAX),
        ))
        .with_sandbox(sandbox);
    let mut session = SessionConfig::new(
        config.session_id.clone().unwrap_or_default(),
        machine_id,
        env!("CARGO_PKG_VERSION"),
        host_platform(),
        arch,
    );
    session.display_name.clone_from(&settings.display_name);
    session.max_concurrent = settings.max_concurrent.get();
    session.command_timeout_seconds = settings.command_timeout_seconds.get();
    session.limits = FileLimits::for_max_file_size(settings.max_file_size_bytes.get());
    if settings.enable_shell {
        session.advertised.push(Capability::Shell);
    }
    host.hardware = settings.enable_hardware;
    if settings.enable_computer_use {
        let clipboard = settings.enable_clipboard.then_some(ClipboardPolicy {
            read_foreign: settings.enable_clipboard_read_foreign,
        });
        host = host.with_computer(Computer::new(clipboard));
        session.advertised.push(Capability::ComputerUse);
    }
    if settings.enable_local_llm {
        let client = llm_client(settings)
            .map_err(|err| preflight(format!("the local model backend URL is unusable: {err}")))?;
        host = host.with_llm(LocalLlm::new(client));
        session.advertised.push(Capability::LocalLlm);
    }
    let status = Some(StatusFile::new(
        instance.status_file(&daemons),
        &config,
        &host,
    ));
    let control = config.session_id.is_none().then(|| ControlConfig {
        template: ChildTemplate {
            endpoint: config.url.clone(),
            token: config.token.clone(),
            oauth: None,
            backoff: config.backoff,
            session: session.clone(),
        },
        machine_id: session.machine_id.clone(),
        home,
        idle_timeout: settings.idle_session_timeout,
        on_live: status
            .clone()
            .map(|file| LiveObserver::new(move |live| file.set_live(live))),
    });
    Ok(Prepared {
        config,
        host,
        session,
        status,
        control,
        grant_key,
        places,
        lock,
    })
}

/// The sandbox `settings` ask for (`shell_sandbox`), when `support` (what the checks' one probe
/// found: [`crate::preflight::Inputs`], gathered by `start` and `mcp` alike) shows this kernel
/// enforces it in full; `None` for `off`. Both faces start here, before anything is opened
/// that a refusal would leave behind.
///
/// # Errors
/// A [`Refusal`] (exit 78): the checks' own sentence, naming what the kernel is missing, or
/// that the sandbox is Linux-only.
pub(crate) fn shell_sandbox(
    settings: &config::ShimConfig,
    support: Option<&Support>,
) -> Result<Option<Sandbox>, Refusal> {
    let mode = settings.shell_sandbox;
    if mode == SandboxMode::Off {
        return Ok(None);
    }
    if let Some(refusal) = crate::preflight::sandbox_refusal(mode, support) {
        return Err(preflight(refusal.sentence()));
    }
    // The launcher the probe ran: the one that showed the mode can be enforced.
    let launcher = support.and_then(Support::launcher).ok_or_else(|| {
        preflight(
            "the shell sandbox was not probed: start again, or start with --shell-sandbox off",
        )
    })?;
    Ok(Sandbox::new(mode, launcher.to_path_buf()))
}

/// The start-up line about commands `who` may run: what they may do, and what the sandbox
/// protects.
pub(crate) fn shell_warning(who: &str, mode: SandboxMode) -> String {
    format!("shell is {}", crate::preflight::shell_enabled(who, mode))
}

/// Opens the machine's one audit chain (creating its key on first use) with records written
/// for `session_id`, and writes SHIM_START, durable before anything runs; returns the key too
/// (root grants derive theirs from it). `start` and `mcp` both start here.
///
/// # Errors
/// A [`Refusal`] (exit 78) naming the path that could not be used.
pub(crate) fn open_audit(
    settings: &config::ShimConfig,
    env: &impl Env,
    session_id: Option<String>,
    machine_id: &str,
) -> Result<(Auditor, [u8; KEY_LEN]), Refusal> {
    let log_path = settings.audit_log_path.clone().ok_or_else(|| {
        preflight("no audit log path: set HOME, XDG_STATE_HOME or audit_log_path")
    })?;
    let key_path = config::audit_key_path(env).ok_or_else(|| {
        preflight("no state directory for the audit key: set HOME or XDG_STATE_HOME")
    })?;
    let (key, _) = load_or_create_audit_key(&key_path, &Places::from_env(env)).map_err(|err| {
        preflight(format!(
            "cannot load or create the audit key {}: {err}",
            key_path.display()
        ))
    })?;
    let identity = AuditIdentity {
        session_id,
        machine_id: Some(machine_id.to_owned()),
        shim_version: env!("CARGO_PKG_VERSION").to_owned(),
    };
    let chain = AuditChain::open(&log_path, key, identity).map_err(|err| {
        preflight(format!(
            "cannot open the audit log {}: {err}",
            log_path.display()
        ))
    })?;
    let start = details([("shim_version", json!(env!("CARGO_PKG_VERSION")))]);
    let audit =
        Auditor::new_after(chain, Entry::ok("SHIM_START", start)).map_err(|err| match err {
            StartError::Write(err) => preflight(format!(
                "cannot write to the audit log {}: {err}",
                log_path.display()
            )),
            StartError::Spawn(err) => preflight(format!("cannot start the audit writer: {err}")),
        })?;
    Ok((audit, key))
}

/// Runs the prepared daemon until it ends for good and returns the exit code.
#[allow(
    clippy::print_stderr,
    reason = "the daemon's one line to the person who started it, as the binary prints"
)]
pub async fn run(prepared: Prepared) -> u8 {
    let Prepared {
        config,
        mut host,
        session,
        status,
        control,
        grant_key,
        places,
        lock,
    } = prepared;
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    if config.config.enable_shell {
        tracing::warn!("{}", shell_warning("the platform", host.sandbox_mode()));
    }
    // A configured token wins; otherwise the tokens `auth` stored, refreshable on a 401.
    let oauth = if config.token.is_none() {
        // The keyring may take up to its timeout to answer: meanwhile the file says starting.
        if let Some(file) = &status {
            file.write_current();
        }
        match stored_credentials(&config, &places, &host).await {
            Ok(oauth) => oauth,
            Err(message) => {
                eprintln!("autogpt-shim: {message}");
                if let Some(file) = &status {
                    file.stop(
                        EXIT_AUTH,
                        format!("exit {EXIT_AUTH}: {message}"),
                        Some(message),
                    );
                }
                drop(lock);
                return EXIT_AUTH;
            }
        }
    } else {
        None
    };
    // Children dial with the same credentials, so every socket shares the one refresh.
    let plane = control.map(|mut control| {
        control.template.oauth.clone_from(&oauth);
        Control::new(control, host.clone(), grant_key)
    });
    match &config.session_id {
        Some(session_id) => tracing::info!(
            session_id = %session_id,
            allowed_root = %host.jail.root().display(),
            url = %config.url,
            authenticated = config.token.is_some(),
            "legacy direct session"
        ),
        None => tracing::info!(
            url = %config.url,
            authenticated = config.token.is_some(),
            "machine control mode"
        ),
    }
    if let Some(plane) = &plane {
        let plane: Arc<dyn ControlPlane> = Arc::new(plane.clone());
        host.role = Role::Control(plane);
    }
    let (stop, shutdown) = Shutdown::new();
    tokio::spawn(async move {
        local_core::signals::stop_requested().await;
        tracing::info!("stopping");
        let _ = stop.send(true);
        // Keep the sender alive: dropping it would read as a second shutdown request only.
        std::future::pending::<()>().await;
    });
    let observer = status
        .clone()
        .map(|file| StateObserver::new(move |state, error| file.set(state, error)));
    let refreshable = oauth.is_some();
    let connection = DataConnection {
        url: config.url.clone(),
        token: config.token.clone(),
        oauth,
        session,
        backoff: config.backoff,
        observer,
    };
    let outcome = run_data_connection(connection, host.clone(), shutdown).await;
    if let Some(plane) = &plane {
        plane.stop_all().await;
    }
    let (code, reason, mut message) = conclude(&outcome, plane.is_some());
    if refreshable && matches!(outcome, Outcome::Unauthorized { .. }) {
        message = Some(format!(
            "the platform refused the stored OAuth token ({reason}) after one refresh; run `autogpt-shim auth` to log in again"
        ));
    }
    if let Some(message) = &message {
        eprintln!("autogpt-shim: {message}");
    }
    // The spare launcher waiting for the next command goes, with its TMPDIR.
    if let Some(sandbox) = &host.sandbox {
        sandbox.shutdown();
    }
    host.audit
        .record_async(
            None,
            Entry::ok("SHIM_STOP", details([("reason", json!(reason))])),
        )
        .await;
    if let Some(file) = &status {
        let stop_reason = match &outcome {
            Outcome::Shutdown => "stopped by Ctrl-C or SIGTERM".to_owned(),
            _ if code == 0 => format!("the platform ended the session ({reason})"),
            _ => format!("exit {code}: {}", message.as_deref().unwrap_or(&reason)),
        };
        let error = (code != 0).then(|| message.clone().unwrap_or_else(|| reason.clone()));
        file.stop(code, stop_reason, error);
    }
    // Released once the status says stopped, so `status` never sees a free lock and a
    // running state for a clean stop.
    drop(lock);
    code
}

/// The OAuth credentials `auth` stored, if any.
async fn stored_credentials(
    config: &StartConfig,
    places: &Places,
    host: &Host,
) -> Result<Option<Credentials>, String> {
    let store = TokenStore::open(places).await;
    let tokens = store
        .load()
        .await
        .map_err(|err| format!("cannot read the stored OAuth tokens: {err}"))?;
    let Some(tokens) = tokens else {
        tracing::warn!("no token: connecting without one (run `autogpt-shim auth` to log in)");
        return Ok(None);
    };
    let endpoints = Endpoints::from_config(&config.config).map_err(|err| err.to_string())?;
    let client = OAuthClient::new(endpoints).map_err(|err| err.to_string())?;
    tracing::info!(
        keyring = store.has_keyring(),
        "using the stored OAuth tokens"
    );
    Ok(Some(Credentials::new(
        tokens,
        client,
        store,
        host.audit.clone(),
    )))
}

/// The exit code, the SHIM_STOP reason and the line for stderr, if any.
fn conclude(outcome: &Outcome, control: bool) -> (u8, String, Option<String>) {
    match outcome {
        Outcome::Shutdown => (0, "signal".to_owned(), None),
        Outcome::Stopped(SessionEnd::HandshakeRejected {
            code: close_code::PROTOCOL_VERSION_MISMATCH,
        }) if control => (
            EXIT_PREFLIGHT,
            "control_ack_incomplete".to_owned(),
            Some(
                "the platform's HELLO_ACK for the control connection lacks a null session id, a connection id, protocol 1.1 or the directory_browse grant; this platform does not support machine control mode (pass --session-id for a direct session)"
                    .to_owned(),
            ),
        ),
        Outcome::Stopped(SessionEnd::HandshakeRejected {
            code: close_code::SESSION_MISMATCH,
        }) if control => (
            EXIT_AUTH,
            "session_mismatch".to_owned(),
            Some(
                "the platform acknowledged the control connection with a session id; check the platform URL and token"
                    .to_owned(),
            ),
        ),
        // The reference treats a HELLO_ACK for another session as an authentication failure.
        Outcome::Stopped(SessionEnd::HandshakeRejected {
            code: close_code::SESSION_MISMATCH,
        }) => (
            EXIT_AUTH,
            "session_mismatch".to_owned(),
            Some(
                "the platform acknowledged a different session; check the session id and token"
                    .to_owned(),
            ),
        ),
        Outcome::Stopped(end) => (0, stop_reason(end), None),
        Outcome::Unauthorized { status } => (
            EXIT_AUTH,
            format!("http_{status}"),
            Some(format!(
                "the platform refused the token (HTTP {status}); check AUTOGPT_SHIM_TOKEN or --token-file"
            )),
        ),
        Outcome::InvalidRequest(reason) => (
            EXIT_PREFLIGHT,
            "invalid_request".to_owned(),
            Some(reason.clone()),
        ),
    }
}

fn stop_reason(end: &SessionEnd) -> String {
    match end {
        SessionEnd::Fatal { code, .. } => format!(
            "ws_closed_{code}_{}",
            close_code::label(*code).unwrap_or("unknown")
        ),
        SessionEnd::Revoked(_) => "session_revoked".to_owned(),
        SessionEnd::VersionMismatch { .. } => "protocol_version_mismatch".to_owned(),
        SessionEnd::HandshakeRejected { code } => format!("handshake_rejected_{code}"),
        other => format!("{other:?}"),
    }
}

/// The daemon's status file, rewritten on each state change; write failures only log.
#[derive(Debug, Clone)]
struct StatusFile {
    path: PathBuf,
    current: Arc<Mutex<DaemonStatus>>,
}

impl StatusFile {
    fn new(path: PathBuf, config: &StartConfig, host: &Host) -> Self {
        let now = status::epoch_seconds(SystemTime::now());
        let file = Self {
            path,
            current: Arc::new(Mutex::new(DaemonStatus {
                pid: std::process::id(),
                state: DaemonState::Starting,
                mode: if config.session_id.is_some() {
                    "legacy"
                } else {
                    "control"
                }
                .to_owned(),
                session_id: config.session_id.clone(),
                platform_url: status::redact_url(&config.url),
                // Control mode has no root of its own: each child is jailed to its chat's
                // folder, and the control connection's jail serves no files.
                allowed_root: config
                    .session_id
                    .is_some()
                    .then(|| host.jail.root().to_string_lossy().into_owned()),
                live_sessions: config.session_id.is_none().then_some(0),
                since: now,
                last_error: None,
                stop_reason: None,
                exit_code: None,
                updated_at: now,
            })),
        };
        // Not written yet: a start with nothing to wait for goes straight to "connecting",
        // and each write (a rename, 0.3 ms on ext4) would come before HELLO.
        file
    }

    /// Writes what it holds now: "starting" before a wait that comes before the first dial.
    fn write_current(&self) {
        self.update(|_, _| {});
    }

    fn set(&self, state: DaemonState, error: Option<&str>) {
        self.update(|current, now| {
            if current.state != state {
                current.since = now;
            }
            current.state = state;
            if let Some(error) = error {
                current.last_error = Some(error.to_owned());
            }
        });
    }

    /// The last write: stopped, why, with which exit code, and the error if it was one.
    fn stop(&self, code: u8, reason: String, error: Option<String>) {
        self.update(|current, now| {
            current.since = now;
            current.state = DaemonState::Stopped;
            current.stop_reason = Some(reason);
            current.exit_code = Some(code);
            if error.is_some() {
                current.last_error = error;
            }
        });
    }

    /// Control mode: the number of live child sessions changed.
    fn set_live(&self, live: usize) {
        self.update(|current, _| current.live_sessions = Some(live));
    }

    fn update(&self, change: impl FnOnce(&mut DaemonStatus, f64)) {
        let now = status::epoch_seconds(SystemTime::now());
        let snapshot = {
            let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            change(&mut current, now);
            current.updated_at = now;
            current.clone()
        };
        if let Err(err) = status::write(&self.path, &snapshot) {
            tracing::debug!(error = %err, "could not write the status file");
        }
    }
}

fn preflight(message: impl Into<String>) -> Refusal {
    Refusal {
        message: message.into(),
        code: EXIT_PREFLIGHT,
    }
}

/// HELLO's `platform`: WSL2 is Linux whose `/proc/version` names Microsoft (PROTOCOL.md's
/// `HELLO.platform` table); the same detection picks WSL2's virtual roots.
fn host_platform() -> Platform {
    match local_core::machine::browse::HostOs::detect() {
        local_core::machine::browse::HostOs::MacOs => Platform::Darwin,
        local_core::machine::browse::HostOs::Windows => Platform::Windows,
        local_core::machine::browse::HostOs::Wsl2 => Platform::Wsl2,
        local_core::machine::browse::HostOs::Linux => Platform::Linux,
    }
}

/// The reference's Linux machine id: `/etc/machine-id` as a dashed UUID; otherwise a
/// per-process `local-<uuid>` (the reference persists its fallback; this build does not).
pub(crate) fn machine_id() -> String {
    read_machine_id().unwrap_or_else(|| format!("local-{}", local_core::secret::new_id()))
}

fn read_machine_id() -> Option<String> {
    // Through a jail on /etc: the connector reads files only that way.
    let jail = Jail::open(Path::new("/etc")).ok()?;
    let path = jail.resolve("machine-id").ok()?;
    let mut text = String::new();
    jail.open_read(&path)
        .ok()?
        .take(256)
        .read_to_string(&mut text)
        .ok()?;
    let hex = text.trim();
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let hex = hex.to_ascii_lowercase();
    Some(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}
