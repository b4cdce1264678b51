//! What an operator would reach for instead, run against the same scenarios, so the README's
//! comparison table rests on runs, not opinions: the grep one-liner and `ss` in an exec probe,
//! and a `tcpSocket` probe.

use crate::harness::*;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

const S10: Duration = Duration::from_secs(10);

/// The exec probe an operator writes first: any ESTABLISHED socket to remote port 4222.
pub fn grep(ns: &NetNs) -> i32 {
    ns.command("/bin/grep")
        .args(["-qE", GREP_ONE_LINER, "/proc/net/tcp", "/proc/net/tcp6"])
        .status()
        .unwrap()
        .code()
        .unwrap()
}

/// `ss` as an exec probe: exit 0 only when it lists a connection.
fn ss(ns: &NetNs) -> bool {
    let out = ns
        .command("ss")
        .args(["-Htn", "state", "established", "( dport = :4222 )"])
        .output()
        .unwrap();
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

/// A pod (the client's namespace) and a NATS node, as in production: two namespaces.
fn nodes() -> (Arc<NetNs>, Arc<NetNs>, NatsServer) {
    let app = Arc::new(NetNs::new());
    let nats = Arc::new(NetNs::new());
    let (ip, _) = link(&nats, &app);
    let server = NatsServer::start(Some(&nats), Version::Pinned, ip, 4222);
    (app, nats, server)
}

/// The grep one-liner and `ss` see the socket and nothing else: they catch a client that gave
/// up, but they also fail a client that is reconnecting by itself while NATS is down (every
/// pod restarted during an outage: the restart storm), and another connection in the same pod
/// keeps them green while the client is dead. natsprobe in the same moments.
#[test]
fn grep_and_ss_see_the_socket_and_nothing_else() {
    let (app, _nats, mut server) = nodes();
    let url = server.url();
    let mut quitter = Peer::spawn_as(
        Some(&app),
        &crate::harness::peer::natspeer_named("bento"),
        &[
            "conn",
            "-url",
            &url,
            "-max-reconnects",
            "2",
            "-reconnect-wait",
            "100ms",
        ],
    );
    quitter.wait_for("ready", S10);
    assert_eq!(grep(&app), 0);
    assert!(ss(&app));

    // The client gives up during an outage; NATS comes back. All three fail the pod.
    server.stop();
    quitter.wait_for("closed", S10);
    server.resume();
    assert_eq!(grep(&app), 1, "grep catches a client that gave up");
    assert!(!ss(&app));
    probe(&["--server", &url])
        .ns(&app)
        .run()
        .expect(1)
        .says(&["unhealthy: client holds no connection while"]);

    // A client that reconnects forever (MaxReconnects(-1)), during an outage: it holds no
    // socket either. grep and ss fail it; natsprobe --server does not.
    let mut patient = Peer::spawn(
        Some(&app),
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
    patient.wait_for("ready", S10);
    server.stop();
    patient.wait_for("disconnected", S10);
    assert_eq!(
        grep(&app),
        1,
        "grep fails a client that will reconnect by itself"
    );
    assert!(!ss(&app));
    probe(&["--server", &url])
        .ns(&app)
        .run()
        .expect(0)
        .says(&["restart would not help"]);

    // NATS back: the patient client reconnects, the quitter stays dead. The patient's
    // connection keeps the socket-only probes green; --process tells them apart.
    server.resume();
    patient.wait_for("reconnected", S10);
    assert_eq!(grep(&app), 0, "grep: green, though bento gave up");
    assert!(ss(&app));
    probe(&["--server", &url, "--process", "bento"])
        .ns(&app)
        .run()
        .expect(1)
        .says(&["unhealthy: client holds no connection while"]);
}

/// A `tcpSocket` probe connects to a port the pod listens on. The NATS connection is outbound:
/// nothing in the pod listens on 4222, so pointed at it the probe fails a healthy pod, and
/// pointed at the application's own port it never looks at NATS.
#[test]
fn a_tcp_socket_probe_cannot_look_at_an_outbound_connection() {
    let (app, _nats, server) = nodes();
    let _client = Peer::conn(Some(&app), &server.url(), 60, "2s");
    probe(&[]).ns(&app).run().expect(0);
    let pod_ip = "10.200.0.2:4222";
    let refused = app.run(move || TcpStream::connect(pod_ip).map(|_| ()));
    let e = refused.expect_err("nothing listens on the pod's 4222");
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
}
