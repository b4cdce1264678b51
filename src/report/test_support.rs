//! Fixtures for the reports' snapshot tests: a check's report made from owned parts, so a
//! test can change one thing (tests only).

use super::check::check;
use super::input::CheckInput;
use super::render_check;
use crate::config::Owner;
use crate::facts::{
    Answer, ConsumerName, ConsumerSeen, Loaded, Observations, Observed, Pod, Process, ServerAnswer,
    Socket, SocketScan, TcpState,
};
use crate::rules::check::{decide, ServerState, Verdict};
use crate::rules::connection::{connections, Connections, Policy, WhenServerDown};
use crate::rules::consumer::{Outcome, Window};
use crate::rules::judged::{JudgedConsumer, JudgedSubscription};

/// Everything a report is made from, owned, so a test can change one thing.
pub(crate) struct Case {
    pub(crate) verdict: Verdict,
    pub(crate) policy: Policy,
    pub(crate) connections: Connections,
    pub(crate) obs: Observations,
    pub(crate) servers: Vec<String>,
    pub(crate) consumers: Vec<JudgedConsumer>,
    pub(crate) subscriptions: Vec<JudgedSubscription>,
    pub(crate) verbose: bool,
    pub(crate) js_api: crate::config::JsApi,
}

impl Case {
    pub(crate) fn report(&self) -> super::check::CheckReport {
        check(&CheckInput {
            verdict: self.verdict,
            policy: &self.policy,
            connections: &self.connections,
            observations: &self.obs,
            servers: &self.servers,
            consumers_configured: self.consumers.len(),
            js_api: &self.js_api,
            consumers: &self.consumers,
            subscriptions: &self.subscriptions,
            verbose: self.verbose,
        })
    }

    pub(crate) fn human(&self) -> String {
        render_check(&self.report(), false, self.verbose)
    }

    pub(crate) fn json(&self) -> String {
        render_check(&self.report(), true, self.verbose)
    }
}

pub(crate) fn sock(local: &str, remote: &str, state: TcpState, inode: u64) -> Socket {
    Socket {
        local: local.parse().unwrap(),
        remote: remote.parse().unwrap(),
        state,
        inode,
        uid: 1000,
        info: None,
        diag: None,
    }
}

pub(crate) fn report(sockets: &[Socket], ports: &[u16], owner: Owner, verbose: bool) -> Case {
    let policy = Policy {
        ports: ports.to_vec(),
        remotes: vec![],
        min_connections: 1,
        half_open_after: None,
        server: false,
        when_server_down: WhenServerDown::Pass,
        startup: false,
    };
    let connections = connections(sockets, &policy, None, &[]);
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
        verdict: decide(&connections, None, &[], false, &policy),
        policy,
        connections,
        obs: Observations {
            pod: Pod {
                processes,
                scan: SocketScan {
                    sockets: sockets.to_vec(),
                    ..SocketScan::default()
                },
                ..Pod::default()
            },
            server_jetstream: true,
            ..Observations::default()
        },
        servers: vec![],
        consumers: vec![],
        subscriptions: vec![],
        verbose,
        js_api: crate::config::JsApi::Local,
    }
}

/// The report of a connected run whose `--consumer`s came out as `judged`.
pub(crate) fn with_consumers(
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
                carried: None,
            }
        })
        .collect();
    let healths: Vec<_> = r.consumers.iter().map(|c| c.health()).collect();
    let silent = crate::rules::judged::nats_silent(&r.consumers, &[]);
    r.verdict = decide(&r.connections, None, &healths, silent, &r.policy);
    r
}

/// The report of a run that asked `urls` and got `answers`.
pub(crate) fn asked(
    mut r: Case,
    urls: &[&str],
    answers: Vec<Answer>,
    when: WhenServerDown,
) -> Case {
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
            reached: None,
            peers: Vec::new(),
            identity: None,
        })
        .collect();
    r.verdict = decide(&r.connections, Some(state), &[], false, &r.policy);
    r
}

pub(crate) fn live() -> Vec<Socket> {
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

pub(crate) fn trying() -> Vec<Socket> {
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
