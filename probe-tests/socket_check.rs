//! `natsprobe check`, the socket liveness probe, against real nats-server 2.10.26 and real
//! nats.go clients, each scenario in a network namespace of its own.

use crate::harness::peer::natspeer_named;
use crate::harness::*;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const S10: Duration = Duration::from_secs(10);

fn pod(host: &str) -> (Arc<NetNs>, NatsServer) {
    let ns = Arc::new(NetNs::new());
    let server = NatsServer::start(Some(&ns), Version::Pinned, host, 4222);
    (ns, server)
}

/// The incident, reproduced: the server goes away for longer than the client's reconnect
/// budget (3 × 200 ms), nats.go closes its connection for good, the server comes back, and
/// the process lives on without a connection.
fn gave_up_then_fresh(host: &str) {
    let (ns, mut server) = pod(host);
    let mut client = Peer::conn(Some(&ns), &server.url(), 3, "200ms");
    probe(&["check", "--port", "4222"])
        .ns(&ns)
        .run()
        .expect(0)
        .says(&["healthy: 1 ESTABLISHED TCP connection to remote port 4222"]);

    server.stop();
    client.wait_for("closed", S10);
    server.resume();
    assert!(
        client.is_alive(),
        "the client process must outlive its connection"
    );
    probe(&["check", "--port", "4222"])
        .ns(&ns)
        .run()
        .expect(1)
        .says(&["unhealthy: no ESTABLISHED TCP connection to remote port 4222"]);
    // `check` is the default subcommand.
    probe(&["--port", "4222"]).ns(&ns).run().expect(1);

    let _fresh = Peer::conn(Some(&ns), &server.url(), 3, "200ms");
    probe(&[])
        .ns(&ns)
        .run()
        .expect(0)
        .says(&["healthy: 1 ESTABLISHED"]);
}

#[test]
fn a_client_that_gave_up_fails_while_alive_and_a_fresh_client_passes() {
    gave_up_then_fresh("127.0.0.1");
}

#[test]
fn the_same_over_ipv6() {
    gave_up_then_fresh("::1");
}

#[test]
fn pid_and_process_stop_a_live_client_from_masking_a_dead_one() {
    let (ns, mut server) = pod("127.0.0.1");
    let url = server.url();
    let mut dead = Peer::spawn_as(
        Some(&ns),
        &natspeer_named("np-dead-client"),
        &[
            "conn",
            "-url",
            &url,
            "-max-reconnects",
            "3",
            "-reconnect-wait",
            "200ms",
        ],
    );
    let mut live = Peer::spawn_as(
        Some(&ns),
        &natspeer_named("np-live-client"),
        &[
            "conn",
            "-url",
            &url,
            "-max-reconnects",
            "-1",
            "-reconnect-wait",
            "100ms",
        ],
    );
    dead.wait_for("connected", S10);
    live.wait_for("connected", S10);
    server.stop();
    dead.wait_for("closed", S10);
    server.resume();
    live.wait_for("reconnected", S10);
    assert!(dead.is_alive());

    probe(&["check"]).ns(&ns).run().expect(0);
    let (dead_pid, live_pid) = (dead.pid().to_string(), live.pid().to_string());
    probe(&["check", "--pid", &dead_pid])
        .ns(&ns)
        .run()
        .expect(1)
        .says(&[
            "unhealthy: no ESTABLISHED",
            &format!("held by np-dead-client[{dead_pid}]"),
        ]);
    probe(&["check", "--pid", &live_pid])
        .ns(&ns)
        .run()
        .expect(0);
    probe(&["check", "--process", "np-dead-client"])
        .ns(&ns)
        .run()
        .expect(1)
        .says(&["held by np-dead-client["]);
    probe(&["check", "--process", "np-live-client"])
        .ns(&ns)
        .run()
        .expect(0);
}

/// A Node.js-style app forks short-lived workers with its own name. A worker that exits
/// between the process listing and the read of its descriptors holds no sockets: it is
/// skipped, never a usage error (exit 2), and only the process holding the connection is
/// named.
#[test]
fn a_forking_app_is_judged_by_its_connection_not_its_workers() {
    let (ns, server) = pod("127.0.0.1");
    let mut app = Peer::spawn_as(
        Some(&ns),
        &natspeer_named("npforker"),
        &["conn", "-url", &server.url(), "-fork-every", "5ms"],
    );
    app.wait_for("connected", S10);
    let held_by = format!("held by npforker[{}]", app.pid());
    let mut codes = std::collections::BTreeMap::new();
    for _ in 0..300 {
        let run = probe(&["check", "--process", "npforker"]).ns(&ns).run();
        *codes.entry(run.code).or_insert(0) += 1;
        if run.code == Some(0) {
            run.says(&["healthy: 1 ESTABLISHED", &held_by]);
        } else {
            panic!("a worker's exit changed the verdict\n{run}");
        }
    }
    assert_eq!(codes.get(&Some(0)), Some(&300), "{codes:?}");
}

#[test]
fn the_probe_sees_only_its_own_network_namespace() {
    let (pod_a, server) = pod("127.0.0.1");
    let client = Peer::conn(Some(&pod_a), &server.url(), 60, "2s");
    let pod_b = NetNs::new();
    probe(&[]).ns(&pod_a).run().expect(0);
    probe(&[]).ns(&pod_b).run().expect(1).says(&[
        "no ESTABLISHED TCP connection",
        "(no socket to that port in any state)",
    ]);

    // The test's own (host) namespace, on an ephemeral port: seen here, not from a pod.
    let host_server = NatsServer::start(None, Version::Pinned, "127.0.0.1", 0);
    let _host_client = Peer::conn(None, &host_server.url(), 60, "2s");
    let port = host_server.port.to_string();
    probe(&["--port", &port]).run().expect(0);
    probe(&["--port", &port]).ns(&pod_b).run().expect(1);

    // --netns-of reads another namespace's table: netlink from inside it (we are root),
    // /proc/PID/net when asked for /proc.
    let pid = client.pid().to_string();
    for reader in ["netlink", "proc"] {
        let run = probe(&["--netns-of", &pid, "--reader", reader, "--json"])
            .ns(&pod_b)
            .run();
        run.expect(0);
        assert_eq!(run.json()["connection"]["reader"], reader, "{run}");
    }
    // Unprivileged, setns is refused: the probe falls back to /proc/PID/net and says why.
    let run = probe(&["--netns-of", &pid, "-v"])
        .ns(&pod_b)
        .uid(65534)
        .run();
    run.expect(0);
    assert!(
        run.stdout
            .contains("reader: proc, because netlink refused: /proc/"),
        "{run}"
    );
}

#[test]
fn netlink_and_proc_readers_agree_on_a_real_nats_table() {
    // A dual-stack server: its accepted sockets are ::ffff:127.0.0.1 with 4222 as their local
    // port, and must not count.
    let (ns, mut server) = pod("::");
    let url4 = "nats://127.0.0.1:4222";
    let url6 = "nats://[::1]:4222";
    let _live: Vec<Peer> = [url4, url6, url4, url6]
        .iter()
        .map(|url| Peer::conn(Some(&ns), url, 60, "2s"))
        .collect();
    let mut quitter = Peer::conn(Some(&ns), url4, 3, "200ms");
    server.stop();
    quitter.wait_for("closed", S10);
    server.resume();
    let mut sockets = Vec::new();
    // diagnose walks the table every run: a check after a healthy one would look up only the
    // connections that run counted, and these clients are still reconnecting.
    wait_until("the live clients to reconnect", S10, || {
        let run = probe(&["diagnose", "--json", "--reader", "netlink"])
            .ns(&ns)
            .run();
        run.json()["connection"]["established"] == 4
    });
    for reader in ["netlink", "proc"] {
        let run = probe(&["--json", "-v", "--reader", reader]).ns(&ns).run();
        run.expect(0);
        let json = run.json();
        assert_eq!(json["connection"]["reader"], reader);
        // The traffic facts differ by reader (and move between runs): compare the sockets.
        let mut found: Vec<String> = json["connection"]["sockets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let mut s = s.clone();
                // TIME_WAIT sockets have no tcp_info (netlink gives none; /proc gives its
                // columns): only the connections are sure to have them.
                if s["state"] == "ESTABLISHED" {
                    assert!(s["tcp"].is_object(), "-v shows the traffic facts: {s}");
                }
                s.as_object_mut().unwrap().remove("tcp");
                s.to_string()
            })
            .collect();
        found.sort();
        sockets.push(found);
    }
    assert_eq!(sockets[0], sockets[1], "netlink and /proc disagree");
    assert!(
        sockets[0]
            .iter()
            .filter(|s| s.contains("ESTABLISHED"))
            .count()
            == 4,
        "{sockets:?}"
    );
    assert!(
        sockets[0].iter().any(|s| s.contains("[::1]")),
        "an IPv6 client: {sockets:?}"
    );
}

#[test]
fn a_client_still_trying_shows_syn_sent_and_does_not_pass() {
    let (ns, _server) = pod("127.0.0.1");
    // The server's SYNs are dropped: a new connect stays in SYN_SENT.
    ns.exec(
        "iptables",
        &[
            "-A", "INPUT", "-p", "tcp", "--dport", "4222", "--syn", "-j", "DROP",
        ],
    );
    let _client = Peer::spawn(
        Some(&ns),
        &[
            "conn",
            "-url",
            "nats://127.0.0.1:4222",
            "-retry-on-failed-connect",
            "-timeout",
            "60s",
        ],
    );
    wait_until("a SYN_SENT socket", S10, || {
        probe(&["--json"]).ns(&ns).run().json()["connection"]["other_states"]["SYN_SENT"] == 1
    });
    probe(&[]).ns(&ns).run().expect(1).says(&[
        "unhealthy: no ESTABLISHED TCP connection to remote port 4222 (0 established; ",
        "1 SYN_SENT",
    ]);
}

#[test]
fn remote_and_min_connections_narrow_what_counts() {
    let (ns, server) = pod("127.0.0.1");
    let _a = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    let _b = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    probe(&["--remote", "127.0.0.0/8"])
        .ns(&ns)
        .run()
        .expect(0)
        .says(&["healthy: 2 ESTABLISHED"]);
    probe(&["--remote", "10.0.0.0/8", "--remote", "::1"])
        .ns(&ns)
        .run()
        .expect(1)
        .says(&["remote port 4222 on 10.0.0.0/8 or ::1"]);
    probe(&["--min-connections", "2"]).ns(&ns).run().expect(0);
    probe(&["--min-connections", "3"])
        .ns(&ns)
        .run()
        .expect(1)
        .says(&["unhealthy: 2 ESTABLISHED TCP connections to remote port 4222, 3 required"]);
    probe(&["--port", "7422"])
        .ns(&ns)
        .run()
        .expect(1)
        .says(&["remote port 7422"]);
    probe(&["--port", "7422", "--port", "4222"])
        .ns(&ns)
        .run()
        .expect(0);
}

#[test]
fn verbose_and_json_say_which_reader_and_list_the_sockets() {
    let (ns, server) = pod("127.0.0.1");
    let client = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    let run = probe(&["-v"]).ns(&ns).run();
    run.expect(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[1], "  reader: netlink", "{run}");
    assert!(
        lines[2].starts_with("  ESTABLISHED 127.0.0.1:") && lines[2].contains("-> 127.0.0.1:4222"),
        "{run}"
    );

    let run = probe(&[
        "--json",
        "-v",
        "--reader",
        "proc",
        "--pid",
        &client.pid().to_string(),
    ])
    .ns(&ns)
    .run();
    run.expect(0);
    let json = run.json();
    assert_eq!(json["verdict"], "healthy");
    assert_eq!(json["connection"]["reader"], "proc");
    assert_eq!(json["connection"]["established"], 1);
    assert_eq!(json["connection"]["processes"][0]["pid"], client.pid());
    assert_eq!(json["connection"]["sockets"][0]["state"], "ESTABLISHED");
    assert!(json["summary"]
        .as_str()
        .unwrap()
        .starts_with("1 ESTABLISHED TCP connection"));
    assert_eq!(
        run.stdout.lines().count(),
        1,
        "one JSON object on one line\n{run}"
    );
}

#[test]
fn every_flag_reads_its_environment_twin_and_the_command_line_wins() {
    let (ns, server) = pod("127.0.0.1");
    let client = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    let pid = client.pid().to_string();
    let server_pid = server.pid().unwrap().to_string();
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], i32, &'a str);
    let cases: &[Case] = &[
        (&[("NATSPROBE_PORT", "7422")], &[], 1, "remote port 7422"),
        (
            &[("NATSPROBE_PORT", "7422,4222")],
            &[],
            0,
            "remote ports 4222, 7422",
        ),
        (
            &[("NATSPROBE_PORT", "7422")],
            &["--port", "4222"],
            0,
            "remote port 4222",
        ),
        (
            &[("NATSPROBE_REMOTE", "10.0.0.0/8")],
            &[],
            1,
            "on 10.0.0.0/8",
        ),
        (&[("NATSPROBE_MIN_CONNECTIONS", "2")], &[], 1, "2 required"),
        (&[("NATSPROBE_PID", &pid)], &[], 0, "held by natspeer["),
        (
            &[("NATSPROBE_PID", &server_pid)],
            &[],
            1,
            "held by nats-server[",
        ),
        (
            &[("NATSPROBE_PROCESS", "natspeer")],
            &[],
            0,
            "held by natspeer[",
        ),
        (
            &[("NATSPROBE_NETNS_OF", &pid)],
            &[],
            0,
            "in the network namespace of pid",
        ),
        (
            &[("NATSPROBE_TIMEOUT", "1ms")],
            &[],
            3,
            "--timeout 1ms passed",
        ),
        (
            &[("NATSPROBE_JSON", "1")],
            &[],
            0,
            "\"verdict\":\"healthy\"",
        ),
        (
            &[("NATSPROBE_JSON", "false")],
            &[],
            0,
            "healthy: 1 ESTABLISHED",
        ),
        (
            &[("NATSPROBE_PID", &pid)],
            &["--process", "natspeer"],
            2,
            "--pid and --process",
        ),
        (&[("NATSPROBE_PORT", "x")], &[], 2, "NATSPROBE_PORT"),
    ];
    for &(env, args, code, fragment) in cases {
        let mut p = probe(args).ns(&ns);
        for (k, v) in env {
            p = p.env(k, v);
        }
        p.run().expect(code).says(&[fragment]);
    }
    let run = probe(&[])
        .ns(&ns)
        .env("NATSPROBE_READER", "proc")
        .env("NATSPROBE_VERBOSE", "true")
        .run();
    run.expect(0);
    assert_eq!(run.stdout.lines().nth(1), Some("  reader: proc"), "{run}");
}

#[test]
fn exit_codes_for_usage_and_for_what_cannot_be_evaluated() {
    probe(&["--no-such-flag"]).run().expect(2);
    probe(&["--pid", "4194304"])
        .run()
        .expect(2)
        .says(&["natsprobe: --pid: no process with PID 4194304"]);
    probe(&["--process", "no-such-process"])
        .run()
        .expect(2)
        .says(&["--process"]);
    probe(&["--netns-of", "4194304"])
        .run()
        .expect(2)
        .says(&["--netns-of"]);
    probe(&["--timeout", "5"])
        .run()
        .expect(2)
        .says(&["--timeout"]);
    // A script that asked for JSON gets the error document, even for a flag clap rejects.
    for run in [
        probe(&["--port", "0", "--json"]).run(),
        probe(&["--port", "0"]).env("NATSPROBE_JSON", "true").run(),
    ] {
        run.expect(2);
        assert_eq!(run.json()["verdict"], "error", "{run}");
        assert!(
            run.json()["summary"]
                .as_str()
                .unwrap()
                .starts_with("natsprobe: invalid value '0' for '--port <P>'"),
            "{run}"
        );
    }
    probe(&["--help"]).run().expect(0);
    // /proc/PID/fd of another user's process is unreadable without CAP_SYS_PTRACE: exit 3,
    // with the reason.
    let (ns, server) = pod("127.0.0.1");
    let client = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    let pid = client.pid().to_string();
    probe(&["--pid", &pid])
        .ns(&ns)
        .uid(65534)
        .run()
        .expect(3)
        .says(&[&format!("could not evaluate: /proc/{pid}/fd is unreadable")]);
    let run = probe(&["--pid", &pid, "--json"]).ns(&ns).uid(65534).run();
    run.expect(3);
    assert_eq!(run.json()["verdict"], "error", "{run}");
}

#[test]
fn the_deadline_holds_when_the_socket_table_is_slow_to_read() {
    let _serial = crate::harness::timing_lock();
    let ns = NetNs::new();
    let _flood = Flood::new(&ns, 50_000);
    let full = probe(&["--reader", "proc", "--timeout", "20s"])
        .ns(&ns)
        .run();
    full.expect(1);
    assert!(
        full.elapsed > Duration::from_millis(40),
        "a 100k-socket /proc read should take a while; the test needs a slower table\n{full}"
    );
    let cut = probe(&["--reader", "proc", "--timeout", "10ms"])
        .ns(&ns)
        .run();
    cut.expect(3)
        .says(&["could not evaluate: --timeout 10ms passed while reading the socket table"]);
    let late = probe(&["--reader", "proc", "--timeout", "10ms", "--json"])
        .ns(&ns)
        .run();
    late.expect(3);
    assert_eq!(
        late.json(),
        serde_json::json!({"schema_version": 1, "verdict": "error", "summary": "could not evaluate: --timeout 10ms passed while reading the socket table"}),
        "{late}"
    );
    assert!(
        cut.elapsed < full.elapsed / 2,
        "ended {:?} after start; a full read takes {:?}\n{cut}",
        cut.elapsed,
        full.elapsed
    );
}

#[test]
fn the_probe_never_starts_a_child_process() {
    let (ns, server) = pod("127.0.0.1");
    let _client = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    let trace = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new(which("strace"));
    cmd.args([
        "-f",
        "-qq",
        "-e",
        "trace=execve,fork,vfork,clone,clone3",
        "-o",
    ])
    .arg(trace.path())
    .arg(crate::harness::probe::binary())
    .env_clear();
    ns.enter_on_exec(&mut cmd);
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(trace.path()).unwrap();
    let execs = text.lines().filter(|l| l.contains("execve(")).count();
    assert_eq!(execs, 1, "only strace's own exec of the probe:\n{text}");
    // The syscall's name, not the word: a checkout path may hold "clone".
    let cloned = |l: &&str| {
        l.split_whitespace()
            .take(2)
            .any(|call| call.starts_with("clone(") || call.starts_with("clone3("))
    };
    for line in text.lines().filter(cloned) {
        assert!(
            line.contains("CLONE_THREAD"),
            "a clone that is not a thread:\n{text}"
        );
    }
    assert!(!text.contains("fork("), "{text}");
}

fn which(program: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .unwrap();
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        !path.is_empty(),
        "{program} is missing: run probe-tests/setup"
    );
    path
}

/// The shipped artifact needs nothing but the kernel: a root with only the binary and /proc
/// (what a scratch image gives it) is enough.
#[test]
fn the_static_binary_runs_alone_in_an_empty_root_with_only_proc() {
    let bin = static_binary();
    let (ns, server) = pod("127.0.0.1");
    let _client = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    let root = tempfile::tempdir().unwrap();
    std::fs::copy(&bin, root.path().join("natsprobe")).unwrap();
    std::fs::create_dir(root.path().join("proc")).unwrap();
    let entries: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
    assert_eq!(entries.len(), 2, "the root holds the binary and /proc only");

    let out = crate::harness::rootfs::run_in_root(
        root.path(),
        &ns,
        "/natsprobe",
        &["check", "--port", "4222", "-v"],
        None,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("healthy: 1 ESTABLISHED TCP connection to remote port 4222"),
        "{stdout}"
    );
    assert!(stdout.contains("reader: netlink"), "{stdout}");
}

#[test]
fn version_names_the_release_and_git_revision() {
    let run = probe(&["--version"]).run();
    run.expect(0);
    let rev = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    assert_eq!(
        run.stdout,
        format!("natsprobe {} (git {rev})\n", env!("CARGO_PKG_VERSION")),
        "{run}"
    );
}
