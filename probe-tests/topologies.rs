//! The topologies operators run beyond one cluster. A pod on a leaf node whose
//! streams live in the hub's JetStream domain (the leaf with its own domain, and without
//! JetStream), and a pod in one cluster of a supercluster whose stream is placed in the other.
//! In each: a healthy pod passes, a pod whose client gave up fails, an unbound consumer and a
//! deaf replica fail, and the guard lists and judges the durables of the named domain. Also
//! the issue's two measured failures without `--js-domain`, the advisories across a leaf
//! connection (counted from the right domain, or "not counted" with the reason) and the
//! connection report where it cannot see the pod's connection.

use crate::harness::pods::{push_consumer, S10};
use crate::harness::probe::Run;
use crate::harness::topology::{request, HubAndLeaf, Leaf, Supercluster};
use crate::harness::*;
use std::time::Duration;

/// Where the streams live and where the pod connects.
struct Scene<'a> {
    nats: &'a NetNs,
    app: &'a NetNs,
    /// The server the streams are created on (the hub, cluster A).
    home: String,
    /// The server the pod's client connects to (the leaf node, cluster B).
    pod: String,
    /// The pod's `nats.Domain`, and the probe's `--js-domain`.
    domain: Option<&'static str>,
    state: tempfile::TempDir,
}

impl<'a> Scene<'a> {
    fn new(
        nats: &'a NetNs,
        app: &'a NetNs,
        home: String,
        pod: String,
        domain: Option<&'static str>,
    ) -> Self {
        Scene {
            nats,
            app,
            home,
            pod,
            domain,
            state: tempfile::tempdir().unwrap(),
        }
    }

    /// A stream (subjects `<stream>.>`, lower case) and a push consumer in deliver group
    /// `durable`, ack_wait 1 s, created in the home domain.
    fn push(&self, stream: &str, durable: &str, extra: &[&str]) {
        let subjects = format!("{}.>", stream.to_lowercase());
        let deliver = format!("deliver.{durable}");
        let mut args = vec![
            "-url",
            &self.home,
            "-stream",
            stream,
            "-subjects",
            &subjects,
            "-durable",
            durable,
            "-deliver-subject",
            &deliver,
            "-deliver-group",
            durable,
            "-ack-wait",
            "1s",
        ];
        args.extend_from_slice(extra);
        Peer::setup(Some(self.nats), &args);
    }

    fn publish_n(&self, subject: &str, count: u32) {
        let n = count.to_string();
        let p = Peer::spawn(
            Some(self.nats),
            &[
                "publish", "-url", &self.home, "-subject", subject, "-count", &n, "-rate", "0",
                "-js",
            ],
        );
        assert!(p.wait_exit(Duration::from_secs(30)).success());
    }

    /// The pod's client: a nats.go push consumer on the pod's server, through the domain,
    /// giving up after 3 × 200 ms of reconnects.
    fn consume(&self, stream: &str, durable: &str, extra: &[&str]) -> Peer {
        let push = push_consumer(stream, durable);
        let mut args = vec!["consume", "-url", &self.pod];
        args.extend(push.iter().map(String::as_str));
        args.extend(["-max-reconnects", "3", "-reconnect-wait", "200ms"]);
        if let Some(d) = self.domain {
            args.extend(["-domain", d]);
        }
        args.extend_from_slice(extra);
        let mut p = Peer::spawn(Some(self.app), &args);
        p.wait_for("ready", S10);
        // Interest crosses a gateway or a leaf connection a moment after the subscription.
        let info = format!("$JS.API.CONSUMER.INFO.{stream}.{durable}");
        wait_until("the consumer bound", S10, || {
            request(self.nats, &self.home, &info).contains(r#""push_bound":true"#)
        });
        p
    }

    /// `natsprobe check --server <pod's server> --state-dir DIR [--js-domain D] ARGS` in the
    /// app pod.
    fn check(&self, args: &[&str]) -> Run {
        let state = self.state.path().to_string_lossy().to_string();
        let mut all = vec![
            "check",
            "--server",
            &self.pod,
            "--state-dir",
            &state,
            "--stall-after",
            "2s",
        ];
        if let Some(d) = self.domain {
            all.extend(["--js-domain", d]);
        }
        all.extend_from_slice(args);
        probe(&all).ns(self.app).run()
    }

    /// `natsprobe guard --server <pod's server> --interval 2500ms [--js-domain D] ARGS`.
    fn guard(&self, args: &[&str]) -> Run {
        let mut all = vec!["guard", "--server", &self.pod, "--interval", "2500ms"];
        if let Some(d) = self.domain {
            all.extend(["--js-domain", d]);
        }
        all.extend_from_slice(args);
        probe(&all).ns(self.app).run()
    }
}

fn row(run: &Run, name: &str) -> serde_json::Value {
    run.json()["consumers"]
        .as_array()
        .unwrap_or_else(|| panic!("no consumers\n{run}"))
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no row for {name}\n{run}"))
        .clone()
}

/// Every judgement the issue asks for, in one topology. `restart_pods_server` kills the pod's
/// server, runs the closure while it is down, and starts it again.
fn every_judgement(scene: &Scene, restart_pods_server: &mut dyn FnMut(&mut dyn FnMut())) {
    scene.push("TF_RAW", "kv", &[]);
    scene.push("TF_RAW", "unbound", &[]);
    scene.publish_n("tf_raw.x", 50);
    let mut client = scene.consume("TF_RAW", "kv", &[]);

    // A healthy pod passes: its consumer judged in the home domain, its subscription held.
    let healthy = scene.check(&["--consumer", "TF_RAW/kv", "--own-subscription"]);
    healthy.expect(0).says(&[
        "healthy: 1 ESTABLISHED TCP connection to remote port",
        "consumer TF_RAW/kv ",
        "subscription deliver.kv in queue group kv (consumer TF_RAW/kv) held (10.200.0.2:",
    ]);
    assert!(!healthy.line().contains("not judged"), "{healthy}");
    println!(
        "topology | healthy ({:?}) | {}",
        healthy.elapsed,
        healthy.line()
    );

    // A consumer with nothing bound and work waiting fails.
    scene
        .check(&["--consumer", "TF_RAW/unbound"])
        .expect(1)
        .says(&["unhealthy: consumer TF_RAW/unbound: no subscriber bound to its deliver subject (push_bound false), 50 waiting"]);

    // The guard lists the home domain's durables and judges them.
    let guard = scene.guard(&["--json"]);
    guard.expect(1);
    assert_eq!(row(&guard, "TF_RAW/kv")["verdict"], "healthy", "{guard}");
    assert_eq!(row(&guard, "TF_RAW/unbound")["verdict"], "fault", "{guard}");
    let json = guard.json();
    assert_eq!(
        json["advisories_unavailable"],
        serde_json::Value::Null,
        "the advisories reach the guard\n{guard}"
    );
    if let Some(d) = scene.domain {
        assert_eq!(
            json["jetstream"],
            format!("JetStream domain {d} ($JS.{d}.API)"),
            "{guard}"
        );
        assert!(json["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("in JetStream domain {d}")));
    }
    println!("topology | guard | {}", json["summary"]);

    // A deaf replica: the connection holds, the subscription is gone.
    client.signal(libc::SIGHUP);
    client.wait_for("unsubscribed", S10);
    scene
        .check(&["--consumer", "TF_RAW/kv", "--own-subscription"])
        .expect(1)
        .says(&["subscription deliver.kv in queue group kv (consumer TF_RAW/kv): this pod's connection 10.200.0.2:", "holds no such subscription"]);
    drop(client);

    // A pod whose client gave up while its server answers fails.
    let mut client = scene.consume("TF_RAW", "kv", &[]);
    restart_pods_server(&mut || {
        client.wait_for("closed", S10);
    });
    let gave_up = scene.check(&["--consumer", "TF_RAW/kv"]);
    gave_up.expect(1).says(&[
        "unhealthy: client holds no connection while ",
        " answers (nats-server 2.10.26)",
    ]);
    println!("topology | gave up | {}", gave_up.line());
}

/// The usual edge layout: the leaf node has its own JetStream domain `leaf`, the streams live
/// in the hub's `hub`; the pod's nats.go uses `nats.Domain("hub")`, the probe `--js-domain hub`.
#[test]
fn a_pod_on_a_leaf_node_with_its_own_domain() {
    let mut t = HubAndLeaf::start(Leaf::Domain, "");
    let (nats, app) = (t.nats.clone(), t.app.clone());
    let scene = Scene::new(&nats, &app, t.hub_url(), t.leaf_url(), Some("hub"));
    every_judgement(&scene, &mut |during| t.restart_leaf(during));
}

/// A leaf node without JetStream: it only carries the hub's.
#[test]
fn a_pod_on_a_leaf_node_without_jetstream() {
    let mut t = HubAndLeaf::start(Leaf::NoJetStream, "");
    let (nats, app) = (t.nats.clone(), t.app.clone());
    let scene = Scene::new(&nats, &app, t.hub_url(), t.leaf_url(), Some("hub"));
    every_judgement(&scene, &mut |during| t.restart_leaf(during));
}

/// Two clusters joined by gateways: the stream is placed in A, the pod connects to B. One
/// JetStream (no domain): no flag needed.
#[test]
fn a_pod_in_the_other_cluster_of_a_supercluster() {
    let mut s = Supercluster::start();
    let (nats, app) = (s.nats.clone(), s.app.clone());
    let scene = Scene::new(&nats, &app, s.a.url(), s.b.url(), None);
    scene.push("TF_RAW", "placed", &[]);
    assert_eq!(
        s.cluster_of("TF_RAW"),
        "A",
        "the stream lives in the other cluster"
    );
    every_judgement(&scene, &mut |during| {
        s.b.stop();
        during();
        s.b.resume();
    });
}

/// The issue's two measured failures, without `--js-domain`: the probe asks the leaf's own
/// JetStream. `check` must not pass a pod whose stream it cannot find, and says where it
/// looked; the guard says which domain its "0 durables" are. With the flag: both correct.
#[test]
fn the_measured_failures_without_the_domain() {
    let mut t = HubAndLeaf::start(Leaf::Domain, "");
    let scene = Scene::new(&t.nats, &t.app, t.hub_url(), t.leaf_url(), Some("hub"));
    scene.push("TF_RAW", "kv", &[]);
    let _client = scene.consume("TF_RAW", "kv", &[]);
    let state = scene.state.path().to_string_lossy().to_string();
    let leaf = t.leaf_url();
    let check = |extra: &[&str]| {
        let mut args = vec![
            "check",
            "--server",
            &leaf,
            "--state-dir",
            &state,
            "--consumer",
            "TF_RAW/kv",
        ];
        args.extend_from_slice(extra);
        probe(&args).ns(&t.app).run()
    };
    let without = check(&[]);
    without.expect(1).says(&[
        "unhealthy: consumer TF_RAW/kv: stream TF_RAW not found; asked the server's own JetStream domain leaf: a stream in another domain (a leaf node's hub) needs --js-domain",
    ]);
    println!("topology | without --js-domain | {}", without.line());
    check(&["--js-domain", "hub"]).expect(0);
    check(&[]).expect(1);
    let diagnose = probe(&[
        "diagnose",
        "--server",
        &leaf,
        "--state-dir",
        &state,
        "--consumer",
        "TF_RAW/kv",
    ])
    .ns(&t.app)
    .env("NO_COLOR", "1")
    .run();
    diagnose.expect(1);
    for words in [
        "asked in the server's own JetStream, domain leaf ($JS.API; no --js-domain given)",
        "Stream TF_RAW does not exist in the server's own JetStream, domain leaf",
        "give the probe the same --js-domain",
    ] {
        assert!(
            diagnose.stdout.contains(words),
            "`{words}` missing\n{diagnose}"
        );
    }
    let guard = |extra: &[&str]| {
        let mut args = vec!["guard", "--server", &leaf, "--interval", "1s"];
        args.extend_from_slice(extra);
        probe(&args).ns(&t.app).run()
    };
    // The guard's summary is its last line, under the table.
    let last = |run: &Run, words: &str| {
        let line = run.stdout.trim_end().lines().last().unwrap_or_default();
        assert!(line.contains(words), "`{words}` missing\n{run}");
    };
    let own = guard(&[]);
    own.expect(0);
    last(
        &own,
        "healthy: no durables in this account in JetStream domain leaf (the server's own; --js-domain names another) (none listed in two looks",
    );
    println!(
        "topology | guard without --js-domain | {}",
        own.stdout.trim_end().lines().last().unwrap()
    );
    last(
        guard(&["--expect", "TF_RAW/kv"]).expect(1),
        "faulted in both of two looks 1s apart: TF_RAW/kv",
    );
    last(
        guard(&["--js-domain", "hub"]).expect(0),
        "healthy: 1 durable in JetStream domain hub ($JS.hub.API), no fault",
    );
    // The variables do what the flags do.
    let by_domain = probe(&["guard", "--server", &leaf, "--interval", "1s"])
        .ns(&t.app)
        .env("NATSPROBE_JS_DOMAIN", "hub")
        .run();
    last(by_domain.expect(0), "1 durable in JetStream domain hub");
    let by_prefix = probe(&["guard", "--server", &leaf, "--interval", "1s"])
        .ns(&t.app)
        .env("NATSPROBE_JS_API_PREFIX", "$JS.hub.API")
        .run();
    last(
        by_prefix.expect(0),
        "1 durable in JetStream API prefix $JS.hub.API",
    );
    // A bad value is refused before anything is asked.
    let bad = probe(&[
        "check",
        "--server",
        &leaf,
        "--consumer",
        "TF_RAW/kv",
        "--js-domain",
        "hub.eu",
    ])
    .ns(&t.app)
    .run();
    bad.expect(2);
    assert!(
        bad.stderr
            .contains("--js-domain (or NATSPROBE_JS_DOMAIN) 'hub.eu'"),
        "{bad}"
    );
    // The leaf node loses its hub: the pod's connection to the leaf holds, the hub's
    // JetStream does not answer; not judged (a restart would not help), and said where.
    t.hub.stop();
    let state = scene.state.path().to_string_lossy().to_string();
    let lost = probe(&[
        "check",
        "--server",
        &leaf,
        "--state-dir",
        &state,
        "--consumer",
        "TF_RAW/kv",
        "--js-domain",
        "hub",
    ])
    .ns(&t.app)
    .run();
    lost.expect(0).says(&[
        "consumer TF_RAW/kv not judged: no JetStream answers in the domain asked",
        "asked JetStream domain hub ($JS.hub.API)",
    ]);
    println!("topology | hub lost | {}", lost.line());
}

/// The leaf node without JetStream, without the flag: the probe's `$JS.API` reaches no
/// JetStream (the leaf connection denies it), so the consumer is not judged, and the line says
/// why; never "healthy" by silence.
#[test]
fn a_leaf_without_jetstream_without_the_domain_is_not_judged() {
    let t = HubAndLeaf::start(Leaf::NoJetStream, "");
    let scene = Scene::new(&t.nats, &t.app, t.hub_url(), t.leaf_url(), Some("hub"));
    scene.push("TF_RAW", "kv", &[]);
    let _client = scene.consume("TF_RAW", "kv", &[]);
    let state = scene.state.path().to_string_lossy().to_string();
    let leaf = t.leaf_url();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "check",
            "--server",
            &leaf,
            "--state-dir",
            &state,
            "--consumer",
            "TF_RAW/kv",
        ];
        args.extend_from_slice(extra);
        probe(&args).ns(&t.app).run()
    };
    let without = run(&[]);
    without.expect(0).says(&[
        "consumer TF_RAW/kv not judged: no JetStream answers in the domain asked",
        "the server has no JetStream of its own: a stream behind a leaf node needs --js-domain",
    ]);
    println!("topology | no leaf JetStream, no flag | {}", without.line());
    // NATS answered (no JetStream there): not a server that is down.
    run(&["--when-server-down", "fail"]).expect(0);
    run(&["--js-domain", "hub"]).expect(0);
}

/// Advisories across the leaf connection: the guard hears the hub's and the leaf's alike, and
/// counts only the judged domain's (each advisory names its domain).
#[test]
fn losses_are_counted_from_the_judged_domain_only() {
    let t = HubAndLeaf::start(Leaf::Domain, "");
    let scene = Scene::new(&t.nats, &t.app, t.hub_url(), t.leaf_url(), Some("hub"));
    // The hub's MD/md drops every message after one delivery (max_deliver 1, never acked).
    scene.push("MD", "md", &["-max-deliver", "1"]);
    let _never = scene.consume("MD", "md", &["-ack", "never"]);
    // The leaf's own MD/md (same names, its own domain) gets nothing.
    Peer::setup(
        Some(&t.nats),
        &[
            "-url",
            &t.leaf_url(),
            "-stream",
            "MD",
            "-subjects",
            "leafmd.>",
            "-durable",
            "md",
        ],
    );
    let mut producer = Peer::spawn(
        Some(&t.nats),
        &[
            "publish",
            "-url",
            &t.hub_url(),
            "-subject",
            "md.x",
            "-rate",
            "20",
        ],
    );
    producer.wait_for("ready", S10);
    let hub = scene.guard(&["--json"]);
    let exhausted = row(&hub, "MD/md")["losses"]["exhausted"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        exhausted > 10,
        "20 msg/s for 2.5 s exhausting max_deliver 1: {exhausted}\n{hub}"
    );
    // The leaf's own domain, judged without the flag: the hub's advisories for its MD/md are
    // heard here too, and not counted.
    let leaf = t.leaf_url();
    let own = probe(&["guard", "--server", &leaf, "--interval", "2500ms", "--json"])
        .ns(&t.app)
        .run();
    own.expect(0);
    assert_eq!(row(&own, "MD/md")["losses"]["exhausted"], 0, "{own}");
    println!("topology | losses | hub MD/md exhausted {exhausted}; the leaf's MD/md 0");
}

/// A leaf node that does not import the hub's advisories: the guard cannot hear them, and
/// says so ("losses not counted", with the reason), never zero.
#[test]
fn losses_not_counted_where_the_advisories_do_not_reach() {
    let t = HubAndLeaf::start(Leaf::Domain, r#", deny_imports: ["$JS.EVENT.>"]"#);
    let scene = Scene::new(&t.nats, &t.app, t.hub_url(), t.leaf_url(), Some("hub"));
    scene.push("TF_RAW", "kv", &[]);
    let _client = scene.consume("TF_RAW", "kv", &[]);
    let run = scene.guard(&["--json"]);
    run.expect(0);
    let json = run.json();
    let why = json["advisories_unavailable"]
        .as_str()
        .unwrap_or_else(|| panic!("{run}"));
    assert!(
        why.contains("no advisory from domain hub reaches this connection"),
        "{run}"
    );
    assert!(
        json["summary"]
            .as_str()
            .unwrap()
            .contains("losses not counted"),
        "{run}"
    );
    assert_eq!(
        row(&run, "TF_RAW/kv")["losses"],
        serde_json::Value::Null,
        "{run}"
    );
    println!("topology | advisories denied | {why}");
}

/// The connection report behind a leaf node: from the leaf (the pod's server) it sees the
/// pod's connection; from the hub, with a leaf node that does not carry the system requests,
/// it cannot, and says so: never "unhealthy" for a connection it could not see.
#[test]
fn the_pods_subscription_seen_from_the_leaf_or_not_from_the_hub() {
    let t = HubAndLeaf::start(Leaf::Domain, r#", deny_imports: ["$SYS.>"]"#);
    let scene = Scene::new(&t.nats, &t.app, t.hub_url(), t.leaf_url(), Some("hub"));
    scene.push("TF_RAW", "kv", &[]);
    let mut client = scene.consume("TF_RAW", "kv", &[]);
    let state = scene.state.path().to_string_lossy().to_string();
    let hub = t.hub_url();
    // Asked at the hub (its own domain, so no flag); the pod's socket goes to the leaf's port.
    let from_hub = || {
        probe(&[
            "check",
            "--server",
            &hub,
            "--port",
            "4223",
            "--state-dir",
            &state,
            "--consumer",
            "TF_RAW/kv",
            "--own-subscription",
        ])
        .ns(&t.app)
        .run()
    };
    let blind = from_hub();
    blind.expect(0).says(&[
        "subscription deliver.kv in queue group kv (consumer TF_RAW/kv) not judged: the pod's connection is not listed: leaf node leaf is connected and did not answer $SYS.REQ.ACCOUNT.PING.CONNZ",
    ]);
    println!("topology | from the hub | {}", blind.line());
    scene
        .check(&["--consumer", "TF_RAW/kv", "--own-subscription"])
        .expect(0)
        .says(&[
            "subscription deliver.kv in queue group kv (consumer TF_RAW/kv) held (10.200.0.2:",
        ]);
    client.signal(libc::SIGHUP);
    client.wait_for("unsubscribed", S10);
    // Deaf now: the leaf says so; the hub still cannot see, and does not guess.
    scene
        .check(&["--consumer", "TF_RAW/kv", "--own-subscription"])
        .expect(1)
        .says(&["holds no such subscription"]);
    // (Its consumer is unbound now, which the hub does see: the core subscription alone.)
    let blind = probe(&[
        "check",
        "--server",
        &hub,
        "--port",
        "4223",
        "--subscription",
        "deliver.kv@kv",
    ])
    .ns(&t.app)
    .run();
    blind.expect(0).says(&[
        "subscription deliver.kv in queue group kv not judged: the pod's connection is not listed: leaf node leaf is connected and did not answer",
    ]);
}

/// A pull replica on a leaf node, its consumer in the hub's domain, another replica on the
/// hub taking work: the leaf lists the pod's connection and what it published, so its part is
/// judged there, held while it pulls and lost once its loop stops.
#[test]
fn a_pull_replica_on_a_leaf_node() {
    let t = HubAndLeaf::start(Leaf::Domain, "");
    let scene = Scene::new(&t.nats, &t.app, t.hub_url(), t.leaf_url(), Some("hub"));
    Peer::setup(
        Some(&t.nats),
        &[
            "-url",
            &scene.home,
            "-stream",
            "TF_RAW",
            "-subjects",
            "tf_raw.>",
            "-durable",
            "pull",
            "-ack-wait",
            "1s",
        ],
    );
    let hub = t.hub_url();
    let mut producer = Peer::spawn(
        Some(&t.nats),
        &[
            "publish", "-url", &hub, "-subject", "tf_raw.x", "-rate", "4", "-js",
        ],
    );
    producer.wait_for("ready", S10);
    let _other = nats_js(
        Some(&t.nats),
        &[&hub, "TF_RAW/pull", "consume", "--expires", "1000"],
    );
    let leaf = t.leaf_url();
    let mut pod = nats_js(
        Some(&t.app),
        &[
            &leaf,
            "TF_RAW/pull",
            "consume",
            "--expires",
            "1000",
            "--domain",
            "hub",
        ],
    );
    pod.wait_for("ready", S10);
    let part = || scene.check(&["--consumer", "TF_RAW/pull", "--own-subscription"]);
    for _ in 0..4 {
        part()
            .expect(0)
            .says(&["this pod's pulls of consumer TF_RAW/pull taking part (10.200.0.2:"]);
        std::thread::sleep(Duration::from_millis(700));
    }
    pod.signal(libc::SIGUSR1);
    pod.wait_for("stopped", S10);
    let stopped = std::time::Instant::now();
    let failed = loop {
        let run = part();
        if run.code == Some(1) {
            break run;
        }
        run.expect(0);
        assert!(
            stopped.elapsed() < Duration::from_secs(15),
            "never failed\n{run}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    failed.says(&["none of this pod's connections (10.200.0.2:"]);
    println!(
        "topology | pull replica on the leaf, stopped: failed {:.1} s after | {}",
        stopped.elapsed().as_secs_f64(),
        failed.line()
    );
}
