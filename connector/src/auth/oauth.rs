//! The OAuth server's token and revocation endpoints, as the reference calls them: form posts
//! for the code exchange and the refresh (a public client: no secret), a JSON post per token
//! for revocation. Redirects are not followed and answers are size-capped; errors name the
//! endpoint and the status, never a token or the body.

use std::time::Duration;

use serde::Deserialize;

use super::{Endpoints, Secret, Tokens};

/// How long one request to the OAuth server may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest token response read.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Why an OAuth request failed.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// No connection, a timeout, or an unreadable answer.
    #[error("the OAuth server at {url} could not be reached: {reason}")]
    Transport {
        /// The endpoint.
        url: String,
        /// What went wrong (from the HTTP client, without the request).
        reason: String,
    },
    /// A status other than 2xx, with the OAuth `error` code when the body has one.
    #[error("the OAuth server at {url} answered HTTP {status}{}", .error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default())]
    Status {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// RFC 6749 `error`, when present and printable.
        error: Option<String>,
    },
    /// A 2xx answer without a usable access token.
    #[error("the OAuth server at {url} answered without an access token")]
    NoAccessToken {
        /// The endpoint.
        url: String,
    },
    /// There is no refresh token to spend.
    #[error("no refresh token is stored; run `autogpt-shim auth` to log in again")]
    NoRefreshToken,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: Option<String>,
    refresh_token: Option<String>,
}

#[derive(Deserialize)]
struct ErrorResponse {
    error: Option<String>,
}

/// A client of one OAuth server.
#[derive(Debug, Clone)]
pub struct OAuthClient {
    http: reqwest::Client,
    endpoints: Endpoints,
}

impl OAuthClient {
    /// A client for `endpoints`.
    ///
    /// # Errors
    /// The HTTP client could not be built (TLS set-up).
    pub fn new(endpoints: Endpoints) -> Result<Self, OAuthError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|err| OAuthError::Transport {
                url: endpoints.token.clone(),
                reason: err.to_string(),
            })?;
        Ok(Self { http, endpoints })
    }

    /// The endpoints this client calls.
    pub const fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// Exchanges an authorization code for tokens (`grant_type=authorization_code`).
    ///
    /// # Errors
    /// See [`OAuthError`].
    pub async fn exchange(
        &self,
        code: &Secret,
        redirect_uri: &str,
        verifier: &Secret,
    ) -> Result<Tokens, OAuthError> {
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code.expose()),
            ("redirect_uri", redirect_uri),
            ("client_id", &self.endpoints.client_id),
            ("code_verifier", verifier.expose()),
        ];
        self.token_request(&form, None).await
    }

    /// Spends `refresh` for a new access token; the old refresh token is kept when the server
    /// issues none.
    ///
    /// # Errors
    /// See [`OAuthError`].
    pub async fn refresh(&self, refresh: &Secret) -> Result<Tokens, OAuthError> {
        let form = [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh.expose()),
            ("client_id", &self.endpoints.client_id),
        ];
        self.token_request(&form, Some(refresh)).await
    }

    /// Revokes one token (RFC 7009, with the reference's JSON body).
    ///
    /// # Errors
    /// See [`OAuthError`].
    pub async fn revoke(&self, token: &Secret, hint: &str) -> Result<(), OAuthError> {
        let url = &self.endpoints.revoke;
        let body = serde_json::json!({
            "token": token.expose(),
            "token_type_hint": hint,
            "client_id": self.endpoints.client_id,
            "client_secret": "",
        });
        let response = self
            .http
            .post(url)
            .json(&body)
            .send()
            .await
            .map_err(|err| transport(url, err))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = read_capped(url, response).await.unwrap_or_default();
        Err(status_error(url, status.as_u16(), &body))
    }

    async fn token_request(
        &self,
        form: &[(&str, &str)],
        keep_refresh: Option<&Secret>,
    ) -> Result<Tokens, OAuthError> {
        let url = &self.endpoints.token;
        let response = self
            .http
            .post(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .form(form)
            .send()
            .await
            .map_err(|err| transport(url, err))?;
        let status = response.status();
        let body = read_capped(url, response).await?;
        if !status.is_success() {
            return Err(status_error(url, status.as_u16(), &body));
        }
        let parsed: TokenResponse =
            serde_json::from_slice(&body).map_err(|_| OAuthError::Transport {
                url: url.clone(),
                reason: "the answer is not a JSON token response".to_owned(),
            })?;
        let access = parsed
            .access_token
            .as_deref()
            .and_then(Secret::new)
            .ok_or_else(|| OAuthError::NoAccessToken { url: url.clone() })?;
        let refresh = parsed
            .refresh_token
            .as_deref()
            .and_then(Secret::new)
            .or_else(|| keep_refresh.cloned());
        Ok(Tokens { access, refresh })
    }
}

fn transport(url: &str, err: reqwest::Error) -> OAuthError {
    // reqwest's message can quote the URL, which is ours, never a form field.
    OAuthError::Transport {
        url: url.to_owned(),
        reason: err.without_url().to_string(),
    }
}

async fn read_capped(url: &str, mut response: reqwest::Response) -> Result<Vec<u8>, OAuthError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|err| transport(url, err))? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_RESPONSE_BYTES {
            return Err(OAuthError::Transport {
                url: url.to_owned(),
                reason: format!("the answer is larger than {MAX_RESPONSE_BYTES} bytes"),
            });
        }
    }
    Ok(body)
}

fn status_error(url: &str, status: u16, body: &[u8]) -> OAuthError {
    let error = serde_json::from_slice::<ErrorResponse>(body)
        .ok()
        .and_then(|parsed| parsed.error)
        .map(|code| {
            code.chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
                .take(64)
                .collect::<String>()
        })
        .filter(|code| !code.is_empty());
    OAuthError::Status {
        url: url.to_owned(),
        status,
        error,
    }
}
