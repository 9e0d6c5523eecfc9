//! execd's messages as the HTTP API shows them: enums as lowercase words, bytes as text.

use argos_proto::exec::v1 as pb;
use serde_json::{Value, json};

pub fn status_word(s: i32) -> &'static str {
    match pb::ExecutionStatus::try_from(s).unwrap_or(pb::ExecutionStatus::Unspecified) {
        pb::ExecutionStatus::Unspecified => "unspecified",
        pb::ExecutionStatus::Running => "running",
        pb::ExecutionStatus::Succeeded => "succeeded",
        pb::ExecutionStatus::Failed => "failed",
        pb::ExecutionStatus::TimedOut => "timed_out",
        pb::ExecutionStatus::Killed => "killed",
        pb::ExecutionStatus::ContainmentUnavailable => "containment_unavailable",
        pb::ExecutionStatus::TeardownFailed => "teardown_failed",
        pb::ExecutionStatus::Lost => "lost",
        pb::ExecutionStatus::PendingApproval => "pending_approval",
        pb::ExecutionStatus::Rejected => "rejected",
    }
}

/// The proto value of a status word (for filters).
pub fn parse_status(word: &str) -> Option<i32> {
    (1..=10).find(|s| status_word(*s) == word)
}

fn dim_state(s: i32) -> &'static str {
    match pb::DimensionState::try_from(s).unwrap_or(pb::DimensionState::Unspecified) {
        pb::DimensionState::Enforced => "enforced",
        pb::DimensionState::Unavailable => "unavailable",
        pb::DimensionState::NotRequested => "not_requested",
        pb::DimensionState::Unspecified => "unspecified",
    }
}

pub fn execution(e: &pb::Execution) -> Value {
    json!({
        "id": e.id,
        "status": status_word(e.status),
        "exit_code": e.exit_code,
        "signal": e.signal,
        "started_at_ms": e.started_at_unix_ms,
        "ended_at_ms": e.ended_at_unix_ms,
        "duration_ms": e.duration_ms,
        "profile": e.profile,
        "argv": e.argv,
        "cwd": e.cwd,
        "containment": e.containment.iter().map(|d| json!({
            "dimension": d.name, "state": dim_state(d.state), "detail": d.detail,
        })).collect::<Vec<_>>(),
        "teardown_complete": e.teardown_complete,
        "survivors": e.survivors,
        "error": e.error,
        "requested_by_role": e.requested_by_role,
        "principal": e.principal,
    })
}

pub fn approval(a: &pb::Approval) -> Value {
    json!({
        "id": a.id,
        "short_id": a.short_id,
        "state": a.state,
        "risk_class": a.risk_class,
        "reasons": a.reasons.iter().map(|r| json!({"risk_class": r.risk_class, "why": r.why})).collect::<Vec<_>>(),
        "needs_confirmation": a.needs_confirmation,
        "purpose": a.purpose,
        "target": a.target,
        "command": a.command,
        "argv": a.argv,
        "cwd": a.cwd,
        "profile": a.profile,
        "env": a.env,
        "timeout_ms": a.timeout_ms,
        "digest": a.digest,
        "requester_role": a.requester_role,
        "requester_principal": a.requester_principal,
        "created_at_ms": a.created_at_unix_ms,
        "expires_at_ms": a.expires_at_unix_ms,
        "decided_by": a.decided_by,
        "decided_at_ms": a.decided_at_unix_ms,
        "note": a.note,
        "execution_id": a.execution_id,
    })
}
