//! The launcher (Linux): reads the policy from its arguments, confines this process and
//! executes the program in its place; or, for the probe, tries each part and reports.
//!
//! The steps, in order, each failing closed (nothing is run):
//! 1. a new user namespace (this user mapped to itself, `setgroups` denied) with a new mount
//!    namespace, and in `strict` new network and IPC namespaces (no interface up: not even
//!    loopback reaches anything);
//! 2. the mounts (`mounts.rs`), then back into the working folder through them;
//! 3. `no_new_privs`, and every capability dropped from every set, the bounding set included,
//!    so the program (root in the namespace when the user is root) starts with none and can
//!    neither remount nor bring an interface up;
//! 4. the Landlock ruleset and the seccomp filters (`rules.rs`);
//! 5. `exec`: the same process becomes the program, in the process group the supervisor kills.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use nix::sched::{CloneFlags, unshare};
use rustix::thread::{
    CapabilitySet, CapabilitySets, clear_ambient_capability_set,
    remove_capability_from_bounding_set, set_capabilities, set_no_new_privs,
};

use super::{EXIT_NOT_CONFINED, Launched, mounts, rules};

/// What the launcher confines: the mode and the two folders the command may change.
#[derive(Debug)]
pub(super) struct Policy {
    pub(super) strict: bool,
    pub(super) root: PathBuf,
    pub(super) tmp: PathBuf,
}

/// A step that failed, and why, for the one line the command's stderr gets.
#[derive(Debug)]
pub(super) struct Failure {
    step: &'static str,
    why: String,
}

impl Failure {
    pub(super) const fn new(step: &'static str, why: String) -> Self {
        Self { step, why }
    }

    pub(super) fn mounts(what: &str, err: rustix::io::Errno) -> Self {
        Self::new("mounts", format!("{what}: {err}"))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.step, self.why)
    }
}

/// Runs the launcher for its arguments (after [`super::LAUNCH_ARG`]).
pub(super) fn launch(args: Vec<OsString>) -> Launched {
    let mut args = args.into_iter();
    match args.next().as_deref().and_then(OsStr::to_str) {
        Some("run") => run(args),
        Some("spare") => spare(args),
        Some("probe") => probe(args),
        _ => not_confined("the launcher was started without a policy"),
    }
}

/// Why a root of `/` is refused: nothing would be protected.
const ROOT_IS_SLASH: &str = "the sandbox cannot protect anything when the allowed root is /: choose a folder as the allowed root";

fn not_set_up(strict: bool, failure: &Failure) -> Launched {
    not_confined(&format!(
        "the {} sandbox could not be set up ({failure})",
        if strict { "strict" } else { "workspace" }
    ))
}

fn not_confined(why: &str) -> Launched {
    Launched::Failed {
        message: format!("the command was not run: {why}"),
        code: EXIT_NOT_CONFINED,
    }
}

/// `run <mode> <root> <tmp> <cwd> <name> <program> <arg0> [args…]`.
fn run(mut args: impl Iterator<Item = OsString>) -> Launched {
    let mut next = || args.next();
    let (Some(mode), Some(root), Some(tmp), Some(cwd), Some(name), Some(program), Some(arg0)) =
        (next(), next(), next(), next(), next(), next(), next())
    else {
        return not_confined("the launcher's arguments are incomplete");
    };
    let strict = match mode.to_str() {
        Some("workspace") => false,
        Some("strict") => true,
        _ => return not_confined("the launcher was given an unknown mode"),
    };
    let rest: Vec<OsString> = args.collect();
    let policy = Policy {
        strict,
        root: PathBuf::from(root),
        tmp: PathBuf::from(tmp),
    };
    if policy.root.parent().is_none() {
        return not_confined(ROOT_IS_SLASH);
    }
    let confined = namespaces(strict)
        .and_then(|()| mounts::isolate(&policy))
        .and_then(|()| enter(Path::new(&cwd)))
        .and_then(|()| drop_privileges())
        .and_then(|()| rules::landlock(&policy).map(drop))
        .and_then(|()| rules::seccomp(strict));
    if let Err(failure) = confined {
        return not_set_up(strict, &failure);
    }
    exec(&program, &name, &arg0, &rest, None)
}

/// `spare <mode> <root> <tmp>`: the spare launcher (`spare.rs`). Confines itself as `run`
/// does, then reads the command from stdin to its end (`spare::request`'s fields) and becomes
/// it with `/dev/null` as stdin. A confinement that failed is reported only then, when the
/// command would have run, with the same line and status as `run`'s.
fn spare(mut args: impl Iterator<Item = OsString>) -> Launched {
    use std::io::Read as _;
    use std::os::unix::ffi::OsStringExt as _;
    let mut next = || args.next();
    let (Some(mode), Some(root), Some(tmp)) = (next(), next(), next()) else {
        return not_confined("the launcher's arguments are incomplete");
    };
    let strict = match mode.to_str() {
        Some("workspace") => false,
        Some("strict") => true,
        _ => return not_confined("the launcher was given an unknown mode"),
    };
    let policy = Policy {
        strict,
        root: PathBuf::from(root),
        tmp: PathBuf::from(tmp),
    };
    let confined = if policy.root.parent().is_none() {
        Err(None)
    } else {
        namespaces(strict)
            .and_then(|()| mounts::isolate(&policy))
            .and_then(|()| drop_privileges())
            .and_then(|()| rules::landlock(&policy).map(drop))
            .and_then(|()| rules::seccomp(strict))
            .map_err(Some)
    };
    let mut request = Vec::new();
    if std::io::stdin().read_to_end(&mut request).is_err() || request.is_empty() {
        return not_confined("the spare launcher was given no command");
    }
    let mut fields = request
        .split(|byte| *byte == 0)
        .map(|field| OsString::from_vec(field.to_vec()));
    let mut next = || fields.next();
    let (Some(cwd), Some(name), Some(program), Some(arg0), Some(count)) =
        (next(), next(), next(), next(), next())
    else {
        return not_confined("the spare launcher's request is incomplete");
    };
    let count = count
        .to_str()
        .and_then(|count| count.parse().ok())
        .unwrap_or(0);
    let rest: Vec<OsString> = fields.by_ref().take(count).collect();
    let mut env = Vec::new();
    while let (Some(key), Some(value)) = (fields.next(), fields.next()) {
        env.push((key, value));
    }
    match confined.and_then(|()| enter(Path::new(&cwd)).map_err(Some)) {
        Err(None) => return not_confined(ROOT_IS_SLASH),
        Err(Some(failure)) => return not_set_up(strict, &failure),
        Ok(()) => {}
    }
    exec(&program, &name, &arg0, &rest, Some(&env))
}

/// Becomes the program; returns only when it cannot be executed (126) or found (127). With
/// `env` (the spare), the program gets that environment and `/dev/null` as stdin; without,
/// this process's, which the connector set.
fn exec(
    program: &OsStr,
    name: &OsStr,
    arg0: &OsStr,
    args: &[OsString],
    env: Option<&[(OsString, OsString)]>,
) -> Launched {
    let command = |program: &OsStr| {
        let mut command = std::process::Command::new(program);
        command.arg0(arg0).args(args);
        if let Some(env) = env {
            command
                .env_clear()
                .envs(env.iter().map(|(key, value)| (key, value)))
                .stdin(std::process::Stdio::null());
        }
        command
    };
    let err = command(program).exec();
    // What the caller found may be hidden here (a program in the home folder, under
    // `strict`): the bare name is looked for again on PATH as the sandbox sees it.
    let path = match env {
        Some(env) => env
            .iter()
            .find(|(key, _)| key == "PATH")
            .map(|(_, value)| value.clone()),
        None => std::env::var_os("PATH"),
    };
    let again = (!name.is_empty() && !Path::new(name).is_absolute())
        .then(|| find_on_path(name, path))
        .flatten();
    let err = match again {
        Some(found) if found.as_os_str() != program => command(found.as_os_str()).exec(),
        _ => err,
    };
    let code = if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    Launched::Failed {
        message: format!("cannot run {}: {err}", Path::new(program).display()),
        code,
    }
}

/// The first executable `name` on the command's PATH (absolute entries only, as the caller
/// searched it).
fn find_on_path(name: &OsStr, path: Option<OsString>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = path?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// Step 1: the namespaces, with this user and group mapped to themselves.
fn namespaces(strict: bool) -> Result<(), Failure> {
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS;
    if strict {
        flags |= CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWIPC;
    }
    unshare(flags).map_err(|err| Failure::new("namespaces", format!("unshare: {err}")))?;
    for (file, content) in [
        ("/proc/self/setgroups", "deny".to_owned()),
        ("/proc/self/uid_map", format!("{uid} {uid} 1\n")),
        ("/proc/self/gid_map", format!("{gid} {gid} 1\n")),
    ] {
        std::fs::write(file, content)
            .map_err(|err| Failure::new("namespaces", format!("writing {file}: {err}")))?;
    }
    Ok(())
}

/// Step 2's end: the working folder again, now through the attached root.
fn enter(cwd: &Path) -> Result<(), Failure> {
    std::env::set_current_dir(cwd).map_err(|err| {
        Failure::new(
            "mounts",
            format!("entering the working folder: {}", err.kind()),
        )
    })
}

/// Step 3: `no_new_privs` and no capability left in any set.
fn drop_privileges() -> Result<(), Failure> {
    let failure =
        |what: &str, err: rustix::io::Errno| Failure::new("capabilities", format!("{what}: {err}"));
    set_no_new_privs(true).map_err(|err| failure("no_new_privs", err))?;
    // Every capability this kernel knows, named by the crate or not.
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
        .unwrap_or(63)
        .min(63);
    for bit in 0..=last {
        match remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(1 << bit)) {
            Ok(()) | Err(rustix::io::Errno::INVAL) => {}
            Err(err) => return Err(failure("bounding set", err)),
        }
    }
    clear_ambient_capability_set().map_err(|err| failure("ambient set", err))?;
    set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(|err| failure("capability sets", err))
}

/// `probe <root> <tmp>`: tries the namespaces and `strict`'s mounts, the seccomp filters and a
/// `strict` Landlock ruleset, each on its own, and reports one line for each:
/// `namespaces ok`, `seccomp ok`, `landlock 7`, or `<part> error <why>`.
fn probe(mut args: impl Iterator<Item = OsString>) -> Launched {
    let (Some(root), Some(tmp)) = (args.next(), args.next()) else {
        return not_confined("the probe's arguments are incomplete");
    };
    let policy = Policy {
        strict: true,
        root: PathBuf::from(root),
        tmp: PathBuf::from(tmp),
    };
    let line = |part: &str, outcome: Result<String, Failure>| match outcome {
        Ok(found) => format!("{part} {found}\n"),
        Err(failure) => format!("{part} error {}\n", failure.why.replace('\n', " ")),
    };
    let mut report = line(
        "namespaces",
        namespaces(true)
            .and_then(|()| mounts::isolate(&policy))
            .map_err(explain_namespaces)
            .map(|()| "ok".to_owned()),
    );
    report.push_str(&line(
        "seccomp",
        rules::seccomp(true).map(|()| "ok".to_owned()),
    ));
    report.push_str(&line("landlock", rules::landlock(&policy)));
    Launched::Report(report)
}

/// Adds what usually causes a namespace failure, where this machine shows it.
fn explain_namespaces(mut failure: Failure) -> Failure {
    let setting = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|text| text.trim().to_owned())
    };
    if setting("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        failure.why.push_str(
            "; AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)",
        );
    } else if setting("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        failure.why.push_str("; user.max_user_namespaces is 0");
    } else if setting("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        failure
            .why
            .push_str("; kernel.unprivileged_userns_clone is 0");
    }
    failure
}
