//! Half-open connections: the NATS node is gone without a FIN or RST (power loss, a
//! partition). The client's socket stays ESTABLISHED; the kernel's retransmissions say the
//! peer is gone long before nats.go's pings do.

use crate::harness::probe::Run;
use crate::harness::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

const S10: Duration = Duration::from_secs(10);

/// The client's pod and a NATS node, joined like two nodes of a cluster network: the client
/// at 10.N.0.2, the server at 10.N.0.1:4222.
struct Nodes {
    client: Arc<NetNs>,
    server_ns: Arc<NetNs>,
    server: NatsServer,
    dev: String,
}

impl Nodes {
    fn new(subnet: u8) -> Nodes {
        let client = Arc::new(NetNs::new());
        let server_ns = Arc::new(NetNs::new());
        let (server_ip, _) = link_subnet(&server_ns, &client, subnet);
        let server = NatsServer::start(Some(&server_ns), Version::Pinned, &server_ip, 4222);
        Nodes {
            client,
            server_ns,
            server,
            dev: format!("veth{subnet}"),
        }
    }

    /// The node is lost: from now on nothing it sends or receives gets through, and no FIN or
    /// RST ever reaches the client.
    fn lose_the_node(&self) {
        for chain in [["-A", "INPUT", "-i"], ["-A", "OUTPUT", "-o"]] {
            let mut args = chain.to_vec();
            args.extend([self.dev.as_str(), "-j", "DROP"]);
            self.server_ns.exec("iptables", &args);
        }
    }

    /// The path heals.
    fn heal(&self) {
        for chain in [["-D", "INPUT", "-i"], ["-D", "OUTPUT", "-o"]] {
            let mut args = chain.to_vec();
            args.extend([self.dev.as_str(), "-j", "DROP"]);
            self.server_ns.exec("iptables", &args);
        }
    }

    /// The client's ESTABLISHED sockets to port 4222, as `ss` (not the probe) sees them.
    fn established(&self) -> Vec<String> {
        let out = self
            .client
            .command("ss")
            .args(["-tnH", "state", "established", "( dport = :4222 )"])
            .output()
            .expect("ss (iproute2)");
        assert!(out.status.success(), "ss: {out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// The probe's JSON, once the probe reports a half-open connection (panics after `limit`).
fn until_half_open(ns: &NetNs, extra: &[&str], limit: Duration) -> (Run, Instant) {
    let deadline = Instant::now() + limit;
    loop {
        let mut args = vec!["--json", "-v", "--half-open-after", "2s"];
        args.extend_from_slice(extra);
        let run = probe(&args).ns(ns).run();
        let json = run.json();
        if json["connection"]["half_open"]
            .as_array()
            .is_some_and(|h| !h.is_empty())
        {
            return (run, Instant::now());
        }
        assert!(
            Instant::now() < deadline,
            "not half-open after {limit:?}\n{run}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The node under a publishing client is lost. The socket stays ESTABLISHED and nats.go
/// notices nothing (its pings are minutes apart); the kernel retransmits into the void. Once
/// `--half-open-after` has passed the probe calls the connection half-open: with another node
/// answering `--server`, a restart helps (exit 1); with nothing answering, it would not
/// (exit 0). When the path heals, the next run passes.
#[test]
fn a_node_lost_without_a_word_leaves_a_half_open_connection() {
    let nodes = Nodes::new(211);
    // A second node the Service could resolve to, alive.
    let live_ns = Arc::new(NetNs::new());
    let (live_ip, _) = link_subnet(&live_ns, &nodes.client, 212);
    let live = NatsServer::start(Some(&live_ns), Version::Pinned, &live_ip, 4222);
    let (lost_url, live_url) = (nodes.server.url(), live.url());
    let mut publisher = Peer::spawn(
        Some(&nodes.client),
        &[
            "publish", "-url", &lost_url, "-subject", "work", "-rate", "5",
        ],
    );
    publisher.wait_for("connected", S10);
    let ns = &nodes.client;
    probe(&["--server", &live_url])
        .ns(ns)
        .run()
        .expect(0)
        .says(&["healthy: 1 ESTABLISHED TCP connection to remote port 4222"]);

    nodes.lose_the_node();
    let lost = Instant::now();
    let (run, seen) = until_half_open(ns, &[], S10 * 2);
    run.expect(1);
    let json = run.json();
    let summary = json["summary"].as_str().unwrap();
    for part in [
        "connection to 10.211.0.1:4222 is half-open: ",
        " unacknowledged for ",
        "; no other ESTABLISHED TCP connection to remote port 4222",
    ] {
        assert!(summary.contains(part), "{part}\n{run}");
    }
    let half = &json["connection"]["half_open"][0];
    assert_eq!(half["remote"], "10.211.0.1:4222", "{run}");
    assert!(half["unacked_for_ms"].as_u64().unwrap() >= 2000, "{run}");
    assert!(half["retransmits"].as_u64().unwrap() >= 1, "{run}");
    assert!(half["unacked_bytes"].as_u64().unwrap() > 0, "{run}");
    assert!(
        seen - lost >= Duration::from_secs(2),
        "called half-open before the window"
    );
    assert_eq!(json["connection"]["established"], 1, "{run}");
    assert_eq!(json["connection"]["live"], 0, "{run}");
    let tcp = &json["connection"]["sockets"][0]["tcp"];
    assert!(tcp["last_ack_recv_ms"].as_u64().unwrap() >= 2000, "{run}");
    // Still ESTABLISHED to the kernel, and the client has not noticed.
    let established = nodes.established();
    assert_eq!(established.len(), 1, "ss: {established:?}");
    // So the socket-only probes pass: the grep one-liner reads the same table.
    assert_eq!(
        crate::alternatives::grep(&nodes.client),
        0,
        "grep passes a dead connection"
    );
    assert!(!publisher.saw("disconnected"), "{}", publisher.output());

    // The Service resolves to a live node: a restart reconnects there.
    probe(&["--half-open-after", "2s", "--server", &live_url])
        .ns(ns)
        .run()
        .expect(1)
        .says(&[
            "unhealthy: connection to 10.211.0.1:4222 is half-open: ",
            &format!("; {live_url} answers (nats-server 2.10.26)"),
        ]);
    // Nothing answers (the only address is the lost node): a restart would not help.
    probe(&["--half-open-after", "2s", "--server", &lost_url])
        .ns(ns)
        .run()
        .expect(0)
        .says(&[
            "healthy: connection to 10.211.0.1:4222 is half-open: ",
            &format!(", but {lost_url} is not answering (restart would not help): no answer"),
        ]);
    // Not looked at: the socket counts, as before.
    probe(&["--half-open-after", "off"])
        .ns(ns)
        .run()
        .expect(0)
        .says(&["healthy: 1 ESTABLISHED"]);
    // /proc has no ACK times, only the retransmission timeouts: the same lower bound.
    let (run, _) = until_half_open(ns, &["--reader", "proc"], S10);
    run.expect(1);
    assert_eq!(run.json()["connection"]["reader"], "proc", "{run}");
    assert!(
        run.json()["connection"]["sockets"][0]["tcp"]["last_ack_recv_ms"].is_null(),
        "{run}"
    );

    // The path heals: the next retransmission is acknowledged, and the next run passes.
    nodes.heal();
    wait_until("the healed connection to pass", S10 * 3, || {
        probe(&["--half-open-after", "2s", "--server", &live_url])
            .ns(ns)
            .run()
            .code
            == Some(0)
    });
    probe(&["--json", "--half-open-after", "2s"])
        .ns(ns)
        .run()
        .expect(0);
    assert!(!publisher.saw("disconnected"), "{}", publisher.output());
}

/// The connection a healthy run counted goes half-open: the next runs find it by the exact
/// lookup, unchanged, and judge its `tcp_info` as a walk does: not live, so they walk, and the
/// walk says unhealthy.
#[test]
fn a_remembered_connection_gone_half_open_is_walked() {
    let nodes = Nodes::new(214);
    let url = nodes.server.url();
    let mut publisher = Peer::spawn(
        Some(&nodes.client),
        &["publish", "-url", &url, "-subject", "work", "-rate", "5"],
    );
    publisher.wait_for("connected", S10);
    let ns = &nodes.client;
    let half_open = ["--json", "--half-open-after", "2s"];
    probe(&half_open).ns(ns).run().expect(0);
    let run = probe(&half_open).ns(ns).run();
    run.expect(0);
    assert_eq!(run.json()["connection"]["lookup"], "exact", "{run}");

    nodes.lose_the_node();
    let (run, _) = until_half_open(ns, &[], S10 * 2);
    run.expect(1);
    let c = &run.json()["connection"];
    assert_eq!(
        (&c["lookup"], &c["remembered"], &c["unchanged"]),
        (&"walk".into(), &1.into(), &0.into()),
        "{run}"
    );
    assert_eq!(c["established"], 1, "{run}");
    assert_eq!(c["live"], 0, "{run}");
    // Still ESTABLISHED to the kernel: only its tcp_info says the peer is gone.
    assert_eq!(nodes.established().len(), 1);
}

/// Hours of quiet look, to the kernel, like no ACK for hours: but nothing is unacknowledged,
/// so a quiet connection is never half-open. An idle client (no publishes, no subscriptions
/// with traffic) watched over several windows stays healthy.
#[test]
fn an_idle_connection_is_never_half_open() {
    let nodes = Nodes::new(213);
    let _idle = Peer::conn(Some(&nodes.client), &nodes.server.url(), 60, "2s");
    // The server's first PING comes about 2s after connecting; then nothing for 2 minutes.
    std::thread::sleep(Duration::from_secs(3));
    let started = Instant::now();
    let mut quiet_for = 0;
    while started.elapsed() < Duration::from_secs(6) {
        let run = probe(&["--json", "-v", "--half-open-after", "1s"])
            .ns(&nodes.client)
            .run();
        run.expect(0);
        let json = run.json();
        assert_eq!(json["connection"]["live"], 1, "{run}");
        assert_eq!(
            json["connection"]["half_open"],
            serde_json::json!([]),
            "{run}"
        );
        let tcp = &json["connection"]["sockets"][0]["tcp"];
        assert_eq!(tcp["unacked_bytes"], 0, "{run}");
        quiet_for = tcp["last_ack_recv_ms"].as_u64().unwrap();
        std::thread::sleep(Duration::from_millis(400));
    }
    // Several windows without a single ACK, and still live.
    assert!(
        quiet_for >= 4000,
        "the connection was not quiet: {quiet_for}ms"
    );
}
