//! The local LLM client against a fake backend on a real socket: model listing, streamed
//! completions in both dialects, failure mapping, timeouts, cancellation, and `post_exact`.

use std::time::{Duration, Instant};

use e2e::fake_llm::{FakeKind, FakeLlm, Reply, closed_port_url};
use local_core::llm::{
    ApiKey, AuthHeader, BACKEND_ERROR_MAX_CHARS, BackendConfig, BackendKind, ChatMessage,
    ChatRequest, Completion, FinishReason, LlmClient, LlmError, TokenCounts, TransportError,
};
use serde_json::{Value, json};

const MODEL: &str = "llama3.2:3b";

fn config(kind: BackendKind, url: &str) -> BackendConfig {
    BackendConfig {
        kind,
        base_url: url.to_owned(),
        api_key: None,
        auth_header: AuthHeader::Bearer,
        connect_timeout: Duration::from_secs(5),
        total_timeout: Duration::from_secs(30),
        list_timeout: Duration::from_secs(5),
    }
}

fn client(kind: BackendKind, url: &str) -> LlmClient {
    LlmClient::new(config(kind, url)).unwrap()
}

const fn backend(kind: FakeKind) -> BackendKind {
    match kind {
        FakeKind::Ollama => BackendKind::Ollama,
        FakeKind::OpenAi => BackendKind::OpenAiCompatible,
    }
}

const KINDS: [FakeKind; 2] = [FakeKind::Ollama, FakeKind::OpenAi];

fn request(model: &str) -> ChatRequest {
    ChatRequest {
        model: model.to_owned(),
        messages: vec![
            ChatMessage {
                role: "system".to_owned(),
                content: "You are terse.".to_owned(),
            },
            ChatMessage {
                role: "user".to_owned(),
                content: "Say hello.".to_owned(),
            },
        ],
        max_tokens: 64,
        temperature: 0.25,
        top_p: 0.5,
    }
}

/// Runs a completion, returning it and the deltas in the order they were delivered.
async fn chat(client: &LlmClient, model: &str) -> (Result<Completion, LlmError>, Vec<String>) {
    let mut deltas = Vec::new();
    let result = client
        .chat_stream(&request(model), |delta| deltas.push(delta.to_owned()))
        .await;
    (result, deltas)
}

fn backend_error(err: LlmError) -> String {
    match err {
        LlmError::Failed { backend_error } => backend_error,
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn lists_models_in_both_dialects() {
    for kind in KINDS {
        let fake = FakeLlm::start(kind, &[MODEL, "qwen2.5:0.5b"], Reply::default()).await;
        let models = client(backend(kind), &fake.url())
            .list_models()
            .await
            .unwrap();
        assert_eq!(models, [MODEL, "qwen2.5:0.5b"], "{kind:?}");
        let seen = fake.last_request().unwrap();
        assert_eq!(seen.method, "GET");
        let path = match kind {
            FakeKind::Ollama => "/api/tags",
            FakeKind::OpenAi => "/v1/models",
        };
        assert_eq!(seen.path, path);
        assert_eq!(seen.header("accept-encoding"), Some("identity"));
        assert_eq!(seen.header("authorization"), None);
    }
}

#[tokio::test]
async fn model_listing_failures() {
    let fake = FakeLlm::ollama(&[MODEL], Reply::status(500, "tags broke")).await;
    let err = client(BackendKind::Ollama, &fake.url())
        .list_models()
        .await
        .unwrap_err();
    assert_eq!(backend_error(err), "tags broke");

    // An Ollama fake does not serve the OpenAI paths.
    fake.set_reply(Reply::default());
    let err = client(BackendKind::OpenAiCompatible, &fake.url())
        .list_models()
        .await
        .unwrap_err();
    assert_eq!(backend_error(err), "404 page not found");

    fake.set_reply(Reply::default().first_byte_delay(Duration::from_secs(3)));
    let mut slow = config(BackendKind::Ollama, &fake.url());
    slow.list_timeout = Duration::from_millis(200);
    let started = Instant::now();
    let err = LlmClient::new(slow).unwrap().list_models().await;
    assert_eq!(err, Err(LlmError::Timeout));
    assert!(started.elapsed() < Duration::from_secs(2));

    let err = client(BackendKind::Ollama, &closed_port_url())
        .list_models()
        .await
        .unwrap_err();
    assert!(!backend_error(err).is_empty());
}

#[tokio::test]
async fn ollama_streams_deltas_and_counts() {
    let reply = Reply::text(&["Hel", "lo", " w\u{f6}rld"])
        .finish(Some("length"))
        .tokens(12, 3)
        .chunk_delay(Duration::from_millis(5));
    let fake = FakeLlm::ollama(&[MODEL], reply).await;
    let client = client(BackendKind::Ollama, &fake.url());
    let (result, deltas) = chat(&client, MODEL).await;
    let completion = result.unwrap();
    assert_eq!(deltas, ["Hel", "lo", " w\u{f6}rld"]);
    assert_eq!(completion.content, "Hello w\u{f6}rld");
    assert_eq!(completion.finish_reason, FinishReason::Length);
    assert_eq!(
        completion.tokens,
        TokenCounts {
            prompt: Some(12),
            completion: Some(3),
            total: Some(15)
        }
    );
    assert!(completion.duration > Duration::ZERO);

    let seen = fake.last_request().unwrap();
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("POST", "/api/chat")
    );
    assert_eq!(seen.header("accept-encoding"), Some("identity"));
    assert_eq!(
        seen.body.unwrap(),
        json!({
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Say hello."},
            ],
            "stream": true,
            "options": {"temperature": 0.25, "top_p": 0.5, "num_predict": 64},
        })
    );
}

#[tokio::test]
async fn openai_streams_deltas_and_usage() {
    let reply = Reply::text(&["Hi", " there"])
        .finish(Some("content_filter"))
        .tokens(4, 2);
    let fake = FakeLlm::openai(&[MODEL], reply).await;
    let mut config = config(BackendKind::OpenAiCompatible, &fake.url());
    config.api_key = Some(ApiKey::new("sk-local-key".to_owned()));
    let client = LlmClient::new(config).unwrap();
    let (result, deltas) = chat(&client, MODEL).await;
    let completion = result.unwrap();
    assert_eq!(deltas, ["Hi", " there"]);
    assert_eq!(completion.content, "Hi there");
    assert_eq!(completion.finish_reason, FinishReason::ContentFilter);
    assert_eq!(
        completion.tokens,
        TokenCounts {
            prompt: Some(4),
            completion: Some(2),
            total: Some(6)
        }
    );

    let seen = fake.last_request().unwrap();
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.header("authorization"), Some("Bearer sk-local-key"));
    assert_eq!(
        seen.body.unwrap(),
        json!({
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Say hello."},
            ],
            "stream": true,
            "max_tokens": 64,
            "temperature": 0.25,
            "top_p": 0.5,
            "stream_options": {"include_usage": true},
        })
    );

    // A base URL that already ends in /v1 is not doubled.
    let again = LlmClient::new(self::config(
        BackendKind::OpenAiCompatible,
        &format!("{}/v1/", fake.url()),
    ))
    .unwrap();
    assert_eq!(again.list_models().await.unwrap(), [MODEL]);
    assert_eq!(fake.last_request().unwrap().path, "/v1/models");
}

#[tokio::test]
async fn openai_servers_that_do_not_stream_still_complete() {
    let fake = FakeLlm::openai(&[MODEL], Reply::json("The whole answer").tokens(3, 4)).await;
    let (result, deltas) = chat(&client(BackendKind::OpenAiCompatible, &fake.url()), MODEL).await;
    let completion = result.unwrap();
    assert_eq!(deltas, ["The whole answer"]);
    assert_eq!(completion.content, "The whole answer");
    assert_eq!(completion.finish_reason, FinishReason::Stop);
    assert_eq!(completion.tokens.total, Some(7));
}

#[tokio::test]
async fn finish_reasons_map_and_missing_counts_stay_unknown() {
    for kind in KINDS {
        let fake = FakeLlm::start(kind, &[MODEL], Reply::text(&["a"])).await;
        let client = client(backend(kind), &fake.url());
        for (reason, expected) in [
            (Some("stop"), FinishReason::Stop),
            (Some("length"), FinishReason::Length),
            (Some("content_filter"), FinishReason::ContentFilter),
            (Some("tool_calls"), FinishReason::Stop),
            (Some("unload"), FinishReason::Stop),
            (None, FinishReason::Stop),
        ] {
            fake.set_reply(Reply::text(&["a"]).finish(reason));
            let completion = chat(&client, MODEL).await.0.unwrap();
            assert_eq!(completion.finish_reason, expected, "{kind:?} {reason:?}");
            assert_eq!(completion.tokens, TokenCounts::default());
            assert_eq!(completion.content, "a");
        }
        fake.set_reply(Reply::text(&[]).tokens(5, 0));
        let completion = chat(&client, MODEL).await.0.unwrap();
        assert_eq!(completion.content, "");
        assert_eq!(completion.tokens.total, Some(5), "{kind:?}");
    }
}

#[tokio::test]
async fn malformed_lines_are_skipped_and_split_lines_joined() {
    for kind in KINDS {
        let reply = Reply::text(&["one ", "tw\u{e9}", " three"])
            .tokens(1, 3)
            .malformed()
            .split()
            .chunk_delay(Duration::from_millis(2));
        let fake = FakeLlm::start(kind, &[MODEL], reply).await;
        let (result, deltas) = chat(&client(backend(kind), &fake.url()), MODEL).await;
        let completion = result.unwrap();
        assert_eq!(deltas, ["one ", "tw\u{e9}", " three"], "{kind:?}");
        assert_eq!(completion.content, "one tw\u{e9} three");
        assert_eq!(completion.tokens.total, Some(4));
    }
}

#[tokio::test]
async fn unknown_models_are_not_available() {
    for kind in KINDS {
        let fake = FakeLlm::start(kind, &[MODEL], Reply::text(&["x"])).await;
        let client = client(backend(kind), &fake.url());
        let (result, deltas) = chat(&client, "missing:7b").await;
        assert_eq!(result, Err(LlmError::ModelNotAvailable), "{kind:?}");
        assert!(deltas.is_empty());
    }
    // OpenAI-style servers may say so with another status.
    let body = json!({"error": {"message": "no", "type": "invalid_request_error", "code": "model_not_found"}});
    let fake = FakeLlm::openai(&[MODEL], Reply::status(400, &body.to_string())).await;
    let client = client(BackendKind::OpenAiCompatible, &fake.url());
    assert_eq!(
        chat(&client, MODEL).await.0,
        Err(LlmError::ModelNotAvailable)
    );
}

#[tokio::test]
async fn server_errors_fail_with_the_body_truncated() {
    for kind in KINDS {
        let long = format!("{{\"error\":\"{}\"}}", "\u{3b1}".repeat(400));
        let fake = FakeLlm::start(kind, &[MODEL], Reply::status(500, &long)).await;
        let client = client(backend(kind), &fake.url());
        let message = backend_error(chat(&client, MODEL).await.0.unwrap_err());
        assert_eq!(message.chars().count(), BACKEND_ERROR_MAX_CHARS);
        assert_eq!(
            message,
            long.chars()
                .take(BACKEND_ERROR_MAX_CHARS)
                .collect::<String>()
        );

        fake.set_reply(Reply::status(503, ""));
        let message = backend_error(chat(&client, MODEL).await.0.unwrap_err());
        assert_eq!(message, "HTTP 503");

        fake.set_reply(Reply::status(401, "unauthorised"));
        let message = backend_error(chat(&client, MODEL).await.0.unwrap_err());
        assert_eq!(message, "unauthorised");
    }
}

#[tokio::test]
async fn connection_refused_fails() {
    for kind in KINDS {
        let url = closed_port_url().replace("http://", "http://user:pa55word@");
        let message = backend_error(
            chat(&client(backend(kind), &url), MODEL)
                .await
                .0
                .unwrap_err(),
        );
        assert!(!message.is_empty());
        assert!(!message.contains("pa55word"), "{message}");
        assert!(message.chars().count() <= BACKEND_ERROR_MAX_CHARS);
    }
}

#[tokio::test]
async fn streams_without_an_end_fail() {
    for kind in KINDS {
        let fake = FakeLlm::start(kind, &[MODEL], Reply::text(&["a", "b"]).unterminated()).await;
        let (result, deltas) = chat(&client(backend(kind), &fake.url()), MODEL).await;
        assert!(
            matches!(result, Err(LlmError::Failed { .. })),
            "{kind:?} {result:?}"
        );
        assert_eq!(deltas, ["a", "b"]);
    }
}

#[tokio::test]
async fn slow_backends_time_out() {
    for kind in KINDS {
        let deltas: Vec<String> = (0..50).map(|i| format!("{i} ")).collect();
        let deltas: Vec<&str> = deltas.iter().map(String::as_str).collect();
        let reply = Reply::text(&deltas).chunk_delay(Duration::from_millis(100));
        let fake = FakeLlm::start(kind, &[MODEL], reply).await;
        let mut config = config(backend(kind), &fake.url());
        config.total_timeout = Duration::from_millis(400);
        let client = LlmClient::new(config).unwrap();
        let started = Instant::now();
        let (result, seen) = chat(&client, MODEL).await;
        assert_eq!(result, Err(LlmError::Timeout), "{kind:?}");
        assert!(!seen.is_empty() && seen.len() < 50);
        assert!(started.elapsed() < Duration::from_secs(3));

        // Silence before the head counts too.
        fake.set_reply(Reply::text(&["x"]).first_byte_delay(Duration::from_secs(3)));
        assert_eq!(chat(&client, MODEL).await.0, Err(LlmError::Timeout));
    }
}

#[tokio::test]
async fn dropping_the_call_disconnects_the_backend() {
    for kind in KINDS {
        let deltas: Vec<String> = (0..200).map(|i| format!("{i} ")).collect();
        let deltas: Vec<&str> = deltas.iter().map(String::as_str).collect();
        let reply = Reply::text(&deltas).chunk_delay(Duration::from_millis(50));
        let fake = FakeLlm::start(kind, &[MODEL], reply).await;
        let client = client(backend(kind), &fake.url());
        let request = request(MODEL);
        let mut received = 0_usize;
        let call = client.chat_stream(&request, |_| received += 1);
        assert!(
            tokio::time::timeout(Duration::from_millis(400), call)
                .await
                .is_err()
        );
        assert!(received > 0, "{kind:?}: nothing streamed before the drop");
        assert!(
            fake.wait_until(|f| f.cancelled() == 1, Duration::from_secs(10))
                .await,
            "{kind:?}: the fake never saw the disconnect"
        );
        assert_eq!(fake.in_flight(), 0);
        assert_eq!(fake.completed(), 0);
    }
}

fn provider_client(url: &str, auth: AuthHeader) -> LlmClient {
    let mut config = config(BackendKind::OpenAiCompatible, url);
    config.api_key = Some(ApiKey::new("provider-key-123".to_owned()));
    config.auth_header = auth;
    LlmClient::new(config).unwrap()
}

#[tokio::test]
async fn post_exact_sends_one_request_to_the_exact_url() {
    let answer = r#"{"instruction":"Click Save","status":"next_step"}"#;
    let fake = FakeLlm::openai(&[MODEL], Reply::json(answer)).await;
    let body =
        json!({"model": MODEL, "stream": false, "messages": [{"role": "user", "content": "hi"}]});
    let url = format!(
        "{}/openai/deployments/x/chat/completions?api-version=2024-10-21",
        fake.url()
    );
    for (auth, header, value) in [
        (
            AuthHeader::Bearer,
            "authorization",
            "Bearer provider-key-123",
        ),
        (AuthHeader::ApiKey, "api-key", "provider-key-123"),
    ] {
        let client = provider_client(&fake.url(), auth);
        let raw = client
            .post_exact(&url, &body, 128 * 1024, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(raw.status, 200);
        assert_eq!(raw.content_encoding, None);
        let document: Value = serde_json::from_slice(&raw.body).unwrap();
        assert_eq!(document["choices"][0]["message"]["content"], answer);

        let seen = fake.last_request().unwrap();
        assert_eq!(seen.method, "POST");
        assert_eq!(
            seen.path,
            "/openai/deployments/x/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(seen.header(header), Some(value));
        let other = if header == "api-key" {
            "authorization"
        } else {
            "api-key"
        };
        assert_eq!(seen.header(other), None);
        assert_eq!(seen.header("accept-encoding"), Some("identity"));
        assert_eq!(seen.header("content-type"), Some("application/json"));
        assert_eq!(seen.body.as_ref(), Some(&body));
    }
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn post_exact_returns_other_statuses_without_following_them() {
    let fake = FakeLlm::openai(&[MODEL], Reply::redirect("/elsewhere")).await;
    let client = provider_client(&fake.url(), AuthHeader::Bearer);
    let url = format!("{}/chat", fake.url());
    let raw = client
        .post_exact(&url, &json!({}), 1024, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(raw.status, 307);
    assert_eq!(fake.requests().len(), 1, "the redirect was followed");

    fake.set_reply(Reply::status(500, "boom"));
    let raw = client
        .post_exact(&url, &json!({}), 1024, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!((raw.status, raw.body.as_slice()), (500, &b"boom"[..]));

    fake.set_reply(Reply::json("{}").header("content-encoding", "deflate"));
    let raw = client
        .post_exact(&url, &json!({}), 1024, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(raw.content_encoding.as_deref(), Some("deflate"));
}

#[tokio::test]
async fn post_exact_caps_the_body() {
    let fake = FakeLlm::openai(&[MODEL], Reply::json(&"x".repeat(10_000))).await;
    let client = provider_client(&fake.url(), AuthHeader::Bearer);
    let url = format!("{}/chat", fake.url());
    let result = client
        .post_exact(&url, &json!({}), 4096, Duration::from_secs(10))
        .await;
    assert_eq!(result, Err(TransportError::TooLarge));
    let raw = client
        .post_exact(&url, &json!({}), 64 * 1024, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(raw.body.len() > 10_000);

    // Without a Content-Length the cap is met while reading.
    let deltas = vec!["y".repeat(1000); 10];
    let deltas: Vec<&str> = deltas.iter().map(String::as_str).collect();
    fake.set_reply(Reply::text(&deltas));
    let url = format!("{}/v1/chat/completions", fake.url());
    let streamed = json!({"model": MODEL, "stream": true});
    let result = client
        .post_exact(&url, &streamed, 4096, Duration::from_secs(10))
        .await;
    assert_eq!(result, Err(TransportError::TooLarge));
    let raw = client
        .post_exact(&url, &streamed, 64 * 1024, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(raw.body.ends_with(b"data: [DONE]\n\n"));
}

#[tokio::test]
async fn post_exact_deadline_covers_the_whole_call() {
    let fake = FakeLlm::openai(
        &[MODEL],
        Reply::json("{}").first_byte_delay(Duration::from_secs(5)),
    )
    .await;
    let client = provider_client(&fake.url(), AuthHeader::ApiKey);
    let url = format!("{}/chat", fake.url());
    let started = Instant::now();
    let result = client
        .post_exact(&url, &json!({}), 1024, Duration::from_millis(300))
        .await;
    assert_eq!(result, Err(TransportError::Timeout));
    assert!(started.elapsed() < Duration::from_secs(3));

    // A body that trickles past the deadline.
    fake.set_reply(Reply::text(&["a", "b", "c", "d", "e"]).chunk_delay(Duration::from_millis(200)));
    let url = format!("{}/v1/chat/completions", fake.url());
    let result = client
        .post_exact(
            &url,
            &json!({"model": MODEL, "stream": true}),
            1 << 20,
            Duration::from_millis(300),
        )
        .await;
    assert_eq!(result, Err(TransportError::Timeout));

    let result = client
        .post_exact(&closed_port_url(), &json!({}), 1024, Duration::from_secs(5))
        .await;
    assert_eq!(result, Err(TransportError::Failed));
}
