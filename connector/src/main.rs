//! `autogpt-shim`: `start --session-id ID` runs one data connection until it ends for good.
//!
//! Exit codes follow the reference: 0 after a fatal close, revocation or Ctrl-C/SIGTERM,
//! 77 when the platform refuses the token, 78 when start-up is refused.

use std::io::{IsTerminal, Read};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use autogpt_shim::cli::{Cli, EXIT_AUTH, EXIT_PREFLIGHT, ProcessEnv, StartConfig, resolve};
use autogpt_shim::protocol::{Arch, Platform, close_code};
use autogpt_shim::session::{Host, SessionConfig, SessionEnd};
use autogpt_shim::ws::{DataConnection, Outcome, Shutdown, run_data_connection};
use clap::Parser;
use local_core::jail::Jail;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match resolve(&cli, &ProcessEnv) {
        Ok(config) => config,
        Err(refusal) => return fail(&refusal.message, refusal.code),
    };
    let jail = match Jail::open(&config.allowed_root) {
        Ok(jail) => Arc::new(jail),
        Err(_) => {
            return fail(
                &format!(
                    "the allowed root {} does not exist or is not a readable directory; create it or pass --allowed-root",
                    config.allowed_root.display()
                ),
                EXIT_PREFLIGHT,
            );
        }
    };
    let Some(arch) = Arch::normalise(std::env::consts::ARCH) else {
        return fail(
            &format!("unsupported architecture {}", std::env::consts::ARCH),
            EXIT_PREFLIGHT,
        );
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return fail(&format!("cannot start the runtime: {err}"), EXIT_PREFLIGHT),
    };
    init_tracing(config.log_level);
    runtime.block_on(run(config, jail, arch))
}

/// Prints the one line a refusal gets and returns its exit code.
fn fail(message: &str, code: u8) -> ExitCode {
    eprintln!("autogpt-shim: {message}");
    ExitCode::from(code)
}

fn init_tracing(level: &str) {
    // Transport crates stay at warn: their debug output is noise here, and header dumps at
    // low levels are how tokens leak into logs.
    let filter = tracing_subscriber::EnvFilter::new(format!(
        "{level},tungstenite=warn,tokio_tungstenite=warn,rustls=warn"
    ));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

async fn run(config: StartConfig, jail: Arc<Jail>, arch: Arch) -> ExitCode {
    let machine_id = config.machine_id.clone().unwrap_or_else(machine_id);
    let session = SessionConfig::new(
        config.session_id.clone(),
        machine_id,
        env!("CARGO_PKG_VERSION"),
        host_platform(),
        arch,
    );
    tracing::info!(
        session_id = %config.session_id,
        allowed_root = %jail.root().display(),
        url = %config.url,
        authenticated = config.token.is_some(),
        "legacy direct session"
    );
    let (stop, shutdown) = Shutdown::new();
    tokio::spawn(async move {
        signalled().await;
        tracing::info!("stopping");
        let _ = stop.send(true);
        // Keep the sender alive: dropping it would read as a second shutdown request only.
        std::future::pending::<()>().await;
    });
    let connection = DataConnection {
        url: config.url,
        token: config.token,
        session,
        backoff: config.backoff,
    };
    match run_data_connection(connection, Host::new(jail), shutdown).await {
        // The reference treats a HELLO_ACK for another session as an authentication failure.
        Outcome::Stopped(SessionEnd::HandshakeRejected {
            code: close_code::SESSION_MISMATCH,
        }) => fail(
            "the platform acknowledged a different session; check the session id and token",
            EXIT_AUTH,
        ),
        Outcome::Shutdown | Outcome::Stopped(_) => ExitCode::SUCCESS,
        Outcome::Unauthorized { status } => fail(
            &format!("the platform refused the token (HTTP {status}); check AUTOGPT_SHIM_TOKEN"),
            EXIT_AUTH,
        ),
        Outcome::InvalidRequest(reason) => fail(&reason, EXIT_PREFLIGHT),
    }
}

/// Resolves on Ctrl-C or, on Unix, SIGTERM.
async fn signalled() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

const fn host_platform() -> Platform {
    if cfg!(target_os = "macos") {
        Platform::Darwin
    } else if cfg!(target_os = "windows") {
        Platform::Windows
    } else {
        Platform::Linux
    }
}

/// The reference's Linux machine id: `/etc/machine-id` as a dashed UUID; otherwise a
/// per-process `local-<uuid>` (the reference persists its fallback; this build does not).
fn machine_id() -> String {
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
