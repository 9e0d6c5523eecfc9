//! The record of every tool call at `/mcp`: who (principal and token), which tool, what
//! went in and came out (each summarized to at most 500 characters), how long it took and
//! how it ended. A call's record is handed to one writer task, which writes in batches
//! (one transaction each) so a call does not wait for the disk; the channel is bounded, so
//! a burst waits for the writer rather than dropping records (a batch the database refuses
//! twice is logged as lost). Each principal's newest 10 000 are kept: one agent's flood of
//! calls cannot push another's record out.

use serde::Serialize;
use sqlx::{Row as _, SqlitePool};

/// The most characters of an input or output summary.
pub const SUMMARY_CHARS: usize = 500;
/// Records kept per principal; older ones are pruned as new ones arrive.
const KEEP: i64 = 10_000;
/// How long the writer gathers records into one transaction.
const GATHER: std::time::Duration = std::time::Duration::from_millis(25);
/// A principal's records are pruned once per this many new ones.
const PRUNE_EVERY: u32 = 100;

/// One tool call.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Entry {
    pub id: i64,
    pub at_ms: i64,
    pub principal: String,
    pub token_id: i64,
    pub token_name: String,
    pub tool: String,
    pub input: String,
    pub output: String,
    pub duration_ms: i64,
    /// `ok`, `error` (the tool answered an error) or `refused` (not this caller's tool).
    pub outcome: String,
}

/// At most [`SUMMARY_CHARS`] characters of `s`, an ellipsis where cut.
pub fn summary(s: &str) -> String {
    let mut chars = s.chars();
    let head: String = chars.by_ref().take(SUMMARY_CHARS).collect();
    if chars.next().is_some() {
        let mut head: String = head.chars().take(SUMMARY_CHARS - 1).collect();
        head.push('…');
        head
    } else {
        head
    }
}

/// Where calls' records go.
#[derive(Clone)]
pub struct Log {
    tx: tokio::sync::mpsc::Sender<Entry>,
}

impl Log {
    /// Starts the writer for `pool`.
    pub fn start(pool: SqlitePool) -> Log {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Entry>(4096);
        tokio::spawn(async move {
            let mut batch = Vec::new();
            let mut since_pruned: std::collections::HashMap<String, u32> = Default::default();
            while rx.recv_many(&mut batch, 256).await > 0 {
                // Let a busy agent's next calls join this transaction: one commit per
                // GATHER rather than per call (a record shows that much later at most).
                tokio::time::sleep(GATHER).await;
                while batch.len() < 256
                    && let Ok(e) = rx.try_recv()
                {
                    batch.push(e);
                }
                if let Err(e) = write(&pool, &batch).await {
                    tracing::warn!(error = %e, "recording MCP activity; trying again");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    if let Err(e) = write(&pool, &batch).await {
                        tracing::error!(error = %e, lost = batch.len(), "recording MCP activity");
                    }
                }
                for e in batch.drain(..) {
                    let n = since_pruned.entry(e.principal).or_insert(0);
                    *n += 1;
                }
                for (principal, n) in since_pruned.iter_mut() {
                    if *n < PRUNE_EVERY {
                        continue;
                    }
                    *n = 0;
                    if let Err(e) = sqlx::query(
                        "DELETE FROM mcp_activity WHERE principal = ?1 AND id <= (
                           SELECT id FROM mcp_activity WHERE principal = ?1
                           ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                    )
                    .bind(principal.as_str())
                    .bind(KEEP)
                    .execute(&pool)
                    .await
                    {
                        tracing::warn!(error = %e, "pruning MCP activity");
                    }
                }
            }
        });
        Log { tx }
    }

    /// Records a call (waits only while the writer is a full channel behind).
    pub async fn record(&self, e: Entry) {
        if self.tx.send(e).await.is_err() {
            tracing::error!("the MCP activity writer has stopped");
        }
    }
}

async fn write(pool: &SqlitePool, batch: &[Entry]) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    for e in batch {
        sqlx::query(
            "INSERT INTO mcp_activity (at_ms, principal, token_id, token_name, tool, input, output, duration_ms, outcome)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(e.at_ms)
        .bind(&e.principal)
        .bind(e.token_id)
        .bind(&e.token_name)
        .bind(&e.tool)
        .bind(&e.input)
        .bind(&e.output)
        .bind(e.duration_ms)
        .bind(&e.outcome)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

/// Which records to list: newest first, before an id, optionally one principal's or one
/// tool's.
#[derive(Debug, Default)]
pub struct Filter<'a> {
    pub principal: Option<&'a str>,
    pub tool: Option<&'a str>,
    pub before: Option<i64>,
    pub limit: i64,
}

pub async fn list(pool: &SqlitePool, f: &Filter<'_>) -> Result<Vec<Entry>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, at_ms, principal, token_id, token_name, tool, input, output, duration_ms, outcome
         FROM mcp_activity
         WHERE (?1 IS NULL OR principal = ?1) AND (?2 IS NULL OR tool = ?2) AND (?3 IS NULL OR id < ?3)
         ORDER BY id DESC LIMIT ?4",
    )
    .bind(f.principal)
    .bind(f.tool)
    .bind(f.before)
    .bind(f.limit)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .iter()
        .map(|r| Entry {
            id: r.get("id"),
            at_ms: r.get("at_ms"),
            principal: r.get("principal"),
            token_id: r.get("token_id"),
            token_name: r.get("token_name"),
            tool: r.get("tool"),
            input: r.get("input"),
            output: r.get("output"),
            duration_ms: r.get("duration_ms"),
            outcome: r.get("outcome"),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_is_at_most_500_characters() {
        assert_eq!(summary("short"), "short");
        let long = "é".repeat(600);
        let s = summary(&long);
        assert_eq!(s.chars().count(), SUMMARY_CHARS);
        assert!(s.ends_with('…'));
        assert_eq!(summary(&"x".repeat(500)), "x".repeat(500));
    }
}
