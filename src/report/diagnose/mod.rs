//! The `diagnose` report: everything the check saw, for a person at a terminal (`kubectl exec`),
//! and what to do about it. The same verdict as `check`, from the same observations; its JSON
//! is the check's document (every socket listed, with its holder) plus the advice.
mod advice;
pub mod connection;
pub mod consumer;
mod style;

pub use style::{text, Line, Style};

use super::check::{check, CheckReport};
use super::human::subscription::{
    listed_from, subscription_name, subscription_phrase, subscription_subject,
};
use super::human::{self, details::state_dir};
use super::input::CheckInput;
use super::remembered::found_phrase;
use super::words::display;
use crate::facts::Process;
use crate::rules::advice::Advice;
use crate::rules::cause::Class;
use crate::rules::check::{ConsumerHealth, Health};
use serde::Serialize;
use std::collections::HashMap;
use style::plain;

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
    /// A word for scripts: one of `advice::kind`'s.
    pub kind: &'static str,
    pub text: String,
}

impl DiagnoseReport {
    /// The terminal text; with `colour`, ANSI styles (only for a terminal, never with
    /// `NO_COLOR`: `main` decides).
    pub fn render(&self, colour: bool) -> String {
        let piece = |(style, text): &(Style, String)| match colour && *style != Style::Plain {
            true => format!("{}{text}\x1b[0m", style.sgr()),
            false => text.clone(),
        };
        let said: Vec<String> = (self.lines.iter())
            .map(|line| line.iter().map(piece).collect())
            .collect();
        said.join("\n")
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
    let advice_json: Vec<AdviceJson> = advice
        .iter()
        .map(|a| AdviceJson {
            kind: advice::kind(a),
            text: advice::words(a, input),
        })
        .collect();
    let mut lines: Vec<Line> = vec![vec![
        (Style::Heading, "natsprobe diagnose".into()),
        (Style::Dim, format!(", version {version}")),
    ]];
    connection::sockets(input, holders, &mut lines);
    connection::servers(input, asked_for_diagnose, &mut lines);
    consumer::consumers(input, &mut lines);
    subscriptions(input, &mut lines);
    could_not_run(input, &mut lines);
    verdict(input, &advice_json, &mut lines);
    DiagnoseReport {
        check: document,
        advice: advice_json,
        lines,
    }
}

/// The check's document, with each socket's holder (every socket is listed: `-v`).
fn document(input: &CheckInput, holders: &HashMap<u64, Process>) -> CheckReport {
    let mut document = check(input);
    document.command = "diagnose";
    if let Some(sockets) = &mut document.connection.sockets {
        for s in sockets.iter_mut() {
            s.holder = holders.get(&s.inode).cloned();
        }
    }
    document
}

/// Each subscription the pod's connection must hold, how it was found, and where the server's
/// connection list came from; nothing without one.
fn subscriptions(input: &CheckInput, lines: &mut Vec<Line>) {
    if !input.subscriptions.is_empty() {
        lines.push(vec![]);
        lines.push(vec![(Style::Heading, "Subscriptions".into())]);
        for s in input.subscriptions {
            let style = match s.health() {
                ConsumerHealth::Healthy => Style::Good,
                ConsumerHealth::Unhealthy | ConsumerHealth::Misconfigured => Style::Bad,
                ConsumerHealth::NotJudged
                | ConsumerHealth::NeverJudged
                | ConsumerHealth::NotThePods => Style::Warn,
            };
            lines.push(vec![
                (Style::Plain, format!("  {}: ", subscription_subject(s))),
                (style, subscription_phrase(s)),
            ]);
            if let Some(found) = s.found {
                lines.push(vec![(Style::Dim, format!("    {}", found_phrase(found)))]);
            }
        }
        if let Some(Ok(connz)) = &input.observations.connz {
            lines.push(vec![(Style::Dim, format!("  {}", listed_from(connz)))]);
        }
    }
}

/// The verdict as `check` gives it, its exit code, and what to do.
fn verdict(input: &CheckInput, advice: &[AdviceJson], lines: &mut Vec<Line>) {
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
        lines.push(plain(format!("  - {}", a.text)));
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
            (_, false) if !s.may_become_an_error() => (
                Style::Warn,
                "the configuration, or NATS changing under it: judged before with this configuration, so never an error".to_string(),
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
        use crate::rules::advice::advise;
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
            ..crate::facts::ConsumerFacts::example(0, 0, 0, ts)
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
            reached: None,
            peers: Vec::new(),
            identity: None,
        }];
        let advice = advise(&r.verdict, &r.connections, &r.policy, &r.consumers, &[]);
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
        // `-v` says the same facts in the same words, on one line.
        assert_eq!(
            crate::report::human::consumer::consumer_details(&r.consumers[0], input.observations.now_ms),
            "push to deliver.alarms, queue group alarms, bound; 3990 pending, 10 awaiting ack, 2 redelivered; ack floor 120 (stream 130), last ack 1m15s ago; delivered 130 (stream 140), last delivery 1s ago; ack policy explicit, ack_wait 30s, max_ack_pending 10, max_deliver unlimited; no previous sample → no progress for 1m15s (window 1m): ack floor at 120, 4000 waiting"
        );
    }
}
