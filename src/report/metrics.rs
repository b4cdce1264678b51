//! `serve`'s `/metrics`: what a probe would be answered now, and what the looks came to, in
//! Prometheus's text format or OpenMetrics'. The words are the JSON's. Every label value
//! comes from the configuration (a stream, a durable, a subject and queue), so the series are
//! as many as the operator wrote. A state is a gauge with a series per state (its state 1,
//! the others 0) in both formats, not OpenMetrics' `stateset`, whose label must be named after
//! the family: one query then reads either format. A consumer is `stream` and `durable` in
//! every family that names one, so the consumers' and the subscriptions' series join.

use crate::facts::{Part, PartName, ProbePath};
use crate::rules::serve::{Answer, Memory, CAUSES, VERDICTS};
use crate::rules::{consumer, subscription};
use std::fmt::Write;
use std::time::Duration;

/// The content type of each format.
pub const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";
pub const OPEN_METRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a scrape reads (a probe, only the memory now).
#[derive(Debug, Clone, Copy)]
pub struct Scrape<'a> {
    pub memory: &'a Memory,
    /// Now, since `serve` started (the memory's clock).
    pub since_start: Duration,
    /// The wall clock now, in ms since the epoch.
    pub now_ms: i64,
    /// The consumers and subscriptions the configuration names.
    pub parts: &'a [PartName],
    /// What `--version` says: the version, then `(git REVISION)`.
    pub version: &'a str,
}

/// The page, in OpenMetrics' format or Prometheus's.
pub fn page(s: &Scrape, open_metrics: bool) -> String {
    let mut p = Page {
        out: String::with_capacity(2048 + 1024 * s.parts.len()),
        open_metrics,
    };
    // What `/livez` would be answered now, and how long ago the looks last moved.
    let answer = s.memory.answer(ProbePath::Live, s.since_start);
    let beat = s.memory.held(s.since_start).beat;
    let word = answer.word();
    p.family(
        "natsprobe_verdict",
        "gauge",
        "The verdict /livez answers now, by its word: a gauge with a series per verdict, 1 for it, 0 for the others.",
    );
    for v in VERDICTS {
        p.sample("natsprobe_verdict", &[("verdict", v)], flag(v == word));
    }
    let beat_ms = s.now_ms - beat.as_millis() as i64;
    p.seconds(
        "natsprobe_last_look_timestamp_seconds",
        "When the last look ended (before the first, when serve started), in seconds since the epoch.",
        seconds_ms(beat_ms),
    );
    if let Some(took) = s.memory.took {
        p.seconds(
            "natsprobe_last_look_duration_seconds",
            "How long the last look took.",
            seconds(took),
        );
    }
    p.seconds(
        "natsprobe_stale_after_seconds",
        "How long a verdict stands: no look ended for longer, and the looks are stalled (/selfz fails).",
        seconds(s.memory.stale),
    );
    let judged: &[Part] = match answer {
        Answer::Verdict { judged, .. } => &judged.parts,
        _ => &[],
    };
    let found = |name: &PartName| judged.iter().find(|p| p.name == *name);
    let consumers: Vec<_> = s
        .parts
        .iter()
        .filter_map(|n| match n {
            PartName::Consumer { stream, durable } => Some((
                [("stream", stream.as_str()), ("durable", durable)],
                found(n),
            )),
            _ => None,
        })
        .collect();
    if !consumers.is_empty() {
        p.family(
            "natsprobe_consumer_state",
            "gauge",
            "Each --consumer's state in the verdict /livez answers (the JSON's state): a gauge with a series per state, 1 for it, 0 for the others.",
        );
        for (labels, part) in &consumers {
            p.states("natsprobe_consumer_state", labels, &consumer::STATES, *part);
        }
        let waiting: Vec<_> = consumers
            .iter()
            .filter_map(|(labels, part)| Some((labels, part.as_ref()?.no_progress_ms?)))
            .collect();
        if !waiting.is_empty() {
            p.family(
                "natsprobe_consumer_no_progress_seconds",
                "gauge",
                "A --consumer's time without progress while work waits (the JSON's no_progress_ms), where the verdict measured one.",
            );
            p.unit("natsprobe_consumer_no_progress_seconds");
            for (labels, ms) in waiting {
                p.sample(
                    "natsprobe_consumer_no_progress_seconds",
                    labels,
                    seconds_ms(ms as i64),
                );
            }
        }
    }
    // A subscription's labels: --own-subscription's consumer as the consumers' families name
    // it (stream, durable), --subscription's subject and queue; the others empty.
    let subscriptions: Vec<_> = s
        .parts
        .iter()
        .filter_map(|n| {
            let labels = match n {
                PartName::Consumer { .. } => return None,
                PartName::Own { stream, durable } => [stream.as_str(), durable, "", ""],
                PartName::Subscription { subject, queue } => [
                    "",
                    "",
                    subject.as_str(),
                    queue.as_deref().unwrap_or_default(),
                ],
            };
            Some((labels, found(n)))
        })
        .collect();
    if !subscriptions.is_empty() {
        p.family(
            "natsprobe_subscription_state",
            "gauge",
            "Each subscription's state in the verdict /livez answers (the JSON's state), by --own-subscription's consumer (stream, durable) or --subscription's subject and queue: a gauge with a series per state, 1 for it, 0 for the others.",
        );
        for ([stream, durable, subject, queue], part) in &subscriptions {
            let labels = [
                ("stream", *stream),
                ("durable", durable),
                ("subject", subject),
                ("queue", queue),
            ];
            p.states(
                "natsprobe_subscription_state",
                &labels,
                &subscription::STATES,
                *part,
            );
        }
    }
    let tally = &s.memory.tally;
    let looks = p.counter("natsprobe_looks", "Looks since serve started, by verdict.");
    for (v, n) in VERDICTS.iter().zip(tally.looks) {
        p.sample(&looks, &[("verdict", v)], n.to_string());
    }
    let not_judged = p.counter(
        "natsprobe_looks_not_judged",
        "Looks not judged since serve started, by cause: look_failed (natsprobe's own trouble), server_down, or the consumer's or subscription's not_judged word.",
    );
    for (c, n) in CAUSES.iter().zip(tally.not_judged) {
        p.sample(&not_judged, &[("cause", c)], n.to_string());
    }
    let logins = p.counter(
        "natsprobe_nats_logins",
        "Logins to NATS the looks made since serve started (each connection NATS accepted).",
    );
    p.sample(&logins, &[], tally.logins.to_string());
    let help = "natsprobe's version and the git revision it was built from.";
    match open_metrics {
        true => p.family("natsprobe_build", "info", help),
        false => p.family("natsprobe_build_info", "gauge", help),
    }
    let (version, revision) = build(s.version);
    p.sample(
        "natsprobe_build_info",
        &[("version", version), ("revision", revision)],
        "1".into(),
    );
    if open_metrics {
        p.out.push_str("# EOF");
    } else {
        p.out.pop();
    }
    p.out
}

struct Page {
    out: String,
    open_metrics: bool,
}

impl Page {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = write!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
    }

    /// OpenMetrics' unit of a family named `_seconds` (Prometheus's format has none).
    fn unit(&mut self, name: &str) {
        if self.open_metrics {
            let _ = writeln!(self.out, "# UNIT {name} seconds");
        }
    }

    /// A gauge in seconds with one sample, unlabelled.
    fn seconds(&mut self, name: &str, help: &str, value: String) {
        self.family(name, "gauge", help);
        self.unit(name);
        self.sample(name, &[], value);
    }

    /// A counter: its family is named without `_total` in OpenMetrics, with it in
    /// Prometheus's format; its samples are named with it, the name returned.
    fn counter(&mut self, name: &str, help: &str) -> String {
        let total = format!("{name}_total");
        match self.open_metrics {
            true => self.family(name, "counter", help),
            false => self.family(&total, "counter", help),
        }
        total
    }

    /// A part's state: a sample for each of `states`, 1 for the part's (not judged where no
    /// verdict names it), 0 for the others.
    fn states(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        states: &[&str],
        part: Option<&Part>,
    ) {
        let now = part.map_or("not_judged", |p| p.state.as_str());
        for state in states {
            let mut all = labels.to_vec();
            all.push(("state", state));
            self.sample(name, &all, flag(*state == now));
        }
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: String) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                let _ = write!(self.out, "{sep}{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }
}

/// `--version`'s words as the version and the revision (`unknown` where it names none).
fn build(version: &str) -> (&str, &str) {
    version
        .split_once(" (git ")
        .map_or((version, "unknown"), |(v, rest)| {
            (v, rest.strip_suffix(')').unwrap_or(rest))
        })
}

fn flag(on: bool) -> String {
    String::from(if on { "1" } else { "0" })
}

fn seconds(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

fn seconds_ms(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// A label's value as both formats quote it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Ended, Judged};
    use crate::rules::serve::Looks;

    fn render(judged: Option<Judged>, parts: &[PartName], open_metrics: bool) -> String {
        let second = Duration::from_secs(1);
        let mut looks = Looks::new(10 * second, second, false, None, 0);
        if let Some(j) = judged {
            looks.ended(Ended::Judged(j), Duration::ZERO, Duration::from_millis(250));
        }
        let memory = looks.memory();
        page(
            &Scrape {
                memory: &memory,
                since_start: 2 * second,
                now_ms: 1_700_000_002_000,
                parts,
                version: "0.1.0 (git x)",
            },
            open_metrics,
        )
    }

    /// `/livez`'s JSON and `/metrics` name every verdict by one word: a check's that judged,
    /// passed without judging, can never run as configured, could not run; and `serve`'s own
    /// before its first look.
    #[test]
    fn livez_json_and_the_page_name_each_verdict_alike() {
        use crate::report::serve::answer;
        let json = |verdict: &str| format!(r#"{{"schema_version":1,"verdict":"{verdict}"}}"#);
        let checks = [
            (0, "healthy", None, "healthy"),
            (0, "healthy", Some("timeout"), "not_judged"),
            (1, "unhealthy", None, "unhealthy"),
            (2, "configuration_error", None, "configuration_error"),
            (2, "error", None, "error"),
            (3, "error", None, "error"),
        ];
        let second = Duration::from_secs(1);
        for (code, verdict, not_judged, word) in checks {
            let judged = Judged {
                code,
                verdict: verdict.into(),
                json: json(verdict),
                not_judged: not_judged.map(String::from),
                ..Judged::default()
            };
            let mut looks = Looks::new(10 * second, second, false, None, 0);
            looks.ended(Ended::Judged(judged), Duration::ZERO, second);
            let memory = looks.memory();
            let livez = answer(&memory.answer(ProbePath::Live, 2 * second), true);
            let v: serde_json::Value = serde_json::from_str(&livez.body).unwrap();
            assert_eq!(v["verdict"], word, "/livez for {verdict} {not_judged:?}");
            let page = render_memory(&memory);
            let line = format!("natsprobe_verdict{{verdict=\"{word}\"}} 1");
            assert!(page.lines().any(|l| l == line), "{line}\n{page}");
        }
        // Before the first look: serve's own answer.
        let memory = Looks::new(10 * second, second, false, None, 0).memory();
        let livez = answer(&memory.answer(ProbePath::Live, 2 * second), true);
        let v: serde_json::Value = serde_json::from_str(&livez.body).unwrap();
        assert_eq!(v["verdict"], "not_judged");
        assert!(render_memory(&memory).contains("natsprobe_verdict{verdict=\"not_judged\"} 1"));
    }

    fn render_memory(memory: &crate::rules::serve::Memory) -> String {
        page(
            &Scrape {
                memory,
                since_start: 2 * Duration::from_secs(1),
                now_ms: 1_700_000_002_000,
                parts: &[],
                version: "0.1.0 (git x)",
            },
            false,
        )
    }

    /// The verdict and each configured part's state, a series per state; a part a verdict does
    /// not name (or no verdict at all) is not judged; label values quoted as the formats quote
    /// them; the pod's own subscription to a consumer named as the consumer's families name it.
    /// A verdict that judged `consumer` stalled, no progress for 61.5 s.
    fn stalled(consumer: &PartName) -> Judged {
        Judged {
            code: 1,
            verdict: "unhealthy".into(),
            parts: vec![Part {
                name: consumer.clone(),
                state: "stalled".into(),
                no_progress_ms: Some(61_500),
            }],
            ..Judged::default()
        }
    }

    #[test]
    fn the_page_says_the_verdict_and_each_parts_state() {
        let consumer = PartName::Consumer {
            stream: "S".into(),
            durable: "D".into(),
        };
        let subject = PartName::Subscription {
            subject: "a\"b\\c".into(),
            queue: None,
        };
        let own = PartName::Own {
            stream: "S".into(),
            durable: "D".into(),
        };
        let judged = stalled(&consumer);
        let text = render(Some(judged), &[consumer.clone(), subject, own], false);
        for line in [
            "natsprobe_verdict{verdict=\"unhealthy\"} 1",
            "natsprobe_verdict{verdict=\"healthy\"} 0",
            "natsprobe_last_look_timestamp_seconds 1700000000.250",
            "natsprobe_last_look_duration_seconds 0.250",
            "natsprobe_consumer_state{stream=\"S\",durable=\"D\",state=\"stalled\"} 1",
            "natsprobe_consumer_state{stream=\"S\",durable=\"D\",state=\"idle\"} 0",
            "natsprobe_consumer_no_progress_seconds{stream=\"S\",durable=\"D\"} 61.500",
            "natsprobe_subscription_state{stream=\"\",durable=\"\",subject=\"a\\\"b\\\\c\",queue=\"\",state=\"not_judged\"} 1",
            "natsprobe_subscription_state{stream=\"S\",durable=\"D\",subject=\"\",queue=\"\",state=\"held\"} 0",
            "natsprobe_looks_total{verdict=\"unhealthy\"} 1",
            "# TYPE natsprobe_looks_total counter",
            "natsprobe_looks_not_judged_total{cause=\"look_failed\"} 0",
            "# TYPE natsprobe_looks_not_judged_total counter",
            "natsprobe_nats_logins_total 0",
            "# TYPE natsprobe_nats_logins_total counter",
            "natsprobe_build_info{version=\"0.1.0\",revision=\"x\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        assert!(!text.contains("# EOF") && !text.ends_with('\n'));
        assert!(!text.contains("# UNIT"), "{text}");
        // No look yet: not judged, the consumer's state too, and no look's duration.
        let first = render(None, &[consumer], true);
        assert!(
            first.contains("natsprobe_verdict{verdict=\"not_judged\"} 1"),
            "{first}"
        );
        assert!(first.contains("state=\"not_judged\"} 1"), "{first}");
        assert!(
            !first.contains("natsprobe_last_look_duration_seconds"),
            "{first}"
        );
        assert!(first.contains("natsprobe_last_look_timestamp_seconds 1700000000.000"));
        // OpenMetrics: counters' families without `_total`, the info type, the end.
        assert!(
            first.contains("# TYPE natsprobe_looks counter\n"),
            "{first}"
        );
        assert!(first.contains("# TYPE natsprobe_build info\n"), "{first}");
        assert!(first.ends_with("\n# EOF"), "{first}");
    }

    /// OpenMetrics gives each family in seconds its unit, after its type and before its
    /// samples; the state families are gauges in both formats.
    #[test]
    fn open_metrics_says_the_unit_of_each_family_in_seconds() {
        let consumer = PartName::Consumer {
            stream: "S".into(),
            durable: "D".into(),
        };
        let judged = stalled(&consumer);
        let text = render(Some(judged), &[consumer], true);
        let lines: Vec<&str> = text.lines().collect();
        let mut in_seconds = 0;
        for (i, line) in lines.iter().enumerate() {
            let Some(name) = line
                .strip_prefix("# TYPE ")
                .and_then(|t| t.split(' ').next())
            else {
                continue;
            };
            let unit = format!("# UNIT {name} seconds");
            match name.ends_with("_seconds") {
                true => {
                    in_seconds += 1;
                    assert_eq!(lines[i + 1], unit, "{text}");
                }
                false => assert!(!text.contains(&format!("# UNIT {name} ")), "{text}"),
            }
        }
        assert_eq!(in_seconds, 4, "{text}");
        for family in ["verdict", "consumer_state"] {
            let kind = format!("# TYPE natsprobe_{family} gauge\n");
            assert!(text.contains(&kind), "{kind}{text}");
        }
    }

    /// `--version`'s words as build_info's two labels.
    #[test]
    fn build_info_says_the_version_and_the_revision_apart() {
        assert_eq!(build("0.1.0 (git 0123456789ab)"), ("0.1.0", "0123456789ab"));
        assert_eq!(build("0.1.0 (git unknown)"), ("0.1.0", "unknown"));
        assert_eq!(build("0"), ("0", "unknown"));
    }
}
