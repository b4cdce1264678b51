//! /proc/net/tcp{,6}: the fallback reader. Streams the table through a fixed buffer (a 100k
//! socket table is ~15 MB of text) and skips, but counts, lines it cannot parse.

use super::{ipv6_from_kernel_words, ScanError};
use crate::facts::{Socket, TcpInfo, TcpState};
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

pub fn scan(ports: &[u16], netns_of: Option<u32>) -> Result<(Vec<Socket>, usize), ScanError> {
    // /proc/PID/net shows PID's network namespace; /proc/net is our own.
    let base = match netns_of {
        Some(pid) => format!("/proc/{pid}/net"),
        None => "/proc/net".to_string(),
    };
    scan_dir(&base, ports)
}

fn scan_dir(base: &str, ports: &[u16]) -> Result<(Vec<Socket>, usize), ScanError> {
    let mut sockets = Vec::new();
    let mut skipped = 0;
    for (file, required) in [("tcp", true), ("tcp6", false)] {
        let path = format!("{base}/{file}");
        let result = File::open(&path)
            .and_then(|f| parse(BufReader::with_capacity(64 * 1024, f), ports, &mut sockets));
        match result {
            // Lines, and none in the kernel's format: this is not the socket table (a
            // garbled or substituted file), and "no connection" would be a guess.
            Ok(t) if t.malformed > 0 && t.read == 0 => {
                return Err(ScanError::Proc {
                    path,
                    source: io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{} lines, none in the kernel's format", t.malformed),
                    ),
                })
            }
            Ok(t) => skipped += t.malformed,
            // No tcp6 means IPv6 is disabled: normal, nothing to read.
            Err(e) if !required && e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(ScanError::Proc { path, source }),
        }
    }
    Ok((sockets, skipped))
}

/// How a table's lines went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Lines in the kernel's format (kept or not).
    pub read: usize,
    /// Lines that were not.
    pub malformed: usize,
}

/// Parses a /proc/net/tcp or tcp6 table, appending to `out` the sockets whose remote port is
/// in `ports` (every socket when `ports` is empty).
pub fn parse(mut input: impl BufRead, ports: &[u16], out: &mut Vec<Socket>) -> io::Result<Tally> {
    let mut line = Vec::with_capacity(256);
    let mut tally = Tally::default();
    let mut first = true;
    loop {
        line.clear();
        match read_line(&mut input, &mut line)? {
            LineRead::End => return Ok(tally),
            // No line of the kernel's is this long: garbage, skipped without being kept.
            LineRead::TooLong => {
                tally.malformed += 1;
                first = false;
                continue;
            }
            LineRead::Line => {}
        }
        if std::mem::take(&mut first) && is_header(&line) {
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_line(&line, ports) {
            Line::Keep(socket) => {
                tally.read += 1;
                out.push(socket)
            }
            Line::OtherPort => tally.read += 1,
            Line::Malformed => tally.malformed += 1,
        }
    }
}

/// The kernel's lines are under 200 bytes (tcp6's longest is about 180).
const MAX_LINE: usize = 1024;

enum LineRead {
    Line,
    TooLong,
    End,
}

/// One line into `line`, at most `MAX_LINE` bytes of it kept: a longer one is read to its end
/// and reported, so a garbled table can neither grow memory nor stop the scan.
fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<LineRead> {
    let mut read_any = false;
    let mut too_long = false;
    loop {
        let available = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(match (read_any, too_long) {
                (false, _) => LineRead::End,
                (true, true) => LineRead::TooLong,
                (true, false) => LineRead::Line,
            });
        }
        read_any = true;
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let used = chunk.len();
        if !too_long {
            if line.len() + used > MAX_LINE {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        input.consume(used);
        if done {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

enum Line {
    Keep(Socket),
    OtherPort,
    Malformed,
}

fn is_header(line: &[u8]) -> bool {
    line.split(u8::is_ascii_whitespace)
        .find(|f| !f.is_empty())
        .is_some_and(|f| f == b"sl")
}

// Fields (net/ipv4/tcp_ipv4.c, `get_tcp4_sock`): sl local_address rem_address st
// tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode refcount sk rto ato quick cwnd
// ssthresh; tx_queue, retrnsmt in hex, rto in clock ticks (USER_HZ, 100 a second).
fn parse_line(line: &[u8], ports: &[u16]) -> Line {
    let mut fields = line
        .split(u8::is_ascii_whitespace)
        .filter(|f| !f.is_empty());
    let (Some(_sl), Some(local), Some(remote)) = (fields.next(), fields.next(), fields.next())
    else {
        return Line::Malformed;
    };
    // The remote port decides before anything else is parsed: at 100k sockets almost
    // every line is for another port.
    let Some(remote_port) = remote
        .iter()
        .rposition(|&b| b == b':')
        .and_then(|i| hex_u16(&remote[i + 1..]))
    else {
        return Line::Malformed;
    };
    if !ports.is_empty() && !ports.contains(&remote_port) {
        return Line::OtherPort;
    }
    let state = fields.next();
    let queues = fields.next();
    let retransmits = fields.nth(1);
    let uid = fields.next();
    let inode = fields.nth(1);
    let rto = fields.nth(2);
    let parsed = (|| {
        let mut queues = queues?.split(|&b| b == b':');
        let (tx_queue, rx_queue) = (queues.next()?, queues.next()?);
        Some(Socket {
            local: address(local)?,
            remote: address(remote)?,
            state: TcpState::from_kernel(u8::try_from(hex_u32(state?)?).ok()?)?,
            uid: decimal(uid?)?.try_into().ok()?,
            inode: decimal(inode?)?,
            info: Some(TcpInfo {
                unacked_bytes: hex_u32(tx_queue)?,
                unread_bytes: hex_u32(rx_queue)?,
                retransmits: hex_u32(retransmits?)?,
                // Older kernels end the line before rto: it is only missing then.
                rto_ms: rto
                    .and_then(decimal)
                    .and_then(|t| u32::try_from(t * 10).ok()),
                ..TcpInfo::default()
            }),
            diag: None,
        })
    })();
    match parsed {
        Some(socket) => Line::Keep(socket),
        None => Line::Malformed,
    }
}

/// `0100007F:1092` or a 32-digit IPv6 form. The kernel prints each 32-bit word of the
/// address as a native-endian integer, so the bytes come back out with `to_ne_bytes`.
fn address(field: &[u8]) -> Option<SocketAddr> {
    let colon = field.iter().position(|&b| b == b':')?;
    let (hex, port) = (&field[..colon], hex_u16(&field[colon + 1..])?);
    let ip = match hex.len() {
        8 => IpAddr::V4(Ipv4Addr::from(hex_u32(hex)?.to_ne_bytes())),
        32 => {
            let mut words = [0u32; 4];
            for (word, chunk) in words.iter_mut().zip(hex.chunks_exact(8)) {
                *word = hex_u32(chunk)?;
            }
            IpAddr::V6(ipv6_from_kernel_words(words))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

fn hex_u16(digits: &[u8]) -> Option<u16> {
    if digits.len() != 4 {
        return None;
    }
    u16::try_from(hex_u32(digits)?).ok()
}

fn hex_u32(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    digits.iter().try_fold(0u32, |acc, &b| {
        let d = (b as char).to_digit(16)?;
        Some(acc << 4 | d)
    })
}

fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &b| {
        let d = (b as char).to_digit(10)?;
        acc.checked_mul(10)?.checked_add(d as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = include_str!("../../../probe-tests/fixtures/proc-net-tcp.txt");
    const TCP6: &str = include_str!("../../../probe-tests/fixtures/proc-net-tcp6.txt");
    const MALFORMED: &str =
        include_str!("../../../probe-tests/fixtures/proc-net-tcp-malformed.txt");

    /// The sockets without their traffic facts (checked on their own below).
    fn parse_str(text: &str, ports: &[u16]) -> (Vec<Socket>, usize) {
        let mut out = Vec::new();
        let bad = parse(text.as_bytes(), ports, &mut out).unwrap().malformed;
        for s in &mut out {
            s.info = None;
        }
        (out, bad)
    }

    /// A table with lines and none in the kernel's format is no table: an error naming the
    /// file, never "no connection". Some bad lines among good ones are skipped and counted.
    #[test]
    fn a_garbled_table_is_an_error_and_a_few_bad_lines_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        std::fs::write(dir.path().join("tcp"), "garbage\nmore garbage\n\x00\x01\n").unwrap();
        match scan_dir(base, &[4222]) {
            Err(ScanError::Proc { path, source }) => {
                assert!(path.ends_with("/tcp"), "{path}");
                assert_eq!(source.to_string(), "3 lines, none in the kernel's format");
            }
            other => panic!("{other:?}"),
        }
        std::fs::write(dir.path().join("tcp"), format!("{TCP}garbage\n")).unwrap();
        let (found, skipped) = scan_dir(base, &[4222]).unwrap();
        assert_eq!(skipped, 1);
        assert!(!found.is_empty());
        // An empty table (no sockets at all) is no error.
        std::fs::write(dir.path().join("tcp"), "").unwrap();
        assert_eq!(scan_dir(base, &[4222]).unwrap().0.len(), 0);
    }

    #[test]
    fn the_traffic_facts_proc_has() {
        let mut out = Vec::new();
        parse(TCP.as_bytes(), &[4222], &mut out).unwrap();
        let syn = out.iter().find(|s| s.state == TcpState::SynSent).unwrap();
        assert_eq!(
            syn.info,
            Some(TcpInfo {
                unacked_bytes: 1,
                retransmits: 2,
                rto_ms: Some(2000),
                ..TcpInfo::default()
            })
        );
        // A short line (TIME_WAIT) has no rto: only that is missing.
        let tw = out.iter().find(|s| s.state == TcpState::TimeWait).unwrap();
        assert_eq!(tw.info.unwrap().rto_ms, None);
    }

    fn sock(local: &str, remote: &str, state: TcpState, uid: u32, inode: u64) -> Socket {
        Socket {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            state,
            uid,
            inode,
            info: None,
            diag: None,
        }
    }

    #[test]
    fn recorded_ipv4_table() {
        let (all, bad) = parse_str(TCP, &[]);
        assert_eq!(bad, 0);
        assert_eq!(all.len(), 6);
        let (nats, _) = parse_str(TCP, &[4222]);
        assert_eq!(
            nats,
            [
                sock(
                    "10.244.1.17:51828",
                    "10.96.14.2:4222",
                    TcpState::Established,
                    1000,
                    3316620
                ),
                sock(
                    "10.244.1.17:51830",
                    "10.96.14.2:4222",
                    TcpState::SynSent,
                    1000,
                    3316655
                ),
                sock(
                    "10.244.1.17:51802",
                    "10.96.14.2:4222",
                    TcpState::TimeWait,
                    0,
                    0
                ),
            ]
        );
    }

    #[test]
    fn a_servers_accepted_side_has_the_port_locally_and_is_not_kept() {
        // The fixture holds a server's accepted socket: local :4222, remote ephemeral.
        let (nats, _) = parse_str(TCP, &[4222]);
        assert!(nats.iter().all(|s| s.local.port() != 4222));
    }

    #[test]
    fn recorded_ipv6_table_with_mapped_and_native_peers() {
        let (nats, bad) = parse_str(TCP6, &[4222]);
        assert_eq!(bad, 0);
        assert_eq!(
            nats,
            [
                sock("[::1]:40112", "[::1]:4222", TcpState::Established, 0, 77120),
                sock(
                    "[::ffff:127.0.0.1]:40330",
                    "[::ffff:127.0.0.1]:4222",
                    TcpState::Established,
                    0,
                    77301
                ),
                sock(
                    "[fd00:10:244:1::11]:36652",
                    "[fd00:10:96::a]:4222",
                    TcpState::CloseWait,
                    1000,
                    77410
                ),
            ]
        );
    }

    #[test]
    fn malformed_lines_are_skipped_and_counted_not_fatal() {
        let (nats, bad) = parse_str(MALFORMED, &[4222]);
        assert_eq!(nats.len(), 2, "{nats:?}");
        assert!(nats.iter().all(|s| s.state == TcpState::Established));
        assert_eq!(bad, 8);
    }

    #[test]
    fn an_empty_or_header_only_table_is_empty() {
        assert_eq!(parse_str("", &[4222]), (vec![], 0));
        let header = TCP.lines().next().unwrap();
        assert_eq!(parse_str(header, &[4222]), (vec![], 0));
    }

    #[test]
    fn a_missing_tcp6_is_ipv6_disabled_not_an_error_but_a_missing_tcp_is() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        assert!(matches!(
            scan_dir(base, &[4222]),
            Err(ScanError::Proc { .. })
        ));
        std::fs::write(dir.path().join("tcp"), TCP).unwrap();
        let (sockets, bad) = scan_dir(base, &[4222]).unwrap();
        assert_eq!((sockets.len(), bad), (3, 0));
    }

    #[test]
    fn a_last_line_without_newline_is_read() {
        let text = TCP.trim_end();
        assert_eq!(parse_str(text, &[]).0.len(), 6);
    }
}
