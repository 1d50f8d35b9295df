//! Machine control mode through the real `autogpt-shim` binary: folder browsing with its
//! bounds and reference rules, attach/activate/restore/detach with signed root grants, child
//! runtimes on their own data connections jailed to the attached folder, the eight-child cap,
//! the idle reaper, and the control ACK checks.

use std::path::Path;

use e2e::platform::{Conn, Platform, Shim, TOKEN, error_code, fresh_dir, listed, run_shim};
use serde_json::{Value, json};

use super::connector::audit_records;

const MACHINE: &str = "machine-e2e-1";

/// Starts the shim in control mode with the test token and machine id and `env`.
fn spawn_control(home: &Path, platform: &Platform, env: &[(&str, &str)]) -> Shim {
    spawn_control_with(home, platform, &[], env)
}

/// [`spawn_control`] with `extra` arguments after `start`.
fn spawn_control_with(
    home: &Path,
    platform: &Platform,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Shim {
    let args = platform.control_args("INFO", extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut all = vec![
        ("AUTOGPT_SHIM_TOKEN", TOKEN),
        ("AUTOGPT_SHIM_MACHINE_ID", MACHINE),
    ];
    all.extend_from_slice(env);
    Shim::spawn(home, &args, &all)
}

async fn list(conn: &mut Conn, id: &str, payload: Value) -> Value {
    conn.call("DIRECTORY_LIST_REQUEST", id, payload).await
}

fn names(listing: &Value) -> Vec<String> {
    listing["payload"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn browses_attaches_and_a_child_serves_files_jailed_to_the_folder() {
    let home = fresh_dir("shim-control");
    for name in ["Alpha", "beta", "work", "big"] {
        std::fs::create_dir_all(home.join(name)).unwrap();
    }
    for i in 0..210 {
        std::fs::create_dir(home.join(format!("big/d{i:03}"))).unwrap();
    }
    std::fs::write(home.join("file.txt"), "x").unwrap();
    // Creating a link on Windows needs a privilege a test cannot count on.
    #[cfg(unix)]
    std::os::unix::fs::symlink(home.join("beta"), home.join("link")).unwrap();
    std::fs::write(home.join("secret.txt"), "SECRET-OUTSIDE").unwrap();

    let platform = Platform::bind().await;
    let shim = spawn_control(&home, &platform, &[]);
    let (mut control, hello) = platform.control(|_| {}).await;
    assert_eq!(hello["payload"]["allowed_root"], Value::Null);
    let caps = hello["payload"]["capabilities"].as_array().unwrap();
    assert!(caps.contains(&json!("directory_browse")), "{hello}");

    // Execution messages are refused on the control connection even with `files` granted.
    let stat = control
        .call("FILE_STAT", "stat", json!({"path": "file.txt"}))
        .await;
    assert_eq!(error_code(&stat), "FEATURE_NOT_SUPPORTED");

    // Virtual roots: home first, no current, no parent.
    let roots = list(
        &mut control,
        "roots",
        json!({"browse_id": null, "directory_ref": null}),
    )
    .await;
    assert_eq!(roots["payload"]["current"], Value::Null);
    assert_eq!(roots["payload"]["parent_ref"], Value::Null);
    let home_path = home.to_string_lossy().into_owned();
    let home_ref = listed(&roots, &home)["directory_ref"].clone();
    let browse_id = roots["payload"]["browse_id"].clone();
    let expires = roots["payload"]["expires_at"].as_f64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((expires - now - 300.0).abs() < 30.0, "{expires} {now}");

    // Drilling down: only real directories, sorted case-insensitively; no file, no link.
    let listing = list(
        &mut control,
        "home",
        json!({"browse_id": browse_id, "directory_ref": home_ref}),
    )
    .await;
    // `.local` holds the shim's own state in this private home.
    assert_eq!(names(&listing), [".local", "Alpha", "beta", "big", "work"]);
    assert_eq!(listing["payload"]["current"]["path"], home_path);
    assert_eq!(listing["payload"]["truncated"], false);
    assert_eq!(listing["payload"]["next_cursor"], Value::Null);
    for field in ["size", "mtime", "mode"] {
        assert!(listing["payload"]["entries"][0].get(field).is_none());
    }

    // 210 directories: 200 and a cursor, then 10 and none; references disjoint.
    let big_ref = listed(&listing, &home.join("big"))["directory_ref"].clone();
    let first = list(
        &mut control,
        "big1",
        json!({"browse_id": browse_id, "directory_ref": big_ref}),
    )
    .await;
    assert_eq!(first["payload"]["entries"].as_array().unwrap().len(), 200);
    assert_eq!(first["payload"]["truncated"], false);
    assert_eq!(first["payload"]["parent_ref"], home_ref);
    let cursor = first["payload"]["next_cursor"].clone();
    assert!(cursor.is_string(), "{first}");
    let second = list(
        &mut control,
        "big2",
        json!({"browse_id": browse_id, "directory_ref": big_ref, "cursor": cursor}),
    )
    .await;
    assert_eq!(names(&second).len(), 10);
    assert_eq!(second["payload"]["next_cursor"], Value::Null);
    let mut all = names(&first);
    all.extend(names(&second));
    let expected: Vec<String> = (0..210).map(|i| format!("d{i:03}")).collect();
    assert_eq!(all, expected);
    let refs: std::collections::HashSet<&str> = first["payload"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["payload"]["entries"].as_array().unwrap())
        .map(|e| e["directory_ref"].as_str().unwrap())
        .collect();
    assert_eq!(refs.len(), 210);

    // Stale and foreign references: unknown browse, reference of another browse, a cursor
    // for another directory.
    let other = list(
        &mut control,
        "other",
        json!({"browse_id": null, "directory_ref": null}),
    )
    .await;
    let foreign_ref = other["payload"]["entries"][0]["directory_ref"].clone();
    for (id, payload) in [
        (
            "unknown",
            json!({"browse_id": "nope", "directory_ref": home_ref}),
        ),
        (
            "foreign",
            json!({"browse_id": browse_id, "directory_ref": foreign_ref}),
        ),
        (
            "cursor",
            json!({"browse_id": browse_id, "directory_ref": home_ref, "cursor": cursor}),
        ),
        // A malformed pair: half null, half missing, wrong types, empty or too long.
        (
            "half-null",
            json!({"browse_id": browse_id, "directory_ref": null}),
        ),
        (
            "half-null-2",
            json!({"browse_id": null, "directory_ref": home_ref}),
        ),
        ("half-missing", json!({"browse_id": browse_id})),
        (
            "wrong-type",
            json!({"browse_id": 7, "directory_ref": home_ref}),
        ),
        (
            "wrong-type-2",
            json!({"browse_id": browse_id, "directory_ref": [home_ref]}),
        ),
        ("empty", json!({"browse_id": "", "directory_ref": home_ref})),
        (
            "too-long",
            json!({"browse_id": "b".repeat(257), "directory_ref": home_ref}),
        ),
        (
            "cursor-alone",
            json!({"browse_id": null, "directory_ref": null, "cursor": "c"}),
        ),
    ] {
        let reply = list(&mut control, id, payload).await;
        assert_eq!(error_code(&reply), "DIRECTORY_REFERENCE_INVALID", "{id}");
        assert_eq!(reply["id"], id);
    }

    // Attach consumes the browse; revision 1; a v1 grant; global config untouched.
    let work = home.join("work");
    let work_ref = listed(&listing, &work)["directory_ref"].clone();
    let attached = control
        .call(
            "ATTACH_SESSION",
            "attach",
            json!({"session_id": "chat-1", "browse_id": browse_id, "directory_ref": work_ref, "expected_connection_id": null}),
        )
        .await;
    assert_eq!(attached["type"], "SESSION_ATTACHED", "{attached}");
    let payload = &attached["payload"];
    assert_eq!(payload["allowed_root"], work.to_string_lossy().as_ref());
    assert_eq!(payload["revision"], 1);
    let fingerprint = payload["fingerprint"].as_str().unwrap();
    assert_eq!(fingerprint.len(), 64);
    assert!(payload["root_grant"].as_str().unwrap().starts_with("v1."));
    let consumed = list(
        &mut control,
        "consumed",
        json!({"browse_id": browse_id, "directory_ref": home_ref}),
    )
    .await;
    assert_eq!(error_code(&consumed), "DIRECTORY_REFERENCE_INVALID");

    // Activation rules.
    let stale = control
        .call(
            "ACTIVATE_SESSION",
            "act-stale",
            json!({"session_id": "chat-1", "revision": 2}),
        )
        .await;
    assert_eq!(error_code(&stale), "SESSION_REVISION_MISMATCH");
    assert_eq!(stale["payload"]["details"]["current_revision"], 1);
    let unattached = control
        .call(
            "ACTIVATE_SESSION",
            "act-none",
            json!({"session_id": "chat-x", "revision": 1}),
        )
        .await;
    assert_eq!(error_code(&unattached), "SESSION_NOT_ATTACHED");

    let activated = control
        .call(
            "ACTIVATE_SESSION",
            "act",
            json!({"session_id": "chat-1", "revision": 1}),
        )
        .await;
    assert_eq!(activated["type"], "SESSION_ACTIVATED", "{activated}");
    assert_eq!(
        activated["payload"]["allowed_root"],
        work.to_string_lossy().as_ref()
    );
    assert!(activated["payload"].get("root_grant").is_none());

    // The child: its own data connection, jailed to the folder.
    let (mut child, child_hello) = platform.child("chat-1", &["files"]).await;
    assert_eq!(
        child_hello["payload"]["allowed_root"],
        work.to_string_lossy().as_ref()
    );
    assert!(
        !child_hello["payload"]["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("directory_browse"))
    );
    let wrote = child
        .call(
            "FILE_WRITE",
            "w",
            json!({"path": "notes.txt", "content": "hello"}),
        )
        .await;
    assert_eq!(wrote["type"], "ACK", "{wrote}");
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).unwrap(),
        "hello"
    );
    let escape = child
        .call("FILE_READ", "r", json!({"path": "../secret.txt"}))
        .await;
    assert_eq!(error_code(&escape), "PATH_OUTSIDE_ALLOWED_ROOT");
    let browse_on_child = child
        .call(
            "DIRECTORY_LIST_REQUEST",
            "b",
            json!({"browse_id": null, "directory_ref": null}),
        )
        .await;
    assert_eq!(error_code(&browse_on_child), "FEATURE_NOT_SUPPORTED");

    // An active root is immutable.
    let (browse2, ref2) = control.reference(&home, "Alpha").await;
    let again = control
        .call(
            "ATTACH_SESSION",
            "attach-active",
            json!({"session_id": "chat-1", "browse_id": browse2, "directory_ref": ref2}),
        )
        .await;
    assert_eq!(error_code(&again), "SESSION_ALREADY_ACTIVE");

    // Detach ACKs and stops the child; unknown sessions are ACKed too.
    let detached = control
        .call("DETACH_SESSION", "detach", json!({"session_id": "chat-1"}))
        .await;
    assert_eq!(detached["type"], "ACK", "{detached}");
    assert_eq!(child.closed().await, Some(1001));
    let unknown = control
        .call(
            "DETACH_SESSION",
            "detach-unknown",
            json!({"session_id": "never"}),
        )
        .await;
    assert_eq!(unknown["type"], "ACK");
    // After detaching, a new attach starts again at revision 1.
    let reattached = control.attach(&home, "chat-1", "Alpha").await;
    assert_eq!(reattached["revision"], 1);

    // One clean chain; the child's records carry its session; no entry names audited.
    let records = audit_records(&shim);
    let write = records
        .iter()
        .find(|r| r["op"] == "FILE_WRITE")
        .expect("the child's write is audited");
    assert_eq!(write["session_id"], "chat-1");
    let set = records
        .iter()
        .find(|r| r["op"] == "SESSION_ALLOWED_ROOT_SET")
        .unwrap();
    assert_eq!(set["session_id"], "chat-1");
    assert_eq!(set["details"]["revision"], 1);
    let listed: Vec<&Value> = records
        .iter()
        .filter(|r| r["op"] == "DIRECTORY_LIST")
        .collect();
    assert!(listed.len() >= 4);
    for record in &listed {
        let text = record.to_string();
        assert!(!text.contains("d000") && !text.contains("Alpha"), "{text}");
    }
    assert!(records.iter().any(|r| r["op"] == "DETACH_SESSION"));
    assert_eq!(
        records.iter().filter(|r| r["op"] == "SHIM_START").count(),
        1
    );
    drop(shim);
    let (code, out, _) = run_shim(&home, &["audit", "verify"]);
    assert_eq!(code, Some(0), "{out}");
}

#[tokio::test]
async fn grants_restore_durably_and_refuse_tampering_other_bindings_and_replaced_folders() {
    let home = fresh_dir("shim-grant");
    std::fs::create_dir_all(home.join("work")).unwrap();
    std::fs::create_dir_all(home.join("swap")).unwrap();
    let platform = Platform::bind().await;
    let shim = spawn_control(&home, &platform, &[]);
    let (mut control, _) = platform.control(|_| {}).await;

    let attached = control.attach(&home, "chat-g", "work").await;
    let grant = attached["root_grant"].as_str().unwrap().to_owned();

    // A good grant starts the child, with the grant's revision.
    let restored = control
        .call(
            "RESTORE_SESSION",
            "restore",
            json!({"session_id": "chat-g", "root_grant": grant}),
        )
        .await;
    assert_eq!(restored["type"], "SESSION_RESTORED", "{restored}");
    assert_eq!(restored["payload"]["revision"], 1);
    assert_eq!(restored["payload"]["root_grant"], grant.as_str());
    let (mut child, hello) = platform.child("chat-g", &["files"]).await;
    let work = home.join("work");
    assert_eq!(
        hello["payload"]["allowed_root"],
        work.to_string_lossy().as_ref()
    );
    // Restoring the same binding keeps the running child.
    let same = control
        .call(
            "RESTORE_SESSION",
            "restore-same",
            json!({"session_id": "chat-g", "root_grant": grant}),
        )
        .await;
    assert_eq!(same["type"], "SESSION_RESTORED");
    let ping = child.call("PING", "p", json!({})).await;
    assert_eq!(ping["type"], "PONG");
    let detached = control
        .call("DETACH_SESSION", "detach", json!({"session_id": "chat-g"}))
        .await;
    assert_eq!(detached["type"], "ACK");
    assert_eq!(child.closed().await, Some(1001));

    // Tampered signature, another session.
    let mut tampered = grant.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    for (id, session, grant) in [
        ("tampered", "chat-g", tampered.as_str()),
        ("other-session", "chat-other", grant.as_str()),
        ("malformed", "chat-g", "v1.nope"),
    ] {
        let reply = control
            .call(
                "RESTORE_SESSION",
                id,
                json!({"session_id": session, "root_grant": grant}),
            )
            .await;
        assert_eq!(error_code(&reply), "ROOT_GRANT_INVALID", "{id}: {reply}");
    }

    // Directory replaced (rmdir + mkdir under the same name): activation and restore refuse.
    let swap = control.attach(&home, "chat-s", "swap").await;
    let swap_grant = swap["root_grant"].as_str().unwrap().to_owned();
    std::fs::remove_dir(home.join("swap")).unwrap();
    std::fs::create_dir(home.join("swap")).unwrap();
    let activate = control
        .call(
            "ACTIVATE_SESSION",
            "act-swap",
            json!({"session_id": "chat-s", "revision": 1}),
        )
        .await;
    assert_eq!(error_code(&activate), "ROOT_GRANT_INVALID", "{activate}");
    assert!(
        activate["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("changed")
    );
    let restore = control
        .call(
            "RESTORE_SESSION",
            "restore-swap",
            json!({"session_id": "chat-s", "root_grant": swap_grant}),
        )
        .await;
    assert_eq!(error_code(&restore), "ROOT_GRANT_INVALID");
    // No child dialled for the refused session.
    assert!(
        !platform
            .dials_within(std::time::Duration::from_millis(500))
            .await
    );
    drop(control);
    drop(shim);

    // Grants are durable: the same machine restores after a restart; another machine id
    // refuses the same grant.
    let shim = spawn_control(&home, &platform, &[]);
    let (mut control, _) = platform.control(|_| {}).await;
    let restored = control
        .call(
            "RESTORE_SESSION",
            "restart",
            json!({"session_id": "chat-g", "root_grant": grant}),
        )
        .await;
    assert_eq!(restored["type"], "SESSION_RESTORED", "{restored}");
    let (_child, _) = platform.child("chat-g", &["files"]).await;
    drop(control);
    drop(shim);
    let _other = spawn_control(
        &home,
        &platform,
        &[("AUTOGPT_SHIM_MACHINE_ID", "another-machine")],
    );
    let (mut control, _) = platform.control(|_| {}).await;
    let foreign = control
        .call(
            "RESTORE_SESSION",
            "foreign",
            json!({"session_id": "chat-g", "root_grant": grant}),
        )
        .await;
    assert_eq!(error_code(&foreign), "ROOT_GRANT_INVALID");
    assert!(
        foreign["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("machine")
    );
}

#[tokio::test]
async fn references_die_on_reconnect_and_the_ninth_child_is_refused() {
    let home = fresh_dir("shim-cap");
    for i in 0..9 {
        std::fs::create_dir_all(home.join(format!("chat{i}"))).unwrap();
    }
    let platform = Platform::bind().await;
    let _shim = spawn_control(&home, &platform, &[]);
    let (mut control, _) = platform.control(|_| {}).await;

    let (browse_id, directory_ref) = control.reference(&home, "chat0").await;
    control.close(1011).await;
    let (mut control, _) = platform.control(|_| {}).await;
    let stale = list(
        &mut control,
        "stale",
        json!({"browse_id": browse_id, "directory_ref": directory_ref}),
    )
    .await;
    assert_eq!(error_code(&stale), "DIRECTORY_REFERENCE_INVALID");

    let mut children = Vec::new();
    for i in 0..8 {
        let (session, name) = (format!("s-{i}"), format!("chat{i}"));
        children.push(
            control
                .activate(&platform, &home, &session, &name, &["files"])
                .await,
        );
    }
    control.attach(&home, "s-8", "chat8").await;
    let ninth = control
        .call(
            "ACTIVATE_SESSION",
            "act-8",
            json!({"session_id": "s-8", "revision": 1}),
        )
        .await;
    assert_eq!(error_code(&ninth), "SHIM_OVERLOADED");
    assert!(
        ninth["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("session limit reached"),
        "{ninth}"
    );
    assert_eq!(ninth["payload"]["details"]["max_live_sessions"], 8);
    // Detaching one makes room.
    control
        .call("DETACH_SESSION", "detach-0", json!({"session_id": "s-0"}))
        .await;
    let reply = control
        .call(
            "ACTIVATE_SESSION",
            "act-8b",
            json!({"session_id": "s-8", "revision": 1}),
        )
        .await;
    assert_eq!(reply["type"], "SESSION_ACTIVATED", "{reply}");
    let (_ninth, _) = platform.child("s-8", &["files"]).await;
}

#[tokio::test]
async fn idle_children_are_stopped_and_their_binding_kept_for_restore() {
    let home = fresh_dir("shim-idle");
    std::fs::create_dir_all(home.join("work")).unwrap();
    let platform = Platform::bind().await;
    let shim = spawn_control(
        &home,
        &platform,
        &[("AUTOGPT_SHIM_IDLE_SESSION_TIMEOUT", "1")],
    );
    let (mut control, _) = platform.control(|_| {}).await;
    let attached = control.attach(&home, "chat-i", "work").await;
    let reply = control
        .call(
            "ACTIVATE_SESSION",
            "act",
            json!({"session_id": "chat-i", "revision": 1}),
        )
        .await;
    assert_eq!(reply["type"], "SESSION_ACTIVATED");
    let (mut child, _) = platform.child("chat-i", &["files"]).await;
    let started = std::time::Instant::now();
    // Keepalives do not count as activity.
    let pong = child.call("PING", "keepalive", json!({})).await;
    assert_eq!(pong["type"], "PONG");
    assert_eq!(child.closed().await, Some(1001));
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));
    let records = audit_records(&shim);
    let idle = records
        .iter()
        .find(|r| r["op"] == "IDLE_SESSION_DETACH")
        .expect("IDLE_SESSION_DETACH audited");
    assert_eq!(idle["session_id"], "chat-i");
    assert!(idle["details"]["idle_seconds"].as_f64().unwrap() >= 1.0);

    // The binding stays: RESTORE starts the child again.
    let restored = control
        .call(
            "RESTORE_SESSION",
            "restore",
            json!({"session_id": "chat-i", "root_grant": attached["root_grant"]}),
        )
        .await;
    assert_eq!(restored["type"], "SESSION_RESTORED", "{restored}");
    let (_child, _) = platform.child("chat-i", &["files"]).await;
}

#[tokio::test]
async fn a_control_ack_without_the_browse_grant_or_connection_id_stops_the_daemon() {
    for (tag, edit) in [
        ("grant", json!({"granted_capabilities": ["files"]})),
        ("connection", json!({"connection_id": null})),
        ("version", json!({"protocol_version": "1.0"})),
    ] {
        let home = fresh_dir(&format!("shim-ack-{tag}"));
        let platform = Platform::bind().await;
        let mut shim = spawn_control(&home, &platform, &[]);
        let (mut control, _) = platform
            .control(|ack| {
                for (key, value) in edit.as_object().unwrap() {
                    ack["payload"][key] = value.clone();
                }
            })
            .await;
        assert_eq!(control.closed().await, Some(4426), "{tag}");
        let (status, stderr) = shim.exit().await;
        assert_eq!(status.code(), Some(78), "{tag}: {stderr}");
        assert!(stderr.contains("directory_browse"), "{tag}: {stderr}");
        assert!(!stderr.contains(TOKEN));
        assert!(
            !platform
                .dials_within(std::time::Duration::from_millis(300))
                .await
        );
    }
}

/// The most commands running at once, from the `start NS` / `end NS` lines they logged.
fn max_overlap(log: &str) -> usize {
    let mut events: Vec<(u128, i32)> = log
        .lines()
        .map(|line| {
            let (kind, at) = line.split_once(' ').unwrap();
            let delta = if kind == "start" { 1 } else { -1 };
            (at.trim().parse().unwrap(), delta)
        })
        .collect();
    // At the same instant an end comes before a start.
    events.sort_unstable();
    let (mut running, mut most) = (0_i32, 0_i32);
    for (_, delta) in events {
        running += delta;
        most = most.max(running);
    }
    usize::try_from(most).unwrap()
}

#[tokio::test]
async fn children_share_a_machine_work_gate_sized_by_the_control_ack_and_status_counts_them() {
    const GATE: usize = 2;
    const CHILDREN: usize = 3;
    const PER_CHILD: usize = 2;
    let home = fresh_dir("shim-gate");
    for i in 0..CHILDREN {
        std::fs::create_dir_all(home.join(format!("chat{i}"))).unwrap();
    }
    let log = home.join("gate.log");
    let platform = Platform::bind().await;
    let _shim = spawn_control_with(&home, &platform, &["--enable-shell"], &[]);
    let (mut control, _) = platform
        .control(|ack| ack["payload"]["max_concurrent"] = json!(GATE))
        .await;

    // The status file: control mode has no root of its own, and no session is live yet.
    let (code, out, _) = run_shim(&home, &["status"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(", machine control mode\n"), "{out}");
    assert!(out.contains("allowed root: none"), "{out}");
    // The configuration is its own section, after what runs now.
    let (_, configuration) = out.split_once("\nconfigured:").unwrap();
    assert!(
        configuration.contains("mode: machine control mode"),
        "{out}"
    );
    assert!(configuration.contains("its daemon: running (pid "), "{out}");
    assert!(!out.contains("allowed root: /"), "{out}");
    assert!(out.contains("live sessions: 0"), "{out}");

    let mut children = Vec::new();
    for i in 0..CHILDREN {
        let (session, name) = (format!("g-{i}"), format!("chat{i}"));
        let grants = ["files", "shell"];
        children.push(
            control
                .activate(&platform, &home, &session, &name, &grants)
                .await,
        );
    }
    let (_, out, _) = run_shim(&home, &["status"]);
    assert!(out.contains(&format!("live sessions: {CHILDREN}")), "{out}");

    // Each child pipelines commands within its own max_concurrent (4); across children only
    // GATE may run at once, and the rest wait instead of being refused.
    let command = format!(
        "echo start $(date +%s%N) >> '{0}'; sleep 0.4; echo end $(date +%s%N) >> '{0}'",
        log.display()
    );
    let started = std::time::Instant::now();
    for (i, child) in children.iter_mut().enumerate() {
        for j in 0..PER_CHILD {
            child
                .request(
                    "EXECUTE_COMMAND",
                    &format!("c{i}-{j}"),
                    json!({"command": command, "timeout_seconds": 20}),
                )
                .await;
        }
    }
    for child in &mut children {
        for _ in 0..PER_CHILD {
            let reply = child.recv().await;
            assert_eq!(reply["type"], "COMMAND_RESULT", "{reply}");
            assert_eq!(reply["payload"]["exit_code"], 0, "{reply}");
        }
    }
    let total = CHILDREN * PER_CHILD;
    // ceil(6 / 2) rounds of 0.4 s at least.
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(400 * (total / GATE) as u64 - 50),
        "{:?}",
        started.elapsed()
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().count(), 2 * total, "{text}");
    assert_eq!(max_overlap(&text), GATE, "{text}");

    control
        .call("DETACH_SESSION", "detach", json!({"session_id": "g-0"}))
        .await;
    let (_, out, _) = run_shim(&home, &["status"]);
    assert!(
        out.contains(&format!("live sessions: {}", CHILDREN - 1)),
        "{out}"
    );
}
