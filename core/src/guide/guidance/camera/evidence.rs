//! The camera engine's predicates: which observed element, if exactly one, is a piece of
//! evidence. An exact automation id scores 100, an exact label 50 (only for an element without
//! an automation id: a wrong id is never rescued by its label); role and framework must match
//! and confidence be at least 0.8. Two elements at the best score are ambiguous.

use super::fixture::ElementSpec;
use crate::{guide::guidance::model::Element, limits::MIN_TARGET_CONFIDENCE};

/// Score of an element whose automation id is the spec's.
pub(super) const AUTOMATION_ID_SCORE: u32 = 100;
/// Score of an element without an automation id whose label is the spec's.
pub(super) const LABEL_SCORE: u32 = 50;

/// What an observation holds for one spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// No element qualifies.
    None,
    /// Exactly one element has the best score: its index.
    One(usize),
    /// Several elements share the best score.
    Ambiguous,
}

impl Found {
    pub(super) const fn index(self) -> Option<usize> {
        match self {
            Self::One(index) => Some(index),
            Self::None | Self::Ambiguous => None,
        }
    }
}

/// The element's score for `spec`, or `None` when it does not qualify at all.
pub(super) fn score(spec: &ElementSpec, element: &Element) -> Option<u32> {
    let qualifies = element.role == spec.role
        && element.framework_id.as_deref() == Some(spec.framework_id)
        && element.confidence >= MIN_TARGET_CONFIDENCE;
    if !qualifies {
        return None;
    }
    match element.automation_id.as_deref() {
        Some(id) if id == spec.automation_id => Some(AUTOMATION_ID_SCORE),
        Some(id) if !id.is_empty() => None,
        _ => (element.label == spec.label).then_some(LABEL_SCORE),
    }
}

/// The one element of `elements` that best fits `spec`.
pub(super) fn find(spec: &ElementSpec, elements: &[Element]) -> Found {
    let mut best: Option<(u32, usize, bool)> = None;
    for (index, element) in elements.iter().enumerate() {
        let Some(s) = score(spec, element) else {
            continue;
        };
        best = match best {
            Some((top, first, _)) if s == top => Some((top, first, true)),
            Some((top, ..)) if s < top => best,
            _ => Some((s, index, false)),
        };
    }
    match best {
        None => Found::None,
        Some((_, _, true)) => Found::Ambiguous,
        Some((_, index, false)) => Found::One(index),
    }
}
