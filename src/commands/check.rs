//! `check`: the pod's liveness verdict. Observes in the order the rules ask (one socket read
//! in the common case; the servers only without a connection; JetStream only with one),
//! judges, keeps each consumer's sample for the next run, and returns the report.

use crate::config::{CheckConfig, Setting};
use crate::error::Error;
use crate::facts::{unmap, ConsumerName, Loaded, Observed, Wanted};
use crate::observe::{self, server, state::StateDir, Observations, Pod, PodTarget, StateDirUsed};
use crate::report::check::{CheckInput, CheckReport, JudgedConsumer, JudgedSubscription};
use crate::rules::cause::{self, Cause};
use crate::rules::check::{self as verdict, ServerState};
use crate::rules::connection::{self, Connections};
use crate::rules::{consumer, subscription};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Kept back from the network's share of the deadline: shutting the runtime down and
/// formatting the answer.
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
    let checked = judge(config, deadline)?;
    Ok(crate::report::check::check(&checked.input(config)))
}

/// Observes what the rules ask for, judges, and keeps each consumer's sample.
pub fn judge(config: &CheckConfig, deadline: Instant) -> Result<Checked, Error> {
    let network_deadline = server::network_deadline(deadline, NETWORK_RESERVE);
    let target = PodTarget {
        owner: &config.owner,
        netns_of: config.netns_of,
        reader: config.reader,
        ports: &config.policy.ports,
        tcp_info: config.policy.half_open_after.is_some() || config.verbose,
    };
    let mut obs = Observations {
        pod: observe::pod(target, deadline)?,
        servers: Vec::new(),
        consumers: Vec::new(),
        client_age: None,
        now_ms: 0,
        connz: None,
        state_dir: None,
        server_domain: None,
        server_jetstream: false,
    };
    let connections = connection::connections(
        &obs.pod.scan.sockets,
        &config.policy,
        obs.pod.owned.as_ref(),
    );

    if verdict::needs_server(&connections, &config.policy) {
        obs.servers = observe::servers(&config.servers, network_deadline)?;
    }
    let server_state =
        (!obs.servers.is_empty()).then(|| match obs.servers.iter().any(|a| a.answer.is_nats()) {
            true => ServerState::Answers,
            false => ServerState::NotAnswering,
        });

    let mut judged = Vec::new();
    let mut subscriptions = Vec::new();
    let wants_subscriptions = config.own_subscription || !config.subscriptions.is_empty();
    let asked = config.consumers.len() + usize::from(wants_subscriptions);
    if verdict::needs_consumers(&connections, &config.policy, asked) {
        // No place to keep samples: no run could ever compare. Certain, so said at once,
        // before the server is asked anything.
        let opened =
            observe::state::open(&config.state_dir).map_err(|tried| no_place(config, tried))?;
        let dir = &opened.dir;
        obs.state_dir = Some(StateDirUsed {
            path: dir.path.clone(),
            skipped: opened.skipped.clone(),
        });
        let nats = observe::Nats::open(
            &config.servers,
            &config.auth,
            &config.js_api,
            network_deadline,
        )?;
        obs.consumers = nats.consumers(
            &config.servers,
            &config.js_api,
            &config.consumers,
            dir,
            network_deadline,
        );
        obs.now_ms = observe::now_ms();
        obs.server_domain = nats.server_domain();
        obs.server_jetstream = nats.server_jetstream();
        let judgements: Vec<consumer::Judgement> = obs
            .consumers
            .iter()
            .map(|c| {
                let previous = c.previous.as_ref().and_then(Loaded::sample);
                consumer::judge(&c.observed, previous, &config.consumer_policy, obs.now_ms)
            })
            .collect();

        // The subscriptions this pod's connection must hold: each push consumer's deliver
        // subject (and group), and the core ones.
        let mut wanted: Vec<(Wanted, Option<ConsumerName>)> = Vec::new();
        if config.own_subscription {
            for seen in &obs.consumers {
                if let Observed::Found { facts, .. } = &seen.observed {
                    let Some(subject) = &facts.deliver_subject else {
                        return Err(Error::Setting {
                            setting: Setting::OwnSubscription,
                            path: None,
                            problem: format!(
                                "{} is a pull consumer: it has no subscription to match (drop --own-subscription, or name push consumers only)",
                                seen.name
                            ),
                        });
                    };
                    let w = Wanted {
                        subject: subject.clone(),
                        queue: facts.deliver_group.clone(),
                    };
                    wanted.push((w, Some(seen.name.clone())));
                }
            }
        }
        wanted.extend(config.subscriptions.iter().map(|w| (w.clone(), None)));
        if !wanted.is_empty() {
            let ours: Vec<SocketAddr> = connections
                .established
                .iter()
                .map(|s| SocketAddr::new(unmap(s.local.ip()), s.local.port()))
                .collect();
            let list: Vec<Wanted> = wanted.iter().map(|(w, _)| w.clone()).collect();
            let connz = nats.connz(&list, &ours, config.monitor.as_ref(), network_deadline);
            subscriptions = wanted
                .into_iter()
                .map(|(w, consumer)| JudgedSubscription {
                    held: subscription::judge(&w, &ours, &connz),
                    wanted: w,
                    consumer,
                    standing: None,
                })
                .collect();
            obs.connz = Some(connz);
        }
        drop(nats);

        let outcomes: Vec<&consumer::Outcome> = judgements.iter().map(|j| &j.outcome).collect();
        if verdict::needs_client_age(&outcomes) {
            obs.client_age = Some(client_age(&obs.pod, &connections));
        }
        let server = observe::state::server_key(&config.servers, &config.js_api);
        for (seen, j) in obs.consumers.iter_mut().zip(&judgements) {
            if let Some(sample) = &j.sample {
                let key = observe::state::Key::new(&server, &seen.name);
                seen.state_problem = dir.store(&key, sample).err();
            }
        }
        judged = obs
            .consumers
            .iter()
            .zip(judgements)
            .map(|(seen, j)| JudgedConsumer {
                seen: seen.clone(),
                outcome: verdict::excuse_young_client(j.outcome, j.window, obs.client_age),
                window: j.window,
                progress: j.progress,
                standing: None,
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
    }
    if judged.is_empty() && !config.consumers.is_empty() {
        mark_unobserved(config);
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
            let cause = match (&r.seen.state_problem, &r.outcome) {
                (Some(_), _) => Some(Cause::NoStateDir),
                (None, consumer::Outcome::NotJudged(why)) => Some(Cause::of(why)),
                (
                    None,
                    consumer::Outcome::Healthy(consumer::Healthy::Unmeasured(
                        consumer::Unmeasured::Interval(_),
                    )),
                ) => Some(Cause::TooFarApart),
                (None, consumer::Outcome::Healthy(consumer::Healthy::ClientAgeUnknown { .. })) => {
                    Some(Cause::ClientAgeUnreadable)
                }
                _ => None,
            };
            let window = r.window.unwrap_or(consumer::window(self.policy, None));
            let key = observe::state::Key::new(self.server, &r.seen.name);
            r.standing = self.carry(&key, cause, window.duration);
        }
    }

    fn subscriptions(&self, judged: &mut [JudgedSubscription]) {
        let window = consumer::window(self.policy, None).duration;
        for s in judged {
            let cause = match &s.held {
                subscription::Held::NotJudged(why) => Some(Cause::of(why)),
                _ => None,
            };
            let key = observe::state::Key::subscription(
                self.server,
                &s.wanted.subject,
                s.wanted.queue.as_deref(),
            );
            s.standing = self.carry(&key, cause, window);
        }
    }

    fn carry(
        &self,
        key: &observe::state::Key,
        cause: Option<Cause>,
        window: Duration,
    ) -> Option<cause::Standing> {
        // Only a cause that may persist was kept; nothing else needs reading.
        let prev = cause
            .filter(|c| cause::class(*c) == cause::Class::ConfigurationIfItPersists)
            .and_then(|_| self.dir.load_cause(key));
        let (keep, standing) = cause::carry(prev.as_ref(), cause, self.now_ms, window);
        // Best effort: a cause that cannot be kept starts again next run (a disk that cannot
        // keep it cannot keep the samples either, which is an error of its own).
        let _ = self.dir.store_cause(key, keep.as_ref());
        standing
    }
}

/// The consumers were not asked (no connection to judge them by): for each, the time until
/// the next observation is a gap, never stall time. Best effort: a state dir that cannot be
/// used only loses the mark.
fn mark_unobserved(config: &CheckConfig) {
    let Ok(opened) = observe::state::open(&config.state_dir) else {
        return;
    };
    let dir = opened.dir;
    let server = observe::state::server_key(&config.servers, &config.js_api);
    for name in &config.consumers {
        let key = observe::state::Key::new(&server, name);
        if let Loaded::Sample(prev) = dir.load(&key) {
            if !prev.gap {
                let _ = dir.store(&key, &consumer::gap(&prev));
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
            .filter_map(|s| owned.get(&s.inode).copied())
            .collect(),
        None => {
            let inodes: HashSet<u64> = connections.established.iter().map(|s| s.inode).collect();
            observe::holders(&inodes)
        }
    };
    observe::youngest(&pids)
}
