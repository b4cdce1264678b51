//! `diagnose`'s consumers: where JetStream was asked, and each consumer's facts line by line,
//! its previous sample and its judgement.

use super::style::{plain, Line, Style};
use crate::facts::Sampling;
use crate::facts::{ConsumerFacts, Gap, Loaded, Observed, StreamFacts};
use crate::report::human::consumer::{consumer_phrase, describe_previous};
use crate::report::input::CheckInput;
use crate::report::remembered::sampling_phrase;
use crate::report::words::{display, retention};
use crate::rules::consumer::{Outcome, Progress};
use crate::rules::judged::JudgedConsumer;
use std::fmt::Write;
use std::time::Duration;

/// Each consumer's lines are indented under its name.
const AT: &str = "    ";

/// Where the consumers were asked, and each one's facts and judgement; nothing without
/// `--consumer`.
pub fn consumers(input: &CheckInput, lines: &mut Vec<Line>) {
    if input.consumers_configured > 0 {
        lines.push(vec![]);
        lines.push(vec![(Style::Heading, "Consumers".into())]);
        lines.push(vec![(
            Style::Dim,
            format!("  asked in {}", jetstream_asked(input)),
        )]);
        match input.observations.sampling {
            _ if input.consumers.is_empty() => lines.push(plain(format!(
                "  {}",
                sampling_phrase(input.observations.sampling)
            ))),
            // diagnose asks every time; a probe's run would have gone on from the last look.
            Some(Sampling::Skip { asked_ago }) => lines.push(plain(format!(
                "  asked by diagnose; a probe's run now would not ask: calm when asked {} ago, on the same connections (--sample-every)",
                display(asked_ago)
            ))),
            _ => {}
        }
        for r in input.consumers {
            consumer(r, input.observations.now_ms, lines);
        }
    }
}

/// One consumer: how it delivers, its counts and sequences, its limits, its stream, how it
/// moved, its previous sample, and its judgement.
fn consumer(r: &JudgedConsumer, now_ms: i64, lines: &mut Vec<Line>) {
    lines.push(vec![(Style::Plain, format!("  {}", r.seen.name))]);
    for mut line in facts(r, now_ms) {
        line[0].1.insert_str(0, AT);
        lines.push(line);
    }
    let style = match r.outcome {
        Outcome::Healthy(_) => Style::Good,
        Outcome::Unhealthy(_) => Style::Bad,
        Outcome::NotJudged(_) => Style::Warn,
    };
    lines.push(vec![(style, format!("{AT}{}", consumer_phrase(r)))]);
}

/// The facts behind a consumer's judgement, a line each (unindented): how it delivers, its
/// counts and sequences, its limits, its stream and how it moved since the previous run (when
/// it was found), and its previous sample. `-v` joins them into its line.
pub fn facts(r: &JudgedConsumer, now_ms: i64) -> Vec<Line> {
    let mut lines = Vec::new();
    if let Observed::Found { facts: f, stream } = &r.seen.observed {
        lines.push(mode(f));
        lines.push(vec![(Style::Plain, counts(f))]);
        lines.push(vec![(Style::Plain, sequences(f))]);
        lines.push(vec![(Style::Dim, limits(f))]);
        if let Some(s) = stream {
            lines.push(vec![(Style::Dim, stream_line(s))]);
        }
        if let Some(p) = r.progress {
            lines.push(vec![(
                Style::Dim,
                format!("since the previous run: {}", moved(p)),
            )]);
        }
    }
    lines.extend(previous(r, now_ms));
    lines
}

/// `push to deliver.alarms, queue group alarms, bound`, or `pull`.
fn mode(f: &ConsumerFacts) -> Line {
    let mut mode = match &f.deliver_subject {
        Some(subject) => format!("push to {subject}"),
        None => "pull".into(),
    };
    if let Some(g) = &f.deliver_group {
        let _ = write!(mode, ", queue group {g}");
    }
    let mut line = vec![(Style::Plain, mode)];
    if f.push() {
        line.push(match f.push_bound {
            true => (Style::Good, ", bound".into()),
            false => (Style::Bad, ", NOT bound (nothing subscribed)".into()),
        });
    }
    if f.paused {
        line.push((Style::Warn, ", paused".into()));
    }
    line
}

/// `3990 pending, 10 awaiting ack, 2 redelivered` (and the pulls waiting on a pull consumer).
fn counts(f: &ConsumerFacts) -> String {
    let mut counts = format!(
        "{} pending, {} awaiting ack, {} redelivered",
        f.num_pending, f.num_ack_pending, f.num_redelivered
    );
    if !f.push() {
        let _ = write!(counts, ", {} pulls waiting", f.num_waiting);
    }
    counts
}

/// The ack floor and the last delivery, with how long ago each moved.
fn sequences(f: &ConsumerFacts) -> String {
    let ago = |t| match f.age(t) {
        Some(d) => format!("{} ago", display(d)),
        None => "never, or not said".into(),
    };
    format!(
        "ack floor {} (stream {}), last ack {}; delivered {} (stream {}), last delivery {}",
        f.ack_floor.consumer_seq,
        f.ack_floor.stream_seq,
        ago(f.ack_floor.last_active),
        f.delivered.consumer_seq,
        f.delivered.stream_seq,
        ago(f.delivered.last_active)
    )
}

/// `ack policy explicit, ack_wait 30s, max_ack_pending 10, max_deliver unlimited`.
fn limits(f: &ConsumerFacts) -> String {
    let ack_wait = f
        .ack_wait
        .map(|w| format!(", ack_wait {}", display(w)))
        .unwrap_or_default();
    format!(
        "ack policy {}{ack_wait}, max_ack_pending {}, max_deliver {}",
        f.ack_policy.name(),
        unlimited(f.max_ack_pending),
        unlimited(f.max_deliver)
    )
}

/// A limit's number, or `unlimited` where none is set.
fn unlimited(limit: Option<impl std::fmt::Display>) -> String {
    limit.map_or("unlimited".into(), |n| n.to_string())
}

/// The stream's retention and sequences, and whether it deletes unacknowledged messages.
fn stream_line(s: &StreamFacts) -> String {
    let mut text = format!(
        "stream: {} retention, sequences {} to {}",
        s.retention, s.first_seq, s.last_seq
    );
    match crate::rules::consumer::deletes_unacked(s) {
        Some(d) => {
            let _ = write!(
                text,
                "; deletes unacknowledged messages ({})",
                retention(&d.settings)
            );
        }
        None => text.push_str("; never deletes an unacknowledged message"),
    }
    text
}

/// How the consumer moved since the previous run.
fn moved(p: Progress) -> &'static str {
    match p {
        Progress::Acked => "acked",
        Progress::Delivered => "delivered, not acked (ack policy none)",
        Progress::Unclear => "moved (acks or retention's deletions)",
        Progress::WithoutAck => "its floor moved with no ack",
        Progress::None => "nothing moved",
    }
}

/// The previous sample (or why there is none, or why this run's was not kept).
fn previous(r: &JudgedConsumer, now_ms: i64) -> Option<Line> {
    match (&r.seen.previous, &r.seen.state_problem) {
        (_, Some(problem)) => Some(vec![(Style::Warn, format!("samples not kept: {problem}"))]),
        (Some(Loaded::Sample(s)), None) => {
            let ago = Duration::from_millis((now_ms - s.seen_at_ms).max(0) as u64);
            let mut text = format!(
                "previous sample {} ago: ack floor {}, {} waiting",
                display(ago),
                s.floor_consumer_seq,
                s.waiting
            );
            if s.stalled_ms > 0 {
                let stalled = Duration::from_millis(s.stalled_ms as u64);
                let _ = write!(text, ", no progress for {} by then", display(stalled));
            }
            match s.gap {
                Gap::None => {}
                Gap::Resets => text.push_str("; a run since could not observe it (starts over)"),
            }
            Some(vec![(Style::Dim, text)])
        }
        (Some(previous), None) => Some(vec![(Style::Dim, describe_previous(previous))]),
        (None, None) => None,
    }
}

/// Which JetStream the consumers were asked in: the domain or prefix given, and the domain
/// the connected server announced.
pub fn jetstream_asked(input: &CheckInput) -> String {
    match (&input.observations.server_domain, input.js_api.is_local()) {
        (Some(own), true) => {
            format!("the server's own JetStream, domain {own} ($JS.API; no --js-domain given)")
        }
        (None, true) => "the server's own JetStream ($JS.API; no --js-domain given)".into(),
        (Some(own), false) => format!("{} (the server's own domain is {own})", input.js_api),
        (None, false) => input.js_api.to_string(),
    }
}

/// What to try about a name not found, given where it was looked for.
pub fn domain_hint(input: &CheckInput) -> &'static str {
    match input.js_api.is_local() {
        true => " If the application reaches its stream through a leaf node (nats.go `nats.Domain`, the nats CLI's --js-domain), give the probe the same --js-domain: a leaf node's own JetStream is not its hub's.",
        false => " Check that this is the domain (or prefix) the application uses.",
    }
}
