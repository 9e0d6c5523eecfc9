//! The `argos.exec.v1.Exec` service: each RPC checked against the caller's access
//! (`access.rs`), then handed to the launch manager, the gate or the audit trail.

use argos_store::audit::AnchorRefused;
use std::sync::Arc;
use std::time::Duration;

use argos_common::peer::PeerRole;
use argos_common::principal::Caller;
use argos_proto::exec::v1 as pb;
use argos_proto::exec::v1::exec_server::{Exec, ExecServer};
use argos_store::audit::Entry;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::access::{Access, access};
use crate::edge;
use crate::gate::{self, Requested};
use crate::launch::{self, KillOutcome, LaunchRequest};
use crate::ledger::{ListFilter, Record};
use crate::manager::{Manager, Requester};
use crate::spec::Need;
use crate::wire;

pub struct ExecService {
    pub manager: Arc<Manager>,
    /// Stdio MCP server starts, one at a time: each ends the server's previous launch
    /// and records the new one, which two at once could interleave.
    pub mcp_starts: Arc<tokio::sync::Mutex<()>>,
}

/// Refuses what only a started launch can do for an execution still waiting for its
/// approval.
fn waiting(r: &Record) -> Result<(), Status> {
    if r.status == crate::spec::LaunchStatus::PendingApproval {
        return Err(edge::conflict(format!(
            "execution {} waits for its approval: nothing runs yet (deny or revoke the approval to end it)",
            r.id
        )));
    }
    Ok(())
}

/// Most bytes a listing answers with: a page ends early (its token goes on from there)
/// rather than outgrow what a client decodes in one message.
pub const PAGE_BYTES: usize = 4 * 1024 * 1024;

/// The items that fit in [`PAGE_BYTES`] (at least one), and whether any were left out.
fn within_page_bytes<T: prost::Message>(items: impl Iterator<Item = T>) -> (Vec<T>, bool) {
    let mut out = Vec::new();
    let mut bytes = 0;
    for item in items {
        bytes += item.encoded_len();
        if !out.is_empty() && bytes > PAGE_BYTES {
            return (out, true);
        }
        out.push(item);
    }
    (out, false)
}

/// A listing's page size: default 50, at most 500.
fn page_size(n: u32) -> Result<u32, Status> {
    match n {
        0 => Ok(50),
        n if n > 500 => Err(edge::invalid("page_size: at most 500")),
        n => Ok(n),
    }
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
    /// What this call's caller may do.
    fn access<T>(&self, req: &Request<T>) -> Access {
        access(
            req.extensions().get::<Caller>(),
            &self.manager.launcher.profiles,
        )
    }

    fn grace(&self) -> Duration {
        Duration::from_millis(self.manager.launcher.grace_ms)
    }

    async fn run_to_end(&self, req: LaunchRequest, a: &Access) -> Result<pb::RunResponse, Status> {
        let id = self
            .manager
            .start(&req, &a.who, a.allowed_profiles.as_deref())
            .await
            .map_err(edge::start)?;
        let mut guard = AbandonGuard {
            dir: Some(self.manager.dir(&id)),
            grace: self.grace(),
        };
        let ended = self
            .manager
            .wait_end(&id)
            .await
            .ok_or_else(edge::vanished)?;
        guard.dir = None;
        let finished = ended.finished.or_else(|| self.manager.finished(&id));
        let (stdout, stderr) = wire::outputs(finished.as_ref());
        Ok(pb::RunResponse {
            execution: Some(wire::execution(&ended.record)),
            stdout,
            stderr,
        })
    }

    /// The record of a launch the caller may see, or NOT_FOUND (never "exists but hidden").
    /// Ends the launch a stdio MCP server runs as now, if any (a verified kill).
    async fn end_mcp_launch(&self, server_id: &str) -> Result<(), Status> {
        let pool = self.manager.ledger.pool();
        let current = crate::mcp::current_launch(pool, server_id)
            .await
            .map_err(edge::store)?;
        if let Some(rec) = self
            .manager
            .ledger
            .get(&current)
            .await
            .map_err(edge::store)?
            && !rec.status.is_final()
        {
            let outcome = launch::kill_launch(&self.manager.dir(&current), self.grace()).await;
            tracing::info!(server = %server_id, launch = %current, ?outcome, "a stdio MCP server's launch ended");
            if matches!(outcome, KillOutcome::Killed | KillOutcome::AlreadyGone) {
                let _ = self.manager.wait(&current).await;
            }
        }
        Ok(())
    }

    /// Starts a detached launch and answers its record as it stands.
    async fn start_detached(
        &self,
        req: &LaunchRequest,
        a: &Access,
        allowed_profiles: Option<&[String]>,
    ) -> Result<Response<pb::StartResponse>, Status> {
        let id = self
            .manager
            .start(req, &a.who, allowed_profiles)
            .await
            .map_err(edge::start)?;
        let rec = self
            .manager
            .ledger
            .get(&id)
            .await
            .map_err(edge::store)?
            .ok_or_else(edge::vanished)?;
        Ok(Response::new(pb::StartResponse {
            execution: Some(wire::execution(&rec)),
        }))
    }

    async fn visible(&self, id: &str, a: &Access) -> Result<Record, Status> {
        if uuid::Uuid::parse_str(id).is_err() {
            return Err(edge::invalid("id: not a launch id"));
        }
        match self.manager.ledger.get(id).await.map_err(edge::store)? {
            Some(r) if a.may_see(&r) => Ok(r),
            _ => Err(edge::not_found(format!("no launch {id}"))),
        }
    }
}

type FollowStream = ReceiverStream<Result<pb::FollowEvent, Status>>;
type AttachStream = ReceiverStream<Result<pb::AttachEvent, Status>>;
type WatchStream = ReceiverStream<Result<pb::WatchEvent, Status>>;

#[tonic::async_trait]
impl Exec for ExecService {
    async fn classify(
        &self,
        req: Request<pb::ClassifyRequest>,
    ) -> Result<Response<pb::ClassifyResponse>, Status> {
        // Pure CPU work (bounded: see common::risk): off the async workers.
        let r = req.into_inner();
        tokio::task::spawn_blocking(move || wire::classify(&r))
            .await
            .map_err(edge::internal("the classifier failed"))?
            .map(Response::new)
    }

    async fn request_run(
        &self,
        req: Request<pb::RequestRunRequest>,
    ) -> Result<Response<pb::RequestRunResponse>, Status> {
        let a = self.access(&req);
        if !a.admin && a.roles.contains(PeerRole::Job) && a.who.principal.is_empty() {
            return Err(edge::invalid(
                "principal: a job's request must name its stored owner",
            ));
        }
        let r = req.into_inner();
        let run = r
            .run
            .ok_or_else(|| edge::invalid("run: the command to run is missing"))?;
        let declared = wire::declared_risk(r.declared_risk)?;
        let place = wire::place_from(r.place)?;
        let requested = gate::request_run(
            &self.manager,
            wire::launch_request(run),
            gate::Asked {
                purpose: r.purpose,
                declared,
                place: Some(place),
                execution_id: (!r.execution_id.is_empty()).then_some(r.execution_id),
                standing: (!r.standing_approval_id.is_empty()).then_some(r.standing_approval_id),
            },
            &a.who,
        )
        .await
        .map_err(edge::gate)?;
        Ok(Response::new(match requested {
            Requested::Started(rec, place, again) => pb::RequestRunResponse {
                execution: Some(wire::execution(&rec)),
                approval: None,
                deduplicated: again,
                place: wire::place(place) as i32,
            },
            Requested::Pending(ap, rec, deduplicated, place) => pb::RequestRunResponse {
                execution: Some(wire::execution(&rec)),
                approval: Some(wire::approval(&ap)),
                deduplicated,
                place: wire::place(place) as i32,
            },
        }))
    }

    async fn approve_standing(
        &self,
        req: Request<pb::ApproveStandingRequest>,
    ) -> Result<Response<pb::StandingApproval>, Status> {
        let a = self.access(&req);
        if a.who.principal.is_empty() {
            return Err(edge::invalid(
                "principal: a standing approval names the admin who gives it",
            ));
        }
        let r = req.into_inner();
        let owner = argos_common::principal::Principal::parse(&r.owner)
            .map_err(|e| edge::invalid(format!("owner: {e}")))?;
        if r.label.len() > 256 {
            return Err(edge::invalid("label: longer than 256 bytes"));
        }
        let run = r
            .run
            .ok_or_else(|| edge::invalid("run: the command to approve is missing"))?;
        let place = wire::place_from(r.place)?;
        let id = uuid::Uuid::now_v7().to_string();
        let judged = gate::judge(&self.manager, wire::launch_request(run), place, None, &id)
            .await
            .map_err(edge::gate)?;
        let by = crate::ledger::actor(&a.who.role, &a.who.principal);
        let s = crate::standing::approve(&self.manager, &judged, owner.as_str(), &r.label, &by)
            .await
            .map_err(edge::gate)?;
        Ok(Response::new(wire::standing(&s)))
    }

    async fn revoke_standing(
        &self,
        req: Request<pb::RevokeStandingRequest>,
    ) -> Result<Response<pb::StandingApproval>, Status> {
        let a = self.access(&req);
        let id = req.into_inner().id;
        if uuid::Uuid::parse_str(&id).is_err() {
            return Err(edge::invalid("id: not a standing approval's id"));
        }
        let by = crate::ledger::actor(&a.who.role, &a.who.principal);
        let s = crate::standing::revoke(&self.manager, &id, &by)
            .await
            .map_err(edge::gate)?;
        Ok(Response::new(wire::standing(&s)))
    }

    async fn get_standing(
        &self,
        req: Request<pb::GetStandingRequest>,
    ) -> Result<Response<pb::StandingApproval>, Status> {
        let id = req.into_inner().id;
        if uuid::Uuid::parse_str(&id).is_err() {
            return Err(edge::invalid("id: not a standing approval's id"));
        }
        match crate::standing::get(&self.manager, &id)
            .await
            .map_err(edge::store)?
        {
            Some(s) => Ok(Response::new(wire::standing(&s))),
            None => Err(edge::not_found(format!("no standing approval {id}"))),
        }
    }

    async fn decide_approval(
        &self,
        req: Request<pb::DecideApprovalRequest>,
    ) -> Result<Response<pb::DecideApprovalResponse>, Status> {
        let a = self.access(&req);
        let r = req.into_inner();
        if uuid::Uuid::parse_str(&r.id).is_err() {
            return Err(edge::invalid("id: not an approval id"));
        }
        let (ap, rec) = gate::decide(
            &self.manager,
            &r.id,
            wire::decision(r.decision)?,
            &a.who,
            &r.confirm,
            &r.note,
        )
        .await
        .map_err(edge::gate)?;
        Ok(Response::new(pb::DecideApprovalResponse {
            approval: Some(wire::approval(&ap)),
            execution: Some(wire::execution(&rec)),
        }))
    }

    async fn get_approval(
        &self,
        req: Request<pb::GetApprovalRequest>,
    ) -> Result<Response<pb::Approval>, Status> {
        let a = self.access(&req);
        let id = req.into_inner().id;
        if uuid::Uuid::parse_str(&id).is_err() {
            return Err(edge::invalid("id: not an approval id"));
        }
        match self.manager.approvals.get(&id).await.map_err(edge::store)? {
            Some(ap) if a.may_see_approval(&ap) => Ok(Response::new(wire::approval(&ap))),
            _ => Err(edge::not_found(format!("no approval {id}"))),
        }
    }

    async fn list_approvals(
        &self,
        req: Request<pb::ListApprovalsRequest>,
    ) -> Result<Response<pb::ListApprovalsResponse>, Status> {
        let a = self.access(&req);
        let r = req.into_inner();
        let limit = page_size(r.page_size)?;
        if !r.page_token.is_empty() && uuid::Uuid::parse_str(&r.page_token).is_err() {
            return Err(edge::invalid(
                "page_token: not a token from a previous page",
            ));
        }
        let state = wire::state_filter(r.state)?;
        let rows = self
            .manager
            .approvals
            .list(
                state,
                a.own_role(),
                (!r.page_token.is_empty()).then_some(r.page_token.as_str()),
                limit,
            )
            .await
            .map_err(edge::store)?;
        let full = rows.len() == limit as usize;
        let (approvals, cut) = within_page_bytes(rows.iter().map(wire::approval));
        let next_page_token = if full || cut {
            approvals.last().map(|a| a.id.clone()).unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListApprovalsResponse {
            approvals,
            next_page_token,
        }))
    }

    async fn verify_audit(
        &self,
        req: Request<pb::VerifyAuditRequest>,
    ) -> Result<Response<pb::VerifyAuditResponse>, Status> {
        let anchor = req.into_inner().anchor.map(wire::anchor);
        let v = self
            .manager
            .audit
            .verify(anchor.as_ref())
            .await
            .map_err(edge::store)?;
        let tie = crate::ledger::tie_to_trail(self.manager.ledger.pool())
            .await
            .map_err(edge::store)?;
        let (broken_seq, broken_reason) = v.broken.unwrap_or_default();
        let (ledger_broken_execution, ledger_broken_reason) = tie.broken.unwrap_or_default();
        Ok(Response::new(pb::VerifyAuditResponse {
            ok: broken_seq == 0 && ledger_broken_execution.is_empty(),
            rows: v.rows,
            head_seq: v.head_seq,
            head_hash: v.head_hash,
            broken_seq,
            broken_reason,
            anchor: v.anchor.as_ref().map(wire::audit_anchor),
            ledger_broken_execution,
            ledger_broken_reason,
            ledger_ran: tie.ran,
            ledger_intents: tie.intents,
        }))
    }

    async fn anchor_audit(
        &self,
        req: Request<pb::AnchorAuditRequest>,
    ) -> Result<Response<pb::AnchorAuditResponse>, Status> {
        const PEER: &str = "gateway";
        let r = req.into_inner();
        let audit = &self.manager.audit;
        if let Some(held) = r.held.map(wire::anchor) {
            if let Some(why) = audit.confirm(&held).await.map_err(edge::store)? {
                tracing::error!(%why, "execd's audit trail does not hold what the gateway anchored");
                return Err(edge::lost(format!("execd's audit trail: {why}")));
            }
            // The gateway stored this anchor (and execd's trail holds it): the rows up
            // to it are held.
            self.manager.anchoring.held(held.seq);
        }
        let mut recorded = false;
        if r.record
            && let Some(head) = r.head
        {
            recorded = audit
                .record_anchor(PEER, head.seq, &head.hash)
                .await
                .map_err(|e| match e {
                    AnchorRefused::Contradicts(why) => {
                        tracing::error!(%why, "the gateway's audit head contradicts its anchor");
                        edge::lost(why)
                    }
                    // A full disk is no contradiction: said as what it is.
                    AnchorRefused::Store(e) => edge::store(e),
                })?;
        }
        let (seq, hash) = audit.content_head().await.map_err(edge::store)?;
        let held = audit.anchor_of(PEER).await.map_err(edge::store)?;
        Ok(Response::new(pb::AnchorAuditResponse {
            head: Some(pb::AuditAnchor {
                seq,
                hash,
                at_ms: 0,
                by: String::new(),
            }),
            held: held.as_ref().map(wire::audit_anchor),
            recorded,
        }))
    }

    async fn stats(
        &self,
        _req: Request<pb::StatsRequest>,
    ) -> Result<Response<pb::StatsResponse>, Status> {
        let m = &self.manager;
        let ((by, terminals), approvals) =
            tokio::try_join!(m.ledger.counts(), m.approvals.counts()).map_err(edge::store)?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(Response::new(pb::StatsResponse {
            executions: by
                .into_iter()
                .filter_map(|(status, profile, n)| {
                    Some(pb::ExecutionCount {
                        status: wire::status(crate::spec::LaunchStatus::parse(&status)?) as i32,
                        profile,
                        count: count(n),
                    })
                })
                .collect(),
            approvals: approvals
                .into_iter()
                .filter_map(|(state, n)| {
                    Some(pb::ApprovalCount {
                        state: wire::approval_state(crate::approval::State::parse(&state)?) as i32,
                        count: count(n),
                    })
                })
                .collect(),
            terminals_running: count(terminals),
        }))
    }

    async fn list_audit(
        &self,
        req: Request<pb::ListAuditRequest>,
    ) -> Result<Response<pb::ListAuditResponse>, Status> {
        let r = req.into_inner();
        let filter = argos_store::audit::Filter {
            kind_prefix: (!r.kind_prefix.is_empty()).then_some(r.kind_prefix),
            subject: (!r.subject.is_empty()).then_some(r.subject),
            actor: None,
            before_seq: (r.before_seq > 0).then_some(r.before_seq),
            limit: page_size(r.page_size)?,
        };
        let rows = self
            .manager
            .audit
            .list(&filter)
            .await
            .map_err(edge::store)?;
        // A page cut short by bytes goes on from its last row's seq, as any page does.
        let (records, _) = within_page_bytes(rows.iter().map(wire::audit_record));
        Ok(Response::new(pb::ListAuditResponse { records }))
    }

    async fn run(&self, req: Request<pb::RunRequest>) -> Result<Response<pb::RunResponse>, Status> {
        let a = self.access(&req);
        let domain = wire::launch_request(req.into_inner());
        if domain.tty.is_some() {
            return Err(edge::invalid(
                "tty: a terminal is started with Start and used with Attach",
            ));
        }
        if domain.open_stdin {
            return Err(edge::invalid(
                "open_stdin: a launch with open stdin is started with Start and fed with Attach",
            ));
        }
        self.run_to_end(domain, &a).await.map(Response::new)
    }

    async fn start(
        &self,
        req: Request<pb::RunRequest>,
    ) -> Result<Response<pb::StartResponse>, Status> {
        let a = self.access(&req);
        if !a.admin && a.roles.contains(PeerRole::Job) && a.who.principal.is_empty() {
            return Err(edge::invalid(
                "principal: a job launch must name its stored owner",
            ));
        }
        let domain = wire::launch_request(req.into_inner());
        if domain.tty.is_some() && !a.admin {
            return Err(edge::denied(
                "tty: terminals are for the gateway and operators",
            ));
        }
        self.start_detached(&domain, &a, a.allowed_profiles.as_deref())
            .await
    }

    async fn register_mcp_server(
        &self,
        req: Request<pb::RegisterMcpServerRequest>,
    ) -> Result<Response<pb::McpRegistration>, Status> {
        let a = self.access(&req);
        let r = req.into_inner();
        crate::mcp::check_id(&r.server_id).map_err(edge::mcp)?;
        let launch = wire::mcp_launch(r.launch).canonical().map_err(edge::mcp)?;
        let by = crate::ledger::actor(&a.who.role, &a.who.principal);
        let pool = self.manager.ledger.pool();
        let reg = crate::mcp::register(pool, &r.server_id, launch, &by)
            .await
            .map_err(edge::store)?;
        self.manager
            .audit
            .append(&Entry::new(
                "mcp.register",
                &by,
                &reg.server_id,
                serde_json::json!({"digest": reg.digest, "launch": reg.launch}),
            ))
            .await
            .map_err(edge::store)?;
        tracing::info!(server = %reg.server_id, digest = %reg.digest, by = %by, "stdio MCP server registered");
        Ok(Response::new(wire::mcp_registration(&reg)))
    }

    async fn forget_mcp_server(
        &self,
        req: Request<pb::ForgetMcpServerRequest>,
    ) -> Result<Response<pb::ForgetMcpServerResponse>, Status> {
        let a = self.access(&req);
        let id = req.into_inner().server_id;
        let by = crate::ledger::actor(&a.who.role, &a.who.principal);
        // What it runs as now ends with its registration.
        {
            let _one = self.mcp_starts.lock().await;
            self.end_mcp_launch(&id).await?;
        }
        if !crate::mcp::forget(self.manager.ledger.pool(), &id)
            .await
            .map_err(edge::store)?
        {
            return Err(edge::not_found(format!(
                "no stdio server {id} is registered"
            )));
        }
        self.manager
            .audit
            .append(&Entry::new("mcp.forget", &by, &id, serde_json::json!({})))
            .await
            .map_err(edge::store)?;
        Ok(Response::new(pb::ForgetMcpServerResponse {}))
    }

    async fn list_mcp_servers(
        &self,
        _: Request<pb::ListMcpServersRequest>,
    ) -> Result<Response<pb::ListMcpServersResponse>, Status> {
        let all = crate::mcp::list(self.manager.ledger.pool())
            .await
            .map_err(edge::store)?;
        Ok(Response::new(pb::ListMcpServersResponse {
            servers: all.iter().map(wire::mcp_registration).collect(),
        }))
    }

    async fn start_mcp_server(
        &self,
        req: Request<pb::StartMcpServerRequest>,
    ) -> Result<Response<pb::StartResponse>, Status> {
        let a = self.access(&req);
        let r = req.into_inner();
        let reg = crate::mcp::get(self.manager.ledger.pool(), &r.server_id)
            .await
            .map_err(edge::store)?
            .ok_or_else(|| edge::mcp(crate::mcp::McpError::NotRegistered(r.server_id.clone())))?;
        let env: std::collections::BTreeMap<String, String> = r.env.into_iter().collect();
        let launch = crate::mcp::check_start(&reg, wire::mcp_launch(r.launch), &env)
            .map_err(|e| {
                tracing::warn!(server = %reg.server_id, role = %a.who.role, error = %e, "an MCP server start refused");
                edge::mcp(e)
            })?;
        // One launch per server: the one started before (mcpd restarted, or lost its
        // connection to it) ends first, so none is left running unattended. Done in a
        // task of its own, one start at a time: a caller that goes away mid-way cannot
        // leave a launch started but unrecorded.
        let me = ExecService {
            manager: self.manager.clone(),
            mcp_starts: self.mcp_starts.clone(),
        };
        let server_id = reg.server_id.clone();
        tokio::spawn(async move {
            let _one = me.mcp_starts.clone().lock_owned().await;
            me.end_mcp_launch(&server_id).await?;
            // The registration is the permission: the profile's `launchers` (which admit
            // no unprivileged role through Start) are not asked.
            let started = me.start_detached(&launch.request(env), &a, None).await?;
            if let Some(e) = &started.get_ref().execution {
                crate::mcp::set_launch(me.manager.ledger.pool(), &server_id, &e.id)
                    .await
                    .map_err(edge::store)?;
            }
            Ok(started)
        })
        .await
        .map_err(|_| edge::store("a stdio server's start task ended early"))?
    }

    type FollowStream = FollowStream;
    type AttachStream = AttachStream;

    async fn attach(
        &self,
        req: Request<tonic::Streaming<pb::AttachRequest>>,
    ) -> Result<Response<AttachStream>, Status> {
        let a = self.access(&req);
        let mut inbound = req.into_inner();
        let open = match inbound.message().await? {
            Some(pb::AttachRequest {
                msg: Some(pb::attach_request::Msg::Open(o)),
            }) => o,
            _ => {
                return Err(edge::invalid(
                    "open: the first message opens the attachment",
                ));
            }
        };
        let rec = self.visible(&open.id, &a).await?;
        waiting(&rec)?;
        let spec = self.manager.spec(&open.id);
        let tty = spec.as_ref().is_some_and(|s| s.tty.is_some());
        let open_stdin = spec.as_ref().is_some_and(|s| s.open_stdin);
        if !rec.status.is_final() && !tty && !open_stdin {
            return Err(edge::conflict(format!(
                "launch {} takes no input (neither a terminal nor open stdin): use Follow",
                open.id
            )));
        }
        if tty && !a.admin {
            return Err(edge::denied("terminals are for the gateway and operators"));
        }
        if open.scrollback && !tty {
            return Err(edge::invalid(
                "scrollback: only a terminal keeps its recent output; attach from offsets",
            ));
        }
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(crate::terminal::relay(
            self.manager.clone(),
            open,
            tty,
            inbound,
            tx,
        ));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
    type WatchStream = WatchStream;

    async fn watch(&self, req: Request<pb::WatchRequest>) -> Result<Response<WatchStream>, Status> {
        use tokio::sync::broadcast::error::RecvError;
        // job and mcp are told only of what their own role started or asked for.
        let a = self.access(&req);
        let mut changes = self.manager.changes.subscribe();
        let mut approvals = self.manager.approval_changes.subscribe();
        // Only the gateway anchors execd's trail: only it hears the asks.
        let mut anchor = a
            .roles
            .contains(PeerRole::Gateway)
            .then(|| self.manager.anchoring.watcher());
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let asked = async {
                    match anchor.as_mut() {
                        Some(w) => w.asks.recv().await,
                        None => std::future::pending().await,
                    }
                };
                let event = tokio::select! {
                    ask = asked => match ask {
                        Ok(seq) => pb::watch_event::Event::AnchorWanted(seq),
                        Err(RecvError::Lagged(_)) => continue,
                        Err(RecvError::Closed) => return,
                    },
                    change = changes.recv() => match change {
                        Ok(rec) if a.may_see(&rec) => pb::watch_event::Event::Execution(wire::execution(&rec)),
                        Ok(_) => continue,
                        Err(RecvError::Lagged(n)) => pb::watch_event::Event::Missed(n),
                        Err(RecvError::Closed) => return,
                    },
                    change = approvals.recv() => match change {
                        Ok(ap) if a.may_see_approval(&ap) => pb::watch_event::Event::Approval(wire::approval(&ap)),
                        Ok(_) => continue,
                        Err(RecvError::Lagged(n)) => pb::watch_event::Event::Missed(n),
                        Err(RecvError::Closed) => return,
                    },
                };
                let ev = pb::WatchEvent { event: Some(event) };
                if tx.send(Ok(ev)).await.is_err() {
                    return; // the watcher left
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn follow(
        &self,
        req: Request<pb::FollowRequest>,
    ) -> Result<Response<FollowStream>, Status> {
        let a = self.access(&req);
        let r = req.into_inner();
        waiting(&self.visible(&r.id, &a).await?)?;
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let manager = self.manager.clone();
        tokio::spawn(crate::output::follow(manager, r, tx));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn kill(
        &self,
        req: Request<pb::KillRequest>,
    ) -> Result<Response<pb::KillResponse>, Status> {
        let a = self.access(&req);
        let id = req.into_inner().id;
        let rec = self.visible(&id, &a).await?;
        if rec.status == crate::spec::LaunchStatus::PendingApproval {
            // Nothing runs yet: withdrawn, as its requester or an operator may.
            let rec = gate::withdraw(&self.manager, &rec, &a.who)
                .await
                .map_err(edge::gate)?;
            tracing::info!(id = %id, role = %a.who.role, principal = %a.who.principal, "withdrawn before approval");
            return Ok(Response::new(pb::KillResponse {
                execution: Some(wire::execution(&rec)),
                outcome: pb::KillOutcome::AlreadyGone as i32,
            }));
        }
        let outcome = if rec.status.is_final() {
            KillOutcome::AlreadyGone
        } else {
            launch::kill_launch(&self.manager.dir(&id), self.grace()).await
        };
        tracing::info!(id = %id, ?outcome, role = %a.who.role, principal = %a.who.principal, "kill");
        let rec = match outcome {
            KillOutcome::Killed | KillOutcome::AlreadyGone => {
                self.manager.wait(&id).await.unwrap_or(rec)
            }
            KillOutcome::Unconfirmed => {
                // Signalled but its end was never seen: say so, never "killed".
                self.manager
                    .teardown_failed(&id, "KILL sent through the pidfd; the end was not observed")
                    .await;
                self.manager
                    .ledger
                    .get(&id)
                    .await
                    .map_err(edge::store)?
                    .unwrap_or(rec)
            }
            KillOutcome::NotOwned(_) => self
                .manager
                .ledger
                .get(&id)
                .await
                .map_err(edge::store)?
                .unwrap_or(rec),
        };
        Ok(Response::new(pb::KillResponse {
            execution: Some(wire::execution(&rec)),
            outcome: wire::kill_outcome(&outcome) as i32,
        }))
    }

    async fn get(&self, req: Request<pb::GetRequest>) -> Result<Response<pb::GetResponse>, Status> {
        let a = self.access(&req);
        let r = req.into_inner();
        let rec = self.visible(&r.id, &a).await?;
        let (stdout, stderr) = if r.include_output && rec.status.is_final() {
            wire::outputs(self.manager.finished(&r.id).as_ref())
        } else {
            (None, None)
        };
        Ok(Response::new(pb::GetResponse {
            execution: Some(wire::execution(&rec)),
            stdout,
            stderr,
        }))
    }

    async fn list(
        &self,
        req: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        let r = req.into_inner();
        let limit = page_size(r.page_size)?;
        if !r.page_token.is_empty() && uuid::Uuid::parse_str(&r.page_token).is_err() {
            return Err(edge::invalid(
                "page_token: not a token from a previous page",
            ));
        }
        let status = pb::ExecutionStatus::try_from(r.status)
            .map_err(|_| edge::invalid("status: unknown value"))?;
        let filter = ListFilter {
            principal: (!r.principal.is_empty()).then_some(r.principal),
            status: wire::status_from(status),
            since_ms: (r.since_unix_ms != 0).then_some(r.since_unix_ms),
            until_ms: (r.until_unix_ms != 0).then_some(r.until_unix_ms),
            before_id: (!r.page_token.is_empty()).then_some(r.page_token),
            limit,
            terminals: r.terminals,
            client_ref: (!r.client_ref.is_empty()).then_some(r.client_ref),
        };
        let rows = self
            .manager
            .ledger
            .list(&filter)
            .await
            .map_err(edge::store)?;
        let full = rows.len() == limit as usize;
        let (executions, cut) = within_page_bytes(rows.iter().map(wire::execution));
        let next_page_token = if full || cut {
            executions.last().map(|e| e.id.clone()).unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListResponse {
            executions,
            next_page_token,
        }))
    }

    async fn profiles(
        &self,
        req: Request<pb::ProfilesRequest>,
    ) -> Result<Response<pb::ProfilesResponse>, Status> {
        let probe_access = Access {
            who: Requester {
                role: "execd".into(),
                principal: String::new(),
            },
            admin: true,
            allowed_profiles: None,
            roles: self.access(&req).roles,
        };
        let mut out = Vec::new();
        for (name, profile) in &self.manager.launcher.profiles.0 {
            // Ask the host, not a table: a real probe launch of /bin/true in this profile.
            let probe = LaunchRequest {
                argv: vec!["/bin/true".into()],
                profile: name.clone(),
                timeout_ms: Some(10_000),
                ..Default::default()
            };
            let report = match self.run_to_end(probe, &probe_access).await {
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
