//! `guard`: the independent witness over every durable in the account (ADR 0003), for a
//! CronJob whose failed Job is the alert. One connection: the advisories are counted from
//! before the first look to the start of the second; each look lists every stream and
//! consumer a page at a time; the consumer rules judge each durable as soon as its second look
//! is in; a fault counts only if seen in both. It alerts and never remediates.
//!
//! Memory goes by the page, not by the account: between the looks each durable is kept only
//! as its first judgement and the numbers its row shows, and a judged durable only as its row.

use crate::budget;
use crate::config::GuardConfig;
use crate::deadline::{set_phase, Phase};
use crate::error::Error;
use crate::facts::{Advisories, ConsumerName, Look, Observed, Unknown};
use crate::observe::nats::{Session, SetupError};
use crate::observe::{self, advisories, listing, server};
use crate::report::guard::{self as report, GuardConsumer, GuardReport, Glance, Judged};
use crate::rules::consumer::Judgement;
use crate::rules::guard::{self, Seen};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// The deadline for a whole guard run: both looks, the interval, and a little to answer.
pub fn deadline(config: &GuardConfig) -> Duration {
    config.interval + config.timeout * 2 + Duration::from_secs(1)
}

pub fn run(config: &GuardConfig) -> Result<GuardReport, Error> {
    server::on_network_runtime(looks(config)).map_err(Error::CannotEvaluate)?
}

/// What the guard keeps of a durable between its looks.
struct FirstLook {
    judgement: Judgement,
    glance: Option<Glance>,
}

/// The two looks, the advisories between them, and every durable judged.
async fn looks(config: &GuardConfig) -> Result<GuardReport, Error> {
    set_phase(Phase::AskingJetStream);
    let first_deadline = Instant::now() + config.timeout;
    let session = connect(config, first_deadline).await?;
    let watch = advisories::watch(&session).await;

    // The first look: each durable judged alone and kept as that judgement.
    // Its time is read before the instant the second is timed from: the looks are at least
    // the interval apart, on both clocks.
    let first_ms = observe::now_ms();
    let started = Instant::now();
    // Boxed: the table's slots stay small, and each durable's part is freed as it is judged.
    let mut first: HashMap<ConsumerName, Box<FirstLook>> = HashMap::new();
    let first_look = listing::look(&session, &config.expect, first_deadline, &mut |name, o| {
        budget::allow(budget::GUARD_PER_DURABLE);
        let judgement = guard::first_look(&o, &config.consumer_policy, first_ms);
        let glance = Glance::of(&o);
        first.insert(name, Box::new(FirstLook { judgement, glance }));
    })
    .await
    .map_err(unreachable)?;

    set_phase(Phase::Waiting);
    tokio::time::sleep_until((started + config.interval).into()).await;
    // The losses counted over the interval: what the second look's progress is weighed against.
    let advisories = watch.finish(&session).await;

    // The second look: each durable judged as it comes, and kept as its row.
    set_phase(Phase::AskingJetStream);
    let second_ms = observe::now_ms();
    let judge = Judge {
        config,
        advisories: &advisories,
        first_ms,
        second_ms,
    };
    let mut rows: Vec<Box<GuardConsumer>> = Vec::with_capacity(first.len());
    let second_deadline = Instant::now() + config.timeout;
    let second_look = listing::look(&session, &config.expect, second_deadline, &mut |name, o| {
        let was = match first.remove(&name) {
            Some(was) => Some(was),
            None => first_look.unknown_streams.get(&name.stream).map(|why| {
                let o = Observed::NotJudged(why.clone());
                let judgement = guard::first_look(&o, &config.consumer_policy, first_ms);
                Box::new(FirstLook {
                    judgement,
                    glance: None,
                })
            }),
        };
        budget::allow(budget::GUARD_PER_DURABLE);
        rows.push(Box::new(judge.row(&name, was.as_deref(), Some(&o))));
    })
    .await
    .map_err(|why| {
        Error::CannotEvaluate(format!("the second look at the account failed: {why}"))
    })?;

    // Seen in the first look only: deleted in between, or its stream unlisted in the second.
    for (name, was) in first {
        let second = second_look
            .unknown_streams
            .get(&name.stream)
            .map(|why| Observed::NotJudged(why.clone()));
        rows.push(Box::new(judge.row(&name, Some(&was), second.as_ref())));
    }
    // A stream whose consumers could not be listed in a look is one row, unknown.
    rows.extend(judge.unlisted_streams(&first_look, &second_look).map(Box::new));
    let interval = Duration::from_millis((second_ms - first_ms).max(0) as u64);
    Ok(report::guard(rows, interval, &advisories))
}

async fn connect(config: &GuardConfig, deadline: Instant) -> Result<Session, Error> {
    match Session::connect(&config.servers, &config.auth, "natsprobe-guard", deadline).await {
        Err(e) => Err(e.into()),
        Ok(Err(why)) => Err(unreachable(why)),
        Ok(Ok(session)) => Ok(session),
    }
}

fn unreachable(why: Unknown) -> Error {
    Error::CannotEvaluate(format!("cannot look at the account's JetStream: {why}"))
}

impl From<SetupError> for Error {
    fn from(e: SetupError) -> Error {
        match e {
            SetupError::File {
                setting,
                path,
                problem,
            } => Error::Setting {
                setting,
                path: Some(path),
                problem,
            },
            SetupError::Runtime(m) => Error::CannotEvaluate(m),
        }
    }
}

/// Judges a durable once both looks of it are in.
struct Judge<'a> {
    config: &'a GuardConfig,
    advisories: &'a Advisories,
    first_ms: i64,
    second_ms: i64,
}

impl Judge<'_> {
    fn row(
        &self,
        name: &ConsumerName,
        first: Option<&FirstLook>,
        second: Option<&Observed>,
    ) -> GuardConsumer {
        let losses = match self.advisories {
            Advisories::Counted(counts) => Some(counts.get(name).copied().unwrap_or_default()),
            Advisories::Unavailable(_) => None,
        };
        let ignored = self
            .config
            .ignore
            .iter()
            .any(|i| i == name || (i.durable == "*" && i.stream == name.stream));
        let (verdict, judgement) = guard::judge(
            Seen {
                first: first.map(|f| &f.judgement),
                second,
                losses,
                ignored,
            },
            &self.config.consumer_policy,
            self.first_ms,
            self.second_ms,
        );
        report::row(Judged {
            name,
            looks: [first.and_then(|f| f.glance), second.and_then(Glance::of)],
            second,
            losses,
            expected: self.config.expect.contains(name),
            verdict: &verdict,
            judgement: &judgement,
        })
    }

    /// One row, `STREAM/*`, for each stream whose consumers a look could not list.
    fn unlisted_streams<'a>(
        &'a self,
        first: &'a Look,
        second: &'a Look,
    ) -> impl Iterator<Item = GuardConsumer> + 'a {
        let streams: BTreeSet<&String> = first
            .unknown_streams
            .keys()
            .chain(second.unknown_streams.keys())
            .collect();
        streams
            .into_iter()
            .map(|stream| {
                let name = ConsumerName {
                    stream: stream.clone(),
                    durable: "*".into(),
                };
                let not_judged = |l: &Look| {
                    l.unknown_streams
                        .get(stream)
                        .map(|why| Observed::NotJudged(why.clone()))
                };
                let was = not_judged(first).map(|o| FirstLook {
                    judgement: guard::first_look(&o, &self.config.consumer_policy, self.first_ms),
                    glance: None,
                });
                self.row(&name, was.as_ref(), not_judged(second).as_ref())
            })
    }
}
