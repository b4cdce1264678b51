//! The outage drill: the plain socket check restarts pods during a NATS outage;
//! `--server` does not, and still restarts the client that gave up once NATS is back.

use crate::harness::drill::{outage_drill, table, Mode, FAILURE_THRESHOLD, PERIOD};
use std::time::Duration;

/// Several times the client's budget (3 × 200 ms, about 0.6–0.9 s with jitter).
const LONG: Duration = Duration::from_secs(8);
/// Shorter than the budget: the client reconnects by itself.
const SHORT: Duration = Duration::from_millis(300);

#[test]
fn the_outage_drill() {
    let _serial = crate::harness::timing_lock();
    // The four drills each have a namespace of their own: run them side by side.
    let runs: Vec<_> = [
        (Mode::Plain, LONG),
        (Mode::Server, LONG),
        (Mode::Plain, SHORT),
        (Mode::Server, SHORT),
    ]
    .into_iter()
    .map(|(mode, outage)| std::thread::spawn(move || outage_drill(mode, outage)))
    .collect();
    let outcomes: Vec<_> = runs.into_iter().map(|t| t.join().unwrap()).collect();
    let report = format!(
        "{}\n{}",
        table(&outcomes),
        outcomes
            .iter()
            .map(|o| format!("{} / {:?}:\n{}", o.mode.name(), o.outage, o.log))
            .collect::<Vec<_>>()
            .join("\n")
    );
    println!("{report}");
    let [plain, server, plain_short, server_short] = &outcomes[..] else {
        unreachable!()
    };

    assert!(
        plain.restarts_during_outage >= 1,
        "the plain check restarts during an outage\n{report}"
    );
    assert_eq!(
        server.restarts_during_outage, 0,
        "--server must not restart while NATS is down\n{report}"
    );
    assert_eq!(
        server.restarts_after, 1,
        "--server restarts the client that gave up, once\n{report}"
    );
    // Detection within failureThreshold × periodSeconds of the return (plus the probe runs'
    // own time and the kill), then the new container's start-up.
    let detection = server.detection.expect("a kill after the return");
    let allowed = PERIOD * FAILURE_THRESHOLD + Duration::from_millis(150);
    assert!(
        detection <= allowed,
        "detected after {detection:?}, allowed {allowed:?}\n{report}"
    );
    let startup = server.startup.expect("a restarted container connected");
    assert!(
        server.back_to_connected <= allowed + startup + Duration::from_millis(50),
        "{report}"
    );

    for short in [plain_short, server_short] {
        assert_eq!(
            short.restarts_during_outage + short.restarts_after,
            0,
            "no restart for a short outage\n{report}"
        );
        assert!(
            short.startup.is_none(),
            "the client reconnected by itself\n{report}"
        );
    }
}
