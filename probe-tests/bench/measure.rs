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
    // SAFETY: rusage is a plain struct of integers, valid all zeroes.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, into pointers to our own locals.
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

#[derive(Clone)]
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

/// A small static C program that runs one command in a namespace and reports it: this
/// process's own memory is not counted into the child's peak RSS (wait4's figure for a child
/// is never below its parent's at the fork, or at the exec after a vfork, and a bench process
/// is megabytes), and the wall time is spawn to reap, nothing else.
/// `launch NETNS [rm=FILE] [VAR=VALUE ...] PROGRAM ARGS...`: FILE removed first (untimed);
/// prints `wall_ns maxrss_kib cpu_us exit`.
const LAUNCH_C: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) { perror(argv[1]); return 2; }
    close(fd);
    char *env[64]; int n = 0, i = 2;
    for (; i < argc && strchr(argv[i], '=') && n < 63; i++) {
        if (!strncmp(argv[i], "rm=", 3)) unlink(argv[i] + 3); else env[n++] = argv[i];
    }
    env[n] = 0;
    if (i >= argc) return 2;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    struct timespec a, b; pid_t pid; int status; struct rusage ru;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (posix_spawn(&pid, argv[i], &fa, 0, argv + i, env) != 0) { perror(argv[i]); return 2; }
    if (wait4(pid, &status, 0, &ru) != pid) return 2;
    clock_gettime(CLOCK_MONOTONIC, &b);
    long long cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000LL + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
    printf("%lld %ld %lld %d\n", (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec),
           ru.ru_maxrss, cpu, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
}
"#;

/// Compiles a C program, static, with musl-gcc (else gcc -static), once per bench run, into
/// target/bench-c/NAME.
pub fn compile_c(name: &str, source: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-c");
    std::fs::create_dir_all(&dir).unwrap();
    let (src, bin) = (dir.join(format!("{name}.c")), dir.join(name));
    std::fs::write(&src, source).unwrap();
    let built = ["musl-gcc", "gcc"].iter().any(|cc| {
        Command::new(cc)
            .args(["-Os", "-static", "-s", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success())
    });
    assert!(
        built,
        "cannot compile {name}.c: apt-get install musl-tools (or gcc)"
    );
    bin
}

/// One launched run's figures, and its CPU time.
pub fn run_launched(launcher: &std::path::Path, argv: &[String]) -> (Sample, Duration) {
    let out = Command::new(launcher)
        .args(argv)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let f: Vec<i64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(f.len(), 4, "launch {argv:?}: {text}");
    let sample = Sample {
        wall: Duration::from_nanos(f[0] as u64),
        rss_kib: f[1],
        code: f[3] as i32,
    };
    (sample, Duration::from_micros(f[2] as u64))
}

/// A launched tool's figures: `Figures` and the median CPU time of a run.
pub struct Launched {
    pub name: String,
    pub figures: Figures,
    pub cpu: Duration,
}

/// Runs every tool (`launch`'s arguments: the namespace first) once per round, in a shuffled
/// order, through `launcher`; prints and returns the medians.
pub fn measure_launched(
    title: &str,
    launcher: &std::path::Path,
    tools: &[(String, Vec<String>)],
    runs: usize,
) -> Vec<Launched> {
    println!("\n{title} ({runs} interleaved runs each, median wall and CPU, peak RSS)");
    println!(
        "  {:<52} {:>10} {:>10} {:>10} {:>5}",
        "tool", "wall", "CPU", "RSS", "exit"
    );
    let mut samples: Vec<Vec<(Sample, Duration)>> =
        tools.iter().map(|_| Vec::with_capacity(runs)).collect();
    let mut order: Vec<usize> = (0..tools.len()).collect();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    for round in 0..runs + runs.min(10) {
        shuffle(&mut order, &mut seed);
        for &i in &order {
            let s = run_launched(launcher, &tools[i].1);
            if round >= runs.min(10) {
                samples[i].push(s);
            }
        }
    }
    let mut rows = Vec::new();
    for (mut s, (name, _)) in samples.into_iter().zip(tools) {
        let codes: Vec<i32> = s.iter().map(|x| x.0.code).collect();
        assert!(
            codes.windows(2).all(|w| w[0] == w[1]),
            "{name} changed its answer: {codes:?}"
        );
        let mut cpu: Vec<Duration> = s.iter().map(|x| x.1).collect();
        cpu.sort();
        s.sort_by_key(|x| x.0.wall);
        let row = Launched {
            name: name.clone(),
            figures: Figures {
                median: s[s.len() / 2].0.wall,
                rss_kib: s.iter().map(|x| x.0.rss_kib).max().unwrap(),
                code: s[0].0.code,
            },
            cpu: cpu[cpu.len() / 2],
        };
        println!(
            "  {:<52} {:>7.3} ms {:>7.3} ms {:>6} KiB {:>5}",
            row.name,
            row.figures.median.as_secs_f64() * 1e3,
            row.cpu.as_secs_f64() * 1e3,
            row.figures.rss_kib,
            row.figures.code
        );
        rows.push(row);
    }
    rows
}

/// Drops `path`'s pages from the page cache (written back first), so that its next run reads
/// it afresh, as a pod's first run reads its binary from the image. How the page cache holds
/// a binary decides the folios a run maps: builds compared must be held the same way.
pub fn evict(path: &std::path::Path) {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.sync_all().unwrap();
    // SAFETY: advice on a descriptor this function holds open; it reads no memory of ours.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0, "posix_fadvise {}: {rc}", path.display());
}

/// The launcher, compiled.
pub fn launcher() -> std::path::PathBuf {
    compile_c("launch", LAUNCH_C)
}

pub fn launched<'a>(rows: &'a [Launched], name: &str) -> &'a Launched {
    rows.iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no row {name}"))
}
