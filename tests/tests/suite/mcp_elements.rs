//! `click_element` and `type_into_element` of `autogpt-shim mcp`, driven by the official MCP
//! Python SDK (`tests/mcp/elements.py`) on a private Xvfb desktop with AT-SPI, against the GTK
//! witness window: what the server says it did is checked against what the window received
//! and what the audit chain holds.
//!
//! X11 has no output scale, and Wayland compositors offer no window geometry for the
//! accessibility snapshot (docs/computer-use.md), so the scaled case here is the screenshot
//! scaled to `--max-image-edge` while element boxes, clicks and the pointer stay in screen
//! pixels.

use std::time::Duration;

use e2e::display::Desktop;
use e2e::witness::Witness;
use serde_json::{Value, json};

use super::mcp::{Place, desktop_env, has};

/// Typed into the witness's entry: ASCII, Latin-1 and a character no keyboard map has.
const TYPED: &str = "typed into an element ✓";

fn element_actions<'a>(records: &'a [Value], action: &'a str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["op"] == "ELEMENT_ACTION" && r["details"]["action"] == action)
        .collect()
}

#[test]
fn elements_of_a_snapshot_are_clicked_and_typed_into_and_stale_ids_refused() {
    let desktop = Desktop::with_size(1280, 720);
    let title = "Witness Elements";
    let mut witness = Witness::start_for_elements(&desktop, title);
    let place = Place::new();
    let mut env = desktop_env(&desktop);
    env.extend([
        ("MCP_WITNESS_TITLE", title.to_owned()),
        ("MCP_WITNESS_PID", witness.pid.to_string()),
        ("MCP_TYPED", TYPED.to_owned()),
    ]);
    let passed = place.drive("elements", &env);
    assert_eq!(
        passed,
        [
            "listing",
            "snapshot_ids",
            "click_element",
            "changed_element_refused",
            "type_into_element",
            "unknown_ids_refused",
            "scaled_screenshot",
            "closed_window_refused"
        ]
    );

    // The window received one click on its button (the stale id clicked nothing) and the text
    // in its entry, whole.
    let clicked = witness.expect("clicked", |_| true);
    assert_eq!(clicked["widget"], "Press me", "{clicked}");
    let text = witness.expect("text", |t| t["text"] == TYPED);
    assert_eq!(text["text"], TYPED);
    let rest = witness.drain(Duration::from_millis(300));
    assert!(
        !rest.iter().any(|e| e["event"] == "clicked"),
        "a stale id clicked: {rest:?}"
    );

    let records = place.audit();
    let clicks = element_actions(&records, "click");
    let ok_clicks: Vec<_> = clicks
        .iter()
        .filter(|r| r["result"]["ok"] == true)
        .collect();
    assert_eq!(ok_clicks.len(), 1, "{clicks:?}");
    assert_eq!(
        ok_clicks[0]["details"]["role"], "button",
        "{}",
        ok_clicks[0]
    );
    assert!(
        ok_clicks[0]["details"]["coordinate"].is_array(),
        "{}",
        ok_clicks[0]
    );
    // The changed button, four unknown ids and the closed window (at least once).
    let stale = clicks
        .iter()
        .filter(|r| r["result"]["error_code"] == "WINDOW_STALE")
        .count();
    assert!(stale >= 6, "{clicks:?}");
    let typed = element_actions(&records, "type");
    let ok_typed: Vec<_> = typed.iter().filter(|r| r["result"]["ok"] == true).collect();
    assert_eq!(ok_typed.len(), 1, "{typed:?}");
    assert_eq!(
        ok_typed[0]["details"]["text_length"],
        json!(TYPED.chars().count())
    );
    assert_eq!(ok_typed[0]["details"]["role"], "text");
    assert!(has(&records, "A11Y_SNAPSHOT_REQUEST", None));
    // Metadata only: neither the typed text nor an element's name is on record.
    let log = std::fs::read_to_string(
        place
            .home()
            .join(".local/state/autogpt-local-executor/audit.log"),
    )
    .unwrap();
    for secret in ["typed into", "never typed", "Your name", "Press me"] {
        assert!(!log.contains(secret), "{secret:?} in the audit log");
    }
}
