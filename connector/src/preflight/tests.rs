//! Tests of [`super`] on real setups in a temporary directory: which checks pass, warn or fail,
//! that every problem is reported, and that the preflight creates nothing.

use std::path::{Path, PathBuf};

use local_core::machine::own_files;

use super::*;
use crate::commands::audit::test_dir::TempDir;
use crate::commands::doctor::{EXIT_BLOCKED, doctor};
use crate::link::Token;

fn inputs(dir: &TempDir) -> Inputs {
    let mut config = ShimConfig::defaults(&|_: &str| None);
    config.session_id = Some("s-1".to_owned());
    config.allowed_root = Some(dir.join("workspace/root"));
    config.audit_log_path = Some(dir.join("state/audit.log"));
    config.token_file = Some(dir.join("token"));
    config.platform_url = "https://user:pw@platform.example/".to_owned();
    Inputs {
        os: Os::Linux,
        config,
        problems: Vec::new(),
        log_level: "INFO".to_owned(),
        home: Some(dir.join("home")),
        audit_key_path: Some(dir.join("state/audit-key")),
        xdg_session_type: None,
        wayland_display: Some("wayland-0".to_owned()),
        display: Some(":0".to_owned()),
        sandbox_support: None,
        compositor: None,
    }
}

fn run(inputs: &Inputs) -> (u8, String) {
    let mut out = Vec::new();
    let code = doctor(inputs, &mut out);
    (code, String::from_utf8(out).unwrap())
}

/// Every path under `dir` with its modification time: what a run must leave as it was.
#[allow(
    clippy::disallowed_methods,
    reason = "the test walks its own temporary folder"
)]
fn tree(dir: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
        found.push((path, meta.modified().unwrap()));
    }
    found.sort();
    found
}

#[test]
fn a_clean_setup_passes_and_nothing_is_created() {
    let dir = TempDir::new("doctor-clean");
    let inputs = inputs(&dir);
    own_files::write_atomic(&dir.join("token"), b"secret\n", 0o600).unwrap();
    let root = dir.join("workspace/root");
    own_files::ensure_dir(&root).unwrap();
    let before = tree(dir.path());
    let (code, out) = run(&inputs);
    assert_eq!(code, 0, "{out}");
    let state = dir.join("state");
    let expected = [
        "[INFO] mode  direct session s-1 (--session-id)".to_owned(),
        format!("[OK  ] allowed root  {} is writable", root.display()),
        format!(
            "[OK  ] audit log  {} does not exist yet; `start` creates it and its folder {}",
            dir.join("state/audit.log").display(),
            state.display()
        ),
        format!(
            "[OK  ] audit key  {} does not exist yet; `start` creates it and its folder {}",
            dir.join("state/audit-key").display(),
            state.display()
        ),
        format!(
            "[OK  ] token  {} is readable by you only",
            dir.join("token").display()
        ),
        "[OK  ] platform URL  `start` dials wss://platform.example/ws/local-executor/s-1"
            .to_owned(),
        "[OK  ] shell  disabled".to_owned(),
        "[INFO] session type  Wayland (WAYLAND_DISPLAY=wayland-0)".to_owned(),
        "no blocking problems: the daemon can start".to_owned(),
    ];
    assert_eq!(out.lines().collect::<Vec<_>>(), expected);
    assert!(!out.contains("secret") && !out.contains("pw@"));
    // No folder, key, log or probe file appeared, and nothing was touched.
    assert_eq!(tree(dir.path()), before);

    // With the state folder, the log and a key in place, they are read, not rewritten.
    own_files::ensure_dir(&state).unwrap();
    let log = inputs.config.audit_log_path.clone().unwrap();
    let key = inputs.audit_key_path.clone().unwrap();
    own_files::write_atomic(&log, b"", 0o600).unwrap();
    own_files::write_atomic(&key, &[b'a'; 64], 0o600).unwrap();
    let before = tree(dir.path());
    let (code, out) = run(&inputs);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("[OK  ] audit log  ") && out.contains(" is writable\n"),
        "{out}"
    );
    assert!(out.contains("[OK  ] audit key  loaded from "), "{out}");
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn a_missing_root_blocks_names_mkdir_and_is_not_created() {
    let dir = TempDir::new("doctor-typo");
    let mut inputs = inputs(&dir);
    inputs.config.allowed_root = Some(dir.join("a/typo"));
    let before = tree(dir.path());
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(
        out.contains(&format!(
            "[FAIL] allowed root  {root} does not exist: create it with `mkdir -p {root}`",
            root = dir.join("a/typo").display()
        )),
        "{out}"
    );
    assert_eq!(tree(dir.path()), before);
    assert!(!dir.join("a").exists());
}

#[cfg(unix)]
#[test]
fn a_state_folder_that_cannot_be_made_blocks_with_the_command_to_make_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("doctor-locked");
    let mut inputs = inputs(&dir);
    own_files::ensure_dir(inputs.config.allowed_root.as_ref().unwrap()).unwrap();
    let locked = dir.join("locked");
    own_files::ensure_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).unwrap();
    inputs.config.audit_log_path = Some(locked.join("state/audit.log"));
    let (code, out) = run(&inputs);
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    // Root ignores permissions: the check then (rightly) finds the folder creatable.
    if rustix::process::geteuid().is_root() {
        assert!(out.contains("[OK  ] audit log  "), "{out}");
        return;
    }
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(
        out.contains(&format!(
            "is not writable (permission denied); run `mkdir -p {}` as a user who can",
            locked.join("state").display()
        )),
        "{out}"
    );
}

#[test]
fn an_allowed_root_under_a_regular_file_blocks() {
    let dir = TempDir::new("doctor-root");
    own_files::write_atomic(&dir.join("file"), b"x", 0o600).unwrap();
    let mut inputs = inputs(&dir);
    inputs.config.allowed_root = Some(dir.join("file/root"));
    inputs.config.token_file = None;
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(
        out.contains("[FAIL] allowed root  ") && out.contains("a file stands in its path"),
        "{out}"
    );
    assert!(out.contains("[WARN] token  none configured"), "{out}");
    assert!(out.ends_with(
        "1 blocking problem: fix it before starting the daemon (`start` refuses until then)\n"
    ));

    // Control mode does not use the allowed root, but needs a folder to browse from.
    inputs.config.session_id = None;
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(!out.contains("allowed root"), "{out}");
    assert!(
        out.contains("[FAIL] virtual roots  no folder to browse from"),
        "{out}"
    );
    own_files::ensure_dir(&dir.join("home")).unwrap();
    let (code, out) = run(&inputs);
    assert_eq!(code, 0, "{out}");
    let line = out
        .lines()
        .find(|line| line.starts_with("[OK  ] virtual roots  "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.ends_with("/home"), "{out}");
}

#[cfg(unix)]
#[test]
fn an_open_token_file_blocks() {
    let dir = TempDir::new("doctor-token");
    own_files::write_atomic(&dir.join("token"), b"secret\n", 0o644).unwrap();
    let mut inputs = inputs(&dir);
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(out.contains("[FAIL] token  "), "{out}");
    assert!(out.contains("mode 0644"), "{out}");
    assert!(!out.contains("secret\n"));

    // The environment's token wins over the file, which is then not read.
    inputs.config.token_file = None;
    inputs.config.token = Token::from_configured(Some("t"));
    assert!(
        run(&inputs)
            .1
            .contains("[OK  ] token  from AUTOGPT_SHIM_TOKEN\n")
    );
}

#[test]
fn features_urls_and_sessions() {
    let dir = TempDir::new("doctor-features");
    let mut inputs = inputs(&dir);
    own_files::ensure_dir(inputs.config.allowed_root.as_ref().unwrap()).unwrap();
    inputs.config.token_file = None;
    inputs.config.token = Token::from_configured(Some("t"));
    inputs.config.enable_shell = true;
    inputs.config.platform_url = "ftp://platform.example".to_owned();
    inputs.xdg_session_type = Some("x11".to_owned());
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(
        out.contains("[OK  ] token  from AUTOGPT_SHIM_TOKEN\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "[WARN] shell  enabled: the platform can run any command with this user's permissions"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "[FAIL] platform URL  invalid connection request: unsupported platform URL scheme"
        ),
        "{out}"
    );
    assert!(
        out.contains("[INFO] session type  X11 (XDG_SESSION_TYPE)\n"),
        "{out}"
    );

    inputs.config.platform_url = "ws://platform.example".to_owned();
    inputs.config.enable_computer_use = true;
    inputs.config.enable_recording = true;
    inputs.log_level = "LOUD".to_owned();
    inputs.os = Os::Macos;
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED);
    assert!(
        out.contains(
            "[WARN] platform URL  ws://platform.example/ws/local-executor/s-1 is unencrypted"
        ),
        "{out}"
    );
    // Computer use starts anywhere: HELLO offers what works.
    assert!(out.contains("[OK  ] computer use  enabled\n"), "{out}");
    assert!(out.contains("[FAIL] recording  "), "{out}");
    assert!(out.contains("[FAIL] log level  "), "{out}");
    assert!(!out.contains("session type"), "{out}");
    assert!(out.contains("2 blocking problems: fix them before starting the daemon"));

    inputs.config.platform_url = "ws://localhost:8000".to_owned();
    assert!(run(&inputs).1.contains(
        "[OK  ] platform URL  `start` dials ws://localhost:8000/ws/local-executor/s-1\n"
    ));
    inputs.config.platform_url = "wss://".to_owned();
    assert!(run(&inputs).1.contains("[FAIL] platform URL  "));
    // Linux without a display: computer use warns.
    inputs.os = Os::Linux;
    inputs.xdg_session_type = None;
    inputs.wayland_display = None;
    inputs.display = None;
    assert!(
        run(&inputs)
            .1
            .contains("[WARN] computer use  enabled, but this session has no display")
    );
}

#[cfg(unix)]
#[test]
fn a_key_file_open_to_others_blocks_and_a_bad_key_warns() {
    let dir = TempDir::new("doctor-key");
    let mut inputs = inputs(&dir);
    own_files::ensure_dir(inputs.config.allowed_root.as_ref().unwrap()).unwrap();
    inputs.config.token_file = None;
    let key = inputs.audit_key_path.clone().unwrap();
    own_files::write_atomic(&key, &[b'a'; 64], 0o644).unwrap();
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(out.contains("[FAIL] audit key  "), "{out}");

    own_files::write_atomic(&key, b"not a key", 0o600).unwrap();
    let (code, out) = run(&inputs);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("[WARN] audit key  "), "{out}");
    // Reported, not replaced.
    assert_eq!(
        own_files::read_capped(&key, 64).unwrap().unwrap(),
        b"not a key"
    );
}

/// Everything wrong is reported at once, the refused configuration values under the check they
/// belong to, and the check of a refused value does not look at what was left in its place.
#[test]
fn every_problem_is_reported_not_the_first() {
    let dir = TempDir::new("doctor-three");
    let mut inputs = inputs(&dir);
    let flags = crate::config::Overrides {
        platform_url: Some("127.0.0.1:8770".to_owned()),
        ..crate::config::Overrides::default()
    };
    let loaded = crate::config::load_all(&flags, &|name: &str| {
        (name == "HOME").then(|| dir.path().to_string_lossy().into_owned())
    });
    inputs.problems = loaded.problems;
    // The token file and the root are missing too.
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    let failed: Vec<&str> = out
        .lines()
        .filter(|line| line.starts_with("[FAIL]"))
        .collect();
    assert_eq!(failed.len(), 3, "{out}");
    assert!(failed[0].starts_with("[FAIL] allowed root  "), "{out}");
    assert!(
        failed[1].starts_with("[FAIL] token  the token file ")
            && failed[1].contains("does not exist"),
        "{out}"
    );
    assert_eq!(
        failed[2],
        "[FAIL] platform URL  --platform-url has no scheme: did you mean ws://127.0.0.1:8770? (ws:// for a platform on this machine, wss:// for one across the network)"
    );
    assert!(!out.contains("[OK  ] platform URL"), "{out}");
    assert!(out.ends_with(
        "3 blocking problems: fix them before starting the daemon (`start` refuses until then)\n"
    ));
    // `start`'s refusal is the same list, one sentence each.
    let findings = checks(&inputs);
    let sentences: Vec<String> = blocking(&findings).map(Finding::sentence).collect();
    assert_eq!(sentences.len(), 3);
    assert!(sentences[2].starts_with("platform URL: --platform-url has no scheme"));
}

#[test]
fn the_shell_sandbox_line_reports_the_kernel_and_blocks_a_mode_it_cannot_enforce() {
    let dir = TempDir::new("doctor-sandbox");
    let mut inputs = inputs(&dir);
    own_files::ensure_dir(inputs.config.allowed_root.as_ref().unwrap()).unwrap();
    inputs.config.enable_shell = true;
    let full = Support {
        launcher: Ok(PathBuf::from("/opt/x/autogpt-shim-sandbox")),
        landlock: Ok(7),
        namespaces: Ok(()),
        seccomp: Ok(()),
    };
    inputs.sandbox_support = Some(full.clone());
    let (_, out) = run(&inputs);
    assert!(
        out.contains("[WARN] shell  enabled: the platform can run any command with this user's permissions; --shell-sandbox workspace keeps"),
        "{out}"
    );
    assert!(
        out.contains("[INFO] shell sandbox  `off`; Landlock ABI 7, user namespaces available, seccomp available: workspace and strict can be enforced\n"),
        "{out}"
    );

    inputs.config.shell_sandbox = SandboxMode::Strict;
    let (_, out) = run(&inputs);
    assert!(
        out.contains("[OK  ] shell  enabled in the `strict` sandbox: commands change nothing outside the allowed root"),
        "{out}"
    );
    assert!(out.contains("[OK  ] shell sandbox  `strict`; "), "{out}");

    inputs.sandbox_support = Some(Support {
        namespaces: Err("unshare: ENOSPC: No space left on device".to_owned()),
        ..full
    });
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(
        out.contains("[FAIL] shell sandbox  `strict` cannot be enforced here: user and mount namespaces are not available (unshare: ENOSPC: No space left on device); fix that, or start with --shell-sandbox off"),
        "{out}"
    );

    // A launcher missing beside the connector: the one thing named, every mode refused.
    inputs.sandbox_support = Some(Support::without_launcher(
        "/opt/x/autogpt-shim-sandbox is missing".to_owned(),
    ));
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    if cfg!(target_os = "linux") {
        assert!(
            out.contains("[FAIL] shell sandbox  `strict` cannot be enforced here: the sandbox launcher /opt/x/autogpt-shim-sandbox is missing; fix that, or start with --shell-sandbox off"),
            "{out}"
        );
    }

    inputs.sandbox_support = None;
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(
        out.contains("[FAIL] shell sandbox  `strict` is configured, but the shell sandbox is Linux-only for now"),
        "{out}"
    );
}

#[test]
fn on_wayland_each_missing_protocol_is_named_with_its_cost() {
    let dir = TempDir::new("doctor-wayland");
    let mut inputs = inputs(&dir);
    own_files::ensure_dir(inputs.config.allowed_root.as_ref().unwrap()).unwrap();
    own_files::write_atomic(&dir.join("token"), b"secret\n", 0o600).unwrap();
    inputs.config.enable_computer_use = true;
    // A live compositor decides the session type, whatever XDG_SESSION_TYPE says.
    inputs.xdg_session_type = Some("x11".to_owned());
    inputs.compositor = Some(Compositor::Missing(vec![
        "no virtual keyboard protocol (zwp_virtual_keyboard_manager_v1): typing is unavailable; sway, Hyprland, river and labwc offer it".to_owned(),
        "no clipboard protocol (zwlr_data_control_manager_v1): the clipboard is unavailable; sway, Hyprland, river and labwc offer it".to_owned(),
    ]));
    let (code, out) = run(&inputs);
    assert_eq!(code, 0, "missing protocols never block `start`: {out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines.contains(&"[WARN] computer use  enabled on Wayland: HELLO offers only what this compositor's protocols allow (the Wayland lines name what is missing; docs/computer-use.md)"),
        "{out}"
    );
    assert!(
        lines.contains(
            &"[INFO] session type  Wayland (WAYLAND_DISPLAY=wayland-0, a live compositor)"
        ),
        "{out}"
    );
    let wayland: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("] Wayland  "))
        .collect();
    assert_eq!(
        wayland,
        [
            "[WARN] Wayland  no virtual keyboard protocol (zwp_virtual_keyboard_manager_v1): typing is unavailable; sway, Hyprland, river and labwc offer it",
            "[WARN] Wayland  no clipboard protocol (zwlr_data_control_manager_v1): the clipboard is unavailable; sway, Hyprland, river and labwc offer it",
        ],
        "{out}"
    );

    // Without computer use they are facts, not warnings.
    inputs.config.enable_computer_use = false;
    let (_, out) = run(&inputs);
    assert!(
        out.contains("[INFO] Wayland  no virtual keyboard protocol"),
        "{out}"
    );

    inputs.config.enable_computer_use = true;
    inputs.compositor = Some(Compositor::Missing(Vec::new()));
    let (_, out) = run(&inputs);
    assert!(
        out.contains("[OK  ] computer use  enabled on Wayland: this compositor offers every protocol computer use needs\n"),
        "{out}"
    );
    assert!(
        out.contains("[OK  ] Wayland  the compositor offers screen capture, a virtual pointer and keyboard, the window list and the clipboard\n"),
        "{out}"
    );

    inputs.compositor = Some(Compositor::Unreachable(
        "the Wayland compositor stopped answering".to_owned(),
    ));
    let (_, out) = run(&inputs);
    assert!(
        out.contains("[WARN] Wayland  the compositor could not be asked which protocols it offers (the Wayland compositor stopped answering): computer use will offer nothing on it; check that WAYLAND_DISPLAY names your session's compositor\n"),
        "{out}"
    );
}
