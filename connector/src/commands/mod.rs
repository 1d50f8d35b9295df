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

/// Runs a subcommand other than `start`, printing to `out`, and returns its exit code.
/// `stop` ends `audit tail`'s following (set it from a Ctrl-C handler).
pub fn run(cli: &Cli, env: &impl Env, out: &mut dyn Write, stop: &Arc<AtomicBool>) -> u8 {
    match &cli.command {
        // `main` runs the daemon itself.
        Command::Start(_) => EXIT_PREFLIGHT,
        // The reference installs without loading the configuration, so a broken config file
        // cannot stop anyone from removing the entry.
        Command::Install { at_login } => service_command(cli, env, out, Some(*at_login)),
        Command::Uninstall => service_command(cli, env, out, None),
        Command::Auth { no_browser } => with_config(cli, env, out, |config, out| {
            auth::login(config, env, *no_browser, out)
        }),
        Command::Revoke => with_config(cli, env, out, |config, out| auth::revoke(config, env, out)),
        Command::Doctor => with_config(cli, env, out, |config, out| {
            doctor::doctor(&doctor_inputs(cli, config, env), out)
        }),
        Command::Status => with_config(cli, env, out, |config, out| {
            let Some(path) = config::status_path(env) else {
                return fail(out, "no state directory: set HOME or XDG_STATE_HOME");
            };
            let code = status::report(&path, out, status::pid_alive);
            let _ = writeln!(
                out,
                "platform: {}",
                status::redact_url(&config.platform_url)
            );
            // The reference's configured mode: control mode has no root of its own (each
            // chat's session is jailed to the folder picked for it).
            match &config.session_id {
                Some(session) => {
                    let _ = writeln!(out, "configured mode: legacy direct session {session}");
                    if let Some(root) = &config.allowed_root {
                        let _ = writeln!(out, "allowed root: {}", root.display());
                    }
                }
                None => {
                    let _ = writeln!(out, "configured mode: persistent machine control");
                }
            }
            if let Ok(unit) = unit(cli, env) {
                let _ = service::describe(&unit, out);
            }
            code
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
        AuditCommand::Tail => audit::tail(log, key().ok().as_ref(), out, Some(stop)),
        AuditCommand::Show { seq } => audit::show(log, *seq, out),
        AuditCommand::Verify => audit::verify(log, &key(), out),
        AuditCommand::VerifyAll => audit::verify_all(log, &key(), out),
        AuditCommand::Export { output } => audit::export(log, &key(), output.as_deref(), now, out),
        AuditCommand::Rotate => audit::rotate(log, now, out),
        AuditCommand::Prune { older_than } => audit::prune(log, older_than, now, out),
    }
}

fn service_command(cli: &Cli, env: &impl Env, out: &mut dyn Write, install: Option<bool>) -> u8 {
    let unit = match unit(cli, env) {
        Ok(unit) => unit,
        Err(err) => return fail(out, &err),
    };
    let done = match install {
        Some(at_login) => service::install(&unit, at_login, out),
        None => service::uninstall(&unit, out),
    };
    match done {
        Ok(()) => 0,
        Err(service::ServiceError::UnsupportedTrigger) => {
            fail(out, "only --at-login is supported as the autostart trigger")
        }
        Err(err) => fail(out, &err.to_string()),
    }
}

/// The autostart entry for this machine: this executable, the configuration file, and the
/// state directory for its logs.
fn unit(cli: &Cli, env: &impl Env) -> Result<service::Unit, String> {
    let shim =
        std::env::current_exe().map_err(|err| format!("cannot find this executable: {err}"))?;
    let config_path = cli
        .config
        .clone()
        .or_else(|| config::config_path(env))
        .ok_or("no configuration directory: set HOME or XDG_CONFIG_HOME")?;
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
    service::unit_for(
        service::Os::current(),
        &locations,
        &shim,
        &config_path,
        &log_dir,
    )
    .map_err(|err| err.to_string())
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
