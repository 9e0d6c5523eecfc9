//! Which addresses an outbound connection may reach (an upstream MCP server, an agent's
//! `http_get`). Cloud metadata endpoints and unroutable addresses are always refused;
//! loopback, private, link-local and other non-public ranges are refused unless the
//! destination is `local`: marked so by an admin (an MCP server marked local, a host on
//! the gateway's `http_get_allow` list).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused (`None`: allowed).
pub fn refused(ip: IpAddr, local: bool) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refused_v4(v4, local),
        IpAddr::V6(v6) => {
            // An IPv4 address carried in IPv6 (mapped, or NAT64's well-known prefix) is
            // judged as that IPv4 address.
            if let Some(v4) = v6.to_ipv4_mapped() {
                return refused_v4(v4, local);
            }
            let s = v6.segments();
            // IPv4-compatible (::a.b.c.d, deprecated but still routed by some stacks).
            if s[..6] == [0, 0, 0, 0, 0, 0] && (s[6] != 0 || s[7] > 1) {
                return refused_v4(v4_of(s[6], s[7]), local);
            }
            // 6to4 (2002:AABB:CCDD::/48) carries the IPv4 address it reaches.
            if s[0] == 0x2002 {
                return refused_v4(v4_of(s[1], s[2]), local);
            }
            // Teredo tunnels to an address it hides (obfuscated): never followed.
            if s[0] == 0x2001 && s[1] == 0 {
                return Some("a Teredo address");
            }
            // NAT64 local-use prefix (64:ff9b:1::/48): its IPv4 is in the last 32 bits.
            if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
                return refused_v4(v4_of(s[6], s[7]), local);
            }
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let v4 =
                    Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
                return refused_v4(v4, local);
            }
            refused_v6(v6, local)
        }
    }
}

fn v4_of(hi: u16, lo: u16) -> Ipv4Addr {
    Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8)
}

fn refused_v4(ip: Ipv4Addr, local: bool) -> Option<&'static str> {
    let o = ip.octets();
    // Metadata services: AWS, GCP, Azure, OpenStack (169.254.169.254), AWS ECS task
    // metadata (169.254.170.2), EKS Pod Identity (169.254.170.23), Alibaba
    // (100.100.100.200), Azure's WireServer (168.63.129.16, a public address).
    if ip == Ipv4Addr::new(168, 63, 129, 16)
        || ip == Ipv4Addr::new(169, 254, 169, 254)
        || ip == Ipv4Addr::new(169, 254, 170, 2)
        || ip == Ipv4Addr::new(169, 254, 170, 23)
        || ip == Ipv4Addr::new(100, 100, 100, 200)
    {
        return Some("a cloud metadata address");
    }
    if ip.is_unspecified() || o[0] == 0 {
        return Some("an unspecified address");
    }
    if ip.is_broadcast() || ip.is_multicast() || o[0] >= 240 {
        return Some("a broadcast, multicast or reserved address");
    }
    if local {
        return None;
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    if ip.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64) {
        return Some("a private address");
    }
    if ip.is_link_local() {
        return Some("a link-local address");
    }
    if (o[0] == 198 && (o[1] & 0xfe) == 18)
        || ip.is_documentation()
        || (o[0] == 192 && o[1] == 0 && o[2] == 0)
    {
        return Some("a reserved address");
    }
    None
}

fn refused_v6(ip: Ipv6Addr, local: bool) -> Option<&'static str> {
    let s = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
        || ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)
    {
        return Some("a cloud metadata address");
    }
    if ip.is_unspecified() {
        return Some("an unspecified address");
    }
    if ip.is_multicast() {
        return Some("a multicast address");
    }
    if local {
        return None;
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    if (s[0] & 0xfe00) == 0xfc00 {
        return Some("a private (unique local) address");
    }
    if (s[0] & 0xffc0) == 0xfe80 || (s[0] & 0xffc0) == 0xfec0 {
        return Some("a link-local or site-local address");
    }
    if s[0] == 0x2001 && s[1] == 0xdb8 {
        return Some("a documentation address");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn public_addresses_pass_and_others_need_local() {
        for public in [
            "93.184.215.14",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "2002:808:808::1",
            "2001:db9::1",
        ] {
            assert_eq!(refused(ip(public), false), None, "{public}");
        }
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "169.254.1.1",
            "198.18.0.1",
            "::1",
            "fd12::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "192.0.0.8",
            "::127.0.0.1",
            "::a00:1",
            "2002:7f00:1::1",
            "2002:a00:1::",
            "64:ff9b:1::a00:1",
            "fec0::1",
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
            "100.100.100.200",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "0.0.0.0",
            "0.1.2.3",
            "::",
            "255.255.255.255",
            "224.0.0.1",
            "ff02::1",
            "240.0.0.1",
            "169.254.170.23",
            "fd00:ec2::23",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2002:a9fe:a9fe::",
            "::169.254.169.254",
            "168.63.129.16",
            "::ffff:168.63.129.16",
        ] {
            assert!(refused(ip(never), true).is_some(), "{never}");
        }
        assert_eq!(
            refused(ip("169.254.169.254"), true),
            Some("a cloud metadata address")
        );
    }
}
