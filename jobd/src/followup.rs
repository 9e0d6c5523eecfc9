//! Follow-ups when a job ends: a webhook delivery of its summary and, when it succeeded,
//! the start of each chained task. When a job ends its follow-ups are recorded, once per
//! (job, generation, kind, target), and only then is the job marked followed up; a job
//! found ended but not followed up (jobd stopped in between) is followed up at start.
//! One worker carries them out:
//!
//! - a chain starts the target task's run under a unique (task, run it follows) key:
//!   exactly once per edge, however often it is looked at;
//! - a webhook POSTs the summary through the SSRF guard, signed with the owner's delivery
//!   secret (`X-Hub-Signature-256` over `"{timestamp}.{body}"`, as the trigger checks),
//!   its delivery id the same on every attempt; a failure is retried with exponential
//!   back-off and jitter, and after 24 h the delivery is dead (redeliverable on demand).
//!   Every attempt is logged.
//!
//! A follow-up whose job, generation or owner's secret no longer checks out becomes
//! `terminal_unfollowable`, never delivered on a guess.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::Row as _;

use crate::engine::Engine;
use crate::job::{Invalid, State};
use crate::store::{Job, Store, StoreError, now_ms};

/// A delivery older than this that never got a 2xx is dead.
pub const DEAD_AFTER_MS: i64 = 24 * 3600 * 1000;
/// The longest wait between two attempts.
const MAX_BACKOFF_MS: i64 = 3600 * 1000;
/// One attempt's limit.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Chains deeper than this are refused when saved.
pub const MAX_CHAIN_DEPTH: usize = 8;
const SECRET: &str = "delivery-secret";

/// What a job (or each run of a task) asks for when it ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FollowUps {
    /// Where its summary is delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// Tasks started when it succeeded (same owner).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub then: Vec<String>,
}

impl FollowUps {
    pub fn is_empty(&self) -> bool {
        self.webhook.is_none() && self.then.is_empty()
    }

    /// Checks what can be checked without the store: the URL's form, the edges' ids.
    pub fn check(&self) -> Result<(), Invalid> {
        if let Some(u) = &self.webhook {
            argos_net::check_url(u).map_err(|e| Invalid("follow_ups.webhook", e.to_string()))?;
            if u.len() > 2048 {
                return Err(Invalid(
                    "follow_ups.webhook",
                    "longer than 2048 bytes".into(),
                ));
            }
        }
        if self.then.len() > 16 {
            return Err(Invalid("follow_ups.then", "more than 16 tasks".into()));
        }
        if self.then.iter().any(|t| uuid::Uuid::parse_str(t).is_err()) {
            return Err(Invalid("follow_ups.then", "not a task id".into()));
        }
        Ok(())
    }
}

/// One follow-up as kept.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowUp {
    pub id: String,
    pub job_id: String,
    pub generation: u32,
    pub owner: String,
    pub kind: String,
    pub target: String,
    pub state: String,
    pub attempts: u32,
    pub next_attempt_at_ms: i64,
    pub last_error: String,
    pub created_at_ms: i64,
    pub delivered_at_ms: i64,
}

/// One attempt at a delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub attempt: u32,
    pub at_ms: i64,
    pub status: u16,
    pub error: String,
    pub duration_ms: i64,
}

fn row(r: &sqlx::sqlite::SqliteRow) -> FollowUp {
    FollowUp {
        id: r.get("id"),
        job_id: r.get("job_id"),
        generation: u32::try_from(r.get::<i64, _>("generation")).unwrap_or(0),
        owner: r.get("owner"),
        kind: r.get("kind"),
        target: r.get("target"),
        state: r.get("state"),
        attempts: u32::try_from(r.get::<i64, _>("attempts")).unwrap_or(0),
        next_attempt_at_ms: r.get("next_attempt_at_ms"),
        last_error: r.get("last_error"),
        created_at_ms: r.get("created_at_ms"),
        delivered_at_ms: r.get("delivered_at_ms"),
    }
}

/// The wait before attempt `n + 1` (n ≥ 1 attempts failed): 2^(n-1) s, at most an hour,
/// times a jitter in [0.5, 1.5).
pub fn backoff_ms(failed: u32, jitter: f64) -> i64 {
    let base = 1000i64.saturating_mul(1i64 << failed.saturating_sub(1).min(22));
    let capped = base.min(MAX_BACKOFF_MS) as f64;
    (capped * (0.5 + jitter.clamp(0.0, 0.999_999))) as i64
}

fn jitter() -> f64 {
    let mut b = [0u8; 4];
    let _ = getrandom::fill(&mut b);
    f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX)
}

impl Store {
    /// Records a job's follow-ups (once each) and marks it followed up, together.
    pub async fn record_followups(&self, j: &Job, wanted: &FollowUps) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        let now = now_ms();
        let mut rows: Vec<(&str, &str)> = Vec::new();
        if let Some(u) = &wanted.webhook {
            rows.push(("webhook", u));
        }
        if j.state == State::Succeeded {
            rows.extend(wanted.then.iter().map(|t| ("chain", t.as_str())));
        }
        for (kind, target) in rows {
            sqlx::query(
                "INSERT INTO followups (id, job_id, generation, owner, kind, target, state,
                   next_attempt_at_ms, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)
                 ON CONFLICT DO NOTHING",
            )
            .bind(uuid::Uuid::now_v7().to_string())
            .bind(&j.id)
            .bind(i64::from(j.generation))
            .bind(&j.owner)
            .bind(kind)
            .bind(target)
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("UPDATE jobs SET followed_up = 1 WHERE id = ? AND generation = ?")
            .bind(&j.id)
            .bind(i64::from(j.generation))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Ended jobs not yet followed up (jobd stopped between the two).
    pub async fn not_followed_up(&self) -> Result<Vec<(Job, FollowUps)>, StoreError> {
        let rows = sqlx::query(
            "SELECT * FROM jobs WHERE followed_up = 0 AND ended_at_ms > 0 ORDER BY id LIMIT 1000",
        )
        .fetch_all(self.pool())
        .await?;
        let mut out = Vec::new();
        for r in &rows {
            let text: String = r.get("followups");
            let wanted = if text.is_empty() {
                FollowUps::default()
            } else {
                serde_json::from_str(&text).unwrap_or_default()
            };
            if let Some(j) = self.get(r.get::<&str, _>("id")).await? {
                out.push((j, wanted));
            }
        }
        Ok(out)
    }

    /// What job `id` asked for when it ends.
    pub async fn followups_of(&self, id: &str) -> Result<FollowUps, StoreError> {
        let text: Option<String> = sqlx::query_scalar("SELECT followups FROM jobs WHERE id = ?")
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        Ok(text
            .filter(|t| !t.is_empty())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default())
    }

    pub async fn set_job_followups(&self, id: &str, f: &FollowUps) -> Result<(), StoreError> {
        sqlx::query("UPDATE jobs SET followups = ? WHERE id = ?")
            .bind(if f.is_empty() {
                String::new()
            } else {
                serde_json::to_string(f).expect("serializes")
            })
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    pub async fn due_followups(&self, now: i64, limit: u32) -> Result<Vec<FollowUp>, StoreError> {
        Ok(sqlx::query(
            "SELECT * FROM followups WHERE state = 'pending' AND next_attempt_at_ms <= ?
             ORDER BY next_attempt_at_ms LIMIT ?",
        )
        .bind(now)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(row)
        .collect())
    }

    pub async fn followup(&self, id: &str) -> Result<Option<FollowUp>, StoreError> {
        Ok(sqlx::query("SELECT * FROM followups WHERE id = ?")
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .as_ref()
            .map(row))
    }

    /// Newest first.
    pub async fn followups(
        &self,
        owner: Option<&str>,
        state: Option<&str>,
        job_id: Option<&str>,
        before_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<FollowUp>, StoreError> {
        Ok(sqlx::query(
            "SELECT * FROM followups WHERE (?1 IS NULL OR owner = ?1) AND (?2 IS NULL OR state = ?2)
               AND (?5 IS NULL OR job_id = ?5) AND (?3 IS NULL OR id < ?3) ORDER BY id DESC LIMIT ?4",
        )
        .bind(owner)
        .bind(state)
        .bind(before_id)
        .bind(i64::from(limit))
        .bind(job_id)
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(row)
        .collect())
    }

    pub async fn attempts(&self, id: &str) -> Result<Vec<Attempt>, StoreError> {
        Ok(
            sqlx::query("SELECT * FROM delivery_attempts WHERE followup_id = ? ORDER BY attempt")
                .bind(id)
                .fetch_all(self.pool())
                .await?
                .iter()
                .map(|r| Attempt {
                    attempt: u32::try_from(r.get::<i64, _>("attempt")).unwrap_or(0),
                    at_ms: r.get("at_ms"),
                    status: u16::try_from(r.get::<i64, _>("status")).unwrap_or(0),
                    error: r.get("error"),
                    duration_ms: r.get("duration_ms"),
                })
                .collect(),
        )
    }

    /// Ends a follow-up: `delivered`, `dead` or `terminal_unfollowable` (with why).
    async fn end_followup(&self, id: &str, state: &str, why: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE followups SET state = ?, last_error = ?,
               delivered_at_ms = CASE WHEN ? = 'delivered' THEN ? ELSE delivered_at_ms END
             WHERE id = ? AND state = 'pending'",
        )
        .bind(state)
        .bind(why)
        .bind(state)
        .bind(now_ms())
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Logs attempt `f.attempts + 1` and, unless it delivered, sets the next one.
    async fn attempted(
        &self,
        f: &FollowUp,
        status: u16,
        error: &str,
        duration_ms: i64,
    ) -> Result<(), StoreError> {
        let n = f.attempts + 1;
        sqlx::query(
            "INSERT INTO delivery_attempts (followup_id, attempt, at_ms, status, error, duration_ms)
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        )
        .bind(&f.id)
        .bind(i64::from(n))
        .bind(now_ms())
        .bind(i64::from(status))
        .bind(error)
        .bind(duration_ms)
        .execute(self.pool())
        .await?;
        sqlx::query(
            "UPDATE followups SET attempts = ?, last_error = ?, next_attempt_at_ms = ? WHERE id = ?",
        )
        .bind(i64::from(n))
        .bind(error)
        .bind(now_ms() + backoff_ms(n, jitter()))
        .bind(&f.id)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Delivers follow-up `id` again (the same delivery id) once it has ended, whatever it
    /// came to; one still pending is already due (false, as for no such webhook).
    pub async fn redeliver(&self, id: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "UPDATE followups SET state = 'pending', next_attempt_at_ms = ?, created_at_ms = ?
             WHERE id = ? AND kind = 'webhook' AND state != 'pending'",
        )
        .bind(now_ms())
        .bind(now_ms())
        .bind(id)
        .execute(self.pool())
        .await?
        .rows_affected()
            == 1)
    }

    /// Removes `owner`'s delivery secret, ended jobs and follow-ups; answers how many jobs
    /// and follow-ups went.
    pub async fn forget_owner_records(&self, owner: &str) -> Result<u32, StoreError> {
        let mut tx = self.pool().begin().await?;
        sqlx::query("DELETE FROM delivery_secrets WHERE owner = ?")
            .bind(owner)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "DELETE FROM delivery_attempts WHERE followup_id IN
               (SELECT id FROM followups WHERE owner = ?)",
        )
        .bind(owner)
        .execute(&mut *tx)
        .await?;
        let f = sqlx::query("DELETE FROM followups WHERE owner = ?")
            .bind(owner)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let j = sqlx::query("DELETE FROM jobs WHERE owner = ? AND ended_at_ms > 0")
            .bind(owner)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(u32::try_from(f + j).unwrap_or(u32::MAX))
    }

    /// The owner's delivery secret, if they made one.
    pub async fn delivery_secret(&self, owner: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT sealed FROM delivery_secrets WHERE owner = ?")
                .bind(owner)
                .fetch_optional(self.pool())
                .await?,
        )
    }

    pub async fn set_delivery_secret(&self, owner: &str, sealed: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO delivery_secrets (owner, sealed, created_at_ms) VALUES (?, ?, ?)
             ON CONFLICT (owner) DO UPDATE SET sealed = excluded.sealed,
               created_at_ms = excluded.created_at_ms",
        )
        .bind(owner)
        .bind(sealed)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }
}

impl Engine {
    /// A job ended: its follow-ups are recorded (then it is followed up), and the worker
    /// woken.
    pub(crate) async fn follow_up(&self, j: &Job) -> Result<(), StoreError> {
        let wanted = self.store.followups_of(&j.id).await?;
        self.store.record_followups(j, &wanted).await?;
        if !wanted.is_empty() {
            self.followups_due().notify_one();
        }
        Ok(())
    }

    /// A new delivery secret for `owner` (replacing theirs), answered this once.
    pub async fn rotate_delivery_secret(&self, owner: &str) -> Result<String, StoreError> {
        let secret = crate::hooks::new_secret();
        let sealed = self.key.seal(SECRET, owner.as_bytes(), secret.as_bytes());
        self.store.set_delivery_secret(owner, &sealed).await?;
        tracing::info!(owner, "delivery secret made");
        Ok(secret)
    }

    /// Checks a job's or task's follow-ups against the store: the owner's delivery
    /// secret for a webhook, each chained task the owner's.
    pub async fn check_followups(
        &self,
        owner: &str,
        f: &FollowUps,
    ) -> Result<(), crate::tasks::TaskError> {
        f.check()?;
        if f.webhook.is_some() && self.store.delivery_secret(owner).await?.is_none() {
            return Err(Invalid(
                "follow_ups.webhook",
                "make a delivery secret first (POST /api/deliveries/secret): deliveries are signed with it".into(),
            )
            .into());
        }
        for t in &f.then {
            match self.store.task(t).await? {
                Some(task) if task.owner == owner => {}
                _ => {
                    return Err(Invalid(
                        "follow_ups.then",
                        format!("{t} is not a task of {owner}'s"),
                    )
                    .into());
                }
            }
        }
        Ok(())
    }

    /// Carries out due follow-ups, a few at a time; at start, follows up jobs that ended
    /// while the step was interrupted.
    pub(crate) async fn deliverer(self: Arc<Self>) {
        // Every ended job not yet followed up, a thousand at a time.
        loop {
            match self.store.not_followed_up().await {
                Ok(left) if left.is_empty() => break,
                Ok(left) => {
                    for (j, _) in left {
                        if let Err(e) = self.follow_up(&j).await {
                            tracing::error!(job = %j.id, error = %e, "following up a job");
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "reading jobs not followed up");
                    break;
                }
            }
        }
        loop {
            let due = self
                .store
                .due_followups(now_ms(), 32)
                .await
                .unwrap_or_else(|e| {
                    tracing::error!(error = %e, "reading due follow-ups");
                    Vec::new()
                });
            let mut set = tokio::task::JoinSet::new();
            for f in due {
                let me = self.clone();
                set.spawn(async move {
                    if let Err(e) = me.carry_out(&f).await {
                        tracing::error!(followup = %f.id, error = %e, "a follow-up");
                    }
                });
                if set.len() >= 8 {
                    set.join_next().await;
                }
            }
            while set.join_next().await.is_some() {}
            let wait = match self.store.next_followup().await {
                Ok(Some(at)) => Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0)),
                _ => Duration::from_secs(30),
            }
            .clamp(Duration::from_millis(50), Duration::from_secs(30));
            tokio::select! {
                _ = self.followups_due().notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    async fn carry_out(&self, f: &FollowUp) -> Result<(), StoreError> {
        // The linkage must still hold: the job, its generation, its owner.
        let job = match self.store.get(&f.job_id).await? {
            Some(j) if j.generation == f.generation && j.owner == f.owner => j,
            Some(_) => {
                return self
                    .store
                    .end_followup(&f.id, "terminal_unfollowable", "its job was launched again since: this generation's follow-up no longer applies")
                    .await;
            }
            None => {
                return self
                    .store
                    .end_followup(&f.id, "terminal_unfollowable", "its job is gone (pruned)")
                    .await;
            }
        };
        match f.kind.as_str() {
            "chain" => self.chain(f, &job).await,
            "webhook" => self.deliver(f, &job).await,
            other => {
                self.store
                    .end_followup(
                        &f.id,
                        "terminal_unfollowable",
                        &format!("unknown kind {other}"),
                    )
                    .await
            }
        }
    }

    async fn chain(&self, f: &FollowUp, job: &Job) -> Result<(), StoreError> {
        let Some(t) = self.store.task(&f.target).await? else {
            return self
                .store
                .end_followup(&f.id, "terminal_unfollowable", "the chained task is gone")
                .await;
        };
        if t.owner != job.owner {
            return self
                .store
                .end_followup(
                    &f.id,
                    "terminal_unfollowable",
                    "the chained task is not the same owner's",
                )
                .await;
        }
        match self.chain_run(&t, job).await {
            Ok(_) => self.store.end_followup(&f.id, "delivered", "").await,
            Err(e) => {
                self.store
                    .end_followup(&f.id, "terminal_unfollowable", &e.to_string())
                    .await
            }
        }
    }

    async fn deliver(&self, f: &FollowUp, job: &Job) -> Result<(), StoreError> {
        let Some(sealed) = self.store.delivery_secret(&f.owner).await? else {
            return self
                .store
                .end_followup(
                    &f.id,
                    "terminal_unfollowable",
                    "its owner has no delivery secret any more",
                )
                .await;
        };
        let Some(secret) = self.key.open(SECRET, f.owner.as_bytes(), &sealed) else {
            return self
                .store
                .end_followup(
                    &f.id,
                    "terminal_unfollowable",
                    "its owner's delivery secret does not open under jobd's key",
                )
                .await;
        };
        if now_ms() - f.created_at_ms > DEAD_AFTER_MS {
            return self
                .store
                .end_followup(
                    &f.id,
                    "dead",
                    &format!("no delivery in 24 h: {}", f.last_error),
                )
                .await;
        }
        let body = serde_json::to_vec(&serde_json::json!({
            "delivery_id": f.id,
            "event": "job.ended",
            "attempt": f.attempts + 1,
            "job": {
                "id": job.id, "owner": job.owner, "name": job.spec.name,
                "state": job.state.as_str(), "exit_code": job.exit_code, "reason": job.reason,
                "generation": job.generation, "execution_id": job.execution_id,
                "task_id": job.task_id, "task_version": job.task_version, "trigger": job.trigger,
                "created_at_ms": job.created_at_ms, "started_at_ms": job.started_at_ms,
                "ended_at_ms": job.ended_at_ms,
            },
        }))
        .expect("serializes");
        let ts = (now_ms() / 1000).to_string();
        let secret = String::from_utf8_lossy(&secret).into_owned();
        let headers = [
            ("content-type", "application/json".to_string()),
            ("user-agent", "argos-jobd".to_string()),
            ("x-argos-delivery", f.id.clone()),
            ("x-argos-event", "job.ended".to_string()),
            ("x-argos-timestamp", ts.clone()),
            (
                "x-hub-signature-256",
                crate::hooks::signature(secret.as_bytes(), &ts, &body),
            ),
        ];
        let local = url::Url::parse(&f.target)
            .map(|u| argos_net::listed(&self.limits().deliver_allow, &u))
            .unwrap_or(false);
        let hint = "an operator can allow this host with jobs.deliver_allow";
        let started = std::time::Instant::now();
        // The whole attempt, the name's resolution included, within its limit.
        let r = tokio::time::timeout(
            ATTEMPT_TIMEOUT,
            argos_net::post(&f.target, local, hint, &headers, body, ATTEMPT_TIMEOUT),
        )
        .await
        .unwrap_or_else(|_| {
            Err(argos_net::NetError::Failed(format!(
                "no answer within {} s",
                ATTEMPT_TIMEOUT.as_secs()
            )))
        });
        let took = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        match r {
            Ok(status) if (200..300).contains(&status) => {
                self.store.attempted(f, status, "", took).await?;
                tracing::info!(followup = %f.id, job = %job.id, status, "delivered");
                self.store.end_followup(&f.id, "delivered", "").await
            }
            Ok(status) => {
                let why = format!("the receiver answered {status}");
                self.store.attempted(f, status, &why, took).await
            }
            // The guard refused the URL: no later attempt can do better.
            Err(argos_net::NetError::Refused(why)) => {
                let why = format!("refused: {why}");
                self.store.attempted(f, 0, &why, took).await?;
                self.store.end_followup(&f.id, "dead", &why).await
            }
            Err(e) => self.store.attempted(f, 0, &e.to_string(), took).await,
        }
    }
}

impl Store {
    /// When the next pending follow-up is due.
    pub async fn next_followup(&self) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT min(next_attempt_at_ms) FROM followups WHERE state = 'pending'",
        )
        .fetch_one(self.pool())
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_to_an_hour_with_jitter() {
        assert_eq!(backoff_ms(1, 0.5), 1000);
        assert_eq!(backoff_ms(2, 0.5), 2000);
        assert_eq!(backoff_ms(5, 0.5), 16_000);
        assert_eq!(backoff_ms(40, 0.5), MAX_BACKOFF_MS);
        assert_eq!(backoff_ms(1, 0.0), 500);
        assert!(backoff_ms(1, 1.0) < 1500);
    }

    #[test]
    fn follow_ups_are_checked_by_form() {
        let f = |webhook: Option<&str>, then: &[&str]| FollowUps {
            webhook: webhook.map(str::to_string),
            then: then.iter().map(|s| s.to_string()).collect(),
        };
        assert!(f(Some("https://ci.example/hook"), &[]).check().is_ok());
        assert_eq!(
            f(Some("file:///etc/passwd"), &[]).check().unwrap_err().0,
            "follow_ups.webhook"
        );
        assert_eq!(
            f(Some("https://u:p@x.example/"), &[])
                .check()
                .unwrap_err()
                .0,
            "follow_ups.webhook"
        );
        assert_eq!(f(None, &["nope"]).check().unwrap_err().0, "follow_ups.then");
        // The signature, against Python's hmac module (`hmac.new(b"s", b"1.{}", sha256)`).
        assert_eq!(
            crate::hooks::signature(b"s", "1", b"{}"),
            "sha256=b253639bcd705ed1cda3073f66104f16988bd40272584dea7d0d345ae93e61cc"
        );
    }
}
