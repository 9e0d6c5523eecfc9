//! The one client of execd that the other daemons, `argosctl` and the tests use.
//!
//! - [`ExecClient::connect`] finds execd's socket by daemon name under the runtime dir and
//!   connects lazily; [`ExecClient::as_user`] carries the end user a call is for
//!   (`x-argos-principal`: execd believes it only from the gateway and jobd).
//! - Every call answers a typed [`ExecError`] ([`ErrorKind`] + execd's message), never a
//!   raw `tonic::Status`, so callers map execd's refusals to their own edge in one match.
//! - [`Follow`] reads a launch's output by offset and, when the stream breaks because
//!   execd went away (a restart, a kill -9), follows again from the last byte it handed
//!   out: no gap, no repeat, within [`RESUME_WINDOW`].
//!
//! Messages are execd's wire types (`argos_proto::exec::v1`): this crate is transport,
//! not a second domain model.
#![forbid(unsafe_code)]

use std::path::Path;
use std::time::Duration;

use argos_common::connect::{ServerUids, socket_path, unix_channel};
use argos_common::grpc::{Daemon, with_principal};
use argos_proto::exec::v1 as pb;
use bytes::Bytes;
use futures_util::Stream;
use tokio::time::Instant;
use tonic::transport::Channel;

pub use argos_proto::exec::v1;

/// Largest message accepted from execd (a `Run` answer carries capped output).
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// How long a [`Follow`] keeps trying to follow again after execd went away.
pub const RESUME_WINDOW: Duration = Duration::from_secs(30);

pub use argos_common::grpc::ErrorKind;

/// An error from execd or from reaching it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("execd: {message}")]
pub struct ExecError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ExecError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ExecError {
        ExecError {
            kind,
            message: message.into(),
        }
    }

    /// The same error with a field's name in the message replaced: execd's request field
    /// names are not always the caller's (the gateway's API says `risk`, execd
    /// `declared_risk`).
    pub fn rename_field(mut self, from: &str, to: &str) -> ExecError {
        if self.message.starts_with(from) {
            self.message = self.message.replacen(from, to, 1);
        }
        self
    }
}

impl From<tonic::Status> for ExecError {
    fn from(s: tonic::Status) -> ExecError {
        if argos_common::grpc::broke(&s) {
            return ExecError::new(
                ErrorKind::Unavailable,
                format!("the connection to execd broke: {}", s.message()),
            );
        }
        ExecError::new(ErrorKind::of(&s), s.message())
    }
}

/// A client of execd, cheap to clone; each clone may carry its own principal.
#[derive(Clone)]
pub struct ExecClient {
    inner: pb::exec_client::ExecClient<Channel>,
    principal: Option<String>,
}

impl std::fmt::Debug for ExecClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecClient")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl ExecClient {
    /// execd's socket under `runtime_dir`, served by root or by this process's own uid
    /// (checked before the first request); connects on first use.
    pub fn connect(runtime_dir: &Path) -> ExecClient {
        Self::connect_socket(
            &socket_path(runtime_dir, Daemon::Execd.name()),
            ServerUids::root_or_self(),
        )
    }

    /// execd at `socket`, served by one of `servers`; connects on first use.
    pub fn connect_socket(socket: &Path, servers: ServerUids) -> ExecClient {
        Self::from_channel(unix_channel(socket, servers))
    }

    /// execd over an existing channel.
    pub fn from_channel(channel: Channel) -> ExecClient {
        ExecClient {
            inner: pb::exec_client::ExecClient::new(channel).max_decoding_message_size(MAX_MESSAGE),
            principal: None,
        }
    }

    /// The same client, its calls made for `user` (believed only from gateway and job).
    pub fn as_user(&self, user: &str) -> ExecClient {
        ExecClient {
            principal: Some(user.to_string()),
            ..self.clone()
        }
    }

    fn req<T>(&self, msg: T) -> tonic::Request<T> {
        with_principal(tonic::Request::new(msg), self.principal.as_deref(), None)
    }

    fn grpc(&self) -> pb::exec_client::ExecClient<Channel> {
        self.inner.clone()
    }

    /// Runs a command and waits for its end and capped output.
    pub async fn run(&self, r: pb::RunRequest) -> Result<pb::RunResponse, ExecError> {
        Ok(self.grpc().run(self.req(r)).await?.into_inner())
    }

    /// Starts a detached launch (a terminal when `tty` is set); answers at once.
    pub async fn start(&self, r: pb::RunRequest) -> Result<pb::Execution, ExecError> {
        self.grpc()
            .start(self.req(r))
            .await?
            .into_inner()
            .execution
            .ok_or_else(|| ExecError::new(ErrorKind::Internal, "Start answered no execution"))
    }

    /// One launch, with its captured output when asked.
    pub async fn get(&self, id: &str, include_output: bool) -> Result<pb::GetResponse, ExecError> {
        let r = pb::GetRequest {
            id: id.to_string(),
            include_output,
        };
        Ok(self.grpc().get(self.req(r)).await?.into_inner())
    }

    /// A page of the ledger, newest first.
    pub async fn list(&self, r: pb::ListRequest) -> Result<pb::ListResponse, ExecError> {
        Ok(self.grpc().list(self.req(r)).await?.into_inner())
    }

    /// Kills a running launch (verified identity; TERM, grace, KILL).
    pub async fn kill(&self, id: &str) -> Result<pb::KillResponse, ExecError> {
        let r = pb::KillRequest { id: id.to_string() };
        Ok(self.grpc().kill(self.req(r)).await?.into_inner())
    }

    /// Follows a launch's output from these offsets (stdout, stderr) to its end,
    /// following again from where it was when execd goes away meanwhile.
    pub fn follow(&self, id: &str, from: [u64; 2]) -> Follow {
        Follow {
            client: self.clone(),
            id: id.to_string(),
            at: from,
            stream: None,
            broken_since: None,
            done: false,
        }
    }

    /// Attaches to a launch that takes input (a terminal): the first request must be
    /// `Open`. Answers execd's events; the stream ends when the launch does.
    pub async fn attach(
        &self,
        requests: impl Stream<Item = pb::AttachRequest> + Send + 'static,
    ) -> Result<tonic::Streaming<pb::AttachEvent>, ExecError> {
        Ok(self.grpc().attach(self.req(requests)).await?.into_inner())
    }

    /// Registers a stdio MCP server's exact launch (gateway and operator).
    pub async fn register_mcp_server(
        &self,
        r: pb::RegisterMcpServerRequest,
    ) -> Result<pb::McpRegistration, ExecError> {
        Ok(self
            .grpc()
            .register_mcp_server(self.req(r))
            .await?
            .into_inner())
    }

    /// Forgets a stdio MCP server's registration.
    pub async fn forget_mcp_server(&self, server_id: &str) -> Result<(), ExecError> {
        let r = pb::ForgetMcpServerRequest {
            server_id: server_id.to_string(),
        };
        self.grpc().forget_mcp_server(self.req(r)).await?;
        Ok(())
    }

    /// The registered stdio MCP servers.
    pub async fn list_mcp_servers(&self) -> Result<Vec<pb::McpRegistration>, ExecError> {
        Ok(self
            .grpc()
            .list_mcp_servers(self.req(pb::ListMcpServersRequest {}))
            .await?
            .into_inner()
            .servers)
    }

    /// Starts a registered stdio MCP server (its launch must be the registered one);
    /// answers at once: carry its stdio with `attach`.
    pub async fn start_mcp_server(
        &self,
        r: pb::StartMcpServerRequest,
    ) -> Result<pb::Execution, ExecError> {
        self.grpc()
            .start_mcp_server(self.req(r))
            .await?
            .into_inner()
            .execution
            .ok_or_else(|| {
                ExecError::new(ErrorKind::Internal, "StartMcpServer answered no execution")
            })
    }

    /// Every execution's start and end and every approval change, as they happen.
    pub async fn watch(&self) -> Result<tonic::Streaming<pb::WatchEvent>, ExecError> {
        Ok(self
            .grpc()
            .watch(self.req(pb::WatchRequest {}))
            .await?
            .into_inner())
    }

    /// How risky a command is, with the reasons; runs nothing.
    pub async fn classify(
        &self,
        r: pb::ClassifyRequest,
    ) -> Result<pb::ClassifyResponse, ExecError> {
        Ok(self.grpc().classify(self.req(r)).await?.into_inner())
    }

    /// The risk gate: a read-only command starts at once, anything else waits for an
    /// approval of this exact request.
    pub async fn request_run(
        &self,
        r: pb::RequestRunRequest,
    ) -> Result<pb::RequestRunResponse, ExecError> {
        Ok(self.grpc().request_run(self.req(r)).await?.into_inner())
    }

    /// Records a standing approval of one exact request for its owner (the gateway, for
    /// an admin user).
    pub async fn approve_standing(
        &self,
        r: pb::ApproveStandingRequest,
    ) -> Result<pb::StandingApproval, ExecError> {
        Ok(self
            .grpc()
            .approve_standing(self.req(r))
            .await?
            .into_inner())
    }

    /// Revokes a standing approval (the gateway, for an admin user).
    pub async fn revoke_standing(&self, id: &str) -> Result<pb::StandingApproval, ExecError> {
        let r = pb::RevokeStandingRequest { id: id.to_string() };
        Ok(self.grpc().revoke_standing(self.req(r)).await?.into_inner())
    }

    /// One standing approval.
    pub async fn get_standing(&self, id: &str) -> Result<pb::StandingApproval, ExecError> {
        let r = pb::GetStandingRequest { id: id.to_string() };
        Ok(self.grpc().get_standing(self.req(r)).await?.into_inner())
    }

    /// Decides an approval (the gateway, for an admin user).
    pub async fn decide_approval(
        &self,
        r: pb::DecideApprovalRequest,
    ) -> Result<pb::DecideApprovalResponse, ExecError> {
        Ok(self.grpc().decide_approval(self.req(r)).await?.into_inner())
    }

    pub async fn get_approval(&self, id: &str) -> Result<pb::Approval, ExecError> {
        let r = pb::GetApprovalRequest { id: id.to_string() };
        Ok(self.grpc().get_approval(self.req(r)).await?.into_inner())
    }

    pub async fn list_approvals(
        &self,
        r: pb::ListApprovalsRequest,
    ) -> Result<pb::ListApprovalsResponse, ExecError> {
        Ok(self.grpc().list_approvals(self.req(r)).await?.into_inner())
    }

    pub async fn list_audit(
        &self,
        r: pb::ListAuditRequest,
    ) -> Result<pb::ListAuditResponse, ExecError> {
        Ok(self.grpc().list_audit(self.req(r)).await?.into_inner())
    }

    /// Counts for monitoring: executions by status and profile, approvals by state,
    /// terminals running.
    pub async fn stats(&self) -> Result<pb::StatsResponse, ExecError> {
        Ok(self
            .grpc()
            .stats(self.req(pb::StatsRequest {}))
            .await?
            .into_inner())
    }

    /// Verifies execd's audit trail, against `anchor` (the newest the caller holds of it)
    /// when given.
    pub async fn verify_audit(
        &self,
        anchor: Option<pb::AuditAnchor>,
    ) -> Result<pb::VerifyAuditResponse, ExecError> {
        Ok(self
            .grpc()
            .verify_audit(self.req(pb::VerifyAuditRequest { anchor }))
            .await?
            .into_inner())
    }

    /// Exchanges audit heads with execd (the gateway's role).
    pub async fn anchor_audit(
        &self,
        r: pb::AnchorAuditRequest,
    ) -> Result<pb::AnchorAuditResponse, ExecError> {
        Ok(self.grpc().anchor_audit(self.req(r)).await?.into_inner())
    }

    /// Each profile and what it would enforce on this host now.
    pub async fn profiles(&self) -> Result<pb::ProfilesResponse, ExecError> {
        Ok(self
            .grpc()
            .profiles(self.req(pb::ProfilesRequest {}))
            .await?
            .into_inner())
    }
}

/// One item of a launch's output, in order per stream.
#[derive(Debug, Clone)]
pub enum FollowItem {
    /// Bytes of stdout or stderr starting at `offset` in that stream.
    Output {
        stream: pb::OutputStream,
        offset: u64,
        data: Bytes,
    },
    /// The launch ended: its final record. Nothing follows.
    Exit(Box<pb::Execution>),
}

/// A launch's output by offset, followed again from the last byte handed out when the
/// stream breaks because execd went away (see [`RESUME_WINDOW`]). Bytes a resumed stream
/// repeats are dropped; a gap is an error ([`ErrorKind::DataLoss`]), never silent.
#[derive(Debug)]
pub struct Follow {
    client: ExecClient,
    id: String,
    at: [u64; 2],
    stream: Option<tonic::Streaming<pb::FollowEvent>>,
    /// Since when the stream has been broken without a byte since.
    broken_since: Option<Instant>,
    done: bool,
}

impl Follow {
    /// The launch followed.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where the next bytes of (stdout, stderr) start: what a resume would ask for.
    pub fn position(&self) -> [u64; 2] {
        self.at
    }

    /// The next item, or `None` after the exit (or a final error).
    pub async fn next(&mut self) -> Option<Result<FollowItem, ExecError>> {
        while !self.done {
            let next = match self.stream.as_mut() {
                None => match self.open().await {
                    Ok(s) => {
                        self.stream = Some(s);
                        continue;
                    }
                    Err(e) => Err(e),
                },
                Some(s) => match s.message().await {
                    Ok(Some(ev)) => Ok(ev),
                    // Ended without an exit: execd stopped under us.
                    Ok(None) => Err(ExecError::new(
                        ErrorKind::Unavailable,
                        "the output stream ended before the launch did",
                    )),
                    Err(status) => Err(status.into()),
                },
            };
            let event = match next {
                Ok(ev) => ev,
                Err(e) => {
                    self.stream = None;
                    match self.retry(e).await {
                        Ok(()) => continue,
                        Err(e) => return self.fail(e),
                    }
                }
            };
            match event.event {
                Some(pb::follow_event::Event::Chunk(c)) => {
                    let stream = match pb::OutputStream::try_from(c.stream) {
                        Ok(s @ (pb::OutputStream::Stdout | pb::OutputStream::Stderr)) => s,
                        _ => continue,
                    };
                    let i = usize::from(stream == pb::OutputStream::Stderr);
                    let end = c.offset + c.data.len() as u64;
                    if c.offset > self.at[i] {
                        return self.fail(ExecError::new(
                            ErrorKind::DataLoss,
                            format!(
                                "{}: bytes {}..{} are missing",
                                stream.as_str_name(),
                                self.at[i],
                                c.offset
                            ),
                        ));
                    }
                    if end <= self.at[i] {
                        continue; // all of it was handed out before a resume
                    }
                    let skip = (self.at[i] - c.offset) as usize;
                    let data = c.data.slice(skip..);
                    let offset = self.at[i];
                    self.at[i] = end;
                    self.broken_since = None;
                    return Some(Ok(FollowItem::Output {
                        stream,
                        offset,
                        data,
                    }));
                }
                Some(pb::follow_event::Event::Exit(e)) => {
                    self.done = true;
                    self.stream = None;
                    return Some(Ok(FollowItem::Exit(Box::new(e))));
                }
                None => continue,
            }
        }
        None
    }

    async fn open(&self) -> Result<tonic::Streaming<pb::FollowEvent>, ExecError> {
        let r = pb::FollowRequest {
            id: self.id.clone(),
            stdout_offset: self.at[0],
            stderr_offset: self.at[1],
        };
        Ok(self
            .client
            .grpc()
            .follow(self.client.req(r))
            .await?
            .into_inner())
    }

    /// Waits before following again if `e` is execd being away and the window is open;
    /// otherwise `e` is final.
    async fn retry(&mut self, e: ExecError) -> Result<(), ExecError> {
        if e.kind != ErrorKind::Unavailable {
            return Err(e);
        }
        let since = *self.broken_since.get_or_insert_with(Instant::now);
        let waited = since.elapsed();
        if waited >= RESUME_WINDOW {
            return Err(ExecError::new(
                ErrorKind::Unavailable,
                format!(
                    "{} (still after {} s of following again)",
                    e.message,
                    waited.as_secs()
                ),
            ));
        }
        tracing::debug!(id = %self.id, at = ?self.at, error = %e, "following again");
        // 50 ms, doubling, at most 1 s between tries.
        let step = Duration::from_millis(50)
            .saturating_mul(1 << (waited.as_millis() / 200).min(5) as u32)
            .min(Duration::from_secs(1));
        tokio::time::sleep(step).await;
        Ok(())
    }

    fn fail(&mut self, e: ExecError) -> Option<Result<FollowItem, ExecError>> {
        self.done = true;
        self.stream = None;
        Some(Err(e))
    }
}
