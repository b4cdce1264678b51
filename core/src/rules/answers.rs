//! What each kind of answer does to a run that could not look: the one classification of
//! NATS's answers (docs/checks.md, "What each answer does"), from which the stall clock, the
//! fault the last look saw, the exit and the JSON's word are all read. Nothing else in the
//! core looks at a kind of [`Unknown`] to decide.
//!
//! The principle: NATS that took the ask (it refused the probe, or answered it late) says
//! nothing new of the consumer, so the evidence keeps counting; NATS that could not take it
//! (not reached, no JetStream here, an election, an unexpected answer) may itself be why the
//! consumer stopped, or may have lost an ack in flight, so the clocks start over and the fault
//! the last look saw is void. Whether the cause can be the configuration's is the cause's
//! class (`rules::cause`): a refusal or a JetStream that is not there is, when it was never
//! judged otherwise.

#[cfg(test)]
use super::cause::class;
use super::cause::{Cause, Class};
use crate::facts::{Gap, Unknown};

/// The rows of the table, in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    /// NATS took the ask and did not answer it in time (or, after such answers, is not asked
    /// again yet).
    Late,
    /// NATS refused the probe's login, request or reply inbox.
    Refused,
    /// NATS was not there to ask: not reached, an election, an unexpected answer.
    NotThere,
    /// No JetStream, or no view of the pod's connection, where the probe asked.
    NotHere,
}

impl Row {
    /// Every row, in the table's order.
    pub const ALL: [Row; 4] = [Row::Late, Row::Refused, Row::NotThere, Row::NotHere];

    /// What the answer does to the stall clock and the pinned floor: counts on, or starts
    /// over. The fault the last look saw stands exactly where the clock counts on.
    pub fn clock(self) -> Gap {
        match self {
            Row::Late | Row::Refused => Gap::None,
            Row::NotThere | Row::NotHere => Gap::Resets,
        }
    }

    /// Whether a cause of this row can be the configuration's (exit 2 once it lasted the
    /// window, for a check never judged), or is NATS's alone (never an error).
    pub fn class(self) -> Class {
        match self {
            Row::Late | Row::NotThere => Class::Transient,
            Row::Refused | Row::NotHere => Class::ConfigurationIfNeverJudged,
        }
    }

    /// The row's first words in docs/checks.md's table.
    pub fn words(self) -> &'static str {
        match self {
            Row::Late => "too late",
            Row::Refused => "refused",
            Row::NotThere => "not there",
            Row::NotHere => "not here",
        }
    }
}

/// One kind of answer, classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meaning {
    pub row: Row,
    /// The finer cause (the JSON `cannot_judge.cause`, the state's).
    pub cause: Cause,
    /// The JSON `not_judged` word.
    pub word: &'static str,
}

/// The one classification: each kind's cause and word; the cause's row
/// (`Cause::row`) says the rest.
pub fn meaning(why: &Unknown) -> Meaning {
    let (cause, word) = match why {
        Unknown::Deadline | Unknown::JetStreamTimeout | Unknown::Waiting(_) => {
            (Cause::Timeout, "timeout")
        }
        Unknown::NotListed(_) => (Cause::NotListed, "cannot_see"),
        Unknown::Credentials => (Cause::Credentials, "not_permitted"),
        Unknown::NotPermitted(_) => (Cause::NotPermitted, "not_permitted"),
        Unknown::InboxDenied(_) => (Cause::InboxDenied, "not_permitted"),
        Unknown::Unreachable(_) => (Cause::Unreachable, "unreachable"),
        Unknown::TemporarilyUnavailable | Unknown::NotReported => {
            (Cause::JetStreamUnavailable, "jetstream_unavailable")
        }
        Unknown::Failed(_) => (Cause::Failed, "failed"),
        Unknown::NoResponders => (Cause::NoJetStream, "jetstream_unavailable"),
        Unknown::JetStreamNotEnabled => (Cause::JetStreamNotEnabled, "jetstream_unavailable"),
        Unknown::NoSystemAccount => (Cause::NoSystemAccount, "unreachable"),
        Unknown::CannotMatch(_) => (Cause::CannotMatch, "cannot_match"),
        Unknown::OutOfSight(_) => (Cause::CannotSee, "cannot_see"),
    };
    let row = cause.row().expect("a NATS answer's cause has its row");
    Meaning { row, cause, word }
}

/// Whether the fault the last look saw may still stand after this answer: where the clock
/// counts on.
pub fn leaves_evidence(why: &Unknown) -> bool {
    meaning(why).row.clock() == Gap::None
}

/// Whether NATS did not answer at all (the table's "too late" and "not there" rows): what
/// `--when-server-down fail` fails, where a refusal or no view from here never does.
pub fn silent(why: &Unknown) -> bool {
    matches!(meaning(why).row, Row::Late | Row::NotThere)
}

/// Whether the answer is an ask the server took and left unanswered: the next one waits
/// (`remembered::retry_after`), so a slow server is asked less often, not more.
pub fn unanswered(why: &Unknown) -> bool {
    meaning(why).row == Row::Late
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::prelude::*;
    use core::time::Duration;

    /// One answer of every kind: a new kind fails to compile here until it is placed.
    pub(crate) fn every_kind() -> Vec<Unknown> {
        let all = vec![
            Unknown::Unreachable("connection refused".into()),
            Unknown::Credentials,
            Unknown::NotPermitted("$JS.API.CONSUMER.INFO.S.D".into()),
            Unknown::Deadline,
            Unknown::JetStreamTimeout,
            Unknown::NoResponders,
            Unknown::JetStreamNotEnabled,
            Unknown::NoSystemAccount,
            Unknown::InboxDenied("_INBOX.>".into()),
            Unknown::TemporarilyUnavailable,
            Unknown::NotReported,
            Unknown::CannotMatch(None),
            Unknown::OutOfSight("a leaf node".into()),
            Unknown::NotListed("n1 did not answer".into()),
            Unknown::Waiting(Duration::from_secs(5)),
            Unknown::Failed("?".into()),
        ];
        for why in &all {
            match why {
                Unknown::Unreachable(_)
                | Unknown::Credentials
                | Unknown::NotPermitted(_)
                | Unknown::Deadline
                | Unknown::JetStreamTimeout
                | Unknown::NoResponders
                | Unknown::JetStreamNotEnabled
                | Unknown::NoSystemAccount
                | Unknown::InboxDenied(_)
                | Unknown::TemporarilyUnavailable
                | Unknown::NotReported
                | Unknown::CannotMatch(_)
                | Unknown::OutOfSight(_)
                | Unknown::NotListed(_)
                | Unknown::Waiting(_)
                | Unknown::Failed(_) => {}
            }
        }
        all
    }

    /// The table as the principle states it: an answer that shows NATS took the ask leaves
    /// the evidence counting; one that shows NATS could not take it starts it over.
    #[test]
    fn each_kind_has_its_row() {
        let rows: Vec<(Unknown, Row)> = every_kind()
            .into_iter()
            .map(|why| {
                let row = meaning(&why).row;
                (why, row)
            })
            .collect();
        let expected = [
            Row::NotThere,
            Row::Refused,
            Row::Refused,
            Row::Late,
            Row::Late,
            Row::NotHere,
            Row::NotHere,
            Row::NotHere,
            Row::Refused,
            Row::NotThere,
            Row::NotThere,
            Row::NotHere,
            Row::NotHere,
            Row::Late,
            Row::Late,
            Row::NotThere,
        ];
        for ((why, row), want) in rows.iter().zip(expected) {
            assert_eq!(*row, want, "{why:?}");
            assert_eq!(
                leaves_evidence(why),
                matches!(want, Row::Late | Row::Refused)
            );
            assert_eq!(unanswered(why), want == Row::Late, "{why:?}");
            assert_eq!(class(meaning(why).cause), want.class(), "{why:?}");
        }
    }

    /// The JSON's words are the ones scripts already read.
    #[test]
    fn the_json_words_stay() {
        let words: Vec<&str> = every_kind().iter().map(|w| meaning(w).word).collect();
        assert_eq!(
            words,
            [
                "unreachable",
                "not_permitted",
                "not_permitted",
                "timeout",
                "timeout",
                "jetstream_unavailable",
                "jetstream_unavailable",
                "unreachable",
                "not_permitted",
                "jetstream_unavailable",
                "jetstream_unavailable",
                "cannot_match",
                "cannot_see",
                "cannot_see",
                "timeout",
                "failed",
            ]
        );
    }
}
