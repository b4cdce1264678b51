//! Benchmark: the node's CPU per probe, the exec probe against `natsprobe serve`'s httpGet
//! probe, side by side in one run, in one pod: nats-server in its own namespace, a nats.go
//! client in the app pod's, and a container made from `Dockerfile.probe`'s image by runc
//! (Debian's package) in the app pod's namespace, its process `natsprobe serve`.
//!
//! - exec: `runc exec` of `natsprobe check --server URL` into the running container, as the
//!   kubelet's runtime runs an exec probe: CPU from wait4's rusage of `runc exec`, which waits
//!   for the process it started in the container (runc's own work and the check's); containerd's
//!   shim and the kubelet's CRI call, which a node adds, are not in it.
//! - the check alone: the same `natsprobe check`, started directly in the namespace.
//! - httpGet: `GET /livez` as the kubelet makes it (a new connection each time): the client's
//!   CPU (this thread's) and serve's (its threads' on-CPU time, /proc/PID/task/*/schedstat).
//! - a look: what serve asks its looks' process for every `--every` (`natsprobe serve --look
//!   …`, started directly and asked as serve asks it): that process's CPU over the look; per
//!   probe, as many looks as fall in a kubelet period.
//! - NATS's side of a look (`nats_per_look`): behind an auth callout, a look that asks
//!   JetStream, as `natsprobe check` (a login each) and in serve's looks' process (the
//!   connection held): the server's CPU, the auth service's and the logins, per look.
//!
//! Rounds interleave the kinds (shuffled order each round). Machine-wide: the busy time in
//! /proc/stat over a phase of each kind alone, per run, as a cross-check.
//!
//! Run: `cargo bench --bench serve` (root; probe-tests/setup first, and the static build).
//! SERVE_RUNS (default 200) rounds; SERVE_PERIOD (default 10) the kubelet's periodSeconds.

// A benchmark uses part of the shared harness; the test crate uses all of it, and the
// compiler flags what none uses there.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../harness/mod.rs"]
mod harness;

use harness::runc::Container;
use harness::{link, NatsServer, NetNs, Peer, Version};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU of this thread so far.
fn thread_cpu() -> Duration {
    // SAFETY: a zeroed timespec is valid for clock_gettime to fill.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and a pointer to a local.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// On-CPU time of every thread of `pid` (ns precision).
fn process_cpu(pid: u32) -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path().join("schedstat");
        if let Ok(text) = std::fs::read_to_string(path) {
            total += text.split(' ').next().unwrap().parse::<u64>().unwrap_or(0);
        }
    }
    Duration::from_nanos(total)
}

/// The machine's busy time so far (all CPUs, /proc/stat, in USER_HZ ticks → time).
fn machine_busy() -> Duration {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let cpu: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy = cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6] + cpu[7];
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_micros(busy * 1_000_000 / hz)
}

/// A child's CPU (user + system, with the children it waited for) and wall time.
fn run_rusage(mut cmd: Command) -> (Duration, Duration, i32) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let started = Instant::now();
    let child = cmd.spawn().unwrap();
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, into locals.
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    std::mem::forget(child);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (
        tv(usage.ru_utime) + tv(usage.ru_stime),
        started.elapsed(),
        libc::WEXITSTATUS(status),
    )
}

/// One GET /livez on a new connection: (status, client CPU, wall).
fn get(port: u16) -> (u16, Duration, Duration) {
    let (status, cpu, wall, _) = get_path(port, "/livez", "*/*");
    (status, cpu, wall)
}

/// One GET of `path` on a new connection, as the kubelet (or Prometheus, with its `accept`)
/// makes it: (status, client CPU, wall, the body's bytes).
fn get_path(port: u16, path: &str, accept: &str) -> (u16, Duration, Duration, usize) {
    let (cpu0, t0) = (thread_cpu(), Instant::now());
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: kube-probe/1.31\r\nAccept: {accept}\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n");
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::with_capacity(1024);
    s.read_to_end(&mut out).unwrap();
    let status = std::str::from_utf8(&out[9..12]).unwrap().parse().unwrap();
    let body = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |i| out.len() - i - 4);
    (status, thread_cpu() - cpu0, t0.elapsed(), body)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn p99(v: &mut [Duration]) -> Duration {
    v.sort();
    v[(v.len() * 99 / 100).min(v.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runs = env_or("SERVE_RUNS", 200) as usize;
    metrics_per_scrape(runs);
    if std::env::var("SERVE_BENCH").as_deref() == Ok("metrics") {
        return;
    }
    let period = env_or("SERVE_PERIOD", 10);
    let nats = Arc::new(NetNs::new());
    let app = Arc::new(NetNs::new());
    let (ip, _) = link(&nats, &app);
    let server = NatsServer::start(Some(&nats), Version::Pinned, ip, 4222);
    let url = server.url();
    let _client = Peer::conn(Some(&app), &url, -1, "100ms");
    let every = 10;
    let container = Container::start(
        &app,
        &[
            "--listen",
            "127.0.0.1:8281",
            "--every",
            &format!("{every}s"),
            "--server",
            &url,
        ],
    );
    let binary = harness::static_binary();
    let check: Vec<String> = ["check", "--server", &url]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap().to_string();
    let direct = |args: &[&str]| {
        let mut cmd = app.command(&binary);
        cmd.args(args)
            .arg("--state-dir")
            .arg(&state_dir)
            .env_clear();
        cmd
    };
    // The HTTP client lives in the pod's namespace, on one thread, as the kubelet's prober.
    let (to_client, requests) = std::sync::mpsc::channel::<()>();
    let (answers, from_client) = std::sync::mpsc::channel();
    app.spawn(move || {
        while requests.recv().is_ok() {
            answers.send(get(8281)).unwrap();
        }
    });
    let http = || {
        to_client.send(()).unwrap();
        from_client.recv().unwrap()
    };
    // serve's looks' process, asked for a look as serve asks it.
    let mut looks = LooksProcess::start(direct(&["serve", "--look", "--server", &url]));
    // Warm: each kind once, serve's first look done.
    std::thread::sleep(Duration::from_secs(1));
    let _ = container.exec(
        &[
            "/natsprobe",
            "check",
            "--server",
            &url,
            "--state-dir",
            "/state",
        ],
        Duration::from_secs(2),
    );
    let _ = run_rusage(direct(&["check", "--server", &url]));
    assert_eq!(http().0, 200, "serve answers healthy");
    looks.look();

    let (mut exec_cpu, mut exec_wall) = (Vec::new(), Vec::new());
    let (mut alone_cpu, mut alone_wall) = (Vec::new(), Vec::new());
    let (mut look_cpu, mut look_wall) = (Vec::new(), Vec::new());
    let (mut get_client, mut get_serve, mut get_wall) = (Vec::new(), Vec::new(), Vec::new());
    let mut order = [0u8, 1, 2, 3];
    for round in 0..runs {
        // A fresh order each round (a small LCG: no dependency for a shuffle).
        let mut seed = round as u64 * 6364136223846793005 + 1442695040888963407;
        for i in (1..order.len()).rev() {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            order.swap(i, (seed >> 33) as usize % (i + 1));
        }
        for kind in order {
            match kind {
                0 => {
                    let e = container.exec(
                        &[
                            "/natsprobe",
                            "check",
                            "--server",
                            &url,
                            "--state-dir",
                            "/state",
                        ],
                        Duration::from_secs(2),
                    );
                    assert_eq!(e.code, Some(0), "{}", e.stdout);
                    exec_cpu.push(e.cpu);
                    exec_wall.push(e.wall);
                }
                1 => {
                    let (cpu, wall, code) = run_rusage(direct(
                        &check.iter().map(String::as_str).collect::<Vec<_>>(),
                    ));
                    assert_eq!(code, 0);
                    alone_cpu.push(cpu);
                    alone_wall.push(wall);
                }
                2 => {
                    let t0 = Instant::now();
                    let before = process_cpu(looks.pid());
                    let answer = looks.look();
                    // Closed by its code and the logins so far: `natsprobe-look-end 0 LOGINS`.
                    let end = answer.lines().last().unwrap_or_default();
                    assert!(end.starts_with("natsprobe-look-end 0 "), "{answer}");
                    look_cpu.push(process_cpu(looks.pid()) - before);
                    look_wall.push(t0.elapsed());
                }
                _ => {
                    let before = process_cpu(container.pid);
                    let (status, client, wall) = http();
                    assert_eq!(status, 200);
                    get_serve.push(process_cpu(container.pid) - before);
                    get_client.push(client);
                    get_wall.push(wall);
                }
            }
        }
    }
    // Machine-wide, each kind alone for a phase.
    let phase = |n: usize, f: &mut dyn FnMut()| {
        let b = machine_busy();
        for _ in 0..n {
            f();
        }
        (machine_busy() - b) / n as u32
    };
    let exec_machine = phase(runs, &mut || {
        container.exec(
            &[
                "/natsprobe",
                "check",
                "--server",
                &url,
                "--state-dir",
                "/state",
            ],
            Duration::from_secs(2),
        );
    });
    let http_machine = phase(runs * 10, &mut || {
        http();
    });

    let exec = median(&mut exec_cpu);
    let alone = median(&mut alone_cpu);
    let look = median(&mut look_cpu);
    let client = median(&mut get_client);
    let serve = median(&mut get_serve);
    let native = client + serve;
    println!("serve bench: {runs} rounds, interleaved; node's CPU per probe (median); kubelet period {period}s");
    println!(
        "| probe | CPU per probe | wall (median) | wall p99 | machine busy per run (phase alone) |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| exec: `runc exec` of `natsprobe check` | {} | {} | {} | {} |",
        ms(exec),
        ms(median(&mut exec_wall)),
        ms(p99(&mut exec_wall)),
        ms(exec_machine)
    );
    println!(
        "| `natsprobe check` started directly | {} | {} | {} | |",
        ms(alone),
        ms(median(&mut alone_wall)),
        ms(p99(&mut alone_wall))
    );
    println!(
        "| httpGet `/livez` to serve (client {} + serve {}) | {} | {} | {} | {} |",
        ms(client),
        ms(serve),
        ms(native),
        ms(median(&mut get_wall)),
        ms(p99(&mut get_wall)),
        ms(http_machine)
    );
    println!(
        "| a look (serve's check in its looks' process, `--every` {every}s) | {} | {} | {} | |",
        ms(look),
        ms(median(&mut look_wall)),
        ms(p99(&mut look_wall))
    );
    println!();
    let ratio = native.as_secs_f64() / exec.as_secs_f64();
    println!(
        "the httpGet probe: {:.4}× the exec probe's CPU (1/{:.0}; goal ≤ 1/20: {})",
        ratio,
        1.0 / ratio,
        if ratio <= 0.05 { "met" } else { "MISSED" }
    );
    let with_looks = |every_s: u64| native + look.mul_f64(period as f64 / every_s as f64);
    for every_s in [10, 5] {
        let total = with_looks(every_s);
        let r = total.as_secs_f64() / exec.as_secs_f64();
        println!(
            "with its looks (--every {every_s}s, {:.1} a probe at periodSeconds {period}): {} a probe, {:.3}× the exec probe's (1/{:.1})",
            period as f64 / every_s as f64,
            ms(total),
            r,
            1.0 / r
        );
    }
    let pods = 110.0;
    let core = |per_probe: Duration| per_probe.as_secs_f64() * pods / period as f64 * 100.0;
    println!(
        "{pods} pods probed every {period}s: exec {:.2} % of a core (runc's exec alone, the shim and kubelet add to it), natsprobe alone {:.2} %, httpGet {:.3} %, httpGet with looks every {every}s {:.2} %",
        core(exec),
        core(alone),
        core(native),
        core(with_looks(every))
    );
    drop(container);
    drop(looks);
    println!();
    nats_per_look(runs);
}

/// `serve --look …`, the looks' process, its requests written and its answers read as serve
/// does.
struct LooksProcess {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl LooksProcess {
    fn start(mut cmd: Command) -> LooksProcess {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        LooksProcess {
            stdin: child.stdin.take().unwrap(),
            stdout: std::io::BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One live look: its whole answer, up to its end line.
    fn look(&mut self) -> String {
        use std::io::BufRead;
        self.stdin.write_all(b"live\n").unwrap();
        let mut answer = String::new();
        while !answer.contains("natsprobe-look-end") {
            assert!(self.stdout.read_line(&mut answer).unwrap() > 0, "{answer}");
        }
        answer.trim_end().to_string()
    }
}

impl Drop for LooksProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU of this process's threads but the calling one (here: the auth callout service's).
fn others_cpu() -> Duration {
    process_cpu(std::process::id()) - thread_cpu()
}

/// The NATS side: a server whose logins go through an auth callout service, a client holding
/// its connection, a pull consumer. A look that asks JetStream for the consumer (every look:
/// `--sample-every 0`), made at the same pace two ways, in alternating blocks: `natsprobe
/// check` (the exec probe's look, and serve's before it held a connection: a login each) and a
/// look in serve's looks' process (its connection held). Per look: the server's CPU, the auth
/// service's, the logins it answered.
fn nats_per_look(runs: usize) {
    use harness::callout::{self, Callout};
    let issuer = nkeys::KeyPair::new_account();
    let seed = issuer.seed().unwrap();
    let nats = Arc::new(NetNs::new());
    let app = Arc::new(NetNs::new());
    let (ip, _) = link(&nats, &app);
    let config = tempfile::tempdir().unwrap();
    let path = config.path().join("server.conf");
    std::fs::write(&path, callout::server_config(&issuer)).unwrap();
    let server = NatsServer::start_with(
        Some(&nats),
        Version::Pinned,
        ip,
        4222,
        &["-c", path.to_str().unwrap()],
    );
    let url = server.url();
    let service = Callout::start(&nats, &url, &seed);
    let auth = ["-user", "app", "-password", "app-pw"];
    let mut setup = vec!["-url", url.as_str()];
    setup.extend_from_slice(&auth);
    setup.extend_from_slice(&["-stream", "S", "-subjects", "s.>", "-durable", "P"]);
    Peer::setup(Some(&nats), &setup);
    let app_url = format!("nats://app:app-pw@{}", &url["nats://".len()..]);
    let _client = Peer::conn(Some(&app), &app_url, -1, "100ms");
    let binary = harness::static_binary();
    let state = tempfile::tempdir().unwrap();
    let args = [
        "--server",
        app_url.as_str(),
        "--consumer",
        "S/P",
        "--sample-every",
        "0",
        "--state-dir",
        state.path().to_str().unwrap(),
    ];
    let command = |first: &[&str]| {
        let mut cmd = app.command(&binary);
        cmd.args(first).args(args).env_clear();
        cmd
    };
    let server_pid = server.pid().unwrap();
    let mut held = LooksProcess::start(command(&["serve", "--look"]));
    assert!(held.look().contains("\"consumers_looked\":\"asked\""));
    let (_, _, code) = run_rusage(command(&["check"]));
    assert_eq!(code, 0);
    let pace = Duration::from_millis(50);
    let logins = || service.answered.load(std::sync::atomic::Ordering::SeqCst);
    // [login per look, held]: server CPU, auth service CPU, logins, looks.
    let mut sums = [(Duration::ZERO, Duration::ZERO, 0usize, 0usize); 2];
    let block = 20;
    for round in 0..(runs / block).max(1) * 2 {
        let kind = round % 2;
        let (server0, auth0, logins0) = (process_cpu(server_pid), others_cpu(), logins());
        for _ in 0..block {
            let began = Instant::now();
            if kind == 0 {
                let (_, _, code) = run_rusage(command(&["check"]));
                assert_eq!(code, 0);
            } else {
                let answer = held.look();
                let end = answer.lines().last().unwrap_or_default();
                assert!(end.starts_with("natsprobe-look-end 0 "), "{answer}");
            }
            std::thread::sleep(pace.saturating_sub(began.elapsed()));
        }
        let sum = &mut sums[kind];
        sum.0 += process_cpu(server_pid) - server0;
        sum.1 += others_cpu() - auth0;
        sum.2 += logins() - logins0;
        sum.3 += block;
    }
    println!(
        "NATS's side of a look that asks JetStream (a consumer's info), behind an auth callout; {} looks each way, one every {} ms, alternating blocks of {block}:",
        sums[0].3,
        pace.as_millis()
    );
    println!("| a look | nats-server CPU per look | auth service CPU per look | logins per look |");
    println!("|---|---|---|---|");
    let per = |(server, auth, logins, looks): (Duration, Duration, usize, usize)| {
        (
            server / looks as u32,
            auth / looks as u32,
            logins as f64 / looks as f64,
        )
    };
    let (exec, hold) = (per(sums[0]), per(sums[1]));
    for (name, (server, auth, logins)) in [
        ("a login each (`natsprobe check`: the exec probe)", exec),
        ("serve's looks, the connection held", hold),
    ] {
        println!("| {name} | {} | {} | {logins:.3} |", ms(server), ms(auth));
    }
    let ratio = hold.0.as_secs_f64() / exec.0.as_secs_f64();
    println!(
        "the servers' CPU per look, held against a login each: {ratio:.3}× (goal ≤ 0.5: {}); the auth service's: {:.3}×",
        if ratio <= 0.5 { "met" } else { "MISSED" },
        hold.1.as_secs_f64() / exec.1.as_secs_f64()
    );
    drop(held);
    service.stop();
}

/// `/metrics` beside `/livez`: serve's CPU per scrape and per probe (its threads' on-CPU
/// time), interleaved on one serve, and the page's size in Prometheus's format and
/// OpenMetrics', for serve judging one consumer and twenty (all of them real durables).
fn metrics_per_scrape(runs: usize) {
    let pods = harness::pods::Pods::new(Version::Pinned);
    let (app, url) = (&pods.app, &pods.url);
    let _client = Peer::conn(Some(app), url, -1, "100ms");
    let durables: Vec<String> = (0..20).map(|d| format!("D{d}")).collect();
    for d in &durables {
        pods.setup(&["-stream", "S", "-subjects", "s.>", "-durable", d]);
    }
    let binary = harness::static_binary();
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    println!("serve bench: /metrics beside /livez, {runs} rounds of each, interleaved; serve's CPU per request (median)");
    println!(
        "| serve judging | `/livez` | `/metrics` | page (Prometheus text) | page (OpenMetrics) |"
    );
    println!("|---|---|---|---|---|");
    for (n, port) in [(1usize, 8291u16), (20, 8292)] {
        let state = tempfile::tempdir().unwrap();
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec![
            "serve",
            "--listen",
            &listen,
            "--every",
            "10s",
            "--server",
            url,
            "--state-dir",
            state.path().to_str().unwrap(),
        ];
        let consumers: Vec<String> = durables[..n].iter().map(|d| format!("S/{d}")).collect();
        for c in &consumers {
            args.extend(["--consumer", c.as_str()]);
        }
        let mut serve = Peer::spawn_as(Some(app), &binary, &args);
        serve.wait_for("natsprobe serve: answering on", Duration::from_secs(5));
        let pid = serve.pid();
        let in_app = |path: &'static str, accept: &'static str| {
            app.run(move || get_path(port, path, accept))
        };
        // The first look ended: the page names every consumer's state.
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(in_app("/livez", "*/*").0, 200, "serve judges healthy");
        let (status, _, _, text) = in_app("/metrics", "text/plain");
        assert_eq!(status, 200);
        let (_, _, _, open) = in_app("/metrics", prometheus);
        let (mut livez, mut metrics) = (Vec::new(), Vec::new());
        for round in 0..runs {
            for kind in [round % 2, 1 - round % 2] {
                let before = process_cpu(pid);
                match kind {
                    0 => {
                        in_app("/livez", "*/*");
                        livez.push(process_cpu(pid) - before);
                    }
                    _ => {
                        in_app("/metrics", prometheus);
                        metrics.push(process_cpu(pid) - before);
                    }
                }
            }
        }
        println!(
            "| {n} consumer{} | {} | {} | {} bytes | {} bytes |",
            if n == 1 { "" } else { "s" },
            ms(median(&mut livez)),
            ms(median(&mut metrics)),
            text,
            open
        );
    }
    println!();
}
