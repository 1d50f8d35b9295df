//! Target ids the camera engine mints for elements that came without one: `tgt.` and the
//! base64url HMAC-SHA256, under a key made at start-up, of the session, the observation's id,
//! the element's index and the element itself. Such an id names that element of that capture
//! in that session and nothing else; a moved element or another session gets another id.

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::{
    guide::guidance::model::{Element, Observation, Target},
    secret::ct_eq,
};

/// The prefix of every target id the engine mints; a client may not use it for ids of its own.
pub const TARGET_PREFIX: &str = "tgt.";

type HmacSha256 = Hmac<Sha256>;

/// The process's key and the session a request runs in.
pub(super) struct TargetKey<'a> {
    key: &'a [u8],
    session_id: &'a str,
}

impl<'a> TargetKey<'a> {
    pub(super) const fn new(key: &'a [u8], session_id: &'a str) -> Self {
        Self { key, session_id }
    }

    /// The `tgt.` id of the element at `index` of `observation` in this session.
    pub(super) fn derive(
        &self,
        observation: &Observation,
        index: usize,
        element: &Element,
    ) -> String {
        let mut mac =
            <HmacSha256 as KeyInit>::new_from_slice(self.key).unwrap_or_else(|_| unreachable!());
        let mut field = |bytes: &[u8]| {
            mac.update(&(bytes.len() as u64).to_be_bytes());
            mac.update(bytes);
        };
        field(b"msguide-camera-target-v1");
        field(self.session_id.as_bytes());
        field(observation.id.as_bytes());
        field(&(index as u64).to_be_bytes());
        field(&element_digest(element));
        let tag: [u8; 32] = mac.finalize().into_bytes().into();
        format!("{TARGET_PREFIX}{}", URL_SAFE_NO_PAD.encode(tag))
    }

    /// Whether the element's own target id is fine: any id of the client's, or a `tgt.` id
    /// only when it is the one this key derives for it here.
    pub(super) fn element_id_holds(
        &self,
        observation: &Observation,
        index: usize,
        element: &Element,
    ) -> bool {
        match element.target_id.as_deref() {
            Some(id) if id.starts_with(TARGET_PREFIX) => ct_eq(
                id.as_bytes(),
                self.derive(observation, index, element).as_bytes(),
            ),
            _ => true,
        }
    }

    /// The route's check of an answer's target: it is the element at `index`, named by that
    /// element's own id or by the id this key derives for it.
    pub(super) fn target_holds(
        &self,
        observation: &Observation,
        index: usize,
        target: &Target,
    ) -> bool {
        let Some(element) = observation.elements.get(index) else {
            return false;
        };
        let Some(id) = target.target_id.as_deref() else {
            return false;
        };
        let named = match element.target_id.as_deref() {
            Some(own) => own == id && self.element_id_holds(observation, index, element),
            None => ct_eq(
                id.as_bytes(),
                self.derive(observation, index, element).as_bytes(),
            ),
        };
        named && target.label == element.label && target.bounds == element.bounds
    }
}

/// A digest of what the element is, apart from the target id it may carry.
fn element_digest(element: &Element) -> [u8; 32] {
    let element = Element {
        target_id: None,
        ..element.clone()
    };
    Sha256::digest(format!("{element:?}").as_bytes()).into()
}
