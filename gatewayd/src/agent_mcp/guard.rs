//! Who may use `/mcp`: an API token with the `mcp` scope and no other, its sessions its
//! own and within their bounds ([`super::sessions`]); everyone else gets the MCP authorization spec's answers (401 with the challenge
//! and the protected resource's metadata, 403 `insufficient_scope`).

use std::net::SocketAddr;

use axum::body::{Body, HttpBody as _};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde_json::json;

use super::SCOPE;
use super::sessions::Busy;
use crate::api::{Caller, Shared, Via};

fn unauthorized(headers: &HeaderMap, error: Option<&str>) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let mut challenge = format!(
        "Bearer resource_metadata=\"http://{host}/.well-known/oauth-protected-resource/mcp\", scope=\"{SCOPE}\""
    );
    if let Some(e) = error {
        challenge.push_str(&format!(", error=\"{e}\""));
    }
    let mut r = (
        StatusCode::UNAUTHORIZED,
        axum::Json(json!({"error": {"code": "unauthenticated",
            "message": "send an API token with the `mcp` scope as `Authorization: Bearer …`"}})),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r
}

/// Who may use `/mcp`: an API token with the `mcp` scope (a session cookie is no MCP
/// credential), from no other site's page (a browser's `Origin` must be the gateway's own
/// or an allowed one: the DNS-rebinding guard the MCP spec asks for, on top of the
/// gateway's Host check).
pub async fn guard(
    State(api): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
    next: Next,
) -> Response {
    let headers = req.headers().clone();
    if headers.contains_key(header::ORIGIN)
        && let Err(e) = crate::api::cross_site(&headers, &api.web, peer.ip())
    {
        return e.into_response();
    }
    let caller = req.extensions().get::<Caller>().cloned();
    match caller {
        // `mcp` and nothing else (tokens are made so; this holds for any made before).
        Some(Caller {
            via: Via::Bearer(scopes),
            user,
            token,
        }) if scopes.iter().all(|s| s == SCOPE) && !scopes.is_empty() => {
            let token = token.map_or(0, |t| t.id);
            if let Err(over) = api.mcp_rate.take(token, user.id) {
                let wait = over.wait;
                let mut r =
                    crate::api::ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate", over.message)
                        .into_response();
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
                return r;
            }
            in_session(api, token, user.name, req, next).await
        }
        Some(Caller {
            via: Via::Bearer(_),
            ..
        }) => {
            let mut r = crate::api::ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "this token is not an agent's: it needs the `mcp` scope and no other",
            )
            .into_response();
            if let Ok(v) = HeaderValue::from_str(&format!(
                "Bearer error=\"insufficient_scope\", scope=\"{SCOPE}\""
            )) {
                r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
            r
        }
        _ => unauthorized(&headers, None),
    }
}

/// A request of `token` (of `user`) in the session it names: one not this token's is
/// none (404), and the session is busy until the answer has been sent. Without a session:
/// an `initialize` first takes a place among the token's and the user's sessions (429 when
/// there is none), and the session it opens is recorded even if the client goes away.
async fn in_session(api: Shared, token: i64, user: String, req: Request, next: Next) -> Response {
    if let Some(id) = session_of(req.headers()) {
        let Some(busy) = api.mcp_sessions.enter(&id, token) else {
            return no_such_session();
        };
        let delete = req.method() == Method::DELETE;
        let r = next.run(req).await;
        if delete && r.status().is_success() {
            api.mcp_sessions.forget(&id);
        }
        return busy_while_sent(r, busy);
    }
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let (req, initialize) = match read_whole(req).await {
        Ok(read) => read,
        Err(r) => return r,
    };
    if !initialize {
        let r = next.run(req).await;
        // Sessions open only in a place taken for them.
        if let Some(id) = session_of(r.headers()) {
            api.mcp_sessions.end(&id).await;
            return crate::api::ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid",
                "a session is opened only by an `initialize` request",
            )
            .into_response();
        }
        return r;
    }
    let place = match api.mcp_sessions.reserve(token, &user) {
        Ok(p) => p,
        Err(e) => {
            return crate::api::ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "quota",
                e.to_string(),
            )
            .into_response();
        }
    };
    // Carried through whether or not the client waits: a session rmcp opened is this
    // token's, in its place, and what it displaces is ended.
    let opening = tokio::spawn(async move {
        let r = next.run(req).await;
        if let Some(id) = session_of(r.headers())
            && let Some(displaced) = place.opened(&id)
        {
            tracing::debug!(session = %displaced, "MCP session ended for a newer one of its token or user");
            api.mcp_sessions.end(&displaced).await;
        }
        r
    });
    match opening.await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "opening an MCP session");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// The session a request names, or a response opened.
fn session_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn no_such_session() -> Response {
    crate::api::ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such session").into_response()
}

/// The request with its body read whole (at most the API's limit), and whether it is an
/// `initialize`.
async fn read_whole(req: Request) -> Result<(Request, bool), Response> {
    #[derive(serde::Deserialize)]
    struct Message {
        method: Option<String>,
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, crate::api::BODY_LIMIT)
        .await
        .map_err(|_| crate::api::too_large().into_response())?;
    let initialize = serde_json::from_slice::<Message>(&bytes)
        .is_ok_and(|m| m.method.as_deref() == Some("initialize"));
    Ok((Request::from_parts(parts, Body::from(bytes)), initialize))
}

/// `r`, its session busy until its body has been sent (an event stream: until it ends or
/// the client goes) — at once for a body already whole.
fn busy_while_sent(r: Response, busy: Busy) -> Response {
    if r.body().size_hint().exact().is_some() {
        return r;
    }
    r.map(|body| {
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            let _sending = &busy;
            chunk
        }))
    })
}

/// A token the gateway does not know: 401 with the challenge, as the MCP authorization
/// spec has it (the API's own 401 has no `WWW-Authenticate`).
pub async fn challenge(req: Request, next: Next) -> Response {
    let headers = req.headers().clone();
    let r = next.run(req).await;
    if r.status() == StatusCode::UNAUTHORIZED && !r.headers().contains_key(header::WWW_AUTHENTICATE)
    {
        return unauthorized(&headers, Some("invalid_token"));
    }
    r
}

/// The protected resource's metadata (RFC 9728), where the 401's challenge points.
pub async fn resource_metadata(headers: HeaderMap) -> impl IntoResponse {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    axum::Json(json!({
        "resource": format!("http://{host}/mcp"),
        "authorization_servers": [],
        "bearer_methods_supported": ["header"],
        "scopes_supported": [SCOPE],
        "resource_documentation": "API tokens are made on the gateway's API tokens page, with the `mcp` scope",
    }))
}
