//! A kubelet for one container with an exec or httpGet livenessProbe, on a scaled clock, as
//! the real one does it (each point below names the kubelet source it follows):
//!
//! - **Probes** (pkg/kubelet/prober/worker.go `run`, `doProbe`): each probe's worker ticks
//!   every `periodSeconds` from when the pod was added, not from each container's start, so a
//!   container's first probe comes 0 to 1 period after it started. Each probe kind runs with
//!   its own `timeoutSeconds`; a run that overstays it is killed and is a failure;
//!   `failureThreshold` failures in a row kill the container. A probe the kubelet cannot run
//!   at all (the binary missing: the runtime's exec fails, `probe.Unknown` with an error; an
//!   httpGet whose body cannot be read) is an error: prober.go `runProbeWithRetries` runs it
//!   again at once, up to 3 runs in the tick, and where all 3 errored, prober.go `probe` and
//!   worker.go's "Prober error, throw away the result" discard it: it is an event, and it
//!   neither counts as a failure nor resets the count.
//! - **The kill** (pkg/kubelet/kuberuntime/kuberuntime_container.go `killContainer`): SIGTERM,
//!   the grace period, SIGKILL; a grace period under 2 s is raised to 2 s
//!   (`minimumGracePeriodInSeconds`).
//! - **The restart back-off** (kuberuntime_manager.go `doBackOff`, client-go
//!   `flowcontrol.Backoff`, pkg/kubelet/kubelet.go `NewMainKubelet`): keyed on the finish time
//!   of the container's latest *exited* instance. A liveness kill and the start after it are one
//!   sync, whose status was read before the kill: its back-off looks at the instance before,
//!   so the first restart is immediate and sets up no back-off, and later ones are immediate
//!   while the instance before ended longer ago than the current back-off (10 s, doubling to
//!   300 s, forgotten 600 s after it was last set). A container that exits on its own is seen
//!   at the next relist (pkg/kubelet/pleg, every second) and keyed on its own exit.
//! - **A start the back-off blocks** (pkg/kubelet/pod_workers.go `completeWork`, Kubernetes
//!   1.35+): the pod is synced again when the back-off ends, at most 60 s later
//!   (`resyncInterval`), jittered by up to half (`workerBackOffPeriodJitterFactor`); the
//!   kubelet before 1.35 retried every 10 to 15 s whatever the back-off.
//!
//! With a startupProbe, each container started runs it until it passes once, and only then the
//! livenessProbe (the kubelet's prober holds the other probes until the container has
//! started); `failure_threshold` failures of it in a row restart the container the same way.
//! Events are logged the way `kubectl describe pod` shows them.
//!
//! An httpGet probe is made as the kubelet's prober makes it (pkg/probe/http): a new
//! connection each time (keep-alives off), `GET` with `User-Agent: kube-probe/…`, the whole
//! exchange within `timeoutSeconds`; a status from 200 to 399 passes; the event for a failure
//! names only the status code, or the connection's error. A native sidecar (an
//! initContainer with `restartPolicy: Always`) is a second `Kubelet` for its own container:
//! the kubelet probes and restarts each container of a pod on its own, except where a
//! container's `restartPolicyRules` restart them all in place (`InPlacePod`, KEP-5532).

use super::Peer;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Spec {
    pub period: Duration,
    pub timeout: Duration,
    pub failure_threshold: u32,
    /// terminationGracePeriodSeconds.
    pub grace: Duration,
    /// `minimumGracePeriodInSeconds`, the least grace a kill gives.
    pub grace_floor: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// The pod worker's `resyncInterval`: the longest wait for a start the back-off blocked.
    pub resync: Duration,
    /// The PLEG's relist period: how soon a container's own exit is seen.
    pub relist: Duration,
    /// The pod's containers restart in place together (`RestartAllContainers`).
    pub in_place: Option<InPlace>,
}

/// A pod whose containers are restarted in place together (KEP-5532: `RestartAllContainers`
/// in a container's `restartPolicyRules`), its containers' kubelets sharing one pod worker:
/// their syncs (a kill, a start) come one at a time, as the kubelet's pod worker syncs a pod
/// (pkg/kubelet/pod_workers.go). The sync that sees a container exit with a code its rules
/// name (kubecontainer `ShouldAllContainersRestart`, kuberuntime `computePodActions` with
/// `restartAllContainers`, `SyncPod`):
///
/// 1. sets the pod condition `AllContainersRestarting`;
/// 2. kills every running container at once, with no preStop hook and the grace period
///    overridden to 0, which `killContainer` raises to `minimumGracePeriodInSeconds`: SIGTERM,
///    then SIGKILL after 2 s;
/// 3. removes every container from the runtime (the sandbox, its network namespace and the
///    volumes kept; the restart counts go on), and the condition is cleared;
/// 4. then starts the pod as a new one starts: the sidecars (initContainers with
///    `restartPolicy: Always`) in their order, each once the one before has started (running,
///    and its startupProbe passed if it has one: seen at the next sync, at a relist or when
///    that probe's result comes), then the app containers together.
///
/// A container removed is not probed (no probe runs while a container is not running), and a
/// probe's result for the instance killed is thrown away. The start after the removal is held
/// by no back-off: `doBackOff` keys on an exited instance of the container in the runtime, and
/// the restart removed them.
#[derive(Default)]
pub struct InPlacePod {
    worker: Mutex<PodWorker>,
}

/// What the pod worker of a pod restarted in place knows.
#[derive(Default)]
struct PodWorker {
    restarts: u64,
    /// The pod's containers, in the pod spec's order (the order their kubelets joined).
    members: Vec<Member>,
    /// The pod condition `AllContainersRestarting`: when it was set, and to what.
    condition: Vec<(Instant, bool)>,
}

/// One container of a pod restarted in place.
struct Member {
    shared: Arc<Shared>,
    sidecar: bool,
    /// It has a startupProbe: as a sidecar, it has started only once that passed.
    startup_probe: bool,
    grace_floor: Duration,
    /// Removed by a restart in place and not started again yet.
    removed: bool,
    /// The kubelet's `started`: running, and its startupProbe passed if it has one.
    started: bool,
}

/// A container's part in a pod restarted in place.
#[derive(Clone)]
pub struct InPlace {
    pub pod: Arc<InPlacePod>,
    /// The exit codes of this container that restart every container of the pod.
    pub on_exit: Vec<i32>,
    /// A native sidecar (an initContainer with `restartPolicy: Always`), started before the
    /// app containers; else an app container.
    pub sidecar: bool,
}

impl std::fmt::Debug for InPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InPlace")
            .field("on_exit", &self.on_exit)
            .field("sidecar", &self.sidecar)
            .finish_non_exhaustive()
    }
}

impl InPlacePod {
    /// The restarts in place so far.
    pub fn restarts(&self) -> u64 {
        self.lock().restarts
    }

    /// The pod condition `AllContainersRestarting` as it was set: when, and to what.
    pub fn condition(&self) -> Vec<(Instant, bool)> {
        self.lock().condition.clone()
    }

    fn lock(&self) -> MutexGuard<'_, PodWorker> {
        self.worker.lock().unwrap()
    }

    /// A container's kubelet joins the pod, its container started: its index in the pod.
    fn join(&self, shared: Arc<Shared>, part: &InPlace, startup_probe: bool, spec: &Spec) -> usize {
        let mut w = self.lock();
        w.members.push(Member {
            shared,
            sidecar: part.sidecar,
            startup_probe,
            grace_floor: spec.grace_floor,
            removed: false,
            started: !startup_probe,
        });
        w.members.len() - 1
    }
}

impl PodWorker {
    /// The sync that saw member `by` exit with `code`, a code its rules name: every container
    /// killed at once and removed, then the first to start started.
    fn restart_all(&mut self, by: usize, code: i32) {
        self.restarts += 1;
        self.condition.push((Instant::now(), true));
        self.members[by].shared.event(
            "Normal",
            "RestartAllContainers",
            format!("container exited {code} with restart policy rule: the pod's containers restart in place (AllContainersRestarting)"),
        );
        std::thread::scope(|s| {
            for m in &self.members {
                s.spawn(move || {
                    let running = m.shared.runs.lock().unwrap().last_mut().is_some_and(|r| r.is_alive());
                    if running {
                        m.shared.event(
                            "Normal",
                            "Killing",
                            "Container client: the pod's containers restart in place (restartPolicyRules: RestartAllContainers)".into(),
                        );
                        kill(&m.shared, m.grace_floor);
                    }
                });
            }
        });
        for m in &mut self.members {
            m.removed = true;
            m.started = false;
        }
        self.condition.push((Instant::now(), false));
        self.start_due();
    }

    /// The startup phase, at one sync: the first sidecar removed is started once every sidecar
    /// before it has started (the next one waits for a sync that sees this one started); with
    /// every sidecar started, the app containers removed are started together.
    fn start_due(&mut self) {
        let live = |m: &Member| !m.shared.stop.load(Ordering::SeqCst);
        for m in self.members.iter_mut().filter(|m| m.sidecar) {
            if m.removed && live(m) {
                start(&m.shared);
                m.removed = false;
                m.started = !m.startup_probe;
                return;
            }
            if !m.started {
                return;
            }
        }
        for m in self.members.iter_mut().filter(|m| !m.sidecar && m.removed) {
            if live(m) {
                start(&m.shared);
                m.removed = false;
            }
        }
    }
}

impl Spec {
    /// periodSeconds, timeoutSeconds and failureThreshold as given; the kubelet's own
    /// constants (10 s and 300 s back-off, 30 s grace and its 2 s floor, 60 s resync, 1 s
    /// relist) at `scale` of real time.
    pub fn scaled(period: Duration, timeout: Duration, failure_threshold: u32, scale: f64) -> Spec {
        let secs = |s: u64| Duration::from_secs(s).mul_f64(scale);
        Spec {
            period,
            timeout,
            failure_threshold,
            grace: secs(30),
            grace_floor: secs(2),
            backoff_initial: secs(10),
            backoff_max: secs(300),
            resync: secs(60),
            relist: secs(1),
            in_place: None,
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
    /// Starts the container: by its kubelet's loop, or by the pod's sync in a restart in place.
    container: Mutex<Container>,
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

    /// The containers started so far: this count names the current instance.
    fn instances(&self) -> usize {
        self.runs.lock().unwrap().len()
    }
}

pub type ProbeCommand = Box<dyn Fn() -> Command + Send>;
/// An httpGet probe: one request within the timeout, as `get` makes it.
pub type HttpProbe = Box<dyn Fn(Duration) -> Probed + Send>;

/// One probe's result as the kubelet's prober takes it, with its first line or the event's
/// words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probed {
    Passed(String),
    Failed(String),
    /// The probe could not be run (`probe.Unknown` with an error, or a body that could not be
    /// read): discarded, never counted.
    Errored(String),
}

/// A probe's action.
enum Action {
    Exec(ProbeCommand),
    Http(HttpProbe),
}

/// prober.go `maxProbeRetries`: the runs of an errored probe in one tick.
const PROBE_RUNS: u32 = 3;

impl Action {
    fn once(&self, timeout: Duration) -> Probed {
        match self {
            Action::Exec(command) => probe_once(command, timeout),
            Action::Http(get) => get(timeout),
        }
    }

    /// One tick's probe (prober.go `runProbeWithRetries`): an errored run is run again at
    /// once, up to `PROBE_RUNS` runs; the first that did not error is the result.
    fn tick(&self, timeout: Duration) -> Probed {
        let mut ran = self.once(timeout);
        for _ in 1..PROBE_RUNS {
            if !matches!(ran, Probed::Errored(_)) {
                break;
            }
            ran = self.once(timeout);
        }
        ran
    }
}
pub type Container = Box<dyn FnMut() -> Peer + Send>;

/// A startupProbe: its periodSeconds, timeoutSeconds, failureThreshold and command.
pub struct Startup {
    pub period: Duration,
    pub timeout: Duration,
    pub failure_threshold: u32,
    pub probe: ProbeCommand,
}

/// A startupProbe with an httpGet action.
pub struct HttpStartup {
    pub period: Duration,
    pub timeout: Duration,
    pub failure_threshold: u32,
    pub probe: HttpProbe,
}

/// A probe as the loop runs it: its name in events, action, period, timeout and
/// failureThreshold.
struct Probe {
    name: &'static str,
    action: Action,
    period: Duration,
    timeout: Duration,
    threshold: u32,
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
        let startup = startup.map(|s| Probe {
            name: "Startup",
            action: Action::Exec(s.probe),
            period: s.period,
            timeout: s.timeout,
            threshold: s.failure_threshold,
        });
        Kubelet::starting(spec, startup, Action::Exec(probe), container)
    }

    /// As `start_with`, with httpGet probes.
    pub fn start_http(
        spec: Spec,
        startup: Option<HttpStartup>,
        probe: HttpProbe,
        container: Container,
    ) -> Kubelet {
        let startup = startup.map(|s| Probe {
            name: "Startup",
            action: Action::Http(s.probe),
            period: s.period,
            timeout: s.timeout,
            threshold: s.failure_threshold,
        });
        Kubelet::starting(spec, startup, Action::Http(probe), container)
    }

    fn starting(
        spec: Spec,
        startup: Option<Probe>,
        probe: Action,
        container: Container,
    ) -> Kubelet {
        let shared = Arc::new(Shared {
            started: Instant::now(),
            stop: AtomicBool::new(false),
            events: Mutex::default(),
            runs: Mutex::default(),
            container: Mutex::new(container),
            probed: Mutex::default(),
        });
        // The first container is started before this returns: its run is there to look at.
        start(&shared);
        let member = spec
            .in_place
            .as_ref()
            .map(|p| p.pod.join(Arc::clone(&shared), p, startup.is_some(), &spec));
        let liveness = Probe {
            name: "Liveness",
            action: probe,
            period: spec.period,
            timeout: spec.timeout,
            threshold: spec.failure_threshold,
        };
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || run(&shared, &spec, startup, liveness, member))
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

/// The kubelet's restart back-off for one container (`doBackOff` over
/// `flowcontrol.Backoff`, with the kubelet's own expiry).
struct Backoff {
    /// The current back-off and when `Next` last set it.
    entry: Option<(Duration, Instant)>,
    initial: Duration,
    max: Duration,
}

impl Backoff {
    fn new(spec: &Spec) -> Backoff {
        Backoff {
            entry: None,
            initial: spec.backoff_initial,
            max: spec.backoff_max,
        }
    }

    /// `doBackOff` at `now`, with `exited` the finish time of the container's latest exited
    /// instance (None when none has exited: no back-off, and `Next` not called): Ok to start
    /// now, the back-off moved on (`Next`); or Err with when the back-off ends
    /// (`IsInBackOffSince`). An entry is forgotten at an exit more than 600 s (twice the
    /// maximum) after it was last set (`HasExpiredFunc`).
    fn start(&mut self, exited: Option<Instant>, now: Instant) -> Result<(), Instant> {
        let Some(ts) = exited else {
            return Ok(());
        };
        let live = self
            .entry
            .filter(|(_, set)| ts.saturating_duration_since(*set) <= self.max * 2);
        if let Some((backoff, _)) = live {
            if now.saturating_duration_since(ts) < backoff {
                return Err(ts + backoff);
            }
        }
        let backoff = live.map_or(self.initial, |(b, _)| (b * 2).min(self.max));
        self.entry = Some((backoff, now));
        Ok(())
    }
}

/// How long the pod worker waits to sync a pod again after the back-off blocked a start, at
/// `now`, for a back-off that ends at `until`; `jitter` in [0, 1): the time left, at most
/// `resync`, times 1 to 1.5 (pod_workers.go `completeWork`, `wait.Jitter` with
/// `workerBackOffPeriodJitterFactor` 0.5).
fn requeue_after(until: Instant, now: Instant, resync: Duration, jitter: f64) -> Duration {
    until
        .saturating_duration_since(now)
        .min(resync)
        .mul_f64(1.0 + 0.5 * jitter)
}

/// The first tick of a probe worker that started at `epoch` and ticks every `period`,
/// strictly after `t`: a container started at `t` is first probed 0 to 1 period later.
fn tick_after(epoch: Instant, period: Duration, t: Instant) -> Instant {
    let ticks = t.saturating_duration_since(epoch).as_nanos() / period.as_nanos().max(1);
    epoch + period * (ticks as u32 + 1)
}

/// A number in [0, 1) for the pod worker's jitter (xorshift, seeded by the clock).
fn jitter(state: &mut u64) -> f64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 11) as f64 / (1u64 << 53) as f64
}

/// One container's kubelet: its probes, its own restarts, and its part in its pod's restarts
/// in place (`member`: its index in the pod).
fn run(
    shared: &Shared,
    spec: &Spec,
    startup: Option<Probe>,
    liveness: Probe,
    member: Option<usize>,
) {
    let in_place = spec.in_place.as_ref().zip(member);
    let mut backoff = Backoff::new(spec);
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 | 1);
    // The probe workers tick from when the pod was added.
    let epoch = shared.started;
    // The finish time of the container's latest exited instance, as the runtime reports it.
    let mut exited: Option<Instant> = None;
    let mut failures = 0;
    // Until the container's startupProbe passes once, it runs instead of the liveness probe.
    let mut starting = startup.is_some();
    let current = |starting: bool| match (&startup, starting) {
        (Some(s), true) => s,
        _ => &liveness,
    };
    // None while the container runs; else when the pod worker syncs again to start it.
    let mut waiting: Option<Instant> = None;
    // The instance this loop probes and restarts (the containers started so far): one the
    // pod's sync started in a restart in place is a new container to this loop.
    let mut instance = shared.instances();
    let mut next_probe = tick_after(epoch, current(starting).period, Instant::now());
    let mut next_relist = Instant::now() + spec.relist;
    loop {
        let wake = waiting.unwrap_or(next_probe.min(next_relist));
        if shared.sleep_until(wake) {
            return;
        }
        let now = Instant::now();
        if let Some((p, i)) = in_place {
            if shared.instances() != instance {
                // Started again by the pod's sync: a new container, nothing exited before it
                // in the runtime (the restart removed them).
                instance = shared.instances();
                (failures, starting, exited, waiting) = (0, startup.is_some(), None, None);
                next_probe = tick_after(epoch, current(starting).period, now);
                next_relist = now + spec.relist;
                continue;
            }
            if p.pod.lock().members[i].removed {
                // Removed by a restart in place: no probe; the pod's sync at a relist starts
                // it in its turn.
                waiting = None;
                if now >= next_relist {
                    p.pod.lock().start_due();
                    next_relist = now + spec.relist;
                }
                next_probe = next_probe.max(next_relist);
                continue;
            }
        }
        // The sync: start the container unless the back-off holds it.
        let mut sync = |latest: Option<Instant>, waiting: &mut Option<Instant>| match backoff
            .start(latest, Instant::now())
        {
            Ok(()) => {
                start(shared);
                *waiting = None;
                true
            }
            Err(until) => {
                let now = Instant::now();
                shared.event(
                    "Warning",
                    "BackOff",
                    format!(
                        "Back-off {:?} restarting failed container client",
                        until.saturating_duration_since(now)
                    ),
                );
                *waiting = Some(now + requeue_after(until, now, spec.resync, jitter(&mut seed)));
                false
            }
        };
        let exit_code = || {
            let mut runs = shared.runs.lock().unwrap();
            let run = runs.last_mut().unwrap();
            (!run.is_alive()).then(|| run.exit_code())
        };
        let started = if waiting.is_some() {
            let Some(_pod) = sync_lock(in_place, shared, instance) else {
                continue;
            };
            sync(exited, &mut waiting)
        } else if let Some(code) = (now >= next_relist).then(exit_code).flatten() {
            // The relist sees the container exited on its own, and the sync keys on that exit.
            let Some(mut pod) = sync_lock(in_place, shared, instance) else {
                continue;
            };
            let rule = in_place.filter(|(p, _)| code.is_some_and(|c| p.on_exit.contains(&c)));
            if let (Some(w), Some((_, i))) = (pod.as_mut(), rule) {
                w.restart_all(i, code.unwrap_or_default());
                continue;
            }
            shared.event("Warning", "BackOff", "container exited; restarting".into());
            exited = Some(now);
            sync(exited, &mut waiting)
        } else if now < next_probe {
            next_relist = now + spec.relist;
            continue;
        } else {
            let probe = current(starting);
            next_probe = tick_after(epoch, probe.period, Instant::now());
            let ran = probe.action.tick(probe.timeout);
            let removed = in_place.is_some_and(|(p, i)| p.pod.lock().members[i].removed);
            if removed || shared.instances() != instance {
                // The container it probed was killed by a restart in place meanwhile: its
                // result is thrown away.
                continue;
            }
            let (passed, line) = match &ran {
                Probed::Passed(l) => (true, l.clone()),
                Probed::Failed(l) | Probed::Errored(l) => (false, l.clone()),
            };
            shared.probed.lock().unwrap().push((
                Instant::now(),
                passed,
                match starting {
                    true => format!("startup probe: {line}"),
                    false => line,
                },
            ));
            match ran {
                Probed::Passed(_) => {
                    failures = 0;
                    if starting {
                        starting = false;
                        next_probe = tick_after(epoch, spec.period, Instant::now());
                        // The probe's result syncs the pod at once: a sidecar started lets the
                        // next container of a restart in place start.
                        if let Some((p, i)) = in_place {
                            let mut w = p.pod.lock();
                            w.members[i].started = true;
                            w.start_due();
                        }
                    }
                    continue;
                }
                Probed::Errored(output) => {
                    shared.event(
                        "Warning",
                        "Unhealthy",
                        format!(
                            "{} probe errored and resulted in unknown state: {output}",
                            probe.name
                        ),
                    );
                    continue;
                }
                Probed::Failed(output) => {
                    failures += 1;
                    shared.event(
                        "Warning",
                        "Unhealthy",
                        format!("{} probe failed: {output}", probe.name),
                    );
                    if failures < probe.threshold {
                        continue;
                    }
                }
            }
            let Some(_pod) = sync_lock(in_place, shared, instance) else {
                continue;
            };
            shared.event(
                "Normal",
                "Killing",
                format!(
                    "Container client failed {} probe, will be restarted",
                    probe.name.to_lowercase()
                ),
            );
            // One sync kills and starts, on the status read before the kill: its back-off
            // keys on the instance that exited before this one.
            let before = exited;
            kill(shared, spec.grace.max(spec.grace_floor));
            exited = Some(Instant::now());
            sync(before, &mut waiting)
        };
        if started {
            if let Some((p, i)) = in_place {
                p.pod.lock().members[i].started = startup.is_none();
            }
            instance = shared.instances();
            failures = 0;
            starting = startup.is_some();
            next_probe = tick_after(epoch, current(starting).period, Instant::now());
            next_relist = Instant::now() + spec.relist;
        }
    }
}

/// The pod worker's lock for a sync of a container (`instance`, its loop's), where its pod
/// restarts in place (Some(None) where it does not): None when that instance is no longer
/// the pod's, removed by a restart in place or followed by the next.
fn sync_lock<'a>(
    in_place: Option<(&'a InPlace, usize)>,
    shared: &Shared,
    instance: usize,
) -> Option<Option<MutexGuard<'a, PodWorker>>> {
    let Some((p, i)) = in_place else {
        return Some(None);
    };
    let w = p.pod.lock();
    let ours = !w.members[i].removed && shared.instances() == instance;
    ours.then_some(Some(w))
}

fn start(shared: &Shared) {
    let peer = (shared.container.lock().unwrap())();
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

/// One run of an exec probe: passed or failed with its first line, failed when it overstays
/// the timeout, or an error when it cannot start (pkg/probe/exec: the runtime's exec fails,
/// `probe.Unknown` with an error).
fn probe_once(probe: &ProbeCommand, timeout: Duration) -> Probed {
    let mut cmd = probe();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            return Probed::Errored(format!(
                "rpc error: code = Unknown desc = failed to exec in container: {e}"
            ))
        }
    };
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            let first = text.lines().next().unwrap_or_default().to_string();
            return if status.success() {
                Probed::Passed(first)
            } else {
                Probed::Failed(first)
            };
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Probed::Failed(format!("command timed out after {timeout:?}"));
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
            get(port, &path, timeout)
        })
        .join()
        .unwrap()
    })
}

/// One GET as the kubelet's prober makes it (pkg/probe/http `DoHTTPProbe`): passed with the
/// body's first line for a status from 200 to 399; failed, with the event's words, for
/// another status or when the connection, the request or the headers fail or time out; an
/// error (discarded) when the headers came and the body could not be read.
pub fn get(port: u16, path: &str, timeout: Duration) -> Probed {
    use std::io::{Read, Write};
    let url = format!("http://127.0.0.1:{port}{path}");
    let deadline = Instant::now() + timeout;
    let exceeded = || {
        format!("Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)")
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = match std::net::TcpStream::connect_timeout(&addr, timeout) {
        Ok(s) => s,
        Err(e) => return Probed::Failed(format!("Get \"{url}\": dial tcp {addr}: connect: {e}")),
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: kube-probe/1.31\r\nAccept: */*\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n"
    );
    if let Err(e) = stream.write_all(request.as_bytes()) {
        return Probed::Failed(format!("Get \"{url}\": {e}"));
    }
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    let headers_read = |r: &[u8]| r.windows(4).any(|w| w == b"\r\n\r\n");
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let failed = if left.is_zero() {
            Some(exceeded())
        } else {
            stream.set_read_timeout(Some(left)).unwrap();
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    response.extend_from_slice(&buf[..n]);
                    None
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    Some(exceeded())
                }
                Err(e) => Some(format!("Get \"{url}\": read: {e}")),
            }
        };
        if let Some(words) = failed {
            return match headers_read(&response) {
                // The body could not be read: an error, which the prober discards.
                true => Probed::Errored(format!("{words} (reading the body)")),
                false => Probed::Failed(words),
            };
        }
    }
    let text = String::from_utf8_lossy(&response);
    let Some(status) = text.split(' ').nth(1).and_then(|s| s.parse::<u16>().ok()) else {
        return Probed::Failed(format!("Get \"{url}\": malformed HTTP response"));
    };
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let first = body.lines().next().unwrap_or_default().to_string();
    if (200..400).contains(&status) {
        Probed::Passed(first)
    } else {
        Probed::Failed(format!("HTTP probe failed with statuscode: {status}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn spec() -> Spec {
        Spec::scaled(Duration::from_secs(10), Duration::from_secs(1), 3, 1.0)
    }

    /// `doBackOff`: a liveness kill's sync keys on the instance that exited before, so the
    /// first restart is immediate and sets up nothing, and later ones are immediate while that
    /// instance ended longer ago than the back-off; a start the back-off holds waits until
    /// the finish time it keys on plus the back-off.
    #[test]
    fn the_back_off_keys_on_the_latest_exited_instance() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut b = Backoff::new(&spec());
        // Kills at 30, 60, 90 s (each instance lived 30 s), the start in the kill's sync.
        assert_eq!(
            b.start(None, at(30)),
            Ok(()),
            "the first restart: nothing exited before"
        );
        assert_eq!(b.entry, None, "and no back-off set up");
        assert_eq!(b.start(Some(at(30)), at(60)), Ok(()));
        assert_eq!(b.entry, Some((Duration::from_secs(10), at(60))));
        assert_eq!(
            b.start(Some(at(60)), at(90)),
            Ok(()),
            "lived 30 s, past 10 s"
        );
        assert_eq!(
            b.start(Some(at(90)), at(120)),
            Ok(()),
            "lived 30 s, past 20 s"
        );
        // Now 40 s: an instance that lived 30 s is held until the one before ended + 40 s.
        assert_eq!(b.start(Some(at(120)), at(150)), Err(at(160)));
        // The next sync keys on the instance just killed, at 150 s.
        assert_eq!(b.start(Some(at(150)), at(165)), Err(at(190)));
        assert_eq!(b.start(Some(at(150)), at(190)), Ok(()));
        assert_eq!(b.entry, Some((Duration::from_secs(80), at(190))));
        // An exit more than 600 s after the back-off was last set starts it over.
        assert_eq!(b.start(Some(at(791)), at(791)), Ok(()));
        assert_eq!(b.entry, Some((Duration::from_secs(10), at(791))));
        // A container that exits on its own keys on its own exit: the first crash restarts at
        // once, the second waits 10 s; capped at 300 s.
        let mut crash = Backoff::new(&spec());
        assert_eq!(crash.start(Some(at(5)), at(5)), Ok(()));
        assert_eq!(crash.start(Some(at(8)), at(8)), Err(at(18)));
        assert_eq!(crash.start(Some(at(8)), at(18)), Ok(()));
        let mut t = 18;
        for _ in 0..8 {
            let (backoff, _) = crash.entry.unwrap();
            t += backoff.as_secs();
            assert_eq!(
                crash.start(Some(at(t)), at(t + backoff.as_secs() * 2)),
                Ok(())
            );
            t += backoff.as_secs() * 2;
        }
        assert_eq!(crash.entry.unwrap().0, Duration::from_secs(300));
    }

    /// pod_workers.go `completeWork`: a blocked start is synced again when the back-off ends,
    /// at most `resyncInterval` (60 s) later, jittered by up to half.
    #[test]
    fn a_blocked_start_is_synced_again_when_its_back_off_ends() {
        let now = Instant::now();
        let resync = spec().resync;
        let s = |d: u64, j: f64| requeue_after(now + Duration::from_secs(d), now, resync, j);
        assert_eq!(s(10, 0.0), Duration::from_secs(10));
        assert_eq!(s(10, 0.999), Duration::from_secs(10).mul_f64(1.4995));
        assert_eq!(s(300, 0.0), Duration::from_secs(60));
        assert_eq!(s(0, 0.5), Duration::ZERO);
        let mut seed = 7;
        assert!((0..1000).all(|_| (0.0..1.0).contains(&jitter(&mut seed))));
    }

    /// worker.go: the probe ticks from the worker's start, so a container is first probed 0 to
    /// 1 period after it started.
    #[test]
    fn a_container_is_first_probed_within_a_period_of_its_start() {
        let epoch = Instant::now();
        let period = Duration::from_secs(10);
        assert_eq!(tick_after(epoch, period, epoch), epoch + period);
        let started = epoch + Duration::from_millis(27_300);
        assert_eq!(
            tick_after(epoch, period, started),
            epoch + Duration::from_secs(30)
        );
        let at_a_tick = epoch + Duration::from_secs(40);
        assert_eq!(
            tick_after(epoch, period, at_a_tick),
            epoch + Duration::from_secs(50)
        );
    }

    /// killContainer: a grace period under `minimumGracePeriodInSeconds` (2 s) is raised to it.
    #[test]
    fn a_kill_gives_at_least_two_seconds() {
        let s = spec();
        assert_eq!(s.grace_floor, Duration::from_secs(2));
        let one = Spec {
            grace: Duration::from_secs(1),
            ..s.clone()
        };
        assert_eq!(one.grace.max(one.grace_floor), Duration::from_secs(2));
        assert_eq!(s.grace.max(s.grace_floor), Duration::from_secs(30));
    }

    /// An exec probe whose binary is missing is an error (discarded), never a failure; one
    /// that exits non-zero is a failure; one that overstays is a failure.
    #[test]
    fn a_probe_that_cannot_start_is_an_error() {
        let missing: ProbeCommand = Box::new(|| Command::new("/nonexistent/natsprobe"));
        assert!(matches!(
            probe_once(&missing, Duration::from_secs(1)),
            Probed::Errored(_)
        ));
        let fails: ProbeCommand = Box::new(|| {
            let mut c = Command::new("sh");
            c.args(["-c", "echo unhealthy: x; exit 1"]);
            c
        });
        assert_eq!(
            probe_once(&fails, Duration::from_secs(5)),
            Probed::Failed("unhealthy: x".into())
        );
        let slow: ProbeCommand = Box::new(|| {
            let mut c = Command::new("sleep");
            c.arg("5");
            c
        });
        assert!(matches!(
            probe_once(&slow, Duration::from_millis(100)),
            Probed::Failed(_)
        ));
    }

    /// The kubelet runs a probe that errors, over and over, and never restarts the container;
    /// its events say so.
    #[test]
    fn a_probe_that_always_errors_never_restarts() {
        let mut spec = Spec::scaled(
            Duration::from_millis(50),
            Duration::from_millis(200),
            1,
            0.01,
        );
        spec.relist = Duration::from_millis(20);
        let probe: ProbeCommand = Box::new(|| Command::new("/nonexistent/natsprobe"));
        let container: Container =
            Box::new(|| Peer::spawn_as(None, Path::new("/bin/sleep"), &["60"]));
        let mut kubelet = Kubelet::start(spec, probe, container);
        std::thread::sleep(Duration::from_millis(600));
        kubelet.stop();
        let events = kubelet.events();
        let errored = events
            .iter()
            .filter(|e| e.message.contains("probe errored"))
            .count();
        assert!(errored >= 5, "{}", kubelet.log());
        assert!(
            events.iter().all(|e| e.reason != "Killing"),
            "{}",
            kubelet.log()
        );
        kubelet.with_runs(|runs| assert_eq!(runs.len(), 1));
    }

    /// An httpGet whose headers came and whose body could not be read is an error; no answer
    /// before the timeout, or a refused connection, is a failure; a status decides otherwise.
    #[test]
    fn an_unreadable_body_is_an_error_and_no_answer_a_failure() {
        use std::io::{Read, Write};
        let serve = |reply: &'static [u8], hold: bool| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            std::thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let _ = s.write_all(reply);
                if hold {
                    std::thread::sleep(Duration::from_secs(2));
                }
            });
            port
        };
        let t = Duration::from_millis(300);
        let ok = serve(b"HTTP/1.1 200 OK\r\n\r\nhealthy: x\n", false);
        assert_eq!(get(ok, "/livez", t), Probed::Passed("healthy: x".into()));
        let bad = serve(
            b"HTTP/1.1 503 Service Unavailable\r\n\r\nunhealthy: x\n",
            false,
        );
        assert_eq!(
            get(bad, "/livez", t),
            Probed::Failed("HTTP probe failed with statuscode: 503".into())
        );
        let body_stalls = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhea", true);
        assert!(matches!(get(body_stalls, "/livez", t), Probed::Errored(_)));
        let silent = serve(b"", true);
        assert!(matches!(get(silent, "/livez", t), Probed::Failed(_)));
        let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = refused.local_addr().unwrap().port();
        drop(refused);
        assert!(matches!(get(port, "/livez", t), Probed::Failed(_)));
    }

    /// prober.go `runProbeWithRetries`: an errored run is run again at once, up to 3 runs in
    /// the tick; the first that did not error is the result, and 3 errors are an error.
    #[test]
    fn an_errored_probe_is_run_again_up_to_three_times() {
        let counted = |errors: usize, then: &'static str| {
            let calls = Arc::new(Mutex::new(0));
            let seen = Arc::clone(&calls);
            let action = Action::Exec(Box::new(move || {
                let mut n = seen.lock().unwrap();
                *n += 1;
                match *n <= errors {
                    true => Command::new("/nonexistent/natsprobe"),
                    false => Command::new(then),
                }
            }));
            let ran = action.tick(Duration::from_secs(1));
            let calls = *calls.lock().unwrap();
            (ran, calls)
        };
        assert_eq!(counted(0, "true"), (Probed::Passed(String::new()), 1));
        assert_eq!(counted(2, "true"), (Probed::Passed(String::new()), 3));
        assert_eq!(counted(1, "false"), (Probed::Failed(String::new()), 2));
        let (ran, calls) = counted(3, "true");
        assert!(matches!(ran, Probed::Errored(_)), "{ran:?}");
        assert_eq!(calls, 3, "never a fourth run in one tick");
    }

    /// The startupProbe runs with its own timeoutSeconds: a run longer than the liveness
    /// probe's timeout and shorter than its own passes.
    #[test]
    fn the_startup_probe_has_its_own_timeout() {
        let spec = Spec::scaled(
            Duration::from_millis(100),
            Duration::from_millis(50),
            3,
            0.01,
        );
        let slow = || -> ProbeCommand {
            Box::new(|| {
                let mut c = Command::new("sh");
                c.args(["-c", "sleep 0.15; echo started"]);
                c
            })
        };
        let startup = Startup {
            period: Duration::from_millis(100),
            timeout: Duration::from_millis(500),
            failure_threshold: 60,
            probe: slow(),
        };
        let container: Container =
            Box::new(|| Peer::spawn_as(None, Path::new("/bin/sleep"), &["60"]));
        let passes: ProbeCommand = Box::new(|| Command::new("true"));
        let mut kubelet = Kubelet::start_with(spec, Some(startup), passes, container);
        std::thread::sleep(Duration::from_millis(600));
        kubelet.stop();
        let probed = kubelet.probed();
        assert_eq!(
            probed.first().map(|(_, ok, line)| (*ok, line.as_str())),
            Some((true, "startup probe: started")),
            "{probed:?}\n{}",
            kubelet.log()
        );
    }

    /// A pod restarted in place as KEP-5532 has it. Its sidecar (with a startupProbe) exits 3,
    /// not in its rules: restarted alone. It then exits 88: the sync that sees it (the sidecar's
    /// relist) sets `AllContainersRestarting`, kills the app at once (the app's own relist is
    /// far slower) without its 5 s grace but with the least grace (it ignores SIGTERM: killed
    /// at the floor), removes both and clears the condition; then starts the sidecar, and the
    /// app only once the sidecar's startupProbe passed.
    #[test]
    fn an_exit_the_rules_name_restarts_every_container_of_the_pod() {
        let pod = Arc::new(InPlacePod::default());
        let spec = |relist: u64, on_exit: Vec<i32>, sidecar: bool| {
            let mut spec = Spec::scaled(
                Duration::from_millis(50),
                Duration::from_millis(200),
                3,
                0.01,
            );
            spec.relist = Duration::from_millis(relist);
            spec.grace = Duration::from_secs(5);
            spec.grace_floor = Duration::from_millis(150);
            spec.in_place = Some(InPlace {
                pod: Arc::clone(&pod),
                on_exit,
                sidecar,
            });
            spec
        };
        let passes = || -> ProbeCommand { Box::new(|| Command::new("true")) };
        // The sidecar is ready 0.2 s after each start (its startupProbe passes from then);
        // it exits 3 at 0.5 s, then 88; then it stays up.
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let exits = Arc::new(Mutex::new(vec![88, 3]));
        let sidecar: Container = {
            let ready = ready.clone();
            Box::new(move || {
                let _ = std::fs::remove_file(&ready);
                let then = match exits.lock().unwrap().pop() {
                    Some(code) => format!("sleep 0.3; exit {code}"),
                    None => "sleep 60".to_string(),
                };
                let script = format!("sleep 0.2; touch {}; {then}", ready.display());
                Peer::spawn_as(None, Path::new("/bin/sh"), &["-c", &script])
            })
        };
        let startup = Startup {
            period: Duration::from_millis(25),
            timeout: Duration::from_millis(200),
            failure_threshold: 600,
            probe: Box::new(move || {
                let mut c = Command::new("test");
                c.arg("-e").arg(&ready);
                c
            }),
        };
        // The app ignores SIGTERM: only the least grace ends it in time.
        let app: Container = Box::new(|| {
            Peer::spawn_as(
                None,
                Path::new("/bin/sh"),
                &["-c", "trap '' TERM; sleep 60"],
            )
        });
        let mut side =
            Kubelet::start_with(spec(20, vec![88], true), Some(startup), passes(), sidecar);
        let mut main = Kubelet::start(spec(400, vec![], false), passes(), app);
        std::thread::sleep(Duration::from_millis(2000));
        side.stop();
        main.stop();
        let (side_log, main_log) = (side.log(), main.log());
        let both = format!("sidecar:\n{side_log}\napp:\n{main_log}");
        side.with_runs(|runs| assert_eq!(runs.len(), 3, "{both}"));
        main.with_runs(|runs| assert_eq!(runs.len(), 2, "{both}"));
        assert!(side_log.contains("container exited; restarting"), "{both}");
        assert_eq!(pod.restarts(), 1, "{both}");
        let at = |k: &Kubelet, reason: &str, n: usize| {
            k.events()
                .into_iter()
                .filter(|e| e.reason == reason)
                .nth(n)
                .unwrap_or_else(|| panic!("no {reason} #{n}: {both}"))
                .at
        };
        let rule = at(&side, "RestartAllContainers", 0);
        let killed = at(&main, "Killing", 0);
        assert_eq!(main.kills_between(rule, Instant::now()), 1, "{both}");
        assert!(
            main.events()[..]
                .iter()
                .any(|e| e.reason == "Killing" && e.message.contains("restart in place")),
            "{both}"
        );
        // The sidecar exited on its own: not killed.
        assert_eq!(side.kills_between(rule, Instant::now()), 0, "{both}");
        // In the sync that saw the exit, not at the app's own relist.
        assert!(killed - rule < Duration::from_millis(100), "{both}");
        let condition = pod.condition();
        assert_eq!(
            condition.iter().map(|(_, set)| *set).collect::<Vec<_>>(),
            [true, false],
            "{both}"
        );
        let (set, cleared) = (condition[0].0, condition[1].0);
        // Killed at the floor (it ignores SIGTERM), well inside its grace; removed, then
        // started.
        assert!(set <= killed, "{both}");
        let floor = Duration::from_millis(150);
        assert!(
            cleared - killed >= floor && cleared - killed < Duration::from_secs(1),
            "{both}"
        );
        let side_again = at(&side, "Started", 2);
        let app_again = at(&main, "Started", 1);
        assert!(cleared <= side_again, "{both}");
        // The app waited for the sidecar's startupProbe after its start.
        let passed = side
            .probed()
            .into_iter()
            .find(|(t, ok, line)| *t > side_again && *ok && line.starts_with("startup probe"))
            .map(|(t, _, _)| t)
            .unwrap_or_else(|| panic!("the sidecar's startupProbe never passed: {both}"));
        assert!(passed >= side_again + Duration::from_millis(150), "{both}");
        assert!(app_again >= passed, "{both}");
        assert!(app_again - passed < Duration::from_millis(100), "{both}");
    }
}
