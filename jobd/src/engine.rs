//! Carrying jobs through execd: asking it to start them, following what becomes of their
//! executions, cancelling them, and pruning what ended long ago.
//!
//! Every job is in jobd's store, with its execution id, before execd hears of it. execd
//! answers a repeated `RequestRun` with the same id by the execution it already has, so a
//! job left `starting` by any crash is simply asked for again: it runs once. What becomes
//! of executions comes from execd's `Watch`; each time the watch (re)connects, or says it
//! missed changes, every job not yet ended is read again from execd (`Get`), so an end
//! that happened while jobd or execd was down is found. Nothing is signalled on a guess:
//! a cancel is execd's verified kill of that execution, and an execution execd cannot
//! account for is `lost` with execd's reason.
//!
//! A task's action may instead be an MCP tool call, made through mcpd as the owner. A
//! tool call cannot be asked about again, so it is made at most once: only when mcpd
//! answers (while it is away the job waits, queued), and a call that was in flight when
//! jobd stopped is `lost`, never made again on a guess.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use argos_exec_client::{ErrorKind, ExecClient, ExecError};
use argos_proto::exec::v1 as xpb;
use argos_proto::mcp::v1 as mpb;
use tokio::sync::{Notify, Semaphore, broadcast};
use tonic::transport::Channel;

use crate::job::{self, Place, Spec, State, ToolCall, ToolResult};
use crate::store::{Job, Move, Store, StoreError, now_ms};

/// How many jobs are being asked for at execd at once.
const LAUNCHING_AT_ONCE: usize = 8;
/// How long queued jobs wait for another try when nothing wakes the launcher.
const RETRY_EVERY: Duration = Duration::from_secs(2);
/// Attempts at a start that execd failed (not refused) before the job is failed.
const MAX_ATTEMPTS: u32 = 5;

/// Why a job could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error(transparent)]
    Invalid(#[from] job::Invalid),
    #[error("{0} has {1} jobs not yet ended (jobs.active_per_user)")]
    Exhausted(String, u64),
    /// execd refused it outright when first asked (a field, the gate): nothing was kept.
    #[error("{0}")]
    Refused(ExecError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a job could not be launched again.
#[derive(Debug, thiserror::Error)]
pub enum RelaunchError {
    #[error("no such job")]
    NotFound,
    #[error("{0}")]
    Refused(String),
    #[error("{0} has {1} jobs not yet ended (jobs.active_per_user)")]
    Exhausted(String, u64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Limits from the configuration.
#[derive(Debug, Clone)]
pub struct Limits {
    pub default_runtime_ms: u64,
    pub active_per_user: u64,
    pub retention_ms: u64,
    /// Hosts a webhook follow-up may reach though not public (`jobs.deliver_allow`).
    pub deliver_allow: Vec<String>,
}

pub struct Engine {
    /// Itself, for the work it spawns (a tool call outlives the ask that made it).
    this: Weak<Engine>,
    pub store: Store,
    exec: ExecClient,
    /// mcpd, for tasks whose action is a tool call.
    mcp: Channel,
    /// Tool calls in flight in this process, each with its cancel.
    calls: Mutex<HashMap<String, Arc<Notify>>>,
    limits: Limits,
    /// Every change of a job, for `WatchJobs`.
    pub changes: broadcast::Sender<Job>,
    /// Jobs being asked for at execd by this process right now.
    launching: Arc<Mutex<HashSet<String>>>,
    asking: Semaphore,
    /// Wakes the launcher: a job was queued, or one ended (a quota may have room).
    wake: Notify,
    /// Wakes the scheduler: a task changed.
    tasks_changed: Notify,
    /// Wakes the follow-up worker.
    followups_due: Notify,
    /// Held while a task's run is recorded (its overlap decided) and while a task is saved
    /// (its chain checked).
    runs_lock: tokio::sync::Mutex<()>,
    saves_lock: tokio::sync::Mutex<()>,
    /// jobd's key: webhook secrets are kept sealed or hashed under it.
    pub(crate) key: Arc<argos_store::key::Key>,
    /// Webhook deliveries taken per task in the current minute.
    pub(crate) hook_rate: Mutex<std::collections::HashMap<String, (i64, u32)>>,
}

/// What asking execd for a job came to.
enum Asked {
    /// Answered (started, waiting for its approval, or already ended).
    Answered,
    /// execd's quota for its owner is full: the owner's other jobs wait too.
    Full,
    /// execd away or failing: asked again later.
    Later,
}

impl Engine {
    pub fn new(
        store: Store,
        exec: ExecClient,
        mcp: Channel,
        limits: Limits,
        key: Arc<argos_store::key::Key>,
    ) -> Arc<Engine> {
        Arc::new_cyclic(|this| Engine {
            this: this.clone(),
            store,
            exec,
            mcp,
            calls: Mutex::default(),
            limits,
            changes: broadcast::channel(1024).0,
            launching: Arc::default(),
            asking: Semaphore::new(LAUNCHING_AT_ONCE),
            wake: Notify::new(),
            tasks_changed: Notify::new(),
            followups_due: Notify::new(),
            runs_lock: tokio::sync::Mutex::new(()),
            saves_lock: tokio::sync::Mutex::new(()),
            key,
            hook_rate: Mutex::default(),
        })
    }

    /// Starts the launcher, the watcher and the pruner.
    pub fn spawn(self: &Arc<Self>) {
        tokio::spawn(self.clone().launcher());
        tokio::spawn(self.clone().watcher());
        tokio::spawn(self.clone().pruner());
        tokio::spawn(self.clone().scheduler());
        tokio::spawn(self.clone().deliverer());
    }

    pub(crate) fn exec(&self) -> &ExecClient {
        &self.exec
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    pub(crate) fn tasks_changed(&self) -> &Notify {
        &self.tasks_changed
    }

    pub(crate) fn followups_due(&self) -> &Notify {
        &self.followups_due
    }

    pub(crate) fn runs_lock(&self) -> &tokio::sync::Mutex<()> {
        &self.runs_lock
    }

    pub(crate) fn saves_lock(&self) -> &tokio::sync::Mutex<()> {
        &self.saves_lock
    }

    /// A job ended: its follow-ups (jobd's start finds any this missed).
    async fn ended(&self, j: &Job) {
        if let Err(e) = self.follow_up(j).await {
            tracing::error!(job = %j.id, error = %e, "recording a job's follow-ups");
        }
    }

    pub(crate) fn wake_launcher(&self) {
        self.wake.notify_one();
    }

    /// Tells the watchers of a new job.
    pub(crate) fn announce(&self, j: &Job) {
        self.changed(j);
    }

    fn changed(&self, j: &Job) {
        let _ = self.changes.send(j.clone());
        if j.state.is_final() {
            self.wake.notify_one();
        }
    }

    /// Records a job for `owner` and asks execd for it at once; answers it as it then is.
    pub async fn create(
        &self,
        owner: &str,
        via: &str,
        mut spec: Spec,
        followups: crate::followup::FollowUps,
    ) -> Result<Job, CreateError> {
        spec.check(self.limits.default_runtime_ms)?;
        self.check_followups(owner, &followups)
            .await
            .map_err(|e| match e {
                crate::tasks::TaskError::Invalid(i) => CreateError::Invalid(i),
                crate::tasks::TaskError::Store(s) => CreateError::Store(s),
                other => CreateError::Invalid(crate::job::Invalid("follow_ups", other.to_string())),
            })?;
        let id = uuid::Uuid::now_v7().to_string();
        // Held from before the row exists: the launcher leaves it to this call.
        let _claim = Launching::claim(self, &id);
        let Some(j) = self
            .store
            .insert(&id, owner, via, &spec, self.limits.active_per_user)
            .await?
        else {
            return Err(CreateError::Exhausted(
                owner.to_string(),
                self.limits.active_per_user,
            ));
        };
        self.store.set_job_followups(&j.id, &followups).await?;
        tracing::info!(job = %j.id, owner, via, execution = %j.execution_id, "job recorded");
        let (refused, _) = {
            let _permit = self.asking.acquire().await;
            self.ask(&j).await?
        };
        if let Some(refused) = refused {
            return Err(CreateError::Refused(refused));
        }
        let now = self.store.get(&j.id).await?.unwrap_or(j);
        self.changed(&now);
        Ok(now)
    }

    /// One ask at execd for job `j` (claimed first; cancelled instead when its cancel came
    /// before it was ever asked).
    async fn ask(&self, j: &Job) -> Result<(Option<ExecError>, Asked), StoreError> {
        let Some(j) = self.store.get(&j.id).await? else {
            return Ok((None, Asked::Answered));
        };
        if j.cancel_requested {
            self.cancel_unstarted(&j).await?;
            return Ok((None, Asked::Answered));
        }
        if let Some(tool) = j.spec.tool.clone() {
            return self.ask_tool(&j, tool).await;
        }
        if self
            .store
            .transition(&j.id, j.generation, Move::Claim)
            .await?
            .is_none()
        {
            return Ok((None, Asked::Answered));
        }
        // A job asked for through the API that execd refuses outright is not kept (the
        // caller hears why); a task's run is kept, rejected, in the task's history.
        // (A job launched again keeps its history: refused then, it ends `rejected`.)
        let first = j.attempts == 0 && j.generation == 1 && j.task_id.is_empty();
        let req = xpb::RequestRunRequest {
            run: Some(j.spec.run_request()),
            purpose: j.spec.purpose.clone(),
            place: j.spec.place.wire() as i32,
            execution_id: j.execution_id.clone(),
            standing_approval_id: j.standing_approval_id.clone(),
            ..Default::default()
        };
        match self.exec.as_user(&j.owner).request_run(req).await {
            Ok(r) => {
                let e = r.execution.unwrap_or_default();
                let place = xpb::Place::try_from(r.place)
                    .ok()
                    .and_then(|p| Place::from_wire(p as i32).ok());
                let approval = r.approval.map(|a| a.id).unwrap_or_default();
                // Where it runs and what it waits for, whatever word about its state came
                // first (the watch may have told of a later state already).
                self.store
                    .set_where(&j.id, j.generation, place, &approval)
                    .await?;
                self.apply(&j, &e, place, &approval).await?;
                // A cancel that came while execd was being asked is carried out now.
                if let Some(now) = self.store.get(&j.id).await?
                    && now.cancel_requested
                    && !now.state.is_final()
                {
                    self.kill(&now).await?;
                }
                Ok((None, Asked::Answered))
            }
            Err(e) => match e.kind {
                ErrorKind::Exhausted => {
                    let why = format!("queued: {}", e.message);
                    if let Some(j) = self
                        .store
                        .transition(&j.id, j.generation, Move::Requeue { why: &why })
                        .await?
                    {
                        self.changed(&j);
                    }
                    Ok((None, Asked::Full))
                }
                ErrorKind::Unavailable | ErrorKind::Cancelled | ErrorKind::Raced => {
                    let why = format!("asking execd again: {}", e.message);
                    self.store.note(&j.id, j.generation, &why).await?;
                    Ok((None, Asked::Later))
                }
                ErrorKind::Internal if j.attempts + 1 < MAX_ATTEMPTS => {
                    tracing::warn!(job = %j.id, error = %e.message, "execd failed to start a job; asking again");
                    self.store.note(&j.id, j.generation, &e.message).await?;
                    Ok((None, Asked::Later))
                }
                ErrorKind::Internal | ErrorKind::DataLoss => {
                    let o = ended(
                        State::Failed,
                        format!("execd could not start it: {}", e.message),
                    );
                    self.settle(&j, &o, None, "").await?;
                    Ok((None, Asked::Answered))
                }
                // Refused: a field, the gate, this owner. Nothing ran.
                ErrorKind::InvalidArgument
                | ErrorKind::PermissionDenied
                | ErrorKind::Conflict
                | ErrorKind::NotFound => {
                    if first {
                        self.store.forget_refused(&j.id).await?;
                        tracing::info!(job = %j.id, error = %e.message, "execd refused a new job; not kept");
                        return Ok((Some(e), Asked::Answered));
                    }
                    let o = ended(State::Rejected, e.message.clone());
                    self.settle(&j, &o, None, "").await?;
                    Ok((None, Asked::Answered))
                }
            },
        }
    }

    /// Makes job `j`'s tool call through mcpd, once: only when mcpd answers (else it waits,
    /// queued, nothing sent), only while its task still runs the version it is a run of,
    /// and `running` from before the call is sent, so a restart finds it in flight and
    /// records it `lost` instead of calling again. Only a queued job is claimed: one left
    /// `starting` may have been sent by a jobd that stopped, and is `lost`.
    async fn ask_tool(
        &self,
        j: &Job,
        tool: ToolCall,
    ) -> Result<(Option<ExecError>, Asked), StoreError> {
        if j.state == State::Starting {
            let o = ended(State::Lost, STOPPED_MID_CALL.into());
            self.settle(j, &o, None, "").await?;
            return Ok((None, Asked::Answered));
        }
        // The approval a run was recorded under must still stand: an edit, a removal or
        // a withdrawn approval ends the version's queued runs unmade (as execd's revoked
        // standing approval does a command's).
        let task = self.store.task(&j.task_id).await?;
        if task
            .as_ref()
            .and_then(|t| t.runnable())
            .is_none_or(|a| a.version != j.task_version)
        {
            let o = ended(
                State::Rejected,
                format!(
                    "task {} no longer runs version {} (edited, removed or its approval withdrawn); nothing was called",
                    j.task_id, j.task_version
                ),
            );
            self.settle(j, &o, None, "").await?;
            return Ok((None, Asked::Answered));
        }
        let status = tonic::Request::new(argos_proto::common::v1::StatusRequest {});
        if let Err(e) = argos_common::grpc::daemon_status(self.mcp.clone(), status).await {
            let why = format!("waiting for mcpd to make its tool call: {}", e.message());
            self.store.note_queued(&j.id, j.generation, &why).await?;
            return Ok((None, Asked::Later));
        }
        let Some(me) = self.this.upgrade() else {
            return Ok((None, Asked::Later));
        };
        let cancel = Arc::new(Notify::new());
        self.calls
            .lock()
            .expect("calls")
            .insert(j.id.clone(), cancel.clone());
        let running = job::Outcome {
            state: State::Running,
            exit_code: None,
            reason: String::new(),
            started_at_ms: now_ms(),
            ended_at_ms: 0,
        };
        let claimed = self
            .store
            .transition(&j.id, j.generation, Move::ClaimTool)
            .await?
            .is_some()
            && self
                .store
                .transition(
                    &j.id,
                    j.generation,
                    Move::Settle {
                        outcome: &running,
                        place: None,
                        approval: "",
                    },
                )
                .await?
                .inspect(|now| self.changed(now))
                .is_some();
        if !claimed {
            self.calls.lock().expect("calls").remove(&j.id);
            // Its cancel came first: it ends unmade.
            if let Some(now) = self.store.get(&j.id).await?
                && now.cancel_requested
                && now.state == State::Queued
                && let Some(done) = self
                    .store
                    .transition(&j.id, j.generation, Move::CancelUnasked { starting: false })
                    .await?
            {
                self.ended(&done).await;
                self.changed(&done);
            }
            return Ok((None, Asked::Answered));
        }
        tracing::info!(job = %j.id, owner = %j.owner, tool = %tool.name, "calling a task's tool through mcpd");
        let j = j.clone();
        tokio::spawn(async move { me.call_tool(j, tool, cancel).await });
        Ok((None, Asked::Answered))
    }

    /// The tool call itself, as the job's owner, within its max runtime; ends the job with
    /// what mcpd answered.
    async fn call_tool(self: Arc<Self>, j: Job, tool: ToolCall, cancel: Arc<Notify>) {
        let req = argos_common::grpc::with_principal(
            tonic::Request::new(mpb::CallToolRequest {
                qualified_name: tool.name.clone(),
                arguments_json: tool.arguments.clone(),
                pinned_sha256: String::new(),
            }),
            Some(&j.owner),
            Some(&j.id),
        );
        let mut mcp = mpb::mcp_client::McpClient::new(self.mcp.clone())
            .max_decoding_message_size(MCP_ANSWER_MAX);
        let limit = Duration::from_millis(j.spec.max_runtime_ms);
        let (o, result) = tokio::select! {
            r = tokio::time::timeout(limit, mcp.call_tool(req)) => tool_outcome(r, j.spec.max_runtime_ms),
            () = cancel.notified() => (
                ended(
                    State::Cancelled,
                    "cancelled while its tool call was in flight; the server may have acted on it".into(),
                ),
                None,
            ),
        };
        let saved = match &result {
            Some(r) => self.store.save_tool_result(&j.id, j.generation, r).await,
            None => Ok(()),
        };
        if let Err(e) = saved.and(self.settle(&j, &o, None, "").await) {
            tracing::error!(job = %j.id, error = %e, "recording a tool call's end");
        }
        self.calls.lock().expect("calls").remove(&j.id);
    }

    /// Tool calls that were in flight when jobd last stopped: `lost` (jobd's start, before
    /// the launcher runs; nothing is in flight in this process yet).
    async fn lose_stopped_calls(&self) -> Result<(), StoreError> {
        for j in self.store.active().await? {
            if j.spec.tool.is_some() && matches!(j.state, State::Starting | State::Running) {
                let o = ended(State::Lost, STOPPED_MID_CALL.into());
                self.settle(&j, &o, None, "").await?;
            }
        }
        Ok(())
    }

    /// Moves job `j` to what execd says of its execution.
    async fn apply(
        &self,
        j: &Job,
        e: &xpb::Execution,
        place: Option<Place>,
        approval: &str,
    ) -> Result<(), StoreError> {
        let o = job::outcome(e, j.cancel_requested);
        self.settle(j, &o, place, approval).await
    }

    async fn settle(
        &self,
        j: &Job,
        o: &job::Outcome,
        place: Option<Place>,
        approval: &str,
    ) -> Result<(), StoreError> {
        if let Some(now) = self
            .store
            .transition(
                &j.id,
                j.generation,
                Move::Settle {
                    outcome: o,
                    place,
                    approval,
                },
            )
            .await?
        {
            if now.state.is_final() {
                tracing::info!(job = %now.id, state = now.state.as_str(), exit_code = ?now.exit_code, "job ended");
                self.ended(&now).await;
            }
            self.changed(&now);
        }
        Ok(())
    }

    /// Launches ended job `id` again as its next generation (see `Store::relaunch`); the
    /// launcher then asks for it as for any queued job.
    pub async fn relaunch(&self, id: &str, generation: u32) -> Result<Job, RelaunchError> {
        let j = self.store.get(id).await?.ok_or(RelaunchError::NotFound)?;
        let refused = if !j.task_id.is_empty() {
            Some(format!(
                "job {id} is a run of task {}: run the task again instead",
                j.task_id
            ))
        } else if j.generation != generation {
            Some(format!(
                "generation: job {id} is at generation {}, not {generation}",
                j.generation
            ))
        } else if !j.state.is_final() {
            Some(format!("job {id} has not ended ({})", j.state.as_str()))
        } else {
            None
        };
        if let Some(why) = refused {
            return Err(RelaunchError::Refused(why));
        }
        let relaunched = self
            .store
            .transition(
                id,
                generation,
                Move::Relaunch {
                    active_limit: self.limits.active_per_user,
                },
            )
            .await?;
        if relaunched.is_none() {
            let now = self.store.get(id).await?.ok_or(RelaunchError::NotFound)?;
            return Err(if now.generation != generation || !now.state.is_final() {
                RelaunchError::Refused(format!("job {id} was launched again meanwhile"))
            } else if !self.store.is_followed_up(id).await? {
                RelaunchError::Refused(format!(
                    "job {id}'s follow-ups are still being recorded: try again in a moment"
                ))
            } else {
                RelaunchError::Exhausted(j.owner.clone(), self.limits.active_per_user)
            });
        }
        let now = self.store.get(id).await?.ok_or(RelaunchError::NotFound)?;
        tracing::info!(job = %id, owner = %now.owner, generation = now.generation, execution = %now.execution_id, "job launched again");
        self.changed(&now);
        self.wake.notify_one();
        Ok(now)
    }

    /// Cancels job `id`: a job never asked for ends at once; one waiting for its
    /// approval is withdrawn and a running one killed, both by execd. Answers the job as
    /// it then is (None: no such job).
    pub async fn cancel(&self, id: &str) -> Result<Option<Job>, StoreError> {
        let Some(j) = self.store.request_cancel(id).await? else {
            return Ok(None);
        };
        if j.state.is_final() {
            return Ok(Some(j));
        }
        self.changed(&j);
        if j.spec.tool.is_some() && j.state != State::Queued {
            let in_flight = self.calls.lock().expect("calls").get(&j.id).cloned();
            match in_flight {
                Some(cancel) => cancel.notify_one(),
                None => {
                    let o = ended(
                        State::Cancelled,
                        "cancelled; its tool call was not in flight".into(),
                    );
                    self.settle(&j, &o, None, "").await?;
                }
            }
            // The call's end is recorded by its task: wait for it briefly, so the answer
            // says it ended.
            for _ in 0..50 {
                match self.store.get(id).await? {
                    Some(now) if !now.state.is_final() => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    other => return Ok(other),
                }
            }
            return self.store.get(id).await;
        }
        match j.state {
            State::Queued => {
                if let Some(done) = self
                    .store
                    .transition(&j.id, j.generation, Move::CancelUnasked { starting: false })
                    .await?
                {
                    self.ended(&done).await;
                    self.changed(&done);
                }
            }
            // Being asked for by this process: its answer is followed by the kill.
            State::Starting if self.launching.lock().expect("launching").contains(&j.id) => {}
            State::Starting => self.cancel_unstarted(&j).await?,
            _ => self.kill(&j).await?,
        }
        self.store.get(id).await
    }

    /// A cancelled job that may or may not have reached execd: if execd has its
    /// execution, that is withdrawn or killed; if not, it never started.
    async fn cancel_unstarted(&self, j: &Job) -> Result<(), StoreError> {
        if j.state == State::Queued || j.attempts == 0 {
            if let Some(done) = self
                .store
                .transition(&j.id, j.generation, Move::CancelUnasked { starting: true })
                .await?
            {
                self.ended(&done).await;
                self.changed(&done);
            }
            return Ok(());
        }
        match self
            .exec
            .as_user(&j.owner)
            .get(&j.execution_id, false)
            .await
        {
            Ok(r) => {
                let e = r.execution.unwrap_or_default();
                self.apply(j, &e, None, "").await?;
                if let Some(now) = self.store.get(&j.id).await?
                    && !now.state.is_final()
                {
                    self.kill(&now).await?;
                }
            }
            Err(e) if e.kind == ErrorKind::NotFound => {
                // Never reached execd. (Should a request still in flight land later,
                // the watcher kills what it starts: the job is cancelled.)
                if let Some(done) = self
                    .store
                    .transition(&j.id, j.generation, Move::CancelUnasked { starting: true })
                    .await?
                {
                    self.ended(&done).await;
                    self.changed(&done);
                }
            }
            Err(e) => {
                tracing::warn!(job = %j.id, error = %e.message, "cancelling: execd not reached; the watcher carries it out");
            }
        }
        Ok(())
    }

    /// execd's verified kill of the job's execution (a withdrawal while it waits for its
    /// approval). execd away: the watcher asks again when it is back.
    async fn kill(&self, j: &Job) -> Result<(), StoreError> {
        match self.exec.as_user(&j.owner).kill(&j.execution_id).await {
            Ok(r) => {
                let outcome = xpb::KillOutcome::try_from(r.outcome).unwrap_or_default();
                tracing::info!(job = %j.id, execution = %j.execution_id, ?outcome, "job cancelled at execd");
                if let Some(e) = r.execution {
                    self.apply(j, &e, None, "").await?;
                }
            }
            Err(e) => {
                tracing::warn!(job = %j.id, error = %e.message, "cancelling at execd failed; asked again when execd is back");
            }
        }
        Ok(())
    }

    /// Asks execd for queued jobs (and those left starting by a crash), oldest first,
    /// a few at a time; an owner whose quota at execd is full waits, this round, for one
    /// of their jobs to end.
    async fn launcher(self: Arc<Self>) {
        if let Err(e) = self.lose_stopped_calls().await {
            tracing::error!(error = %e, "recording tool calls in flight when jobd stopped");
        }
        loop {
            let pending = match self.store.to_launch(512).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::error!(error = %e, "reading jobs to start");
                    Vec::new()
                }
            };
            let mut full: HashSet<String> = HashSet::new();
            let mut asks = tokio::task::JoinSet::new();
            for j in pending {
                if full.contains(&j.owner) {
                    continue;
                }
                let Some(claim) = Launching::claim(&self, &j.id) else {
                    continue; // being asked for by a call
                };
                let me = self.clone();
                asks.spawn(async move {
                    let r = {
                        let _claim = claim;
                        let _permit = me.asking.acquire().await;
                        me.ask(&j).await
                    };
                    (j.owner, r)
                });
                if asks.len() >= LAUNCHING_AT_ONCE
                    && let Some(Ok((owner, r))) = asks.join_next().await
                {
                    note_full(&mut full, owner, r);
                }
            }
            while let Some(done) = asks.join_next().await {
                if let Ok((owner, r)) = done {
                    note_full(&mut full, owner, r);
                }
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(RETRY_EVERY) => {}
            }
        }
    }

    /// Follows execd's `Watch`; on every (re)connection and every missed change, reads
    /// every job not yet ended again from execd.
    async fn watcher(self: Arc<Self>) {
        let mut backoff =
            argos_common::backoff::Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        loop {
            match self.exec.watch().await {
                Ok(mut stream) => {
                    backoff.reset();
                    self.reconcile().await;
                    // Every 30 s, every job is read again anyway: a word missed for any
                    // reason does not leave a job behind for long.
                    let mut again = tokio::time::interval(Duration::from_secs(30));
                    again.tick().await;
                    loop {
                        let ev = tokio::select! {
                            m = stream.message() => match m {
                                Ok(Some(ev)) => ev,
                                _ => break,
                            },
                            _ = again.tick() => {
                                self.reconcile().await;
                                continue;
                            }
                        };
                        match ev.event {
                            Some(xpb::watch_event::Event::Execution(e)) => {
                                if let Err(err) = self.on_execution(&e).await {
                                    tracing::error!(error = %err, "recording an execution's change");
                                }
                            }
                            Some(xpb::watch_event::Event::Missed(n)) => {
                                tracing::warn!(
                                    missed = n,
                                    "execd's watch dropped changes; reading every job again"
                                );
                                self.reconcile().await;
                            }
                            _ => {}
                        }
                    }
                    tracing::info!("execd's watch ended; connecting again");
                }
                Err(e) => {
                    tracing::debug!(error = %e.message, "execd's watch: not reachable yet");
                }
            }
            backoff.wait().await;
        }
    }

    /// An execution changed at execd: its job follows (a late start of a job cancelled
    /// before it ever started is killed).
    async fn on_execution(&self, e: &xpb::Execution) -> Result<(), StoreError> {
        let Some(j) = self.store.by_execution(&e.id).await? else {
            return Ok(());
        };
        if j.state.is_final() {
            let status = xpb::ExecutionStatus::try_from(e.status).unwrap_or_default();
            if j.state == State::Cancelled && status == xpb::ExecutionStatus::Running {
                tracing::warn!(job = %j.id, execution = %e.id, "a cancelled job's request reached execd late; killing it");
                let _ = self.exec.as_user(&j.owner).kill(&e.id).await;
            }
            return Ok(());
        }
        // (Also for a job whose ask is still being answered: this word may be newer than
        // the answer, which then changes nothing — a job moves only forward.)
        self.apply(&j, e, None, "").await?;
        if j.cancel_requested
            && let Some(now) = self.store.get(&j.id).await?
            && !now.state.is_final()
        {
            self.kill(&now).await?;
        }
        Ok(())
    }

    /// Reads every job that execd has (awaiting its approval, running) again, and carries
    /// out cancels that could not reach execd.
    async fn reconcile(&self) {
        let active = match self.store.active().await {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, "reading the active jobs");
                return;
            }
        };
        for j in active {
            // (A tool call is not execd's: its own task ends it.)
            if !matches!(j.state, State::AwaitingApproval | State::Running) || j.spec.tool.is_some()
            {
                continue;
            }
            let r = match self
                .exec
                .as_user(&j.owner)
                .get(&j.execution_id, false)
                .await
            {
                Ok(r) => r,
                Err(e) if e.kind == ErrorKind::NotFound => {
                    let o = ended(
                        State::Lost,
                        "execd has no record of its execution any more".into(),
                    );
                    if let Err(err) = self.settle(&j, &o, None, "").await {
                        tracing::error!(error = %err, "recording a lost job");
                    }
                    continue;
                }
                Err(e) => {
                    tracing::info!(error = %e.message, "reconciling: execd not reached; later");
                    return;
                }
            };
            if let Err(err) = self.on_execution(&r.execution.unwrap_or_default()).await {
                tracing::error!(error = %err, "reconciling a job");
            }
        }
    }

    /// The head and tail of an ended job's output, from execd (None where execd has it
    /// no more, or is away).
    pub async fn output(&self, j: &Job) -> (Option<xpb::Output>, Option<xpb::Output>) {
        match self.exec.as_user(&j.owner).get(&j.execution_id, true).await {
            Ok(r) => (r.stdout, r.stderr),
            Err(e) => {
                tracing::info!(job = %j.id, error = %e.message, "a job's output could not be read");
                (None, None)
            }
        }
    }

    /// Removes jobs that ended more than `jobs.retention_days` ago, hourly.
    async fn pruner(self: Arc<Self>) {
        if self.limits.retention_ms == 0 {
            return;
        }
        loop {
            let cut = now_ms() - i64::try_from(self.limits.retention_ms).unwrap_or(i64::MAX);
            match self.store.prune(cut).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(pruned = n, "ended jobs past their retention removed"),
                Err(e) => tracing::error!(error = %e, "pruning jobs"),
            }
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    }
}

fn note_full(
    full: &mut HashSet<String>,
    owner: String,
    r: Result<(Option<ExecError>, Asked), StoreError>,
) {
    match r {
        Ok((_, Asked::Full)) => {
            full.insert(owner);
        }
        Ok(_) => {}
        Err(e) => tracing::error!(error = %e, "starting a job"),
    }
}

/// A job this process is asking execd for; released when dropped.
struct Launching(Arc<Mutex<HashSet<String>>>, String);

impl Launching {
    /// None: already being asked for.
    fn claim(e: &Engine, id: &str) -> Option<Launching> {
        e.launching
            .lock()
            .expect("launching")
            .insert(id.to_string())
            .then(|| Launching(e.launching.clone(), id.to_string()))
    }
}

impl Drop for Launching {
    fn drop(&mut self) {
        self.0.lock().expect("launching").remove(&self.1);
    }
}

/// Why a tool call that may have been sent when jobd stopped is `lost`.
const STOPPED_MID_CALL: &str = "jobd stopped while its tool call was in flight; what the server did is not known, and a tool call is never made again on a guess";

/// The largest answer jobd reads from mcpd: above mcpd's caps on a result (4 MiB of
/// content, with its framing), so a call that acted is never lost to a decode limit.
const MCP_ANSWER_MAX: usize = 16 * 1024 * 1024;

/// Where mcpd's answer to a tool call (or its max runtime) leaves the job, and what to keep.
fn tool_outcome(
    r: Result<
        Result<tonic::Response<mpb::CallToolResponse>, tonic::Status>,
        tokio::time::error::Elapsed,
    >,
    max_runtime_ms: u64,
) -> (job::Outcome, Option<ToolResult>) {
    use tonic::Code;
    match r {
        Err(_) => (
            ended(
                State::TimedOut,
                format!(
                    "its max runtime ({max_runtime_ms} ms) ended the tool call; the server may have acted on it"
                ),
            ),
            None,
        ),
        Ok(Ok(answer)) => {
            let a = answer.into_inner();
            let text = a
                .content
                .iter()
                .map(|c| match &c.kind {
                    Some(mpb::content::Kind::Text(t)) => t.clone(),
                    Some(mpb::content::Kind::Image(i)) => {
                        format!("[an image, {}, {} bytes]", i.mime_type, i.data.len())
                    }
                    Some(mpb::content::Kind::ResourceJson(j)) => j.clone(),
                    None => String::new(),
                })
                .collect::<Vec<_>>()
                .join("\n");
            let (state, reason) = if a.is_error {
                (State::Failed, "the tool answered with an error".to_string())
            } else {
                (State::Succeeded, String::new())
            };
            let kept = ToolResult {
                text,
                structured: a.structured_json,
                is_error: a.is_error,
                truncated: a.truncated,
                server: a.server,
            };
            (ended(state, reason), Some(kept))
        }
        Ok(Err(status)) => {
            let m = status.message();
            match status.code() {
                // mcpd's own refusals, before anything was sent upstream (the tool's
                // server at its bound of calls in flight among them).
                Code::InvalidArgument
                | Code::NotFound
                | Code::FailedPrecondition
                | Code::PermissionDenied
                | Code::ResourceExhausted => (
                    ended(
                        State::Rejected,
                        format!("mcpd refused the tool call; nothing was called: {m}"),
                    ),
                    None,
                ),
                // The call went out: what came back may carry the upstream server's words,
                // kept with the result (marked untrusted), not in the job's reason.
                code => (
                    ended(
                        State::Failed,
                        format!(
                            "the tool call failed ({code:?}); what came back is kept as its result; it is not made again on a guess"
                        ),
                    ),
                    Some(ToolResult {
                        text: m.to_string(),
                        is_error: true,
                        ..Default::default()
                    }),
                ),
            }
        }
    }
}

/// An end jobd records itself (execd refused or failed the start).
fn ended(state: State, reason: String) -> job::Outcome {
    job::Outcome {
        state,
        exit_code: None,
        reason,
        started_at_ms: 0,
        ended_at_ms: now_ms(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call mcpd did not send — refused, or its server at its bound of calls in flight
    /// — ends `rejected` (nothing was called); one that went out and failed, `failed`.
    #[test]
    fn a_call_mcpd_did_not_send_is_rejected_and_one_it_sent_failed() {
        let busy = tonic::Status::resource_exhausted(
            "server s has 32 tool calls in flight, the most it may (mcp.calls_per_server): this one was not sent",
        );
        let (o, kept) = tool_outcome(Ok(Err(busy)), 1000);
        assert_eq!(o.state, State::Rejected, "{}", o.reason);
        assert!(
            o.reason.contains("nothing was called") && o.reason.contains("in flight"),
            "{}",
            o.reason
        );
        assert!(kept.is_none());
        let failed = tonic::Status::unknown("tool mcp__s__t: the server refused the call");
        let (o, kept) = tool_outcome(Ok(Err(failed)), 1000);
        assert_eq!(o.state, State::Failed, "{}", o.reason);
        assert!(kept.is_some_and(|k| k.is_error));
    }
}
