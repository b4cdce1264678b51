//! The `guard` report: one row per durable (what both looks saw, the losses counted between
//! them, the verdict and why), one summary line naming every faulted durable, and the typed
//! JSON document (`schema_version` 1). A row is made as soon as its durable is judged and keeps
//! only numbers and words (no server answer), and the report is written out as it is
//! rendered: an account of 100,000 durables never exists as one string.

use super::check::SCHEMA_VERSION;
use super::human::consumer::outcome_phrase;
use super::words::display;
use crate::facts::{Advisories, ConsumerName, Losses, Observed};
use crate::rules::check::Health;
use crate::rules::consumer::{Fault, Judgement, Outcome, Progress};
use crate::rules::guard::{GuardFault, Note, Verdict};
use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use std::io::{self, Write};
use std::time::Duration;

/// The numbers of one look at a consumer that its row shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Glance {
    pub push: bool,
    pub push_bound: bool,
    pub num_pending: u64,
    pub num_ack_pending: u64,
    pub ack_floor: u64,
}

impl Glance {
    /// None when the look did not find the consumer.
    pub fn of(observed: &Observed) -> Option<Glance> {
        match observed {
            Observed::Found { facts, .. } => Some(Glance {
                push: facts.push(),
                push_bound: facts.push_bound,
                num_pending: facts.num_pending,
                num_ack_pending: facts.num_ack_pending,
                ack_floor: facts.ack_floor.consumer_seq,
            }),
            _ => None,
        }
    }
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
    /// Boxed: each row is made as its durable is judged, while the first looks of the others
    /// are let go, never one block for the whole account at once.
    pub consumers: Vec<Box<GuardConsumer>>,
    /// Unhealthy when a durable is faulted in both looks.
    #[serde(skip)]
    pub health: Health,
}

/// One durable's row: serialized with its `name` (`STREAM/DURABLE`) first, as in schema 1.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardConsumer {
    pub stream: Box<str>,
    pub durable: Box<str>,
    pub expected: bool,
    /// `push`, `pull`, or None when not found.
    pub mode: Option<&'static str>,
    /// Push consumers in each look: bound to a subscriber.
    pub push_bound: [Option<bool>; 2],
    pub num_pending: [Option<u64>; 2],
    pub num_ack_pending: [Option<u64>; 2],
    pub ack_floor: [Option<u64>; 2],
    /// Counted from the advisories over the interval; None when they could not be.
    pub losses: Option<Losses>,
    /// Since the first look: `acked`, `delivered`, `unclear`, `without_ack`, `none`.
    pub progress: Option<&'static str>,
    pub window_ms: Option<u64>,
    /// `healthy`, `fault`, `server_fault` (NATS holds the work back: a fault of NATS's, not
    /// the pods'), `unknown` (a look could not say) or `ignored`.
    pub verdict: &'static str,
    pub reason: Box<str>,
}

impl Serialize for GuardConsumer {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("GuardConsumer", 14)?;
        s.serialize_field("name", &format!("{}/{}", self.stream, self.durable))?;
        s.serialize_field("stream", &self.stream)?;
        s.serialize_field("durable", &self.durable)?;
        s.serialize_field("expected", &self.expected)?;
        s.serialize_field("mode", &self.mode)?;
        s.serialize_field("push_bound", &self.push_bound)?;
        s.serialize_field("num_pending", &self.num_pending)?;
        s.serialize_field("num_ack_pending", &self.num_ack_pending)?;
        s.serialize_field("ack_floor", &self.ack_floor)?;
        s.serialize_field("losses", &self.losses)?;
        s.serialize_field("progress", &self.progress)?;
        s.serialize_field("window_ms", &self.window_ms)?;
        s.serialize_field("verdict", &self.verdict)?;
        s.serialize_field("reason", &self.reason)?;
        s.end()
    }
}

/// Everything the guard knows of one durable once both looks are in.
pub struct Judged<'a> {
    pub name: &'a ConsumerName,
    /// Each look's numbers (None: not found in that look).
    pub looks: [Option<Glance>; 2],
    /// The second look's answer, when there was one (the reason may quote its settings).
    pub second: Option<&'a Observed>,
    pub losses: Option<Losses>,
    pub expected: bool,
    pub verdict: &'a Verdict,
    /// The consumer rules' judgement of the second look (or the first, if only that).
    pub judgement: &'a Judgement,
}

/// The row of one judged durable.
pub fn row(j: Judged) -> GuardConsumer {
    let [a, b] = j.looks;
    let both = |f: fn(&Glance) -> u64| [a.as_ref().map(f), b.as_ref().map(f)];
    let bound = |g: Option<Glance>| g.filter(|g| g.push).map(|g| g.push_bound);
    GuardConsumer {
        stream: j.name.stream.as_str().into(),
        durable: j.name.durable.as_str().into(),
        expected: j.expected,
        mode: b.or(a).map(|g| match g.push {
            true => "push",
            false => "pull",
        }),
        push_bound: [bound(a), bound(b)],
        num_pending: both(|g| g.num_pending),
        num_ack_pending: both(|g| g.num_ack_pending),
        ack_floor: both(|g| g.ack_floor),
        losses: j.losses,
        progress: j.judgement.progress.map(Progress::as_str),
        window_ms: j.judgement.window.map(|w| w.duration.as_millis() as u64),
        verdict: match j.verdict {
            Verdict::Ignored => "ignored",
            Verdict::Healthy(_) => "healthy",
            Verdict::Fault(GuardFault::ServerNotDelivering) => "server_fault",
            Verdict::Fault(_) => "fault",
            Verdict::Unknown { .. } => "unknown",
        },
        reason: with_losses(reason(&j), &j).into(),
    }
}

/// The report over every row (sorted here by name). `jetstream`: where the durables were
/// listed, when it is worth saying (a domain).
pub fn guard(
    mut consumers: Vec<Box<GuardConsumer>>,
    interval: Duration,
    advisories: &Advisories,
    jetstream: Option<&str>,
) -> GuardReport {
    consumers.sort_unstable_by(|a, b| (&a.stream, &a.durable).cmp(&(&b.stream, &b.durable)));
    // NATS's own stall is a fault too (someone must look at NATS), named apart from a pod's.
    let faulted: Vec<String> = consumers
        .iter()
        .filter_map(|c| match c.verdict {
            "fault" => Some(format!("{}/{}", c.stream, c.durable)),
            "server_fault" => Some(format!("{}/{} (NATS's)", c.stream, c.durable)),
            _ => None,
        })
        .collect();
    let mut extras = Vec::new();
    for word in ["unknown", "ignored"] {
        let n = consumers.iter().filter(|c| c.verdict == word).count();
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
    let place = jetstream.map(|p| format!(" in {p}")).unwrap_or_default();
    let plural = if consumers.len() == 1 { "" } else { "s" };
    let durables = format!("{} durable{plural}{place}", consumers.len());
    let looks = format!("two looks {} apart", display(interval));
    let summary = match faulted.len() {
        // Nothing listed and nothing expected: a wrong account, credentials or JetStream
        // domain looks exactly like this, so it is said plainly, not as an all clear.
        _ if consumers.is_empty() => {
            format!("no durables in this account{place} (none listed in {looks}, none --expect'ed){extras}")
        }
        0 => format!("{durables}, no fault in {looks}{extras}"),
        // Every faulted durable by name (the table above says why): a CronJob's log, not a
        // kubelet event, so nothing is cut.
        n => format!(
            "{n} of {durables} faulted in both of {looks}{extras}: {}",
            faulted.join(", ")
        ),
    };
    let health = match faulted.is_empty() {
        true => Health::Healthy,
        false => Health::Unhealthy,
    };
    GuardReport {
        schema_version: SCHEMA_VERSION,
        command: "guard",
        verdict: health.as_str(),
        summary,
        interval_ms: interval.as_millis() as u64,
        advisories_unavailable: unavailable,
        jetstream: jetstream.map(str::to_string),
        health,
        consumers,
    }
}

impl GuardReport {
    /// The JSON document, or the table, the advisories' note and the summary line: written to
    /// `out` as it is rendered (the one report too large to make as a string first).
    pub fn write(&self, json: bool, out: &mut dyn Write) -> io::Result<()> {
        if json {
            serde_json::to_writer(&mut *out, self).map_err(io::Error::from)?;
            return writeln!(out);
        }
        table(&self.consumers, out)?;
        if let Some(why) = &self.advisories_unavailable {
            writeln!(out, "advisories not counted: {why}")?;
        }
        writeln!(out, "{}: {}", self.verdict, self.summary)
    }
}

/// The advisories' count after the reason, where it adds to it.
fn with_losses(reason: String, j: &Judged) -> String {
    let counted = matches!(
        j.verdict,
        Verdict::Fault(GuardFault::Consumer(_)) | Verdict::Healthy(_)
    );
    match j.losses {
        Some(l) if counted && l.deleted_unacked + l.exhausted > 0 => format!(
            "{reason}; advisories: {} deleted unacknowledged, {} exhausted max_deliver",
            l.deleted_unacked, l.exhausted
        ),
        _ => reason,
    }
}

fn reason(row: &Judged) -> String {
    let missing = Observed::ConsumerMissing;
    let observed = row.second.unwrap_or(&missing);
    let phrase = |o: &Outcome| outcome_phrase(o, row.judgement.window, observed, row.name);
    match row.verdict {
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
        Verdict::Fault(GuardFault::ServerNotDelivering) => format!(
            "NATS's, not the pods': {}",
            phrase(&row.judgement.outcome)
        ),
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

const HEADER: [&str; 10] = [
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
];

/// One row's cells.
fn cells(c: &GuardConsumer) -> [String; 10] {
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    // First look → second look.
    let pair = |v: [Option<u64>; 2]| format!("{}→{}", opt(v[0]), opt(v[1]));
    let yes = |v: Option<bool>| v.map_or("-", |v| if v { "yes" } else { "no" });
    let bound = match c.push_bound {
        [None, None] => "-".to_string(),
        [a, b] => format!("{}→{}", yes(a), yes(b)),
    };
    let lost = opt(c.losses.map(|l| l.deleted_unacked + l.exhausted));
    [
        c.stream.to_string(),
        c.durable.to_string(),
        c.mode.unwrap_or("-").to_string(),
        bound,
        pair(c.num_pending),
        pair(c.num_ack_pending),
        pair(c.ack_floor),
        lost,
        c.verdict.to_string(),
        c.reason.to_string(),
    ]
}

/// Columns padded to their widest cell; the reason last, unpadded. Two passes over the rows
/// (widths, then lines), each row's cells made again rather than kept.
fn table(consumers: &[Box<GuardConsumer>], out: &mut dyn Write) -> io::Result<()> {
    let mut widths = HEADER.map(|h| h.chars().count());
    for c in consumers {
        for (w, cell) in widths.iter_mut().zip(cells(c)) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |row: &[String]| {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            match i + 1 == row.len() {
                true => line.push_str(cell),
                false => line.push_str(&format!("{cell:<w$}  ", w = widths[i])),
            }
        }
        line.trim_end().to_string()
    };
    writeln!(out, "{}", line(&HEADER.map(String::from)))?;
    for c in consumers {
        writeln!(out, "{}", line(&cells(c)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_serializes_its_losses_under_schema_1s_words() {
        let row = GuardConsumer {
            stream: "ORDERS".into(),
            durable: "worker".into(),
            expected: true,
            mode: Some("pull"),
            push_bound: [None, None],
            num_pending: [Some(1), Some(2)],
            num_ack_pending: [Some(0), Some(0)],
            ack_floor: [Some(5), Some(5)],
            losses: Some(Losses {
                deleted_unacked: 3,
                exhausted: 2,
                terminated_by_client: 1,
            }),
            progress: Some("none"),
            window_ms: Some(60000),
            verdict: "fault",
            reason: "r".into(),
        };
        assert_eq!(
            serde_json::to_string(&row).unwrap(),
            r#"{"name":"ORDERS/worker","stream":"ORDERS","durable":"worker","expected":true,"mode":"pull","push_bound":[null,null],"num_pending":[1,2],"num_ack_pending":[0,0],"ack_floor":[5,5],"losses":{"deleted_unacked":3,"exhausted":2,"terminated_by_client":1},"progress":"none","window_ms":60000,"verdict":"fault","reason":"r"}"#
        );
    }

    /// The summary: how many durables and where, each faulted one by name, and what else in
    /// brackets (unknown, ignored, losses not counted); no durables said plainly.
    #[test]
    fn the_summary_names_every_faulted_durable() {
        let row = |durable: &str, verdict| {
            Box::new(GuardConsumer {
                stream: "S".into(),
                durable: durable.into(),
                expected: false,
                mode: None,
                push_bound: [None, None],
                num_pending: [None, None],
                num_ack_pending: [None, None],
                ack_floor: [None, None],
                losses: None,
                progress: None,
                window_ms: None,
                verdict,
                reason: "r".into(),
            })
        };
        let counted = Advisories::Counted(Default::default());
        let unavailable = Advisories::Unavailable("no permission".into());
        let five = Duration::from_secs(5);
        let rows = vec![
            row("b", "fault"),
            row("a", "fault"),
            row("c", "unknown"),
            row("d", "ignored"),
            row("e", "healthy"),
        ];
        let faulted = guard(rows, five, &unavailable, Some("JetStream domain hub"));
        assert_eq!(
            faulted.summary,
            "2 of 5 durables in JetStream domain hub faulted in both of two looks 5s apart (1 unknown, 1 ignored, losses not counted): S/a, S/b"
        );
        assert_eq!(faulted.health, Health::Unhealthy);
        // NATS holding a consumer's work back fails the guard too, named as NATS's.
        let nats = guard(
            vec![row("a", "server_fault"), row("b", "fault")],
            five,
            &counted,
            None,
        );
        assert_eq!(
            nats.summary,
            "2 of 2 durables faulted in both of two looks 5s apart: S/a (NATS's), S/b"
        );
        assert_eq!(nats.health, Health::Unhealthy);
        let one = guard(vec![row("a", "healthy")], five, &counted, None);
        assert_eq!(one.summary, "1 durable, no fault in two looks 5s apart");
        assert_eq!(one.health, Health::Healthy);
        let two = guard(
            vec![row("a", "ignored"), row("b", "ignored")],
            five,
            &counted,
            None,
        );
        assert_eq!(
            two.summary,
            "2 durables, no fault in two looks 5s apart (2 ignored)"
        );
        assert_eq!(
            guard(vec![], five, &counted, Some("x")).summary,
            "no durables in this account in x (none listed in two looks 5s apart, none --expect'ed)"
        );
    }

    /// A row's cells: each look's numbers as a pair, `-` where a look has none, the losses
    /// counted (or `-`).
    #[test]
    fn a_row_is_shown_as_cells() {
        let row = GuardConsumer {
            stream: "S".into(),
            durable: "d".into(),
            expected: false,
            mode: Some("push"),
            push_bound: [None, Some(false)],
            num_pending: [None, Some(2)],
            num_ack_pending: [None, Some(0)],
            ack_floor: [None, Some(5)],
            losses: Some(Losses {
                deleted_unacked: 3,
                exhausted: 2,
                terminated_by_client: 1,
            }),
            progress: None,
            window_ms: None,
            verdict: "healthy",
            reason: "r".into(),
        };
        assert_eq!(
            cells(&row),
            ["S", "d", "push", "-→no", "-→2", "-→0", "-→5", "5", "healthy", "r"].map(String::from)
        );
        let unseen = GuardConsumer {
            mode: None,
            push_bound: [None, None],
            num_pending: [None, None],
            losses: None,
            ..row
        };
        assert_eq!(cells(&unseen)[2..8], ["-", "-", "-→-", "-→0", "-→5", "-"]);
    }

    /// Text: the table, the advisories' note, the summary line; JSON: the document and a
    /// newline.
    #[test]
    fn a_report_is_written_as_text_or_json() {
        let report = guard(
            vec![],
            Duration::from_secs(5),
            &Advisories::Unavailable("no permission".into()),
            None,
        );
        let written = |json| {
            let mut out = Vec::new();
            report.write(json, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let text = written(false);
        let end = format!(
            "advisories not counted: no permission\n{}: {}\n",
            report.verdict, report.summary
        );
        assert!(text.ends_with(&end), "{text}");
        assert_eq!(
            written(true),
            format!("{}\n", serde_json::to_string(&report).unwrap())
        );
    }
}
