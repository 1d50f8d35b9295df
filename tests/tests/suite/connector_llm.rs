//! LOCAL_LLM_COMPLETION and hardware listing through the real `autogpt-shim` binary, with a
//! fake Ollama and a fake OpenAI-compatible server (real HTTP on loopback) as the backend.

use std::time::Duration;

use e2e::fake_llm::{FakeKind, FakeLlm, Reply};
use e2e::platform::{Conn, Platform, error_code};
use serde_json::{Value, json};

use super::connector::{audit_records, home_and_root, spawn_env};

const SECRET_PROMPT: &str = "prompt text that must never reach the audit log";

async fn session_with(fake: &FakeLlm, kind: &str) -> (Conn, Value, e2e::platform::Shim, Platform) {
    session_granting(fake, kind, &["files", "local_llm"]).await
}

async fn session_granting(
    fake: &FakeLlm,
    kind: &str,
    grants: &[&str],
) -> (Conn, Value, e2e::platform::Shim, Platform) {
    let (home, root) = home_and_root("shim-llm");
    let platform = Platform::bind().await;
    let url = fake.url();
    let shim = spawn_env(
        &home,
        &platform,
        &root,
        &["--enable-local-llm"],
        &[
            ("AUTOGPT_SHIM_OLLAMA_URL", url.as_str()),
            ("AUTOGPT_SHIM_LOCAL_LLM_BACKEND", kind),
        ],
    );
    let (conn, hello) = platform.session(grants, |_| {}).await;
    (conn, hello, shim, platform)
}

fn completion(model: &str, stream: bool) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": SECRET_PROMPT}],
           "max_tokens": 32, "stream": stream})
}

#[tokio::test]
async fn streams_chunks_then_the_response_and_audits_without_text() {
    for kind in [FakeKind::Ollama, FakeKind::OpenAi] {
        let reply = Reply::text(&["Hel", "lo", " there"])
            .finish(Some("length"))
            .tokens(5, 3);
        let fake = FakeLlm::start(kind, &["tiny:1b", "other:7b"], reply).await;
        let backend = match kind {
            FakeKind::Ollama => "ollama",
            FakeKind::OpenAi => "openai-compatible",
        };
        let (mut conn, hello, shim, _platform) = session_with(&fake, backend).await;
        assert_eq!(
            hello["payload"]["capabilities"],
            json!(["files", "local_llm"]),
            "{hello}"
        );
        assert_eq!(
            hello["payload"]["local_llm_models"],
            json!(["tiny:1b", "other:7b"])
        );

        conn.request("LOCAL_LLM_COMPLETION", "c1", completion("tiny:1b", true))
            .await;
        let mut deltas = Vec::new();
        let response = loop {
            let frame = conn.recv().await;
            assert_eq!(frame["id"], "c1", "{frame}");
            match frame["type"].as_str().unwrap() {
                "LOCAL_LLM_COMPLETION_CHUNK" => {
                    deltas.push(frame["payload"]["delta"].as_str().unwrap().to_owned());
                    let finish = &frame["payload"]["finish_reason"];
                    if frame["payload"]["delta"] == "" {
                        assert_eq!(finish, "length", "{frame}");
                    } else {
                        assert!(finish.is_null(), "{frame}");
                    }
                }
                "LOCAL_LLM_COMPLETION_RESPONSE" => break frame,
                other => panic!("unexpected {other}: {frame}"),
            }
        };
        assert_eq!(deltas, ["Hel", "lo", " there", ""]);
        let payload = &response["payload"];
        assert_eq!(payload["content"], "Hello there");
        assert_eq!(payload["finish_reason"], "length");
        assert_eq!(
            payload["tokens"],
            json!({"prompt": 5, "completion": 3, "total": 8})
        );
        assert!(payload["duration_seconds"].as_f64().unwrap() >= 0.0);
        let sent = fake.last_request().unwrap().body.unwrap();
        assert_eq!(sent["messages"][0]["content"], SECRET_PROMPT);

        // Without streaming: the response only.
        let reply = conn
            .call("LOCAL_LLM_COMPLETION", "c2", completion("tiny:1b", false))
            .await;
        assert_eq!(reply["type"], "LOCAL_LLM_COMPLETION_RESPONSE", "{reply}");
        assert_eq!(reply["payload"]["content"], "Hello there");

        conn.close(4429).await;
        let records = audit_records(&shim);
        let done = records
            .iter()
            .find(|r| r["op"] == "LOCAL_LLM_COMPLETION")
            .unwrap();
        assert_eq!(done["details"]["tokens_total"], 8);
        assert_eq!(done["details"]["finish_reason"], "length");
        let text = std::fs::read_to_string(shim.audit_log()).unwrap();
        assert!(!text.contains(SECRET_PROMPT) && !text.contains("Hello there"));
    }
}

#[tokio::test]
async fn refusals_unknown_model_busy_backend_failure_and_audit() {
    let reply = Reply::text(&["w", "x", "y", "z"]).chunk_delay(Duration::from_millis(300));
    let fake = FakeLlm::ollama(&["tiny:1b"], reply).await;
    let (mut conn, _, shim, _platform) = session_with(&fake, "ollama").await;

    let unknown = conn
        .call("LOCAL_LLM_COMPLETION", "u1", completion("huge:70b", true))
        .await;
    assert_eq!(error_code(&unknown), "MODEL_NOT_AVAILABLE");
    assert_eq!(unknown["payload"]["details"]["requested_model"], "huge:70b");
    assert_eq!(
        unknown["payload"]["details"]["available_models"],
        json!(["tiny:1b"])
    );

    // One completion at a time per machine: the second is refused at once.
    conn.request("LOCAL_LLM_COMPLETION", "slow", completion("tiny:1b", false))
        .await;
    assert!(
        fake.wait_until(|f| f.in_flight() == 1, Duration::from_secs(30))
            .await
    );
    let busy = conn
        .call("LOCAL_LLM_COMPLETION", "b1", completion("tiny:1b", false))
        .await;
    assert_eq!(error_code(&busy), "LOCAL_LLM_BUSY");
    let slow = conn.recv().await;
    assert_eq!(slow["id"], "slow");
    assert_eq!(slow["payload"]["content"], "wxyz");

    fake.set_reply(Reply::status(500, "model runner crashed"));
    let failed = conn
        .call("LOCAL_LLM_COMPLETION", "f1", completion("tiny:1b", true))
        .await;
    assert_eq!(error_code(&failed), "LOCAL_LLM_FAILED");
    assert_eq!(
        failed["payload"]["details"]["backend_error"],
        "model runner crashed"
    );

    conn.close(4429).await;
    let records = audit_records(&shim);
    let llm: Vec<&Value> = records
        .iter()
        .filter(|r| r["op"] == "LOCAL_LLM_COMPLETION")
        .collect();
    assert_eq!(llm.len(), 4, "{records:?}");
    let codes: Vec<&Value> = llm.iter().map(|r| &r["result"]["error_code"]).collect();
    assert!(codes.contains(&&json!("MODEL_NOT_AVAILABLE")));
    assert!(codes.contains(&&json!("LOCAL_LLM_BUSY")));
    assert!(codes.contains(&&json!("LOCAL_LLM_FAILED")));
    let done = llm.iter().find(|r| r["result"]["ok"] == true).unwrap();
    assert_eq!(done["details"]["response_chars"], 4);
    assert_eq!(
        done["details"]["prompt_chars"],
        SECRET_PROMPT.chars().count()
    );
    let text = std::fs::read_to_string(shim.audit_log()).unwrap();
    assert!(!text.contains(SECRET_PROMPT));
    // The reply's text, in letters no hex digest or id in the log can hold ("abcd" could).
    assert!(!text.contains("wxyz"));
}

#[tokio::test]
async fn a_dropped_connection_cancels_the_backend_call() {
    let reply = Reply::text(&["x"; 50]).chunk_delay(Duration::from_millis(200));
    let fake = FakeLlm::ollama(&["tiny:1b"], reply).await;
    let (mut conn, _, _shim, platform) = session_with(&fake, "ollama").await;
    conn.request("LOCAL_LLM_COMPLETION", "long", completion("tiny:1b", true))
        .await;
    let first = conn.recv().await;
    assert_eq!(first["type"], "LOCAL_LLM_COMPLETION_CHUNK", "{first}");
    conn.close(1011).await;
    assert!(
        fake.wait_until(|f| f.cancelled() == 1, Duration::from_secs(30))
            .await,
        "the backend call outlived its connection"
    );
    // The shim reconnects and asks for the models again.
    let (mut conn, hello) = platform.session(&["local_llm"], |_| {}).await;
    assert_eq!(hello["payload"]["local_llm_models"], json!(["tiny:1b"]));
    assert_eq!(conn.call("PING", "p", json!({})).await["type"], "PONG");
}

#[tokio::test]
async fn no_model_or_no_backend_means_no_capability() {
    let fake = FakeLlm::ollama(&[], Reply::text(&["x"])).await;
    // Granting local_llm now would be granting what HELLO did not advertise (close 4400).
    let (mut conn, hello, _shim, _platform) = session_granting(&fake, "ollama", &["files"]).await;
    assert_eq!(hello["payload"]["capabilities"], json!(["files"]));
    assert_eq!(hello["payload"]["local_llm_models"], json!([]));
    let refused = conn
        .call("LOCAL_LLM_COMPLETION", "n1", completion("tiny:1b", true))
        .await;
    assert_eq!(error_code(&refused), "CAPABILITY_NOT_GRANTED");
}

#[tokio::test]
async fn hardware_in_hello_matches_the_advertised_kinds() {
    let (home, root) = home_and_root("shim-hw");
    let platform = Platform::bind().await;
    let _shim = spawn_env(&home, &platform, &root, &["--enable-hardware"], &[]);
    let (_conn, hello) = platform.session(&["files"], |_| {}).await;
    let payload = &hello["payload"];
    let devices = payload["hardware_devices"].as_array().unwrap();
    let capabilities: Vec<&str> = payload["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for kind in ["serial", "usb", "gpio"] {
        let listed = devices.iter().any(|d| d["type"] == kind);
        let advertised = capabilities.contains(&format!("hardware_{kind}").as_str());
        assert_eq!(listed, advertised, "{kind}: {hello}");
    }
    for device in devices {
        assert!(
            device["id"].is_string() && device["desc"].is_string(),
            "{device}"
        );
    }
}
