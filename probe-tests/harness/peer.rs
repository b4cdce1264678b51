//! Real nats.go clients: the `natspeer` Go program (probe-tests/peers/natspeer), built once
//! per test run from Debian's packaged nats.go, spawned as the pod's client.

use super::{deps_dir, NetNs};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Builds natspeer (once per test process) and returns its path: in this checkout's own
/// target dir, so checkouts sharing one deps dir never run each other's peer.
pub fn natspeer() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let src = root.join("probe-tests/peers/natspeer");
        let out_dir = root.join("target/natspeer");
        std::fs::create_dir_all(&out_dir).unwrap();
        let out = out_dir.join("natspeer");
        let status = Command::new("go")
            .args(["build", "-o"])
            .arg(&out)
            .arg(".")
            .current_dir(&src)
            .env("GO111MODULE", "off")
            .env("GOPATH", "/usr/share/gocode")
            .env("GOCACHE", deps_dir().join("go-cache"))
            .env("GOFLAGS", "")
            .status()
            .unwrap_or_else(|e| {
                panic!("cannot run `go` ({e}): run probe-tests/setup (golang-go, golang-github-nats-io-go-nats-dev)")
            });
        assert!(status.success(), "building natspeer failed: run probe-tests/setup");
        out
    })
}

/// natspeer under another name (a symlink), so `--process NAME` can tell clients apart.
pub fn natspeer_named(name: &str) -> PathBuf {
    let link = natspeer().with_file_name(name);
    if !link.exists() {
        let _ = symlink("natspeer", &link);
    }
    link
}

/// A nats.js v3 application (probe-tests/peers/nats-js/peer.mjs) in `ns`, run by Node.js
/// beside the nats.js that probe-tests/setup installed (an ES module finds its packages
/// only in a `node_modules` above it, so the script is copied there, once per test process).
pub fn nats_js(ns: Option<&NetNs>, args: &[&str]) -> Peer {
    static SCRIPT: OnceLock<PathBuf> = OnceLock::new();
    let script = SCRIPT.get_or_init(|| {
        let dir = deps_dir().join("nats-js");
        assert!(
            dir.join("node_modules/@nats-io/jetstream").exists(),
            "nats.js is missing from {}: run probe-tests/setup",
            dir.display()
        );
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("probe-tests/peers/nats-js/peer.mjs");
        let tmp = dir.join(format!(".peer-{}.mjs", std::process::id()));
        std::fs::copy(&src, &tmp).unwrap();
        let out = dir.join("peer.mjs");
        std::fs::rename(&tmp, &out).unwrap();
        out
    });
    let mut all = vec![script.to_str().unwrap()];
    all.extend_from_slice(args);
    Peer::spawn_as(ns, Path::new("/usr/bin/node"), &all)
}

/// An async-nats application (examples/pull_replica.rs: `messages()` of a pull consumer) in
/// `ns`; built once per test process (`cargo test` has built it already).
pub fn async_nats(ns: Option<&NetNs>, args: &[&str]) -> Peer {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let exe = BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let status = Command::new(env!("CARGO"))
            .args(["build", "--locked", "--example", "pull_replica"])
            .current_dir(root)
            .status()
            .unwrap_or_else(|e| panic!("cannot run cargo ({e})"));
        assert!(status.success(), "building examples/pull_replica.rs failed");
        root.join("target/debug/examples/pull_replica")
    });
    Peer::spawn_as(ns, exe, args)
}

/// Event lines with their arrival times, and a condvar to wait for the next.
type Lines = (Mutex<Vec<(Instant, String)>>, Condvar);

pub struct Peer {
    child: Child,
    lines: Arc<Lines>,
    cursor: usize,
    pub started: Instant,
    pub args: Vec<String>,
}

impl Peer {
    /// Starts `natspeer <args...>` inside `ns` (or here) and collects its event lines.
    pub fn spawn(ns: Option<&NetNs>, args: &[&str]) -> Peer {
        Peer::spawn_as(ns, natspeer(), args)
    }

    pub fn spawn_as(ns: Option<&NetNs>, exe: &Path, args: &[&str]) -> Peer {
        Peer::spawn_user(ns, exe, args, None)
    }

    /// As `spawn_as`, as user (and group) `uid` when given: a pod's non-root client.
    pub fn spawn_user(ns: Option<&NetNs>, exe: &Path, args: &[&str], uid: Option<u32>) -> Peer {
        Peer::spawn_env(ns, exe, args, uid, &[])
    }

    /// As `spawn_user`, with these environment variables added.
    pub fn spawn_env(
        ns: Option<&NetNs>,
        exe: &Path,
        args: &[&str],
        uid: Option<u32>,
        env: &[(String, String)],
    ) -> Peer {
        let mut cmd = match ns {
            Some(ns) => ns.command(exe),
            None => Command::new(exe),
        };
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        // After the namespace's setns (which needs root): pre_exec closures run in order.
        if let Some(uid) = uid {
            use std::os::unix::process::CommandExt;
            // SAFETY: setgroups/setgid/setuid are async-signal-safe.
            unsafe {
                cmd.pre_exec(move || super::become_user(uid));
            }
        }
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn natspeer: {e}"));
        let started = Instant::now();
        let lines: Arc<Lines> = Arc::default();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    let (store, cv) = &*lines;
                    store.lock().unwrap().push((Instant::now(), line));
                    cv.notify_all();
                }
            });
        }
        Peer {
            child,
            lines,
            cursor: 0,
            started,
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A client that holds a connection, with nats.go's reconnect budget set.
    pub fn conn(ns: Option<&NetNs>, url: &str, max_reconnects: i32, wait: &str) -> Peer {
        let mut peer = Peer::spawn(
            ns,
            &[
                "conn",
                "-url",
                url,
                "-max-reconnects",
                &max_reconnects.to_string(),
                "-reconnect-wait",
                wait,
            ],
        );
        peer.wait_for("connected", Duration::from_secs(10));
        peer
    }

    /// `natspeer <args...>` in `ns`, in the cgroup whose process list is `procs` when given (a
    /// socket-level load balancer's).
    pub fn spawn_in(ns: Option<&NetNs>, procs: Option<&Path>, args: &[&str]) -> Peer {
        let Some(procs) = procs else {
            return Peer::spawn(ns, args);
        };
        let mut program = vec![natspeer().as_os_str().to_os_string()];
        program.extend(args.iter().map(std::ffi::OsString::from));
        let wrapped = super::service::in_cgroup(procs, &program);
        let rest: Vec<&str> = wrapped[1..].iter().map(|s| s.to_str().unwrap()).collect();
        Peer::spawn_as(ns, Path::new(&wrapped[0]), &rest)
    }

    /// `conn` as a pod's client in a socket-level load balancer's cgroup.
    pub fn conn_lb(
        ns: Option<&NetNs>,
        lb: &super::service::SocketLb,
        url: &str,
        max_reconnects: i32,
        wait: &str,
    ) -> Peer {
        let reconnects = max_reconnects.to_string();
        let args = [
            "conn",
            "-url",
            url,
            "-max-reconnects",
            &reconnects,
            "-reconnect-wait",
            wait,
        ];
        let mut peer = Peer::spawn_in(ns, Some(&lb.procs()), &args);
        peer.wait_for("connected", Duration::from_secs(10));
        peer
    }

    /// Waits for the next event line (after the previous match) that starts with `prefix`.
    pub fn wait_for(&mut self, prefix: &str, limit: Duration) -> String {
        let (store, cv) = &*self.lines;
        let deadline = Instant::now() + limit;
        let mut lines = store.lock().unwrap();
        loop {
            if let Some(i) = lines[self.cursor..]
                .iter()
                .position(|(_, l)| l.starts_with(prefix))
            {
                self.cursor += i + 1;
                return lines[self.cursor - 1].1.clone();
            }
            if let Some((_, bad)) = lines.iter().find(|(_, l)| l.starts_with("fatal")) {
                panic!("natspeer {:?} failed: {bad}\n{}", self.args, join(&lines));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "natspeer {:?}: no `{prefix}` within {limit:?}; output:\n{}",
                self.args,
                join(&lines)
            );
            lines = cv
                .wait_timeout(lines, left.min(Duration::from_millis(100)))
                .unwrap()
                .0;
        }
    }

    /// True when some line so far starts with `prefix` (does not move the cursor).
    pub fn saw(&self, prefix: &str) -> bool {
        self.lines
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|(_, l)| l.starts_with(prefix))
    }

    /// When the first line starting with one of `prefixes` arrived at or after `since`.
    pub fn first_after(&self, prefixes: &[&str], since: Instant) -> Option<Instant> {
        let lines = self.lines.0.lock().unwrap();
        lines
            .iter()
            .find(|(t, l)| *t >= since && prefixes.iter().any(|p| l.starts_with(p)))
            .map(|(t, _)| *t)
    }

    pub fn output(&self) -> String {
        join(&self.lines.0.lock().unwrap())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn is_alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Its exit code, once it has exited with one (None: running, or ended by a signal).
    pub fn exit_code(&mut self) -> Option<i32> {
        self.child.try_wait().ok().flatten().and_then(|s| s.code())
    }

    /// Every thread of the process stopped (SIGSTOP taken): state `T` in each
    /// /proc/PID/task/TID/stat.
    pub fn stopped(&self) -> bool {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.child.id())) else {
            return false;
        };
        tasks.flatten().all(|t| {
            std::fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| {
                // The state follows the command's closing parenthesis.
                stat.rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('T'))
            })
        })
    }

    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// `natspeer setup ARGS` (streams, consumers) in `ns`; panics with its output unless it
    /// succeeds.
    pub fn setup(ns: Option<&NetNs>, args: &[&str]) {
        let mut full = vec!["setup"];
        full.extend_from_slice(args);
        let mut peer = Peer::spawn(ns, &full);
        let deadline = Instant::now() + Duration::from_secs(15);
        let status = loop {
            if let Some(status) = peer.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "natspeer {full:?} still running:\n{}",
                peer.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader threads may still be draining the last lines.
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            status.success(),
            "natspeer {full:?} failed:\n{}",
            peer.output()
        );
    }

    /// Waits for the process to exit on its own (setup, publish -count).
    pub fn wait_exit(mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "natspeer {:?} still running:\n{}",
                self.args,
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn join(lines: &[(Instant, String)]) -> String {
    lines
        .iter()
        .map(|(_, l)| l.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
