//! Who may use `/mcp`: an API token with the `mcp` scope and no other, its sessions its
//! own; everyone else gets the MCP authorization spec's answers (401 with the challenge
//! and the protected resource's metadata, 403 `insufficient_scope`).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::SCOPE;
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
            token,
            ..
        }) if scopes.iter().all(|s| s == SCOPE) && !scopes.is_empty() => {
            let token = token.map_or(0, |t| t.id);
            let session = headers
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            if let Some(id) = &session
                && !api.mcp_sessions.may_use(id, token)
            {
                return crate::api::ApiError::new(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    "no such session",
                )
                .into_response();
            }
            let r = next.run(req).await;
            if session.is_none()
                && let Some(id) = r
                    .headers()
                    .get("mcp-session-id")
                    .and_then(|v| v.to_str().ok())
            {
                api.mcp_sessions.opened(id, token);
            }
            r
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
