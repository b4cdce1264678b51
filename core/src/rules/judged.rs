//! A check's consumers and subscriptions as judged: what was seen, what the rules (with the
//! pod's policy) made of it, and why it could not be judged, if it could not; each one's
//! health for the verdict.

use super::cause::Standing;
use super::check::ConsumerHealth;
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
            Held::Yes { .. } => ConsumerHealth::Healthy,
            Held::NotJudged(_) if misconfigured(self.standing) => ConsumerHealth::Misconfigured,
            Held::NotJudged(_) if !self.judged_before => ConsumerHealth::NeverJudged,
            Held::NotJudged(_) => ConsumerHealth::NotJudged,
            _ => ConsumerHealth::Unhealthy,
        }
    }
}
