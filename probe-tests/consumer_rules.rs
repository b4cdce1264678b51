//! The consumer rules against what real servers report, on every retention setting under
//! which the server deletes messages a consumer has not acknowledged, and the cases that
//! must never restart a healthy pod: a quiet consumer after a long gap, an outage, a stream
//! that keeps one message, drops after max_deliver. Each scenario prints what the server
//! reported at each run (`cargo test -- --nocapture`): the closing note's table is these lines.

use crate::harness::pods::*;
use crate::harness::probe::Run;
use crate::harness::*;
use std::time::{Duration, Instant};

/// One line of what the server reported and what the probe made of it.
fn facts(setting: &str, run: &Run) {
    let c = run.json()["consumers"][0].clone();
    let f = &c["facts"];
    println!(
        "RULES | {setting} | exit {:?} | floor {}/{} last ack {}ms ago | delivered {} | pending {} ack pending {} | first_seq {} | progress {} | {}",
        run.code,
        f["ack_floor"]["consumer_seq"],
        f["ack_floor"]["stream_seq"],
        f["ack_floor"]["last_active_ago_ms"],
        f["delivered"]["stream_seq"],
        f["num_pending"],
        f["num_ack_pending"],
        c["stream_facts"]["first_seq"],
        c["progress"],
        c["summary"].as_str().unwrap_or_default(),
    );
}

/// The runs of `check_through` with `--json`, each printed.
fn watch(pods: &Pods, consumer: &str, setting: &str, span: Duration) -> Vec<Run> {
    let runs = pods.check_through(&[consumer], &["--json"], span);
    for run in &runs {
        facts(setting, run);
    }
    runs
}

fn summary(run: &Run) -> String {
    run.json()["consumers"][0]["summary"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A stream `S` on `s.>` with `stream_args`, and a push consumer `D` in group `D`, max ack
/// pending 10, ack_wait 1 s, with `consumer_args`.
fn stream_and_consumer(pods: &Pods, stream_args: &[&str], consumer_args: &[&str]) {
    pods.push_with("S", "D", "10", &[stream_args, consumer_args].concat());
}

/// Issue family 1: a quiet consumer idle at one run; the next run comes more than a window
/// later, while its next message is being worked on. Not a stall: the time it was idle is not
/// stall time.
fn a_quiet_consumer_after_a_long_gap(version: Version) {
    let pods = Pods::new(version);
    pods.push("S", "D", &[]);
    // Work shorter than ack_wait (1 s): no redelivery, whose second ack would move last_active.
    let mut consumer = pods.consume("S", "D", &["-work", "800ms", "-report-every", "1"]);
    pods.publish_n("s.x", 1);
    consumer.wait_for("acked 1", S10);
    pods.check(&["S/D"], &[])
        .expect(0)
        .says(&["consumer S/D idle (nothing waiting)"]);
    std::thread::sleep(WINDOW + Duration::from_millis(1600));
    pods.publish_n("s.x", 1);
    std::thread::sleep(Duration::from_millis(100));
    let run = pods.check(&["S/D"], &["--json"]);
    facts(
        &format!("quiet, next message after a long gap ({version:?})"),
        &run,
    );
    run.expect(0);
    assert!(
        !summary(&run).starts_with("progressing"),
        "nothing was acked yet\n{run}"
    );
    consumer.wait_for("acked 2", S10);
    pods.check(&["S/D"], &[]).expect(0);
}
on_every_server!(a_quiet_consumer_after_a_long_gap);

/// Issue family 1: a quiet consumer idle before a NATS outage longer than the window. The
/// runs during the outage cannot observe it (the client holds no connection); after it, its
/// next message is being worked on. The outage is not stall time.
#[test]
fn an_outage_longer_than_the_window_is_not_stall_time() {
    let mut pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let mut consumer = pods.consume(
        "S",
        "D",
        &[
            "-work",
            "800ms",
            "-report-every",
            "1",
            "-max-reconnects",
            "-1",
            "-reconnect-wait",
            "100ms",
        ],
    );
    pods.publish_n("s.x", 1);
    consumer.wait_for("acked 1", S10);
    let before = watch(
        &pods,
        "S/D",
        "idle before the outage",
        Duration::from_millis(500),
    );
    before.last().unwrap().expect(0);
    pods.server.stop();
    let during = pods.check_through(&["S/D"], &[], WINDOW + Duration::from_secs(1));
    assert!(during.iter().all(|r| r.code == Some(0)), "{}", during[0]);
    pods.server.resume();
    consumer.wait_for("reconnected", S10);
    pods.publish_n("s.x", 1);
    std::thread::sleep(Duration::from_millis(100));
    let after = watch(
        &pods,
        "S/D",
        "after the outage, next message",
        Duration::from_millis(500),
    );
    for run in &after {
        run.expect(0);
    }
    consumer.wait_for("acked 2", S10);
}

/// Issue family 2: a stream that keeps one message (`max_msgs: 1`), and a consumer always busy
/// with it: each message is acked (synchronously) before the next is published, 0.6 s after
/// its delivery. Its floor sits below first_seq the whole time; nothing is lost: never
/// "losing messages".
fn acks_on_a_one_message_stream(version: Version) {
    let pods = Pods::new(version);
    stream_and_consumer(&pods, &["-max-msgs", "1"], &[]);
    let _consumer = pods.consume("S", "D", &["-work", "600ms", "-chain", "s.x"]);
    pods.publish_n("s.x", 1);
    let runs = watch(
        &pods,
        "S/D",
        &format!("max_msgs 1, busy, acking every message ({version:?})"),
        WINDOW * 2,
    );
    for run in &runs {
        run.expect(0);
        assert!(!summary(run).contains("losing"), "{run}");
    }
}
on_every_server!(acks_on_a_one_message_stream);

/// Issue family 2: `max_msgs_per_subject: 1`, the consumer on one subject while another
/// floods: its floor stays far below first_seq while it acks everything.
#[test]
fn acks_on_one_subject_while_another_floods() {
    let pods = Pods::new(Version::Pinned);
    stream_and_consumer(
        &pods,
        &["-max-msgs-per-subject", "1"],
        &["-filter-subject", "s.mine"],
    );
    let _consumer = pods.consume("S", "D", &["-work", "600ms", "-chain", "s.mine"]);
    let _flood = pods.producer("s.other", 300);
    pods.publish_n("s.mine", 1);
    let runs = watch(
        &pods,
        "S/D",
        "max_msgs_per_subject 1, busy acking one subject, another floods",
        WINDOW * 2,
    );
    for run in &runs {
        run.expect(0);
        assert!(!summary(run).contains("losing"), "{run}");
    }
}

/// Issue family 3: a consumer that never acks, on every setting under which the server
/// deletes unacknowledged messages. Deletions move its floor and last_active as acks would:
/// never "progressing". Where the floor is held at the front of the stream with work behind it
/// for a window, the probe can tell: losing messages (exit 1). Elsewhere one look cannot tell
/// acks from losses: it says so, and leaves the verdict to the guard.
#[test]
fn a_never_acking_consumer_on_every_setting_that_deletes_unacked_messages() {
    type Row<'a> = (&'a str, &'a [&'a str], &'a [&'a str], Option<i32>);
    let rows: &[Row] = &[
        (
            "max_age 1s, discard new",
            &["-max-age", "1s", "-discard", "new"],
            &[],
            Some(1),
        ),
        ("max_age 1s, discard old", &["-max-age", "1s"], &[], Some(1)),
        (
            "max_bytes 20000, discard old",
            &["-max-bytes", "20000"],
            &[],
            Some(1),
        ),
        (
            "max_msgs_per_subject 1, discard new",
            &["-max-msgs-per-subject", "1", "-discard", "new"],
            &[],
            Some(0),
        ),
        (
            "workqueue, max_msgs 50",
            &["-retention", "workqueue", "-max-msgs", "50"],
            &[],
            Some(0),
        ),
        (
            "interest, max_age 1s",
            &["-retention", "interest", "-max-age", "1s"],
            &[],
            None,
        ),
    ];
    let scenarios: Vec<_> = rows
        .iter()
        .map(|&(setting, stream_args, consumer_args, exit)| {
            std::thread::spawn(move || {
                let pods = Pods::new(Version::Pinned);
                stream_and_consumer(&pods, stream_args, consumer_args);
                let _consumer = pods.consume("S", "D", &["-ack", "never"]);
                // Per subject: every message on a subject of its own pair, so each new one
                // deletes an unacknowledged older one.
                let subject = match setting.contains("per_subject") {
                    true => "s.one",
                    false => "s.x",
                };
                let _producer = pods.producer(subject, 200);
                std::thread::sleep(Duration::from_millis(1200));
                let runs = watch(
                    &pods,
                    "S/D",
                    setting,
                    PAST_WINDOW + Duration::from_millis(800),
                );
                for run in &runs {
                    assert!(
                        !summary(run).starts_with("progressing"),
                        "{setting}: a never-acking consumer called progressing\n{run}"
                    );
                }
                let last = runs.last().unwrap();
                let words = summary(last);
                match exit {
                    Some(1) => {
                        last.expect(1);
                        assert!(words.starts_with("losing messages"), "{setting}\n{last}");
                    }
                    Some(_) => {
                        last.expect(0);
                        assert!(words.contains("acks or losses"), "{setting}\n{last}");
                    }
                    // Interest: depending on timing a stall or "cannot tell"; never progress.
                    None => assert!(
                        words.contains("acks or losses") || words.starts_with("no progress"),
                        "{setting}\n{last}"
                    ),
                }
                // The stream settings that delete unacknowledged messages are named.
                assert!(
                    last.json()["consumers"][0]["retention_deletes_unacked"].is_string(),
                    "{setting}\n{last}"
                );
            })
        })
        .collect();
    for s in scenarios {
        s.join().unwrap();
    }
}

/// Under the settings that do not delete unacknowledged messages (discard new with a message
/// limit, discard new per subject), a never-acking consumer is a plain stall.
#[test]
fn settings_that_keep_unacked_messages_leave_a_plain_stall() {
    for (setting, stream_args) in [
        (
            "max_msgs 50, discard new",
            &["-max-msgs", "50", "-discard", "new"][..],
        ),
        (
            "max_msgs_per_subject 1, discard new per subject",
            &[
                "-max-msgs-per-subject",
                "1",
                "-discard",
                "new",
                "-discard-new-per-subject",
            ][..],
        ),
    ] {
        let pods = Pods::new(Version::Pinned);
        stream_and_consumer(&pods, stream_args, &[]);
        let _consumer = pods.consume("S", "D", &["-ack", "never"]);
        // One message per subject: a second on one would be refused, per subject.
        for subject in ["s.a", "s.b", "s.c", "s.d", "s.e"] {
            pods.publish_n(subject, 1);
        }
        let runs = watch(&pods, "S/D", setting, PAST_WINDOW);
        let last = runs.last().unwrap();
        last.expect(1);
        assert!(
            summary(last).starts_with("no progress for"),
            "{setting}\n{last}"
        );
        assert_eq!(
            last.json()["consumers"][0]["retention_deletes_unacked"],
            serde_json::Value::Null,
            "{setting}\n{last}"
        );
    }
}

/// Issue family 4: a never-acking consumer with max_deliver 2 on a quiet stream. About an
/// ack_wait after the last delivery the server drops the messages and moves the floor with no
/// ack: never "progressing"; the move is reported as without an ack.
fn drops_after_max_deliver(version: Version) {
    let pods = Pods::new(version);
    stream_and_consumer(&pods, &[], &["-max-deliver", "2"]);
    let _consumer = pods.consume("S", "D", &["-ack", "never"]);
    pods.publish_n("s.x", 3);
    let runs = watch(
        &pods,
        "S/D",
        &format!("max_deliver 2, never acking, quiet ({version:?})"),
        Duration::from_secs(4),
    );
    for run in &runs {
        assert!(!summary(run).starts_with("progressing"), "{run}");
    }
    // 2.10.26 moves the floor past the dropped messages once nothing else is pending, with
    // no ack; 2.9.10 and 2.11+ report the stored floor, which only acks move: there the drop
    // shows only as the messages leaving the ack pending list.
    let progress: Vec<String> = runs
        .iter()
        .map(|r| r.json()["consumers"][0]["progress"].to_string())
        .collect();
    if version == Version::Pinned {
        assert!(
            progress.iter().any(|p| p == "\"without_ack\""),
            "the floor moved with no ack in one of {progress:?}"
        );
    }
    runs.last()
        .unwrap()
        .expect(0)
        .says(&["consumer S/D idle (nothing waiting)"]);
}
on_every_server!(drops_after_max_deliver);

/// A consumer that naks every message makes no progress: a stall.
#[test]
fn a_consumer_that_naks_everything_stalls() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &["-ack", "nak"]);
    pods.publish_n("s.x", 50);
    let runs = watch(&pods, "S/D", "naks every message", PAST_WINDOW);
    let last = runs.last().unwrap();
    last.expect(1);
    assert!(summary(last).starts_with("no progress for"), "{last}");
}

/// `ack_policy: none`: deliveries are the progress. A pull consumer fetching one at a time,
/// slower than the producer, has work waiting and is never stalled while it receives.
#[test]
fn an_ack_none_consumer_progresses_by_its_deliveries() {
    let pods = Pods::new(Version::Pinned);
    pods.setup(&[
        "-stream",
        "S",
        "-subjects",
        "s.>",
        "-durable",
        "P",
        "-ack-policy",
        "none",
    ]);
    let _consumer = pods.client(
        "consume",
        &["-pull", "-stream", "S", "-durable", "P", "-work", "20ms"],
    );
    let _producer = pods.producer("s.x", 100);
    let runs = watch(&pods, "S/P", "ack none, pull, receiving", PAST_WINDOW);
    for run in &runs {
        run.expect(0);
    }
    assert!(
        runs.iter()
            .any(|r| summary(r).contains("delivered since the last run")),
        "{}",
        runs.last().unwrap()
    );
}

/// A pull consumer nobody pulls from any more (the pod holds its connection): work waits and
/// nothing moves, and the line says no pull request is waiting.
#[test]
fn a_pull_consumer_nobody_pulls_from_stalls() {
    let pods = Pods::new(Version::Pinned);
    pods.setup(&[
        "-stream",
        "S",
        "-subjects",
        "s.>",
        "-durable",
        "P",
        "-ack-wait",
        "1s",
    ]);
    let _client = pods.client("conn", &[]);
    pods.publish_n("s.x", 30);
    let runs = watch(&pods, "S/P", "pull, nobody pulls", PAST_WINDOW);
    runs.last()
        .unwrap()
        .expect(1)
        .says(&["no progress for", "30 waiting, no pull request waiting"]);
}

/// The wording inside the window names the raised window and says it is not over.
#[test]
fn inside_a_raised_window_the_line_says_not_over() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &["-ack", "never"]);
    pods.publish_n("s.x", 5);
    let state = pods.state.path().to_string_lossy().to_string();
    let check = || {
        probe(&[
            "check",
            "--server",
            &pods.url,
            "--stall-after",
            "1s",
            "--state-dir",
            &state,
            "--consumer",
            "S/D",
        ])
        .ns(&pods.app)
        .run()
    };
    check().expect(0).says(&[
        "consumer S/D first sample (progress is judged from the next run; window 2s = 2 × ack_wait 1s)",
    ]);
    std::thread::sleep(Duration::from_millis(600));
    check().expect(0).says(&[
        "consumer S/D no progress for",
        "(window 2s = 2 × ack_wait 1s, not over)",
    ]);
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1700) {
        std::thread::sleep(PERIOD);
        check();
    }
    check()
        .expect(1)
        .says(&["(window 2s = 2 × ack_wait 1s): ack floor at 0, 5 waiting"]);
}
