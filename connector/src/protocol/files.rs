//! FILE_* payloads (capability `files`, data connection only) and their replies.

use serde::{Deserialize, Serialize};

use super::messages::{Invalid, Payload};

/// FILE_LIST `max_entries` when omitted.
pub const DEFAULT_MAX_LIST_ENTRIES: u64 = 1000;

/// How file content travels on the wire.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum FileEncoding {
    /// UTF-8 text (lossy on read).
    #[default]
    #[serde(rename = "utf-8")]
    Utf8,
    /// Base64 of raw bytes.
    #[serde(rename = "base64")]
    Base64,
}

/// E2B-style read format, sent alongside `encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileFormat {
    /// Text, as `utf-8`.
    #[default]
    Text,
    /// Raw bytes, as `base64`.
    Bytes,
}

/// `FILE_READ` (platform → shim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileReadPayload {
    /// Path to read (jail-checked).
    pub path: String,
    /// Wire encoding of the reply.
    #[serde(default)]
    pub encoding: FileEncoding,
    /// E2B format; `bytes` implies binary like `base64`.
    #[serde(default)]
    pub format: FileFormat,
    /// Byte offset.
    #[serde(default)]
    pub offset: u64,
    /// Byte count; null reads to the end.
    #[serde(default)]
    pub length: Option<u64>,
}

impl Payload for FileReadPayload {
    fn validate(&self) -> Result<(), Invalid> {
        if self.length == Some(0) {
            Err(Invalid::at("length", "length must be positive or null"))
        } else {
            Ok(())
        }
    }
}

/// `FILE_CONTENTS` (shim → platform).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileContentsPayload {
    /// The content, in `encoding`.
    pub content: String,
    /// How `content` is encoded.
    pub encoding: FileEncoding,
    /// Bytes read from disk.
    pub size_bytes: u64,
    /// The file continues past what was returned.
    pub truncated: bool,
}

impl Payload for FileContentsPayload {}

/// `FILE_WRITE` (platform → shim); answered with ACK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileWritePayload {
    /// Target path (jail-checked).
    pub path: String,
    /// Content in `encoding`.
    pub content: String,
    /// How `content` is encoded.
    #[serde(default)]
    pub encoding: FileEncoding,
    /// Create missing parents (each jail-checked first).
    #[serde(default)]
    pub create_parents: bool,
}

impl Payload for FileWritePayload {}

/// `FILE_STAT` (platform → shim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStatPayload {
    /// Path to stat.
    pub path: String,
    /// Stat the link target rather than the link.
    #[serde(default = "yes")]
    pub follow_symlinks: bool,
}

impl Payload for FileStatPayload {}

const fn yes() -> bool {
    true
}

/// `FILE_STAT_RESPONSE` (shim → platform); everything but `exists` (and possibly
/// `path`) is null when the path does not exist.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileStatResponsePayload {
    /// Whether the path exists.
    pub exists: bool,
    /// Regular file.
    #[serde(default)]
    pub is_file: Option<bool>,
    /// Directory.
    #[serde(default)]
    pub is_dir: Option<bool>,
    /// Symbolic link.
    #[serde(default)]
    pub is_symlink: Option<bool>,
    /// Size in bytes.
    #[serde(default)]
    pub size_bytes: Option<u64>,
    /// Modification time, epoch seconds.
    #[serde(default)]
    pub mtime: Option<f64>,
    /// Change (or creation) time, epoch seconds.
    #[serde(default)]
    pub ctime: Option<f64>,
    /// Four-digit octal permission bits, e.g. `"0644"`.
    #[serde(default)]
    pub mode: Option<String>,
    /// Owner uid; null on Windows.
    #[serde(default)]
    pub owner_uid: Option<u32>,
    /// Owner gid; null on Windows.
    #[serde(default)]
    pub owner_gid: Option<u32>,
    /// Best-effort MIME type.
    #[serde(default)]
    pub mime_type: Option<String>,
    /// Canonical resolved path.
    #[serde(default)]
    pub path: Option<String>,
}

impl Payload for FileStatResponsePayload {}

/// `FILE_LIST` (platform → shim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileListPayload {
    /// Directory to list.
    pub path: String,
    /// Basename glob; null lists everything.
    #[serde(default)]
    pub glob: Option<String>,
    /// Descend into subdirectories.
    #[serde(default)]
    pub recursive: bool,
    /// Include dot-files.
    #[serde(default)]
    pub include_hidden: bool,
    /// Stop (with `truncated`) after this many entries.
    #[serde(default = "default_max_entries")]
    pub max_entries: u64,
}

impl Payload for FileListPayload {}

const fn default_max_entries() -> u64 {
    DEFAULT_MAX_LIST_ENTRIES
}

/// One entry of FILE_LIST_RESPONSE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileListEntry {
    /// Basename.
    pub name: String,
    /// Path (not resolved).
    pub path: String,
    /// Regular file.
    pub is_file: bool,
    /// Directory.
    pub is_dir: bool,
    /// Symbolic link.
    pub is_symlink: bool,
    /// Size in bytes (of the link itself for links).
    pub size_bytes: u64,
    /// Modification time, epoch seconds.
    pub mtime: f64,
}

/// `FILE_LIST_RESPONSE` (shim → platform).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileListResponsePayload {
    /// Entries found.
    pub entries: Vec<FileListEntry>,
    /// `max_entries` cut the listing short.
    pub truncated: bool,
}

impl Payload for FileListResponsePayload {}

/// `FILE_DELETE` (platform → shim); answered with ACK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDeletePayload {
    /// Path to delete.
    pub path: String,
    /// Required to delete a non-empty directory.
    #[serde(default)]
    pub recursive: bool,
    /// No error when the path does not exist.
    #[serde(default)]
    pub missing_ok: bool,
}

impl Payload for FileDeletePayload {}

/// `FILE_MOVE` (platform → shim); answered with ACK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMovePayload {
    /// Source path.
    pub src: String,
    /// Destination path.
    pub dst: String,
    /// Replace an existing destination.
    #[serde(default)]
    pub overwrite: bool,
}

impl Payload for FileMovePayload {}
