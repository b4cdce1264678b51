//! Why a requested check could not run, and what that means for the exit code. The kubelet
//! restarts a pod on any non-zero exit (2 and 3 as well as 1), so on the check path a cause
//! may make the exit non-zero only if no state of NATS can produce it: down, slow, electing,
//! its auth service or account resolver down, a server restarted, a route or leaf link lost.
//! One table (`class`), mirrored in the README and SECURITY.md (both tested against it):
//!
//! - **Transient**: NATS produces it, and nothing tells a configuration apart (the server
//!   down, a timeout, an election, a server that answered late). Not judged, exit 0.
//! - **If never judged**: a configuration that never worked and NATS changing under one that
//!   did look the same (a refused login is wrong credentials, or an auth callout service that
//!   is down; "no responders" is a wrong `--js-domain`, or a leaf node's link to its hub
//!   down). A check already judged with this configuration on these servers treats it as
//!   transient: named in the line, `-v`, `diagnose` and JSON with its fix, never a restart.
//!   One never judged is a deploy mistake: exit 2 once it has lasted longer than the window
//!   (and `--startup` fails at once until it is judged).
//! - **If it persists**: the pod's own, never NATS's (its runs' cadence, a /proc it may not
//!   read, no room for samples): exit 2 once it has lasted longer than the window, so one
//!   late run restarts nothing.
//!
//! Never latched: a run without the cause clears it.

use super::answers::{self, Row};
use super::consumer::{Healthy, Outcome};
use crate::facts::Unknown;
use core::time::Duration;
use serde::{Deserialize, Serialize};

/// Why a check could not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The probe could not connect (the server down, or not reachable).
    Unreachable,
    /// Nothing came back in time.
    Timeout,
    /// JetStream temporarily unavailable (an election), or a leader that did not answer a
    /// listing.
    JetStreamUnavailable,
    /// The pod's connection is not in the lists of the servers that answered in time.
    NotListed,
    /// An unexpected answer.
    Failed,
    /// The server refused the probe's credentials (or its auth service is down).
    Credentials,
    /// The probe's user may not ask.
    NotPermitted,
    /// The probe's user may not receive answers (`_INBOX.>`).
    InboxDenied,
    /// No JetStream answers in the domain asked.
    NoJetStream,
    /// JetStream is not enabled for the probe's account (10039).
    JetStreamNotEnabled,
    /// No server answers the account's connection report: no system account.
    NoSystemAccount,
    /// The server does not see the pod's address (NAT, a proxy, a sidecar).
    CannotMatch,
    /// The pod's connection is on a server the one asked cannot see (a leaf node).
    CannotSee,
    /// A stall is due but the client's start time cannot be read (the probe may not read
    /// the app's /proc entries: another user), so it is never declared.
    ClientAgeUnreadable,
    /// The samples cannot be kept: no place with room.
    NoStateDir,
    /// Work waits, the pod holds none of it, and the server delivered nothing for the
    /// window: NATS holds it back.
    ServerNotDelivering,
    /// A restart for the fault did not help: the same fault stood through the new client's
    /// window, with no progress since.
    RestartDidNotHelp,
}

/// What a cause means for the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Cannot judge now: not judged, exit 0 (or `--when-server-down fail`'s 1).
    Transient,
    /// A configuration that never worked, or NATS changing under one that did: exit 2 only
    /// while the check has never been judged, once it has lasted longer than the window.
    ConfigurationIfNeverJudged,
    /// The pod's own, never NATS's: exit 2 once it has lasted longer than the window.
    ConfigurationIfItPersists,
}

impl Class {
    /// The word the README's table uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Transient => "transient",
            Class::ConfigurationIfNeverJudged => "configuration if never judged",
            Class::ConfigurationIfItPersists => "configuration if it persists",
        }
    }
}

/// Every cause, in the README's order.
pub const ALL: [Cause; 17] = [
    Cause::Unreachable,
    Cause::Timeout,
    Cause::JetStreamUnavailable,
    Cause::NotListed,
    Cause::Failed,
    Cause::Credentials,
    Cause::NotPermitted,
    Cause::InboxDenied,
    Cause::NoJetStream,
    Cause::JetStreamNotEnabled,
    Cause::NoSystemAccount,
    Cause::CannotMatch,
    Cause::CannotSee,
    Cause::ClientAgeUnreadable,
    Cause::NoStateDir,
    Cause::ServerNotDelivering,
    Cause::RestartDidNotHelp,
];

/// Every cause's class: its row's in the table of NATS's answers (`answers::Row::class`);
/// transient for a consumer a restart cannot help (the server holds its work back, or a
/// restart did not help: restarting is what these causes spare the pod); else the pod's own,
/// for a cause no answer of NATS gives.
pub fn class(cause: Cause) -> Class {
    match cause {
        Cause::ServerNotDelivering | Cause::RestartDidNotHelp => Class::Transient,
        _ => cause
            .row()
            .map_or(Class::ConfigurationIfItPersists, Row::class),
    }
}

impl Cause {
    /// The kind of answer behind it (`rules::answers`).
    pub fn of(why: &Unknown) -> Cause {
        answers::meaning(why).cause
    }

    /// The row of the table of NATS's answers this cause is in; None for the pod's own.
    pub fn row(self) -> Option<Row> {
        match self {
            Cause::Timeout | Cause::NotListed => Some(Row::Late),
            Cause::Credentials | Cause::NotPermitted | Cause::InboxDenied => Some(Row::Refused),
            Cause::Unreachable | Cause::JetStreamUnavailable | Cause::Failed => Some(Row::NotThere),
            Cause::NoJetStream
            | Cause::JetStreamNotEnabled
            | Cause::NoSystemAccount
            | Cause::CannotMatch
            | Cause::CannotSee => Some(Row::NotHere),
            Cause::ClientAgeUnreadable
            | Cause::NoStateDir
            | Cause::ServerNotDelivering
            | Cause::RestartDidNotHelp => None,
        }
    }

    /// A word for the state file and scripts.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Unreachable => "unreachable",
            Cause::Timeout => "timeout",
            Cause::JetStreamUnavailable => "jetstream_unavailable",
            Cause::NotListed => "not_listed",
            Cause::Failed => "failed",
            Cause::Credentials => "credentials",
            Cause::NotPermitted => "not_permitted",
            Cause::InboxDenied => "inbox_denied",
            Cause::NoJetStream => "no_jetstream",
            Cause::JetStreamNotEnabled => "jetstream_not_enabled",
            Cause::NoSystemAccount => "no_system_account",
            Cause::CannotMatch => "cannot_match",
            Cause::CannotSee => "cannot_see",
            Cause::ClientAgeUnreadable => "client_age_unreadable",
            Cause::NoStateDir => "no_state_dir",
            Cause::ServerNotDelivering => "server_not_delivering",
            Cause::RestartDidNotHelp => "restart_did_not_help",
        }
    }
}

/// A cause that kept a check from running, as the last run left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Persisting {
    pub cause: Cause,
    /// Local clock, ms since the epoch: the first run of the stretch that saw it.
    pub since_ms: i64,
    /// The last run that saw it.
    pub last_ms: i64,
}

/// Where a check that could not run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    pub cause: Cause,
    pub class: Class,
    /// How long it has been seen, run after run (zero on the first).
    pub lasted: Duration,
    pub window: Duration,
    /// The check was judged before, with this configuration on these servers.
    pub judged_before: bool,
}

impl Standing {
    /// A configuration error now: exit 2.
    pub fn is_configuration_error(&self) -> bool {
        match self.class {
            Class::Transient => false,
            Class::ConfigurationIfNeverJudged => !self.judged_before && self.lasted > self.window,
            Class::ConfigurationIfItPersists => self.lasted > self.window,
        }
    }

    /// Whether it can become a configuration error if it lasts: what the words warn of.
    pub fn may_become_an_error(&self) -> bool {
        Seen::new(self.cause, self.judged_before).kept()
    }
}

/// This run's cause, and what the rules need to weigh it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub cause: Cause,
    /// The check was judged before, with this configuration on these servers (a sample or a
    /// remembered connection in the state dir says so).
    pub judged_before: bool,
}

impl Seen {
    pub fn new(cause: Cause, judged_before: bool) -> Seen {
        Seen {
            cause,
            judged_before,
        }
    }

    /// Whether it may still become an error, so its start is kept between runs (and the
    /// start kept by the last run is worth reading).
    pub fn kept(&self) -> bool {
        match class(self.cause) {
            Class::Transient => false,
            Class::ConfigurationIfNeverJudged => !self.judged_before,
            Class::ConfigurationIfItPersists => true,
        }
    }
}

/// The cause a consumer's outcome stands for, if it was not judged or not compared (None:
/// judged). `state_problem`: its sample could not be kept; `judged_before`: a sample kept by
/// an earlier run says this configuration was judged on these servers.
pub fn of_consumer(outcome: &Outcome, state_problem: bool, judged_before: bool) -> Option<Seen> {
    let cause = match outcome {
        _ if state_problem => Cause::NoStateDir,
        Outcome::NotJudged(why) => Cause::of(why),
        Outcome::Healthy(Healthy::ClientAgeUnknown { .. }) => Cause::ClientAgeUnreadable,
        Outcome::Healthy(Healthy::ServerNotDelivering { .. }) => Cause::ServerNotDelivering,
        Outcome::Healthy(Healthy::RestartDidNotHelp { .. }) => Cause::RestartDidNotHelp,
        _ => return None,
    };
    Some(Seen::new(cause, judged_before))
}

/// Carries a cause over from the previous run: `prev` is what was kept, `now` this run's
/// cause (None: the check ran). Returns what to keep for the next run (None: nothing,
/// whatever was kept is cleared) and where this run stands.
///
/// A cause is continuous while it is seen run after run, each no more than a window after
/// the run that last saw it; else it starts again, so a cause left by a run long ago (a pod
/// restarted, a probe killed) counts nothing.
pub fn carry(
    prev: Option<&Persisting>,
    now: Option<Seen>,
    now_ms: i64,
    window: Duration,
) -> (Option<Persisting>, Option<Standing>) {
    let Some(seen) = now else {
        return (None, None);
    };
    let cause = seen.cause;
    let class = class(cause);
    let window_ms = window.as_millis() as i64;
    let continuous = |p: &Persisting| {
        p.cause == cause && p.since_ms <= now_ms && now_ms - p.last_ms <= window_ms
    };
    let since_ms = match prev {
        Some(p) if continuous(p) => p.since_ms,
        _ => now_ms,
    };
    let standing = Standing {
        cause,
        class,
        lasted: super::consumer::ms(now_ms - since_ms),
        window,
        judged_before: seen.judged_before,
    };
    // Only what may still become an error needs its start kept.
    let keep = seen.kept().then_some(Persisting {
        cause,
        since_ms,
        last_ms: now_ms,
    });
    (keep, Some(standing))
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_secs(60);

    /// The table, as the README has it.
    #[test]
    fn every_cause_has_its_class() {
        use Class::*;
        let table = [
            (Cause::Unreachable, Transient),
            (Cause::Timeout, Transient),
            (Cause::JetStreamUnavailable, Transient),
            (Cause::NotListed, Transient),
            (Cause::Failed, Transient),
            (Cause::Credentials, ConfigurationIfNeverJudged),
            (Cause::NotPermitted, ConfigurationIfNeverJudged),
            (Cause::InboxDenied, ConfigurationIfNeverJudged),
            (Cause::NoJetStream, ConfigurationIfNeverJudged),
            (Cause::JetStreamNotEnabled, ConfigurationIfNeverJudged),
            (Cause::NoSystemAccount, ConfigurationIfNeverJudged),
            (Cause::CannotMatch, ConfigurationIfNeverJudged),
            (Cause::CannotSee, ConfigurationIfNeverJudged),
            (Cause::ClientAgeUnreadable, ConfigurationIfItPersists),
            (Cause::NoStateDir, ConfigurationIfItPersists),
            (Cause::ServerNotDelivering, Transient),
            (Cause::RestartDidNotHelp, Transient),
        ];
        assert_eq!(table.len(), ALL.len());
        for ((cause, expected), listed) in table.into_iter().zip(ALL) {
            assert_eq!(cause, listed, "ALL in the table's order");
            assert_eq!(class(cause), expected, "{cause:?}");
        }
        let unknowns = [
            (Unknown::Unreachable("refused".into()), Cause::Unreachable),
            (Unknown::Deadline, Cause::Timeout),
            (Unknown::JetStreamTimeout, Cause::Timeout),
            (Unknown::Waiting(Duration::from_secs(300)), Cause::Timeout),
            (Unknown::TemporarilyUnavailable, Cause::JetStreamUnavailable),
            (Unknown::NotReported, Cause::JetStreamUnavailable),
            (Unknown::NotListed("late".into()), Cause::NotListed),
            (Unknown::Failed("odd".into()), Cause::Failed),
            (Unknown::Credentials, Cause::Credentials),
            (
                Unknown::NotPermitted("$JS.API.>".into()),
                Cause::NotPermitted,
            ),
            (
                Unknown::InboxDenied("_INBOX.x.*".into()),
                Cause::InboxDenied,
            ),
            (Unknown::NoResponders, Cause::NoJetStream),
            (Unknown::JetStreamNotEnabled, Cause::JetStreamNotEnabled),
            (Unknown::NoSystemAccount, Cause::NoSystemAccount),
            (Unknown::CannotMatch(None), Cause::CannotMatch),
            (Unknown::OutOfSight("leaf".into()), Cause::CannotSee),
        ];
        for (why, cause) in unknowns {
            assert_eq!(Cause::of(&why), cause, "{why:?}");
        }
    }

    /// The rule behind the table: a cause that some state of NATS can produce (down, slow,
    /// electing, its auth service or resolver down, a link lost) never makes a check that
    /// was judged before exit non-zero, however long it lasts.
    #[test]
    fn nothing_nats_does_fails_a_check_judged_before() {
        // The causes an answer of NATS can be (each of the table's rows), and NATS holding
        // a consumer's work back, or a stall a restart did not fix.
        let nats_can_produce: alloc::vec::Vec<Cause> = ALL
            .into_iter()
            .filter(|c| {
                c.row().is_some()
                    || matches!(c, Cause::ServerNotDelivering | Cause::RestartDidNotHelp)
            })
            .collect();
        assert_eq!(nats_can_produce.len(), 15);
        for &cause in &nats_can_produce {
            let mut kept = None;
            for at in (0..=3600).step_by(10) {
                let (k, s) = carry(kept.as_ref(), Some(Seen::new(cause, true)), at * 1000, W);
                assert!(!s.unwrap().is_configuration_error(), "{cause:?} at {at}s");
                kept = k;
            }
        }
        // The pod's own are not NATS's: they may.
        for cause in ALL {
            let pods_own = class(cause) == Class::ConfigurationIfItPersists;
            assert_eq!(pods_own, !nats_can_produce.contains(&cause), "{cause:?}");
        }
    }

    fn run(
        prev: Option<&Persisting>,
        now: Option<Cause>,
        at_s: i64,
    ) -> (Option<Persisting>, Option<Standing>) {
        carry(prev, now.map(|c| Seen::new(c, false)), at_s * 1000, W)
    }

    #[test]
    fn a_cause_never_judged_becomes_an_error_only_past_the_window() {
        // Refused every 10 s from the first run: not judged for a minute, an error after it.
        let mut kept = None;
        for at in (0..=70).step_by(10) {
            let (k, s) = run(kept.as_ref(), Some(Cause::Credentials), at);
            let s = s.unwrap();
            assert_eq!(s.lasted, Duration::from_secs(at as u64));
            assert_eq!(s.is_configuration_error(), at > 60, "at {at}s");
            kept = k;
        }
        // The next run that gets in clears it: never latched.
        let (k, s) = run(kept.as_ref(), None, 80);
        assert_eq!((k, s), (None, None));
    }

    #[test]
    fn a_check_judged_before_keeps_no_clock() {
        let (kept, s) = carry(None, Some(Seen::new(Cause::Credentials, true)), 0, W);
        assert_eq!(kept, None, "nothing to keep: it never becomes an error");
        let s = s.unwrap();
        assert!(!s.is_configuration_error() && !s.may_become_an_error());
    }

    #[test]
    fn a_rotation_or_a_gap_starts_the_clock_again() {
        // A refusal, then runs resume after longer than the window: a new start.
        let (kept, _) = run(None, Some(Cause::Credentials), 0);
        let (kept, s) = run(kept.as_ref(), Some(Cause::Credentials), 100);
        assert_eq!(s.unwrap().lasted, Duration::ZERO);
        assert_eq!(kept.as_ref().unwrap().since_ms, 100_000);
        // Another cause is another clock.
        let (_, s) = run(kept.as_ref(), Some(Cause::NotPermitted), 110);
        assert_eq!(s.unwrap().lasted, Duration::ZERO);
    }

    #[test]
    fn transient_causes_are_never_kept_and_never_errors() {
        for cause in ALL.into_iter().filter(|c| class(*c) == Class::Transient) {
            let (kept, s) = run(None, Some(cause), 0);
            assert!(kept.is_none());
            assert!(!s.unwrap().is_configuration_error());
        }
    }

    /// "Longer than the window": at the window itself, not yet an error.
    #[test]
    fn an_error_only_past_the_window_not_at_it() {
        let at = |lasted_ms: u64, class, judged_before| {
            Standing {
                cause: Cause::Credentials,
                class,
                lasted: Duration::from_millis(lasted_ms),
                window: Duration::from_secs(60),
                judged_before,
            }
            .is_configuration_error()
        };
        for class in [
            Class::ConfigurationIfNeverJudged,
            Class::ConfigurationIfItPersists,
        ] {
            assert!(!at(60_000, class, false));
            assert!(at(60_001, class, false));
        }
        assert!(!at(60_001, Class::ConfigurationIfNeverJudged, true));
        assert!(at(60_001, Class::ConfigurationIfItPersists, true));
        assert!(!at(u64::MAX / 2, Class::Transient, false));
    }
}
