//! A check's consumers and subscriptions as judged: what was seen, what the rules (with the
//! pod's policy) made of it, and why it could not be judged, if it could not; each one's
//! health for the verdict.

use super::answers;
use super::cause::Standing;
use super::check::{ConsumerHealth, Reason};
use super::consumer::{Outcome, Progress, Window};
use super::remembered::{Carried, Found};
use super::subscription::Held;
use crate::facts::{ConsumerName, ConsumerSeen, Wanted};

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
    match reason {
        Reason::ServerDown => Some("server_down"),
        Reason::ConsumerNotJudged => consumers
            .iter()
            .filter(|c| unjudged(c.health()))
            .find_map(|c| match &c.outcome {
                Outcome::NotJudged(why) => Some(answers::meaning(why).word),
                _ => None,
            })
            .or_else(|| {
                subscriptions
                    .iter()
                    .filter(|s| unjudged(s.health()))
                    .find_map(|s| match &s.held {
                        Held::NotJudged(why) => Some(answers::meaning(why).word),
                        _ => None,
                    })
            })
            .or(Some("failed")),
        _ => None,
    }
}
