//! Figures of the MCP face: the tool-call round trip of `stat` and of `run_command` `true`
//! through the official MCP Python SDK against the real `autogpt-shim mcp`, beside the same
//! client calling a minimal stdio echo server (the ceiling: the client's own cost), as ratios,
//! and the idle resident memory of both (`tests/mcp/bench.py` measures, this runs it).
//! Run with `cargo bench -p e2e --bench mcp` after `cargo build --release --workspace --bins`
//! (it measures the binary next to it) and `eval "$(scripts/mcp-env)"`.

// Bench support: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use e2e::platform::{binary, fresh_dir};

const PYTHON_VAR: &str = "MSGUIDE_TEST_MCP_PYTHON";

fn main() -> ExitCode {
    let Some(python) = std::env::var_os(PYTHON_VAR).filter(|v| !v.is_empty()) else {
        eprintln!("mcp bench: {PYTHON_VAR} is not set; run `eval \"$(scripts/mcp-env)\"` first");
        return ExitCode::FAILURE;
    };
    let dir = fresh_dir("mcp-bench");
    for sub in ["home", "root"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let script: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/bench.py");
    let status = Command::new(python)
        .arg(script)
        .env("MCP_SHIM", binary("autogpt-shim"))
        .env("MCP_HOME", dir.join("home"))
        .env("MCP_ROOT", dir.join("root"))
        .status()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
