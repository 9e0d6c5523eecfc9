//! argos-execd: the only privileged daemon: contained execution, process identity, approvals and the executions ledger.
//!
//! So far its surface is the daemon's identity (`Status`) on its peer-authenticated
//! socket; see ARCHITECTURE.md for what lands here next.
// execd is the one crate that may hold `unsafe` (per module, each block with a SAFETY note);
// it has none yet.
#![deny(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;

use argos_common::daemon::{self, DaemonIdentity, Privilege, Serve, Spec};
use argos_common::grpc::Routes;
use argos_common::peer::{MethodPolicy, RoleSet};
use argos_proto::common::v1::{DaemonStatus, StatusRequest};
use argos_proto::exec::v1::exec_server::{Exec, ExecServer};
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

struct ExecService {
    identity: Arc<DaemonIdentity>,
}

#[tonic::async_trait]
impl Exec for ExecService {
    async fn status(&self, req: Request<StatusRequest>) -> Result<Response<DaemonStatus>, Status> {
        daemon::status_response(&self.identity, &req)
    }
}

fn main() -> ExitCode {
    let spec = Spec {
        name: "execd",
        privilege: Privilege::MayBeRoot,
    };
    daemon::run(spec, |ctx| async move {
        let service = ExecServer::new(ExecService {
            identity: ctx.identity.clone(),
        });
        let name = <ExecServer<ExecService> as NamedService>::NAME;
        Ok(Serve {
            routes: Routes::new().route(service),
            policy: MethodPolicy::new().method(format!("/{name}/Status"), RoleSet::all()),
            background: Vec::new(),
        })
    })
}
