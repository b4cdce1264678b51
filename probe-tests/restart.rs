//! Time to restart, measured: each fault made to a real nats.go consumer under the harness's
//! kubelet (`periodSeconds` 500 ms, `failureThreshold` 3, the probe's own `--sample-every`
//! and `--subscription-every` defaults, `--stall-after 2s`), and the time from the fault to
//! the kubelet's restart held against what the probe's rules compute for the same settings
//! (`rules::restart`, which gives the README's table at the real ones). A deaf replica is
//! caught with three probes sharing its state dir (liveness, readiness and `diagnose`), every
//! liveness run judged, and its healthy twin is never restarted.

use crate::harness::kubelet::{Kubelet, Spec};
use crate::harness::pods::*;
use crate::harness::*;
use natsprobe::rules::remembered::TrustSetting;
use natsprobe::rules::restart::Cadence;
use natsprobe::rules::restart::{time_to_restart, Fault, Settings};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PERIOD_MS: u64 = 500;

/// The scaled settings, as the probe sees them: `--stall-after 2s` (the push consumers'
/// ack_wait is 1 s, so the window is 2 s), `--sample-every` its default 3/4 of that.
fn settings() -> Settings {
    Settings {
        cadence: Cadence {
            period: Duration::from_millis(PERIOD_MS),
            sample_every: Duration::from_millis(1500),
            window: Duration::from_secs(2),
        },
        failure_threshold: 3,
        half_open_after: Duration::from_secs(30),
        trust: TrustSetting::Auto,
    }
}

fn spec() -> Spec {
    Spec::scaled(
        Duration::from_millis(PERIOD_MS),
        Duration::from_secs(1),
        3,
        0.05,
    )
}

/// Holds `measured` against the rules' span for `fault`, give or take a probe's run and the
/// kubelet's own drift: a period. The rules count runs that finish; a run the test machine
/// held past its own --timeout (not judged, or not evaluated) is a run lost, and costs its
/// period, counted from the runs after the fault.
fn within(fault: Fault, (at, measured): (Instant, Duration), kubelet: &Kubelet) {
    let span = time_to_restart(fault, &settings());
    let lost = kubelet
        .probed()
        .iter()
        .filter(|(ended, _, line)| {
            *ended >= at
                && *ended <= at + measured
                && (line.starts_with("not judged: --timeout")
                    || line.starts_with("could not evaluate: --timeout"))
        })
        .count() as u32;
    let slack = Duration::from_millis(PERIOD_MS) * (1 + lost);
    println!(
        "restart | {fault:?}: restarted {measured:?} after the fault; the rules say {:?} to {:?}",
        span.fastest, span.slowest
    );
    assert!(
        measured + slack >= span.fastest && measured <= span.slowest + slack,
        "{fault:?}: restarted {measured:?} after the fault, the rules say {:?} to {:?}\n{}",
        span.fastest,
        span.slowest,
        kubelet.log()
    );
}

/// The app pod's consumer `S/D` under a kubelet whose liveness probe is `check --server URL
/// --consumer S/D` plus `extra`; the consumer's container is `consume` plus `consume`.
fn consumer_under_kubelet(pods: &Pods, consume: &[&str], extra: &[&str]) -> Kubelet {
    let push = push_consumer("S", "D");
    let mut rest: Vec<String> = push;
    rest.extend(consume.iter().map(|s| s.to_string()));
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    let args: Vec<String> = pods
        .args("consume", &rest)
        .into_iter()
        .map(String::from)
        .collect();
    let state = pods.state.path().to_string_lossy().to_string();
    under_kubelet(&pods.app, args, &pods.url, &state, extra)
}

/// A pod in `ns` under a kubelet: its container the natspeer command line `consume`, started
/// when it says "ready"; its liveness probe `check --server URL --consumer S/D --stall-after
/// STALL --state-dir STATE --timeout 400ms` plus `flags`.
fn under_kubelet(
    ns: &Arc<NetNs>,
    consume: Vec<String>,
    url: &str,
    state: &str,
    flags: &[&str],
) -> Kubelet {
    under_kubelet_for(ns, consume, url, state, "S/D", flags)
}

/// `under_kubelet`, for the consumer `consumer` (STREAM/DURABLE).
fn under_kubelet_for(
    ns: &Arc<NetNs>,
    consume: Vec<String>,
    url: &str,
    state: &str,
    consumer: &str,
    flags: &[&str],
) -> Kubelet {
    let app = Arc::clone(ns);
    let container = Box::new(move || {
        let args: Vec<&str> = consume.iter().map(String::as_str).collect();
        let mut p = Peer::spawn(Some(&app), &args);
        p.wait_for("ready", S10);
        p
    });
    let mut check: Vec<String> = [
        "check",
        "--server",
        url,
        "--consumer",
        consumer,
        "--stall-after",
        STALL,
        "--state-dir",
        state,
        "--timeout",
        "400ms",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    check.extend(flags.iter().map(|s| s.to_string()));
    let app = Arc::clone(ns);
    let probe_cmd = Box::new(move || {
        let args: Vec<&str> = check.iter().map(String::as_str).collect();
        probe(&args).ns(&app).sampling_defaults().command()
    });
    Kubelet::start(spec(), probe_cmd, container)
}

/// Lets the kubelet run calm for a few seconds: no restart before the fault.
fn calm(kubelet: &Kubelet) {
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        kubelet
            .first_kill_after(Instant::now() - Duration::from_secs(60))
            .is_none(),
        "restarted before any fault:\n{}",
        kubelet.log()
    );
}

fn restarted(kubelet: &Kubelet, fault: Instant, limit: Duration) -> Duration {
    wait_until("the restart", limit, || {
        kubelet.first_kill_after(fault).is_some()
    });
    kubelet.first_kill_after(fault).unwrap() - fault
}

fn signal_app(kubelet: &Kubelet, signal: libc::c_int) {
    kubelet.with_runs(|runs| runs.last().unwrap().signal(signal));
}

/// The pod's consumer `S/D` under a kubelet, work coming in, calm; then `inject` the fault,
/// and the time to the restart held against the rules' span for `fault`.
fn fault_restarts_in_time(fault: Fault, inject: impl FnOnce(&Pods, &Kubelet)) {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let _producer = pods.producer("s.x", 20);
    let kubelet = consumer_under_kubelet(&pods, &[], &[]);
    calm(&kubelet);
    inject(&pods, &kubelet);
    let at = Instant::now();
    within(
        fault,
        (at, restarted(&kubelet, at, Duration::from_secs(20))),
        &kubelet,
    );
}

#[test]
fn each_fault_restarts_within_its_time() {
    let _serial = timing_lock();
    // The consumer stops acking (work keeps coming): a stall, from its last ack.
    fault_restarts_in_time(Fault::Stalled, |_, kubelet| {
        signal_app(kubelet, libc::SIGUSR1)
    });
    // The consumer's subscriber is gone while work waits.
    fault_restarts_in_time(Fault::Unbound, |_, kubelet| {
        signal_app(kubelet, libc::SIGHUP)
    });
    // The durable deleted.
    fault_restarts_in_time(Fault::Absent, |pods, _| {
        let _ = Peer::spawn(
            Some(&pods.nats),
            &pods.args("request", &["-subject", "$JS.API.CONSUMER.DELETE.S.D"]),
        )
        .wait_exit(S10);
    });
    // The client gives up reconnecting during an outage; NATS back: from then.
    {
        let mut pods = Pods::new(Version::Pinned);
        pods.push("S", "D", &[]);
        let kubelet = consumer_under_kubelet(
            &pods,
            &["-max-reconnects", "3", "-reconnect-wait", "200ms"],
            &[],
        );
        calm(&kubelet);
        pods.server.stop();
        wait_until("the client to give up", S10, || {
            kubelet.with_runs(|runs| runs.last().unwrap().saw("closed"))
        });
        pods.server.resume();
        let fault = Instant::now();
        within(
            Fault::GaveUp,
            (fault, restarted(&kubelet, fault, Duration::from_secs(20))),
            &kubelet,
        );
    }
}

/// Two replicas in a deliver group, each under its kubelet with liveness `--consumer
/// --own-subscription`; beside the first, a readiness probe (`--consumer` alone) every period
/// and a person's `diagnose` every few seconds, all on its state dir. The first goes deaf: its
/// liveness probe restarts it within the time the rules give (asked with each look: a small
/// account), every run judged; the second is never restarted.
#[test]
fn a_deaf_replica_with_three_probes_on_one_state_dir() {
    let _serial = timing_lock();
    let r = crate::subscription::Replicas::new();
    let _server = NatsServer::start(Some(&r.nats), Version::Pinned, "0.0.0.0", 4222);
    let url = format!("nats://{}:4222", r.gateways[0]);
    r.deliver_group(&url, "1");
    let _producer = Peer::spawn(
        Some(&r.nats),
        &[
            "publish",
            "-url",
            "nats://127.0.0.1:4222",
            "-subject",
            "s.x",
            "-rate",
            "20",
        ],
    );
    let kubelet = |i: usize| own_subscription_under_kubelet(&r, i, &[]);
    let (deaf, twin) = (kubelet(0), kubelet(1));
    calm(&deaf);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let others = std::thread::scope(|scope| {
        let readiness = scope.spawn(|| {
            let mut lines = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let run = r.check_with_defaults(
                    0,
                    &[
                        "--server",
                        &url,
                        "--consumer",
                        "S/D",
                        "--stall-after",
                        STALL,
                    ],
                );
                lines.push((run.code, run.line().to_string()));
                std::thread::sleep(Duration::from_millis(PERIOD_MS));
            }
            lines
        });
        let person = scope.spawn(|| {
            let state = r.state.path().join("0").to_string_lossy().to_string();
            let mut runs = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                probe(&[
                    "diagnose",
                    "--server",
                    &url,
                    "--consumer",
                    "S/D",
                    "--stall-after",
                    STALL,
                    "--state-dir",
                    &state,
                ])
                .ns(&r.pods[0])
                .sampling_defaults()
                .run();
                runs += 1;
                std::thread::sleep(Duration::from_secs(2));
            }
            runs
        });
        std::thread::sleep(Duration::from_secs(3));
        signal_app(&deaf, libc::SIGHUP);
        let fault = Instant::now();
        let measured = restarted(&deaf, fault, Duration::from_secs(20));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        within(
            Fault::Deaf {
                connections: 10,
                direct: false,
            },
            (fault, measured),
            &deaf,
        );
        (readiness.join().unwrap(), person.join().unwrap(), fault)
    });
    let (readiness, diagnosed, fault) = others;
    // Every liveness run judged: none passed without looking.
    let probed = deaf.probed();
    assert!(probed.len() >= 10, "{} runs", probed.len());
    for (_, _, line) in &probed {
        assert!(!line.contains("not judged"), "a run not judged: {line}");
    }
    // A run the test machine starved past its own --timeout before it asked anything (exit 3,
    // "passed while starting") says nothing of what the probes share; any other failure does.
    let failed_before_fault = probed
        .iter()
        .filter(|(at, ok, line)| {
            !ok && *at < fault && !line.starts_with("could not evaluate: --timeout")
        })
        .count();
    assert_eq!(failed_before_fault, 0, "{}", deaf.log());
    // The readiness probe on the same state dir (no --own-subscription) never fails: the
    // consumer stays bound through the twin.
    assert!(readiness.len() >= 5 && diagnosed >= 2);
    for (code, line) in &readiness {
        assert_eq!(*code, Some(0), "{line}");
    }
    assert!(
        twin.first_kill_after(Instant::now() - Duration::from_secs(120))
            .is_none(),
        "the healthy replica was restarted:\n{}",
        twin.log()
    );
    println!(
        "restart | deaf replica: {} liveness runs, {} readiness runs, {diagnosed} diagnose runs on one state dir",
        probed.len(),
        readiness.len()
    );
}

/// Replica `i` of `r`'s deliver group under a kubelet, liveness `check --server URL
/// --consumer S/D --own-subscription` plus `extra`, on its own state dir.
fn own_subscription_under_kubelet(
    r: &crate::subscription::Replicas,
    i: usize,
    extra: &[&str],
) -> Kubelet {
    let url = format!("nats://{}:4222", r.gateways[i]);
    let consume: Vec<String> = [
        "consume",
        "-url",
        &url,
        "-deliver-subject",
        "deliver.D",
        "-deliver-group",
        "D",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let state = r.state.path().join(i.to_string());
    let flags = [&["--own-subscription"][..], extra].concat();
    under_kubelet(&r.pods[i], consume, &url, &state.to_string_lossy(), &flags)
}

/// The same deaf replica in an account of 2,000 other connections, where a lookup through the
/// account's report is dear (`auto` would trust the connection 5 minutes): with `--monitor`,
/// the connection is matched at the monitoring port and looked up there directly, with each
/// look, and the replica is restarted within the consumer's time.
#[test]
fn a_deaf_replica_behind_the_monitoring_port_at_the_consumers_pace() {
    let _serial = timing_lock();
    let r = crate::subscription::Replicas::new();
    let _server = NatsServer::start_with(
        Some(&r.nats),
        Version::Pinned,
        "0.0.0.0",
        4222,
        &["-m", "8222"],
    );
    let url = format!("nats://{}:4222", r.gateways[0]);
    r.deliver_group(&url, "1");
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
    let _producer = Peer::spawn(
        Some(&r.nats),
        &[
            "publish",
            "-url",
            "nats://127.0.0.1:4222",
            "-subject",
            "s.x",
            "-rate",
            "20",
        ],
    );
    let monitor = format!("http://{}:8222", r.gateways[0]);
    let deaf = own_subscription_under_kubelet(&r, 0, &["--monitor", &monitor]);
    let twin = own_subscription_under_kubelet(
        &r,
        1,
        &["--monitor", &format!("http://{}:8222", r.gateways[1])],
    );
    calm(&deaf);
    // Looked up at the monitoring port, with each look.
    let run = r.check_with_defaults(
        0,
        &[
            "--server",
            &url,
            "--consumer",
            "S/D",
            "--own-subscription",
            "--stall-after",
            STALL,
            "--monitor",
            &monitor,
            "--sample-every",
            "0s",
            "-v",
        ],
    );
    run.expect(0).says(&["held"]);
    assert!(
        run.stdout.contains("asked for this pod's connection alone"),
        "{run}"
    );
    signal_app(&deaf, libc::SIGHUP);
    let fault = Instant::now();
    within(
        Fault::Deaf {
            connections: 2_000,
            direct: true,
        },
        (fault, restarted(&deaf, fault, Duration::from_secs(20))),
        &deaf,
    );
    assert!(
        twin.first_kill_after(Instant::now() - Duration::from_secs(120))
            .is_none(),
        "the healthy replica was restarted:\n{}",
        twin.log()
    );
}

/// Pods behind an auth callout service (running, returned with the issuer's seed to start
/// it again), with `CAP` a stream that deletes what is not acknowledged (max_msgs 200,
/// discard old: at 400 messages a second retention reaches a wedged floor within a second)
/// and its push consumer `CAP/W`, work coming in.
fn behind_a_callout_losing() -> (Pods, crate::harness::callout::Callout, String, Peer) {
    use crate::harness::callout::{self, Callout};
    let issuer = nkeys::KeyPair::new_account();
    let seed = issuer.seed().unwrap();
    let pods = Pods::with_config(
        &callout::server_config(&issuer),
        &["-user", "app", "-password", "app-pw"],
    );
    let service = Callout::start(&pods.nats, &pods.url, &seed);
    pods.push_with("CAP", "W", "10", &["-max-msgs", "200", "-discard", "old"]);
    let producer = pods.producer("cap.x", 400);
    (pods, service, seed, producer)
}

/// `STREAM/DURABLE`'s consumer as a pod in `ns` under a kubelet, logging in through the
/// callout, its samples in `state`.
fn callout_consumer_under_kubelet(
    pods: &Pods,
    ns: &Arc<NetNs>,
    stream: &str,
    durable: &str,
    state: &str,
) -> Kubelet {
    let push = push_consumer(stream, durable);
    let rest: Vec<&str> = push.iter().map(String::as_str).collect();
    let args: Vec<String> = pods
        .args("consume", &rest)
        .into_iter()
        .map(String::from)
        .collect();
    let consumer = format!("{stream}/{durable}");
    let auth = ["--user", "app", "--password", "app-pw"];
    under_kubelet_for(ns, args, &pods.url, state, &consumer, &auth)
}

/// A second app pod, a network namespace of its own beside `pods.app`, reaching the NATS pod's
/// address through a link of its own: two pods never see each other's sockets.
fn another_pod(pods: &Pods) -> Arc<NetNs> {
    let ns = Arc::new(NetNs::new());
    let (gateway, _) = link_subnet(&pods.nats, &ns, 203);
    ns.ip(&["route", "add", "10.200.0.0/24", "via", &gateway]);
    ns
}

/// The probe's own login refused about 0.5 s of every 1.5 s (the answer an auth callout gives
/// when it times out under load; the apps' connections untouched), and two push consumers
/// wedged under their kubelets: one on a plain stream, one on a stream that deletes what is
/// not acknowledged (max_msgs, discard old). Each is restarted within its bound: the table's
/// slowest time, five periods more for the looks NATS refused (at least one look in three
/// answered: 2 × 3 − 1), and for the second the second retention takes to reach its floor.
/// Before, the runs went `1 1 0 1 1 0 …`: a run that could not look passed, and the kubelet,
/// counting failures in a row, restarted neither.
#[test]
fn wedged_consumers_behind_a_flaky_auth_service_are_restarted() {
    use crate::harness::callout::Callout;
    let _serial = timing_lock();
    let (pods, service, seed, _capped) = behind_a_callout_losing();
    pods.push("S", "D", &[]);
    let _plain = pods.producer("s.x", 20);
    // Two pods, each in its own namespace: a probe's own NATS connection, made while the other
    // pod's probe looks at its socket table, is never the other's.
    let other = another_pod(&pods);
    let kubelet = |ns: &Arc<NetNs>, stream: &str, durable: &str, state: &tempfile::TempDir| {
        let state = state.path().to_string_lossy().to_string();
        callout_consumer_under_kubelet(&pods, ns, stream, durable, &state)
    };
    let (state_d, state_w) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let plain = kubelet(&other, "S", "D", &state_d);
    let capped = kubelet(&pods.app, "CAP", "W", &state_w);
    calm(&plain);
    calm(&capped);
    // The auth service answers 1 s, then is down 0.5 s, over and over.
    let flaky = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flipping = {
        let (flaky, nats, url) = (Arc::clone(&flaky), Arc::clone(&pods.nats), pods.url.clone());
        std::thread::spawn(move || {
            let mut service = Some(service);
            while flaky.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1000));
                if let Some(s) = service.take() {
                    s.stop();
                }
                std::thread::sleep(Duration::from_millis(500));
                service = Some(Callout::start(&nats, &url, &seed));
            }
            service
        })
    };
    signal_app(&plain, libc::SIGUSR1);
    signal_app(&capped, libc::SIGUSR1);
    let at = Instant::now();
    let period = Duration::from_millis(PERIOD_MS);
    let bound = |fault| time_to_restart(fault, &settings()).slowest + 5 * period;
    let (bound_d, bound_w) = (bound(Fault::Stalled), bound(Fault::Losing));
    let by = |k: &Kubelet| {
        wait_until("the restart", Duration::from_secs(30), || {
            k.first_kill_after(at).is_some() || at.elapsed() > Duration::from_secs(25)
        });
        match k.first_kill_after(at) {
            Some(kill) => kill - at,
            None => panic!(
                "never restarted:\n{}\n{:#?}",
                k.log(),
                k.probed().iter().rev().take(12).collect::<Vec<_>>()
            ),
        }
    };
    let d = by(&plain);
    let w = by(&capped);
    flaky.store(false, std::sync::atomic::Ordering::SeqCst);
    let _service = flipping.join().unwrap();
    let refused = |k: &Kubelet| {
        k.probed()
            .iter()
            .filter(|(_, _, line)| line.contains("this run could not look"))
            .count()
    };
    println!(
        "restart | behind a flaky auth service: S/D restarted {d:?}, CAP/W {w:?} after the wedge \
         (bounds {bound_d:?}, {bound_w:?} +1s for retention); {} and {} failing runs reported \
         the last look's fault",
        refused(&plain),
        refused(&capped)
    );
    assert!(
        d <= bound_d,
        "S/D restarted {d:?} after the wedge\n{}",
        plain.log()
    );
    assert!(
        w <= bound_w + Duration::from_secs(1),
        "CAP/W restarted {w:?} after the wedge\n{}",
        capped.log()
    );
    // The refusals took effect: some failing runs could not look.
    assert!(refused(&plain) + refused(&capped) >= 1, "{}", plain.log());
}

/// The chaos drill's late call, alone. A consumer losing messages to retention is seen at
/// fault; then its probe's logins are refused (the auth service down for a moment) and its
/// looks answered late (the server stopped 900 ms of every second). Each such run reports the
/// fault the last look saw, so from the first failure every run fails until the kubelet's
/// restart, within the calm bound. Before, the refused runs passed, the late one started the
/// floor's clock over, and the restart came a window later.
#[test]
fn a_fault_once_seen_is_reported_through_refusals_and_late_answers() {
    use crate::harness::callout::Callout;
    use crate::harness::load::Starved;
    let _serial = timing_lock();
    let (pods, service, seed, _capped) = behind_a_callout_losing();
    let state = pods.state.path().to_string_lossy().to_string();
    let kubelet = callout_consumer_under_kubelet(&pods, &pods.app, "CAP", "W", &state);
    calm(&kubelet);
    signal_app(&kubelet, libc::SIGUSR1);
    let at = Instant::now();
    wait_until("the first failing run", Duration::from_secs(20), || {
        kubelet
            .probed()
            .iter()
            .any(|(ended, passed, _)| *ended > at && !passed)
    });
    // The auth service down for 0.6 s, then the server answering late for 1.2 s.
    service.stop();
    std::thread::sleep(Duration::from_millis(600));
    let _service = Callout::start(&pods.nats, &pods.url, &seed);
    {
        let pid = pods.server.pid().expect("the server's pid");
        let _starved = Starved::new(pid, Duration::from_millis(900), Duration::from_secs(1));
        std::thread::sleep(Duration::from_millis(1200));
    }
    let killed = {
        wait_until("the restart", Duration::from_secs(20), || {
            kubelet.first_kill_after(at).is_some()
        });
        kubelet.first_kill_after(at).unwrap()
    };
    let runs: Vec<(Instant, bool, String)> = kubelet
        .probed()
        .into_iter()
        .filter(|(ended, _, _)| *ended > at && *ended <= killed)
        .collect();
    let first_failure = runs.iter().position(|(_, passed, _)| !passed).unwrap();
    let after: Vec<&(Instant, bool, String)> = runs[first_failure..].iter().collect();
    println!(
        "restart | a fault reported through refusals and late answers: restarted {:?} after the \
         wedge, {} failing runs from the first: {:#?}",
        killed - at,
        after.len(),
        after.iter().map(|(_, _, line)| line).collect::<Vec<_>>()
    );
    assert!(
        after.iter().all(|(_, passed, _)| !passed),
        "a run passed after the first failure:\n{}",
        kubelet.log()
    );
    let bound = time_to_restart(Fault::Losing, &settings()).slowest
        + 5 * Duration::from_millis(PERIOD_MS)
        + Duration::from_secs(1);
    assert!(killed - at <= bound, "restarted {:?}", killed - at);
}
