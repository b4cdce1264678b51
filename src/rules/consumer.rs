//! The consumer verdict: is the pod's JetStream consumer bound, and progressing when work is
//! waiting? Pure: what was observed, the previous sample, policy and `now` in; a judgement
//! and the next sample out. Progress, not backlog (ADR 0003): a serialized consumer holds a
//! large, growing backlog while healthy, and an idle one is never stuck. The sample holds
//! observations, never a verdict, so the next healthy run passes.

use crate::facts::{ConsumerFacts, Observed, Sample, StreamFacts, Unknown};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    pub stall_after: Duration,
}

/// The stall window actually used, and why it is longer than `--stall-after` when it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub duration: Duration,
    /// Set when raised to 2 × this ack_wait.
    pub raised_for_ack_wait: Option<Duration>,
}

/// Never shorter than twice the consumer's ack_wait. After a server restart a
/// `max_ack_pending: 1` consumer whose in-flight ack was lost waits a full ack_wait for the
/// redelivery (ENGINEERING.md §1), and the redelivered message may then take up to another
/// ack_wait to process: 2 × ack_wait is the longest gap a healthy consumer can show.
pub fn window(policy: &Policy, ack_wait: Option<Duration>) -> Window {
    match ack_wait.map(|w| w * 2) {
        Some(twice) if twice > policy.stall_after => Window {
            duration: twice,
            raised_for_ack_wait: ack_wait,
        },
        _ => Window {
            duration: policy.stall_after,
            raised_for_ack_wait: None,
        },
    }
}

/// Which clock measured the time since progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// `ack_floor.last_active` against the server's `ts`.
    LastActive,
    /// The ack floor compared with the previous sample.
    Samples,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Healthy {
    /// Nothing waiting: however long, idle is not stuck.
    Idle,
    Paused,
    /// Real progress `since` ago, within the window.
    Progressing {
        since: Duration,
        evidence: Evidence,
    },
    /// No earlier sample and no usable last_active: judged from the next run on.
    FirstSample,
    /// No progress for a window, but the client started less than a window ago: it gets its
    /// chance. Given by the check's per-pod policy (`rules::check`), never by `judge`.
    YoungClient {
        stalled: Duration,
        client_age: Duration,
    },
    /// No progress for a window, but the client's start time could not be read.
    ClientAgeUnknown {
        stalled: Duration,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    StreamMissing,
    ConsumerMissing,
    /// A push consumer with nothing subscribed to its deliver subject.
    Unbound {
        waiting: u64,
    },
    /// Work waiting and the ack floor still for a window.
    Stalled {
        stalled: Duration,
        evidence: Evidence,
        floor: u64,
        waiting: u64,
    },
    /// The floor moves only because retention deletes messages from under the consumer
    /// (limits, discard old): it sits at the stream's first sequence. Messages are lost.
    Retention {
        stalled: Duration,
        first_seq: u64,
        waiting: u64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Healthy(Healthy),
    Unhealthy(Fault),
    NotJudged(Unknown),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub outcome: Outcome,
    pub window: Option<Window>,
    /// What to keep for the next run; None when there is nothing to compare (not found).
    pub sample: Option<Sample>,
}

/// A previous sample is ignored when older than this: the pairs it would make say little
/// about the last window.
fn stale_after(window: Duration) -> Duration {
    (window * 2).max(Duration::from_secs(600))
}

/// Judges one consumer against its previous sample, at `now_ms` (local clock, ms since the
/// epoch). Whoever holds the consumer is not considered here: that is the caller's policy.
pub fn judge(
    observed: &Observed,
    prev: Option<&Sample>,
    policy: &Policy,
    now_ms: i64,
) -> Judgement {
    let (facts, stream) = match observed {
        Observed::Found { facts, stream } => (facts, stream.as_ref()),
        Observed::StreamMissing => return bare(Outcome::Unhealthy(Fault::StreamMissing)),
        Observed::ConsumerMissing => return bare(Outcome::Unhealthy(Fault::ConsumerMissing)),
        Observed::NotJudged(why) => return bare(Outcome::NotJudged(why.clone())),
    };
    let window = window(policy, facts.ack_wait);
    let waiting = facts.waiting();
    let prev = prev.filter(|p| {
        p.created == facts.created
            && facts.ack_floor.consumer_seq >= p.floor_consumer_seq
            && now_ms >= p.seen_at_ms
            && ms(now_ms - p.seen_at_ms) <= stale_after(window.duration)
    });
    // The floor below the first message of a stream that drops unacked messages: nothing it
    // acknowledged is still there, so whatever moves it is retention, not acks (measured:
    // floor = first_seq - 1 while messages are deleted from under it), and its last_active
    // moves with it. A floor at or past first_seq acked messages retention has not reached.
    let pinned = waiting > 0
        && stream.is_some_and(|s| drops_unacked(s) && facts.ack_floor.stream_seq < s.first_seq);
    let advanced = prev.is_some_and(|p| facts.ack_floor.consumer_seq > p.floor_consumer_seq);
    let real_progress = advanced && !pinned;
    let progress_at_ms = match prev {
        Some(p) if waiting > 0 && !facts.paused && !real_progress => p.progress_at_ms,
        _ => now_ms,
    };
    let sample = Sample {
        created: facts.created.clone(),
        floor_consumer_seq: facts.ack_floor.consumer_seq,
        floor_stream_seq: facts.ack_floor.stream_seq,
        progress_at_ms,
        seen_at_ms: now_ms,
    };
    let since = since_progress(facts, prev, pinned, progress_at_ms, now_ms);
    // Retention is what moves a pinned floor; a pinned floor that stands still is a plain
    // stall (a fresh stream's floor 0 sits below first_seq 1 too).
    let dragged_to = stream.filter(|_| pinned && advanced).map(|s| s.first_seq);
    let outcome = verdict(facts, since, dragged_to, &window);
    Judgement {
        outcome,
        window: Some(window),
        sample: Some(sample),
    }
}

/// `since`: the time since real progress, when it can be told. `dragged_to`: the stream's
/// first sequence, when retention is what moved the floor.
fn verdict(
    facts: &ConsumerFacts,
    since: Option<(Duration, Evidence)>,
    dragged_to: Option<u64>,
    window: &Window,
) -> Outcome {
    let waiting = facts.waiting();
    if facts.paused {
        return Outcome::Healthy(Healthy::Paused);
    }
    if facts.push() && !facts.push_bound {
        return Outcome::Unhealthy(Fault::Unbound { waiting });
    }
    if waiting == 0 {
        return Outcome::Healthy(Healthy::Idle);
    }
    let Some((stalled, evidence)) = since else {
        return Outcome::Healthy(Healthy::FirstSample);
    };
    if stalled < window.duration {
        return Outcome::Healthy(Healthy::Progressing {
            since: stalled,
            evidence,
        });
    }
    match dragged_to {
        Some(first_seq) => Outcome::Unhealthy(Fault::Retention {
            stalled,
            first_seq,
            waiting,
        }),
        None => Outcome::Unhealthy(Fault::Stalled {
            stalled,
            evidence,
            floor: facts.ack_floor.consumer_seq,
            waiting,
        }),
    }
}

/// How long since real progress, by the best clock available.
fn since_progress(
    facts: &ConsumerFacts,
    prev: Option<&Sample>,
    pinned: bool,
    progress_at_ms: i64,
    now_ms: i64,
) -> Option<(Duration, Evidence)> {
    // Server clock on both sides; never trusted while retention may be moving the floor.
    let age = |t: Option<i128>| -> Option<Duration> {
        let (ts, t) = (facts.ts?, t?);
        Some(Duration::from_nanos(u64::try_from((ts - t).max(0)).ok()?))
    };
    let acked = (!pinned)
        .then(|| age(facts.ack_floor.last_active))
        .flatten();
    let by_samples = prev.map(|_| ms(now_ms - progress_at_ms));
    match (acked, by_samples) {
        (Some(a), Some(s)) if a < s => Some((a, Evidence::LastActive)),
        (_, Some(s)) => Some((s, Evidence::Samples)),
        // One sample: the last ack is old, but the work may have arrived just now (a quiet
        // consumer); it cannot have been waiting longer than since the last delivery.
        (Some(a), None) => {
            let delivered = age(facts.delivered.last_active).unwrap_or(a);
            Some((a.min(delivered), Evidence::LastActive))
        }
        (None, None) => None,
    }
}

/// `limits` with `discard: old`: the setting under which retention removes messages a
/// consumer has not acknowledged, dragging its ack floor along.
fn drops_unacked(stream: &StreamFacts) -> bool {
    stream.retention == "limits" && stream.discard == "old"
}

fn ms(millis: i64) -> Duration {
    Duration::from_millis(millis.max(0) as u64)
}

fn bare(outcome: Outcome) -> Judgement {
    Judgement {
        outcome,
        window: None,
        sample: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{AckPolicy, Sequence};

    const S: i128 = 1_000_000_000;
    /// The server's clock at "now" in every row: 10 000 s after the epoch.
    const TS: i128 = 10_000 * S;
    const NOW_MS: i64 = 10_000_000;

    fn facts(pending: u64, ack_pending: u64, floor: u64) -> ConsumerFacts {
        ConsumerFacts {
            stream: "TF_RAW".into(),
            name: "latest-kv".into(),
            created: "2026-08-20T00:00:00Z".into(),
            deliver_subject: Some("deliver.latest-kv".into()),
            deliver_group: Some("latest-kv".into()),
            push_bound: true,
            num_pending: pending,
            num_ack_pending: ack_pending,
            num_waiting: 0,
            num_redelivered: 0,
            ack_floor: Sequence {
                consumer_seq: floor,
                stream_seq: floor,
                last_active: None,
            },
            delivered: Sequence {
                consumer_seq: floor + ack_pending,
                stream_seq: floor + ack_pending,
                last_active: None,
            },
            ack_policy: AckPolicy::Explicit,
            ack_wait: Some(Duration::from_secs(30)),
            max_deliver: None,
            max_ack_pending: Some(1),
            paused: false,
            ts: Some(TS),
        }
    }

    /// `secs` seconds before the server's "now".
    fn ago(secs: i128) -> Option<i128> {
        Some(TS - secs * S)
    }

    fn sample(floor: u64, progress_secs_ago: i64, seen_secs_ago: i64) -> Sample {
        Sample {
            created: "2026-08-20T00:00:00Z".into(),
            floor_consumer_seq: floor,
            floor_stream_seq: floor,
            progress_at_ms: NOW_MS - progress_secs_ago * 1000,
            seen_at_ms: NOW_MS - seen_secs_ago * 1000,
        }
    }

    /// A stream whose retention does (limits, discard old) or does not drop unacked messages.
    pub(crate) fn stream_facts(drops_unacked: bool, first_seq: u64) -> StreamFacts {
        StreamFacts {
            retention: if drops_unacked { "limits" } else { "workqueue" }.into(),
            discard: "old".into(),
            max_msgs: Some(200),
            max_bytes: None,
            max_age: None,
            max_msgs_per_subject: None,
            discard_new_per_subject: false,
            first_seq,
            last_seq: first_seq + 199,
        }
    }

    fn found(f: ConsumerFacts) -> Observed {
        Observed::Found {
            facts: f,
            stream: None,
        }
    }

    const POLICY: Policy = Policy {
        stall_after: Duration::from_secs(60),
    };

    fn judged(o: &Observed, prev: Option<&Sample>) -> Judgement {
        judge(o, prev, &POLICY, NOW_MS)
    }

    fn outcome(o: &Observed, prev: Option<&Sample>) -> Outcome {
        judged(o, prev).outcome
    }

    /// ADR 0003's Verification table, row by row, as the consumer verdict sees each case.
    #[test]
    fn the_adr_verification_table() {
        // No subscriber, backlog 93,000: push_bound false → alert, at once.
        let mut unbound = facts(93_000, 0, 0);
        unbound.push_bound = false;
        assert_eq!(
            outcome(&found(unbound), None),
            Outcome::Unhealthy(Fault::Unbound { waiting: 93_000 })
        );

        // Subscriber alive, never acking: bound, backlog 4,000, floor frozen at 0 → alert
        // once the floor has been still for the window (two samples 70 s apart).
        let wedged = facts(3_999, 1, 0);
        assert!(matches!(
            outcome(&found(wedged), Some(&sample(0, 70, 10))),
            Outcome::Unhealthy(Fault::Stalled {
                floor: 0,
                waiting: 4_000,
                evidence: Evidence::Samples,
                ..
            })
        ));

        // Expected durable absent → alert, naming which.
        assert_eq!(
            outcome(&Observed::ConsumerMissing, None),
            Outcome::Unhealthy(Fault::ConsumerMissing)
        );
        assert_eq!(
            outcome(&Observed::StreamMissing, None),
            Outcome::Unhealthy(Fault::StreamMissing)
        );

        // Serialized max_ack_pending 1 under sustained load: backlog 10,974 and growing,
        // floor 117,109 → 149,520 → OK.
        let serialized = facts(10_973, 1, 149_520);
        assert!(matches!(
            outcome(&found(serialized), Some(&sample(117_109, 70, 10))),
            Outcome::Healthy(Healthy::Progressing { .. })
        ));

        // Whole platform healthy under load: bound and progressing → OK.
        let mut healthy = facts(50, 1, 2_000);
        healthy.ack_floor.last_active = ago(1);
        assert!(matches!(
            outcome(&found(healthy), None),
            Outcome::Healthy(Healthy::Progressing {
                evidence: Evidence::LastActive,
                ..
            })
        ));
    }

    #[test]
    fn idle_is_never_stuck_however_long() {
        let mut idle = facts(0, 0, 500);
        idle.ack_floor.last_active = ago(86_400);
        assert_eq!(
            outcome(&found(idle.clone()), Some(&sample(500, 80_000, 10))),
            Outcome::Healthy(Healthy::Idle)
        );
        // And the stall clock restarts when work appears after idling.
        let j = judged(&found(idle), Some(&sample(500, 80_000, 10)));
        assert_eq!(j.sample.unwrap().progress_at_ms, NOW_MS);
    }

    #[test]
    fn a_quiet_consumer_with_new_work_is_not_stalled_by_an_old_last_active() {
        // Last ack an hour ago, a message delivered a second ago: first sample.
        let mut quiet = facts(0, 1, 41);
        quiet.ack_floor.last_active = ago(3_600);
        quiet.delivered.last_active = ago(1);
        assert!(matches!(
            outcome(&found(quiet.clone()), None),
            Outcome::Healthy(Healthy::Progressing { .. })
        ));
        // With a previous sample (idle 10 s ago), the samples bound it too.
        assert!(matches!(
            outcome(&found(quiet), Some(&sample(41, 10, 10))),
            Outcome::Healthy(Healthy::Progressing {
                evidence: Evidence::Samples,
                ..
            })
        ));
    }

    #[test]
    fn last_active_judges_from_one_sample_when_delivery_also_stopped() {
        let mut stuck = facts(200, 1, 7);
        stuck.ack_floor.last_active = ago(300);
        stuck.delivered.last_active = ago(300);
        assert!(matches!(
            outcome(&found(stuck), None),
            Outcome::Unhealthy(Fault::Stalled {
                evidence: Evidence::LastActive,
                ..
            })
        ));
    }

    #[test]
    fn without_last_active_samples_decide() {
        // After a server restart last_active is gone; ts alone does not help.
        let f = facts(200, 1, 7);
        assert_eq!(
            outcome(&found(f.clone()), None),
            Outcome::Healthy(Healthy::FirstSample)
        );
        assert!(matches!(
            outcome(&found(f.clone()), Some(&sample(7, 30, 10))),
            Outcome::Healthy(Healthy::Progressing {
                evidence: Evidence::Samples,
                ..
            })
        ));
        assert!(matches!(
            outcome(&found(f), Some(&sample(7, 61, 10))),
            Outcome::Unhealthy(Fault::Stalled { .. })
        ));
        // 2.9.x has no ts: last_active cannot be measured, samples decide.
        let mut old = facts(200, 1, 7);
        old.ts = None;
        old.ack_floor.last_active = ago(1);
        assert_eq!(
            outcome(&found(old), None),
            Outcome::Healthy(Healthy::FirstSample)
        );
    }

    #[test]
    fn progress_clears_a_pending_fault_never_latching() {
        let f = facts(200, 1, 8);
        let j = judged(&found(f), Some(&sample(7, 500, 10)));
        assert!(matches!(
            j.outcome,
            Outcome::Healthy(Healthy::Progressing { .. })
        ));
        assert_eq!(j.sample.unwrap().progress_at_ms, NOW_MS);
    }

    #[test]
    fn retention_moving_the_floor_is_not_progress() {
        // Measured on 2.10.26: a never-acking consumer on a max_msgs-capped, discard-old
        // stream under load has its floor at first_seq - 1, moving at the publish rate, and a
        // last_active that moves with it.
        let mut lost = facts(190, 10, 1400);
        lost.ack_floor.last_active = ago(0);
        lost.delivered.last_active = ago(0);
        let stream = stream_facts(true, 1401);
        let observed = Observed::Found {
            facts: lost,
            stream: Some(stream.clone()),
        };
        assert_eq!(
            outcome(&observed, None),
            Outcome::Healthy(Healthy::FirstSample),
            "last_active is not trusted"
        );
        let prev = sample(517, 70, 10);
        assert_eq!(
            outcome(&observed, Some(&prev)),
            Outcome::Unhealthy(Fault::Retention {
                stalled: Duration::from_secs(70),
                first_seq: 1401,
                waiting: 200
            })
        );
        // The same floor movement on a workqueue stream (acked messages are deleted, so the
        // floor always sits at first_seq - 1) is progress.
        let mut acked = facts(190, 10, 1400);
        acked.ack_floor.last_active = ago(0);
        let work = Observed::Found {
            facts: acked,
            stream: Some(stream_facts(false, 1401)),
        };
        assert!(matches!(
            outcome(&work, Some(&prev)),
            Outcome::Healthy(Healthy::Progressing { .. })
        ));
        // A floor below first_seq that does not move is a plain stall: a fresh stream's
        // floor 0 sits below first_seq 1 before anything is acked.
        let fresh = Observed::Found {
            facts: facts(499, 1, 0),
            stream: Some(stream_facts(true, 1)),
        };
        assert!(matches!(
            outcome(&fresh, Some(&sample(0, 70, 10))),
            Outcome::Unhealthy(Fault::Stalled {
                floor: 0,
                waiting: 500,
                ..
            })
        ));
        // A consumer ahead of retention on the same capped stream acks messages that still
        // exist: its floor and last_active are its own.
        let mut ahead = facts(90, 1, 1500);
        ahead.ack_floor.last_active = ago(1);
        let capped = Observed::Found {
            facts: ahead,
            stream: Some(stream_facts(true, 1401)),
        };
        assert!(matches!(
            outcome(&capped, None),
            Outcome::Healthy(Healthy::Progressing {
                evidence: Evidence::LastActive,
                ..
            })
        ));
    }

    #[test]
    fn paused_and_pull_consumers() {
        let mut paused = facts(1_000, 0, 0);
        paused.paused = true;
        paused.push_bound = false;
        assert_eq!(
            outcome(&found(paused), Some(&sample(0, 999, 10))),
            Outcome::Healthy(Healthy::Paused)
        );
        // A pull consumer has no push_bound; clients waiting in pulls with nothing pending.
        let mut pull = facts(0, 0, 300);
        pull.deliver_subject = None;
        pull.push_bound = false;
        pull.num_waiting = 2;
        assert_eq!(outcome(&found(pull), None), Outcome::Healthy(Healthy::Idle));
    }

    #[test]
    fn the_window_is_never_shorter_than_twice_ack_wait_and_says_so() {
        let mut slow = facts(10, 1, 7);
        slow.ack_wait = Some(Duration::from_secs(90));
        let j = judged(&found(slow.clone()), Some(&sample(7, 100, 10)));
        assert_eq!(
            j.window,
            Some(Window {
                duration: Duration::from_secs(180),
                raised_for_ack_wait: Some(Duration::from_secs(90))
            })
        );
        assert!(matches!(
            j.outcome,
            Outcome::Healthy(Healthy::Progressing { .. })
        ));
        let j = judged(&found(slow), Some(&sample(7, 181, 10)));
        assert!(matches!(
            j.outcome,
            Outcome::Unhealthy(Fault::Stalled { .. })
        ));
        // The default 30 s ack_wait leaves the default 60 s window as it is.
        assert_eq!(
            window(&POLICY, Some(Duration::from_secs(30))).raised_for_ack_wait,
            None
        );
    }

    #[test]
    fn a_foreign_or_stale_sample_is_a_first_sample() {
        let f = facts(200, 1, 7);
        let mut recreated = sample(7, 500, 10);
        recreated.created = "2026-09-01T00:00:00Z".into();
        let backwards = sample(9_000, 500, 10);
        let stale = sample(7, 5_000, 3_600);
        let future = sample(7, -100, -100);
        for prev in [recreated, backwards, stale, future] {
            assert_eq!(
                outcome(&found(f.clone()), Some(&prev)),
                Outcome::Healthy(Healthy::FirstSample),
                "{prev:?}"
            );
        }
    }
}
