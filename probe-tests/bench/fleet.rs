//! Benchmark: what a fleet of probes costs the NATS server. For each mode of
//! `check`, at 100, 1,000 and 10,000 idle connections on the server (each holding one
//! subscription, from one natspeer process beside the server), on one server, one server with
//! TLS, and a 3-node cluster: the server's CPU per run (utime + stime, read in ns as the sum
//! of /proc/<pid>/task/*/schedstat, every node's, the servers' idle rate measured just before
//! and subtracted), the bytes the
//! server's pod received and sent per run (its veth's counters: TLS and all, the idle rate
//! subtracted), and the probe's median wall time. The app pod holds a bound push consumer in a
//! deliver group and a core subscription. Then the guard's server CPU per durable.
//!
//! Each mode is measured alone (the server's CPU is per cell, not per run), a cell's runs back
//! to back. A kubelet's runs are 10 s apart, so with the defaults most of them ask the server
//! nothing: the "kubelet average" rows weigh the measured kinds of run by how often each
//! happens at `periodSeconds: 10` with the defaults, from the probe's own schedule
//! (`rules::restart::schedule`: `--sample-every 45s`, 1 run in 5 asks about the
//! consumers; `--subscription-every auto` asks for the connection by cid with each look up
//! to 1,000 connections in the account, 1 run in 120 at 10,000; its tests pin it). On one
//! server, the pod's server slowed against the same server well (`slow_server`): the requests
//! it received (bytes in) and its CPU per run.
//!
//! Run: `cargo bench --bench fleet` (root; probe-tests/setup first, and the static build).
//! NATSPROBE_BASELINE=<another build> is measured in the same setups.
//! FLEET_SIZES (default `100,1000,10000`), FLEET_RUNS (runs per cell, default 100),
//! FLEET_SETUPS (default `single,tls,cluster`), FLEET_GUARD (default `1000,10000`; empty:
//! none), FLEET_SLOW (`0`: not the slowed server).

// A benchmark uses part of the shared harness; the test crate uses all of it, and the
// compiler flags what none uses there.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../harness/mod.rs"]
mod harness;
#[allow(dead_code)]
mod measure;

use harness::cluster::Cluster;
use harness::{link, NatsServer, NetNs, Peer, Version};
use natsprobe::rules::restart::Cadence;
use std::sync::Arc;
use std::time::{Duration, Instant};

const IDLE: Duration = Duration::from_millis(1500);

fn main() {
    raise_fd_limit();
    let bin = harness::static_binary().to_string_lossy().to_string();
    let baseline = std::env::var("NATSPROBE_BASELINE")
        .ok()
        .filter(|b| !b.is_empty());
    let list = |name: &str, default: &str| -> Vec<String> {
        std::env::var(name)
            .unwrap_or_else(|_| default.into())
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let sizes: Vec<usize> = list("FLEET_SIZES", "100,1000,10000")
        .iter()
        .map(|s| s.parse().expect("FLEET_SIZES: numbers"))
        .collect();
    let runs: usize = std::env::var("FLEET_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(100);
    let setups = list("FLEET_SETUPS", "single,tls,cluster");
    println!("natsprobe fleet benchmark: {bin}");
    if let Some(b) = &baseline {
        println!("baseline (NATSPROBE_BASELINE): {b}");
    }
    println!("load before: {}", load());

    let mut summary: Vec<Setup> = Vec::new();
    for setup in &setups {
        for &size in &sizes {
            let rows = setup_cell(setup, size, runs, &bin, baseline.as_deref());
            summary.push((setup.clone(), size, rows));
        }
    }
    print_summary(&summary);
    for durables in list("FLEET_GUARD", "1000,10000") {
        guard(
            durables.parse().expect("FLEET_GUARD: numbers"),
            &bin,
            baseline.as_deref(),
        );
    }
    println!("\nload after: {}", load());
}

/// One setup at one size: (setup, idle connections, each cell's name and cost).
type Setup = (String, usize, Vec<(String, Cost)>);

/// What one run costs, averaged over a cell's runs.
#[derive(Clone, Copy, Debug, Default)]
struct Cost {
    cpu_ms: f64,
    rx: f64,
    tx: f64,
    wall_ms: f64,
}

impl Cost {
    fn weigh(parts: &[(f64, Cost)]) -> Cost {
        let total: f64 = parts.iter().map(|(w, _)| w).sum();
        let mut c = Cost::default();
        for (w, p) in parts {
            c.cpu_ms += w * p.cpu_ms / total;
            c.rx += w * p.rx / total;
            c.tx += w * p.tx / total;
            c.wall_ms += w * p.wall_ms / total;
        }
        c
    }
}

/// The servers' side: their processes and their pod's interface.
struct Servers {
    ns: Arc<NetNs>,
    pids: Vec<u32>,
    dev: &'static str,
}

impl Servers {
    fn cpu(&self) -> f64 {
        self.pids.iter().map(|&p| cpu_ms(p)).sum()
    }

    /// (received, sent) by the servers' pod on the link to the app pod.
    fn bytes(&self) -> (u64, u64) {
        let out = self
            .ns
            .command("cat")
            .arg("/proc/net/dev")
            .output()
            .expect("read /proc/net/dev");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{}:", self.dev)))
            .unwrap_or_else(|| panic!("no {} in /proc/net/dev", self.dev));
        let fields: Vec<u64> = line
            .split_once(':')
            .unwrap()
            .1
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect();
        (fields[0], fields[8])
    }

    /// The servers' CPU (ms per second) and bytes (per second) while nobody probes.
    fn idle(&self) -> (f64, f64, f64) {
        let (c0, (r0, t0), at) = (self.cpu(), self.bytes(), Instant::now());
        std::thread::sleep(IDLE);
        let (c1, (r1, t1)) = (self.cpu(), self.bytes());
        let secs = at.elapsed().as_secs_f64();
        (
            (c1 - c0) / secs,
            (r1 - r0) as f64 / secs,
            (t1 - t0) as f64 / secs,
        )
    }

    /// `runs` runs of `argv` in `app`, after `warmup` unmeasured ones; with `fresh`, that
    /// state dir emptied before each (every run a first run: nothing remembered).
    fn cell(
        &self,
        app: &NetNs,
        argv: &[String],
        runs: usize,
        warmup: usize,
        fresh: Option<&std::path::Path>,
    ) -> Cost {
        let empty = || {
            if let Some(dir) = fresh {
                let _ = std::fs::remove_dir_all(dir);
                std::fs::create_dir(dir).unwrap();
            }
        };
        for _ in 0..warmup {
            empty();
            measure::run_once(app, argv);
        }
        let (idle_cpu, idle_rx, idle_tx) = self.idle();
        let (c0, (r0, t0), at) = (self.cpu(), self.bytes(), Instant::now());
        let mut walls = Vec::with_capacity(runs);
        let mut codes = Vec::new();
        for _ in 0..runs {
            empty();
            let s = measure::run_once(app, argv);
            walls.push(s.wall);
            codes.push(s.code);
        }
        let (c1, (r1, t1)) = (self.cpu(), self.bytes());
        let secs = at.elapsed().as_secs_f64();
        assert!(
            codes.iter().all(|&c| c == 0),
            "{argv:?}: not healthy on every run: {codes:?}"
        );
        walls.sort();
        let n = runs as f64;
        Cost {
            cpu_ms: ((c1 - c0) - idle_cpu * secs).max(0.0) / n,
            rx: ((r1 - r0) as f64 - idle_rx * secs).max(0.0) / n,
            tx: ((t1 - t0) as f64 - idle_tx * secs).max(0.0) / n,
            wall_ms: walls[runs / 2].as_secs_f64() * 1e3,
        }
    }
}

fn setup_cell(
    setup: &str,
    size: usize,
    runs: usize,
    bin: &str,
    baseline: Option<&str>,
) -> Vec<(String, Cost)> {
    let nats = Arc::new(NetNs::new());
    let app = Arc::new(NetNs::new());
    let (ip, _) = link(&nats, &app);
    let certs = tempfile::tempdir().unwrap();
    let mut single = None;
    let mut cluster = None;
    let mut tls: Vec<String> = Vec::new();
    let mut peer_tls: Vec<String> = Vec::new();
    let url = match setup {
        "single" => {
            let s = NatsServer::start_with(Some(&nats), Version::Pinned, ip, 4222, &["-m", "8222"]);
            let url = s.url();
            single = Some(s);
            url
        }
        "tls" => {
            certificates(certs.path(), ip);
            let f = |n: &str| certs.path().join(n).to_string_lossy().to_string();
            let s = NatsServer::start_with(
                Some(&nats),
                Version::Pinned,
                "0.0.0.0",
                4222,
                &[
                    "--tls",
                    "--tlscert",
                    &f("server.pem"),
                    "--tlskey",
                    &f("server.key"),
                ],
            );
            single = Some(s);
            tls = vec!["--tlsca".into(), f("ca.pem")];
            peer_tls = vec!["-tls-ca".into(), f("ca.pem")];
            format!("tls://{ip}:4222")
        }
        "cluster" => {
            let c = Cluster::start(&nats, Version::Pinned, "0.0.0.0");
            cluster = Some(c);
            (4222..4225)
                .map(|p| format!("nats://{ip}:{p}"))
                .collect::<Vec<_>>()
                .join(",")
        }
        other => panic!("FLEET_SETUPS: unknown setup {other}"),
    };
    let first = url.split(',').next().unwrap().to_string();
    let pids: Vec<u32> = match (&single, &cluster) {
        (Some(s), _) => vec![s.pid().unwrap()],
        (_, Some(c)) => c.nodes.iter().filter_map(NatsServer::pid).collect(),
        _ => unreachable!(),
    };
    let servers = Servers {
        ns: Arc::clone(&nats),
        pids,
        dev: "veth200",
    };
    let peer = |args: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        v.extend(peer_tls.iter().cloned());
        v
    };
    let setup_args = peer(&[
        "-url",
        &first,
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
        "-replicas",
        if cluster.is_some() { "3" } else { "1" },
    ]);
    let setup_args: Vec<&str> = setup_args.iter().map(String::as_str).collect();
    Peer::setup(Some(&nats), &setup_args);
    // The idle connections, beside the server (their traffic never crosses the probe's link).
    let n = size.to_string();
    let many = peer(&["many", "-url", &first, "-n", &n, "-subscribe", "idle"]);
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let started = Instant::now();
    let mut idle = Peer::spawn(Some(&nats), &many);
    idle.wait_for("ready", Duration::from_secs(600));
    let consume = peer(&[
        "consume",
        "-url",
        &first,
        "-deliver-subject",
        "deliver.D",
        "-deliver-group",
        "D",
    ]);
    let consume: Vec<&str> = consume.iter().map(String::as_str).collect();
    let mut consumer = Peer::spawn(Some(&app), &consume);
    consumer.wait_for("ready", Duration::from_secs(30));
    let conn = peer(&["conn", "-url", &first, "-subscribe", "journal.>"]);
    let conn: Vec<&str> = conn.iter().map(String::as_str).collect();
    let mut journal = Peer::spawn(Some(&app), &conn);
    journal.wait_for("ready", Duration::from_secs(30));
    // A pull consumer of the same stream and its replica in the app pod, a process of its own
    // (`--process pullpeer`: its part is judged by its own connection), fetching every 2 s.
    let pull_setup = peer(&[
        "-url",
        &first,
        "-stream",
        "S",
        "-subjects",
        "s.>",
        "-durable",
        "P",
        // Short enough for the busy serve cells' window (`BUSY_WINDOW`).
        "-ack-wait",
        "50ms",
    ]);
    let pull_setup: Vec<&str> = pull_setup.iter().map(String::as_str).collect();
    Peer::setup(Some(&nats), &pull_setup);
    let pull = peer(&[
        "consume",
        "-url",
        &first,
        "-stream",
        "S",
        "-durable",
        "P",
        "-pull",
        "-fetch-wait",
        "2s",
    ]);
    let pull: Vec<&str> = pull.iter().map(String::as_str).collect();
    let pullpeer = harness::peer::natspeer_named("pullpeer");
    let mut puller = Peer::spawn_as(Some(&app), &pullpeer, &pull);
    puller.wait_for("ready", Duration::from_secs(30));
    println!(
        "\n{setup}, {size} idle connections (ready in {:.0?}); {runs} runs a cell; idle server CPU {:.2} ms/s",
        started.elapsed(),
        servers.idle().0
    );
    println!(
        "  {:<58} {:>11} {:>10} {:>10} {:>9}",
        "run", "server CPU", "bytes in", "bytes out", "wall"
    );

    let mut rows: Vec<(String, Cost)> = Vec::new();
    let mut cell = |name: &str, exe: &str, flags: &[&str], warmup: usize| {
        let state = tempfile::tempdir().unwrap();
        let mut argv: Vec<String> =
            vec![exe.into(), "check".into(), "--timeout".into(), "3s".into()];
        let needs_server = flags
            .iter()
            .any(|f| f.starts_with("--consumer") || f.starts_with("--subscription"));
        if needs_server {
            argv.extend(["--server".into(), url.clone()]);
            argv.extend(tls.iter().cloned());
            if !flags.contains(&"--state-dir") {
                argv.extend([
                    "--state-dir".into(),
                    state.path().to_string_lossy().to_string(),
                ]);
            }
        } else {
            argv.extend(["--port".into(), "4222".into()]);
        }
        argv.extend(flags.iter().map(|f| f.to_string()));
        // `--fresh`: a state dir emptied before every run (bench only; stripped here).
        let fresh = argv.iter().any(|a| a == "--fresh");
        argv.retain(|a| a != "--fresh");
        let cost = servers.cell(&app, &argv, runs, warmup, fresh.then(|| state.path()));
        println!(
            "  {:<58} {:>8.3} ms {:>10.0} {:>10.0} {:>6.1} ms",
            name, cost.cpu_ms, cost.rx, cost.tx, cost.wall_ms
        );
        rows.push((name.to_string(), cost));
    };
    let own = ["--consumer", "S/D", "--own-subscription"];
    let core = ["--subscription", "journal.>"];
    cell("sockets only", bin, &[], 1);
    cell(
        "--consumer: a look",
        bin,
        &["--consumer", "S/D", "--sample-every", "0s"],
        1,
    );
    cell("--consumer: between looks", bin, &["--consumer", "S/D"], 1);
    // A trust time given: `auto` with --sample-every 0s would ask with every look.
    cell(
        "--own-subscription: a look, connection trusted",
        bin,
        &[
            &own[..],
            &["--sample-every", "0s", "--subscription-every", "1h"],
        ]
        .concat(),
        2,
    );
    cell(
        "--own-subscription: a look, connection by cid",
        bin,
        &[
            &own[..],
            &["--sample-every", "0s", "--subscription-every", "0s"],
        ]
        .concat(),
        2,
    );
    cell("--own-subscription: between looks, trusted", bin, &own, 2);
    // The warm-up's look is calm, so the measured runs (within --sample-every 45s) skip it.
    cell(
        "--own-subscription: between looks, connection by cid",
        bin,
        &[&own[..], &["--subscription-every", "0s"]].concat(),
        2,
    );
    // A pull consumer's part: judged by each look, its connection asked for by cid (after the
    // warm-up's match), at the account's report, or at the monitoring port.
    let pulls = [
        "--consumer",
        "S/P",
        "--own-subscription",
        "--process",
        "pullpeer",
    ];
    cell(
        "pull part: a look, connection by cid",
        bin,
        &[&pulls[..], &["--sample-every", "0s"]].concat(),
        2,
    );
    let monitor = format!("http://{ip}:8222");
    if single.is_some() && tls.is_empty() {
        cell(
            "pull part: a look, by cid at --monitor",
            bin,
            &[&pulls[..], &["--sample-every", "0s", "--monitor", &monitor]].concat(),
            2,
        );
    }
    cell("pull part: between looks", bin, &pulls, 2);
    cell(
        "--subscription: connection by cid",
        bin,
        &[&core[..], &["--subscription-every", "0s"]].concat(),
        2,
    );
    cell("--subscription: trusted", bin, &core, 2);
    cell(
        "--subscription: matched by address (first run)",
        bin,
        &[&core[..], &["--subscription-every", "0s", "--fresh"]].concat(),
        0,
    );
    if let Some(b) = baseline {
        cell("baseline: --consumer", b, &["--consumer", "S/D"], 1);
        cell("baseline: --own-subscription", b, &own, 1);
        cell("baseline: --subscription", b, &core, 1);
    }
    if single.is_some() {
        let flags: Vec<String> = pulls.iter().map(|s| s.to_string()).collect();
        let mut with_monitor = flags.clone();
        if tls.is_empty() {
            with_monitor.extend(["--monitor".to_string(), monitor.clone()]);
        }
        let consumer_only: Vec<String> = ["--consumer", "S/P"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // The fleet's own rate of looks at this server: 10,000 pods through serve at
        // `--every 10s`, of whose looks the check's schedule has `asking` ask JetStream.
        let fleet = (serve_asking(Cadence::DEFAULT) * 1000.0 / SERVE_LOOKS_EACH)
            .round()
            .max(1.0) as usize;
        let (lone, _) = serve_looks(&servers, &app, bin, &url, &tls, &consumer_only, 1);
        println!(
            "  {:<58} {:>8.3} ms {:>10.0} {:>10.0} {:>6} ",
            format!("serve's looks, --consumer S/P alone, one serve ({SERVE_LOOKS_EACH} looks/s)"),
            lone.cpu_ms,
            lone.rx,
            lone.tx,
            "-"
        );
        rows.push(("lone serve: consumer alone".to_string(), lone));
        for busy in [false, true] {
            // Busy: messages published all along, so the pull consumer delivers between any
            // two looks and every look reads the part's connection.
            let publisher = busy.then(|| {
                let args = peer(&[
                    "publish", "-url", &first, "-subject", "s.busy", "-rate", "50",
                ]);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let mut p = Peer::spawn(Some(&nats), &args);
                p.wait_for("ready", Duration::from_secs(30));
                p
            });
            for (label, flags) in [
                ("consumer alone", &consumer_only),
                ("account's report", &flags),
                ("--monitor", &with_monitor),
            ] {
                if label == "--monitor" && !tls.is_empty() {
                    continue;
                }
                // Busy, the fleet's reads: a window of two looks, as the defaults' 60 s is
                // of looks 50 s apart, so a part publishing all along is read every other
                // look.
                let mut flags = flags.clone();
                if busy {
                    flags.extend(["--stall-after".to_string(), BUSY_WINDOW.to_string()]);
                }
                let (cost, reads) = serve_looks(&servers, &app, bin, &url, &tls, &flags, fleet);
                let load = match busy {
                    true => "busy",
                    false => "idle",
                };
                let what = match label {
                    "consumer alone" => format!("serve's looks, --consumer S/P alone, {load}"),
                    _ => format!("serve's looks, pull part by cid at the {label}, {load}"),
                };
                println!(
                    "  {:<58} {:>8.3} ms {:>10.0} {:>10.0} {:>6} {}",
                    format!("{what} ({} looks/s)", fleet as f64 * SERVE_LOOKS_EACH),
                    cost.cpu_ms,
                    cost.rx,
                    cost.tx,
                    "-",
                    said_reads(reads)
                );
                let row = match label {
                    "consumer alone" => format!("serve: consumer alone, {load}"),
                    _ => format!("serve: pull part, {label}, {load}"),
                };
                rows.push((row, cost));
            }
            if busy && tls.is_empty() {
                // The longer window's fleet: its looks ask half as often.
                let k = (serve_asking(LONGER) * 1000.0 / SERVE_LOOKS_EACH)
                    .round()
                    .max(1.0) as usize;
                let mut flags = with_monitor.clone();
                flags.extend(["--stall-after".to_string(), BUSY_WINDOW.to_string()]);
                let (cost, reads) = serve_looks(&servers, &app, bin, &url, &tls, &flags, k);
                println!(
                    "  {:<58} {:>8.3} ms {:>10.0} {:>10.0} {:>6} {}",
                    format!(
                        "serve's looks, pull part by cid at the --monitor, busy ({} looks/s)",
                        k as f64 * SERVE_LOOKS_EACH
                    ),
                    cost.cpu_ms,
                    cost.rx,
                    cost.tx,
                    "-",
                    said_reads(reads)
                );
                rows.push((
                    format!("serve: pull part, --monitor, busy, {LONGER_FLAG}"),
                    cost,
                ));
            }
            drop(publisher);
        }
    }
    if setup == "single" && std::env::var("FLEET_SLOW").map_or(true, |v| v != "0") {
        let mut exes = vec![("natsprobe", bin)];
        exes.extend(baseline.map(|b| ("baseline", b)));
        for (name, exe) in exes {
            for (label, cost) in slow_server(&servers, &app, exe, &url, name == "natsprobe") {
                println!(
                    "  {:<58} {:>8.3} ms {:>10.0} {:>10.0} {:>6.1} ms",
                    format!("{name}: {label}"),
                    cost.cpu_ms,
                    cost.rx,
                    cost.tx,
                    cost.wall_ms
                );
            }
        }
    }
    drop(puller);
    drop(journal);
    drop(consumer);
    drop(idle);
    drop(single);
    drop(cluster);
    rows
}

/// `--stall-after 2m` (and its `--sample-every`, 90 s) at `periodSeconds: 10`.
const LONGER: Cadence = Cadence {
    period: Duration::from_secs(10),
    sample_every: Duration::from_secs(90),
    window: Duration::from_secs(120),
};
const LONGER_FLAG: &str = "--stall-after 2m";

/// Looks a second each `serve` of the benchmark makes (`--every 100ms`).
const SERVE_LOOKS_EACH: f64 = 10.0;

/// The busy serve cells' `--stall-after`: between one and two of their looks (100 ms apart),
/// as the defaults' window (60 s) is of looks 50 s apart and `--stall-after 2m`'s (120 s) of
/// looks 90 s apart, so a pull part is read every other look. The pull consumer's `ack_wait`
/// (50 ms) leaves the window this.
const BUSY_WINDOW: &str = "150ms";

/// How many of the pod's connections the server read a look (`/varz`), where it counts them.
fn said_reads(reads: Option<f64>) -> String {
    reads.map_or(String::new(), |r| format!("({r:.2} reads a look)"))
}

/// The share of `serve`'s looks at `--every 10s` that ask JetStream at `cadence`, from the
/// check's own schedule: a look between them asks the server nothing.
fn serve_asking(cadence: Cadence) -> f64 {
    let day = natsprobe::rules::restart::schedule(
        8640,
        cadence,
        natsprobe::rules::remembered::TrustSetting::Auto,
        103,
        false,
    );
    f64::from(day.looks + day.looks_with_lookup + day.matches) / 8640.0
}

/// What one of `serve`'s looks costs the servers, its NATS connection held from look to look:
/// `k` processes of `serve --every 100ms --sample-every 0s --timeout 5s FLAGS` in the app pod
/// (every look asks JetStream; the time for a first look's match by address under the
/// others' looks), the servers' CPU and bytes over 10 s (the idle rate, measured next with
/// whatever else runs, subtracted) divided by the looks their `/metrics` counted meanwhile.
/// A server's cost per request depends on how often requests come: a lone look wakes an idle
/// server, looks at a fleet's rate find it awake. So `k` sets the rate: one `serve`, or the
/// fleet's (`serve_asking`).
fn serve_looks(
    servers: &Servers,
    app: &Arc<NetNs>,
    bin: &str,
    url: &str,
    tls: &[String],
    flags: &[String],
    k: usize,
) -> (Cost, Option<f64>) {
    let states: Vec<tempfile::TempDir> = (0..k).map(|_| tempfile::tempdir().unwrap()).collect();
    // With `--monitor`, the reads of the pod's connection the server served (its `/varz`
    // counts each `/connz` request).
    let monitor = flags
        .iter()
        .position(|f| f == "--monitor")
        .and_then(|i| flags.get(i + 1))
        .and_then(|u| u.strip_prefix("http://"))
        .map(str::to_string);
    let connz_served = || -> Option<f64> {
        let addr = monitor.clone()?;
        app.run(move || {
            use std::io::{Read, Write};
            let mut s = std::net::TcpStream::connect(addr.as_str()).ok()?;
            let _ = s.write_all(b"GET /varz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let mut body = String::new();
            let _ = s.read_to_string(&mut body);
            let json = &body[body.find("\r\n\r\n")? + 4..];
            let v: serde_json::Value = serde_json::from_str(json).ok()?;
            v["http_req_stats"]["/connz"].as_f64()
        })
    };
    let port = |i: usize| 18081 + i as u16;
    let looks_of = |i: usize| -> f64 {
        let listen = port(i);
        app.run(move || {
            use std::io::{Read, Write};
            let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", listen)) else {
                return -1.0;
            };
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let mut body = String::new();
            let _ = s.read_to_string(&mut body);
            body.lines()
                .filter(|l| l.starts_with("natsprobe_looks_total{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        })
    };
    // The look's JSON finds its part by cid, or needs no reading of it (or has no part).
    let settled = |i: usize| -> bool {
        let listen = port(i);
        app.run(move || {
            use std::io::{Read, Write};
            let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", listen)) else {
                return false;
            };
            let _ = s.write_all(
                b"GET /livez HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
            );
            let mut body = String::new();
            let _ = s.read_to_string(&mut body);
            !body.contains("\"subscriptions\"")
                || body.contains("\"looked_up\"")
                || body.contains("\"nothing_delivered\"")
                || body.contains("\"within_window\"")
        })
    };
    // Started one after another, each once its first looks are made: a pod's first look
    // matches its connection by address, a rollout's cost, not a look's.
    let started = Instant::now();
    let mut serves: Vec<std::process::Child> = Vec::new();
    for (i, state) in states.iter().enumerate() {
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--listen".into(),
            format!("127.0.0.1:{}", port(i)),
            "--every".into(),
            "100ms".into(),
            "--sample-every".into(),
            "0s".into(),
            // Time for the first look's match by address under the others' looks.
            "--timeout".into(),
            "5s".into(),
            "--server".into(),
            url.into(),
            "--state-dir".into(),
            state.path().to_string_lossy().to_string(),
        ];
        args.extend(tls.iter().cloned());
        args.extend(flags.iter().cloned());
        let mut cmd = app.command(bin);
        cmd.args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        serves.push(cmd.spawn().expect("start serve"));
        // Warm once its part was matched and is asked for by cid (a match the loaded server
        // leaves unanswered is made again by the next look, as `--sample-every 0s` asks).
        while looks_of(i) < 3.0 || !settled(i) {
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "serve's part never matched"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let looks = || (0..k).map(looks_of).sum::<f64>();
    while (0..k).any(|i| looks_of(i) < 20.0) {
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "serve made no looks"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (n0, c0, (r0, t0), at) = (looks(), servers.cpu(), servers.bytes(), Instant::now());
    let read0 = connz_served();
    std::thread::sleep(Duration::from_secs(10));
    let (n1, c1, (r1, t1)) = (looks(), servers.cpu(), servers.bytes());
    let read1 = connz_served();
    let secs = at.elapsed().as_secs_f64();
    for serve in &mut serves {
        let _ = serve.kill();
        let _ = serve.wait();
    }
    let (idle, idle_rx, idle_tx) = servers.idle();
    let n = (n1 - n0).max(1.0);
    let cost = Cost {
        cpu_ms: ((c1 - c0) - idle * secs).max(0.0) / n,
        rx: ((r1 - r0) as f64 - idle_rx * secs).max(0.0) / n,
        tx: ((t1 - t0) as f64 - idle_tx * secs).max(0.0) / n,
        wall_ms: 0.0,
    };
    let reads = read0.zip(read1).map(|(a, b)| (b - a) / n);
    (cost, reads)
}

/// The pod's server slowed (stopped for 900 ms of every second: it answers late or not at
/// all, as a starved server does) for longer than several windows, against the same server
/// well: `--own-subscription` with its connection looked up
/// every 2 s (`--subscription-every 2s`), a run every 500 ms, 60 runs each, the deadline the
/// probe's own (800ms). The server's idle rate is measured for 3 s before each spell. The server's CPU per run, the work it caught up on after the slow
/// spell included. A lookup the slow server does not answer in time must not make the fleet
/// ask it more (a full match each run walks every connection): the slow cell's CPU per run is
/// no higher than the well one's. `ours`: every run must exit 0.
fn slow_server(
    servers: &Servers,
    app: &NetNs,
    exe: &str,
    url: &str,
    ours: bool,
) -> Vec<(&'static str, Cost)> {
    let state = tempfile::tempdir().unwrap();
    let argv: Vec<String> = [
        exe,
        "check",
        "--server",
        url,
        "--consumer",
        "S/D",
        "--own-subscription",
        "--subscription-every",
        "2s",
        "--stall-after",
        "8s",
        "--state-dir",
        &state.path().to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Matched once, remembered.
    for _ in 0..3 {
        measure::run_once(app, &argv);
    }
    const RUNS: usize = 60;
    let spell = |slow: bool| -> Cost {
        let idle_cpu = {
            let c0 = servers.cpu();
            std::thread::sleep(Duration::from_secs(3));
            (servers.cpu() - c0) / 3.0
        };
        let (c0, (r0, t0), at) = (servers.cpu(), servers.bytes(), Instant::now());
        let mut codes = Vec::new();
        let mut walls = Vec::new();
        {
            let _starved = slow.then(|| {
                harness::load::Starved::new(
                    servers.pids[0],
                    Duration::from_millis(900),
                    Duration::from_secs(1),
                )
            });
            for _ in 0..RUNS {
                let s = measure::run_once(app, &argv);
                codes.push(s.code);
                walls.push(s.wall);
                std::thread::sleep(Duration::from_millis(500));
            }
        }
        // What the server still had queued, done once it is well again.
        std::thread::sleep(Duration::from_secs(2));
        let (c1, (r1, t1)) = (servers.cpu(), servers.bytes());
        let secs = at.elapsed().as_secs_f64();
        if ours {
            assert!(
                codes.iter().all(|&c| c == 0),
                "slow {slow}: not exit 0 on every run: {codes:?}"
            );
        }
        walls.sort();
        let n = RUNS as f64;
        Cost {
            cpu_ms: ((c1 - c0) - idle_cpu * secs).max(0.0) / n,
            rx: (r1 - r0) as f64 / n,
            tx: (t1 - t0) as f64 / n,
            wall_ms: walls[RUNS / 2].as_secs_f64() * 1e3,
        }
    };
    vec![
        (
            "--own-subscription, lookups every 2s: server well",
            spell(false),
        ),
        (
            "--own-subscription, lookups every 2s: server slowed",
            spell(true),
        ),
    ]
}

/// The kubelet's average per run at `periodSeconds: 10` with the defaults, for each mode:
/// the measured kinds of run weighed by how often each comes over a day
/// (`rules::restart::schedule`, the probe's own decisions). The account's connections at
/// the server are the idle ones and the app pod's three (the consumer, the journal
/// subscriber, the probe itself), which set `--subscription-every auto`'s trust time.
fn averages(rows: &[(String, Cost)], size: usize) -> Vec<(&'static str, Cost, Option<Cost>)> {
    use natsprobe::rules::remembered::TrustSetting;
    use natsprobe::rules::restart::schedule;
    let get = |name: &str| rows.iter().find(|(n, _)| n == name).map(|(_, c)| *c);
    let must = |name: &str| get(name).unwrap_or_else(|| panic!("no row {name}"));
    let day = schedule(
        8640,
        natsprobe::rules::restart::Cadence::DEFAULT,
        TrustSetting::Auto,
        size as u64 + 3,
        false,
    );
    let w = |n: u32| n as f64;
    // A day of one pod: the first run's match is left out (a rollout's cost, said apart).
    let looks = w(day.looks + day.looks_with_lookup) + w(day.matches);
    let quiet = w(day.quiet + day.lookups_alone);
    let (look, between) = (
        must("--consumer: a look"),
        must("--consumer: between looks"),
    );
    vec![
        ("sockets only", must("sockets only"), None),
        (
            "--consumer",
            Cost::weigh(&[(looks, look), (quiet, between)]),
            get("baseline: --consumer"),
        ),
        (
            "--consumer --own-subscription",
            Cost::weigh(&[
                (
                    w(day.looks + day.matches),
                    must("--own-subscription: a look, connection trusted"),
                ),
                (
                    w(day.looks_with_lookup),
                    must("--own-subscription: a look, connection by cid"),
                ),
                (
                    w(day.lookups_alone),
                    must("--own-subscription: between looks, connection by cid"),
                ),
                (
                    w(day.quiet),
                    must("--own-subscription: between looks, trusted"),
                ),
            ]),
            get("baseline: --own-subscription"),
        ),
        (
            "--own-subscription, pull",
            Cost::weigh(&[
                (looks, must("pull part: a look, connection by cid")),
                (quiet, must("pull part: between looks")),
            ]),
            None,
        ),
        (
            // No consumer, no looks: a lookup by cid whenever one is due.
            "--subscription",
            Cost::weigh(&[
                (
                    w(day.looks_with_lookup + day.lookups_alone),
                    must("--subscription: connection by cid"),
                ),
                (
                    w(day.looks + day.quiet + day.matches),
                    must("--subscription: trusted"),
                ),
            ]),
            get("baseline: --subscription"),
        ),
    ]
}

fn print_summary(summary: &[Setup]) {
    println!(
        "\nkubelet average per run, periodSeconds: 10, default settings (baseline: every run asks)"
    );
    println!(
        "  {:<8} {:>6}  {:<30} {:>10} {:>9} {:>9} {:>8} | {:>10} {:>9} {:>9} {:>8}",
        "setup", "conns", "mode", "CPU", "in", "out", "wall", "base CPU", "in", "out", "wall"
    );
    let mut by_size: Vec<(String, usize, &'static str, f64)> = Vec::new();
    for (setup, size, rows) in summary {
        for (mode, c, base) in averages(rows, *size) {
            let b = base
                .map(|b| {
                    format!(
                        "{:>7.3} ms {:>9.0} {:>9.0} {:>5.1} ms",
                        b.cpu_ms, b.rx, b.tx, b.wall_ms
                    )
                })
                .unwrap_or_else(|| format!("{:>10} {:>9} {:>9} {:>8}", "-", "-", "-", "-"));
            println!(
                "  {:<8} {:>6}  {:<30} {:>7.3} ms {:>9.0} {:>9.0} {:>5.1} ms | {b}",
                setup, size, mode, c.cpu_ms, c.rx, c.tx, c.wall_ms
            );
            by_size.push((setup.clone(), *size, mode, c.cpu_ms));
        }
    }
    println!("\n1,000 pods at periodSeconds: 10 (100 runs/s): share of one server core = CPU per run (ms) x 100 / 1000 ms");
    for (setup, size, mode, cpu) in &by_size {
        if *mode != "sockets only" {
            println!("  {setup:<8} {size:>6}  {mode:<30} {:>6.1} %", cpu * 10.0);
        }
    }
    // serve's looks hold their connection: a look that asks JetStream costs what was measured
    // at the fleet's rate, one between looks asks the server nothing. At `--every 10s` with
    // the defaults, the check's own schedule says how many looks ask.
    let asking = serve_asking(Cadence::DEFAULT);
    println!(
        "\n10,000 pods through serve (--every 10s, the defaults: {:.1} % of looks ask JetStream, {:.0} looks/s; {LONGER_FLAG}: {:.1} %): share of one server core",
        asking * 100.0,
        asking * 1000.0,
        serve_asking(LONGER) * 100.0
    );
    for (setup, size, rows) in summary {
        for (name, c) in rows.iter().filter(|(n, _)| n.starts_with("serve: ")) {
            let asking = match name.ends_with(LONGER_FLAG) {
                true => serve_asking(LONGER),
                false => asking,
            };
            let share = 1000.0 * asking * c.cpu_ms / 10.0;
            println!(
                "  {setup:<8} {size:>6}  {name:<58} {:>7.3} ms a look  {share:>6.1} % (goal <= 10 %): {}",
                c.cpu_ms,
                measure::verdict(share <= 10.0)
            );
        }
    }
    println!("\ngoals");
    let find = |setup: &str, size: usize, mode: &str| {
        by_size
            .iter()
            .find(|(s, n, m, _)| s == setup && *n == size && *m == mode)
            .map(|r| r.3)
    };
    for setup in ["single", "tls", "cluster"] {
        if let (Some(small), Some(big), Some(consumer)) = (
            find(setup, 100, "--consumer --own-subscription"),
            find(setup, 10000, "--consumer --own-subscription"),
            find(setup, 10000, "--consumer"),
        ) {
            let r = big / small.max(1e-9);
            println!(
                "  {setup}: --own-subscription at 10,000 / at 100 = {r:.2}x (goal <= 1.5x): {}",
                measure::verdict(r <= 1.5)
            );
            let r = big / consumer.max(1e-9);
            println!(
                "  {setup}: --own-subscription / --consumer at 10,000 = {r:.2}x (goal <= 2x): {}",
                measure::verdict(r <= 2.0)
            );
        }
        for size in [100, 1000, 10000] {
            for mode in ["--consumer", "--consumer --own-subscription"] {
                if let Some(c) = find(setup, size, mode) {
                    println!(
                        "  {setup} {size}: 1,000 pods with {mode} = {:.1} % of a core (goal <= 5 %): {}",
                        c * 10.0,
                        measure::verdict(c * 10.0 <= 5.0)
                    );
                }
            }
        }
    }
}

/// The guard's server CPU per durable: one guard run (two looks) over an idle account.
fn guard(durables: usize, bin: &str, baseline: Option<&str>) {
    let nats = Arc::new(NetNs::new());
    let app = Arc::new(NetNs::new());
    let (ip, _) = link(&nats, &app);
    let server = NatsServer::start(Some(&nats), Version::Pinned, ip, 4222);
    let url = server.url();
    let streams = (durables / 10).to_string();
    let mut bulk = Peer::spawn(
        Some(&nats),
        &[
            "bulk",
            "-url",
            &url,
            "-streams",
            &streams,
            "-consumers",
            "10",
        ],
    );
    bulk.wait_for("ready", Duration::from_secs(900));
    let servers = Servers {
        ns: Arc::clone(&nats),
        pids: vec![server.pid().unwrap()],
        dev: "veth200",
    };
    println!("\nguard over {durables} durables (10 runs, --interval 10ms)");
    let mut tools = vec![("guard", bin.to_string())];
    if let Some(b) = baseline {
        tools.push(("baseline: guard", b.to_string()));
    }
    for (name, exe) in tools {
        let argv: Vec<String> = [
            &exe,
            "guard",
            "--server",
            &url,
            "--interval",
            "10ms",
            "--timeout",
            "60s",
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let c = servers.cell(&app, &argv, 10, 1, None);
        println!(
            "  {name:<16} server CPU {:>8.1} ms a run = {:>6.2} µs per durable; in {:.0} B, out {:.0} B a run; wall {:.0} ms",
            c.cpu_ms,
            c.cpu_ms * 1000.0 / durables as f64,
            c.rx,
            c.tx,
            c.wall_ms
        );
    }
    drop(bulk);
}

/// The process's CPU time in ms: the sum over its threads of the scheduler's run time
/// (`/proc/<pid>/task/*/schedstat`, ns), which is utime + stime without /proc/<pid>/stat's
/// 10 ms ticks (a run costs the server well under one tick).
fn cpu_ms(pid: u32) -> f64 {
    let mut ns = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's tasks") {
        let path = task.unwrap().path().join("schedstat");
        if let Ok(text) = std::fs::read_to_string(path) {
            ns += text
                .split_whitespace()
                .next()
                .and_then(|f| f.parse().ok())
                .unwrap_or(0);
        }
    }
    ns as f64 / 1e6
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// 10,000 connections need as many descriptors in the server and in the client holding
/// them: both inherit this process's soft limit, raised to its hard limit.
fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit into a plain struct of ours.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: setrlimit from the same struct.
    let ok = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0;
    assert!(
        ok && limit.rlim_max >= 12_000,
        "RLIMIT_NOFILE's hard limit {} is below 12,000 descriptors",
        limit.rlim_max
    );
}

/// A CA and a server certificate for `ip`, in `dir`.
fn certificates(dir: &std::path::Path, ip: &str) {
    let run = |args: &[&str]| {
        let ok = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl")
            .success();
        assert!(ok, "openssl {args:?}");
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=fleet CA",
        ],
    ]
    .concat());
    std::fs::write(dir.join("server.ext"), format!("subjectAltName=IP:{ip}")).unwrap();
    run(&[
        &["req"][..],
        &ec,
        &[
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=fleet",
        ],
    ]
    .concat());
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
}
