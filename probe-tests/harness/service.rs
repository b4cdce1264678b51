//! A Kubernetes Service as the pod's kernel sees it, both kinds of dataplane:
//!
//! - **socket-level load balancing** (`SocketLb`): a real `cgroup/connect4` and `connect6`
//!   BPF hook (probe-tests/peers/svclb/svc_lb.bpf.c, built with clang and loaded with bpftool,
//!   both from Debian's packages) attached to a cgroup of its own; processes started in the
//!   cgroup (the client, the probe) have their `connect()` to the Service rewritten to the
//!   backend, and their socket holds the backend's tuple. A `getpeername` hook gives the
//!   application the Service back, as Cilium's does.
//! - **kube-proxy's DNAT** (`dnat`): an iptables `nat` rule in the pod's namespace; the
//!   translation is done on packets and the socket keeps the Service's tuple.

use super::NetNs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The hook's object file, built once per test process into this checkout's target dir.
fn object() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let src = root.join("probe-tests/peers/svclb/svc_lb.bpf.c");
        let out_dir = root.join("target/svclb");
        std::fs::create_dir_all(&out_dir).unwrap();
        let out = out_dir.join("svc_lb.bpf.o");
        // Debian keeps asm/types.h under the multiarch include dir.
        let arch = std::env::consts::ARCH;
        let out_put = Command::new("clang")
            .args(["-O2", "-g", "-target", "bpf"])
            .arg(format!("-I/usr/include/{arch}-linux-gnu"))
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap_or_else(|e| panic!("cannot run `clang` ({e}): run probe-tests/setup"));
        assert!(
            out_put.status.success(),
            "building the socket-LB hook failed: {}",
            String::from_utf8_lossy(&out_put.stderr)
        );
        out
    })
}

/// Where cgroup v2 is mounted (`/sys/fs/cgroup` on a pure v2 host, `/sys/fs/cgroup/unified`
/// on a hybrid one); mounted here for the tests when the host has none.
fn cgroup2() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        if let Some(at) = mounts.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
        }) {
            return at;
        }
        let at = PathBuf::from("/run/natsprobe-tests-cgroup2");
        std::fs::create_dir_all(&at).unwrap();
        run("mount", &["-t", "cgroup2", "none", at.to_str().unwrap()]);
        at
    })
}

/// The BPF filesystem, where the loaded programs and maps are pinned.
fn bpffs() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let at = PathBuf::from("/sys/fs/bpf");
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        let mounted = mounts
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some("/sys/fs/bpf"));
        if !mounted {
            run("mount", &["-t", "bpf", "bpf", "/sys/fs/bpf"]);
        }
        sweep();
        at
    })
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Services whose connections a socket-level load balancer sends each to its backend, for the
/// processes started in its cgroup. One per test: its own cgroup, programs and map.
pub struct SocketLb {
    cgroup: PathBuf,
    pins: PathBuf,
}

impl SocketLb {
    /// One Service, `service` → `backend`.
    pub fn new(service: SocketAddr, backend: SocketAddr) -> SocketLb {
        SocketLb::of(&[(service, backend)])
    }

    /// Each `(service, backend)`.
    pub fn of(services: &[(SocketAddr, SocketAddr)]) -> SocketLb {
        let object = object();
        let name = format!(
            "natsprobe-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let pins = bpffs().join(&name);
        let cgroup = cgroup2().join(&name);
        std::fs::create_dir_all(&pins).unwrap();
        std::fs::create_dir_all(&cgroup).unwrap();
        let lb = SocketLb { cgroup, pins };
        bpftool(&[
            "prog",
            "loadall",
            object.to_str().unwrap(),
            lb.pins.join("progs").to_str().unwrap(),
            "pinmaps",
            lb.pins.join("maps").to_str().unwrap(),
        ]);
        for hook in ["connect4", "connect6", "getpeername4", "getpeername6"] {
            let prog = lb.pins.join("progs").join(format!("svc_{hook}"));
            bpftool(&[
                "cgroup",
                "attach",
                lb.cgroup.to_str().unwrap(),
                hook,
                "pinned",
                prog.to_str().unwrap(),
            ]);
        }
        for &(service, backend) in services {
            lb.set(service, backend);
        }
        lb
    }

    /// `service` now leads to `backend` (for the connections made from now on).
    pub fn set(&self, service: SocketAddr, backend: SocketAddr) {
        assert_eq!(service.is_ipv4(), backend.is_ipv4(), "one family");
        // The key: ip[16] port[4] family[4]; the value: ip[16] port[4].
        let family: u32 = if service.is_ipv4() { 4 } else { 6 };
        let mut key = addr_bytes(service);
        key.extend_from_slice(&family.to_ne_bytes());
        let value = addr_bytes(backend);
        // bpftool takes each byte as a number.
        let mut args: Vec<String> = vec![
            "map".into(),
            "update".into(),
            "pinned".into(),
            self.pins.join("maps/svc_map").to_string_lossy().into(),
            "key".into(),
        ];
        args.extend(key.iter().map(u8::to_string));
        args.push("value".into());
        args.extend(value.iter().map(u8::to_string));
        bpftool(&args.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// The cgroup's process list: a process that writes its PID there (before it creates its
    /// sockets: a socket keeps the cgroup it was made in) is load balanced.
    pub fn procs(&self) -> PathBuf {
        self.cgroup.join("cgroup.procs")
    }
}

/// ip[16] port[4], as the hook's map holds an address and port.
fn addr_bytes(addr: SocketAddr) -> Vec<u8> {
    let mut ip = [0u8; 16];
    match addr {
        SocketAddr::V4(a) => ip[..4].copy_from_slice(&a.ip().octets()),
        SocketAddr::V6(a) => ip.copy_from_slice(&a.ip().octets()),
    }
    let mut bytes = ip.to_vec();
    // `user_port`: the network-order 16 bits in the low half of a u32, in host order.
    bytes.extend_from_slice(&u32::from(addr.port().to_be()).to_ne_bytes());
    bytes
}

/// `program` prefixed to run in the cgroup whose process list is `procs`.
pub fn in_cgroup(procs: &Path, program: &[std::ffi::OsString]) -> Vec<std::ffi::OsString> {
    let mut wrapped: Vec<std::ffi::OsString> = vec![
        "/bin/sh".into(),
        "-c".into(),
        // 125: not an exit code the probe gives, so a failure to join is never a verdict.
        "echo $$ > \"$0\" || exit 125; exec \"$@\"".into(),
        procs.into(),
    ];
    wrapped.extend(program.iter().cloned());
    wrapped
}

impl Drop for SocketLb {
    fn drop(&mut self) {
        remove(&self.cgroup, &self.pins);
    }
}

/// Its processes are gone by now (the test's peers drop first): the cgroup is removed, which
/// detaches the programs, and the pins go with their directory.
fn remove(cgroup: &Path, pins: &Path) {
    for _ in 0..50 {
        match std::fs::remove_dir(cgroup) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(100))
            }
            _ => break,
        }
    }
    let _ = std::fs::remove_dir_all(pins);
}

/// Cgroups and pins left behind by a test run that was killed: `natsprobe-<pid>-<n>` with a
/// dead pid.
fn sweep() {
    for dir in [cgroup2().to_path_buf(), PathBuf::from("/sys/fs/bpf")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix("natsprobe-")
                .and_then(|r| r.split('-').next())
            else {
                continue;
            };
            if let Ok(pid) = pid.parse::<u32>() {
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    remove(
                        &cgroup2().join(&name),
                        &Path::new("/sys/fs/bpf").join(&name),
                    );
                }
            }
        }
    }
}

/// kube-proxy's translation, in the pod's namespace: packets to `service` go to `backend`
/// (iptables `nat` OUTPUT, DNAT), and `service`'s address is routed over `dev` as a ClusterIP
/// is. The socket keeps the Service's tuple.
pub fn dnat(pod: &NetNs, service: SocketAddr, backend: SocketAddr, dev: &str) {
    let (tables, host, to, cidr) = match (service, backend) {
        (SocketAddr::V4(s), SocketAddr::V4(b)) => (
            "iptables",
            s.ip().to_string(),
            format!("{}:{}", b.ip(), b.port()),
            format!("{}/32", s.ip()),
        ),
        (SocketAddr::V6(s), SocketAddr::V6(b)) => (
            "ip6tables",
            s.ip().to_string(),
            format!("[{}]:{}", b.ip(), b.port()),
            format!("{}/128", s.ip()),
        ),
        _ => panic!("a Service and its backend of one family"),
    };
    pod.ip(&["route", "add", &cidr, "dev", dev]);
    pod.exec(
        tables,
        &[
            "-t",
            "nat",
            "-A",
            "OUTPUT",
            "-p",
            "tcp",
            "-d",
            &host,
            "--dport",
            &service.port().to_string(),
            "-j",
            "DNAT",
            "--to-destination",
            &to,
        ],
    );
}

fn bpftool(args: &[&str]) {
    let out = Command::new("bpftool")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `bpftool` ({e}): run probe-tests/setup"));
    assert!(
        out.status.success(),
        "bpftool {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}
