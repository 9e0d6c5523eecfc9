//! The audit trail: an append-only, hash-chained table in a daemon's own database.
//!
//! Each row holds `seq` (1, 2, …), `prev_hash` (the previous row's hash; 64 zeros for the
//! first), `hash` = SHA-256 over the canonical JSON (keys sorted, no spaces) of
//! `{actor, at_ms, detail, kind, prev_hash, seq, subject}`, and `mac`, the daemon's keyed
//! tag of that hash (`key.rs`: HMAC-SHA256 under a key only the daemon reads). Editing,
//! removing or reordering any row breaks the chain at that row, and `verify` names it;
//! recomputing the chain after an edit needs the key, or every recomputed row's MAC fails.
//! Triggers refuse UPDATE and DELETE, so no code path of the daemon's own can rewrite
//! history; the chain is what catches anyone who edits the file.
//!
//! A chain cut short at its end, or recomputed by someone holding the key, is caught by
//! anchors: daemons record each other's head (the last row that is not itself an
//! anchor) in their own trails (`audit.anchor` rows, [`Audit::record_anchor`]), and
//! `verify` given the newest anchor another daemon holds finds the rows from there
//! missing, or that row's hash changed. Rows written since the last exchange are not yet
//! anchored; each append is also logged (seq and hash).
//!
//! Appends are serialized in the process (one daemon owns its database) and run in a
//! transaction with the change they record: if the audit write fails, so does the change.

use crate::now_ms;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Row as _, Sqlite};

use crate::key::Key;

/// The `prev_hash` of the first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// The kind of a row that records another daemon's head.
pub const ANCHOR: &str = "audit.anchor";
/// The key's domain for rows' MACs.
pub const ROW_DOMAIN: &str = "argos audit row v1";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS audit (
    seq       INTEGER PRIMARY KEY,  -- 1, 2, … without gaps
    at_ms     INTEGER NOT NULL,     -- unix ms
    kind      TEXT NOT NULL,        -- what happened: launch.intent, approval.decided, …
    actor     TEXT NOT NULL,        -- who: peer role and principal
    subject   TEXT NOT NULL,        -- what it happened to: an execution or approval id
    detail    TEXT NOT NULL,        -- JSON object
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL,
    mac       TEXT NOT NULL DEFAULT ''  -- the daemon's keyed tag of hash
) STRICT;
CREATE INDEX IF NOT EXISTS audit_by_subject ON audit (subject, seq);
";

const TRIGGERS: &str = "
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
    pub mac: String,
}

/// Why another daemon's head was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum AnchorRefused {
    /// It contradicts the anchor recorded before it: that trail was cut off or rewritten.
    #[error("{0}")]
    Contradicts(String),
    /// This trail could not be read or written (a full disk among the causes): nothing
    /// is said of the other trail.
    #[error("this daemon's audit trail: {0}")]
    Store(sqlx::Error),
}

/// A daemon's head as another daemon's trail recorded it: row `seq` had `hash`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// Who recorded it.
    pub by: String,
    pub seq: i64,
    pub hash: String,
    pub at_ms: i64,
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
    /// The anchor the trail was checked against, if one was given.
    pub anchor: Option<Anchor>,
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
    key: Arc<Key>,
    /// The daemon whose trail this is (`execd`, `gateway`): who its anchors are by.
    name: String,
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
    /// The rows appended, logged once they commit (a row logged before its commit could
    /// be one that never reached the trail).
    written: Vec<Record>,
    pub tx: sqlx::Transaction<'static, Sqlite>,
    key: Arc<Key>,
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
            mac: String::new(),
        };
        r.hash = hash(&r).unwrap_or_default();
        r.mac = self.key.tag(ROW_DOMAIN, r.hash.as_bytes());
        sqlx::query(
            "INSERT INTO audit (seq, at_ms, kind, actor, subject, detail, prev_hash, hash, mac)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(r.seq)
        .bind(r.at_ms)
        .bind(&r.kind)
        .bind(&r.actor)
        .bind(&r.subject)
        .bind(&r.detail)
        .bind(&r.prev_hash)
        .bind(&r.hash)
        .bind(&r.mac)
        .execute(&mut *self.tx)
        .await?;
        let seq = r.seq;
        self.next = Some((r.seq, r.hash.clone()));
        self.written.push(r);
        Ok(seq)
    }

    /// Commits the transaction; only then are its rows the trail's (and logged).
    pub async fn commit(mut self) -> sqlx::Result<()> {
        self.tx.commit().await?;
        if let Some(h) = self.next.take() {
            *self.head = Some(h);
        }
        for r in &self.written {
            tracing::info!(target: "audit", seq = r.seq, hash = %r.hash, kind = %r.kind,
                actor = %r.actor, subject = %r.subject, "audit");
        }
        Ok(())
    }
}

impl Audit {
    /// The audit trail of daemon `name` in `pool`'s database (its table and triggers made
    /// if missing), its rows tagged under `key`. A trail from before rows had MACs is
    /// tagged once, here, when its key is new too, and says so in a row of its own
    /// (`audit.keyed`) and in the log.
    pub async fn open(pool: SqlitePool, key: Arc<Key>, name: &str) -> sqlx::Result<Audit> {
        sqlx::raw_sql(SCHEMA).execute(&pool).await?;
        let keyed: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM pragma_table_info('audit') WHERE name = 'mac'")
                .fetch_optional(&pool)
                .await?;
        let audit = Audit {
            pool,
            key,
            name: name.to_string(),
            lock: tokio::sync::Mutex::new(None),
        };
        if keyed.is_none() {
            // Only a trail from before keys existed is tagged: one whose key is older
            // than its missing column had that column taken away (to have forged rows
            // tagged here), and is refused.
            if !audit.key.is_new() {
                return Err(sqlx::Error::Protocol(format!(
                    "the audit trail has no MAC column, but {}'s key is older than this start: the column was removed (rows may have been rewritten); refusing the trail — move the database aside to start a new one",
                    audit.name
                )));
            }
            audit.tag_unkeyed_rows().await?;
        }
        sqlx::raw_sql(TRIGGERS).execute(&audit.pool).await?;
        Ok(audit)
    }

    /// Adds the `mac` column to a trail written before rows had MACs and tags every row.
    async fn tag_unkeyed_rows(&self) -> sqlx::Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::raw_sql(
            "ALTER TABLE audit ADD COLUMN mac TEXT NOT NULL DEFAULT '';
             DROP TRIGGER IF EXISTS audit_no_update;",
        )
        .execute(&mut *tx)
        .await?;
        let rows: Vec<(i64, String)> = sqlx::query_as("SELECT seq, hash FROM audit")
            .fetch_all(&mut *tx)
            .await?;
        for (seq, hash) in &rows {
            sqlx::query("UPDATE audit SET mac = ? WHERE seq = ?")
                .bind(self.key.tag(ROW_DOMAIN, hash.as_bytes()))
                .bind(seq)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        tracing::warn!(
            rows = rows.len(),
            "audit trail from before keyed MACs: its rows are tagged now (their hash chain is checked as before)"
        );
        self.append(&Entry::new(
            "audit.keyed",
            "audit",
            "audit",
            serde_json::json!({"rows": rows.len()}),
        ))
        .await?;
        Ok(())
    }

    /// Begins a transaction for changes that must be audited with them.
    pub async fn begin(&self) -> sqlx::Result<Txn<'_>> {
        let head = self.lock.lock().await;
        let tx = self.pool.begin().await?;
        Ok(Txn {
            head,
            next: None,
            written: Vec::new(),
            tx,
            key: self.key.clone(),
        })
    }

    /// Appends one record on its own; returns its seq.
    pub async fn append(&self, e: &Entry) -> sqlx::Result<i64> {
        let mut t = self.begin().await?;
        let seq = t.append(e).await?;
        t.commit().await?;
        Ok(seq)
    }

    /// Walks the whole chain from seq 1 and reports the first row that does not verify:
    /// a break in the chain, a MAC that is not this daemon's, or — given the newest
    /// anchor another daemon holds of this trail — rows missing from there, or that row's
    /// hash not the one recorded.
    pub async fn verify(&self, anchor: Option<&Anchor>) -> sqlx::Result<Verification> {
        let mut v = Verification {
            rows: 0,
            head_seq: 0,
            head_hash: GENESIS.to_string(),
            broken: None,
            anchor: anchor.cloned(),
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
                break;
            };
            after = last.seq;
            for r in page {
                v.rows += 1;
                if v.broken.is_none() {
                    v.broken = check(&r, v.head_seq, &v.head_hash, &self.key)
                        .or_else(|| {
                            anchor
                                .filter(|a| a.seq == r.seq && a.hash != r.hash)
                                .map(|a| {
                                    format!(
                                        "its hash is not the one {} recorded for it (at unix ms {}): the trail was rewritten up to here",
                                        a.by, a.at_ms
                                    )
                                })
                        })
                        .map(|why| (r.seq, why));
                }
                v.head_seq = r.seq;
                v.head_hash = r.hash;
            }
        }
        if let Some(a) = anchor.filter(|a| a.seq > v.head_seq)
            && v.broken.is_none()
        {
            v.broken = Some((
                v.head_seq + 1,
                format!(
                    "rows {}..{} are missing: {} recorded row {} (at unix ms {}) and the trail ends at {} (cut off)",
                    v.head_seq + 1,
                    a.seq,
                    a.by,
                    a.seq,
                    a.at_ms,
                    v.head_seq
                ),
            ));
        }
        Ok(v)
    }

    /// Whether this trail still holds `a` (its row `a.seq` with hash `a.hash`, tagged
    /// under this daemon's key): None when it does, else why not. Checked before another
    /// daemon records a newer head of this trail, so that anchors only ever extend each
    /// other and the newest one vouches for every row up to it.
    pub async fn confirm(&self, a: &Anchor) -> sqlx::Result<Option<String>> {
        let row: Option<(String, String)> =
            sqlx::query_as("SELECT hash, mac FROM audit WHERE seq = ?")
                .bind(a.seq)
                .fetch_optional(&self.pool)
                .await?;
        Ok(match row {
            None => Some(format!(
                "row {} is missing, though {} recorded it at unix ms {} (the trail was cut off)",
                a.seq, a.by, a.at_ms
            )),
            Some((hash, _)) if hash != a.hash => Some(format!(
                "row {}'s hash is not the one {} recorded at unix ms {} (the trail was rewritten)",
                a.seq, a.by, a.at_ms
            )),
            Some((hash, mac)) if !self.key.verify(ROW_DOMAIN, hash.as_bytes(), &mac) => {
                Some(format!(
                    "row {}'s MAC is not this daemon's (the trail was rewritten)",
                    a.seq
                ))
            }
            Some(_) => None,
        })
    }

    /// This trail's head for another daemon to anchor: its last row that is not itself an
    /// anchor (so that exchanging anchors settles instead of growing both trails).
    pub async fn content_head(&self) -> sqlx::Result<(i64, String)> {
        Ok(
            sqlx::query_as("SELECT seq, hash FROM audit WHERE kind != ? ORDER BY seq DESC LIMIT 1")
                .bind(ANCHOR)
                .fetch_optional(&self.pool)
                .await?
                .unwrap_or((0, GENESIS.to_string())),
        )
    }

    /// The newest anchor this trail holds of `of`'s trail.
    pub async fn anchor_of(&self, of: &str) -> sqlx::Result<Option<Anchor>> {
        let row = sqlx::query(
            "SELECT * FROM audit WHERE subject = ? AND kind = ? ORDER BY seq DESC LIMIT 1",
        )
        .bind(of)
        .bind(ANCHOR)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.and_then(|r| {
            let r = record(&r);
            let d: serde_json::Value = serde_json::from_str(&r.detail).ok()?;
            Some(Anchor {
                by: self.name.clone(),
                seq: d["seq"].as_i64()?,
                hash: d["hash"].as_str()?.to_string(),
                at_ms: r.at_ms,
            })
        }))
    }

    /// Records `of`'s head (`seq`, `hash`) in this trail, when it moved on since the last
    /// one recorded. A head behind the last one, or the same row with another hash, is not
    /// recorded (that would hide a trail cut short or rewritten): it is refused, naming
    /// the anchor it contradicts. Returns whether a row was written.
    pub async fn record_anchor(
        &self,
        of: &str,
        seq: i64,
        hash: &str,
    ) -> Result<bool, AnchorRefused> {
        let last = self.anchor_of(of).await.map_err(AnchorRefused::Store)?;
        if let Some(a) = &last {
            if seq < a.seq || (seq == a.seq && hash != a.hash) {
                return Err(AnchorRefused::Contradicts(format!(
                    "{of}'s audit head is row {seq} ({hash:.12}…), but this trail recorded row {} ({:.12}…) at unix ms {}: {of}'s trail was cut off or rewritten",
                    a.seq, a.hash, a.at_ms
                )));
            }
            if seq == a.seq {
                return Ok(false);
            }
        }
        if seq == 0 {
            return Ok(false);
        }
        self.append(&Entry::new(
            ANCHOR,
            of,
            of,
            serde_json::json!({"seq": seq, "hash": hash}),
        ))
        .await
        .map_err(AnchorRefused::Store)?;
        Ok(true)
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

/// Why `r` does not follow a row with `prev_seq` and `prev_hash`, or is not tagged under
/// `key`, if it does not or is not.
fn check(r: &Record, prev_seq: i64, prev_hash: &str, key: &Key) -> Option<String> {
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
        Some(_) if !key.verify(ROW_DOMAIN, r.hash.as_bytes(), &r.mac) => Some(
            "its MAC is not this daemon's: the row was written without its key (the chain recomputed after an edit)".into(),
        ),
        Some(_) => None,
    }
}

/// The hash of a row (None if its detail is not JSON).
pub fn hash(r: &Record) -> Option<String> {
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
    hex::encode(Sha256::digest(bytes))
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

/// A row as read from the `audit` table.
pub fn record(r: &SqliteRow) -> Record {
    Record {
        seq: r.get("seq"),
        at_ms: r.get("at_ms"),
        kind: r.get("kind"),
        actor: r.get("actor"),
        subject: r.get("subject"),
        detail: r.get("detail"),
        prev_hash: r.get("prev_hash"),
        hash: r.get("hash"),
        mac: r.get("mac"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn other_pool_closed(a: &Audit) {
        a.pool.close().await;
    }

    async fn trail(dir: &std::path::Path) -> (Audit, SqlitePool) {
        static NONE: sqlx::migrate::Migrator = sqlx::migrate::Migrator::DEFAULT;
        let pool = crate::open(&dir.join("t.db"), &NONE, crate::Durability::Commit)
            .await
            .unwrap();
        let key = Arc::new(Key::load_or_create(&dir.join("t.key")).unwrap());
        (Audit::open(pool.clone(), key, "t").await.unwrap(), pool)
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
        assert_eq!(audit.verify(None).await.unwrap().rows, 0);
        for n in 1..=5 {
            assert_eq!(audit.append(&entry(n)).await.unwrap(), i64::from(n));
        }
        let v = audit.verify(None).await.unwrap();
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
        let v = audit.verify(None).await.unwrap();
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
        assert_eq!(
            audit.verify(None).await.unwrap().broken.map(|b| b.0),
            Some(3)
        );
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
        let v = audit.verify(None).await.unwrap();
        assert_eq!((v.rows, v.broken), (1, None));
    }

    /// Rewriting a row and recomputing the chain with SHA-256 alone: every hash links,
    /// but the first recomputed row's MAC is not the daemon's.
    #[tokio::test]
    async fn a_recomputed_chain_fails_its_macs() {
        let dir = tempfile::tempdir().unwrap();
        let (audit, pool) = trail(dir.path()).await;
        for n in 1..=4 {
            audit.append(&entry(n)).await.unwrap();
        }
        sqlx::query("DROP TRIGGER audit_no_update")
            .execute(&pool)
            .await
            .unwrap();
        let mut prev = GENESIS.to_string();
        for mut r in audit
            .list(&Filter {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_iter()
            .rev()
        {
            if r.seq == 2 {
                r.actor = "nobody".into();
            }
            r.prev_hash = prev;
            r.hash = hash(&r).unwrap();
            sqlx::query("UPDATE audit SET actor = ?, prev_hash = ?, hash = ? WHERE seq = ?")
                .bind(&r.actor)
                .bind(&r.prev_hash)
                .bind(&r.hash)
                .bind(r.seq)
                .execute(&pool)
                .await
                .unwrap();
            prev = r.hash;
        }
        let v = audit.verify(None).await.unwrap();
        let (seq, why) = v.broken.unwrap();
        assert_eq!(seq, 2);
        assert!(why.contains("MAC"), "{why}");
    }

    /// Anchors held by another daemon catch what the chain and the MACs cannot: the end
    /// cut off, or the chain recomputed by someone holding the key.
    #[tokio::test]
    async fn anchors_catch_a_cut_off_end_and_extend_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let (audit, pool) = trail(dir.path()).await;
        let other_dir = tempfile::tempdir().unwrap();
        let (other, _) = trail(other_dir.path()).await;
        for n in 1..=5 {
            audit.append(&entry(n)).await.unwrap();
        }
        let (seq, hash) = audit.content_head().await.unwrap();
        assert_eq!(seq, 5);
        assert!(other.record_anchor("t", seq, &hash).await.unwrap());
        assert!(
            !other.record_anchor("t", seq, &hash).await.unwrap(),
            "no news, no row"
        );
        let held = other.anchor_of("t").await.unwrap().unwrap();
        assert_eq!((held.seq, held.by.as_str()), (5, "t"));
        assert_eq!(audit.confirm(&held).await.unwrap(), None);
        // Anchor rows do not move the head another daemon anchors.
        audit.record_anchor("u", 3, "h").await.unwrap();
        assert_eq!(audit.content_head().await.unwrap().0, 5);
        let v = audit.verify(Some(&held)).await.unwrap();
        assert_eq!(v.broken, None, "{v:?}");

        // The last rows cut off: the chain alone still verifies; the anchor does not.
        sqlx::query("DROP TRIGGER audit_no_delete")
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("DELETE FROM audit WHERE seq >= 4")
            .execute(&pool)
            .await
            .unwrap();
        assert_eq!(audit.verify(None).await.unwrap().broken, None);
        let v = audit.verify(Some(&held)).await.unwrap();
        let (seq, why) = v.broken.unwrap();
        assert_eq!(seq, 4);
        assert!(
            why.contains("rows 4..5 are missing") && why.contains("cut off"),
            "{why}"
        );
        assert!(
            audit
                .confirm(&held)
                .await
                .unwrap()
                .unwrap()
                .contains("missing")
        );
        // A head behind the anchor is refused, not recorded over it.
        let (seq, hash) = audit.content_head().await.unwrap();
        let e = other.record_anchor("t", seq, &hash).await.unwrap_err();
        assert!(
            matches!(&e, AnchorRefused::Contradicts(why) if why.contains("cut off or rewritten")),
            "{e}"
        );
        // A trail that cannot be read or written says so: no word of the other trail.
        other_pool_closed(&other).await;
        let e = other.record_anchor("t", seq + 1, &hash).await.unwrap_err();
        assert!(matches!(e, AnchorRefused::Store(_)), "{e}");
    }

    /// A trail written before rows had MACs is tagged once when opened, and says so.
    #[tokio::test]
    async fn an_unkeyed_trail_is_tagged_once_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (audit, pool) = trail(dir.path()).await;
            for n in 1..=3 {
                audit.append(&entry(n)).await.unwrap();
            }
            // As it was before MACs: no column.
            sqlx::raw_sql("DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete; ALTER TABLE audit DROP COLUMN mac;")
                .execute(&pool)
                .await
                .unwrap();
        }
        // The key is older than this start: the column was taken away, not never there.
        static NONE: sqlx::migrate::Migrator = sqlx::migrate::Migrator::DEFAULT;
        let pool = crate::open(&dir.path().join("t.db"), &NONE, crate::Durability::Commit)
            .await
            .unwrap();
        let old_key = Arc::new(Key::load_or_create(&dir.path().join("t.key")).unwrap());
        let e = Audit::open(pool, old_key, "t")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("the column was removed"), "{e}");
        // A trail from before keys existed: its key is made now.
        std::fs::remove_file(dir.path().join("t.key")).unwrap();
        let (audit, _pool) = trail(dir.path()).await;
        let v = audit.verify(None).await.unwrap();
        assert_eq!(v.rows, 4);
        assert_eq!(v.broken, None);
        let keyed = audit
            .list(&Filter {
                kind_prefix: Some("audit.keyed".into()),
                limit: 5,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(keyed.len(), 1);
        assert_eq!(keyed[0].detail, r#"{"rows":3}"#);
        let (again, _) = trail(dir.path()).await;
        assert_eq!(again.verify(None).await.unwrap().rows, 4, "tagged once");
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let a = serde_json::json!({"b": 1, "a": {"d": [true, null], "c": "x\"y"}});
        assert_eq!(canonical(&a), r#"{"a":{"c":"x\"y","d":[true,null]},"b":1}"#);
    }
}
