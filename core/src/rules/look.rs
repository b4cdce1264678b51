//! A look at the consumers, settled: each consumer's judgement with the check's per-pod policy
//! (a young client gets its window), the freshest evidence for the ones this run could not
//! look at (the fault the last look saw, while fresh), and the look the runs after it go on
//! from. What `commands::check` calls after asking, and what the simulators (the times to
//! restart, the fleet's schedule, the timeline tests) call for the same: no copy of it
//! anywhere. Pure.

use crate::prelude::*;

use super::check::excuse_young_client;
use super::consumer::{self, Judgement, Outcome, Policy, Progress, Window};
use super::remembered::{self, Carried, LastLook};
use crate::facts::{ConsumerName, Sample, Wanted};
use core::time::Duration;

/// One consumer after the look, as the verdict and the report take it.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    pub outcome: Outcome,
    pub window: Option<Window>,
    pub progress: Option<Progress>,
    /// What to keep for the next run (None: keep nothing new).
    pub sample: Option<Sample>,
    /// This run could not look, and reports the fault the last look saw.
    pub carried: Option<Carried>,
}

/// What the look saw besides the consumers, for the next runs to compare with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Context {
    /// The inodes of the connections counted now.
    pub inodes: Vec<u64>,
    /// The deliver subscriptions found (`--own-subscription`), and whether they were looked
    /// for.
    pub wanted: Vec<(Wanted, ConsumerName)>,
    pub own_subscription: bool,
}

/// Settles this run's judgements (`consumer::judge` of each of `names`, in order) against the
/// last look: `client_age` is the holding process's age where a stall needs it
/// (`check::needs_client_age`; None when it was not read, Some(None) when unreadable).
pub fn settle(
    last: Option<&LastLook>,
    names: &[ConsumerName],
    judgements: Vec<Judgement>,
    client_age: Option<Option<Duration>>,
    policy: &Policy,
    context: Context,
    now_ms: i64,
) -> (Vec<Settled>, LastLook) {
    let mut settled: Vec<Settled> = judgements
        .into_iter()
        .map(|j| Settled {
            outcome: excuse_young_client(j.outcome, j.window, client_age),
            window: j.window,
            progress: j.progress,
            sample: j.sample,
            carried: None,
        })
        .collect();
    let seen: Vec<_> = names
        .iter()
        .zip(&settled)
        .map(|(n, s)| (n, &s.outcome))
        .collect();
    let faults = remembered::faults_seen(last, &seen, now_ms);
    let outcomes: Vec<_> = settled
        .iter()
        .map(|s| (&s.outcome, s.sample.as_ref()))
        .collect();
    // The shortest window of the consumers judged: the next look must come inside it.
    let window = settled
        .iter()
        .filter_map(|s| s.window)
        .map(|w| w.duration)
        .min()
        .unwrap_or(consumer::window(policy, None).duration);
    // A look NATS answered for no consumer is no evidence: it refreshes nothing of the last
    // (its time, its calm), only the faults still standing.
    let unanswered = !settled.is_empty()
        && settled
            .iter()
            .all(|s| matches!(s.outcome, Outcome::NotJudged(_)));
    let look = match last {
        Some(last) if unanswered => LastLook {
            faults,
            previous_run_ms: None,
            ..last.clone()
        },
        _ => LastLook {
            at_ms: now_ms,
            calm: faults.is_empty() && remembered::calm(&outcomes),
            inodes: context.inodes,
            wanted: context.wanted,
            own_subscription: context.own_subscription,
            window_ms: window.as_millis() as i64,
            previous_run_ms: None,
            faults,
        },
    };
    // A run that could not look reports the freshest evidence.
    for (name, s) in names.iter().zip(&mut settled) {
        if let Some((outcome, carried)) = remembered::carried(last, name, &s.outcome, now_ms) {
            s.outcome = outcome;
            s.carried = Some(carried);
        }
    }
    (settled, look)
}
