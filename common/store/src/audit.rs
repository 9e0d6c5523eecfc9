//! The audit trail: an append-only, hash-chained table in a daemon's own database.
//!
//! Each row holds `seq` (1, 2, …), `prev_hash` (the previous row's hash; 64 zeros for the
//! first) and `hash` = SHA-256 over the canonical JSON (keys sorted, no spaces) of
//! `{actor, at_ms, detail, kind, prev_hash, seq, subject}`. Editing, removing or
//! reordering any row breaks the chain at that row, and `verify` names it. Triggers refuse
//! UPDATE and DELETE, so no code path of the daemon's own can rewrite history; the chain is
//! what catches anyone who edits the file. A chain cut short at its end still verifies:
//! each append is also logged (seq and hash), so the journal anchors the head.
//!
//! Appends are serialized in the process (one daemon owns its database) and run in a
//! transaction with the change they record: if the audit write fails, so does the change.

use sha2::{Digest, Sha256};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Row as _, Sqlite};

/// The `prev_hash` of the first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS audit (
    seq       INTEGER PRIMARY KEY,  -- 1, 2, … without gaps
    at_ms     INTEGER NOT NULL,     -- unix ms
    kind      TEXT NOT NULL,        -- what happened: launch.intent, approval.decided, …
    actor     TEXT NOT NULL,        -- who: peer role and principal
    subject   TEXT NOT NULL,        -- what it happened to: an execution or approval id
    detail    TEXT NOT NULL,        -- JSON object
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS audit_by_subject ON audit (subject, seq);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
";

/// A record to append.
#[derive(Debug, Clone)]
pub struct Entry {
    pub kind: String,
    pub actor: String,
    pub subject: String,
    /// A JSON object.
    pub detail: serde_json::Value,
}

impl Entry {
    pub fn new(
        kind: impl Into<String>,
        actor: impl Into<String>,
        subject: impl Into<String>,
        detail: serde_json::Value,
    ) -> Entry {
        Entry {
            kind: kind.into(),
            actor: actor.into(),
            subject: subject.into(),
            detail,
        }
    }
}

/// A record as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub seq: i64,
    pub at_ms: i64,
    pub kind: String,
    pub actor: String,
    pub subject: String,
    /// The stored JSON text (as hashed).
    pub detail: String,
    pub prev_hash: String,
    pub hash: String,
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Rows read.
    pub rows: u64,
    /// The last row's seq and hash (the head to compare with the journal).
    pub head_seq: i64,
    pub head_hash: String,
    /// The first row that does not verify, and why.
    pub broken: Option<(i64, String)>,
}

/// Filters of a listing, newest first.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Kinds starting with this (`approval.` for every approval record).
    pub kind_prefix: Option<String>,
    pub subject: Option<String>,
    pub actor: Option<String>,
    /// Only rows with seq below this (paging).
    pub before_seq: Option<i64>,
    pub limit: u32,
}

/// A daemon's audit trail.
#[derive(Debug)]
pub struct Audit {
    pool: SqlitePool,
    /// One append at a time; the lock holds the committed head (seq, hash) once read, so
    /// an append does not read it back from the table (this daemon owns its database).
    lock: tokio::sync::Mutex<Option<(i64, String)>>,
}

/// A transaction holding the append lock: the caller's own changes and the audit records
/// that describe them commit together, or not at all.
pub struct Txn<'a> {
    head: tokio::sync::MutexGuard<'a, Option<(i64, String)>>,
    /// The head once this transaction's appends commit.
    next: Option<(i64, String)>,
    pub tx: sqlx::Transaction<'static, Sqlite>,
}

impl std::fmt::Debug for Txn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("audit::Txn")
    }
}

impl Txn<'_> {
    /// Appends a record in this transaction; returns its seq.
    pub async fn append(&mut self, e: &Entry) -> sqlx::Result<i64> {
        let head = match (&self.next, &*self.head) {
            (Some(h), _) | (None, Some(h)) => h.clone(),
            (None, None) => sqlx::query_as("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1")
                .fetch_optional(&mut *self.tx)
                .await?
                .unwrap_or((0, GENESIS.to_string())),
        };
        let (prev_seq, prev_hash) = head;
        let mut r = Record {
            seq: prev_seq + 1,
            at_ms: now_ms(),
            kind: e.kind.clone(),
            actor: e.actor.clone(),
            subject: e.subject.clone(),
            detail: canonical(&e.detail),
            prev_hash,
            hash: String::new(),
        };
        r.hash = hash(&r).unwrap_or_default();
        sqlx::query(
            "INSERT INTO audit (seq, at_ms, kind, actor, subject, detail, prev_hash, hash)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(r.seq)
        .bind(r.at_ms)
        .bind(&r.kind)
        .bind(&r.actor)
        .bind(&r.subject)
        .bind(&r.detail)
        .bind(&r.prev_hash)
        .bind(&r.hash)
        .execute(&mut *self.tx)
        .await?;
        tracing::info!(target: "audit", seq = r.seq, hash = %r.hash, kind = %r.kind,
            actor = %r.actor, subject = %r.subject, "audit");
        self.next = Some((r.seq, r.hash));
        Ok(r.seq)
    }

    pub async fn commit(mut self) -> sqlx::Result<()> {
        self.tx.commit().await?;
        if let Some(h) = self.next.take() {
            *self.head = Some(h);
        }
        Ok(())
    }
}

impl Audit {
    /// The audit trail in `pool`'s database (its table and triggers made if missing).
    pub async fn open(pool: SqlitePool) -> sqlx::Result<Audit> {
        sqlx::raw_sql(SCHEMA).execute(&pool).await?;
        Ok(Audit {
            pool,
            lock: tokio::sync::Mutex::new(None),
        })
    }

    /// Begins a transaction for changes that must be audited with them.
    pub async fn begin(&self) -> sqlx::Result<Txn<'_>> {
        let head = self.lock.lock().await;
        let tx = self.pool.begin().await?;
        Ok(Txn {
            head,
            next: None,
            tx,
        })
    }

    /// Appends one record on its own; returns its seq.
    pub async fn append(&self, e: &Entry) -> sqlx::Result<i64> {
        let mut t = self.begin().await?;
        let seq = t.append(e).await?;
        t.commit().await?;
        Ok(seq)
    }

    /// Walks the whole chain from seq 1 and reports the first row that does not verify.
    pub async fn verify(&self) -> sqlx::Result<Verification> {
        let mut v = Verification {
            rows: 0,
            head_seq: 0,
            head_hash: GENESIS.to_string(),
            broken: None,
        };
        let mut after = 0i64;
        loop {
            let page: Vec<Record> =
                sqlx::query("SELECT * FROM audit WHERE seq > ? ORDER BY seq LIMIT 1000")
                    .bind(after)
                    .fetch_all(&self.pool)
                    .await?
                    .iter()
                    .map(record)
                    .collect();
            let Some(last) = page.last() else {
                return Ok(v);
            };
            after = last.seq;
            for r in page {
                v.rows += 1;
                if v.broken.is_none() {
                    v.broken = check(&r, v.head_seq, &v.head_hash).map(|why| (r.seq, why));
                }
                v.head_seq = r.seq;
                v.head_hash = r.hash;
            }
        }
    }

    /// Records newest first.
    pub async fn list(&self, f: &Filter) -> sqlx::Result<Vec<Record>> {
        let mut q = sqlx::QueryBuilder::<Sqlite>::new("SELECT * FROM audit WHERE 1 = 1");
        if let Some(p) = &f.kind_prefix {
            q.push(" AND substr(kind, 1, length(")
                .push_bind(p.clone())
                .push(")) = ")
                .push_bind(p.clone());
        }
        if let Some(s) = &f.subject {
            q.push(" AND subject = ").push_bind(s.clone());
        }
        if let Some(a) = &f.actor {
            q.push(" AND actor = ").push_bind(a.clone());
        }
        if let Some(b) = f.before_seq {
            q.push(" AND seq < ").push_bind(b);
        }
        q.push(" ORDER BY seq DESC LIMIT ")
            .push_bind(i64::from(f.limit));
        Ok(q.build()
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(record)
            .collect())
    }
}

/// Why `r` does not follow a row with `prev_seq` and `prev_hash`, if it does not.
fn check(r: &Record, prev_seq: i64, prev_hash: &str) -> Option<String> {
    if r.seq != prev_seq + 1 {
        return Some(format!(
            "seq {} follows {prev_seq}: rows {}..{} are missing",
            r.seq,
            prev_seq + 1,
            r.seq - 1
        ));
    }
    if r.prev_hash != prev_hash {
        return Some("prev_hash is not the previous row's hash (a row before it was changed, removed or reordered)".into());
    }
    match hash(r) {
        None => Some("detail is not a JSON object".into()),
        Some(h) if h != r.hash => {
            Some("hash does not match the row's contents (the row was changed)".into())
        }
        Some(_) => None,
    }
}

/// The hash of a row (None if its detail is not JSON).
fn hash(r: &Record) -> Option<String> {
    let detail: serde_json::Value = serde_json::from_str(&r.detail).ok()?;
    let body = serde_json::json!({
        "actor": r.actor,
        "at_ms": r.at_ms,
        "detail": detail,
        "kind": r.kind,
        "prev_hash": r.prev_hash,
        "seq": r.seq,
        "subject": r.subject,
    });
    Some(sha256_hex(canonical(&body).as_bytes()))
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// JSON with object keys sorted and no whitespace: the same value always gives the same
/// text, whatever order it was built in.
pub fn canonical(v: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&m[k], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn record(r: &SqliteRow) -> Record {
    Record {
        seq: r.get("seq"),
        at_ms: r.get("at_ms"),
        kind: r.get("kind"),
        actor: r.get("actor"),
        subject: r.get("subject"),
        detail: r.get("detail"),
        prev_hash: r.get("prev_hash"),
        hash: r.get("hash"),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn trail(dir: &std::path::Path) -> (Audit, SqlitePool) {
        static NONE: sqlx::migrate::Migrator = sqlx::migrate::Migrator::DEFAULT;
        let pool = crate::open(&dir.join("t.db"), &NONE).await.unwrap();
        (Audit::open(pool.clone()).await.unwrap(), pool)
    }

    fn entry(n: u32) -> Entry {
        Entry::new(
            "test.thing",
            "operator",
            format!("s{n}"),
            serde_json::json!({"n": n, "b": [1, {"z": 1, "a": 2}]}),
        )
    }

    #[tokio::test]
    async fn a_chain_verifies_and_a_changed_row_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let (audit, pool) = trail(dir.path()).await;
        assert_eq!(audit.verify().await.unwrap().rows, 0);
        for n in 1..=5 {
            assert_eq!(audit.append(&entry(n)).await.unwrap(), i64::from(n));
        }
        let v = audit.verify().await.unwrap();
        assert_eq!((v.rows, v.head_seq, v.broken.clone()), (5, 5, None));
        assert_eq!(
            audit
                .list(&Filter {
                    limit: 2,
                    ..Default::default()
                })
                .await
                .unwrap()
                .len(),
            2
        );
        let only = Filter {
            subject: Some("s3".into()),
            limit: 10,
            ..Default::default()
        };
        assert_eq!(audit.list(&only).await.unwrap()[0].seq, 3);

        // The daemon itself cannot rewrite a row.
        let refused = sqlx::query("UPDATE audit SET actor = 'x' WHERE seq = 2")
            .execute(&pool)
            .await;
        assert!(refused.unwrap_err().to_string().contains("append-only"));
        assert!(
            sqlx::query("DELETE FROM audit WHERE seq = 2")
                .execute(&pool)
                .await
                .is_err()
        );

        // Someone with the file can: the chain names the row.
        sqlx::query("DROP TRIGGER audit_no_update")
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("UPDATE audit SET detail = '{\"n\":9}' WHERE seq = 3")
            .execute(&pool)
            .await
            .unwrap();
        let v = audit.verify().await.unwrap();
        assert_eq!(v.broken.as_ref().map(|b| b.0), Some(3), "{v:?}");
        assert!(v.broken.unwrap().1.contains("changed"));

        // A removed row breaks the chain at the next one.
        let dir = tempfile::tempdir().unwrap();
        let (audit, pool) = trail(dir.path()).await;
        for n in 1..=4 {
            audit.append(&entry(n)).await.unwrap();
        }
        sqlx::query("DROP TRIGGER audit_no_delete")
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("DELETE FROM audit WHERE seq = 2")
            .execute(&pool)
            .await
            .unwrap();
        assert_eq!(audit.verify().await.unwrap().broken.map(|b| b.0), Some(3));
    }

    #[tokio::test]
    async fn a_failed_transaction_leaves_no_record() {
        let dir = tempfile::tempdir().unwrap();
        let (audit, _pool) = trail(dir.path()).await;
        {
            let mut t = audit.begin().await.unwrap();
            t.append(&entry(1)).await.unwrap();
            // Dropped without commit: rolled back.
        }
        audit.append(&entry(2)).await.unwrap();
        let v = audit.verify().await.unwrap();
        assert_eq!((v.rows, v.broken), (1, None));
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let a = serde_json::json!({"b": 1, "a": {"d": [true, null], "c": "x\"y"}});
        assert_eq!(canonical(&a), r#"{"a":{"c":"x\"y","d":[true,null]},"b":1}"#);
    }
}
