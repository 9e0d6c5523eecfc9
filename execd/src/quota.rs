//! How much one user may hold at once: running launches, open terminals, requests waiting
//! for an approval (`[quota]` in the config). A user is counted per peer role that acts
//! for them (what jobd asserts for `alice` never uses up what the gateway may start for
//! her), a caller without a principal by its role alone; and mcpd and jobd, which name the
//! principals they act for, are also held to a total over all of them (a compromised one
//! cannot rotate names past the limit). Operators are not counted. Each check runs inside
//! the audit transaction that records the new launch or approval: those transactions run
//! one at a time, so requests side by side cannot overshoot the limit.

use crate::manager::Requester;

/// The limits (0: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    pub launches: u64,
    pub terminals: u64,
    pub pending_approvals: u64,
    /// Totals for mcpd and jobd over every principal they act for.
    pub daemon_launches: u64,
    pub daemon_pending_approvals: u64,
}

/// A limit reached, said in the caller's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quota: {0}")]
pub struct Exceeded(pub String);

/// Whose share a request counts against, in words; None for an operator.
fn whose(who: &Requester) -> Option<String> {
    let roles = || who.role.split('+');
    if !who.principal.is_empty() {
        Some(if roles().any(|r| r == "gateway") {
            format!("user {}", who.principal)
        } else {
            format!("user {} (through {})", who.principal, who.role)
        })
    } else if roles().any(|r| r == "operator") {
        None
    } else {
        Some(format!("peer role {}", who.role))
    }
}

/// Whether the caller is mcpd or jobd: held to a total over the principals it names.
fn is_daemon(who: &Requester) -> bool {
    who.role.split('+').any(|r| r == "job" || r == "mcp")
}

fn over(n: i64, limit: u64) -> bool {
    limit > 0 && n as u64 >= limit
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
             WHERE status = 'running' AND principal = ? AND requested_by_role = ?",
        )
        .bind(&who.principal)
        .bind(&who.role)
        .fetch_one(&mut *tx)
        .await?;
        if is_daemon(who) && self.daemon_launches > 0 {
            let (all,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM executions WHERE status = 'running' AND requested_by_role = ?",
            )
            .bind(&who.role)
            .fetch_one(&mut *tx)
            .await?;
            if over(all, self.daemon_launches) {
                return Ok(Err(Exceeded(format!(
                    "peer role {} has {all} launches running for all its users, the most allowed (quota.daemon_launches = {}); wait for one to end",
                    who.role, self.daemon_launches
                ))));
            }
        }
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
        if is_daemon(who) && self.daemon_pending_approvals > 0 {
            let (all,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM approvals WHERE state = 'pending' AND requester_role = ?",
            )
            .bind(&who.role)
            .fetch_one(&mut *tx)
            .await?;
            if over(all, self.daemon_pending_approvals) {
                return Ok(Err(Exceeded(format!(
                    "peer role {} has {all} requests waiting for an approval for all its users, the most allowed (quota.daemon_pending_approvals = {}); wait for a decision",
                    who.role, self.daemon_pending_approvals
                ))));
            }
        }
        let (pending,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM approvals WHERE state = 'pending'
             AND requester_principal = ? AND requester_role = ?",
        )
        .bind(&who.principal)
        .bind(&who.role)
        .fetch_one(&mut *tx)
        .await?;
        Ok(if over(pending, self.pending_approvals) {
            Err(Exceeded(format!(
                "{whose} has {pending} requests waiting for an approval, the most allowed (quota.pending_approvals = {}); wait for a decision",
                self.pending_approvals
            )))
        } else {
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{Ledger, NewExecution, insert_running};
    use crate::spec::Identity;

    fn who(role: &str, principal: &str) -> Requester {
        Requester {
            role: role.into(),
            principal: principal.into(),
        }
    }

    async fn running(l: &Ledger, n: usize, role: &str, principal: impl Fn(usize) -> String) {
        let mut c = l.pool().acquire().await.unwrap();
        for i in 0..n {
            let id = format!("{role}-{i}-{}", principal(i));
            let none = Identity {
                pid: 1,
                start_time: 1,
                boot_id: "b".into(),
            };
            insert_running(
                &mut c,
                &NewExecution {
                    id,
                    requested_by_role: role.into(),
                    principal: principal(i),
                    argv: vec!["sleep".into()],
                    cwd: "/w".into(),
                    profile: "agent".into(),
                    created_at_ms: 1,
                    shim: none.clone(),
                    init: none,
                    tty: false,
                    timeout_ms: 0,
                    client_ref: String::new(),
                },
            )
            .await
            .unwrap();
        }
    }

    /// A compromised jobd naming `admin` uses up only what jobd may start for admin, not
    /// the admin's own share through the gateway; rotating names hits jobd's total.
    #[tokio::test]
    async fn a_daemon_cannot_spend_a_users_share_or_rotate_names_past_its_total() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(&dir.path().join("execd.db")).await.unwrap();
        let q = Quota {
            launches: 3,
            terminals: 1,
            pending_approvals: 3,
            daemon_launches: 5,
            daemon_pending_approvals: 5,
        };
        let mut c = l.pool().acquire().await.unwrap();
        running(&l, 3, "job", |_| "admin".into()).await;
        let e = q.launch(&mut c, &who("job", "admin"), false).await.unwrap();
        assert!(
            e.unwrap_err()
                .0
                .contains("user admin (through job) has 3 launches"),
            "jobd's own share for admin is spent"
        );
        assert_eq!(
            q.launch(&mut c, &who("gateway", "admin"), false)
                .await
                .unwrap(),
            Ok(()),
            "the admin's share through the gateway is untouched"
        );
        running(&l, 2, "job", |i| format!("user{i}")).await;
        let e = q
            .launch(&mut c, &who("job", "someone-new"), false)
            .await
            .unwrap();
        assert!(
            e.unwrap_err().0.contains("quota.daemon_launches = 5"),
            "a new name does not get past jobd's total"
        );
        // Operators are not counted; the gateway is not held to a daemon total.
        assert_eq!(
            q.launch(&mut c, &who("operator", ""), false).await.unwrap(),
            Ok(())
        );
        running(&l, 3, "gateway", |i| format!("g{i}")).await;
        assert_eq!(
            q.launch(&mut c, &who("gateway", "g-new"), false)
                .await
                .unwrap(),
            Ok(())
        );
    }
}
