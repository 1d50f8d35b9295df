//! One-hour local sessions: the key every guidance and assist request is checked against.

use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    Error, LocalState,
    clock::after,
    guide::guidance::camera::record::CameraRecord,
    guide::store::{Expiring, parse_id},
    limits::SESSION_LIFETIME,
};

/// A created session.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    owner: String,
    expires_at: OffsetDateTime,
    /// The camera branch's record of this session, purged with it.
    camera: CameraRecord,
}

impl Expiring for Session {
    fn owner(&self) -> &str {
        &self.owner
    }
    fn expires_at(&self) -> OffsetDateTime {
        self.expires_at
    }
}

/// What the caller learns about a new session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    /// The id requests name it by.
    pub session_id: Uuid,
    /// When it expires.
    pub expires_at: OffsetDateTime,
}

impl LocalState {
    /// Creates a session for `owner`, purging expired ones first.
    pub fn create_session(&self, owner: &str) -> Result<NewSession, Error> {
        let now = self.now();
        let mut sessions = self.sessions();
        sessions.make_room(now)?;
        let session_id = crate::secret::new_id();
        let expires_at = after(now, SESSION_LIFETIME);
        sessions.insert(
            session_id,
            Session {
                owner: owner.to_owned(),
                expires_at,
                camera: CameraRecord::default(),
            },
        );
        drop(sessions);
        self.audit
            .record(session_id.to_string(), "session_created", now);
        Ok(NewSession {
            session_id,
            expires_at,
        })
    }

    /// Checks that `session_id` names a live session of `owner`.
    pub fn check_session(&self, owner: &str, session_id: &str) -> Result<(), Error> {
        let id = parse_id(session_id)?;
        self.sessions().owned(id, owner, self.now()).map(|_| ())
    }

    /// Runs `work` on the camera record of `owner`'s live session `session_id`, under the
    /// sessions' lock (the work is short and never awaits).
    pub(crate) fn with_camera_record<R>(
        &self,
        owner: &str,
        session_id: &str,
        work: impl FnOnce(&mut CameraRecord) -> R,
    ) -> Result<R, Error> {
        let id = parse_id(session_id)?;
        let now = self.now();
        let mut sessions = self.sessions();
        let session = sessions.owned_mut(id, owner, now)?;
        Ok(work(&mut session.camera))
    }
}
