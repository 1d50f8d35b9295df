//! The clipboard (text) through wlr-data-control: no focus needed, reading through a pipe the
//! owner writes into, and writing as a source this connection's thread serves for as long as
//! it holds the selection (Wayland keeps no copy of its own).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use wayland_client::backend::ObjectId;
use wayland_client::{Connection, Dispatch, Proxy, QueueHandle, event_created_child};
use wayland_protocols_wlr::data_control::v1::client::{
    zwlr_data_control_device_v1::{self, ZwlrDataControlDeviceV1},
    zwlr_data_control_manager_v1::ZwlrDataControlManagerV1,
    zwlr_data_control_offer_v1::{self, ZwlrDataControlOfferV1},
    zwlr_data_control_source_v1::{self, ZwlrDataControlSourceV1},
};

use super::{State, Wl, failed, run};
use crate::desktop::DesktopError;

/// The text types offered and asked for, the preferred first.
const TEXT_TYPES: &[&str] = &[
    "text/plain;charset=utf-8",
    "UTF8_STRING",
    "text/plain",
    "STRING",
    "TEXT",
];
/// How long the selection's owner may take to hand over its content.
const READ_DEADLINE: Duration = Duration::from_secs(3);

/// The data-control device and what it has been told.
#[derive(Debug, Default)]
pub(super) struct ClipboardState {
    device: Option<ZwlrDataControlDeviceV1>,
    /// The types each live offer has.
    offers: HashMap<ObjectId, Vec<String>>,
    /// The current selection's offer; `None` when the clipboard is empty.
    selection: Option<ZwlrDataControlOfferV1>,
    /// The source this shim set and its text, until another client takes the selection.
    source: Option<(ZwlrDataControlSourceV1, Vec<u8>)>,
}

impl Wl {
    fn data_device(&mut self) -> Result<ZwlrDataControlDeviceV1, DesktopError> {
        if let Some(device) = self.state.clipboard.device.clone() {
            return Ok(device);
        }
        let seat = self.seat("clipboard.read")?;
        let manager = self
            .globals
            .bind::<ZwlrDataControlManagerV1, _, _>(&self.qh, 1..=2, ())
            .map_err(|_| {
                DesktopError::unsupported(
                    "clipboard.read",
                    "this Wayland compositor has no clipboard protocol",
                )
            })?;
        let device = manager.get_data_device(&seat, &self.qh, ());
        manager.destroy();
        self.state.clipboard.device = Some(device.clone());
        // The device's first events say what the selection is now.
        self.roundtrip()?;
        Ok(device)
    }
}

/// The clipboard's text (empty when it holds none), at most `limit` bytes read.
pub(super) fn get(wl: &mut Wl, limit: u64) -> Result<String, DesktopError> {
    wl.data_device()?;
    wl.roundtrip()?;
    if let Some((_, text)) = &wl.state.clipboard.source {
        // Our own selection: reading it through a pipe would wait on this very thread.
        return Ok(String::from_utf8_lossy(text).into_owned());
    }
    let Some(offer) = wl.state.clipboard.selection.clone() else {
        return Ok(String::new());
    };
    let types = wl
        .state
        .clipboard
        .offers
        .get(&offer.id())
        .cloned()
        .unwrap_or_default();
    let Some(mime) = TEXT_TYPES
        .iter()
        .find(|t| types.iter().any(|have| have == *t))
    else {
        return Ok(String::new());
    };
    let (reader, writer) = rustix::pipe::pipe().map_err(|e| failed("could not make a pipe", e))?;
    offer.receive((*mime).to_owned(), writer.as_fd());
    wl.conn
        .flush()
        .map_err(|e| failed("the compositor went away", e))?;
    drop(writer);
    read_pipe(std::fs::File::from(reader), limit)
}

/// Reads the pipe to its end, within [`READ_DEADLINE`] and `limit` (plus one byte, so the
/// caller sees it was over).
fn read_pipe(mut reader: std::fs::File, limit: u64) -> Result<String, DesktopError> {
    let end = Instant::now() + READ_DEADLINE;
    let cap = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
    let mut data = Vec::new();
    let mut chunk = [0; 64 * 1024];
    while data.len() < cap {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(DesktopError::Failed(
                "the clipboard's owner did not hand over its content in time".to_owned(),
            ));
        }
        let ready = {
            let mut fds = [rustix::event::PollFd::new(
                &reader,
                rustix::event::PollFlags::IN,
            )];
            let timeout = rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: i64::from(left.min(Duration::from_millis(500)).subsec_nanos()),
            };
            rustix::event::poll(&mut fds, Some(&timeout)).unwrap_or(0) > 0
        };
        if !ready {
            continue;
        }
        let n = reader
            .read(&mut chunk)
            .map_err(|e| failed("could not read the clipboard", e))?;
        if n == 0 {
            break;
        }
        data.extend_from_slice(&chunk[..n]);
    }
    data.truncate(cap);
    Ok(String::from_utf8_lossy(&data).into_owned())
}

/// Makes `text` the clipboard's content, served by this connection from now on.
pub(super) fn set(wl: &mut Wl, text: &str) -> Result<(), DesktopError> {
    let device = wl.data_device()?;
    let manager = wl
        .globals
        .bind::<ZwlrDataControlManagerV1, _, _>(&wl.qh, 1..=2, ())
        .map_err(|_| {
            DesktopError::unsupported(
                "clipboard.write",
                "this Wayland compositor has no clipboard protocol",
            )
        })?;
    let source = manager.create_data_source(&wl.qh, ());
    manager.destroy();
    for mime in TEXT_TYPES {
        source.offer((*mime).to_owned());
    }
    if let Some((old, _)) = wl.state.clipboard.source.take() {
        old.destroy();
    }
    wl.state.clipboard.source = Some((source.clone(), text.as_bytes().to_vec()));
    device.set_selection(Some(&source));
    wl.roundtrip()
}

/// The clipboard's text, at most `limit` bytes read.
///
/// # Errors
/// [`DesktopError::NotSupported`] without the protocol, [`DesktopError::Failed`] when the
/// owner does not hand the content over.
pub fn get_text(limit: u64) -> Result<String, DesktopError> {
    run(move |wl| get(wl, limit))
}

/// Sets the clipboard's text.
///
/// # Errors
/// [`DesktopError::NotSupported`] without the protocol, [`DesktopError::Failed`] when the
/// compositor goes away.
pub fn set_text(text: &str) -> Result<(), DesktopError> {
    let text = text.to_owned();
    run(move |wl| set(wl, &text))
}

impl Dispatch<ZwlrDataControlDeviceV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &ZwlrDataControlDeviceV1,
        event: zwlr_data_control_device_v1::Event,
        (): &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        use zwlr_data_control_device_v1::Event as E;
        let clipboard = &mut state.clipboard;
        match event {
            E::DataOffer { id } => {
                clipboard.offers.insert(id.id(), Vec::new());
            }
            E::Selection { id } => {
                // The previous offer is done with once another replaces it.
                if let Some(old) = clipboard.selection.take()
                    && id.as_ref().is_none_or(|new| new.id() != old.id())
                {
                    clipboard.offers.remove(&old.id());
                    old.destroy();
                }
                clipboard.selection = id;
            }
            E::PrimarySelection { id: Some(offer) } => {
                clipboard.offers.remove(&offer.id());
                offer.destroy();
            }
            _ => {}
        }
    }

    event_created_child!(State, ZwlrDataControlDeviceV1, [
        zwlr_data_control_device_v1::EVT_DATA_OFFER_OPCODE => (ZwlrDataControlOfferV1, ()),
    ]);
}

impl Dispatch<ZwlrDataControlOfferV1, ()> for State {
    fn event(
        state: &mut Self,
        offer: &ZwlrDataControlOfferV1,
        event: zwlr_data_control_offer_v1::Event,
        (): &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let zwlr_data_control_offer_v1::Event::Offer { mime_type } = event {
            state
                .clipboard
                .offers
                .entry(offer.id())
                .or_default()
                .push(mime_type);
        }
    }
}

impl Dispatch<ZwlrDataControlSourceV1, ()> for State {
    fn event(
        state: &mut Self,
        source: &ZwlrDataControlSourceV1,
        event: zwlr_data_control_source_v1::Event,
        (): &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let ours = state
            .clipboard
            .source
            .as_ref()
            .filter(|(s, _)| s.id() == source.id());
        match event {
            zwlr_data_control_source_v1::Event::Send { fd, .. } => {
                if let Some((_, text)) = ours {
                    // A reader that goes away early only loses its own copy.
                    let _ = std::fs::File::from(fd).write_all(text);
                }
            }
            zwlr_data_control_source_v1::Event::Cancelled => {
                if ours.is_some() {
                    state.clipboard.source = None;
                }
                source.destroy();
            }
            _ => {}
        }
    }
}
