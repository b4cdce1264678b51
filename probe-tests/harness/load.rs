//! Trouble on the node, made on purpose: a server stopped for most of every second (a
//! CPU-starved pod: its clients' TCP connections stay up, it answers late), and busy loops
//! beside the probe (a loaded node).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A process stopped (SIGSTOP) for `stopped` of every `every`, until dropped.
pub struct Starved {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pid: i32,
}

impl Starved {
    pub fn new(pid: u32, stopped: Duration, every: Duration) -> Starved {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let pid = pid as i32;
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                // SAFETY: plain kill(2) on a child of this test.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                std::thread::sleep(stopped);
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGCONT) };
                std::thread::sleep(every.saturating_sub(stopped));
            }
        });
        Starved {
            stop,
            thread: Some(thread),
            pid,
        }
    }
}

impl Drop for Starved {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // SAFETY: as above; never leave it stopped.
        unsafe { libc::kill(self.pid, libc::SIGCONT) };
    }
}

/// `n` shell loops burning a CPU each, until dropped.
pub struct BusyLoops(Vec<std::process::Child>);

impl BusyLoops {
    pub fn spawn(n: usize) -> BusyLoops {
        BusyLoops(
            (0..n)
                .map(|_| {
                    std::process::Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A process held to `percent` of one CPU by a cgroup (v1 `cpu` controller: its
/// `cpu.cfs_quota_us` of a 100 ms period), as a pod at its CPU limit is; until dropped.
pub struct Throttled {
    group: std::path::PathBuf,
    pid: u32,
}

impl Throttled {
    pub fn new(pid: u32, percent: u32) -> Throttled {
        let group = std::path::PathBuf::from(format!("/sys/fs/cgroup/cpu/natsprobe-test-{pid}"));
        std::fs::create_dir_all(&group)
            .expect("the cgroup v1 cpu controller at /sys/fs/cgroup/cpu");
        std::fs::write(group.join("cpu.cfs_period_us"), "100000").unwrap();
        std::fs::write(group.join("cpu.cfs_quota_us"), (1000 * percent).to_string()).unwrap();
        std::fs::write(group.join("cgroup.procs"), pid.to_string()).unwrap();
        Throttled { group, pid }
    }
}

impl Drop for Throttled {
    fn drop(&mut self) {
        let _ = std::fs::write("/sys/fs/cgroup/cpu/cgroup.procs", self.pid.to_string());
        let _ = std::fs::remove_dir(&self.group);
    }
}
