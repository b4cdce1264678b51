//! The connection rule: which sockets are this client's connections to NATS, and whether
//! there are enough of them. Pure: sockets and policy in; nothing here reads a socket.

use crate::prelude::*;

use super::cidr::Cidr;
use crate::facts::{same_address as same, Holder, Identity, Route, ServerAnswer, Socket};
use crate::facts::{TcpInfo, TcpState, Via};
use alloc::collections::BTreeMap;
use core::net::SocketAddr;
use core::time::Duration;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
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
    /// The routes through which a kept socket counts (its remote is a route's `held_as`, not
    /// an address the policy names), each once.
    pub routes: Vec<Route>,
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

/// Keeps the sockets that are connections of this client: held by the process when `owned`
/// (socket inode → its holder) is given, and to a server as the policy names it, by either
/// name the kernel's tuple has. A socket's remote is what the kernel holds (where a
/// socket-level load balancer sent its `connect()`); a `route` says which server address it
/// stands for. The socket counts when its remote, or the address a route says it stands for,
/// has its port in `ports` (never the local port: that is a server's accepted side) and its
/// address in `remotes`. The probe's own connections (a `Via::SocketLb` route's) never count.
pub fn connections(
    sockets: &[Socket],
    policy: &Policy,
    owned: Option<&BTreeMap<u64, Holder>>,
    routes: &[Route],
) -> Connections {
    let mut found = Connections::default();
    let mut through = Vec::new();
    let mine = sockets.iter().filter(|s| {
        if !owned.is_none_or(|inodes| inodes.contains_key(&s.inode)) || probes_own(s, routes) {
            return false;
        }
        if names(policy, s.remote) {
            return true;
        }
        let route = routes
            .iter()
            .find(|r| leads_to(r, s) && names(policy, r.dialled));
        through.extend(route);
        route.is_some()
    });
    for s in mine {
        if s.state == TcpState::Established {
            found.established.push(s.clone());
            let half = policy
                .half_open_after
                .zip(s.info.as_ref())
                .and_then(|(after, info)| half_open(info, after));
            found.half_open.extend(half.map(|h| (s.clone(), h)));
        } else {
            found.others.push(s.clone());
        }
    }
    found.established.sort();
    found.others.sort();
    found.half_open.sort_by(|a, b| a.0.cmp(&b.0));
    through.sort();
    through.dedup();
    found.routes = through;
    found
}

/// Where a connection to each server may be held besides the address dialled, from what its
/// answer showed: the probe's own connection held elsewhere (`Via::SocketLb`: socket-level
/// load balancing rewrote its `connect()`), and each cluster member the server announced
/// (`Via::ClusterPeer`: a client reconnects to them directly). Only for a server that
/// answered as NATS; an address equal to the one dialled is no route.
pub fn routes(servers: &[ServerAnswer]) -> Vec<Route> {
    let mut found = Vec::new();
    for a in servers.iter().filter(|a| a.answer.is_nats()) {
        let Some(reached) = a.reached else { continue };
        if let Some(held_as) = reached.held_as.filter(|h| !same(*h, reached.dialled)) {
            found.push(Route {
                dialled: reached.dialled,
                held_as,
                via: Via::SocketLb {
                    probe: reached.local,
                },
            });
        }
        found.extend(
            a.peers
                .iter()
                .filter(|p| !same(**p, reached.dialled))
                .map(|&held_as| Route {
                    dialled: reached.dialled,
                    held_as,
                    via: Via::ClusterPeer,
                }),
        );
    }
    found
}

/// The sockets that may be held as another backend of a server behind socket-level load
/// balancing, whose address to ask (`same_nats`): ESTABLISHED, the client's, not counted, not
/// the probe's own, to the port where the probe's own connection was held (the Service's
/// target port). Their addresses, each once, at most `max`.
pub fn candidates(
    sockets: &[Socket],
    owned: Option<&BTreeMap<u64, Holder>>,
    counted: &Connections,
    routes: &[Route],
    max: usize,
) -> Vec<SocketAddr> {
    let ports: Vec<u16> = routes
        .iter()
        .filter(|r| matches!(r.via, Via::SocketLb { .. }))
        .map(|r| r.held_as.port())
        .collect();
    let mut found: Vec<SocketAddr> = Vec::new();
    for s in sockets {
        let eligible = s.state == TcpState::Established
            && ports.contains(&s.remote.port())
            && owned.is_none_or(|inodes| inodes.contains_key(&s.inode))
            && !probes_own(s, routes)
            && !counted.established.contains(s)
            && !found.iter().any(|f| same(*f, s.remote));
        if eligible && found.len() < max {
            found.push(s.remote);
        }
    }
    found
}

/// The routes to the asked addresses that answered as the same NATS as a URL whose
/// connection the kernel held elsewhere: the same cluster (by name), or the same server. A
/// Service's other backends, found without waiting for the probe's own connect to land there.
pub fn same_nats(servers: &[ServerAnswer], asked: &[(SocketAddr, Option<Identity>)]) -> Vec<Route> {
    let mut found = Vec::new();
    for a in servers {
        let Some(theirs) = &a.identity else { continue };
        for r in routes(core::slice::from_ref(a))
            .into_iter()
            .filter(|r| matches!(r.via, Via::SocketLb { .. }))
        {
            for (addr, identity) in asked {
                let member = identity.as_ref().is_some_and(|i| {
                    i.server_id == theirs.server_id
                        || i.cluster.is_some() && i.cluster == theirs.cluster
                });
                if member && addr.port() == r.held_as.port() {
                    found.push(Route {
                        dialled: r.dialled,
                        held_as: *addr,
                        via: Via::SameNats,
                    });
                }
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Whether the policy names a server address: its port is one of `ports`, its address in
/// `remotes` (any, when none is given).
fn names(policy: &Policy, addr: SocketAddr) -> bool {
    policy.ports.contains(&addr.port())
        && (policy.remotes.is_empty() || policy.remotes.iter().any(|c| c.contains(addr.ip())))
}

/// Whether the socket is one the route says stands for its `dialled`: to its `held_as`, and
/// for a route remembered from a counted connection, that connection (the same local address).
fn leads_to(r: &Route, s: &Socket) -> bool {
    same(r.held_as, s.remote)
        && match r.via {
            Via::Counted { local } => same(local, s.local),
            _ => true,
        }
}

/// The probe's own connection to a server, as a route learned from it shows it.
fn probes_own(s: &Socket, routes: &[Route]) -> bool {
    routes.iter().any(|r| match r.via {
        Via::SocketLb { probe } => same(probe, s.local) && same(r.held_as, s.remote),
        _ => false,
    })
}

/// The server address a kept socket stands for, when a route made it count.
pub fn stands_for(connections: &Connections, remote: SocketAddr) -> Option<SocketAddr> {
    connections
        .routes
        .iter()
        .find(|r| same(r.held_as, remote))
        .map(|r| r.dialled)
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
fn retransmission_time(rto_ms: u32, n: u32) -> Duration {
    let most = crate::timing::TCP_RTO_MAX.as_millis() as u64;
    let first = u64::from(rto_ms >> n.min(31));
    let total: u64 = (0..n.min(64))
        .map(|i| first.saturating_mul(1u64 << i.min(40)).min(most))
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
    use crate::facts::Reached;

    fn sock(local: &str, remote: &str, state: TcpState) -> Socket {
        Socket {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            state,
            inode: 0,
            uid: 0,
            info: None,
            diag: None,
        }
    }

    fn policy(ports: &[u16], remotes: &[&str]) -> Policy {
        Policy {
            ports: ports.to_vec(),
            remotes: remotes.iter().map(|r| r.parse().unwrap()).collect(),
            min_connections: 1,
            half_open_after: None,
            server: true,
            when_server_down: WhenServerDown::Pass,
            startup: false,
        }
    }

    fn route(dialled: &str, held_as: &str, via: Via) -> Route {
        Route {
            dialled: dialled.parse().unwrap(),
            held_as: held_as.parse().unwrap(),
            via,
        }
    }

    /// Under socket-level load balancing the client's socket holds the backend's tuple; with
    /// the route the probe's own connection showed, it counts for the Service's address the
    /// policy names (port and `--remote`), and so does an IPv4-mapped one. Without the route,
    /// or when the Service's address is not one the policy names, it does not. The probe's own
    /// connection, through the same rewrite, never counts.
    #[test]
    fn a_socket_counts_for_the_address_a_route_says_it_stands_for() {
        use TcpState::*;
        let lb = Via::SocketLb {
            probe: "10.244.1.17:40000".parse().unwrap(),
        };
        let routes = [route("10.96.0.10:4222", "10.244.0.9:14222", lb)];
        let client = sock("10.244.1.17:51828", "10.244.0.9:14222", Established);
        let mapped = sock(
            "[::ffff:10.244.1.17]:51830",
            "[::ffff:10.244.0.9]:14222",
            Established,
        );
        let probe = sock("10.244.1.17:40000", "10.244.0.9:14222", Established);
        let table = [client.clone(), mapped.clone(), probe];
        let service = policy(&[4222], &["10.96.0.0/12"]);
        let c = connections(&table, &service, None, &routes);
        assert_eq!(c.established, [client.clone(), mapped.clone()]);
        assert_eq!(c.routes, routes);
        assert_eq!(stands_for(&c, client.remote), Some(routes[0].dialled));
        assert!(connected(&c, &service));
        // Without the route: nothing at 4222 on the Service CIDR.
        assert_eq!(connections(&table, &service, None, &[]).established, []);
        // The policy names another Service: the route does not make it count.
        let other = policy(&[4222], &["10.100.0.0/16"]);
        assert_eq!(connections(&table, &other, None, &routes).established, []);
        // The backend's own tuple, named by the policy, counts without a route.
        let pods = policy(&[14222], &["10.244.0.0/16"]);
        let direct = connections(&table, &pods, None, &[]);
        assert_eq!(direct.established.len(), 3);
        assert_eq!(direct.routes, []);
        // ... and with it, the probe's own connection is still left out.
        assert_eq!(
            connections(&table, &pods, None, &routes).established.len(),
            2
        );
    }

    /// A route remembered from a counted connection is that connection's: a new socket to the
    /// same backend (another local port) is not counted by it.
    #[test]
    fn a_remembered_route_is_its_connections_only() {
        use TcpState::*;
        let remembered = route(
            "10.96.0.10:4222",
            "10.244.0.9:14222",
            Via::Counted {
                local: "10.244.1.17:51828".parse().unwrap(),
            },
        );
        let same_connection = sock("10.244.1.17:51828", "10.244.0.9:14222", Established);
        let another = sock("10.244.1.17:51900", "10.244.0.9:14222", Established);
        let service = policy(&[4222], &["10.96.0.0/12"]);
        let c = connections(
            &[same_connection.clone(), another],
            &service,
            None,
            &[remembered],
        );
        assert_eq!(c.established, [same_connection]);
    }

    /// A cluster member the server announced counts as the URL it was announced through;
    /// a socket to a peer nobody announced does not, and a closed one is not live.
    #[test]
    fn a_cluster_member_announced_counts_for_its_url() {
        use TcpState::*;
        let routes = [route(
            "10.96.0.10:4222",
            "10.244.0.7:4222",
            Via::ClusterPeer,
        )];
        let service = policy(&[4222], &["10.96.0.0/12"]);
        let to_member = sock("10.244.1.17:51828", "10.244.0.7:4222", Established);
        let to_stranger = sock("10.244.1.17:51829", "10.244.0.8:4222", Established);
        let closing = sock("10.244.1.17:51830", "10.244.0.7:4222", CloseWait);
        let table = [to_member.clone(), to_stranger, closing.clone()];
        let c = connections(&table, &service, None, &routes);
        assert_eq!(c.established, [to_member]);
        assert_eq!(c.others, [closing]);
        assert_eq!(live(&c), 1);
    }

    /// Behind socket-level load balancing the probe's connect landed on one backend and the
    /// client's on another: the client's socket to the backends' port is a candidate to ask
    /// (not the counted ones, not the probe's own, not one to another port, not a closing
    /// one); it counts when it answers as the same cluster or the same server, and not when it
    /// answers as another NATS, or not at all.
    #[test]
    fn another_backend_counts_when_it_answers_as_the_same_nats() {
        use TcpState::*;
        let lb = Via::SocketLb {
            probe: "10.244.1.17:40000".parse().unwrap(),
        };
        let learned = route("10.96.0.10:4222", "10.244.0.9:14222", lb);
        let other_backend = sock("10.244.1.17:51828", "10.244.0.8:14222", Established);
        let elsewhere = sock("10.244.1.17:51829", "10.244.0.7:8080", Established);
        let closing = sock("10.244.1.17:51830", "10.244.0.6:14222", CloseWait);
        let probe = sock("10.244.1.17:40000", "10.244.0.9:14222", FinWait1);
        let table = [other_backend.clone(), elsewhere, closing, probe];
        let service = policy(&[4222], &["10.96.0.0/12"]);
        let found = connections(&table, &service, None, &[learned]);
        assert!(!connected(&found, &service));
        let asked = candidates(&table, None, &found, &[learned], 8);
        assert_eq!(asked, [other_backend.remote]);
        assert_eq!(candidates(&table, None, &found, &[learned], 0), []);

        let identity = |id: &str, cluster: Option<&str>| Identity {
            server_id: id.into(),
            cluster: cluster.map(str::to_string),
        };
        let answered = |theirs: Identity| ServerAnswer {
            url: "nats://10.96.0.10:4222".into(),
            answer: crate::facts::Answer::Nats { version: None },
            reached: Some(Reached {
                dialled: learned.dialled,
                local: "10.244.1.17:40000".parse().unwrap(),
                held_as: Some(learned.held_as),
            }),
            peers: Vec::new(),
            identity: Some(theirs),
        };
        let member = Route {
            dialled: learned.dialled,
            held_as: other_backend.remote,
            via: Via::SameNats,
        };
        for (url, peer, counts) in [
            (
                identity("N1", Some("nats")),
                Some(identity("N2", Some("nats"))),
                true,
            ),
            (identity("N1", None), Some(identity("N1", None)), true),
            (
                identity("N1", Some("nats")),
                Some(identity("N2", Some("other"))),
                false,
            ),
            (identity("N1", None), Some(identity("N2", None)), false),
            (identity("N1", Some("nats")), None, false),
        ] {
            let routes = same_nats(&[answered(url.clone())], &[(asked[0], peer.clone())]);
            assert_eq!(routes == [member], counts, "{url:?} {peer:?}");
            let all = [vec![learned], routes].concat();
            let c = connections(&table, &service, None, &all);
            assert_eq!(connected(&c, &service), counts);
        }
    }

    /// The routes a server's answer shows: the probe's own connection held elsewhere, and the
    /// members it announced; none for an address equal to the one dialled (an IPv4-mapped one
    /// too), none when the kernel's tuple was not found, none from a server that is not NATS.
    #[test]
    fn the_routes_an_answer_shows() {
        let answer = |held_as: Option<&str>, peers: &[&str], nats: bool| ServerAnswer {
            url: "nats://10.96.0.10:4222".into(),
            answer: match nats {
                true => crate::facts::Answer::Nats { version: None },
                false => crate::facts::Answer::NotNats("HTTP".into()),
            },
            reached: Some(Reached {
                dialled: "10.96.0.10:4222".parse().unwrap(),
                local: "10.244.1.17:40000".parse().unwrap(),
                held_as: held_as.map(|h| h.parse().unwrap()),
            }),
            peers: peers.iter().map(|p| p.parse().unwrap()).collect(),
            identity: None,
        };
        let lb = Via::SocketLb {
            probe: "10.244.1.17:40000".parse().unwrap(),
        };
        assert_eq!(
            routes(&[answer(
                Some("10.244.0.9:14222"),
                &["10.244.0.7:4222", "10.96.0.10:4222"],
                true
            )]),
            [
                route("10.96.0.10:4222", "10.244.0.9:14222", lb),
                route("10.96.0.10:4222", "10.244.0.7:4222", Via::ClusterPeer)
            ]
        );
        assert_eq!(
            routes(&[answer(Some("[::ffff:10.96.0.10]:4222"), &[], true)]),
            []
        );
        assert_eq!(routes(&[answer(None, &[], true)]), []);
        assert_eq!(
            routes(&[answer(
                Some("10.244.0.9:14222"),
                &["10.244.0.7:4222"],
                false
            )]),
            []
        );
    }

    proptest::proptest! {
        /// Nothing blinder: routes only add sockets, never take one away (but the probe's own
        /// connection), and each socket they add is to a route's `held_as` standing for an
        /// address the policy names.
        #[test]
        fn routes_only_add_sockets_to_what_they_name(
            table in proptest::collection::vec((0u8..4, 0u8..4, 0u8..3, proptest::bool::ANY), 0..8),
            learned in proptest::collection::vec((0u8..4, 0u8..4, 0u8..4, proptest::bool::ANY), 0..4),
            ports in proptest::sample::subsequence(vec![4222u16, 14222, 7422], 1..3),
            cidr in proptest::option::of(0u8..4),
        ) {
            let addr = |host: u8, port: u8| -> SocketAddr {
                let port = [4222, 14222, 7422, 8222][usize::from(port)];
                SocketAddr::from(([10, 96 + host / 2 * 148, 0, host], port))
            };
            let sockets: Vec<Socket> = table
                .iter()
                .enumerate()
                .map(|(i, &(host, port, local, up))| Socket {
                    local: SocketAddr::from(([10, 244, 1, local], 50000 + i as u16)),
                    remote: addr(host, port),
                    state: if up { TcpState::Established } else { TcpState::SynSent },
                    inode: i as u64,
                    uid: 0,
                    info: None,
                    diag: None,
                })
                .collect();
            let routes: Vec<Route> = learned
                .iter()
                .map(|&(d, h, p, lb)| Route {
                    dialled: addr(d, 0),
                    held_as: addr(h, p),
                    via: match lb {
                        true => Via::SocketLb { probe: SocketAddr::from(([10, 244, 1, 0], 50000)) },
                        false => Via::ClusterPeer,
                    },
                })
                .collect();
            let remotes = match cidr {
                Some(host) => vec![format!("{}/32", addr(host, 0).ip()).parse::<Cidr>().unwrap()],
                None => Vec::new(),
            };
            let p = Policy { remotes, ..policy(&ports, &[]) };
            let without = connections(&sockets, &p, None, &[]);
            let with = connections(&sockets, &p, None, &routes);
            for s in without.established.iter().chain(&without.others) {
                let kept = with.established.contains(s) || with.others.contains(s);
                proptest::prop_assert!(kept || probes_own(s, &routes), "{s:?} lost");
            }
            for s in with.established.iter().chain(&with.others) {
                if !(without.established.contains(s) || without.others.contains(s)) {
                    proptest::prop_assert!(
                        routes.iter().any(|r| same(r.held_as, s.remote) && names(&p, r.dialled)),
                        "{s:?} added by no route"
                    );
                }
            }
        }
    }

    /// When the half-open rule first calls a connection whose peer is gone, counted from the
    /// send it never acknowledges: at the first retransmission timeout past `after`. The kernel
    /// retransmits at its timer, `first_rto` (200 ms, its minimum, on a LAN), doubling (up to
    /// two minutes): 0.2, 0.6, 1.4, ... 25.4, 51.0 s after the send. The rule sees the timer
    /// only when it fires: a `--half-open-after 30s` connection is called at 51 s.
    fn half_open_called(after: Duration, first_rto: Duration) -> Duration {
        let first = first_rto.as_millis().min(u128::from(u32::MAX)) as u32;
        (1..64)
            .map(|n| retransmission_time(first.saturating_mul(1 << n.min(31)), n))
            .find(|waited| *waited >= after)
            .unwrap_or(Duration::MAX)
    }

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
