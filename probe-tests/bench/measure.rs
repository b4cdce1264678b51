//! Measuring tools side by side for the benchmarks: each run exec'd directly in a namespace,
//! wall time spawn to reap, peak RSS from wait4's rusage, tools interleaved in a fresh
//! shuffled order each round.

use crate::harness::NetNs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Sample {
    pub wall: Duration,
    pub rss_kib: i64,
    pub code: i32,
}

pub fn run_once(ns: &NetNs, argv: &[String]) -> Sample {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_clear();
    ns.enter_on_exec(&mut cmd);
    let started = Instant::now();
    let child = cmd.spawn().unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let mut status = 0;
    // SAFETY: wait4 on our own child; rusage is a plain struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    assert_eq!(pid, child.id() as i32);
    std::mem::forget(child); // reaped above
    Sample {
        wall,
        rss_kib: usage.ru_maxrss,
        code: libc::WEXITSTATUS(status),
    }
}

pub struct Figures {
    pub median: Duration,
    pub rss_kib: i64,
    pub code: i32,
}

/// Runs every tool once per round, in a shuffled order, so drift (CPU frequency, page cache,
/// the kernel's own hash state) falls on all tools alike; then the median per tool. Shuffled,
/// not rotated: a rotation keeps each tool behind the same predecessor every round, and the
/// tool that always ran right after `ss` measured 5-7% slower than the same binary with the
/// same arguments in the next slot (either way round).
pub fn measure_all(ns: &NetNs, tools: &[(&'static str, Vec<String>)], runs: usize) -> Vec<Figures> {
    let mut samples: Vec<Vec<Sample>> = tools.iter().map(|_| Vec::with_capacity(runs)).collect();
    let mut order: Vec<usize> = (0..tools.len()).collect();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    for round in 0..runs + runs.min(10) {
        shuffle(&mut order, &mut seed);
        for &i in &order {
            let sample = run_once(ns, &tools[i].1);
            if round >= runs.min(10) {
                samples[i].push(sample);
            }
        }
    }
    samples
        .into_iter()
        .zip(tools)
        .map(|(mut s, (name, _))| {
            let codes: Vec<i32> = s.iter().map(|x| x.code).collect();
            assert!(
                codes.windows(2).all(|w| w[0] == w[1]),
                "{name} changed its answer: {codes:?}"
            );
            s.sort_by_key(|x| x.wall);
            Figures {
                median: s[s.len() / 2].wall,
                rss_kib: s.iter().map(|x| x.rss_kib).max().unwrap(),
                code: s[0].code,
            }
        })
        .collect()
}

/// Measures `tools` and prints them as a table under `title`.
pub fn measure(
    title: &str,
    ns: &NetNs,
    tools: &[(&'static str, Vec<String>)],
    runs: usize,
) -> Vec<(&'static str, Figures)> {
    println!("\n{title} ({runs} interleaved runs each, median wall, peak RSS)");
    println!(
        "  {:<32} {:>10} {:>10} {:>5}",
        "tool", "wall", "RSS", "exit"
    );
    let figures = measure_all(ns, tools, runs);
    let mut rows = Vec::new();
    for ((name, _), f) in tools.iter().zip(figures) {
        println!(
            "  {:<32} {:>7.2} ms {:>6.2} MiB {:>5}",
            name,
            f.median.as_secs_f64() * 1e3,
            f.rss_kib as f64 / 1024.0,
            f.code
        );
        rows.push((*name, f));
    }
    rows
}

/// Fisher-Yates with xorshift64: reproducible, and no dependency for a benchmark's shuffle.
fn shuffle(order: &mut [usize], seed: &mut u64) {
    for i in (1..order.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        order.swap(i, (*seed % (i as u64 + 1)) as usize);
    }
}

pub fn get<'a>(rows: &'a [(&'static str, Figures)], name: &str) -> &'a Figures {
    &rows.iter().find(|(n, _)| *n == name).unwrap().1
}

pub fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}
