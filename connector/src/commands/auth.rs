//! `autogpt-shim auth` and `autogpt-shim revoke` (shim-reference-behaviour.md section 14).
//!
//! `auth` binds the loopback callback first (so the printed address works the moment it is
//! shown), prints the authorize address, opens it in the browser unless `--no-browser`, waits
//! for the one callback, exchanges the code with the PKCE verifier and stores the tokens.
//! `revoke` revokes both stored tokens at the platform, then forgets them; on any failure the
//! tokens are kept and it exits 1, as in the reference.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use local_core::machine::exec::{ExecRequest, Program, ShellKind};
use reqwest::Url;

use crate::auth::callback::{CALLBACK_DEADLINE, CallbackServer};
use crate::auth::oauth::OAuthClient;
use crate::auth::pkce::{self, Pkce};
use crate::auth::store::{Places, REFRESH_USER, TokenStore};
use crate::auth::{Endpoints, SCOPE};
use crate::config::{AUTHORIZE_URL_ENV, Env, ShimConfig};

/// Exit code of a failed login or revocation.
pub const EXIT_FAILED: u8 = 1;
/// How long the browser opener may run before it is left alone.
const OPENER_TIMEOUT: Duration = Duration::from_secs(10);
/// Variables the browser opener needs to reach the desktop, passed on when set.
const DESKTOP_VARS: &[&str] = &[
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XDG_RUNTIME_DIR",
    "DBUS_SESSION_BUS_ADDRESS",
    "BROWSER",
];

/// Runs the login and returns the exit code.
pub fn login(config: &ShimConfig, env: &impl Env, no_browser: bool, out: &mut dyn Write) -> u8 {
    let places = Places::from_env(env);
    let desktop: BTreeMap<String, String> = DESKTOP_VARS
        .iter()
        .filter_map(|name| env.var(name).map(|value| ((*name).to_owned(), value)))
        .collect();
    let result = runtime().and_then(|runtime| {
        runtime.block_on(login_flow(
            config,
            &places,
            (!no_browser).then_some(desktop),
            out,
        ))
    });
    match result {
        Ok(message) => {
            let _ = writeln!(out, "{message}");
            0
        }
        Err(message) => failed(out, &message),
    }
}

/// Revokes and forgets the stored tokens and returns the exit code.
pub fn revoke(config: &ShimConfig, env: &impl Env, out: &mut dyn Write) -> u8 {
    let places = Places::from_env(env);
    let result = runtime().and_then(|runtime| runtime.block_on(revoke_flow(config, &places)));
    match result {
        Ok(message) => {
            let _ = writeln!(out, "{message}");
            0
        }
        Err(message) => failed(out, &message),
    }
}

/// The authorize address of one login.
///
/// # Errors
/// The configured authorize endpoint is not a URL.
pub fn authorize_url(
    endpoints: &Endpoints,
    redirect_uri: &str,
    challenge: &str,
    state: &str,
) -> Result<Url, String> {
    Url::parse_with_params(
        &endpoints.authorize,
        [
            ("response_type", "code"),
            ("client_id", endpoints.client_id.as_str()),
            ("redirect_uri", redirect_uri),
            ("scope", SCOPE),
            ("code_challenge", challenge),
            ("code_challenge_method", pkce::METHOD),
            ("state", state),
        ],
    )
    .map_err(|err| format!("the authorize endpoint is not a URL: {err}"))
}

async fn login_flow(
    config: &ShimConfig,
    places: &Places,
    browser: Option<BTreeMap<String, String>>,
    out: &mut dyn Write,
) -> Result<String, String> {
    let endpoints = Endpoints::from_config(config).map_err(|err| err.to_string())?;
    let client = OAuthClient::new(endpoints.clone()).map_err(|err| err.to_string())?;
    let server = CallbackServer::bind(endpoints.redirect_port)
        .await
        .map_err(|err| err.to_string())?;
    let redirect_uri = server.redirect_uri();
    let pkce = Pkce::generate().map_err(|err| err.to_string())?;
    let state = pkce::state().map_err(|err| err.to_string())?;
    let url = authorize_url(&endpoints, &redirect_uri, &pkce.challenge, &state)?;
    let _ = writeln!(
        out,
        "To log in, open this address in a browser (waiting up to {} s):",
        CALLBACK_DEADLINE.as_secs()
    );
    let _ = writeln!(out, "{url}");
    let _ = out.flush();
    if let Some(desktop) = browser
        && let Err(reason) = open_browser(url.as_str(), desktop).await
    {
        let _ = writeln!(
            out,
            "Could not open a browser ({reason}); open the address above yourself."
        );
        let _ = out.flush();
    }
    let code = server
        .wait(&state, CALLBACK_DEADLINE)
        .await
        .map_err(|err| err.to_string())?;
    let tokens = client
        .exchange(&code, &redirect_uri, &pkce.verifier)
        .await
        .map_err(|err| format!("the code exchange failed: {err}"))?;
    let store = TokenStore::open(places).await;
    let location = store
        .save(&tokens)
        .await
        .map_err(|err| format!("the tokens could not be stored: {err}"))?;
    Ok(format!("Logged in; the tokens are stored in {location}."))
}

async fn revoke_flow(config: &ShimConfig, places: &Places) -> Result<String, String> {
    let endpoints = Endpoints::from_config(config).map_err(|err| err.to_string())?;
    let client = OAuthClient::new(endpoints).map_err(|err| err.to_string())?;
    let store = TokenStore::open(places).await;
    let Some(tokens) = store.load().await.map_err(|err| err.to_string())? else {
        return Ok("No OAuth tokens are stored; nothing to revoke.".to_owned());
    };
    client
        .revoke(&tokens.access, "access_token")
        .await
        .map_err(|err| format!("revoking the access token failed; the tokens are kept: {err}"))?;
    if let Some(refresh) = &tokens.refresh {
        client.revoke(refresh, REFRESH_USER).await.map_err(|err| {
            format!("revoking the refresh token failed; the tokens are kept: {err}")
        })?;
    }
    store
        .forget()
        .await
        .map_err(|err| format!("the tokens were revoked but could not be removed: {err}"))?;
    Ok("Revoked the OAuth tokens and removed them from this machine.".to_owned())
}

/// Hands the address to the desktop's opener through `core::exec`. The opener runs in the
/// background of a shell whose output goes nowhere, so the shell returns at once and the
/// browser it starts is not part of anything `exec` would stop. The address travels in the
/// environment, never through shell parsing.
async fn open_browser(url: &str, mut env: BTreeMap<String, String>) -> Result<(), String> {
    env.insert(AUTHORIZE_URL_ENV.to_owned(), url.to_owned());
    let program = if cfg!(windows) {
        Program::Argv(vec![
            "rundll32".to_owned(),
            "url.dll,FileProtocolHandler".to_owned(),
            url.to_owned(),
        ])
    } else {
        let opener = if cfg!(target_os = "macos") {
            "open"
        } else {
            "xdg-open"
        };
        Program::Shell {
            shell: ShellKind::Sh,
            command: format!(
                "command -v {opener} >/dev/null 2>&1 || exit 127; {opener} \"${AUTHORIZE_URL_ENV}\" >/dev/null 2>&1 </dev/null &"
            ),
        }
    };
    let request = ExecRequest {
        program,
        cwd: std::env::temp_dir(),
        env,
        timeout: OPENER_TIMEOUT,
        output_budget: 4096,
        // The browser is the user's own program, started on the user's behalf.
        sandbox: None,
    };
    let outcome = local_core::machine::exec::run(request)
        .await
        .map_err(|err| err.to_string())?;
    match outcome.exit_code {
        0 => Ok(()),
        127 => Err("no program to open a browser was found".to_owned()),
        code => Err(format!("the opener exited with {code}")),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| format!("cannot start the runtime: {err}"))
}

fn failed(out: &mut dyn Write, message: &str) -> u8 {
    let _ = writeln!(out, "autogpt-shim: {message}");
    EXIT_FAILED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authorize_address_carries_the_reference_parameters() {
        let endpoints = Endpoints {
            authorize: "https://p.example/auth/authorize".to_owned(),
            token: String::new(),
            revoke: String::new(),
            client_id: "autogpt-local-executor".to_owned(),
            redirect_port: 41899,
        };
        let url = authorize_url(
            &endpoints,
            "http://localhost:41899/callback",
            "chal",
            "st&x",
        )
        .unwrap();
        assert_eq!(
            url.as_str(),
            "https://p.example/auth/authorize?response_type=code&client_id=autogpt-local-executor&redirect_uri=http%3A%2F%2Flocalhost%3A41899%2Fcallback&scope=USE_TOOLS&code_challenge=chal&code_challenge_method=S256&state=st%26x"
        );
    }
}
