//! EXECUTE_COMMAND through the real `autogpt-shim` binary: the environment the child sees,
//! output budget, timeout with the process tree killed, and admission with SHIM_OVERLOADED,
//! `pending_capacity` and the STATUS that follows saturation.

use e2e::platform::{Platform, TOKEN, error_code};
use serde_json::json;

use super::connector::{audit_records, home_and_root, spawn_env};
use super::support::running;

const DAEMON_SECRET: &str = "daemon-only-secret-9d2e";

#[tokio::test]
async fn the_child_gets_the_safe_environment_and_never_the_daemons_secrets() {
    let (home, root) = home_and_root("shim-shell-env");
    std::fs::create_dir(root.join("work")).unwrap();
    let platform = Platform::bind().await;
    let _shim = spawn_env(
        &home,
        &platform,
        &root,
        &["--enable-shell"],
        &[("SHIM_TEST_SECRET", DAEMON_SECRET), ("LC_ALL", "C")],
    );
    let (mut conn, hello) = platform.session(&["shell", "files"], |_| {}).await;
    assert_eq!(hello["payload"]["capabilities"], json!(["shell", "files"]));

    let reply = conn
        .call(
            "EXECUTE_COMMAND",
            "env",
            json!({"argv": ["env"], "cwd": "work", "env": {"FROM_WIRE": "wire value"}}),
        )
        .await;
    assert_eq!(reply["type"], "COMMAND_RESULT", "{reply}");
    let stdout = reply["payload"]["stdout"].as_str().unwrap();
    assert!(!stdout.contains(TOKEN), "the token reached the child");
    assert!(
        !stdout.contains(DAEMON_SECRET),
        "a daemon variable reached the child"
    );
    assert!(!stdout.contains("AUTOGPT_SHIM"), "{stdout}");
    assert!(stdout.contains("FROM_WIRE=wire value"), "{stdout}");
    assert!(
        stdout.contains("LC_ALL=C"),
        "LC_* is part of the baseline: {stdout}"
    );
    assert!(
        stdout.contains(&format!("HOME={}", home.display())),
        "{stdout}"
    );
    assert!(stdout.contains("PATH="), "{stdout}");

    // stdin is closed: `cat` ends at once; a shell command with a pipe and the cwd.
    let cat = conn
        .call("EXECUTE_COMMAND", "cat", json!({"argv": ["cat"]}))
        .await;
    assert_eq!(cat["payload"]["stdout"], "", "{cat}");
    assert_eq!(cat["payload"]["exit_code"], 0);
    let piped = conn
        .call(
            "EXECUTE_COMMAND",
            "pipe",
            json!({"command": "printf 'b\\na\\n' | sort; pwd", "shell": "sh", "cwd": "work"}),
        )
        .await;
    assert_eq!(
        piped["payload"]["stdout"],
        format!("a\nb\n{}\n", root.join("work").display())
    );
    let outside = conn
        .call(
            "EXECUTE_COMMAND",
            "out",
            json!({"argv": ["true"], "cwd": "/tmp"}),
        )
        .await;
    assert_eq!(error_code(&outside), "PATH_OUTSIDE_ALLOWED_ROOT");
}

#[tokio::test]
async fn output_beyond_the_budget_is_cut_with_the_marker_and_timeouts_kill_the_tree() {
    let (home, root) = home_and_root("shim-shell-budget");
    let platform = Platform::bind().await;
    let shim = spawn_env(&home, &platform, &root, &["--enable-shell"], &[]);
    // The ACK's file size limit is the commands' output budget.
    let (mut conn, _) = platform
        .session(&["shell", "files"], |ack| {
            ack["payload"]["max_file_size_bytes"] = json!(1000);
            ack["payload"]["command_timeout_seconds"] = json!(1);
        })
        .await;
    let exact = conn
        .call(
            "EXECUTE_COMMAND",
            "exact",
            json!({"command": "head -c 1000 /dev/zero | tr '\\0' x"}),
        )
        .await;
    assert_eq!(exact["payload"]["output_truncated"], false, "{exact}");
    assert_eq!(exact["payload"]["stdout"].as_str().unwrap().len(), 1000);
    let over = conn
        .call(
            "EXECUTE_COMMAND",
            "over",
            json!({"command": "head -c 5000000 /dev/zero | tr '\\0' x; echo done >&2"}),
        )
        .await;
    let payload = &over["payload"];
    assert_eq!(payload["output_truncated"], true, "{over}");
    let stdout = payload["stdout"].as_str().unwrap();
    let stderr = payload["stderr"].as_str().unwrap();
    assert!(
        stderr.ends_with("\n[command output truncated]\n"),
        "{stderr}"
    );
    assert!(stdout.len() + stderr.len() <= 1000);

    // A tree that ignores SIGTERM is killed after the grace; the grandchild too.
    let marker = root.join("grandchild.pid");
    let slow = conn
        .call(
            "EXECUTE_COMMAND",
            "slow",
            json!({"command": format!(
                "trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > {}; sleep 60' & sleep 60",
                marker.display()
            ), "timeout_seconds": 30}),
        )
        .await;
    assert_eq!(slow["payload"]["timed_out"], true, "{slow}");
    assert_eq!(slow["payload"]["exit_code"], -1);
    let pid = std::fs::read_to_string(&marker).unwrap();
    assert!(!running(pid.trim()), "the grandchild survived the timeout");
    drop(conn);
    let records = audit_records(&shim);
    let timed_out = records.iter().find(|r| r["request_id"] == "slow").unwrap();
    assert_eq!(timed_out["result"]["error_code"], "COMMAND_TIMEOUT");
}

#[tokio::test]
async fn saturation_refuses_with_shim_overloaded_then_status_follows_the_freeing_reply() {
    let (home, root) = home_and_root("shim-overload");
    let platform = Platform::bind().await;
    let _shim = spawn_env(&home, &platform, &root, &["--enable-shell"], &[]);
    let (mut conn, _) = platform
        .session(&["shell", "files"], |ack| {
            ack["payload"]["max_concurrent"] = json!(2);
        })
        .await;
    conn.request("EXECUTE_COMMAND", "a", json!({"argv": ["sleep", "1"]}))
        .await;
    conn.request("EXECUTE_COMMAND", "b", json!({"argv": ["sleep", "2"]}))
        .await;
    let refused = conn
        .call("EXECUTE_COMMAND", "c", json!({"argv": ["true"]}))
        .await;
    assert_eq!(error_code(&refused), "SHIM_OVERLOADED");
    assert_eq!(refused["pending_capacity"], 0, "{refused}");
    assert_eq!(refused["payload"]["details"]["max_concurrent"], 2);
    // PING is answered inline even at saturation.
    assert_eq!(conn.call("PING", "p", json!({})).await["type"], "PONG");

    // The first command's reply frees a slot and is followed at once by STATUS.
    let first = conn.next().await.unwrap();
    assert_eq!(first["id"], "a", "{first}");
    assert_eq!(first["pending_capacity"], 1);
    let status = conn.next().await.unwrap();
    assert_eq!(status["type"], "STATUS", "{status}");
    assert_eq!(status["payload"]["in_flight"], 1);
    assert_eq!(status["payload"]["max_concurrent"], 2);
    assert!(status["payload"]["audit_log_bytes"].as_u64().unwrap() > 0);
    let second = conn.recv().await;
    assert_eq!(second["id"], "b");
    assert_eq!(second["pending_capacity"], 2);
}

#[tokio::test]
async fn a_dropped_connection_kills_the_running_command_tree() {
    let (home, root) = home_and_root("shim-shell-drop");
    let platform = Platform::bind().await;
    let _shim = spawn_env(&home, &platform, &root, &["--enable-shell"], &[]);
    let (mut conn, _) = platform.session(&["shell", "files"], |_| {}).await;
    let marker = root.join("tree.pid");
    conn.request(
        "EXECUTE_COMMAND",
        "long",
        json!({"command": format!(
            "sh -c 'echo $$ > {}; sleep 60' & wait",
            marker.display()
        )}),
    )
    .await;
    let deadline = std::time::Instant::now() + e2e::platform::WAIT;
    while !marker.exists() || std::fs::read_to_string(&marker).unwrap().trim().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let pid = std::fs::read_to_string(&marker).unwrap().trim().to_owned();
    // A transient close: the shim reconnects, but the work of the old connection is gone.
    conn.close(1011).await;
    let (mut conn, _) = platform.session(&["shell", "files"], |_| {}).await;
    assert_eq!(conn.call("PING", "p", json!({})).await["type"], "PONG");
    let deadline = std::time::Instant::now() + e2e::platform::WAIT;
    while running(&pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the command tree outlived its connection"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
