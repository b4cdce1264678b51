//! The real-NATS harness: namespaces, servers, nats.go peers, and the probe runner.
// Shared by every scenario file; not every scenario uses every helper.
#![allow(dead_code, unused_imports)]

pub mod bench;
pub mod drill;
pub mod flood;
pub mod kubelet;
pub mod netns;
pub mod peer;
pub mod probe;
pub mod server;

pub use flood::Flood;
pub use netns::{link, NetNs};
pub use peer::Peer;
pub use probe::probe;
pub use server::{NatsServer, Version};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where probe-tests/setup puts the servers and the built peers.
pub fn deps_dir() -> PathBuf {
    match std::env::var_os("NATSPROBE_DEPS") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/probe-deps"),
    }
}

/// The shipped artifact: NATSPROBE_BIN when set (CI), otherwise the static musl release
/// build, made here once (in its own target dir, so it never waits on cargo's lock).
pub fn static_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Some(bin) = std::env::var_os("NATSPROBE_BIN").filter(|b| !b.is_empty()) {
                return PathBuf::from(bin);
            }
            let target_dir = deps_dir().join("static-build");
            let status = Command::new(env!("CARGO"))
                .args([
                    "build",
                    "--release",
                    "--target",
                    "x86_64-unknown-linux-musl",
                ])
                .arg("--target-dir")
                .arg(&target_dir)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("run cargo");
            assert!(
                status.success(),
                "static build failed: run probe-tests/setup (musl target)"
            );
            target_dir.join("x86_64-unknown-linux-musl/release/natsprobe")
        })
        .clone()
}

/// Held by the tests whose assertions are about time (deadlines, the outage drill) and by
/// the one that loads the machine (a 100k-socket table), so they never run at once. The
/// others may run alongside: they assert exit codes and words, not milliseconds.
pub fn timing_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
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
