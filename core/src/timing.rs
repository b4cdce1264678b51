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

/// The longest retransmission timeout (the kernel's `TCP_RTO_MAX`), where its doubling stops:
/// counting each later one as this long undercounts, which is safe.
pub const TCP_RTO_MAX: Duration = Duration::from_secs(120);

/// `--restart-again-after`'s default: a restart for a stall that did not help is not
/// repeated for this long from natsprobe's first failure for it (one restart an hour for a
/// fault no restart fixes: a poison message, NATS's own stall).
pub const RESTART_AGAIN_AFTER: Duration = Duration::from_secs(3600);

// Principle 7, ask only when due.

/// The kubelet's settings the README recommends for the probe, which its times to restart
/// (`rules::restart`) are worked out for: `periodSeconds`.
pub const RECOMMENDED_PERIOD: Duration = Duration::from_secs(10);

/// ... and `failureThreshold`.
pub const RECOMMENDED_FAILURE_THRESHOLD: u32 = 3;

/// `--sample-every`'s default for `stall_after`: its share of it.
pub const fn sample_every(stall_after: Duration) -> Duration {
    let (share, of) = SAMPLE_EVERY_SHARE;
    Duration::from_nanos((stall_after.as_nanos() * share as u128 / of as u128) as u64)
}

/// The most connections a run keeps for the next run's exact lookup: the check's state file is
/// read whole every run (at most 256 KiB), and a pod holding more connections to NATS than
/// this walks.
pub const MAX_REMEMBERED: usize = 64;

/// The most of a client's sockets asked which NATS they reach, in one run (each inside the
/// run's deadline).
pub const MAX_ASKED: usize = 8;

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

/// What a guard run is given beyond its interval and two looks' timeouts, to answer.
pub const GUARD_TO_ANSWER: Duration = Duration::from_secs(1);

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

/// The memory a look needs beside `serve` in its container: a check's peak, a few MiB with
/// its binary's pages shared with `serve`'s, and room to spare. A look without it is not
/// started.
pub const ROOM_FOR_A_LOOK: u64 = 4 << 20;

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

    /// Every time, share and count a verdict or a schedule depends on is here: the core's other
    /// modules hold no duration literal (`Duration::from_secs(5)`) and no number but 0 and 1,
    /// except where one is a unit, a width or a numbering, each allowed below with why. Tests
    /// and the simulated world (`world`, `rules::restart`, the timelines) aside.
    #[test]
    fn nothing_else_holds_a_time_share_or_count() {
        use crate::prelude::*;

        // (file, the line as written less comments and strings, why it may hold a number).
        let allowed: &[(&str, &str, &str)] = &[
            ("exit.rs", "Usage = 2,", "the exit codes"),
            ("exit.rs", "CannotEvaluate = 3,", "the exit codes"),
            (
                "facts/sockets.rs",
                " => ",
                "the kernel's numbering of TCP states",
            ),
            (
                "facts/jetstream.rs",
                "serialize_struct(",
                "the number of fields written",
            ),
            (
                "facts/jetstream.rs",
                "s >= 60 && s % 60 == 0",
                "seconds in a minute",
            ),
            ("facts/jetstream.rs", "s / 60", "seconds in a minute"),
            ("rules/cidr.rs", "", "address widths in bits"),
            ("rules/connection.rs", ".min(31)", "a shift's width"),
            ("rules/connection.rs", ".min(64)", "a shift's width"),
            ("rules/connection.rs", "i.min(40)", "a shift's width"),
            (
                "rules/remembered.rs",
                "i64::MAX / 4",
                "room against overflow",
            ),
            ("rules/remembered.rs", "/ 1000", "milliseconds in a second"),
        ];
        let simulated = [
            "timing.rs",
            "world.rs",
            "timelines.rs",
            "serve_timelines.rs",
            "rules/restart.rs",
        ];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                match path.is_dir() {
                    true => dirs.push(path),
                    false => files.push(path),
                }
            }
        }
        let mut found = Vec::new();
        for path in files {
            let name = path
                .strip_prefix(&root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            if simulated.contains(&name.as_str()) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in without_tests(&text) {
                // A list's length (`[T; 4]`) is no threshold.
                let code = plain(line);
                let code = match code.split_once("; ") {
                    Some((head, tail))
                        if tail.trim_start_matches(char::is_numeric).starts_with(']') =>
                    {
                        std::format!("{head}{}", tail.trim_start_matches(char::is_numeric))
                    }
                    _ => code,
                };
                let literal = code.contains("Duration::from_")
                    && code.split("Duration::from_").skip(1).any(|after| {
                        after
                            .split('(')
                            .nth(1)
                            .is_some_and(|a| a.starts_with(|c: char| c.is_ascii_digit()))
                    });
                if !literal && !numbers(&code).any(|v| v >= 2) {
                    continue;
                }
                let ok = allowed
                    .iter()
                    .any(|(file, part, _)| name == *file && code.contains(part));
                if !ok {
                    found.push(std::format!("core/src/{name}:{n}: {}", line.trim()));
                }
            }
        }
        assert!(
            found.is_empty(),
            "times, shares or counts outside timing.rs:\n{}",
            found.join("\n")
        );

        /// The file's lines with their numbers, less the items under `#[cfg(test)]` (or
        /// `cfg(any(test, ...))`).
        fn without_tests(text: &str) -> Vec<(usize, &str)> {
            let mut out = Vec::new();
            let (mut skipping, mut depth, mut next_is_test) = (false, 0i32, false);
            for (i, line) in text.lines().enumerate() {
                let t = line.trim();
                if skipping {
                    depth += braces(t);
                    if depth <= 0 {
                        skipping = false;
                    }
                    continue;
                }
                if t.starts_with("#[cfg(test)]") || t.starts_with("#[cfg(any(test") {
                    next_is_test = true;
                    continue;
                }
                if next_is_test {
                    next_is_test = false;
                    if t.starts_with("#[") {
                        next_is_test = true;
                        continue;
                    }
                    depth = braces(t);
                    skipping = depth > 0;
                    continue;
                }
                out.push((i + 1, line));
            }
            out
        }

        fn braces(t: &str) -> i32 {
            let t = plain(t);
            t.matches('{').count() as i32 - t.matches('}').count() as i32
        }

        /// The line less its comment and its strings' contents.
        fn plain(line: &str) -> String {
            let mut out = String::new();
            let (mut in_string, mut escaped) = (false, false);
            let mut chars = line.chars().peekable();
            while let Some(c) = chars.next() {
                if in_string {
                    match (escaped, c) {
                        (false, '\\') => escaped = true,
                        (false, '"') => {
                            in_string = false;
                            out.push('"');
                        }
                        _ => escaped = false,
                    }
                    continue;
                }
                match c {
                    '"' => {
                        in_string = true;
                        out.push('"');
                    }
                    '/' if chars.peek() == Some(&'/') => break,
                    _ => out.push(c),
                }
            }
            out
        }

        /// The integer literals in code: not part of a name, not a tuple's field (`x.0`).
        fn numbers(code: &str) -> impl Iterator<Item = u128> + '_ {
            let bytes = code.as_bytes();
            let mut at = 0;
            core::iter::from_fn(move || {
                while at < bytes.len() {
                    let start = at;
                    let c = bytes[at];
                    if !c.is_ascii_digit() {
                        at += 1;
                        continue;
                    }
                    while at < bytes.len()
                        && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_')
                    {
                        at += 1;
                    }
                    let before = start.checked_sub(1).map(|b| bytes[b]);
                    if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.') {
                        continue;
                    }
                    let digits: String = code[start..at]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .filter(|c| *c != '_')
                        .collect();
                    let value = match digits.strip_prefix("0x") {
                        Some(hex) => u128::from_str_radix(
                            hex.trim_end_matches(|c: char| !c.is_ascii_hexdigit()),
                            16,
                        ),
                        None => digits
                            .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                            .parse(),
                    };
                    if let Ok(v) = value {
                        return Some(v);
                    }
                }
                None
            })
        }
    }

    #[test]
    fn a_verdict_stands_across_one_lost_look() {
        let s = Duration::from_secs;
        assert_eq!(stale_after(s(10), s(2)), s(22));
        assert_eq!(stale_after(s(1), s(3)), s(7));
    }
}
