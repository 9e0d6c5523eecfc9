//! argos-mcpd: the MCP broker: upstream MCP servers, qualified tools, caps and pins.
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
use argos_proto::mcp::v1::mcp_server::{Mcp, McpServer};
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

struct McpService {
    identity: Arc<DaemonIdentity>,
}

#[tonic::async_trait]
impl Mcp for McpService {
    async fn status(&self, req: Request<StatusRequest>) -> Result<Response<DaemonStatus>, Status> {
        daemon::status_response(&self.identity, &req)
    }
}

fn main() -> ExitCode {
    let spec = Spec {
        name: "mcpd",
        privilege: Privilege::Unprivileged,
    };
    daemon::run(spec, |ctx| async move {
        let service = McpServer::new(McpService {
            identity: ctx.identity.clone(),
        });
        let name = <McpServer<McpService> as NamedService>::NAME;
        Ok(Serve {
            routes: Routes::new().route(service),
            policy: MethodPolicy::new().method(format!("/{name}/Status"), RoleSet::all()),
            background: Vec::new(),
        })
    })
}
