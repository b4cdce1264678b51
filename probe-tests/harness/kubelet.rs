//! A kubelet for one container with an exec or httpGet livenessProbe, on a scaled clock: it
//! runs the probe every `period` with `timeout` (SIGKILL when it overstays, counted as a failure),
//! counts `failure_threshold` consecutive failures, then kills the container (SIGTERM, grace,
//! SIGKILL) and starts it again under the kubelet's restart back-off, logging events the
//! way `kubectl describe pod` shows them.
//!
//! With a startupProbe, each container started runs it every its own period until it passes
//! once, and only then the livenessProbe (the kubelet's prober holds the other probes until
//! the container has started); `failure_threshold` failures of it in a row restart the
//! container the same way.
//!
//! The back-off is the kubelet's (pkg/kubelet/kuberuntime `doBackOff` with
//! `flowcontrol.Backoff`): the first restart is immediate, the next waits 10 s, then 20 s,
//! doubling to 300 s; a container that ran 10 minutes (2 × the maximum) without dying
//! starts over. A container that exits on its own is restarted the same way.
//!
//! An httpGet probe is made as the kubelet's prober makes it (pkg/probe/http): a new
//! connection each time (keep-alives off), `GET` with `User-Agent: kube-probe/…`, the whole
//! exchange within `timeoutSeconds`; a status from 200 to 399 passes; the event for a failure
//! names only the status code, or the connection's error. A native sidecar (an
//! initContainer with `restartPolicy: Always`) is a second `Kubelet` for its own container:
//! the kubelet probes and restarts each container of a pod on its own.

use super::Peer;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Spec {
    pub period: Duration,
    pub timeout: Duration,
    pub failure_threshold: u32,
    pub grace: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
}

impl Spec {
    /// periodSeconds, timeoutSeconds and failureThreshold as given; the kubelet's own
    /// constants (10 s, 300 s back-off, 30 s grace) at `scale` of real time.
    pub fn scaled(period: Duration, timeout: Duration, failure_threshold: u32, scale: f64) -> Spec {
        Spec {
            period,
            timeout,
            failure_threshold,
            grace: Duration::from_secs(30).mul_f64(scale),
            backoff_initial: Duration::from_secs(10).mul_f64(scale),
            backoff_max: Duration::from_secs(300).mul_f64(scale),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Event {
    pub at: Instant,
    pub kind: &'static str,
    pub reason: &'static str,
    pub message: String,
}

struct Shared {
    started: Instant,
    stop: AtomicBool,
    events: Mutex<Vec<Event>>,
    runs: Mutex<Vec<Peer>>,
    /// Every probe run: when it ended, whether it passed, its first line.
    probed: Mutex<Vec<(Instant, bool, String)>>,
}

impl Shared {
    fn event(&self, kind: &'static str, reason: &'static str, message: String) {
        self.events.lock().unwrap().push(Event {
            at: Instant::now(),
            kind,
            reason,
            message,
        });
    }

    /// Sleeps until `until`, or less when asked to stop. True when asked to stop.
    fn sleep_until(&self, until: Instant) -> bool {
        while Instant::now() < until {
            if self.stop.load(Ordering::SeqCst) {
                return true;
            }
            std::thread::sleep((until - Instant::now()).min(Duration::from_millis(5)));
        }
        self.stop.load(Ordering::SeqCst)
    }
}

pub type ProbeCommand = Box<dyn Fn() -> Command + Send>;
/// An httpGet probe: one request within the timeout; Ok with the body's first line when the
/// status passes, Err with the kubelet's words when not.
pub type HttpProbe = Box<dyn Fn(Duration) -> Result<String, String> + Send>;

/// A probe's action.
enum Action {
    Exec(ProbeCommand),
    Http(HttpProbe),
}

impl Action {
    fn once(&self, timeout: Duration) -> Result<String, String> {
        match self {
            Action::Exec(command) => probe_once(command, timeout),
            Action::Http(get) => get(timeout),
        }
    }
}
pub type Container = Box<dyn FnMut() -> Peer + Send>;

/// A startupProbe: its periodSeconds, failureThreshold and command (its timeout is the
/// liveness probe's).
pub struct Startup {
    pub period: Duration,
    pub failure_threshold: u32,
    pub probe: ProbeCommand,
}

/// A startupProbe with an httpGet action.
pub struct HttpStartup {
    pub period: Duration,
    pub failure_threshold: u32,
    pub probe: HttpProbe,
}

pub struct Kubelet {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Kubelet {
    pub fn start(spec: Spec, probe: ProbeCommand, container: Container) -> Kubelet {
        Kubelet::start_with(spec, None, probe, container)
    }

    /// As `start`, with a startupProbe before the livenessProbe in each container.
    pub fn start_with(
        spec: Spec,
        startup: Option<Startup>,
        probe: ProbeCommand,
        container: Container,
    ) -> Kubelet {
        let startup = startup.map(|s| (s.period, s.failure_threshold, Action::Exec(s.probe)));
        Kubelet::starting(spec, startup, Action::Exec(probe), container)
    }

    /// As `start_with`, with httpGet probes.
    pub fn start_http(
        spec: Spec,
        startup: Option<HttpStartup>,
        probe: HttpProbe,
        container: Container,
    ) -> Kubelet {
        let startup = startup.map(|s| (s.period, s.failure_threshold, Action::Http(s.probe)));
        Kubelet::starting(spec, startup, Action::Http(probe), container)
    }

    fn starting(
        spec: Spec,
        startup: Option<(Duration, u32, Action)>,
        probe: Action,
        mut container: Container,
    ) -> Kubelet {
        let shared = Arc::new(Shared {
            started: Instant::now(),
            stop: AtomicBool::new(false),
            events: Mutex::default(),
            runs: Mutex::default(),
            probed: Mutex::default(),
        });
        // The first container is started before this returns: its run is there to look at.
        start(&shared, &mut container);
        let thread = {
            let (shared, spec) = (Arc::clone(&shared), spec.clone());
            std::thread::spawn(move || run(&shared, &spec, startup, probe, container))
        };
        Kubelet {
            shared,
            thread: Some(thread),
        }
    }

    /// Every probe run so far: when it ended, whether it passed, its first line (a startup
    /// probe's prefixed `startup probe: `).
    pub fn probed(&self) -> Vec<(Instant, bool, String)> {
        self.shared.probed.lock().unwrap().clone()
    }

    /// The first restart for the liveness probe at or after `since`.
    pub fn first_kill_after(&self, since: Instant) -> Option<Instant> {
        self.events()
            .into_iter()
            .find(|e| e.reason == "Killing" && e.at >= since)
            .map(|e| e.at)
    }

    pub fn events(&self) -> Vec<Event> {
        self.shared.events.lock().unwrap().clone()
    }

    /// Restarts (kills after a failed probe) in [from, to).
    pub fn kills_between(&self, from: Instant, to: Instant) -> usize {
        self.events()
            .iter()
            .filter(|e| e.reason == "Killing" && e.at >= from && e.at < to)
            .count()
    }

    /// Looks at every container started so far, oldest first.
    pub fn with_runs<T>(&self, f: impl FnOnce(&[Peer]) -> T) -> T {
        f(&self.shared.runs.lock().unwrap())
    }

    /// The event log, like `kubectl describe pod`, with times relative to the start.
    pub fn log(&self) -> String {
        self.events()
            .iter()
            .map(|e| {
                let at = e.at - self.shared.started;
                format!(
                    "  {:>8.3}s  {:<7}  {:<9}  {}",
                    at.as_secs_f64(),
                    e.kind,
                    e.reason,
                    e.message
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The kubelet's per-container back-off entry.
struct Backoff {
    entry: Option<(Duration, Instant)>,
    initial: Duration,
    max: Duration,
}

impl Backoff {
    /// How long to wait before starting again after a death at `died`.
    fn delay(&mut self, died: Instant) -> Duration {
        match self.entry {
            Some((current, last)) if died.saturating_duration_since(last) <= self.max * 2 => {
                self.entry = Some(((current * 2).min(self.max), died));
                current
            }
            _ => {
                self.entry = Some((self.initial, died));
                Duration::ZERO
            }
        }
    }
}

fn run(
    shared: &Shared,
    spec: &Spec,
    startup: Option<(Duration, u32, Action)>,
    probe: Action,
    mut container: Container,
) {
    let mut backoff = Backoff {
        entry: None,
        initial: spec.backoff_initial,
        max: spec.backoff_max,
    };
    let mut failures = 0;
    // Until the container's startupProbe passes once, it runs instead of the liveness probe.
    let mut starting = startup.is_some();
    // The probe that runs now: its name in events, command, period and failureThreshold.
    let current = |starting: bool| match (&startup, starting) {
        (Some((period, threshold, action)), true) => ("Startup", action, *period, *threshold),
        _ => ("Liveness", &probe, spec.period, spec.failure_threshold),
    };
    let mut next_probe = Instant::now() + current(starting).2;
    loop {
        if shared.sleep_until(next_probe) {
            return;
        }
        let died_on_its_own = {
            let mut runs = shared.runs.lock().unwrap();
            !runs.last_mut().unwrap().is_alive()
        };
        let (which, command, period, threshold) = current(starting);
        let restart = if died_on_its_own {
            shared.event("Warning", "BackOff", "container exited; restarting".into());
            true
        } else {
            next_probe = (next_probe + period).max(Instant::now());
            let ran = command.once(spec.timeout);
            let line = ran.clone().unwrap_or_else(|e| e);
            shared.probed.lock().unwrap().push((
                Instant::now(),
                ran.is_ok(),
                match starting {
                    true => format!("startup probe: {line}"),
                    false => line,
                },
            ));
            match ran {
                Ok(_) => {
                    failures = 0;
                    if starting {
                        starting = false;
                        next_probe = Instant::now() + spec.period;
                    }
                    false
                }
                Err(output) => {
                    failures += 1;
                    shared.event(
                        "Warning",
                        "Unhealthy",
                        format!("{which} probe failed: {output}"),
                    );
                    failures >= threshold
                }
            }
        };
        if !restart {
            continue;
        }
        if !died_on_its_own {
            shared.event(
                "Normal",
                "Killing",
                format!(
                    "Container client failed {} probe, will be restarted",
                    which.to_lowercase()
                ),
            );
            kill(shared, spec.grace);
        }
        let died = Instant::now();
        let delay = backoff.delay(died);
        if !delay.is_zero() {
            shared.event(
                "Warning",
                "BackOff",
                format!("Back-off {delay:?} restarting failed container client"),
            );
            if shared.sleep_until(died + delay) {
                return;
            }
        }
        start(shared, &mut container);
        failures = 0;
        starting = startup.is_some();
        next_probe = Instant::now() + current(starting).2;
    }
}

fn start(shared: &Shared, container: &mut Container) {
    let peer = container();
    shared.event(
        "Normal",
        "Started",
        format!("Started container client (pid {})", peer.pid()),
    );
    shared.runs.lock().unwrap().push(peer);
}

fn kill(shared: &Shared, grace: Duration) {
    let mut runs = shared.runs.lock().unwrap();
    let peer = runs.last_mut().unwrap();
    peer.signal(libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while peer.is_alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    if peer.is_alive() {
        peer.signal(libc::SIGKILL);
        while peer.is_alive() {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// One exec probe: success, or the output the kubelet would put in the event.
/// One run of the probe: Ok with its first line when it passed, Err with it when not.
fn probe_once(probe: &ProbeCommand, timeout: Duration) -> Result<String, String> {
    let mut cmd = probe();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run the probe: {e}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            let first = text.lines().next().unwrap_or_default().to_string();
            return if status.success() {
                Ok(first)
            } else {
                Err(first)
            };
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("command timed out after {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// An httpGet probe of `http://127.0.0.1:PORT/PATH` in `ns`, the pod's network namespace (the
/// kubelet dials the pod's address from the node; inside the namespace, loopback is the same
/// listener for a server on every address).
pub fn http_get(ns: &super::NetNs, port: u16, path: &str) -> HttpProbe {
    let file = ns.file();
    let path = path.to_string();
    Box::new(move |timeout| {
        let (file, path) = (Arc::clone(&file), path.clone());
        std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            // SAFETY: setns on this thread only, to a namespace file held open.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            get(port, &path, timeout).map(|(_, body)| body)
        })
        .join()
        .unwrap()
    })
}

/// One GET as the kubelet's prober makes it: Ok((status, first line of the body)) for a status
/// from 200 to 399; Err with the event's words otherwise.
pub fn get(port: u16, path: &str, timeout: Duration) -> Result<(u16, String), String> {
    use std::io::{Read, Write};
    let url = format!("http://127.0.0.1:{port}{path}");
    let deadline = Instant::now() + timeout;
    let exceeded = || {
        format!("Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)")
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("Get \"{url}\": dial tcp {addr}: connect: {e}"))?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: kube-probe/1.31\r\nAccept: */*\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("Get \"{url}\": {e}"))?;
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(exceeded());
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => response.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(exceeded())
            }
            Err(e) => return Err(format!("Get \"{url}\": read: {e}")),
        }
    }
    let text = String::from_utf8_lossy(&response);
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("Get \"{url}\": malformed HTTP response"))?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let first = body.lines().next().unwrap_or_default().to_string();
    if (200..400).contains(&status) {
        Ok((status, first))
    } else {
        Err(format!("HTTP probe failed with statuscode: {status}"))
    }
}

#[cfg(test)]
#[test]
fn backoff_follows_the_kubelet() {
    let (initial, max) = (Duration::from_secs(10), Duration::from_secs(300));
    let mut b = Backoff {
        entry: None,
        initial,
        max,
    };
    let t0 = Instant::now();
    let deaths: Vec<Duration> = [0u64, 60, 120, 200, 400, 700, 1400, 1460, 1520]
        .iter()
        .map(|&s| b.delay(t0 + Duration::from_secs(s)))
        .collect();
    let secs: Vec<u64> = deaths.iter().map(Duration::as_secs).collect();
    assert_eq!(
        secs,
        [0, 10, 20, 40, 80, 160, 0, 10, 20],
        "reset after 10 min without a death"
    );
    let mut capped = Backoff {
        entry: None,
        initial,
        max,
    };
    let secs: Vec<u64> = (0..9)
        .map(|i| capped.delay(t0 + Duration::from_secs(i * 30)).as_secs())
        .collect();
    assert_eq!(secs, [0, 10, 20, 40, 80, 160, 300, 300, 300]);
}
