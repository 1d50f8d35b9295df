//! The stdio transport of `autogpt-shim mcp`: rmcp's framing (one JSON-RPC message a line, its
//! codec, its 16 MiB line limit), with an answer for every line rmcp's own stdio transport
//! drops without one, so a client never waits out its timeout for a line nobody will serve.
//!
//! What cannot be read is answered with `"id": null`, as JSON-RPC 2.0 says (rmcp leaves the id
//! out, which JSON-RPC and the MCP Python SDK's client both refuse): a line that is not UTF-8
//! or not JSON is a parse error (-32700); JSON that is no message the SDK takes is an invalid
//! request (-32600), as rmcp already answered it. A line over the limit is an invalid request
//! too: it was never parsed, so whether it was JSON is unknown, and what is refused is the
//! request; it carries the request's id when the part read names both an `id` and a `method`
//! (clients write both before `params`), so the call fails at once instead of timing out. The
//! rest of that line is read and dropped: never more than the limit is held.
//!
//! The SDK's frames and these answers go out through one writer under one lock, each whole,
//! so stdout carries only whole protocol lines. stdin closing ends `receive` as before.

use std::fmt;
use std::io;
use std::sync::Arc;

use futures_util::SinkExt;
use rmcp::ErrorData;
use rmcp::model::RequestId;
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{
    DEFAULT_MAX_LINE_LENGTH, JsonRpcMessageCodec, JsonRpcMessageCodecError,
};
use serde::Serialize;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde_json::error::Category;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::sync::Mutex;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, FramedWrite};

/// The longest line served, its newline included: rmcp's own limit.
pub(super) const MAX_LINE_BYTES: usize = DEFAULT_MAX_LINE_LENGTH;

/// A line buffer that grew past this is let go after its line, so one large write does not
/// keep its size for the rest of the session.
const KEPT_CAPACITY: usize = 64 * 1024;

/// One frame on stdout: the SDK's message, or the answer to a line it was not given.
#[derive(Serialize)]
#[serde(untagged)]
#[allow(
    clippy::large_enum_variant,
    reason = "a frame lives only until it is encoded; boxing the SDK's message would allocate for every frame"
)]
enum Frame {
    Sdk(TxJsonRpcMessage<RoleServer>),
    Answer(Answer),
}

/// A JSON-RPC error response whose id is `null` when it could not be read.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Answer {
    jsonrpc: &'static str,
    id: Option<RequestId>,
    error: ErrorData,
}

/// Why a line was answered instead of served.
#[derive(Debug, Clone, PartialEq)]
enum Refused {
    NotUtf8,
    NotJson,
    NotAMessage,
    TooLong { id: Option<RequestId>, limit: usize },
}

impl Refused {
    /// The log's name for it (never anything of the line itself).
    fn reason(&self) -> &'static str {
        match self {
            Self::NotUtf8 => "not UTF-8",
            Self::NotJson => "not JSON",
            Self::NotAMessage => "not a JSON-RPC message",
            Self::TooLong { .. } => "over the line limit",
        }
    }

    fn answer(self) -> Answer {
        let (id, error) = match self {
            Self::NotUtf8 => (
                None,
                ErrorData::parse_error("Parse error: the line is not UTF-8 text.", None),
            ),
            Self::NotJson => (
                None,
                ErrorData::parse_error("Parse error: the line is not valid JSON.", None),
            ),
            Self::NotAMessage => (
                None,
                ErrorData::invalid_request(
                    "Invalid Request: the line is not a JSON-RPC message this server takes.",
                    None,
                ),
            ),
            Self::TooLong { id, limit } => (
                id,
                ErrorData::invalid_request(
                    format!("Invalid Request: the line is longer than {limit} bytes."),
                    Some(json!({ "max_line_bytes": limit })),
                ),
            ),
        };
        Answer {
            jsonrpc: "2.0",
            id,
            error,
        }
    }
}

/// What one bounded line read came to.
enum Read {
    /// A whole line, its newline included, is in `line`.
    Line,
    /// The line passed the limit; the id its first part names, if any.
    TooLong(Option<RequestId>),
    Eof,
    Failed(io::Error),
}

/// An answer on its way out.
enum Pending {
    /// Still to hand to the writer.
    Queued(Answer),
    /// In the writer's buffer, still to flush.
    Flush,
}

type Writer<W> = Arc<Mutex<Option<FramedWrite<W, JsonRpcMessageCodec<Frame>>>>>;

/// The transport: stdin's lines to the SDK (or answered here), the SDK's frames to stdout.
pub(super) struct Stdio<R, W> {
    read: BufReader<R>,
    line: BytesMut,
    /// Set once a line over the limit was answered, until its newline. On the struct because
    /// the SDK polls `receive` in a `select!` and may drop it mid-line.
    discarding: bool,
    limit: usize,
    decoder: JsonRpcMessageCodec<RxJsonRpcMessage<RoleServer>>,
    write: Writer<W>,
    /// On the struct for the same reason: a dropped `receive` resumes its answer.
    pending: Option<Pending>,
}

impl<R, W> Stdio<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// The transport over `read` and `write`, serving lines of at most `limit` bytes.
    pub(super) fn new(read: R, write: W, limit: usize) -> Self {
        Self {
            read: BufReader::new(read),
            line: BytesMut::new(),
            discarding: false,
            limit,
            decoder: JsonRpcMessageCodec::default(),
            write: Arc::new(Mutex::new(Some(FramedWrite::new(
                write,
                JsonRpcMessageCodec::default(),
            )))),
            pending: None,
        }
    }

    /// Reads one line into `self.line` without ever holding more than the limit.
    ///
    /// Cancel-safe as rmcp's own reader: `fill_buf` takes nothing when dropped, and copying
    /// and `consume` happen with no await between them, so a dropped read leaves its partial
    /// line in `self.line` for the next call.
    async fn read_line(&mut self) -> Read {
        loop {
            let (consumed, done) = {
                let available = match self.read.fill_buf().await {
                    Ok(available) => available,
                    Err(err) => return Read::Failed(err),
                };
                if available.is_empty() {
                    return Read::Eof;
                }
                let newline = available.iter().position(|byte| *byte == b'\n');
                let take = newline.map_or(available.len(), |at| at + 1);
                if self.discarding {
                    self.discarding = newline.is_none();
                    (take, None)
                } else if self.line.len().saturating_add(take) > self.limit {
                    // What fits is kept only to read the id from, then let go.
                    let room = self.limit.saturating_sub(self.line.len());
                    self.line.extend_from_slice(&available[..room.min(take)]);
                    let id = leading_request_id(&self.line);
                    release(&mut self.line);
                    self.discarding = newline.is_none();
                    (take, Some(Read::TooLong(id)))
                } else {
                    self.line.extend_from_slice(&available[..take]);
                    (take, newline.map(|_| Read::Line))
                }
            };
            self.read.consume(consumed);
            if let Some(done) = done {
                return done;
            }
        }
    }

    /// The message in the whole line `self.line`, `None` for a line the SDK skips (blank, or a
    /// notification it ignores), or why the line is refused; the buffer is emptied.
    fn take_line(&mut self) -> Result<Option<RxJsonRpcMessage<RoleServer>>, Refused> {
        let content = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        // Blank lines are skipped, as rmcp skips them.
        if content.is_empty() {
            release(&mut self.line);
            return Ok(None);
        }
        if std::str::from_utf8(content).is_err() {
            release(&mut self.line);
            return Err(Refused::NotUtf8);
        }
        // rmcp's own decoder: its byte-order mark and carriage return handling, and the
        // non-MCP notifications it ignores. It splits the line off the buffer, after which
        // `capacity` no longer tells how large the allocation kept is: measured before.
        let grown = self.line.capacity() > KEPT_CAPACITY;
        let decoded = self.decoder.decode(&mut self.line);
        if grown {
            self.line = BytesMut::new();
        } else {
            self.line.clear();
        }
        match decoded {
            Ok(message) => Ok(message),
            Err(JsonRpcMessageCodecError::Serde(err))
                if matches!(err.classify(), Category::Syntax | Category::Eof) =>
            {
                Err(Refused::NotJson)
            }
            Err(_) => Err(Refused::NotAMessage),
        }
    }

    fn refuse(&mut self, refused: Refused) {
        tracing::warn!(
            reason = refused.reason(),
            "answered a line on stdin that cannot be served"
        );
        self.pending = Some(Pending::Queued(refused.answer()));
    }

    /// Writes the pending answer, if any, whole; `false` once stdout is gone.
    async fn flush_answer(&mut self) -> bool {
        let Some(pending) = self.pending.as_mut() else {
            return true;
        };
        let mut write = self.write.lock().await;
        let Some(framed) = write.as_mut() else {
            return false;
        };
        if let Pending::Queued(answer) = pending {
            // A dropped `feed` encoded nothing, so the answer stays queued for the next call.
            if framed.feed(Frame::Answer(answer.clone())).await.is_err() {
                return false;
            }
            *pending = Pending::Flush;
        }
        if framed.flush().await.is_err() {
            return false;
        }
        self.pending = None;
        true
    }
}

impl<R, W> Transport<RoleServer> for Stdio<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        let write = Arc::clone(&self.write);
        async move {
            let mut write = write.lock().await;
            let framed = write.as_mut().ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotConnected, "the transport is closed")
            })?;
            framed.send(Frame::Sdk(item)).await.map_err(io::Error::from)
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // One answer at a time, written before the next line is read: a client sending
            // nothing but bad lines is slowed to its own reading pace, and nothing piles up.
            if !self.flush_answer().await {
                return None;
            }
            match self.read_line().await {
                Read::Line => {}
                Read::TooLong(id) => {
                    let limit = self.limit;
                    self.refuse(Refused::TooLong { id, limit });
                    continue;
                }
                // A last line without its newline is incomplete: nothing to serve.
                Read::Eof => return None,
                Read::Failed(err) => {
                    tracing::warn!(error = %err, "cannot read stdin");
                    return None;
                }
            }
            match self.take_line() {
                Ok(Some(message)) => return Some(message),
                Ok(None) => {}
                Err(refused) => self.refuse(refused),
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        drop(self.write.lock().await.take());
        Ok(())
    }
}

/// Empties the line buffer, and lets go of it when a large line grew it.
fn release(line: &mut BytesMut) {
    if line.capacity() > KEPT_CAPACITY {
        *line = BytesMut::new();
    } else {
        line.clear();
    }
}

/// The id of the JSON-RPC request `prefix` (the start of a line) begins, when the prefix
/// names both its `id` and its `method` before anything breaks off; `None` otherwise, so a
/// response or a notification is never answered as if it were a request.
fn leading_request_id(prefix: &[u8]) -> Option<RequestId> {
    let prefix = prefix.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(prefix);
    // A number the cut ends could be the front of a longer one: its characters are dropped,
    // so such an id reads as cut off, never as a smaller number.
    let end = prefix
        .iter()
        .rposition(|byte| !b"0123456789+-.eE".contains(byte))
        .map_or(0, |last| last + 1);
    let mut found = Found::default();
    let mut reader = serde_json::Deserializer::from_slice(&prefix[..end]);
    // The walk stops with an error once both are found (or where the prefix breaks off).
    let _ = serde::Deserializer::deserialize_map(&mut reader, FindRequest(&mut found));
    found.id.filter(|_| found.method)
}

#[derive(Default)]
struct Found {
    id: Option<RequestId>,
    method: bool,
}

struct FindRequest<'a>(&'a mut Found);

impl<'de> Visitor<'de> for FindRequest<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON-RPC request")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "id" => self.0.id = Some(map.next_value::<RequestId>()?),
                "method" => {
                    map.next_value::<String>()?;
                    self.0.method = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            if self.0.id.is_some() && self.0.method {
                return Err(de::Error::custom("found"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
