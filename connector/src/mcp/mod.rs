//! `autogpt-shim mcp`: the connector's capabilities served to a local MCP client (a desktop
//! chat app, a coding agent) over stdin/stdout, or with `--http` over Streamable HTTP on
//! 127.0.0.1 (`http.rs`), on the official SDK (`rmcp`).
//!
//! A third thin face: every tool call becomes the wire message the platform would send
//! (`tools.rs`) and goes through the same capability path as a WebSocket request
//! (`session::serve`: the jail, the limits, the exec supervisor, the audit records), and its
//! reply becomes the tool result (`results.rs`), an ERROR becoming `isError: true` with the
//! same code and message. The configuration is `start`'s (flags, `AUTOGPT_SHIM_*`, the TOML
//! file); only files are offered unless the operator enabled more. Records go to the machine's
//! one audit chain with `session_id` `mcp`, so `autogpt-shim audit verify` covers both faces.
//!
//! stdout carries only protocol frames: every log line goes to stderr. The transport
//! (`stdio.rs`) answers every line it cannot serve (not JSON, over the limit) as JSON-RPC does.
//! As on a connection, at most `max_concurrent` calls run at once; the next is refused at once
//! with the connector's SHIM_OVERLOADED. The process ends when stdin closes (or on
//! Ctrl-C/SIGTERM), and every running call is stopped first (a command's process group
//! killed); a call also stops at its `notifications/cancelled`.

mod budget;
mod elements;
mod http;
mod results;
mod roots;
mod schema;
mod stdio;
mod tools;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use local_core::desktop::clipboard::Policy as ClipboardPolicy;
use local_core::machine::exec::CommandLimiter;
use local_core::machine::files::FileLimits;
use local_core::machine::jail::Jail;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::json;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::audit::{Entry, details};
use crate::cli::{
    Cli, Command, DEFAULT_MAX_ANSWER_CHARS, DEFAULT_MAX_IMAGE_EDGE, EXIT_PREFLIGHT, Env, McpArgs,
    Refusal, gather, tracing_level,
};
use crate::config::ShimConfig;
use crate::daemon;
use crate::error;
use crate::request_log::RequestLog;
use crate::session::{Computer, Host, Served, ShellLimits, serve};
use budget::Plan;
use roots::Roots;
use tools::{Limits, Needs, Rejected, Spec};

/// The `session_id` of every record this face writes: where the connector names its session,
/// the MCP face names its channel.
pub const AUDIT_CHANNEL: &str = "mcp";

/// The audit code of a call stopped before it finished (cancelled, or the client went away);
/// no wire ERROR carries it, since nothing is answered then.
const STOPPED_CODE: &str = "CANCELLED";

/// Runs `autogpt-shim mcp` to its end and returns the exit code: 0 once stdin closed, 78 when
/// start-up is refused. `init_tracing` starts the stderr log once the refusals are past.
#[allow(
    clippy::print_stderr,
    reason = "a refused start-up's one line to the person who started it, as `start` prints"
)]
pub fn main(cli: &Cli, env: &impl Env, init_tracing: fn(&str)) -> u8 {
    let prepared = match prepare(cli, env) {
        Ok(prepared) => prepared,
        Err(refusal) => {
            eprintln!("autogpt-shim: {}", refusal.message);
            return refusal.code;
        }
    };
    // One runtime thread, as `start`: the async side only frames and dispatches.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!(
                "autogpt-shim: cannot start the runtime ({}): close some programs and start again",
                err.kind()
            );
            return EXIT_PREFLIGHT;
        }
    };
    init_tracing(prepared.log_level);
    let code = runtime.block_on(run(prepared));
    // A blocking read of stdin (where it is no pipe) cannot be interrupted; nothing waits
    // for it once every call has stopped.
    runtime.shutdown_background();
    code
}

/// What start-up opened: the host every call runs on and the tools offered.
struct Prepared {
    host: Host,
    limits: FileLimits,
    shell_limits: ShellLimits,
    tools: Vec<Spec>,
    described: Limits,
    max_concurrent: NonZeroU32,
    log_level: &'static str,
    /// For the operator (unknown config keys, shadowed sources), logged once tracing runs.
    warnings: Vec<String>,
    /// For the operator at INFO: daemon switches that do not apply here.
    notices: Vec<String>,
    /// `--http`: the socket and token to serve on instead of stdio.
    http: Option<http::Listener>,
}

/// The configuration (as `start` loads it), the jail, the audit chain (SHIM_START written)
/// and the host with what the operator enabled.
fn prepare(cli: &Cli, env: &impl Env) -> Result<Prepared, Refusal> {
    let preflight = |message: String| Refusal {
        message,
        code: EXIT_PREFLIGHT,
    };
    let log_level = tracing_level(&cli.log_level).ok_or_else(|| {
        preflight(format!(
            "unknown --log-level {:?} (use DEBUG, INFO, WARNING, ERROR or CRITICAL)",
            cli.log_level
        ))
    })?;
    let (inputs, warnings) = gather(cli, env)?;
    let settings = inputs.config;
    let root = settings.allowed_root.clone().ok_or_else(|| {
        preflight(
            "no allowed root: pass --allowed-root, set AUTOGPT_SHIM_ALLOWED_ROOT or set HOME"
                .to_owned(),
        )
    })?;
    let jail = Jail::open(&root).map_err(|_| {
        preflight(format!(
            "the allowed root {} does not exist or is not a readable folder: create it, or pass --allowed-root with an existing folder",
            root.display()
        ))
    })?;
    let http = listen(cli, &settings).map_err(preflight)?;
    let sandbox = daemon::shell_sandbox(&settings, inputs.sandbox_support.as_ref())?;
    let machine_id = settings
        .machine_id
        .clone()
        .unwrap_or_else(daemon::machine_id);
    let (audit, _) =
        daemon::open_audit(&settings, env, Some(AUDIT_CHANNEL.to_owned()), &machine_id)?;
    let mut host = Host::new(Arc::new(jail))
        .with_audit(audit)
        .with_commands(CommandLimiter::new(
            usize::try_from(settings.max_concurrent_commands.get()).unwrap_or(usize::MAX),
            usize::try_from(settings.max_commands_per_minute.get()).unwrap_or(usize::MAX),
        ))
        .with_sandbox(sandbox);
    let powers = Powers::of(cli, &settings);
    let tools = select(tools::catalogue(), &powers).map_err(preflight)?;
    if powers.computer_use {
        let policy = powers.clipboard.then_some(ClipboardPolicy {
            read_foreign: powers.read_foreign,
        });
        host = host.with_computer(Computer::new(policy).with_max_image_edge(powers.max_image_edge));
    }
    let mut notices = Vec::new();
    for (daemon, offered, switch) in [
        (settings.enable_shell, powers.shell, "enable_shell"),
        (
            settings.enable_computer_use,
            powers.computer_use,
            "enable_computer_use",
        ),
    ] {
        if daemon && !offered {
            notices.push(format!(
                "{switch} is set for the daemon (`start`) and does not apply here: `mcp` offers it only with --{} or {switch} = true in the config file's [mcp] section",
                switch.replace('_', "-")
            ));
        }
    }
    let max_file_size_bytes = settings.max_file_size_bytes.get();
    Ok(Prepared {
        host,
        limits: FileLimits::for_max_file_size(max_file_size_bytes),
        shell_limits: ShellLimits {
            ceiling: Duration::from_secs(settings.command_timeout_seconds.get()),
            max_output_bytes: max_file_size_bytes,
        },
        tools,
        described: Limits {
            max_file_size_bytes,
            command_timeout_seconds: settings.command_timeout_seconds.get(),
            max_answer_chars: powers.max_answer_chars,
            max_image_edge: powers.max_image_edge,
        },
        max_concurrent: settings.max_concurrent,
        log_level,
        warnings,
        notices,
        http,
    })
}

/// `--http [PORT]`: the socket bound and the token read (or made) before anything is written,
/// so a port in use or a bad token file refuses start-up; `None` serves stdio.
fn listen(cli: &Cli, settings: &ShimConfig) -> Result<Option<http::Listener>, String> {
    let Command::Mcp(args) = &cli.command else {
        return Ok(None);
    };
    let Some(port) = args.http else {
        if args.http_token_file.is_some() {
            return Err("--http-token-file is the token of --http: add --http [PORT], or leave it out to serve stdio".to_owned());
        }
        return Ok(None);
    };
    let token_file = args
        .http_token_file
        .as_deref()
        .or(settings.mcp.http_token_file.as_deref());
    http::open(port, token_file).map(Some)
}

/// What `mcp` may offer: its own switches or the config file's `[mcp]` section, never the
/// daemon's settings (a shell enabled for `start` must not reach an MCP client unasked).
#[derive(Debug)]
#[allow(clippy::struct_excessive_bools)]
struct Powers {
    shell: bool,
    computer_use: bool,
    /// Computer use and the clipboard switch.
    clipboard: bool,
    read_foreign: bool,
    /// `--tools`, else the section's `tools`, with where it came from (for messages).
    tools: Option<(Vec<String>, &'static str)>,
    /// `--exclude-tools` and the section's `exclude_tools`, each name with where it came from.
    exclude: Vec<(String, &'static str)>,
    /// `--max-answer-chars`: the most characters of text one answer has.
    max_answer_chars: usize,
    /// `--max-image-edge`: the longest side of a screenshot.
    max_image_edge: u32,
}

/// Where a tool list came from, as a refusal names it.
const TOOLS_FLAG: &str = "--tools";
const TOOLS_KEY: &str = "the config file's [mcp] tools";
const EXCLUDE_FLAG: &str = "--exclude-tools";
const EXCLUDE_KEY: &str = "the config file's [mcp] exclude_tools";

impl Powers {
    fn of(cli: &Cli, settings: &ShimConfig) -> Self {
        let section = &settings.mcp;
        let flags = match &cli.command {
            Command::Mcp(args) => Some(args),
            _ => None,
        };
        let flag = |on: fn(&McpArgs) -> bool| flags.is_some_and(on);
        let computer_use = flag(|a| a.enable_computer_use) || section.enable_computer_use;
        Self {
            shell: flag(|a| a.enable_shell) || section.enable_shell,
            computer_use,
            clipboard: computer_use && (flag(|a| a.enable_clipboard) || section.enable_clipboard),
            read_foreign: flag(|a| a.enable_clipboard_read_foreign)
                || section.enable_clipboard_read_foreign,
            tools: flags
                .and_then(|args| args.tools.clone())
                .map(|names| (names, TOOLS_FLAG))
                .or_else(|| section.tools.clone().map(|names| (names, TOOLS_KEY))),
            exclude: flags
                .map(|args| args.exclude_tools.clone())
                .unwrap_or_default()
                .into_iter()
                .map(|name| (name, EXCLUDE_FLAG))
                .chain(
                    section
                        .exclude_tools
                        .iter()
                        .map(|name| (name.clone(), EXCLUDE_KEY)),
                )
                .collect(),
            max_answer_chars: flags.map_or(DEFAULT_MAX_ANSWER_CHARS, |args| args.max_answer_chars),
            max_image_edge: flags.map_or(DEFAULT_MAX_IMAGE_EDGE, |args| args.max_image_edge),
        }
    }

    const fn offers(&self, needs: Needs) -> bool {
        match needs {
            Needs::Files => true,
            Needs::Shell => self.shell,
            Needs::ComputerUse => self.computer_use,
            Needs::Clipboard => self.clipboard,
        }
    }
}

/// The tools offered: those the powers enable, narrowed by the allow list and the exclude
/// list. A name no tool has, or an allowed tool whose switch is off, is refused (a list that
/// silently offers less than it says would hide a typo).
fn select(catalogue: Vec<Spec>, powers: &Powers) -> Result<Vec<Spec>, String> {
    let names: Vec<&str> = catalogue.iter().map(|tool| tool.name).collect();
    let allowed = powers
        .tools
        .iter()
        .flat_map(|(names, list)| names.iter().map(|name| (name.as_str(), *list)));
    let excluded = powers
        .exclude
        .iter()
        .map(|(name, list)| (name.as_str(), *list));
    for (name, list) in allowed.chain(excluded) {
        if !names.contains(&name.trim()) {
            return Err(format!(
                "{list} names {name:?}, which is no tool of this server: use names from {}",
                names.join(", ")
            ));
        }
    }
    let listed = |name: &str, entry: &str| entry.trim() == name;
    if let Some((allowed, list)) = &powers.tools {
        for tool in &catalogue {
            if allowed.iter().any(|name| listed(tool.name, name)) && !powers.offers(tool.needs) {
                return Err(format!(
                    "{list} names {}, which needs {}: add that switch (or set it in the config file's [mcp] section), or leave the name out",
                    tool.name,
                    tool.needs.switch()
                ));
            }
        }
    }
    Ok(catalogue
        .into_iter()
        .filter(|tool| powers.offers(tool.needs))
        .filter(|tool| {
            powers
                .tools
                .as_ref()
                .is_none_or(|(allowed, _)| allowed.iter().any(|name| listed(tool.name, name)))
        })
        .filter(|tool| {
            !powers
                .exclude
                .iter()
                .any(|(name, _)| listed(tool.name, name))
        })
        .collect())
}

/// Serves stdio until stdin closes or a stop signal, stops every running call, writes
/// SHIM_STOP and returns the exit code.
async fn run(prepared: Prepared) -> u8 {
    let Prepared {
        host,
        limits,
        shell_limits,
        tools,
        described,
        max_concurrent,
        warnings,
        notices,
        http: listener,
        ..
    } = prepared;
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    for notice in &notices {
        tracing::info!("{notice}");
    }
    // Said once, as `start` says it: these tools act as the user, far beyond the root.
    if tools.iter().any(|tool| tool.needs == Needs::Shell) {
        tracing::warn!(
            "{}",
            daemon::shell_warning("the MCP client", host.sandbox_mode())
        );
    }
    if tools.iter().any(|tool| tool.needs == Needs::ComputerUse) {
        tracing::warn!(
            "computer use is enabled: the MCP client can see the screen and drive the mouse and keyboard"
        );
    }
    if let Some(computer) = host.computer.clone() {
        // The probe decides which computer-use features are served, as HELLO does.
        let _ = tokio::task::spawn_blocking(move || computer.hello()).await;
    }
    let mut listed = Vec::with_capacity(tools.len());
    for tool in &tools {
        match tool.tool(&described) {
            Ok(tool) => listed.push(tool),
            Err(err) => tracing::error!(tool = tool.name, error = %err, "no schema"),
        }
    }
    tracing::info!(
        allowed_root = %host.jail.root().display(),
        tools = listed.len(),
        transport = if listener.is_some() { "Streamable HTTP" } else { "stdio" },
        "serving MCP"
    );
    let (shutdown, stopping) = watch::channel(false);
    let (calls, mut calls_done) = mpsc::channel::<()>(1);
    let server = Server::new(Arc::new(Inner {
        host: host.clone(),
        limits,
        shell_limits,
        tools,
        listed,
        stopping,
        calls: calls.downgrade(),
        in_flight: Semaphore::new(usize::try_from(max_concurrent.get()).unwrap_or(usize::MAX)),
        max_concurrent,
        max_answer_chars: described.max_answer_chars,
    }));
    let reason = if let Some(listener) = listener {
        // Running calls stop at the signal, before the connections waiting on them drain.
        let stop = async {
            local_core::signals::stop_requested().await;
            let _ = shutdown.send(true);
        };
        http::serve(listener, &server, stop).await;
        "signal"
    } else {
        let (stdin, stdout) = rmcp::transport::stdio_pipes();
        let transport = stdio::Stdio::new(stdin, stdout, stdio::MAX_LINE_BYTES);
        match server.serve(transport).await {
            Ok(service) => tokio::select! {
                _ = service.waiting() => "stdin_closed",
                () = local_core::signals::stop_requested() => "signal",
            },
            Err(err) => {
                tracing::warn!(error = %err, "the MCP client did not initialise");
                "initialize_failed"
            }
        }
    };
    // Every call still running stops now (a command's process tree is killed), and each
    // holds a sender until it has: the channel closes once the last one is gone.
    let _ = shutdown.send(true);
    drop(calls);
    let _ = calls_done.recv().await;
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
    0
}

/// The MCP server: the handler the SDK calls for every request of one client.
#[derive(Clone)]
struct Server {
    inner: Arc<Inner>,
    /// The client's MCP roots, which narrow the file tools within the allowed root.
    roots: Arc<Roots>,
}

impl Server {
    fn new(inner: Arc<Inner>) -> Self {
        let roots = Arc::new(Roots::new(Arc::clone(&inner.host.jail)));
        Self { inner, roots }
    }

    /// The handler of another client (an HTTP session): the same host, tools and limits, and
    /// roots of its own.
    fn for_client(&self) -> Self {
        Self::new(Arc::clone(&self.inner))
    }
}

/// What every client of one server shares.
struct Inner {
    host: Host,
    limits: FileLimits,
    shell_limits: ShellLimits,
    /// The tools offered, for calls.
    tools: Vec<Spec>,
    /// The same tools as `tools/list` shows them.
    listed: Vec<Tool>,
    /// Becomes true when the server stops: every running call stops with it.
    stopping: watch::Receiver<bool>,
    /// Held by every running call (see `run`).
    /// Weak, so that handlers an HTTP session or connection still holds do not keep `run`
    /// waiting: once `run` lets go of its sender, only running calls hold one.
    calls: mpsc::WeakSender<()>,
    /// One permit per call that may run at once: `max_concurrent`, as on a connection.
    in_flight: Semaphore,
    max_concurrent: NonZeroU32,
    /// The most characters of text one answer has (`budget.rs`).
    max_answer_chars: usize,
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "autogpt-shim",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "This machine's files inside one allowed root (and, where the operator enabled them, commands and the desktop), jailed and audited. Paths are relative to the allowed root.",
            )
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // Known before any call can arrive: a client that offers roots is asked for them, and
        // calls wait for the answer rather than run on the whole allowed root.
        self.roots.expect(request.capabilities.roots.is_some());
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.roots.refresh(context.peer);
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        self.roots.refresh(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.inner.listed.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let inner = &self.inner;
        let Some(tool) = inner.tools.iter().find(|tool| tool.name == request.name) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}: tools/list names the tools this server offers",
                    request.name
                ),
                None,
            ));
        };
        let max_chars = inner.max_answer_chars;
        let (mut message, mut plan) =
            match (tool.message)(tool.name, request.arguments.unwrap_or_default()) {
                Ok(parts) => parts,
                Err(Rejected::Schema(text)) => return Err(ErrorData::invalid_params(text, None)),
                Err(Rejected::Payload(reply)) => {
                    return Ok(results::result(*reply, Plan::Plain, max_chars).into());
                }
            };
        budget::shape(&mut message, &mut plan, max_chars, &inner.limits);
        let mut host = inner.host.clone();
        host.jail = self.roots.narrow(&mut message).await;
        let kind = message.message_type();
        let request_id = context.id.to_string();
        // Admission as on a connection: after the arguments' own refusals, never queued. Like
        // the connector, the refusal is logged and not audited: nothing was attempted.
        let Ok(_slot) = inner.in_flight.try_acquire() else {
            let refusal = error::overloaded(inner.max_concurrent);
            RequestLog::start(kind, inner.host.sandbox_mode()).finish(&request_id, &refusal);
            return Ok(results::result(refusal, Plan::Plain, max_chars).into());
        };
        let Some(_running) = inner.calls.upgrade() else {
            return Err(ErrorData::internal_error("the server is stopping", None));
        };
        let mut stopping = inner.stopping.clone();
        let cancelled = context.ct.clone();
        let stop = async move {
            tokio::select! {
                () = cancelled.cancelled() => {}
                _ = stopping.wait_for(|stop| *stop) => {}
            }
        };
        match serve(
            message,
            &request_id,
            &host,
            inner.limits,
            inner.shell_limits,
            stop,
        )
        .await
        {
            Served::Reply(reply) => Ok(results::result(reply, plan, max_chars).into()),
            Served::Stopped => {
                let entry = Entry::failed(
                    kind.as_str(),
                    details([("tool", json!(tool.name)), ("stopped", json!(true))]),
                    STOPPED_CODE,
                );
                inner.host.audit.record_async(Some(request_id), entry).await;
                // Nobody reads this: the SDK drops the answer to a cancelled request.
                Err(ErrorData::internal_error("the call was cancelled", None))
            }
            Served::Unserved => Err(ErrorData::internal_error(
                "no capability serves this tool",
                None,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn names(tools: &[Spec]) -> Vec<&'static str> {
        tools.iter().map(|tool| tool.name).collect()
    }

    fn powers(args: &[&str], file: &str) -> Result<Vec<&'static str>, String> {
        let cli = Cli::try_parse_from(["autogpt-shim"].iter().chain(args)).unwrap();
        let env = |_: &str| -> Option<String> { None };
        let mut settings = ShimConfig::defaults(&env);
        let table: toml::Table = file.parse().unwrap();
        for (key, value) in table {
            match key.as_str() {
                "enable_shell" => settings.enable_shell = value.as_bool().unwrap(),
                "mcp" => settings.mcp = value.try_into().unwrap(),
                other => panic!("{other}"),
            }
        }
        select(tools::catalogue(), &Powers::of(&cli, &settings)).map(|tools| names(&tools))
    }

    const FILES: [&str; 6] = [
        "read_file",
        "write_file",
        "stat",
        "list_directory",
        "delete",
        "move",
    ];

    #[test]
    fn the_daemons_shell_never_reaches_mcp() {
        assert_eq!(powers(&["mcp"], "enable_shell = true").unwrap(), FILES);
        let with_switch = powers(&["mcp", "--enable-shell"], "").unwrap();
        assert!(with_switch.contains(&"run_command"));
        let with_section = powers(&["mcp"], "[mcp]\nenable_shell = true").unwrap();
        assert!(with_section.contains(&"run_command"));
        // The clipboard needs computer use.
        let clipboard = powers(&["mcp", "--enable-clipboard"], "").unwrap();
        assert_eq!(clipboard, FILES);
    }

    #[test]
    fn tools_and_exclude_tools_narrow_and_refuse_what_they_cannot_mean() {
        assert_eq!(
            powers(&["mcp", "--tools", "stat,read_file"], "").unwrap(),
            ["read_file", "stat"]
        );
        assert_eq!(
            powers(&["mcp", "--exclude-tools", "delete,move"], "").unwrap(),
            ["read_file", "write_file", "stat", "list_directory"]
        );
        // The flag replaces the section's allow list; exclusions add up.
        let both = powers(
            &["mcp", "--tools", "stat,delete", "--exclude-tools", "delete"],
            "[mcp]\ntools = [\"read_file\"]\nexclude_tools = [\"stat\"]",
        )
        .unwrap();
        assert!(both.is_empty(), "{both:?}");
        let every = "read_file, write_file, stat, list_directory, delete, move, run_command, screenshot, input_action, cursor_position, display_info, list_windows, focus_window, list_apps, launch_app, accessibility_snapshot, click_element, type_into_element, read_clipboard, write_clipboard";
        let unknown = powers(&["mcp", "--tools", "rm_rf"], "").unwrap_err();
        assert_eq!(
            unknown,
            format!(
                "--tools names \"rm_rf\", which is no tool of this server: use names from {every}"
            )
        );
        // Each list is named where it came from, so the person knows what to fix.
        let section = powers(&["mcp"], "[mcp]\nexclude_tools = [\"rm\"]").unwrap_err();
        assert!(
            section.starts_with("the config file's [mcp] exclude_tools names \"rm\""),
            "{section}"
        );
        let flag = powers(&["mcp", "--exclude-tools", "stat,rm"], "").unwrap_err();
        assert!(flag.starts_with("--exclude-tools names \"rm\""), "{flag}");
        let off = powers(&["mcp"], "[mcp]\ntools = [\"screenshot\"]").unwrap_err();
        assert!(
            off.starts_with(
                "the config file's [mcp] tools names screenshot, which needs --enable-computer-use"
            ),
            "{off}"
        );
        let off = powers(&["mcp", "--tools", "run_command"], "").unwrap_err();
        assert!(off.contains("needs --enable-shell"), "{off}");
    }
}
