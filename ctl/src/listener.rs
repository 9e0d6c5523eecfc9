//! Who listens on the gateway's port, asked of the kernel before argosctl sends it a
//! credential. While no stack runs, or its gateway is stopped, the gateway's loopback port
//! is anyone's to bind: a local user listening on 127.0.0.1:7000 would be handed the
//! admin's `ARGOS_TOKEN`. So before each request to a gateway on a loopback address, the
//! owner of the socket listening there is read from `/proc/net/tcp` and `/proc/net/tcp6`
//! (the `uid` column of the rows in state LISTEN, in this process's network namespace —
//! the one the connection is made in), and must be a uid the gateway may run as: one the
//! stack's config names for the gateway, root (under systemd's socket activation PID 1
//! made the socket), or this user (a one-user stack; a process of one's own uid could read
//! the token from argosctl anyway). Anyone else, or no listener at all, and nothing is
//! sent.
//!
//! A gateway URL that does not lead to this host's loopback (another host, through a
//! tunnel or a TLS proxy) is out of scope: the owner of a remote socket cannot be known
//! here; what vouches for a remote gateway is the transport to it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs as _};

use argos_common::connect::ServerUids;

/// The tables the kernel lists TCP sockets in (IPv6's is absent without IPv6).
const TABLES: [&str; 2] = ["/proc/net/tcp", "/proc/net/tcp6"];

/// The state column's value for LISTEN (`TCP_LISTEN`, 10).
const LISTEN: &str = "0A";

/// A listening TCP socket: its local address and the uid that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    pub addr: SocketAddr,
    pub uid: u32,
}

/// Why a credential was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no socket listens on port {port} ({addrs}): the gateway is not running there")]
    NoListener { port: u16, addrs: String },
    #[error(
        "port {port} ({addr}) is listened on by uid {uid}, not by the gateway ({expected}: \
         its configured uids, root or yours): another user may have taken the gateway's port"
    )]
    Stranger {
        port: u16,
        addr: SocketAddr,
        uid: u32,
        expected: String,
    },
    #[error("reading {table} to see who listens on port {port}: {error}")]
    Unreadable {
        table: &'static str,
        port: u16,
        error: String,
    },
}

/// The LISTEN rows of a `/proc/net/tcp` or `/proc/net/tcp6` table (the header and any
/// row that does not read are skipped).
pub fn parse_table(text: &str) -> Vec<Listener> {
    text.lines().skip(1).filter_map(parse_row).collect()
}

/// One row: `sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …`.
fn parse_row(line: &str) -> Option<Listener> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if *fields.get(3)? != LISTEN {
        return None;
    }
    Some(Listener {
        addr: parse_addr(fields.get(1)?)?,
        uid: fields.get(7)?.parse().ok()?,
    })
}

/// `ADDR:PORT` as the kernel prints it: the address as 8 (IPv4) or 32 (IPv6) hex digits,
/// each 32-bit word in this machine's byte order, then the port in hex.
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let hex = ip.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(hex, 16).ok()?.to_ne_bytes())
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, w) in bytes.chunks_exact_mut(4).enumerate() {
                w.copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// An IPv4 address written as IPv6 (`::ffff:127.0.0.1`) as the IPv4 one it is.
fn canonical(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// Whether a socket listening on `on` may be given a connection made to `to`: its own
/// address, or the wildcard of its family — and an IPv6 wildcard takes IPv4 too, unless
/// it is IPv6-only, which the tables do not say (so it is counted).
fn takes(on: SocketAddr, to: SocketAddr) -> bool {
    let (on, to) = (canonical(on), canonical(to));
    on.port() == to.port()
        && (on.ip() == to.ip()
            || match (on.ip(), to.ip()) {
                (IpAddr::V4(a), IpAddr::V4(_)) => a.is_unspecified(),
                (IpAddr::V6(a), _) => a.is_unspecified(),
                (IpAddr::V4(_), IpAddr::V6(_)) => false,
            })
}

/// The decision: every socket that could be given a connection to one of `targets` (all
/// on one port) is listened on by one of `expected`, and there is at least one.
pub fn decide(
    targets: &[SocketAddr],
    listeners: &[Listener],
    expected: &ServerUids,
) -> Result<(), Refusal> {
    let port = targets.first().map_or(0, SocketAddr::port);
    let mut any = false;
    for l in listeners {
        if !targets.iter().any(|t| takes(l.addr, *t)) {
            continue;
        }
        if !expected.contains(l.uid) {
            return Err(Refusal::Stranger {
                port,
                addr: l.addr,
                uid: l.uid,
                expected: expected.to_string(),
            });
        }
        any = true;
    }
    if any {
        Ok(())
    } else {
        let addrs: Vec<String> = targets.iter().map(ToString::to_string).collect();
        Err(Refusal::NoListener {
            port,
            addrs: addrs.join(", "),
        })
    }
}

/// The addresses on this host's loopback a gateway URL leads to; `None` when it leads to
/// none (another host: out of the owner check's scope, see the module's docs).
pub fn loopback_targets(url: &str) -> anyhow::Result<Option<Vec<SocketAddr>>> {
    use anyhow::Context as _;
    let uri: ureq::http::Uri = url
        .parse()
        .with_context(|| format!("{url:?} is not a URL"))?;
    let host = uri
        .host()
        .with_context(|| format!("{url:?} names no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    // As the request will: an address as it is, a name through the resolver.
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("resolving {host} (the gateway's host)"))?
        .map(canonical)
        .collect();
    let local: Vec<SocketAddr> = addrs.into_iter().filter(|a| a.ip().is_loopback()).collect();
    Ok((!local.is_empty()).then_some(local))
}

/// Every listening TCP socket in this network namespace.
fn listening(port: u16) -> Result<Vec<Listener>, Refusal> {
    let mut all = Vec::new();
    for table in TABLES {
        match std::fs::read_to_string(table) {
            Ok(text) => all.extend(parse_table(&text)),
            // A kernel without IPv6 has no tcp6 table, and no IPv6 listener.
            Err(e) if table == TABLES[1] && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Refusal::Unreadable {
                    table,
                    port,
                    error: e.to_string(),
                });
            }
        }
    }
    Ok(all)
}

/// Refuses, before anything is sent, a gateway on this host's loopback whose port is
/// listened on by anyone but `expected` (or by no one). A gateway elsewhere passes
/// unchecked (out of scope, see the module's docs).
pub fn check(targets: Option<&[SocketAddr]>, expected: &ServerUids) -> Result<(), Refusal> {
    let Some(targets) = targets else {
        return Ok(());
    };
    let port = targets.first().map_or(0, SocketAddr::port);
    decide(targets, &listening(port)?, expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table row as the kernel writes it, for this machine's byte order.
    fn row(local: SocketAddr, state: &str, uid: u32) -> String {
        let ip = match local.ip() {
            IpAddr::V4(v4) => format!("{:08X}", u32::from_ne_bytes(v4.octets())),
            IpAddr::V6(v6) => v6
                .octets()
                .chunks(4)
                .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
                .collect(),
        };
        format!(
            "   0: {ip}:{:04X} 00000000:0000 {state} 00000000:00000000 00:00000000 00000000 {uid:>5}        0 123456 1 0000000000000000 100 0 0 10 0",
            local.port()
        )
    }

    fn table(rows: &[String]) -> String {
        let mut t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n".to_string();
        for r in rows {
            t.push_str(r);
            t.push('\n');
        }
        t
    }

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_tables_are_read_as_the_kernel_writes_them() {
        let t = table(&[
            row(a("127.0.0.1:7000"), "0A", 64201),
            // An established connection on the same port is no listener.
            row(a("127.0.0.1:7000"), "01", 65534),
            row(a("0.0.0.0:22"), "0A", 0),
            "   9: garbage".to_string(),
        ]);
        assert_eq!(
            parse_table(&t),
            [
                Listener {
                    addr: a("127.0.0.1:7000"),
                    uid: 64201
                },
                Listener {
                    addr: a("0.0.0.0:22"),
                    uid: 0
                }
            ]
        );
        let t6 = table(&[
            row(a("[::1]:7000"), "0A", 1000),
            row(a("[::]:8080"), "0A", 33),
            row(a("[::ffff:127.0.0.1]:9000"), "0A", 7),
        ]);
        let got = parse_table(&t6);
        assert_eq!(got.len(), 3);
        assert_eq!((got[0].addr, got[0].uid), (a("[::1]:7000"), 1000));
        assert_eq!(got[1].addr, a("[::]:8080"));
        assert_eq!(got[2].addr, a("[::ffff:127.0.0.1]:9000"));
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn a_row_copied_from_a_little_endian_kernel_reads() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
                 1: 0100007F:1B58 00000000:0000 0A 00000000:00000000 00:00000000 00000000 64201        0 94531 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(
            parse_table(t),
            [Listener {
                addr: a("127.0.0.1:7000"),
                uid: 64201
            }]
        );
        let t6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
                  0: 00000000000000000000000001000000:1B58 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(parse_table(t6)[0].addr, a("[::1]:7000"));
    }

    fn l(addr: &str, uid: u32) -> Listener {
        Listener { addr: a(addr), uid }
    }

    #[test]
    fn only_the_gateways_uids_root_or_ours_may_listen_where_the_token_goes() {
        let expected = ServerUids::of([0, 1000, 64201]);
        let v4 = [a("127.0.0.1:7000")];
        for ok in [
            l("127.0.0.1:7000", 64201),
            l("127.0.0.1:7000", 0),
            l("127.0.0.1:7000", 1000),
            l("0.0.0.0:7000", 0),
            l("[::]:7000", 64201),
        ] {
            assert_eq!(decide(&v4, &[ok], &expected), Ok(()), "{ok:?}");
        }
        // Another user on the port: refused, naming the port, the uid and whom we expect.
        let e = decide(&v4, &[l("127.0.0.1:7000", 65534)], &expected).unwrap_err();
        assert!(matches!(e, Refusal::Stranger { uid: 65534, .. }), "{e:?}");
        let said = e.to_string();
        for want in ["port 7000", "uid 65534", "uid 0 or 1000 or 64201"] {
            assert!(said.contains(want), "{want}: {said}");
        }
        // Or on a wildcard that may be given the connection, beside the gateway.
        for stranger in [
            l("0.0.0.0:7000", 65534),
            l("[::]:7000", 65534),
            l("[::ffff:127.0.0.1]:7000", 65534),
        ] {
            let e = decide(&v4, &[l("127.0.0.1:7000", 0), stranger], &expected);
            assert!(matches!(e, Err(Refusal::Stranger { .. })), "{stranger:?}");
        }
        // Nobody: refused too (someone could be in the next moment).
        let e = decide(&v4, &[], &expected).unwrap_err();
        assert!(matches!(e, Refusal::NoListener { port: 7000, .. }), "{e:?}");
        assert!(e.to_string().contains("port 7000"), "{e}");
        // Other ports and other addresses do not count.
        let others = [
            l("127.0.0.1:7001", 65534),
            l("127.0.0.2:7000", 65534),
            l("[::1]:7000", 65534),
        ];
        assert!(matches!(
            decide(&v4, &others, &expected),
            Err(Refusal::NoListener { .. })
        ));
        // A URL that resolves to both loopbacks: a stranger on either is refused, one
        // gateway on either is enough.
        let both = [a("127.0.0.1:7000"), a("[::1]:7000")];
        assert_eq!(
            decide(&both, &[l("127.0.0.1:7000", 64201)], &expected),
            Ok(())
        );
        assert!(
            decide(
                &both,
                &[l("127.0.0.1:7000", 64201), l("[::1]:7000", 65534)],
                &expected
            )
            .is_err()
        );
        // An IPv4 wildcard is never given an IPv6 connection.
        assert!(matches!(
            decide(&[a("[::1]:7000")], &[l("0.0.0.0:7000", 65534)], &expected),
            Err(Refusal::NoListener { .. })
        ));
    }

    #[test]
    fn only_a_url_on_this_hosts_loopback_is_checked() {
        let t = |u: &str| loopback_targets(u).unwrap();
        assert_eq!(t("http://127.0.0.1:7000"), Some(vec![a("127.0.0.1:7000")]));
        assert_eq!(t("http://127.0.0.1:7000/"), Some(vec![a("127.0.0.1:7000")]));
        assert_eq!(t("http://127.1.2.3"), Some(vec![a("127.1.2.3:80")]));
        assert_eq!(t("http://[::1]:7100"), Some(vec![a("[::1]:7100")]));
        assert_eq!(
            t("http://[::ffff:127.0.0.1]:7000"),
            Some(vec![a("127.0.0.1:7000")])
        );
        let local = t("http://localhost:7000").expect("localhost is loopback");
        assert!(
            local
                .iter()
                .all(|x| x.port() == 7000 && x.ip().is_loopback())
        );
        // Another host: out of scope.
        assert_eq!(t("http://192.0.2.10:7000"), None);
        assert_eq!(t("https://[2001:db8::1]"), None);
        assert!(loopback_targets("not a url at all").is_err());
    }

    #[test]
    fn a_gateway_elsewhere_is_not_checked_and_this_hosts_tables_read() {
        let expected = ServerUids::root_or_self();
        assert_eq!(check(None, &expected), Ok(()));
        // The real tables parse (whatever listens here).
        let before = listening(1).unwrap();
        let me = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = me.local_addr().unwrap();
        let again = listening(1).unwrap();
        assert!(
            again
                .iter()
                .any(|x| x.addr == addr && x.uid == nix::unistd::geteuid().as_raw()),
            "{addr} not among {again:?} (before: {} listeners)",
            before.len()
        );
        assert_eq!(check(Some(&[addr][..]), &expected), Ok(()));
        let strangers = ServerUids::of([4_000_000_000]);
        assert!(matches!(
            check(Some(&[addr][..]), &strangers),
            Err(Refusal::Stranger { .. })
        ));
    }
}
