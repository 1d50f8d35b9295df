//! Dispatch of one established connection's inbound frames: PING, SESSION_REVOKED, the
//! refusals that depend only on a request's type (wrong connection, capability not granted),
//! admission against `max_concurrent`, and one task per admitted request, whose reply comes
//! back to the loop with the `pending_capacity` of the moment and, when it freed the last
//! slot, the edge STATUS.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use local_core::machine::files::FileLimits;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::{self, JoinError, JoinSet};

use super::capability::{CAPABILITIES, Refusal, Spawn, Started};
use super::host::Gate;
use super::shell::ShellLimits;
use super::{Hooks, Host, Role, new_id};
use crate::audit::{Entry, details};
use crate::error::{self, internal as internal_error};
use crate::protocol::{
    Capability, Direction, EmptyPayload, Envelope, ErrorCode, Message, MessageType, Parsed,
    ProtocolVersion, SessionRevokedPayload, StatusPayload, parse_frame, unix_now,
};
use crate::request_log::RequestLog;

/// What an inbound text frame asks of the loop.
pub(super) enum Inbound {
    Nothing,
    Reply(Envelope),
    Revoked(SessionRevokedPayload),
}

/// The request loop's state, apart from the transport.
pub(super) struct Dispatch {
    pub(super) host: Host,
    pub(super) hooks: Hooks,
    pub(super) granted: Vec<Capability>,
    pub(super) max_concurrent: NonZeroU32,
    pub(super) limits: FileLimits,
    pub(super) shell_limits: ShellLimits,
    pub(super) version: ProtocolVersion,
    pub(super) started: Instant,
    /// One task per admitted request; its length is the in-flight count.
    pub(super) tasks: JoinSet<Message>,
    /// Request id per task, so even a panicked task gets its ERROR, and its log line.
    pub(super) requests: HashMap<task::Id, (String, RequestLog)>,
    /// Where streaming tasks send their partial replies.
    pub(super) chunks: mpsc::UnboundedSender<(String, Message)>,
    /// Admitted tasks still waiting on the machine work gate (children only).
    pub(super) queued: Arc<AtomicU32>,
}

impl Dispatch {
    /// Admitted requests, running or waiting on the machine gate: what `max_concurrent`
    /// bounds.
    fn in_flight(&self) -> u32 {
        u32::try_from(self.tasks.len()).unwrap_or(u32::MAX)
    }

    /// Admitted requests waiting on the machine work gate.
    fn waiting(&self) -> u32 {
        self.queued.load(Ordering::Relaxed).min(self.in_flight())
    }

    /// Free slots: the `pending_capacity` of the next frame.
    fn free(&self) -> u32 {
        self.max_concurrent.get().saturating_sub(self.in_flight())
    }

    pub(super) fn reply(&self, id: String, message: Message) -> Envelope {
        Envelope::response(id, unix_now(), self.free(), message).with_version(self.version)
    }

    fn error(
        &self,
        id: String,
        code: ErrorCode,
        message: String,
        details: serde_json::Value,
    ) -> Envelope {
        self.reply(id, error::reply(code, message, Some(details)))
    }

    pub(super) fn status(&self) -> Envelope {
        // Requests beyond max_concurrent are refused, never queued; only a child's admitted
        // requests can wait, on the machine work gate, and those are its queue.
        let waiting = self.waiting();
        let payload = StatusPayload {
            in_flight: self.in_flight() - waiting,
            max_concurrent: self.max_concurrent.get(),
            queue_depth: waiting,
            audit_log_bytes: self.host.audit.log_bytes(),
            uptime_seconds: self.started.elapsed().as_secs_f64(),
        };
        Envelope::response(new_id(), unix_now(), self.free(), Message::Status(payload))
            .with_version(self.version)
    }

    pub(super) fn inbound(&mut self, text: &str) -> Inbound {
        let envelope = match parse_frame(text) {
            Parsed::Message(envelope) => *envelope,
            // Replies and shim-side types are never answered, even when malformed.
            Parsed::InvalidPayload { message_type, .. }
                if message_type.direction() != Direction::PlatformToShim =>
            {
                return Inbound::Nothing;
            }
            // A malformed request is refused like a valid one first (wrong connection, not
            // granted): its payload's own code only matters to a caller allowed to send it.
            // Keepalive and revocation are no capability's requests and no connection's alone.
            Parsed::InvalidPayload {
                ref id,
                message_type,
                ..
            } if message_type.required_capability().is_some()
                && let Some(refusal) = self.refusal(id, message_type) =>
            {
                return Inbound::Reply(refusal);
            }
            // Frames of another major are dropped unanswered (error_reply gives None).
            other => {
                return other
                    .error_reply(unix_now(), self.free())
                    .map_or(Inbound::Nothing, |reply| {
                        Inbound::Reply(reply.with_version(self.version))
                    });
            }
        };
        let Envelope { id, message, .. } = envelope;
        // Replies and shim-side types sent to us are not requests: answering them could
        // start an ERROR ping-pong with the platform.
        if message.message_type().direction() != Direction::PlatformToShim {
            return Inbound::Nothing;
        }
        match message {
            Message::Ping(_) => Inbound::Reply(
                Envelope::new(id, unix_now(), Message::Pong(EmptyPayload {}))
                    .with_version(self.version),
            ),
            Message::SessionRevoked(payload) => Inbound::Revoked(payload),
            // A repeated ACK changes nothing once the session is established.
            Message::HelloAck(_) => Inbound::Nothing,
            request => {
                let log = RequestLog::start(request.message_type(), self.host.sandbox_mode());
                let inbound = self.request(id, request, log);
                if let Inbound::Reply(reply) = &inbound {
                    log.finish(&reply.id, &reply.message);
                }
                inbound
            }
        }
    }

    /// The refusals that depend only on a request's type: the wrong connection for it, or
    /// its capability not granted.
    fn refusal(&self, id: &str, kind: MessageType) -> Option<Envelope> {
        // Control messages belong to the control connection and everything else to a data
        // connection; each refuses the other's whatever was granted.
        let control_message = kind.required_capability() == Some(Capability::DirectoryBrowse);
        if control_message != self.host.role.is_control() {
            let reason = if control_message {
                "control messages are served only on the control connection"
            } else {
                "the control connection serves only directory browsing and session management"
            };
            return Some(self.error(
                id.to_owned(),
                ErrorCode::FeatureNotSupported,
                format!("{kind} is not supported on this connection."),
                json!({ "feature": kind.as_str(), "reason": reason }),
            ));
        }
        if let Some(required) = kind.required_capability()
            && !self.granted.contains(&required)
        {
            let mut granted: Vec<&str> = self.granted.iter().map(|cap| cap.as_str()).collect();
            granted.sort_unstable();
            return Some(self.error(
                id.to_owned(),
                ErrorCode::CapabilityNotGranted,
                format!("Capability {required} is not granted for this session."),
                json!({ "required_capability": required, "granted_capabilities": granted }),
            ));
        }
        None
    }

    fn request(&mut self, id: String, message: Message, log: RequestLog) -> Inbound {
        let kind = message.message_type();
        let control_message = kind.required_capability() == Some(Capability::DirectoryBrowse);
        // Activity counts a request on the right connection, granted or not.
        if let Role::Child { activity, .. } = &self.host.role
            && !control_message
        {
            activity.touch();
        }
        if let Some(refusal) = self.refusal(&id, kind) {
            return Inbound::Reply(refusal);
        }
        if self.free() == 0 {
            return Inbound::Reply(self.reply(id, error::overloaded(self.max_concurrent)));
        }
        let task = if control_message {
            self.control_task(message)
        } else {
            match self.start(&id, message) {
                Some(Started::Task(task)) => task,
                Some(Started::Refused(refusal)) => return self.refuse(id, *refusal),
                // Unreachable while HELLO advertises only servable capabilities; kept so a
                // future grant without a handler fails closed.
                None => {
                    return Inbound::Reply(self.error(
                        id,
                        ErrorCode::FeatureNotSupported,
                        format!("{kind} is not supported by this shim build."),
                        json!({ "feature": kind.as_str(), "reason": "not implemented" }),
                    ));
                }
            }
        };
        self.requests.insert(task, (id, log));
        Inbound::Nothing
    }

    /// Offers the request to each capability in turn; `None` when none serves it.
    fn start(&mut self, id: &str, mut message: Message) -> Option<Started> {
        for start in CAPABILITIES {
            let spawn = Spawn {
                request_id: id,
                tasks: &mut self.tasks,
                gate: Gate {
                    work: self.host.role.work().cloned(),
                    queued: Arc::clone(&self.queued),
                },
                limits: self.limits,
                shell_limits: self.shell_limits,
                chunks: self.chunks.clone(),
                test_gate: self.hooks.request_gate.clone(),
            };
            match start(message, &self.host, spawn) {
                Ok(started) => return Some(started),
                Err(other) => message = other,
            }
        }
        None
    }

    /// An immediate refusal from a capability's own pre-checks; its audit record is queued
    /// and written behind the reply, so the loop never waits for an fsync.
    fn refuse(&self, id: String, refusal: Refusal) -> Inbound {
        if let Some(entry) = refusal.audit {
            drop(tokio::spawn(
                self.host.audit.submit(Some(&id), vec![entry]).wait(),
            ));
        }
        Inbound::Reply(self.reply(id, refusal.reply))
    }

    fn control_task(&mut self, message: Message) -> task::Id {
        let answer = match &self.host.role {
            Role::Control(plane) => Some(plane.handle(message)),
            Role::Data | Role::Child { .. } => None,
        };
        self.tasks
            .spawn(async move {
                match answer {
                    Some(answer) => answer.await,
                    None => internal_error(),
                }
            })
            .id()
    }

    /// The reply for a finished task and, when it freed the last slot, the edge STATUS.
    pub(super) fn completed(
        &mut self,
        joined: Result<(task::Id, Message), JoinError>,
    ) -> (Envelope, Option<Envelope>) {
        let (task_id, message) = match joined {
            Ok((task_id, message)) => (task_id, message),
            Err(err) => (err.id(), internal_error()),
        };
        let (id, log) = self.requests.remove(&task_id).unzip();
        let id = id.unwrap_or_default();
        if let Some(log) = log {
            log.finish(&id, &message);
        }
        // The set no longer holds this task, so `free` already counts its slot as released.
        let was_saturated = self.free() == 1;
        let reply = self.reply(id, message);
        let status = was_saturated.then(|| self.status());
        (reply, status)
    }
}

/// The reference's record for a SESSION_REVOKED frame.
pub(super) fn revoked_entry(payload: &SessionRevokedPayload) -> Entry {
    let mut details = details([
        ("reason", json!(payload.reason)),
        ("source", json!("frame")),
    ]);
    if let Some(machine) = &payload.new_shim_machine_id {
        details.insert("new_shim_machine_id".to_owned(), json!(machine));
    }
    Entry::ok("SESSION_REVOKED", details)
}
