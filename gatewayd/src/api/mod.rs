//! The authenticated HTTP API: accounts, sessions, tokens, shell execution through execd
//! and the executions ledger. Errors are `{"error":{"code","message"}}` with stable codes;
//! a 400 names the bad field.
//!
//! Who may call what is one table, `policy::RULES`, applied by one middleware
//! (`policy::authorize`) before any handler runs and published as each operation's
//! `x-argos-access` in `/api/openapi.json`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use argos_exec_client::{ErrorKind, ExecClient, ExecError};
use argos_proto::exec::v1 as pb;
use axum::Json;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::accounts::{AccountError, Accounts, Role, User};
use crate::throttle::Throttle;

mod accounts;
mod agents;
mod approvals;
mod auth;
mod classify;
mod constraints;
mod deliveries;
mod events;
mod exec;
mod host;
mod jobs;
mod mcp;
mod mcp_body;
mod policy;
mod tasks;
mod terminals;

pub use accounts::*;
pub use agents::*;
pub use approvals::*;
pub use auth::*;
pub use classify::*;
pub use deliveries::*;
pub use events::*;
pub use exec::*;
pub use host::*;
pub use jobs::*;
pub use mcp::*;
pub use mcp_body::*;
pub use policy::authorize;
pub use tasks::*;
pub use terminals::*;

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
    /// Host names answered besides IP addresses and `localhost` (`host` or `host:port`,
    /// lowercase), the allowed origins' hosts among them.
    pub allowed_hosts: Vec<String>,
}

/// What the API handlers share.
pub struct Api {
    pub accounts: Accounts,
    pub throttle: Throttle,
    pub exec: ExecClient,
    pub web: WebConfig,
    pub streams: Streams,
    /// Execution changes from execd's `Watch`, for `/api/events`.
    pub changes: tokio::sync::broadcast::Sender<Change>,
    /// How long a streamed workload outlives its client before it is killed.
    pub resume_grace: Duration,
    /// The gateway's audit trail (logins, accounts, tokens, decisions), in its database.
    pub audit: Arc<argos_store::audit::Audit>,
    /// Wakes the audit anchoring (`anchor::run`) soon after each record the gateway writes…
    pub anchor_now: tokio::sync::Notify,
    /// …and at once when execd asks (a launch as root waits for it).
    pub anchor_asked: tokio::sync::Notify,
    /// Web terminals' WebSocket tickets, and how long one is valid.
    pub tickets: Tickets,
    pub ticket_ttl: Duration,
    /// The gateway's secret key (`gateway.key` in its state dir): device cookies.
    pub key: Arc<argos_store::key::Key>,
    /// Event streams open per user (`quota.event_streams`).
    pub event_streams: events::PerUser,
    /// `/mcp` subscriptions per user: `subscriptions/listen` streams and
    /// `resources/subscribe` watches (`quota.event_streams`).
    pub mcp_streams: events::PerUser,
    /// `http_get` calls in flight per user (2).
    pub http_gets: events::PerUser,
    /// `/mcp`'s sessions (2025-11-25): whose each is, their bounds per token and user,
    /// their expiry.
    pub mcp_sessions: crate::agent_mcp::Sessions,
    /// `/mcp`'s request rates per token and per user.
    pub mcp_rate: crate::agent_mcp::Rate,
    /// The host's last 10 minutes, for the dashboard's charts (`host::sample_host`).
    pub host_history: HostHistory,
    /// mcpd (configured MCP servers, their tools and calls).
    pub mcp: argos_proto::mcp::v1::mcp_client::McpClient<tonic::transport::Channel>,
    /// Held while an MCP server's configuration changes: the registration with execd and
    /// the configuration in mcpd change together, one server at a time.
    pub mcp_config: tokio::sync::Mutex<()>,
    /// Hosts `http_get` may reach though not public (`gateway.http_get_allow`).
    pub http_get_allow: Vec<String>,
    /// Which tools each principal's agent gets at `/mcp` (an admin setting).
    pub mcp_access: std::sync::RwLock<crate::agent_mcp::access::Access>,
    /// The record of `/mcp`'s tool calls.
    pub mcp_activity: crate::agent_mcp::activity::Log,
    /// jobd (background jobs).
    pub jobs: argos_proto::job::v1::job_client::JobClient<tonic::transport::Channel>,
    /// Prometheus metrics (`/metrics`).
    pub metrics: crate::metrics::Metrics,
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
        host,
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
        classify,
        events,
        agent_run,
        approvals,
        approval,
        decide,
        audit,
        audit_verify,
        open_terminal,
        terminals,
        close_terminal,
        ticket,
        mcp_servers,
        add_mcp_server,
        mcp_server,
        update_mcp_server,
        remove_mcp_server,
        enable_mcp_server,
        disable_mcp_server,
        reconnect_mcp_server,
        mcp_server_log,
        set_disabled_tools,
        authorize_mcp_server,
        mcp_oauth_callback,
        mcp_tools,
        accept_mcp_tool,
        call_mcp_tool,
        mcp_access,
        set_role_access,
        set_user_access,
        remove_user_access,
        mcp_activity,
        create_job,
        jobs,
        job,
        cancel_job,
        relaunch_job,
        job_output,
        create_task,
        tasks,
        task,
        update_task,
        delete_task,
        run_task,
        pause_task,
        resume_task,
        approve_task,
        preview_schedule,
        set_task_webhook,
        delete_task_webhook,
        delivery_secret,
        deliveries,
        delivery,
        redeliver,
        crate::http::status,
        crate::metrics::metrics_doc
    ),
    components(schemas(
        ErrorBody,
        ErrorDetail,
        SetupBody,
        LoginBody,
        PasswordBody,
        NewUser,
        NewToken,
        ExecBody,
        ClassifyBody,
        AgentRunBody,
        DecisionBody,
        TerminalBody,
        NewMcpServer,
        McpServerBody,
        McpStdio,
        McpRemote,
        McpValue,
        DisabledToolsBody,
        ToolCallBody,
        crate::agent_mcp::access::Grant,
        crate::agent_mcp::access::RunPlace,
        crate::agent_mcp::access::Brokered
    ))
)]
pub struct ApiDoc;

pub async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], {
        let mut doc = <ApiDoc as utoipa::OpenApi>::openapi();
        policy::document(&mut doc);
        let mut doc = serde_json::to_value(&doc).unwrap_or_default();
        constraints::document(&mut doc);
        serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into())
    })
}

/// An error as a client sees it.
#[derive(Debug)]
pub struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) retry_after: Option<Duration>,
    /// The methods a route takes (a 405's `Allow`).
    pub(crate) allow: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
            allow: None,
        }
    }

    fn method_not_allowed(allowed: &[&str]) -> ApiError {
        let allow = allowed.join(", ");
        ApiError {
            allow: Some(allow.clone()),
            ..ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                format!("this route takes {allow}"),
            )
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

    /// The gateway's own failure: logged, and answered without detail — unless it is one
    /// of the disk's faults, said as such (503: nothing was recorded or done).
    fn internal<E: std::fmt::Display + 'static>(detail: E) -> ApiError {
        tracing::error!(error = %detail, "internal error");
        if let Some(fault) = disk_fault(&detail) {
            return ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                fault.say("the gateway"),
            );
        }
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
        if let Some(a) = self.allow
            && let Ok(v) = HeaderValue::from_str(&a)
        {
            r.headers_mut().insert(header::ALLOW, v);
        }
        r
    }
}

/// The disk's fault a failure of the gateway's database shows, whichever of its error
/// types carries it.
fn disk_fault(e: &dyn std::any::Any) -> Option<argos_store::Fault> {
    if let Some(e) = e.downcast_ref::<sqlx::Error>() {
        return argos_store::Fault::of(e);
    }
    if let Some(AccountError::Store(e)) = e.downcast_ref::<AccountError>() {
        return argos_store::Fault::of(e);
    }
    let e = e.downcast_ref::<anyhow::Error>()?;
    e.chain()
        .find_map(|c| c.downcast_ref::<sqlx::Error>())
        .and_then(argos_store::Fault::of)
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

/// The one answer for an id the caller may not see, whether nothing has it or it is
/// another user's: the same status and bytes but for the id, so no answer tells whether
/// another user's execution, job, task or delivery exists. Every edge that hides what is
/// not the caller's answers this, for both cases.
pub(crate) fn unknown(kind: &str, id: &str) -> ApiError {
    ApiError::not_found(format!("no {kind} {id}"))
}

/// A daemon's "not found" for `id`, answered as [`unknown`] (whatever the daemon's own
/// words), anything else as it was.
pub(crate) fn hide_missing<'a>(
    kind: &'a str,
    id: &'a str,
) -> impl FnOnce(ApiError) -> ApiError + 'a {
    move |e| {
        if e.status == StatusCode::NOT_FOUND {
            unknown(kind, id)
        } else {
            e
        }
    }
}

/// execd's refusals as the API says them; execd's own failures are logged, not shown.
pub(crate) fn from_exec(e: ExecError) -> ApiError {
    let message = e.message.clone();
    from_kind(e.kind, message).unwrap_or_else(|| ApiError::internal(e))
}

/// A daemon's refusal as the API says it; `None` for its own failure (an internal error,
/// logged and not shown).
pub(crate) fn from_kind(kind: ErrorKind, message: impl Into<String>) -> Option<ApiError> {
    let (status, code) = match kind {
        ErrorKind::InvalidArgument => (StatusCode::BAD_REQUEST, "invalid_argument"),
        ErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found"),
        ErrorKind::Conflict | ErrorKind::Raced => (StatusCode::CONFLICT, "conflict"),
        ErrorKind::PermissionDenied => (StatusCode::FORBIDDEN, "forbidden"),
        ErrorKind::Exhausted => (StatusCode::TOO_MANY_REQUESTS, "resource_exhausted"),
        ErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        ErrorKind::DataLoss => (StatusCode::GONE, "data_loss"),
        ErrorKind::Cancelled | ErrorKind::Internal => return None,
    };
    Some(ApiError::new(status, code, message))
}

/// A JSON body, with a 400 that says what is wrong instead of axum's plain text.
/// A whole number, also when a client writes it as `1.0` (JSON has one number type, and a
/// schema's `integer` admits `1.0`); anything else is a bad field.
pub fn whole<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    use serde::Deserialize as _;
    let n = Option::<serde_json::Number>::deserialize(d)?;
    let Some(n) = n else { return Ok(None) };
    let v = n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= 9_007_199_254_740_992.0)
            .map(|f| f as u64)
    });
    v.and_then(|v| T::try_from(v).ok())
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("{n} is not a whole number in range")))
}

/// A query string, whose refusal is a JSON error like every other (axum's own answers
/// in plain text).
pub struct Query<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for Query<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(v)| Query(v))
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", e.body_text()))
    }
}

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

/// A bad field: 400, the message starting with the field's name.
pub(crate) fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
}

/// A body's `place`: absent is auto.
pub(crate) fn place_field(place: Option<&str>) -> Result<pb::Place, ApiError> {
    match place {
        None => Ok(pb::Place::Auto),
        Some(w) => crate::views::parse_place(w).ok_or_else(|| {
            invalid(format!(
                "place: {w:?} is not a place (auto, sandbox, inspect or host)"
            ))
        }),
    }
}

/// A body's `max_runtime_s` in milliseconds: absent is 0 (jobd's default).
pub(crate) fn max_runtime_ms(s: Option<u64>) -> Result<u64, ApiError> {
    match s {
        None => Ok(0),
        Some(0) => Err(invalid("max_runtime_s: at least 1")),
        Some(s) if s > 30 * 24 * 3600 => Err(invalid("max_runtime_s: at most 2592000 (30 days)")),
        Some(s) => Ok(s * 1000),
    }
}

/// A body's risk estimate: absent is none.
pub(crate) fn declared_risk(risk: Option<&str>) -> Result<i32, ApiError> {
    match risk {
        None | Some("") => Ok(pb::RiskClass::Unspecified as i32),
        Some(w) => crate::views::parse_risk_class(w)
            .map(|c| c as i32)
            .ok_or_else(|| {
                invalid(format!(
                    "risk: {w:?} is not read_only, reversible_low, config_mutation or destructive"
                ))
            }),
    }
}

pub(crate) fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("request bodies are limited to {BODY_LIMIT} bytes"),
    )
}
