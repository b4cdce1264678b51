//! The human words of a check: the one verdict line the kubelet keeps in events (here), the
//! `-v` lines (`details`), and the phrases both are made of: each consumer's
//! (`consumer`), each subscription's (`subscription`), the connections' (`connection`), and
//! what a cause that kept a check from running means (`standing`). Formatters return strings;
//! `main` writes them.

pub mod connection;
pub mod consumer;
pub mod details;
mod standing;
pub mod subscription;

use crate::facts::Sampling;
use crate::report::input::CheckInput;
use crate::report::words::{clip, display, list};
use crate::rules::check::{ConsumerHealth, Health, Reason};
use crate::rules::consumer::{Fault, Outcome};
use crate::rules::subscription::Held;
use connection::{connections, evidence, half_open, held, why_not_answering};
use consumer::consumer_phrase;
use std::fmt::Write;
use subscription::{subscription_name, subscription_phrase};

/// The verdict first, then the evidence.
pub fn line(report: &CheckInput) -> String {
    let verdict = match report.verdict.health {
        Health::Misconfigured => "configuration error",
        other => other.as_str(),
    };
    clip(format!("{verdict}: {}", summary(report)))
}

pub fn summary(report: &CheckInput) -> String {
    let c = report.connections;
    match report.verdict.reason {
        Reason::Connected => {
            // Each peer once: a client with several connections to one server names it once.
            // The live ones: a half-open connection is named after them.
            let mut peers: Vec<String> = c
                .established
                .iter()
                .filter(|s| !c.half_open.iter().any(|(h, _)| h == *s))
                .map(crate::report::words::peer)
                .collect();
            peers.sort();
            peers.dedup();
            let mut text = format!("{} ({})", connections(report, false), list(&peers, 3));
            if let Some(half) = half_open(report) {
                let _ = write!(text, "; {half}");
            }
            for r in report.consumers {
                let _ = write!(text, "; consumer {} {}", r.seen.name, consumer_phrase(r));
            }
            if let Some(Sampling::Skip { asked_ago }) = report.observations.sampling {
                let _ = write!(
                    text,
                    "; consumers healthy when asked {} ago",
                    display(asked_ago)
                );
            }
            for s in report.subscriptions {
                let _ = write!(
                    text,
                    "; {} {}",
                    subscription_name(s),
                    subscription_phrase(s)
                );
            }
            text
        }
        Reason::ConsumerFault | Reason::ConsumerNotJudged | Reason::Misconfigured => {
            // The consumers that fail the verdict (or could not be judged) first: they are
            // why the line exists; the connection that is fine comes after.
            let wanted = match report.verdict.reason {
                Reason::ConsumerFault => ConsumerHealth::Unhealthy,
                Reason::Misconfigured => ConsumerHealth::Misconfigured,
                _ => ConsumerHealth::NotJudged,
            };
            let mut parts: Vec<String> = report
                .consumers
                .iter()
                .filter(|r| r.health() == wanted)
                .map(|r| match &r.outcome {
                    Outcome::NotJudged(_) => {
                        format!("consumer {} {}", r.seen.name, consumer_phrase(r))
                    }
                    _ => format!("consumer {}: {}", r.seen.name, consumer_phrase(r)),
                })
                .collect();
            parts.extend(
                report
                    .subscriptions
                    .iter()
                    .filter(|s| s.health() == wanted)
                    .map(|s| match &s.held {
                        Held::NotJudged(_) => {
                            format!("{} {}", subscription_name(s), subscription_phrase(s))
                        }
                        _ => format!("{}: {}", subscription_name(s), subscription_phrase(s)),
                    }),
            );
            if let Some(asked) = where_asked(report) {
                parts.push(asked);
            }
            let fail =
                wanted == ConsumerHealth::NotJudged && report.verdict.health == Health::Unhealthy;
            let policy = if fail {
                " (--when-server-down fail)"
            } else {
                ""
            };
            format!(
                "{}{policy}; {}",
                parts.join("; "),
                connections(report, false)
            )
        }
        Reason::NotConnected => {
            let min = report.policy.min_connections;
            let required = if min > 1 {
                format!(", {min} required")
            } else {
                String::new()
            };
            match half_open(report) {
                Some(half) => format!("{half}; {}{required}", connections(report, true)),
                None => format!(
                    "{}{required} ({})",
                    connections(report, false),
                    evidence(report)
                ),
            }
        }
        Reason::ServerAnswers => {
            let (url, answer) = report
                .observations
                .servers
                .iter()
                .find(|a| a.answer.is_nats())
                .map(|a| (&a.url, &a.answer))
                .expect("ServerAnswers means one answered");
            match half_open(report) {
                // The Service resolves to a live node: a restart reconnects minutes before the
                // client's own pings would notice.
                Some(half) => format!("{half}; {url} answers ({answer})"),
                None => format!(
                    "client holds {} while {url} answers ({answer}): {} ({})",
                    held(report),
                    connections(report, false),
                    evidence(report)
                ),
            }
        }
        Reason::ServerDown => {
            let urls: Vec<String> = report.servers.to_vec();
            let verb = if urls.len() == 1 { "is" } else { "are" };
            let urls = list(&urls, 3).replace(", ", " and ");
            let why = why_not_answering(report);
            match report.verdict.health {
                Health::Healthy | Health::Misconfigured => format!(
                    "{}, but {urls} {verb} not answering (restart would not help): {why}",
                    held(report)
                ),
                Health::Unhealthy => format!(
                    "{}, and {urls} {verb} not answering: {why} (--when-server-down fail)",
                    held(report)
                ),
            }
        }
    }
}

/// Where JetStream was asked, when a consumer or its stream was not found there (or nothing
/// answered): behind a leaf node the likely cause is a stream in another domain. None when
/// nothing points that way (no domain given, and the server announced none).
pub fn where_asked(report: &CheckInput) -> Option<String> {
    use crate::facts::Unknown;
    let lost = report.consumers.iter().any(|r| {
        matches!(
            r.outcome,
            Outcome::Unhealthy(Fault::StreamMissing | Fault::ConsumerMissing)
                | Outcome::NotJudged(Unknown::NoResponders)
        )
    });
    if !lost {
        return None;
    }
    let obs = report.observations;
    match (report.js_api.is_local(), &obs.server_domain) {
        (false, _) => Some(format!("asked {}", report.js_api)),
        (true, Some(domain)) => Some(format!(
            "asked the server's own JetStream domain {domain}: a stream in another domain (a leaf node's hub) needs --js-domain"
        )),
        (true, None) if !obs.server_jetstream => Some(
            "the server has no JetStream of its own: a stream behind a leaf node needs --js-domain"
                .into(),
        ),
        (true, None) => None,
    }
}

/// A run that ended without a verdict, as one line or one JSON object.
pub fn error(message: &str) -> String {
    clip(message.to_string())
}
