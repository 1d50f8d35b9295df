//! The children's environment: the launcher's own, with the launch's token, demo mode, the
//! diagnostic log and the API's URL set; the desktop client's without model credentials.
//!
//! The provider stays whatever `MSGUIDE_GUIDANCE_PROVIDER` says (the API defaults to `demo`).
//! A child gets exactly the variables listed here: the command's inherited environment is
//! cleared first, so nothing set between building and spawning slips in.

use std::{
    ffi::{OsStr, OsString},
    path::Path,
};

use local_core::{env_names, malloc_tunables};

use crate::{
    paths::{BACKEND_LOG, DESKTOP_LOG},
    token::{LaunchToken, wipe},
};

/// Whether a variable is a model credential or configuration, which the desktop client never
/// needs: every `MSGUIDE_MODEL_*` (the API key among them) and the Copilot token.
fn is_credential(name: &str) -> bool {
    name.starts_with(env_names::MODEL_PREFIX) || name == "COPILOT_GITHUB_TOKEN"
}

/// Compares a variable's name with `expected` as the system does: Windows ignores case.
fn same_name(name: &OsStr, expected: &str) -> bool {
    if cfg!(windows) {
        name.eq_ignore_ascii_case(expected)
    } else {
        name == expected
    }
}

/// A child's complete environment. `Debug` lists names only; dropping it overwrites the
/// values, since one of them is the token.
#[derive(Clone)]
pub struct ChildEnv {
    vars: Vec<(OsString, OsString)>,
}

impl ChildEnv {
    /// Starts from `vars`, typically the launcher's own environment.
    pub fn inherit(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Self {
        Self {
            vars: vars.into_iter().collect(),
        }
    }

    /// The value of `name`, if set.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars
            .iter()
            .find(|(n, _)| same_name(n, name))
            .map(|(_, v)| v.as_os_str())
    }

    /// Every variable's name, in order.
    pub fn names(&self) -> impl Iterator<Item = &OsStr> {
        self.vars.iter().map(|(n, _)| n.as_os_str())
    }

    fn set(&mut self, name: &str, value: impl Into<OsString>) {
        self.remove_where(|n| same_name(n, name));
        self.vars.push((name.into(), value.into()));
    }

    fn remove_where(&mut self, doomed: impl Fn(&OsStr) -> bool) {
        let (gone, kept) = std::mem::take(&mut self.vars)
            .into_iter()
            .partition(|(n, _)| doomed(n));
        self.vars = kept;
        drop(Self { vars: gone });
    }

    /// Makes these variables the command's whole environment.
    pub fn apply(&self, command: &mut tokio::process::Command) {
        command.env_clear();
        command.envs(self.vars.iter().map(|(n, v)| (n, v)));
    }
}

impl std::fmt::Debug for ChildEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Drop for ChildEnv {
    fn drop(&mut self) {
        for (_, value) in self.vars.drain(..) {
            wipe(value.into_encoded_bytes());
        }
    }
}

/// The variable that names the session bus (D-Bus's own name for it).
pub const ADDRESS_VARIABLE: &str = "DBUS_SESSION_BUS_ADDRESS";

/// The API's base URL on `port`.
#[must_use]
pub fn api_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

/// The API child's environment: `inherited` plus the token, `MSGUIDE_MODE=demo`, the
/// diagnostic log in `state_dir`, the API's URL and the launcher's pid (so the child ends
/// with the launcher), and on glibc the allocator's tunable (`local_core::malloc_tunables`).
/// Values the launcher sets replace any inherited ones.
#[must_use]
pub fn api_env(inherited: ChildEnv, token: &LaunchToken, port: u16, state_dir: &Path) -> ChildEnv {
    let mut env = inherited;
    env.set(env_names::LOCAL_TOKEN, token.expose());
    env.set(env_names::MODE, "demo");
    env.set(env_names::DIAGNOSTIC_LOG, state_dir.join(BACKEND_LOG));
    env.set(env_names::API_URL, api_url(port));
    env.set(env_names::LAUNCHER_PID, std::process::id().to_string());
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        let tunables = malloc_tunables::for_child(env.get(malloc_tunables::VAR));
        env.set(malloc_tunables::VAR, tunables);
    }
    env
}

/// The desktop child's environment: the API's without model credentials, plus its own log,
/// and the session bus the launch started, when it started one.
#[must_use]
pub fn desktop_env(api: &ChildEnv, state_dir: &Path, bus_address: Option<&str>) -> ChildEnv {
    let mut env = api.clone();
    env.remove_where(|name| {
        name.to_str().is_some_and(|name| {
            if cfg!(windows) {
                is_credential(&name.to_ascii_uppercase())
            } else {
                is_credential(name)
            }
        })
    });
    env.set(env_names::DESKTOP_LOG, state_dir.join(DESKTOP_LOG));
    if let Some(address) = bus_address {
        env.set(ADDRESS_VARIABLE, address);
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inherited() -> ChildEnv {
        ChildEnv::inherit(
            [
                ("PATH", "/usr/bin"),
                ("HOME", "/home/u"),
                ("MSGUIDE_LOCAL_TOKEN", "stale-token-from-the-shell"),
                ("MSGUIDE_MODE", "production"),
                ("MSGUIDE_GUIDANCE_PROVIDER", "openai-compatible"),
                ("MSGUIDE_MODEL_URL", "https://models.example.com/v1"),
                ("MSGUIDE_MODEL_NAME", "gpt-test"),
                ("MSGUIDE_MODEL_API_KEY", "sk-SECRET"),
                ("MSGUIDE_MODEL_AUTH_HEADER", "bearer"),
                ("MSGUIDE_ALLOW_REMOTE_MODEL", "true"),
                ("COPILOT_GITHUB_TOKEN", "gho-SECRET"),
            ]
            .map(|(n, v)| (OsString::from(n), OsString::from(v))),
        )
    }

    fn get<'a>(env: &'a ChildEnv, name: &str) -> Option<&'a str> {
        env.get(name).and_then(OsStr::to_str)
    }

    #[test]
    fn the_api_gets_the_token_demo_mode_and_its_log() {
        let token = LaunchToken::mint().unwrap();
        let state = Path::new("/home/u/.local/state/msguide");
        let env = api_env(inherited(), &token, 9001, state);
        assert_eq!(get(&env, env_names::LOCAL_TOKEN), Some(token.expose()));
        assert_eq!(get(&env, env_names::MODE), Some("demo"));
        assert_eq!(
            env.get(env_names::DIAGNOSTIC_LOG),
            Some(state.join("backend.log").as_os_str())
        );
        assert_eq!(get(&env, env_names::API_URL), Some("http://127.0.0.1:9001"));
        assert_eq!(
            get(&env, env_names::LAUNCHER_PID),
            Some(std::process::id().to_string().as_str())
        );
        // The launcher's choices replace the inherited values instead of adding duplicates.
        assert_eq!(
            env.names().filter(|n| *n == env_names::LOCAL_TOKEN).count(),
            1
        );
        assert_eq!(env.names().filter(|n| *n == env_names::MODE).count(), 1);
        // Everything else is inherited as is: the provider and its settings are the user's.
        assert_eq!(get(&env, "PATH"), Some("/usr/bin"));
        assert_eq!(
            get(&env, "MSGUIDE_GUIDANCE_PROVIDER"),
            Some("openai-compatible")
        );
        assert_eq!(get(&env, "MSGUIDE_MODEL_API_KEY"), Some("sk-SECRET"));
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert_eq!(
                get(&env, malloc_tunables::VAR),
                Some(malloc_tunables::MMAP_THRESHOLD)
            );
        }
    }

    #[test]
    fn the_desktop_gets_no_model_credentials() {
        let token = LaunchToken::mint().unwrap();
        let state = Path::new("/state/msguide");
        let api = api_env(inherited(), &token, 8765, state);
        let desktop = desktop_env(&api, state, None);
        for gone in [
            "MSGUIDE_MODEL_API_KEY",
            "MSGUIDE_MODEL_URL",
            "MSGUIDE_MODEL_NAME",
            "MSGUIDE_MODEL_AUTH_HEADER",
            "COPILOT_GITHUB_TOKEN",
        ] {
            assert_eq!(desktop.get(gone), None, "{gone}");
        }
        assert_eq!(get(&desktop, env_names::LOCAL_TOKEN), Some(token.expose()));
        assert_eq!(get(&desktop, env_names::MODE), Some("demo"));
        assert_eq!(
            get(&desktop, env_names::API_URL),
            Some("http://127.0.0.1:8765")
        );
        assert_eq!(
            desktop.get(env_names::DESKTOP_LOG),
            Some(state.join("desktop.log").as_os_str())
        );
        assert_eq!(get(&desktop, "PATH"), Some("/usr/bin"));
        // The API's own environment is left whole.
        assert_eq!(get(&api, "MSGUIDE_MODEL_API_KEY"), Some("sk-SECRET"));
        assert_eq!(api.get(env_names::DESKTOP_LOG), None);
        assert_eq!(desktop.get("DBUS_SESSION_BUS_ADDRESS"), None);
        // The session bus the launch started goes to the client alone.
        let desktop = desktop_env(&api, state, Some("unix:path=/run/user/1/bus,guid=0f"));
        assert_eq!(
            get(&desktop, "DBUS_SESSION_BUS_ADDRESS"),
            Some("unix:path=/run/user/1/bus,guid=0f")
        );
        assert_eq!(api.get("DBUS_SESSION_BUS_ADDRESS"), None);
    }

    #[test]
    fn debug_shows_names_only() {
        let token = LaunchToken::mint().unwrap();
        let env = api_env(inherited(), &token, 8765, Path::new("/s"));
        let shown = format!("{env:?}");
        assert!(shown.contains("MSGUIDE_LOCAL_TOKEN"), "{shown}");
        assert!(!shown.contains(token.expose()));
        assert!(!shown.contains("sk-SECRET"));
    }

    #[test]
    fn the_command_gets_exactly_these_variables() {
        let token = LaunchToken::mint().unwrap();
        let env = api_env(inherited(), &token, 8765, Path::new("/s"));
        let mut command = tokio::process::Command::new("msguide-api");
        command.env("LEAKED", "1");
        env.apply(&mut command);
        let std = command.as_std();
        let set: Vec<_> = std.get_envs().collect();
        assert!(set.iter().all(|(n, _)| *n != "LEAKED"));
        assert!(set.contains(&(
            OsStr::new(env_names::LOCAL_TOKEN),
            Some(OsStr::new(token.expose()))
        )));
        assert!(std.get_args().all(|a| a != token.expose()), "never in argv");
    }
}
