//! The exec probe through the real container runtime: `runc exec` into a running container
//! made from `Dockerfile.probe`'s image (the image's user 65532, a read-only root, an
//! `emptyDir`-like tmpfs for `--state-dir`), at a kubelet's cadence, healthy and unhealthy,
//! NATS frozen, and the kubelet's timeout honoured: every run ends by itself inside it.

use crate::harness::kubelet::{Kubelet, Spec};
use crate::harness::runc::Container;
use crate::harness::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn the_exec_probe_through_runc() {
    let pods = pods::Pods::new(Version::Pinned);
    let container = Arc::new(Container::start(
        &pods.app,
        &["--listen", "127.0.0.1:8281", "--every", "5s"],
    ));
    let (app_ns, url) = (Arc::clone(&pods.app), pods.url.clone());
    // The app: a client that gives up after 2 failed reconnects (the incident, shortened).
    let app = Box::new(move || Peer::conn(Some(&app_ns), &url, 2, "100ms"));
    let check = {
        let (container, url) = (Arc::clone(&container), pods.url.clone());
        Box::new(move || {
            container.exec_command(&[
                "/natsprobe",
                "check",
                "--server",
                &url,
                "--state-dir",
                "/state",
                "--timeout",
                "800ms",
            ])
        })
    };
    // periodSeconds 1, timeoutSeconds 1, failureThreshold 3; the kubelet's back-off at 1/20.
    let mut kubelet = Kubelet::start(
        Spec::scaled(Duration::from_secs(1), Duration::from_secs(1), 3, 0.05),
        check,
        app,
    );

    // Healthy: every run passes, as the image's user, its state kept on the tmpfs.
    std::thread::sleep(Duration::from_secs(4));
    let healthy = kubelet.probed();
    assert!(
        healthy.len() >= 3 && healthy.iter().all(|p| p.1),
        "{healthy:?}\n{}",
        kubelet.log()
    );
    assert!(
        healthy
            .last()
            .unwrap()
            .2
            .starts_with("healthy: 1 ESTABLISHED"),
        "{healthy:?}"
    );
    let once = container.exec(
        &[
            "/natsprobe",
            "check",
            "--server",
            &pods.url,
            "--state-dir",
            "/state",
            "--json",
        ],
        Duration::from_secs(1),
    );
    let v: serde_json::Value = serde_json::from_str(once.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {} {}", once.stdout, once.stderr));
    assert_eq!(
        (once.code, v["verdict"].as_str()),
        (Some(0), Some("healthy"))
    );
    println!(
        "runtime | runc exec of natsprobe check: {:?} wall, {:?} CPU (runc's and the check's)",
        once.wall, once.cpu
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", container.pid)).unwrap();
    assert!(
        status.lines().any(|l| l.starts_with("Uid:\t65532\t")),
        "{status}"
    );
    let (own, looks) = container.serve_cpu();
    println!("runtime | the container's serve so far: {own:?} of its own, {looks:?} its looks");
    let id = container.exec(&["/natsprobe", "--version"], Duration::from_secs(1));
    assert_eq!(id.code, Some(0), "{}", id.stderr);

    // NATS away past the client's reconnect budget: the client closes its connection for
    // good (and stays running, as in the incident). NATS back, but frozen (SIGSTOP: it accepts
    // and never answers): each run waits for it up to its --timeout, says it is not answering, passes,
    // and ends by itself inside the kubelet's timeout.
    let mut server = pods.server;
    server.stop();
    wait_until(
        "the client closed its connection",
        Duration::from_secs(10),
        || kubelet.with_runs(|runs| runs.last().unwrap().saw("closed")),
    );
    server.resume();
    let nats = server.pid().unwrap();
    // SAFETY: kill(2) on the test's own nats-server, by PID.
    unsafe { libc::kill(nats as i32, libc::SIGSTOP) };
    let frozen = Instant::now();
    std::thread::sleep(Duration::from_secs(4));
    let during: Vec<_> = kubelet
        .probed()
        .into_iter()
        .filter(|p| p.0 > frozen)
        .collect();
    assert!(during.len() >= 3, "{during:?}");
    for (_, passed, line) in &during {
        assert!(
            *passed && line.contains("is not answering (restart would not help)"),
            "{during:?}\n{}",
            kubelet.log()
        );
    }
    assert_eq!(
        kubelet.kills_between(frozen, Instant::now()),
        0,
        "{}",
        kubelet.log()
    );
    let slow = container.exec(
        &[
            "/natsprobe",
            "check",
            "--server",
            &pods.url,
            "--state-dir",
            "/state",
        ],
        Duration::from_secs(1),
    );
    assert_eq!(slow.code, Some(0), "{} {}", slow.stdout, slow.stderr);
    assert!(slow.wall < Duration::from_secs(1), "{:?}", slow.wall);
    println!(
        "runtime | NATS frozen: {:?} wall: {}",
        slow.wall,
        slow.stdout.trim()
    );

    // NATS answers again, the client holds no connection: restarted within its threshold.
    // SAFETY: as above.
    unsafe { libc::kill(nats as i32, libc::SIGCONT) };
    let answering = Instant::now();
    let deadline = answering + Duration::from_secs(10);
    while kubelet.first_kill_after(answering).is_none() {
        assert!(
            Instant::now() < deadline,
            "not restarted\n{}",
            kubelet.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let failed: Vec<_> = kubelet
        .probed()
        .into_iter()
        .filter(|p| p.0 > answering && !p.1)
        .collect();
    assert!(
        !failed.is_empty()
            && failed
                .iter()
                .all(|p| p.2.starts_with("unhealthy: client holds no connection")),
        "{failed:?}"
    );
    println!(
        "runtime | NATS answers, client gone: restarted {:?} later, after {} failed runs: {}",
        kubelet.first_kill_after(answering).unwrap() - answering,
        failed.len(),
        failed[0].2
    );
    // The container started again is judged healthy again.
    std::thread::sleep(Duration::from_secs(4));
    assert!(kubelet.probed().last().unwrap().1, "{}", kubelet.log());
    kubelet.stop();
}

/// The README's `kubectl debug` recipe, as the runtime runs it: natsprobe's image as an
/// ephemeral container that joins the pod's network namespace and the app container's PID
/// namespace (the app in a PID namespace of its own, as a container is, as the pod's user),
/// its state in `/dev/shm`. It sees the app's sockets and process by name, asks NATS, and
/// explains the consumer.
#[test]
fn kubectl_debug_runs_diagnose_beside_the_app() {
    let pods = pods::Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let spec = pods::push_consumer("S", "D");
    let mut args: Vec<String> = [
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "setpriv",
        "--reuid",
        "65532",
        "--regid",
        "65532",
        "--clear-groups",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(peer::natspeer().to_string_lossy().into_owned());
    args.extend(["consume".to_string(), "-url".into(), pods.url.clone()]);
    args.extend(spec);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut app = Peer::spawn_as(Some(&pods.app), std::path::Path::new("unshare"), &argv);
    app.wait_for("ready", Duration::from_secs(10));
    // The app's process on the host: unshare's child, PID 1 of its own namespace.
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", app.pid())).unwrap();
    let target: u32 = children.split_whitespace().next().unwrap().parse().unwrap();
    let debug = |consumer: bool| {
        let mut argv = vec![
            "/natsprobe",
            "diagnose",
            "--process",
            "natspeer",
            "--server",
            &pods.url,
        ];
        if consumer {
            argv.extend(["--consumer", "S/D"]);
        }
        crate::harness::runc::ephemeral(&pods.app, target, &argv)
    };
    let (code, out, err) = debug(true);
    assert_eq!(code, Some(0), "{out}\n{err}");
    for says in [
        "1 live ESTABLISHED connection (1 required)",
        "natspeer[1]",
        "Consumers\n",
        "push to deliver.D, queue group D, bound",
        "samples kept in /dev/shm/natsprobe-65532",
        "Verdict: healthy (exit 0, as `check` would)",
    ] {
        assert!(out.contains(says), "lacks `{says}`:\n{out}\n{err}");
    }
}
