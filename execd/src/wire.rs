//! The proto edge: conversions between `argos.exec.v1` messages and domain types —
//! requests, records, approvals, the enums. The handlers (`service.rs`) and the two
//! stream relays (`output.rs`, `terminal.rs`) build their stream events from generated
//! types directly; nothing below them (the manager, the gate, the shim) sees one.

use argos_proto::exec::v1 as pb;

use argos_risk::Class;

use crate::approval::State;
use crate::edge;
use crate::launch::{Captured, Finished, KillOutcome, LaunchRequest};
use crate::ledger::Record;
use crate::spec::{DimReport, DimState, LaunchStatus};
use crate::sys::proc::Verdict;

pub fn launch_request(r: pb::RunRequest) -> LaunchRequest {
    LaunchRequest {
        argv: r.argv,
        command: r.command,
        cwd: r.cwd,
        env: r.env.into_iter().collect(),
        profile: r.profile,
        timeout_ms: r.timeout_ms,
        stdin: r.stdin,
        tty: r.tty.map(|t| (t.rows, t.cols, t.term)),
        open_stdin: r.open_stdin,
        executables: r.executables,
        // Only StartMcpServer, from an admin's registration, sets it.
        registered_env: false,
        client_ref: r.client_ref,
        end_unfollowed_ms: r.end_unfollowed_ms,
    }
}

pub fn mcp_launch(l: Option<pb::McpLaunch>) -> crate::mcp::McpLaunch {
    let l = l.unwrap_or_default();
    crate::mcp::McpLaunch {
        command: l.command,
        args: l.args,
        env_keys: l.env_keys,
        cwd: l.cwd,
        network: l.network,
    }
}

pub fn mcp_registration(r: &crate::mcp::Registration) -> pb::McpRegistration {
    pb::McpRegistration {
        server_id: r.server_id.clone(),
        launch: Some(pb::McpLaunch {
            command: r.launch.command.clone(),
            args: r.launch.args.clone(),
            env_keys: r.launch.env_keys.clone(),
            cwd: r.launch.cwd.clone(),
            network: r.launch.network,
        }),
        digest: r.digest.clone(),
        registered_by: r.registered_by.clone(),
        registered_at_unix_ms: r.registered_at_ms,
    }
}

pub fn dim_state(s: DimState) -> pb::DimensionState {
    match s {
        DimState::Enforced => pb::DimensionState::Enforced,
        DimState::Unavailable => pb::DimensionState::Unavailable,
        DimState::NotRequested => pb::DimensionState::NotRequested,
    }
}

pub fn dimension(d: &DimReport) -> pb::Dimension {
    pb::Dimension {
        name: d.dimension.as_str().to_string(),
        state: dim_state(d.state) as i32,
        detail: d.detail.clone(),
    }
}

pub fn status(s: LaunchStatus) -> pb::ExecutionStatus {
    match s {
        LaunchStatus::Running => pb::ExecutionStatus::Running,
        LaunchStatus::Succeeded => pb::ExecutionStatus::Succeeded,
        LaunchStatus::Failed => pb::ExecutionStatus::Failed,
        LaunchStatus::TimedOut => pb::ExecutionStatus::TimedOut,
        LaunchStatus::Killed => pb::ExecutionStatus::Killed,
        LaunchStatus::ContainmentUnavailable => pb::ExecutionStatus::ContainmentUnavailable,
        LaunchStatus::TeardownFailed => pb::ExecutionStatus::TeardownFailed,
        LaunchStatus::Lost => pb::ExecutionStatus::Lost,
        LaunchStatus::PendingApproval => pb::ExecutionStatus::PendingApproval,
        LaunchStatus::Rejected => pb::ExecutionStatus::Rejected,
    }
}

fn output(c: &Captured) -> pb::Output {
    pb::Output {
        head: c.head.clone(),
        tail: c.tail.clone(),
        total_bytes: c.total,
        truncated: c.truncated,
    }
}

pub fn execution(r: &Record) -> pb::Execution {
    // A start of 0 is none (an earlier execd retired lost launches so): the row's own
    // recording stands in, and a duration is only ever of two real timestamps (0: none).
    let started = r
        .started_at_ms
        .filter(|s| *s > 0)
        .unwrap_or(r.created_at_ms);
    let ended = r.ended_at_ms.filter(|e| *e > 0);
    pb::Execution {
        id: r.id.clone(),
        status: status(r.status) as i32,
        exit_code: r.exit_code,
        signal: r.signal,
        started_at_unix_ms: started,
        ended_at_unix_ms: ended.unwrap_or(0),
        duration_ms: ended
            .and_then(|e| u64::try_from(e - started).ok())
            .unwrap_or(0),
        profile: r.profile.clone(),
        argv: r.argv.clone(),
        cwd: r.cwd.clone(),
        containment: r.containment.iter().map(dimension).collect(),
        teardown_complete: r.teardown_complete,
        survivors: r.survivors.clone(),
        ended_by_teardown: r.ended_by_teardown.clone(),
        timeout_ms: r.timeout_ms,
        error: r.error.clone(),
        requested_by_role: r.requested_by_role.clone(),
        principal: r.principal.clone(),
        tty: r.tty,
    }
}

pub fn outputs(f: Option<&Finished>) -> (Option<pb::Output>, Option<pb::Output>) {
    match f {
        Some(f) => (Some(output(&f.stdout)), Some(output(&f.stderr))),
        None => (None, None),
    }
}

pub fn status_from(s: pb::ExecutionStatus) -> Option<LaunchStatus> {
    Some(match s {
        pb::ExecutionStatus::Unspecified => return None,
        pb::ExecutionStatus::Running => LaunchStatus::Running,
        pb::ExecutionStatus::Succeeded => LaunchStatus::Succeeded,
        pb::ExecutionStatus::Failed => LaunchStatus::Failed,
        pb::ExecutionStatus::TimedOut => LaunchStatus::TimedOut,
        pb::ExecutionStatus::Killed => LaunchStatus::Killed,
        pb::ExecutionStatus::ContainmentUnavailable => LaunchStatus::ContainmentUnavailable,
        pb::ExecutionStatus::TeardownFailed => LaunchStatus::TeardownFailed,
        pb::ExecutionStatus::Lost => LaunchStatus::Lost,
        pb::ExecutionStatus::PendingApproval => LaunchStatus::PendingApproval,
        pb::ExecutionStatus::Rejected => LaunchStatus::Rejected,
    })
}

/// The proto form of a risk class.
pub fn risk_class(c: Class) -> pb::RiskClass {
    match c {
        Class::ReadOnly => pb::RiskClass::ReadOnly,
        Class::ReversibleLow => pb::RiskClass::ReversibleLow,
        Class::ConfigMutation => pb::RiskClass::ConfigMutation,
        Class::Destructive => pb::RiskClass::Destructive,
    }
}

/// A request's declared risk: unspecified is none; an unknown value names the field.
pub fn declared_risk(v: i32) -> Result<Option<Class>, tonic::Status> {
    match pb::RiskClass::try_from(v) {
        Ok(pb::RiskClass::Unspecified) => Ok(None),
        Ok(pb::RiskClass::ReadOnly) => Ok(Some(Class::ReadOnly)),
        Ok(pb::RiskClass::ReversibleLow) => Ok(Some(Class::ReversibleLow)),
        Ok(pb::RiskClass::ConfigMutation) => Ok(Some(Class::ConfigMutation)),
        Ok(pb::RiskClass::Destructive) => Ok(Some(Class::Destructive)),
        Err(_) => Err(edge::invalid(format!(
            "declared_risk: {v} is not a risk class"
        ))),
    }
}

/// The proto form of an approval's state.
pub fn approval_state(s: State) -> pb::ApprovalState {
    match s {
        State::Pending => pb::ApprovalState::Pending,
        State::Approved => pb::ApprovalState::Approved,
        State::Denied => pb::ApprovalState::Denied,
        State::Revoked => pb::ApprovalState::Revoked,
        State::Expired => pb::ApprovalState::Expired,
        State::Consumed => pb::ApprovalState::Consumed,
    }
}

/// A listing's state filter: unspecified is any.
pub fn state_filter(v: i32) -> Result<Option<State>, tonic::Status> {
    let all = State::ALL;
    match pb::ApprovalState::try_from(v) {
        Ok(pb::ApprovalState::Unspecified) => Ok(None),
        Ok(p) => Ok(all.into_iter().find(|s| approval_state(*s) == p)),
        Err(_) => Err(edge::invalid(format!(
            "state: {v} is not an approval state"
        ))),
    }
}

/// A decision, as the gate names it.
pub fn decision(v: i32) -> Result<&'static str, tonic::Status> {
    match pb::Decision::try_from(v) {
        Ok(pb::Decision::Approve) => Ok("approve"),
        Ok(pb::Decision::Deny) => Ok("deny"),
        Ok(pb::Decision::Revoke) => Ok("revoke"),
        _ => Err(edge::invalid("decision: approve, deny or revoke")),
    }
}

/// What a kill found.
pub fn kill_outcome(o: &KillOutcome) -> pb::KillOutcome {
    match o {
        KillOutcome::Killed => pb::KillOutcome::Killed,
        KillOutcome::AlreadyGone | KillOutcome::NotOwned(Verdict::Gone) => {
            pb::KillOutcome::AlreadyGone
        }
        KillOutcome::NotOwned(Verdict::Foreign) => pb::KillOutcome::Foreign,
        KillOutcome::NotOwned(Verdict::Unverifiable | Verdict::Owned) => {
            pb::KillOutcome::Unverifiable
        }
        KillOutcome::Unconfirmed => pb::KillOutcome::Unconfirmed,
    }
}

/// Classifies a command for `Classify`; a bad request is `INVALID_ARGUMENT` naming the field.
pub fn classify(r: &pb::ClassifyRequest) -> Result<pb::ClassifyResponse, tonic::Status> {
    use argos_risk::{self as risk, Command};
    let declared = declared_risk(r.declared_risk)?;
    let command = match (r.command.is_empty(), r.argv.is_empty()) {
        (false, true) => Command::Shell(&r.command),
        (true, false) => Command::Argv(&r.argv),
        (false, false) => {
            return Err(edge::invalid("command, argv: give one, not both"));
        }
        (true, true) => {
            return Err(edge::invalid("command: give a command or an argv"));
        }
    };
    let env: std::collections::BTreeMap<String, String> =
        r.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let v = risk::judge(
        risk::Request {
            command,
            env: &env,
            stdin: &r.stdin,
        },
        declared,
    );
    Ok(pb::ClassifyResponse {
        risk_class: risk_class(v.class) as i32,
        reasons: v
            .reasons
            .into_iter()
            .map(|r| pb::RiskReason {
                risk_class: risk_class(r.class) as i32,
                why: r.why,
            })
            .collect(),
        needs_approval: v.class > Class::ReadOnly,
        needs_confirmation: v.class == Class::Destructive,
    })
}

/// An approval as the API shows it.
pub fn approval(a: &crate::approval::Approval) -> pb::Approval {
    let c = a.canonical();
    pb::Approval {
        id: a.id.clone(),
        short_id: a.short_id().to_string(),
        state: approval_state(a.state) as i32,
        risk_class: risk_class(a.class) as i32,
        reasons: a
            .reasons
            .iter()
            .map(|r| pb::RiskReason {
                risk_class: risk_class(r.class) as i32,
                why: r.why.clone(),
            })
            .collect(),
        purpose: a.purpose.clone(),
        command: c.as_ref().map(|c| c.command.clone()).unwrap_or_default(),
        argv: c.as_ref().map(|c| c.argv.clone()).unwrap_or_default(),
        cwd: c.as_ref().map(|c| c.cwd.clone()).unwrap_or_default(),
        profile: c.as_ref().map(|c| c.profile.clone()).unwrap_or_default(),
        env: c
            .as_ref()
            .map(|c| c.env.clone().into_iter().collect())
            .unwrap_or_default(),
        timeout_ms: c.as_ref().and_then(|c| c.timeout_ms),
        digest: a.digest.clone(),
        requester_role: a.requester_role.clone(),
        requester_principal: a.requester_principal.clone(),
        created_at_unix_ms: a.created_at_ms,
        expires_at_unix_ms: a.expires_at_ms,
        decided_by: a.decided_by.clone(),
        decided_at_unix_ms: a.decided_at_ms.unwrap_or(0),
        note: a.note.clone(),
        execution_id: a.execution_id.clone(),
        needs_confirmation: a.needs_confirmation(),
        target: c.as_ref().map(|c| c.target.clone()).unwrap_or_default(),
        stdin_head: a.stdin_head.clone(),
        stdin_bytes: a.stdin_bytes,
        place: c
            .as_ref()
            .and_then(|c| crate::gate::stored_place(&c.place))
            .map_or(pb::Place::Unspecified, place) as i32,
        run_as: c.as_ref().map(|c| c.run_as.clone()).unwrap_or_default(),
    }
}

/// A place for the wire.
pub fn place(p: crate::gate::Place) -> pb::Place {
    p.wire()
}

/// A place from the wire (unspecified: auto).
pub fn place_from(v: i32) -> Result<crate::gate::Place, tonic::Status> {
    crate::gate::Place::from_wire(v).map_err(|e| edge::invalid(format!("place: {e}")))
}

pub fn audit_record(r: &argos_store::audit::Record) -> pb::AuditRecord {
    pb::AuditRecord {
        seq: r.seq,
        at_unix_ms: r.at_ms,
        kind: r.kind.clone(),
        actor: r.actor.clone(),
        subject: r.subject.clone(),
        detail: r.detail.clone(),
        prev_hash: r.prev_hash.clone(),
        hash: r.hash.clone(),
    }
}

/// An anchor from the wire.
pub fn anchor(a: pb::AuditAnchor) -> argos_store::audit::Anchor {
    argos_store::audit::Anchor {
        by: a.by,
        seq: a.seq,
        hash: a.hash,
        at_ms: a.at_ms,
    }
}

/// An anchor for the wire.
pub fn audit_anchor(a: &argos_store::audit::Anchor) -> pb::AuditAnchor {
    pb::AuditAnchor {
        seq: a.seq,
        hash: a.hash.clone(),
        at_ms: a.at_ms,
        by: a.by.clone(),
    }
}

pub fn standing(s: &crate::standing::Standing) -> pb::StandingApproval {
    let c = &s.canonical;
    pb::StandingApproval {
        id: s.id.clone(),
        label: s.label.clone(),
        owner: s.owner.clone(),
        place: place(s.place) as i32,
        digest: s.digest.clone(),
        risk_class: s
            .risk_class
            .parse::<argos_risk::Class>()
            .map_or(pb::RiskClass::Unspecified, risk_class) as i32,
        approved_by: s.approved_by.clone(),
        created_at_unix_ms: s.created_at_ms,
        revoked_by: s.revoked_by.clone(),
        revoked_at_unix_ms: s.revoked_at_ms,
        command: c.command.clone(),
        argv: c.argv.clone(),
        cwd: c.cwd.clone(),
        env: c.env.clone().into_iter().collect(),
        timeout_ms: c.timeout_ms,
        run_as: c.run_as.clone(),
    }
}
