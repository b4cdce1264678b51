//! `serve`'s rule over generated timelines: looks (a `--every` cadence; each look healthy,
//! unhealthy, or natsprobe's own trouble, taking up to its deadline and grace; now and then
//! the looks stuck for a while), and a kubelet probing `/livez` and `/selfz` every period and
//! counting `failureThreshold` failures in a row. Each probe calls the real pure rule
//! (`rules::serve::Memory::ended`, `Memory::held`, `answer`) as `serve` does: nothing of it is
//! rebuilt here. Pure: no server, no clock.
//!
//! The promise of docs/serve.md ("the principle"), as properties:
//! 1. natsprobe's own trouble never fails the app: with no unhealthy look, no `/livez` probe
//!    fails, whatever the looks' trouble and stalls;
//! 2. the freshest verdict while it stands, both ways: a probe fails exactly when the last
//!    look the check answered was unhealthy and ended at most `stale_after` ago; with at most
//!    one troubled look in a row and no stall, every probe after the first answer is that
//!    verdict (trouble never resets the kubelet's count), and a healthy look clears a fault
//!    for the next probe (never latched);
//! 3. bounded detection: the app unhealthy from t0 (each look after it unhealthy or, never
//!    twice in a row, troubled) is restarted within the bound below;
//! 4. the watchdog: `/selfz` fails only while no look has ended for longer than
//!    `stale_after`, and never while looks end on their cadence.

use natsprobe::facts::{Ended, Judged};
use natsprobe::rules::serve::{answer, stale_after, Memory, Path};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use std::time::Duration;

/// Milliseconds since `serve` started.
type Ms = u64;
const GRACE: Ms = 1_000;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Healthy,
    Unhealthy,
    /// natsprobe's own trouble: killed, overstayed, unreadable.
    Trouble,
}

#[derive(Debug, Clone)]
struct Timeline {
    every: Ms,
    timeout: Ms,
    /// Each look: how long it took (a troubled one may take its whole deadline and grace),
    /// what it ended in, and how long the looks were stuck before it started.
    looks: Vec<(Ms, Outcome, Ms)>,
    period: Ms,
    offset: Ms,
    threshold: u32,
}

impl Timeline {
    fn stale(&self) -> Ms {
        stale_after(ms(self.every), ms(self.timeout + GRACE)).as_millis() as Ms
    }

    /// When each look ended, and in what: starts every `every`, or when the last ended.
    fn ends(&self) -> Vec<(Ms, Outcome)> {
        let mut start: Ms = 0;
        let mut ends = Vec::new();
        for &(took, outcome, stuck) in &self.looks {
            start += stuck;
            let end = start + took;
            ends.push((end, outcome));
            start = (start + self.every).max(end);
        }
        ends
    }

    /// Each kubelet probe of `path`: when, and whether it passed.
    fn probes(&self, path: Path) -> Vec<(Ms, bool)> {
        let ends = self.ends();
        let last = ends.last().map_or(0, |e| e.0);
        let mut memory = Memory::default();
        let mut next = 0;
        let mut out = Vec::new();
        let mut t = self.offset;
        while t <= last {
            while next < ends.len() && ends[next].0 <= t {
                let (end, outcome) = ends[next];
                memory.ended(look(outcome), ms(end));
                next += 1;
            }
            let held = memory.held(ms(t));
            out.push((t, answer(path, &held, ms(self.stale())).passes()));
            t += self.period;
        }
        out
    }
}

fn look(outcome: Outcome) -> Ended {
    let judged = |code: u8, verdict: &str| {
        Ended::Judged(Judged {
            code,
            verdict: verdict.into(),
            summary: "x".into(),
            json: "{}".into(),
            startup: false,
        })
    };
    match outcome {
        Outcome::Healthy => judged(0, "healthy"),
        Outcome::Unhealthy => judged(1, "unhealthy"),
        Outcome::Trouble => Ended::Trouble("killed".into()),
    }
}

fn ms(ms: Ms) -> Duration {
    Duration::from_millis(ms)
}

/// When the kubelet restarts: the probe completing `threshold` failures in a row.
fn restarted_at(probes: &[(Ms, bool)], threshold: u32) -> Option<Ms> {
    let mut row = 0;
    for &(t, passed) in probes {
        row = if passed { 0 } else { row + 1 };
        if row >= threshold {
            return Some(t);
        }
    }
    None
}

fn config() -> Config {
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(3_000),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}

/// A cadence: `--every`, `--timeout`, the kubelet's period, offset and threshold.
fn cadence() -> impl Strategy<Value = (Ms, Ms, Ms, Ms, u32)> {
    (
        prop::sample::select(vec![1_000, 2_000, 5_000, 10_000]),
        prop::sample::select(vec![200, 800, 2_000, 5_000]),
        prop::sample::select(vec![1_000, 5_000, 10_000, 30_000]),
        0u64..10_000,
        1u32..=5,
    )
}

/// A look's duration: quick, or anywhere up to its deadline and the grace past it.
fn took(timeout: Ms) -> impl Strategy<Value = Ms> {
    prop_oneof![3 => 1u64..20, 1 => 1..=timeout + GRACE]
}

fn timeline(
    outcomes: impl Strategy<Value = Outcome> + Clone + 'static,
    stuck: impl Strategy<Value = Ms> + Clone + 'static,
) -> impl Strategy<Value = Timeline> {
    cadence().prop_flat_map(move |(every, timeout, period, offset, threshold)| {
        prop::collection::vec((took(timeout), outcomes.clone(), stuck.clone()), 1..80).prop_map(
            move |looks| Timeline {
                every,
                timeout,
                looks,
                period,
                offset,
                threshold,
            },
        )
    })
}

fn any_stuck() -> impl Strategy<Value = Ms> + Clone {
    prop_oneof![8 => Just(0u64), 1 => 0u64..120_000]
}

/// No two troubled looks in a row: the troubled ones replaced by healthy where they follow
/// one.
fn at_most_one_trouble_in_a_row(t: &mut Timeline) {
    let mut last = Outcome::Healthy;
    for l in &mut t.looks {
        if l.1 == Outcome::Trouble && last == Outcome::Trouble {
            l.1 = Outcome::Unhealthy;
        }
        last = l.1;
    }
}

proptest! {
    #![proptest_config(config())]

    /// 1: with no unhealthy look, nothing natsprobe's looks do fails the app.
    #[test]
    fn own_trouble_never_fails_the_app(t in timeline(
        prop_oneof![3 => Just(Outcome::Healthy), 1 => Just(Outcome::Trouble)],
        any_stuck(),
    )) {
        for (at, passed) in t.probes(Path::Live) {
            prop_assert!(passed, "/livez failed at {at}");
        }
    }

    /// 2: the freshest verdict while it stands, both ways; one troubled look never breaks
    /// the count; a healthy look clears a fault for the next probe.
    #[test]
    fn the_freshest_verdict_while_it_stands(mut t in timeline(
        prop_oneof![2 => Just(Outcome::Healthy), 2 => Just(Outcome::Unhealthy), 1 => Just(Outcome::Trouble)],
        Just(0u64),
    )) {
        at_most_one_trouble_in_a_row(&mut t);
        let ends = t.ends();
        let first_answer = ends.iter().find(|e| e.1 != Outcome::Trouble).map(|e| e.0);
        for (at, passed) in t.probes(Path::Live) {
            let last = ends.iter().rev().find(|e| e.0 <= at && e.1 != Outcome::Trouble);
            match last {
                Some(&(end, outcome)) => {
                    prop_assert!(at - end <= t.stale(), "the verdict of {end} went stale at {at}");
                    prop_assert_eq!(passed, outcome == Outcome::Healthy, "at {}", at);
                }
                None => {
                    prop_assert!(first_answer.is_none_or(|f| at < f));
                    prop_assert!(passed);
                }
            }
        }
    }

    /// 3: unhealthy from the start (a look at a time, never two troubled in a row), the app
    /// is restarted within two looks' cadence, the slowest look twice, and the kubelet's
    /// failureThreshold periods.
    #[test]
    fn a_fault_is_restarted_in_bounded_time(mut t in timeline(
        prop_oneof![3 => Just(Outcome::Unhealthy), 1 => Just(Outcome::Trouble)],
        Just(0u64),
    )) {
        at_most_one_trouble_in_a_row(&mut t);
        let slowest = t.timeout + GRACE;
        let bound = 2 * t.every.max(slowest) + 2 * slowest + t.offset + u64::from(t.threshold) * t.period;
        // Long enough to reach the bound: quick unhealthy looks after the generated ones.
        while t.ends().last().unwrap().0 < bound {
            t.looks.push((1, Outcome::Unhealthy, 0));
        }
        let restarted = restarted_at(&t.probes(Path::Live), t.threshold);
        prop_assert!(restarted.is_some_and(|r| r <= bound), "restarted at {restarted:?}, bound {bound}");
    }

    /// 4: /selfz fails exactly while no look has ended (nor `serve` started) for longer than
    /// `stale_after`; looks ending on their cadence never fail it.
    #[test]
    fn the_watchdog_fails_only_stuck_looks(t in timeline(
        prop_oneof![Just(Outcome::Healthy), Just(Outcome::Unhealthy), Just(Outcome::Trouble)],
        any_stuck(),
    )) {
        let ends = t.ends();
        for (at, passed) in t.probes(Path::Own) {
            let beat = ends.iter().rev().find(|e| e.0 <= at).map_or(0, |e| e.0);
            prop_assert_eq!(passed, at - beat <= t.stale(), "at {}", at);
        }
        if t.looks.iter().all(|l| l.2 == 0) {
            prop_assert!(t.probes(Path::Own).iter().all(|p| p.1));
        }
    }
}
