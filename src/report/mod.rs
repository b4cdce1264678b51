//! Reports: a verdict and the facts it rests on, as typed structs that serialize to one JSON
//! document (`schema_version`), and as words: one line for the kubelet's events, more with
//! `-v`. Everything here returns strings; `main` writes them.

pub mod check;
pub mod diagnose;
pub mod guard;
pub mod human;
pub mod input;
pub mod remembered;
pub mod words;

use serde::Serialize;

/// A run that ended without a verdict (exit 2 or 3), as JSON.
#[derive(Debug, Serialize)]
struct ErrorReport<'a> {
    schema_version: u32,
    verdict: &'static str,
    summary: &'a str,
}

/// The text of a run that ended without a verdict: one line, or one JSON object.
pub fn error(message: &str, json: bool) -> String {
    if json {
        serde_json::to_string(&ErrorReport {
            schema_version: check::SCHEMA_VERSION,
            verdict: "error",
            summary: message,
        })
        .expect("a plain struct serializes")
    } else {
        human::error(message)
    }
}

/// A `guard`'s answer, the JSON document or the table and its summary line, written to `out`
/// as it is rendered (the one report too large to make as a string first).
pub fn write_guard(
    report: &guard::GuardReport,
    json: bool,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    match json {
        true => report.write_json(out),
        false => report.write_text(out),
    }
}

/// The text of a `diagnose`: the JSON document, or the terminal report (ANSI styles with
/// `colour`).
pub fn render_diagnose(report: &diagnose::DiagnoseReport, json: bool, colour: bool) -> String {
    match json {
        true => serde_json::to_string(report).expect("a plain struct serializes"),
        false => report.render(colour),
    }
}

/// The text of a `check`: the JSON document, or the line (and the `-v` lines).
pub fn render_check(report: &check::CheckReport, json: bool, verbose: bool) -> String {
    if json {
        return serde_json::to_string(report).expect("a plain struct serializes");
    }
    let mut out = report.line.clone();
    if verbose {
        for line in &report.details {
            out.push('\n');
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    //! Snapshot tests of the words and the JSON: every line here is what an operator reads in
    //! `kubectl describe`, byte for byte.
    use super::check::check;
    use super::input::CheckInput;
    use super::render_check;
    use crate::config::Owner;
    use crate::facts::{
        Answer, ConsumerName, Loaded, Observed, Process, Reader, ServerAnswer, Socket, SocketScan,
        TcpState, Unknown,
    };
    use crate::facts::{ConsumerSeen, Observations, Pod};
    use crate::rules::check::{decide, ServerState, Verdict};
    use crate::rules::connection::{connections, Connections, Policy, WhenServerDown};
    use crate::rules::consumer::{Outcome, Window};
    use crate::rules::judged::JudgedConsumer;
    use std::time::Duration;

    /// Everything a report is made from, owned, so a test can change one thing.
    struct Case {
        verdict: Verdict,
        policy: Policy,
        connections: Connections,
        obs: Observations,
        servers: Vec<String>,
        consumers: Vec<JudgedConsumer>,
        verbose: bool,
        js_api: crate::config::JsApi,
    }

    impl Case {
        fn report(&self) -> super::check::CheckReport {
            check(&CheckInput {
                verdict: self.verdict,
                policy: &self.policy,
                connections: &self.connections,
                observations: &self.obs,
                servers: &self.servers,
                consumers_configured: self.consumers.len(),
                js_api: &self.js_api,
                consumers: &self.consumers,
                subscriptions: &[],
                verbose: self.verbose,
            })
        }

        fn human(&self) -> String {
            render_check(&self.report(), false, self.verbose)
        }

        fn json(&self) -> String {
            render_check(&self.report(), true, self.verbose)
        }
    }

    fn sock(local: &str, remote: &str, state: TcpState, inode: u64) -> Socket {
        Socket {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            state,
            inode,
            uid: 1000,
            info: None,
        }
    }

    fn report(sockets: &[Socket], ports: &[u16], owner: Owner, verbose: bool) -> Case {
        let policy = Policy {
            ports: ports.to_vec(),
            remotes: vec![],
            min_connections: 1,
            half_open_after: None,
            server: false,
            when_server_down: WhenServerDown::Pass,
        };
        let connections = connections(sockets, &policy, None);
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
        Case {
            verdict: decide(&connections, None, &[], &policy),
            policy,
            connections,
            obs: Observations {
                pod: Pod {
                    processes,
                    owned: None,
                    scan: SocketScan {
                        sockets: sockets.to_vec(),
                        reader: Reader::Netlink,
                        fallback: None,
                        skipped_lines: 0,
                    },
                    netns_of: None,
                },
                servers: vec![],
                consumers: vec![],
                client_age: None,
                now_ms: 0,
                connz: None,
                state_dir: None,
                server_domain: None,
                server_jetstream: true,
                sampling: None,
            },
            servers: vec![],
            consumers: vec![],
            verbose,
            js_api: crate::config::JsApi::Local,
        }
    }

    /// The report of a connected run whose `--consumer`s came out as `judged`.
    fn with_consumers(
        mut r: Case,
        judged: Vec<(&str, Observed, Outcome, Option<Window>)>,
        when: WhenServerDown,
    ) -> Case {
        r.servers = vec!["nats://nats:4222".into()];
        r.policy.server = true;
        r.policy.when_server_down = when;
        r.consumers = judged
            .into_iter()
            .map(|(name, observed, outcome, window)| {
                let (stream, durable) = name.split_once('/').unwrap();
                JudgedConsumer {
                    seen: ConsumerSeen {
                        name: ConsumerName {
                            stream: stream.into(),
                            durable: durable.into(),
                        },
                        observed,
                        previous: Some(Loaded::Missing),
                        state_problem: None,
                    },
                    outcome,
                    window,
                    progress: None,
                    standing: None,
                }
            })
            .collect();
        let healths: Vec<_> = r.consumers.iter().map(|c| c.health()).collect();
        r.verdict = decide(&r.connections, None, &healths, &r.policy);
        r
    }

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
            "healthy: consumer TF_RAW/kv not judged: JetStream is not answering (no responders: disabled, or not ready); the server has no JetStream of its own: a stream behind a leaf node needs --js-domain; 1 ESTABLISHED TCP connection to remote port 4222"
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
                with_consumers(live(), vec![("S/d", nf(), Outcome::NotJudged(Unknown::Credentials), None)], WhenServerDown::Fail),
                "unhealthy: consumer S/d not judged: authorization error: the server refused the probe's credentials (--when-server-down fail); 1 ESTABLISHED TCP connection to remote port 4222",
            ),
        ];
        for (report, expected) in cases {
            assert_eq!(report.human(), expected);
        }
    }

    /// The report of a run that asked `urls` and got `answers`.
    fn asked(mut r: Case, urls: &[&str], answers: Vec<Answer>, when: WhenServerDown) -> Case {
        r.servers = urls
            .iter()
            .map(|u| crate::config::parse_url(u).unwrap().to_string())
            .collect();
        r.policy.server = true;
        r.policy.when_server_down = when;
        let state = match answers.iter().any(Answer::is_nats) {
            true => ServerState::Answers,
            false => ServerState::NotAnswering,
        };
        r.obs.servers = r
            .servers
            .iter()
            .zip(answers)
            .map(|(url, answer)| ServerAnswer {
                url: url.clone(),
                answer,
            })
            .collect();
        r.verdict = decide(&r.connections, Some(state), &[], &r.policy);
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
            assert_eq!(report.human(), expected);
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
        let text = r.json();
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
        plain.verdict = decide(&plain.connections, None, &[], &plain.policy);
        assert_eq!(
            plain.human(),
            "unhealthy: connection to 10.96.14.2:4222 is half-open: 1.2 KiB unacknowledged for 51s, 8 retransmissions; no other ESTABLISHED TCP connection to remote port 4222
  reader: netlink
  ESTABLISHED 10.244.1.17:51828 -> 10.96.14.2:4222 uid 1000 inode 11; unacked 1.2 KiB (3 segments), 8 retransmits (9 in all), back-off 8, rto 51s, last data received 53s ago, last ACK 53s ago, last data sent 100ms ago; HALF-OPEN: unacknowledged for at least 51s"
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
        one_live.verdict = decide(&one_live.connections, None, &[], &one_live.policy);
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

    #[test]
    fn json_object() {
        let text = report(&live(), &[4222], Owner::Pid(42), true).json();
        let expected = r#"{"schema_version":1,"command":"check","verdict":"healthy","summary":"2 ESTABLISHED TCP connections to remote port 4222 held by bento[42] (10.96.14.2:4222, 10.96.14.3:4222)","connection":{"ports":[4222],"remotes":[],"min_connections":1,"established":2,"live":2,"half_open":[],"other_states":{},"processes":[{"pid":42,"name":"bento"}],"netns_of":null,"reader":"netlink","reader_fallback":null,"skipped_lines":0,"sockets":[{"state":"ESTABLISHED","local":"10.244.1.17:51828","remote":"10.96.14.2:4222","uid":1000,"inode":11},{"state":"ESTABLISHED","local":"[::ffff:10.244.1.17]:51830","remote":"[::ffff:10.96.14.3]:4222","uid":1000,"inode":12}]},"server":null,"consumers":[]}"#;
        assert_eq!(text, expected);
    }

    #[test]
    fn the_line_stays_under_300_characters() {
        let ports: Vec<u16> = (4000..4100).collect();
        let mut r = report(&trying(), &ports, Owner::Anyone, false);
        r.policy.remotes = (0..50)
            .map(|i| format!("10.{i}.0.0/16").parse().unwrap())
            .collect();
        let line = r.human();
        assert!(
            line.chars().count() < 300,
            "{} chars: {line}",
            line.chars().count()
        );
        assert!(line.starts_with("unhealthy: "));
        assert!(super::error(&"x".repeat(1000), false).chars().count() < 300);
    }

    /// `diagnose`: the same verdict, every fact, and what to do; colour only when asked.
    #[test]
    fn diagnose_a_client_that_gave_up() {
        use super::diagnose::diagnose;
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
            serde_json::from_str(&super::render_diagnose(&d, true, true)).unwrap();
        assert_eq!(json["command"], "diagnose");
        assert_eq!(json["verdict"], "unhealthy");
        assert_eq!(json["connection"]["sockets"][0]["holder"]["name"], "bento");
        assert_eq!(json["advice"][0]["kind"], "client_gave_up");
        assert_eq!(json["advice"][1]["kind"], "never_closed");
    }

    /// A connected pod with a stuck consumer: its facts, line by line, and the advice.
    #[test]
    fn diagnose_a_stalled_consumer() {
        use super::diagnose::diagnose;
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
