//! Who is calling: bearer tokens and session cookies, the cross-site check, and the
//! cookie itself.

use super::*;

/// How a caller proved who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// A browser session; the cookie's secret (to end it).
    Cookie(String),
    /// An API token, with its scopes.
    Bearer(Vec<String>),
}

#[derive(Debug, Clone)]
pub struct Caller {
    pub user: User,
    pub via: Via,
    /// The API token it came with, if any.
    pub token: Option<std::sync::Arc<crate::accounts::TokenInfo>>,
}

impl Caller {
    pub fn is_admin(&self) -> bool {
        self.user.role == Role::Admin
    }

    /// Whether the credential this caller came with still lets it in: its session not
    /// ended or expired, its token not revoked, its account there (a database that does
    /// not answer is no answer: yes, asked again later).
    pub async fn still_in(&self, accounts: &crate::accounts::Accounts) -> bool {
        let live = match (&self.via, &self.token) {
            (Via::Cookie(secret), _) => accounts.session_live(secret, self.user.id).await,
            (Via::Bearer(_), Some(t)) => accounts.token_live(t.id).await,
            (Via::Bearer(_), None) => Ok(false),
        };
        live.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "looking whether a credential still lets its caller in");
            true
        })
    }

    /// Resolves once this caller's credential no longer lets it in: what outlives its
    /// request (a terminal, an event stream) ends with it. Looked at on every logout,
    /// revocation, password change or deletion of the caller's user, and every [`RECHECK`] (a session's
    /// idle and absolute expiry).
    pub fn signed_out(
        &self,
        api: &Shared,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (caller, api) = (self.clone(), api.clone());
        // Taken now, not when first polled, and seen as changed: an ending between the
        // request's authentication and the stream's start is looked at at once.
        let mut endings = api.accounts.endings_of(caller.user.id);
        endings.mark_changed();
        async move {
            loop {
                tokio::select! {
                    changed = endings.changed() => {
                        if changed.is_err() {
                            return std::future::pending().await;
                        }
                    }
                    () = tokio::time::sleep(RECHECK) => {}
                }
                if !caller.still_in(&api.accounts).await {
                    tracing::info!(user = %caller.user.name, "credential ended: its streams close");
                    return;
                }
            }
        }
    }

    pub(crate) fn cookie_only(&self) -> Result<&str, ApiError> {
        match &self.via {
            Via::Cookie(secret) => Ok(secret),
            Via::Bearer(_) => Err(ApiError::forbidden(
                "API tokens cannot do this: log in with a password",
            )),
        }
    }
}

/// How often a stream looks whether its caller's credential has expired.
pub const RECHECK: Duration = Duration::from_secs(30);

pub(crate) const COOKIE: &str = "argos_session";
pub(crate) const HOST_COOKIE: &str = "__Host-argos_session";
/// The device cookie: a client that logged in as someone before (OWASP's "device
/// cookies"). Sent only to the login route.
pub(crate) const DEVICE_COOKIE: &str = "argos_device";
pub(crate) const SECURE_DEVICE_COOKIE: &str = "__Secure-argos_device";
/// How long a client stays known without logging in again.
const DEVICE_MAX_AGE: Duration = Duration::from_secs(365 * 24 * 3600);
/// The key's domain for device cookies.
const DEVICE_DOMAIN: &str = "argos device cookie v1";

pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    cookie(headers, HOST_COOKIE, COOKIE)
}

/// The value of cookie `preferred`, else of `plain`.
fn cookie(headers: &HeaderMap, preferred: &str, plain: &str) -> Option<String> {
    let mut found = None;
    for v in headers.get_all(header::COOKIE) {
        let Ok(v) = v.to_str() else { continue };
        for pair in v.split(';') {
            let Some((k, val)) = pair.trim().split_once('=') else {
                continue;
            };
            if k == preferred {
                return Some(val.to_string());
            }
            if k == plain {
                found = Some(val.to_string());
            }
        }
    }
    found
}

/// The device this client is, when it shows a device cookie the gateway made for a login
/// as `name`: its nonce. A cookie made for another name, or not made by this gateway's
/// key, is no device.
pub(crate) fn known_device(api: &Api, headers: &HeaderMap, name: &str) -> Option<String> {
    let value = cookie(headers, SECURE_DEVICE_COOKIE, DEVICE_COOKIE)?;
    let (nonce, tag) = value.split_once('.')?;
    (nonce.len() == 32 && nonce.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(())
        .filter(|_| {
            api.key
                .verify(DEVICE_DOMAIN, &device_text(name, nonce), tag)
        })
        .map(|_| nonce.to_string())
}

fn device_text(name: &str, nonce: &str) -> Vec<u8> {
    format!("{name}\0{nonce}").into_bytes()
}

/// A new device cookie for a client that just logged in as `name`.
pub(crate) fn device_cookie(
    api: &Api,
    headers: &HeaderMap,
    peer: IpAddr,
    name: &str,
) -> HeaderValue {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).expect("the kernel's random source");
    let nonce = hex::encode(nonce);
    let tag = api.key.tag(DEVICE_DOMAIN, &device_text(name, &nonce));
    let (cookie, flag) = if cookie_secure(api, headers, peer) {
        (SECURE_DEVICE_COOKIE, "; Secure")
    } else {
        (DEVICE_COOKIE, "")
    };
    HeaderValue::from_str(&format!(
        "{cookie}={nonce}.{tag}; Path=/api/login; HttpOnly; SameSite=Strict; Max-Age={}{flag}",
        DEVICE_MAX_AGE.as_secs()
    ))
    .expect("hex is a cookie value")
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(ApiError::unauthenticated)
    }
}

/// Resolves the caller (if any); `policy::authorize` then applies the route's rule, and
/// handlers ask for a [`Caller`].
pub async fn authenticate(
    State(api): State<Shared>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let headers = req.headers();
    // A body declared too large is refused before a byte of it is read.
    if headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .is_some_and(|n| n > BODY_LIMIT as u64)
    {
        return Err(too_large());
    }
    let caller = if let Some(token) = bearer(headers) {
        let (user, token) = api
            .accounts
            .token(token)
            .await?
            .ok_or_else(ApiError::unauthenticated)?;
        Some(Caller {
            user,
            via: Via::Bearer(token.scopes.clone()),
            token: Some(std::sync::Arc::new(token)),
        })
    } else if let Some(secret) = session_cookie(headers) {
        api.accounts.session(&secret).await?.map(|user| Caller {
            user,
            via: Via::Cookie(secret),
            token: None,
        })
    } else {
        None
    };
    if let Some(c) = caller {
        req.extensions_mut().insert(c);
    }
    Ok(next.run(req).await)
}

/// Whether the request came over HTTPS: the gateway itself speaks plain HTTP, so only a
/// trusted proxy's first `X-Forwarded-Proto` hop can say so.
pub fn is_https(headers: &HeaderMap, web: &WebConfig, peer: IpAddr) -> bool {
    web.trusted_proxies.contains(&peer)
        && headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
}

/// Refuses a browser request another site made: `Sec-Fetch-Site: cross-site`, or an
/// `Origin` that is neither the gateway's own nor an allowed one. Which requests must pass
/// it is the route table's say (`policy::Access::same_origin`: state changes, event
/// streams, WebSocket upgrades, whatever their `Accept`), and only without a bearer token
/// (no ambient credential for another site to borrow).
pub fn cross_site(headers: &HeaderMap, web: &WebConfig, peer: IpAddr) -> Result<(), ApiError> {
    if headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"cross-site")
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site",
            "cross-site request refused",
        ));
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let scheme = if is_https(headers, web, peer) {
        "https"
    } else {
        "http"
    };
    let own = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(|h| format!("{scheme}://{h}"));
    if own.as_deref() == Some(origin) || web.allowed_origins.iter().any(|o| o == origin) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site",
            format!("origin {origin} is not allowed"),
        ))
    }
}

pub(crate) fn cookie_secure(api: &Api, headers: &HeaderMap, peer: IpAddr) -> bool {
    match api.web.cookie_secure {
        CookieSecure::Always => true,
        CookieSecure::Never => false,
        CookieSecure::Auto => is_https(headers, &api.web, peer),
    }
}

pub(crate) fn set_cookie(secret: &str, secure: bool, max_age: Duration) -> HeaderValue {
    let (name, flag) = if secure {
        (HOST_COOKIE, "; Secure")
    } else {
        (COOKIE, "")
    };
    HeaderValue::from_str(&format!(
        "{name}={secret}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{flag}",
        max_age.as_secs()
    ))
    .expect("cookie characters are URL-safe base64")
}

pub(crate) fn session_response(
    api: &Api,
    headers: &HeaderMap,
    peer: IpAddr,
    secret: &str,
    user: &User,
) -> Response {
    let secure = cookie_secure(api, headers, peer);
    let mut r = Json(json!({"user": user})).into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie(secret, secure, api.accounts.limits.absolute),
    );
    r
}

/// Refuses a request whose `Host` the gateway does not answer to: only IP addresses,
/// `localhost` and the configured names are. A DNS name an attacker points at this
/// address (DNS rebinding) would otherwise make another site same-origin with the gateway.
pub async fn known_host(
    State(api): State<Shared>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let host = req
        .headers()
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or("\u{fffd}"));
    if let Some(h) = host
        && !host_allowed(h, &api.web)
    {
        return Err(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "unknown_host",
            format!("Host {h:?} is not one this gateway answers to (gateway.allowed_hosts)"),
        ));
    }
    Ok(next.run(req).await)
}

/// Whether a `Host` header names this gateway (see [`known_host`]).
pub fn host_allowed(host: &str, web: &WebConfig) -> bool {
    let host = host.to_ascii_lowercase();
    // The name without its port: `[v6]:port`, `name:port`, or a bare name.
    let name = if let Some(rest) = host.strip_prefix('[') {
        // After the brackets, a port or nothing (`[::1]@elsewhere` names no host of ours).
        match rest.split_once(']') {
            Some((v6, after))
                if after.is_empty()
                    || after.strip_prefix(':').is_some_and(|p| {
                        !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
                    }) =>
            {
                v6
            }
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((n, port)) if port.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => host.as_str(),
        }
    };
    name.parse::<IpAddr>().is_ok()
        || name == "localhost"
        || web.allowed_hosts.iter().any(|a| *a == host || *a == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_addresses_localhost_and_configured_names_are_answered() {
        let web = |hosts: &[&str]| WebConfig {
            cookie_secure: CookieSecure::Never,
            trusted_proxies: Vec::new(),
            allowed_origins: Vec::new(),
            allowed_hosts: hosts.iter().map(|h| h.to_string()).collect(),
        };
        let none = web(&[]);
        for ok in [
            "127.0.0.1:7000",
            "10.1.2.3",
            "[::1]:7000",
            "localhost:7000",
            "LOCALHOST",
        ] {
            assert!(host_allowed(ok, &none), "{ok}");
        }
        for bad in [
            "evil.example:7000",
            "evil.example",
            "127.0.0.1.evil.example",
            "[::1",
            "[::1]@evil.example",
            "[::1]:",
            "[::1]x",
            "",
        ] {
            assert!(!host_allowed(bad, &none), "{bad}");
        }
        let named = web(&["argos.example.com", "ops.example.com:8443"]);
        assert!(host_allowed("Argos.Example.com:443", &named));
        assert!(host_allowed("ops.example.com:8443", &named));
        assert!(
            !host_allowed("ops.example.com:443", &named),
            "the port was named"
        );
    }
}
