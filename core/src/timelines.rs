//! The principles over generated timelines, proven on the check's own run (`run::Run`),
//! driven through a simulated pod and NATS (`world::World`): consumers (acking at a pace,
//! serialized with a backlog, idle, paused, recreated, wedged for a while or for good, losing
//! messages to retention, unbound, deleted, left unanswered while the others are answered),
//! the pod's deliver subscriptions and pull parts (held, or deaf), what NATS does to each run
//! that asks it (on time, every kind of not-judged answer, a restarted server), the client's connections (replaced, the client restarted young), the
//! runs' cadence (a period with jitter, a stalled node, runs further apart than the window,
//! a second probe of the same check sharing its state file) and a kubelet counting
//! `failureThreshold` failures in a row. Nothing of the run is rebuilt here.
//!
//! The promises of docs/checks.md ("the principles"), each a property:
//! 1. no false restart: consumers that ack at least once every (window − 2 × ack_wait) while
//!    work waits, and a pod that holds its subscriptions, never collect `failureThreshold`
//!    failures in a row, whatever NATS does: no run fails at all once a look was answered;
//! 2. bounded detection: a fault at t0 (a consumer wedged, losing messages, unbound or
//!    deleted; the pod's subscription gone), while NATS answers at least one look in three on
//!    time and the others late or refused, is restarted by t0 + the time to restart
//!    (`rules::restart`, every look answered) + the bound for the looks NATS did not answer;
//! 3. NATS silent restarts nothing: with no answer at all, no run fails;
//! 4. a run that cannot look never makes a fault: a run NATS did not answer on time fails only
//!    by a fault a look saw (carried);
//! 5. a fault never outlives its evidence: every failing run is backed by a look that saw the
//!    fault, no look since saw it gone, and that look is no older than the fault's window.
//!
//! `PROPTEST_CASES` sets the timelines per property (default 200; the README's test command runs 2,000); proptest keeps a failing
//! seed in `core/src/timelines.proptest-regressions` to try first on every later run.

use crate::facts::{Unknown, Wanted};
use crate::prelude::*;
use crate::rules::consumer::Outcome;
use crate::rules::remembered::{self, TrustSetting};
use crate::rules::restart::Cadence;
use crate::rules::restart::{self, Settings};
use crate::rules::subscription::Held;
use crate::run::Check;
use crate::world::{self, Answer, Behaviour, Consumer, Ms, Ran, Subscription, World};
use core::time::Duration;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use std::boxed::Box;
use std::format;

const FAILURE_THRESHOLD: u32 = crate::timing::RECOMMENDED_FAILURE_THRESHOLD;

/// One timeline.
#[derive(Debug, Clone)]
struct Timeline {
    world: World,
    stall_after: Ms,
    ack_wait: Ms,
    period: Ms,
    /// Each run comes up to this much later than its period.
    jitter: Vec<Ms>,
    /// A node stall before the run with this index: every later run is this much later.
    stall: Option<(usize, Ms)>,
    /// A second probe of the same check (a readiness probe), this far after each run.
    second_probe: Option<Ms>,
    every_run: bool,
    runs: usize,
}

/// One run of the timeline.
#[derive(Debug, Clone)]
struct Played {
    at: Ms,
    liveness: bool,
    ran: Ran,
}

impl Timeline {
    /// The consumers' window, as the check works it out.
    fn window(&self) -> Ms {
        let ack_wait = Some(world_ms(self.ack_wait));
        let window = crate::rules::consumer::window_for(world_ms(self.stall_after), ack_wait);
        window.duration.as_millis() as Ms
    }

    /// `--sample-every`: 0, or its default.
    fn sample_every(&self) -> Ms {
        match self.every_run {
            true => 0,
            false => crate::timing::sample_every(world_ms(self.stall_after)).as_millis() as Ms,
        }
    }

    fn check(&self) -> Check {
        self.world.check(self.stall_after, self.sample_every())
    }

    /// The liveness probe's runs, in time.
    fn run_times(&self) -> Vec<Ms> {
        let mut t = 0;
        (0..self.runs)
            .map(|i| {
                t += self.period;
                if let Some((at, len)) = self.stall {
                    if at == i {
                        t += len;
                    }
                }
                t + self.jitter[i % self.jitter.len()]
            })
            .collect()
    }

    /// Every run of the timeline, both probes' in time order.
    fn play(&self) -> Vec<Played> {
        let mut runs: Vec<(Ms, bool)> = self.run_times().into_iter().map(|t| (t, true)).collect();
        if let Some(offset) = self.second_probe {
            let more: Vec<(Ms, bool)> = runs.iter().map(|(t, _)| (t + offset, false)).collect();
            runs.extend(more);
            runs.sort_by_key(|r| r.0);
        }
        let check = self.check();
        let mut world = self.world.clone();
        runs.into_iter()
            .map(|(at, liveness)| Played {
                at,
                liveness,
                ran: world.run(&check, at),
            })
            .collect()
    }
}

/// When the kubelet restarts: the liveness probe's run that makes the threshold-th failure
/// in a row.
fn restarted_at(played: &[Played]) -> Option<Ms> {
    let mut in_a_row = 0;
    for p in played.iter().filter(|p| p.liveness) {
        in_a_row = match p.ran.exit {
            0 => 0,
            _ => in_a_row + 1,
        };
        if in_a_row == FAILURE_THRESHOLD {
            return Some(p.at);
        }
    }
    None
}

fn on_time(answer: &Option<Answer>) -> bool {
    matches!(answer, Some(Answer::OnTime | Answer::Restarted))
}

/// Which of a run's two turns of answers (`World`'s) a fault is about.
fn turn(fault: &str) -> usize {
    match fault.starts_with("S/") {
        true => 0,
        false => 1,
    }
}

/// The faults a run reported: each consumer's and subscription's, and whether carried.
fn faults(ran: &Ran) -> Vec<(String, bool)> {
    let Ok(e) = &ran.ended else {
        return Vec::new();
    };
    let consumers = e.consumers.iter().filter_map(|c| match &c.outcome {
        Outcome::Unhealthy(f) => Some((format!("{} {f:?}", c.seen.name), c.carried.is_some())),
        _ => None,
    });
    let subscriptions = e.subscriptions.iter().filter_map(|s| match &s.held {
        Held::NotByThisConnection { .. } | Held::NotPulling { .. } => {
            Some((format!("{}", s.wanted), s.carried.is_some()))
        }
        _ => None,
    });
    consumers.chain(subscriptions).collect()
}

/// Promise 4 and 5 over any played timeline: a run NATS did not answer on time fails only by
/// carried faults; every failing run's faults were seen by a look (on time) no older than the
/// window, with no look since that saw them gone.
fn no_fault_without_evidence(t: &Timeline, played: &[Played]) -> Result<(), TestCaseError> {
    for (i, p) in played.iter().enumerate() {
        if p.ran.exit != 1 {
            continue;
        }
        let Ok(e) = &p.ran.ended else { continue };
        if !crate::rules::connection::connected(&e.connections, &t.check().connection) {
            // The connection's own verdict: no look is involved.
            continue;
        }
        let faults = faults(&p.ran);
        prop_assert!(!faults.is_empty(), "run {i} failed with no fault: {:?}", p);
        for (fault, carried) in &faults {
            prop_assert!(
                *carried || on_time(&p.ran.answers[turn(fault)]),
                "run {i} could not look and made a fault: {faults:?}"
            );
        }
        for (fault, carried) in faults.iter().filter(|(_, c)| *c) {
            let what = fault.split(' ').next().unwrap_or_default();
            let k = turn(fault);
            // The last look on time at what this fault is about, before this run.
            let look = played[..i]
                .iter()
                .rev()
                .find(|q| on_time(&q.ran.answers[k]) && q.ran.asked.nats());
            let look = look.expect("a carried fault has a look behind it");
            let saw = faults_of(&look.ran)
                .iter()
                .any(|(f, _)| f.starts_with(what));
            prop_assert!(
                saw,
                "run {i} carried {fault} ({carried}) but the last look at {} did not see it",
                look.at
            );
            prop_assert!(
                p.at - look.at <= t.window(),
                "run {i} carried {fault} from a look {} ms old (window {})",
                p.at - look.at,
                t.window()
            );
        }
    }
    Ok(())
}

fn faults_of(ran: &Ran) -> Vec<(String, bool)> {
    faults(ran)
}

/// How far a restart may come after the fault, by what docs/checks.md states: the time to
/// restart (`rules::restart`, every look answered) at this cadence, and, where NATS leaves up
/// to `unanswered` looks in a row unanswered, that many more runs at each end (the first look
/// to see the fault and the first to see it last a window), with the runs' jitter.
fn detection_bound(t: &Timeline, fault: restart::Fault, unanswered: u32) -> Ms {
    let settings = Settings {
        cadence: Cadence {
            period: world_ms(t.period),
            sample_every: world_ms(t.sample_every()),
            window: world_ms(t.window()),
        },
        failure_threshold: FAILURE_THRESHOLD,
        half_open_after: crate::timing::HALF_OPEN_AFTER,
        trust: TrustSetting::Auto,
    };
    // Each cadence's time once: it tries every phase of the fault against the runs.
    std::thread_local! {
        static SLOWEST: core::cell::RefCell<std::collections::HashMap<(Ms, Ms, Ms, restart::Fault), Duration>> =
            Default::default();
    }
    let key = (t.period, t.sample_every(), t.window(), fault);
    let slowest = SLOWEST.with(|m| {
        *m.borrow_mut()
            .entry(key)
            .or_insert_with(|| restart::time_to_restart(fault, &settings).slowest)
    });
    // A pull consumer's part is judged only by a run both its asks were answered in (the
    // consumer's, then its connections', asked only after the consumer's answer): with up to
    // `unanswered` in a row of each, up to (unanswered + 1)² - 1 runs in a row judge nothing.
    let unanswered = match fault {
        restart::Fault::NotPulling => (unanswered + 1).pow(2) - 1,
        _ => unanswered,
    };
    let jitter = t.jitter.iter().max().copied().unwrap_or(0);
    // A second probe's runs make looks off the kubelet's grid, where the table's runs never
    // are: a pull consumer's part's bound holds for any runs.
    let slowest = match fault {
        restart::Fault::NotPulling => {
            let any = restart::not_pulling_on_any_runs(&settings, world_ms(jitter));
            slowest.max(any).as_millis() as Ms
        }
        _ => slowest.as_millis() as Ms,
    };
    // A run's jitter may also move the look that sees the window out by one run.
    let moved = if jitter > 0 { t.period } else { 0 };
    // A subscription's lookups NATS left unanswered make the next ones wait
    // (`remembered::retry_after`), and a pull consumer's part's reads, from one
    // `--sample-every`: a slow server is asked less often, not more.
    let waits = |trust: Duration| -> Ms {
        (1..=unanswered)
            .map(|n| remembered::retry_after(n, trust).as_millis() as Ms)
            .sum()
    };
    let waited: Ms = match fault {
        restart::Fault::NotPulling => waits(settings.cadence.sample_every),
        restart::Fault::Deaf {
            connections,
            direct,
        } => {
            let asking = remembered::Asking {
                setting: settings.trust,
                sample_every: settings.cadence.sample_every,
                direct,
                looking: false,
            };
            waits(remembered::trust_time(asking, connections).length)
        }
        _ => 0,
    };
    slowest + (2 * unanswered as Ms + 1) * (t.period + jitter) + moved + waited
}

fn world_ms(ms: Ms) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

/// Both modules' proptest settings: `PROPTEST_CASES` timelines, failures kept beside them.
pub(crate) fn config() -> Config {
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(200),
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}

/// A period, jitter up to a tenth of it, a second probe anywhere inside a period, every run
/// or the default `--sample-every`.
fn cadence() -> impl Strategy<Value = (Ms, Vec<Ms>, Option<Ms>, bool)> {
    (
        prop_oneof![Just(500), Just(1_000), Just(2_000), Just(10_000)],
        prop::collection::vec(0..=10i64, 1..8),
        prop::option::of(1..=9i64),
        any::<bool>(),
    )
        .prop_map(|(period, jitter, second, every_run)| {
            let jitter = jitter.into_iter().map(|j| j * period / 100).collect();
            (period, jitter, second.map(|s| s * period / 10), every_run)
        })
}

/// `--stall-after` 4 to 20 periods, and an ack_wait from a tenth of it to all of it: the
/// window is raised to 2 × ack_wait past half. A few values of each, so that the times to
/// restart each cadence is held against are computed once for many timelines.
fn window_of(period: Ms) -> impl Strategy<Value = (Ms, Ms)> {
    (
        prop::sample::select(vec![4i64, 7, 12, 20]),
        prop::sample::select(vec![1i64, 3, 5, 8, 10]),
    )
        .prop_map(move |(periods, tenths)| {
            let stall_after = periods * period;
            (stall_after, stall_after * tenths / 10)
        })
}

/// Every kind of answer, on time four times as often.
fn any_answer() -> impl Strategy<Value = Answer> {
    let kinds: Vec<Unknown> = crate::rules::answers::tests::every_kind();
    prop_oneof![
        4 => Just(Answer::OnTime),
        1 => Just(Answer::Restarted),
        3 => prop::sample::select(kinds).prop_map(Answer::Not),
    ]
}

/// NATS's answers to looks that are not on time but leave the evidence: late or refused.
fn late_or_refused() -> impl Strategy<Value = Answer> {
    prop::sample::select(vec![
        Answer::Not(Unknown::Deadline),
        Answer::Not(Unknown::JetStreamTimeout),
        Answer::Not(Unknown::Credentials),
        Answer::Not(Unknown::NotPermitted("$JS.API.CONSUMER.INFO.S.D".into())),
        Answer::Not(Unknown::InboxDenied("_INBOX.>".into())),
        Answer::Not(Unknown::NotListed("n1 did not answer".into())),
    ])
}

fn consumers(n: usize, behaviours: &[Behaviour], every: Ms, ack_wait: Ms) -> Vec<Consumer> {
    (0..n)
        .map(|i| Consumer {
            name: world::name("S", &format!("D{i}")),
            behaviour: behaviours.get(i).copied().unwrap_or(Behaviour::Acking),
            every,
            ack_wait,
        })
        .collect()
}

/// The consumers' parts this pod must hold (`--own-subscription`): push consumers' deliver
/// subscriptions, or pull consumers' pulls (`pull`), until `deaf_at`.
fn deliver_subscriptions(deaf_at: Option<Ms>, direct: bool, pull: bool) -> Subscription {
    Subscription {
        wanted: Wanted {
            subject: "events.>".into(),
            queue: None,
        },
        deaf_at,
        account_connections: 100,
        direct,
        pull,
    }
}

/// Promise 1: healthy consumers and subscriptions through every kind of answer, connections
/// replaced, a young client, node stalls up to three windows, a second probe.
fn healthy_timeline() -> impl Strategy<Value = Timeline> {
    cadence().prop_flat_map(|(period, jitter, second_probe, every_run)| {
        (
            window_of(period),
            prop::collection::vec(any_answer(), 1..12),
            prop::option::of((0..60usize, 1..=30i64)),
            prop::collection::vec(0..6u8, 1..=3),
            1..=100i64,
            (20..80usize, 0..3u8, prop::collection::vec(0..80i64, 0..3)),
        )
            .prop_filter_map(
                "a window longer than twice the ack_wait by a period",
                move |(
                    (stall_after, ack_wait),
                    mut answers,
                    stall,
                    kinds,
                    share,
                    (runs, subs, reconnects),
                )| {
                    let window = stall_after.max(2 * ack_wait);
                    let room = window - 2 * ack_wait;
                    if room < period {
                        return None;
                    }
                    // The first look is answered: the configuration worked once.
                    answers.insert(0, Answer::OnTime);
                    let every = (room * share / 100).max(1);
                    let recreate_at = period * runs as i64 / 2;
                    let behaviours: Vec<Behaviour> = kinds
                        .iter()
                        .map(|k| match k {
                            0 => Behaviour::Acking,
                            1 => Behaviour::Idle,
                            2 => Behaviour::Paused,
                            3 => Behaviour::Recreated { at: recreate_at },
                            // NATS holds the work back: never the pod's.
                            4 => Behaviour::Withheld { at: recreate_at },
                            // Unanswered for three windows while the others are answered.
                            _ => Behaviour::Unanswered {
                                from: recreate_at,
                                until: recreate_at + 3 * window,
                            },
                        })
                        .collect();
                    let mut world = World::new(
                        consumers(kinds.len(), &behaviours, every, ack_wait),
                        answers,
                    );
                    if subs > 0 {
                        world.subscription = Some(deliver_subscriptions(None, false, subs == 2));
                    }
                    // Reconnects: the last one a restart of the client, which is young then.
                    world.client.reconnects = reconnects.iter().map(|r| r * period).collect();
                    world.client.started = world
                        .client
                        .reconnects
                        .iter()
                        .max()
                        .copied()
                        .unwrap_or(-1_000_000);
                    Some(Timeline {
                        world,
                        stall_after,
                        ack_wait,
                        period,
                        jitter: jitter.clone(),
                        // A stall of the node: up to 3 windows.
                        stall: stall.map(|(at, w)| (at, w * window / 10)),
                        second_probe,
                        every_run,
                        runs,
                    })
                },
            )
    })
}

/// Promise 2: a fault at t0, NATS answering at least one look in three on time and the others
/// late or refused.
fn faulty_timeline() -> impl Strategy<Value = (Timeline, restart::Fault, Ms, u32)> {
    cadence().prop_flat_map(|(period, jitter, second_probe, every_run)| {
        (
            window_of(period),
            prop::collection::vec(prop_oneof![Just(Answer::OnTime), late_or_refused()], 0..3),
            0..6u8,
            1..=10i64,
            5..40i64,
            1..=3usize,
        )
            .prop_map(
                move |((stall_after, ack_wait), flaky, kind, every_tenths, wedge_runs, n)| {
                    let unanswered = flaky.iter().filter(|a| **a != Answer::OnTime).count();
                    let mut answers = vec![Answer::OnTime];
                    answers.extend(flaky);
                    let window = stall_after.max(2 * ack_wait);
                    let every = (stall_after * every_tenths / 20).max(1);
                    let at = wedge_runs * period + period / 3;
                    let (behaviour, fault) = match kind {
                        0 => (
                            Behaviour::Wedged { at, until: Ms::MAX },
                            restart::Fault::Stalled,
                        ),
                        1 => (Behaviour::Losing { at, rate: 10 }, restart::Fault::Losing),
                        2 => (Behaviour::Unbound { at }, restart::Fault::Unbound),
                        3 => (Behaviour::Absent { at }, restart::Fault::Absent),
                        4 => (Behaviour::Acking, restart::Fault::NotPulling),
                        _ => (
                            Behaviour::Acking,
                            restart::Fault::Deaf {
                                connections: 100,
                                direct: false,
                            },
                        ),
                    };
                    let mut world =
                        World::new(consumers(n, &[behaviour], every, ack_wait), answers);
                    world.client.started = -1_000_000;
                    match fault {
                        restart::Fault::Deaf { .. } => {
                            world.subscription = Some(deliver_subscriptions(Some(at), false, false))
                        }
                        restart::Fault::NotPulling => {
                            world.subscription = Some(deliver_subscriptions(Some(at), false, true))
                        }
                        _ => {}
                    }
                    let t = Timeline {
                        world,
                        stall_after,
                        ack_wait,
                        period,
                        jitter: jitter.clone(),
                        stall: None,
                        second_probe,
                        every_run,
                        // Long enough for a pull part, read a window apart, through a NATS
                        // that answers one ask in three.
                        runs: (wedge_runs + 8 * window / period + 80) as usize,
                    };
                    (t, fault, at, unanswered as u32)
                },
            )
    })
}

/// Promise 3: NATS never answers a look (not reached, late, electing, unexpected): whatever
/// the consumers do, no run fails.
fn silent_timeline() -> impl Strategy<Value = Timeline> {
    (
        healthy_timeline(),
        0..3u8,
        1..40i64,
        prop::collection::vec(
            prop::sample::select(vec![
                Answer::Not(Unknown::Unreachable("connection refused".into())),
                Answer::Not(Unknown::Deadline),
                Answer::Not(Unknown::JetStreamTimeout),
                Answer::Not(Unknown::TemporarilyUnavailable),
                Answer::Not(Unknown::Failed("?".into())),
            ]),
            1..5,
        ),
    )
        .prop_map(|(mut t, kind, wedge, answers)| {
            t.world.answers = answers;
            if kind == 0 {
                let at = wedge * t.period;
                for c in &mut t.world.consumers {
                    c.behaviour = Behaviour::Wedged { at, until: Ms::MAX };
                }
            }
            t
        })
}

/// Promises 4 and 5: anything at all, a wedge that heals included.
fn any_timeline() -> impl Strategy<Value = Timeline> {
    (
        healthy_timeline(),
        prop::collection::vec(any_answer(), 1..8),
        (1..40i64, 1..40i64, 0..3u8),
    )
        .prop_map(|(mut t, answers, (from, lasts, kind))| {
            t.world.answers.extend(answers);
            let at = from * t.period;
            let until = at + lasts * t.period;
            if let Some(c) = t.world.consumers.first_mut() {
                c.behaviour = match kind {
                    0 => Behaviour::Wedged { at, until },
                    1 => Behaviour::Unbound { at },
                    _ => c.behaviour,
                };
            }
            if kind == 2 {
                if let Some(s) = &mut t.world.subscription {
                    s.deaf_at = Some(at);
                }
            }
            t
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn no_false_restart(t in healthy_timeline()) {
        let played = t.play();
        let failed: Vec<_> = played.iter().filter(|p| p.ran.exit != 0).map(|p| (p.at, p.ran.exit, faults(&p.ran))).collect();
        prop_assert!(failed.is_empty(), "{failed:?}");
        prop_assert_eq!(restarted_at(&played), None);
    }

    #[test]
    fn bounded_detection((t, fault, at, unanswered) in faulty_timeline()) {
        let played = t.play();
        let bound = detection_bound(&t, fault, unanswered);
        let restarted = restarted_at(&played);
        prop_assert!(
            restarted.is_some_and(|r| r >= at && r - at <= bound),
            "{fault:?} at {at}, restarted at {restarted:?}, bound {bound}: {:?}",
            played.iter().map(|p| (p.at, p.liveness, p.ran.exit, p.ran.answers.clone())).collect::<Vec<_>>()
        );
    }

    #[test]
    fn nats_silent_restarts_nothing(t in silent_timeline()) {
        let played = t.play();
        prop_assert!(played.iter().all(|p| p.ran.exit == 0), "{:?}", played.iter().map(|p| (p.at, p.ran.exit)).collect::<Vec<_>>());
    }

    #[test]
    fn no_fault_without_fresh_evidence(t in any_timeline()) {
        let played = t.play();
        no_fault_without_evidence(&t, &played)?;
    }
}

/// A kubelet that restarts the client at `FAILURE_THRESHOLD` failures in a row, every
/// liveness run in time (the second probe aside), with `again_after` as
/// `--restart-again-after`: each run, and when each restart came. A restart starts a new client
/// on a new connection, and `restarted` changes the world as that restart does.
fn play_restarting(
    t: &Timeline,
    again_after: Ms,
    restarted: impl Fn(&mut World, Ms),
) -> (Vec<Played>, Vec<Ms>) {
    let check = Check {
        restart_again_after: Duration::from_millis(again_after as u64),
        ..t.check()
    };
    let mut world = t.world.clone();
    let (mut played, mut restarts, mut in_a_row) = (Vec::new(), Vec::new(), 0);
    for at in t.run_times() {
        let ran = world.run(&check, at);
        in_a_row = match ran.exit {
            0 => 0,
            _ => in_a_row + 1,
        };
        if in_a_row == FAILURE_THRESHOLD {
            in_a_row = 0;
            restarts.push(at);
            world.client.started = at + 1;
            world.client.reconnects.push(at + 1);
            restarted(&mut world, at + 1);
        }
        played.push(Played {
            at,
            liveness: true,
            ran,
        });
    }
    (played, restarts)
}

/// The first failing run after each restart (after the start, for the first): where each
/// episode began.
fn episodes_began(played: &[Played], restarts: &[Ms]) -> Vec<Ms> {
    let mut from = Ms::MIN;
    let mut began = Vec::new();
    for r in restarts {
        began.extend(
            played
                .iter()
                .find(|p| p.at > from && p.at <= *r && p.ran.exit != 0)
                .map(|p| p.at),
        );
        from = *r;
    }
    began
}

/// A stall no restart fixes (a poison message NAKed with a delay, NATS's own stall that the
/// facts cannot prove), NATS answering on time or late or refused: a restart for it is never
/// repeated within `--restart-again-after` of its episode's first failure, and is tried again
/// after.
fn poison_timeline() -> impl Strategy<Value = (Timeline, Ms)> {
    (faulty_timeline(), 4..12i64).prop_map(|((mut t, ..), windows)| {
        for c in &mut t.world.consumers {
            c.behaviour = Behaviour::Wedged {
                at: 0,
                until: Ms::MAX,
            };
        }
        t.world.subscription = None;
        t.second_probe = None;
        t.stall = None;
        t.runs = 200;
        let again_after = windows * t.window();
        (t, again_after)
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_restart_that_did_not_help_is_not_repeated((t, again_after) in poison_timeline()) {
        let (played, restarts) = play_restarting(&t, again_after, |_, _| {});
        let began = episodes_began(&played, &restarts);
        prop_assert!(!restarts.is_empty(), "never restarted");
        for pair in began.windows(2) {
            prop_assert!(pair[1] - pair[0] >= again_after, "episodes {pair:?} within {again_after}: restarts {restarts:?}");
        }
        // Tried again once the episode is over, while the runs go on long enough for it.
        let last = played.last().map_or(0, |p| p.at);
        let bound = detection_bound(&t, restart::Fault::Stalled, 3);
        if let Some(first) = began.first() {
            prop_assert!(
                restarts.len() >= 2 || first + again_after + bound > last,
                "restarted only at {restarts:?}, the episode began at {first}, runs until {last}"
            );
        }
    }

    #[test]
    fn a_restart_that_helped_is_made_again((t, ..) in faulty_timeline()) {
        // Every look answered; the consumer wedges, a restart fixes it, and it wedges again a
        // while after each restart.
        let mut t = t;
        t.world.answers = vec![Answer::OnTime];
        t.world.subscription = None;
        t.second_probe = None;
        t.stall = None;
        t.runs = 120;
        let window = t.window();
        for c in &mut t.world.consumers {
            c.behaviour = Behaviour::Wedged { at: 0, until: Ms::MAX };
        }
        let again = 3 * window;
        let (played, restarts) = play_restarting(&t, Ms::MAX / 4, |w, at| {
            for c in &mut w.consumers {
                c.behaviour = Behaviour::Wedged { at: at + again, until: Ms::MAX };
            }
        });
        let last = played.last().map_or(0, |p| p.at);
        let bound = detection_bound(&t, restart::Fault::Stalled, 1);
        for pair in restarts.windows(2) {
            prop_assert!(pair[1] - pair[0] <= again + bound, "restarts {restarts:?}, bound {bound}");
        }
        if let Some(r) = restarts.last() {
            prop_assert!(r + again + bound > last, "not restarted again after {r}: restarts {restarts:?}, runs until {last}");
        }
    }
}

/// A fault that stood through the new client's window: the runs after say so, exit 0, each
/// state in turn as the kubelet sees it.
#[test]
fn a_restart_that_did_not_help_says_so() {
    let world = World::new(
        consumers(
            1,
            &[Behaviour::Wedged {
                at: 0,
                until: Ms::MAX,
            }],
            100,
            200,
        ),
        vec![Answer::OnTime],
    );
    let t = Timeline {
        world,
        stall_after: 2000,
        ack_wait: 200,
        period: 500,
        jitter: vec![0],
        stall: None,
        second_probe: None,
        every_run: true,
        runs: 40,
    };
    let (played, restarts) = play_restarting(&t, 3_600_000, |_, _| {});
    assert_eq!(restarts.len(), 1, "{restarts:?}");
    let states: Vec<(Ms, u8, &str)> = played
        .iter()
        .filter_map(|p| {
            let c = p.ran.ended.as_ref().ok()?.consumers.first()?;
            Some((p.at, p.ran.exit, c.outcome.state(c.carried.is_some())))
        })
        .collect();
    let after: Vec<_> = states.iter().filter(|s| s.0 > restarts[0]).collect();
    assert!(after.iter().all(|s| s.1 == 0), "{states:?}");
    assert!(after.iter().any(|s| s.2 == "excused"), "{states:?}");
    assert_eq!(
        after.last().unwrap().2,
        "restart_did_not_help",
        "{states:?}"
    );
}

/// NATS holding the work back is never the pod's: not judged, exit 0, once the window passed.
#[test]
fn nats_holding_work_back_is_never_the_pods() {
    for pull in [false, true] {
        let mut world = World::new(
            consumers(1, &[Behaviour::Withheld { at: 1000 }], 100, 200),
            vec![Answer::OnTime],
        );
        if pull {
            world.subscription = Some(deliver_subscriptions(None, false, true));
        }
        let check = world.check(2000, 0);
        let mut last = "";
        for i in 1..20 {
            let ran = world.run(&check, i * 500);
            assert_eq!(ran.exit, 0, "pull {pull} at {}", i * 500);
            let e = ran.ended.as_ref().unwrap();
            last = e.consumers[0].outcome.state(false);
        }
        assert_eq!(last, "server_not_delivering", "pull {pull}");
    }
}

/// Found by the properties in the rules as they were, shrunk, kept: a wedged consumer whose
/// every other look NATS answers late failed one run in two (`1 0 1 0 …`), and the kubelet,
/// counting failures in a row, never restarted it. A run that cannot look now reports the
/// fault the last look saw.
#[test]
fn a_wedged_consumer_behind_late_answers_is_restarted() {
    let at = 2666;
    let world = World::new(
        consumers(1, &[Behaviour::Wedged { at, until: Ms::MAX }], 100, 200),
        vec![Answer::Not(Unknown::Deadline), Answer::OnTime],
    );
    let t = Timeline {
        world,
        stall_after: 2000,
        ack_wait: 200,
        period: 500,
        jitter: vec![0],
        stall: None,
        second_probe: None,
        every_run: true,
        runs: 61,
    };
    let played = t.play();
    let restarted = restarted_at(&played).expect("restarted");
    assert!(restarted - at <= detection_bound(&t, restart::Fault::Stalled, 1));
}

/// Found the same way: a consumer acking every 0.9 s through a server restarting at every
/// other look was called stalled. Each restart made the server forget the acks'
/// `last_active`, and a floor moved without one was read as drops after `max_deliver`, which
/// this consumer does not have: its floor moves only by acks.
#[test]
fn acks_a_restarting_server_forgot_are_progress() {
    let world = World::new(
        consumers(1, &[Behaviour::Recreated { at: 6250 }], 918, 900),
        vec![Answer::OnTime, Answer::Restarted],
    );
    let t = Timeline {
        world,
        stall_after: 4500,
        ack_wait: 900,
        period: 500,
        jitter: vec![0],
        stall: None,
        second_probe: None,
        every_run: true,
        runs: 25,
    };
    assert_eq!(restarted_at(&t.play()), None);
}

/// The kind of run that reported a consumer's state, as the diagram's labels begin with it:
/// a look NATS answered (by a server that restarted since, or not), or a run it did not
/// answer as it needed, by the table's row ("a late answer", "a refusal", "NATS not there",
/// "NATS not here").
fn run_kind(ran: &Ran, c: &crate::rules::judged::JudgedConsumer) -> &'static str {
    use crate::rules::answers::{meaning, Row};
    use crate::rules::judged::NotJudged as _;
    let why = c
        .carried
        .as_ref()
        .map(|k| &k.why)
        .or(c.outcome.not_judged());
    match why.map(|why| meaning(why).row) {
        Some(Row::Late) => "a late answer",
        Some(Row::Refused) => "a refusal",
        Some(Row::NotThere) => "NATS not there",
        Some(Row::NotHere) => "NATS not here",
        None if ran.answers[0] == Some(Answer::Restarted) => "a restarted server's look",
        None => "a look",
    }
}

/// Every change of a consumer's state (`Outcome::state`) from one run to the next that reports
/// it, with the kind of run that made it (`run_kind`), exploring the run over every kind of
/// consumer (each fault, and each fault healed: the consumer acking again, or idle), every
/// kind of answer (`answers::tests::every_kind`, on time, a restarted server), ack paces,
/// `ack_wait`s and client ages, a client restarted midway: (from, to, kind), with `[*]` for a
/// consumer's first report.
fn transitions() -> std::collections::BTreeSet<(&'static str, &'static str, &'static str)> {
    let behaviours = [
        Behaviour::Acking,
        Behaviour::Idle,
        Behaviour::Quiet { until: 20_000 },
        Behaviour::Paused,
        Behaviour::Recreated { at: 20_000 },
        Behaviour::Wedged {
            at: 10_000,
            until: 40_000,
        },
        Behaviour::Wedged {
            at: 10_000,
            until: Ms::MAX,
        },
        Behaviour::Losing {
            at: 10_000,
            rate: 10,
        },
        Behaviour::Unbound { at: 10_000 },
        Behaviour::Absent { at: 10_000 },
        Behaviour::Unbound { at: 0 },
        Behaviour::Absent { at: 0 },
        Behaviour::Wedged {
            at: -100_000,
            until: Ms::MAX,
        },
        Behaviour::Withheld { at: 10_000 },
        Behaviour::Unanswered {
            from: 10_000,
            until: 30_000,
        },
    ];
    let mut answers = vec![
        vec![Answer::OnTime],
        vec![Answer::OnTime, Answer::Restarted],
    ];
    for why in crate::rules::answers::tests::every_kind() {
        answers.push(vec![Answer::OnTime, Answer::Not(why.clone())]);
        answers.push(vec![
            Answer::Not(why.clone()),
            Answer::OnTime,
            Answer::OnTime,
        ]);
        // Two in a row, each after one that leaves the clocks counting; and a long run of it.
        answers.push(vec![
            Answer::OnTime,
            Answer::Not(Unknown::Deadline),
            Answer::Not(why.clone()),
        ]);
        let mut long = vec![Answer::Not(why.clone()); 8];
        long.insert(0, Answer::OnTime);
        answers.push(long);
        // A long stretch answered, so that every clock reaches its window, then two.
        let mut stretch = vec![Answer::OnTime; 20];
        stretch.extend([Answer::Not(why.clone()), Answer::Not(why)]);
        answers.push(stretch);
    }
    let mut seen = std::collections::BTreeSet::new();
    for behaviour in behaviours {
        for healed in [None, Some(Behaviour::Acking), Some(Behaviour::Idle)] {
            for answers in &answers {
                for (every, ack_wait, started) in [
                    (500, 200, -100_000),
                    (1000, 1000, -100_000),
                    (3000, 200, -100_000),
                    (1000, 200, 12_000),
                ] {
                    let mut world =
                        World::new(consumers(1, &[behaviour], every, ack_wait), answers.clone());
                    world.client.started = started;
                    world.client.reconnects = vec![started];
                    let check = world.check(4000, 0);
                    let mut last = "[*]";
                    for i in 0..80 {
                        // A slow client restarted at 50 s: a new process, on a new connection.
                        if every == 3000 && i == 50 {
                            world.client.started = 50_000;
                            world.client.reconnects.push(50_000);
                        }
                        if let (Some(healed), 45) = (healed, i) {
                            world.consumers[0].behaviour = healed;
                        }
                        let ran = world.run(&check, i * 1000);
                        let Ok(e) = &ran.ended else { continue };
                        if let Some(c) = e.consumers.first() {
                            let state = c.outcome.state(c.carried.is_some());
                            if state != last {
                                seen.insert((last, state, run_kind(&ran, c)));
                            }
                            last = state;
                        }
                    }
                }
            }
        }
    }
    seen
}

/// docs/checks.md's diagram of a consumer's verdict is the run's: its states are
/// `consumer::STATES`; every change of state the run makes is drawn (an edge from or to a
/// composite state stands for each state inside it), and every edge drawn happens.
#[test]
fn the_diagram_is_the_runs() {
    use std::collections::{BTreeMap, BTreeSet};
    let doc = include_str!("../../docs/checks.md");
    let start = doc
        .find("```mermaid")
        .expect("a Mermaid diagram in docs/checks.md");
    let block = &doc[start..];
    let block = &block[..block[3..].find("```").unwrap() + 3];
    let mut composites: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut leaves: BTreeSet<&str> = BTreeSet::new();
    let mut edges: Vec<(&str, &str, BTreeSet<&str>)> = Vec::new();
    let mut inside: Option<&str> = None;
    for line in block.lines().skip(1) {
        let line = line.trim();
        if let Some(name) = line
            .strip_prefix("state ")
            .and_then(|l| l.strip_suffix(" {"))
        {
            inside = Some(name);
            composites.insert(name, BTreeSet::new());
            continue;
        }
        if line == "}" {
            inside = None;
            continue;
        }
        let mut states: Vec<&str> = Vec::new();
        match line.split_once(" --> ") {
            Some((from, to)) => {
                let (to, label) = to.split_once(':').unwrap_or((to, ""));
                let to = to.trim();
                let kinds = label.split(" — ").next().unwrap().trim();
                let kinds: BTreeSet<&str> = kinds.split(" or ").map(str::trim).collect();
                edges.push((from.trim(), to, kinds));
                states.extend([from.trim(), to]);
            }
            None if line.split_whitespace().count() == 1
                && !line.starts_with("```")
                && line != "stateDiagram-v2" =>
            {
                states.push(line)
            }
            None => continue,
        }
        for s in states.into_iter().filter(|s| *s != "[*]") {
            if let Some(c) = inside {
                composites.get_mut(c).unwrap().insert(s);
            }
            leaves.insert(s);
        }
    }
    for c in composites.keys() {
        leaves.remove(c);
    }
    let states: BTreeSet<&str> = crate::rules::consumer::STATES.into_iter().collect();
    assert_eq!(leaves, states, "the diagram's states");
    let expand = |s: &str| -> BTreeSet<String> {
        match composites.get(s) {
            Some(members) => members.iter().map(|m| m.to_string()).collect(),
            None => [s.to_string()].into(),
        }
    };
    let covers = |(from, to): (&str, &str), (a, b): (&str, &str)| {
        let inner = composites
            .values()
            .any(|m| m.contains(from) && m.contains(to));
        let within = composites.values().any(|m| m.contains(a) && m.contains(b));
        expand(from).contains(a) && expand(to).contains(b) && (inner || !within || from == "[*]")
    };
    let seen = transitions();
    for &(from, to, kind) in &seen {
        assert!(
            edges
                .iter()
                .any(|(a, b, kinds)| covers((a, b), (from, to)) && kinds.contains(kind)),
            "the run goes {from} --> {to} on {kind}, which the diagram does not draw"
        );
    }
    for (a, b, kinds) in &edges {
        for kind in kinds {
            assert!(
                seen.iter()
                    .any(|&(from, to, k)| covers((a, b), (from, to)) && k == *kind),
                "the diagram draws {a} --> {b} on {kind}, which the run never does"
            );
        }
    }
}
