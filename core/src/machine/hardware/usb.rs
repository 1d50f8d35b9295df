//! USB devices through nusb's enumeration, with only the strings the OS already cached: no
//! device is opened, so listing needs no permission on the devices themselves.

use nusb::{DeviceInfo, MaybeFuture};

use super::{HardwareDevice, HardwareKind, MAX_SCANNED, clean, describe, finish, format_id};

/// `bDeviceClass` of hubs: plumbing rather than hardware anyone asks to use, so not listed.
const HUB_CLASS: u8 = 0x09;

/// USB devices of this machine (hubs excluded), sorted by id; empty when there is no USB
/// bus or it cannot be read.
///
/// nusb 0.2 enumerates through `MaybeFuture`; awaiting it needs one of nusb's runtime
/// features on some platforms (and panics without), while `wait` runs the same enumeration
/// inline everywhere, so this is synchronous like the other listers.
pub fn list_usb() -> Vec<HardwareDevice> {
    let Ok(devices) = nusb::list_devices().wait() else {
        return Vec::new();
    };
    finish(
        devices
            .take(MAX_SCANNED)
            .filter(|info| info.class() != HUB_CLASS)
            .map(|info| {
                usb_device(
                    device_id(&info),
                    info.vendor_id(),
                    info.product_id(),
                    [
                        info.serial_number(),
                        info.manufacturer_string(),
                        info.product_string(),
                    ],
                )
            })
            .collect(),
    )
}

/// The bus and port chain (`1-1.2`, the same as the Linux sysfs name), stable across
/// replugging into the same port.
#[cfg(any(target_os = "linux", target_os = "macos", target_os = "windows"))]
fn device_id(info: &DeviceInfo) -> String {
    let chain: Vec<String> = info.port_chain().iter().map(u8::to_string).collect();
    let id = if chain.is_empty() {
        format!("{}-addr{}", info.bus_id(), info.device_address())
    } else {
        format!("{}-{}", info.bus_id(), chain.join("."))
    };
    clean(&id).unwrap_or_else(|| vid_pid(info.vendor_id(), info.product_id()))
}

/// Elsewhere nusb exposes no location, so the ids are all there is (and may repeat).
#[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "windows")))]
fn device_id(info: &DeviceInfo) -> String {
    vid_pid(info.vendor_id(), info.product_id())
}

fn vid_pid(vid: u16, pid: u16) -> String {
    format!("{}:{}", format_id(vid), format_id(pid))
}

/// One USB device from its ids and its `[serial, manufacturer, product]` strings.
pub(super) fn usb_device(
    id: String,
    vid: u16,
    pid: u16,
    [serial, manufacturer, product]: [Option<&str>; 3],
) -> HardwareDevice {
    let mut device = HardwareDevice::new(HardwareKind::Usb, id, String::new());
    device.vid = Some(format_id(vid));
    device.pid = Some(format_id(pid));
    device.serial_number = serial.and_then(clean);
    device.manufacturer = manufacturer.and_then(clean);
    device.product = product.and_then(clean);
    device.desc = describe(
        &[device.product.as_ref(), device.manufacturer.as_ref()],
        &format!("USB device {}", vid_pid(vid, pid)),
    );
    device
}
