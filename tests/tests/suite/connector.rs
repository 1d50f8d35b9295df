//! The real `autogpt-shim` binary against the WebSocket test platform: handshake checks and
//! close codes, reconnects, revocation, malformed frames, capability gating, auth refusal and
//! start-up refusals, with the token kept out of its logs.

use std::path::Path;
use std::time::Duration;

use e2e::platform::{Platform, SESSION, Shim, TOKEN, error_code, fresh_dir};
use serde_json::{Value, json};

/// Arguments for `start` against `platform` with `root` as the jail, plus `extra` after
/// `start`; at the most verbose level, the likeliest to leak the token.
pub(super) fn start_args(platform: &Platform, root: &Path, extra: &[&str]) -> Vec<String> {
    platform.start_args(root, "DEBUG", extra)
}

/// A home with an allowed root inside it.
pub(super) fn home_and_root(tag: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let home = fresh_dir(tag);
    let root = home.join("root");
    std::fs::create_dir_all(&root).unwrap();
    (home, root)
}

/// `autogpt-shim doctor` with computer use enabled in `env`: its exit code and output.
// Its callers (the Wayland suites) are Linux-only.
#[cfg(target_os = "linux")]
pub(super) fn doctor_in_env(
    mut env: Vec<(&'static str, String)>,
    tag: &str,
) -> (Option<i32>, String) {
    let (home, root) = home_and_root(tag);
    let root = root.to_string_lossy().into_owned();
    env.push(("AUTOGPT_SHIM_ENABLE_COMPUTER_USE", "1".to_owned()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = e2e::platform::shim_command(
        &home,
        &["--session-id", "s-1", "--allowed-root", &root, "doctor"],
        &env,
    )
    .output()
    .unwrap();
    std::fs::remove_dir_all(&home).unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Starts the shim with the test token and `extra` flags after `start`.
pub(super) fn spawn(home: &Path, platform: &Platform, root: &Path, extra: &[&str]) -> Shim {
    spawn_env(home, platform, root, extra, &[])
}

/// [`spawn`] with more environment.
pub(super) fn spawn_env(
    home: &Path,
    platform: &Platform,
    root: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Shim {
    let args = start_args(platform, root, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut env = env.to_vec();
    env.push(("AUTOGPT_SHIM_TOKEN", TOKEN));
    Shim::spawn(home, &args, &env)
}

/// A shim with computer use on, in a home of its own, both gone when the value drops; it
/// derefs to the shim. Used by the display suites, which run on Unix only.
#[cfg(unix)]
pub(super) struct ShimIn {
    shim: Option<Shim>,
    home: std::path::PathBuf,
}

#[cfg(unix)]
impl ShimIn {
    /// Starts the shim with `--enable-computer-use` and `extra` flags in a fresh home named
    /// after `tag`, with `env` (a display's or compositor's environment).
    pub(super) fn start(
        env: &[(&'static str, String)],
        platform: &Platform,
        tag: &str,
        extra: &[&str],
    ) -> Self {
        let (home, root) = home_and_root(tag);
        let mut args = vec!["--enable-computer-use"];
        args.extend_from_slice(extra);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Self {
            shim: Some(spawn_env(&home, platform, &root, &args, &env)),
            home,
        }
    }
}

#[cfg(unix)]
impl std::ops::Deref for ShimIn {
    type Target = Shim;

    fn deref(&self) -> &Shim {
        self.shim
            .as_ref()
            .expect("the shim runs until the value drops")
    }
}

#[cfg(unix)]
impl std::ops::DerefMut for ShimIn {
    fn deref_mut(&mut self) -> &mut Shim {
        self.shim
            .as_mut()
            .expect("the shim runs until the value drops")
    }
}

#[cfg(unix)]
impl Drop for ShimIn {
    fn drop(&mut self) {
        // Stopped first: a shim still running writes its state into the home again.
        drop(self.shim.take());
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// The audit log's complete records, parsed. A running shim may be appending as this reads
/// (one batch is one write, which a reader can see in part), so a last line without its newline
/// is left for the next read.
pub(super) fn audit_records(shim: &Shim) -> Vec<Value> {
    std::fs::read_to_string(shim.audit_log())
        .unwrap()
        .split_inclusive('\n')
        .filter_map(|line| line.strip_suffix('\n'))
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn ops(records: &[Value]) -> Vec<&str> {
    records.iter().map(|r| r["op"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn serves_files_reconnects_after_1011_and_stops_on_4428() {
    let (home, root) = home_and_root("shim-life");
    let platform = Platform::bind().await;
    let mut shim = spawn(&home, &platform, &root, &[]);

    let (mut conn, hello) = platform.session(&["files"], |_| {}).await;
    let payload = &hello["payload"];
    assert_eq!(payload["protocol_version"], "1.1");
    // Shell is off unless the user turns it on.
    assert_eq!(payload["capabilities"], json!(["files"]));
    assert_eq!(payload["allowed_root"], root.to_string_lossy().as_ref());
    assert_eq!(payload["local_llm_models"], json!([]));
    assert_eq!(payload["hardware_devices"], json!([]));

    let target = root.join("out").join("hello.txt");
    let ack = conn
        .call(
            "FILE_WRITE",
            "w1",
            json!({"path": target.to_string_lossy(), "content": "hello from the platform\n",
                   "encoding": "utf-8", "create_parents": true}),
        )
        .await;
    assert_eq!(ack["type"], "ACK", "{ack}");
    assert_eq!(ack["pending_capacity"], 4, "{ack}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "hello from the platform\n"
    );
    let shell = conn
        .call("EXECUTE_COMMAND", "x1", json!({"argv": ["true"]}))
        .await;
    assert_eq!(error_code(&shell), "CAPABILITY_NOT_GRANTED");
    assert_eq!(shell["payload"]["details"]["required_capability"], "shell");

    // A server error is transient: the shim dials again and says HELLO again.
    conn.close(1011).await;
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    let again = conn
        .call("FILE_READ", "r4", json!({"path": "out/hello.txt"}))
        .await;
    assert_eq!(again["payload"]["content"], "hello from the platform\n");

    // 4428 is fatal: exit 0 and no further dial.
    conn.close(4428).await;
    let (status, stderr) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        !platform.dials_within(Duration::from_secs(1)).await,
        "the shim dialled again after 4428"
    );
    assert!(!stderr.contains(TOKEN), "the token leaked: {stderr}");
    assert!(stderr.contains(SESSION), "logs go to stderr: {stderr}");

    let records = audit_records(&shim);
    let ops = ops(&records);
    assert_eq!(ops.first(), Some(&"SHIM_START"), "{ops:?}");
    for op in [
        "WS_CONNECTED",
        "FILE_WRITE",
        "WS_DISCONNECTED",
        "SESSION_REVOKED",
    ] {
        assert!(ops.contains(&op), "{op} missing from {ops:?}");
    }
    let closed = records
        .iter()
        .find(|r| r["op"] == "SESSION_REVOKED")
        .unwrap();
    assert_eq!(closed["details"]["source"], "ws_close_code");
    assert_eq!(closed["details"]["close_code"], 4428);
    let text = std::fs::read_to_string(shim.audit_log()).unwrap();
    assert!(!text.contains("hello from the platform"));
    assert!(!text.contains(TOKEN));
}

#[tokio::test]
async fn fatal_close_codes_stop_without_reconnecting() {
    for code in [4426, 4427, 4429] {
        let (home, root) = home_and_root("shim-fatal");
        let platform = Platform::bind().await;
        let mut shim = spawn(&home, &platform, &root, &[]);
        let (mut conn, _) = platform.session(&["files"], |_| {}).await;
        conn.close(code).await;
        let (status, stderr) = shim.exit().await;
        assert_eq!(status.code(), Some(0), "{code}: {stderr}");
        assert!(
            !platform.dials_within(Duration::from_secs(1)).await,
            "the shim dialled again after {code}"
        );
    }
}

#[tokio::test]
async fn handshake_refusals_close_with_their_codes_and_never_redial() {
    // (what the ACK gets wrong, the close code the shim sends, its exit code)
    let cases: [(&str, u16, i32); 3] =
        [("id", 4400, 0), ("session", 4403, 77), ("version", 4426, 0)];
    for (wrong, close, exit) in cases {
        let (home, root) = home_and_root("shim-ack");
        let platform = Platform::bind().await;
        let mut shim = spawn(&home, &platform, &root, &[]);
        let (mut conn, _) = platform
            .session(&["files"], |ack| match wrong {
                "id" => ack["id"] = json!("not-the-hello-id"),
                "session" => ack["payload"]["session_id"] = json!("someone-else"),
                _ => ack["payload"]["protocol_version"] = json!("2.0"),
            })
            .await;
        assert_eq!(conn.closed().await, Some(close), "{wrong}");
        let (status, stderr) = shim.exit().await;
        assert_eq!(status.code(), Some(exit), "{wrong}: {stderr}");
        assert!(!platform.dials_within(Duration::from_secs(1)).await);
    }
}

#[tokio::test]
async fn malformed_frames_are_answered_when_they_have_an_id_and_survived() {
    let (home, root) = home_and_root("shim-malformed");
    let platform = Platform::bind().await;
    let _shim = spawn(&home, &platform, &root, &[]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;

    // No id can be read: nothing to answer, but the session goes on.
    conn.send_text("{not json".to_owned()).await;
    // An invalid payload, an unknown type, and a field from the future.
    conn.send(
        &json!({"type": "FILE_READ", "id": "m1", "ts": 1.0, "version": "1.1",
                      "payload": {"encoding": "utf-8"}}),
    )
    .await;
    let reply = conn.recv().await;
    assert_eq!(reply["id"], "m1");
    assert_eq!(error_code(&reply), "INTERNAL_ERROR", "{reply}");
    assert!(!reply.to_string().contains("utf-8"), "echoed the payload");
    let unknown = conn.call("TELEPORT", "m2", json!({})).await;
    assert_eq!(error_code(&unknown), "FEATURE_NOT_SUPPORTED", "{unknown}");
    let future = conn
        .call(
            "FILE_STAT",
            "m3",
            json!({"path": ".", "follow_symlinks": true, "new_field": [1, 2]}),
        )
        .await;
    assert_eq!(future["type"], "FILE_STAT_RESPONSE", "{future}");
    // Another major: dropped, never executed, never answered.
    conn.send(
        &json!({"type": "FILE_WRITE", "id": "m4", "ts": 1.0, "version": "2.0",
                      "payload": {"path": "major2.txt", "content": "x"}}),
    )
    .await;
    let pong = conn.call("PING", "m5", json!({})).await;
    assert_eq!(pong["type"], "PONG");
    assert!(!root.join("major2.txt").exists());
}

#[tokio::test]
async fn session_revoked_closes_with_4428_exits_0_and_is_audited() {
    let (home, root) = home_and_root("shim-revoked");
    let platform = Platform::bind().await;
    let mut shim = spawn(&home, &platform, &root, &[]);
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    conn.request(
        "SESSION_REVOKED",
        "rv1",
        json!({"reason": "another_shim_connected", "new_shim_machine_id": "m-2"}),
    )
    .await;
    assert_eq!(conn.closed().await, Some(4428));
    let (status, stderr) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!platform.dials_within(Duration::from_secs(1)).await);
    let records = audit_records(&shim);
    let revoked = records
        .iter()
        .find(|r| r["op"] == "SESSION_REVOKED")
        .unwrap();
    assert_eq!(revoked["details"]["reason"], "another_shim_connected");
    assert_eq!(revoked["details"]["source"], "frame");
    assert_eq!(revoked["details"]["new_shim_machine_id"], "m-2");
}

#[tokio::test]
async fn refused_upgrades_exit_77() {
    for status_code in [401, 403] {
        let (home, root) = home_and_root("shim-401");
        let platform = Platform::bind().await;
        let mut shim = spawn(&home, &platform, &root, &[]);
        let (_, seen) = platform.accept(Some(status_code)).await;
        assert_eq!(seen.authorization, Some(format!("Bearer {TOKEN}")));
        let (status, stderr) = shim.exit().await;
        assert_eq!(status.code(), Some(77), "{stderr}");
        assert!(stderr.contains(&status_code.to_string()), "{stderr}");
        assert!(!stderr.contains(TOKEN), "the token leaked: {stderr}");
    }
}

// The privacy check reads Unix mode bits.
#[cfg(unix)]
#[tokio::test]
async fn a_token_file_must_be_private_and_its_token_is_sent() {
    let (home, root) = home_and_root("shim-token-file");
    let token_file = home.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let platform = Platform::bind().await;
    let file = token_file.to_string_lossy().into_owned();

    set_mode(&token_file, 0o644);
    let args = start_args(&platform, &root, &[]);
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.splice(0..0, ["--token-file", file.as_str()]);
    let mut shim = Shim::spawn(&home, &args, &[]);
    let (status, stderr) = shim.exit().await;
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("600"), "{stderr}");
    assert!(!stderr.contains(TOKEN));

    set_mode(&token_file, 0o600);
    let _shim = Shim::spawn(&home, &args, &[]);
    // `session` checks the bearer on the upgrade.
    let (mut conn, _) = platform.session(&["files"], |_| {}).await;
    assert_eq!(conn.call("PING", "p", json!({})).await["type"], "PONG");
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[tokio::test]
async fn no_token_means_no_header_and_sigterm_exits_0() {
    let (home, root) = home_and_root("shim-term");
    let platform = Platform::bind().await;
    let args = start_args(&platform, &root, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut shim = Shim::spawn(&home, &args, &[]);
    let (conn, seen) = platform.accept(None).await;
    let mut conn = conn.unwrap();
    assert_eq!(seen.authorization, None);
    assert_eq!(conn.recv().await["type"], "HELLO");
    shim.signal("TERM");
    let (status, stderr) = shim.exit().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(
        audit_records(&shim).last().unwrap()["op"],
        "SHIM_STOP",
        "{stderr}"
    );
}

/// The shim links no capture library: X11 is spoken in Rust (x11rb), libwayland-client is
/// loaded only by a Wayland connection that needs it, and xcap (with libgbm, libdrm,
/// libwayland-server and libpipewire) is not built on Linux. A session that has not captured
/// maps none of them, even with computer use on, so a machine without them still runs the shim.
#[tokio::test]
async fn a_session_that_has_not_captured_maps_no_capture_library() {
    let (home, root) = home_and_root("shim-maps");
    let platform = Platform::bind().await;
    let shim = spawn(&home, &platform, &root, &["--enable-computer-use"]);
    let (_conn, hello) = platform.session(&["files", "computer_use"], |_| {}).await;
    assert_eq!(hello["type"], "HELLO");
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", shim.pid())).unwrap();
    // The check reads the shim's own mappings: its C library is there.
    assert!(maps.contains("libc.so"), "{maps}");
    for library in [
        "libxcb",
        "libwayland-client",
        "libwayland-server",
        "libgbm",
        "libdrm",
        "libpipewire",
    ] {
        assert!(!maps.contains(library), "an idle shim maps {library}");
    }
}

/// Runs a start-up that must be refused; returns its exit code and its single line.
async fn refusal(home: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut shim = Shim::spawn(home, args, &[("AUTOGPT_SHIM_TOKEN", TOKEN)]);
    let (status, stderr) = shim.exit().await;
    assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
    assert!(!stderr.contains(TOKEN));
    (status.code(), stderr)
}

#[tokio::test]
async fn refuses_what_this_build_cannot_do_with_one_line() {
    let (home, root) = home_and_root("shim-refuse");
    let root = root.to_string_lossy().into_owned();
    let base = ["--session-id", SESSION, "--allowed-root", root.as_str()];
    let recording: Vec<&str> = base
        .iter()
        .copied()
        .chain(["start", "--enable-recording"])
        .collect();
    let (code, line) = refusal(&home, &recording).await;
    assert_eq!(code, Some(78));
    assert!(line.contains("--enable-recording"), "{line}");

    let missing = format!("{root}/does-not-exist");
    let (code, line) = refusal(
        &home,
        &["--session-id", SESSION, "--allowed-root", &missing, "start"],
    )
    .await;
    assert_eq!(code, Some(78));
    assert!(line.contains("does-not-exist"), "{line}");
}
