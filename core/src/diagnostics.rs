//! The content-free diagnostic log: one ASCII JSON object per line, rotated by size.
//!
//! Only metadata is ever written (event names, ids, counts, codes, durations). Callers pass
//! [`Field`]s built from numbers, booleans and fixed vocabulary; prompts, screen text, labels,
//! images, tokens and error messages have no way in.

use std::{
    fs::{self, File, OpenOptions},
    io::Write,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};

use time::OffsetDateTime;

use crate::{
    clock::iso_utc,
    limits::{DIAGNOSTIC_LOG_BACKUPS, DIAGNOSTIC_LOG_MAX_BYTES},
};

/// A value of a diagnostic field: never free text from a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    /// A fixed word of our own vocabulary (event names, stages, statuses, provider names).
    Word(&'static str),
    /// An identifier we minted (correlation ids) or a code we derived.
    Id(String),
    /// A count or size.
    Count(u64),
    /// A flag.
    Flag(bool),
    /// Nothing to say.
    Null,
}

impl Field {
    fn to_json(&self) -> serde_json::Value {
        match self {
            Self::Word(word) => serde_json::Value::from(*word),
            Self::Id(id) => serde_json::Value::from(id.as_str()),
            Self::Count(n) => serde_json::Value::from(*n),
            Self::Flag(flag) => serde_json::Value::from(*flag),
            Self::Null => serde_json::Value::Null,
        }
    }
}

/// The rotating log file.
#[derive(Debug)]
pub struct DiagnosticLog {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl DiagnosticLog {
    /// Opens (creating parent folders) the log at `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(Some(file)),
        })
    }

    /// Appends one event. A failing disk never fails the request that is being logged.
    pub fn write(
        &self,
        at: OffsetDateTime,
        event: &'static str,
        correlation_id: Option<&str>,
        fields: &[(&'static str, Field)],
    ) {
        let mut object = serde_json::Map::new();
        object.insert("timestamp".to_owned(), iso_utc(at).into());
        object.insert("event".to_owned(), event.into());
        if let Some(id) = correlation_id {
            object.insert("correlationId".to_owned(), id.into());
        }
        for (name, value) in fields {
            object.insert((*name).to_owned(), value.to_json());
        }
        let mut line = ascii_json(&serde_json::Value::Object(object));
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if Self::needs_rotation(file.as_ref(), line.len()) {
            *file = None;
            self.rotate();
            *file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .ok();
        }
        if let Some(file) = file.as_mut() {
            let _ = file.write_all(line.as_bytes());
        }
    }

    fn needs_rotation(file: Option<&File>, incoming: usize) -> bool {
        let size = file.and_then(|f| f.metadata().ok()).map_or(0, |m| m.len());
        size > 0 && size + incoming as u64 > DIAGNOSTIC_LOG_MAX_BYTES
    }

    fn backup(&self, n: u32) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn rotate(&self) {
        let _ = fs::remove_file(self.backup(DIAGNOSTIC_LOG_BACKUPS));
        for n in (1..DIAGNOSTIC_LOG_BACKUPS).rev() {
            let _ = fs::rename(self.backup(n), self.backup(n + 1));
        }
        let _ = fs::rename(&self.path, self.backup(1));
    }
}

/// Compact JSON with every non-ASCII character escaped, as the reference writes it.
fn ascii_json(value: &serde_json::Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("diag-{name}-{}", uuid::Uuid::new_v4()));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn lines_are_ascii_json_with_metadata() {
        let dir = temp_dir("lines");
        let path = dir.join("nested/backend.log");
        let log = DiagnosticLog::open(&path).unwrap();
        log.write(
            OffsetDateTime::now_utc(),
            "guidance_started",
            Some("cid"),
            &[
                ("provider", Field::Word("demo")),
                ("elementCount", Field::Count(3)),
                ("imageShared", Field::Flag(false)),
                ("imageWidth", Field::Null),
                ("errorType", Field::Id("Erré".to_owned())),
            ],
        );
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.is_ascii());
        let line: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(line["event"], "guidance_started");
        assert_eq!(line["correlationId"], "cid");
        assert_eq!(line["elementCount"], 3);
        assert_eq!(line["errorType"], "Erré");
    }

    #[test]
    fn rotates_at_the_size_limit_keeping_two_backups() {
        let dir = temp_dir("rotate");
        let path = dir.join("backend.log");
        let log = DiagnosticLog::open(&path).unwrap();
        let big = "x".repeat(1000);
        for _ in 0..4000 {
            log.write(
                OffsetDateTime::now_utc(),
                "backend_started",
                Some(&big),
                &[],
            );
        }
        for file in [path, log.backup(1), log.backup(2)] {
            let len = fs::metadata(&file).unwrap().len();
            assert!(
                len <= DIAGNOSTIC_LOG_MAX_BYTES,
                "{} is {len}",
                file.display()
            );
        }
        assert!(fs::metadata(log.backup(1)).unwrap().len() > DIAGNOSTIC_LOG_MAX_BYTES - 2000);
        assert!(!log.backup(3).exists());
    }
}
