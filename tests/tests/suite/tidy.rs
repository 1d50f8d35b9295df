//! Tidy checks of the tree itself: module docs, workspace lints, the crate graph (core's
//! independence from any transport, faces that meet only in the libraries), the invariants
//! ARCHITECTURE.md lists, that it names every module, where long tests live, and how the prose is
//! laid out (line lengths, one sentence per line).

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

/// The workspace's own members.
fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let line = manifest.lines().find(|l| l.starts_with("members")).unwrap();
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Third-party crates are used as published: a patched copy in the tree escapes the workspace's
/// lints and tidy checks, and someone must carry it to every new upstream release by hand.
#[test]
fn no_third_party_crate_is_patched() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(
        !manifest
            .lines()
            .any(|l| l.trim_start().starts_with("[patch")),
        "Cargo.toml patches a crate; use the published crate, or turn off the feature that needs it"
    );
    assert!(!root().join("third_party").exists(), "third_party/ is back");
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

/// The target triple rustc builds for by default, from `rustc -vV`.
fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let output = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .unwrap_or_else(|| panic!("rustc -vV names no host: {text}"))
        .to_owned()
}

/// The workspace as `cargo metadata` resolves it: what every Cargo.toml declares, not a list
/// kept by hand.
struct Workspace {
    /// Package id to package object, for every package in the graph.
    packages: std::collections::HashMap<String, serde_json::Value>,
    /// The ids of the workspace's own packages.
    members: Vec<String>,
    /// Package id to the resolved dependency edges of that package.
    resolved: std::collections::HashMap<String, Vec<serde_json::Value>>,
}

impl Workspace {
    fn load() -> Self {
        // The graph of the host only: a fresh machine has downloaded no crate of other
        // platforms (iOS, macOS), and --offline must not need them.
        let output = std::process::Command::new(env!("CARGO"))
            .args(["metadata", "--format-version", "1", "--offline"])
            .args(["--filter-platform", &host_triple()])
            .arg("--manifest-path")
            .arg(root().join("Cargo.toml"))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let packages = metadata["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["id"].as_str().unwrap().to_owned(), p.clone()))
            .collect();
        let members = metadata["workspace_members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_str().unwrap().to_owned())
            .collect();
        let resolved = metadata["resolve"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                let deps = n["deps"].as_array().unwrap().clone();
                (n["id"].as_str().unwrap().to_owned(), deps)
            })
            .collect();
        Self {
            packages,
            members,
            resolved,
        }
    }

    fn name(&self, id: &str) -> &str {
        self.packages[id]["name"].as_str().unwrap()
    }

    fn member(&self, name: &str) -> &serde_json::Value {
        self.members
            .iter()
            .map(|id| &self.packages[id])
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no workspace member {name}"))
    }

    /// The names of the workspace members `package` declares as a dependency of any kind
    /// (normal, build or dev) on any platform.
    fn internal_dependencies(&self, package: &serde_json::Value) -> Vec<String> {
        package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .filter(|name| self.members.iter().any(|id| self.name(id) == *name))
            .map(str::to_owned)
            .collect()
    }

    /// Every package `name` builds into its library on some platform with the workspace's
    /// features: its normal and build dependencies, followed to the end (dev-dependencies
    /// are not part of what ships).
    fn shipped_closure(&self, name: &str) -> std::collections::BTreeSet<String> {
        let start = self.member(name)["id"].as_str().unwrap().to_owned();
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![start];
        while let Some(id) = stack.pop() {
            if !seen.insert(id.clone()) {
                continue;
            }
            for dep in &self.resolved[&id] {
                let shipped = dep["dep_kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| k["kind"].is_null() || k["kind"] == "build");
                if shipped {
                    stack.push(dep["pkg"].as_str().unwrap().to_owned());
                }
            }
        }
        seen.iter().map(|id| self.name(id).to_owned()).collect()
    }
}

/// A face is a member that builds a program; a library is a member that builds none.
fn is_face(package: &serde_json::Value) -> bool {
    package["targets"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
}

/// The one package allowed to depend on the faces: the end-to-end suite runs them.
const TEST_SUITE: &str = "e2e";

/// HTTP servers, WebSocket and MCP: these belong to the faces, and core may not reach them even
/// through a dependency.
const SERVING_CRATES: [&str; 10] = [
    "axum",
    "axum-core",
    "actix-web",
    "warp",
    "tungstenite",
    "tokio-tungstenite",
    "utoipa",
    "utoipa-axum",
    "utoipa-swagger-ui",
    "rmcp",
];

/// The HTTP stack's parts: reqwest, core::llm's one client, brings their client halves along,
/// but core may not declare them itself.
const HTTP_STACK: [&str; 7] = [
    "hyper",
    "hyper-util",
    "http",
    "http-body",
    "http-body-util",
    "tower",
    "tower-http",
];

#[test]
fn core_knows_no_transport() {
    let workspace = Workspace::load();
    let core = workspace.member("local-core");
    assert!(!is_face(core), "local-core must stay a library");
    let declared: Vec<&str> = core["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"].is_null() || d["kind"] == "build")
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    // Declared directly: no server, no WebSocket, no MCP, and no part of the HTTP stack
    // (core::llm speaks HTTP only through reqwest).
    for transport in SERVING_CRATES.iter().chain(&HTTP_STACK) {
        assert!(
            !declared.contains(transport),
            "core depends on {transport}: HTTP serving, WebSocket and MCP belong to the faces"
        );
    }
    // Nor through any dependency of a dependency.
    let closure = workspace.shipped_closure("local-core");
    for transport in SERVING_CRATES {
        assert!(
            !closure.contains(transport),
            "core pulls in {transport} through a dependency: HTTP serving, WebSocket and MCP \
             belong to the faces"
        );
    }
    assert!(closure.len() > 50, "suspiciously small graph: {closure:?}");
}

/// Core depends on no other member; no member but the end-to-end suite depends on a face (a
/// member that builds a program), so faces share code only through the libraries; nothing
/// depends on the suite. Read from the
/// manifests through `cargo metadata`, so a new member or a new edge is checked as it appears.
#[test]
fn the_faces_meet_only_in_the_libraries() {
    let workspace = Workspace::load();
    let core = workspace.member("local-core");
    assert_eq!(
        workspace.internal_dependencies(core),
        Vec::<String>::new(),
        "local-core depends on another member of the workspace: core is the bottom of the graph"
    );
    let mut faces = 0;
    for id in &workspace.members {
        let package = &workspace.packages[id];
        let name = workspace.name(id);
        let internal = workspace.internal_dependencies(package);
        assert!(
            !internal.iter().any(|d| d == TEST_SUITE),
            "{name} depends on the end-to-end suite {TEST_SUITE}"
        );
        if is_face(package) {
            faces += 1;
        }
        if name == TEST_SUITE {
            continue;
        }
        for dependency in internal {
            assert!(
                !is_face(workspace.member(&dependency)),
                "{name} depends on the face {dependency}: faces share code only through a \
                 library (local-core)"
            );
        }
    }
    // msguide-api, autogpt-shim, msguide (launcher) and msguide-desktop.
    assert_eq!(
        faces, 4,
        "the workspace's faces changed: update ARCHITECTURE.md"
    );
    // The suite is the one package that puts the faces together.
    let suite = workspace.internal_dependencies(workspace.member(TEST_SUITE));
    assert!(suite.iter().any(|d| d == "autogpt-shim") && suite.iter().any(|d| d == "msguide-api"));
}

/// The library crates print nothing themselves (`print_stdout`/`print_stderr` denied at their
/// root): what a person reads is printed by a binary, everything else goes to the log.
#[test]
fn the_libraries_print_nothing() {
    let workspace = Workspace::load();
    for name in ["local-core", "msguide-api", "autogpt-shim"] {
        let lib = workspace.member(name)["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "lib"))
            .unwrap_or_else(|| panic!("{name} has no library target"))["src_path"]
            .as_str()
            .unwrap()
            .to_owned();
        let root = std::fs::read_to_string(&lib).unwrap();
        assert!(
            root.lines()
                .any(|l| l == "#![deny(clippy::print_stdout, clippy::print_stderr)]"),
            "{lib} does not deny clippy::print_stdout and clippy::print_stderr"
        );
    }
}

/// Every public item of core says what it is (`missing_docs`, an error under CI's -D warnings).
#[test]
fn core_documents_every_public_item() {
    let root = std::fs::read_to_string(root().join("core/src/lib.rs")).unwrap();
    assert!(
        root.lines().any(|l| l == "#![warn(missing_docs)]"),
        "core/src/lib.rs no longer asks for missing_docs"
    );
}

/// core/clippy.toml keeps the filesystem and programs to their owners in core (jail,
/// own_files, audit_chain; exec): the bans stay in place, for std and tokio alike.
#[test]
fn core_bans_the_filesystem_and_commands_outside_their_owners() {
    let config = std::fs::read_to_string(root().join("core/clippy.toml")).unwrap();
    let banned: Vec<&str> = config
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("{ path = \""))
        .filter_map(|rest| rest.split('"').next())
        .collect();
    for path in [
        "std::fs::read",
        "std::fs::write",
        "std::fs::read_dir",
        "std::fs::File::open",
        "std::fs::OpenOptions::open",
        "tokio::fs::read",
        "std::process::Command::new",
        "tokio::process::Command::new",
    ] {
        assert!(
            banned.contains(&path),
            "core/clippy.toml no longer bans {path}"
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

/// The environment variables of the `MSGUIDE_*` and `AUTOGPT_SHIM_*` families are spelt once
/// in the programs' sources, so the launcher, the API, the desktop client and the connector
/// cannot disagree on a name: `MSGUIDE_*` in `core::env_names`, `AUTOGPT_SHIM_*` in the
/// connector's `config` module, and every other place uses their constants. Test code may
/// spell a name out (unit test modules, `tests.rs` files, benches and this suite): there the
/// literal is the point, since a test that used the constant could not notice it misspelt.
#[test]
fn each_environment_variable_name_is_spelt_once() {
    const OWNERS: [(&str, &str); 2] = [
        ("MSGUIDE_", "core/src/env_names.rs"),
        ("AUTOGPT_SHIM_", "connector/src/config/mod.rs"),
    ];
    let mut files = Vec::new();
    for member in members().into_iter().filter(|m| m != "tests") {
        rust_files(&root().join(member), &mut files);
    }
    let mut strays = Vec::new();
    let mut spelt: Vec<(String, String)> = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let test_code = relative
            .split('/')
            .any(|part| matches!(part, "tests" | "benches" | "tests.rs" | "proptests.rs"));
        if test_code {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        // A file's unit tests are its `mod tests`, last by convention.
        let production = text.split("\nmod tests {").next().unwrap();
        for (number, line) in production.lines().enumerate() {
            // The odd pieces between quotes are string literals (no name contains a quote).
            for literal in line.split('"').skip(1).step_by(2) {
                let Some((_, owner)) = OWNERS.iter().find(|(prefix, _)| {
                    literal.strip_prefix(prefix).is_some_and(|rest| {
                        rest.bytes()
                            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
                    })
                }) else {
                    continue;
                };
                if relative == *owner {
                    spelt.push((relative.clone(), literal.to_owned()));
                } else {
                    strays.push(format!("{relative}:{}: \"{literal}\"", number + 1));
                }
            }
        }
    }
    assert!(
        strays.is_empty(),
        "environment variable names spelt outside their owner (use the constant in \
         local_core::env_names or autogpt_shim::config): {strays:#?}"
    );
    for (owner, literal) in &spelt {
        let times = spelt
            .iter()
            .filter(|(o, l)| o == owner && l == literal)
            .count();
        assert_eq!(times, 1, "{owner} spells \"{literal}\" {times} times");
    }
    for (prefix, owner) in OWNERS {
        assert!(
            spelt.iter().any(|(o, _)| o == owner),
            "{owner} defines no {prefix}* name: update this test to the names' new home"
        );
    }
}

/// The paths ARCHITECTURE.md names, with `dir/{a,b}.rs` groups expanded.
fn architecture_paths(text: &str) -> std::collections::HashSet<String> {
    let mut paths = std::collections::HashSet::new();
    for span in text.split('`').skip(1).step_by(2) {
        match (span.find('{'), span.find('}')) {
            (Some(open), Some(close)) if open < close => {
                for name in span[open + 1..close].split(',') {
                    paths.insert(format!("{}{name}{}", &span[..open], &span[close + 1..]));
                }
            }
            _ => {
                paths.insert(span.to_owned());
            }
        }
    }
    paths
}

#[test]
fn architecture_maps_every_module() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let named = architecture_paths(&text);
    let mut files = Vec::new();
    for crate_dir in ["core", "api", "connector", "launcher", "desktop-client"] {
        rust_files(&root().join(crate_dir).join("src"), &mut files);
    }
    assert!(files.len() > 100);
    // Test-only modules are mapped by the convention they follow, not one by one.
    let test_only = |path: &str| {
        path.contains("/tests/")
            || ["tests.rs", "proptests.rs", "spec_examples.rs"]
                .iter()
                .any(|name| path.ends_with(&format!("/{name}")))
    };
    let root = root().canonicalize().unwrap();
    let missing: Vec<String> = files
        .iter()
        .map(|f| {
            let f = f.canonicalize().unwrap();
            f.strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|path| !test_only(path) && !named.contains(path))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name these modules; add a short bullet for each: {missing:?}"
    );
}

/// Longest inline `mod tests { … }`; longer ones live beside their module in `tests.rs`.
const MAX_INLINE_TEST_LINES: usize = 200;

#[test]
fn long_tests_live_beside_their_module() {
    let mut files = Vec::new();
    for crate_dir in ["core", "api", "connector", "launcher", "desktop-client"] {
        rust_files(&root().join(crate_dir).join("src"), &mut files);
    }
    let mut long = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let start = lines
            .windows(2)
            .position(|pair| pair[0] == "#[cfg(test)]" && pair[1].starts_with("mod tests {"));
        // The inline module is the file's last item, so it runs to the end of the file.
        if let Some(start) = start
            && lines.len() - start > MAX_INLINE_TEST_LINES
        {
            long.push(format!(
                "{} ({} lines)",
                file.display(),
                lines.len() - start
            ));
        }
    }
    assert!(
        long.is_empty(),
        "these inline test modules are over {MAX_INLINE_TEST_LINES} lines; move each to a \
         tests.rs beside its module (`#[cfg(test)] mod tests;`): {long:?}"
    );
}

/// The longest line the README or a document in docs/ may have (ARCHITECTURE.md has its own,
/// shorter limit): its prose is written one sentence per line, so a longer line is a paragraph
/// that was never broken up, or a table cell grown too big.
const MAX_DOC_LINE_CHARS: usize = 400;

#[test]
fn no_line_of_the_docs_is_over_400_characters() {
    let mut long = Vec::new();
    for path in prose_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        for (number, line) in text.lines().enumerate() {
            let chars = line.chars().count();
            if chars > MAX_DOC_LINE_CHARS {
                let name = path.strip_prefix(root()).unwrap_or(&path).display();
                long.push(format!("{name}:{} ({chars} characters)", number + 1));
            }
        }
    }
    assert!(
        long.is_empty(),
        "lines over {MAX_DOC_LINE_CHARS} characters; write one sentence per line, and move a long table cell into a sentence below the table: {long:#?}"
    );
}

/// docs/connector.md's guide (before `# Reference`) reads in short paragraphs: none, and no list
/// item, over 400 characters.
#[test]
fn the_connector_guide_has_no_paragraph_over_400_characters() {
    let text = std::fs::read_to_string(root().join("docs/connector.md")).unwrap();
    let (guide, _) = text
        .split_once("\n# Reference\n")
        .expect("docs/connector.md has a `# Reference` part after its guide");
    let mut paragraphs = Vec::new();
    let mut current = String::new();
    let mut code = false;
    for line in guide.lines() {
        if line.starts_with("```") {
            code = !code;
            continue;
        }
        let item = line.trim_start().split_once(' ').is_some_and(|(mark, _)| {
            mark == "-" || mark.trim_end_matches('.').parse::<u32>().is_ok()
        });
        if code || line.trim().is_empty() || item {
            if !current.is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
            if code || line.trim().is_empty() {
                continue;
            }
        }
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(line.trim());
    }
    paragraphs.push(current);
    let long: Vec<String> = paragraphs
        .iter()
        .filter(|p| p.chars().count() > MAX_DOC_LINE_CHARS)
        .map(|p| p.chars().take(80).collect())
        .collect();
    assert!(
        long.is_empty(),
        "guide paragraphs over 400 characters: {long:#?}"
    );
}

/// Import cycles among sibling modules that are known and kept, each with its reason; any other
/// cycle fails `modules_import_no_new_cycles`. (Scope, the modules of one cycle.)
const KNOWN_CYCLES: &[(&str, &[&str])] = &[
    // The spec's error codes are protocol types, and the protocol's replies are built from them.
    ("connector", &["error", "protocol"]),
    // The session writes the request log, which names the session's requests.
    ("connector", &["request_log", "session"]),
    // The command line's subcommands and what they run; to be split by subcommand.
    (
        "connector",
        &["cli", "commands", "control", "daemon", "preflight", "ws"],
    ),
    // The capabilities and the table that lists them; issue 32's one result-to-reply place.
    (
        "connector::session",
        &["capability", "computer", "files", "llm", "shell"],
    ),
    // Guidance points at desktop elements, and the desktop reports in guidance's terms.
    ("core", &["desktop", "guide"]),
    ("api", &["contracts", "error"]),
];

/// The modules under `scope` (`crate` or `crate::a::b`) that `file`'s code names, by the
/// sibling it belongs to: `use crate::…`, `crate::…` paths and `super::…` paths, outside
/// comments and inline tests.
fn named_siblings(module: &[String], source: &str, scope: &[String]) -> Vec<(String, String)> {
    let code = source
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    let code: String = code
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let Some(own) = module.get(scope.len()) else {
        return Vec::new();
    };
    if module[..scope.len()] != *scope {
        return Vec::new();
    }
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut paths: Vec<Vec<String>> = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while let Some(found) = code[at..].find("crate::") {
        let start = at + found;
        at = start + "crate::".len();
        // `$crate::` and `somecrate::` are not this crate.
        if start > 0
            && (bytes[start - 1].is_ascii_alphanumeric()
                || bytes[start - 1] == b'_'
                || bytes[start - 1] == b'$')
        {
            continue;
        }
        let rest = &code[at..];
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::{a, b::{c, d}}`: the first name of each top-level entry.
            let mut depth = 0;
            let mut entry_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => entry_start = true,
                    c if entry_start && (c.is_ascii_alphanumeric() || c == '_') => {
                        entry_start = false;
                        let name = ident(&group[i..]);
                        paths.push(vec![name]);
                        // The group's nested paths below the first name.
                        let after = &group[i + paths.last().unwrap()[0].len()..];
                        if let Some(next) = after.strip_prefix("::") {
                            paths.last_mut().unwrap().push(ident(next));
                        }
                    }
                    _ => {}
                }
            }
        } else {
            paths.push(
                rest.split("::")
                    .map(ident)
                    .take_while(|s| !s.is_empty())
                    .collect(),
            );
        }
    }
    let mut at = 0;
    while let Some(found) = code[at..].find("super::") {
        let start = at + found;
        at = start + "super::".len();
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        if start >= 7 && &code[start - 7..start] == "super::" {
            continue; // counted from the first `super::` of the chain
        }
        let mut base = module.to_vec();
        let mut rest = &code[start..];
        while let Some(next) = rest.strip_prefix("super::") {
            base.pop();
            rest = next;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let names = group.split('}').next().unwrap_or_default();
            for name in names.split(',').map(|n| ident(n.trim())) {
                let mut path = base.clone();
                path.push(name);
                paths.push(path);
            }
        } else {
            base.extend(rest.split("::").map(ident).take_while(|s| !s.is_empty()));
            paths.push(base);
        }
    }
    paths
        .into_iter()
        .filter(|path| path.len() > scope.len() && path[..scope.len()] == *scope)
        .map(|path| path[scope.len()].clone())
        .filter(|other| other != own && !other.is_empty())
        .map(|other| (own.clone(), other))
        .collect()
}

/// The strongly connected groups (more than one module) of `edges`, each sorted.
fn cycles(
    edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Vec<Vec<String>> {
    // Kosaraju: reachability both ways, small graphs.
    let reach = |from: &str, forward: bool| -> std::collections::BTreeSet<String> {
        let mut seen = std::collections::BTreeSet::from([from.to_owned()]);
        let mut stack = vec![from.to_owned()];
        while let Some(node) = stack.pop() {
            let next: Vec<String> = if forward {
                edges
                    .get(&node)
                    .map(|s| s.iter().cloned().collect())
                    .unwrap_or_default()
            } else {
                edges
                    .iter()
                    .filter(|(_, to)| to.contains(&node))
                    .map(|(from, _)| from.clone())
                    .collect()
            };
            for n in next {
                if seen.insert(n.clone()) {
                    stack.push(n);
                }
            }
        }
        seen
    };
    let mut groups: Vec<Vec<String>> = Vec::new();
    for node in edges.keys() {
        if groups.iter().any(|g| g.contains(node)) {
            continue;
        }
        let (down, up) = (reach(node, true), reach(node, false));
        let group: Vec<String> = down.intersection(&up).cloned().collect();
        if group.len() > 1 {
            groups.push(group);
        }
    }
    groups
}

/// Sibling modules do not import each other in a circle: a cycle makes a module impossible to
/// read, test or move without the others. Checked for each crate's top-level modules and for
/// the big folders of core and the connector.
#[test]
fn modules_import_no_new_cycles() {
    let scopes: &[(&str, &[&str])] = &[
        ("core", &[]),
        ("core", &["guide"]),
        ("core", &["guide", "guidance"]),
        ("core", &["machine"]),
        ("core", &["desktop"]),
        ("api", &[]),
        ("connector", &[]),
        ("connector", &["session"]),
        ("launcher", &[]),
        ("desktop-client", &[]),
    ];
    let test_only = |path: &Path| {
        let text = path.to_string_lossy();
        text.contains("/tests/")
            || ["tests.rs", "proptests.rs", "spec_examples.rs"]
                .iter()
                .any(|name| text.ends_with(&format!("/{name}")))
    };
    let mut found = Vec::new();
    for (crate_dir, scope) in scopes {
        let src = root().join(crate_dir).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let scope: Vec<String> = scope.iter().map(|s| (*s).to_owned()).collect();
        let mut edges =
            std::collections::BTreeMap::<String, std::collections::BTreeSet<String>>::new();
        for file in &files {
            // Judged below `src`: the workspace's own path holds a `tests` folder.
            if test_only(&Path::new("src").join(file.strip_prefix(&src).unwrap())) {
                continue;
            }
            let relative = file.strip_prefix(&src).unwrap().with_extension("");
            let mut module: Vec<String> = relative
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            let source = std::fs::read_to_string(file).unwrap();
            for (from, to) in named_siblings(&module, &source, &scope) {
                edges.entry(from).or_default().insert(to);
            }
        }
        let label = std::iter::once((*crate_dir).to_owned())
            .chain(scope.iter().cloned())
            .collect::<Vec<_>>()
            .join("::");
        for group in cycles(&edges) {
            found.push((label.clone(), group));
        }
    }
    let known: Vec<(String, Vec<String>)> = KNOWN_CYCLES
        .iter()
        .map(|(scope, group)| {
            (
                (*scope).to_owned(),
                group.iter().map(|s| (*s).to_owned()).collect(),
            )
        })
        .collect();
    let new: Vec<_> = found
        .iter()
        .filter(|(scope, group)| {
            !known
                .iter()
                .any(|(s, g)| s == scope && group.iter().all(|m| g.contains(m)))
        })
        .collect();
    assert!(
        new.is_empty(),
        "these sibling modules import each other in a circle; move what they share into a module of its own that depends on neither: {new:?}"
    );
    let gone: Vec<_> = known
        .iter()
        .filter(|(scope, group)| !found.iter().any(|(s, g)| s == scope && g == group))
        .collect();
    assert!(
        gone.is_empty(),
        "these known cycles changed or are gone; update KNOWN_CYCLES in tidy.rs to what is left: {gone:?} (found: {found:?})"
    );
}

/// ARCHITECTURE.md is read more than any other page: a line of it is one sentence or one short
/// bullet, never a paragraph.
const MAX_ARCHITECTURE_LINE_CHARS: usize = 300;

#[test]
fn no_line_of_the_architecture_is_over_300_characters() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let long: Vec<String> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| line.chars().count() > MAX_ARCHITECTURE_LINE_CHARS)
        .map(|(number, line)| format!("line {} ({} characters)", number + 1, line.chars().count()))
        .collect();
    assert!(
        long.is_empty(),
        "ARCHITECTURE.md has lines over {MAX_ARCHITECTURE_LINE_CHARS} characters; split them into sentences or sub-bullets: {long:?}"
    );
}

/// The prose files written one sentence per line (STYLE.md's rule): the README, ARCHITECTURE.md
/// and every page of docs/.
fn prose_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "md") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// A line's prose with its inline code spans, list marker and emphasis taken out, or `None` for
/// what is not prose (a heading, a table row, a blank line).
fn prose_of(line: &str) -> Option<String> {
    let trimmed = line.trim_start();
    if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('|') {
        return None;
    }
    let mut text = String::new();
    for (n, part) in trimmed.split('`').enumerate() {
        // Odd parts are inside a code span: one placeholder word each.
        text.push_str(if n % 2 == 1 { "CODE" } else { part });
    }
    let text = text.replace("**", "");
    let unmarked = match text.split_once(' ') {
        Some((mark, rest))
            if mark == "-" || mark == "*" || mark.trim_end_matches('.').parse::<u32>().is_ok() =>
        {
            rest.to_owned()
        }
        _ => text,
    };
    Some(unmarked)
}

/// Words whose final full stop ends no sentence.
const ABBREVIATIONS: [&str; 5] = ["e.g.", "i.e.", "etc.", "vs.", "cf."];

/// Where a second sentence starts in `prose`: a full stop, question or exclamation mark (a closing
/// quote or bracket may follow it), a space, then a capital, a digit, a quote or code.
fn second_sentence(prose: &str) -> Option<usize> {
    let chars: Vec<(usize, char)> = prose.char_indices().collect();
    for (i, &(at, c)) in chars.iter().enumerate() {
        if !matches!(c, '.' | '?' | '!') {
            continue;
        }
        let mut j = i + 1;
        while chars
            .get(j)
            .is_some_and(|&(_, c)| matches!(c, '"' | '”' | ')'))
        {
            j += 1;
        }
        if chars.get(j).is_none_or(|&(_, c)| c != ' ') {
            continue;
        }
        let next = chars[j + 1..].iter().map(|&(_, c)| c).find(|c| *c != ' ');
        let starts = next.is_some_and(|c| c.is_uppercase() || matches!(c, '"' | '“'));
        let word = prose[..=at].rsplit(' ').next().unwrap_or_default();
        if starts && !ABBREVIATIONS.iter().any(|a| word.ends_with(a)) {
            return Some(at);
        }
    }
    None
}

#[test]
fn every_line_of_the_prose_holds_at_most_one_sentence() {
    let mut crowded = Vec::new();
    for path in prose_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut code = false;
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                code = !code;
                continue;
            }
            if code {
                continue;
            }
            if let Some(at) = prose_of(line).as_deref().and_then(second_sentence) {
                let name = path.strip_prefix(root()).unwrap_or(&path).display();
                crowded.push(format!("{name}:{} (after {at} characters)", number + 1));
            }
        }
    }
    assert!(
        crowded.is_empty(),
        "lines holding more than one sentence; put each sentence on a line of its own: {crowded:#?}"
    );
}

#[test]
fn no_sentence_of_the_prose_is_wrapped_over_lines() {
    let mut wrapped = Vec::new();
    for path in prose_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut code = false;
        let mut previous: Option<String> = None;
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                code = !code;
                previous = None;
                continue;
            }
            let prose = if code { None } else { prose_of(line) };
            let item = line.trim_start().split_once(' ').is_some_and(|(mark, _)| {
                mark == "-" || mark == "*" || mark.trim_end_matches('.').parse::<u32>().is_ok()
            });
            if let (Some(before), Some(now)) = (&previous, &prose) {
                // A line that ends mid-sentence, then the same sentence going on in lower case.
                let open = !before.trim_end().ends_with(['.', ':', '?', '!', ';']);
                if open && !item && now.starts_with(char::is_lowercase) {
                    let name = path.strip_prefix(root()).unwrap_or(&path).display();
                    wrapped.push(format!("{name}:{}", number + 1));
                }
            }
            previous = prose;
        }
    }
    assert!(
        wrapped.is_empty(),
        "sentences broken over several lines; join each into one line: {wrapped:#?}"
    );
}
