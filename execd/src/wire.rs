//! The proto edge: conversions between `argos.exec.v1` messages and domain types. Nothing
//! else in execd touches generated types.

use argos_proto::exec::v1 as pb;

use crate::launch::{Captured, Finished, LaunchRequest};
use crate::ledger::Record;
use crate::spec::{DimReport, DimState, LaunchStatus};

pub fn launch_request(r: pb::RunRequest) -> LaunchRequest {
    LaunchRequest {
        argv: r.argv,
        command: r.command,
        cwd: r.cwd,
        env: r.env.into_iter().collect(),
        profile: r.profile,
        timeout_ms: r.timeout_ms,
        stdin: r.stdin,
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
    let started = r.started_at_ms.unwrap_or(r.created_at_ms);
    pb::Execution {
        id: r.id.clone(),
        status: status(r.status) as i32,
        exit_code: r.exit_code,
        signal: r.signal,
        started_at_unix_ms: started,
        ended_at_unix_ms: r.ended_at_ms.unwrap_or(0),
        duration_ms: r
            .ended_at_ms
            .map(|e| u64::try_from(e - started).unwrap_or(0))
            .unwrap_or(0),
        profile: r.profile.clone(),
        argv: r.argv.clone(),
        cwd: r.cwd.clone(),
        containment: r.containment.iter().map(dimension).collect(),
        teardown_complete: r.teardown_complete,
        survivors: r.survivors.clone(),
        error: r.error.clone(),
        requested_by_role: r.requested_by_role.clone(),
        principal: r.principal.clone(),
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
    })
}
