//! The connections in words: how many live ones to which ports, held by whom; a half-open
//! one; what the socket table holds instead; each socket's traffic; why the servers do not
//! answer.

use crate::report::input::CheckInput;
use crate::report::words::{bytes, display, list, peer};
use crate::rules::connection::{live, Policy};
use std::fmt::Write;

/// `no ESTABLISHED TCP connection to remote port 4222 held by bento[7]`; after a half-open
/// connection was named, `no other ESTABLISHED ...`.
pub fn connections(report: &CheckInput, after_half_open: bool) -> String {
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
pub fn half_open(report: &CheckInput) -> Option<String> {
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

/// `no connection`, or `1 of 2 required connections`.
pub fn held(report: &CheckInput) -> String {
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
pub fn evidence(report: &CheckInput) -> String {
    let c = report.connections;
    let states = c.other_states();
    let mut text = if c.established.is_empty() && states.is_empty() {
        no_socket(report)
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

/// `no socket to that port in any state` (`those ports`).
pub fn no_socket(report: &CheckInput) -> String {
    let that = if report.policy.ports.len() == 1 {
        "that port"
    } else {
        "those ports"
    };
    format!("no socket to {that} in any state")
}

/// One reason when the servers agree, else each URL's.
pub fn why_not_answering(report: &CheckInput) -> String {
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
    let mut text = remote_ports(policy, 4);
    if !policy.remotes.is_empty() {
        let remotes: Vec<String> = policy.remotes.iter().map(|r| r.to_string()).collect();
        let _ = write!(text, " on {}", list(&remotes, 3).replace(", ", " or "));
    }
    if live(report.connections) == 0 {
        // Where the kernel holds a connection to the servers, looked at too.
        let learned: Vec<String> = crate::rules::connection::routes(&report.observations.servers)
            .iter()
            .map(|r| r.held_as.to_string())
            .collect();
        if !learned.is_empty() {
            let _ = write!(text, " nor to {}", list(&learned, 2).replace(", ", " or "));
        }
    }
    text
}

/// `remote port 4222`, `remote ports 4222, 7422`: at most `max` of them named.
pub fn remote_ports(policy: &Policy, max: usize) -> String {
    let ports: Vec<String> = policy.ports.iter().map(u16::to_string).collect();
    let plural = if ports.len() == 1 { "" } else { "s" };
    format!("remote port{plural} {}", list(&ports, max))
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
            .filter_map(|s| owned.get(&s.inode).map(|h| h.pid))
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

/// A socket's traffic facts, and which the reader could not give.
pub fn traffic(i: &crate::facts::TcpInfo, reader: crate::facts::Reader) -> String {
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
