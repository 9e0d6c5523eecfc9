//! Running one command through a stack's execd and reading what came back: its status,
//! output and containment report in plain types.

use std::collections::HashMap;

use argos_proto::exec::v1::{DimensionState, ExecutionStatus, RunRequest, RunResponse};

use crate::Stack;

/// A one-thread runtime for a blocking test.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `req` through `stack`'s execd, to its end.
pub fn run(stack: &Stack, req: RunRequest) -> Result<RunResponse, argos_exec_client::ExecError> {
    rt().block_on(async { stack.exec().run(req).await })
}

/// What a finished launch came back with.
pub struct Ran {
    pub status: ExecutionStatus,
    pub exit: Option<i32>,
    pub out: String,
    pub err: String,
    pub containment: HashMap<String, (DimensionState, String)>,
    pub error: String,
    pub total_out: u64,
    pub truncated: bool,
    /// What the command left running, which teardown ended.
    pub ended_by_teardown: Vec<String>,
}

/// A `Run` answer in plain types.
pub fn ran(r: RunResponse) -> Ran {
    let e = r.execution.unwrap();
    let out = r.stdout.unwrap();
    let err = r.stderr.unwrap();
    Ran {
        status: ExecutionStatus::try_from(e.status).unwrap(),
        exit: e.exit_code,
        out: String::from_utf8_lossy(&out.head).to_string(),
        err: String::from_utf8_lossy(&err.head).to_string(),
        containment: e
            .containment
            .iter()
            .map(|d| {
                (
                    d.name.clone(),
                    (DimensionState::try_from(d.state).unwrap(), d.detail.clone()),
                )
            })
            .collect(),
        ended_by_teardown: e.ended_by_teardown,
        error: e.error,
        total_out: out.total_bytes,
        truncated: out.truncated,
    }
}
