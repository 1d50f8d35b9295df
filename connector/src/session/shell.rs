//! EXECUTE_COMMAND on a data connection: the wire payload becomes a `local_core::machine::exec`
//! request (cwd through the jail, timeout capped by the negotiated ceiling, output budget
//! below the frame limit), and the outcome becomes COMMAND_RESULT and one audit record.

use std::time::{Duration, Instant};

use local_core::machine::exec::{self, ExecOutcome, ExecRequest, LimitExceeded, Program};
use local_core::machine::files::{FileError, TEXT_READ_BUDGET_BYTES};
use local_core::machine::jail::Jail;
use local_core::machine::sandbox::SandboxMode;
use serde_json::{Map, Value, json};

use super::Host;
use super::capability::{self, Done, Handler, Refusal, Run};
use crate::audit::{Entry, details};
use crate::error::{WireError, reply};
use crate::protocol::{CommandResultPayload, ErrorCode, ExecuteCommandPayload, Message};

/// An EXECUTE_COMMAND request.
#[derive(Debug)]
pub(super) struct ShellRequest(ExecuteCommandPayload);

impl Handler for ShellRequest {
    type Admitted = ShellOp;

    fn from_message(message: Message) -> Result<Self, Message> {
        match message {
            Message::ExecuteCommand(payload) => Ok(Self(payload)),
            other => Err(other),
        }
    }

    fn admit(self, host: &Host) -> Result<ShellOp, Box<Refusal>> {
        ShellOp::admit(self.0, &host.commands, host.sandbox_mode())
    }

    /// Aborting the future drops the command's, which kills its process group.
    async fn run(op: ShellOp, ctx: Run) -> Done {
        let (message, entry) = op.execute(&ctx.host, ctx.shell_limits).await;
        Done(message, vec![entry])
    }
}

/// An admitted EXECUTE_COMMAND, holding its machine-wide command slot until it is dropped.
#[derive(Debug)]
pub(super) struct ShellOp {
    payload: ExecuteCommandPayload,
    _permit: exec::CommandPermit,
}

/// Limits the negotiation settled for commands on this connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShellLimits {
    /// The negotiated `command_timeout_seconds`: the ceiling of every command's timeout.
    pub(crate) ceiling: Duration,
    /// The negotiated `max_file_size_bytes`: the output budget before the frame cap.
    pub(crate) max_output_bytes: u64,
}

impl ShellOp {
    /// Takes a machine-wide command slot for `payload`, or the SHIM_OVERLOADED reply and
    /// its audit record when the rate or concurrency limit is reached.
    fn admit(
        payload: ExecuteCommandPayload,
        limiter: &exec::CommandLimiter,
        sandbox: SandboxMode,
    ) -> Result<Self, Box<Refusal>> {
        match limiter.try_acquire() {
            Ok(permit) => Ok(Self {
                payload,
                _permit: permit,
            }),
            Err(limit) => {
                let (message, details_value) = match limit {
                    LimitExceeded::RateLimit { per_minute } => (
                        format!("Command rate limit reached ({per_minute} per minute)."),
                        json!({ "limit": "commands_per_minute", "max": per_minute }),
                    ),
                    LimitExceeded::Concurrency { max } => (
                        format!("Too many commands running (at most {max})."),
                        json!({ "limit": "concurrent_commands", "max": max }),
                    ),
                };
                let code = limit.error_code();
                let mut details = request_details(&payload, None);
                details.insert("sandbox".to_owned(), json!(sandbox.as_str()));
                let entry = Entry::failed("EXECUTE_COMMAND", details, code.as_str());
                Err(Refusal::audited(
                    reply(code, message, Some(details_value)),
                    entry,
                ))
            }
        }
    }

    /// Runs the command and returns COMMAND_RESULT (or ERROR) and the audit record.
    async fn execute(self, host: &Host, limits: ShellLimits) -> (Message, Entry) {
        let started = Instant::now();
        let jail: &Jail = &host.jail;
        let payload = &self.payload;
        let sandbox = host.sandbox_mode();
        let cwd = match payload.cwd.as_deref() {
            None => jail.root().to_path_buf(),
            Some(wire) => match jail.resolve(wire) {
                Ok(path) => path.absolute().to_path_buf(),
                Err(err) => {
                    let err = FileError::Jail(err);
                    let mut details = request_details(payload, None);
                    details.insert("sandbox".to_owned(), json!(sandbox.as_str()));
                    let (reply, entry) = capability::failed("EXECUTE_COMMAND", details, &err);
                    return (reply, entry.with_duration(started.elapsed()));
                }
            },
        };
        let timeout = payload
            .timeout_seconds
            .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
            .map_or(limits.ceiling, |asked| asked.min(limits.ceiling));
        let budget = limits.max_output_bytes.min(TEXT_READ_BUDGET_BYTES);
        let request = ExecRequest {
            program: match (&payload.command, &payload.argv) {
                (_, Some(argv)) => Program::Argv(argv.clone()),
                (Some(command), None) => Program::Shell {
                    shell: payload.shell,
                    command: command.clone(),
                },
                // The payload's validation refuses this before dispatch.
                (None, None) => Program::Argv(Vec::new()),
            },
            cwd: cwd.clone(),
            env: payload.env.clone(),
            timeout,
            output_budget: usize::try_from(budget).unwrap_or(usize::MAX),
            // The root the command may change is this connection's, so control mode's
            // children each confine theirs.
            sandbox: host
                .sandbox
                .as_ref()
                .map(|sandbox| sandbox.confine(jail.root())),
        };
        let mut details = request_details(payload, Some(timeout));
        details.insert("cwd".to_owned(), json!(cwd.to_string_lossy()));
        details.insert("sandbox".to_owned(), json!(sandbox.as_str()));
        match exec::run(request).await {
            Ok(outcome) => {
                details.insert("env_keys".to_owned(), json!(outcome.env_keys));
                let entry = outcome_entry(&outcome, details);
                (result_message(outcome), entry)
            }
            Err(err) => {
                let (reply, entry) = capability::failed("EXECUTE_COMMAND", details, &err);
                (reply, entry.with_duration(started.elapsed()))
            }
        }
    }
}

/// The reference's record: what was asked, with env names but never their values.
fn request_details(
    payload: &ExecuteCommandPayload,
    timeout: Option<Duration>,
) -> Map<String, Value> {
    let env_keys: Vec<&String> = payload.env.keys().collect();
    details([
        ("command", json!(payload.command)),
        ("argv", json!(payload.argv)),
        ("shell", json!(payload.shell.as_str())),
        ("cwd", json!(payload.cwd)),
        ("env_keys", json!(env_keys)),
        (
            "timeout_seconds",
            json!(timeout.map_or(payload.timeout_seconds, |t| Some(t.as_secs_f64()))),
        ),
    ])
}

/// The error code a command's result is audited and logged with although it is answered as
/// a result: `COMMAND_TIMEOUT` when it timed out, as the reference records it.
pub(crate) const fn command_error_code(result: &CommandResultPayload) -> Option<ErrorCode> {
    if result.timed_out {
        Some(ErrorCode::CommandTimeout)
    } else {
        None
    }
}

fn outcome_entry(outcome: &ExecOutcome, details: Map<String, Value>) -> Entry {
    let mut entry = if outcome.timed_out {
        Entry::failed(
            "EXECUTE_COMMAND",
            details,
            ErrorCode::CommandTimeout.as_str(),
        )
    } else {
        Entry::ok("EXECUTE_COMMAND", details)
    };
    entry.result.exit_code = Some(i64::from(outcome.exit_code));
    entry.with_duration(outcome.duration)
}

fn result_message(outcome: ExecOutcome) -> Message {
    // Three decimals, as the reference reports it.
    let duration_seconds = (outcome.duration.as_secs_f64() * 1000.0).round() / 1000.0;
    Message::CommandResult(CommandResultPayload {
        stdout: outcome.stdout,
        stderr: outcome.stderr,
        exit_code: i64::from(outcome.exit_code),
        timed_out: outcome.timed_out,
        duration_seconds,
        output_truncated: outcome.output_truncated,
    })
}
