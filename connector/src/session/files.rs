//! FILE_* on a data connection: the one place wire payloads become `local_core::machine::files`
//! requests and core results (or errors) become reply payloads.

use std::path::Path;
use std::sync::Arc;

use local_core::machine::files::{
    self as core_files, DeleteRequest, Encoding, FileLimits, ListEntry, ListRequest, MoveRequest,
    ReadRequest, ReadResult, StatRequest, StatResult, WriteContent, WriteRequest,
};
use local_core::machine::jail::Jail;
use serde_json::{Map, Value, json};

use super::Host;
use super::capability::{self, Done, Handler, Refusal, Run};
use crate::audit::{Entry, details};
use crate::protocol::{
    AckPayload, ErrorCode, FileContentsPayload, FileDeletePayload, FileEncoding, FileFormat,
    FileListEntry, FileListPayload, FileListResponsePayload, FileMovePayload, FileReadPayload,
    FileStatPayload, FileStatResponsePayload, FileWritePayload, Message,
};

/// A FILE_* request in core terms, ready to run on a blocking thread.
#[derive(Debug)]
pub(super) enum FileOp {
    Read(ReadRequest),
    Write(WriteRequest),
    Stat(StatRequest),
    List(ListRequest),
    Delete(DeleteRequest),
    Move(MoveRequest),
}

impl Handler for FileOp {
    type Admitted = Self;

    /// The core request for a FILE_* message. Takes the message by value so write content
    /// moves instead of being copied.
    fn from_message(message: Message) -> Result<Self, Message> {
        Ok(match message {
            Message::FileRead(payload) => Self::Read(read_request(payload)),
            Message::FileWrite(payload) => Self::Write(write_request(payload)),
            Message::FileStat(payload) => Self::Stat(stat_request(payload)),
            Message::FileList(payload) => Self::List(list_request(payload)),
            Message::FileDelete(payload) => Self::Delete(delete_request(payload)),
            Message::FileMove(payload) => Self::Move(move_request(payload)),
            other => return Err(other),
        })
    }

    fn admit(self, _host: &Host) -> Result<Self, Box<Refusal>> {
        Ok(self)
    }

    /// Blocking I/O, on a blocking thread; its records are queued from there.
    async fn run(op: Self, ctx: Run) -> Done {
        let jail = Arc::clone(&ctx.host.jail);
        let limits = ctx.limits;
        ctx.blocking(move || {
            let (message, entry) = op.perform(&jail, &limits);
            (message, audit_entries(entry))
        })
        .await
    }
}

impl FileOp {
    /// Runs the operation (blocking I/O) and returns the reply message (the success payload
    /// of the spec, or ERROR with the core error's code) and the audit record for it.
    fn perform(self, jail: &Jail, limits: &FileLimits) -> (Message, Entry) {
        let (op, mut details) = self.audit_details();
        let outcome = match self {
            Self::Read(request) => core_files::read(jail, &request, limits).map(|result| {
                details.insert("size_bytes_returned".to_owned(), json!(result.size_bytes));
                contents(result)
            }),
            Self::Write(request) => core_files::write(jail, &request, limits).map(|result| {
                details.insert(
                    "size_bytes_written".to_owned(),
                    json!(result.size_bytes_written),
                );
                ack()
            }),
            Self::Stat(request) => core_files::stat(jail, &request).map(|result| {
                details.insert("exists".to_owned(), json!(result.exists()));
                stat_response(result)
            }),
            Self::List(request) => core_files::list(jail, &request, limits).map(|result| {
                details.insert("entries_returned".to_owned(), json!(result.entries.len()));
                list_response(result.entries, result.truncated)
            }),
            Self::Delete(request) => core_files::delete(jail, &request).map(|result| {
                details.insert("existed".to_owned(), json!(result.existed));
                ack()
            }),
            Self::Move(request) => core_files::move_path(jail, &request, limits).map(|result| {
                details.insert("copied".to_owned(), json!(result.copied));
                ack()
            }),
        };
        capability::conclude(op, details, outcome)
    }

    /// The reference's audit op and request metadata (never content).
    fn audit_details(&self) -> (&'static str, Map<String, Value>) {
        match self {
            Self::Read(r) => (
                "FILE_READ",
                details([
                    ("path", json!(r.path)),
                    ("encoding", json!(encoding_name(r.encoding))),
                    ("offset", json!(r.offset)),
                    ("length", json!(r.length)),
                ]),
            ),
            Self::Write(w) => (
                "FILE_WRITE",
                details([
                    ("path", json!(w.path)),
                    (
                        "encoding",
                        json!(match w.content {
                            WriteContent::Text(_) => "utf-8",
                            WriteContent::Base64(_) => "base64",
                        }),
                    ),
                    ("create_parents", json!(w.create_parents)),
                ]),
            ),
            Self::Stat(s) => (
                "FILE_STAT",
                details([
                    ("path", json!(s.path)),
                    ("follow_symlinks", json!(s.follow_symlinks)),
                ]),
            ),
            Self::List(l) => (
                "FILE_LIST",
                details([
                    ("path", json!(l.path)),
                    ("glob", json!(l.pattern)),
                    ("recursive", json!(l.recursive)),
                    ("include_hidden", json!(l.include_hidden)),
                    ("max_entries", json!(l.max_entries)),
                ]),
            ),
            Self::Delete(d) => (
                "FILE_DELETE",
                details([
                    ("path", json!(d.path)),
                    ("recursive", json!(d.recursive)),
                    ("missing_ok", json!(d.missing_ok)),
                ]),
            ),
            Self::Move(m) => (
                "FILE_MOVE",
                details([
                    ("src", json!(m.from)),
                    ("dst", json!(m.to)),
                    ("overwrite", json!(m.overwrite)),
                ]),
            ),
        }
    }
}

const fn encoding_name(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::Text => "utf-8",
        Encoding::Base64 => "base64",
    }
}

fn read_request(payload: FileReadPayload) -> ReadRequest {
    // The spec makes `format: bytes` and `encoding: base64` each sufficient for binary.
    let binary = payload.format == FileFormat::Bytes || payload.encoding == FileEncoding::Base64;
    ReadRequest {
        path: payload.path,
        encoding: if binary {
            Encoding::Base64
        } else {
            Encoding::Text
        },
        offset: payload.offset,
        length: payload.length,
    }
}

fn write_request(payload: FileWritePayload) -> WriteRequest {
    WriteRequest {
        path: payload.path,
        content: match payload.encoding {
            FileEncoding::Utf8 => WriteContent::Text(payload.content),
            FileEncoding::Base64 => WriteContent::Base64(payload.content),
        },
        create_parents: payload.create_parents,
    }
}

fn stat_request(payload: FileStatPayload) -> StatRequest {
    StatRequest {
        path: payload.path,
        follow_symlinks: payload.follow_symlinks,
    }
}

fn list_request(payload: FileListPayload) -> ListRequest {
    ListRequest {
        path: payload.path,
        pattern: payload.glob,
        recursive: payload.recursive,
        include_hidden: payload.include_hidden,
        max_entries: payload.max_entries,
    }
}

fn delete_request(payload: FileDeletePayload) -> DeleteRequest {
    DeleteRequest {
        path: payload.path,
        recursive: payload.recursive,
        missing_ok: payload.missing_ok,
    }
}

fn move_request(payload: FileMovePayload) -> MoveRequest {
    MoveRequest {
        from: payload.src,
        to: payload.dst,
        overwrite: payload.overwrite,
    }
}

const fn ack() -> Message {
    Message::Ack(AckPayload::OK)
}

fn contents(result: ReadResult) -> Message {
    Message::FileContents(FileContentsPayload {
        content: result.content,
        encoding: match result.encoding {
            Encoding::Text => FileEncoding::Utf8,
            Encoding::Base64 => FileEncoding::Base64,
        },
        size_bytes: result.size_bytes,
        truncated: result.truncated,
    })
}

fn stat_response(result: StatResult) -> Message {
    let path = Some(wire_path(&result.path));
    let payload = match result.info {
        Some(info) => FileStatResponsePayload {
            exists: true,
            is_file: Some(info.is_file),
            is_dir: Some(info.is_dir),
            is_symlink: Some(info.is_symlink),
            size_bytes: Some(info.size_bytes),
            mtime: info.mtime,
            ctime: info.ctime,
            mode: Some(info.mode),
            owner_uid: info.owner_uid,
            owner_gid: info.owner_gid,
            mime_type: info.mime_type.map(str::to_owned),
            path,
        },
        // The spec lets `path` stay set for a missing target so "gone" and "elsewhere"
        // remain distinguishable; every other field is null.
        None => FileStatResponsePayload {
            exists: false,
            is_file: None,
            is_dir: None,
            is_symlink: None,
            size_bytes: None,
            mtime: None,
            ctime: None,
            mode: None,
            owner_uid: None,
            owner_gid: None,
            mime_type: None,
            path,
        },
    };
    Message::FileStatResponse(payload)
}

fn list_response(entries: Vec<ListEntry>, truncated: bool) -> Message {
    let entries = entries
        .into_iter()
        .map(|entry| FileListEntry {
            path: wire_path(&entry.path),
            name: entry.name,
            is_file: entry.is_file,
            is_dir: entry.is_dir,
            is_symlink: entry.is_symlink,
            size_bytes: entry.size_bytes,
            mtime: entry.mtime,
        })
        .collect();
    Message::FileListResponse(FileListResponsePayload { entries, truncated })
}

/// The FILE_* record, and a JAIL_VIOLATION record when the path led outside the root (the
/// reference's separate op for that, so violations can be found without parsing codes).
fn audit_entries(entry: Entry) -> Vec<Entry> {
    let outside = ErrorCode::PathOutsideAllowedRoot.as_str();
    let violation = (entry.result.error_code.as_deref() == Some(outside)).then(|| {
        let mut details = details([("code", json!(outside)), ("attempted_op", json!(entry.op))]);
        for key in ["path", "src", "dst"] {
            if let Some(value) = entry.details.get(key) {
                details.insert(key.to_owned(), value.clone());
            }
        }
        Entry::failed("JAIL_VIOLATION", details, outside)
    });
    std::iter::once(entry).chain(violation).collect()
}

// Wire paths are strings; a non-UTF-8 name can only be reported lossily.
fn wire_path(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::failure;
    use crate::protocol::OrUnknown;
    use local_core::machine::files::FileError;
    use local_core::machine::jail::JailError;

    #[test]
    fn bytes_format_or_base64_encoding_reads_binary() {
        let payload = |encoding, format| FileReadPayload {
            path: "a".to_owned(),
            encoding,
            format,
            offset: 3,
            length: Some(5),
        };
        for (encoding, format, expected) in [
            (FileEncoding::Utf8, FileFormat::Text, Encoding::Text),
            (FileEncoding::Base64, FileFormat::Text, Encoding::Base64),
            (FileEncoding::Utf8, FileFormat::Bytes, Encoding::Base64),
            (FileEncoding::Base64, FileFormat::Bytes, Encoding::Base64),
        ] {
            let request = read_request(payload(encoding, format));
            assert_eq!(request.encoding, expected, "{encoding:?} {format:?}");
            assert_eq!((request.offset, request.length), (3, Some(5)));
        }
    }

    #[test]
    fn non_file_messages_are_not_file_ops() {
        let ping = Message::Ping(crate::protocol::EmptyPayload {});
        assert!(FileOp::from_message(ping).is_err());
        let mv = Message::FileMove(FileMovePayload {
            src: "a".to_owned(),
            dst: "b".to_owned(),
            overwrite: true,
        });
        match FileOp::from_message(mv) {
            Ok(FileOp::Move(request)) => {
                assert_eq!((request.from.as_str(), request.to.as_str()), ("a", "b"));
                assert!(request.overwrite);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn missing_stat_keeps_only_exists_and_path() {
        let message = stat_response(StatResult {
            path: "/root/gone".into(),
            info: None,
        });
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!(json["exists"], false);
        assert_eq!(json["path"], "/root/gone");
        for field in ["is_file", "size_bytes", "mtime", "mode", "mime_type"] {
            assert!(json[field].is_null(), "{field}: {json}");
        }
    }

    #[test]
    fn core_errors_keep_their_code() {
        let outside = FileError::Jail(JailError::PathOutsideAllowedRoot);
        let Message::Error(payload) = failure(&outside) else {
            panic!("not an error");
        };
        assert_eq!(
            payload.code,
            OrUnknown::Known(ErrorCode::PathOutsideAllowedRoot)
        );
        assert!(!payload.fatal);
        let Message::Error(payload) = failure(&FileError::BadBase64) else {
            panic!("not an error");
        };
        assert_eq!(payload.code, OrUnknown::Known(ErrorCode::InternalError));
    }
}
