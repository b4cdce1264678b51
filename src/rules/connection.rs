//! The connection rule: which sockets are this client's connections to NATS, and whether
//! there are enough of them. Pure: sockets and policy in; nothing here reads a socket.

use super::cidr::Cidr;
use crate::facts::{Holder, Socket, TcpInfo, TcpState};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// What counts as "this client holds its connection", and what to do when it does not.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Remote ports of the NATS servers (the client side of a connection).
    pub ports: Vec<u16>,
    /// When not empty, the peer must be in one of these.
    pub remotes: Vec<Cidr>,
    pub min_connections: usize,
    /// A connection with data unacknowledged this long is half-open and does not count;
    /// None: not looked at.
    pub half_open_after: Option<Duration>,
    /// `--server` was given: a missing connection is a fault only if the server answers.
    pub server: bool,
    pub when_server_down: WhenServerDown,
    /// `--startup`: a check never judged with this configuration fails, until it is.
    pub startup: bool,
}

/// `--when-server-down`: what a missing connection means while NATS itself is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenServerDown {
    /// Healthy: restarting every pod during an outage only adds a restart storm.
    #[default]
    Pass,
    /// Unhealthy: restart anyway.
    Fail,
}

/// The socket table, reduced to this client's connections to the server ports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Connections {
    pub established: Vec<Socket>,
    /// The ESTABLISHED ones whose peer is gone (no FIN or RST came): they do not count.
    pub half_open: Vec<(Socket, HalfOpen)>,
    /// Sockets to the same peers in any other state: SYN_SENT means the client is still
    /// trying; CLOSE_WAIT means the server hung up and the client never noticed.
    pub others: Vec<Socket>,
}

impl Connections {
    pub fn other_states(&self) -> BTreeMap<TcpState, usize> {
        let mut counts = BTreeMap::new();
        for s in &self.others {
            *counts.entry(s.state).or_insert(0) += 1;
        }
        counts
    }
}

/// Keeps the sockets that are connections of this client: remote port in `ports` (never the
/// local port: that is a server's accepted side), peer in `remotes`, and held by the
/// process when `owned` (socket inode → its holder) is given.
pub fn connections(
    sockets: &[Socket],
    policy: &Policy,
    owned: Option<&HashMap<u64, Holder>>,
) -> Connections {
    let mut found = Connections::default();
    let mine = sockets.iter().filter(|s| {
        policy.ports.contains(&s.remote.port())
            && (policy.remotes.is_empty()
                || policy.remotes.iter().any(|c| c.contains(s.remote.ip())))
            && owned.is_none_or(|inodes| inodes.contains_key(&s.inode))
    });
    for s in mine {
        if s.state == TcpState::Established {
            found.established.push(s.clone());
            let half = policy
                .half_open_after
                .zip(s.info.as_ref())
                .and_then(|(after, info)| half_open(info, after));
            if let Some(h) = half {
                found.half_open.push((s.clone(), h));
            }
        } else {
            found.others.push(s.clone());
        }
    }
    found.established.sort();
    found.others.sort();
    found.half_open.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// A connection whose peer is gone without a FIN or RST (a node lost, a partition): sent data
/// has waited at least this long for an acknowledgement, through this many retransmission
/// timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HalfOpen {
    pub unacked_bytes: u32,
    /// A lower bound: the retransmission timeouts so far, and no ACK at all since.
    pub unacked_for: Duration,
    pub retransmits: u32,
}

/// The half-open rule. Data must be waiting for an ACK (a quiet connection, however long, has
/// nothing unacknowledged and is never half-open), the retransmission timer must have fired
/// (data merely in flight is not lost), and for `after` both must hold: the oldest
/// unacknowledged data has waited through retransmission timeouts adding up to `after`, and no
/// ACK of any kind has come (tcp_info; /proc has only the timeouts).
///
/// Time since the last ACK alone would not do: a connection quiet for an hour that sends one
/// message and loses it once has had no ACK for an hour, and is alive.
pub fn half_open(info: &TcpInfo, after: Duration) -> Option<HalfOpen> {
    if info.unacked_bytes == 0 || info.retransmits == 0 {
        return None;
    }
    let waited = retransmission_time(info.rto_ms?, info.retransmits);
    let unacked_for = match info.last_ack_recv_ms {
        Some(ms) => waited.min(Duration::from_millis(u64::from(ms))),
        None => waited,
    };
    (unacked_for >= after).then_some(HalfOpen {
        unacked_bytes: info.unacked_bytes,
        unacked_for,
        retransmits: info.retransmits,
    })
}

/// The least time `n` retransmission timeouts in a row take: each waits twice the one before,
/// so the current timeout halved `n` times was the first; none waits over 120 s
/// (`TCP_RTO_MAX`, where the doubling stops and this undercounts, which is safe).
/// When the half-open rule first calls a connection whose peer is gone, counted from the send
/// it never acknowledges: at the first retransmission timeout past `after`. The kernel
/// retransmits at its timer, `first_rto` (200 ms, its minimum, on a LAN), doubling (up to two
/// minutes): 0.2, 0.6, 1.4, ... 25.4, 51.0 s after the send. The rule sees the timer only when
/// it fires: a `--half-open-after 30s` connection is called at 51 s.
pub fn half_open_called(after: Duration, first_rto: Duration) -> Duration {
    let first = first_rto.as_millis().min(u128::from(u32::MAX)) as u32;
    (1..64)
        .map(|n| retransmission_time(first.saturating_mul(1 << n.min(31)), n))
        .find(|waited| *waited >= after)
        .unwrap_or(Duration::MAX)
}

fn retransmission_time(rto_ms: u32, n: u32) -> Duration {
    let first = u64::from(rto_ms >> n.min(31));
    let total: u64 = (0..n.min(64))
        .map(|i| first.saturating_mul(1u64 << i.min(40)).min(120_000))
        .sum();
    Duration::from_millis(total)
}

/// Enough live connections: ESTABLISHED, and not half-open.
pub fn connected(connections: &Connections, policy: &Policy) -> bool {
    live(connections) >= policy.min_connections
}

pub fn live(connections: &Connections) -> usize {
    connections.established.len() - connections.half_open.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_peer_is_called_at_the_first_timeout_past_the_threshold() {
        let rto = Duration::from_millis(200);
        assert_eq!(
            half_open_called(Duration::from_secs(30), rto),
            Duration::from_millis(51_000)
        );
        assert_eq!(
            half_open_called(Duration::from_secs(2), rto),
            Duration::from_millis(3_000)
        );
        assert_eq!(
            half_open_called(Duration::from_millis(100), rto),
            Duration::from_millis(200)
        );
    }

    fn info(unacked: u32, retransmits: u32, rto: u32, last_ack: Option<u32>) -> TcpInfo {
        TcpInfo {
            unacked_bytes: unacked,
            retransmits,
            rto_ms: Some(rto),
            last_ack_recv_ms: last_ack,
            ..TcpInfo::default()
        }
    }

    /// Data unacknowledged through timeouts past the threshold, with no ACK since: half-open.
    /// Nothing unacknowledged (a quiet connection, hours without an ACK), data merely in
    /// flight, a recent ACK, or too few timeouts: never.
    #[test]
    fn the_half_open_rule() {
        let after = Duration::from_secs(30);
        // 8 timeouts from 200 ms: 0.2 + 0.4 + ... + 25.6 = 51 s.
        let dead = info(1229, 8, 51_200, Some(53_000));
        assert_eq!(
            half_open(&dead, after),
            Some(HalfOpen {
                unacked_bytes: 1229,
                unacked_for: Duration::from_millis(51_000),
                retransmits: 8,
            })
        );
        for alive in [
            info(0, 0, 200, Some(7_200_000)),
            info(0, 3, 1_600, Some(7_200_000)),
            info(1229, 0, 200, Some(41_000)),
            info(1229, 8, 51_200, Some(400)),
            info(1229, 8, 51_200, Some(29_999)),
            // Quiet for two hours, then one message lost once: no ACK for hours, but the
            // data has waited one timeout.
            info(64, 1, 400, Some(7_200_000)),
            // 7 timeouts: 25.4 s, not yet 30.
            info(1229, 7, 25_600, Some(41_000)),
        ] {
            assert_eq!(half_open(&alive, after), None, "{alive:?}");
        }
    }

    /// /proc has no ACK time: the retransmission timeouts alone are the least time.
    #[test]
    fn by_retransmissions_when_proc_is_all_there_is() {
        assert_eq!(
            retransmission_time(25_600, 7),
            Duration::from_millis(25_400)
        );
        assert_eq!(
            retransmission_time(51_200, 8),
            Duration::from_millis(51_000)
        );
        // A route's lower rto_min: the first timeout is what the current one says.
        assert_eq!(retransmission_time(80, 3), Duration::from_millis(70));
        // Capped at 120 s each: the current timeout stopped doubling, and this undercounts.
        assert_eq!(
            retransmission_time(120_000, 15),
            Duration::from_millis((0..15).map(|i| (3u64 << i).min(120_000)).sum())
        );
        let proc = TcpInfo {
            unacked_bytes: 64,
            retransmits: 8,
            rto_ms: Some(51_200),
            ..TcpInfo::default()
        };
        assert_eq!(
            half_open(&proc, Duration::from_secs(30)).map(|h| h.unacked_for),
            Some(Duration::from_millis(51_000))
        );
        assert_eq!(half_open(&proc, Duration::from_secs(60)), None);
        // Without an rto there is no telling.
        let bare = TcpInfo {
            rto_ms: None,
            ..proc
        };
        assert_eq!(half_open(&bare, Duration::from_secs(1)), None);
    }
}
