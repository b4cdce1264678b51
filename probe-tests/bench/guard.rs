//! Benchmark: `natsprobe guard` over 1,000, 10,000 and 100,000 idle consumers on a local
//! nats-server 2.10.26, side by side in one run (interleaved) with a nats.go program that lists
//! every consumer with the client's paged `ConsumersInfo`, twice (the guard's two looks); at
//! 1,000 also the ADR's approach (one `consumer info` round trip per durable, in sequence,
//! twice). The guard's own time is its wall time minus its `--interval` (10 ms here). Goals:
//! <= 1.5x the paged program; at 100,000 durables peak RSS <= 64 MiB.
//!
//! Run: `cargo bench --bench guard` (root; probe-tests/setup first). NATSPROBE_BIN selects the
//! probe build (else the static release build in target/); NATSPROBE_BENCH_DURABLES=1000,10000
//! picks sizes (creating 100,000 consumers takes a minute or two).

// A benchmark uses part of the shared harness; the test crate uses all of it, and the
// compiler flags what none uses there.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../harness/mod.rs"]
mod harness;
// Each bench uses part of the shared measuring code.
#[allow(dead_code)]
mod measure;

use harness::peer::natspeer;
use harness::{link, NatsServer, NetNs, Peer, Version};
use measure::{get, measure, verdict};
use std::sync::Arc;
use std::time::Duration;

const INTERVAL: Duration = Duration::from_millis(10);

/// Durables, streams (250 consumers each beyond 1,000), and interleaved runs.
const SIZES: [(usize, usize, usize); 3] = [(1_000, 100, 30), (10_000, 40, 10), (100_000, 400, 3)];

fn main() {
    let bin = harness::static_binary().to_string_lossy().to_string();
    let peer = natspeer().to_string_lossy().to_string();
    println!("natsprobe guard benchmark: {bin}");
    let wanted: Option<Vec<usize>> = std::env::var("NATSPROBE_BENCH_DURABLES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect());
    let mut table = Vec::new();
    for (durables, streams, runs) in SIZES {
        if wanted.as_ref().is_some_and(|w| !w.contains(&durables)) {
            continue;
        }
        table.push(size(&bin, &peer, durables, streams, runs));
    }
    println!("\nsummary (median wall; the guard's own time is wall minus --interval)");
    println!(
        "  {:>8}  {:>14} {:>10}  {:>14} {:>10}  {:>6}",
        "durables", "guard", "RSS", "nats.go x2", "RSS", "ratio"
    );
    for (durables, own, rss, go, go_rss) in &table {
        println!(
            "  {durables:>8}  {:>11.1} ms {:>6.1} MiB  {:>11.1} ms {:>6.1} MiB  {:>5.2}x",
            own.as_secs_f64() * 1e3,
            *rss as f64 / 1024.0,
            go.as_secs_f64() * 1e3,
            *go_rss as f64 / 1024.0,
            own.as_secs_f64() / go.as_secs_f64()
        );
    }
    println!("goals");
    for (durables, own, rss, go, _) in &table {
        let ratio = own.as_secs_f64() / go.as_secs_f64();
        println!(
            "  {durables}: guard own time / nats.go paged = {ratio:.2}x (goal <= 1.5x): {}",
            verdict(ratio <= 1.5)
        );
        if *durables == 100_000 {
            println!(
                "  {durables}: peak RSS {:.1} MiB (goal <= 64 MiB): {}",
                *rss as f64 / 1024.0,
                verdict(*rss <= 64 * 1024)
            );
        }
    }
}

/// One account size: (durables, guard's own time, its peak RSS, nats.go's time, its RSS).
fn size(
    bin: &str,
    peer: &str,
    durables: usize,
    streams: usize,
    runs: usize,
) -> (usize, Duration, i64, Duration, i64) {
    let nats = Arc::new(NetNs::new());
    let app = Arc::new(NetNs::new());
    let (ip, _) = link(&nats, &app);
    let server = NatsServer::start(Some(&nats), Version::Pinned, ip, 4222);
    let url = server.url();
    let per_stream = (durables / streams).to_string();
    let streams = streams.to_string();
    let mut bulk = Peer::spawn(
        Some(&nats),
        &[
            "bulk",
            "-url",
            &url,
            "-streams",
            &streams,
            "-consumers",
            &per_stream,
        ],
    );
    bulk.wait_for("ready", Duration::from_secs(600));

    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut tools = vec![
        (
            "natsprobe guard (2 looks)",
            s(&[
                bin,
                "guard",
                "--server",
                &url,
                "--interval",
                "10ms",
                "--json",
            ]),
        ),
        (
            "nats.go ConsumersInfo x2",
            s(&[peer, "list", "-url", &url, "-mode", "paged", "-repeat", "2"]),
        ),
    ];
    if durables <= 1_000 {
        tools.push((
            "ADR: info per durable x2",
            s(&[peer, "list", "-url", &url, "-mode", "adr", "-repeat", "2"]),
        ));
    }
    let rows = measure(
        &format!("{durables} consumers in {streams} streams, every one listed twice"),
        &app,
        &tools,
        runs,
    );
    let g = get(&rows, "natsprobe guard (2 looks)");
    assert_eq!(g.code, 0, "the guard judged an idle account unhealthy");
    let own = g.median.saturating_sub(INTERVAL);
    let go = get(&rows, "nats.go ConsumersInfo x2");
    if durables <= 1_000 {
        let adr = get(&rows, "ADR: info per durable x2");
        println!(
            "  the ADR's one-by-one approach = {:.2}x the guard",
            adr.median.as_secs_f64() / own.as_secs_f64()
        );
    }
    drop(server);
    (durables, own, g.rss_kib, go.median, go.rss_kib)
}
