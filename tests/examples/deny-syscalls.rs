//! Runs a program under a seccomp filter that makes some kernel features look absent, the way
//! a container runtime or an old kernel does: the suite's way to see `--shell-sandbox` refuse
//! to start (exit 78) when Landlock, seccomp or namespaces are missing.
//!
//! `deny-syscalls landlock|seccomp|unshare[,…] -- PROGRAM [ARGS…]`: Landlock's calls fail with
//! ENOSYS (a kernel without it), `seccomp` with EINVAL (a kernel without filters), `unshare`
//! with EPERM (namespaces forbidden, as container runtimes do). The filter is inherited by every
//! child.
//! Linux on x86-64 and aarch64 only.

// Test support: a failure ends the run with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    use std::collections::BTreeMap;
    use std::os::unix::process::CommandExt as _;

    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, SeccompRule, TargetArch};

    const ENOSYS: u32 = 38;
    const EINVAL: u32 = 22;
    const EPERM: u32 = 1;
    // Numbers of the generic table (the same on x86-64 and aarch64 for calls this recent).
    const LANDLOCK: [i64; 3] = [444, 445, 446];
    #[cfg(target_arch = "x86_64")]
    const SECCOMP: i64 = 317;
    #[cfg(target_arch = "aarch64")]
    const SECCOMP: i64 = 277;
    #[cfg(target_arch = "x86_64")]
    const UNSHARE: i64 = 272;
    #[cfg(target_arch = "aarch64")]
    const UNSHARE: i64 = 97;

    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(features), Some("--"), Some(program)) =
        (args.first(), args.get(1).map(String::as_str), args.get(2))
    else {
        eprintln!("usage: deny-syscalls landlock|seccomp|unshare[,...] -- PROGRAM [ARGS...]");
        return std::process::ExitCode::from(2);
    };
    let arch = TargetArch::try_from(std::env::consts::ARCH).unwrap();
    let mut filters = Vec::new();
    // Denying seccomp itself goes last, or the other filters could not be installed.
    let mut features: Vec<&str> = features.split(',').collect();
    features.sort_by_key(|feature| *feature == "seccomp");
    for feature in features {
        let (numbers, errno): (Vec<i64>, u32) = match feature {
            "landlock" => (LANDLOCK.to_vec(), ENOSYS),
            "seccomp" => (vec![SECCOMP], EINVAL),
            "unshare" => (vec![UNSHARE], EPERM),
            other => {
                eprintln!("deny-syscalls: unknown feature {other:?}");
                return std::process::ExitCode::from(2);
            }
        };
        let rules: BTreeMap<i64, Vec<SeccompRule>> = numbers
            .into_iter()
            .map(|number| (number, Vec::new()))
            .collect();
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno),
            arch,
        )
        .unwrap();
        filters.push(BpfProgram::try_from(filter).unwrap());
    }
    for filter in &filters {
        seccompiler::apply_filter(filter).unwrap();
    }
    let err = std::process::Command::new(program).args(&args[3..]).exec();
    eprintln!("deny-syscalls: cannot run {program}: {err}");
    std::process::ExitCode::from(127)
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("deny-syscalls is Linux-only");
}
