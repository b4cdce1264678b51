//! The chaos drill: a fleet of pods under the kubelet, a script of faults against their NATS
//! cluster and against the pods themselves, and the figures: restarts that helped, restarts
//! that did not, pods that needed one and never got it, the time from each fault to the
//! restart and to the pod working again, and what the fleet's checks cost the servers. Shared
//! by the test (which asserts the goals) and the demo in examples/ (which prints).
//!
//! Three worlds run the same script at the same moments, each its own cluster and fleet: one
//! checked by natsprobe at the recommended settings, one by a `tcpSocket` probe on the app's
//! own port, one by the grep one-liner. Which pods need a restart is the script's knowledge
//! (the fault it made: a client that gave up, a deaf replica, a wedged consumer...), never
//! the checks'. Each fault's effect is shown from outside the pods (the server's connection
//! list, a consumer's info, a timed request), so a script that injects nothing cannot pass.
//! docs/chaos-drill.md explains the settings, the script and each bound.

mod cron;
mod figures;
mod fleet;
mod look;
mod script;
mod tally;
mod world;

pub use figures::Figures;
pub use fleet::Checker;
pub use script::Fault;
pub use tally::Tally;
pub use world::World;

use crate::harness::callout::Answer;
use crate::harness::NetNs;
use natsprobe::rules::restart;
use std::time::{Duration, Instant};

/// The probe's settings, the clients' and the kubelet's, and how long each fault lasts.
#[derive(Debug, Clone)]
pub struct Timings {
    pub name: &'static str,
    /// periodSeconds.
    pub period: Duration,
    /// failureThreshold.
    pub failure_threshold: u32,
    /// timeoutSeconds (natsprobe's own `--timeout`, 800ms, ends a run before it).
    pub timeout: Duration,
    /// The kubelet's restart back-off and grace, as a share of its real ones.
    pub backoff_scale: f64,
    /// `--stall-after`: the consumers' window (their ack_wait is shorter than half of it).
    pub stall_after: Duration,
    /// `--half-open-after`.
    pub half_open_after: Duration,
    /// The durables' ack_wait.
    pub ack_wait: Duration,
    /// nats.go's MaxReconnects and ReconnectWait: the clients' reconnect budget.
    pub max_reconnects: u32,
    pub reconnect_wait: Duration,
    /// nats.go's PingInterval (MaxPingsOut stays 2) and its connect timeout.
    pub ping_interval: Duration,
    pub connect_timeout: Duration,
    /// Between two injections of the pod faults, and between NATS faults.
    pub step: Duration,
    pub partition: Duration,
    pub node_down: Duration,
    /// A node stopped `starve_stopped` of every second, for `starve`.
    pub starve: Duration,
    pub starve_stopped: Duration,
    pub auth_down: Duration,
    pub lost: Duration,
    /// Longer than the clients' reconnect budget: they give up.
    pub cluster_down: Duration,
    /// The guard's `--interval`, and how often its CronJob runs it.
    pub guard_interval: Duration,
    pub guard_every: Duration,
}

impl Timings {
    /// For CI: windows of seconds. The runs and the clients' budgets are scaled down; the
    /// window is not scaled below what NATS itself takes to recover from a lost JetStream
    /// leader (an election of 4–9 s, then a redelivery after ack_wait), which no setting
    /// scales; the kernel's retransmission timer (200 ms, doubling) is not scaled either.
    pub fn scaled() -> Timings {
        let ms = Duration::from_millis;
        Timings {
            name: "scaled",
            period: ms(500),
            failure_threshold: 3,
            timeout: ms(1000),
            backoff_scale: 0.05,
            stall_after: ms(15_000),
            half_open_after: ms(2000),
            ack_wait: ms(1500),
            max_reconnects: 5,
            reconnect_wait: ms(400),
            ping_interval: ms(6000),
            connect_timeout: ms(1000),
            step: ms(1000),
            partition: ms(3000),
            node_down: ms(1000),
            starve: ms(8000),
            starve_stopped: ms(800),
            auth_down: ms(6000),
            lost: ms(14_000),
            cluster_down: ms(5000),
            guard_interval: ms(3000),
            guard_every: ms(15_000),
        }
    }

    /// The recommended settings as the README gives them, nats.go's defaults, the kubelet's
    /// own back-off, and faults as long as they come in production.
    pub fn real() -> Timings {
        let s = Duration::from_secs;
        Timings {
            name: "real",
            period: s(10),
            failure_threshold: 3,
            timeout: s(1),
            backoff_scale: 1.0,
            stall_after: s(60),
            half_open_after: s(30),
            ack_wait: s(30),
            max_reconnects: 60,
            reconnect_wait: s(2),
            ping_interval: s(120),
            connect_timeout: s(2),
            step: s(10),
            partition: s(30),
            node_down: s(20),
            starve: s(90),
            starve_stopped: Duration::from_millis(800),
            auth_down: s(120),
            lost: s(360),
            cluster_down: s(180),
            guard_interval: s(60),
            guard_every: s(300),
        }
    }

    /// What answering from memory adds to a bound: the verdict a probe reads is at most a
    /// look old (`--every`, the period) and a look's run (natsprobe's `--timeout`, 800 ms,
    /// and the second serve gives a look before it kills it).
    pub fn serve_staleness(&self) -> Duration {
        self.period + Duration::from_millis(800) + Duration::from_secs(1)
    }

    /// The consumers' window, as the check works it out from `--stall-after` and their
    /// ack_wait.
    pub fn window(&self) -> Duration {
        natsprobe::rules::consumer::window_for(self.stall_after, Some(self.ack_wait)).duration
    }

    /// `--sample-every`'s default.
    pub fn sample_every(&self) -> Duration {
        natsprobe_core::timing::sample_every(self.stall_after)
    }

    /// How long after a dead connection's first unanswered send the kernel's retransmission
    /// timeouts first add up to `--half-open-after`, with a first timeout of `first`, doubling
    /// each time (the tail-loss probe one timeout long).
    fn retransmitted(&self, first: Duration) -> Duration {
        let (mut total, mut rto) = (first, first);
        let mut counted = Duration::ZERO;
        while counted < self.half_open_after {
            total += rto;
            counted += rto;
            rto *= 2;
        }
        total
    }

    /// How long after a dead connection's first unanswered send this machine's kernel has
    /// retransmitted for `--half-open-after` (`kernels_round_trips`' first timeout).
    pub fn half_open_seen(&self) -> Duration {
        self.retransmitted(Duration::from_millis(220))
    }

    /// What this machine's kernel adds to the simulated one's half-open time: the simulated
    /// kernel times out first at 200 ms (TCP_RTO_MIN), this one at 200 ms plus the round trip,
    /// doubling each time (measured here, 212 ms, and the fourth timeout 3.3 s after the
    /// send). Taken as 220 ms.
    pub fn kernels_round_trips(&self) -> Duration {
        let ms = Duration::from_millis;
        self.half_open_seen() - self.retransmitted(ms(200))
    }

    /// What the auth service answers each probe's logins while the pods' faults show: refused,
    /// late (after natsprobe's own `--timeout`, 800 ms, before the server's 1.5 s), as usual;
    /// one look in three answered.
    pub fn flaky(&self) -> [Answer; 3] {
        [Answer::Refused, Answer::Late(self.timeout), Answer::AsUsual]
    }

    /// What the flaky auth service adds to a bound (docs/checks.md's bounds): with one look in
    /// k answered, at most 2k runs more, each a period apart or as long as it ran.
    pub fn flaky_extra(&self) -> Duration {
        self.period.max(self.timeout) * 2 * self.flaky().len() as u32
    }

    /// The slowest time from `fault` to the kubelet's restart of a pod of this `kind`: the
    /// check's own time to restart at these settings (`rules::restart`, which plays every
    /// phase of the fault against the runs and the looks on the simulated pod and NATS), and
    /// what the drill adds to it: runs that take their time, the flaky auth service's extra
    /// runs while the pods' own faults show, and for a half-open connection the client's
    /// first send and this kernel's round trips. (docs/chaos-drill.md derives each.)
    pub fn bound(&self, fault: Fault, kind: fleet::Kind) -> Option<Duration> {
        use restart::Fault as R;
        let time = |fault| self.time_to_restart(fault) + self.runs_take_time();
        // In an account this small, `--subscription-every auto` looks the connection up with
        // each look, at the monitoring port or not.
        let deaf = |direct| R::Deaf {
            connections: 100,
            direct,
        };
        Some(match fault {
            Fault::DurableDeleted => time(R::Absent) + self.flaky_extra(),
            Fault::Deaf => time(deaf(false)) + self.flaky_extra(),
            Fault::DeafMonitor => time(deaf(true)) + self.flaky_extra(),
            Fault::Wedged => time(R::Stalled) + self.flaky_extra(),
            Fault::Retention => time(R::Losing) + self.flaky_extra(),
            // From the first run after NATS is back.
            Fault::ClusterDown => time(R::GaveUp),
            // From the client's first send after the loss: at once for the producer, at its
            // next PING for the others (they receive nothing, so they ack nothing).
            Fault::Lost => {
                let first_send = match kind {
                    fleet::Kind::Producer => fleet::PRODUCER_EVERY,
                    _ => self.ping_interval,
                };
                first_send + time(R::HalfOpen) + self.kernels_round_trips()
            }
            _ => return None,
        })
    }
}

impl Timings {
    /// The check's time to restart for `fault` at these settings, as `rules::restart` works it
    /// out against the simulated pod and NATS (the README's table, at these timings).
    fn time_to_restart(&self, fault: restart::Fault) -> Duration {
        let settings = restart::Settings {
            cadence: restart::Cadence {
                period: self.period,
                sample_every: self.sample_every(),
                window: self.window(),
            },
            failure_threshold: self.failure_threshold,
            half_open_after: self.half_open_after,
            trust: natsprobe::rules::remembered::TrustSetting::Auto,
        };
        restart::time_to_restart(fault, &settings).slowest
    }

    /// What the drill adds to a time to restart: each run may last its whole timeout (the
    /// simulated runs take none), the next a period after it began or when it ended.
    fn runs_take_time(&self) -> Duration {
        let (p, run) = (self.period, self.timeout);
        (p.max(run) - p) * (self.failure_threshold - 1) + run
    }
}

/// The bounds at both timings, as docs/chaos-drill.md shows them (a test holds it to this).
pub fn bounds_table() -> String {
    let (scaled, real) = (Timings::scaled(), Timings::real());
    let bento = fleet::Kind::Bento { stream: "ORDERS" };
    let rows = [
        (
            "durable deleted; replica deaf, with or without `--monitor`",
            "the next look (`--sample-every` + a period), then the runs",
            &[Fault::DurableDeleted, Fault::Deaf, Fault::DeafMonitor][..],
            bento,
        ),
        (
            "consumer wedged; losing messages to retention",
            "the next look starts the stall clock; a window later, then the runs",
            &[Fault::Wedged, Fault::Retention][..],
            bento,
        ),
        (
            "client gave up (from NATS's return)",
            "the runs",
            &[Fault::ClusterDown][..],
            bento,
        ),
        (
            "half-open: the producer",
            "its next publish, the kernel's timeouts past `--half-open-after`, the runs",
            &[Fault::Lost][..],
            fleet::Kind::Producer,
        ),
        (
            "half-open: a client that only pings",
            "its next PING (PingInterval), the timeouts, the runs",
            &[Fault::Lost][..],
            bento,
        ),
    ];
    let mut out = String::from(
        "| fault | when the probe fails it | bound, scaled | bound, real |\n|---|---|---|---|\n",
    );
    for (what, why, faults, kind) in rows {
        let b = |t: &Timings| {
            let most = faults.iter().map(|&f| t.bound(f, kind).unwrap()).max();
            format!("{:.2}s", most.unwrap().as_secs_f64())
        };
        out.push_str(&format!(
            "| {what} | {why} | {} | {} |\n",
            b(&scaled),
            b(&real)
        ));
    }
    out
}

/// Everything the drill found: each world's faults as injected and its figures.
pub struct Outcome {
    pub tallies: Vec<Tally>,
    pub took: Duration,
    /// The test machine's stalls over the script: a thread that sleeps 20 ms at a time,
    /// each wake-up later than 500 ms (from the script's start, how late). A stall delays
    /// every kubelet's runs and every probe's looks at once.
    pub stalls: Vec<(Duration, Duration)>,
}

/// Wakes every 20 ms until `stop`, and keeps each wake-up later than 500 ms: when (from
/// `t0`) and by how much.
fn watch_stalls(t0: Instant, stop: &std::sync::atomic::AtomicBool) -> Vec<(Duration, Duration)> {
    let (tick, late) = (Duration::from_millis(20), Duration::from_millis(500));
    let mut stalls = Vec::new();
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let before = Instant::now();
        std::thread::sleep(tick);
        let over = before.elapsed().saturating_sub(tick);
        if over > late {
            stalls.push((before.saturating_duration_since(t0), over));
        }
    }
    stalls
}

/// The stalls as the drill prints them.
pub fn stalls_line(stalls: &[(Duration, Duration)]) -> String {
    match stalls {
        [] => "the test machine: no stall over 0.5s during the script".into(),
        _ => format!(
            "the test machine stalled (a 20 ms sleep woke late): {}",
            stalls
                .iter()
                .map(|(at, by)| format!("at +{} by {}", secs(*at), secs(*by)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The pods whose probe's cost per run that asks NATS is measured, one of each kind that
/// asks: a Bento-like consumer, a replica, a replica with `--monitor`.
const MEASURED: [&str; 3] = ["bento-ok", "a2", "m2"];

/// Runs the drill: three worlds started side by side, the script in each at the same
/// moments, then the tally.
pub fn chaos_drill(t: &Timings) -> Outcome {
    chaos_drill_of(t, &Checker::ALL)
}

/// Runs the drill in the worlds of `checkers`.
pub fn chaos_drill_of(t: &Timings, checkers: &[Checker]) -> Outcome {
    let started = Instant::now();
    let mut worlds: Vec<World> = std::thread::scope(|s| {
        let each: Vec<_> = checkers
            .iter()
            .map(|&c| s.spawn(move || World::start(c, t)))
            .collect();
        each.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let t0 = Instant::now() + Duration::from_millis(500);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (runs, stalls): (Vec<script::Ran>, _) = std::thread::scope(|s| {
        let watch = s.spawn(|| watch_stalls(t0, &stop));
        let each: Vec<_> = worlds
            .iter_mut()
            .map(|w| s.spawn(move || script::run(w, t, t0)))
            .collect();
        let runs = each.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        (runs, watch.join().unwrap())
    });
    let mut tallies = Vec::new();
    for (w, ran) in worlds.iter_mut().zip(runs) {
        w.stop_kubelets();
        let guard = w.stop_guard();
        let costs = match w.checker {
            Checker::Natsprobe => MEASURED
                .iter()
                .map(|name| {
                    let pod = fleet::FLEET.iter().position(|p| p.name == *name).unwrap();
                    (fleet::FLEET[pod].kind, w.session_cost(pod, 40))
                })
                .collect(),
            _ => Vec::new(),
        };
        tallies.push(Tally::new(w, t, ran, guard, &costs));
    }
    drop(worlds);
    Outcome {
        tallies,
        took: started.elapsed(),
        stalls,
    }
}

/// Joins `member` to the node network: a veth pair, its end `port` on the bridge, the
/// other `eth0` with `ip`.
fn attach(switch: &NetNs, member: &NetNs, port: &str, ip: &str) {
    switch.ip(&[
        "link",
        "add",
        port,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        &member.name,
    ]);
    switch.ip(&["link", "set", port, "master", "br0", "up"]);
    member.ip(&["addr", "add", &format!("{ip}/16"), "dev", "eth0"]);
    member.ip(&["link", "set", "eth0", "up"]);
}

/// A duration as natspeer and natsprobe take it (`1500ms`).
fn humantime(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// A time as the tables show it (`12.3s`).
fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}
