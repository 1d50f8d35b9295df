//! An uploaded guidance request admitted into the core model: the observation's image
//! sanitised off the async threads under a bound on concurrent image work, and its elements'
//! ids checked for uniqueness. A face converts its contract into a [`GuidanceUpload`] and an
//! [`ObservationRefusal`] into its own error, nothing more.

use tokio::sync::Semaphore;

use super::camera::{CameraRecovery, check_request};
use super::{
    GuidanceRequest,
    model::{Observation, TaskProgress},
    plan::{TaskRefusal, check_task},
    validate::element_ids_are_unique,
};
use crate::guide::{
    error::CameraRefusal,
    png_sanitise::{PngError, sanitise_base64_png},
};

/// Image sanitisings that may run at once. Each is CPU-bound and holds a few MB, so more at
/// once than the API's two image places (one per core) only costs memory.
const MAX_CONCURRENT_SANITISERS: usize = 2;

/// The bound on concurrent image work, shared by every request in the process.
static SANITISERS: Semaphore = Semaphore::const_new(MAX_CONCURRENT_SANITISERS);

/// A guidance request as a client sent it, after its contract's own checks.
#[derive(Debug, Clone)]
pub struct GuidanceUpload {
    /// The session it runs in.
    pub session_id: String,
    /// What the user asked.
    pub prompt: String,
    /// Whether the user consented to capture.
    pub consent: bool,
    /// The observation, its image still as uploaded.
    pub observation: ObservationUpload,
    /// Size of the HTTP body, for diagnostics only.
    pub body_bytes: usize,
    /// The multi-step task this request belongs to, when the client sent one.
    pub task: Option<TaskProgress>,
    /// Whether the client asks for a plan segment instead of a single step.
    pub plan_segments: bool,
    /// The camera-recovery branch's request, when the client chose that branch.
    pub camera: Option<CameraRecovery>,
}

/// An observation as a client sent it: the image still the uploaded base64.
#[derive(Debug, Clone)]
pub struct ObservationUpload {
    /// Everything but the image, whose place stays empty until [`admit_observation`].
    pub observation: Observation,
    /// The window's pixels as canonical base64 of a PNG, when pixel sharing was approved.
    pub image_base64: Option<String>,
}

/// Why an uploaded observation was refused before guidance ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ObservationRefusal {
    /// The image broke a sanitising rule (or is not the observation's size).
    #[error("the observation's image was refused: {0}")]
    Image(PngError),
    /// Two elements share a non-null `targetId`, or two a non-null `controlId`.
    #[error("two observation elements share an id")]
    DuplicateElementIds,
    /// The bound on concurrent image work was closed, so the image could not be sanitised.
    #[error("the image could not be queued for sanitising")]
    ImageWorkClosed,
    /// The thread sanitising the image failed.
    #[error("the image sanitising did not finish")]
    ImageWorkFailed,
    /// The task context broke one of its cross-field rules.
    #[error("the task context was refused: {0}")]
    Task(TaskRefusal),
    /// `cameraRecovery` broke one of its cross-field rules.
    #[error("{0}")]
    Camera(CameraRefusal),
}

/// Admits `upload`: checks the camera branch's cross-field rules and its task context, sanitises its image (on the runtime's blocking pool, at
/// most `MAX_CONCURRENT_SANITISERS` at once: a 1600×1600 PNG takes about ten milliseconds) and
/// checks its element ids, in that order.
///
/// # Errors
/// The first [`ObservationRefusal`] the observation earns.
pub async fn admit(upload: GuidanceUpload) -> Result<GuidanceRequest, ObservationRefusal> {
    let GuidanceUpload {
        session_id,
        prompt,
        consent,
        observation: raw,
        body_bytes,
        task,
        plan_segments,
        camera,
    } = upload;
    if let Some(camera) = &camera {
        check_request(
            camera,
            &session_id,
            &raw.observation,
            task.is_some(),
            plan_segments,
        )
        .map_err(ObservationRefusal::Camera)?;
    }
    if let Some(task) = &task {
        check_task(task).map_err(ObservationRefusal::Task)?;
    }
    let observation = if raw.image_base64.is_some() {
        let permit = SANITISERS
            .acquire()
            .await
            .map_err(|_| ObservationRefusal::ImageWorkClosed)?;
        // The place is given back when the work ends, not when a request that stopped
        // waiting goes away, so abandoned uploads cannot pile work up on the blocking pool.
        // A panic in the decoder ends the task, which the request reads as failed work.
        tokio::task::spawn_blocking(move || {
            let admitted = admit_observation(raw);
            drop(permit);
            admitted
        })
        .await
        .map_err(|_| ObservationRefusal::ImageWorkFailed)??
    } else {
        admit_observation(raw)?
    };
    Ok(GuidanceRequest {
        session_id,
        prompt,
        consent,
        observation,
        body_bytes,
        task,
        plan_segments,
        camera,
    })
}

/// Admits one observation where it runs (blocking when it carries an image): the image is
/// sanitised to the observation's size, then the element ids checked.
///
/// # Errors
/// [`ObservationRefusal::Image`] first, then [`ObservationRefusal::DuplicateElementIds`].
pub fn admit_observation(upload: ObservationUpload) -> Result<Observation, ObservationRefusal> {
    let ObservationUpload {
        mut observation,
        image_base64,
    } = upload;
    observation.image = image_base64
        .map(|image| sanitise_base64_png(&image, observation.width, observation.height))
        .transpose()
        .map_err(ObservationRefusal::Image)?;
    if !element_ids_are_unique(&observation.elements) {
        return Err(ObservationRefusal::DuplicateElementIds);
    }
    Ok(observation)
}

#[cfg(test)]
mod tests {
    use base64::{Engine as _, engine::general_purpose::STANDARD};
    use image::ImageEncoder as _;

    use super::*;
    use crate::guide::guidance::model::Element;

    fn upload(elements: Vec<Element>, image_base64: Option<String>) -> ObservationUpload {
        ObservationUpload {
            observation: Observation {
                id: "obs-1".to_owned(),
                window_id: "window-1".to_owned(),
                application: "Settings".to_owned(),
                captured_at: time::OffsetDateTime::now_utc(),
                width: 2,
                height: 2,
                ocr_text: String::new(),
                elements,
                image: None,
                automation_complete: true,
                resource_id: None,
            },
            image_base64,
        }
    }

    fn element(target_id: Option<&str>, control_id: Option<&str>) -> Element {
        Element {
            label: "OK".to_owned(),
            target_id: target_id.map(str::to_owned),
            control_id: control_id.map(str::to_owned),
            ..Element::default()
        }
    }

    fn png_2x2() -> String {
        let mut bytes = Vec::new();
        image::codecs::png::PngEncoder::new(&mut bytes)
            .write_image(&[9; 16], 2, 2, image::ExtendedColorType::Rgba8)
            .unwrap();
        STANDARD.encode(bytes)
    }

    #[test]
    fn duplicate_non_null_ids_are_refused_and_absent_ids_never_collide() {
        let fine = vec![
            element(Some("a"), Some("1")),
            element(Some("b"), Some("2")),
            element(None, None),
            element(None, None),
        ];
        assert!(admit_observation(upload(fine, None)).is_ok());
        for twins in [
            vec![element(Some("a"), None), element(Some("a"), None)],
            vec![element(None, Some("1")), element(Some("b"), Some("1"))],
        ] {
            assert_eq!(
                admit_observation(upload(twins, None)).unwrap_err(),
                ObservationRefusal::DuplicateElementIds
            );
        }
        // A targetId equal to another element's controlId is no collision.
        let crossed = vec![element(Some("x"), None), element(None, Some("x"))];
        assert!(admit_observation(upload(crossed, None)).is_ok());
    }

    #[test]
    fn the_image_is_sanitised_to_the_observation_size_before_ids_are_checked() {
        let admitted = admit_observation(upload(vec![], Some(png_2x2()))).unwrap();
        assert_eq!(admitted.image.map(|i| (i.width, i.height)), Some((2, 2)));
        let twins = vec![element(Some("a"), None), element(Some("a"), None)];
        let mut wrong_size = upload(twins, Some(png_2x2()));
        wrong_size.observation.width = 3;
        assert_eq!(
            admit_observation(wrong_size).unwrap_err(),
            ObservationRefusal::Image(PngError::DimensionMismatch)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_uploads_at_once_each_get_their_own_answer_from_the_sanitiser_threads() {
        let mut requests = tokio::task::JoinSet::new();
        for i in 0..12_u32 {
            let mut observation = upload(vec![], Some(png_2x2()));
            // Every third declares another size than its image.
            if i % 3 == 0 {
                observation.observation.width = 3;
            }
            requests.spawn(async move {
                let answer = admit(GuidanceUpload {
                    session_id: format!("s-{i}"),
                    prompt: String::new(),
                    consent: true,
                    observation,
                    body_bytes: 0,
                    task: None,
                    plan_segments: false,
                    camera: None,
                })
                .await;
                (i, answer.map(|request| request.session_id))
            });
        }
        let mut answered = 0;
        while let Some(done) = requests.join_next().await {
            let (i, answer) = done.unwrap();
            if i % 3 == 0 {
                assert_eq!(
                    answer,
                    Err(ObservationRefusal::Image(PngError::DimensionMismatch))
                );
            } else {
                assert_eq!(answer, Ok(format!("s-{i}")));
            }
            answered += 1;
        }
        assert_eq!(answered, 12);
    }

    #[tokio::test]
    async fn admission_carries_the_request_fields_through() {
        let request = admit(GuidanceUpload {
            session_id: "s".to_owned(),
            prompt: "p".to_owned(),
            consent: true,
            observation: upload(vec![element(Some("a"), None)], Some(png_2x2())),
            body_bytes: 42,
            task: None,
            plan_segments: true,
            camera: None,
        })
        .await
        .unwrap();
        assert_eq!(
            (request.session_id.as_str(), request.prompt.as_str()),
            ("s", "p")
        );
        assert!(request.consent);
        assert_eq!(request.body_bytes, 42);
        assert!(request.plan_segments);
        assert!(request.observation.image.is_some());
        assert_eq!(request.observation.elements.len(), 1);
    }
}
