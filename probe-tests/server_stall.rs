//! Restart only when it helps, for a consumer whose work waits while the pod holds none of it:
//! real nats.go peers on a real nats-server, under the harness's kubelet (`periodSeconds`
//! 500 ms, `failureThreshold` 3, `--stall-after 4s` over an `ack_wait` of 1 s: a 4 s window,
//! the probe's own sampling defaults).
//!
//! - NATS holds the work back: a push consumer throttled by `rate_limit_bps` (the server sends
//!   a burst of about 1 MB and holds the rest), and a pull consumer whose pod's requests wait
//!   in a priority group pinned to another client (nats-server 2.11+ `pinned_client`): never
//!   restarted, `server_not_delivering` once the window passes.
//! - A poison message NAKed with a delay longer than the test in a serialized consumer: one
//!   restart, then `restart_did_not_help`; with `--restart-again-after`, one more restart when
//!   the episode ends, not before.
//! - A hang that a restart fixes is restarted again the next time it hangs.
//!
//! The other controls are elsewhere: a wedged handler that never acks and an unbound consumer
//! are restarted in `restart::each_fault_restarts_within_its_time` (`Fault::Stalled`,
//! `Fault::Unbound`).

use crate::harness::kubelet::{Kubelet, Spec};
use crate::harness::pods::*;
use crate::harness::probe::Run;
use crate::harness::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PERIOD_MS: u64 = 500;
/// `--stall-after`: with `ack_wait` 1 s the window is this.
const STALL_AFTER: &str = "4s";
const WINDOW_4S: Duration = Duration::from_secs(4);

fn spec() -> Spec {
    Spec::scaled(
        Duration::from_millis(PERIOD_MS),
        Duration::from_secs(1),
        3,
        0.05,
    )
}

/// The liveness probe's flags for `consumer` with its samples in `state`, plus `extra`: the
/// same as every look a test takes itself (plus `--json`), so the two share one state file.
fn check_flags(url: &str, consumer: &str, state: &str, extra: &[&str]) -> Vec<String> {
    let mut flags: Vec<String> = [
        "check",
        "--server",
        url,
        "--consumer",
        consumer,
        "--stall-after",
        STALL_AFTER,
        "--state-dir",
        state,
        "--timeout",
        "800ms",
    ]
    .map(String::from)
    .to_vec();
    flags.extend(extra.iter().map(|s| s.to_string()));
    flags
}

/// The pod under a kubelet: its container the natspeer command line `container` in the app
/// namespace, started when it says "ready"; its liveness probe `check_flags`.
fn under_kubelet(pods: &Pods, container: &[&str], consumer: &str, extra: &[&str]) -> Kubelet {
    let args: Vec<String> = pods
        .args(container[0], &container[1..])
        .into_iter()
        .map(String::from)
        .collect();
    let app = Arc::clone(&pods.app);
    let start = Box::new(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut p = Peer::spawn(Some(&app), &args);
        p.wait_for("ready", S10);
        p
    });
    let state = pods.state.path().to_string_lossy().to_string();
    let check = check_flags(&pods.url, consumer, &state, extra);
    let app = Arc::clone(&pods.app);
    let probe_cmd = Box::new(move || {
        let args: Vec<&str> = check.iter().map(String::as_str).collect();
        probe(&args).ns(&app).sampling_defaults().command()
    });
    Kubelet::start(spec(), probe_cmd, start)
}

/// `check --json` as the kubelet's probe runs it, looking now, on its state dir.
fn look(pods: &Pods, consumer: &str, extra: &[&str]) -> Run {
    let state = pods.state.path().to_string_lossy().to_string();
    let mut args = check_flags(&pods.url, consumer, &state, extra);
    args.push("--json".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    probe(&args).ns(&pods.app).run()
}

/// The consumer's info as the server gives it (`$JS.API.CONSUMER.INFO`), asked from the NATS
/// pod.
fn server_info(pods: &Pods, stream: &str, durable: &str) -> serde_json::Value {
    let mut info = Peer::spawn(
        Some(&pods.nats),
        &pods.args("info", &["-stream", stream, "-durable", durable]),
    );
    let line = info.wait_for("{", S10);
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("consumer info ({e}): {line}"))
}

/// How long before the server's `ts` it last delivered (None: nothing since it started).
fn delivered_ago(info: &serde_json::Value) -> Option<Duration> {
    let time = |v: &serde_json::Value| natsprobe::observe::jetstream::parse_time(v.as_str()?);
    let (ts, last) = (time(&info["ts"])?, time(&info["delivered"]["last_active"])?);
    Some(Duration::from_nanos((ts - last).max(0) as u64))
}

/// The numbers that decide, in one line.
fn facts(info: &serde_json::Value) -> String {
    format!(
        "num_pending {}, num_ack_pending {}, num_waiting {}, push_bound {}, delivered {} (stream {}), \
         ack floor {}, delivered.last_active {:?} before ts",
        info["num_pending"],
        info["num_ack_pending"],
        info["num_waiting"],
        info["push_bound"],
        info["delivered"]["consumer_seq"],
        info["delivered"]["stream_seq"],
        info["ack_floor"]["consumer_seq"],
        delivered_ago(info),
    )
}

/// The consumer's part of `run` is `state`, not judged for that cause, and the run passes.
#[track_caller]
fn not_judged_as(run: &Run, state: &str) {
    run.expect(0);
    let c = consumer_json(run, 0);
    assert_eq!(
        (
            c["verdict"].as_str(),
            c["state"].as_str(),
            c["cannot_judge"]["cause"].as_str()
        ),
        (Some("not_judged"), Some(state), Some(state)),
        "{run}"
    );
}

/// The kubelet's failing runs, other than those the test machine held past their own
/// --timeout.
fn failures(kubelet: &Kubelet) -> Vec<String> {
    kubelet
        .probed()
        .into_iter()
        .filter(|(_, passed, line)| !passed && !line.contains("--timeout"))
        .map(|(_, _, line)| line)
        .collect()
}

fn restarts(kubelet: &Kubelet, since: Instant) -> usize {
    kubelet.kills_between(since, Instant::now() + Duration::from_secs(1))
}

/// NATS held the work back: no probe run failed, nothing was restarted, and the check says
/// whose stall it is.
#[track_caller]
fn never_restarted_held_back(kubelet: &Kubelet, restarted: usize, run: &Run) {
    assert_eq!(restarted, 0, "restarted:\n{}", kubelet.log());
    assert_eq!(failures(kubelet), Vec::<String>::new(), "{}", kubelet.log());
    not_judged_as(run, "server_not_delivering");
}

/// A push consumer throttled by `rate_limit_bps` 800 (100 bytes a second) with 40 messages of
/// 100 KB waiting: the server sends a burst of about 1 MB (its rate limiter's burst is the
/// largest message it may carry) and holds the rest, for the 1,000 s each further message
/// needs. The app acks everything it gets and holds nothing. Never restarted; once the window
/// passes, the check says NATS is not delivering.
#[test]
fn a_throttled_push_consumer_is_never_restarted() {
    let pods = Pods::new(Version::Pinned);
    pods.setup(&[
        "-stream",
        "S",
        "-subjects",
        "s.>",
        "-durable",
        "D",
        "-deliver-subject",
        "deliver.D",
        "-deliver-group",
        "D",
        "-ack-wait",
        "1s",
        "-rate-limit",
        "800",
    ]);
    let publish = Peer::spawn(
        Some(&pods.nats),
        &pods.args(
            "publish",
            &[
                "-subject", "s.x", "-count", "40", "-size", "100000", "-rate", "0", "-js",
            ],
        ),
    );
    assert!(publish.wait_exit(Duration::from_secs(30)).success());
    let started = Instant::now();
    let push = push_consumer("S", "D");
    let mut container = vec!["consume"];
    container.extend(push.iter().map(String::as_str));
    container.extend(["-report-every", "1"]);
    let mut kubelet = under_kubelet(&pods, &container, "S/D", &[]);
    // The burst, acked; then the server holds the rest.
    wait_until("the burst acked", S10, || {
        let info = server_info(&pods, "S", "D");
        info["num_ack_pending"] == 0 && info["ack_floor"]["consumer_seq"].as_u64() >= Some(5)
    });
    // Three windows: a stall would have been called and the kubelet's three failures made.
    std::thread::sleep(WINDOW_4S * 3);
    let info = server_info(&pods, "S", "D");
    let run = look(&pods, "S/D", &[]);
    // The guard, the independent witness, names it NATS's: a fault, but not the pod's.
    let guard = probe(&[
        "guard",
        "--server",
        pods.url.as_str(),
        "--interval",
        "1s",
        "--stall-after",
        "4s",
        "--json",
    ])
    .ns(&pods.app)
    .run();
    kubelet.stop();
    let guard = guard.expect(1).json();
    assert_eq!(guard["consumers"][0]["verdict"], "server_fault", "{guard}");
    assert!(
        guard["summary"]
            .as_str()
            .unwrap()
            .ends_with(": S/D (NATS's)"),
        "{guard}"
    );
    let restarted = restarts(&kubelet, started);
    println!(
        "server_stall | throttled push consumer (rate_limit_bps 800, 40 x 100 KB): {}; {restarted} \
         restarts; {}",
        facts(&info),
        run.json()["summary"]
    );
    assert_eq!(
        (
            info["num_ack_pending"].as_u64(),
            info["push_bound"].as_bool()
        ),
        (Some(0), Some(true)),
        "{info}"
    );
    let (delivered, pending) = (
        info["delivered"]["consumer_seq"].as_u64().unwrap(),
        info["num_pending"].as_u64().unwrap(),
    );
    assert!(
        (5..=15).contains(&delivered) && pending >= 20,
        "a burst of about 1 MB, the rest held: {info}"
    );
    assert!(
        delivered_ago(&info) >= Some(WINDOW_4S * 2),
        "nothing delivered since the burst: {info}"
    );
    never_restarted_held_back(&kubelet, restarted, &run);
}

/// A serialized consumer (`max_ack_pending: 1`) whose app NAKs one message with a delay of an
/// hour: the server holds it pending and delivers nothing else. From outside that is a hang
/// (the pod's one message unacknowledged): restarted once. The new client gets nothing either,
/// and after its window the check says the restart did not help, and passes.
#[test]
fn a_poison_message_is_restarted_once() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    pods.publish_n("s.x", 10);
    let started = Instant::now();
    let push = push_consumer("S", "D");
    let mut container = vec!["consume"];
    container.extend(push.iter().map(String::as_str));
    container.extend(["-report-every", "1", "-poison", "3", "-nak-delay", "1h"]);
    let mut kubelet = under_kubelet(&pods, &container, "S/D", &[]);
    wait_until("the poison NAKed", S10, || {
        kubelet.with_runs(|runs| runs[0].saw("poisoned 3"))
    });
    wait_until("the restart", Duration::from_secs(30), || {
        kubelet.first_kill_after(started).is_some()
    });
    let first = kubelet.first_kill_after(started).unwrap();
    // The new client's window, its three failures and more: no second restart.
    std::thread::sleep(WINDOW_4S * 4);
    let info = server_info(&pods, "S", "D");
    let run = look(&pods, "S/D", &[]);
    kubelet.stop();
    let restarted = restarts(&kubelet, started);
    let containers = kubelet.with_runs(|runs| runs.len());
    let got_it_again = kubelet.with_runs(|runs| runs[1..].iter().any(|r| r.saw("poisoned")));
    println!(
        "server_stall | poison message (max_ack_pending 1, NakWithDelay 1h): {}; restarted \
         {:?} after the NAK's container started, {restarted} restarts; {}",
        facts(&info),
        first - started,
        run.json()["summary"]
    );
    assert_eq!(
        (
            info["num_ack_pending"].as_u64(),
            info["delivered"]["stream_seq"].as_u64(),
            info["ack_floor"]["stream_seq"].as_u64(),
            info["num_pending"].as_u64()
        ),
        (Some(1), Some(3), Some(2), Some(7)),
        "the poison pending, nothing after it delivered: {info}"
    );
    assert!(!got_it_again, "the server delivered it again");
    assert_eq!((restarted, containers), (1, 2), "{}", kubelet.log());
    not_judged_as(&run, "restart_did_not_help");
}

/// The same poison with `--restart-again-after 12s`: the episode ends 12 s after natsprobe
/// first failed the pod for it, and the stall, still there, is restarted once more, not before;
/// then the new episode's restart did not help either.
#[test]
fn a_poison_message_is_tried_again_after_restart_again_after() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    pods.publish_n("s.x", 10);
    let again = ["--restart-again-after", "12s"];
    let started = Instant::now();
    let push = push_consumer("S", "D");
    let mut container = vec!["consume"];
    container.extend(push.iter().map(String::as_str));
    container.extend(["-poison", "3", "-nak-delay", "1h"]);
    let mut kubelet = under_kubelet(&pods, &container, "S/D", &again);
    wait_until("the first restart", Duration::from_secs(30), || {
        kubelet.first_kill_after(started).is_some()
    });
    let first_kill = kubelet.first_kill_after(started).unwrap();
    let first_failure = kubelet
        .probed()
        .into_iter()
        .find(|(_, passed, _)| !passed)
        .map(|(ended, _, _)| ended)
        .unwrap();
    let not_helped = loop {
        let run = look(&pods, "S/D", &again);
        let c = consumer_json(&run, 0);
        if c["state"] == "restart_did_not_help" {
            break run;
        }
        assert!(
            first_failure.elapsed() < Duration::from_secs(11),
            "no restart_did_not_help before the episode's end\n{run}\n{}",
            kubelet.log()
        );
        std::thread::sleep(Duration::from_millis(PERIOD_MS));
    };
    not_judged_as(&not_helped, "restart_did_not_help");
    wait_until("the second restart", Duration::from_secs(30), || {
        kubelet
            .first_kill_after(first_kill + Duration::from_millis(1))
            .is_some()
    });
    let second_kill = kubelet
        .first_kill_after(first_kill + Duration::from_millis(1))
        .unwrap();
    // The new episode: its client's window and its three failures, no third restart.
    std::thread::sleep(WINDOW_4S + Duration::from_secs(3));
    let run = look(&pods, "S/D", &again);
    kubelet.stop();
    let restarted = restarts(&kubelet, started);
    println!(
        "server_stall | poison, --restart-again-after 12s: first failure {:?} after the start, \
         restarted {:?} and {:?} after the first failure, {restarted} restarts; {}",
        first_failure - started,
        first_kill - first_failure,
        second_kill - first_failure,
        run.json()["summary"]
    );
    let period = Duration::from_millis(PERIOD_MS);
    assert!(
        second_kill - first_failure >= Duration::from_secs(12)
            && second_kill - first_failure <= Duration::from_secs(12) + 6 * period,
        "restarted again {:?} after the first failure\n{}",
        second_kill - first_failure,
        kubelet.log()
    );
    assert_eq!(restarted, 2, "{}", kubelet.log());
    not_judged_as(&run, "restart_did_not_help");
}

/// nats-server 2.11+'s priority groups with `priority_policy: pinned_client`: client A (in the
/// NATS pod) pulls in group G, is pinned, takes one message and stops pulling, its connection
/// held; the pin lasts `priority_timeout` (an hour) without a pull from it. The pod's client B
/// pulls in G and waits while 19 messages wait: the server delivers none to it. Never
/// restarted; `server_not_delivering` once the window passes.
#[test]
fn pulls_waiting_on_a_group_pinned_to_another_client_are_never_restarted() {
    let pods = Pods::new(Version::Newest);
    pods.setup(&["-stream", "S", "-subjects", "s.>"]);
    let config = r#"{"stream_name":"S","action":"create","config":{"durable_name":"P","ack_policy":"explicit","ack_wait":1000000000,"priority_groups":["G"],"priority_policy":"pinned_client","priority_timeout":3600000000000}}"#;
    let mut create = Peer::spawn(
        Some(&pods.nats),
        &pods.args(
            "request",
            &["-subject", "$JS.API.CONSUMER.CREATE.S.P", "-data", config],
        ),
    );
    let created = create.wait_for("{", S10);
    assert!(
        !created.contains("\"error\"") && created.contains("\"pinned_client\""),
        "{created}"
    );
    pods.publish_n("s.x", 20);
    let pull = ["-stream", "S", "-durable", "P", "-group", "G"];
    let mut a = Peer::spawn(
        Some(&pods.nats),
        &pods.args("pin-pull", &[&pull[..], &["-take", "1"][..]].concat()),
    );
    a.wait_for("pinned", S10);
    a.wait_for("stopped pulling", S10);
    let started = Instant::now();
    let mut container = vec!["pin-pull"];
    container.extend(pull);
    container.extend(["-expires", "1m"]);
    let mut kubelet = under_kubelet(&pods, &container, "S/P", &[]);
    wait_until("the pod's pull request waiting", S10, || {
        server_info(&pods, "S", "P")["num_waiting"].as_u64() >= Some(1)
    });
    std::thread::sleep(WINDOW_4S * 3);
    let info = server_info(&pods, "S", "P");
    let run = look(&pods, "S/P", &[]);
    kubelet.stop();
    let restarted = restarts(&kubelet, started);
    let got = kubelet.with_runs(|runs| runs.iter().any(|r| r.saw("acked")));
    println!(
        "server_stall | pull requests waiting on a group pinned to another client: {}; pinned \
         {}; {restarted} restarts; {}",
        facts(&info),
        info["priority_groups"][0]["pinned_client_id"],
        run.json()["summary"]
    );
    assert!(a.is_alive(), "the pinned client holds its connection");
    assert!(!got, "the pod's client was given a message");
    assert_eq!(
        (
            info["num_ack_pending"].as_u64(),
            info["num_pending"].as_u64()
        ),
        (Some(0), Some(19)),
        "{info}"
    );
    assert!(info["num_waiting"].as_u64() >= Some(1), "{info}");
    assert!(
        delivered_ago(&info) >= Some(WINDOW_4S * 2),
        "nothing delivered since A's message: {info}"
    );
    never_restarted_held_back(&kubelet, restarted, &run);
}

/// The control: a handler that hangs holding its message, where a restart fixes it (the new
/// client gets the message again and acks). Restarted; healthy after; and when the new client
/// hangs too, restarted again: a restart that helped never excuses the next hang.
#[test]
fn a_hang_a_restart_fixes_is_restarted_each_time() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let _producer = pods.producer("s.x", 20);
    let started = Instant::now();
    let push = push_consumer("S", "D");
    let mut container = vec!["consume"];
    container.extend(push.iter().map(String::as_str));
    container.extend(["-report-every", "20"]);
    let mut kubelet = under_kubelet(&pods, &container, "S/D", &[]);
    let hang = |kubelet: &Kubelet| {
        kubelet.with_runs(|runs| {
            let app = runs.last().unwrap();
            app.signal(libc::SIGUSR1);
        });
        let at = Instant::now();
        wait_until("the restart", Duration::from_secs(30), || {
            kubelet.first_kill_after(at).is_some()
        });
        kubelet.first_kill_after(at).unwrap() - at
    };
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(restarts(&kubelet, started), 0, "{}", kubelet.log());
    let first = hang(&kubelet);
    // The new client acks: healthy through a window and more.
    wait_until("the new client acking", S10, || {
        kubelet.with_runs(|runs| runs.len() == 2 && runs[1].saw("acked"))
    });
    let calm = Instant::now();
    std::thread::sleep(WINDOW_4S + Duration::from_secs(2));
    let healthy = look(&pods, "S/D", &[]);
    healthy.expect(0);
    let c = consumer_json(&healthy, 0);
    assert_eq!(c["verdict"], "healthy", "{healthy}");
    assert_eq!(restarts(&kubelet, calm), 0, "{}", kubelet.log());
    let second = hang(&kubelet);
    kubelet.stop();
    let restarted = restarts(&kubelet, started);
    println!(
        "server_stall | a hang a restart fixes: restarted {first:?} after the first hang, healthy \
         after ({}), restarted {second:?} after the second; {restarted} restarts",
        c["state"]
    );
    assert_eq!(restarted, 2, "{}", kubelet.log());
}
