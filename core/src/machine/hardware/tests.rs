//! Tests against fake sysfs and `/dev` trees laid out like the kernel's, symlinks included
//! (hence Unix only).
#![cfg(unix)]

use std::{
    cmp::Ordering,
    fs,
    path::{Component, Path, PathBuf},
};

use serde_json::json;

use super::{
    HardwareDevice, HardwareKind, MAX_DEVICES_PER_KIND, MAX_STRING_CHARS, clean, hex_id, list_all,
    list_all_async, list_gpio, list_gpio_in, list_serial, list_serial_in, list_usb, natural_cmp,
    serial::from_port_info, summarise, usb::usb_device,
};

/// A scratch directory removed on drop.
struct Fake {
    root: PathBuf,
}

impl Fake {
    fn new() -> Self {
        let root = std::env::temp_dir().join(format!("hardware-test-{}", uuid::Uuid::new_v4()));
        fs::create_dir_all(&root).unwrap();
        Self { root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn sys(&self) -> PathBuf {
        self.path("sys")
    }

    fn dev(&self) -> PathBuf {
        self.path("dev")
    }

    fn dir(&self, rel: &str) {
        fs::create_dir_all(self.path(rel)).unwrap();
    }

    fn file(&self, rel: &str, contents: &str) {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, contents).unwrap();
    }

    /// A relative symlink at `at` to `target`, both relative to the root, as sysfs makes them.
    fn link(&self, at: &str, target: &str) {
        let at_path = self.path(at);
        fs::create_dir_all(at_path.parent().unwrap()).unwrap();
        let depth = Path::new(at)
            .parent()
            .unwrap()
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count();
        let relative: PathBuf = std::iter::repeat_n(Path::new(".."), depth)
            .collect::<PathBuf>()
            .join(target);
        std::os::unix::fs::symlink(relative, at_path).unwrap();
    }

    /// A tty class directory under `parent`, its `device` link and the class entry.
    fn tty(&self, name: &str, parent: &str, device: Option<&str>) {
        let dir = format!("{parent}/tty/{name}");
        self.dir(&dir);
        if let Some(device) = device {
            self.link(&format!("{dir}/device"), device);
        }
        self.link(&format!("sys/class/tty/{name}"), &dir);
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

const FTDI: &str = "sys/devices/pci0000:00/0000:00:14.0/usb1/1-1";
const ARDUINO: &str = "sys/devices/pci0000:00/0000:00:14.0/usb1/1-2";
const SNEAKY: &str = "sys/devices/pci0000:00/0000:00:14.0/usb1/1-3";
const PNP_PORT: &str = "sys/devices/pnp0/00:00/00:00:0/00:00:0.0";
const LEGACY_PORT: &str = "sys/devices/platform/serial8250/serial8250:0/serial8250:0.1";
const NO_TYPE_PORT: &str = "sys/devices/platform/serial8250/serial8250:0/serial8250:0.2";

/// A machine with an FTDI adapter, an Arduino, a real 16550 port, placeholder 8250 ports,
/// a virtual console and several entries that must be skipped.
fn serial_tree() -> Fake {
    let fake = Fake::new();
    for driver in ["usb/drivers/ftdi_sio", "usb-serial/drivers/ftdi_sio"] {
        fake.dir(&format!("sys/bus/{driver}"));
    }
    fake.dir("sys/bus/usb/drivers/cdc_acm");
    fake.dir("sys/bus/serial-base/drivers/port");

    // ttyUSB0: usb-serial port device below the interface below the USB device.
    fake.file(&format!("{FTDI}/idVendor"), "0403\n");
    fake.file(&format!("{FTDI}/idProduct"), "6001\n");
    fake.file(&format!("{FTDI}/serial"), "A50285BI\n");
    fake.file(&format!("{FTDI}/manufacturer"), "FTDI\n");
    fake.file(&format!("{FTDI}/product"), "FT232R USB UART\n");
    let ftdi_if = format!("{FTDI}/1-1:1.0");
    fake.link(&format!("{ftdi_if}/driver"), "sys/bus/usb/drivers/ftdi_sio");
    let ftdi_port = format!("{ftdi_if}/ttyUSB0");
    fake.link(
        &format!("{ftdi_port}/driver"),
        "sys/bus/usb-serial/drivers/ftdi_sio",
    );
    fake.tty("ttyUSB0", &ftdi_port, Some(&ftdi_port));
    // ttyUSB9 shares the sysfs entry but has no device node.
    fake.link("sys/class/tty/ttyUSB9", &format!("{ftdi_port}/tty/ttyUSB0"));

    // ttyACM0: tty directly below the interface; no product string, padded serial.
    fake.file(&format!("{ARDUINO}/idVendor"), "2341\n");
    fake.file(&format!("{ARDUINO}/idProduct"), "0043\n");
    fake.file(&format!("{ARDUINO}/serial"), "  7573530303035\t\n");
    fake.file(
        &format!("{ARDUINO}/manufacturer"),
        "Arduino (www.arduino.cc)\n",
    );
    let acm_if = format!("{ARDUINO}/1-2:1.0");
    fake.link(&format!("{acm_if}/driver"), "sys/bus/usb/drivers/cdc_acm");
    fake.tty("ttyACM0", &acm_if, Some(&acm_if));
    // ttyACM1: its interface has no driver bound.
    let unbound_if = format!("{ARDUINO}/1-2:1.2");
    fake.dir(&unbound_if);
    fake.tty("ttyACM1", &unbound_if, Some(&unbound_if));

    // ttyUSB4: its USB device's idVendor is a link out of sysfs, so no USB details are read.
    fake.file("outside/vid", "dead\n");
    fake.link(&format!("{SNEAKY}/idVendor"), "outside/vid");
    fake.file(&format!("{SNEAKY}/idProduct"), "beef\n");
    fake.file(&format!("{SNEAKY}/product"), "Sneaky\n");
    let sneaky_port = format!("{SNEAKY}/1-3:1.0/ttyUSB4");
    fake.link(
        &format!("{sneaky_port}/driver"),
        "sys/bus/usb-serial/drivers/ftdi_sio",
    );
    fake.tty("ttyUSB4", &sneaky_port, Some(&sneaky_port));

    // ttyUSB2: the class entry leads out of sysfs altogether.
    let escaped = "outside/usbdev/1-9:1.0/ttyUSB2";
    fake.file("outside/usbdev/idVendor", "1234\n");
    fake.file("outside/usbdev/idProduct", "5678\n");
    fake.dir("outside/driver");
    fake.link(&format!("{escaped}/driver"), "outside/driver");
    fake.dir(&format!("{escaped}/tty/ttyUSB2"));
    fake.link(&format!("{escaped}/tty/ttyUSB2/device"), escaped);
    fake.link("sys/class/tty/ttyUSB2", &format!("{escaped}/tty/ttyUSB2"));

    // ttyUSB1: a stale entry with no device.
    fake.tty("ttyUSB1", "sys/devices/virtual/tty", None);

    // ttyS0: a probed 16550A on PNP, as kernels with serial-base lay it out.
    fake.link(
        &format!("{PNP_PORT}/driver"),
        "sys/bus/serial-base/drivers/port",
    );
    fake.tty("ttyS0", PNP_PORT, Some(PNP_PORT));
    fake.file(&format!("{PNP_PORT}/tty/ttyS0/type"), "4\n");
    // ttyS1: a placeholder 8250 port, UART type 0.
    fake.link(
        &format!("{LEGACY_PORT}/driver"),
        "sys/bus/serial-base/drivers/port",
    );
    fake.tty("ttyS1", LEGACY_PORT, Some(LEGACY_PORT));
    fake.file(&format!("{LEGACY_PORT}/tty/ttyS1/type"), "0\n");
    // ttyS2: no type attribute to tell it from a placeholder.
    fake.link(
        &format!("{NO_TYPE_PORT}/driver"),
        "sys/bus/serial-base/drivers/port",
    );
    fake.tty("ttyS2", NO_TYPE_PORT, Some(NO_TYPE_PORT));

    // tty1: a virtual console, no device.
    fake.tty("tty1", "sys/devices/virtual/tty", None);

    for node in [
        "ttyUSB0", "ttyUSB1", "ttyUSB2", "ttyUSB4", "ttyACM0", "ttyACM1", "ttyS0", "ttyS1",
        "ttyS2", "tty1",
    ] {
        fake.file(&format!("dev/{node}"), "");
    }
    fake
}

#[test]
fn serial_scan_reports_real_ports_with_usb_details() {
    let fake = serial_tree();
    let ports = list_serial_in(&fake.sys(), &fake.dev());
    let ids: Vec<&str> = ports.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["ttyACM0", "ttyS0", "ttyUSB0", "ttyUSB4"]);
    assert!(ports.iter().all(|p| p.kind == HardwareKind::Serial));

    let dev = fake.dev();
    let port_of = |name: &str| dev.join(name).to_str().unwrap().to_owned();
    assert_eq!(
        serde_json::to_value(&ports).unwrap(),
        json!([
            {
                "type": "serial",
                "id": "ttyACM0",
                "port": port_of("ttyACM0"),
                "vid": "2341",
                "pid": "0043",
                "desc": "Arduino (www.arduino.cc)",
                "serial_number": "7573530303035",
                "manufacturer": "Arduino (www.arduino.cc)"
            },
            {"type": "serial", "id": "ttyS0", "port": port_of("ttyS0"), "desc": "ttyS0"},
            {
                "type": "serial",
                "id": "ttyUSB0",
                "port": port_of("ttyUSB0"),
                "vid": "0403",
                "pid": "6001",
                "desc": "FT232R USB UART",
                "serial_number": "A50285BI",
                "manufacturer": "FTDI",
                "product": "FT232R USB UART"
            },
            {"type": "serial", "id": "ttyUSB4", "port": port_of("ttyUSB4"), "desc": "ttyUSB4"}
        ])
    );
}

#[test]
fn serial_scan_without_sysfs_is_empty() {
    let fake = Fake::new();
    assert!(list_serial_in(&fake.path("missing"), &fake.dev()).is_empty());
    fake.dir("sys");
    assert!(list_serial_in(&fake.sys(), &fake.dev()).is_empty());
}

/// GPIO chips labelled in each of the three sysfs places, one with a misleading legacy
/// entry, and entries of `/dev` that are not chips.
fn gpio_tree() -> Fake {
    let fake = Fake::new();
    let soc = "sys/devices/platform/soc";

    // gpiochip0: labelled through the per-chip class entry of newer kernels.
    let chip0 = format!("{soc}/fe200000.gpio/gpiochip0");
    fake.dir(&chip0);
    fake.link("sys/bus/gpio/devices/gpiochip0", &chip0);
    fake.file(&format!("{chip0}/chip0/label"), "pinctrl-bcm2711\n");
    fake.link("sys/class/gpio/chip0", &format!("{chip0}/chip0"));

    // gpiochip1: labelled through a legacy entry that really is its own.
    let chip1 = format!("{soc}/soc:firmware/soc:firmware:gpio/gpiochip1");
    fake.dir(&chip1);
    fake.link("sys/bus/gpio/devices/gpiochip1", &chip1);
    let legacy1 = format!("{chip1}/gpio/gpiochip1");
    fake.file(&format!("{legacy1}/label"), "raspberrypi-exp-gpio\n");
    fake.link(&format!("{legacy1}/device"), &chip1);
    fake.link("sys/class/gpio/gpiochip1", &legacy1);

    // gpiochip2: `class/gpio/gpiochip2` is chip 0's legacy entry (its first GPIO is 2).
    let chip2 = format!("{soc}/other.gpio/gpiochip2");
    fake.dir(&chip2);
    fake.link("sys/bus/gpio/devices/gpiochip2", &chip2);
    let legacy0 = format!("{chip0}/gpio/gpiochip2");
    fake.file(&format!("{legacy0}/label"), "not chip 2\n");
    fake.link(&format!("{legacy0}/device"), &chip0);
    fake.link("sys/class/gpio/gpiochip2", &legacy0);

    // gpiochip3: a label on the bus device, with noise to clean.
    let chip3 = format!("{soc}/expander/gpiochip3");
    fake.file(&format!("{chip3}/label"), "  i2c\u{7}-expander \n");
    fake.link("sys/bus/gpio/devices/gpiochip3", &chip3);

    // gpiochip10: an overlong label.
    let chip10 = format!("{soc}/long/gpiochip10");
    fake.file(&format!("{chip10}/label"), &"x".repeat(300));
    fake.link("sys/bus/gpio/devices/gpiochip10", &chip10);

    for node in [
        "gpiochip0",
        "gpiochip1",
        "gpiochip2",
        "gpiochip3",
        "gpiochip10",
    ] {
        fake.file(&format!("dev/{node}"), "");
    }
    fake.file("dev/gpiochipX", "");
    fake.file("dev/gpiochip", "");
    fake.dir("dev/gpiochip4");
    fake.link("dev/gpiochip5", "dev/gpiochip0");
    fake
}

#[test]
fn gpio_scan_lists_chips_with_labels() {
    let fake = gpio_tree();
    let chips = list_gpio_in(&fake.sys(), &fake.dev());
    let summary: Vec<(&str, &str)> = chips
        .iter()
        .map(|c| (c.id.as_str(), c.desc.as_str()))
        .collect();
    let long = "x".repeat(MAX_STRING_CHARS);
    assert_eq!(
        summary,
        [
            ("gpiochip0", "pinctrl-bcm2711"),
            ("gpiochip1", "raspberrypi-exp-gpio"),
            ("gpiochip2", "gpiochip2"),
            ("gpiochip3", "i2c-expander"),
            ("gpiochip10", long.as_str()),
        ]
    );
    let path = fake.dev().join("gpiochip0").to_str().unwrap().to_owned();
    assert_eq!(
        serde_json::to_value(&chips[0]).unwrap(),
        json!({"type": "gpio", "id": "gpiochip0", "path": path, "desc": "pinctrl-bcm2711"})
    );
}

#[test]
fn gpio_scan_is_capped_and_sorted_numerically() {
    let fake = Fake::new();
    for n in 0..300 {
        fake.file(&format!("dev/gpiochip{n}"), "");
    }
    let chips = list_gpio_in(&fake.path("no-sysfs"), &fake.dev());
    assert_eq!(chips.len(), MAX_DEVICES_PER_KIND);
    let expected: Vec<String> = (0..MAX_DEVICES_PER_KIND)
        .map(|n| format!("gpiochip{n}"))
        .collect();
    let ids: Vec<&String> = chips.iter().map(|c| &c.id).collect();
    assert_eq!(ids, expected.iter().collect::<Vec<_>>());
    assert!(chips.iter().all(|c| c.desc == c.id));
}

#[test]
fn usb_devices_map_ids_and_strings() {
    let device = usb_device(
        "1-1.2".to_owned(),
        0x2341,
        0x0043,
        [
            None,
            Some("Arduino (www.arduino.cc)"),
            Some(" Arduino Uno\0"),
        ],
    );
    assert_eq!(
        serde_json::to_value(&device).unwrap(),
        json!({
            "type": "usb",
            "id": "1-1.2",
            "vid": "2341",
            "pid": "0043",
            "desc": "Arduino Uno",
            "manufacturer": "Arduino (www.arduino.cc)",
            "product": "Arduino Uno"
        })
    );
    let bare = usb_device("3-4".to_owned(), 0xABCD, 0x1, [Some("  "), None, None]);
    assert_eq!(bare.desc, "USB device abcd:0001");
    assert_eq!(bare.serial_number, None);
}

#[test]
fn serialport_ports_map_to_serial_devices() {
    let pci = from_port_info(serialport::SerialPortInfo {
        port_name: "COM3".to_owned(),
        port_type: serialport::SerialPortType::PciPort,
    })
    .unwrap();
    assert_eq!(
        serde_json::to_value(&pci).unwrap(),
        json!({"type": "serial", "id": "COM3", "port": "COM3", "desc": "COM3"})
    );
    let mac = from_port_info(serialport::SerialPortInfo {
        port_name: "/dev/cu.usbserial-1410".to_owned(),
        port_type: serialport::SerialPortType::Unknown,
    })
    .unwrap();
    assert_eq!(mac.id, "cu.usbserial-1410");
    assert_eq!(mac.port.as_deref(), Some("/dev/cu.usbserial-1410"));
    let overlong = serialport::SerialPortInfo {
        port_name: "x".repeat(MAX_STRING_CHARS + 1),
        port_type: serialport::SerialPortType::Unknown,
    };
    assert_eq!(from_port_info(overlong), None);
}

#[test]
fn summary_advertises_only_kinds_with_devices() {
    let serial = serial_tree();
    let gpio = gpio_tree();
    let mut devices = list_gpio_in(&gpio.sys(), &gpio.dev());
    devices.extend(list_serial_in(&serial.sys(), &serial.dev()));

    let (listed, capabilities) = summarise(devices.clone());
    assert_eq!(capabilities, ["hardware_serial", "hardware_gpio"]);
    let kinds: Vec<HardwareKind> = listed.iter().map(|d| d.kind).collect();
    assert_eq!(kinds.first(), Some(&HardwareKind::Serial));
    assert_eq!(kinds.last(), Some(&HardwareKind::Gpio));
    assert!(kinds.is_sorted());

    devices.push(usb_device("1-1".to_owned(), 1, 2, [None; 3]));
    devices.extend(devices.clone());
    let (listed, capabilities) = summarise(devices);
    assert_eq!(
        capabilities,
        ["hardware_serial", "hardware_usb", "hardware_gpio"]
    );
    assert_eq!(listed.len(), 4 + 1 + 5, "duplicates are dropped");
    assert_eq!(summarise(Vec::new()), (Vec::new(), Vec::new()));
}

#[test]
fn kinds_name_their_capabilities() {
    let names: Vec<(&str, &str)> = HardwareKind::ALL
        .iter()
        .map(|k| (k.as_str(), k.capability()))
        .collect();
    assert_eq!(
        names,
        [
            ("serial", "hardware_serial"),
            ("usb", "hardware_usb"),
            ("gpio", "hardware_gpio"),
        ]
    );
    for kind in HardwareKind::ALL {
        assert_eq!(serde_json::to_value(kind).unwrap(), json!(kind.as_str()));
    }
}

#[test]
fn strings_and_ids_are_normalised() {
    assert_eq!(clean("  a\tb\u{1b}c \n").as_deref(), Some("abc"));
    assert_eq!(clean(" \n\t"), None);
    assert_eq!(
        clean(&"é".repeat(300)).map(|s| s.chars().count()),
        Some(256)
    );
    assert_eq!(hex_id("0403\n").as_deref(), Some("0403"));
    assert_eq!(hex_id("ABCD").as_deref(), Some("abcd"));
    assert_eq!(hex_id("1").as_deref(), Some("0001"));
    for bad in ["", "12345", "+123", "xyz"] {
        assert_eq!(hex_id(bad), None, "{bad:?}");
    }
}

#[test]
fn natural_order_compares_numbers_by_value() {
    let mut names = vec!["ttyS10", "ttyUSB0", "ttyS2", "ttyACM0", "ttyS02", "ttyS"];
    names.sort_by(|a, b| natural_cmp(a, b));
    assert_eq!(
        names,
        ["ttyACM0", "ttyS", "ttyS02", "ttyS2", "ttyS10", "ttyUSB0"]
    );
    assert_eq!(natural_cmp("1-1.10", "1-1.9"), Ordering::Greater);
    assert_eq!(natural_cmp("a", "a"), Ordering::Equal);
}

#[test]
fn disabled_lists_nothing() {
    assert_eq!(list_all(false), (Vec::new(), Vec::new()));
}

#[test]
fn real_machine_listing_returns() {
    let _: Vec<HardwareDevice> = list_usb();
    let _: Vec<HardwareDevice> = list_serial();
    let _: Vec<HardwareDevice> = list_gpio();
    let (devices, capabilities) = list_all(true);
    assert!(capabilities.len() <= HardwareKind::ALL.len());
    assert!(capabilities.is_empty() || !devices.is_empty());
}

#[tokio::test]
async fn async_listing_returns() {
    assert_eq!(list_all_async(false).await, (Vec::new(), Vec::new()));
    let (devices, capabilities) = list_all_async(true).await;
    assert!(capabilities.is_empty() || !devices.is_empty());
}
