//! Why a requested check could not run, and what that means: "cannot judge now" (the server
//! down, a timeout, an election: it passes, and the next run judges) or "can never judge as
//! configured" (refused credentials, a user not permitted to ask, NAT between the pod and the
//! server, runs further apart than the window, no place to keep samples). The kubelet shows a
//! probe's output only when it fails, so a check that passes because it cannot look would be
//! invisible for ever: the configuration's causes become a configuration error (exit 2), at
//! once when certain, else once seen for longer than the window, so a credentials rotation or
//! one late run restarts nothing. One table (`class`), mirrored in the README. Never latched:
//! a run without the cause clears it.

use crate::facts::{Persisting, Unknown};
use std::time::Duration;

/// Why a check could not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The probe could not connect (the server down, or not reachable).
    Unreachable,
    /// Nothing came back in time.
    Timeout,
    /// JetStream not answering, temporarily unavailable (an election), or a leader that did
    /// not answer a listing.
    JetStreamUnavailable,
    /// An unexpected answer.
    Failed,
    /// The server refused the probe's credentials.
    Credentials,
    /// The probe's user may not ask.
    NotPermitted,
    /// The server does not see the pod's address (NAT, a proxy, a sidecar).
    CannotMatch,
    /// The pod's connection is on a server the one asked cannot see (a leaf node).
    CannotSee,
    /// Each run came longer than the window after the one before.
    TooFarApart,
    /// A stall is due but the client's start time cannot be read (the probe may not read
    /// the app's /proc entries: another user), so it is never declared.
    ClientAgeUnreadable,
    /// No directory where the samples can be kept.
    NoStateDir,
}

/// What a cause means for the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Cannot judge now: not judged, exit 0 (or `--when-server-down fail`'s 1).
    Transient,
    /// A property of the configuration, certain on one run: exit 2 at once.
    ConfigurationAtOnce,
    /// A property of the configuration, or a passing event that looks the same (a
    /// credentials rotation, one late run): exit 2 once it has lasted longer than the window.
    ConfigurationIfItPersists,
}

/// The table: every cause's class.
pub fn class(cause: Cause) -> Class {
    match cause {
        Cause::Unreachable | Cause::Timeout | Cause::JetStreamUnavailable | Cause::Failed => {
            Class::Transient
        }
        Cause::Credentials
        | Cause::NotPermitted
        | Cause::CannotMatch
        | Cause::CannotSee
        | Cause::TooFarApart
        | Cause::ClientAgeUnreadable => Class::ConfigurationIfItPersists,
        Cause::NoStateDir => Class::ConfigurationAtOnce,
    }
}

impl Cause {
    pub fn of(why: &Unknown) -> Cause {
        match why {
            Unknown::Unreachable(_) => Cause::Unreachable,
            Unknown::Deadline | Unknown::JetStreamTimeout => Cause::Timeout,
            Unknown::NoResponders | Unknown::TemporarilyUnavailable | Unknown::NotReported => {
                Cause::JetStreamUnavailable
            }
            Unknown::Failed(_) => Cause::Failed,
            Unknown::Credentials => Cause::Credentials,
            Unknown::NotPermitted(_) => Cause::NotPermitted,
            Unknown::CannotMatch(_) => Cause::CannotMatch,
            Unknown::OutOfSight(_) => Cause::CannotSee,
        }
    }

    /// A word for the state file and scripts.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Unreachable => "unreachable",
            Cause::Timeout => "timeout",
            Cause::JetStreamUnavailable => "jetstream_unavailable",
            Cause::Failed => "failed",
            Cause::Credentials => "credentials",
            Cause::NotPermitted => "not_permitted",
            Cause::CannotMatch => "cannot_match",
            Cause::CannotSee => "cannot_see",
            Cause::TooFarApart => "too_far_apart",
            Cause::ClientAgeUnreadable => "client_age_unreadable",
            Cause::NoStateDir => "no_state_dir",
        }
    }
}

/// Where a check that could not run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    pub cause: Cause,
    pub class: Class,
    /// How long it has been seen, run after run (zero on the first).
    pub lasted: Duration,
    pub window: Duration,
}

impl Standing {
    /// A configuration error now: exit 2.
    pub fn is_configuration_error(&self) -> bool {
        match self.class {
            Class::Transient => false,
            Class::ConfigurationAtOnce => true,
            Class::ConfigurationIfItPersists => self.lasted > self.window,
        }
    }
}

/// Carries a cause over from the previous run: `prev` is what was kept, `now` the cause of
/// this run (None: the check ran). Returns what to keep for the next run (None: nothing,
/// whatever was kept is cleared) and where this run stands. A cause is continuous while it is
/// seen run after run, each no more than a window after the last (else it starts again);
/// runs too far apart are by their nature a window apart, and count from the first of them.
pub fn carry(
    prev: Option<&Persisting>,
    now: Option<Cause>,
    now_ms: i64,
    window: Duration,
) -> (Option<Persisting>, Option<Standing>) {
    let Some(cause) = now else {
        return (None, None);
    };
    let class = class(cause);
    let window_ms = window.as_millis() as i64;
    let since_ms = match prev {
        Some(p)
            if p.cause == cause.as_str()
                && p.since_ms <= now_ms
                && (cause == Cause::TooFarApart || now_ms - p.last_ms <= window_ms) =>
        {
            p.since_ms
        }
        _ => now_ms,
    };
    let keep = (class == Class::ConfigurationIfItPersists).then(|| Persisting {
        cause: cause.as_str().to_string(),
        since_ms,
        last_ms: now_ms,
    });
    let standing = Standing {
        cause,
        class,
        lasted: Duration::from_millis((now_ms - since_ms).max(0) as u64),
        window,
    };
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
            (Cause::Failed, Transient),
            (Cause::Credentials, ConfigurationIfItPersists),
            (Cause::NotPermitted, ConfigurationIfItPersists),
            (Cause::CannotMatch, ConfigurationIfItPersists),
            (Cause::CannotSee, ConfigurationIfItPersists),
            (Cause::TooFarApart, ConfigurationIfItPersists),
            (Cause::ClientAgeUnreadable, ConfigurationIfItPersists),
            (Cause::NoStateDir, ConfigurationAtOnce),
        ];
        for (cause, expected) in table {
            assert_eq!(class(cause), expected, "{cause:?}");
        }
        let unknowns = [
            (Unknown::Unreachable("refused".into()), Cause::Unreachable),
            (Unknown::Deadline, Cause::Timeout),
            (Unknown::JetStreamTimeout, Cause::Timeout),
            (Unknown::NoResponders, Cause::JetStreamUnavailable),
            (Unknown::TemporarilyUnavailable, Cause::JetStreamUnavailable),
            (Unknown::NotReported, Cause::JetStreamUnavailable),
            (Unknown::Failed("odd".into()), Cause::Failed),
            (Unknown::Credentials, Cause::Credentials),
            (
                Unknown::NotPermitted("$JS.API.>".into()),
                Cause::NotPermitted,
            ),
            (Unknown::CannotMatch(None), Cause::CannotMatch),
            (Unknown::OutOfSight("leaf".into()), Cause::CannotSee),
        ];
        for (why, cause) in unknowns {
            assert_eq!(Cause::of(&why), cause, "{why:?}");
        }
    }

    fn run(
        prev: Option<&Persisting>,
        now: Option<Cause>,
        at_s: i64,
    ) -> (Option<Persisting>, Option<Standing>) {
        carry(prev, now, at_s * 1000, W)
    }

    #[test]
    fn a_persisting_cause_becomes_an_error_only_past_the_window() {
        // Refused every 10 s: not judged for a minute, an error after it.
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
    fn runs_too_far_apart_count_from_the_first_late_one() {
        // Every 90 s with a 60 s window: the first late run passes, the second is an error.
        let (kept, s) = run(None, Some(Cause::TooFarApart), 90);
        assert!(!s.unwrap().is_configuration_error());
        let (_, s) = run(kept.as_ref(), Some(Cause::TooFarApart), 180);
        assert!(s.unwrap().is_configuration_error());
        // One late run among timely ones: never.
        let (kept, _) = run(None, Some(Cause::TooFarApart), 300);
        let (kept, s) = run(kept.as_ref(), None, 310);
        assert_eq!((kept, s), (None, None));
    }

    #[test]
    fn transient_causes_are_never_kept_and_never_errors() {
        for cause in [
            Cause::Unreachable,
            Cause::Timeout,
            Cause::JetStreamUnavailable,
            Cause::Failed,
        ] {
            let (kept, s) = run(None, Some(cause), 0);
            assert!(kept.is_none());
            let s = s.unwrap();
            assert!(!s.is_configuration_error());
        }
        let (_, s) = run(None, Some(Cause::NoStateDir), 0);
        assert!(s.unwrap().is_configuration_error());
    }
}
