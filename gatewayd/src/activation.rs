//! The HTTP listener: the socket systemd passes (socket activation, `argos-gatewayd.socket`)
//! or, without one, a socket bound to `gateway.listen`. Under socket activation systemd
//! holds the port from boot, while the gateway starts, restarts or is stopped: no other
//! local user can bind it in between and be handed what clients send there (an admin's
//! password at login, `ARGOS_TOKEN` from argosctl — which checks the port's owner too,
//! `ctl/src/listener.rs`).
//!
//! systemd says a socket is this process's by `LISTEN_PID` (this pid) and `LISTEN_FDS`
//! (how many, from fd 3; see sd_listen_fds(3)). The gateway forbids `unsafe`, and taking
//! fd 3 by number is unsafe (`FromRawFd`), so the unit also passes the socket as standard
//! input (`StandardInput=socket`, for one socket), which std hands out safely; it must be
//! a listening TCP socket on the address `gateway.listen` names (argosctl and the setup
//! link take the address from the config).

use std::net::SocketAddr;
use std::os::fd::{AsFd as _, OwnedFd};

/// What is wrong with the socket systemd passed (the gateway then does not start).
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    #[error("LISTEN_PID names this process but LISTEN_FDS is {0:?}: expected 1 (one socket)")]
    Count(String),
    #[error(
        "systemd passed a socket but standard input is not a listening TCP socket ({0}): \
         the unit needs StandardInput=socket"
    )]
    NotListening(String),
    #[error(
        "the socket systemd passed listens on {passed}, gateway.listen says {configured}: \
         make argos-gatewayd.socket's ListenStream= and gateway.listen name the same address"
    )]
    Elsewhere {
        passed: SocketAddr,
        configured: SocketAddr,
    },
}

/// Whether systemd passed this process a socket: `LISTEN_PID` is `pid` and `LISTEN_FDS`
/// is 1. Variables meant for another process (another pid, or none) are no socket; a
/// count other than one is an error (the gateway takes exactly one).
pub fn passed(
    listen_pid: Option<&str>,
    listen_fds: Option<&str>,
    pid: u32,
) -> Result<bool, ActivationError> {
    if listen_pid.and_then(|p| p.trim().parse::<u32>().ok()) != Some(pid) {
        return Ok(false);
    }
    match listen_fds.map(str::trim) {
        Some("1") => Ok(true),
        other => Err(ActivationError::Count(other.unwrap_or("unset").to_string())),
    }
}

/// The passed socket as a listener, once it is seen to be a listening TCP stream socket
/// on `configured`.
pub fn adopt(
    fd: OwnedFd,
    configured: SocketAddr,
) -> Result<std::net::TcpListener, ActivationError> {
    use nix::sys::socket::{SockType, getsockopt, sockopt};
    let not = ActivationError::NotListening;
    match getsockopt(&fd, sockopt::SockType) {
        Ok(SockType::Stream) => {}
        Ok(other) => return Err(not(format!("a {other:?} socket"))),
        Err(e) => return Err(not(e.to_string())),
    }
    match getsockopt(&fd, sockopt::AcceptConn) {
        Ok(true) => {}
        Ok(false) => return Err(not("not listening".into())),
        Err(e) => return Err(not(e.to_string())),
    }
    let listener = std::net::TcpListener::from(fd);
    // Not an IPv4 or IPv6 address (a Unix socket): no TCP listener.
    let passed = listener.local_addr().map_err(|e| not(e.to_string()))?;
    if passed != configured {
        return Err(ActivationError::Elsewhere { passed, configured });
    }
    Ok(listener)
}

/// The gateway's listener, and where it came from (for the log): systemd's socket when
/// one was passed, else one bound to `listen` now.
pub async fn listener(
    listen: SocketAddr,
) -> anyhow::Result<(tokio::net::TcpListener, &'static str)> {
    use anyhow::Context as _;
    let pid_var = std::env::var("LISTEN_PID").ok();
    let fds_var = std::env::var("LISTEN_FDS").ok();
    // systemd sets LISTEN_PID and LISTEN_FDS for sockets passed from fd 3 on; one given as
    // standard input (`StandardInput=socket`) it may pass without them, so a listening
    // socket on standard input is taken as passed too (nothing else puts one there).
    let on_stdin = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .is_some_and(|fd| {
            nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::AcceptConn)
                .unwrap_or(false)
        });
    if !on_stdin && !passed(pid_var.as_deref(), fds_var.as_deref(), std::process::id())? {
        let bound = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding HTTP listener {listen}"))?;
        return Ok((bound, "bound"));
    }
    let fd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .context("taking the socket systemd passed on standard input")?;
    let std_listener = adopt(fd, listen)?;
    std_listener
        .set_nonblocking(true)
        .context("making the passed socket non-blocking")?;
    let listener = tokio::net::TcpListener::from_std(std_listener)
        .context("serving on the socket systemd passed")?;
    Ok((listener, "passed by systemd (socket activation)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_is_ours_only_when_listen_pid_names_us_and_there_is_one() {
        assert!(!passed(None, None, 42).unwrap());
        assert!(!passed(None, Some("1"), 42).unwrap());
        // Meant for another process (a parent's, inherited): not ours.
        assert!(!passed(Some("41"), Some("1"), 42).unwrap());
        assert!(!passed(Some("x"), Some("1"), 42).unwrap());
        assert!(passed(Some("42"), Some("1"), 42).unwrap());
        for wrong in [None, Some("0"), Some("2"), Some("one")] {
            assert!(
                matches!(
                    passed(Some("42"), wrong, 42),
                    Err(ActivationError::Count(_))
                ),
                "{wrong:?}"
            );
        }
    }

    #[test]
    fn only_a_listening_tcp_socket_on_the_configured_address_is_adopted() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let adopted = adopt(OwnedFd::from(l), at).unwrap();
        assert_eq!(adopted.local_addr().unwrap(), at);
        // It serves: a connection is accepted on it.
        let _c = std::net::TcpStream::connect(at).unwrap();
        assert!(adopted.accept().is_ok());

        // Another address than the config's.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let elsewhere: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let e = adopt(OwnedFd::from(l), elsewhere).unwrap_err();
        assert!(matches!(e, ActivationError::Elsewhere { .. }), "{e}");
        assert!(e.to_string().contains("ListenStream="), "{e}");

        // A connected stream, a datagram socket, a Unix listener, a pipe: refused.
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = std::net::TcpStream::connect(server.local_addr().unwrap()).unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let name = {
            use std::os::linux::net::SocketAddrExt as _;
            let n = format!("argos-test-activation-{}", std::process::id());
            std::os::unix::net::SocketAddr::from_abstract_name(n).unwrap()
        };
        let unix = std::os::unix::net::UnixListener::bind_addr(&name).unwrap();
        let (pipe, _w) = nix::unistd::pipe().unwrap();
        for (what, fd) in [
            ("stream", OwnedFd::from(stream)),
            ("udp", OwnedFd::from(udp)),
            ("unix", OwnedFd::from(unix)),
            ("pipe", pipe),
        ] {
            let e = adopt(fd, at).unwrap_err();
            assert!(matches!(e, ActivationError::NotListening(_)), "{what}: {e}");
        }
    }
}
