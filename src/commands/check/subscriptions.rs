//! Which subscriptions this pod's connection must hold, and whether it does: trusted,
//! looked up by cid, or matched by address (`rules::remembered` decides which), with the
//! connection remembered for the next run. Also the NATS connection, opened the first time an
//! observation needs it.

use crate::config::{CheckConfig, Setting};
use crate::error::Error;
use crate::facts::{ConsumerName, ConsumerSeen, Observed, Wanted};
use crate::facts::{LookedUp, Remembered, ServerIdent, SubscriptionMemo, Unknown};
use crate::observe::{self, state::StateDir};
use crate::rules::judged::JudgedSubscription;
use crate::rules::remembered::{self, Asking, Confirmed, Found, Plan, Rematch};
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

/// Each push consumer's deliver subject (and group); a pull consumer has none to match. One
/// NATS did not answer for keeps the one the last look found: the freshest evidence.
pub fn deliver_subscriptions(
    consumers: &[ConsumerSeen],
    last: Option<&remembered::LastLook>,
) -> Result<Vec<WantedFor>, Error> {
    let mut wanted = Vec::new();
    for seen in consumers {
        let facts = match &seen.observed {
            Observed::Found { facts, .. } => facts,
            Observed::NotJudged(_) => {
                let kept = last.into_iter().flat_map(|l| &l.wanted);
                wanted.extend(
                    kept.filter(|(_, c)| *c == seen.name)
                        .map(|(w, c)| (w.clone(), Some(c.clone()))),
                );
                continue;
            }
            _ => continue,
        };
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
    /// This run asks about the consumers (a look).
    pub looking: bool,
    pub deadline: Instant,
}

/// A subscription judged: whether it is held, how that was found, the connection to
/// remember for the next run, and whether the server was asked (the probe's login went
/// through, or its monitoring port was asked).
struct Judged {
    held: Held,
    found: Found,
    connection: Option<Remembered>,
    asked: bool,
}

impl Subscriptions<'_> {
    /// Does this pod's connection hold each wanted subscription? Trusted where it was seen
    /// holding it on the same socket within its trust time (`--subscription-every`); else,
    /// unless earlier asks went unanswered and the next is not due, the remembered
    /// connection is asked for by cid; else (nothing remembered, or the answer is not this
    /// pod's connection any more) matched by address in the server's list, as the first run
    /// does. Remembers the result; an ask that went unanswered keeps what was remembered.
    pub fn judge(
        &self,
        nats: &mut Option<observe::Nats>,
        wanted: Vec<WantedFor>,
        connz_seen: &mut Option<Result<crate::facts::Connz, Unknown>>,
    ) -> Result<Vec<JudgedSubscription>, Error> {
        let memos: Vec<SubscriptionMemo> = wanted
            .iter()
            .map(|(w, _)| observe::remembered::load_subscription(self.dir, self.server, w))
            .collect();
        let (mut results, rematch) = self.trusted_or_looked_up(nats, &wanted, &memos)?;
        let rest: Vec<usize> = (0..wanted.len())
            .filter(|&i| results[i].is_none())
            .collect();
        if !rest.is_empty() {
            let connz =
                self.match_by_address(nats, &wanted, &memos, &rest, &rematch, &mut results)?;
            *connz_seen = Some(connz);
        }
        Ok(self.remember(wanted, results, memos))
    }

    /// Each subscription whose remembered connection is trusted, or asked for by cid, or
    /// waiting; for the others, why they are matched by address.
    fn trusted_or_looked_up(
        &self,
        nats: &mut Option<observe::Nats>,
        wanted: &[WantedFor],
        memos: &[SubscriptionMemo],
    ) -> Result<(Vec<Option<Judged>>, Vec<Rematch>), Error> {
        let (config, now_ms, deadline) = (self.config, self.now_ms, self.deadline);
        let mut results: Vec<Option<Judged>> = (0..wanted.len()).map(|_| None).collect();
        let mut rematch = vec![Rematch::FirstTime; wanted.len()];
        let mut lookups: HashMap<(ServerIdent, u64), Result<Vec<LookedUp>, Unknown>> =
            HashMap::new();
        for (i, ((w, _), memo)) in wanted.iter().zip(memos).enumerate() {
            let kept = memo.connection.as_ref();
            let direct = kept
                .is_some_and(|m| observe::Nats::direct_lookup(&m.server, config.monitor.as_ref()));
            let asking = Asking {
                setting: config.subscription_every,
                sample_every: config.sample_every,
                direct,
                looking: self.looking,
            };
            let planned =
                remembered::plan(kept, memo.unanswered.as_ref(), self.live, asking, now_ms);
            match (planned, kept) {
                (Plan::Trust { held_ago, trust }, Some(m)) => {
                    results[i] = Some(Judged {
                        held: Held::Yes { by: m.local },
                        found: Found::Trusted { held_ago, trust },
                        connection: Some(m.clone()),
                        asked: false,
                    });
                }
                (Plan::Wait(next), _) => {
                    results[i] = Some(Judged {
                        held: Held::NotJudged(Unknown::Waiting(next)),
                        found: Found::Waited,
                        connection: kept.cloned(),
                        asked: false,
                    });
                }
                (Plan::LookUp, Some(m)) => {
                    let key = (m.server.clone(), m.cid);
                    // Only an ask the server got counts as one it left unanswered: a login
                    // refused or late says nothing of its load.
                    let session = open(nats, config, deadline)?;
                    let reached = direct || session.reached();
                    if !lookups.contains_key(&key) {
                        let answer =
                            session.lookup(&m.server, m.cid, config.monitor.as_ref(), deadline);
                        lookups.insert(key.clone(), answer);
                    }
                    // The same connection, asked again: when it was last seen holding the
                    // subscription, and the account's size, as this answer says.
                    let (held, connection) = match &lookups[&key] {
                        Err(why) => (Held::NotJudged(why.clone()), m.clone()),
                        Ok(answers) => match remembered::confirm(m, answers) {
                            Confirmed::Yes(c) => {
                                let held = remembered::judge_confirmed(w, c);
                                let again = Remembered {
                                    held_at_ms: matches!(held, Held::Yes { .. }).then_some(now_ms),
                                    account_connections: c.account_connections,
                                    ..m.clone()
                                };
                                (held, again)
                            }
                            Confirmed::Unanswered => {
                                let why = format!(
                                    "server {} did not answer the lookup of cid {} in time",
                                    m.server.name, m.cid
                                );
                                (Held::NotJudged(Unknown::NotListed(why)), m.clone())
                            }
                            Confirmed::Changed(why) => {
                                rematch[i] = why;
                                continue;
                            }
                        },
                    };
                    results[i] = Some(Judged {
                        held,
                        found: Found::LookedUp { cid: m.cid },
                        connection: Some(connection),
                        asked: reached,
                    });
                }
                (Plan::Match(why), _) => rematch[i] = why,
                (_, None) => {}
            }
        }
        Ok((results, rematch))
    }

    /// The subscriptions at `rest`, matched by address in the server's connection list,
    /// which is returned for the report. A match that could not be judged keeps what was
    /// remembered.
    fn match_by_address(
        &self,
        nats: &mut Option<observe::Nats>,
        wanted: &[WantedFor],
        memos: &[SubscriptionMemo],
        rest: &[usize],
        rematch: &[Rematch],
        results: &mut [Option<Judged>],
    ) -> Result<Result<crate::facts::Connz, Unknown>, Error> {
        let (config, deadline) = (self.config, self.deadline);
        let ours: Vec<SocketAddr> = self.sockets.iter().map(|s| s.addr).collect();
        let list: Vec<Wanted> = rest.iter().map(|&i| wanted[i].0.clone()).collect();
        let session = open(nats, config, deadline)?;
        let reached = config.monitor.is_some() || session.reached();
        let connz = session.connz(&list, &ours, config.monitor.as_ref(), deadline);
        for &i in rest {
            let w = &wanted[i].0;
            let held = subscription::judge(w, &ours, &connz);
            let matched = connz.as_ref().ok().and_then(|c| {
                remembered::remember(w, &held, self.sockets, &remembered::listed(c), self.now_ms)
            });
            let connection = match held {
                Held::NotJudged(_) => memos[i].connection.clone(),
                _ => matched,
            };
            results[i] = Some(Judged {
                held,
                found: Found::Matched(rematch[i]),
                connection,
                asked: reached,
            });
        }
        Ok(connz)
    }

    /// Each subscription as judged, what is kept for it written where that changed.
    fn remember(
        &self,
        wanted: Vec<WantedFor>,
        results: Vec<Option<Judged>>,
        memos: Vec<SubscriptionMemo>,
    ) -> Vec<JudgedSubscription> {
        let window_ms = crate::rules::consumer::window(&self.config.consumer_policy, None)
            .duration
            .as_millis() as i64;
        wanted
            .into_iter()
            .zip(results)
            .zip(memos)
            .map(|(((w, consumer), result), before)| {
                let j = result.expect("every subscription judged above");
                let unanswered = remembered::count_unanswered(
                    before.unanswered.as_ref(),
                    &j.held,
                    j.asked,
                    self.now_ms,
                );
                let settled =
                    remembered::settle_held(&before, j.held, self.live, window_ms, self.now_ms);
                let memo = SubscriptionMemo {
                    unanswered,
                    connection: j.connection,
                    missing_at_ms: settled.missing_at_ms,
                };
                if memo != before {
                    // Best effort: a connection not remembered is matched by address next run.
                    let _ =
                        observe::remembered::store_subscription(self.dir, self.server, &w, &memo);
                }
                JudgedSubscription {
                    held: settled.held,
                    carried: settled.carried,
                    found: Some(j.found),
                    wanted: w,
                    consumer,
                    standing: None,
                    judged_before: before.connection.is_some(),
                }
            })
            .collect()
    }
}
