//! The guard's verdict over every durable: the consumer rules (`rules::consumer`, the same
//! ones `check --consumer` uses) applied to two looks an interval apart, plus what only the
//! guard can see: the server's advisories counted over the interval. ADR 0003: a fault is
//! reported only if seen in both looks, so a rollout that leaves a deliver group briefly
//! without a subscriber is not an alert; the guard alerts and never remediates. Pure.

use super::consumer::{self, Fault, Healthy, Judgement, Outcome, Policy, Progress};
use crate::facts::{ConsumerName, Losses, Observed, Sample, Unknown};
use core::time::Duration;

/// What was seen of one consumer, in each look and in between. The first look is kept only as
/// its judgement (`consumer::judge` with no previous sample): the guard holds that, not the
/// server's answer, for every durable between the looks.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    /// None: not in that look's listing (created or deleted in between).
    pub first: Option<&'a Judgement>,
    pub second: Option<&'a Observed>,
    /// The advisories counted for it over the interval; None when they could not be counted.
    pub losses: Option<Losses>,
    /// Named by `--ignore`: listed as ignored, never judged.
    pub ignored: bool,
}

/// Whether `--ignore`'s list names `name`: the durable itself, or its whole stream
/// (`STREAM/*`).
pub fn ignored(list: &[ConsumerName], name: &ConsumerName) -> bool {
    list.iter()
        .any(|i| i == name || (i.durable == "*" && i.stream == name.stream))
}

/// How far apart the two looks were, by the wall clock (never less than nothing: a clock that
/// stepped back).
pub fn interval(first_ms: i64, second_ms: i64) -> Duration {
    consumer::ms(second_ms - first_ms)
}

/// One consumer's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// `--ignore`d.
    Ignored,
    Healthy(Note),
    Fault(GuardFault),
    /// One of the looks could not say (an election, a leader that did not answer): unknown in
    /// this run, never a fault.
    Unknown {
        first: bool,
        why: Unknown,
    },
}

/// Why a consumer is healthy, when more than the second look's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// The second look's outcome says it.
    Judged(Outcome),
    /// Unbound in one look only: a rollout, or a subscriber that came back.
    UnboundOnce { in_first: bool },
    /// In one look only: created or deleted during the interval.
    InOneLook { in_first: bool },
}

#[derive(Debug, Clone, PartialEq)]
pub enum GuardFault {
    /// A consumer fault seen across both looks: unbound in both, a stall over the interval,
    /// held at the front of its stream, absent in both.
    Consumer(Fault),
    /// Retention deleted messages before they were acknowledged during the interval, and no
    /// ack shows the consumer working past them.
    Losing { deleted: u64, interval: Duration },
    /// Messages exhausted their deliveries during the interval with no ack in it.
    Dropped { exhausted: u64, interval: Duration },
    /// NATS's, not the pods': work waited with no progress over the interval while the facts
    /// prove no subscriber holds any of it and the server delivered nothing
    /// (`Healthy::ServerNotDelivering`, the second look's outcome).
    ServerNotDelivering,
}

/// Judges one consumer from its two looks, taken at `first_ms` and `second_ms`.
pub fn judge(seen: Seen, policy: &Policy, first_ms: i64, second_ms: i64) -> (Verdict, Judgement) {
    let previous: Option<&Sample> = seen.first.and_then(|j| j.sample.as_ref());
    let second = seen
        .second
        .map(|o| consumer::judge(o, previous, policy, second_ms));
    let interval = interval(first_ms, second_ms);
    let verdict = verdict(&seen, second.as_ref(), interval);
    let missing = consumer::bare(Outcome::Unhealthy(Fault::ConsumerMissing), None);
    let shown = second.or_else(|| seen.first.cloned()).unwrap_or(missing);
    (verdict, shown)
}

fn verdict(seen: &Seen, second: Option<&Judgement>, interval: Duration) -> Verdict {
    if seen.ignored {
        return Verdict::Ignored;
    }
    for (is_first, j) in [(true, seen.first), (false, second)] {
        if let Some(Outcome::NotJudged(why)) = j.map(|j| &j.outcome) {
            return Verdict::Unknown {
                first: is_first,
                why: why.clone(),
            };
        }
    }
    // A consumer in one look only: created or deleted during the interval. Absent (or
    // unbound) in one look is never a fault; an expected one absent from the listing is asked
    // for by name in each look, so it is never in one look only.
    let (Some(first), Some(second)) = (seen.first, second) else {
        let in_first = seen.first.is_some();
        return Verdict::Healthy(Note::InOneLook { in_first });
    };
    let absent = |o: &Outcome| {
        matches!(
            o,
            Outcome::Unhealthy(Fault::ConsumerMissing | Fault::StreamMissing)
        )
    };
    let unbound = |o: &Outcome| matches!(o, Outcome::Unhealthy(Fault::Unbound { .. }));
    match &second.outcome {
        o if absent(o) && !absent(&first.outcome) => {
            return Verdict::Healthy(Note::InOneLook { in_first: true })
        }
        o if unbound(o) && !unbound(&first.outcome) => {
            return Verdict::Healthy(Note::UnboundOnce { in_first: false })
        }
        // Across both looks: absent or unbound in each, or by construction (the stall clock
        // counted the interval between them; held at the front in both).
        Outcome::Unhealthy(f) => return Verdict::Fault(GuardFault::Consumer(f.clone())),
        Outcome::Healthy(Healthy::ServerNotDelivering { .. }) => {
            return Verdict::Fault(GuardFault::ServerNotDelivering)
        }
        _ => {}
    }
    // What only the advisories can tell, where no ack shows the consumer working past it.
    let acked = matches!(second.progress, Some(Progress::Acked | Progress::Delivered));
    if let Some(losses) = seen.losses.filter(|_| !acked) {
        if losses.deleted_unacked > 0 {
            return Verdict::Fault(GuardFault::Losing {
                deleted: losses.deleted_unacked,
                interval,
            });
        }
        if losses.exhausted > 0 {
            return Verdict::Fault(GuardFault::Dropped {
                exhausted: losses.exhausted,
                interval,
            });
        }
    }
    if unbound(&first.outcome) {
        return Verdict::Healthy(Note::UnboundOnce { in_first: true });
    }
    Verdict::Healthy(Note::Judged(second.outcome.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_names_a_durable_or_its_whole_stream() {
        let name = |s: &str, d: &str| ConsumerName {
            stream: s.into(),
            durable: d.into(),
        };
        let list = [name("A", "x"), name("B", "*")];
        assert!(ignored(&list, &name("A", "x")));
        assert!(!ignored(&list, &name("A", "y")));
        assert!(!ignored(&list, &name("C", "x")));
        assert!(ignored(&list, &name("B", "anything")));
        assert!(!ignored(&[name("A", "*")], &name("B", "*x")));
        assert!(!ignored(&[], &name("A", "x")));
    }

    #[test]
    fn the_interval_is_the_wall_clocks() {
        assert_eq!(interval(1_000, 61_500), Duration::from_millis(60_500));
        assert_eq!(interval(5_000, 4_000), Duration::ZERO);
    }
    use crate::facts::{ConsumerFacts, StreamFacts};

    const S: i64 = 1_000_000_000;
    const T0: i64 = 10_000_000;
    const INTERVAL_MS: i64 = 30_000;
    const POLICY: Policy = Policy {
        stall_after: Duration::from_secs(30),
    };

    /// A bound push consumer at `floor` with `pending` + `ack_pending` waiting, looked at
    /// `at_ms` (the server's clock agrees); ack_wait 10 s: the window is the interval, 30 s.
    fn info(pending: u64, ack_pending: u64, floor: u64, at_ms: i64) -> ConsumerFacts {
        ConsumerFacts {
            ack_wait: Some(Duration::from_secs(10)),
            ts: Some(at_ms * 1_000_000),
            ..crate::rules::consumer::tests::facts(pending, ack_pending, floor)
        }
    }

    fn found(f: ConsumerFacts) -> Observed {
        Observed::Found {
            facts: f,
            stream: None,
        }
    }

    /// Both looks as the server answered them (the first is judged on its own by `run`).
    #[derive(Clone, Copy)]
    struct Looks<'a> {
        first: Option<&'a Observed>,
        second: Option<&'a Observed>,
        losses: Option<Losses>,
        ignored: bool,
    }

    fn seen<'a>(a: Option<&'a Observed>, b: Option<&'a Observed>) -> Looks<'a> {
        Looks {
            first: a,
            second: b,
            losses: Some(Losses::default()),
            ignored: false,
        }
    }

    fn run(s: Looks) -> Verdict {
        let first = s.first.map(|o| consumer::judge(o, None, &POLICY, T0));
        let seen = Seen {
            first: first.as_ref(),
            second: s.second,
            losses: s.losses,
            ignored: s.ignored,
        };
        judge(seen, &POLICY, T0, T0 + INTERVAL_MS).0
    }

    /// Work waiting over the interval, nothing delivered, and nothing any subscriber holds:
    /// NATS's fault, apart from a pod's; the same with one message awaiting an ack is a pod's.
    #[test]
    fn a_stall_nats_holds_back_is_named_as_nats() {
        let (a, b) = (
            found(info(30, 0, 5, T0)),
            found(info(30, 0, 5, T0 + INTERVAL_MS)),
        );
        assert_eq!(
            run(seen(Some(&a), Some(&b))),
            Verdict::Fault(GuardFault::ServerNotDelivering)
        );
        let (a, b) = (
            found(info(29, 1, 5, T0)),
            found(info(29, 1, 5, T0 + INTERVAL_MS)),
        );
        assert!(matches!(
            run(seen(Some(&a), Some(&b))),
            Verdict::Fault(GuardFault::Consumer(Fault::Stalled { .. }))
        ));
    }

    /// ADR 0003's Verification table through the guard.
    #[test]
    fn the_adr_verification_table() {
        // No subscriber, backlog 93,000, in both looks: alert.
        let mut a = info(93_000, 0, 0, T0);
        a.push_bound = false;
        let mut b = info(93_000, 0, 0, T0 + INTERVAL_MS);
        b.push_bound = false;
        let (a, b) = (found(a), found(b));
        assert!(matches!(
            run(seen(Some(&a), Some(&b))),
            Verdict::Fault(GuardFault::Consumer(Fault::Unbound { waiting: 93_000 }))
        ));
        // Subscriber alive, never acking, backlog 4,000, floor frozen at 0: alert.
        let a = found(info(3_999, 1, 0, T0));
        let b = found(info(3_999, 1, 0, T0 + INTERVAL_MS));
        assert!(matches!(
            run(seen(Some(&a), Some(&b))),
            Verdict::Fault(GuardFault::Consumer(Fault::Stalled { .. }))
        ));
        // Expected durable absent, in both looks (asked for by name): alert.
        let gone = Observed::ConsumerMissing;
        assert!(matches!(
            run(seen(Some(&gone), Some(&gone))),
            Verdict::Fault(GuardFault::Consumer(Fault::ConsumerMissing))
        ));
        // Serialized under sustained load: backlog 10,974, floor 117,109 → 149,520: OK.
        let mut a = info(6_728, 1, 117_109, T0);
        a.ack_floor.last_active = Some(T0 * 1_000_000 - S);
        let mut b = info(10_973, 1, 149_520, T0 + INTERVAL_MS);
        b.ack_floor.last_active = Some((T0 + INTERVAL_MS) * 1_000_000 - S / 10);
        let (a, b) = (found(a), found(b));
        assert!(matches!(
            run(seen(Some(&a), Some(&b))),
            Verdict::Healthy(Note::Judged(Outcome::Healthy(Healthy::Progressing(_))))
        ));
        // Whole platform healthy: idle: OK.
        let a = found(info(0, 0, 500, T0));
        let b = found(info(0, 0, 500, T0 + INTERVAL_MS));
        assert!(matches!(
            run(seen(Some(&a), Some(&b))),
            Verdict::Healthy(Note::Judged(Outcome::Healthy(Healthy::Idle)))
        ));
    }

    /// A rollout leaves the deliver group without a subscriber in one look: no alert.
    #[test]
    fn unbound_in_one_look_is_not_an_alert() {
        let mut down = info(40, 0, 7, T0);
        down.push_bound = false;
        let up = info(40, 1, 7, T0 + INTERVAL_MS);
        let (down, up) = (found(down), found(up));
        assert_eq!(
            run(seen(Some(&down), Some(&up))),
            Verdict::Healthy(Note::UnboundOnce { in_first: true })
        );
        let mut later = info(40, 0, 7, T0 + INTERVAL_MS);
        later.push_bound = false;
        let bound = found(info(40, 1, 7, T0));
        let later = found(later);
        assert_eq!(
            run(seen(Some(&bound), Some(&later))),
            Verdict::Healthy(Note::UnboundOnce { in_first: false })
        );
    }

    /// Retention deleting unacknowledged messages, counted by the advisories, where no ack shows
    /// the consumer working past them: losing messages. With acks: the count is reported, not
    /// a fault of this consumer's liveness.
    #[test]
    fn counted_losses_without_acks_are_a_fault() {
        let capped = StreamFacts {
            retention: "limits".into(),
            discard: "old".into(),
            max_msgs: Some(1),
            max_bytes: None,
            max_age: None,
            max_msgs_per_subject: None,
            discard_new_per_subject: false,
            first_seq: 300,
            last_seq: 300,
        };
        let mut a = info(0, 1, 100, T0);
        a.ack_floor.last_active = Some(T0 * 1_000_000);
        let mut b = info(0, 1, 299, T0 + INTERVAL_MS);
        b.ack_floor.last_active = Some((T0 + INTERVAL_MS) * 1_000_000);
        let on = |f: ConsumerFacts| Observed::Found {
            facts: f,
            stream: Some(capped.clone()),
        };
        let (a, b) = (on(a), on(b));
        let mut s = seen(Some(&a), Some(&b));
        s.losses = Some(Losses {
            deleted_unacked: 199,
            ..Losses::default()
        });
        assert_eq!(
            run(s),
            Verdict::Fault(GuardFault::Losing {
                deleted: 199,
                interval: Duration::from_secs(30)
            })
        );
        // The same without advisories: one look cannot tell: not a fault.
        s.losses = None;
        assert!(matches!(
            run(s),
            Verdict::Healthy(Note::Judged(Outcome::Healthy(Healthy::CannotTell { .. })))
        ));
        // Drops after max_deliver with no ack in the interval (only a consumer with a
        // max_deliver drops).
        let dropping = |pending, ack_pending, floor, at_ms| ConsumerFacts {
            max_deliver: Some(3),
            ..info(pending, ack_pending, floor, at_ms)
        };
        let (a, b) = (
            found(dropping(0, 2, 5, T0)),
            found(dropping(0, 0, 7, T0 + INTERVAL_MS)),
        );
        let mut s = seen(Some(&a), Some(&b));
        s.losses = Some(Losses {
            exhausted: 2,
            ..Losses::default()
        });
        assert!(matches!(
            run(s),
            Verdict::Fault(GuardFault::Dropped { exhausted: 2, .. })
        ));
    }

    /// The measured case: a never-acking consumer whose floor retention moved 3846 →
    /// 5870, as many as the advisories counted. With its stream read after it (the listing's
    /// order), the stream begins past the floor: losses, a fault. With the stream read before
    /// it, the stream's first sequence is older than the floor, which then looks like acks
    /// inside the stream: why `observe::listing` reads the stream last.
    #[test]
    fn the_order_of_reads_decides_whether_losses_look_like_acks() {
        let capped = |first_seq| StreamFacts {
            retention: "limits".into(),
            discard: "old".into(),
            max_msgs: None,
            max_bytes: Some(20_000),
            max_age: None,
            max_msgs_per_subject: None,
            discard_new_per_subject: false,
            first_seq,
            last_seq: first_seq + 400,
        };
        let looked = |floor: u64, at_ms: i64, first_seq: u64| {
            let mut f = info(392, 1, floor, at_ms);
            f.ack_floor.stream_seq = floor;
            f.ack_floor.last_active = Some(at_ms * 1_000_000);
            Observed::Found {
                facts: f,
                stream: Some(capped(first_seq)),
            }
        };
        let losses = Some(Losses {
            deleted_unacked: 2024,
            ..Losses::default()
        });
        // Not yet held at the front in the first look (else the floor pinned a whole window
        // is a fault of its own): only the advisories tell.
        let a = looked(3846, T0, 3846);
        let after = looked(5870, T0 + INTERVAL_MS, 5875);
        let mut s = seen(Some(&a), Some(&after));
        s.losses = losses;
        let v = run(s);
        assert!(
            matches!(v, Verdict::Fault(GuardFault::Losing { deleted: 2024, .. })),
            "{v:?}"
        );
        let stale = looked(5870, T0 + INTERVAL_MS, 5600);
        let mut s = seen(Some(&a), Some(&stale));
        s.losses = losses;
        assert!(matches!(
            run(s),
            Verdict::Healthy(Note::Judged(Outcome::Healthy(Healthy::Progressing(_))))
        ));
    }

    #[test]
    fn unknown_ignored_and_one_look_consumers_are_never_faults() {
        let busy = found(info(10, 1, 5, T0));
        let lost = Observed::NotJudged(Unknown::NotReported);
        assert_eq!(
            run(seen(Some(&busy), Some(&lost))),
            Verdict::Unknown {
                first: false,
                why: Unknown::NotReported
            }
        );
        let mut s = seen(Some(&busy), Some(&busy));
        s.ignored = true;
        assert_eq!(run(s), Verdict::Ignored);
        assert_eq!(
            run(seen(None, Some(&busy))),
            Verdict::Healthy(Note::InOneLook { in_first: false })
        );
        // Deleted during the interval, not expected: it is simply gone.
        let gone = Observed::ConsumerMissing;
        assert_eq!(
            run(seen(Some(&busy), Some(&gone))),
            Verdict::Healthy(Note::InOneLook { in_first: true })
        );
    }
}
