//! Tests of [`super`]: the NDJSON and SSE stream decoders under any chunking, last lines,
//! unknown reasons and errors; whole OpenAI documents, model lists, finish reasons and bodies.

use super::*;

fn decode_in_pieces(kind: BackendKind, stream: &[u8], piece: usize) -> Vec<Event> {
    let mut decoder = StreamDecoder::new(kind);
    let mut out = Vec::new();
    for chunk in stream.chunks(piece) {
        decoder.feed(chunk, &mut out);
    }
    decoder.end(&mut out);
    out
}

fn deltas(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Delta(d) => Some(d.as_str()),
            _ => None,
        })
        .collect()
}

const OLLAMA: &str = concat!(
    "{\"message\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"done\":false}\n",
    "not json at all\n",
    "\n",
    "{\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":false}\r\n",
    "{\"message\":{\"role\":\"assistant\",\"content\":\"lo \u{e9}\"},\"done\":false}\n",
    "[1,2]\n",
    "{\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,",
    "\"done_reason\":\"length\",\"prompt_eval_count\":7,\"eval_count\":3}\n",
);

#[test]
fn llm_ndjson_any_chunking() {
    for piece in [1, 2, 3, 7, 64, 4096] {
        let events = decode_in_pieces(BackendKind::Ollama, OLLAMA.as_bytes(), piece);
        assert_eq!(deltas(&events), "Hello \u{e9}", "piece {piece}");
        assert_eq!(
            events.last(),
            Some(&Event::Done(
                FinishReason::Length,
                TokenCounts {
                    prompt: Some(7),
                    completion: Some(3),
                    total: Some(10)
                }
            ))
        );
        assert_eq!(events.len(), 3);
    }
}

#[test]
fn llm_ndjson_last_line_without_newline_and_errors() {
    let events = decode_in_pieces(
        BackendKind::Ollama,
        b"{\"message\":{\"content\":\"x\"},\"done\":true}",
        5,
    );
    assert_eq!(
        events,
        [
            Event::Delta("x".to_owned()),
            Event::Done(FinishReason::Stop, TokenCounts::default())
        ]
    );
    let events = decode_in_pieces(BackendKind::Ollama, b"{\"error\":\"out of memory\"}\n", 3);
    assert_eq!(events, [Event::Error(failed("out of memory"))]);
}

const SSE: &str = concat!(
    ": keep-alive comment\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null}]}\n\n",
    "event: message\r\nid: 1\r\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi \"},\"finish_reason\":null}]}\r\n\r\n",
    "data: {broken\n\n",
    "data:{\"choices\":[{\"delta\":{\"content\":\"there\"}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"content_filter\"}]}\n\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2,\"total_tokens\":6}}\n\n",
    "data: [DONE]\n\n",
);

#[test]
fn llm_sse_any_chunking() {
    for piece in [1, 2, 5, 13, 4096] {
        let events = decode_in_pieces(BackendKind::OpenAiCompatible, SSE.as_bytes(), piece);
        assert_eq!(deltas(&events), "Hi there", "piece {piece}");
        assert_eq!(
            events.last(),
            Some(&Event::Done(
                FinishReason::ContentFilter,
                TokenCounts {
                    prompt: Some(4),
                    completion: Some(2),
                    total: Some(6)
                }
            ))
        );
    }
}

#[test]
fn llm_sse_multiline_data_unknown_reason_and_errors() {
    let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\ndata: \"finish_reason\":\"eos\"}]}\n\ndata: [DONE]";
    let events = decode_in_pieces(BackendKind::OpenAiCompatible, stream.as_bytes(), 4);
    assert_eq!(
        events,
        [
            Event::Delta("a".to_owned()),
            Event::Done(FinishReason::Stop, TokenCounts::default())
        ]
    );
    let stream =
        "data: {\"error\":{\"message\":\"no such model\",\"code\":\"model_not_found\"}}\n\n";
    let events = decode_in_pieces(BackendKind::OpenAiCompatible, stream.as_bytes(), 4);
    assert_eq!(events, [Event::Error(LlmError::ModelNotAvailable)]);
    let stream = "data: {\"error\":{\"message\":\"overloaded\"}}\n\n";
    let events = decode_in_pieces(BackendKind::OpenAiCompatible, stream.as_bytes(), 4);
    assert_eq!(events, [Event::Error(failed("overloaded"))]);
}

#[test]
fn llm_whole_openai_documents() {
    let document = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"All of it"},"finish_reason":"length"}],"usage":{"prompt_tokens":2,"completion_tokens":3}}"#;
    let mut decoder = StreamDecoder::new(BackendKind::OpenAiCompatible);
    let mut out = Vec::new();
    decoder.whole(document, &mut out);
    assert_eq!(
        out,
        [
            Event::Delta("All of it".to_owned()),
            Event::Done(
                FinishReason::Length,
                TokenCounts {
                    prompt: Some(2),
                    completion: Some(3),
                    total: Some(5)
                }
            )
        ]
    );
    let mut out = Vec::new();
    StreamDecoder::new(BackendKind::OpenAiCompatible).whole(b"{\"error\":\"busy\"}", &mut out);
    assert_eq!(out, [Event::Error(failed("busy"))]);
    let mut out = Vec::new();
    StreamDecoder::new(BackendKind::OpenAiCompatible).whole(b"<html>", &mut out);
    StreamDecoder::new(BackendKind::OpenAiCompatible).whole(b"{}", &mut out);
    assert!(out.is_empty());
}

#[test]
fn llm_model_lists() {
    let tags = br#"{"models":[{"name":"llama3.2:3b","size":1},{"size":2},{"name":"qwen"}]}"#;
    assert_eq!(
        model_names(BackendKind::Ollama, tags),
        Some(vec!["llama3.2:3b".to_owned(), "qwen".to_owned()])
    );
    let models = br#"{"object":"list","data":[{"id":"gpt-local"}]}"#;
    assert_eq!(
        model_names(BackendKind::OpenAiCompatible, models),
        Some(vec!["gpt-local".to_owned()])
    );
    assert_eq!(model_names(BackendKind::Ollama, models), None);
    assert_eq!(model_names(BackendKind::Ollama, b"<html>"), None);
}

#[test]
fn llm_finish_reasons_and_bodies() {
    assert_eq!(finish_reason(Some("length")), FinishReason::Length);
    assert_eq!(
        finish_reason(Some("content_filter")),
        FinishReason::ContentFilter
    );
    assert_eq!(finish_reason(Some("stop")), FinishReason::Stop);
    assert_eq!(finish_reason(Some("unload")), FinishReason::Stop);
    assert_eq!(finish_reason(None), FinishReason::Stop);
    let request = ChatRequest {
        model: "m".to_owned(),
        messages: vec![super::super::ChatMessage {
            role: "user".to_owned(),
            content: "hi".to_owned(),
        }],
        max_tokens: 9,
        temperature: 0.5,
        top_p: 1.0,
    };
    let body = chat_body(BackendKind::Ollama, &request);
    assert_eq!(body["options"]["num_predict"], 9);
    assert_eq!(body["stream"], true);
    assert_eq!(body["messages"][0]["content"], "hi");
    let body = chat_body(BackendKind::OpenAiCompatible, &request);
    assert_eq!(body["max_tokens"], 9);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert!(says_model_not_found(
        &json!({"error": {"type": "model_not_found"}})
    ));
    assert!(!says_model_not_found(&json!({"error": "boom"})));
}
