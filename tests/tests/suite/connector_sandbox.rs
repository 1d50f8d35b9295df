//! `--shell-sandbox` through the real `autogpt-shim` binary and the real kernel: every escape
//! route of issue 35 tried by a real command in `off`, `workspace` and `strict`, each checked
//! on disk afterwards (and `off` shows each route is real); reads and the network in `strict`;
//! what must keep working inside the root and `TMPDIR` (git, a Python venv, the C compiler);
//! the limits; the audit record and request log line; and the refusal (exit 78) when the
//! kernel is made to lack a part, by a private user namespace's sysctl or a seccomp filter.
//!
//! Run with `--nocapture` to see each route's outcome per mode (the table in the issue's note).

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use e2e::platform::{
    Conn, Platform, Shim, TOKEN, binary, fresh_dir, shim_command, shim_command_with,
};
use serde_json::{Value, json};

use super::connector::{audit_records, home_and_root, spawn_env};
use super::support::{Tmpfs, assert_readable, rerun_as_namespace_root, running};

/// A shim with shell on in one sandbox mode, its session, and the folders it was given.
struct Sandboxed {
    home: PathBuf,
    root: PathBuf,
    shim: Shim,
    conn: Conn,
    _platform: Platform,
}

impl Sandboxed {
    async fn start(mode: &str) -> Self {
        Self::start_with(mode, &[], |_| {}).await
    }

    /// [`Sandboxed::start`] with more environment, and `ack` changing the platform's HELLO_ACK.
    async fn start_with(mode: &str, env: &[(&str, &str)], ack: impl FnOnce(&mut Value)) -> Self {
        let (home, root) = home_and_root(&format!("shim-sandbox-{mode}"));
        let platform = Platform::bind().await;
        let shim = spawn_env(
            &home,
            &platform,
            &root,
            &["--enable-shell", "--shell-sandbox", mode],
            env,
        );
        let (conn, hello) = platform.session(&["shell", "files"], ack).await;
        assert_eq!(hello["type"], "HELLO", "{hello}: {}", shim.stderr());
        Self {
            home,
            root,
            shim,
            conn,
            _platform: platform,
        }
    }

    /// Runs `command` with bash in the root, with `env`; the COMMAND_RESULT's payload.
    async fn bash(&mut self, id: &str, command: &str, env: Value) -> Value {
        let reply = self
            .conn
            .call(
                "EXECUTE_COMMAND",
                id,
                json!({"command": command, "shell": "bash", "env": env, "timeout_seconds": 120}),
            )
            .await;
        assert_eq!(reply["type"], "COMMAND_RESULT", "{reply}");
        reply["payload"].clone()
    }
}

impl Drop for Sandboxed {
    fn drop(&mut self) {
        // Not SIGKILL: that would leave the spare launcher's TMPDIR behind.
        self.shim.terminate();
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// A folder outside the allowed root, removed at the end.
struct Outside(PathBuf);

impl Outside {
    fn new() -> Self {
        let dir = fresh_dir("shim-sandbox-outside");
        std::fs::write(dir.join("secret.txt"), "planted-secret-5e1c\n").unwrap();
        Self(dir)
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Everything about a file an escape could change.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    content: Option<Vec<u8>>,
    mode: u32,
    owner: (u32, u32),
    modified: SystemTime,
    xattr: bool,
}

fn snapshot(path: &Path) -> Option<Snapshot> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some(Snapshot {
        content: std::fs::read(path).ok(),
        mode: meta.permissions().mode(),
        owner: (meta.uid(), meta.gid()),
        modified: meta.modified().unwrap(),
        xattr: rustix::fs::getxattr_query(path, "user.escape").is_ok(),
    })
}

/// One escape route: a bash command acting on `$V` (a file planted outside the root) and `$N`
/// (a path outside that must not come to exist), `$O` (the folder outside).
struct Route {
    name: &'static str,
    command: &'static str,
    /// Where `$N` is: beside the victim unless the route names `/tmp` or `/dev/shm`.
    new_in: NewIn,
}

#[derive(Clone, Copy)]
enum NewIn {
    Outside,
    Tmp,
    Shm,
}

const ROUTES: &[Route] = &[
    route("redirect", r#"echo x > "$N""#),
    route("append", r#"echo x >> "$V""#),
    route("truncate", r#"truncate -s 0 "$V""#),
    route(
        "symlink out of the root",
        r#"ln -s "$O" link && echo x > "link/${N##*/}""#,
    ),
    route("mv out of the root", r#"echo x > m && mv m "$N""#),
    route("rename outside", r#"mv "$V" "$N""#),
    route("hard link out", r#"echo x > h && ln h "$N""#),
    route(
        "hard link in, then write",
        r#"ln "$V" inlink && echo x >> inlink"#,
    ),
    route("remove", r#"rm -f "$V""#),
    route("mkdir", r#"mkdir "$N""#),
    route("mkfifo", r#"mkfifo "$N""#),
    route("chmod", r#"chmod 600 "$V""#),
    route("chown", r#"chown 12345:12345 "$V""#),
    route("utimes (touch -d)", r#"touch -d 2001-02-03 "$V""#),
    route(
        "xattr",
        r#"python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.escape", b"1")' "$V""#,
    ),
    route(
        "python open()",
        r#"python3 -c 'import sys; open(sys.argv[1], "w").write("x")' "$N""#,
    ),
    route("/proc/self/root", r#"echo x > "/proc/self/root$N""#),
    route("/proc/<shim>/root", r#"echo x > "/proc/$PPID/root$N""#),
    route("grandchild", r#"sh -c 'sleep 0.3; echo x > "$N"' & wait"#),
    route(
        "setsid daemon",
        r#"setsid sh -c 'sleep 0.3; echo x > "$N"' </dev/null >/dev/null 2>&1 & exit 0"#,
    ),
    // Unconfined there is nothing to undo, and the host's own mounts are left alone.
    route(
        "remount / rw, then write",
        r#"[ "$MODE" = off ] || mount -o remount,bind,rw / ; echo x > "$N""#,
    ),
    route(
        "nested user namespace",
        r#"unshare -Urm sh -c 'mount -o remount,bind,rw / ; echo x > "$N"'"#,
    ),
    Route {
        name: "/tmp",
        command: r#"echo x > "$N""#,
        new_in: NewIn::Tmp,
    },
    Route {
        name: "/dev/shm",
        command: r#"echo x > "$N""#,
        new_in: NewIn::Shm,
    },
];

const fn route(name: &'static str, command: &'static str) -> Route {
    Route {
        name,
        command,
        new_in: NewIn::Outside,
    }
}

/// Tries every route in `mode`; returns (route, escaped) and prints each outcome.
async fn try_routes(mode: &str) -> Vec<(&'static str, bool)> {
    let outside = Outside::new();
    let mut shim = Sandboxed::start(mode).await;
    let mut outcomes = Vec::new();
    for (i, route) in ROUTES.iter().enumerate() {
        let victim = outside.0.join(format!("victim-{i}"));
        std::fs::write(&victim, "original\n").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        let before = snapshot(&victim);
        let tag = uuid::Uuid::new_v4().simple().to_string();
        let new = match route.new_in {
            NewIn::Outside => outside.0.join(format!("new-{i}")),
            NewIn::Tmp => PathBuf::from(format!("/tmp/shim-sandbox-escape-{tag}")),
            NewIn::Shm => PathBuf::from(format!("/dev/shm/shim-sandbox-escape-{tag}")),
        };
        let env = json!({
            "V": victim.to_str().unwrap(),
            "N": new.to_str().unwrap(),
            "O": outside.0.to_str().unwrap(),
            "MODE": mode,
        });
        let payload = shim.bash(&format!("route-{i}"), route.command, env).await;
        if route.name == "setsid daemon" {
            // The daemon outlives the command; give it its time, and more.
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        let escaped = snapshot(&victim) != before || std::fs::symlink_metadata(&new).is_ok();
        let stderr = payload["stderr"].as_str().unwrap_or_default();
        eprintln!(
            "sandbox {mode:<9} {:<26} {:<7} exit {:>3}  {}",
            route.name,
            if escaped { "ESCAPED" } else { "held" },
            payload["exit_code"],
            stderr.lines().last().unwrap_or_default()
        );
        if !matches!(route.new_in, NewIn::Outside) {
            let _ = std::fs::remove_file(&new);
        }
        outcomes.push((route.name, escaped));
    }
    // The folder outside holds exactly what was planted in any sandbox mode.
    if mode != "off" {
        let mut names: Vec<String> = std::fs::read_dir(&outside.0)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut planted: Vec<String> = (0..ROUTES.len())
            .map(|i| format!("victim-{i}"))
            .chain(["secret.txt".to_owned()])
            .collect();
        planted.sort();
        assert_eq!(names, planted, "something appeared outside the root");
        assert!(running(&shim.shim.pid().to_string()));
    }
    outcomes
}

#[tokio::test]
async fn unconfined_every_escape_route_is_real() {
    let outcomes = try_routes("off").await;
    for (route, escaped) in outcomes {
        assert!(
            escaped,
            "in off, {route} changed nothing: the route proves nothing"
        );
    }
}

#[tokio::test]
async fn workspace_holds_every_escape_route() {
    for (route, escaped) in try_routes("workspace").await {
        assert!(
            !escaped,
            "workspace: {route} changed something outside the root"
        );
    }
}

#[tokio::test]
async fn strict_holds_every_escape_route() {
    for (route, escaped) in try_routes("strict").await {
        assert!(
            !escaped,
            "strict: {route} changed something outside the root"
        );
    }
}

/// What a command sees of the world in `mode`: a planted file outside, a loopback TCP listener
/// and UDP socket the test holds, a Unix socket outside the root, `no_new_privs`, and a signal
/// to the shim. Returns (stdout of the reads, tcp arrived, udp arrived, unix arrived).
async fn reach_out(mode: &str) -> (String, bool, bool, bool) {
    let outside = Outside::new();
    let mut shim = Sandboxed::start(mode).await;
    std::fs::write(shim.home.join("planted.txt"), "home-secret-77a0\n").unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let unix_path = outside.0.join("outside.sock");
    let unix = UnixListener::bind(&unix_path).unwrap();
    unix.set_nonblocking(true).unwrap();
    let env = json!({
        "O": outside.0.to_str().unwrap(),
        "TCP": tcp.local_addr().unwrap().port().to_string(),
        "UDP": udp.local_addr().unwrap().port().to_string(),
    });
    let reads = shim
        .bash(
            "reads",
            r#"cat "$O/secret.txt"; cat "$HOME/planted.txt"; cat /etc/hostname >/dev/null && echo system-readable; grep NoNewPrivs /proc/self/status; kill -0 "$PPID" 2>/dev/null && echo shim-signalled"#,
            env.clone(),
        )
        .await;
    let net = shim
        .bash(
            "net",
            r#"python3 - <<'EOF'
import os, socket
for name, attempt in [
    ("tcp", lambda: socket.create_connection(("127.0.0.1", int(os.environ["TCP"])), timeout=3)),
    ("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", int(os.environ["UDP"])))),
    ("unix", lambda: socket.socket(socket.AF_UNIX).connect(os.environ["O"] + "/outside.sock")),
]:
    try:
        attempt()
        print(name, "ok")
    except OSError as err:
        print(name, "refused:", err)
EOF"#,
            env,
        )
        .await;
    eprintln!("sandbox {mode:<9} network: {}", net["stdout"]);
    // Whatever was sent has arrived by the time the command ended; a moment more for UDP.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let arrived = |result: std::io::Result<()>| match result {
        Ok(()) => true,
        Err(err) if err.kind() == ErrorKind::WouldBlock => false,
        Err(err) => panic!("{err}"),
    };
    let tcp_arrived = arrived(tcp.accept().map(drop));
    let udp_arrived = arrived(udp.recv(&mut [0; 8]).map(drop));
    let unix_arrived = arrived(unix.accept().map(drop));
    (
        reads["stdout"].as_str().unwrap().to_owned(),
        tcp_arrived,
        udp_arrived,
        unix_arrived,
    )
}

#[tokio::test]
async fn strict_reads_no_file_outside_and_reaches_no_network_and_workspace_does() {
    let (reads, tcp, udp, unix) = reach_out("strict").await;
    eprintln!("sandbox strict    reads: {reads:?}");
    assert!(!reads.contains("planted-secret"), "{reads}");
    assert!(!reads.contains("home-secret"), "{reads}");
    assert!(reads.contains("system-readable"), "{reads}");
    assert!(reads.contains("NoNewPrivs:\t1"), "{reads}");
    assert!(!reads.contains("shim-signalled"), "{reads}");
    assert!(!tcp, "a TCP connection reached the loopback listener");
    assert!(!udp, "a UDP datagram reached the loopback socket");
    assert!(!unix, "a Unix socket outside the root was reached");

    // workspace reads what the user can and keeps the network; it cannot signal the shim.
    let (reads, tcp, udp, unix) = reach_out("workspace").await;
    eprintln!("sandbox workspace reads: {reads:?}");
    assert!(reads.contains("planted-secret"), "{reads}");
    assert!(reads.contains("home-secret"), "{reads}");
    assert!(reads.contains("NoNewPrivs:\t1"), "{reads}");
    assert!(!reads.contains("shim-signalled"), "{reads}");
    assert!(
        tcp && udp && unix,
        "workspace keeps the network: {tcp} {udp} {unix}"
    );

    let (reads, tcp, ..) = reach_out("off").await;
    assert!(reads.contains("NoNewPrivs:\t0"), "{reads}");
    assert!(reads.contains("shim-signalled"), "{reads}");
    assert!(tcp);
}

#[tokio::test]
async fn inside_the_root_and_tmpdir_git_a_venv_and_the_compiler_work_and_tmpdir_goes() {
    for mode in ["workspace", "strict"] {
        let mut shim = Sandboxed::start(mode).await;
        let work = shim
            .bash(
                "work",
                r#"set -e
echo "tmpdir=$TMPDIR"
git init -q repo && cd repo && echo a > a && git add a
git -c user.email=t@example.com -c user.name=t commit -qm first && git log --oneline | wc -l
mv a b && ln b c && ln -s b d && chmod 600 b && touch -d 2001-02-03 c && cat d
cd .. && python3 -m venv venv && venv/bin/python -c 'import sys; print("venv", sys.prefix)'
printf 'int main(void) { return 7; }\n' > "$TMPDIR/seven.c"
cc -o "$TMPDIR/seven" "$TMPDIR/seven.c" && { "$TMPDIR/seven" || echo "compiled exit $?"; }
python3 -c 'import socket, os; s = socket.socket(socket.AF_UNIX); s.bind("inside.sock"); s.listen(); c = socket.socket(socket.AF_UNIX); c.connect("inside.sock"); print("unix inside ok")'
echo x > /dev/null && echo y > /dev/shm/own && cat /dev/shm/own"#,
                json!({}),
            )
            .await;
        let stdout = work["stdout"].as_str().unwrap();
        assert_eq!(work["exit_code"], 0, "{mode}: {work}");
        assert!(stdout.contains("\n1\na\n"), "{mode}: {stdout}");
        assert!(
            stdout.contains(&format!("venv {}", shim.root.join("venv").display())),
            "{mode}: {stdout}"
        );
        assert!(stdout.contains("compiled exit 7"), "{mode}: {stdout}");
        assert!(stdout.contains("unix inside ok"), "{mode}: {stdout}");
        assert!(stdout.ends_with("y\n"), "{mode}: {stdout}");
        assert!(shim.root.join("repo/.git/HEAD").is_file());
        assert!(shim.root.join("venv/bin/python").exists());
        let tmpdir = stdout
            .lines()
            .find_map(|line| line.strip_prefix("tmpdir="))
            .unwrap();
        assert!(
            tmpdir.contains("autogpt-shim-cmd-"),
            "{mode}: TMPDIR is {tmpdir}"
        );
        assert!(
            !Path::new(tmpdir).exists(),
            "{mode}: TMPDIR {tmpdir} was left behind"
        );
        // The private /dev/shm was the command's own.
        assert!(!Path::new("/dev/shm/own").exists());
    }
}

#[tokio::test]
async fn limits_hold_inside_the_sandbox_and_records_name_the_mode() {
    for mode in ["workspace", "strict"] {
        let mut shim = Sandboxed::start_with(mode, &[], |ack| {
            ack["payload"]["max_file_size_bytes"] = json!(1000);
            ack["payload"]["command_timeout_seconds"] = json!(2);
        })
        .await;
        let over = shim
            .bash(
                "over",
                "head -c 5000000 /dev/zero | tr '\\0' x; echo done >&2",
                json!({}),
            )
            .await;
        assert_eq!(over["output_truncated"], true, "{mode}: {over}");
        let kept = over["stdout"].as_str().unwrap().len() + over["stderr"].as_str().unwrap().len();
        assert!(kept <= 1000, "{mode}: {kept}");

        // A tree that ignores SIGTERM is killed at the deadline, the grandchild too.
        let marker = shim.root.join("grandchild.pid");
        let slow = shim
            .bash(
                "slow",
                &format!(
                    "trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > {}; sleep 60' & sleep 60",
                    marker.display()
                ),
                json!({}),
            )
            .await;
        assert_eq!(slow["timed_out"], true, "{mode}: {slow}");
        assert_eq!(slow["exit_code"], -1);
        let pid = std::fs::read_to_string(&marker).unwrap();
        assert!(!running(pid.trim()), "{mode}: the grandchild survived");

        // A dropped connection kills the running tree.
        let tree = shim.root.join("tree.pid");
        shim.conn
            .request(
                "EXECUTE_COMMAND",
                "long",
                json!({"command": format!("sh -c 'echo $$ > {}; sleep 60' & wait", tree.display()),
                       "timeout_seconds": 120}),
            )
            .await;
        let deadline = std::time::Instant::now() + e2e::platform::WAIT;
        while std::fs::read_to_string(&tree).map_or(true, |pid| pid.trim().is_empty()) {
            assert!(
                std::time::Instant::now() < deadline,
                "{mode}: never started"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let pid = std::fs::read_to_string(&tree).unwrap();
        shim.conn.close(1000).await;
        let deadline = std::time::Instant::now() + e2e::platform::WAIT;
        while running(pid.trim()) {
            assert!(
                std::time::Instant::now() < deadline,
                "{mode}: the tree survived the connection"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // The result is COMMAND_RESULT as ever; the record and the log line name the mode.
        let keys: Vec<&String> = over.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "duration_seconds",
                "exit_code",
                "output_truncated",
                "stderr",
                "stdout",
                "timed_out"
            ]
        );
        let records = audit_records(&shim.shim);
        let record = records.iter().find(|r| r["request_id"] == "over").unwrap();
        assert_eq!(record["details"]["sandbox"], mode, "{record}");
        let log = shim.shim.stderr();
        let line = log
            .lines()
            .find(|line| line.contains("op=EXECUTE_COMMAND") && line.contains("\"over\""))
            .unwrap_or_else(|| panic!("no request line: {log}"));
        assert!(line.contains(&format!("sandbox={mode}")), "{line}");
        assert!(!log.contains(TOKEN));
    }
}

/// `autogpt-shim` with `args` run under `wrapper` (a program and its arguments before the
/// shim), with the suite's environment: exit code and stderr.
fn run_wrapped(home: &Path, wrapper: &[&str], args: &[&str]) -> (Option<i32>, String) {
    let shim = shim_command(home, args, &[("AUTOGPT_SHIM_TOKEN", TOKEN)]);
    let mut command = Command::new(wrapper[0]);
    command
        .args(&wrapper[1..])
        .arg(shim.get_program())
        .args(shim.get_args())
        .env_clear()
        .stdin(Stdio::null());
    for (name, value) in shim.get_envs() {
        if let Some(value) = value {
            command.env(name, value);
        }
    }
    let output = command.output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_kernel_without_a_part_refuses_the_mode_with_exit_78() {
    let (home, root) = home_and_root("shim-sandbox-refused");
    let platform = Platform::bind().await;
    let start = |mode: &str| {
        let mut args = platform.start_args(&root, "INFO", &["--enable-shell"]);
        args.extend(["--shell-sandbox".to_owned(), mode.to_owned()]);
        args
    };
    let deny = binary("examples/deny-syscalls");
    let deny = deny.to_str().unwrap();
    // A private user namespace whose own limit allows no further one, as a sysctl would.
    let no_userns = [
        "unshare",
        "-Ur",
        "sh",
        "-c",
        r#"echo 0 > /proc/sys/user/max_user_namespaces && exec "$@""#,
        "sh",
    ];
    let cases: [(&[&str], &str, &[&str]); 5] = [
        (
            &no_userns,
            "workspace",
            &[
                "user and mount namespaces are not available",
                "max_user_namespaces is 0",
            ],
        ),
        (
            &[deny, "unshare", "--"],
            "strict",
            &["user and mount namespaces are not available (unshare: EPERM"],
        ),
        (
            &[deny, "landlock", "--"],
            "workspace",
            &["Landlock is not available ("],
        ),
        (
            &[deny, "seccomp", "--"],
            "workspace",
            &["seccomp filters are not available ("],
        ),
        (
            &[deny, "landlock,seccomp,unshare", "--"],
            "strict",
            &["Landlock is not available", "seccomp filters", "namespaces"],
        ),
    ];
    for (wrapper, mode, named) in cases {
        let args = start(mode);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stderr) = run_wrapped(&home, wrapper, &args);
        eprintln!("refused under {wrapper:?}: {stderr}");
        assert_eq!(code, Some(78), "{wrapper:?}: {stderr}");
        assert_readable(&stderr, "--shell-sandbox off");
        assert_eq!(stderr.lines().count(), 1, "one sentence: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "autogpt-shim: shell sandbox: `{mode}` cannot be enforced here: "
            )),
            "{stderr}"
        );
        assert!(stderr.contains("--shell-sandbox off"), "{stderr}");
        for part in named {
            assert!(stderr.contains(part), "{part:?} not named: {stderr}");
        }
    }
    // Refused before anything was opened: no audit log.
    assert!(
        !home
            .join(".local/state/autogpt-local-executor/audit.log")
            .exists()
    );

    // `mcp` refuses the same way; `doctor` reports what it found.
    let root_arg = root.to_str().unwrap();
    let (code, stderr) = run_wrapped(
        &home,
        &[deny, "landlock", "--"],
        &[
            "--allowed-root",
            root_arg,
            "mcp",
            "--enable-shell",
            "--shell-sandbox",
            "strict",
        ],
    );
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("Landlock is not available"), "{stderr}");
    let doctor = Command::new(deny)
        .args(["landlock", "--"])
        .arg(binary("autogpt-shim"))
        .args(["--allowed-root", root_arg, "doctor"])
        .env("HOME", &home)
        .env("AUTOGPT_SHIM_SHELL_SANDBOX", "workspace")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains(
            "[FAIL] shell sandbox  `workspace` cannot be enforced here: Landlock is not available"
        ),
        "{report}"
    );
    assert_eq!(doctor.status.code(), Some(78));
    let doctor = Command::new(binary("autogpt-shim"))
        .args(["--allowed-root", root_arg, "doctor"])
        .env("HOME", &home)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("[INFO] shell sandbox  `off`; Landlock ABI "),
        "{report}"
    );
    assert!(
        report.contains(
            "user namespaces available, seccomp available: workspace and strict can be enforced"
        ),
        "{report}"
    );

    // With the sandbox off, the same restricted kernel starts and serves commands.
    let shim_path = binary("autogpt-shim");
    let args = platform.start_args(&root, "INFO", &["--enable-shell"]);
    let mut wrapped = vec![
        "landlock,seccomp,unshare",
        "--",
        shim_path.to_str().unwrap(),
    ];
    wrapped.extend(args.iter().map(String::as_str));
    let shim = Shim::spawn_binary(
        Path::new(deny),
        &home,
        &wrapped,
        &[("AUTOGPT_SHIM_TOKEN", TOKEN)],
    );
    let (mut conn, _) = platform.session(&["shell", "files"], |_| {}).await;
    let reply = conn
        .call("EXECUTE_COMMAND", "off", json!({"argv": ["true"]}))
        .await;
    assert_eq!(
        reply["payload"]["exit_code"],
        0,
        "{reply}: {}",
        shim.stderr()
    );
    drop(conn);
    drop(shim);
    let _ = std::fs::remove_dir_all(&home);
}

/// The spare launcher (`core/src/machine/sandbox/spare.rs`): after a confined command the
/// connector keeps one launcher started and confined, its child waiting on stdin; the next
/// command is that very process (same pid, same `TMPDIR`), another spare follows, and a stop
/// leaves neither the spare running nor its `TMPDIR` on disk.
#[tokio::test]
async fn the_next_command_adopts_the_spare_launcher_and_a_stop_leaves_none() {
    let mut sandboxed = Sandboxed::start("workspace").await;
    let shim = sandboxed.shim.pid();
    let first = sandboxed.bash("spare-1", "echo $$", json!({})).await;
    assert_eq!(first["exit_code"], 0, "{first}");
    let (spare, spare_tmp) = waiting_spare(shim, None).await;
    let second = sandboxed
        .bash("spare-2", r#"echo "$$ $TMPDIR""#, json!({}))
        .await;
    assert_eq!(second["exit_code"], 0, "{second}");
    assert_eq!(
        second["stdout"].as_str().unwrap().trim(),
        format!("{spare} {}", spare_tmp.display()),
        "the second command did not run in the spare"
    );
    assert!(!spare_tmp.exists(), "the adopted spare's TMPDIR stayed");
    let (next, next_tmp) = waiting_spare(shim, Some(spare)).await;
    assert!(next_tmp.is_dir());
    sandboxed.shim.signal("TERM");
    let (status, stderr) = sandboxed.shim.exit().await;
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        !running(&next.to_string()),
        "the spare {next} outlived the connector"
    );
    assert!(
        !Path::new(&format!("/proc/{next}")).exists(),
        "the spare {next} was not reaped"
    );
    assert!(
        !next_tmp.exists(),
        "the spare's TMPDIR {} stayed",
        next_tmp.display()
    );
}

/// A mount made after the spare launcher started (a disk plugged in, a share mounted) is seen
/// by the next command: the spare copied the mount table before it, so it is not used.
#[tokio::test]
async fn a_mount_made_after_the_spare_started_is_seen_by_the_next_command() {
    if rerun_as_namespace_root(
        "suite::connector_sandbox::a_mount_made_after_the_spare_started_is_seen_by_the_next_command",
        "the spare launcher's mount test mounts a tmpfs",
    ) {
        return;
    }
    let mut sandboxed = Sandboxed::start("workspace").await;
    let shim = sandboxed.shim.pid();
    let first = sandboxed.bash("mount-1", "true", json!({})).await;
    assert_eq!(first["exit_code"], 0, "{first}");
    let (spare, _) = waiting_spare(shim, None).await;
    let disk = Tmpfs::mount(&sandboxed.root.join("plugged"), "1m");
    std::fs::write(disk.path().join("seen.txt"), "on the new disk\n").unwrap();
    let second = sandboxed
        .bash("mount-2", "echo $$; cat plugged/seen.txt", json!({}))
        .await;
    assert_eq!(second["exit_code"], 0, "{second}");
    let out = second["stdout"].as_str().unwrap();
    assert!(out.contains("on the new disk"), "{second}");
    assert_ne!(
        out.lines().next(),
        Some(spare.to_string().as_str()),
        "the spare started before the mount ran the command"
    );
}

/// A connector killed by SIGKILL cannot remove its spare's `TMPDIR`: the next connector with a
/// sandbox removes it as it starts, and leaves a running connector's alone.
#[tokio::test]
async fn a_killed_connectors_tmpdir_goes_when_the_next_starts_and_a_running_ones_stays() {
    // A temporary folder of their own: a connector that another test starts in the meantime
    // sweeps its own temporary folder, and took the orphan before this test could look.
    let shared = Outside(fresh_dir("shim-sandbox-orphans"));
    let env = [("TMPDIR", shared.0.to_str().unwrap())];
    let start = || Sandboxed::start_with("workspace", &env, |_| {});
    let mut killed = start().await;
    let done = killed.bash("killed-1", "true", json!({})).await;
    assert_eq!(done["exit_code"], 0, "{done}");
    let (_, orphan) = waiting_spare(killed.shim.pid(), None).await;
    let mut running = start().await;
    let done = running.bash("running-1", "true", json!({})).await;
    assert_eq!(done["exit_code"], 0, "{done}");
    let (_, kept) = waiting_spare(running.shim.pid(), None).await;
    killed.shim.signal("KILL");
    let _ = killed.shim.exit().await;
    assert!(
        orphan.is_dir(),
        "the killed connector's spare TMPDIR {} is already gone: the test proves nothing",
        orphan.display()
    );
    let _next = start().await;
    assert!(
        !orphan.exists(),
        "the killed connector's TMPDIR {} stayed after the next connector started",
        orphan.display()
    );
    assert!(
        kept.is_dir(),
        "the running connector's spare TMPDIR {} was removed",
        kept.display()
    );
}

/// The spare launcher child of `shim` other than `not`, and its `TMPDIR` (its last argument),
/// once it is there (it starts in the background after a command).
async fn waiting_spare(shim: u32, not: Option<u32>) -> (u32, PathBuf) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let parent = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.split(' ').nth(1))
                .and_then(|ppid| ppid.parse::<u32>().ok());
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            if parent == Some(shim)
                && Some(pid) != not
                && args.get(1..3) == Some(&[&b"__sandbox-exec"[..], &b"spare"[..]][..])
            {
                let tmp = args
                    .get(5)
                    .map(|tmp| String::from_utf8_lossy(tmp).into_owned());
                return (pid, PathBuf::from(tmp.unwrap()));
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no spare launcher came up beside the connector {shim}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The launcher itself fails closed: when a part of the confinement cannot be set up, or its
/// policy is unusable, it exits 125 with one line on stderr and the program never runs.
#[test]
fn the_launcher_fails_closed_with_exit_125_and_runs_nothing() {
    let (home, root) = home_and_root("shim-sandbox-launcher");
    let tmp = home.join("command-tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let marker = root.join("ran");
    let deny = binary("examples/deny-syscalls");
    let shim = binary("autogpt-shim-sandbox");
    let (root_arg, tmp_arg) = (root.to_str().unwrap(), tmp.to_str().unwrap());
    let script = format!("echo ran > {}", marker.display());
    let launch = |wrapper: &[&str], mode: &str, root: &str| {
        let mut command = Command::new(wrapper.first().map_or(shim.as_path(), Path::new));
        if !wrapper.is_empty() {
            command.args(&wrapper[1..]).arg(&shim);
        }
        let output = command
            .args(["__sandbox-exec", "run", mode, root, tmp_arg, root_arg])
            .args(["sh", "/bin/sh", "sh", "-c", &script])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // The spare: the policy on the command line, the command on stdin (`spare::request`).
    let adopt = |wrapper: &[&str], mode: &str, root: &str| {
        let mut command = Command::new(wrapper.first().map_or(shim.as_path(), Path::new));
        if !wrapper.is_empty() {
            command.args(&wrapper[1..]).arg(&shim);
        }
        let mut child = command
            .args(["__sandbox-exec", "spare", mode, root, tmp_arg])
            .current_dir(root_arg)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut request = Vec::new();
        for field in [
            root_arg,
            "sh",
            "/bin/sh",
            "sh",
            "2",
            "-c",
            &script,
            "PATH",
            "/usr/bin:/bin",
        ] {
            request.extend_from_slice(field.as_bytes());
            request.push(0);
        }
        // A launcher that refuses its policy at once has closed its end: nothing to hand.
        let _ = std::io::Write::write_all(&mut child.stdin.take().unwrap(), &request);
        let output = child.wait_with_output().unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let deny = deny.to_str().unwrap();
    let cases: [(&[&str], &str, &str, &str); 5] = [
        (
            &[deny, "unshare", "--"],
            "workspace",
            root_arg,
            "namespaces: unshare: EPERM",
        ),
        (&[deny, "landlock", "--"], "workspace", root_arg, "landlock"),
        (&[deny, "seccomp", "--"], "strict", root_arg, "seccomp"),
        (&[], "workspace", "/", "the allowed root is /"),
        (&[], "lenient", root_arg, "unknown mode"),
    ];
    for ((wrapper, mode, root, named), spare) in cases
        .into_iter()
        .flat_map(|case| [(case, false), (case, true)])
    {
        let (code, stderr) = if spare {
            adopt(wrapper, mode, root)
        } else {
            launch(wrapper, mode, root)
        };
        assert_eq!(code, Some(125), "{wrapper:?} {mode} {root}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with("autogpt-shim-sandbox: the command was not run: "),
            "{stderr}"
        );
        assert!(
            stderr.to_lowercase().contains(&named.to_lowercase()),
            "{named:?} not named: {stderr}"
        );
        assert!(
            !marker.exists(),
            "the program ran under {wrapper:?} (spare: {spare}): {stderr}"
        );
    }
    // The same launcher with nothing denied runs the program, confined; the spare too.
    let (code, stderr) = launch(&[], "workspace", root_arg);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();
    let (code, stderr) = adopt(&[], "workspace", root_arg);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(marker.exists());
    // Started by hand, it says what it is and runs nothing.
    let bare = Command::new(&shim).output().unwrap();
    assert_eq!(bare.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bare.stderr).contains("run autogpt-shim instead"),
        "{bare:?}"
    );
    let _ = std::fs::remove_dir_all(&home);
}

/// The launcher ships beside the connector: a connector without it refuses every sandbox mode
/// (exit 78, one sentence naming the missing file), `mcp` too, and `doctor` says so; with the
/// sandbox off it starts as ever.
#[tokio::test]
async fn a_connector_without_its_launcher_refuses_the_mode_with_exit_78() {
    let (home, root) = home_and_root("shim-sandbox-no-launcher");
    let alone = home.join("bin");
    std::fs::create_dir_all(&alone).unwrap();
    let shim = alone.join("autogpt-shim");
    std::fs::copy(binary("autogpt-shim"), &shim).unwrap();
    let platform = Platform::bind().await;
    let root_arg = root.to_str().unwrap();
    let missing = format!(
        "the sandbox launcher {} is missing",
        alone.join("autogpt-shim-sandbox").display()
    );
    let mut start = platform.start_args(&root, "INFO", &["--enable-shell"]);
    start.extend(["--shell-sandbox".to_owned(), "workspace".to_owned()]);
    let mcp = [
        "--allowed-root",
        root_arg,
        "mcp",
        "--enable-shell",
        "--shell-sandbox",
        "strict",
    ]
    .map(str::to_owned);
    for (args, mode) in [(&start[..], "workspace"), (&mcp[..], "strict")] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = shim_command_with(&shim, &home, &args, &[("AUTOGPT_SHIM_TOKEN", TOKEN)])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        eprintln!("without its launcher: {stderr}");
        assert_eq!(output.status.code(), Some(78), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one sentence: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "autogpt-shim: shell sandbox: `{mode}` cannot be enforced here: {missing} (it ships beside autogpt-shim"
            )),
            "{stderr}"
        );
        assert!(stderr.contains("--shell-sandbox off"), "{stderr}");
        assert_readable(&stderr, "--shell-sandbox off");
    }
    let doctor = Command::new(&shim)
        .args(["--allowed-root", root_arg, "doctor"])
        .env("HOME", &home)
        .env("AUTOGPT_SHIM_SHELL_SANDBOX", "workspace")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains(&format!(
            "[FAIL] shell sandbox  `workspace` cannot be enforced here: {missing}"
        )),
        "{report}"
    );
    assert_eq!(doctor.status.code(), Some(78));

    // With the sandbox off it needs no launcher.
    let args = platform.start_args(&root, "INFO", &["--enable-shell"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let running = Shim::spawn_binary(&shim, &home, &args, &[("AUTOGPT_SHIM_TOKEN", TOKEN)]);
    let (mut conn, _) = platform.session(&["shell", "files"], |_| {}).await;
    let reply = conn
        .call("EXECUTE_COMMAND", "off", json!({"argv": ["true"]}))
        .await;
    assert_eq!(
        reply["payload"]["exit_code"],
        0,
        "{reply}: {}",
        running.stderr()
    );
    drop(conn);
    drop(running);
    let _ = std::fs::remove_dir_all(&home);
}
