//! The exact lookup's rules: which runs it may decide, what a healthy run keeps of the
//! connections it counted, and which of them the kernel's answers show unchanged. Unchanged is
//! what a walk of the table would find too (the same socket, ESTABLISHED, held as before); the
//! connection rule (`rules::connection`) then judges those as it judges a walk's, half-open
//! included. So the lookup can only confirm what a walk would confirm: anything less is
//! decided by a walk.

use crate::prelude::*;

use super::connection::{connected, stands_for, Connections, Policy};
use crate::facts::{Holder, KnownSocket, Rechecked, Socket, TcpState};
use alloc::collections::BTreeMap;

/// Whether the connections alone may decide a run: a check that also asks the server about
/// `asked` consumers or subscriptions matches every socket of the pod against what the server
/// says (a new connection, the one holding a subscription), and only a walk sees them all.
pub fn may_decide(asked: usize) -> bool {
    asked == 0
}

pub use crate::timing::MAX_REMEMBERED;

/// What to keep for the next run: each live connection counted (ESTABLISHED, not half-open)
/// with its sock_diag identity and, when whose sockets count was named, its holder. Nothing
/// when the run was not healthy by its connections, when a counted one has no identity (the
/// /proc reader), or when there are more than `MAX_REMEMBERED`: a run with nothing remembered
/// walks.
pub fn remember(
    connections: &Connections,
    policy: &Policy,
    owned: Option<&BTreeMap<u64, Holder>>,
) -> Vec<KnownSocket> {
    if !connected(connections, policy) {
        return Vec::new();
    }
    let mut kept = connections
        .established
        .iter()
        .filter(|s| !connections.half_open.iter().any(|(h, _)| h == *s))
        .map(|s| {
            let holder = match owned {
                None => None,
                Some(owned) => Some(*owned.get(&s.inode)?),
            };
            Some(KnownSocket {
                local: s.local,
                remote: s.remote,
                inode: s.inode,
                diag: s.diag?,
                holder,
                stands_for: stands_for(connections, s.remote),
            })
        })
        .collect::<Option<Vec<_>>>()
        .filter(|k| k.len() <= MAX_REMEMBERED)
        .unwrap_or_default();
    kept.sort();
    kept
}

/// The socket the kernel answered for a remembered connection, when it is that connection as
/// it was: ESTABLISHED (not the listener the lookup falls back to, nor a TIME_WAIT socket,
/// which keeps its parent's cookie), the same inode and cookie, and held as before.
pub fn unchanged(known: &KnownSocket, again: &Rechecked) -> Option<Socket> {
    let s = again.socket.as_ref()?;
    let same = s.state == TcpState::Established
        && s.inode == known.inode
        && s.diag.is_some_and(|d| d.cookie == known.diag.cookie)
        && again.held;
    same.then(|| s.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{DiagId, TcpInfo};
    use crate::rules::connection::{connections, WhenServerDown};
    use core::time::Duration;

    fn policy(min: usize) -> Policy {
        Policy {
            ports: vec![4222],
            remotes: vec![],
            min_connections: min,
            half_open_after: Some(Duration::from_secs(30)),
            server: false,
            when_server_down: WhenServerDown::Pass,
            startup: false,
        }
    }

    fn sock(port: u16, state: TcpState, inode: u64, cookie: Option<u64>) -> Socket {
        Socket {
            local: format!("10.244.1.17:{port}").parse().unwrap(),
            remote: "10.96.14.2:4222".parse().unwrap(),
            state,
            inode,
            uid: 1000,
            info: None,
            diag: cookie.map(|cookie| DiagId {
                cookie,
                interface: 0,
            }),
        }
    }

    fn known(s: &Socket) -> KnownSocket {
        KnownSocket {
            local: s.local,
            remote: s.remote,
            inode: s.inode,
            diag: s.diag.unwrap(),
            holder: None,
            stands_for: None,
        }
    }

    /// The data of a connection whose peer is gone: unacknowledged through 8 timeouts.
    fn dead() -> TcpInfo {
        TcpInfo {
            unacked_bytes: 1229,
            retransmits: 8,
            rto_ms: Some(51_200),
            last_ack_recv_ms: Some(53_000),
            ..TcpInfo::default()
        }
    }

    #[test]
    fn only_a_run_judged_by_its_connections_alone() {
        assert!(may_decide(0));
        assert!(!may_decide(1));
    }

    /// A healthy run keeps its live connections, not the half-open or other ones; an unhealthy
    /// one, or one read from /proc, keeps nothing; with an owner, each one's holder.
    #[test]
    fn a_healthy_run_keeps_its_live_connections() {
        let mut half = sock(51829, TcpState::Established, 12, Some(2));
        half.info = Some(dead());
        let table = vec![
            sock(51828, TcpState::Established, 11, Some(1)),
            half,
            sock(51830, TcpState::CloseWait, 13, Some(3)),
        ];
        let c = connections(&table, &policy(1), None, &[]);
        let kept = remember(&c, &policy(1), None);
        assert_eq!(kept, vec![known(&table[0])]);
        assert_eq!(remember(&c, &policy(2), None), vec![], "not healthy");

        let from_proc = vec![sock(51828, TcpState::Established, 11, None)];
        let c = connections(&from_proc, &policy(1), None, &[]);
        assert_eq!(remember(&c, &policy(1), None), vec![], "no identity");

        let holder = Holder { pid: 42, fd: 9 };
        let owned = BTreeMap::from([(11, holder)]);
        let c = connections(&table, &policy(1), Some(&owned), &[]);
        let kept = remember(&c, &policy(1), Some(&owned));
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].holder, Some(holder));

        // Up to MAX_REMEMBERED connections are kept; a pod holding more walks every run.
        let many = |n: u64| -> Vec<Socket> {
            (0..n)
                .map(|i| sock(40000 + i as u16, TcpState::Established, 100 + i, Some(i)))
                .collect()
        };
        for (n, kept) in [(MAX_REMEMBERED, MAX_REMEMBERED), (MAX_REMEMBERED + 1, 0)] {
            let table = many(n as u64);
            let c = connections(&table, &policy(1), None, &[]);
            assert_eq!(
                remember(&c, &policy(1), None).len(),
                kept,
                "{n} connections"
            );
        }
    }

    /// Only the same socket, ESTABLISHED and held as before, is unchanged: a miss, the listener,
    /// a TIME_WAIT or CLOSE_WAIT socket, another inode or cookie, another holder are not.
    #[test]
    fn only_the_same_socket_as_it_was_is_unchanged() {
        let s = sock(51828, TcpState::Established, 11, Some(1));
        let k = known(&s);
        let again = |socket: Option<Socket>, held| Rechecked { socket, held };
        assert_eq!(
            unchanged(&k, &again(Some(s.clone()), true)),
            Some(s.clone())
        );
        assert_eq!(unchanged(&k, &again(None, true)), None);
        assert_eq!(unchanged(&k, &again(Some(s.clone()), false)), None);
        let mut listener = sock(4222, TcpState::Listen, 5, Some(9));
        listener.remote = "0.0.0.0:0".parse().unwrap();
        assert_eq!(unchanged(&k, &again(Some(listener), true)), None);
        let time_wait = sock(51828, TcpState::TimeWait, 0, Some(1));
        assert_eq!(unchanged(&k, &again(Some(time_wait), true)), None);
        let close_wait = sock(51828, TcpState::CloseWait, 11, Some(1));
        assert_eq!(unchanged(&k, &again(Some(close_wait), true)), None);
        let reused = sock(51828, TcpState::Established, 14, Some(2));
        assert_eq!(unchanged(&k, &again(Some(reused), true)), None);
        let other_cookie = sock(51828, TcpState::Established, 11, Some(2));
        assert_eq!(unchanged(&k, &again(Some(other_cookie), true)), None);
    }

    /// An unchanged connection that went half-open is judged as a walk judges it: not live.
    #[test]
    fn an_unchanged_connection_is_still_judged_half_open() {
        let mut s = sock(51828, TcpState::Established, 11, Some(1));
        let k = known(&s);
        s.info = Some(dead());
        let found: Vec<Socket> = unchanged(
            &k,
            &Rechecked {
                socket: Some(s),
                held: true,
            },
        )
        .into_iter()
        .collect();
        let c = connections(&found, &policy(1), None, &[]);
        assert_eq!(c.established.len(), 1);
        assert!(!connected(&c, &policy(1)));
    }
}
