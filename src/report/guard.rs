//! The `guard` report: one row per durable (what both looks saw, the losses counted between
//! them, the verdict and why), one summary line naming every faulted durable, and the typed
//! JSON document (`schema_version` 1).

use super::check::SCHEMA_VERSION;
use super::human::{display, outcome_phrase};
use crate::facts::{Advisories, ConsumerName, Losses, Observed};
use crate::rules::consumer::{Fault, Judgement, Outcome, Progress};
use crate::rules::guard::{GuardFault, Note, Verdict};
use serde::Serialize;
use std::time::Duration;

/// One durable as the guard saw it.
#[derive(Debug, Clone)]
pub struct GuardRow {
    pub name: ConsumerName,
    pub first: Option<Observed>,
    pub second: Option<Observed>,
    pub losses: Option<Losses>,
    pub expected: bool,
    pub verdict: Verdict,
    /// The consumer rules' judgement of the second look (or the first, if only that).
    pub judgement: Judgement,
}

#[derive(Debug, Clone, Serialize)]
pub struct GuardReport {
    pub schema_version: u32,
    pub command: &'static str,
    /// `healthy` or `unhealthy` (a fault seen in both looks).
    pub verdict: &'static str,
    pub summary: String,
    pub interval_ms: u64,
    /// Why the advisories were not counted, when they were not.
    pub advisories_unavailable: Option<String>,
    /// The JetStream judged, when it has a domain or was named (`--js-domain`,
    /// `--js-api-prefix`); absent for a server's own JetStream without a domain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jetstream: Option<String>,
    pub consumers: Vec<GuardConsumer>,
    #[serde(skip)]
    pub faulted: bool,
    /// The table and the summary line.
    #[serde(skip)]
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct GuardConsumer {
    pub name: String,
    pub stream: String,
    pub durable: String,
    pub expected: bool,
    /// `push`, `pull`, or null when not found.
    pub mode: Option<&'static str>,
    /// Push consumers in each look: bound to a subscriber.
    pub push_bound: [Option<bool>; 2],
    pub num_pending: [Option<u64>; 2],
    pub num_ack_pending: [Option<u64>; 2],
    pub ack_floor: [Option<u64>; 2],
    /// Counted from the advisories over the interval; null when they could not be.
    pub losses: Option<LossesJson>,
    /// Since the first look: `acked`, `delivered`, `unclear`, `without_ack`, `none`.
    pub progress: Option<&'static str>,
    pub window_ms: Option<u64>,
    /// `healthy`, `fault`, `unknown` (a look could not say) or `ignored`.
    pub verdict: &'static str,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct LossesJson {
    pub deleted_unacked: u64,
    pub exhausted: u64,
    pub terminated_by_client: u64,
}

/// `jetstream`: where the durables were listed, when it is worth saying (a domain).
pub fn guard(
    rows: &[GuardRow],
    interval: Duration,
    advisories: &Advisories,
    jetstream: Option<&str>,
) -> GuardReport {
    let consumers: Vec<GuardConsumer> = rows.iter().map(consumer).collect();
    let faulted: Vec<&GuardConsumer> = consumers.iter().filter(|c| c.verdict == "fault").collect();
    let count = |v: &str| consumers.iter().filter(|c| c.verdict == v).count();
    let mut extras = Vec::new();
    for (n, word) in [(count("unknown"), "unknown"), (count("ignored"), "ignored")] {
        if n > 0 {
            extras.push(format!("{n} {word}"));
        }
    }
    let unavailable = match advisories {
        Advisories::Unavailable(why) => Some(why.clone()),
        Advisories::Counted(_) => None,
    };
    if unavailable.is_some() {
        extras.push("losses not counted".into());
    }
    let extras = match extras.is_empty() {
        true => String::new(),
        false => format!(" ({})", extras.join(", ")),
    };
    let mut durables = match consumers.len() {
        1 => "1 durable".to_string(),
        n => format!("{n} durables"),
    };
    if let Some(place) = jetstream {
        durables.push_str(&format!(" in {place}"));
    }
    let looks = format!("two looks {} apart", display(interval));
    let summary = match faulted.len() {
        0 => format!("{durables}, no fault in {looks}{extras}"),
        n => {
            // Every faulted durable by name (the table above says why): a CronJob's log, not
            // a kubelet event, so nothing is cut.
            let named: Vec<String> = faulted.iter().map(|c| c.name.clone()).collect();
            format!(
                "{n} of {durables} faulted in both of {looks}{extras}: {}",
                named.join(", ")
            )
        }
    };
    let verdict = if faulted.is_empty() {
        "healthy"
    } else {
        "unhealthy"
    };
    let mut text = table(&consumers);
    if let Some(why) = &unavailable {
        text.push_str(&format!("advisories not counted: {why}\n"));
    }
    text.push_str(&format!("{verdict}: {summary}"));
    GuardReport {
        schema_version: SCHEMA_VERSION,
        command: "guard",
        verdict,
        summary,
        interval_ms: interval.as_millis() as u64,
        advisories_unavailable: unavailable,
        jetstream: jetstream.map(str::to_string),
        faulted: !faulted.is_empty(),
        consumers,
        text,
    }
}

fn consumer(row: &GuardRow) -> GuardConsumer {
    let facts = |o: &Option<Observed>| match o {
        Some(Observed::Found { facts, .. }) => Some(facts.clone()),
        _ => None,
    };
    let (a, b) = (facts(&row.first), facts(&row.second));
    let both =
        |f: &dyn Fn(&crate::facts::ConsumerFacts) -> u64| [a.as_ref().map(f), b.as_ref().map(f)];
    let mode = b.as_ref().or(a.as_ref()).map(|f| match f.push() {
        true => "push",
        false => "pull",
    });
    let bound = |f: &Option<crate::facts::ConsumerFacts>| {
        f.as_ref().filter(|f| f.push()).map(|f| f.push_bound)
    };
    let observed = row.second.as_ref().or(row.first.as_ref());
    GuardConsumer {
        name: row.name.to_string(),
        stream: row.name.stream.clone(),
        durable: row.name.durable.clone(),
        expected: row.expected,
        mode,
        push_bound: [bound(&a), bound(&b)],
        num_pending: both(&|f| f.num_pending),
        num_ack_pending: both(&|f| f.num_ack_pending),
        ack_floor: both(&|f| f.ack_floor.consumer_seq),
        losses: row.losses.map(|l| LossesJson {
            deleted_unacked: l.deleted_unacked,
            exhausted: l.exhausted,
            terminated_by_client: l.terminated_by_client,
        }),
        progress: row.judgement.progress.map(|p| match p {
            Progress::Acked => "acked",
            Progress::Delivered => "delivered",
            Progress::Unclear => "unclear",
            Progress::WithoutAck => "without_ack",
            Progress::None => "none",
        }),
        window_ms: row.judgement.window.map(|w| w.duration.as_millis() as u64),
        verdict: match row.verdict {
            Verdict::Ignored => "ignored",
            Verdict::Healthy(_) => "healthy",
            Verdict::Fault(_) => "fault",
            Verdict::Unknown { .. } => "unknown",
        },
        reason: with_losses(reason(row, observed), row),
    }
}

/// The advisories' count after the reason, where it adds to it.
fn with_losses(reason: String, row: &GuardRow) -> String {
    let counted = matches!(
        row.verdict,
        Verdict::Fault(GuardFault::Consumer(_)) | Verdict::Healthy(_)
    );
    match row.losses {
        Some(l) if counted && l.deleted_unacked + l.exhausted > 0 => format!(
            "{reason}; advisories: {} deleted unacknowledged, {} exhausted max_deliver",
            l.deleted_unacked, l.exhausted
        ),
        _ => reason,
    }
}

fn reason(row: &GuardRow, observed: Option<&Observed>) -> String {
    let missing = Observed::ConsumerMissing;
    let observed = observed.unwrap_or(&missing);
    let phrase = |o: &Outcome| outcome_phrase(o, row.judgement.window, observed, &row.name);
    match &row.verdict {
        Verdict::Ignored => "ignored (--ignore)".into(),
        Verdict::Unknown { first, why } => format!(
            "unknown: the {} look could not say: {why}",
            if *first { "first" } else { "second" }
        ),
        Verdict::Healthy(Note::Judged(o)) => phrase(o),
        Verdict::Healthy(Note::UnboundOnce { in_first: true }) => {
            "unbound in the first look only (a rollout?), bound in the second".into()
        }
        Verdict::Healthy(Note::UnboundOnce { in_first: false }) => {
            "unbound in the second look only: not seen in both".into()
        }
        Verdict::Healthy(Note::InOneLook { in_first: true }) => {
            "in the first look only (deleted during the interval)".into()
        }
        Verdict::Healthy(Note::InOneLook { in_first: false }) => {
            "in the second look only (created during the interval)".into()
        }
        Verdict::Fault(GuardFault::Consumer(f @ Fault::Unbound { .. })) => {
            format!("{} in both looks", phrase(&Outcome::Unhealthy(f.clone())))
        }
        Verdict::Fault(GuardFault::Consumer(f @ (Fault::StreamMissing | Fault::ConsumerMissing))) => {
            let what = match row.name.durable.as_str() {
                "*" => format!("stream {} not found", row.name.stream),
                _ => phrase(&Outcome::Unhealthy(f.clone())),
            };
            format!("{what} in both looks (expected)")
        }
        Verdict::Fault(GuardFault::Consumer(f)) => phrase(&Outcome::Unhealthy(f.clone())),
        Verdict::Fault(GuardFault::Losing { deleted, interval }) => format!(
            "losing messages: retention deleted {deleted} unacknowledged in {}, and no ack shows it working past them",
            display(*interval)
        ),
        Verdict::Fault(GuardFault::Dropped {
            exhausted,
            interval,
        }) => format!(
            "{exhausted} messages exhausted max_deliver in {}, with no ack in that time",
            display(*interval)
        ),
    }
}

/// Columns padded to their widest cell; the reason last, unpadded.
fn table(consumers: &[GuardConsumer]) -> String {
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    // First look → second look.
    let pair = |v: [Option<u64>; 2]| format!("{}→{}", opt(v[0]), opt(v[1]));
    let mut rows: Vec<Vec<String>> = vec![[
        "STREAM",
        "DURABLE",
        "MODE",
        "BOUND",
        "PENDING",
        "ACK PENDING",
        "ACK FLOOR",
        "LOST",
        "VERDICT",
        "REASON",
    ]
    .map(String::from)
    .to_vec()];
    for c in consumers {
        let bound = match c.push_bound {
            [None, None] => "-".to_string(),
            [a, b] => format!(
                "{}→{}",
                a.map_or("-", |v| if v { "yes" } else { "no" }),
                b.map_or("-", |v| if v { "yes" } else { "no" })
            ),
        };
        let lost = match c.losses {
            None => "-".to_string(),
            Some(l) => (l.deleted_unacked + l.exhausted).to_string(),
        };
        rows.push(vec![
            c.stream.clone(),
            c.durable.clone(),
            c.mode.unwrap_or("-").to_string(),
            bound,
            pair(c.num_pending),
            pair(c.num_ack_pending),
            pair(c.ack_floor),
            lost,
            c.verdict.to_string(),
            c.reason.clone(),
        ]);
    }
    let columns = rows[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == columns {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
