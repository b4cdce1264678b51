//! One world of the chaos drill: a node network (a bridge in a namespace of its own, as a
//! Kubernetes node's), a 3-node nats-server cluster on it (JetStream, a system account, logins
//! through an auth callout service), the publishers the pods consume from, the guard's CronJob,
//! and the fleet (`fleet`), all checked the same way.

use super::cron::{Cron, GuardRun};
use super::fleet::{
    Checker, Place, Pod, PodSpec, APP, FLEET, POISONED, PROBE_APP, RATE_LIMIT_BPS, THROTTLED,
};
use super::{attach, humantime, Timings};
use crate::harness::callout::{self, Callout, Login};
use crate::harness::peer::natspeer;
use crate::harness::service::SocketLb;
use crate::harness::{
    formed_within_three_starts, probe, wait_until, NatsServer, NetNs, Peer, Version,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// A node of the cluster: a namespace of its own on the node network, and its server.
pub struct Node {
    pub name: String,
    pub ip: String,
    pub ns: Arc<NetNs>,
    pub server: NatsServer,
    /// CPU ticks of the node's earlier processes (a restart starts a new one).
    spent: u64,
}

impl Node {
    pub fn url(&self) -> String {
        format!("nats://{}:4222", self.ip)
    }

    pub fn monitor(&self) -> String {
        format!("http://{}:8222", self.ip)
    }

    /// CPU ticks (user and system) of every process this node has been, so far.
    fn cpu_ticks(&self) -> u64 {
        self.spent + self.server.pid().map_or(0, cpu_ticks)
    }

    /// Kills the server (SIGKILL), keeping its CPU time.
    pub fn stop(&mut self) {
        self.spent += self.server.pid().map_or(0, cpu_ticks);
        self.server.stop();
    }

    /// Starts it again, on the same address and store.
    pub fn resume(&mut self) {
        self.server.resume();
    }

    pub(super) fn iptables(&self, action: &str, rules: &[&[&str]]) {
        for rule in rules {
            let mut args = vec![action];
            args.extend_from_slice(rule);
            args.extend(["-j", "DROP"]);
            self.ns.exec("iptables", &args);
        }
    }
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // The fields after the command's closing parenthesis: state is the 3rd field, utime
    // the 14th and stime the 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

/// One world: the node network, the cluster, what runs beside it, and the fleet.
pub struct World {
    pub checker: Checker,
    pub switch: Arc<NetNs>,
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    callout: Option<Callout>,
    /// Logins the callout services before the current one answered.
    logins: Vec<Login>,
    issuer_seed: String,
    guard: Option<Cron>,
    _publishers: Vec<Peer>,
    _echo: Option<Peer>,
    _config: tempfile::TempDir,
    /// natsprobe's world reaches NATS through a Service per node, behind a socket-level load
    /// balancer (dropped after the pods, whose processes are in its cgroup).
    lb: Option<SocketLb>,
}

/// The Service in front of node `i` (`nats-<i>` in a StatefulSet's per-pod Services), on the
/// Service CIDR the probe's `--remote` names.
fn service(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 96, 0, 11 + i as u8], 4222))
}

/// The Service CIDR.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";

/// The node network: 10.250.0.0/16 on a bridge; the node itself (where the kubelet's
/// `tcpSocket` probe comes from, and the publishers run) is 10.250.0.1, servers 10.250.1.N,
/// pods 10.250.2.N.
const NODE_IP: &str = "10.250.0.1";

impl World {
    /// The network, the cluster, the callout service, the streams, the publishers and the
    /// fleet under its kubelets, once every pod's client works.
    pub fn start(checker: Checker, t: &Timings) -> World {
        let switch = Arc::new(NetNs::new());
        switch.ip(&["link", "add", "br0", "type", "bridge"]);
        switch.ip(&["addr", "add", &format!("{NODE_IP}/16"), "dev", "br0"]);
        switch.ip(&["link", "set", "br0", "up"]);
        let config = tempfile::tempdir().unwrap();
        let issuer = nkeys::KeyPair::new_account();
        let ips: Vec<String> = (1..=3).map(|i| format!("10.250.1.{i}")).collect();
        // Each node's namespace on the switch and its configuration, once; its server, with a
        // fresh store, at each start of the cluster.
        let members: Vec<(String, Arc<NetNs>, String)> = (0..3)
            .map(|i| {
                let ns = Arc::new(NetNs::new());
                attach(&switch, &ns, &format!("n{}", i + 1), &ips[i]);
                let routes: Vec<String> = (0..3)
                    .filter(|&j| j != i)
                    .map(|j| format!("\"nats://{}:6222\"", ips[j]))
                    .collect();
                let path = config.path().join(format!("n{}.conf", i + 1));
                std::fs::write(
                    &path,
                    format!(
                        "{}\nhttp: \"{ip}:8222\"\ncluster {{ name: chaos, listen: \"{ip}:6222\", routes: [{}] }}\n",
                        server_config(&issuer),
                        routes.join(", "),
                        ip = ips[i],
                    ),
                )
                .unwrap();
                (format!("n{}", i + 1), ns, path.to_str().unwrap().to_string())
            })
            .collect();
        let start = || -> Vec<Node> {
            members
                .iter()
                .zip(&ips)
                .map(|((name, ns, conf), ip)| Node {
                    name: name.clone(),
                    ip: ip.clone(),
                    ns: Arc::clone(ns),
                    server: NatsServer::start_with(
                        Some(ns),
                        Version::Pinned,
                        ip,
                        4222,
                        &["-n", name, "-c", conf],
                    ),
                    spent: 0,
                })
                .collect()
        };
        let nodes = formed_within_three_starts("the world's cluster", start, |nodes| {
            jetstream_formed(&switch, nodes, Duration::from_secs(30))
        });
        let seed = issuer.seed().unwrap();
        let all: Vec<String> = nodes.iter().map(Node::url).collect();
        let callout = Callout::start_in_cluster(&switch, &all.join(","), &seed);
        let mut world = World {
            checker,
            switch,
            nodes,
            pods: Vec::new(),
            callout: Some(callout),
            logins: Vec::new(),
            issuer_seed: seed,
            guard: None,
            _publishers: Vec::new(),
            _echo: None,
            _config: config,
            lb: None,
        };
        if checker.is_natsprobe() {
            let services: Vec<(SocketAddr, SocketAddr)> = world
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (service(i), SocketAddr::new(n.ip.parse().unwrap(), 4222)))
                .collect();
            world.lb = Some(SocketLb::of(&services));
        }
        world.streams(t);
        let n1_first = world.urls([0, 1, 2]);
        world._publishers = [("orders.x", "10"), ("capped.x", "10"), ("work.x", "6")]
            .iter()
            .map(|(subject, rate)| {
                let mut p = world.infra(&[
                    "publish",
                    "-url",
                    &n1_first,
                    "-no-randomize",
                    "-subject",
                    subject,
                    "-rate",
                    rate,
                    "-max-reconnects",
                    "-1",
                    "-reconnect-wait",
                    "100ms",
                    "-retry-on-failed-connect",
                ]);
                p.wait_for("ready", Duration::from_secs(15));
                p
            })
            .collect();
        let mut echo = world.infra(&[
            "conn",
            "-url",
            &n1_first,
            "-no-randomize",
            "-subscribe",
            "chaos.echo",
            "-echo",
            "-max-reconnects",
            "-1",
            "-reconnect-wait",
            "100ms",
            "-retry-on-failed-connect",
        ]);
        echo.wait_for("ready", Duration::from_secs(15));
        world._echo = Some(echo);
        for (i, spec) in FLEET.iter().enumerate() {
            let place = Place {
                node: &world.switch,
                urls: match &world.lb {
                    Some(_) => world.service_urls(spec.pool),
                    None => world.urls(spec.pool),
                },
                monitor: world.nodes[spec.pool[0]].monitor(),
                lb: world.lb.as_ref().map(SocketLb::procs),
            };
            let pod = Pod::start(*spec, i, checker, place, t);
            world.pods.push(pod);
        }
        for pod in &world.pods {
            let what = format!("{} ({}) working", pod.spec.name, checker.name());
            wait_until(&what, Duration::from_secs(60), || {
                pod.kubelet
                    .with_runs(|runs| runs.last().unwrap().saw(pod.spec.working_line()))
            });
        }
        if world.lb.is_some() {
            // Through the Services: each pod's connection is held as its node's address, and
            // natsprobe counts it for the Service it stands for.
            for pod in &world.pods {
                let what = format!(
                    "{}'s probe counting its connection for a Service",
                    pod.spec.name
                );
                wait_until(&what, Duration::from_secs(30), || {
                    pod.kubelet
                        .probed()
                        .iter()
                        .rev()
                        .take(1)
                        .any(|(_, passed, line)| *passed && line.contains(":4222 for 10.96.0.1"))
                });
            }
        }
        world
    }

    /// A natspeer in the node's own namespace, as the app user: publishers and the echo.
    fn infra(&self, args: &[&str]) -> Peer {
        let mut all = args.to_vec();
        all.extend(APP);
        Peer::spawn(Some(&self.switch), &all)
    }

    /// The pool of URLs in this order, as the clients and the probe take it.
    pub fn urls(&self, pool: [usize; 3]) -> String {
        pool.iter()
            .map(|&i| self.nodes[i].url())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The same pool through the nodes' Services.
    pub fn service_urls(&self, pool: [usize; 3]) -> String {
        pool.iter()
            .map(|&i| format!("nats://{}", service(i)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// One request through the cluster (natspeer's `request`): the answer, or its `fatal` line.
    pub fn request(&self, url: &str, subject: &str, auth: &[&str], timeout: &str) -> String {
        let out = self
            .switch
            .command(natspeer())
            .args([
                "request", "-url", url, "-subject", subject, "-timeout", timeout,
            ])
            .args(auth)
            .output()
            .expect("run natspeer");
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        match text.is_empty() {
            true => String::from_utf8_lossy(&out.stderr).trim().to_string(),
            false => text,
        }
    }

    /// A JetStream API request as the app, through every node.
    pub fn js(&self, subject: &str) -> serde_json::Value {
        let answer = self.request(&self.urls([0, 1, 2]), subject, &APP, "2s");
        serde_json::from_str(&answer).unwrap_or(serde_json::json!({ "fatal": answer }))
    }

    /// `natspeer setup ARGS` on the node, asked again (a few times) while a cluster that just
    /// formed does not answer in time.
    fn setup(&self, args: &[&str]) {
        let mut last = String::new();
        for _ in 0..4 {
            let out = self
                .switch
                .command(natspeer())
                .arg("setup")
                .args(args)
                .output()
                .expect("run natspeer");
            if out.status.success() {
                return;
            }
            last = String::from_utf8_lossy(&out.stdout).to_string();
            std::thread::sleep(Duration::from_secs(1));
        }
        panic!("natspeer setup {args:?} failed:\n{last}");
    }

    fn streams(&self, t: &Timings) {
        let url = self.urls([0, 1, 2]);
        let ack_wait = humantime(t.ack_wait);
        for (stream, subjects, extra) in [
            ("ORDERS", "orders.>", &[][..]),
            (
                "CAPPED",
                "capped.>",
                &["-max-msgs", "30", "-discard", "old"][..],
            ),
            ("WORK", "work.>", &[][..]),
            (THROTTLED, "bulk.>", &[][..]),
            (POISONED, "poison.>", &[][..]),
        ] {
            let mut args = vec![
                "-url",
                url.as_str(),
                "-stream",
                stream,
                "-subjects",
                subjects,
                "-replicas",
                "3",
            ];
            args.extend_from_slice(extra);
            args.extend(APP);
            self.setup(&args);
        }
        // The durables, as their clients make them (`consume -create`), before any starts.
        for spec in FLEET {
            let Some((stream, durable)) = spec.durable() else {
                continue;
            };
            let subject = format!("deliver.{durable}");
            let mut args = vec![
                "-url",
                url.as_str(),
                "-stream",
                stream,
                "-durable",
                durable,
                "-deliver-subject",
                &subject,
                "-deliver-group",
                durable,
                "-deliver-policy",
                "new",
                "-ack-wait",
                &ack_wait,
                "-max-ack-pending",
                "1",
            ];
            if stream == THROTTLED {
                args.extend(["-rate-limit", RATE_LIMIT_BPS]);
            }
            args.extend(APP);
            self.setup(&args);
        }
        // Work the throttled and the poisoned consumers' pods ack before their faults (the
        // rate's burst takes it), held by the durables until their pods bind.
        for subject in ["bulk.x", "poison.x"] {
            let published = self.publish(subject, "2", "64");
            assert!(
                published.wait_exit(Duration::from_secs(30)).success(),
                "publishing to {subject} failed"
            );
        }
    }

    /// `count` messages of `size` bytes to `subject` from the node, as fast as JetStream
    /// acknowledges them.
    pub fn publish(&self, subject: &str, count: &str, size: &str) -> Peer {
        let url = self.urls([0, 1, 2]);
        self.infra(&[
            "publish", "-url", &url, "-subject", subject, "-count", count, "-size", size, "-rate",
            "0", "-js",
        ])
    }

    /// Keeps `publisher` running beside the publishers: the script does not wait for it.
    pub fn aside(&mut self, publisher: Peer) {
        self._publishers.push(publisher);
    }

    /// What one run of `pod`'s probe that asks NATS costs the servers (`Pod::session_cost`).
    pub fn session_cost(&self, pod: usize, runs: u32) -> Duration {
        self.pods[pod].session_cost(|| self.cpu_ticks(), runs)
    }

    /// CPU ticks of the three servers so far, every process each node has been.
    pub fn cpu_ticks(&self) -> u64 {
        self.nodes.iter().map(Node::cpu_ticks).sum()
    }

    /// The pods whose client is on `node` now (each says where it connected).
    pub fn pods_on(&self, node: &str) -> Vec<usize> {
        (0..self.pods.len())
            .filter(|&i| self.pods[i].server().as_deref() == Some(node))
            .collect()
    }

    /// The auth callout service goes down; its logins wait for it in vain.
    pub fn stop_callout(&mut self) {
        if let Some(c) = self.callout.take() {
            self.logins.extend(c.logins.lock().unwrap().iter().cloned());
            c.stop();
        }
    }

    /// The auth service answers the probes' logins by `pattern`, each pod's in turn (None:
    /// as usual again). The guard's are answered as usual.
    pub fn flaky(&self, pattern: Option<&[callout::Answer]>) {
        if let Some(c) = &self.callout {
            c.flaky(pattern.map(|p| callout::Flaky {
                prefix: "natsprobe-",
                except: "natsprobe-guard",
                pattern: p.to_vec(),
            }));
        }
    }

    /// Every login the callout services answered so far.
    pub fn logins(&self) -> Vec<Login> {
        let mut all = self.logins.clone();
        if let Some(c) = &self.callout {
            all.extend(c.logins.lock().unwrap().iter().cloned());
        }
        all
    }

    /// Runs the guard as a CronJob would, every `every`, until `stop_guard`.
    pub fn start_guard(&mut self, t: &Timings) {
        let durables: Vec<String> = FLEET
            .iter()
            .filter_map(PodSpec::durable)
            .map(|(s, d)| format!("{s}/{d}"))
            .collect();
        let args: Vec<String> = [
            "guard",
            "--server",
            &self.urls([0, 1, 2]),
            "--interval",
            &humantime(t.guard_interval),
            "--expect",
            &durables.join(","),
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(PROBE_APP.iter().map(|s| s.to_string()))
        .collect();
        let switch = Arc::clone(&self.switch);
        self.guard = Some(Cron::start(t.guard_every, move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let run = probe(&args).ns(&switch).run();
            // The table, then the summary line.
            let last = run.stdout.lines().rev().find(|l| !l.trim().is_empty());
            (run.code, last.unwrap_or(run.line()).to_string())
        }));
    }

    /// Stops the guard's CronJob; its runs: when each began and ended, its exit, its line.
    pub fn stop_guard(&mut self) -> Vec<GuardRun> {
        self.guard.take().map(Cron::stop).unwrap_or_default()
    }

    pub fn start_callout(&mut self) {
        let urls = self.urls([0, 1, 2]);
        self.callout = Some(Callout::start_in_cluster(
            &self.switch,
            &urls,
            &self.issuer_seed,
        ));
    }

    /// Stops the kubelets (no more probes or restarts).
    pub fn stop_kubelets(&mut self) {
        for pod in &mut self.pods {
            pod.kubelet.stop();
            if let Some(sidecar) = &mut pod.sidecar {
                sidecar.stop();
            }
        }
    }
}

/// Every world's server configuration but the node's own lines: the accounts, the system
/// account (with a user, for the meta leader's stepdown), and logins through the callout.
fn server_config(issuer: &nkeys::KeyPair) -> String {
    callout::server_config(issuer)
        // Time for a late answer of the auth service to be one, rather than a refusal.
        .replace("timeout: 0.5", "timeout: 1.5")
        .replace(
            "SYS: {}",
            "SYS: { users: [ { user: sys, password: sys-pw } ] }",
        )
        .replace("auth_users: [ auth ]", "auth_users: [ auth, sys ]")
}

/// A meta leader with both others current, within `limit`: a stream of three replicas can be
/// placed. Not: the last `/jsz` meta groups seen and every node's log tail.
fn jetstream_formed(switch: &NetNs, nodes: &[Node], limit: Duration) -> Result<(), String> {
    let started = std::time::Instant::now();
    loop {
        let mut seen = Vec::new();
        for node in nodes {
            let body = http(switch, &node.ip, "/jsz", Duration::from_secs(1));
            let json: serde_json::Value = body
                .as_deref()
                .ok()
                .and_then(|b| serde_json::from_str(b).ok())
                .unwrap_or_default();
            let meta = &json["meta_cluster"];
            let current = meta["replicas"]
                .as_array()
                .map_or(0, |r| r.iter().filter(|p| p["current"] == true).count());
            if meta["leader"] == node.name.as_str() && current == 2 {
                return Ok(());
            }
            seen.push(format!(
                "{}: {}",
                node.name,
                body.map_or_else(|e| e, |_| meta.to_string())
            ));
        }
        if started.elapsed() >= limit {
            let logs: Vec<String> = nodes
                .iter()
                .map(|n| format!("--- {}:\n{}", n.name, n.server.log_tail(60)))
                .collect();
            return Err(format!(
                "no JetStream meta leader with both followers current in {limit:?}: {}\n{}",
                seen.join("; "),
                logs.join("\n")
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A GET from the node network on the monitoring port of the server at `ip`: the body, or why
/// not.
pub(super) fn http(
    switch: &NetNs,
    ip: &str,
    path: &str,
    timeout: Duration,
) -> Result<String, String> {
    let addr: SocketAddr = format!("{ip}:8222").parse().unwrap();
    let path = path.to_string();
    switch.run(move || {
        let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: n\r\n\r\n").map_err(|e| e.to_string())?;
        let mut text = String::new();
        s.read_to_string(&mut text).map_err(|e| e.to_string())?;
        Ok(text
            .split_once("\r\n\r\n")
            .map_or(text.clone(), |(_, b)| b.to_string()))
    })
}
