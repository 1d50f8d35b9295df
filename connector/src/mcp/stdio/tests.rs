//! The stdio transport over in-memory pipes: each line it cannot serve gets its exact answer,
//! the next good line is still served, an over-long line is answered (with its request's id
//! when its start names one) and dropped to its end, and stdin closing ends `receive`.

use rmcp::model::NumberOrString;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, duplex};

use super::*;

/// Room in each in-memory pipe: more than any test writes, so no write waits for a reader.
const PIPE: usize = 1 << 20;

struct Client {
    /// The server's stdin.
    input: DuplexStream,
    /// The server's stdout.
    output: BufReader<DuplexStream>,
}

impl Client {
    async fn write(&mut self, bytes: &[u8]) {
        self.input.write_all(bytes).await.unwrap();
    }

    /// The next line the server wrote, exactly.
    async fn line(&mut self) -> String {
        let mut line = String::new();
        self.output.read_line(&mut line).await.unwrap();
        assert!(line.ends_with('\n'), "not a whole line: {line:?}");
        line
    }

    async fn frame(&mut self) -> Value {
        serde_json::from_str(&self.line().await).unwrap()
    }
}

fn transport(limit: usize) -> (Stdio<DuplexStream, DuplexStream>, Client) {
    let (input, server_in) = duplex(PIPE);
    let (server_out, output) = duplex(PIPE);
    let client = Client {
        input,
        output: BufReader::new(output),
    };
    (Stdio::new(server_in, server_out, limit), client)
}

fn ping(id: u64) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n").into_bytes()
}

/// The message `receive` gave the SDK, as JSON.
async fn received(server: &mut Stdio<DuplexStream, DuplexStream>) -> Value {
    let message = server.receive().await.expect("a message");
    serde_json::to_value(message).unwrap()
}

#[tokio::test]
async fn lines_that_are_not_json_are_parse_errors_with_a_null_id_and_serving_goes_on() {
    let (mut server, mut client) = transport(MAX_LINE_BYTES);
    client.write(b"not json at all\n").await;
    client.write(b"\xff\xfe{\"id\":1}\n").await;
    client.write(b"{\"jsonrpc\":\"2.0\",\"id\":2,\n").await;
    // Blank lines are skipped without an answer, as rmcp skips them.
    client.write(b"\n\r\n").await;
    client.write(&ping(3)).await;

    let served = received(&mut server).await;
    assert_eq!(served["id"], 3, "{served}");
    assert_eq!(served["method"], "ping", "{served}");
    assert_eq!(
        client.line().await,
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error: the line is not valid JSON.\"}}\n"
    );
    assert_eq!(
        client.line().await,
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error: the line is not UTF-8 text.\"}}\n"
    );
    // A line cut short is not JSON either.
    assert_eq!(client.frame().await["error"]["code"], -32700);
}

#[tokio::test]
async fn json_that_is_no_message_is_an_invalid_request_with_a_null_id() {
    let (mut server, mut client) = transport(MAX_LINE_BYTES);
    client.write(b"[1, 2]\n").await;
    client
        .write(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":7}\n")
        .await;
    client.write(&ping(5)).await;

    assert_eq!(received(&mut server).await["id"], 5);
    for _ in 0..2 {
        assert_eq!(
            client.frame().await,
            json!({
                "jsonrpc": "2.0",
                "id": null,
                "error": {
                    "code": -32600,
                    "message": "Invalid Request: the line is not a JSON-RPC message this server takes."
                }
            })
        );
    }
}

#[tokio::test]
async fn a_line_over_the_limit_is_refused_with_its_id_and_dropped_to_its_end() {
    let limit = 64;
    let (mut server, mut client) = transport(limit);
    let long = "x".repeat(100);
    // The id and method come first, as clients write them: the answer names the call.
    let first = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{{\"a\":\"{long}\"}}}}\n"
    );
    // The id after the cut: it cannot be read.
    let second = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{{\"a\":\"{long}\"}},\"id\":8}}\n"
    );
    // Longer than the reader's buffer, so its end arrives in later reads and is dropped too;
    // a line exactly at the limit (newline included) is still served.
    let third = format!(
        "{{\"id\":\"s\",\"method\":\"m\",\"pad\":\"{}\"}}\n",
        "y".repeat(40_000)
    );
    let at_limit = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"{}}}\n",
        " ".repeat(limit - 41)
    );
    assert_eq!(at_limit.len(), limit);
    for line in [&first, &second, &third, &at_limit] {
        client.write(line.as_bytes()).await;
    }

    assert_eq!(received(&mut server).await["id"], 9);
    let refused = |id: Value| {
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32600,
                "message": "Invalid Request: the line is longer than 64 bytes.",
                "data": {"max_line_bytes": 64}
            }
        })
    };
    assert_eq!(client.frame().await, refused(json!(7)));
    assert_eq!(client.frame().await, refused(Value::Null));
    assert_eq!(client.frame().await, refused(json!("s")));
    // Nothing of the long lines was kept.
    assert!(server.line.capacity() <= KEPT_CAPACITY);
    assert!(!server.discarding);
}

#[tokio::test]
async fn the_sdks_frames_go_out_whole_and_stdin_closing_ends_receive() {
    let (mut server, mut client) = transport(MAX_LINE_BYTES);
    let reply = TxJsonRpcMessage::<RoleServer>::error(
        ErrorData::internal_error("failed", None),
        Some(NumberOrString::Number(3)),
    );
    server.send(reply).await.unwrap();
    assert_eq!(
        client.frame().await,
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "failed"}})
    );
    // A last line without its newline is incomplete: dropped, as rmcp drops it.
    client
        .write(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}")
        .await;
    drop(client.input);
    assert!(server.receive().await.is_none());
    server.close().await.unwrap();
    let closed = server.send(TxJsonRpcMessage::<RoleServer>::error(
        ErrorData::internal_error("late", None),
        None,
    ));
    assert_eq!(
        closed.await.unwrap_err().kind(),
        io::ErrorKind::NotConnected
    );
}

#[test]
fn the_id_is_read_only_from_a_request_that_names_it_before_the_cut() {
    let id = |prefix: &str| leading_request_id(prefix.as_bytes());
    let number = |n| Some(NumberOrString::Number(n));
    assert_eq!(
        id(r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"#),
        number(12)
    );
    assert_eq!(
        id(r#"{"method":"tools/call","id":"a\"b","params":"#),
        Some(NumberOrString::String("a\"b".into()))
    );
    assert_eq!(id("\u{feff}{\"id\":1,\"method\":\"x\""), number(1));
    // Nested values before the id are skipped whole.
    assert_eq!(
        id(r#"{"_meta":{"id":5,"method":"no"},"method":"m","id":6,"p"#),
        number(6)
    );
    // A number the cut ends may be the front of a longer one.
    assert_eq!(id(r#"{"method":"m","id":12"#), None);
    // No method (a response) or no id (a notification): never answered as a request.
    assert_eq!(id(r#"{"jsonrpc":"2.0","id":3,"result":{"#), None);
    assert_eq!(
        id(r#"{"jsonrpc":"2.0","method":"notifications/x","params":{"#),
        None
    );
    // The id after the cut, a null or fractional id, or no object at all.
    assert_eq!(id(r#"{"method":"m","params":{"a":"xxxx"#), None);
    assert_eq!(id(r#"{"id":null,"method":"m","#), None);
    assert_eq!(id(r#"{"id":1.5,"method":"m","#), None);
    assert_eq!(id(r#"[{"id":1,"method":"m"}"#), None);
    assert_eq!(id(""), None);
}
