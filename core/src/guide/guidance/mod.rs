//! Guidance: a consented, fresh observation in, one validated next step out.
//!
//! [`LocalState::guidance_upload`] is the one entry for what a client uploaded:
//! [`upload::admit`] first turns it into a [`GuidanceRequest`] (image sanitised under a bound on
//! concurrent image work, element ids unique); then [`LocalState::guidance`] runs the
//! reference's order: session, consent, freshness, provider
//! under a deadline, result and target validation, freshness again, session again; or, with
//! `cameraRecovery`, the camera engine (`guide::guidance::camera`) in the provider's place.

pub mod camera;
pub mod demo;
pub mod model;
pub mod openai;
pub mod plan;
pub mod provider;
pub mod upload;
pub mod validate;

use std::time::{Duration, Instant};

use time::OffsetDateTime;

use self::{
    model::{GuidanceResult, GuidanceStatus, Mode, Observation, TaskProgress},
    plan::{plan_matches_observation, segment_is_valid},
    provider::{ProviderError, ProviderRequest, sanitised_type_name},
    validate::{result_is_valid, target_matches_observation},
};
use crate::{
    Error, LocalState,
    guide::diagnostics::Field,
    guide::error::GuidanceFailure,
    guide::guidance::camera::{CameraRecovery, CameraReport},
    limits::{
        MAX_OBSERVATION_AGE, MAX_OBSERVATION_SKEW, MAX_PROVIDER_BUDGET, PROVIDER_BUDGET_RESERVE,
    },
};

/// A guidance request after contract validation and [`upload::admit`].
#[derive(Debug, Clone)]
pub struct GuidanceRequest {
    /// The session it runs in.
    pub session_id: String,
    /// What the user asked.
    pub prompt: String,
    /// Whether the user consented to capture.
    pub consent: bool,
    /// The admitted observation.
    pub observation: Observation,
    /// Size of the HTTP body, for diagnostics only.
    pub body_bytes: usize,
    /// The multi-step task this request belongs to, when the client sent one.
    pub task: Option<TaskProgress>,
    /// Whether the client asks for a plan segment instead of a single step.
    pub plan_segments: bool,
    /// The camera-recovery branch's request; with it the provider is never called.
    pub camera: Option<CameraRecovery>,
}

/// A validated answer, with the ids the client checks before drawing anything.
#[derive(Debug, Clone)]
pub struct GuidanceResponse {
    /// The validated next step.
    pub result: GuidanceResult,
    /// The id diagnostics and the audit record this request under.
    pub correlation_id: String,
    /// The observation's id, echoed.
    pub observation_id: String,
    /// The observed window's id, echoed.
    pub window_id: String,
    /// The task's id and step, echoed when the request carried a task.
    pub task: Option<(String, u32)>,
    /// The camera branch's `cameraRecovery` object, when the request took that branch.
    pub camera: Option<CameraReport>,
}

/// Refuses observations at least 60 s old or more than 5 s ahead of `now`.
pub fn check_freshness(captured_at: OffsetDateTime, now: OffsetDateTime) -> Result<(), Error> {
    let age = now - captured_at;
    if age >= MAX_OBSERVATION_AGE || -age > MAX_OBSERVATION_SKEW {
        return Err(Error::StaleObservation);
    }
    Ok(())
}

/// The provider's budget for an observation of this age: min(52, 60 − age − 8) seconds.
#[must_use]
pub fn provider_budget(captured_at: OffsetDateTime, now: OffsetDateTime) -> Option<Duration> {
    let age = Duration::try_from(now - captured_at).unwrap_or(Duration::ZERO);
    let left = MAX_OBSERVATION_AGE
        .checked_sub(age)?
        .checked_sub(PROVIDER_BUDGET_RESERVE)?;
    Some(left.min(MAX_PROVIDER_BUDGET)).filter(|b| !b.is_zero())
}

/// The stage of a guidance request at which it failed, as diagnostics name it.
#[derive(Debug, Clone, Copy)]
enum Stage {
    RequestValidated,
    CameraRecovery,
    ProviderInference,
    PlanValidation,
    TargetValidation,
    FreshnessValidation,
}

impl Stage {
    const fn as_str(self) -> &'static str {
        match self {
            Self::RequestValidated => "request_validated",
            Self::CameraRecovery => "camera_recovery",
            Self::ProviderInference => "provider_inference",
            Self::PlanValidation => "plan_validation",
            Self::TargetValidation => "target_validation",
            Self::FreshnessValidation => "freshness_validation",
        }
    }
}

/// Writes `guidance_cancelled` when the request future is dropped mid-inference, which is how a
/// client disconnect reaches us: the server drops the handler and with it the provider's work.
struct CancelWatch<'a> {
    state: &'a LocalState,
    correlation_id: &'a str,
    task_fields: &'a [(&'static str, Field)],
    started: Instant,
    armed: bool,
}

impl Drop for CancelWatch<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut fields = self.task_fields.to_vec();
            fields.push(("elapsedMs", Field::Count(elapsed_ms(self.started))));
            self.state
                .diagnose("guidance_cancelled", Some(self.correlation_id), &fields);
        }
    }
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Why an uploaded guidance request got no guidance: refused on admission (the upload itself),
/// or by the run (session, consent, freshness, provider).
#[derive(Debug)]
pub enum UploadError {
    /// The upload broke an observation, task or camera rule.
    Refused(upload::ObservationRefusal),
    /// The admitted request failed.
    Guidance(Error),
}

impl LocalState {
    /// Admits what a client uploaded, then runs it for `owner`: the one call a face makes.
    ///
    /// # Errors
    /// [`UploadError::Refused`] for an upload [`upload::admit`] refuses, then
    /// [`UploadError::Guidance`] for whatever [`Self::guidance`] answers.
    pub async fn guidance_upload(
        &self,
        owner: &str,
        upload: upload::GuidanceUpload,
    ) -> Result<GuidanceResponse, UploadError> {
        let request = upload::admit(upload).await.map_err(UploadError::Refused)?;
        self.guidance(owner, request)
            .await
            .map_err(UploadError::Guidance)
    }

    /// Runs one guidance request for `owner`.
    pub async fn guidance(
        &self,
        owner: &str,
        request: GuidanceRequest,
    ) -> Result<GuidanceResponse, Error> {
        self.check_session(owner, &request.session_id)?;
        if !request.consent {
            return Err(Error::ConsentRequired);
        }
        let observation = &request.observation;
        let received = self.now();
        check_freshness(observation.captured_at, received)?;

        let correlation_id = crate::secret::new_id();
        let cid = correlation_id
            .hyphenated()
            .encode_lower(&mut uuid::Uuid::encode_buffer())
            .to_owned();
        let started = Instant::now();
        let image = observation.image.as_ref();
        // A task's id (a UUID the contract checked) and step number lead every line of this
        // request; its history, remaining work and user input never reach the log.
        let task_fields: Vec<(&'static str, Field)> = request
            .task
            .as_ref()
            .map(|task| {
                vec![
                    ("taskId", Field::Id(task.task_id.clone())),
                    ("step", Field::Count(u64::from(task.step))),
                ]
            })
            .unwrap_or_default();
        let diagnose = |event: &'static str, fields: &[(&'static str, Field)]| {
            // Two events a request, each a copy of its fields: not made when nothing is logged.
            if !self.diagnosing() {
                return;
            }
            let mut all = task_fields.clone();
            all.extend_from_slice(fields);
            self.diagnose(event, Some(&cid), &all);
        };
        diagnose(
            "guidance_started",
            &[
                ("provider", Field::Word(self.provider.name())),
                ("bodyBytes", Field::Count(request.body_bytes as u64)),
                ("imageShared", Field::Flag(image.is_some())),
                (
                    "elementCount",
                    Field::Count(observation.elements.len() as u64),
                ),
                (
                    "imageWidth",
                    image.map_or(Field::Null, |i| Field::Count(u64::from(i.width))),
                ),
                (
                    "imageHeight",
                    image.map_or(Field::Null, |i| Field::Count(u64::from(i.height))),
                ),
            ],
        );
        let fail = |stage: Stage, error: Error, error_type: Option<&str>| {
            let code = match error.guidance_failure() {
                Some((_, GuidanceFailure::Timeout)) => "timeout".to_owned(),
                Some((_, failure)) => failure.error_code().unwrap_or_default(),
                None if matches!(error, Error::CameraRecovery(_)) => "camera-recovery".to_owned(),
                None => "http-error".to_owned(),
            };
            let mut fields = vec![
                ("stage", Field::Word(stage.as_str())),
                ("errorCode", Field::Id(code)),
            ];
            if error.kind() == crate::guide::error::ErrorKind::Unprocessable {
                fields.push(("status", Field::Count(422)));
            }
            if let Some(error_type) = error_type {
                fields.push(("errorType", Field::Id(error_type.to_owned())));
            }
            fields.push(("elapsedMs", Field::Count(elapsed_ms(started))));
            diagnose("guidance_failed", &fields);
            error
        };

        // The camera branch (step 5): the deterministic engine answers, the provider never runs.
        if let Some(camera) = &request.camera {
            let answer = self
                .camera_recovery(
                    owner,
                    &request.session_id,
                    observation,
                    camera,
                    correlation_id,
                )
                .map_err(|error| fail(Stage::CameraRecovery, error, None))?;
            let result = answer.result;
            diagnose(
                "guidance_completed",
                &[
                    ("status", Field::Word(result.status.as_str())),
                    ("targetSelected", Field::Flag(result.target.is_some())),
                    ("planId", Field::Null),
                    ("planSteps", Field::Null),
                    ("boundary", Field::Null),
                    ("elapsedMs", Field::Count(elapsed_ms(started))),
                ],
            );
            if self.audit.enabled() {
                let outcome = format!("guidance_{}", result.status.as_str());
                self.audit.record(cid.clone(), outcome, self.now());
            }
            return Ok(GuidanceResponse {
                result,
                correlation_id: cid,
                observation_id: request.observation.id,
                window_id: request.observation.window_id,
                task: None,
                camera: Some(answer.report),
            });
        }

        let Some(budget) = provider_budget(observation.captured_at, received) else {
            return Err(fail(
                Stage::RequestValidated,
                Error::Guidance {
                    correlation_id,
                    failure: GuidanceFailure::Timeout,
                },
                None,
            ));
        };
        let provider_request = ProviderRequest {
            prompt: &request.prompt,
            observation,
            budget,
            task: request.task.as_ref(),
            plan: request.plan_segments,
        };
        let mut watch = CancelWatch {
            state: self,
            correlation_id: &cid,
            task_fields: &task_fields,
            started,
            armed: true,
        };
        let outcome = tokio::time::timeout(budget, self.provider.guide(provider_request)).await;
        watch.armed = false;
        drop(watch);
        let mut result = match outcome {
            Err(tokio::time::error::Elapsed { .. }) | Ok(Err(ProviderError::Timeout)) => {
                return Err(fail(
                    Stage::ProviderInference,
                    Error::Guidance {
                        correlation_id,
                        failure: GuidanceFailure::Timeout,
                    },
                    None,
                ));
            }
            Ok(Err(ProviderError::Failed(failure))) => {
                return Err(fail(
                    Stage::ProviderInference,
                    Error::Guidance {
                        correlation_id,
                        failure: GuidanceFailure::Provider(failure),
                    },
                    None,
                ));
            }
            Ok(Err(ProviderError::InvalidResult)) => {
                return Err(fail(
                    Stage::ProviderInference,
                    Error::Guidance {
                        correlation_id,
                        failure: GuidanceFailure::InvalidResult,
                    },
                    None,
                ));
            }
            Ok(Err(ProviderError::Unexpected { error_type })) => {
                let error_type = sanitised_type_name(&error_type);
                // The reference's one stderr line: the type only, never the message.
                #[allow(
                    clippy::print_stderr,
                    reason = "api-reference-behaviour.md's stderr line"
                )]
                {
                    eprintln!("MSGuide guidance failure: {error_type}");
                }
                let error = Error::Guidance {
                    correlation_id,
                    failure: GuidanceFailure::Unexpected {
                        error_type: error_type.clone(),
                    },
                };
                return Err(fail(Stage::ProviderInference, error, Some(&error_type)));
            }
            Ok(Ok(result)) => result,
        };

        if result.mode == Mode::Model && result.status == GuidanceStatus::Completed {
            result.status = GuidanceStatus::CompletionCandidate;
        }
        let invalid = |stage| {
            fail(
                stage,
                Error::Guidance {
                    correlation_id,
                    failure: GuidanceFailure::InvalidResult,
                },
                None,
            )
        };
        if !result_is_valid(&result) {
            // Name the plan as the cause when its own segment rules are what failed.
            let plan_broken = result.plan.as_ref().is_some_and(|p| !segment_is_valid(p));
            return Err(invalid(if plan_broken {
                Stage::PlanValidation
            } else {
                Stage::TargetValidation
            }));
        }
        let plan_ok = match &result.plan {
            None => !request.plan_segments,
            Some(plan) => plan_matches_observation(plan, observation),
        };
        if !plan_ok {
            return Err(invalid(Stage::PlanValidation));
        }
        let target_ok = result
            .target
            .as_ref()
            .is_none_or(|t| target_matches_observation(t, observation));
        if !target_ok {
            return Err(invalid(Stage::TargetValidation));
        }
        let answered = self.now();
        if let Err(error) = check_freshness(observation.captured_at, answered) {
            return Err(fail(Stage::FreshnessValidation, error, None));
        }
        self.check_session(owner, &request.session_id)?;

        let plan = result.plan.as_ref();
        diagnose(
            "guidance_completed",
            &[
                ("status", Field::Word(result.status.as_str())),
                ("targetSelected", Field::Flag(result.target.is_some())),
                (
                    "planId",
                    plan.map_or(Field::Null, |p| Field::Id(p.plan_id.clone())),
                ),
                (
                    "planSteps",
                    plan.map_or(Field::Null, |p| Field::Count(p.steps.len() as u64)),
                ),
                (
                    "boundary",
                    plan.map_or(Field::Null, |p| Field::Word(p.boundary.kind.as_str())),
                ),
                ("elapsedMs", Field::Count(elapsed_ms(started))),
            ],
        );
        if self.audit.enabled() {
            let outcome = format!("guidance_{}", result.status.as_str());
            self.audit.record(cid.clone(), outcome, answered);
        }
        Ok(GuidanceResponse {
            result,
            correlation_id: cid,
            observation_id: request.observation.id,
            window_id: request.observation.window_id,
            task: request.task.map(|task| (task.task_id, task.step)),
            camera: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_window_edges() {
        let now = OffsetDateTime::now_utc();
        let s = time::Duration::seconds;
        assert!(check_freshness(now - s(59), now).is_ok());
        assert_eq!(
            check_freshness(now - s(60), now),
            Err(Error::StaleObservation)
        );
        assert!(check_freshness(now + s(5), now).is_ok());
        assert_eq!(
            check_freshness(now + s(5) + time::Duration::milliseconds(1), now),
            Err(Error::StaleObservation)
        );
    }

    #[test]
    fn budget_shrinks_with_age() {
        let now = OffsetDateTime::now_utc();
        let s = time::Duration::seconds;
        assert_eq!(provider_budget(now, now), Some(Duration::from_secs(52)));
        assert_eq!(
            provider_budget(now + s(3), now),
            Some(Duration::from_secs(52))
        );
        assert_eq!(
            provider_budget(now - s(20), now),
            Some(Duration::from_secs(32))
        );
        assert_eq!(provider_budget(now - s(52), now), None);
        assert_eq!(provider_budget(now - s(53), now), None);
    }
}
