//! A check that can never run as configured says so, and nothing NATS does restarts a
//! working pod. Refused credentials and a user not permitted to ask, never judged with this
//! configuration, become a configuration error (exit 2, naming the fix) once they have lasted
//! longer than the window; the same refusal after the check was judged is NATS changing under
//! a working configuration (its auth service down): exit 0, named, however long it lasts.
//! Runs further apart than the window are the pod's own: exit 2 while they keep that cadence.
//! The next run that can judge clears every cause. Against a real server and real nats.go
//! consumers; `--stall-after 2s` makes the window 2 s.

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

fn alice() -> Pods {
    let pods = Pods::with(
        Version::Pinned,
        &["--user", "alice", "--pass", "right-pw"],
        &["-user", "alice", "-password", "right-pw"],
    );
    pods.push("S", "D", &[]);
    pods
}

const WRONG: [&str; 4] = ["--user", "alice", "--password", "wr0ng-pw"];
const RIGHT: [&str; 4] = ["--user", "alice", "--password", "right-pw"];

#[test]
fn wrong_credentials_from_the_start_are_a_configuration_error_past_the_window() {
    let pods = alice();
    let _consumer = pods.consume("S", "D", &[]);
    // The first refusal: not judged, exit 0, and it says what follows and the fix.
    pods.check(&["S/D"], &WRONG).expect(0).says(&[
        "consumer S/D not judged: authorization error: the server refused the probe's credentials (never judged with this configuration: if this still holds in 2s, it is a configuration error, exit 2; the fix: give the probe credentials the server accepts",
    ]);
    // The startup probe fails at once, naming the cause: the deploy never starts.
    pods.check(&["S/D"], &[&WRONG[..], &["--startup"]].concat())
        .expect(1)
        .says(&[
            "unhealthy: not started (--startup): consumer S/D not judged: authorization error",
            "give the probe credentials the server accepts",
        ]);
    // Refused run after run: an error once longer than the window, never before.
    let (run, after) =
        until_configuration_error(Duration::from_secs(6), || pods.check(&["S/D"], &WRONG));
    assert!(after > Duration::from_secs(2), "{after:?}\n{run}");
    run.says(&[
        "configuration error: consumer S/D not judged: authorization error: the server refused the probe's credentials; for ",
        ", never judged, longer than the window 2s: give the probe credentials the server accepts",
    ]);
    println!(
        "configuration | wrong credentials from the start: exit 2 after {after:?}: {}",
        run.line()
    );
    let json = pods.check(&["S/D"], &[&WRONG[..], &["--json"]].concat());
    json.expect(2);
    let c = consumer_json(&json, 0);
    assert_eq!(json.json()["verdict"], "configuration_error", "{json}");
    assert_eq!(c["verdict"], "configuration_error", "{json}");
    assert_eq!(c["cannot_judge"]["cause"], "credentials", "{json}");
    assert_eq!(c["cannot_judge"]["class"], "configuration", "{json}");
    assert_eq!(c["cannot_judge"]["error"], true, "{json}");
    assert_eq!(c["cannot_judge"]["judged_before"], false, "{json}");
    // diagnose lists it with its class, and exits as the check.
    let diagnose = pods.diagnose(&["S/D"], &WRONG);
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
    pods.check(&["S/D"], &RIGHT)
        .expect(0)
        .says(&["consumer S/D idle"]);
}

/// The same refusal once the check was judged: NATS changed under a working configuration
/// (a rotation, its auth service down). Named, never a restart, however long it lasts.
#[test]
fn a_refusal_after_the_check_was_judged_never_exits_non_zero() {
    let pods = alice();
    let _consumer = pods.consume("S", "D", &[]);
    pods.check(&["S/D"], &RIGHT)
        .expect(0)
        .says(&["consumer S/D idle"]);
    let runs = pods.check_through(&["S/D"], &WRONG, 3 * WINDOW);
    assert!(runs.len() >= 10, "{} runs", runs.len());
    for run in &runs {
        run.expect(0).says(&[
            "healthy: consumer S/D not judged: authorization error: the server refused the probe's credentials (judged before: NATS changed under it, not a restart; if it lasts: give the probe credentials the server accepts",
        ]);
    }
    println!(
        "configuration | refused after judged, {} runs over {:?}: {}",
        runs.len(),
        3 * WINDOW,
        runs.last().unwrap().line()
    );
    let json = pods.check(&["S/D"], &[&WRONG[..], &["--json"]].concat());
    json.expect(0);
    let c = consumer_json(&json, 0);
    assert_eq!(c["cannot_judge"]["judged_before"], true, "{json}");
    assert_eq!(c["cannot_judge"]["error"], false, "{json}");
    // A startup probe of a restarted container passes: it was judged before.
    pods.check(&["S/D"], &[&WRONG[..], &["--startup"]].concat())
        .expect(0);
    pods.check(&["S/D"], &RIGHT)
        .expect(0)
        .says(&["consumer S/D idle"]);
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
        ", never judged, longer than the window 2s: allow the probe's user to publish to $JS.API.CONSUMER.INFO.> and $JS.API.STREAM.INFO.>",
    ]);
    println!(
        "configuration | not permitted: exit 2 after {after:?}: {}",
        run.line()
    );
    // The consumer it may ask about, alone, is judged as before.
    pods.check(&["A/x"], &app).expect(0);
}

/// Runs further apart than the window (a kubelet or a node that stalls, or a period set
/// longer than the window) are no configuration error: each interval counts as long as it
/// was, so a consumer that never acks is called at the first run a window after the first
/// sample, and one that acks is never.
#[test]
fn runs_further_apart_than_the_window_count_as_long_as_they_were() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let _wedged = pods.consume("S", "D", &["-ack", "never"]);
    pods.publish_n("s.x", 20);
    let apart = Duration::from_millis(2600);
    pods.check(&["S/D"], &[]).expect(0).says(&["first sample"]);
    std::thread::sleep(apart);
    let run = pods.check(&["S/D"], &[]);
    run.expect(1)
        .says(&["unhealthy: consumer S/D: no progress for 2.", "(window 2s)"]);
    println!("configuration | runs 2.6s apart: {}", run.line());
}

/// A configuration that can never work, run after run from the first: the line names its
/// cause and fix at once, JSON and `diagnose` name them too, and it is exit 2 once it has
/// lasted longer than the window (never judged with this configuration).
fn never_works(pods: &Pods, consumers: &[&str], extra: &[&str], cause: &str, says: &[&str]) {
    let first = pods.check(consumers, extra);
    first
        .expect(0)
        .says(says)
        .says(&["(never judged with this configuration: if this still holds in "]);
    // Said at once, not at the deadline.
    assert!(first.elapsed < Duration::from_millis(500), "{first}");
    let json = pods.check(consumers, &[extra, &["--json"]].concat());
    json.expect(0);
    let judged = json.json();
    let standing = judged["consumers"]
        .as_array()
        .into_iter()
        .chain(judged["subscriptions"].as_array())
        .flatten()
        .find_map(|c| c["cannot_judge"].as_object().cloned())
        .unwrap_or_else(|| panic!("no cannot_judge: {json}"));
    assert_eq!(standing["cause"], cause, "{json}");
    assert_eq!(standing["class"], "configuration", "{json}");
    assert_eq!(standing["judged_before"], false, "{json}");
    let diagnose = pods.diagnose(consumers, extra);
    diagnose.expect(0);
    assert!(
        diagnose
            .stdout
            .contains(&format!(": {cause} — the configuration, if it lasts")),
        "{diagnose}"
    );
    let (run, after) =
        until_configuration_error(Duration::from_secs(6), || pods.check(consumers, extra));
    assert!(after > Duration::from_secs(2), "{after:?}\n{run}");
    run.says(says)
        .says(&[", never judged, longer than the window 2s: "]);
    println!("configuration | {cause}: {}", first.line());
    println!(
        "configuration | {cause}: exit 2 after {after:?}: {}",
        run.line()
    );
}

#[test]
fn a_wrong_js_domain_names_the_domain_and_its_fix() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &[]);
    never_works(
        &pods,
        &["S/D"],
        &["--js-domain", "nowhere"],
        "no_jetstream",
        &[
            "consumer S/D not judged: no JetStream answers in the domain asked",
            "give --js-domain the stream's domain",
        ],
    );
    // Where it asked.
    let json = pods.check(&["S/D"], &["--js-domain", "nowhere", "--json"]);
    assert_eq!(json.json()["jetstream"]["api"], "$JS.nowhere.API", "{json}");
}

#[test]
fn a_server_without_jetstream_names_its_fix() {
    let pods = Pods::with(Version::Pinned, &["-js=false"], &[]);
    let _client = pods.client("conn", &[]);
    never_works(
        &pods,
        &["S/D"],
        &[],
        "no_jetstream",
        &["consumer S/D not judged: no JetStream answers in the domain asked"],
    );
}

#[test]
fn an_account_without_jetstream_names_its_fix() {
    let pods = Pods::with_config(
        r#"accounts {
  APP: { jetstream: enabled, users: [ { user: app, password: app-pw } ] }
  OPS: { users: [ { user: ops, password: ops-pw } ] }
}
"#,
        &["-user", "app", "-password", "app-pw"],
    );
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &[]);
    never_works(
        &pods,
        &["S/D"],
        &["--user", "ops", "--password", "ops-pw"],
        "jetstream_not_enabled",
        &[
            "consumer S/D not judged: JetStream is not enabled for the probe's account (10039)",
            "give the probe the credentials of the account that holds the stream",
        ],
    );
}

/// A server without a system account (nats-server makes one whenever JetStream runs: this
/// one has none) answers the account's connection report with "no responders" at once.
#[test]
fn no_system_account_names_its_fix_at_once() {
    let pods = Pods::bare();
    let _app = pods.client("conn", &["-subscribe", "journal.>"]);
    never_works(
        &pods,
        &[],
        &["--subscription", "journal.>"],
        "no_system_account",
        &[
            "subscription journal.> not judged: no server answers the account's connection report",
            "give the servers a system account",
        ],
    );
}

#[test]
fn an_inbox_the_probe_may_not_subscribe_to_names_its_fix() {
    let pods = Pods::with_config(
        r#"authorization {
  users = [
    { user: admin, password: admin-pw }
    { user: watcher, password: watcher-pw, permissions: { subscribe: { deny: ["_INBOX.>"] } } }
  ]
}
"#,
        &["-user", "admin", "-password", "admin-pw"],
    );
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &[]);
    let watcher = ["--user", "watcher", "--password", "watcher-pw"];
    never_works(
        &pods,
        &["S/D"],
        &watcher,
        "inbox_denied",
        &[
            "consumer S/D not judged: not permitted: the server refused the probe's subscription to _INBOX.",
            "allow the probe's user to subscribe to _INBOX.>",
        ],
    );
    never_works(
        &pods,
        &[],
        &[&watcher[..], &["--subscription", "deliver.D@D"]].concat(),
        "inbox_denied",
        &["subscription deliver.D in queue group D not judged: not permitted: the server refused the probe's subscription to _INBOX."],
    );
}
