//! The request loop on a data connection: keepalive, refusals, FILE_* through the loop,
//! admission, the machine gate, STATUS, revocation and the audit records.

use super::*;

#[tokio::test]
async fn ping_gets_pong_with_the_negotiated_version() {
    let mut platform = start(config(), Hooks::default());
    platform
        .handshake(|ack| ack["payload"]["protocol_version"] = json!("1.0"))
        .await;
    let pong = platform.call("PING", "ping-7", &json!({})).await;
    assert_eq!(pong["type"], "PONG");
    assert_eq!(pong["version"], "1.0");
    assert_eq!(pong["payload"], json!({}));
    assert!(pong.get("pending_capacity").is_none(), "{pong}");
}

#[tokio::test]
async fn unknown_type_gets_error_and_the_session_goes_on() {
    let mut platform = established().await;
    let reply = platform
        .call("TELEPORT_REQUEST", "u1", &json!({"to": "mars"}))
        .await;
    assert_eq!(error_code(&reply), "FEATURE_NOT_SUPPORTED");
    assert_eq!(reply["pending_capacity"], 4);
    platform.ping("p1").await;
    assert_eq!(platform.end().await, SessionEnd::TransportEnded);
}

#[tokio::test]
async fn malformed_frames_are_answered_only_when_they_have_an_id() {
    let mut platform = established().await;
    platform.send(Frame::Text(
        r#"{"type":"FILE_READ","id":"m1","ts":"yesterday"}"#.to_owned(),
    ));
    let reply = platform.recv_json().await;
    assert_eq!(reply["id"], "m1");
    assert_eq!(error_code(&reply), "INTERNAL_ERROR");
    // An invalid payload with an id is answered too.
    let reply = platform
        .call("FILE_READ", "m2", &json!({"nopath": 1}))
        .await;
    assert_eq!(error_code(&reply), "INTERNAL_ERROR");

    for silent in [
        "not json at all",
        "[1, 2]",
        r#"{"type":"FILE_READ","ts":1.0,"payload":{"path":"a"}}"#,
        r#"{"type":"PING","id":"old","ts":1.0,"version":"2.0","payload":{}}"#,
        r#"{"type":"ERROR","id":"e1","ts":1.0,"payload":{"code":"X","message":"m"}}"#,
        r#"{"type":"FILE_CONTENTS","id":"c2","ts":1.0,"payload":{}}"#,
        r#"{"type":"FILE_CONTENTS","id":"c1","ts":1.0,"payload":{"content":"","encoding":"utf-8","size_bytes":0,"truncated":false}}"#,
    ] {
        platform.send(Frame::Text(silent.to_owned()));
    }
    platform.ping("p1").await;
}

#[tokio::test]
async fn ungranted_capabilities_are_refused_before_any_work() {
    let mut platform = start(config(), Hooks::default());
    platform
        .handshake(|ack| ack["payload"]["granted_capabilities"] = json!([]))
        .await;
    let cases = [
        (
            "FILE_WRITE",
            json!({"path": "x.txt", "content": "x"}),
            "files",
        ),
        ("EXECUTE_COMMAND", json!({"argv": ["ls"]}), "shell"),
        ("SCREENSHOT_REQUEST", json!({}), "computer_use"),
        (
            "LOCAL_LLM_COMPLETION",
            json!({"model": "m", "messages": []}),
            "local_llm",
        ),
        ("START_RECORDING", json!({}), "recording"),
    ];
    for (n, (kind, payload, capability)) in cases.into_iter().enumerate() {
        let id = format!("c{n}");
        let reply = platform.call(kind, &id, &payload).await;
        assert_eq!(error_code(&reply), "CAPABILITY_NOT_GRANTED", "{kind}");
        assert_eq!(
            reply["payload"]["details"],
            json!({"required_capability": capability, "granted_capabilities": []}),
            "{kind}"
        );
        assert_eq!(reply["pending_capacity"], 4);
    }
    assert!(!platform.root().join("x.txt").exists());
    // Control messages belong to the control connection, whatever was granted.
    let browse = platform
        .call("DIRECTORY_LIST_REQUEST", "browse", &json!({}))
        .await;
    assert_eq!(error_code(&browse), "FEATURE_NOT_SUPPORTED");
    // A malformed request is refused for its connection and grant first: its payload's own
    // code (here DIRECTORY_REFERENCE_INVALID, FEATURE_NOT_SUPPORTED) is only for a caller
    // allowed to send it.
    let half = platform
        .call(
            "DIRECTORY_LIST_REQUEST",
            "half",
            &json!({"browse_id": "b", "directory_ref": null}),
        )
        .await;
    assert_eq!(error_code(&half), "FEATURE_NOT_SUPPORTED");
    let screenshot = platform
        .call("SCREENSHOT_REQUEST", "shot", &json!({"format": "webp"}))
        .await;
    assert_eq!(error_code(&screenshot), "CAPABILITY_NOT_GRANTED");
    assert_eq!(
        screenshot["payload"]["details"],
        json!({"required_capability": "computer_use", "granted_capabilities": []})
    );
}

#[tokio::test]
async fn file_write_then_read_round_trip() {
    let mut platform = established().await;
    let text = "h\u{e9}llo\r\nworld\n";
    let write = json!({"path": "notes/a.txt", "content": text, "create_parents": true});
    let ack = platform.call("FILE_WRITE", "w1", &write).await;
    assert_eq!(ack["type"], "ACK", "{ack}");
    assert_eq!(ack["payload"], json!({"ok": true}));
    assert_eq!(ack["pending_capacity"], 4);
    assert_eq!(
        std::fs::read_to_string(platform.root().join("notes/a.txt")).unwrap(),
        text
    );

    let read = platform
        .call("FILE_READ", "r1", &json!({"path": "notes/a.txt"}))
        .await;
    assert_eq!(read["type"], "FILE_CONTENTS", "{read}");
    assert_eq!(read["pending_capacity"], 4);
    assert_eq!(
        read["payload"],
        json!({"content": text, "encoding": "utf-8", "size_bytes": text.len(), "truncated": false})
    );

    // format bytes alone selects base64, and an absolute path under the root works.
    let absolute = platform.root().join("notes/a.txt");
    let read = platform
        .call(
            "FILE_READ",
            "r2",
            &json!({"path": absolute.to_string_lossy(), "format": "bytes", "offset": 1, "length": 2}),
        )
        .await;
    assert_eq!(
        read["payload"],
        json!({"content": "w6k=", "encoding": "base64", "size_bytes": 2, "truncated": true})
    );

    let binary = json!({"path": "b.bin", "content": "AAEC/w==", "encoding": "base64"});
    assert_eq!(
        platform.call("FILE_WRITE", "w2", &binary).await["type"],
        "ACK"
    );
    assert_eq!(
        std::fs::read(platform.root().join("b.bin")).unwrap(),
        [0, 1, 2, 255]
    );
    let bad = json!({"path": "c.bin", "content": "***", "encoding": "base64"});
    let reply = platform.call("FILE_WRITE", "w3", &bad).await;
    assert_eq!(error_code(&reply), "INTERNAL_ERROR");
    assert!(
        !reply["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("***")
    );
    // No STATUS came between any of these replies, because the loop was never saturated.
    platform.ping("p1").await;
}

#[tokio::test]
async fn stat_list_move_and_delete_through_the_loop() {
    let mut platform = established().await;
    let root = platform.root();
    std::fs::write(root.join("data.csv"), "a,b\n").unwrap();
    std::fs::write(root.join(".hidden"), "h").unwrap();

    let stat = platform
        .call("FILE_STAT", "s1", &json!({"path": "data.csv"}))
        .await;
    assert_eq!(stat["type"], "FILE_STAT_RESPONSE", "{stat}");
    let payload = &stat["payload"];
    assert_eq!(payload["exists"], true);
    assert_eq!(payload["is_file"], true);
    assert_eq!(payload["is_dir"], false);
    assert_eq!(payload["size_bytes"], 4);
    assert_eq!(payload["mime_type"], "text/csv");
    assert_eq!(
        payload["path"],
        root.join("data.csv").to_string_lossy().as_ref()
    );

    let list = platform
        .call("FILE_LIST", "l1", &json!({"path": "."}))
        .await;
    assert_eq!(list["type"], "FILE_LIST_RESPONSE", "{list}");
    assert_eq!(list["payload"]["truncated"], false);
    let entries = list["payload"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "hidden entries are skipped: {list}");
    assert_eq!(entries[0]["name"], "data.csv");
    assert_eq!(entries[0]["is_file"], true);
    assert_eq!(
        entries[0]["path"],
        root.join("data.csv").to_string_lossy().as_ref()
    );

    let mv = json!({"src": "data.csv", "dst": "moved.csv"});
    assert_eq!(platform.call("FILE_MOVE", "m1", &mv).await["type"], "ACK");
    let again = platform.call("FILE_MOVE", "m2", &mv).await;
    assert_eq!(error_code(&again), "PATH_NOT_FOUND");

    std::fs::write(root.join("other.csv"), "x").unwrap();
    let clash = json!({"src": "other.csv", "dst": "moved.csv"});
    assert_eq!(
        error_code(&platform.call("FILE_MOVE", "m3", &clash).await),
        "PATH_EXISTS"
    );

    let gone = platform
        .call("FILE_STAT", "s2", &json!({"path": "data.csv"}))
        .await;
    assert_eq!(gone["payload"]["exists"], false);
    assert!(gone["payload"]["is_file"].is_null());

    let delete = json!({"path": "moved.csv"});
    assert_eq!(
        platform.call("FILE_DELETE", "d1", &delete).await["type"],
        "ACK"
    );
    assert!(!root.join("moved.csv").exists());
    assert_eq!(
        error_code(&platform.call("FILE_DELETE", "d2", &delete).await),
        "PATH_NOT_FOUND"
    );
    let missing_ok = json!({"path": "moved.csv", "missing_ok": true});
    assert_eq!(
        platform.call("FILE_DELETE", "d3", &missing_ok).await["type"],
        "ACK"
    );
}

#[tokio::test]
async fn jail_escapes_are_refused_without_leaking_content() {
    let mut platform = established().await;
    let secret = platform.dir.outside().join("secret.txt");
    std::fs::write(&secret, "top-secret-content").unwrap();
    // Only Unix adds a link case below; elsewhere the list stays as written.
    #[cfg_attr(not(unix), allow(unused_mut, clippy::useless_vec))]
    let mut paths = vec![
        "../secret.txt".to_owned(),
        secret.to_string_lossy().into_owned(),
    ];
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&secret, platform.root().join("link")).unwrap();
        paths.push("link".to_owned());
    }
    for (n, path) in paths.iter().enumerate() {
        let reply = platform
            .call("FILE_READ", &format!("r{n}"), &json!({"path": path}))
            .await;
        assert_eq!(error_code(&reply), "PATH_OUTSIDE_ALLOWED_ROOT", "{path}");
        assert!(!reply.to_string().contains("top-secret"), "{reply}");
    }
    let write = json!({"path": "../escape.txt", "content": "x"});
    let reply = platform.call("FILE_WRITE", "w1", &write).await;
    assert_eq!(error_code(&reply), "PATH_OUTSIDE_ALLOWED_ROOT");
    assert!(!platform.dir.outside().join("escape.txt").exists());
}

#[tokio::test]
async fn over_the_cap_is_refused_and_the_freeing_reply_is_followed_by_status() {
    let mut local = config();
    local.max_concurrent = 1;
    let gate = Arc::new(Semaphore::new(0));
    let mut platform = start(
        local,
        Hooks {
            request_gate: Some(Arc::clone(&gate)),
        },
    );
    platform.handshake(|_| {}).await;
    std::fs::write(platform.root().join("a.txt"), "a").unwrap();

    platform.request("FILE_LIST", "slow", &json!({"path": "."}));
    let refused = platform
        .call("FILE_STAT", "next", &json!({"path": "a.txt"}))
        .await;
    assert_eq!(error_code(&refused), "SHIM_OVERLOADED");
    assert_eq!(refused["pending_capacity"], 0);
    assert_eq!(
        refused["payload"]["message"],
        "The local executor is at its concurrent request limit."
    );
    assert_eq!(refused["payload"]["details"], json!({"max_concurrent": 1}));
    // PING is not counted, so it is still answered at the cap.
    platform.ping("p1").await;

    gate.add_permits(1);
    let reply = platform.recv_json().await;
    assert_eq!(reply["id"], "slow");
    assert_eq!(reply["type"], "FILE_LIST_RESPONSE");
    assert_eq!(reply["pending_capacity"], 1);
    let status = platform.recv_json().await;
    assert_eq!(status["type"], "STATUS", "{status}");
    assert_eq!(status["pending_capacity"], 1);
    assert_ne!(status["id"], "slow");
    let payload = &status["payload"];
    assert_eq!(payload["in_flight"], 0);
    assert_eq!(payload["max_concurrent"], 1);
    assert_eq!(payload["queue_depth"], 0);
    assert_eq!(payload["audit_log_bytes"], 0);
    assert!(payload["uptime_seconds"].as_f64().unwrap() >= 0.0);

    // The slot is free again.
    gate.add_permits(1);
    let stat = platform
        .call("FILE_STAT", "again", &json!({"path": "a.txt"}))
        .await;
    assert_eq!(stat["type"], "FILE_STAT_RESPONSE");
}

#[tokio::test]
async fn a_childs_requests_wait_on_the_machine_gate_and_status_shows_them_queued() {
    let mut local = config();
    local.status_interval = Duration::from_millis(20);
    let gate = Arc::new(Semaphore::new(0));
    let work = MachineWork::new(NonZeroU32::new(1).unwrap());
    let mut platform = start_host(
        local,
        Hooks {
            request_gate: Some(Arc::clone(&gate)),
        },
        None,
        |mut host| {
            host.role = Role::Child {
                activity: Activity::default(),
                work: Some(work),
            };
            host
        },
    );
    platform.handshake(|_| {}).await;
    // One request holds the machine's only permit (then waits on the test gate); the
    // second is admitted and waits for the permit instead of being refused.
    platform.request("FILE_LIST", "first", &json!({"path": "."}));
    platform.request("FILE_LIST", "second", &json!({"path": "."}));
    let status = loop {
        let frame = platform.recv_json().await;
        assert_eq!(frame["type"], "STATUS", "nothing is answered yet: {frame}");
        if frame["payload"]["queue_depth"] == 1 {
            break frame;
        }
    };
    assert_eq!(status["payload"]["in_flight"], 1, "{status}");
    assert_eq!(status["pending_capacity"], 2, "{status}");
    gate.add_permits(2);
    let mut answered = Vec::new();
    while answered.len() < 2 {
        let frame = platform.recv_json().await;
        if frame["type"] != "STATUS" {
            assert_eq!(frame["type"], "FILE_LIST_RESPONSE", "{frame}");
            answered.push(frame["id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(answered, ["first", "second"]);
}

#[tokio::test]
async fn status_without_saturation_only_comes_from_the_timer() {
    let mut local = config();
    local.status_interval = Duration::from_millis(20);
    let mut platform = start(local, Hooks::default());
    platform.handshake(|_| {}).await;
    let status = platform.recv_json().await;
    assert_eq!(status["type"], "STATUS", "{status}");
    assert_eq!(status["pending_capacity"], 4);
    assert_eq!(status["payload"]["in_flight"], 0);
    assert_eq!(status["payload"]["max_concurrent"], 4);
    assert!(status["payload"]["uptime_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(status["version"], "1.1");
}

#[tokio::test]
async fn session_revoked_closes_4428_and_sends_nothing_else() {
    let gate = Arc::new(Semaphore::new(0));
    let mut platform = start(
        config(),
        Hooks {
            request_gate: Some(Arc::clone(&gate)),
        },
    );
    platform.handshake(|_| {}).await;
    let write = json!({"path": "late.txt", "content": "x"});
    platform.request("FILE_WRITE", "w1", &write);
    platform.request(
        "SESSION_REVOKED",
        "rev",
        &json!({"reason": "another_shim_connected", "new_shim_machine_id": "m2"}),
    );
    assert_eq!(
        platform.recv_close().await,
        (4428, "session_revoked".to_owned())
    );
    let end = platform.ended().await;
    let SessionEnd::Revoked(payload) = &end else {
        panic!("{end:?}");
    };
    assert_eq!(payload.new_shim_machine_id.as_deref(), Some("m2"));
    assert!(!end.may_reconnect());
    // The in-flight write was aborted with the session: releasing it changes nothing.
    gate.add_permits(10);
    assert_eq!(platform.recv().await, None, "a frame after the close");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!platform.root().join("late.txt").exists());
}

#[tokio::test]
async fn file_ops_violations_and_revocation_are_audited_without_content() {
    let log_dir = TempRoot::new();
    let log = log_dir.outside().join("audit.log");
    let mut local = config();
    // Long enough that the three calls are answered first even on a loaded machine.
    local.status_interval = Duration::from_secs(2);
    let mut platform = start_audited(local, Hooks::default(), Some(&log));
    platform.handshake(|_| {}).await;
    let secret = "file content that must never reach the audit log";
    let write = json!({"path": "a.txt", "content": secret});
    assert_eq!(
        platform.call("FILE_WRITE", "w", &write).await["type"],
        "ACK"
    );
    let read = platform
        .call("FILE_READ", "r", &json!({"path": "a.txt"}))
        .await;
    assert_eq!(read["payload"]["content"], secret);
    let escape = platform
        .call("FILE_READ", "x", &json!({"path": "../a.txt"}))
        .await;
    assert_eq!(error_code(&escape), "PATH_OUTSIDE_ALLOWED_ROOT");
    let status = platform.recv_json().await;
    assert_eq!(status["type"], "STATUS", "{status}");
    let logged = std::fs::metadata(&log).unwrap().len();
    assert_eq!(status["payload"]["audit_log_bytes"], logged);
    platform.request("SESSION_REVOKED", "rev", &json!({"reason": "user_revoked"}));
    assert_eq!(platform.recv_close().await.0, 4428);
    platform.ended().await;

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(secret));
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ops: Vec<&str> = records.iter().map(|r| r["op"].as_str().unwrap()).collect();
    assert_eq!(
        ops,
        [
            "FILE_WRITE",
            "FILE_READ",
            "FILE_READ",
            "JAIL_VIOLATION",
            "SESSION_REVOKED"
        ]
    );
    assert_eq!(records[0]["request_id"], "w");
    assert_eq!(records[0]["details"]["size_bytes_written"], secret.len());
    assert_eq!(records[1]["details"]["size_bytes_returned"], secret.len());
    assert_eq!(
        records[2]["result"]["error_code"],
        "PATH_OUTSIDE_ALLOWED_ROOT"
    );
    assert_eq!(records[3]["details"]["attempted_op"], "FILE_READ");
    assert_eq!(records[4]["details"]["source"], "frame");
    assert_eq!(records[4]["details"]["reason"], "user_revoked");
    assert_eq!(records[4]["session_id"], "session-1");
    let report = local_core::machine::audit_chain::verify(&log, &AUDIT_KEY).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[tokio::test]
async fn transport_end_aborts_in_flight_requests() {
    let gate = Arc::new(Semaphore::new(0));
    let mut platform = start(
        config(),
        Hooks {
            request_gate: Some(Arc::clone(&gate)),
        },
    );
    platform.handshake(|_| {}).await;
    platform.request(
        "FILE_WRITE",
        "w1",
        &json!({"path": "never.txt", "content": "x"}),
    );
    platform.ping("p1").await;
    let root = platform.root();
    let gate_after = Arc::clone(&gate);
    assert_eq!(platform.end().await, SessionEnd::TransportEnded);
    gate_after.add_permits(10);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!Path::new(&root).join("never.txt").exists());
}
