//! Sockets as the kernel reports them, whichever reader read them, and the processes whose
//! sockets count.

use crate::prelude::*;
use serde::{Deserialize, Serialize};

use core::fmt;
use core::net::{IpAddr, SocketAddr};

/// Kernel TCP states, numbered as in `include/net/tcp_states.h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TcpState {
    Established,
    SynSent,
    SynRecv,
    FinWait1,
    FinWait2,
    TimeWait,
    Close,
    CloseWait,
    LastAck,
    Listen,
    Closing,
    NewSynRecv,
}

impl TcpState {
    pub fn from_kernel(value: u8) -> Option<TcpState> {
        use TcpState::*;
        Some(match value {
            1 => Established,
            2 => SynSent,
            3 => SynRecv,
            4 => FinWait1,
            5 => FinWait2,
            6 => TimeWait,
            7 => Close,
            8 => CloseWait,
            9 => LastAck,
            10 => Listen,
            11 => Closing,
            12 => NewSynRecv,
            _ => return None,
        })
    }

    /// The name `ss` and `netstat` print, so output reads like the tools operators know.
    pub fn name(self) -> &'static str {
        use TcpState::*;
        match self {
            Established => "ESTABLISHED",
            SynSent => "SYN_SENT",
            SynRecv | NewSynRecv => "SYN_RECV",
            FinWait1 => "FIN_WAIT1",
            FinWait2 => "FIN_WAIT2",
            TimeWait => "TIME_WAIT",
            Close => "CLOSE",
            CloseWait => "CLOSE_WAIT",
            LastAck => "LAST_ACK",
            Listen => "LISTEN",
            Closing => "CLOSING",
        }
    }
}

impl fmt::Display for TcpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One TCP socket as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Socket {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub state: TcpState,
    /// 0 for sockets no file descriptor holds (TIME_WAIT, orphans).
    pub inode: u64,
    pub uid: u32,
    /// What the kernel knows of the connection's traffic; None when not asked.
    pub info: Option<TcpInfo>,
    /// sock_diag's name for the socket; None from /proc, which has none.
    pub diag: Option<DiagId>,
}

/// What sock_diag names a socket by besides its addresses: the cookie the kernel gave it (never
/// given to another socket while the system runs) and the interface it is bound to (0: none).
/// With both addresses and ports it is the full `inet_diag_sockid` an exact lookup sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DiagId {
    pub cookie: u64,
    pub interface: u32,
}

/// The descriptor through which a named process (`--pid`, `--process`) holds a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub fd: u32,
}

/// A connection a healthy run counted, kept so the next run can ask the kernel for exactly
/// that socket (one hash lookup) instead of walking the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KnownSocket {
    /// Its family is its addresses': an IPv4 pair is AF_INET, any other AF_INET6.
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub inode: u64,
    pub diag: DiagId,
    /// With `--pid`/`--process`: who held it, and through which descriptor.
    pub holder: Option<Holder>,
    /// The server address it was counted for, when its remote was not one the policy names
    /// but a route's (`Route`): it counts for the same address while it is unchanged.
    pub stands_for: Option<SocketAddr>,
}

/// A remembered connection asked for again: what the kernel answered for its exact identity
/// (None: no such socket), and whether the owner still holds it through the remembered
/// descriptor (always true when anyone's sockets count).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rechecked {
    pub socket: Option<Socket>,
    pub held: bool,
}

/// How a run found its sockets (before it has: a walk not yet made).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The whole table was read (a sock_diag dump, or /proc).
    Walk(Walked),
    /// Only the connections the last healthy run counted, each by its exact identity; all
    /// `remembered` were asked for, and enough of them were unchanged to decide the run.
    Exact { remembered: usize },
}

impl Default for Lookup {
    fn default() -> Lookup {
        Lookup::Walk(Walked::NotTried)
    }
}

/// Why the table was walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walked {
    /// The exact lookup is not for this run (`diagnose`, `--reader proc`, a check that asks
    /// the server, no state dir).
    NotTried,
    /// No healthy run left its connections.
    NothingRemembered,
    /// Too few of the remembered connections were as they were: `live` of `remembered`
    /// unchanged and live.
    Changed { remembered: usize, live: usize },
    /// The exact questions could not be asked (netlink refused).
    LookupFailed,
}

/// The kernel's view of a connection's traffic: from sock_diag's `tcp_info`
/// (`INET_DIAG_INFO`), or the little /proc/net/tcp has. What a reader cannot give is None.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct TcpInfo {
    /// Bytes written and not yet acknowledged by the peer (the send queue; `tx_queue`).
    pub unacked_bytes: u32,
    /// Bytes received and not yet read by the application (the receive queue; `rx_queue`):
    /// growing, it says the client stopped reading.
    pub unread_bytes: u32,
    /// Segments in flight and not acknowledged (`tcpi_unacked`).
    pub unacked_segments: Option<u32>,
    /// Retransmission timeouts in a row for the oldest unacknowledged segment
    /// (`tcpi_retransmits`, /proc's `retrnsmt`).
    pub retransmits: u32,
    /// Every retransmission over the connection's life (`tcpi_total_retrans`).
    pub total_retransmits: Option<u32>,
    /// The retransmission timer's exponential back-off (`tcpi_backoff`).
    pub backoff: Option<u32>,
    /// The current retransmission timeout, ms.
    pub rto_ms: Option<u32>,
    /// Since data was last received, since an ACK was last received, since data was last sent,
    /// ms (`tcpi_last_data_recv`, `tcpi_last_ack_recv`, `tcpi_last_data_sent`).
    pub last_data_recv_ms: Option<u32>,
    pub last_ack_recv_ms: Option<u32>,
    pub last_data_sent_ms: Option<u32>,
}

/// Which reader produced a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reader {
    #[default]
    Netlink,
    Proc,
}

impl Reader {
    pub fn name(self) -> &'static str {
        match self {
            Reader::Netlink => "netlink",
            Reader::Proc => "proc",
        }
    }
}

/// The sockets to remote ports of interest, and how they were read.
#[derive(Debug, Clone, Default)]
pub struct SocketScan {
    pub sockets: Vec<Socket>,
    pub reader: Reader,
    /// Why the preferred reader was not used, when it was not.
    pub fallback: Option<String>,
    /// /proc lines that could not be parsed (never fatal; reported).
    pub skipped_lines: usize,
    /// Whether the table was walked, or the remembered connections looked up.
    pub lookup: Lookup,
}

/// Both readers report IPv4 peers of a dual-stack socket as `::ffff:a.b.c.d`; matching and
/// display want the IPv4 address.
pub fn unmap(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// The same address and port, an IPv4-mapped IPv6 address as its IPv4 one.
pub fn same_address(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port() && unmap(a.ip()) == unmap(b.ip())
}

/// A process whose sockets count (`--pid`, `--process`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Process {
    pub pid: u32,
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_addresses_unmap() {
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert_eq!(unmap(mapped), "10.1.2.3".parse::<IpAddr>().unwrap());
        let v6: IpAddr = "fd00::1".parse().unwrap();
        assert_eq!(unmap(v6), v6);
    }

    /// Every state the kernel numbers, and its name as `ss` prints it.
    #[test]
    fn the_kernels_states_and_their_names() {
        let names: Vec<Option<&str>> = (0..=13)
            .map(|v| TcpState::from_kernel(v).map(TcpState::name))
            .collect();
        assert_eq!(
            names,
            [
                None,
                Some("ESTABLISHED"),
                Some("SYN_SENT"),
                Some("SYN_RECV"),
                Some("FIN_WAIT1"),
                Some("FIN_WAIT2"),
                Some("TIME_WAIT"),
                Some("CLOSE"),
                Some("CLOSE_WAIT"),
                Some("LAST_ACK"),
                Some("LISTEN"),
                Some("CLOSING"),
                Some("SYN_RECV"),
                None,
            ]
        );
        assert_eq!(TcpState::from_kernel(12), Some(TcpState::NewSynRecv));
        assert_eq!(TcpState::from_kernel(3), Some(TcpState::SynRecv));
    }
}
