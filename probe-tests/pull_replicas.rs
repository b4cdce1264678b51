//! `check --own-subscription` on a pull consumer shared by replicas: which replica stopped
//! taking part. Three pods (three network namespaces) pull one durable with the APIs new code
//! uses (nats.js v3 `consume()` and a `fetch()` loop, async-nats `messages()`); one stops its
//! pull loop and keeps its connection. Each pod's probe runs at a kubelet's cadence (`PERIOD`, a restart after
//! `FAILURE_THRESHOLD` failures in a row): the deaf pod is restarted within its bound, the
//! others never; a serialized group with a backlog, a slow handler, an idle group and a NATS
//! restart restart nobody; a single replica's wedged handler and stopped loop still fail its
//! consumer check, and its healthy and idle runs pass, with each client.

use crate::harness::pods::S10;
use crate::harness::probe::Run;
use crate::harness::*;
use natsprobe::rules::restart::{time_to_restart, Cadence, Fault, Settings};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The kubelet's probe period and failure threshold in these scenarios.
const PERIOD: Duration = Duration::from_secs(1);
const FAILURE_THRESHOLD: usize = 3;
/// `--stall-after`; with `ack_wait` 2 s the window is this.
const STALL: &str = "6s";
const WINDOW: Duration = Duration::from_secs(6);
/// The probe's own `--sample-every` default: 3/4 of `--stall-after`.
const SAMPLE_EVERY: Duration = Duration::from_millis(4500);
/// Each client's pull requests expire after this (well inside the window).
const EXPIRES: &str = "2000";

/// NATS in one namespace with the producer, and `n` app pods linked to it on subnets 10.211,
/// 10.212, ...
struct Group {
    nats: Arc<NetNs>,
    pods: Vec<Arc<NetNs>>,
    /// The server's URL as each pod reaches it.
    urls: Vec<String>,
    server: NatsServer,
    state: tempfile::TempDir,
}

impl Group {
    fn new(n: usize, version: Version) -> Group {
        let nats = Arc::new(NetNs::new());
        let pods: Vec<Arc<NetNs>> = (0..n).map(|_| Arc::new(NetNs::new())).collect();
        let urls = pods
            .iter()
            .enumerate()
            .map(|(i, pod)| {
                let (gateway, _) = link_subnet(&nats, pod, 211 + i as u8);
                format!("nats://{gateway}:4222")
            })
            .collect();
        let server = NatsServer::start(Some(&nats), version, "0.0.0.0", 4222);
        Group {
            nats,
            pods,
            urls,
            server,
            state: tempfile::tempdir().unwrap(),
        }
    }

    /// Stream `S` (`s.>`) and its pull consumer `S/P`, `ack_wait` 2 s, and `extra`.
    fn pull_consumer(&self, extra: &[&str]) {
        let mut args = vec![
            "-url",
            &self.urls[0],
            "-stream",
            "S",
            "-subjects",
            "s.>",
            "-durable",
            "P",
            "-ack-wait",
            "2s",
        ];
        args.extend_from_slice(extra);
        Peer::setup(Some(&self.pods[0]), &args);
    }

    /// A producer in the NATS pod: `rate` a second, `count` in all (0: until stopped).
    fn producer(&self, rate: u32, count: u32) -> Peer {
        let (rate, count) = (rate.to_string(), count.to_string());
        let args = [
            "publish",
            "-url",
            "nats://127.0.0.1:4222",
            "-subject",
            "s.x",
            "-rate",
            &rate,
            "-count",
            &count,
        ];
        let mut p = Peer::spawn(Some(&self.nats), &args);
        p.wait_for("ready", S10);
        p
    }

    /// Pod `i`'s application pulling `S/P` with `client`, and `extra`.
    fn replica(&self, i: usize, client: Client, extra: &[&str]) -> Peer {
        let mut args = vec![self.urls[i].as_str(), "S/P"];
        match client {
            Client::Consume => args.push("consume"),
            Client::Fetch => args.push("fetch"),
            Client::Messages => {}
        }
        args.extend_from_slice(&["--expires", EXPIRES]);
        args.extend_from_slice(extra);
        let mut p = match client {
            Client::Messages => async_nats(Some(&self.pods[i]), &args),
            _ => nats_js(Some(&self.pods[i]), &args),
        };
        p.wait_for("ready", Duration::from_secs(60));
        p
    }

    /// `natsprobe check` in pod `i` as its livenessProbe runs it: its own state dir, the
    /// probe's own sampling defaults.
    fn check(&self, i: usize, own: bool) -> Run {
        self.check_with(i, own, &[])
    }

    /// The same with `--json`, decoded, a look every run (`--sample-every 0s`).
    fn json(&self, i: usize) -> serde_json::Value {
        self.check_with(i, true, &["--json", "--sample-every", "0s"])
            .json()
    }

    fn check_with(&self, i: usize, own: bool, extra: &[&str]) -> Run {
        let state = self.state.path().join(i.to_string());
        let state = state.to_string_lossy().to_string();
        let mut args = vec![
            "check",
            "--state-dir",
            &state,
            "--server",
            &self.urls[i],
            "--consumer",
            "S/P",
            "--stall-after",
            STALL,
        ];
        if own {
            args.push("--own-subscription");
        }
        args.extend_from_slice(extra);
        probe(&args).ns(&self.pods[i]).sampling_defaults().run()
    }

    /// Every pod's probe once a `PERIOD` for `span`, or until `until` says stop: each pod's
    /// runs, with when each ended.
    fn cadence(
        &self,
        span: Duration,
        own: bool,
        until: impl Fn(&[Vec<(Instant, Run)>]) -> bool,
    ) -> Vec<Vec<(Instant, Run)>> {
        let mut runs: Vec<Vec<(Instant, Run)>> = self.pods.iter().map(|_| Vec::new()).collect();
        let start = Instant::now();
        let mut next = start;
        while start.elapsed() < span && !until(&runs) {
            for (i, pod_runs) in runs.iter_mut().enumerate() {
                let run = self.check(i, own);
                pod_runs.push((Instant::now(), run));
            }
            next += PERIOD;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        runs
    }
}

/// A pull replica's client and the API it pulls with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    /// nats.js v3 `consume()`.
    Consume,
    /// nats.js v3, a loop of `fetch()`.
    Fetch,
    /// async-nats `messages()`.
    Messages,
}

/// When the kubelet would restart: the end of the `FAILURE_THRESHOLD`th failure in a row.
fn restarted_at(runs: &[(Instant, Run)]) -> Option<Instant> {
    let mut in_a_row = 0;
    for (at, run) in runs {
        match run.code {
            Some(0) => in_a_row = 0,
            _ => in_a_row += 1,
        }
        if in_a_row == FAILURE_THRESHOLD {
            return Some(*at);
        }
    }
    None
}

/// Each run's end after `from`, its exit and its line: what a failed bound shows.
fn timeline(from: Instant, runs: &[(Instant, Run)]) -> String {
    runs.iter()
        .map(|(at, run)| {
            let (t, line) = ((*at - from).as_secs_f64(), run.line());
            format!("  {t:>6.2} s  exit {:?}  {line}\n", run.code)
        })
        .collect()
}

/// Every run passed; else the first that did not.
#[track_caller]
fn all_pass(what: &str, runs: &[(Instant, Run)]) {
    assert!(!runs.is_empty(), "{what}: no runs");
    if let Some((_, bad)) = runs.iter().find(|(_, r)| r.code != Some(0)) {
        panic!("{what}: a run failed\n{bad}");
    }
}

/// One pod of three stops its pull loop and keeps its connection: its probe fails from
/// about a window after its last publish, and the kubelet's count restarts it within the
/// bound; the other two, a `consume()` and a `fetch()` loop, pass every run, and the consumer
/// stays healthy throughout (the group takes the work). Without `--own-subscription` the
/// deaf pod passes: what nothing else sees.
fn the_deaf_replica_of_a_pull_group(version: Version, clients: [Client; 3]) {
    let g = Group::new(3, version);
    g.pull_consumer(&[]);
    let _producer = g.producer(4, 0);
    let mut deaf = g.replica(0, clients[0], &[]);
    let _live = [g.replica(1, clients[1], &[]), g.replica(2, clients[2], &[])];
    let calm = g.cadence(Duration::from_secs(10), true, |_| false);
    for (i, runs) in calm.iter().enumerate() {
        all_pass(&format!("{version:?}: pod {i} before"), runs);
        // A look inside the window reads nothing, and says so.
        assert!(
            runs.iter()
                .any(|(_, r)| r.line().contains("last seen publishing")),
            "{version:?}: pod {i} read its part with every look\n{}",
            timeline(runs[0].0, runs)
        );
    }
    let json = g.json(0);
    assert_eq!(json["subscriptions"][0]["state"], "held", "{json}");
    deaf.signal(libc::SIGUSR1);
    deaf.wait_for("stopped", S10);
    let stopped = Instant::now();
    // The README's time to restart, at this cadence (the rules' own, every phase tried), and
    // a second for the runs' own time.
    let settings = Settings {
        cadence: Cadence {
            period: PERIOD,
            sample_every: SAMPLE_EVERY,
            window: WINDOW,
        },
        failure_threshold: FAILURE_THRESHOLD as u32,
        ..Settings::RECOMMENDED
    };
    let bound = time_to_restart(Fault::NotPulling, &settings).slowest + Duration::from_secs(1);
    let after = g.cadence(bound + Duration::from_secs(5), true, |runs| {
        restarted_at(&runs[0]).is_some()
    });
    let at = restarted_at(&after[0]).unwrap_or_else(|| {
        let last = &after[0].last().unwrap().1;
        panic!("{version:?}: the deaf pod was not restarted within {bound:?}\n{last}")
    });
    let took = at - stopped;
    let failed = &after[0].iter().find(|(_, r)| r.code == Some(1)).unwrap().1;
    failed.says(&[
        "unhealthy: this pod's pulls of consumer S/P: none of this pod's connections (10.211.0.2:",
        "published a pull request or an ack for",
    ]);
    assert!(
        took <= bound,
        "{version:?}: restarted {took:?} after the loop stopped, past {bound:?}; its runs:\n{}",
        timeline(stopped, &after[0])
    );
    all_pass(&format!("{version:?}: pod 1 after"), &after[1]);
    all_pass(&format!("{version:?}: pod 2 after"), &after[2]);
    // The consumer itself is healthy: the group takes its work.
    let json = g.json(0);
    assert_eq!(json["consumers"][0]["verdict"], "healthy", "{json}");
    assert_eq!(json["subscriptions"][0]["outcome"], "not_pulling", "{json}");
    g.check(0, false).expect(0);
    println!(
        "pull replicas | {version:?}, {clients:?}: the deaf replica restarted {:.1} s after its loop stopped (bound {:.1} s), the other two passed {} runs",
        took.as_secs_f64(),
        bound.as_secs_f64(),
        after[1].len() + after[2].len()
    );
}

/// nats.js `consume()` deaf, beside async-nats and a nats.js `fetch()` loop.
#[test]
fn the_deaf_replica_of_a_pull_group_pinned() {
    let clients = [Client::Consume, Client::Messages, Client::Fetch];
    the_deaf_replica_of_a_pull_group(Version::Pinned, clients);
}

/// async-nats `messages()` deaf, beside nats.js `consume()` and `fetch()`.
#[test]
fn the_deaf_replica_of_a_pull_group_newest() {
    let clients = [Client::Messages, Client::Consume, Client::Fetch];
    the_deaf_replica_of_a_pull_group(Version::Newest, clients);
}

/// Nothing NATS or the work does restarts a replica: a serialized group
/// (`max_ack_pending: 1`) with a growing backlog and a slow handler; then idle, even with one
/// replica's loop stopped (idle is not stuck); then NATS restarted under the group.
#[test]
fn a_pull_group_is_never_restarted_for_the_work_or_for_nats() {
    let mut g = Group::new(3, Version::Pinned);
    g.pull_consumer(&["-max-ack-pending", "1"]);
    // 4 a second against three replicas taking 400 ms each, one at a time: the backlog grows.
    let slow = ["--handle", "400"];
    let mut replicas = vec![
        g.replica(0, Client::Consume, &slow),
        g.replica(1, Client::Messages, &slow),
        g.replica(2, Client::Fetch, &slow),
    ];
    let producer = g.producer(4, 0);
    let busy = g.cadence(Duration::from_secs(12), true, |_| false);
    for (i, runs) in busy.iter().enumerate() {
        all_pass(&format!("pod {i}, serialized with a backlog"), runs);
    }
    let backlog = g.json(1);
    assert!(
        backlog["consumers"][0]["facts"]["num_pending"].as_u64() > Some(0),
        "a backlog\n{backlog}"
    );
    drop(producer);
    // Drained: nothing pending, nothing in flight.
    let drained = Instant::now();
    loop {
        let json = g.json(1);
        let facts = &json["consumers"][0]["facts"];
        if facts["num_pending"] == 0 && facts["num_ack_pending"] == 0 {
            break;
        }
        assert!(
            drained.elapsed() < Duration::from_secs(60),
            "never drained\n{json}"
        );
        std::thread::sleep(PERIOD);
    }
    replicas[0].signal(libc::SIGUSR1);
    replicas[0].wait_for("stopped", S10);
    let idle = g.cadence(WINDOW * 2, true, |_| false);
    for (i, runs) in idle.iter().enumerate() {
        all_pass(&format!("pod {i}, idle"), runs);
    }
    // NATS restarted under the group (its store kept): the clients reconnect and pull again.
    replicas.remove(0);
    let _again = g.replica(0, Client::Consume, &[]);
    g.server.stop();
    let down = g.cadence(Duration::from_secs(4), true, |_| false);
    g.server.resume();
    let _producer = g.producer(4, 0);
    let back = g.cadence(WINDOW * 2, true, |_| false);
    for i in 0..3 {
        let runs: Vec<_> = down[i].iter().chain(&back[i]).collect();
        let mut in_a_row = 0;
        for (_, run) in &runs {
            in_a_row = if run.code == Some(0) { 0 } else { in_a_row + 1 };
            assert!(
                in_a_row < FAILURE_THRESHOLD,
                "pod {i} would be restarted by NATS's restart\n{run}"
            );
        }
        all_pass(
            &format!("pod {i}, NATS back"),
            &back[i][back[i].len() / 2..],
        );
    }
}

/// One replica alone, each client: healthy under load and idle pass; a wedged handler and a
/// stopped loop fail its consumer check from about a window after the last ack.
fn a_single_replica(client: Client) {
    let g = Group::new(1, Version::Pinned);
    g.pull_consumer(&[]);
    let producer = g.producer(4, 0);
    let mut app = g.replica(0, client, &[]);
    all_pass(
        "under load",
        &g.cadence(Duration::from_secs(8), true, |_| false)[0],
    );
    drop(producer);
    std::thread::sleep(Duration::from_secs(2));
    all_pass(
        "idle",
        &g.cadence(WINDOW + Duration::from_secs(2), true, |_| false)[0],
    );
    let _producer = g.producer(4, 0);
    for (signal, word) in [(libc::SIGUSR2, "wedged"), (libc::SIGUSR1, "stopped")] {
        app.signal(signal);
        app.wait_for(word, S10);
        let since = Instant::now();
        let runs = g.cadence(WINDOW * 3, false, |runs| restarted_at(&runs[0]).is_some());
        let at = restarted_at(&runs[0])
            .unwrap_or_else(|| panic!("{word}: never restarted\n{}", runs[0].last().unwrap().1));
        let failed = &runs[0].iter().find(|(_, r)| r.code == Some(1)).unwrap().1;
        failed.says(&["unhealthy: consumer S/P"]);
        println!(
            "pull replicas | one {client:?} replica, {word}: restarted {:.1} s after",
            (at - since).as_secs_f64()
        );
        // The pod restarted: a new application pulls again and the next runs pass.
        drop(app);
        app = g.replica(0, client, &[]);
        std::thread::sleep(Duration::from_secs(2));
        g.check(0, false).expect(0);
    }
}

#[test]
fn a_single_replica_nats_js_consume() {
    a_single_replica(Client::Consume);
}

#[test]
fn a_single_replica_nats_js_fetch() {
    a_single_replica(Client::Fetch);
}

#[test]
fn a_single_replica_async_nats_messages() {
    a_single_replica(Client::Messages);
}

/// The durable deleted under its client (`inactive_threshold` while the client was frozen,
/// its connection held): the client's loop goes on with nothing to pull from, and its
/// consumer check fails (the durable is gone) whether or not `--own-subscription` is given;
/// the application started again makes its durable again and the next runs pass.
#[test]
fn the_consumer_deleted_while_its_client_was_away() {
    let g = Group::new(1, Version::Pinned);
    Peer::setup(
        Some(&g.pods[0]),
        &["-url", &g.urls[0], "-stream", "S", "-subjects", "s.>"],
    );
    let _producer = g.producer(4, 0);
    let create = ["--create", "--inactive", "3000"];
    let app = g.replica(0, Client::Consume, &create);
    all_pass(
        "before",
        &g.cadence(Duration::from_secs(4), true, |_| false)[0],
    );
    app.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(6));
    app.signal(libc::SIGCONT);
    let since = Instant::now();
    let runs = g.cadence(WINDOW * 2, true, |runs| restarted_at(&runs[0]).is_some());
    let at = restarted_at(&runs[0])
        .unwrap_or_else(|| panic!("never restarted\n{}", runs[0].last().unwrap().1));
    let failed = &runs[0].iter().find(|(_, r)| r.code == Some(1)).unwrap().1;
    failed.says(&["unhealthy: consumer S/P"]);
    println!(
        "pull replicas | the durable deleted while nats.js was frozen: restarted {:.1} s after it resumed | {}",
        (at - since).as_secs_f64(),
        failed.line()
    );
    drop(app);
    let _again = g.replica(0, Client::Consume, &create);
    all_pass(
        "started again",
        &g.cadence(Duration::from_secs(4), true, |_| false)[0],
    );
}
