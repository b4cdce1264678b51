//! The `diagnose` report: everything the check saw, for a person at a terminal (`kubectl exec`),
//! and what to do about it. The same verdict as `check`, from the same observations; its JSON
//! is the check's document (every socket listed, with its holder) plus the advice.

use super::check::{check, CheckReport, ProcessJson};
use super::human::subscription::{subscription_name, subscription_phrase, subscription_subject};
use super::human::{
    self, consumer::consumer_phrase, consumer::describe_previous, details::state_dir,
};
use super::input::CheckInput;
use super::words::{bytes, display, peer, retention};
use crate::facts::{Observed, Process, Socket};
use crate::rules::advice::Advice;
use crate::rules::cause::Class;
use crate::rules::check::Health;
use crate::rules::consumer::{Outcome, Progress};
use crate::rules::judged::JudgedConsumer;
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write;

/// How a piece of text is shown on a colour terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    Heading,
    Good,
    Bad,
    /// Not a fault, not fine: not judged, half-open beside a live one, a missing time.
    Warn,
    Dim,
}

impl Style {
    fn sgr(self) -> &'static str {
        match self {
            Style::Plain => "",
            Style::Heading => "\x1b[1m",
            Style::Good => "\x1b[32m",
            Style::Bad => "\x1b[1;31m",
            Style::Warn => "\x1b[33m",
            Style::Dim => "\x1b[2m",
        }
    }
}

/// One line of the terminal report: styled pieces.
pub type Line = Vec<(Style, String)>;

#[derive(Debug, Clone, Serialize)]
pub struct DiagnoseReport {
    /// The check's document (`command`: `diagnose`).
    #[serde(flatten)]
    pub check: CheckReport,
    /// What to do, most pressing first.
    pub advice: Vec<AdviceJson>,
    #[serde(skip)]
    pub lines: Vec<Line>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AdviceJson {
    /// A word for scripts: `nothing`, `client_gave_up`, `tell_with_server`, `nats_down`,
    /// `peer_gone`, `still_connecting`, `never_closed`, `stream_missing`,
    /// `consumer_missing`, `unbound`, `stalled`, `losing_messages`, `deaf`, `not_judged`.
    pub kind: &'static str,
    pub text: String,
}

impl DiagnoseReport {
    pub fn health(&self) -> Health {
        self.check.health
    }

    /// The terminal text; with `colour`, ANSI styles (only for a terminal, never with
    /// `NO_COLOR`: `main` decides).
    pub fn render(&self, colour: bool) -> String {
        let mut out = String::new();
        for (i, line) in self.lines.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            for (style, text) in line {
                if colour && *style != Style::Plain {
                    let _ = write!(out, "{}{text}\x1b[0m", style.sgr());
                } else {
                    out.push_str(text);
                }
            }
        }
        out
    }
}

/// The report. `holders`: who holds each socket (by inode), as far as could be read;
/// `asked_for_diagnose`: the servers were asked only for this report (the check does not ask
/// while the connection is there).
pub fn diagnose(
    input: &CheckInput,
    holders: &HashMap<u64, Process>,
    asked_for_diagnose: bool,
    advice: &[Advice],
    version: &str,
) -> DiagnoseReport {
    let document = document(input, holders);
    let advice_json = advice
        .iter()
        .map(|a| AdviceJson {
            kind: kind(a),
            text: words(a, input),
        })
        .collect();
    let mut lines: Vec<Line> = vec![vec![
        (Style::Heading, "natsprobe diagnose".into()),
        (Style::Dim, format!(", version {version}")),
    ]];
    sockets(input, holders, &mut lines);
    servers(input, asked_for_diagnose, &mut lines);
    consumers(input, &mut lines);
    subscriptions(input, &mut lines);
    could_not_run(input, &mut lines);
    verdict(input, advice, &mut lines);
    DiagnoseReport {
        check: document,
        advice: advice_json,
        lines,
    }
}

/// A line in one plain piece.
fn plain(t: String) -> Line {
    vec![(Style::Plain, t)]
}

/// The check's document, with each socket's holder (every socket is listed: `-v`).
fn document(input: &CheckInput, holders: &HashMap<u64, Process>) -> CheckReport {
    let mut document = check(input);
    document.command = "diagnose";
    if let Some(sockets) = &mut document.connection.sockets {
        for s in sockets.iter_mut() {
            s.holder = holders.get(&s.inode).map(|p| ProcessJson {
                pid: p.pid,
                name: p.name.clone(),
            });
        }
    }
    document
}

/// Where the consumers were asked, and each one's facts and judgement; nothing without
/// `--consumer`.
fn consumers(input: &CheckInput, lines: &mut Vec<Line>) {
    if input.consumers_configured > 0 {
        lines.push(vec![]);
        lines.push(vec![(Style::Heading, "Consumers".into())]);
        lines.push(vec![(
            Style::Dim,
            format!("  asked in {}", jetstream_asked(input)),
        )]);
        if input.consumers.is_empty() {
            lines.push(plain(match input.observations.sampling {
                Some(sampling) => format!("  {}", super::remembered::sampling_phrase(sampling)),
                None => "  not asked: the client holds no connection to judge them by".into(),
            }));
        }
        for r in input.consumers {
            consumer(r, input.observations.now_ms, lines);
        }
    }
}

/// Each subscription the pod's connection must hold, how it was found, and where the server's
/// connection list came from; nothing without one.
fn subscriptions(input: &CheckInput, lines: &mut Vec<Line>) {
    if !input.subscriptions.is_empty() {
        lines.push(vec![]);
        lines.push(vec![(Style::Heading, "Subscriptions".into())]);
        for s in input.subscriptions {
            let style = match s.health() {
                crate::rules::check::ConsumerHealth::Healthy => Style::Good,
                crate::rules::check::ConsumerHealth::Unhealthy
                | crate::rules::check::ConsumerHealth::Misconfigured => Style::Bad,
                crate::rules::check::ConsumerHealth::NotJudged => Style::Warn,
            };
            lines.push(vec![
                (Style::Plain, format!("  {}: ", subscription_subject(s))),
                (style, subscription_phrase(s)),
            ]);
            if let Some(found) = s.found {
                lines.push(vec![(
                    Style::Dim,
                    format!("    {}", super::remembered::found_phrase(found)),
                )]);
            }
        }
        if let Some(Ok(connz)) = &input.observations.connz {
            lines.push(vec![(
                Style::Dim,
                format!(
                    "  from {} ({} server{})",
                    connz.source,
                    connz.servers,
                    if connz.servers == 1 { "" } else { "s" }
                ),
            )]);
        }
    }
}

/// The verdict as `check` gives it, its exit code, and what to do.
fn verdict(input: &CheckInput, advice: &[Advice], lines: &mut Vec<Line>) {
    lines.push(vec![]);
    let (word, style, code) = match input.verdict.health {
        Health::Healthy => ("healthy", Style::Good, 0),
        Health::Unhealthy => ("unhealthy", Style::Bad, 1),
        Health::Misconfigured => ("configuration error", Style::Bad, 2),
    };
    lines.push(vec![
        (Style::Heading, "Verdict: ".into()),
        (style, word.into()),
        (Style::Plain, format!(" (exit {code}, as `check` would)")),
    ]);
    lines.push(plain(format!("  {}", human::summary(input))));
    lines.push(vec![]);
    lines.push(vec![(Style::Heading, "What to do".into())]);
    for a in advice {
        lines.push(plain(format!("  - {}", words(a, input))));
    }
}

/// The sockets section: the heading (ports, reader, namespace), whose sockets count, each
/// socket with its holder and traffic, and the live count against the minimum.
fn sockets(input: &CheckInput, holders: &HashMap<u64, Process>, lines: &mut Vec<Line>) {
    let scan = &input.observations.pod.scan;
    let c = input.connections;
    lines.push(vec![]);
    lines.push(sockets_heading(input));
    if scan.skipped_lines > 0 {
        lines.push(vec![(
            Style::Warn,
            format!("  {} unparsable lines skipped", scan.skipped_lines),
        )]);
    }
    let procs = &input.observations.pod.processes;
    if !procs.is_empty() {
        let names: Vec<String> = procs
            .iter()
            .map(|p| format!("{}[{}]", p.name, p.pid))
            .collect();
        lines.push(vec![(
            Style::Plain,
            format!("  counting only sockets held by {}", names.join(", ")),
        )]);
    }
    let all: Vec<&Socket> = c.established.iter().chain(&c.others).collect();
    if all.is_empty() {
        lines.push(vec![(
            Style::Bad,
            "  none: no socket to that port in any state".into(),
        )]);
    }
    for s in all {
        socket(input, s, holders, lines);
    }
    lines.push(live_count(input));
}

/// `Sockets to remote port 4222 (reader: netlink; this network namespace)`.
fn sockets_heading(input: &CheckInput) -> Line {
    let scan = &input.observations.pod.scan;
    let ports: Vec<String> = input.policy.ports.iter().map(u16::to_string).collect();
    let mut heading = format!(
        "Sockets to remote port{} {}",
        if ports.len() == 1 { "" } else { "s" },
        ports.join(", ")
    );
    if !input.policy.remotes.is_empty() {
        let remotes: Vec<String> = input.policy.remotes.iter().map(|r| r.to_string()).collect();
        let _ = write!(heading, " at {}", remotes.join(", "));
    }
    let mut about = format!(" (reader: {}", scan.reader.name());
    if let Some(why) = &scan.fallback {
        let _ = write!(about, ", because {why}");
    }
    match input.observations.pod.netns_of {
        Some(pid) => {
            let _ = write!(about, "; the network namespace of PID {pid})");
        }
        None => about.push_str("; this network namespace)"),
    }
    vec![(Style::Heading, heading), (Style::Dim, about)]
}

/// One socket: its state, addresses and holder, then its traffic and whether it is half-open.
fn socket(input: &CheckInput, s: &Socket, holders: &HashMap<u64, Process>, lines: &mut Vec<Line>) {
    let scan = &input.observations.pod.scan;
    let c = input.connections;
    let half = c.half_open.iter().find(|(h, _)| h == s).map(|(_, h)| h);
    let state_style = match (s.state, half) {
        (crate::facts::TcpState::Established, None) => Style::Good,
        (crate::facts::TcpState::Established, Some(_)) => Style::Bad,
        _ => Style::Warn,
    };
    let who = match holders.get(&s.inode) {
        Some(p) => format!("{}[{}]", p.name, p.pid),
        None if s.inode == 0 => "no process (closing)".into(),
        None => "holder not readable".into(),
    };
    lines.push(vec![
        (Style::Plain, "  ".into()),
        (state_style, format!("{:<11}", s.state.name())),
        (
            Style::Plain,
            format!(" {} -> {}  {who}, uid {}", s.local, s.remote, s.uid),
        ),
    ]);
    if let Some(info) = &s.info {
        lines.push(vec![(
            Style::Dim,
            format!(
                "              {}",
                human::connection::traffic(info, scan.reader)
            ),
        )]);
    }
    if let Some(h) = half {
        lines.push(vec![(
            Style::Bad,
            format!(
                "              HALF-OPEN: {} unacknowledged for at least {}, {} retransmissions: the peer is gone",
                bytes(h.unacked_bytes),
                display(h.unacked_for),
                h.retransmits
            ),
        )]);
    }
}

/// `1 live ESTABLISHED connection (1 required)`, good or bad.
fn live_count(input: &CheckInput) -> Line {
    let c = input.connections;
    let live = crate::rules::connection::live(c);
    let min = input.policy.min_connections;
    let style = if live >= min { Style::Good } else { Style::Bad };
    let mut count = format!(
        "  {live} live ESTABLISHED connection{} ({min} required",
        if live == 1 { "" } else { "s" }
    );
    if !c.half_open.is_empty() {
        let _ = write!(count, "; {} half-open, not counted", c.half_open.len());
    }
    count.push(')');
    vec![(style, count)]
}

fn servers(input: &CheckInput, asked_for_diagnose: bool, lines: &mut Vec<Line>) {
    if input.servers.is_empty() {
        return;
    }
    lines.push(vec![]);
    lines.push(vec![(Style::Heading, "Servers".into())]);
    let answers = &input.observations.servers;
    for (i, url) in input.servers.iter().enumerate() {
        let line = match answers.get(i) {
            Some(a) if a.answer.is_nats() => vec![
                (Style::Plain, format!("  {url}: ")),
                (Style::Good, format!("answers ({})", a.answer)),
            ],
            Some(a) => vec![
                (Style::Plain, format!("  {url}: ")),
                (Style::Bad, format!("not answering: {}", a.answer)),
            ],
            None => vec![(Style::Plain, format!("  {url}: not asked"))],
        };
        lines.push(line);
    }
    if asked_for_diagnose {
        lines.push(vec![(
            Style::Dim,
            "  (asked for this report: check asks only when the client holds no connection)".into(),
        )]);
    }
}

/// Every requested check that could not run (or compare), with its cause's class: transient
/// (cannot judge now) or the configuration (can never judge as configured); and where the
/// samples are kept.
fn could_not_run(input: &CheckInput, lines: &mut Vec<Line>) {
    let stood = input
        .consumers
        .iter()
        .map(|r| (format!("consumer {}", r.seen.name), r.standing))
        .chain(
            input
                .subscriptions
                .iter()
                .map(|s| (subscription_name(s), s.standing)),
        );
    let mut rows = Vec::new();
    for (name, standing) in stood {
        let Some(s) = standing else { continue };
        let (style, class) = match (s.class, s.is_configuration_error()) {
            (Class::Transient, _) => (
                Style::Warn,
                "transient: cannot judge now, the next run will".to_string(),
            ),
            (_, true) => (
                Style::Bad,
                "the configuration: a configuration error now (exit 2)".to_string(),
            ),
            (_, false) => (
                Style::Warn,
                format!(
                    "the configuration, if it lasts: seen for {}, an error past the window {}",
                    display(s.lasted),
                    display(s.window)
                ),
            ),
        };
        rows.push(vec![
            (Style::Plain, format!("  {name}: {} — ", s.cause.as_str())),
            (style, class),
        ]);
    }
    let state = state_dir(input);
    if rows.is_empty() && state.is_none() {
        return;
    }
    lines.push(vec![]);
    lines.push(vec![(Style::Heading, "Checks that could not run".into())]);
    if rows.is_empty() {
        lines.push(vec![(Style::Plain, "  none".into())]);
    }
    lines.extend(rows);
    if let Some(state) = state {
        lines.push(vec![(Style::Dim, format!("  {state}"))]);
    }
}

fn consumer(r: &JudgedConsumer, now_ms: i64, lines: &mut Vec<Line>) {
    lines.push(vec![(Style::Plain, format!("  {}", r.seen.name))]);
    let at = "    ";
    if let Observed::Found { facts: f, stream } = &r.seen.observed {
        let mut mode = match &f.deliver_subject {
            Some(subject) => format!("push to {subject}"),
            None => "pull".into(),
        };
        if let Some(g) = &f.deliver_group {
            let _ = write!(mode, ", queue group {g}");
        }
        let mut line = vec![(Style::Plain, format!("{at}{mode}"))];
        if f.push() {
            line.push(match f.push_bound {
                true => (Style::Good, ", bound".into()),
                false => (Style::Bad, ", NOT bound (nothing subscribed)".into()),
            });
        }
        if f.paused {
            line.push((Style::Warn, ", paused".into()));
        }
        lines.push(line);
        let mut counts = format!(
            "{at}{} pending, {} awaiting ack, {} redelivered",
            f.num_pending, f.num_ack_pending, f.num_redelivered
        );
        if !f.push() {
            let _ = write!(counts, ", {} pulls waiting", f.num_waiting);
        }
        lines.push(vec![(Style::Plain, counts)]);
        let ago = |t| match f.age(t) {
            Some(d) => format!("{} ago", display(d)),
            None => "never, or not said".into(),
        };
        lines.push(vec![(
            Style::Plain,
            format!(
                "{at}ack floor {} (stream {}), last ack {}; delivered {} (stream {}), last delivery {}",
                f.ack_floor.consumer_seq,
                f.ack_floor.stream_seq,
                ago(f.ack_floor.last_active),
                f.delivered.consumer_seq,
                f.delivered.stream_seq,
                ago(f.delivered.last_active)
            ),
        )]);
        let mut limits = format!("{at}ack policy {}", f.ack_policy.name());
        if let Some(w) = f.ack_wait {
            let _ = write!(limits, ", ack_wait {}", display(w));
        }
        match f.max_ack_pending {
            Some(m) => {
                let _ = write!(limits, ", max_ack_pending {m}");
            }
            None => limits.push_str(", max_ack_pending unlimited"),
        }
        match f.max_deliver {
            Some(n) => {
                let _ = write!(limits, ", max_deliver {n}");
            }
            None => limits.push_str(", max_deliver unlimited"),
        }
        lines.push(vec![(Style::Dim, limits)]);
        if let Some(s) = stream {
            let mut text = format!(
                "{at}stream: {} retention, sequences {} to {}",
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
            lines.push(vec![(Style::Dim, text)]);
        }
        if let Some(p) = r.progress {
            let moved = match p {
                Progress::Acked => "acked",
                Progress::Delivered => "delivered, not acked (ack policy none)",
                Progress::Unclear => "moved (acks or retention's deletions)",
                Progress::WithoutAck => "its floor moved with no ack",
                Progress::None => "nothing moved",
            };
            lines.push(vec![(
                Style::Dim,
                format!("{at}since the previous run: {moved}"),
            )]);
        }
    }
    match (&r.seen.previous, &r.seen.state_problem) {
        (_, Some(problem)) => lines.push(vec![(
            Style::Warn,
            format!("{at}samples not kept: {problem}"),
        )]),
        (Some(crate::facts::Loaded::Sample(s)), None) => {
            let ago = std::time::Duration::from_millis((now_ms - s.seen_at_ms).max(0) as u64);
            let mut text = format!(
                "{at}previous sample {} ago: ack floor {}, {} waiting",
                display(ago),
                s.floor_consumer_seq,
                s.waiting
            );
            if s.stalled_ms > 0 {
                let stalled = std::time::Duration::from_millis(s.stalled_ms as u64);
                let _ = write!(text, ", no progress for {} by then", display(stalled));
            }
            if s.gap {
                text.push_str("; a run since could not observe it (a gap)");
            }
            lines.push(vec![(Style::Dim, text)]);
        }
        (Some(previous), None) => lines.push(vec![(
            Style::Dim,
            format!("{at}{}", describe_previous(previous)),
        )]),
        (None, None) => {}
    }
    let style = match r.outcome {
        Outcome::Healthy(_) => Style::Good,
        Outcome::Unhealthy(_) => Style::Bad,
        Outcome::NotJudged(_) => Style::Warn,
    };
    lines.push(vec![(style, format!("{at}{}", consumer_phrase(r)))]);
}

fn kind(a: &Advice) -> &'static str {
    match a {
        Advice::Nothing => "nothing",
        Advice::ClientGaveUp => "client_gave_up",
        Advice::TellWithServer => "tell_with_server",
        Advice::NatsDown => "nats_down",
        Advice::PeerGone { .. } => "peer_gone",
        Advice::StillConnecting => "still_connecting",
        Advice::NeverClosed => "never_closed",
        Advice::StreamMissing(_) => "stream_missing",
        Advice::ConsumerMissing(_) => "consumer_missing",
        Advice::Unbound(_) => "unbound",
        Advice::Stalled { .. } => "stalled",
        Advice::Losing(_) => "losing_messages",
        Advice::Deaf { .. } => "deaf",
        Advice::NotJudged { .. } => "not_judged",
    }
}

/// The advice in words: what is wrong, and what to do.
fn words(a: &Advice, input: &CheckInput) -> String {
    use crate::facts::Unknown;
    let servers = input.servers.join(", ");
    let dead = input
        .connections
        .half_open
        .first()
        .map(|(s, _)| peer(s))
        .unwrap_or_default();
    match a {
        Advice::Nothing => "Nothing: the client holds its connection and every check passed.".into(),
        Advice::ClientGaveUp => format!(
            "The client gave up reconnecting while NATS answers ({servers}): restart the pod (the probe's exit 1 makes the kubelet do it). So it does not recur, let the client reconnect forever: nats.go `nats.MaxReconnects(-1)`."
        ),
        Advice::TellWithServer => "The client holds no connection: it gave up reconnecting, or NATS is down. Add --server URL (or set NATS_URL) and the probe tells which, and fails only when a restart helps.".into(),
        Advice::NatsDown => format!(
            "NATS does not answer at {servers}: restarting this pod would not help. Look at NATS itself; if it is up, the URL or port is not the one the client uses."
        ),
        Advice::PeerGone { counted_out: true } => format!(
            "The connection to {dead} is half-open: its peer is gone without a word (a node lost, a partition) and the kernel retransmits into the void. A restart reconnects to a live node; a shorter PingInterval lets the client notice by itself."
        ),
        Advice::PeerGone { counted_out: false } => format!(
            "The connection to {dead} is half-open (its peer is gone); another live connection holds, so nothing fails yet."
        ),
        Advice::StillConnecting => "A connection is still being opened (SYN_SENT): the server's address drops packets, or a NetworkPolicy or firewall blocks the way.".into(),
        Advice::NeverClosed => "The server closed a connection the client never closed (CLOSE_WAIT): the client is not reading its socket. If it stays, the client is wedged: restart the pod.".into(),
        Advice::StreamMissing(n) => format!(
            "Stream {} does not exist in {}: create it, or correct --consumer.{}",
            n.stream,
            jetstream_asked(input),
            domain_hint(input)
        ),
        Advice::ConsumerMissing(n) => format!(
            "Consumer {n} does not exist in {}: the application has not created it, or it was removed (an ephemeral consumer, inactive_threshold). Create it as a durable, or correct --consumer.{}",
            jetstream_asked(input),
            domain_hint(input)
        ),
        Advice::Unbound(n) => format!(
            "Nothing is subscribed to {n}'s deliver subject while work waits: the application lost its subscription. Restart the pod."
        ),
        Advice::Stalled { name, no_pulls: true } => format!(
            "{name} has work waiting and nobody is pulling: the application's fetch loop stopped. Restart the pod, and look in its logs for why the loop ended."
        ),
        Advice::Stalled { name, no_pulls: false } => format!(
            "{name} has work waiting and nothing is acknowledged: the application's handler is stuck (a blocked callback, a downstream that does not answer). Restart the pod, and look in its logs for the message it is stuck on."
        ),
        Advice::Losing(n) => format!(
            "The stream's retention deletes {n}'s messages before they are acknowledged: its limits are smaller than the backlog. Raise max_msgs, max_bytes or max_age, or make the consumer faster; a restart does not bring them back."
        ),
        Advice::Deaf { wanted, consumer } => {
            let of = consumer
                .as_ref()
                .map(|c| format!(" (consumer {c})"))
                .unwrap_or_default();
            format!(
                "This pod's connection does not hold {wanted}{of}: this replica is deaf while the server delivers to the others. Restart the pod."
            )
        }
        Advice::NotJudged { what, why } => {
            let todo = match why {
                Unknown::Credentials => "check the credentials (--creds, --user, --token, --nkey, or their NATS_* variables)".to_string(),
                Unknown::NotPermitted(subject) => format!(
                    "allow the probe's user to publish to {subject} (and to receive replies on _INBOX.>)"
                ),
                Unknown::Unreachable(_) => "check --server and the network path to it".to_string(),
                Unknown::CannotMatch(_) => "the server sees this pod from another address (NAT, a proxy, a service-mesh sidecar): the subscription cannot be matched from here; drop --own-subscription/--subscription for this pod".to_string(),
                Unknown::Deadline | Unknown::JetStreamTimeout => "JetStream did not answer in time: raise --timeout, or look at the server's load".to_string(),
                Unknown::NoResponders | Unknown::TemporarilyUnavailable | Unknown::NotReported => "JetStream is not available now (disabled for the account, or electing a leader): the next run asks again".to_string(),
                Unknown::OutOfSight(_) => "ask the server the pod connects to: --server (or --monitor) with the leaf node's own address, the one the application uses".to_string(),
                Unknown::Failed(_) => "run again with -v and read the server's answer".to_string(),
            };
            format!("The probe could not judge {what} ({why}): {todo}.")
        }
    }
}

/// Which JetStream the consumers were asked in: the domain or prefix given, and the domain
/// the connected server announced.
fn jetstream_asked(input: &CheckInput) -> String {
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
fn domain_hint(input: &CheckInput) -> &'static str {
    match input.js_api.is_local() {
        true => " If the application reaches its stream through a leaf node (nats.go `nats.Domain`, the nats CLI's --js-domain), give the probe the same --js-domain: a leaf node's own JetStream is not its hub's.",
        false => " Check that this is the domain (or prefix) the application uses.",
    }
}

#[cfg(test)]
mod tests {
    //! Snapshot tests of `diagnose`: the lines, their styles, and the JSON.
    use crate::config::Owner;
    use crate::facts::{Answer, Observed, Process, ServerAnswer, TcpState};
    use crate::report::input::CheckInput;
    use crate::report::test_support::*;
    use crate::rules::connection::WhenServerDown;
    use crate::rules::consumer::{Outcome, Window};
    use std::time::Duration;

    /// `diagnose`: the same verdict, every fact, and what to do; colour only when asked.
    #[test]
    fn diagnose_a_client_that_gave_up() {
        use super::diagnose;
        use crate::rules::advice::advise;
        let closing = sock(
            "10.244.1.17:51828",
            "10.96.14.2:4222",
            TcpState::CloseWait,
            11,
        );
        let r = asked(
            report(&[closing], &[4222], Owner::Anyone, true),
            &["nats://nats.nats.svc:4222"],
            vec![Answer::Nats {
                version: Some("2.10.26".into()),
            }],
            WhenServerDown::Pass,
        );
        let advice = advise(&r.verdict, &r.connections, &r.policy, &[], &[]);
        let holders = [(
            11,
            Process {
                pid: 7,
                name: "bento".into(),
            },
        )]
        .into_iter()
        .collect();
        let input = CheckInput {
            verdict: r.verdict,
            policy: &r.policy,
            connections: &r.connections,
            observations: &r.obs,
            servers: &r.servers,
            consumers_configured: 0,
            js_api: &crate::config::JsApi::Local,
            consumers: &[],
            subscriptions: &[],
            verbose: true,
        };
        let d = diagnose(&input, &holders, false, &advice, "0.1.0 (git test)");
        assert_eq!(
            d.render(false),
            "natsprobe diagnose, version 0.1.0 (git test)

Sockets to remote port 4222 (reader: netlink; this network namespace)
  CLOSE_WAIT  10.244.1.17:51828 -> 10.96.14.2:4222  bento[7], uid 1000
  0 live ESTABLISHED connections (1 required)

Servers
  nats://nats.nats.svc:4222: answers (nats-server 2.10.26)

Verdict: unhealthy (exit 1, as `check` would)
  client holds no connection while nats://nats.nats.svc:4222 answers (nats-server 2.10.26): no ESTABLISHED TCP connection to remote port 4222 (0 established; 1 CLOSE_WAIT)

What to do
  - The client gave up reconnecting while NATS answers (nats://nats.nats.svc:4222): restart the pod (the probe's exit 1 makes the kubelet do it). So it does not recur, let the client reconnect forever: nats.go `nats.MaxReconnects(-1)`.
  - The server closed a connection the client never closed (CLOSE_WAIT): the client is not reading its socket. If it stays, the client is wedged: restart the pod."
        );
        let coloured = d.render(true);
        assert!(
            coloured.contains("\x1b[1;31munhealthy\x1b[0m"),
            "{coloured}"
        );
        assert!(coloured.contains("\x1b[1mWhat to do\x1b[0m"), "{coloured}");
        // The same words once the styles are taken out.
        let stripped = coloured
            .split("\x1b[")
            .enumerate()
            .map(|(i, part)| match i {
                0 => part,
                _ => part.split_once('m').map_or(part, |(_, rest)| rest),
            })
            .collect::<String>();
        assert_eq!(stripped, d.render(false));
        let json: serde_json::Value =
            serde_json::from_str(&crate::report::render_diagnose(&d, true, true)).unwrap();
        assert_eq!(json["command"], "diagnose");
        assert_eq!(json["verdict"], "unhealthy");
        assert_eq!(json["connection"]["sockets"][0]["holder"]["name"], "bento");
        assert_eq!(json["advice"][0]["kind"], "client_gave_up");
        assert_eq!(json["advice"][1]["kind"], "never_closed");
    }

    /// A connected pod with a stuck consumer: its facts, line by line, and the advice.
    #[test]
    fn diagnose_a_stalled_consumer() {
        use super::diagnose;
        use crate::facts::{ConsumerFacts, Sequence, TcpInfo};
        use crate::rules::advice::{advise, ConsumerFinding};
        use crate::rules::consumer::{Evidence, Fault};
        let mut live = live();
        live.truncate(1);
        live[0].info = Some(TcpInfo {
            unacked_bytes: 0,
            unread_bytes: 0,
            unacked_segments: Some(0),
            retransmits: 0,
            total_retransmits: Some(0),
            backoff: Some(0),
            rto_ms: Some(204),
            last_data_recv_ms: Some(1200),
            last_ack_recv_ms: Some(1200),
            last_data_sent_ms: Some(1200),
        });
        let ts = 1_780_000_000_000_000_000;
        let facts = ConsumerFacts {
            name: "alarms".into(),
            deliver_subject: Some("deliver.alarms".into()),
            deliver_group: Some("alarms".into()),
            num_pending: 3990,
            num_ack_pending: 10,
            num_redelivered: 2,
            ack_floor: Sequence {
                consumer_seq: 120,
                stream_seq: 130,
                last_active: Some(ts - 75_000_000_000),
            },
            delivered: Sequence {
                consumer_seq: 130,
                stream_seq: 140,
                last_active: Some(ts - 1_000_000_000),
            },
            max_ack_pending: Some(10),
            ts: Some(ts),
            ..crate::rules::consumer::tests::facts(0, 0, 0)
        };
        let stalled = Outcome::Unhealthy(Fault::Stalled {
            stalled: Duration::from_secs(75),
            evidence: Evidence::LastActive,
            floor: 120,
            waiting: 4000,
            no_pulls: false,
            moved_without_ack: false,
        });
        let window = Some(Window {
            duration: Duration::from_secs(60),
            raised_for_ack_wait: None,
        });
        let r = with_consumers(
            report(&live, &[4222], Owner::Anyone, true),
            vec![(
                "TF_RAW/alarms",
                Observed::Found {
                    facts,
                    stream: None,
                },
                stalled.clone(),
                window,
            )],
            WhenServerDown::Pass,
        );
        let mut obs = r.obs.clone();
        obs.servers = vec![ServerAnswer {
            url: "nats://nats:4222".into(),
            answer: Answer::Nats {
                version: Some("2.10.26".into()),
            },
        }];
        let name = r.consumers[0].seen.name.clone();
        let advice = advise(
            &r.verdict,
            &r.connections,
            &r.policy,
            &[ConsumerFinding {
                name: &name,
                outcome: &stalled,
            }],
            &[],
        );
        let input = CheckInput {
            verdict: r.verdict,
            policy: &r.policy,
            connections: &r.connections,
            observations: &obs,
            servers: &r.servers,
            consumers_configured: 1,
            js_api: &crate::config::JsApi::Local,
            consumers: &r.consumers,
            subscriptions: &[],
            verbose: true,
        };
        let d = diagnose(
            &input,
            &std::collections::HashMap::new(),
            true,
            &advice,
            "0.1.0 (git test)",
        );
        assert_eq!(
            d.render(false),
            "natsprobe diagnose, version 0.1.0 (git test)

Sockets to remote port 4222 (reader: netlink; this network namespace)
  ESTABLISHED 10.244.1.17:51828 -> 10.96.14.2:4222  holder not readable, uid 1000
              unacked 0 bytes (0 segments), 0 retransmits (0 in all), back-off 0, rto 200ms, last data received 1.2s ago, last ACK 1.2s ago, last data sent 1.2s ago
  1 live ESTABLISHED connection (1 required)

Servers
  nats://nats:4222: answers (nats-server 2.10.26)
  (asked for this report: check asks only when the client holds no connection)

Consumers
  asked in the server's own JetStream ($JS.API; no --js-domain given)
  TF_RAW/alarms
    push to deliver.alarms, queue group alarms, bound
    3990 pending, 10 awaiting ack, 2 redelivered
    ack floor 120 (stream 130), last ack 1m15s ago; delivered 130 (stream 140), last delivery 1s ago
    ack policy explicit, ack_wait 30s, max_ack_pending 10, max_deliver unlimited
    no previous sample
    no progress for 1m15s (window 1m): ack floor at 120, 4000 waiting

Verdict: unhealthy (exit 1, as `check` would)
  consumer TF_RAW/alarms: no progress for 1m15s (window 1m): ack floor at 120, 4000 waiting; 1 ESTABLISHED TCP connection to remote port 4222

What to do
  - TF_RAW/alarms has work waiting and nothing is acknowledged: the application's handler is stuck (a blocked callback, a downstream that does not answer). Restart the pod, and look in its logs for the message it is stuck on."
        );
    }
}
