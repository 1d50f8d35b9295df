//! MCP Roots: a client that offers roots (`roots/list`, `notifications/roots/list_changed`)
//! narrows the file tools (and `run_command`'s working directory) to those folders within the
//! allowed root. A root outside the allowed root is ignored with a log line; nothing a client
//! says widens the allowed root.
//!
//! Each root gets a jail of its own, so a symlink inside one root that points into another
//! folder of the allowed root is refused as any escape is (`openat2` beneath that root). A
//! call's paths are made absolute against the allowed root and served by the jail of the root
//! that holds them; a path in none of them goes to the first root's jail, which refuses it
//! with PATH_OUTSIDE_ALLOWED_ROOT and a JAIL_VIOLATION record. Calls wait while the list is
//! being asked for, so no call runs on the whole allowed root that the client meant to narrow.

#![allow(
    deprecated,
    reason = "MCP deprecates Roots (SEP-2577) in its newest version, which drops `initialize`; the clients people use still initialise and offer them, and rmcp serves them"
)]

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use local_core::machine::jail::Jail;
use rmcp::model::Root;
use rmcp::service::{Peer, RoleServer};
use tokio::sync::watch;

use crate::protocol::Message;

/// How long a call waits for the client to answer `roots/list` before it runs on the roots
/// known before (the allowed root at first): a client that offers roots answers at once.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// Where the client's roots stand.
#[derive(Debug, Clone)]
enum State {
    /// Being asked for: calls wait.
    Asking,
    /// The jails of the client's roots within the allowed root; empty when it named none
    /// there (or offers no roots): the allowed root serves.
    Known(Vec<Arc<Jail>>),
}

/// The client's roots, shared by every call.
pub(super) struct Roots {
    allowed: Arc<Jail>,
    state: watch::Sender<State>,
    /// The latest request for the list; an older answer arriving later is dropped.
    asked: AtomicU64,
}

impl Roots {
    /// No roots yet: the allowed root serves every call.
    pub(super) fn new(allowed: Arc<Jail>) -> Self {
        Self {
            allowed,
            state: watch::Sender::new(State::Known(Vec::new())),
            asked: AtomicU64::new(0),
        }
    }

    /// At `initialize`, before any call: a client that offers roots has its calls wait until
    /// its list is in.
    pub(super) fn expect(&self, offered: bool) {
        if offered {
            self.state.send_replace(State::Asking);
        }
    }

    /// Asks the client for its roots (when it offers them), once it is initialised and on each
    /// change notification; calls wait until the answer is in.
    pub(super) fn refresh(self: &Arc<Self>, peer: Peer<RoleServer>) {
        let offered = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !offered {
            return;
        }
        let asked = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
        self.state.send_replace(State::Asking);
        let roots = Arc::clone(self);
        // The answer comes through the same service loop that runs this notification's
        // handler: asking from inside it would wait on itself.
        tokio::spawn(async move {
            let jails = match peer.list_roots().await {
                Ok(listed) => roots.jails(&listed.roots),
                Err(err) => {
                    tracing::warn!(error = %err, "the client did not list its roots: the allowed root serves");
                    Vec::new()
                }
            };
            if roots.asked.load(Ordering::SeqCst) == asked {
                tracing::info!(
                    roots = jails.len(),
                    "the client's roots narrow the file tools"
                );
                roots.state.send_replace(State::Known(jails));
            }
        });
    }

    /// The jails of the client's roots that lie within the allowed root (a root holding the
    /// whole allowed root narrows nothing: the allowed root's own jail).
    fn jails(&self, listed: &[Root]) -> Vec<Arc<Jail>> {
        let mut jails = Vec::new();
        for root in listed {
            match self.jail_of(&root.uri) {
                Ok(jail) => jails.push(jail),
                Err(why) => {
                    tracing::info!(root = %root.uri, "a root the client listed is ignored: {why}")
                }
            }
        }
        jails
    }

    fn jail_of(&self, uri: &str) -> Result<Arc<Jail>, &'static str> {
        let path = url::Url::parse(uri)
            .ok()
            .filter(|url| url.scheme() == "file")
            .and_then(|url| url.to_file_path().ok())
            .ok_or("it is not a file:// URI of a local folder")?;
        // The jail opens the folder and resolves it (symlinks and all) once: its root is
        // what is compared, and what every call under it is held beneath.
        let jail = Jail::open(&path).map_err(|_| "it is no existing, readable folder")?;
        let allowed = self.allowed.root();
        if allowed.starts_with(jail.root()) {
            return Ok(Arc::clone(&self.allowed));
        }
        if !jail.root().starts_with(allowed) {
            return Err("it is outside the allowed root, which a client cannot widen");
        }
        Ok(Arc::new(jail))
    }

    /// The jail `message` runs in, its paths made absolute for it when roots narrow the
    /// tools; the allowed root's jail otherwise. Waits while the roots are asked for.
    pub(super) async fn narrow(&self, message: &mut Message) -> Arc<Jail> {
        if !uses_jail(message) {
            return Arc::clone(&self.allowed);
        }
        let mut state = self.state.subscribe();
        let known = tokio::time::timeout(
            ANSWER_WAIT,
            state.wait_for(|state| matches!(state, State::Known(_))),
        )
        .await;
        let jails = match known {
            Ok(Ok(state)) => match &*state {
                State::Known(jails) => jails.clone(),
                State::Asking => Vec::new(),
            },
            _ => {
                tracing::warn!(
                    "the client did not answer roots/list in time: the allowed root serves this call"
                );
                Vec::new()
            }
        };
        let Some(first) = jails.first() else {
            return Arc::clone(&self.allowed);
        };
        let mut paths = paths_of(message);
        let Some(lead) = paths.first().map(|path| self.absolute(path)) else {
            // Nothing but a command's default working directory: the first root.
            return Arc::clone(first);
        };
        let chosen = jails
            .iter()
            .find(|jail| lexical(&lead).starts_with(jail.root()))
            .unwrap_or(first);
        for path in &mut paths {
            **path = self.absolute(path).to_string_lossy().into_owned();
        }
        Arc::clone(chosen)
    }

    /// A wire path as an absolute path under the allowed root (as the jail reads it).
    fn absolute(&self, path: &str) -> PathBuf {
        let home = path.strip_prefix('~').and_then(|rest| {
            (rest.is_empty() || rest.starts_with('/'))
                .then(|| std::env::home_dir().map(|home| home.join(rest.trim_start_matches('/'))))
                .flatten()
        });
        home.unwrap_or_else(|| self.allowed.root().join(path))
    }
}

/// Whether a message works in the jail: the file tools and commands (their working folder).
const fn uses_jail(message: &Message) -> bool {
    matches!(
        message,
        Message::FileRead(_)
            | Message::FileWrite(_)
            | Message::FileStat(_)
            | Message::FileList(_)
            | Message::FileDelete(_)
            | Message::FileMove(_)
            | Message::ExecuteCommand(_)
    )
}

/// The paths a message names, the first deciding its root (a move's source).
fn paths_of(message: &mut Message) -> Vec<&mut String> {
    match message {
        Message::FileRead(read) => vec![&mut read.path],
        Message::FileWrite(write) => vec![&mut write.path],
        Message::FileStat(stat) => vec![&mut stat.path],
        Message::FileList(list) => vec![&mut list.path],
        Message::FileDelete(delete) => vec![&mut delete.path],
        Message::FileMove(moving) => vec![&mut moving.src, &mut moving.dst],
        Message::ExecuteCommand(command) => command.cwd.iter_mut().collect(),
        _ => Vec::new(),
    }
}

/// `path` with `.` and `..` taken away by spelling alone, to pick a root (the root's jail
/// then judges the real path, symlinks and all).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_takes_dots_away_by_spelling() {
        assert_eq!(lexical(Path::new("/r/a/./b/../c")), Path::new("/r/a/c"));
        assert_eq!(lexical(Path::new("/r/a/../../x")), Path::new("/x"));
    }
}
