//! Tasks: a command (its action, a job's spec) that runs by its schedule or when asked,
//! for its owner, only in a version an admin approved — execd's standing approval of
//! that exact action, which execd checks again on every run. Each save is a new version;
//! a version nobody approved never runs. Kept in jobd's database beside the jobs.

use sqlx::Row as _;
use sqlx::sqlite::SqliteRow;

use crate::job::{Invalid, Place, Spec};
use crate::schedule::Schedule;
use crate::store::{Store, StoreError, now_ms};

/// A task as kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: String,
    pub owner: String,
    pub name: String,
    pub version: u32,
    pub spec: Spec,
    pub schedule: Option<Schedule>,
    pub paused: bool,
    pub approval: Option<Approved>,
    /// The schedule's fires up to here are handled.
    pub cursor_ms: i64,
    /// When it fires next (0: nothing scheduled).
    pub next_run_at_ms: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// Its webhook trigger: the mode, the secret as kept, and when it was made.
    pub webhook: Option<(crate::hooks::Mode, String, i64)>,
    /// What each of its runs asks for when it ends.
    pub followups: crate::followup::FollowUps,
}

/// What a save says of a task.
#[derive(Debug, Clone)]
pub struct Definition {
    pub name: String,
    pub spec: Spec,
    pub schedule: Option<Schedule>,
    pub followups: crate::followup::FollowUps,
}

/// An admin's approval of one version.
#[derive(Debug, Clone, PartialEq)]
pub struct Approved {
    pub version: u32,
    pub by: String,
    pub at_ms: i64,
    pub standing_approval_id: String,
    /// Where execd's approval runs it (`auto` resolved).
    pub place: Place,
}

impl Task {
    /// The approval of its current version, if it has one: only then does it run.
    pub fn runnable(&self) -> Option<&Approved> {
        self.approval.as_ref().filter(|a| a.version == self.version)
    }
}

/// A task's name: 1 to 64 characters, no control characters.
pub fn check_name(name: &str) -> Result<(), Invalid> {
    let n = name.chars().count();
    if n == 0 || n > 64 || name.chars().any(char::is_control) || name.trim() != name {
        return Err(Invalid(
            "name",
            "1 to 64 characters, no control characters or outer spaces".into(),
        ));
    }
    Ok(())
}

fn row(r: &SqliteRow) -> Result<Task, StoreError> {
    let id: String = r.get("id");
    let corrupt = |why: String| StoreError::Corrupt(id.clone(), why);
    let spec: String = r.get("spec");
    let schedule: Option<String> = r.get("schedule");
    let approved_version = u32::try_from(r.get::<i64, _>("approved_version")).unwrap_or(0);
    let approved_place: String = r.get("approved_place");
    Ok(Task {
        spec: serde_json::from_str(&spec).map_err(|e| corrupt(e.to_string()))?,
        schedule: schedule
            .map(|s| serde_json::from_str(&s))
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?,
        approval: (approved_version > 0)
            .then(|| {
                Ok::<_, StoreError>(Approved {
                    version: approved_version,
                    by: r.get("approved_by"),
                    at_ms: r.get("approved_at_ms"),
                    standing_approval_id: r.get("standing_approval_id"),
                    place: Place::parse(&approved_place)
                        .ok_or_else(|| corrupt(format!("place {approved_place:?}")))?,
                })
            })
            .transpose()?,
        owner: r.get("owner"),
        name: r.get("name"),
        version: u32::try_from(r.get::<i64, _>("version")).unwrap_or(0),
        paused: r.get::<i64, _>("paused") != 0,
        cursor_ms: r.get("cursor_ms"),
        next_run_at_ms: r.get("next_run_at_ms"),
        created_at_ms: r.get("created_at_ms"),
        updated_at_ms: r.get("updated_at_ms"),
        webhook: crate::hooks::Mode::parse(r.get("webhook_mode"))
            .map(|m| (m, r.get("webhook_secret"), r.get("webhook_set_at_ms"))),
        followups: {
            let text: String = r.get("followups");
            if text.is_empty() {
                Default::default()
            } else {
                serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?
            }
        },
        id: id.clone(),
    })
}

impl Store {
    pub async fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        sqlx::query("SELECT * FROM tasks WHERE id = ?")
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .as_ref()
            .map(row)
            .transpose()
    }

    /// Newest first.
    pub async fn tasks(
        &self,
        owner: Option<&str>,
        before_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Task>, StoreError> {
        sqlx::query(
            "SELECT * FROM tasks WHERE (?1 IS NULL OR owner = ?1) AND (?2 IS NULL OR id < ?2)
             ORDER BY id DESC LIMIT ?3",
        )
        .bind(owner)
        .bind(before_id)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(row)
        .collect()
    }

    /// Records a new task (version 1) or a new version of task `id` (owned by `owner`),
    /// approved when `approved` says so (else it keeps the approval of an older version,
    /// which no longer runs); its schedule's cursor starts now. None: no such task.
    pub async fn save_task(
        &self,
        id: Option<&str>,
        owner: &str,
        d: &Definition,
        approved: Option<&Approved>,
    ) -> Result<Option<Task>, StoreError> {
        let (name, spec, schedule, followups) =
            (d.name.as_str(), &d.spec, d.schedule.as_ref(), &d.followups);
        let now = now_ms();
        let spec_text = serde_json::to_string(spec).expect("a spec serializes");
        let followups_text = if followups.is_empty() {
            String::new()
        } else {
            serde_json::to_string(followups).expect("serializes")
        };
        let schedule_text = schedule.map(|s| serde_json::to_string(s).expect("serializes"));
        let id = match id {
            None => {
                let id = uuid::Uuid::now_v7().to_string();
                sqlx::query(
                    "INSERT INTO tasks (id, owner, name, version, spec, schedule, cursor_ms,
                       created_at_ms, updated_at_ms, followups) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?)",
                )
                .bind(&id)
                .bind(owner)
                .bind(name)
                .bind(&spec_text)
                .bind(&schedule_text)
                .bind(now)
                .bind(now)
                .bind(now)
                .bind(&followups_text)
                .execute(self.pool())
                .await?;
                id
            }
            Some(id) => {
                let changed = sqlx::query(
                    "UPDATE tasks SET name = ?, version = version + 1, spec = ?, schedule = ?,
                       cursor_ms = ?, updated_at_ms = ?, followups = ? WHERE id = ? AND owner = ?",
                )
                .bind(name)
                .bind(&spec_text)
                .bind(&schedule_text)
                .bind(now)
                .bind(now)
                .bind(&followups_text)
                .bind(id)
                .bind(owner)
                .execute(self.pool())
                .await?
                .rows_affected()
                    == 1;
                if !changed {
                    return Ok(None);
                }
                id.to_string()
            }
        };
        if let Some(a) = approved {
            let version: i64 = sqlx::query_scalar("SELECT version FROM tasks WHERE id = ?")
                .bind(&id)
                .fetch_one(self.pool())
                .await?;
            let a = Approved {
                version: u32::try_from(version).unwrap_or(0),
                ..a.clone()
            };
            self.approve_task(&id, &a).await?;
        }
        self.task(&id).await
    }

    /// Approves version `a.version` of task `id`, if that is still its current version;
    /// its schedule's cursor starts now. False: it changed meanwhile.
    pub async fn approve_task(&self, id: &str, a: &Approved) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "UPDATE tasks SET approved_version = ?, approved_by = ?, approved_at_ms = ?,
               standing_approval_id = ?, approved_place = ?, cursor_ms = ?
             WHERE id = ? AND version = ?",
        )
        .bind(i64::from(a.version))
        .bind(&a.by)
        .bind(a.at_ms)
        .bind(&a.standing_approval_id)
        .bind(a.place.as_str())
        .bind(now_ms())
        .bind(id)
        .bind(i64::from(a.version))
        .execute(self.pool())
        .await?
        .rows_affected()
            == 1)
    }

    /// Pauses or resumes; a resumed schedule starts from now (what was due while paused
    /// is not made up for).
    pub async fn set_paused(&self, id: &str, paused: bool) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "UPDATE tasks SET paused = ?, cursor_ms = CASE WHEN ? THEN cursor_ms ELSE ? END,
               updated_at_ms = ? WHERE id = ?",
        )
        .bind(paused)
        .bind(paused)
        .bind(now_ms())
        .bind(now_ms())
        .bind(id)
        .execute(self.pool())
        .await?
        .rows_affected()
            == 1)
    }

    pub async fn delete_task(&self, id: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query("DELETE FROM tasks WHERE id = ?")
            .bind(id)
            .execute(self.pool())
            .await?
            .rows_affected()
            == 1)
    }

    /// Sets when task `id` (at `version`) fires next and how far its fires are handled.
    pub async fn schedule_next(
        &self,
        id: &str,
        version: u32,
        cursor_ms: i64,
        next_run_at_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE tasks SET cursor_ms = ?, next_run_at_ms = ? WHERE id = ? AND version = ?",
        )
        .bind(cursor_ms)
        .bind(next_run_at_ms)
        .bind(id)
        .bind(i64::from(version))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Gives task `id` a webhook (replacing any: the old secret stops working) or none.
    pub async fn set_webhook(
        &self,
        id: &str,
        hook: Option<(crate::hooks::Mode, &str)>,
    ) -> Result<bool, StoreError> {
        let (mode, secret) = hook.map_or(("", ""), |(m, s)| (m.as_str(), s));
        Ok(sqlx::query(
            "UPDATE tasks SET webhook_mode = ?, webhook_secret = ?, webhook_set_at_ms = ?
             WHERE id = ?",
        )
        .bind(mode)
        .bind(secret)
        .bind(if mode.is_empty() { 0 } else { now_ms() })
        .bind(id)
        .execute(self.pool())
        .await?
        .rows_affected()
            == 1)
    }

    /// Remembers a signed delivery until it leaves the window; false: already taken.
    pub async fn first_seen(
        &self,
        task_id: &str,
        signature: &str,
        expires_at_ms: i64,
    ) -> Result<bool, StoreError> {
        sqlx::query("DELETE FROM webhook_seen WHERE expires_at_ms < ?")
            .bind(now_ms())
            .execute(self.pool())
            .await?;
        Ok(sqlx::query(
            "INSERT INTO webhook_seen (task_id, signature, expires_at_ms) VALUES (?, ?, ?)
             ON CONFLICT DO NOTHING",
        )
        .bind(task_id)
        .bind(signature)
        .bind(expires_at_ms)
        .execute(self.pool())
        .await?
        .rows_affected()
            == 1)
    }

    /// Tasks due at `now_ms`.
    pub async fn due_tasks(&self, now_ms: i64) -> Result<Vec<Task>, StoreError> {
        sqlx::query("SELECT * FROM tasks WHERE next_run_at_ms > 0 AND next_run_at_ms <= ?")
            .bind(now_ms)
            .fetch_all(self.pool())
            .await?
            .iter()
            .map(row)
            .collect()
    }

    /// The earliest time any task fires next.
    pub async fn next_wake(&self) -> Result<Option<i64>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT min(next_run_at_ms) FROM tasks WHERE next_run_at_ms > 0")
                .fetch_one(self.pool())
                .await?,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn spec() -> Spec {
        Spec {
            name: "t".into(),
            command: "true".into(),
            argv: Vec::new(),
            cwd: String::new(),
            env: BTreeMap::new(),
            place: Place::Host,
            max_runtime_ms: 1000,
            purpose: String::new(),
            tool: None,
        }
    }

    fn def(name: &str) -> Definition {
        Definition {
            name: name.into(),
            spec: spec(),
            schedule: None,
            followups: Default::default(),
        }
    }

    #[tokio::test]
    async fn a_new_version_is_not_runnable_until_approved() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("jobd.db")).await.unwrap();
        let approved = Approved {
            version: 0,
            by: "root-admin".into(),
            at_ms: 1,
            standing_approval_id: "s1".into(),
            place: Place::Host,
        };
        let t = s
            .save_task(None, "alice", &def("nightly"), Some(&approved))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(t.version, 1);
        assert_eq!(t.runnable().map(|a| a.version), Some(1));
        // Changed by someone who may not approve: version 2, not runnable.
        let t2 = s
            .save_task(Some(&t.id), "alice", &def("nightly"), None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(t2.version, 2);
        assert!(t2.runnable().is_none());
        // An approval of the old version does not take; of the current one, does.
        let stale = Approved {
            version: 1,
            ..approved.clone()
        };
        assert!(!s.approve_task(&t.id, &stale).await.unwrap());
        let fresh = Approved {
            version: 2,
            ..approved
        };
        assert!(s.approve_task(&t.id, &fresh).await.unwrap());
        assert!(s.task(&t.id).await.unwrap().unwrap().runnable().is_some());
        // Another owner cannot save over it.
        assert!(
            s.save_task(Some(&t.id), "mallory", &def("x"), None)
                .await
                .unwrap()
                .is_none()
        );
        assert!(check_name("").is_err() && check_name(" x").is_err() && check_name("ok").is_ok());
    }
}
