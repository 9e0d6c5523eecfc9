//! The approvals in execd's database: each change applied under the state machine
//! ([`super::next_with`]) with a conditional UPDATE, in the same transaction as its audit
//! record and its effect on the linked execution; a new request's quota counted there too.

use super::*;

#[derive(Debug, Clone)]
pub struct NewApproval {
    pub class: Class,
    pub reasons: Vec<Reason>,
    pub purpose: String,
    pub canonical: Canonical,
    pub stdin: Vec<u8>,
    pub requester_role: String,
    pub requester_principal: String,
    pub ttl_ms: i64,
    /// An identical request still pending from the same requester is this one (false when
    /// the requester chose the execution's id: it keeps its own).
    pub merge_identical: bool,
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("no approval {0}")]
    NotFound(String),
    #[error("the approval changed while it was being decided; try again")]
    Raced,
    #[error("the approval's stored request is damaged (it does not hash to its digest)")]
    Damaged,
    #[error(transparent)]
    Quota(#[from] crate::quota::Exceeded),
    #[error("recording the approval")]
    Db(#[from] sqlx::Error),
}

/// Approvals in execd's database, each change committed with its audit record and its
/// effect on the linked execution.
#[derive(Debug, Clone)]
pub struct Store {
    pool: sqlx::SqlitePool,
    audit: std::sync::Arc<argos_store::audit::Audit>,
    /// How many requests one user (or peer role) may have waiting.
    quota: crate::quota::Quota,
    /// Who may decide a request.
    rules: Rules,
}

fn row(r: &sqlx::sqlite::SqliteRow) -> Approval {
    use sqlx::Row as _;
    Approval {
        id: r.get("id"),
        state: State::parse(r.get("state")).unwrap_or(State::Expired),
        class: r
            .get::<String, _>("risk_class")
            .parse()
            .unwrap_or(Class::Destructive),
        reasons: serde_json::from_str(r.get("reasons")).unwrap_or_default(),
        purpose: r.get("purpose"),
        request: r.get("request"),
        digest: r.get("digest"),
        requester_role: r.get("requester_role"),
        requester_principal: r.get("requester_principal"),
        created_at_ms: r.get("created_at_ms"),
        expires_at_ms: r.get("expires_at_ms"),
        decided_by: r.get("decided_by"),
        decided_at_ms: r.get("decided_at_ms"),
        note: r.get("note"),
        execution_id: r.get("execution_id"),
        stdin_head: {
            let stdin: Vec<u8> = r.get("stdin");
            String::from_utf8_lossy(&stdin[..stdin.len().min(STDIN_HEAD)]).into_owned()
        },
        stdin_bytes: r.get::<Vec<u8>, _>("stdin").len() as u64,
    }
}

fn summary(a: &Approval) -> serde_json::Value {
    serde_json::json!({
        "state": a.state.as_str(),
        "risk_class": a.class.as_str(),
        "digest": a.digest,
        "execution_id": a.execution_id,
    })
}

impl Store {
    pub fn new(
        pool: sqlx::SqlitePool,
        audit: std::sync::Arc<argos_store::audit::Audit>,
        quota: crate::quota::Quota,
        rules: Rules,
    ) -> Store {
        Store {
            pool,
            audit,
            quota,
            rules,
        }
    }

    pub async fn get(&self, id: &str) -> sqlx::Result<Option<Approval>> {
        Ok(sqlx::query("SELECT * FROM approvals WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(row))
    }

    /// The approval execution `id` waits for or ran after.
    pub async fn of_execution(&self, id: &str) -> sqlx::Result<Option<Approval>> {
        Ok(
            sqlx::query("SELECT * FROM approvals WHERE execution_id = ?")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?
                .as_ref()
                .map(row),
        )
    }

    /// The stdin an approval's request feeds its command.
    pub async fn stdin(&self, id: &str) -> sqlx::Result<Vec<u8>> {
        sqlx::query_scalar("SELECT stdin FROM approvals WHERE id = ?")
            .bind(id)
            .fetch_one(&self.pool)
            .await
    }

    /// Newest first; `requester_role` limits to one requester role's own.
    pub async fn list(
        &self,
        state: Option<State>,
        requester_role: Option<&str>,
        before_id: Option<&str>,
        limit: u32,
    ) -> sqlx::Result<Vec<Approval>> {
        Ok(sqlx::query(
            "SELECT * FROM approvals WHERE (?1 IS NULL OR state = ?1)
               AND (?2 IS NULL OR instr('+' || requester_role || '+', '+' || ?2 || '+') > 0)
               AND (?3 IS NULL OR id < ?3)
             ORDER BY id DESC LIMIT ?4",
        )
        .bind(state.map(State::as_str))
        .bind(requester_role)
        .bind(before_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(row)
        .collect())
    }

    /// How many approvals the store holds in each state (for monitoring).
    pub async fn counts(&self) -> sqlx::Result<Vec<(String, i64)>> {
        sqlx::query_as::<_, (String, i64)>("SELECT state, COUNT(*) FROM approvals GROUP BY state")
            .fetch_all(&self.pool)
            .await
    }

    /// Records a pending approval and its execution (`pending_approval`), or returns the
    /// identical request's approval still pending from the same requester (`false`).
    pub async fn create(
        &self,
        n: NewApproval,
        execution: &crate::ledger::NewExecution,
        now_ms: i64,
    ) -> Result<(Approval, bool), StoreError> {
        let (request, digest) = n.canonical.text_and_digest();
        let id = uuid::Uuid::now_v7().to_string();
        let mut t = self.audit.begin().await?;
        // An identical pending request is the same approval (and costs no quota).
        let existing = sqlx::query(
            "SELECT * FROM approvals WHERE state = 'pending' AND digest = ?
               AND requester_role = ? AND requester_principal = ? AND own_execution = 0
               AND ?",
        )
        .bind(&digest)
        .bind(&n.requester_role)
        .bind(&n.requester_principal)
        .bind(n.merge_identical)
        .fetch_optional(&mut *t.tx)
        .await?;
        if let Some(existing) = existing {
            return Ok((row(&existing), false));
        }
        let who = crate::manager::Requester {
            role: n.requester_role.clone(),
            principal: n.requester_principal.clone(),
        };
        self.quota.pending(&mut t.tx, &who).await??;
        let inserted = sqlx::query(
            "INSERT INTO approvals (id, state, risk_class, reasons, purpose, request, digest, stdin,
               requester_role, requester_principal, created_at_ms, expires_at_ms, execution_id,
               own_execution)
             VALUES (?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT DO NOTHING",
        )
        .bind(&id)
        .bind(n.class.as_str())
        .bind(serde_json::to_string(&n.reasons).unwrap_or_default())
        .bind(&n.purpose)
        .bind(&request)
        .bind(&digest)
        .bind(&n.stdin)
        .bind(&n.requester_role)
        .bind(&n.requester_principal)
        .bind(now_ms)
        .bind(now_ms + n.ttl_ms)
        .bind(&execution.id)
        .bind(!n.merge_identical)
        .execute(&mut *t.tx)
        .await?
        .rows_affected()
            == 1;
        if !inserted {
            // Not reached: the identical pending request was looked for above, in this
            // transaction, and the audit lock keeps another from committing in between.
            return Err(StoreError::Raced);
        }
        crate::ledger::insert_pending(&mut t.tx, execution).await?;
        let a = row(&sqlx::query("SELECT * FROM approvals WHERE id = ?")
            .bind(&id)
            .fetch_one(&mut *t.tx)
            .await?);
        let actor = crate::ledger::actor(&n.requester_role, &n.requester_principal);
        let mut detail = summary(&a);
        detail["request"] = serde_json::from_str(&request).unwrap_or_default();
        detail["purpose"] = a.purpose.clone().into();
        detail["reasons"] = serde_json::to_value(&a.reasons).unwrap_or_default();
        t.append(&argos_store::audit::Entry::new(
            "approval.requested",
            actor,
            &id,
            detail,
        ))
        .await?;
        t.commit().await?;
        Ok((a, true))
    }

    /// Applies `action` to approval `id` (with its audit record and, when it ends unrun,
    /// the execution's `rejected`); returns the approval as it now is.
    pub async fn apply(
        &self,
        id: &str,
        action: &Action,
        actor: &str,
        note: &str,
        now_ms: i64,
    ) -> Result<Approval, StoreError> {
        let mut t = self.audit.begin().await?;
        let a = sqlx::query("SELECT * FROM approvals WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *t.tx)
            .await?
            .as_ref()
            .map(row)
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        if let Action::Consume { .. } = action {
            // What is about to run is rebuilt from the stored text: it must still hash to
            // the digest the operator approved.
            if a.canonical().map(|c| c.text_and_digest().1).as_deref() != Some(&a.digest) {
                return Err(StoreError::Damaged);
            }
        }
        let to = match next_with(&a, action, now_ms, self.rules) {
            Ok(s) => s,
            Err(refusal) => {
                let mut detail = summary(&a);
                detail["action"] = action.name().into();
                detail["refused"] = refusal.to_string().into();
                t.append(&argos_store::audit::Entry::new(
                    "approval.refused",
                    actor,
                    id,
                    detail,
                ))
                .await?;
                t.commit().await?;
                return Err(refusal.into());
            }
        };
        let decides = !matches!(action, Action::Consume { .. } | Action::Expire);
        let changed = sqlx::query(
            "UPDATE approvals SET state = ?, decided_by = CASE WHEN ? THEN ? ELSE decided_by END,
               decided_at_ms = CASE WHEN ? THEN ? ELSE decided_at_ms END,
               note = CASE WHEN ? THEN ? ELSE note END
             WHERE id = ? AND state = ?",
        )
        .bind(to.as_str())
        .bind(decides)
        .bind(actor)
        .bind(decides)
        .bind(now_ms)
        .bind(decides)
        .bind(note)
        .bind(id)
        .bind(a.state.as_str())
        .execute(&mut *t.tx)
        .await?
        .rows_affected();
        if changed != 1 {
            return Err(StoreError::Raced);
        }
        if matches!(to, State::Denied | State::Revoked | State::Expired) {
            crate::ledger::settle_unstarted(
                &mut t.tx,
                &a.execution_id,
                crate::spec::LaunchStatus::Rejected,
                &format!("its approval was {}", to.as_str()),
                now_ms,
            )
            .await?;
        }
        let kind = match to {
            State::Consumed => "launch.intent",
            _ => "approval.decided",
        };
        let mut detail = summary(&a);
        detail["from"] = a.state.as_str().into();
        detail["state"] = to.as_str().into();
        detail["action"] = action.name().into();
        if let Action::Approve { by, .. } | Action::Deny { by } = action {
            detail["rule"] = self.rules.applied(&a, by).into();
        }
        if !note.is_empty() {
            detail["note"] = note.into();
        }
        if to == State::Consumed {
            // What the launch records in the ledger, held by the trail too (checked by
            // `ledger::tie_to_trail`).
            // (Its directory is chosen as it starts: not yet known here.)
            let row: Option<(String, String)> =
                sqlx::query_as("SELECT argv, profile FROM executions WHERE id = ?")
                    .bind(&a.execution_id)
                    .fetch_optional(&mut *t.tx)
                    .await?;
            if let Some((argv, profile)) = row {
                detail["argv"] = serde_json::from_str(&argv).unwrap_or_default();
                detail["profile"] = profile.into();
            }
        }
        t.append(&argos_store::audit::Entry::new(kind, actor, id, detail))
            .await?;
        t.commit().await?;
        Ok(Approval { state: to, ..a })
    }

    /// Ids of approvals still open past their expiry.
    pub async fn overdue(&self, now_ms: i64) -> sqlx::Result<Vec<String>> {
        sqlx::query_scalar(
            "SELECT id FROM approvals WHERE state IN ('pending', 'approved') AND expires_at_ms <= ?",
        )
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await
    }

    /// Approvals approved but not yet run (execd stopped in between).
    pub async fn approved(&self) -> sqlx::Result<Vec<String>> {
        sqlx::query_scalar("SELECT id FROM approvals WHERE state = 'approved' ORDER BY id")
            .fetch_all(&self.pool)
            .await
    }

    /// Executions whose approval was consumed but which never started (execd stopped
    /// between the two): nothing ran.
    pub async fn consumed_unstarted(&self) -> sqlx::Result<Vec<String>> {
        sqlx::query_scalar(
            "SELECT a.execution_id FROM approvals a JOIN executions e ON e.id = a.execution_id
             WHERE a.state = 'consumed' AND e.status = 'pending_approval'",
        )
        .fetch_all(&self.pool)
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_store_keeps_approval_audit_and_execution_in_step() {
        use crate::ledger::{Ledger, NewExecution};
        use crate::spec::{Identity, LaunchStatus};
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("execd.db")).await.unwrap();
        let audit = std::sync::Arc::new(
            argos_store::audit::Audit::open(
                ledger.pool().clone(),
                crate::ledger::test_key(),
                "execd",
            )
            .await
            .unwrap(),
        );
        let store = Store::new(
            ledger.pool().clone(),
            audit.clone(),
            crate::quota::Quota::default(),
            Rules::default(),
        );
        let canonical = |command: &str| Canonical {
            target: "host".into(),
            place: String::new(),
            command: command.into(),
            argv: Vec::new(),
            cwd: String::new(),
            profile: "agent".into(),
            env: BTreeMap::new(),
            timeout_ms: None,
            run_as: "launch".into(),
            stdin_sha256: argos_store::audit::sha256_hex(b""),
        };
        let ask = |command: &str| NewApproval {
            class: Class::Destructive,
            reasons: Vec::new(),
            purpose: "clean up".into(),
            canonical: canonical(command),
            stdin: Vec::new(),
            requester_role: "mcp".into(),
            requester_principal: String::new(),
            ttl_ms: 1000,
            merge_identical: true,
        };
        let execution = || NewExecution {
            id: uuid::Uuid::now_v7().to_string(),
            requested_by_role: "mcp".into(),
            principal: String::new(),
            argv: vec!["/bin/sh".into(), "-c".into(), "rm -rf /srv/x".into()],
            cwd: String::new(),
            profile: "agent".into(),
            created_at_ms: 0,
            shim: Identity {
                pid: 1,
                start_time: 1,
                boot_id: "b".into(),
            },
            init: Identity {
                pid: 1,
                start_time: 1,
                boot_id: "b".into(),
            },
            tty: false,
            timeout_ms: 0,
            client_ref: String::new(),
        };

        // Asking twice gives the same pending approval; its execution waits.
        let (a, created) = store
            .create(ask("rm -rf /srv/x"), &execution(), 0)
            .await
            .unwrap();
        assert!(created);
        let (again, created) = store
            .create(ask("rm -rf /srv/x"), &execution(), 1)
            .await
            .unwrap();
        assert_eq!((again.id.as_str(), created), (a.id.as_str(), false));
        let e = ledger.get(&a.execution_id).await.unwrap().unwrap();
        assert_eq!(e.status, LaunchStatus::PendingApproval);

        // Refusals change nothing but are audited.
        let approve = |confirm: &str| Action::Approve {
            by: "admin".into(),
            confirm: confirm.into(),
        };
        let own = Action::Approve {
            by: "mcp".into(),
            confirm: a.short_id().into(),
        };
        assert!(matches!(
            store.apply(&a.id, &own, "gateway:mcp", "", 2).await,
            Err(StoreError::Refused(Refusal::SelfDecision))
        ));
        assert!(matches!(
            store
                .apply(&a.id, &approve(""), "gateway:admin", "", 2)
                .await,
            Err(StoreError::Refused(Refusal::ConfirmationRequired))
        ));
        let consume = |d: &str| Action::Consume { digest: d.into() };
        assert!(matches!(
            store
                .apply(&a.id, &consume(&a.digest), "execd", "", 2)
                .await,
            Err(StoreError::Refused(Refusal::NotApproved))
        ));

        // Approved with the short id; run once, with the approved digest only.
        let ok = store
            .apply(&a.id, &approve(a.short_id()), "gateway:admin", "ok", 3)
            .await
            .unwrap();
        assert_eq!(ok.state, State::Approved);
        assert!(matches!(
            store.apply(&a.id, &consume("0"), "execd", "", 4).await,
            Err(StoreError::Refused(Refusal::DigestMismatch))
        ));
        assert_eq!(
            store
                .apply(&a.id, &consume(&a.digest), "execd", "", 4)
                .await
                .unwrap()
                .state,
            State::Consumed
        );
        assert!(matches!(
            store
                .apply(&a.id, &consume(&a.digest), "execd", "", 5)
                .await,
            Err(StoreError::Refused(Refusal::Final("consumed", _)))
        ));
        assert_eq!(
            store.consumed_unstarted().await.unwrap(),
            std::slice::from_ref(&a.execution_id)
        );

        // A new request once the first is no longer pending; denial rejects its execution.
        let (b, created) = store
            .create(ask("rm -rf /srv/x"), &execution(), 6)
            .await
            .unwrap();
        assert!(created && b.id != a.id);
        let deny = Action::Deny { by: "admin".into() };
        assert_eq!(
            store
                .apply(&b.id, &deny, "gateway:admin", "no", 7)
                .await
                .unwrap()
                .state,
            State::Denied
        );
        let e = ledger.get(&b.execution_id).await.unwrap().unwrap();
        assert_eq!(
            (e.status, e.error.as_str()),
            (LaunchStatus::Rejected, "its approval was denied")
        );

        // The sweep expires what waited too long.
        let (c, _) = store
            .create(ask("rm -rf /srv/y"), &execution(), 10)
            .await
            .unwrap();
        assert!(store.overdue(1009).await.unwrap().is_empty());
        assert_eq!(
            store.overdue(1010).await.unwrap(),
            std::slice::from_ref(&c.id)
        );
        assert_eq!(
            store
                .apply(&c.id, &Action::Expire, "execd", "", 1010)
                .await
                .unwrap()
                .state,
            State::Expired
        );
        assert_eq!(
            ledger.get(&c.execution_id).await.unwrap().unwrap().status,
            LaunchStatus::Rejected
        );

        // A stored request edited after approval no longer hashes to its digest.
        let (d, _) = store
            .create(ask("ls /srv"), &execution(), 20)
            .await
            .unwrap();
        store
            .apply(&d.id, &approve(d.short_id()), "gateway:admin", "", 21)
            .await
            .unwrap();
        sqlx::query(
            "UPDATE approvals SET request = replace(request, 'ls /srv', 'rm -rf /') WHERE id = ?",
        )
        .bind(&d.id)
        .execute(ledger.pool())
        .await
        .unwrap();
        assert!(matches!(
            store
                .apply(&d.id, &consume(&d.digest), "execd", "", 22)
                .await,
            Err(StoreError::Damaged)
        ));

        // Every step is in the chain, and the chain holds.
        let v = audit.verify(None).await.unwrap();
        assert_eq!(v.broken, None);
        let kinds: Vec<String> = audit
            .list(&argos_store::audit::Filter {
                subject: Some(a.id.clone()),
                limit: 50,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_iter()
            .rev()
            .map(|r| r.kind)
            .collect();
        assert_eq!(
            kinds,
            [
                "approval.requested",
                "approval.refused",
                "approval.refused",
                "approval.refused",
                "approval.decided",
                "approval.refused",
                "launch.intent",
                "approval.refused"
            ]
        );
    }
}
