//! What to do about a check's verdict: `diagnose`'s closing words. Each piece of advice
//! follows from a fact the check observed and the rule that judged it, never from a guess.
//! Pure: the check's verdict and findings in, advice out (the report words it).

use crate::prelude::*;

use super::check::{Reason, Verdict};
use super::connection::{Connections, Policy};
use super::consumer::{Fault, Outcome};
use super::judged::{JudgedConsumer, JudgedSubscription};
use super::subscription::Held;
use crate::facts::{ConsumerName, TcpState, Unknown, Wanted};

#[derive(Debug, Clone, PartialEq)]
pub enum Advice {
    /// Healthy, and nothing odd seen.
    Nothing,
    /// No connection while NATS answers: the client gave up reconnecting.
    ClientGaveUp,
    /// No connection, and no `--server` to tell a client that gave up from NATS being down.
    TellWithServer,
    /// No connection, and no server answers: restarting pods would not help.
    NatsDown,
    /// An ESTABLISHED connection whose peer is gone; `counted_out`: it was the only one (the
    /// verdict rests on it).
    PeerGone {
        counted_out: bool,
    },
    /// The client is still trying to connect (SYN_SENT) and has no connection.
    StillConnecting,
    /// The server closed a connection the client never closed (CLOSE_WAIT).
    NeverClosed,
    StreamMissing(ConsumerName),
    ConsumerMissing(ConsumerName),
    /// A push consumer with work waiting and nothing subscribed.
    Unbound(ConsumerName),
    /// Work waiting and no progress; `no_pulls`: a pull consumer nobody is asking.
    Stalled {
        name: ConsumerName,
        no_pulls: bool,
    },
    /// Retention deletes the consumer's messages before they are acknowledged.
    Losing(ConsumerName),
    /// This pod's connection does not hold a subscription it must hold.
    Deaf {
        wanted: Wanted,
        consumer: Option<ConsumerName>,
    },
    /// This pod no longer pulls from a pull consumer the others take work from.
    NotPulling(ConsumerName),
    /// Something could not be judged: what (a consumer, or a subscription), and why.
    NotJudged {
        what: String,
        consumer: bool,
        why: Unknown,
    },
}

/// The advice for a check's verdict and findings, most pressing first.
pub fn advise(
    verdict: &Verdict,
    connections: &Connections,
    policy: &Policy,
    consumers: &[JudgedConsumer],
    subscriptions: &[JudgedSubscription],
) -> Vec<Advice> {
    let mut advice = Vec::new();
    let state = |s: TcpState| connections.others.iter().any(|o| o.state == s);
    match verdict.reason {
        Reason::ServerAnswers => advice.push(Advice::ClientGaveUp),
        Reason::ServerDown => advice.push(Advice::NatsDown),
        Reason::NotConnected if !policy.server => advice.push(Advice::TellWithServer),
        _ => {}
    }
    let connected = matches!(
        verdict.reason,
        Reason::Connected | Reason::ConsumerFault | Reason::ConsumerNotJudged
    );
    if !connections.half_open.is_empty() {
        advice.push(Advice::PeerGone {
            counted_out: !connected,
        });
    }
    if !connected && state(TcpState::SynSent) {
        advice.push(Advice::StillConnecting);
    }
    if state(TcpState::CloseWait) {
        advice.push(Advice::NeverClosed);
    }
    for c in consumers {
        let name = c.seen.name.clone();
        match &c.outcome {
            Outcome::Healthy(_) => {}
            Outcome::Unhealthy(fault) => advice.push(match fault {
                Fault::StreamMissing => Advice::StreamMissing(name),
                Fault::ConsumerMissing => Advice::ConsumerMissing(name),
                Fault::Unbound { .. } => Advice::Unbound(name),
                Fault::Stalled { no_pulls, .. } => Advice::Stalled {
                    name,
                    no_pulls: *no_pulls,
                },
                Fault::Retention { .. } => Advice::Losing(name),
            }),
            Outcome::NotJudged(why) => advice.push(Advice::NotJudged {
                what: format!("consumer {name}"),
                consumer: true,
                why: why.clone(),
            }),
        }
    }
    for s in subscriptions {
        match &s.held {
            Held::Yes { .. } | Held::Pulls { .. } => {}
            Held::NotPulling { .. } => {
                let name = s.consumer.clone().unwrap_or_else(|| ConsumerName {
                    stream: String::new(),
                    durable: s.wanted.subject.clone(),
                });
                advice.push(Advice::NotPulling(name));
            }
            Held::NotByThisConnection { .. } => advice.push(Advice::Deaf {
                wanted: s.wanted.clone(),
                consumer: s.consumer.clone(),
            }),
            Held::NotJudged(why) => advice.push(Advice::NotJudged {
                what: match s.pull {
                    true => format!("this pod's part of {}", s.wanted),
                    false => format!("subscription {}", s.wanted),
                },
                consumer: false,
                why: why.clone(),
            }),
        }
    }
    if advice.is_empty() {
        advice.push(Advice::Nothing);
    }
    advice
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{ConsumerSeen, Observed, Socket};
    use crate::rules::check::Health;
    use crate::rules::connection::{HalfOpen, WhenServerDown};
    use crate::rules::consumer::{Evidence, Healthy};
    use core::time::Duration;

    fn socket(state: TcpState) -> Socket {
        Socket {
            local: "10.0.0.5:51828".parse().unwrap(),
            remote: "10.0.0.7:4222".parse().unwrap(),
            state,
            inode: 7,
            uid: 1000,
            info: None,
            diag: None,
        }
    }

    fn policy(server: bool) -> Policy {
        Policy {
            ports: vec![4222],
            remotes: vec![],
            min_connections: 1,
            half_open_after: Some(Duration::from_secs(30)),
            server,
            when_server_down: WhenServerDown::Pass,
            startup: false,
        }
    }

    fn verdict(health: Health, reason: Reason) -> Verdict {
        Verdict { health, reason }
    }

    #[test]
    fn the_connection_advice_follows_the_reason() {
        let none = Connections::default();
        let cases = [
            (
                verdict(Health::Unhealthy, Reason::ServerAnswers),
                true,
                vec![Advice::ClientGaveUp],
            ),
            (
                verdict(Health::Healthy, Reason::ServerDown),
                true,
                vec![Advice::NatsDown],
            ),
            (
                verdict(Health::Unhealthy, Reason::NotConnected),
                false,
                vec![Advice::TellWithServer],
            ),
            // --min-connections not met with --server given and answering is ServerAnswers;
            // NotConnected with --server cannot tell more.
            (
                verdict(Health::Unhealthy, Reason::NotConnected),
                true,
                vec![],
            ),
            (
                verdict(Health::Healthy, Reason::Connected),
                false,
                vec![Advice::Nothing],
            ),
        ];
        for (v, server, want) in cases {
            let got = advise(&v, &none, &policy(server), &[], &[]);
            let want = if want.is_empty() {
                vec![Advice::Nothing]
            } else {
                want
            };
            assert_eq!(got, want, "{v:?}");
        }
    }

    #[test]
    fn sockets_in_other_states_and_half_open_ones_are_explained() {
        let mut c = Connections::default();
        c.others.push(socket(TcpState::SynSent));
        c.others.push(socket(TcpState::CloseWait));
        let v = verdict(Health::Unhealthy, Reason::ServerAnswers);
        assert_eq!(
            advise(&v, &c, &policy(true), &[], &[]),
            vec![
                Advice::ClientGaveUp,
                Advice::StillConnecting,
                Advice::NeverClosed
            ]
        );
        // Connected: a SYN_SENT beside a live connection is a reconnect in progress elsewhere,
        // not advice.
        let mut live = Connections::default();
        live.established.push(socket(TcpState::Established));
        live.others.push(socket(TcpState::SynSent));
        let ok = verdict(Health::Healthy, Reason::Connected);
        assert_eq!(
            advise(&ok, &live, &policy(true), &[], &[]),
            vec![Advice::Nothing]
        );
        let half = HalfOpen {
            unacked_bytes: 64,
            unacked_for: Duration::from_secs(51),
            retransmits: 8,
        };
        let mut dead = Connections::default();
        dead.established.push(socket(TcpState::Established));
        dead.half_open.push((socket(TcpState::Established), half));
        assert_eq!(
            advise(&v, &dead, &policy(true), &[], &[]),
            vec![Advice::ClientGaveUp, Advice::PeerGone { counted_out: true }]
        );
        dead.established.push(socket(TcpState::Established));
        assert_eq!(
            advise(&ok, &dead, &policy(true), &[], &[]),
            vec![Advice::PeerGone { counted_out: false }]
        );
    }

    #[test]
    fn each_consumer_fault_and_subscription_has_its_advice() {
        let name = |d: &str| ConsumerName {
            stream: "S".into(),
            durable: d.into(),
        };
        let (a, b, c, d, e) = (name("a"), name("b"), name("c"), name("d"), name("e"));
        let stalled = Outcome::Unhealthy(Fault::Stalled {
            stalled: Duration::from_secs(90),
            evidence: Evidence::LastActive,
            floor: 3,
            waiting: 9,
            no_pulls: true,
            moved_without_ack: false,
        });
        let unbound = Outcome::Unhealthy(Fault::Unbound { waiting: 4 });
        let ok = Outcome::Healthy(Healthy::Idle);
        let missing = Outcome::Unhealthy(Fault::ConsumerMissing);
        let denied = Outcome::NotJudged(Unknown::Credentials);
        let judged = |name: &ConsumerName, outcome: Outcome| JudgedConsumer {
            seen: ConsumerSeen {
                name: name.clone(),
                observed: Observed::ConsumerMissing,
                previous: None,
                state_problem: None,
            },
            outcome,
            window: None,
            progress: None,
            standing: None,
            carried: None,
        };
        let findings = [
            judged(&a, stalled),
            judged(&b, unbound),
            judged(&c, ok),
            judged(&d, missing),
            judged(&e, denied),
        ];
        let wanted = Wanted {
            subject: "deliver.b".into(),
            queue: Some("b".into()),
        };
        let deaf = Held::NotByThisConnection {
            connection: "10.0.0.5:51828".parse().unwrap(),
        };
        let subs = [JudgedSubscription {
            pull: false,
            wanted: wanted.clone(),
            consumer: Some(b.clone()),
            held: deaf,
            carried: None,
            standing: None,
            found: None,
            judged_before: false,
        }];
        let mut live = Connections::default();
        live.established.push(socket(TcpState::Established));
        let v = verdict(Health::Unhealthy, Reason::ConsumerFault);
        assert_eq!(
            advise(&v, &live, &policy(true), &findings, &subs),
            vec![
                Advice::Stalled {
                    name: a.clone(),
                    no_pulls: true
                },
                Advice::Unbound(b.clone()),
                Advice::ConsumerMissing(d.clone()),
                Advice::NotJudged {
                    what: "consumer S/e".into(),
                    consumer: true,
                    why: Unknown::Credentials
                },
                Advice::Deaf {
                    wanted: wanted.clone(),
                    consumer: Some(b.clone())
                },
            ]
        );
    }
}
