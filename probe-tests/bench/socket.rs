//! Benchmark: `natsprobe check` against the two things an operator would otherwise put in an
//! exec probe, in one run, on the same socket tables:
//!   grep:  grep -qE '^ *[0-9]+: [0-9A-F]+:[0-9A-F]{4} [0-9A-F]+:<PORT-HEX> 01 ' /proc/net/tcp /proc/net/tcp6
//!   ss:    ss -Htn state established '( dport = :PORT )'
//! Each is exec'd directly (no shell), inside the same network namespace, like the kubelet
//! would run it, by a small static launcher (`measure::launcher`): wall time is spawn to reap,
//! peak RSS is the child's ru_maxrss (not floored by this process's own). Tools run
//! interleaved, one run each per round in a shuffled order, so drift is shared.
//!
//! First, the node's figure: the check in a namespace on the host's shared TCP established
//! hash and in one with a 1,024-bucket table of its own, a first run (a walk of the table)
//! and a run after a healthy one (the exact lookup), beside a C program doing one sock_diag
//! dump (the floor), grep and ss; and what N pods probing every 10 s cost the node.
//!
//! The default check asks the kernel for each matching socket's tcp_info (the half-open
//! rule); `--half-open-after off` does not: both are measured, for the extension's cost.
//!
//! Run: `cargo bench --bench socket` (root; probe-tests/setup first; musl-gcc or gcc for the
//! launcher and the floor). With NATSPROBE_BASELINE=<another static build> that build is
//! measured in the same rounds too: in the node's figure (a run after a healthy one), at pod
//! scale and in every shape. Several, comma-separated, each `PATH` or `LABEL=PATH`, compare
//! builds with and without one optimization each in one run (docs/performance.md says how
//! each was built).

// A benchmark uses part of the shared harness; the test crate uses all of it, and the
// compiler flags what none uses there.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../harness/mod.rs"]
mod harness;
#[allow(dead_code)]
mod measure;

use harness::{Flood, NatsServer, NetNs, Peer, Version};
use measure::{launched, measure_launched, verdict, Launched};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// The floor: one sock_diag dump of the TCP table (both families in one walk, as the probe
/// asks), in C, static: exit 0 when an ESTABLISHED socket has the remote port argv[1].
const FLOOR_C: &str = r#"
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
struct sockaddr_nl { unsigned short family, pad; uint32_t pid, groups; };
struct nlmsghdr { uint32_t len; uint16_t type, flags; uint32_t seq, pid; };
struct sockid { uint16_t sport, dport; uint32_t src[4], dst[4], ifindex, cookie[2]; };
struct req { uint8_t family, src_len, dst_len, ext; struct sockid id; uint32_t states, dbs; };
struct msg { uint8_t family, state, timer, retrans; struct sockid id; uint32_t e, r, w, uid, inode; };
int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 4222, found = 0;
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 4 /* NETLINK_SOCK_DIAG */);
    if (fd < 0) return 3;
    struct { struct nlmsghdr h; struct req r; } q;
    memset(&q, 0, sizeof q);
    q.h.len = sizeof q; q.h.type = 18 /* TCPDIAG_GETSOCK */; q.h.flags = 1 | 0x300; q.h.seq = 1;
    q.r.family = AF_UNSPEC; q.r.states = 1 << 1;
    struct sockaddr_nl kernel = { .family = AF_NETLINK };
    if (sendto(fd, &q, sizeof q, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) return 3;
    static char buf[32768];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return 3;
        for (char *p = buf; p + sizeof(struct nlmsghdr) <= buf + n;) {
            struct nlmsghdr *h = (struct nlmsghdr *)p;
            if (h->len < sizeof *h || p + h->len > buf + n) return 3;
            if (h->type == 3) return found ? 0 : 1;
            if (h->type == 2) return 3;
            if (ntohs(((struct msg *)(p + sizeof *h))->id.dport) == port) found = 1;
            p += (h->len + 3) & ~3U;
        }
    }
}
"#;

/// The socket check's memory goal, peak RSS for every shape of run.
const GOAL_RSS_KIB: i64 = 3 * 1024;

/// A state dir for the probe's runs (TMPDIR): none of this machine's others.
fn state_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn tools(bin: &str, port: u16, tmp: &Path) -> Vec<(String, Vec<String>)> {
    let hex = format!("{port:04X}");
    let pattern = format!("^ *[0-9]+: [0-9A-F]+:[0-9A-F]{{4}} [0-9A-F]+:{hex} 01 ");
    let tmpdir = format!("TMPDIR={}", tmp.display());
    let s = |v: &[&str]| {
        let mut argv: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        if v[0].contains("natsprobe") || v[0] == bin || baselines().iter().any(|b| b.1 == v[0]) {
            argv.insert(0, tmpdir.clone());
        }
        argv
    };
    let mut tools: Vec<(String, Vec<String>)> = baselines()
        .into_iter()
        .map(|(label, b)| {
            (
                format!("{label}: natsprobe check"),
                s(&[&b, "check", "--port", &port.to_string()]),
            )
        })
        .collect();
    let ours = vec![
        (
            "natsprobe check",
            s(&[bin, "check", "--port", &port.to_string()]),
        ),
        (
            "natsprobe check --half-open-after off",
            s(&[
                bin,
                "check",
                "--port",
                &port.to_string(),
                "--half-open-after",
                "off",
            ]),
        ),
        (
            "natsprobe check --reader proc",
            s(&[
                bin,
                "check",
                "--port",
                &port.to_string(),
                "--reader",
                "proc",
            ]),
        ),
        (
            "grep one-liner",
            s(&[
                "/bin/grep",
                "-qE",
                &pattern,
                "/proc/net/tcp",
                "/proc/net/tcp6",
            ]),
        ),
        (
            "ss -Htn state established",
            s(&[
                "/usr/bin/ss",
                "-Htn",
                "state",
                "established",
                &format!("( dport = :{port} )"),
            ]),
        ),
    ];
    tools.extend(
        ours.into_iter()
            .map(|(name, argv)| (name.to_string(), argv)),
    );
    tools
}

/// NATSPROBE_BASELINE: other builds of the probe (e.g. the previous commit's static binary,
/// or this one built without one optimization) measured in the same rounds, for a comparison:
/// comma-separated, each `PATH` (labelled `baseline`) or `LABEL=PATH`.
fn baselines() -> Vec<(String, String)> {
    let list = std::env::var("NATSPROBE_BASELINE").unwrap_or_default();
    list.split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(|b| match b.split_once('=') {
            Some((label, path)) if !label.contains('/') => (label.to_string(), path.to_string()),
            _ => ("baseline".to_string(), b.to_string()),
        })
        .collect()
}

fn main() {
    let bin = harness::static_binary();
    let bin_s = bin.to_string_lossy().to_string();
    let size = std::fs::metadata(&bin).unwrap().len();
    println!(
        "natsprobe socket benchmark: {} ({:.2} MiB static binary)",
        bin.display(),
        size as f64 / 1048576.0
    );
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap().trim().to_string())
        })
        .unwrap_or_default();
    println!(
        "machine: {cpu}, {} CPUs",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );

    // Every build measured is read afresh by its first run, as a pod reads its binary from the
    // image: what wrote the file decides how the page cache holds it, and so the folios a run
    // maps (a copy made by `cp` of the build the linker wrote measured 12% more peak RSS).
    for b in std::iter::once(bin_s.clone()).chain(baselines().into_iter().map(|b| b.1)) {
        measure::evict(Path::new(&b));
    }
    let launcher = measure::launcher();
    let floor = measure::compile_c("floor", FLOOR_C);
    node_figure(&bin_s, &launcher, &floor);
    shapes(&bin_s, &launcher);

    // Pod scale: a NATS client and a few dozen other sockets (a sidecar, HTTP keep-alives).
    let pod = Arc::new(NetNs::new());
    let server = NatsServer::start(Some(&pod), Version::Pinned, "127.0.0.1", 4222);
    let _client = Peer::conn(Some(&pod), &server.url(), 60, "2s");
    let _others = Flood::new(&pod, 20);
    let sockets = count_sockets(&pod);
    let tmp = state_dir();
    let table = |title: &str, ns: &NetNs, bin: &str, port: u16, runs: usize| {
        let tools: Vec<(String, Vec<String>)> = tools(bin, port, tmp.path())
            .into_iter()
            .map(|(name, mut argv)| {
                argv.insert(0, ns.path());
                (name, argv)
            })
            .collect();
        measure_launched(title, &launcher, &tools, runs)
    };
    let get = |rows: &[Launched], name: &str| launched(rows, name).figures.clone();
    let hit = table(
        &format!("pod scale, {sockets} sockets, live client (match)"),
        &pod,
        &bin_s,
        4222,
        300,
    );
    let miss = table(
        &format!("pod scale, {sockets} sockets, no client on :4223 (full scan)"),
        &pod,
        &bin_s,
        4223,
        300,
    );

    // ~100k sockets in a namespace, none to the port: every reader must look at everything.
    let big = NetNs::new();
    let started = Instant::now();
    let _flood = Flood::new(&big, 50_000);
    let sockets_big = count_sockets(&big);
    println!(
        "\n(built a {sockets_big}-socket table in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let full = table(
        &format!("{sockets_big} sockets, no match (full scan)"),
        &big,
        &bin_s,
        4222,
        30,
    );

    println!("\ngoals");
    for (label, rows) in [("match", &hit), ("no match", &miss)] {
        let (np, grep) = (get(rows, "natsprobe check"), get(rows, "grep one-liner"));
        let ratio = np.median.as_secs_f64() / grep.median.as_secs_f64();
        println!(
            "  pod scale, {label}: natsprobe/grep wall = {ratio:.2}x (goal <= 0.5x): {}",
            verdict(ratio <= 0.5)
        );
        println!(
            "  pod scale, {label}: natsprobe peak RSS = {} KiB (goal <= {GOAL_RSS_KIB} KiB): {}",
            np.rss_kib,
            verdict(np.rss_kib <= GOAL_RSS_KIB)
        );
    }
    let (np, ss) = (
        get(&full, "natsprobe check"),
        get(&full, "ss -Htn state established"),
    );
    let ratio = np.median.as_secs_f64() / ss.median.as_secs_f64();
    println!(
        "  {sockets_big} sockets, no match: natsprobe/ss wall = {ratio:.2}x (goal <= 1.0x): {}",
        verdict(ratio <= 1.0)
    );
    // The half-open rule asks the kernel for tcp_info in the same request (the default);
    // `off` does not ask.
    for (label, rows) in [
        ("pod scale, match", &hit),
        ("pod scale, no match", &miss),
        (&*format!("{sockets_big} sockets, no match"), &full),
    ] {
        let (with, without) = (
            get(rows, "natsprobe check"),
            get(rows, "natsprobe check --half-open-after off"),
        );
        let ratio = with.median.as_secs_f64() / without.median.as_secs_f64();
        println!(
            "  {label}: tcp_info asked/not asked wall = {ratio:.2}x, peak RSS {:.2}x (goal <= 1.10x): {}",
            with.rss_kib as f64 / without.rss_kib as f64,
            verdict(ratio <= 1.10)
        );
    }
    let mib = size as f64 / 1048576.0;
    println!(
        "  static binary = {mib:.2} MiB (goal <= 5 MiB): {}",
        verdict(mib <= 5.0)
    );
    for (base, _) in baselines() {
        println!("\nagainst {base} (NATSPROBE_BASELINE)");
        for (label, rows) in [
            ("pod scale, match", &hit),
            ("pod scale, no match", &miss),
            ("100k, no match", &full),
        ] {
            let (np, other) = (
                get(rows, "natsprobe check"),
                get(rows, &format!("{base}: natsprobe check")),
            );
            println!(
                "  {label}: wall {:.2}x, peak RSS {:.2}x",
                np.median.as_secs_f64() / other.median.as_secs_f64(),
                np.rss_kib as f64 / other.rss_kib as f64
            );
        }
    }
    drop(server);
}

/// Peak RSS of the socket check by the pod's shape (one client or two, a socket in TIME_WAIT)
/// and the probe's flags, a first run (the walk, the state written) and a run after a healthy
/// one each: the memory goal for every shape, not only the node figure's. Each baseline runs
/// every shape too, in the same rounds.
fn shapes(bin: &str, launcher: &Path) {
    let ns = Arc::new(NetNs::new());
    let server = NatsServer::start(Some(&ns), Version::Pinned, "127.0.0.1", 4222);
    let client = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    let name = harness::peer::natspeer()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let pid = client.pid().to_string();
    let flags: [&[&str]; 6] = [
        &[],
        &["--json", "-v"],
        &["--pid", &pid],
        &["--process", &name],
        &["--min-connections", "2"],
        &["--port", "4223"],
    ];
    // Ours, then each baseline's: the label its rows start with, the binary.
    let builds: Vec<(String, String)> = std::iter::once((String::new(), bin.to_string()))
        .chain(
            baselines()
                .into_iter()
                .map(|(label, b)| (format!("{label}: "), b)),
        )
        .collect();
    let mut worst = vec![0; builds.len()];
    let mut dirs = Vec::new();
    for clients in [1, 2] {
        let _second = (clients == 2).then(|| Peer::conn(Some(&ns), &server.url(), 60, "2s"));
        time_wait(&ns);
        let mut tools: Vec<(String, Vec<String>)> = Vec::new();
        // The build each row measures (an index into `builds`).
        let mut of = Vec::new();
        for ((b, (build, bin)), f) in builds
            .iter()
            .enumerate()
            .flat_map(|b| flags.iter().map(move |f| (b, f)))
        {
            let argv = |env: Vec<String>| {
                let mut v = vec![ns.path()];
                v.extend(env);
                v.extend(
                    [bin.as_str(), "check"]
                        .iter()
                        .chain(f.iter())
                        .map(|a| a.to_string()),
                );
                v
            };
            let (first, after) = (state_dir(), state_dir());
            let tmp = |d: &tempfile::TempDir| format!("TMPDIR={}", d.path().display());
            for d in [&first, &after] {
                measure::run_launched(launcher, &argv(vec![tmp(d)]));
            }
            let shown = format!("check {}", f.join(" ")).replace(&pid, "PID");
            // What a healthy run remembered, removed before each first run (untimed); an
            // unhealthy one remembers nothing, and every run walks.
            let remembered = walk_files(first.path()).into_iter().find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("check-")
            });
            match remembered {
                Some(file) => {
                    let rm = format!("rm={}", file.display());
                    tools.push((
                        format!("{build}first run: {shown}"),
                        argv(vec![rm, tmp(&first)]),
                    ));
                    tools.push((
                        format!("{build}after a healthy run: {shown}"),
                        argv(vec![tmp(&after)]),
                    ));
                    of.extend([b, b]);
                }
                None => {
                    tools.push((
                        format!("{build}every run walks: {shown}"),
                        argv(vec![tmp(&after)]),
                    ));
                    of.push(b);
                }
            }
            dirs.extend([first, after]);
        }
        let rows = measure_launched(
            &format!("peak RSS by shape: {clients} client(s), a socket in TIME_WAIT"),
            launcher,
            &tools,
            30,
        );
        for (row, &b) in rows.iter().zip(&of) {
            worst[b] = worst[b].max(row.figures.rss_kib);
        }
        assert!(count_time_wait(&ns) > 0, "the TIME_WAIT socket expired");
    }
    println!(
        "  peak RSS, every shape = {} KiB (goal <= {GOAL_RSS_KIB} KiB): {}",
        worst[0],
        verdict(worst[0] <= GOAL_RSS_KIB)
    );
    for ((build, _), worst) in builds.iter().zip(&worst).skip(1) {
        println!("  {build}peak RSS, every shape = {worst} KiB");
    }
}

/// Every file under `dir`.
fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk_files(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// A socket to NATS left in TIME_WAIT (the client side closes first), as a pod has for a
/// minute after its client reconnects and after each of a probe's own connections to NATS
/// (`--server`, `--consumer`): a walk then counts the port's sockets in other states too.
fn time_wait(ns: &NetNs) {
    let script =
        "import socket\ns = socket.create_connection(('127.0.0.1', 4222))\ns.recv(4096)\ns.close()";
    let status = ns.command("python3").args(["-c", script]).status().unwrap();
    assert!(status.success(), "python3 -c: {status}");
}

/// The pod's sockets to port 4222 in TIME_WAIT.
fn count_time_wait(ns: &NetNs) -> usize {
    let out = ns
        .command("/usr/bin/ss")
        .args(["-Htn", "state", "time-wait", "( dport = :4222 )"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

fn count_sockets(ns: &NetNs) -> usize {
    let out = ns.command("/usr/bin/ss").args(["-Htan"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// A pod: a NATS server, its client and a few dozen other sockets, in `ns`.
struct Pod {
    _server: NatsServer,
    _client: Peer,
    _others: Flood,
}

fn pod_in(ns: &Arc<NetNs>) -> Pod {
    let server = NatsServer::start(Some(ns), Version::Pinned, "127.0.0.1", 4222);
    let client = Peer::conn(Some(ns), &server.url(), 60, "2s");
    Pod {
        _server: server,
        _client: client,
        _others: Flood::new(ns, 20),
    }
}

/// The check on the host's shared TCP hash and on a table of the namespace's own, a first run
/// and a run after a healthy one, beside the floor, grep and ss, in one run; the goals; and
/// what N pods probing every 10 s cost the node.
fn node_figure(bin: &str, launcher: &Path, floor: &Path) {
    let shared = Arc::new(NetNs::new());
    let own = Arc::new(NetNs::with_own_table(1024));
    let _pods = [pod_in(&shared), pod_in(&own)];
    let first = [state_dir(), state_dir()];
    let after = [state_dir(), state_dir()];
    let baseline_dirs: [Vec<tempfile::TempDir>; 2] =
        [(); 2].map(|_| baselines().iter().map(|_| state_dir()).collect());
    let mut tools: Vec<(String, Vec<String>)> = Vec::new();
    for (i, (ns, table)) in [(&shared, "shared"), (&own, "own")].into_iter().enumerate() {
        let entries = ns.tcp_ehash_entries();
        println!(
            "\nnamespace on the {table} table: tcp_ehash_entries = {entries} ({})",
            if entries < 0 {
                "the host's, shared"
            } else {
                "its own"
            }
        );
        // A healthy run remembers its connection: `after` keeps it; `first` loses it before
        // every run (untimed), so each run there walks the table and remembers it again.
        let prime = |bin: &str, dir: &Path| {
            let argv = vec![
                ns.path(),
                format!("TMPDIR={}", dir.display()),
                bin.to_string(),
                "check".to_string(),
            ];
            let (s, _) = measure::run_launched(launcher, &argv);
            assert_eq!(s.code, 0, "the pod in the {table} namespace is not healthy");
        };
        prime(bin, first[i].path());
        prime(bin, after[i].path());
        let dir = std::fs::read_dir(first[i].path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("check-")
            })
            .expect("the healthy run remembered its connection");
        let run = |env: &[String], argv: &[&str]| {
            let mut v = vec![ns.path()];
            v.extend(env.iter().cloned());
            v.extend(argv.iter().map(|a| a.to_string()));
            v
        };
        let tmp = |d: &tempfile::TempDir| format!("TMPDIR={}", d.path().display());
        let rm = format!("rm={}", file.display());
        tools.push((
            format!("natsprobe check, first run (walk) [{table}]"),
            run(&[rm, tmp(&first[i])], &[bin, "check"]),
        ));
        tools.push((
            format!("natsprobe check, after a healthy run [{table}]"),
            run(&[tmp(&after[i])], &[bin, "check"]),
        ));
        for ((label, b), dir) in baselines().iter().zip(&baseline_dirs[i]) {
            prime(b, dir.path());
            tools.push((
                format!("{label}: natsprobe check, after a healthy run [{table}]"),
                run(&[tmp(dir)], &[b, "check"]),
            ));
        }
        let f = floor.to_string_lossy();
        tools.push((
            format!("C floor: one sock_diag dump [{table}]"),
            run(&[], &[&f, "4222"]),
        ));
        let pattern = "^ *[0-9]+: [0-9A-F]+:[0-9A-F]{4} [0-9A-F]+:107E 01 ";
        tools.push((
            format!("grep one-liner [{table}]"),
            run(
                &[],
                &[
                    "/bin/grep",
                    "-qE",
                    pattern,
                    "/proc/net/tcp",
                    "/proc/net/tcp6",
                ],
            ),
        ));
        tools.push((
            format!("ss -Htn state established [{table}]"),
            run(
                &[],
                &[
                    "/usr/bin/ss",
                    "-Htn",
                    "state",
                    "established",
                    "( dport = :4222 )",
                ],
            ),
        ));
    }
    // TIME_WAIT lasts a minute; the measurement below takes well under one.
    for ns in [&shared, &own] {
        time_wait(ns);
    }
    let rows = measure_launched(
        "the node's figure: pod scale, live client, a socket in TIME_WAIT, on the shared table and on one of 1,024 buckets",
        launcher,
        &tools,
        300,
    );
    for (ns, table) in [(&shared, "shared"), (&own, "own")] {
        let n = count_time_wait(ns);
        assert!(
            n > 0,
            "the {table} pod's TIME_WAIT socket expired before the runs ended"
        );
        println!("  (the {table} table's pod held {n} socket(s) to :4222 in TIME_WAIT throughout)");
    }
    let row = |name: &str, table: &str| launched(&rows, &format!("{name} [{table}]"));
    let wall = |r: &Launched| r.figures.median.as_secs_f64();
    let after_shared = row("natsprobe check, after a healthy run", "shared");
    let after_own = row("natsprobe check, after a healthy run", "own");
    let floor_shared = row("C floor: one sock_diag dump", "shared");
    let floor_own = row("C floor: one sock_diag dump", "own");
    println!("\ngoals (a run after a healthy one)");
    let r = wall(after_shared) / wall(after_own);
    println!(
        "  shared table / own table wall = {r:.2}x (goal <= 1.1x): {}",
        verdict(r <= 1.1)
    );
    let r = wall(after_shared) / wall(floor_shared);
    println!(
        "  shared table: natsprobe / the floor's wall = {r:.2}x (goal <= 0.5x): {}",
        verdict(r <= 0.5)
    );
    let r = wall(after_own) / wall(floor_own);
    println!(
        "  own table: natsprobe / the floor's wall = {r:.2}x (goal <= 2x): {}",
        verdict(r <= 2.0)
    );
    for r in rows
        .iter()
        .filter(|r| r.name.starts_with("natsprobe check"))
    {
        let kib = r.figures.rss_kib;
        println!(
            "  peak RSS, {} = {kib} KiB (goal <= {GOAL_RSS_KIB} KiB): {}",
            r.name,
            verdict(kib <= GOAL_RSS_KIB)
        );
    }
    for (label, _) in baselines() {
        println!("\nagainst {label} (NATSPROBE_BASELINE), a run after a healthy one");
        for table in ["shared", "own"] {
            let (np, other) = (
                row("natsprobe check, after a healthy run", table),
                row(
                    &format!("{label}: natsprobe check, after a healthy run"),
                    table,
                ),
            );
            println!(
                "  [{table}] wall {:.2}x, CPU {:.2}x, peak RSS {:.2}x",
                wall(np) / wall(other),
                np.cpu.as_secs_f64() / other.cpu.as_secs_f64(),
                np.figures.rss_kib as f64 / other.figures.rss_kib as f64
            );
        }
    }
    println!("\nwhat N pods probing every 10 s cost the node (median CPU per run x N / 10 s)");
    println!(
        "  {:<44} {:>10} {:>10} {:>10} {:>10}",
        "", "per run", "30 pods", "110 pods", "250 pods"
    );
    for table in ["shared", "own"] {
        for name in [
            "natsprobe check, first run (walk)",
            "natsprobe check, after a healthy run",
            "C floor: one sock_diag dump",
        ] {
            let r = row(name, table);
            let cpu = r.cpu.as_secs_f64();
            let share = |pods: f64| format!("{:.3} %", cpu * pods / 10.0 * 100.0);
            println!(
                "  {:<44} {:>7.3} ms {:>10} {:>10} {:>10}",
                format!("{name} [{table}]"),
                cpu * 1e3,
                share(30.0),
                share(110.0),
                share(250.0)
            );
        }
    }
    println!("  (% of one core; a walk's cost grows with the host's table, the lookup's does not)");
}
