//! Approvals: what an operator must decide before an agent's or a task's command runs.
//!
//! An approval is bound to the SHA-256 of the canonical request (target host, command or
//! argv, cwd, profile, env, timeout, identity it runs as, stdin's hash): what runs is
//! rebuilt from that canonical text, and its digest is recomputed just before it runs.
//!
//! States: `pending` → `approved` → `consumed` (it ran, once); `pending` → `denied`;
//! `pending`/`approved` → `revoked` or `expired`. `denied`, `revoked`, `expired` and
//! `consumed` are final: nothing leads back to `approved`. `next` is the whole state
//! machine, pure; the store applies it under a conditional UPDATE, in the same
//! transaction as the audit record of the change.

use std::collections::BTreeMap;

use argos_risk::{Class, Reason};
use serde::{Deserialize, Serialize};

/// Default time an approval may wait: one hour.
pub const DEFAULT_TTL_MS: i64 = 60 * 60 * 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Pending,
    Approved,
    Denied,
    Revoked,
    Expired,
    Consumed,
}

impl State {
    pub const ALL: [State; 6] = [
        State::Pending,
        State::Approved,
        State::Denied,
        State::Revoked,
        State::Expired,
        State::Consumed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Approved => "approved",
            State::Denied => "denied",
            State::Revoked => "revoked",
            State::Expired => "expired",
            State::Consumed => "consumed",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|x| x.as_str() == s)
    }

    pub fn is_final(self) -> bool {
        !matches!(self, State::Pending | State::Approved)
    }
}

/// The request an approval is bound to, in the form that is hashed and later run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Canonical {
    /// The host it runs on.
    pub target: String,
    /// Where on it (`inspect`, `host`; empty: the sandbox, as before places existed, so
    /// older approvals keep their digests).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub place: String,
    /// A shell command, or empty when `argv` is given.
    pub command: String,
    pub argv: Vec<String>,
    pub cwd: String,
    pub profile: String,
    pub env: BTreeMap<String, String>,
    pub timeout_ms: Option<u64>,
    /// Whom the profile runs it as (`root`, `launch`, `uid:gid`).
    pub run_as: String,
    /// SHA-256 (hex) of the bytes fed to its standard input.
    pub stdin_sha256: String,
}

impl Canonical {
    /// The canonical JSON text (keys sorted) and its SHA-256.
    pub fn text_and_digest(&self) -> (String, String) {
        let text = argos_store::audit::canonical(
            &serde_json::to_value(self).unwrap_or(serde_json::Value::Null),
        );
        let digest = argos_store::audit::sha256_hex(text.as_bytes());
        (text, digest)
    }
}

/// One approval, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub id: String,
    pub state: State,
    pub class: Class,
    pub reasons: Vec<Reason>,
    pub purpose: String,
    /// The canonical request's JSON text, and its digest.
    pub request: String,
    pub digest: String,
    pub requester_role: String,
    pub requester_principal: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub decided_by: String,
    pub decided_at_ms: Option<i64>,
    pub note: String,
    pub execution_id: String,
    /// The standard input the request runs with: its first `STDIN_HEAD` bytes as text
    /// (what the approver reads), and its length.
    pub stdin_head: String,
    pub stdin_bytes: u64,
}

/// How much of a request's standard input an approval shows.
pub const STDIN_HEAD: usize = 4096;

impl Approval {
    /// What a destructive approval's confirmation must type: the id's last 8 hex digits.
    pub fn short_id(&self) -> &str {
        &self.id[self.id.len().saturating_sub(8)..]
    }

    pub fn needs_confirmation(&self) -> bool {
        self.class == Class::Destructive
    }

    /// The requester, as compared with a decider.
    pub fn requester(&self) -> &str {
        if self.requester_principal.is_empty() {
            &self.requester_role
        } else {
            &self.requester_principal
        }
    }

    pub fn canonical(&self) -> Option<Canonical> {
        serde_json::from_str(&self.request).ok()
    }
}

/// Something that can happen to an approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Approve {
        by: String,
        confirm: String,
    },
    Deny {
        by: String,
    },
    Revoke {
        by: String,
    },
    /// The sweep, past its expiry.
    Expire,
    /// Running it: `digest` is that of what is about to run.
    Consume {
        digest: String,
    },
}

impl Action {
    pub fn name(&self) -> &'static str {
        match self {
            Action::Approve { .. } => "approve",
            Action::Deny { .. } => "deny",
            Action::Revoke { .. } => "revoke",
            Action::Expire => "expire",
            Action::Consume { .. } => "consume",
        }
    }
}

/// Why an action was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the approval is {0}: it cannot be {1}")]
    Final(&'static str, &'static str),
    #[error("the approval is pending: it has not been approved")]
    NotApproved,
    #[error("a requester cannot decide their own request")]
    SelfDecision,
    #[error("a destructive command needs `confirm` set to the approval's short id")]
    ConfirmationRequired,
    #[error("`confirm` does not match the approval's short id")]
    WrongConfirmation,
    #[error("the approval expired")]
    Expired,
    #[error("the approval is not past its expiry")]
    NotExpired,
    #[error("what is about to run does not match what was approved (digest mismatch)")]
    DigestMismatch,
}

fn past(state: State, action: &Action) -> Refusal {
    let verb = match action {
        Action::Approve { .. } => "approved",
        Action::Deny { .. } => "denied",
        Action::Revoke { .. } => "revoked",
        Action::Expire => "expired",
        Action::Consume { .. } => "run again",
    };
    Refusal::Final(state.as_str(), verb)
}

/// Who may decide a request, beyond the state machine's own rules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rules {
    /// The user a request was made for (the owner of the agent's token) may approve or
    /// deny it — from a session or an approve-scoped token, which the gateway enforces —
    /// unless `approvals.require_other_admin` says another admin must.
    pub owner_may_decide: bool,
}

impl Rules {
    /// Which rule let `by` decide `a`, for the audit trail.
    pub fn applied(&self, a: &Approval, by: &str) -> &'static str {
        if by == a.requester_principal {
            "the owner decided their agent's request (approvals.require_other_admin is off)"
        } else if self.owner_may_decide {
            "another admin decided (the owner could have)"
        } else {
            "another admin decided (approvals.require_other_admin)"
        }
    }
}

/// The state `action` leads `a` to at `now_ms`, or why it may not happen (strict: no
/// one decides their own request).
pub fn next(a: &Approval, action: &Action, now_ms: i64) -> Result<State, Refusal> {
    next_with(a, action, now_ms, Rules::default())
}

/// [`next`] under `rules`.
pub fn next_with(
    a: &Approval,
    action: &Action,
    now_ms: i64,
    rules: Rules,
) -> Result<State, Refusal> {
    let own =
        |by: &str| (by == a.requester() || by == a.requester_principal) && !rules.owner_may_decide;
    let expired = now_ms >= a.expires_at_ms;
    match (a.state, action) {
        (s, _) if s.is_final() => Err(past(s, action)),
        (_, Action::Expire) if expired => Ok(State::Expired),
        (_, Action::Expire) => Err(Refusal::NotExpired),
        (_, _) if expired => Err(Refusal::Expired),
        (State::Pending, Action::Approve { by, confirm }) => {
            if own(by) {
                Err(Refusal::SelfDecision)
            } else if a.needs_confirmation() && confirm.is_empty() {
                Err(Refusal::ConfirmationRequired)
            } else if a.needs_confirmation() && confirm != a.short_id() {
                Err(Refusal::WrongConfirmation)
            } else {
                Ok(State::Approved)
            }
        }
        (State::Pending, Action::Deny { by }) => {
            if own(by) {
                Err(Refusal::SelfDecision)
            } else {
                Ok(State::Denied)
            }
        }
        (State::Pending | State::Approved, Action::Revoke { .. }) => Ok(State::Revoked),
        (State::Approved, Action::Consume { digest }) if *digest == a.digest => Ok(State::Consumed),
        (State::Approved, Action::Consume { .. }) => Err(Refusal::DigestMismatch),
        (State::Pending, Action::Consume { .. }) => Err(Refusal::NotApproved),
        (State::Approved, Action::Approve { .. } | Action::Deny { .. }) => {
            Err(Refusal::Final("approved", "decided again"))
        }
        (s, _) => Err(past(s, action)),
    }
}

/// A new approval's contents (the store adds its id, times and state).
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
               AND requester_role = ? AND requester_principal = ?",
        )
        .bind(&digest)
        .bind(&n.requester_role)
        .bind(&n.requester_principal)
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
               requester_role, requester_principal, created_at_ms, expires_at_ms, execution_id)
             VALUES (?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
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
    use proptest::prelude::*;

    fn approval(class: Class) -> Approval {
        Approval {
            id: "0190f0c2-7a3b-7c3d-8e4f-a1b2c3d4e5f6".into(),
            state: State::Pending,
            class,
            reasons: Vec::new(),
            purpose: String::new(),
            request: "{}".into(),
            digest: "d1".into(),
            requester_role: "mcp".into(),
            requester_principal: "agent-7".into(),
            created_at_ms: 0,
            expires_at_ms: 1000,
            decided_by: String::new(),
            decided_at_ms: None,
            note: String::new(),
            execution_id: String::new(),
            stdin_head: String::new(),
            stdin_bytes: 0,
        }
    }

    /// The place is part of what an approval is bound to; a request from before places
    /// existed keeps its digest.
    #[test]
    fn the_place_is_part_of_the_digest() {
        let c = Canonical {
            target: "h".into(),
            place: String::new(),
            command: "id".into(),
            argv: Vec::new(),
            cwd: String::new(),
            profile: "agent".into(),
            env: BTreeMap::new(),
            timeout_ms: None,
            run_as: "launch".into(),
            stdin_sha256: String::new(),
        };
        let (text, sandbox) = c.text_and_digest();
        assert!(!text.contains("place"), "{text}");
        let host = Canonical {
            place: "host".into(),
            profile: "operator".into(),
            run_as: "root".into(),
            ..c.clone()
        };
        let (text, on_host) = host.text_and_digest();
        assert!(text.contains(r#""place":"host""#), "{text}");
        assert_ne!(sandbox, on_host);
        let inspect = Canonical {
            place: "inspect".into(),
            ..c
        };
        assert_ne!(inspect.text_and_digest().1, sandbox);
    }

    fn approve(by: &str, confirm: &str) -> Action {
        Action::Approve {
            by: by.into(),
            confirm: confirm.into(),
        }
    }

    fn action() -> impl Strategy<Value = (Action, i64)> {
        let who = prop::sample::select(vec!["admin", "agent-7", "mcp"]);
        let a = prop_oneof![
            (
                who.clone(),
                prop::sample::select(vec!["", "d4e5f6", "c3d4e5f6"])
            )
                .prop_map(|(b, c)| approve(b, c)),
            who.clone().prop_map(|b| Action::Deny { by: b.into() }),
            who.prop_map(|b| Action::Revoke { by: b.into() }),
            Just(Action::Expire),
            prop::sample::select(vec!["d1", "d2"])
                .prop_map(|d| Action::Consume { digest: d.into() }),
        ];
        (a, 0i64..2000)
    }

    #[test]
    fn the_happy_path_and_its_guards() {
        let mut a = approval(Class::Destructive);
        assert_eq!(
            next(&a, &approve("agent-7", ""), 1),
            Err(Refusal::SelfDecision)
        );
        assert_eq!(
            next(&a, &approve("admin", ""), 1),
            Err(Refusal::ConfirmationRequired)
        );
        assert_eq!(
            next(&a, &approve("admin", "deadbeef"), 1),
            Err(Refusal::WrongConfirmation)
        );
        assert_eq!(a.short_id(), "c3d4e5f6");
        assert_eq!(
            next(&a, &approve("admin", "c3d4e5f6"), 1),
            Ok(State::Approved)
        );
        assert_eq!(
            next(&a, &approve("admin", "c3d4e5f6"), 1000),
            Err(Refusal::Expired)
        );
        a.state = State::Approved;
        let bad = Action::Consume {
            digest: "d2".into(),
        };
        assert_eq!(next(&a, &bad, 2), Err(Refusal::DigestMismatch));
        let good = Action::Consume {
            digest: "d1".into(),
        };
        assert_eq!(next(&a, &good, 2), Ok(State::Consumed));
        a.state = State::Consumed;
        assert!(matches!(
            next(&a, &good, 3),
            Err(Refusal::Final("consumed", _))
        ));
        // Not destructive: no confirmation needed.
        let b = approval(Class::ConfigMutation);
        assert_eq!(next(&b, &approve("admin", ""), 1), Ok(State::Approved));
        assert_eq!(next(&b, &Action::Expire, 999), Err(Refusal::NotExpired));
        assert_eq!(next(&b, &Action::Expire, 1000), Ok(State::Expired));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

        /// Over any sequence of actions: nothing leaves a final state, `approved` is
        /// reached only from `pending` by someone other than the requester (with the
        /// confirmation when destructive), and it runs at most once, with the approved
        /// digest, before its expiry.
        #[test]
        fn no_path_leads_back(
            destructive in any::<bool>(),
            actions in prop::collection::vec(action(), 1..12),
        ) {
            let mut a = approval(if destructive { Class::Destructive } else { Class::ConfigMutation });
            let mut consumed = 0;
            for (act, now) in actions {
                let before = a.state;
                if let Ok(s) = next(&a, &act, now) {
                    prop_assert!(!before.is_final(), "{before:?} -> {s:?}");
                    if s == State::Approved {
                        prop_assert_eq!(before, State::Pending);
                        let Action::Approve { by, confirm } = &act else {
                            return Err(TestCaseError::fail("approved by another action"));
                        };
                        prop_assert!(by != "agent-7");
                        prop_assert!(!destructive || confirm == a.short_id());
                        prop_assert!(now < a.expires_at_ms);
                    }
                    if s == State::Consumed {
                        prop_assert_eq!(before, State::Approved);
                        prop_assert_eq!(&act, &Action::Consume { digest: "d1".into() });
                        prop_assert!(now < a.expires_at_ms);
                        consumed += 1;
                    }
                    if s == State::Expired {
                        prop_assert!(now >= a.expires_at_ms);
                    }
                    a.state = s;
                }
                prop_assert!(consumed <= 1);
            }
        }
    }

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
