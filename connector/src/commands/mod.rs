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

/// Runs a subcommand other than `start`, printing to `out`, and returns its exit code.
/// `stop` ends `audit tail`'s following (set it from a Ctrl-C handler).
pub fn run(cli: &Cli, env: &impl Env, out: &mut dyn Write, stop: &Arc<AtomicBool>) -> u8 {
    match &cli.command {
        // `main` runs the daemon itself.
        Command::Start(_) | Command::Mcp(_) | Command::Try(_) => EXIT_PREFLIGHT,
        Command::Install {
            at_login,
            force,
            in_place,
            ..
        } => install_command(cli, env, out, *at_login, *force, *in_place),
        // Without loading the configuration, as the reference does, so a broken config file
        // cannot stop anyone from removing the entry.
        Command::Uninstall => uninstall_command(cli, env, out),
        Command::Auth { no_browser } => with_config(cli, env, out, |config, out| {
            auth::login(config, env, *no_browser, out)
        }),
        Command::Revoke => with_config(cli, env, out, |config, out| auth::revoke(config, env, out)),
        // Every problem, the configuration's included: no early stop at the first.
        Command::Doctor => {
            let loaded = config::load_all(&crate::cli::overrides(cli), env);
            let inputs = crate::preflight::Inputs::gather(loaded, &cli.log_level, env).probed(true);
            doctor::doctor(&inputs, out)
        }
        Command::Status { json } => status_command(cli, env, out, *json),
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

/// `status`: what runs now (every running daemon, else the last one and how it ended), what
/// a start here would run (the configuration), and the autostart entry, under those three
/// headings, or as one JSON object with `--json`. A broken configuration does not stop it.
fn status_command(cli: &Cli, env: &impl Env, out: &mut dyn Write, json: bool) -> u8 {
    let Some(dir) = config::daemons_dir(env) else {
        return fail(out, "no state directory: set HOME or XDG_STATE_HOME");
    };
    let loaded = config::load_all(&crate::cli::overrides(cli), env);
    let config = &loaded.config;
    let survey = status::survey(&dir);
    let code = survey.code();
    let instance = status::Instance::of(config.session_id.as_deref());
    let running = survey.of(&instance).filter(|seen| seen.running);
    let dialled = match &config.session_id {
        Some(id) => config.data_url(id),
        None => config.ws_endpoint(),
    }
    .map_or_else(
        |_| status::redact_url(&config.platform_url),
        |url| status::redact_url(&url),
    );
    let file = config
        .config_file
        .as_ref()
        .map(|file| file.display().to_string());
    let root = config
        .session_id
        .as_ref()
        .and(config.allowed_root.as_ref())
        .map(|root| root.display().to_string());
    let problems: Vec<String> = loaded.problems.iter().map(ToString::to_string).collect();
    let unit = unit(cli, env, &installed_binary(env))
        .ok()
        .map(|(unit, _)| unit);
    if json {
        // The running daemons, or else the last one.
        let shown: Vec<&status::Seen> = if survey.running().next().is_some() {
            survey.running().collect()
        } else {
            survey.daemons.iter().take(1).collect()
        };
        let autostart = unit
            .as_ref()
            .and_then(|unit| service::describe_json(unit).ok());
        let report = serde_json::json!({
            "now": {
                "running": code == status::EXIT_RUNNING,
                "daemons": shown,
                "unreadable": survey.unreadable,
                "status_dir": dir.display().to_string(),
            },
            "configured": {
                "file": file,
                "platform_url": dialled,
                "mode": if config.session_id.is_some() { "legacy" } else { "control" },
                "session_id": config.session_id,
                "allowed_root": root,
                "running": running.is_some(),
                "problems": problems,
            },
            "autostart": autostart,
        });
        let _ = writeln!(out, "{report}");
        return code;
    }
    let printed = (|| -> std::io::Result<()> {
        status::print_now(&survey, &dir, out)?;
        writeln!(
            out,
            "configured: what `autogpt-shim start` would run with these flags, environment and config file"
        )?;
        writeln!(
            out,
            "  config file: {}",
            file.as_deref()
                .unwrap_or("none (defaults, environment and flags)")
        )?;
        writeln!(out, "  mode: {}", instance.describe())?;
        writeln!(out, "  platform: {dialled}")?;
        if let Some(root) = &root {
            writeln!(out, "  allowed root: {root}")?;
        }
        match running {
            Some(seen) => writeln!(out, "  its daemon: running (pid {})", seen.status.pid)?,
            None => writeln!(out, "  its daemon: not running")?,
        }
        if !problems.is_empty() {
            writeln!(
                out,
                "  problems: {}; `autogpt-shim doctor` lists them with what to do",
                problems.len()
            )?;
        }
        Ok(())
    })();
    if printed.is_err() {
        return status::EXIT_UNKNOWN;
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
    in_place: bool,
) -> u8 {
    if !at_login {
        return fail(out, "only --at-login is supported as the autostart trigger");
    }
    let os = service::Os::current();
    let binary = std::env::current_exe()
        .map_err(|err| {
            format!(
                "cannot find this program's own file ({}): run install with the binary's full path",
                local_core::io_words::io_words(&err)
            )
        })
        .and_then(|exe| {
            let stable = service::stable_binary(os, env);
            service::plan_binary(&exe, stable.as_deref(), in_place)
        });
    let binary = match binary {
        Ok(binary) => binary,
        Err(err) => return fail(out, &err),
    };
    let (unit, config_path) = match unit(cli, env, binary.path()) {
        Ok(found) => found,
        Err(err) => return fail(out, &err),
    };
    let planned = std::env::current_dir()
        .map_err(|err| {
            format!(
                "cannot read the current directory ({}): run install from a folder that still exists",
                local_core::io_words::io_words(&err)
            )
        })
        .and_then(|cwd| {
            config::explicit_settings(&crate::cli::overrides(cli), env, &cwd)
                .map_err(|err| err.to_string())
        })
        .and_then(|settings| {
            let existing = own_files::read_capped(&config_path, config::MAX_CONFIG_FILE_BYTES)
                .map_err(|err| {
                    format!(
                        "cannot read the config file {} ({}): make it readable by you, or pass --config with another file",
                        config_path.display(),
                        local_core::io_words::io_words(&err)
                    )
                })?
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
    let done = service::place_binary(&binary, out)
        .and_then(|_| service::write_config(&config_path, &plan, out))
        .and_then(|()| service::install(&unit, true, out));
    if let Err(err) = done {
        return fail(out, &err.to_string());
    }
    let program = binary.path();
    let by_hand = format!(
        "{} --config {} start",
        crate::preflight::shell_quote(program),
        crate::preflight::shell_quote(&config_path)
    );
    let manager = service::user_manager(os, Path::new("/run/systemd"), env);
    let user = env.var("USER");
    let _ = service::print_activation(&unit, &manager, &by_hand, user.as_deref(), out);
    if let Some(dir) = program.parent()
        && !matches!(binary, service::Binary::InPlace(_))
        && !service::on_path(dir, env)
    {
        let _ = writeln!(
            out,
            "note: {} is not on your PATH: add it (for example in ~/.profile) to run `autogpt-shim` by name, or run {} by its full path",
            dir.display(),
            program.display()
        );
    }
    for note in notes {
        let _ = writeln!(out, "note: {note}");
    }
    0
}

fn uninstall_command(cli: &Cli, env: &impl Env, out: &mut dyn Write) -> u8 {
    let unit = match unit(cli, env, &installed_binary(env)) {
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

/// The binary an entry `install` wrote runs: the stable copy when there is one, else this
/// one (`--in-place`).
fn installed_binary(env: &impl Env) -> PathBuf {
    service::stable_binary(service::Os::current(), env)
        .filter(|stable| own_files::look(stable).is_ok())
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("autogpt-shim"))
}

/// The autostart entry for this machine (running `shim`, with the configuration file, and the
/// state directory for its logs) and the configuration file it names.
fn unit(cli: &Cli, env: &impl Env, shim: &Path) -> Result<(service::Unit, PathBuf), String> {
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
        data_home: env
            .var("XDG_DATA_HOME")
            .filter(|dir| Path::new(dir).is_absolute())
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|home| home.join(".local/share"))),
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
        shim,
        &config_path,
        &log_dir,
    )
    .map_err(|err| err.to_string())?;
    Ok((unit, config_path))
}

/// Prints a refusal, one line per problem, and returns 78.
fn fail(out: &mut dyn Write, message: &str) -> u8 {
    for line in message.lines() {
        let _ = writeln!(out, "autogpt-shim: {line}");
    }
    EXIT_PREFLIGHT
}
