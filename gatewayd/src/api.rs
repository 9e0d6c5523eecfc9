//! The authenticated HTTP API: accounts, sessions, tokens, shell execution through execd
//! and the executions ledger. Errors are `{"error":{"code","message"}}` with stable codes;
//! a 400 names the bad field.
//!
//! Who may call what (session cookie = a logged-in browser; bearer = an API token):
//!
//! | route | anonymous | user | admin |
//! |---|---|---|---|
//! | `GET /api/setup`, `POST /api/setup`, `POST /api/login` | yes | yes | yes |
//! | `GET /api/me`, `GET /api/status` | 401 | cookie, or token with `read` | same |
//! | `POST /api/logout`, `POST /api/me/password`, `/api/tokens` | 401 | cookie only | cookie only |
//! | `/api/users` | 401 | 403 | cookie only |
//! | `POST /api/shell/exec`, `POST /api/executions/{id}/kill` | 401 | 403 | cookie, or token with `exec` |
//! | `GET /api/executions[/{id}]` | 401 | 403 | cookie, or token with `read` |
//! | `POST /api/shell/stream` (SSE) | 401 | 403 | cookie, or token with `exec` |
//! | `GET /api/events` (SSE) | 401 | own executions | all executions (cookie, or token with `read`) |
//!
//! Every request that could change state and carries no bearer token passes the
//! cross-site check first (see [`cross_site`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use argos_proto::exec::v1 as pb;
use axum::Json;
use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::accounts::{AccountError, Accounts, Role, User};
use crate::throttle::Throttle;

/// Largest request body the API reads.
pub const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// How the session cookie's `Secure` flag is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CookieSecure {
    Always,
    Never,
    /// From the request: HTTPS as the first `X-Forwarded-Proto` hop of a trusted proxy.
    Auto,
}

#[derive(Debug, Clone)]
pub struct WebConfig {
    pub cookie_secure: CookieSecure,
    pub trusted_proxies: Vec<IpAddr>,
    pub allowed_origins: Vec<String>,
}

/// What the API handlers share.
pub struct Api {
    pub accounts: Accounts,
    pub throttle: Throttle,
    pub exec: tonic::transport::Channel,
    pub web: WebConfig,
    pub streams: Streams,
    /// Execution changes from execd's `Watch`, for `/api/events`.
    pub changes: tokio::sync::broadcast::Sender<Change>,
    /// How long a streamed workload outlives its client before it is killed.
    pub resume_grace: Duration,
}

pub type Shared = Arc<Api>;

/// The body of every error: `{"error": {"code", "message"}}`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable, e.g. `invalid_argument`, `unauthenticated`, `forbidden`, `cross_site`,
    /// `not_found`, `conflict`, `too_large`, `throttled`.
    pub code: String,
    /// For people; a 400 starts with the bad field's name.
    pub message: String,
}

/// The API's description, generated from the handlers' annotations above.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Argos gateway API",
        description = "Log in (session cookie) or send an API token as `Authorization: Bearer argos_…`. Requests that change state, event streams and WebSocket upgrades without a bearer token must come from the gateway's own origin."
    ),
    paths(
        setup_needed,
        setup,
        login,
        logout,
        me,
        change_password,
        users,
        create_user,
        delete_user,
        tokens,
        create_token,
        revoke_token,
        shell_exec,
        shell_stream,
        executions,
        execution,
        kill,
        events,
        crate::http::status
    ),
    components(schemas(
        ErrorBody,
        ErrorDetail,
        SetupBody,
        LoginBody,
        PasswordBody,
        NewUser,
        NewToken,
        ExecBody
    ))
)]
pub struct ApiDoc;

pub async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        <ApiDoc as utoipa::OpenApi>::openapi()
            .to_pretty_json()
            .unwrap_or_else(|_| "{}".into()),
    )
}

/// An error as a client sees it.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    retry_after: Option<Duration>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    fn unauthenticated() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "log in, or send an API token as `Authorization: Bearer …`",
        )
    }

    fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    fn internal(detail: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %detail, "internal error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error (see the gateway's log)",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (
            self.status,
            Json(json!({"error": {"code": self.code, "message": self.message}})),
        )
            .into_response();
        if let Some(d) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&d.as_secs().max(1).to_string())
        {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        r
    }
}

impl From<AccountError> for ApiError {
    fn from(e: AccountError) -> ApiError {
        match e {
            AccountError::Invalid { field, message } => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                format!("{field}: {message}"),
            ),
            AccountError::NameTaken(_) => {
                ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string())
            }
            AccountError::SetupLink => {
                ApiError::new(StatusCode::FORBIDDEN, "setup_link", e.to_string())
            }
            AccountError::WrongPassword => ApiError::new(
                StatusCode::FORBIDDEN,
                "wrong_password",
                "current_password: wrong",
            ),
            other => ApiError::internal(other),
        }
    }
}

fn from_status(s: tonic::Status) -> ApiError {
    let (status, code) = match s.code() {
        tonic::Code::InvalidArgument => (StatusCode::BAD_REQUEST, "invalid_argument"),
        tonic::Code::NotFound => (StatusCode::NOT_FOUND, "not_found"),
        tonic::Code::PermissionDenied => (StatusCode::FORBIDDEN, "forbidden"),
        tonic::Code::ResourceExhausted => (StatusCode::TOO_MANY_REQUESTS, "resource_exhausted"),
        tonic::Code::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        tonic::Code::DataLoss => (StatusCode::GONE, "data_loss"),
        _ => return ApiError::internal(format!("execd: {s}")),
    };
    ApiError::new(status, code, s.message().to_string())
}

/// A JSON body, with a 400 that says what is wrong instead of axum's plain text.
pub struct Body<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for Body<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Body(v)),
            Err(e) => Err(match e {
                axum::extract::rejection::JsonRejection::MissingJsonContentType(_) => {
                    ApiError::new(
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        "unsupported_media_type",
                        "send JSON with `Content-Type: application/json`",
                    )
                }
                axum::extract::rejection::JsonRejection::BytesRejection(_) => too_large(),
                other => ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_argument",
                    other.body_text(),
                ),
            }),
        }
    }
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("request bodies are limited to {BODY_LIMIT} bytes"),
    )
}

// ---- who is calling ----------------------------------------------------------------

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
}

impl Caller {
    pub fn is_admin(&self) -> bool {
        self.user.role == Role::Admin
    }

    pub fn scoped_read(&self) -> Result<(), ApiError> {
        self.scoped("read")
    }

    /// Tokens carry scopes; a session may do whatever its user may.
    fn scoped(&self, scope: &str) -> Result<(), ApiError> {
        match &self.via {
            Via::Cookie(_) => Ok(()),
            Via::Bearer(scopes) if scopes.iter().any(|s| s == scope) => Ok(()),
            Via::Bearer(_) => Err(ApiError::forbidden(format!(
                "this token lacks the `{scope}` scope"
            ))),
        }
    }

    fn cookie_only(&self) -> Result<&str, ApiError> {
        match &self.via {
            Via::Cookie(secret) => Ok(secret),
            Via::Bearer(_) => Err(ApiError::forbidden(
                "API tokens cannot do this: log in with a password",
            )),
        }
    }

    fn admin(&self) -> Result<(), ApiError> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(ApiError::forbidden("admins only"))
        }
    }
}

const COOKIE: &str = "argos_session";
const HOST_COOKIE: &str = "__Host-argos_session";

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    let mut found = None;
    for v in headers.get_all(header::COOKIE) {
        let Ok(v) = v.to_str() else { continue };
        for pair in v.split(';') {
            let Some((k, val)) = pair.trim().split_once('=') else {
                continue;
            };
            if k == HOST_COOKIE {
                return Some(val.to_string());
            }
            if k == COOKIE {
                found = Some(val.to_string());
            }
        }
    }
    found
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

/// Resolves the caller (if any) and runs the cross-site check; handlers then ask for a
/// [`Caller`].
pub async fn authenticate(
    State(api): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
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
        let (user, scopes) = api
            .accounts
            .token(token)
            .await?
            .ok_or_else(ApiError::unauthenticated)?;
        Some(Caller {
            user,
            via: Via::Bearer(scopes),
        })
    } else if let Some(secret) = session_cookie(headers) {
        api.accounts.session(&secret).await?.map(|user| Caller {
            user,
            via: Via::Cookie(secret),
        })
    } else {
        None
    };
    let ambient = !matches!(
        caller,
        Some(Caller {
            via: Via::Bearer(_),
            ..
        })
    );
    if ambient {
        cross_site(req.method(), headers, &api.web, peer.ip())?;
    }
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
/// `Origin` that is neither the gateway's own nor an allowed one. Applies to every request
/// that may change state (any method but GET/HEAD), to event streams (`Accept:
/// text/event-stream`) and to WebSocket upgrades, unless it carries a bearer token (no
/// ambient credential for another site to borrow).
pub fn cross_site(
    method: &Method,
    headers: &HeaderMap,
    web: &WebConfig,
    peer: IpAddr,
) -> Result<(), ApiError> {
    let streaming = headers
        .get(header::ACCEPT)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
        || headers.contains_key(header::UPGRADE);
    if (method == Method::GET || method == Method::HEAD) && !streaming {
        return Ok(());
    }
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

fn cookie_secure(api: &Api, headers: &HeaderMap, peer: IpAddr) -> bool {
    match api.web.cookie_secure {
        CookieSecure::Always => true,
        CookieSecure::Never => false,
        CookieSecure::Auto => is_https(headers, &api.web, peer),
    }
}

fn set_cookie(secret: &str, secure: bool, max_age: Duration) -> HeaderValue {
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

fn session_response(
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

// ---- accounts ----------------------------------------------------------------------

#[utoipa::path(get, path = "/api/setup", tag = "accounts", description = "Whether the first admin is still to be created.",   responses((status = 200, description = "`{\"needed\": bool}`")))]
pub async fn setup_needed(State(api): State<Shared>) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(
        json!({"needed": api.accounts.user_count().await? == 0}),
    ))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct SetupBody {
    token: String,
    name: String,
    password: String,
}

#[utoipa::path(post, path = "/api/setup", tag = "accounts", description = "Creates the first admin with the one-time setup link; starts a session.", request_body = SetupBody,  responses((status = 200, description = "the admin; sets the session cookie"), (status = 403, description = "setup link unknown, used or expired", body = ErrorBody), (status = 429, description = "throttled", body = ErrorBody)))]
pub async fn setup(
    State(api): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Body(b): Body<SetupBody>,
) -> Result<Response, ApiError> {
    let keys = [format!("addr:{}", peer.ip())];
    if let Some(wait) = api.throttle.wait(&keys) {
        return Err(throttled(wait));
    }
    let user = match api
        .accounts
        .setup_admin(&b.token, &b.name, &b.password)
        .await
    {
        Err(AccountError::SetupLink) => {
            api.throttle.failed(&keys);
            return Err(AccountError::SetupLink.into());
        }
        other => other?,
    };
    tracing::info!(user = %user.name, "first admin created");
    let secret = api.accounts.new_session(user.id).await?;
    Ok(session_response(&api, &headers, peer.ip(), &secret, &user))
}

fn throttled(wait: Duration) -> ApiError {
    let mut e = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "throttled",
        format!(
            "too many failed attempts; try again in {} s",
            wait.as_secs().max(1)
        ),
    );
    e.retry_after = Some(wait);
    e
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct LoginBody {
    name: String,
    password: String,
}

#[utoipa::path(post, path = "/api/login", tag = "accounts", description = "Starts a session (sets the cookie).", request_body = LoginBody,  responses((status = 200, description = "the user; sets the session cookie"), (status = 401, description = "wrong name or password", body = ErrorBody), (status = 429, description = "throttled: see Retry-After", body = ErrorBody)))]
pub async fn login(
    State(api): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Body(b): Body<LoginBody>,
) -> Result<Response, ApiError> {
    let account = format!("user:{}", b.name);
    let keys = [account.clone(), format!("addr:{}", peer.ip())];
    if let Some(wait) = api.throttle.wait(&keys) {
        return Err(throttled(wait));
    }
    let Some(user) = api.accounts.login(&b.name, &b.password).await? else {
        api.throttle.failed(&keys);
        tracing::warn!(name = %b.name, peer = %peer.ip(), "failed login");
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "bad_credentials",
            "wrong name or password",
        ));
    };
    api.throttle.succeeded(&account);
    let secret = api.accounts.new_session(user.id).await?;
    tracing::info!(user = %user.name, "login");
    Ok(session_response(&api, &headers, peer.ip(), &secret, &user))
}

#[utoipa::path(post, path = "/api/logout", tag = "accounts", description = "Ends this session server-side.",   responses((status = 204, description = "ended"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn logout(
    State(api): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    caller: Caller,
) -> Result<Response, ApiError> {
    let secret = caller.cookie_only()?;
    api.accounts.end_session(secret).await?;
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie("", cookie_secure(&api, &headers, peer.ip()), Duration::ZERO),
    );
    Ok(r)
}

#[utoipa::path(get, path = "/api/me", tag = "accounts", description = "Who is calling, and how.",   responses((status = 200, description = "`{\"user\", \"via\"}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn me(caller: Caller) -> Result<Json<serde_json::Value>, ApiError> {
    caller.scoped("read")?;
    let via = match &caller.via {
        Via::Cookie(_) => json!("session"),
        Via::Bearer(scopes) => json!({"token_scopes": scopes}),
    };
    Ok(Json(json!({"user": caller.user, "via": via})))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct PasswordBody {
    current_password: String,
    new_password: String,
}

#[utoipa::path(post, path = "/api/me/password", tag = "accounts", description = "Changes the password; every other session of the account ends.", request_body = PasswordBody,  responses((status = 204, description = "changed"), (status = 400, description = "bad new password", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn change_password(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<PasswordBody>,
) -> Result<StatusCode, ApiError> {
    let session = caller.cookie_only()?.to_string();
    api.accounts
        .change_password(
            &caller.user,
            &b.current_password,
            &b.new_password,
            Some(&session),
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/users", tag = "users", description = "Every account (admins, by session).",   responses((status = 200, description = "`{\"users\": [...]}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn users(
    State(api): State<Shared>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    caller.cookie_only()?;
    caller.admin()?;
    Ok(Json(json!({"users": api.accounts.users().await?})))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct NewUser {
    name: String,
    password: String,
    role: String,
}

#[utoipa::path(post, path = "/api/users", tag = "users", description = "Creates an account (admins, by session).", request_body = NewUser,  responses((status = 201, description = "created"), (status = 400, description = "bad field", body = ErrorBody), (status = 409, description = "name taken", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn create_user(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<NewUser>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    caller.cookie_only()?;
    caller.admin()?;
    let role = Role::parse(&b.role).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            "role: `admin` or `user`",
        )
    })?;
    let user = api.accounts.create_user(&b.name, &b.password, role).await?;
    tracing::info!(by = %caller.user.name, user = %user.name, role = role.as_str(), "user created");
    Ok((StatusCode::CREATED, Json(json!({"user": user}))))
}

#[utoipa::path(delete, path = "/api/users/{name}", tag = "users", description = "Deletes an account with its sessions and tokens (never the last admin).",  params(("name" = String, Path, description = "account name")), responses((status = 204, description = "deleted"), (status = 404, description = "no such user", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn delete_user(
    State(api): State<Shared>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    caller.cookie_only()?;
    caller.admin()?;
    if api.accounts.delete_user(&name).await? {
        tracing::info!(by = %caller.user.name, user = %name, "user deleted");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("no user {name:?}")))
    }
}

#[utoipa::path(get, path = "/api/tokens", tag = "tokens", description = "The caller's live API tokens (never their secrets).",   responses((status = 200, description = "`{\"tokens\": [...]}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn tokens(
    State(api): State<Shared>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    caller.cookie_only()?;
    Ok(Json(
        json!({"tokens": api.accounts.tokens(caller.user.id).await?}),
    ))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct NewToken {
    name: String,
    scopes: Vec<String>,
}

#[utoipa::path(post, path = "/api/tokens", tag = "tokens", description = "Creates an API token; its secret is in this answer only.", request_body = NewToken,  responses((status = 201, description = "`{\"id\", \"token\", ...}`"), (status = 400, description = "bad name or scopes", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn create_token(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<NewToken>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    caller.cookie_only()?;
    let (id, secret) = api
        .accounts
        .new_token(caller.user.id, &b.name, &b.scopes)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(
            json!({"id": id, "name": b.name, "scopes": b.scopes, "token": secret,
            "note": "shown once: store it now"}),
        ),
    ))
}

#[utoipa::path(delete, path = "/api/tokens/{id}", tag = "tokens", description = "Revokes one of the caller's tokens.",  params(("id" = i64, Path, description = "token id")), responses((status = 204, description = "revoked"), (status = 404, description = "no such token", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn revoke_token(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    caller.cookie_only()?;
    if api.accounts.revoke_token(caller.user.id, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("no token {id}")))
    }
}

// ---- execution ---------------------------------------------------------------------

fn exec_client(api: &Api) -> pb::exec_client::ExecClient<tonic::transport::Channel> {
    pb::exec_client::ExecClient::new(api.exec.clone()).max_decoding_message_size(16 * 1024 * 1024)
}

fn for_user<T>(caller: &Caller, msg: T) -> tonic::Request<T> {
    argos_common::grpc::with_principal(tonic::Request::new(msg), Some(&caller.user.name), None)
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecBody {
    #[serde(default)]
    command: String,
    #[serde(default)]
    argv: Vec<String>,
    #[serde(default)]
    cwd: String,
    #[serde(default)]
    profile: String,
    /// Milliseconds; 0: no limit of the caller's own (a profile that requires a clock
    /// applies its maximum).
    timeout_ms: Option<u64>,
    #[serde(default)]
    stdin: String,
    #[serde(default)]
    env: std::collections::HashMap<String, String>,
    /// `POST /api/shell/stream` only: resume following this execution (with
    /// `Last-Event-ID`) instead of starting one.
    resume: Option<String>,
}

impl ExecBody {
    fn run_request(self) -> pb::RunRequest {
        pb::RunRequest {
            argv: self.argv,
            command: self.command,
            cwd: self.cwd,
            env: self.env,
            profile: self.profile,
            timeout_ms: self.timeout_ms,
            stdin: self.stdin.into_bytes(),
        }
    }
}

#[derive(Serialize)]
pub struct Stream {
    text: String,
    /// Only when truncated: the last bytes.
    tail: Option<String>,
    total_bytes: u64,
    truncated: bool,
}

fn stream(o: Option<pb::Output>) -> Stream {
    let o = o.unwrap_or_default();
    Stream {
        text: String::from_utf8_lossy(&o.head).into_owned(),
        tail: o
            .truncated
            .then(|| String::from_utf8_lossy(&o.tail).into_owned()),
        total_bytes: o.total_bytes,
        truncated: o.truncated,
    }
}

/// An execution with its captured output, as the API shows it.
fn with_output(
    e: Option<pb::Execution>,
    stdout: Option<pb::Output>,
    stderr: Option<pb::Output>,
) -> serde_json::Value {
    json!({
        "execution": e.as_ref().map(crate::views::execution),
        "stdout": stream(stdout),
        "stderr": stream(stderr),
    })
}

#[utoipa::path(post, path = "/api/shell/exec", tag = "executions", description = "Runs a command through execd and answers with its result and capped output (admins; tokens need `exec`).", request_body = ExecBody,  responses((status = 200, description = "`{\"execution\", \"stdout\", \"stderr\"}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 413, description = "body too large", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn shell_exec(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<ExecBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    caller.admin()?;
    caller.scoped("exec")?;
    if b.resume.is_some() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            "resume: only POST /api/shell/stream resumes",
        ));
    }
    let r = exec_client(&api)
        .run(for_user(&caller, b.run_request()))
        .await
        .map_err(from_status)?
        .into_inner();
    Ok(Json(with_output(r.execution, r.stdout, r.stderr)))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    status: Option<String>,
    page_token: Option<String>,
    limit: Option<u32>,
}

#[utoipa::path(get, path = "/api/executions", tag = "executions", description = "The executions ledger, newest first (admins; tokens need `read`).",  params(ListQuery), responses((status = 200, description = "`{\"executions\": [...], \"next_page_token\"}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn executions(
    State(api): State<Shared>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    caller.admin()?;
    caller.scoped("read")?;
    let status = match q.status.as_deref() {
        None | Some("") => 0,
        Some(s) => crate::views::parse_status(s).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                format!("status: unknown status {s:?}"),
            )
        })?,
    };
    let r = exec_client(&api)
        .list(for_user(
            &caller,
            pb::ListRequest {
                status,
                page_token: q.page_token.unwrap_or_default(),
                page_size: q.limit.unwrap_or(50),
                ..Default::default()
            },
        ))
        .await
        .map_err(from_status)?
        .into_inner();
    Ok(Json(json!({
        "executions": r.executions.iter().map(crate::views::execution).collect::<Vec<_>>(),
        "next_page_token": r.next_page_token,
    })))
}

#[utoipa::path(get, path = "/api/executions/{id}", tag = "executions", description = "One execution with its captured output and containment report.",  params(("id" = String, Path, description = "execution id (UUID v7)")), responses((status = 200, description = "`{\"execution\", \"stdout\", \"stderr\"}`"), (status = 404, description = "no such execution", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn execution(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    caller.admin()?;
    caller.scoped("read")?;
    let r = exec_client(&api)
        .get(for_user(
            &caller,
            pb::GetRequest {
                id,
                include_output: true,
            },
        ))
        .await
        .map_err(from_status)?
        .into_inner();
    Ok(Json(with_output(r.execution, r.stdout, r.stderr)))
}

#[utoipa::path(post, path = "/api/executions/{id}/kill", tag = "executions", description = "Kills a running execution (verified identity; TERM, grace, KILL).",  params(("id" = String, Path, description = "execution id (UUID v7)")), responses((status = 200, description = "`{\"outcome\", \"execution\"}`"), (status = 404, description = "no such execution", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn kill(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    caller.admin()?;
    caller.scoped("exec")?;
    let r = exec_client(&api)
        .kill(for_user(&caller, pb::KillRequest { id }))
        .await
        .map_err(from_status)?
        .into_inner();
    Ok(Json(json!({
        "outcome": r.outcome,
        "execution": r.execution.as_ref().map(crate::views::execution),
    })))
}

// ---- streaming ---------------------------------------------------------------------

/// Live streams of executions started by `POST /api/shell/stream`: when a stream's client
/// goes away, its workload is killed unless a client resumes within the grace period.
#[derive(Default)]
pub struct Streams {
    /// Per execution: how many times a client attached (a resume bumps it).
    attached: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

impl Streams {
    fn attach(&self, id: &str) -> u64 {
        let mut m = self.attached.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(id.to_string()).or_insert(0);
        *n += 1;
        *n
    }

    fn still(&self, id: &str, generation: u64) -> bool {
        self.attached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            == Some(&generation)
    }

    fn forget(&self, id: &str) {
        self.attached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }
}

/// `Last-Event-ID` as this API writes it: `<stdout offset>:<stderr offset>`.
fn offsets(headers: &HeaderMap) -> Result<[u64; 2], ApiError> {
    let Some(v) = headers.get("last-event-id") else {
        return Ok([0, 0]);
    };
    let bad = || {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            "Last-Event-ID: expected `<stdout offset>:<stderr offset>`",
        )
    };
    let s = v.to_str().map_err(|_| bad())?;
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    Ok([a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?])
}

type SseStream = axum::response::Sse<
    axum::response::sse::KeepAliveStream<
        tokio_stream::wrappers::ReceiverStream<
            Result<axum::response::sse::Event, std::convert::Infallible>,
        >,
    >,
>;

/// Runs a command (or resumes one) and streams its output as server-sent events:
/// `started` (the execution), `stdout` / `stderr` (`{"offset","text"}`, with the event id
/// `<stdout offset>:<stderr offset>` after it), then `exit` (the execution) or `error`.
#[utoipa::path(post, path = "/api/shell/stream", tag = "executions", description = "Runs a command (or resumes one, with `resume` and Last-Event-ID) as server-sent events: started, stdout, stderr (id `<stdout offset>:<stderr offset>`), exit. A client that leaves has the command killed after `gateway.stream_resume_s`.", request_body = ExecBody,  responses((status = 200, description = "text/event-stream"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn shell_stream(
    State(api): State<Shared>,
    caller: Caller,
    headers: HeaderMap,
    Body(b): Body<ExecBody>,
) -> Result<SseStream, ApiError> {
    caller.admin()?;
    caller.scoped("exec")?;
    let mut client = exec_client(&api);
    let (id, from, started) = match b.resume.clone() {
        Some(id) => {
            let at = offsets(&headers)?;
            let e = client
                .get(for_user(
                    &caller,
                    pb::GetRequest {
                        id: id.clone(),
                        include_output: false,
                    },
                ))
                .await
                .map_err(from_status)?
                .into_inner()
                .execution;
            (id, at, e)
        }
        None => {
            let e = client
                .start(for_user(&caller, b.run_request()))
                .await
                .map_err(from_status)?
                .into_inner()
                .execution;
            let id = e.as_ref().map(|e| e.id.clone()).unwrap_or_default();
            (id, [0, 0], e)
        }
    };
    let generation = api.streams.attach(&id);
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let follow = for_user(
        &caller,
        pb::FollowRequest {
            id: id.clone(),
            stdout_offset: from[0],
            stderr_offset: from[1],
        },
    );
    tokio::spawn(relay(api.clone(), id, generation, started, follow, tx));
    Ok(
        axum::response::Sse::new(tokio_stream::wrappers::ReceiverStream::new(rx))
            .keep_alive(axum::response::sse::KeepAlive::new().interval(Duration::from_secs(15))),
    )
}

/// How much of `b` to send now: all of it, unless it ends inside a UTF-8 sequence that may
/// complete with the next chunk (at most 3 bytes wait). Invalid bytes elsewhere go as
/// U+FFFD.
fn complete_utf8(b: &[u8]) -> usize {
    match std::str::from_utf8(b) {
        Ok(_) => b.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => {
            // Invalid somewhere: still hold back an incomplete tail.
            let tail = b.len().saturating_sub(3);
            (tail..b.len())
                .find(|&i| {
                    b[i] >= 0xC0
                        && std::str::from_utf8(&b[i..]).is_err_and(|e| e.error_len().is_none())
                })
                .unwrap_or(b.len())
        }
    }
}

/// `{"offset":N,"text":"…"}` for a chunk of output, written straight from its bytes (a
/// stream's hot path: no JSON value in between).
fn chunk_json(offset: u64, data: &[u8]) -> String {
    let text = match std::str::from_utf8(data) {
        Ok(t) => std::borrow::Cow::Borrowed(t),
        Err(_) => String::from_utf8_lossy(data),
    };
    let mut out = Vec::with_capacity(text.len() + 40);
    out.extend_from_slice(b"{\"offset\":");
    out.extend_from_slice(offset.to_string().as_bytes());
    out.extend_from_slice(b",\"text\":");
    serde_json::to_writer(&mut out, &*text).expect("writing to a Vec");
    out.push(b'}');
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// Follows the execution into the client's event stream; if the client goes away before
/// the end, kills the workload after the grace period unless a client resumed it.
async fn relay(
    api: Shared,
    id: String,
    generation: u64,
    started: Option<pb::Execution>,
    follow: tonic::Request<pb::FollowRequest>,
    tx: tokio::sync::mpsc::Sender<Result<axum::response::sse::Event, std::convert::Infallible>>,
) {
    use axum::response::sse::Event;
    let json_event =
        |name: &str, v: serde_json::Value| Ok(Event::default().event(name).data(v.to_string()));
    let mut at = [
        follow.get_ref().stdout_offset,
        follow.get_ref().stderr_offset,
    ];
    // The last bytes of a chunk that end mid-character wait for the next chunk, so a
    // character split between chunks arrives whole (ids stay on character boundaries).
    let mut carry: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut ended = false;
    let mut gone = tx
        .send(json_event(
            "started",
            json!({"execution": started.as_ref().map(crate::views::execution)}),
        ))
        .await
        .is_err();
    if !gone {
        match exec_client(&api).follow(follow).await {
            Err(s) => {
                let e = from_status(s);
                let _ = tx
                    .send(json_event(
                        "error",
                        json!({"code": e.code, "message": e.message}),
                    ))
                    .await;
                ended = true;
            }
            Ok(resp) => {
                let mut events = resp.into_inner();
                loop {
                    let next = tokio::select! {
                        m = events.message() => m,
                        () = tx.closed() => { gone = true; break; }
                    };
                    let event = match next {
                        Ok(Some(pb::FollowEvent {
                            event: Some(pb::follow_event::Event::Chunk(c)),
                        })) => {
                            let i = usize::from(c.stream == pb::OutputStream::Stderr as i32);
                            let start = c.offset - carry[i].len() as u64;
                            let mut bytes = std::mem::take(&mut carry[i]);
                            bytes.extend_from_slice(&c.data);
                            let whole = complete_utf8(&bytes);
                            carry[i] = bytes.split_off(whole);
                            if bytes.is_empty() {
                                continue;
                            }
                            at[i] = start + bytes.len() as u64;
                            Ok(Event::default()
                                .event(["stdout", "stderr"][i])
                                .data(chunk_json(start, &bytes))
                                .id(format!("{}:{}", at[0], at[1])))
                        }
                        Ok(Some(pb::FollowEvent {
                            event: Some(pb::follow_event::Event::Exit(e)),
                        })) => {
                            ended = true;
                            // Bytes still waiting for the rest of a character never get it.
                            for i in 0..2 {
                                if carry[i].is_empty() {
                                    continue;
                                }
                                let rest = std::mem::take(&mut carry[i]);
                                let start = at[i];
                                at[i] += rest.len() as u64;
                                let ev = Event::default()
                                    .event(["stdout", "stderr"][i])
                                    .data(chunk_json(start, &rest))
                                    .id(format!("{}:{}", at[0], at[1]));
                                if tx.send(Ok(ev)).await.is_err() {
                                    break;
                                }
                            }
                            json_event("exit", json!({"execution": crate::views::execution(&e)}))
                        }
                        Ok(_) => {
                            ended = true;
                            break;
                        }
                        Err(s) => {
                            ended = true;
                            let e = from_status(s);
                            json_event("error", json!({"code": e.code, "message": e.message}))
                        }
                    };
                    if tx.send(event).await.is_err() {
                        gone = !ended;
                        break;
                    }
                    if ended {
                        break;
                    }
                }
            }
        }
    }
    if !gone || ended {
        if api.streams.still(&id, generation) {
            api.streams.forget(&id);
        }
        return;
    }
    // The client left mid-run: give it a moment to come back, then end the workload.
    tokio::time::sleep(api.resume_grace).await;
    if !api.streams.still(&id, generation) {
        return; // resumed (or another stream took over)
    }
    api.streams.forget(&id);
    let killed = exec_client(&api)
        .kill(tonic::Request::new(pb::KillRequest { id: id.clone() }))
        .await;
    match killed {
        Ok(r) => {
            tracing::info!(id, outcome = %r.get_ref().outcome, "stream client gone: workload killed")
        }
        Err(e) => tracing::warn!(id, error = %e, "stream client gone: kill failed"),
    }
}

// ---- events ------------------------------------------------------------------------

/// A change the gateway relays to `/api/events` subscribers.
#[derive(Debug, Clone)]
pub enum Change {
    Execution(Arc<pb::Execution>),
    /// Changes were dropped (a slow subscriber, or execd's stream lagged): re-list.
    Missed(u64),
}

/// Keeps one `Watch` stream on execd open for the life of the gateway (reconnecting with
/// back-off) and fans its changes out to every `/api/events` subscriber.
pub async fn watch_execd(api: Shared) {
    let mut backoff = Duration::from_millis(200);
    loop {
        match exec_client(&api)
            .watch(tonic::Request::new(pb::WatchRequest {}))
            .await
        {
            Ok(resp) => {
                backoff = Duration::from_millis(200);
                let mut stream = resp.into_inner();
                while let Ok(Some(ev)) = stream.message().await {
                    let change = match ev.event {
                        Some(pb::watch_event::Event::Execution(e)) => {
                            Change::Execution(Arc::new(e))
                        }
                        Some(pb::watch_event::Event::Missed(n)) => Change::Missed(n),
                        None => continue,
                    };
                    let _ = api.changes.send(change);
                }
                // The stream ended (execd restarted): subscribers may have missed changes.
                let _ = api.changes.send(Change::Missed(0));
            }
            Err(e) => tracing::debug!(error = %e, "watching execd"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Server-sent events of the state changes this caller may see: `execution` (an
/// execution started or ended; admins see all, others their own) and `missed` (some were
/// dropped: re-list).
#[utoipa::path(get, path = "/api/events", tag = "events", description = "Server-sent events of execution changes the caller may see (admins all, users their own); `missed` when some were dropped.",   responses((status = 200, description = "text/event-stream"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn events(State(api): State<Shared>, caller: Caller) -> Result<SseStream, ApiError> {
    caller.scoped("read")?;
    let mut changes = api.changes.subscribe();
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        use axum::response::sse::Event;
        let _ = tx
            .send(Ok(Event::default().event("ready").data("{}")))
            .await;
        loop {
            let event = match changes.recv().await {
                Ok(Change::Execution(e)) => {
                    if !caller.is_admin() && e.principal != caller.user.name {
                        continue;
                    }
                    Event::default()
                        .event("execution")
                        .data(json!({"execution": crate::views::execution(&e)}).to_string())
                }
                Ok(Change::Missed(n)) => Event::default()
                    .event("missed")
                    .data(json!({"count": n}).to_string()),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => Event::default()
                    .event("missed")
                    .data(json!({"count": n}).to_string()),
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
    });
    Ok(
        axum::response::Sse::new(tokio_stream::wrappers::ReceiverStream::new(rx))
            .keep_alive(axum::response::sse::KeepAlive::new().interval(Duration::from_secs(15))),
    )
}
