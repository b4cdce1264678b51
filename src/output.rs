//! Formatters: a report becomes one line (plus detail lines with `-v`) or one JSON object.
//! They return strings; `main` writes them.

use crate::check::{ConsumerReport, Report};
use crate::consumer::{Evidence, Fault, Healthy, Observed, Outcome, Window};
use crate::server::Answer;
use crate::sockets::{unmap, Socket};
use crate::verdict::{ConsumerHealth, Health, Reason, WhenServerDown};
use serde_json::{json, Value};
use std::fmt::Write;

/// The kubelet cuts event messages at 1024 characters and operators read them in
/// `kubectl describe`: the verdict line stays under 300.
pub const MAX_LINE: usize = 299;

/// Sockets listed with `-v`: enough to see what is there, far inside the kubelet's 10 KiB.
const MAX_LISTED: usize = 50;

pub fn human(report: &Report) -> String {
    let mut out = line(report);
    if report.config.verbose {
        out.push('\n');
        out.push_str(&details(report));
    }
    out
}

/// The verdict first, then the evidence.
pub fn line(report: &Report) -> String {
    let verdict = match report.verdict.health {
        Health::Healthy => "healthy",
        Health::Unhealthy => "unhealthy",
    };
    clip(format!("{verdict}: {}", summary(report)))
}

fn summary(report: &Report) -> String {
    let c = &report.connections;
    match report.verdict.reason {
        Reason::Connected => {
            // Each peer once: a client with several connections to one server names it once.
            let mut peers: Vec<String> = c.established.iter().map(peer).collect();
            peers.sort();
            peers.dedup();
            let mut text = format!("{} ({})", connections(report), list(&peers, 3));
            for r in &report.consumers {
                let _ = write!(text, "; consumer {} {}", r.name, consumer_phrase(r));
            }
            text
        }
        Reason::ConsumerFault | Reason::ConsumerNotJudged => {
            // The consumers that fail the verdict (or could not be judged) first: they are
            // why the line exists; the connection that is fine comes after.
            let wanted = match report.verdict.reason {
                Reason::ConsumerFault => ConsumerHealth::Unhealthy,
                _ => ConsumerHealth::NotJudged,
            };
            let parts: Vec<String> = report
                .consumers
                .iter()
                .filter(|r| r.health() == wanted)
                .map(|r| match &r.judgement.outcome {
                    Outcome::NotJudged(_) => format!("consumer {} {}", r.name, consumer_phrase(r)),
                    _ => format!("consumer {}: {}", r.name, consumer_phrase(r)),
                })
                .collect();
            let fail =
                wanted == ConsumerHealth::NotJudged && report.verdict.health == Health::Unhealthy;
            let policy = if fail {
                " (--when-server-down fail)"
            } else {
                ""
            };
            format!("{}{policy}; {}", parts.join("; "), connections(report))
        }
        Reason::NotConnected => {
            let min = report.config.policy.min_connections;
            let required = if min > 1 {
                format!(", {min} required")
            } else {
                String::new()
            };
            format!("{}{required} ({})", connections(report), evidence(report))
        }
        Reason::ServerAnswers => {
            let (url, answer) = report
                .config
                .servers
                .iter()
                .zip(&report.answers)
                .find(|(_, a)| a.is_nats())
                .expect("ServerAnswers means one answered");
            format!(
                "client holds {} while {url} answers ({answer}): {} ({})",
                held(report),
                connections(report),
                evidence(report)
            )
        }
        Reason::ServerDown => {
            let urls: Vec<String> = report
                .config
                .servers
                .iter()
                .map(|u| u.to_string())
                .collect();
            let verb = if urls.len() == 1 { "is" } else { "are" };
            let urls = list(&urls, 3).replace(", ", " and ");
            let why = why_not_answering(report);
            match report.verdict.health {
                Health::Healthy => format!(
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

/// What one consumer's judgement says, without its name.
fn consumer_phrase(r: &ConsumerReport) -> String {
    let window = |w: &Option<Window>| match w {
        Some(Window {
            duration,
            raised_for_ack_wait: Some(ack_wait),
        }) => {
            format!(
                "window {} = 2 × ack_wait {}",
                display(*duration),
                display(*ack_wait)
            )
        }
        Some(Window { duration, .. }) => format!("window {}", display(*duration)),
        None => String::new(),
    };
    let w = window(&r.judgement.window);
    match &r.judgement.outcome {
        Outcome::NotJudged(why) => format!("not judged: {why}"),
        Outcome::Healthy(h) => match h {
            Healthy::Idle => "idle (nothing waiting)".into(),
            Healthy::Paused => "paused".into(),
            Healthy::Progressing { since, evidence: Evidence::LastActive } => {
                format!("progressing (last ack {} ago; {w})", display(*since))
            }
            Healthy::Progressing { since, .. } if since.is_zero() => {
                format!("progressing (ack floor moved since the last run; {w})")
            }
            Healthy::Progressing { since, .. } => {
                format!("progressing (ack floor still for {}; {w})", display(*since))
            }
            Healthy::FirstSample => "first sample (progress is judged from the next run)".into(),
            Healthy::YoungClient { stalled, client_age } => format!(
                "no progress for {}, but the client started {} ago ({w})",
                display(*stalled),
                display(*client_age)
            ),
            Healthy::ClientAgeUnknown { stalled } => format!(
                "no progress for {}, not judged: the client's start time is unreadable ({w})",
                display(*stalled)
            ),
        },
        Outcome::Unhealthy(f) => match f {
            Fault::StreamMissing => format!("stream {} not found", r.name.stream),
            Fault::ConsumerMissing => format!("durable {} not found in stream {}", r.name.durable, r.name.stream),
            Fault::Unbound { waiting } => {
                format!("no subscriber bound to its deliver subject (push_bound false), {waiting} waiting")
            }
            Fault::Stalled { stalled, floor, waiting, .. } => format!(
                "no progress for {} ({w}): ack floor at {floor}, {waiting} waiting",
                display(*stalled)
            ),
            Fault::Retention { stalled, first_seq, waiting } => format!(
                "losing messages: for {} only retention has moved its ack floor, which sits at the stream's first sequence {first_seq} (limits, discard old), {waiting} waiting",
                display(*stalled)
            ),
        },
    }
}

/// The facts behind a consumer's verdict, for `-v`.
fn consumer_details(r: &ConsumerReport) -> String {
    let mut out = match &r.observed {
        Observed::Found { facts: f, stream } => {
            let kind = match (&f.push, &f.deliver_group) {
                (true, Some(g)) => format!(
                    "push (group {g}), {}",
                    if f.push_bound { "bound" } else { "NOT bound" }
                ),
                (true, None) => {
                    format!("push, {}", if f.push_bound { "bound" } else { "NOT bound" })
                }
                (false, _) => "pull".to_string(),
            };
            let mut text = format!(
                "{kind}; {} pending, {} awaiting ack, {} pulls waiting, {} redelivered; ack floor {} (stream {})",
                f.num_pending, f.num_ack_pending, f.num_waiting, f.num_redelivered, f.ack_floor.consumer_seq, f.ack_floor.stream_seq
            );
            if let Some(ago) = ago(f.ts, f.ack_floor.last_active) {
                let _ = write!(text, ", last ack {} ago", display(ago));
            }
            if let Some(w) = f.ack_wait {
                let _ = write!(text, "; ack_wait {}", display(w));
            }
            if let Some(m) = f.max_ack_pending {
                let _ = write!(text, ", max_ack_pending {m}");
            }
            if let Some(s) = stream {
                let _ = write!(
                    text,
                    "; stream first sequence {}{}",
                    s.first_seq,
                    if s.drops_unacked {
                        " (limits, discard old)"
                    } else {
                        ""
                    }
                );
            }
            if f.ts.is_none() {
                text.push_str("; the server sends no ts (before 2.10): samples decide");
            }
            let _ = write!(text, " → {}", consumer_phrase(r));
            text
        }
        _ => consumer_phrase(r),
    };
    match (&r.previous, &r.state_problem) {
        (_, Some(problem)) => {
            let _ = write!(out, "; state not kept: {problem}");
        }
        (Some(previous), None) => {
            let _ = write!(out, "; {}", previous.describe());
        }
        (None, None) => {}
    }
    out
}

/// `ts - t` when the server gave both.
fn ago(ts: Option<i128>, t: Option<i128>) -> Option<std::time::Duration> {
    let ns = u64::try_from((ts? - t?).max(0)).ok()?;
    Some(std::time::Duration::from_nanos(ns))
}

fn consumer_json(r: &ConsumerReport) -> Value {
    let verdict = match r.health() {
        ConsumerHealth::Healthy => "healthy",
        ConsumerHealth::Unhealthy => "unhealthy",
        ConsumerHealth::NotJudged => "not_judged",
    };
    let (facts, stream) = match &r.observed {
        Observed::Found { facts: f, stream } => (
            json!({
                "push": f.push,
                "deliver_group": f.deliver_group,
                "push_bound": f.push_bound,
                "num_pending": f.num_pending,
                "num_ack_pending": f.num_ack_pending,
                "num_waiting": f.num_waiting,
                "num_redelivered": f.num_redelivered,
                "ack_floor": {
                    "consumer_seq": f.ack_floor.consumer_seq,
                    "stream_seq": f.ack_floor.stream_seq,
                    "last_active_ago_ms": ago(f.ts, f.ack_floor.last_active).map(|d| d.as_millis() as u64),
                },
                "delivered": {
                    "consumer_seq": f.delivered.consumer_seq,
                    "stream_seq": f.delivered.stream_seq,
                    "last_active_ago_ms": ago(f.ts, f.delivered.last_active).map(|d| d.as_millis() as u64),
                },
                "ack_policy": f.ack_policy,
                "ack_wait_ms": f.ack_wait.map(|d| d.as_millis() as u64),
                "max_ack_pending": f.max_ack_pending,
                "paused": f.paused,
                "server_ts": f.ts.is_some(),
            }),
            stream
                .as_ref()
                .map(|s| json!({"drops_unacked": s.drops_unacked, "first_seq": s.first_seq})),
        ),
        _ => (Value::Null, None),
    };
    let (stalled, evidence) = match &r.judgement.outcome {
        Outcome::Healthy(Healthy::Progressing { since, evidence }) => {
            (Some(*since), Some(*evidence))
        }
        Outcome::Unhealthy(Fault::Stalled {
            stalled, evidence, ..
        }) => (Some(*stalled), Some(*evidence)),
        Outcome::Unhealthy(Fault::Retention { stalled, .. }) => {
            (Some(*stalled), Some(Evidence::Samples))
        }
        Outcome::Healthy(
            Healthy::YoungClient { stalled, .. } | Healthy::ClientAgeUnknown { stalled },
        ) => (Some(*stalled), None),
        _ => (None, None),
    };
    json!({
        "name": r.name.to_string(),
        "stream": r.name.stream,
        "durable": r.name.durable,
        "verdict": verdict,
        "summary": consumer_phrase(r),
        "window_ms": r.judgement.window.map(|w| w.duration.as_millis() as u64),
        "window_raised_for_ack_wait_ms": r.judgement.window.and_then(|w| w.raised_for_ack_wait).map(|d| d.as_millis() as u64),
        "no_progress_ms": stalled.map(|d| d.as_millis() as u64),
        "evidence": evidence.map(|e| match e { Evidence::LastActive => "last_active", Evidence::Samples => "samples" }),
        "facts": facts,
        "stream_facts": stream,
        "previous_sample": r.previous.as_ref().map(|p| p.describe()),
        "state_problem": r.state_problem,
    })
}

fn display(d: std::time::Duration) -> String {
    // Whole seconds read best in an event; below 10 s a tenth still says something.
    let d = match d.as_secs() {
        0..=9 => std::time::Duration::from_millis(d.as_millis() as u64 / 100 * 100),
        _ => std::time::Duration::from_secs(d.as_secs()),
    };
    crate::duration::display(d)
}

/// `no ESTABLISHED TCP connection to remote port 4222 held by bento[7]`.
fn connections(report: &Report) -> String {
    let n = report.connections.established.len();
    let count = if n == 0 {
        "no".to_string()
    } else {
        n.to_string()
    };
    let plural = if n <= 1 { "" } else { "s" };
    format!(
        "{count} ESTABLISHED TCP connection{plural} to {}{}{}",
        target(report),
        holder(report),
        netns(report)
    )
}

/// `no connection`, or `1 of 2 required connections`.
fn held(report: &Report) -> String {
    match report.connections.established.len() {
        0 => "no connection".to_string(),
        n => format!(
            "{n} of {} required connections",
            report.config.policy.min_connections
        ),
    }
}

/// What the table holds instead: `0 established; 1 SYN_SENT`.
fn evidence(report: &Report) -> String {
    let c = &report.connections;
    let states = c.other_states();
    let mut text = if c.established.is_empty() && states.is_empty() {
        let that = if report.config.policy.ports.len() == 1 {
            "that port"
        } else {
            "those ports"
        };
        format!("no socket to {that} in any state")
    } else {
        let others: Vec<String> = states.iter().map(|(s, k)| format!("{k} {s}")).collect();
        match others.is_empty() {
            true => format!("{} established", c.established.len()),
            false => format!("{} established; {}", c.established.len(), others.join(", ")),
        }
    };
    if report.skipped_lines > 0 {
        let _ = write!(
            text,
            "; {} unparsable /proc lines skipped",
            report.skipped_lines
        );
    }
    text
}

/// One reason when the servers agree, else each URL's.
fn why_not_answering(report: &Report) -> String {
    let reasons: Vec<String> = report.answers.iter().map(|a| a.to_string()).collect();
    if reasons.windows(2).all(|w| w[0] == w[1]) {
        return reasons.first().cloned().unwrap_or_default();
    }
    let each: Vec<String> = report
        .config
        .servers
        .iter()
        .zip(&reasons)
        .map(|(u, r)| format!("{u}: {r}"))
        .collect();
    each.join("; ")
}

fn target(report: &Report) -> String {
    let policy = &report.config.policy;
    let ports: Vec<String> = policy.ports.iter().map(u16::to_string).collect();
    let mut text = match ports.len() {
        1 => format!("remote port {}", ports[0]),
        _ => format!("remote ports {}", list(&ports, 4)),
    };
    if !policy.remotes.is_empty() {
        let remotes: Vec<String> = policy.remotes.iter().map(|r| r.to_string()).collect();
        let _ = write!(text, " on {}", list(&remotes, 3).replace(", ", " or "));
    }
    text
}

/// ` held by bento[42]`: the syslog convention for a process and its PID(s).
fn holder(report: &Report) -> String {
    let Some(first) = report.processes.first() else {
        return String::new();
    };
    let pids: Vec<String> = report.processes.iter().map(|p| p.pid.to_string()).collect();
    format!(
        " held by {}[{}]",
        first.name,
        list(&pids, 5).replace(", ", ",")
    )
}

fn netns(report: &Report) -> String {
    match report.config.netns_of {
        Some(pid) => format!(" in the network namespace of pid {pid}"),
        None => String::new(),
    }
}

fn peer(s: &Socket) -> String {
    match unmap(s.remote.ip()) {
        std::net::IpAddr::V6(ip) => format!("[{ip}]:{}", s.remote.port()),
        ip => format!("{ip}:{}", s.remote.port()),
    }
}

/// `a, b, c and 2 more`.
fn list(items: &[String], max: usize) -> String {
    if items.len() <= max {
        return items.join(", ");
    }
    format!("{} and {} more", items[..max].join(", "), items.len() - max)
}

fn clip(mut line: String) -> String {
    if line.chars().count() > MAX_LINE {
        line = line.chars().take(MAX_LINE - 1).collect();
        line.push('…');
    }
    line
}

fn details(report: &Report) -> String {
    let mut out = String::new();
    let _ = write!(out, "  reader: {}", report.reader.name());
    if let Some(why) = &report.fallback {
        let _ = write!(out, " ({why})");
    }
    if report.skipped_lines > 0 {
        let _ = write!(out, "; {} unparsable lines skipped", report.skipped_lines);
    }
    let c = &report.connections;
    let all: Vec<&Socket> = c.established.iter().chain(&c.others).collect();
    if all.is_empty() {
        out.push_str("\n  no matching sockets");
    }
    for s in all.iter().take(MAX_LISTED) {
        let _ = write!(
            out,
            "\n  {:<11} {} -> {} uid {} inode {}",
            s.state.name(),
            s.local,
            s.remote,
            s.uid,
            s.inode
        );
    }
    if all.len() > MAX_LISTED {
        let _ = write!(out, "\n  … and {} more", all.len() - MAX_LISTED);
    }
    for r in &report.consumers {
        let _ = write!(out, "\n  consumer {}: {}", r.name, consumer_details(r));
    }
    if !report.config.consumers.is_empty() && report.consumers.is_empty() {
        out.push_str("\n  consumers not asked about: no connection to judge them by");
    }
    // When asked, every URL has its answer, in order.
    for (i, url) in report.config.servers.iter().enumerate() {
        let _ = match report.answers.get(i) {
            Some(answer) => write!(out, "\n  server {url}: {answer}"),
            None => write!(out, "\n  server {url}: not asked (the connection is there)"),
        };
    }
    out
}

pub fn json(report: &Report) -> String {
    let c = &report.connections;
    let policy = &report.config.policy;
    let states: serde_json::Map<String, Value> = c
        .other_states()
        .into_iter()
        .map(|(s, n)| (s.name().to_string(), json!(n)))
        .collect();
    let mut connection = json!({
        "ports": policy.ports,
        "remotes": policy.remotes.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
        "min_connections": policy.min_connections,
        "established": c.established.len(),
        "other_states": states,
        "processes": report.processes.iter().map(|p| json!({"pid": p.pid, "name": p.name})).collect::<Vec<_>>(),
        "netns_of": report.config.netns_of,
        "reader": report.reader.name(),
        "reader_fallback": report.fallback,
        "skipped_lines": report.skipped_lines,
    });
    if report.config.verbose {
        let sockets: Vec<Value> = c
            .established
            .iter()
            .chain(&c.others)
            .map(socket_json)
            .collect();
        connection["sockets"] = json!(sockets);
    }
    let verdict = match report.verdict.health {
        Health::Healthy => "healthy",
        Health::Unhealthy => "unhealthy",
    };
    let server = (!report.config.servers.is_empty()).then(|| {
        let answers: Vec<Value> = report
            .config
            .servers
            .iter()
            .zip(&report.answers)
            .map(|(url, a)| json!({"url": url.to_string(), "answer": answer_kind(a), "detail": a.to_string()}))
            .collect();
        json!({
            "urls": report.config.servers.iter().map(|u| u.to_string()).collect::<Vec<_>>(),
            "asked": !report.answers.is_empty(),
            "answers": answers,
            "when_server_down": match report.config.policy.when_server_down {
                WhenServerDown::Pass => "pass",
                WhenServerDown::Fail => "fail",
            },
        })
    });
    let consumers: Vec<Value> = report.consumers.iter().map(consumer_json).collect();
    json!({
        "verdict": verdict,
        "summary": summary(report),
        "connection": connection,
        "server": server,
        "consumers": consumers,
    })
    .to_string()
}

fn answer_kind(a: &Answer) -> &'static str {
    match a {
        Answer::Nats { .. } => "nats",
        Answer::Refused => "refused",
        Answer::Silent => "silent",
        Answer::NotNats(_) => "not_nats",
        Answer::Unresolved(_) => "unresolved",
        Answer::Failed(_) => "failed",
    }
}

fn socket_json(s: &Socket) -> Value {
    json!({
        "state": s.state.name(),
        "local": s.local.to_string(),
        "remote": s.remote.to_string(),
        "uid": s.uid,
        "inode": s.inode,
    })
}

/// A run that ended without a verdict, as one line or one JSON object.
pub fn error(message: &str, json_output: bool) -> String {
    if json_output {
        json!({"verdict": "error", "summary": message}).to_string()
    } else {
        clip(message.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{CheckConfig, Owner};
    use crate::sockets::owner::Process;
    use crate::sockets::{Reader, ReaderChoice, TcpState};
    use crate::verdict::{self, Policy};
    use std::time::Duration;

    fn sock(local: &str, remote: &str, state: TcpState, inode: u64) -> Socket {
        Socket {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            state,
            inode,
            uid: 1000,
        }
    }

    fn report(sockets: &[Socket], ports: &[u16], owner: Owner, verbose: bool) -> Report {
        let config = CheckConfig {
            policy: Policy {
                ports: ports.to_vec(),
                remotes: vec![],
                min_connections: 1,
                server: false,
                when_server_down: WhenServerDown::Pass,
            },
            servers: vec![],
            consumers: vec![],
            consumer_policy: crate::consumer::Policy {
                stall_after: Duration::from_secs(60),
            },
            state_dir: ("/nonexistent".into(), true),
            auth: Default::default(),
            owner: owner.clone(),
            netns_of: None,
            reader: ReaderChoice::Auto,
            timeout: Duration::from_millis(800),
            json: false,
            verbose,
        };
        let connections = verdict::connections(sockets, &config.policy, None);
        let processes = match owner {
            Owner::Anyone => vec![],
            Owner::Pid(pid) => vec![Process {
                pid,
                name: "bento".into(),
            }],
            Owner::Name(name) => vec![
                Process {
                    pid: 7,
                    name: name.clone(),
                },
                Process { pid: 9, name },
            ],
        };
        Report {
            verdict: verdict::decide(&connections, None, &[], &config.policy),
            config,
            connections,
            processes,
            reader: Reader::Netlink,
            fallback: None,
            skipped_lines: 0,
            answers: vec![],
            consumers: vec![],
        }
    }

    /// The report of a connected run whose `--consumer`s came out as `judged`.
    fn with_consumers(
        mut r: Report,
        judged: Vec<(&str, Observed, Outcome, Option<Window>)>,
        when: WhenServerDown,
    ) -> Report {
        use crate::check::ConsumerReport;
        use crate::nats::ConsumerName;
        r.config.servers = vec![crate::server::parse("nats://nats:4222").unwrap()];
        r.config.policy.server = true;
        r.config.policy.when_server_down = when;
        r.consumers = judged
            .into_iter()
            .map(|(name, observed, outcome, window)| {
                let (stream, durable) = name.split_once('/').unwrap();
                ConsumerReport {
                    name: ConsumerName {
                        stream: stream.into(),
                        durable: durable.into(),
                    },
                    observed,
                    judgement: crate::consumer::Judgement {
                        outcome,
                        window,
                        sample: None,
                    },
                    previous: Some(crate::state::Loaded::Missing),
                    state_problem: None,
                }
            })
            .collect();
        let healths: Vec<_> = r.consumers.iter().map(|c| c.health()).collect();
        r.verdict = verdict::decide(&r.connections, None, &healths, &r.config.policy);
        r
    }

    #[test]
    fn consumer_lines() {
        use crate::consumer::{Evidence, Fault, Healthy};
        let win = Some(Window {
            duration: Duration::from_secs(60),
            raised_for_ack_wait: None,
        });
        let raised = Some(Window {
            duration: Duration::from_secs(180),
            raised_for_ack_wait: Some(Duration::from_secs(90)),
        });
        let nf = || Observed::NotJudged("x".into());
        let live = || report(&live()[..1], &[4222], Owner::Anyone, false);
        let cases = [
            (
                with_consumers(live(), vec![("TF_RAW/latest-kv", nf(), Outcome::Unhealthy(Fault::Unbound { waiting: 93000 }), None)], WhenServerDown::Pass),
                "unhealthy: consumer TF_RAW/latest-kv: no subscriber bound to its deliver subject (push_bound false), 93000 waiting; 1 ESTABLISHED TCP connection to remote port 4222",
            ),
            (
                with_consumers(
                    live(),
                    vec![(
                        "TF_RAW/alarms",
                        nf(),
                        Outcome::Unhealthy(Fault::Stalled { stalled: Duration::from_secs(75), evidence: Evidence::Samples, floor: 0, waiting: 4000 }),
                        raised,
                    )],
                    WhenServerDown::Pass,
                ),
                "unhealthy: consumer TF_RAW/alarms: no progress for 1m15s (window 3m = 2 × ack_wait 1m30s): ack floor at 0, 4000 waiting; 1 ESTABLISHED TCP connection to remote port 4222",
            ),
            (
                with_consumers(live(), vec![("TF_RAW/gone", nf(), Outcome::Unhealthy(Fault::ConsumerMissing), None), ("NOPE/x", nf(), Outcome::Unhealthy(Fault::StreamMissing), None)], WhenServerDown::Pass),
                "unhealthy: consumer TF_RAW/gone: durable gone not found in stream TF_RAW; consumer NOPE/x: stream NOPE not found; 1 ESTABLISHED TCP connection to remote port 4222",
            ),
            (
                with_consumers(live(), vec![("CAP/w", nf(), Outcome::Unhealthy(Fault::Retention { stalled: Duration::from_secs(61), first_seq: 1401, waiting: 200 }), win)], WhenServerDown::Pass),
                "unhealthy: consumer CAP/w: losing messages: for 1m1s only retention has moved its ack floor, which sits at the stream's first sequence 1401 (limits, discard old), 200 waiting; 1 ESTABLISHED TCP connection to remote port 4222",
            ),
            (
                with_consumers(
                    live(),
                    vec![
                        ("TF_RAW/latest-kv", nf(), Outcome::Healthy(Healthy::Progressing { since: Duration::from_millis(830), evidence: Evidence::LastActive }), win),
                        ("TF_RAW/idle", nf(), Outcome::Healthy(Healthy::Idle), win),
                    ],
                    WhenServerDown::Pass,
                ),
                "healthy: 1 ESTABLISHED TCP connection to remote port 4222 (10.96.14.2:4222); consumer TF_RAW/latest-kv progressing (last ack 800ms ago; window 1m); consumer TF_RAW/idle idle (nothing waiting)",
            ),
            (
                with_consumers(live(), vec![("S/d", nf(), Outcome::NotJudged("JetStream temporarily unavailable (10008)".into()), None)], WhenServerDown::Pass),
                "healthy: consumer S/d not judged: JetStream temporarily unavailable (10008); 1 ESTABLISHED TCP connection to remote port 4222",
            ),
            (
                with_consumers(live(), vec![("S/d", nf(), Outcome::NotJudged("authorization error: the server refused the probe's credentials".into()), None)], WhenServerDown::Fail),
                "unhealthy: consumer S/d not judged: authorization error: the server refused the probe's credentials (--when-server-down fail); 1 ESTABLISHED TCP connection to remote port 4222",
            ),
        ];
        for (report, expected) in cases {
            assert_eq!(human(&report), expected);
        }
    }

    /// The report of a run that asked `urls` and got `answers`.
    fn asked(mut r: Report, urls: &[&str], answers: Vec<Answer>, when: WhenServerDown) -> Report {
        r.config.servers = urls
            .iter()
            .map(|u| crate::server::parse(u).unwrap())
            .collect();
        r.config.policy.server = true;
        r.config.policy.when_server_down = when;
        let state = match answers.iter().any(Answer::is_nats) {
            true => verdict::ServerState::Answers,
            false => verdict::ServerState::NotAnswering,
        };
        r.answers = answers;
        r.verdict = verdict::decide(&r.connections, Some(state), &[], &r.config.policy);
        r
    }

    #[test]
    fn server_aware_lines() {
        use WhenServerDown::*;
        let nats = Answer::Nats {
            version: Some("2.10.26".into()),
        };
        let url = "nats://alice:s3cret@10.96.14.2:4222";
        let cases = [
            (
                asked(report(&trying(), &[4222], Owner::Anyone, false), &[url], vec![nats.clone()], Pass),
                "unhealthy: client holds no connection while nats://10.96.14.2:4222 answers (nats-server 2.10.26): no ESTABLISHED TCP connection to remote port 4222 (0 established; 1 SYN_SENT, 2 CLOSE_WAIT)",
            ),
            (
                asked(report(&[], &[4222], Owner::Anyone, false), &[url], vec![Answer::Refused], Pass),
                "healthy: no connection, but nats://10.96.14.2:4222 is not answering (restart would not help): connection refused",
            ),
            (
                asked(report(&[], &[4222], Owner::Anyone, false), &[url], vec![Answer::Silent], Fail),
                "unhealthy: no connection, and nats://10.96.14.2:4222 is not answering: no answer (--when-server-down fail)",
            ),
            (
                asked(
                    report(&[], &[4222], Owner::Anyone, false),
                    &["nats://a:4222", "nats://b:4222"],
                    vec![Answer::Refused, Answer::NotNats("HTTP/1.0 400 Bad Request".into())],
                    Pass,
                ),
                "healthy: no connection, but nats://a:4222 and nats://b:4222 are not answering (restart would not help): nats://a:4222: connection refused; nats://b:4222: answered 'HTTP/1.0 400 Bad Request', not NATS",
            ),
            (
                asked(report(&[], &[4222], Owner::Anyone, false), &["nats://a", "nats://b"], vec![Answer::Refused, nats.clone()], Pass),
                "unhealthy: client holds no connection while nats://b:4222 answers (nats-server 2.10.26): no ESTABLISHED TCP connection to remote port 4222 (no socket to that port in any state)",
            ),
        ];
        for (report, expected) in cases {
            assert_eq!(human(&report), expected);
        }
    }

    #[test]
    fn json_server_section_names_urls_without_credentials() {
        let r = asked(
            report(&[], &[4222], Owner::Anyone, false),
            &["nats://alice:s3cret@10.96.14.2:4222"],
            vec![Answer::Refused],
            WhenServerDown::Pass,
        );
        let text = json(&r);
        assert!(
            !text.contains("s3cret") && !text.contains("alice"),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["verdict"], "healthy");
        assert_eq!(
            v["server"],
            serde_json::json!({
                "urls": ["nats://10.96.14.2:4222"],
                "asked": true,
                "answers": [{"url": "nats://10.96.14.2:4222", "answer": "refused", "detail": "connection refused"}],
                "when_server_down": "pass",
            })
        );
    }

    fn live() -> Vec<Socket> {
        vec![
            sock(
                "10.244.1.17:51828",
                "10.96.14.2:4222",
                TcpState::Established,
                11,
            ),
            sock(
                "[::ffff:10.244.1.17]:51830",
                "[::ffff:10.96.14.3]:4222",
                TcpState::Established,
                12,
            ),
        ]
    }

    fn trying() -> Vec<Socket> {
        vec![
            sock(
                "10.244.1.17:51830",
                "10.96.14.2:4222",
                TcpState::SynSent,
                12,
            ),
            sock(
                "10.244.1.17:51831",
                "10.96.14.2:4222",
                TcpState::CloseWait,
                13,
            ),
            sock(
                "10.244.1.17:51832",
                "10.96.14.2:4222",
                TcpState::CloseWait,
                14,
            ),
        ]
    }

    #[test]
    fn human_lines() {
        let cases = [
            (
                report(&live(), &[4222], Owner::Anyone, false),
                "healthy: 2 ESTABLISHED TCP connections to remote port 4222 (10.96.14.2:4222, 10.96.14.3:4222)",
            ),
            (
                report(&trying(), &[4222], Owner::Pid(42), false),
                "unhealthy: no ESTABLISHED TCP connection to remote port 4222 held by bento[42] (0 established; 1 SYN_SENT, 2 CLOSE_WAIT)",
            ),
            (
                report(&[], &[4222, 7422], Owner::Name("bento".into()), false),
                "unhealthy: no ESTABLISHED TCP connection to remote ports 4222, 7422 held by bento[7,9] (no socket to those ports in any state)",
            ),
        ];
        for (report, expected) in cases {
            assert_eq!(human(&report), expected);
        }
    }

    #[test]
    fn verbose_adds_the_reader_and_the_sockets() {
        let text = human(&report(&trying(), &[4222], Owner::Anyone, true));
        assert_eq!(
            text,
            "unhealthy: no ESTABLISHED TCP connection to remote port 4222 (0 established; 1 SYN_SENT, 2 CLOSE_WAIT)
  reader: netlink
  SYN_SENT    10.244.1.17:51830 -> 10.96.14.2:4222 uid 1000 inode 12
  CLOSE_WAIT  10.244.1.17:51831 -> 10.96.14.2:4222 uid 1000 inode 13
  CLOSE_WAIT  10.244.1.17:51832 -> 10.96.14.2:4222 uid 1000 inode 14"
        );
    }

    #[test]
    fn json_object() {
        let text = json(&report(&live(), &[4222], Owner::Pid(42), true));
        let expected = r#"{"connection":{"established":2,"min_connections":1,"netns_of":null,"other_states":{},"ports":[4222],"processes":[{"name":"bento","pid":42}],"reader":"netlink","reader_fallback":null,"remotes":[],"skipped_lines":0,"sockets":[{"inode":11,"local":"10.244.1.17:51828","remote":"10.96.14.2:4222","state":"ESTABLISHED","uid":1000},{"inode":12,"local":"[::ffff:10.244.1.17]:51830","remote":"[::ffff:10.96.14.3]:4222","state":"ESTABLISHED","uid":1000}]},"consumers":[],"server":null,"summary":"2 ESTABLISHED TCP connections to remote port 4222 held by bento[42] (10.96.14.2:4222, 10.96.14.3:4222)","verdict":"healthy"}"#;
        assert_eq!(text, expected);
    }

    #[test]
    fn the_line_stays_under_300_characters() {
        let ports: Vec<u16> = (4000..4100).collect();
        let mut r = report(&trying(), &ports, Owner::Anyone, false);
        r.config.policy.remotes = (0..50)
            .map(|i| format!("10.{i}.0.0/16").parse().unwrap())
            .collect();
        let line = human(&r);
        assert!(
            line.chars().count() < 300,
            "{} chars: {line}",
            line.chars().count()
        );
        assert!(line.starts_with("unhealthy: "));
        assert!(error(&"x".repeat(1000), false).chars().count() < 300);
    }
}
