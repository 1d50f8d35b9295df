//! Tests of [`super`]: flags and environment with their precedence, refusals, control mode,
//! token and reconnect settings, global flags, and every subcommand with its switches.

use std::collections::HashMap;
use std::time::Duration;

use super::*;

fn parse(args: &[&str]) -> Cli {
    Cli::try_parse_from(std::iter::once("autogpt-shim").chain(args.iter().copied())).unwrap()
}

/// An environment of `pairs` and a `HOME`: the system's temporary folder, which exists and
/// is writable, so the start-up checks (which only look, and create nothing) pass.
fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let mut map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    map.entry("HOME".to_owned()).or_insert_with(root);
    move |name| map.get(name).cloned()
}

fn root() -> String {
    std::env::temp_dir().to_string_lossy().into_owned()
}

#[test]
fn flags_beat_environment_and_both_positions_work() {
    let root = root();
    let vars = env(&[
        ("AUTOGPT_SHIM_SESSION_ID", "from-env"),
        ("AUTOGPT_SHIM_PLATFORM_URL", "https://env.example"),
        ("AUTOGPT_SHIM_ALLOWED_ROOT", "/definitely/missing"),
    ]);
    let cli = parse(&[
        "--session-id",
        "s-1",
        "--allowed-root",
        &root,
        "start",
        "--platform-url",
        "http://127.0.0.1:9/",
    ]);
    let config = resolve(&cli, &vars).unwrap();
    assert_eq!(config.session_id.as_deref(), Some("s-1"));
    assert_eq!(config.url, "ws://127.0.0.1:9/ws/local-executor/s-1");
    assert_eq!(config.allowed_root, PathBuf::from(&root));

    let cli = parse(&["start", "--allowed-root", &root]);
    let config = resolve(&cli, &vars).unwrap();
    assert_eq!(config.session_id.as_deref(), Some("from-env"));
    assert_eq!(config.url, "wss://env.example/ws/local-executor/from-env");
    assert_eq!(config.log_level, "info");
    assert_eq!(config.backoff, Backoff::default());
    assert!(config.token.is_none());
}

#[test]
fn refusals_are_preflight_failures() {
    let root = root();
    let none = env(&[]);
    let cases: &[&[&str]] = &[
        &[
            "--session-id",
            "s",
            "--allowed-root",
            &root,
            "start",
            "--enable-recording",
        ],
        &["--session-id", "s", "--allowed-root", &root, "doctor"],
        &[
            "--session-id",
            "s",
            "--allowed-root",
            &root,
            "--config",
            "/definitely/missing/config.toml",
            "start",
        ],
        &[
            "--session-id",
            "s",
            "--allowed-root",
            &root,
            "--token-file",
            "/definitely/missing/token",
            "start",
        ],
        &["--session-id", "../x", "--allowed-root", &root, "start"],
        &[
            "--session-id",
            "s",
            "--allowed-root",
            &root,
            "--platform-url",
            "ftp://x",
            "start",
        ],
        &[
            "--session-id",
            "s",
            "--allowed-root",
            &root,
            "--log-level",
            "LOUD",
            "start",
        ],
    ];
    for args in cases {
        let refusal = resolve(&parse(args), &none).unwrap_err();
        assert_eq!(refusal.code, EXIT_PREFLIGHT, "{args:?}");
        assert_eq!(refusal.message.lines().count(), 1, "{args:?}");
    }
}

#[test]
fn no_session_id_resolves_to_control_mode_at_the_control_endpoint() {
    let root = root();
    let none = env(&[]);
    for args in [
        &[
            "--allowed-root",
            root.as_str(),
            "--platform-url",
            "https://p.example",
            "start",
        ][..],
        &[
            "--session-id",
            "   ",
            "--platform-url",
            "https://p.example",
            "--allowed-root",
            root.as_str(),
            "start",
        ],
    ] {
        let config = resolve(&parse(args), &none).unwrap();
        assert_eq!(config.session_id, None, "{args:?}");
        assert_eq!(config.url, "wss://p.example/ws/local-executor");
    }
}

#[test]
fn token_and_reconnect_settings_come_from_the_environment() {
    let root = root();
    let vars = env(&[
        ("AUTOGPT_SHIM_TOKEN", " secret-token "),
        ("AUTOGPT_SHIM_RECONNECT_BASE_DELAY", "0.05"),
        ("AUTOGPT_SHIM_RECONNECT_JITTER_SECONDS", "0"),
    ]);
    let cli = parse(&[
        "--session-id",
        "s",
        "--allowed-root",
        &root,
        "--log-level",
        "warning",
        "start",
    ]);
    let config = resolve(&cli, &vars).unwrap();
    assert_eq!(config.token, Token::from_configured(Some("secret-token")));
    assert!(!format!("{config:?}").contains("secret-token"));
    assert_eq!(config.backoff.base, Duration::from_millis(50));
    assert_eq!(config.backoff.jitter, Duration::ZERO);
    assert_eq!(config.log_level, "warn");

    let bad = env(&[("AUTOGPT_SHIM_RECONNECT_BASE_DELAY", "-1")]);
    assert_eq!(resolve(&cli, &bad).unwrap_err().code, EXIT_PREFLIGHT);
}

#[test]
fn start_switches_reach_the_config() {
    let root = root();
    let cli = parse(&[
        "--session-id",
        "s",
        "--allowed-root",
        &root,
        "start",
        "--enable-shell",
        "--enable-clipboard",
    ]);
    let config = resolve(&cli, &env(&[])).unwrap();
    assert!(config.config.enable_shell);
    assert!(config.config.enable_clipboard);
    assert!(!config.config.enable_computer_use);
    assert!(config.warnings.is_empty());

    // The environment can switch recording on too, and start-up still refuses it.
    let cli = parse(&["--session-id", "s", "--allowed-root", &root, "start"]);
    let vars = env(&[("AUTOGPT_SHIM_ENABLE_RECORDING", "yes")]);
    let refusal = resolve(&cli, &vars).unwrap_err();
    assert_eq!(refusal.code, EXIT_PREFLIGHT);
    assert!(
        refusal.message.contains("enable_recording"),
        "{}",
        refusal.message
    );

    // Configuration errors are one-line preflight refusals naming the variable.
    let vars = env(&[("AUTOGPT_SHIM_MAX_CONCURRENT", "0")]);
    let refusal = resolve(&cli, &vars).unwrap_err();
    assert_eq!(refusal.code, EXIT_PREFLIGHT);
    assert!(
        refusal
            .message
            .starts_with("configuration: AUTOGPT_SHIM_MAX_CONCURRENT"),
        "{}",
        refusal.message
    );

    // Every problem, one line each, not the first.
    let cli = parse(&[
        "--session-id",
        "s",
        "--allowed-root",
        "/definitely/missing/root",
        "--platform-url",
        "127.0.0.1:8770",
        "--token-file",
        "/definitely/missing/token",
        "start",
    ]);
    let refusal = resolve(&cli, &env(&[])).unwrap_err();
    let lines: Vec<&str> = refusal.message.lines().collect();
    assert_eq!(lines.len(), 3, "{}", refusal.message);
    assert!(lines[0].starts_with("allowed root: "), "{lines:?}");
    assert!(lines[1].starts_with("token: the token file "), "{lines:?}");
    assert!(
        lines[2].contains("did you mean ws://127.0.0.1:8770?"),
        "{lines:?}"
    );
}

#[test]
fn config_and_token_file_are_global_flags() {
    for args in [
        &["--config", "/c.toml", "--token-file", "/t", "status"][..],
        &["status", "--config", "/c.toml", "--token-file", "/t"][..],
    ] {
        let overrides = overrides(&parse(args));
        assert_eq!(overrides.config_file, Some(PathBuf::from("/c.toml")));
        assert_eq!(overrides.token_file, Some(PathBuf::from("/t")));
        assert_eq!(overrides.enable_shell, None);
    }
    let refusal = load_config(
        &parse(&["--config", "/definitely/missing.toml", "status"]),
        &env(&[]),
    )
    .unwrap_err();
    assert_eq!(refusal.code, EXIT_PREFLIGHT);
    assert!(refusal.message.contains("/definitely/missing.toml"));
}

#[test]
fn install_takes_the_switches_and_force() {
    let cli = parse(&[
        "--platform-url",
        "https://p.example",
        "install",
        "--enable-shell",
        "--enable-local-llm",
        "--force",
    ]);
    let Command::Install { force, .. } = &cli.command else {
        panic!("{cli:?}");
    };
    assert!(*force);
    let overrides = overrides(&cli);
    assert_eq!(overrides.enable_shell, Some(true));
    assert_eq!(overrides.enable_local_llm, Some(true));
    assert_eq!(overrides.enable_hardware, None);
    assert_eq!(overrides.platform_url.as_deref(), Some("https://p.example"));
}

#[test]
fn every_subcommand_parses() {
    assert!(matches!(parse(&["doctor"]).command, Command::Doctor));
    assert!(matches!(
        parse(&["status"]).command,
        Command::Status { json: false }
    ));
    assert!(matches!(
        parse(&["status", "--json"]).command,
        Command::Status { json: true }
    ));
    assert!(matches!(parse(&["uninstall"]).command, Command::Uninstall));
    assert!(matches!(parse(&["revoke"]).command, Command::Revoke));
    assert!(matches!(
        parse(&["auth"]).command,
        Command::Auth { no_browser: false }
    ));
    assert!(matches!(
        parse(&["auth", "--no-browser"]).command,
        Command::Auth { no_browser: true }
    ));
    for (args, expected) in [
        (&["install"][..], true),
        (&["install", "--at-login"][..], true),
        (&["install", "--at-login=true"][..], true),
        (&["install", "--at-login=false"][..], false),
    ] {
        let Command::Install { at_login, .. } = parse(args).command else {
            panic!("{args:?}");
        };
        assert_eq!(at_login, expected, "{args:?}");
    }
    let audit = |args: &[&str]| match parse(args).command {
        Command::Audit { command } => command,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        audit(&["audit", "tail"]),
        AuditCommand::Tail {
            lines: None,
            no_follow: false
        }
    );
    assert_eq!(
        audit(&["audit", "tail", "-n", "5", "--no-follow"]),
        AuditCommand::Tail {
            lines: Some(5),
            no_follow: true
        }
    );
    assert_eq!(
        audit(&["audit", "tail", "--lines=0"]),
        AuditCommand::Tail {
            lines: Some(0),
            no_follow: false
        }
    );
    assert_eq!(
        audit(&["audit", "show", "42"]),
        AuditCommand::Show { seq: 42 }
    );
    assert_eq!(audit(&["audit", "verify"]), AuditCommand::Verify);
    assert_eq!(audit(&["audit", "verify-all"]), AuditCommand::VerifyAll);
    assert_eq!(
        audit(&["audit", "export"]),
        AuditCommand::Export { output: None }
    );
    assert_eq!(
        audit(&["audit", "export", "--output", "x.zip"]),
        AuditCommand::Export {
            output: Some(PathBuf::from("x.zip"))
        }
    );
    assert_eq!(audit(&["audit", "rotate"]), AuditCommand::Rotate);
    assert_eq!(
        audit(&["audit", "prune"]),
        AuditCommand::Prune {
            older_than: "90d".to_owned()
        }
    );
    assert_eq!(
        audit(&["audit", "prune", "--older-than", "12h"]),
        AuditCommand::Prune {
            older_than: "12h".to_owned()
        }
    );

    let bad: &[&[&str]] = &[
        &["install", "--at-login=maybe"],
        &["audit", "show"],
        &["audit", "show", "-1"],
        &["audit"],
        &["doctor", "--enable-shell"],
        &[],
    ];
    for args in bad {
        let parsed =
            Cli::try_parse_from(std::iter::once("autogpt-shim").chain(args.iter().copied()));
        assert!(parsed.is_err(), "{args:?}");
    }
}

#[test]
fn mcp_takes_starts_switches_that_have_a_tool_and_keeps_them_its_own() {
    let cli = parse(&[
        "mcp",
        "--enable-shell",
        "--enable-clipboard",
        "--tools",
        "read_file,run_command",
        "--exclude-tools",
        "stat",
    ]);
    assert_eq!(cli.command.name(), "mcp");
    let Command::Mcp(args) = &cli.command else {
        panic!("not mcp");
    };
    assert!(args.enable_shell && args.enable_clipboard && !args.enable_computer_use);
    assert_eq!(
        args.tools.as_deref(),
        Some(&["read_file".to_owned(), "run_command".to_owned()][..])
    );
    assert_eq!(args.exclude_tools, ["stat"]);
    // The MCP face's switches are not the daemon's configuration.
    let layer = overrides(&cli);
    assert_eq!(layer.enable_shell, None);
    assert_eq!(layer.enable_clipboard, None);
    // Switches without a tool are not flags of `mcp`.
    let refused = Cli::try_parse_from(["autogpt-shim", "mcp", "--enable-local-llm"]);
    assert!(refused.is_err());
}
