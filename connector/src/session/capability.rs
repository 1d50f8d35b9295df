//! One way to run a capability request. Files, shell, local LLM and computer use each
//! implement [`Handler`] (from the message, pre-checks, admission, run to a reply and its
//! audit records); [`start`] is the one path that admits, spawns, audits and replies for all.
//!
//! Adding a capability is a module with a `Handler` implementation plus one line in
//! [`CAPABILITIES`] (and its capability in `SERVABLE_CAPABILITIES`, so HELLO advertises it).

use std::future::Future;
use std::sync::Arc;

use local_core::machine::files::FileLimits;
use serde_json::{Map, Value};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::{self, JoinSet};

use super::Host;
use super::computer::ComputerOp;
use super::files::FileOp;
use super::host::Gate;
use super::llm::LlmRequest;
use super::shell::{ShellLimits, ShellRequest};
use crate::audit::{Auditor, Entry, warn_unwritten};
use crate::error::{self, WireError};
use crate::protocol::Message;

/// Every capability a data connection serves, tried in this order for each request.
pub(super) const CAPABILITIES: &[Start] = &[
    start::<FileOp>,
    start::<ShellRequest>,
    start::<LlmRequest>,
    start::<ComputerOp>,
];

/// One capability's entry point: the message back when the request is another's.
pub(super) type Start = fn(Message, &Host, Spawn<'_>) -> Result<Started, Message>;

/// A capability's request, from its wire message to its reply and audit records.
pub(super) trait Handler: Sized + Send + 'static {
    /// The request once admitted, holding what admission took (a command slot, the model).
    type Admitted: Send + 'static;

    /// This capability's request in `message`; the message back when it is another's.
    #[allow(
        clippy::result_large_err,
        reason = "the message goes back by value to the next capability; boxing it would allocate for every capability tried"
    )]
    fn from_message(message: Message) -> Result<Self, Message>;

    /// Refusals answered at once, before admission and on every connection (a backend that
    /// is not configured, a feature HELLO did not advertise).
    fn check(&self, host: &Host) -> Result<(), Box<Refusal>> {
        let _ = host;
        Ok(())
    }

    /// Takes the machine-wide slots the request needs. Runs at once on a connection without
    /// a machine gate, and on a control-mode child only once its machine permit is granted,
    /// as the reference does, so a waiting request holds no slot another child could use.
    fn admit(self, host: &Host) -> Result<Self::Admitted, Box<Refusal>>;

    /// Runs the admitted request to its reply and audit records. Aborting the future (the
    /// session ended) drops the work with it, except what already runs on a blocking thread.
    fn run(op: Self::Admitted, ctx: Run) -> impl Future<Output = Done> + Send;
}

/// A request refused before it ran: the ERROR and, where the reference audits the refusal,
/// its record.
pub(super) struct Refusal {
    /// The ERROR to send.
    pub(super) reply: Message,
    /// The refusal's audit record.
    pub(super) audit: Option<Entry>,
}

impl Refusal {
    /// A refusal with its audit record.
    pub(super) fn audited(reply: Message, entry: Entry) -> Box<Self> {
        Box::new(Self {
            reply,
            audit: Some(entry),
        })
    }

    /// A refusal the reference does not audit (nothing was attempted).
    pub(super) fn unaudited(reply: Message) -> Box<Self> {
        Box::new(Self { reply, audit: None })
    }

    /// A core failure refused before the request ran, audited as [`failed`] records it.
    pub(super) fn failed(
        op: &'static str,
        details: Map<String, Value>,
        err: &impl WireError,
    ) -> Box<Self> {
        let (reply, entry) = failed(op, details, err);
        Self::audited(reply, entry)
    }
}

/// A capability's outcome as its reply and audit record: the success message with an `ok`
/// record, or [`failed`]. Every capability ends here, so a reply and its record never
/// disagree on the outcome.
pub(super) fn conclude(
    op: &'static str,
    details: Map<String, Value>,
    outcome: Result<Message, impl WireError>,
) -> (Message, Entry) {
    match outcome {
        Ok(message) => (message, Entry::ok(op, details)),
        Err(err) => failed(op, details, &err),
    }
}

/// A core failure's ERROR and its `failed` record, both with the failure's code.
pub(super) fn failed(
    op: &'static str,
    details: Map<String, Value>,
    err: &impl WireError,
) -> (Message, Entry) {
    (
        error::failure(err),
        Entry::failed(op, details, err.error_code().as_str()),
    )
}

/// How a request ended: its reply, and the audit records to write before it goes out (none
/// when a blocking thread queued them already and the reply waited for their fsync).
pub(super) struct Done(pub(super) Message, pub(super) Vec<Entry>);

/// What a running request may use: the connection's host and negotiated limits, and the
/// way to stream partial replies.
pub(super) struct Run {
    /// The request's id, echoed by every frame for it.
    pub(super) request_id: String,
    /// The connection's host.
    pub(super) host: Host,
    /// The negotiated FILE_* limits (`max_read_bytes` is also the screenshot and clipboard
    /// limit).
    pub(super) limits: FileLimits,
    /// The negotiated command limits.
    pub(super) shell_limits: ShellLimits,
    chunks: mpsc::UnboundedSender<(String, Message)>,
}

impl Run {
    /// Sends a partial reply (LOCAL_LLM_COMPLETION_CHUNK) ahead of the final one; the loop
    /// writes it before the final reply of the same request.
    pub(super) fn stream(&self, partial: Message) {
        let _ = self.chunks.send((self.request_id.clone(), partial));
    }

    /// Runs blocking work on a blocking thread and queues its records from there, so an
    /// operation that completed is audited even when the session ends before its reply goes
    /// out, and no blocking thread sits through the fsync. The writer hands the reply over
    /// once the records are durable, so this task wakes once for both.
    pub(super) async fn blocking(
        &self,
        work: impl FnOnce() -> (Message, Vec<Entry>) + Send + 'static,
    ) -> Done {
        let audit = self.host.audit.clone();
        let request_id = self.request_id.clone();
        let (sender, receiver) = oneshot::channel();
        let run = move || {
            let (message, entries) = work();
            let ops: Vec<&'static str> = entries.iter().map(|entry| entry.op).collect();
            audit.submit_then(Some(&request_id), entries, move |outcome| {
                warn_unwritten(&ops, &outcome);
                let _ = sender.send(message);
            });
        };
        // Not joined: the reply comes through `receiver`, and a panic in `work` drops
        // `sender` unused, which reads as the internal error below.
        drop(task::spawn_blocking(run));
        match receiver.await {
            Ok(message) => Done(message, Vec::new()),
            Err(_) => Done(error::internal(), Vec::new()),
        }
    }
}

/// What the session hands a capability's start: where its task goes and what it may use.
pub(super) struct Spawn<'a> {
    /// The request's id.
    pub(super) request_id: &'a str,
    /// The connection's request tasks.
    pub(super) tasks: &'a mut JoinSet<Message>,
    /// The machine work gate (children only) and the waiting count.
    pub(super) gate: Gate,
    /// The negotiated FILE_* limits.
    pub(super) limits: FileLimits,
    /// The negotiated command limits.
    pub(super) shell_limits: ShellLimits,
    /// Where streamed partial replies go.
    pub(super) chunks: mpsc::UnboundedSender<(String, Message)>,
    /// Test seam: every request task takes a permit here before it runs.
    pub(super) test_gate: Option<Arc<Semaphore>>,
}

/// What starting a request came to.
pub(super) enum Started {
    /// A task runs it; its reply comes back through the task set.
    Task(task::Id),
    /// Refused at once, before any work.
    Refused(Box<Refusal>),
}

/// The one path of every capability request: parse, pre-check, admit (now, or after the
/// machine gate on a child), run, audit, reply.
#[allow(
    clippy::result_large_err,
    reason = "the message goes back by value to the next capability; boxing it would allocate for every capability tried"
)]
fn start<H: Handler>(message: Message, host: &Host, spawn: Spawn<'_>) -> Result<Started, Message> {
    let request = H::from_message(message)?;
    if let Err(refusal) = request.check(host) {
        return Ok(Started::Refused(refusal));
    }
    // A connection without a machine gate admits at once (an immediate refusal); a child
    // admits once its machine permit is granted.
    let deferred = spawn.gate.work.is_some();
    let admission = if deferred {
        Admission::Deferred(request)
    } else {
        match request.admit(host) {
            Ok(op) => Admission::Now(op),
            Err(refusal) => return Ok(Started::Refused(refusal)),
        }
    };
    let ctx = Run {
        request_id: spawn.request_id.to_owned(),
        host: host.clone(),
        limits: spawn.limits,
        shell_limits: spawn.shell_limits,
        chunks: spawn.chunks,
    };
    let gate = spawn.gate;
    let test_gate = spawn.test_gate;
    let task = spawn.tasks.spawn(async move {
        let Some(_work) = gate.enter().await else {
            return error::internal();
        };
        let audit = ctx.host.audit.clone();
        let request_id = ctx.request_id.clone();
        let op = match admission {
            Admission::Now(op) => op,
            Admission::Deferred(request) => match request.admit(&ctx.host) {
                Ok(op) => op,
                Err(refusal) => return audited(&audit, &request_id, *refusal).await,
            },
        };
        let _held = match &test_gate {
            Some(gate) => gate.acquire().await.ok(),
            None => None,
        };
        let Done(reply, entries) = H::run(op, ctx).await;
        if !entries.is_empty() {
            audit.submit(Some(&request_id), entries).wait().await;
        }
        reply
    });
    Ok(Started::Task(task.id()))
}

/// How a request served outside a connection ended (see [`serve`]).
pub(crate) enum Served {
    /// Its reply: the success payload or ERROR, with its audit records durable.
    Reply(Message),
    /// `stop` fired first; the request's task was aborted and has ended (a command's process
    /// group killed with it).
    Stopped,
    /// No capability serves this message.
    Unserved,
}

/// One request served outside a connection (the MCP face): the same capabilities, pre-checks,
/// admission, run, audit records and reply as on a connection, awaited here. When `stop`
/// completes first the request's task is aborted and waited for, so no work outlives it
/// (blocking file work already running finishes and is audited, as on a connection).
pub(crate) async fn serve(
    mut message: Message,
    request_id: &str,
    host: &Host,
    limits: FileLimits,
    shell_limits: ShellLimits,
    stop: impl Future<Output = ()>,
) -> Served {
    let mut tasks = JoinSet::new();
    // Nothing the MCP face serves streams partial replies (the local model is not served).
    let (chunks, _) = mpsc::unbounded_channel();
    for start in CAPABILITIES {
        let spawn = Spawn {
            request_id,
            tasks: &mut tasks,
            gate: Gate {
                work: None,
                queued: Arc::default(),
            },
            limits,
            shell_limits,
            chunks: chunks.clone(),
            test_gate: None,
        };
        match start(message, host, spawn) {
            Ok(Started::Task(_)) => break,
            Ok(Started::Refused(refusal)) => {
                return Served::Reply(audited(&host.audit, request_id, *refusal).await);
            }
            Err(other) => message = other,
        }
    }
    if tasks.is_empty() {
        return Served::Unserved;
    }
    tokio::select! {
        joined = tasks.join_next() => Served::Reply(match joined {
            Some(Ok(reply)) => reply,
            Some(Err(_)) | None => error::internal(),
        }),
        () = stop => {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
            Served::Stopped
        }
    }
}

/// A request admitted now, or to be admitted when it may start.
enum Admission<H: Handler> {
    Now(H::Admitted),
    Deferred(H),
}

/// A refusal's reply, once its record (if any) is durable.
async fn audited(audit: &Auditor, request_id: &str, refusal: Refusal) -> Message {
    if let Some(entry) = refusal.audit {
        audit.record_async(Some(request_id.to_owned()), entry).await;
    }
    refusal.reply
}
