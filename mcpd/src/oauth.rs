//! OAuth 2.1 for upstream servers that ask for it, through rmcp's client: the protected
//! resource's and the authorization server's metadata discovered (hosts they name checked
//! by rmcp: loopback only for a loopback server, private ranges only for one marked
//! local, link-local and metadata addresses never), the client registered (dynamic
//! registration, or a client id metadata document), PKCE, the code exchanged, the access
//! token refreshed as it nears its end. What is ours: the credentials kept sealed in
//! mcpd's store ([`Sealed`], behind rmcp's `CredentialStore`), and the authorizations an
//! admin started and has not finished ([`Pending`]), matched by their `state`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession, CredentialStore,
    StoredCredentials,
};

use crate::server::{ServerConfig, Transport};
use crate::store::Store;

/// One server's credentials, in mcpd's store, sealed under its key and bound to its id.
pub struct Sealed {
    pub store: Store,
    pub server: String,
    /// The resource they are for: credentials issued while the server was at another URL
    /// never open here.
    pub url: String,
}

fn store_error(e: impl std::fmt::Display) -> AuthError {
    AuthError::CredentialStoreError(e.to_string())
}

#[async_trait::async_trait]
impl CredentialStore for Sealed {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        match self
            .store
            .oauth(&self.server, &self.url)
            .await
            .map_err(store_error)?
        {
            Some(json) => serde_json::from_str(&json).map(Some).map_err(store_error),
            None => Ok(None),
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let json = serde_json::to_string(&credentials).map_err(store_error)?;
        self.store
            .set_oauth(&self.server, &self.url, &json)
            .await
            .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.store
            .clear_oauth(&self.server)
            .await
            .map_err(store_error)
    }
}

/// The URL of a server that can use OAuth (Streamable HTTP).
fn url_of(c: &ServerConfig) -> Result<&str, AuthError> {
    match &c.transport {
        Transport::StreamableHttp { url, .. } => Ok(url),
        _ => Err(AuthError::OAuthError(
            "only a Streamable HTTP server is authorized with OAuth".into(),
        )),
    }
}

/// rmcp's manager for a server, its credentials in mcpd's store.
pub async fn manager(store: &Store, c: &ServerConfig) -> Result<AuthorizationManager, AuthError> {
    let url = url_of(c)?;
    let mut m = if c.local {
        AuthorizationManager::new_allowing_private_addresses(url).await?
    } else {
        AuthorizationManager::new(url).await?
    };
    m.set_credential_store(Sealed {
        store: store.clone(),
        server: c.id.clone(),
        url: url.to_string(),
    });
    Ok(m)
}

/// A manager ready to add a bearer token to requests (refreshing it as needed), when the
/// server has credentials; `None` when it has none.
pub async fn authorized(
    store: &Store,
    c: &ServerConfig,
) -> Result<Option<AuthorizationManager>, AuthError> {
    if store
        .oauth(&c.id, url_of(c)?)
        .await
        .map_err(store_error)?
        .is_none()
    {
        return Ok(None);
    }
    let mut m = manager(store, c).await?;
    Ok(m.initialize_from_store().await?.then_some(m))
}

/// How long finding a server's authorization server may take.
const START_WITHIN: Duration = Duration::from_secs(30);
/// How long an admin has to finish an authorization, and how many may wait at once.
const PENDING_FOR: Duration = Duration::from_secs(10 * 60);
const MAX_PENDING: usize = 64;

/// Authorizations started and not finished, by their `state` (random, single use).
#[derive(Default)]
pub struct Pending(Mutex<HashMap<String, (String, AuthorizationSession, Instant)>>);

impl Pending {
    fn map(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (String, AuthorizationSession, Instant)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts authorizing `c`: the authorization server's URL for the admin to open, whose
    /// redirect comes back to `redirect_uri` with a code and this authorization's state.
    /// A server has one authorization waiting at most (a new one replaces it).
    pub async fn start(
        &self,
        store: &Store,
        c: &ServerConfig,
        redirect_uri: &str,
    ) -> Result<String, AuthError> {
        // Discovery may try several servers the metadata lists, each with rmcp's own
        // request timeout: the whole of it within one bound.
        let session = tokio::time::timeout(START_WITHIN, async {
            let mut m = manager(store, c).await?;
            let found = m.resolve_metadata().await?;
            m.set_metadata(found.metadata);
            let request = AuthorizationRequest::new(redirect_uri).with_client_name("Argos");
            AuthorizationSession::new(m, request)
                .await
                .map_err(|(_, e)| e)
        })
        .await
        .map_err(|_| {
            AuthError::OAuthError(format!(
                "its authorization server was not found within {} s",
                START_WITHIN.as_secs()
            ))
        })??;
        let url = session.get_authorization_url().to_string();
        let parsed = url::Url::parse(&url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                AuthError::OAuthError("its authorization endpoint is not an http(s) URL".into())
            })?;
        // The client's own state comes last (an endpoint's URL may carry a query of its
        // own, a `state` in it included).
        let state = parsed
            .query_pairs()
            .filter(|(k, _)| k == "state")
            .last()
            .map(|(_, v)| v.into_owned())
            .ok_or_else(|| AuthError::OAuthError("the authorization URL has no state".into()))?;
        let now = Instant::now();
        let mut map = self.map();
        map.retain(|_, (server, _, at)| *server != c.id && now.duration_since(*at) < PENDING_FOR);
        if map.len() >= MAX_PENDING
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, (_, _, at))| *at)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(state, (c.id.clone(), session, now));
        Ok(url)
    }

    /// Drops what waits for `server` (its configuration changed, or it went).
    pub fn forget(&self, server: &str) {
        let dropped: Vec<_> = {
            let mut map = self.map();
            let states: Vec<String> = map
                .iter()
                .filter(|(_, (s, _, _))| s == server)
                .map(|(k, _)| k.clone())
                .collect();
            states.iter().filter_map(|k| map.remove(k)).collect()
        };
        drop(dropped);
    }

    /// Finishes the authorization `state` names: the code exchanged (with its PKCE
    /// verifier) and the credentials kept. Answers the server's id.
    pub async fn finish(
        &self,
        state: &str,
        code: &str,
        iss: Option<&str>,
    ) -> Result<String, FinishError> {
        let (server, session, at) = self.map().remove(state).ok_or(FinishError::Unknown)?;
        if at.elapsed() >= PENDING_FOR {
            return Err(FinishError::Unknown);
        }
        session
            .handle_callback_with_issuer(code, state, iss)
            .await
            .map_err(|e| FinishError::Failed(server.clone(), e))?;
        Ok(server)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FinishError {
    #[error(
        "no authorization is waiting with this state (it was finished, replaced or is older than 10 minutes): start it again"
    )]
    Unknown,
    #[error("authorizing {0}: {1}")]
    Failed(String, AuthError),
}
