//! The connector's OAuth against a fake OAuth server: `auth` played through as a browser would
//! (GET the printed address, follow the redirect to the loopback callback), PKCE checked by the
//! server, the state check, tokens stored 0600 or in a real Secret Service keyring
//! (gnome-keyring on a private session bus), one refresh on a 401 shared by concurrent callers,
//! a JWT refreshed shortly before its `exp` (once for concurrent dials, never presented
//! expired), exit 77 after a second 401 or a 403, `revoke`, and no token in stderr or the
//! audit log.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use autogpt_shim::audit::Auditor;
use autogpt_shim::auth::keyring::{Keyring, KeyringError};
use autogpt_shim::auth::oauth::OAuthClient;
use autogpt_shim::auth::store::{Places, TOKEN_FILE_NAME, TokenStore};
use autogpt_shim::auth::{Credentials, Endpoints, Secret, Tokens};
use autogpt_shim::link::{ConnectError, Token};
use autogpt_shim::ws::dial;
use e2e::fake_oauth::{AuthorizeMode, FakeOAuth};
use e2e::platform::{Platform, SESSION, Shim, fresh_dir, shim_command};
use serde_json::{Value, json};

use super::connector::home_and_root;

/// The shim's state directory in a test home.
fn state_dir(home: &Path) -> PathBuf {
    home.join(".local/state/autogpt-local-executor")
}

/// Runs `auth --no-browser` and plays the browser; returns the exit code and the output.
async fn login(
    home: &Path,
    fake: &FakeOAuth,
    port: u16,
    env: &[(&str, &str)],
) -> (Option<i32>, String, Option<u16>) {
    let port = port.to_string();
    let mut env = env.to_vec();
    env.push(("AUTOGPT_SHIM_OAUTH_REDIRECT_PORT", &port));
    let url = fake.url();
    let mut child = shim_command(
        home,
        &["--platform-url", &url, "auth", "--no-browser"],
        &env,
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, address) = tokio::task::spawn_blocking(move || {
        let mut lines = Vec::new();
        let mut reader = BufReader::new(stdout);
        let mut address = None;
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 0 {
            if address.is_none() && line.starts_with("http") {
                address = Some(line.trim().to_owned());
                lines.push(line.clone());
                break;
            }
            lines.push(line.clone());
            line.clear();
        }
        (lines, address.map(|a| (a, reader)))
    })
    .await
    .unwrap();
    let Some((address, mut reader)) = address else {
        let output = child.wait_with_output().unwrap();
        return (
            output.status.code(),
            lines.concat() + &String::from_utf8_lossy(&output.stderr),
            None,
        );
    };
    assert!(
        address.starts_with(&format!("{url}/auth/authorize?")),
        "{address}"
    );
    // The browser: the authorize page redirects to the loopback callback.
    let client = reqwest::Client::new();
    let callback = client.get(&address).send().await.unwrap();
    let status = callback.status().as_u16();
    let page = callback.text().await.unwrap_or_default();
    let rest = tokio::task::spawn_blocking(move || {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
        rest
    })
    .await
    .unwrap();
    let output = child.wait_with_output().unwrap();
    let text = format!(
        "{}{rest}{}{page}",
        lines.concat(),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text, Some(status))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// `start` against `platform` for WebSocket and `fake` for OAuth.
fn start(
    home: &Path,
    root: &Path,
    platform: &Platform,
    fake: &FakeOAuth,
    env: &[(&str, &str)],
) -> Shim {
    let ws = format!("{}/ws/local-executor", platform.url());
    let mut env = env.to_vec();
    env.push(("AUTOGPT_SHIM_PLATFORM_WS_URL", &ws));
    // The platform's arguments, with OAuth pointed at the fake.
    let mut args = platform.start_args(root, "DEBUG", &[]);
    let url = args.iter().position(|arg| arg == "--platform-url").unwrap() + 1;
    args[url] = fake.url();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Shim::spawn(home, &args, &env)
}

fn assert_no_tokens(fake: &FakeOAuth, texts: &[&str]) {
    let mut secrets = fake.access_tokens();
    secrets.extend(fake.refresh_token());
    for text in texts {
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "a token leaked: {text}");
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// An OAuth client of `fake`, as `start` builds it.
fn oauth_client(fake: &FakeOAuth) -> OAuthClient {
    let mut config = autogpt_shim::config::ShimConfig::defaults(&|_: &str| None);
    config.platform_url = fake.url();
    OAuthClient::new(Endpoints::from_config(&config).unwrap()).unwrap()
}

/// The token file of the test home (no keyring).
fn file_places(home: &Path) -> Places {
    Places {
        bus_address: None,
        token_file: Some(state_dir(home).join(TOKEN_FILE_NAME)),
    }
}

/// The credentials `start` would build from what `auth` stored in `home`.
async fn stored_credentials(home: &Path, fake: &FakeOAuth) -> Credentials {
    let store = TokenStore::open(&file_places(home)).await;
    let tokens: Tokens = store.load().await.unwrap().unwrap();
    Credentials::new(tokens, oauth_client(fake), store, Auditor::disabled())
}

/// Stops the shim with SIGTERM (exit 0) and checks its audit log has the refresh and neither
/// it nor stderr a token.
async fn stop_after_a_refresh(mut shim: Shim, fake: &FakeOAuth) {
    shim.signal("TERM");
    let (status, stderr) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    let audit = read(&shim.audit_log());
    assert!(audit.contains("\"TOKEN_REFRESHED\""), "{audit}");
    assert_no_tokens(fake, &[&stderr, &audit]);
}

/// Sleeps until the wall clock reaches `when` (JWT times are wall-clock times).
async fn wait_until(when: SystemTime) {
    if let Ok(left) = when.duration_since(SystemTime::now()) {
        tokio::time::sleep(left).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_stores_a_private_file_and_a_401_refreshes_once() {
    let fake = FakeOAuth::start().await;
    let (home, root) = home_and_root("auth-login");
    let (code, output, callback) = login(&home, &fake, 45_100, &[]).await;
    assert_eq!(code, Some(0), "{output}");
    assert_eq!(callback, Some(200));
    assert_eq!(
        fake.exchanges(),
        1,
        "the PKCE verifier matched the challenge"
    );
    assert_eq!(fake.client_ids(), ["autogpt-local-executor"]);
    let file = state_dir(&home).join(TOKEN_FILE_NAME);
    assert!(output.contains(&file.display().to_string()), "{output}");
    assert_eq!(mode(&file), 0o600);
    let first = fake.access_tokens()[0].clone();
    assert!(read(&file).contains(&first));
    assert_no_tokens(&fake, &[&output]);

    let platform = Platform::bind().await;
    let shim = start(&home, &root, &platform, &fake, &[]);
    let (_, seen) = platform.accept(Some(401)).await;
    assert_eq!(seen.authorization, Some(format!("Bearer {first}")));
    let (conn, seen) = platform.accept(None).await;
    let mut conn = conn.unwrap();
    let second = fake.access_tokens()[1].clone();
    assert_eq!(seen.authorization, Some(format!("Bearer {second}")));
    assert_eq!(conn.recv().await["type"], "HELLO");
    assert_eq!(fake.refreshes(), 1);
    // The rotated pair replaced the stored one.
    assert!(read(&file).contains(&second) && !read(&file).contains(&first));
    assert_eq!(mode(&file), 0o600);

    stop_after_a_refresh(shim, &fake).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_401_or_a_403_exits_77() {
    let fake = FakeOAuth::start().await;
    for (refusals, refreshes) in [(&[401, 401][..], 1), (&[403][..], 0), (&[401, 403][..], 1)] {
        let (home, root) = home_and_root("auth-77");
        let (code, output, _) = login(&home, &fake, 45_120, &[]).await;
        assert_eq!(code, Some(0), "{output}");
        let before = fake.refreshes();
        let platform = Platform::bind().await;
        let mut shim = start(&home, &root, &platform, &fake, &[]);
        for status in refusals {
            platform.accept(Some(*status)).await;
        }
        let (status, stderr) = shim.exit().await;
        assert_eq!(status.code(), Some(77), "{refusals:?}: {stderr}");
        assert!(stderr.contains("autogpt-shim auth"), "{stderr}");
        assert_eq!(fake.refreshes() - before, refreshes, "{refusals:?}");
        assert!(!platform.dials_within(Duration::from_millis(300)).await);
        assert_no_tokens(&fake, &[&stderr, &read(&shim.audit_log())]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_state_or_a_denial_fails_the_login_and_stores_nothing() {
    let fake = FakeOAuth::start().await;
    let home = fresh_dir("auth-state");
    fake.set_mode(AuthorizeMode::WrongState);
    let (code, output, callback) = login(&home, &fake, 45_140, &[]).await;
    assert_eq!(code, Some(1), "{output}");
    assert_eq!(callback, Some(400));
    assert!(output.contains("state did not match"), "{output}");
    assert_eq!(fake.exchanges(), 0);
    assert!(!state_dir(&home).join(TOKEN_FILE_NAME).exists());

    fake.set_mode(AuthorizeMode::Deny);
    let (code, output, _) = login(&home, &fake, 45_140, &[]).await;
    assert_eq!(code, Some(1), "{output}");
    assert!(output.contains("access_denied"), "{output}");
    assert!(!state_dir(&home).join(TOKEN_FILE_NAME).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_revokes_both_tokens_then_forgets_them() {
    let fake = FakeOAuth::start().await;
    let home = fresh_dir("auth-revoke");
    let (code, output, _) = login(&home, &fake, 45_160, &[]).await;
    assert_eq!(code, Some(0), "{output}");
    let file = state_dir(&home).join(TOKEN_FILE_NAME);
    let access = fake.access_tokens()[0].clone();
    let refresh = fake.refresh_token().unwrap();
    let url = fake.url();

    // A refusal keeps the tokens (exit 1), as in the reference.
    fake.set_revoke_status(500);
    let output = shim_command(&home, &["--platform-url", &url, "revoke"], &[])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(file.exists());

    fake.set_revoke_status(200);
    let output = shim_command(&home, &["--platform-url", &url, "revoke"], &[])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(!file.exists());
    let revoked = fake.revoked();
    let last = &revoked[revoked.len() - 2..];
    assert_eq!(last[0]["token"], access.as_str());
    assert_eq!(last[0]["token_type_hint"], "access_token");
    assert_eq!(last[1]["token"], refresh.as_str());
    assert_eq!(last[1]["token_type_hint"], "refresh_token");
    for body in last {
        assert_eq!(body["client_id"], "autogpt-local-executor");
        assert_eq!(body["client_secret"], "");
    }
    assert_no_tokens(&fake, &[&text]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_401s_share_one_refresh() {
    let fake = FakeOAuth::start().await;
    let home = fresh_dir("auth-shared");
    let (code, output, _) = login(&home, &fake, 45_180, &[]).await;
    assert_eq!(code, Some(0), "{output}");
    fake.set_refresh_delay(Duration::from_millis(300));
    let credentials = stored_credentials(&home, &fake).await;

    let (_, generation) = credentials.current().await;
    let callers: Vec<_> = (0..2)
        .map(|_| {
            let credentials = credentials.clone();
            tokio::spawn(async move {
                credentials.refresh(generation).await.unwrap();
                credentials.current().await
            })
        })
        .collect();
    let mut seen = Vec::new();
    for caller in callers {
        seen.push(caller.await.unwrap());
    }
    assert_eq!(fake.refreshes(), 1);
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[0].1, generation + 1);
    // The next rejection of the new token spends the new refresh token.
    credentials.refresh(generation + 1).await.unwrap();
    assert_eq!(fake.refreshes(), 2);
    // A refresh the server refuses is an error, and the tokens stay.
    let stale = Credentials::new(
        Tokens {
            access: Secret::new("stale").unwrap(),
            refresh: Secret::new("not-issued"),
        },
        oauth_client(&fake),
        TokenStore::open(&file_places(&home)).await,
        Auditor::disabled(),
    );
    assert!(stale.refresh(0).await.is_err());
    assert_eq!(fake.refreshes(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_daemon_refreshes_a_jwt_before_its_exp() {
    let fake = FakeOAuth::start().await;
    let (home, root) = home_and_root("auth-expiry");
    // The login's token lives 14 s, so it is due 7 s before its exp; refreshed ones an hour.
    fake.set_jwt_lifetime(Some(Duration::from_secs(14)));
    let (code, output, _) = login(&home, &fake, 45_220, &[]).await;
    assert_eq!(code, Some(0), "{output}");
    fake.set_jwt_lifetime(Some(Duration::from_secs(3600)));
    let first = fake.access_tokens()[0].clone();
    let expiry = fake.expiry(&first).expect("the login issued a signed JWT");

    let platform = Platform::bind().await;
    let shim = start(&home, &root, &platform, &fake, &[]);
    let (conn, seen) = platform.accept(None).await;
    assert_eq!(seen.authorization, Some(format!("Bearer {first}")));
    assert_eq!(seen.refused, None);
    let mut conn = conn.unwrap();
    let hello = conn.recv().await;
    conn.acknowledge(&hello, json!(SESSION), Value::Null, &["files"], |_| {})
        .await;
    assert_eq!(fake.refreshes(), 0, "refreshed a token far from its exp");

    // 4 s before exp: the platform still accepts the token, but the shim's next dial is
    // inside the margin and refreshes first, so the expiring token is never refused.
    wait_until(expiry - Duration::from_secs(4)).await;
    conn.close(1011).await;
    let (conn, seen) = platform.accept(None).await;
    let second = fake.access_tokens().get(1).cloned();
    assert_eq!(seen.refused, None, "the shim dialled with a refused token");
    assert_eq!(
        seen.authorization,
        second.as_ref().map(|token| format!("Bearer {token}")),
        "the shim did not refresh before the token's exp"
    );
    assert_eq!(conn.unwrap().recv().await["type"], "HELLO");
    assert_eq!(fake.refreshes(), 1);
    let file = read(&state_dir(&home).join(TOKEN_FILE_NAME));
    assert!(file.contains(second.as_deref().unwrap()) && !file.contains(&first));

    stop_after_a_refresh(shim, &fake).await;
    std::fs::remove_dir_all(&home).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dials_near_a_jwt_exp_share_one_refresh_and_a_401_still_refreshes() {
    let fake = FakeOAuth::start().await;
    let home = fresh_dir("auth-expiry-shared");
    // A 4 s token is due 2 s before its exp; refreshed ones live an hour.
    fake.set_jwt_lifetime(Some(Duration::from_secs(4)));
    let (code, output, _) = login(&home, &fake, 45_240, &[]).await;
    assert_eq!(code, Some(0), "{output}");
    fake.set_jwt_lifetime(Some(Duration::from_secs(3600)));
    let first = fake.access_tokens()[0].clone();
    let credentials = stored_credentials(&home, &fake).await;
    let platform = Platform::bind().await;
    let url = format!("{}/ws/local-executor", platform.url());
    let dial_with = |credentials: Credentials| {
        let url = url.clone();
        async move { dial(&url, None, Some(&credentials)).await.map(drop) }
    };

    // Two connections dial together 1.5 s before exp, while the refresh takes 300 ms.
    wait_until(fake.expiry(&first).unwrap() - Duration::from_millis(1500)).await;
    fake.set_refresh_delay(Duration::from_millis(300));
    let (a, b, seen) = tokio::join!(
        dial_with(credentials.clone()),
        dial_with(credentials.clone()),
        async { [platform.accept(None).await.1, platform.accept(None).await.1] }
    );
    a.unwrap();
    b.unwrap();
    assert_eq!(fake.refreshes(), 1, "one refresh for both connections");
    let second = fake.access_tokens()[1].clone();
    for seen in &seen {
        assert_eq!(seen.refused, None);
        assert_eq!(seen.authorization, Some(format!("Bearer {second}")));
    }
    assert!(fake.claims(&second).is_some(), "a token the fake signed");

    // An hour-long token is not due: dialled as it is.
    let (dialled, (_, seen)) = tokio::join!(dial_with(credentials.clone()), platform.accept(None));
    dialled.unwrap();
    assert_eq!(seen.authorization, Some(format!("Bearer {second}")));
    assert_eq!(fake.refreshes(), 1);

    // Refused before its exp (revoked, say): the 401 path still refreshes once.
    let (dialled, seen) = tokio::join!(dial_with(credentials.clone()), async {
        [
            platform.accept(Some(401)).await.1,
            platform.accept(None).await.1,
        ]
    });
    dialled.unwrap();
    assert_eq!(fake.refreshes(), 2);
    let third = fake.access_tokens()[2].clone();
    assert_eq!(seen[0].authorization, Some(format!("Bearer {second}")));
    assert_eq!(seen[1].authorization, Some(format!("Bearer {third}")));

    // The test platform refuses the first token once it has expired, as the real one does.
    wait_until(fake.expiry(&first).unwrap()).await;
    let expired = Token::from_configured(Some(first.as_str()));
    let (dialled, (_, seen)) =
        tokio::join!(dial(&url, expired.as_ref(), None), platform.accept(None));
    assert!(matches!(
        dialled,
        Err(ConnectError::Unauthorized { status: 401 })
    ));
    assert_eq!(seen.refused, Some(401));
    std::fs::remove_dir_all(&home).unwrap();
}

/// How long one start of the keyring may take before it is started again.
const KEYRING_START: Duration = Duration::from_secs(20);

/// A private session bus with gnome-keyring's Secret Service, unlocked, killed on drop.
struct KeyringBus {
    children: Vec<Child>,
    address: String,
}

impl Drop for KeyringBus {
    fn drop(&mut self) {
        for child in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn require(program: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "{program} is missing: install the Debian package {package} (scripts/setup does)"
    );
}

impl KeyringBus {
    /// Starts the bus and the keyring, retrying from scratch twice: on a loaded machine
    /// gnome-keyring has been seen to never answer a first start (once in three full runs).
    async fn start(home: &Path) -> Self {
        require("dbus-daemon", "dbus");
        require("gnome-keyring-daemon", "gnome-keyring");
        for attempt in 1..=3 {
            if let Some(bus) = Self::try_start(home, attempt).await {
                return bus;
            }
            let _ = std::fs::remove_dir_all(home.join(".local/share/keyrings"));
        }
        panic!("the Secret Service never came up in three attempts");
    }

    async fn try_start(home: &Path, attempt: u32) -> Option<Self> {
        let runtime = home.join(format!("runtime-{attempt}"));
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        // The socket in the private runtime directory, not the session default's /tmp.
        let mut bus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
            .arg(format!("--address=unix:dir={}", runtime.display()))
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut address = String::new();
        BufReader::new(bus.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        let address = address.trim().to_owned();
        let mut keyring = Command::new("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The login keyring's password, then end of input: created and unlocked.
        {
            use std::io::Write;
            let mut stdin = keyring.stdin.take().unwrap();
            stdin.write_all(b"test-keyring-password").unwrap();
        }
        let me = Self {
            children: vec![bus, keyring],
            address,
        };
        let deadline = Instant::now() + KEYRING_START;
        // Up once an item can be stored: the login collection is created and unlocked after the
        // service is already on the bus.
        loop {
            if let Ok(keyring) = Keyring::connect(&me.address).await
                && keyring.set("probe", "x").await.is_ok()
            {
                keyring.delete("probe").await.unwrap();
                break;
            }
            if Instant::now() >= deadline {
                // Dropping `me` kills this attempt's bus and daemon.
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Some(me)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_keyring_tokens_and_the_audit_key_live_in_it() {
    let fake = FakeOAuth::start().await;
    let (home, root) = home_and_root("auth-keyring");
    let bus = KeyringBus::start(&home).await;
    let env = [("DBUS_SESSION_BUS_ADDRESS", bus.address.as_str())];
    let (code, output, _) = login(&home, &fake, 45_200, &env).await;
    assert_eq!(code, Some(0), "{output}");
    assert!(output.contains("the OS keyring"), "{output}");
    assert!(!state_dir(&home).join(TOKEN_FILE_NAME).exists());
    let keyring = Keyring::connect(&bus.address).await.unwrap();
    let access = fake.access_tokens()[0].clone();
    assert_eq!(
        keyring.get("access_token").await.unwrap(),
        Some(access.clone())
    );
    assert_eq!(
        keyring.get("refresh_token").await.unwrap(),
        fake.refresh_token()
    );

    let platform = Platform::bind().await;
    let mut shim = start(&home, &root, &platform, &fake, &env);
    let (_, seen) = platform.accept(Some(401)).await;
    assert_eq!(seen.authorization, Some(format!("Bearer {access}")));
    let (conn, seen) = platform.accept(None).await;
    let mut conn = conn.unwrap();
    assert_eq!(conn.recv().await["type"], "HELLO");
    let fresh = fake.access_tokens()[1].clone();
    assert_eq!(seen.authorization, Some(format!("Bearer {fresh}")));
    assert_eq!(keyring.get("access_token").await.unwrap(), Some(fresh));
    shim.signal("TERM");
    let (status, stderr) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");

    // The audit key is in the keyring, not in a file, and it verifies the chain.
    assert!(!state_dir(&home).join("audit.key").exists());
    let key = keyring.get("audit_key").await.unwrap().unwrap();
    assert_eq!(key.len(), 64);
    let verify = shim_command(&home, &["audit", "verify"], &env)
        .output()
        .unwrap();
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    assert_no_tokens(&fake, &[&stderr, &read(&shim.audit_log())]);

    // `revoke` clears the keyring.
    let url = fake.url();
    let revoked = shim_command(&home, &["--platform-url", &url, "revoke"], &env)
        .output()
        .unwrap();
    assert_eq!(revoked.status.code(), Some(0));
    assert_eq!(keyring.get("access_token").await.unwrap(), None);
    assert_eq!(keyring.get("refresh_token").await.unwrap(), None);

    // A locked collection is reported at once, never waited on behind an unlock prompt.
    keyring
        .set("access_token", "kept-while-locked")
        .await
        .unwrap();
    let locked = Command::new("dbus-send")
        .arg(format!("--bus={}", bus.address))
        .args([
            "--print-reply",
            "--dest=org.freedesktop.secrets",
            "/org/freedesktop/secrets",
            "org.freedesktop.Secret.Service.Lock",
            "array:objpath:/org/freedesktop/secrets/aliases/default",
        ])
        .output()
        .unwrap();
    assert!(locked.status.success(), "{locked:?}");
    let started = Instant::now();
    assert!(matches!(
        keyring.get("access_token").await,
        Err(KeyringError::Locked)
    ));
    assert!(matches!(
        keyring.set("access_token", "x").await,
        Err(KeyringError::Locked)
    ));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "a locked keyring took {:?}",
        started.elapsed()
    );
    drop(keyring);
    drop(bus);
    std::fs::remove_dir_all(&home).unwrap();
}
