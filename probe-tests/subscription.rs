//! `check --own-subscription` and `--subscription`: which replica went deaf. Two replicas (two
//! network namespaces, like two pods) in one deliver group; one drops its subscription and keeps
//! its connection: its check fails, the other's passes, and the consumer stays bound throughout.
//! The same on a 3-node cluster with the replicas on different servers; a core subscription;
//! `/connz` with more than one page; a server with 2,000 other connections; NAT.

use crate::harness::cluster::Cluster;
use crate::harness::pods::S10;
use crate::harness::probe::Run;
use crate::harness::*;
use std::sync::Arc;
use std::time::Duration;

/// NATS in one namespace, two app pods linked to it on subnets 10.201 and 10.202.
pub(crate) struct Replicas {
    pub(crate) nats: Arc<NetNs>,
    pub(crate) pods: [Arc<NetNs>; 2],
    /// The NATS pod's address as each app pod reaches it.
    pub(crate) gateways: [String; 2],
    pub(crate) state: tempfile::TempDir,
}

impl Replicas {
    pub(crate) fn new() -> Replicas {
        let nats = Arc::new(NetNs::new());
        let pods = [Arc::new(NetNs::new()), Arc::new(NetNs::new())];
        let (g0, _) = link_subnet(&nats, &pods[0], 201);
        let (g1, _) = link_subnet(&nats, &pods[1], 202);
        Replicas {
            nats,
            pods,
            gateways: [g0, g1],
            state: tempfile::tempdir().unwrap(),
        }
    }

    /// Stream `S` (`s.>`, `replicas` copies) and its push consumer `S/D` delivering to
    /// `deliver.D` in deliver group `D`, `ack_wait` 1 s, made from pod 0 through `url`.
    pub(crate) fn deliver_group(&self, url: &str, replicas: &str) {
        Peer::setup(
            Some(&self.pods[0]),
            &[
                "-url",
                url,
                "-stream",
                "S",
                "-subjects",
                "s.>",
                "-replicas",
                replicas,
                "-durable",
                "D",
                "-deliver-subject",
                "deliver.D",
                "-deliver-group",
                "D",
                "-ack-wait",
                "1s",
            ],
        );
    }

    /// `natsprobe check ARGS` in pod `i`, its own state dir.
    pub(crate) fn check(&self, i: usize, args: &[&str]) -> Run {
        let state = self.state.path().join(i.to_string());
        let state = state.to_string_lossy().to_string();
        let mut all = vec!["check", "--state-dir", state.as_str()];
        all.extend_from_slice(args);
        probe(&all).ns(&self.pods[i]).run()
    }

    /// The same, with the probe's own `--sample-every` and `--subscription-every` defaults.
    pub(crate) fn check_with_defaults(&self, i: usize, args: &[&str]) -> Run {
        let state = self.state.path().join(i.to_string());
        let state = state.to_string_lossy().to_string();
        let mut all = vec!["check", "--state-dir", state.as_str()];
        all.extend_from_slice(args);
        probe(&all).ns(&self.pods[i]).sampling_defaults().run()
    }
}

fn consume(ns: &NetNs, url: &str) -> Peer {
    let mut p = Peer::spawn(
        Some(ns),
        &[
            "consume",
            "-url",
            url,
            "-deliver-subject",
            "deliver.D",
            "-deliver-group",
            "D",
        ],
    );
    p.wait_for("ready", S10);
    p
}

fn push_bound(run: &Run) -> bool {
    run.json()["consumers"][0]["facts"]["push_bound"] == true
}

/// Two replicas of a deliver group, one deaf: the consumer stays bound, and each pod's own
/// check tells which one it is.
#[test]
fn the_deaf_replica_of_a_deliver_group() {
    let r = Replicas::new();
    let _server = NatsServer::start(Some(&r.nats), Version::Pinned, "0.0.0.0", 4222);
    let urls: Vec<String> = r
        .gateways
        .iter()
        .map(|g| format!("nats://{g}:4222"))
        .collect();
    r.deliver_group(&urls[0], "1");
    let mut deaf = consume(&r.pods[0], &urls[0]);
    let _live = consume(&r.pods[1], &urls[1]);
    let args = |i: usize| {
        vec![
            "--server".to_string(),
            urls[i].clone(),
            "--consumer".into(),
            "S/D".into(),
            "--own-subscription".into(),
        ]
    };
    let run = |i: usize, extra: &[&str]| {
        let mut a = args(i);
        a.extend(extra.iter().map(|s| s.to_string()));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        r.check(i, &a)
    };
    for i in 0..2 {
        run(i, &[])
            .expect(0)
            .says(&["subscription deliver.D in queue group D (consumer S/D) held ("]);
    }
    deaf.signal(libc::SIGHUP);
    deaf.wait_for("unsubscribed", S10);
    let failed = run(0, &[]);
    failed.expect(1).says(&[
        "unhealthy: subscription deliver.D in queue group D (consumer S/D): this pod's connection 10.201.0.2:",
        "holds no such subscription",
    ]);
    run(1, &[])
        .expect(0)
        .says(&["(consumer S/D) held (10.202.0.2:"]);
    // The server still sees the group bound: the other replica holds it.
    let json = run(0, &["--json"]);
    assert!(push_bound(&json), "push_bound stays true\n{json}");
    assert_eq!(
        json.json()["subscriptions"][0]["outcome"],
        "not_by_this_connection"
    );
    assert!(push_bound(&run(1, &["--json"])));
    // Without --own-subscription the deaf pod passes: this is what nothing else sees.
    r.check(0, &["--server", &urls[0], "--consumer", "S/D"])
        .expect(0);
}

/// A deaf replica seen, then a server that answers no run in time (stopped): each run that
/// cannot look reports the fault the last look saw, while that look is younger than the
/// window; past it, not judged; and the next look sees the fault again. Before, the runs that
/// could not look passed, and so started the kubelet's count over.
#[test]
fn a_deaf_replica_once_seen_is_reported_while_the_server_is_late() {
    let _serial = timing_lock();
    let r = Replicas::new();
    let server = NatsServer::start(Some(&r.nats), Version::Pinned, "0.0.0.0", 4222);
    let url = format!("nats://{}:4222", r.gateways[0]);
    r.deliver_group(&url, "1");
    let mut deaf = consume(&r.pods[0], &url);
    let _live = consume(&r.pods[1], &format!("nats://{}:4222", r.gateways[1]));
    let check_with = |extra: &[&str]| {
        let mut args = vec![
            "--server",
            url.as_str(),
            "--consumer",
            "S/D",
            "--own-subscription",
            "--stall-after",
            "4s",
            "--timeout",
            "800ms",
        ];
        args.extend_from_slice(extra);
        r.check(0, &args)
    };
    let check = || check_with(&[]);
    check().expect(0);
    deaf.signal(libc::SIGHUP);
    deaf.wait_for("unsubscribed", S10);
    check().expect(1).says(&[
        "this pod's connection 10.201.0.2:",
        "holds no such subscription",
    ]);
    let seen = std::time::Instant::now();
    let pid = server.pid().expect("the server's pid") as i32;
    // SAFETY: kill(2) on this test's own child; continued below, and by the guard on a panic.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    struct Continue(i32);
    impl Drop for Continue {
        fn drop(&mut self) {
            // SAFETY: as above.
            unsafe { libc::kill(self.0, libc::SIGCONT) };
        }
    }
    let resumed = Continue(pid);
    let late = check();
    late.expect(1).says(&[
        "holds no such subscription; this run could not look: ",
        ", last look ",
    ]);
    let json = check_with(&["--json"]);
    json.expect(1);
    let carried = &json.json()["subscriptions"][0]["carried"];
    assert!(carried["last_look_ago_ms"].as_u64().is_some(), "{json}");
    // Past the window: the look is stale, and a run that cannot look makes no fault.
    std::thread::sleep(
        Duration::from_secs(4).saturating_sub(seen.elapsed()) + Duration::from_millis(300),
    );
    check().expect(0).says(&["not judged"]);
    drop(resumed);
    check().expect(1).says(&["holds no such subscription"]);
}

/// A process pinned to one CPU and kept busy there: whatever shares that CPU at a lower
/// priority runs slowly. Stopped when dropped.
struct BusyCpu(std::process::Child);

impl BusyCpu {
    fn pin(cpu: &str, pid: u32) -> BusyCpu {
        let ok = |c: &mut std::process::Command| c.status().unwrap().success();
        // Every thread: affinity and niceness are a thread's.
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
        for task in tasks {
            let tid = task.unwrap().file_name().to_string_lossy().to_string();
            assert!(ok(std::process::Command::new("taskset")
                .args(["-pc", cpu, &tid])
                .stdout(std::process::Stdio::null())));
            assert!(ok(std::process::Command::new("renice")
                .args(["-n", "19", "-p", &tid])
                .stdout(std::process::Stdio::null())));
        }
        let busy = std::process::Command::new("taskset")
            .args(["-c", cpu, "sh", "-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        BusyCpu(busy)
    }
}

impl Drop for BusyCpu {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server holding this pod's connection answers long after the others (it walks its
/// 2,000 connections on a CPU it gets a sliver of, as a throttled server does). Taking its
/// silence for absence called this healthy pod unhealthy ("the server lists no connection
/// from ..."), as a fleet benchmark on a loaded 3-node cluster did 2 runs in 100. Its answer
/// is waited for when the account's STATZ names it in time; else the pod is not judged.
#[test]
fn a_slow_server_is_no_evidence_of_absence() {
    let _serial = timing_lock();
    let r = Replicas::new();
    let cluster = Cluster::start(&r.nats, Version::Pinned, "0.0.0.0");
    let mut others = Peer::spawn(
        Some(&r.nats),
        &[
            "many",
            "-url",
            "nats://127.0.0.1:4222",
            "-n",
            "2000",
            "-subscribe",
            "idle",
        ],
    );
    others.wait_for("ready", Duration::from_secs(60));
    let n1 = format!("nats://{}:4222", r.gateways[0]);
    let mut app = Peer::spawn(
        Some(&r.pods[0]),
        &["conn", "-url", &n1, "-subscribe", "journal.>"],
    );
    app.wait_for("ready", S10);
    let _slow = BusyCpu::pin("1", cluster.nodes[0].pid().unwrap());
    let n2 = format!("nats://{}:4223", r.gateways[0]);
    for _ in 0..3 {
        // A first run every time: matched by address in the whole report.
        let state = tempfile::tempdir().unwrap();
        let state = state.path().to_string_lossy().to_string();
        let run = probe(&[
            "check",
            "--server",
            &n2,
            "--port",
            "4222",
            "--subscription",
            "journal.>",
            "--state-dir",
            &state,
            "--timeout",
            "5s",
            "-v",
        ])
        .ns(&r.pods[0])
        .run();
        run.expect(0);
        let line = run.stdout.lines().next().unwrap_or_default();
        // Held; or not judged: not listed, or (on a loaded machine) no answer in time. Never
        // absent: exit 0 above.
        assert!(
            line.contains("subscription journal.> held (10.201.0.2:")
                || line.contains("subscription journal.> not judged: "),
            "{run}"
        );
    }
    drop(cluster);
}

/// The same on a 3-node cluster, the replicas connected to different servers: every server
/// answers the account's connection report for its own connections.
#[test]
fn the_deaf_replica_on_a_cluster() {
    let r = Replicas::new();
    let cluster = Cluster::start(&r.nats, Version::Pinned, "0.0.0.0");
    let node = |i: usize, port: u16| format!("nats://{}:{port}", r.gateways[i]);
    let all = |i: usize| {
        (4222..4225)
            .map(|p| node(i, p))
            .collect::<Vec<_>>()
            .join(",")
    };
    r.deliver_group(&node(0, 4222), "3");
    let mut deaf = consume(&r.pods[0], &node(0, 4222));
    let _live = consume(&r.pods[1], &node(1, 4223));
    let check = |i: usize| {
        let servers = all(i);
        r.check(
            i,
            &[
                "--server",
                &servers,
                "--consumer",
                "S/D",
                "--own-subscription",
                "--timeout",
                "2s",
            ],
        )
    };
    check(0).expect(0).says(&["(consumer S/D) held"]);
    check(1).expect(0).says(&["(consumer S/D) held"]);
    deaf.signal(libc::SIGHUP);
    deaf.wait_for("unsubscribed", S10);
    check(0).expect(1).says(&[
        "this pod's connection 10.201.0.2:",
        "holds no such subscription",
    ]);
    check(1)
        .expect(0)
        .says(&["(consumer S/D) held (10.202.0.2:"]);
    // Each pod's connection was asked for alone, by its cid at its own server (cids are
    // unique per server only).
    for (i, code) in [(0, 1), (1, 0)] {
        let servers = all(i);
        let run = r.check(
            i,
            &[
                "--server",
                &servers,
                "--consumer",
                "S/D",
                "--own-subscription",
                "--timeout",
                "2s",
                "-v",
            ],
        );
        run.expect(code);
        assert!(
            run.stdout
                .contains("asked for this pod's connection alone (cid "),
            "{run}"
        );
    }
    drop(cluster);
}

/// A core NATS subscription (a WebSocket journal's): no JetStream involved.
#[test]
fn a_core_subscription_dropped_and_kept() {
    let ns = Arc::new(NetNs::new());
    let server = NatsServer::start(Some(&ns), Version::Pinned, "127.0.0.1", 4222);
    let url = server.url();
    let mut app = Peer::spawn(
        Some(&ns),
        &["conn", "-url", &url, "-subscribe", "journal.>@ws"],
    );
    app.wait_for("ready", S10);
    let check = |sub: &str| {
        probe(&["check", "--server", &url, "--subscription", sub])
            .ns(&ns)
            .run()
    };
    check("journal.>@ws")
        .expect(0)
        .says(&["subscription journal.> in queue group ws held (127.0.0.1:"]);
    check("journal.>")
        .expect(1)
        .says(&["subscription journal.>: this pod's connection 127.0.0.1:"]);
    app.signal(libc::SIGHUP);
    app.wait_for("unsubscribed", S10);
    check("journal.>@ws")
        .expect(1)
        .says(&["holds no such subscription"]);
    // With the connection gone too, the server lists none from this pod, and the check says so.
    drop(app);
    probe(&[
        "check",
        "--server",
        &url,
        "--subscription",
        "journal.>@ws",
        "--min-connections",
        "1",
    ])
    .ns(&ns)
    .run()
    .expect(1)
    .says(&["client holds no connection while"]);
}

/// `--monitor`: the server's `/connz?subs=detail`, every page, with 1,100 other connections
/// (two pages); and the account's report with 2,000 other connections, filtered by subject,
/// still well inside --timeout.
#[test]
fn busy_servers_and_the_monitoring_port() {
    let _serial = timing_lock();
    let ns = Arc::new(NetNs::new());
    let server = NatsServer::start_with(
        Some(&ns),
        Version::Pinned,
        "127.0.0.1",
        4222,
        &["-m", "8222"],
    );
    let url = server.url();
    let mut others = Peer::spawn(Some(&ns), &["many", "-url", &url, "-n", "2000"]);
    others.wait_for("ready", Duration::from_secs(60));
    let mut app = Peer::spawn(
        Some(&ns),
        &["conn", "-url", &url, "-subscribe", "journal.>"],
    );
    app.wait_for("ready", S10);
    let run = probe(&[
        "check",
        "--server",
        &url,
        "--subscription",
        "journal.>",
        "--json",
        "-v",
    ])
    .ns(&ns)
    .run();
    run.expect(0);
    assert_eq!(run.json()["subscriptions"][0]["outcome"], "held", "{run}");
    assert!(
        run.elapsed < Duration::from_millis(400),
        "2,000 other connections: ended {:?} into an 800 ms deadline\n{run}",
        run.elapsed
    );
    // The monitoring port has no subject filter: every page of 2,000 connections.
    let state = tempfile::tempdir().unwrap();
    let state = state.path().to_string_lossy().to_string();
    let via_monitor = |extra: &[&str]| {
        let mut args = vec![
            "check",
            "--state-dir",
            &state,
            "--server",
            "nats://127.0.0.1:4999",
            "--port",
            "4222",
            "--subscription",
            "journal.>",
            "--monitor",
            "http://127.0.0.1:8222",
            "--timeout",
            "3s",
        ];
        args.extend_from_slice(extra);
        probe(&args).ns(&ns).run()
    };
    let monitor = via_monitor(&["--json"]);
    monitor.expect(0);
    let sub = &monitor.json()["subscriptions"][0];
    assert_eq!(sub["outcome"], "held", "{monitor}");
    assert_eq!(sub["source"], "http://127.0.0.1:8222", "{monitor}");
    // Dropped: the monitoring port's answer for this pod's connection alone (by cid, as the
    // first run remembered it there) lists it without the subscription.
    app.signal(libc::SIGHUP);
    app.wait_for("unsubscribed", S10);
    let run = via_monitor(&["-v"]);
    run.expect(1).says(&["holds no such subscription"]);
    assert!(
        run.stdout
            .contains("asked for this pod's connection alone (cid "),
        "{run}"
    );
}

/// An app pod whose traffic leaves rewritten to 10.200.0.99 (SNAT), with a client holding
/// `journal.>`; the server's URL.
fn behind_nat() -> (NetNs, NatsServer, Peer, String) {
    let nats = NetNs::new();
    let app = NetNs::new();
    let (gateway, _) = link(&nats, &app);
    let server = NatsServer::start_with(Some(&Arc::new(nats)), Version::Pinned, gateway, 4222, &[]);
    let url = format!("nats://{gateway}:4222");
    // Everything leaving the app pod is rewritten to 10.200.0.99 (an address of its own).
    app.ip(&["addr", "add", "10.200.0.99/24", "dev", "veth200"]);
    app.exec(
        "iptables",
        &[
            "-t",
            "nat",
            "-A",
            "POSTROUTING",
            "-o",
            "veth200",
            "-j",
            "SNAT",
            "--to-source",
            "10.200.0.99",
        ],
    );
    let mut client = Peer::spawn(
        Some(&app),
        &["conn", "-url", &url, "-subscribe", "journal.>"],
    );
    client.wait_for("ready", S10);
    (app, server, client, url)
}

/// Behind NAT the server sees another address for this pod: the check says it cannot match,
/// never guesses, and fails under no --when-server-down: NATS answered.
#[test]
fn behind_nat_it_cannot_match() {
    let (app, _server, _client, url) = behind_nat();
    let run = probe(&["check", "--server", &url, "--subscription", "journal.>"])
        .ns(&app)
        .run();
    run.expect(0).says(&[
        "subscription journal.> not judged: cannot match this pod's connection at the server: it sees the probe as 10.200.0.99:",
    ]);
    probe(&[
        "check",
        "--server",
        &url,
        "--subscription",
        "journal.>",
        "--when-server-down",
        "fail",
    ])
    .ns(&app)
    .run()
    .expect(0)
    .says(&["subscription journal.> not judged: cannot match this pod's connection"]);
}

/// Behind NAT the subscription can never be matched: never judged with this configuration,
/// once that has lasted longer than the window it is a configuration error (exit 2) naming
/// the fix, not a pass for ever.
#[test]
fn behind_nat_for_longer_than_the_window_is_a_configuration_error() {
    let (app, _server, _client, url) = behind_nat();
    let state = tempfile::tempdir().unwrap();
    let args = [
        "check",
        "--server",
        &url,
        "--subscription",
        "journal.>",
        "--stall-after",
        "2s",
        "--state-dir",
        state.path().to_str().unwrap(),
    ];
    let started = std::time::Instant::now();
    let run = loop {
        let run = probe(&args).ns(&app).run();
        if run.code == Some(2) || started.elapsed() > Duration::from_secs(6) {
            break run;
        }
        run.expect(0)
            .says(&["(never judged with this configuration: if this still holds in "]);
        std::thread::sleep(Duration::from_millis(400));
    };
    run.expect(2).says(&[
        "configuration error: subscription journal.> not judged: cannot match this pod's connection at the server",
        ", never judged, longer than the window 2s: drop --own-subscription and --subscription",
    ]);
    assert!(started.elapsed() > Duration::from_secs(2), "{run}");
    println!("subscription | behind NAT, persisting: {}", run.line());
}

/// `--own-subscription` judges a consumer's part: without `--consumer` it has none.
#[test]
fn own_subscription_needs_a_consumer() {
    probe(&["check", "--own-subscription"])
        .run()
        .expect(2)
        .says(&["--own-subscription needs --consumer"]);
}
