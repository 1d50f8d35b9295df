//! The launcher's kernel rules (Linux): the Landlock ruleset of a mode and the seccomp filters.
//!
//! Landlock: every filesystem right of ABI 3 is handled and must be (the mode is refused on an
//! older kernel), the rights of later ABIs where the kernel has them (device ioctls, TCP bind
//! and connect in `strict`, the signal and abstract-socket scopes). `workspace` reads and runs
//! everything; `strict` only the system folders; both may change only beneath the allowed
//! root, `TMPDIR` and the private `/dev/shm`, and write to `/dev/null`, `/dev/zero` and
//! `/dev/full` (no ioctl: `/dev/tty` gets none, so `TIOCSTI` cannot type into a terminal).
//! Landlock also refuses every mount and `ptrace` (so `/proc/<pid>/root` of a process outside)
//! to the command, whatever its capabilities.
//!
//! seccomp, both modes: `ioctl` `TIOCSTI` and `TIOCLINUX` (typing into a terminal or console
//! on kernels without Landlock's ioctl right) and io_uring (whose operations bypass seccomp's
//! view of system calls) are refused. `strict` also refuses `socket` and `socketpair` for every
//! family but `AF_UNIX`. The x32 numbers of the same calls are refused too; a 32-bit program is
//! killed by the architecture check (it would get past every rule otherwise).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::confine::{Failure, Policy};

/// The folders `strict` keeps readable: what programs need to run (`/usr`, the libraries,
/// `/etc`, `/opt`), the kernel's views (`/proc`, `/sys`) and the reduced `/dev`.
pub(super) const SYSTEM_FOLDERS: &[&str] = &[
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", "proc", "sys", "dev",
];

/// Devices any command may write (their content is nothing of the user's).
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Restricts this process with the mode's Landlock ruleset; returns the kernel's Landlock ABI
/// (its number, as the kernel reports it).
pub(super) fn landlock(policy: &Policy) -> Result<String, Failure> {
    let failure = |err: landlock::RulesetError| Failure::new("Landlock", err.to_string());
    let all = AccessFs::from_all(ABI::V5);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V3))
        .map_err(|_| {
            Failure::new(
                "Landlock",
                "the kernel has none, or one older than ABI 3 (Linux 6.2)".to_owned(),
            )
        })?
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(failure)?;
    let mut scopes: landlock::BitFlags<Scope> = Scope::Signal.into();
    if policy.strict {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI::V4))
            .map_err(failure)?;
        scopes |= Scope::AbstractUnixSocket;
    }
    let readable: Vec<PathBuf> = if policy.strict {
        SYSTEM_FOLDERS
            .iter()
            .map(|name| Path::new("/").join(name))
            .filter(|path| path.exists())
            .collect()
    } else {
        vec![PathBuf::from("/")]
    };
    let mut writable = vec![policy.root.clone(), policy.tmp.clone()];
    if Path::new(super::mounts::SHM).is_dir() {
        writable.push(PathBuf::from(super::mounts::SHM));
    }
    let devices: Vec<&Path> = WRITABLE_DEVICES
        .iter()
        .map(Path::new)
        .filter(|path| path.exists())
        .collect();
    let device_rights = AccessFs::ReadFile | AccessFs::WriteFile;
    let status = ruleset
        .scope(scopes)
        .map_err(failure)?
        .create()
        .map_err(failure)?
        .add_rules(path_beneath_rules(&readable, AccessFs::from_read(ABI::V5)))
        .map_err(failure)?
        .add_rules(path_beneath_rules(&writable, all))
        .map_err(failure)?
        .add_rules(path_beneath_rules(&devices, device_rights))
        .map_err(failure)?
        .restrict_self()
        .map_err(failure)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(Failure::new(
            "Landlock",
            "the kernel enforced none of the rules".to_owned(),
        ));
    }
    Ok(match status.landlock {
        landlock::LandlockStatus::Available {
            kernel_abi: Some(abi),
            ..
        } => abi.to_string(),
        landlock::LandlockStatus::Available { effective_abi, .. } => effective_abi.to_string(),
        landlock::LandlockStatus::NotEnabled | landlock::LandlockStatus::NotImplemented => {
            return Err(Failure::new(
                "Landlock",
                "the kernel does not enable it".to_owned(),
            ));
        }
    })
}

/// The system call number a call has under the x32 ABI of x86-64 (`__X32_SYSCALL_BIT`), which
/// shares the architecture tag with the 64-bit ABI, so a filter must name both.
#[cfg(target_arch = "x86_64")]
const fn x32(number: i64) -> Option<i64> {
    Some(number | 0x4000_0000)
}

#[cfg(not(target_arch = "x86_64"))]
const fn x32(_: i64) -> Option<i64> {
    None
}

/// x32's own number for `ioctl` (its compat entry point), with the x32 bit.
#[cfg(target_arch = "x86_64")]
const X32_IOCTL: Option<i64> = Some(514 | 0x4000_0000);
#[cfg(not(target_arch = "x86_64"))]
const X32_IOCTL: Option<i64> = None;

/// Installs the mode's seccomp filters on this process (they are inherited across exec).
pub(super) fn seccomp(strict: bool) -> Result<(), Failure> {
    let arch = target_arch()?;
    // EPERM for the terminal ioctls, ENOSYS for io_uring (programs fall back to plain calls on
    // it), EACCES for the socket families: the errors a program already copes with.
    let mut programs = vec![
        program(terminal_rules()?, libc::EPERM, arch)?,
        program(io_uring_rules(), libc::ENOSYS, arch)?,
    ];
    if strict {
        programs.push(program(socket_rules()?, libc::EACCES, arch)?);
    }
    for program in &programs {
        seccompiler::apply_filter(program).map_err(|err| {
            let why = match &err {
                seccompiler::Error::Seccomp(err) | seccompiler::Error::Prctl(err) => {
                    err.raw_os_error().map_or_else(
                        || err.kind().to_string(),
                        |code| nix::errno::Errno::from_raw(code).to_string(),
                    )
                }
                other => other.to_string(),
            };
            Failure::new("seccomp", format!("installing a filter: {why}"))
        })?;
    }
    Ok(())
}

fn target_arch() -> Result<TargetArch, Failure> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|_| {
        Failure::new(
            "seccomp",
            format!(
                "no filter is built for {} processors",
                std::env::consts::ARCH
            ),
        )
    })
}

fn program(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
    arch: TargetArch,
) -> Result<BpfProgram, Failure> {
    let errno = u32::try_from(errno).unwrap_or(1);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno),
        arch,
    )
    .map_err(|err| Failure::new("seccomp", err.to_string()))?;
    BpfProgram::try_from(filter).map_err(|err| Failure::new("seccomp", err.to_string()))
}

/// A call's number and, on x86-64, its x32 number.
fn numbers(number: i64) -> impl Iterator<Item = i64> {
    std::iter::once(number).chain(x32(number))
}

fn terminal_rules() -> Result<BTreeMap<i64, Vec<SeccompRule>>, Failure> {
    #[allow(
        clippy::useless_conversion,
        reason = "c_ulong is 32 bits wide on 32-bit targets"
    )]
    let rule = |request: libc::c_ulong| {
        // The tty layer takes the request as an unsigned int: only the low 32 bits count.
        SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            u64::from(request),
        )
        .and_then(|condition| SeccompRule::new(vec![condition]))
        .map_err(|err| Failure::new("seccomp", err.to_string()))
    };
    let rules = vec![rule(libc::TIOCSTI)?, rule(libc::TIOCLINUX)?];
    Ok(numbers(libc::SYS_ioctl)
        .chain(X32_IOCTL)
        .map(|number| (number, rules.clone()))
        .collect())
}

fn io_uring_rules() -> BTreeMap<i64, Vec<SeccompRule>> {
    [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ]
    .into_iter()
    .flat_map(numbers)
    // No rule: the call is refused whatever its arguments.
    .map(|number| (number, Vec::new()))
    .collect()
}

fn socket_rules() -> Result<BTreeMap<i64, Vec<SeccompRule>>, Failure> {
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        u64::try_from(libc::AF_UNIX).unwrap_or_default(),
    )
    .and_then(|condition| SeccompRule::new(vec![condition]))
    .map_err(|err| Failure::new("seccomp", err.to_string()))?;
    Ok([libc::SYS_socket, libc::SYS_socketpair]
        .into_iter()
        .flat_map(numbers)
        .map(|number| (number, vec![not_unix.clone()]))
        .collect())
}
