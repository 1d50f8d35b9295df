//! Tidy checks of the tree itself: module docs, workspace lints, and the core's independence
//! from any transport.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let line = manifest.lines().find(|l| l.starts_with("members")).unwrap();
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let mut files = Vec::new();
    for member in members() {
        rust_files(&root().join(member), &mut files);
    }
    assert!(files.len() > 20);
    let undocumented: Vec<_> = files
        .iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap().starts_with("//!"))
        .collect();
    assert!(
        undocumented.is_empty(),
        "files without a leading //! line: {undocumented:?}"
    );
}

#[test]
fn every_member_uses_the_workspace_lints() {
    for member in members() {
        let manifest = std::fs::read_to_string(root().join(&member).join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains("[lints]\nworkspace = true"),
            "{member} does not opt into [workspace.lints]"
        );
    }
}

#[test]
fn core_knows_no_transport() {
    let manifest = std::fs::read_to_string(root().join("core/Cargo.toml")).unwrap();
    let dependencies = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    // reqwest is allowed as the one outbound client of `core::llm` (checked below); no
    // serving stack and no WebSocket may enter core.
    for transport in ["axum", "hyper", "tower", "tungstenite", "utoipa", "http"] {
        assert!(
            !dependencies
                .lines()
                .any(|l| l.trim_start().starts_with(transport)),
            "core depends on {transport}: HTTP and WebSocket belong to the edges"
        );
    }
}

#[test]
fn only_the_llm_client_speaks_http_in_core() {
    let mut users = Vec::new();
    let mut stack = vec![root().join("core/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read_to_string(&path).unwrap().contains("reqwest") {
                users.push(path);
            }
        }
    }
    let core = root().join("core/src");
    for path in users {
        let relative = path.strip_prefix(&core).unwrap();
        assert!(
            relative.starts_with("llm") || relative == std::path::Path::new("llm.rs"),
            "{} uses reqwest: only core::llm may make HTTP requests",
            relative.display()
        );
    }
}

/// The build packages README.md and docs/connector.md tell a person to install before the
/// first `cargo build` are ones `scripts/setup` installs, so the two lists cannot drift apart.
#[test]
fn the_documented_build_packages_are_the_ones_setup_installs() {
    let setup = std::fs::read_to_string(root().join("scripts/setup")).unwrap();
    for doc in ["README.md", "docs/connector.md"] {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        let line = text
            .lines()
            .find_map(|line| line.split("sudo apt-get install ").nth(1))
            .unwrap_or_else(|| panic!("{doc} names no build packages"));
        let packages: Vec<&str> = line
            .trim_end_matches(['`', '.'])
            .split_whitespace()
            .collect();
        assert!(packages.contains(&"gcc"), "{doc}: {packages:?}");
        for package in packages {
            assert!(
                setup.split_whitespace().any(|word| word == package),
                "{doc} names {package}, which scripts/setup does not install"
            );
        }
    }
}
