//! The human words: the one verdict line the kubelet keeps in events, and the `-v` lines.
//! Formatters return strings; `main` writes them.

use super::check::CheckInput;
use crate::facts::Sampling;
use crate::facts::{unmap, ConsumerName, Loaded, Observed, Socket};
use crate::rules::cause::{Cause, Class, Standing};
use crate::rules::check::{ConsumerHealth, Health, Reason};
use crate::rules::connection::live;
use crate::rules::consumer::{self, Fault, Healthy, Moved, Outcome, Progress, Unmeasured, Window};
use crate::rules::judged::{JudgedConsumer, JudgedSubscription};
use crate::rules::subscription::Held;
use std::fmt::Write;

/// The kubelet cuts event messages at 1024 characters and operators read them in
/// `kubectl describe`: the verdict line stays under 300.
pub const MAX_LINE: usize = 299;

/// Sockets listed with `-v`: enough to see what is there, far inside the kubelet's 10 KiB.
const MAX_LISTED: usize = 50;

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
                .map(peer)
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

/// `subscription deliver.D in queue group D (consumer S/D)`.
pub fn subscription_name(s: &JudgedSubscription) -> String {
    format!("subscription {}", subscription_subject(s))
}

/// `deliver.D in queue group D (consumer S/D)`: what is held, without the word.
pub fn subscription_subject(s: &JudgedSubscription) -> String {
    match &s.consumer {
        Some(c) => format!("{} (consumer {c})", s.wanted),
        None => s.wanted.to_string(),
    }
}

/// What the own-subscription check says, without the subscription's name.
pub fn subscription_phrase(s: &JudgedSubscription) -> String {
    match &s.held {
        Held::Yes { by } => format!("held ({by})"),
        Held::NotByThisConnection { connection } => {
            format!("this pod's connection {connection} holds no such subscription")
        }
        Held::NoConnection { ours } => {
            let ours: Vec<String> = ours.iter().map(ToString::to_string).collect();
            format!(
                "the server lists no connection from {} (it sees this pod's address)",
                list(&ours, 2)
            )
        }
        Held::NotJudged(why) => format!(
            "not judged: {why}{}",
            standing_phrase(s.standing, Checked::Subscription)
        ),
    }
}

/// What one consumer's judgement says, without its name.
pub fn consumer_phrase(r: &JudgedConsumer) -> String {
    let standing = standing_phrase(r.standing, Checked::Consumer);
    match (r.standing, &r.seen.state_problem) {
        // Whatever this run saw, no later run can compare with it.
        (Some(s), Some(problem)) if s.cause == Cause::NoStateDir => {
            format!("not judged across runs: samples cannot be kept ({problem}){standing}")
        }
        _ => format!(
            "{}{standing}",
            outcome_phrase(&r.outcome, r.window, &r.seen.observed, &r.seen.name)
        ),
    }
}

/// Which kind of check a cause kept from running.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Checked {
    Consumer,
    Subscription,
}

/// After a check that could not run: how long its cause has lasted and, for the
/// configuration's causes, what fixes it. Nothing for a transient cause.
fn standing_phrase(standing: Option<Standing>, checked: Checked) -> String {
    let Some(s) = standing else {
        return String::new();
    };
    match s.class {
        Class::Transient => String::new(),
        Class::ConfigurationAtOnce => format!(": {}", fix(s, checked)),
        // Rounded up: "for 2s, longer than the window 2s" would read as a contradiction.
        Class::ConfigurationIfItPersists if s.is_configuration_error() => format!(
            "; for {}, longer than the window {}: {}",
            display(s.lasted.max(s.window + display_step(s.window))),
            display(s.window),
            fix(s, checked)
        ),
        Class::ConfigurationIfItPersists => format!(
            " (seen for {}; a configuration error, exit 2, if it lasts longer than the window {})",
            display(s.lasted),
            display(s.window)
        ),
    }
}

/// What fixes a cause of the configuration (the README's troubleshooting table).
fn fix(s: Standing, checked: Checked) -> String {
    match (s.cause, checked) {
        (Cause::Credentials, _) => "give the probe credentials the server accepts (--creds, --user and --password, --token or --nkey, or their NATS_* variables)".into(),
        (Cause::NotPermitted, Checked::Consumer) => "allow the probe's user to publish to $JS.API.CONSUMER.INFO.> and $JS.API.STREAM.INFO.>".into(),
        (Cause::NotPermitted, Checked::Subscription) => "allow the probe's user to request $SYS.REQ.ACCOUNT.PING.CONNZ, or give --monitor".into(),
        (Cause::CannotSee, _) => "point --server (or --monitor) at the leaf node the pod connects to".into(),
        (Cause::CannotMatch, _) => "drop --own-subscription and --subscription for this pod (the guard still watches its consumers)".into(),
        (Cause::TooFarApart, _) => format!(
            "run the probe at least once a window (periodSeconds below {}), or raise --stall-after",
            display(s.window)
        ),
        (Cause::NoStateDir, _) => "give --state-dir a writable volume with room (an emptyDir)".into(),
        (Cause::ClientAgeUnreadable, _) => "run the probe as the app's user (it reads /proc/PID/fd to find the process holding the connection), or give --pid".into(),
        (Cause::Unreachable | Cause::Timeout | Cause::JetStreamUnavailable | Cause::Failed, _) => {
            "wait: it passes".into()
        }
    }
}

/// What a consumer outcome says, without the consumer's name; shared by `check` and `guard`.
pub fn outcome_phrase(
    outcome: &Outcome,
    window: Option<Window>,
    observed: &Observed,
    name: &ConsumerName,
) -> String {
    let phrase = |w: &Option<Window>| match w {
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
    let w = phrase(&window);
    match outcome {
        Outcome::NotJudged(why) => format!("not judged: {why}"),
        Outcome::Healthy(h) => match h {
            Healthy::Idle => "idle (nothing waiting)".into(),
            Healthy::Paused => "paused".into(),
            Healthy::Progressing(Moved::LastAck(since)) => {
                format!("progressing (last ack {} ago; {w})", display(*since))
            }
            Healthy::Progressing(Moved::Floor) => {
                format!("progressing (ack floor moved since the last run; {w})")
            }
            Healthy::Progressing(Moved::AboveFloor) => format!(
                "progressing (acks since the last run; the ack floor waits on an older message; {w})"
            ),
            Healthy::Progressing(Moved::Deliveries) => {
                format!("progressing (delivered since the last run, ack policy none; {w})")
            }
            Healthy::Waiting {
                stalled,
                moved_without_ack,
                ..
            } => format!(
                "no progress for {} ({w}, not over){}",
                display(*stalled),
                without_ack(*moved_without_ack, observed)
            ),
            Healthy::CannotTell { deletes } => format!(
                "ack floor moving, but acks or losses: retention ({}) deletes unacknowledged messages too, and one look cannot tell which ({w})",
                deletes.settings
            ),
            Healthy::Unmeasured(Unmeasured::FirstSample) => {
                format!("first sample (progress is judged from the next run; {w})")
            }
            Healthy::Unmeasured(Unmeasured::Gap) => format!(
                "not measured: it could not be observed since the last run (progress is judged from the next run; {w})"
            ),
            Healthy::Unmeasured(Unmeasured::ServerRestarted) => format!(
                "not measured: the server restarted since the last run (progress is judged from the next run; {w})"
            ),
            Healthy::Unmeasured(Unmeasured::Interval(i)) => format!(
                "not measured: the last run was {} ago, longer than the window: run the probe more often ({w})",
                display(*i)
            ),
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
            Fault::StreamMissing => format!("stream {} not found", name.stream),
            Fault::ConsumerMissing => format!("durable {} not found in stream {}", name.durable, name.stream),
            Fault::Unbound { waiting } => {
                format!("no subscriber bound to its deliver subject (push_bound false), {waiting} waiting")
            }
            Fault::Stalled {
                stalled,
                floor,
                waiting,
                no_pulls,
                moved_without_ack,
                ..
            } => format!(
                "no progress for {} ({w}): ack floor at {floor}, {waiting} waiting{}{}",
                display(*stalled),
                if *no_pulls { ", no pull request waiting" } else { "" },
                without_ack(*moved_without_ack, observed)
            ),
            Fault::Retention {
                stalled,
                first_seq,
                behind,
                deletes,
            } => format!(
                "losing messages: for {} its ack floor has stayed at the stream's first sequence {first_seq} with {behind} waiting behind it, and retention ({}) deletes them unacknowledged",
                display(*stalled),
                deletes.settings
            ),
        },
    }
}

/// `; its ack floor moved with no ack (dropped after max_deliver 2)`.
fn without_ack(moved: bool, observed: &Observed) -> String {
    if !moved {
        return String::new();
    }
    let max_deliver = match observed {
        Observed::Found { facts, .. } => facts.max_deliver,
        _ => None,
    };
    match max_deliver {
        Some(n) => format!("; its ack floor moved with no ack (dropped after max_deliver {n})"),
        None => "; its ack floor moved with no ack (a purge)".into(),
    }
}

/// The facts behind a consumer's verdict, for `-v`.
fn consumer_details(r: &JudgedConsumer) -> String {
    let mut out = match &r.seen.observed {
        Observed::Found { facts: f, stream } => {
            let kind = match (f.push(), &f.deliver_group) {
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
            if let Some(ago) = f.age(f.ack_floor.last_active) {
                let _ = write!(text, ", last ack {} ago", display(ago));
            }
            if let Some(w) = f.ack_wait {
                let _ = write!(text, "; ack_wait {}", display(w));
            }
            if let Some(m) = f.max_ack_pending {
                let _ = write!(text, ", max_ack_pending {m}");
            }
            if let Some(n) = f.max_deliver {
                let _ = write!(text, ", max_deliver {n}");
            }
            if let Some(s) = stream {
                let _ = write!(text, "; stream first sequence {}", s.first_seq);
                match consumer::deletes_unacked(s) {
                    Some(d) => {
                        let _ = write!(
                            text,
                            ", retention deletes unacknowledged messages ({}): a moving floor is acks or losses, which one look cannot tell (the guard counts losses)",
                            d.settings
                        );
                    }
                    None => text.push_str(", retention deletes no unacknowledged message"),
                }
            }
            if let Some(p) = r.progress {
                let _ = write!(
                    text,
                    "; since the last run: {}",
                    match p {
                        Progress::Acked => "acked",
                        Progress::Delivered => "delivered",
                        Progress::Unclear => "moved (acks or losses)",
                        Progress::WithoutAck => "floor moved with no ack",
                        Progress::None => "nothing moved",
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
    match (&r.seen.previous, &r.seen.state_problem) {
        (_, Some(problem)) => {
            let _ = write!(out, "; state not kept: {problem}");
        }
        (Some(previous), None) => {
            let _ = write!(out, "; {}", describe_previous(previous));
        }
        (None, None) => {}
    }
    out
}

/// The smallest step `display` shows near `d`: a tenth below 10 s, else a second.
fn display_step(d: std::time::Duration) -> std::time::Duration {
    match d.as_secs() {
        0..=9 => std::time::Duration::from_millis(100),
        _ => std::time::Duration::from_secs(1),
    }
}

pub fn display(d: std::time::Duration) -> String {
    // Whole seconds read best in an event; below 10 s a tenth still says something.
    let d = match d.as_secs() {
        0..=9 => std::time::Duration::from_millis(d.as_millis() as u64 / 100 * 100),
        _ => std::time::Duration::from_secs(d.as_secs()),
    };
    crate::config::duration::display(d)
}

/// `no ESTABLISHED TCP connection to remote port 4222 held by bento[7]`; after a half-open
/// connection was named, `no other ESTABLISHED ...`.
fn connections(report: &CheckInput, after_half_open: bool) -> String {
    let n = live(report.connections);
    let count = if n == 0 {
        "no".to_string()
    } else {
        n.to_string()
    };
    let plural = if n <= 1 { "" } else { "s" };
    // Half-open connections are ESTABLISHED to the kernel and dead: they are not counted.
    let other = if after_half_open { "other " } else { "" };
    format!(
        "{count} {other}ESTABLISHED TCP connection{plural} to {}{}{}",
        target(report),
        holder(report),
        netns(report)
    )
}

/// `connection to 10.0.0.7:4222 is half-open: 1.2 KiB unacknowledged for 41s, 7
/// retransmissions`, for the first (and how many more).
fn half_open(report: &CheckInput) -> Option<String> {
    let all = &report.connections.half_open;
    let (socket, h) = all.first()?;
    let more = match all.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    let plural = if h.retransmits == 1 { "" } else { "s" };
    Some(format!(
        "connection to {} is half-open: {} unacknowledged for {}, {} retransmission{plural}{more}",
        peer(socket),
        bytes(h.unacked_bytes),
        display(h.unacked_for),
        h.retransmits
    ))
}

/// `512 bytes`, `1.2 KiB`, `3.4 MiB`.
pub(crate) fn bytes(n: u32) -> String {
    match n {
        0..=1023 => format!("{n} bytes"),
        1024..=1_048_575 => format!("{:.1} KiB", f64::from(n) / 1024.0),
        _ => format!("{:.1} MiB", f64::from(n) / 1_048_576.0),
    }
}

/// `no connection`, or `1 of 2 required connections`.
fn held(report: &CheckInput) -> String {
    if let Some(half) = half_open(report) {
        return half;
    }
    match report.connections.established.len() {
        0 => "no connection".to_string(),
        n => format!(
            "{n} of {} required connections",
            report.policy.min_connections
        ),
    }
}

/// What the table holds instead: `0 established; 1 SYN_SENT`.
fn evidence(report: &CheckInput) -> String {
    let c = report.connections;
    let states = c.other_states();
    let mut text = if c.established.is_empty() && states.is_empty() {
        let that = if report.policy.ports.len() == 1 {
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
    if report.observations.pod.scan.skipped_lines > 0 {
        let _ = write!(
            text,
            "; {} unparsable /proc lines skipped",
            report.observations.pod.scan.skipped_lines
        );
    }
    text
}

/// One reason when the servers agree, else each URL's.
fn why_not_answering(report: &CheckInput) -> String {
    let answers = &report.observations.servers;
    let reasons: Vec<String> = answers.iter().map(|a| a.answer.to_string()).collect();
    if reasons.windows(2).all(|w| w[0] == w[1]) {
        return reasons.first().cloned().unwrap_or_default();
    }
    let each: Vec<String> = answers
        .iter()
        .zip(&reasons)
        .map(|(a, r)| format!("{}: {r}", a.url))
        .collect();
    each.join("; ")
}

fn target(report: &CheckInput) -> String {
    let policy = report.policy;
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

/// ` held by bento[42]`: the syslog convention for a process and its PID(s). Only the named
/// processes that hold a counted connection are listed; when none does, every one looked at.
fn holder(report: &CheckInput) -> String {
    let pod = &report.observations.pod;
    let Some(first) = pod.processes.first() else {
        return String::new();
    };
    let holding: Vec<u32> = match &pod.owned {
        Some(owned) => report
            .connections
            .established
            .iter()
            .filter_map(|s| owned.get(&s.inode).copied())
            .collect(),
        None => Vec::new(),
    };
    let mut pids: Vec<u32> = pod
        .processes
        .iter()
        .map(|p| p.pid)
        .filter(|pid| holding.is_empty() || holding.contains(pid))
        .collect();
    pids.dedup();
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    format!(
        " held by {}[{}]",
        first.name,
        list(&pids, 5).replace(", ", ",")
    )
}

fn netns(report: &CheckInput) -> String {
    match report.observations.pod.netns_of {
        Some(pid) => format!(" in the network namespace of pid {pid}"),
        None => String::new(),
    }
}

pub(crate) fn peer(s: &Socket) -> String {
    match unmap(s.remote.ip()) {
        std::net::IpAddr::V6(ip) => format!("[{ip}]:{}", s.remote.port()),
        ip => format!("{ip}:{}", s.remote.port()),
    }
}

/// `a, b, c and 2 more`.
pub fn list(items: &[String], max: usize) -> String {
    if items.len() <= max {
        return items.join(", ");
    }
    format!("{} and {} more", items[..max].join(", "), items.len() - max)
}

pub fn clip(mut line: String) -> String {
    if line.chars().count() > MAX_LINE {
        line = line.chars().take(MAX_LINE - 1).collect();
        line.push('…');
    }
    line
}

/// The `-v` lines: the reader, the matching sockets, each consumer's facts, each server's
/// answer.
pub fn details(report: &CheckInput) -> Vec<String> {
    let scan = &report.observations.pod.scan;
    let mut out = Vec::new();
    let mut reader = format!("  reader: {}", scan.reader.name());
    if let Some(why) = &scan.fallback {
        let _ = write!(reader, " ({why})");
    }
    if scan.skipped_lines > 0 {
        let _ = write!(reader, "; {} unparsable lines skipped", scan.skipped_lines);
    }
    out.push(reader);
    let c = report.connections;
    let all: Vec<&Socket> = c.established.iter().chain(&c.others).collect();
    if all.is_empty() {
        out.push("  no matching sockets".into());
    }
    for s in all.iter().take(MAX_LISTED) {
        let mut line = format!(
            "  {:<11} {} -> {} uid {} inode {}",
            s.state.name(),
            s.local,
            s.remote,
            s.uid,
            s.inode
        );
        if let Some(info) = &s.info {
            let _ = write!(line, "; {}", traffic(info, scan.reader));
        }
        if let Some((_, h)) = c.half_open.iter().find(|(h, _)| h == *s) {
            let _ = write!(
                line,
                "; HALF-OPEN: unacknowledged for at least {}",
                display(h.unacked_for)
            );
        }
        out.push(line);
    }
    if all.len() > MAX_LISTED {
        out.push(format!("  … and {} more", all.len() - MAX_LISTED));
    }
    for r in report.consumers {
        out.push(format!(
            "  consumer {}: {}",
            r.seen.name,
            consumer_details(r)
        ));
    }
    for s in report.subscriptions {
        let mut line = format!("  {}: {}", subscription_name(s), subscription_phrase(s));
        if let Some(Ok(connz)) = &report.observations.connz {
            let _ = write!(
                line,
                "; from {} ({} server{})",
                connz.source,
                connz.servers,
                if connz.servers == 1 { "" } else { "s" }
            );
        }
        if let Some(found) = s.found {
            let _ = write!(line, "; {}", super::remembered::found_phrase(found));
        }
        out.push(line);
    }
    if let Some(sampling) = report.observations.sampling {
        out.push(format!(
            "  consumers {}",
            super::remembered::sampling_phrase(sampling)
        ));
    } else if report.consumers_configured > 0 && report.consumers.is_empty() {
        out.push("  consumers not asked about: no connection to judge them by".into());
    }
    if let Some(line) = state_dir(report) {
        out.push(format!("  {line}"));
    }
    // When asked, every URL has its answer, in order.
    let answers = &report.observations.servers;
    for (i, url) in report.servers.iter().enumerate() {
        out.push(match answers.get(i) {
            Some(a) => format!("  server {url}: {}", a.answer),
            None => format!("  server {url}: not asked (the connection is there)"),
        });
    }
    out
}

/// `samples kept in /dev/shm/natsprobe-1000 (not in /tmp/natsprobe-1000: cannot create ...)`.
pub fn state_dir(report: &CheckInput) -> Option<String> {
    let used = report.observations.state_dir.as_ref()?;
    let mut line = format!("samples kept in {}", used.path.display());
    if !used.skipped.is_empty() {
        let why: Vec<&str> = used.skipped.iter().map(|(_, why)| why.as_str()).collect();
        let _ = write!(line, " (passed over: {})", why.join("; "));
    }
    Some(line)
}

/// A socket's traffic facts, and which the reader could not give.
pub(crate) fn traffic(i: &crate::facts::TcpInfo, reader: crate::facts::Reader) -> String {
    let ago = |ms: Option<u32>| ms.map(|m| display(std::time::Duration::from_millis(u64::from(m))));
    let mut text = format!("unacked {}", bytes(i.unacked_bytes));
    if let Some(n) = i.unacked_segments {
        let _ = write!(text, " ({n} segments)");
    }
    if i.unread_bytes > 0 {
        let _ = write!(text, ", unread {}", bytes(i.unread_bytes));
    }
    let _ = write!(text, ", {} retransmits", i.retransmits);
    if let Some(n) = i.total_retransmits {
        let _ = write!(text, " ({n} in all)");
    }
    if let Some(b) = i.backoff {
        let _ = write!(text, ", back-off {b}");
    }
    if let Some(rto) = ago(i.rto_ms) {
        let _ = write!(text, ", rto {rto}");
    }
    match (
        ago(i.last_data_recv_ms),
        ago(i.last_ack_recv_ms),
        ago(i.last_data_sent_ms),
    ) {
        (Some(recv), Some(ack), Some(sent)) => {
            let _ = write!(
                text,
                ", last data received {recv} ago, last ACK {ack} ago, last data sent {sent} ago"
            );
        }
        _ if reader == crate::facts::Reader::Proc => {
            text.push_str(" (/proc/net/tcp has no receive, ACK or send times)");
        }
        _ => {}
    }
    text
}

/// What the state dir held, in words.
pub fn describe_previous(previous: &Loaded) -> String {
    match previous {
        Loaded::Sample(_) => "previous sample used".into(),
        Loaded::Missing => "no previous sample".into(),
        Loaded::Corrupt(why) => format!("previous sample ignored ({why})"),
        Loaded::Foreign => "previous sample ignored (another consumer's)".into(),
    }
}

/// A run that ended without a verdict, as one line or one JSON object.
pub fn error(message: &str) -> String {
    clip(message.to_string())
}
