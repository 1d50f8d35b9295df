//! `autogpt-shim install` / `uninstall`: the per-user autostart entry (a systemd user unit, a
//! launchd agent or a Task Scheduler task) that runs `<shim> --config <cfg> start` at login
//! (shim-reference-behaviour.md section 16).
//!
//! Like the reference, this only writes or removes the file and prints the command that
//! activates it; it never runs `systemctl`, `launchctl` or `schtasks` itself. Every path is
//! escaped for the format it lands in, and paths no format can carry (control characters,
//! non-UTF-8) are refused rather than written broken.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use local_core::own_files;

/// The systemd unit's file name.
pub const SYSTEMD_UNIT_NAME: &str = "autogpt-shim.service";
/// The launchd agent's label (and plist file stem).
pub const LAUNCHD_LABEL: &str = "net.autogpt.shim";
/// The Task Scheduler task's path.
pub const WINDOWS_TASK_NAME: &str = r"\AutoGPT\Shim";
/// The directory name the reference uses under the per-user data roots.
const APP_DIR: &str = "autogpt-local-executor";
/// Autostart files are read by the service manager, so they are not private.
const UNIT_MODE: u32 = 0o644;
/// Far above any unit this module writes; a larger file is not ours.
const UNIT_CAP: u64 = 1024 * 1024;

/// The operating systems with an autostart template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    /// Linux and WSL2: a systemd user unit.
    Linux,
    /// macOS: a launchd agent.
    Macos,
    /// Windows: a Task Scheduler task.
    Windows,
}

impl Os {
    /// The system this binary was built for; other Unixes get the systemd template.
    #[must_use]
    pub const fn current() -> Self {
        if cfg!(target_os = "macos") {
            Self::Macos
        } else if cfg!(windows) {
            Self::Windows
        } else {
            Self::Linux
        }
    }
}

/// The per-user directories the autostart entry goes under, resolved by the caller (from
/// `XDG_CONFIG_HOME`, `HOME`, `LOCALAPPDATA`, ...); each OS needs only its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locations {
    /// Linux: `$XDG_CONFIG_HOME`, or `~/.config`.
    pub config_home: Option<PathBuf>,
    /// macOS: the home directory.
    pub home: Option<PathBuf>,
    /// Windows: `%LOCALAPPDATA%`.
    pub local_app_data: Option<PathBuf>,
    /// Windows: `DOMAIN\user`, which limits the logon trigger and the principal to that user;
    /// without it the task triggers at any user's logon, which needs an administrator.
    pub windows_user: Option<String>,
}

/// One autostart entry: where it goes, what it holds, and how to activate it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The system it is for.
    pub os: Os,
    /// The file to write.
    pub path: PathBuf,
    /// The file's contents.
    pub contents: String,
    /// The command that activates it (printed, never run).
    pub enable_command: String,
    /// The command that deactivates it (printed, never run).
    pub disable_command: String,
    /// Advice printed after installing.
    pub notes: Vec<String>,
    /// The directory the service manager appends the daemon's output to, which must exist
    /// before it starts; `None` where output is not redirected (Windows).
    pub log_dir: Option<PathBuf>,
}

/// Why an autostart entry cannot be made, written or removed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// `--at-login false`: the only trigger is the login one.
    #[error(
        "only --at-login is supported: this build cannot install an autostart entry with another trigger"
    )]
    UnsupportedTrigger,
    /// The directory the entry goes under is unknown.
    #[error("cannot place the autostart entry: {0} is not set")]
    MissingLocation(&'static str),
    /// A path cannot be written into the entry's format.
    #[error("{path:?} cannot be written into {format}: {reason}")]
    UnsupportedPath {
        /// The path, lossily.
        path: String,
        /// The file format.
        format: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The entry could not be written or removed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The report could not be printed.
    #[error("cannot print: {0}")]
    Output(#[from] io::Error),
}

/// Builds the autostart entry running `<shim_path> --config <config_path> start`, with the
/// daemon's output appended to `shim.out.log` and `shim.err.log` in `log_dir` (Linux, macOS).
///
/// # Errors
/// [`ServiceError::MissingLocation`] when `locations` lacks this OS's directory, and
/// [`ServiceError::UnsupportedPath`] for a path that is not UTF-8 or holds a control character.
pub fn unit_for(
    os: Os,
    locations: &Locations,
    shim_path: &Path,
    config_path: &Path,
    log_dir: &Path,
) -> Result<Unit, ServiceError> {
    match os {
        Os::Linux => systemd_unit(locations, shim_path, config_path, log_dir),
        Os::Macos => launchd_agent(locations, shim_path, config_path, log_dir),
        Os::Windows => scheduled_task(locations, shim_path, config_path),
    }
}

/// Writes the entry (mode 0644, parents created) and the directory its logs go to, then prints
/// the path and the command that activates it.
///
/// # Errors
/// [`ServiceError::UnsupportedTrigger`] unless `at_login`; the I/O error otherwise.
pub fn install(unit: &Unit, at_login: bool, out: &mut dyn Write) -> Result<(), ServiceError> {
    if !at_login {
        return Err(ServiceError::UnsupportedTrigger);
    }
    if let Some(dir) = &unit.log_dir {
        own_files::ensure_dir(dir).map_err(|source| ServiceError::Io {
            path: dir.clone(),
            source,
        })?;
    }
    own_files::write_atomic(&unit.path, unit.contents.as_bytes(), UNIT_MODE).map_err(|source| {
        ServiceError::Io {
            path: unit.path.clone(),
            source,
        }
    })?;
    writeln!(out, "wrote {}", unit.path.display())?;
    writeln!(out, "enable it with: {}", unit.enable_command)?;
    for note in &unit.notes {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}

/// Removes the entry if present (so running it twice is fine) and prints the command that
/// stops and deactivates what the service manager may still have loaded.
///
/// # Errors
/// The file exists but cannot be removed, or the report cannot be printed.
pub fn uninstall(unit: &Unit, out: &mut dyn Write) -> Result<(), ServiceError> {
    let removed = own_files::remove(&unit.path).map_err(|source| ServiceError::Io {
        path: unit.path.clone(),
        source,
    })?;
    if removed {
        writeln!(out, "removed {}", unit.path.display())?;
    } else {
        writeln!(
            out,
            "nothing to remove: {} does not exist",
            unit.path.display()
        )?;
    }
    writeln!(
        out,
        "if it is still loaded, stop and disable it with: {}",
        unit.disable_command
    )?;
    Ok(())
}

/// Prints whether the entry is installed (and whether it matches this build's template), its
/// path and its commands, for `status`; returns whether it is installed.
///
/// # Errors
/// The file exists but cannot be read, or the report cannot be printed.
pub fn describe(unit: &Unit, out: &mut dyn Write) -> Result<bool, ServiceError> {
    let current =
        own_files::read_capped(&unit.path, UNIT_CAP).map_err(|source| ServiceError::Io {
            path: unit.path.clone(),
            source,
        })?;
    match &current {
        Some(bytes) if bytes.as_slice() == unit.contents.as_bytes() => {
            writeln!(out, "autostart: installed at {}", unit.path.display())?;
        }
        Some(_) => writeln!(
            out,
            "autostart: installed at {} (differs from this build's entry; run install again to update it)",
            unit.path.display()
        )?,
        None => writeln!(
            out,
            "autostart: not installed ({} does not exist)",
            unit.path.display()
        )?,
    }
    writeln!(out, "  enable: {}", unit.enable_command)?;
    writeln!(out, "  disable: {}", unit.disable_command)?;
    for note in &unit.notes {
        writeln!(out, "  note: {note}")?;
    }
    Ok(current.is_some())
}

fn systemd_unit(
    locations: &Locations,
    shim: &Path,
    config: &Path,
    log_dir: &Path,
) -> Result<Unit, ServiceError> {
    const FORMAT: &str = "a systemd unit";
    let base = locations
        .config_home
        .as_ref()
        .ok_or(ServiceError::MissingLocation("XDG_CONFIG_HOME (or HOME)"))?;
    let path = base.join("systemd").join("user").join(SYSTEMD_UNIT_NAME);
    let exec = format!(
        "{} --config {} start",
        systemd_quote(text(shim, FORMAT)?),
        systemd_quote(text(config, FORMAT)?)
    );
    let out_log = systemd_path(text(&log_dir.join("shim.out.log"), FORMAT)?)?;
    let err_log = systemd_path(text(&log_dir.join("shim.err.log"), FORMAT)?)?;
    let contents = format!(
        "[Unit]\n\
         Description=AutoGPT local executor (autogpt-shim)\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={exec}\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         StandardOutput=append:{out_log}\n\
         StandardError=append:{err_log}\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n"
    );
    Ok(Unit {
        os: Os::Linux,
        path,
        contents,
        enable_command: format!(
            "systemctl --user daemon-reload && systemctl --user enable --now {SYSTEMD_UNIT_NAME}"
        ),
        disable_command: format!("systemctl --user disable --now {SYSTEMD_UNIT_NAME}"),
        notes: vec![
            "a user unit runs only while you are logged in; to start it at boot and keep it \
             running after logout, run: loginctl enable-linger \"$USER\""
                .to_owned(),
            format!(
                "output goes to shim.out.log and shim.err.log in {}",
                log_dir.display()
            ),
        ],
        log_dir: Some(log_dir.to_path_buf()),
    })
}

fn launchd_agent(
    locations: &Locations,
    shim: &Path,
    config: &Path,
    log_dir: &Path,
) -> Result<Unit, ServiceError> {
    const FORMAT: &str = "a launchd plist";
    let home = locations
        .home
        .as_ref()
        .ok_or(ServiceError::MissingLocation("HOME"))?;
    let path = home
        .join("Library")
        .join("LaunchAgents")
        .join(format!("{LAUNCHD_LABEL}.plist"));
    let string = |p: &Path| -> Result<String, ServiceError> { Ok(xml_escape(text(p, FORMAT)?)) };
    let (shim_s, config_s) = (string(shim)?, string(config)?);
    let out_log = string(&log_dir.join("shim.out.log"))?;
    let err_log = string(&log_dir.join("shim.err.log"))?;
    let contents = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>{LAUNCHD_LABEL}</string>
  <key>ProgramArguments</key>
  <array>
    <string>{shim_s}</string>
    <string>--config</string>
    <string>{config_s}</string>
    <string>start</string>
  </array>
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <true/>
  <key>StandardOutPath</key>
  <string>{out_log}</string>
  <key>StandardErrorPath</key>
  <string>{err_log}</string>
</dict>
</plist>
"#
    );
    let quoted = shell_quote(text(&path, FORMAT)?);
    Ok(Unit {
        os: Os::Macos,
        path,
        contents,
        enable_command: format!("launchctl load -w {quoted}"),
        disable_command: format!("launchctl unload -w {quoted}"),
        notes: vec![
            "KeepAlive restarts the daemon whenever it exits, even after a refused start; \
             unload the agent to stop it"
                .to_owned(),
            format!(
                "output goes to shim.out.log and shim.err.log in {}",
                log_dir.display()
            ),
        ],
        log_dir: Some(log_dir.to_path_buf()),
    })
}

fn scheduled_task(locations: &Locations, shim: &Path, config: &Path) -> Result<Unit, ServiceError> {
    const FORMAT: &str = "a Task Scheduler task";
    let base = locations
        .local_app_data
        .as_ref()
        .ok_or(ServiceError::MissingLocation("LOCALAPPDATA"))?;
    let path = base.join(APP_DIR).join("autogpt-shim.xml");
    let command = xml_escape(text(shim, FORMAT)?);
    let arguments = xml_escape(&format!(
        "--config {} start",
        windows_arg(text(config, FORMAT)?)
    ));
    let user = match &locations.windows_user {
        Some(user) => {
            let user = xml_escape(no_controls(user, FORMAT)?);
            format!("\n      <UserId>{user}</UserId>")
        }
        None => String::new(),
    };
    let task_name = xml_escape(WINDOWS_TASK_NAME);
    let contents = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">
  <RegistrationInfo>
    <Description>AutoGPT local executor (autogpt-shim)</Description>
    <URI>{task_name}</URI>
  </RegistrationInfo>
  <Triggers>
    <LogonTrigger>
      <Enabled>true</Enabled>{user}
    </LogonTrigger>
  </Triggers>
  <Principals>
    <Principal id="Author">{user}
      <LogonType>InteractiveToken</LogonType>
      <RunLevel>LeastPrivilege</RunLevel>
    </Principal>
  </Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>
    <RestartOnFailure>
      <Interval>PT1M</Interval>
      <Count>3</Count>
    </RestartOnFailure>
    <Enabled>true</Enabled>
  </Settings>
  <Actions Context="Author">
    <Exec>
      <Command>{command}</Command>
      <Arguments>{arguments}</Arguments>
    </Exec>
  </Actions>
</Task>
"#
    );
    // Windows paths cannot contain `"`, so plain double quotes are enough for cmd.exe.
    let xml_path = format!("\"{}\"", text(&path, FORMAT)?);
    Ok(Unit {
        os: Os::Windows,
        path,
        contents,
        enable_command: format!("schtasks /Create /TN \"{WINDOWS_TASK_NAME}\" /XML {xml_path} /F"),
        disable_command: format!("schtasks /Delete /TN \"{WINDOWS_TASK_NAME}\" /F"),
        notes: vec![
            "the task starts at logon and runs only while you are logged in".to_owned(),
            "Task Scheduler expands %VARIABLE% in the command and arguments, so keep % out of \
             these paths"
                .to_owned(),
        ],
        log_dir: None,
    })
}

/// The path as text, refused when it is not UTF-8 or holds a control character: no escaping
/// makes a newline safe in every one of these formats.
fn text<'a>(path: &'a Path, format: &'static str) -> Result<&'a str, ServiceError> {
    let text = path.to_str().ok_or_else(|| ServiceError::UnsupportedPath {
        path: path.to_string_lossy().into_owned(),
        format,
        reason: "it is not valid UTF-8",
    })?;
    no_controls(text, format)
}

fn no_controls<'a>(text: &'a str, format: &'static str) -> Result<&'a str, ServiceError> {
    if text.chars().any(char::is_control) {
        return Err(ServiceError::UnsupportedPath {
            path: text.to_owned(),
            format,
            reason: "it contains a control character",
        });
    }
    Ok(text)
}

/// One `ExecStart=` word: double-quoted, with `\` and `"` escaped for systemd's unquoting,
/// `%` doubled against specifier expansion and `$` doubled against variable expansion.
fn systemd_quote(word: &str) -> String {
    let mut out = String::with_capacity(word.len() + 2);
    out.push('"');
    for c in word.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A path after `append:`, which systemd takes verbatim up to the end of the line (no quoting)
/// after expanding specifiers: `%` is doubled, and whitespace at either end, which the parser
/// would strip, is refused.
fn systemd_path(path: &str) -> Result<String, ServiceError> {
    if path.trim() != path {
        return Err(ServiceError::UnsupportedPath {
            path: path.to_owned(),
            format: "a systemd unit",
            reason: "systemd strips whitespace at the ends of a log path",
        });
    }
    Ok(path.replace('%', "%%"))
}

/// XML character data and attribute values: the five predefined entities.
fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// One argument as Windows' `CommandLineToArgvW` reads it back: quoted when needed, with
/// backslashes doubled only where they precede a quote.
fn windows_arg(arg: &str) -> String {
    if !arg.is_empty() && !arg.contains([' ', '\t', '"']) {
        return arg.to_owned();
    }
    let mut out = String::from("\"");
    let mut backslashes = 0;
    for c in arg.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                out.push_str(&"\\".repeat(backslashes * 2 + 1));
                out.push('"');
                backslashes = 0;
            }
            c => {
                out.push_str(&"\\".repeat(backslashes));
                out.push(c);
                backslashes = 0;
            }
        }
    }
    out.push_str(&"\\".repeat(backslashes * 2));
    out.push('"');
    out
}

/// A POSIX shell word for the printed commands, quoted only when it needs to be.
fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@,=".contains(c));
    if safe {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::audit::test_dir::TempDir;
    use super::*;

    const SHIM: &str = "/opt/Auto GPT & co/bin/autogpt-shim";
    const CONFIG: &str = "/home/me/My Config's & 100%/config.toml";
    const LOGS: &str = "/home/me/.local/state/autogpt-local-executor";

    fn locations(base: &Path) -> Locations {
        Locations {
            config_home: Some(base.join("config")),
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
            "StandardOutput=append:/home/me/.local/state/autogpt-local-executor/shim.out.log",
            "StandardError=append:/home/me/.local/state/autogpt-local-executor/shim.err.log",
            "WantedBy=default.target",
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
        assert!(c.contains("<key>KeepAlive</key>\n  <true/>"), "{c}");
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
            c.contains(r"<Arguments>--config &quot;C:\Users\me\App Data\config.toml&quot; start</Arguments>"),
            "{c}"
        );
        for fragment in [
            "<LogonTrigger>",
            r"<UserId>CORP\me &amp; you</UserId>",
            "<RunLevel>LeastPrivilege</RunLevel>",
            "<Interval>PT1M</Interval>",
            "<Count>3</Count>",
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

        uninstall(&unit, &mut out).unwrap();
        uninstall(&unit, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(&format!("removed {}\n", unit.path.display())),
            "{text}"
        );
        assert!(text.contains("nothing to remove: "), "{text}");
        assert_eq!(
            text.matches("systemctl --user disable --now autogpt-shim.service")
                .count(),
            2
        );
        assert!(
            own_files::read_capped(&unit.path, UNIT_CAP)
                .unwrap()
                .is_none()
        );
    }
}
