//! Network namespaces the tests create for themselves: each scenario gets a pod-like socket
//! table of its own, so parallel tests never see each other's connections and may all use
//! the real NATS port, 4222.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};

pub struct NetNs {
    pub name: String,
    file: Arc<File>,
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);
static SWEEP: Once = Once::new();

impl NetNs {
    /// A fresh namespace with only `lo`, up (so 127.0.0.1 and ::1 work).
    pub fn new() -> NetNs {
        SWEEP.call_once(remove_stale);
        let name = format!(
            "np{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        ip(&["netns", "add", &name]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        let file = File::open(format!("/run/netns/{name}"))
            .unwrap_or_else(|e| panic!("open /run/netns/{name}: {e}"));
        NetNs {
            name,
            file: Arc::new(file),
        }
    }

    /// A fresh namespace with a TCP established hash of its own, `buckets` large, instead of
    /// the host's shared one (`net.ipv4.tcp_child_ehash_entries`, Linux 6.1+, read when a
    /// namespace is created: set around `ip netns add`, then restored).
    pub fn with_own_table(buckets: u32) -> NetNs {
        let key = "/proc/sys/net/ipv4/tcp_child_ehash_entries";
        let before = std::fs::read_to_string(key)
            .unwrap_or_else(|e| panic!("{key}: {e} (Linux 6.1+ has it)"));
        std::fs::write(key, buckets.to_string()).unwrap_or_else(|e| panic!("{key}: {e}"));
        let ns = NetNs::new();
        std::fs::write(key, before.trim()).unwrap_or_else(|e| panic!("{key}: {e}"));
        ns
    }

    /// The size of the TCP established hash this namespace uses, as it reports it (negative:
    /// the host's, shared).
    pub fn tcp_ehash_entries(&self) -> i64 {
        let out = self
            .command("cat")
            .arg("/proc/sys/net/ipv4/tcp_ehash_entries")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    /// The namespace's file, held open, for a thread that enters it itself.
    pub fn file(&self) -> Arc<File> {
        Arc::clone(&self.file)
    }

    /// The namespace's file, for a program that enters it itself.
    pub fn path(&self) -> String {
        format!("/run/netns/{}", self.name)
    }

    /// A command that runs inside the namespace (setns between fork and exec).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        self.enter_on_exec(&mut cmd);
        cmd
    }

    pub fn enter_on_exec(&self, cmd: &mut Command) {
        let file = Arc::clone(&self.file);
        // SAFETY: setns is async-signal-safe; the closure only makes that syscall.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Runs `f` on a thread that lives in the namespace (setns moves only that thread).
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let file = Arc::clone(&self.file);
        std::thread::spawn(move || {
            // SAFETY: setns on this thread only.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", io::Error::last_os_error());
            f()
        })
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
    }

    /// Spawns `f` on a thread that lives in the namespace, and returns at once.
    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let file = Arc::clone(&self.file);
        std::thread::spawn(move || {
            // SAFETY: setns on this thread only.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", io::Error::last_os_error());
            f()
        })
    }

    /// `ip -n NAME args...`, panicking with ip's output on failure.
    pub fn ip(&self, args: &[&str]) {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        ip(&full);
    }

    /// Runs a program in the namespace and panics if it fails (iptables, sysctl...).
    pub fn exec(&self, program: &str, args: &[&str]) {
        let out = self
            .command(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e} (probe-tests/setup installs it)"));
        assert!(
            out.status.success(),
            "{program} {args:?} in {}: {}{}",
            self.name,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Connects two namespaces with a veth pair, like two pods on one node: `a` gets
/// 10.200.0.1/24 and `b` 10.200.0.2/24. The names exist only inside the namespaces, so
/// parallel tests never collide.
pub fn link(a: &NetNs, b: &NetNs) -> (&'static str, &'static str) {
    link_subnet(a, b, 200);
    ("10.200.0.1", "10.200.0.2")
}

/// Connects two namespaces with a veth pair named `veth<subnet>`: `a` gets 10.N.0.1/24 and
/// `b` 10.N.0.2/24. A namespace linked to several others (a NATS pod and two app pods) takes
/// one subnet per link.
pub fn link_subnet(a: &NetNs, b: &NetNs, subnet: u8) -> (String, String) {
    let dev = format!("veth{subnet}");
    ip(&[
        "-n", &a.name, "link", "add", &dev, "type", "veth", "peer", "name", &dev, "netns", &b.name,
    ]);
    let (ip_a, ip_b) = (format!("10.{subnet}.0.1"), format!("10.{subnet}.0.2"));
    for (ns, addr) in [(a, &ip_a), (b, &ip_b)] {
        ns.ip(&["addr", "add", &format!("{addr}/24"), "dev", &dev]);
        ns.ip(&["link", "set", &dev, "up"]);
    }
    (ip_a, ip_b)
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap_or_else(|e| {
        panic!("cannot run `ip` ({e}): the tests need iproute2 and root; run probe-tests/setup as root")
    });
    assert!(
        out.status.success(),
        "ip {}: {} (network namespaces need root)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Namespaces left behind by a test run that was killed: `np<pid>-<n>` with a dead pid.
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(pid) = name.strip_prefix("np").and_then(|r| r.split('-').next()) else {
            continue;
        };
        if let Ok(pid) = pid.parse::<u32>() {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let _ = Command::new("ip").args(["netns", "del", name]).status();
            }
        }
    }
}
