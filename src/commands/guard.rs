//! `guard`: the independent witness over every durable in the account (ADR 0003), for a
//! CronJob whose failed Job is the alert. One connection: the advisories are counted from
//! before the first look to after the second; each look lists every stream and consumer at
//! once; the consumer rules judge each durable across both looks; a fault counts only if seen
//! in both. It alerts and never remediates.

use crate::config::GuardConfig;
use crate::deadline::{set_phase, Phase};
use crate::error::Error;
use crate::facts::{Advisories, ConsumerName, Listing, Observed, Unknown};
use crate::observe::nats::{Session, SetupError};
use crate::observe::{self, advisories, listing, server};
use crate::report::guard::{GuardReport, GuardRow};
use crate::rules::guard::{self, Seen};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The deadline for a whole guard run: both looks, the interval, and a little to answer.
pub fn deadline(config: &GuardConfig) -> Duration {
    config.interval + config.timeout * 2 + Duration::from_secs(1)
}

pub fn run(config: &GuardConfig) -> Result<GuardReport, Error> {
    let (first, second, advisories, jetstream) =
        server::on_network_runtime(looks(config)).map_err(Error::CannotEvaluate)??;
    let interval = Duration::from_millis((second.at_ms - first.at_ms).max(0) as u64);
    let rows = rows(config, &first, &second, &advisories);
    Ok(crate::report::guard::guard(
        &rows,
        interval,
        &advisories,
        jetstream.as_deref(),
    ))
}

/// The two looks, the advisories between them, and which JetStream was judged when it has a
/// domain or was named.
async fn looks(
    config: &GuardConfig,
) -> Result<(Listing, Listing, Advisories, Option<String>), Error> {
    let unreachable = |why: Unknown| {
        Error::CannotEvaluate(format!("cannot look at the account's JetStream: {why}"))
    };
    set_phase(Phase::AskingJetStream);
    let first_deadline = Instant::now() + config.timeout;
    let session = match Session::connect(
        &config.servers,
        &config.auth,
        &config.js_api,
        "natsprobe-guard",
        first_deadline,
    )
    .await
    {
        Err(SetupError::File {
            setting,
            path,
            problem,
        }) => {
            return Err(Error::Setting {
                setting,
                path: Some(path),
                problem,
            })
        }
        Err(SetupError::Runtime(m)) => return Err(Error::CannotEvaluate(m)),
        Ok(Err(why)) => return Err(unreachable(why)),
        Ok(Ok(session)) => session,
    };
    let jetstream = match config.js_api.is_local() {
        true => session
            .server_domain()
            .map(|d| format!("JetStream domain {d} (the server's own; --js-domain names another)")),
        false => Some(config.js_api.to_string()),
    };
    let watch = advisories::watch(&session, first_deadline).await;
    // The first look's time is read before the instant the second is timed from: the looks
    // are at least the interval apart, on both clocks.
    let first_ms = observe::now_ms();
    let started = Instant::now();
    let first = listing::look(&session, &config.expect, first_ms, first_deadline)
        .await
        .map_err(unreachable)?;
    set_phase(Phase::Waiting);
    tokio::time::sleep_until((started + config.interval).into()).await;
    set_phase(Phase::AskingJetStream);
    let second_ms = observe::now_ms();
    let second = listing::look(
        &session,
        &config.expect,
        second_ms,
        Instant::now() + config.timeout,
    )
    .await
    .map_err(|why| {
        Error::CannotEvaluate(format!("the second look at the account failed: {why}"))
    })?;
    let advisories = watch.finish(&session).await;
    Ok((first, second, advisories, jetstream))
}

/// Every durable either look saw or asked for, and every stream one could not list, judged.
fn rows(
    config: &GuardConfig,
    first: &Listing,
    second: &Listing,
    advisories: &Advisories,
) -> Vec<GuardRow> {
    let mut names: BTreeSet<ConsumerName> = first
        .consumers
        .keys()
        .chain(second.consumers.keys())
        .cloned()
        .collect();
    // A stream whose consumers could not be listed in a look is one row, unknown.
    let unlisted: BTreeSet<&String> = first
        .unknown_streams
        .keys()
        .chain(second.unknown_streams.keys())
        .collect();
    for stream in &unlisted {
        names.insert(ConsumerName {
            stream: (*stream).clone(),
            durable: "*".into(),
        });
    }
    let ignored = |n: &ConsumerName| {
        config
            .ignore
            .iter()
            .any(|i| i == n || (i.durable == "*" && i.stream == n.stream))
    };
    let observed = |l: &Listing, n: &ConsumerName| -> Option<Observed> {
        match (l.consumers.get(n), l.unknown_streams.get(&n.stream)) {
            (Some(o), _) => Some(o.clone()),
            (None, Some(why)) => Some(Observed::NotJudged(why.clone())),
            (None, None) if unlisted.contains(&n.stream) && n.durable == "*" => None,
            (None, None) => None,
        }
    };
    names
        .into_iter()
        .map(|name| {
            let (a, b) = (observed(first, &name), observed(second, &name));
            let losses = match advisories {
                Advisories::Counted(counts) => Some(counts.get(&name).copied().unwrap_or_default()),
                Advisories::Unavailable(_) => None,
            };
            let expected = config.expect.contains(&name);
            let (verdict, judgement) = guard::judge(
                Seen {
                    first: a.as_ref(),
                    second: b.as_ref(),
                    losses,
                    expected,
                    ignored: ignored(&name),
                },
                &config.consumer_policy,
                first.at_ms,
                second.at_ms,
            );
            GuardRow {
                name,
                first: a,
                second: b,
                losses,
                expected,
                verdict,
                judgement,
            }
        })
        .collect()
}
