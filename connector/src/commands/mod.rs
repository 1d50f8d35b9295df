//! Subcommands besides `start`: auth, revoke, audit, doctor, status, install and uninstall, and
//! [`run`], which resolves what each needs from the configuration and calls it.

pub mod audit;
pub mod auth;
pub mod doctor;
pub mod service;
pub mod status;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

use crate::cli::{AuditCommand, Cli, Command, EXIT_PREFLIGHT, Env, load_config};
use crate::config::{self, ShimConfig};
use local_core::machine::own_files;
use local_core::machine::sandbox;

/// Runs a subcommand other than `start`, printing to `out`, and returns its exit code.
/// `stop` ends `audit tail`'s following (set it from a Ctrl-C handler).
pub fn run(cli: &Cli, env: &impl Env, out: &mut dyn Write, stop: &Arc<AtomicBool>) -> u8 {
    match &cli.command {
        // `main` runs the daemon itself.
        Command::Start(_) | Command::Mcp(_) => EXIT_PREFLIGHT,
        Command::Install {
            at_login, force, ..
        } => install_command(cli, env, out, *at_login, *force),
        // Without loading the configuration, as the reference does, so a broken config file
        // cannot stop anyone from removing the entry.
        Command::Uninstall => uninstall_command(cli, env, out),
        Command::Auth { no_browser } => with_config(cli, env, out, |config, out| {
            auth::login(config, env, *no_browser, out)
        }),
        Command::Revoke => with_config(cli, env, out, |config, out| auth::revoke(config, env, out)),
        Command::Doctor => with_config(cli, env, out, |config, out| {
            doctor::doctor(&doctor_inputs(cli, config, env), out)
        }),
        Command::Status { json } => with_config(cli, env, out, |config, out| {
            status_command(cli, config, env, out, *json)
        }),
        Command::Audit { command } => with_config(cli, env, out, |config, out| {
            let Some(log) = config.audit_log_path.clone() else {
                return fail(
                    out,
                    "no audit log path: set HOME, XDG_STATE_HOME or audit_log_path",
                );
            };
            audit_command(command, &log, env, out, stop)
        }),
    }
}

/// `status`: the last daemon's own report, the configuration a start would use now, and the
/// autostart entry, under those three headings, or as one JSON object with `--json`.
fn status_command(
    cli: &Cli,
    config: &ShimConfig,
    env: &impl Env,
    out: &mut dyn Write,
    json: bool,
) -> u8 {
    let Some(path) = config::status_path(env) else {
        return fail(out, "no state directory: set HOME or XDG_STATE_HOME");
    };
    let last = status::last_run(&path, status::pid_alive);
    let platform = status::redact_url(&config.platform_url);
    let file = config
        .config_file
        .as_ref()
        .map(|file| file.display().to_string());
    let unit = unit(cli, env).ok().map(|(unit, _)| unit);
    if json {
        let (mode, root) = match &config.session_id {
            Some(_) => (
                "legacy",
                config
                    .allowed_root
                    .as_ref()
                    .map(|root| root.display().to_string()),
            ),
            None => ("control", None),
        };
        let autostart = unit
            .as_ref()
            .and_then(|unit| service::describe_json(unit).ok());
        let report = serde_json::json!({
            "last_run": last,
            "configuration": {
                "file": file,
                "platform_url": platform,
                "mode": mode,
                "session_id": config.session_id,
                "allowed_root": root,
            },
            "autostart": autostart,
        });
        let _ = writeln!(out, "{report}");
        return last.code;
    }
    let code = match status::print_last_run(&last, out) {
        Ok(()) => last.code,
        Err(_) => status::EXIT_UNKNOWN,
    };
    let _ = writeln!(
        out,
        "configuration: {}",
        file.as_deref()
            .unwrap_or("no config file (defaults, environment and flags)")
    );
    let _ = writeln!(out, "  platform: {platform}");
    // The reference's configured mode: control mode has no root of its own (each chat's
    // session is jailed to the folder picked for it).
    match &config.session_id {
        Some(session) => {
            let _ = writeln!(out, "  mode: legacy direct session {session}");
            if let Some(root) = &config.allowed_root {
                let _ = writeln!(out, "  allowed root: {}", root.display());
            }
        }
        None => {
            let _ = writeln!(out, "  mode: persistent machine control");
        }
    }
    if let Some(unit) = &unit {
        let _ = service::describe(unit, out);
    }
    code
}

fn with_config<E: Env>(
    cli: &Cli,
    env: &E,
    out: &mut dyn Write,
    body: impl FnOnce(&ShimConfig, &mut dyn Write) -> u8,
) -> u8 {
    match load_config(cli, env) {
        Ok((config, _warnings)) => body(&config, out),
        Err(refusal) => fail(out, &refusal.message),
    }
}

fn audit_command(
    command: &AuditCommand,
    log: &Path,
    env: &impl Env,
    out: &mut dyn Write,
    stop: &Arc<AtomicBool>,
) -> u8 {
    let key = || {
        config::audit_key_path(env).map_or_else(
            || {
                Err(std::io::Error::other(
                    "no state directory for the audit key",
                ))
            },
            |path| {
                crate::auth::store::load_audit_key(
                    &path,
                    &crate::auth::store::Places::from_env(env),
                )
            },
        )
    };
    let now = SystemTime::now();
    match command {
        AuditCommand::Tail { lines, no_follow } => audit::tail(
            log,
            key().ok().as_ref(),
            out,
            (!no_follow).then_some(&**stop),
            *lines,
        ),
        AuditCommand::Show { seq } => audit::show(log, *seq, out),
        AuditCommand::Verify => audit::verify(log, &key(), out),
        AuditCommand::VerifyAll => audit::verify_all(log, &key(), out),
        AuditCommand::Export { output } => audit::export(log, &key(), output.as_deref(), now, out),
        AuditCommand::Rotate => audit::rotate(log, now, out),
        AuditCommand::Prune { older_than } => audit::prune(log, older_than, now, out),
    }
}

/// `install`: the config file the entry starts with (from the flags and `AUTOGPT_SHIM_*`
/// variables, refused when the service could not start with it), then the entry itself.
fn install_command(
    cli: &Cli,
    env: &impl Env,
    out: &mut dyn Write,
    at_login: bool,
    force: bool,
) -> u8 {
    if !at_login {
        return fail(out, "only --at-login is supported as the autostart trigger");
    }
    let (unit, config_path) = match unit(cli, env) {
        Ok(found) => found,
        Err(err) => return fail(out, &err),
    };
    let planned = std::env::current_dir()
        .map_err(|err| {
            format!(
                "cannot read the current directory ({}): run install from a folder that still exists",
                err.kind()
            )
        })
        .and_then(|cwd| {
            config::explicit_settings(&crate::cli::overrides(cli), env, &cwd)
                .map_err(|err| err.to_string())
        })
        .and_then(|settings| {
            let existing = own_files::read_capped(&config_path, config::MAX_CONFIG_FILE_BYTES)
                .map_err(|err| err.to_string())?
                .map(String::from_utf8)
                .transpose()
                .map_err(|_| {
                    format!(
                        "the config file {} is not UTF-8 text: save it as UTF-8",
                        config_path.display()
                    )
                })?;
            service::plan_config(&config_path, existing.as_deref(), &settings, force, env)
                .map_err(|err| err.to_string())
        });
    let (plan, notes) = match planned {
        Ok(planned) => planned,
        Err(err) => return fail(out, &err),
    };
    let done = service::write_config(&config_path, &plan, out)
        .and_then(|()| service::install(&unit, true, out));
    if let Err(err) = done {
        return fail(out, &err.to_string());
    }
    for note in notes {
        let _ = writeln!(out, "note: {note}");
    }
    0
}

fn uninstall_command(cli: &Cli, env: &impl Env, out: &mut dyn Write) -> u8 {
    let unit = match unit(cli, env) {
        Ok((unit, _)) => unit,
        Err(err) => return fail(out, &err),
    };
    match service::uninstall(&unit, out) {
        Ok(()) => 0,
        Err(err @ service::ServiceError::StillEnabled { .. }) => {
            let _ = writeln!(out, "autogpt-shim: {err}");
            1
        }
        Err(err) => fail(out, &err.to_string()),
    }
}

/// The autostart entry for this machine (this executable, the configuration file, and the
/// state directory for its logs) and the configuration file it names.
fn unit(cli: &Cli, env: &impl Env) -> Result<(service::Unit, PathBuf), String> {
    let shim =
        std::env::current_exe().map_err(|err| format!("cannot find this executable: {err}"))?;
    let config_path = cli
        .config
        .clone()
        .or_else(|| config::config_path(env))
        .ok_or("no configuration directory: set HOME or XDG_CONFIG_HOME")?;
    // The service starts elsewhere, so a relative --config would name another file.
    let config_path = std::path::absolute(&config_path)
        .map_err(|err| format!("cannot resolve {}: {err}", config_path.display()))?;
    let log_dir = config::state_dir(env).ok_or("no state directory: set HOME or XDG_STATE_HOME")?;
    let home = env.var("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let locations = service::Locations {
        config_home: env
            .var("XDG_CONFIG_HOME")
            .filter(|dir| Path::new(dir).is_absolute())
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|home| home.join(".config"))),
        home,
        local_app_data: env.var("LOCALAPPDATA").map(PathBuf::from),
        windows_user: env.var("USERNAME").map(|user| match env.var("USERDOMAIN") {
            Some(domain) => format!("{domain}\\{user}"),
            None => user,
        }),
    };
    let unit = service::unit_for(
        service::Os::current(),
        &locations,
        &shim,
        &config_path,
        &log_dir,
    )
    .map_err(|err| err.to_string())?;
    Ok((unit, config_path))
}

fn doctor_inputs(cli: &Cli, config: &ShimConfig, env: &impl Env) -> doctor::DoctorInputs {
    let state = config::state_dir(env).unwrap_or_default();
    doctor::DoctorInputs {
        os: service::Os::current(),
        session_id: config.session_id.clone(),
        allowed_root: config.allowed_root.clone().unwrap_or_default(),
        home: config::home_dir(env),
        audit_log_path: config
            .audit_log_path
            .clone()
            .unwrap_or_else(|| state.join("audit.log")),
        audit_key_path: config::audit_key_path(env).unwrap_or_else(|| state.join("audit.key")),
        token_in_env: env
            .var(config::TOKEN_ENV)
            .is_some_and(|token| !token.trim().is_empty()),
        token_file: cli.token_file.clone().or_else(|| config.token_file.clone()),
        platform_url: config.platform_url.clone(),
        enable_shell: config.enable_shell,
        shell_sandbox: config.shell_sandbox,
        // A throwaway process tries each part; nothing of this one is confined.
        sandbox_support: cfg!(target_os = "linux")
            .then(|| sandbox::probe(std::path::Path::new(crate::daemon::SANDBOX_LAUNCHER))),
        enable_computer_use: config.enable_computer_use,
        enable_recording: config.enable_recording,
        xdg_session_type: env.var("XDG_SESSION_TYPE"),
        wayland_display: env.var("WAYLAND_DISPLAY"),
        display: env.var("DISPLAY"),
    }
}

fn fail(out: &mut dyn Write, message: &str) -> u8 {
    let _ = writeln!(out, "autogpt-shim: {message}");
    EXIT_PREFLIGHT
}
