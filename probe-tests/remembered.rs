//! What a run takes from the runs before it: the pod's connection found once by
//! address and then asked for alone by cid, trusted for `--subscription-every` on the same
//! socket, and matched again when the socket, the server or the cid's owner changed; the
//! consumers asked at most every `--sample-every` while calm, every run otherwise.

use crate::harness::pods::S10;
use crate::harness::probe::Run;
use crate::harness::*;
use crate::subscription::Replicas;
use std::path::Path;
use std::time::Duration;

/// A replica in a deliver group that reconnects at once, forever.
fn replica(ns: &NetNs, url: &str) -> Peer {
    let mut p = Peer::spawn(
        Some(ns),
        &[
            "consume",
            "-url",
            url,
            "-deliver-subject",
            "deliver.D",
            "-deliver-group",
            "D",
            "-reconnect-wait",
            "100ms",
            "-max-reconnects",
            "-1",
        ],
    );
    p.wait_for("ready", S10);
    p
}

/// The remembered connection of pod `i`'s subscription, and the check's state file it is in.
fn memo(r: &Replicas, i: usize) -> (std::path::PathBuf, serde_json::Value) {
    let dir = r.state.path().join(i.to_string());
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("check-"))
        })
        .unwrap_or_else(|| panic!("no state file in {}", dir.display()));
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let connection = &value["body"]["subscriptions"][0][1]["connection"];
    assert!(connection.is_object(), "no remembered connection: {value}");
    (file, connection.clone())
}

fn found(run: &Run) -> String {
    run.json()["subscriptions"][0]["found"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn connection(run: &Run) -> String {
    run.json()["subscriptions"][0]["connection"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Closes every TCP connection to port 4222 in `ns` (sock_diag destroy, `ss -K`): the
/// client's socket goes, the process stays and reconnects from a new port.
fn kill_sockets(ns: &NetNs) {
    ns.exec("ss", &["-K", "dport", "=", ":4222"]);
}

/// First run: matched by address. Then trusted on the same socket, or (with
/// --subscription-every 0s) asked for alone by cid. The connection replaced by a new one (new
/// port, same process): matched again, never the old cid's answer.
#[test]
fn a_replaced_connection_is_matched_again() {
    let r = Replicas::new();
    let _server = NatsServer::start(Some(&r.nats), Version::Pinned, "0.0.0.0", 4222);
    let url = format!("nats://{}:4222", r.gateways[0]);
    r.deliver_group(&url, "1");
    let mut app = replica(&r.pods[0], &url);
    let base = [
        "--server",
        url.as_str(),
        "--consumer",
        "S/D",
        "--own-subscription",
    ];
    let run = |extra: &[&str]| r.check_with_defaults(0, &[&base[..], extra].concat());
    let json = |extra: &[&str]| run(&[&["--json"][..], extra].concat());

    let first = json(&[]);
    first.expect(0);
    assert_eq!(found(&first), "matched", "{first}");
    let before = connection(&first);
    assert!(before.starts_with("10.201.0.2:"), "{first}");
    run(&["-v"]).expect(0).says(&["held (10.201.0.2:"]);
    let trusted = run(&["-v"]);
    assert!(
        trusted.stdout.contains("trusted: seen holding it"),
        "{trusted}"
    );
    let cid = memo(&r, 0).1["cid"].as_u64().unwrap();
    let looked = run(&["-v", "--subscription-every", "0s"]);
    looked.expect(0);
    assert!(
        looked.stdout.contains(&format!(
            "asked for this pod's connection alone (cid {cid})"
        )),
        "{looked}"
    );

    // The same process, a new connection.
    kill_sockets(&r.pods[0]);
    app.wait_for("reconnected", S10);
    let again = run(&["-v", "--subscription-every", "0s"]);
    again.expect(0);
    assert!(
        again
            .stdout
            .contains("matched by address (the remembered socket is gone)"),
        "{again}"
    );
    let replaced = json(&["--subscription-every", "0s"]);
    replaced.expect(0);
    assert_eq!(found(&replaced), "looked_up", "{replaced}");
    let after = connection(&replaced);
    assert!(
        after.starts_with("10.201.0.2:") && after != before,
        "{before} -> {after}"
    );
    assert_eq!(
        memo(&r, 0).1["local"].as_str(),
        Some(after.as_str()),
        "the new connection is the one remembered"
    );

    // Deaf on the same socket: trusted until --subscription-every is up (the stated bound),
    // then asked by cid and found without it; never trusted again until it holds it.
    app.signal(libc::SIGHUP);
    app.wait_for("unsubscribed", S10);
    let within = json(&[]);
    within.expect(0);
    assert_eq!(found(&within), "trusted", "{within}");
    std::thread::sleep(Duration::from_millis(1_100));
    let bound = run(&["--subscription-every", "1s"]);
    bound.expect(1).says(&["holds no such subscription"]);
    let later = json(&[]);
    later.expect(1);
    assert_eq!(found(&later), "looked_up", "{later}");
}

/// `--subscription-every auto` in a large account: every lookup by cid through the account's
/// report costs the server in proportion to the account's connections, so the connection is
/// trusted 120 ms per connection the server listed (past 2,500), and the count is the one the
/// server gave. A time given is kept as given.
#[test]
fn a_large_account_is_trusted_longer() {
    let r = Replicas::new();
    let _server = NatsServer::start(Some(&r.nats), Version::Pinned, "0.0.0.0", 4222);
    let url = format!("nats://{}:4222", r.gateways[0]);
    r.deliver_group(&url, "1");
    let mut others = Peer::spawn(Some(&r.nats), &["many", "-url", &url, "-n", "2600"]);
    others.wait_for("ready", Duration::from_secs(60));
    let _app = replica(&r.pods[0], &url);
    let run = |extra: &[&str]| {
        let base = [
            "--server",
            url.as_str(),
            "--consumer",
            "S/D",
            "--own-subscription",
            "-v",
        ];
        r.check_with_defaults(0, &[&base[..], extra].concat())
    };
    let first = run(&[]);
    first.expect(0);
    assert!(first.stdout.contains("matched by address"), "{first}");
    // The others, the replica, the setup's own and the probe: the server's count, kept.
    let counted = memo(&r, 0).1["account_connections"].as_u64().unwrap();
    assert!((2_601..2_610).contains(&counted), "{counted}");
    let trusted = run(&[]);
    trusted.expect(0);
    // 120 ms a connection, in whole seconds: past 5m by the connections over 2,500.
    let secs = counted * 120 / 1000;
    assert!(
        trusted.stdout.contains(&format!(
            "(trusted for 5m{}s: --subscription-every auto, {counted} connections in the account make each lookup dearer)",
            secs - 300
        )),
        "{trusted}"
    );
    let given = run(&["--subscription-every", "5m"]);
    given.expect(0);
    assert!(
        given
            .stdout
            .contains("(trusted for 5m: --subscription-every)"),
        "{given}"
    );
}

/// The server restarted: its ids and cids start again, every client reconnects from a new
/// port. Each pod's remembered connection is dropped, its own matched again, and a deaf
/// replica is told from the other.
#[test]
fn a_restarted_server_is_matched_again() {
    let r = Replicas::new();
    let mut server = NatsServer::start(Some(&r.nats), Version::Pinned, "0.0.0.0", 4222);
    let urls: Vec<String> = r
        .gateways
        .iter()
        .map(|g| format!("nats://{g}:4222"))
        .collect();
    r.deliver_group(&urls[0], "1");
    let mut apps = [replica(&r.pods[0], &urls[0]), replica(&r.pods[1], &urls[1])];
    let json = |i: usize| {
        r.check_with_defaults(
            i,
            &[
                "--server",
                &urls[i],
                "--consumer",
                "S/D",
                "--own-subscription",
                "--subscription-every",
                "0s",
                "--json",
                "--timeout",
                "2s",
            ],
        )
    };
    for i in 0..2 {
        json(i).expect(0);
        assert_eq!(found(&json(i)), "looked_up");
    }
    let before: Vec<serde_json::Value> = (0..2).map(|i| memo(&r, i).1).collect();
    server.stop();
    server.resume();
    for app in &mut apps {
        app.wait_for("reconnected", S10);
    }
    // The deliver group's subscriptions come back with the reconnects; the consumer's own
    // leader takes a moment after a restart.
    let deadline = std::time::Instant::now() + S10;
    let mut seen = json(1);
    while seen.code != Some(0) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        seen = json(1);
    }
    seen.expect(0);
    let (_, now) = memo(&r, 1);
    assert_ne!(
        now["server"]["id"], before[1]["server"]["id"],
        "a new server id"
    );
    assert_ne!(now["local"], before[1]["local"], "a new connection");
    apps[0].signal(libc::SIGHUP);
    apps[0].wait_for("unsubscribed", S10);
    let deaf = json(0);
    deaf.expect(1).says(&["holds no such subscription"]);
    assert_eq!(found(&deaf), "matched", "{deaf}");
    let live = json(1);
    live.expect(0);
    assert_eq!(found(&live), "looked_up", "{live}");
}

/// A remembered cid that now belongs to another connection, one that holds the subscription:
/// the answer's address is not this pod's, so the deaf pod is matched by address again and
/// found deaf. Believing the cid would call it healthy.
#[test]
fn a_cid_that_is_now_another_connections() {
    let r = Replicas::new();
    let _server = NatsServer::start(Some(&r.nats), Version::Pinned, "0.0.0.0", 4222);
    let urls: Vec<String> = r
        .gateways
        .iter()
        .map(|g| format!("nats://{g}:4222"))
        .collect();
    r.deliver_group(&urls[0], "1");
    let mut deaf = replica(&r.pods[0], &urls[0]);
    let _live = replica(&r.pods[1], &urls[1]);
    let check = |i: usize, extra: &[&str]| {
        let base = [
            "--server",
            urls[i].as_str(),
            "--consumer",
            "S/D",
            "--own-subscription",
        ];
        r.check_with_defaults(i, &[&base[..], extra].concat())
    };
    check(0, &[]).expect(0);
    check(1, &[]).expect(0);
    deaf.signal(libc::SIGHUP);
    deaf.wait_for("unsubscribed", S10);
    // Pod 0's memo now names pod 1's cid (same server), and no trust.
    let (file, mut mine) = memo(&r, 0);
    let theirs = memo(&r, 1).1;
    assert_eq!(mine["server"]["id"], theirs["server"]["id"]);
    assert_ne!(mine["cid"], theirs["cid"]);
    mine["cid"] = theirs["cid"].clone();
    mine["held_at_ms"] = serde_json::Value::Null;
    write(&file, &mine);
    let run = check(0, &["-v"]);
    run.expect(1).says(&["holds no such subscription"]);
    let other = theirs["local"].as_str().unwrap();
    assert!(
        run.stdout.contains(&format!(
            "matched by address (the remembered cid is now another connection's, from {other})"
        )),
        "{run}"
    );
    // The same memo with another server id (as after a restart under the same name).
    let (file, mut mine) = memo(&r, 0);
    mine["server"]["id"] = "NSOMEONEELSE".into();
    write(&file, &mine);
    let run = check(0, &["-v", "--subscription-every", "0s"]);
    run.expect(1);
    assert!(
        run.stdout
            .contains("matched by address (the server restarted: its cids start again)"),
        "{run}"
    );
}

/// Writes `connection` as the remembered connection in `file`, the rest kept.
fn write(file: &Path, connection: &serde_json::Value) {
    let mut whole: serde_json::Value =
        serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    whole["body"]["subscriptions"][0][1]["connection"] = connection.clone();
    std::fs::write(file, serde_json::to_vec(&whole).unwrap()).unwrap();
}

/// `--sample-every`: after a calm look the consumers are not asked until it is up; a consumer
/// unbound meanwhile is seen at the next look, and then every run while it is not calm.
#[test]
fn the_consumers_are_asked_every_sample_and_after_any_fault() {
    let r = Replicas::new();
    let _server = NatsServer::start(Some(&r.nats), Version::Pinned, "0.0.0.0", 4222);
    let url = format!("nats://{}:4222", r.gateways[0]);
    r.deliver_group(&url, "1");
    let mut app = replica(&r.pods[0], &url);
    let check = |every: &str| {
        r.check_with_defaults(
            0,
            &[
                "--server",
                &url,
                "--consumer",
                "S/D",
                "--sample-every",
                every,
                "--json",
            ],
        )
    };
    let looked = |run: &Run| {
        run.json()["consumers_looked"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let first = check("3s");
    first.expect(0);
    assert_eq!(looked(&first), "asked", "{first}");
    let skipped = check("3s");
    skipped.expect(0);
    assert_eq!(looked(&skipped), "skipped", "{skipped}");
    assert!(skipped.json()["consumers"].as_array().unwrap().is_empty());
    // diagnose asks anyway, and says what the check's next run would do.
    let state = r.state.path().join("0").to_string_lossy().to_string();
    let diagnosed = crate::harness::probe(&[
        "diagnose",
        "--state-dir",
        &state,
        "--server",
        &url,
        "--consumer",
        "S/D",
        "--sample-every",
        "3s",
    ])
    .ns(&r.pods[0])
    .sampling_defaults()
    .run();
    diagnosed.expect(0);
    assert!(
        diagnosed
            .stdout
            .contains("asked by diagnose; a probe's run now would not ask: calm when asked"),
        "{diagnosed}"
    );
    // Unbound, its connection kept: not seen until the look is due.
    app.signal(libc::SIGHUP);
    app.wait_for("unsubscribed", S10);
    std::thread::sleep(Duration::from_millis(3_100));
    let due = check("3s");
    due.expect(1);
    assert_eq!(looked(&due), "asked");
    let summary = due.json()["summary"].as_str().unwrap_or("").to_string();
    assert!(
        summary.starts_with("consumer S/D: no subscriber bound"),
        "{due}"
    );
    // Not calm: asked on every run, never skipped after a fault.
    for _ in 0..3 {
        let again = check("3s");
        again.expect(1);
        assert_eq!(looked(&again), "asked", "{again}");
    }
    // A new connection (the client replaced) is asked about at once.
    drop(app);
    let mut app = replica(&r.pods[0], &url);
    let fresh = check("30s");
    fresh.expect(0);
    assert_eq!(looked(&fresh), "asked");
    kill_sockets(&r.pods[0]);
    app.wait_for("reconnected", S10);
    let reconnected = check("30s");
    assert_eq!(looked(&reconnected), "asked", "{reconnected}");
}
