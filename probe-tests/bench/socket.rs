//! Benchmark: `natsprobe check` against the two things an operator would otherwise put in an
//! exec probe, in one run, on the same socket tables:
//!   grep:  grep -qE '^ *[0-9]+: [0-9A-F]+:[0-9A-F]{4} [0-9A-F]+:<PORT-HEX> 01 ' /proc/net/tcp /proc/net/tcp6
//!   ss:    ss -Htn state established '( dport = :PORT )'
//! Each is exec'd directly (no shell), inside the same network namespace, like the kubelet
//! would run it; wall time is spawn to reap, peak RSS is the child's ru_maxrss. Tools run
//! round-robin, one run each per round, so drift is shared.
//!
//! Run: `cargo bench --bench socket` (root; probe-tests/setup first).

#[path = "../harness/mod.rs"]
mod harness;

use harness::{Flood, NatsServer, NetNs, Peer, Version};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Sample {
    wall: Duration,
    rss_kib: i64,
    code: i32,
}

fn run_once(ns: &NetNs, argv: &[String]) -> Sample {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_clear();
    ns.enter_on_exec(&mut cmd);
    let started = Instant::now();
    let child = cmd.spawn().unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let mut status = 0;
    // SAFETY: wait4 on our own child; rusage is a plain struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    assert_eq!(pid, child.id() as i32);
    std::mem::forget(child); // reaped above
    Sample {
        wall,
        rss_kib: usage.ru_maxrss,
        code: libc::WEXITSTATUS(status),
    }
}

struct Figures {
    median: Duration,
    rss_kib: i64,
    code: i32,
}

/// Runs every tool once per round, rotating the order, so drift (CPU frequency, page cache,
/// the kernel's own hash state) falls on all tools alike; then the median per tool.
fn measure_all(ns: &NetNs, tools: &[(&'static str, Vec<String>)], runs: usize) -> Vec<Figures> {
    let mut samples: Vec<Vec<Sample>> = tools.iter().map(|_| Vec::with_capacity(runs)).collect();
    for round in 0..runs + runs.min(10) {
        for k in 0..tools.len() {
            let i = (round + k) % tools.len();
            let sample = run_once(ns, &tools[i].1);
            if round >= runs.min(10) {
                samples[i].push(sample);
            }
        }
    }
    samples
        .into_iter()
        .zip(tools)
        .map(|(mut s, (name, _))| {
            let codes: Vec<i32> = s.iter().map(|x| x.code).collect();
            assert!(
                codes.windows(2).all(|w| w[0] == w[1]),
                "{name} changed its answer: {codes:?}"
            );
            s.sort_by_key(|x| x.wall);
            Figures {
                median: s[s.len() / 2].wall,
                rss_kib: s.iter().map(|x| x.rss_kib).max().unwrap(),
                code: s[0].code,
            }
        })
        .collect()
}

fn tools(bin: &str, port: u16) -> Vec<(&'static str, Vec<String>)> {
    let hex = format!("{port:04X}");
    let pattern = format!("^ *[0-9]+: [0-9A-F]+:[0-9A-F]{{4}} [0-9A-F]+:{hex} 01 ");
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        (
            "natsprobe check",
            s(&[bin, "check", "--port", &port.to_string()]),
        ),
        (
            "natsprobe check --reader proc",
            s(&[
                bin,
                "check",
                "--port",
                &port.to_string(),
                "--reader",
                "proc",
            ]),
        ),
        (
            "grep one-liner",
            s(&[
                "/bin/grep",
                "-qE",
                &pattern,
                "/proc/net/tcp",
                "/proc/net/tcp6",
            ]),
        ),
        (
            "ss -Htn state established",
            s(&[
                "/usr/bin/ss",
                "-Htn",
                "state",
                "established",
                &format!("( dport = :{port} )"),
            ]),
        ),
    ]
}

fn table(
    title: &str,
    ns: &NetNs,
    bin: &str,
    port: u16,
    runs: usize,
) -> Vec<(&'static str, Figures)> {
    println!("\n{title} ({runs} interleaved runs each, median wall, peak RSS)");
    println!(
        "  {:<32} {:>10} {:>10} {:>5}",
        "tool", "wall", "RSS", "exit"
    );
    let tools = tools(bin, port);
    let figures = measure_all(ns, &tools, runs);
    let mut rows = Vec::new();
    for ((name, _), f) in tools.into_iter().zip(figures) {
        println!(
            "  {:<32} {:>7.2} ms {:>6.2} MiB {:>5}",
            name,
            f.median.as_secs_f64() * 1e3,
            f.rss_kib as f64 / 1024.0,
            f.code
        );
        rows.push((name, f));
    }
    rows
}

fn get<'a>(rows: &'a [(&'static str, Figures)], name: &str) -> &'a Figures {
    &rows.iter().find(|(n, _)| *n == name).unwrap().1
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

fn main() {
    let bin = harness::static_binary();
    let bin_s = bin.to_string_lossy().to_string();
    let size = std::fs::metadata(&bin).unwrap().len();
    println!(
        "natsprobe socket benchmark: {} ({:.2} MiB static binary)",
        bin.display(),
        size as f64 / 1048576.0
    );
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap().trim().to_string())
        })
        .unwrap_or_default();
    println!(
        "machine: {cpu}, {} CPUs",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );

    // Pod scale: a NATS client and a few dozen other sockets (a sidecar, HTTP keep-alives).
    let pod = Arc::new(NetNs::new());
    let server = NatsServer::start(Some(&pod), Version::Pinned, "127.0.0.1", 4222);
    let _client = Peer::conn(Some(&pod), &server.url(), 60, "2s");
    let _others = Flood::new(&pod, 20);
    let sockets = count_sockets(&pod);
    let hit = table(
        &format!("pod scale, {sockets} sockets, live client (match)"),
        &pod,
        &bin_s,
        4222,
        300,
    );
    let miss = table(
        &format!("pod scale, {sockets} sockets, no client on :4223 (full scan)"),
        &pod,
        &bin_s,
        4223,
        300,
    );

    // ~100k sockets in a namespace, none to the port: every reader must look at everything.
    let big = NetNs::new();
    let started = Instant::now();
    let _flood = Flood::new(&big, 50_000);
    let sockets_big = count_sockets(&big);
    println!(
        "\n(built a {sockets_big}-socket table in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let full = table(
        &format!("{sockets_big} sockets, no match (full scan)"),
        &big,
        &bin_s,
        4222,
        30,
    );

    println!("\ngoals");
    for (label, rows) in [("match", &hit), ("no match", &miss)] {
        let (np, grep) = (get(rows, "natsprobe check"), get(rows, "grep one-liner"));
        let ratio = np.median.as_secs_f64() / grep.median.as_secs_f64();
        println!(
            "  pod scale, {label}: natsprobe/grep wall = {ratio:.2}x (goal <= 0.5x): {}",
            verdict(ratio <= 0.5)
        );
        let rss = np.rss_kib as f64 / 1024.0;
        println!(
            "  pod scale, {label}: natsprobe peak RSS = {rss:.2} MiB (goal <= 2 MiB): {}",
            verdict(rss <= 2.0)
        );
    }
    let (np, ss) = (
        get(&full, "natsprobe check"),
        get(&full, "ss -Htn state established"),
    );
    let ratio = np.median.as_secs_f64() / ss.median.as_secs_f64();
    println!(
        "  {sockets_big} sockets, no match: natsprobe/ss wall = {ratio:.2}x (goal <= 1.0x): {}",
        verdict(ratio <= 1.0)
    );
    let mib = size as f64 / 1048576.0;
    println!(
        "  static binary = {mib:.2} MiB (goal <= 5 MiB): {}",
        verdict(mib <= 5.0)
    );
    drop(server);
}

fn count_sockets(ns: &NetNs) -> usize {
    let out = ns.command("/usr/bin/ss").args(["-Htan"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}
