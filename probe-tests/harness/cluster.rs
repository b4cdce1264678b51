//! A three-node nats-server cluster with JetStream, on loopback inside one network namespace:
//! `n1`..`n3`, client ports 4222..4224, routes 6222..6224. Each node is a `NatsServer`, so a
//! node can be killed (an outage of that node) and started again.

use super::peer::natspeer;
use super::{formed_within_three_starts, NatsServer, NetNs, Version};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Cluster {
    pub ns: Arc<NetNs>,
    pub nodes: Vec<NatsServer>,
}

impl Cluster {
    /// Three fresh nodes, once clustered JetStream places a stream on all three (within 40 s,
    /// else started afresh).
    pub fn start(ns: &Arc<NetNs>, version: Version, host: &str) -> Cluster {
        formed_within_three_starts(
            "cluster",
            || Cluster {
                ns: Arc::clone(ns),
                nodes: Cluster::nodes(ns, version, host),
            },
            |cluster| cluster.wait_for_jetstream(Duration::from_secs(40)),
        )
    }

    fn nodes(ns: &Arc<NetNs>, version: Version, host: &str) -> Vec<NatsServer> {
        let routes: Vec<String> = (0..3)
            .map(|i| format!("nats://{host}:{}", 6222 + i))
            .collect();
        (0..3)
            .map(|i| {
                let name = format!("n{}", i + 1);
                let listen = routes[i].clone();
                let others: Vec<&str> = routes
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, r)| r.as_str())
                    .collect();
                let others = others.join(",");
                NatsServer::start_with(
                    Some(ns),
                    version,
                    host,
                    4222 + i as u16,
                    &[
                        "-n",
                        &name,
                        "--cluster_name",
                        "probe",
                        "--cluster",
                        &listen,
                        "--routes",
                        &others,
                    ],
                )
            })
            .collect()
    }

    /// Every node's URL, comma-separated, as clients and the probe take them.
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(NatsServer::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A JetStream API request through the cluster: its answer (an error body included), or
    /// natspeer's `fatal` line when there was none.
    pub fn request(&self, subject: &str) -> String {
        self.request_with(subject, "")
    }

    fn request_with(&self, subject: &str, data: &str) -> String {
        let out = self
            .ns
            .command(natspeer())
            .args([
                "request",
                "-url",
                &self.urls(),
                "-subject",
                subject,
                "-data",
                data,
            ])
            .output()
            .expect("run natspeer");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The name of the node leading `stream`.
    pub fn stream_leader(&self, stream: &str) -> String {
        let info = self.request(&format!("$JS.API.STREAM.INFO.{stream}"));
        let json: serde_json::Value = serde_json::from_str(&info).unwrap();
        json["cluster"]["leader"]
            .as_str()
            .unwrap_or_else(|| panic!("no leader for {stream}: {info}"))
            .to_string()
    }

    /// Kills node `name` (`n1`..`n3`).
    pub fn stop(&mut self, name: &str) {
        let i: usize = name.trim_start_matches('n').parse::<usize>().unwrap() - 1;
        self.nodes[i].stop();
    }

    /// Clustered JetStream answers once a meta leader is elected, and places a stream on all
    /// three nodes once every node is a current peer: a stream of three replicas made and
    /// deleted says both. Not within `limit`: the last answer and every node's log tail.
    fn wait_for_jetstream(&self, limit: Duration) -> Result<(), String> {
        let started = Instant::now();
        let placed =
            r#"{"name":"PLACED","subjects":["placed.check"],"num_replicas":3,"storage":"memory"}"#;
        loop {
            let answer = self.request_with("$JS.API.STREAM.CREATE.PLACED", placed);
            if answer.contains("stream_create_response") && !answer.contains("\"error\"") {
                self.request("$JS.API.STREAM.DELETE.PLACED");
                return Ok(());
            }
            if started.elapsed() >= limit {
                let logs: Vec<String> = self
                    .nodes
                    .iter()
                    .map(|n| format!("--- {}:\n{}", n.url(), n.log_tail(60)))
                    .collect();
                return Err(format!(
                    "no JetStream meta leader in {limit:?}: {answer}\n{}",
                    logs.join("\n")
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}
