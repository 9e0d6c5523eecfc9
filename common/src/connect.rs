//! Calling a daemon: where its socket is, and who must be serving it.
//!
//! Each daemon's socket lives in a directory of its own under the runtime dir
//! (`<runtime_dir>/<daemon>/<daemon>.sock`), owned by the daemon and writable by nobody
//! else, in a runtime dir no unprivileged daemon can write: no other process can bind the
//! name, even while the daemon is down. And before a client sends a byte it asks the
//! kernel who serves the socket (`SO_PEERCRED`) and hangs up unless that uid is one the
//! daemon may run as ([`ServerUids`]): a compromised mcpd that managed to serve
//! `execd.sock` would get no request, no principal, no stdin.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::grpc::Daemon;
use crate::peer::{PeerRole, PeerTable};

/// HTTP/2 flow-control windows of Argos's own sockets (both ends).
pub(crate) const STREAM_WINDOW: u32 = 8 * 1024 * 1024;
pub(crate) const CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;
/// Largest HTTP/2 frame either end accepts (the protocol's default is 16 KiB): a 1 MiB
/// output chunk then crosses in a few frames, not sixty-four.
pub(crate) const MAX_FRAME: u32 = 1024 * 1024;

/// A daemon's socket under `runtime_dir`.
pub fn socket_path(runtime_dir: &Path, daemon: &str) -> PathBuf {
    runtime_dir.join(daemon).join(format!("{daemon}.sock"))
}

/// The uids a client accepts as the server of a socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUids(Vec<u32>);

impl ServerUids {
    /// Exactly these uids.
    pub fn of(uids: impl IntoIterator<Item = u32>) -> ServerUids {
        let mut v: Vec<u32> = uids.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        ServerUids(v)
    }

    /// root, or this process's own uid: who may serve execd's socket (root on a host;
    /// the one user of a one-user development run). A process of one's own uid could do
    /// anything one can anyway.
    pub fn root_or_self() -> ServerUids {
        ServerUids::of([0, nix::unistd::geteuid().as_raw()])
    }

    /// Who may serve `daemon`'s socket by the peer table: root, this process's uid, and
    /// the uids configured for the daemon's role (for execd, which has no role: the
    /// daemons' uids only when one uid plays every role on purpose).
    pub fn for_daemon(peers: &PeerTable, daemon: Daemon) -> ServerUids {
        let role = match daemon {
            Daemon::Execd => None,
            Daemon::Gatewayd => Some(PeerRole::Gateway),
            Daemon::Mcpd => Some(PeerRole::Mcp),
            Daemon::Jobd => Some(PeerRole::Job),
        };
        let daemons = [PeerRole::Gateway, PeerRole::Mcp, PeerRole::Job];
        let configured = peers.uids().filter(|(_, roles)| match role {
            Some(r) => roles.contains(r),
            None => peers.insecure_shared_uid() && daemons.iter().any(|d| roles.contains(*d)),
        });
        ServerUids::of(
            configured
                .map(|(uid, _)| uid)
                .chain(ServerUids::root_or_self().0),
        )
    }

    pub fn contains(&self, uid: u32) -> bool {
        self.0.contains(&uid)
    }
}

impl std::fmt::Display for ServerUids {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let uids: Vec<String> = self.0.iter().map(u32::to_string).collect();
        write!(f, "uid {}", uids.join(" or "))
    }
}

/// Connects to `path` and checks who serves it before anything is sent.
async fn connect_verified(
    path: &Path,
    servers: &ServerUids,
) -> std::io::Result<hyper_util::rt::TokioIo<tokio::net::UnixStream>> {
    let stream = tokio::net::UnixStream::connect(path).await?;
    let uid = stream.peer_cred()?.uid();
    if !servers.contains(uid) {
        tracing::error!(socket = %path.display(), server_uid = uid, expected = %servers,
            "refusing a socket served by an unexpected uid (another process took its name?)");
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is served by uid {uid}, not {servers}: refusing it",
                path.display()
            ),
        ));
    }
    Ok(hyper_util::rt::TokioIo::new(stream))
}

/// A gRPC channel to a daemon's Unix socket, served by one of `servers` (checked at every
/// connect, before the first byte). Connects lazily on first call.
pub fn unix_channel(path: &Path, servers: ServerUids) -> tonic::transport::Channel {
    // The authority is not sent anywhere; h2 needs a valid one, not the socket path.
    let endpoint = tonic::transport::Endpoint::from_static("http://localhost")
        .connect_timeout(Duration::from_secs(2))
        // A local socket has no bandwidth-delay product to guess: large windows let a
        // stream (Follow) run at memory speed instead of waiting on window updates.
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME);
    let path = path.to_path_buf();
    endpoint.connect_with_connector_lazy(tower::service_fn(move |_: http::Uri| {
        let (path, servers) = (path.clone(), servers.clone());
        async move { connect_verified(&path, &servers).await }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{IdSpec, PeersConfig};
    use crate::peer::NameResolver;

    struct NoNames;
    impl NameResolver for NoNames {
        fn uid(&self, _: &str) -> Option<u32> {
            None
        }
        fn gid(&self, _: &str) -> Option<u32> {
            None
        }
    }

    fn peers(shared: bool) -> PeerTable {
        let one = |u| vec![IdSpec::Id(u)];
        let p = PeersConfig {
            gateway_uids: one(if shared { 500 } else { 501 }),
            mcp_uids: one(if shared { 500 } else { 502 }),
            job_uids: one(if shared { 500 } else { 503 }),
            operator_uids: one(0),
            operator_gids: Vec::new(),
            insecure_shared_uid: shared,
        };
        PeerTable::from_config(&p, &NoNames).unwrap()
    }

    #[test]
    fn each_daemon_is_served_by_its_own_uid_or_root() {
        let me = nix::unistd::geteuid().as_raw();
        let t = peers(false);
        let execd = ServerUids::for_daemon(&t, Daemon::Execd);
        assert_eq!(execd, ServerUids::of([0, me]));
        for (d, uid) in [
            (Daemon::Gatewayd, 501),
            (Daemon::Mcpd, 502),
            (Daemon::Jobd, 503),
        ] {
            let s = ServerUids::for_daemon(&t, d);
            assert!(s.contains(uid) && s.contains(0), "{d:?}: {s}");
            for other in [501, 502, 503]
                .into_iter()
                .filter(|u| *u != uid && *u != me)
            {
                assert!(!s.contains(other), "{d:?} must not trust {other}");
            }
        }
        // One user plays every role on purpose: execd runs as that user too.
        assert!(ServerUids::for_daemon(&peers(true), Daemon::Execd).contains(500));
    }

    /// A socket served by an unexpected uid is hung up on before anything is sent.
    #[tokio::test]
    async fn a_socket_served_by_another_uid_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let strangers = ServerUids::of([me.wrapping_add(1)]);
        let e = connect_verified(&path, &strangers).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(
            e.to_string().contains(&format!("served by uid {me}")),
            "{e}"
        );
        assert!(connect_verified(&path, &ServerUids::of([me])).await.is_ok());
        drop(listener);
    }
}
