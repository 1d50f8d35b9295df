//! The control connection's browse tables: opaque browse ids, directory references and
//! cursors minted by this host, bounded and short-lived (shim-reference-behaviour.md
//! section 5, "Directory browsing"). The listing itself is `local_core::machine::browse`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use local_core::machine::browse::{self, BrowseError, Identity, OpenDir};

use crate::protocol::{
    DirectoryEntry, DirectoryListResponsePayload, ErrorCode, MAX_DIRECTORY_ENTRIES,
};

/// At most this many browses at once; the oldest is evicted.
pub const MAX_BROWSE_SESSIONS: usize = 8;
/// At most this many directory references per browse.
pub const MAX_REFS_PER_BROWSE: usize = 1200;
/// At most this many cursors per browse; the least recently used is evicted.
pub const MAX_CURSORS_PER_BROWSE: usize = 32;
/// A browse lives this long from its start.
pub const BROWSE_TTL: Duration = Duration::from_secs(300);

/// Why a browse request fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BrowseFailure {
    /// Unknown, expired, consumed or foreign browse, reference or cursor.
    #[error("The directory reference is invalid or expired.")]
    Invalid,
    /// The directory vanished, became a link or is no longer accessible.
    #[error("The selected directory is no longer available.")]
    Unavailable,
}

impl BrowseFailure {
    /// The wire error code.
    pub const fn code(self) -> ErrorCode {
        match self {
            Self::Invalid => ErrorCode::DirectoryReferenceInvalid,
            Self::Unavailable => ErrorCode::DirectoryUnavailable,
        }
    }
}

impl From<BrowseError> for BrowseFailure {
    fn from(_: BrowseError) -> Self {
        Self::Unavailable
    }
}

/// One directory a reference stands for.
#[derive(Debug, Clone)]
struct Node {
    path: PathBuf,
    identity: Identity,
    parent: Option<String>,
}

#[derive(Debug)]
struct Browse {
    started: u64,
    expires_at: SystemTime,
    refs: HashMap<String, Node>,
    /// `(cursor, directory ref, offset)`, least recently used first.
    cursors: Vec<(String, String, usize)>,
}

/// Every live browse of the current control connection.
#[derive(Debug, Default)]
pub struct Browser {
    browses: HashMap<String, Browse>,
    started: u64,
}

impl Browser {
    /// Forgets every browse: the control connection reconnected.
    pub fn reset(&mut self) {
        self.browses.clear();
    }

    /// How many browses are live (expired ones included until touched).
    pub fn len(&self) -> usize {
        self.browses.len()
    }

    /// Whether no browse is live.
    pub fn is_empty(&self) -> bool {
        self.browses.is_empty()
    }

    /// Answers a DIRECTORY_LIST_REQUEST: both references null start a browse with the
    /// virtual roots; otherwise a page of the referenced directory.
    ///
    /// # Errors
    /// See [`BrowseFailure`].
    pub fn list(
        &mut self,
        browse_id: Option<&str>,
        directory_ref: Option<&str>,
        cursor: Option<&str>,
        home: Option<&Path>,
        now: SystemTime,
    ) -> Result<DirectoryListResponsePayload, BrowseFailure> {
        match (browse_id, directory_ref) {
            (None, None) if cursor.is_none() => Ok(self.start(home, now)),
            (Some(browse_id), Some(directory_ref)) => {
                self.page(browse_id, directory_ref, cursor, now)
            }
            _ => Err(BrowseFailure::Invalid),
        }
    }

    /// Resolves a reference for ATTACH_SESSION, strictly re-opening the directory, and on
    /// success consumes the whole browse (a browse is single use).
    ///
    /// # Errors
    /// See [`BrowseFailure`].
    pub fn take(
        &mut self,
        browse_id: &str,
        directory_ref: &str,
        now: SystemTime,
    ) -> Result<OpenDir, BrowseFailure> {
        let node = self.node(browse_id, directory_ref, now)?;
        let open = reopen(&node)?;
        self.browses.remove(browse_id);
        Ok(open)
    }

    fn start(&mut self, home: Option<&Path>, now: SystemTime) -> DirectoryListResponsePayload {
        self.purge(now);
        while self.browses.len() >= MAX_BROWSE_SESSIONS {
            let oldest = self
                .browses
                .iter()
                .min_by_key(|(_, browse)| browse.started)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => self.browses.remove(&id),
                None => break,
            };
        }
        self.started += 1;
        let browse_id = token();
        let mut browse = Browse {
            started: self.started,
            expires_at: now + BROWSE_TTL,
            refs: HashMap::new(),
            cursors: Vec::new(),
        };
        let entries = browse::virtual_roots(home)
            .into_iter()
            .take(MAX_DIRECTORY_ENTRIES)
            .map(|root| browse.mint(&root.path, root.identity, None))
            .collect();
        let expires_at = epoch(browse.expires_at);
        self.browses.insert(browse_id.clone(), browse);
        DirectoryListResponsePayload {
            browse_id,
            current: None,
            parent_ref: None,
            entries,
            next_cursor: None,
            truncated: false,
            expires_at,
        }
    }

    fn page(
        &mut self,
        browse_id: &str,
        directory_ref: &str,
        cursor: Option<&str>,
        now: SystemTime,
    ) -> Result<DirectoryListResponsePayload, BrowseFailure> {
        let node = self.node(browse_id, directory_ref, now)?;
        let browse = self
            .browses
            .get_mut(browse_id)
            .ok_or(BrowseFailure::Invalid)?;
        let offset = match cursor {
            None => 0,
            Some(cursor) => {
                let at = browse
                    .cursors
                    .iter()
                    .position(|(c, r, _)| c == cursor && r == directory_ref)
                    .ok_or(BrowseFailure::Invalid)?;
                // Most recently used last.
                let used = browse.cursors.remove(at);
                let offset = used.2;
                browse.cursors.push(used);
                offset
            }
        };
        let open = reopen(&node)?;
        let listing = browse::list(&open).map_err(|_| BrowseFailure::Unavailable)?;
        let mut truncated = listing.truncated;
        let mut entries = Vec::new();
        let mut end = offset;
        let mut out_of_refs = false;
        for child in listing
            .children
            .iter()
            .skip(offset)
            .take(MAX_DIRECTORY_ENTRIES)
        {
            if browse.refs.len() >= MAX_REFS_PER_BROWSE {
                out_of_refs = true;
                break;
            }
            entries.push(browse.mint(&child.path, child.identity, Some(directory_ref)));
            end += 1;
        }
        // The reference bound ends the browse's paging: what is left is omitted.
        let next_cursor = if out_of_refs {
            truncated = true;
            None
        } else {
            (end < listing.children.len()).then(|| browse.cursor(directory_ref, end))
        };
        Ok(DirectoryListResponsePayload {
            browse_id: browse_id.to_owned(),
            current: Some(DirectoryEntry {
                directory_ref: directory_ref.to_owned(),
                name: browse::display_name(&node.path),
                path: node.path.to_string_lossy().into_owned(),
            }),
            parent_ref: node.parent.clone(),
            entries,
            next_cursor,
            truncated,
            expires_at: epoch(browse.expires_at),
        })
    }

    /// The live node behind a reference; an expired browse is dropped on the way.
    fn node(
        &mut self,
        browse_id: &str,
        directory_ref: &str,
        now: SystemTime,
    ) -> Result<Node, BrowseFailure> {
        let browse = self.browses.get(browse_id).ok_or(BrowseFailure::Invalid)?;
        if browse.expires_at <= now {
            self.browses.remove(browse_id);
            return Err(BrowseFailure::Invalid);
        }
        browse
            .refs
            .get(directory_ref)
            .cloned()
            .ok_or(BrowseFailure::Invalid)
    }

    fn purge(&mut self, now: SystemTime) {
        self.browses.retain(|_, browse| browse.expires_at > now);
    }
}

impl Browse {
    fn mint(&mut self, path: &Path, identity: Identity, parent: Option<&str>) -> DirectoryEntry {
        let directory_ref = token();
        self.refs.insert(
            directory_ref.clone(),
            Node {
                path: path.to_path_buf(),
                identity,
                parent: parent.map(str::to_owned),
            },
        );
        DirectoryEntry {
            directory_ref,
            name: browse::display_name(path),
            path: path.to_string_lossy().into_owned(),
        }
    }

    /// The cursor for `offset` of `directory_ref`, re-used when one exists.
    fn cursor(&mut self, directory_ref: &str, offset: usize) -> String {
        if let Some(existing) = self
            .cursors
            .iter()
            .find(|(_, r, o)| r == directory_ref && *o == offset)
        {
            return existing.0.clone();
        }
        if self.cursors.len() >= MAX_CURSORS_PER_BROWSE {
            self.cursors.remove(0);
        }
        let cursor = token();
        self.cursors
            .push((cursor.clone(), directory_ref.to_owned(), offset));
        cursor
    }
}

/// Opens a node's directory again and checks it is the one that was listed.
fn reopen(node: &Node) -> Result<OpenDir, BrowseFailure> {
    let open = browse::open_strict(&node.path)?;
    if open.identity != node.identity {
        return Err(BrowseFailure::Unavailable);
    }
    Ok(open)
}

/// A fresh opaque token: 122 random bits from the CSPRNG, as 32 hex characters.
fn token() -> String {
    local_core::secret::new_id().simple().to_string()
}

fn epoch(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
// The tests build their directory trees directly.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn tree(tag: &str, children: usize) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "control-browser-{tag}-{}",
            local_core::secret::new_id().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..children {
            std::fs::create_dir(dir.join(format!("d{i:04}"))).unwrap();
        }
        std::fs::canonicalize(dir).unwrap()
    }

    fn start(browser: &mut Browser, home: &Path, now: SystemTime) -> (String, String) {
        let page = browser.list(None, None, None, Some(home), now).unwrap();
        (page.browse_id, page.entries[0].directory_ref.clone())
    }

    #[test]
    fn browses_are_bounded_and_the_oldest_is_evicted() {
        let home = tree("bound", 0);
        let now = SystemTime::now();
        let mut browser = Browser::default();
        let first = start(&mut browser, &home, now);
        for _ in 1..MAX_BROWSE_SESSIONS {
            start(&mut browser, &home, now);
        }
        assert_eq!(browser.len(), MAX_BROWSE_SESSIONS);
        assert!(
            browser
                .list(Some(&first.0), Some(&first.1), None, None, now)
                .is_ok()
        );
        start(&mut browser, &home, now);
        assert_eq!(browser.len(), MAX_BROWSE_SESSIONS);
        assert_eq!(
            browser
                .list(Some(&first.0), Some(&first.1), None, None, now)
                .unwrap_err(),
            BrowseFailure::Invalid
        );
        std::fs::remove_dir_all(home).unwrap();
    }

    #[test]
    fn references_expire_with_the_browse_and_die_on_reset() {
        let home = tree("ttl", 1);
        let now = SystemTime::now();
        let mut browser = Browser::default();
        let (browse_id, home_ref) = start(&mut browser, &home, now);
        let just_before = now + BROWSE_TTL - Duration::from_millis(1);
        assert!(
            browser
                .list(Some(&browse_id), Some(&home_ref), None, None, just_before)
                .is_ok()
        );
        assert_eq!(
            browser
                .list(
                    Some(&browse_id),
                    Some(&home_ref),
                    None,
                    None,
                    now + BROWSE_TTL
                )
                .unwrap_err(),
            BrowseFailure::Invalid
        );
        let (browse_id, home_ref) = start(&mut browser, &home, now);
        browser.reset();
        assert!(browser.is_empty());
        assert_eq!(
            browser.take(&browse_id, &home_ref, now).unwrap_err(),
            BrowseFailure::Invalid
        );
        std::fs::remove_dir_all(home).unwrap();
    }

    #[test]
    fn the_reference_bound_truncates_without_a_cursor() {
        let home = tree("refs", 250);
        let now = SystemTime::now();
        let mut browser = Browser::default();
        let (browse_id, home_ref) = start(&mut browser, &home, now);
        // One root reference, then 200 per first page.
        let listings = (MAX_REFS_PER_BROWSE - 1) / MAX_DIRECTORY_ENTRIES;
        for _ in 0..listings {
            let page = browser
                .list(Some(&browse_id), Some(&home_ref), None, None, now)
                .unwrap();
            assert_eq!(page.entries.len(), MAX_DIRECTORY_ENTRIES);
            assert!(!page.truncated);
            assert!(page.next_cursor.is_some());
        }
        let last = browser
            .list(Some(&browse_id), Some(&home_ref), None, None, now)
            .unwrap();
        assert_eq!(
            last.entries.len(),
            MAX_REFS_PER_BROWSE - 1 - listings * MAX_DIRECTORY_ENTRIES
        );
        assert!(last.truncated);
        assert_eq!(last.next_cursor, None);
        std::fs::remove_dir_all(home).unwrap();
    }

    #[test]
    fn cursors_are_reused_and_the_least_recently_used_is_evicted() {
        let mut browse = Browse {
            started: 1,
            expires_at: SystemTime::now() + BROWSE_TTL,
            refs: HashMap::new(),
            cursors: Vec::new(),
        };
        let first = browse.cursor("ref-0", 200);
        assert_eq!(browse.cursor("ref-0", 200), first);
        for i in 1..MAX_CURSORS_PER_BROWSE {
            browse.cursor(&format!("ref-{i}"), 200);
        }
        assert_eq!(browse.cursors.len(), MAX_CURSORS_PER_BROWSE);
        assert!(browse.cursors.iter().any(|(c, ..)| *c == first));
        browse.cursor("one-more", 200);
        assert_eq!(browse.cursors.len(), MAX_CURSORS_PER_BROWSE);
        assert!(!browse.cursors.iter().any(|(c, ..)| *c == first));
    }

    // Creating a link on Windows needs a privilege a test cannot count on.
    #[cfg(unix)]
    #[test]
    fn a_directory_swapped_for_a_link_is_unavailable() {
        let home = tree("swap", 1);
        let now = SystemTime::now();
        let mut browser = Browser::default();
        let (browse_id, home_ref) = start(&mut browser, &home, now);
        let page = browser
            .list(Some(&browse_id), Some(&home_ref), None, None, now)
            .unwrap();
        let child = &page.entries[0];
        let target = tree("target", 0);
        std::fs::remove_dir(&child.path).unwrap();
        std::os::unix::fs::symlink(&target, &child.path).unwrap();
        assert_eq!(
            browser
                .list(
                    Some(&browse_id),
                    Some(&child.directory_ref),
                    None,
                    None,
                    now
                )
                .unwrap_err(),
            BrowseFailure::Unavailable
        );
        assert_eq!(
            browser
                .take(&browse_id, &child.directory_ref, now)
                .unwrap_err(),
            BrowseFailure::Unavailable
        );
        std::fs::remove_dir_all(home).unwrap();
        std::fs::remove_dir_all(target).unwrap();
    }
}
