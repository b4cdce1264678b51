//! The probe's own run, run after run, for what the documents promise: how long from a fault
//! to the kubelet's restart (the README's table of times to restart), and how often each kind
//! of run comes (`schedule`, which the fleet benchmark weighs). Every run is the check's own
//! (`run::Run`), driven by a simulated pod and NATS (`world`) under a kubelet that runs it
//! every `periodSeconds` and restarts at `failureThreshold` failures in a row. Every phase of
//! the fault against the runs, the looks and the lookups is tried, with runs a millisecond
//! sooner or later than the period (a kubelet's never come exactly a period apart); the fastest
//! and the slowest are the span. The README's table is this module's (tested), and an
//! end-to-end test measures the same at scaled-down timings. Pure.

use super::remembered::{self, Asking, TrustSetting};
use crate::facts::Wanted;
use crate::run::Check;
use crate::timing;
use crate::world::{self, Behaviour, Consumer, Ms, Subscription, World};
use alloc::vec;
use core::time::Duration;

/// The kubelet's period and the probe's own times that set when a run asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    pub period: Duration,
    pub sample_every: Duration,
    /// The consumers' window (`--stall-after`, or 2 × ack_wait when longer).
    pub window: Duration,
}

impl Cadence {
    /// `periodSeconds: 10` and the defaults: `--stall-after 60s`, `--sample-every 45s`.
    pub const DEFAULT: Cadence = Cadence {
        period: timing::RECOMMENDED_PERIOD,
        sample_every: timing::sample_every(timing::STALL_AFTER),
        window: timing::STALL_AFTER,
    };
}

/// A fault, from the moment it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The client gave up its connection while NATS answers (`--server`).
    GaveUp,
    /// The peer is gone without a word: from the client's first send it never acknowledges
    /// (called at the kernel's first retransmission timeout past `--half-open-after`).
    HalfOpen,
    /// Nothing subscribed to the push consumer (idle or not).
    Unbound,
    /// The durable deleted.
    Absent,
    /// Work waiting and no ack since: from the last ack.
    Stalled,
    /// No ack since, on a stream whose retention deletes what is not acknowledged (max_msgs,
    /// discard old), ten messages a second: its floor held at the front of the stream, moved
    /// by the deletions. From the last ack.
    Losing,
    /// This pod's connection lost the subscription (a deaf replica), in an account of this
    /// many connections; `direct`: `--monitor` finds the connection at the monitoring port.
    Deaf { connections: u64, direct: bool },
    /// A replica of a pull consumer's group stopped pulling, its connection held, while the
    /// others take the work: from its last pull request.
    NotPulling,
}

/// The probe's settings that set the time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub cadence: Cadence,
    pub failure_threshold: u32,
    pub half_open_after: Duration,
    pub trust: TrustSetting,
}

impl Settings {
    /// The README's: `periodSeconds: 10`, `failureThreshold: 3`, and the defaults.
    pub const RECOMMENDED: Settings = Settings {
        cadence: Cadence::DEFAULT,
        failure_threshold: timing::RECOMMENDED_FAILURE_THRESHOLD,
        half_open_after: timing::HALF_OPEN_AFTER,
        trust: TrustSetting::Auto,
    };
}

/// The fastest and the slowest time from the fault to the restart, over every phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub fastest: Duration,
    pub slowest: Duration,
}

/// How long after `fault` the kubelet restarts the pod, at `settings`.
pub fn time_to_restart(fault: Fault, settings: &Settings) -> Span {
    let period = ms(settings.cadence.period);
    // Every phase of the fault against the runs (a twentieth of a period apart) and against
    // the looks and lookups, whose cycle is at most the window or the trust time.
    let cycle = match fault {
        Fault::GaveUp | Fault::HalfOpen => period,
        Fault::Unbound | Fault::Absent | Fault::Stalled | Fault::Losing => {
            ms(settings.cadence.window) + period
        }
        Fault::NotPulling => {
            ms(settings.cadence.window) + ms(settings.cadence.sample_every) + period
        }
        Fault::Deaf {
            connections,
            direct,
        } => {
            let asking = Asking {
                setting: settings.trust,
                sample_every: settings.cadence.sample_every,
                direct,
                looking: false,
            };
            ms(remembered::trust_time(asking, connections).length) + 2 * period
        }
    };
    // A twentieth of a period, or a multiple of it for a long cycle (about 2,000 phases):
    // every phase against the runs is still tried, against some phase of the lookups.
    let twentieth = (period / 20).max(1);
    let step = twentieth * (cycle / (2000 * twentieth)).max(1);
    let (mut fastest, mut slowest) = (i64::MAX, 0);
    for offset in (0..cycle).step_by(step as usize) {
        // The kubelet's runs are never exactly a period apart: a run's clock a little late or
        // early decides a tie (a window a whole number of periods long) one way or the other.
        for drift in [-1, 0, 1] {
            let t = restarted_after(fault, settings, cycle, offset, drift);
            fastest = fastest.min(t);
            slowest = slowest.max(t);
        }
    }
    Span {
        fastest: Duration::from_millis(fastest as u64),
        slowest: Duration::from_millis(slowest as u64),
    }
}

/// The slowest time to restart for `Fault::NotPulling` whoever's runs make the looks (a second
/// probe's, off the kubelet's grid), each run up to `jitter` late: the part is read with the
/// first look a window after the last publish seen, so its fault comes at most twice a window
/// plus two looks' spacing after the pod's last publish (docs/checks.md), and the kubelet's
/// threshold's runs after that.
pub fn not_pulling_on_any_runs(settings: &Settings, jitter: Duration) -> Duration {
    let c = &settings.cadence;
    let spacing = c.sample_every + c.period + jitter;
    let runs = (c.period + jitter) * settings.failure_threshold.saturating_sub(1);
    (c.window + spacing) * 2 + runs
}

fn ms(d: Duration) -> i64 {
    d.as_millis() as i64
}

/// The pod with `fault` at 0: a push consumer `S/D` with work waiting, acking once a second
/// (`ack_wait` 1 s) until a fault that is its own; its deliver subscription held by the pod's
/// connection, until a deaf replica's.
fn world_with(fault: Fault) -> World {
    let behaviour = match fault {
        Fault::Unbound => Behaviour::Unbound { at: 0 },
        Fault::Absent => Behaviour::Absent { at: 0 },
        Fault::Stalled => Behaviour::Wedged {
            at: 0,
            until: Ms::MAX,
        },
        Fault::Losing => Behaviour::Losing { at: 0, rate: 10 },
        _ => Behaviour::Acking,
    };
    let consumer = Consumer {
        name: world::name("S", "D"),
        behaviour,
        every: 1000,
        ack_wait: 1000,
    };
    let mut w = World::new(vec![consumer], vec![world::Answer::OnTime]);
    w.client.started = Ms::MIN / 2;
    w.client.gave_up = (fault == Fault::GaveUp).then_some(0);
    w.client.half_open = (fault == Fault::HalfOpen).then_some(0);
    let (account_connections, direct, pull) = match fault {
        Fault::Deaf {
            connections,
            direct,
        } => (connections, direct, false),
        Fault::NotPulling => (100, false, true),
        _ => return w,
    };
    w.subscription = Some(Subscription {
        wanted: Wanted {
            subject: "events.>".into(),
            queue: None,
        },
        deaf_at: Some(0),
        account_connections,
        direct,
        pull,
    });
    w
}

fn check_of(world: &World, settings: &Settings) -> Check {
    let mut check = world.check(
        ms(settings.cadence.window),
        ms(settings.cadence.sample_every),
    );
    check.connection.half_open_after = Some(settings.half_open_after);
    check.subscription_every = settings.trust;
    check
}

/// Runs `period` apart, the fault at 0 `offset` into its cycle, after two cycles of calm: the
/// time of the run that makes the `failure_threshold`-th failure in a row. Each run's clock is
/// `drift` ms a period off the kubelet's from the fault on.
fn restarted_after(fault: Fault, settings: &Settings, cycle: i64, offset: i64, drift: i64) -> i64 {
    let period = ms(settings.cadence.period);
    let warm = (2 * cycle / period + 2) * period + offset;
    let mut world = world_with(fault);
    let check = check_of(&world, settings);
    let mut failures = 0;
    // Every fault restarts the pod within minutes: a day without is a fault never caught.
    let day = 24 * 3600 * 1000;
    for run in 0..=(warm + day) / period {
        let now = run * period - warm;
        let clock = now + drift * (run - warm / period);
        failures = match world.run(&check, clock).exit {
            0 => 0,
            _ => failures + 1,
        };
        if failures == settings.failure_threshold {
            return now;
        }
    }
    panic!("{fault:?} did not restart the pod within a day")
}

/// How often each kind of run comes, over `runs` runs `period` apart of a pod whose client
/// keeps its connection and whose consumer stays calm, its deliver subscription held
/// (`--own-subscription`): what the check's run asks, run after run (the fleet benchmark
/// weighs its measured kinds of run by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Schedule {
    /// Runs that ask about the consumers and trust the connection.
    pub looks: u32,
    /// Runs that ask about the consumers and look the connection up by cid.
    pub looks_with_lookup: u32,
    /// Runs that look the connection up by cid alone.
    pub lookups_alone: u32,
    /// Runs that match the connection by address (the first).
    pub matches: u32,
    /// Runs that ask the server nothing.
    pub quiet: u32,
}

pub fn schedule(
    runs: u32,
    cadence: Cadence,
    trust: TrustSetting,
    account_connections: u64,
    direct: bool,
) -> Schedule {
    let mut world = world_with(Fault::Deaf {
        connections: account_connections,
        direct,
    });
    if let Some(s) = &mut world.subscription {
        s.deaf_at = None;
    }
    let settings = Settings {
        cadence,
        trust,
        ..Settings::RECOMMENDED
    };
    let check = check_of(&world, &settings);
    let mut s = Schedule::default();
    for run in 0..runs {
        let now = i64::from(run) * ms(cadence.period);
        let asked = world.run(&check, now).asked;
        match (asked.consumers, asked.lookups, asked.connz) {
            (_, _, true) => s.matches += 1,
            (true, true, false) => s.looks_with_lookup += 1,
            (true, false, false) => s.looks += 1,
            (false, true, false) => s.lookups_alone += 1,
            (false, false, false) => s.quiet += 1,
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Milliseconds.
    fn span(fault: Fault) -> (u64, u64) {
        let s = time_to_restart(fault, &Settings::RECOMMENDED);
        (s.fastest.as_millis() as u64, s.slowest.as_millis() as u64)
    }

    /// With the README's settings: a fault the sockets show is restarted two to three periods
    /// after it (the third failure in a row); one the consumers show, after the next look
    /// (at most 50 s away) and two more periods; a stall, after its whole window; a deaf
    /// replica, after the next lookup of its connection. (The larger accounts' rows, an hour
    /// of phases each, are held by the README's table: `docs::the_readme_says_the_times_to_restart`.)
    #[test]
    fn times_to_restart_with_the_recommended_settings() {
        assert_eq!(span(Fault::GaveUp), (20_000, 29_500));
        assert_eq!(span(Fault::HalfOpen), (71_000, 81_000));
        assert_eq!(span(Fault::Unbound), (20_000, 69_500));
        assert_eq!(span(Fault::Absent), (20_000, 69_500));
        assert_eq!(span(Fault::Stalled), (80_000, 139_500));
        assert_eq!(span(Fault::Losing), (80_500, 140_000));
        let deaf = |connections, direct| {
            span(Fault::Deaf {
                connections,
                direct,
            })
        };
        assert_eq!(deaf(100, false), (20_000, 69_500));
        assert_eq!(deaf(1_000, false), (20_000, 69_500));
        assert_eq!(deaf(10_000, true), (20_000, 69_500));
        assert_eq!(deaf(2_500, false), (20_000, 329_500));
    }

    /// The schedule the README's fleet table and the fleet benchmark's kubelet averages rest
    /// on: two hours of runs at `periodSeconds: 10` with the defaults. 1 run in 5 asks about
    /// the consumers (and the second run too: a first look sees no progress, having nothing
    /// to compare); up to 1,000 connections in the account (or at the monitoring port) each
    /// look asks for the connection by cid too; 1 run in 30 does at 2,500, 1 in 120 at 10,000.
    #[test]
    fn the_default_schedule_at_period_ten_seconds() {
        let at = |connections, direct| {
            let s = schedule(
                720,
                Cadence::DEFAULT,
                TrustSetting::Auto,
                connections,
                direct,
            );
            assert_eq!(
                s.looks + s.looks_with_lookup + s.lookups_alone + s.matches + s.quiet,
                720
            );
            (
                s.looks + s.looks_with_lookup + s.matches,
                s.looks_with_lookup + s.lookups_alone,
                s.matches,
            )
        };
        assert_eq!(at(100, false), (145, 144, 1));
        assert_eq!(at(1_000, false), (145, 144, 1));
        assert_eq!(at(2_500, false), (145, 23, 1));
        assert_eq!(at(10_000, false), (145, 5, 1));
        assert_eq!(at(10_003, false), (145, 5, 1));
        assert_eq!(at(10_000, true), (145, 144, 1));
        assert_eq!(at(100_000, false), (145, 1, 1));
        // A lookup 126 runs apart (21 minutes) falls between looks 4 times in 5.
        let s = schedule(
            126 * 5 + 1,
            Cadence::DEFAULT,
            TrustSetting::Auto,
            10_500,
            false,
        );
        assert_eq!((s.looks_with_lookup, s.lookups_alone), (1, 4));
        // `--stall-after 2m` (docs/performance.md): 1 run in 9 asks; a trust time of its own
        // sets the lookups.
        let longer = Cadence {
            period: Duration::from_secs(10),
            sample_every: Duration::from_secs(90),
            window: Duration::from_secs(120),
        };
        let s = schedule(720, longer, TrustSetting::Auto, 100, false);
        assert_eq!(s.looks + s.looks_with_lookup + s.matches, 81);
        let s = schedule(
            720,
            Cadence::DEFAULT,
            TrustSetting::Fixed(Duration::ZERO),
            100,
            false,
        );
        assert_eq!(s.looks_with_lookup + s.lookups_alone, 719);
    }

    /// A window longer than the stall (2 × ack_wait) or a shorter period move the times as
    /// the rules say: at period 5 s, a fault the sockets show is restarted in 10 to 15 s.
    #[test]
    fn the_times_follow_the_settings() {
        let fast = Settings {
            cadence: Cadence {
                period: Duration::from_secs(5),
                ..Cadence::DEFAULT
            },
            ..Settings::RECOMMENDED
        };
        let s = time_to_restart(Fault::GaveUp, &fast);
        assert_eq!(
            (s.fastest.as_millis(), s.slowest.as_millis()),
            (10_000, 14_750)
        );
    }
}
