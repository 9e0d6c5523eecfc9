//! The `argos.exec.v1.Exec` service: authorization by role, then the launcher.

use std::sync::Arc;
use std::time::Duration;

use argos_common::daemon::{self, DaemonIdentity};
use argos_common::peer::{MethodPolicy, PeerRole, RoleSet};
use argos_common::principal::Caller;
use argos_proto::common::v1::{DaemonStatus, StatusRequest};
use argos_proto::exec::v1 as pb;
use argos_proto::exec::v1::exec_server::{Exec, ExecServer};
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

use crate::launch::{self, LaunchRequest, Launcher};
use crate::spec::Need;
use crate::wire::{self, Requester};

pub struct ExecService {
    pub identity: Arc<DaemonIdentity>,
    pub launcher: Arc<Launcher>,
}

/// Which roles each RPC admits (finer checks, like mcp's one profile, are in the handler).
pub fn policy() -> MethodPolicy {
    let name = <ExecServer<ExecService> as NamedService>::NAME;
    let m = |rpc: &str| format!("/{name}/{rpc}");
    MethodPolicy::new()
        .method(m("Status"), RoleSet::all())
        .method(m("Profiles"), RoleSet::all())
        .method(
            m("Run"),
            RoleSet::of(&[PeerRole::Gateway, PeerRole::Operator, PeerRole::Mcp]),
        )
}

fn requester(caller: Option<&Caller>) -> Requester {
    caller
        .map(|c| Requester {
            role: c.roles.to_string(),
            principal: c
                .principal
                .as_ref()
                .map(|p| p.to_string())
                .unwrap_or_default(),
        })
        .unwrap_or_default()
}

/// Kills a launch if the call that started it goes away before it ends.
struct AbandonGuard {
    dir: Option<std::path::PathBuf>,
    grace: Duration,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            let grace = self.grace;
            tracing::info!(launch = %dir.display(), "caller went away; tearing the launch down");
            tokio::spawn(async move {
                let outcome = launch::kill_launch(&dir, grace).await;
                tracing::info!(launch = %dir.display(), ?outcome, "abandoned launch torn down");
            });
        }
    }
}

impl ExecService {
    async fn run_to_end(
        &self,
        req: LaunchRequest,
        who: Requester,
        mcp_only: bool,
    ) -> Result<pb::RunResponse, Status> {
        let id = uuid::Uuid::now_v7().to_string();
        let spec = self
            .launcher
            .validate(&id, &req)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        if mcp_only && spec.plan.profile != "mcp-server" {
            return Err(Status::permission_denied(
                "the mcp role may only launch in the mcp-server profile",
            ));
        }
        let prepared = self.launcher.prepare(spec, &req.stdin).map_err(|e| {
            tracing::error!(error = format!("{e:#}"), "preparing launch");
            Status::internal("could not prepare the launch")
        })?;
        let mut child = self.launcher.start(&prepared).map_err(|e| {
            tracing::error!(error = format!("{e:#}"), "starting shim");
            Status::internal("could not start the launch")
        })?;
        tracing::info!(id = %prepared.spec.id, profile = %prepared.spec.plan.profile, role = %who.role,
            principal = %who.principal, argv = ?prepared.spec.argv, "launch started");
        let mut guard = AbandonGuard {
            dir: Some(prepared.dir.clone()),
            grace: Duration::from_millis(self.launcher.grace_ms),
        };
        let waited = child.wait().await;
        guard.dir = None;
        if let Err(e) = waited {
            tracing::error!(error = %e, "waiting for shim");
        }
        let finished = launch::read_finished(&prepared.dir, &prepared.spec);
        tracing::info!(id = %prepared.spec.id, status = finished.result.status.as_str(),
            exit = ?finished.result.exit_code, "launch ended");
        Ok(wire::run_response(&prepared.spec, &finished, &who))
    }
}

#[tonic::async_trait]
impl Exec for ExecService {
    async fn status(&self, req: Request<StatusRequest>) -> Result<Response<DaemonStatus>, Status> {
        daemon::status_response(&self.identity, &req)
    }

    async fn run(&self, req: Request<pb::RunRequest>) -> Result<Response<pb::RunResponse>, Status> {
        let caller = req.extensions().get::<Caller>().cloned();
        let mcp_only = caller.as_ref().is_some_and(|c| {
            !c.roles.contains(PeerRole::Gateway) && !c.roles.contains(PeerRole::Operator)
        });
        let who = requester(caller.as_ref());
        let domain = wire::launch_request(req.into_inner());
        self.run_to_end(domain, who, mcp_only)
            .await
            .map(Response::new)
    }

    async fn profiles(
        &self,
        _req: Request<pb::ProfilesRequest>,
    ) -> Result<Response<pb::ProfilesResponse>, Status> {
        let mut out = Vec::new();
        for (name, profile) in &self.launcher.profiles.0 {
            // Ask the host, not a table: a real probe launch of /bin/true in this profile.
            let probe = LaunchRequest {
                argv: vec!["/bin/true".into()],
                profile: name.clone(),
                timeout_ms: Some(10_000),
                ..Default::default()
            };
            let who = Requester {
                role: "execd".into(),
                principal: String::new(),
            };
            let report = match self.run_to_end(probe, who, false).await {
                Ok(r) => r.execution.map(|e| e.containment).unwrap_or_default(),
                Err(_) => Vec::new(),
            };
            let dimensions = profile
                .rules()
                .into_iter()
                .map(|(d, need, reason)| pb::ProfileDimension {
                    name: d.as_str().into(),
                    need: match need {
                        Need::Required => "required",
                        Need::Optional => "optional",
                        Need::Off => "off",
                    }
                    .into(),
                    reason: reason.into(),
                    would_be: report
                        .iter()
                        .find(|r| r.name == d.as_str())
                        .map(|r| r.state)
                        .unwrap_or(pb::DimensionState::Unavailable as i32),
                })
                .collect();
            out.push(pb::Profile {
                name: name.clone(),
                reason: profile.reason.clone(),
                dimensions,
            });
        }
        Ok(Response::new(pb::ProfilesResponse { profiles: out }))
    }
}

pub fn server(svc: ExecService) -> ExecServer<ExecService> {
    ExecServer::new(svc)
}
