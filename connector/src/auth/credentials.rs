//! The OAuth tokens one daemon dials with, shared by every connection of the machine.
//!
//! A refresh is asked for *the token of one generation*: each rotation bumps a generation
//! counter, and the refresh runs under one async mutex. The first connection to get the lock
//! spends the refresh token; the others find the generation moved on and dial with the new
//! token, so two sockets that both want a new token cause one refresh. Two things ask: a dial
//! whose access token is a JWT near its `exp` ([`super::expiry`]), before dialling, and a
//! rejected upgrade (401), the fallback for tokens without an `exp` (or rejected early).
//! A refreshed pair is stored (keyring or file) before it is used, and audited as
//! TOKEN_REFRESHED with no details.

use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::Mutex;

use super::expiry::Expiry;
use super::oauth::{OAuthClient, OAuthError};
use super::store::{StoreError, TokenStore};
use super::{Secret, Tokens};
use crate::audit::{Auditor, Entry};
use crate::link::{Token, unit_random};

/// Why a refresh failed.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// The OAuth server refused or could not be reached.
    #[error(transparent)]
    OAuth(#[from] OAuthError),
    /// The new tokens could not be stored.
    #[error("the refreshed tokens could not be stored: {0}")]
    Store(#[from] StoreError),
}

#[derive(Debug)]
struct State {
    tokens: Tokens,
    generation: u64,
    /// The access token's `exp`, when it is a JWT with one.
    expiry: Option<Expiry>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    client: OAuthClient,
    store: TokenStore,
    audit: Auditor,
}

/// Shared OAuth credentials; clones share the tokens and the refresh lock.
#[derive(Debug, Clone)]
pub struct Credentials(Arc<Inner>);

impl Credentials {
    /// Credentials starting from `tokens`, refreshed through `client` and saved to `store`.
    pub fn new(tokens: Tokens, client: OAuthClient, store: TokenStore, audit: Auditor) -> Self {
        Self(Arc::new(Inner {
            state: Mutex::new(State {
                expiry: Expiry::of(&tokens.access, SystemTime::now()),
                tokens,
                generation: 0,
            }),
            client,
            store,
            audit,
        }))
    }

    /// The bearer to dial with and its generation (pass it to [`Self::refresh`] on a 401).
    pub async fn current(&self) -> (Option<Token>, u64) {
        let state = self.0.state.lock().await;
        (state.tokens.access.bearer(), state.generation)
    }

    /// Like [`Self::current`], but when the access token's `exp` is near (see
    /// [`Expiry::due`], with a jitter drawn for this dial) it is refreshed first, through the
    /// same once-per-generation [`Self::refresh`] a 401 uses. A failed refresh is logged and
    /// the current token returned: it may still be accepted, and if not, the 401 path tries
    /// once more and reports.
    pub async fn for_dial(&self) -> (Option<Token>, u64) {
        let (generation, due) = {
            let state = self.0.state.lock().await;
            let due = state
                .expiry
                .is_some_and(|expiry| expiry.due(SystemTime::now(), unit_random()));
            (state.generation, due)
        };
        if due {
            tracing::debug!("the OAuth access token expires soon: refreshing it before dialling");
            if let Err(err) = self.refresh(generation).await {
                tracing::warn!(error = %err, "could not refresh the OAuth token before it expires; dialling with the current one");
            }
        }
        self.current().await
    }

    /// Replaces the token of generation `rejected` (refused by the platform, or about to
    /// expire), unless another connection already has.
    ///
    /// # Errors
    /// No refresh token, the server's refusal, or the store's failure; the old tokens stay.
    pub async fn refresh(&self, rejected: u64) -> Result<(), RefreshError> {
        let mut state = self.0.state.lock().await;
        if state.generation != rejected {
            return Ok(());
        }
        let refresh: Secret = state
            .tokens
            .refresh
            .clone()
            .ok_or(OAuthError::NoRefreshToken)?;
        let tokens = self.0.client.refresh(&refresh).await?;
        self.0.store.save(&tokens).await?;
        state.expiry = Expiry::of(&tokens.access, SystemTime::now());
        state.tokens = tokens;
        state.generation += 1;
        drop(state);
        tracing::info!("refreshed the OAuth access token");
        self.0
            .audit
            .record_async(None, Entry::ok("TOKEN_REFRESHED", serde_json::Map::new()))
            .await;
        Ok(())
    }
}
