//! What the script does to a world and reads from outside its pods: the nodes' monitoring
//! ports, a request through one node alone, the routes and the client port cut, a socket's
//! unacknowledged data as `ss` sees it, a durable's info.

use super::fleet::SYS;
use super::world::{http, World};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

impl World {
    /// A GET on a node's monitoring port: the body, or why not.
    pub fn http(&self, node: usize, path: &str, timeout: Duration) -> Result<String, String> {
        http(&self.switch, &self.nodes[node].ip, path, timeout)
    }

    /// The meta leader, as a node's `/jsz` says.
    pub fn meta_leader(&self) -> Option<String> {
        (0..3).find_map(|i| {
            let body = self.http(i, "/jsz", Duration::from_secs(2)).ok()?;
            let json: serde_json::Value = serde_json::from_str(&body).ok()?;
            json["meta_cluster"]["leader"]
                .as_str()
                .filter(|l| !l.is_empty())
                .map(str::to_string)
        })
    }

    /// The meta leader steps down (the system account's request); a new one is elected.
    pub fn meta_stepdown(&self) -> String {
        self.request(
            &self.urls([0, 1, 2]),
            "$JS.API.META.LEADER.STEPDOWN",
            &SYS,
            "3s",
        )
    }

    /// The subscriptions the server `node` lists for the client named `name`, or None when
    /// it lists no such client.
    pub fn subscriptions_of(&self, node: usize, name: &str) -> Option<Vec<String>> {
        let body = self
            .http(node, "/connz?subs=1&limit=4096", Duration::from_secs(2))
            .ok()?;
        let json: serde_json::Value = serde_json::from_str(&body).ok()?;
        let conn = json["connections"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == name)?;
        Some(
            conn["subscriptions_list"]
                .as_array()
                .map(|s| {
                    s.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        )
    }

    /// How long a node's `/varz` takes to answer (its own work, on whatever CPU it gets).
    pub fn varz_time(&self, node: usize) -> Duration {
        let started = Instant::now();
        let _ = self.http(node, "/varz", Duration::from_secs(3));
        started.elapsed()
    }

    /// A request to the echo service on n1 as the app, through `node` alone (no server it
    /// learns of is tried): the answer, or why not.
    pub fn echo_via(&self, node: usize, timeout: Duration) -> Result<String, String> {
        self.echo_as(node, "chaos-drill", timeout)
    }

    /// The same, the connection named `name`.
    pub fn echo_as(&self, node: usize, name: &str, timeout: Duration) -> Result<String, String> {
        let url = self.nodes[node].url();
        let name = name.to_string();
        self.switch.run(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let client = async_nats::ConnectOptions::new()
                    .user_and_password("app".into(), "app-pw".into())
                    .name(name)
                    .ignore_discovered_servers()
                    .connection_timeout(timeout)
                    .request_timeout(Some(timeout))
                    .connect(url)
                    .await
                    .map_err(|e| e.to_string())?;
                let answer = client
                    .request("chaos.echo", "ping".into())
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(String::from_utf8_lossy(&answer.payload).to_string())
            })
        })
    }

    /// Cuts `node` off from the other nodes (its route port, both ways); its clients still
    /// reach it.
    pub fn partition(&self, node: usize, on: bool) {
        let action = if on { "-A" } else { "-D" };
        self.nodes[node].iptables(
            action,
            &[
                &["INPUT", "-p", "tcp", "--dport", "6222"],
                &["INPUT", "-p", "tcp", "--sport", "6222"],
                &["OUTPUT", "-p", "tcp", "--dport", "6222"],
                &["OUTPUT", "-p", "tcp", "--sport", "6222"],
            ],
        );
    }

    /// `node` is lost to its clients without a word: nothing on its client port gets through
    /// either way (no FIN, no RST). Its routes stay up.
    pub fn lose(&self, node: usize, on: bool) {
        let action = if on { "-A" } else { "-D" };
        self.nodes[node].iptables(
            action,
            &[
                &["INPUT", "-p", "tcp", "--dport", "4222"],
                &["OUTPUT", "-p", "tcp", "--sport", "4222"],
            ],
        );
    }

    /// A TCP connect to `node`'s client port from the node network: answered or not.
    pub fn connects(&self, node: usize, timeout: Duration) -> bool {
        let addr: SocketAddr = format!("{}:4222", self.nodes[node].ip).parse().unwrap();
        self.switch
            .run(move || TcpStream::connect_timeout(&addr, timeout).is_ok())
    }

    /// The pod's ESTABLISHED sockets to port 4222 with data unacknowledged, as `ss` (not
    /// the probe) sees them.
    pub fn unacked_sockets(&self, pod: usize) -> usize {
        let out = self.pods[pod]
            .ns
            .command("ss")
            .args(["-tniH", "state", "established", "( dport = :4222 )"])
            .output()
            .expect("ss (iproute2)");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("unacked:"))
            .count()
    }

    /// The durable's info, as the app asks it.
    pub fn consumer(&self, stream: &str, durable: &str) -> serde_json::Value {
        self.js(&format!("$JS.API.CONSUMER.INFO.{stream}.{durable}"))
    }

    pub fn delete_durable(&self, stream: &str, durable: &str) -> serde_json::Value {
        self.js(&format!("$JS.API.CONSUMER.DELETE.{stream}.{durable}"))
    }
}
