//! `--remote ADDR[/LEN]`: an address or network a connection's peer must be in, and the match.

use crate::prelude::*;

use crate::facts::unmap;
use core::fmt;
use core::net::IpAddr;
use core::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    len: u8,
}

impl Cidr {
    /// An IPv4 network also matches IPv4-mapped IPv6 peers (`::ffff:10.0.0.5`), which is how
    /// a dual-stack socket reports them.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, unmap(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(&net.octets(), &ip.octets(), self.len),
            (IpAddr::V6(net), IpAddr::V6(ip)) => prefix_eq(&net.octets(), &ip.octets(), self.len),
            _ => false,
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], len: u8) -> bool {
    let (whole, bits) = (usize::from(len / 8), len % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    bits == 0 || {
        let mask = 0xffu8 << (8 - bits);
        a[whole] & mask == b[whole] & mask
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Cidr, String> {
        let (addr, len) = match text.split_once('/') {
            Some((addr, len)) => (addr, Some(len)),
            None => (text, None),
        };
        let addr = addr.trim_start_matches('[').trim_end_matches(']');
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| format!("'{text}' is not an IP address or CIDR (e.g. 10.96.0.0/12)"))?;
        let ip = unmap(ip);
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(len) => len
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| format!("'{text}': prefix length must be 0 to {max}"))?,
        };
        Ok(Cidr { network: ip, len })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let max = if self.network.is_ipv4() { 32 } else { 128 };
        if self.len == max {
            write!(f, "{}", self.network)
        } else {
            write!(f, "{}/{}", self.network, self.len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn matching() {
        let cases = [
            ("10.96.0.0/12", "10.96.14.2", true),
            ("10.96.0.0/12", "10.112.0.1", false),
            ("10.96.0.0/12", "::ffff:10.96.14.2", true),
            ("10.96.14.2", "10.96.14.2", true),
            ("10.96.14.2", "10.96.14.3", false),
            ("0.0.0.0/0", "192.0.2.1", true),
            ("0.0.0.0/0", "fd00::1", false),
            ("fd00::/8", "fd00:10:96::a", true),
            ("fd00::/8", "fe80::1", false),
            ("[::1]", "::1", true),
            ("10.0.0.0/9", "10.127.255.255", true),
            ("10.0.0.0/9", "10.128.0.0", false),
        ];
        for (cidr, addr, expected) in cases {
            let c: Cidr = cidr.parse().unwrap();
            assert_eq!(c.contains(ip(addr)), expected, "{cidr} contains {addr}");
        }
    }

    #[test]
    fn parse_errors_name_the_input() {
        for bad in [
            "",
            "nats",
            "10.0.0.0/33",
            "fd00::/129",
            "10.0.0.0/x",
            "10.0.0.0/",
        ] {
            let err = bad.parse::<Cidr>().unwrap_err();
            assert!(err.contains(&format!("'{bad}'")), "{err}");
        }
    }

    #[test]
    fn displays_as_written() {
        for text in ["10.96.0.0/12", "10.96.14.2", "fd00::/8", "::1"] {
            assert_eq!(text.parse::<Cidr>().unwrap().to_string(), text);
        }
    }
}
