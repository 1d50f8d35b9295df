//! The audit route, and that planted `private-` content never reaches the audit, the
//! diagnostic log or an error body.

use serde_json::json;

use super::support::{
    Options, Server, b64, button, guidance_body, observation, png_bytes, temp_dir,
};

#[tokio::test]
async fn audit_route_is_off_by_default_and_bounded_when_on() {
    let off = Server::with(Options {
        audit: false,
        ..Options::default()
    })
    .await;
    let res = off.get("/admin/audit-log").send().await;
    assert_eq!(
        (res.status, res.detail().as_str()),
        (404, "Audit is disabled")
    );
    let anonymous = super::support::Req::new(off.addr, "GET", "/admin/audit-log")
        .header("Authorization", "")
        .send()
        .await;
    assert_eq!(anonymous.status, 401);

    let on = Server::start().await;
    for _ in 0..3 {
        on.session().await;
    }
    let body = on.get("/admin/audit-log").send().await.json();
    assert_eq!(body["count"], 3);
    for event in body["events"].as_array().unwrap() {
        let mut keys: Vec<&str> = event
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ["correlationId", "outcome", "timestamp"]);
        assert_eq!(event["outcome"], "session_created");
        assert!(event["timestamp"].as_str().unwrap().ends_with("+00:00"));
    }
    let one = on.get("/admin/audit-log?limit=1").send().await.json();
    assert_eq!(
        (
            one["count"].as_u64(),
            one["events"].as_array().unwrap().len()
        ),
        (Some(3), 1)
    );
    assert_eq!(
        one["events"][0], body["events"][2],
        "the tail is the newest, oldest first"
    );
    assert_eq!(
        on.get("/admin/audit-log?limit=1000").send().await.status,
        200
    );
    for bad in ["0", "1001", "-1", "abc", "1.5"] {
        let res = on
            .get(&format!("/admin/audit-log?limit={bad}"))
            .send()
            .await;
        assert!(!res.validation_type().is_empty(), "{bad}");
        assert_eq!(res.json()["detail"][0]["loc"], json!(["query", "limit"]));
    }
    for _ in 0..1001 {
        on.local
            .audit()
            .record("x", "session_created", on.local.now());
    }
    assert_eq!(
        on.get("/admin/audit-log?limit=5").send().await.json()["count"],
        1000,
        "the ring holds 1000"
    );
}

#[tokio::test]
async fn private_content_reaches_no_log_audit_or_error() {
    let dir = temp_dir("privacy");
    let log = dir.join("logs/backend.log");
    let server = Server::with(Options {
        diagnostic_log: Some(log.clone()),
        ..Options::default()
    })
    .await;
    let s = server.session().await;
    let mut bodies = Vec::new();

    let image = b64(&png_bytes(64, 48, Some("private-image-text")));
    let mut obs = observation(
        &server,
        "private-ocr Build overview",
        vec![button("View logs"), button("private-label")],
    );
    obs["imageBase64"] = json!(image);
    obs["width"] = json!(64);
    obs["height"] = json!(48);
    let mut body = guidance_body(&s, obs.clone());
    body["prompt"] = json!("private-prompt");
    let ok = server.guidance(&body).await;
    assert_eq!(ok.status, 200, "{}", ok.text());

    let mut bad_image = obs.clone();
    bad_image["imageBase64"] = json!(b64(b"private-not-a-png"));
    bodies.push(server.guidance(&guidance_body(&s, bad_image)).await.text());
    let mut bad_box = obs.clone();
    bad_box["elements"][1]["box"] = json!([0.5, 0.5, 0.9, 0.9]);
    bodies.push(server.guidance(&guidance_body(&s, bad_box)).await.text());
    let mut stale = obs;
    stale["capturedAt"] = json!("2020-01-01T00:00:00Z");
    bodies.push(server.guidance(&guidance_body(&s, stale)).await.text());
    bodies.push(
        server
            .post("/v1/assist")
            .json(&json!({"sessionId": s, "prompt": "private-assist deploy"}))
            .send()
            .await
            .text(),
    );
    bodies.push(
        server
            .post("/v1/assist")
            .json(&json!({"sessionId": s, "prompt": "x", "extra": "private-value"}))
            .send()
            .await
            .text(),
    );
    // A successful preview shows its own parameters back; only the audit and logs must not.
    assert_eq!(
        server
            .post("/v1/actions/preview")
            .json(&json!({"tool": "create_work_item", "parameters": {"title": "private-title"}}))
            .send()
            .await
            .status,
        200
    );
    bodies.push(
        server
            .post("/v1/actions/preview")
            .json(&json!({"tool": "create_work_item", "parameters": {"param": "private-param"}}))
            .send()
            .await
            .text(),
    );
    bodies.push(
        server
            .post("/v1/actions/preview")
            .json(&json!({"tool": "private-tool", "parameters": {}}))
            .send()
            .await
            .text(),
    );

    let audit = server
        .get("/admin/audit-log?limit=1000")
        .send()
        .await
        .text();
    let diagnostics = std::fs::read_to_string(&log).unwrap();
    assert!(
        diagnostics.contains("guidance_started") && diagnostics.contains("guidance_completed"),
        "{diagnostics}"
    );
    for line in diagnostics.lines() {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(line.is_ascii());
        assert!(event["timestamp"].is_string() && event["event"].is_string());
    }
    for (name, text) in [("audit", &audit), ("diagnostics", &diagnostics)]
        .into_iter()
        .chain(bodies.iter().map(|b| ("error body", b)))
    {
        assert!(!text.contains("private-"), "{name} leaked: {text}");
        assert!(
            !text.contains(super::support::TOKEN),
            "{name} leaked the token"
        );
    }
}
