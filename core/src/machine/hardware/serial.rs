//! Serial ports: a sysfs scan on Linux (serialport is built without libudev), serialport's
//! enumeration elsewhere.
//!
//! # Which ttys count (Linux)
//!
//! A `/sys/class/tty/<name>` entry is reported when all of these hold:
//! - `<name>` is `ttyUSB<n>`, `ttyACM<n>`, `ttyAMA<n>` or `ttyS<n>` (other ttys are consoles,
//!   pseudo-terminals or drivers we have not seen);
//! - its `device` link resolves under the sysfs root and that device has a `driver` link
//!   (virtual consoles such as `tty1` have no `device` at all);
//! - its `type` attribute, the serial core's UART type, is not `0` (`PORT_UNKNOWN`): the 8250
//!   driver registers placeholder `ttyS<n>` ports whether or not a UART answered probing,
//!   and only those with a probed UART have a non-zero type. A `ttyS<n>` without a readable
//!   type is skipped too, since it cannot be told apart from a placeholder;
//! - `<dev_root>/<name>` is a character device.
//!
//! USB details come from the nearest ancestor of the device with an `idVendor` attribute
//! (the USB device itself: `ttyUSB` sits two levels below it, `ttyACM` one).

use std::path::{Path, PathBuf};

use super::{
    HardwareDevice, HardwareKind, describe, finish, hex_id,
    sysfs::{SysRoot, entry_names, is_device_node, node_text, numbered},
};

/// Name families of real serial ports.
const SERIAL_PREFIXES: [&str; 4] = ["ttyUSB", "ttyACM", "ttyAMA", "ttyS"];

/// How far up from a tty's device to look for its USB device.
const MAX_USB_ANCESTORS: usize = 6;

/// Serial ports of this machine, sorted by name; empty when none can be listed.
pub fn list_serial() -> Vec<HardwareDevice> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        list_serial_in(Path::new("/sys"), Path::new("/dev"))
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let Ok(ports) = serialport::available_ports() else {
            return Vec::new();
        };
        finish(
            ports
                .into_iter()
                .take(super::MAX_SCANNED)
                .filter_map(from_port_info)
                .collect(),
        )
    }
}

/// Serial ports found by scanning `<sys_root>/class/tty`, with device nodes under
/// `dev_root`; see the module documentation for which ttys count.
pub fn list_serial_in(sys_root: &Path, dev_root: &Path) -> Vec<HardwareDevice> {
    let Some(sys) = SysRoot::new(sys_root) else {
        return Vec::new();
    };
    let class = sys_root.join("class").join("tty");
    let devices = entry_names(&class)
        .into_iter()
        .filter(|name| SERIAL_PREFIXES.iter().any(|p| numbered(name, p)))
        .filter_map(|name| serial_port(&sys, &class, dev_root, &name))
        .collect();
    finish(devices)
}

fn serial_port(sys: &SysRoot, class: &Path, dev_root: &Path, name: &str) -> Option<HardwareDevice> {
    let node = dev_root.join(name);
    if !is_device_node(&node) {
        return None;
    }
    let tty = sys.resolve(&class.join(name))?;
    let device = sys.resolve(&tty.join("device"))?;
    sys.resolve(&device.join("driver"))?;
    let uart_type = sys
        .attribute(&tty, "type")
        .and_then(|t| t.parse::<u32>().ok());
    match uart_type {
        Some(0) => return None,
        None if numbered(name, "ttyS") => return None,
        _ => {}
    }

    let mut port = HardwareDevice::new(HardwareKind::Serial, name.to_owned(), String::new());
    port.port = Some(node_text(&node)?);
    if let Some(usb) = usb_ancestor(sys, &device) {
        port.vid = sys.attribute(&usb, "idVendor").and_then(|v| hex_id(&v));
        port.pid = sys.attribute(&usb, "idProduct").and_then(|p| hex_id(&p));
        port.serial_number = sys.attribute(&usb, "serial");
        port.manufacturer = sys.attribute(&usb, "manufacturer");
        port.product = sys.attribute(&usb, "product");
    }
    port.desc = describe(&[port.product.as_ref(), port.manufacturer.as_ref()], name);
    Some(port)
}

/// The USB device directory above `device`, staying under the sysfs root.
fn usb_ancestor(sys: &SysRoot, device: &Path) -> Option<PathBuf> {
    device
        .ancestors()
        .take(MAX_USB_ANCESTORS)
        .take_while(|dir| sys.contains(dir))
        .find(|dir| {
            sys.attribute(dir, "idVendor")
                .is_some_and(|v| hex_id(&v).is_some())
        })
        .map(Path::to_path_buf)
}

/// One port from serialport's enumeration (everywhere but Linux, and in tests).
#[cfg(any(not(any(target_os = "linux", target_os = "android")), test))]
pub(super) fn from_port_info(info: serialport::SerialPortInfo) -> Option<HardwareDevice> {
    use super::{clean, format_id};

    // A name that cleaning would change would no longer name the port.
    let port_name = clean(&info.port_name).filter(|name| *name == info.port_name)?;
    let id = Path::new(&port_name)
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(clean)
        .unwrap_or_else(|| port_name.clone());
    let mut port = HardwareDevice::new(HardwareKind::Serial, id, String::new());
    if let serialport::SerialPortType::UsbPort(usb) = info.port_type {
        port.vid = Some(format_id(usb.vid));
        port.pid = Some(format_id(usb.pid));
        port.serial_number = usb.serial_number.as_deref().and_then(clean);
        port.manufacturer = usb.manufacturer.as_deref().and_then(clean);
        port.product = usb.product.as_deref().and_then(clean);
    }
    port.desc = describe(
        &[port.product.as_ref(), port.manufacturer.as_ref()],
        &port.id,
    );
    port.port = Some(port_name);
    Some(port)
}
