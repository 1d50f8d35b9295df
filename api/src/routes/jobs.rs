//! `/v1/jobs/{jobId}`: read or cancel a simulated job.

use axum::extract::{Path, State};

use crate::{
    AppState,
    boundary::LOCAL_OWNER,
    contracts::{
        Reply, job,
        responses::{ErrorDetail, Job},
    },
    error::ApiError,
};

/// Reads a job's actual in-memory state.
#[utoipa::path(get, path = "/v1/jobs/{jobId}", tag = "actions", security(("bearer" = [])),
    params(("jobId" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The job", body = Job),
        (status = 404, description = "Unknown job", body = ErrorDetail),
        (status = 410, description = "Job record expired", body = ErrorDetail),
    ))]
pub async fn get_job(
    State(app): State<AppState>,
    Path(job_id): Path<String>,
) -> Result<Reply<Job>, ApiError> {
    Ok(Reply(job(app.local.job(LOCAL_OWNER, &job_id)?)))
}

/// Cancels a pending or running job; a finished job is returned unchanged.
#[utoipa::path(post, path = "/v1/jobs/{jobId}/cancel", tag = "actions", security(("bearer" = [])),
    params(("jobId" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The job after cancelling", body = Job,
            links(
                ("getJob" = (operation_id = "get_job",
                    parameters(("jobId" = "$response.body#/jobId")),
                    description = "Read the job's state again")),
            )),
        (status = 404, description = "Unknown job", body = ErrorDetail),
        (status = 410, description = "Job record expired", body = ErrorDetail),
    ))]
pub async fn cancel_job(
    State(app): State<AppState>,
    Path(job_id): Path<String>,
) -> Result<Reply<Job>, ApiError> {
    Ok(Reply(job(app.local.cancel_job(LOCAL_OWNER, &job_id)?)))
}
