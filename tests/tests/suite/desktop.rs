//! The private desktop the computer-use and desktop-client tests stand on: Xvfb answers at the
//! size asked for, openbox manages it, and the session bus answers.

use e2e::display::Desktop;

#[test]
fn a_private_desktop_has_a_display_a_window_manager_and_a_bus() {
    let desktop = Desktop::with_size(1280, 720);
    let info = desktop.command("xdpyinfo").output().unwrap();
    assert!(
        info.status.success(),
        "xdpyinfo failed on {}",
        desktop.display()
    );
    assert!(String::from_utf8_lossy(&info.stdout).contains("dimensions:    1280x720 pixels"));

    let wm = desktop
        .command("xprop")
        .args(["-root", "_NET_SUPPORTED"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&wm.stdout).contains("_NET_CLIENT_LIST"));

    let ping = desktop
        .command("dbus-send")
        .args([
            "--session",
            "--print-reply",
            "--dest=org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.GetId",
        ])
        .output()
        .unwrap();
    assert!(ping.status.success(), "the session bus did not answer");
}

#[test]
fn two_desktops_do_not_share_a_display() {
    let a = Desktop::with_size(640, 480);
    let b = Desktop::with_size(640, 480);
    assert_ne!(a.display(), b.display());
    assert_ne!(a.bus_address(), b.bus_address());
}
