//! Benchmark: `natsprobe check` against the two things an operator would otherwise put in an
//! exec probe, in one run, on the same socket tables:
//!   grep:  grep -qE '^ *[0-9]+: [0-9A-F]+:[0-9A-F]{4} [0-9A-F]+:<PORT-HEX> 01 ' /proc/net/tcp /proc/net/tcp6
//!   ss:    ss -Htn state established '( dport = :PORT )'
//! Each is exec'd directly (no shell), inside the same network namespace, like the kubelet
//! would run it; wall time is spawn to reap, peak RSS is the child's ru_maxrss. Tools run
//! interleaved, one run each per round in a shuffled order, so drift is shared.
//!
//! The default check asks the kernel for each matching socket's tcp_info (the half-open
//! rule); `--half-open-after off` does not: both are measured, for the extension's cost.
//!
//! Run: `cargo bench --bench socket` (root; probe-tests/setup first). With
//! NATSPROBE_BASELINE=<another static build> that build is measured in the same rounds too.

// A benchmark uses part of the shared harness; the test crate uses all of it, and the
// compiler flags what none uses there.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../harness/mod.rs"]
mod harness;
mod measure;

use harness::{Flood, NatsServer, NetNs, Peer, Version};
use measure::{get, measure, verdict};
use std::sync::Arc;
use std::time::Instant;

fn tools(bin: &str, port: u16) -> Vec<(&'static str, Vec<String>)> {
    let hex = format!("{port:04X}");
    let pattern = format!("^ *[0-9]+: [0-9A-F]+:[0-9A-F]{{4}} [0-9A-F]+:{hex} 01 ");
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut tools = baseline()
        .map(|b| {
            vec![(
                "baseline: natsprobe check",
                s(&[&b, "check", "--port", &port.to_string()]),
            )]
        })
        .unwrap_or_default();
    tools.extend(vec![
        (
            "natsprobe check",
            s(&[bin, "check", "--port", &port.to_string()]),
        ),
        (
            "natsprobe check --half-open-after off",
            s(&[
                bin,
                "check",
                "--port",
                &port.to_string(),
                "--half-open-after",
                "off",
            ]),
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
    ]);
    tools
}

/// NATSPROBE_BASELINE: another build of the probe (e.g. the previous commit's static binary)
/// measured in the same rounds, for a before/after comparison.
fn baseline() -> Option<String> {
    std::env::var("NATSPROBE_BASELINE")
        .ok()
        .filter(|b| !b.is_empty())
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
    let table = |title: &str, ns: &NetNs, bin: &str, port: u16, runs: usize| {
        measure(title, ns, &tools(bin, port), runs)
    };
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
    // The half-open rule asks the kernel for tcp_info in the same request (the default);
    // `off` does not ask.
    for (label, rows) in [
        ("pod scale, match", &hit),
        ("pod scale, no match", &miss),
        (&*format!("{sockets_big} sockets, no match"), &full),
    ] {
        let (with, without) = (
            get(rows, "natsprobe check"),
            get(rows, "natsprobe check --half-open-after off"),
        );
        let ratio = with.median.as_secs_f64() / without.median.as_secs_f64();
        println!(
            "  {label}: tcp_info asked/not asked wall = {ratio:.2}x, peak RSS {:.2}x (goal <= 1.10x): {}",
            with.rss_kib as f64 / without.rss_kib as f64,
            verdict(ratio <= 1.10)
        );
    }
    let mib = size as f64 / 1048576.0;
    println!(
        "  static binary = {mib:.2} MiB (goal <= 5 MiB): {}",
        verdict(mib <= 5.0)
    );
    if baseline().is_some() {
        println!("\nagainst the baseline (NATSPROBE_BASELINE)");
        for (label, rows) in [
            ("pod scale, match", &hit),
            ("pod scale, no match", &miss),
            ("100k, no match", &full),
        ] {
            let (np, base) = (
                get(rows, "natsprobe check"),
                get(rows, "baseline: natsprobe check"),
            );
            println!(
                "  {label}: wall {:.2}x, peak RSS {:.2}x",
                np.median.as_secs_f64() / base.median.as_secs_f64(),
                np.rss_kib as f64 / base.rss_kib as f64
            );
        }
    }
    drop(server);
}

fn count_sockets(ns: &NetNs) -> usize {
    let out = ns.command("/usr/bin/ss").args(["-Htan"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}
