//! Conversions between the wire contracts and the core's own types.

use local_core::guide::{
    actions::{JOB_MESSAGE, JobView},
    guidance::{
        GuidanceRequest as CoreGuidanceRequest, GuidanceResponse,
        model::{self, Element, ScrollDirection, ToggleState, UiAction},
    },
    png_sanitise::sanitise_base64_png,
};
use serde_json::Value;

use super::{
    invalid,
    requests::{
        GuidanceRequest, Observation, ScrollDirectionIn, ToggleStateIn, UiActionIn, UiElement,
    },
    responses::{self, ValidationItem},
};

impl From<UiActionIn> for UiAction {
    fn from(action: UiActionIn) -> Self {
        match action {
            UiActionIn::Invoke => Self::Invoke,
            UiActionIn::Toggle => Self::Toggle,
            UiActionIn::Select => Self::Select,
            UiActionIn::Expand => Self::Expand,
            UiActionIn::Collapse => Self::Collapse,
            UiActionIn::SetValue => Self::SetValue,
            UiActionIn::Scroll => Self::Scroll,
        }
    }
}

impl From<ToggleStateIn> for ToggleState {
    fn from(state: ToggleStateIn) -> Self {
        match state {
            ToggleStateIn::Off => Self::Off,
            ToggleStateIn::On => Self::On,
            ToggleStateIn::Indeterminate => Self::Indeterminate,
        }
    }
}

impl From<ScrollDirectionIn> for ScrollDirection {
    fn from(direction: ScrollDirectionIn) -> Self {
        match direction {
            ScrollDirectionIn::Up => Self::Up,
            ScrollDirectionIn::Down => Self::Down,
            ScrollDirectionIn::Left => Self::Left,
            ScrollDirectionIn::Right => Self::Right,
        }
    }
}

impl From<UiElement> for Element {
    fn from(e: UiElement) -> Self {
        Self {
            role: e.role.0,
            label: e.label.0,
            bounds: e.bounds.0,
            confidence: e.confidence.0,
            process_id: e.process_id.map(|p| p.0),
            target_id: e.target_id.map(|v| v.0),
            control_id: e.control_id.map(|v| v.0),
            automation_id: e.automation_id.map(|v| v.0),
            framework_id: e.framework_id.map(|v| v.0),
            is_enabled: e.is_enabled,
            is_offscreen: e.is_offscreen,
            targetable: e.targetable,
            is_password: e.is_password,
            is_read_only: e.is_read_only,
            is_selected: e.is_selected,
            toggle_state: e.toggle_state.map(Into::into),
            action: e.action.map(Into::into),
            value_hash: e.value_hash.map(|v| v.0),
            value_length: e.value_length.map(|v| v.0),
            scroll_directions: e.scroll_directions.0.into_iter().map(Into::into).collect(),
        }
    }
}

/// Converts elements, refusing duplicate non-null `targetId`s or `controlId`s.
pub fn observation_elements(
    elements: Vec<UiElement>,
    loc: &[&str],
) -> Result<Vec<Element>, ValidationItem> {
    let elements: Vec<Element> = elements.into_iter().map(Into::into).collect();
    let unique = |ids: Vec<&String>| {
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        sorted.len() == ids.len()
    };
    let target_ids = elements
        .iter()
        .filter_map(|e| e.target_id.as_ref())
        .collect();
    let control_ids = elements
        .iter()
        .filter_map(|e| e.control_id.as_ref())
        .collect();
    if !unique(target_ids) || !unique(control_ids) {
        return Err(invalid(
            loc.iter().map(|s| Value::from(*s)).collect(),
            "value_error",
        ));
    }
    Ok(elements)
}

fn observation(o: Observation) -> Result<model::Observation, ValidationItem> {
    let (width, height) = (o.width.0, o.height.0);
    let image = match o.image_base64 {
        None => None,
        Some(image) => Some(sanitise_base64_png(&image.0, width, height).map_err(|_| {
            invalid(
                vec!["body".into(), "observation".into(), "imageBase64".into()],
                "value_error",
            )
        })?),
    };
    Ok(model::Observation {
        id: o.id.0,
        window_id: o.window_id.0,
        application: o.application.0,
        captured_at: o.captured_at.0,
        width,
        height,
        ocr_text: o.ocr_text.0,
        elements: observation_elements(o.elements.0, &["body", "observation"])?,
        image,
        automation_complete: o.automation_complete,
        resource_id: o.resource_id.map(|r| r.0),
    })
}

/// Image sanitisings that may run at once.
static SANITISERS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// Turns a parsed guidance body into the core request, sanitising the image off the async
/// threads: decoding and re-encoding a 1600×1600 PNG takes tens of milliseconds.
pub async fn guidance_request(
    request: GuidanceRequest,
    body_bytes: usize,
) -> Result<CoreGuidanceRequest, ValidationItem> {
    let GuidanceRequest {
        session_id,
        prompt,
        consent,
        observation: raw,
    } = request;
    let observation = if raw.image_base64.is_some() {
        // Each sanitising holds ~30 MB (decoded pixels and two encodings) and is CPU-bound, so
        // more at once than there are cores only costs memory.
        let _permit = SANITISERS
            .acquire()
            .await
            .map_err(|_| invalid(vec!["body".into()], "value_error"))?;
        tokio::task::spawn_blocking(move || observation(raw))
            .await
            .map_err(|_| invalid(vec!["body".into(), "observation".into()], "value_error"))??
    } else {
        observation(raw)?
    };
    Ok(CoreGuidanceRequest {
        session_id: session_id.0,
        prompt: prompt.0,
        consent,
        observation,
        body_bytes,
    })
}

impl From<GuidanceResponse> for responses::Guidance {
    fn from(response: GuidanceResponse) -> Self {
        let result = response.result;
        Self {
            instruction: result.instruction,
            status: result.status.as_str(),
            target: result.target.map(|t| {
                let model = result.mode == model::Mode::Model;
                responses::Target {
                    label: t.label,
                    bounds: t.bounds.to_array(),
                    confidence: t.confidence,
                    process_id: t.process_id,
                    target_id: t.target_id,
                    automation_id: t.automation_id,
                    framework_id: t.framework_id,
                    is_enabled: t.is_enabled,
                    is_offscreen: t.is_offscreen,
                    toggle_state: t.toggle_state.map(ToggleState::as_str),
                    action: t.action.map(UiAction::as_str),
                    control_id: t.control_id,
                    value: model.then_some(t.value),
                    scroll_direction: model
                        .then(|| t.scroll_direction.map(ScrollDirection::as_str)),
                    value_hash: model.then_some(t.value_hash),
                    is_selected: if model { t.is_selected } else { None },
                }
            }),
            citations: result
                .citations
                .into_iter()
                .map(|c| responses::Citation {
                    source: c.source,
                    title: c.title,
                })
                .collect(),
            mode: result.mode.as_str(),
            correlation_id: response.correlation_id,
            observation_id: response.observation_id,
            window_id: response.window_id,
            remaining_work: result.remaining_work,
        }
    }
}

/// The wire form of a job.
#[must_use]
pub fn job(view: JobView) -> responses::Job {
    responses::Job {
        job_id: view.job_id.to_string(),
        status: view.status.as_str(),
        progress: view.progress(),
        result: view.succeeded_tool.map(|tool| responses::JobResult {
            mock: true,
            tool,
            external_effects: false,
            message: JOB_MESSAGE,
        }),
        error: None,
        mock: true,
    }
}
