//! The outage drill: a nats.go JetStream consumer with a scaled-down reconnect budget under
//! the kubelet simulator, NATS stopped for a while and started again, once with the plain
//! socket check and once with `--server`. Shared by the test (which asserts) and the demo
//! in examples/ (which prints).
//!
//! Scale: the client's budget is 3 × 200 ms (nats.go's 60 × 2 s at 1/200); the probe runs
//! every 100 ms, 12 failures to restart (1.2 s: longer than the budget, as the README sizes
//! it), and the kubelet's back-off is at 1/20 (10 s → 500 ms, 300 s → 15 s).

use super::kubelet::{Kubelet, Spec};
use super::{link, probe, NatsServer, NetNs, Peer, Version};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const PERIOD: Duration = Duration::from_millis(100);
pub const FAILURE_THRESHOLD: u32 = 12;
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
pub const BACKOFF_SCALE: f64 = 0.05;
pub const RECONNECTS: &str = "3";
pub const RECONNECT_WAIT: &str = "200ms";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `natsprobe check --port 4222`
    Plain,
    /// `natsprobe check --server nats://127.0.0.1:4222`
    Server,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Plain => "check",
            Mode::Server => "check --server",
        }
    }
}

pub struct Outcome {
    pub mode: Mode,
    pub outage: Duration,
    /// Kills by the kubelet while NATS was down.
    pub restarts_during_outage: usize,
    /// Kills after NATS was back.
    pub restarts_after: usize,
    /// From the server's return to the first connected client.
    pub back_to_connected: Duration,
    /// From the server's return to the first ack (ingest flowing again).
    pub back_to_ack: Option<Duration>,
    /// Start-up of the container that connected (start to connected), if a restarted one
    /// did; None when the old client reconnected by itself.
    pub startup: Option<Duration>,
    /// From the server's return to the kubelet's last kill, if it killed after the return.
    pub detection: Option<Duration>,
    pub log: String,
}

pub fn outage_drill(mode: Mode, outage: Duration) -> Outcome {
    // Two pods on one node: NATS (with the producer, which is not under test) and the app,
    // whose namespace holds only the consumer's sockets.
    let nats_pod = Arc::new(NetNs::new());
    let ns = Arc::new(NetNs::new());
    let (nats_ip, _) = link(&nats_pod, &ns);
    let mut server = NatsServer::start(Some(&nats_pod), Version::Pinned, nats_ip, 4222);
    let url = server.url();
    Peer::setup(
        Some(&nats_pod),
        &[
            "-url",
            &url,
            "-stream",
            "DRILL",
            "-subjects",
            "drill.>",
            "-durable",
            "C",
            "-deliver-subject",
            "deliver.c",
            "-deliver-group",
            "g",
            "-max-ack-pending",
            "1",
        ],
    );
    // The producer is not under test: it never gives up.
    let mut producer = Peer::spawn(
        Some(&nats_pod),
        &[
            "publish",
            "-url",
            &url,
            "-subject",
            "drill.x",
            "-rate",
            "50",
            "-max-reconnects",
            "-1",
            "-reconnect-wait",
            "100ms",
            "-retry-on-failed-connect",
        ],
    );
    producer.wait_for("ready", Duration::from_secs(10));

    let container = {
        let (ns, url) = (Arc::clone(&ns), url.clone());
        Box::new(move || {
            Peer::spawn(
                Some(&ns),
                &[
                    "consume",
                    "-url",
                    &url,
                    "-stream",
                    "DRILL",
                    "-durable",
                    "C",
                    "-deliver-subject",
                    "deliver.c",
                    "-deliver-group",
                    "g",
                    "-max-reconnects",
                    RECONNECTS,
                    "-reconnect-wait",
                    RECONNECT_WAIT,
                    "-retry-on-failed-connect",
                    "-report-every",
                    "1",
                ],
            )
        })
    };
    let probe_cmd = {
        let (ns, url) = (Arc::clone(&ns), url.clone());
        Box::new(move || {
            let mut args = vec!["check", "--timeout", "500ms"];
            if mode == Mode::Server {
                args.extend(["--server", url.as_str()]);
            }
            probe(&args).ns(&ns).command()
        })
    };
    let spec = Spec::scaled(PERIOD, PROBE_TIMEOUT, FAILURE_THRESHOLD, BACKOFF_SCALE);
    let mut kubelet = Kubelet::start(spec, probe_cmd, container);
    super::wait_until("the first consumer to ack", Duration::from_secs(15), || {
        kubelet.with_runs(|runs| runs.first().is_some_and(|r| r.saw("acked")))
    });
    std::thread::sleep(PERIOD * 5);

    let down = Instant::now();
    server.stop();
    std::thread::sleep(outage);
    server.resume();
    let up = Instant::now();

    let connected = |since: Instant| {
        kubelet.with_runs(|runs| {
            runs.iter()
                .filter_map(|r| {
                    r.first_after(&["connected", "reconnected"], since)
                        .map(|t| (t, r.started))
                })
                .min()
        })
    };
    let limit = Instant::now() + Duration::from_secs(60);
    while connected(up).is_none() {
        if Instant::now() > limit {
            let outputs = kubelet.with_runs(|runs| {
                let each: Vec<String> = runs
                    .iter()
                    .map(|r| format!("--- pid {}:\n{}", r.pid(), r.output()))
                    .collect();
                each.join("\n")
            });
            panic!(
                "{mode:?}/{outage:?}: no client connected 60 s after the outage\n{}\n{outputs}",
                kubelet.log()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (connected_at, run_started) = connected(up).unwrap();
    // Settle: enough probes to see that the recovered client stays.
    std::thread::sleep(PERIOD * FAILURE_THRESHOLD * 2);
    let back_to_ack = kubelet.with_runs(|runs| {
        runs.iter()
            .filter_map(|r| r.first_after(&["acked"], up))
            .min()
    });
    kubelet.stop();

    let last_kill_after_up = kubelet
        .events()
        .iter()
        .filter(|e| e.reason == "Killing" && e.at >= up)
        .map(|e| e.at)
        .max();
    Outcome {
        mode,
        outage,
        restarts_during_outage: kubelet.kills_between(down, up),
        restarts_after: kubelet.kills_between(up, Instant::now()),
        back_to_connected: connected_at - up,
        back_to_ack: back_to_ack.map(|t| t - up),
        startup: (run_started >= up).then(|| connected_at - run_started),
        detection: last_kill_after_up.map(|t| t - up),
        log: kubelet.log(),
    }
}

/// The drill's table, as the README shows it.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut out = String::from(
        "| probe | NATS down for | restarts during the outage | restarts after | server back → client connected | → first ack |\n|---|---|---|---|---|---|\n",
    );
    for o in outcomes {
        let ms = |d: Duration| format!("{:.2} s", d.as_secs_f64());
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            o.mode.name(),
            ms(o.outage),
            o.restarts_during_outage,
            o.restarts_after,
            ms(o.back_to_connected),
            o.back_to_ack.map(ms).unwrap_or_else(|| "-".into()),
        ));
    }
    out
}
