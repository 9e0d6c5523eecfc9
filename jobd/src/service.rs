//! jobd's gRPC edge: `argos.job.v1.Job` over the engine. Wire types become domain types
//! here and nowhere else; every error leaves as one status with a stable code.

use std::sync::Arc;

use argos_common::peer::{MethodPolicy, PeerRole, RoleSet};
use argos_common::principal::Caller;
use argos_exec_client::ErrorKind;
use argos_proto::job::v1 as pb;
use argos_proto::job::v1::job_server::{Job as JobRpc, JobServer};
use tokio_stream::wrappers::ReceiverStream;
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

use crate::engine::{CreateError, Engine, RelaunchError};
use crate::followup::FollowUps;
use crate::job::{Place, Spec, State};
use crate::schedule::{CatchUp, Overlap, Schedule};
use crate::store::{Filter, Job, StoreError};
use crate::task::Task;
use crate::tasks::{Approval, TaskError};

pub struct JobService {
    pub engine: Arc<Engine>,
}

/// Who may call what: creating and cancelling are the gateway's, for a user it
/// authenticated (and checked owns the job); reading is the gateway's and operators'.
pub fn policy() -> MethodPolicy {
    let name = <JobServer<JobService> as NamedService>::NAME;
    let m = |rpc: &str| format!("/{name}/{rpc}");
    let gateway = RoleSet::of(&[PeerRole::Gateway]);
    let readers = RoleSet::of(&[PeerRole::Gateway, PeerRole::Operator]);
    MethodPolicy::new()
        .method(m("CreateJob"), gateway)
        .method(m("CancelJob"), gateway)
        .method(m("RelaunchJob"), gateway)
        .method(m("GetJob"), readers)
        .method(m("ListJobs"), readers)
        .method(m("WatchJobs"), readers)
        .method(m("SaveTask"), gateway)
        .method(m("ApproveTask"), gateway)
        .method(m("DeleteTask"), gateway)
        .method(m("SetTaskPaused"), gateway)
        .method(m("RunTask"), gateway)
        .method(m("GetTask"), readers)
        .method(m("ListTasks"), readers)
        .method(m("PreviewSchedule"), readers)
        .method(m("SetTaskWebhook"), gateway)
        .method(m("TriggerWebhook"), gateway)
        .method(m("RotateDeliverySecret"), gateway)
        .method(m("Redeliver"), gateway)
        .method(m("ListDeliveries"), readers)
        .method(m("GetDelivery"), readers)
        .method(m("ForgetOwner"), gateway)
}

fn tool_out(t: &crate::job::ToolCall) -> pb::ToolCall {
    pb::ToolCall {
        name: t.name.clone(),
        arguments_json: t.arguments.clone(),
    }
}

fn store(e: StoreError) -> Status {
    tracing::error!(error = %e, "jobd's store");
    // The disk's faults are said as what they are: nothing was recorded or done.
    if let StoreError::Db(db) = &e
        && let Some(fault) = argos_store::Fault::of(db)
    {
        return Status::unavailable(fault.say("jobd"));
    }
    Status::internal("jobd's database failed; see its log")
}

fn create_error(e: CreateError) -> Status {
    match e {
        CreateError::Invalid(i) => Status::invalid_argument(i.to_string()),
        CreateError::Exhausted(..) => Status::resource_exhausted(e.to_string()),
        CreateError::Refused(x) => {
            let m = x.message;
            match x.kind {
                ErrorKind::PermissionDenied => Status::permission_denied(m),
                ErrorKind::NotFound => Status::not_found(m),
                ErrorKind::Conflict => Status::failed_precondition(m),
                _ => Status::invalid_argument(m),
            }
        }
        CreateError::Store(s) => store(s),
    }
}

fn task_error(e: TaskError) -> Status {
    match e {
        TaskError::Invalid(i) => Status::invalid_argument(i.to_string()),
        TaskError::NotFound(_) => Status::not_found(e.to_string()),
        TaskError::Refused(m) => Status::failed_precondition(m),
        TaskError::Exec(x) => match x.kind {
            ErrorKind::Unavailable | ErrorKind::Cancelled => {
                Status::unavailable(format!("execd: {}", x.message))
            }
            ErrorKind::NotFound | ErrorKind::InvalidArgument => {
                Status::invalid_argument(format!("standing_approval_id: {}", x.message))
            }
            _ => Status::failed_precondition(format!("standing_approval_id: {}", x.message)),
        },
        TaskError::Store(s) => store(s),
    }
}

fn schedule_in(s: Option<pb::Schedule>) -> Result<Option<Schedule>, Status> {
    let Some(s) = s else { return Ok(None) };
    let or = |w: &str, default: &'static str| -> String {
        if w.is_empty() {
            default.into()
        } else {
            w.to_string()
        }
    };
    let overlap = match or(&s.overlap, "skip").as_str() {
        "skip" => Overlap::Skip,
        "queue" => Overlap::Queue,
        "replace" => Overlap::Replace,
        "allow" => Overlap::Allow,
        other => {
            return Err(Status::invalid_argument(format!(
                "overlap: {other:?} is not skip, queue, replace or allow"
            )));
        }
    };
    let catch_up = match or(&s.catch_up, "none").as_str() {
        "none" => CatchUp::None,
        "latest" => CatchUp::Latest,
        "all" => CatchUp::All,
        other => {
            return Err(Status::invalid_argument(format!(
                "catch_up: {other:?} is not none, latest or all"
            )));
        }
    };
    Ok(Some(Schedule {
        cron: s.cron,
        timezone: s.timezone,
        overlap,
        catch_up,
    }))
}

fn word_of<T: serde::Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

pub fn task_out(t: &Task) -> pb::Task {
    let a = t.approval.as_ref();
    pb::Task {
        id: t.id.clone(),
        owner: t.owner.clone(),
        name: t.name.clone(),
        version: t.version,
        command: t.spec.command.clone(),
        argv: t.spec.argv.clone(),
        cwd: t.spec.cwd.clone(),
        env: t.spec.env.clone().into_iter().collect(),
        place: t.spec.place.wire() as i32,
        max_runtime_ms: t.spec.max_runtime_ms,
        purpose: t.spec.purpose.clone(),
        schedule: t.schedule.as_ref().map(|s| pb::Schedule {
            cron: s.cron.clone(),
            timezone: s.timezone.clone(),
            overlap: word_of(s.overlap),
            catch_up: word_of(s.catch_up),
        }),
        paused: t.paused,
        approved_version: a.map_or(0, |a| a.version),
        approved_by: a.map(|a| a.by.clone()).unwrap_or_default(),
        approved_at_unix_ms: a.map_or(0, |a| a.at_ms),
        standing_approval_id: a
            .map(|a| a.standing_approval_id.clone())
            .unwrap_or_default(),
        next_run_at_unix_ms: t.next_run_at_ms,
        created_at_unix_ms: t.created_at_ms,
        updated_at_unix_ms: t.updated_at_ms,
        webhook_mode: t
            .webhook
            .as_ref()
            .map(|w| w.0.as_str().to_string())
            .unwrap_or_default(),
        webhook_set_at_unix_ms: t.webhook.as_ref().map_or(0, |w| w.2),
        follow_ups: followups_out(&t.followups),
        tool: t.spec.tool.as_ref().map(tool_out),
    }
}

fn followups_out(f: &FollowUps) -> Option<pb::FollowUps> {
    (!f.is_empty()).then(|| pb::FollowUps {
        webhook: f.webhook.clone().unwrap_or_default(),
        then: f.then.clone(),
    })
}

fn followups_in(f: Option<pb::FollowUps>) -> FollowUps {
    f.map(|f| FollowUps {
        webhook: (!f.webhook.is_empty()).then_some(f.webhook),
        then: f.then,
    })
    .unwrap_or_default()
}

fn delivery_out(
    f: &crate::followup::FollowUp,
    attempts: &[crate::followup::Attempt],
) -> pb::Delivery {
    pb::Delivery {
        id: f.id.clone(),
        job_id: f.job_id.clone(),
        generation: f.generation,
        owner: f.owner.clone(),
        kind: f.kind.clone(),
        target: f.target.clone(),
        state: f.state.clone(),
        attempts: f.attempts,
        next_attempt_at_unix_ms: if f.state == "pending" {
            f.next_attempt_at_ms
        } else {
            0
        },
        last_error: f.last_error.clone(),
        created_at_unix_ms: f.created_at_ms,
        delivered_at_unix_ms: f.delivered_at_ms,
        attempt_log: attempts
            .iter()
            .map(|a| pb::DeliveryAttempt {
                attempt: a.attempt,
                at_unix_ms: a.at_ms,
                status: u32::from(a.status),
                error: a.error.clone(),
                duration_ms: u64::try_from(a.duration_ms).unwrap_or(0),
            })
            .collect(),
    }
}

fn principal_of<T>(req: &Request<T>) -> Result<String, Status> {
    req.extensions()
        .get::<Caller>()
        .and_then(|c| c.principal.clone())
        .map(|p| p.to_string())
        .ok_or_else(|| {
            Status::invalid_argument("principal: a task is saved for a user (x-argos-principal)")
        })
}

fn state_wire(s: State) -> pb::JobState {
    match s {
        State::Queued => pb::JobState::Queued,
        State::Starting => pb::JobState::Starting,
        State::AwaitingApproval => pb::JobState::AwaitingApproval,
        State::Running => pb::JobState::Running,
        State::Succeeded => pb::JobState::Succeeded,
        State::Failed => pb::JobState::Failed,
        State::TimedOut => pb::JobState::TimedOut,
        State::Cancelled => pb::JobState::Cancelled,
        State::Died => pb::JobState::Died,
        State::Lost => pb::JobState::Lost,
        State::Rejected => pb::JobState::Rejected,
    }
}

fn state_filter(v: i32) -> Result<Option<State>, Status> {
    let s = pb::JobState::try_from(v)
        .map_err(|_| Status::invalid_argument(format!("state: {v} is not a job state")))?;
    Ok(State::ALL.into_iter().find(|x| state_wire(*x) == s))
}

pub fn job_out(j: &Job) -> pb::JobInfo {
    pb::JobInfo {
        id: j.id.clone(),
        owner: j.owner.clone(),
        name: j.spec.name.clone(),
        state: state_wire(j.state) as i32,
        command: j.spec.command.clone(),
        argv: j.spec.argv.clone(),
        cwd: j.spec.cwd.clone(),
        env: j.spec.env.clone().into_iter().collect(),
        place: j.place.unwrap_or(j.spec.place).wire() as i32,
        max_runtime_ms: j.spec.max_runtime_ms,
        purpose: j.spec.purpose.clone(),
        via: j.via.clone(),
        generation: j.generation,
        execution_id: j.execution_id.clone(),
        approval_id: j.approval_id.clone(),
        exit_code: j.exit_code,
        reason: j.reason.clone(),
        cancel_requested: j.cancel_requested,
        created_at_unix_ms: j.created_at_ms,
        started_at_unix_ms: j.started_at_ms,
        ended_at_unix_ms: j.ended_at_ms,
        task_id: j.task_id.clone(),
        task_version: j.task_version,
        trigger: j.trigger.clone(),
        scheduled_for_unix_ms: j.scheduled_for_ms,
        follow_ups: followups_out(&j.followups),
        chained_from: j.chained_from.clone(),
        tool: j.spec.tool.as_ref().map(tool_out),
    }
}

/// A listing's page size: 50 by default, at most 500.
fn page_size(n: u32) -> Result<u32, Status> {
    match n {
        0 => Ok(50),
        1..=500 => Ok(n),
        n => Err(Status::invalid_argument(format!(
            "page_size: {n} is more than 500"
        ))),
    }
}

/// A listing's page token: the last id of the previous page.
fn page_token(t: &str) -> Result<Option<&str>, Status> {
    if t.is_empty() {
        return Ok(None);
    }
    uuid::Uuid::parse_str(t)
        .map(|_| Some(t))
        .map_err(|_| Status::invalid_argument("page_token: not a token from a previous page"))
}

/// The token of the next page: the last id when the page was full.
fn next_token(len: usize, limit: u32, last: Option<&str>) -> String {
    if len == limit as usize {
        last.unwrap_or_default().to_string()
    } else {
        String::new()
    }
}

fn job_id(id: &str) -> Result<(), Status> {
    uuid::Uuid::parse_str(id)
        .map(|_| ())
        .map_err(|_| Status::invalid_argument("id: not a job id"))
}

type WatchStream = ReceiverStream<Result<pb::JobEvent, Status>>;

#[tonic::async_trait]
impl JobRpc for JobService {
    async fn create_job(
        &self,
        req: Request<pb::CreateJobRequest>,
    ) -> Result<Response<pb::JobInfo>, Status> {
        let owner = req
            .extensions()
            .get::<Caller>()
            .and_then(|c| c.principal.clone())
            .ok_or_else(|| {
                Status::invalid_argument(
                    "principal: a job is created for a user (x-argos-principal)",
                )
            })?;
        let r = req.into_inner();
        let via = match r.via.as_str() {
            "" | "api" => "api",
            "mcp" => "mcp",
            other => {
                return Err(Status::invalid_argument(format!(
                    "via: {other:?} is not api or mcp"
                )));
            }
        };
        let spec = Spec {
            name: r.name,
            command: r.command,
            argv: r.argv,
            cwd: r.cwd,
            env: r.env.into_iter().collect(),
            place: Place::from_wire(r.place)
                .map_err(|e| Status::invalid_argument(format!("place: {e}")))?,
            max_runtime_ms: r.max_runtime_ms,
            purpose: r.purpose,
            tool: None,
        };
        let j = self
            .engine
            .create(owner.as_str(), via, spec, followups_in(r.follow_ups))
            .await
            .map_err(create_error)?;
        Ok(Response::new(job_out(&j)))
    }

    async fn get_job(
        &self,
        req: Request<pb::GetJobRequest>,
    ) -> Result<Response<pb::GetJobResponse>, Status> {
        let r = req.into_inner();
        job_id(&r.id)?;
        let j = self
            .engine
            .store
            .get(&r.id)
            .await
            .map_err(store)?
            .ok_or_else(|| Status::not_found(format!("no job {}", r.id)))?;
        let tool_result = if r.include_output && j.spec.tool.is_some() {
            self.engine
                .store
                .tool_result(&j.id, j.generation)
                .await
                .map_err(store)?
                .map(|t| pb::ToolResult {
                    text: t.text,
                    structured_json: t.structured,
                    is_error: t.is_error,
                    truncated: t.truncated,
                    server: t.server,
                    untrusted: true,
                })
        } else {
            None
        };
        let (stdout, stderr) = if r.include_output
            && j.state.is_final()
            && j.started_at_ms > 0
            && j.spec.tool.is_none()
        {
            self.engine.output(&j).await
        } else {
            (None, None)
        };
        Ok(Response::new(pb::GetJobResponse {
            job: Some(job_out(&j)),
            stdout,
            stderr,
            tool_result,
        }))
    }

    async fn list_jobs(
        &self,
        req: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        let r = req.into_inner();
        let limit = page_size(r.page_size)?;
        let jobs = self
            .engine
            .store
            .list(&Filter {
                owner: (!r.owner.is_empty()).then_some(r.owner.as_str()),
                state: state_filter(r.state)?,
                active: r.active,
                before_id: page_token(&r.page_token)?,
                limit,
                task_id: (!r.task_id.is_empty()).then_some(r.task_id.as_str()),
            })
            .await
            .map_err(store)?;
        Ok(Response::new(pb::ListJobsResponse {
            next_page_token: next_token(jobs.len(), limit, jobs.last().map(|j| j.id.as_str())),
            jobs: jobs.iter().map(job_out).collect(),
        }))
    }

    async fn cancel_job(
        &self,
        req: Request<pb::CancelJobRequest>,
    ) -> Result<Response<pb::JobInfo>, Status> {
        let id = req.into_inner().id;
        job_id(&id)?;
        let j = self
            .engine
            .cancel(&id)
            .await
            .map_err(store)?
            .ok_or_else(|| Status::not_found(format!("no job {id}")))?;
        Ok(Response::new(job_out(&j)))
    }

    async fn relaunch_job(
        &self,
        req: Request<pb::RelaunchJobRequest>,
    ) -> Result<Response<pb::JobInfo>, Status> {
        let r = req.into_inner();
        job_id(&r.id)?;
        let j = self
            .engine
            .relaunch(&r.id, r.generation)
            .await
            .map_err(|e| match e {
                RelaunchError::NotFound => Status::not_found(format!("no job {}", r.id)),
                RelaunchError::Refused(why) => Status::failed_precondition(why),
                RelaunchError::Exhausted(..) => Status::resource_exhausted(e.to_string()),
                RelaunchError::Store(s) => store(s),
            })?;
        Ok(Response::new(job_out(&j)))
    }

    async fn save_task(
        &self,
        req: Request<pb::SaveTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let owner = principal_of(&req)?;
        let r = req.into_inner();
        if !r.id.is_empty() {
            job_id(&r.id)?;
        }
        let spec = Spec {
            name: r.name.clone(),
            command: r.command,
            argv: r.argv,
            cwd: r.cwd,
            env: r.env.into_iter().collect(),
            place: Place::from_wire(r.place)
                .map_err(|e| Status::invalid_argument(format!("place: {e}")))?,
            max_runtime_ms: r.max_runtime_ms,
            purpose: r.purpose,
            tool: r.tool.map(|t| crate::job::ToolCall {
                name: t.name,
                arguments: t.arguments_json,
            }),
        };
        let schedule = schedule_in(r.schedule)?;
        if r.validate_only {
            let spec = self
                .engine
                .check_task(&r.name, spec, schedule.as_ref())
                .map_err(task_error)?;
            let now = crate::store::now_ms();
            let t = Task {
                id: r.id,
                owner,
                name: r.name,
                version: 0,
                spec,
                schedule,
                paused: false,
                approval: None,
                cursor_ms: now,
                next_run_at_ms: 0,
                created_at_ms: now,
                updated_at_ms: now,
                webhook: None,
                followups: followups_in(r.follow_ups),
            };
            return Ok(Response::new(task_out(&t)));
        }
        // A command's approval is execd's standing approval; a tool call's is the admin's
        // word alone (nothing at execd runs it).
        let approval = match (r.standing_approval_id.is_empty(), r.approved_by.is_empty()) {
            (true, true) => None,
            (_, false) => Some(Approval {
                standing_approval_id: r.standing_approval_id,
                by: r.approved_by,
            }),
            (false, true) => {
                return Err(Status::invalid_argument(
                    "approved_by: a standing approval is given with the admin who gave it",
                ));
            }
        };
        let t = self
            .engine
            .save_task(
                (!r.id.is_empty()).then_some(r.id.as_str()),
                &owner,
                crate::task::Definition {
                    name: r.name,
                    spec,
                    schedule,
                    followups: followups_in(r.follow_ups),
                },
                approval,
            )
            .await
            .map_err(task_error)?;
        Ok(Response::new(task_out(&t)))
    }

    async fn approve_task(
        &self,
        req: Request<pb::ApproveTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let r = req.into_inner();
        job_id(&r.id)?;
        if r.approved_by.is_empty() {
            return Err(Status::invalid_argument(
                "approved_by: an approval names its admin (and, for a command, execd's standing approval)",
            ));
        }
        let t = self
            .engine
            .approve_task(
                &r.id,
                r.version,
                Approval {
                    standing_approval_id: r.standing_approval_id,
                    by: r.approved_by,
                },
            )
            .await
            .map_err(task_error)?;
        Ok(Response::new(task_out(&t)))
    }

    async fn get_task(
        &self,
        req: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let id = req.into_inner().id;
        job_id(&id)?;
        let t = self
            .engine
            .store
            .task(&id)
            .await
            .map_err(store)?
            .ok_or_else(|| Status::not_found(format!("no task {id}")))?;
        Ok(Response::new(task_out(&t)))
    }

    async fn list_tasks(
        &self,
        req: Request<pb::ListTasksRequest>,
    ) -> Result<Response<pb::ListTasksResponse>, Status> {
        let r = req.into_inner();
        let limit = page_size(r.page_size)?;
        let tasks = self
            .engine
            .store
            .tasks(
                (!r.owner.is_empty()).then_some(r.owner.as_str()),
                page_token(&r.page_token)?,
                limit,
            )
            .await
            .map_err(store)?;
        Ok(Response::new(pb::ListTasksResponse {
            next_page_token: next_token(tasks.len(), limit, tasks.last().map(|t| t.id.as_str())),
            tasks: tasks.iter().map(task_out).collect(),
        }))
    }

    async fn delete_task(
        &self,
        req: Request<pb::DeleteTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let id = req.into_inner().id;
        job_id(&id)?;
        let t = self.engine.delete_task(&id).await.map_err(task_error)?;
        Ok(Response::new(task_out(&t)))
    }

    async fn set_task_paused(
        &self,
        req: Request<pb::SetTaskPausedRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let r = req.into_inner();
        job_id(&r.id)?;
        let t = self
            .engine
            .set_paused(&r.id, r.paused)
            .await
            .map_err(task_error)?;
        Ok(Response::new(task_out(&t)))
    }

    async fn run_task(
        &self,
        req: Request<pb::RunTaskRequest>,
    ) -> Result<Response<pb::JobInfo>, Status> {
        let id = req.into_inner().id;
        job_id(&id)?;
        let j = self.engine.run_task(&id).await.map_err(task_error)?;
        Ok(Response::new(job_out(&j)))
    }

    async fn preview_schedule(
        &self,
        req: Request<pb::PreviewScheduleRequest>,
    ) -> Result<Response<pb::PreviewScheduleResponse>, Status> {
        let r = req.into_inner();
        let count = match r.count {
            0 => 5,
            n @ 1..=50 => n as usize,
            n => {
                return Err(Status::invalid_argument(format!(
                    "count: {n} is more than 50"
                )));
            }
        };
        let s = schedule_in(r.schedule)?
            .ok_or_else(|| Status::invalid_argument("schedule: give one"))?;
        let c = s
            .compile()
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        Ok(Response::new(pb::PreviewScheduleResponse {
            at_unix_ms: c.preview(crate::store::now_ms(), count),
        }))
    }

    async fn set_task_webhook(
        &self,
        req: Request<pb::SetTaskWebhookRequest>,
    ) -> Result<Response<pb::SetTaskWebhookResponse>, Status> {
        let r = req.into_inner();
        job_id(&r.id)?;
        let mode = match r.mode.as_str() {
            "" => None,
            m => Some(crate::hooks::Mode::parse(m).ok_or_else(|| {
                Status::invalid_argument(format!("mode: {m:?} is not token or hmac"))
            })?),
        };
        let (t, secret) = self
            .engine
            .set_webhook(&r.id, mode)
            .await
            .map_err(task_error)?;
        Ok(Response::new(pb::SetTaskWebhookResponse {
            task: Some(task_out(&t)),
            secret,
        }))
    }

    async fn trigger_webhook(
        &self,
        req: Request<pb::TriggerWebhookRequest>,
    ) -> Result<Response<pb::JobInfo>, Status> {
        use crate::tasks::HookError;
        let r = req.into_inner();
        if r.body.len() > 1 << 20 {
            return Err(Status::invalid_argument("body: more than 1 MiB"));
        }
        if uuid::Uuid::parse_str(&r.task_id).is_err() {
            return Err(Status::unauthenticated("unauthorized"));
        }
        let presented = crate::hooks::Presented {
            token: &r.token,
            signature: &r.signature,
            timestamp: &r.timestamp,
            body: &r.body,
        };
        match self.engine.trigger(&r.task_id, &presented).await {
            Ok(j) => Ok(Response::new(job_out(&j))),
            Err(HookError::Unauthorized) => Err(Status::unauthenticated("unauthorized")),
            Err(e @ HookError::Replayed) => Err(Status::already_exists(e.to_string())),
            Err(e @ HookError::RateLimited) => Err(Status::resource_exhausted(e.to_string())),
            Err(HookError::Task(e)) => Err(task_error(e)),
        }
    }

    async fn rotate_delivery_secret(
        &self,
        req: Request<pb::RotateDeliverySecretRequest>,
    ) -> Result<Response<pb::RotateDeliverySecretResponse>, Status> {
        let owner = principal_of(&req)?;
        let secret = self
            .engine
            .rotate_delivery_secret(&owner)
            .await
            .map_err(store)?;
        Ok(Response::new(pb::RotateDeliverySecretResponse { secret }))
    }

    async fn list_deliveries(
        &self,
        req: Request<pb::ListDeliveriesRequest>,
    ) -> Result<Response<pb::ListDeliveriesResponse>, Status> {
        let r = req.into_inner();
        let limit = page_size(r.page_size)?;
        let token = page_token(&r.page_token)?;
        if !r.job_id.is_empty() {
            job_id(&r.job_id)?;
        }
        if !matches!(
            r.state.as_str(),
            "" | "pending" | "delivered" | "dead" | "terminal_unfollowable"
        ) {
            return Err(Status::invalid_argument(format!(
                "state: {:?} is not pending, delivered, dead or terminal_unfollowable",
                r.state
            )));
        }
        let rows = self
            .engine
            .store
            .followups(
                (!r.owner.is_empty()).then_some(r.owner.as_str()),
                (!r.state.is_empty()).then_some(r.state.as_str()),
                (!r.job_id.is_empty()).then_some(r.job_id.as_str()),
                token,
                limit,
            )
            .await
            .map_err(store)?;
        let next_page_token = next_token(rows.len(), limit, rows.last().map(|f| f.id.as_str()));
        Ok(Response::new(pb::ListDeliveriesResponse {
            deliveries: rows.iter().map(|f| delivery_out(f, &[])).collect(),
            next_page_token,
        }))
    }

    async fn get_delivery(
        &self,
        req: Request<pb::GetDeliveryRequest>,
    ) -> Result<Response<pb::Delivery>, Status> {
        let id = req.into_inner().id;
        job_id(&id)?;
        let f = self
            .engine
            .store
            .followup(&id)
            .await
            .map_err(store)?
            .ok_or_else(|| Status::not_found(format!("no delivery {id}")))?;
        let attempts = self.engine.store.attempts(&id).await.map_err(store)?;
        Ok(Response::new(delivery_out(&f, &attempts)))
    }

    async fn redeliver(
        &self,
        req: Request<pb::RedeliverRequest>,
    ) -> Result<Response<pb::Delivery>, Status> {
        let id = req.into_inner().id;
        job_id(&id)?;
        if !self.engine.store.redeliver(&id).await.map_err(store)? {
            return match self.engine.store.followup(&id).await.map_err(store)? {
                Some(f) if f.kind == "webhook" => Err(Status::failed_precondition(format!(
                    "delivery {id} is still pending: its next attempt is already due"
                ))),
                _ => Err(Status::not_found(format!("no webhook delivery {id}"))),
            };
        }
        self.engine.followups_due().notify_one();
        let f = self
            .engine
            .store
            .followup(&id)
            .await
            .map_err(store)?
            .ok_or_else(|| Status::not_found(format!("no delivery {id}")))?;
        let attempts = self.engine.store.attempts(&id).await.map_err(store)?;
        Ok(Response::new(delivery_out(&f, &attempts)))
    }

    async fn forget_owner(
        &self,
        req: Request<pb::ForgetOwnerRequest>,
    ) -> Result<Response<pb::ForgetOwnerResponse>, Status> {
        let owner = req.into_inner().owner;
        argos_common::principal::Principal::parse(&owner)
            .map_err(|e| Status::invalid_argument(format!("owner: {e}")))?;
        let (standing_approval_ids, removed) =
            self.engine.forget_owner(&owner).await.map_err(store)?;
        Ok(Response::new(pb::ForgetOwnerResponse {
            standing_approval_ids,
            removed,
        }))
    }

    type WatchJobsStream = WatchStream;

    async fn watch_jobs(
        &self,
        _req: Request<pb::WatchJobsRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        use tokio::sync::broadcast::error::RecvError;
        let mut changes = self.engine.changes.subscribe();
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let event = match changes.recv().await {
                    Ok(j) => pb::job_event::Event::Job(job_out(&j)),
                    Err(RecvError::Lagged(n)) => pb::job_event::Event::Missed(n),
                    Err(RecvError::Closed) => return,
                };
                if tx
                    .send(Ok(pb::JobEvent { event: Some(event) }))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
