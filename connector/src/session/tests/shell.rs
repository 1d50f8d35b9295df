//! EXECUTE_COMMAND through the loop: the jail, the safe environment, timeouts and limits.

use super::*;

/// A session with `shell` advertised and granted, and the given command limits.
async fn with_shell(commands: CommandLimiter, audit_log: Option<&Path>) -> Peer {
    let mut local = config();
    local.advertised = vec![Capability::Files, Capability::Shell];
    let mut platform = start_host(local, Hooks::default(), audit_log, |host| {
        host.with_commands(commands)
    });
    let hello = platform.hello().await;
    assert_eq!(hello["payload"]["capabilities"], json!(["shell", "files"]));
    let mut ack = ack_for(&platform.hello_id);
    ack["payload"]["granted_capabilities"] = json!(["files", "shell"]);
    ack["payload"]["command_timeout_seconds"] = json!(1);
    platform.send_json(&ack);
    platform
}

#[tokio::test]
async fn commands_run_in_the_jail_with_the_safe_environment() {
    let mut platform = with_shell(CommandLimiter::new(10, 60), None).await;
    std::fs::create_dir(platform.root().join("sub")).unwrap();
    let reply = platform
        .call(
            "EXECUTE_COMMAND",
            "c1",
            &json!({"command": "pwd; echo \"$GREETING\"; echo err >&2; exit 3",
                    "cwd": "sub", "env": {"GREETING": "hi there"}}),
        )
        .await;
    assert_eq!(reply["type"], "COMMAND_RESULT", "{reply}");
    let payload = &reply["payload"];
    let sub = platform.root().join("sub");
    assert_eq!(payload["stdout"], format!("{}\nhi there\n", sub.display()));
    assert_eq!(payload["stderr"], "err\n");
    assert_eq!(payload["exit_code"], 3);
    assert_eq!(payload["timed_out"], false);
    assert_eq!(payload["output_truncated"], false);

    // argv: no shell parsing, and the default cwd is the root.
    let reply = platform
        .call(
            "EXECUTE_COMMAND",
            "c2",
            &json!({"argv": ["sh", "-c", "pwd", "$HOME"]}),
        )
        .await;
    assert_eq!(
        reply["payload"]["stdout"],
        format!("{}\n", platform.root().display())
    );

    let outside = platform
        .call(
            "EXECUTE_COMMAND",
            "c3",
            &json!({"argv": ["true"], "cwd": ".."}),
        )
        .await;
    assert_eq!(error_code(&outside), "PATH_OUTSIDE_ALLOWED_ROOT");
    let missing = platform
        .call(
            "EXECUTE_COMMAND",
            "c4",
            &json!({"argv": ["no-such-program-xyz"]}),
        )
        .await;
    assert_eq!(error_code(&missing), "SHELL_NOT_AVAILABLE");
    let cmd = platform
        .call(
            "EXECUTE_COMMAND",
            "c5",
            &json!({"command": "dir", "shell": "cmd"}),
        )
        .await;
    assert_eq!(error_code(&cmd), "SHELL_NOT_AVAILABLE");
}

#[tokio::test]
async fn command_timeouts_are_capped_by_the_negotiated_ceiling() {
    let mut platform = with_shell(CommandLimiter::new(10, 60), None).await;
    // The request asks for 60 s; the ACK's ceiling of 1 s wins.
    let reply = platform
        .call(
            "EXECUTE_COMMAND",
            "slow",
            &json!({"argv": ["sleep", "30"], "timeout_seconds": 60}),
        )
        .await;
    let payload = &reply["payload"];
    assert_eq!(payload["timed_out"], true, "{reply}");
    assert_eq!(payload["exit_code"], -1);
    let took = payload["duration_seconds"].as_f64().unwrap();
    assert!((1.0..10.0).contains(&took), "{took}");
}

#[tokio::test]
async fn command_limits_refuse_with_shim_overloaded_and_are_audited() {
    let log_dir = TempRoot::new();
    let log = log_dir.outside().join("audit.log");
    let mut platform = with_shell(CommandLimiter::new(10, 2), Some(&log)).await;
    for id in ["a", "b"] {
        let ok = platform
            .call(
                "EXECUTE_COMMAND",
                id,
                &json!({"argv": ["true"], "env": {"SECRET": "v4lue"}}),
            )
            .await;
        assert_eq!(ok["type"], "COMMAND_RESULT", "{ok}");
    }
    let refused = platform
        .call("EXECUTE_COMMAND", "c", &json!({"argv": ["true"]}))
        .await;
    assert_eq!(error_code(&refused), "SHIM_OVERLOADED");
    assert_eq!(
        refused["payload"]["details"]["limit"],
        "commands_per_minute"
    );
    platform.ping("p").await;
    drop(platform);
    // The refusal's record is written behind the reply; give it a moment.
    let deadline = Instant::now() + WAIT;
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() >= 3 || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        !text.contains("v4lue"),
        "an env value reached the audit log"
    );
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 3, "{text}");
    assert_eq!(records[0]["op"], "EXECUTE_COMMAND");
    assert_eq!(records[0]["details"]["argv"], json!(["true"]));
    assert!(
        records[0]["details"]["env_keys"]
            .as_array()
            .unwrap()
            .contains(&json!("SECRET"))
    );
    assert_eq!(records[0]["result"]["exit_code"], 0);
    assert_eq!(records[2]["result"]["error_code"], "SHIM_OVERLOADED");
}
