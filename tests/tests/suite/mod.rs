//! The end-to-end suite: each module checks one part of the contract at its boundaries.

mod actions;
// /proc figures of the server (VmRSS, VmHWM, fd) and 1,000 sockets: Linux only.
#[cfg(target_os = "linux")]
mod api_hostile;
mod assist;
mod binary;
mod boundary;
mod camera_recovery;
mod connector;
// Mode bits and a real Secret Service on a private session bus: Unix only.
#[cfg(unix)]
mod connector_auth;
mod connector_cli;
// Xvfb or Xorg, openbox, GTK and xclip.
#[cfg(unix)]
mod connector_computer;
mod connector_control;
// SIGKILL, flock(2) and a tmpfs mount: Linux only.
#[cfg(target_os = "linux")]
mod connector_faults;
// Mode bits, symbolic links and signals.
#[cfg(unix)]
mod connector_first_hour;
// A headless GNOME or KDE and its desktop portal: Linux only.
#[cfg(target_os = "linux")]
mod connector_gnome;
#[cfg(target_os = "linux")]
mod connector_kde;
// /proc's peak RSS and its reset (clear_refs): Linux only.
#[cfg(target_os = "linux")]
mod connector_hostile;
// Symbolic links (a privilege on Windows) and SIGKILL.
#[cfg(unix)]
mod connector_files;
mod connector_llm;
// Namespaces, Landlock, seccomp and /proc: Linux only.
#[cfg(target_os = "linux")]
mod connector_sandbox;
mod connector_shell;
// /proc's descriptors, VmRSS and process table: Linux only.
#[cfg(target_os = "linux")]
mod connector_storm;
// Mode bits of the token file it makes.
#[cfg(unix)]
mod connector_try;
// A headless sway in a user namespace, weston, and their witnesses: Linux only.
#[cfg(target_os = "linux")]
mod connector_wayland;
mod contracts;
// Xvfb, openbox and AT-SPI.
#[cfg(unix)]
mod desktop;
#[cfg(unix)]
mod desktop_client;
// Xvfb, openbox, picom and the screen's pixels.
#[cfg(unix)]
mod desktop_outline;
// weston and the guidance window.
#[cfg(target_os = "linux")]
mod desktop_wayland;
mod guidance;
mod launcher;
mod llm_client;
// Process groups, /proc and a Python venv (scripts/mcp-env).
#[cfg(target_os = "linux")]
mod mcp;
// The MCP element tools on Xvfb with AT-SPI (scripts/mcp-env).
#[cfg(target_os = "linux")]
mod mcp_elements;
// Signals, mode bits, /proc and Node.js with the TypeScript SDK (scripts/inspector-env).
#[cfg(target_os = "linux")]
mod mcp_http;
mod model_provider;
mod openapi;
// A headless GNOME: mutter, the desktop portal, PipeWire and AT-SPI.
#[cfg(target_os = "linux")]
mod portal_gnome;
mod privacy;
mod real_model;
mod schemathesis;
mod support;
mod task_plans;
mod tidy;
// The Windows builds under Wine (scripts/windows-env), seen through /proc and the Wine drive.
#[cfg(target_os = "linux")]
mod windows;
