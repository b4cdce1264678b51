//! `natsprobe guard`: ADR 0003's guard over every durable, against real nats-server and real
//! nats.go consumers: the Verification table, the rollout window, `--ignore`, comma lists,
//! `STREAM/*`, counted losses, a cluster leader change, and 1,000 consumers.

use crate::harness::cluster::Cluster;
use crate::harness::pods::*;
use crate::harness::probe::Run;
use crate::harness::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `natsprobe guard --server URL --interval 2500ms ARGS` from the app pod.
fn guard(pods: &Pods, args: &[&str]) -> Run {
    let mut all = vec![
        "guard",
        "--server",
        pods.url.as_str(),
        "--interval",
        "2500ms",
    ];
    all.extend_from_slice(args);
    probe(&all).ns(&pods.app).run()
}

/// The row of `durable` in a `--json` run.
fn row(run: &Run, name: &str) -> serde_json::Value {
    run.json()["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no row for {name}\n{run}"))
        .clone()
}

fn verdicts(run: &Run) -> Vec<(String, String)> {
    run.json()["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// ADR 0003's Verification table, all five rows in one account, through `guard`.
#[test]
fn the_adr_verification_table_through_the_guard() {
    let pods = Pods::new(Version::Pinned);
    // Row 1: no subscriber, a backlog.
    pods.push("S", "unbound", &[]);
    // Row 2: a subscriber alive, never acking.
    pods.push("S", "wedged", &[]);
    // Row 4: serialized max_ack_pending 1 under sustained load.
    pods.push("S", "serial", &[]);
    // Row 5: the healthy rest.
    pods.push("S", "healthy", &[]);
    pods.publish_n("s.x", 300);
    let _wedged = pods.consume("S", "wedged", &["-ack", "never"]);
    let _serial = pods.consume("S", "serial", &["-work", "5ms"]);
    let _healthy = pods.consume("S", "healthy", &[]);
    let _producer = pods.producer("s.x", 300);
    // Row 3: an expected durable that is absent.
    let run = guard(&pods, &["--expect", "S/serial,S/gone", "--json"]);
    run.expect(1);
    let mut got = verdicts(&run);
    got.sort();
    let want: Vec<(String, String)> = [
        ("S/gone", "fault"),
        ("S/healthy", "healthy"),
        ("S/serial", "healthy"),
        ("S/unbound", "fault"),
        ("S/wedged", "fault"),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect();
    assert_eq!(got, want, "{run}");
    assert!(row(&run, "S/unbound")["reason"]
        .as_str()
        .unwrap()
        .starts_with("no subscriber bound to its deliver subject (push_bound false)"));
    assert!(row(&run, "S/wedged")["reason"]
        .as_str()
        .unwrap()
        .starts_with("no progress for"));
    assert_eq!(row(&run, "S/serial")["progress"], "acked", "{run}");
    let floor = row(&run, "S/serial")["ack_floor"].clone();
    assert!(floor[1].as_u64() > floor[0].as_u64(), "{run}");
    assert!(row(&run, "S/gone")["reason"]
        .as_str()
        .unwrap()
        .contains("not found in stream S in both looks (expected)"));
    // The table and the summary line naming every faulted durable.
    let text = guard(&pods, &["--expect", "S/serial,S/gone"]);
    text.expect(1);
    let last = text.stdout.lines().last().unwrap();
    assert_eq!(
        last,
        "unhealthy: 3 of 5 durables faulted in both of two looks 2.5s apart: S/gone, S/unbound, S/wedged",
        "{text}"
    );
    println!("guard table:\n{}", text.stdout);
}

/// A rollout: the deliver group has no subscriber in the first look and has one in the
/// second. Not an alert.
#[test]
fn a_rollout_between_the_looks_is_not_an_alert() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    pods.publish_n("s.x", 50);
    let started = Instant::now();
    let child = probe(&[
        "guard",
        "--server",
        &pods.url,
        "--interval",
        "2500ms",
        "--json",
    ])
    .ns(&pods.app)
    .command()
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // The new pod's client subscribes after the first look.
    std::thread::sleep(Duration::from_millis(800));
    let _consumer = pods.consume("S", "D", &[]);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        json["consumers"][0]["reason"],
        "unbound in the first look only (a rollout?), bound in the second"
    );
    assert!(started.elapsed() >= Duration::from_millis(2500));
}

/// `--ignore` lists a faulty durable as ignored (never silently skipped) and the run passes;
/// `STREAM/*` ignores a whole stream, or expects one; the last element of a comma list counts.
#[test]
fn ignore_expect_whole_streams_and_comma_lists() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "a", &[]);
    pods.push("OLD", "orphan", &[]);
    pods.push("OLD", "orphan2", &[]);
    pods.publish_n("s.x", 5);
    pods.publish_n("old.x", 5);
    let _a = pods.consume("S", "a", &[]);
    // The orphans are unbound with a backlog: faults, unless ignored.
    let run = guard(&pods, &["--ignore", "OLD/orphan", "--json"]);
    run.expect(1);
    assert_eq!(row(&run, "OLD/orphan")["verdict"], "ignored");
    assert_eq!(row(&run, "OLD/orphan")["reason"], "ignored (--ignore)");
    assert_eq!(row(&run, "OLD/orphan2")["verdict"], "fault");
    let run = guard(&pods, &["--ignore", "OLD/*", "--json"]);
    run.expect(0);
    assert_eq!(row(&run, "OLD/orphan2")["verdict"], "ignored");
    // The last element of a comma list, from the flag and from its environment twin.
    let run = guard(&pods, &["--ignore", "OLD/*", "--expect", "S/a,S/z"]);
    run.expect(1);
    assert!(
        run.stdout.lines().last().unwrap().ends_with(": S/z"),
        "{run}"
    );
    let run = probe(&["guard", "--server", &pods.url, "--interval", "2500ms"])
        .ns(&pods.app)
        .env("NATSPROBE_IGNORE", "OLD/orphan,OLD/orphan2")
        .env("NATSPROBE_EXPECT", "S/a,NOPE/*")
        .run();
    run.expect(1);
    assert!(
        run.stdout.lines().last().unwrap().ends_with(": NOPE/*"),
        "{run}"
    );
    assert!(
        run.stdout
            .contains("stream NOPE not found in both looks (expected)"),
        "{run}"
    );
}

/// A never-acking consumer on a capped discard-old stream under load: the advisories count
/// the messages retention deleted unacknowledged during the interval, and the guard names it.
/// A consumer acking on a one-message stream loses nothing and is not named.
#[test]
fn retention_losses_are_counted_and_named() {
    let pods = Pods::new(Version::Pinned);
    pods.push_with("CAP", "W", "10", &["-max-msgs", "200"]);
    pods.push("ONE", "A", &["-max-msgs", "1"]);
    let _never = pods.consume("CAP", "W", &["-ack", "never"]);
    let _acking = pods.consume("ONE", "A", &["-work", "300ms", "-chain", "one.x"]);
    pods.publish_n("one.x", 1);
    let _producer = pods.producer("cap.x", 200);
    std::thread::sleep(Duration::from_millis(500));
    let run = guard(&pods, &["--json"]);
    run.expect(1);
    let w = row(&run, "CAP/W");
    assert_eq!(w["verdict"], "fault", "{run}");
    let deleted = w["losses"]["deleted_unacked"].as_u64().unwrap();
    assert!(
        deleted > 100,
        "200 msg/s for 2.5 s, all deleted unacked: {deleted}\n{run}"
    );
    println!("guard | CAP/W: {}", w["reason"]);
    let a = row(&run, "ONE/A");
    assert_eq!(a["verdict"], "healthy", "{run}");
    assert_eq!(a["losses"]["deleted_unacked"], 0, "{run}");
}

/// The account may not subscribe to the advisories: the guard says so and judges without
/// them.
#[test]
fn without_advisories_the_guard_says_so() {
    let pods = Pods::with_limited_user("guard", "guard-pw", &["$JS.API.>"]);
    pods.push("S", "D", &[]);
    let _d = pods.consume("S", "D", &[]);
    let run = guard(
        &pods,
        &["--user", "guard", "--password", "guard-pw", "--json"],
    );
    run.expect(0);
    let json = run.json();
    assert!(
        json["advisories_unavailable"]
            .as_str()
            .unwrap()
            .contains("may not subscribe to $JS.EVENT.ADVISORY.CONSUMER"),
        "{run}"
    );
    assert_eq!(json["consumers"][0]["losses"], serde_json::Value::Null);
    assert!(!run.stdout.contains("guard-pw") && !run.stderr.contains("guard-pw"));
}

/// Exit 3 when the server cannot be reached or the account has no JetStream.
#[test]
fn an_unreachable_server_or_no_jetstream_is_exit_3() {
    let pods = Pods::with(Version::Pinned, &["-js=false"], &[]);
    guard(&pods, &[]).expect(3).says(&[
        "could not evaluate: cannot look at the account's JetStream: no JetStream answers in the domain asked",
    ]);
    probe(&[
        "guard",
        "--server",
        "nats://10.200.0.1:4333",
        "--interval",
        "1s",
    ])
    .ns(&pods.app)
    .run()
    .expect(3)
    .says(&["could not evaluate: cannot look at the account's JetStream: server unreachable"]);
    probe(&["guard"])
        .run()
        .expect(2)
        .says(&["guard needs --server"]);
}

/// A 3-node cluster with R3 streams: the stream leader is killed between the two looks. The
/// listings come from the meta leader, elections are asked again; healthy consumers are not
/// alerted, and a genuinely wedged one is still named.
#[test]
fn a_cluster_leader_change_between_the_looks() {
    let _serial = timing_lock();
    let ns = Arc::new(NetNs::new());
    let mut cluster = Cluster::start(&ns, Version::Pinned, "127.0.0.1");
    let urls = cluster.urls();
    let setup = |durable: &str| {
        Peer::setup(
            Some(&ns),
            &[
                "-url",
                &urls,
                "-stream",
                "R",
                "-subjects",
                "r.>",
                "-replicas",
                "3",
                "-durable",
                durable,
                "-deliver-subject",
                &format!("deliver.{durable}"),
                "-deliver-group",
                durable,
                "-ack-wait",
                "1s",
            ],
        )
    };
    for d in ["ok", "idle", "wedged"] {
        setup(d);
    }
    let consume = |durable: &str, extra: &[&str]| {
        let deliver = format!("deliver.{durable}");
        let mut args = vec![
            "consume",
            "-url",
            &urls,
            "-deliver-subject",
            &deliver,
            "-deliver-group",
            durable,
            "-max-reconnects",
            "-1",
            "-reconnect-wait",
            "100ms",
        ];
        args.extend_from_slice(extra);
        let mut p = Peer::spawn(Some(&ns), &args);
        p.wait_for("ready", S10);
        p
    };
    let _ok = consume("ok", &[]);
    let _idle = consume("idle", &[]);
    let _wedged = consume("wedged", &["-ack", "never"]);
    let mut producer = Peer::spawn(
        Some(&ns),
        &[
            "publish",
            "-url",
            &urls,
            "-subject",
            "r.x",
            "-rate",
            "50",
            "-js",
            "-max-reconnects",
            "-1",
            "-reconnect-wait",
            "100ms",
        ],
    );
    producer.wait_for("ready", S10);
    std::thread::sleep(Duration::from_millis(500));
    let leader = cluster.stream_leader("R");
    let child = probe(&["guard", "--server", &urls, "--interval", "6s", "--json"])
        .ns(&ns)
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    cluster.stop(&leader);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
    println!("guard | cluster, leader {leader} killed between the looks: {stdout}");
    let verdict = |name: &str| {
        json["consumers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| {
                (
                    c["verdict"].as_str().unwrap().to_string(),
                    c["reason"].to_string(),
                )
            })
            .unwrap_or_else(|| panic!("no {name}: {stdout}"))
    };
    for healthy in ["R/ok", "R/idle"] {
        let (v, reason) = verdict(healthy);
        assert!(
            v == "healthy" || v == "unknown",
            "{healthy}: {v} {reason}\n{stdout}"
        );
    }
    let (v, reason) = verdict("R/wedged");
    assert_eq!(v, "fault", "{reason}\n{stdout}");
    assert_eq!(out.status.code(), Some(1), "{stdout}");
}

/// 1,000 consumers in 100 streams: every one listed and judged, in one run.
#[test]
fn a_thousand_consumers() {
    let pods = Pods::new(Version::Pinned);
    let mut bulk = Peer::spawn(
        Some(&pods.nats),
        &[
            "bulk",
            "-url",
            &pods.url,
            "-streams",
            "100",
            "-consumers",
            "10",
        ],
    );
    bulk.wait_for("ready", Duration::from_secs(60));
    let _client = pods.client("conn", &[]);
    let run = probe(&["guard", "--server", &pods.url, "--interval", "1s", "--json"])
        .ns(&pods.app)
        .run();
    run.expect(0);
    let json = run.json();
    assert_eq!(
        json["consumers"].as_array().unwrap().len(),
        1000,
        "{}",
        json["summary"]
    );
    assert!(json["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["verdict"] == "healthy"));
    println!(
        "guard | 1,000 consumers judged in {:?} (interval 1s)",
        run.elapsed
    );
}

/// A push consumer that never acks, bound, on a `max_bytes 20000`, discard-old
/// stream under load (1 message/ms): retention deletes its messages unacknowledged, and its
/// floor moves by exactly as many. The guard once took that for acks in some runs (it read
/// the streams before their consumers). Now it is a fault in every run, with the loss count
/// in its row; a consumer acking every message on the same stream is healthy in every run.
#[test]
fn a_consumer_losing_messages_is_a_fault_in_every_run_under_load() {
    let pods = Pods::new(Version::Pinned);
    let capped = |durable: &str| {
        let mut args = vec![
            "-stream",
            "CAP",
            "-subjects",
            "cap.>",
            "-max-bytes",
            "20000",
        ];
        let push = push_consumer("CAP", durable);
        args.extend(push[2..].iter().map(String::as_str));
        pods.setup(&args);
    };
    capped("lost");
    capped("acks");
    let _never = pods.consume("CAP", "lost", &["-ack", "never"]);
    let _acking = pods.consume("CAP", "acks", &["-report-every", "100000"]);
    let _producer = pods.producer("cap.x", 1000);
    std::thread::sleep(Duration::from_millis(500));
    const RUNS: usize = 30;
    let mut deleted = Vec::new();
    for i in 0..RUNS {
        let run = probe(&[
            "guard",
            "--server",
            pods.url.as_str(),
            "--interval",
            "1s",
            "--json",
        ])
        .ns(&pods.app)
        .run();
        let lost = row(&run, "CAP/lost");
        assert_eq!(lost["verdict"], "fault", "run {i}: {run}");
        let n = lost["losses"]["deleted_unacked"].as_u64().unwrap();
        assert!(n > 0, "run {i}: the loss count in its row\n{run}");
        assert!(
            lost["reason"]
                .as_str()
                .unwrap()
                .starts_with("losing messages"),
            "run {i}: {run}"
        );
        assert_ne!(lost["progress"], "acked", "run {i}: {run}");
        let acks = row(&run, "CAP/acks");
        assert_eq!(acks["verdict"], "healthy", "run {i}: {run}");
        run.expect(1);
        assert!(
            run.json()["summary"]
                .as_str()
                .unwrap()
                .ends_with(": CAP/lost"),
            "run {i}: {run}"
        );
        deleted.push(n);
    }
    println!(
        "guard | a losing consumer under load: a fault in {RUNS} of {RUNS} runs, deleted unacknowledged per 1s interval: min {} max {}; the acking one healthy in all",
        deleted.iter().min().unwrap(),
        deleted.iter().max().unwrap()
    );
}

/// 20,000 durables, above the old budget's ceiling (about 18,000), in bounded memory;
/// three of them faulted (push, a message waiting, no subscriber) are named, exactly.
#[test]
fn twenty_thousand_durables_in_bounded_memory() {
    // It loads the machine (20,000 consumers created, then listed twice): never beside the
    // tests that assert milliseconds.
    let _serial = timing_lock();
    let pods = Pods::new(Version::Pinned);
    let mut bulk = Peer::spawn(
        Some(&pods.nats),
        &[
            "bulk",
            "-url",
            &pods.url,
            "-streams",
            "80",
            "-consumers",
            "250",
            "-faulted",
            "3",
        ],
    );
    bulk.wait_for("ready", Duration::from_secs(300));
    // The reports (3 and 7 MB) go to files: the test process's peak RSS is the floor of every
    // later run's wait4 figure, here and in the tests after it.
    let out = tempfile::tempdir().unwrap();
    let guard = |extra: &[&str], file: &str| {
        let mut args = vec!["guard", "--server", pods.url.as_str(), "--interval", "1s"];
        args.extend_from_slice(extra);
        let path = out.path().join(file);
        let run = probe(&args)
            .ns(&pods.app)
            .stdout_to(&path)
            .rss_by_time()
            .run();
        (run, path)
    };
    // Counts `pattern` in `file` outside this process.
    let count = |pattern: &str, file: &std::path::Path| -> usize {
        let out = std::process::Command::new("grep")
            .args(["-o", "-F", pattern])
            .arg(file)
            .output()
            .unwrap();
        out.stdout.iter().filter(|&&b| b == b'\n').count()
    };
    let last_line = |file: &std::path::Path| -> String {
        let out = std::process::Command::new("tail")
            .args(["-n", "1"])
            .arg(file)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    };
    let (faulted, table) = guard(&[], "table.txt");
    faulted.expect(1);
    let summary = last_line(&table);
    assert!(
        summary.ends_with(
            "3 of 20003 durables faulted in both of two looks 1s apart: F/f00, F/f01, F/f02"
        ),
        "{summary}\n{faulted}"
    );
    assert_eq!(count(" fault ", &table), 3, "{summary}");
    let (healthy, json) = guard(&["--ignore", "F/*", "--json"], "report.json");
    healthy.expect(0);
    assert_eq!(
        count(r#""name":"#, &json),
        20_003,
        "{}",
        last_line(&json).len()
    );
    assert_eq!(count(r#""verdict":"healthy""#, &json), 20_000 + 1);
    assert_eq!(count(r#""verdict":"ignored""#, &json), 3);
    for (kib, what) in [
        (healthy.max_rss_kib, "healthy"),
        (faulted.max_rss_kib, "faulted"),
    ] {
        assert!(kib < 64 * 1024, "{what}: peak RSS {kib} KiB");
    }
    println!(
        "guard | 20,000 durables: exit 0 in {:?}, {} KiB peak RSS (JSON); 3 faulted named: exit 1 in {:?}, {} KiB (table)",
        healthy.elapsed, healthy.max_rss_kib, faulted.elapsed, faulted.max_rss_kib
    );
}

/// Nothing listed and nothing expected is healthy, but said plainly: a wrong
/// account, credentials or domain must not read as all clear.
#[test]
fn an_account_with_no_durables_says_so() {
    let pods = Pods::new(Version::Pinned);
    let run = guard(&pods, &[]);
    run.expect(0);
    assert!(
        summary_line(&run).starts_with("healthy: no durables in this account"),
        "{run}"
    );
}

/// The summary: the last line of the table.
fn summary_line(run: &Run) -> &str {
    run.stdout.lines().last().unwrap_or_default()
}
