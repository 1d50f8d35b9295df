//! Tests of the configuration: precedence, every refusal, the file and token rules and the
//! per-OS paths.

use std::collections::HashMap;

#[cfg(unix)]
use local_core::machine::own_files::PRIVATE_FILE_MODE;
use local_core::machine::own_files::write_atomic;

use super::paths::{
    Os, config_path_for, default_allowed_root_for, default_audit_log_path_for, state_dir_for,
};
use super::*;

/// Each refusal a person reads says what is wrong and what to do, in words: no Rust
/// debug text and no `(os error N)`.
#[test]
fn config_refusals_name_their_remedy_without_debug_noise() {
    let path = PathBuf::from("/home/me/.config/autogpt-local-executor/config.toml");
    let denied = io::Error::from_raw_os_error(13);
    let cases: [(ConfigError, &str); 6] = [
        (
            ConfigError::MissingFile { path: path.clone() },
            "autogpt-shim install",
        ),
        (
            ConfigError::ReadFile {
                path: path.clone(),
                source: denied,
            },
            "chmod 600",
        ),
        (
            ConfigError::NotUtf8 { path: path.clone() },
            "save it as UTF-8",
        ),
        (
            ConfigError::Syntax {
                path: path.clone(),
                line: 3,
                column: 7,
                message: "expected `=`".to_owned(),
            },
            "fix that line",
        ),
        (
            ConfigError::EmptyToken { path: path.clone() },
            "autogpt-shim auth",
        ),
        (
            ConfigError::TokenFile(PrivateFileError::Io {
                path,
                source: io::Error::from_raw_os_error(2),
            }),
            "does not exist: create it",
        ),
    ];
    for (error, remedy) in cases {
        let text = error.to_string();
        assert!(text.contains(remedy), "{text}");
        for noise in ["{", "Os {", "Error(", "os error", "Kind("] {
            assert!(!text.contains(noise), "{noise} in {text}");
        }
    }
}

type Check = fn(&ShimConfig) -> bool;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

/// A scratch directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "shim-config-{tag}-{}",
            local_core::secret::new_id().simple()
        ));
        own_files::ensure_dir(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, content: &str, mode: u32) -> PathBuf {
        let path = self.0.join(name);
        write_atomic(&path, content.as_bytes(), mode).unwrap();
        path
    }

    fn path(&self) -> String {
        self.0.to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Tests clean up directly; only the code under test is held to own_files.
        #[allow(clippy::disallowed_methods)]
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn explicit(path: &Path) -> Overrides {
    Overrides {
        config_file: Some(path.to_path_buf()),
        ..Overrides::default()
    }
}

fn load_file(content: &str) -> (Result<(ShimConfig, Vec<String>), ConfigError>, TempDir) {
    let dir = TempDir::new("file");
    let path = dir.write("config.toml", content, 0o644);
    (load(&explicit(&path), &env(&[])), dir)
}

#[test]
fn defaults_follow_the_reference_table() {
    let config = ShimConfig::defaults(&env(&[("HOME", "/home/u")]));
    let expected = ShimConfig {
        platform_url: "wss://platform.autogpt.net".to_owned(),
        platform_ws_url: None,
        platform_oauth_url: None,
        oauth_client_id: "autogpt-local-executor".to_owned(),
        oauth_redirect_port: 41899,
        session_id: None,
        machine_id: None,
        display_name: system_hostname(),
        allowed_root: Some(PathBuf::from("/home/u/autogpt-workspace")),
        audit_log_path: Some(PathBuf::from(
            "/home/u/.local/state/autogpt-local-executor/audit.log",
        )),
        enable_shell: false,
        enable_computer_use: false,
        enable_local_llm: false,
        enable_hardware: false,
        enable_recording: false,
        enable_clipboard: false,
        enable_clipboard_read_foreign: false,
        max_concurrent: NonZeroU32::new(4).unwrap(),
        max_concurrent_commands: NonZeroU32::new(10).unwrap(),
        command_timeout_seconds: NonZeroU64::new(30).unwrap(),
        max_file_size_bytes: NonZeroU64::new(10 * 1024 * 1024).unwrap(),
        max_commands_per_minute: NonZeroU32::new(60).unwrap(),
        max_screenshots_per_minute: NonZeroU32::new(10).unwrap(),
        reconnect_base_delay: Duration::from_secs(1),
        reconnect_max_delay: Duration::from_secs(60),
        reconnect_jitter_seconds: Duration::from_secs(5),
        ollama_url: "http://localhost:11434".to_owned(),
        local_llm_backend: LlmBackend::Ollama,
        token_file: None,
        token: None,
        config_file: None,
        idle_session_timeout: Duration::from_secs(600),
        shell_sandbox: SandboxMode::Off,
        mcp: McpSection::default(),
    };
    if cfg!(target_os = "linux") {
        assert_eq!(config, expected);
    }
    assert_eq!(config.backoff(), Backoff::default());

    // Without a home directory there is nothing to default the paths to.
    let bare = ShimConfig::defaults(&env(&[]));
    assert_eq!(bare.allowed_root, None);
    assert_eq!(bare.audit_log_path, None);
    assert_eq!(config_path(&env(&[])), None);
}

// Unix paths: a relative path joins `/cwd` with `/`.
#[cfg(unix)]
#[test]
fn explicit_settings_are_the_flags_and_variables_given() {
    let vars = env(&[
        ("HOME", "/home/u"),
        ("AUTOGPT_SHIM_PLATFORM_URL", "https://env.example"),
        ("AUTOGPT_SHIM_MAX_CONCURRENT", "3"),
        ("AUTOGPT_SHIM_RECONNECT_BASE_DELAY", "0.5"),
        ("AUTOGPT_SHIM_TOKEN", "never-written"),
        ("AUTOGPT_SHIM_SESSION_ID", " "),
    ]);
    let overrides = Overrides {
        config_file: Some(PathBuf::from("/c.toml")),
        platform_url: Some("https://flag.example".to_owned()),
        allowed_root: Some(PathBuf::from("work")),
        token_file: Some(PathBuf::from("/t/token")),
        enable_shell: Some(true),
        ..Overrides::default()
    };
    let table = explicit_settings(&overrides, &vars, Path::new("/cwd")).unwrap();
    let text = toml::to_string(&table).unwrap();
    assert_eq!(
        text,
        "allowed_root = \"/cwd/work\"\n\
         enable_shell = true\n\
         max_concurrent = 3\n\
         platform_url = \"https://flag.example\"\n\
         reconnect_base_delay = 0.5\n\
         token_file = \"/t/token\"\n"
    );
    assert!(!text.contains("never-written"));

    // Written and read back, the file means what the flags and variables meant.
    let mut expected = ShimConfig::defaults(&vars);
    let mut problems = Vec::new();
    apply_env(&mut expected, &vars, &mut Vec::new(), &mut problems);
    apply_overrides(&mut expected, &overrides, &mut Vec::new(), &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    expected.token = None;
    expected.allowed_root = Some(PathBuf::from("/cwd/work"));
    let (read, _) = parse_file(Path::new("/c.toml"), &text, &vars).unwrap();
    assert_eq!(
        ShimConfig {
            config_file: None,
            ..read
        },
        expected
    );

    let bad = env(&[("AUTOGPT_SHIM_MAX_CONCURRENT", "0")]);
    let err = explicit_settings(&Overrides::default(), &bad, Path::new("/")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("AUTOGPT_SHIM_MAX_CONCURRENT must be"),
        "{err}"
    );
}

#[test]
fn display_name_defaults_to_a_valid_hostname_only() {
    let named = ShimConfig::defaults(&env(&[("HOSTNAME", " box-1 ")]));
    assert_eq!(named.display_name.as_deref(), Some("box-1"));
    let windows = ShimConfig::defaults(&env(&[("COMPUTERNAME", "DESKTOP-7")]));
    assert_eq!(windows.display_name.as_deref(), Some("DESKTOP-7"));
    let long = "h".repeat(129);
    // An unusable variable falls back to the system's name, as an absent one does.
    let too_long = ShimConfig::defaults(&env(&[("HOSTNAME", &long)]));
    assert_eq!(too_long.display_name, system_hostname());
    let unexported = ShimConfig::defaults(&env(&[]));
    assert_eq!(unexported.display_name, system_hostname());
    #[cfg(unix)]
    {
        // The kernel's node name, the same as `uname -n` prints.
        let node = rustix::system::uname();
        let node = node.nodename().to_str().unwrap();
        assert!(!node.is_empty());
        assert_eq!(system_hostname().as_deref(), Some(node));
        assert_eq!(unexported.display_name.as_deref(), Some(node));
    }

    let exact = "n".repeat(128);
    let vars = env(&[("AUTOGPT_SHIM_DISPLAY_NAME", &exact)]);
    let (config, _) = load(&Overrides::default(), &vars).unwrap();
    assert_eq!(config.display_name.as_deref(), Some(exact.as_str()));
    let vars = env(&[("AUTOGPT_SHIM_DISPLAY_NAME", &long)]);
    let err = load(&Overrides::default(), &vars).unwrap_err();
    assert!(
        err.to_string().contains("AUTOGPT_SHIM_DISPLAY_NAME"),
        "{err}"
    );
    let (result, _dir) = load_file("display_name = \"\"\n");
    assert!(result.unwrap_err().to_string().contains("`display_name`"));
}

#[test]
fn precedence_is_flags_then_environment_then_file_then_defaults() {
    let dir = TempDir::new("precedence");
    let path = dir.write(
        "config.toml",
        r#"
platform_url = "https://file.example"
session_id = "from-file"
max_concurrent = 5
command_timeout_seconds = 7
enable_shell = true
enable_local_llm = true
reconnect_base_delay = 0.25
"#,
        0o644,
    );
    let vars = env(&[
        ("AUTOGPT_SHIM_PLATFORM_URL", "https://env.example"),
        ("AUTOGPT_SHIM_SESSION_ID", "from-env"),
        ("AUTOGPT_SHIM_MAX_CONCURRENT", "6"),
        ("AUTOGPT_SHIM_ENABLE_SHELL", "off"),
        ("AUTOGPT_SHIM_RECONNECT_BASE_DELAY", "   "),
    ]);

    let (config, warnings) = load(&explicit(&path), &vars).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.config_file.as_deref(), Some(path.as_path()));
    assert_eq!(config.platform_url, "https://env.example");
    assert_eq!(config.session_id.as_deref(), Some("from-env"));
    assert_eq!(config.max_concurrent.get(), 6);
    assert_eq!(config.command_timeout_seconds.get(), 7);
    assert!(!config.enable_shell);
    assert!(config.enable_local_llm);
    // A blank variable is unset, so the file's value stands.
    assert_eq!(config.reconnect_base_delay, Duration::from_millis(250));
    assert_eq!(config.max_file_size_bytes, DEFAULT_MAX_FILE_SIZE_BYTES);

    let flags = Overrides {
        platform_url: Some("http://127.0.0.1:9".to_owned()),
        session_id: Some("from-flag".to_owned()),
        enable_shell: Some(true),
        ..explicit(&path)
    };
    let (config, _) = load(&flags, &vars).unwrap();
    assert_eq!(config.platform_url, "http://127.0.0.1:9");
    assert_eq!(config.session_id.as_deref(), Some("from-flag"));
    assert!(config.enable_shell);
    assert_eq!(config.max_concurrent.get(), 6);

    // A blank flag asks for control mode even over the environment and the file.
    let blank = Overrides {
        session_id: Some("  ".to_owned()),
        ..explicit(&path)
    };
    assert_eq!(load(&blank, &vars).unwrap().0.session_id, None);
}

/// One valid non-default value per field: (key, environment text, TOML literal, check).
const EVERY_FIELD: &[(&str, &str, &str, Check)] = &[
    (
        "platform_url",
        "https://x.example",
        "\"https://x.example\"",
        |c| c.platform_url == "https://x.example",
    ),
    (
        "platform_ws_url",
        "wss://ws.example/ws",
        "\"wss://ws.example/ws\"",
        |c| c.platform_ws_url.as_deref() == Some("wss://ws.example/ws"),
    ),
    (
        "platform_oauth_url",
        "https://id.example/o",
        "\"https://id.example/o\"",
        |c| c.platform_oauth_url.as_deref() == Some("https://id.example/o"),
    ),
    ("oauth_client_id", "client-9", "\"client-9\"", |c| {
        c.oauth_client_id == "client-9"
    }),
    ("oauth_redirect_port", "65524", "65524", |c| {
        c.oauth_redirect_port == 65524
    }),
    ("session_id", "s-9", "\"s-9\"", |c| {
        c.session_id.as_deref() == Some("s-9")
    }),
    ("machine_id", "m-9", "\"m-9\"", |c| {
        c.machine_id.as_deref() == Some("m-9")
    }),
    ("display_name", "Desk 9", "\"Desk 9\"", |c| {
        c.display_name.as_deref() == Some("Desk 9")
    }),
    ("allowed_root", "/srv/root", "\"/srv/root\"", |c| {
        c.allowed_root.as_deref() == Some(Path::new("/srv/root"))
    }),
    (
        "audit_log_path",
        "/srv/audit.log",
        "\"/srv/audit.log\"",
        |c| c.audit_log_path.as_deref() == Some(Path::new("/srv/audit.log")),
    ),
    ("enable_shell", "yes", "true", |c| c.enable_shell),
    ("enable_computer_use", "on", "true", |c| {
        c.enable_computer_use
    }),
    ("enable_local_llm", "1", "true", |c| c.enable_local_llm),
    ("enable_hardware", "on", "true", |c| c.enable_hardware),
    ("max_concurrent", "2", "2", |c| c.max_concurrent.get() == 2),
    ("max_concurrent_commands", "3", "3", |c| {
        c.max_concurrent_commands.get() == 3
    }),
    ("command_timeout_seconds", "4", "4", |c| {
        c.command_timeout_seconds.get() == 4
    }),
    ("max_file_size_bytes", "5", "5", |c| {
        c.max_file_size_bytes.get() == 5
    }),
    ("max_commands_per_minute", "6", "6", |c| {
        c.max_commands_per_minute.get() == 6
    }),
    ("reconnect_base_delay", "0.5", "0.5", |c| {
        c.reconnect_base_delay == Duration::from_millis(500)
    }),
    ("reconnect_max_delay", "9", "9", |c| {
        c.reconnect_max_delay == Duration::from_secs(9)
    }),
    ("reconnect_jitter_seconds", "0", "0.0", |c| {
        c.reconnect_jitter_seconds == Duration::ZERO
    }),
    (
        "ollama_url",
        "https://llm.example:1",
        "\"https://llm.example:1\"",
        |c| c.ollama_url == "https://llm.example:1",
    ),
    (
        "local_llm_backend",
        "openai-compatible",
        "\"openai-compatible\"",
        |c| c.local_llm_backend == LlmBackend::OpenAiCompatible,
    ),
    ("max_screenshots_per_minute", "7", "7", |c| {
        c.max_screenshots_per_minute.get() == 7
    }),
    ("enable_clipboard", "TRUE", "true", |c| c.enable_clipboard),
    ("enable_clipboard_read_foreign", "True", "true", |c| {
        c.enable_clipboard_read_foreign
    }),
    ("enable_recording", "true", "true", |c| c.enable_recording),
    ("token_file", "/srv/token", "\"/srv/token\"", |c| {
        c.token_file.as_deref() == Some(Path::new("/srv/token"))
    }),
    ("idle_session_timeout", "1.5", "1.5", |c| {
        c.idle_session_timeout == Duration::from_millis(1500)
    }),
    ("shell_sandbox", "strict", "\"strict\"", |c| {
        c.shell_sandbox == SandboxMode::Strict
    }),
];

#[test]
fn the_shell_sandbox_follows_the_usual_precedence_and_refuses_other_names() {
    let dir = TempDir::new("sandbox");
    let path = dir.write("config.toml", "shell_sandbox = \"workspace\"\n", 0o644);
    let (config, _) = load(&explicit(&path), &env(&[])).unwrap();
    assert_eq!(config.shell_sandbox, SandboxMode::Workspace);
    let vars = env(&[("AUTOGPT_SHIM_SHELL_SANDBOX", "strict")]);
    let (config, _) = load(&explicit(&path), &vars).unwrap();
    assert_eq!(config.shell_sandbox, SandboxMode::Strict);
    let flag = Overrides {
        shell_sandbox: Some("off".to_owned()),
        ..explicit(&path)
    };
    assert_eq!(
        load(&flag, &vars).unwrap().0.shell_sandbox,
        SandboxMode::Off
    );

    let bad = Overrides {
        shell_sandbox: Some("on".to_owned()),
        ..Overrides::default()
    };
    assert_eq!(
        load(&bad, &env(&[])).unwrap_err().to_string(),
        "--shell-sandbox must be `off`, `workspace` or `strict`"
    );
    let bad_env = env(&[("AUTOGPT_SHIM_SHELL_SANDBOX", "Strict")]);
    assert_eq!(
        load(&Overrides::default(), &bad_env)
            .unwrap_err()
            .to_string(),
        "AUTOGPT_SHIM_SHELL_SANDBOX must be `off`, `workspace` or `strict`"
    );
    let (result, _dir) = load_file("shell_sandbox = true\n");
    assert!(
        result
            .unwrap_err()
            .to_string()
            .ends_with("must be `off`, `workspace` or `strict`")
    );
}

#[test]
fn every_field_has_a_file_key_and_an_environment_variable() {
    let mut covered: Vec<&str> = EVERY_FIELD.iter().map(|(key, ..)| *key).collect();
    covered.sort_unstable();
    let mut all: Vec<&str> = Field::ALL.iter().map(|field| field.name()).collect();
    all.sort_unstable();
    assert_eq!(covered, all);

    let defaults = ShimConfig::defaults(&env(&[]));
    for (key, text, literal, check) in EVERY_FIELD {
        let field = Field::from_name(key).unwrap();
        let name = field.env_var();
        assert_eq!(name, format!("AUTOGPT_SHIM_{}", key.to_uppercase()));
        assert!(!check(&defaults), "{key}: the table's value is the default");

        let (config, warnings) = load(&Overrides::default(), &env(&[(&name, text)]))
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        assert!(check(&config), "{name}");
        assert!(warnings.is_empty(), "{name}: {warnings:?}");

        let (result, _dir) = load_file(&format!("{key} = {literal}\n"));
        let (config, warnings) = result.unwrap_or_else(|err| panic!("{key}: {err}"));
        assert!(check(&config), "{key} in the file");
        assert!(warnings.is_empty(), "{key}: {warnings:?}");
    }
}

#[test]
fn booleans_accept_the_usual_spellings_only() {
    for (text, expected) in [
        ("true", true),
        ("TRUE", true),
        ("Yes", true),
        ("on", true),
        ("1", true),
        (" false ", false),
        ("No", false),
        ("OFF", false),
        ("0", false),
    ] {
        let vars = env(&[("AUTOGPT_SHIM_ENABLE_SHELL", text)]);
        let (config, _) = load(&Overrides::default(), &vars).unwrap();
        assert_eq!(config.enable_shell, expected, "{text:?}");
    }
    for text in ["maybe", "2", "tru", "y", "enabled", "hunter2"] {
        let vars = env(&[("AUTOGPT_SHIM_ENABLE_SHELL", text)]);
        let message = load(&Overrides::default(), &vars).unwrap_err().to_string();
        assert!(
            message.starts_with("AUTOGPT_SHIM_ENABLE_SHELL must be"),
            "{message}"
        );
        assert!(!message.contains("hunter2"), "{message}");
    }
    // The file has real booleans; a string there is a type error.
    let (result, _dir) = load_file("enable_shell = \"yes\"\n");
    let message = result.unwrap_err().to_string();
    assert!(message.contains("`enable_shell`"), "{message}");
}

#[test]
fn the_mcp_section_is_read_apart_from_the_daemons_switches() {
    let (result, _dir) = load_file(
        "enable_shell = true\n[mcp]\nenable_computer_use = true\nexclude_tools = [\"delete\"]\n",
    );
    let (config, warnings) = result.unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(config.enable_shell && !config.mcp.enable_shell);
    assert!(config.mcp.enable_computer_use);
    assert_eq!(config.mcp.exclude_tools, ["delete"]);
    assert_eq!(config.mcp.tools, None);
    for bad in [
        "[mcp]\nenable_shell = \"yes\"\n",
        "[mcp]\nshell = true\n",
        "mcp = 1\n",
    ] {
        let (result, _dir) = load_file(bad);
        let message = result.unwrap_err().to_string();
        assert!(
            message.starts_with("the [mcp] section of the config file"),
            "{message}"
        );
        assert!(!message.contains("yes"), "{message}");
    }
}

#[test]
fn zero_negative_and_oversized_limits_are_refused_by_name() {
    let limits = [
        "max_concurrent",
        "max_concurrent_commands",
        "command_timeout_seconds",
        "max_file_size_bytes",
        "max_commands_per_minute",
        "max_screenshots_per_minute",
    ];
    for key in limits {
        let name = Field::from_name(key).unwrap().env_var();
        for bad in ["0", "-3", "1.5", "many", "99999999999999999999"] {
            let err = load(&Overrides::default(), &env(&[(&name, bad)])).unwrap_err();
            assert!(
                matches!(&err, ConfigError::Invalid { origin: Origin::Env { name: n }, .. } if *n == name),
                "{name}={bad}: {err}"
            );
        }
        for bad in ["0", "-3", "2.0", "\"4\""] {
            let (result, _dir) = load_file(&format!("{key} = {bad}\n"));
            let err = result.unwrap_err();
            assert!(err.to_string().contains(&format!("`{key}`")), "{err}");
        }
    }
    let vars = env(&[("AUTOGPT_SHIM_MAX_CONCURRENT", "4294967296")]);
    assert!(load(&Overrides::default(), &vars).is_err());
    // The login tries the port and the 11 after it, so the last usable first port is
    // 65524.
    let port = |value: &str| {
        load(
            &Overrides::default(),
            &env(&[("AUTOGPT_SHIM_OAUTH_REDIRECT_PORT", value)]),
        )
        .map(|(config, _)| config.oauth_redirect_port)
    };
    assert_eq!(port("65524").unwrap(), 65524);
    assert!(port("65525").is_err());
    assert!(port("0").is_err());
    let vars = env(&[("AUTOGPT_SHIM_MAX_FILE_SIZE_BYTES", "4294967296")]);
    assert!(load(&Overrides::default(), &vars).is_ok());

    for key in [
        "reconnect_base_delay",
        "reconnect_max_delay",
        "reconnect_jitter_seconds",
    ] {
        let name = Field::from_name(key).unwrap().env_var();
        for bad in ["-1", "NaN", "inf", "soon"] {
            let message = load(&Overrides::default(), &env(&[(&name, bad)]))
                .unwrap_err()
                .to_string();
            assert!(message.contains(&name), "{message}");
        }
        let (result, _dir) = load_file(&format!("{key} = -0.5\n"));
        assert!(
            result
                .unwrap_err()
                .to_string()
                .contains(&format!("`{key}`"))
        );
    }
}

#[test]
fn urls_session_ids_and_paths_are_checked_without_echoing_them() {
    let secret_url = "ftp://user:hunter2@example";
    let cases = [
        ("AUTOGPT_SHIM_PLATFORM_URL", secret_url),
        ("AUTOGPT_SHIM_PLATFORM_WS_URL", secret_url),
        ("AUTOGPT_SHIM_OLLAMA_URL", secret_url),
        ("AUTOGPT_SHIM_SESSION_ID", "../hunter2"),
        ("AUTOGPT_SHIM_MACHINE_ID", "hunter2\nx"),
    ];
    for (name, value) in cases {
        let message = load(&Overrides::default(), &env(&[(name, value)]))
            .unwrap_err()
            .to_string();
        assert!(message.starts_with(name), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
        assert_eq!(message.lines().count(), 1);
    }
    let flags = Overrides {
        allowed_root: Some(PathBuf::new()),
        ..Overrides::default()
    };
    let message = load(&flags, &env(&[])).unwrap_err().to_string();
    assert!(message.starts_with("--allowed-root"), "{message}");
}

/// `127.0.0.1:8770` for `--platform-url`: the refusal says which scheme it lacks, and repeats
/// the value only when it cannot hold a credential.
#[test]
fn a_platform_url_without_a_scheme_gets_the_scheme_it_lacks() {
    let flags = |url: &str| Overrides {
        platform_url: Some(url.to_owned()),
        ..Overrides::default()
    };
    let message = |url: &str| load(&flags(url), &env(&[])).unwrap_err().to_string();
    assert_eq!(
        message("127.0.0.1:8770"),
        "--platform-url has no scheme: did you mean ws://127.0.0.1:8770? (ws:// for a platform on this machine, wss:// for one across the network)"
    );
    assert!(message("localhost:8770/base").contains("did you mean ws://localhost:8770/base?"));
    assert!(message("[::1]:8770").contains("did you mean ws://[::1]:8770?"));
    assert!(message("platform.example").contains("did you mean wss://platform.example?"));
    let secret = message("user:hunter2@platform.example");
    assert!(
        secret.contains("put wss:// in front of it") && !secret.contains("hunter2"),
        "{secret}"
    );
    // The same from the environment and the file.
    let from_env = load(
        &Overrides::default(),
        &env(&[("AUTOGPT_SHIM_PLATFORM_URL", "127.0.0.1:1")]),
    )
    .unwrap_err()
    .to_string();
    assert!(
        from_env.starts_with("AUTOGPT_SHIM_PLATFORM_URL has no scheme: did you mean ws://"),
        "{from_env}"
    );
    let (loaded, _dir) = load_file("platform_url = \"127.0.0.1:1\"\n");
    assert!(
        loaded
            .unwrap_err()
            .to_string()
            .contains("`platform_url` in "),
        "a file key names its file"
    );
}

/// Every refused value is reported, each under its own key, and the configuration keeps
/// the lower layer's value for it.
#[test]
fn load_all_reports_every_problem_not_the_first() {
    let flags = Overrides {
        platform_url: Some("127.0.0.1:8770".to_owned()),
        session_id: Some("../x".to_owned()),
        ..Overrides::default()
    };
    let vars = env(&[
        ("HOME", "/home/me"),
        ("AUTOGPT_SHIM_MAX_CONCURRENT", "0"),
        ("AUTOGPT_SHIM_ENABLE_SHELL", "maybe"),
    ]);
    let loaded = load_all(&flags, &vars);
    let keys: Vec<String> = loaded
        .problems
        .iter()
        .map(|problem| match problem {
            ConfigError::Invalid { origin, .. } | ConfigError::NoScheme { origin, .. } => {
                origin.key()
            }
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(
        keys,
        [
            "enable_shell",
            "max_concurrent",
            "platform_url",
            "session_id"
        ]
    );
    assert_eq!(
        loaded.config.platform_url,
        crate::link::DEFAULT_PLATFORM_URL
    );
    assert_eq!(loaded.config.max_concurrent, DEFAULT_MAX_CONCURRENT);
    let first = load(&flags, &vars).unwrap_err().to_string();
    assert_eq!(first, loaded.problems[0].to_string());
}

/// A missing token file is named, with what to do; no `entity not found`.
#[test]
fn a_missing_token_file_says_so_in_words() {
    let dir = TempDir::new("token-missing");
    let absent = dir.0.join("absent");
    let text = read_token_file(&absent).unwrap_err().to_string();
    assert_eq!(
        text,
        format!(
            "the token file {} does not exist: create it holding the platform's token, readable only by you (chmod 600), or pass --token-file with the right file",
            absent.display()
        )
    );
}

#[test]
fn the_websocket_endpoint_follows_the_override() {
    let mut config = ShimConfig::defaults(&env(&[]));
    config.platform_url = "https://p.example/".to_owned();
    assert_eq!(
        config.ws_endpoint().unwrap(),
        "wss://p.example/ws/local-executor"
    );
    assert_eq!(
        config.data_url("s-1").unwrap(),
        "wss://p.example/ws/local-executor/s-1"
    );
    config.platform_ws_url = Some("http://127.0.0.1:9/custom/".to_owned());
    assert_eq!(
        config.data_url("s-1").unwrap(),
        "ws://127.0.0.1:9/custom/s-1"
    );
    assert!(config.data_url("../x").is_err());

    // Blank means no override, as for the session id.
    let (result, _dir) = load_file("platform_ws_url = \"\"\nsession_id = \" \"\n");
    let (config, _) = result.unwrap();
    assert_eq!(config.platform_ws_url, None);
    assert_eq!(config.session_id, None);
}

#[test]
fn unknown_and_unused_file_keys_are_warnings() {
    let (result, _dir) = load_file(
        r#"
zeta = 1
"bad\nkey" = 2
recording_default_interpretation_route = "extract_then_cloud"
recording_channels = ["floor"]
token = "hunter2"
max_concurrent = 3

[alpha]
x = 1
"#,
    );
    let (config, warnings) = result.unwrap();
    assert_eq!(config.max_concurrent.get(), 3);
    assert_eq!(config.token, None);
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings[0].contains("`token`"), "{warnings:?}");
    assert!(
        warnings[1].ends_with(
            r#"keys this build does not use, ignored: "recording_channels", "recording_default_interpretation_route""#
        ),
        "{warnings:?}"
    );
    assert!(
        warnings[2].ends_with(r#"unknown keys, ignored: "alpha", "bad\nkey", "zeta""#),
        "{warnings:?}"
    );
    for warning in &warnings {
        assert!(!warning.contains("hunter2"));
        assert_eq!(warning.lines().count(), 1);
    }
}

#[test]
fn malformed_files_name_the_place_not_the_value() {
    let (result, _dir) = load_file("max_concurrent = 2\nsecret = \"hunter2\nenable_shell = true\n");
    let err = result.unwrap_err();
    let ConfigError::Syntax { line, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(*line, 2);
    let message = err.to_string();
    assert!(message.contains("line 2, column"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
    assert_eq!(message.lines().count(), 1);

    let (result, _dir) = load_file("\n\nmax_concurrent = \"hunter2\"\n");
    let message = result.unwrap_err().to_string();
    assert!(message.contains("`max_concurrent`"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");

    let (result, _dir) = load_file("platform_url = \"ftp://hunter2\"\n");
    let message = result.unwrap_err().to_string();
    assert!(message.contains("`platform_url`"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");

    let dir = TempDir::new("binary");
    let path = dir.0.join("config.toml");
    write_atomic(&path, b"\xff\xfe", 0o644).unwrap();
    let err = load(&explicit(&path), &env(&[])).unwrap_err();
    assert!(matches!(err, ConfigError::NotUtf8 { .. }), "{err}");

    let big = format!("# {}\n", "x".repeat(1024 * 1024));
    let path = dir.write("big.toml", &big, 0o644);
    let err = load(&explicit(&path), &env(&[])).unwrap_err();
    assert!(matches!(err, ConfigError::ReadFile { .. }), "{err}");
}

#[test]
fn a_missing_default_file_is_fine_and_a_missing_explicit_one_is_not() {
    let dir = TempDir::new("default");
    let vars = env(&[("XDG_CONFIG_HOME", &dir.path()), ("HOME", "/nowhere")]);
    if cfg!(target_os = "linux") {
        let (config, warnings) = load(&Overrides::default(), &vars).unwrap();
        assert_eq!(config.config_file, None);
        assert!(warnings.is_empty());

        let path = dir.write(
            "autogpt-local-executor/config.toml",
            "max_concurrent = 8\n",
            0o644,
        );
        let (config, _) = load(&Overrides::default(), &vars).unwrap();
        assert_eq!(config.max_concurrent.get(), 8);
        assert_eq!(config.config_file, Some(path));
    }

    let missing = dir.0.join("absent.toml");
    let err = load(&explicit(&missing), &vars).unwrap_err();
    assert!(matches!(err, ConfigError::MissingFile { .. }), "{err}");
    assert!(err.to_string().contains("absent.toml"));
}

#[cfg(unix)]
#[test]
fn token_files_must_be_private_small_and_non_empty() {
    let dir = TempDir::new("token");
    let secret = "tok-hunter2-secret";
    let good = dir.write("good", &format!("  {secret}\r\n"), PRIVATE_FILE_MODE);
    assert_eq!(
        read_token_file(&good).unwrap(),
        Token::from_configured(Some(secret)).unwrap()
    );

    let open = dir.write("open", secret, 0o644);
    let empty = dir.write("empty", " \n\t", PRIVATE_FILE_MODE);
    let big = "t".repeat(16 * 1024 + 1);
    let oversize = dir.write("big", &big, PRIVATE_FILE_MODE);
    let two_lines = dir.write("lines", &format!("{secret}\n{secret}\n"), PRIVATE_FILE_MODE);
    let absent = dir.0.join("absent");
    for (path, matches) in [
        (
            &open,
            (|err| {
                matches!(
                    err,
                    ConfigError::TokenFile(PrivateFileError::TooOpen { .. })
                )
            }) as fn(&ConfigError) -> bool,
        ),
        (&empty, |err| matches!(err, ConfigError::EmptyToken { .. })),
        (&oversize, |err| {
            matches!(
                err,
                ConfigError::TokenFile(PrivateFileError::TooLarge { .. })
            )
        }),
        (&two_lines, |err| matches!(err, ConfigError::Invalid { .. })),
        (&absent, |err| {
            matches!(err, ConfigError::TokenFile(PrivateFileError::Io { .. }))
        }),
    ] {
        let err = read_token_file(path).unwrap_err();
        assert!(matches(&err), "{}: {err}", path.display());
        let text = format!("{err} {err:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert_eq!(err.to_string().lines().count(), 1);
    }
    let exact = dir.write("exact", &"t".repeat(16 * 1024), PRIVATE_FILE_MODE);
    assert!(read_token_file(&exact).is_ok());
}

#[cfg(unix)]
#[test]
fn token_sources_follow_the_precedence() {
    let dir = TempDir::new("token-sources");
    let file_token = dir.write("file-token", "from-file", PRIVATE_FILE_MODE);
    let env_file = dir.write("env-token", "from-env-file", PRIVATE_FILE_MODE);
    // Too open, so any attempt to read it would fail the load.
    let shadowed = dir.write("shadowed", "never-read", 0o644);
    let config = dir.write(
        "config.toml",
        &format!("token_file = {:?}\n", shadowed.to_string_lossy()),
        0o644,
    );
    let token = |value: &str| Token::from_configured(Some(value));

    let (loaded, warnings) = load(&explicit(&config), &env(&[])).unwrap();
    assert!(warnings.is_empty());
    assert!(loaded.read_token().is_err());

    let env_file_var = env_file.to_string_lossy().into_owned();
    let vars = env(&[("AUTOGPT_SHIM_TOKEN_FILE", &env_file_var)]);
    let (loaded, _) = load(&explicit(&config), &vars).unwrap();
    assert_eq!(loaded.read_token().unwrap(), token("from-env-file"));

    let vars = env(&[
        ("AUTOGPT_SHIM_TOKEN_FILE", &env_file_var),
        ("AUTOGPT_SHIM_TOKEN", " tok-hunter2 "),
    ]);
    let (loaded, warnings) = load(&explicit(&config), &vars).unwrap();
    assert_eq!(loaded.read_token().unwrap(), token("tok-hunter2"));
    assert_eq!(loaded.token_file, None);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(!format!("{loaded:?} {warnings:?}").contains("hunter2"));

    let flags = Overrides {
        token_file: Some(file_token),
        ..explicit(&config)
    };
    let (loaded, warnings) = load(&flags, &vars).unwrap();
    assert_eq!(loaded.read_token().unwrap(), token("from-file"));
    assert_eq!(loaded.token, None);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[1].contains("--token-file"), "{warnings:?}");

    let vars = env(&[("AUTOGPT_SHIM_TOKEN", "tok\u{7}hunter2")]);
    let message = load(&Overrides::default(), &vars).unwrap_err().to_string();
    assert!(message.starts_with("AUTOGPT_SHIM_TOKEN"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");

    let (loaded, _) = load(&Overrides::default(), &env(&[])).unwrap();
    assert_eq!(loaded.read_token().unwrap(), None);
}

#[test]
fn linux_paths_come_from_xdg_with_a_home_fallback() {
    let xdg = env(&[
        ("HOME", "/home/u"),
        ("XDG_CONFIG_HOME", "/cfg"),
        ("XDG_STATE_HOME", "/state"),
    ]);
    let os = Os::Linux;
    assert_eq!(
        config_path_for(os, &xdg),
        Some(PathBuf::from("/cfg/autogpt-local-executor/config.toml"))
    );
    assert_eq!(
        state_dir_for(os, &xdg),
        Some(PathBuf::from("/state/autogpt-local-executor"))
    );
    assert_eq!(
        default_audit_log_path_for(os, &xdg),
        Some(PathBuf::from("/state/autogpt-local-executor/audit.log"))
    );
    assert_eq!(
        default_allowed_root_for(os, &xdg),
        Some(PathBuf::from("/home/u/autogpt-workspace"))
    );

    // Unset, blank or relative XDG variables fall back to the home directory.
    for (config_home, state_home) in [("", ""), ("relative/cfg", "relative/state")] {
        let vars = env(&[
            ("HOME", "/home/u"),
            ("XDG_CONFIG_HOME", config_home),
            ("XDG_STATE_HOME", state_home),
        ]);
        assert_eq!(
            config_path_for(os, &vars),
            Some(PathBuf::from(
                "/home/u/.config/autogpt-local-executor/config.toml"
            ))
        );
        assert_eq!(
            state_dir_for(os, &vars),
            Some(PathBuf::from("/home/u/.local/state/autogpt-local-executor"))
        );
    }
    assert_eq!(state_dir_for(os, &env(&[])), None);

    if cfg!(target_os = "linux") {
        assert_eq!(
            audit_key_path(&xdg),
            Some(PathBuf::from("/state/autogpt-local-executor/audit.key"))
        );
        assert_eq!(
            daemons_dir(&xdg),
            Some(PathBuf::from("/state/autogpt-local-executor/daemons"))
        );
        assert_eq!(config_path(&xdg), config_path_for(os, &xdg));
        assert_eq!(
            default_audit_log_path(&xdg),
            default_audit_log_path_for(os, &xdg)
        );
    }
}

#[test]
fn mac_and_windows_paths_follow_the_reference() {
    let mac = env(&[("HOME", "/Users/u"), ("XDG_CONFIG_HOME", "/ignored")]);
    assert_eq!(
        config_path_for(Os::Mac, &mac),
        Some(PathBuf::from(
            "/Users/u/Library/Application Support/autogpt-local-executor/config.toml"
        ))
    );
    assert_eq!(
        default_audit_log_path_for(Os::Mac, &mac),
        Some(PathBuf::from(
            "/Users/u/Library/Logs/autogpt-local-executor/audit.log"
        ))
    );
    assert_eq!(
        default_allowed_root_for(Os::Mac, &mac),
        Some(PathBuf::from("/Users/u/Documents/autogpt-workspace"))
    );

    let windows = env(&[
        ("USERPROFILE", "C:/Users/u"),
        ("HOME", "/c/Users/u"),
        ("APPDATA", "C:/Users/u/AppData/Roaming"),
        ("LOCALAPPDATA", "C:/Users/u/AppData/Local"),
    ]);
    let windows_base = |parts: &[&str]| {
        let mut path = PathBuf::from("C:/Users/u");
        path.extend(parts);
        Some(path)
    };
    let app = "autogpt-local-executor";
    assert_eq!(
        config_path_for(Os::Windows, &windows),
        windows_base(&["AppData", "Roaming", app, "config.toml"])
    );
    assert_eq!(
        default_audit_log_path_for(Os::Windows, &windows),
        windows_base(&["AppData", "Local", app, "logs", "audit.log"])
    );
    assert_eq!(
        default_allowed_root_for(Os::Windows, &windows),
        windows_base(&["autogpt-workspace"])
    );
    // Without APPDATA and LOCALAPPDATA the profile's usual folders are used.
    let profile_only = env(&[("USERPROFILE", "C:/Users/u")]);
    assert_eq!(
        config_path_for(Os::Windows, &profile_only),
        windows_base(&["AppData", "Roaming", app, "config.toml"])
    );
    assert_eq!(
        state_dir_for(Os::Windows, &profile_only),
        windows_base(&["AppData", "Local", app])
    );
}
