//! Nothing NATS does fails a working pod: the kubelet restarts a pod on any non-zero exit, so
//! a check whose pod holds its connection exits non-zero only where no state of NATS can be the
//! cause. Here, against real servers and real nats.go clients at a kubelet's cadence: the auth
//! service down while the app stays connected; a server starved of CPU holding the pod's
//! connection; and answers that come just after the deadline, on a loaded node.

use crate::harness::callout::{self, Callout};
use crate::harness::pods::*;
use crate::harness::probe::Run;
use crate::harness::*;

const APP: [&str; 4] = ["--user", "app", "--password", "app-pw"];

/// An app logged in through an auth callout service (nats-server 2.10's `auth_callout`), with
/// its push consumer bound, and the service running.
fn behind_a_callout() -> (Pods, Callout, nkeys::KeyPair, Peer) {
    behind_a_callout_consuming(&[])
}

/// `behind_a_callout`, the consumer's client given `consume` too.
fn behind_a_callout_consuming(consume: &[&str]) -> (Pods, Callout, nkeys::KeyPair, Peer) {
    let issuer = nkeys::KeyPair::new_account();
    let pods = Pods::with_config(
        &callout::server_config(&issuer),
        &["-user", "app", "-password", "app-pw"],
    );
    let service = Callout::start(&pods.nats, &pods.url, &issuer.seed().unwrap());
    pods.push("S", "D", &[]);
    let consumer = pods.consume("S", "D", consume);
    (pods, service, issuer, consumer)
}

/// The auth service stopped for three windows: the probe's own logins are refused (or never
/// answered), the app's connection is untouched, and no run exits non-zero; the service back,
/// the next run judges. Before, 60 s into such an outage every pod with `--consumer` exited
/// 2, was restarted, and could not log in again.
#[test]
fn an_auth_service_down_restarts_nothing() {
    let (pods, service, issuer, _consumer) = behind_a_callout();
    let probe_args = APP;
    pods.check(&["S/D"], &probe_args)
        .expect(0)
        .says(&["consumer S/D idle"]);
    let answered = service.answered.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        answered >= 2,
        "the callout let the app and the probe in: {answered}"
    );
    service.stop();
    let runs: Vec<Run> = pods.check_through(&["S/D"], &probe_args, 3 * WINDOW);
    for run in &runs {
        run.expect(0).says(&["healthy: consumer S/D not judged: "]);
    }
    // The outage took effect: the probe's logins were refused, the app stayed connected.
    let refused = runs
        .iter()
        .filter(|r| r.line().contains("authorization error"))
        .count();
    assert!(refused >= 1, "no login refused: {}", runs.last().unwrap());
    println!(
        "nats trouble | auth service down for {:?}: {} runs, {refused} refused, all exit 0: {}",
        3 * WINDOW,
        runs.len(),
        runs.last().unwrap().line()
    );
    // Back: judged at once.
    let _service = Callout::start(&pods.nats, &pods.url, &issuer.seed().unwrap());
    pods.check(&["S/D"], &probe_args)
        .expect(0)
        .says(&["consumer S/D idle"]);
}

/// The same deploy with credentials the auth service refuses from the start: a configuration
/// error once it has lasted longer than the window, naming the fix; the startup probe fails
/// at once.
#[test]
fn credentials_the_auth_service_refuses_from_the_start_are_exit_2() {
    let (pods, _service, _issuer, _consumer) = behind_a_callout();
    let wrong = ["--user", "app", "--password", "not-the-pw"];
    pods.check(&["S/D"], &[&wrong[..], &["--startup"]].concat())
        .expect(1)
        .says(&[
            "unhealthy: not started (--startup): consumer S/D not judged: authorization error",
        ]);
    let runs = pods.check_through(&["S/D"], &wrong, PAST_WINDOW + PERIOD);
    let last = runs.last().unwrap();
    last.expect(2).says(&[
        "configuration error: consumer S/D not judged: authorization error",
        "never judged, longer than the window 2s: give the probe credentials the server accepts",
    ]);
    for run in &runs[..runs.len() - 1] {
        assert!(matches!(run.code, Some(0) | Some(2)), "{run}");
    }
    println!("nats trouble | refused from the start: {}", last.line());
}

/// A 3-node cluster; the app's connection (a core subscription) on node 1, which also holds
/// 2,000 other connections; the probe asks through node 2 every half second, looking the
/// connection up every second. Node 1 held to 2 % of a CPU for three windows (its clients'
/// TCP connections stay up; it answers late or not at all), then stopped for 900 ms of every
/// second for as long: no run exits non-zero, and the late answers are not taken for absence.
/// Node 1 well again: held.
#[test]
fn a_starved_server_holding_the_pods_connection_restarts_nothing() {
    let _serial = timing_lock();
    let r = crate::subscription::Replicas::new();
    let cluster = crate::harness::cluster::Cluster::start(&r.nats, Version::Pinned, "0.0.0.0");
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
    others.wait_for("ready", std::time::Duration::from_secs(60));
    let n1 = format!("nats://{}:4222", r.gateways[0]);
    let mut app = Peer::spawn(
        Some(&r.pods[0]),
        &["conn", "-url", &n1, "-subscribe", "journal.>"],
    );
    app.wait_for("ready", S10);
    let n2 = format!("nats://{}:4223", r.gateways[0]);
    let state = tempfile::tempdir().unwrap();
    let state = state.path().to_string_lossy().to_string();
    let check = || {
        probe(&[
            "check",
            "--server",
            &n2,
            "--port",
            "4222",
            "--subscription",
            "journal.>",
            "--subscription-every",
            "1s",
            "--stall-after",
            "2s",
            "--state-dir",
            &state,
        ])
        .ns(&r.pods[0])
        .run()
    };
    check()
        .expect(0)
        .says(&["subscription journal.> held (10.201.0.2:"]);
    let through = |runs: &mut Vec<Run>| {
        let started = std::time::Instant::now();
        while started.elapsed() < 3 * WINDOW {
            runs.push(check());
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    };
    let node1 = cluster.nodes[0].pid().unwrap();
    let mut runs: Vec<Run> = Vec::new();
    {
        let _throttled = crate::harness::load::Throttled::new(node1, 2);
        through(&mut runs);
    }
    {
        let _starved = crate::harness::load::Starved::new(
            node1,
            std::time::Duration::from_millis(900),
            std::time::Duration::from_secs(1),
        );
        through(&mut runs);
    }
    for run in &runs {
        run.expect(0);
    }
    let late = runs
        .iter()
        .filter(|r| r.line().contains("subscription journal.> not judged"))
        .count();
    assert!(late >= 1, "the starved server always answered in time");
    println!(
        "nats trouble | node 1 throttled, then stopped, {:?} each: {} runs, {late} not judged, all exit 0: {}",
        3 * WINDOW,
        runs.len(),
        runs.iter()
            .find(|r| r.line().contains("not judged"))
            .unwrap()
            .line()
    );
    // Well again: held, once the next ask is due.
    let started = std::time::Instant::now();
    loop {
        let run = check();
        run.expect(0);
        if run
            .line()
            .contains("subscription journal.> held (10.201.0.2:")
        {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "never held again: {run}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    drop(cluster);
}

/// A consumer's info as a 2.10 server gives it: bound, idle.
const CONSUMER_INFO: &str = r#"{"type":"io.nats.jetstream.api.v1.consumer_info_response","stream_name":"S","name":"D","created":"2026-12-01T08:00:37.196393002Z","config":{"durable_name":"D","name":"D","deliver_policy":"all","ack_policy":"explicit","ack_wait":1000000000,"max_deliver":-1,"replay_policy":"instant","max_ack_pending":1,"deliver_subject":"deliver.D","deliver_group":"D","num_replicas":0},"delivered":{"consumer_seq":0,"stream_seq":0},"ack_floor":{"consumer_seq":0,"stream_seq":0},"num_ack_pending":0,"num_redelivered":0,"num_waiting":0,"num_pending":0,"push_bound":true,"ts":"2026-12-01T08:00:42.536597137Z"}"#;

/// Every answer just after the deadline, at a kubelet's cadence, on a loaded node (two busy
/// loops beside the probe): the run is not judged, exit 0, every time; a run out of time
/// while it waits on NATS is never "could not evaluate". The same answers inside a longer
/// deadline are judged: they are real answers, only late.
#[test]
fn answers_just_after_the_deadline_on_a_loaded_node_restart_nothing() {
    let _serial = timing_lock();
    // The late service alone answers.
    let pods = Pods::bare();
    let late = crate::harness::responder::Late::start(
        &pods.nats,
        &pods.url,
        &["$JS.API.CONSUMER.INFO.>"],
        CONSUMER_INFO,
        std::time::Duration::from_millis(800),
    );
    let _app = pods.client("conn", &["-subscribe", "deliver.D"]);
    // Inside a longer deadline, the answer judges.
    pods.check(&["S/D"], &["--timeout", "3s", "--sample-every", "0"])
        .expect(0)
        .says(&["consumer S/D idle"]);
    let _load = crate::harness::load::BusyLoops::spawn(2);
    let mut runs = Vec::new();
    for _ in 0..20 {
        let run = pods.check(&["S/D"], &["--sample-every", "0"]);
        // The network phase ends before the deadline, with room for the rest of the run; on
        // a loaded machine the rest may still outlast it, and the whole run is not judged.
        let line = run.expect(0).line();
        assert!(
            line.starts_with("healthy: consumer S/D not judged: ")
                || line.starts_with("healthy: not judged: --timeout 800ms passed while "),
            "{run}"
        );
        runs.push(run);
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // Spawn to reap, as the kubelet times it: the probe's own deadline is 800 ms from its
    // start; starting and reaping a process on this loaded machine comes on top, inside the
    // kubelet's default timeout of 1 s for the runs' median. A single run can be held longer
    // by the machine (two busy loops and the rest of the suite on two cores): the line above
    // shows it did not wait for the answer, which would have judged it.
    let mut elapsed: Vec<_> = runs.iter().map(|r| r.elapsed).collect();
    elapsed.sort();
    let (median, slowest) = (elapsed[elapsed.len() / 2], elapsed[elapsed.len() - 1]);
    assert!(
        median < std::time::Duration::from_secs(1),
        "the runs outlived the kubelet's timeout: median {median:?}"
    );
    assert!(late.answered.load(std::sync::atomic::Ordering::SeqCst) >= 20);
    println!(
        "nats trouble | answers 800ms late, two busy loops: 20 runs exit 0, median {median:?}, slowest {slowest:?}: {}",
        runs[0].line()
    );
}

/// A probe given no CPU for a second while it waits on NATS (stopped mid-run, as a starved
/// node does to it): its deadline passes there, and the run ends not judged, exit 0, naming
/// where it was; with --when-server-down fail, 1. Never "could not evaluate", which the kubelet
/// would count as a failure. Frozen while it reads its own sockets, it would be exit 3: that
/// is the pod's own.
#[test]
fn a_deadline_that_passes_while_waiting_on_nats_is_not_judged() {
    let pods = Pods::bare();
    let _late = crate::harness::responder::Late::start(
        &pods.nats,
        &pods.url,
        &["$JS.API.CONSUMER.INFO.>"],
        CONSUMER_INFO,
        std::time::Duration::from_secs(5),
    );
    let _app = pods.client("conn", &["-subscribe", "deliver.D"]);
    let state = pods.state.path().to_string_lossy().to_string();
    let frozen = |extra: &[&str], json: bool| {
        let mut args = vec![
            "check",
            "--server",
            &pods.url,
            "--consumer",
            "S/D",
            "--state-dir",
            &state,
            "--sample-every",
            "0",
        ];
        args.extend_from_slice(extra);
        if json {
            args.push("--json");
        }
        probe(&args)
            .ns(&pods.app)
            .frozen(
                std::time::Duration::from_millis(200),
                std::time::Duration::from_secs(1),
            )
            .run()
    };
    let run = frozen(&[], false);
    run.expect(0).says(&[
        "healthy: not judged: --timeout 800ms passed while asking JetStream about the consumers",
    ]);
    println!(
        "nats trouble | frozen while asking JetStream: {}",
        run.line()
    );
    let json = frozen(&[], true);
    json.expect(0);
    assert_eq!(json.json()["verdict"], "healthy", "{json}");
    frozen(&["--when-server-down", "fail"], false)
        .expect(1)
        .says(&["unhealthy: not judged: --timeout 800ms passed while asking JetStream"]);
}

/// The probe's own login refused (the auth service down) says nothing of the consumer's
/// connection: a stall counted before the refusals goes on counting after them, measured
/// from the last look that saw the consumer. Only silence (no connection, no answer in time)
/// is a gap that starts the stall clock over; before, a refusal was one, and a consumer that
/// stopped acking was called a whole window after every refused login.
#[test]
fn a_stall_counts_on_across_refused_logins() {
    use std::time::{Duration, Instant};
    let (pods, service, issuer, _wedged) = behind_a_callout_consuming(&["-ack", "never"]);
    pods.publish_n("s.x", 20);
    // A 4 s window (ack_wait is 1 s): room for a refusal inside it.
    let check = || window_of_four_seconds(&pods, &APP);
    check().expect(0).says(&["consumer S/D first sample"]);
    let first = Instant::now();
    std::thread::sleep(PERIOD);
    check().expect(0).says(&["consumer S/D no progress for"]);
    service.stop();
    let refused = check();
    refused.expect(0).says(&[
        "consumer S/D not judged: authorization error: the server refused the probe's credentials",
    ]);
    std::thread::sleep(PERIOD);
    let _service = Callout::start(&pods.nats, &pods.url, &issuer.seed().unwrap());
    let back = first.elapsed();
    let failed = first_failure(check, first, Duration::from_secs(10));
    let after = first.elapsed();
    show(
        &format!("a stall across refused logins (back after {back:?}, failed after {after:?})"),
        &failed,
    );
    failed.says(&["unhealthy: consumer S/D: no progress for 4"]);
    // A window from the first look, not a window from the service's return.
    assert!(
        after < back + Duration::from_secs(4),
        "failed {after:?} after the first look, the service back after {back:?}"
    );
}

/// `check --consumer S/D` in the app pod, with a 4 s window and the pods' state dir, plus
/// `extra`.
fn window_of_four_seconds(pods: &Pods, extra: &[&str]) -> Run {
    let state = pods.state.path().to_string_lossy().to_string();
    let mut args = vec![
        "check",
        "--server",
        &pods.url,
        "--stall-after",
        "4s",
        "--state-dir",
        &state,
        "--consumer",
        "S/D",
    ];
    args.extend_from_slice(extra);
    probe(&args).ns(&pods.app).run()
}

/// Runs `check` a period apart until one exits 1 (every run before exits 0), failing the test
/// if none has by `limit` after `first`.
fn first_failure(
    check: impl Fn() -> Run,
    first: std::time::Instant,
    limit: std::time::Duration,
) -> Run {
    loop {
        let run = check();
        if run.code == Some(1) {
            return run;
        }
        run.expect(0);
        assert!(first.elapsed() < limit, "never failed: {run}");
        std::thread::sleep(PERIOD);
    }
}

/// A consumer's info as a 2.10 server gives it: bound, one message delivered and never
/// acknowledged, 14 more waiting; ack_wait 1 s.
const WEDGED_INFO: &str = r#"{"type":"io.nats.jetstream.api.v1.consumer_info_response","stream_name":"S","name":"D","created":"2026-12-01T08:00:37.196393002Z","config":{"durable_name":"D","name":"D","deliver_policy":"all","ack_policy":"explicit","ack_wait":1000000000,"max_deliver":-1,"replay_policy":"instant","max_ack_pending":1,"deliver_subject":"deliver.D","deliver_group":"D","num_replicas":0},"delivered":{"consumer_seq":6,"stream_seq":6},"ack_floor":{"consumer_seq":5,"stream_seq":5},"num_ack_pending":1,"num_redelivered":0,"num_waiting":0,"num_pending":14,"push_bound":true,"ts":"2026-12-01T08:00:42.536597137Z"}"#;

/// Stream S's info as a 2.10 server gives it: limits, no limit set (retention deletes
/// nothing unacknowledged), messages 1 to 20.
const PLAIN_STREAM_INFO: &str = r#"{"type":"io.nats.jetstream.api.v1.stream_info_response","config":{"name":"S","subjects":["s.>"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"discard":"old","storage":"file","num_replicas":1},"created":"2026-12-01T08:00:37.196393002Z","state":{"messages":20,"bytes":900,"first_seq":1,"last_seq":20,"consumer_count":1}}"#;

/// A look answered too late (JetStream slow for one run, as under a slow server or a starved
/// node) leaves the clock counting: the next look measures from the last one answered. A
/// consumer that stopped acking is called a window after its stall began, not a window after
/// the late answer; under a server often slow, every late answer put the call off by a
/// window.
#[test]
fn a_stall_counts_on_across_a_late_answer() {
    use crate::harness::responder::Late;
    use std::time::{Duration, Instant};
    let pods = Pods::bare();
    let answering = |delay: u64| {
        Late::start(
            &pods.nats,
            &pods.url,
            &["$JS.API.CONSUMER.INFO.>"],
            WEDGED_INFO,
            Duration::from_millis(delay),
        )
    };
    // Its stream, on time throughout: work waits, and the consumer is judged with it.
    let _stream = Late::start(
        &pods.nats,
        &pods.url,
        &["$JS.API.STREAM.INFO.>"],
        PLAIN_STREAM_INFO,
        Duration::ZERO,
    );
    let _app = pods.client("conn", &["-subscribe", "deliver.D"]);
    // A 4 s window; ack_wait is 1 s.
    let check = || window_of_four_seconds(&pods, &["--sample-every", "0"]);
    let on_time = answering(0);
    check().expect(0).says(&["consumer S/D first sample"]);
    let first = Instant::now();
    while first.elapsed() < Duration::from_millis(2500) {
        std::thread::sleep(PERIOD);
        check().expect(0).says(&["consumer S/D no progress for"]);
    }
    drop(on_time);
    let slow = answering(900);
    let late = check();
    drop(slow);
    let _on_time = answering(0);
    late.expect(0)
        .says(&["consumer S/D not judged: ", "answer before the deadline"]);
    let back = first.elapsed();
    let failed = first_failure(check, first, back + Duration::from_secs(8));
    let after = first.elapsed();
    show(
        &format!("a stall across a late answer (back after {back:?}, failed after {after:?})"),
        &failed,
    );
    failed.says(&["unhealthy: consumer S/D: no progress for 4"]);
    // 2 s carried: the runs after the late answer see the other 2 s, not a whole window.
    assert!(
        after < back + Duration::from_millis(3500),
        "failed {after:?} after the first look, JetStream on time again after {back:?}"
    );
}

/// With work waiting, a consumer is judged only with its stream's retention known: a moving
/// floor is acks only where retention deletes nothing unacknowledged. A stream that cannot be
/// read leaves the consumer not judged, for the stream's reason; before, it was judged
/// without it, and a wedged consumer on a stream that deletes from the front could pass as
/// "progressing" on a loaded node, its floor's clock started over.
#[test]
fn a_consumer_whose_stream_cannot_be_read_is_not_judged() {
    use crate::harness::responder::Late;
    use std::time::Duration;
    let pods = Pods::bare();
    // The consumer's info is answered (work waiting); its stream's is not.
    let _consumers = Late::start(
        &pods.nats,
        &pods.url,
        &["$JS.API.CONSUMER.INFO.>"],
        WEDGED_INFO,
        Duration::ZERO,
    );
    let _app = pods.client("conn", &["-subscribe", "deliver.D"]);
    let run = window_of_four_seconds(&pods, &[]);
    show("a consumer whose stream cannot be read", &run);
    run.expect(0).says(&["consumer S/D not judged: "]);
}
