//! The OAuth tokens one daemon dials with, shared by every connection of the machine.
//!
//! A rejected upgrade (401) asks for a refresh *of the token it was rejected with*: each
//! rotation bumps a generation counter, and the refresh runs under one async mutex. The first
//! connection to get the lock spends the refresh token; the others find the generation moved
//! on and dial again with the new token, so two sockets that both saw 401 cause one refresh.
//! A refreshed pair is stored (keyring or file) before it is used, and audited as
//! TOKEN_REFRESHED with no details.

use std::sync::Arc;

use tokio::sync::Mutex;

use super::oauth::{OAuthClient, OAuthError};
use super::store::{StoreError, TokenStore};
use super::{Secret, Tokens};
use crate::audit::{Auditor, Entry};
use crate::ws::Token;

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

    /// Replaces the token of `rejected` generation, unless another connection already has.
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
