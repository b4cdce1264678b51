//! The topologies operators run beyond one cluster: a hub and a leaf node (the
//! leaf with its own JetStream domain, or without JetStream), and two clusters joined by
//! gateways (a supercluster). Every server runs in the NATS pod's network namespace; the app
//! pod reaches the client ports over a veth pair (10.200.0.1), the servers reach each other on
//! that namespace's loopback (leaf node and gateway ports).

use super::peer::natspeer;
use super::{formed_within_three_starts, link, NatsServer, NetNs, Version};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The NATS pod's address as the app pod sees it.
pub const HOST: &str = "10.200.0.1";

/// What the leaf node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaf {
    /// JetStream with its own domain `leaf` (the usual edge layout).
    Domain,
    /// No JetStream: the leaf only carries the hub's.
    NoJetStream,
}

/// A hub (JetStream domain `hub`, monitoring port 8222) and one leaf node connected to it.
pub struct HubAndLeaf {
    pub nats: Arc<NetNs>,
    pub app: Arc<NetNs>,
    pub hub: NatsServer,
    pub leaf: NatsServer,
    _config: tempfile::TempDir,
}

impl HubAndLeaf {
    /// `remote_extra`: more settings for the leaf's remote, e.g. `deny_imports: [...]`.
    pub fn start(leaf: Leaf, remote_extra: &str) -> HubAndLeaf {
        let nats = Arc::new(NetNs::new());
        let app = Arc::new(NetNs::new());
        link(&nats, &app);
        let dir = tempfile::tempdir().unwrap();
        let hub_conf = dir.path().join("hub.conf");
        std::fs::write(
            &hub_conf,
            "jetstream { domain: hub }\nleafnodes { listen: \"127.0.0.1:7422\" }\nhttp: \"10.200.0.1:8222\"\n",
        )
        .unwrap();
        let leaf_conf = dir.path().join("leaf.conf");
        let js = match leaf {
            Leaf::Domain => "jetstream { domain: leaf }\n",
            Leaf::NoJetStream => "",
        };
        std::fs::write(
            &leaf_conf,
            format!(
                "{js}leafnodes {{ remotes [ {{ url: \"nats-leaf://127.0.0.1:7422\" {remote_extra} }} ] }}\nhttp: \"10.200.0.1:8223\"\n"
            ),
        )
        .unwrap();
        let conf = |p: &std::path::Path| p.to_str().unwrap().to_string();
        let hub = NatsServer::start_with(
            Some(&nats),
            Version::Pinned,
            HOST,
            4222,
            &["-n", "hub", "-c", &conf(&hub_conf)],
        );
        let leaf_conf = conf(&leaf_conf);
        let mut leaf_args = vec!["-n", "leaf", "-c", leaf_conf.as_str()];
        if leaf == Leaf::NoJetStream {
            // After the harness's own -js: the last one wins.
            leaf_args.push("-js=false");
        }
        let leaf_server =
            NatsServer::start_with(Some(&nats), Version::Pinned, HOST, 4223, &leaf_args);
        let topology = HubAndLeaf {
            nats,
            app,
            hub,
            leaf: leaf_server,
            _config: dir,
        };
        topology.wait_for_the_leaf_connection();
        topology
    }

    pub fn hub_url(&self) -> String {
        self.hub.url()
    }

    pub fn leaf_url(&self) -> String {
        self.leaf.url()
    }

    /// The hub's JetStream answers through the leaf node, under its domain: the leaf node is
    /// connected and the mapping is in place.
    pub fn wait_for_the_leaf_connection(&self) {
        let started = Instant::now();
        loop {
            let answer = request(&self.nats, &self.leaf_url(), "$JS.hub.API.INFO");
            if answer.contains("account_info_response") && !answer.contains("\"error\"") {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the hub's JetStream does not answer through the leaf node: {answer}\nleaf log:\n{}",
                self.leaf.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the leaf node (an outage of the pod's server) and starts it again once `during`
    /// has run; waits until it is connected to the hub again.
    pub fn restart_leaf(&mut self, during: impl FnOnce()) {
        self.leaf.stop();
        during();
        self.leaf.resume();
        self.wait_for_the_leaf_connection();
    }
}

/// Two clusters joined by gateways: `A` (client port 4222) and `B` (4223), one server each
/// (`sA`, `sB`), JetStream across both (one meta group), no domain.
pub struct Supercluster {
    pub nats: Arc<NetNs>,
    pub app: Arc<NetNs>,
    pub a: NatsServer,
    pub b: NatsServer,
    _config: tempfile::TempDir,
}

impl Supercluster {
    /// Both servers, once the meta group spanning both clusters has a leader (within 40 s,
    /// else started afresh).
    pub fn start() -> Supercluster {
        let nats = Arc::new(NetNs::new());
        let app = Arc::new(NetNs::new());
        link(&nats, &app);
        formed_within_three_starts(
            "supercluster",
            || Supercluster::servers(&nats, &app),
            |s| s.wait_for_the_meta_leader(Duration::from_secs(40)),
        )
    }

    fn servers(nats: &Arc<NetNs>, app: &Arc<NetNs>) -> Supercluster {
        let dir = tempfile::tempdir().unwrap();
        let gateways = r#"gateways: [ {name: A, url: "nats://127.0.0.1:7222"}, {name: B, url: "nats://127.0.0.1:7223"} ]"#;
        let mut servers = Vec::new();
        for (i, name) in ["A", "B"].into_iter().enumerate() {
            let path = dir.path().join(format!("{name}.conf"));
            // JetStream in a cluster needs routes: a one-server cluster names itself.
            std::fs::write(
                &path,
                format!(
                    "cluster {{ name: {name}, listen: \"127.0.0.1:{r}\", routes: [\"nats://127.0.0.1:{r}\"] }}\ngateway {{ name: {name}, listen: \"127.0.0.1:{g}\", {gateways} }}\n",
                    r = 6222 + i,
                    g = 7222 + i,
                ),
            )
            .unwrap();
            let server_name = format!("s{name}");
            servers.push(NatsServer::start_with(
                Some(nats),
                Version::Pinned,
                HOST,
                4222 + i as u16,
                &["-n", &server_name, "-c", path.to_str().unwrap()],
            ));
        }
        let b = servers.pop().unwrap();
        let a = servers.pop().unwrap();
        Supercluster {
            nats: Arc::clone(nats),
            app: Arc::clone(app),
            a,
            b,
            _config: dir,
        }
    }

    /// The meta group spans both clusters: JetStream answers once it has a leader. Not within
    /// `limit`: the last answer and both servers' log tails.
    fn wait_for_the_meta_leader(&self, limit: Duration) -> Result<(), String> {
        let started = Instant::now();
        loop {
            let answer = request(&self.nats, &self.b.url(), "$JS.API.STREAM.NAMES");
            if answer.contains("stream_names_response") && !answer.contains("\"error\"") {
                return Ok(());
            }
            if started.elapsed() >= limit {
                return Err(format!(
                    "no JetStream meta leader in {limit:?}: {answer}\n--- sA:\n{}\n--- sB:\n{}",
                    self.a.log_tail(60),
                    self.b.log_tail(60)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The cluster `stream` was placed in (its stream info's `cluster.name`).
    pub fn cluster_of(&self, stream: &str) -> String {
        let info = request(
            &self.nats,
            &self.b.url(),
            &format!("$JS.API.STREAM.INFO.{stream}"),
        );
        let json: serde_json::Value = serde_json::from_str(&info).unwrap();
        json["cluster"]["name"]
            .as_str()
            .unwrap_or_else(|| panic!("{stream} has no cluster: {info}"))
            .to_string()
    }
}

/// One raw request (`natspeer request`) from `ns` to `url`: the answer, or natspeer's `fatal`
/// line.
pub fn request(ns: &NetNs, url: &str, subject: &str) -> String {
    let out = ns
        .command(natspeer())
        .args(["request", "-url", url, "-subject", subject])
        .output()
        .expect("run natspeer");
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match text.is_empty() {
        true => String::from_utf8_lossy(&out.stderr).trim().to_string(),
        false => text,
    }
}
