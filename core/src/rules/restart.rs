//! The probe's own rules run after run, for what the documents promise: how long from a fault
//! to the kubelet's restart, and how often each kind of run comes (`schedule`, which the fleet
//! benchmark weighs). How long from a fault to the kubelet's restart, by the probe's own rules: the runs a
//! kubelet makes (`periodSeconds`, `failureThreshold`), which of them ask what
//! (`remembered::sampling` for the consumers, `remembered::plan` for the pod's connection),
//! and when an asked check calls the fault (`consumer::judge` for a stall). Every phase of the
//! fault against the runs, the looks and the lookups is tried; the fastest and the slowest are
//! the span. The README's table of times to restart is this module's (tested), and an
//! end-to-end test measures the same at scaled-down timings. Pure.

use crate::prelude::*;

use super::connection;
use super::consumer::{self, Intervals, Outcome, Policy};
use super::look;
use super::remembered::{self, Asking, Cadence, LastLook, Plan, Sampling, Socket, TrustSetting};
use crate::facts::{AckPolicy, ConsumerFacts, ConsumerName, Observed, Remembered, Sample};
use crate::facts::{Sequence, ServerIdent, StreamFacts};
use core::net::SocketAddr;
use core::time::Duration;

/// A fault, from the moment it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The client gave up its connection while NATS answers (`--server`).
    GaveUp,
    /// The peer is gone without a word: from the client's first send it never acknowledges
    /// (called at the kernel's first retransmission timeout past `--half-open-after`).
    HalfOpen,
    /// Nothing subscribed to the push consumer while work waits (or its pull loop stopped).
    Unbound,
    /// The durable, or its stream, deleted.
    Absent,
    /// Work waiting and no ack since: from the last ack.
    Stalled,
    /// No ack since, on a stream whose retention deletes what is not acknowledged (max_msgs,
    /// discard old), ten messages a second: its floor held at the front of the stream, moved
    /// by the deletions. From the last ack; the floor's clock starts at the first look that
    /// sees it held.
    Losing,
    /// This pod's connection lost the subscription (a deaf replica), in an account of this
    /// many connections; `direct`: `--monitor` finds the connection at the monitoring port.
    Deaf { connections: u64, direct: bool },
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
        failure_threshold: 3,
        half_open_after: Duration::from_secs(30),
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
        Fault::Deaf {
            connections,
            direct,
        } => {
            let asking = asking(settings, direct, false);
            ms(remembered::trust_time(asking, connections).length) + 2 * period
        }
    };
    // A twentieth of a period, or a multiple of it for a long cycle (about 2,000 phases):
    // every phase against the runs is still tried, against some phase of the lookups.
    let twentieth = (period / 20).max(1);
    let step = twentieth * (cycle / (2000 * twentieth)).max(1);
    let (mut fastest, mut slowest) = (i64::MAX, 0);
    for offset in (0..cycle).step_by(step as usize) {
        let t = restarted_after(fault, settings, cycle, offset);
        fastest = fastest.min(t);
        slowest = slowest.max(t);
    }
    Span {
        fastest: Duration::from_millis(fastest as u64),
        slowest: Duration::from_millis(slowest as u64),
    }
}

fn ms(d: Duration) -> i64 {
    d.as_millis() as i64
}

fn asking(settings: &Settings, direct: bool, looking: bool) -> Asking {
    Asking {
        setting: settings.trust,
        sample_every: settings.cadence.sample_every,
        direct,
        looking,
    }
}

/// Runs `period` apart, the fault at 0 `offset` into its cycle, after two cycles of calm: the
/// time of the run that makes the `failure_threshold`-th failure in a row.
fn restarted_after(fault: Fault, settings: &Settings, cycle: i64, offset: i64) -> i64 {
    let period = ms(settings.cadence.period);
    let warm = (2 * cycle / period + 2) * period + offset;
    let ours = [Socket {
        addr: SocketAddr::from(([10, 0, 0, 2], 40000)),
        inode: 1,
    }];
    let mut last: Option<LastLook> = None;
    let mut sample: Option<Sample> = None;
    let mut memo: Option<Remembered> = None;
    let mut failures = 0;
    let policy = policy(settings);
    for run in 0.. {
        let now = run * period - warm;
        if let Some(l) = &mut last {
            l.previous_run_ms = (run > 0).then_some(now - period);
        }
        let every = settings.cadence.sample_every;
        let looking = matches!(
            remembered::sampling(last.as_ref(), &[1], every, false, now),
            Sampling::Ask(_)
        );
        // The consumer is looked at as `check` does: judged, settled against the last look.
        let consumer_failed = match looking {
            true => {
                let observed = consumer_at(fault, now);
                let outcome = look_at(&observed, &mut last, &mut sample, &policy, now);
                matches!(outcome, Outcome::Unhealthy(_))
            }
            false => false,
        };
        let failed = match fault {
            Fault::GaveUp => now >= 0,
            Fault::HalfOpen => {
                let rto = Duration::from_millis(200);
                now >= ms(connection::half_open_called(settings.half_open_after, rto))
            }
            Fault::Unbound | Fault::Absent | Fault::Stalled | Fault::Losing => consumer_failed,
            Fault::Deaf { direct, .. } => {
                let asking = asking(settings, direct, looking);
                match remembered::plan(memo.as_ref(), None, &ours, asking, now) {
                    Plan::Trust { .. } | Plan::Wait(_) => false,
                    Plan::LookUp | Plan::Match(_) => {
                        let holds = now < 0;
                        memo = Some(remembered_at(fault, ours[0], holds.then_some(now)));
                        !holds
                    }
                }
            }
        };
        failures = if failed { failures + 1 } else { 0 };
        if failures == settings.failure_threshold {
            return now;
        }
    }
    unreachable!("the loop returns")
}

/// How often each kind of run comes, over `runs` runs `period` apart of a pod whose client
/// keeps its connection and whose consumers stay calm: what `sampling` and `plan` decide,
/// run after run (the fleet benchmark weighs its measured kinds of run by it).
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
    let Cadence {
        period,
        sample_every,
        window,
    } = cadence;
    let policy = Policy {
        stall_after: window,
        intervals: Intervals::UpToWindow,
    };
    let mut sample: Option<Sample> = None;
    let ours = [Socket {
        addr: SocketAddr::from(([10, 0, 0, 1], 40000)),
        inode: 1,
    }];
    let mut last: Option<LastLook> = None;
    let mut kept: Option<Remembered> = None;
    let mut s = Schedule::default();
    for run in 0..runs {
        let now = run as i64 * period.as_millis() as i64;
        if let Some(l) = &mut last {
            l.previous_run_ms = (run > 0).then(|| now - period.as_millis() as i64);
        }
        let look = matches!(
            remembered::sampling(last.as_ref(), &[1], sample_every, false, now),
            Sampling::Ask(_)
        );
        if look {
            // A consumer acking with work waiting, judged and settled as `check` does.
            look_at(
                &acking_until(now, now),
                &mut last,
                &mut sample,
                &policy,
                now,
            );
        }
        let asking = Asking {
            setting: trust,
            sample_every,
            direct,
            looking: look,
        };
        let planned = remembered::plan(kept.as_ref(), None, &ours, asking, now);
        match (planned, look) {
            (Plan::Trust { .. } | Plan::Wait(_), true) => s.looks += 1,
            (Plan::Trust { .. } | Plan::Wait(_), false) => s.quiet += 1,
            (Plan::LookUp, true) => s.looks_with_lookup += 1,
            (Plan::LookUp, false) => s.lookups_alone += 1,
            (Plan::Match(_), _) => s.matches += 1,
        }
        if !matches!(planned, Plan::Trust { .. } | Plan::Wait(_)) {
            kept = Some(Remembered {
                server: ServerIdent {
                    name: "n".into(),
                    id: "N".into(),
                },
                cid: 1,
                local: ours[0].addr,
                inode: 1,
                held_at_ms: Some(now),
                account_connections,
            });
        }
    }
    s
}

fn policy(settings: &Settings) -> Policy {
    Policy {
        stall_after: settings.cadence.window,
        intervals: Intervals::UpToWindow,
    }
}

fn remembered_at(fault: Fault, socket: Socket, held_at_ms: Option<i64>) -> Remembered {
    let connections = match fault {
        Fault::Deaf { connections, .. } => connections,
        _ => 0,
    };
    Remembered {
        server: ServerIdent {
            name: "n1".into(),
            id: "N1".into(),
        },
        cid: 7,
        local: socket.addr,
        inode: socket.inode,
        held_at_ms,
        account_connections: connections,
    }
}

/// The pod's consumer at `now`, as a 2.10 server describes it: acking once a second with
/// work waiting, until the fault (at 0) if it is the consumer's.
fn consumer_at(fault: Fault, now: i64) -> Observed {
    let faulty = now >= 0;
    match fault {
        Fault::Absent if faulty => Observed::ConsumerMissing,
        Fault::Stalled => acking_until(0, now),
        Fault::Losing => losing_from(acking_until(0, now), now),
        Fault::Unbound => match acking_until(now, now) {
            Observed::Found { mut facts, stream } => {
                facts.push_bound = !faulty;
                Observed::Found { facts, stream }
            }
            other => other,
        },
        _ => acking_until(now, now),
    }
}

/// A push consumer with work waiting that acked once a second until `until` and never since,
/// as a 2.10 server describes it at `now` (its clock: `ts`, `last_active`).
fn acking_until(until: i64, now: i64) -> Observed {
    const NS: i64 = 1_000_000;
    // A server clock far from zero, as a real one is.
    const EPOCH: i64 = 1_800_000_000_000;
    let last_ack = now.min(until).div_euclid(1000) * 1000;
    let acked = (EPOCH + last_ack) / 1000;
    let seq = |n: i64| Sequence {
        consumer_seq: n as u64,
        stream_seq: n as u64,
        last_active: Some((EPOCH + last_ack) * NS),
    };
    Observed::Found {
        facts: ConsumerFacts {
            stream: "S".into(),
            name: "D".into(),
            created: "2026-12-01T00:00:00Z".into(),
            deliver_subject: Some("deliver.D".into()),
            deliver_group: Some("D".into()),
            push_bound: true,
            num_pending: 10,
            num_ack_pending: 1,
            num_waiting: 0,
            num_redelivered: 0,
            ack_floor: seq(acked),
            delivered: seq(acked + 1),
            ack_policy: AckPolicy::Explicit,
            ack_wait: Some(Duration::from_secs(1)),
            max_deliver: None,
            max_ack_pending: Some(1),
            paused: false,
            ts: Some((EPOCH + now) * NS),
        },
        stream: None,
    }
}

/// One look at the pod's consumer `S/D`, as `check` makes it: judged against its sample,
/// settled against the last look, both kept for the next; its outcome.
fn look_at(
    observed: &Observed,
    last: &mut Option<LastLook>,
    sample: &mut Option<Sample>,
    policy: &Policy,
    now: i64,
) -> Outcome {
    let names = [ConsumerName {
        stream: "S".into(),
        durable: "D".into(),
    }];
    let j = consumer::judge(observed, sample.as_ref(), policy, now);
    let context = look::Context {
        inodes: vec![1],
        wanted: vec![],
        own_subscription: true,
    };
    let (settled, look) = look::settle(last.as_ref(), &names, vec![j], None, policy, context, now);
    let [settled] = <[_; 1]>::try_from(settled).expect("one consumer");
    *sample = settled.sample.or(sample.take());
    *last = Some(look);
    settled.outcome
}

/// `consumer` on a stream that deletes from the front, 1,000 messages long: before 0 its floor
/// is inside the stream; from 0 on retention deletes ten messages a second past the floor,
/// which moves with them (each deletion moves `last_active` as an ack would).
fn losing_from(consumer: Observed, now: i64) -> Observed {
    let Observed::Found { mut facts, .. } = consumer else {
        return consumer;
    };
    let deleted = (now.max(0) / 100) as u64;
    let first_seq = match deleted {
        0 => facts.ack_floor.stream_seq.saturating_sub(499) + 1,
        _ => {
            facts.ack_floor.consumer_seq += deleted;
            facts.ack_floor.stream_seq += deleted;
            facts.ack_floor.last_active = facts.ts;
            facts.ack_floor.stream_seq + 1
        }
    };
    let stream = StreamFacts {
        retention: "limits".into(),
        discard: "old".into(),
        max_msgs: Some(1000),
        max_bytes: None,
        max_age: None,
        max_msgs_per_subject: None,
        discard_new_per_subject: false,
        first_seq,
        last_seq: first_seq + 999,
    };
    Observed::Found {
        facts,
        stream: Some(stream),
    }
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
    /// replica, after the next lookup of its connection.
    #[test]
    fn times_to_restart_with_the_recommended_settings() {
        assert_eq!(span(Fault::GaveUp), (20_000, 29_500));
        assert_eq!(span(Fault::HalfOpen), (71_000, 80_500));
        assert_eq!(span(Fault::Unbound), (20_000, 69_500));
        assert_eq!(span(Fault::Absent), (20_000, 69_500));
        assert_eq!(span(Fault::Stalled), (80_000, 129_500));
        assert_eq!(span(Fault::Losing), (80_500, 130_000));
        let deaf = |connections, direct| {
            span(Fault::Deaf {
                connections,
                direct,
            })
        };
        assert_eq!(deaf(100, false), (20_000, 69_500));
        assert_eq!(deaf(1_000, false), (20_000, 69_500));
        assert_eq!(deaf(10_000, true), (20_000, 69_500));
        assert_eq!(deaf(2_500, false), (20_000, 319_500));
        assert_eq!(deaf(10_000, false), (20_000, 1_219_500));
        // An hour of phases, tried a period and a half apart.
        let (fastest, slowest) = deaf(30_000, false);
        assert_eq!(fastest, 20_000);
        assert!((3_618_000..=3_620_000).contains(&slowest), "{slowest}");
    }

    /// The schedule the README's fleet table and the fleet benchmark's kubelet averages rest
    /// on: two hours of runs at `periodSeconds: 10` with the defaults. 1 run in 5 asks about
    /// the consumers; up to 1,000 connections in the account (or at the monitoring port) each
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
        assert_eq!(at(100, false), (144, 143, 1));
        assert_eq!(at(1_000, false), (144, 143, 1));
        assert_eq!(at(2_500, false), (144, 23, 1));
        assert_eq!(at(10_000, false), (144, 5, 1));
        assert_eq!(at(10_003, false), (144, 5, 1));
        assert_eq!(at(10_000, true), (144, 143, 1));
        assert_eq!(at(100_000, false), (144, 1, 1));
        // A lookup 126 runs apart (21 minutes) falls between looks 4 times in 5.
        let s = schedule(
            126 * 5 + 1,
            Cadence::DEFAULT,
            TrustSetting::Auto,
            10_500,
            false,
        );
        assert_eq!((s.looks_with_lookup, s.lookups_alone), (1, 4));
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
