//! The handshake of one connection (PROTOCOL.md "Handshake"): what this machine offers at
//! HELLO time, HELLO itself, and the reference's checks of HELLO_ACK in its order, each
//! refusal with its close code (4400, 4403, 4426; 1002 for no ACK in time).

use std::num::NonZeroU32;
use std::time::Duration;

use futures_util::{Sink, SinkExt, Stream, StreamExt};
use local_core::machine::files::FileLimits;
use local_core::machine::jail::Jail;
use tokio::task;

use super::{Frame, Host, SessionConfig, SessionEnd, new_id};
use crate::protocol::{
    Capability, Envelope, HardwareDevice, HelloAckPayload, HelloPayload, MAX_FRAME_BYTES, Message,
    MessageType, PROTOCOL_VERSION_STR, Parsed, ProtocolVersion, close_code, negotiate, parse_frame,
    unix_now, version_mismatch_close_reason,
};

/// Close code for a handshake that went wrong without the ACK being refusable (no ACK in
/// time, or another frame first): RFC 6455 "protocol error", so the caller reconnects.
const HANDSHAKE_PROTOCOL_ERROR: u16 = 1002;

/// What the handshake settled.
pub(super) struct Established {
    /// The advertised capabilities HELLO_ACK granted, in the spec's order.
    pub(super) granted: Vec<Capability>,
    /// The negotiated protocol version every later frame carries.
    pub(super) version: ProtocolVersion,
    /// The lower of the local and the ACK's `max_concurrent`.
    pub(super) max_concurrent: NonZeroU32,
    /// Local FILE_* limits lowered to the ACK's `max_file_size_bytes`.
    pub(super) limits: FileLimits,
    /// The lower of the local and the ACK's `command_timeout_seconds`.
    pub(super) command_timeout: Duration,
}

/// Looks at what this machine offers now, sends HELLO and checks HELLO_ACK. On a refusal
/// the close frame has been sent and the error says how the session ended.
pub(super) async fn handshake<S, K>(
    stream: &mut S,
    sink: &mut K,
    config: &SessionConfig,
    host: &Host,
) -> Result<Established, SessionEnd>
where
    S: Stream<Item = Frame> + Unpin,
    K: Sink<Frame> + Unpin,
{
    let found = Found::discover(config, host).await;
    let control = host.role.is_control();
    let jail: &Jail = &host.jail;
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
            &found,
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

impl Found {
    /// Asked afresh at every HELLO: the backend's models, the hardware plugged in now, and
    /// what the desktop session can do (window ids die with it).
    async fn discover(config: &SessionConfig, host: &Host) -> Self {
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
        Self {
            desktop,
            models,
            devices: devices.into_iter().map(wire_device).collect(),
            hardware: hardware_caps
                .iter()
                .filter_map(|name| Capability::from_wire(name))
                .collect(),
        }
    }
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

/// How a close frame from the platform ends the session.
pub(super) fn peer_closed(code: u16, reason: String) -> SessionEnd {
    if close_code::is_fatal(code) {
        SessionEnd::Fatal { code, reason }
    } else {
        SessionEnd::Closed { code, reason }
    }
}
