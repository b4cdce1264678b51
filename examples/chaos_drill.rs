//! The chaos drill, as a demo: three fleets of pods, each a real nats.go client under a
//! simulated kubelet, each with a 3-node nats-server cluster of its own, through one script
//! of faults against NATS and against the pods; one fleet checked by natsprobe at the
//! recommended settings, one by a `tcpSocket` probe, one by the grep one-liner. Prints what
//! each fault did and what each check made of it (docs/chaos-drill.md explains the tables).
//!
//!     cargo run --example chaos_drill              # scaled-down timings: about two minutes
//!     cargo run --example chaos_drill -- --real    # the real ones: about 20 minutes
//!
//! (or CHAOS_DRILL=real). Needs root (network namespaces, iptables), what probe-tests/setup
//! installs, and the static probe (probe-tests/run builds it; or NATSPROBE_BIN).

// The demo uses part of the shared test harness; the test crate uses all of it, and the
// compiler flags what none uses there.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../probe-tests/harness/mod.rs"]
mod harness;

use harness::chaos::{chaos_drill, stalls_line, Figures, Timings};

fn main() {
    if let Some(missing) = harness::missing_for_a_drill(&harness::deps_dir()) {
        eprintln!("chaos_drill: {missing}");
        std::process::exit(2);
    }
    let real = std::env::args().skip(1).any(|a| a == "--real")
        || std::env::var("CHAOS_DRILL").is_ok_and(|v| v == "real");
    let t = match real {
        true => Timings::real(),
        false => Timings::scaled(),
    };
    eprintln!("{}", Figures(&[], &t).settings());
    let outcome = chaos_drill(&t);
    let figures = Figures(&outcome.tallies, &t);
    for tally in &outcome.tallies {
        for (pod, log) in &tally.logs {
            println!("\n== {} world, {pod}\n{log}", tally.checker.name());
        }
    }
    println!(
        "\n{}\n{}\n\n{}\n{}\nInjections seen:\n{}\n{}took {:.0?}",
        figures.settings(),
        stalls_line(&outcome.stalls),
        figures.by_fault(),
        figures.summary(),
        figures.shown(),
        figures.notes(),
        outcome.took
    );
}
