//! The environment a child gets: a small baseline of the daemon's, the request's variables on
//! top, and `PYTHONIOENCODING=utf-8`.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

/// Names of the daemon's environment a child may see on POSIX (plus every `LC_*`).
#[cfg(unix)]
pub(super) const BASELINE_NAMES: &[&str] =
    &["HOME", "PATH", "LANG", "TZ", "TMPDIR", "USER", "SHELL"];

/// Names of the daemon's environment a child may see on Windows (compared case-insensitively).
#[cfg(windows)]
pub(super) const BASELINE_NAMES: &[&str] = &[
    "USERPROFILE",
    "HOMEDRIVE",
    "HOMEPATH",
    "PATH",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "COMSPEC",
    "OS",
    "WINDIR",
    "LOCALAPPDATA",
    "APPDATA",
];

/// The environment a child gets: the safe baseline of `parent` (the daemon's environment),
/// `wire` merged on top, then `PYTHONIOENCODING=utf-8` forced. Sorted by name.
///
/// POSIX keeps only `HOME PATH LANG TZ TMPDIR USER SHELL` and `LC_*` from `parent`; Windows
/// keeps `USERPROFILE HOMEDRIVE HOMEPATH PATH SYSTEMROOT TEMP TMP COMSPEC OS WINDIR
/// LOCALAPPDATA APPDATA` case-insensitively, and a wire name replaces a baseline name that
/// differs only in case. The wire may set anything, PATH included.
///
/// Wire entries the OS cannot represent (an empty name, a name containing `=` or NUL, a value
/// containing NUL) are skipped rather than failing the request; the caller sees which names
/// were applied in [`ExecOutcome::env_keys`](super::ExecOutcome::env_keys).
pub fn safe_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    wire: &BTreeMap<String, String>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for (name, value) in parent {
        if in_baseline(&name) && representable(&name, &value) {
            set_env(&mut env, name, value);
        }
    }
    for (name, value) in wire {
        let (name, value) = (OsString::from(name), OsString::from(value));
        if representable(&name, &value) {
            set_env(&mut env, name, value);
        }
    }
    set_env(&mut env, "PYTHONIOENCODING".into(), "utf-8".into());
    env.sort();
    env
}

fn in_baseline(name: &OsStr) -> bool {
    #[cfg(unix)]
    {
        name.as_encoded_bytes().starts_with(b"LC_")
            || BASELINE_NAMES.iter().any(|keep| name == *keep)
    }
    #[cfg(windows)]
    {
        BASELINE_NAMES
            .iter()
            .any(|keep| env_name_eq(name, OsStr::new(keep)))
    }
}

fn representable(name: &OsStr, value: &OsStr) -> bool {
    let name = name.as_encoded_bytes();
    !name.is_empty()
        && !name.contains(&b'=')
        && !name.contains(&0)
        && !value.as_encoded_bytes().contains(&0)
}

/// Whether two variable names denote the same variable on this OS.
fn env_name_eq(a: &OsStr, b: &OsStr) -> bool {
    if cfg!(windows) {
        a.to_string_lossy().to_uppercase() == b.to_string_lossy().to_uppercase()
    } else {
        a == b
    }
}

fn set_env(env: &mut Vec<(OsString, OsString)>, name: OsString, value: OsString) {
    match env
        .iter_mut()
        .find(|(existing, _)| env_name_eq(existing, &name))
    {
        // The later name wins too, so a wire `Path` really replaces the baseline `PATH`.
        Some(entry) => *entry = (name, value),
        None => env.push((name, value)),
    }
}

pub(super) fn env_lookup<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a OsStr> {
    env.iter()
        .find(|(existing, _)| env_name_eq(existing, OsStr::new(name)))
        .map(|(_, value)| value.as_os_str())
}
