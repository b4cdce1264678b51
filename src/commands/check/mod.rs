//! `check`: the pod's liveness verdict. Observes in the order the rules ask (in the common
//! case one exact lookup of the connections the last healthy run counted, else one walk of the
//! socket table; the servers only without a connection; JetStream only with one, and only when
//! a look is due or a subscription's connection is not trusted), judges, keeps the counted
//! connections, each consumer's sample, the look and each subscription's connection for the
//! next run, and returns the report.

mod sockets;
mod subscriptions;

use crate::config::{CheckConfig, ReaderChoice, Setting};
use crate::error::Error;
use crate::facts::{unmap, Loaded, Persisting};
use crate::facts::{ConsumerSeen, Observations, Pod, StateDirUsed};
use crate::facts::{Lookup, Route, ServerAnswer, Walked};
use crate::observe::state::{Of, Opened, StateDir};
use crate::observe::{self, server, PodTarget};
use crate::report::check::CheckReport;
use crate::report::input::CheckInput;
use crate::rules::cause::{self, Cause};
use crate::rules::check::{self as verdict, ServerState};
use crate::rules::connection::{self, Connections};
use crate::rules::exact;
use crate::rules::judged::{JudgedConsumer, JudgedSubscription};
use crate::rules::look;
use crate::rules::remembered::{self, Sampling};
use crate::rules::{consumer, subscription};
use sockets::{target, Remembered};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use subscriptions::{deliver_subscriptions, open, Subscriptions, WantedFor};

/// Kept back from the network's share of the deadline, for what follows it (keeping the
/// samples, shutting the runtime down, the answer): an eighth of the time, and at least
/// this, so a run on a loaded node ends by itself, not by the deadline's signal.
const NETWORK_RESERVE: Duration = Duration::from_millis(15);

/// One check's observations and judgements: what `check` reports and `diagnose` explains.
#[derive(Debug, Clone)]
pub struct Checked {
    pub verdict: verdict::Verdict,
    pub connections: Connections,
    pub observations: Observations,
    pub consumers: Vec<JudgedConsumer>,
    pub subscriptions: Vec<JudgedSubscription>,
    /// The servers as shown (never with userinfo).
    pub servers: Vec<String>,
}

impl Checked {
    pub fn input<'a>(&'a self, config: &'a CheckConfig) -> CheckInput<'a> {
        CheckInput {
            verdict: self.verdict,
            policy: &config.policy,
            connections: &self.connections,
            observations: &self.observations,
            servers: &self.servers,
            consumers_configured: config.consumers.len(),
            js_api: &config.js_api,
            consumers: &self.consumers,
            subscriptions: &self.subscriptions,
            verbose: config.verbose,
        }
    }
}

pub fn run(config: &CheckConfig, deadline: Instant) -> Result<CheckReport, Error> {
    let checked = judge(config, deadline, Sockets::MayLookUp)?;
    Ok(crate::report::check::check(&checked.input(config)))
}

/// How a run may find the pod's sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sockets {
    /// By looking up the connections the last healthy run counted, when the connections alone
    /// decide the run, and else by a walk of the table (`check`).
    MayLookUp,
    /// By a walk of the table, always (`diagnose`, which lists every socket).
    Walk,
}

/// Observes what the rules ask for, judges, and keeps each consumer's sample.
pub fn judge(config: &CheckConfig, deadline: Instant, sockets: Sockets) -> Result<Checked, Error> {
    let wants_subscriptions = config.own_subscription || !config.subscriptions.is_empty();
    let asked = config.consumers.len() + usize::from(wants_subscriptions);
    // The connections the last healthy run counted: looked up when they alone decide the run,
    // and in any case the server addresses they stood for (the routes they were counted by).
    // The state dir, opened once for the run: for the remembered connections and the samples.
    let state = match (config.reader, asked) {
        (ReaderChoice::Proc, 0) => None,
        _ => Some(observe::state::open(&config.state_dir)),
    };
    let dir = state.as_ref().and_then(|s| s.as_ref().ok()).map(|o| &o.dir);
    let remembered = match config.reader {
        ReaderChoice::Proc => None,
        _ => dir.map(|dir| Remembered::load(config, dir)),
    };
    let may_look_up = sockets == Sockets::MayLookUp && exact::may_decide(asked);
    let walked = match &remembered {
        Some(r) if may_look_up => match r.look_up(config, deadline) {
            Ok(decided) => {
                return Ok(Checked {
                    verdict: decided.verdict,
                    connections: decided.connections,
                    observations: unasked(decided.pod),
                    consumers: Vec::new(),
                    subscriptions: Vec::new(),
                    servers: config.servers.iter().map(ToString::to_string).collect(),
                })
            }
            Err(why) => why,
        },
        _ => Walked::NotTried,
    };
    let counted: Vec<Route> = remembered
        .as_ref()
        .map(Remembered::routes)
        .unwrap_or_default();
    let reserve = NETWORK_RESERVE.max(deadline.saturating_duration_since(Instant::now()) / 8);
    let network_deadline = server::network_deadline(deadline, reserve);
    // The sockets to the ports the policy names, and to where the kernel held connections
    // counted before.
    let scanned = ports_with(&config.policy.ports, &counted);
    let mut obs = unasked(observe::pod(
        PodTarget {
            ports: &scanned,
            ..target(config)
        },
        deadline,
    )?);
    obs.pod.scan.lookup = Lookup::Walk(walked);
    let mut connections = connection::connections(
        &obs.pod.scan.sockets,
        &config.policy,
        obs.pod.owned.as_ref(),
        &counted,
    );
    if verdict::needs_server(&connections, &config.policy) {
        obs.servers = observe::servers(&config.servers, network_deadline)?;
        let routes = connection::routes(&obs.servers);
        if !routes.is_empty() {
            let routes = [counted, routes].concat();
            // Where the kernel holds connections to the servers besides their addresses: the
            // sockets to those ports are read too, when the first walk did not.
            let ports = ports_with(&config.policy.ports, &routes);
            if ports != scanned {
                let lookup = obs.pod.scan.lookup;
                obs.pod = observe::pod(
                    PodTarget {
                        ports: &ports,
                        ..target(config)
                    },
                    deadline,
                )?;
                obs.pod.scan.lookup = lookup;
            }
            connections = connection::connections(
                &obs.pod.scan.sockets,
                &config.policy,
                obs.pod.owned.as_ref(),
                &routes,
            );
            if !connection::connected(&connections, &config.policy) {
                connections = other_backends(config, &obs, connections, routes, network_deadline);
            }
        }
    }
    // `check` keeps what it counted for the next run; `diagnose` only reads.
    if let Some(r) = remembered
        .as_ref()
        .filter(|_| sockets == Sockets::MayLookUp)
    {
        r.keep(config, &connections, obs.pod.owned.as_ref());
    }
    let server_state = server_state(&obs.servers);

    let (judged, subscriptions) =
        match verdict::needs_consumers(&connections, &config.policy, asked) {
            true => {
                let fresh;
                let opened = match &state {
                    Some(Ok(opened)) => opened,
                    Some(Err(tried)) => return Err(no_place(config, tried.clone())),
                    None => {
                        fresh = observe::state::open(&config.state_dir)
                            .map_err(|tried| no_place(config, tried))?;
                        &fresh
                    }
                };
                judge_with_state(config, opened, &connections, &mut obs, network_deadline)?
            }
            false => (Vec::new(), Vec::new()),
        };
    let skipped = matches!(obs.sampling, Some(Sampling::Skip { .. }));
    if judged.is_empty() && !config.consumers.is_empty() && !skipped {
        mark_unobserved(config, dir);
    }
    let healths: Vec<_> = judged
        .iter()
        .map(JudgedConsumer::health)
        .chain(subscriptions.iter().map(JudgedSubscription::health))
        .collect();
    let verdict = verdict::decide(&connections, server_state, &healths, &config.policy);
    Ok(Checked {
        verdict,
        connections,
        observations: obs,
        consumers: judged,
        subscriptions,
        servers: config.servers.iter().map(ToString::to_string).collect(),
    })
}

/// Behind socket-level load balancing the probe's own connect lands on one backend, the
/// client's maybe on another: the client's sockets to the backends' port are asked directly
/// which NATS they are, and those of the same NATS count (`rules::connection::same_nats`).
fn other_backends(
    config: &CheckConfig,
    obs: &Observations,
    connections: Connections,
    mut routes: Vec<Route>,
    deadline: Instant,
) -> Connections {
    let candidates = connection::candidates(
        &obs.pod.scan.sockets,
        obs.pod.owned.as_ref(),
        &connections,
        &routes,
        MAX_ASKED,
    );
    if candidates.is_empty() {
        return connections;
    }
    let Ok(identities) = server::identities(&candidates, deadline) else {
        return connections;
    };
    let asked: Vec<_> = candidates.into_iter().zip(identities).collect();
    routes.extend(connection::same_nats(&obs.servers, &asked));
    connection::connections(
        &obs.pod.scan.sockets,
        &config.policy,
        obs.pod.owned.as_ref(),
        &routes,
    )
}

/// The most of a client's sockets asked which NATS they reach, in one run.
const MAX_ASKED: usize = 8;

/// The ports, and the ports the routes' `held_as` have: each once, in order.
fn ports_with(ports: &[u16], routes: &[Route]) -> Vec<u16> {
    let mut ports = ports.to_vec();
    ports.extend(routes.iter().map(|r| r.held_as.port()));
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// The pod's side observed, and nothing else asked yet.
fn unasked(pod: Pod) -> Observations {
    Observations {
        pod,
        servers: Vec::new(),
        consumers: Vec::new(),
        client_age: None,
        now_ms: 0,
        connz: None,
        sampling: None,
        state_dir: None,
        server_domain: None,
        server_jetstream: false,
    }
}

/// Whether any server answered as NATS; None when none was asked.
fn server_state(servers: &[ServerAnswer]) -> Option<ServerState> {
    (!servers.is_empty()).then(|| match servers.iter().any(|a| a.answer.is_nats()) {
        true => ServerState::Answers,
        false => ServerState::NotAnswering,
    })
}

/// The consumers and subscriptions, each judged against what the state dir kept from the
/// last run; this run's samples, look, connections and causes are kept for the next.
/// No place to keep samples (`opened` failing) is said by the caller at once, before the
/// server is asked anything: no run could ever compare.
fn judge_with_state(
    config: &CheckConfig,
    opened: &Opened,
    connections: &Connections,
    obs: &mut Observations,
    deadline: Instant,
) -> Result<(Vec<JudgedConsumer>, Vec<JudgedSubscription>), Error> {
    let dir = &opened.dir;
    obs.state_dir = Some(StateDirUsed {
        path: dir.path.display().to_string(),
        skipped: opened
            .skipped
            .iter()
            .map(|(p, why)| (p.display().to_string(), why.clone()))
            .collect(),
    });
    let server = observe::state::server_key(&config.servers, &config.js_api);
    obs.now_ms = observe::now_ms();
    let (sockets, live) = our_sockets(connections);
    let inodes: Vec<u64> = sockets.iter().map(|s| s.inode).collect();
    let last = match config.consumers.is_empty() {
        false => observe::remembered::load_look(dir, &server, &config.consumers),
        true => None,
    };
    obs.sampling = (!config.consumers.is_empty()).then(|| {
        remembered::sampling(
            last.as_ref(),
            &inodes,
            config.sample_every,
            config.own_subscription,
            obs.now_ms,
        )
    });
    let mut nats: Option<observe::Nats> = None;

    let (judgements, mut wanted) =
        ask_consumers(config, &mut nats, last.as_ref(), dir, obs, deadline)?;
    wanted.extend(config.subscriptions.iter().map(|w| (w.clone(), None)));
    let mut subscriptions = Vec::new();
    if !wanted.is_empty() {
        let judge = Subscriptions {
            config,
            dir,
            server: &server,
            sockets: &sockets,
            live: &live,
            now_ms: obs.now_ms,
            looking: matches!(obs.sampling, Some(Sampling::Ask(_))),
            deadline,
        };
        subscriptions = judge.judge(&mut nats, wanted, &mut obs.connz)?;
    }
    drop(nats);

    let outcomes: Vec<&consumer::Outcome> = judgements.iter().map(|j| &j.outcome).collect();
    if verdict::needs_client_age(&outcomes) {
        obs.client_age = Some(client_age(&obs.pod, connections));
    }
    keep_samples(dir, &server, &mut obs.consumers, &judgements);
    let context = look::Context {
        inodes,
        wanted: subscriptions
            .iter()
            .filter_map(|s| Some((s.wanted.clone(), s.consumer.clone()?)))
            .collect(),
        own_subscription: config.own_subscription,
    };
    let (settled, look) = look::settle(
        last.as_ref(),
        &config.consumers,
        judgements,
        obs.client_age,
        &config.consumer_policy,
        context,
        obs.now_ms,
    );
    // Only a run that asked has a look to remember; with --sample-every 0 only its faults are
    // worth it (every run asks): a consumer's, or a deliver subscription missing (the next run
    // that cannot look takes the subscriptions from it). Best effort: a look not remembered is
    // asked again next run, and one not forgotten is replaced by the next.
    let missing = subscriptions
        .iter()
        .any(|s| matches!(s.held, subscription::Held::NotByThisConnection { .. }));
    if matches!(obs.sampling, Some(Sampling::Ask(_))) {
        let _ = match config.sample_every.is_zero() && look.faults.is_empty() && !missing {
            true => observe::remembered::forget_look(dir, &server, &config.consumers),
            false => observe::remembered::store_look(dir, &server, &config.consumers, &look),
        };
    }
    let mut judged: Vec<JudgedConsumer> = obs
        .consumers
        .iter()
        .zip(settled)
        .map(|(seen, s)| JudgedConsumer {
            seen: seen.clone(),
            outcome: s.outcome,
            window: s.window,
            progress: s.progress,
            standing: None,
            carried: s.carried,
        })
        .collect();
    let carry = Carry {
        dir,
        server: &server,
        now_ms: obs.now_ms,
        policy: &config.consumer_policy,
    };
    carry.consumers(&mut judged);
    carry.subscriptions(&mut subscriptions);
    Ok((judged, subscriptions))
}

/// This pod's counted connections as the server sees them (an IPv4-mapped address
/// unmapped), and of them the live ones: only a live connection is trusted or looked up; a
/// half-open one is matched again.
fn our_sockets(connections: &Connections) -> (Vec<remembered::Socket>, Vec<remembered::Socket>) {
    let sockets: Vec<remembered::Socket> = connections
        .established
        .iter()
        .map(|s| remembered::Socket {
            addr: SocketAddr::new(unmap(s.local.ip()), s.local.port()),
            inode: s.inode,
        })
        .collect();
    let live: Vec<remembered::Socket> = sockets
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

/// The consumers, when a look is due: asked at once, and each judged against its previous
/// sample. And the subscriptions this pod's connection must hold for them
/// (`--own-subscription`): each push consumer's deliver subject (and group); between looks,
/// the consumers' as last seen.
fn ask_consumers(
    config: &CheckConfig,
    nats: &mut Option<observe::Nats>,
    last: Option<&remembered::LastLook>,
    dir: &StateDir,
    obs: &mut Observations,
    deadline: Instant,
) -> Result<(Vec<consumer::Judgement>, Vec<WantedFor>), Error> {
    let mut wanted: Vec<WantedFor> = Vec::new();
    let mut judgements: Vec<consumer::Judgement> = Vec::new();
    match obs.sampling {
        Some(Sampling::Ask(_)) => {
            let session = open(nats, config, deadline)?;
            obs.consumers = session.consumers(
                &config.servers,
                &config.js_api,
                &config.consumers,
                dir,
                deadline,
            );
            obs.server_domain = session.server_domain();
            obs.server_jetstream = session.server_jetstream();
            judgements = obs
                .consumers
                .iter()
                .map(|c| {
                    let previous = c.previous.as_ref().and_then(Loaded::sample);
                    consumer::judge(&c.observed, previous, &config.consumer_policy, obs.now_ms)
                })
                .collect();
            if config.own_subscription {
                wanted = deliver_subscriptions(&obs.consumers, last)?;
            }
        }
        Some(Sampling::Skip { .. }) if config.own_subscription => {
            let last = last.map(|l| l.wanted.clone()).unwrap_or_default();
            wanted = last.into_iter().map(|(w, c)| (w, Some(c))).collect();
        }
        Some(Sampling::Skip { .. }) | None => {}
    }
    Ok((judgements, wanted))
}

/// Keeps each consumer's new sample; one that cannot be kept says why beside its consumer.
fn keep_samples(
    dir: &StateDir,
    server: &str,
    consumers: &mut [ConsumerSeen],
    judgements: &[consumer::Judgement],
) {
    for (seen, j) in consumers.iter_mut().zip(judgements) {
        if let Some(sample) = &j.sample {
            seen.state_problem = dir.store_sample(server, &seen.name, sample).err();
        }
    }
}

/// "No place to keep samples", naming every place tried and the fix: exit 2.
fn no_place(config: &CheckConfig, tried: Vec<(std::path::PathBuf, String)>) -> Error {
    let tried: Vec<String> = tried.into_iter().map(|(_, why)| why).collect();
    // The fix first: the kubelet's event may cut the line.
    let fix = match config.state_dir.explicit {
        true => "give --state-dir a directory this user can write (an emptyDir)",
        false => {
            "mount a writable volume (an emptyDir) and pass it as --state-dir, or set TMPDIR to one"
        }
    };
    Error::Setting {
        setting: Setting::StateDir,
        path: None,
        problem: format!(
            "no place to keep samples, so no run could compare: {fix} ({})",
            tried.join("; ")
        ),
    }
}

/// Carries each check's cause from the last run to this one (`rules::cause`), keeping it in
/// the state dir beside the samples: a cause of the configuration becomes an error once it
/// has lasted longer than the window; one that went away is cleared.
struct Carry<'a> {
    dir: &'a StateDir,
    server: &'a str,
    now_ms: i64,
    policy: &'a consumer::Policy,
}

impl Carry<'_> {
    fn consumers(&self, judged: &mut [JudgedConsumer]) {
        for r in judged {
            // A sample kept by an earlier run: this consumer was judged with this
            // configuration on these servers.
            let judged_before = matches!(r.seen.previous, Some(Loaded::Sample(_)));
            let state_problem = r.seen.state_problem.is_some();
            let now = cause::of_consumer(&r.outcome, state_problem, judged_before);
            let window = r.window.unwrap_or(consumer::window(self.policy, None));
            // No room for samples has no room for its cause either: it has lasted since the
            // last sample that could be kept.
            let kept_until = match (&r.seen.state_problem, &r.seen.previous) {
                (Some(_), Some(Loaded::Sample(p))) => Some(p.seen_at_ms),
                _ => None,
            };
            r.standing = self.carry(Of::Consumer(&r.seen.name), now, window.duration, kept_until);
        }
    }

    fn subscriptions(&self, judged: &mut [JudgedSubscription]) {
        let window = consumer::window(self.policy, None).duration;
        for s in judged {
            let now = match &s.held {
                subscription::Held::NotJudged(why) => {
                    Some(cause::Seen::new(Cause::of(why), s.judged_before))
                }
                _ => None,
            };
            s.standing = self.carry(Of::Subscription(&s.wanted), now, window, None);
        }
    }

    /// `since_ms`: when the cause began, where no kept cause can say (None: as kept).
    fn carry(
        &self,
        of: Of,
        now: Option<cause::Seen>,
        window: Duration,
        since_ms: Option<i64>,
    ) -> Option<cause::Standing> {
        // Only a cause that may still become an error was kept; nothing else needs reading.
        let prev = now.filter(cause::Seen::kept).and_then(|seen| {
            self.dir.load_cause(self.server, of).or_else(|| {
                since_ms.map(|since_ms| Persisting {
                    cause: seen.cause.as_str().to_string(),
                    since_ms,
                    last_ms: self.now_ms,
                })
            })
        });
        let (keep, standing) = cause::carry(prev.as_ref(), now, self.now_ms, window);
        // Best effort: a cause that cannot be kept starts again next run (a disk that cannot
        // keep it cannot keep the samples either, which is a cause of its own).
        let _ = self.dir.store_cause(self.server, of, keep.as_ref());
        standing
    }
}

/// The consumers were not asked (no connection to judge them by): each sample kept as the
/// rules say (`consumer::unobserved`). Best effort: a state dir that cannot be used only loses
/// the mark.
fn mark_unobserved(config: &CheckConfig, dir: Option<&StateDir>) {
    let Some(dir) = dir else {
        return;
    };
    let server = observe::state::server_key(&config.servers, &config.js_api);
    for name in &config.consumers {
        if let Loaded::Sample(prev) = dir.load_sample(&server, name) {
            if let Some(marked) = consumer::unobserved(&prev) {
                let _ = dir.store_sample(&server, name, &marked);
            }
        }
    }
}

/// The age of the youngest process holding a counted connection: with `--pid`/`--process`
/// the named processes that hold one, else whoever holds one (a walk of /proc).
fn client_age(pod: &Pod, connections: &Connections) -> Option<Duration> {
    let pids: Vec<u32> = match &pod.owned {
        Some(owned) => connections
            .established
            .iter()
            .filter_map(|s| owned.get(&s.inode).map(|h| h.pid))
            .collect(),
        None => {
            let inodes: HashSet<u64> = connections.established.iter().map(|s| s.inode).collect();
            observe::holders(&inodes)
        }
    };
    observe::youngest(&pids)
}
