//! Benchmark: one `natsprobe check --consumer S/D` against a nats.go program doing the same
//! single consumer info request (`natspeer info`: connect, `$JS.API.CONSUMER.INFO.S.D`,
//! print, exit), in one run, interleaved, against a local nats-server 2.10.26. The probe
//! does more (the socket check, the verdict, the state file); the goal is that it costs no
//! more than the program.
//!
//! Run: `cargo bench --bench consumer` (root; probe-tests/setup first). With
//! NATSPROBE_BASELINE=<another static build> that build is measured in the same rounds too.

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

fn main() {
    let bin = harness::static_binary().to_string_lossy().to_string();
    let peer = natspeer().to_string_lossy().to_string();
    println!("natsprobe consumer benchmark: {bin}");

    // NATS in one pod, the app (an idle, bound push consumer) in another.
    let nats = Arc::new(NetNs::new());
    let app = Arc::new(NetNs::new());
    let (ip, _) = link(&nats, &app);
    let server = NatsServer::start(Some(&nats), Version::Pinned, ip, 4222);
    let url = server.url();
    Peer::setup(
        Some(&nats),
        &[
            "-url",
            &url,
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
            "-max-ack-pending",
            "1",
        ],
    );
    let mut consumer = Peer::spawn(
        Some(&app),
        &[
            "consume",
            "-url",
            &url,
            "-stream",
            "S",
            "-durable",
            "D",
            "-deliver-subject",
            "deliver.D",
            "-deliver-group",
            "D",
        ],
    );
    consumer.wait_for("ready", Duration::from_secs(10));
    let state = tempfile::tempdir().unwrap();
    let state = state.path().to_string_lossy().to_string();

    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let tools = vec![
        (
            "natsprobe check --consumer",
            s(&[
                &bin,
                "check",
                "--server",
                &url,
                "--consumer",
                "S/D",
                "--state-dir",
                &state,
                // A look every run, as nats.go asks: the default skips after a calm look.
                "--sample-every",
                "0s",
            ]),
        ),
        (
            "nats.go: one consumer info",
            s(&[&peer, "info", "-url", &url, "-stream", "S", "-durable", "D"]),
        ),
        ("natsprobe check (sockets only)", s(&[&bin, "check"])),
    ];
    // NATSPROBE_BASELINE: another build (e.g. the previous commit's), in the
    // same rounds, with the same flags.
    let baseline = std::env::var("NATSPROBE_BASELINE")
        .ok()
        .filter(|b| !b.is_empty());
    let base_state = tempfile::tempdir().unwrap();
    let base_state = base_state.path().to_string_lossy().to_string();
    let mut tools = tools;
    if let Some(b) = &baseline {
        tools.push((
            "baseline: check --consumer",
            s(&[
                b,
                "check",
                "--server",
                &url,
                "--consumer",
                "S/D",
                "--state-dir",
                &base_state,
                // The same look every run (a baseline that has no
                // --sample-every, asked every run anyway: drop the two words for it).
                "--sample-every",
                "0s",
            ]),
        ));
    }
    let rows = measure("idle consumer, bound", &app, &tools, 200);

    println!("\ngoal");
    let (np, go) = (
        get(&rows, "natsprobe check --consumer"),
        get(&rows, "nats.go: one consumer info"),
    );
    if baseline.is_some() {
        let base = get(&rows, "baseline: check --consumer");
        println!(
            "  against the baseline (NATSPROBE_BASELINE): wall {:.2}x, peak RSS {:.2}x",
            np.median.as_secs_f64() / base.median.as_secs_f64(),
            np.rss_kib as f64 / base.rss_kib as f64
        );
    }
    let ratio = np.median.as_secs_f64() / go.median.as_secs_f64();
    println!(
        "  natsprobe --consumer / nats.go = {ratio:.2}x (goal <= 1.0x): {}",
        verdict(ratio <= 1.0)
    );
    drop(consumer);
}
