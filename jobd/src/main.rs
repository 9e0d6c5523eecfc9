//! argos-jobd: background jobs, schedules, webhooks, chains and follow-ups.
//!
//! So far its surface is the daemon's identity (`Status`) on its peer-authenticated
//! socket; see ARCHITECTURE.md for what lands here next.
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;

use argos_common::daemon::{self, DaemonIdentity, Privilege, Serve, Spec};
use argos_common::grpc::Routes;
use argos_common::peer::{MethodPolicy, RoleSet};
use argos_proto::common::v1::{DaemonStatus, StatusRequest};
use argos_proto::job::v1::job_server::{Job, JobServer};
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

struct JobService {
    identity: Arc<DaemonIdentity>,
}

#[tonic::async_trait]
impl Job for JobService {
    async fn status(&self, req: Request<StatusRequest>) -> Result<Response<DaemonStatus>, Status> {
        daemon::status_response(&self.identity, &req)
    }
}

fn main() -> ExitCode {
    let spec = Spec {
        name: "jobd",
        privilege: Privilege::Unprivileged,
    };
    daemon::run(spec, |ctx| async move {
        let service = JobServer::new(JobService {
            identity: ctx.identity.clone(),
        });
        let name = <JobServer<JobService> as NamedService>::NAME;
        Ok(Serve {
            routes: Routes::new().route(service),
            policy: MethodPolicy::new().method(format!("/{name}/Status"), RoleSet::all()),
            background: Vec::new(),
        })
    })
}
