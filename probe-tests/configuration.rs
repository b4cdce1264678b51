//! Issue 22: a check that can never run as configured says so. Refused credentials, a user not
//! permitted to ask and runs further apart than the window pass while they may be passing (a
//! rotation, one late run) and become a configuration error (exit 2, naming the fix) once they
//! have lasted longer than the window; the next run that can judge clears them. Transient
//! causes never exit 2 (the outage drill and the server-aware scenarios keep theirs).
//! Against a real server and real nats.go consumers; `--stall-after 2s` makes the window 2 s.

use crate::harness::pods::*;
use crate::harness::probe::Run;
use crate::harness::*;
use std::time::{Duration, Instant};

/// Runs `check` every 400 ms until it exits 2 or `limit` passes; every run before must pass.
fn until_configuration_error(limit: Duration, check: impl Fn() -> Run) -> (Run, Duration) {
    let started = Instant::now();
    loop {
        let run = check();
        if run.code == Some(2) {
            return (run, started.elapsed());
        }
        run.expect(0);
        assert!(
            started.elapsed() < limit,
            "no configuration error after {limit:?}\n{run}"
        );
        std::thread::sleep(Duration::from_millis(400));
    }
}

#[test]
fn refused_credentials_that_persist_are_a_configuration_error_a_single_refusal_is_not() {
    let pods = Pods::with(
        Version::Pinned,
        &["--user", "alice", "--pass", "right-pw"],
        &["-user", "alice", "-password", "right-pw"],
    );
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &[]);
    let wrong = ["--user", "alice", "--password", "wr0ng-pw"];
    let right = ["--user", "alice", "--password", "right-pw"];
    // One refusal (a rotation): not judged, exit 0, and it says what would follow.
    pods.check(&["S/D"], &wrong).expect(0).says(&[
        "consumer S/D not judged: authorization error: the server refused the probe's credentials (seen for 0ms; a configuration error, exit 2, if it lasts longer than the window 2s)",
    ]);
    // The rotation lands: judged, and the refusal is forgotten.
    pods.check(&["S/D"], &right)
        .expect(0)
        .says(&["consumer S/D idle"]);
    // Refused run after run: an error once longer than the window, never before.
    let (run, after) =
        until_configuration_error(Duration::from_secs(6), || pods.check(&["S/D"], &wrong));
    assert!(after > Duration::from_secs(2), "{after:?}\n{run}");
    run.says(&[
        "configuration error: consumer S/D not judged: authorization error: the server refused the probe's credentials; for ",
        ", longer than the window 2s: give the probe credentials the server accepts",
    ]);
    println!(
        "configuration | refused credentials: exit 2 after {after:?}: {}",
        run.line()
    );
    let json = pods.check(&["S/D"], &[&wrong[..], &["--json"]].concat());
    json.expect(2);
    let c = consumer_json(&json, 0);
    assert_eq!(json.json()["verdict"], "configuration_error", "{json}");
    assert_eq!(c["verdict"], "configuration_error", "{json}");
    assert_eq!(c["cannot_judge"]["cause"], "credentials", "{json}");
    assert_eq!(c["cannot_judge"]["class"], "configuration", "{json}");
    assert_eq!(c["cannot_judge"]["error"], true, "{json}");
    // diagnose lists it with its class, and exits as the check.
    let diagnose = pods.diagnose(&["S/D"], &wrong);
    diagnose.expect(2);
    assert!(
        diagnose.stdout.contains("Checks that could not run"),
        "{diagnose}"
    );
    assert!(
        diagnose.stdout.contains(
            "consumer S/D: credentials — the configuration: a configuration error now (exit 2)"
        ),
        "{diagnose}"
    );
    // Never latched: the next run that gets in passes.
    pods.check(&["S/D"], &right).expect(0);
}

#[test]
fn a_user_not_permitted_to_ask_is_a_configuration_error_once_it_persists() {
    let pods = Pods::with_limited_user(
        "app",
        "app-pw",
        &["$JS.API.CONSUMER.INFO.A.>", "$JS.API.STREAM.INFO.A"],
    );
    pods.push("A", "x", &[]);
    pods.push("B", "y", &[]);
    let _x = pods.consume("A", "x", &[]);
    let _y = pods.consume("B", "y", &[]);
    let app = ["--user", "app", "--password", "app-pw"];
    let (run, after) =
        until_configuration_error(Duration::from_secs(6), || pods.check(&["A/x", "B/y"], &app));
    assert!(after > Duration::from_secs(2), "{after:?}\n{run}");
    run.says(&[
        "configuration error: consumer B/y not judged: not permitted: the server refused the probe's request on $JS.API.CONSUMER.INFO.B.y (permissions violation); for ",
        "allow the probe's user to publish to $JS.API.CONSUMER.INFO.> and $JS.API.STREAM.INFO.>",
    ]);
    println!(
        "configuration | not permitted: exit 2 after {after:?}: {}",
        run.line()
    );
    // The consumer it may ask about, alone, is judged as before.
    pods.check(&["A/x"], &app).expect(0);
}

#[test]
fn runs_further_apart_than_the_window_for_longer_than_it_are_a_configuration_error() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let _wedged = pods.consume("S", "D", &["-ack", "never"]);
    pods.publish_n("s.x", 20);
    let apart = Duration::from_millis(2600);
    pods.check(&["S/D"], &[]).expect(0).says(&["first sample"]);
    std::thread::sleep(apart);
    // One late run: not measured, and not an error.
    pods.check(&["S/D"], &[]).expect(0).says(&[
        "consumer S/D not measured: the last run was 2.6s ago, longer than the window",
        "a configuration error, exit 2, if it lasts longer than the window 2s",
    ]);
    std::thread::sleep(apart);
    let run = pods.check(&["S/D"], &[]);
    run.expect(2).says(&[
        "configuration error: consumer S/D: not measured: the last run was 2.6s ago",
        ", longer than the window 2s: run the probe at least once a window (periodSeconds below 2s), or raise --stall-after",
    ]);
    println!("configuration | runs 2.6s apart: {}", run.line());
    // Runs in time again: measured, no error.
    pods.check(&["S/D"], &[])
        .expect(0)
        .says(&["consumer S/D no progress for"]);
}
