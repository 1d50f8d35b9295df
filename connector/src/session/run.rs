//! The loop of one connection: the handshake, then one `select!` over finished request
//! tasks, streamed chunks, the STATUS timer and inbound frames, writing every outbound frame
//! itself (request tasks hand their replies back, so there is one writer and no lock).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use futures_util::{Sink, SinkExt, Stream, StreamExt};
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use super::dispatch::{Dispatch, Inbound, revoked_entry};
use super::handshake::{handshake, peer_closed};
use super::shell::ShellLimits;
use super::{Frame, Host, Role, SessionConfig, SessionEnd};
use crate::protocol::{Envelope, ErrorCode, MAX_FRAME_BYTES, Message, close_code, unix_now};

/// Runs one data connection until it ends: the handshake, then the request loop.
/// `established` is called once, when the platform has accepted the HELLO.
///
/// In-flight request tasks are aborted when this returns. A FILE_* operation already
/// running on a blocking thread finishes there, but its reply is never sent.
pub async fn run_session<S, K>(
    stream: S,
    sink: K,
    config: SessionConfig,
    host: Host,
    established: impl FnOnce(),
) -> SessionEnd
where
    S: Stream<Item = Frame> + Unpin,
    K: Sink<Frame> + Unpin,
{
    run_session_with(stream, sink, &config, host, Hooks::default(), established).await
}

/// Test seams that production leaves empty.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hooks {
    /// When set, every capability task takes a permit before it runs (after the machine
    /// gate and its admission), so a test can hold requests in flight deterministically.
    pub(crate) request_gate: Option<Arc<Semaphore>>,
}

pub(crate) async fn run_session_with<S, K>(
    mut stream: S,
    mut sink: K,
    config: &SessionConfig,
    host: Host,
    hooks: Hooks,
    on_established: impl FnOnce(),
) -> SessionEnd
where
    S: Stream<Item = Frame> + Unpin,
    K: Sink<Frame> + Unpin,
{
    let started = Instant::now();
    let established = match handshake(&mut stream, &mut sink, config, &host).await {
        Ok(established) => established,
        Err(end) => return end,
    };
    on_established();
    if let Role::Control(plane) = &host.role {
        plane.connected(established.max_concurrent);
    }
    // Streamed partial replies (LLM chunks) come back through here, tagged with their id.
    let (chunk_tx, mut chunk_rx) = mpsc::unbounded_channel::<(String, Message)>();
    let mut dispatch = Dispatch {
        host,
        hooks,
        granted: established.granted,
        max_concurrent: established.max_concurrent,
        limits: established.limits,
        shell_limits: ShellLimits {
            ceiling: established.command_timeout,
            max_output_bytes: established.limits.max_read_bytes,
        },
        version: established.version,
        started,
        tasks: JoinSet::new(),
        requests: HashMap::new(),
        chunks: chunk_tx,
        queued: Arc::new(AtomicU32::new(0)),
    };
    let periodic = !config.status_interval.is_zero();
    let period = if periodic {
        config.status_interval
    } else {
        Duration::from_secs(3600)
    };
    // The reference sends the first STATUS one interval after the handshake, not at once.
    let mut status_timer = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    status_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    // Dropping `dispatch` on any return aborts its JoinSet, i.e. every in-flight task.
    loop {
        tokio::select! {
            // Completions first: they free slots, and there are never more than
            // max_concurrent of them, so they cannot starve the inbound side.
            biased;
            Some(joined) = dispatch.tasks.join_next_with_id(), if !dispatch.tasks.is_empty() => {
                // Every reply that is ready (one group commit finishes several) goes out with
                // one flush: with 4 FILE_STATs in flight, a flush per reply and per edge
                // STATUS cost a loopback send (and a wake-up of the platform) each.
                let mut next = Some(joined);
                while let Some(joined) = next {
                    // A finished task's chunks were queued before it returned: they go first.
                    while let Ok((id, chunk)) = chunk_rx.try_recv() {
                        if feed(&mut sink, dispatch.reply(id, chunk)).await.is_err() {
                            return SessionEnd::TransportEnded;
                        }
                    }
                    let (reply, status) = dispatch.completed(joined);
                    if feed(&mut sink, reply).await.is_err() {
                        return SessionEnd::TransportEnded;
                    }
                    if let Some(status) = status
                        && feed(&mut sink, status).await.is_err()
                    {
                        return SessionEnd::TransportEnded;
                    }
                    next = dispatch.tasks.try_join_next_with_id();
                }
                if sink.flush().await.is_err() {
                    return SessionEnd::TransportEnded;
                }
            }
            Some((id, chunk)) = chunk_rx.recv() => {
                if send(&mut sink, dispatch.reply(id, chunk)).await.is_err() {
                    return SessionEnd::TransportEnded;
                }
            }
            _ = status_timer.tick(), if periodic => {
                if send(&mut sink, dispatch.status()).await.is_err() {
                    return SessionEnd::TransportEnded;
                }
            }
            frame = stream.next() => {
                let text = match frame {
                    None => return SessionEnd::TransportEnded,
                    Some(Frame::Close { code, reason }) => return peer_closed(code, reason),
                    Some(Frame::Text(text)) => text,
                };
                match dispatch.inbound(&text) {
                    Inbound::Nothing => {}
                    Inbound::Reply(reply) => {
                        if send(&mut sink, reply).await.is_err() {
                            return SessionEnd::TransportEnded;
                        }
                    }
                    Inbound::Revoked(payload) => {
                        dispatch.host.audit.record_async(None, revoked_entry(&payload)).await;
                        // The spec: send no further frames but close our half with 4428.
                        let _ = sink
                            .send(Frame::Close {
                                code: close_code::SESSION_REVOKED,
                                reason: close_code::SESSION_REVOKED_REASON.to_owned(),
                            })
                            .await;
                        return SessionEnd::Revoked(payload);
                    }
                }
            }
        }
    }
}

/// Serialises and sends one envelope. A frame above the 16 MiB transport cap is replaced by
/// ERROR `FILE_TOO_LARGE` with the same id, as the reference does.
async fn send<K: Sink<Frame> + Unpin>(sink: &mut K, envelope: Envelope) -> Result<(), ()> {
    feed(sink, envelope).await?;
    sink.flush().await.map_err(|_| ())
}

/// [`send`] without the flush: the frame waits in the transport's buffer for the next flush.
async fn feed<K: Sink<Frame> + Unpin>(sink: &mut K, envelope: Envelope) -> Result<(), ()> {
    let text = match envelope.to_json() {
        Ok(text) if text.len() <= MAX_FRAME_BYTES => text,
        Ok(text) => {
            let mut replacement = Envelope::error(
                envelope.id,
                unix_now(),
                envelope.pending_capacity.unwrap_or(0),
                ErrorCode::FileTooLarge,
                "The response exceeds the transport frame limit.",
                Some(json!({ "size_bytes": text.len(), "limit": MAX_FRAME_BYTES })),
            );
            replacement.version = envelope.version;
            replacement.to_json().map_err(|_| ())?
        }
        // Serialising these payloads cannot fail (string keys, finite numbers); dropping the
        // frame is the least bad answer if it ever does.
        Err(_) => return Ok(()),
    };
    sink.feed(Frame::Text(text)).await.map_err(|_| ())
}
