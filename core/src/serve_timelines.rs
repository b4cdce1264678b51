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
//!    `--startup`'s meaning never again after;
//! 6. `--exit-unhealthy` (restart in place): `serve` exits only when the last
//!    `--failure-threshold` looks it judged since it started were all unhealthy live looks,
//!    so never with no unhealthy look, whatever natsprobe's own trouble, and never latched
//!    across its restarts; and the app unhealthy from the start makes it exit in bounded
//!    time.

use crate::facts::{Ended, Judged, Meaning, ProbePath};
use crate::prelude::*;
use crate::rules::serve::{ExitUnhealthy, Left, Looks};
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
    /// `--exit-unhealthy` with this `--failure-threshold`.
    exit_after: Option<u32>,
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
    /// When `serve` exited (`--exit-unhealthy`), each time restarting the pod in place.
    exits: Vec<Ms>,
}

impl Timeline {
    fn stale(&self) -> Ms {
        stale_after(ms(self.every), Looks::limit(ms(self.timeout))).as_millis() as Ms
    }

    /// Plays the looks as `serve`'s scheduler starts them, and the kubelet's probes of `path`
    /// in between, answered from what the looks left.
    fn play(&self, path: ProbePath) -> Played {
        let mut played = Played::default();
        let mut serve_at: Ms = 0;
        played.starts.push(0);
        let serve = |kept: Option<Left>, at: Ms| {
            let looks = Looks::new(
                ms(self.every),
                ms(self.timeout),
                self.startup,
                kept,
                WALL + at as i64,
            );
            match self.exit_after {
                Some(after) => looks.exiting(ExitUnhealthy { code: 88, after }),
                None => looks,
            }
        };
        let mut looks = serve(None, 0);
        let mut kept: Option<Left> = None;
        let mut free: Ms = 0;
        let mut probe = self.offset;
        for l in &self.looks {
            if l.restart {
                // The container restarts when the last look ended; the new `serve` goes on
                // from the verdict its predecessor kept.
                serve_at = free;
                played.starts.push(serve_at);
                looks = serve(kept.clone(), serve_at);
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
            // Kept before it is the answer, as `serve` keeps it.
            if let Some(left) = looks.to_keep(&ended, WALL + end as i64) {
                kept = Some(left);
            }
            looks.ended(ended, ms(start - serve_at), ms(end - serve_at));
            played.looks.push((start, end, l.outcome, meaning));
            free = end;
            if let Some(code) = looks.exit() {
                // `serve` exits; the kubelet restarts the pod's containers in place at once,
                // its volumes (the kept verdict) with them.
                assert_eq!(code, 88);
                played.exits.push(end);
                serve_at = end;
                played.starts.push(serve_at);
                looks = serve(kept.clone(), serve_at);
            }
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
            ..Judged::default()
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
                exit_after: None,
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
        for (at, passed) in t.play(ProbePath::Live).probes {
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
        let played = t.play(ProbePath::Live);
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
        while t.play(ProbePath::Live).looks.last().unwrap().1 < bound {
            t.looks.push(quick);
        }
        let restarted = restarted_at(&t.play(ProbePath::Live).probes, t.threshold);
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
        let played = t.play(ProbePath::Own);
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
        let played = t.play(ProbePath::Startup);
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

proptest! {
    #![proptest_config(crate::timelines::config())]

    /// 6: an exit rests on `--failure-threshold` unhealthy live looks of this `serve`, the
    /// last it judged; nothing else makes one.
    #[test]
    fn serve_exits_only_on_unhealthy_looks_in_a_row(mut t in timeline(
        prop_oneof![2 => Just(Outcome::Healthy), 3 => Just(Outcome::Unhealthy), 1 => Just(Outcome::Trouble)],
        any_stuck(),
        some_restarts(),
    ), after in 1u32..=5) {
        t.exit_after = Some(after);
        let played = t.play(ProbePath::Live);
        for &e in &played.exits {
            let began = played.starts.iter().copied().filter(|s| *s < e).max().unwrap();
            let judged: Vec<_> = played
                .looks
                .iter()
                .filter(|l| l.0 >= began && l.1 <= e && l.2 != Outcome::Trouble)
                .collect();
            prop_assert!(judged.len() >= after as usize, "exit at {e} after {} judged looks", judged.len());
            for l in &judged[judged.len() - after as usize..] {
                prop_assert_eq!(l.2, Outcome::Unhealthy, "exit at {} after a look ending {}", e, l.1);
                prop_assert_eq!(l.3, Meaning::Live);
            }
        }
    }

    /// 6: with no unhealthy look, `serve` never exits, whatever its looks' trouble, stalls and
    /// restarts.
    #[test]
    fn own_trouble_never_exits(mut t in timeline(
        prop_oneof![3 => Just(Outcome::Healthy), 1 => Just(Outcome::Trouble)],
        any_stuck(),
        some_restarts(),
    ), after in 1u32..=5) {
        t.exit_after = Some(after);
        prop_assert!(t.play(ProbePath::Live).exits.is_empty());
    }

    /// 6: unhealthy from the start (never two troubled looks in a row), `serve` exits within
    /// twice `--failure-threshold` looks' cadence and the slowest look. (With `--startup`
    /// it never does: no look passes startup, and a startup look is the startupProbe's.)
    #[test]
    fn a_fault_exits_in_bounded_time(mut t in timeline(
        prop_oneof![3 => Just(Outcome::Unhealthy), 1 => Just(Outcome::Trouble)],
        Just(0u64),
        Just(false),
    ), after in 1u32..=5) {
        at_most_one_trouble_in_a_row(&mut t);
        t.exit_after = Some(after);
        t.startup = false;
        let slowest = Looks::limit(ms(t.timeout)).as_millis() as Ms;
        let bound = 2 * u64::from(after) * t.every.max(slowest) + slowest;
        let quick = Look { took: 1, outcome: Outcome::Unhealthy, stuck: 0, restart: false };
        // Long enough to exit or to reach the bound.
        while t.play(ProbePath::Live).exits.is_empty() && t.play(ProbePath::Live).looks.last().unwrap().1 < bound {
            t.looks.push(quick);
        }
        let exited = t.play(ProbePath::Live).exits.first().copied();
        prop_assert!(exited.is_some_and(|e| e <= bound), "exited at {exited:?}, bound {bound}");
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
            ..Judged::default()
        },
        at_ms: WALL,
        startup_passed: true,
    };
    let at = |age: i64| Looks::new(every, timeout, true, Some(unhealthy.clone()), WALL + age);
    let fresh = at(5_000);
    assert!(!fresh
        .memory()
        .answer(ProbePath::Live, Duration::ZERO)
        .passes());
    assert!(fresh.startup_passed());
    assert_eq!(fresh.next().1, Meaning::Live);
    let stale_one = at(stale.as_millis() as i64 + 1);
    assert!(stale_one
        .memory()
        .answer(ProbePath::Live, Duration::ZERO)
        .passes());
    assert_eq!(stale_one.next().1, Meaning::Startup);
    assert!(!stale_one.startup_passed());
    let future = at(-1);
    assert!(future
        .memory()
        .answer(ProbePath::Live, Duration::ZERO)
        .passes());
    assert!(!future.startup_passed());
}
