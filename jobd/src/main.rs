//! argos-jobd: background jobs, schedules, webhooks, chains and follow-ups.
//!
//! So far its surface is what the daemon skeleton gives every socket (`Status`, health,
//! reflection) and its own, still empty, service; see ARCHITECTURE.md for what lands here
//! next.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use argos_common::daemon::{self, Privilege, Serve, Spec};
use argos_common::peer::MethodPolicy;
use argos_proto::job::v1::job_server::{Job, JobServer};

struct JobService;

impl Job for JobService {}

fn main() -> ExitCode {
    daemon::run(Spec::new("jobd", Privilege::Unprivileged), |_ctx| async {
        Ok(Serve::new(JobServer::new(JobService), MethodPolicy::new()))
    })
}
