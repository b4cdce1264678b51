//! A simulated pod and NATS that answer a check's asks (`run::Ask`) at any moment, so the
//! check's own run can be driven through time without a server, a socket or a clock: the
//! times to restart (`rules::restart`) and the property tests do. What it simulates:
//!
//! - the pod's client connections (replaced on a reconnect, given up, or gone half-open, with
//!   the kernel's retransmission timer), and when the client started;
//! - consumers as a 2.10 server describes them (acking at a pace, idle, paused, recreated,
//!   wedged, unbound, deleted, or losing messages to retention), with `last_active` lost at
//!   each restart of the server;
//! - the pod's subscription at the server (held, or deaf from a moment), its connection found
//!   by cid or in the account's list, and the server's id and cids new at each restart;
//! - what NATS does to each run that asks it (`Answer`): on time, any kind of not-judged
//!   answer, or a server restarted just before;
//! - the check's state file, shared by every probe of the same check.
//!
//! Pure: time is the caller's `now`, in ms.

use crate::facts::{
    AckPolicy, Answer as Info, Connz, ConsumerFacts, ConsumerName, DiagId, Identity, LookedUp,
    Observed, Pod, Process, Reached, Rechecked, ServerAnswer, ServerConnection, ServerIdent,
    Socket, SocketScan, StateDirUsed, StreamFacts, TcpInfo, TcpState, Unknown, Wanted,
};
use crate::prelude::*;
use crate::rules::consumer::ms;
use crate::run::{Ask, Check, ClientOf, Ended, Refusal, Run, Seen, Start};
use crate::state::{Kept, State};
use alloc::vec;
use core::net::SocketAddr;

/// Milliseconds.
pub type Ms = i64;
const NS: i64 = 1_000_000;
/// The server's clock, far from zero as a real one is (ms).
const EPOCH: Ms = 1_800_000_000_000;
/// The pod's address, and its client connections' first port.
const POD: [u8; 4] = [10, 0, 0, 2];
const NATS: SocketAddr = SocketAddr::new(
    core::net::IpAddr::V4(core::net::Ipv4Addr::new(10, 96, 0, 10)),
    4222,
);
/// The monitoring port's URL, as a check with `--monitor` shows it.
pub const MONITOR: &str = "http://10.96.0.10:8222/";

/// What NATS does to a run that asks it anything.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    OnTime,
    /// The server restarted just before this run (it forgot its `last_active` times and its
    /// cids, and has a new id); the run is answered.
    Restarted,
    /// Not judged, for this reason: every ask of the run gets it.
    Not(Unknown),
}

/// What a consumer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Acks once every `every` with work waiting (a serialized `max_ack_pending: 1`
    /// consumer's backlog grows meanwhile: work always waits).
    Acking,
    /// Nothing waiting, ever.
    Idle,
    /// Nothing waiting until `at`, then acking with work waiting.
    Quiet { until: Ms },
    /// Paused (2.11+), work waiting.
    Paused,
    /// Acking; deleted and created again under the same name at `at`.
    Recreated { at: Ms },
    /// Acking until `at`, not again before `until` (never: `Ms::MAX`), work waiting.
    Wedged { at: Ms, until: Ms },
    /// Acking until `at`; then the server delivers nothing more while work waits, and the pod
    /// holds none of it (a rate limit, NATS's own stall): nothing awaits an ack, and a pull
    /// consumer's requests wait.
    Withheld { at: Ms },
    /// Acking until `at`; then never, on a stream that deletes from the front (`max_msgs`,
    /// discard old) `rate` messages a second: its floor held at the front, moved by the
    /// deletions.
    Losing { at: Ms, rate: u64 },
    /// Acking; nothing subscribed to its deliver subject from `at`.
    Unbound { at: Ms },
    /// Acking; the durable deleted at `at`.
    Absent { at: Ms },
    /// Acking; NATS leaves the asks about it unanswered from `from` until `until` (its
    /// stream's leader being elected), while it answers for the others.
    Unanswered { from: Ms, until: Ms },
}

/// One consumer of the simulated server.
#[derive(Debug, Clone, PartialEq)]
pub struct Consumer {
    pub name: ConsumerName,
    pub behaviour: Behaviour,
    /// Its ack pace.
    pub every: Ms,
    pub ack_wait: Ms,
}

/// The pod's subscriptions at the server: every consumer's deliver subscription
/// (`--own-subscription`) or a core one (`--subscription`), held until `deaf_at`.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    /// A core subscription: checked with `--subscription` where there is no consumer.
    pub wanted: Wanted,
    pub deaf_at: Option<Ms>,
    /// The account's connections, as the server counts them.
    pub account_connections: u64,
    /// Its connection is listed at the monitoring port (`--monitor`), which finds a cid
    /// directly.
    pub direct: bool,
    /// The consumers are pull consumers shared with other replicas: the pod's part is its
    /// pulls, one each `every` until `deaf_at` (its connection's `in_msgs`), while the
    /// others take the work on.
    pub pull: bool,
}

/// The pod's client.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Client {
    /// When it started (a young client gets its window).
    pub started: Ms,
    /// When it reconnected: each time a new socket.
    pub reconnects: Vec<Ms>,
    /// When it gave up its connection for good.
    pub gave_up: Option<Ms>,
    /// When its peer went away without a word: its next send is never acknowledged.
    pub half_open: Option<Ms>,
}

/// The simulated world, and the check's state file.
#[derive(Debug, Clone)]
pub struct World {
    pub consumers: Vec<Consumer>,
    pub subscription: Option<Subscription>,
    pub client: Client,
    /// What NATS does to the runs that ask it, in turn (cycled): one turn for each run's
    /// asks about the consumers (or its INFO), one for its asks about the subscriptions.
    pub answers: Vec<Answer>,
    /// The state file, when any run kept one, and when a run last wrote or read it.
    kept: Option<(State, Ms)>,
    marked: Option<Ms>,
    /// The runs that asked NATS so far, about the consumers and the subscriptions, and when
    /// the server last started.
    asked: [usize; 2],
    restarted: Ms,
    epoch: u32,
}

/// One run, as the world saw it.
#[derive(Debug, Clone)]
pub struct Ran {
    /// The exit code: 0 healthy, 1 unhealthy, 2 a configuration error.
    pub exit: u8,
    /// What the run asked.
    pub asked: Asked,
    /// What NATS did to its asks about the consumers (or its INFO) and about the
    /// subscriptions, when it made them.
    pub answers: [Option<Answer>; 2],
    pub ended: Result<Ended, Refusal>,
}

/// Which asks a run made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Asked {
    pub exact: bool,
    pub walk: bool,
    pub servers: bool,
    pub consumers: bool,
    pub lookups: bool,
    pub connz: bool,
    pub stored: bool,
}

impl Asked {
    /// Whether the run asked NATS anything beyond an INFO.
    pub fn nats(&self) -> bool {
        self.consumers || self.lookups || self.connz
    }
}

impl World {
    pub fn new(consumers: Vec<Consumer>, answers: Vec<Answer>) -> World {
        World {
            consumers,
            subscription: None,
            client: Client::default(),
            answers,
            kept: None,
            marked: None,
            asked: [0, 0],
            restarted: Ms::MIN,
            epoch: 1,
        }
    }

    /// The check's state file, as the last run that kept one left it.
    pub fn kept(&self) -> Option<&State> {
        self.kept.as_ref().map(|(state, _)| state)
    }

    /// The check, for this world's consumers and subscription.
    pub fn check(&self, stall_after: Ms, sample_every: Ms) -> Check {
        let sub = self.subscription.as_ref();
        Check {
            connection: crate::rules::connection::Policy {
                ports: vec![NATS.port()],
                remotes: Vec::new(),
                min_connections: 1,
                half_open_after: Some(crate::timing::HALF_OPEN_AFTER),
                server: true,
                when_server_down: Default::default(),
                startup: false,
            },
            owner_named: false,
            netns_of: None,
            exact: true,
            diagnose: false,
            consumers: self.consumers.iter().map(|c| c.name.clone()).collect(),
            consumer: crate::rules::consumer::Policy {
                stall_after: ms(stall_after),
            },
            own_subscription: sub.is_some() && !self.consumers.is_empty(),
            subscriptions: match (sub, self.consumers.is_empty()) {
                (Some(s), true) => vec![s.wanted.clone()],
                _ => Vec::new(),
            },
            monitor: sub.filter(|s| s.direct).map(|_| MONITOR.to_string()),
            sample_every: ms(sample_every),
            subscription_every: crate::rules::remembered::TrustSetting::Auto,
            restart_again_after: crate::timing::RESTART_AGAIN_AFTER,
        }
    }

    /// One run of `check` at `now`, driven to its end by the world's answers; its state kept
    /// for the next run of the same check.
    pub fn run(&mut self, check: &Check, now: Ms) -> Ran {
        let start = Start {
            kept: match &self.kept {
                Some((state, _)) => Kept::State(state.clone()),
                None => Kept::Missing,
            },
            place: Ok(StateDirUsed {
                path: "/tmp/natsprobe-1000".into(),
                skipped: Vec::new(),
            }),
            previous_run_ms: self.marked,
            now_ms: now,
        };
        self.marked = Some(now);
        let mut answers: [Option<Answer>; 2] = [None, None];
        let mut asked = Asked::default();
        let mut run = Run::new(check, start);
        let mut steps = 0;
        while let Some(ask) = run.ask() {
            // Each answer moves a run on; one that asks on and on never ends.
            steps += 1;
            assert!(steps <= 16, "a run still asking after 16 answers: {ask:?}");
            let turn = match ask {
                Ask::Servers | Ask::Consumers(_) => Some(0),
                Ask::Lookups(_) | Ask::Connz { .. } => Some(1),
                _ => None,
            };
            let answer = match turn {
                Some(k) => answers[k]
                    .get_or_insert_with(|| {
                        let a = self.answers[self.asked[k] % self.answers.len()].clone();
                        self.asked[k] += 1;
                        a
                    })
                    .clone(),
                None => Answer::OnTime,
            };
            if answer == Answer::Restarted && self.restarted != now {
                self.restarted = now;
                self.epoch += 1;
            }
            let seen = self.see(ask, now, &answer, &mut asked);
            run.feed(seen);
        }
        let ended = run.end();
        let exit = match &ended {
            Ok(e) => crate::exit::Exit::from(e.verdict.health).code(),
            Err(_) => crate::exit::Exit::Usage.code(),
        };
        Ran {
            exit,
            asked,
            answers,
            ended,
        }
    }

    fn see(&mut self, ask: Ask, now: Ms, answer: &Answer, asked: &mut Asked) -> Seen {
        match ask {
            Ask::Exact(known) => {
                asked.exact = true;
                let sockets = self.sockets(now);
                Seen::Exact(Ok((
                    known
                        .iter()
                        .map(|k| Rechecked {
                            socket: sockets
                                .iter()
                                .find(|s| s.local == k.local && s.remote == k.remote)
                                .cloned(),
                            held: true,
                        })
                        .collect(),
                    Vec::<Process>::new(),
                )))
            }
            Ask::Walk(_) => {
                asked.walk = true;
                Seen::Walk(Pod {
                    scan: SocketScan {
                        sockets: self.sockets(now),
                        ..SocketScan::default()
                    },
                    ..Pod::default()
                })
            }
            Ask::Servers => {
                asked.servers = true;
                let up = !matches!(answer, Answer::Not(Unknown::Unreachable(_)));
                Seen::Servers(vec![ServerAnswer {
                    url: "nats://10.96.0.10:4222".into(),
                    answer: match up {
                        true => Info::Nats { version: None },
                        false => Info::Refused,
                    },
                    reached: up.then_some(Reached {
                        dialled: NATS,
                        local: SocketAddr::from(([10, 0, 0, 2], 60000)),
                        held_as: Some(NATS),
                    }),
                    peers: Vec::new(),
                    identity: up.then(|| Identity {
                        server_id: self.ident().id,
                        cluster: None,
                    }),
                }])
            }
            Ask::Identities(_) => Seen::Identities(None),
            Ask::Consumers(names) => {
                asked.consumers = true;
                let observed = names
                    .iter()
                    .map(|n| match answer {
                        Answer::Not(why) => Observed::NotJudged(why.clone()),
                        _ => self.consumer(n, now),
                    })
                    .collect();
                Seen::Consumers {
                    observed,
                    server_domain: None,
                    server_jetstream: true,
                }
            }
            Ask::Lookups(lookups) => {
                asked.lookups = true;
                let listed = self.listed(now);
                Seen::Lookups(
                    lookups
                        .iter()
                        .map(|l| {
                            let answer = match answer {
                                Answer::Not(why) => Err(why.clone()),
                                _ => Ok(vec![LookedUp {
                                    server: self.ident(),
                                    connection: listed.iter().find(|c| c.cid == l.cid).cloned(),
                                }]),
                            };
                            let reached = !matches!(
                                answer,
                                Err(Unknown::Credentials | Unknown::Unreachable(_))
                            );
                            (answer, reached || l.direct)
                        })
                        .collect(),
                )
            }
            Ask::Connz { wanted, .. } => {
                asked.connz = true;
                let answer = match answer {
                    Answer::Not(why) => Err(why.clone()),
                    _ => {
                        let listed = self.listed(now);
                        Ok(Connz {
                            source: "the account's connection report".into(),
                            holding: listed
                                .iter()
                                .filter(|c| {
                                    wanted
                                        .iter()
                                        .any(|w| crate::rules::subscription::holds(c, w))
                                })
                                .cloned()
                                .collect(),
                            all: Some(listed),
                            probe_seen_as: Some(SocketAddr::from((POD, 60001))),
                            servers: 1,
                            out_of_sight: None,
                            incomplete: None,
                        })
                    }
                };
                let reached =
                    !matches!(answer, Err(Unknown::Credentials | Unknown::Unreachable(_)));
                Seen::Connz(answer, reached)
            }
            Ask::ClientAge(ClientOf::Pids(_) | ClientOf::Inodes(_)) => {
                Seen::ClientAge(Some(ms(now - self.client.started)))
            }
            Ask::Store(state) => {
                asked.stored = true;
                // Never an older state over a newer one another probe kept meanwhile.
                if self.kept.as_ref().is_none_or(|(_, at)| *at <= now) {
                    self.kept = Some((state.clone(), now));
                }
                Seen::Stored(Ok(()))
            }
        }
    }

    /// The server as its reports name it: a new id at each start.
    fn ident(&self) -> ServerIdent {
        let name = match self.subscription.as_ref().is_some_and(|s| s.direct) {
            true => MONITOR.to_string(),
            false => "n1".into(),
        };
        ServerIdent {
            name,
            id: format!("N{}", self.epoch),
        }
    }

    /// The client's socket at `now`: one per connection since its last reconnect, none once
    /// it gave up.
    fn sockets(&self, now: Ms) -> Vec<Socket> {
        if self.client.gave_up.is_some_and(|at| now >= at) {
            return Vec::new();
        }
        let n = self.client.reconnects.iter().filter(|r| **r <= now).count() as u16;
        let info = match self.client.half_open {
            Some(at) if now >= at => half_open_info(now - at),
            _ => TcpInfo::default(),
        };
        vec![Socket {
            local: SocketAddr::from((POD, 40000 + n)),
            remote: NATS,
            state: TcpState::Established,
            uid: 1000,
            inode: 1000 + u64::from(n),
            info: Some(info),
            diag: Some(DiagId {
                cookie: 77 + u64::from(n),
                interface: 0,
            }),
        }]
    }

    /// The pod's connection as the server lists it, with its subscription while held.
    fn listed(&self, now: Ms) -> Vec<ServerConnection> {
        let Some(sub) = &self.subscription else {
            return Vec::new();
        };
        let held = sub.deaf_at.is_none_or(|at| now < at);
        let mut subscriptions: Vec<(String, Option<String>)> = self
            .consumers
            .iter()
            .map(|c| {
                (
                    format!("deliver.{}", c.name.durable),
                    Some(c.name.durable.clone()),
                )
            })
            .collect();
        subscriptions.push((sub.wanted.subject.clone(), sub.wanted.queue.clone()));
        self.sockets(now)
            .into_iter()
            .map(|s| ServerConnection {
                addr: s.local,
                name: Some("app".into()),
                subscriptions: Some(match held {
                    true => subscriptions.clone(),
                    false => Vec::new(),
                }),
                cid: s.inode,
                server: Some(self.ident()),
                account_connections: sub.account_connections,
                in_msgs: match sub.pull {
                    true => self.pulls(now),
                    false => 0,
                },
            })
            .collect()
    }

    /// How many pull requests the pod's connection published by `now`: one each `every`
    /// (the first consumer's pace) until it went deaf.
    fn pulls(&self, now: Ms) -> u64 {
        let every = self.consumers.first().map_or(1000, |c| c.every);
        let until = self
            .subscription
            .as_ref()
            .and_then(|s| s.deaf_at)
            .map_or(now, |at| now.min(at));
        (until.div_euclid(every) + (1 << 40)) as u64
    }

    /// A consumer as a 2.10 server describes it at `now`.
    fn consumer(&self, name: &ConsumerName, now: Ms) -> Observed {
        let Some(c) = self.consumers.iter().find(|c| c.name == *name) else {
            return Observed::ConsumerMissing;
        };
        if let Behaviour::Unanswered { from, until } = c.behaviour {
            if (from..until).contains(&now) {
                return Observed::NotJudged(Unknown::Deadline);
            }
        }
        let until = match c.behaviour {
            Behaviour::Quiet { until } if now < until => Ms::MIN,
            Behaviour::Wedged { at, until } if now < until => now.min(at),
            Behaviour::Losing { at, .. } | Behaviour::Withheld { at } => now.min(at),
            Behaviour::Absent { at } if now >= at => return Observed::ConsumerMissing,
            Behaviour::Idle | Behaviour::Paused => Ms::MIN,
            _ => now,
        };
        // Acks at every multiple of `every`, since long before any run (times may be
        // negative: a fault is at 0).
        let last_ack = (until > Ms::MIN).then(|| until - until.rem_euclid(c.every));
        let acks = last_ack.map_or(0, |t| (t.div_euclid(c.every) + (1 << 40)) as u64);
        let seen = |t: Option<Ms>| t.filter(|t| *t >= self.restarted).map(|t| (EPOCH + t) * NS);
        let waiting: u64 = match c.behaviour {
            Behaviour::Idle => 0,
            Behaviour::Quiet { until } if now < until => 0,
            _ => 50,
        };
        let mut facts = ConsumerFacts::example(
            waiting.saturating_sub(1),
            waiting.min(1),
            acks,
            (EPOCH + now) * NS,
        );
        facts.stream = name.stream.clone();
        facts.name = name.durable.clone();
        if self.subscription.as_ref().is_some_and(|s| s.pull) {
            facts.deliver_subject = None;
            facts.deliver_group = None;
            facts.push_bound = false;
            facts.num_waiting = 1;
        } else {
            facts.deliver_subject = Some(format!("deliver.{}", name.durable));
            facts.deliver_group = Some(name.durable.clone());
        }
        facts.ack_wait = Some(ms(c.ack_wait));
        facts.ack_floor.last_active = seen(last_ack);
        facts.delivered.last_active = seen(last_ack.filter(|_| waiting > 0).map(|t| t + 1));
        facts.ack_policy = AckPolicy::Explicit;
        facts.paused = c.behaviour == Behaviour::Paused;
        match c.behaviour {
            Behaviour::Recreated { at } if now >= at => {
                facts.created = "2026-12-03T00:00:01Z".into()
            }
            Behaviour::Unbound { at } if now >= at => facts.push_bound = false,
            _ => {}
        }
        let mut stream = None;
        if let Behaviour::Losing { at, rate } = c.behaviour {
            // Before the wedge a 1,000-message stream sits behind the floor; after it,
            // retention deletes from the front at `rate`, moving the floor.
            let deleted = if now > at {
                (now - at) as u64 * rate / 1000
            } else {
                0
            };
            facts.ack_floor.consumer_seq += deleted;
            facts.ack_floor.stream_seq += deleted;
            if deleted > 0 {
                facts.ack_floor.last_active = seen(Some(now));
            }
            let floor = facts.ack_floor.stream_seq;
            let first_seq = match deleted {
                0 => floor.saturating_sub(500) + 1,
                _ => floor + 1,
            };
            stream = Some(StreamFacts {
                retention: "limits".into(),
                discard: "old".into(),
                max_msgs: Some(1000),
                max_bytes: None,
                max_age: None,
                max_msgs_per_subject: None,
                discard_new_per_subject: false,
                first_seq,
                last_seq: first_seq + 999,
            });
        }
        facts.delivered.consumer_seq = facts.ack_floor.consumer_seq + waiting.min(1);
        facts.delivered.stream_seq = facts.ack_floor.stream_seq + waiting.min(1);
        if matches!(c.behaviour, Behaviour::Withheld { at } if now >= at) {
            // The last message delivered was acked; nothing since.
            facts.num_ack_pending = 0;
            facts.num_pending = waiting;
            facts.delivered.consumer_seq = facts.ack_floor.consumer_seq;
            facts.delivered.stream_seq = facts.ack_floor.stream_seq;
            facts.delivered.last_active = facts.ack_floor.last_active;
        }
        Observed::Found {
            facts,
            stream: stream.filter(|_| waiting > 0),
        }
    }
}

/// The kernel's `tcp_info` for a connection whose peer went away `since` ago, the client
/// sending just then: the retransmission timer fires at 200 ms (its minimum on a LAN) and
/// doubles each time, up to two minutes; no ACK since.
fn half_open_info(since: Ms) -> TcpInfo {
    let (mut fired, mut rto, mut at) = (0u32, 200i64, 200i64);
    while at <= since {
        fired += 1;
        rto = (rto * 2).min(120_000);
        at += rto;
    }
    TcpInfo {
        unacked_bytes: 100,
        retransmits: fired,
        rto_ms: Some(rto as u32),
        last_ack_recv_ms: Some(since as u32),
        ..TcpInfo::default()
    }
}

/// A consumer name.
pub fn name(stream: &str, durable: &str) -> ConsumerName {
    ConsumerName {
        stream: stream.into(),
        durable: durable.into(),
    }
}
