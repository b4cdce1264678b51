//! The server's consumer advisories, counted while the guard waits between its two looks:
//! `$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.>` (retention deleted a message before it was
//! acknowledged, or the client terminated it) and `...MAX_DELIVERIES.>` (a message exhausted its
//! deliveries). The server publishes them in the consumer's own account, and only while someone
//! listens. Where the account may not subscribe there, the guard judges without them.

use super::jetstream::{self, AdvisoryKind};
use super::nats::Session;
use crate::facts::{Advisories, ConsumerName, Losses};
use futures_core::Stream;
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

pub const TERMINATED: &str = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.>";
pub const MAX_DELIVERIES: &str = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>";

/// The reasons nats-server gives when retention deleted an unacknowledged message
/// (consumer.go: `ackTermUnackedLimitsReason`, `ackTermLimitsReason`).
const DELETED: [&str; 2] = [
    "Unacknowledged message was deleted",
    "Message deleted by stream limits",
];

type Counts = Arc<Mutex<BTreeMap<ConsumerName, Losses>>>;

/// Advisories being counted.
pub struct Watch {
    counts: Counts,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    unavailable: Option<String>,
}

/// Starts counting; the subscriptions are in place (flushed) when this returns.
pub async fn watch(session: &Session) -> Watch {
    let counts: Counts = Arc::default();
    let mut tasks = Vec::new();
    let mut unavailable = None;
    for subject in [TERMINATED, MAX_DELIVERIES] {
        match session.client.subscribe(subject).await {
            Ok(mut subscriber) => {
                let counts = Arc::clone(&counts);
                tasks.push(tokio::spawn(async move {
                    while let Some(message) =
                        std::future::poll_fn(|cx| Pin::new(&mut subscriber).poll_next(cx)).await
                    {
                        if let Some(a) = jetstream::parse_advisory(&message.payload) {
                            count(&counts, a);
                        }
                    }
                }));
            }
            Err(e) => unavailable = Some(format!("cannot subscribe to {subject}: {e}")),
        }
    }
    // The server answers a subscription it refuses with an error on the connection: a flush
    // (PING, PONG) after it means the error, if any, has arrived.
    if let Err(e) = session.client.flush().await {
        unavailable.get_or_insert(format!("cannot subscribe to the advisories: {e}"));
    }
    Watch {
        counts,
        tasks,
        unavailable,
    }
}

impl Watch {
    /// Stops counting and returns the counts, or why there are none.
    pub async fn finish(self, session: &Session) -> Advisories {
        // What was published before the second look is in by the time a flush returns.
        let _ = session.client.flush().await;
        tokio::task::yield_now().await;
        for task in &self.tasks {
            task.abort();
        }
        let refused = [TERMINATED, MAX_DELIVERIES]
            .into_iter()
            .find(|s| session.refused(s));
        if let Some(subject) = refused {
            return Advisories::Unavailable(format!("the account may not subscribe to {subject}"));
        }
        if let Some(why) = self.unavailable {
            return Advisories::Unavailable(why);
        }
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        Advisories::Counted(counts.clone())
    }
}

fn count(counts: &Counts, a: jetstream::Advisory) {
    let name = ConsumerName {
        stream: a.stream,
        durable: a.consumer,
    };
    let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
    let losses = counts.entry(name).or_default();
    match a.kind {
        AdvisoryKind::Terminated { reason } if DELETED.contains(&reason.as_str()) => {
            losses.deleted_unacked += 1
        }
        AdvisoryKind::Terminated { .. } => losses.terminated_by_client += 1,
        AdvisoryKind::MaxDeliveries => losses.exhausted += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletions_drops_and_client_terms_are_told_apart() {
        let counts: Counts = Arc::default();
        let advisory = |kind| jetstream::Advisory {
            stream: "CAP".into(),
            consumer: "W".into(),
            kind,
        };
        for reason in DELETED.into_iter().chain(["", "poison"]) {
            count(
                &counts,
                advisory(AdvisoryKind::Terminated {
                    reason: reason.into(),
                }),
            );
        }
        count(&counts, advisory(AdvisoryKind::MaxDeliveries));
        let counts = counts.lock().unwrap();
        let w = counts[&ConsumerName {
            stream: "CAP".into(),
            durable: "W".into(),
        }];
        assert_eq!(
            w,
            Losses {
                deleted_unacked: 2,
                exhausted: 1,
                terminated_by_client: 2
            }
        );
    }
}
