//! `msguide-api`: serves the local API on a loopback address until Ctrl-C or SIGTERM.

use std::{io::IsTerminal, process::ExitCode, sync::Arc, time::Duration};

use clap::Parser;
use local_core::{
    LocalState,
    clock::{Clock, SystemClock},
    guide::{
        diagnostics::DiagnosticLog,
        guidance::{demo::DemoProvider, openai::OpenAiProvider, provider::GuidanceProvider},
        state::LocalConfig,
    },
    limits::MAX_BODY_BYTES,
};
use msguide_api::{
    boundary::Boundary,
    config::{Config, ProviderChoice, loopback_host},
    server::{ConnectionLimits, listen, serve},
};

/// The MSGuide local API (loopback only).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Loopback address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to bind (0 picks a free one).
    #[arg(long, default_value_t = 8765)]
    port: u16,
}

/// What a valid `MSGUIDE_LOCAL_TOKEN` looks like (`local_core::secret::is_b64token`).
const TOKEN_SHAPE: &str = "it must be one or more letters, digits, '-', '.', '_', '~', '+' or \
                           '/', optionally followed by '=' signs, with no spaces";

async fn run(cli: Cli) -> Result<(), String> {
    let config = Config::from_vars(|name| std::env::var(name).ok()).map_err(|e| e.to_string())?;
    let ip = loopback_host(&cli.host).map_err(|e| e.to_string())?;
    let diagnostic_log = match &config.diagnostic_log {
        Some(path) => Some(
            DiagnosticLog::open(path)
                .map_err(|e| format!("cannot open the diagnostic log: {}", e.kind()))?,
        ),
        None => None,
    };
    // One clock for the state and the provider, so both judge an observation's age alike.
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let provider: Arc<dyn GuidanceProvider> = match config.provider {
        ProviderChoice::Demo => Arc::new(DemoProvider),
        ProviderChoice::OpenAiCompatible(model) => Arc::new(
            // The client error is not shown: its text is not needed to act on, and nothing
            // derived from the configuration should reach the terminal.
            OpenAiProvider::new(model, Arc::clone(&clock))
                .map_err(|_| "cannot start the model client".to_owned())?,
        ),
    };
    if config.token.is_none() {
        // Said once at start, never with the value: what is wrong and how to put it right.
        if std::env::var_os(local_core::env_names::LOCAL_TOKEN).is_some() {
            tracing::warn!(
                "MSGUIDE_LOCAL_TOKEN is not a valid token, so every /v1 and /admin request will \
                 answer 503; {TOKEN_SHAPE}"
            );
        } else {
            tracing::warn!(
                "MSGUIDE_LOCAL_TOKEN is not set, so every /v1 and /admin request will answer \
                 503; start through `msguide start`, which sets it, or export it: {TOKEN_SHAPE}"
            );
        }
    }
    let local = Arc::new(LocalState::new(LocalConfig {
        audit_enabled: config.audit_enabled,
        diagnostic_log,
        provider,
        clock,
        ..LocalConfig::default()
    }));
    let boundary = Boundary {
        token: config.token,
        max_body_bytes: MAX_BODY_BYTES,
        body_timeout: Duration::from_secs(30),
    };
    let listener = listen(std::net::SocketAddr::new(ip, cli.port))
        .map_err(|e| format!("cannot listen on {ip}:{}: {e}", cli.port))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    local.started();
    tracing::info!(%address, "msguide-api listening");
    let app = msguide_api::app(Arc::clone(&local), boundary);
    let served = serve(
        listener,
        app,
        ConnectionLimits::default(),
        local_core::signals::stop_requested(),
    )
    .await;
    local.shutdown();
    served.map_err(|e| format!("cannot start the threads that serve connections ({e}); check the process and thread limits (ulimit -u)"))
}

fn main() -> ExitCode {
    if local_core::lifetime::follow_launcher() == Some(local_core::lifetime::Tie::Orphaned) {
        eprintln!("msguide-api: the launcher that started it has already exited; not serving");
        return ExitCode::FAILURE;
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "msguide_api=info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never in the launcher's backend.log.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = Cli::parse();
    // This thread only accepts connections and waits for the stop signal; the connections
    // are served on threads of their own (`server::serve`).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("msguide-api: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("msguide-api: {message}");
            ExitCode::FAILURE
        }
    }
}
