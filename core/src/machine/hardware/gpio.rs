//! GPIO chips: the `gpiochip<n>` character devices, labelled from sysfs.
//!
//! The label normally comes from the chip-info ioctl, which needs `unsafe`; sysfs has it
//! too, in one of three places depending on the kernel. In lookup order:
//! 1. `<sys>/bus/gpio/devices/gpiochip<n>/label`;
//! 2. `<sys>/class/gpio/chip<n>/label`, the per-chip entry newer kernels add;
//! 3. `<sys>/class/gpio/gpiochip<m>/label`, the legacy entry, which is named after the chip's
//!    first GPIO number rather than its index: `gpiochip<n>` there may belong to another chip,
//!    so it is used only when its `device` link is chip `n`'s device or that device's parent
//!    (older kernels hang it off the parent; two chips of one controller stay ambiguous there).
//!
//! Without a label the description is the chip name.

use std::path::Path;

use super::{
    HardwareDevice, HardwareKind, finish,
    sysfs::{SysRoot, entry_names, is_device_node, node_text, numbered},
};

/// GPIO chips of this machine, sorted by number; empty off Linux.
pub fn list_gpio() -> Vec<HardwareDevice> {
    if cfg!(any(target_os = "linux", target_os = "android")) {
        list_gpio_in(Path::new("/sys"), Path::new("/dev"))
    } else {
        Vec::new()
    }
}

/// The `gpiochip<n>` character devices directly in `dev_root`, labelled from `sys_root`.
pub fn list_gpio_in(sys_root: &Path, dev_root: &Path) -> Vec<HardwareDevice> {
    let sys = SysRoot::new(sys_root);
    let devices = entry_names(dev_root)
        .into_iter()
        .filter(|name| numbered(name, "gpiochip"))
        .filter_map(|name| {
            let node = dev_root.join(&name);
            if !is_device_node(&node) {
                return None;
            }
            let label = sys.as_ref().and_then(|sys| label(sys, sys_root, &name));
            let mut chip = HardwareDevice::new(
                HardwareKind::Gpio,
                name.clone(),
                label.unwrap_or_else(|| name.clone()),
            );
            chip.path = Some(node_text(&node)?);
            Some(chip)
        })
        .collect();
    finish(devices)
}

fn label(sys: &SysRoot, sys_root: &Path, name: &str) -> Option<String> {
    let bus_device = sys_root.join("bus").join("gpio").join("devices").join(name);
    let class = sys_root.join("class").join("gpio");
    if let Some(label) = sys.attribute(&bus_device, "label") {
        return Some(label);
    }
    let index = name.strip_prefix("gpiochip")?;
    if let Some(label) = sys.attribute(&class.join(format!("chip{index}")), "label") {
        return Some(label);
    }
    let legacy = class.join(name);
    let owner = sys.resolve(&legacy.join("device"))?;
    let chip = sys.resolve(&bus_device)?;
    (owner == chip || chip.parent() == Some(owner.as_path()))
        .then(|| sys.attribute(&legacy, "label"))
        .flatten()
}
