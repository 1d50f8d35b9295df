//! The HTTP client of the local API: loopback `http` only, the launch's bearer token, no
//! redirects, proxies or cookies, a bounded response, and no automatic retry.
//!
//! The session is created lazily and reused until it is within [`SESSION_MARGIN`] of expiry;
//! any failed request drops it, so the next request starts a fresh one.

use std::time::{Duration, Instant};

use local_core::{env_names, loopback::loopback_ip, secret::Redacted};
use reqwest::{StatusCode, Url};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

use crate::wire::{GuidanceIn, GuidanceRequest, ObservationOut, Session, TaskProgressOut};

/// The launcher's default address, used when `MSGUIDE_API_URL` is unset.
pub const DEFAULT_API_URL: &str = "http://127.0.0.1:8765";
/// Per-request limit: above the API's own provider budget (52 s), below a minute.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(55);
/// Largest response body read.
pub const MAX_RESPONSE_BYTES: usize = 512 * 1024;
/// How long an idle connection is kept for the next request: well under the API's 10 s wait
/// for a request's headers, after which it closes the connection; a request sent on a
/// connection the API is closing fails after its body went, and is not retried.
pub const IDLE_CONNECTION: Duration = Duration::from_secs(4);
/// A session this close to expiry is replaced rather than used.
pub const SESSION_MARGIN: Duration = Duration::from_secs(5);

/// Why a request did not produce an answer. The `Display` text is the one sentence a person
/// reads (what is wrong, what to do); [`ApiError::detail`] holds the technical cause.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(
        "MSGUIDE_LOCAL_TOKEN is not set: start the client with `msguide start`, which passes it"
    )]
    NoToken,
    #[error(
        "MSGUIDE_API_URL ({0}) is not http:// on a loopback address with no path: set it like {DEFAULT_API_URL}, or unset it"
    )]
    BadUrl(String),
    /// The HTTP client itself could not be set up (TLS back end, resolver).
    #[error(
        "msguide-desktop could not set up its HTTP client: reinstall it, and report the problem with the output of --verbose if it stays"
    )]
    Setup(String),
    /// Nothing answered at `url`, or the connection broke.
    #[error(
        "The local MSGuide API is not answering at {url}: start it with `msguide start` (or point MSGUIDE_API_URL at the running one), then try again"
    )]
    Unreachable { url: String, detail: String },
    /// The API accepted the connection but did not answer within [`REQUEST_TIMEOUT`].
    #[error(
        "The local MSGuide API at {url} did not answer within {} s: check that msguide-api is running and not stuck, then try again",
        REQUEST_TIMEOUT.as_secs()
    )]
    TimedOut { url: String, detail: String },
    /// A non-2xx answer, with the API's `detail` as it came (the original's wording).
    #[error("Local service returned HTTP {status}: {detail}. No automatic retry: {}", remedy(*status, detail))]
    Http { status: u16, detail: String },
    #[error(
        "The local MSGuide API's answer is larger than {MAX_RESPONSE_BYTES} bytes: make sure msguide-api and msguide-desktop come from the same release"
    )]
    TooLarge,
    #[error(
        "The local MSGuide API's answer is not what this client understands: make sure msguide-api and msguide-desktop come from the same release"
    )]
    BadAnswer(String),
}

impl ApiError {
    /// The stable code of the failure.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Self::NoToken => "no_token",
            Self::BadUrl(_) => "bad_url",
            Self::Setup(_) => "client_setup",
            Self::Unreachable { .. } => "unreachable",
            Self::TimedOut { .. } => "timed_out",
            Self::Http { .. } => "http_status",
            Self::TooLarge => "answer_too_large",
            Self::BadAnswer(_) => "bad_answer",
        }
    }

    /// The technical cause, for `--verbose`: the HTTP library's or the parser's own words.
    #[must_use]
    pub fn detail(&self) -> Option<&str> {
        match self {
            Self::Setup(detail)
            | Self::Unreachable { detail, .. }
            | Self::TimedOut { detail, .. }
            | Self::BadAnswer(detail) => Some(detail),
            Self::NoToken | Self::BadUrl(_) | Self::Http { .. } | Self::TooLarge => None,
        }
    }

    /// A failed request to `url`: a timeout or no answer at all. The detail keeps reqwest's
    /// whole chain of causes (connection refused, reset), which its `Display` alone omits.
    fn transport(url: &Url, err: &reqwest::Error) -> Self {
        let mut detail = err.to_string();
        let mut source = std::error::Error::source(err);
        while let Some(cause) = source {
            detail.push_str(": ");
            detail.push_str(&cause.to_string());
            source = cause.source();
        }
        let mut shown = url.clone();
        shown.set_path("");
        let url = shown.as_str().trim_end_matches('/').to_owned();
        if err.is_timeout() {
            Self::TimedOut { url, detail }
        } else {
            Self::Unreachable { url, detail }
        }
    }
}

/// What to do after an HTTP error status with `detail`.
fn remedy(status: u16, detail: &str) -> &'static str {
    match status {
        422 if detail.contains(r#""loc":["body","task""#) => {
            "the task sent was refused, so start a new task (New task in the window, --new-task for guide) and send again"
        }
        401 | 403 => {
            "the token was refused, so restart with `msguide start`, which passes the current one"
        }
        404 | 410 => "the session or capture has expired, so capture again and send",
        413 | 422 => "capture again, without pixels if they were shared, and send",
        429 => "the service is busy, so wait a moment and send again",
        500..=599 => "check the service's diagnostic log (msguide start names it), then send again",
        _ => "capture again and send, or restart with `msguide start` if it keeps failing",
    }
}

/// The base URL the client talks to: `http`, a loopback IP or `localhost` (pinned to
/// 127.0.0.1), a port, and nothing else.
///
/// # Errors
/// [`ApiError::BadUrl`] for anything else.
pub fn base_url(raw: &str) -> Result<Url, ApiError> {
    let bad = || ApiError::BadUrl(raw.to_owned());
    let mut url = Url::parse(raw).map_err(|_| bad())?;
    let plain = url.scheme() == "http"
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none()
        && matches!(url.path(), "" | "/");
    if !plain {
        return Err(bad());
    }
    let host = url.host_str().ok_or_else(bad)?;
    let loopback = loopback_ip(host).ok_or_else(bad)?;
    url.set_ip_host(loopback).map_err(|()| bad())?;
    Ok(url)
}

/// A client of one API, holding at most one session.
pub struct ApiClient {
    http: reqwest::Client,
    base: Url,
    token: Redacted<String>,
    session: Option<(String, OffsetDateTime)>,
    /// The last [`ApiClient::guide`] call's observation left this process.
    uploaded: bool,
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

impl ApiClient {
    /// A client configured from `MSGUIDE_API_URL` and `MSGUIDE_LOCAL_TOKEN`.
    ///
    /// # Errors
    /// [`ApiError::NoToken`] or [`ApiError::BadUrl`].
    pub fn from_env() -> Result<Self, ApiError> {
        let url = std::env::var(env_names::API_URL).unwrap_or_else(|_| DEFAULT_API_URL.to_owned());
        let token = std::env::var(env_names::LOCAL_TOKEN)
            .ok()
            .filter(|t| !t.is_empty())
            .ok_or(ApiError::NoToken)?;
        Self::new(&url, token)
    }

    /// A client of the API at `url` using `token`.
    ///
    /// # Errors
    /// [`ApiError::BadUrl`], or [`ApiError::Setup`] if no HTTP client can be built.
    pub fn new(url: &str, token: String) -> Result<Self, ApiError> {
        let base = base_url(url)?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(REQUEST_TIMEOUT)
            .pool_idle_timeout(IDLE_CONNECTION)
            .build()
            .map_err(|e| ApiError::Setup(e.to_string()))?;
        Ok(Self {
            http,
            base,
            token: Redacted::new(token),
            session: None,
            uploaded: false,
        })
    }

    /// `GET /health`'s round trip time: the baseline the guidance round trip is compared with.
    ///
    /// # Errors
    /// [`ApiError`] when the service does not answer 200.
    pub async fn health(&self) -> Result<Duration, ApiError> {
        let started = Instant::now();
        let url = self.url("/health");
        let response = self
            .http
            .get(url.clone())
            .send()
            .await
            .map_err(|e| ApiError::transport(&url, &e))?;
        read_json(response).await?;
        Ok(started.elapsed())
    }

    /// One guidance round trip for `observation` (the user consented to this one), with the
    /// `task` it belongs to and, when `plan`, asking for a plan segment. Returns the answer both
    /// parsed and as received.
    ///
    /// # Errors
    /// [`ApiError`], shown as it is; the session is dropped so the next call starts afresh.
    pub async fn guide(
        &mut self,
        prompt: &str,
        observation: &ObservationOut,
        task: Option<&TaskProgressOut>,
        plan: bool,
    ) -> Result<(GuidanceIn, serde_json::Value), ApiError> {
        self.uploaded = false;
        let result = self.guide_once(prompt, observation, task, plan).await;
        if result.is_err() {
            self.session = None;
        }
        result
    }

    /// Whether the last [`ApiClient::guide`] call's observation reached the API: false when it
    /// failed before the upload (no session, nothing listening), so the person's consent to
    /// that upload was not used.
    #[must_use]
    pub const fn uploaded(&self) -> bool {
        self.uploaded
    }

    async fn guide_once(
        &mut self,
        prompt: &str,
        observation: &ObservationOut,
        task: Option<&TaskProgressOut>,
        plan: bool,
    ) -> Result<(GuidanceIn, serde_json::Value), ApiError> {
        let session_id = self.session().await?;
        let body = GuidanceRequest {
            session_id: &session_id,
            prompt,
            consent: true,
            observation,
            task,
            plan_segments: plan,
        };
        let url = self.url("/v1/guidance");
        self.uploaded = true;
        let response = self
            .http
            .post(url.clone())
            .bearer_auth(self.token.expose())
            .json(&body)
            .send()
            .await
            .map_err(|e| {
                // Refused before a byte of the body went.
                if e.is_connect() {
                    self.uploaded = false;
                }
                ApiError::transport(&url, &e)
            })?;
        let raw = read_json(response).await?;
        let parsed =
            serde_json::from_value(raw.clone()).map_err(|e| ApiError::BadAnswer(e.to_string()))?;
        Ok((parsed, raw))
    }

    /// Creates the session now if there is none, so a later round trip measures guidance only.
    ///
    /// # Errors
    /// [`ApiError`] from `POST /v1/sessions`.
    pub async fn ensure_session(&mut self) -> Result<(), ApiError> {
        let result = self.session().await.map(drop);
        if result.is_err() {
            self.session = None;
        }
        result
    }

    /// The current session id, creating a session when there is none or it is about to expire.
    async fn session(&mut self) -> Result<String, ApiError> {
        let margin = time::Duration::try_from(SESSION_MARGIN).unwrap_or(time::Duration::ZERO);
        if let Some((id, expires)) = &self.session
            && OffsetDateTime::now_utc() + margin < *expires
        {
            return Ok(id.clone());
        }
        let url = self.url("/v1/sessions");
        let response = self
            .http
            .post(url.clone())
            .bearer_auth(self.token.expose())
            .json(&serde_json::json!({}))
            .send()
            .await
            .map_err(|e| ApiError::transport(&url, &e))?;
        let session: Session = serde_json::from_value(read_json(response).await?)
            .map_err(|e| ApiError::BadAnswer(e.to_string()))?;
        let expires = OffsetDateTime::parse(&session.expires_at, &Rfc3339)
            .map_err(|e| ApiError::BadAnswer(e.to_string()))?;
        self.session = Some((session.session_id.clone(), expires));
        Ok(session.session_id)
    }

    fn url(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        url.set_path(path);
        url
    }
}

/// The body of a 2xx answer as JSON, at most [`MAX_RESPONSE_BYTES`]; any other status becomes
/// [`ApiError::Http`] with the API's `detail` as it came.
async fn read_json(mut response: reqwest::Response) -> Result<serde_json::Value, ApiError> {
    let status = response.status();
    let url = response.url().clone();
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ApiError::transport(&url, &e))?
    {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(ApiError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        return Err(ApiError::Http {
            status: status.as_u16(),
            detail: detail(status, &body),
        });
    }
    serde_json::from_slice(&body).map_err(|e| ApiError::BadAnswer(e.to_string()))
}

/// The API's `detail`: a string as it is, a validation list as compact JSON.
fn detail(status: StatusCode, body: &[u8]) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    match parsed.as_ref().and_then(|v| v.get("detail")) {
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => status.canonical_reason().unwrap_or("no detail").to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_loopback_http_is_accepted() {
        for good in [
            "http://127.0.0.1:8765",
            "http://127.0.0.1:8765/",
            "http://localhost:9000",
            "http://[::1]:8765",
        ] {
            assert!(base_url(good).is_ok(), "{good}");
        }
        assert_eq!(
            base_url("http://LocalHost:9000").unwrap().as_str(),
            "http://127.0.0.1:9000/"
        );
        for bad in [
            "https://127.0.0.1:8765",
            "http://10.0.0.1:8765",
            "http://example.com",
            "http://127.0.0.1:8765/api",
            "http://127.0.0.1:8765/?q=1",
            "http://127.0.0.1:8765/#f",
            "http://user:pw@127.0.0.1:8765",
            "127.0.0.1:8765",
        ] {
            assert!(base_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_detail_is_shown_as_the_api_wrote_it() {
        assert_eq!(
            detail(StatusCode::GONE, br#"{"detail":"Resource expired"}"#),
            "Resource expired"
        );
        assert_eq!(
            detail(
                StatusCode::UNPROCESSABLE_ENTITY,
                br#"{"detail":[{"type":"missing"}]}"#
            ),
            r#"[{"type":"missing"}]"#
        );
        assert_eq!(detail(StatusCode::BAD_GATEWAY, b"<html>"), "Bad Gateway");
        let refused_task = ApiError::Http {
            status: 422,
            detail: detail(
                StatusCode::UNPROCESSABLE_ENTITY,
                br#"{"detail":[{"type":"value_error","loc":["body","task"],"msg":"m"}]}"#,
            ),
        }
        .to_string();
        assert!(refused_task.ends_with("No automatic retry: the task sent was refused, so start a new task (New task in the window, --new-task for guide) and send again"), "{refused_task}");
        let shown = ApiError::Http {
            status: 401,
            detail: "Unauthorized".to_owned(),
        }
        .to_string();
        assert_eq!(
            shown,
            "Local service returned HTTP 401: Unauthorized. No automatic retry: the token was refused, so restart with `msguide start`, which passes the current one"
        );
    }

    #[tokio::test]
    async fn a_silent_api_is_a_timeout_not_a_refusal() {
        // Accepts the connection and never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = base_url(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        let err = http.get(url.clone()).send().await.unwrap_err();
        let err = ApiError::transport(&url, &err);
        assert!(matches!(err, ApiError::TimedOut { .. }), "{err:?}");
        let shown = err.to_string();
        assert!(shown.contains("did not answer within 55 s"), "{shown}");
        assert!(!shown.contains('{') && err.detail().is_some(), "{shown}");
        drop(listener);
    }
}
