//! `/v1/guidance` with the openai-compatible model provider against a fake OpenAI-compatible
//! server on loopback: the one POST it makes, the indexed element as the target, and the
//! 502/504 answers that never carry the provider's text.

use std::sync::Arc;
use std::time::Duration;

use e2e::fake_llm::{FakeLlm, Reply};
use local_core::clock::SystemClock;
use local_core::guide::guidance::openai::{ModelConfig, ModelSettings, OpenAiProvider};
use serde_json::{Value, json};

use super::support::{Options, Server, button, guidance_body, observation};

const MODEL: &str = "tiny-model";

async fn server_for(fake: &FakeLlm) -> Server {
    let config = ModelConfig::from_settings(ModelSettings {
        allow_remote: None,
        url: Some(format!("{}/v1/chat/completions", fake.url())),
        name: Some(MODEL.to_owned()),
        api_key: None,
        auth_header: None,
    })
    .unwrap();
    let provider = OpenAiProvider::new(config, Arc::new(SystemClock)).unwrap();
    Server::with(Options {
        provider: Arc::new(provider),
        ..Options::default()
    })
    .await
}

fn answer(content: &Value) -> Reply {
    Reply::json(&content.to_string())
}

#[tokio::test]
async fn a_valid_answer_targets_the_indexed_element() {
    let fake = FakeLlm::openai(
        &[MODEL],
        answer(
            &json!({"instruction": "Select Save to keep your work.", "status": "next_step",
                       "targetIndex": 1}),
        ),
    )
    .await;
    let server = server_for(&fake).await;
    let health = server.get("/health").send().await;
    assert_eq!(health.json()["mode"], "model");

    let session = server.session().await;
    let obs = observation(&server, "Open\nSave", vec![button("Open"), button("Save")]);
    let res = server.guidance(&guidance_body(&session, obs)).await;
    assert_eq!(res.status, 200, "{}", res.text());
    let body = res.json();
    assert_eq!(body["mode"], "model");
    assert_eq!(body["status"], "next_step");
    assert_eq!(body["instruction"], "Select Save to keep your work.");
    assert_eq!(body["target"]["label"], "Save");
    // A model target carries the model keys, null when unset; the demo's never do.
    let mut keys: Vec<&str> = body["target"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "action",
            "automationId",
            "box",
            "confidence",
            "frameworkId",
            "isEnabled",
            "isOffscreen",
            "label",
            "processId",
            "scrollDirection",
            "targetId",
            "toggleState",
            "value",
            "valueHash"
        ]
    );

    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "exactly one POST");
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("accept-encoding"), Some("identity"));
    assert!(request.header("authorization").is_none());
    let sent = request.body.clone().unwrap();
    assert_eq!(sent["model"], MODEL);
    assert_eq!(sent["stream"], false);
    assert_eq!(sent["response_format"], json!({"type": "json_object"}));
    assert!(sent.get("tools").is_none());
}

#[tokio::test]
async fn completed_becomes_a_candidate_and_bad_answers_are_502_without_their_text() {
    let fake = FakeLlm::openai(
        &[MODEL],
        answer(&json!({"instruction": "All done.", "status": "completed", "targetIndex": null})),
    )
    .await;
    let server = server_for(&fake).await;
    let session = server.session().await;
    let obs = || observation(&server, "Save", vec![button("Save")]);
    let res = server.guidance(&guidance_body(&session, obs())).await;
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.json()["status"], "completion_candidate");
    assert!(
        res.json()["instruction"]
            .as_str()
            .unwrap()
            .starts_with("Suggested completion only; verify with fresh screen evidence: ")
    );

    let leaky = "LEAKED-PROVIDER-TEXT visit https://evil.example";
    for bad in [
        answer(&json!({"instruction": leaky, "status": "next_step", "targetIndex": 0})),
        answer(&json!({"instruction": "Fine.", "status": "next_step", "targetIndex": 7})),
        answer(&json!({"instruction": "Fine.", "status": "next_step", "extra": 1})),
        Reply::status(500, leaky),
    ] {
        fake.set_reply(bad);
        let res = server.guidance(&guidance_body(&session, obs())).await;
        assert_eq!(res.status, 502, "{}", res.text());
        assert_eq!(res.json(), json!({"detail": "Invalid guidance result"}));
        assert!(!res.text().contains("LEAKED"));
    }

    // A model slower than the call's deadline is a 504.
    fake.set_reply(
        answer(&json!({"instruction": "Late.", "status": "clarification"}))
            .first_byte_delay(Duration::from_secs(15)),
    );
    let res = server.guidance(&guidance_body(&session, obs())).await;
    assert_eq!(res.status, 504, "{}", res.text());
}

fn executable(label: &str, control: &str) -> Value {
    json!({"role": "button", "label": label, "box": [0.1, 0.2, 0.3, 0.1], "confidence": 0.95,
           "targetId": format!("t-{control}"), "controlId": control, "isEnabled": true,
           "isOffscreen": false, "targetable": true, "action": "invoke", "frameworkId": "WPF"})
}

fn plan_answer(steps: &Value, boundary: &str) -> Value {
    json!({"instruction": "Follow these steps.", "status": "next_step",
           "plan": {"steps": steps, "boundary": {"kind": boundary,
                    "reason": "Look again after these.", "needed": "A fresh observation."}}})
}

#[tokio::test]
async fn plan_mode_asks_for_a_plan_and_refuses_bad_ones() {
    let first = json!({"kind": "action", "instruction": "Select Save.", "targetIndex": 1});
    let later = json!({"kind": "action", "instruction": "Then confirm.",
                       "intent": {"role": "button", "label": "Confirm", "action": "invoke"}});
    let fake = FakeLlm::openai(
        &[MODEL],
        answer(&plan_answer(&json!([first, later]), "observation")),
    )
    .await;
    let server = server_for(&fake).await;
    let session = server.session().await;
    let body = || {
        let obs = observation(
            &server,
            "Open\nSave",
            vec![executable("Open", "c-0"), executable("Save", "c-1")],
        );
        let mut body = guidance_body(&session, obs);
        body["planSegments"] = json!(true);
        body["task"] = json!({"taskId": "3f0c9a52-8d4e-4b7a-9c1d-2e5f6a7b8c9d", "step": 2,
            "history": [{"step": 1, "observationId": "obs-0", "targetId": "t-c-0", "label": "Open",
                         "action": "invoke", "outcome": "screen_changed"}]});
        body
    };
    let res = server.guidance(&body()).await;
    assert_eq!(res.status, 200, "{}", res.text());
    let answer_body = res.json();
    assert_eq!(
        (answer_body["status"].as_str(), &answer_body["target"]),
        (Some("next_step"), &Value::Null)
    );
    assert_eq!(
        (answer_body["taskId"].as_str(), answer_body["step"].as_u64()),
        (Some("3f0c9a52-8d4e-4b7a-9c1d-2e5f6a7b8c9d"), Some(2))
    );
    let plan = &answer_body["plan"];
    assert_eq!(plan["windowId"], "win-1");
    assert_eq!(
        plan["steps"][0]["controlId"], "c-1",
        "the indexed element's control id"
    );
    assert_eq!(
        plan["steps"][0]["intent"],
        json!({"role": "button", "label": "Save", "action": "invoke", "frameworkId": "WPF"})
    );
    assert_eq!(plan["steps"][1]["controlId"], Value::Null);

    let sent = fake.requests()[0].body.clone().unwrap();
    assert_eq!(sent["max_tokens"], 8000);
    let text: Value =
        serde_json::from_str(sent["messages"][1]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["planRequested"], true);
    assert!(text["planSchema"].is_object());
    assert_eq!(text["untrustedTask"]["history"][0]["label"], "Open");

    let leaky = "LEAKED-PROVIDER-TEXT";
    for bad in [
        // A single step answered to a plan request.
        json!({"instruction": "Select Save.", "status": "next_step", "targetIndex": 1}),
        plan_answer(
            &json!([{"kind": "action", "instruction": leaky, "targetIndex": 9}]),
            "observation",
        ),
        plan_answer(
            &json!([{"kind": "manual", "instruction": "By hand."}, later]),
            "observation",
        ),
        plan_answer(&json!([later]), "finished"),
        plan_answer(&json!(vec![later.clone(); 32]), "completion_candidate"),
    ] {
        fake.set_reply(answer(&bad));
        let res = server.guidance(&body()).await;
        assert_eq!(res.status, 502, "{bad}: {}", res.text());
        assert_eq!(res.json(), json!({"detail": "Invalid guidance result"}));
        assert_eq!(
            res.header("x-msguide-error-code"),
            Some("guidance-invalid-result")
        );
        assert!(!res.text().contains("LEAKED"));
    }
}
