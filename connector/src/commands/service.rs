//! `autogpt-shim install` / `uninstall`: the per-user autostart entry (a systemd user unit, a
//! launchd agent or a Task Scheduler task) that runs `<shim> --config <cfg> start` at login
//! (shim-reference-behaviour.md section 16).
//!
//! Like the reference, this only writes or removes the file and prints the command that
//! activates it; it never runs `systemctl`, `launchctl` or `schtasks` itself. Every path is
//! escaped for the format it lands in, and paths no format can carry (control characters,
//! non-UTF-8) are refused rather than written broken.
//!
//! Unlike the reference, `install` also makes sure the entry can start: the service sees
//! neither the flags nor the shell's environment, so [`plan_config`] turns them into the
//! config file the entry names, and refuses with one sentence when the result could not
//! start. A refused start (exit 77, 78) is never restarted: it would fail the same way.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use local_core::machine::jail::Jail;
use local_core::machine::own_files;

use crate::cli::{EXIT_AUTH, EXIT_PREFLIGHT};
use crate::config::{self, Env, ShimConfig};

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
    /// A file that exists while the entry is enabled (systemd's `default.target.wants`
    /// link), so `uninstall` can ask for the disable first: `systemctl disable` needs the
    /// unit file. `None` where this cannot be told from a file.
    pub enabled_marker: Option<PathBuf>,
    /// What `uninstall` advises once the file is gone: how to stop what the service manager
    /// may still have loaded, with a command that needs no file.
    pub after_removal: String,
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
    /// `uninstall` while the entry is still enabled.
    #[error(
        "{} is still enabled; disable it first with: {disable}, then run `autogpt-shim uninstall` again",
        path.display()
    )]
    StillEnabled {
        /// The entry.
        path: PathBuf,
        /// The command that disables it.
        disable: String,
    },
    /// The configuration the entry would start with is missing something or cannot work.
    #[error("{0}")]
    Config(String),
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
/// stops what the service manager may still have loaded. An entry known to be enabled is
/// left in place: its disable command needs the file, so that comes first.
///
/// # Errors
/// [`ServiceError::StillEnabled`]; the file exists but cannot be removed, or the report
/// cannot be printed.
pub fn uninstall(unit: &Unit, out: &mut dyn Write) -> Result<(), ServiceError> {
    if let Some(marker) = &unit.enabled_marker {
        // The link resolves only while the unit file it points at exists.
        let enabled = own_files::read_capped(marker, UNIT_CAP)
            .map_err(|source| ServiceError::Io {
                path: marker.clone(),
                source,
            })?
            .is_some();
        if enabled {
            return Err(ServiceError::StillEnabled {
                path: unit.path.clone(),
                disable: unit.disable_command.clone(),
            });
        }
    }
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
    writeln!(out, "{}", unit.after_removal)?;
    Ok(())
}

/// Prints whether the entry is installed (and whether it matches this build's template), its
/// path and its commands, for `status`; returns whether it is installed.
///
/// # Errors
/// The file exists but cannot be read, or the report cannot be printed.
pub fn describe(unit: &Unit, out: &mut dyn Write) -> Result<bool, ServiceError> {
    let current = installed(unit)?;
    match current {
        Some(true) => {
            writeln!(out, "autostart: installed at {}", unit.path.display())?;
        }
        Some(false) => writeln!(
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

/// The entry's state for `status --json`: `path`, `installed`, `current` (whether it is this
/// build's entry; null when not installed), `enable_command` and `disable_command`.
///
/// # Errors
/// The file exists but cannot be read.
pub fn describe_json(unit: &Unit) -> Result<serde_json::Value, ServiceError> {
    let current = installed(unit)?;
    Ok(serde_json::json!({
        "path": unit.path.display().to_string(),
        "installed": current.is_some(),
        "current": current,
        "enable_command": unit.enable_command,
        "disable_command": unit.disable_command,
    }))
}

/// `None` when the entry is not installed, else whether it is this build's entry.
fn installed(unit: &Unit) -> Result<Option<bool>, ServiceError> {
    let current =
        own_files::read_capped(&unit.path, UNIT_CAP).map_err(|source| ServiceError::Io {
            path: unit.path.clone(),
            source,
        })?;
    Ok(current.map(|bytes| bytes.as_slice() == unit.contents.as_bytes()))
}

/// What `install` does with the config file the entry starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigPlan {
    /// The file exists and already holds every setting given.
    Keep,
    /// Write `text`: a new file, or with `--force` an existing one updated.
    Write {
        /// The whole file.
        text: String,
        /// The keys set from the flags and environment.
        keys: Vec<String>,
        /// Whether a file was there before.
        updated: bool,
    },
}

/// The first line of a config file `install` creates.
const CONFIG_HEADER: &str = "# autogpt-shim configuration, written by `autogpt-shim install` from its flags and\n\
     # AUTOGPT_SHIM_* variables. Keys and meanings: docs/connector.md, \"Configuration\".\n";

/// Decides what the config file at `path` (holding `existing`, if any) must become so a
/// service started with `--config path start` gets `settings`, and checks that it could start
/// with it ([`check_startable`]); returns the plan and the advice to print. `env` is this
/// shell's environment; the service is assumed to see none of its `AUTOGPT_SHIM_*`.
///
/// An existing file is kept when it already means the same; changing it needs `force`, and
/// then only the given keys change (comments are not kept: the file is rewritten from its
/// parsed form).
///
/// # Errors
/// [`ServiceError::Config`] with one sentence naming what is missing or wrong.
pub fn plan_config(
    path: &Path,
    existing: Option<&str>,
    settings: &toml::Table,
    force: bool,
    env: &impl Env,
) -> Result<(ConfigPlan, Vec<String>), ServiceError> {
    let service_env = |name: &str| {
        if name.starts_with(config::ENV_PREFIX) {
            None
        } else {
            env.var(name)
        }
    };
    let parse = |text: &str| {
        config::parse_file(path, text, &service_env)
            .map(|(config, _)| config)
            .map_err(|err| ServiceError::Config(err.to_string()))
    };
    let (plan, config) = match existing {
        None => {
            let body = toml::to_string(settings).map_err(|err| config_text_error(&err))?;
            let text = format!("{CONFIG_HEADER}{body}");
            let config = parse(&text)?;
            let keys = settings.keys().cloned().collect();
            (
                ConfigPlan::Write {
                    text,
                    keys,
                    updated: false,
                },
                config,
            )
        }
        Some(current_text) => {
            let current = parse(current_text)?;
            let mut table: toml::Table = current_text.parse().map_err(|_| {
                ServiceError::Config(format!(
                    "the config file {} is not valid TOML: fix it, or replace it with --force",
                    path.display()
                ))
            })?;
            let changed: Vec<String> = settings
                .iter()
                .filter(|(key, value)| table.get(key.as_str()) != Some(value))
                .map(|(key, _)| key.clone())
                .collect();
            table.extend(settings.clone());
            let text = toml::to_string(&table).map_err(|err| config_text_error(&err))?;
            let config = parse(&text)?;
            if config == current {
                (ConfigPlan::Keep, current)
            } else if !force {
                return Err(ServiceError::Config(format!(
                    "{} already sets {} differently; pass --force to change {} (its other settings are kept), or edit the file",
                    path.display(),
                    changed.join(", "),
                    if changed.len() == 1 { "it" } else { "them" }
                )));
            } else {
                (
                    ConfigPlan::Write {
                        text,
                        keys: changed,
                        updated: true,
                    },
                    config,
                )
            }
        }
    };
    if config.token_file.is_none()
        && env
            .var(config::TOKEN_ENV)
            .is_some_and(|t| !t.trim().is_empty())
    {
        return Err(ServiceError::Config(format!(
            "the token is in {}, which the service will not see and the config file never holds; put it in a file only you can read (chmod 600) and pass --token-file FILE",
            config::TOKEN_ENV
        )));
    }
    let notes = check_startable(&config, &service_env)?;
    Ok((plan, notes))
}

/// What `start` would refuse in `config` before dialling, as one sentence, or the advice for
/// what it cannot check (a token only `auth` stores).
///
/// # Errors
/// [`ServiceError::Config`] naming the problem and what to pass or do.
pub fn check_startable(config: &ShimConfig, env: &impl Env) -> Result<Vec<String>, ServiceError> {
    let refuse = |message: String| Err(ServiceError::Config(message));
    if config.enable_recording {
        return refuse(
            "enable_recording is a design preview and always fails closed; install without --enable-recording".to_owned(),
        );
    }
    let url = match &config.session_id {
        Some(session) => config.data_url(session),
        None => config.ws_endpoint(),
    };
    if let Err(err) = url {
        return refuse(format!("bad platform URL: {err}"));
    }
    match &config.session_id {
        Some(_) => {
            let Some(root) = &config.allowed_root else {
                return refuse("no allowed root: pass --allowed-root or set HOME".to_owned());
            };
            if Jail::open(root).is_err() {
                return refuse(format!(
                    "the allowed root {} does not exist or is not a readable directory; create it or pass --allowed-root",
                    root.display()
                ));
            }
        }
        None => {
            if config::home_dir(env).is_none_or(|home| Jail::open(&home).is_err()) {
                return refuse(
                    "control mode browses from the home directory, and HOME is not a readable directory".to_owned(),
                );
            }
        }
    }
    let mut notes = Vec::new();
    match config.read_token() {
        Ok(Some(_)) => {}
        Ok(None) => notes.push(
            "no token is configured: the service uses the tokens `autogpt-shim auth` stores, so run that first if you have not"
                .to_owned(),
        ),
        Err(err) => return refuse(err.to_string()),
    }
    Ok(notes)
}

/// Writes the planned config file atomically with mode 0600 (it names the token file and may
/// hold a URL with credentials) and says what it wrote; prints that a kept file is used.
///
/// # Errors
/// The file cannot be written, or the report cannot be printed.
pub fn write_config(
    path: &Path,
    plan: &ConfigPlan,
    out: &mut dyn Write,
) -> Result<(), ServiceError> {
    match plan {
        ConfigPlan::Keep => {
            writeln!(out, "using the existing configuration {}", path.display())?;
        }
        ConfigPlan::Write {
            text,
            keys,
            updated,
        } => {
            own_files::write_atomic(path, text.as_bytes(), own_files::PRIVATE_FILE_MODE).map_err(
                |source| ServiceError::Io {
                    path: path.to_path_buf(),
                    source,
                },
            )?;
            let verb = if *updated { "updated" } else { "wrote" };
            let what = if keys.is_empty() {
                "no settings, so the defaults apply".to_owned()
            } else {
                keys.join(", ")
            };
            writeln!(
                out,
                "{verb} the configuration {} (mode 0600): {what}",
                path.display()
            )?;
        }
    }
    Ok(())
}

fn config_text_error(err: &toml::ser::Error) -> ServiceError {
    ServiceError::Config(format!("cannot write the settings as TOML: {err}"))
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
mod tests;
