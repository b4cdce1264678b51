//! The connection rule: which sockets are this client's connections to NATS, and whether
//! there are enough of them. Pure: sockets and policy in; nothing here reads a socket.

use super::cidr::Cidr;
use crate::facts::{Socket, TcpState};
use std::collections::{BTreeMap, HashMap};

/// What counts as "this client holds its connection", and what to do when it does not.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Remote ports of the NATS servers (the client side of a connection).
    pub ports: Vec<u16>,
    /// When not empty, the peer must be in one of these.
    pub remotes: Vec<Cidr>,
    pub min_connections: usize,
    /// `--server` was given: a missing connection is a fault only if the server answers.
    pub server: bool,
    pub when_server_down: WhenServerDown,
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
/// process when `owned` (socket inode → holding PID) is given.
pub fn connections(
    sockets: &[Socket],
    policy: &Policy,
    owned: Option<&HashMap<u64, u32>>,
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
        } else {
            found.others.push(s.clone());
        }
    }
    found.established.sort();
    found.others.sort();
    found
}

pub fn connected(connections: &Connections, policy: &Policy) -> bool {
    connections.established.len() >= policy.min_connections
}
