//! The `-v` lines under the verdict line: the reader, the matching sockets, each consumer's
//! facts, each subscription's source, the consumers' look, the state dir, each server's
//! answer.

use super::consumer::consumer_details;
use super::subscription::{listed_from, subscription_name, subscription_phrase};
use crate::facts::{Lookup, Socket, Walked};
use crate::report::diagnose::connection::{answer, none, reader, skipped, socket};
use crate::report::diagnose::text;
use crate::report::input::CheckInput;
use crate::report::remembered::{found_phrase, sampling_phrase};
use crate::rules::connection::live;
use crate::rules::judged::JudgedSubscription;
use std::fmt::Write;

/// Sockets listed with `-v`: enough to see what is there, far inside the kubelet's 10 KiB.
const MAX_LISTED: usize = 50;

/// The `-v` lines: the reader, the matching sockets, each consumer's facts, each
/// subscription's, the consumers' look, the state dir, each server's answer.
pub fn details(report: &CheckInput) -> Vec<String> {
    let mut out = vec![reader_line(report)];
    socket_lines(report, &mut out);
    if let Some(line) = lookup_line(report) {
        out.push(line);
    }
    for r in report.consumers {
        out.push(format!(
            "  consumer {}: {}",
            r.seen.name,
            consumer_details(r, report.observations.now_ms)
        ));
    }
    for s in report.subscriptions {
        out.push(subscription_line(report, s));
    }
    let sampling = report.observations.sampling;
    if sampling.is_some() || report.consumers_configured > 0 && report.consumers.is_empty() {
        out.push(format!("  consumers {}", sampling_phrase(sampling)));
    }
    if let Some(line) = state_dir(report) {
        out.push(format!("  {line}"));
    }
    // When asked, every URL has its answer, in order.
    let answers = &report.observations.servers;
    for (i, url) in report.servers.iter().enumerate() {
        out.push(match answers.get(i) {
            Some(a) => format!("  server {url}: {}", answer(&a.answer).1),
            None => format!("  server {url}: not asked (the connection is there)"),
        });
    }
    out
}

/// `  reader: netlink`, with why it fell back and what it skipped.
fn reader_line(report: &CheckInput) -> String {
    let scan = &report.observations.pod.scan;
    let said: Vec<String> = std::iter::once(reader(scan)).chain(skipped(scan)).collect();
    format!("  reader: {}", said.join("; "))
}

/// How the sockets were found: looked up as the last healthy run left them, or why the table
/// was walked; nothing when the lookup is not for this run.
fn lookup_line(report: &CheckInput) -> Option<String> {
    let counted = |n: usize| match n {
        1 => "the 1 connection the last healthy run counted".to_string(),
        n => format!("the {n} connections the last healthy run counted"),
    };
    Some(match report.observations.pod.scan.lookup {
        Lookup::Exact { remembered } => format!(
            "  looked up: {}, each by its sock_diag identity; {} unchanged and live (the table was not walked)",
            counted(remembered),
            live(report.connections)
        ),
        Lookup::Walk(Walked::Changed { remembered, live }) => format!(
            "  table walked: {live} of {} unchanged and live, {} required",
            counted(remembered),
            report.policy.min_connections
        ),
        Lookup::Walk(Walked::NothingRemembered) => {
            "  table walked: no connection remembered from a healthy run".into()
        }
        Lookup::Walk(Walked::LookupFailed) => {
            "  table walked: the remembered connections could not be looked up".into()
        }
        Lookup::Walk(Walked::NotTried) => return None,
    })
}

/// One line per matching socket (at most `MAX_LISTED`): `diagnose`'s lines of it, joined.
fn socket_lines(report: &CheckInput, out: &mut Vec<String>) {
    let c = report.connections;
    let all: Vec<&Socket> = c.established.iter().chain(&c.others).collect();
    if all.is_empty() {
        out.push(format!("  {}", none(report)));
    }
    for s in all.iter().take(MAX_LISTED) {
        let owner = format!("uid {}, inode {}", s.uid, s.inode);
        let lines: Vec<String> = socket(report, s, &owner).iter().map(text).collect();
        out.push(format!("  {}", lines.join("; ")));
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
        let _ = write!(line, "; {}", listed_from(connz));
    }
    if let Some(found) = s.found {
        let _ = write!(line, "; {}", found_phrase(found));
    }
    line
}

/// `samples kept in /dev/shm/natsprobe-1000 (not in /tmp/natsprobe-1000: cannot create ...)`.
pub fn state_dir(report: &CheckInput) -> Option<String> {
    let used = report.observations.state_dir.as_ref()?;
    let mut line = format!("samples kept in {}", used.path);
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
  SYN_SENT    10.244.1.17:51830 -> 10.96.14.2:4222  uid 1000, inode 12
  CLOSE_WAIT  10.244.1.17:51831 -> 10.96.14.2:4222  uid 1000, inode 13
  CLOSE_WAIT  10.244.1.17:51832 -> 10.96.14.2:4222  uid 1000, inode 14"
        );
    }

    /// How the sockets were found: by the exact lookup, or walked and why; nothing when the
    /// lookup is not for the run. The JSON says the same in `lookup`, `remembered`, `unchanged`.
    #[test]
    fn verbose_says_how_the_sockets_were_found() {
        use crate::facts::{Lookup, TcpState, Walked};
        let live = [sock(
            "10.244.1.17:51828",
            "10.96.14.2:4222",
            TcpState::Established,
            11,
        )];
        let cases = [
            (
                Lookup::Exact { remembered: 2 },
                Some("  looked up: the 2 connections the last healthy run counted, each by its sock_diag identity; 1 unchanged and live (the table was not walked)"),
                r#""lookup":"exact","remembered":2,"unchanged":1"#,
            ),
            (
                Lookup::Walk(Walked::Changed { remembered: 1, live: 0 }),
                Some("  table walked: 0 of the 1 connection the last healthy run counted unchanged and live, 1 required"),
                r#""lookup":"walk","remembered":1,"unchanged":0"#,
            ),
            (
                Lookup::Walk(Walked::NothingRemembered),
                Some("  table walked: no connection remembered from a healthy run"),
                r#""lookup":"walk","remembered":0,"unchanged":null"#,
            ),
            (
                Lookup::Walk(Walked::LookupFailed),
                Some("  table walked: the remembered connections could not be looked up"),
                r#""lookup":"walk","remembered":null,"unchanged":null"#,
            ),
            (
                Lookup::Walk(Walked::NotTried),
                None,
                r#""lookup":"walk","remembered":null,"unchanged":null"#,
            ),
        ];
        for (lookup, line, json) in cases {
            let mut case = report(&live, &[4222], Owner::Anyone, true);
            case.obs.pod.scan.lookup = lookup;
            let text = case.human();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines[1], "  reader: netlink", "{text}");
            assert!(lines[2].starts_with("  ESTABLISHED "), "{text}");
            assert_eq!(lines.get(3).copied(), line, "{text}");
            assert_eq!(lines.len(), 3 + usize::from(line.is_some()), "{text}");
            assert!(case.json().contains(json), "{}", case.json());
        }
    }

    /// The reader, why it fell back and what it skipped; no matching socket; each server's
    /// answer, or that it was not asked: in `diagnose`'s words.
    #[test]
    fn verbose_says_the_reader_and_each_server_as_diagnose_does() {
        use crate::facts::{Answer, Reader};
        use crate::rules::connection::WhenServerDown;
        let mut case = asked(
            report(&[], &[4222], Owner::Anyone, true),
            &["nats://a", "nats://b"],
            vec![
                Answer::Refused,
                Answer::Nats {
                    version: Some("2.10.26".into()),
                },
            ],
            WhenServerDown::Pass,
        );
        case.obs.pod.scan.reader = Reader::Proc;
        case.obs.pod.scan.fallback =
            Some("netlink refused: socket: Operation not permitted".into());
        case.obs.pod.scan.skipped_lines = 2;
        let text = case.human();
        assert_eq!(
            text.lines().skip(1).collect::<Vec<_>>(),
            [
                "  reader: proc, because netlink refused: socket: Operation not permitted; 2 unparsable lines skipped",
                "  none: no socket to that port in any state",
                "  server nats://a:4222: not answering: connection refused",
                "  server nats://b:4222: answers (nats-server 2.10.26)",
            ],
            "{text}"
        );
        let two_ports = report(&[], &[4222, 7422], Owner::Anyone, true).human();
        assert_eq!(
            two_ports.lines().nth(2),
            Some("  none: no socket to those ports in any state"),
            "{two_ports}"
        );
        // While the connection is there, the check does not ask.
        let mut connected = report(&live()[..1], &[4222], Owner::Anyone, true);
        connected.servers = vec!["nats://a:4222".into()];
        let text = connected.human();
        assert_eq!(
            text.lines().last(),
            Some("  server nats://a:4222: not asked (the connection is there)"),
            "{text}"
        );
    }
}
