//! One INFO line per platform request, when its reply goes out: the operation, the outcome
//! (`ok` or the error code), how long it took and the request id. Metadata only: never a path,
//! content, command line or output, whatever the log level; those stay in the audit log, which
//! has its own access rules. An EXECUTE_COMMAND line also names the sandbox mode it ran in. The session loop starts a [`RequestLog`] when a request arrives
//! and finishes it with the reply, in one place for every capability.

use std::time::Instant;

use local_core::machine::sandbox::SandboxMode;

use crate::protocol::{ErrorCode, Message, MessageType, OrUnknown};

/// A request on its way to its reply.
#[derive(Debug, Clone, Copy)]
pub struct RequestLog {
    op: MessageType,
    started: Instant,
    sandbox: Option<SandboxMode>,
}

impl RequestLog {
    /// Starts timing a request of this type, on a host whose commands run in `sandbox` (named
    /// on the line of a command only).
    #[must_use]
    pub fn start(op: MessageType, sandbox: SandboxMode) -> Self {
        Self {
            op,
            started: Instant::now(),
            sandbox: (op == MessageType::ExecuteCommand).then_some(sandbox),
        }
    }

    /// Logs the request's line for the reply `reply` to request `id`.
    pub fn finish(self, id: &str, reply: &Message) {
        let elapsed = self.started.elapsed();
        // Tenths of a millisecond: most file requests take well under one.
        let duration_ms = (elapsed.as_secs_f64() * 10_000.0).round() / 10.0;
        tracing::info!(
            op = %self.op.as_str(),
            outcome = %outcome(reply),
            duration_ms,
            // Only on command lines: an absent value adds no field.
            sandbox = self.sandbox.map(|mode| tracing::field::display(mode.as_str())),
            // Debug-quoted: an id is the platform's text and must not break the line.
            id = ?id,
            "request"
        );
    }
}

/// `ok`, or the reply's error code: the code the audit record of the same request carries,
/// so the two never disagree (a command that timed out is answered with a COMMAND_RESULT,
/// and audited, like the reference, as `COMMAND_TIMEOUT`).
fn outcome(reply: &Message) -> &str {
    match reply {
        Message::Error(error) => match &error.code {
            OrUnknown::Known(code) => code.as_str(),
            OrUnknown::Unknown(code) => code.as_str(),
        },
        Message::CommandResult(result) => {
            crate::session::command_error_code(result).map_or("ok", ErrorCode::as_str)
        }
        _ => "ok",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{CommandResultPayload, EmptyPayload, ErrorPayload};

    #[test]
    fn the_outcome_is_ok_or_the_error_code() {
        assert_eq!(outcome(&Message::Pong(EmptyPayload {})), "ok");
        let error = |code: OrUnknown<ErrorCode>| {
            Message::Error(ErrorPayload {
                code,
                message: "the path /secret/x is outside".to_owned(),
                fatal: false,
                details: None,
            })
        };
        assert_eq!(
            outcome(&error(ErrorCode::PathNotFound.into())),
            "PATH_NOT_FOUND"
        );
        assert_eq!(
            outcome(&error(OrUnknown::Unknown("NEW_CODE".to_owned()))),
            "NEW_CODE"
        );
        let result = |timed_out| {
            Message::CommandResult(CommandResultPayload {
                stdout: String::new(),
                stderr: String::new(),
                exit_code: -15,
                timed_out,
                duration_seconds: 1.0,
                output_truncated: false,
            })
        };
        assert_eq!(outcome(&result(false)), "ok");
        assert_eq!(outcome(&result(true)), "COMMAND_TIMEOUT");
    }
}
