//! Which addresses an outbound connection may reach (an upstream MCP server, an agent's
//! `http_get`, a job's webhook). Every range of IANA's IPv4 and IPv6 Special-Purpose
//! Address Registries is a row of [`V4`] or [`V6`], with what it is, where it is defined,
//! and who may reach it ([`Reach`]):
//!
//! - `Never`: cloud metadata endpoints, and every range that names no host an admin could
//!   mean (unspecified, broadcast, multicast, reserved, anycast services, discard and dummy
//!   prefixes, identifiers that are not locators) or hides where it leads (Teredo, 6to4, a
//!   local-use NAT64 prefix, the IPv4-compatible and SIIT IPv4-translated forms);
//! - `Local`: loopback, private, shared, link-local, benchmarking and documentation
//!   ranges — refused unless the destination is `local`, marked so by an admin (an MCP
//!   server marked local, a host on `gateway.http_get_allow` or `jobs.deliver_allow`);
//! - `AsIpv4`: IPv6 that reaches the IPv4 address in its last 32 bits (IPv4-mapped,
//!   NAT64's well-known prefix), judged as that IPv4 address.
//!
//! The most specific row holding an address decides (a metadata address inside a
//! link-local range is never reached). An IPv4 address no row holds is allowed; an IPv6
//! one only inside global unicast (`2000::/3`), the rest being unallocated.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Who may reach a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// No one.
    Never,
    /// Only a destination an admin marked local.
    Local,
    /// Judged as the IPv4 address in the last 32 bits (IPv6 rows only).
    AsIpv4,
}

/// A network: its first address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    V4(Ipv4Addr, u8),
    V6(Ipv6Addr, u8),
}

impl Net {
    /// Whether `ip` is inside this network.
    pub fn contains(self, ip: IpAddr) -> bool {
        match (self, ip) {
            (Net::V4(net, len), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                a.to_bits() & mask == net.to_bits()
            }
            (Net::V6(net, len), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
                a.to_bits() & mask == net.to_bits()
            }
            _ => false,
        }
    }

    /// The prefix length.
    pub fn prefix_len(self) -> u8 {
        match self {
            Net::V4(_, len) | Net::V6(_, len) => len,
        }
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Net::V4(a, len) => write!(f, "{a}/{len}"),
            Net::V6(a, len) => write!(f, "{a}/{len}"),
        }
    }
}

/// One special-purpose range.
#[derive(Debug, PartialEq, Eq)]
pub struct Range {
    pub net: Net,
    /// What it is, as its registry names it.
    pub name: &'static str,
    /// Where it is defined (an RFC, or the cloud that answers there).
    pub source: &'static str,
    pub reach: Reach,
}

const fn v4(a: [u8; 4], len: u8, reach: Reach, name: &'static str, source: &'static str) -> Range {
    Range {
        net: Net::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]), len),
        name,
        source,
        reach,
    }
}

const fn v6(s: [u16; 8], len: u8, reach: Reach, name: &'static str, source: &'static str) -> Range {
    Range {
        net: Net::V6(
            Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
            len,
        ),
        name,
        source,
        reach,
    }
}

use Reach::{AsIpv4, Local, Never};

/// IANA's IPv4 Special-Purpose Address Registry, multicast, and the cloud metadata
/// addresses.
#[rustfmt::skip]
pub const V4: &[Range] = &[
    v4([0, 0, 0, 0], 8, Never, "\"this network\"", "RFC 791"),
    v4([0, 0, 0, 0], 32, Never, "\"this host on this network\"", "RFC 1122"),
    v4([10, 0, 0, 0], 8, Local, "private-use", "RFC 1918"),
    v4([100, 64, 0, 0], 10, Local, "shared address space", "RFC 6598"),
    v4([127, 0, 0, 0], 8, Local, "loopback", "RFC 1122"),
    v4([169, 254, 0, 0], 16, Local, "link-local", "RFC 3927"),
    v4([172, 16, 0, 0], 12, Local, "private-use", "RFC 1918"),
    v4([192, 0, 0, 0], 24, Never, "IETF protocol assignments", "RFC 6890"),
    // DS-Lite's B4 and AFTR: the host's own network.
    v4([192, 0, 0, 0], 29, Local, "IPv4 service continuity prefix", "RFC 7335"),
    v4([192, 0, 0, 8], 32, Never, "IPv4 dummy address", "RFC 7600"),
    v4([192, 0, 0, 9], 32, Never, "Port Control Protocol anycast", "RFC 7723"),
    v4([192, 0, 0, 10], 32, Never, "Traversal Using Relays around NAT anycast", "RFC 8155"),
    v4([192, 0, 0, 170], 32, Never, "NAT64/DNS64 discovery", "RFC 8880"),
    v4([192, 0, 0, 171], 32, Never, "NAT64/DNS64 discovery", "RFC 8880"),
    v4([192, 0, 2, 0], 24, Local, "documentation (TEST-NET-1)", "RFC 5737"),
    v4([192, 31, 196, 0], 24, Never, "AS112-v4", "RFC 7535"),
    v4([192, 52, 193, 0], 24, Never, "AMT", "RFC 7450"),
    v4([192, 88, 99, 0], 24, Never, "deprecated 6to4 relay anycast", "RFC 7526"),
    v4([192, 168, 0, 0], 16, Local, "private-use", "RFC 1918"),
    v4([192, 175, 48, 0], 24, Never, "direct delegation AS112 service", "RFC 7534"),
    v4([198, 18, 0, 0], 15, Local, "benchmarking", "RFC 2544"),
    v4([198, 51, 100, 0], 24, Local, "documentation (TEST-NET-2)", "RFC 5737"),
    v4([203, 0, 113, 0], 24, Local, "documentation (TEST-NET-3)", "RFC 5737"),
    v4([224, 0, 0, 0], 4, Never, "multicast", "RFC 5771"),
    v4([240, 0, 0, 0], 4, Never, "reserved", "RFC 1112"),
    v4([255, 255, 255, 255], 32, Never, "limited broadcast", "RFC 919"),
    // Metadata services: AWS, GCP, Azure, OpenStack; AWS ECS task metadata; EKS Pod
    // Identity; Alibaba; Azure's WireServer (a public address).
    v4([169, 254, 169, 254], 32, Never, "a cloud metadata address", "AWS, GCP, Azure, OpenStack"),
    v4([169, 254, 170, 2], 32, Never, "a cloud metadata address", "AWS ECS"),
    v4([169, 254, 170, 23], 32, Never, "a cloud metadata address", "AWS EKS Pod Identity"),
    v4([100, 100, 100, 200], 32, Never, "a cloud metadata address", "Alibaba Cloud"),
    v4([168, 63, 129, 16], 32, Never, "a cloud metadata address", "Azure WireServer"),
];

/// IANA's IPv6 Special-Purpose Address Registry, multicast, site-local, the two forms of
/// IPv4 inside IPv6 it does not list, and the cloud metadata addresses.
#[rustfmt::skip]
pub const V6: &[Range] = &[
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128, Never, "unspecified", "RFC 4291"),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, Local, "loopback", "RFC 4291"),
    // Deprecated; some stacks still route it to the IPv4 address.
    v6([0, 0, 0, 0, 0, 0, 0, 0], 96, Never, "IPv4-compatible (deprecated)", "RFC 4291"),
    v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, AsIpv4, "IPv4-mapped", "RFC 4291"),
    // SIIT's form: a translator may carry it to the IPv4 address.
    v6([0, 0, 0, 0, 0xffff, 0, 0, 0], 96, Never, "IPv4-translated (SIIT)", "RFC 2765"),
    v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, AsIpv4, "IPv4-IPv6 translation (NAT64)", "RFC 6052"),
    // Where the IPv4 address sits depends on the network's prefix length: not judged.
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, Never, "local-use IPv4/IPv6 translation", "RFC 8215"),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, Never, "discard-only", "RFC 6666"),
    v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64, Never, "dummy IPv6 prefix", "RFC 9780"),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, Never, "IETF protocol assignments", "RFC 2928"),
    // Tunnels to an address it hides (obfuscated).
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, Never, "Teredo", "RFC 4380"),
    v6([0x2001, 1, 0, 0, 0, 0, 0, 1], 128, Never, "Port Control Protocol anycast", "RFC 7723"),
    v6([0x2001, 1, 0, 0, 0, 0, 0, 2], 128, Never, "Traversal Using Relays around NAT anycast", "RFC 8155"),
    v6([0x2001, 1, 0, 0, 0, 0, 0, 3], 128, Never, "DNS-SD service registration protocol anycast", "RFC 9665"),
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, Local, "benchmarking", "RFC 5180"),
    v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32, Never, "AMT", "RFC 7450"),
    v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48, Never, "AS112-v6", "RFC 7535"),
    v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28, Never, "deprecated ORCHID", "RFC 4843"),
    v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, Never, "ORCHIDv2", "RFC 7343"),
    v6([0x2001, 0x30, 0, 0, 0, 0, 0, 0], 28, Never, "drone remote ID protocol entity tags", "RFC 9374"),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, Local, "documentation", "RFC 3849"),
    // Relayed to the IPv4 address it embeds by whichever relay is nearest.
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, Never, "6to4", "RFC 3056"),
    v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0], 48, Never, "direct delegation AS112 service", "RFC 7534"),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, Local, "documentation", "RFC 9637"),
    v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, Never, "segment routing (SRv6) SIDs", "RFC 9602"),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, Local, "unique-local", "RFC 4193"),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, Local, "link-local unicast", "RFC 4291"),
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, Local, "site-local (deprecated)", "RFC 3879"),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, Never, "multicast", "RFC 4291"),
    // AWS's instance metadata and EKS Pod Identity over IPv6.
    v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254], 128, Never, "a cloud metadata address", "AWS"),
    v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23], 128, Never, "a cloud metadata address", "AWS EKS Pod Identity"),
];

/// IPv6 outside global unicast: unallocated, never reached.
static NOT_GLOBAL_UNICAST: Range = v6(
    [0x2000, 0, 0, 0, 0, 0, 0, 0],
    3,
    Never,
    "outside global unicast",
    "RFC 4291",
);

/// Why an address is refused: the range that decided, and the IPv6 range carrying it
/// when an IPv4 address inside IPv6 was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub range: &'static Range,
    pub carried_in: Option<&'static Range>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.range;
        write!(f, "{} ({}, {})", r.name, r.net, r.source)?;
        if let Some(c) = self.carried_in {
            write!(f, ", carried in {} ({}, {})", c.name, c.net, c.source)?;
        }
        Ok(())
    }
}

/// The most specific range holding `ip`, if any.
pub fn range_of(ip: IpAddr) -> Option<&'static Range> {
    let rows = match ip {
        IpAddr::V4(_) => V4,
        IpAddr::V6(_) => V6,
    };
    rows.iter()
        .filter(|r| r.net.contains(ip))
        .max_by_key(|r| r.net.prefix_len())
}

/// Why an address is refused (`None`: allowed). `local`: an admin marked the destination
/// local, which lifts the refusal of `Local` ranges and of nothing else.
pub fn refused(ip: IpAddr, local: bool) -> Option<Refusal> {
    let refusal = |range: &'static Range| {
        Some(Refusal {
            range,
            carried_in: None,
        })
    };
    let Some(range) = range_of(ip) else {
        return match ip {
            IpAddr::V6(_) if !NOT_GLOBAL_UNICAST.net.contains(ip) => refusal(&NOT_GLOBAL_UNICAST),
            _ => None,
        };
    };
    match (range.reach, ip) {
        (Reach::Local, _) if local => None,
        (Reach::AsIpv4, IpAddr::V6(v6)) => {
            let inner = Ipv4Addr::from_bits(v6.to_bits() as u32);
            refused(IpAddr::V4(inner), local).map(|r| Refusal {
                carried_in: Some(range),
                ..r
            })
        }
        _ => refusal(range),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// A network's first and last addresses.
    fn ends(net: Net) -> [IpAddr; 2] {
        match net {
            Net::V4(a, len) => {
                let host = u32::MAX.checked_shr(u32::from(len)).unwrap_or(0);
                [a.into(), Ipv4Addr::from_bits(a.to_bits() | host).into()]
            }
            Net::V6(a, len) => {
                let host = u128::MAX.checked_shr(u32::from(len)).unwrap_or(0);
                [a.into(), Ipv6Addr::from_bits(a.to_bits() | host).into()]
            }
        }
    }

    #[test]
    fn every_row_is_a_network_listed_once() {
        for r in V4.iter().chain(V6) {
            let max = match r.net {
                Net::V4(..) => 32,
                Net::V6(..) => 128,
            };
            assert!(r.net.prefix_len() <= max, "{}", r.net);
            // A network address with host bits set would hold not even itself.
            assert!(
                r.net.contains(ends(r.net)[0]),
                "{} has host bits set",
                r.net
            );
            assert_eq!(
                V4.iter().chain(V6).filter(|o| o.net == r.net).count(),
                1,
                "{} is listed twice",
                r.net
            );
            assert!(
                !(matches!(r.net, Net::V4(..)) && r.reach == Reach::AsIpv4),
                "{}: only IPv6 carries IPv4",
                r.net
            );
        }
    }

    /// Every entry of both registries (and multicast, and site-local) is a row.
    #[test]
    fn the_table_holds_both_registries() {
        for cidr in [
            "0.0.0.0/8",
            "0.0.0.0/32",
            "10.0.0.0/8",
            "100.64.0.0/10",
            "127.0.0.0/8",
            "169.254.0.0/16",
            "172.16.0.0/12",
            "192.0.0.0/24",
            "192.0.0.0/29",
            "192.0.0.8/32",
            "192.0.0.9/32",
            "192.0.0.10/32",
            "192.0.0.170/32",
            "192.0.0.171/32",
            "192.0.2.0/24",
            "192.31.196.0/24",
            "192.52.193.0/24",
            "192.88.99.0/24",
            "192.168.0.0/16",
            "192.175.48.0/24",
            "198.18.0.0/15",
            "198.51.100.0/24",
            "203.0.113.0/24",
            "224.0.0.0/4",
            "240.0.0.0/4",
            "255.255.255.255/32",
            "::1/128",
            "::/128",
            "::ffff:0:0/96",
            "64:ff9b::/96",
            "64:ff9b:1::/48",
            "100::/64",
            "100:0:0:1::/64",
            "2001::/23",
            "2001::/32",
            "2001:1::1/128",
            "2001:1::2/128",
            "2001:1::3/128",
            "2001:2::/48",
            "2001:3::/32",
            "2001:4:112::/48",
            "2001:10::/28",
            "2001:20::/28",
            "2001:30::/28",
            "2001:db8::/32",
            "2002::/16",
            "2620:4f:8000::/48",
            "3fff::/20",
            "5f00::/16",
            "fc00::/7",
            "fe80::/10",
            "ff00::/8",
            "fec0::/10",
        ] {
            let (a, len) = cidr.split_once('/').unwrap();
            let net = match ip(a) {
                IpAddr::V4(a) => Net::V4(a, len.parse().unwrap()),
                IpAddr::V6(a) => Net::V6(a, len.parse().unwrap()),
            };
            assert!(
                V4.iter().chain(V6).any(|r| r.net == net),
                "{cidr} is not in the table"
            );
        }
    }

    /// Without `local`, every address of every row is refused (its first and last
    /// checked); with it, a row that decides its address refuses it as its reach says.
    #[test]
    fn every_range_is_refused_and_local_lifts_only_local_ones() {
        for r in V4.iter().chain(V6) {
            for a in ends(r.net) {
                assert!(refused(a, false).is_some(), "{a} in {}", r.net);
                if range_of(a) != Some(r) {
                    continue; // a more specific row decides it
                }
                match r.reach {
                    Reach::Never => assert!(refused(a, true).is_some(), "{a} in {}", r.net),
                    Reach::Local => assert_eq!(refused(a, true), None, "{a} in {}", r.net),
                    // The first and last IPv4 addresses are never reached.
                    Reach::AsIpv4 => assert!(refused(a, true).is_some(), "{a} in {}", r.net),
                }
            }
        }
    }

    #[test]
    fn public_addresses_pass() {
        for public in [
            "93.184.215.14",
            "1.1.1.1",
            "8.8.8.8",
            "192.0.1.1",
            "192.88.100.1",
            "2606:4700::1111",
            "2a00:1450:4001:80b::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2001:db9::1",
            "2001:200::1",
        ] {
            assert_eq!(refused(ip(public), false), None, "{public}");
        }
    }

    /// What the review found reached, and the other carriers of an IPv4 address.
    #[test]
    fn ipv4_inside_ipv6_is_judged_by_the_ipv4_address_or_refused() {
        for (never, why) in [
            ("::ffff:0:127.0.0.1", "SIIT"),
            ("::ffff:0:8.8.8.8", "SIIT"),
            ("100::1", "discard"),
            ("100:0:0:1::1", "dummy"),
            ("2001:2::1", "benchmarking"),
            ("2001:10::1", "ORCHID"),
            ("3fff::1", "documentation"),
            ("192.88.99.1", "6to4"),
            ("2002:808:808::1", "6to4"),
            ("2002:7f00:1::1", "6to4"),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
            ("64:ff9b:1::a00:1", "local-use"),
            ("::127.0.0.1", "IPv4-compatible"),
            ("::8.8.8.8", "IPv4-compatible"),
            ("4000::1", "global unicast"),
            ("100:0:0:2::1", "global unicast"),
        ] {
            let r = refused(ip(never), false).unwrap_or_else(|| panic!("{never} passed"));
            assert!(r.to_string().contains(why), "{never}: {r}");
        }
        // Mapped and NAT64: the IPv4 address decides, local or not.
        for (carried, local_ok) in [
            ("::ffff:127.0.0.1", true),
            ("::ffff:10.0.0.1", true),
            ("64:ff9b::a00:1", true),
            ("::ffff:169.254.169.254", false),
            ("64:ff9b::a9fe:a9fe", false),
            ("::ffff:168.63.129.16", false),
            ("::ffff:0.0.0.0", false),
            ("::ffff:192.88.99.1", false),
        ] {
            let r = refused(ip(carried), false).unwrap_or_else(|| panic!("{carried} passed"));
            assert!(r.carried_in.is_some(), "{carried}: {r}");
            assert_eq!(refused(ip(carried), true).is_none(), local_ok, "{carried}");
        }
        assert!(
            refused(ip("::ffff:127.0.0.1"), false)
                .unwrap()
                .to_string()
                .starts_with("loopback (127.0.0.0/8, RFC 1122), carried in IPv4-mapped")
        );
    }

    #[test]
    fn local_lifts_private_ranges_only() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "169.254.1.1",
            "198.18.0.1",
            "192.0.0.1",
            "192.0.2.1",
            "::1",
            "fd12::1",
            "fe80::1",
            "fec0::1",
            "2001:db8::1",
        ] {
            assert!(refused(ip(private), false).is_some(), "{private}");
            assert_eq!(refused(ip(private), true), None, "{private} when local");
        }
    }

    #[test]
    fn metadata_and_unroutable_addresses_are_refused_even_when_local() {
        for never in [
            "169.254.169.254",
            "169.254.170.2",
            "169.254.170.23",
            "100.100.100.200",
            "168.63.129.16",
            "fd00:ec2::254",
            "fd00:ec2::23",
            "0.0.0.0",
            "0.1.2.3",
            "::",
            "255.255.255.255",
            "224.0.0.1",
            "ff02::1",
            "240.0.0.1",
            "192.0.0.8",
            "192.0.0.9",
            "192.0.0.170",
            "192.31.196.1",
            "192.52.193.1",
            "192.175.48.1",
            "2001:1::1",
            "2001:3::1",
            "2001:4:112::1",
            "2620:4f:8000::1",
            "5f00::1",
            "::169.254.169.254",
            "2002:a9fe:a9fe::",
        ] {
            assert!(refused(ip(never), true).is_some(), "{never}");
        }
        assert_eq!(
            refused(ip("169.254.169.254"), true).map(|r| r.range.name),
            Some("a cloud metadata address")
        );
    }
}
