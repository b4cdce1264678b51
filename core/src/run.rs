//! One run of the check, as a sans-I/O machine: every decision a run makes, in order, and
//! nothing else. Given the configuration (`Check`), what the check's state file held (`Kept`)
//! and the time, it says which observation it needs next (`Run::ask`), is fed the answer
//! (`Run::feed`), and at the end yields the verdict, the report's facts and the state to keep
//! (`Run::end`). `check`, `diagnose` and `serve`'s looks drive it with the real observations;
//! the times to restart (`rules::restart`) and the property tests drive it with a simulated
//! pod and NATS (`world`). The shell performs the asks and writes what it is given.
//!
//! The order: the connections first (the ones the last healthy run counted, looked up
//! exactly, when they alone decide; else a walk of the table), the servers only without a
//! connection (and, where their answers show the connection held elsewhere, a second walk and
//! the client's other backends asked which NATS they are), then, with a connection, the
//! consumers when a look is due, the pod's connection at the server for each subscription
//! (trusted, looked up by cid, or matched by address), the client's age where a stall needs
//! it, and the state to keep.

use crate::facts::{
    unmap, Connz, ConsumerName, ConsumerSeen, Holder, Identity, KnownSocket, Loaded, LookedUp,
    Lookup, Observations, Observed, Pod, Process, Published, Rechecked, Remembered, Route,
    Sampling, ServerAnswer, ServerIdent, SocketScan, StateDirUsed, SubscriptionMemo, Unknown, Via,
    Walked, Wanted,
};
use crate::prelude::*;
use crate::rules::answers;
use crate::rules::cause::{self, Cause, Standing};
use crate::rules::check::{self as verdict, ServerState, Verdict};
use crate::rules::connection::{self, Connections};
use crate::rules::consumer::{self, ms, Judgement, Outcome, Window};
use crate::rules::judged::{JudgedConsumer, JudgedSubscription, NotJudged};
use crate::rules::remembered::{
    self, Asking, Carried, Confirmed, Found, LastLook, Of, Plan, Rematch, SeenFault, Socket,
    TrustSetting, Wrong,
};
use crate::rules::subscription::{self, Held, Work};
use crate::state::{Kept, State};
use alloc::collections::BTreeMap;
use core::net::SocketAddr;
use core::time::Duration;

/// What the core decides a check with: its flags, as the rules read them.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub connection: connection::Policy,
    /// `--pid` or `--process`: only the named processes' sockets count.
    pub owner_named: bool,
    /// `--netns-of`: whose network namespace is read (for the report).
    pub netns_of: Option<u32>,
    /// The remembered connections may be looked up exactly (a netlink reader).
    pub exact: bool,
    /// `diagnose`: every socket listed (a walk), and the counted connections not kept.
    pub diagnose: bool,
    pub consumers: Vec<ConsumerName>,
    pub consumer: consumer::Policy,
    /// Each push consumer's deliver subscription must be held by this pod's connection.
    pub own_subscription: bool,
    /// Core subscriptions this pod's connection must hold.
    pub subscriptions: Vec<Wanted>,
    /// The monitoring port's URL as shown: a connection matched there is looked up there.
    pub monitor: Option<String>,
    pub sample_every: Duration,
    pub subscription_every: TrustSetting,
    /// `--restart-again-after`: how long an episode of a fault whose restart did not help
    /// spares the pod (`rules::check::after_restart`).
    pub restart_again_after: Duration,
}

impl Check {
    /// How many consumers and subscriptions the server is asked about.
    fn asked(&self) -> usize {
        let subscriptions = self.own_subscription || !self.subscriptions.is_empty();
        self.consumers.len() + usize::from(subscriptions)
    }

    /// The window (docs/checks.md's word) of what belongs to `consumer`: the consumer's by this
    /// run's facts (`judged`: `rules::consumer::window` works it out from them), else by its
    /// last sample's, else `--stall-after`'s; a deliver subscription's is its consumer's, and
    /// a core subscription's (no consumer) `--stall-after`'s.
    fn window(
        &self,
        state: &State,
        consumer: Option<&ConsumerName>,
        judged: Option<&Judgement>,
    ) -> Duration {
        judged
            .and_then(|j| j.window)
            .map(|w| w.duration)
            .or_else(|| state.sample(consumer?).map(|s| ms(s.window_ms)))
            .unwrap_or(self.consumer.stall_after)
    }
}

/// What the run starts from besides the configuration.
#[derive(Debug, Clone)]
pub struct Start {
    /// The check's state file, as read.
    pub kept: Kept,
    /// Where the state dir is, or every place tried with why it cannot be used.
    pub place: Result<StateDirUsed, Vec<(String, String)>>,
    /// When any probe of this check last ran (the state file's mark): how far apart the runs
    /// come.
    pub previous_run_ms: Option<i64>,
    /// Local clock, ms since the epoch: the run's one reading.
    pub now_ms: i64,
}

/// What the run needs next.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask<'r> {
    /// The remembered connections, each by its sock_diag identity (one hash lookup each).
    Exact(&'r [KnownSocket]),
    /// A walk of the socket table, to these remote ports.
    Walk(&'r [u16]),
    /// Every server's INFO.
    Servers,
    /// Which NATS the peers of these client sockets are (their INFO, asked directly).
    Identities(&'r [SocketAddr]),
    /// The consumers (and the streams where work waits).
    Consumers(&'r [ConsumerName]),
    /// Remembered connections at their servers, by cid (`direct`: at the monitoring port).
    Lookups(&'r [Lookup1]),
    /// The account's connection list, for these subscriptions and this pod's addresses;
    /// `every`: the whole list, for what this pod's connections published.
    Connz {
        wanted: &'r [Wanted],
        ours: &'r [SocketAddr],
        every: bool,
    },
    /// How long ago the youngest holder of the counted connections started.
    ClientAge(ClientOf),
    /// The state to keep for the next run.
    Store(&'r State),
}

/// One remembered connection asked for by cid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup1 {
    pub server: ServerIdent,
    pub cid: u64,
    /// At the monitoring port, where it was matched there.
    pub direct: bool,
}

/// Whose age: the named processes holding these (`pids`), else whoever holds these inodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientOf {
    Pids(Vec<u32>),
    Inodes(Vec<u64>),
}

/// The answer to an `Ask`, of the same kind.
#[derive(Debug, Clone)]
pub enum Seen {
    /// For each remembered connection, what the kernel said; the named processes holding
    /// them. Err: the questions could not be asked.
    Exact(Result<(Vec<Rechecked>, Vec<Process>), String>),
    Walk(Pod),
    Servers(Vec<ServerAnswer>),
    /// Each candidate's identity (None: it did not answer as NATS); None: none could be asked.
    Identities(Option<Vec<Option<Identity>>>),
    Consumers {
        observed: Vec<Observed>,
        /// The JetStream domain the connected server announced.
        server_domain: Option<String>,
        /// Whether it announced JetStream of its own.
        server_jetstream: bool,
    },
    /// Each lookup's answer, and whether the ask reached the server (the probe's login went
    /// through, or the monitoring port was asked).
    Lookups(Vec<(Result<Vec<LookedUp>, Unknown>, bool)>),
    Connz(Result<Connz, Unknown>, bool),
    ClientAge(Option<Duration>),
    Stored(Result<(), String>),
}

/// A configuration that can never work, found by the run: exit 2 at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No place to keep samples: every place tried, with why.
    NoPlace(Vec<(String, String)>),
}

/// The run's end: what `check` reports and `diagnose` explains.
#[derive(Debug, Clone)]
pub struct Ended {
    pub verdict: Verdict,
    pub connections: Connections,
    pub observations: Observations,
    pub consumers: Vec<JudgedConsumer>,
    pub subscriptions: Vec<JudgedSubscription>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Exact,
    Walk,
    Servers,
    Identities,
    Consumers,
    Lookups,
    /// `Ask::Connz`'s: the subscriptions to match, and whether a pull part wants `every` one.
    Connz(Vec<Wanted>, bool),
    ClientAge,
    Store,
    Done,
    /// Ended by a configuration that can never work: no place to keep samples.
    Refused,
}

/// One subscription on its way through the run.
#[derive(Debug, Clone)]
struct Sub {
    wanted: Wanted,
    consumer: Option<ConsumerName>,
    /// A pull consumer's part: what the consumer had done by this look.
    pull: Option<Work>,
    memo: SubscriptionMemo,
    rematch: Rematch,
    /// Its plan was to look its connections up: only then do the lookups judge it. A plan to
    /// match chose the list (its connections changed), whoever else looks the same one up.
    looking_up: bool,
    result: Option<SubJudged>,
    /// `Run::window_of_subscription` when it was made: neither the judgements nor the
    /// samples it reads change before the subscription is judged.
    window: Duration,
}

impl Sub {
    /// A judgement of it that did not reach the server, going on from what was remembered:
    /// for a pull consumer's part, what it published; else its connection.
    fn judged(&self, held: Held, found: Found) -> SubJudged {
        let pull = self.pull.is_some();
        SubJudged {
            held,
            found,
            connection: self.memo.connection.clone().filter(|_| !pull),
            published: self.memo.pull.clone().filter(|_| pull),
            asked: false,
        }
    }

    /// The connections it goes on from: a pull consumer's part's last reading, else the one
    /// remembered.
    fn remembered(&self) -> Vec<&Remembered> {
        match (&self.pull, &self.memo.pull) {
            (Some(_), Some(kept)) => kept.connections.iter().map(|(m, _)| m).collect(),
            _ => self.memo.connection.iter().collect(),
        }
    }

    /// Trust, look up or match its connection (`remembered::plan`). A pull consumer's part's
    /// connections are read at a look when due: after reads that went unanswered, the next
    /// waits a look, then two, and so on (a slow server asked less); they are asked for by cid
    /// while they are the pod's same ones (`remembered::plan_pull`), and read only where a
    /// reading could find the pod not taking part (`subscription::unread`).
    /// `diagnose` trusts nothing and waits for nothing: it asks.
    fn plan(&self, check: &Check, live: &[Socket], looking: bool, now: i64) -> Plan {
        let unanswered = self.memo.unanswered.as_ref().filter(|_| !check.diagnose);
        let Some(work) = &self.pull else {
            let kept = self.memo.connection.as_ref();
            let asking = Asking {
                setting: match check.diagnose {
                    true => TrustSetting::Fixed(Duration::ZERO),
                    false => check.subscription_every,
                },
                sample_every: check.sample_every,
                direct: kept.is_some_and(|m| is_direct(check, &m.server)),
                looking,
            };
            return remembered::plan(kept, unanswered, live, asking, now);
        };
        if let Some(next) = remembered::waiting(unanswered, check.sample_every, now) {
            return Plan::Wait(next);
        }
        let kept = self.memo.pull.as_ref();
        if let Err(why) = remembered::plan_pull(kept, live) {
            return Plan::Match(why);
        }
        let unread = kept.filter(|_| !check.diagnose);
        match unread.and_then(|k| subscription::unread(k, work, self.window, now)) {
            Some((held, found)) => Plan::Judged(held, found),
            None => Plan::LookUp,
        }
    }

    /// Its connections as their servers answered the lookups (`answers` to `lookups`): judged
    /// when each is still this pod's (a pull consumer's part by what they published); not
    /// judged, going on from what was remembered, when a server did not answer for one;
    /// matched by address again (`Err`) when one changed, or a pull consumer's part's was not
    /// looked up. None: nothing of it was looked up.
    fn looked_up(
        &self,
        lookups: &[Lookup1],
        answers: &[(Result<Vec<LookedUp>, Unknown>, bool)],
        now: i64,
    ) -> Option<Result<SubJudged, Rematch>> {
        let pull = self.pull.as_ref().zip(self.memo.pull.as_ref());
        let ms = self.remembered();
        let mut confirmed = Vec::new();
        let mut unjudged = None;
        let mut reached_all = true;
        for m in &ms {
            let Some(i) = lookup_of(lookups, m) else {
                return pull.map(|_| Err(Rematch::FirstTime));
            };
            let (answer, reached) = &answers[i];
            reached_all &= reached;
            match answer.as_ref().map(|a| remembered::confirm(m, a)) {
                Ok(Confirmed::Changed(why)) => return Some(Err(why)),
                Ok(Confirmed::Yes(c)) => confirmed.push(((*m).clone(), c)),
                Ok(Confirmed::Unanswered) => {
                    unjudged.get_or_insert(Unknown::NotListed(format!(
                        "server {} did not answer the lookup of cid {} in time",
                        m.server.name, m.cid
                    )));
                }
                Err(why) => {
                    unjudged.get_or_insert(why.clone());
                }
            }
        }
        let found = Found::LookedUp {
            cid: ms.first().map_or(0, |m| m.cid),
        };
        let judged = match (unjudged, pull) {
            (Some(why), _) => self.judged(Held::NotJudged(why), found),
            (None, Some((work, kept))) => {
                let readings = confirmed.into_iter().map(|(m, c)| (m, c.in_msgs));
                let (held, published) = subscription::judge_pull(
                    readings.collect(),
                    Some(kept),
                    work,
                    self.window,
                    now,
                );
                SubJudged {
                    published: Some(published),
                    ..self.judged(held, found)
                }
            }
            (None, None) => {
                // Its one connection; none remembered: nothing was looked up.
                let (m, c) = confirmed.pop()?;
                let held = remembered::judge_confirmed(&self.wanted, c);
                let again = Remembered {
                    held_at_ms: matches!(held, Held::Yes { .. }).then_some(now),
                    account_connections: c.account_connections,
                    ..m
                };
                SubJudged {
                    connection: Some(again),
                    ..self.judged(held, found)
                }
            }
        };
        Some(Ok(SubJudged {
            asked: reached_all,
            ..judged
        }))
    }

    /// Matched by address in the server's connection list (`answer`; `ours`, this pod's
    /// addresses, of `sockets`); a match that could not be judged goes on from what was
    /// remembered. A pull consumer's part: this pod's connections listed, each with what it
    /// published, judged against what the last look kept. A list that may lack one of them (a
    /// server that did not answer) judges nothing: the missing one may be the one that pulls.
    fn matched(
        &self,
        ours: &[SocketAddr],
        sockets: &[Socket],
        answer: &Result<Connz, Unknown>,
        now: i64,
    ) -> SubJudged {
        let found = Found::Matched(self.rematch);
        let connz = match answer {
            Ok(c) => c,
            Err(why) => return self.judged(Held::NotJudged(why.clone()), found),
        };
        let Some(work) = &self.pull else {
            let held = subscription::judge(&self.wanted, ours, answer);
            let connection = match held {
                Held::NotJudged(_) => self.memo.connection.clone(),
                _ => remembered::remember(
                    &self.wanted,
                    &held,
                    sockets,
                    &remembered::listed(connz),
                    now,
                ),
            };
            return SubJudged {
                connection,
                ..self.judged(held, found)
            };
        };
        if let Some(why) = &connz.incomplete {
            let held = Held::NotJudged(Unknown::NotListed(why.clone()));
            return self.judged(held, found);
        }
        let mut readings: Vec<(Remembered, u64)> = Vec::new();
        for c in remembered::listed(connz) {
            let server = c.server.clone().unwrap_or_default();
            let known = readings
                .iter()
                .any(|(r, _)| r.cid == c.cid && r.server == server);
            if known || !ours.contains(&c.addr) {
                continue;
            }
            let inode = sockets
                .iter()
                .find(|s| s.addr == c.addr)
                .map_or(0, |s| s.inode);
            let remembered = Remembered {
                server,
                cid: c.cid,
                local: c.addr,
                inode,
                held_at_ms: None,
                account_connections: c.account_connections,
            };
            readings.push((remembered, c.in_msgs));
        }
        if readings.is_empty() {
            return self.judged(subscription::judge(&self.wanted, ours, answer), found);
        }
        let before = self.memo.pull.as_ref();
        let (held, published) = subscription::judge_pull(readings, before, work, self.window, now);
        SubJudged {
            published: Some(published),
            ..self.judged(held, found)
        }
    }
}

#[derive(Debug, Clone)]
struct SubJudged {
    held: Held,
    found: Found,
    connection: Option<Remembered>,
    /// A pull consumer's part: what to go on from.
    published: Option<Published>,
    /// The ask reached the server.
    asked: bool,
}

/// One run, between its asks: what it has seen so far and the step it is at.
#[derive(Debug, Clone)]
pub struct Run<'c> {
    check: &'c Check,
    start: Start,
    state: State,
    step: Step,
    /// The ports walked, and the routes through which a socket counts.
    ports: Vec<u16>,
    routes: Vec<Route>,
    walked: Walked,
    connections: Connections,
    candidates: Vec<SocketAddr>,
    obs: Observations,
    judgements: Vec<Judgement>,
    subs: Vec<Sub>,
    lookups: Vec<Lookup1>,
    ours: Vec<SocketAddr>,
    /// The inodes of this pod's live connections (`our_sockets`), once they are known.
    live: Vec<u64>,
    consumers: Vec<JudgedConsumer>,
    subscriptions: Vec<JudgedSubscription>,
}

impl<'c> Run<'c> {
    pub fn new(check: &'c Check, start: Start) -> Run<'c> {
        let state = start.kept.state().into_owned();
        // The connections the last healthy run counted stand for the addresses they stood
        // for while they last (`Via::Counted`).
        let routes: Vec<Route> = state
            .sockets
            .iter()
            .filter_map(|k| {
                Some(Route {
                    dialled: k.stands_for?,
                    held_as: k.remote,
                    via: Via::Counted { local: k.local },
                })
            })
            .collect();
        let exact =
            check.exact && !check.diagnose && crate::rules::exact::may_decide(check.asked());
        let (step, walked) = match (exact, state.sockets.is_empty()) {
            (true, false) => (Step::Exact, Walked::NotTried),
            (true, true) => (Step::Walk, Walked::NothingRemembered),
            (false, _) => (Step::Walk, Walked::NotTried),
        };
        // The pod is the exact lookup's or the walk's, whichever decides.
        let obs = Observations {
            now_ms: start.now_ms,
            ..Observations::default()
        };
        Run {
            ports: ports_with(&check.connection.ports, &routes),
            check,
            state,
            step,
            routes,
            walked,
            connections: Connections::default(),
            candidates: Vec::new(),
            obs,
            judgements: Vec::new(),
            subs: Vec::new(),
            lookups: Vec::new(),
            ours: Vec::new(),
            live: Vec::new(),
            consumers: Vec::new(),
            subscriptions: Vec::new(),
            start,
        }
    }

    /// What the run needs next; None when it has ended.
    pub fn ask(&self) -> Option<Ask<'_>> {
        Some(match &self.step {
            Step::Exact => Ask::Exact(&self.state.sockets),
            Step::Walk => Ask::Walk(&self.ports),
            Step::Servers => Ask::Servers,
            Step::Identities => Ask::Identities(&self.candidates),
            Step::Consumers => Ask::Consumers(&self.check.consumers),
            Step::Lookups => Ask::Lookups(&self.lookups),
            Step::Connz(wanted, every) => Ask::Connz {
                wanted,
                ours: &self.ours,
                every: *every,
            },
            Step::ClientAge => {
                let inodes = self.connections.established.iter().map(|s| s.inode);
                Ask::ClientAge(match &self.obs.pod.owned {
                    Some(owned) => ClientOf::Pids(
                        inodes
                            .filter_map(|i| owned.get(&i).map(|h| h.pid))
                            .collect(),
                    ),
                    None => ClientOf::Inodes(inodes.collect()),
                })
            }
            Step::Store => Ask::Store(&self.state),
            Step::Done | Step::Refused => return None,
        })
    }

    /// Feeds the answer to the last ask.
    pub fn feed(&mut self, seen: Seen) {
        match (&self.step, seen) {
            (Step::Exact, Seen::Exact(answer)) => self.exact(answer),
            (Step::Walk, Seen::Walk(pod)) => self.walked(pod),
            (Step::Servers, Seen::Servers(answers)) => self.servers(answers),
            (Step::Identities, Seen::Identities(answers)) => self.identities(answers),
            (
                Step::Consumers,
                Seen::Consumers {
                    observed,
                    server_domain,
                    server_jetstream,
                },
            ) => {
                self.obs.server_domain = server_domain;
                self.obs.server_jetstream = server_jetstream;
                self.consumers_seen(observed);
            }
            (Step::Lookups, Seen::Lookups(answers)) => self.looked_up(answers),
            (Step::Connz(..), Seen::Connz(answer, reached)) => self.matched(answer, reached),
            (Step::ClientAge, Seen::ClientAge(age)) => {
                self.obs.client_age = Some(age);
                self.settle();
            }
            (Step::Store, Seen::Stored(result)) => self.stored(result),
            (step, seen) => panic!("{seen:?} fed to a run waiting for {step:?}"),
        }
    }

    /// The run's end: its verdict and facts, or a configuration that can never work.
    pub fn end(self) -> Result<Ended, Refusal> {
        if let (Step::Refused, Err(tried)) = (&self.step, self.start.place) {
            return Err(Refusal::NoPlace(tried));
        }
        assert_eq!(self.step, Step::Done, "a run ended before it was done");
        let healths: Vec<_> = self
            .consumers
            .iter()
            .map(JudgedConsumer::health)
            .chain(self.subscriptions.iter().map(JudgedSubscription::health))
            .collect();
        let nats_silent = crate::rules::judged::nats_silent(&self.consumers, &self.subscriptions);
        let verdict = verdict::decide(
            &self.connections,
            server_state(&self.obs.servers),
            &healths,
            nats_silent,
            &self.check.connection,
        );
        Ok(Ended {
            verdict,
            connections: self.connections,
            observations: self.obs,
            consumers: self.consumers,
            subscriptions: self.subscriptions,
        })
    }

    // The connections.

    /// The exact lookup decides the run when enough of the remembered connections are as
    /// they were (`rules::exact::unchanged`) and live; else the table is walked.
    fn exact(&mut self, answer: Result<(Vec<Rechecked>, Vec<Process>), String>) {
        let Ok((rechecked, processes)) = answer else {
            return self.walk(Walked::LookupFailed);
        };
        let remembered = self.state.sockets.len();
        let found: Vec<(KnownSocket, _)> = self
            .state
            .sockets
            .iter()
            .zip(&rechecked)
            .filter_map(|(k, again)| Some((*k, crate::rules::exact::unchanged(k, again)?)))
            .collect();
        let owned: Option<BTreeMap<u64, Holder>> = self.check.owner_named.then(|| {
            found
                .iter()
                .filter_map(|(k, _)| Some((k.inode, k.holder?)))
                .collect()
        });
        let sockets: Vec<_> = found.into_iter().map(|(_, s)| s).collect();
        let policy = &self.check.connection;
        let connections = connection::connections(&sockets, policy, owned.as_ref(), &self.routes);
        if !connection::connected(&connections, policy) {
            let changed = Walked::Changed {
                remembered,
                live: connection::live(&connections),
            };
            return self.walk(changed);
        }
        self.obs.pod = Pod {
            processes,
            owned,
            scan: SocketScan {
                sockets,
                lookup: Lookup::Exact { remembered },
                ..SocketScan::default()
            },
            netns_of: self.check.netns_of,
        };
        self.connections = connections;
        self.sockets_done();
    }

    fn walk(&mut self, why: Walked) {
        self.walked = why;
        self.step = Step::Walk;
    }

    fn walked(&mut self, mut pod: Pod) {
        pod.scan.lookup = Lookup::Walk(self.walked);
        let again = !self.obs.servers.is_empty();
        self.obs.pod = pod;
        self.count();
        let policy = &self.check.connection;
        match again {
            false if verdict::needs_server(&self.connections, policy) => self.step = Step::Servers,
            false => self.sockets_done(),
            true => self.other_backends(),
        }
    }

    /// The pod's sockets that are this client's connections, by the routes known.
    fn count(&mut self) {
        let pod = &self.obs.pod;
        self.connections = connection::connections(
            &pod.scan.sockets,
            &self.check.connection,
            pod.owned.as_ref(),
            &self.routes,
        );
    }

    /// The servers' answers: where they show the connection held elsewhere (socket-level
    /// load balancing, a cluster's members), the sockets to those ports count too.
    fn servers(&mut self, answers: Vec<ServerAnswer>) {
        self.obs.servers = answers;
        let learned = connection::routes(&self.obs.servers);
        if learned.is_empty() {
            return self.sockets_done();
        }
        self.routes.extend(learned);
        let ports = ports_with(&self.check.connection.ports, &self.routes);
        if ports != self.ports {
            self.ports = ports;
            self.step = Step::Walk;
            return;
        }
        self.count();
        self.other_backends();
    }

    /// Still too few: the client's sockets to a learned backend's port that count for
    /// nothing yet are asked which NATS they reach (`rules::connection::same_nats`).
    fn other_backends(&mut self) {
        if connection::connected(&self.connections, &self.check.connection) {
            return self.sockets_done();
        }
        let pod = &self.obs.pod;
        self.candidates = connection::candidates(
            &pod.scan.sockets,
            pod.owned.as_ref(),
            &self.connections,
            &self.routes,
            crate::timing::MAX_ASKED,
        );
        match self.candidates.is_empty() {
            true => self.sockets_done(),
            false => self.step = Step::Identities,
        }
    }

    fn identities(&mut self, answers: Option<Vec<Option<Identity>>>) {
        if let Some(identities) = answers {
            let asked: Vec<_> = self.candidates.iter().copied().zip(identities).collect();
            let same = connection::same_nats(&self.obs.servers, &asked);
            self.routes.extend(same);
            self.count();
        }
        self.sockets_done();
    }

    /// A healthy run keeps what the next one looks up (`rules::exact::remember`); an
    /// unhealthy one leaves it (a connection gone costs the next run one lookup, one back is
    /// found again). `diagnose` only reads.
    fn keep_connections(&mut self) {
        if self.check.diagnose || !connection::connected(&self.connections, &self.check.connection)
        {
            return;
        }
        self.state.sockets = crate::rules::exact::remember(
            &self.connections,
            &self.check.connection,
            self.obs.pod.owned.as_ref(),
        );
    }

    /// The connections are known: with one, the consumers and subscriptions.
    fn sockets_done(&mut self) {
        self.keep_connections();
        let check = self.check;
        if !verdict::needs_consumers(&self.connections, &check.connection, check.asked()) {
            // Not looked at: the pod held no connection to judge them by (NATS may have
            // dropped it), which the table's "not asked" row makes a start-over, the faults
            // the last look saw void (a connection that comes back on the same socket brings
            // none of them back).
            for name in &check.consumers {
                if let Some(marked) = self.state.sample(name).and_then(consumer::unobserved) {
                    self.state.set_sample(name, Some(marked));
                }
            }
            self.state.faults.clear();
            for (_, memo) in &mut self.state.subscriptions {
                memo.pull = None;
            }
            self.state
                .subscriptions
                .retain(|(_, memo)| *memo != SubscriptionMemo::default());
            return self.finish();
        }
        let Ok(place) = &self.start.place else {
            self.step = Step::Refused;
            return;
        };
        self.obs.state_dir = Some(place.clone());
        let (sockets, live) = our_sockets(&self.connections);
        self.ours = sockets.iter().map(|s| s.addr).collect();
        self.live = live.iter().map(|s| s.inode).collect();
        if !check.consumers.is_empty() {
            self.obs.sampling = Some(remembered::sampling(
                self.state.look.as_ref(),
                self.start.previous_run_ms,
                &self.live,
                check.sample_every,
                self.start.now_ms,
            ));
        }
        // `diagnose` asks every time, whatever the last look left: what the probe's next run
        // would do is said (`sampling`), not done.
        match self.obs.sampling {
            Some(Sampling::Ask(_)) => self.step = Step::Consumers,
            Some(_) if check.diagnose => self.step = Step::Consumers,
            _ => {
                // Between looks, the deliver subscriptions the last look found.
                if check.own_subscription {
                    let last = self.state.look.iter().flat_map(|l| &l.wanted);
                    self.subs = last
                        .map(|(w, c)| self.sub(w.clone(), Some(c.clone())))
                        .collect();
                }
                self.subscriptions_due();
            }
        }
    }

    // The consumers.

    fn consumers_seen(&mut self, observed: Vec<Observed>) {
        let (check, now) = (self.check, self.start.now_ms);
        let seen = check
            .consumers
            .iter()
            .zip(observed)
            .map(|(name, observed)| {
                let previous = self.state.sample(name);
                let judged = consumer::judge(&observed, previous, &check.consumer, now);
                let seen = ConsumerSeen {
                    previous: Some(self.start.kept.sample(name)),
                    state_problem: None,
                    name: name.clone(),
                    observed,
                };
                (seen, judged)
            });
        (self.obs.consumers, self.judgements) = seen.unzip();
        if check.own_subscription {
            self.subs = self.own_parts();
        }
        self.subscriptions_due();
    }

    /// Each consumer's part this pod must hold: a push consumer's deliver subject (and
    /// group), a pull consumer's pulls. One NATS did not answer for keeps the part the last
    /// look found, not judged: the freshest evidence.
    fn own_parts(&self) -> Vec<Sub> {
        let mut subs = Vec::new();
        for seen in &self.obs.consumers {
            let facts = match &seen.observed {
                Observed::Found { facts, .. } => facts,
                Observed::NotJudged(why) => {
                    let kept = self.state.look.iter().flat_map(|l| &l.wanted);
                    subs.extend(
                        kept.filter(|(_, c)| *c == seen.name)
                            .map(|(w, c)| self.sub(w.clone(), Some(c.clone()))),
                    );
                    let mut sub = self.sub(Wanted::pulls_of(&seen.name), Some(seen.name.clone()));
                    // Still a pull part: never kept, nor judged, as a deliver subject.
                    sub.pull = sub.memo.pull.as_ref().map(|p| Work {
                        created: p.created.clone(),
                        delivered: p.delivered,
                    });
                    if sub.pull.is_some() {
                        sub.result = Some(sub.judged(Held::NotJudged(why.clone()), Found::Waited));
                        subs.push(sub);
                    }
                    continue;
                }
                _ => continue,
            };
            let sub = match &facts.deliver_subject {
                Some(subject) => {
                    let wanted = Wanted {
                        subject: subject.clone(),
                        queue: facts.deliver_group.clone(),
                    };
                    self.sub(wanted, Some(seen.name.clone()))
                }
                None => Sub {
                    pull: Some(Work {
                        created: facts.created.clone(),
                        delivered: facts.delivered.consumer_seq,
                    }),
                    ..self.sub(Wanted::pulls_of(&seen.name), Some(seen.name.clone()))
                },
            };
            subs.push(sub);
        }
        subs
    }

    fn sub(&self, wanted: Wanted, consumer: Option<ConsumerName>) -> Sub {
        Sub {
            memo: self.state.memo(&wanted),
            window: self.window_of_subscription(consumer.as_ref()),
            wanted,
            consumer,
            pull: None,
            rematch: Rematch::FirstTime,
            looking_up: false,
            result: None,
        }
    }

    // The subscriptions.

    /// Trust, look up or match each subscription's connection (`remembered::plan`).
    fn subscriptions_due(&mut self) {
        let core: Vec<Sub> = self
            .check
            .subscriptions
            .iter()
            .map(|w| self.sub(w.clone(), None))
            .collect();
        self.subs.extend(core);
        let (check, now) = (self.check, self.start.now_ms);
        let (_, live) = our_sockets(&self.connections);
        let looking = matches!(self.obs.sampling, Some(Sampling::Ask(_)));
        for sub in self.subs.iter_mut().filter(|s| s.result.is_none()) {
            match sub.plan(check, &live, looking, now) {
                Plan::Judged(held, found) => sub.result = Some(sub.judged(held, found)),
                Plan::Wait(next) => {
                    let held = Held::NotJudged(Unknown::Waiting(next));
                    sub.result = Some(sub.judged(held, Found::Waited));
                }
                Plan::LookUp => {
                    sub.looking_up = true;
                    for m in sub.remembered() {
                        look_up(&mut self.lookups, check, m);
                    }
                }
                Plan::Match(why) => sub.rematch = why,
            }
        }
        match self.lookups.is_empty() {
            false => self.step = Step::Lookups,
            true => self.match_rest(),
        }
    }

    /// The remembered connections as their servers answered: still this pod's (judged), not
    /// answered (not judged, asked again later), or another's (matched by address again).
    fn looked_up(&mut self, answers: Vec<(Result<Vec<LookedUp>, Unknown>, bool)>) {
        let now = self.start.now_ms;
        for sub in self.subs.iter_mut().filter(|s| s.looking_up) {
            match sub.looked_up(&self.lookups, &answers, now) {
                Some(Ok(judged)) => sub.result = Some(judged),
                Some(Err(why)) => sub.rematch = why,
                None => {}
            }
        }
        self.match_rest();
    }

    /// The subscriptions still without an answer are matched by address in the server's
    /// connection list.
    fn match_rest(&mut self) {
        let rest: Vec<&Sub> = self.subs.iter().filter(|s| s.result.is_none()).collect();
        let wanted = rest.iter().filter(|s| s.pull.is_none());
        let wanted = wanted.map(|s| s.wanted.clone()).collect();
        let every = rest.iter().any(|s| s.pull.is_some());
        match rest.is_empty() {
            true => self.subscriptions_done(),
            false => self.step = Step::Connz(wanted, every),
        }
    }

    /// A match that could not be judged keeps what was remembered.
    fn matched(&mut self, answer: Result<Connz, Unknown>, reached: bool) {
        let (sockets, _) = our_sockets(&self.connections);
        let now = self.start.now_ms;
        for sub in self.subs.iter_mut().filter(|s| s.result.is_none()) {
            let judged = sub.matched(&self.ours, &sockets, &answer, now);
            sub.result = Some(SubJudged {
                asked: reached,
                ..judged
            });
        }
        self.obs.connz = Some(answer);
        self.subscriptions_done();
    }

    /// Each subscription judged, with the freshest evidence where this run could not look,
    /// and what is kept for it.
    fn subscriptions_done(&mut self) {
        let now = self.start.now_ms;
        let subs = core::mem::take(&mut self.subs);
        for sub in subs {
            let j = sub.result.expect("every subscription judged");
            // A pull consumer's quiet time starts over where NATS itself may be the cause
            // (the table's "not there", "not here"): the next reading counts from itself.
            let starts_over =
                matches!(&j.held, Held::NotJudged(why) if !answers::leaves_evidence(why));
            let unanswered =
                remembered::count_unanswered(sub.memo.unanswered.as_ref(), &j.held, j.asked, now);
            let of = Of::Subscription(sub.wanted.clone());
            debug_assert_eq!(
                sub.window,
                self.window_of_subscription(sub.consumer.as_ref())
            );
            let carried = self.freshest(&of, &j.held, sub.window, |h| match *h {
                Held::NotByThisConnection { connection } => Some(Wrong::NotHeld { connection }),
                Held::NotPulling {
                    connection,
                    quiet,
                    delivered,
                } => Some(Wrong::NotPulling {
                    connection,
                    quiet_ms: quiet.as_millis() as i64,
                    delivered,
                }),
                _ => None,
            });
            // Carried: this run could not judge it; the fault the last look saw says it again.
            let held = match carried.as_ref().map(|(wrong, _)| wrong) {
                Some(&Wrong::NotHeld { connection }) => Held::NotByThisConnection { connection },
                Some(&Wrong::NotPulling {
                    connection,
                    quiet_ms,
                    delivered,
                }) => Held::NotPulling {
                    connection,
                    quiet: ms(quiet_ms),
                    delivered,
                },
                _ => j.held,
            };
            self.state.set_memo(
                &sub.wanted,
                SubscriptionMemo {
                    connection: j.connection,
                    unanswered,
                    pull: j.published.filter(|_| !starts_over),
                },
            );
            self.subscriptions.push(JudgedSubscription {
                pull: sub.pull.is_some(),
                held,
                carried: carried.map(|(_, c)| c),
                found: Some(j.found),
                wanted: sub.wanted,
                consumer: sub.consumer,
                standing: None,
                judged_before: sub.memo.connection.is_some() || sub.memo.pull.is_some(),
            });
        }
        let outcomes: Vec<&Outcome> = self.judgements.iter().map(|j| &j.outcome).collect();
        match verdict::needs_client_age(&outcomes) {
            true => self.step = Step::ClientAge,
            false => self.settle(),
        }
    }

    /// A subscription's window (`Check::window`), with its consumer's judgement where this
    /// run has one.
    fn window_of_subscription(&self, consumer: Option<&ConsumerName>) -> Duration {
        let i = consumer.and_then(|c| self.check.consumers.iter().position(|n| n == c));
        let judged = i.and_then(|i| self.judgements.get(i));
        self.check.window(&self.state, consumer, judged)
    }

    /// The freshest evidence of `of`: this run's `now_seen`, where it looked (its fault kept,
    /// or none); else the fault the last look saw, while it stands (`SeenFault::stands`),
    /// carried (returned).
    fn freshest<T: NotJudged>(
        &mut self,
        of: &Of,
        now_seen: &T,
        window: Duration,
        wrong: impl Fn(&T) -> Option<Wrong>,
    ) -> Option<(Wrong, Carried)> {
        let now = self.start.now_ms;
        let Some(why) = now_seen.not_judged().cloned() else {
            let fault = wrong(now_seen).map(|wrong| SeenFault {
                of: of.clone(),
                wrong,
                at_ms: now,
                window_ms: window.as_millis() as i64,
                inodes: self.live.clone(),
            });
            self.state.set_fault(of, fault);
            return None;
        };
        let standing = self
            .state
            .fault(of)
            .filter(|f| f.stands(&why, &self.live, now))
            .cloned();
        self.state.set_fault(of, standing.clone());
        standing.map(|f| {
            let ago = f.ago(now);
            (f.wrong, Carried { why, ago })
        })
    }

    // The look settled.

    /// Each consumer's judgement with the per-pod policy (a young client gets its window),
    /// the freshest evidence where this run could not look, the look the next runs go on
    /// from, the samples and the causes.
    fn settle(&mut self) {
        let (check, now) = (self.check, self.start.now_ms);
        let judgements = core::mem::take(&mut self.judgements);
        let outcomes: Vec<&Outcome> = judgements.iter().map(|j| &j.outcome).collect();
        let looked = remembered::is_look(&outcomes);
        let mut calm = true;
        let mut least_window: Option<Duration> = None;
        for (j, seen) in judgements.iter().zip(self.obs.consumers.clone()) {
            let name = &seen.name;
            let window = check.window(&self.state, Some(name), Some(j));
            least_window = Some(least_window.map_or(window, |w| w.min(window)));
            let outcome =
                verdict::excuse_young_client(j.outcome.clone(), j.window, self.obs.client_age);
            let (outcome, episode) = verdict::after_restart(
                outcome,
                self.state.episode(name),
                self.obs.client_age,
                check.restart_again_after,
                now,
            );
            self.state.set_episode(name, episode);
            let of = Of::Consumer(name.clone());
            let carried = self.freshest(&of, &outcome, window, |o| match o {
                Outcome::Unhealthy(f) => Some(Wrong::Consumer(f.clone())),
                _ => None,
            });
            let outcome = match carried.as_ref().map(|(wrong, _)| wrong) {
                Some(Wrong::Consumer(f)) => Outcome::Unhealthy(f.clone()),
                _ => outcome,
            };
            calm &= remembered::calm(&[(&outcome, j.sample.as_ref())]);
            if let Some(sample) = &j.sample {
                self.state.set_sample(name, Some(sample.clone()));
            }
            // A carried fault is said with the window it stands for, as when it was seen.
            let carried_window = carried.as_ref().map(|_| Window {
                duration: window,
                raised_for_ack_wait: None,
            });
            self.consumers.push(JudgedConsumer {
                seen,
                outcome,
                window: j.window.or(carried_window),
                progress: j.progress,
                standing: None,
                carried: carried.map(|(_, c)| c),
            });
        }
        // A pull consumer's part is calm when this pod published since the last look, or its
        // connections were not read (no reading could find it not taking part).
        calm &= self.subscriptions.iter().all(|s| match &s.held {
            Held::Pulls { quiet, .. } => {
                quiet.is_zero()
                    || matches!(s.found, Some(Found::NothingDelivered | Found::WithinWindow))
            }
            Held::NotPulling { .. } => false,
            _ => !s.pull,
        });
        // A look NATS answered for no consumer is no evidence: it refreshes nothing of the
        // last (its time, its calm). Only a run that asked has a look to remember.
        if looked {
            self.state.look = Some(LastLook {
                at_ms: now,
                calm,
                inodes: self.live.clone(),
                wanted: self
                    .subscriptions
                    .iter()
                    .filter(|s| !s.pull)
                    .filter_map(|s| Some((s.wanted.clone(), s.consumer.clone()?)))
                    .collect(),
                window_ms: least_window
                    .unwrap_or(check.consumer.stall_after)
                    .as_millis() as i64,
            });
        }
        self.carry_causes(None);
        self.finish();
    }

    /// Each consumer's and subscription's cause carried from the last run (`rules::cause`):
    /// one of the configuration becomes an error once it has lasted longer than its window;
    /// one gone is cleared. `no_room`: the state could not be kept, which is a cause of its
    /// own, lasting since the last sample that could be.
    fn carry_causes(&mut self, no_room: Option<&str>) {
        let check = self.check;
        for i in 0..self.consumers.len() {
            let r = &self.consumers[i];
            let name = r.seen.name.clone();
            // A sample kept by an earlier run: this consumer was judged with this
            // configuration on these servers.
            let before = match &r.seen.previous {
                Some(Loaded::Sample(p)) => Some(p.seen_at_ms),
                _ => None,
            };
            let now_cause = cause::of_consumer(&r.outcome, no_room.is_some(), before.is_some());
            let window = check.window(&self.state, Some(&name), None);
            let since = no_room.and(before);
            let standing = self.carry(Of::Consumer(name), now_cause, window, since);
            let r = &mut self.consumers[i];
            r.standing = standing;
            if let Some(why) = no_room {
                r.seen.state_problem = Some(why.to_string());
            }
        }
        for i in 0..self.subscriptions.len() {
            let s = &self.subscriptions[i];
            let now_cause = match &s.held {
                Held::NotJudged(why) => Some(cause::Seen::new(Cause::of(why), s.judged_before)),
                _ => None,
            };
            let of = Of::Subscription(s.wanted.clone());
            let window = self.window_of_subscription(s.consumer.as_ref());
            self.subscriptions[i].standing = self.carry(of, now_cause, window, None);
        }
    }

    /// `since_ms`: when the cause began, where no kept cause can say (None: as kept).
    fn carry(
        &mut self,
        of: Of,
        now_cause: Option<cause::Seen>,
        window: Duration,
        since_ms: Option<i64>,
    ) -> Option<Standing> {
        let now = self.start.now_ms;
        // Only a cause that may still become an error was kept; nothing else needs reading.
        let prev = now_cause.filter(cause::Seen::kept).and_then(|seen| {
            self.state.cause(&of).copied().or_else(|| {
                since_ms.map(|since_ms| cause::Persisting {
                    cause: seen.cause,
                    since_ms,
                    last_ms: now,
                })
            })
        });
        let (keep, standing) = cause::carry(prev.as_ref(), now_cause, now, window);
        self.state.set_cause(&of, keep);
        standing
    }

    /// The state is kept when it changed (and there is a place for it).
    fn finish(&mut self) {
        let changed = self.state != *self.start.kept.state();
        self.step = match changed && self.start.place.is_ok() {
            true => Step::Store,
            false => Step::Done,
        };
    }

    /// A state that could not be kept: each consumer judged this run says why, and its
    /// cause (no place with room) counts from the last sample kept.
    fn stored(&mut self, result: Result<(), String>) {
        if let Err(why) = result {
            if !self.consumers.is_empty() {
                self.carry_causes(Some(&why));
            }
        }
        self.step = Step::Done;
    }
}

/// Asks for the remembered connection `m` by cid, once however many subscriptions it holds.
fn look_up(lookups: &mut Vec<Lookup1>, check: &Check, m: &Remembered) {
    let lookup = Lookup1 {
        server: m.server.clone(),
        cid: m.cid,
        direct: is_direct(check, &m.server),
    };
    if !lookups.contains(&lookup) {
        lookups.push(lookup);
    }
}

/// Which of `lookups` asked for the remembered connection `m`.
fn lookup_of(lookups: &[Lookup1], m: &Remembered) -> Option<usize> {
    lookups
        .iter()
        .position(|l| l.server == m.server && l.cid == m.cid)
}

/// Whether a connection remembered at `at` is looked up at the monitoring port (it was
/// matched there), which finds a cid directly, rather than through the account's report.
pub fn is_direct(check: &Check, at: &ServerIdent) -> bool {
    check.monitor.as_ref().is_some_and(|u| *u == at.name)
}

/// The ports, and the ports the routes' `held_as` have: each once, in order.
fn ports_with(ports: &[u16], routes: &[Route]) -> Vec<u16> {
    let mut ports = ports.to_vec();
    ports.extend(routes.iter().map(|r| r.held_as.port()));
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// Whether any server answered as NATS; None when none was asked.
fn server_state(servers: &[ServerAnswer]) -> Option<ServerState> {
    (!servers.is_empty()).then(|| match servers.iter().any(|a| a.answer.is_nats()) {
        true => ServerState::Answers,
        false => ServerState::NotAnswering,
    })
}

/// This pod's counted connections as the server sees them (an IPv4-mapped address
/// unmapped), and of them the live ones: only a live connection is trusted or looked up; a
/// half-open one is matched again.
fn our_sockets(connections: &Connections) -> (Vec<Socket>, Vec<Socket>) {
    let sockets: Vec<Socket> = connections
        .established
        .iter()
        .map(|s| Socket {
            addr: SocketAddr::new(unmap(s.local.ip()), s.local.port()),
            inode: s.inode,
        })
        .collect();
    let live = sockets
        .iter()
        .filter(|s| {
            !connections
                .half_open
                .iter()
                .any(|(h, _)| h.inode == s.inode)
        })
        .copied()
        .collect();
    (sockets, live)
}
#[cfg(test)]
mod tests {
    //! The run's decisions, one by one: which asks it makes and when, what it keeps, and what
    //! it ends with. Through the simulated world (`world`), and fed by hand where an answer
    //! the world does not give is the point.
    use super::*;
    use crate::facts::{Answer as Info, Reached, TcpState};
    use crate::rules::consumer::{Fault, Healthy, Policy};
    use crate::rules::remembered::TrustSetting;
    use crate::world::{self, Answer, Behaviour, Consumer, Ms, Subscription, World};
    use std::vec;

    const NOW: i64 = 1_800_000_000_000;

    fn consumer(behaviour: Behaviour) -> Consumer {
        Consumer {
            name: world::name("S", "D"),
            behaviour,
            every: 1000,
            ack_wait: 1000,
        }
    }

    fn world(behaviour: Behaviour, answers: Vec<Answer>) -> World {
        let mut w = World::new(vec![consumer(behaviour)], answers);
        w.client.started = -1_000_000;
        w
    }

    fn deaf_at(w: &mut World, at: Option<Ms>, direct: bool) {
        w.subscription = Some(Subscription {
            wanted: Wanted {
                subject: "events.>".into(),
                queue: None,
            },
            deaf_at: at,
            account_connections: 100,
            direct,
            pull: false,
        });
    }

    /// A check of the sockets alone.
    fn sockets_only(w: &World) -> Check {
        Check {
            consumers: Vec::new(),
            ..w.check(4000, 3000)
        }
    }

    fn socket(local: &str, remote: &str, inode: u64) -> crate::facts::Socket {
        crate::facts::Socket {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            state: TcpState::Established,
            inode,
            uid: 1000,
            info: None,
            diag: Some(crate::facts::DiagId {
                cookie: inode,
                interface: 0,
            }),
        }
    }

    fn pod(sockets: Vec<crate::facts::Socket>) -> Pod {
        Pod {
            scan: SocketScan {
                sockets,
                ..SocketScan::default()
            },
            ..Pod::default()
        }
    }

    fn start(kept: Kept) -> Start {
        Start {
            kept,
            place: Ok(StateDirUsed {
                path: "/tmp/s".into(),
                skipped: Vec::new(),
            }),
            previous_run_ms: None,
            now_ms: NOW,
        }
    }

    /// What a run asked, in order, as words.
    fn asks(run: &Run) -> &'static str {
        match run.ask() {
            None => "done",
            Some(Ask::Exact(_)) => "exact",
            Some(Ask::Walk(_)) => "walk",
            Some(Ask::Servers) => "servers",
            Some(Ask::Identities(_)) => "identities",
            Some(Ask::Consumers(_)) => "consumers",
            Some(Ask::Lookups(_)) => "lookups",
            Some(Ask::Connz { .. }) => "connz",
            Some(Ask::ClientAge(_)) => "client age",
            Some(Ask::Store(_)) => "store",
        }
    }

    /// A check of the sockets alone asks the kernel for exactly the connections the last
    /// healthy run counted, and is decided by them while they are as they were; a changed or
    /// failed lookup walks. `diagnose`, a check that asks the server, and the /proc reader
    /// always walk.
    #[test]
    fn the_exact_lookup_decides_a_socket_check_alone() {
        let mut w = world(Behaviour::Acking, vec![Answer::OnTime]);
        let check = sockets_only(&w);
        let first = w.run(&check, 0);
        assert!(first.asked.walk && !first.asked.exact && first.asked.stored);
        assert_eq!(first.exit, 0);
        let kept = w.kept().unwrap().sockets.clone();
        assert_eq!(kept.len(), 1);
        let second = w.run(&check, 1000);
        assert!(second.asked.exact && !second.asked.walk && !second.asked.stored);
        let e = second.ended.unwrap();
        assert_eq!(
            e.observations.pod.scan.lookup,
            Lookup::Exact { remembered: 1 }
        );
        assert_eq!(e.verdict.reason, crate::rules::check::Reason::Connected);
        // A reconnect: the remembered connection is gone, the table walked, the new one kept.
        w.client.reconnects = vec![1500];
        let third = w.run(&check, 2000);
        assert!(third.asked.exact && third.asked.walk && third.asked.stored);
        let e = third.ended.unwrap();
        assert_eq!(
            e.observations.pod.scan.lookup,
            Lookup::Walk(Walked::Changed {
                remembered: 1,
                live: 0
            })
        );
        assert_ne!(w.kept().unwrap().sockets, kept);
        // diagnose walks, and keeps nothing of the connections.
        let before = w.kept().unwrap().sockets.clone();
        w.client.reconnects = vec![1500, 2500];
        let diagnose = Check {
            diagnose: true,
            ..check.clone()
        };
        let d = w.run(&diagnose, 3000);
        assert!(!d.asked.exact && d.asked.walk && !d.asked.stored);
        assert_eq!(w.kept().unwrap().sockets, before);
        // The /proc reader has no exact question.
        let proc = Check {
            exact: false,
            ..check.clone()
        };
        assert!(!w.run(&proc, 4000).asked.exact);
        // Nor has a check that asks the server: a consumer, a subscription, or both.
        let mut subscribed = world(Behaviour::Acking, vec![Answer::OnTime]);
        deaf_at(&mut subscribed, None, false);
        let core_only = Check {
            consumers: Vec::new(),
            own_subscription: false,
            subscriptions: vec![subscribed.subscription.clone().unwrap().wanted],
            ..subscribed.check(4000, 3000)
        };
        assert_eq!(core_only.subscriptions.len(), 1);
        for check in [w.check(4000, 3000), subscribed.check(4000, 3000), core_only] {
            for t in [0, 1000] {
                let ran = subscribed.run(&check, 10_000 + t);
                assert!(!ran.asked.exact && ran.asked.walk, "{check:?}");
            }
        }
        let lookup_failed = {
            let mut run = Run::new(&check, start(Kept::State(w.kept().unwrap().clone())));
            assert_eq!(asks(&run), "exact");
            run.feed(Seen::Exact(Err("netlink refused".into())));
            assert_eq!(asks(&run), "walk");
            run.feed(Seen::Walk(pod(Vec::new())));
            run.walked
        };
        assert_eq!(lookup_failed, Walked::LookupFailed);
    }

    /// A pod that holds its connection costs the server nothing: the servers are asked only
    /// without a connection, and only with `--server`.
    #[test]
    fn the_servers_are_asked_only_without_a_connection() {
        let mut w = world(Behaviour::Acking, vec![Answer::OnTime]);
        let check = sockets_only(&w);
        assert!(!w.run(&check, 0).asked.servers);
        w.client.gave_up = Some(500);
        let gave_up = w.run(&check, 1000);
        assert!(gave_up.asked.servers);
        assert_eq!(gave_up.exit, 1);
        let without = Check {
            connection: connection::Policy {
                server: false,
                ..check.connection.clone()
            },
            ..check.clone()
        };
        let ran = w.run(&without, 2000);
        assert!(!ran.asked.servers);
        assert_eq!(ran.exit, 1);
        // NATS not answering either: a restart would not help.
        let mut down = world(
            Behaviour::Acking,
            vec![Answer::Not(Unknown::Unreachable("refused".into()))],
        );
        down.client.gave_up = Some(0);
        assert_eq!(down.run(&check, 1000).exit, 0);
    }

    /// Where a server's answer shows the probe's own connection held elsewhere (socket-level
    /// load balancing), the sockets to that port are read too and count for the URL; a
    /// client socket to that port that still counts for nothing is asked which NATS it is.
    #[test]
    fn a_route_learned_from_the_servers_counts_where_the_kernel_holds_it() {
        let base = world(Behaviour::Acking, vec![]).check(4000, 3000);
        // The Service CIDR: a backend's own tuple is not in it.
        let check = Check {
            consumers: Vec::new(),
            connection: connection::Policy {
                remotes: vec!["10.96.0.0/12".parse().unwrap()],
                ..base.connection.clone()
            },
            ..base
        };
        let service: core::net::SocketAddr = "10.96.0.10:4222".parse().unwrap();
        let answer = |held_as: &str| ServerAnswer {
            url: "nats://10.96.0.10:4222".into(),
            answer: Info::Nats { version: None },
            reached: Some(Reached {
                dialled: service,
                local: "10.0.0.2:50000".parse().unwrap(),
                held_as: Some(held_as.parse().unwrap()),
            }),
            peers: Vec::new(),
            identity: Some(Identity {
                server_id: "N1".into(),
                cluster: Some("c".into()),
            }),
        };
        // Held at a backend's target port: the table walked again to that port.
        let mut run = Run::new(&check, start(Kept::Missing));
        assert_eq!(run.ask(), Some(Ask::Walk(&[4222])));
        run.feed(Seen::Walk(pod(Vec::new())));
        assert_eq!(asks(&run), "servers");
        run.feed(Seen::Servers(vec![answer("10.244.0.7:14222")]));
        assert_eq!(run.ask(), Some(Ask::Walk(&[4222, 14222])));
        let client = socket("10.0.0.2:40000", "10.244.0.7:14222", 7);
        run.feed(Seen::Walk(pod(vec![client.clone()])));
        assert_eq!(asks(&run), "store");
        run.feed(Seen::Stored(Ok(())));
        let e = run.end().unwrap();
        assert_eq!(e.verdict.health, crate::rules::check::Health::Healthy);
        assert_eq!(e.connections.established, core::slice::from_ref(&client));
        // Held at the same port as dialled: no second walk; the client's socket to another
        // backend is asked which NATS it is, and counts for being the same.
        let mut run = Run::new(&check, start(Kept::Missing));
        run.feed(Seen::Walk(pod(vec![socket(
            "10.0.0.2:40001",
            "10.244.0.8:4222",
            8,
        )])));
        assert_eq!(asks(&run), "servers");
        run.feed(Seen::Servers(vec![answer("10.244.0.7:4222")]));
        assert_eq!(
            run.ask(),
            Some(Ask::Identities(&["10.244.0.8:4222".parse().unwrap()]))
        );
        run.feed(Seen::Identities(Some(vec![Some(Identity {
            server_id: "N2".into(),
            cluster: Some("c".into()),
        })])));
        assert_eq!(asks(&run), "store");
        run.feed(Seen::Stored(Ok(())));
        assert_eq!(run.end().unwrap().connections.established.len(), 1);
        // Not asked (netlink refused, say): still too few, the server answers: unhealthy.
        let mut run = Run::new(&check, start(Kept::Missing));
        run.feed(Seen::Walk(pod(vec![socket(
            "10.0.0.2:40001",
            "10.244.0.8:4222",
            8,
        )])));
        run.feed(Seen::Servers(vec![answer("10.244.0.7:4222")]));
        run.feed(Seen::Identities(None));
        assert_eq!(asks(&run), "done");
        assert_eq!(
            run.end().unwrap().verdict.health,
            crate::rules::check::Health::Unhealthy
        );
        // A server that answers with no route: no second walk, nobody asked.
        let mut run = Run::new(&check, start(Kept::Missing));
        run.feed(Seen::Walk(pod(Vec::new())));
        run.feed(Seen::Servers(vec![answer("10.96.0.10:4222")]));
        assert_eq!(asks(&run), "done");
    }

    /// The consumers are asked only with a connection, and only when a look is due; without a
    /// connection each consumer's sample is kept as after NATS not there (its clocks start
    /// over), and nothing else is asked.
    #[test]
    fn the_consumers_are_asked_with_a_connection_when_due() {
        let mut w = world(Behaviour::Acking, vec![Answer::OnTime]);
        let check = w.check(4000, 3000);
        let first = w.run(&check, 0);
        assert!(first.asked.consumers && first.asked.stored);
        let look = w.kept().unwrap().look.clone().unwrap();
        assert_eq!(
            (look.at_ms, look.window_ms, look.inodes.clone()),
            (0, 4000, vec![1000])
        );
        // A first look has nothing to compare: not calm, so the next asks again.
        assert!(!look.calm);
        assert!(w.run(&check, 1000).asked.consumers);
        assert!(w.kept().unwrap().look.as_ref().unwrap().calm);
        // Calm: skipped until --sample-every, nothing stored.
        let skip = w.run(&check, 2000);
        assert!(!skip.asked.consumers && !skip.asked.stored);
        assert_eq!(
            skip.ended.unwrap().observations.sampling,
            Some(Sampling::Skip {
                asked_ago: Duration::from_secs(1)
            })
        );
        assert!(w.run(&check, 4000).asked.consumers);
        // Without a connection: nothing asked but the servers; the sample marked.
        w.client.gave_up = Some(4500);
        let gone = w.run(&check, 5000);
        assert!(!gone.asked.consumers && gone.asked.servers);
        let marked = w.kept().unwrap().sample(&world::name("S", "D")).unwrap();
        assert_eq!(marked.gap, crate::facts::Gap::Resets);
        // Once marked, not written again.
        assert!(!w.run(&check, 6000).asked.stored);
    }

    /// A look NATS answered for no consumer refreshes nothing of the last one.
    #[test]
    fn a_look_nats_did_not_answer_is_no_look() {
        let mut w = world(
            Behaviour::Acking,
            vec![
                Answer::OnTime,
                Answer::OnTime,
                Answer::Not(Unknown::Deadline),
            ],
        );
        let check = w.check(4000, 0);
        w.run(&check, 0);
        w.run(&check, 1000);
        let calm = w.kept().unwrap().look.clone().unwrap();
        assert!(calm.calm);
        let late = w.run(&check, 2000);
        assert_eq!(late.exit, 0);
        assert_eq!(w.kept().unwrap().look.as_ref(), Some(&calm));
    }

    /// No place to keep samples is a configuration error at once, where samples are needed;
    /// a socket check only loses its memory.
    #[test]
    fn no_place_for_samples_is_refused_where_they_are_needed() {
        let w = world(Behaviour::Acking, vec![Answer::OnTime]);
        let tried = vec![("/tmp/x".to_string(), "read-only".to_string())];
        let nowhere = |kept| Start {
            place: Err(tried.clone()),
            ..start(kept)
        };
        let check = w.check(4000, 3000);
        let mut run = Run::new(&check, nowhere(Kept::Missing));
        run.feed(Seen::Walk(pod(vec![socket(
            "10.0.0.2:40000",
            "10.96.0.10:4222",
            1,
        )])));
        assert_eq!(asks(&run), "done");
        assert_eq!(run.end().unwrap_err(), Refusal::NoPlace(tried.clone()));
        let sockets = sockets_only(&w);
        let mut run = Run::new(&sockets, nowhere(Kept::Missing));
        run.feed(Seen::Walk(pod(vec![socket(
            "10.0.0.2:40000",
            "10.96.0.10:4222",
            1,
        )])));
        assert_eq!(asks(&run), "done");
        assert!(run.end().is_ok());
    }

    /// One run of `--own-subscription` on a pull consumer at `now`: the pod's one connection
    /// listed as having published `in_msgs`, the consumer having delivered `delivered`. It
    /// asks for the whole list the first time, and by cid after. Returns the part's verdict
    /// and the state kept.
    fn pull_run(
        check: &Check,
        kept: Kept,
        now: i64,
        connection: (u64, u64),
        delivered: u64,
    ) -> (Held, crate::rules::check::Health, State) {
        let (held, health, state, _) =
            pull_run_answered(check, kept, now, connection, delivered, true);
        (held, health, state)
    }

    /// `pull_run`, with the reads of the connections answered or left unanswered (the
    /// deadline); also whether the run read them.
    fn pull_run_answered(
        check: &Check,
        kept: Kept,
        now: i64,
        connection: (u64, u64),
        delivered: u64,
        answered: bool,
    ) -> (Held, crate::rules::check::Health, State, bool) {
        let failed = (!answered).then_some(Unknown::Deadline);
        pull_run_failed(check, kept, now, connection, delivered, failed)
    }

    /// `pull_run`, with the reads of the connections answered, or failed with `failed`.
    fn pull_run_failed(
        check: &Check,
        kept: Kept,
        now: i64,
        (cid, in_msgs): (u64, u64),
        delivered: u64,
        failed: Option<Unknown>,
    ) -> (Held, crate::rules::check::Health, State, bool) {
        let mut read = false;
        let mut run = Run::new(
            check,
            Start {
                now_ms: now,
                ..start(kept)
            },
        );
        run.feed(Seen::Walk(pod(vec![socket(
            "10.0.0.2:40000",
            "10.96.0.10:4222",
            1,
        )])));
        let mut facts = crate::facts::ConsumerFacts::example(3, 1, delivered - 1, now * 1_000_000);
        facts.deliver_subject = None;
        facts.ack_wait = Some(core::time::Duration::from_secs(1));
        run.feed(Seen::Consumers {
            observed: vec![Observed::Found {
                facts,
                stream: None,
            }],
            server_domain: None,
            server_jetstream: true,
        });
        let n1 = ServerIdent {
            name: "n1".into(),
            id: "NID1".into(),
        };
        let listed = crate::facts::ServerConnection {
            addr: "10.0.0.2:40000".parse().unwrap(),
            name: None,
            subscriptions: None,
            cid,
            server: Some(n1.clone()),
            account_connections: 3,
            in_msgs,
        };
        let state = loop {
            match run.ask() {
                Some(Ask::Connz { .. } | Ask::Lookups(_)) if failed.is_some() => {
                    read = true;
                    let why = failed.clone().unwrap();
                    match run.ask() {
                        Some(Ask::Connz { .. }) => run.feed(Seen::Connz(Err(why), true)),
                        _ => run.feed(Seen::Lookups(vec![(Err(why), true)])),
                    }
                }
                Some(Ask::Connz { wanted, every, .. }) => {
                    read = true;
                    assert!(wanted.is_empty() && every);
                    let connz = Connz {
                        source: "test".into(),
                        holding: Vec::new(),
                        all: Some(vec![listed.clone()]),
                        probe_seen_as: None,
                        servers: 1,
                        out_of_sight: None,
                        incomplete: None,
                    };
                    run.feed(Seen::Connz(Ok(connz), true));
                }
                Some(Ask::Lookups(l)) => {
                    read = true;
                    assert_eq!(l.len(), 1);
                    let answer = LookedUp {
                        server: n1.clone(),
                        connection: Some(listed.clone()),
                    };
                    run.feed(Seen::Lookups(vec![(Ok(vec![answer]), true)]));
                }
                Some(Ask::ClientAge(_)) => run.feed(Seen::ClientAge(None)),
                Some(Ask::Store(state)) => break state.clone(),
                other => panic!("asked {other:?}"),
            }
        };
        run.feed(Seen::Stored(Ok(())));
        let ended = run.end().unwrap();
        assert!(
            matches!(ended.consumers[0].outcome, Outcome::Healthy(_)),
            "{:?}",
            ended.consumers[0].outcome
        );
        (
            ended.subscriptions[0].held.clone(),
            ended.verdict.health,
            state,
            read,
        )
    }

    fn listed_conn(addr: &str, cid: u64, in_msgs: u64) -> crate::facts::ServerConnection {
        crate::facts::ServerConnection {
            addr: addr.parse().unwrap(),
            name: None,
            subscriptions: None,
            cid,
            server: Some(ServerIdent {
                name: "n1".into(),
                id: "NID1".into(),
            }),
            account_connections: 3,
            in_msgs,
        }
    }

    /// The server's list read for a pull consumer's part: this pod's connections only, each
    /// once (a connection may be in the subject-filtered list and the whole one), with its
    /// socket's inode; an incomplete list, a failed one, or none of the pod's listed judge
    /// nothing.
    #[test]
    fn a_pull_part_from_the_list() {
        let work = Work {
            created: "c".into(),
            delivered: 5,
        };
        let window = core::time::Duration::from_secs(60);
        let wanted = Wanted::pulls_of(&world::name("S", "P"));
        let ours: Vec<SocketAddr> = vec!["10.0.0.2:40000".parse().unwrap()];
        let sockets = [Socket {
            addr: ours[0],
            inode: 77,
        }];
        let mine = listed_conn("10.0.0.2:40000", 7, 10);
        let connz = |incomplete: Option<&str>, all: Vec<crate::facts::ServerConnection>| {
            Ok(Connz {
                source: "test".into(),
                holding: vec![mine.clone()],
                all: Some(all),
                probe_seen_as: Some("10.0.0.2:50000".parse().unwrap()),
                servers: 1,
                out_of_sight: None,
                incomplete: incomplete.map(str::to_string),
            })
        };
        let listed = vec![mine.clone(), listed_conn("10.0.0.3:40000", 9, 99)];
        let sub = Sub {
            wanted,
            consumer: Some(world::name("S", "P")),
            pull: Some(work),
            memo: SubscriptionMemo::default(),
            rematch: Rematch::FirstTime,
            looking_up: false,
            result: None,
            window,
        };
        let judge = |answer| {
            let j = sub.matched(&ours, &sockets, &answer, NOW);
            (j.held, j.published)
        };
        let (held, published) = judge(connz(None, listed.clone()));
        assert!(
            matches!(held, Held::Pulls { quiet, .. } if quiet.is_zero()),
            "{held:?}"
        );
        let published = published.unwrap();
        assert_eq!(published.connections.len(), 1);
        assert_eq!(
            (published.connections[0].0.inode, published.connections[0].1),
            (77, 10)
        );
        let (held, published) = judge(connz(Some("server n2 did not answer"), listed));
        assert_eq!(
            held,
            Held::NotJudged(Unknown::NotListed("server n2 did not answer".into()))
        );
        assert_eq!(published, None);
        let (held, _) = judge(Err(Unknown::Deadline));
        assert_eq!(held, Held::NotJudged(Unknown::Deadline));
        // Two of the pod's connections on one server: each read, whichever pulls.
        let both: Vec<SocketAddr> = vec![ours[0], "10.0.0.2:40001".parse().unwrap()];
        let second = listed_conn("10.0.0.2:40001", 8, 20);
        let answer = connz(None, vec![mine.clone(), second]);
        let published = sub.matched(&both, &sockets, &answer, NOW).published;
        let read: Vec<u64> = published
            .unwrap()
            .connections
            .iter()
            .map(|(m, _)| m.cid)
            .collect();
        assert_eq!(read, [7, 8]);
        let others = Ok(Connz {
            holding: Vec::new(),
            ..connz(None, vec![listed_conn("10.0.0.3:40000", 9, 99)]).unwrap()
        });
        let (held, _) = judge(others);
        assert!(matches!(held, Held::NotJudged(_)), "{held:?}");
    }

    /// A pull consumer's part from its connections asked for by cid: each one's answer, or
    /// why it is matched by address again.
    #[test]
    fn a_pull_part_looked_up() {
        let work = Work {
            created: "c".into(),
            delivered: 50,
        };
        let window = core::time::Duration::from_secs(60);
        let n1 = ServerIdent {
            name: "n1".into(),
            id: "NID1".into(),
        };
        let remembered = |addr: &str, cid: u64| Remembered {
            server: n1.clone(),
            cid,
            local: addr.parse().unwrap(),
            inode: cid,
            held_at_ms: None,
            account_connections: 3,
        };
        let kept = Published {
            connections: vec![
                (remembered("10.0.0.2:40000", 7), 10),
                (remembered("10.0.0.2:40001", 8), 20),
            ],
            created: "c".into(),
            delivered: 5,
            moved_at_ms: NOW - 61_000,
        };
        let lookups: Vec<Lookup1> = [7, 8]
            .iter()
            .map(|&cid| Lookup1 {
                server: n1.clone(),
                cid,
                direct: false,
            })
            .collect();
        let answer = |c: Option<crate::facts::ServerConnection>, reached: bool| {
            let a = LookedUp {
                server: n1.clone(),
                connection: c,
            };
            (Ok(vec![a]), reached)
        };
        let first = listed_conn("10.0.0.2:40000", 7, 10);
        let sub = Sub {
            wanted: Wanted::pulls_of(&world::name("S", "P")),
            consumer: Some(world::name("S", "P")),
            pull: Some(work),
            memo: SubscriptionMemo {
                pull: Some(kept.clone()),
                ..SubscriptionMemo::default()
            },
            rematch: Rematch::FirstTime,
            looking_up: true,
            result: None,
            window,
        };
        let look = |second| {
            let answers = [answer(Some(first.clone()), true), second];
            sub.looked_up(&lookups, &answers, NOW).unwrap()
        };
        // Both still this pod's, neither published for the window: not taking part.
        let quiet = look(answer(Some(listed_conn("10.0.0.2:40001", 8, 20)), false)).unwrap();
        assert!(
            matches!(quiet.held, Held::NotPulling { delivered: 45, .. }),
            "{:?}",
            quiet.held
        );
        assert!(!quiet.asked, "one ask never reached its server");
        // The second published: taking part.
        let moved = look(answer(Some(listed_conn("10.0.0.2:40001", 8, 21)), true)).unwrap();
        assert!(matches!(moved.held, Held::Pulls { .. }), "{:?}", moved.held);
        assert!(moved.asked);
        // Its server did not answer for it: not judged.
        let unanswered = (Ok(Vec::new()), true);
        let not = look(unanswered).unwrap();
        assert_eq!(
            not.held,
            Held::NotJudged(Unknown::NotListed(
                "server n1 did not answer the lookup of cid 8 in time".into()
            ))
        );
        assert_eq!(not.published.as_ref(), Some(&kept));
        // Closed, or not asked at all: matched again.
        assert_eq!(look(answer(None, true)).unwrap_err(), Rematch::Closed);
        let missing = sub.looked_up(&lookups[..1], &[answer(Some(first.clone()), true)], NOW);
        assert_eq!(missing.unwrap().unwrap_err(), Rematch::FirstTime);
    }

    /// `--own-subscription` on a pull consumer: this pod's part. Its connection publishing
    /// (pulls, acks) is taking part; publishing nothing for the window while the consumer
    /// delivers to others is not, and the next run that sees it publish passes again. An
    /// idle consumer is never a fault, and a new connection starts over.
    #[test]
    fn a_pull_replica_that_stops_pulling() {
        use crate::rules::check::Health;
        let w = world(Behaviour::Acking, vec![Answer::OnTime]);
        let check = Check {
            own_subscription: true,
            sample_every: core::time::Duration::ZERO,
            ..w.check(4000, 0)
        };
        let (held, health, s1) = pull_run(&check, Kept::Missing, NOW, (7, 10), 6);
        assert!(
            matches!(held, Held::Pulls { quiet, .. } if quiet.is_zero()),
            "{held:?}"
        );
        assert_eq!(health, Health::Healthy);
        // Quiet inside the window: still its part.
        let (held, health, s2) = pull_run(&check, Kept::State(s1.clone()), NOW + 3000, (7, 10), 20);
        assert!(
            matches!(held, Held::Pulls { quiet, .. } if quiet.as_millis() == 3000),
            "{held:?}"
        );
        assert_eq!(health, Health::Healthy);
        // Quiet for the window (4 s) while the consumer delivered 14 to the others.
        let (held, health, s3) = pull_run(&check, Kept::State(s2), NOW + 4000, (7, 10), 20);
        assert_eq!(
            held,
            Held::NotPulling {
                connection: "10.0.0.2:40000".parse().unwrap(),
                quiet: core::time::Duration::from_secs(4),
                delivered: 14
            }
        );
        assert_eq!(health, Health::Unhealthy);
        // It publishes again: healthy, nothing latched.
        let (held, health, _) = pull_run(&check, Kept::State(s3.clone()), NOW + 5000, (7, 11), 21);
        assert!(
            matches!(held, Held::Pulls { quiet, .. } if quiet.is_zero()),
            "{held:?}"
        );
        assert_eq!(health, Health::Healthy);
        // Idle: nothing delivered since it last published, however long.
        let (held, health, _) = pull_run(&check, Kept::State(s1), NOW + 60_000, (7, 10), 6);
        assert!(matches!(held, Held::Pulls { .. }), "{held:?}");
        assert_eq!(health, Health::Healthy);
        // The client reconnected (another cid on the same socket's address): the count
        // starts over, however quiet the old connection was.
        let (held, health, _) = pull_run(&check, Kept::State(s3), NOW + 9000, (8, 10), 40);
        assert!(
            matches!(held, Held::Pulls { quiet, .. } if quiet.is_zero()),
            "{held:?}"
        );
        assert_eq!(health, Health::Healthy);
    }

    /// A pull consumer's quiet time starts over where NATS could not answer (the table's "not
    /// there"): one answered reading after an outage finds the part quiet for no time, never
    /// not pulling at once.
    #[test]
    fn a_pull_parts_quiet_time_starts_over_when_nats_is_not_there() {
        let w = world(Behaviour::Acking, vec![Answer::OnTime]);
        let check = Check {
            own_subscription: true,
            sample_every: core::time::Duration::ZERO,
            ..w.check(4000, 0)
        };
        let (_, _, s1) = pull_run(&check, Kept::Missing, NOW, (7, 10), 6);
        let gone = Unknown::Unreachable("connection refused".into());
        let (held, _, s2, read) =
            pull_run_failed(&check, Kept::State(s1), NOW + 5000, (7, 10), 20, Some(gone));
        assert!(read);
        assert!(matches!(held, Held::NotJudged(_)), "{held:?}");
        let (held, health, _) = pull_run(&check, Kept::State(s2), NOW + 6000, (7, 10), 30);
        assert!(
            matches!(held, Held::Pulls { quiet, .. } if quiet.is_zero()),
            "{held:?}"
        );
        assert_eq!(health, crate::rules::check::Health::Healthy);
    }

    /// A lookup made for one subscription never judges another whose own plan chose a match:
    /// the pod opened a second connection, so its pull consumer's part is matched by address
    /// (the new one may be the one that pulls), while the deliver subscription of its push
    /// consumer looks its same connection up.
    #[test]
    fn a_lookup_for_another_subscription_never_judges_a_part_that_matches() {
        use crate::rules::check::Health;
        use crate::rules::remembered::TrustSetting;
        let w = world(Behaviour::Acking, vec![Answer::OnTime]);
        let check = Check {
            own_subscription: true,
            sample_every: core::time::Duration::ZERO,
            subscription_every: TrustSetting::Fixed(core::time::Duration::ZERO),
            consumers: vec![world::name("S", "D"), world::name("S", "P")],
            ..w.check(4000, 0)
        };
        let n1 = ServerIdent {
            name: "n1".into(),
            id: "NID1".into(),
        };
        let push = (
            "deliver.latest-kv".to_string(),
            Some("latest-kv".to_string()),
        );
        let conn =
            |addr: &str, cid: u64, in_msgs: u64, push_too: bool| crate::facts::ServerConnection {
                subscriptions: Some(push_too.then(|| push.clone()).into_iter().collect()),
                server: Some(n1.clone()),
                ..listed_conn(addr, cid, in_msgs)
            };
        // One run: its sockets, the two consumers (the pull one delivered `delivered`), and
        // the servers' list of the account's connections (`listed`, the first holding the
        // deliver subscription).
        let run = |kept: Kept,
                   now: i64,
                   sockets: Vec<crate::facts::Socket>,
                   delivered: u64,
                   listed: &[crate::facts::ServerConnection]| {
            let mut run = Run::new(
                &check,
                Start {
                    now_ms: now,
                    ..start(kept)
                },
            );
            run.feed(Seen::Walk(pod(sockets)));
            let facts = crate::facts::ConsumerFacts::example(3, 1, 5, now * 1_000_000);
            let mut pull =
                crate::facts::ConsumerFacts::example(3, 1, delivered - 1, now * 1_000_000);
            pull.deliver_subject = None;
            pull.ack_wait = Some(core::time::Duration::from_secs(1));
            let found = |facts| Observed::Found {
                facts,
                stream: None,
            };
            run.feed(Seen::Consumers {
                observed: vec![found(facts), found(pull)],
                server_domain: None,
                server_jetstream: true,
            });
            let state = loop {
                match run.ask() {
                    Some(Ask::Connz { .. }) => {
                        let connz = Connz {
                            source: "test".into(),
                            holding: listed[..1].to_vec(),
                            all: Some(listed.to_vec()),
                            probe_seen_as: None,
                            servers: 1,
                            out_of_sight: None,
                            incomplete: None,
                        };
                        run.feed(Seen::Connz(Ok(connz), true));
                    }
                    Some(Ask::Lookups(l)) => {
                        let answers = l.iter().map(|m| {
                            let c = listed.iter().find(|c| c.cid == m.cid).cloned();
                            let a = LookedUp {
                                server: n1.clone(),
                                connection: c,
                            };
                            (Ok(vec![a]), true)
                        });
                        run.feed(Seen::Lookups(answers.collect()));
                    }
                    Some(Ask::ClientAge(_)) => run.feed(Seen::ClientAge(None)),
                    Some(Ask::Store(state)) => break state.clone(),
                    other => panic!("asked {other:?}"),
                }
            };
            run.feed(Seen::Stored(Ok(())));
            (run.end().unwrap(), state)
        };
        let first = socket("10.0.0.2:40000", "10.96.0.10:4222", 1);
        let (ended, s1) = run(
            Kept::Missing,
            NOW,
            vec![first.clone()],
            6,
            &[conn("10.0.0.2:40000", 7, 10, true)],
        );
        assert_eq!(ended.verdict.health, Health::Healthy);
        // A window later: the first connection published nothing since while the consumer
        // delivered 14, and the second one pulled.
        let second = socket("10.0.0.2:40001", "10.96.0.10:4222", 2);
        let listed = [
            conn("10.0.0.2:40000", 7, 10, true),
            conn("10.0.0.2:40001", 8, 50, false),
        ];
        let (ended, _) = run(
            Kept::State(s1),
            NOW + 4000,
            vec![first, second],
            20,
            &listed,
        );
        let pull = ended
            .subscriptions
            .iter()
            .find(|s| s.consumer.as_ref().is_some_and(|c| c.durable == "P"));
        assert!(
            matches!(pull.map(|s| &s.held), Some(Held::Pulls { .. })),
            "{:?}",
            ended.subscriptions
        );
        assert_eq!(ended.verdict.health, Health::Healthy);
    }

    /// A pull consumer's part is read only once a reading could find a fault: the last
    /// publish seen a window old. A look before that reads nothing, is calm, and goes on from
    /// the kept reading; the one after it judges the whole quiet time.
    #[test]
    fn a_pull_part_is_read_when_its_window_is_due() {
        use crate::rules::check::Health;
        let w = world(Behaviour::Acking, vec![Answer::OnTime]);
        let check = Check {
            own_subscription: true,
            sample_every: core::time::Duration::ZERO,
            ..w.check(4000, 0)
        };
        let run = |kept, at: i64, in_msgs, delivered| {
            pull_run_answered(&check, kept, NOW + at, (7, in_msgs), delivered, true)
        };
        let (_, _, s, read) = run(Kept::Missing, 0, 10, 6);
        assert!(read);
        // Inside the window, work delivered and whatever the pod published: not read, calm.
        let (held, health, s, read) = run(Kept::State(s), 3999, 10, 20);
        assert!(!read);
        assert_eq!(
            held,
            Held::Pulls {
                by: "10.0.0.2:40000".parse().unwrap(),
                quiet: core::time::Duration::from_millis(3999)
            }
        );
        assert_eq!(health, Health::Healthy);
        assert!(s.look.as_ref().is_some_and(|l| l.calm), "{:?}", s.look);
        // A window after the last reading: read, and a publish since starts the count again.
        let (held, _, s, read) = run(Kept::State(s), 4000, 11, 24);
        assert!(read);
        assert!(matches!(held, Held::Pulls { quiet, .. } if quiet.is_zero()));
        let (_, _, s, read) = run(Kept::State(s), 7000, 11, 28);
        assert!(!read);
        // None since, for the window, while the consumer delivered: not taking part.
        let (held, health, _, read) = run(Kept::State(s), 8000, 11, 32);
        assert!(read);
        assert!(matches!(held, Held::NotPulling { .. }), "{held:?}");
        assert_eq!(health, Health::Unhealthy);
    }

    /// Reads of a pull consumer's part that went unanswered make the next wait: a look, then
    /// two, doubling (a slow server asked less, never more); waiting is not judged, and an
    /// answer ends the wait.
    #[test]
    fn unanswered_reads_of_a_pull_part_wait() {
        let w = world(Behaviour::Acking, vec![Answer::OnTime]);
        // A window shorter than a look's time: every look's read is due.
        let check = Check {
            own_subscription: true,
            sample_every: core::time::Duration::from_secs(2),
            ..w.check(1000, 0)
        };
        let run = |kept, at, answered| {
            pull_run_answered(
                &check,
                kept,
                NOW + at,
                (7, 10 + at as u64),
                6 + at as u64,
                answered,
            )
        };
        let (_, _, s, read) = run(Kept::Missing, 0, true);
        assert!(read);
        let (held, _, s, read) = run(Kept::State(s), 2000, false);
        assert!(read);
        assert_eq!(held, Held::NotJudged(Unknown::Deadline));
        // One unanswered: the next look (a look's time later) reads again.
        let (_, _, s, read) = run(Kept::State(s), 4000, false);
        assert!(read);
        // Two: it waits two looks' time.
        let (held, health, s, read) = run(Kept::State(s), 6000, true);
        assert!(!read);
        assert_eq!(
            held,
            Held::NotJudged(Unknown::Waiting(core::time::Duration::from_secs(2)))
        );
        assert_eq!(health, crate::rules::check::Health::Healthy);
        let (held, _, s, read) = run(Kept::State(s), 8000, true);
        assert!(read);
        assert!(matches!(held, Held::Pulls { .. }), "{held:?}");
        // Answered: no wait.
        let (_, _, _, read) = run(Kept::State(s), 10_000, true);
        assert!(read);
    }

    /// A pull consumer's part NATS did not answer for, in a look that answered for another
    /// consumer: kept as a pull part, not judged, and never recorded as a deliver
    /// subscription the next unanswered look would judge missing.
    #[test]
    fn a_pull_part_unanswered_in_a_look_stays_a_pull_part() {
        let mut w = World::new(
            vec![
                consumer(Behaviour::Acking),
                Consumer {
                    name: world::name("S", "P"),
                    ..consumer(Behaviour::Unanswered {
                        from: 1000,
                        until: 3000,
                    })
                },
            ],
            vec![Answer::OnTime],
        );
        w.client.started = -1_000_000;
        deaf_at(&mut w, None, false);
        w.subscription.as_mut().unwrap().pull = true;
        let check = w.check(4000, 3000);
        assert_eq!(w.run(&check, 0).exit, 0);
        let half = w.run(&check, 1000);
        assert!(half.asked.consumers);
        let e = half.ended.unwrap();
        assert_eq!(half.exit, 0);
        let part = e
            .subscriptions
            .iter()
            .find(|s| s.consumer.as_ref() == Some(&world::name("S", "P")))
            .unwrap();
        assert!(part.pull, "{part:?}");
        assert_eq!(part.held, Held::NotJudged(Unknown::Deadline));
        let look = w.kept().unwrap().look.clone().unwrap();
        assert!(look.wanted.is_empty(), "{:?}", look.wanted);
        // Unanswered again: still not judged, nothing missing.
        let again = w.run(&check, 2000);
        assert!(again.asked.consumers);
        assert_eq!(again.exit, 0, "{:?}", again.ended);
        let e = again.ended.unwrap();
        assert_eq!(e.subscriptions.len(), 2, "{:?}", e.subscriptions);
        assert!(e.subscriptions.iter().all(|s| s.pull));
    }

    /// A state that could not be kept: each consumer says why, and its cause counts from the
    /// last sample that could be kept.
    #[test]
    fn a_state_not_kept_is_a_cause_of_its_own() {
        let mut w = world(Behaviour::Acking, vec![Answer::OnTime]);
        let check = w.check(4000, 0);
        w.run(&check, NOW - 10_000);
        let kept = Kept::State(w.kept().unwrap().clone());
        let mut run = Run::new(&check, start(kept));
        run.feed(Seen::Walk(pod(vec![socket(
            "10.0.0.2:40000",
            "10.96.0.10:4222",
            1000,
        )])));
        assert_eq!(asks(&run), "consumers");
        run.feed(Seen::Consumers {
            observed: vec![Observed::ConsumerMissing],
            server_domain: Some("hub".into()),
            server_jetstream: false,
        });
        assert_eq!(asks(&run), "store");
        run.feed(Seen::Stored(Err("no room".into())));
        let e = run.end().unwrap();
        assert_eq!(e.observations.server_domain.as_deref(), Some("hub"));
        let c = &e.consumers[0];
        assert_eq!(c.seen.state_problem.as_deref(), Some("no room"));
        let standing = c.standing.unwrap();
        assert_eq!(standing.cause, Cause::NoStateDir);
        assert_eq!(standing.lasted, Duration::from_secs(10));
        assert!(standing.judged_before);
    }

    /// The client's age is read only where a stall is due, and a client younger than the
    /// window has its window.
    #[test]
    fn a_young_client_gets_its_window() {
        let mut w = world(
            Behaviour::Wedged {
                at: 0,
                until: Ms::MAX,
            },
            vec![Answer::OnTime],
        );
        let check = w.check(4000, 0);
        let mut asked_age = false;
        w.client.started = 3000;
        w.client.reconnects = vec![3000];
        for t in (0..=8000).step_by(1000) {
            let ran = w.run(&check, t);
            let e = ran.ended.unwrap();
            asked_age |= e.observations.client_age.is_some();
            match t {
                t if t < 7000 => assert_eq!(ran.exit, 0, "at {t}"),
                _ => assert_eq!(ran.exit, 1, "at {t}"),
            }
            if t == 5000 {
                assert!(matches!(
                    e.consumers[0].outcome,
                    Outcome::Healthy(Healthy::YoungClient { .. })
                ));
            }
        }
        assert!(asked_age);
        // An acking consumer never needs it.
        let mut healthy = world(Behaviour::Acking, vec![Answer::OnTime]);
        for t in 0..5 {
            let e = healthy.run(&check, t * 1000).ended.unwrap();
            assert_eq!(e.observations.client_age, None);
        }
    }

    /// A fault a look saw is the verdict of the runs that cannot look while it is fresh; a
    /// new connection voids it, NATS not there voids it, and the next look replaces it.
    #[test]
    fn a_fault_is_carried_while_fresh() {
        let late = Answer::Not(Unknown::Deadline);
        let mut w = world(
            Behaviour::Unbound { at: 0 },
            vec![Answer::OnTime, late.clone(), late.clone(), Answer::OnTime],
        );
        let check = w.check(4000, 0);
        let seen = w.run(&check, 0);
        assert_eq!(seen.exit, 1);
        let e = w.run(&check, 1000).ended.unwrap();
        let c = &e.consumers[0];
        assert!(matches!(
            c.outcome,
            Outcome::Unhealthy(Fault::Unbound { .. })
        ));
        assert_eq!(
            c.carried,
            Some(Carried {
                why: Unknown::Deadline,
                ago: Duration::from_secs(1)
            })
        );
        assert_eq!(c.outcome.state(true), "carried");
        // Said with the window it stands for.
        assert_eq!(c.window.map(|w| w.duration), Some(Duration::from_secs(4)));
        // A new connection: no longer fresh.
        w.client.reconnects = vec![1500];
        let e = w.run(&check, 2000).ended.unwrap();
        assert!(matches!(e.consumers[0].outcome, Outcome::NotJudged(_)));
        assert!(w.kept().unwrap().faults.is_empty());
        // Past its window, likewise.
        let mut old = world(Behaviour::Unbound { at: 0 }, vec![Answer::OnTime, late]);
        old.run(&check, 0);
        let e = old.run(&check, 4001).ended.unwrap();
        assert!(matches!(e.consumers[0].outcome, Outcome::NotJudged(_)));
        // NATS not there voids it.
        let mut gone = world(
            Behaviour::Unbound { at: 0 },
            vec![Answer::OnTime, Answer::Not(Unknown::TemporarilyUnavailable)],
        );
        gone.run(&check, 0);
        assert_eq!(gone.run(&check, 1000).exit, 0);
        // The next look replaces it; a healthy one clears it.
        let mut heals = world(
            Behaviour::Wedged {
                at: -100_000,
                until: 1500,
            },
            vec![Answer::OnTime, Answer::OnTime],
        );
        assert_eq!(heals.run(&check, 0).exit, 1);
        assert_eq!(heals.kept().unwrap().faults.len(), 1);
        assert_eq!(heals.run(&check, 2000).exit, 0);
        assert!(heals.kept().unwrap().faults.is_empty());
    }

    /// A run that could not ask (the pod's one connection half-open) voids the fault the last
    /// look saw: the same socket coming back brings it back neither.
    #[test]
    fn a_run_that_could_not_ask_voids_the_fault() {
        let late = Answer::Not(Unknown::Deadline);
        let mut w = world(
            Behaviour::Unbound { at: 0 },
            vec![Answer::OnTime, late.clone(), late],
        );
        let check = w.check(4000, 0);
        assert_eq!(w.run(&check, 0).exit, 1);
        w.client.half_open = Some(-60_000);
        let cut = w.run(&check, 1000);
        assert!(!cut.asked.consumers, "{cut:?}");
        assert!(w.kept().unwrap().faults.is_empty());
        w.client.half_open = None;
        let e = w.run(&check, 2000);
        assert!(e.asked.consumers);
        assert_eq!(e.exit, 0, "{e:?}");
        let e = e.ended.unwrap();
        assert!(matches!(e.consumers[0].outcome, Outcome::NotJudged(_)));
    }

    /// The pod's connection for a subscription: matched by address first, then looked up by
    /// cid (asked once per connection), trusted between looks, and matched again when the
    /// server restarted; a deaf replica is unhealthy, and its fault carried while fresh.
    #[test]
    fn a_subscriptions_connection_is_matched_then_looked_up() {
        let mut w = world(Behaviour::Acking, vec![Answer::OnTime]);
        deaf_at(&mut w, None, false);
        let check = w.check(4000, 3000);
        let first = w.run(&check, 0);
        assert!(first.asked.connz && !first.asked.lookups);
        let wanted = Wanted {
            subject: "deliver.D".into(),
            queue: Some("D".into()),
        };
        let memo = w.kept().unwrap().memo(&wanted);
        let m = memo.connection.clone().unwrap();
        assert_eq!(
            (m.cid, m.held_at_ms, m.account_connections),
            (1000, Some(0), 100)
        );
        // The next look asks for it by cid (with each look: a small account).
        let second = w.run(&check, 1000);
        assert!(second.asked.lookups && !second.asked.connz);
        let m2 = w.kept().unwrap().memo(&wanted).connection.unwrap();
        assert_eq!(m2.held_at_ms, Some(1000));
        // Between looks, trusted.
        let third = w.run(&check, 2000);
        assert!(!third.asked.lookups && !third.asked.connz);
        // Deaf: the next look says so.
        w.subscription.as_mut().unwrap().deaf_at = Some(2500);
        let deaf = w.run(&check, 4000);
        assert_eq!(deaf.exit, 1);
        let e = deaf.ended.unwrap();
        assert!(matches!(
            e.subscriptions[0].held,
            Held::NotByThisConnection { .. }
        ));
        assert_eq!(w.kept().unwrap().faults.len(), 1);
        // Each answer says how many connections the account has now: the trust time's.
        w.subscription.as_mut().unwrap().account_connections = 5000;
        w.run(&check, 7000);
        let m3 = w.kept().unwrap().memo(&wanted).connection.unwrap();
        assert_eq!(m3.account_connections, 5000);
        // A server restarted: its cids mean nothing, matched again.
        let mut again = world(Behaviour::Acking, vec![Answer::OnTime, Answer::Restarted]);
        deaf_at(&mut again, None, false);
        let every = Check {
            subscription_every: TrustSetting::Fixed(Duration::ZERO),
            ..again.check(4000, 3000)
        };
        again.run(&every, 0);
        let restarted = again.run(&every, 1000);
        assert!(restarted.asked.lookups && restarted.asked.connz);
        let e = restarted.ended.unwrap();
        assert_eq!(
            e.subscriptions[0].found,
            Some(Found::Matched(Rematch::ServerRestarted))
        );
        assert!(e.subscriptions[0].judged_before);
    }

    /// A lookup the server left unanswered is counted, and makes the next one wait; one
    /// refused is not counted (the server never got it).
    #[test]
    fn unanswered_lookups_are_counted_refused_ones_not() {
        let wanted = Wanted {
            subject: "events.>".into(),
            queue: None,
        };
        for (answer, counted) in [(Unknown::Deadline, Some(1)), (Unknown::Credentials, None)] {
            let mut w = World::new(
                Vec::new(),
                vec![Answer::OnTime, Answer::Not(answer.clone())],
            );
            deaf_at(&mut w, None, false);
            let check = Check {
                subscription_every: TrustSetting::Fixed(Duration::ZERO),
                ..w.check(4000, 3000)
            };
            assert!(check.consumers.is_empty() && check.subscriptions == [wanted.clone()]);
            w.run(&check, 0);
            let ran = w.run(&check, 1000);
            assert!(ran.asked.lookups, "{answer:?}");
            let memo = w.kept().unwrap().memo(&wanted);
            assert_eq!(memo.unanswered.map(|u| u.count), counted, "{answer:?}");
            assert!(memo.connection.is_some(), "kept through {answer:?}");
            let e = ran.ended.unwrap();
            let standing = e.subscriptions[0].standing.unwrap();
            assert_eq!(standing.cause, Cause::of(&answer));
            assert!(standing.judged_before);
        }
    }

    /// With `--monitor`, a connection matched there is looked up there: directly.
    #[test]
    fn a_connection_matched_at_the_monitoring_port_is_looked_up_there() {
        let mut w = World::new(Vec::new(), vec![Answer::OnTime]);
        deaf_at(&mut w, None, true);
        let check = Check {
            subscription_every: TrustSetting::Fixed(Duration::ZERO),
            ..w.check(4000, 3000)
        };
        assert_eq!(check.monitor.as_deref(), Some(world::MONITOR));
        w.run(&check, 0);
        let kept = Kept::State(w.kept().unwrap().clone());
        let mut run = Run::new(&check, start(kept));
        run.feed(Seen::Walk(pod(vec![socket(
            "10.0.0.2:40000",
            "10.96.0.10:4222",
            1000,
        )])));
        match run.ask() {
            Some(Ask::Lookups(l)) => assert!(l.len() == 1 && l[0].direct && l[0].cid == 1000),
            other => panic!("{other:?}"),
        }
        assert!(is_direct(
            &check,
            &ServerIdent {
                name: world::MONITOR.into(),
                id: "x".into()
            }
        ));
        assert!(!is_direct(
            &check,
            &ServerIdent {
                name: "n1".into(),
                id: "x".into()
            }
        ));
    }

    /// A cause only the configuration can have becomes exit 2 once it has lasted longer than
    /// the window, for a check never judged; a check judged before treats it as NATS's.
    #[test]
    fn a_configuration_never_judged_is_an_error_past_its_window() {
        let refused = Answer::Not(Unknown::Credentials);
        let mut never = world(Behaviour::Acking, vec![refused.clone()]);
        let check = w_check(&never);
        let exits: Vec<u8> = (0..7).map(|t| never.run(&check, t * 1000).exit).collect();
        assert_eq!(exits, [0, 0, 0, 0, 0, 2, 2]);
        let mut judged = world(Behaviour::Acking, vec![Answer::OnTime, refused]);
        let exits: Vec<u8> = (0..7).map(|t| judged.run(&check, t * 1000).exit).collect();
        assert!(exits.iter().all(|e| *e == 0), "{exits:?}");
    }

    fn w_check(w: &World) -> Check {
        w.check(4000, 0)
    }

    /// The windows: a consumer's by this run's facts, else its last sample's, else
    /// `--stall-after`; a deliver subscription's, its consumer's.
    #[test]
    fn each_thing_has_its_own_window() {
        let mut w = World::new(
            vec![Consumer {
                ack_wait: 3000,
                ..consumer(Behaviour::Acking)
            }],
            vec![Answer::OnTime, Answer::Not(Unknown::Deadline)],
        );
        deaf_at(&mut w, None, false);
        let check = w.check(4000, 0);
        let name = world::name("S", "D");
        assert_eq!(check.window(&State::default(), Some(&name), None), ms(4000));
        assert_eq!(check.window(&State::default(), None, None), ms(4000));
        w.run(&check, 0);
        let state = w.kept().unwrap().clone();
        assert_eq!(check.window(&state, Some(&name), None), ms(6000));
        assert_eq!(check.window(&state, None, None), ms(4000));
        let e = w.run(&check, 1000).ended.unwrap();
        assert_eq!(e.consumers[0].standing.unwrap().window, ms(6000));
        assert_eq!(e.subscriptions[0].standing.unwrap().window, ms(6000));
    }

    /// A deliver subscription's window is its own consumer's, never another's: one
    /// consumer's `ack_wait` raises its window to 6 s, the other's stays 4 s, so a fault
    /// both parts showed is still carried 5 s later for the first only.
    #[test]
    fn each_subscription_has_its_own_consumers_window() {
        let other = Consumer {
            name: world::name("S", "E"),
            ack_wait: 100,
            ..consumer(Behaviour::Acking)
        };
        let raised = Consumer {
            ack_wait: 3000,
            ..consumer(Behaviour::Acking)
        };
        let late = Answer::Not(Unknown::Deadline);
        let mut w = World::new(
            vec![raised, other],
            vec![Answer::OnTime, Answer::OnTime, late],
        );
        deaf_at(&mut w, Some(500), false);
        let check = w.check(4000, 0);
        let carried = |w: &mut World, t| {
            let e = w.run(&check, t).ended.unwrap();
            (e.subscriptions.iter())
                .map(|s| (s.consumer.clone().unwrap().durable, s.carried.is_some()))
                .collect::<Vec<_>>()
        };
        carried(&mut w, 0);
        assert_eq!(
            carried(&mut w, 1000),
            [("D".into(), false), ("E".into(), false)]
        );
        assert_eq!(
            carried(&mut w, 6000),
            [("D".into(), true), ("E".into(), false)]
        );
    }

    /// The little helpers, as the rest relies on them.
    #[test]
    fn ports_servers_and_sockets() {
        let route = Route {
            dialled: "10.96.0.10:4222".parse().unwrap(),
            held_as: "10.244.0.7:14222".parse().unwrap(),
            via: Via::ClusterPeer,
        };
        assert_eq!(
            ports_with(&[4222, 7422], &[route, route]),
            [4222, 7422, 14222]
        );
        assert_eq!(server_state(&[]), None);
        let answer = |a: Info| ServerAnswer {
            url: "u".into(),
            answer: a,
            reached: None,
            peers: Vec::new(),
            identity: None,
        };
        assert_eq!(
            server_state(&[answer(Info::Refused), answer(Info::Nats { version: None })]),
            Some(ServerState::Answers)
        );
        assert_eq!(
            server_state(&[answer(Info::Refused)]),
            Some(ServerState::NotAnswering)
        );
        let c = Connections {
            established: vec![
                socket("[::ffff:10.0.0.2]:40000", "10.96.0.10:4222", 1),
                socket("10.0.0.2:40001", "10.96.0.10:4222", 2),
            ],
            half_open: vec![(
                socket("10.0.0.2:40001", "10.96.0.10:4222", 2),
                connection::HalfOpen {
                    unacked_bytes: 1,
                    unacked_for: ms(1),
                    retransmits: 1,
                },
            )],
            ..Connections::default()
        };
        let (all, live) = our_sockets(&c);
        assert_eq!(
            all.iter()
                .map(|s| (s.addr.to_string(), s.inode))
                .collect::<Vec<_>>(),
            [
                ("10.0.0.2:40000".to_string(), 1),
                ("10.0.0.2:40001".to_string(), 2)
            ]
        );
        assert_eq!(live.iter().map(|s| s.inode).collect::<Vec<_>>(), [1]);
        assert_eq!(ms(-5), Duration::ZERO);
        assert_eq!(ms(1500), Duration::from_millis(1500));
        let _ = Policy { stall_after: ms(1) };
    }
}
