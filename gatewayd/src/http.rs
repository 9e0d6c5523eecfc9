//! The HTTP edge: a status page and `/api/status`. Errors reaching a client are stable
//! JSON; detail goes to the log.

use std::sync::Arc;
use std::time::Duration;

use argos_common::daemon::{Context, DaemonIdentity, role_from_proto};
use argos_common::grpc::Daemon;
use argos_common::peer::PeerRole;
use argos_proto::common::v1::{DaemonStatus, StatusRequest};
use axum::Json;
use axum::extract::State as AxState;
use axum::response::IntoResponse;
use axum::routing::get;
use serde::Serialize;
use tonic::transport::Channel;

use crate::api;

/// What the HTTP handlers share.
#[derive(Clone)]
pub struct State {
    identity: Arc<DaemonIdentity>,
    exec: Channel,
    mcp: Channel,
    job: Channel,
}

impl State {
    pub fn new(ctx: &Context) -> anyhow::Result<State> {
        use argos_common::connect::{ServerUids, unix_channel};
        use argos_common::grpc::Daemon;
        // Each socket must be served by the uid its daemon runs as (SO_PEERCRED, checked
        // before the first byte): not by another daemon that took its name.
        let ch = |d: Daemon| {
            unix_channel(
                &ctx.config.socket_path(d.name()),
                ServerUids::for_daemon(&ctx.peers, d),
            )
        };
        Ok(State {
            identity: ctx.identity.clone(),
            exec: ch(Daemon::Execd),
            mcp: ch(Daemon::Mcpd),
            job: ch(Daemon::Jobd),
        })
    }

    pub fn exec_channel(&self) -> Channel {
        self.exec.clone()
    }

    pub fn mcp_channel(&self) -> Channel {
        self.mcp.clone()
    }

    pub fn job_channel(&self) -> Channel {
        self.job.clone()
    }
}

pub fn router(state: State, api: api::Shared) -> axum::Router {
    use axum::routing::{delete, post};
    let authed = axum::Router::new()
        .route("/api/setup", get(api::setup_needed).post(api::setup))
        .route("/api/login", post(api::login))
        .route("/api/logout", post(api::logout))
        .route("/api/me", get(api::me))
        .route("/api/me/password", post(api::change_password))
        .route("/api/users", get(api::users).post(api::create_user))
        .route("/api/users/{name}", delete(api::delete_user))
        .route("/api/tokens", get(api::tokens).post(api::create_token))
        .route("/api/tokens/{id}", delete(api::revoke_token))
        .route("/api/shell/exec", post(api::shell_exec))
        .route("/api/shell/stream", post(api::shell_stream))
        .route("/api/events", get(api::events))
        .route("/api/executions", get(api::executions))
        .route("/api/executions/{id}", get(api::execution))
        .route("/api/executions/{id}/kill", post(api::kill))
        .route("/api/classify", post(api::classify))
        .route("/api/host", get(api::host))
        .route("/api/agent/run", post(api::agent_run))
        .route("/api/approvals", get(api::approvals))
        .route("/api/approvals/{id}", get(api::approval))
        .route("/api/approvals/{id}/decision", post(api::decide))
        .route("/api/audit", get(api::audit))
        .route("/api/audit/verify", get(api::audit_verify))
        .route(
            "/api/terminals",
            get(api::terminals).post(api::open_terminal),
        )
        .route("/api/terminals/{id}", delete(api::close_terminal))
        .route("/api/terminals/{id}/ticket", post(api::ticket))
        .route("/api/terminals/{id}/ws", get(api::terminal_ws))
        .route(
            "/api/mcp/servers",
            get(api::mcp_servers).post(api::add_mcp_server),
        )
        .route(
            "/api/mcp/servers/{server}",
            get(api::mcp_server)
                .put(api::update_mcp_server)
                .delete(api::remove_mcp_server),
        )
        .route(
            "/api/mcp/servers/{server}/enable",
            post(api::enable_mcp_server),
        )
        .route(
            "/api/mcp/servers/{server}/disable",
            post(api::disable_mcp_server),
        )
        .route(
            "/api/mcp/servers/{server}/reconnect",
            post(api::reconnect_mcp_server),
        )
        .route("/api/mcp/servers/{server}/log", get(api::mcp_server_log))
        .route(
            "/api/mcp/servers/{server}/disabled_tools",
            axum::routing::put(api::set_disabled_tools),
        )
        .route(
            "/api/mcp/servers/{server}/authorize",
            post(api::authorize_mcp_server),
        )
        .route("/api/mcp/oauth/callback", get(api::mcp_oauth_callback))
        .route("/api/mcp/tools", get(api::mcp_tools))
        .route("/api/mcp/tools/{tool}/accept", post(api::accept_mcp_tool))
        .route("/api/mcp/tools/{tool}/call", post(api::call_mcp_tool))
        .route("/api/mcp/access", get(api::mcp_access))
        .route(
            "/api/mcp/access/roles/{role}",
            axum::routing::put(api::set_role_access),
        )
        .route(
            "/api/mcp/access/users/{name}",
            axum::routing::put(api::set_user_access).delete(api::remove_user_access),
        )
        .route("/api/mcp/activity", get(api::mcp_activity))
        .route("/api/jobs", get(api::jobs).post(api::create_job))
        .route("/api/jobs/{id}", get(api::job))
        .route("/api/jobs/{id}/cancel", post(api::cancel_job))
        .route("/api/jobs/{id}/relaunch", post(api::relaunch_job))
        .route("/api/jobs/{id}/output", get(api::job_output))
        .route("/api/tasks", get(api::tasks).post(api::create_task))
        .route("/api/tasks/preview", get(api::preview_schedule))
        .route(
            "/api/tasks/{id}",
            get(api::task)
                .put(api::update_task)
                .delete(api::delete_task),
        )
        .route("/api/tasks/{id}/run", post(api::run_task))
        .route("/api/tasks/{id}/pause", post(api::pause_task))
        .route("/api/tasks/{id}/resume", post(api::resume_task))
        .route("/api/tasks/{id}/approve", post(api::approve_task))
        .route("/api/deliveries", get(api::deliveries))
        .route("/api/deliveries/secret", post(api::delivery_secret))
        .route("/api/deliveries/{id}", get(api::delivery))
        .route("/api/deliveries/{id}/redeliver", post(api::redeliver))
        .route(
            "/api/tasks/{id}/webhook",
            post(api::set_task_webhook).delete(api::delete_task_webhook),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            api.clone(),
            api::authorize,
        ))
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            api::authenticate,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(api::BODY_LIMIT))
        .with_state(api.clone());
    // Each daemon's status, and Prometheus metrics for an admin (a token with `read`).
    let status_routes = axum::Router::new()
        .route("/api/status", get(status))
        .route(
            "/metrics",
            get({
                let (api, state) = (api.clone(), state.clone());
                move || crate::metrics::scrape(api.clone(), state.clone())
            }),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            api.clone(),
            api::authorize,
        ))
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            api::authenticate,
        ))
        .with_state(state.clone());
    // Agents' MCP endpoint: an API token with the `mcp` scope (checked by the guard, after
    // `authenticate` resolved it; a 401 carries the MCP authorization spec's challenge).
    let mcp = axum::Router::new()
        .nest_service("/mcp", crate::agent_mcp::service(api.clone()))
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            crate::agent_mcp::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            api::authenticate,
        ))
        .layer(axum::middleware::from_fn(crate::agent_mcp::challenge))
        .layer(axum::extract::DefaultBodyLimit::max(api::BODY_LIMIT));
    let ui = {
        let state = state.clone();
        move || page(state.clone())
    };
    axum::Router::new()
        .route("/", get(ui.clone()))
        .route("/setup", get(ui))
        .route(
            "/favicon.ico",
            get(|| async { axum::http::StatusCode::NO_CONTENT }),
        )
        .route("/api/openapi.json", get(api::openapi))
        .route("/assets/{file}", get(asset))
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(crate::agent_mcp::resource_metadata),
        )
        // Webhook deliveries: their secret is the credential (checked by jobd), so neither
        // the API's sessions and tokens nor its cross-site rule apply.
        .route(
            "/hooks/{task}",
            axum::routing::post(api::hook).with_state(api.clone()),
        )
        .merge(mcp)
        .merge(authed)
        .merge(status_routes)
        .fallback(|| async {
            (
                axum::http::StatusCode::NOT_FOUND,
                Json(
                    serde_json::json!({"error": {"code": "not_found", "message": "no such route"}}),
                ),
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            crate::metrics::record,
        ))
        .layer(axum::middleware::from_fn_with_state(api, api::known_host))
        .layer(axum::middleware::from_fn(no_store))
        .with_state(state)
}

/// An answer that holds no one's data (the UI's page and its built assets): the
/// `Cache-Control` it sets stands.
#[derive(Debug, Clone, Copy)]
struct Public;

/// Every answer but a [`Public`] one is `Cache-Control: no-store`, whatever its handler
/// set (rmcp's event streams say `no-cache`): the API's and `/mcp`'s answers are for the
/// caller who asked (their data, a new session's cookie, a token shown once), so no
/// browser cache or proxy keeps a copy. It is the outermost layer, so refusals (401, 421)
/// and the fallback carry it too.
async fn no_store(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let mut r = next.run(req).await;
    if r.extensions().get::<Public>().is_none() {
        r.headers_mut().insert(
            axum::http::header::CACHE_CONTROL,
            axum::http::HeaderValue::from_static("no-store"),
        );
    }
    r
}

/// One daemon's status as the gateway presents it.
#[derive(Debug, Serialize)]
pub struct DaemonView {
    daemon: String,
    healthy: bool,
    version: String,
    pid: u32,
    uid: u32,
    started_at_unix_ms: i64,
    /// The role that daemon resolved for the gateway (proof of the peer table in force).
    sees_gateway_as: Vec<&'static str>,
    insecure_shared_uid: bool,
    /// What it cannot do now, in words (`storage: the disk … is full …`); empty while it
    /// works fully.
    degraded: Vec<String>,
    error: Option<&'static str>,
}

impl DaemonView {
    fn from_status(s: DaemonStatus) -> DaemonView {
        let roles = s
            .peer_roles
            .iter()
            .filter_map(|r| role_from_proto(*r).map(PeerRole::as_str))
            .collect();
        DaemonView {
            daemon: s.daemon,
            healthy: true,
            version: s.version,
            pid: s.pid,
            uid: s.uid,
            started_at_unix_ms: s.started_at_unix_ms,
            sees_gateway_as: roles,
            insecure_shared_uid: s.insecure_shared_uid,
            degraded: s.degraded,
            error: None,
        }
    }

    fn unreachable(daemon: &str, error: &'static str) -> DaemonView {
        DaemonView {
            daemon: daemon.to_string(),
            healthy: false,
            version: String::new(),
            pid: 0,
            uid: 0,
            started_at_unix_ms: 0,
            sees_gateway_as: Vec::new(),
            insecure_shared_uid: false,
            degraded: Vec::new(),
            error: Some(error),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct StackView {
    insecure_shared_uid: bool,
    daemons: Vec<DaemonView>,
}

impl StackView {
    /// Each daemon, and whether it answered.
    pub(crate) fn health(self) -> impl Iterator<Item = (String, bool)> {
        self.daemons.into_iter().map(|d| (d.daemon, d.healthy))
    }
}

async fn call_status(daemon: Daemon, ch: Channel) -> DaemonView {
    let req = tonic::Request::new(StatusRequest {});
    match tokio::time::timeout(
        Duration::from_secs(2),
        argos_common::grpc::daemon_status(ch, req),
    )
    .await
    {
        Ok(Ok(status)) => DaemonView::from_status(status),
        Ok(Err(status)) => {
            let daemon = daemon.name();
            tracing::warn!(daemon, code = ?status.code(), message = status.message(), "Status call failed");
            let code = match status.code() {
                tonic::Code::PermissionDenied => "permission_denied",
                tonic::Code::Unavailable => "unavailable",
                _ => "error",
            };
            DaemonView::unreachable(daemon, code)
        }
        Err(_) => DaemonView::unreachable(daemon.name(), "timeout"),
    }
}

pub(crate) async fn stack(state: &State) -> StackView {
    let (exec, mcp, job) = tokio::join!(
        call_status(Daemon::Execd, state.exec.clone()),
        call_status(Daemon::Mcpd, state.mcp.clone()),
        call_status(Daemon::Jobd, state.job.clone()),
    );
    let mut own = DaemonView::from_status(state.identity.status(None));
    own.sees_gateway_as = vec![PeerRole::Gateway.as_str()];
    let daemons = vec![own, exec, mcp, job];
    StackView {
        insecure_shared_uid: daemons.iter().any(|d| d.insecure_shared_uid),
        daemons,
    }
}

/// Each daemon's health, version, pid and uid, from its `Status` RPC.
#[utoipa::path(get, path = "/api/status", tag = "status",
    description = "Each daemon's health, version, pid, uid and the role it resolved for the gateway (any logged-in caller; tokens need `read`).",
    responses((status = 200, description = "`{\"insecure_shared_uid\", \"daemons\": [...]}`"),
              (status = 401, description = "not logged in", body = api::ErrorBody)))]
pub(crate) async fn status(AxState(state): AxState<State>) -> impl IntoResponse {
    Json(stack(&state).await)
}

// The web UI as build.rs built it: `INDEX_HTML` and `ASSETS`.
mod ui {
    include!(concat!(env!("OUT_DIR"), "/ui_assets.rs"));
}

/// The web UI's page (the same for every client-side route, `/setup` included), with the
/// insecure-run banner when the stack shares one uid. Strict CSP: nothing but the
/// gateway's own scripts and styles, no framing; inline styles are allowed because the
/// terminal's renderer (xterm.js) writes its measurements and theme into `<style>`
/// elements (scripts stay 'self' only).
async fn page(state: State) -> axum::response::Response {
    let banner = if state.identity.status(None).insecure_shared_uid {
        "<p class=\"insecure\">INSECURE RUN: several daemons share one uid; privilege separation is not in force.</p>"
    } else {
        ""
    };
    let html = ui::INDEX_HTML.replace("<!--BANNER-->", banner);
    (
        [
            (axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (axum::http::header::CACHE_CONTROL, "no-cache"),
            (
                axum::http::header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
            ),
            (axum::http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (axum::http::header::REFERRER_POLICY, "no-referrer"),
        ],
        axum::Extension(Public),
        html,
    )
        .into_response()
}

/// A built asset. Their names carry a hash of their content (`index-3hG1c2aB.js`), so a
/// browser may keep them for good; a new build is a new name.
async fn asset(axum::extract::Path(file): axum::extract::Path<String>) -> axum::response::Response {
    let path = format!("/assets/{file}");
    let Some((_, kind, body)) = ui::ASSETS.iter().find(|(p, _, _)| *p == path) else {
        return (
            axum::http::StatusCode::NOT_FOUND,
            Json(serde_json::json!({"error": {"code": "not_found", "message": "no such asset"}})),
        )
            .into_response();
    };
    let cache = if file == "LICENSES.txt" {
        "no-cache"
    } else {
        "public, max-age=31536000, immutable"
    };
    (
        [
            (axum::http::header::CONTENT_TYPE, *kind),
            (axum::http::header::CACHE_CONTROL, cache),
            (axum::http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        axum::Extension(Public),
        *body,
    )
        .into_response()
}
