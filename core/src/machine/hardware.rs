//! Hardware listing for HELLO: serial ports, USB devices and GPIO chips.
//!
//! With `enable_hardware` the connector lists what is attached and advertises
//! `hardware_serial`, `hardware_usb` and `hardware_gpio` only for the kinds that listed at
//! least one device. Listing never fails: a missing bus, a missing `/sys` or a permission
//! problem yields fewer devices, never an error. Nothing here opens a device.
//!
//! # Device shape (`HELLO.hardware_devices[]`)
//!
//! PROTOCOL.md fixes `type`, `port` (serial), `vid`/`pid` (USB) and `desc`; the other keys are
//! forward-compatible additions, which the protocol requires receivers to tolerate:
//!
//! ```json
//! {"type": "serial", "id": "ttyUSB0", "port": "/dev/ttyUSB0", "vid": "0403", "pid": "6001",
//!  "desc": "FT232R USB UART", "serial_number": "A50285BI", "manufacturer": "FTDI",
//!  "product": "FT232R USB UART"}
//! {"type": "usb", "id": "1-1.2", "vid": "2341", "pid": "0043", "desc": "Arduino Uno",
//!  "manufacturer": "Arduino (www.arduino.cc)"}
//! {"type": "gpio", "id": "gpiochip0", "path": "/dev/gpiochip0", "desc": "pinctrl-bcm2711"}
//! ```
//!
//! - `type`: `"serial"`, `"usb"` or `"gpio"`; `id`: stable within one machine (kernel name,
//!   USB bus and port chain, chip name); `desc`: always present, the best human name known.
//! - `port` (serial) and `path` (GPIO): the device node; USB devices have neither.
//! - `vid`/`pid`: four lowercase hex digits; on serial ports only when the port sits on USB.
//! - `serial_number`, `manufacturer`, `product`: as the device reports them, when it does.
//!
//! Absent values are omitted, never `null`. Every string is stripped of control characters,
//! trimmed and capped at [`MAX_STRING_CHARS`] characters; each kind is capped at
//! [`MAX_DEVICES_PER_KIND`] devices, chosen after sorting so the cut is deterministic.

use std::cmp::Ordering;

use serde::Serialize;

mod gpio;
mod serial;
// The one reader of sysfs and /dev for the listers (core/clippy.toml bans std::fs elsewhere):
// kernel attributes and device nodes, not user files, kept under their canonical root.
#[allow(
    clippy::disallowed_methods,
    reason = "owns the contained reads of sysfs and /dev"
)]
mod sysfs;
mod usb;

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "tests build a fake sysfs and /dev"
)]
mod tests;

pub use gpio::{list_gpio, list_gpio_in};
pub use serial::{list_serial, list_serial_in};
pub use usb::list_usb;

/// Most devices reported per kind.
pub const MAX_DEVICES_PER_KIND: usize = 256;

/// Longest string reported, in characters.
pub const MAX_STRING_CHARS: usize = 256;

/// Most directory entries or enumerated devices looked at per kind, so a pathological
/// `/sys` or `/dev` cannot make HELLO slow.
const MAX_SCANNED: usize = 4096;

/// What a [`HardwareDevice`] is, and the capability advertising it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HardwareKind {
    /// A serial port (`/dev/ttyUSB0`, `COM3`, ...).
    Serial,
    /// A USB device.
    Usb,
    /// A GPIO chip character device (`/dev/gpiochip0`).
    Gpio,
}

impl HardwareKind {
    /// Every kind, in the order PROTOCOL.md lists their capabilities.
    pub const ALL: [Self; 3] = [Self::Serial, Self::Usb, Self::Gpio];

    /// The `type` value of a device of this kind.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Serial => "serial",
            Self::Usb => "usb",
            Self::Gpio => "gpio",
        }
    }

    /// The HELLO capability advertised when at least one device of this kind is listed.
    pub const fn capability(&self) -> &'static str {
        match self {
            Self::Serial => "hardware_serial",
            Self::Usb => "hardware_usb",
            Self::Gpio => "hardware_gpio",
        }
    }
}

/// One entry of `HELLO.hardware_devices`; see the module documentation for the JSON shape.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct HardwareDevice {
    /// The device kind, serialised as `type`.
    #[serde(rename = "type")]
    pub kind: HardwareKind,
    /// Identifier unique among the devices of one kind on this machine.
    pub id: String,
    /// Serial ports: the device node to open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// GPIO chips: the device node to open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// USB vendor id, four lowercase hex digits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vid: Option<String>,
    /// USB product id, four lowercase hex digits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<String>,
    /// Human description: product, else manufacturer or label, else a generic name.
    pub desc: String,
    /// USB serial number string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    /// USB manufacturer string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manufacturer: Option<String>,
    /// USB product string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
}

impl HardwareDevice {
    /// A device with only its kind, id and description; the listers fill in the rest.
    fn new(kind: HardwareKind, id: String, desc: String) -> Self {
        Self {
            kind,
            id,
            port: None,
            path: None,
            vid: None,
            pid: None,
            desc,
            serial_number: None,
            manufacturer: None,
            product: None,
        }
    }
}

/// Lists every kind and the capabilities to advertise (in PROTOCOL.md's order, only kinds
/// with at least one device). `enabled == false` lists nothing and touches nothing.
///
/// This blocks on filesystem reads; async callers should use [`list_all_async`].
pub fn list_all(enabled: bool) -> (Vec<HardwareDevice>, Vec<&'static str>) {
    if !enabled {
        return (Vec::new(), Vec::new());
    }
    let mut devices = list_serial();
    devices.extend(list_usb());
    devices.extend(list_gpio());
    summarise(devices)
}

/// [`list_all`] on tokio's blocking pool, so HELLO building does not stall a runtime worker.
/// A panicking lister yields nothing rather than failing the handshake.
pub async fn list_all_async(enabled: bool) -> (Vec<HardwareDevice>, Vec<&'static str>) {
    if !enabled {
        return (Vec::new(), Vec::new());
    }
    tokio::task::spawn_blocking(move || list_all(enabled))
        .await
        .unwrap_or_default()
}

/// Sorts and caps devices per kind and derives the capabilities from what remains.
fn summarise(devices: Vec<HardwareDevice>) -> (Vec<HardwareDevice>, Vec<&'static str>) {
    let devices = finish(devices);
    let capabilities = HardwareKind::ALL
        .into_iter()
        .filter(|kind| devices.iter().any(|device| device.kind == *kind))
        .map(|kind| kind.capability())
        .collect();
    (devices, capabilities)
}

/// Sorts by kind then id (numbers compared as numbers, so `ttyS2` precedes `ttyS10`), drops
/// exact duplicates and keeps at most [`MAX_DEVICES_PER_KIND`] of each kind.
fn finish(mut devices: Vec<HardwareDevice>) -> Vec<HardwareDevice> {
    devices.sort_by(|a, b| {
        a.kind
            .cmp(&b.kind)
            .then_with(|| natural_cmp(&a.id, &b.id))
            .then_with(|| a.cmp(b))
    });
    devices.dedup();
    let mut kept = Vec::with_capacity(devices.len());
    for kind in HardwareKind::ALL {
        kept.extend(
            devices
                .iter()
                .filter(|device| device.kind == kind)
                .take(MAX_DEVICES_PER_KIND)
                .cloned(),
        );
    }
    kept
}

/// Compares runs of ASCII digits by value and everything else bytewise; ties (`01` vs `1`)
/// fall back to plain byte order so the result is a total order.
fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut left, mut right) = (a.as_bytes(), b.as_bytes());
    loop {
        match (left.first(), right.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let left_len = digit_run(left);
                let right_len = digit_run(right);
                let left_num = strip_zeros(&left[..left_len]);
                let right_num = strip_zeros(&right[..right_len]);
                let order = left_num
                    .len()
                    .cmp(&right_num.len())
                    .then_with(|| left_num.cmp(right_num));
                if order != Ordering::Equal {
                    return order;
                }
                left = &left[left_len..];
                right = &right[right_len..];
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                left = &left[1..];
                right = &right[1..];
            }
        }
    }
}

fn digit_run(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|b| b.is_ascii_digit()).count()
}

fn strip_zeros(digits: &[u8]) -> &[u8] {
    let zeros = digits.iter().take_while(|b| **b == b'0').count();
    &digits[zeros..]
}

/// Makes a reported string safe to show: no control characters, trimmed, at most
/// [`MAX_STRING_CHARS`] characters; `None` when nothing is left.
fn clean(raw: &str) -> Option<String> {
    let visible: String = raw.chars().filter(|c| !c.is_control()).collect();
    let capped: String = visible.trim().chars().take(MAX_STRING_CHARS).collect();
    let capped = capped.trim_end();
    (!capped.is_empty()).then(|| capped.to_owned())
}

/// A USB id as four lowercase hex digits, from sysfs text such as `0403`.
fn hex_id(raw: &str) -> Option<String> {
    let raw = raw.trim();
    if raw.is_empty() || raw.len() > 4 || !raw.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u16::from_str_radix(raw, 16).ok().map(format_id)
}

fn format_id(id: u16) -> String {
    format!("{id:04x}")
}

/// The best description: the first present candidate, else the fallback.
fn describe(candidates: &[Option<&String>], fallback: &str) -> String {
    candidates
        .iter()
        .flatten()
        .next()
        .map_or_else(|| fallback.to_owned(), |s| (*s).clone())
}
