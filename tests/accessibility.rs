//! A window's controls through the accessibility bus (AT-SPI), as a screen reader uses them:
//! the names of what a window shows, and its buttons pressed by their action. A compositor with
//! no seat (weston's headless backend) takes no input any other way.

use std::time::{Duration, Instant};

use atspi::{
    Role, State,
    proxy::{accessible::ObjectRefExt, proxy_ext::ProxyExt},
};

use crate::platform::WAIT;

/// The accessibility bus of the session bus at `session_bus`.
async fn connect(session_bus: &str) -> zbus::Connection {
    let session = zbus::connection::Builder::address(session_bus)
        .unwrap()
        .build()
        .await
        .expect("connect to the session bus");
    let reply = session
        .call_method(
            Some("org.a11y.Bus"),
            "/org/a11y/bus",
            Some("org.a11y.Bus"),
            "GetAddress",
            &(),
        )
        .await
        .expect("ask the session bus for the accessibility bus");
    let address: String = reply.body().deserialize().unwrap();
    zbus::connection::Builder::address(address.as_str())
        .unwrap()
        .build()
        .await
        .expect("connect to the accessibility bus")
}

/// One node below a top-level window: its name, role, whether it is enabled, and a reference to
/// act on it.
struct Node {
    name: String,
    role: Role,
    enabled: bool,
    at: atspi::ObjectRefOwned,
}

/// Every node of the top-level window named `window`, depth first; empty when no such window
/// is registered (yet).
async fn nodes(bus: &zbus::Connection, window: &str) -> Vec<Node> {
    let root = atspi::proxy::accessible::AccessibleProxy::builder(bus)
        .destination("org.a11y.atspi.Registry")
        .unwrap()
        .path("/org/a11y/atspi/accessible/root")
        .unwrap()
        .build()
        .await
        .unwrap();
    let mut found = Vec::new();
    let Ok(applications) = root.get_children().await else {
        return found;
    };
    let mut stack = Vec::new();
    for application in applications {
        let Ok(app) = application.as_accessible_proxy(bus).await else {
            continue;
        };
        for frame in app.get_children().await.unwrap_or_default() {
            let Ok(proxy) = frame.as_accessible_proxy(bus).await else {
                continue;
            };
            if proxy.name().await.is_ok_and(|name| name == window) {
                stack.push(frame);
            }
        }
    }
    while let Some(at) = stack.pop() {
        let Ok(proxy) = at.as_accessible_proxy(bus).await else {
            continue;
        };
        let children = proxy.get_children().await.unwrap_or_default();
        stack.extend(children.into_iter().rev());
        let (Ok(name), Ok(role), Ok(states)) = (
            proxy.name().await,
            proxy.get_role().await,
            proxy.get_state().await,
        ) else {
            continue;
        };
        found.push(Node {
            name,
            role,
            enabled: states.contains(State::Enabled) || states.contains(State::Sensitive),
            at,
        });
    }
    found
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Presses the control named `label` in the window `window` once it is there and enabled,
/// through its first action (a button's click), waiting up to [`WAIT`] for it.
pub fn press(session_bus: &str, window: &str, label: &str) {
    runtime().block_on(async {
        let bus = connect(session_bus).await;
        let deadline = Instant::now() + WAIT;
        loop {
            let all = nodes(&bus, window).await;
            if let Some(node) = all.iter().find(|n| n.name == label && n.enabled) {
                let action = node
                    .at
                    .as_accessible_proxy(&bus)
                    .await
                    .unwrap()
                    .proxies()
                    .await
                    .unwrap()
                    .action()
                    .await
                    .expect("the control has no action");
                assert!(
                    action.do_action(0).await.expect("press the control"),
                    "{label:?} in {window:?} refused its action"
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no enabled {label:?} in {window:?} within {WAIT:?}; it shows: {:?}",
                all.iter()
                    .map(|n| (n.role, n.name.as_str(), n.enabled))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

/// The names of what the window `window` shows now.
#[must_use]
pub fn names(session_bus: &str, window: &str) -> Vec<String> {
    runtime().block_on(async {
        let bus = connect(session_bus).await;
        nodes(&bus, window)
            .await
            .into_iter()
            .map(|node| node.name)
            .collect()
    })
}
