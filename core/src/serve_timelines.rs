//! `serve`'s looks and answers over generated timelines, on its own machine
//! (`rules::serve::Looks`): its scheduler decides when each look starts and with which
//! meaning; each look is healthy, unhealthy, or natsprobe's own trouble, takes up to its
//! deadline and grace, and now and then the looks are stuck for a while; `serve` itself is
//! restarted now and then (its container), going on from the verdict it kept; and a kubelet
//! probes `/livez` (or `/startupz`) and `/selfz` every period, counting `failureThreshold`
//! failures in a row. Nothing of `serve` is rebuilt here.
//!
//! The promise of docs/serve.md ("the principle"), as properties:
//! 1. natsprobe's own trouble never fails the app: with no unhealthy look, no `/livez` probe
//!    fails, whatever the looks' trouble, stalls and restarts;
//! 2. the freshest verdict while it stands, both ways, across restarts of `serve`: a probe
//!    fails exactly when the last look the check answered was unhealthy and ended at most
//!    `stale_after` ago; with at most one troubled look in a row and no stall, every probe
//!    after the first answer is that verdict (trouble never resets the kubelet's count), and
//!    a healthy look clears a fault for the next probe (never latched);
//! 3. bounded detection: the app unhealthy from the start (each look unhealthy or, never twice
//!    in a row, troubled) is restarted within the bound below;
//! 4. the watchdog: `/selfz` fails only while no look has ended (nor `serve` started) for
//!    longer than `stale_after`, and never while looks end on their cadence;
//! 5. `/startupz` (`serve --startup`): fails before the first look ends, then answers the
//!    freshest verdict; the looks carry `--startup`'s meaning until one has passed, and
//!    `--startup`'s meaning never again after.

use crate::facts::{Ended, Judged, Meaning};
use crate::prelude::*;
use crate::rules::serve::{Left, Looks, Path};
use crate::timing::stale_after;
use core::time::Duration;
use proptest::prelude::*;

/// Milliseconds.
type Ms = u64;
/// The wall clock when the timeline starts.
const WALL: i64 = 1_800_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Healthy,
    Unhealthy,
    /// natsprobe's own trouble: killed, overstayed, unreadable.
    Trouble,
}

/// One look: how long it took, what it ended in, how long the looks were stuck before it
/// started, and whether `serve` was restarted (its container) just before it.
#[derive(Debug, Clone, Copy)]
struct Look {
    took: Ms,
    outcome: Outcome,
    stuck: Ms,
    restart: bool,
}

#[derive(Debug, Clone)]
struct Timeline {
    every: Ms,
    timeout: Ms,
    looks: Vec<Look>,
    period: Ms,
    offset: Ms,
    threshold: u32,
    startup: bool,
}

/// One probe: when, whether it passed.
type Probe = (Ms, bool);

/// What one `serve` process did: when it started, and each look's start and end.
#[derive(Debug, Clone, Default)]
struct Played {
    /// Each look: its start, its end, what it ended in, its meaning.
    looks: Vec<(Ms, Ms, Outcome, Meaning)>,
    /// When each `serve` started.
    starts: Vec<Ms>,
    probes: Vec<Probe>,
}

impl Timeline {
    fn stale(&self) -> Ms {
        stale_after(ms(self.every), Looks::limit(ms(self.timeout))).as_millis() as Ms
    }

    /// Plays the looks as `serve`'s scheduler starts them, and the kubelet's probes of `path`
    /// in between, answered from what the looks left.
    fn play(&self, path: Path) -> Played {
        let mut played = Played::default();
        let mut serve_at: Ms = 0;
        played.starts.push(0);
        let mut looks = Looks::new(ms(self.every), ms(self.timeout), self.startup, None, WALL);
        let mut kept: Option<Left> = None;
        let mut free: Ms = 0;
        let mut probe = self.offset;
        for l in &self.looks {
            if l.restart {
                // The container restarts when the last look ended; the new `serve` goes on
                // from the verdict its predecessor kept.
                serve_at = free;
                played.starts.push(serve_at);
                looks = Looks::new(
                    ms(self.every),
                    ms(self.timeout),
                    self.startup,
                    kept.clone(),
                    WALL + serve_at as i64,
                );
            }
            let (at, meaning) = looks.next();
            let start = (serve_at + at.as_millis() as Ms).max(free) + l.stuck;
            let end = start + l.took;
            // The probes while it looks, answered from what the looks left before it ended.
            while probe < end {
                let memory = looks.memory();
                let answer = memory.answer(path, ms(probe.saturating_sub(serve_at)));
                played.probes.push((probe, answer.passes()));
                probe += self.period;
            }
            let ended = look(l.outcome, meaning);
            let judged = match &ended {
                Ended::Judged(j) => Some(j.clone()),
                Ended::Trouble(_) => None,
            };
            looks.ended(ended, ms(start - serve_at), ms(end - serve_at));
            if let Some(judged) = judged {
                kept = Some(Left {
                    judged,
                    at_ms: WALL + end as i64,
                    startup_passed: looks.startup_passed(),
                });
            }
            played.looks.push((start, end, l.outcome, meaning));
            free = end;
        }
        played
    }
}

fn look(outcome: Outcome, meaning: Meaning) -> Ended {
    let judged = |code: u8, verdict: &str| {
        Ended::Judged(Judged {
            code,
            verdict: verdict.into(),
            summary: "x".into(),
            json: "{}".into(),
            startup: meaning == Meaning::Startup,
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
fn restarted_at(probes: &[Probe], threshold: u32) -> Option<Ms> {
    let mut row = 0;
    for &(t, passed) in probes {
        row = if passed { 0 } else { row + 1 };
        if row >= threshold {
            return Some(t);
        }
    }
    None
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
    prop_oneof![3 => 1u64..20, 1 => 1..=Looks::limit(ms(timeout)).as_millis() as Ms]
}

fn timeline(
    outcomes: impl Strategy<Value = Outcome> + Clone + 'static,
    stuck: impl Strategy<Value = Ms> + Clone + 'static,
    restarts: impl Strategy<Value = bool> + Clone + 'static,
) -> impl Strategy<Value = Timeline> {
    (cadence(), any::<bool>()).prop_flat_map(
        move |((every, timeout, period, offset, threshold), startup)| {
            prop::collection::vec(
                (
                    took(timeout),
                    outcomes.clone(),
                    stuck.clone(),
                    restarts.clone(),
                ),
                1..80,
            )
            .prop_map(move |looks| Timeline {
                every,
                timeout,
                looks: looks
                    .into_iter()
                    .map(|(took, outcome, stuck, restart)| Look {
                        took,
                        outcome,
                        stuck,
                        restart,
                    })
                    .collect(),
                period,
                offset,
                threshold,
                startup,
            })
        },
    )
}

fn any_stuck() -> impl Strategy<Value = Ms> + Clone {
    prop_oneof![8 => Just(0u64), 1 => 0u64..120_000]
}

fn some_restarts() -> impl Strategy<Value = bool> + Clone {
    prop_oneof![9 => Just(false), 1 => Just(true)]
}

/// No two troubled looks in a row: the troubled ones replaced by unhealthy where they follow
/// one.
fn at_most_one_trouble_in_a_row(t: &mut Timeline) {
    let mut last = Outcome::Healthy;
    for l in &mut t.looks {
        if l.outcome == Outcome::Trouble && last == Outcome::Trouble {
            l.outcome = Outcome::Unhealthy;
        }
        last = l.outcome;
    }
}

proptest! {
    #![proptest_config(crate::timelines::config())]

    /// 1: with no unhealthy look, nothing natsprobe's looks do fails the app.
    #[test]
    fn own_trouble_never_fails_the_app(t in timeline(
        prop_oneof![3 => Just(Outcome::Healthy), 1 => Just(Outcome::Trouble)],
        any_stuck(),
        some_restarts(),
    )) {
        for (at, passed) in t.play(Path::Live).probes {
            prop_assert!(passed, "/livez failed at {at}");
        }
    }

    /// 2: the freshest verdict while it stands, both ways, across restarts of `serve`; one
    /// troubled look never breaks the count; a healthy look clears a fault for the next probe.
    #[test]
    fn the_freshest_verdict_while_it_stands(mut t in timeline(
        prop_oneof![2 => Just(Outcome::Healthy), 2 => Just(Outcome::Unhealthy), 1 => Just(Outcome::Trouble)],
        Just(0u64),
        some_restarts(),
    )) {
        at_most_one_trouble_in_a_row(&mut t);
        let played = t.play(Path::Live);
        let first_answer = played.looks.iter().find(|l| l.2 != Outcome::Trouble).map(|l| l.1);
        for (at, passed) in played.probes {
            let last = played.looks.iter().rev().find(|l| l.1 <= at && l.2 != Outcome::Trouble);
            match last {
                Some(&(_, end, outcome, _)) => {
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
        Just(false),
    )) {
        at_most_one_trouble_in_a_row(&mut t);
        let slowest = Looks::limit(ms(t.timeout)).as_millis() as Ms;
        let bound = 2 * t.every.max(slowest) + 2 * slowest + t.offset + u64::from(t.threshold) * t.period;
        // Long enough to reach the bound: quick unhealthy looks after the generated ones.
        let quick = Look { took: 1, outcome: Outcome::Unhealthy, stuck: 0, restart: false };
        while t.play(Path::Live).looks.last().unwrap().1 < bound {
            t.looks.push(quick);
        }
        let restarted = restarted_at(&t.play(Path::Live).probes, t.threshold);
        prop_assert!(restarted.is_some_and(|r| r <= bound), "restarted at {restarted:?}, bound {bound}");
    }

    /// 4: /selfz fails exactly while no look has ended (nor `serve` started) for longer than
    /// `stale_after`; looks ending on their cadence never fail it.
    #[test]
    fn the_watchdog_fails_only_stuck_looks(t in timeline(
        prop_oneof![Just(Outcome::Healthy), Just(Outcome::Unhealthy), Just(Outcome::Trouble)],
        any_stuck(),
        some_restarts(),
    )) {
        let played = t.play(Path::Own);
        for &(at, passed) in &played.probes {
            let ended = played.looks.iter().rev().find(|l| l.1 <= at).map_or(0, |l| l.1);
            let started = played.starts.iter().rev().find(|s| **s <= at).copied().unwrap_or(0);
            let beat = ended.max(started);
            prop_assert_eq!(passed, at - beat <= t.stale(), "at {}", at);
        }
        if t.looks.iter().all(|l| l.stuck == 0) {
            prop_assert!(played.probes.iter().all(|p| p.1));
        }
    }

    /// 5: `/startupz` fails before the first look ends, then answers the freshest verdict;
    /// the looks carry `--startup`'s meaning until one has passed, and never after.
    #[test]
    fn startup_waits_for_the_first_look_then_follows_the_verdict(mut t in timeline(
        prop_oneof![2 => Just(Outcome::Healthy), 2 => Just(Outcome::Unhealthy), 1 => Just(Outcome::Trouble)],
        Just(0u64),
        Just(false),
    )) {
        t.startup = true;
        let played = t.play(Path::Startup);
        let first_end = played.looks.first().map(|l| l.1).unwrap_or(Ms::MAX);
        for (at, passed) in &played.probes {
            if *at < first_end {
                prop_assert!(!passed, "/startupz passed at {at}, before the first look");
            }
        }
        let mut passed_once = false;
        for &(_, _, outcome, meaning) in &played.looks {
            prop_assert_eq!(meaning == Meaning::Startup, !passed_once);
            passed_once |= outcome == Outcome::Healthy;
        }
    }
}

/// A restart of `serve` while the verdict its predecessor kept still stands answers with it;
/// past `stale_after` it is not believed, nor is one from the wall clock's future.
#[test]
fn a_restarted_serve_answers_with_the_verdict_it_kept() {
    let every = Duration::from_secs(10);
    let timeout = Duration::from_millis(800);
    let stale = stale_after(every, Looks::limit(timeout));
    let unhealthy = Left {
        judged: Judged {
            code: 1,
            verdict: "unhealthy".into(),
            summary: "x".into(),
            json: "{}".into(),
            startup: false,
        },
        at_ms: WALL,
        startup_passed: true,
    };
    let at = |age: i64| Looks::new(every, timeout, true, Some(unhealthy.clone()), WALL + age);
    let fresh = at(5_000);
    assert!(!fresh.memory().answer(Path::Live, Duration::ZERO).passes());
    assert!(fresh.startup_passed());
    assert_eq!(fresh.next().1, Meaning::Live);
    let stale_one = at(stale.as_millis() as i64 + 1);
    assert!(stale_one
        .memory()
        .answer(Path::Live, Duration::ZERO)
        .passes());
    assert_eq!(stale_one.next().1, Meaning::Startup);
    assert!(!stale_one.startup_passed());
    let future = at(-1);
    assert!(future.memory().answer(Path::Live, Duration::ZERO).passes());
    assert!(!future.startup_passed());
}
