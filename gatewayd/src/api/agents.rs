//! What agents may do at `/mcp` (an admin's setting: a grant per role, or per user) and
//! what they did (the activity log).

use super::*;
use crate::agent_mcp::access::{self, Grant};
use crate::agent_mcp::activity;

fn access_view(a: &access::Access, updated: Option<(String, i64)>) -> serde_json::Value {
    json!({
        "roles": {"admin": a.admin, "user": a.user},
        "users": a.users,
        "updated_by": updated.as_ref().map(|u| &u.0),
        "updated_at_ms": updated.as_ref().map(|u| u.1),
    })
}

#[utoipa::path(get, path = "/api/mcp/access", tag = "mcp", description = "Which tools agents get at `/mcp` (admins): a grant per role (`admin`, `user`) and per user where one is set (a user's grant replaces their role's). A grant names the places `run` may use (none: no `run` nor `cancel_execution`), the brokered tools (`all`, `read_only`: those annotated readOnlyHint and not destructiveHint, `none`) and `http_get`. `get_execution_status` and `classify_command` are everyone's.", responses((status = 200, description = "`{\"roles\": {\"admin\", \"user\"}, \"users\": {…}, \"updated_by\", \"updated_at_ms\"}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn mcp_access(State(api): State<Shared>) -> Result<Json<serde_json::Value>, ApiError> {
    let (a, updated) = access::load(api.accounts.pool())
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(access_view(&a, updated)))
}

/// Changes the setting: `change` edits a copy of it, which is stored, audited and then used.
async fn change_access(
    api: &Api,
    caller: &Caller,
    subject: &str,
    grant: Option<&Grant>,
    user: Option<&str>,
    change: impl FnOnce(&mut access::Access) -> Result<(), ApiError>,
) -> Result<Json<serde_json::Value>, ApiError> {
    // One change at a time: each starts from the last one's result; a user's grant is
    // given only while the account exists (checked under the same lock its deletion takes
    // to forget the grant).
    let _one = api.mcp_config.lock().await;
    if let Some(name) = user
        && !api.accounts.users().await?.iter().any(|u| u.name == name)
    {
        return Err(ApiError::not_found(format!("no user {name:?}")));
    }
    let (mut a, _) = access::load(api.accounts.pool())
        .await
        .map_err(ApiError::internal)?;
    change(&mut a)?;
    audited(
        api,
        "mcp.access",
        &caller.user.name,
        subject,
        json!({"grant": grant}),
        async {
            access::save(api.accounts.pool(), &a, &caller.user.name)
                .await
                .map_err(ApiError::internal)
        },
    )
    .await?;
    *api.mcp_access.write().unwrap_or_else(|e| e.into_inner()) = a.clone();
    let (_, updated) = access::load(api.accounts.pool())
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(access_view(&a, updated)))
}

/// A grant as kept: its places a set (in their order of risk).
fn tidy(mut g: Grant) -> Grant {
    g.run_places.sort();
    g.run_places.dedup();
    g
}

#[utoipa::path(put, path = "/api/mcp/access/roles/{role}", tag = "mcp", description = "Sets a role's grant at `/mcp` (admins): what the agents of its users get unless a user has a grant of their own.", params(("role" = String, Path, description = "`admin` or `user`", pattern = "^(admin|user)$")), request_body = Grant, responses((status = 200, description = "the whole setting, as GET answers it"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such role", body = ErrorBody)))]
pub async fn set_role_access(
    State(api): State<Shared>,
    caller: Caller,
    Path(role): Path<String>,
    Body(g): Body<Grant>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let role =
        Role::parse(&role).ok_or_else(|| ApiError::not_found(format!("no role {role:?}")))?;
    let g = tidy(g);
    change_access(
        &api,
        &caller,
        &format!("role:{}", role.as_str()),
        Some(&g),
        None,
        |a| {
            match role {
                Role::Admin => a.admin = g.clone(),
                Role::User => a.user = g.clone(),
            }
            Ok(())
        },
    )
    .await
}

#[utoipa::path(put, path = "/api/mcp/access/users/{name}", tag = "mcp", description = "Gives one user a grant at `/mcp` of their own, instead of their role's (admins).", params(("name" = String, Path, description = "account name")), request_body = Grant, responses((status = 200, description = "the whole setting, as GET answers it"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such user", body = ErrorBody)))]
pub async fn set_user_access(
    State(api): State<Shared>,
    caller: Caller,
    Path(name): Path<String>,
    Body(g): Body<Grant>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let g = tidy(g);
    change_access(
        &api,
        &caller,
        &format!("user:{name}"),
        Some(&g),
        Some(&name),
        |a| {
            a.users.insert(name.clone(), g.clone());
            Ok(())
        },
    )
    .await
}

#[utoipa::path(delete, path = "/api/mcp/access/users/{name}", tag = "mcp", description = "Removes a user's own grant at `/mcp`: their role's applies again (admins).", params(("name" = String, Path, description = "account name")), responses((status = 200, description = "the whole setting, as GET answers it"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "that user has no grant of their own", body = ErrorBody)))]
pub async fn remove_user_access(
    State(api): State<Shared>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    change_access(&api, &caller, &format!("user:{name}"), None, None, |a| {
        a.users
            .remove(&name)
            .map(|_| ())
            .ok_or_else(|| ApiError::not_found(format!("{name:?} has no grant of their own")))
    })
    .await
}

/// Forgets a deleted user's jobs, tasks (their webhooks with them), follow-ups and
/// delivery secret in jobd, and revokes the standing approvals of their tasks at execd, so
/// nothing of theirs runs on and an account made later under the same name inherits
/// nothing. Answers whether anything was there.
pub(crate) async fn forget_user_jobs(api: &Api, by: &str, name: &str) -> Result<bool, ApiError> {
    use argos_proto::job::v1 as jpb;
    let mut c = api.jobs.clone();
    let r = c
        .forget_owner(argos_common::grpc::with_principal(
            tonic::Request::new(jpb::ForgetOwnerRequest {
                owner: name.to_string(),
            }),
            Some(by),
            None,
        ))
        .await
        .map_err(super::jobs::from_jobd)?
        .into_inner();
    for id in &r.standing_approval_ids {
        if let Err(e) = api.exec.as_user(by).revoke_standing(id).await {
            tracing::warn!(standing = %id, error = %e, "revoking a deleted user's task approval");
        }
    }
    Ok(r.removed > 0 || !r.standing_approval_ids.is_empty())
}

/// Forgets a deleted user's grant, so an account made later under the same name does not
/// inherit it.
pub(crate) async fn forget_user_access(api: &Api, name: &str) -> Result<(), ApiError> {
    let _one = api.mcp_config.lock().await;
    let (mut a, _) = access::load(api.accounts.pool())
        .await
        .map_err(ApiError::internal)?;
    if a.users.remove(name).is_some() {
        access::save(api.accounts.pool(), &a, "(user deleted)")
            .await
            .map_err(ApiError::internal)?;
        *api.mcp_access.write().unwrap_or_else(|e| e.into_inner()) = a;
    }
    Ok(())
}

/// The most records one page of the activity log holds.
const MAX_ACTIVITY_PAGE: i64 = 500;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ActivityQuery {
    /// Only this principal's calls (a user sees only their own in any case).
    principal: Option<String>,
    /// Only calls of this tool.
    tool: Option<String>,
    /// Records older than this id (the previous page's `next_before`).
    before: Option<i64>,
    /// At most 500; 100 when absent or 0.
    limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/mcp/activity", tag = "mcp", description = "Tool calls at `/mcp`, newest first: principal, token, tool, input and output summaries (at most 500 characters each), duration and outcome (`ok`, `error`, `refused`). Admins see everyone's; a user sees their own (tokens need `read`).", params(ActivityQuery), responses((status = 200, description = "`{\"activity\": [...], \"next_before\"}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn mcp_activity(
    State(api): State<Shared>,
    caller: Caller,
    Query(q): Query<ActivityQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let limit = match q.limit.unwrap_or(0) {
        0 => 100,
        n if (1..=MAX_ACTIVITY_PAGE).contains(&n) => n,
        _ => return Err(invalid(format!("limit: 0 to {MAX_ACTIVITY_PAGE}"))),
    };
    let principal = if caller.is_admin() {
        q.principal.as_deref().filter(|p| !p.is_empty())
    } else {
        Some(caller.user.name.as_str())
    };
    // A user naming someone else sees nothing rather than their own under that name.
    if !caller.is_admin()
        && q.principal
            .as_deref()
            .is_some_and(|p| !p.is_empty() && p != caller.user.name)
    {
        return Ok(Json(json!({"activity": [], "next_before": null})));
    }
    let entries = activity::list(
        api.accounts.pool(),
        &activity::Filter {
            principal,
            tool: q.tool.as_deref().filter(|t| !t.is_empty()),
            before: q.before,
            limit,
        },
    )
    .await
    .map_err(ApiError::internal)?;
    let next = (entries.len() as i64 == limit).then(|| entries.last().map(|e| e.id));
    Ok(Json(
        json!({"activity": entries, "next_before": next.flatten()}),
    ))
}
