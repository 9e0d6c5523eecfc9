//! Serving and calling gRPC over Unix sockets.
//!
//! Argos routes gRPC paths itself ([`Routes`]) instead of enabling tonic's `router`
//! feature, which would pull axum into every daemon, execd included. In front of the routes
//! sits [`PeerAuth`], the one place a call's caller is decided: kernel credentials →
//! [`crate::peer::authorize`] → a [`Caller`] in the request's extensions, or
//! `PERMISSION_DENIED` and a log line.

use std::convert::Infallible;
use std::future::Future;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::server::UdsConnectInfo;
use tower::util::BoxCloneSyncService;
use tower_service::Service;

use crate::peer::{MethodPolicy, PeerIdentity, PeerTable, authorize};
use crate::principal::{self, Caller, PRINCIPAL_HEADER, PrincipalDecision, REQUEST_ID_HEADER};

type HttpRequest = http::Request<Body>;
type HttpResponse = http::Response<Body>;
type RouteService = BoxCloneSyncService<HttpRequest, HttpResponse, Infallible>;

/// A set of gRPC services dispatched by the service name in the request path.
#[derive(Clone, Default)]
pub struct Routes {
    routes: Arc<Vec<(&'static str, RouteService)>>,
}

impl Routes {
    pub fn new() -> Routes {
        Routes::default()
    }

    /// Adds a tonic-generated service under its `NamedService::NAME`.
    pub fn route<S>(mut self, svc: S) -> Routes
    where
        S: Service<HttpRequest, Response = HttpResponse, Error = Infallible>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        Arc::make_mut(&mut self.routes).push((S::NAME, BoxCloneSyncService::new(svc)));
        self
    }

    /// The names of the services served, in the order added.
    pub fn names(&self) -> Vec<&'static str> {
        self.routes.iter().map(|(n, _)| *n).collect()
    }
}

impl Service<HttpRequest> for Routes {
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<HttpResponse, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: HttpRequest) -> Self::Future {
        let service = req
            .uri()
            .path()
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("");
        match self.routes.iter().find(|(n, _)| *n == service) {
            Some((_, svc)) => {
                let mut svc = svc.clone();
                Box::pin(async move { svc.call(req).await })
            }
            None => {
                let resp =
                    tonic::Status::unimplemented(format!("unknown service {service}")).into_http();
                Box::pin(async move { Ok(resp) })
            }
        }
    }
}

/// Authorizes every call by its connection's peer credentials (see module docs).
#[derive(Clone)]
pub struct PeerAuth<S> {
    inner: S,
    table: Arc<PeerTable>,
    policy: Arc<MethodPolicy>,
}

impl<S> PeerAuth<S> {
    pub fn new(inner: S, table: Arc<PeerTable>, policy: Arc<MethodPolicy>) -> Self {
        PeerAuth {
            inner,
            table,
            policy,
        }
    }
}

impl<S> Service<HttpRequest> for PeerAuth<S>
where
    S: Service<HttpRequest, Response = HttpResponse, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<HttpResponse, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: HttpRequest) -> Self::Future {
        let peer = peer_identity(&req);
        let method = req.uri().path().to_string();
        let roles = match authorize(&self.table, &self.policy, peer.as_ref(), &method) {
            Ok(roles) => roles,
            Err(denied) => {
                let who = peer
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "uid=? gid=? pid=?".into());
                tracing::warn!(target: "argos::peer", %method, peer = %who, reason = %denied, "peer denied");
                let resp = tonic::Status::permission_denied("peer not authorized for this method")
                    .into_http();
                return Box::pin(async move { Ok(resp) });
            }
        };
        let peer = peer.expect("authorized peers have credentials");
        let headers = req.headers();
        let request_id =
            principal::request_id(headers.get(REQUEST_ID_HEADER).map(|v| v.as_bytes()));
        let decision =
            principal::decide(roles, headers.get(PRINCIPAL_HEADER).map(|v| v.as_bytes()));
        match &decision {
            PrincipalDecision::IgnoredNotAllowed => tracing::warn!(
                target: "argos::peer", %method, %peer, %roles, %request_id,
                "principal metadata from a peer that may not assert one: ignored"
            ),
            PrincipalDecision::IgnoredInvalid(why) => tracing::warn!(
                target: "argos::peer", %method, %peer, %request_id, why, "malformed principal metadata: ignored"
            ),
            _ => {}
        }
        tracing::debug!(target: "argos::peer", %method, %peer, %roles, %request_id, "call admitted");
        req.extensions_mut().insert(Caller {
            peer,
            roles,
            principal: decision.principal().cloned(),
            request_id,
        });
        let mut inner = self.inner.clone();
        std::mem::swap(&mut inner, &mut self.inner);
        Box::pin(async move { inner.call(req).await })
    }
}

fn peer_identity(req: &HttpRequest) -> Option<PeerIdentity> {
    let cred = req.extensions().get::<UdsConnectInfo>()?.peer_cred?;
    Some(PeerIdentity {
        uid: cred.uid(),
        gid: cred.gid(),
        pid: cred.pid(),
    })
}

/// Errors preparing or serving a daemon socket.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("creating runtime dir {path}")]
    RuntimeDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "socket directory {path}: {why}; refusing it (another process may have taken the daemon's name)"
    )]
    SocketDir { path: PathBuf, why: String },
    #[error("{path} exists and is not a socket; refusing to remove it")]
    NotASocket { path: PathBuf },
    #[error("{path} is in use by a running process (is the daemon already running?)")]
    InUse { path: PathBuf },
    #[error("{op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("serving {path}")]
    Serve {
        path: PathBuf,
        source: tonic::transport::Error,
    },
}

/// Binds a daemon socket in its own directory (`<runtime_dir>/<daemon>/`): the directory
/// is made if missing (0750, or 0700 without a socket group) and must be owned by this
/// daemon and writable by nobody else — one that is not is refused, not used (another
/// process may have taken the name). Then removes a stale socket file (never a live one,
/// never a non-socket), binds, and sets mode and group explicitly (binding follows the
/// umask).
pub fn bind_unix(
    path: &Path,
    mode: u32,
    group: Option<u32>,
) -> Result<tokio::net::UnixListener, SocketError> {
    let io = |op, source| SocketError::Io {
        op,
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        own_socket_dir(dir, group)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => {
            return Err(SocketError::NotASocket {
                path: path.to_path_buf(),
            });
        }
        Ok(_) => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(SocketError::InUse {
                    path: path.to_path_buf(),
                });
            }
            std::fs::remove_file(path).map_err(|e| io("removing stale socket", e))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("inspecting", e)),
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(|e| io("binding", e))?;
    if let Some(gid) = group {
        set_group(path, gid).map_err(|e| io("setting group of", e))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| io("setting mode of", e))?;
    Ok(listener)
}

/// Gives `path` the group `gid` unless it has it already. An unprivileged daemon whose
/// primary group is the socket group never needs to: it makes no chown call at all,
/// which its unit's system call filter (no `@chown`) would answer with SIGSYS.
fn set_group(path: &Path, gid: u32) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    if std::fs::symlink_metadata(path)?.gid() == gid {
        return Ok(());
    }
    nix::unistd::chown(path, None, Some(nix::unistd::Gid::from_raw(gid)))?;
    Ok(())
}

/// Makes or checks a daemon's socket directory: ours, open to nobody else for writing,
/// searchable by the socket group when there is one.
fn own_socket_dir(dir: &Path, group: Option<u32>) -> Result<(), SocketError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let refuse = |why: String| SocketError::SocketDir {
        path: dir.to_path_buf(),
        why,
    };
    let io = |source| SocketError::RuntimeDir {
        path: dir.to_path_buf(),
        source,
    };
    if let Some(runtime) = dir.parent() {
        std::fs::create_dir_all(runtime).map_err(io)?;
    }
    let mode = if group.is_some() { 0o750 } else { 0o700 };
    match std::fs::DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => {
            if let Some(gid) = group {
                set_group(dir, gid).map_err(io)?;
            }
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).map_err(io)?;
            return Ok(());
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(io)?;
    let me = nix::unistd::geteuid().as_raw();
    if !meta.is_dir() {
        return Err(refuse("not a directory".into()));
    }
    if meta.uid() != me {
        return Err(refuse(format!(
            "owned by uid {}, not this daemon's {me}",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refuse(format!(
            "mode {:o} lets others create names in it (want 750 or 700)",
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Serves `routes` behind [`PeerAuth`] on `listener` until `shutdown` resolves, then gives
/// open calls `grace` to finish, cuts the rest and removes the socket file.
use crate::connect::{CONNECTION_WINDOW, MAX_FRAME, STREAM_WINDOW};

pub async fn serve_unix(
    listener: tokio::net::UnixListener,
    path: &Path,
    routes: Routes,
    table: Arc<PeerTable>,
    policy: Arc<MethodPolicy>,
    shutdown: impl Future<Output = ()> + Send,
    grace: Duration,
) -> Result<(), SocketError> {
    let svc = PeerAuth::new(routes, table, policy);
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tonic::transport::Server::builder()
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME)
        .serve_with_incoming_shutdown(svc, incoming, async move {
            let _ = stop_rx.await;
        });
    tokio::pin!(server);
    let result = tokio::select! {
        r = &mut server => Some(r),
        () = shutdown => None,
    };
    let result = match result {
        Some(r) => r,
        None => {
            let _ = stop_tx.send(());
            match tokio::time::timeout(grace, &mut server).await {
                Ok(r) => r,
                Err(_) => {
                    tracing::warn!(
                        grace_ms = grace.as_millis() as u64,
                        "open calls outlived the grace period; closing them"
                    );
                    Ok(())
                }
            }
        }
    };
    let _ = std::fs::remove_file(path);
    result.map_err(|source| SocketError::Serve {
        path: path.to_path_buf(),
        source,
    })
}

/// SIGTERM/SIGINT handlers, installed when this is created: create it before the socket
/// is bound, so a signal that arrives during start-up is a clean stop, not a kill.
pub struct ShutdownSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    pub fn install() -> std::io::Result<ShutdownSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(ShutdownSignals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Resolves at the first SIGTERM or SIGINT.
    pub async fn recv(mut self) {
        let name = tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "shutting down");
    }
}

/// What went wrong in a call to another daemon, as a caller decides on it: the one
/// reading of gRPC codes (each edge maps the kinds to its own words once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A field of the request is wrong; the message names it.
    InvalidArgument,
    /// No such launch or approval (or not one this caller may see).
    NotFound,
    /// The state does not allow it (already decided, already ended, …).
    Conflict,
    /// It raced another request for the same thing (the same chosen execution id, an
    /// approval being decided): nothing was done; ask again.
    Raced,
    /// This caller's role or principal may not do it.
    PermissionDenied,
    /// A limit was reached (launch uids, pending approvals, message size).
    Exhausted,
    /// execd is not there (not started, restarting) or its socket is not reachable.
    Unavailable,
    /// Output that should exist is gone (past the kept log); the message names the range.
    DataLoss,
    /// The call took too long or was cancelled.
    Cancelled,
    /// Anything else: execd failed, or the answer made no sense.
    Internal,
}

impl ErrorKind {
    /// What a status means (a broken connection, [`broke`], is `Unavailable` too).
    pub fn of(s: &tonic::Status) -> ErrorKind {
        use tonic::Code;
        if broke(s) {
            return ErrorKind::Unavailable;
        }
        match s.code() {
            Code::InvalidArgument | Code::OutOfRange => ErrorKind::InvalidArgument,
            Code::NotFound => ErrorKind::NotFound,
            Code::FailedPrecondition | Code::AlreadyExists => ErrorKind::Conflict,
            Code::Aborted => ErrorKind::Raced,
            Code::PermissionDenied | Code::Unauthenticated => ErrorKind::PermissionDenied,
            Code::ResourceExhausted => ErrorKind::Exhausted,
            Code::Unavailable => ErrorKind::Unavailable,
            Code::DataLoss => ErrorKind::DataLoss,
            Code::DeadlineExceeded | Code::Cancelled => ErrorKind::Cancelled,
            Code::Ok | Code::Unknown | Code::Unimplemented | Code::Internal => ErrorKind::Internal,
        }
    }
}

/// Whether `s` was made here, from the connection breaking under a call (the daemon
/// killed or restarting): a status a daemon sent has no source.
pub fn broke(s: &tonic::Status) -> bool {
    std::error::Error::source(s).is_some()
        && matches!(
            s.code(),
            tonic::Code::Unknown | tonic::Code::Internal | tonic::Code::Unavailable
        )
}

/// Adds principal and request-id metadata to an outgoing request.
pub fn with_principal<T>(
    mut req: tonic::Request<T>,
    principal: Option<&str>,
    request_id: Option<&str>,
) -> tonic::Request<T> {
    if let Some(p) = principal.and_then(|p| p.parse().ok()) {
        req.metadata_mut().insert(PRINCIPAL_HEADER, p);
    }
    if let Some(r) = request_id.and_then(|r| r.parse().ok()) {
        req.metadata_mut().insert(REQUEST_ID_HEADER, r);
    }
    req
}

/// The Argos daemons, each with its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Daemon {
    Execd,
    Mcpd,
    Jobd,
    Gatewayd,
}

impl Daemon {
    /// In start order (the launcher stops them in reverse).
    pub const ALL: [Daemon; 4] = [Daemon::Execd, Daemon::Mcpd, Daemon::Jobd, Daemon::Gatewayd];
    /// Their short names, in the same order.
    pub const NAMES: [&'static str; 4] = [
        Daemon::Execd.name(),
        Daemon::Mcpd.name(),
        Daemon::Jobd.name(),
        Daemon::Gatewayd.name(),
    ];

    /// Short name: names the socket and the state dir.
    pub const fn name(self) -> &'static str {
        match self {
            Daemon::Execd => "execd",
            Daemon::Mcpd => "mcpd",
            Daemon::Jobd => "jobd",
            Daemon::Gatewayd => "gatewayd",
        }
    }

    pub fn from_name(name: &str) -> Option<Daemon> {
        Daemon::ALL.into_iter().find(|d| d.name() == name)
    }
}

/// Calls `argos.common.v1.Daemon/Status` (served on every Argos socket) over `channel`.
pub async fn daemon_status(
    channel: tonic::transport::Channel,
    req: tonic::Request<argos_proto::common::v1::StatusRequest>,
) -> Result<argos_proto::common::v1::DaemonStatus, tonic::Status> {
    argos_proto::common::v1::daemon_client::DaemonClient::new(channel)
        .status(req)
        .await
        .map(tonic::Response::into_inner)
}
