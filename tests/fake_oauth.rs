//! A fake OAuth server on 127.0.0.1:0 for the connector's login tests: the reference's
//! `/auth/authorize` (redirects to the loopback callback with a code, or with a wrong state or an
//! error when told to), `/api/oauth/token` (code exchange that checks the PKCE verifier against
//! the S256 challenge, and refresh that rotates both tokens) and `/api/oauth/revoke` (JSON), with
//! every token it issued, every refresh and every revocation recorded for the test to check.
//! Access tokens are opaque random strings, or, once told a lifetime, HS256 JWTs signed with a
//! key of the fake's own and carrying `iat` and `exp`, as the platform issues them.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::{
    Json, Router,
    extract::{Query, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::{net::TcpListener, task::JoinHandle};

/// How `/auth/authorize` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizeMode {
    /// Redirect with a code and the state it was given.
    Approve,
    /// Redirect with a code and a different state (a forged redirect).
    WrongState,
    /// Redirect with `error=access_denied`.
    Deny,
}

/// A pending authorization code.
#[derive(Debug, Clone)]
struct Grant {
    challenge: String,
    redirect_uri: String,
}

#[derive(Debug)]
struct Inner {
    mode: AuthorizeMode,
    codes: HashMap<String, Grant>,
    /// Every access token issued, oldest first.
    access: Vec<String>,
    /// The refresh token that is currently valid.
    refresh: Option<String>,
    refreshes: usize,
    exchanges: usize,
    refresh_delay: Duration,
    revoke_status: u16,
    revoked: Vec<Value>,
    client_ids: Vec<String>,
    /// `None`: opaque access tokens; else JWTs expiring this long after issue.
    jwt_lifetime: Option<Duration>,
    /// The HS256 key of the JWTs, random per fake.
    key: Vec<u8>,
}

/// The running fake.
pub struct FakeOAuth {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: JoinHandle<()>,
}

impl Drop for FakeOAuth {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeOAuth {
    /// Starts the fake.
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner {
            mode: AuthorizeMode::Approve,
            codes: HashMap::new(),
            access: Vec::new(),
            refresh: None,
            refreshes: 0,
            exchanges: 0,
            refresh_delay: Duration::ZERO,
            revoke_status: 200,
            revoked: Vec::new(),
            client_ids: Vec::new(),
            jwt_lifetime: None,
            key: [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()]
                .iter()
                .flat_map(|id| id.into_bytes())
                .collect(),
        }));
        let app = Router::new()
            .route("/auth/authorize", get(authorize))
            .route("/api/oauth/token", post(token))
            .route("/api/oauth/revoke", post(revoke))
            .with_state(Arc::clone(&inner));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { addr, inner, task }
    }

    /// The platform URL to give the shim (`http://127.0.0.1:port`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sets how `/auth/authorize` answers.
    pub fn set_mode(&self, mode: AuthorizeMode) {
        self.inner.lock().unwrap().mode = mode;
    }

    /// Delays every refresh answer, so concurrent refreshes overlap.
    pub fn set_refresh_delay(&self, delay: Duration) {
        self.inner.lock().unwrap().refresh_delay = delay;
    }

    /// From now on, access tokens are HS256 JWTs whose `exp` is `lifetime` after their `iat`
    /// (whole seconds); `None` goes back to opaque tokens (the default).
    pub fn set_jwt_lifetime(&self, lifetime: Option<Duration>) {
        self.inner.lock().unwrap().jwt_lifetime = lifetime;
    }

    /// The claims of a JWT this fake issued, its signature checked; `None` for anything else.
    pub fn claims(&self, token: &str) -> Option<Value> {
        let key = self.inner.lock().unwrap().key.clone();
        let (message, signature) = token.rsplit_once('.')?;
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
        mac.update(message.as_bytes());
        mac.verify_slice(&signature).ok()?;
        let payload = message.split_once('.')?.1;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
    }

    /// The `exp` of a JWT this fake issued, as a time.
    pub fn expiry(&self, token: &str) -> Option<SystemTime> {
        let exp = self.claims(token)?["exp"].as_u64()?;
        Some(UNIX_EPOCH + Duration::from_secs(exp))
    }

    /// The status `/api/oauth/revoke` answers.
    pub fn set_revoke_status(&self, status: u16) {
        self.inner.lock().unwrap().revoke_status = status;
    }

    /// Every access token issued, oldest first.
    pub fn access_tokens(&self) -> Vec<String> {
        self.inner.lock().unwrap().access.clone()
    }

    /// The refresh token now valid.
    pub fn refresh_token(&self) -> Option<String> {
        self.inner.lock().unwrap().refresh.clone()
    }

    /// Refreshes answered successfully.
    pub fn refreshes(&self) -> usize {
        self.inner.lock().unwrap().refreshes
    }

    /// Code exchanges answered successfully (each one passed the PKCE check).
    pub fn exchanges(&self) -> usize {
        self.inner.lock().unwrap().exchanges
    }

    /// The JSON bodies of the revocation requests.
    pub fn revoked(&self) -> Vec<Value> {
        self.inner.lock().unwrap().revoked.clone()
    }

    /// The client ids of every token request.
    pub fn client_ids(&self) -> Vec<String> {
        self.inner.lock().unwrap().client_ids.clone()
    }
}

fn random(tag: &str) -> String {
    format!("{tag}-{}", uuid::Uuid::new_v4().simple())
}

/// An HS256 JWT for a fake user, issued now and expiring `lifetime` later.
fn jwt(key: &[u8], lifetime: Duration) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = json!({
        "sub": "fake-user",
        "jti": random("jti"),
        "iat": now,
        "exp": now + lifetime.as_secs(),
        "scope": "USE_TOOLS",
    });
    let message = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(message.as_bytes());
    let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    format!("{message}.{signature}")
}

fn issue(inner: &mut Inner) -> Value {
    let access = match inner.jwt_lifetime {
        Some(lifetime) => jwt(&inner.key, lifetime),
        None => random("fake-access"),
    };
    let refresh = random("fake-refresh");
    inner.access.push(access.clone());
    inner.refresh = Some(refresh.clone());
    json!({
        "access_token": access,
        "refresh_token": refresh,
        "token_type": "Bearer",
        "expires_in": inner.jwt_lifetime.map_or(3600, |lifetime| lifetime.as_secs()),
    })
}

async fn authorize(
    State(inner): State<Arc<Mutex<Inner>>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let param = |name: &str| query.get(name).cloned().unwrap_or_default();
    if param("response_type") != "code"
        || param("code_challenge_method") != "S256"
        || param("code_challenge").len() != 43
        || param("scope") != "USE_TOOLS"
        || param("client_id").is_empty()
        || param("state").is_empty()
    {
        return (StatusCode::BAD_REQUEST, "bad authorize request").into_response();
    }
    let redirect_uri = param("redirect_uri");
    let mut inner = inner.lock().unwrap();
    let code = random("code");
    inner.codes.insert(
        code.clone(),
        Grant {
            challenge: param("code_challenge"),
            redirect_uri: redirect_uri.clone(),
        },
    );
    let location = match inner.mode {
        AuthorizeMode::Approve => format!("{redirect_uri}?code={code}&state={}", param("state")),
        AuthorizeMode::WrongState => format!("{redirect_uri}?code={code}&state=forged"),
        AuthorizeMode::Deny => format!(
            "{redirect_uri}?error=access_denied&state={}",
            param("state")
        ),
    };
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

async fn token(State(inner): State<Arc<Mutex<Inner>>>, body: String) -> Response {
    let form = decode_form(&body);
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    let refused =
        |error: &str| (StatusCode::BAD_REQUEST, Json(json!({ "error": error }))).into_response();
    inner.lock().unwrap().client_ids.push(field("client_id"));
    match field("grant_type").as_str() {
        "authorization_code" => {
            let mut inner = inner.lock().unwrap();
            let Some(grant) = inner.codes.remove(&field("code")) else {
                return refused("invalid_grant");
            };
            let digest = Sha256::digest(field("code_verifier").as_bytes());
            let challenge = URL_SAFE_NO_PAD.encode(digest);
            if challenge != grant.challenge || grant.redirect_uri != field("redirect_uri") {
                return refused("invalid_grant");
            }
            inner.exchanges += 1;
            Json(issue(&mut inner)).into_response()
        }
        "refresh_token" => {
            let delay = inner.lock().unwrap().refresh_delay;
            tokio::time::sleep(delay).await;
            let mut inner = inner.lock().unwrap();
            if inner.refresh.as_deref() != Some(field("refresh_token").as_str()) {
                return refused("invalid_grant");
            }
            inner.refreshes += 1;
            Json(issue(&mut inner)).into_response()
        }
        _ => refused("unsupported_grant_type"),
    }
}

async fn revoke(State(inner): State<Arc<Mutex<Inner>>>, Json(body): Json<Value>) -> Response {
    let mut inner = inner.lock().unwrap();
    inner.revoked.push(body);
    StatusCode::from_u16(inner.revoke_status)
        .unwrap()
        .into_response()
}

/// `application/x-www-form-urlencoded`: `+` is a space, `%XX` a byte.
fn decode_form(body: &str) -> HashMap<String, String> {
    let decode = |text: &str| {
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    i += 2;
                }
                byte => out.push(byte),
            }
            i += 1;
        }
        String::from_utf8(out).unwrap()
    };
    body.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}
