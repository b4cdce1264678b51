//! Which stream settings let retention delete messages a consumer has not acknowledged. Pure.
//! Each such deletion moves the ack floor and its `last_active` exactly as an ack would
//! (docs/server-facts.md), so the consumer rules and the guard ask this before they read a
//! moving floor as progress.

use crate::prelude::*;
use serde::{Deserialize, Serialize};

use crate::facts::StreamFacts;
use core::time::Duration;

/// The stream settings under which the server deletes messages a consumer has not
/// acknowledged (measured on 2.10.26: each such deletion moves the ack floor and its
/// `last_active` exactly as an ack would).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deletes {
    /// Only from the front of the stream (`max_msgs`/`max_bytes` with discard old, `max_age`
    /// on a limits stream): `first_seq` tells how far they reached.
    pub front_only: bool,
    /// The settings, in the order an operator would write them (`max_msgs 200, discard old`;
    /// the report words them).
    pub settings: Vec<RetentionSetting>,
}

/// One stream setting under which retention deletes unacknowledged messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RetentionSetting {
    /// The retention policy, when it is not `limits`: `interest` or `workqueue`.
    Retention(String),
    MaxMsgs(u64),
    MaxBytes(u64),
    MaxAge(Duration),
    MaxMsgsPerSubject(u64),
    /// `old` or `new`.
    Discard(String),
}

/// Whether, and how, `stream`'s retention can delete unacknowledged messages.
pub fn deletes_unacked(stream: &StreamFacts) -> Option<Deletes> {
    let mut settings = Vec::new();
    let old = stream.discard != "new";
    if old {
        settings.extend(stream.max_msgs.map(RetentionSetting::MaxMsgs));
        settings.extend(stream.max_bytes.map(RetentionSetting::MaxBytes));
    }
    settings.extend(stream.max_age.map(RetentionSetting::MaxAge));
    // Discard new per subject refuses the new message instead of deleting an old one.
    let per_subject = stream
        .max_msgs_per_subject
        .filter(|_| old || !stream.discard_new_per_subject);
    settings.extend(per_subject.map(RetentionSetting::MaxMsgsPerSubject));
    if settings.is_empty() {
        return None;
    }
    settings.push(RetentionSetting::Discard(stream.discard.clone()));
    if stream.retention != "limits" {
        settings.insert(0, RetentionSetting::Retention(stream.retention.clone()));
    }
    Some(Deletes {
        // On work-queue and interest streams acks delete messages too, so the front moves
        // with acks and cannot tell how far deletions reached.
        front_only: per_subject.is_none() && stream.retention == "limits",
        settings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A per-subject limit deletes the oldest of a subject, unless the stream refuses the new
    /// message instead (discard new, per subject).
    #[test]
    fn a_per_subject_limit_deletes_unless_it_refuses_the_new_message() {
        let stream = |discard: &str, discard_new_per_subject: bool| StreamFacts {
            retention: "limits".into(),
            discard: discard.into(),
            max_msgs: None,
            max_bytes: None,
            max_age: None,
            max_msgs_per_subject: Some(1),
            discard_new_per_subject,
            first_seq: 1,
            last_seq: 10,
        };
        let deletes = deletes_unacked(&stream("old", true)).unwrap();
        assert!(!deletes.front_only);
        assert!(deletes
            .settings
            .contains(&RetentionSetting::MaxMsgsPerSubject(1)));
        assert!(deletes_unacked(&stream("new", false)).is_some());
        assert_eq!(deletes_unacked(&stream("new", true)), None);
    }
}
