//! The human words of a check: the one verdict line the kubelet keeps in events (here), the
//! `-v` lines (`details`), and the phrases both are made of: each consumer's
//! (`consumer`), each subscription's (`subscription`), the connections' (`connection`), and
//! what a cause that kept a check from running means (`standing`). Formatters return strings;
//! `main` writes them.

pub mod connection;
pub mod consumer;
pub mod details;
pub mod standing;
pub mod subscription;

use crate::facts::Sampling;
use crate::report::input::CheckInput;
use crate::report::words::{clip, display, list};
use crate::rules::check::{ConsumerHealth, Health, Reason};
use crate::rules::consumer::{Fault, Outcome};
use crate::rules::subscription::Held;
use connection::{connections, evidence, half_open, held, why_not_answering};
use consumer::consumer_phrase;
use std::fmt::Write;
use subscription::{subscription_name, subscription_phrase};

/// The verdict first, then the evidence: the one line of a run, from its JSON `verdict` word
/// and `summary` (so `serve` makes the same line of a check's JSON); `error` has no word.
pub fn line(verdict: &str, summary: &str) -> String {
    clip(match verdict {
        "error" => summary.to_string(),
        "configuration_error" => format!("configuration error: {summary}"),
        word => format!("{word}: {summary}"),
    })
}

/// The line without its verdict word: the evidence, by the verdict's reason.
pub fn summary(report: &CheckInput) -> String {
    match report.verdict.reason {
        Reason::Connected => connected(report),
        Reason::ConsumerFault
        | Reason::ConsumerNotJudged
        | Reason::Misconfigured
        | Reason::NotYetJudged => failing_checks(report),
        Reason::NotConnected => not_connected(report),
        Reason::ServerAnswers => server_answers(report),
        Reason::ServerDown => server_down(report),
    }
}

/// Connected: the live peers, then a half-open one, each consumer, a skipped look and
/// each subscription.
fn connected(report: &CheckInput) -> String {
    let c = report.connections;
    // Each peer once: a client with several connections to one server names it once.
    // The live ones: a half-open connection is named after them.
    let mut peers: Vec<String> = c
        .established
        .iter()
        .filter(|s| !c.half_open.iter().any(|(h, _)| h == *s))
        .map(|s| {
            // Where the kernel holds it, and the server address it counts for.
            let at = crate::report::words::peer(s);
            match crate::rules::connection::stands_for(c, s.remote) {
                Some(dialled) => format!("{at} for {dialled}"),
                None => at,
            }
        })
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

/// A consumer or subscription fails the verdict (or could not be judged): those first, then
/// where JetStream was asked and the connections.
fn failing_checks(report: &CheckInput) -> String {
    // The consumers that fail the verdict (or could not be judged) first: they are
    // why the line exists; the connection that is fine comes after.
    let wanted = |h: ConsumerHealth| match report.verdict.reason {
        Reason::ConsumerFault => h == ConsumerHealth::Unhealthy,
        Reason::Misconfigured => h == ConsumerHealth::Misconfigured,
        Reason::NotYetJudged => h == ConsumerHealth::NeverJudged,
        _ => matches!(
            h,
            ConsumerHealth::NotJudged | ConsumerHealth::NeverJudged | ConsumerHealth::NotThePods
        ),
    };
    let mut parts: Vec<String> = report
        .consumers
        .iter()
        .filter(|r| wanted(r.health()))
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
            .filter(|s| wanted(s.health()))
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
    // First, where the line may be cut: why a run that could not judge fails.
    let lead = match (report.verdict.reason, report.verdict.health) {
        (Reason::NotYetJudged, _) => "not started (--startup): ",
        (Reason::ConsumerNotJudged, Health::Unhealthy) => "--when-server-down fail: ",
        _ => "",
    };
    format!("{lead}{}; {}", parts.join("; "), connections(report, false))
}

/// Too few live connections: a half-open one, or what the table holds instead.
fn not_connected(report: &CheckInput) -> String {
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

/// No connection while a server answers: the client gave up.
fn server_answers(report: &CheckInput) -> String {
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

/// No connection while no server answers: a restart would not help (`--when-server-down`
/// decides the verdict).
fn server_down(report: &CheckInput) -> String {
    let urls = report.servers;
    let verb = if urls.len() == 1 { "is" } else { "are" };
    let urls = list(urls, 3).replace(", ", " and ");
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

#[cfg(test)]
mod tests {
    //! Snapshot tests of the words: every line here is what an operator reads in `kubectl
    //! describe`, byte for byte.
    use crate::config::Owner;
    use crate::facts::{Answer, Observed, Unknown};
    use crate::report::test_support::*;
    use crate::rules::check::decide;
    use crate::rules::connection::WhenServerDown;
    use crate::rules::consumer::{Outcome, Window};
    use std::time::Duration;

    /// A stream not found: where JetStream was asked, when a domain was named or the server
    /// announced one (a leaf node's own), so the operator sees the likely cause.
    #[test]
    fn a_missing_stream_says_which_jetstream_was_asked() {
        let missing = || {
            let live = report(&live()[..1], &[4222], Owner::Anyone, false);
            let nf = Observed::NotJudged(Unknown::Failed("x".into()));
            with_consumers(
                live,
                vec![(
                    "TF_RAW/kv",
                    nf,
                    Outcome::Unhealthy(crate::rules::consumer::Fault::StreamMissing),
                    None,
                )],
                WhenServerDown::Pass,
            )
        };
        assert_eq!(
            missing().human(),
            "unhealthy: consumer TF_RAW/kv: stream TF_RAW not found; 1 ESTABLISHED TCP connection to remote port 4222",
            "no domain anywhere: the line as before"
        );
        let mut leaf = missing();
        leaf.obs.server_domain = Some("leaf".into());
        assert_eq!(
            leaf.human(),
            "unhealthy: consumer TF_RAW/kv: stream TF_RAW not found; asked the server's own JetStream domain leaf: a stream in another domain (a leaf node's hub) needs --js-domain; 1 ESTABLISHED TCP connection to remote port 4222"
        );
        assert!(
            leaf.json()
                .contains(r#""jetstream":{"api":"$JS.API","domain":null,"server_domain":"leaf"}"#),
            "{}",
            leaf.json()
        );
        let mut hub = missing();
        hub.js_api = crate::config::JsApi::domain("hub").unwrap();
        assert_eq!(
            hub.human(),
            "unhealthy: consumer TF_RAW/kv: stream TF_RAW not found; asked JetStream domain hub ($JS.hub.API); 1 ESTABLISHED TCP connection to remote port 4222"
        );
        assert!(!missing().json().contains("\"jetstream\""));
        // A leaf node without JetStream: nothing answers $JS.API there.
        let live = report(&live()[..1], &[4222], Owner::Anyone, false);
        let nf = Observed::NotJudged(Unknown::NoResponders);
        let mut bare = with_consumers(
            live,
            vec![(
                "TF_RAW/kv",
                nf,
                Outcome::NotJudged(Unknown::NoResponders),
                None,
            )],
            WhenServerDown::Pass,
        );
        bare.obs.server_jetstream = false;
        assert_eq!(
            bare.human(),
            "healthy: consumer TF_RAW/kv not judged: no JetStream answers in the domain asked; the server has no JetStream of its own: a stream behind a leaf node needs --js-domain; 1 ESTABLISHED TCP connection to remote port 4222"
        );
    }

    #[test]
    fn consumer_lines() {
        use crate::rules::consumer::RetentionSetting::{Discard, MaxAge, MaxMsgs};
        use crate::rules::consumer::{Deletes, Evidence, Fault, Healthy, Moved};
        let deletes = |settings: Vec<crate::rules::consumer::RetentionSetting>| Deletes {
            front_only: true,
            settings,
        };
        let raised_30 = Some(Window {
            duration: Duration::from_secs(60),
            raised_for_ack_wait: Some(Duration::from_secs(30)),
        });
        let win = Some(Window {
            duration: Duration::from_secs(60),
            raised_for_ack_wait: None,
        });
        let raised = Some(Window {
            duration: Duration::from_secs(180),
            raised_for_ack_wait: Some(Duration::from_secs(90)),
        });
        let nf = || Observed::NotJudged(Unknown::Failed("x".into()));
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
                        Outcome::Unhealthy(Fault::Stalled { stalled: Duration::from_secs(75), evidence: Evidence::Samples, floor: 0, waiting: 4000, no_pulls: false, moved_without_ack: false }),
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
                with_consumers(live(), vec![("CAP/w", nf(), Outcome::Unhealthy(Fault::Retention { stalled: Duration::from_secs(61), first_seq: 1401, behind: 190, deletes: deletes(vec![MaxMsgs(200), Discard("old".into())]) }), win)], WhenServerDown::Pass),
                "unhealthy: consumer CAP/w: losing messages: for 1m1s its ack floor has stayed at the stream's first sequence 1401 with 190 waiting behind it, and retention (max_msgs 200, discard old) deletes them unacknowledged; 1 ESTABLISHED TCP connection to remote port 4222",
            ),
            (
                with_consumers(live(), vec![("S/pull", nf(), Outcome::Unhealthy(Fault::Stalled { stalled: Duration::from_secs(64), evidence: Evidence::Samples, floor: 12, waiting: 30, no_pulls: true, moved_without_ack: false }), win)], WhenServerDown::Pass),
                "unhealthy: consumer S/pull: no progress for 1m4s (window 1m): ack floor at 12, 30 waiting, no pull request waiting; 1 ESTABLISHED TCP connection to remote port 4222",
            ),
            (
                with_consumers(
                    live(),
                    vec![
                        ("S/slow", nf(), Outcome::Healthy(Healthy::Waiting { stalled: Duration::from_millis(5140), evidence: Evidence::Samples, moved_without_ack: false }), raised_30),
                        ("S/new", nf(), Outcome::Healthy(Healthy::Unmeasured(crate::rules::consumer::Unmeasured::FirstSample)), raised_30),
                    ],
                    WhenServerDown::Pass,
                ),
                "healthy: 1 ESTABLISHED TCP connection to remote port 4222 (10.96.14.2:4222); consumer S/slow no progress for 5.1s (window 1m = 2 × ack_wait 30s, not over); consumer S/new first sample (progress is judged from the next run; window 1m = 2 × ack_wait 30s)",
            ),
            (
                with_consumers(live(), vec![("AGE/d", nf(), Outcome::Healthy(Healthy::CannotTell { deletes: deletes(vec![MaxAge(Duration::from_secs(60)), Discard("new".into())]) }), win)], WhenServerDown::Pass),
                "healthy: 1 ESTABLISHED TCP connection to remote port 4222 (10.96.14.2:4222); consumer AGE/d ack floor moving, but acks or losses: retention (max_age 1m, discard new) deletes unacknowledged messages too, and one look cannot tell which (window 1m)",
            ),
            (
                with_consumers(
                    live(),
                    vec![
                        ("TF_RAW/latest-kv", nf(), Outcome::Healthy(Healthy::Progressing(Moved::LastAck(Duration::from_millis(830)))), win),
                        ("TF_RAW/idle", nf(), Outcome::Healthy(Healthy::Idle), win),
                    ],
                    WhenServerDown::Pass,
                ),
                "healthy: 1 ESTABLISHED TCP connection to remote port 4222 (10.96.14.2:4222); consumer TF_RAW/latest-kv progressing (last ack 800ms ago; window 1m); consumer TF_RAW/idle idle (nothing waiting)",
            ),
            (
                with_consumers(live(), vec![("S/d", nf(), Outcome::NotJudged(Unknown::TemporarilyUnavailable), None)], WhenServerDown::Pass),
                "healthy: consumer S/d not judged: JetStream temporarily unavailable (10008); 1 ESTABLISHED TCP connection to remote port 4222",
            ),
            (
                with_consumers(live(), vec![("S/d", nf(), Outcome::NotJudged(Unknown::Unreachable("connection refused".into())), None)], WhenServerDown::Fail),
                "unhealthy: --when-server-down fail: consumer S/d not judged: server unreachable: connection refused; 1 ESTABLISHED TCP connection to remote port 4222",
            ),
            (
                // NATS answered: a refusal fails under no --when-server-down.
                with_consumers(live(), vec![("S/d", nf(), Outcome::NotJudged(Unknown::Credentials), None)], WhenServerDown::Fail),
                "healthy: consumer S/d not judged: authorization error: the server refused the probe's credentials; 1 ESTABLISHED TCP connection to remote port 4222",
            ),
        ];
        for (report, expected) in cases {
            assert_eq!(report.human(), expected);
        }
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
            assert_eq!(report.human(), expected);
        }
    }

    /// A connection whose peer is gone: the lines name it, with the kernel's evidence.
    #[test]
    fn half_open_lines() {
        use crate::facts::TcpInfo;
        use crate::rules::connection::half_open;
        let dead = |mut r: Case| {
            let info = TcpInfo {
                unacked_bytes: 1229,
                unread_bytes: 0,
                unacked_segments: Some(3),
                retransmits: 8,
                total_retransmits: Some(9),
                backoff: Some(8),
                rto_ms: Some(51_200),
                last_data_recv_ms: Some(53_400),
                last_ack_recv_ms: Some(53_400),
                last_data_sent_ms: Some(120),
            };
            r.connections.established[0].info = Some(info);
            let half = half_open(&info, Duration::from_secs(30)).expect("half-open");
            r.connections.half_open = vec![(r.connections.established[0].clone(), half)];
            r
        };
        let mut plain = dead(report(&live()[..1], &[4222], Owner::Anyone, true));
        plain.verdict = decide(&plain.connections, None, &[], false, &plain.policy);
        assert_eq!(
            plain.human(),
            "unhealthy: connection to 10.96.14.2:4222 is half-open: 1.2 KiB unacknowledged for 51s, 8 retransmissions; no other ESTABLISHED TCP connection to remote port 4222
  reader: netlink
  ESTABLISHED 10.244.1.17:51828 -> 10.96.14.2:4222  uid 1000, inode 11; unacked 1.2 KiB (3 segments), 8 retransmits (9 in all), back-off 8, rto 51s, last data received 53s ago, last ACK 53s ago, last data sent 100ms ago; HALF-OPEN: 1.2 KiB unacknowledged for at least 51s, 8 retransmissions: the peer is gone"
        );
        let answers = asked(
            dead(report(&live()[..1], &[4222], Owner::Anyone, false)),
            &["nats://nats.nats.svc:4222"],
            vec![Answer::Nats {
                version: Some("2.10.26".into()),
            }],
            WhenServerDown::Pass,
        );
        assert_eq!(
            answers.human(),
            "unhealthy: connection to 10.96.14.2:4222 is half-open: 1.2 KiB unacknowledged for 51s, 8 retransmissions; nats://nats.nats.svc:4222 answers (nats-server 2.10.26)"
        );
        let down = asked(
            dead(report(&live()[..1], &[4222], Owner::Anyone, false)),
            &["nats://nats.nats.svc:4222"],
            vec![Answer::Refused],
            WhenServerDown::Pass,
        );
        assert_eq!(
            down.human(),
            "healthy: connection to 10.96.14.2:4222 is half-open: 1.2 KiB unacknowledged for 51s, 8 retransmissions, but nats://nats.nats.svc:4222 is not answering (restart would not help): connection refused"
        );
        // Another live connection is enough: healthy, and the dead one is still named.
        let mut one_live = dead(report(&live(), &[4222], Owner::Anyone, false));
        one_live.verdict = decide(&one_live.connections, None, &[], false, &one_live.policy);
        assert_eq!(
            one_live.human(),
            "healthy: 1 ESTABLISHED TCP connection to remote port 4222 (10.96.14.3:4222); connection to 10.96.14.2:4222 is half-open: 1.2 KiB unacknowledged for 51s, 8 retransmissions"
        );
        let json: serde_json::Value = serde_json::from_str(&answers.json()).unwrap();
        assert_eq!(
            json["connection"]["half_open"][0],
            serde_json::json!({"local": "10.244.1.17:51828", "remote": "10.96.14.2:4222", "unacked_bytes": 1229, "unacked_for_ms": 51000, "retransmits": 8})
        );
        assert_eq!(json["connection"]["live"], 0);
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
            assert_eq!(report.human(), expected);
        }
    }

    /// The line fits the kubelet's event after `Readiness probe failed: `, cut after a whole
    /// word, the verdict and the fault first.
    #[test]
    fn the_line_fits_the_kubelets_event_cut_at_a_word() {
        use crate::report::words::MAX_LINE;
        let fault =
            "consumer S/D{}: no progress for 1m5s (window 1m): ack floor at 120, 4000 waiting";
        let summary: Vec<String> = (0..30)
            .map(|i| fault.replace("{}", &i.to_string()))
            .collect();
        let whole = format!("unhealthy: {}", summary.join("; "));
        let line = super::line("unhealthy", &summary.join("; "));
        let event = format!("Readiness probe failed: {line}\n");
        assert!(
            event.chars().count() <= 1024,
            "{} chars: {event}",
            event.chars().count()
        );
        assert!(line.chars().count() > MAX_LINE - 40, "{line}");
        assert!(line.starts_with("unhealthy: consumer S/D0: no progress"));
        let kept = line.strip_suffix('…').expect("cut, and says so");
        assert!(
            whole.starts_with(kept) && whole[kept.len()..].starts_with([' ', ',', ';', ':', '(']),
            "cut inside a word: {line}"
        );
        // A line that fits is whole; a check's longest lists are shortened before.
        let ports: Vec<u16> = (4000..4400).collect();
        let mut r = report(&trying(), &ports, Owner::Anyone, false);
        r.policy.remotes = (0..200)
            .map(|i| format!("10.{i}.0.0/16").parse().unwrap())
            .collect();
        assert!(r.human().chars().count() <= MAX_LINE && !r.human().ends_with('…'));
        let error = crate::report::error(&"word ".repeat(1000), false);
        assert!(
            error.chars().count() <= MAX_LINE && error.ends_with("word…"),
            "{error}"
        );
    }

    #[test]
    fn the_line_puts_the_verdict_in_words_first() {
        assert_eq!(super::line("unhealthy", "x"), "unhealthy: x");
        assert_eq!(
            super::line("configuration_error", "x"),
            "configuration error: x"
        );
        assert_eq!(super::line("error", "natsprobe: x"), "natsprobe: x");
    }
}
