//! Soak: `natsprobe serve` for SOAK_MINUTES (default 30) answering one probe a second (`GET
//! /livez` on a new connection, as the kubelet), its looks every 2 s, while NATS goes away and
//! comes back (a minute's cycle: 20 s stopped, 20 s frozen by SIGSTOP, in turns, then up).
//! Every look asks JetStream for a consumer through the looks' process's held connection.
//! Prints the RSS and open descriptors of serve and of its looks' process (after a minute's
//! warm-up, and at the end: goal within 5 %), and the answers' times (goal: none slower than
//! 5 ms).
//!
//! Run: `cargo bench --bench soak` (root; probe-tests/setup first, and the static build).

#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../harness/mod.rs"]
mod harness;

use harness::{link, NatsServer, NetNs, Peer, Version};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap()
}

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let minutes: u64 = std::env::var("SOAK_MINUTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let nats = Arc::new(NetNs::new());
    let app = Arc::new(NetNs::new());
    let (ip, _) = link(&nats, &app);
    let mut server = NatsServer::start(Some(&nats), Version::Pinned, ip, 4222);
    let url = server.url();
    let _client = Peer::conn(Some(&app), &url, -1, "250ms");
    // A pull consumer, asked by every look through the looks' held connection.
    Peer::setup(
        Some(&nats),
        &[
            "-url",
            &url,
            "-stream",
            "S",
            "-subjects",
            "s.>",
            "-durable",
            "P",
        ],
    );
    let state = tempfile::tempdir().unwrap();
    let serve = Peer::spawn_as(
        Some(&app),
        &harness::static_binary(),
        &[
            "serve",
            "--server",
            &url,
            "--consumer",
            "S/P",
            "--sample-every",
            "0",
            "--every",
            "2s",
            "--listen",
            "127.0.0.1:8281",
            "--state-dir",
            state.path().to_str().unwrap(),
        ],
    );
    let pid = serve.pid();
    std::thread::sleep(Duration::from_secs(1));
    let started = Instant::now();
    let end = started + Duration::from_secs(minutes * 60);
    let mut times: Vec<Duration> = Vec::new();
    let mut statuses = std::collections::BTreeMap::new();
    let mut samples: Vec<(Duration, u64, usize)> = Vec::new();
    // The looks' process's, and each of its process ids (a new one after one that failed).
    let mut looks: Vec<(Duration, u64, usize)> = Vec::new();
    let mut pids = std::collections::BTreeSet::new();
    let mut frozen = false;
    let mut stopped = false;
    let mut next = Instant::now();
    let mut n = 0u64;
    while Instant::now() < end {
        let t = started.elapsed().as_secs();
        // The minute's cycle: 0–20 s up, 20–40 s down (stopped or frozen, in turns), 40–60 up.
        let down = (20..40).contains(&(t % 60));
        let freeze = (t / 60) % 2 == 1;
        if down && !frozen && !stopped {
            if freeze {
                // SAFETY: kill(2) on the soak's own nats-server.
                unsafe { libc::kill(server.pid().unwrap() as i32, libc::SIGSTOP) };
                frozen = true;
            } else {
                server.stop();
                stopped = true;
            }
        } else if !down && frozen {
            // SAFETY: as above.
            unsafe { libc::kill(server.pid().unwrap() as i32, libc::SIGCONT) };
            frozen = false;
        } else if !down && stopped {
            server.resume();
            stopped = false;
        }
        let (status, took) = app.run(|| {
            let t0 = Instant::now();
            let mut s = std::net::TcpStream::connect(("127.0.0.1", 8281)).unwrap();
            s.write_all(b"GET /livez HTTP/1.1\r\nHost: pod\r\nUser-Agent: kube-probe/1.31\r\nConnection: close\r\n\r\n").unwrap();
            let mut out = Vec::new();
            s.read_to_end(&mut out).unwrap();
            let took = t0.elapsed();
            (String::from_utf8_lossy(&out[9..12]).to_string(), took)
        });
        times.push(took);
        *statuses.entry(status).or_insert(0u64) += 1;
        if n % 10 == 0 {
            samples.push((started.elapsed(), status_kib(pid, "VmRSS:"), fds(pid)));
            if let Some(child) = looks_process(pid) {
                looks.push((started.elapsed(), status_kib(child, "VmRSS:"), fds(child)));
                pids.insert(child);
            }
        }
        n += 1;
        next += Duration::from_secs(1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    if frozen {
        // SAFETY: as above.
        unsafe { libc::kill(server.pid().unwrap() as i32, libc::SIGCONT) };
    }
    let mut sorted = times.clone();
    sorted.sort();
    let slow = times
        .iter()
        .filter(|t| **t > Duration::from_millis(5))
        .count();
    println!(
        "soak: {minutes} min, {} probes, one a second; NATS stopped or frozen 20 s a minute",
        times.len()
    );
    println!("answers: {statuses:?}");
    println!(
        "answer time: median {:?}, p99 {:?}, max {:?}; slower than 5 ms: {slow} (goal 0: {})",
        sorted[sorted.len() / 2],
        sorted[sorted.len() * 99 / 100],
        sorted.last().unwrap(),
        if slow == 0 { "met" } else { "MISSED" }
    );
    at_rest("serve's", &samples, "a probe's connection");
    at_rest(
        "the looks' process's",
        &looks,
        "a look's sockets, the NATS connection while it is down",
    );
    println!(
        "the looks' process: {} process id(s) over the soak (a new one only after one that could not answer)",
        pids.len()
    );
}

/// The looks' process: `serve`'s child, if it has one now.
fn looks_process(pid: u32) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let child: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // pid (comm) state ppid …: the comm may hold spaces, never a ") ".
            let ppid: u32 = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()?;
            (ppid == pid).then_some(child)
        })
}

/// RSS and open descriptors at rest: the least of a window of samples (a look in flight holds
/// its sockets and a few hundred KiB for its moment), in the first 100 s after a minute's
/// warm-up and the last; goal within 5 %.
fn at_rest(whose: &str, samples: &[(Duration, u64, usize)], in_flight: &str) {
    let warm: Vec<_> = samples
        .iter()
        .filter(|s| s.0 >= Duration::from_secs(60))
        .collect();
    let window = 10.min(warm.len());
    let rest = |w: &[&(Duration, u64, usize)]| {
        (
            w.iter().map(|s| s.1).min().unwrap(),
            w.iter().map(|s| s.2).min().unwrap(),
        )
    };
    let first = rest(&warm[..window]);
    let last = rest(&warm[warm.len() - window..]);
    let max_rss = warm.iter().map(|s| s.1).max().unwrap();
    let max_fds = warm.iter().map(|s| s.2).max().unwrap();
    let rss_change = (last.0 as f64 - first.0 as f64) / first.0 as f64 * 100.0;
    let fds_change = (last.1 as f64 - first.1 as f64) / first.1 as f64 * 100.0;
    println!(
        "{whose} RSS at rest: {} KiB after a minute, {} KiB at the end ({rss_change:+.1} %; goal within 5 %: {}); at most {max_rss} KiB",
        first.0,
        last.0,
        if rss_change.abs() <= 5.0 { "met" } else { "MISSED" }
    );
    println!(
        "{whose} open descriptors at rest: {} after a minute, {} at the end ({fds_change:+.1} %; goal within 5 %: {}); at most {max_fds} ({in_flight})",
        first.1,
        last.1,
        if fds_change.abs() <= 5.0 { "met" } else { "MISSED" }
    );
}
