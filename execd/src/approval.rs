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

mod store;
pub use store::{NewApproval, Store, StoreError};

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
            profile: "host".into(),
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
}
