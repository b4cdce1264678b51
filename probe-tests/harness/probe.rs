//! Runs the probe as the kubelet would: the built binary (or the shipped static one when
//! NATSPROBE_BIN is set), fresh environment, exact exit code, everything shown on failure.

use super::NetNs;
use std::ffi::OsString;
use std::fmt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// NATSPROBE_BIN when set; else cargo's build of the binary (tests, benches); else, for
/// examples, which cargo gives no binary path, the static build.
pub fn binary() -> PathBuf {
    match std::env::var_os("NATSPROBE_BIN") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => match option_env!("CARGO_BIN_EXE_natsprobe") {
            Some(path) => PathBuf::from(path),
            None => super::static_binary(),
        },
    }
}

pub struct Probe<'a> {
    args: Vec<OsString>,
    ns: Option<&'a NetNs>,
    env: Vec<(String, String)>,
    uid: Option<u32>,
    binary: PathBuf,
    /// An emulator that runs the binary (qemu-aarch64 for the arm64 build).
    runner: Option<&'static str>,
    /// Where stdout goes instead of this process (a large report): the test process's own
    /// peak RSS is every later child's floor in wait4's figure (the kernel counts the
    /// parent's memory at the fork), so megabytes of output must not pass through it.
    stdout_file: Option<PathBuf>,
    /// Peak RSS from GNU time, which forks the probe from its own small process.
    rss_by_time: bool,
    /// Stop the probe (SIGSTOP) this long after it started, for this long: a node that gives
    /// it no CPU mid-run.
    frozen: Option<(Duration, Duration)>,
    /// Run in this cgroup (its `cgroup.procs`): a socket-level load balancer's.
    in_cgroup: Option<PathBuf>,
    /// A seccomp filter that refuses netlink sockets (EPERM), as some profiles do.
    no_netlink: bool,
    /// Keep the probe's own `--sample-every` and `--subscription-every` defaults. Without,
    /// the server is asked every run (both 0s): the scenarios judge what
    /// the server says now; the defaults' skipping and trusting have their own tests.
    sampling_defaults: bool,
}

/// The calling test's own TMPDIR for the probe: named after the test's thread (libtest names
/// it after the test), made once, readable and writable by the unprivileged users tests run
/// the probe as (each gets a private `natsprobe-<uid>` inside, as in /tmp).
pub fn test_tmpdir() -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let name = std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .replace("::", "-");
    let dir = std::env::temp_dir()
        .join(format!("natsprobe-tests-{}", std::process::id()))
        .join(name);
    if !dir.is_dir() {
        std::fs::create_dir_all(&dir).unwrap();
        for d in [dir.parent().unwrap(), dir.as_path()] {
            let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o1777));
        }
    }
    dir
}

/// What GNU time's figure follows on the probe's stderr.
const RSS_MARK: &str = "natsprobe-tests-maxrss-kib: ";

pub fn probe<'a>(args: &[&str]) -> Probe<'a> {
    Probe {
        args: args.iter().map(OsString::from).collect(),
        ns: None,
        env: Vec::new(),
        uid: None,
        binary: binary(),
        runner: None,
        no_netlink: false,
        stdout_file: None,
        rss_by_time: false,
        sampling_defaults: false,
        frozen: None,
        in_cgroup: None,
    }
}

impl<'a> Probe<'a> {
    pub fn ns(mut self, ns: &'a NetNs) -> Self {
        self.ns = Some(ns);
        self
    }

    /// The probe's own sampling defaults (see `sampling_defaults`).
    pub fn sampling_defaults(mut self) -> Self {
        self.sampling_defaults = true;
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Another copy of the probe (one `natsprobe install` wrote).
    pub fn binary_at(mut self, path: &std::path::Path) -> Self {
        self.binary = path.to_path_buf();
        self
    }

    /// Netlink sockets refused by a seccomp filter, as a restrictive profile does.
    pub fn no_netlink(mut self) -> Self {
        self.no_netlink = true;
        self
    }

    /// The arm64 static binary, run under qemu-user.
    pub fn arm64(mut self) -> Self {
        self.binary = super::static_binary_arm64();
        self.runner = Some("qemu-aarch64");
        self
    }

    /// The run's `max_rss_kib` measured by GNU time (`/usr/bin/time`, probe-tests/setup installs
    /// it), which forks the probe from its own fresh process: wait4's figure for a child of this
    /// test process is never below this process's own peak (the kernel counts the parent's
    /// memory at the fork, or at the exec after a vfork), and parallel tests grow it. For the
    /// tests that bound the probe's memory.
    pub fn rss_by_time(mut self) -> Self {
        self.rss_by_time = true;
        self
    }

    /// Stdout into `path`; the run's `stdout` is then empty.
    pub fn stdout_to(mut self, path: &std::path::Path) -> Self {
        self.stdout_file = Some(path.to_path_buf());
        self
    }

    /// Stops the probe `after` its start, for `span`, then lets it go on.
    pub fn frozen(mut self, after: Duration, span: Duration) -> Self {
        self.frozen = Some((after, span));
        self
    }

    /// Run in a socket-level load balancer's cgroup, as every process of a pod is under one.
    pub fn lb(self, lb: &super::service::SocketLb) -> Self {
        self.in_cgroup(&lb.procs())
    }

    /// Run in the cgroup whose process list is `procs`.
    pub fn in_cgroup(mut self, procs: &std::path::Path) -> Self {
        self.in_cgroup = Some(procs.to_path_buf());
        self
    }

    pub fn uid(mut self, uid: u32) -> Self {
        self.uid = Some(uid);
        self
    }

    pub fn command(&self) -> Command {
        let mut program: Vec<std::ffi::OsString> = match self.runner {
            Some(runner) => vec![runner.into(), self.binary.clone().into()],
            None => vec![self.binary.clone().into()],
        };
        if self.rss_by_time {
            let time = ["/usr/bin/time", "-q", "-f", &format!("\n{RSS_MARK}%M")];
            program.splice(0..0, time.iter().map(std::ffi::OsString::from));
        }
        if let Some(procs) = &self.in_cgroup {
            program = super::service::in_cgroup(procs, &program);
        }
        // Into the namespace by nsenter, which execs the probe, rather than by setns in a
        // forked copy of this (large, multi-threaded) test process: without a pre_exec step
        // std spawns with posix_spawn, and the child's peak RSS (wait4) is then the probe's
        // own, not this process's pages counted before the exec. With a uid to drop, the
        // forked path remains.
        let plain = self.uid.is_none() && !self.no_netlink;
        let mut cmd = match (self.ns, plain) {
            (Some(ns), true) => {
                let mut cmd = Command::new("nsenter");
                cmd.arg(format!("--net=/run/netns/{}", ns.name))
                    .arg("--")
                    .args(&program);
                cmd
            }
            _ => {
                let mut cmd = Command::new(&program[0]);
                cmd.args(&program[1..]);
                if let Some(ns) = self.ns {
                    ns.enter_on_exec(&mut cmd);
                }
                cmd
            }
        };
        // Nothing from the test's own environment may change the probe's behaviour.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy().to_string();
            if key.starts_with("NATSPROBE_") || key.starts_with("NATS_") {
                cmd.env_remove(&key);
            }
        }
        // Each test its own default state dir: samples and kept causes of one
        // test never meet another's that ask the same server about the same consumer.
        cmd.env("TMPDIR", test_tmpdir());
        if !self.sampling_defaults {
            cmd.env("NATSPROBE_SAMPLE_EVERY", "0s")
                .env("NATSPROBE_SUBSCRIPTION_EVERY", "0s");
        }
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::null());
        if self.no_netlink {
            // SAFETY: prctl is async-signal-safe; the filter lives on this closure's stack.
            unsafe {
                cmd.pre_exec(refuse_netlink);
            }
        }
        // std applies Command::uid before pre_exec closures, and setns needs root: so the
        // privileges are dropped in a closure registered after the namespace's.
        if let Some(uid) = self.uid {
            // SAFETY: setgroups/setgid/setuid are async-signal-safe.
            unsafe {
                cmd.pre_exec(move || super::become_user(uid));
            }
        }
        cmd
    }

    pub fn run(self) -> Run {
        let started = Instant::now();
        let out = match &self.stdout_file {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::piped(),
        };
        let mut child = self
            .command()
            .stdout(out)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary.display()));
        let drain = |stream: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut text = Vec::new();
                if let Some(mut s) = stream {
                    let _ = s.read_to_end(&mut text);
                }
                text
            })
        };
        if let Some((after, span)) = self.frozen {
            let pid = child.id() as i32;
            std::thread::spawn(move || {
                std::thread::sleep(after);
                // SAFETY: kill(2) on our own child, not yet reaped (wait4 below).
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                std::thread::sleep(span);
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGCONT) };
            });
        }
        let stdout = drain(child.stdout.take().map(|s| Box::new(s) as _));
        let stderr = drain(child.stderr.take().map(|s| Box::new(s) as _));
        // wait4, for the child's own peak RSS (getrusage would mix parallel tests' children).
        let mut status = 0;
        // SAFETY: rusage is a plain struct of integers, valid all zeroes.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 on our own child, into pointers to our own locals.
        let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
        assert_eq!(pid, child.id() as i32, "wait4");
        std::mem::forget(child); // reaped above
        let elapsed = started.elapsed();
        let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
        let out = std::process::Output {
            status: std::os::unix::process::ExitStatusExt::from_raw(status),
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        };
        debug_assert_eq!(out.status.code(), code);
        let mut stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let mut max_rss_kib = usage.ru_maxrss;
        if self.rss_by_time {
            let at = stderr
                .rfind(&format!("\n{RSS_MARK}"))
                .unwrap_or_else(|| panic!("no figure from /usr/bin/time: {stderr}"));
            max_rss_kib = stderr[at + 1 + RSS_MARK.len()..].trim().parse().unwrap();
            stderr.truncate(at);
        }
        Run {
            args: self
                .args
                .iter()
                .map(|a| a.to_string_lossy().to_string())
                .collect(),
            env: self.env,
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).to_string(),
            stderr,
            elapsed,
            max_rss_kib,
        }
    }
}

/// Installs a seccomp filter: `socket(AF_NETLINK, ...)` fails with EPERM, everything else is
/// allowed (x86-64).
pub fn refuse_netlink() -> std::io::Result<()> {
    const LD_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const ALLOW: u32 = 0x7fff_0000;
    const ERRNO: u32 = 0x0005_0000;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let filter = [
        op(LD_ABS, 0, 0, 4),                    // arch
        op(JEQ, 0, 4, AUDIT_ARCH_X86_64),       // other arch: allow
        op(LD_ABS, 0, 0, 0),                    // syscall number
        op(JEQ, 0, 2, libc::SYS_socket as u32), // not socket(2): allow
        op(LD_ABS, 0, 0, 16),                   // its first argument (low half)
        op(JEQ, 1, 0, libc::AF_NETLINK as u32), // AF_NETLINK: refuse
        op(RET, 0, 0, ALLOW),
        op(RET, 0, 0, ERRNO | libc::EPERM as u32),
    ];
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: plain prctl calls with a filter that outlives them.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &program as *const libc::sock_fprog,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// One finished run of the probe.
pub struct Run {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    /// The run's peak resident set, KiB.
    pub max_rss_kib: i64,
}

impl Run {
    /// Asserts the exit code, showing the whole run when it differs.
    #[track_caller]
    pub fn expect(&self, code: i32) -> &Run {
        assert_eq!(self.code, Some(code), "unexpected exit code\n{self}");
        self
    }

    /// Asserts the first output line (stdout, else stderr) contains every fragment.
    #[track_caller]
    pub fn says(&self, fragments: &[&str]) -> &Run {
        let line = self.line();
        for f in fragments {
            assert!(line.contains(f), "first line lacks `{f}`\n{self}");
        }
        self
    }

    pub fn line(&self) -> &str {
        let text = if self.stdout.trim().is_empty() {
            &self.stderr
        } else {
            &self.stdout
        };
        text.lines().next().unwrap_or_default()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e})\n{self}"))
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  args:   {:?}", self.args)?;
        if !self.env.is_empty() {
            writeln!(f, "  env:    {:?}", self.env)?;
        }
        writeln!(f, "  exit:   {:?} after {:?}", self.code, self.elapsed)?;
        writeln!(f, "  stdout: {}", self.stdout.trim_end())?;
        write!(f, "  stderr: {}", self.stderr.trim_end())
    }
}
