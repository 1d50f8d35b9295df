//! Tests of `problem`.

use super::*;

/// The message is one sentence a person can act on: no dump of a library's innards, no
/// line break, and the remedy named.
fn assert_readable(problem: &Problem, remedy: &str) {
    let message = problem.message();
    for noise in ["{", "Os {", "Error(", "\n", "ZBus", "os error"] {
        assert!(!message.contains(noise), "{noise:?} in {message:?}");
    }
    assert!(message.contains(remedy), "no {remedy:?} in {message:?}");
    assert_eq!(problem.report(false), format!("msguide-desktop: {message}"));
    if let Some(detail) = problem.detail() {
        assert!(problem.report(true).ends_with(&format!("detail: {detail}")));
    }
}

#[test]
fn a_bus_address_whose_socket_is_gone_is_no_bus() {
    let dir = std::env::temp_dir();
    let there = dir.display().to_string();
    let gone = dir.join(format!("no-bus-{}", std::process::id()));
    let gone = gone.display();
    assert!(!bus_may_be_there(""));
    assert!(!bus_may_be_there(&format!("unix:path={gone}")));
    assert!(!bus_may_be_there(&format!("unix:path={gone},guid=0123")));
    // A path that exists, an abstract socket or TCP may be a bus.
    assert!(bus_may_be_there(&format!("unix:path={there}")));
    assert!(bus_may_be_there(&format!(
        "unix:path={gone};unix:path={there}"
    )));
    assert!(bus_may_be_there("unix:abstract=/tmp/dbus-x,guid=1"));
    assert!(bus_may_be_there("tcp:host=127.0.0.1,port=1"));
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn no_accessibility_bus_names_the_package_and_the_command_that_fix_it() {
    let missing = std::env::temp_dir().join(format!("no-bus-{}", std::process::id()));
    let address = format!("unix:path={}", missing.display());
    let Err(err) = zbus::connection::Builder::address(address.as_str())
        .unwrap()
        .build()
        .await
    else {
        panic!("a bus answered at {address}");
    };
    let err = ObserveError::Accessibility(A11yError::Unavailable(
        atspi::AtspiError::from(err).to_string(),
    ));
    let detail = Some(err.to_string());
    // A session bus but no AT-SPI bus: the package and the command that fix it.
    let problem = Problem::accessibility(true, detail.clone());
    assert_readable(&problem, "install it with `sudo apt install at-spi2-core`");
    assert!(problem.message().contains("AT-SPI"));
    // The library's words are kept for --verbose.
    assert!(problem.detail().unwrap().contains("ZBus"), "{problem:?}");
    // No session bus at all: `msguide start` starts one.
    let problem = Problem::accessibility(false, detail);
    assert_readable(
        &problem,
        "start MSGuide with `msguide start`, which starts one",
    );
    assert!(
        problem
            .message()
            .contains("sudo apt install dbus at-spi2-core")
    );
    // Problem::observe picks one of the two.
    let chosen = Problem::observe(&err, Display::X11);
    assert!(
        [true, false]
            .map(|bus| Problem::accessibility(bus, chosen.detail().map(str::to_owned)))
            .contains(&chosen),
        "{chosen:?}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn no_display_says_to_run_inside_the_desktop_session() {
    let Err(err) = x11rb::connect(Some(":59123")) else {
        panic!("display :59123 exists");
    };
    let err = ObserveError::WindowList(err.to_string());
    let problem = Problem::observe(&err, Display::None);
    assert_readable(&problem, "run msguide-desktop inside your desktop session");
    assert!(
        problem
            .message()
            .starts_with("No display: DISPLAY is not set")
    );
    // A display that is set but unusable gets the window-manager advice instead.
    let problem = Problem::observe(&err, Display::X11);
    assert_readable(&problem, "with a window manager running");
}

#[test]
fn window_classes_name_what_to_do() {
    for (err, remedy) in [
        (ObserveError::NoSuchWindow, "check the title"),
        (ObserveError::Minimised, "restore it"),
        (ObserveError::Untitled, "pick a window with a title"),
        (ObserveError::BadSize, "resize it"),
        (
            ObserveError::Accessibility(A11yError::WindowNotFound),
            "supports accessibility",
        ),
        (
            ObserveError::Accessibility(A11yError::Unsupported),
            "on Linux",
        ),
        (
            ObserveError::Pixels("Window(Xcb(ConnectionError { .. }))".to_owned()),
            "without sharing pixels",
        ),
        (
            ObserveError::PixelsNotAllowed("the compositor does not say where it is".to_owned()),
            "without sharing pixels",
        ),
        (
            ObserveError::PixelsNeedDesktopEntry,
            "press Allow pixels (or run `msguide-desktop allow-pixels`)",
        ),
    ] {
        assert_readable(&Problem::observe(&err, Display::X11), remedy);
    }
    // Only KWin's refusal offers the button that writes the entry.
    let kde = Problem::observe(&ObserveError::PixelsNeedDesktopEntry, Display::Wayland);
    assert_eq!(kde.remedy(), Some(Remedy::AllowPixels));
    let other = ObserveError::PixelsNotAllowed("GNOME".to_owned());
    assert_eq!(Problem::observe(&other, Display::Wayland).remedy(), None);
    let Err(png) = local_core::guide::png_sanitise::sanitise_png(b"not a png") else {
        panic!("garbage sanitised");
    };
    assert_readable(
        &Problem::observe(&ObserveError::Image(png), Display::X11),
        "without sharing pixels",
    );
}

#[tokio::test]
async fn api_not_running_says_to_start_it() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client =
        crate::api::ApiClient::new(&format!("http://127.0.0.1:{port}"), "t".to_owned()).unwrap();
    let err = client.health().await.unwrap_err();
    assert!(matches!(err, ApiError::Unreachable { .. }), "{err:?}");
    let problem = Problem::api(&err);
    assert_readable(&problem, "start it with `msguide start`");
    assert!(
        problem
            .message()
            .contains(&format!("at http://127.0.0.1:{port}:"))
    );
    // The cause behind reqwest's summary is in the detail.
    let detail = problem.detail().unwrap().to_ascii_lowercase();
    assert!(detail.contains("refused"), "{detail}");
}

#[test]
fn api_refusals_name_what_to_do() {
    for (err, remedy) in [
        (ApiError::NoToken, "`msguide start`"),
        (
            ApiError::BadUrl("https://example.com".to_owned()),
            "or unset it",
        ),
        (
            ApiError::Http {
                status: 401,
                detail: "Unauthorized".to_owned(),
            },
            "the token was refused, so restart with `msguide start`",
        ),
        (
            ApiError::Http {
                status: 502,
                detail: "Bad Gateway".to_owned(),
            },
            "diagnostic log",
        ),
        (ApiError::TooLarge, "same release"),
        (
            ApiError::BadAnswer("missing field `status`".to_owned()),
            "same release",
        ),
    ] {
        assert_readable(&Problem::api(&err), remedy);
    }
}

#[test]
fn a_worker_that_cannot_start_says_what_to_try() {
    let err = std::io::Error::from(std::io::ErrorKind::OutOfMemory);
    assert_readable(&Problem::runtime(&err), "close some programs");
}

#[test]
fn a_window_list_that_failed_once_is_not_called_unavailable() {
    let err = ObserveError::WindowListFailed("KWin's script did not answer within 5 s".to_owned());
    for display in [Display::Wayland, Display::X11] {
        let problem = Problem::observe(&err, display);
        assert_readable(&problem, "try again");
        assert!(
            !problem.message().contains("does not let programs list"),
            "{problem:?}"
        );
    }
}
