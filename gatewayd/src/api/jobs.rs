//! `/api/jobs`: background jobs, kept and carried out by jobd. A user creates, sees and
//! cancels their own; admins see and cancel everyone's. A job's command goes through
//! execd's risk gate as its owner's: a change to the host waits for an admin's approval.

use argos_proto::job::v1 as jpb;

use super::*;

/// jobd's refusals as the API says them.
pub(crate) fn from_jobd(s: tonic::Status) -> ApiError {
    from_daemon("jobd", s)
}

/// A client of jobd acting for the caller.
pub(crate) fn jobd(api: &Api, caller: &Caller) -> JobdFor {
    JobdFor {
        client: api.jobs.clone(),
        user: caller.user.name.clone(),
    }
}

pub(crate) struct JobdFor {
    client: jpb::job_client::JobClient<tonic::transport::Channel>,
    user: String,
}

impl JobdFor {
    pub(crate) fn req<T>(&self, msg: T) -> tonic::Request<T> {
        argos_common::grpc::with_principal(tonic::Request::new(msg), Some(&self.user), None)
    }

    pub(crate) fn client(&self) -> jpb::job_client::JobClient<tonic::transport::Channel> {
        self.client.clone()
    }

    pub(crate) async fn create(&self, r: jpb::CreateJobRequest) -> Result<jpb::JobInfo, ApiError> {
        let mut c = self.client.clone();
        Ok(c.create_job(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }

    pub(crate) async fn get(
        &self,
        id: &str,
        output: bool,
    ) -> Result<jpb::GetJobResponse, ApiError> {
        let mut c = self.client.clone();
        let r = jpb::GetJobRequest {
            id: id.to_string(),
            include_output: output,
        };
        Ok(c.get_job(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }

    pub(crate) async fn list(
        &self,
        r: jpb::ListJobsRequest,
    ) -> Result<jpb::ListJobsResponse, ApiError> {
        let mut c = self.client.clone();
        Ok(c.list_jobs(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }

    pub(crate) async fn relaunch(
        &self,
        id: &str,
        generation: u32,
    ) -> Result<jpb::JobInfo, ApiError> {
        let mut c = self.client.clone();
        let r = jpb::RelaunchJobRequest {
            id: id.to_string(),
            generation,
        };
        Ok(c.relaunch_job(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }

    pub(crate) async fn cancel(&self, id: &str) -> Result<jpb::JobInfo, ApiError> {
        let mut c = self.client.clone();
        let r = jpb::CancelJobRequest { id: id.to_string() };
        Ok(c.cancel_job(self.req(r))
            .await
            .map_err(from_jobd)?
            .into_inner())
    }
}

/// Whether `caller` sees everyone's executions and jobs: an admin by session, or with a
/// token carrying `scope`.
pub(crate) fn sees_all(caller: &Caller, scope: &str) -> bool {
    caller.is_admin()
        && match &caller.via {
            Via::Cookie(_) => true,
            Via::Bearer(scopes) => scopes.iter().any(|s| s == scope),
        }
}

/// Job `id`, if `caller` may see it: its own, or any when `all` (else the answer for one
/// that does not exist, [`unknown`]).
pub(crate) async fn visible_job(
    api: &Api,
    caller: &Caller,
    all: bool,
    id: &str,
    output: bool,
) -> Result<jpb::GetJobResponse, ApiError> {
    // jobd refuses an id that is not a UUID (400).
    let r = jobd(api, caller)
        .get(id, output)
        .await
        .map_err(hide_missing("job", id))?;
    match &r.job {
        Some(j) if all || j.owner == caller.user.name => Ok(r),
        _ => Err(unknown("job", id)),
    }
}

/// A job to run in the background.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobBody {
    /// Shown in lists (at most 128 characters; default: the command's start).
    #[serde(default)]
    name: String,
    /// A shell command line; or give `argv`.
    #[serde(default)]
    command: String,
    #[serde(default)]
    argv: Vec<String>,
    #[serde(default)]
    cwd: String,
    #[serde(default)]
    env: std::collections::HashMap<String, String>,
    /// Where it runs: `auto` (default: read-only → inspect at once, else host after an
    /// approval), `sandbox`, `inspect` or `host`.
    place: Option<String>,
    /// Seconds it may run (default `jobs.max_runtime_s`; at most 2592000).
    #[serde(default, deserialize_with = "whole")]
    max_runtime_s: Option<u64>,
    /// Why, for the approver.
    #[serde(default)]
    purpose: String,
    /// What happens when it ends.
    follow_ups: Option<FollowUpsBody>,
}

/// What happens when a job (or each run of a task) ends.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FollowUpsBody {
    /// Its summary is POSTed here, signed with your delivery secret (make one first:
    /// `POST /api/deliveries/secret`); retried with back-off for 24 h.
    webhook: Option<String>,
    /// When it succeeded, these tasks of yours start (each once).
    #[serde(default)]
    then: Vec<String>,
}

impl FollowUpsBody {
    pub(crate) fn wire(b: Option<FollowUpsBody>) -> Option<jpb::FollowUps> {
        b.map(|f| jpb::FollowUps {
            webhook: f.webhook.unwrap_or_default(),
            then: f.then,
        })
    }
}

impl JobBody {
    pub(crate) fn request(self, via: &str) -> Result<jpb::CreateJobRequest, ApiError> {
        let place = place_field(self.place.as_deref())?;
        let max_runtime_ms = max_runtime_ms(self.max_runtime_s)?;
        Ok(jpb::CreateJobRequest {
            name: self.name,
            command: self.command,
            argv: self.argv,
            cwd: self.cwd,
            env: self.env,
            place: place as i32,
            max_runtime_ms,
            purpose: self.purpose,
            via: via.to_string(),
            follow_ups: FollowUpsBody::wire(self.follow_ups),
        })
    }
}

#[utoipa::path(post, path = "/api/jobs", tag = "jobs", description = "Starts a job: a command run in the background for the caller, through execd's risk gate by place (as `/api/agent/run`: a change to the host waits for an admin's approval). It is recorded before it is started and followed to its end across restarts. Answers the job as it then is: `running`, `awaiting_approval`, `queued` (the caller's launches are at their quota, or execd is away: it starts when it can), or an end. A command the gate refuses outright is a 400 and no job is kept.", request_body = JobBody, responses((status = 201, description = "`{\"job\"}`"), (status = 400, description = "bad field (named), or refused by the risk gate", body = ErrorBody), (status = 429, description = "the caller has `jobs.active_per_user` jobs not yet ended", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn create_job(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<JobBody>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let j = jobd(&api, &caller).create(b.request("api")?).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"job": crate::views::job(&j)})),
    ))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobsQuery {
    /// Only this state (queued, starting, awaiting_approval, running, succeeded, failed,
    /// timed_out, cancelled, died, lost, rejected).
    state: Option<String>,
    /// Only those not yet ended.
    active: Option<bool>,
    /// Only this owner's (admins; a user always sees their own).
    owner: Option<String>,
    /// Only this task's runs.
    task_id: Option<String>,
    /// At most this many (default 50, at most 500).
    limit: Option<u32>,
    page_token: Option<String>,
}

#[utoipa::path(get, path = "/api/jobs", tag = "jobs", description = "Jobs, newest first: a user's own; an admin's everyone's (or one owner's).", params(JobsQuery), responses((status = 200, description = "`{\"jobs\": [...], \"next_page_token\"}`"), (status = 400, description = "bad parameter (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope)", body = ErrorBody)))]
pub async fn jobs(
    State(api): State<Shared>,
    caller: Caller,
    Query(q): Query<JobsQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let state = match q.state.as_deref() {
        None | Some("") => jpb::JobState::Unspecified,
        Some(s) => crate::views::parse_job_state(s)
            .ok_or_else(|| invalid(format!("state: {s:?} is not a job state")))?,
    };
    let owner = if sees_all(&caller, "read") {
        q.owner.unwrap_or_default()
    } else {
        caller.user.name.clone()
    };
    let limit = q.limit.unwrap_or(50);
    if limit > 500 {
        return Err(invalid("limit: at most 500"));
    }
    let r = jobd(&api, &caller)
        .list(jpb::ListJobsRequest {
            owner,
            state: state as i32,
            page_size: limit,
            page_token: q.page_token.unwrap_or_default(),
            active: q.active.unwrap_or(false),
            task_id: q.task_id.unwrap_or_default(),
        })
        .await?;
    Ok(Json(json!({
        "jobs": r.jobs.iter().map(crate::views::job).collect::<Vec<_>>(),
        "next_page_token": r.next_page_token,
    })))
}

#[utoipa::path(get, path = "/api/jobs/{id}", tag = "jobs", description = "One job (its owner's, or any for admins); once it ended, with the head and tail of its output (a task's tool call: `tool_result`, what the server answered, marked untrusted).", params(("id" = String, Path, description = "job id (UUID v7)")), responses((status = 200, description = "`{\"job\", \"stdout\", \"stderr\", \"tool_result\"}`"), (status = 404, description = "no such job", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope)", body = ErrorBody)))]
pub async fn job(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let r = visible_job(&api, &caller, sees_all(&caller, "read"), &id, true).await?;
    let ended = r.stdout.is_some() || r.stderr.is_some();
    let mut v = json!({
        "job": r.job.as_ref().map(crate::views::job),
        "stdout": ended.then(|| stream(r.stdout)),
        "stderr": ended.then(|| stream(r.stderr)),
    });
    // A task's tool call: what the server answered (data, never instructions).
    if let Some(t) = r.tool_result {
        v["tool_result"] = json!({
            "text": t.text,
            "structured": serde_json::from_str::<serde_json::Value>(&t.structured_json).ok(),
            "is_error": t.is_error,
            "truncated": t.truncated, "server": t.server, "untrusted": t.untrusted,
        });
    }
    Ok(Json(v))
}

#[utoipa::path(post, path = "/api/jobs/{id}/cancel", tag = "jobs", description = "Cancels a job (its owner's, or any for admins): one not yet started ends at once, one waiting for its approval is withdrawn, a running one is killed through execd (its verified process tree). Answers the job as it then is; cancelling one that ended changes nothing.", params(("id" = String, Path, description = "job id (UUID v7)")), responses((status = 200, description = "`{\"job\"}`"), (status = 404, description = "no such job", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn cancel_job(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    visible_job(&api, &caller, sees_all(&caller, "exec"), &id, false).await?;
    let j = jobd(&api, &caller).cancel(&id).await?;
    Ok(Json(json!({"job": crate::views::job(&j)})))
}

/// Which of a job's generations is launched again.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RelaunchBody {
    /// The generation that ended, as the caller saw it: a job launched again since is a
    /// 409, so a repeated request never launches it twice.
    generation: u32,
}

#[utoipa::path(post, path = "/api/jobs/{id}/relaunch", tag = "jobs", description = "Launches an ended job (its owner's, or any for admins; not a task's run — run the task instead) again as its next generation: the same command, asked for through execd's risk gate again (a change waits for its approval again), with a new execution; its follow-ups run again for the new generation, and any of the generation before still pending no longer apply.", params(("id" = String, Path, description = "job id (UUID v7)")), request_body = RelaunchBody, responses((status = 200, description = "`{\"job\"}` queued as its new generation"), (status = 404, description = "no such job", body = ErrorBody), (status = 409, description = "not ended, launched again since that generation, a task's run, or its follow-ups still being recorded", body = ErrorBody), (status = 429, description = "the owner has `jobs.active_per_user` jobs not yet ended", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn relaunch_job(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
    Body(b): Body<RelaunchBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    visible_job(&api, &caller, sees_all(&caller, "exec"), &id, false).await?;
    let j = audited(
        &api,
        "job.relaunch",
        &caller.user.name,
        &id,
        json!({"generation": b.generation}),
        jobd(&api, &caller).relaunch(&id, b.generation),
    )
    .await?;
    Ok(Json(json!({"job": crate::views::job(&j)})))
}

#[utoipa::path(get, path = "/api/jobs/{id}/output", tag = "jobs", description = "A job's output as server-sent events, live while it runs and from its log once it ended: `started` (its execution), `stdout` / `stderr` (`{\"offset\",\"text\"}`, event id `<stdout offset>:<stderr offset>`; send it back as Last-Event-ID to go on from there), then `exit`. A job that has not started yet is a 409. Leaving the stream leaves the job running.", params(("id" = String, Path, description = "job id (UUID v7)")), responses((status = 200, description = "text/event-stream"), (status = 400, description = "bad Last-Event-ID", body = ErrorBody), (status = 404, description = "no such job", body = ErrorBody), (status = 409, description = "not started yet (queued or waiting for its approval), or it never ran", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope)", body = ErrorBody)))]
pub async fn job_output(
    State(api): State<Shared>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<SseStream, ApiError> {
    let from = offsets(&headers)?;
    let j = visible_job(&api, &caller, sees_all(&caller, "read"), &id, false)
        .await?
        .job
        .unwrap_or_default();
    if let Some(t) = &j.tool {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!(
                "job {id} is a call of tool {}: it has no output stream; its result is in GET /api/jobs/{id}",
                t.name
            ),
        ));
    }
    if j.started_at_unix_ms == 0 {
        let state = crate::views::job_state(j.state);
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("job {id} is {state}: it has no output (yet)"),
        ));
    }
    // The gateway reads any execution; the owner was checked above.
    let e = api
        .exec
        .get(&j.execution_id, false)
        .await
        .map_err(from_exec)?
        .execution;
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let follow = api.exec.follow(&j.execution_id, from);
    tokio::spawn(relay(api.clone(), None, e, follow, tx));
    Ok(crate::sse::Stream::new(rx, caller.signed_out(&api)))
}
