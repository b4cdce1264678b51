//! `diagnose`'s sockets and servers: the reader, each socket with its holder and traffic, the
//! live count against the minimum, and every server's answer; `-v` says them in these words.

use super::style::{Line, Style};
use crate::facts::{Answer, Process, Socket, SocketScan, Via};
use crate::report::human;
use crate::report::input::CheckInput;
use crate::report::words::{bytes, display};
use std::collections::HashMap;
use std::fmt::Write;

/// The sockets section: the heading (ports, reader, namespace), whose sockets count, each
/// socket with its holder and traffic, and the live count against the minimum.
pub fn sockets(input: &CheckInput, holders: &HashMap<u64, Process>, lines: &mut Vec<Line>) {
    let scan = &input.observations.pod.scan;
    let c = input.connections;
    lines.push(vec![]);
    lines.push(sockets_heading(input));
    if let Some(skipped) = skipped(scan) {
        lines.push(vec![(Style::Warn, format!("  {skipped}"))]);
    }
    let named = |p: &Process| format!("{}[{}]", p.name, p.pid);
    let procs = &input.observations.pod.processes;
    if !procs.is_empty() {
        let names: Vec<String> = procs.iter().map(named).collect();
        lines.push(vec![(
            Style::Plain,
            format!("  counting only sockets held by {}", names.join(", ")),
        )]);
    }
    let all: Vec<&Socket> = c.established.iter().chain(&c.others).collect();
    if all.is_empty() {
        lines.push(vec![(Style::Bad, format!("  {}", none(input)))]);
    }
    for s in all {
        let who = match holders.get(&s.inode) {
            Some(p) => named(p),
            None if s.inode == 0 => "no process (closing)".into(),
            None => "holder not readable".into(),
        };
        for (i, mut line) in socket(input, s, &format!("{who}, uid {}", s.uid))
            .into_iter()
            .enumerate()
        {
            // The traffic and half-open lines start under the addresses.
            let indent = if i == 0 { "  " } else { "              " };
            line.insert(0, (Style::Plain, indent.into()));
            lines.push(line);
        }
    }
    lines.push(live_count(input));
}

/// `Sockets to remote port 4222 (reader: netlink; this network namespace)`.
fn sockets_heading(input: &CheckInput) -> Line {
    let scan = &input.observations.pod.scan;
    let ports = human::connection::remote_ports(input.policy, usize::MAX);
    let mut heading = format!("Sockets to {ports}");
    if !input.policy.remotes.is_empty() {
        let remotes: Vec<String> = input.policy.remotes.iter().map(|r| r.to_string()).collect();
        let _ = write!(heading, " at {}", remotes.join(", "));
    }
    let mut about = format!(" (reader: {}", reader(scan));
    match input.observations.pod.netns_of {
        Some(pid) => {
            let _ = write!(about, "; the network namespace of PID {pid})");
        }
        None => about.push_str("; this network namespace)"),
    }
    vec![(Style::Heading, heading), (Style::Dim, about)]
}

/// `netlink`, or `proc, because netlink refused: ...`: the socket reader, and why it fell back.
pub fn reader(scan: &SocketScan) -> String {
    match &scan.fallback {
        Some(why) => format!("{}, because {why}", scan.reader.name()),
        None => scan.reader.name().into(),
    }
}

/// `3 unparsable lines skipped`, when the reader skipped any.
pub fn skipped(scan: &SocketScan) -> Option<String> {
    (scan.skipped_lines > 0).then(|| format!("{} unparsable lines skipped", scan.skipped_lines))
}

/// `none: no socket to that port in any state`: no matching socket at all.
pub fn none(input: &CheckInput) -> String {
    format!("none: {}", human::connection::no_socket(input))
}

/// One socket, a line each (unindented): its state and addresses followed by `owner` (what
/// else the report says of it), its traffic, and whether it is half-open. `-v` joins them.
pub fn socket(input: &CheckInput, s: &Socket, owner: &str) -> Vec<Line> {
    let half = input
        .connections
        .half_open
        .iter()
        .find(|(h, _)| h == s)
        .map(|(_, h)| h);
    let state_style = match (s.state, half) {
        (crate::facts::TcpState::Established, None) => Style::Good,
        (crate::facts::TcpState::Established, Some(_)) => Style::Bad,
        _ => Style::Warn,
    };
    let mut lines = vec![vec![
        (state_style, format!("{:<11}", s.state.name())),
        (
            Style::Plain,
            format!(" {} -> {}  {owner}", s.local, s.remote),
        ),
    ]];
    if let Some(info) = &s.info {
        let reader = input.observations.pod.scan.reader;
        lines.push(vec![(Style::Dim, human::connection::traffic(info, reader))]);
    }
    if let Some(h) = half {
        lines.push(vec![(
            Style::Bad,
            format!(
                "HALF-OPEN: {} unacknowledged for at least {}, {} retransmissions: the peer is gone",
                bytes(h.unacked_bytes),
                display(h.unacked_for),
                h.retransmits
            ),
        )]);
    }
    lines
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

/// `answers (nats-server 2.10.26)`, good, or `not answering: connection refused`, bad.
pub fn answer(a: &Answer) -> (Style, String) {
    match a.is_nats() {
        true => (Style::Good, format!("answers ({a})")),
        false => (Style::Bad, format!("not answering: {a}")),
    }
}

pub fn servers(input: &CheckInput, asked_for_diagnose: bool, lines: &mut Vec<Line>) {
    if input.servers.is_empty() {
        return;
    }
    lines.push(vec![]);
    lines.push(vec![(Style::Heading, "Servers".into())]);
    let answers = &input.observations.servers;
    for (i, url) in input.servers.iter().enumerate() {
        let line = match answers.get(i) {
            Some(a) => vec![(Style::Plain, format!("  {url}: ")), answer(&a.answer)],
            None => vec![(Style::Plain, format!("  {url}: not asked"))],
        };
        lines.push(line);
        let own = answers
            .get(i)
            .map(|a| crate::rules::connection::routes(std::slice::from_ref(a)))
            .unwrap_or_default();
        // Other backends of the same Service, found by asking them.
        let members = input
            .connections
            .routes
            .iter()
            .filter(|r| r.via == Via::SameNats && own.iter().any(|o| o.dialled == r.dialled));
        for r in own.iter().chain(members) {
            let text = match r.via {
                Via::SocketLb { .. } => format!(
                    "    the connection to {url} is held as {} (socket-level load balancing)",
                    r.held_as
                ),
                Via::ClusterPeer => format!(
                    "    its cluster announces {} (a connection there counts)",
                    r.held_as
                ),
                Via::SameNats => format!(
                    "    {} answers as the same NATS (another backend: a connection there counts)",
                    r.held_as
                ),
                Via::Counted { .. } => format!("    counted as held at {}", r.held_as),
            };
            lines.push(vec![(Style::Plain, text)]);
        }
    }
    if asked_for_diagnose {
        lines.push(vec![(
            Style::Dim,
            "  (asked for this report: check asks only when the client holds no connection)".into(),
        )]);
    }
}
