//! End-to-end tests of the workspace; the suite lives in `tests/all.rs` and its `suite/` modules,
//! [`platform`] is the WebSocket test platform the suite and the benchmarks share,
//! [`display`] a private X desktop (Xvfb, openbox, a session bus), [`wayland`] a private Wayland compositor (headless sway or weston), [`accessibility`] a window's controls read and pressed through AT-SPI, [`witness`] a GTK window reporting the input it receives, [`fake_llm`] a fake local LLM backend (Ollama or OpenAI-compatible), [`fake_oauth`] a fake OAuth server for the connector's login, [`portal_desktop`] a private headless GNOME or KDE with the desktop portal, [`memory`] a process's private memory as the benches report it, and [`real_model`] a real
//! one (llama.cpp's server with SmolLM2-135M) for the real-model tests and the LLM benchmark.

// Test support: a failed unwrap is a failed test or bench, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// An X server and a session bus exist only on Unix; the tests that need them are Unix-only too.
#[cfg(target_os = "linux")]
pub mod accessibility;
#[cfg(unix)]
pub mod display;
pub mod fake_llm;
pub mod fake_oauth;
pub mod memory;
pub mod platform;
#[cfg(target_os = "linux")]
pub mod portal_desktop;
pub mod real_model;
#[cfg(target_os = "linux")]
pub mod wayland;
#[cfg(unix)]
pub mod witness;

/// Asks process `pid` to stop with SIGTERM through kill(1), the crates forbidding the
/// `unsafe` a direct `kill(2)` needs; true when the signal was sent (never on Windows, which
/// has no kill(1)).
#[must_use]
pub fn sigterm(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The file or folder a preparation script exported in `name` (a venv's interpreter, a cached
/// build); panics with the command to run when it is unset or gone, so a test never skips.
/// `needs` says in a few words what the test needs it for.
#[must_use]
pub fn prepared(name: &str, needs: &str, script: &str) -> std::path::PathBuf {
    let value = std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "{name} is not set: {needs}. Run `scripts/test`, or `eval \"$({script})\"` before cargo."
            )
        });
    let path = std::path::PathBuf::from(value);
    assert!(
        path.exists(),
        "{name}={} does not exist: run `{script}` again",
        path.display()
    );
    path
}
