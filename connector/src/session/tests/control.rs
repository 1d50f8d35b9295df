//! The control connection: its ACK checks and the messages it serves.

use super::*;

/// A control plane that answers every request with ACK and counts connections.
#[derive(Debug, Default)]
struct CountingPlane {
    connected: std::sync::atomic::AtomicUsize,
}

impl ControlPlane for CountingPlane {
    fn connected(&self, _max_concurrent: NonZeroU32) {
        self.connected
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn handle(&self, _message: Message) -> Pin<Box<dyn Future<Output = Message> + Send>> {
        Box::pin(async {
            Message::Ack(crate::protocol::AckPayload {
                ok: true,
                pid: None,
            })
        })
    }
}

fn control_ack(ack: &mut Value) {
    ack["payload"]["session_id"] = Value::Null;
    ack["payload"]["connection_id"] = json!("conn-1");
    ack["payload"]["granted_capabilities"] = json!(["files", "directory_browse"]);
}

#[tokio::test]
async fn a_control_connection_checks_its_ack_and_serves_only_control_messages() {
    let plane = Arc::new(CountingPlane::default());
    let shared: Arc<dyn ControlPlane> = plane.clone();
    let mut platform = start_host(config(), Hooks::default(), None, move |mut host| {
        host.role = Role::Control(shared);
        host
    });
    let hello = platform.hello().await;
    assert_eq!(hello["payload"]["allowed_root"], Value::Null);
    assert!(
        hello["payload"]["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("directory_browse"))
    );
    let mut ack = ack_for(&platform.hello_id);
    control_ack(&mut ack);
    platform.send_json(&ack);
    let detach = platform
        .call("DETACH_SESSION", "d", &json!({"session_id": "s"}))
        .await;
    assert_eq!(detach["type"], "ACK", "{detach}");
    assert_eq!(plane.connected.load(std::sync::atomic::Ordering::SeqCst), 1);
    let stat = platform.call("FILE_STAT", "f", &json!({"path": "x"})).await;
    assert_eq!(error_code(&stat), "FEATURE_NOT_SUPPORTED");
    // Malformed, a control request gets its own code; a keepalive belongs to every
    // connection, so it is the generic validation failure here as on a data connection.
    let half = platform
        .call(
            "DIRECTORY_LIST_REQUEST",
            "half",
            &json!({"browse_id": null, "directory_ref": "d"}),
        )
        .await;
    assert_eq!(error_code(&half), "DIRECTORY_REFERENCE_INVALID");
    let ping = platform.call("PING", "p", &json!([1])).await;
    assert_eq!(error_code(&ping), "INTERNAL_ERROR");

    // The ACK checks: a session id closes 4403; no connection id, no browse grant or a
    // negotiated 1.0 closes 4426.
    type Edit = fn(&mut Value);
    let cases: [(Edit, u16); 4] = [
        (|ack| ack["payload"]["session_id"] = json!("s-1"), 4403),
        (|ack| ack["payload"]["connection_id"] = json!(""), 4426),
        (
            |ack| ack["payload"]["granted_capabilities"] = json!(["files"]),
            4426,
        ),
        (
            |ack| ack["payload"]["protocol_version"] = json!("1.0"),
            4426,
        ),
    ];
    for (edit, code) in cases {
        let shared: Arc<dyn ControlPlane> = Arc::new(CountingPlane::default());
        let mut platform = start_host(config(), Hooks::default(), None, move |mut host| {
            host.role = Role::Control(shared);
            host
        });
        platform
            .handshake(|ack| {
                control_ack(ack);
                edit(ack);
            })
            .await;
        assert_eq!(platform.recv_close().await.0, code);
        assert_eq!(
            platform.ended().await,
            SessionEnd::HandshakeRejected { code }
        );
    }
}
