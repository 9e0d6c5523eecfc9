//! Account routes: first-admin setup, login and logout, the caller, passwords, users and
//! API tokens.

use super::*;

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
    api.throttle.attempt(&keys).map_err(throttled)?;
    let detail = json!({"peer": peer.ip().to_string()});
    let created = audited(
        &api,
        "user.setup_admin",
        "setup-link",
        &b.name,
        detail,
        async {
            Ok(api
                .accounts
                .setup_admin(&b.token, &b.name, &b.password)
                .await?)
        },
    )
    .await;
    // Only a wrong setup link counts against the address.
    match &created {
        Err(e) if e.code == "setup_link" => api.throttle.failed(&keys),
        _ => api.throttle.cancel(&keys),
    }
    let user = created?;
    tracing::info!(user = %user.name, "first admin created");
    let secret = api.accounts.new_session(user.id).await?;
    let mut r = session_response(&api, &headers, peer.ip(), &secret, &user);
    r.headers_mut().append(
        header::SET_COOKIE,
        device_cookie(&api, &headers, peer.ip(), &user.name),
    );
    Ok(r)
}

pub(crate) fn throttled(wait: Duration) -> ApiError {
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
    // Bounded before anything is hashed, counted, stored or logged: a name no account
    // can have, or a password no account can have, is a bad field.
    crate::accounts::check_name(&b.name)?;
    if b.password.len() > 1024 {
        return Err(invalid("password: at most 1024 bytes"));
    }
    // A client that logged in as this name before (its device cookie) is throttled on
    // its own: others' failures, from any address, do not lock it out (OWASP's device
    // cookies). Any other client is throttled by account and by address.
    let device = known_device(&api, &headers, &b.name);
    let keys = match &device {
        Some(nonce) => vec![format!("device:{nonce}")],
        None => vec![format!("user:{}", b.name), format!("addr:{}", peer.ip())],
    };
    // Counted before the (slow) verify: see `Throttle::attempt`.
    api.throttle.attempt(&keys).map_err(throttled)?;
    let peer_detail = json!({"peer": peer.ip().to_string()});
    let Some(user) = api.accounts.login(&b.name, &b.password).await? else {
        api.throttle.failed(&keys);
        record(&api, "login.failed", &b.name, &b.name, peer_detail).await?;
        tracing::warn!(name = %b.name, peer = %peer.ip(), "failed login");
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "bad_credentials",
            "wrong name or password",
        ));
    };
    api.throttle.succeeded(&keys);
    record(&api, "login.succeeded", &user.name, &user.name, peer_detail).await?;
    let secret = api.accounts.new_session(user.id).await?;
    tracing::info!(user = %user.name, known_device = device.is_some(), "login");
    let mut r = session_response(&api, &headers, peer.ip(), &secret, &user);
    if device.is_none() {
        r.headers_mut().append(
            header::SET_COOKIE,
            device_cookie(&api, &headers, peer.ip(), &user.name),
        );
    }
    Ok(r)
}

#[utoipa::path(post, path = "/api/logout", tag = "accounts", description = "Ends this session server-side.",   responses((status = 204, description = "ended"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn logout(
    State(api): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    caller: Caller,
) -> Result<Response, ApiError> {
    let secret = caller.cookie_only()?;
    let name = &caller.user.name;
    audited(&api, "logout", name, name, json!({}), async {
        Ok(api.accounts.end_session(secret).await?)
    })
    .await?;
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie("", cookie_secure(&api, &headers, peer.ip()), Duration::ZERO),
    );
    Ok(r)
}

#[utoipa::path(get, path = "/api/me", tag = "accounts", description = "Who is calling, and how.",   responses((status = 200, description = "`{\"user\", \"via\"}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn me(caller: Caller) -> Result<Json<serde_json::Value>, ApiError> {
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

#[utoipa::path(post, path = "/api/me/password", tag = "accounts", description = "Changes the password; every other session of the account ends and every API token it holds is revoked.", request_body = PasswordBody,  responses((status = 204, description = "changed"), (status = 400, description = "bad new password", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn change_password(
    State(api): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    caller: Caller,
    Body(b): Body<PasswordBody>,
) -> Result<StatusCode, ApiError> {
    let session = caller.cookie_only()?.to_string();
    let name = &caller.user.name;
    // Guessing the current password is throttled like a login.
    let keys = [format!("user:{name}"), format!("addr:{}", peer.ip())];
    api.throttle.attempt(&keys).map_err(throttled)?;
    let changed = audited(&api, "password.change", name, name, json!({}), async {
        Ok(api
            .accounts
            .change_password(
                &caller.user,
                &b.current_password,
                &b.new_password,
                Some(&session),
            )
            .await?)
    })
    .await;
    match &changed {
        Ok(()) => api.throttle.succeeded(&keys),
        // A wrong current password stays counted; anything else never checked it.
        Err(e) if e.code == "wrong_password" => api.throttle.failed(&keys),
        Err(_) => api.throttle.cancel(&keys),
    }
    changed?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/users", tag = "users", description = "Every account (admins, by session).",   responses((status = 200, description = "`{\"users\": [...]}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn users(State(api): State<Shared>) -> Result<Json<serde_json::Value>, ApiError> {
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
    let role = Role::parse(&b.role).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            "role: `admin` or `user`",
        )
    })?;
    let detail = json!({"role": role.as_str()});
    // Jobs or tasks left under a free name by an account deleted before (jobd away at its
    // deletion) are not the new account's: removed first (jobd away: nothing is created).
    let taken = api.accounts.users().await?.iter().any(|u| u.name == b.name);
    if !taken && argos_common::principal::Principal::parse(&b.name).is_ok() {
        forget_user_jobs(&api, &caller.user.name, &b.name).await?;
    }
    let user = audited(
        &api,
        "user.create",
        &caller.user.name,
        &b.name,
        detail,
        async { Ok(api.accounts.create_user(&b.name, &b.password, role).await?) },
    )
    .await?;
    // A grant left under this name by an account deleted before (a crash between its
    // deletion and the grant's) is not the new account's.
    forget_user_access(&api, &user.name).await?;
    tracing::info!(by = %caller.user.name, user = %user.name, role = role.as_str(), "user created");
    Ok((StatusCode::CREATED, Json(json!({"user": user}))))
}

#[utoipa::path(delete, path = "/api/users/{name}", tag = "users", description = "Deletes an account with its sessions and tokens (never the last admin).",  params(("name" = String, Path, description = "account name")), responses((status = 204, description = "deleted"), (status = 404, description = "no such user", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn delete_user(
    State(api): State<Shared>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let deleted = audited(
        &api,
        "user.delete",
        &caller.user.name,
        &name,
        json!({}),
        async { Ok(api.accounts.delete_user(&name).await?) },
    )
    .await?;
    if deleted {
        forget_user_access(&api, &name).await?;
        // Nothing of theirs runs on: a 503 here says what is left, and DELETE again
        // removes it.
        forget_user_jobs(&api, &caller.user.name, &name).await?;
        tracing::info!(by = %caller.user.name, user = %name, "user deleted");
        Ok(StatusCode::NO_CONTENT)
    } else if argos_common::principal::Principal::parse(&name).is_ok()
        && forget_user_jobs(&api, &caller.user.name, &name).await?
    {
        // What a deletion left behind (jobd was away then) is removed now.
        tracing::info!(by = %caller.user.name, user = %name, "a deleted user's jobs and tasks removed");
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
    Ok(Json(
        json!({"tokens": api.accounts.tokens(caller.user.id).await?}),
    ))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct NewToken {
    name: String,
    scopes: Vec<String>,
    /// With the `mcp` scope: the agent gets only the tools that only read (brokered ones
    /// by their annotations: `readOnlyHint` and not `destructiveHint`).
    #[serde(default)]
    mcp_read_only: bool,
    /// With the `mcp` scope: `run` may ask the human in the agent's client to approve a
    /// non-destructive change (MCP elicitation), recorded as the token owner's approval.
    /// Only an admin's token can approve.
    #[serde(default)]
    mcp_elicitation: bool,
}

#[utoipa::path(post, path = "/api/tokens", tag = "tokens", description = "Creates an API token; its secret is in this answer only.", request_body = NewToken,  responses((status = 201, description = "`{\"id\", \"token\", ...}`"), (status = 400, description = "bad name or scopes", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn create_token(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<NewToken>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let mcp = b.scopes.iter().any(|s| s == crate::agent_mcp::SCOPE);
    // An agent's token is for /mcp and nothing else: with another scope, the limits set
    // for its agent (read-only tools, the grants) would not bind what the same token
    // could do on the API (run as root with `exec`, decide approvals with `approve`).
    if mcp && b.scopes.len() > 1 {
        return Err(invalid(
            "scopes: the `mcp` scope stands alone (an agent's token carries nothing else)",
        ));
    }
    if (b.mcp_read_only || b.mcp_elicitation) && !mcp {
        return Err(invalid(
            "scopes: mcp_read_only and mcp_elicitation need the `mcp` scope",
        ));
    }
    if b.mcp_elicitation && !caller.is_admin() {
        return Err(invalid(
            "mcp_elicitation: only an admin approves changes, so only an admin's token may ask",
        ));
    }
    if b.mcp_elicitation && b.mcp_read_only {
        return Err(invalid(
            "mcp_elicitation: a read-only token runs nothing that needs approving",
        ));
    }
    let detail = json!({"scopes": b.scopes, "mcp_read_only": b.mcp_read_only,
                        "mcp_elicitation": b.mcp_elicitation});
    let (id, secret) = audited(
        &api,
        "token.create",
        &caller.user.name,
        &b.name,
        detail,
        async {
            Ok(api
                .accounts
                .new_token(
                    caller.user.id,
                    &b.name,
                    &b.scopes,
                    crate::accounts::McpOptions {
                        read_only: b.mcp_read_only,
                        elicitation: b.mcp_elicitation,
                    },
                )
                .await?)
        },
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(
            json!({"id": id, "name": b.name, "scopes": b.scopes, "token": secret,
            "mcp_read_only": b.mcp_read_only, "mcp_elicitation": b.mcp_elicitation,
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
    let subject = format!("token:{id}");
    let revoked = audited(
        &api,
        "token.revoke",
        &caller.user.name,
        &subject,
        json!({}),
        async { Ok(api.accounts.revoke_token(caller.user.id, id).await?) },
    )
    .await?;
    if revoked {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("no token {id}")))
    }
}
