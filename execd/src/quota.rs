//! How much one user may hold at once: running launches, open terminals, requests waiting
//! for an approval (`[quota]` in the config). A caller without a principal (mcpd, jobd
//! with no owner) is counted by its peer role; operators are not counted. Each check runs
//! inside the audit transaction that records the new launch or approval: those
//! transactions run one at a time, so requests side by side cannot overshoot the limit.

use crate::manager::Requester;

/// The limits (0: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    pub launches: u64,
    pub terminals: u64,
    pub pending_approvals: u64,
}

/// A limit reached, said in the caller's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quota: {0}")]
pub struct Exceeded(pub String);

/// Whose share a request counts against, in words; None for an operator.
fn whose(who: &Requester) -> Option<String> {
    if !who.principal.is_empty() {
        Some(format!("user {}", who.principal))
    } else if who.role.split('+').any(|r| r == "operator") {
        None
    } else {
        Some(format!("peer role {}", who.role))
    }
}

impl Quota {
    /// Whether `who` may start one more launch (a terminal when `tty`).
    pub async fn launch(
        &self,
        tx: &mut sqlx::SqliteConnection,
        who: &Requester,
        tty: bool,
    ) -> Result<Result<(), Exceeded>, sqlx::Error> {
        let Some(whose) = whose(who) else {
            return Ok(Ok(()));
        };
        let (running, terminals): (i64, i64) = sqlx::query_as(
            "SELECT COUNT(*), COALESCE(SUM(tty), 0) FROM executions
             WHERE status = 'running' AND principal = ?1 AND (?1 != '' OR requested_by_role = ?2)",
        )
        .bind(&who.principal)
        .bind(&who.role)
        .fetch_one(&mut *tx)
        .await?;
        let over = |n: i64, limit: u64| limit > 0 && n as u64 >= limit;
        Ok(if over(running, self.launches) {
            Err(Exceeded(format!(
                "{whose} has {running} launches running, the most allowed (quota.launches = {}); wait for one to end",
                self.launches
            )))
        } else if tty && over(terminals, self.terminals) {
            Err(Exceeded(format!(
                "{whose} has {terminals} terminals open, the most allowed (quota.terminals = {}); close one first",
                self.terminals
            )))
        } else {
            Ok(())
        })
    }

    /// Whether `who` may have one more request waiting for an approval.
    pub async fn pending(
        &self,
        tx: &mut sqlx::SqliteConnection,
        who: &Requester,
    ) -> Result<Result<(), Exceeded>, sqlx::Error> {
        let Some(whose) = whose(who) else {
            return Ok(Ok(()));
        };
        if self.pending_approvals == 0 {
            return Ok(Ok(()));
        }
        let (pending,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM approvals WHERE state = 'pending'
             AND requester_principal = ?1 AND (?1 != '' OR requester_role = ?2)",
        )
        .bind(&who.principal)
        .bind(&who.role)
        .fetch_one(&mut *tx)
        .await?;
        Ok(if pending as u64 >= self.pending_approvals {
            Err(Exceeded(format!(
                "{whose} has {pending} requests waiting for an approval, the most allowed (quota.pending_approvals = {}); wait for a decision",
                self.pending_approvals
            )))
        } else {
            Ok(())
        })
    }
}
