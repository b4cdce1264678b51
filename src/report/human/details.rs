//! The `-v` lines under the verdict line: the reader, the matching sockets, each consumer's
//! facts, each subscription's source, the consumers' look, the state dir, each server's
//! answer.

use super::connection::traffic;
use super::consumer::consumer_details;
use super::subscription::{subscription_name, subscription_phrase};
use crate::facts::Socket;
use crate::report::input::CheckInput;
use crate::report::remembered::{found_phrase, sampling_phrase};
use crate::report::words::display;
use crate::rules::judged::JudgedSubscription;
use std::fmt::Write;

/// Sockets listed with `-v`: enough to see what is there, far inside the kubelet's 10 KiB.
const MAX_LISTED: usize = 50;

/// The `-v` lines: the reader, the matching sockets, each consumer's facts, each
/// subscription's, the consumers' look, the state dir, each server's answer.
pub fn details(report: &CheckInput) -> Vec<String> {
    let mut out = vec![reader_line(report)];
    socket_lines(report, &mut out);
    for r in report.consumers {
        out.push(format!(
            "  consumer {}: {}",
            r.seen.name,
            consumer_details(r)
        ));
    }
    for s in report.subscriptions {
        out.push(subscription_line(report, s));
    }
    if let Some(sampling) = report.observations.sampling {
        out.push(format!("  consumers {}", sampling_phrase(sampling)));
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

/// `  reader: netlink`, with why it fell back and what it skipped.
fn reader_line(report: &CheckInput) -> String {
    let scan = &report.observations.pod.scan;
    let mut reader = format!("  reader: {}", scan.reader.name());
    if let Some(why) = &scan.fallback {
        let _ = write!(reader, " ({why})");
    }
    if scan.skipped_lines > 0 {
        let _ = write!(reader, "; {} unparsable lines skipped", scan.skipped_lines);
    }
    reader
}

/// One line per matching socket (at most `MAX_LISTED`), with its traffic and whether it is
/// half-open.
fn socket_lines(report: &CheckInput, out: &mut Vec<String>) {
    let reader = report.observations.pod.scan.reader;
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
            let _ = write!(line, "; {}", traffic(info, reader));
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
}

/// A subscription's phrase, where the server's connection list came from, and how the pod's
/// connection was found.
fn subscription_line(report: &CheckInput, s: &JudgedSubscription) -> String {
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
        let _ = write!(line, "; {}", found_phrase(found));
    }
    line
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

#[cfg(test)]
mod tests {
    //! Snapshot tests of the words: every line here is what an operator reads in `kubectl
    //! describe`, byte for byte.
    use crate::config::Owner;
    use crate::report::test_support::*;

    #[test]
    fn verbose_adds_the_reader_and_the_sockets() {
        let text = report(&trying(), &[4222], Owner::Anyone, true).human();
        assert_eq!(
            text,
            "unhealthy: no ESTABLISHED TCP connection to remote port 4222 (0 established; 1 SYN_SENT, 2 CLOSE_WAIT)
  reader: netlink
  SYN_SENT    10.244.1.17:51830 -> 10.96.14.2:4222 uid 1000 inode 12
  CLOSE_WAIT  10.244.1.17:51831 -> 10.96.14.2:4222 uid 1000 inode 13
  CLOSE_WAIT  10.244.1.17:51832 -> 10.96.14.2:4222 uid 1000 inode 14"
        );
    }
}
