//! The proto edge: conversions between `argos.exec.v1` messages and domain types. Nothing
//! else in execd touches generated types.

use argos_proto::exec::v1 as pb;

use crate::launch::{Captured, Finished, LaunchRequest};
use crate::spec::{DimReport, DimState, LaunchSpec, LaunchStatus};

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

/// Who asked for a launch, as recorded.
#[derive(Debug, Clone, Default)]
pub struct Requester {
    pub role: String,
    pub principal: String,
}

pub fn execution(spec: &LaunchSpec, f: &Finished, who: &Requester) -> pb::Execution {
    let r = &f.result;
    pb::Execution {
        id: spec.id.clone(),
        status: status(r.status) as i32,
        exit_code: r.exit_code,
        signal: r.signal,
        started_at_unix_ms: r.started_at_ms,
        ended_at_unix_ms: r.ended_at_ms,
        duration_ms: u64::try_from(r.ended_at_ms - r.started_at_ms).unwrap_or(0),
        profile: spec.plan.profile.clone(),
        argv: spec.argv.clone(),
        cwd: spec.cwd.display().to_string(),
        containment: r.report.iter().map(dimension).collect(),
        teardown_complete: r.teardown.complete,
        survivors: r.teardown.survivors.clone(),
        error: r.error.clone().unwrap_or_default(),
        requested_by_role: who.role.clone(),
        principal: who.principal.clone(),
    }
}

pub fn run_response(spec: &LaunchSpec, f: &Finished, who: &Requester) -> pb::RunResponse {
    pb::RunResponse {
        execution: Some(execution(spec, f, who)),
        stdout: Some(output(&f.stdout)),
        stderr: Some(output(&f.stderr)),
    }
}
