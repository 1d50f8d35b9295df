//! Tests of [`super`]: base URL checks, the key kept out of Debug and out of connection errors,
//! truncated status failures, nothing sent without time left, and futures that are `Send`.

use super::*;

fn config(kind: BackendKind, base_url: &str) -> BackendConfig {
    BackendConfig {
        kind,
        base_url: base_url.to_owned(),
        api_key: Some(ApiKey::new("sk-secret-value".to_owned())),
        auth_header: AuthHeader::Bearer,
        connect_timeout: Duration::from_secs(1),
        total_timeout: Duration::from_secs(5),
        list_timeout: Duration::from_secs(2),
    }
}

#[test]
fn llm_base_url_validation() {
    for bad in [
        "",
        "localhost:11434",
        "ftp://host/",
        "file:///tmp/x",
        "http://",
        "http://host/?q=1",
        "http://host/#f",
    ] {
        assert!(
            matches!(
                LlmClient::new(config(BackendKind::Ollama, bad)),
                Err(LlmError::Failed { .. })
            ),
            "{bad:?}"
        );
    }
    let client = LlmClient::new(config(BackendKind::Ollama, "http://127.0.0.1:11434/")).unwrap();
    assert_eq!(client.kind(), BackendKind::Ollama);
    assert_eq!(
        client.endpoint(Endpoint::Models),
        "http://127.0.0.1:11434/api/tags"
    );
    assert_eq!(
        client.endpoint(Endpoint::Chat),
        "http://127.0.0.1:11434/api/chat"
    );
    let client =
        LlmClient::new(config(BackendKind::OpenAiCompatible, "https://host/prefix")).unwrap();
    assert_eq!(
        client.endpoint(Endpoint::Chat),
        "https://host/prefix/v1/chat/completions"
    );
    let client = LlmClient::new(config(
        BackendKind::OpenAiCompatible,
        "http://host:8080/v1/",
    ))
    .unwrap();
    assert_eq!(
        client.endpoint(Endpoint::Models),
        "http://host:8080/v1/models"
    );
}

#[test]
fn llm_key_stays_out_of_debug() {
    let client = LlmClient::new(config(BackendKind::Ollama, "http://127.0.0.1:1")).unwrap();
    let shown = format!("{client:?}");
    assert!(!shown.contains("sk-secret-value"), "{shown}");
    let mut bad = config(BackendKind::Ollama, "http://127.0.0.1:1");
    bad.api_key = Some(ApiKey::new("line\nbreak".to_owned()));
    assert!(LlmClient::new(bad).is_err());
}

#[test]
fn llm_status_failures_are_truncated() {
    let long = "x".repeat(500);
    assert_eq!(
        status_failure(StatusCode::INTERNAL_SERVER_ERROR, long.as_bytes()),
        failed(&"x".repeat(BACKEND_ERROR_MAX_CHARS))
    );
    assert_eq!(
        status_failure(StatusCode::BAD_GATEWAY, b"  \n"),
        failed("HTTP 502")
    );
    assert_eq!(truncate(&"\u{e9}".repeat(300)).chars().count(), 200);
}

#[tokio::test]
async fn llm_connection_errors_hide_credentials() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let base = format!("http://user:hunter2@127.0.0.1:{port}");
    let client = LlmClient::new(config(BackendKind::Ollama, &base)).unwrap();
    let Err(LlmError::Failed { backend_error }) = client.list_models().await else {
        panic!("a closed port must fail");
    };
    assert!(!backend_error.contains("hunter2"), "{backend_error}");
    assert!(!backend_error.is_empty());
    assert!(backend_error.chars().count() <= BACKEND_ERROR_MAX_CHARS);
}

#[tokio::test]
async fn llm_post_exact_without_time_sends_nothing() {
    let client =
        LlmClient::new(config(BackendKind::OpenAiCompatible, "http://127.0.0.1:1")).unwrap();
    let body = serde_json::json!({});
    assert_eq!(
        client
            .post_exact("http://127.0.0.1:1/x", &body, 10, Duration::ZERO)
            .await,
        Err(TransportError::Timeout)
    );
    assert_eq!(
        client
            .post_exact("ftp://127.0.0.1/x", &body, 10, Duration::from_secs(1))
            .await,
        Err(TransportError::Failed)
    );
}

#[test]
fn llm_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    let client = LlmClient::new(config(BackendKind::Ollama, "http://127.0.0.1:1")).unwrap();
    let request = ChatRequest {
        model: "m".to_owned(),
        messages: Vec::new(),
        max_tokens: 1,
        temperature: 0.0,
        top_p: 1.0,
    };
    send(&client.chat_stream(&request, |_| {}));
    send(&client.list_models());
    send(&client.post_exact("http://x", &serde_json::Value::Null, 1, Duration::ZERO));
}
