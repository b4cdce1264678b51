//! The check's verdict: the connection, what the servers said and the consumers' outcomes
//! become one answer, and the per-pod policy that only an in-pod check has (a client younger
//! than its consumer's stall window gets that window). Pure.

use super::connection::{connected, Connections, Policy, WhenServerDown};
use super::consumer::{ms, Fault, Healthy, Outcome, Window};
use core::time::Duration;
use serde::{Deserialize, Serialize};

/// What the servers said, reduced to what the verdict needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// At least one sent its INFO line.
    Answers,
    /// None did: refused, silent, not NATS, unresolvable.
    NotAnswering,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    Healthy,
    Unhealthy,
    /// A requested check can never run as configured (`rules::cause`): exit 2.
    Misconfigured,
}

impl Health {
    /// The verdict's word, in lines and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Unhealthy => "unhealthy",
            Health::Misconfigured => "configuration_error",
        }
    }
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
    /// Connected, and a `--consumer` or subscription can never be judged as configured.
    Misconfigured,
    /// `--startup`: connected, and a `--consumer` or subscription has never been judged with
    /// this configuration: not started yet.
    NotYetJudged,
}

/// One `--consumer`'s outcome, as the overall verdict needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerHealth {
    Healthy,
    Unhealthy,
    NotJudged,
    /// Not judged, and never judged with this configuration on these servers.
    NeverJudged,
    /// Not judged, or judged without a sample to compare, for a cause of the configuration
    /// that is now an error (`rules::cause::Standing::is_configuration_error`).
    Misconfigured,
    /// Not judged because a restart cannot help: the server holds the work back, or a
    /// restart for the same fault did not. NATS answered: never a failure, whatever
    /// `--when-server-down` says.
    NotThePods,
}

impl ConsumerHealth {
    /// A word for scripts (each consumer's and subscription's JSON `verdict`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerHealth::Healthy => "healthy",
            ConsumerHealth::Unhealthy => "unhealthy",
            ConsumerHealth::NotJudged
            | ConsumerHealth::NeverJudged
            | ConsumerHealth::NotThePods => "not_judged",
            ConsumerHealth::Misconfigured => "configuration_error",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub health: Health,
    pub reason: Reason,
}

/// Whether the server must be asked: only when the connection is missing. A client that
/// holds its connection costs the server nothing.
pub fn needs_server(connections: &Connections, policy: &Policy) -> bool {
    policy.server && !connected(connections, policy)
}

/// The overall verdict. Without a connection the consumers are not looked at (the socket
/// already says what is wrong); with one, any consumer fault fails the pod, and a consumer
/// that could not be judged because NATS did not answer (`nats_silent`: the table's "too
/// late" and "not there" rows, `answers::silent`) counts like a server that is down. NATS
/// that answered (a refusal, no view from here) fails under no `--when-server-down`.
pub fn decide(
    connections: &Connections,
    server: Option<ServerState>,
    consumers: &[ConsumerHealth],
    nats_silent: bool,
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
        } else if consumers.contains(&ConsumerHealth::Misconfigured) {
            (Misconfigured, Reason::Misconfigured)
        } else if policy.startup && consumers.contains(&ConsumerHealth::NeverJudged) {
            (Unhealthy, Reason::NotYetJudged)
        } else if consumers
            .iter()
            .any(|c| matches!(c, ConsumerHealth::NotJudged | ConsumerHealth::NeverJudged))
        {
            match nats_silent {
                true => (down, Reason::ConsumerNotJudged),
                false => (Healthy, Reason::ConsumerNotJudged),
            }
        } else if consumers.contains(&ConsumerHealth::NotThePods) {
            (Healthy, Reason::ConsumerNotJudged)
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

/// Whether the consumers must be asked: only with a connection (without one, the socket
/// already says what is wrong).
pub fn needs_consumers(connections: &Connections, policy: &Policy, consumers: usize) -> bool {
    consumers > 0 && connected(connections, policy)
}

/// Whether the client's age is needed: only when a consumer is about to be called stalled or
/// losing messages (reading it can cost a walk of /proc).
pub fn needs_client_age(outcomes: &[&Outcome]) -> bool {
    outcomes.iter().any(|o| excusable(o).is_some())
}

fn excusable(outcome: &Outcome) -> Option<Duration> {
    match outcome {
        Outcome::Unhealthy(Fault::Stalled { stalled, .. } | Fault::Retention { stalled, .. }) => {
            Some(*stalled)
        }
        _ => None,
    }
}

/// The per-pod policy: a stall is only declared against a client (the process holding the
/// counted connection) older than the window, so a pod restarted for a stall is not restarted
/// again before its new client had its chance; a client whose start time cannot be read is
/// given the benefit of the doubt. `client_age` is None when it was not needed.
pub fn excuse_young_client(
    outcome: Outcome,
    window: Option<Window>,
    client_age: Option<Option<Duration>>,
) -> Outcome {
    let (Some(stalled), Some(window), Some(age)) = (excusable(&outcome), window, client_age) else {
        return outcome;
    };
    match age {
        Some(age) if age < window.duration => Outcome::Healthy(Healthy::YoungClient {
            stalled,
            client_age: age,
        }),
        Some(_) => outcome,
        None => Outcome::Healthy(Healthy::ClientAgeUnknown { stalled }),
    }
}

/// natsprobe's failures for one consumer's fault, kept across runs and the restarts they
/// cause: which fault, and when natsprobe first failed the pod for it. A client that started
/// after that is a new one (the client that failed was older than its window).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Episode {
    pub fault: EpisodeFault,
    /// Local clock, ms since the epoch: the first failing run.
    pub began_ms: i64,
}

/// The faults a restart is given one chance at: those the server's own stall or a message the
/// app cannot process may also cause. An unbound or deleted consumer is the pod's to fix (or
/// its deployment's), whatever came before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeFault {
    Stalled,
    Losing,
}

impl EpisodeFault {
    fn of(outcome: &Outcome) -> Option<(EpisodeFault, Duration)> {
        match outcome {
            Outcome::Unhealthy(Fault::Stalled { stalled, .. }) => {
                Some((EpisodeFault::Stalled, *stalled))
            }
            Outcome::Unhealthy(Fault::Retention { stalled, .. }) => {
                Some((EpisodeFault::Losing, *stalled))
            }
            _ => None,
        }
    }

    /// Its word among `consumer::STATES`.
    pub fn state(self) -> &'static str {
        match self {
            EpisodeFault::Stalled => "stalled",
            EpisodeFault::Losing => "losing",
        }
    }
}

/// The per-pod policy after a restart: a restart that did not help is not repeated. Where
/// natsprobe failed the pod for a stall (or losses) and a new client, past its own window
/// (`excuse_young_client` came first), shows the same fault with no progress since (any
/// progress, or another state of the consumer, ended the episode), the outcome is
/// `RestartDidNotHelp`: not judged, until the consumer progresses, the fault changes or
/// `again_after` has passed since the episode began, when a restart is tried once more. A
/// fault a restart fixed is acted on again the next time: progress ended its episode.
/// `client_age` as `excuse_young_client` takes it. Returns the outcome and the episode to keep.
pub fn after_restart(
    outcome: Outcome,
    episode: Option<Episode>,
    client_age: Option<Option<Duration>>,
    again_after: Duration,
    now_ms: i64,
) -> (Outcome, Option<Episode>) {
    let current =
        episode.filter(|e| (0..again_after.as_millis() as i64).contains(&(now_ms - e.began_ms)));
    match (EpisodeFault::of(&outcome), current) {
        (Some((fault, stalled)), Some(e)) if e.fault == fault => {
            let age = client_age.flatten();
            match age.filter(|age| now_ms - age.as_millis() as i64 > e.began_ms) {
                Some(client_age) => (
                    Outcome::Healthy(Healthy::RestartDidNotHelp {
                        stalled,
                        state: fault.state(),
                        client_age,
                        since_first_failure: ms(now_ms - e.began_ms),
                    }),
                    Some(e),
                ),
                None => (outcome, Some(e)),
            }
        }
        (Some((fault, _)), _) => (
            outcome,
            Some(Episode {
                fault,
                began_ms: now_ms,
            }),
        ),
        (None, Some(_)) if ends_an_episode(&outcome) => (outcome, None),
        (None, e) => (outcome, e),
    }
}

/// Whether the consumer has shown what ends an episode: progress (or what may have been), or
/// nothing to do, or a fault of another kind. Waiting, excused, unmeasured, held back by the
/// server or not judged, it goes on.
fn ends_an_episode(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Healthy(h) => matches!(
            h,
            Healthy::Idle | Healthy::Paused | Healthy::Progressing(_) | Healthy::CannotTell { .. }
        ),
        Outcome::Unhealthy(_) => true,
        Outcome::NotJudged(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Holder, Socket, TcpState};
    use crate::prelude::*;
    use crate::rules::connection::connections;
    use alloc::collections::BTreeMap;

    fn sock(local: &str, remote: &str, state: TcpState, inode: u64) -> Socket {
        Socket {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            state,
            inode,
            uid: 0,
            info: None,
            diag: None,
        }
    }

    fn policy(ports: &[u16], remotes: &[&str], min: usize) -> Policy {
        Policy {
            ports: ports.to_vec(),
            remotes: remotes.iter().map(|r| r.parse().unwrap()).collect(),
            min_connections: min,
            half_open_after: None,
            server: false,
            when_server_down: WhenServerDown::Pass,
            startup: false,
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
            let owned: Option<BTreeMap<u64, Holder>> =
                owned.map(|o| o.iter().map(|&i| (i, Holder { pid: 1, fd: 3 })).collect());
            let c = connections(&table(), &p, owned.as_ref(), &[]);
            let row = format!("{ports:?} {remotes:?} min {min} owned {owned:?}");
            assert_eq!(
                (c.established.len(), c.others.len()),
                (est, others),
                "{row}"
            );
            assert_eq!(decide(&c, None, &[], false, &p).health, health, "{row}");
        }
    }

    #[test]
    fn a_servers_accepted_socket_never_counts() {
        let c = connections(&table(), &policy(&[4222], &[], 1), None, &[]);
        assert!(c
            .established
            .iter()
            .chain(&c.others)
            .all(|s| s.local.port() != 4222));
    }

    #[test]
    fn syn_sent_is_reported_but_does_not_pass() {
        let p = policy(&[4222], &["10.96.14.3"], 1);
        let c = connections(&table(), &p, None, &[]);
        assert_eq!(c.other_states(), BTreeMap::from([(TcpState::SynSent, 1)]));
        assert_eq!(decide(&c, None, &[], false, &p).health, Health::Unhealthy);
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
                connections(&table, &p, None, &[])
            } else {
                Connections::default()
            };
            let row = format!("{is_connected} {server} {state:?} {when:?}");
            assert_eq!(needs_server(&c, &p), asked, "{row}");
            assert_eq!(
                decide(&c, state, &[], false, &p),
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
        // Connected, each consumer's health, NATS silent, --when-server-down → the verdict.
        let rows: [(bool, &[C], bool, WhenServerDown, Health, Reason); 13] = [
            (true,  &[],                        true,  WhenServerDown::Pass, Healthy,   Reason::Connected),
            (true,  &[C::Healthy, C::Healthy],  false, WhenServerDown::Pass, Healthy,   Reason::Connected),
            (true,  &[C::Healthy, C::Unhealthy], false, WhenServerDown::Pass, Unhealthy, Reason::ConsumerFault),
            (true,  &[C::NotJudged, C::Unhealthy], true, WhenServerDown::Pass, Unhealthy, Reason::ConsumerFault),
            (true,  &[C::NotJudged],            true,  WhenServerDown::Pass, Healthy,   Reason::ConsumerNotJudged),
            (true,  &[C::NotJudged],            true,  WhenServerDown::Fail, Unhealthy, Reason::ConsumerNotJudged),
            (true,  &[C::NotJudged],            false, WhenServerDown::Fail, Healthy,   Reason::ConsumerNotJudged),
            (true,  &[C::NeverJudged],          true,  WhenServerDown::Pass, Healthy,   Reason::ConsumerNotJudged),
            (true,  &[C::NeverJudged],          false, WhenServerDown::Fail, Healthy,   Reason::ConsumerNotJudged),
            (true,  &[C::NotThePods],           false, WhenServerDown::Fail, Healthy,   Reason::ConsumerNotJudged),
            (true,  &[C::NeverJudged, C::Misconfigured], true, WhenServerDown::Pass, Misconfigured, Reason::Misconfigured),
            (false, &[C::Unhealthy],            true,  WhenServerDown::Pass, Healthy,   Reason::ServerDown),
            (false, &[C::Healthy],              false, WhenServerDown::Pass, Unhealthy, Reason::ServerAnswers),
        ];
        for (is_connected, consumers, silent, when, health, reason) in rows {
            let mut p = policy(&[4222], &[], 1);
            p.server = true;
            p.when_server_down = when;
            let c = if is_connected {
                connections(&table(), &p, None, &[])
            } else {
                Connections::default()
            };
            let server = (!is_connected).then_some(match reason {
                Reason::ServerAnswers => ServerState::Answers,
                _ => ServerState::NotAnswering,
            });
            assert_eq!(
                decide(&c, server, consumers, silent, &p),
                Verdict { health, reason },
                "{consumers:?} {when:?}"
            );
        }
    }

    /// `--startup`: a check never judged with this configuration fails until it is; one
    /// judged before, and every other verdict, as without it.
    #[test]
    fn startup_fails_only_what_was_never_judged() {
        use ConsumerHealth as C;
        let mut p = policy(&[4222], &[], 1);
        p.server = true;
        p.startup = true;
        let c = connections(&table(), &p, None, &[]);
        let verdict = |consumers: &[C]| decide(&c, None, consumers, true, &p);
        assert_eq!(
            verdict(&[C::Healthy, C::NeverJudged]),
            Verdict {
                health: Health::Unhealthy,
                reason: Reason::NotYetJudged
            }
        );
        assert_eq!(verdict(&[C::NotJudged]).health, Health::Healthy);
        assert_eq!(verdict(&[C::Healthy]).health, Health::Healthy);
        assert_eq!(
            verdict(&[C::NeverJudged, C::Unhealthy]).reason,
            Reason::ConsumerFault
        );
        // Without a connection, as without --startup: the server decides.
        assert_eq!(
            decide(
                &Connections::default(),
                Some(ServerState::NotAnswering),
                &[C::NeverJudged],
                true,
                &p
            )
            .reason,
            Reason::ServerDown
        );
    }

    #[test]
    fn too_few_connections_with_the_server_answering_is_unhealthy() {
        let mut p = policy(&[4222], &[], 3);
        p.server = true;
        let c = connections(&table(), &p, None, &[]);
        assert_eq!(c.established.len(), 2);
        assert!(needs_server(&c, &p));
        assert_eq!(
            decide(&c, Some(ServerState::Answers), &[], false, &p).reason,
            Reason::ServerAnswers
        );
    }

    /// A restart that did not help is not repeated within the episode; progress, another
    /// fault or the episode's end makes the next fault fail again. Each row: the episode kept
    /// (began at 0 s), this run's outcome, the client's age, now (s) → the state, and when
    /// the episode kept then began.
    #[test]
    fn a_restart_is_given_one_chance_an_episode() {
        use crate::rules::consumer::Evidence;
        let s = Duration::from_secs;
        let stalled = Outcome::Unhealthy(Fault::Stalled {
            stalled: s(70),
            evidence: Evidence::Samples,
            floor: 5,
            waiting: 10,
            no_pulls: false,
            moved_without_ack: false,
        });
        let losing = Outcome::Unhealthy(Fault::Retention {
            stalled: s(70),
            first_seq: 6,
            behind: 10,
            deletes: crate::rules::consumer::Deletes {
                front_only: true,
                settings: Default::default(),
            },
        });
        let waiting = Outcome::Healthy(Healthy::Waiting {
            stalled: s(5),
            evidence: Evidence::Samples,
            moved_without_ack: false,
        });
        let progressing =
            Outcome::Healthy(Healthy::Progressing(crate::rules::consumer::Moved::Floor));
        let unbound = Outcome::Unhealthy(Fault::Unbound { waiting: 3 });
        let stalled_at_0 = Some(Episode {
            fault: EpisodeFault::Stalled,
            began_ms: 0,
        });
        let hour = s(3600);
        type Row<'a> = (
            Option<Episode>,
            &'a Outcome,
            Option<Option<Duration>>,
            i64,
            &'a str,
            Option<i64>,
        );
        #[rustfmt::skip]
        let rows: [Row; 11] = [
            // The first failure begins the episode.
            (None, &stalled, Some(Some(s(500))), 100, "stalled", Some(100)),
            // The same client failing again: the episode goes on.
            (stalled_at_0, &stalled, Some(Some(s(500))), 100, "stalled", Some(0)),
            // A run that could not ask the client's age (a carried fault): fails.
            (stalled_at_0, &stalled, None, 100, "stalled", Some(0)),
            // A client started after the first failure, past its window: did not help.
            (stalled_at_0, &stalled, Some(Some(s(80))), 100, "restart_did_not_help", Some(0)),
            // ... and still, an hour less a second in.
            (stalled_at_0, &stalled, Some(Some(s(80))), 3599, "restart_did_not_help", Some(0)),
            // An hour after the first failure: a new episode, a restart tried again.
            (stalled_at_0, &stalled, Some(Some(s(80))), 3600, "stalled", Some(3600)),
            // Another fault: a new episode.
            (stalled_at_0, &losing, Some(Some(s(80))), 100, "losing", Some(100)),
            // Waiting goes on with the episode; progress ends it; so does another kind of fault.
            (stalled_at_0, &waiting, None, 100, "waiting", Some(0)),
            (stalled_at_0, &progressing, None, 100, "progressing", None),
            (stalled_at_0, &unbound, None, 100, "unbound", None),
            // An episode past its hour is forgotten.
            (stalled_at_0, &waiting, None, 4000, "waiting", None),
        ];
        for (i, (episode, outcome, age, now_s, state, began)) in rows.into_iter().enumerate() {
            let (o, kept) = after_restart(outcome.clone(), episode, age, hour, now_s * 1000);
            assert_eq!(o.state(false), state, "row {i}: {o:?}");
            assert_eq!(kept.map(|e| e.began_ms / 1000), began, "row {i}");
        }
    }

    /// The words scripts read.
    #[test]
    fn the_verdicts_words() {
        assert_eq!(
            [Health::Healthy, Health::Unhealthy, Health::Misconfigured].map(Health::as_str),
            ["healthy", "unhealthy", "configuration_error"]
        );
        assert_eq!(
            [
                ConsumerHealth::Healthy,
                ConsumerHealth::Unhealthy,
                ConsumerHealth::NotJudged,
                ConsumerHealth::NeverJudged,
                ConsumerHealth::Misconfigured,
            ]
            .map(ConsumerHealth::as_str),
            [
                "healthy",
                "unhealthy",
                "not_judged",
                "not_judged",
                "configuration_error"
            ]
        );
    }
}
