//! Tests of [`super`]: configuration checks, request bodies, answer parsing, and calls to a
//! real HTTP server on loopback.

use serde_json::{Value, json};
use time::OffsetDateTime;

use super::{answer::looks_like_url, *};
use crate::{
    clock::ManualClock,
    guide::guidance::model::Bounds,
    guide::guidance::{
        model::{Element, GuidanceStatus, Observation, ScrollDirection, Target, UiAction},
        validate::result_is_valid,
    },
    guide::png_sanitise::SanitisedPng,
    llm::{ApiKey, AuthHeader, RawResponse},
};

const KEY: &str = "sk-test-SECRET-0123456789";
const REMOTE: &str = "https://models.example.com/v1/chat/completions";
const LOCAL: &str = "http://127.0.0.1:8080/v1/chat/completions";

fn remote() -> ModelSettings {
    ModelSettings {
        allow_remote: Some("true".to_owned()),
        url: Some(REMOTE.to_owned()),
        name: Some("gpt-test".to_owned()),
        api_key: Some(ApiKey::new(KEY.to_owned())),
        auth_header: None,
    }
}

fn local() -> ModelSettings {
    ModelSettings {
        allow_remote: None,
        url: Some(LOCAL.to_owned()),
        api_key: None,
        ..remote()
    }
}

fn accepts(settings: ModelSettings) -> bool {
    ModelConfig::from_settings(settings).is_ok()
}

fn with_url(url: &str) -> ModelSettings {
    ModelSettings {
        url: Some(url.to_owned()),
        ..remote()
    }
}

#[test]
fn a_remote_model_needs_true_approval() {
    let config = ModelConfig::from_settings(remote()).unwrap();
    assert_eq!(config.url(), REMOTE);
    assert_eq!(config.name(), "gpt-test");
    assert_eq!(config.api_key().map(ApiKey::expose), Some(KEY));
    assert_eq!(config.auth_header(), AuthHeader::Bearer);
    for flag in ["true", "TRUE", "True"] {
        let settings = ModelSettings {
            allow_remote: Some(flag.to_owned()),
            ..remote()
        };
        assert!(accepts(settings), "{flag}");
    }
    for flag in [
        Some("1"),
        Some("yes"),
        Some("false"),
        Some(""),
        Some(" true"),
        None,
    ] {
        let settings = ModelSettings {
            allow_remote: flag.map(str::to_owned),
            ..remote()
        };
        assert!(!accepts(settings), "{flag:?}");
    }
}

#[test]
fn url_rules() {
    let long = |n: usize| format!("https://h.example/{}", "a".repeat(n - 18));
    assert_eq!(long(4096).chars().count(), 4096);
    assert!(accepts(with_url(&long(4096))));
    assert!(!accepts(with_url(&long(4097))));
    let good = [
        "https://models.example.com/v1",
        "HTTPS://models.example.com/v1",
        "https://models.example.com:443/v1?api-version=1",
        "https://models.example.com:65535/v1",
        "https://10.0.0.5/v1",
        "https://[2001:db8::1]:8443/v1",
    ];
    for url in good {
        assert!(accepts(with_url(url)), "{url}");
    }
    let bad = [
        "",
        "https://models.example.com/v 1",
        "https://models.example.com/v1\t",
        "https://models.example.com/v1\n",
        "https://models.example.com/v1\u{7f}",
        "https://models.example.com\\v1",
        "https://models.example.com/v1#frag",
        "http://models.example.com/v1",
        "ftp://models.example.com/v1",
        "https:models.example.com/v1",
        "https:///v1",
        "https://models.example.com",
        "https://models.example.com/",
        "https://models.example.com/?q=1",
        "https://user@models.example.com/v1",
        "https://user:pw@models.example.com/v1",
        "https://@models.example.com/v1",
        "https://models.example.com:0/v1",
        "https://models.example.com:65536/v1",
        "https://models.example.com:/v1",
        "https://models.example.com:x1/v1",
        "https://models.example.com:1:2/v1",
        "https://[::1/v1",
        "https://[not-ip]/v1",
        "https://mod%65ls.example.com/v1",
        "https://models<.example.com/v1",
    ];
    for url in bad {
        assert!(!accepts(with_url(url)), "{url:?}");
    }
    assert!(!accepts(ModelSettings {
        url: None,
        ..remote()
    }));
}

#[test]
fn a_loopback_model_needs_no_approval_and_no_key() {
    let config = ModelConfig::from_settings(local()).unwrap();
    assert_eq!(config.api_key(), None);
    for url in [
        LOCAL,
        "http://localhost:8080/v1/chat/completions",
        "http://LOCALHOST/v1",
        "http://127.200.3.4/v1",
        "http://[::1]:8080/v1",
        "https://localhost:8443/v1",
    ] {
        let settings = ModelSettings {
            url: Some(url.to_owned()),
            allow_remote: Some("false".to_owned()),
            ..local()
        };
        assert!(accepts(settings), "{url}");
    }
    // Only the three loopback spellings count; look-alikes are remote and need https.
    for url in [
        "http://128.0.0.1/v1",
        "http://localhost./v1",
        "http://localhost.example.com/v1",
        "http://0x7f.0.0.1/v1",
        "http://2130706433/v1",
        "http://127.000.0.1/v1",
        "http://[::ffff:127.0.0.1]/v1",
        "http://127.0.0.1:0/v1",
        "http://127.0.0.1/",
    ] {
        let settings = ModelSettings {
            url: Some(url.to_owned()),
            allow_remote: Some("true".to_owned()),
            api_key: Some(ApiKey::new(KEY.to_owned())),
            ..local()
        };
        assert!(!accepts(settings), "{url}");
    }
    // A key that is given must still be valid.
    let settings = ModelSettings {
        api_key: Some(ApiKey::new(String::new())),
        ..local()
    };
    assert!(!accepts(settings));
    let settings = ModelSettings {
        api_key: Some(ApiKey::new(KEY.to_owned())),
        ..local()
    };
    assert!(accepts(settings));
}

#[test]
fn name_key_and_header_rules() {
    let name = |n: Option<String>| ModelSettings {
        name: n,
        ..remote()
    };
    assert!(accepts(name(Some("n".repeat(256)))));
    assert!(accepts(name(Some("llama 3.1 8B – instruct".to_owned()))));
    for bad in [None, Some(String::new()), Some("  \t".to_owned())] {
        assert!(!accepts(name(bad)));
    }
    for bad in ["n".repeat(257), "a\nb".to_owned(), "a\u{7f}".to_owned()] {
        assert!(!accepts(name(Some(bad))));
    }

    let key = |k: Option<String>| ModelSettings {
        api_key: k.map(ApiKey::new),
        ..remote()
    };
    assert!(accepts(key(Some("k".repeat(8192)))));
    assert!(accepts(key(Some("!~".to_owned()))));
    assert!(!accepts(key(None)), "a remote model needs a key");
    for bad in [
        String::new(),
        "k".repeat(8193),
        "sk key".to_owned(),
        "sk\u{e9}".to_owned(),
        "sk\u{7f}".to_owned(),
        "sk\n".to_owned(),
    ] {
        assert!(!accepts(key(Some(bad))));
    }

    let header = |h: Option<&str>| {
        ModelConfig::from_settings(ModelSettings {
            auth_header: h.map(str::to_owned),
            ..remote()
        })
        .map(|c| c.auth_header())
    };
    assert_eq!(header(None), Ok(AuthHeader::Bearer));
    assert_eq!(header(Some("bearer")), Ok(AuthHeader::Bearer));
    assert_eq!(header(Some("api-key")), Ok(AuthHeader::ApiKey));
    for bad in ["", "Bearer", "apikey", "basic"] {
        assert_eq!(header(Some(bad)), Err(InvalidModelConfig), "{bad}");
    }
}

#[test]
fn the_key_never_prints() {
    let settings = remote();
    assert!(!format!("{settings:?}").contains(KEY));
    let config = ModelConfig::from_settings(settings).unwrap();
    assert!(!format!("{config:?}").contains(KEY));
    let provider = OpenAiProvider::new(config, Arc::new(ManualClock::new())).unwrap();
    assert!(!format!("{provider:?}").contains(KEY));
    let refused = ModelConfig::from_settings(ModelSettings {
        allow_remote: None,
        ..remote()
    })
    .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "Invalid or unapproved model configuration"
    );
}

#[test]
fn the_client_gets_the_origin_as_its_base() {
    assert_eq!(origin(REMOTE), "https://models.example.com");
    assert_eq!(origin("http://[::1]:8080/v1?x=1"), "http://[::1]:8080");
    let url = "https://models.example.com/openai/chat/completions?api-version=2024-10-21";
    let config = ModelConfig::from_settings(with_url(url)).unwrap();
    let provider = OpenAiProvider::new(config, Arc::new(ManualClock::new())).unwrap();
    assert_eq!(provider.config.url(), url);
}

#[test]
fn the_deadline_follows_the_observation_age() {
    let now = OffsetDateTime::now_utc();
    let s = time::Duration::seconds;
    let deadline = |age: time::Duration| call_deadline(now - age, now);
    assert_eq!(deadline(s(0)), Some(Duration::from_secs(10)));
    assert_eq!(deadline(s(-5)), Some(Duration::from_secs(10)));
    assert_eq!(deadline(s(40)), Some(Duration::from_secs(10)));
    assert_eq!(
        deadline(time::Duration::milliseconds(40_500)),
        Some(Duration::from_millis(9500))
    );
    assert_eq!(deadline(s(45)), Some(Duration::from_secs(5)));
    assert_eq!(deadline(s(50)), None);
    assert_eq!(deadline(s(59)), None);
}

#[tokio::test]
async fn no_time_left_means_nothing_is_sent() {
    let clock = ManualClock::new();
    let provider = OpenAiProvider::new(
        ModelConfig::from_settings(local()).unwrap(),
        Arc::new(clock),
    )
    .unwrap();
    let mut obs = observation(vec![button()]);
    obs.captured_at = OffsetDateTime::now_utc() - time::Duration::seconds(50);
    let request = ProviderRequest {
        prompt: "What next?",
        observation: &obs,
        budget: Duration::from_secs(52),
        task: None,
        plan: false,
    };
    assert_eq!(provider.guide(request).await, Err(ProviderError::Timeout));
    assert_eq!(provider.name(), "openai-compatible");
    assert_eq!(provider.mode(), Mode::Model);
}

fn legacy(obs: &Observation) -> ProviderRequest<'_> {
    ProviderRequest {
        prompt: "What next?",
        observation: obs,
        budget: Duration::from_secs(52),
        task: None,
        plan: false,
    }
}

fn button() -> Element {
    Element {
        role: "button".to_owned(),
        label: "View logs".to_owned(),
        bounds: Bounds {
            x: 0.1,
            y: 0.2,
            width: 0.3,
            height: 0.1,
        },
        confidence: 0.95,
        process_id: Some(42),
        target_id: Some("t1".to_owned()),
        automation_id: Some("ViewLogs".to_owned()),
        framework_id: Some("WPF".to_owned()),
        is_enabled: Some(true),
        is_offscreen: Some(false),
        targetable: Some(true),
        action: Some(UiAction::Invoke),
        ..Element::default()
    }
}

fn text_field() -> Element {
    Element {
        role: "edit".to_owned(),
        label: "Search".to_owned(),
        bounds: Bounds {
            x: 0.5,
            y: 0.5,
            width: 0.2,
            height: 0.1,
        },
        target_id: Some("t2".to_owned()),
        control_id: Some("c2".to_owned()),
        action: Some(UiAction::SetValue),
        is_password: Some(false),
        is_read_only: Some(false),
        value_hash: Some("e".repeat(64)),
        value_length: Some(0),
        is_selected: Some(false),
        ..button()
    }
}

fn list() -> Element {
    Element {
        role: "list".to_owned(),
        label: "Results".to_owned(),
        bounds: Bounds {
            x: 0.1,
            y: 0.5,
            width: 0.2,
            height: 0.4,
        },
        target_id: Some("t3".to_owned()),
        action: Some(UiAction::Scroll),
        scroll_directions: vec![ScrollDirection::Down],
        ..button()
    }
}

fn observation(elements: Vec<Element>) -> Observation {
    Observation {
        id: "obs-1".to_owned(),
        window_id: "win-1".to_owned(),
        application: "MSGuide Demo".to_owned(),
        captured_at: OffsetDateTime::now_utc(),
        width: 4,
        height: 2,
        ocr_text: "Build overview".to_owned(),
        elements,
        image: None,
        automation_complete: true,
        resource_id: None,
    }
}

fn observed() -> Observation {
    observation(vec![button(), text_field(), list()])
}

fn text_part(body: &Value) -> Value {
    let parts = body["messages"][1]["content"].as_array().unwrap();
    let text = parts.last().unwrap();
    assert_eq!(text["type"], "text");
    serde_json::from_str(text["text"].as_str().unwrap()).unwrap()
}

fn has_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.iter().any(has_null),
        Value::Object(map) => map.values().any(has_null),
        Value::Bool(_) | Value::Number(_) | Value::String(_) => false,
    }
}

#[test]
fn request_without_an_image_is_text_only() {
    let obs = observed();
    let body = request_body("gpt-test", &legacy(&obs)).unwrap();
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        [
            "max_tokens",
            "messages",
            "model",
            "response_format",
            "stream"
        ],
        "no tools, functions or tool_choice"
    );
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["stream"], false);
    assert_eq!(body["max_tokens"], 1200);
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": SYSTEM_POLICY})
    );
    assert_eq!(messages[1]["role"], "user");
    assert_eq!(messages[1]["content"].as_array().unwrap().len(), 1);

    let raw = body["messages"][1]["content"][0]["text"].as_str().unwrap();
    assert!(
        raw.starts_with(r#"{"request":"What next?","untrustedObservation":{"id":"obs-1""#),
        "the reference's key order: {raw}"
    );
    let text = text_part(&body);
    let mut keys: Vec<&String> = text.as_object().unwrap().keys().collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "planRequested",
            "request",
            "untrustedObservation",
            "untrustedTask"
        ]
    );
    assert_eq!(text["request"], "What next?");
    assert_eq!(text["untrustedTask"], Value::Null);
    assert_eq!(text["planRequested"], false);
    let seen = &text["untrustedObservation"];
    assert!(!has_null(seen));
    assert_eq!(seen["windowId"], "win-1");
    assert_eq!(seen["automationComplete"], true);
    assert!(seen.get("imageBase64").is_none());
    assert!(seen.get("resourceId").is_none());
    assert_eq!(
        seen["elements"][0],
        json!({
            "role": "button", "label": "View logs", "box": [0.1, 0.2, 0.3, 0.1],
            "confidence": 0.95, "processId": 42, "targetId": "t1",
            "automationId": "ViewLogs", "frameworkId": "WPF", "isEnabled": true,
            "isOffscreen": false, "targetable": true, "action": "invoke",
            "scrollDirections": [],
        })
    );
    assert_eq!(seen["elements"][2]["scrollDirections"], json!(["down"]));
}

#[test]
fn a_shared_image_goes_first_and_only_as_an_image() {
    let mut obs = observed();
    obs.image = Some(SanitisedPng {
        // Its base64 is iVBORw0KGgo=.
        bytes: vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A],
        width: 4,
        height: 2,
    });
    let body = request_body("gpt-test", &legacy(&obs)).unwrap();
    let parts = body["messages"][1]["content"].as_array().unwrap();
    assert_eq!(parts.len(), 2);
    assert_eq!(
        parts[0],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}})
    );
    let text = parts[1]["text"].as_str().unwrap();
    assert!(!text.contains("iVBORw0KGgo="));
    assert!(!has_null(&text_part(&body)["untrustedObservation"]));
}

fn envelope_with(message: &Value) -> RawResponse {
    let body = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    });
    RawResponse {
        status: 200,
        content_encoding: None,
        body: body.to_string().into_bytes(),
    }
}

fn answer(content: &str) -> RawResponse {
    envelope_with(&json!({"role": "assistant", "content": content}))
}

fn parse(response: &RawResponse) -> Result<GuidanceResult, ProviderError> {
    parse_response(response, &observed(), false)
}

fn parse_output(output: &Value) -> Result<GuidanceResult, ProviderError> {
    parse(&answer(&output.to_string()))
}

#[test]
fn a_valid_answer_points_at_the_indexed_element() {
    let result = parse_output(&json!({
        "instruction": "Select View logs yourself, then check the screen again.",
        "status": "next_step",
        "targetIndex": 0,
        "value": null,
        "scrollDirection": null,
        "remainingWork": null,
        "plan": null,
    }))
    .unwrap();
    let expected = GuidanceResult {
        instruction: "Select View logs yourself, then check the screen again.".to_owned(),
        status: GuidanceStatus::NextStep,
        target: Some(Target::from_element(&button())),
        citations: vec![],
        mode: Mode::Model,
        remaining_work: None,
        plan: None,
    };
    assert_eq!(result, expected);

    let typed = parse_output(&json!({
        "instruction": "Type the build id.", "status": "next_step", "targetIndex": 1,
        "value": "1234", "remainingWork": "Then press Search.",
    }))
    .unwrap();
    let target = typed.target.unwrap();
    assert_eq!(target.value.as_deref(), Some("1234"));
    assert_eq!(target.value_hash, text_field().value_hash);
    assert_eq!(target.control_id.as_deref(), Some("c2"));
    assert_eq!(target.is_selected, Some(false));
    assert_eq!(typed.remaining_work.as_deref(), Some("Then press Search."));

    let scrolled = parse_output(&json!({
        "instruction": "Scroll the results down.", "status": "next_step", "targetIndex": 2,
        "scrollDirection": "down",
    }))
    .unwrap();
    assert_eq!(
        scrolled.target.unwrap().scroll_direction,
        Some(ScrollDirection::Down)
    );

    for status in [
        "clarification",
        "needs_input",
        "blocked",
        "completion_candidate",
    ] {
        let result =
            parse_output(&json!({"instruction": "Share the window again.", "status": status}))
                .unwrap();
        assert_eq!(result.status.as_str(), status);
        assert_eq!(result.target, None);
    }
}

#[test]
fn completed_becomes_a_suggestion() {
    let result =
        parse_output(&json!({"instruction": "The issue is resolved.", "status": "completed"}))
            .unwrap();
    assert_eq!(result.status, GuidanceStatus::CompletionCandidate);
    assert_eq!(
        result.instruction,
        "Suggested completion only; verify with fresh screen evidence: The issue is resolved."
    );
    assert_eq!(result.target, None);
    let long = "x".repeat(3800);
    let result = parse_output(&json!({"instruction": long, "status": "completed"})).unwrap();
    assert!(result_is_valid(&result), "the prefix still fits 4000");
    assert!(
        parse_output(&json!({"instruction": "Done.", "status": "completed", "targetIndex": 0}))
            .is_err()
    );
}

#[test]
fn inert_message_metadata_is_accepted() {
    let content = json!({"instruction": "Wait.", "status": "clarification"}).to_string();
    let message = json!({
        "role": "assistant", "content": content, "refusal": null,
        "annotations": [], "tool_calls": [], "function_call": null,
    });
    assert!(parse(&envelope_with(&message)).is_ok());
    let message =
        json!({"role": "assistant", "content": content, "tool_calls": null, "annotations": null});
    assert!(parse(&envelope_with(&message)).is_ok());
    let mut identity = answer(&content);
    identity.content_encoding = Some("identity".to_owned());
    assert!(parse(&identity).is_ok());
    // Exactly 16 KiB of content passes; whitespace keeps it valid JSON.
    let padded = format!("{content:<16384}");
    assert_eq!(padded.len(), MAX_CONTENT_BYTES);
    assert!(parse(&answer(&padded)).is_ok());
}

#[test]
fn bad_envelopes_fail_closed() {
    let content = json!({"instruction": "Wait.", "status": "clarification"}).to_string();
    let good = answer(&content);
    let mut cases: Vec<(&str, RawResponse)> = Vec::new();
    for status in [201, 301, 302, 307, 308, 401, 429, 500] {
        cases.push((
            "status",
            RawResponse {
                status,
                ..good.clone()
            },
        ));
    }
    for encoding in ["gzip", "deflate", "br"] {
        cases.push((
            "encoding",
            RawResponse {
                content_encoding: Some(encoding.to_owned()),
                ..good.clone()
            },
        ));
    }
    let raw = |body: String| RawResponse {
        status: 200,
        content_encoding: None,
        body: body.into_bytes(),
    };
    let choice =
        json!({"finish_reason": "stop", "message": {"role": "assistant", "content": content}});
    cases.push(("malformed", raw("{\"choices\": [".to_owned())));
    cases.push(("not an object", raw("[]".to_owned())));
    cases.push(("no choices", raw("{}".to_owned())));
    cases.push(("zero choices", raw(json!({"choices": []}).to_string())));
    cases.push((
        "two choices",
        raw(json!({"choices": [choice, choice]}).to_string()),
    ));
    cases.push((
        "duplicate key",
        raw(format!(
            r#"{{"choices": [{choice}], "choices": [{choice}]}}"#
        )),
    ));
    cases.push((
        "NaN",
        raw(format!(r#"{{"choices": [{choice}], "score": NaN}}"#)),
    ));
    cases.push((
        "Infinity",
        raw(format!(r#"{{"choices": [{choice}], "score": Infinity}}"#)),
    ));
    cases.push((
        "trailing data",
        raw(format!(r#"{{"choices": [{choice}]}} x"#)),
    ));
    for finish in [json!("length"), json!("tool_calls"), json!(null)] {
        let mut c = choice.clone();
        c["finish_reason"] = finish;
        cases.push(("finish_reason", raw(json!({"choices": [c]}).to_string())));
    }
    let message = |extra: Value| {
        let mut m = json!({"role": "assistant", "content": content});
        for (k, v) in extra.as_object().unwrap() {
            m[k] = v.clone();
        }
        envelope_with(&m)
    };
    cases.push(("extra message key", message(json!({"name": "x"}))));
    cases.push(("role", message(json!({"role": "user"}))));
    cases.push(("refusal", message(json!({"refusal": "I can't"}))));
    cases.push((
        "tool_calls",
        message(json!({"tool_calls": [{"id": "1", "type": "function"}]})),
    ));
    cases.push((
        "function_call",
        message(json!({"function_call": {"name": "x"}})),
    ));
    cases.push((
        "annotations",
        message(json!({"annotations": [{"type": "url"}]})),
    ));
    cases.push(("content null", message(json!({"content": null}))));
    cases.push(("content object", message(json!({"content": {"a": 1}}))));
    cases.push(("no role", envelope_with(&json!({"content": content}))));
    cases.push(("content too large", answer(&format!("{content:<16385}"))));
    for (why, response) in cases {
        assert_eq!(parse(&response), Err(ProviderError::InvalidResult), "{why}");
    }
}

#[test]
fn bad_outputs_fail_closed() {
    let base =
        || json!({"instruction": "Select View logs.", "status": "next_step", "targetIndex": 0});
    let with = |key: &str, value: Value| {
        let mut o = base();
        o[key] = value;
        o
    };
    let without = |key: &str| {
        let mut o = base();
        o.as_object_mut().unwrap().remove(key);
        o
    };
    assert!(parse_output(&base()).is_ok());
    let mut cases = vec![
        ("no instruction", without("instruction")),
        ("no status", without("status")),
        ("extra key", with("citations", json!([]))),
        ("target key", with("target", json!({"label": "x"}))),
        ("plan", with("plan", json!({"steps": []}))),
        ("unknown status", with("status", json!("done"))),
        ("status case", with("status", json!("NEXT_STEP"))),
        ("instruction not string", with("instruction", json!(1))),
        ("empty instruction", with("instruction", json!(""))),
        ("blank instruction", with("instruction", json!(" \n\t "))),
        (
            "long instruction",
            with("instruction", json!("x".repeat(3801))),
        ),
        ("CR", with("instruction", json!("a\rb"))),
        ("NUL", with("instruction", json!("a\u{0}b"))),
        ("C1", with("instruction", json!("a\u{85}b"))),
        (
            "https",
            with("instruction", json!("Open https://example.com")),
        ),
        (
            "scheme",
            with("instruction", json!("Open Ms-Settings+x://privacy")),
        ),
        ("www", with("instruction", json!("Go to WWW.example.com"))),
        (
            "mailto",
            with("instruction", json!("Write to MailTo:a@b.c")),
        ),
        (
            "javascript",
            with("instruction", json!("Run javascript:alert(1)")),
        ),
        ("data", with("instruction", json!("Open DATA:text/html,x"))),
        ("true", with("targetIndex", json!(true))),
        ("string", with("targetIndex", json!("1"))),
        ("float", with("targetIndex", json!(1.0))),
        ("negative", with("targetIndex", json!(-1))),
        ("200", with("targetIndex", json!(200))),
        ("out of range", with("targetIndex", json!(3))),
        ("huge", with("targetIndex", json!(u64::MAX))),
        ("value on invoke", with("value", json!("x"))),
        ("scroll on invoke", with("scrollDirection", json!("down"))),
        (
            "remainingWork",
            with("remainingWork", json!("x".repeat(1001))),
        ),
        ("remainingWork type", with("remainingWork", json!(1))),
    ];
    for status in [
        "clarification",
        "blocked",
        "needs_input",
        "completion_candidate",
        "completed",
    ] {
        cases.push(("target on a non-next_step", with("status", json!(status))));
    }
    let untargeted = |extra: Value| {
        let mut o = json!({"instruction": "Wait.", "status": "next_step"});
        for (k, v) in extra.as_object().unwrap() {
            o[k] = v.clone();
        }
        o
    };
    cases.push(("value without target", untargeted(json!({"value": "x"}))));
    cases.push((
        "scroll without target",
        untargeted(json!({"scrollDirection": "up"})),
    ));
    let field = |extra: Value| {
        let mut o = json!({"instruction": "Type.", "status": "next_step", "targetIndex": 1});
        for (k, v) in extra.as_object().unwrap() {
            o[k] = v.clone();
        }
        o
    };
    cases.push(("set_value without value", field(json!({}))));
    cases.push(("value too long", field(json!({"value": "v".repeat(1001)}))));
    cases.push(("value control", field(json!({"value": "a\u{1b}b"}))));
    cases.push(("value not string", field(json!({"value": 5}))));
    let scroll = |direction: Value| json!({"instruction": "Scroll.", "status": "next_step", "targetIndex": 2, "scrollDirection": direction});
    cases.push(("direction not listed", scroll(json!("left"))));
    cases.push(("direction unknown", scroll(json!("sideways"))));
    cases.push(("scroll without direction", scroll(json!(null))));
    for (why, output) in cases {
        assert_eq!(
            parse_output(&output),
            Err(ProviderError::InvalidResult),
            "{why}"
        );
    }
    let duplicate =
        r#"{"instruction": "Select View logs.", "status": "next_step", "status": "blocked"}"#;
    assert_eq!(parse(&answer(duplicate)), Err(ProviderError::InvalidResult));
    assert_eq!(
        parse(&answer("not json")),
        Err(ProviderError::InvalidResult)
    );
    assert_eq!(parse(&answer("[]")), Err(ProviderError::InvalidResult));
    assert_eq!(
        parse(&answer(
            r#"{"instruction": "a", "status": "blocked", "x": NaN}"#
        )),
        Err(ProviderError::InvalidResult)
    );
}

#[test]
fn the_indexed_element_must_pass_target_validation() {
    let output =
        json!({"instruction": "Select View logs.", "status": "next_step", "targetIndex": 0});
    let check = |element: Element| {
        parse_response(
            &answer(&output.to_string()),
            &observation(vec![element]),
            false,
        )
    };
    assert!(check(button()).is_ok());
    assert_eq!(
        check(Element {
            confidence: 0.799,
            ..button()
        }),
        Err(ProviderError::InvalidResult)
    );
    // An acting element must be executable.
    assert_eq!(
        check(Element {
            is_offscreen: Some(true),
            ..button()
        }),
        Err(ProviderError::InvalidResult)
    );
    assert_eq!(
        check(Element {
            automation_id: Some(String::new()),
            ..button()
        }),
        Err(ProviderError::InvalidResult)
    );
    // A plain element without an action can be pointed at for the user to look at.
    assert!(
        check(Element {
            action: None,
            target_id: None,
            ..button()
        })
        .is_ok()
    );
    let mut incomplete = observation(vec![button()]);
    incomplete.automation_complete = false;
    assert_eq!(
        parse_response(&answer(&output.to_string()), &incomplete, false),
        Err(ProviderError::InvalidResult)
    );
}

#[test]
fn url_like_text_is_recognised() {
    for text in [
        "see http://x",
        "HTTPS://x",
        "a+b.c-d://x",
        "www.x",
        "mailto:x",
        "data:x",
    ] {
        assert!(looks_like_url(text), "{text}");
    }
    for text in ["Press Ctrl+C", "Ratio 3://", "Select View logs.", "wwwx"] {
        assert!(!looks_like_url(text), "{text}");
    }
}

mod socket;
