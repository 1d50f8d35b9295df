//! The daemon's handle on its HMAC-chained audit log: one chain per machine, shared by every
//! connection, written by one writer thread (each record is fsynced before anyone is told).
//!
//! A failed write of an ordinary record is logged (without the record) and swallowed, as the
//! reference does: losing the platform's request because the disk is full would be worse.
//! SHIM_START is written by [`Auditor::new_after`] before the writer thread starts, other
//! start-up records with [`Auditor::record_strict`], so a daemon that cannot audit never runs.
//!
//! Writes are group-committed by the writer thread: it takes every record queued so far,
//! writes them with one fsync and then tells all their callers at once, and goes straight on
//! to whatever queued during that fsync. Every record is still durable before its caller
//! learns so (and so before the reply to the platform goes out). Async callers wait without a
//! blocking thread. The writer never waits for records still to come: with 4 FILE_STATs in
//! flight, waiting 40-150 µs for stragglers put 2.5 records in each fsync instead of 1.45 but
//! answered fewer requests a second.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, mpsc};

use local_core::machine::audit_chain::{AuditChain, AuditResult, PendingRecord};
use serde_json::{Map, Value};
use tokio::sync::oneshot;

/// One record before it is signed: the op name, its metadata and its result.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The reference's op name (`FILE_READ`, `WS_CONNECTED`, ...).
    pub op: &'static str,
    /// Metadata only: sizes, counts, paths, codes.
    pub details: Map<String, Value>,
    /// How it ended.
    pub result: AuditResult,
}

impl Entry {
    /// A successful operation.
    pub fn ok(op: &'static str, details: Map<String, Value>) -> Self {
        Self {
            op,
            details,
            result: AuditResult {
                ok: true,
                ..AuditResult::default()
            },
        }
    }

    /// A failed operation with its wire error code.
    pub fn failed(op: &'static str, details: Map<String, Value>, code: &str) -> Self {
        Self {
            op,
            details,
            result: AuditResult {
                ok: false,
                error_code: Some(code.to_owned()),
                ..AuditResult::default()
            },
        }
    }

    /// Sets how long the operation took.
    #[must_use]
    pub fn with_duration(mut self, duration: std::time::Duration) -> Self {
        self.result.duration_ms = Some(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX));
        self
    }
}

/// Builds a details map from `(key, value)` pairs.
pub fn details<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
}

/// How a batch went, as its records' callers learn it.
type Outcome = Result<(), String>;

/// Whoever waits for a record: a blocking thread, an async task, or a hand-off run by the
/// writer once the records are durable.
#[derive(Debug)]
enum Waiter {
    Blocking(mpsc::SyncSender<Outcome>),
    Async(oneshot::Sender<Outcome>),
    Then(Then),
}

/// What [`Auditor::submit_then`] runs with the batch's outcome. Dropped unrun (the writer has
/// gone, or the job never reached it), it runs with "not written", as the other waiters read
/// a dropped sender.
struct Then(Option<Box<dyn FnOnce(Outcome) + Send>>);

impl Then {
    fn run(mut self, outcome: Outcome) {
        if let Some(then) = self.0.take() {
            then(outcome);
        }
    }
}

impl Drop for Then {
    fn drop(&mut self) {
        if let Some(then) = self.0.take() {
            then(Err(gone()));
        }
    }
}

impl std::fmt::Debug for Then {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Then")
    }
}

/// Records for the writer thread, written together, with whoever waits for them.
#[derive(Debug)]
struct Job {
    records: Vec<PendingRecord>,
    waiter: Waiter,
}

#[derive(Debug)]
struct Shared {
    /// The live file: STATUS asks for its size from the session loop.
    path: PathBuf,
    jobs: mpsc::Sender<Job>,
}

/// A cloneable handle on the machine's audit chain; [`Auditor::disabled`] writes nothing.
#[derive(Debug, Clone, Default)]
pub struct Auditor {
    shared: Option<Arc<Shared>>,
    /// The session every record of this handle is written for, when it is not the chain's
    /// own (a control-mode child).
    session: Option<Arc<str>>,
}

/// Records handed to the writer; [`Durable::wait`] returns once they are on disk.
#[must_use = "a record is only known to be durable once waited for"]
#[derive(Debug)]
pub struct Durable {
    ops: Vec<&'static str>,
    outcome: Option<oneshot::Receiver<Outcome>>,
}

impl Durable {
    /// Waits for the fsync that covers these records; a failure is logged and swallowed.
    pub async fn wait(self) {
        let Some(outcome) = self.outcome else {
            return;
        };
        let result = outcome.await.unwrap_or_else(|_| Err(gone()));
        warn_unwritten(&self.ops, &result);
    }
}

/// Logs a batch that could not be written; the error names the file at most, and the records
/// themselves are never logged.
pub fn warn_unwritten(ops: &[&'static str], outcome: &Result<(), String>) {
    if let Err(err) = outcome {
        tracing::warn!(?ops, error = %err, "could not write an audit record");
    }
}

impl Auditor {
    /// Writes to `chain` from a writer thread of its own, which ends with the last handle.
    ///
    /// # Errors
    /// The thread could not be started.
    pub fn new(chain: AuditChain) -> io::Result<Self> {
        let path = chain.path().to_path_buf();
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name("audit-writer".to_owned())
            .spawn(move || write_batches(chain, &queue))?;
        Ok(Self {
            shared: Some(Arc::new(Shared { path, jobs })),
            session: None,
        })
    }

    /// [`Auditor::new`], once `first` is durable in `chain`, written on this thread: a start's
    /// SHIM_START no longer waits for the new thread to be scheduled first (0.2-1.5 ms of
    /// every start on a busy 2-core machine).
    ///
    /// # Errors
    /// `first` could not be written (nothing is started), or the thread could not be.
    pub fn new_after(mut chain: AuditChain, first: Entry) -> Result<Self, StartError> {
        chain
            .append_batch(vec![pending(None, None, first)])
            .map_err(StartError::Write)?;
        Self::new(chain).map_err(StartError::Spawn)
    }

    /// The same chain, writing every record for `session_id`: a control-mode child's
    /// records carry its session on the machine's one chain.
    #[must_use]
    pub fn for_session(&self, session_id: &str) -> Self {
        Self {
            shared: self.shared.clone(),
            session: Some(Arc::from(session_id)),
        }
    }

    /// Writes nothing (tests of other parts, tools that only read).
    pub const fn disabled() -> Self {
        Self {
            shared: None,
            session: None,
        }
    }

    /// The live file, when auditing.
    pub fn path(&self) -> Option<PathBuf> {
        let shared = self.shared.as_ref()?;
        Some(shared.path.clone())
    }

    /// Appends a record, blocking on the fsync. Failures are logged and swallowed.
    pub fn record(&self, request_id: Option<&str>, entry: Entry) {
        let op = entry.op;
        if let Err(err) = self.record_blocking(request_id, vec![entry]) {
            // The error names the file at most; the record itself is never logged.
            tracing::warn!(op, error = %err, "could not write an audit record");
        }
    }

    /// Appends a record, blocking until it is durable, and reports a failure.
    ///
    /// # Errors
    /// The chain could not be written.
    pub fn record_strict(&self, request_id: Option<&str>, entry: Entry) -> io::Result<()> {
        self.record_blocking(request_id, vec![entry])
    }

    /// Hands `entries` to the writer without waiting; [`Durable::wait`] waits for them.
    pub fn submit(&self, request_id: Option<&str>, entries: Vec<Entry>) -> Durable {
        let ops = entries.iter().map(|entry| entry.op).collect();
        let (sender, receiver) = oneshot::channel();
        let outcome = self
            .send(request_id, entries, Waiter::Async(sender))
            .then_some(receiver);
        Durable { ops, outcome }
    }

    /// Hands `entries` to the writer, which runs `then` with the outcome once they are durable
    /// (at once when auditing is off). A blocking thread hands its reply over this way, so the
    /// task waiting for it wakes once, after the fsync, instead of once when the thread ends
    /// and again when the fsync does: one wake-up less for every file request.
    pub fn submit_then(
        &self,
        request_id: Option<&str>,
        entries: Vec<Entry>,
        then: impl FnOnce(Result<(), String>) + Send + 'static,
    ) {
        if self.shared.is_none() {
            then(Ok(()));
            return;
        }
        let _ = self.send(
            request_id,
            entries,
            Waiter::Then(Then(Some(Box::new(then)))),
        );
    }

    /// Appends a record from async code, waiting for its fsync without a blocking thread.
    pub async fn record_async(&self, request_id: Option<String>, entry: Entry) {
        self.submit(request_id.as_deref(), vec![entry]).wait().await;
    }

    /// The live file's size, for STATUS `audit_log_bytes` (0 when not auditing or unreadable).
    pub fn log_bytes(&self) -> u64 {
        self.path()
            .and_then(|path| local_core::machine::own_files::file_len(&path).ok())
            .unwrap_or(0)
    }

    fn record_blocking(&self, request_id: Option<&str>, entries: Vec<Entry>) -> io::Result<()> {
        let (sender, receiver) = mpsc::sync_channel(1);
        if !self.send(request_id, entries, Waiter::Blocking(sender)) {
            return Ok(());
        }
        receiver
            .recv()
            .unwrap_or_else(|_| Err(gone()))
            .map_err(io::Error::other)
    }

    /// Queues the records; false when auditing is off. A writer that has gone answers
    /// through the dropped waiter.
    fn send(&self, request_id: Option<&str>, entries: Vec<Entry>, waiter: Waiter) -> bool {
        let Some(shared) = &self.shared else {
            return false;
        };
        let session = self.session.as_deref();
        let records = entries
            .into_iter()
            .map(|entry| pending(session, request_id, entry))
            .collect();
        // A send error hands the job back, and dropping it drops the waiter, which then
        // reads as "not written".
        let _ = shared.jobs.send(Job { records, waiter });
        true
    }
}

/// Why [`Auditor::new_after`] failed.
#[derive(Debug)]
pub enum StartError {
    /// The first record could not be written.
    Write(io::Error),
    /// The writer thread could not be started.
    Spawn(io::Error),
}

/// `entry` as the chain takes it, for `session` (`None`: the chain's own) and `request_id`.
fn pending(session: Option<&str>, request_id: Option<&str>, entry: Entry) -> PendingRecord {
    PendingRecord {
        session_id: session.map(str::to_owned),
        request_id: request_id.map(str::to_owned),
        op: entry.op.to_owned(),
        details: entry.details,
        result: entry.result,
    }
}

/// The writer thread: every job queued so far goes into one batch with one fsync, and all
/// their waiters hear the outcome together.
fn write_batches(mut chain: AuditChain, queue: &mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut jobs = vec![first];
        jobs.extend(queue.try_iter());
        let records = jobs
            .iter_mut()
            .flat_map(|job| std::mem::take(&mut job.records))
            .collect();
        let outcome: Outcome = chain
            .append_batch(records)
            .map(|_| ())
            .map_err(|err| err.to_string());
        for job in jobs {
            // A waiter that has gone (its request was cancelled) needs no answer.
            match job.waiter {
                Waiter::Blocking(sender) => drop(sender.send(outcome.clone())),
                Waiter::Async(sender) => drop(sender.send(outcome.clone())),
                Waiter::Then(then) => then.run(outcome.clone()),
            }
        }
    }
}

fn gone() -> String {
    "the audit record was not written".to_owned()
}

#[cfg(test)]
// The test inspects and removes its own temporary directory directly.
#[allow(clippy::disallowed_methods)]
mod tests {
    use local_core::machine::audit_chain::{AuditIdentity, verify};
    use serde_json::json;

    use super::*;

    /// A fresh directory for one test's log, the log's path in it, and a key.
    fn place(tag: &str, key_byte: u8) -> (PathBuf, PathBuf, [u8; 32]) {
        let dir =
            std::env::temp_dir().join(format!("{tag}-{}", local_core::secret::new_id().simple()));
        let path = dir.join("audit.log");
        (dir, path, [key_byte; 32])
    }

    /// An auditor on a new chain at `path`, its records written for `session_id`.
    fn open(path: &std::path::Path, key: [u8; 32], session_id: Option<&str>) -> Auditor {
        let identity = AuditIdentity {
            session_id: session_id.map(str::to_owned),
            machine_id: None,
            shim_version: "0.2.0".to_owned(),
        };
        Auditor::new(AuditChain::open(path, key, identity).unwrap()).unwrap()
    }

    #[test]
    fn records_chain_and_the_disabled_auditor_writes_nothing() {
        let (dir, path, key) = place("connector-audit", 7);
        let auditor = open(&path, key, Some("s-1"));
        auditor.record(
            Some("r-1"),
            Entry::ok("FILE_STAT", details([("path", json!("/x"))])),
        );
        auditor.record(
            None,
            Entry::failed("FILE_READ", Map::new(), "PATH_NOT_FOUND"),
        );
        assert!(auditor.log_bytes() > 0);
        let report = verify(&path, &key).unwrap();
        assert!(report.is_clean(), "{report:?}");
        let text = local_core::machine::own_files::read_capped(&path, 1 << 20)
            .unwrap()
            .unwrap();
        let text = String::from_utf8(text).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(text.contains("\"error_code\": \"PATH_NOT_FOUND\""));

        let disabled = Auditor::disabled();
        disabled.record(None, Entry::ok("SHIM_START", Map::new()));
        assert_eq!(disabled.log_bytes(), 0);
        assert!(disabled.path().is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn one_operations_records_are_written_together_in_order() {
        let (dir, path, key) = place("connector-audit-together", 3);
        let auditor = open(&path, key, None);
        auditor
            .submit(
                Some("r-1"),
                vec![
                    Entry::ok("FILE_STAT", Map::new()),
                    Entry::failed("JAIL_VIOLATION", Map::new(), "PATH_OUTSIDE_ALLOWED_ROOT"),
                ],
            )
            .wait()
            .await;

        let text = std::fs::read_to_string(&path).unwrap();
        let ops: Vec<String> = text
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).unwrap()["op"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(ops, ["FILE_STAT", "JAIL_VIOLATION"]);
        assert!(verify(&path, &key).unwrap().is_clean());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn concurrent_writers_keep_one_unbroken_chain() {
        let (dir, path, key) = place("connector-audit-group", 9);
        let auditor = open(&path, key, None);
        let writers: Vec<_> = (0..8)
            .map(|writer| {
                let auditor = auditor.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let entry = Entry::ok("FILE_STAT", details([("i", json!(i))]));
                        auditor
                            .record_strict(Some(&format!("w{writer}-{i}")), entry)
                            .unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let report = verify(&path, &key).unwrap();
        assert!(report.is_clean(), "{report:?}");
        let text = std::fs::read_to_string(&path).unwrap();
        let seqs: Vec<u64> = text
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).unwrap()["seq"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(seqs, (1..=400).collect::<Vec<_>>());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn async_records_are_on_disk_when_their_wait_returns() {
        let (dir, path, key) = place("connector-audit-async", 5);
        let auditor = open(&path, key, None);
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let auditor = auditor.clone();
                let path = path.clone();
                tokio::spawn(async move {
                    let id = format!("r-{i}");
                    auditor
                        .submit(Some(&id), vec![Entry::ok("FILE_STAT", Map::new())])
                        .wait()
                        .await;
                    // Durable means written: the record is in the file the moment wait returns.
                    let text = std::fs::read_to_string(&path).unwrap();
                    assert!(text.contains(&format!("\"request_id\": \"{id}\"")), "{id}");
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        auditor
            .record_async(None, Entry::ok("SHIM_STOP", Map::new()))
            .await;
        let report = verify(&path, &key).unwrap();
        assert!(report.is_clean(), "{report:?}");
        assert_eq!(report.records, 17);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_first_record_is_on_disk_before_the_writer_starts_or_nothing_starts() {
        let (dir, path, key) = place("connector-audit-first", 4);
        let identity = || AuditIdentity {
            session_id: None,
            machine_id: None,
            shim_version: "0.2.0".to_owned(),
        };
        let chain = AuditChain::open(&path, key, identity()).unwrap();
        let start = Entry::ok("SHIM_START", Map::new());
        let auditor = Auditor::new_after(chain, start).unwrap();
        // Written before `new_after` returned, not queued: no wait for the writer thread.
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"op\": \"SHIM_START\""), "{text}");
        auditor
            .record_strict(None, Entry::ok("FILE_STAT", Map::new()))
            .unwrap();
        let report = verify(&path, &key).unwrap();
        assert!(report.is_clean(), "{report:?}");
        assert_eq!(report.records, 2);

        // A first record that cannot be written is reported as such.
        let chain = AuditChain::open(&path, key, identity()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let failed = Auditor::new_after(chain, Entry::ok("SHIM_START", Map::new()));
        assert!(matches!(failed, Err(StartError::Write(_))), "{failed:?}");
        assert!(!path.exists());
    }

    #[test]
    fn a_failed_batch_reaches_every_waiter() {
        let (dir, path, key) = place("connector-audit-fail", 1);
        let auditor = open(&path, key, None);
        auditor
            .record_strict(None, Entry::ok("SHIM_START", Map::new()))
            .unwrap();
        // The directory goes away: the next batch cannot create the file again.
        std::fs::remove_dir_all(&dir).unwrap();
        let err = auditor
            .record_strict(None, Entry::ok("FILE_STAT", Map::new()))
            .unwrap_err();
        assert!(err.to_string().contains("No such file"), "{err}");
        // Swallowed, not hung, for the logging callers.
        auditor.record(None, Entry::ok("FILE_STAT", Map::new()));
        assert!(!path.exists());
        // A hand-off hears the failure too.
        let (sender, outcome) = mpsc::channel();
        auditor.submit_then(None, vec![Entry::ok("FILE_STAT", Map::new())], move |o| {
            sender.send(o).unwrap();
        });
        assert!(outcome.recv().unwrap().is_err());
    }

    #[test]
    fn a_hand_off_runs_once_its_records_are_on_disk_or_at_once_without_audit() {
        let (dir, path, key) = place("connector-audit-then", 3);
        let auditor = open(&path, key, None);
        let (sender, seen) = mpsc::channel();
        for i in 0..8 {
            let path = path.clone();
            let sender = sender.clone();
            let id = format!("r-{i}");
            let written = format!("\"request_id\": \"{id}\"");
            let entry = Entry::ok("FILE_STAT", Map::new());
            auditor.submit_then(Some(&id), vec![entry], move |outcome| {
                // Durable means written: the record is in the file when the hand-off runs.
                let text = std::fs::read_to_string(&path).unwrap();
                sender.send((outcome, text.contains(&written))).unwrap();
            });
        }
        for _ in 0..8 {
            assert_eq!(seen.recv().unwrap(), (Ok(()), true));
        }
        // Without a writer the hand-off runs at once, on the caller's thread, with success.
        let (sender, outcome) = mpsc::channel();
        let entry = Entry::ok("FILE_STAT", Map::new());
        Auditor::disabled().submit_then(None, vec![entry], move |o| sender.send(o).unwrap());
        assert_eq!(outcome.try_recv(), Ok(Ok(())));
        // The writer dropping a job unrun (it has gone) still answers the hand-off.
        let (sender, outcome) = mpsc::channel();
        drop(Then(Some(Box::new(move |o| sender.send(o).unwrap()))));
        assert_eq!(outcome.recv().unwrap(), Err(gone()));
        drop(auditor);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
