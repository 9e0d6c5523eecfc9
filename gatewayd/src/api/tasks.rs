//! `/api/tasks`: tasks, kept and run by jobd. A task runs only in a version an admin
//! approved: an admin's save is that approval (by session, or a token with `approve`),
//! anyone else's waits for one (`POST /api/tasks/{id}/approve`). Approving asks execd
//! first to record a standing approval of the task's exact action for its owner — which
//! execd then checks on every run — and only then tells jobd; if jobd refuses, the
//! standing approval is revoked again. A user sees and changes their own tasks; admins
//! see, run, pause, approve and remove anyone's.
//!
//! A task's action may be an MCP tool call instead (made by jobd through mcpd, as the
//! owner): nothing at execd runs it, so its approval is the admin's alone, kept by jobd
//! with the version it approves.

use argos_proto::job::v1 as jpb;

use super::jobs::{from_jobd, jobd, sees_all};
use super::*;

/// A task's schedule.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBody {
    /// Five fields (minute hour day-of-month month day-of-week), or six with seconds first.
    cron: String,
    /// An IANA time zone (default UTC).
    #[serde(default)]
    timezone: String,
    /// While a run has not ended: `skip` (default), `queue`, `replace` or `allow`.
    #[serde(default)]
    overlap: String,
    /// Fires missed while jobd was down: `none` (default), `latest` or `all`.
    #[serde(default)]
    catch_up: String,
}

impl ScheduleBody {
    fn wire(self) -> jpb::Schedule {
        jpb::Schedule {
            cron: self.cron,
            timezone: self.timezone,
            overlap: self.overlap,
            catch_up: self.catch_up,
        }
    }
}

/// A task: its action (a command, as for a job) and, optionally, its schedule.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskBody {
    /// 1 to 64 characters.
    name: String,
    #[serde(default)]
    command: String,
    #[serde(default)]
    argv: Vec<String>,
    #[serde(default)]
    cwd: String,
    #[serde(default)]
    env: std::collections::HashMap<String, String>,
    /// `auto` (default), `sandbox`, `inspect` or `host`.
    place: Option<String>,
    /// Seconds each run may take (default `jobs.max_runtime_s`).
    #[serde(default, deserialize_with = "whole")]
    max_runtime_s: Option<u64>,
    #[serde(default)]
    purpose: String,
    /// Absent: it runs only when asked.
    schedule: Option<ScheduleBody>,
    /// What happens when each run ends.
    follow_ups: Option<super::jobs::FollowUpsBody>,
    /// An MCP tool call as the action instead of a command (then no command, argv, cwd,
    /// env or place).
    tool: Option<ToolBody>,
}

/// A brokered MCP tool and its arguments.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolBody {
    /// Its qualified name, `mcp__{server}__{tool}`.
    name: String,
    /// A JSON object (default none).
    #[serde(default)]
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
}

impl TaskBody {
    fn request(self, id: &str) -> Result<jpb::SaveTaskRequest, ApiError> {
        let place = place_field(self.place.as_deref())?;
        let max_runtime_ms = max_runtime_ms(self.max_runtime_s)?;
        Ok(jpb::SaveTaskRequest {
            id: id.to_string(),
            name: self.name,
            command: self.command,
            argv: self.argv,
            cwd: self.cwd,
            env: self.env,
            place: place as i32,
            max_runtime_ms,
            purpose: self.purpose,
            schedule: self.schedule.map(ScheduleBody::wire),
            follow_ups: super::jobs::FollowUpsBody::wire(self.follow_ups),
            tool: self.tool.map(|t| jpb::ToolCall {
                name: t.name,
                arguments_json: t
                    .arguments
                    .map(|a| serde_json::Value::Object(a).to_string())
                    .unwrap_or_default(),
            }),
            ..Default::default()
        })
    }
}

/// What execd is asked to approve for a task: the run request jobd makes of its action.
fn action(t: &jpb::Task) -> pb::RunRequest {
    pb::RunRequest {
        argv: t.argv.clone(),
        command: t.command.clone(),
        cwd: t.cwd.clone(),
        env: t.env.clone(),
        timeout_ms: Some(t.max_runtime_ms),
        ..Default::default()
    }
}

/// Whether this caller's save approves: an admin by session, or by a token with `approve`
/// — never a token an agent holds (`agent` or `mcp` scope), as for any decision.
fn approves(caller: &Caller) -> bool {
    sees_all(caller, "approve") && !agents_token(caller)
}

/// A token with the `agent` or `mcp` scope: it asks, it never decides.
fn agents_token(caller: &Caller) -> bool {
    matches!(&caller.via, Via::Bearer(scopes)
        if scopes.iter().any(|s| s == "agent" || s == crate::agent_mcp::SCOPE))
}

/// execd's standing approval of task `t`'s action for its owner, in `caller`'s name.
async fn standing(
    api: &Api,
    caller: &Caller,
    t: &jpb::Task,
) -> Result<pb::StandingApproval, ApiError> {
    api.exec
        .as_user(&caller.user.name)
        .approve_standing(pb::ApproveStandingRequest {
            run: Some(action(t)),
            place: t.place,
            owner: t.owner.clone(),
            label: format!(
                "task {:?} of {}",
                t.name.chars().take(64).collect::<String>(),
                t.owner
            ),
        })
        .await
        .map_err(from_exec)
}

/// Revokes a standing approval no version runs under any more (logged if it fails: it
/// then covers a version that no longer exists).
async fn retire(api: &Api, caller: &Caller, id: &str) {
    if id.is_empty() {
        return;
    }
    if let Err(e) = api
        .exec
        .as_user(&caller.user.name)
        .revoke_standing(id)
        .await
    {
        tracing::warn!(standing = id, error = %e, "revoking a task's old standing approval");
    }
}

fn client(api: &Api, caller: &Caller) -> super::jobs::JobdFor {
    jobd(api, caller)
}

/// Task `id` if `caller` may see it (else the answer for one that does not exist,
/// [`unknown`]).
async fn visible_task(
    api: &Api,
    caller: &Caller,
    scope: &str,
    id: &str,
) -> Result<jpb::Task, ApiError> {
    let t = client(api, caller)
        .task(id)
        .await
        .map_err(hide_missing("task", id))?;
    if sees_all(caller, scope) || t.owner == caller.user.name {
        Ok(t)
    } else {
        Err(unknown("task", id))
    }
}

/// Saves (`id` empty: creates) a task for the caller, approved when the caller approves.
async fn save(api: &Shared, caller: &Caller, id: &str, b: TaskBody) -> Result<jpb::Task, ApiError> {
    let before = if id.is_empty() {
        None
    } else {
        let t = visible_task(api, caller, "exec", id).await?;
        if t.owner != caller.user.name {
            return Err(ApiError::forbidden("a task is changed by its owner only"));
        }
        Some(t)
    };
    let mut req = b.request(id)?;
    let jobs = client(api, caller);
    let (req, approved) = if approves(caller) {
        // Checked by jobd (defaults filled in), approved by execd, then saved.
        let checked = jobs
            .save_task(jpb::SaveTaskRequest {
                validate_only: true,
                ..req.clone()
            })
            .await?;
        req.approved_by = caller.user.name.clone();
        if checked.tool.is_some() {
            (req, None)
        } else {
            let s = standing(api, caller, &checked).await?;
            req.standing_approval_id = s.id.clone();
            (req, Some(s))
        }
    } else {
        (req, None)
    };
    let saved = match jobs.save_task(req).await {
        Ok(t) => t,
        Err(e) => {
            if let Some(s) = approved {
                retire(api, caller, &s.id).await;
            }
            return Err(e);
        }
    };
    // The version before no longer runs: its standing approval goes, whether or not this
    // save approved the new one.
    if let Some(old) = before.filter(|o| {
        o.standing_approval_id != saved.standing_approval_id
            || saved.approved_version != saved.version
    }) {
        retire(api, caller, &old.standing_approval_id).await;
    }
    Ok(saved)
}

/// The audit record's detail of a task's save.
fn saved_detail(b: &TaskBody) -> serde_json::Value {
    json!({"name": b.name, "command": b.command, "argv": b.argv, "cwd": b.cwd,
           "tool": b.tool.as_ref().map(|t| json!({"name": t.name,
               "arguments_sha256": argos_store::audit::sha256_hex(
                   t.arguments.as_ref().map(|a| serde_json::Value::Object(a.clone()).to_string())
                       .unwrap_or_default().as_bytes())})),
           "env": b.env.keys().collect::<Vec<_>>(), "place": b.place,
           "max_runtime_s": b.max_runtime_s,
           "schedule": b.schedule.as_ref().map(|s| json!({"cron": s.cron, "timezone": s.timezone,
               "overlap": s.overlap, "catch_up": s.catch_up}))})
}

#[utoipa::path(post, path = "/api/tasks", tag = "tasks", description = "Creates a task for the caller: a command (as for a job) run by its schedule or when asked. An admin's save approves it (execd records a standing approval of its exact action, checked on every run); anyone else's waits for an admin's approval and does not run until then.", request_body = TaskBody, responses((status = 201, description = "`{\"task\"}`"), (status = 400, description = "bad field (named), or refused by the risk gate", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn create_task(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<TaskBody>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let detail = saved_detail(&b);
    let t = audited(
        &api,
        "task.create",
        &caller.user.name,
        "",
        detail,
        save(&api, &caller, "", b),
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"task": crate::views::task(&t)})),
    ))
}

#[utoipa::path(put, path = "/api/tasks/{id}", tag = "tasks", description = "Changes the caller's own task: a new version, approved if the caller approves (an admin), else waiting for an admin — the version before it no longer runs.", params(("id" = String, Path, description = "task id (UUID v7)")), request_body = TaskBody, responses((status = 200, description = "`{\"task\"}`"), (status = 400, description = "bad field (named), or refused by the risk gate", body = ErrorBody), (status = 404, description = "no such task", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (not its owner, scope or cross-site)", body = ErrorBody)))]
pub async fn update_task(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
    Body(b): Body<TaskBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let detail = saved_detail(&b);
    let t = audited(
        &api,
        "task.update",
        &caller.user.name,
        &id,
        detail,
        save(&api, &caller, &id, b),
    )
    .await?;
    Ok(Json(json!({"task": crate::views::task(&t)})))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TasksQuery {
    /// Only this owner's (admins; a user always sees their own).
    owner: Option<String>,
    /// At most this many (default 50, at most 500).
    limit: Option<u32>,
    page_token: Option<String>,
}

#[utoipa::path(get, path = "/api/tasks", tag = "tasks", description = "Tasks, newest first: a user's own; an admin's everyone's (or one owner's).", params(TasksQuery), responses((status = 200, description = "`{\"tasks\": [...], \"next_page_token\"}`"), (status = 400, description = "bad parameter (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope)", body = ErrorBody)))]
pub async fn tasks(
    State(api): State<Shared>,
    caller: Caller,
    Query(q): Query<TasksQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let owner = if sees_all(&caller, "read") {
        q.owner.unwrap_or_default()
    } else {
        caller.user.name.clone()
    };
    let limit = q.limit.unwrap_or(50);
    if limit > 500 {
        return Err(invalid("limit: at most 500"));
    }
    let r = client(&api, &caller)
        .list_tasks(jpb::ListTasksRequest {
            owner,
            page_size: limit,
            page_token: q.page_token.unwrap_or_default(),
        })
        .await?;
    Ok(Json(json!({
        "tasks": r.tasks.iter().map(crate::views::task).collect::<Vec<_>>(),
        "next_page_token": r.next_page_token,
    })))
}

#[utoipa::path(get, path = "/api/tasks/{id}", tag = "tasks", description = "One task (its owner's, or any for admins).", params(("id" = String, Path, description = "task id (UUID v7)")), responses((status = 200, description = "`{\"task\"}`"), (status = 404, description = "no such task", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope)", body = ErrorBody)))]
pub async fn task(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let t = visible_task(&api, &caller, "read", &id).await?;
    Ok(Json(json!({"task": crate::views::task(&t)})))
}

#[utoipa::path(delete, path = "/api/tasks/{id}", tag = "tasks", description = "Removes a task (its owner's, or any for admins) and revokes its standing approval; its runs stay in the jobs list.", params(("id" = String, Path, description = "task id (UUID v7)")), responses((status = 200, description = "`{\"task\"}` as it was"), (status = 404, description = "no such task", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn delete_task(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    visible_task(&api, &caller, "exec", &id).await?;
    let t = audited(
        &api,
        "task.delete",
        &caller.user.name,
        &id,
        json!({}),
        async {
            let t = client(&api, &caller).delete_task(&id).await?;
            retire(&api, &caller, &t.standing_approval_id).await;
            Ok(t)
        },
    )
    .await?;
    Ok(Json(json!({"task": crate::views::task(&t)})))
}

#[utoipa::path(post, path = "/api/tasks/{id}/run", tag = "tasks", description = "Runs a task now (its approved version; its owner's, or any for admins), as its overlap policy says: with a run not yet ended and overlap `skip`, a 409.", params(("id" = String, Path, description = "task id (UUID v7)")), responses((status = 201, description = "`{\"job\"}`"), (status = 404, description = "no such task", body = ErrorBody), (status = 409, description = "not approved, or a run is active and overlap is skip", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn run_task(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    visible_task(&api, &caller, "exec", &id).await?;
    let j = client(&api, &caller).run_task(&id).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"job": crate::views::job(&j)})),
    ))
}

async fn set_paused(
    api: &Shared,
    caller: &Caller,
    id: &str,
    paused: bool,
) -> Result<Json<serde_json::Value>, ApiError> {
    visible_task(api, caller, "exec", id).await?;
    let t = client(api, caller).set_paused(id, paused).await?;
    Ok(Json(json!({"task": crate::views::task(&t)})))
}

#[utoipa::path(post, path = "/api/tasks/{id}/pause", tag = "tasks", description = "Pauses a task's schedule (its owner's, or any for admins).", params(("id" = String, Path, description = "task id (UUID v7)")), responses((status = 200, description = "`{\"task\"}`"), (status = 404, description = "no such task", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn pause_task(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    set_paused(&api, &caller, &id, true).await
}

#[utoipa::path(post, path = "/api/tasks/{id}/resume", tag = "tasks", description = "Resumes a task's schedule from now (what was due while paused is not made up for).", params(("id" = String, Path, description = "task id (UUID v7)")), responses((status = 200, description = "`{\"task\"}`"), (status = 404, description = "no such task", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn resume_task(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    set_paused(&api, &caller, &id, false).await
}

/// Which version an admin approves.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveTaskBody {
    /// The version shown to the admin: a task changed since is a 409.
    version: u32,
}

#[utoipa::path(post, path = "/api/tasks/{id}/approve", tag = "tasks", description = "Approves a version of a task (admins): execd records a standing approval of its exact action for its owner, checked on every run.", params(("id" = String, Path, description = "task id (UUID v7)")), request_body = ApproveTaskBody, responses((status = 200, description = "`{\"task\"}`"), (status = 400, description = "bad field, or refused by the risk gate", body = ErrorBody), (status = 404, description = "no such task", body = ErrorBody), (status = 409, description = "the task changed since that version", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn approve_task(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
    Body(b): Body<ApproveTaskBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if agents_token(&caller) {
        return Err(ApiError::forbidden(
            "a token with the agent scope cannot approve tasks: approve from a session or with an approve-scoped token",
        ));
    }
    let t = visible_task(&api, &caller, "approve", &id).await?;
    if t.version != b.version {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!(
                "version: task {id} is at version {}, not {}",
                t.version, b.version
            ),
        ));
    }
    let old = t.standing_approval_id.clone();
    // What is approved, exactly: a command's digest is execd's (in its own audit); a tool
    // call's name and the hash of its arguments as jobd keeps them are recorded here.
    let detail = json!({"version": b.version, "owner": t.owner,
        "tool": t.tool.as_ref().map(|c| json!({"name": c.name,
            "arguments_sha256": argos_store::audit::sha256_hex(c.arguments_json.as_bytes())}))});
    let t = audited(
        &api,
        "task.approve",
        &caller.user.name,
        &id,
        detail,
        async {
            let s = match t.tool {
                Some(_) => None,
                None => Some(standing(&api, &caller, &t).await?),
            };
            let standing_approval_id = s.as_ref().map(|s| s.id.clone()).unwrap_or_default();
            let approved = client(&api, &caller)
                .approve_task(jpb::ApproveTaskRequest {
                    id: id.clone(),
                    version: b.version,
                    standing_approval_id: standing_approval_id.clone(),
                    approved_by: caller.user.name.clone(),
                })
                .await;
            match approved {
                Ok(t) => Ok(t),
                Err(e) => {
                    retire(&api, &caller, &standing_approval_id).await;
                    Err(e)
                }
            }
        },
    )
    .await?;
    if old != t.standing_approval_id {
        retire(&api, &caller, &old).await;
    }
    Ok(Json(json!({"task": crate::views::task(&t)})))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PreviewQuery {
    /// The cron pattern.
    cron: String,
    /// An IANA time zone (default UTC).
    timezone: Option<String>,
    /// How many (default 5, at most 50).
    count: Option<u32>,
}

#[utoipa::path(get, path = "/api/tasks/preview", tag = "tasks", description = "The next times a schedule would fire (nothing is saved).", params(PreviewQuery), responses((status = 200, description = "`{\"at_ms\": [...]}`"), (status = 400, description = "bad pattern or time zone (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope)", body = ErrorBody)))]
pub async fn preview_schedule(
    State(api): State<Shared>,
    caller: Caller,
    Query(q): Query<PreviewQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let count = q.count.unwrap_or(5);
    if !(1..=50).contains(&count) {
        return Err(invalid("count: 1 to 50"));
    }
    let r = client(&api, &caller)
        .preview(jpb::PreviewScheduleRequest {
            schedule: Some(jpb::Schedule {
                cron: q.cron,
                timezone: q.timezone.unwrap_or_default(),
                ..Default::default()
            }),
            count,
        })
        .await?;
    Ok(Json(json!({"at_ms": r.at_unix_ms})))
}

/// A task's webhook trigger.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookBody {
    /// `token` (a bearer token) or `hmac` (a signing secret: `X-Hub-Signature-256` over
    /// `"{X-Argos-Timestamp}.{body}"`).
    mode: String,
}

#[utoipa::path(post, path = "/api/tasks/{id}/webhook", tag = "tasks", description = "Gives a task (its owner's, or any for admins) a webhook trigger at `POST /hooks/{id}`, replacing any: the answer carries its secret, shown this once and kept only hashed (a token) or sealed (a signing secret).", params(("id" = String, Path, description = "task id (UUID v7)")), request_body = WebhookBody, responses((status = 200, description = "`{\"task\", \"secret\", \"url\"}`"), (status = 400, description = "bad mode", body = ErrorBody), (status = 404, description = "no such task", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn set_task_webhook(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
    Body(b): Body<WebhookBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if !matches!(b.mode.as_str(), "token" | "hmac") {
        return Err(invalid(format!("mode: {:?} is not token or hmac", b.mode)));
    }
    visible_task(&api, &caller, "exec", &id).await?;
    let r = audited(
        &api,
        "task.webhook",
        &caller.user.name,
        &id,
        json!({"mode": b.mode}),
        client(&api, &caller).set_webhook(&id, &b.mode),
    )
    .await?;
    Ok(Json(json!({
        "task": r.task.as_ref().map(crate::views::task),
        "secret": r.secret,
        "url": format!("/hooks/{id}"),
    })))
}

#[utoipa::path(delete, path = "/api/tasks/{id}/webhook", tag = "tasks", description = "Removes a task's webhook trigger: its secret stops working.", params(("id" = String, Path, description = "task id (UUID v7)")), responses((status = 200, description = "`{\"task\"}`"), (status = 404, description = "no such task", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn delete_task_webhook(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    visible_task(&api, &caller, "exec", &id).await?;
    let r = audited(
        &api,
        "task.webhook",
        &caller.user.name,
        &id,
        json!({"mode": null}),
        client(&api, &caller).set_webhook(&id, ""),
    )
    .await?;
    Ok(Json(
        json!({"task": r.task.as_ref().map(crate::views::task)}),
    ))
}

/// The most a webhook delivery's body may be.
const HOOK_BODY: usize = 1 << 20;

/// `POST /hooks/{task}`: a delivery to a task's webhook trigger, from anyone holding its
/// token or signing secret (outside the API's sessions and tokens: the secret is the
/// credential, checked by jobd). 202 with the run's id and state; 401 whatever was wrong
/// (no such task included); 409 when the task is paused, not approved, busy under
/// overlap `skip`, or the signed delivery was already taken; 413 over 1 MiB; 429 past
/// the task's rate.
pub async fn hook(
    State(api): State<Shared>,
    Path(task): Path<String>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let body = axum::body::to_bytes(body, HOOK_BODY).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "body: a webhook delivery is at most 1 MiB",
        )
    })?;
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let token = header("authorization")
        .strip_prefix("Bearer ")
        .map(str::to_string)
        .unwrap_or_default();
    let mut c = api.jobs.clone();
    let r = c
        .trigger_webhook(jpb::TriggerWebhookRequest {
            task_id: task,
            token,
            signature: header("x-hub-signature-256"),
            timestamp: header("x-argos-timestamp"),
            body: body.to_vec(),
        })
        .await;
    match r {
        Ok(j) => {
            let j = j.into_inner();
            Ok((
                StatusCode::ACCEPTED,
                Json(json!({"job": {"id": j.id, "state": crate::views::job_state(j.state)}})),
            ))
        }
        Err(s) if s.code() == tonic::Code::Unauthenticated => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "unauthorized",
        )),
        Err(s) if s.code() == tonic::Code::AlreadyExists => {
            Err(ApiError::new(StatusCode::CONFLICT, "conflict", s.message()))
        }
        Err(s) => Err(from_jobd(s)),
    }
}

/// jobd's calls for tasks, for the caller.
impl super::jobs::JobdFor {
    pub(crate) async fn task(&self, id: &str) -> Result<jpb::Task, ApiError> {
        let mut c = self.client();
        let r = jpb::GetTaskRequest { id: id.to_string() };
        Ok(c.get_task(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }

    pub(crate) async fn save_task(&self, r: jpb::SaveTaskRequest) -> Result<jpb::Task, ApiError> {
        let mut c = self.client();
        Ok(c.save_task(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }

    async fn approve_task(&self, r: jpb::ApproveTaskRequest) -> Result<jpb::Task, ApiError> {
        let mut c = self.client();
        Ok(c.approve_task(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }

    async fn list_tasks(
        &self,
        r: jpb::ListTasksRequest,
    ) -> Result<jpb::ListTasksResponse, ApiError> {
        let mut c = self.client();
        Ok(c.list_tasks(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }

    async fn delete_task(&self, id: &str) -> Result<jpb::Task, ApiError> {
        let mut c = self.client();
        let r = jpb::DeleteTaskRequest { id: id.to_string() };
        Ok(c.delete_task(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }

    async fn set_paused(&self, id: &str, paused: bool) -> Result<jpb::Task, ApiError> {
        let mut c = self.client();
        let r = jpb::SetTaskPausedRequest {
            id: id.to_string(),
            paused,
        };
        Ok(c.set_task_paused(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }

    async fn run_task(&self, id: &str) -> Result<jpb::JobInfo, ApiError> {
        let mut c = self.client();
        let r = jpb::RunTaskRequest { id: id.to_string() };
        Ok(c.run_task(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }

    async fn set_webhook(
        &self,
        id: &str,
        mode: &str,
    ) -> Result<jpb::SetTaskWebhookResponse, ApiError> {
        let mut c = self.client();
        let r = jpb::SetTaskWebhookRequest {
            id: id.to_string(),
            mode: mode.to_string(),
        };
        Ok(c.set_task_webhook(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }

    async fn preview(
        &self,
        r: jpb::PreviewScheduleRequest,
    ) -> Result<jpb::PreviewScheduleResponse, ApiError> {
        let mut c = self.client();
        Ok(c.preview_schedule(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }
}
