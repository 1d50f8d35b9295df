//! HELLO, the HELLO_ACK checks and their close codes, closes from the platform, and ids.

use super::*;

#[tokio::test]
async fn hello_has_the_spec_fields_and_the_session_starts() {
    let mut config = config();
    config.advertised = vec![
        Capability::Recording,
        Capability::Files,
        Capability::DirectoryBrowse,
        Capability::Shell,
        Capability::Files,
    ];
    let mut platform = start(config, Hooks::default());
    let hello = platform.hello().await;
    let id = hello["id"].as_str().unwrap();
    assert_eq!(id.len(), 36, "{id}");
    assert_eq!(&id[14..15], "4", "uuid v4 shape: {id}");
    assert_eq!(hello["version"], "1.1");
    assert!(hello.get("pending_capacity").is_none(), "{hello}");
    let payload = &hello["payload"];
    assert_eq!(payload["shim_version"], "0.2.0");
    assert_eq!(payload["protocol_version"], "1.1");
    assert_eq!(payload["machine_id"], "machine-1");
    assert_eq!(payload["platform"], "linux");
    assert_eq!(payload["arch"], "x86_64");
    assert!(payload["screen_resolution"].is_null());
    // Only what this build serves, once, in spec order; never recording or the control
    // connection's directory_browse.
    assert_eq!(payload["capabilities"], json!(["shell", "files"]));
    assert_eq!(
        payload["allowed_root"],
        platform.root().to_string_lossy().as_ref()
    );
    assert_eq!(payload["local_llm_models"], json!([]));
    assert_eq!(payload["hardware_devices"], json!([]));

    // The daemon says "connected" once the platform accepted HELLO, not when it was sent.
    assert!(!platform.established());
    let ack = ack_for(&platform.hello_id);
    platform.send_json(&ack);
    platform.ping("p1").await;
    assert!(platform.established());
    assert_eq!(platform.end().await, SessionEnd::TransportEnded);
}

#[test]
fn hello_capabilities_follow_the_spec_order() {
    let mut config = config();
    config.advertised = vec![Capability::HardwareGpio, Capability::Files];
    assert_eq!(config.hello_capabilities(), [Capability::Files]);
    config.advertised.clear();
    assert!(config.hello_capabilities().is_empty());
}

#[tokio::test]
async fn ack_with_another_id_closes_4400() {
    let mut platform = start(config(), Hooks::default());
    platform.hello().await;
    platform.send_json(&ack_for("not-the-hello-id"));
    assert_eq!(platform.recv_close().await.0, close_code::BAD_HANDSHAKE);
    assert!(!platform.established());
    assert_eq!(
        platform.ended().await,
        SessionEnd::HandshakeRejected { code: 4400 }
    );
    assert!(!SessionEnd::HandshakeRejected { code: 4400 }.may_reconnect());
}

#[tokio::test]
async fn granting_unadvertised_capabilities_closes_4400() {
    for extra in ["shell", "teleport"] {
        let mut platform = start(config(), Hooks::default());
        platform
            .handshake(|ack| {
                ack["payload"]["granted_capabilities"] = json!(["files", extra]);
            })
            .await;
        assert_eq!(platform.recv_close().await.0, 4400, "{extra}");
        assert_eq!(
            platform.ended().await,
            SessionEnd::HandshakeRejected { code: 4400 }
        );
    }
}

#[tokio::test]
async fn another_session_id_closes_4403() {
    for session in [json!("session-2"), Value::Null, json!("")] {
        let mut platform = start(config(), Hooks::default());
        platform
            .handshake(|ack| ack["payload"]["session_id"] = session.clone())
            .await;
        assert_eq!(platform.recv_close().await.0, 4403, "{session}");
        assert_eq!(
            platform.ended().await,
            SessionEnd::HandshakeRejected { code: 4403 }
        );
    }
}

#[tokio::test]
async fn another_major_closes_4426_with_a_short_json_reason() {
    let huge = format!("{}.0", "9".repeat(500));
    for platform_max in ["2.0", "v1.1", huge.as_str()] {
        let mut platform = start(config(), Hooks::default());
        platform
            .handshake(|ack| ack["payload"]["protocol_version"] = json!(platform_max))
            .await;
        let (code, reason) = platform.recv_close().await;
        assert_eq!(code, close_code::PROTOCOL_VERSION_MISMATCH);
        assert!(reason.len() <= 123, "{} bytes", reason.len());
        let reason: Value = serde_json::from_str(&reason).unwrap();
        assert_eq!(reason["error"], "PROTOCOL_VERSION_MISMATCH");
        assert_eq!(reason["shim_max"], "1.1");
        assert!(platform_max.starts_with(reason["platform_max"].as_str().unwrap()));
        let end = platform.ended().await;
        assert_eq!(
            end,
            SessionEnd::VersionMismatch {
                platform_max: platform_max.to_owned()
            }
        );
        assert!(!end.may_reconnect());
    }
}

#[tokio::test]
async fn a_zero_limit_from_either_side_closes_4400() {
    let mut platform = start(config(), Hooks::default());
    platform
        .handshake(|ack| ack["payload"]["max_concurrent"] = json!(0))
        .await;
    assert_eq!(platform.recv_close().await.0, 4400);

    let mut local = config();
    local.max_concurrent = 0;
    let mut platform = start(local, Hooks::default());
    platform.handshake(|_| {}).await;
    assert_eq!(platform.recv_close().await.0, 4400);
    assert_eq!(
        platform.ended().await,
        SessionEnd::HandshakeRejected { code: 4400 }
    );
}

#[tokio::test]
async fn limits_are_the_lower_of_local_and_ack() {
    // Local 1 beats the ACK's 4: the second request is refused.
    let mut local = config();
    local.max_concurrent = 1;
    local.limits = FileLimits::for_max_file_size(1 << 20);
    let gate = Arc::new(Semaphore::new(0));
    let mut platform = start(
        local,
        Hooks {
            request_gate: Some(Arc::clone(&gate)),
        },
    );
    // The ACK's 5 bytes beat the local 1 MiB.
    platform
        .handshake(|ack| ack["payload"]["max_file_size_bytes"] = json!(5))
        .await;
    platform.request("FILE_LIST", "l1", &json!({"path": "."}));
    let refused = platform
        .call("FILE_LIST", "l2", &json!({"path": "."}))
        .await;
    assert_eq!(error_code(&refused), "SHIM_OVERLOADED");
    gate.add_permits(10);
    assert_eq!(platform.recv_json().await["id"], "l1");
    assert_eq!(platform.recv_json().await["type"], "STATUS");
    let write = json!({"path": "big.txt", "content": "123456"});
    let reply = platform.call("FILE_WRITE", "w1", &write).await;
    assert_eq!(error_code(&reply), "FILE_TOO_LARGE");
}

#[tokio::test]
async fn no_ack_in_time_closes_1002_and_may_reconnect() {
    let mut config = config();
    config.handshake_timeout = Duration::from_millis(20);
    let mut platform = start(config, Hooks::default());
    platform.hello().await;
    assert_eq!(platform.recv_close().await.0, 1002);
    let end = platform.ended().await;
    assert_eq!(end, SessionEnd::HandshakeFailed);
    assert!(end.may_reconnect());
}

#[tokio::test]
async fn another_frame_before_the_ack_fails_the_handshake() {
    let mut platform = start(config(), Hooks::default());
    platform.hello().await;
    platform.request("PING", "p0", &json!({}));
    assert_eq!(platform.recv_close().await.0, 1002);
    assert_eq!(platform.ended().await, SessionEnd::HandshakeFailed);
}

// ---- the loop -----------------------------------------------------------------------------

#[tokio::test]
async fn fatal_and_ordinary_closes_from_the_platform() {
    for (code, fatal) in [
        (4427, true),
        (4426, true),
        (4429, true),
        (1000, false),
        (1011, false),
    ] {
        let mut platform = established().await;
        platform.send(Frame::Close {
            code,
            reason: "bye".to_owned(),
        });
        let end = platform.ended().await;
        let reason = "bye".to_owned();
        let expected = if fatal {
            SessionEnd::Fatal { code, reason }
        } else {
            SessionEnd::Closed { code, reason }
        };
        assert_eq!(end, expected);
        assert_eq!(end.may_reconnect(), !fatal);
    }
}

#[tokio::test]
async fn a_close_during_the_handshake_ends_it_the_same_way() {
    let mut platform = start(config(), Hooks::default());
    platform.hello().await;
    platform.send(Frame::Close {
        code: 4427,
        reason: String::new(),
    });
    assert!(matches!(
        platform.ended().await,
        SessionEnd::Fatal { code: 4427, .. }
    ));
}

#[test]
fn ids_look_like_distinct_uuid_v4() {
    let a = new_id();
    let b = new_id();
    assert_ne!(a, b);
    for id in [&a, &b] {
        let groups: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
        assert!(id.starts_with(|c: char| c.is_ascii_hexdigit()));
        assert_eq!(&id[14..15], "4", "{id}");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
    }
}
