//! `diagnose`'s sockets and servers: each socket with its holder and traffic, the live count
//! against the minimum, and every server's answer.

use super::style::{Line, Style};
use crate::facts::{Process, Socket, Via};
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

pub fn servers(input: &CheckInput, asked_for_diagnose: bool, lines: &mut Vec<Line>) {
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
