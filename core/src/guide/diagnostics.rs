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

/// The open file and its length, tracked here so a write costs no `stat`.
#[derive(Debug)]
struct Current {
    file: Option<File>,
    len: u64,
}

/// The rotating log file.
#[derive(Debug)]
pub struct DiagnosticLog {
    path: PathBuf,
    current: Mutex<Current>,
}

impl DiagnosticLog {
    /// Opens (creating parent folders) the log at `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let len = file.metadata()?.len();
        Ok(Self {
            path: path.to_owned(),
            current: Mutex::new(Current {
                file: Some(file),
                len,
            }),
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
        // Written by hand so the keys keep the reference's order: timestamp, event,
        // correlationId, then the event's own fields.
        let mut object = format!(r#"{{"timestamp":"{}","event":"{event}""#, iso_utc(at));
        if let Some(id) = correlation_id {
            object.push_str(&format!(
                r#","correlationId":{}"#,
                serde_json::Value::from(id)
            ));
        }
        for (name, value) in fields {
            object.push_str(&format!(r#","{name}":{}"#, value.to_json()));
        }
        object.push('}');
        let mut line = ascii_only(&object);
        line.push('\n');
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.len > 0 && current.len + line.len() as u64 > DIAGNOSTIC_LOG_MAX_BYTES {
            current.file = None;
            self.rotate();
            current.file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .ok();
            current.len = 0;
        }
        if let Some(file) = current.file.as_mut()
            && file.write_all(line.as_bytes()).is_ok()
        {
            current.len += line.len() as u64;
        }
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
fn ascii_only(text: &str) -> String {
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

    use crate::test_dir::TempDir;

    fn temp_dir(name: &str) -> TempDir {
        TempDir::new(&format!("diag-{name}"))
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
        let keys: Vec<usize> = [
            "\"timestamp\"",
            "\"event\"",
            "\"correlationId\"",
            "\"provider\"",
            "\"errorType\"",
        ]
        .iter()
        .map(|key| text.find(key).unwrap())
        .collect();
        assert!(
            keys.is_sorted(),
            "keys out of the reference's order: {text}"
        );
    }

    #[test]
    fn a_reopened_log_counts_what_is_already_there() {
        let dir = temp_dir("reopen");
        let path = dir.join("backend.log");
        let filler = vec![b'x'; usize::try_from(DIAGNOSTIC_LOG_MAX_BYTES).unwrap() - 10];
        fs::write(&path, &filler).unwrap();
        let log = DiagnosticLog::open(&path).unwrap();
        log.write(OffsetDateTime::now_utc(), "backend_started", None, &[]);
        assert_eq!(
            fs::read(log.backup(1)).unwrap(),
            filler,
            "the full file was rotated first"
        );
        assert!(
            fs::read_to_string(&path)
                .unwrap()
                .contains("backend_started")
        );
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
