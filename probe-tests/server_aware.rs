//! `check --server`: fail only when a restart helps (the server answers and this client holds
//! no connection), and end inside --timeout whatever the server's address does.

use crate::harness::*;
use std::io::Write;
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const S10: Duration = Duration::from_secs(10);

fn pod() -> (Arc<NetNs>, NatsServer) {
    let ns = Arc::new(NetNs::new());
    let server = NatsServer::start(Some(&ns), Version::Pinned, "127.0.0.1", 4222);
    (ns, server)
}

/// A client that gave up while the server is back: a restart helps, so exit 1.
#[test]
fn a_client_that_gave_up_while_the_server_answers_fails() {
    let (ns, mut server) = pod();
    let mut client = Peer::conn(Some(&ns), &server.url(), 3, "200ms");
    let url = server.url();
    probe(&["--server", &url])
        .ns(&ns)
        .run()
        .expect(0)
        .says(&["healthy: 1 ESTABLISHED"]);
    server.stop();
    client.wait_for("closed", S10);
    server.resume();
    probe(&["--server", &url]).ns(&ns).run().expect(1).says(&[
        "unhealthy: client holds no connection while nats://127.0.0.1:4222 answers (nats-server 2.10.26): no ESTABLISHED TCP connection to remote port 4222",
    ]);
    // The same, with the URL from the nats CLI's variable.
    probe(&[])
        .ns(&ns)
        .env("NATS_URL", &url)
        .run()
        .expect(1)
        .says(&["while nats://127.0.0.1:4222 answers"]);
}

/// NATS itself is down: restarting would not help, so exit 0 (or 1 when asked to).
#[test]
fn no_connection_while_the_server_is_down_passes_unless_told_to_fail() {
    let (ns, mut server) = pod();
    let _client = Peer::conn(Some(&ns), &server.url(), 3, "200ms");
    let url = server.url();
    server.stop();
    probe(&["--server", &url]).ns(&ns).run().expect(0).says(&[
        "healthy: no connection, but nats://127.0.0.1:4222 is not answering (restart would not help): connection refused",
    ]);
    probe(&["--server", &url, "--when-server-down", "fail"]).ns(&ns).run().expect(1).says(&[
        "unhealthy: no connection, and nats://127.0.0.1:4222 is not answering: connection refused (--when-server-down fail)",
    ]);
    probe(&["--server", &url])
        .ns(&ns)
        .env("NATSPROBE_WHEN_SERVER_DOWN", "fail")
        .run()
        .expect(1);
    // Without --server the same pod fails: that is the restart storm --server prevents.
    probe(&[]).ns(&ns).run().expect(1);
}

/// A listener in `ns` that accepts and counts connections and answers each with `banner`
/// (nothing at all when empty).
fn listener(ns: &NetNs, addr: &'static str, banner: &'static [u8]) -> (u16, Arc<AtomicUsize>) {
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    let l = ns.run(move || TcpListener::bind(addr).unwrap());
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { break };
            count.fetch_add(1, Ordering::SeqCst);
            let _ = conn.write_all(banner);
            held.push(conn);
        }
    });
    (port, accepted)
}

/// Every way an address can fail to be NATS ends inside the default 800ms, as "not
/// answering" (exit 0), with the reason.
#[test]
fn the_run_ends_inside_the_timeout_whatever_the_server_address_does() {
    let _serial = crate::harness::timing_lock();
    let ns = NetNs::new();
    let (silent, _) = listener(&ns, "127.0.0.1:0", b"");
    let (http, _) = listener(&ns, "127.0.0.1:0", b"HTTP/1.0 400 Bad Request\r\n\r\n");
    // SYNs to this port vanish: the connect hangs.
    ns.exec(
        "iptables",
        &["-A", "INPUT", "-p", "tcp", "--dport", "4299", "-j", "DROP"],
    );
    ns.ip(&["route", "add", "blackhole", "10.98.0.0/16"]);
    let cases = [
        (format!("nats://127.0.0.1:{silent}"), "no answer"),
        (
            format!("nats://127.0.0.1:{http}"),
            "answered 'HTTP/1.0 400 Bad Request', not NATS",
        ),
        ("nats://127.0.0.1:4222".to_string(), "connection refused"),
        ("nats://127.0.0.1:4299".to_string(), "no answer"),
        (
            "nats://10.98.0.1:4222".to_string(),
            "no route to it (blackhole route)",
        ),
        (
            "nats://no-such-host.invalid:4222".to_string(),
            "name not resolved",
        ),
    ];
    for (url, why) in &cases {
        let run = probe(&["--server", url]).ns(&ns).run();
        run.expect(0).says(&[
            "healthy: no connection, but",
            "is not answering (restart would not help)",
            why,
        ]);
        assert!(
            run.elapsed < Duration::from_millis(800),
            "took {:?}\n{run}",
            run.elapsed
        );
    }
    // A shorter deadline holds just the same against the address that drops packets.
    let run = probe(&["--server", "nats://127.0.0.1:4299", "--timeout", "300ms"])
        .ns(&ns)
        .run();
    run.expect(0);
    assert!(
        run.elapsed < Duration::from_millis(300),
        "took {:?}\n{run}",
        run.elapsed
    );
    // Several URLs are asked at once: one silent one does not use up the budget of the rest.
    let both = format!("nats://127.0.0.1:4299,nats://127.0.0.1:{http}");
    let run = probe(&["--server", &both]).ns(&ns).run();
    run.expect(0)
        .says(&["nats://127.0.0.1:4299: no answer; nats://127.0.0.1:"]);
}

/// With a live connection the server is not contacted at all: no load from healthy pods.
#[test]
fn a_connected_client_costs_the_server_nothing() {
    let (ns, server) = pod();
    let _client = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    let (port, accepted) = listener(&ns, "127.0.0.1:0", b"INFO {\"version\":\"9.9.9\"}\r\n");
    let url = format!("nats://127.0.0.1:{port}");
    probe(&["--server", &url, "--port", "4222", "-v"])
        .ns(&ns)
        .run()
        .expect(0)
        .says(&["healthy: 1 ESTABLISHED TCP connection to remote port 4222"]);
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "the server was contacted"
    );
    // Control: without the connection (another port) it is asked, once.
    probe(&["--server", &url, "--port", "4223"])
        .ns(&ns)
        .run()
        .expect(1)
        .says(&["answers (nats-server 9.9.9)"]);
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

/// --port defaults to the server URLs' ports: a client of nats://...:4333 connects to 4333.
#[test]
fn the_port_comes_from_the_server_url_unless_given() {
    let ns = Arc::new(NetNs::new());
    let server = NatsServer::start(Some(&ns), Version::Pinned, "127.0.0.1", 4333);
    let _client = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    probe(&["--server", &server.url()])
        .ns(&ns)
        .run()
        .expect(0)
        .says(&["to remote port 4333"]);
    probe(&["--server", &server.url(), "--port", "4222"])
        .ns(&ns)
        .run()
        .expect(1)
        .says(&["while nats://127.0.0.1:4333 answers", "remote port 4222"]);
}

/// Credentials in --server, NATSPROBE_SERVER or NATS_URL never reach the output: not the
/// line, not -v, not --json, not errors, not --help.
#[test]
fn credentials_in_server_urls_never_appear_in_output() {
    let (ns, mut server) = pod();
    let with_user = "nats://alice:s3cret-pw@127.0.0.1:4222";
    let with_token = "nats://t0ken-s3cret@127.0.0.1:4222";
    let mut runs = vec![
        probe(&["--server", with_user, "-v"]).ns(&ns).run(),
        probe(&["--server", with_token, "--json", "-v"])
            .ns(&ns)
            .run(),
        probe(&["-v"]).ns(&ns).env("NATS_URL", with_user).run(),
        probe(&["--json"])
            .ns(&ns)
            .env("NATSPROBE_SERVER", with_token)
            .run(),
        probe(&["--server", "nats://alice:s3cret-pw@127.0.0.1:99999"]).run(),
        probe(&[])
            .env("NATS_URL", "ws://alice:s3cret-pw@nats")
            .run(),
        probe(&["--help"]).env("NATSPROBE_SERVER", with_user).run(),
        probe(&["check", "--help"])
            .env("NATSPROBE_SERVER", with_user)
            .run(),
    ];
    server.stop();
    runs.push(probe(&["--server", with_user, "-v"]).ns(&ns).run());
    runs.push(
        probe(&["--server", with_token, "--json", "-v"])
            .ns(&ns)
            .run(),
    );
    for run in &runs {
        for secret in ["s3cret", "alice", "t0ken"] {
            assert!(
                !run.stdout.contains(secret) && !run.stderr.contains(secret),
                "`{secret}` shown\n{run}"
            );
        }
    }
    assert_eq!(runs[4].code, Some(2), "{}", runs[4]);
    assert_eq!(runs[5].code, Some(2), "{}", runs[5]);
}
