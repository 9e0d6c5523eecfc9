//! argos-gatewayd: the only HTTP listener. Unprivileged; it runs no process and opens
//! nothing outside its own state dir: all work goes to the other daemons over gRPC.
//!
//! So far it serves its identity on its inspection socket and, over HTTP, a status page
//! and `/api/status`, built from each daemon's `Status` RPC.
#![forbid(unsafe_code)]

mod http;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use argos_common::daemon::{self, DaemonIdentity, Privilege, Serve, Spec};
use argos_common::grpc::Routes;
use argos_common::peer::{MethodPolicy, RoleSet};
use argos_proto::common::v1::{DaemonStatus, StatusRequest};
use argos_proto::gateway::v1::gateway_server::{Gateway, GatewayServer};
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

struct GatewayService {
    identity: Arc<DaemonIdentity>,
}

#[tonic::async_trait]
impl Gateway for GatewayService {
    async fn status(&self, req: Request<StatusRequest>) -> Result<Response<DaemonStatus>, Status> {
        daemon::status_response(&self.identity, &req)
    }
}

fn main() -> ExitCode {
    let spec = Spec {
        name: "gatewayd",
        privilege: Privilege::Unprivileged,
    };
    daemon::run(spec, |ctx| async move {
        let listen = ctx.config.gateway.listen;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding HTTP listener {listen}"))?;
        let bound = listener
            .local_addr()
            .context("reading HTTP listener address")?;
        tracing::info!(url = %format!("http://{bound}/"), "HTTP listening");
        let service = GatewayServer::new(GatewayService {
            identity: ctx.identity.clone(),
        });
        let name = <GatewayServer<GatewayService> as NamedService>::NAME;
        let app = http::router(http::State::new(&ctx)?);
        let stop = ctx.clone();
        let server = async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.shutdown().await })
                .await
                .context("HTTP server")
        };
        Ok(Serve {
            routes: Routes::new().route(service),
            policy: MethodPolicy::new().method(format!("/{name}/Status"), RoleSet::all()),
            background: vec![Box::pin(server)],
        })
    })
}
