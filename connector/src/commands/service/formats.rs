//! The three autostart formats (a systemd user unit, a launchd agent plist, a Task Scheduler
//! task XML), each with the quoting and escaping its paths need; paths none can carry are
//! refused.

use std::path::Path;

use local_core::desktop_entry::{exec_word, screenshot_entry};
use local_core::malloc_tunables;

use super::{
    APP_DIR, DESKTOP_ENTRY_NAME, LAUNCHD_LABEL, Locations, Os, SYSTEMD_UNIT_NAME, ServiceError,
    Unit, WINDOWS_TASK_NAME,
};
use crate::cli::{EXIT_AUTH, EXIT_PREFLIGHT};

pub(super) fn systemd_unit(
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
    // The allocator's tunable (local_core::malloc_tunables); a unit inherits no shell's.
    let tunables = format!(
        "{}={}",
        malloc_tunables::VAR,
        malloc_tunables::MMAP_THRESHOLD
    );
    let contents = format!(
        "[Unit]\n\
         Description=AutoGPT local executor (autogpt-shim)\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={exec}\n\
         Environment=\"{tunables}\"\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         RestartPreventExitStatus={EXIT_AUTH} {EXIT_PREFLIGHT}\n\
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
            format!(
                "a refused start (exit {EXIT_AUTH} or {EXIT_PREFLIGHT}) is not retried: fix what \
                 shim.err.log names, then run: systemctl --user restart {SYSTEMD_UNIT_NAME}"
            ),
        ],
        log_dir: Some(log_dir.to_path_buf()),
        enabled_marker: Some(
            base.join("systemd")
                .join("user")
                .join("default.target.wants")
                .join(SYSTEMD_UNIT_NAME),
        ),
        after_removal: format!(
            "if it is still running, stop it with: systemctl --user stop {SYSTEMD_UNIT_NAME}; \
             systemctl --user daemon-reload"
        ),
        desktop_entry: match &locations.data_home {
            Some(data) => Some((
                data.join("applications").join(DESKTOP_ENTRY_NAME),
                desktop_entry(
                    text(shim, "a desktop entry")?,
                    text(config, "a desktop entry")?,
                ),
            )),
            None => None,
        },
    })
}

/// A hidden desktop entry for `shim`, started as the service starts it, that lets KWin give it
/// screenshots (`local_core::desktop_entry`): without one a KDE session has no screenshots for
/// an agent.
pub(super) fn desktop_entry(shim: &str, config: &str) -> String {
    screenshot_entry(
        "AutoGPT local executor",
        "Lets KDE give the AutoGPT connector screenshots (written by autogpt-shim install)",
        &format!("{} --config {} start", exec_word(shim), exec_word(config)),
    )
}

pub(super) fn launchd_agent(
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
  <dict>
    <key>Crashed</key>
    <true/>
  </dict>
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
            "launchd restarts the daemon only after a crash: it reconnects by itself, and a \
             refused start (exit 77 or 78) would fail again; fix what shim.err.log names, then \
             load the agent again"
                .to_owned(),
            format!(
                "output goes to shim.out.log and shim.err.log in {}",
                log_dir.display()
            ),
        ],
        log_dir: Some(log_dir.to_path_buf()),
        enabled_marker: None,
        // By label: `unload` needs the plist, which is gone by then.
        after_removal: format!(
            "if it is still loaded, stop it with: launchctl bootout gui/$(id -u)/{LAUNCHD_LABEL}"
        ),
        desktop_entry: None,
    })
}

pub(super) fn scheduled_task(
    locations: &Locations,
    shim: &Path,
    config: &Path,
) -> Result<Unit, ServiceError> {
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
            "Task Scheduler does not restart it: the daemon reconnects by itself, and the task \
             cannot tell a refused start (exit 77 or 78) from a crash"
                .to_owned(),
            "Task Scheduler expands %VARIABLE% in the command and arguments, so keep % out of \
             these paths"
                .to_owned(),
        ],
        log_dir: None,
        enabled_marker: None,
        // The task lives in Task Scheduler, not in the XML it was created from.
        after_removal: format!(
            "if the task is still registered, stop and delete it with: schtasks /End /TN \
             \"{WINDOWS_TASK_NAME}\" and schtasks /Delete /TN \"{WINDOWS_TASK_NAME}\" /F"
        ),
        desktop_entry: None,
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
pub(super) fn systemd_quote(word: &str) -> String {
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
pub(super) fn xml_escape(text: &str) -> String {
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
pub(super) fn windows_arg(arg: &str) -> String {
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
