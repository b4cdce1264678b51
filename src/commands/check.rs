//! `check`: the pod's liveness verdict. Observes in the order the rules ask (one socket read
//! in the common case; the servers only without a connection; JetStream only with one, and
//! only when a look is due or a subscription's connection is not trusted), judges, keeps each
//! consumer's sample, the look and each subscription's connection for the next run, and
//! returns the report.

use crate::config::{CheckConfig, Setting};
use crate::error::Error;
use crate::facts::{unmap, ConsumerName, Loaded, Observed, Wanted};
use crate::facts::{LookedUp, Remembered, ServerIdent, Unknown};
use crate::observe::{self, server, state::StateDir, Observations, Pod, PodTarget};
use crate::report::check::{CheckInput, CheckReport, JudgedConsumer, JudgedSubscription};
use crate::rules::check::{self as verdict, ServerState};
use crate::rules::connection::{self, Connections};
use crate::rules::remembered::{self, Found, Plan, Rematch, Sampling};
use crate::rules::subscription::Held;
use crate::rules::{consumer, subscription};
use std::collections::HashMap;
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
        sampling: None,
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
        let dir = StateDir::open(config.state_dir.path.clone(), config.state_dir.explicit);
        let server = observe::state::server_key(&config.servers);
        obs.now_ms = observe::now_ms();
        let sockets: Vec<remembered::Socket> = connections
            .established
            .iter()
            .map(|s| remembered::Socket {
                addr: SocketAddr::new(unmap(s.local.ip()), s.local.port()),
                inode: s.inode,
            })
            .collect();
        let inodes: Vec<u64> = sockets.iter().map(|s| s.inode).collect();
        // Only a live connection is trusted or looked up: a half-open one is matched again.
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
        let last = match (&dir, config.consumers.is_empty()) {
            (Ok(d), false) => observe::remembered::load_look(d, &server, &config.consumers),
            _ => None,
        };
        obs.sampling = (!config.consumers.is_empty())
            .then(|| remembered::sampling(last.as_ref(), &inodes, config.sample_every, obs.now_ms));
        let mut nats: Option<observe::Nats> = None;

        // The subscriptions this pod's connection must hold: each push consumer's deliver
        // subject (and group), and the core ones. Between looks, the consumers' as last seen.
        let mut wanted: Vec<(Wanted, Option<ConsumerName>)> = Vec::new();
        let mut judgements: Vec<consumer::Judgement> = Vec::new();
        match obs.sampling {
            Some(Sampling::Ask(_)) => {
                let session = open(&mut nats, config, network_deadline)?;
                obs.consumers = session.consumers(
                    &config.servers,
                    &config.consumers,
                    dir.as_ref(),
                    network_deadline,
                );
                judgements = obs
                    .consumers
                    .iter()
                    .map(|c| {
                        let previous = c.previous.as_ref().and_then(Loaded::sample);
                        consumer::judge(&c.observed, previous, &config.consumer_policy, obs.now_ms)
                    })
                    .collect();
                if config.own_subscription {
                    wanted = deliver_subscriptions(&obs.consumers)?;
                }
            }
            Some(Sampling::Skip { .. }) if config.own_subscription => {
                let last = last.as_ref().map(|l| l.wanted.clone()).unwrap_or_default();
                wanted = last.into_iter().map(|(w, c)| (w, Some(c))).collect();
            }
            Some(Sampling::Skip { .. }) | None => {}
        }
        wanted.extend(config.subscriptions.iter().map(|w| (w.clone(), None)));
        if !wanted.is_empty() {
            subscriptions = judge_subscriptions(
                config,
                &mut nats,
                dir.as_ref().ok(),
                &server,
                (&sockets, &live),
                wanted,
                obs.now_ms,
                network_deadline,
                &mut obs.connz,
            )?;
        }
        drop(nats);

        // With --sample-every 0 every run asks: nothing to remember.
        if matches!(obs.sampling, Some(Sampling::Ask(_))) && !config.sample_every.is_zero() {
            if let Ok(dir) = &dir {
                let outcomes: Vec<_> = judgements
                    .iter()
                    .map(|j| (&j.outcome, j.sample.as_ref()))
                    .collect();
                let look = remembered::LastLook {
                    at_ms: obs.now_ms,
                    calm: remembered::calm(&outcomes),
                    inodes,
                    wanted: subscriptions
                        .iter()
                        .filter_map(|s| Some((s.wanted.clone(), s.consumer.clone()?)))
                        .collect(),
                };
                // Best effort: a look not remembered is asked again next run.
                let _ = observe::remembered::store_look(dir, &server, &config.consumers, &look);
            }
        }

        let outcomes: Vec<&consumer::Outcome> = judgements.iter().map(|j| &j.outcome).collect();
        if verdict::needs_client_age(&outcomes) {
            obs.client_age = Some(client_age(&obs.pod, &connections));
        }
        if let Ok(dir) = &dir {
            for (seen, j) in obs.consumers.iter_mut().zip(&judgements) {
                if let Some(sample) = &j.sample {
                    let key = observe::state::Key::new(&server, &seen.name);
                    seen.state_problem = dir.store(&key, sample).err();
                }
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
            })
            .collect();
    }
    let skipped = matches!(obs.sampling, Some(Sampling::Skip { .. }));
    if judged.is_empty() && !config.consumers.is_empty() && !skipped {
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

/// The NATS connection, opened the first time an observation needs it.
fn open<'a>(
    slot: &'a mut Option<observe::Nats>,
    config: &CheckConfig,
    deadline: Instant,
) -> Result<&'a observe::Nats, Error> {
    if slot.is_none() {
        *slot = Some(observe::Nats::open(
            &config.servers,
            &config.auth,
            deadline,
        )?);
    }
    Ok(slot.as_ref().expect("opened above"))
}

/// Each push consumer's deliver subject (and group); a pull consumer has none to match.
fn deliver_subscriptions(
    consumers: &[observe::ConsumerSeen],
) -> Result<Vec<(Wanted, Option<ConsumerName>)>, Error> {
    let mut wanted = Vec::new();
    for seen in consumers {
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
    Ok(wanted)
}

/// Does this pod's connection hold each wanted subscription? Trusted where it was seen
/// holding it on the same socket within `--subscription-every`; else the remembered
/// connection is asked for by cid; else (or when that answer is not this pod's connection)
/// matched by address in the server's list, as the first run does. Remembers the result.
#[allow(clippy::too_many_arguments)]
fn judge_subscriptions(
    config: &CheckConfig,
    nats: &mut Option<observe::Nats>,
    dir: Option<&StateDir>,
    server: &str,
    (sockets, live): (&[remembered::Socket], &[remembered::Socket]),
    wanted: Vec<(Wanted, Option<ConsumerName>)>,
    now_ms: i64,
    deadline: Instant,
    connz_seen: &mut Option<Result<crate::facts::Connz, Unknown>>,
) -> Result<Vec<JudgedSubscription>, Error> {
    let memos: Vec<Option<Remembered>> = wanted
        .iter()
        .map(|(w, _)| dir.and_then(|d| observe::remembered::load_subscription(d, server, w)))
        .collect();
    let mut results: Vec<Option<(Held, Found, Option<Remembered>)>> = vec![None; wanted.len()];
    let mut rematch = vec![Rematch::FirstTime; wanted.len()];
    let mut lookups: HashMap<(ServerIdent, u64), Result<Vec<LookedUp>, Unknown>> = HashMap::new();
    for (i, ((w, _), memo)) in wanted.iter().zip(&memos).enumerate() {
        match (
            remembered::plan(memo.as_ref(), live, config.subscription_every, now_ms),
            memo,
        ) {
            (Plan::Trust { held_ago }, Some(m)) => {
                let held = Held::Yes { by: m.local };
                results[i] = Some((held, Found::Trusted { held_ago }, Some(m.clone())));
            }
            (Plan::LookUp, Some(m)) => {
                let key = (m.server.clone(), m.cid);
                if !lookups.contains_key(&key) {
                    let answer = open(nats, config, deadline)?.lookup(
                        &m.server,
                        m.cid,
                        config.monitor.as_ref(),
                        deadline,
                    );
                    lookups.insert(key.clone(), answer);
                }
                match lookups[&key].as_ref().map(|a| remembered::confirm(m, a)) {
                    Ok(Ok(c)) => {
                        let held = remembered::judge_confirmed(w, c);
                        let again = Remembered {
                            held_at_ms: matches!(held, Held::Yes { .. }).then_some(now_ms),
                            ..m.clone()
                        };
                        results[i] = Some((held, Found::LookedUp { cid: m.cid }, Some(again)));
                    }
                    Ok(Err(why)) => rematch[i] = why,
                    Err(_) => rematch[i] = Rematch::LookupFailed,
                }
            }
            (Plan::Match(why), _) => rematch[i] = why,
            (_, None) => {}
        }
    }
    let rest: Vec<usize> = (0..wanted.len())
        .filter(|&i| results[i].is_none())
        .collect();
    if !rest.is_empty() {
        let ours: Vec<SocketAddr> = sockets.iter().map(|s| s.addr).collect();
        let list: Vec<Wanted> = rest.iter().map(|&i| wanted[i].0.clone()).collect();
        let connz =
            open(nats, config, deadline)?.connz(&list, &ours, config.monitor.as_ref(), deadline);
        for &i in &rest {
            let w = &wanted[i].0;
            let held = subscription::judge(w, &ours, &connz);
            let memo = connz.as_ref().ok().and_then(|c| {
                remembered::remember(w, &held, sockets, &remembered::listed(c), now_ms)
            });
            results[i] = Some((held, Found::Matched(rematch[i]), memo));
        }
        *connz_seen = Some(connz);
    }
    Ok(wanted
        .into_iter()
        .zip(results)
        .zip(memos)
        .map(|(((w, consumer), result), before)| {
            let (held, found, memo) = result.expect("every subscription judged above");
            if let Some(d) = dir {
                if memo != before {
                    // Best effort: a connection not remembered is matched by address next run.
                    let _ = observe::remembered::store_subscription(d, server, &w, memo.as_ref());
                }
            }
            JudgedSubscription {
                held,
                found: Some(found),
                wanted: w,
                consumer,
            }
        })
        .collect())
}

/// The consumers were not asked (no connection to judge them by): for each, the time until
/// the next observation is a gap, never stall time. Best effort: a state dir that cannot be
/// used only loses the mark.
fn mark_unobserved(config: &CheckConfig) {
    let Ok(dir) = StateDir::open(config.state_dir.path.clone(), config.state_dir.explicit) else {
        return;
    };
    let server = observe::state::server_key(&config.servers);
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
