//! `natsprobe serve` end to end: the sidecar in the app pod's network namespace, real
//! nats-server and a real nats.go client, probed as the kubelet probes (a new connection each
//! time, `GET`, the kubelet's timeout). Its answers (status, line, JSON, age), its refusals,
//! secrets never shown; and the native-sidecar shape under two kubelets' probes, one for the
//! app container (`/livez`) and one for natsprobe's own (`/selfz`): natsprobe killed, stopped
//! and starved of memory, and the app never restarted for it.

use crate::harness::kubelet::{http_get, Kubelet, Spec};
use crate::harness::pods::*;
use crate::harness::*;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PORT: u16 = 8281;

/// `natsprobe serve ARGS…` in `ns`, its log (stderr) collected.
fn serve(ns: &NetNs, args: &[&str]) -> Peer {
    let mut all = vec!["serve"];
    all.extend_from_slice(args);
    let mut peer = Peer::spawn_as(Some(ns), &probe::binary(), &all);
    peer.wait_for("natsprobe serve: answering on", Duration::from_secs(5));
    peer
}

/// One GET in `ns`, as the kubelet makes it: (status, whole body).
fn fetch(ns: &NetNs, path: &str) -> (u16, String) {
    raw(ns, &format!("GET {path} HTTP/1.1\r\nHost: pod\r\nUser-Agent: kube-probe/1.31\r\nAccept: */*\r\nConnection: close\r\n\r\n"))
}

/// Any request bytes in `ns`: (status, body).
fn raw(ns: &NetNs, request: &str) -> (u16, String) {
    let request = request.to_string();
    ns.run(move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", PORT)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let _ = s.write_all(request.as_bytes());
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).to_string();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map_or(String::new(), |(_, b)| b.to_string());
        (status, body)
    })
}

/// Waits until `path` answers `status`, past serve's first look; the last answer.
fn until(ns: &NetNs, path: &str, status: u16, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let (got, body) = fetch(ns, path);
        if got == status && !body.contains("first look has not ended") {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{path} answered {got}, not {status}: {body}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn serve_answers_the_kubelets_probes_from_its_looks() {
    let pods = Pods::with_limited_user("probe", "s3cret-pw", &[]);
    let client = Peer::conn(
        Some(&pods.app),
        &format!("nats://admin:admin-pw@{}", &pods.url["nats://".len()..]),
        -1,
        "100ms",
    );
    let state = tempfile::tempdir().unwrap();
    let server = format!("nats://probe:s3cret-pw@{}", &pods.url["nats://".len()..]);
    let mut sidecar = serve(
        &pods.app,
        &[
            "--server",
            &server,
            "--every",
            "200ms",
            "--startup",
            "--state-dir",
            state.path().to_str().unwrap(),
        ],
    );
    // Healthy, from the first look on: the line the exec probe prints, and its age.
    let live = until(&pods.app, "/livez", 200, Duration::from_secs(5));
    assert!(
        live.starts_with("healthy: 1 ESTABLISHED TCP connection"),
        "{live}"
    );
    assert!(
        live.trim_end().ends_with("ago)") && live.contains("(looked "),
        "{live}"
    );
    let (status, startup) = fetch(&pods.app, "/startupz");
    assert_eq!(status, 200, "{startup}");
    // A look is the OOM killer's first choice; serve itself is not.
    let looks_score =
        std::fs::read_to_string(format!("/proc/{}/oom_score_adj", sidecar.pid())).unwrap();
    assert_eq!(looks_score.trim(), "0");
    let (status, own) = fetch(&pods.app, "/selfz");
    assert_eq!(
        (
            status,
            own.starts_with("healthy: natsprobe's looks are moving")
        ),
        (200, true),
        "{own}"
    );
    let (_, json) = fetch(&pods.app, "/livez?format=json");
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(
        (v["command"].as_str(), v["verdict"].as_str()),
        (Some("check"), Some("healthy")),
        "{json}"
    );
    assert!(v["age_ms"].as_u64().is_some_and(|a| a < 5_000), "{json}");
    let (status, by_accept) = raw(
        &pods.app,
        "GET /livez HTTP/1.1\r\nAccept: application/json\r\n\r\n",
    );
    assert!(
        status == 200 && by_accept.starts_with("{\"age_ms\":"),
        "{by_accept}"
    );

    // The client gone while NATS answers: a restart helps, the probe fails with the reason.
    client.signal(libc::SIGKILL);
    let gone = until(&pods.app, "/livez", 503, Duration::from_secs(5));
    assert!(gone.starts_with("unhealthy: "), "{gone}");
    let (_, json) = fetch(&pods.app, "/livez?format=json");
    assert!(json.contains("\"verdict\":\"unhealthy\""), "{json}");
    // The change is in serve's log, where `kubectl logs` shows it.
    sidecar.wait_for("unhealthy: ", Duration::from_secs(5));

    // Refused, clearly, and nothing else answered.
    assert_eq!(raw(&pods.app, "POST /livez HTTP/1.1\r\n\r\n").0, 405);
    assert_eq!(fetch(&pods.app, "/metricz").0, 404);
    assert_eq!(fetch(&pods.app, "/").0, 404);
    assert_eq!(raw(&pods.app, "GET /livez HTTP/9\r\n\r\n").0, 400);
    let huge = format!(
        "GET /livez HTTP/1.1\r\nX-Pad: {}\r\n\r\n",
        "x".repeat(20_000)
    );
    assert_eq!(raw(&pods.app, &huge).0, 431);
    let (status, head) = raw(&pods.app, "HEAD /livez HTTP/1.1\r\n\r\n");
    assert_eq!((status, head.as_str()), (503, ""));
    // Connections that send nothing, more than serve holds at once: the oldest are closed,
    // a probe is still answered at once.
    let idle: Vec<_> = (0..40)
        .map(|_| {
            pods.app
                .run(|| std::net::TcpStream::connect(("127.0.0.1", PORT)).unwrap())
        })
        .collect();
    let started = Instant::now();
    let (status, busy) = fetch(&pods.app, "/livez");
    println!(
        "serve | with 40 idle connections open: {status} in {:?}: {busy}",
        started.elapsed()
    );
    assert!(status == 503 && busy.starts_with("unhealthy: "), "{busy}");
    drop(idle);

    // No secret, from the URL or a flag, in any answer or the log.
    for path in [
        "/livez",
        "/livez?format=json",
        "/startupz?format=json",
        "/selfz?format=json",
    ] {
        let (_, body) = fetch(&pods.app, path);
        assert!(
            !body.contains("s3cret-pw") && !body.contains("admin-pw"),
            "{path}: {body}"
        );
    }
    assert!(
        !sidecar.output().contains("s3cret-pw"),
        "{}",
        sidecar.output()
    );

    // SIGTERM ends it at once (as PID 1 it has no default action).
    let t = Instant::now();
    sidecar.signal(libc::SIGTERM);
    let status = sidecar.wait_exit(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
    println!("serve | SIGTERM to exit: {:?}", t.elapsed());
}

/// `/startupz` waits for the first look; without `--startup` it is refused; a bad flag fails
/// serve at once (exit 2), as it would fail `check`.
#[test]
fn startup_and_configuration() {
    let pods = Pods::new(Version::Pinned);
    let _client = Peer::conn(Some(&pods.app), &pods.url, -1, "100ms");
    let sidecar = serve(&pods.app, &["--server", &pods.url, "--every", "300ms"]);
    assert_eq!(fetch(&pods.app, "/startupz").0, 404);
    until(&pods.app, "/livez", 200, Duration::from_secs(5));
    drop(sidecar);
    let bad = probe(&["serve", "--every", "10ms"]).ns(&pods.app).run();
    bad.expect(2);
    assert!(
        bad.stderr.contains("--every must be at least 100ms"),
        "{bad}"
    );
    let bad = probe(&["serve", "--listen", "nowhere"]).ns(&pods.app).run();
    bad.expect(2);
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let bad = probe(&["serve", "--listen", &format!("127.0.0.1:{port}")]).run();
    bad.expect(2);
    assert!(bad.stderr.contains("--listen 127.0.0.1:"), "{bad}");
}

/// The native-sidecar shape: the app container's livenessProbe is an httpGet to serve's
/// `/livez`; serve's own container (a restartable initContainer) has its livenessProbe on
/// `/selfz`, a short period and a one-second grace. natsprobe killed, stopped and starved of
/// memory: the sidecar is restarted, or its looks are, and the app never.
#[test]
fn the_app_is_never_restarted_for_natsprobes_own_fault() {
    let pods = Pods::new(Version::Pinned);
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap().to_string();
    let (app_ns, url) = (Arc::clone(&pods.app), pods.url.clone());
    // The app: a client with nats.go's defaults, probed every 1 s, restarted after 3 failures
    // (the kubelet's timeout 1 s).
    let mut app = Kubelet::start_http(
        Spec::scaled(Duration::from_secs(1), Duration::from_secs(1), 3, 0.05),
        None,
        http_get(&pods.app, PORT, "/livez"),
        Box::new(move || Peer::conn(Some(&app_ns), &url, -1, "100ms")),
    );
    // natsprobe's container: /selfz every 250 ms, timeout 250 ms, 2 failures; the kubelet's
    // grace for it 1 s (a probe-level terminationGracePeriodSeconds: 1), at this scale 50 ms.
    let (side_ns, url) = (Arc::clone(&pods.app), pods.url.clone());
    let mut spec = Spec::scaled(
        Duration::from_millis(250),
        Duration::from_millis(250),
        2,
        0.05,
    );
    spec.grace = Duration::from_millis(50);
    let sidecar = Kubelet::start_http(
        spec,
        None,
        http_get(&pods.app, PORT, "/selfz"),
        Box::new(move || {
            serve(
                &side_ns,
                &[
                    "--server",
                    &url,
                    "--every",
                    "250ms",
                    "--timeout",
                    "400ms",
                    "--state-dir",
                    &state_dir,
                ],
            )
        }),
    );
    until(&pods.app, "/livez", 200, Duration::from_secs(5));
    let serve_pid = || sidecar.with_runs(|runs| runs.last().unwrap().pid());
    let starts = || {
        sidecar
            .events()
            .iter()
            .filter(|e| e.reason == "Started")
            .count()
    };

    // Killed: the kubelet starts it again (the first restart is immediate).
    let t0 = Instant::now();
    let before = starts();
    unsafe_kill(serve_pid(), libc::SIGKILL);
    wait_until(
        "serve restarted after SIGKILL",
        Duration::from_secs(10),
        || starts() > before,
    );
    until(&pods.app, "/livez", 200, Duration::from_secs(5));
    println!(
        "serve | killed: restarted and answering in {:?}",
        t0.elapsed()
    );

    // Stopped: /selfz times out twice, the kubelet kills it (SIGTERM is pending on a stopped
    // process; SIGKILL after the grace) and starts it again.
    std::thread::sleep(Duration::from_secs(12)); // past the back-off's first 10 s, at scale 0.5 s
    let t0 = Instant::now();
    let before = starts();
    unsafe_kill(serve_pid(), libc::SIGSTOP);
    wait_until(
        "serve restarted after SIGSTOP",
        Duration::from_secs(15),
        || starts() > before,
    );
    until(&pods.app, "/livez", 200, Duration::from_secs(5));
    println!(
        "serve | stopped: restarted and answering in {:?}",
        t0.elapsed()
    );

    // Starved of memory: its container's limit leaves no room for a look. No look starts (a
    // look started would be the OOM killer's, and serve could go with it): the verdict stands
    // while fresh, then "not judged"; /selfz passes, serve stays.
    let cgroup = MemoryCgroup::new();
    let pid = serve_pid();
    cgroup.add(pid);
    std::thread::sleep(Duration::from_millis(600));
    cgroup.limit_to_usage_plus(1 << 20);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut last = String::new();
    while !last.contains("no look started") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        last = until(&pods.app, "/livez", 200, Duration::from_secs(5));
    }
    assert!(
        last.starts_with("not judged: natsprobe's last look failed")
            && last.contains("memory limit free"),
        "{last}\n{}",
        sidecar.log()
    );
    assert_eq!(fetch(&pods.app, "/selfz").0, 200);
    assert_eq!(
        serve_pid(),
        pid,
        "serve itself restarted while starved\n{}",
        sidecar.log()
    );
    println!("serve | starved: {last}; {}", cgroup.oom_kills());
    cgroup.unlimit();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !last.starts_with("healthy: ") {
        assert!(Instant::now() < deadline, "{last}");
        std::thread::sleep(Duration::from_millis(100));
        last = until(&pods.app, "/livez", 200, Duration::from_secs(5));
    }
    println!("serve | memory back: {last}");

    let kills = app.kills_between(t0 - Duration::from_secs(3600), Instant::now());
    assert_eq!(
        kills,
        0,
        "the app was restarted for natsprobe's fault\n{}\n--- natsprobe:\n{}",
        app.log(),
        sidecar.log()
    );
    let failed = app.probed().iter().filter(|p| !p.1).count();
    println!(
        "serve | the app's probes: {} run, {failed} failed (none 3 in a row)",
        app.probed().len()
    );
    app.stop();
}

fn unsafe_kill(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on a child of this test, by PID.
    unsafe { libc::kill(pid as i32, signal) };
}

/// A cgroup v1 memory controller of the test's own: the sidecar container's memory limit.
struct MemoryCgroup {
    path: std::path::PathBuf,
}

impl MemoryCgroup {
    fn new() -> MemoryCgroup {
        let path = std::path::PathBuf::from(format!(
            "/sys/fs/cgroup/memory/natsprobe-serve-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        MemoryCgroup { path }
    }

    fn add(&self, pid: u32) {
        std::fs::write(self.path.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    fn usage(&self) -> u64 {
        std::fs::read_to_string(self.path.join("memory.usage_in_bytes"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn limit_to_usage_plus(&self, bytes: u64) {
        let limit = self.usage() + bytes;
        std::fs::write(self.path.join("memory.limit_in_bytes"), limit.to_string()).unwrap();
    }

    fn unlimit(&self) {
        std::fs::write(self.path.join("memory.limit_in_bytes"), "-1").unwrap();
    }

    fn oom_kills(&self) -> String {
        std::fs::read_to_string(self.path.join("memory.oom_control"))
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("oom_kill "))
            .unwrap_or("oom_kill ?")
            .to_string()
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.path.join("memory.limit_in_bytes"), "-1");
        // Its processes back to the root, then the group gone.
        if let Ok(procs) = std::fs::read_to_string(self.path.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write("/sys/fs/cgroup/memory/cgroup.procs", pid);
            }
        }
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// A serve started again (its container restarted) answers with the verdict its last look
/// reached, kept in the state dir, while it is fresh: its restart does not reset the kubelet's
/// count of failures. Its own first look replaces it: nothing is latched.
#[test]
fn a_restarted_serve_answers_with_the_verdict_it_kept() {
    let pods = Pods::new(Version::Pinned);
    let client = Peer::conn(Some(&pods.app), &pods.url, -1, "100ms");
    let state = tempfile::tempdir().unwrap();
    let args = [
        "--server",
        &pods.url,
        "--every",
        "500ms",
        "--timeout",
        "2s",
        "--state-dir",
        state.path().to_str().unwrap(),
    ];
    let first = serve(&pods.app, &args);
    until(&pods.app, "/livez", 200, Duration::from_secs(5));
    client.signal(libc::SIGKILL);
    let fault = until(&pods.app, "/livez", 503, Duration::from_secs(5));
    assert!(
        fault.starts_with("unhealthy: client holds no connection"),
        "{fault}"
    );
    first.signal(libc::SIGKILL);
    drop(first);
    // NATS frozen: the new serve's first look waits its whole --timeout (2 s).
    let nats = pods.server.pid().unwrap();
    unsafe_kill(nats, libc::SIGSTOP);
    let mut again = serve(&pods.app, &args);
    let (status, kept) = fetch(&pods.app, "/livez");
    assert_eq!(status, 503, "{kept}");
    assert!(
        kept.starts_with("unhealthy: client holds no connection"),
        "{kept}"
    );
    again.wait_for(
        "unhealthy: client holds no connection",
        Duration::from_secs(2),
    );
    assert!(
        again
            .output()
            .contains("(kept by natsprobe serve before it started again, "),
        "{}",
        again.output()
    );
    // Its first look (NATS not answering: a restart would not help) replaces it.
    let after = until(&pods.app, "/livez", 200, Duration::from_secs(5));
    println!("serve | restarted: answered the kept fault ({kept}), then its own look: {after}");
    // A serve with other flags does not read it: not judged until its own first look ends.
    drop(again);
    let other = serve(
        &pods.app,
        &[
            "--server",
            &pods.url,
            "--every",
            "700ms",
            "--timeout",
            "2s",
            "--state-dir",
            state.path().to_str().unwrap(),
        ],
    );
    let (status, fresh) = fetch(&pods.app, "/livez");
    assert!(
        status == 200 && fresh.contains("first look has not ended"),
        "{fresh}"
    );
    unsafe_kill(nats, libc::SIGCONT);
    drop(other);
}

/// The natsprobe logins the callout service answered so far.
fn probe_logins(service: &crate::harness::callout::Callout) -> usize {
    service
        .logins
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.name.starts_with("natsprobe"))
        .count()
}

/// The looks hold one NATS connection (here behind an auth callout, where each login costs the
/// auth service a request): one login for look after look, asking JetStream each time; that
/// connection, in the app pod's namespace, never counts as the app's; after NATS restarts, or
/// was frozen past a look's deadline, one login more and the looks go on as before.
#[test]
fn the_looks_hold_one_nats_connection() {
    use crate::harness::callout::{self, Callout};
    let issuer = nkeys::KeyPair::new_account();
    let seed = issuer.seed().unwrap();
    let mut pods = Pods::with_config(
        &callout::server_config(&issuer),
        &["-user", "app", "-password", "app-pw"],
    );
    let service = Callout::start(&pods.nats, &pods.url, &seed);
    // A pull consumer: idle, it is healthy whether or not its client is there, so the
    // connection alone decides.
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
    let pull = [
        "-pull",
        "-stream",
        "S",
        "-durable",
        "P",
        "-fetch-wait",
        "2s",
    ];
    let app = pods.client("consume", &pull);
    let state = tempfile::tempdir().unwrap();
    let server = format!("nats://app:app-pw@{}", &pods.url["nats://".len()..]);
    let _sidecar = serve(
        &pods.app,
        &[
            "--server",
            &server,
            "--consumer",
            "S/P",
            "--stall-after",
            STALL,
            "--sample-every",
            "0",
            "--every",
            "200ms",
            "--state-dir",
            state.path().to_str().unwrap(),
        ],
    );
    let healthy = until(&pods.app, "/livez", 200, Duration::from_secs(10));
    assert!(healthy.starts_with("healthy: "), "{healthy}");
    // About fifteen looks, each asking JetStream for the consumer: one login in all.
    let asked = |ns: &NetNs| {
        let (_, json) = fetch(ns, "/livez?format=json");
        let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        let looked = v["consumers_looked"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        format!(
            "{looked} {}",
            v["consumers"][0]["verdict"].as_str().unwrap_or_default()
        )
    };
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(asked(&pods.app), "asked healthy");
    assert_eq!(probe_logins(&service), 1, "one login for every look");

    // The app's client gone: the probe's own connection, in the same namespace and to the
    // same port, keeps nothing healthy.
    app.signal(libc::SIGKILL);
    let gone = until(&pods.app, "/livez", 503, Duration::from_secs(5));
    assert!(gone.starts_with("unhealthy: client holds no"), "{gone}");
    let app = pods.client("consume", &pull);
    until(&pods.app, "/livez", 200, Duration::from_secs(5));

    // NATS restarted (its auth service with it): the looks log in once more, then hold again.
    service.stop();
    pods.server.stop();
    std::thread::sleep(Duration::from_millis(500));
    pods.server.resume();
    let service = Callout::start(&pods.nats, &pods.url, &seed);
    let back = Instant::now();
    wait_until("a look asks NATS again", Duration::from_secs(15), || {
        probe_logins(&service) >= 1 && fetch(&pods.app, "/livez").0 == 200
    });
    println!(
        "serve | a look logged in again {:?} after NATS came back",
        back.elapsed()
    );
    let after = probe_logins(&service);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        probe_logins(&service),
        after,
        "held again after the restart"
    );
    assert!(after <= 2, "{after} logins after the restart");
    assert_eq!(asked(&pods.app), "asked healthy");

    // NATS frozen past a look's deadline, then thawed: its connections stay up (its pings
    // would notice only minutes later), but the look whose asks went unanswered does not keep
    // it: the next look logs in afresh, as the exec probe would, then holds again.
    let pid = pods.server.pid().unwrap() as i32;
    // SAFETY: plain kill(2) on the test's own nats-server.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let thawed = Instant::now();
    wait_until(
        "a look logs in afresh after NATS was frozen",
        Duration::from_secs(10),
        || probe_logins(&service) > after,
    );
    println!(
        "serve | a look logged in afresh {:?} after NATS thawed",
        thawed.elapsed()
    );
    until(&pods.app, "/livez", 200, Duration::from_secs(5));
    std::thread::sleep(Duration::from_secs(1));
    let fresh = probe_logins(&service);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(probe_logins(&service), fresh, "held again after the freeze");
    assert_eq!(asked(&pods.app), "asked healthy");
    // `/metrics` counts the same logins the auth service answered: the first, and each since.
    let (_, page) = fetch(&pods.app, "/metrics");
    let counted = page
        .lines()
        .find_map(|l| l.strip_prefix("natsprobe_nats_logins_total "))
        .and_then(|n| n.trim().parse::<usize>().ok());
    assert_eq!(counted, Some(1 + fresh), "{page}");
    drop(app);
}

/// The looks' process lives as long as serve: look after look, it keeps nothing more (what a
/// look prepares for its deadline and its budget is kept once, not once a look).
#[test]
fn the_looks_process_keeps_nothing_from_look_to_look() {
    use std::io::BufRead;
    let state = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(probe::binary())
        .args(["serve", "--look", "--port", "4999", "--state-dir"])
        .arg(state.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let rss = |pid: u32| -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let mut look = |n: usize| {
        for _ in 0..n {
            stdin.write_all(b"live\n").unwrap();
            let mut answer = String::new();
            while !answer.contains("natsprobe-look-end") {
                assert!(stdout.read_line(&mut answer).unwrap() > 0, "{answer}");
            }
            assert!(answer.contains("natsprobe-look-end 1"), "{answer}");
        }
    };
    look(300);
    let warm = rss(child.id());
    look(2000);
    let after = rss(child.id());
    println!("serve | the looks' process: {warm} KiB after 300 looks, {after} KiB after 2,300");
    assert!(
        after <= warm + 128,
        "{warm} KiB → {after} KiB over 2,000 looks"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success(), "ends when serve is gone");
}

/// Restart in place (`serve --exit-unhealthy 88 --failure-threshold 3`, a look a second): up
/// while the client is healthy, up through a NATS outage that outlasts the client's reconnect
/// budget (NATS not answering: a restart would not help), and exit 88 within a few seconds of
/// NATS answering again to a client that gave up. A `serve` started again counts from nothing.
#[test]
fn serve_exits_for_a_restart_in_place_only_when_it_helps() {
    let mut pods = Pods::new(Version::Pinned);
    let mut client = Peer::conn(Some(&pods.app), &pods.url, 3, "200ms");
    let state = tempfile::tempdir().unwrap();
    let args = [
        "--server",
        &pods.url,
        "--every",
        "1s",
        "--timeout",
        "800ms",
        "--exit-unhealthy",
        "88",
        "--failure-threshold",
        "3",
        "--state-dir",
        state.path().to_str().unwrap(),
    ];
    let mut sidecar = serve(&pods.app, &args);
    until(&pods.app, "/livez", 200, Duration::from_secs(5));
    std::thread::sleep(Duration::from_secs(4));
    assert!(sidecar.is_alive(), "{}", sidecar.output());

    // NATS down for 6 s: the client gives up after its 3 × 200 ms, and serve stays.
    pods.server.stop();
    client.wait_for("closed", Duration::from_secs(10));
    std::thread::sleep(Duration::from_secs(6));
    assert!(
        sidecar.is_alive(),
        "exited in the outage: {}",
        sidecar.output()
    );
    let (status, outage) = fetch(&pods.app, "/livez");
    assert_eq!(status, 200, "{outage}");

    // NATS answers again; the client does not come back: exit 88 after three looks.
    let back = Instant::now();
    pods.server.resume();
    let mut exited = None;
    while back.elapsed() < Duration::from_secs(15) {
        if !sidecar.is_alive() {
            exited = Some(back.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = sidecar.output();
    let took = exited.unwrap_or_else(|| panic!("serve did not exit: {output}"));
    let status = sidecar.wait_exit(Duration::from_secs(1));
    assert_eq!(status.code(), Some(88), "{output}");
    assert!(
        output.contains(
            "natsprobe serve: 3 looks in a row judged the app unhealthy: exiting 88 (--exit-unhealthy)"
        ),
        "{output}"
    );
    println!("serve | --exit-unhealthy 88 --failure-threshold 3 --every 1s: exit 88 {took:?} after NATS answered again");
    assert!(took < Duration::from_secs(8), "{took:?}");

    // Restarted in place (the app too, here connected again): it answers with the verdict it
    // kept, and its own looks, healthy, never exit.
    let _client = Peer::conn(Some(&pods.app), &pods.url, -1, "200ms");
    let mut again = serve(&pods.app, &args);
    until(&pods.app, "/livez", 200, Duration::from_secs(5));
    std::thread::sleep(Duration::from_secs(4));
    assert!(again.is_alive(), "{}", again.output());
}
