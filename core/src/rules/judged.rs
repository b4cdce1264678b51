//! A check's consumers and subscriptions as judged: what was seen, what the rules (with the
//! pod's policy) made of it, and why it could not be judged, if it could not; each one's
//! health for the verdict.

use super::answers;
use super::cause::Standing;
use super::check::{ConsumerHealth, Reason};
use super::consumer::{Healthy, Outcome, Progress, Window};
use super::remembered::{Carried, Found};
use super::subscription::Held;
use crate::facts::{ConsumerName, ConsumerSeen, Unknown, Wanted};

/// A judgement that may say the server could not be asked.
pub(crate) trait NotJudged {
    fn not_judged(&self) -> Option<&Unknown>;
}

impl NotJudged for Outcome {
    fn not_judged(&self) -> Option<&Unknown> {
        match self {
            Outcome::NotJudged(why) => Some(why),
            _ => None,
        }
    }
}

impl NotJudged for Held {
    fn not_judged(&self) -> Option<&Unknown> {
        match self {
            Held::NotJudged(why) => Some(why),
            _ => None,
        }
    }
}

/// One consumer: what was seen, and what the rules (with the pod's policy) made of it.
#[derive(Debug, Clone)]
pub struct JudgedConsumer {
    pub seen: ConsumerSeen,
    pub outcome: Outcome,
    pub window: Option<Window>,
    /// How it moved since the previous sample; None without one.
    pub progress: Option<Progress>,
    /// Why it could not be judged (or compared), and for how long; None when it was.
    pub standing: Option<Standing>,
    /// This run could not look, and reports the fault the last look saw (`outcome`).
    pub carried: Option<Carried>,
}

impl JudgedConsumer {
    pub fn health(&self) -> ConsumerHealth {
        match self.outcome {
            Outcome::Unhealthy(_) => ConsumerHealth::Unhealthy,
            _ if misconfigured(self.standing) => ConsumerHealth::Misconfigured,
            Outcome::Healthy(
                Healthy::ServerNotDelivering { .. } | Healthy::RestartDidNotHelp { .. },
            ) => ConsumerHealth::NotThePods,
            Outcome::Healthy(_) => ConsumerHealth::Healthy,
            Outcome::NotJudged(_) if never_judged(self.standing) => ConsumerHealth::NeverJudged,
            Outcome::NotJudged(_) => ConsumerHealth::NotJudged,
        }
    }
}

fn misconfigured(standing: Option<Standing>) -> bool {
    standing.is_some_and(|s| s.is_configuration_error())
}

fn never_judged(standing: Option<Standing>) -> bool {
    standing.is_none_or(|s| !s.judged_before)
}

/// One subscription this pod's connection must hold, and whether it does.
#[derive(Debug, Clone)]
pub struct JudgedSubscription {
    pub wanted: Wanted,
    /// A pull consumer's part (`--own-subscription`): the pulls of the consumer.
    pub pull: bool,
    /// The consumer whose deliver subscription it is (`--own-subscription`).
    pub consumer: Option<ConsumerName>,
    pub held: Held,
    /// This run could not look, and reports what the last look saw.
    pub carried: Option<Carried>,
    /// Why it could not be judged, and for how long; None when it was.
    pub standing: Option<Standing>,
    /// How this run found the pod's connection at the server; None when it never got that far.
    pub found: Option<Found>,
    /// This pod's connection was found at the server by an earlier run, with this
    /// configuration on these servers (a connection is remembered).
    pub judged_before: bool,
}

impl JudgedSubscription {
    pub fn health(&self) -> ConsumerHealth {
        match &self.held {
            Held::Yes { .. } | Held::Pulls { .. } => ConsumerHealth::Healthy,
            Held::NotJudged(_) if misconfigured(self.standing) => ConsumerHealth::Misconfigured,
            Held::NotJudged(_) if !self.judged_before => ConsumerHealth::NeverJudged,
            Held::NotJudged(_) => ConsumerHealth::NotJudged,
            _ => ConsumerHealth::Unhealthy,
        }
    }
}

/// Whether NATS did not answer for a consumer or subscription this run could not judge
/// (`answers::silent`): what `--when-server-down fail` fails (`rules::check::decide`).
pub fn nats_silent(consumers: &[JudgedConsumer], subscriptions: &[JudgedSubscription]) -> bool {
    consumers
        .iter()
        .filter_map(|c| c.outcome.not_judged())
        .chain(subscriptions.iter().filter_map(|s| s.held.not_judged()))
        .any(answers::silent)
}

/// Why a verdict could not judge, in one word (the JSON's `not_judged`, and `serve`'s cause of
/// a look not judged, `rules::serve::CAUSES`): `server_down` without a connection while NATS
/// does not answer, else the `not_judged` word of the first consumer, then subscription, NATS
/// could not answer for; None when the verdict judged.
pub fn not_judged(
    reason: Reason,
    consumers: &[JudgedConsumer],
    subscriptions: &[JudgedSubscription],
) -> Option<&'static str> {
    let unjudged =
        |h: ConsumerHealth| matches!(h, ConsumerHealth::NotJudged | ConsumerHealth::NeverJudged);
    let word = |why: &Unknown| answers::meaning(why).word;
    match reason {
        Reason::ServerDown => Some("server_down"),
        Reason::ConsumerNotJudged => consumers
            .iter()
            .filter(|c| unjudged(c.health()))
            .find_map(|c| c.outcome.not_judged().map(word))
            .or_else(|| {
                subscriptions
                    .iter()
                    .filter(|s| unjudged(s.health()))
                    .find_map(|s| s.held.not_judged().map(word))
            })
            // NATS answered, and a restart cannot help: the consumer's own cause.
            .or_else(|| {
                consumers
                    .iter()
                    .filter(|c| c.health() == ConsumerHealth::NotThePods)
                    .find_map(|c| c.standing.map(|s| s.cause.as_str()))
            })
            .or(Some("failed")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Observed;
    use crate::rules::consumer::Healthy;

    fn consumer(why: Option<Unknown>) -> JudgedConsumer {
        let outcome = why.map_or(Outcome::Healthy(Healthy::Idle), Outcome::NotJudged);
        JudgedConsumer {
            seen: ConsumerSeen {
                name: crate::world::name("S", "D"),
                observed: Observed::NotJudged(Unknown::Deadline),
                previous: None,
                state_problem: None,
            },
            outcome,
            window: None,
            progress: None,
            standing: None,
            carried: None,
        }
    }

    fn subscription(held: Held) -> JudgedSubscription {
        JudgedSubscription {
            wanted: Wanted {
                subject: "events.>".into(),
                queue: None,
            },
            pull: false,
            consumer: None,
            held,
            carried: None,
            standing: None,
            found: None,
            judged_before: true,
        }
    }

    /// A subscription NATS could not answer for is "never judged" (which `--startup` fails)
    /// only until a run has found this pod's connection at the server; after that it is "not
    /// judged", which passes.
    #[test]
    fn a_subscription_is_never_judged_until_its_connection_was_found() {
        let unknown = |judged_before| JudgedSubscription {
            judged_before,
            ..subscription(Held::NotJudged(Unknown::Deadline))
        };
        assert_eq!(unknown(false).health(), ConsumerHealth::NeverJudged);
        assert_eq!(unknown(true).health(), ConsumerHealth::NotJudged);
        let held = subscription(Held::Yes {
            by: "10.0.0.2:40000".parse().unwrap(),
        });
        assert_eq!(held.health(), ConsumerHealth::Healthy);
    }

    /// The first consumer NATS could not answer for names the word, then the first
    /// subscription; "failed" when neither says; nothing when the verdict judged.
    #[test]
    fn the_word_is_the_first_unjudged_consumers_then_subscriptions() {
        let cannot_see = || Held::NotJudged(Unknown::NotListed("n1".into()));
        let held = || Held::Yes {
            by: "10.0.0.2:40000".parse().unwrap(),
        };
        let word = |c: &[JudgedConsumer], s: &[JudgedSubscription]| {
            not_judged(Reason::ConsumerNotJudged, c, s)
        };
        let timeout = [consumer(None), consumer(Some(Unknown::Deadline))];
        let subs = [subscription(held()), subscription(cannot_see())];
        assert_eq!(word(&timeout, &subs), Some("timeout"));
        assert_eq!(word(&timeout[..1], &subs), Some("cannot_see"));
        assert_eq!(word(&timeout[..1], &subs[..1]), Some("failed"));
        assert_eq!(
            not_judged(Reason::ServerDown, &[], &[]),
            Some("server_down")
        );
        assert_eq!(not_judged(Reason::Connected, &timeout, &subs), None);
    }
}
