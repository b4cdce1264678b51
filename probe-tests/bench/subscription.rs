//! Benchmark: what `--own-subscription` costs. `check --consumer S/D` and `check --consumer S/D
//! --own-subscription`, side by side (interleaved, 100 runs each), on a server with 2,000 other
//! idle connections; and the bytes the server sends the probe for one check of each (counted
//! by an iptables rule in the app's network namespace).
//!
//! Run: `cargo bench --bench subscription` (root; probe-tests/setup first).

// A benchmark uses part of the shared harness; the test crate uses all of it, and the
// compiler flags what none uses there.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../harness/mod.rs"]
mod harness;
#[allow(dead_code)]
mod measure;

use harness::{link, NatsServer, NetNs, Peer, Version};
use measure::{get, measure};
use std::sync::Arc;
use std::time::Duration;

fn main() {
    let bin = harness::static_binary().to_string_lossy().to_string();
    println!("natsprobe own-subscription benchmark: {bin}");
    let nats = Arc::new(NetNs::new());
    let app = Arc::new(NetNs::new());
    let (ip, _) = link(&nats, &app);
    let server = NatsServer::start(Some(&nats), Version::Pinned, ip, 4222);
    let url = server.url();
    let mut others = Peer::spawn(Some(&nats), &["many", "-url", &url, "-n", "2000"]);
    others.wait_for("ready", Duration::from_secs(120));
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
        ],
    );
    let mut consumer = Peer::spawn(
        Some(&app),
        &[
            "consume",
            "-url",
            &url,
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
    let plain = s(&[
        &bin,
        "check",
        "--server",
        &url,
        "--consumer",
        "S/D",
        "--state-dir",
        &state,
        // Asked every run: the defaults trust the connection for 5m.
        "--sample-every",
        "0s",
        "--subscription-every",
        "0s",
    ]);
    let mut own = plain.clone();
    own.push("--own-subscription".into());
    let tools = vec![
        ("check --consumer S/D", plain.clone()),
        ("... --own-subscription", own.clone()),
    ];
    let rows = measure("2,000 other connections on the server", &app, &tools, 100);
    let (a, b) = (
        get(&rows, "check --consumer S/D"),
        get(&rows, "... --own-subscription"),
    );
    println!(
        "\n--own-subscription adds {:.2} ms ({:.2}x)",
        (b.median.as_secs_f64() - a.median.as_secs_f64()) * 1e3,
        b.median.as_secs_f64() / a.median.as_secs_f64()
    );

    // Bytes from the server to the app pod (the consumer is idle: the probe's own traffic).
    app.exec(
        "iptables",
        &[
            "-A", "INPUT", "-p", "tcp", "--sport", "4222", "-j", "ACCEPT",
        ],
    );
    let bytes = |argv: &[String]| -> u64 {
        let mut total = 0;
        for _ in 0..10 {
            app.exec("iptables", &["-Z", "INPUT"]);
            measure::run_once(&app, argv);
            let out = app
                .command("iptables")
                .args(["-L", "INPUT", "-v", "-x", "-n"])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            total += text
                .lines()
                .find(|l| l.contains("spt:4222"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|b| b.parse::<u64>().ok())
                .unwrap_or(0);
        }
        total / 10
    };
    println!(
        "bytes the server sends for one check (mean of 10): {} without, {} with --own-subscription",
        bytes(&plain),
        bytes(&own)
    );
    drop(server);
}
