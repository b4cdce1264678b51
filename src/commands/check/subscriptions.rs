//! Which subscriptions this pod's connection must hold, and whether it does: trusted,
//! looked up by cid, or matched by address (`rules::remembered` decides which), with the
//! connection remembered for the next run. Also the NATS connection, opened the first time an
//! observation needs it.

use crate::config::{CheckConfig, Setting};
use crate::error::Error;
use crate::facts::{ConsumerName, ConsumerSeen, Observed, Wanted};
use crate::facts::{LookedUp, Remembered, ServerIdent, Unknown};
use crate::observe::{self, state::StateDir};
use crate::rules::judged::JudgedSubscription;
use crate::rules::remembered::{self, Found, Plan, Rematch};
use crate::rules::subscription::{self, Held};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

/// A subscription this pod's connection must hold, and the consumer it delivers for (None:
/// a core subscription, `--subscription`).
pub type WantedFor = (Wanted, Option<ConsumerName>);

/// The NATS connection, opened the first time an observation needs it.
pub fn open<'a>(
    slot: &'a mut Option<observe::Nats>,
    config: &CheckConfig,
    deadline: Instant,
) -> Result<&'a observe::Nats, Error> {
    if slot.is_none() {
        *slot = Some(observe::Nats::open(
            &config.servers,
            &config.auth,
            &config.js_api,
            deadline,
        )?);
    }
    Ok(slot.as_ref().expect("opened above"))
}

/// Each push consumer's deliver subject (and group); a pull consumer has none to match.
pub fn deliver_subscriptions(consumers: &[ConsumerSeen]) -> Result<Vec<WantedFor>, Error> {
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

/// What judging the subscriptions works with: where the last run's connections were kept,
/// this pod's sockets (and the live ones), the clock and the deadline.
pub struct Subscriptions<'a> {
    pub config: &'a CheckConfig,
    pub dir: &'a StateDir,
    pub server: &'a str,
    pub sockets: &'a [remembered::Socket],
    pub live: &'a [remembered::Socket],
    pub now_ms: i64,
    pub deadline: Instant,
}

/// A subscription judged: whether it is held, how that was found, and the connection to
/// remember for the next run.
type Judged = (Held, Found, Option<Remembered>);

impl Subscriptions<'_> {
    /// Does this pod's connection hold each wanted subscription? Trusted where it was seen
    /// holding it on the same socket within its trust time (`--subscription-every`); else the
    /// remembered connection is asked for by cid; else (or when that answer is not this
    /// pod's connection) matched by address in the server's list, as the first run does.
    /// Remembers the result.
    pub fn judge(
        &self,
        nats: &mut Option<observe::Nats>,
        wanted: Vec<WantedFor>,
        connz_seen: &mut Option<Result<crate::facts::Connz, Unknown>>,
    ) -> Result<Vec<JudgedSubscription>, Error> {
        let memos: Vec<Option<Remembered>> = wanted
            .iter()
            .map(|(w, _)| observe::remembered::load_subscription(self.dir, self.server, w))
            .collect();
        let (mut results, rematch) = self.trusted_or_looked_up(nats, &wanted, &memos)?;
        let rest: Vec<usize> = (0..wanted.len())
            .filter(|&i| results[i].is_none())
            .collect();
        if !rest.is_empty() {
            let connz = self.match_by_address(nats, &wanted, &rest, &rematch, &mut results)?;
            *connz_seen = Some(connz);
        }
        Ok(self.remember(wanted, results, memos))
    }

    /// Each subscription whose remembered connection is trusted, or confirmed by asking for
    /// it by cid; for the others, why they are matched by address.
    fn trusted_or_looked_up(
        &self,
        nats: &mut Option<observe::Nats>,
        wanted: &[WantedFor],
        memos: &[Option<Remembered>],
    ) -> Result<(Vec<Option<Judged>>, Vec<Rematch>), Error> {
        let (config, now_ms, deadline) = (self.config, self.now_ms, self.deadline);
        let mut results: Vec<Option<Judged>> = vec![None; wanted.len()];
        let mut rematch = vec![Rematch::FirstTime; wanted.len()];
        let mut lookups: HashMap<(ServerIdent, u64), Result<Vec<LookedUp>, Unknown>> =
            HashMap::new();
        for (i, ((w, _), memo)) in wanted.iter().zip(memos).enumerate() {
            let direct = memo
                .as_ref()
                .is_some_and(|m| observe::Nats::direct_lookup(&m.server, config.monitor.as_ref()));
            match (
                remembered::plan(
                    memo.as_ref(),
                    self.live,
                    config.subscription_every,
                    direct,
                    now_ms,
                ),
                memo,
            ) {
                (Plan::Trust { held_ago, trust }, Some(m)) => {
                    let held = Held::Yes { by: m.local };
                    let found = Found::Trusted { held_ago, trust };
                    results[i] = Some((held, found, Some(m.clone())));
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
                                account_connections: c.account_connections,
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
        Ok((results, rematch))
    }

    /// The subscriptions at `rest`, matched by address in the server's connection list,
    /// which is returned for the report.
    fn match_by_address(
        &self,
        nats: &mut Option<observe::Nats>,
        wanted: &[WantedFor],
        rest: &[usize],
        rematch: &[Rematch],
        results: &mut [Option<Judged>],
    ) -> Result<Result<crate::facts::Connz, Unknown>, Error> {
        let (config, deadline) = (self.config, self.deadline);
        let ours: Vec<SocketAddr> = self.sockets.iter().map(|s| s.addr).collect();
        let list: Vec<Wanted> = rest.iter().map(|&i| wanted[i].0.clone()).collect();
        let connz =
            open(nats, config, deadline)?.connz(&list, &ours, config.monitor.as_ref(), deadline);
        for &i in rest {
            let w = &wanted[i].0;
            let held = subscription::judge(w, &ours, &connz);
            let memo = connz.as_ref().ok().and_then(|c| {
                remembered::remember(w, &held, self.sockets, &remembered::listed(c), self.now_ms)
            });
            results[i] = Some((held, Found::Matched(rematch[i]), memo));
        }
        Ok(connz)
    }

    /// Each subscription as judged, its connection remembered where that changed.
    fn remember(
        &self,
        wanted: Vec<WantedFor>,
        results: Vec<Option<Judged>>,
        memos: Vec<Option<Remembered>>,
    ) -> Vec<JudgedSubscription> {
        wanted
            .into_iter()
            .zip(results)
            .zip(memos)
            .map(|(((w, consumer), result), before)| {
                let (held, found, memo) = result.expect("every subscription judged above");
                if memo != before {
                    // Best effort: a connection not remembered is matched by address next run.
                    let _ = observe::remembered::store_subscription(
                        self.dir,
                        self.server,
                        &w,
                        memo.as_ref(),
                    );
                }
                JudgedSubscription {
                    held,
                    found: Some(found),
                    wanted: w,
                    consumer,
                    standing: None,
                }
            })
            .collect()
    }
}
