//! The verdict core: what the observations mean. Pure: observations and policy in, verdict
//! out; nothing here reads a socket, a file or a clock.

use crate::cidr::Cidr;
use crate::sockets::{Socket, TcpState};
use std::collections::{BTreeMap, HashSet};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum WhenServerDown {
    /// healthy: restarting every pod during an outage only adds a restart storm
    #[default]
    Pass,
    /// unhealthy: restart anyway
    Fail,
}

/// What the servers said, reduced to what the verdict needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// At least one sent its INFO line.
    Answers,
    /// None did: refused, silent, not NATS, unresolvable.
    NotAnswering,
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
/// process when `owned` (its socket inodes) is given.
pub fn connections(
    sockets: &[Socket],
    policy: &Policy,
    owned: Option<&HashSet<u64>>,
) -> Connections {
    let mut found = Connections::default();
    let mine = sockets.iter().filter(|s| {
        policy.ports.contains(&s.remote.port())
            && (policy.remotes.is_empty()
                || policy.remotes.iter().any(|c| c.contains(s.remote.ip())))
            && owned.is_none_or(|inodes| inodes.contains(&s.inode))
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    Healthy,
    Unhealthy,
}

/// Why the verdict is what it is; the formatter turns this into words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// At least `min_connections` ESTABLISHED connections.
    Connected,
    /// Fewer than `min_connections` (usually: none), and no server to ask.
    NotConnected,
    /// Not connected while the server answers: the client gave up. A restart helps.
    ServerAnswers,
    /// Not connected, but the server does not answer either: a restart would not help.
    ServerDown,
    /// Connected, and a `--consumer` is unbound, stalled, losing messages or missing.
    ConsumerFault,
    /// Connected, and a `--consumer` could not be judged (the server could not say).
    ConsumerNotJudged,
}

/// One `--consumer`'s outcome, as the overall verdict needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerHealth {
    Healthy,
    Unhealthy,
    NotJudged,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub health: Health,
    pub reason: Reason,
}

pub fn connected(connections: &Connections, policy: &Policy) -> bool {
    connections.established.len() >= policy.min_connections
}

/// Whether the server must be asked: only when the connection is missing. A client that
/// holds its connection costs the server nothing.
pub fn needs_server(connections: &Connections, policy: &Policy) -> bool {
    policy.server && !connected(connections, policy)
}

/// The overall verdict. Without a connection the consumers are not looked at (the socket
/// already says what is wrong); with one, any consumer fault fails the pod, and a consumer
/// that could not be judged counts like a server that is down.
pub fn decide(
    connections: &Connections,
    server: Option<ServerState>,
    consumers: &[ConsumerHealth],
    policy: &Policy,
) -> Verdict {
    use Health::*;
    let down = match policy.when_server_down {
        WhenServerDown::Pass => Healthy,
        WhenServerDown::Fail => Unhealthy,
    };
    let (health, reason) = if connected(connections, policy) {
        if consumers.contains(&ConsumerHealth::Unhealthy) {
            (Unhealthy, Reason::ConsumerFault)
        } else if consumers.contains(&ConsumerHealth::NotJudged) {
            (down, Reason::ConsumerNotJudged)
        } else {
            (Healthy, Reason::Connected)
        }
    } else {
        match policy.server.then_some(server).flatten() {
            None => (Unhealthy, Reason::NotConnected),
            Some(ServerState::Answers) => (Unhealthy, Reason::ServerAnswers),
            Some(ServerState::NotAnswering) => (down, Reason::ServerDown),
        }
    };
    Verdict { health, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock(local: &str, remote: &str, state: TcpState, inode: u64) -> Socket {
        Socket {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            state,
            inode,
            uid: 0,
        }
    }

    fn policy(ports: &[u16], remotes: &[&str], min: usize) -> Policy {
        Policy {
            ports: ports.to_vec(),
            remotes: remotes.iter().map(|r| r.parse().unwrap()).collect(),
            min_connections: min,
            server: false,
            when_server_down: WhenServerDown::Pass,
        }
    }

    fn table() -> Vec<Socket> {
        use TcpState::*;
        vec![
            sock("10.244.1.17:51828", "10.96.14.2:4222", Established, 11),
            sock("10.244.1.17:51830", "10.96.14.3:4222", SynSent, 12),
            sock("10.244.1.17:4222", "10.244.9.9:50000", Established, 13),
            sock(
                "[::ffff:10.244.1.17]:40330",
                "[::ffff:10.96.14.2]:4222",
                Established,
                14,
            ),
            sock("[fd00::11]:36652", "[fd00:10:96::a]:7422", CloseWait, 15),
            sock("10.244.1.17:51802", "10.96.14.2:4222", TimeWait, 0),
        ]
    }

    /// ports, remotes, min connections, owned inodes → established, others, verdict.
    type Row = (
        &'static [u16],
        &'static [&'static str],
        usize,
        Option<&'static [u64]>,
        usize,
        usize,
        Health,
    );

    /// The decision table for the connection check.
    #[test]
    fn decision_table() {
        use Health::*;
        let rows: &[Row] = &[
            // established, others, health
            (&[4222], &[], 1, None, 2, 2, Healthy),
            (&[4222], &[], 3, None, 2, 2, Unhealthy),
            (&[7422], &[], 1, None, 0, 1, Unhealthy),
            (&[4222, 7422], &[], 1, None, 2, 3, Healthy),
            (&[4222], &["10.96.14.2"], 1, None, 2, 1, Healthy),
            (&[4222], &["10.96.14.3/32"], 1, None, 0, 1, Unhealthy),
            (&[4222], &["192.0.2.0/24"], 1, None, 0, 0, Unhealthy),
            (&[4222], &[], 1, Some(&[12]), 0, 1, Unhealthy),
            (&[4222], &[], 1, Some(&[14]), 1, 0, Healthy),
            (&[4222], &[], 1, Some(&[]), 0, 0, Unhealthy),
            (&[], &[], 1, None, 0, 0, Unhealthy),
        ];
        for &(ports, remotes, min, owned, est, others, health) in rows {
            let p = policy(ports, remotes, min);
            let owned: Option<HashSet<u64>> = owned.map(|o| o.iter().copied().collect());
            let c = connections(&table(), &p, owned.as_ref());
            let row = format!("{ports:?} {remotes:?} min {min} owned {owned:?}");
            assert_eq!(
                (c.established.len(), c.others.len()),
                (est, others),
                "{row}"
            );
            assert_eq!(decide(&c, None, &[], &p).health, health, "{row}");
        }
    }

    #[test]
    fn a_servers_accepted_socket_never_counts() {
        let c = connections(&table(), &policy(&[4222], &[], 1), None);
        assert!(c
            .established
            .iter()
            .chain(&c.others)
            .all(|s| s.local.port() != 4222));
    }

    #[test]
    fn syn_sent_is_reported_but_does_not_pass() {
        let p = policy(&[4222], &["10.96.14.3"], 1);
        let c = connections(&table(), &p, None);
        assert_eq!(c.other_states(), BTreeMap::from([(TcpState::SynSent, 1)]));
        assert_eq!(decide(&c, None, &[], &p).health, Health::Unhealthy);
    }

    /// Restart only when a restart helps: (connected, --server, what it said, when down) →
    /// whether the server is asked at all, and the verdict.
    #[test]
    fn server_decision_table() {
        use Health::*;
        use ServerState::*;
        use WhenServerDown::*;
        #[rustfmt::skip]
        let rows = [
            (true,  false, None,               Pass, false, Healthy,   Reason::Connected),
            (true,  true,  None,               Pass, false, Healthy,   Reason::Connected),
            (true,  true,  None,               Fail, false, Healthy,   Reason::Connected),
            (false, false, None,               Pass, false, Unhealthy, Reason::NotConnected),
            (false, true,  Some(Answers),      Pass, true,  Unhealthy, Reason::ServerAnswers),
            (false, true,  Some(Answers),      Fail, true,  Unhealthy, Reason::ServerAnswers),
            (false, true,  Some(NotAnswering), Pass, true,  Healthy,   Reason::ServerDown),
            (false, true,  Some(NotAnswering), Fail, true,  Unhealthy, Reason::ServerDown),
        ];
        for (is_connected, server, state, when, asked, health, reason) in rows {
            let mut p = policy(&[4222], &[], 1);
            p.server = server;
            p.when_server_down = when;
            let table = table();
            let c = if is_connected {
                connections(&table, &p, None)
            } else {
                Connections::default()
            };
            let row = format!("{is_connected} {server} {state:?} {when:?}");
            assert_eq!(needs_server(&c, &p), asked, "{row}");
            assert_eq!(
                decide(&c, state, &[], &p),
                Verdict { health, reason },
                "{row}"
            );
        }
    }

    /// Consumers count only with a connection; a fault fails the pod; not judged follows
    /// --when-server-down.
    #[test]
    fn consumer_decision_table() {
        use ConsumerHealth as C;
        use Health::*;
        #[rustfmt::skip]
        let rows: [(bool, &[C], WhenServerDown, Health, Reason); 8] = [
            (true,  &[],                        WhenServerDown::Pass, Healthy,   Reason::Connected),
            (true,  &[C::Healthy, C::Healthy],  WhenServerDown::Pass, Healthy,   Reason::Connected),
            (true,  &[C::Healthy, C::Unhealthy], WhenServerDown::Pass, Unhealthy, Reason::ConsumerFault),
            (true,  &[C::NotJudged, C::Unhealthy], WhenServerDown::Pass, Unhealthy, Reason::ConsumerFault),
            (true,  &[C::NotJudged],            WhenServerDown::Pass, Healthy,   Reason::ConsumerNotJudged),
            (true,  &[C::NotJudged],            WhenServerDown::Fail, Unhealthy, Reason::ConsumerNotJudged),
            (false, &[C::Unhealthy],            WhenServerDown::Pass, Healthy,   Reason::ServerDown),
            (false, &[C::Healthy],              WhenServerDown::Pass, Unhealthy, Reason::ServerAnswers),
        ];
        for (is_connected, consumers, when, health, reason) in rows {
            let mut p = policy(&[4222], &[], 1);
            p.server = true;
            p.when_server_down = when;
            let c = if is_connected {
                connections(&table(), &p, None)
            } else {
                Connections::default()
            };
            let server = (!is_connected).then_some(match reason {
                Reason::ServerAnswers => ServerState::Answers,
                _ => ServerState::NotAnswering,
            });
            assert_eq!(
                decide(&c, server, consumers, &p),
                Verdict { health, reason },
                "{consumers:?} {when:?}"
            );
        }
    }

    #[test]
    fn too_few_connections_with_the_server_answering_is_unhealthy() {
        let mut p = policy(&[4222], &[], 3);
        p.server = true;
        let c = connections(&table(), &p, None);
        assert_eq!(c.established.len(), 2);
        assert!(needs_server(&c, &p));
        assert_eq!(
            decide(&c, Some(ServerState::Answers), &[], &p).reason,
            Reason::ServerAnswers
        );
    }
}
