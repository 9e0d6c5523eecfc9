//! `/api/mcp/…`: the MCP servers mcpd brokers, their tools and calls to them (admins).
//!
//! Adding or changing a stdio server is where the gateway does more than relay: the
//! admin's exact launch (command, args, env names, cwd, network) is registered with execd
//! first, in the admin's name, and only then configured in mcpd; execd starts nothing for
//! mcpd that does not match a registered launch's digest, so a compromised mcpd can run
//! nothing an admin did not add here. The two change together, one server at a time
//! (`Api::mcp_config`), and a failure in mcpd undoes the registration.
//!
//! The bodies and their checks are `mcp_body.rs`; how mcpd's answers read, `views::mcp`.

use std::collections::BTreeMap;

use argos_proto::mcp::v1 as mpb;

use super::mcp_body::*;
use super::*;

/// mcpd's refusals as the API says them.
pub(crate) fn from_mcp(s: tonic::Status) -> ApiError {
    from_daemon("mcpd", s)
}

/// An unprivileged daemon's (mcpd's, jobd's) refusals as the API says them.
pub(crate) fn from_daemon(daemon: &str, s: tonic::Status) -> ApiError {
    use tonic::Code;
    if argos_common::grpc::broke(&s) {
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("{daemon} is not answering; try again shortly"),
        );
    }
    match s.code() {
        // A tool call: the upstream server took too long, or failed.
        Code::DeadlineExceeded => {
            ApiError::new(StatusCode::GATEWAY_TIMEOUT, "upstream_timeout", s.message())
        }
        Code::Unknown => ApiError::new(StatusCode::BAD_GATEWAY, "upstream", s.message()),
        _ => from_kind(ErrorKind::of(&s), s.message())
            .unwrap_or_else(|| ApiError::internal(format!("{daemon}: {s}"))),
    }
}

async fn registrations(api: &Api) -> BTreeMap<String, pb::McpRegistration> {
    match api.exec.list_mcp_servers().await {
        Ok(list) => list.into_iter().map(|r| (r.server_id.clone(), r)).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "listing execd's MCP registrations");
            BTreeMap::new()
        }
    }
}

#[utoipa::path(get, path = "/api/mcp/servers", tag = "mcp", description = "The MCP servers mcpd brokers (admins), each with its connection state, its tools' count and, for a stdio server, its registration at execd. Secrets' values are never shown.", responses((status = 200, description = "`{\"servers\": [...]}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn mcp_servers(State(api): State<Shared>) -> Result<Json<serde_json::Value>, ApiError> {
    let list = api
        .mcp
        .clone()
        .list_servers(mpb::ListServersRequest {})
        .await
        .map_err(from_mcp)?
        .into_inner()
        .servers;
    let regs = registrations(&api).await;
    let servers: Vec<_> = list
        .iter()
        .map(|s| {
            let id = s.config.as_ref().map(|c| c.id.as_str()).unwrap_or_default();
            crate::views::mcp::server(s, regs.get(id))
        })
        .collect();
    Ok(Json(json!({"servers": servers})))
}

#[utoipa::path(get, path = "/api/mcp/servers/{server}", tag = "mcp", description = "One MCP server (admins).", params(("server" = String, Path, description = "the server's id")), responses((status = 200, description = "`{\"server\": ...}`"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn mcp_server(
    State(api): State<Shared>,
    Path(server): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    let s = api
        .mcp
        .clone()
        .get_server(mpb::GetServerRequest { id: server.clone() })
        .await
        .map_err(from_mcp)?
        .into_inner();
    let regs = registrations(&api).await;
    Ok(Json(
        json!({"server": crate::views::mcp::server(&s, regs.get(&server))}),
    ))
}

/// Adds (`update` false) or replaces a server's configuration: checked by mcpd first, a
/// stdio launch registered with execd in the admin's name, then kept by mcpd; a refusal
/// by mcpd at that point puts execd's registration back as execd had it.
async fn configure(
    api: &Api,
    caller: &Caller,
    c: mpb::ServerConfig,
    update: bool,
) -> Result<mpb::Server, ApiError> {
    let _one = api.mcp_config.lock().await;
    let add = |c: mpb::ServerConfig, validate_only: bool| {
        let mut mcp = api.mcp.clone();
        async move {
            if update {
                mcp.update_server(mpb::UpdateServerRequest {
                    config: Some(c),
                    validate_only,
                })
                .await
            } else {
                mcp.add_server(mpb::AddServerRequest {
                    config: Some(c),
                    validate_only,
                })
                .await
            }
            .map(tonic::Response::into_inner)
            .map_err(from_mcp)
        }
    };
    add(c.clone(), true).await?;
    let exec = execd(api, caller);
    // What execd has registered for this id now: put back as it was if mcpd then
    // refuses. Taken from execd, never from mcpd's answers (a compromised mcpd must not
    // choose what the gateway registers in an admin's name).
    let before: Option<pb::McpLaunch> = exec
        .list_mcp_servers()
        .await
        .map_err(from_exec)?
        .into_iter()
        .find(|r| r.server_id == c.id)
        .and_then(|r| r.launch);
    let registered = match launch(&c) {
        Some(l) => {
            exec.register_mcp_server(pb::RegisterMcpServerRequest {
                server_id: c.id.clone(),
                launch: Some(l),
            })
            .await
            .map_err(|e| from_exec(e.rename_field("launch.env_keys", "stdio.env")))?;
            true
        }
        None => false,
    };
    match add(c.clone(), false).await {
        Ok(s) => {
            // A server that was stdio and is no longer: its registration goes.
            if !registered
                && before.is_some()
                && let Err(e) = exec.forget_mcp_server(&c.id).await
            {
                tracing::warn!(server = %c.id, error = %e, "forgetting a stdio registration");
            }
            Ok(s)
        }
        Err(e) => {
            if registered {
                let undo = match before {
                    Some(l) => exec
                        .register_mcp_server(pb::RegisterMcpServerRequest {
                            server_id: c.id.clone(),
                            launch: Some(l),
                        })
                        .await
                        .map(|_| ()),
                    None => exec.forget_mcp_server(&c.id).await,
                };
                if let Err(u) = undo {
                    tracing::error!(server = %c.id, error = %u, "undoing a stdio registration");
                }
            }
            Err(e)
        }
    }
}

#[utoipa::path(post, path = "/api/mcp/servers", tag = "mcp", description = "Adds an MCP server (admins). A stdio server's exact launch (command, args, env names, cwd, network) is registered with execd in the caller's name first: execd starts nothing else for mcpd. Secrets are stored encrypted.", request_body = NewMcpServer, responses((status = 201, description = "`{\"server\": ...}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 409, description = "a server with this id exists", body = ErrorBody), (status = 503, description = "mcpd or execd is not answering", body = ErrorBody)))]
pub async fn add_mcp_server(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<NewMcpServer>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    check(&b)?;
    let c = config(b);
    let s = audited(
        &api,
        "mcp.server.add",
        &caller.user.name,
        &c.id,
        audit_detail(&c),
        configure(&api, &caller, c.clone(), false),
    )
    .await?;
    let regs = registrations(&api).await;
    Ok((
        StatusCode::CREATED,
        Json(json!({"server": crate::views::mcp::server(&s, regs.get(&c.id))})),
    ))
}

#[utoipa::path(put, path = "/api/mcp/servers/{server}", tag = "mcp", description = "Replaces an MCP server's configuration (admins) and reconnects it; a secret sent empty keeps its stored value. A stdio launch is registered again with execd first.", params(("server" = String, Path, description = "the server's id")), request_body = McpServerBody, responses((status = 200, description = "`{\"server\": ...}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd or execd is not answering", body = ErrorBody)))]
pub async fn update_mcp_server(
    State(api): State<Shared>,
    caller: Caller,
    Path(server): Path<String>,
    Body(b): Body<McpServerBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    let b = NewMcpServer::from((server, b));
    check(&b)?;
    let c = config(b);
    let s = audited(
        &api,
        "mcp.server.update",
        &caller.user.name,
        &c.id,
        audit_detail(&c),
        configure(&api, &caller, c.clone(), true),
    )
    .await?;
    let regs = registrations(&api).await;
    Ok(Json(
        json!({"server": crate::views::mcp::server(&s, regs.get(&c.id))}),
    ))
}

#[utoipa::path(delete, path = "/api/mcp/servers/{server}", tag = "mcp", description = "Disconnects and forgets an MCP server, its pins and its registration at execd (admins).", params(("server" = String, Path, description = "the server's id")), responses((status = 204, description = "removed"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd or execd is not answering", body = ErrorBody)))]
pub async fn remove_mcp_server(
    State(api): State<Shared>,
    caller: Caller,
    Path(server): Path<String>,
) -> Result<StatusCode, ApiError> {
    path_server(&server)?;
    audited(
        &api,
        "mcp.server.remove",
        &caller.user.name,
        &server,
        json!({}),
        async {
            let _one = api.mcp_config.lock().await;
            api.mcp
                .clone()
                .remove_server(mpb::RemoveServerRequest { id: server.clone() })
                .await
                .map_err(from_mcp)?;
            // Registered or not (a remote server has none), nothing of it stays at execd.
            match execd(&api, &caller).forget_mcp_server(&server).await {
                Ok(()) => Ok(()),
                Err(e) if e.kind == argos_exec_client::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(from_exec(e)),
            }
        },
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn set_enabled(
    api: Shared,
    caller: Caller,
    server: String,
    enabled: bool,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    let kind = if enabled {
        "mcp.server.enable"
    } else {
        "mcp.server.disable"
    };
    let s = audited(&api, kind, &caller.user.name, &server, json!({}), async {
        api.mcp
            .clone()
            .set_enabled(mpb::SetEnabledRequest {
                id: server.clone(),
                enabled,
            })
            .await
            .map_err(from_mcp)
            .map(tonic::Response::into_inner)
    })
    .await?;
    Ok(Json(json!({"server": crate::views::mcp::server(&s, None)})))
}

#[utoipa::path(post, path = "/api/mcp/servers/{server}/enable", tag = "mcp", description = "Enables (connects) an MCP server (admins).", params(("server" = String, Path, description = "the server's id")), responses((status = 200, description = "`{\"server\": ...}`"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn enable_mcp_server(
    State(api): State<Shared>,
    caller: Caller,
    Path(server): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    set_enabled(api, caller, server, true).await
}

#[utoipa::path(post, path = "/api/mcp/servers/{server}/disable", tag = "mcp", description = "Disables (disconnects) an MCP server (admins); its tools are refused.", params(("server" = String, Path, description = "the server's id")), responses((status = 200, description = "`{\"server\": ...}`"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn disable_mcp_server(
    State(api): State<Shared>,
    caller: Caller,
    Path(server): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    set_enabled(api, caller, server, false).await
}

#[utoipa::path(post, path = "/api/mcp/servers/{server}/reconnect", tag = "mcp", description = "Drops an MCP server's connection and connects it again (admins).", params(("server" = String, Path, description = "the server's id")), responses((status = 200, description = "`{\"server\": ...}`"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 409, description = "the server is disabled", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn reconnect_mcp_server(
    State(api): State<Shared>,
    Path(server): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    let s = api
        .mcp
        .clone()
        .reconnect(mpb::ReconnectRequest { id: server })
        .await
        .map_err(from_mcp)?
        .into_inner();
    Ok(Json(json!({"server": crate::views::mcp::server(&s, None)})))
}

#[utoipa::path(get, path = "/api/mcp/servers/{server}/log", tag = "mcp", description = "A stdio server's standard error, the last 64 KiB across its restarts (admins). What a server writes there is its own text: shown, never interpreted.", params(("server" = String, Path, description = "the server's id")), responses((status = 200, description = "`{\"log\": text}`"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn mcp_server_log(
    State(api): State<Shared>,
    Path(server): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    let r = api
        .mcp
        .clone()
        .server_log(mpb::GetServerRequest { id: server })
        .await
        .map_err(from_mcp)?
        .into_inner();
    Ok(Json(json!({"log": r.text})))
}

#[utoipa::path(put, path = "/api/mcp/servers/{server}/disabled_tools", tag = "mcp", description = "Replaces the list of a server's refused tools, by their upstream names (admins). A disabled tool is hidden from callers and refused when called.", params(("server" = String, Path, description = "the server's id")), request_body = DisabledToolsBody, responses((status = 200, description = "`{\"server\": ...}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn set_disabled_tools(
    State(api): State<Shared>,
    caller: Caller,
    Path(server): Path<String>,
    Body(b): Body<DisabledToolsBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    if b.tools.len() > MAX_DISABLED {
        return Err(invalid(format!("tools: more than {MAX_DISABLED}")));
    }
    check_tools("tools", &b.tools)?;
    let s = audited(
        &api,
        "mcp.server.disabled_tools",
        &caller.user.name,
        &server,
        json!({"tools": b.tools}),
        async {
            api.mcp
                .clone()
                .set_disabled_tools(mpb::SetDisabledToolsRequest {
                    id: server.clone(),
                    disabled_tools: b.tools.clone(),
                })
                .await
                .map_err(from_mcp)
                .map(tonic::Response::into_inner)
        },
    )
    .await?;
    Ok(Json(json!({"server": crate::views::mcp::server(&s, None)})))
}

#[utoipa::path(post, path = "/api/mcp/servers/{server}/authorize", tag = "mcp", description = "Starts authorizing a Streamable HTTP server that asks for OAuth 2.1 (admins): answers the authorization server's URL to open in this browser. It comes back to `/api/mcp/oauth/callback`, and the server connects with its tokens (kept encrypted by mcpd, refreshed as they expire).", params(("server" = String, Path, description = "the server's id")), responses((status = 200, description = "`{\"url\": …}`"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 409, description = "the server cannot be authorized (not Streamable HTTP, or its authorization server could not be used): see the message", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn authorize_mcp_server(
    State(api): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    caller: Caller,
    headers: HeaderMap,
    Path(server): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    // Back to this gateway, as the browser reaches it (its Host was checked on entry).
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or_else(|| invalid("host: the request names no host"))?;
    let scheme = if is_https(&headers, &api.web, peer.ip()) {
        "https"
    } else {
        "http"
    };
    let redirect_uri = format!("{scheme}://{host}/api/mcp/oauth/callback");
    let url = audited(
        &api,
        "mcp.server.authorize",
        &caller.user.name,
        &server,
        json!({"redirect_uri": redirect_uri}),
        async {
            api.mcp
                .clone()
                .authorize(mpb::AuthorizeRequest {
                    id: server.clone(),
                    redirect_uri: redirect_uri.clone(),
                })
                .await
                .map_err(from_mcp)
                .map(|r| r.into_inner().url)
        },
    )
    .await?;
    Ok(Json(json!({"url": url})))
}

/// What an authorization server's redirect brings.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CallbackQuery {
    /// The authorization code (absent when `error` says why there is none).
    #[serde(default)]
    code: Option<String>,
    /// The authorization's state, as `authorize` made it.
    state: String,
    /// The issuer (RFC 9207), when the authorization server sends it.
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

#[utoipa::path(get, path = "/api/mcp/oauth/callback", tag = "mcp", description = "Where an authorization server sends the browser back (no session needed: the `state`, random and single use, names the authorization an admin started): the code is exchanged and the server connects; answers a redirect to its page.", params(CallbackQuery), responses((status = 303, description = "authorized: to the server's page"), (status = 400, description = "the query is not a redirect's (no code, no state)", body = ErrorBody), (status = 404, description = "no authorization waits with this state (finished, replaced, expired or never started)", body = ErrorBody), (status = 409, description = "no authorization: the authorization server refused (its `error`), or the code could not be exchanged; see the message", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn mcp_oauth_callback(
    State(api): State<Shared>,
    Query(q): Query<CallbackQuery>,
) -> Result<Response, ApiError> {
    if let Some(e) = &q.error {
        let why = q.error_description.as_deref().unwrap_or_default();
        let text: String = format!("{e} {why}")
            .chars()
            .filter(|c| !c.is_control())
            .take(300)
            .collect();
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_authorized",
            format!(
                "error: the authorization server gave no code: {}",
                text.trim()
            ),
        ));
    }
    let Some(code) = q.code.filter(|c| !c.is_empty()) else {
        return Err(invalid("code: missing"));
    };
    let done = api
        .mcp
        .clone()
        .finish_authorization(mpb::FinishAuthorizationRequest {
            state: q.state,
            code,
            iss: q.iss.unwrap_or_default(),
        })
        .await
        .map_err(from_mcp);
    // Recorded once mcpd knew the state: an exchange that failed as well as one that
    // worked. (A state mcpd does not know is answered, not recorded: anyone may send one,
    // and the trail is no place for their noise.)
    let s = match done {
        Ok(s) => s.into_inner(),
        Err(e) => {
            if e.status == StatusCode::CONFLICT {
                record(
                    &api,
                    "mcp.server.authorize.failed",
                    "(oauth redirect)",
                    "",
                    json!({"message": e.message}),
                )
                .await?;
            }
            return Err(e);
        }
    };
    let id = s.config.map(|c| c.id).unwrap_or_default();
    record(
        &api,
        "mcp.server.authorized",
        "(oauth redirect)",
        &id,
        json!({}),
    )
    .await?;
    Ok((
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("/#/mcp/{id}"))],
    )
        .into_response())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ToolsQuery {
    /// One server's tools (its id); absent: every server's.
    #[serde(default)]
    server: Option<String>,
    /// Every tool with its state (`enabled`, `disabled`, `changed`); otherwise only those
    /// that may be called.
    #[serde(default)]
    all: Option<bool>,
}

#[utoipa::path(get, path = "/api/mcp/tools", tag = "mcp", description = "Tools of the brokered MCP servers under their qualified names (admins); with `all`, disabled and changed tools too, a changed one with the definition it now offers.", params(ToolsQuery), responses((status = 200, description = "`{\"tools\": [...]}`"), (status = 400, description = "a bad query parameter", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn mcp_tools(
    State(api): State<Shared>,
    Query(q): Query<ToolsQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if let Some(server) = &q.server {
        path_server(server)?;
    }
    let server = q.server.unwrap_or_default();
    let tools = api
        .mcp
        .clone()
        .list_tools(mpb::ListToolsRequest {
            server,
            all: q.all.unwrap_or(false),
        })
        .await
        .map_err(from_mcp)?
        .into_inner()
        .tools;
    Ok(Json(
        json!({"tools": tools.iter().map(crate::views::mcp::tool).collect::<Vec<_>>()}),
    ))
}

#[utoipa::path(post, path = "/api/mcp/tools/{tool}/accept", tag = "mcp", description = "Accepts a tool's changed definition (admins): it is pinned anew and may be called again.", params(("tool" = String, Path, description = "the qualified name, mcp__{server}__{tool}")), responses((status = 200, description = "`{\"tool\": ...}`"), (status = 400, description = "not a qualified tool name", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such tool", body = ErrorBody), (status = 409, description = "the tool has not changed", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn accept_mcp_tool(
    State(api): State<Shared>,
    caller: Caller,
    Path(tool): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_tool(&tool)?;
    let t = audited(
        &api,
        "mcp.tool.accept",
        &caller.user.name,
        &tool,
        json!({}),
        async {
            api.mcp
                .clone()
                .accept_tool(mpb::AcceptToolRequest {
                    qualified_name: tool.clone(),
                })
                .await
                .map_err(from_mcp)
                .map(tonic::Response::into_inner)
        },
    )
    .await?;
    Ok(Json(json!({"tool": crate::views::mcp::tool(&t)})))
}

#[utoipa::path(post, path = "/api/mcp/tools/{tool}/call", tag = "mcp", description = "Calls a brokered tool (admins). The result is capped and marked `untrusted`: it is the upstream server's data, never instructions. A disabled or changed tool is refused (409), and so is a call beyond its server's calls in flight (429: nothing was sent); the upstream's failure is a 502, its timeout a 504. Calls to one server run side by side, each with its own deadline.", params(("tool" = String, Path, description = "the qualified name, mcp__{server}__{tool}")), request_body = ToolCallBody, responses((status = 200, description = "`{\"result\": {server, is_error, truncated, untrusted, content, structured}}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such tool", body = ErrorBody), (status = 409, description = "the tool is disabled or changed", body = ErrorBody), (status = 429, description = "the tool's server has `mcp.calls_per_server` calls in flight: this one was not sent; try again once one has answered", body = ErrorBody), (status = 502, description = "the upstream server failed", body = ErrorBody), (status = 503, description = "mcpd is not answering, or the server is not connected", body = ErrorBody), (status = 504, description = "the upstream server took too long", body = ErrorBody)))]
pub async fn call_mcp_tool(
    State(api): State<Shared>,
    caller: Caller,
    Path(tool): Path<String>,
    Body(b): Body<ToolCallBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_tool(&tool)?;
    let arguments = b.arguments.map(serde_json::Value::Object);
    let text = arguments
        .as_ref()
        .map(serde_json::Value::to_string)
        .unwrap_or_default();
    let r = audited(
        &api,
        "mcp.tool.call",
        &caller.user.name,
        &tool,
        json!({"arguments_sha256": argos_store::audit::sha256_hex(text.as_bytes()),
               "arguments_bytes": text.len()}),
        async {
            api.mcp
                .clone()
                .call_tool(mpb::CallToolRequest {
                    qualified_name: tool.clone(),
                    arguments_json: text.clone(),
                    pinned_sha256: String::new(),
                })
                .await
                .map_err(from_mcp)
                .map(tonic::Response::into_inner)
        },
    )
    .await?;
    Ok(Json(json!({"result": crate::views::mcp::result(r)})))
}
