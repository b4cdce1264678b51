//! Benchmark: `natsprobe guard` over 1,000 consumers in 100 streams on a local nats-server
//! 2.10.26, side by side in one run (interleaved) with a nats.go program that lists every
//! consumer with the client's paged `ConsumersInfo`, twice (the guard's two looks), and with
//! the ADR's approach (one `consumer info` round trip per durable, in sequence, twice). The
//! guard's own time is its wall time minus its `--interval` (10 ms here). Goal: <= 1.5x the
//! paged program.
//!
//! Run: `cargo bench --bench guard` (root; probe-tests/setup first). NATSPROBE_BIN selects the
//! probe build (else the static release build in target/).

// A benchmark uses part of the shared harness; the test crate uses all of it, and the
// compiler flags what none uses there.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../harness/mod.rs"]
mod harness;
mod measure;

use harness::peer::natspeer;
use harness::{link, NatsServer, NetNs, Peer, Version};
use measure::{get, measure, verdict};
use std::sync::Arc;
use std::time::Duration;

const INTERVAL: Duration = Duration::from_millis(10);

fn main() {
    let bin = harness::static_binary().to_string_lossy().to_string();
    let peer = natspeer().to_string_lossy().to_string();
    println!("natsprobe guard benchmark: {bin}");
    let nats = Arc::new(NetNs::new());
    let app = Arc::new(NetNs::new());
    let (ip, _) = link(&nats, &app);
    let server = NatsServer::start(Some(&nats), Version::Pinned, ip, 4222);
    let url = server.url();
    let mut bulk = Peer::spawn(
        Some(&nats),
        &["bulk", "-url", &url, "-streams", "100", "-consumers", "10"],
    );
    bulk.wait_for("ready", Duration::from_secs(120));

    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let tools = vec![
        (
            "natsprobe guard (2 looks)",
            s(&[
                &bin,
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
            s(&[
                &peer, "list", "-url", &url, "-mode", "paged", "-repeat", "2",
            ]),
        ),
        (
            "ADR: info per durable x2",
            s(&[&peer, "list", "-url", &url, "-mode", "adr", "-repeat", "2"]),
        ),
    ];
    let rows = measure(
        "1,000 consumers in 100 streams, every one listed twice",
        &app,
        &tools,
        30,
    );
    let g = get(&rows, "natsprobe guard (2 looks)");
    let own = g.median.saturating_sub(INTERVAL);
    let go = get(&rows, "nats.go ConsumersInfo x2");
    let adr = get(&rows, "ADR: info per durable x2");
    println!(
        "\nthe guard's own time (wall minus --interval {INTERVAL:?}): {:.1} ms; peak RSS {:.2} MiB",
        own.as_secs_f64() * 1e3,
        g.rss_kib as f64 / 1024.0
    );
    let ratio = own.as_secs_f64() / go.median.as_secs_f64();
    println!(
        "goal\n  guard own time / nats.go paged = {ratio:.2}x (goal <= 1.5x): {}",
        verdict(ratio <= 1.5)
    );
    println!(
        "  the ADR's one-by-one approach = {:.2}x the guard",
        adr.median.as_secs_f64() / own.as_secs_f64()
    );
    drop(server);
}
