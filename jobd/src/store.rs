//! jobd's own database: the jobs. A job moves only by [`Store::transition`]: the pure
//! [`crate::job::next`] decides where a [`Move`] takes it, and one UPDATE conditional on
//! the generation, state and standing it was decided from applies it, so a late or
//! repeated word about an older launch, or about a job that already ended, changes
//! nothing; and a job moves only forward (queued/starting → awaiting_approval → running →
//! an end), as `job.rs`'s property tests hold.

use sqlx::Row as _;
use sqlx::sqlite::{SqlitePool, SqliteRow};

use crate::job::{self, Event, Outcome, Place, Spec, Standing, State};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// A job as kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: String,
    pub owner: String,
    pub via: String,
    pub spec: Spec,
    pub state: State,
    pub generation: u32,
    pub execution_id: String,
    /// Where execd runs it, once it answered.
    pub place: Option<Place>,
    pub approval_id: String,
    pub exit_code: Option<i32>,
    pub reason: String,
    pub cancel_requested: bool,
    /// Its follow-ups for this generation are recorded.
    pub followed_up: bool,
    pub attempts: u32,
    pub created_at_ms: i64,
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
    /// The task it is a run of ("": none), which version, what started it, when the
    /// schedule said it was due, the standing approval it runs under, and the run it
    /// waits for (overlap `queue`).
    pub task_id: String,
    pub task_version: u32,
    pub trigger: String,
    pub scheduled_for_ms: i64,
    pub standing_approval_id: String,
    pub after_job: String,
    /// What it asks for when it ends, and the run it was chained from.
    pub followups: crate::followup::FollowUps,
    pub chained_from: String,
    pub chain_depth: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Open(#[from] argos_store::StoreError),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("job {0}: its stored record cannot be read ({1})")]
    Corrupt(String, String),
}

/// A run of a task to record.
#[derive(Debug)]
pub struct NewRun<'a> {
    pub owner: &'a str,
    pub spec: &'a Spec,
    pub task_id: &'a str,
    pub task_version: u32,
    pub trigger: &'a str,
    pub scheduled_for_ms: i64,
    pub standing_approval_id: &'a str,
    pub after_job: &'a str,
    /// The run this one follows on (trigger `chain`) and that run's generation, and how
    /// deep in its chain it is.
    pub chained_from: &'a str,
    pub chained_generation: u32,
    pub chain_depth: u32,
    pub followups: &'a crate::followup::FollowUps,
    /// The owner's jobs not yet ended may not exceed this (0: no limit).
    pub active_limit: u64,
}

/// What recording a task's run came to.
#[derive(Debug)]
pub enum Inserted {
    Recorded(Box<Job>),
    /// This fire or chain edge already has its run.
    Exists,
    /// The owner has `jobs.active_per_user` jobs not yet ended.
    Full,
}

/// A move of a job, with what it records; [`job::next`] decides whether it happens.
#[derive(Debug, Clone, Copy)]
pub enum Move<'a> {
    /// Asked for at execd: queued (or starting: asked again) → starting, the attempt
    /// counted.
    Claim,
    /// Its tool call made: queued → starting, unless its cancel was asked.
    ClaimTool,
    /// execd was full: starting → queued, saying why it waits (execd recorded nothing, so
    /// the next ask gets an execution id chosen then, within execd's window for new ids).
    Requeue { why: &'a str },
    /// What execd said of its execution, with where it runs and the approval it waits
    /// for ("" and `None`: as it was).
    Settle {
        outcome: &'a Outcome,
        place: Option<Place>,
        approval: &'a str,
    },
    /// Cancelled before it was ever asked for (`starting` too: execd was found not to
    /// have it).
    CancelUnasked { starting: bool },
    /// An ended job (not a task's run) whose follow-ups are recorded, launched again as its
    /// next generation: queued, with a new execution id, its end, place and reason
    /// cleared; within the owner's limit of jobs not yet ended (0: none).
    Relaunch { active_limit: u64 },
}

impl Move<'_> {
    fn event(&self, j: &Job) -> Event {
        match self {
            Move::Claim => Event::Claim,
            Move::ClaimTool => Event::ClaimTool,
            Move::Requeue { .. } => Event::Requeue,
            Move::Settle {
                outcome,
                place,
                approval,
            } => Event::Settle {
                to: outcome.state,
                news: (place.is_some() && *place != j.place)
                    || (!approval.is_empty() && *approval != j.approval_id),
            },
            Move::CancelUnasked { starting } => Event::CancelUnasked {
                starting: *starting,
            },
            Move::Relaunch { .. } => Event::Relaunch,
        }
    }
}

/// A listing's filter.
#[derive(Debug, Default, Clone)]
pub struct Filter<'a> {
    pub owner: Option<&'a str>,
    pub state: Option<State>,
    pub active: bool,
    pub before_id: Option<&'a str>,
    pub limit: u32,
    pub task_id: Option<&'a str>,
}

pub use argos_store::now_ms;

/// The states not yet ended, as SQL's list (a literal: sqlx takes only static text).
macro_rules! active {
    () => {
        "('queued','starting','awaiting_approval','running')"
    };
}

/// A place as kept ("": none yet).
fn place_str(p: Option<Place>) -> &'static str {
    p.map_or("", Place::as_str)
}

fn row(r: &SqliteRow) -> Result<Job, StoreError> {
    let id: String = r.get("id");
    let corrupt = |why: String| StoreError::Corrupt(id.clone(), why);
    let spec: String = r.get("spec");
    let state: String = r.get("state");
    Ok(Job {
        spec: serde_json::from_str(&spec).map_err(|e| corrupt(e.to_string()))?,
        state: State::parse(&state).ok_or_else(|| corrupt(format!("state {state:?}")))?,
        owner: r.get("owner"),
        via: r.get("via"),
        generation: u32::try_from(r.get::<i64, _>("generation")).unwrap_or(u32::MAX),
        execution_id: r.get("execution_id"),
        place: Place::parse(r.get("place")),
        approval_id: r.get("approval_id"),
        exit_code: r
            .get::<Option<i64>, _>("exit_code")
            .and_then(|c| i32::try_from(c).ok()),
        reason: r.get("reason"),
        cancel_requested: r.get::<i64, _>("cancel_requested") != 0,
        followed_up: r.get::<i64, _>("followed_up") != 0,
        attempts: u32::try_from(r.get::<i64, _>("attempts")).unwrap_or(u32::MAX),
        created_at_ms: r.get("created_at_ms"),
        started_at_ms: r.get("started_at_ms"),
        ended_at_ms: r.get("ended_at_ms"),
        task_id: r.get("task_id"),
        task_version: u32::try_from(r.get::<i64, _>("task_version")).unwrap_or(0),
        trigger: r.get("trigger"),
        scheduled_for_ms: r.get("scheduled_for_ms"),
        standing_approval_id: r.get("standing_approval_id"),
        after_job: r.get("after_job"),
        followups: {
            let text: String = r.get("followups");
            if text.is_empty() {
                Default::default()
            } else {
                serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?
            }
        },
        chained_from: r.get("chained_from"),
        chain_depth: u32::try_from(r.get::<i64, _>("chain_depth")).unwrap_or(0),
        id: id.clone(),
    })
}

#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
}

impl Store {
    pub async fn open(path: &std::path::Path) -> Result<Store, StoreError> {
        Ok(Store {
            // Commit: a job or task a user was told is made, a schedule's run that was
            // started, a delivery that was sent, must not come back undone after a
            // power cut (it would run twice, or never).
            pool: argos_store::open(path, &MIGRATOR, argos_store::Durability::Commit).await?,
        })
    }

    pub(crate) fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Records a new job (queued, generation 1, its execution id chosen) if its owner has
    /// fewer than `active_limit` not yet ended (0: no limit); `None` when at the limit.
    pub async fn insert(
        &self,
        id: &str,
        owner: &str,
        via: &str,
        spec: &Spec,
        active_limit: u64,
    ) -> Result<Option<Job>, StoreError> {
        let execution_id = uuid::Uuid::now_v7().to_string();
        let spec_text = serde_json::to_string(spec).expect("a spec serializes");
        let limit = i64::try_from(active_limit).unwrap_or(i64::MAX);
        // One statement: the count and the insert cannot be split by another insert.
        let inserted = sqlx::query(concat!(
            "INSERT INTO jobs (id, owner, via, spec, state, generation, execution_id, created_at_ms)
             SELECT ?1, ?2, ?3, ?4, 'queued', 1, ?5, ?6
             WHERE ?7 = 0 OR (SELECT count(*) FROM jobs WHERE owner = ?2 AND state IN ",
            active!(),
            ") < ?7"
        ))
        .bind(id)
        .bind(owner)
        .bind(via)
        .bind(&spec_text)
        .bind(&execution_id)
        .bind(now_ms())
        .bind(limit)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1;
        if !inserted {
            return Ok(None);
        }
        self.get(id).await
    }

    /// Records a run of a task (queued, its execution id chosen): at most one per fire of
    /// its schedule (`None` when this fire already has its run).
    pub async fn insert_run(&self, run: &NewRun<'_>) -> Result<Inserted, StoreError> {
        let id = uuid::Uuid::now_v7().to_string();
        let execution_id = uuid::Uuid::now_v7().to_string();
        let spec_text = serde_json::to_string(run.spec).expect("a spec serializes");
        let inserted = sqlx::query(concat!(
            "INSERT INTO jobs (id, owner, via, spec, state, generation, execution_id, created_at_ms,
               task_id, task_version, trigger, scheduled_for_ms, standing_approval_id, after_job,
               chained_from, followups, chain_depth, chained_generation)
             SELECT ?1, ?2, 'task', ?3, 'queued', 1, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?16
             WHERE ?15 = 0 OR (SELECT count(*) FROM jobs WHERE owner = ?2 AND state IN ",
            active!(),
            ") < ?15
             ON CONFLICT DO NOTHING"
        ))
        .bind(&id)
        .bind(run.owner)
        .bind(&spec_text)
        .bind(&execution_id)
        .bind(now_ms())
        .bind(run.task_id)
        .bind(i64::from(run.task_version))
        .bind(run.trigger)
        .bind(run.scheduled_for_ms)
        .bind(run.standing_approval_id)
        .bind(run.after_job)
        .bind(run.chained_from)
        .bind(if run.followups.is_empty() {
            String::new()
        } else {
            serde_json::to_string(run.followups).expect("serializes")
        })
        .bind(i64::from(run.chain_depth))
        .bind(i64::try_from(run.active_limit).unwrap_or(i64::MAX))
        .bind(i64::from(run.chained_generation))
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1;
        if inserted {
            return Ok(self
                .get(&id)
                .await?
                .map_or(Inserted::Exists, |j| Inserted::Recorded(Box::new(j))));
        }
        Ok(if self.run_exists(run).await? {
            Inserted::Exists
        } else {
            Inserted::Full
        })
    }

    /// Whether this fire (`schedule`) or chain edge (`chain`) already has its run.
    pub async fn run_exists(&self, run: &NewRun<'_>) -> Result<bool, StoreError> {
        let found: Option<String> = match run.trigger {
            "schedule" => {
                sqlx::query_scalar(
                    "SELECT id FROM jobs WHERE task_id = ? AND scheduled_for_ms = ? AND trigger = 'schedule'",
                )
                .bind(run.task_id)
                .bind(run.scheduled_for_ms)
                .fetch_optional(&self.pool)
                .await?
            }
            "chain" => {
                sqlx::query_scalar(
                    "SELECT id FROM jobs WHERE task_id = ? AND chained_from = ?
                       AND chained_generation = ? AND trigger = 'chain'",
                )
                .bind(run.task_id)
                .bind(run.chained_from)
                .bind(i64::from(run.chained_generation))
                .fetch_optional(&self.pool)
                .await?
            }
            _ => None,
        };
        Ok(found.is_some())
    }

    /// A task's runs that have not ended, oldest first.
    pub async fn active_runs(&self, task_id: &str) -> Result<Vec<Job>, StoreError> {
        sqlx::query(concat!(
            "SELECT * FROM jobs WHERE task_id = ? AND state IN ",
            active!(),
            " ORDER BY id"
        ))
        .bind(task_id)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(row)
        .collect()
    }

    pub async fn get(&self, id: &str) -> Result<Option<Job>, StoreError> {
        sqlx::query("SELECT * FROM jobs WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(row)
            .transpose()
    }

    /// The job whose current launch is execution `id`.
    pub async fn by_execution(&self, id: &str) -> Result<Option<Job>, StoreError> {
        sqlx::query("SELECT * FROM jobs WHERE execution_id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(row)
            .transpose()
    }

    /// Newest first.
    pub async fn list(&self, f: &Filter<'_>) -> Result<Vec<Job>, StoreError> {
        sqlx::query(concat!(
            "SELECT * FROM jobs WHERE (?1 IS NULL OR owner = ?1) AND (?2 IS NULL OR state = ?2)
               AND (NOT ?3 OR state IN ",
            active!(),
            ") AND (?4 IS NULL OR id < ?4) AND (?6 IS NULL OR task_id = ?6)
             ORDER BY id DESC LIMIT ?5"
        ))
        .bind(f.owner)
        .bind(f.state.map(State::as_str))
        .bind(f.active)
        .bind(f.before_id)
        .bind(i64::from(f.limit))
        .bind(f.task_id)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(row)
        .collect()
    }

    /// Every job not yet ended, oldest first.
    pub async fn active(&self) -> Result<Vec<Job>, StoreError> {
        sqlx::query(concat!(
            "SELECT * FROM jobs WHERE state IN ",
            active!(),
            " ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(row)
        .collect()
    }

    /// Jobs waiting to be asked for (queued, or asked with no answer recorded), oldest first.
    pub async fn to_launch(&self, limit: u32) -> Result<Vec<Job>, StoreError> {
        // At most 64 of each owner's, oldest first: one owner's backlog cannot fill the
        // window and keep everyone else's jobs from being asked for.
        sqlx::query(concat!(
            "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY owner ORDER BY id) AS nth
               FROM jobs WHERE state IN ('queued', 'starting')
               AND (after_job = '' OR NOT EXISTS (SELECT 1 FROM jobs p
                      WHERE p.id = jobs.after_job AND p.state IN ",
            active!(),
            "))) WHERE nth <= 64 ORDER BY id LIMIT ?"
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(row)
        .collect()
    }

    /// Notes why a queued job waits (mcpd away for its tool call), without moving it.
    pub async fn note_queued(
        &self,
        id: &str,
        generation: u32,
        why: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE jobs SET reason = ? WHERE id = ? AND generation = ? AND state = 'queued'",
        )
        .bind(why)
        .bind(id)
        .bind(i64::from(generation))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Notes why a job still starting waits (execd away), without moving it.
    pub async fn note(&self, id: &str, generation: u32, why: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE jobs SET reason = ? WHERE id = ? AND generation = ? AND state = 'starting'",
        )
        .bind(why)
        .bind(id)
        .bind(i64::from(generation))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Applies `m` to generation `generation` of job `id` as [`job::next`] decides, in one
    /// update conditional on the state and standing it was decided from: a word about an
    /// older generation, or one that comes after the job moved on, changes nothing.
    /// Answers the job as it now is when it moved.
    pub async fn transition(
        &self,
        id: &str,
        generation: u32,
        m: Move<'_>,
    ) -> Result<Option<Job>, StoreError> {
        // Decided again when the job moved between reading it and updating it.
        for _ in 0..8 {
            let Some(j) = self.get(id).await? else {
                return Ok(None);
            };
            if j.generation != generation {
                return Ok(None);
            }
            let standing = Standing {
                cancel_requested: j.cancel_requested,
                followed_up: j.followed_up,
                task_run: !j.task_id.is_empty(),
            };
            let event = m.event(&j);
            let Some(to) = job::next(j.state, standing, &event) else {
                return Ok(None);
            };
            // What else the move sets, with its binds after the state's.
            let (set, extra) = match &m {
                Move::Claim | Move::ClaimTool => ("attempts = attempts + 1", ""),
                Move::Requeue { .. } => ("reason = ?5, execution_id = ?6", ""),
                Move::Settle { .. } => (
                    "exit_code = ?5, reason = ?6,
                     started_at_ms = CASE WHEN ?7 > 0 THEN ?7 ELSE started_at_ms END,
                     ended_at_ms = ?8,
                     place = CASE WHEN ?9 != '' THEN ?9 ELSE place END,
                     approval_id = CASE WHEN ?10 != '' THEN ?10 ELSE approval_id END",
                    "",
                ),
                Move::CancelUnasked { .. } => (
                    "reason = 'cancelled before it started; nothing ran', ended_at_ms = ?5",
                    "",
                ),
                Move::Relaunch { .. } => (
                    "generation = generation + 1, execution_id = ?5, place = '',
                     approval_id = '', exit_code = NULL,
                     reason = 'launched again as generation ' || (generation + 1),
                     cancel_requested = 0, attempts = 0, started_at_ms = 0, ended_at_ms = 0,
                     followed_up = 0",
                    concat!(
                        " AND (?6 = 0 OR (SELECT count(*) FROM jobs o
                           WHERE o.owner = jobs.owner AND o.state IN ",
                        active!(),
                        ") < ?6)"
                    ),
                ),
            };
            let sql = format!(
                "UPDATE jobs SET state = ?1, {set}
                 WHERE id = ?2 AND generation = ?3 AND state = ?4
                   AND cancel_requested = {} AND followed_up = {}{extra}",
                i32::from(j.cancel_requested),
                i32::from(j.followed_up),
            );
            // Made of this function's own texts and two numbers: nothing from outside.
            let q = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(to.as_str())
                .bind(id)
                .bind(i64::from(generation))
                .bind(j.state.as_str());
            let q = match &m {
                Move::Claim | Move::ClaimTool => q,
                Move::Requeue { why } => q.bind(*why).bind(uuid::Uuid::now_v7().to_string()),
                Move::Settle {
                    outcome: o,
                    place,
                    approval,
                } => q
                    .bind(o.exit_code)
                    .bind(&o.reason)
                    .bind(o.started_at_ms)
                    .bind(o.ended_at_ms)
                    .bind(place_str(*place))
                    .bind(*approval),
                Move::CancelUnasked { .. } => q.bind(now_ms()),
                Move::Relaunch { active_limit } => q
                    .bind(uuid::Uuid::now_v7().to_string())
                    .bind(i64::try_from(*active_limit).unwrap_or(i64::MAX)),
            };
            if q.execute(&self.pool).await?.rows_affected() == 1 {
                return self.get(id).await;
            }
            if let Move::Relaunch { .. } = m
                && self.get(id).await?.is_some_and(|now| {
                    now.state == j.state && now.generation == j.generation && now.followed_up
                })
            {
                // It stands as it did: the owner is at the limit of jobs not yet ended.
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// Whether job `id`'s current generation has its follow-ups recorded.
    pub async fn is_followed_up(&self, id: &str) -> Result<bool, StoreError> {
        let v: Option<i64> = sqlx::query_scalar("SELECT followed_up FROM jobs WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(v == Some(1))
    }

    /// Keeps what generation `generation` of job `id`'s tool call answered (once).
    pub async fn save_tool_result(
        &self,
        id: &str,
        generation: u32,
        r: &crate::job::ToolResult,
    ) -> Result<(), StoreError> {
        let text =
            serde_json::to_string(r).map_err(|e| StoreError::Corrupt(id.into(), e.to_string()))?;
        sqlx::query(
            "INSERT INTO tool_results (job_id, generation, result) VALUES (?, ?, ?)
             ON CONFLICT DO NOTHING",
        )
        .bind(id)
        .bind(i64::from(generation))
        .bind(text)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// What generation `generation` of job `id`'s tool call answered, if it did.
    pub async fn tool_result(
        &self,
        id: &str,
        generation: u32,
    ) -> Result<Option<crate::job::ToolResult>, StoreError> {
        let text: Option<String> = sqlx::query_scalar(
            "SELECT result FROM tool_results WHERE job_id = ? AND generation = ?",
        )
        .bind(id)
        .bind(i64::from(generation))
        .fetch_optional(&self.pool)
        .await?;
        text.map(|t| {
            serde_json::from_str(&t).map_err(|e| StoreError::Corrupt(id.into(), e.to_string()))
        })
        .transpose()
    }

    /// Records where generation `generation` of job `id` runs and the approval it waits
    /// for, as execd answered its ask (whatever its state by now).
    pub async fn set_where(
        &self,
        id: &str,
        generation: u32,
        place: Option<Place>,
        approval_id: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE jobs SET place = CASE WHEN ?1 != '' THEN ?1 ELSE place END,
               approval_id = CASE WHEN ?2 != '' THEN ?2 ELSE approval_id END
             WHERE id = ?3 AND generation = ?4",
        )
        .bind(place_str(place))
        .bind(approval_id)
        .bind(id)
        .bind(i64::from(generation))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records that cancelling job `id` was asked (while it has not ended); answers the
    /// job as it now is.
    pub async fn request_cancel(&self, id: &str) -> Result<Option<Job>, StoreError> {
        sqlx::query(concat!(
            "UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND state IN ",
            active!()
        ))
        .bind(id)
        .execute(&self.pool)
        .await?;
        self.get(id).await
    }

    /// Forgets a job execd refused outright when it was first asked: it never was.
    pub async fn forget_refused(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query(
            "DELETE FROM jobs WHERE id = ? AND state = 'starting' AND attempts = 1 AND task_id = ''
               AND generation = 1",
        )
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Removes jobs that ended before `before_ms`, with their follow-ups and delivery
    /// attempts; answers how many jobs.
    pub async fn prune(&self, before_ms: i64) -> Result<u64, StoreError> {
        sqlx::query(
            "DELETE FROM delivery_attempts WHERE followup_id IN (SELECT f.id FROM followups f
               JOIN jobs j ON j.id = f.job_id WHERE j.ended_at_ms > 0 AND j.ended_at_ms < ?)",
        )
        .bind(before_ms)
        .execute(&self.pool)
        .await?;
        sqlx::query(
            "DELETE FROM followups WHERE job_id IN
               (SELECT id FROM jobs WHERE ended_at_ms > 0 AND ended_at_ms < ?)",
        )
        .bind(before_ms)
        .execute(&self.pool)
        .await?;
        // A job launched again and again: its earlier generations' follow-ups that are
        // done go by their own age.
        macro_rules! old_generations {
            () => {
                "FROM followups f WHERE f.state != 'pending' AND f.created_at_ms < ?
                   AND f.generation < (SELECT j.generation FROM jobs j WHERE j.id = f.job_id)"
            };
        }
        sqlx::query(concat!(
            "DELETE FROM delivery_attempts WHERE followup_id IN (SELECT f.id ",
            old_generations!(),
            ")"
        ))
        .bind(before_ms)
        .execute(&self.pool)
        .await?;
        sqlx::query(concat!(
            "DELETE FROM followups WHERE id IN (SELECT f.id ",
            old_generations!(),
            ")"
        ))
        .bind(before_ms)
        .execute(&self.pool)
        .await?;
        Ok(sqlx::query(concat!(
            "DELETE FROM jobs WHERE ended_at_ms > 0 AND ended_at_ms < ? AND state NOT IN ",
            active!()
        ))
        .bind(before_ms)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    async fn store() -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        (Store::open(&dir.path().join("jobd.db")).await.unwrap(), dir)
    }

    fn spec() -> Spec {
        Spec {
            name: "n".into(),
            command: "true".into(),
            argv: Vec::new(),
            cwd: String::new(),
            env: BTreeMap::new(),
            place: Place::Sandbox,
            max_runtime_ms: 1000,
            purpose: String::new(),
            tool: None,
        }
    }

    fn outcome(state: State) -> Outcome {
        Outcome {
            state,
            exit_code: state.is_final().then_some(0),
            reason: String::new(),
            started_at_ms: 1,
            ended_at_ms: if state.is_final() { 2 } else { 0 },
        }
    }

    #[tokio::test]
    async fn a_job_moves_only_forward_and_only_in_its_generation() {
        let (s, _d) = store().await;
        let j = s
            .insert(
                &uuid::Uuid::now_v7().to_string(),
                "alice",
                "api",
                &spec(),
                0,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!((j.state, j.generation), (State::Queued, 1));
        assert!(s.transition(&j.id, 1, Move::Claim).await.unwrap().is_some());
        let running = s
            .transition(
                &j.id,
                1,
                Move::Settle {
                    outcome: &outcome(State::Running),
                    place: Some(Place::Sandbox),
                    approval: "",
                },
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(running.state, State::Running);
        assert_eq!(running.place, Some(Place::Sandbox));
        // A late word from before it ran, a repeat, another generation: nothing moves.
        for (g, st) in [
            (1, State::AwaitingApproval),
            (1, State::Running),
            (2, State::Failed),
        ] {
            assert!(
                s.transition(
                    &j.id,
                    g,
                    Move::Settle {
                        outcome: &outcome(st),
                        place: None,
                        approval: ""
                    }
                )
                .await
                .unwrap()
                .is_none()
            );
        }
        let done = s
            .transition(
                &j.id,
                1,
                Move::Settle {
                    outcome: &outcome(State::Succeeded),
                    place: None,
                    approval: "",
                },
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!((done.state, done.exit_code), (State::Succeeded, Some(0)));
        // Ended is ended.
        assert!(
            s.transition(
                &j.id,
                1,
                Move::Settle {
                    outcome: &outcome(State::Lost),
                    place: None,
                    approval: ""
                }
            )
            .await
            .unwrap()
            .is_none()
        );
        assert!(s.transition(&j.id, 1, Move::Claim).await.unwrap().is_none());
        assert!(
            s.request_cancel(&j.id)
                .await
                .unwrap()
                .is_some_and(|j| !j.cancel_requested)
        );
    }

    #[tokio::test]
    async fn the_active_limit_counts_only_what_has_not_ended() {
        let (s, _d) = store().await;
        let a = s
            .insert(
                &uuid::Uuid::now_v7().to_string(),
                "alice",
                "api",
                &spec(),
                2,
            )
            .await
            .unwrap()
            .unwrap();
        s.insert(
            &uuid::Uuid::now_v7().to_string(),
            "alice",
            "api",
            &spec(),
            2,
        )
        .await
        .unwrap()
        .unwrap();
        assert!(
            s.insert(
                &uuid::Uuid::now_v7().to_string(),
                "alice",
                "api",
                &spec(),
                2
            )
            .await
            .unwrap()
            .is_none()
        );
        assert!(
            s.insert(&uuid::Uuid::now_v7().to_string(), "bob", "api", &spec(), 2)
                .await
                .unwrap()
                .is_some()
        );
        s.transition(&a.id, a.generation, Move::CancelUnasked { starting: false })
            .await
            .unwrap()
            .unwrap();
        assert!(
            s.insert(
                &uuid::Uuid::now_v7().to_string(),
                "alice",
                "api",
                &spec(),
                2
            )
            .await
            .unwrap()
            .is_some()
        );
        let listed = s
            .list(&Filter {
                owner: Some("alice"),
                active: true,
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(listed.len(), 2);
        assert!(listed[0].id > listed[1].id, "newest first");
    }

    #[tokio::test]
    async fn prune_removes_only_what_ended_before_the_cut() {
        let (s, _d) = store().await;
        let old = s
            .insert(&uuid::Uuid::now_v7().to_string(), "a", "api", &spec(), 0)
            .await
            .unwrap()
            .unwrap();
        let live = s
            .insert(&uuid::Uuid::now_v7().to_string(), "a", "api", &spec(), 0)
            .await
            .unwrap()
            .unwrap();
        s.transition(
            &old.id,
            old.generation,
            Move::CancelUnasked { starting: false },
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(s.prune(now_ms() + 1).await.unwrap(), 1);
        assert!(s.get(&old.id).await.unwrap().is_none());
        assert!(s.get(&live.id).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_job_launched_again_keeps_its_row_and_its_old_follow_ups_age_out() {
        let (s, _d) = store().await;
        let j = s
            .insert(&uuid::Uuid::now_v7().to_string(), "a", "api", &spec(), 0)
            .await
            .unwrap()
            .unwrap();
        let ended = s
            .transition(&j.id, j.generation, Move::CancelUnasked { starting: false })
            .await
            .unwrap()
            .unwrap();
        // Not before its follow-ups are recorded.
        assert!(
            s.transition(&j.id, 1, Move::Relaunch { active_limit: 0 })
                .await
                .unwrap()
                .is_none()
        );
        let hook = crate::followup::FollowUps {
            webhook: Some("https://example.com/h".into()),
            then: Vec::new(),
        };
        s.record_followups(&ended, &hook).await.unwrap();
        sqlx::query("UPDATE followups SET state = 'delivered', created_at_ms = 1")
            .execute(&s.pool)
            .await
            .unwrap();
        assert!(
            s.transition(&j.id, 2, Move::Relaunch { active_limit: 0 })
                .await
                .unwrap()
                .is_none(),
            "a stale generation"
        );
        assert!(
            s.transition(&j.id, 1, Move::Relaunch { active_limit: 0 })
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            s.transition(&j.id, 1, Move::Relaunch { active_limit: 0 })
                .await
                .unwrap()
                .is_none(),
            "once"
        );
        let again = s.get(&j.id).await.unwrap().unwrap();
        assert_eq!((again.generation, again.state), (2, State::Queued));
        assert_ne!(again.execution_id, j.execution_id);
        // Its first ask refused: it is kept (ended rejected by the engine), not forgotten.
        assert!(s.transition(&j.id, 2, Move::Claim).await.unwrap().is_some());
        s.forget_refused(&j.id).await.unwrap();
        assert!(s.get(&j.id).await.unwrap().is_some());
        // Generation 1's delivered follow-up goes by its own age; the job stays.
        assert_eq!(s.prune(now_ms() + 1).await.unwrap(), 0);
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM followups")
            .fetch_one(&s.pool)
            .await
            .unwrap();
        assert_eq!(left, 0);
    }
}
