//! `/v1/assist`: intent words, the two sample passages, and the context rules.

use std::time::Duration;

use serde_json::{Value, json};

use super::support::{Server, captured};

fn context(server: &Server, session: &str, sensitivity: &str, age: f64) -> Value {
    json!({
        "sessionId": session, "captureType": "activeWindow", "application": "MSGuide Demo",
        "ocrText": "private-screen", "elements": [], "sensitivity": sensitivity, "timestamp": captured(server, age)
    })
}

#[tokio::test]
async fn answers_from_bundled_samples() {
    let server = Server::start().await;
    let s = server.session().await;
    let res = server
        .post("/v1/assist")
        .json(&json!({"sessionId": s, "prompt": "How do I deploy?"}))
        .send()
        .await;
    assert_eq!(res.status, 200, "{}", res.text());
    let body = res.json();
    assert_eq!(body["requestType"], "guide");
    assert_eq!(
        body["citations"][0],
        json!({"source": "https://example.invalid/msguide/samples/deployment", "title": "Sample Deployment Guide", "modified": "2026-09-01T00:00:00+00:00"})
    );
    assert!(body["answer"].as_str().unwrap().starts_with("Sample only"));
    assert_eq!(
        (body["mode"].as_str(), body["responseModes"].clone()),
        (Some("demo"), json!(["text"]))
    );

    let both = server.post("/v1/assist").json(&json!({"sessionId": s, "prompt": "Explain build errors after deployment", "responseModes": ["voice", "voice", "overlay"]})).send().await.json();
    assert_eq!(both["requestType"], "retrieve");
    assert_eq!(both["citations"].as_array().unwrap().len(), 2);
    assert!(
        both["answer"]
            .as_str()
            .unwrap()
            .contains(".\n\nSample only")
    );
    assert_eq!(both["responseModes"], json!(["voice", "voice", "overlay"]));

    let action = server
        .post("/v1/assist")
        .json(&json!({"sessionId": s, "prompt": "Create a deployment work item"}))
        .send()
        .await
        .json();
    assert_eq!(
        (action["requestType"].as_str(), action["citations"].clone()),
        (Some("action"), json!([]))
    );
    assert_eq!(
        action["answer"],
        "Demo only: no supporting sample passage was found; no action was performed."
    );

    let four = server.post("/v1/assist").json(&json!({"sessionId": s, "prompt": "x", "responseModes": ["text", "text", "text", "text"]})).send().await;
    assert_eq!(four.validation_type(), "too_long");
    let missing = server
        .post("/v1/assist")
        .json(&json!({"prompt": "x"}))
        .send()
        .await;
    assert_eq!(missing.validation_type(), "missing");
}

#[tokio::test]
async fn context_rules_in_order() {
    let server = Server::start().await;
    let s = server.session().await;
    let other = server.session().await;
    let ask = |ctx: Value| {
        server
            .post("/v1/assist")
            .json(&json!({"sessionId": s, "prompt": "How?", "context": ctx}))
            .send_owned()
    };
    let mismatch = ask(context(&server, &other, "internal", 1.0)).await;
    assert_eq!(
        (mismatch.status, mismatch.detail().as_str()),
        (422, "Context session does not match request")
    );
    for level in ["internal", "confidential", "restricted"] {
        let res = ask(context(&server, &s, level, 1.0)).await;
        assert_eq!(
            (res.status, res.detail().as_str()),
            (403, "Only synthetic/public demo context is supported"),
            "{level}"
        );
    }
    let stale = ask(context(&server, &s, "public", 61.0)).await;
    assert_eq!(
        (stale.status, stale.detail().as_str()),
        (
            422,
            "Observation must be at most 60 seconds old and at most 5 seconds in the future"
        )
    );
    assert_eq!(ask(context(&server, &s, "public", 1.0)).await.status, 200);
    server.clock.advance(Duration::from_secs(3600));
    let expired = ask(context(&server, &s, "public", 1.0)).await;
    assert_eq!(
        (expired.status, expired.detail().as_str()),
        (410, "Resource expired")
    );
    let unknown = server
        .post("/v1/assist")
        .json(&json!({"sessionId": "nope", "prompt": "How?"}))
        .send()
        .await;
    assert_eq!(unknown.status, 404);
}
