//! Every time, share and threshold a verdict or a schedule depends on, each with the principle
//! it serves (docs/checks.md, "The principles"). Nothing else in natsprobe holds a time that
//! decides: the core reads these, and the shell splits its deadline by them.

use core::time::Duration;

/// A share of the time left, never less than a floor: how the shell splits a run's deadline
/// between its asks, so that an answer past its share is a late answer (the table's "too
/// late" row) and the run still ends by itself inside `--timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    pub numerator: u32,
    pub denominator: u32,
    pub at_least: Duration,
}

impl Share {
    pub const fn new(numerator: u32, denominator: u32, at_least: Duration) -> Self {
        Share {
            numerator,
            denominator,
            at_least,
        }
    }

    /// This share of `left`, at least its floor, at most `left`.
    pub fn of(self, left: Duration) -> Duration {
        (left * self.numerator / self.denominator)
            .max(self.at_least)
            .min(left)
    }
}

// Principle 3, one clock: the window.

/// `--stall-after`'s default: work waiting this long with no progress is a stall.
pub const STALL_AFTER: Duration = Duration::from_secs(60);

/// The window is never shorter than this many `ack_wait`s: after NATS lost an ack in flight, a
/// healthy `max_ack_pending: 1` consumer waits a whole `ack_wait` for the redelivery and may
/// take another to process it (docs/server-facts.md).
pub const ACK_WAITS_IN_A_WINDOW: u32 = 2;

/// `--half-open-after`'s default: data unacknowledged through retransmission timeouts this
/// long means the peer is gone (the kernel's timer at 200 ms, doubling: called at 51 s).
pub const HALF_OPEN_AFTER: Duration = Duration::from_secs(30);

/// `--restart-again-after`'s default: a restart for a stall that did not help is not
/// repeated for this long from natsprobe's first failure for it (one restart an hour for a
/// fault no restart fixes: a poison message, NATS's own stall).
pub const RESTART_AGAIN_AFTER: Duration = Duration::from_secs(3600);

// Principle 7, ask only when due.

/// `--sample-every`'s default share of `--stall-after`: a calm look is carried this long.
pub const SAMPLE_EVERY_SHARE: (u32, u32) = (3, 4);

/// How far into the window the next look may come at the latest: the rest absorbs a run that
/// comes late.
pub const WINDOW_SHARE: (i64, i64) = (9, 10);

/// `--subscription-every auto` where a lookup costs the server more than a look at the
/// consumers: a deaf replica (its connection up, its subscription gone) is seen at most this
/// long after it went deaf, plus the kubelet's threshold.
pub const AUTO_TRUST: Duration = Duration::from_secs(300);

/// Up to this many connections in the account, `auto` asks with each look at the consumers: a
/// lookup by cid through the account's report then costs the server about what a look does
/// (0.4 ms of CPU at 100 connections, 0.6 ms at 1,000: docs/server-facts.md).
pub const AUTO_AT_LOOK_UP_TO: u64 = 1_000;

/// `auto`'s trust per connection the server lists for the account, past `AUTO_AT_LOOK_UP_TO`:
/// a fleet's lookups cost the server about the same per second at 10,000 connections as at
/// 100.
pub const AUTO_TRUST_PER_CONNECTION: Duration = Duration::from_millis(120);

/// The longest `auto` trusts a connection, and the longest a run waits after asks the server
/// left unanswered (`rules::remembered::retry_after`): reached at 30,000 connections.
pub const AUTO_TRUST_MAX: Duration = Duration::from_secs(3600);

// Principle 1, restart only when it helps: a run ends by itself, inside its deadline, with
// an answer; an answer past its share is late (the table's row), never a fault.

/// `--timeout`'s default: under the kubelet's one-second `timeoutSeconds`.
pub const TIMEOUT: Duration = Duration::from_millis(800);

/// Kept back from `--timeout` for printing the answer: the runtime SIGKILLs a probe that
/// overstays, and a killed probe says nothing.
pub const PRINT_MARGIN: Duration = Duration::from_millis(5);

/// What the network's asks leave of the time left, for keeping the state and answering.
pub const AFTER_THE_NETWORK: Share = Share::new(1, 8, Duration::from_millis(15));

/// The exact lookup's wait for the kernel's answers; the rest of the time is the walk's.
pub const EXACT_PATIENCE: Duration = Duration::from_millis(100);

/// The monitoring port's share of the time left for the connection list; the rest is the
/// account's report's.
pub const MONITOR_SHARE: Share = Share::new(1, 2, Duration::ZERO);

/// A lookup of one connection by cid: a server that does not answer by then leaves the rest
/// to a match by address.
pub const LOOKUP_SHARE: Share = Share::new(1, 2, Duration::ZERO);

/// The account's STATZ, which says which servers must answer the connection report: each
/// answers at once, walking nothing.
pub const STATZ_SHARE: Share = Share::new(1, 4, Duration::ZERO);

/// After the servers that must answer have, how long to wait for one more.
pub const QUIET: Duration = Duration::from_millis(100);

// The guard: two looks an interval apart, each inside its own `--timeout`.

/// `guard --interval`'s default.
pub const GUARD_INTERVAL: Duration = Duration::from_secs(60);

/// `guard --timeout`'s default: each look's.
pub const GUARD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the guard waits for the server's audit advisory of its own request (which proves
/// the advisories arrive, behind a JetStream domain or prefix): at most this, and a quarter of
/// the first look's time when that is less.
pub const AUDIT_WAIT: Share = Share::new(1, 4, Duration::ZERO);
pub const AUDIT_WAIT_MOST: Duration = Duration::from_secs(1);

/// One try of a listing's page: a quarter of the look's time left, at least a second; a leader
/// that did not answer (an election) is asked again after `LISTING_PAUSE`.
pub const LISTING_TRY: Share = Share::new(1, 4, Duration::from_secs(1));
pub const LISTING_PAUSE: Duration = Duration::from_millis(250);

// Principle 8, behind `serve`: the freshest verdict while it stands.

/// `serve --every`'s default.
pub const SERVE_EVERY: Duration = Duration::from_secs(10);

/// The shortest `serve --every`: a look is a process's work, not a busy loop.
pub const SHORTEST_EVERY: Duration = Duration::from_millis(100);

/// What a look is given beyond its own `--timeout` before `serve` kills it.
pub const LOOK_GRACE: Duration = Duration::from_secs(1);

/// A probe's whole exchange with `serve`; the kubelet's own timeout is at least a second.
pub const EXCHANGE_WITHIN: Duration = Duration::from_secs(2);

/// How long a verdict stands behind `serve`: until the look after a lost one has ended. A look
/// starts every `every`, or when the last ended, and takes at most `look` (its `--timeout` and
/// `LOOK_GRACE`); after the verdict's look come a lost one and the next, each as long as it
/// may take.
pub fn stale_after(every: Duration, look: Duration) -> Duration {
    every + every.max(look) + look
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_a_share_with_a_floor_within_what_is_left() {
        let ms = Duration::from_millis;
        assert_eq!(AFTER_THE_NETWORK.of(ms(800)), ms(100));
        assert_eq!(AFTER_THE_NETWORK.of(ms(80)), ms(15));
        assert_eq!(AFTER_THE_NETWORK.of(ms(10)), ms(10));
        assert_eq!(MONITOR_SHARE.of(ms(600)), ms(300));
        assert_eq!(STATZ_SHARE.of(ms(600)), ms(150));
    }

    #[test]
    fn a_verdict_stands_across_one_lost_look() {
        let s = Duration::from_secs;
        assert_eq!(stale_after(s(10), s(2)), s(22));
        assert_eq!(stale_after(s(1), s(3)), s(7));
    }
}
