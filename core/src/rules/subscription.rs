//! The own-subscription rule: does one of this pod's connections hold the subscription the
//! app must hold? This pod's ESTABLISHED connections are matched by address and port to the
//! server's connection list. The ADR's open gap: with several replicas in a deliver group the
//! consumer stays bound while one replica is deaf; only the pod can tell which. Where
//! addresses cannot match, it says so and never guesses. A pull consumer has no subscription
//! to hold: its part is what this pod's connections publish (`judge_pull`). Pure.

use crate::prelude::*;

use crate::facts::{Connz, Published, Remembered, ServerConnection, Unknown, Wanted};
use crate::rules::remembered::{self, Found};
use core::net::SocketAddr;
use core::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// This pod's connection holds it.
    Yes {
        by: SocketAddr,
    },
    /// This pod's connection is in the server's list, without it.
    NotByThisConnection {
        connection: SocketAddr,
    },
    /// A pull consumer's part: one of this pod's connections published (a pull request or
    /// an ack) `quiet` ago at most, or nothing was delivered since it last did.
    Pulls {
        by: SocketAddr,
        quiet: Duration,
    },
    /// A pull consumer's part lost: none of this pod's connections published anything for
    /// `quiet`, at least the window, while the consumer delivered `delivered` messages.
    NotPulling {
        connection: SocketAddr,
        quiet: Duration,
        delivered: u64,
    },
    NotJudged(Unknown),
}

/// A subscription's verdict in one word: the JSON's `state`.
pub const STATES: [&str; 4] = ["held", "not_by_this_connection", "not_judged", "carried"];

impl Held {
    /// Its word among `STATES`; `carried`: a run that could not look reports what the last
    /// look saw.
    pub fn state(&self, carried: bool) -> &'static str {
        match self {
            _ if carried => "carried",
            Held::Yes { .. } | Held::Pulls { .. } => "held",
            Held::NotByThisConnection { .. } | Held::NotPulling { .. } => "not_by_this_connection",
            Held::NotJudged(_) => "not_judged",
        }
    }
}

/// Judges `wanted` against this pod's connections (`ours`, local addresses, IPv4 unmapped)
/// and what the server listed.
pub fn judge(wanted: &Wanted, ours: &[SocketAddr], connz: &Result<Connz, Unknown>) -> Held {
    let connz = match connz {
        Ok(c) => c,
        Err(why) => return Held::NotJudged(why.clone()),
    };
    let mine: Vec<&ServerConnection> = remembered::listed(connz)
        .into_iter()
        .filter(|c| ours.contains(&c.addr))
        .collect();
    if let Some(c) = mine.iter().find(|c| holds(c, wanted)) {
        return Held::Yes { by: c.addr };
    }
    // A server holding the account's connections did not answer: its connection, or its
    // subscription, may be the one missing.
    if let Some(why) = &connz.incomplete {
        return Held::NotJudged(Unknown::NotListed(why.clone()));
    }
    if let Some(c) = mine.first() {
        return Held::NotByThisConnection { connection: c.addr };
    }
    // Not listed, but the lists are not every server's: no evidence either way.
    if let Some(why) = &connz.out_of_sight {
        return Held::NotJudged(Unknown::OutOfSight(why.clone()));
    }
    if connz.all.is_none() {
        return Held::NotJudged(Unknown::Failed(
            "the server's whole connection list could not be read".into(),
        ));
    }
    // Does the server see this pod's addresses at all? Its view of the probe's own
    // connection says.
    // It does, and none that answered lists this pod's socket. Yet an ESTABLISHED socket
    // whose peer answers (the socket check counts no half-open one) is held open by a server:
    // one that did not answer in time (a server throttled for longer than the others'
    // answers took, which says nothing of its client connections), or one listing it in
    // another account than the probe's. No evidence that the pod lost its connection, and a
    // late answer is no evidence of a configuration either: not judged, transient.
    match connz.probe_seen_as {
        Some(seen) if ours.iter().any(|o| o.ip() == seen.ip()) => {
            let ours: Vec<String> = ours.iter().map(ToString::to_string).collect();
            Held::NotJudged(Unknown::NotListed(format!(
                "no server that answered lists a connection from {}: it is on a server that did not answer in time, or in another account than the probe's",
                ours.join(", ")
            )))
        }
        seen => Held::NotJudged(Unknown::CannotMatch(seen)),
    }
}

/// What a pull consumer had done by a look: its creation time and `delivered.consumer_seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Work {
    pub created: String,
    pub delivered: u64,
}

/// A pull consumer's part: does this pod still take part? Its connections at the server
/// (`now`, each with its `in_msgs`: pull requests and acks are publishes) against what the
/// last look kept. A live pull loop publishes at least once per pull request's expiry, busy
/// or idle, and a handler acks what it finishes; so none of the pod's connections publishing
/// for a whole window while the consumer delivered to others is a pod that no longer takes
/// part, and one the kubelet's restart helps. Other connections, or another client's, start
/// over (a reconnect is never a fault), as does a consumer made again; nothing delivered since
/// is an idle group, never judged deaf. Returns the part's verdict and what to keep.
pub fn judge_pull(
    now: Vec<(Remembered, u64)>,
    before: Option<&Published>,
    work: &Work,
    window: Duration,
    now_ms: i64,
) -> (Held, Published) {
    let by = now.first().map(|(c, _)| c.local);
    let fresh = |now: Vec<(Remembered, u64)>| Published {
        connections: now,
        created: work.created.clone(),
        delivered: work.delivered,
        moved_at_ms: now_ms,
    };
    let Some(by) = by else {
        return (
            Held::NotJudged(Unknown::Failed(
                "no connection of this pod is listed".into(),
            )),
            fresh(now),
        );
    };
    let same = before.filter(|b| {
        b.created == work.created
            && b.moved_at_ms <= now_ms
            && b.connections.len() == now.len()
            && b.connections.iter().all(|(c, _)| {
                now.iter()
                    .any(|(n, _)| n.cid == c.cid && n.server == c.server && n.local == c.local)
            })
    });
    let moved = same.and_then(|before| {
        now.iter().find(|(n, published)| {
            before
                .connections
                .iter()
                .any(|(c, was)| c.cid == n.cid && c.server == n.server && was != published)
        })
    });
    // Other connections than before (or a consumer made again), or one that published since:
    // taking part, from now.
    let (Some(before), None) = (same, moved) else {
        let held = Held::Pulls {
            by: moved.map_or(by, |(c, _)| c.local),
            quiet: Duration::ZERO,
        };
        return (held, fresh(now));
    };
    let quiet = Duration::from_millis((now_ms - before.moved_at_ms) as u64);
    let delivered = work.delivered.saturating_sub(before.delivered);
    let held = match quiet >= window && delivered > 0 {
        true => Held::NotPulling {
            connection: by,
            quiet,
            delivered,
        },
        false => Held::Pulls { by, quiet },
    };
    (held, before.clone())
}

/// Whether a pull consumer's part needs its connections read this look: only when a reading
/// could find the pod not taking part, i.e. the consumer delivered since the last reading and
/// the last move seen is a window old (and the clock did not go back). Else what the part is
/// (taking part, quiet since the last move) and why it was not read (`Found::NothingDelivered`
/// or `Found::WithinWindow`).
pub fn unread(
    kept: &Published,
    work: &Work,
    window: Duration,
    now_ms: i64,
) -> Option<(Held, Found)> {
    let by = kept.connections.first()?.0.local;
    let quiet =
        Duration::from_millis(now_ms.checked_sub(kept.moved_at_ms).filter(|q| *q >= 0)? as u64);
    let why = match kept.created == work.created && kept.delivered == work.delivered {
        true => Found::NothingDelivered,
        false if quiet < window => Found::WithinWindow,
        false => return None,
    };
    Some((Held::Pulls { by, quiet }, why))
}

/// Whether a listed connection holds `w`: the same subject, in the same queue group.
pub fn holds(c: &ServerConnection, w: &Wanted) -> bool {
    c.subscriptions
        .as_ref()
        .is_some_and(|subs| subs.iter().any(|(s, q)| *s == w.subject && *q == w.queue))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each verdict has its word among `STATES` (the JSON's `state`, `/metrics`' gauge per state),
    /// and every word is some verdict's; a carried verdict says `carried` whatever it was.
    #[test]
    fn each_verdict_has_its_word() {
        let by = "10.0.0.2:40000".parse().unwrap();
        let quiet = Duration::from_secs(4);
        let words = [
            (Held::Yes { by }, "held"),
            (Held::Pulls { by, quiet }, "held"),
            (
                Held::NotByThisConnection { connection: by },
                "not_by_this_connection",
            ),
            (
                Held::NotPulling {
                    connection: by,
                    quiet,
                    delivered: 1,
                },
                "not_by_this_connection",
            ),
            (Held::NotJudged(Unknown::Deadline), "not_judged"),
        ];
        for (held, word) in &words {
            assert_eq!(held.state(false), *word, "{held:?}");
            assert_eq!(held.state(true), "carried", "{held:?}");
        }
        for state in STATES {
            assert!(state == "carried" || words.iter().any(|(_, w)| *w == state));
        }
    }

    fn conn(addr: &str, subs: Option<&[(&str, Option<&str>)]>) -> ServerConnection {
        ServerConnection {
            addr: addr.parse().unwrap(),
            name: None,
            cid: 0,
            account_connections: 0,
            in_msgs: 0,
            server: None,
            subscriptions: subs.map(|s| {
                s.iter()
                    .map(|(a, b)| (a.to_string(), b.map(str::to_string)))
                    .collect()
            }),
        }
    }

    fn wanted() -> Wanted {
        Wanted {
            subject: "deliver.D".into(),
            queue: Some("D".into()),
        }
    }

    fn ours() -> Vec<SocketAddr> {
        vec!["10.200.0.2:51828".parse().unwrap()]
    }

    fn connz(
        holding: Vec<ServerConnection>,
        all: Option<Vec<ServerConnection>>,
        probe: Option<&str>,
    ) -> Result<Connz, Unknown> {
        Ok(Connz {
            source: "test".into(),
            holding,
            all,
            probe_seen_as: probe.map(|p| p.parse().unwrap()),
            servers: 1,
            out_of_sight: None,
            incomplete: None,
        })
    }

    /// A server holding the account's connections did not answer in time (it walks all of
    /// them, and answers last): a connection listed without the subscription, or not listed
    /// at all, is no evidence then. One listed holding it still is.
    #[test]
    fn an_incomplete_list_is_no_evidence_of_absence() {
        let why = "server n1 holds connections of this account and did not answer in time";
        let incomplete = |holding, all| {
            connz(holding, all, Some("10.200.0.2:51900")).map(|c| Connz {
                incomplete: Some(why.into()),
                ..c
            })
        };
        let listed = vec![conn("10.200.0.2:51828", None)];
        assert_eq!(
            judge(&wanted(), &ours(), &incomplete(vec![], Some(listed))),
            Held::NotJudged(Unknown::NotListed(why.into()))
        );
        assert_eq!(
            judge(&wanted(), &ours(), &incomplete(vec![], Some(vec![]))),
            Held::NotJudged(Unknown::NotListed(why.into()))
        );
        let group = [("deliver.D", Some("D"))];
        let holding = vec![conn("10.200.0.2:51828", Some(&group))];
        assert_eq!(
            judge(&wanted(), &ours(), &incomplete(holding, None)),
            Held::Yes {
                by: "10.200.0.2:51828".parse().unwrap()
            }
        );
    }

    /// Two replicas in one deliver group, one deaf: the consumer stays bound; each pod
    /// tells which it is.
    #[test]
    fn the_deaf_replica_of_a_deliver_group() {
        let group = [("deliver.D", Some("D"))];
        let holding = vec![conn("10.200.0.3:40000", Some(&group))];
        let all = vec![
            conn("10.200.0.2:51828", None),
            conn("10.200.0.3:40000", None),
            conn("10.200.0.2:51900", None),
        ];
        // The deaf one: its connection is listed, without the subscription.
        assert_eq!(
            judge(
                &wanted(),
                &ours(),
                &connz(holding.clone(), Some(all), Some("10.200.0.2:51900"))
            ),
            Held::NotByThisConnection {
                connection: "10.200.0.2:51828".parse().unwrap()
            }
        );
        // The other replica holds it.
        let theirs = vec!["10.200.0.3:40000".parse().unwrap()];
        assert_eq!(
            judge(&wanted(), &theirs, &connz(holding, None, None)),
            Held::Yes {
                by: "10.200.0.3:40000".parse().unwrap()
            }
        );
    }

    #[test]
    fn the_same_subject_in_another_group_is_not_it() {
        let holding = vec![conn("10.200.0.2:51828", Some(&[("deliver.D", None)]))];
        assert!(matches!(
            judge(&wanted(), &ours(), &connz(holding, None, None)),
            Held::NotByThisConnection { .. }
        ));
    }

    /// No connection from this pod's socket: a fault where the server sees this pod's
    /// address (the probe's own connection comes from it); where it does not (NAT, a proxy, a
    /// sidecar), not judged: never a guess.
    #[test]
    fn no_connection_or_cannot_match() {
        let all = vec![
            conn("10.200.0.9:1234", None),
            conn("10.200.0.2:51900", None),
        ];
        assert_eq!(
            judge(
                &wanted(),
                &ours(),
                &connz(vec![], Some(all.clone()), Some("10.200.0.2:51900"))
            ),
            Held::NotJudged(Unknown::NotListed(
                "no server that answered lists a connection from 10.200.0.2:51828: it is on a server that did not answer in time, or in another account than the probe's".into()
            ))
        );
        assert_eq!(
            judge(
                &wanted(),
                &ours(),
                &connz(vec![], Some(all.clone()), Some("10.96.0.1:7000"))
            ),
            Held::NotJudged(Unknown::CannotMatch(Some(
                "10.96.0.1:7000".parse().unwrap()
            )))
        );
        assert_eq!(
            judge(&wanted(), &ours(), &connz(vec![], Some(all), None)),
            Held::NotJudged(Unknown::CannotMatch(None))
        );
        assert!(matches!(
            judge(&wanted(), &ours(), &Err(Unknown::Deadline)),
            Held::NotJudged(Unknown::Deadline)
        ));
    }

    /// Behind a leaf node: a monitoring port whose server has leaf nodes cannot say the pod
    /// has no connection (its connection may be on one), while one that lists the pod's
    /// connection still can say it holds the subscription, or not.
    #[test]
    fn a_leaf_node_out_of_sight_is_no_evidence() {
        let all = vec![conn("10.200.0.2:51900", None)];
        let mut hidden = connz(vec![], Some(all), Some("10.200.0.2:51900"));
        if let Ok(c) = &mut hidden {
            c.out_of_sight = Some("the server has leaf nodes (edge)".into());
        }
        assert_eq!(
            judge(&wanted(), &ours(), &hidden),
            Held::NotJudged(Unknown::OutOfSight(
                "the server has leaf nodes (edge)".into()
            ))
        );
        let mut listed = connz(vec![conn("10.200.0.2:51828", None)], None, None);
        if let Ok(c) = &mut listed {
            c.out_of_sight = Some("leaf node edge".into());
        }
        assert!(matches!(
            judge(&wanted(), &ours(), &listed),
            Held::NotByThisConnection { .. }
        ));
    }

    fn pulled(cid: u64, inode: u64, published: u64) -> (Remembered, u64) {
        let remembered = Remembered {
            server: crate::facts::ServerIdent {
                name: "n1".into(),
                id: "NID1".into(),
            },
            cid,
            local: "10.200.0.2:51828".parse().unwrap(),
            inode,
            held_at_ms: None,
            account_connections: 3,
        };
        (remembered, published)
    }

    fn work(created: &str, delivered: u64) -> Work {
        Work {
            created: created.into(),
            delivered,
        }
    }

    /// A pull consumer's part, look after look: a move is taking part; quiet inside the
    /// window, or with nothing delivered since, is too; quiet for the window while the
    /// consumer delivered is not; another connection, a consumer made again or a clock gone
    /// back starts over.
    #[test]
    fn a_pull_consumers_part() {
        const T: i64 = 1_800_000_000_000;
        let window = Duration::from_secs(60);
        let c = "2026-12-06T00:00:00Z";
        let (held, first) = judge_pull(vec![pulled(7, 1, 10)], None, &work(c, 5), window, T);
        assert!(matches!(held, Held::Pulls { quiet, .. } if quiet.is_zero()));
        assert_eq!((first.moved_at_ms, first.delivered), (T, 5));
        let at = |secs: i64, published: u64, delivered: u64| {
            judge_pull(
                vec![pulled(7, 1, published)],
                Some(&first),
                &work(c, delivered),
                window,
                T + secs * 1000,
            )
        };
        // Published since: taking part, counted from now.
        let (held, kept) = at(90, 11, 50);
        assert!(matches!(held, Held::Pulls { quiet, .. } if quiet.is_zero()));
        assert_eq!((kept.moved_at_ms, kept.delivered), (T + 90_000, 50));
        // Quiet inside the window, work delivered: still its part; the count goes on.
        let (held, kept) = at(59, 10, 50);
        assert_eq!(
            held,
            Held::Pulls {
                by: first.connections[0].0.local,
                quiet: Duration::from_secs(59)
            }
        );
        assert_eq!(kept, first);
        // Quiet for the window while the consumer delivered 45 to the others.
        let (held, _) = at(60, 10, 50);
        assert_eq!(
            held,
            Held::NotPulling {
                connection: first.connections[0].0.local,
                quiet: window,
                delivered: 45
            }
        );
        // Idle: nothing delivered since, however long.
        let (held, _) = at(600, 10, 5);
        assert!(matches!(held, Held::Pulls { .. }), "{held:?}");
        // Another connection (a reconnect), the consumer made again, the clock gone back:
        // a new count.
        for (now, created, cid) in [
            (T + 600_000, c, 8),
            (T + 600_000, "2026-12-06T01:00:00Z", 7),
            (T - 1, c, 7),
        ] {
            let (held, kept) = judge_pull(
                vec![pulled(cid, 1, 10)],
                Some(&first),
                &work(created, 50),
                window,
                now,
            );
            assert!(
                matches!(held, Held::Pulls { quiet, .. } if quiet.is_zero()),
                "{held:?}"
            );
            assert_eq!(kept.moved_at_ms, now);
        }
        // A second connection of the pod moved: taking part, by it.
        let two = judge_pull(
            vec![pulled(7, 1, 10), pulled(9, 2, 3)],
            None,
            &work(c, 5),
            window,
            T,
        )
        .1;
        let (held, _) = judge_pull(
            vec![pulled(7, 1, 10), pulled(9, 2, 4)],
            Some(&two),
            &work(c, 50),
            window,
            T + 120_000,
        );
        assert!(
            matches!(held, Held::Pulls { quiet, .. } if quiet.is_zero()),
            "{held:?}"
        );
        // No connection listed: nothing to judge.
        let (held, _) = judge_pull(Vec::new(), Some(&first), &work(c, 50), window, T + 120_000);
        assert!(matches!(held, Held::NotJudged(_)));
    }

    /// A look reads the connections only when the same consumer delivered since the last
    /// reading and the last move is a window old (and the clock did not go back).
    #[test]
    fn a_reading_only_when_the_consumer_delivered_and_the_window_passed() {
        const T: i64 = 1_800_000_000_000;
        let c = "2026-12-06T00:00:00Z";
        let window = Duration::from_secs(60);
        let kept = judge_pull(vec![pulled(7, 1, 10)], None, &work(c, 5), window, T).1;
        let pulls = |quiet| Held::Pulls {
            by: kept.connections[0].0.local,
            quiet: Duration::from_secs(quiet),
        };
        assert_eq!(
            unread(&kept, &work(c, 5), window, T + 90_000),
            Some((pulls(90), Found::NothingDelivered))
        );
        assert_eq!(
            unread(&kept, &work(c, 6), window, T + 30_000),
            Some((pulls(30), Found::WithinWindow))
        );
        assert_eq!(
            unread(&kept, &work(c, 6), window, T + 59_999).map(|(_, why)| why),
            Some(Found::WithinWindow)
        );
        assert_eq!(unread(&kept, &work(c, 6), window, T + 60_000), None);
        assert_eq!(
            unread(&kept, &work("2026-12-06T01:00:00Z", 5), window, T + 60_000),
            None
        );
        assert_eq!(unread(&kept, &work(c, 5), window, T - 1), None);
    }
}
