//! The camera branch's volatile record of one session: the observations it was sent (capture
//! order, one content per id) and how far the scenario got. It lives in the session and goes
//! with it (expiry purge, shutdown); nothing of it is written anywhere.

use std::collections::VecDeque;

use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::{
    CameraRefusal, Profile, TeamsCameraSession,
    engine::{Facts, Step},
};
use crate::guide::guidance::model::{Element, Observation};

/// Observation ids a record remembers; older ones are forgotten first, so a session that sends
/// thousands of captures holds a bounded record (an id older than this may be reused).
pub(crate) const REMEMBERED_OBSERVATIONS: usize = 64;

/// One session's camera record.
#[derive(Debug, Clone, Default)]
pub(crate) struct CameraRecord {
    profile: Option<Profile>,
    last_captured_at: Option<OffsetDateTime>,
    seen: VecDeque<(String, [u8; 32])>,
    facts: Facts,
}

impl CameraRecord {
    /// Admits an observation: captured no earlier than the last one, and an id already sent
    /// only with the same content. A change of profile starts the scenario over.
    pub(crate) fn admit(
        &mut self,
        profile: Profile,
        observation: &Observation,
        teams_session: Option<TeamsCameraSession>,
    ) -> Result<(), CameraRefusal> {
        let digest = content_digest(observation, teams_session);
        let known = self.seen.iter().find(|(id, _)| *id == observation.id);
        if known.is_some_and(|(_, d)| *d != digest) {
            return Err(CameraRefusal::ObservationIdReused);
        }
        if self
            .last_captured_at
            .is_some_and(|last| observation.captured_at < last)
        {
            return Err(CameraRefusal::OutOfOrder);
        }
        if known.is_none() {
            if self.seen.len() == REMEMBERED_OBSERVATIONS {
                self.seen.pop_front();
            }
            self.seen.push_back((observation.id.clone(), digest));
        }
        self.last_captured_at = Some(observation.captured_at);
        if self.profile != Some(profile) {
            self.profile = Some(profile);
            self.facts = Facts::default();
        }
        Ok(())
    }

    /// What the scenario established so far.
    pub(crate) const fn facts(&self) -> Facts {
        self.facts
    }

    /// Keeps what an answered step established.
    pub(crate) const fn apply(&mut self, step: &Step) {
        self.facts = step.facts;
    }
}

/// A digest of everything the client sent as this observation (the sanitised image included),
/// so a reused id with other content is told apart from a resend.
fn content_digest(
    observation: &Observation,
    teams_session: Option<TeamsCameraSession>,
) -> [u8; 32] {
    let mut hash = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_be_bytes());
        hash.update(bytes);
    };
    field(observation.id.as_bytes());
    field(observation.window_id.as_bytes());
    field(observation.application.as_bytes());
    field(&observation.captured_at.unix_timestamp_nanos().to_be_bytes());
    field(&observation.width.to_be_bytes());
    field(&observation.height.to_be_bytes());
    field(observation.ocr_text.as_bytes());
    field(&[u8::from(observation.automation_complete)]);
    field(format!("{:?}", observation.resource_id).as_bytes());
    field(format!("{teams_session:?}").as_bytes());
    for element in &observation.elements {
        // A `tgt.` id the binding already checked is the server's own name for this very
        // element, so echoing it back is a resend, not other content.
        let own_id = element
            .target_id
            .as_ref()
            .filter(|id| !id.starts_with(super::TARGET_PREFIX));
        field(
            format!(
                "{:?}{own_id:?}",
                Element {
                    target_id: None,
                    ..element.clone()
                }
            )
            .as_bytes(),
        );
    }
    if let Some(image) = &observation.image {
        field(&image.bytes);
    }
    hash.finalize().into()
}
