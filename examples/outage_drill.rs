//! The outage drill, as a demo: a nats.go JetStream consumer under a simulated kubelet, NATS
//! stopped and started again, with the plain socket check and with `--server`. Prints the
//! kubelet's events for each run and the table the README shows.
//!
//!     cargo run --example outage_drill              # outages of 0.3 s, 8 s and 30 s
//!     cargo run --example outage_drill -- 5s 60s    # your own
//!
//! Needs root (network namespaces), what probe-tests/setup installs, and the static probe
//! (probe-tests/run builds it; or NATSPROBE_BIN). Time is scaled: the
//! client's reconnect budget is 3 × 200 ms, the probe runs every 100 ms with
//! failureThreshold 12, and the kubelet's back-off runs at 1/20 (10 s → 500 ms).

// The demo uses part of the shared test harness; the test crate uses all of it, and the
// compiler flags what none uses there.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../probe-tests/harness/mod.rs"]
mod harness;

use harness::drill::{outage_drill, table, Mode};
use natsprobe::config::duration;
use std::time::Duration;

fn main() {
    if let Some(missing) = harness::missing_for_a_drill(&harness::deps_dir()) {
        eprintln!("outage_drill: {missing}");
        std::process::exit(2);
    }
    let outages: Vec<Duration> = std::env::args()
        .skip(1)
        .map(|a| duration::parse(&a).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let outages = match outages.is_empty() {
        true => vec![
            Duration::from_millis(300),
            Duration::from_secs(8),
            Duration::from_secs(30),
        ],
        false => outages,
    };
    let runs: Vec<_> = outages
        .iter()
        .flat_map(|&o| [(Mode::Plain, o), (Mode::Server, o)])
        .map(|(mode, outage)| std::thread::spawn(move || outage_drill(mode, outage)))
        .collect();
    let outcomes: Vec<_> = runs.into_iter().map(|t| t.join().unwrap()).collect();
    for o in &outcomes {
        println!(
            "\n== natsprobe {}, NATS down for {:?}\n{}",
            o.mode.name(),
            o.outage,
            o.log
        );
    }
    println!("\n{}", table(&outcomes));
}
