//! The consumer verdict: is a JetStream consumer bound, and progressing when work is waiting?
//! Pure: what was observed, the previous sample, policy and `now` in; a judgement and the next
//! sample out. Progress, not backlog (ADR 0003): a serialized consumer holds a large, growing
//! backlog while healthy, and an idle one is never stuck. The sample holds observations, never
//! a verdict, so the next healthy run passes.
//!
//! What the server reports, read in nats-server's consumer.go and measured (docs/server-facts.md):
//! - `ack_floor.last_active` moves on every ack, and on every message the server terminates
//!   because retention deleted it unacknowledged ("Unacknowledged message was deleted"), which
//!   the server handles as an ack. So where retention can delete unacknowledged messages, a
//!   moving floor and a fresh `last_active` are acks or losses, and one consumer info cannot
//!   tell which: the in-pod check says so and does not call it a fault (the guard counts the
//!   server's advisories).
//! - Messages dropped after `max_deliver` leave the ack pending list without an ack: the floor
//!   can move while `last_active` stays where it was. That is not progress.
//! - `last_active` is held in memory: absent before the first ack since the server started.
//!
//! Two clocks, each judged at its window (docs/checks.md, principle 3): the stall clock, the
//! time work was seen waiting with no progress, and the losing clock, the time the floor was
//! seen pinned at the front of a stream that deletes from the front; each interval between
//! looks counts as long as it was. Only the stall clock falls back on the server's clock where
//! the samples cannot count. What a run that could not look does to them is one table
//! (`rules::answers`): a refusal or a late answer lets the time count, anything else (NATS
//! unreachable, an election) starts it over, as does a server restart.

use super::answers;
pub use super::retention::{deletes_unacked, Deletes, RetentionSetting};
use crate::facts::{AckPolicy, ConsumerFacts, Gap, Observed, Sample, StreamFacts, Unknown};
use crate::timing::ACK_WAITS_IN_A_WINDOW;
use core::time::Duration;
use serde::{Deserialize, Serialize};

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
/// redelivery (docs/server-facts.md), and the redelivered message may then take up to another
/// ack_wait to process: 2 × ack_wait is the longest gap a healthy consumer can show.
pub fn window(policy: &Policy, ack_wait: Option<Duration>) -> Window {
    window_for(policy.stall_after, ack_wait)
}

/// `window`, for `--stall-after` `stall_after`.
pub fn window_for(stall_after: Duration, ack_wait: Option<Duration>) -> Window {
    match ack_wait.map(|w| w * ACK_WAITS_IN_A_WINDOW) {
        Some(twice) if twice > stall_after => Window {
            duration: twice,
            raised_for_ack_wait: ack_wait,
        },
        _ => Window {
            duration: stall_after,
            raised_for_ack_wait: None,
        },
    }
}

/// How the consumer moved since the previous sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Acks since the previous sample (`last_active` moved) that retention cannot have made.
    Acked,
    /// `ack_policy: none`: deliveries since the previous sample.
    Delivered,
    /// The floor or `last_active` moved, but retention may have deleted unacknowledged
    /// messages since: acks or losses, one consumer info cannot tell.
    Unclear,
    /// The floor moved with no ack: messages dropped after `max_deliver`, or a purge.
    WithoutAck,
    /// Nothing moved.
    None,
}

impl Progress {
    /// A word for scripts (the JSON `progress` field).
    pub fn as_str(self) -> &'static str {
        match self {
            Progress::Acked => "acked",
            Progress::Delivered => "delivered",
            Progress::Unclear => "unclear",
            Progress::WithoutAck => "without_ack",
            Progress::None => "none",
        }
    }

    /// Whether the consumer may have worked: the stall clock restarts. Where it cannot be
    /// told, it restarts too: a false restart of a healthy pod is the worst outcome.
    fn may_have_worked(self) -> bool {
        matches!(
            self,
            Progress::Acked | Progress::Delivered | Progress::Unclear
        )
    }
}

/// What showed progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// The last ack, this long ago by the server's clock.
    LastAck(Duration),
    /// The ack floor moved since the previous sample, by acks.
    Floor,
    /// Acks since the previous sample above a message still unacknowledged (being
    /// redelivered), which holds the floor.
    AboveFloor,
    /// `ack_policy: none`: messages delivered since the previous sample.
    Deliveries,
}

/// Why the stall clock has nothing to count from this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmeasured {
    /// No previous sample (and no `last_active` the server's clock can measure).
    FirstSample,
    /// A run since the previous sample could not observe the consumer.
    Gap,
    /// The server restarted since the previous sample: it forgot its `last_active` times.
    ServerRestarted,
}

/// Which clock measured the time without progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Evidence {
    /// `ack_floor.last_active` (and `delivered.last_active`) against the server's `ts`.
    LastActive,
    /// The floor compared with the previous samples.
    Samples,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Healthy {
    /// Nothing waiting: however long, idle is not stuck.
    Idle,
    Paused,
    /// Real progress: acks (or deliveries, for `ack_policy: none`).
    Progressing(Moved),
    /// Work waiting and no progress yet, inside the window.
    Waiting {
        stalled: Duration,
        evidence: Evidence,
        /// The floor moved with no ack (`max_deliver` drops): said, never counted.
        moved_without_ack: bool,
    },
    /// The floor moved, and retention may have deleted unacknowledged messages since: acks
    /// or losses, one consumer info cannot tell (the guard counts them).
    CannotTell {
        deletes: Deletes,
    },
    /// Work waiting, and nothing measures how long it has waited without progress: judged
    /// from the next run on.
    Unmeasured(Unmeasured),
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
    /// Work waiting and no progress for a window, but the facts prove the pod holds none of
    /// the work and the server delivered nothing for the window: NATS holds it back, and a
    /// restart cannot help. Not judged.
    ServerNotDelivering {
        stalled: Duration,
        /// Since the server's last delivery (None: none since it started).
        since_delivery: Option<Duration>,
        withheld: Withheld,
    },
    /// The fault (`state`) stood through a new client's window after natsprobe's failures
    /// for it, with no progress since: a restart did not help, and is not repeated until the
    /// consumer progresses, the fault changes or the episode ends. Given by the check's
    /// per-pod policy (`rules::check::after_restart`), never by `judge`. Not judged.
    RestartDidNotHelp {
        stalled: Duration,
        /// The fault's word among `STATES` (`stalled`, `losing`).
        state: &'static str,
        /// How long ago the new client started.
        client_age: Duration,
        /// How long ago natsprobe first failed the pod for it.
        since_first_failure: Duration,
    },
}

/// What proves that the pod holds none of the work that waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Withheld {
    /// A bound push consumer whose acks are explicit, without flow control, with nothing
    /// delivered and unacknowledged: every message the server delivers stays pending until
    /// it is acked, and nothing else stops the server sending (`rate_limit_bps` may).
    Push { rate_limit_bps: Option<u64> },
    /// A pull consumer with pull requests waiting and room under `max_ack_pending`: the
    /// client asks, and the server may send.
    Pulls { requests: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    StreamMissing,
    ConsumerMissing,
    /// A push consumer with nothing subscribed to its deliver subject.
    Unbound {
        waiting: u64,
    },
    /// Work waiting and no progress for a window.
    Stalled {
        stalled: Duration,
        evidence: Evidence,
        floor: u64,
        waiting: u64,
        /// A pull consumer with no pull request waiting: nobody is asking for the work.
        no_pulls: bool,
        moved_without_ack: bool,
    },
    /// For a whole window the floor stayed at the front of a stream that deletes from the
    /// front, with messages waiting behind it, and moved meanwhile: retention deletes them
    /// before they are acknowledged, whoever acks the rest.
    Retention {
        stalled: Duration,
        first_seq: u64,
        behind: u64,
        deletes: Deletes,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Healthy(Healthy),
    Unhealthy(Fault),
    NotJudged(Unknown),
}

/// A consumer's verdict in one word: the JSON's `state`, and the states of docs/checks.md's
/// diagram (tested to be these).
pub const STATES: [&str; 15] = [
    "unmeasured",
    "idle",
    "paused",
    "waiting",
    "progressing",
    "cannot_tell",
    "excused",
    "stalled",
    "losing",
    "unbound",
    "gone",
    "not_judged",
    "carried",
    "server_not_delivering",
    "restart_did_not_help",
];

impl Outcome {
    /// Its word among `STATES`; `carried`: a run that could not look reports the fault the
    /// last look saw.
    pub fn state(&self, carried: bool) -> &'static str {
        match self {
            _ if carried => "carried",
            Outcome::Healthy(Healthy::Unmeasured(_)) => "unmeasured",
            Outcome::Healthy(Healthy::Idle) => "idle",
            Outcome::Healthy(Healthy::Paused) => "paused",
            Outcome::Healthy(Healthy::Waiting { .. }) => "waiting",
            Outcome::Healthy(Healthy::Progressing(_)) => "progressing",
            Outcome::Healthy(Healthy::CannotTell { .. }) => "cannot_tell",
            Outcome::Healthy(Healthy::YoungClient { .. } | Healthy::ClientAgeUnknown { .. }) => {
                "excused"
            }
            Outcome::Healthy(Healthy::ServerNotDelivering { .. }) => "server_not_delivering",
            Outcome::Healthy(Healthy::RestartDidNotHelp { .. }) => "restart_did_not_help",
            Outcome::Unhealthy(Fault::Stalled { .. }) => "stalled",
            Outcome::Unhealthy(Fault::Retention { .. }) => "losing",
            Outcome::Unhealthy(Fault::Unbound { .. }) => "unbound",
            Outcome::Unhealthy(Fault::StreamMissing | Fault::ConsumerMissing) => "gone",
            Outcome::NotJudged(_) => "not_judged",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub outcome: Outcome,
    pub window: Option<Window>,
    /// How the consumer moved since the previous sample; None without one.
    pub progress: Option<Progress>,
    /// What to keep for the next run; None when there is nothing to keep (not found).
    pub sample: Option<Sample>,
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
        Observed::StreamMissing => return bare(Outcome::Unhealthy(Fault::StreamMissing), None),
        Observed::ConsumerMissing => return bare(Outcome::Unhealthy(Fault::ConsumerMissing), None),
        // Not observed: what this answer does to the clocks is the one table's.
        Observed::NotJudged(why) => {
            let kept = prev.map(|p| gapped(p, answers::meaning(why).row.clock()));
            return bare(Outcome::NotJudged(why.clone()), kept);
        }
    };
    let window = window(policy, facts.ack_wait);
    let prev = prev.filter(|p| same_consumer(p, facts, now_ms));
    let deletes = stream.and_then(deletes_unacked);
    let progress = prev.map(|p| progress(facts, stream, deletes.as_ref(), p));
    // Paused or unbound, the consumer could do no work, so no stall runs.
    let waiting = facts.workable();
    let measured = counted(facts, prev, now_ms);
    let interval = measured.ok();
    let stalled = stall_clock(facts, prev, interval, progress, deletes.as_ref(), waiting);
    let pinned = pinned(facts, stream, deletes.as_ref(), prev, interval);
    let sample = next_sample(facts, waiting, (stalled, pinned), &window, now_ms);
    let outcome = verdict(Verdict {
        facts,
        stream,
        deletes,
        progress,
        floor_moved: prev.is_some_and(|p| facts.ack_floor.consumer_seq > p.floor_consumer_seq),
        stalled,
        pinned,
        window: &window,
        unmeasured: measured.err(),
    });
    Judgement {
        outcome,
        window: Some(window),
        progress,
        sample: Some(sample),
    }
}

/// The previous sample as a run that did not ask about the consumer at all keeps it: the pod
/// held no connection to ask by, which for the consumer is NATS not there (the table's row:
/// NATS may have dropped the connection, and an ack in flight with it), so the clocks start
/// over. None when it is already so marked.
pub fn unobserved(prev: &Sample) -> Option<Sample> {
    let gap = answers::Row::NotThere.clock();
    (prev.gap != gap).then(|| gapped(prev, gap))
}

/// The previous sample with this run's gap added: once reset, reset.
pub fn gapped(prev: &Sample, gap: Gap) -> Sample {
    let gap = match (prev.gap, gap) {
        (Gap::None, Gap::None) => Gap::None,
        _ => Gap::Resets,
    };
    Sample {
        gap,
        ..prev.clone()
    }
}

/// The interval the clocks count since the previous sample: as long as it was, whoever
/// looked (nothing moved between two looks is a fact: an ack moves `last_active`, a restart
/// loses it). Else why the samples cannot measure it: a reset since (`Sample::gap`), a server
/// that restarted since (it forgot the last_active times it had), or no previous sample at
/// all.
fn counted(
    facts: &ConsumerFacts,
    prev: Option<&Sample>,
    now_ms: i64,
) -> Result<Duration, Unmeasured> {
    match prev {
        None => Err(Unmeasured::FirstSample),
        Some(p) if restarted_since(facts, p) => Err(Unmeasured::ServerRestarted),
        Some(p) if p.gap != Gap::None => Err(Unmeasured::Gap),
        Some(p) => Ok(ms(now_ms - p.seen_at_ms)),
    }
}

/// The server forgot the `last_active` times it had (held in memory): it restarted since.
fn restarted_since(facts: &ConsumerFacts, prev: &Sample) -> bool {
    prev.ack_last_active.is_some() && facts.ack_floor.last_active.is_none()
        || prev.delivered_last_active.is_some() && facts.delivered.last_active.is_none()
}

/// The stall clock: how long work has been seen waiting with no progress (`waiting`: the
/// work the consumer could do now), and by what evidence; None when nothing can say.
fn stall_clock(
    facts: &ConsumerFacts,
    prev: Option<&Sample>,
    interval: Option<Duration>,
    progress: Option<Progress>,
    deletes: Option<&Deletes>,
    waiting: u64,
) -> Option<(Duration, Evidence)> {
    let server_clock = stall_by_server_clock(facts, deletes);
    if waiting == 0 || progress.is_some_and(Progress::may_have_worked) {
        return Some((Duration::ZERO, Evidence::Samples));
    }
    match (prev, interval) {
        // Work was waiting then and now, nothing moved: the interval counts.
        (Some(p), Some(i)) if p.waiting > 0 => Some((ms(p.stalled_ms) + i, Evidence::Samples)),
        // Idle (or unable to work) then, work now: it was not seen waiting before now.
        // By the server's clock it has waited at most since its delivery (a quiet
        // consumer's next message), and never longer than since then.
        (Some(_), Some(i)) => Some((
            server_clock.map_or(Duration::ZERO, |(s, _)| s.min(i)),
            Evidence::Samples,
        )),
        // A first sample, or one after a reset: only the server's own clock can say.
        _ => server_clock,
    }
}

/// How long the floor has been pinned at the front of a stream that deletes from the front,
/// with work behind it; None when it is not pinned now. The same clock as the stall's.
fn pinned(
    facts: &ConsumerFacts,
    stream: Option<&StreamFacts>,
    deletes: Option<&Deletes>,
    prev: Option<&Sample>,
    interval: Option<Duration>,
) -> Option<Duration> {
    let pinned_now = match (stream, deletes) {
        (Some(s), Some(d)) => {
            d.front_only && facts.ack_floor.stream_seq < s.first_seq && facts.num_pending > 0
        }
        _ => false,
    };
    pinned_now.then(|| match (prev.and_then(|p| p.pinned_ms), interval) {
        (Some(before), Some(i)) => ms(before) + i,
        _ => Duration::ZERO,
    })
}

/// What this run keeps for the next: observations and the clocks, never a verdict.
fn next_sample(
    facts: &ConsumerFacts,
    waiting: u64,
    (stalled, pinned): (Option<(Duration, Evidence)>, Option<Duration>),
    window: &Window,
    now_ms: i64,
) -> Sample {
    Sample {
        created: facts.created.clone(),
        floor_consumer_seq: facts.ack_floor.consumer_seq,
        floor_stream_seq: facts.ack_floor.stream_seq,
        delivered_stream_seq: facts.delivered.stream_seq,
        ack_last_active: facts.ack_floor.last_active,
        delivered_last_active: facts.delivered.last_active,
        waiting,
        stalled_ms: stalled.map_or(0, |(d, _)| d.as_millis() as i64),
        pinned_ms: pinned.map(|d| d.as_millis() as i64),
        seen_at_ms: now_ms,
        seen_ts: facts.ts,
        gap: Gap::None,
        window_ms: window.duration.as_millis() as i64,
    }
}

/// A sample of another consumer (recreated under the same name), one whose floor went back
/// (a server that lost its state), or one from the future (the clock went back) is no
/// previous sample.
fn same_consumer(prev: &Sample, facts: &ConsumerFacts, now_ms: i64) -> bool {
    prev.created == facts.created
        && facts.ack_floor.consumer_seq >= prev.floor_consumer_seq
        && now_ms >= prev.seen_at_ms
}

/// How the consumer moved since `prev`.
fn progress(
    facts: &ConsumerFacts,
    stream: Option<&StreamFacts>,
    deletes: Option<&Deletes>,
    prev: &Sample,
) -> Progress {
    if facts.ack_policy == AckPolicy::None {
        return match facts.delivered.stream_seq > prev.delivered_stream_seq {
            true => Progress::Delivered,
            false => Progress::None,
        };
    }
    let floor_moved = facts.ack_floor.consumer_seq > prev.floor_consumer_seq;
    // last_active moves on every ack (and every termination); it is absent after a server
    // restart until the next one. Compared with the server's clock at the previous sample
    // where there is one (2.10+), so a last ack older than that is never an ack since.
    let acked = match (
        facts.ack_floor.last_active,
        prev.seen_ts,
        prev.ack_last_active,
    ) {
        (Some(now), Some(then), _) | (Some(now), None, Some(then)) => now > then,
        (Some(_), None, None) => true,
        (None, ..) => false,
    };
    if !floor_moved && !acked {
        return Progress::None;
    }
    // Could retention have deleted a message this consumer had not acknowledged since?
    let touched = match (deletes, stream) {
        (None, _) => false,
        (Some(d), Some(s)) if d.front_only => {
            // Nothing above the previous floor is gone: every move since was an ack. And a
            // floor now inside the stream was moved there by acks of messages that still exist.
            let reached_past_floor = s.first_seq > prev.floor_stream_seq + 1;
            let acked_inside = floor_moved
                && facts.ack_floor.stream_seq >= s.first_seq
                && facts.max_deliver.is_none();
            reached_past_floor && !acked_inside
        }
        (Some(_), _) => true,
    };
    // Without `max_deliver` nothing but acks (and retention, above) moves the floor: a floor
    // that moved while `last_active` says nothing (a server that restarted since the acks
    // forgot it) moved by acks.
    match (acked || facts.max_deliver.is_none(), touched) {
        (_, true) => Progress::Unclear,
        (true, false) => Progress::Acked,
        (false, false) => Progress::WithoutAck,
    }
}

/// On one sample, the server's own clock: the time since the last ack, never longer than
/// since the last delivery (a quiet consumer's last ack may be an hour old when its next
/// message arrived a second ago). Only where `last_active` can only be acks.
fn stall_by_server_clock(
    facts: &ConsumerFacts,
    deletes: Option<&Deletes>,
) -> Option<(Duration, Evidence)> {
    let since_ack = since_ack(facts, deletes)?;
    let since_delivery = facts.age(facts.delivered.last_active).unwrap_or(since_ack);
    Some((since_ack.min(since_delivery), Evidence::LastActive))
}

/// The time since the last ack by the server's clock, where `last_active` can only be acks.
fn since_ack(facts: &ConsumerFacts, deletes: Option<&Deletes>) -> Option<Duration> {
    let acks_only = deletes.is_none() && facts.ack_policy != AckPolicy::None;
    facts.age(facts.ack_floor.last_active).filter(|_| acks_only)
}

/// Everything the verdict is drawn from.
struct Verdict<'a> {
    facts: &'a ConsumerFacts,
    stream: Option<&'a StreamFacts>,
    deletes: Option<Deletes>,
    progress: Option<Progress>,
    floor_moved: bool,
    stalled: Option<(Duration, Evidence)>,
    pinned: Option<Duration>,
    window: &'a Window,
    unmeasured: Option<Unmeasured>,
}

fn verdict(v: Verdict) -> Outcome {
    let f = v.facts;
    let waiting = f.waiting();
    if f.paused {
        return Outcome::Healthy(Healthy::Paused);
    }
    if f.push() && !f.push_bound {
        return Outcome::Unhealthy(Fault::Unbound { waiting });
    }
    if waiting == 0 {
        return Outcome::Healthy(Healthy::Idle);
    }
    // Held at the front a whole window, and the floor moved meanwhile (else the stall clock,
    // counting the same time, says it plainly): retention moved it, whoever acked the rest.
    if let (Some(pinned), Some(s), Some(d)) = (v.pinned, v.stream, &v.deletes) {
        let plain_stall = v.stalled.is_some_and(|(d, _)| d >= v.window.duration);
        if pinned >= v.window.duration && !plain_stall {
            return Outcome::Unhealthy(Fault::Retention {
                stalled: pinned,
                first_seq: s.first_seq,
                behind: f.num_pending,
                deletes: d.clone(),
            });
        }
    }
    match (v.progress, v.deletes) {
        (Some(Progress::Delivered), _) => {
            return Outcome::Healthy(Healthy::Progressing(Moved::Deliveries))
        }
        (Some(Progress::Acked), deletes) => {
            let since = since_ack(f, deletes.as_ref());
            return Outcome::Healthy(Healthy::Progressing(match (since, v.floor_moved) {
                (Some(since), _) => Moved::LastAck(since),
                (None, true) => Moved::Floor,
                (None, false) => Moved::AboveFloor,
            }));
        }
        (Some(Progress::Unclear), Some(deletes)) => {
            return Outcome::Healthy(Healthy::CannotTell { deletes })
        }
        _ => {}
    }
    let Some((stalled, evidence)) = v.stalled else {
        // Neither the samples (`unmeasured` says why) nor the server's clock measured it.
        let why = v.unmeasured.unwrap_or(Unmeasured::FirstSample);
        return Outcome::Healthy(Healthy::Unmeasured(why));
    };
    let moved_without_ack = v.progress == Some(Progress::WithoutAck);
    if stalled < v.window.duration {
        return Outcome::Healthy(Healthy::Waiting {
            stalled,
            evidence,
            moved_without_ack,
        });
    }
    if let Some((withheld, since_delivery)) = withheld(f, v.window.duration) {
        return Outcome::Healthy(Healthy::ServerNotDelivering {
            stalled,
            since_delivery,
            withheld,
        });
    }
    Outcome::Unhealthy(Fault::Stalled {
        stalled,
        evidence,
        floor: f.ack_floor.consumer_seq,
        waiting,
        no_pulls: !f.push() && f.num_waiting == 0,
        moved_without_ack,
    })
}

/// Whether the facts prove the pod holds none of the work that waits while the server
/// delivered nothing for the window (by its own clock: `delivered.last_active` a window old,
/// or absent: nothing since it started), and what proves it; with the time since the last
/// delivery. Where they cannot prove it, None: a push consumer with `ack_policy: none`
/// (nothing pending shows what the pod holds), flow control (a handler that acked and hangs holds the flow control reply,
/// which stops the server), a push consumer with anything unacknowledged, a pull consumer
/// with no request waiting or at its `max_ack_pending`, a server without a clock (2.9).
fn withheld(f: &ConsumerFacts, window: Duration) -> Option<(Withheld, Option<Duration>)> {
    let since_delivery = match f.delivered.last_active {
        None => None,
        Some(_) => Some(f.age(f.delivered.last_active).filter(|&d| d >= window)?),
    };
    let room = f
        .max_ack_pending
        .is_none_or(|max| max <= 0 || f.num_ack_pending < max as u64);
    let acked = f.ack_policy != AckPolicy::None;
    let withheld = match f.push() {
        _ if f.num_pending == 0 => return None,
        true if acked && f.push_bound && !f.flow_control && f.num_ack_pending == 0 => {
            Withheld::Push {
                rate_limit_bps: f.rate_limit_bps,
            }
        }
        false if f.num_waiting > 0 && room => Withheld::Pulls {
            requests: f.num_waiting,
        },
        _ => return None,
    };
    Some((withheld, since_delivery))
}

/// Milliseconds as a duration, none below zero (a clock that stepped back).
pub(crate) fn ms(millis: i64) -> Duration {
    Duration::from_millis(millis.max(0) as u64)
}

/// A judgement that is only its outcome (and the sample kept).
pub(crate) fn bare(outcome: Outcome, sample: Option<Sample>) -> Judgement {
    Judgement {
        outcome,
        window: None,
        progress: None,
        sample,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::facts::{AckPolicy, ServerTime};

    const S: i64 = 1_000_000_000;
    /// The server's clock at "now" in every row: 10 000 s after the epoch.
    const TS: i64 = 10_000 * S;
    const NOW_MS: i64 = 10_000_000;
    /// --stall-after 60s; the consumers' ack_wait is 30 s: the window is 60 s.
    const POLICY: Policy = Policy {
        stall_after: Duration::from_secs(60),
    };

    /// `secs` seconds before the server's "now".
    fn ago(secs: f64) -> Option<ServerTime> {
        Some(TS - (secs * 1e9) as i64)
    }

    /// A bound push consumer in a deliver group, max_ack_pending 1, on a stream without
    /// limits; no ack since the server started. (The guard's tests start from it too.)
    pub(crate) fn facts(pending: u64, ack_pending: u64, floor: u64) -> ConsumerFacts {
        ConsumerFacts::example(pending, ack_pending, floor, TS)
    }

    /// A stream: `limits` without limits unless a row sets them.
    fn stream(first_seq: u64) -> StreamFacts {
        StreamFacts {
            retention: "limits".into(),
            discard: "old".into(),
            max_msgs: None,
            max_bytes: None,
            max_age: None,
            max_msgs_per_subject: None,
            discard_new_per_subject: false,
            first_seq,
            last_seq: first_seq + 199,
        }
    }

    fn capped(first_seq: u64) -> StreamFacts {
        StreamFacts {
            max_msgs: Some(200),
            ..stream(first_seq)
        }
    }

    /// The previous sample, `seen_secs_ago`, of a consumer at `floor` with `waiting` messages,
    /// after `stalled_secs` without progress.
    fn sample(floor: u64, waiting: u64, stalled_secs: i64, seen_secs_ago: i64) -> Sample {
        Sample {
            created: "2026-08-20T00:00:00Z".into(),
            floor_consumer_seq: floor,
            floor_stream_seq: floor,
            delivered_stream_seq: floor + waiting.min(1),
            ack_last_active: None,
            delivered_last_active: None,
            waiting,
            stalled_ms: stalled_secs * 1000,
            pinned_ms: None,
            seen_at_ms: NOW_MS - seen_secs_ago * 1000,
            seen_ts: Some(TS - seen_secs_ago * S),
            gap: Gap::None,
            window_ms: 60_000,
        }
    }

    fn found(f: ConsumerFacts) -> Observed {
        Observed::Found {
            facts: f,
            stream: None,
        }
    }

    fn on(f: ConsumerFacts, s: StreamFacts) -> Observed {
        Observed::Found {
            facts: f,
            stream: Some(s),
        }
    }

    fn judged(o: &Observed, prev: Option<&Sample>) -> Judgement {
        judge(o, prev, &POLICY, NOW_MS)
    }

    fn outcome(o: &Observed, prev: Option<&Sample>) -> Outcome {
        judged(o, prev).outcome
    }

    fn stalled(o: &Outcome) -> Option<Duration> {
        match o {
            Outcome::Healthy(Healthy::Waiting { stalled, .. })
            | Outcome::Unhealthy(Fault::Stalled { stalled, .. }) => Some(*stalled),
            _ => None,
        }
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
        // once work has waited a window without progress (55 s, then 10 s more).
        let wedged = facts(3_999, 1, 0);
        assert_eq!(
            outcome(&found(wedged), Some(&sample(0, 4_000, 55, 10))),
            Outcome::Unhealthy(Fault::Stalled {
                stalled: Duration::from_secs(65),
                evidence: Evidence::Samples,
                floor: 0,
                waiting: 4_000,
                no_pulls: false,
                moved_without_ack: false,
            })
        );

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
        // floor 117,109 → 149,520, acks all along → OK.
        let mut serialized = facts(10_973, 1, 149_520);
        serialized.ack_floor.last_active = ago(0.1);
        let mut prev = sample(117_109, 6_729, 0, 10);
        prev.ack_last_active = ago(10.0);
        assert_eq!(
            outcome(&found(serialized), Some(&prev)),
            Outcome::Healthy(Healthy::Progressing(Moved::LastAck(Duration::from_millis(
                100
            ))))
        );

        // Whole platform healthy under load, first look: waiting 0.5 s by the server's own
        // clock (the time since its last ack, no longer than since its last delivery) → OK.
        // Progress is judged from the next look on: there is no "since" before it.
        let mut healthy = facts(50, 1, 2_000);
        healthy.ack_floor.last_active = ago(1.0);
        healthy.delivered.last_active = ago(0.5);
        assert_eq!(
            outcome(&found(healthy), None),
            Outcome::Healthy(Healthy::Waiting {
                stalled: Duration::from_millis(500),
                evidence: Evidence::LastActive,
                moved_without_ack: false,
            })
        );
    }

    /// Work waiting and no progress for the window: the pod's stall, or NATS holding the work
    /// back where the facts prove the pod holds none of it and nothing was delivered for the
    /// window. Each row: a change to a consumer stalled 65 s (samples) with nothing
    /// delivered for 70 s → NATS's?
    #[test]
    fn what_proves_nats_holds_the_work_back() {
        fn push() -> ConsumerFacts {
            let mut f = facts(30, 0, 10);
            f.delivered.last_active = ago(70.0);
            f
        }
        fn pull() -> ConsumerFacts {
            let mut f = push();
            f.deliver_subject = None;
            f.deliver_group = None;
            f.push_bound = false;
            f.num_waiting = 2;
            f.max_ack_pending = Some(1000);
            f
        }
        type Change = fn(&mut ConsumerFacts);
        type Row = (&'static str, fn() -> ConsumerFacts, Change, bool);
        #[rustfmt::skip]
        let rows: [Row; 14] = [
            ("push, nothing awaiting ack", push, |_| {}, true),
            ("push, throttled", push, |f| f.rate_limit_bps = Some(800), true),
            ("push, ack all", push, |f| f.ack_policy = AckPolicy::All, true),
            ("push, one awaiting ack: the pod may hold it", push, |f| f.num_ack_pending = 1, false),
            ("push, flow control: the pod may hold its reply", push, |f| f.flow_control = true, false),
            ("push, ack none: nothing shows what the pod holds", push, |f| f.ack_policy = AckPolicy::None, false),
            ("push, delivered 10 s ago", push, |f| f.delivered.last_active = ago(10.0), false),
            ("push, nothing delivered since the server started", push, |f| f.delivered.last_active = None, true),
            ("push, a server without a clock (2.9)", push, |f| f.ts = None, false),
            ("pull, requests waiting, room", pull, |_| {}, true),
            ("pull, requests waiting, ack none", pull, |f| f.ack_policy = AckPolicy::None, true),
            ("pull, no request waiting", pull, |f| f.num_waiting = 0, false),
            ("pull, at max_ack_pending", pull, |f| { f.num_ack_pending = 1000; f.num_pending = 5 }, false),
            ("pull, unlimited max_ack_pending", pull, |f| { f.num_ack_pending = 3; f.max_ack_pending = Some(-1) }, true),
        ];
        for (row, make, change, nats) in rows {
            let mut f = make();
            change(&mut f);
            let mut prev = sample(10, f.waiting(), 55, 10);
            prev.delivered_stream_seq = f.delivered.stream_seq;
            let o = outcome(&found(f), Some(&prev));
            match o {
                Outcome::Healthy(Healthy::ServerNotDelivering { stalled, .. }) => {
                    assert!(nats, "{row}: {o:?}");
                    assert_eq!(stalled, Duration::from_secs(65), "{row}");
                }
                Outcome::Unhealthy(Fault::Stalled { .. }) => assert!(!nats, "{row}: {o:?}"),
                o => panic!("{row}: {o:?}"),
            }
        }
        // Inside the window it is waiting, as any stall is; a paused consumer stays paused.
        let o = outcome(&found(push()), Some(&sample(10, 30, 10, 10)));
        assert!(
            matches!(o, Outcome::Healthy(Healthy::Waiting { .. })),
            "{o:?}"
        );
        let mut paused = push();
        paused.paused = true;
        assert_eq!(
            outcome(&found(paused), Some(&sample(10, 30, 55, 10))),
            Outcome::Healthy(Healthy::Paused)
        );
    }

    #[test]
    fn idle_is_never_stuck_however_long() {
        let mut idle = facts(0, 0, 500);
        idle.ack_floor.last_active = ago(86_400.0);
        let j = judged(&found(idle), Some(&sample(500, 0, 0, 10)));
        assert_eq!(j.outcome, Outcome::Healthy(Healthy::Idle));
        assert_eq!(j.sample.unwrap().stalled_ms, 0);
    }

    /// Issue family 1: time during which the consumer was not seen with work waiting is not
    /// stall time.
    #[test]
    fn a_gap_in_observation_never_becomes_stall_time() {
        // Idle at the last run, 3.6 windows ago; now its next message was delivered 0.1 s
        // ago and is being worked on (floor 1, delivered 2, 1 waiting).
        let mut quiet = facts(0, 1, 1);
        quiet.ack_floor.last_active = ago(216.0);
        quiet.delivered.last_active = ago(0.1);
        let idle_long_ago = sample(1, 0, 0, 216);
        assert_eq!(
            stalled(&outcome(&found(quiet.clone()), Some(&idle_long_ago))),
            Some(Duration::from_millis(100))
        );
        // Idle 10 s ago: at most those 10 s, and at most since the delivery.
        assert_eq!(
            stalled(&outcome(&found(quiet), Some(&sample(1, 0, 0, 10)))),
            Some(Duration::from_millis(100))
        );

        // Waiting before a NATS outage of 5 minutes; a run during it could not observe the
        // consumer (the gap mark). After the server's restart last_active is gone and the
        // redelivery waits an ack_wait: nothing measures a stall, and the next runs count
        // from here.
        let before = sample(40, 1, 50, 310);
        let marked = gapped(&before, Gap::Resets);
        assert_eq!(marked.gap, Gap::Resets);
        let after = facts(0, 1, 40);
        let j = judged(&found(after.clone()), Some(&marked));
        assert_eq!(
            j.outcome,
            Outcome::Healthy(Healthy::Unmeasured(Unmeasured::Gap))
        );
        assert_eq!(j.sample.as_ref().unwrap().stalled_ms, 0);
        // 10 s later, still waiting for the redelivery: 10 s, not 5 minutes and 10 s.
        let mut next = j.sample.unwrap();
        next.seen_at_ms = NOW_MS - 10_000;
        assert_eq!(
            stalled(&outcome(&found(after.clone()), Some(&next))),
            Some(Duration::from_secs(10))
        );
        // Unmarked, a restart shows in the last_active times the server forgot.
        let mut seen = sample(40, 1, 50, 10);
        seen.delivered_last_active = ago(12.0);
        assert_eq!(
            outcome(&found(after.clone()), Some(&seen)),
            Outcome::Healthy(Healthy::Unmeasured(Unmeasured::ServerRestarted))
        );
        // Without a mark, an interval longer than the window counts as long as it was.
        assert_eq!(
            stalled(&outcome(&found(after), Some(&sample(40, 1, 10, 70)))),
            Some(Duration::from_secs(80))
        );
        // A run that could not observe the consumer keeps the sample, marked.
        let j = judged(
            &Observed::NotJudged(Unknown::TemporarilyUnavailable),
            Some(&sample(40, 1, 50, 10)),
        );
        assert!(j
            .sample
            .is_some_and(|s| s.gap == Gap::Resets && s.stalled_ms == 50_000));
        // A refusal is NATS answering: the sample stays unmarked, and the next look measures
        // from it.
        for refused in [
            Unknown::Credentials,
            Unknown::NotPermitted("$JS.API.>".into()),
        ] {
            let j = judged(&Observed::NotJudged(refused), Some(&sample(40, 1, 50, 10)));
            assert_eq!(j.sample, Some(sample(40, 1, 50, 10)));
        }
    }

    /// The one table: a late answer or a refusal lets the time count (the next look measures
    /// from the last), anything else resets the clocks, for good until the next look; a
    /// restart since (the server forgot its last_active times) resets them too.
    #[test]
    fn what_each_answer_does_to_the_clock() {
        let wedged = facts(0, 1, 40);
        let after = |why: Unknown, prev: &Sample| {
            judged(&Observed::NotJudged(why), Some(prev))
                .sample
                .unwrap()
        };
        // 50 s without progress seen 20 s ago; a look since was answered too late or refused.
        let before = sample(40, 1, 50, 20);
        for why in [
            Unknown::Deadline,
            Unknown::JetStreamTimeout,
            Unknown::Credentials,
            Unknown::NotPermitted("$JS.API.>".into()),
        ] {
            let kept = after(why, &before);
            assert_eq!(kept, before);
            assert!(matches!(
                outcome(&found(wedged.clone()), Some(&kept)),
                Outcome::Unhealthy(Fault::Stalled { .. })
            ));
        }
        // The server unreachable, an election, an unexpected answer: over, and a late answer
        // after one does not undo it.
        let over = Outcome::Healthy(Healthy::Unmeasured(Unmeasured::Gap));
        for why in [
            Unknown::Unreachable("refused".into()),
            Unknown::TemporarilyUnavailable,
            Unknown::NoResponders,
            Unknown::Failed("?".into()),
        ] {
            let down = after(why, &before);
            assert_eq!(down.gap, Gap::Resets);
            assert_eq!(outcome(&found(wedged.clone()), Some(&down)), over);
            assert_eq!(after(Unknown::Deadline, &down).gap, Gap::Resets);
        }
        // A restart since (the server forgot its last_active times): over.
        let mut seen = before.clone();
        seen.delivered_last_active = ago(25.0);
        assert_eq!(
            outcome(
                &found(wedged.clone()),
                Some(&after(Unknown::Deadline, &seen))
            ),
            Outcome::Healthy(Healthy::Unmeasured(Unmeasured::ServerRestarted))
        );
    }

    /// A look later than the window after the last (the node or the kubelet stalled between
    /// the runs): the interval counts as long as it was, whatever the sample before it said:
    /// nothing acknowledged across more than a window with work waiting at both ends is a
    /// stall (an ack would have moved `last_active`; a restart shows in its loss).
    #[test]
    fn a_look_later_than_the_window_counts_as_long_as_it_was() {
        // Progressing when last seen, 70 s ago (the window is 60 s); nothing acked since.
        let wedged = facts(5, 1, 40);
        let calm = sample(40, 1, 0, 70);
        assert!(matches!(
            outcome(&found(wedged.clone()), Some(&calm)),
            Outcome::Unhealthy(Fault::Stalled { stalled, .. }) if stalled == Duration::from_secs(70)
        ));
        // Idle when last seen: only since the work's delivery.
        let mut delivered = wedged.clone();
        delivered.delivered.last_active = ago(3.0);
        delivered.ack_floor.last_active = ago(80.0);
        let mut idle = sample(40, 0, 0, 70);
        idle.ack_last_active = ago(80.0);
        assert_eq!(
            stalled(&outcome(&found(delivered), Some(&idle))),
            Some(Duration::from_secs(3))
        );
        let seen = calm;
        // An ack since the calm sample: progress, however late the look.
        let mut acked = wedged.clone();
        acked.ack_floor.consumer_seq = 41;
        acked.ack_floor.stream_seq = 41;
        acked.ack_floor.last_active = ago(5.0);
        assert!(matches!(
            outcome(&found(acked), Some(&seen)),
            Outcome::Healthy(Healthy::Progressing(_))
        ));
    }

    /// Issue family 2: a stream that keeps one message (`max_msgs: 1`, or one per subject)
    /// leaves the floor of a consumer that acks everything below first_seq: not a loss.
    #[test]
    fn acks_at_the_front_of_a_one_message_stream_are_not_losses() {
        let mut acking = facts(0, 1, 4);
        acking.ack_floor.last_active = ago(0.5);
        let mut prev = sample(3, 1, 0, 1);
        prev.ack_last_active = ago(1.6);
        let one = StreamFacts {
            max_msgs: Some(1),
            ..stream(5)
        };
        let j = judged(&on(acking.clone(), one), Some(&prev));
        assert_eq!(j.progress, Some(Progress::Unclear));
        assert!(matches!(
            j.outcome,
            Outcome::Healthy(Healthy::CannotTell { .. })
        ));
        // The same for a subject with max_msgs_per_subject 1 while another floods.
        let per_subject = StreamFacts {
            max_msgs_per_subject: Some(1),
            ..stream(90_000)
        };
        assert!(matches!(
            outcome(&on(acking, per_subject), Some(&prev)),
            Outcome::Healthy(Healthy::CannotTell { .. })
        ));
    }

    /// Issue family 3: where retention deletes unacknowledged messages, a never-acking
    /// consumer's floor and last_active move as an ack would move them. That is never called
    /// progress; one look cannot tell it from acks, so it is not a fault either.
    #[test]
    fn a_floor_retention_may_move_is_not_called_progress() {
        let mut never = facts(0, 1, 30);
        never.ack_floor.last_active = ago(0.0);
        let mut prev = sample(20, 1, 0, 10);
        prev.ack_last_active = ago(10.0);
        for s in [
            StreamFacts {
                max_age: Some(Duration::from_secs(1)),
                discard: "new".into(),
                ..stream(31)
            },
            StreamFacts {
                retention: "workqueue".into(),
                max_msgs: Some(10),
                ..stream(25)
            },
            StreamFacts {
                retention: "interest".into(),
                max_age: Some(Duration::from_secs(1)),
                ..stream(31)
            },
        ] {
            let j = judged(&on(never.clone(), s.clone()), Some(&prev));
            assert_eq!(j.progress, Some(Progress::Unclear), "{s:?}");
            assert!(
                matches!(j.outcome, Outcome::Healthy(Healthy::CannotTell { .. })),
                "{s:?}: {:?}",
                j.outcome
            );
        }
        // Where deletions could not reach past the previous floor, or the floor moved inside
        // the stream, the moves are acks: progress.
        let behind = StreamFacts {
            max_age: Some(Duration::from_secs(3600)),
            ..stream(15)
        };
        assert_eq!(
            judged(&on(never.clone(), behind), Some(&prev)).progress,
            Some(Progress::Acked)
        );
        let inside = StreamFacts {
            max_msgs: Some(200),
            ..stream(25)
        };
        assert_eq!(
            judged(&on(never, inside), Some(&prev)).progress,
            Some(Progress::Acked)
        );
    }

    /// Issue family 4: max_deliver drops move the floor with no ack (last_active stays where
    /// it was): not progress.
    #[test]
    fn drops_after_max_deliver_are_not_progress() {
        let mut drop = facts(0, 0, 7);
        drop.max_deliver = Some(2);
        let prev = sample(5, 2, 3, 1);
        let j = judged(&found(drop.clone()), Some(&prev));
        assert_eq!(j.progress, Some(Progress::WithoutAck));
        assert_eq!(
            j.outcome,
            Outcome::Healthy(Healthy::Idle),
            "nothing waits now"
        );
        // Under load the stall clock keeps counting through such moves.
        let mut loaded = drop;
        loaded.num_pending = 40;
        loaded.num_ack_pending = 1;
        assert_eq!(
            outcome(&found(loaded.clone()), Some(&prev)),
            Outcome::Healthy(Healthy::Waiting {
                stalled: Duration::from_secs(4),
                evidence: Evidence::Samples,
                moved_without_ack: true,
            })
        );
        assert!(matches!(
            outcome(&found(loaded), Some(&sample(5, 2, 59, 1))),
            Outcome::Unhealthy(Fault::Stalled {
                moved_without_ack: true,
                ..
            })
        ));
    }

    /// A consumer still inside its window is "no progress for ... not over", never
    /// "progressing".
    #[test]
    fn no_progress_inside_the_window_is_said_as_such() {
        let wedged = facts(10, 1, 7);
        assert_eq!(
            outcome(&found(wedged), Some(&sample(7, 11, 5, 1))),
            Outcome::Healthy(Healthy::Waiting {
                stalled: Duration::from_secs(6),
                evidence: Evidence::Samples,
                moved_without_ack: false,
            })
        );
    }

    #[test]
    fn on_one_sample_only_the_servers_clock_can_say() {
        // Delivery and ack both stopped 5 minutes ago: stalled, by the server's clock.
        let mut stuck = facts(200, 1, 7);
        stuck.ack_floor.last_active = ago(300.0);
        stuck.delivered.last_active = ago(300.0);
        assert!(matches!(
            outcome(&found(stuck.clone()), None),
            Outcome::Unhealthy(Fault::Stalled {
                evidence: Evidence::LastActive,
                ..
            })
        ));
        // A quiet consumer: last ack an hour ago, its next message delivered a second ago.
        stuck.delivered.last_active = ago(1.0);
        assert_eq!(
            stalled(&outcome(&found(stuck.clone()), None)),
            Some(Duration::from_secs(1))
        );
        // No ack since the server started, or no server clock (2.9): a first sample.
        let fresh = facts(200, 1, 7);
        assert_eq!(
            outcome(&found(fresh), None),
            Outcome::Healthy(Healthy::Unmeasured(Unmeasured::FirstSample))
        );
        let mut old = stuck.clone();
        old.ts = None;
        assert_eq!(
            outcome(&found(old), None),
            Outcome::Healthy(Healthy::Unmeasured(Unmeasured::FirstSample))
        );
        // Where retention can move last_active, it measures nothing.
        assert_eq!(
            outcome(&on(stuck, capped(1)), None),
            Outcome::Healthy(Healthy::Unmeasured(Unmeasured::FirstSample))
        );
    }

    #[test]
    fn progress_clears_a_stall_never_latching() {
        let mut resumed = facts(200, 1, 8);
        resumed.ack_floor.last_active = ago(0.2);
        let j = judged(&found(resumed), Some(&sample(7, 201, 500, 10)));
        assert!(matches!(
            j.outcome,
            Outcome::Healthy(Healthy::Progressing(_))
        ));
        assert_eq!(j.sample.unwrap().stalled_ms, 0);
    }

    /// Acks above a message still being redelivered move last_active, not the floor: the
    /// consumer works.
    #[test]
    fn acks_above_a_held_floor_are_progress() {
        let mut f = facts(100, 5, 7);
        f.max_ack_pending = Some(10);
        f.ack_floor.last_active = ago(0.3);
        let mut prev = sample(7, 105, 20, 10);
        prev.ack_last_active = ago(11.0);
        assert_eq!(
            outcome(&found(f.clone()), Some(&prev)),
            Outcome::Healthy(Healthy::Progressing(Moved::LastAck(Duration::from_millis(
                300
            ))))
        );
        f.ts = None;
        assert_eq!(
            outcome(&found(f.clone()), Some(&prev)),
            Outcome::Healthy(Healthy::Progressing(Moved::AboveFloor))
        );
        // The floor itself moved: said as such.
        f.ack_floor.consumer_seq = 9;
        assert_eq!(
            outcome(&found(f), Some(&prev)),
            Outcome::Healthy(Healthy::Progressing(Moved::Floor))
        );
    }

    /// Idle at the last look and work now: it was seen waiting no longer than since that look,
    /// however old the last ack and delivery are by the server's clock.
    #[test]
    fn work_that_came_after_an_idle_look_waited_at_most_since_it() {
        let mut f = facts(5, 0, 7);
        f.ack_floor.last_active = ago(3600.0);
        f.delivered.last_active = ago(3600.0);
        let prev = sample(7, 0, 0, 10);
        let o = outcome(&found(f.clone()), Some(&prev));
        assert_eq!(stalled(&o), Some(Duration::from_secs(10)), "{o:?}");
        assert!(matches!(o, Outcome::Healthy(Healthy::Waiting { .. })));
        // Delivered two seconds ago: the server's clock says less than the interval.
        f.delivered.last_active = ago(2.0);
        let o = outcome(&found(f), Some(&prev));
        assert_eq!(stalled(&o), Some(Duration::from_secs(2)), "{o:?}");
    }

    /// Pinned at the front of a stream that deletes from the front, with work behind it, for
    /// a whole window while the floor moves: losing messages. Moving but not yet a window, or
    /// not pinned: cannot tell. Pinned and still: a plain stall.
    #[test]
    fn a_floor_held_at_the_front_with_work_behind_it_is_losing_messages() {
        let mut lost = facts(190, 10, 1400);
        lost.ack_floor.last_active = ago(0.0);
        let mut prev = sample(517, 200, 0, 10);
        prev.ack_last_active = ago(10.0);
        prev.pinned_ms = Some(55_000);
        let j = judged(&on(lost.clone(), capped(1401)), Some(&prev));
        match &j.outcome {
            Outcome::Unhealthy(Fault::Retention {
                stalled,
                first_seq,
                behind,
                deletes,
            }) => {
                assert_eq!(
                    (*stalled, *first_seq, *behind),
                    (Duration::from_secs(65), 1401, 190)
                );
                assert_eq!(
                    deletes.settings,
                    [
                        RetentionSetting::MaxMsgs(200),
                        RetentionSetting::Discard("old".into())
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(j.sample.unwrap().pinned_ms, Some(65_000));
        prev.pinned_ms = Some(10_000);
        assert!(matches!(
            outcome(&on(lost.clone(), capped(1401)), Some(&prev)),
            Outcome::Healthy(Healthy::CannotTell { .. })
        ));
        // Deletions come in batches (max_age expiry): a run between two finds the floor still;
        // held at the front for the window, with the stall clock reset by the moves, it is the
        // same loss.
        let mut between = facts(190, 10, 1400);
        between.ack_floor.last_active = ago(1.0);
        let mut prev = sample(1400, 200, 1, 10);
        prev.ack_last_active = ago(1.0);
        prev.pinned_ms = Some(55_000);
        assert!(matches!(
            outcome(&on(between, capped(1401)), Some(&prev)),
            Outcome::Unhealthy(Fault::Retention { .. })
        ));
        // A first look starts the count.
        let first = judged(&on(lost, capped(1401)), None);
        assert_eq!(first.sample.unwrap().pinned_ms, Some(0));
        // A fresh stream's floor 0 sits below first_seq 1 before anything is acked: a stall.
        let still = facts(499, 1, 0);
        let mut prev = sample(0, 500, 61, 1);
        prev.pinned_ms = Some(61_000);
        assert!(matches!(
            outcome(&on(still, capped(1)), Some(&prev)),
            Outcome::Unhealthy(Fault::Stalled { .. })
        ));
    }

    #[test]
    fn paused_pull_and_ack_none_consumers() {
        let mut paused = facts(1_000, 0, 0);
        paused.paused = true;
        paused.push_bound = false;
        assert_eq!(
            outcome(&found(paused), Some(&sample(0, 1000, 999, 10))),
            Outcome::Healthy(Healthy::Paused)
        );
        // A pull consumer has no push_bound; clients waiting in pulls with nothing pending.
        let mut pull = facts(0, 0, 300);
        pull.deliver_subject = None;
        pull.push_bound = false;
        pull.num_waiting = 2;
        assert_eq!(
            outcome(&found(pull.clone()), None),
            Outcome::Healthy(Healthy::Idle)
        );
        // Nobody pulls: work waits and nothing moves.
        pull.num_pending = 40;
        pull.num_waiting = 0;
        assert!(matches!(
            outcome(&found(pull), Some(&sample(300, 40, 58, 3))),
            Outcome::Unhealthy(Fault::Stalled { no_pulls: true, .. })
        ));
        // ack policy none: deliveries are the progress.
        let mut none = facts(30, 0, 90);
        none.ack_policy = AckPolicy::None;
        none.delivered.stream_seq = 95;
        let mut prev = sample(90, 30, 10, 5);
        prev.delivered_stream_seq = 90;
        assert_eq!(
            outcome(&found(none.clone()), Some(&prev)),
            Outcome::Healthy(Healthy::Progressing(Moved::Deliveries))
        );
        prev.delivered_stream_seq = 95;
        assert_eq!(
            stalled(&outcome(&found(none), Some(&prev))),
            Some(Duration::from_secs(15))
        );
    }

    #[test]
    fn the_window_is_never_shorter_than_twice_ack_wait() {
        let mut slow = facts(10, 1, 7);
        slow.ack_wait = Some(Duration::from_secs(90));
        let j = judged(&found(slow.clone()), Some(&sample(7, 11, 100, 10)));
        assert_eq!(
            j.window,
            Some(Window {
                duration: Duration::from_secs(180),
                raised_for_ack_wait: Some(Duration::from_secs(90))
            })
        );
        assert!(matches!(
            j.outcome,
            Outcome::Healthy(Healthy::Waiting { .. })
        ));
        assert!(matches!(
            outcome(&found(slow), Some(&sample(7, 11, 171, 10))),
            Outcome::Unhealthy(Fault::Stalled { .. })
        ));
        // The default 30 s ack_wait leaves the default 60 s window as it is.
        assert_eq!(
            window(&POLICY, Some(Duration::from_secs(30))).raised_for_ack_wait,
            None
        );
    }

    #[test]
    fn a_foreign_backwards_or_future_sample_is_no_sample() {
        let f = facts(200, 1, 7);
        let mut recreated = sample(7, 201, 500, 10);
        recreated.created = "2026-09-01T00:00:00Z".into();
        let backwards = sample(9_000, 201, 500, 10);
        let future = sample(7, 201, 500, -100);
        for prev in [recreated, backwards, future] {
            assert_eq!(
                outcome(&found(f.clone()), Some(&prev)),
                Outcome::Healthy(Healthy::Unmeasured(Unmeasured::FirstSample)),
                "{prev:?}"
            );
        }
    }
}
