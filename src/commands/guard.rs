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
use crate::observe::{self, advisories, listing, nats::Session, server};
use crate::report::guard::{self as report, Glance, GuardConsumer, GuardReport, Judged};
use crate::rules::consumer::{self, Judgement};
use crate::rules::guard::{self, Seen};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// The name the guard's connection goes by in the server's connection list.
const NAME: &str = "natsprobe-guard";

/// The deadline for a whole guard run: both looks, the interval, and a little to answer.
pub fn deadline(config: &GuardConfig) -> Duration {
    config.interval + config.timeout * 2 + natsprobe_core::timing::GUARD_TO_ANSWER
}

/// A look's deadline, from now.
fn look_deadline(config: &GuardConfig) -> Instant {
    Instant::now() + config.timeout
}

pub fn run(config: &GuardConfig) -> Result<GuardReport, Error> {
    server::on_network_runtime(looks(config)).map_err(Error::CannotEvaluate)?
}

/// What the guard keeps of a durable between its looks.
struct FirstLook {
    judgement: Judgement,
    glance: Option<Glance>,
}

/// What the first look keeps of a durable it saw (or whose stream it could not list).
fn kept(observed: &Observed, config: &GuardConfig, first_ms: i64) -> FirstLook {
    FirstLook {
        judgement: consumer::judge(observed, None, &config.consumer_policy, first_ms),
        glance: Glance::of(observed),
    }
}

/// A look's durables not yet judged, by name. Boxed: the table's slots stay small, and each
/// durable's part is freed as it is judged.
type FirstLooks = HashMap<ConsumerName, Box<FirstLook>>;

/// The two looks, the advisories between them, and every durable judged.
async fn looks(config: &GuardConfig) -> Result<GuardReport, Error> {
    set_phase(Phase::AskingJetStream);
    let first_deadline = look_deadline(config);
    let (servers, auth, api) = (&config.servers, &config.auth, &config.js_api);
    let session = Session::connect(servers, auth, api, NAME, first_deadline, false)
        .await?
        .map_err(unreachable)?;
    let jetstream = match config.js_api.is_local() {
        true => session
            .server_domain()
            .map(|d| format!("JetStream domain {d} (the server's own; --js-domain names another)")),
        false => Some(config.js_api.to_string()),
    };
    let watch = advisories::watch(&session, first_deadline).await;

    // Its time is read before the instant the second is timed from: the looks are at least
    // the interval apart, on both clocks.
    let first_ms = observe::now_ms();
    let started = Instant::now();
    let (first, first_look) = first_look(config, &session, first_ms, first_deadline).await?;

    set_phase(Phase::Waiting);
    tokio::time::sleep_until((started + config.interval).into()).await;
    // The losses counted over the interval: what the second look's progress is weighed against.
    let advisories = watch.finish(&session).await;

    set_phase(Phase::AskingJetStream);
    let second_ms = observe::now_ms();
    let judge = Judge {
        config,
        advisories: &advisories,
        first_ms,
        second_ms,
    };
    let (mut rows, second_look) = second_look(&judge, &session, first, &first_look).await?;
    // A stream whose consumers could not be listed in a look is one row, unknown.
    rows.extend(
        judge
            .unlisted_streams(&first_look, &second_look)
            .map(Box::new),
    );
    Ok(report::guard(
        rows,
        guard::interval(first_ms, second_ms),
        &advisories,
        jetstream.as_deref(),
    ))
}

/// The first look: each durable judged alone and kept as that judgement.
async fn first_look(
    config: &GuardConfig,
    session: &Session,
    first_ms: i64,
    deadline: Instant,
) -> Result<(FirstLooks, Look), Error> {
    let mut first: FirstLooks = HashMap::new();
    let look = listing::look(session, &config.expect, deadline, &mut |name, o| {
        budget::allow(budget::GUARD_PER_DURABLE);
        first.insert(name, Box::new(kept(&o, config, first_ms)));
    })
    .await
    .map_err(unreachable)?;
    Ok((first, look))
}

/// The second look: each durable judged as it comes, and kept as its row; then the durables
/// seen in the first look only.
async fn second_look(
    judge: &Judge<'_>,
    session: &Session,
    mut first: FirstLooks,
    first_look: &Look,
) -> Result<(Vec<Box<GuardConsumer>>, Look), Error> {
    let config = judge.config;
    let mut rows: Vec<Box<GuardConsumer>> = Vec::with_capacity(first.len());
    let second_deadline = look_deadline(judge.config);
    let second_look = listing::look(session, &config.expect, second_deadline, &mut |name, o| {
        let was = first.remove(&name).or_else(|| {
            let unlisted = not_listed(first_look, &name.stream)?;
            Some(Box::new(kept(&unlisted, config, judge.first_ms)))
        });
        budget::allow(budget::GUARD_PER_DURABLE);
        rows.push(Box::new(judge.row(&name, was.as_deref(), Some(&o))));
    })
    .await
    .map_err(|why| {
        Error::CannotEvaluate(format!("the second look at the account failed: {why}"))
    })?;

    // Seen in the first look only: deleted in between, or its stream unlisted in the second.
    for (name, was) in first {
        let second = not_listed(&second_look, &name.stream);
        rows.push(Box::new(judge.row(&name, Some(&was), second.as_ref())));
    }
    Ok((rows, second_look))
}

fn unreachable(why: Unknown) -> Error {
    Error::CannotEvaluate(format!("cannot look at the account's JetStream: {why}"))
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
        let ignored = guard::ignored(&self.config.ignore, name);
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
        streams.into_iter().map(|stream| {
            let name = ConsumerName {
                stream: stream.clone(),
                durable: "*".into(),
            };
            let was = not_listed(first, stream).map(|o| kept(&o, self.config, self.first_ms));
            self.row(&name, was.as_ref(), not_listed(second, stream).as_ref())
        })
    }
}

/// Why a look could not list a stream's consumers, as a consumer's observation.
fn not_listed(look: &Look, stream: &str) -> Option<Observed> {
    let why = look.unknown_streams.get(stream)?;
    Some(Observed::NotJudged(why.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Command;
    use crate::facts::Losses;
    use std::collections::BTreeMap;

    fn config(extra: &[&str]) -> GuardConfig {
        let mut argv = vec!["natsprobe", "guard", "--server", "nats://n:4222"];
        argv.extend_from_slice(extra);
        let Command::Guard(args) = crate::cli::parse(&crate::cli::argv(&argv)).unwrap().command
        else {
            panic!("not the guard")
        };
        args.validate(&|_| None).unwrap()
    }

    fn name(s: &str, d: &str) -> ConsumerName {
        ConsumerName {
            stream: s.into(),
            durable: d.into(),
        }
    }

    /// The whole run's deadline covers both looks, the interval between and a second; each
    /// look's is its `--timeout` from when it begins.
    #[test]
    fn the_deadlines_cover_both_looks_and_the_interval() {
        let c = config(&["--interval", "30s", "--timeout", "4s"]);
        assert_eq!(deadline(&c), Duration::from_secs(39));
        let before = Instant::now();
        let at = look_deadline(&c);
        assert!(
            at >= before + Duration::from_secs(4) && at <= Instant::now() + Duration::from_secs(4)
        );
        let e = unreachable(Unknown::Credentials);
        assert!(format!("{e:?}").contains("cannot look at the account's JetStream"));
    }

    /// A row: ignored where `--ignore` names it, expected where `--expect` does, its losses
    /// from the advisories (none counted: zero; not counted at all: unknown).
    #[test]
    fn a_row_says_ignored_expected_and_losses() {
        let c = config(&["--ignore", "A/x,B/*", "--expect", "C/z"]);
        let counted = Advisories::Counted(BTreeMap::from([(
            name("C", "z"),
            Losses {
                deleted_unacked: 3,
                exhausted: 0,
                terminated_by_client: 0,
            },
        )]));
        let judge = Judge {
            config: &c,
            advisories: &counted,
            first_ms: 0,
            second_ms: 60_000,
        };
        let missing = Observed::ConsumerMissing;
        for (n, verdict) in [(name("A", "x"), "ignored"), (name("B", "y"), "ignored")] {
            assert_eq!(judge.row(&n, None, Some(&missing)).verdict, verdict);
        }
        let expected = judge.row(&name("C", "z"), None, Some(&missing));
        assert!(expected.expected);
        assert_eq!(expected.losses.map(|l| l.deleted_unacked), Some(3));
        let other = judge.row(&name("D", "w"), None, Some(&missing));
        assert!(!other.expected);
        assert_eq!(other.losses.map(|l| l.deleted_unacked), Some(0));
        let unavailable = Advisories::Unavailable("not permitted".into());
        let blind = Judge {
            advisories: &unavailable,
            ..judge
        };
        assert_eq!(
            blind.row(&name("D", "w"), None, Some(&missing)).losses,
            None
        );
    }

    /// A stream whose consumers a look could not list is one row, `STREAM/*`, unknown.
    #[test]
    fn a_stream_a_look_could_not_list_is_one_unknown_row() {
        let c = config(&[]);
        let none = Advisories::Counted(BTreeMap::new());
        let judge = Judge {
            config: &c,
            advisories: &none,
            first_ms: 0,
            second_ms: 60_000,
        };
        let mut first = Look::default();
        first
            .unknown_streams
            .insert("S".into(), Unknown::TemporarilyUnavailable);
        let mut second = Look::default();
        second
            .unknown_streams
            .insert("T".into(), Unknown::NotReported);
        let rows: Vec<GuardConsumer> = judge.unlisted_streams(&first, &second).collect();
        let names: Vec<String> = rows
            .iter()
            .map(|r| format!("{}/{}", r.stream, r.durable))
            .collect();
        assert_eq!(names, ["S/*", "T/*"]);
        assert!(rows.iter().all(|r| r.verdict == "unknown"), "{rows:?}");
        assert_eq!(
            judge
                .unlisted_streams(&Look::default(), &Look::default())
                .count(),
            0
        );
    }
}
