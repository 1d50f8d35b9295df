//! The desktop portal on a real headless GNOME (mutter, xdg-desktop-portal with its GNOME
//! backend, PipeWire): a RemoteDesktop session opened after the person answers the portal's
//! own dialog (through AT-SPI, `fixtures/portal_consent.py`), keys that reach a foot terminal
//! running `cat`, and a declined dialog answered PERMISSION_PENDING.

use std::process::Child;
use std::time::{Duration, Instant};

use e2e::portal_desktop::{PortalDesktop, START_DEADLINE};
use local_core::desktop::DesktopError;
use local_core::desktop::portal::{Event, Session};
use local_core::desktop::virtual_input::keysym;

/// The person's answer and what it printed.
fn answered(person: Child) -> String {
    let out = person.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the person could not answer: {said}");
    said
}

fn open(gnome: &PortalDesktop) -> std::thread::JoinHandle<Result<Session, DesktopError>> {
    let address = gnome.bus_address().to_owned();
    std::thread::spawn(move || Session::open(Some(address), None, START_DEADLINE))
}

#[test]
fn after_one_consent_the_portal_types_into_the_focused_window() {
    let mut gnome = PortalDesktop::gnome();
    let typed = gnome.dir().join("typed.txt");
    gnome.foot_cat(&typed);

    let opening = open(&gnome);
    let said = answered(gnome.person("share"));
    let session = opening
        .join()
        .unwrap()
        .unwrap_or_else(|err| panic!("{err}: {said}"));
    let streams = session.streams();
    assert_eq!(streams.len(), 1, "{streams:?}");
    assert_eq!(streams[0].position, (0, 0));
    assert_eq!(streams[0].size, (1280, 800));
    // Portal version 1 (xdg-desktop-portal 1.16) cannot keep a remote-desktop consent.
    assert_eq!(session.restore_token(), None);

    // mutter types only what its current layout (US here) has.
    let text = "hello portal 123\n";
    for c in text.chars() {
        for pressed in [true, false] {
            session
                .send(Event::Key {
                    keysym: keysym(c),
                    pressed,
                })
                .unwrap();
        }
    }
    // Accepted by the portal too: a point of the stream, and one outside every stream.
    let node = streams[0].node;
    session
        .send(Event::Motion {
            stream: node,
            x: 640.5,
            y: 400.0,
        })
        .unwrap();

    let deadline = Instant::now() + START_DEADLINE;
    loop {
        let got = std::fs::read_to_string(&typed).unwrap();
        if got == text {
            break;
        }
        assert!(Instant::now() < deadline, "typed {got:?}, sent {text:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_declined_dialog_is_permission_pending() {
    let gnome = PortalDesktop::gnome();
    let opening = open(&gnome);
    let said = answered(gnome.person("cancel"));
    let err = opening.join().unwrap().unwrap_err();
    assert_eq!(err.code(), "PERMISSION_PENDING", "{err}: {said}");
}
