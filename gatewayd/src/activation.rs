//! The HTTP listeners: the sockets systemd passes (socket activation,
//! `argos-gatewayd.socket` for 127.0.0.1 and `argos-gatewayd-ipv6.socket` for [::1]) or,
//! without them, a socket bound to `gateway.listen`. Under socket activation systemd
//! holds the port from boot, while the gateway starts, restarts or is stopped: no other
//! local user can bind it in between and be handed what clients send there (an admin's
//! password at login, `ARGOS_TOKEN` from argosctl — which checks the port's owner too,
//! `ctl/src/listener.rs`). Both loopback addresses are held: a browser asked for
//! `localhost` tries [::1] first, and a port held on 127.0.0.1 alone leaves [::1] to
//! whoever binds it.
//!
//! systemd says sockets are this process's by `LISTEN_PID` (this pid) and `LISTEN_FDS`
//! (how many, from fd 3; see sd_listen_fds(3)). Each must be a listening TCP socket, one
//! on the address `gateway.listen` names (argosctl and the setup link take the address
//! from the config) and any other a loopback address on its port. The gateway forbids
//! `unsafe`; the `listenfd` crate takes the descriptors by number, first thing in `main`
//! while the process has one thread (it also unsets the two variables).

use std::net::SocketAddr;
use std::os::fd::OwnedFd;

/// At most this many sockets are taken (the two loopback addresses).
const MAX_SOCKETS: usize = 2;

/// What is wrong with the sockets systemd passed (the gateway then does not start).
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    #[error(
        "LISTEN_PID names this process but LISTEN_FDS is {0:?}: expected 1 or 2 (the socket units' listening sockets)"
    )]
    Count(String),
    #[error("a socket systemd passed is not a listening TCP socket ({0})")]
    NotListening(String),
    #[error(
        "a socket systemd passed listens on {passed}, gateway.listen says {configured}: \
         make the socket units' ListenStream= and gateway.listen name the same address (or, \
         for the second socket, a loopback address on the same port)"
    )]
    Elsewhere {
        passed: SocketAddr,
        configured: SocketAddr,
    },
    #[error(
        "no socket systemd passed listens on gateway.listen's {0}: make argos-gatewayd.socket's ListenStream= name it"
    )]
    NotConfigured(SocketAddr),
}

/// How many sockets systemd passed this process: none when `LISTEN_PID` is not `pid`
/// (variables meant for another process, or none); an error for a count other than 1
/// or 2.
pub fn passed(
    listen_pid: Option<&str>,
    listen_fds: Option<&str>,
    pid: u32,
) -> Result<usize, ActivationError> {
    if listen_pid.and_then(|p| p.trim().parse::<u32>().ok()) != Some(pid) {
        return Ok(0);
    }
    match listen_fds
        .map(str::trim)
        .and_then(|n| n.parse::<usize>().ok())
    {
        Some(n @ 1..=MAX_SOCKETS) => Ok(n),
        _ => Err(ActivationError::Count(
            listen_fds.unwrap_or("unset").to_string(),
        )),
    }
}

/// The sockets systemd passed this process (none without socket activation), each
/// checked to be a listening TCP socket, with its address. Called first thing in
/// `main`, while the process has one thread.
pub fn take_from_env() -> Result<Vec<(std::net::TcpListener, SocketAddr)>, ActivationError> {
    let pid_var = std::env::var("LISTEN_PID").ok();
    let fds_var = std::env::var("LISTEN_FDS").ok();
    let n = passed(pid_var.as_deref(), fds_var.as_deref(), std::process::id())?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut fds = listenfd::ListenFd::from_env();
    (0..n)
        .map(|i| match fds.take_tcp_listener(i) {
            Ok(Some(l)) => adopt(OwnedFd::from(l)),
            Ok(None) => Err(ActivationError::NotListening(format!(
                "fd {} is not there",
                3 + i
            ))),
            Err(e) => Err(ActivationError::NotListening(e.to_string())),
        })
        .collect()
}

/// A passed socket as a listener, once it is seen to be a listening TCP stream socket;
/// with its address.
pub fn adopt(fd: OwnedFd) -> Result<(std::net::TcpListener, SocketAddr), ActivationError> {
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
    // Not left to a program the gateway might start (it starts none).
    let _ = nix::fcntl::fcntl(
        &fd,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    let listener = std::net::TcpListener::from(fd);
    // Not an IPv4 or IPv6 address (a Unix socket): no TCP listener.
    let passed = listener.local_addr().map_err(|e| not(e.to_string()))?;
    Ok((listener, passed))
}

/// Whether the sockets at `passed` are the ones `configured` asks for: one on it, any
/// other a loopback address on its port (its other-family twin).
pub fn check(passed: &[SocketAddr], configured: SocketAddr) -> Result<(), ActivationError> {
    for &p in passed {
        let twin = p != configured && p.ip().is_loopback() && p.port() == configured.port();
        if p != configured && !twin {
            return Err(ActivationError::Elsewhere {
                passed: p,
                configured,
            });
        }
    }
    if !passed.contains(&configured) {
        return Err(ActivationError::NotConfigured(configured));
    }
    Ok(())
}

/// The gateway's listeners, and where they came from (for the log): the sockets systemd
/// `passed` ([`take_from_env`]) when there are some, else one bound to `listen` now.
pub async fn listeners(
    listen: SocketAddr,
    passed: Vec<(std::net::TcpListener, SocketAddr)>,
) -> anyhow::Result<(Vec<tokio::net::TcpListener>, &'static str)> {
    use anyhow::Context as _;
    if passed.is_empty() {
        let bound = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding HTTP listener {listen}"))?;
        return Ok((vec![bound], "bound"));
    }
    let mut adopted = passed;
    let addrs: Vec<SocketAddr> = adopted.iter().map(|(_, a)| *a).collect();
    check(&addrs, listen)?;
    // gateway.listen's first: the address the log and the setup link name.
    adopted.sort_by_key(|(_, a)| *a != listen);
    let mut listeners = Vec::new();
    for (l, at) in adopted {
        l.set_nonblocking(true)
            .with_context(|| format!("making the passed socket on {at} non-blocking"))?;
        listeners.push(
            tokio::net::TcpListener::from_std(l)
                .with_context(|| format!("serving on the socket systemd passed on {at}"))?,
        );
    }
    Ok((listeners, "passed by systemd (socket activation)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_are_ours_only_when_listen_pid_names_us_and_there_are_one_or_two() {
        assert_eq!(passed(None, None, 42).unwrap(), 0);
        assert_eq!(passed(None, Some("1"), 42).unwrap(), 0);
        // Meant for another process (a parent's, inherited): not ours.
        assert_eq!(passed(Some("41"), Some("1"), 42).unwrap(), 0);
        assert_eq!(passed(Some("x"), Some("1"), 42).unwrap(), 0);
        assert_eq!(passed(Some("42"), Some("1"), 42).unwrap(), 1);
        assert_eq!(passed(Some("42"), Some("2"), 42).unwrap(), 2);
        for wrong in [None, Some("0"), Some("3"), Some("one")] {
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
    fn the_configured_address_and_its_loopback_twin_are_taken_nothing_else() {
        let v4: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        let v6: SocketAddr = "[::1]:7000".parse().unwrap();
        assert!(check(&[v4], v4).is_ok());
        assert!(check(&[v4, v6], v4).is_ok());
        assert!(check(&[v6, v4], v4).is_ok());
        assert!(check(&[v6, v4], v6).is_ok());
        let e = check(&[v6], v4).unwrap_err();
        assert!(matches!(e, ActivationError::NotConfigured(_)), "{e}");
        for elsewhere in [
            "127.0.0.1:7001",
            "[::1]:7001",
            "10.0.0.1:7000",
            "0.0.0.0:7000",
        ] {
            let e = check(&[v4, elsewhere.parse().unwrap()], v4).unwrap_err();
            assert!(
                matches!(e, ActivationError::Elsewhere { .. }),
                "{elsewhere}: {e}"
            );
            assert!(e.to_string().contains("ListenStream="), "{e}");
        }
    }

    #[test]
    fn only_a_listening_tcp_socket_is_adopted() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let (adopted, addr) = adopt(OwnedFd::from(l)).unwrap();
        assert_eq!(addr, at);
        // It serves: a connection is accepted on it.
        let _c = std::net::TcpStream::connect(at).unwrap();
        assert!(adopted.accept().is_ok());

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
            let e = adopt(fd).unwrap_err();
            assert!(matches!(e, ActivationError::NotListening(_)), "{what}: {e}");
        }
    }
}
