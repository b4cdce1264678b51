//! The one socket reader: TCP sockets whose remote port is one of the given ports, read by
//! netlink sock_diag (kernel-side filter) or, when that is refused, from /proc/net/tcp{,6}.

pub(crate) mod exact;
pub(crate) mod netlink;
pub mod owner;
pub(crate) mod procnet;

use crate::config::ReaderChoice;
use crate::facts::{Lookup, Reader, Socket, SocketScan, Walked};
use netlink::{INET_DIAG_BC_D_COND, INET_DIAG_BC_S_COND};
use std::net::{Ipv6Addr, SocketAddr};
use std::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("netlink sock_diag: {0}")]
    Netlink(String),
    #[error("{path}: {source}")]
    Proc {
        path: String,
        source: std::io::Error,
    },
    /// Netlink refused, and the /proc fallback failed too: both reasons.
    #[error("netlink sock_diag refused ({netlink}), and {proc}")]
    Neither {
        netlink: String,
        proc: Box<ScanError>,
    },
}

/// Reads TCP sockets (any state) whose remote port is in `ports`, from the network
/// namespace of `netns_of` (a PID) or our own.
/// With `info`, netlink also returns each socket's `tcp_info` (the /proc reader always gives
/// what /proc has).
pub fn scan(
    ports: &[u16],
    netns_of: Option<u32>,
    choice: ReaderChoice,
    info: bool,
    deadline: Instant,
) -> Result<SocketScan, ScanError> {
    let netlink = (choice != ReaderChoice::Proc)
        .then(|| netlink::scan(INET_DIAG_BC_D_COND, ports, netns_of, info, deadline));
    let (mut sockets, reader, fallback, skipped_lines) = match netlink {
        Some(Ok(sockets)) => (sockets, Reader::Netlink, None, 0),
        Some(Err(e)) if choice == ReaderChoice::Netlink => return Err(ScanError::Netlink(e)),
        tried => {
            let refused = tried.and_then(Result::err);
            let (sockets, skipped) =
                procnet::scan(ports, netns_of).map_err(|proc| match &refused {
                    Some(netlink) => ScanError::Neither {
                        netlink: netlink.clone(),
                        proc: Box::new(proc),
                    },
                    None => proc,
                })?;
            let fallback = refused.map(|e| format!("netlink refused: {e}"));
            (sockets, Reader::Proc, fallback, skipped)
        }
    };
    // A table that changes while it is read can show a socket twice: /proc/net/tcp resumes
    // by position between reads, and a netlink dump between datagrams. Seen in the tests,
    // under churn; a duplicate would count one connection as two. The same socket read twice
    // may differ in state or traffic: one entry per connection and inode.
    let key = |s: &Socket| (s.local, s.remote, s.inode);
    sockets.sort_by_key(key);
    sockets.dedup_by(|a, b| key(a) == key(b));
    Ok(SocketScan {
        sockets,
        reader,
        fallback,
        skipped_lines,
        lookup: Lookup::Walk(Walked::NotTried),
    })
}

/// Where the kernel holds each of our own connections, given by its local address and inode:
/// (the local address, the remote the socket table shows). Read in our own namespace, by local
/// port (netlink), else, while time is left, from /proc/self/net. A socket not found is left
/// out.
pub fn held_as(
    own: &[(SocketAddr, u64)],
    deadline: Instant,
) -> Result<Vec<(SocketAddr, SocketAddr)>, ScanError> {
    let ports: Vec<u16> = own.iter().map(|(local, _)| local.port()).collect();
    let sockets = match netlink::scan(INET_DIAG_BC_S_COND, &ports, None, false, deadline) {
        Ok(sockets) => sockets,
        Err(e) if Instant::now() >= deadline => return Err(ScanError::Netlink(e)),
        Err(_) => procnet::scan(&[], None)?.0,
    };
    Ok(own
        .iter()
        .filter_map(|&(local, inode)| {
            let s = sockets
                .iter()
                .find(|s| s.inode == inode && s.local.port() == local.port())?;
            Some((local, s.remote))
        })
        .collect())
}

pub(crate) fn ipv6_from_kernel_words(words: [u32; 4]) -> Ipv6Addr {
    let mut bytes = [0u8; 16];
    for (chunk, word) in bytes.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    Ipv6Addr::from(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{unmap, TcpState};
    use std::collections::BTreeSet;
    use std::net::SocketAddr;
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    /// The differential test: on a real socket table (IPv4, IPv6, IPv4-mapped, several
    /// states), the netlink reader and the /proc reader return the same sockets.
    #[test]
    fn netlink_and_proc_agree_on_a_real_table() {
        let v4 = TcpListener::bind("127.0.0.1:0").unwrap();
        let v6 = TcpListener::bind("[::1]:0").unwrap();
        let dual = TcpListener::bind("[::]:0").unwrap();
        let mut held = Vec::new();
        for _ in 0..5 {
            held.push(TcpStream::connect(v4.local_addr().unwrap()).unwrap());
            held.push(TcpStream::connect(v6.local_addr().unwrap()).unwrap());
            // An AF_INET6 socket to an IPv4-mapped address: tcp6 shows `::ffff:127.0.0.1`.
            let mapped = format!("[::ffff:127.0.0.1]:{}", dual.local_addr().unwrap().port());
            held.push(TcpStream::connect(mapped).unwrap());
        }
        let accepted: Vec<_> = (0..5)
            .flat_map(|_| [v4.accept(), v6.accept(), dual.accept()])
            .map(|r| r.unwrap().0)
            .collect();
        // A half-closed pair gives FIN_WAIT2 / CLOSE_WAIT sockets too.
        held[0].shutdown(std::net::Shutdown::Write).unwrap();
        std::thread::sleep(Duration::from_millis(50));

        let ports: Vec<u16> = [&v4, &v6, &dual]
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        let by_netlink = scan(&ports, None, ReaderChoice::Netlink, true, deadline).unwrap();
        let by_proc = scan(&ports, None, ReaderChoice::Proc, true, deadline).unwrap();
        assert_eq!(by_netlink.reader, Reader::Netlink);
        assert_eq!(by_proc.reader, Reader::Proc);
        assert_eq!(by_proc.skipped_lines, 0);
        // Both readers give the traffic facts; they differ in what they can give (and the
        // times move between the reads): the sockets themselves must be the same.
        assert!(by_netlink.sockets.iter().all(|s| s.info.is_some()));
        assert!(by_proc.sockets.iter().all(|s| s.info.is_some()));
        let bare = |v: Vec<Socket>| -> BTreeSet<Socket> {
            v.into_iter()
                .map(|mut s| {
                    s.info = None;
                    s.diag = None;
                    s
                })
                .collect()
        };
        let a = bare(by_netlink.sockets);
        let b = bare(by_proc.sockets);
        assert_eq!(a, b);
        // Other tests may have used these ports moments ago (listeners reuse addresses), and
        // their TIME_WAIT sockets match too: count ours by local address.
        let ours: BTreeSet<SocketAddr> = held
            .iter()
            .map(|s| unmapped(s.local_addr().unwrap()))
            .collect();
        let a: BTreeSet<_> = a
            .into_iter()
            .filter(|s| ours.contains(&unmapped(s.local)))
            .collect();
        assert_eq!(a.len(), 15, "one client socket per connection: {a:#?}");
        let states: BTreeSet<_> = a.iter().map(|s| s.state).collect();
        assert!(states.contains(&TcpState::Established));
        assert!(states.contains(&TcpState::FinWait2), "{states:?}");
        assert!(
            a.iter()
                .any(|s| s.remote.ip().to_string().starts_with("::ffff:127.")),
            "an IPv4-mapped peer is in the table"
        );
        assert!(a.iter().all(|s| s.inode != 0));
        drop(accepted);
    }

    fn unmapped(addr: SocketAddr) -> SocketAddr {
        SocketAddr::new(unmap(addr.ip()), addr.port())
    }

    #[test]
    fn an_accepted_socket_is_not_a_connection_to_the_port() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let client = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (accepted, _) = server.accept().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        for choice in [ReaderChoice::Netlink, ReaderChoice::Proc] {
            let found = scan(&[port], None, choice, false, deadline)
                .unwrap()
                .sockets;
            let established: Vec<_> = found
                .iter()
                .filter(|s| s.state == TcpState::Established)
                .collect();
            assert_eq!(established.len(), 1, "{choice:?}: {found:?}");
            assert_eq!(established[0].local, client.local_addr().unwrap());
            assert!(found
                .iter()
                .all(|s| s.local != accepted.local_addr().unwrap()));
        }
    }
}
