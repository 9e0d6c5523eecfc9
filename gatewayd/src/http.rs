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
use axum::response::{Html, IntoResponse};
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
        let ch = |d: &str| argos_common::grpc::unix_channel(&ctx.config.socket_path(d));
        Ok(State {
            identity: ctx.identity.clone(),
            exec: ch("execd")?,
            mcp: ch("mcpd")?,
            job: ch("jobd")?,
        })
    }

    pub fn exec_channel(&self) -> Channel {
        self.exec.clone()
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
        .route("/api/executions", get(api::executions))
        .route("/api/executions/{id}", get(api::execution))
        .route("/api/executions/{id}/kill", post(api::kill))
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            api::authenticate,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(api::BODY_LIMIT))
        .with_state(api.clone());
    let status_routes = axum::Router::new()
        .route("/api/status", get(status))
        .layer(axum::middleware::from_fn(require_caller))
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            api::authenticate,
        ))
        .with_state(state.clone());
    let page = {
        let (state, api) = (state.clone(), api.clone());
        move |headers: axum::http::HeaderMap| index(state.clone(), api.clone(), headers)
    };
    axum::Router::new()
        .route("/", get(page))
        .route("/healthz", get(|| async { "ok\n" }))
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
        .with_state(state)
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
            error: Some(error),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct StackView {
    insecure_shared_uid: bool,
    daemons: Vec<DaemonView>,
}

async fn call_status(daemon: Daemon, ch: Channel) -> DaemonView {
    let req = tonic::Request::new(StatusRequest {});
    match tokio::time::timeout(Duration::from_secs(2), daemon.status(ch, req)).await {
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

async fn stack(state: &State) -> StackView {
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

/// `/api/status` needs a caller (a session, or a token with `read`).
async fn require_caller(
    caller: Result<api::Caller, api::ApiError>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Result<axum::response::Response, api::ApiError> {
    caller?.scoped_read()?;
    Ok(next.run(req).await)
}

async fn status(AxState(state): AxState<State>) -> impl IntoResponse {
    Json(stack(&state).await)
}

/// The start page: the stack's state for a signed-in user; for anyone else only whether
/// the run is insecure and how to sign in.
async fn index(state: State, api: api::Shared, headers: axum::http::HeaderMap) -> Html<String> {
    let signed_in = match api::session_cookie(&headers) {
        Some(secret) => matches!(api.accounts.session(&secret).await, Ok(Some(_))),
        None => false,
    };
    let view = stack(&state).await;
    let mut rows = String::new();
    for d in &view.daemons {
        rows.push_str(&format!(
            "<tr><td>argos-{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&d.daemon),
            if d.healthy { "ok" } else { "bad" },
            if d.healthy { "serving" } else { d.error.unwrap_or("error") },
            escape(&d.version),
            d.pid,
            d.uid,
            d.sees_gateway_as.join(", "),
        ));
    }
    if !signed_in {
        rows.clear();
        rows.push_str(
            "<tr><td colspan=\"6\">Sign in (POST /api/login) to see the stack.</td></tr>\n",
        );
    }
    let banner = if view.insecure_shared_uid {
        "<p class=\"insecure\">INSECURE RUN: several daemons share one uid; privilege separation is not in force.</p>"
    } else {
        ""
    };
    Html(format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Argos</title>\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <style>body{{font:15px system-ui,sans-serif;margin:2rem;color:#222}}table{{border-collapse:collapse}}\
         td,th{{padding:.3rem .8rem;border-bottom:1px solid #ddd;text-align:left}}.ok{{color:#17702a}}\
         .bad{{color:#b00020}}.insecure{{background:#b00020;color:#fff;padding:.6rem}}</style></head>\
         <body><h1>Argos</h1>{banner}<table><thead><tr><th>daemon</th><th>state</th><th>version</th>\
         <th>pid</th><th>uid</th><th>sees the gateway as</th></tr></thead><tbody>\n{rows}</tbody></table>\
         <p><a href=\"/api/status\">/api/status</a></p></body></html>\n"
    ))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
