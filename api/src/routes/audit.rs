//! `GET /admin/audit-log`: the bounded audit tail, when the audit is enabled.

use axum::extract::{RawQuery, State};
use local_core::limits::{DEFAULT_AUDIT_LIMIT, MAX_AUDIT_EVENTS};

use crate::{
    AppState,
    contracts::{
        Reply, audit_tail, examples, invalid,
        responses::{AuditLog, ErrorDetail, ValidationErrors},
    },
    error::ApiError,
};

/// The `limit` query parameter: an integer 1–1000, 100 when absent.
fn limit(query: Option<&str>) -> Result<usize, ApiError> {
    let raw = query
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .filter(|(key, _)| *key == "limit")
        .map(|(_, value)| value)
        .next_back();
    let Some(raw) = raw else {
        return Ok(DEFAULT_AUDIT_LIMIT);
    };
    let loc = || vec!["query".into(), "limit".into()];
    let value: i64 = raw.parse().map_err(|_| invalid(loc(), "int_parsing"))?;
    if value < 1 {
        return Err(invalid(loc(), "greater_than_equal").into());
    }
    if value > MAX_AUDIT_EVENTS as i64 {
        return Err(invalid(loc(), "less_than_equal").into());
    }
    Ok(usize::try_from(value).unwrap_or(DEFAULT_AUDIT_LIMIT))
}

/// Returns how many events are held and the requested tail, oldest first.
#[utoipa::path(get, path = "/admin/audit-log", tag = "admin", security(("bearer" = [])),
    params(("limit" = Option<i64>, Query, minimum = 1, maximum = 1000, description = "How many of the newest events (default 100)")),
    responses(
        (status = 200, description = "Audit tail", body = AuditLog),
        (status = 404, description = "Audit is disabled", body = ErrorDetail),
        (status = 422, description = "Invalid limit", body = ValidationErrors,
            example = json!(examples::audit_status_422())),
    ))]
pub async fn audit_log(
    State(app): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Reply<AuditLog>, ApiError> {
    let limit = limit(query.as_deref())?;
    let (count, events) = app.local.audit().tail(limit)?;
    Ok(Reply(audit_tail(count, events)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_bounds() {
        assert_eq!(limit(None).unwrap(), 100);
        assert_eq!(limit(Some("limit=1")).unwrap(), 1);
        assert_eq!(limit(Some("limit=1000")).unwrap(), 1000);
        assert!(limit(Some("limit=0")).is_err());
        assert!(limit(Some("limit=1001")).is_err());
        assert!(limit(Some("limit=-1")).is_err());
        assert!(limit(Some("limit=abc")).is_err());
        assert_eq!(limit(Some("other=5")).unwrap(), 100);
    }
}
