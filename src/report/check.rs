//! The `check` report: what the verdict rests on, as typed structs that serialize to the JSON
//! document (`schema_version` 1, README "JSON") and carry the human line and `-v` lines.

use super::human::subscription::subscription_phrase;
use super::human::{self, consumer::consumer_phrase, consumer::describe_previous};
use super::input::CheckInput;
use super::remembered::{found_word, sampling_word};
use super::words::retention;
use crate::facts::{ConsumerFacts, Lookup, Observed, Process, Route, Socket, StateDirUsed};
use crate::facts::{StreamFacts, TcpInfo, Walked};
use crate::rules::answers;
use crate::rules::cause::{Class, Standing};
use crate::rules::check::{ConsumerHealth, Health};
use crate::rules::connection::{self, live, WhenServerDown};
use crate::rules::consumer::{self, Evidence, Fault, Healthy, Moved, Outcome, Progress};
use crate::rules::judged::{self, JudgedConsumer, JudgedSubscription};
use crate::rules::remembered::Carried;
use crate::rules::subscription::Held;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Bumped when a field changes meaning or goes away; adding a field does not bump it.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub schema_version: u32,
    pub command: &'static str,
    /// `healthy`, `unhealthy` or `configuration_error`.
    pub verdict: &'static str,
    /// The human line without its verdict word.
    pub summary: String,
    /// Why a verdict could not judge (NATS could not say): `server_down`, or the first
    /// consumer's or subscription's `not_judged` word; null when it judged.
    pub not_judged: Option<&'static str>,
    pub connection: ConnectionSection,
    pub server: Option<ServerSection>,
    pub consumers: Vec<ConsumerSection>,
    /// `asked`, or `skipped` between looks (`--sample-every`); absent without consumers to
    /// ask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumers_looked: Option<&'static str>,
    /// The subscriptions this pod's connection must hold (`--own-subscription`,
    /// `--subscription`); absent when none was asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subscriptions: Vec<SubscriptionSection>,
    /// Where the samples were kept, and the places passed over; absent when none was needed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<StateDirUsed>,
    /// Where the consumers were asked: present when a domain or prefix was given, or the
    /// server announced a JetStream domain of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jetstream: Option<JetStreamSection>,
    #[serde(skip)]
    pub health: Health,
    /// The one line for the kubelet's events.
    #[serde(skip)]
    pub line: String,
    /// The `-v` lines under it.
    #[serde(skip)]
    pub details: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JetStreamSection {
    /// The API subject prefix every request went to (`$JS.hub.API`).
    pub api: String,
    /// `--js-domain`, when given.
    pub domain: Option<String>,
    /// The domain the connected server announced (a leaf node's own).
    pub server_domain: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SubscriptionSection {
    pub subject: String,
    pub queue: Option<String>,
    /// The consumer whose deliver subscription it is, for `--own-subscription`.
    pub consumer: Option<String>,
    /// `healthy`, `unhealthy`, `not_judged` or `configuration_error`.
    pub verdict: &'static str,
    /// Its verdict in one word (`rules::subscription::STATES`): `held`,
    /// `not_by_this_connection`, `not_judged` or `carried`.
    pub state: &'static str,
    /// Why it could not be judged, and its class; null when it was.
    pub cannot_judge: Option<StandingJson>,
    /// This run could not look, and the outcome is what the last look saw (as for a
    /// consumer); null when this run looked.
    pub carried: Option<CarriedJson>,
    /// `held`, `not_by_this_connection`, a pull consumer's `pulls` or `not_pulling`, or the
    /// not-judged kind.
    pub outcome: &'static str,
    /// This pod's connection that holds it, or that is listed without it.
    pub connection: Option<String>,
    pub summary: String,
    /// Where the server's connection list came from.
    pub source: Option<String>,
    /// How this run found the pod's connection, or why it did not ask: `found_word`'s words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found: Option<&'static str>,
    /// A pull consumer's part: how long this pod's connections have published nothing, and
    /// how many messages the consumer delivered meanwhile (to the others).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull: Option<PullJson>,
}

/// A pull consumer's part, as `--own-subscription` judges it.
#[derive(Debug, Clone, Serialize)]
pub struct PullJson {
    pub quiet_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_meanwhile: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConnectionSection {
    pub ports: Vec<u16>,
    pub remotes: Vec<String>,
    pub min_connections: usize,
    pub established: usize,
    /// ESTABLISHED and not half-open: what counts.
    pub live: usize,
    /// ESTABLISHED connections whose peer is gone (`--half-open-after`).
    pub half_open: Vec<HalfOpenJson>,
    pub other_states: BTreeMap<&'static str, usize>,
    pub processes: Vec<Process>,
    /// The routes through which a counted socket counts: it is held as `held_as`, and stands
    /// for `dialled`, a server URL's address.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    pub netns_of: Option<u32>,
    pub reader: &'static str,
    pub reader_fallback: Option<String>,
    pub skipped_lines: usize,
    /// `walk` (the table read) or `exact` (only the connections the last healthy run counted,
    /// each looked up by its sock_diag identity).
    pub lookup: &'static str,
    /// How many connections the last healthy run left to look up; null when not looked for.
    pub remembered: Option<usize>,
    /// How many of them were found unchanged and live; null when not looked up.
    pub unchanged: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sockets: Option<Vec<SocketJson>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HalfOpenJson {
    pub local: String,
    pub remote: String,
    pub unacked_bytes: u32,
    /// A lower bound: the retransmission timeouts so far, with no ACK since.
    pub unacked_for_ms: u64,
    pub retransmits: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct SocketJson {
    pub state: &'static str,
    pub local: String,
    pub remote: String,
    pub uid: u32,
    pub inode: u64,
    /// The kernel's traffic facts (`tcp_info`, or what /proc has); null fields were not
    /// given by the reader.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpInfo>,
    /// The process holding it (`diagnose` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<Process>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerSection {
    pub urls: Vec<String>,
    pub asked: bool,
    pub answers: Vec<AnswerJson>,
    pub when_server_down: WhenServerDown,
}

#[derive(Debug, Clone, Serialize)]
pub struct AnswerJson {
    pub url: String,
    pub answer: &'static str,
    pub detail: String,
    /// Where a connection to the URL may be held besides the address dialled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConsumerSection {
    pub name: String,
    pub stream: String,
    pub durable: String,
    /// `healthy`, `unhealthy`, `not_judged` or `configuration_error`.
    pub verdict: &'static str,
    /// Its verdict in one word: one of `rules::consumer::STATES` (docs/checks.md's diagram).
    pub state: &'static str,
    /// Why it was not judged: `unreachable`, `not_permitted`, `timeout`,
    /// `jetstream_unavailable` or `failed`.
    pub not_judged: Option<&'static str>,
    /// Why it could not be judged or compared, and its class; null when it was.
    pub cannot_judge: Option<StandingJson>,
    /// This run could not look, and the verdict is the fault the last look saw: why (as
    /// `not_judged`) and how long ago that look was; null when this run looked.
    pub carried: Option<CarriedJson>,
    pub summary: String,
    pub window_ms: Option<u64>,
    pub window_raised_for_ack_wait_ms: Option<u64>,
    pub no_progress_ms: Option<u64>,
    pub evidence: Option<&'static str>,
    /// Since the previous sample: `acked`, `delivered` (ack policy none), `unclear` (acks or
    /// retention's deletions: one look cannot tell), `without_ack` (max_deliver drops, a
    /// purge), `none`; null without a previous sample.
    pub progress: Option<&'static str>,
    /// The stream settings under which the server deletes unacknowledged messages, when work
    /// waits on such a stream: what the in-pod check cannot see past.
    pub retention_deletes_unacked: Option<String>,
    pub facts: Option<ConsumerFacts>,
    pub stream_facts: Option<StreamFacts>,
    pub previous_sample: Option<String>,
    pub state_problem: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CarriedJson {
    pub could_not_look: &'static str,
    pub last_look_ago_ms: u64,
}

/// The check's report: each section from its part of the input, and the words.
pub fn check(input: &CheckInput) -> CheckReport {
    let verdict = input.verdict.health.as_str();
    let summary = human::summary(input);
    CheckReport {
        schema_version: SCHEMA_VERSION,
        command: "check",
        verdict,
        line: human::line(verdict, &summary),
        summary,
        not_judged: judged::not_judged(input.verdict.reason, input.consumers, input.subscriptions),
        connection: connection_section(input),
        server: server_section(input),
        consumers: input.consumers.iter().map(consumer_section).collect(),
        consumers_looked: input.observations.sampling.map(sampling_word),
        subscriptions: input
            .subscriptions
            .iter()
            .map(|s| subscription_section(s, input))
            .collect(),
        state_dir: input.observations.state_dir.clone(),
        jetstream: (!input.js_api.is_local() || input.observations.server_domain.is_some()).then(
            || JetStreamSection {
                api: input.js_api.base(),
                domain: input.js_api.named_domain().map(str::to_string),
                server_domain: input.observations.server_domain.clone(),
            },
        ),
        health: input.verdict.health,
        details: human::details::details(input),
    }
}

/// The pod's connections: what counts, what was found, who holds them, which reader read them
/// (and, with `-v`, every matching socket).
fn connection_section(input: &CheckInput) -> ConnectionSection {
    let pod = &input.observations.pod;
    let c = input.connections;
    let (lookup, remembered, unchanged) = match pod.scan.lookup {
        Lookup::Exact { remembered } => ("exact", Some(remembered), Some(live(c))),
        Lookup::Walk(Walked::Changed { remembered, live }) => {
            ("walk", Some(remembered), Some(live))
        }
        Lookup::Walk(Walked::NothingRemembered) => ("walk", Some(0), None),
        Lookup::Walk(Walked::LookupFailed | Walked::NotTried) => ("walk", None, None),
    };
    let sockets = input.verbose.then(|| {
        c.established
            .iter()
            .chain(&c.others)
            .map(socket_json)
            .collect()
    });
    ConnectionSection {
        ports: input.policy.ports.clone(),
        remotes: input.policy.remotes.iter().map(|r| r.to_string()).collect(),
        min_connections: input.policy.min_connections,
        established: c.established.len(),
        live: live(c),
        half_open: c
            .half_open
            .iter()
            .map(|(s, h)| HalfOpenJson {
                local: s.local.to_string(),
                remote: s.remote.to_string(),
                unacked_bytes: h.unacked_bytes,
                unacked_for_ms: millis(h.unacked_for),
                retransmits: h.retransmits,
            })
            .collect(),
        other_states: c
            .other_states()
            .into_iter()
            .map(|(s, n)| (s.name(), n))
            .collect(),
        processes: pod.processes.clone(),
        routes: c.routes.clone(),
        netns_of: pod.netns_of,
        reader: pod.scan.reader.name(),
        reader_fallback: pod.scan.fallback.clone(),
        skipped_lines: pod.scan.skipped_lines,
        lookup,
        remembered,
        unchanged,
        sockets,
    }
}

/// The servers, whether they were asked, and each one's answer; None without `--server`.
fn server_section(input: &CheckInput) -> Option<ServerSection> {
    let answers = &input.observations.servers;
    (!input.servers.is_empty()).then(|| ServerSection {
        urls: input.servers.to_vec(),
        asked: !answers.is_empty(),
        answers: answers
            .iter()
            .map(|a| AnswerJson {
                url: a.url.clone(),
                answer: a.answer.kind(),
                detail: a.answer.to_string(),
                routes: connection::routes(std::slice::from_ref(a)),
            })
            .collect(),
        when_server_down: input.policy.when_server_down,
    })
}

/// Why a check could not run (or compare), and whether that passes or is the configuration.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StandingJson {
    /// `rules::cause::Cause::as_str`: `unreachable`, `timeout`, `credentials`, ... (the table
    /// of causes in docs/reference.md).
    pub cause: &'static str,
    /// `transient` (cannot judge now) or `configuration` (can never judge as configured).
    pub class: &'static str,
    /// Seen run after run for this long.
    pub lasted_ms: u64,
    pub window_ms: u64,
    /// A configuration error now (exit 2).
    pub error: bool,
    /// The check was judged before with this configuration on these servers: a cause of the
    /// configuration is then NATS changing under it, never an error.
    pub judged_before: bool,
}

fn standing_json(s: Standing) -> StandingJson {
    StandingJson {
        cause: s.cause.as_str(),
        class: match s.class {
            Class::Transient => "transient",
            Class::ConfigurationIfNeverJudged | Class::ConfigurationIfItPersists => "configuration",
        },
        judged_before: s.judged_before,
        lasted_ms: millis(s.lasted),
        window_ms: millis(s.window),
        error: s.is_configuration_error(),
    }
}

fn socket_json(s: &Socket) -> SocketJson {
    SocketJson {
        state: s.state.name(),
        local: s.local.to_string(),
        remote: s.remote.to_string(),
        uid: s.uid,
        inode: s.inode,
        tcp: s.info,
        holder: None,
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}

fn consumer_section(r: &JudgedConsumer) -> ConsumerSection {
    let (facts, stream) = match &r.seen.observed {
        Observed::Found { facts, stream } => (Some(facts.clone()), stream.clone()),
        _ => (None, None),
    };
    let (stalled, evidence) = match &r.outcome {
        Outcome::Healthy(Healthy::Progressing(Moved::LastAck(since))) => {
            (Some(*since), Some(Evidence::LastActive))
        }
        Outcome::Healthy(Healthy::Progressing(_)) => {
            (Some(Duration::ZERO), Some(Evidence::Samples))
        }
        Outcome::Healthy(Healthy::Waiting {
            stalled, evidence, ..
        })
        | Outcome::Unhealthy(Fault::Stalled {
            stalled, evidence, ..
        }) => (Some(*stalled), Some(*evidence)),
        Outcome::Unhealthy(Fault::Retention { stalled, .. }) => {
            (Some(*stalled), Some(Evidence::Samples))
        }
        Outcome::Healthy(
            Healthy::YoungClient { stalled, .. }
            | Healthy::ClientAgeUnknown { stalled }
            | Healthy::ServerNotDelivering { stalled, .. }
            | Healthy::RestartDidNotHelp { stalled, .. },
        ) => (Some(*stalled), None),
        _ => (None, None),
    };
    ConsumerSection {
        name: r.seen.name.to_string(),
        stream: r.seen.name.stream.clone(),
        durable: r.seen.name.durable.clone(),
        verdict: r.health().as_str(),
        state: r.outcome.state(r.carried.is_some()),
        not_judged: match &r.outcome {
            Outcome::NotJudged(why) => Some(answers::meaning(why).word),
            _ if r.health() == ConsumerHealth::NotThePods => r.standing.map(|s| s.cause.as_str()),
            _ => None,
        },
        cannot_judge: r.standing.map(standing_json),
        carried: r.carried.as_ref().map(carried_json),
        summary: consumer_phrase(r),
        window_ms: r.window.map(|w| millis(w.duration)),
        window_raised_for_ack_wait_ms: r.window.and_then(|w| w.raised_for_ack_wait).map(millis),
        no_progress_ms: stalled.map(millis),
        evidence: evidence.map(|e| match e {
            Evidence::LastActive => "last_active",
            Evidence::Samples => "samples",
        }),
        progress: r.progress.map(Progress::as_str),
        retention_deletes_unacked: (stream.as_ref())
            .and_then(consumer::deletes_unacked)
            .map(|d| retention(&d.settings)),
        facts,
        stream_facts: stream,
        previous_sample: r.seen.previous.as_ref().map(describe_previous),
        state_problem: r.seen.state_problem.clone(),
    }
}

fn carried_json(c: &Carried) -> CarriedJson {
    CarriedJson {
        could_not_look: answers::meaning(&c.why).word,
        last_look_ago_ms: millis(c.ago),
    }
}

fn subscription_section(s: &JudgedSubscription, input: &CheckInput) -> SubscriptionSection {
    let (outcome, connection, pull) = match &s.held {
        Held::Yes { by } => ("held", Some(by), None),
        Held::NotByThisConnection { connection } => {
            ("not_by_this_connection", Some(connection), None)
        }
        Held::Pulls { by, quiet } => ("pulls", Some(by), Some((quiet, None))),
        Held::NotPulling {
            connection,
            quiet,
            delivered,
        } => (
            "not_pulling",
            Some(connection),
            Some((quiet, Some(*delivered))),
        ),
        Held::NotJudged(why) => (answers::meaning(why).word, None, None),
    };
    SubscriptionSection {
        subject: s.wanted.subject.clone(),
        queue: s.wanted.queue.clone(),
        consumer: s.consumer.as_ref().map(ToString::to_string),
        verdict: s.health().as_str(),
        state: s.held.state(s.carried.is_some()),
        cannot_judge: s.standing.map(standing_json),
        carried: s.carried.as_ref().map(carried_json),
        outcome,
        connection: connection.map(ToString::to_string),
        summary: subscription_phrase(s),
        source: (input.observations.connz.as_ref())
            .and_then(|c| c.as_ref().ok())
            .map(|c| c.source.clone()),
        found: s.found.map(found_word),
        pull: pull.map(|(quiet, delivered_meanwhile)| PullJson {
            quiet_ms: millis(*quiet),
            delivered_meanwhile,
        }),
    }
}

#[cfg(test)]
mod tests {
    //! Snapshot tests of the JSON document.
    use crate::config::Owner;
    use crate::facts::Answer;
    use crate::report::test_support::*;
    use crate::rules::connection::WhenServerDown;

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

    #[test]
    fn json_server_section_says_when_server_down_fail() {
        let r = asked(
            report(&[], &[4222], Owner::Anyone, false),
            &["nats://10.96.14.2:4222"],
            vec![Answer::Refused],
            WhenServerDown::Fail,
        );
        let v: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(v["server"]["when_server_down"], "fail");
    }

    /// A subscription's `outcome`, `connection` and `pull` by how it is held, and `source`
    /// only from a connection list the servers gave.
    #[test]
    fn json_subscription_says_how_it_is_held() {
        use crate::facts::{Connz, Unknown, Wanted};
        use crate::rules::judged::JudgedSubscription;
        use crate::rules::subscription::Held;
        use std::time::Duration;
        let at = "10.0.0.5:51828".parse().unwrap();
        let quiet = Duration::from_secs(90);
        let sub = |held| JudgedSubscription {
            wanted: Wanted {
                subject: "orders".into(),
                queue: None,
            },
            pull: false,
            consumer: None,
            held,
            carried: None,
            standing: None,
            found: None,
            judged_before: true,
        };
        let mut r = report(&live(), &[4222], Owner::Anyone, false);
        r.subscriptions = vec![
            sub(Held::Yes { by: at }),
            sub(Held::NotByThisConnection { connection: at }),
            sub(Held::Pulls { by: at, quiet }),
            sub(Held::NotPulling {
                connection: at,
                quiet,
                delivered: 4,
            }),
            sub(Held::NotJudged(Unknown::Deadline)),
        ];
        let fields = |r: &Case| {
            let v: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
            let subs = v["subscriptions"].as_array().unwrap().clone();
            subs.iter()
                .map(|s| ["outcome", "connection", "source", "pull"].map(|k| s[k].clone()))
                .collect::<Vec<_>>()
        };
        let a = serde_json::json!("10.0.0.5:51828");
        let null = serde_json::Value::Null;
        assert_eq!(
            fields(&r),
            [
                ["held".into(), a.clone(), null.clone(), null.clone()],
                [
                    "not_by_this_connection".into(),
                    a.clone(),
                    null.clone(),
                    null.clone()
                ],
                [
                    "pulls".into(),
                    a.clone(),
                    null.clone(),
                    serde_json::json!({"quiet_ms": 90000})
                ],
                [
                    "not_pulling".into(),
                    a.clone(),
                    null.clone(),
                    serde_json::json!({"quiet_ms": 90000, "delivered_meanwhile": 4})
                ],
                ["timeout".into(), null.clone(), null.clone(), null.clone()],
            ]
        );
        r.obs.connz = Some(Err(Unknown::Deadline));
        assert!(fields(&r).iter().all(|f| f[2].is_null()));
        r.obs.connz = Some(Ok(Connz {
            source: "the account's connection report".into(),
            holding: vec![],
            all: None,
            probe_seen_as: None,
            servers: 1,
            out_of_sight: None,
            incomplete: None,
        }));
        assert!(fields(&r)
            .iter()
            .all(|f| f[2] == "the account's connection report"));
    }

    /// `retention_deletes_unacked` names the settings of a found stream that deletes
    /// unacknowledged messages, and is null without its stream.
    #[test]
    fn json_consumer_names_retention_that_deletes_unacked() {
        use crate::facts::{ConsumerFacts, Observed, StreamFacts};
        use crate::rules::consumer::{Healthy, Outcome};
        let stream = StreamFacts {
            retention: "limits".into(),
            discard: "old".into(),
            max_msgs: Some(200),
            max_bytes: None,
            max_age: None,
            max_msgs_per_subject: None,
            discard_new_per_subject: false,
            first_seq: 1,
            last_seq: 200,
        };
        let found = |stream| Observed::Found {
            facts: ConsumerFacts::example(0, 0, 0, 1),
            stream,
        };
        let r = with_consumers(
            report(&live(), &[4222], Owner::Anyone, false),
            vec![
                (
                    "S/a",
                    found(Some(stream)),
                    Outcome::Healthy(Healthy::Idle),
                    None,
                ),
                ("S/b", found(None), Outcome::Healthy(Healthy::Idle), None),
            ],
            WhenServerDown::Pass,
        );
        let v: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(
            v["consumers"][0]["retention_deletes_unacked"],
            "max_msgs 200, discard old"
        );
        assert!(v["consumers"][1]["retention_deletes_unacked"].is_null());
    }

    #[test]
    fn json_object() {
        let text = report(&live(), &[4222], Owner::Pid(42), true).json();
        let expected = r#"{"schema_version":1,"command":"check","verdict":"healthy","summary":"2 ESTABLISHED TCP connections to remote port 4222 held by bento[42] (10.96.14.2:4222, 10.96.14.3:4222)","not_judged":null,"connection":{"ports":[4222],"remotes":[],"min_connections":1,"established":2,"live":2,"half_open":[],"other_states":{},"processes":[{"pid":42,"name":"bento"}],"netns_of":null,"reader":"netlink","reader_fallback":null,"skipped_lines":0,"lookup":"walk","remembered":null,"unchanged":null,"sockets":[{"state":"ESTABLISHED","local":"10.244.1.17:51828","remote":"10.96.14.2:4222","uid":1000,"inode":11},{"state":"ESTABLISHED","local":"[::ffff:10.244.1.17]:51830","remote":"[::ffff:10.96.14.3]:4222","uid":1000,"inode":12}]},"server":null,"consumers":[]}"#;
        assert_eq!(text, expected);
    }
}
