//! One data connection's life: HELLO/HELLO_ACK, then the request loop with capability
//! gating, admission against `max_concurrent`, `pending_capacity`, STATUS, PING and
//! session revocation (PROTOCOL.md; shim-reference-behaviour.md sections 4, 6 and 7).
//!
//! The loop is generic over a [`Stream`] and a [`Sink`] of [`Frame`]s so it does not depend
//! on a WebSocket crate: the transport adapter maps WebSocket text and close frames to
//! [`Frame`], answers WebSocket-level pings itself, and ends the stream on a read error.
//!
//! All outbound frames are written by the loop alone; request tasks hand their reply
//! message back through a [`JoinSet`], so there is one writer and no lock around the sink.

mod computer;
mod files;
mod llm;
mod shell;

pub use computer::Computer;
pub use llm::LocalLlm;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::{Sink, SinkExt, Stream, StreamExt};
use local_core::machine::exec::CommandLimiter;
use local_core::machine::files::FileLimits;
use local_core::machine::jail::Jail;
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::{self, JoinError, JoinSet};

use crate::audit::{Auditor, Durable, Entry, details};
use crate::protocol::{
    Arch, Capability, DEFAULT_COMMAND_TIMEOUT_SECONDS, DEFAULT_MAX_CONCURRENT, Direction,
    EmptyPayload, Envelope, ErrorCode, ErrorPayload, HardwareDevice, HelloAckPayload, HelloPayload,
    MAX_FRAME_BYTES, Message, MessageType, PROTOCOL_VERSION_STR, Parsed, Platform, ProtocolVersion,
    SessionRevokedPayload, StatusPayload, close_code, negotiate, parse_frame, unix_now,
    version_mismatch_close_reason,
};
use crate::request_log::RequestLog;
use computer::ComputerOp;
use files::{FileOp, error_message};
use llm::LlmOp;
use shell::{ShellLimits, ShellOp};

/// The reference shim's STATUS cadence (`STATUS_INTERVAL_SECONDS`).
pub const DEFAULT_STATUS_INTERVAL: Duration = Duration::from_secs(30);
/// How long the reference shim waits for HELLO_ACK.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Capabilities this build can serve on a data connection. HELLO advertises only these, so
/// the platform can never grant something the loop would have to refuse after the gate.
pub const SERVABLE_CAPABILITIES: &[Capability] = &[
    Capability::Files,
    Capability::Shell,
    Capability::ComputerUse,
    Capability::LocalLlm,
];

/// The reference's `max_concurrent_commands`.
pub const DEFAULT_MAX_CONCURRENT_COMMANDS: usize = 10;
/// The reference's `max_commands_per_minute`.
pub const DEFAULT_MAX_COMMANDS_PER_MINUTE: usize = 60;

/// Close code for a handshake that went wrong without the ACK being refusable (no ACK in
/// time, or another frame first): RFC 6455 "protocol error", so the caller reconnects.
const HANDSHAKE_PROTOCOL_ERROR: u16 = 1002;
const OVERLOADED_MESSAGE: &str = "The local executor is at its concurrent request limit.";

/// What the loop reads and writes: the two WebSocket frame kinds the protocol uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// One JSON envelope.
    Text(String),
    /// A close frame; `reason` is at most 123 bytes when the loop sends it.
    Close {
        /// WebSocket close code.
        code: u16,
        /// Close reason.
        reason: String,
    },
}

/// Local policy for one data connection; HELLO_ACK can only lower these limits.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The data connection's session id; HELLO_ACK must carry exactly this one.
    pub session_id: String,
    /// Stable machine identifier for HELLO.
    pub machine_id: String,
    /// Display name for HELLO (beyond PROTOCOL.md; the reference sends one).
    pub display_name: Option<String>,
    /// This shim's version for HELLO.
    pub shim_version: String,
    /// Host OS family for HELLO.
    pub platform: Platform,
    /// Normalised architecture for HELLO.
    pub arch: Arch,
    /// Capabilities the operator enabled; HELLO advertises those in
    /// [`SERVABLE_CAPABILITIES`], in the spec's order.
    pub advertised: Vec<Capability>,
    /// Local in-flight request cap.
    pub max_concurrent: u32,
    /// Local command timeout ceiling (negotiated and kept for the shell handler to come).
    pub command_timeout_seconds: u64,
    /// Local FILE_* limits; `max_read_bytes` and `max_write_bytes` are each lowered to
    /// HELLO_ACK's `max_file_size_bytes`.
    pub limits: FileLimits,
    /// STATUS cadence; zero disables the periodic STATUS (the edge STATUS stays).
    pub status_interval: Duration,
    /// How long to wait for HELLO_ACK.
    pub handshake_timeout: Duration,
}

impl SessionConfig {
    /// A configuration with the protocol's defaults: `files` advertised, max_concurrent 4,
    /// 30 s command timeout, 10 MiB files, STATUS every 30 s, 10 s for HELLO_ACK.
    pub fn new(
        session_id: impl Into<String>,
        machine_id: impl Into<String>,
        shim_version: impl Into<String>,
        platform: Platform,
        arch: Arch,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            machine_id: machine_id.into(),
            display_name: None,
            shim_version: shim_version.into(),
            platform,
            arch,
            advertised: vec![Capability::Files],
            max_concurrent: DEFAULT_MAX_CONCURRENT.get(),
            command_timeout_seconds: DEFAULT_COMMAND_TIMEOUT_SECONDS.get(),
            limits: FileLimits::default(),
            status_interval: DEFAULT_STATUS_INTERVAL,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }

    /// The HELLO capabilities: enabled and servable, deduplicated, in the spec's order.
    pub fn hello_capabilities(&self) -> Vec<Capability> {
        Capability::ALL
            .iter()
            .copied()
            .filter(|cap| SERVABLE_CAPABILITIES.contains(cap) && self.advertised.contains(cap))
            .collect()
    }
}

/// How a session ended, and so whether the caller may reconnect.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEnd {
    /// The platform closed with a code below 4426 (1000, 1011, ...): reconnect with backoff.
    Closed {
        /// The close code received.
        code: u16,
        /// The close reason received.
        reason: String,
    },
    /// The platform closed with 4426–4429: do not reconnect until an operator restarts.
    Fatal {
        /// The close code received.
        code: u16,
        /// The close reason received.
        reason: String,
    },
    /// SESSION_REVOKED arrived; the loop sent close 4428 and nothing else. No reconnect.
    Revoked(SessionRevokedPayload),
    /// HELLO_ACK's major differs or its version is malformed; the loop sent 4426 with the
    /// JSON reason. No reconnect.
    VersionMismatch {
        /// The platform's advertised maximum, as received.
        platform_max: String,
    },
    /// The loop refused HELLO_ACK with 4400 (wrong id, unadvertised grant, invalid limits,
    /// oversized HELLO) or 4403 (session mismatch). No reconnect.
    HandshakeRejected {
        /// The close code sent.
        code: u16,
    },
    /// No HELLO_ACK in time, or another frame came first; the loop sent close 1002.
    /// Reconnect with backoff.
    HandshakeFailed,
    /// The stream ended or the sink failed: reconnect with backoff.
    TransportEnded,
}

impl SessionEnd {
    /// Whether the reconnect loop may dial again (after its backoff).
    pub const fn may_reconnect(&self) -> bool {
        matches!(
            self,
            Self::Closed { .. } | Self::HandshakeFailed | Self::TransportEnded
        )
    }
}

/// The machine control plane that a control connection serves (`crate::control`): the
/// session loop admits and counts its requests like any other and hands them over.
pub trait ControlPlane: fmt::Debug + Send + Sync {
    /// A control connection was established with this negotiated `max_concurrent`: every
    /// reference of an earlier one dies, every child runtime stops, and the children started
    /// from now on share a machine-wide work gate of that size.
    fn connected(&self, max_concurrent: NonZeroU32);
    /// Answers one control request (DIRECTORY_LIST_REQUEST, ATTACH/ACTIVATE/RESTORE/DETACH).
    fn handle(&self, message: Message) -> Pin<Box<dyn Future<Output = Message> + Send>>;
}

/// When a child runtime last received a data request (keepalives do not count), for the
/// control plane's idle reaper.
#[derive(Debug, Clone)]
pub struct Activity(Arc<Mutex<Instant>>);

impl Default for Activity {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(Instant::now())))
    }
}

impl Activity {
    /// Records a data request now.
    pub fn touch(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// How long since the last data request (or since creation).
    pub fn idle(&self) -> Duration {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }
}

/// The machine-wide work gate every control-mode child shares (the reference's "machine work
/// semaphore", sized by the control connection's negotiated `max_concurrent`): an admitted
/// data request waits here for a permit before it runs, and is never refused by it; each
/// child's own `max_concurrent` admission still applies on top.
#[derive(Debug, Clone)]
pub struct MachineWork {
    permits: Arc<Semaphore>,
    size: u32,
}

impl MachineWork {
    /// A gate letting `size` requests run at once across every child.
    pub fn new(size: NonZeroU32) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(
                usize::try_from(size.get()).unwrap_or(usize::MAX),
            )),
            size: size.get(),
        }
    }

    /// How many requests may run at once.
    pub const fn size(&self) -> u32 {
        self.size
    }

    /// Waits for a permit; `queued` counts this request while it waits (also when the wait
    /// is cancelled, the guard gives the count back).
    async fn enter(&self, queued: &Arc<AtomicU32>) -> Option<OwnedSemaphorePermit> {
        struct Waiting<'a>(&'a AtomicU32);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        queued.fetch_add(1, Ordering::Relaxed);
        let _waiting = Waiting(queued);
        // The semaphore is never closed, so this only fails if that changes; running
        // without a permit would then be the wrong failure, so the request is refused.
        Arc::clone(&self.permits).acquire_owned().await.ok()
    }
}

/// What every connection of this machine shares: the jail, the one audit chain and the
/// machine-wide command limits.
#[derive(Debug, Clone)]
pub struct Host {
    /// The FILE_* jail (and the shell's cwd jail).
    pub jail: Arc<Jail>,
    /// The machine's audit chain.
    pub audit: Auditor,
    /// Concurrent commands and commands per minute, across every connection.
    pub commands: CommandLimiter,
    /// The local model backend, when the operator enabled it.
    pub llm: Option<LocalLlm>,
    /// Computer use, when the operator enabled it.
    pub computer: Option<Computer>,
    /// Whether HELLO lists serial ports, USB devices and GPIO chips (`enable_hardware`).
    pub hardware: bool,
    /// Set on the control connection: HELLO advertises `directory_browse` with a null root,
    /// HELLO_ACK is checked as a control ACK, and only control messages are served.
    pub control: Option<Arc<dyn ControlPlane>>,
    /// Set on a control-mode child: touched by every data request.
    pub activity: Option<Activity>,
    /// Set on a control-mode child: the machine-wide work gate its requests wait on.
    pub work: Option<MachineWork>,
}

impl Host {
    /// A host with `jail` that audits nothing, with the reference's command limits
    /// (10 concurrent, 60 a minute).
    pub fn new(jail: Arc<Jail>) -> Self {
        Self {
            jail,
            audit: Auditor::disabled(),
            commands: CommandLimiter::new(
                DEFAULT_MAX_CONCURRENT_COMMANDS,
                DEFAULT_MAX_COMMANDS_PER_MINUTE,
            ),
            llm: None,
            computer: None,
            hardware: false,
            control: None,
            activity: None,
            work: None,
        }
    }

    /// The same host, serving LOCAL_LLM_COMPLETION through `llm`.
    #[must_use]
    pub fn with_llm(mut self, llm: LocalLlm) -> Self {
        self.llm = Some(llm);
        self
    }

    /// The same host, serving computer use through `computer`.
    #[must_use]
    pub fn with_computer(mut self, computer: Computer) -> Self {
        self.computer = Some(computer);
        self
    }

    /// The same host with other command limits.
    #[must_use]
    pub fn with_commands(mut self, commands: CommandLimiter) -> Self {
        self.commands = commands;
        self
    }

    /// The same host, auditing to `audit`.
    #[must_use]
    pub fn with_audit(mut self, audit: Auditor) -> Self {
        self.audit = audit;
        self
    }
}

/// Runs one data connection until it ends: the handshake, then the request loop.
///
/// In-flight request tasks are aborted when this returns. A FILE_* operation already
/// running on a blocking thread finishes there, but its reply is never sent.
pub async fn run_session<S, K>(stream: S, sink: K, config: SessionConfig, host: Host) -> SessionEnd
where
    S: Stream<Item = Frame> + Unpin,
    K: Sink<Frame> + Unpin,
{
    run_session_with(stream, sink, &config, host, Hooks::default()).await
}

/// Test seams that production leaves empty.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hooks {
    /// When set, every FILE_* task takes a permit before touching the disk, so a test can
    /// hold requests in flight deterministically.
    pub(crate) file_gate: Option<Arc<Semaphore>>,
}

pub(crate) async fn run_session_with<S, K>(
    mut stream: S,
    mut sink: K,
    config: &SessionConfig,
    host: Host,
    hooks: Hooks,
) -> SessionEnd
where
    S: Stream<Item = Frame> + Unpin,
    K: Sink<Frame> + Unpin,
{
    let started = Instant::now();
    // The reference asks the backend at every HELLO; no model, no capability.
    let models = match &host.llm {
        Some(llm) if config.advertised.contains(&Capability::LocalLlm) => {
            llm.refresh_models().await
        }
        _ => Vec::new(),
    };
    // Listed afresh at every HELLO: devices come and go between connections.
    let (devices, hardware_caps) =
        local_core::machine::hardware::list_all_async(host.hardware).await;
    // Probed afresh at every HELLO (window ids die with it), off the async threads.
    let desktop = match &host.computer {
        Some(computer) if config.advertised.contains(&Capability::ComputerUse) => {
            let computer = computer.clone();
            task::spawn_blocking(move || computer.hello()).await.ok()
        }
        _ => None,
    };
    let found = Found {
        desktop,
        models,
        devices: devices.into_iter().map(wire_device).collect(),
        hardware: hardware_caps
            .iter()
            .filter_map(|name| Capability::from_wire(name))
            .collect(),
    };
    let control = host.control.is_some();
    let established =
        match handshake(&mut stream, &mut sink, config, &host.jail, &found, control).await {
            Ok(established) => established,
            Err(end) => return end,
        };
    if let Some(plane) = &host.control {
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
                // A finished task's chunks were queued before it returned: they go first.
                while let Ok((id, chunk)) = chunk_rx.try_recv() {
                    if send(&mut sink, dispatch.reply(id, chunk)).await.is_err() {
                        return SessionEnd::TransportEnded;
                    }
                }
                let (reply, status) = dispatch.completed(joined);
                if send(&mut sink, reply).await.is_err() {
                    return SessionEnd::TransportEnded;
                }
                if let Some(status) = status
                    && send(&mut sink, status).await.is_err()
                {
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

/// What the handshake settled.
struct Established {
    granted: Vec<Capability>,
    version: ProtocolVersion,
    max_concurrent: NonZeroU32,
    limits: FileLimits,
    command_timeout: Duration,
}

async fn handshake<S, K>(
    stream: &mut S,
    sink: &mut K,
    config: &SessionConfig,
    jail: &Jail,
    found: &Found,
    control: bool,
) -> Result<Established, SessionEnd>
where
    S: Stream<Item = Frame> + Unpin,
    K: Sink<Frame> + Unpin,
{
    let mut advertised = config.hello_capabilities();
    if control {
        advertised.push(Capability::DirectoryBrowse);
    }
    if found.models.is_empty() {
        advertised.retain(|cap| *cap != Capability::LocalLlm);
    }
    // Hardware capabilities name what was found; they have no requests of their own.
    advertised.extend(found.hardware.iter().copied());
    advertised.sort_by_key(|cap| Capability::ALL.iter().position(|c| c == cap));
    advertised.dedup();
    let hello_id = new_id();
    let hello = Envelope::new(
        hello_id.clone(),
        unix_now(),
        Message::Hello(Box::new(hello_payload(
            config,
            (!control).then_some(jail),
            &advertised,
            found,
        ))),
    );
    let text = match hello.to_json() {
        Ok(text) if text.len() <= MAX_FRAME_BYTES => text,
        // Only a pathological configuration gets here; the reference refuses an oversized
        // HELLO with 4400 and stops.
        _ => return Err(reject(sink, close_code::BAD_HANDSHAKE, "hello_too_large").await),
    };
    if sink.send(Frame::Text(text)).await.is_err() {
        return Err(SessionEnd::TransportEnded);
    }

    let text = match tokio::time::timeout(config.handshake_timeout, stream.next()).await {
        Err(_elapsed) => return Err(handshake_failed(sink, "hello_ack_timeout").await),
        Ok(None) => return Err(SessionEnd::TransportEnded),
        Ok(Some(Frame::Close { code, reason })) => return Err(peer_closed(code, reason)),
        Ok(Some(Frame::Text(text))) => text,
    };
    let ack = match parse_frame(&text) {
        Parsed::Message(envelope) => match *envelope {
            Envelope {
                id,
                message: Message::HelloAck(ack),
                ..
            } if id == hello_id => ack,
            Envelope {
                message: Message::HelloAck(_),
                ..
            } => {
                return Err(reject(sink, close_code::BAD_HANDSHAKE, "hello_ack_id_mismatch").await);
            }
            _ => return Err(handshake_failed(sink, "expected_hello_ack").await),
        },
        // A HELLO_ACK whose payload does not validate has a zero limit or a malformed
        // session id: the ACK is unacceptable, whatever its id.
        Parsed::InvalidPayload {
            message_type: MessageType::HelloAck,
            ..
        } => return Err(reject(sink, close_code::BAD_HANDSHAKE, "invalid_hello_ack").await),
        _ => return Err(handshake_failed(sink, "expected_hello_ack").await),
    };
    check_ack(sink, config, &advertised, ack, control).await
}

/// The reference's checks after the id, in its order: session, capabilities, version, limits.
async fn check_ack<K>(
    sink: &mut K,
    config: &SessionConfig,
    advertised: &[Capability],
    ack: HelloAckPayload,
    control: bool,
) -> Result<Established, SessionEnd>
where
    K: Sink<Frame> + Unpin,
{
    let session_ok = if control {
        ack.session_id.as_deref().is_none_or(str::is_empty)
    } else {
        ack.session_id.as_deref() == Some(config.session_id.as_str())
    };
    if !session_ok {
        return Err(reject(sink, close_code::SESSION_MISMATCH, "session_mismatch").await);
    }
    if !ack.unadvertised(advertised).is_empty() {
        return Err(reject(sink, close_code::BAD_HANDSHAKE, "capability_not_advertised").await);
    }
    let version = match negotiate(PROTOCOL_VERSION_STR, &ack.protocol_version) {
        Ok(version) => version,
        Err(err) => {
            let reason = version_mismatch_close_reason(
                PROTOCOL_VERSION_STR,
                &ack.protocol_version,
                &err.to_string(),
            );
            let _ = sink
                .send(Frame::Close {
                    code: close_code::PROTOCOL_VERSION_MISMATCH,
                    reason,
                })
                .await;
            return Err(SessionEnd::VersionMismatch {
                platform_max: ack.protocol_version,
            });
        }
    };
    // PROTOCOL.md: a control ACK without exactly 1.1, a connection id and the
    // directory_browse grant ends the daemon.
    if control
        && (version != crate::protocol::PROTOCOL_VERSION
            || ack.connection_id.as_deref().is_none_or(str::is_empty)
            || !ack
                .granted_capabilities
                .iter()
                .any(|g| g.known() == Some(&Capability::DirectoryBrowse)))
    {
        return Err(reject(
            sink,
            close_code::PROTOCOL_VERSION_MISMATCH,
            "control_ack_incomplete",
        )
        .await);
    }
    let max_file_size = ack.max_file_size_bytes.get();
    let limits = FileLimits {
        max_read_bytes: config.limits.max_read_bytes.min(max_file_size),
        max_write_bytes: config.limits.max_write_bytes.min(max_file_size),
        max_list_entries_hard_cap: config.limits.max_list_entries_hard_cap,
    };
    let max_concurrent = NonZeroU32::new(config.max_concurrent.min(ack.max_concurrent.get()));
    let command_timeout = config
        .command_timeout_seconds
        .min(ack.command_timeout_seconds.get());
    // ACK limits are positive by construction; a zero here comes from local policy.
    let Some(max_concurrent) = max_concurrent else {
        return Err(reject(sink, close_code::BAD_HANDSHAKE, "invalid_limits").await);
    };
    if limits.max_read_bytes == 0 || limits.max_write_bytes == 0 || command_timeout == 0 {
        return Err(reject(sink, close_code::BAD_HANDSHAKE, "invalid_limits").await);
    }
    let granted = advertised
        .iter()
        .copied()
        .filter(|cap| {
            ack.granted_capabilities
                .iter()
                .any(|g| g.known() == Some(cap))
        })
        .collect();
    Ok(Established {
        granted,
        version,
        max_concurrent,
        limits,
        command_timeout: Duration::from_secs(command_timeout),
    })
}

fn hello_payload(
    config: &SessionConfig,
    jail: Option<&Jail>,
    advertised: &[Capability],
    found: &Found,
) -> HelloPayload {
    HelloPayload {
        shim_version: config.shim_version.clone(),
        protocol_version: PROTOCOL_VERSION_STR.to_owned(),
        machine_id: config.machine_id.clone(),
        display_name: config.display_name.clone(),
        platform: config.platform,
        arch: config.arch,
        screen_resolution: found
            .desktop
            .as_ref()
            .filter(|_| advertised.contains(&Capability::ComputerUse))
            .and_then(|probe| probe.screen_resolution)
            .map(|(w, h)| {
                [
                    u32::try_from(w).unwrap_or(u32::MAX),
                    u32::try_from(h).unwrap_or(u32::MAX),
                ]
            }),
        capabilities: advertised.to_vec(),
        // The canonical root the jail enforces, not the configured spelling; null on the
        // control connection, which serves no files.
        allowed_root: jail.map(|jail| jail.root().to_string_lossy().into_owned()),
        local_llm_models: if advertised.contains(&Capability::LocalLlm) {
            found.models.clone()
        } else {
            Vec::new()
        },
        hardware_devices: found.devices.clone(),
        computer_use_features: computer_features(found, advertised, |p| &p.fine),
        computer_use_features_coarse: computer_features(found, advertised, |p| &p.coarse),
        recording_channels: Vec::new(),
        recording_routes: Vec::new(),
    }
}

fn computer_features(
    found: &Found,
    advertised: &[Capability],
    pick: impl Fn(&local_core::desktop::probe::Probe) -> &Vec<&'static str>,
) -> Vec<String> {
    match &found.desktop {
        Some(probe) if advertised.contains(&Capability::ComputerUse) => {
            pick(probe).iter().map(|f| (*f).to_owned()).collect()
        }
        _ => Vec::new(),
    }
}

/// What this machine offers at HELLO time beyond the configuration.
struct Found {
    /// What computer use can do in this desktop session (`None`: not enabled).
    desktop: Option<local_core::desktop::probe::Probe>,
    /// The local backend's models (empty: no `local_llm`).
    models: Vec<String>,
    /// Hardware for `hardware_devices`.
    devices: Vec<HardwareDevice>,
    /// `hardware_*` capabilities for the kinds found.
    hardware: Vec<Capability>,
}

fn wire_device(device: local_core::machine::hardware::HardwareDevice) -> HardwareDevice {
    HardwareDevice {
        kind: device.kind.as_str().to_owned(),
        port: device.port,
        vid: device.vid,
        pid: device.pid,
        desc: Some(device.desc),
        id: Some(device.id),
        path: device.path,
        serial_number: device.serial_number,
        manufacturer: device.manufacturer,
        product: device.product,
    }
}

/// Sends the close for a refused HELLO_ACK.
async fn reject<K: Sink<Frame> + Unpin>(sink: &mut K, code: u16, reason: &str) -> SessionEnd {
    let _ = sink
        .send(Frame::Close {
            code,
            reason: reason.to_owned(),
        })
        .await;
    SessionEnd::HandshakeRejected { code }
}

async fn handshake_failed<K: Sink<Frame> + Unpin>(sink: &mut K, reason: &str) -> SessionEnd {
    let _ = sink
        .send(Frame::Close {
            code: HANDSHAKE_PROTOCOL_ERROR,
            reason: reason.to_owned(),
        })
        .await;
    SessionEnd::HandshakeFailed
}

fn peer_closed(code: u16, reason: String) -> SessionEnd {
    if close_code::is_fatal(code) {
        SessionEnd::Fatal { code, reason }
    } else {
        SessionEnd::Closed { code, reason }
    }
}

/// Serialises and sends one envelope. A frame above the 16 MiB transport cap is replaced by
/// ERROR `FILE_TOO_LARGE` with the same id, as the reference does.
async fn send<K: Sink<Frame> + Unpin>(sink: &mut K, envelope: Envelope) -> Result<(), ()> {
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
    sink.send(Frame::Text(text)).await.map_err(|_| ())
}

/// What an inbound text frame asks of the loop.
enum Inbound {
    Nothing,
    Reply(Envelope),
    Revoked(SessionRevokedPayload),
}

/// The request loop's state, apart from the transport.
struct Dispatch {
    host: Host,
    hooks: Hooks,
    granted: Vec<Capability>,
    max_concurrent: NonZeroU32,
    limits: FileLimits,
    shell_limits: ShellLimits,
    version: ProtocolVersion,
    started: Instant,
    /// One task per admitted request; its length is the in-flight count.
    tasks: JoinSet<Message>,
    /// Request id per task, so even a panicked task gets its ERROR, and its log line.
    requests: HashMap<task::Id, (String, RequestLog)>,
    /// Where streaming tasks send their partial replies.
    chunks: mpsc::UnboundedSender<(String, Message)>,
    /// Admitted tasks still waiting on the machine work gate (children only).
    queued: Arc<AtomicU32>,
}

/// A capability's immediate refusal: the reply and its audit record.
type Refusal = Box<(Message, Entry)>;
/// A capability's admission check, run when the request may start.
type Admission<Op> = Box<dyn FnOnce() -> Result<Op, Refusal> + Send>;

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

    fn reply(&self, id: String, message: Message) -> Envelope {
        Envelope::response(id, unix_now(), self.free(), message).with_version(self.version)
    }

    fn error(
        &self,
        id: String,
        code: ErrorCode,
        message: String,
        details: serde_json::Value,
    ) -> Envelope {
        let payload = ErrorPayload {
            code: code.into(),
            message,
            fatal: false,
            details: Some(details),
        };
        self.reply(id, Message::Error(payload))
    }

    fn status(&self) -> Envelope {
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

    fn inbound(&mut self, text: &str) -> Inbound {
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
                let log = RequestLog::start(request.message_type());
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
        if control_message != self.host.control.is_some() {
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
        if control_message == self.host.control.is_some()
            && let Some(activity) = &self.host.activity
        {
            activity.touch();
        }
        if let Some(refusal) = self.refusal(&id, kind) {
            return Inbound::Reply(refusal);
        }
        if self.free() == 0 {
            return Inbound::Reply(self.error(
                id,
                ErrorCode::ShimOverloaded,
                OVERLOADED_MESSAGE.to_owned(),
                json!({ "max_concurrent": self.max_concurrent.get() }),
            ));
        }
        let task = match message {
            message if control_message => self.control_task(message),
            Message::ExecuteCommand(payload) => {
                let commands = self.host.commands.clone();
                match self.admission(move || ShellOp::admit(payload, &commands)) {
                    Ok(admit) => self.shell_task(id.clone(), admit),
                    Err(refused) => return self.refuse(id, *refused),
                }
            }
            Message::LocalLlmCompletion(payload) => {
                let admitted = match self.host.llm.clone() {
                    Some(llm) => self.admission(move || LlmOp::admit(payload, &llm)),
                    // Unreachable: HELLO advertises local_llm only with a backend.
                    None => {
                        return Inbound::Reply(self.error(
                            id,
                            ErrorCode::FeatureNotSupported,
                            "No local model backend is configured.".to_owned(),
                            json!({ "feature": kind.as_str(), "reason": "not configured" }),
                        ));
                    }
                };
                match admitted {
                    Ok(admit) => self.llm_task(id.clone(), admit),
                    Err(refused) => return self.refuse(id, *refused),
                }
            }
            message if kind.required_capability() == Some(Capability::ComputerUse) => {
                let Some(computer) = self.host.computer.clone() else {
                    // Unreachable: HELLO advertises computer_use only with a desktop.
                    return Inbound::Reply(self.error(
                        id,
                        ErrorCode::CapabilityNotGranted,
                        "Computer use is not enabled".to_owned(),
                        json!({ "required_capability": Capability::ComputerUse }),
                    ));
                };
                let Some(op) = ComputerOp::from_message(message) else {
                    return Inbound::Reply(self.error(
                        id,
                        ErrorCode::FeatureNotSupported,
                        format!("{kind} is not a request."),
                        json!({ "feature": kind.as_str(), "reason": "not a request" }),
                    ));
                };
                if let Err(refused) = op.check_advertised(&computer) {
                    return self.refuse(id, *refused);
                }
                self.computer_task(id.clone(), computer, op)
            }
            message => match FileOp::from_message(message) {
                Some(op) => self.file_task(id.clone(), op),
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
            },
        };
        self.requests.insert(task, (id, log));
        Inbound::Nothing
    }

    /// An immediate refusal from a capability's own pre-checks; its audit record is queued
    /// and written behind the reply, so the loop never waits for an fsync.
    fn refuse(&self, id: String, (reply, entry): (Message, Entry)) -> Inbound {
        drop(tokio::spawn(
            self.host.audit.submit(Some(&id), vec![entry]).wait(),
        ));
        Inbound::Reply(self.reply(id, reply))
    }

    fn control_task(&mut self, message: Message) -> task::Id {
        let answer = self
            .host
            .control
            .as_ref()
            .map(|plane| plane.handle(message));
        self.tasks
            .spawn(async move {
                match answer {
                    Some(answer) => answer.await,
                    None => internal_error(),
                }
            })
            .id()
    }

    /// When a request's own limits are checked. A connection without a machine gate checks
    /// them at once (an immediate refusal). A child checks them once its machine permit is
    /// granted, as the reference does, so a request waiting on the gate holds no command or
    /// model slot another child could use.
    fn admission<Op: Send + 'static>(
        &self,
        admit: impl FnOnce() -> Result<Op, Refusal> + Send + 'static,
    ) -> Result<Admission<Op>, Refusal> {
        if self.host.work.is_some() {
            Ok(Box::new(admit))
        } else {
            let op = admit()?;
            Ok(Box::new(move || Ok(op)))
        }
    }

    /// The machine work gate of this connection (children only) and the waiting count.
    fn gate(&self) -> Gate {
        Gate {
            work: self.host.work.clone(),
            queued: Arc::clone(&self.queued),
        }
    }

    fn llm_task(&mut self, request_id: String, admit: Admission<LlmOp>) -> task::Id {
        let audit = self.host.audit.clone();
        let chunks = self.chunks.clone();
        let gate = self.gate();
        self.tasks
            .spawn(async move {
                let Some(_work) = gate.enter().await else {
                    return internal_error();
                };
                let op = match admitted(admit, &audit, &request_id).await {
                    Ok(op) => op,
                    Err(reply) => return reply,
                };
                // Aborting this task drops the backend call with it.
                let (message, entry) = op.run(request_id.clone(), chunks).await;
                audit.record_async(Some(request_id), entry).await;
                message
            })
            .id()
    }

    fn file_task(&mut self, request_id: String, op: FileOp) -> task::Id {
        let host = self.host.clone();
        let limits = self.limits;
        let test_gate = self.hooks.file_gate.clone();
        let gate = self.gate();
        self.tasks
            .spawn(async move {
                let Some(_work) = gate.enter().await else {
                    return internal_error();
                };
                let _permit = match &test_gate {
                    Some(gate) => gate.acquire().await.ok(),
                    None => None,
                };
                // The records are queued from the blocking thread, and their fsync waited
                // for here, so no blocking thread sits through it.
                let run = move || {
                    let (message, entry) = op.run(&host.jail, &limits);
                    (message, audit_file_op(&host.audit, &request_id, entry))
                };
                match task::spawn_blocking(run).await {
                    Ok((message, durable)) => {
                        durable.wait().await;
                        message
                    }
                    Err(_) => internal_error(),
                }
            })
            .id()
    }

    fn computer_task(
        &mut self,
        request_id: String,
        computer: Computer,
        op: ComputerOp,
    ) -> task::Id {
        let audit = self.host.audit.clone();
        let max_bytes = self.limits.max_read_bytes;
        let gate = self.gate();
        self.tasks
            .spawn(async move {
                let Some(_work) = gate.enter().await else {
                    return internal_error();
                };
                let Some(_turn) = computer.turn().await else {
                    return internal_error();
                };
                let run = move || op.run(&computer, max_bytes);
                let Ok((message, entry)) = task::spawn_blocking(run).await else {
                    return internal_error();
                };
                audit.record_async(Some(request_id), entry).await;
                message
            })
            .id()
    }

    fn shell_task(&mut self, request_id: String, admit: Admission<ShellOp>) -> task::Id {
        let host = self.host.clone();
        let limits = self.shell_limits;
        let gate = self.gate();
        self.tasks
            .spawn(async move {
                let Some(_work) = gate.enter().await else {
                    return internal_error();
                };
                let op = match admitted(admit, &host.audit, &request_id).await {
                    Ok(op) => op,
                    Err(reply) => return reply,
                };
                // Aborting this task drops the command's future, which kills its process group.
                let (message, entry) = op.run(&host.jail, limits).await;
                host.audit.record_async(Some(request_id), entry).await;
                message
            })
            .id()
    }

    /// The reply for a finished task and, when it freed the last slot, the edge STATUS.
    fn completed(
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

/// Runs a deferred admission check; a refusal is audited and becomes the task's reply.
async fn admitted<Op>(
    admit: Admission<Op>,
    audit: &Auditor,
    request_id: &str,
) -> Result<Op, Message> {
    match admit() {
        Ok(op) => Ok(op),
        Err(refused) => {
            let (reply, entry) = *refused;
            audit.record_async(Some(request_id.to_owned()), entry).await;
            Err(reply)
        }
    }
}

/// A request task's way through the machine work gate.
struct Gate {
    work: Option<MachineWork>,
    queued: Arc<AtomicU32>,
}

impl Gate {
    /// `Some` when the request may run: at once without a gate, else once a permit is
    /// granted (the permit inside is held until the task ends). `None` only if the gate
    /// was closed, which nothing does.
    async fn enter(self) -> Option<Option<OwnedSemaphorePermit>> {
        match &self.work {
            None => Some(None),
            Some(work) => work.enter(&self.queued).await.map(Some),
        }
    }
}

/// Queues a FILE_* record, and a JAIL_VIOLATION record when the path led outside the root
/// (the reference's separate op for that, so violations can be found without parsing codes).
fn audit_file_op(audit: &Auditor, request_id: &str, entry: Entry) -> Durable {
    let violation = (entry.result.error_code.as_deref()
        == Some(ErrorCode::PathOutsideAllowedRoot.as_str()))
    .then(|| {
        let mut details = details([
            ("code", json!(ErrorCode::PathOutsideAllowedRoot.as_str())),
            ("attempted_op", json!(entry.op)),
        ]);
        for key in ["path", "src", "dst"] {
            if let Some(value) = entry.details.get(key) {
                details.insert(key.to_owned(), value.clone());
            }
        }
        Entry::failed(
            "JAIL_VIOLATION",
            details,
            ErrorCode::PathOutsideAllowedRoot.as_str(),
        )
    });
    let entries = std::iter::once(entry).chain(violation).collect();
    audit.submit(Some(request_id), entries)
}

/// The reference's record for a SESSION_REVOKED frame.
fn revoked_entry(payload: &SessionRevokedPayload) -> Entry {
    let mut details = details([
        ("reason", json!(payload.reason)),
        ("source", json!("frame")),
    ]);
    if let Some(machine) = &payload.new_shim_machine_id {
        details.insert("new_shim_machine_id".to_owned(), json!(machine));
    }
    Entry::ok("SESSION_REVOKED", details)
}

fn internal_error() -> Message {
    error_message(
        ErrorCode::InternalError,
        "The operation failed unexpectedly.".to_owned(),
    )
}

/// A fresh random id for the frames the shim originates (HELLO, STATUS).
fn new_id() -> String {
    local_core::secret::new_id().to_string()
}

#[cfg(test)]
mod tests;
