//! Carrying tasks out: saving and approving versions, running one when asked, and the
//! scheduler — one loop that sleeps until the earliest task is due, starts the runs its
//! fires call for (the overlap and catch-up policies decide), and moves its cursor on.
//! A fire's run is recorded under a unique (task, fire time) key, so a scheduler
//! interrupted by a crash starts it at most once when it looks again.

use std::sync::Arc;
use std::time::Duration;

use argos_exec_client::ExecError;

use crate::engine::Engine;
use crate::followup::MAX_CHAIN_DEPTH;
use crate::job::{Invalid, Place, Spec};
use crate::schedule::{self, OnFire, Schedule};
use crate::store::{Inserted, Job, NewRun, StoreError, now_ms};
use crate::task::{Approved, Definition, Task, check_name};

/// Webhook deliveries one task takes per minute; more are refused (429).
pub const HOOKS_PER_MINUTE: u32 = 60;

/// Why a webhook delivery was refused (nothing ran).
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// No such task, no webhook, or the credentials do not check out: the same answer.
    #[error("unauthorized")]
    Unauthorized,
    #[error("this signed delivery was already taken")]
    Replayed,
    #[error("more than {HOOKS_PER_MINUTE} deliveries this minute")]
    RateLimited,
    #[error(transparent)]
    Task(#[from] TaskError),
}

impl From<StoreError> for HookError {
    fn from(e: StoreError) -> HookError {
        HookError::Task(TaskError::Store(e))
    }
}

/// Why a task could not be saved, approved or run.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("no task {0}")]
    NotFound(String),
    /// It may not run now (not approved, or a run is active and its overlap is `skip`).
    #[error("{0}")]
    Refused(String),
    /// execd refused the standing approval named, or is away.
    #[error("standing_approval_id: {0}")]
    Exec(ExecError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What an admin's save or approval brings: execd's standing approval and who gave it.
#[derive(Debug, Clone)]
pub struct Approval {
    pub standing_approval_id: String,
    pub by: String,
}

impl Engine {
    /// The standing approval named, if it is in force for `owner` and runs the task's
    /// place (its digest is execd's to check on every run).
    async fn approved(
        &self,
        a: &Approval,
        owner: &str,
        spec: &Spec,
        version: u32,
    ) -> Result<Approved, TaskError> {
        // A tool call runs nowhere at execd: its approval is the admin's, kept with the
        // version it approves (every save is a new version, which runs only once approved).
        if spec.tool.is_some() {
            if !a.standing_approval_id.is_empty() {
                return Err(TaskError::Refused(
                    "standing_approval_id: a tool call's approval has none (nothing at execd runs it)".into(),
                ));
            }
            return Ok(Approved {
                version,
                by: a.by.clone(),
                at_ms: now_ms(),
                standing_approval_id: String::new(),
                place: Place::Auto,
            });
        }
        if a.standing_approval_id.is_empty() {
            return Err(TaskError::Refused(
                "standing_approval_id: a command's approval is execd's standing approval of it"
                    .into(),
            ));
        }
        let place = spec.place;
        let s = self
            .exec()
            .get_standing(&a.standing_approval_id)
            .await
            .map_err(TaskError::Exec)?;
        if s.owner != owner || s.revoked_at_unix_ms != 0 {
            return Err(TaskError::Refused(format!(
                "standing_approval_id: {} is not in force for {owner}",
                a.standing_approval_id
            )));
        }
        let at = Place::from_wire(s.place).map_err(|e| crate::job::Invalid("place", e))?;
        if place != Place::Auto && place != at || at == Place::Auto {
            return Err(TaskError::Refused(format!(
                "standing_approval_id: {} runs elsewhere than the task asks",
                a.standing_approval_id
            )));
        }
        Ok(Approved {
            version,
            by: a.by.clone(),
            at_ms: now_ms(),
            standing_approval_id: a.standing_approval_id.clone(),
            place: at,
        })
    }

    /// Checks a task as it would be saved (defaults filled in), saving nothing.
    pub fn check_task(
        &self,
        name: &str,
        mut spec: Spec,
        schedule: Option<&Schedule>,
    ) -> Result<Spec, TaskError> {
        check_name(name)?;
        spec.name = name.to_string();
        spec.check(self.limits().default_runtime_ms)?;
        if let Some(s) = schedule {
            s.compile()?;
        }
        Ok(spec)
    }

    /// Saves a new task or a new version of one (`id`), approved when `approval` is given.
    pub async fn save_task(
        &self,
        id: Option<&str>,
        owner: &str,
        mut d: Definition,
        approval: Option<Approval>,
    ) -> Result<Task, TaskError> {
        d.spec = self.check_task(&d.name, d.spec, d.schedule.as_ref())?;
        self.check_followups(owner, &d.followups).await?;
        // Checked and saved together: two saves cannot each close half a cycle.
        let _one = self.saves_lock().lock().await;
        self.check_chain(id, owner, &d.followups.then).await?;
        let approved = match &approval {
            Some(a) => Some(self.approved(a, owner, &d.spec, 0).await?),
            None => None,
        };
        let t = self
            .store
            .save_task(id, owner, &d, approved.as_ref())
            .await?
            .ok_or_else(|| TaskError::NotFound(id.unwrap_or_default().to_string()))?;
        tracing::info!(task = %t.id, owner, version = t.version, approved = t.runnable().is_some(), "task saved");
        self.reschedule(&t).await
    }

    /// Approves `version` of task `id` (still its current one).
    pub async fn approve_task(
        &self,
        id: &str,
        version: u32,
        approval: Approval,
    ) -> Result<Task, TaskError> {
        let t = self.task_or_404(id).await?;
        if t.version != version {
            return Err(TaskError::Refused(format!(
                "version: task {id} is at version {}, not {version}",
                t.version
            )));
        }
        let a = self.approved(&approval, &t.owner, &t.spec, version).await?;
        if !self.store.approve_task(id, &a).await? {
            return Err(TaskError::Refused(format!(
                "version: task {id} changed while it was being approved"
            )));
        }
        tracing::info!(task = %id, version, by = %a.by, "task version approved");
        let t = self.task_or_404(id).await?;
        self.reschedule(&t).await
    }

    pub async fn set_paused(&self, id: &str, paused: bool) -> Result<Task, TaskError> {
        if !self.store.set_paused(id, paused).await? {
            return Err(TaskError::NotFound(id.to_string()));
        }
        let t = self.task_or_404(id).await?;
        self.reschedule(&t).await
    }

    pub async fn delete_task(&self, id: &str) -> Result<Task, TaskError> {
        let t = self.task_or_404(id).await?;
        self.store.delete_task(id).await?;
        self.tasks_changed().notify_one();
        tracing::info!(task = %id, "task removed");
        Ok(t)
    }

    async fn task_or_404(&self, id: &str) -> Result<Task, TaskError> {
        self.store
            .task(id)
            .await?
            .ok_or_else(|| TaskError::NotFound(id.to_string()))
    }

    /// Sets when the task fires next (nothing while paused, unscheduled or unapproved)
    /// and wakes the scheduler.
    async fn reschedule(&self, t: &Task) -> Result<Task, TaskError> {
        let next = match (&t.schedule, t.runnable(), t.paused) {
            (Some(s), Some(_), false) => s
                .compile()
                .ok()
                .and_then(|c| c.next_after(t.cursor_ms.max(now_ms() - 1)))
                .unwrap_or(0),
            _ => 0,
        };
        self.store
            .schedule_next(&t.id, t.version, t.cursor_ms, next)
            .await?;
        self.tasks_changed().notify_one();
        self.task_or_404(&t.id).await
    }

    /// Forgets `owner`: their tasks and delivery secret removed, their active jobs
    /// cancelled, their ended jobs and follow-ups removed; answers the standing approvals
    /// of the tasks removed and how much was removed.
    pub async fn forget_owner(&self, owner: &str) -> Result<(Vec<String>, u32), StoreError> {
        let mut standing = Vec::new();
        let mut removed = 0u32;
        loop {
            let tasks = self.store.tasks(Some(owner), None, 500).await?;
            if tasks.is_empty() {
                break;
            }
            for t in tasks {
                if let Some(a) = &t.approval {
                    standing.push(a.standing_approval_id.clone());
                }
                self.store.delete_task(&t.id).await?;
                removed += 1;
            }
        }
        self.tasks_changed().notify_one();
        for j in self
            .store
            .active()
            .await?
            .into_iter()
            .filter(|j| j.owner == owner)
        {
            self.cancel(&j.id).await?;
        }
        removed += self.store.forget_owner_records(owner).await?;
        tracing::info!(owner, removed, "owner forgotten");
        Ok((standing, removed))
    }

    /// Refuses chain edges from task `id` (None: a new task) to `then` that would close a
    /// cycle, or make a chain longer than `MAX_CHAIN_DEPTH`: one walk over all the owner's
    /// tasks, each visited once (depths remembered).
    async fn check_chain(
        &self,
        id: Option<&str>,
        owner: &str,
        then: &[String],
    ) -> Result<(), TaskError> {
        use std::collections::HashMap;
        if then.is_empty() {
            return Ok(());
        }
        let me = id.unwrap_or("(this task)").to_string();
        let mut edges: HashMap<String, Vec<String>> = HashMap::new();
        let mut before: Option<String> = None;
        loop {
            let page = self
                .store
                .tasks(Some(owner), before.as_deref(), 500)
                .await?;
            let (full, last) = (page.len() == 500, page.last().map(|t| t.id.clone()));
            for t in page {
                edges.insert(t.id, t.followups.then);
            }
            match last {
                Some(l) if full => before = Some(l),
                _ => break,
            }
        }
        edges.insert(me, then.to_vec());
        // Depth of the longest chain from each task; `None` while on the current path.
        let mut depth: HashMap<String, Option<usize>> = HashMap::new();
        // (A path already too deep stops there: the save is refused whatever lies beyond,
        // and the walk's depth stays bounded.)
        fn walk(
            at: &str,
            edges: &HashMap<String, Vec<String>>,
            depth: &mut HashMap<String, Option<usize>>,
            path: usize,
        ) -> Result<usize, String> {
            match depth.get(at) {
                Some(Some(d)) => return Ok(*d),
                Some(None) => return Err(at.to_string()),
                None => {}
            }
            if path > MAX_CHAIN_DEPTH {
                return Ok(MAX_CHAIN_DEPTH + 1);
            }
            depth.insert(at.to_string(), None);
            let mut deepest = 0;
            for next in edges.get(at).map(Vec::as_slice).unwrap_or_default() {
                deepest = deepest.max(walk(next, edges, depth, path + 1)? + 1);
            }
            depth.insert(at.to_string(), Some(deepest));
            Ok(deepest)
        }
        let mut starts: Vec<&String> = edges.keys().collect();
        starts.sort();
        for start in starts {
            match walk(start, &edges, &mut depth, 0) {
                Err(at) => {
                    return Err(
                        Invalid("follow_ups.then", format!("a cycle through task {at}")).into(),
                    );
                }
                Ok(d) if d > MAX_CHAIN_DEPTH => {
                    return Err(Invalid(
                        "follow_ups.then",
                        format!("a chain more than {MAX_CHAIN_DEPTH} tasks deep"),
                    )
                    .into());
                }
                Ok(_) => {}
            }
        }
        Ok(())
    }

    /// Starts task `t`'s run chained from run `from` (at most once per edge; never past
    /// `MAX_CHAIN_DEPTH`, never while `t` is paused).
    pub(crate) async fn chain_run(&self, t: &Task, from: &Job) -> Result<Option<Job>, TaskError> {
        if from.chain_depth as usize >= MAX_CHAIN_DEPTH {
            return Err(TaskError::Refused(format!(
                "the chain is already {MAX_CHAIN_DEPTH} runs deep"
            )));
        }
        if t.paused {
            return Err(TaskError::Refused(format!("task {} is paused", t.id)));
        }
        let overlap = t
            .schedule
            .as_ref()
            .map_or(schedule::Overlap::Allow, |s| s.overlap);
        let j = self.record_run(t, "chain", 0, overlap, Some(from)).await?;
        self.wake_launcher();
        Ok(j)
    }

    /// Runs task `id` now (its approved version), as its overlap policy says.
    pub async fn run_task(&self, id: &str) -> Result<Job, TaskError> {
        let t = self.task_or_404(id).await?;
        let overlap = t
            .schedule
            .as_ref()
            .map_or(schedule::Overlap::Allow, |s| s.overlap);
        match self.record_run(&t, "manual", 0, overlap, None).await? {
            Some(j) => {
                self.wake_launcher();
                Ok(self.store.get(&j.id).await?.unwrap_or(j))
            }
            None => Err(TaskError::Refused(format!(
                "task {id} has a run not yet ended and its overlap is skip"
            ))),
        }
    }

    /// Gives task `id` a webhook in `mode` (replacing any); answers the task and the new
    /// secret, which is kept only hashed or sealed and never answered again.
    pub async fn set_webhook(
        &self,
        id: &str,
        mode: Option<crate::hooks::Mode>,
    ) -> Result<(Task, String), TaskError> {
        let secret = mode.map(|_| crate::hooks::new_secret()).unwrap_or_default();
        let kept = mode.map(|m| (m, crate::hooks::stored(&self.key, id, m, &secret)));
        if !self
            .store
            .set_webhook(id, kept.as_ref().map(|(m, s)| (*m, s.as_str())))
            .await?
        {
            return Err(TaskError::NotFound(id.to_string()));
        }
        tracing::info!(task = %id, mode = mode.map_or("none", |m| m.as_str()), "task webhook set");
        Ok((self.task_or_404(id).await?, secret))
    }

    /// A webhook delivery to task `id`: checked, rate limited, then a run as the task's
    /// overlap policy says (a paused or unapproved task, or a busy one under `skip`, is
    /// refused). Nothing runs on a refusal.
    pub async fn trigger(
        &self,
        id: &str,
        p: &crate::hooks::Presented<'_>,
    ) -> Result<Job, HookError> {
        let now = now_ms();
        let t = self.store.task(id).await?.ok_or(HookError::Unauthorized)?;
        let Some((mode, kept, _)) = &t.webhook else {
            return Err(HookError::Unauthorized);
        };
        let passed = crate::hooks::check(&self.key, &t.id, *mode, kept, p, now)
            .ok_or(HookError::Unauthorized)?;
        if let crate::hooks::Passed::Signed {
            signature,
            expires_at_ms,
        } = &passed
            && !self
                .store
                .first_seen(&t.id, signature, *expires_at_ms)
                .await?
        {
            return Err(HookError::Replayed);
        }
        {
            let mut rate = self.hook_rate.lock().expect("hook rate");
            let minute = now / 60_000;
            let e = rate.entry(t.id.clone()).or_insert((minute, 0));
            if e.0 != minute {
                *e = (minute, 0);
            }
            if e.1 >= HOOKS_PER_MINUTE {
                return Err(HookError::RateLimited);
            }
            e.1 += 1;
        }
        if t.paused {
            return Err(TaskError::Refused(format!("task {id} is paused")).into());
        }
        let overlap = t
            .schedule
            .as_ref()
            .map_or(schedule::Overlap::Allow, |s| s.overlap);
        match self.record_run(&t, "webhook", 0, overlap, None).await? {
            Some(j) => {
                self.wake_launcher();
                Ok(j)
            }
            None => Err(TaskError::Refused(format!(
                "task {id} has a run not yet ended and its overlap is skip"
            ))
            .into()),
        }
    }

    /// Records one run of `t` (its approved version) as `overlap` says, given its runs
    /// not yet ended; None when skipped (or when this fire already has its run).
    /// Records one run of `t` (its approved version) as `overlap` says, given its runs not
    /// yet ended; None when skipped, or when this fire or chain edge already has its run.
    /// One at a time: the count and the insert cannot be split by another trigger.
    async fn record_run(
        &self,
        t: &Task,
        trigger: &str,
        scheduled_for_ms: i64,
        overlap: schedule::Overlap,
        chained: Option<&Job>,
    ) -> Result<Option<Job>, TaskError> {
        let Some(a) = t.runnable() else {
            return Err(TaskError::Refused(format!(
                "task {} version {} is not approved: an admin must approve it first",
                t.id, t.version
            )));
        };
        let _one = self.runs_lock().lock().await;
        let spec = Spec {
            place: a.place,
            ..t.spec.clone()
        };
        let run = NewRun {
            owner: &t.owner,
            spec: &spec,
            task_id: &t.id,
            task_version: a.version,
            trigger,
            scheduled_for_ms,
            standing_approval_id: &a.standing_approval_id,
            after_job: "",
            chained_from: chained.map_or("", |j| j.id.as_str()),
            chained_generation: chained.map_or(1, |j| j.generation),
            chain_depth: chained.map_or(0, |j| j.chain_depth + 1),
            followups: &t.followups,
            active_limit: self.limits().active_per_user,
        };
        // A fire or edge looked at again (after a crash) changes nothing, cancels nothing.
        if self.store.run_exists(&run).await? {
            return Ok(None);
        }
        let active = self.store.active_runs(&t.id).await?;
        let mut after = String::new();
        match schedule::on_fire(overlap, active.len()) {
            OnFire::Start => {}
            OnFire::Skip => {
                tracing::info!(task = %t.id, trigger, "a run is active and overlap is skip: this fire is skipped");
                return Ok(None);
            }
            OnFire::Queue => after = active.last().map(|j| j.id.clone()).unwrap_or_default(),
            OnFire::Replace => {
                for j in &active {
                    self.cancel(&j.id).await?;
                }
            }
        }
        match self
            .store
            .insert_run(&NewRun {
                after_job: &after,
                ..run
            })
            .await?
        {
            Inserted::Recorded(j) => {
                tracing::info!(task = %t.id, job = %j.id, trigger, scheduled_for_ms, "task run recorded");
                self.announce(&j);
                Ok(Some(*j))
            }
            Inserted::Exists => Ok(None),
            Inserted::Full => Err(TaskError::Refused(format!(
                "{} has {} jobs not yet ended (jobs.active_per_user)",
                t.owner,
                self.limits().active_per_user
            ))),
        }
    }

    /// Starts the runs due now, then sleeps until the next task is due or a task changes.
    pub(crate) async fn scheduler(self: Arc<Self>) {
        loop {
            let now = now_ms();
            match self.store.due_tasks(now).await {
                Ok(due) => {
                    for t in due {
                        if let Err(e) = self.fire_due(&t, now).await {
                            tracing::error!(task = %t.id, error = %e, "firing a task's schedule");
                        }
                    }
                }
                Err(e) => tracing::error!(error = %e, "reading the tasks due"),
            }
            let wait = match self.store.next_wake().await {
                Ok(Some(at)) => Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0)),
                _ => Duration::from_secs(60),
            }
            .min(Duration::from_secs(60));
            tokio::select! {
                _ = self.tasks_changed().notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// A due task's fires since its cursor: runs as its policies say, then the cursor
    /// moves to `now` and the next fire is set.
    async fn fire_due(&self, t: &Task, now: i64) -> Result<(), TaskError> {
        let Some(s) = &t.schedule else {
            return Ok(());
        };
        let c = match s.compile() {
            Ok(c) => c,
            Err(e) => {
                // Never fires (it was checked when saved): not looked at again.
                self.store.schedule_next(&t.id, t.version, now, 0).await?;
                return Err(e.into());
            }
        };
        if t.runnable().is_some() && !t.paused {
            let due = c.due(t.cursor_ms, now, s.catch_up);
            if due.skipped > 0 {
                tracing::warn!(task = %t.id, skipped = due.skipped, catch_up = ?s.catch_up, "missed fires not made up for");
            }
            for at in due.fires {
                match self.record_run(t, "schedule", at, s.overlap, None).await {
                    Ok(_) => {}
                    // The owner's limit: this fire is dropped, the schedule goes on.
                    Err(TaskError::Refused(why)) => {
                        tracing::warn!(task = %t.id, why, "a fire was not run");
                    }
                    Err(e) => return Err(e),
                }
            }
            self.wake_launcher();
        }
        let next = c.next_after(now).unwrap_or(0);
        self.store
            .schedule_next(&t.id, t.version, now, next)
            .await?;
        Ok(())
    }
}
