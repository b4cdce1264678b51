//! The server's consumer advisories, counted while the guard waits between its two looks:
//! `$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.>` (retention deleted a message before it was
//! acknowledged, or the client terminated it) and `...MAX_DELIVERIES.>` (a message exhausted its
//! deliveries). The server publishes them in the consumer's own account, and only while someone
//! listens. Where the account may not subscribe there, the guard judges without them.
//!
//! Each advisory carries the JetStream domain of the server that published it, and across a
//! leaf node connection an account hears every domain's: only the judged domain's count.
//! When the streams live elsewhere (`--js-domain`, `--js-api-prefix`) nothing says that their
//! advisories reach this connection at all (a leaf node's permissions, an account import
//! that exports only the API): the guard asks that JetStream for its account info while
//! listening to the API audit advisory (`$JS.EVENT.ADVISORY.API`) the server publishes for
//! every answer. Heard from the judged domain: the path carries advisories. Not heard: the
//! losses are "not counted", with that reason, never zero.

use super::jetstream::{self, AdvisoryKind};
use super::nats::{next, Session};
use crate::facts::{Advisories, ConsumerName, Losses};
use natsprobe_core::timing::{AUDIT_WAIT, AUDIT_WAIT_MOST};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub const TERMINATED: &str = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.>";
pub const MAX_DELIVERIES: &str = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>";
pub const API_AUDIT: &str = "$JS.EVENT.ADVISORY.API";

/// The reasons nats-server gives when retention deleted an unacknowledged message
/// (consumer.go: `ackTermUnackedLimitsReason`, `ackTermLimitsReason`).
const DELETED: [&str; 2] = [
    "Unacknowledged message was deleted",
    "Message deleted by stream limits",
];

/// Losses per publishing domain (None: a server without one) and consumer.
type Counts = Arc<Mutex<BTreeMap<(Option<String>, ConsumerName), Losses>>>;

/// Advisories being counted.
pub struct Watch {
    counts: Counts,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    unavailable: Option<String>,
    /// The domain whose advisories count (None: a JetStream without a domain), or why the
    /// advisories of the judged JetStream cannot be heard here.
    judged: Result<Option<String>, String>,
}

/// Starts counting; the subscriptions are in place (flushed) when this returns. Where the
/// streams live elsewhere, it first proves that their advisories reach this connection
/// (module doc), by `deadline`.
pub async fn watch(session: &Session, deadline: Instant) -> Watch {
    let counts: Counts = Arc::default();
    let mut tasks = Vec::new();
    let mut unavailable = None;
    for subject in [TERMINATED, MAX_DELIVERIES] {
        match session.client.subscribe(subject).await {
            Ok(mut subscriber) => {
                let counts = Arc::clone(&counts);
                tasks.push(tokio::spawn(async move {
                    while let Some(message) = next(&mut subscriber).await {
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
    let judged = match session.js_api().is_local() {
        // The connected server's own JetStream: its advisories are published in this account
        // on this server or its cluster (and superclusters), as the API it answers.
        true => Ok(session.server_domain()),
        false => heard_from(session, deadline).await,
    };
    Watch {
        counts,
        tasks,
        unavailable,
        judged,
    }
}

/// The judged JetStream's domain, once an audit advisory from it has reached this connection;
/// else why not.
async fn heard_from(session: &Session, deadline: Instant) -> Result<Option<String>, String> {
    let api = session.js_api().to_string();
    let mut audits = session
        .client
        .subscribe(API_AUDIT)
        .await
        .map_err(|e| format!("cannot subscribe to {API_AUDIT}: {e}"))?;
    // The interest reaches the server that answers before the request does: the same
    // connection carries both, in order (and a leaf node's onward connection too).
    let _ = session.client.flush().await;
    // The server publishes it right after the answer (jetstream_api.go, `sendAPIResponse`);
    // at most a quarter of the look's time: the look itself must still fit.
    let now = Instant::now();
    let until = now + AUDIT_WAIT_MOST.min(AUDIT_WAIT.of(deadline.saturating_duration_since(now)));
    let info = session.api("INFO");
    let answer = session
        .ask_all(vec![(info.clone(), String::new())], until)
        .await
        .pop()
        .expect("one answer per request");
    if session.refused(API_AUDIT) {
        return Err(format!(
            "the account may not subscribe to {API_AUDIT}, which shows whether the advisories of {api} reach this connection"
        ));
    }
    let domain = match answer.map(|body| jetstream::parse_account_domain(&body)) {
        Ok(Ok(domain)) => domain,
        Ok(Err(e)) => return Err(format!("{info} answered: {e}")),
        Err(why) => return Err(format!("{info}: {why}")),
    };
    let mut heard: BTreeSet<Option<String>> = BTreeSet::new();
    while let Ok(Some(message)) = tokio::time::timeout_at(until.into(), next(&mut audits)).await {
        if let Some(a) = jetstream::parse_advisory(&message.payload) {
            if a.domain == domain {
                return Ok(domain);
            }
            heard.insert(a.domain);
        }
    }
    let from = match &domain {
        Some(d) => format!("domain {d}"),
        None => "it".into(),
    };
    let others: Vec<String> = heard
        .into_iter()
        .map(|d| d.unwrap_or_else(|| "none".into()))
        .collect();
    let others = match others.is_empty() {
        true => String::new(),
        false => format!(" (heard only domain {})", others.join(", ")),
    };
    Err(format!(
        "{api} answers, but no advisory from {from} reaches this connection{others}: not even the audit advisory of the guard's own request; a leaf node connection, an account import or permissions do not carry $JS.EVENT.ADVISORY.> from where the streams live"
    ))
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
        let domain = match self.judged {
            Ok(domain) => domain,
            Err(why) => return Advisories::Unavailable(why),
        };
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        Advisories::Counted(judged_only(&counts, &domain))
    }
}

/// The judged domain's losses; another domain's consumers are not the judged ones, whatever
/// their names.
fn judged_only(
    counts: &BTreeMap<(Option<String>, ConsumerName), Losses>,
    domain: &Option<String>,
) -> BTreeMap<ConsumerName, Losses> {
    counts
        .iter()
        .filter(|((d, _), _)| d == domain)
        .map(|((_, name), losses)| (name.clone(), *losses))
        .collect()
}

fn count(counts: &Counts, a: jetstream::Advisory) {
    let name = ConsumerName {
        stream: a.stream,
        durable: a.consumer,
    };
    let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
    let losses = counts.entry((a.domain, name)).or_default();
    match a.kind {
        AdvisoryKind::Terminated { reason } if DELETED.contains(&reason.as_str()) => {
            losses.deleted_unacked += 1
        }
        AdvisoryKind::Terminated { .. } => losses.terminated_by_client += 1,
        AdvisoryKind::MaxDeliveries => losses.exhausted += 1,
        AdvisoryKind::ApiAudit => {}
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
            domain: None,
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
        // A leaf node's own CAP/W, heard across the leaf connection: not the judged one.
        let mut leaf = advisory(AdvisoryKind::MaxDeliveries);
        leaf.domain = Some("leaf".into());
        count(&counts, leaf);
        let counts = counts.lock().unwrap();
        let judged = judged_only(&counts, &None);
        let w = judged[&ConsumerName {
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

    #[test]
    fn only_the_judged_domains_advisories_count() {
        let counts: Counts = Arc::default();
        for domain in [Some("hub"), Some("hub"), Some("leaf"), None] {
            count(
                &counts,
                jetstream::Advisory {
                    stream: "S".into(),
                    consumer: "D".into(),
                    kind: AdvisoryKind::MaxDeliveries,
                    domain: domain.map(str::to_string),
                },
            );
        }
        let counts = counts.lock().unwrap();
        let name = ConsumerName {
            stream: "S".into(),
            durable: "D".into(),
        };
        assert_eq!(
            judged_only(&counts, &Some("hub".into()))[&name].exhausted,
            2
        );
        assert_eq!(
            judged_only(&counts, &Some("leaf".into()))[&name].exhausted,
            1
        );
        assert_eq!(judged_only(&counts, &None)[&name].exhausted, 1);
        assert!(judged_only(&counts, &Some("other".into())).is_empty());
    }
}
