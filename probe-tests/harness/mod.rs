//! The real-NATS harness: namespaces, servers, nats.go peers, and the probe runner.

pub mod callout;
pub mod chaos;
pub mod cluster;
pub mod drill;
pub mod flood;
pub mod hostile;
pub mod image;
pub mod kubelet;
pub mod load;
pub mod netns;
pub mod operator;
pub mod peer;
pub mod pods;
pub mod probe;
pub mod responder;
pub mod rootfs;
pub mod runc;
pub mod server;
pub mod service;
pub mod topology;

pub use flood::Flood;
pub use netns::{link, link_subnet, NetNs};
pub use operator::OperatorMode;
pub use peer::{async_nats, nats_js, Peer};
pub use probe::probe;
pub use server::{NatsServer, Version};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The exec probe an operator writes first, as `grep -qE` takes it on `/proc/net/tcp{,6}`:
/// any ESTABLISHED socket (state 01) to remote port 4222 (0x107E).
pub const GREP_ONE_LINER: &str = "^ *[0-9]+: [0-9A-F]+:[0-9A-F]{4} [0-9A-F]+:107E 01 ";

/// A directory in memory (the host's tmpfs): a probe's state dir as the README's manifests
/// mount it (an `emptyDir` with `medium: Memory`), or a server's JetStream store. On the
/// test machine's disk, shared by every server, probe and build here, a write can wait on the
/// disk (ext4 freeing a replaced file's blocks waits for their writeback and a synchronous
/// discard) in a state no signal ends: a probe run past the kubelet's timeoutSeconds, a
/// server's store losing its JetStream leaderships (a NATS fault no test scripts).
pub fn memory_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/dev/shm")
        .expect("a directory on /dev/shm (tmpfs)")
}

/// Where probe-tests/setup puts the servers and the built peers.
pub fn deps_dir() -> PathBuf {
    match std::env::var_os("NATSPROBE_DEPS") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/probe-deps"),
    }
}

/// What a drill needs and this machine lacks, in one line that says how to get it; None when
/// nothing is missing. `deps` is where probe-tests/setup puts the servers (`deps_dir`).
pub fn missing_for_a_drill(deps: &Path) -> Option<String> {
    let on_path = |tool: &str| {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network namespaces, iptables): run it as root".into());
    }
    let server = Version::Pinned.path_in(deps);
    if !server.is_file() {
        return Some(format!(
            "{} is missing: run probe-tests/setup (it installs nats-server, Go and nats.go, iptables)",
            server.display()
        ));
    }
    for (tool, what) in [
        ("go", "Go, to build the nats.go clients"),
        ("iptables", "iptables"),
    ] {
        if !on_path(tool) {
            return Some(format!("{what} ({tool}) is missing: run probe-tests/setup"));
        }
    }
    let nats_go = Path::new("/usr/share/gocode/src/github.com/nats-io/nats.go");
    if !nats_go.is_dir() {
        return Some(format!(
            "nats.go ({}) is missing: run probe-tests/setup (golang-github-nats-io-go-nats-dev)",
            nats_go.display()
        ));
    }
    let (bin, _) = static_binary_path();
    if !bin.is_file() {
        return Some(format!(
            "the static probe ({}) is missing: `cargo build --release --locked --target \
             x86_64-unknown-linux-musl` after probe-tests/setup, or set NATSPROBE_BIN",
            bin.display()
        ));
    }
    None
}

/// The shipped artifact, the static musl binary: NATSPROBE_BIN when set (probe-tests/run and
/// CI set it), else the release build in this checkout's target dir. The tests never build it
/// themselves: a missing binary is a failure that says how to make it.
pub fn static_binary() -> PathBuf {
    let (built, given) = static_binary_path();
    assert!(
        given || built.exists(),
        "the static binary is missing: run probe-tests/run (it builds it), or `cargo build \
         --release --locked --target x86_64-unknown-linux-musl`, or set NATSPROBE_BIN"
    );
    built
}

/// Where the static binary is, and whether NATSPROBE_BIN gave it (else this checkout's
/// release build).
fn static_binary_path() -> (PathBuf, bool) {
    match std::env::var_os("NATSPROBE_BIN").filter(|b| !b.is_empty()) {
        Some(bin) => (PathBuf::from(bin), true),
        None => (
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target/x86_64-unknown-linux-musl/release/natsprobe"),
            false,
        ),
    }
}

/// The arm64 static binary: NATSPROBE_BIN_ARM64 when set (probe-tests/run sets it), else the
/// release build in this checkout's target dir. Run under qemu-user (`Probe::arm64`).
pub fn static_binary_arm64() -> PathBuf {
    if let Some(bin) = std::env::var_os("NATSPROBE_BIN_ARM64").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/aarch64-unknown-linux-musl/release/natsprobe");
    assert!(
        built.exists(),
        "the arm64 static binary is missing: run probe-tests/run (it builds it), or `cargo \
         build --release --locked --target aarch64-unknown-linux-musl` after probe-tests/setup"
    );
    built
}

/// Held by the tests whose assertions are about time (deadlines, the outage drill) and by
/// the one that loads the machine (a 100k-socket table), so they never run at once. The
/// others may run alongside: they assert exit codes and words, not milliseconds.
pub fn timing_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// In a child between fork and exec: drops to user and group `uid`, with no supplementary
/// groups. Only async-signal-safe calls; register it after any step that needs root (setns).
pub fn become_user(uid: u32) -> std::io::Result<()> {
    // SAFETY: setgroups, setgid and setuid are async-signal-safe, with no pointers but null.
    let failed = unsafe {
        libc::setgroups(0, std::ptr::null()) != 0
            || libc::setgid(uid) != 0
            || libc::setuid(uid) != 0
    };
    match failed {
        true => Err(std::io::Error::last_os_error()),
        false => Ok(()),
    }
}

/// Servers that must form a whole (a cluster, a supercluster): `start` makes them afresh and
/// `formed` waits for the whole, or says why not with their logs. nats-server 2.10.26 now and
/// then forms a 3-node cluster whose meta group cannot place a stream on all three nodes for
/// a minute and more ("no suitable peers for placement"; 3 starts in 192 with two clusters
/// starting at once on this machine, each after routes closed as duplicates): servers not
/// formed are dropped (killed) and started afresh, up to three times; a third failure panics
/// with every reason.
pub fn formed_within_three_starts<T>(
    what: &str,
    mut start: impl FnMut() -> T,
    formed: impl Fn(&T) -> Result<(), String>,
) -> T {
    let mut reasons = Vec::new();
    for _ in 0..3 {
        let servers = start();
        match formed(&servers) {
            Ok(()) => return servers,
            Err(why) => {
                eprintln!("{what} not formed, starting it afresh: {why}");
                reasons.push(why);
            }
        }
    }
    panic!("{what} not formed in three starts:\n{}", reasons.join("\n"));
}

/// Polls `check` until it returns true, or panics naming `what`.
#[track_caller]
pub fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
