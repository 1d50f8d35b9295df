//! `autogpt-shim`: parses the command line, runs `start` through [`autogpt_shim::daemon`],
//! `mcp` and `try` through their modules, and every other subcommand through
//! [`autogpt_shim::commands::run`].

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use autogpt_shim::cli::{Cli, Command, EXIT_PREFLIGHT, ProcessEnv, resolve};
use autogpt_shim::{commands, daemon, mcp, try_platform};
use clap::Parser;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Mcp(_) = cli.command {
        // stdout is the MCP transport: every log line goes to stderr from here on.
        return ExitCode::from(mcp::main(&cli, &ProcessEnv, init_tracing));
    }
    if let Command::Try(args) = &cli.command {
        let input = Box::new(std::io::BufReader::new(std::io::stdin()));
        let output = Box::new(std::io::stdout());
        return ExitCode::from(try_platform::main(&cli, args, &ProcessEnv, input, output));
    }
    if !matches!(cli.command, Command::Start(_)) {
        // `audit tail` follows until the process is interrupted; the default SIGINT action
        // ends it, so nothing ever sets this flag.
        let stop = Arc::new(AtomicBool::new(false));
        let code = commands::run(&cli, &ProcessEnv, &mut std::io::stdout().lock(), &stop);
        return ExitCode::from(code);
    }
    let prepared = match resolve(&cli, &ProcessEnv).and_then(|config| {
        let level = config.log_level;
        daemon::prepare(config, &ProcessEnv).map(|prepared| (prepared, level))
    }) {
        Ok(prepared) => prepared,
        Err(refusal) => return fail(&refusal.message, refusal.code),
    };
    let (prepared, level) = prepared;
    // One runtime thread: the async side only frames, parses and dispatches, and every
    // file, capture or audit write runs on a blocking or writer thread. Tasks handing work to
    // each other on one thread need no cross-thread wake-ups: with 4 FILE_STATs in flight
    // the multi-thread runtime cost 9-11.7 context switches a request, this one 5.9.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            return fail(
                &format!(
                    "cannot start the runtime ({}): close some programs and start again",
                    err.kind()
                ),
                EXIT_PREFLIGHT,
            );
        }
    };
    init_tracing(level);
    // Boxed: `block_on` takes the 18 KiB daemon future by value, and on the stack it kept
    // more of it touched, so resident for the daemon's life: 124 KiB of stack at rest
    // unboxed, 100 KiB boxed (smaps of the idle shim in the connector bench).
    ExitCode::from(runtime.block_on(Box::pin(daemon::run(prepared))))
}

/// Prints a refusal, one line per problem, and returns its exit code.
fn fail(message: &str, code: u8) -> ExitCode {
    for line in message.lines() {
        eprintln!("autogpt-shim: {line}");
    }
    ExitCode::from(code)
}

fn init_tracing(level: &str) {
    // Transport crates stay at warn: their debug output is noise here, and header dumps at
    // low levels are how tokens leak into logs. The MCP SDK logs whole requests (file content)
    // below error, and its warnings quote the JSON-RPC errors, so it says only errors.
    let filter = tracing_subscriber::EnvFilter::new(format!(
        "{level},tungstenite=warn,tokio_tungstenite=warn,rustls=warn,hyper=warn,hyper_util=warn,rmcp=error"
    ));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
