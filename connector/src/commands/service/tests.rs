//! Tests of [`super`]: the autostart entries of every OS (quoting and escaping), install and
//! uninstall in a temporary home, and the configuration file `install` writes.

use super::super::audit::test_dir::TempDir;
use super::formats::{systemd_quote, windows_arg, xml_escape};
use super::*;
use crate::config;

const SHIM: &str = "/opt/Auto GPT & co/bin/autogpt-shim";
const CONFIG: &str = "/home/me/My Config's & 100%/config.toml";
const LOGS: &str = "/home/me/.local/state/autogpt-local-executor";

fn locations(base: &Path) -> Locations {
    Locations {
        config_home: Some(base.join("config")),
        data_home: Some(base.join("share")),
        home: Some(base.join("home")),
        local_app_data: Some(base.join("AppData/Local")),
        windows_user: Some(r"CORP\me & you".to_owned()),
    }
}

fn unit(os: Os, base: &Path) -> Unit {
    unit_for(
        os,
        &locations(base),
        Path::new(SHIM),
        Path::new(CONFIG),
        Path::new(LOGS),
    )
    .unwrap()
}

/// The desktop entry KWin reads names the binary the unit runs, quoted as the desktop entry
/// specification says, and lets it use KWin's screenshot interface alone.
#[test]
fn the_linux_entry_brings_a_desktop_entry_kwin_lets_take_screenshots() {
    let linux = unit(Os::Linux, Path::new("/x"));
    let (path, text) = linux.desktop_entry.expect("a desktop entry on Linux");
    assert_eq!(
        path,
        Path::new("/x/share/applications/autogpt-shim.desktop")
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "[Desktop Entry]");
    for line in [
        "Type=Application",
        "NoDisplay=true",
        "X-KDE-DBUS-Restricted-Interfaces=org.kde.KWin.ScreenShot2",
        r#"Exec="/opt/Auto GPT & co/bin/autogpt-shim" --config "/home/me/My Config's & 100%%/config.toml" start"#,
    ] {
        assert!(lines.contains(&line), "{line} in {text}");
    }
    for os in [Os::Macos, Os::Windows] {
        assert_eq!(unit(os, Path::new("/x")).desktop_entry, None);
    }
}

#[test]
fn systemd_unit_quotes_and_escapes() {
    let unit = unit(Os::Linux, Path::new("/x"));
    assert_eq!(
        unit.path,
        Path::new("/x/config/systemd/user/autogpt-shim.service")
    );
    let lines: Vec<&str> = unit.contents.lines().collect();
    assert!(lines.contains(
        &r#"ExecStart="/opt/Auto GPT & co/bin/autogpt-shim" --config "/home/me/My Config's & 100%%/config.toml" start"#
    ), "{}", unit.contents);
    for line in [
        "Restart=on-failure",
        "RestartSec=5",
        // A refused start would fail the same way every 5 s.
        "RestartPreventExitStatus=77 78",
        "StandardOutput=append:/home/me/.local/state/autogpt-local-executor/shim.out.log",
        "StandardError=append:/home/me/.local/state/autogpt-local-executor/shim.err.log",
        "WantedBy=default.target",
        // The allocator's tunable: a unit inherits no shell's environment.
        r#"Environment="GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1048576""#,
    ] {
        assert!(lines.contains(&line), "{line} in {}", unit.contents);
    }
    assert_eq!(
        unit.enable_command,
        "systemctl --user daemon-reload && systemctl --user enable --now autogpt-shim.service"
    );
    assert_eq!(
        unit.disable_command,
        "systemctl --user disable --now autogpt-shim.service"
    );
    assert!(
        unit.notes
            .iter()
            .any(|n| n.contains("loginctl enable-linger"))
    );

    assert_eq!(systemd_quote(r#"a"b\c$D"#), r#""a\"b\\c$$D""#);
    let odd_logs = unit_for(
        Os::Linux,
        &locations(Path::new("/x")),
        Path::new(SHIM),
        Path::new(CONFIG),
        Path::new("/var/log/50% full"),
    )
    .unwrap();
    assert!(
        odd_logs
            .contents
            .contains("StandardOutput=append:/var/log/50%% full/shim.out.log\n")
    );
}

#[test]
fn launchd_plist_escapes_xml() {
    let unit = unit(Os::Macos, Path::new("/Users/me"));
    assert_eq!(
        unit.path,
        Path::new("/Users/me/home/Library/LaunchAgents/net.autogpt.shim.plist")
    );
    let c = &unit.contents;
    assert!(c.contains("<string>net.autogpt.shim</string>"), "{c}");
    assert!(
        c.contains("<string>/opt/Auto GPT &amp; co/bin/autogpt-shim</string>\n    <string>--config</string>\n    <string>/home/me/My Config&apos;s &amp; 100%/config.toml</string>\n    <string>start</string>"),
        "{c}"
    );
    assert!(c.contains("<key>RunAtLoad</key>\n  <true/>"), "{c}");
    // Restarted after a crash only: never after a refused start (exit 77 or 78).
    assert!(
        c.contains(
            "<key>KeepAlive</key>\n  <dict>\n    <key>Crashed</key>\n    <true/>\n  </dict>"
        ),
        "{c}"
    );
    assert!(!c.contains("SuccessfulExit"), "{c}");
    assert!(
        c.contains(&format!("<string>{LOGS}/shim.err.log</string>")),
        "{c}"
    );
    assert!(!c.contains(" & "), "{c}");
    assert_eq!(
        unit.enable_command,
        "launchctl load -w /Users/me/home/Library/LaunchAgents/net.autogpt.shim.plist"
    );
    assert_eq!(
        xml_escape(r#"<a href="x">'&'</a>"#),
        "&lt;a href=&quot;x&quot;&gt;&apos;&amp;&apos;&lt;/a&gt;"
    );
}

#[test]
fn task_scheduler_xml_escapes_and_quotes_arguments() {
    let unit = unit_for(
        Os::Windows,
        &locations(Path::new(r"C:\Users\me")),
        Path::new(r"C:\Program Files\Auto & GPT\autogpt-shim.exe"),
        Path::new(r"C:\Users\me\App Data\config.toml"),
        Path::new(LOGS),
    )
    .unwrap();
    let c = &unit.contents;
    assert!(
        c.contains(r"<Command>C:\Program Files\Auto &amp; GPT\autogpt-shim.exe</Command>"),
        "{c}"
    );
    assert!(
        c.contains(
            r"<Arguments>--config &quot;C:\Users\me\App Data\config.toml&quot; start</Arguments>"
        ),
        "{c}"
    );
    for fragment in [
        "<LogonTrigger>",
        r"<UserId>CORP\me &amp; you</UserId>",
        "<RunLevel>LeastPrivilege</RunLevel>",
        r"<URI>\AutoGPT\Shim</URI>",
    ] {
        assert!(c.contains(fragment), "{fragment} in {c}");
    }
    assert!(
        unit.path
            .ends_with("autogpt-local-executor/autogpt-shim.xml")
    );
    assert!(
        unit.enable_command
            .starts_with(r#"schtasks /Create /TN "\AutoGPT\Shim" /XML ""#)
    );
    assert_eq!(
        unit.disable_command,
        r#"schtasks /Delete /TN "\AutoGPT\Shim" /F"#
    );
    assert!(unit.log_dir.is_none());
    // Task Scheduler cannot tell a refused start from a crash, so it never restarts.
    assert!(!c.contains("RestartOnFailure"), "{c}");

    assert_eq!(windows_arg("plain"), "plain");
    assert_eq!(windows_arg(r"C:\a b\"), r#""C:\a b\\""#);
    assert_eq!(windows_arg(r#"say "hi""#), r#""say \"hi\"""#);
    assert_eq!(windows_arg(""), r#""""#);
}

#[test]
fn unusable_paths_and_missing_locations_are_refused() {
    let refused = unit_for(
        Os::Linux,
        &locations(Path::new("/x")),
        Path::new("/bin/shim\nExecStartPre=/bin/evil"),
        Path::new(CONFIG),
        Path::new(LOGS),
    );
    assert!(matches!(refused, Err(ServiceError::UnsupportedPath { .. })));
    let missing = unit_for(
        Os::Macos,
        &Locations::default(),
        Path::new(SHIM),
        Path::new(CONFIG),
        Path::new(LOGS),
    );
    assert!(matches!(
        missing,
        Err(ServiceError::MissingLocation("HOME"))
    ));
}

#[test]
fn install_then_uninstall_twice() {
    let dir = TempDir::new("service");
    let mut unit = unit_for(
        Os::Linux,
        &locations(dir.path()),
        Path::new(SHIM),
        Path::new(CONFIG),
        &dir.join("state"),
    )
    .unwrap();
    let mut out = Vec::new();
    assert!(matches!(
        install(&unit, false, &mut out),
        Err(ServiceError::UnsupportedTrigger)
    ));
    assert!(
        own_files::read_capped(&unit.path, UNIT_CAP)
            .unwrap()
            .is_none()
    );

    assert!(!describe(&unit, &mut out).unwrap());
    install(&unit, true, &mut out).unwrap();
    let written = own_files::read_capped(&unit.path, UNIT_CAP)
        .unwrap()
        .unwrap();
    assert_eq!(written, unit.contents.as_bytes());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        #[allow(clippy::disallowed_methods, reason = "the test inspects modes")]
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&unit.path), 0o644);
        assert_eq!(mode(&dir.join("state")), 0o700);
    }
    let text = String::from_utf8(std::mem::take(&mut out)).unwrap();
    assert!(
        text.contains(&format!("wrote {}\n", unit.path.display())),
        "{text}"
    );
    // The desktop entry KWin reads, beside it.
    let (entry, entry_text) = unit.desktop_entry.clone().unwrap();
    assert_eq!(
        own_files::read_capped(&entry, UNIT_CAP).unwrap().unwrap(),
        entry_text.as_bytes()
    );
    assert!(
        text.contains(&format!(
            "wrote {}, with which KDE's KWin lets the installed binary take screenshots\n",
            entry.display()
        )),
        "{text}"
    );
    print_activation(&unit, &Manager::Reachable, "shim start", None, &mut out).unwrap();
    let text = String::from_utf8(std::mem::take(&mut out)).unwrap();
    assert!(
        text.contains("enable it with: systemctl --user daemon-reload"),
        "{text}"
    );
    assert!(text.contains("loginctl enable-linger"), "{text}");

    assert!(describe(&unit, &mut out).unwrap());
    unit.contents.push_str("# changed\n");
    describe(&unit, &mut out).unwrap();
    let text = String::from_utf8(std::mem::take(&mut out)).unwrap();
    assert!(text.contains("autostart: installed at "), "{text}");
    assert!(text.contains("differs from this build's entry"), "{text}");

    // Enabled (what `systemctl --user enable` links): the disable comes first, since it
    // needs the unit file.
    #[cfg(unix)]
    {
        let marker = unit.enabled_marker.clone().unwrap();
        own_files::ensure_dir(marker.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&unit.path, &marker).unwrap();
        let refused = uninstall(&unit, &mut out).unwrap_err();
        assert!(matches!(refused, ServiceError::StillEnabled { .. }));
        assert_eq!(
            refused.to_string(),
            format!(
                "{} is still enabled; disable it first with: systemctl --user disable --now \
                 autogpt-shim.service, then run `autogpt-shim uninstall` again",
                unit.path.display()
            )
        );
        assert!(
            own_files::read_capped(&unit.path, UNIT_CAP)
                .unwrap()
                .is_some()
        );
        // What `systemctl --user disable` does.
        assert!(own_files::remove(&marker).unwrap());
    }

    uninstall(&unit, &mut out).unwrap();
    uninstall(&unit, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(&format!("removed {}\n", unit.path.display())),
        "{text}"
    );
    assert!(text.contains("nothing to remove: "), "{text}");
    assert_eq!(
        text.matches(&format!("removed {}\n", entry.display()))
            .count(),
        1,
        "{text}"
    );
    assert!(own_files::read_capped(&entry, UNIT_CAP).unwrap().is_none());
    assert_eq!(
        text.matches(
            "if it is still running, stop it with: systemctl --user stop \
             autogpt-shim.service; systemctl --user daemon-reload\n"
        )
        .count(),
        2,
        "{text}"
    );
    assert!(
        own_files::read_capped(&unit.path, UNIT_CAP)
            .unwrap()
            .is_none()
    );
}

/// An environment of `HOME` and the given pairs.
fn vars(home: &Path, pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let mut map: std::collections::HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    map.insert("HOME".to_owned(), home.to_string_lossy().into_owned());
    move |name| map.get(name).cloned()
}

fn settings(pairs: &[(&str, toml::Value)]) -> toml::Table {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

#[test]
fn a_new_config_file_holds_the_given_settings() {
    let dir = TempDir::new("plan-new");
    let path = dir.join("config.toml");
    let token = dir.join("token");
    own_files::write_atomic(&token, b"t-1\n", 0o600).unwrap();
    let given = settings(&[
        ("platform_url", "https://p.example".into()),
        ("token_file", token.to_string_lossy().as_ref().into()),
        ("enable_shell", true.into()),
    ]);
    let env = vars(dir.path(), &[]);
    let (plan, notes) = plan_config(&path, None, &given, false, &env).unwrap();
    let ConfigPlan::Write {
        text,
        keys,
        updated,
    } = &plan
    else {
        panic!("{plan:?}");
    };
    assert!(!updated);
    assert_eq!(keys, &["enable_shell", "platform_url", "token_file"]);
    assert!(text.starts_with("# autogpt-shim configuration"), "{text}");
    // What `doctor` would warn about, passed on as notes.
    assert_eq!(
        notes,
        [
            "shell: enabled: the platform can run any command with this user's permissions; --shell-sandbox workspace keeps commands from changing anything outside the allowed root, and strict also from reading your other files and reaching the network"
        ]
    );
    let (config, warnings) = config::parse_file(&path, text, &env).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.platform_url, "https://p.example");
    assert!(config.enable_shell);
    assert_eq!(config.token_file.as_deref(), Some(token.as_path()));

    let mut out = Vec::new();
    write_config(&path, &plan, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!(
            "wrote the configuration {} (mode 0600): enable_shell, platform_url, token_file\n",
            path.display()
        )
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        #[allow(clippy::disallowed_methods, reason = "the test inspects the mode")]
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    // Without a token anywhere, the stored OAuth tokens are the service's only hope.
    let (_, notes) = plan_config(&path, None, &toml::Table::new(), false, &env).unwrap();
    assert!(notes[0].contains("autogpt-shim auth"), "{notes:?}");
}

#[test]
fn an_existing_file_changes_only_with_force() {
    let dir = TempDir::new("plan-existing");
    let path = dir.join("config.toml");
    let env = vars(dir.path(), &[]);
    let existing = "# mine\nplatform_url = \"https://p.example\"\nmax_concurrent = 2\nreconnect_base_delay = 1\n";
    // The same settings, even spelled differently (1 and 1.0 seconds): kept as it is.
    let same = settings(&[
        ("platform_url", "https://p.example".into()),
        ("reconnect_base_delay", 1.0.into()),
    ]);
    let (plan, _) = plan_config(&path, Some(existing), &same, false, &env).unwrap();
    assert_eq!(plan, ConfigPlan::Keep);
    let mut out = Vec::new();
    write_config(&path, &plan, &mut out).unwrap();
    assert!(
        String::from_utf8(out)
            .unwrap()
            .starts_with("using the existing configuration ")
    );
    assert!(
        own_files::read_capped(&path, 1024).unwrap().is_none(),
        "kept means untouched"
    );

    let other = settings(&[
        ("platform_url", "https://q.example".into()),
        ("enable_shell", true.into()),
    ]);
    let refused = plan_config(&path, Some(existing), &other, false, &env).unwrap_err();
    assert_eq!(
        refused.to_string(),
        format!(
            "{} already sets enable_shell, platform_url differently; pass --force to change \
             them (its other settings are kept), or edit the file",
            path.display()
        )
    );
    let (plan, _) = plan_config(&path, Some(existing), &other, true, &env).unwrap();
    let ConfigPlan::Write {
        text,
        keys,
        updated,
    } = plan
    else {
        panic!("{plan:?}");
    };
    assert!(updated);
    assert_eq!(keys, ["enable_shell", "platform_url"]);
    let (config, _) = config::parse_file(&path, &text, &env).unwrap();
    assert_eq!(config.platform_url, "https://q.example");
    assert_eq!(config.max_concurrent.get(), 2, "{text}");
    assert!(config.enable_shell);
}

#[test]
fn a_service_that_could_not_start_is_refused_with_what_is_missing() {
    let dir = TempDir::new("plan-refused");
    let path = dir.join("config.toml");
    let env = vars(dir.path(), &[("AUTOGPT_SHIM_TOKEN", "secret-value")]);
    let refusal = |given: &toml::Table, env: &dyn Fn(&str) -> Option<String>| {
        plan_config(&path, None, given, false, &env)
            .unwrap_err()
            .to_string()
    };
    let none = toml::Table::new();
    let message = refusal(&none, &env);
    assert!(
        message.starts_with("the token is in AUTOGPT_SHIM_TOKEN"),
        "{message}"
    );
    assert!(message.contains("--token-file"), "{message}");
    assert!(!message.contains("secret-value"), "{message}");

    let env = vars(dir.path(), &[]);
    let missing_root = dir.join("no-such-root");
    let legacy = settings(&[
        ("session_id", "s-1".into()),
        (
            "allowed_root",
            missing_root.to_string_lossy().as_ref().into(),
        ),
    ]);
    let message = refusal(&legacy, &env);
    assert_eq!(
        message,
        format!(
            "allowed root: {root} does not exist: create it with `mkdir -p {root}`, or pass --allowed-root with an existing folder",
            root = missing_root.display()
        )
    );

    // Windows has no mode bits to refuse.
    #[cfg(unix)]
    {
        let open_token = dir.join("open-token");
        own_files::write_atomic(&open_token, b"t\n", 0o644).unwrap();
        let given = settings(&[("token_file", open_token.to_string_lossy().as_ref().into())]);
        let message = refusal(&given, &env);
        assert!(message.contains("chmod 600"), "{message}");
    }
    let message = refusal(&settings(&[("enable_recording", true.into())]), &env);
    assert!(message.contains("--enable-recording"), "{message}");
    assert!(own_files::read_capped(&path, 1024).unwrap().is_none());
}

#[test]
fn the_service_runs_a_copy_in_a_stable_place_never_one_in_target() {
    let dir = TempDir::new("place");
    let home = dir.join("home");
    let env = vars(&home, &[]);
    let stable = stable_binary(Os::Linux, &env).unwrap();
    assert_eq!(stable, home.join(".local/bin/autogpt-shim"));
    assert_eq!(
        stable_binary(Os::Macos, &env).unwrap(),
        home.join(".local/bin/autogpt-shim")
    );
    let windows =
        |name: &str| (name == "LOCALAPPDATA").then(|| r"C:\Users\me\AppData\Local".to_owned());
    assert!(
        stable_binary(Os::Windows, &windows)
            .unwrap()
            .ends_with("Programs/autogpt-shim/autogpt-shim")
            || cfg!(windows)
    );
    assert_eq!(stable_binary(Os::Linux, &|_: &str| None), None);

    let built = dir.join("repo/target/release/autogpt-shim");
    own_files::write_atomic(&built, b"#!/bin/true\n", 0o755).unwrap();
    assert!(in_build_folder(&built));
    assert!(!in_build_folder(Path::new("/usr/bin/autogpt-shim")));
    // In place inside target/: refused, naming the way out.
    let refused = plan_binary(&built, Some(&stable), true).unwrap_err();
    assert!(
        refused.contains("inside a cargo target/ folder") && refused.contains("without --in-place"),
        "{refused}"
    );
    assert_eq!(
        plan_binary(Path::new("/usr/bin/autogpt-shim"), Some(&stable), true).unwrap(),
        Binary::InPlace(PathBuf::from("/usr/bin/autogpt-shim"))
    );
    // By default: copied, and the copy is what the entry names.
    let plan = plan_binary(&built, Some(&stable), false).unwrap();
    assert_eq!(plan.path(), stable);
    let mut out = Vec::new();
    assert_eq!(place_binary(&plan, &mut out).unwrap(), stable);
    assert_eq!(
        own_files::read_capped(&stable, 64).unwrap().unwrap(),
        b"#!/bin/true\n"
    );
    let said = String::from_utf8(out).unwrap();
    assert!(said.starts_with("copied "), "{said}");
    // No sandbox launcher beside the build: the copy is made, and the note says what it lacks.
    if cfg!(target_os = "linux") {
        assert!(
            said.contains(
                "autogpt-shim-sandbox is missing, so the service cannot confine commands"
            ),
            "{said}"
        );
        // With one beside it, it goes beside the copy.
        let launcher = built.with_file_name("autogpt-shim-sandbox");
        own_files::write_atomic(&launcher, b"#!/bin/false\n", 0o755).unwrap();
        let mut out = Vec::new();
        place_binary(&plan, &mut out).unwrap();
        assert_eq!(
            own_files::read_capped(&stable.with_file_name("autogpt-shim-sandbox"), 64)
                .unwrap()
                .unwrap(),
            b"#!/bin/false\n"
        );
        assert!(
            String::from_utf8(out)
                .unwrap()
                .contains("the shell sandbox's launcher beside it")
        );
    }
    // Run from the copy, install keeps it.
    assert_eq!(
        plan_binary(&stable, Some(&stable), false).unwrap(),
        Binary::AlreadyThere(stable.clone())
    );
    assert!(on_path(&home.join(".local/bin"), &|name: &str| {
        (name == "PATH").then(|| format!("/usr/bin:{}", home.join(".local/bin").display()))
    }));
    assert!(!on_path(&home.join(".local/bin"), &env));
}

#[cfg(unix)]
#[test]
fn without_a_user_manager_install_says_what_to_do_instead() {
    // Short names: the socket's whole path must fit a Unix socket address (108 bytes), under
    // whatever TMPDIR the tests run in.
    let dir = TempDir::new("um");
    let run = dir.join("run-systemd");
    let runtime = dir.join("r");
    let env =
        |name: &str| (name == "XDG_RUNTIME_DIR").then(|| runtime.to_string_lossy().into_owned());
    // Not booted with systemd.
    assert_eq!(user_manager(Os::Linux, &run, &env), Manager::NoSystemd);
    assert_eq!(user_manager(Os::Macos, &run, &env), Manager::Reachable);
    own_files::ensure_dir(&run.join("system")).unwrap();
    // systemd, but no user manager: no XDG_RUNTIME_DIR, or no socket in it.
    assert!(matches!(
        user_manager(Os::Linux, &run, &|_: &str| None),
        Manager::Unreachable(why) if why.contains("XDG_RUNTIME_DIR is not set")
    ));
    assert!(matches!(
        user_manager(Os::Linux, &run, &env),
        Manager::Unreachable(why) if why.contains("systemd/private does not exist")
    ));
    own_files::ensure_dir(&runtime.join("systemd")).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(runtime.join("systemd/private")).unwrap();
    assert_eq!(user_manager(Os::Linux, &run, &env), Manager::Reachable);

    let unit = unit(Os::Linux, dir.path());
    for manager in [
        Manager::NoSystemd,
        Manager::Unreachable("XDG_RUNTIME_DIR is not set in this shell".to_owned()),
    ] {
        let mut out = Vec::new();
        print_activation(
            &unit,
            &manager,
            "/h/.local/bin/autogpt-shim --config /c start",
            Some("me"),
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("enable it with:"), "{text}");
        assert!(
            text.contains("start the daemon by hand")
                && text.contains(": /h/.local/bin/autogpt-shim --config /c start\n"),
            "{text}"
        );
        if matches!(manager, Manager::Unreachable(_)) {
            assert!(text.contains("sudo loginctl enable-linger me"), "{text}");
            assert!(text.contains("Failed to connect to bus"), "{text}");
        }
    }
}
