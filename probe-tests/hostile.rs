//! Hostile peers: for `check`, `diagnose` and `guard`, each misbehaving server ends inside the
//! deadline with a clear verdict, in bounded memory.

use crate::harness::hostile::{listen, Behaviour, Reply};
use crate::harness::probe::Run;
use crate::harness::*;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

const URL: &str = "nats://127.0.0.1:4222";

/// The peers, and what the check must make of each: every one leaves the consumer "not
/// judged" (exit 0: the probe cannot tell, and a restart would not help), whatever it sends
/// and however much (the memory budget spent on NATS's answer is NATS's doing), never a
/// crash, never past the deadline, never another exit the kubelet would count.
fn peers() -> Vec<(&'static str, Option<Behaviour>)> {
    vec![
        ("silent", Some(Behaviour::Silent)),
        ("garbage", Some(Behaviour::Garbage)),
        ("endless INFO line", Some(Behaviour::EndlessInfo)),
        ("a byte a second", Some(Behaviour::Trickle)),
        ("endless reply", Some(Behaviour::Answers(Reply::Endless))),
        ("16 MiB reply", Some(Behaviour::Answers(Reply::Huge))),
        ("deeply nested reply", Some(Behaviour::Answers(Reply::Deep))),
        (
            "malformed reply",
            Some(Behaviour::Answers(Reply::Malformed)),
        ),
        ("drops packets", None),
    ]
}

/// A pod whose client holds a connection to 127.0.0.1:4222, where `behaviour` listens (or,
/// with None, a real server whose new connections are then dropped).
fn pod(behaviour: Option<Behaviour>) -> (Arc<NetNs>, Option<NatsServer>, TcpStream) {
    let ns = Arc::new(NetNs::new());
    let server = match behaviour {
        Some(b) => {
            listen(&ns, "127.0.0.1:4222", b);
            None
        }
        None => Some(NatsServer::start(
            Some(&ns),
            Version::Pinned,
            "127.0.0.1",
            4222,
        )),
    };
    let client = ns.run(|| TcpStream::connect("127.0.0.1:4222").unwrap());
    if behaviour.is_none() {
        // From now on, new connections' SYNs vanish: the probe's connect hangs.
        ns.exec(
            "iptables",
            &[
                "-A", "INPUT", "-p", "tcp", "--dport", "4222", "--syn", "-j", "DROP",
            ],
        );
    }
    (ns, server, client)
}

#[track_caller]
fn bounded(run: &Run, limit: Duration, rss_mib: i64, what: &str) {
    assert!(
        run.elapsed < limit,
        "{what}: ended after {:?}, limit {limit:?}\n{run}",
        run.elapsed
    );
    assert!(
        run.max_rss_kib < rss_mib * 1024,
        "{what}: peak RSS {} KiB\n{run}",
        run.max_rss_kib
    );
    assert!(
        !run.stderr.contains("panicked") && !run.stderr.contains("internal error"),
        "{what}: {run}"
    );
}

#[test]
fn hostile_servers_end_inside_the_deadline_in_bounded_memory() {
    let _serial = timing_lock();
    let state = tempfile::tempdir().unwrap();
    let state = state.path().to_str().unwrap().to_string();
    for (name, behaviour) in peers() {
        let (ns, _server, _client) = pod(behaviour);
        for command in ["check", "diagnose"] {
            let run = probe(&[
                command,
                "--server",
                URL,
                "--consumer",
                "S/D",
                "--own-subscription",
                "--state-dir",
                &state,
                "--timeout",
                "800ms",
            ])
            .ns(&ns)
            .rss_by_time()
            .run();
            println!(
                "hostile | {name} | {command} | exit {:?} after {:?}, {} KiB | {}",
                run.code,
                run.elapsed,
                run.max_rss_kib,
                run.line()
            );
            // The memory budget (32 MiB of heap) and the binary's own pages.
            bounded(
                &run,
                Duration::from_millis(1100),
                40,
                &format!("{name}, {command}"),
            );
            assert_eq!(run.code, Some(0), "{name}, {command}: not judged\n{run}");
            assert!(
                run.stdout.contains("not judged") || run.stderr.contains("not judged"),
                "{name}: exit 0 only as not judged\n{run}"
            );
        }
        let run = probe(&[
            "guard",
            "--server",
            URL,
            "--interval",
            "100ms",
            "--timeout",
            "1s",
        ])
        .ns(&ns)
        .rss_by_time()
        .run();
        println!(
            "hostile | {name} | guard | exit {:?} after {:?}, {} KiB | {}",
            run.code,
            run.elapsed,
            run.max_rss_kib,
            run.line()
        );
        // The guard's deadline: the interval, two looks' timeouts, and a second.
        bounded(
            &run,
            Duration::from_millis(3400),
            104,
            &format!("{name}, guard"),
        );
        run.expect(3);
        assert!(run.line().starts_with("could not evaluate: "), "{run}");
    }
}
