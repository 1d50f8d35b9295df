//! Tests of [`super`] on real setups in a temporary directory: which checks pass, warn or fail,
//! and that the preflight creates nothing.

use super::super::audit::test_dir::TempDir;
use super::*;

fn inputs(dir: &TempDir) -> DoctorInputs {
    DoctorInputs {
        os: Os::Linux,
        session_id: Some("s-1".to_owned()),
        allowed_root: dir.join("workspace/root"),
        home: Some(dir.join("home")),
        audit_log_path: dir.join("state/audit.log"),
        audit_key_path: dir.join("state/audit-key"),
        token_in_env: false,
        token_file: Some(dir.join("token")),
        platform_url: "https://user:pw@platform.example/".to_owned(),
        enable_shell: false,
        shell_sandbox: SandboxMode::Off,
        sandbox_support: None,
        enable_computer_use: false,
        enable_recording: false,
        xdg_session_type: None,
        wayland_display: Some("wayland-0".to_owned()),
        display: Some(":0".to_owned()),
    }
}

fn run(inputs: &DoctorInputs) -> (u8, String) {
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
        "[INFO] mode  legacy direct session s-1".to_owned(),
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
        "[OK  ] platform URL  https://platform.example/".to_owned(),
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
    own_files::write_atomic(&inputs.audit_log_path, b"", 0o600).unwrap();
    own_files::write_atomic(&inputs.audit_key_path, &[b'a'; 64], 0o600).unwrap();
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
    inputs.allowed_root = dir.join("a/typo");
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
    own_files::ensure_dir(&inputs.allowed_root).unwrap();
    let locked = dir.join("locked");
    own_files::ensure_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).unwrap();
    inputs.audit_log_path = locked.join("state/audit.log");
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
    inputs.allowed_root = dir.join("file/root");
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(
        out.contains("[FAIL] allowed root  ") && out.contains("a file stands in its path"),
        "{out}"
    );
    assert!(out.contains("[WARN] token  "), "{out}");
    assert!(out.ends_with("1 blocking problem: fix it before starting the daemon\n"));

    // Control mode does not use the allowed root, but needs a folder to browse from.
    inputs.session_id = None;
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(out.contains("[INFO] allowed root  "), "{out}");
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

    // Even when the environment supplies the token.
    inputs.token_in_env = true;
    assert_eq!(run(&inputs).0, EXIT_BLOCKED);
}

#[test]
fn features_urls_and_sessions() {
    let dir = TempDir::new("doctor-features");
    let mut inputs = inputs(&dir);
    own_files::ensure_dir(&inputs.allowed_root).unwrap();
    inputs.token_file = None;
    inputs.token_in_env = true;
    inputs.enable_shell = true;
    inputs.platform_url = "ftp://platform.example".to_owned();
    inputs.xdg_session_type = Some("x11".to_owned());
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(
        out.contains("[OK  ] token  from the environment\n"),
        "{out}"
    );
    assert!(
        out.contains("[WARN] shell  enabled: shell gives the platform full user-level access"),
        "{out}"
    );
    assert!(
        out.contains("[FAIL] platform URL  ftp://platform.example: "),
        "{out}"
    );
    assert!(
        out.contains("[INFO] session type  X11 (XDG_SESSION_TYPE)\n"),
        "{out}"
    );

    inputs.platform_url = "ws://platform.example".to_owned();
    inputs.enable_computer_use = true;
    inputs.enable_recording = true;
    inputs.os = Os::Macos;
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED);
    assert!(
        out.contains("[WARN] platform URL  ws://platform.example: unencrypted"),
        "{out}"
    );
    assert!(out.contains("[FAIL] computer use  "), "{out}");
    assert!(out.contains("[FAIL] recording  "), "{out}");
    assert!(!out.contains("session type"), "{out}");
    assert!(out.ends_with("2 blocking problems: fix them before starting the daemon\n"));

    inputs.platform_url = "ws://localhost:8000".to_owned();
    assert!(
        run(&inputs)
            .1
            .contains("[OK  ] platform URL  ws://localhost:8000\n")
    );
    inputs.platform_url = "wss://".to_owned();
    assert!(run(&inputs).1.contains("[FAIL] platform URL  "));
}

#[cfg(unix)]
#[test]
fn a_key_file_open_to_others_blocks_and_a_bad_key_warns() {
    let dir = TempDir::new("doctor-key");
    let mut inputs = inputs(&dir);
    own_files::ensure_dir(&inputs.allowed_root).unwrap();
    inputs.token_file = None;
    own_files::write_atomic(&inputs.audit_key_path, &[b'a'; 64], 0o644).unwrap();
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(out.contains("[FAIL] audit key  "), "{out}");

    own_files::write_atomic(&inputs.audit_key_path, b"not a key", 0o600).unwrap();
    let (code, out) = run(&inputs);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("[WARN] audit key  "), "{out}");
    // Reported, not replaced.
    assert_eq!(
        own_files::read_capped(&inputs.audit_key_path, 64)
            .unwrap()
            .unwrap(),
        b"not a key"
    );
}

#[test]
fn the_shell_sandbox_line_reports_the_kernel_and_blocks_a_mode_it_cannot_enforce() {
    let dir = TempDir::new("doctor-sandbox");
    let mut inputs = inputs(&dir);
    own_files::ensure_dir(&inputs.allowed_root).unwrap();
    inputs.enable_shell = true;
    let full = Support {
        landlock: Ok(7),
        namespaces: Ok(()),
        seccomp: Ok(()),
    };
    inputs.sandbox_support = Some(full.clone());
    let (_, out) = run(&inputs);
    assert!(
        out.contains("[WARN] shell  enabled: shell gives the platform full user-level access to this machine; --shell-sandbox workspace keeps"),
        "{out}"
    );
    assert!(
        out.contains("[INFO] shell sandbox  `off`; Landlock ABI 7, user namespaces available, seccomp available: workspace and strict can be enforced\n"),
        "{out}"
    );

    inputs.shell_sandbox = SandboxMode::Strict;
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
        out.contains("[FAIL] shell sandbox  `strict` cannot be enforced here: user and mount namespaces are not available (unshare: ENOSPC: No space left on device); start would refuse it"),
        "{out}"
    );

    inputs.sandbox_support = None;
    let (code, out) = run(&inputs);
    assert_eq!(code, EXIT_BLOCKED, "{out}");
    assert!(
        out.contains("[FAIL] shell sandbox  `strict` is configured, but the shell sandbox is Linux-only for now"),
        "{out}"
    );
}
