//! The exact lookup against real nats-server 2.10.26 and real nats.go clients: after a healthy
//! run, the next asks the kernel for exactly the connections it counted; whatever changed (a
//! reconnect on the same address pair, TIME_WAIT, CLOSE_WAIT, another holder, too few left)
//! is walked, and the verdict is the one a walk gives. Half-open: `half_open.rs`.

use crate::harness::probe::{test_tmpdir, Run};
use crate::harness::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

const S10: Duration = Duration::from_secs(10);

fn pod() -> (Arc<NetNs>, NatsServer) {
    let ns = Arc::new(NetNs::new());
    let server = NatsServer::start(Some(&ns), Version::Pinned, "127.0.0.1", 4222);
    (ns, server)
}

/// How the run found its sockets: `lookup`, `remembered`, `unchanged` from the JSON.
fn lookup(run: &Run) -> (String, Value, Value) {
    let c = &run.json()["connection"];
    (
        c["lookup"].as_str().unwrap_or_default().to_string(),
        c["remembered"].clone(),
        c["unchanged"].clone(),
    )
}

#[track_caller]
fn looked_up(run: &Run, remembered: u64) {
    assert_eq!(
        lookup(run),
        ("exact".into(), remembered.into(), lookup(run).2),
        "{run}"
    );
}

#[track_caller]
fn walked(run: &Run, remembered: u64, unchanged: Option<u64>) {
    let unchanged = unchanged.map_or(Value::Null, Value::from);
    assert_eq!(
        lookup(run),
        ("walk".into(), remembered.into(), unchanged),
        "{run}"
    );
}

/// The probe under strace: the netlink requests it sent, as strace decodes them.
fn requests(ns: &NetNs, args: &[&str]) -> String {
    let trace = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net={}", ns.path()))
        .args(["--", "strace", "-qq", "-e", "trace=sendto", "-o"])
        .arg(trace.path())
        .arg(crate::harness::probe::binary())
        .args(args)
        .env_clear()
        .env("TMPDIR", test_tmpdir());
    let out = cmd
        .output()
        .expect("strace (probe-tests/setup installs it)");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(trace.path()).unwrap()
}

/// A first run walks the table (nothing is remembered) and dumps; the next asks the kernel for
/// the one socket it counted, with no dump at all (strace sees the request's flags), and says
/// so; the words and the verdict are the walk's. The same in a namespace with a TCP table of
/// its own (the kernel looks there, not in the host's).
#[test]
fn the_run_after_a_healthy_one_looks_up_the_socket_it_counted() {
    let (ns, server) = pod();
    let _client = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    assert!(ns.tcp_ehash_entries() < 0, "the host's table, shared");
    the_second_run_looks_up(&ns);
    let own = Arc::new(NetNs::with_own_table(1024));
    let server = NatsServer::start(Some(&own), Version::Pinned, "127.0.0.1", 4222);
    let _client = Peer::conn(Some(&own), &server.url(), 60, "2s");
    assert_eq!(own.tcp_ehash_entries(), 1024);
    the_second_run_looks_up(&own);
}

fn the_second_run_looks_up(ns: &NetNs) {
    // NLM_F_DUMP is 0x300; strace names it for some message types only.
    let dumps = |trace: &str| trace.contains("NLM_F_DUMP") || trace.contains("|0x300");
    let first = requests(ns, &["check"]);
    assert!(dumps(&first), "the first run walks:\n{first}");
    let second = requests(ns, &["check"]);
    assert!(second.contains("nlmsg_flags=NLM_F_REQUEST"), "{second}");
    assert!(!dumps(&second), "no dump:\n{second}");

    let run = probe(&["--json", "-v"]).ns(ns).run();
    run.expect(0);
    looked_up(&run, 1);
    assert_eq!(run.json()["connection"]["unchanged"], 1, "{run}");
    let v = probe(&["-v"]).ns(ns).run();
    v.expect(0)
        .says(&["healthy: 1 ESTABLISHED TCP connection to remote port 4222"]);
    assert!(
        v.stdout.contains(
            "  looked up: the 1 connection the last healthy run counted, each by its sock_diag identity; 1 unchanged and live (the table was not walked)"
        ),
        "{v}"
    );
    // A fresh state dir remembers nothing: the first run there walks.
    let fresh = tempfile::tempdir().unwrap();
    let run = probe(&["--json"])
        .ns(ns)
        .env("TMPDIR", fresh.path().to_str().unwrap())
        .run();
    run.expect(0);
    walked(&run, 0, None);
    // diagnose lists every socket: it always walks.
    let run = probe(&["diagnose", "--json"]).ns(ns).run();
    run.expect(0);
    assert_eq!(run.json()["connection"]["lookup"], "walk", "{run}");
}

/// The client reconnects from the same local port: a new socket on the same address pair,
/// with a new cookie and inode. The remembered cookie makes the kernel answer "no such
/// socket"; the walk finds the new one (healthy), and the run after it looks that one up.
#[test]
fn a_reconnect_on_the_same_address_pair_is_walked() {
    let (ns, mut server) = pod();
    let mut client = Peer::spawn(
        Some(&ns),
        &[
            "conn",
            "-url",
            &server.url(),
            "-local-port",
            "40123",
            "-max-reconnects",
            "-1",
            "-reconnect-wait",
            "100ms",
        ],
    );
    let local = client.wait_for("connected", S10);
    probe(&["--json"]).ns(&ns).run().expect(0);
    let before = probe(&["--json", "-v"]).ns(&ns).run();
    looked_up(&before, 1);

    server.stop();
    client.wait_for("disconnected", S10);
    server.resume();
    let again = client.wait_for("reconnected", S10);
    assert_eq!(
        again.split_whitespace().nth(1),
        local.split_whitespace().nth(1),
        "the same address pair"
    );
    let run = probe(&["--json", "-v"]).ns(&ns).run();
    run.expect(0);
    walked(&run, 1, Some(0));
    let socket = |r: &Run| r.json()["connection"]["sockets"][0].clone();
    assert_eq!(socket(&run)["local"], socket(&before)["local"], "{run}");
    assert_ne!(socket(&run)["inode"], socket(&before)["inode"], "{run}");
    looked_up(&probe(&["--json"]).ns(&ns).run(), 1);
}

/// The remembered connection closed by the client (TIME_WAIT, which keeps the socket's cookie
/// with no inode), then another one the server closed while its client cannot read
/// (CLOSE_WAIT): each walked, and unhealthy as a walk says.
#[test]
fn a_remembered_connection_gone_to_time_wait_or_close_wait_is_walked() {
    let (ns, mut server) = pod();
    let client = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    probe(&[]).ns(&ns).run().expect(0);
    looked_up(&probe(&["--json"]).ns(&ns).run(), 1);
    // SIGTERM: nats.go closes first, so the client's side waits in TIME_WAIT.
    client.signal(libc::SIGTERM);
    wait_until("the client's socket in TIME_WAIT", S10, || {
        let run = probe(&["--json"]).ns(&ns).run();
        run.json()["connection"]["other_states"]["TIME_WAIT"].as_u64() >= Some(1)
    });
    let run = probe(&["--json"]).ns(&ns).run();
    run.expect(1);
    walked(&run, 1, Some(0));
    probe(&[]).ns(&ns).run().expect(1).says(&[
        "unhealthy: no ESTABLISHED TCP connection to remote port 4222",
        "TIME_WAIT",
    ]);

    let wedged = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    let run = probe(&["--json"]).ns(&ns).run();
    run.expect(0);
    walked(&run, 1, Some(0));
    looked_up(&probe(&["--json"]).ns(&ns).run(), 1);
    // The client stops reading; the server goes away: its FIN leaves the socket in CLOSE_WAIT.
    wedged.signal(libc::SIGSTOP);
    // A stop is complete only once every thread has taken it: until then a thread of the
    // client could read the server's FIN and close.
    wait_until("the client stopped", S10, || wedged.stopped());
    server.stop();
    wait_until("the client's socket in CLOSE_WAIT", S10, || {
        let run = probe(&["--json"]).ns(&ns).run();
        run.json()["connection"]["other_states"]["CLOSE_WAIT"].as_u64() >= Some(1)
    });
    let run = probe(&["--json"]).ns(&ns).run();
    run.expect(1);
    walked(&run, 1, Some(0));
    probe(&[]).ns(&ns).run().expect(1).says(&[
        "unhealthy: no ESTABLISHED TCP connection to remote port 4222",
        "CLOSE_WAIT",
    ]);
    wedged.signal(libc::SIGCONT);
}

/// Two connections, `--min-connections 2`: with one of them gone the lookup finds one, too
/// few, and the walk says unhealthy; with `--min-connections 1` the one left decides.
#[test]
fn too_few_remembered_connections_left_is_walked() {
    let (ns, server) = pod();
    let _a = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    let b = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    let two = ["--min-connections", "2", "--json"];
    let run = probe(&two).ns(&ns).run();
    run.expect(0);
    walked(&run, 0, None);
    looked_up(&probe(&two).ns(&ns).run(), 2);
    drop(b);
    let run = probe(&two).ns(&ns).run();
    run.expect(1);
    walked(&run, 2, Some(1));
    assert!(
        run.json()["summary"]
            .as_str()
            .unwrap()
            .starts_with("1 ESTABLISHED TCP connection to remote port 4222, 2 required"),
        "{run}"
    );
    // An unhealthy run leaves what was remembered: one of the two is enough for one.
    let run = probe(&["--min-connections", "1", "--json"]).ns(&ns).run();
    run.expect(0);
    looked_up(&run, 2);
    assert_eq!(run.json()["connection"]["unchanged"], 1, "{run}");
    // ... and keeps only that one.
    looked_up(&probe(&["--json"]).ns(&ns).run(), 1);
}

/// A process named NAME holding a connection to the server: the test's own socket, made in
/// the pod and passed as descriptor `fd` to a `sleep` named NAME.
fn holder(name: &str, socket: &std::net::TcpStream, fd: i32) -> Child {
    let sleep = test_tmpdir().join(name);
    if !sleep.exists() {
        std::os::unix::fs::symlink("/bin/sleep", &sleep).unwrap();
    }
    let from = socket.as_raw_fd();
    let mut cmd = Command::new(&sleep);
    cmd.arg("60");
    // SAFETY: dup2 and fcntl are async-signal-safe. dup2 onto itself would keep the
    // close-on-exec flag: then it is cleared.
    unsafe {
        cmd.pre_exec(move || {
            let done = match from == fd {
                true => libc::fcntl(fd, libc::F_SETFD, 0),
                false => libc::dup2(from, fd),
            };
            match done {
                -1 => Err(std::io::Error::last_os_error()),
                _ => Ok(()),
            }
        });
    }
    cmd.spawn().unwrap()
}

/// With `--process`, the remembered holder's descriptor is read again (one readlink). The
/// socket passed to another process of that name, its first holder gone: the lookup finds
/// the socket unchanged but not held as before, the walk finds the new holder (healthy), and
/// the run after looks it up through the new holder's descriptor. A `--pid` that is gone is
/// exit 2, as a walk says.
#[test]
fn another_process_holding_the_remembered_socket_is_walked() {
    let (ns, server) = pod();
    let addr = server.addr();
    let socket = ns.run(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"CONNECT {\"verbose\":false}\r\nPING\r\n")
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains("PONG") {
            let n = s.read(&mut buf).unwrap();
            assert!(
                n > 0,
                "the server closed: {}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        }
        s
    });
    let mut first = holder("npholder", &socket, 3);
    let process = ["--process", "npholder", "--json"];
    let run = probe(&process).ns(&ns).run();
    run.expect(0);
    walked(&run, 0, None);
    looked_up(&probe(&process).ns(&ns).run(), 1);

    let mut second = holder("npholder", &socket, 5);
    first.kill().unwrap();
    first.wait().unwrap();
    let run = probe(&process).ns(&ns).run();
    run.expect(0);
    walked(&run, 1, Some(0));
    assert_eq!(
        run.json()["connection"]["processes"][0]["pid"],
        second.id(),
        "{run}"
    );
    looked_up(&probe(&process).ns(&ns).run(), 1);
    // By PID: the holder's descriptor read again; the process gone, exit 2 as a walk says.
    let pid = second.id().to_string();
    let by_pid = ["--pid", &pid, "--json"];
    walked(&probe(&by_pid).ns(&ns).run(), 0, None);
    looked_up(&probe(&by_pid).ns(&ns).run(), 1);
    second.kill().unwrap();
    second.wait().unwrap();
    for gone in [&pid, &first.id().to_string()] {
        probe(&["--pid", gone])
            .ns(&ns)
            .run()
            .expect(2)
            .says(&["--pid: no process with PID"]);
    }
}
