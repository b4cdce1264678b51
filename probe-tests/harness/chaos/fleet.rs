//! The fleet, the same in every world: what each pod runs, how the kubelet checks it in each
//! world (natsprobe at the recommended settings, the same checks behind httpGet from a
//! `natsprobe serve` native sidecar, a `tcpSocket` probe on the app's own port, or the grep
//! one-liner), and a pod under its kubelet.

use super::{attach, humantime, Timings};
use crate::harness::kubelet::{http_get, HttpStartup, Kubelet, ProbeCommand, Spec, Startup};
use crate::harness::{probe, NetNs, Peer};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What decides when the kubelet restarts a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checker {
    /// `natsprobe check --server ...` with the pod's own checks.
    Natsprobe,
    /// A `tcpSocket` probe: a TCP connect to the app's own port (8080), from the node.
    TcpSocket,
    /// The grep one-liner on `/proc/net/tcp{,6}`: an ESTABLISHED socket to port 4222.
    Grep,
    /// `natsprobe serve` with the same checks in a native sidecar (its own container under
    /// its own kubelet, probed on `/selfz`); the app's probes httpGet `/livez` and
    /// `/startupz`.
    Serve,
    /// `natsprobe serve --exit-unhealthy 88` in the native sidecar, whose
    /// `restartPolicyRules` restart the pod's containers in place on 88; the app's httpGet
    /// livenessProbe kept as the fallback, 6 failures (examples/kubernetes/restart-in-place.yaml).
    InPlace,
}

impl Checker {
    /// The comparison: natsprobe's exec probe and the two others, side by side.
    pub const ALL: [Checker; 3] = [Checker::Natsprobe, Checker::TcpSocket, Checker::Grep];

    /// natsprobe's checks, whichever way the kubelet gets them (the recommended settings).
    pub fn is_natsprobe(self) -> bool {
        matches!(self, Checker::Natsprobe | Checker::Serve | Checker::InPlace)
    }

    pub fn name(self) -> &'static str {
        match self {
            Checker::Natsprobe => "natsprobe",
            Checker::TcpSocket => "tcpSocket",
            Checker::Grep => "grep one-liner",
            Checker::Serve => "natsprobe serve",
            Checker::InPlace => "natsprobe serve, restart in place",
        }
    }
}

/// What a pod runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A Bento-like consumer: its own push durable in `stream`, acking each message; its
    /// liveness probe has `--consumer`.
    Bento { stream: &'static str },
    /// A replica of a deliver group on stream WORK (the group is the durable's name); its
    /// liveness probe has `--consumer WORK/<group> --own-subscription`, with `--monitor` of
    /// the server it starts on or without.
    Replica { group: &'static str, monitor: bool },
    /// A producer with the plain check (`--server` only), publishing to `orders.p`.
    Producer,
}

/// One pod of the fleet: a name (also its client's connection name), what it runs, and the
/// order in which its client tries the three servers (its first is where it starts).
#[derive(Debug, Clone, Copy)]
pub struct PodSpec {
    pub name: &'static str,
    pub kind: Kind,
    pub pool: [usize; 3],
}

/// The fleet, the same in every world. The pods the script faults start on n1, where no node
/// fault lands; the others are spread so that each node fault finds clients of each kind.
pub const FLEET: [PodSpec; 11] = [
    PodSpec {
        name: "bento-w",
        kind: Kind::Bento { stream: "ORDERS" },
        pool: [0, 1, 2],
    },
    PodSpec {
        name: "bento-c",
        kind: Kind::Bento { stream: "CAPPED" },
        pool: [0, 1, 2],
    },
    PodSpec {
        name: "bento-d",
        kind: Kind::Bento { stream: "ORDERS" },
        pool: [0, 1, 2],
    },
    PodSpec {
        name: "bento-ok",
        kind: Kind::Bento { stream: "ORDERS" },
        pool: [1, 0, 2],
    },
    PodSpec {
        name: "a1",
        kind: Kind::Replica {
            group: "A",
            monitor: false,
        },
        pool: [0, 1, 2],
    },
    PodSpec {
        name: "a2",
        kind: Kind::Replica {
            group: "A",
            monitor: false,
        },
        pool: [1, 0, 2],
    },
    PodSpec {
        name: "m1",
        kind: Kind::Replica {
            group: "M",
            monitor: true,
        },
        pool: [0, 1, 2],
    },
    PodSpec {
        name: "m2",
        kind: Kind::Replica {
            group: "M",
            monitor: true,
        },
        pool: [2, 1, 0],
    },
    PodSpec {
        name: "producer",
        kind: Kind::Producer,
        pool: [2, 1, 0],
    },
    PodSpec {
        name: "bento-t",
        kind: Kind::Bento { stream: THROTTLED },
        pool: [0, 1, 2],
    },
    PodSpec {
        name: "bento-p",
        kind: Kind::Bento { stream: POISONED },
        pool: [0, 1, 2],
    },
];

/// The stream whose durable NATS throttles (`rate_limit_bps` 800, set when the world starts):
/// its pod acks all it gets, and the server holds back what a burst of about 1 MB leaves.
pub const THROTTLED: &str = "BULK";
/// The rate limit, and what the script publishes to `THROTTLED`: messages of 100 KB, each past
/// the burst waiting 1,000 s for the rate (longer than the scaled drill; at the real timings one
/// more in 1,000 s). Each new leader of the durable starts its rate afresh, a burst of ten more:
/// sixty leave some waiting past the script's elections, for the pod to ack after the outage.
pub const RATE_LIMIT_BPS: &str = "800";
pub const BULK_SIZE: &str = "100000";
pub const BULK_COUNT: &str = "60";

/// The stream whose pod's app NAKs one message, `POISON_SEQ`, with a delay longer than the drill
/// at either timings: its serialized durable (`max_ack_pending` 1) delivers nothing after it.
pub const POISONED: &str = "POISON";
pub const POISON_SEQ: u64 = 3;
pub const NAK_DELAY: &str = "1h";

impl PodSpec {
    /// The durable its probe watches and its client creates: `(stream, durable)`.
    pub fn durable(&self) -> Option<(&'static str, &'static str)> {
        match self.kind {
            Kind::Bento { stream } => Some((stream, self.name)),
            Kind::Replica { group, .. } => Some(("WORK", group)),
            Kind::Producer => None,
        }
    }

    /// The line a container prints when it works: its first ack, the producer's first
    /// connection (then it publishes), or for the poisoned consumer its subscription (its
    /// durable, held by the poison, delivers it nothing more).
    pub fn working_line(&self) -> &'static str {
        match self.kind {
            Kind::Producer | Kind::Bento { stream: POISONED } => "ready",
            _ => "acked",
        }
    }
}

/// How often the producer publishes: its client sends at least this often.
pub const PRODUCER_EVERY: Duration = Duration::from_millis(250);

/// Every account's users log in through the callout (`app`/`app-pw`, granted into `APP`); the
/// callout's own user and the system account's (`sys`/`sys-pw`) log in by the configuration.
pub(super) const APP: [&str; 4] = ["-user", "app", "-password", "app-pw"];
pub(super) const SYS: [&str; 4] = ["-user", "sys", "-password", "sys-pw"];
pub(super) const PROBE_APP: [&str; 4] = ["--user", "app", "--password", "app-pw"];

pub struct Pod {
    pub spec: PodSpec,
    pub ip: String,
    pub ns: Arc<NetNs>,
    pub kubelet: Kubelet,
    /// The native sidecar's own kubelet (`natsprobe serve`'s container), in the serve world.
    pub sidecar: Option<Kubelet>,
    /// natsprobe's arguments for this pod but its state dir.
    check: Vec<String>,
    /// The socket-level load balancer's cgroup its processes run in, if any.
    lb: Option<std::path::PathBuf>,
    _state: tempfile::TempDir,
}

impl Pod {
    /// Signals the pod's current container.
    pub fn signal(&self, signal: libc::c_int) {
        self.kubelet
            .with_runs(|runs| runs.last().unwrap().signal(signal));
    }

    /// The current container's first line starting with `prefix` at or after `since`.
    pub fn line_after(&self, prefix: &str, since: Instant) -> Option<Instant> {
        self.kubelet
            .with_runs(|runs| runs.last().unwrap().first_after(&[prefix], since))
    }

    /// The server the current container's client is on, from its last `server` line.
    pub fn server(&self) -> Option<String> {
        self.kubelet.with_runs(|runs| {
            let out = runs.last().unwrap().output();
            out.lines()
                .rev()
                .find_map(|l| l.strip_prefix("server ").map(str::to_string))
        })
    }
}

/// Where a pod runs: the node network's namespace (a `tcpSocket` probe comes from it), the
/// servers in the pod's order, and the monitoring port of its first.
pub(super) struct Place<'a> {
    pub node: &'a NetNs,
    pub urls: String,
    pub monitor: String,
    /// The socket-level load balancer's cgroup (its `cgroup.procs`) the pod's processes run
    /// in, when it reaches NATS through Services.
    pub lb: Option<std::path::PathBuf>,
}

impl Pod {
    /// The pod `index` of the fleet, its client started under its kubelet, checked by
    /// `checker`.
    pub(super) fn start(
        spec: PodSpec,
        index: usize,
        checker: Checker,
        place: Place,
        t: &Timings,
    ) -> Pod {
        let ns = Arc::new(NetNs::new());
        let ip = format!("10.250.2.{}", index + 1);
        attach(place.node, &ns, &format!("p{index}"), &ip);
        let state = crate::harness::memory_dir("natsprobe-state");
        let urls = place.urls;
        let mut client: Vec<String> = [
            "-url",
            &urls,
            "-no-randomize",
            "-name",
            spec.name,
            "-max-reconnects",
            &t.max_reconnects.to_string(),
            "-reconnect-wait",
            &humantime(t.reconnect_wait),
            "-retry-on-failed-connect",
            "-ping-interval",
            &humantime(t.ping_interval),
            "-timeout",
            &humantime(t.connect_timeout),
            "-listen",
            "0.0.0.0:8080",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        client.extend(APP.iter().map(|s| s.to_string()));
        let mut check: Vec<String> = [
            "check",
            "--server",
            &urls,
            "--stall-after",
            &humantime(t.stall_after),
            "--half-open-after",
            &humantime(t.half_open_after),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        check.extend(PROBE_APP.iter().map(|s| s.to_string()));
        if place.lb.is_some() {
            // The Service CIDR, which the pod's sockets (held as the nodes' addresses) are not
            // in: counted through where the kernel holds the connection.
            check.extend(["--remote".into(), super::world::SERVICE_CIDR.into()]);
        }
        let rate = (1.0 / PRODUCER_EVERY.as_secs_f64()).to_string();
        let mut run: Vec<String> = match spec.kind {
            Kind::Producer => ["publish", "-subject", "orders.p", "-rate", &rate]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            Kind::Bento { .. } | Kind::Replica { .. } => {
                let (stream, durable) = spec.durable().unwrap();
                let every = match spec.kind {
                    Kind::Bento { .. } => "10",
                    _ => "5",
                };
                [
                    "consume",
                    "-stream",
                    stream,
                    "-durable",
                    durable,
                    "-deliver-subject",
                    &format!("deliver.{durable}"),
                    "-deliver-group",
                    durable,
                    "-create",
                    "-create-ack-wait",
                    &humantime(t.ack_wait),
                    "-create-max-ack-pending",
                    "1",
                    "-report-every",
                    every,
                ]
                .iter()
                .map(|s| s.to_string())
                .collect()
            }
        };
        if spec.kind == (Kind::Bento { stream: POISONED }) {
            run.extend(
                ["-poison", &POISON_SEQ.to_string(), "-nak-delay", NAK_DELAY].map(String::from),
            );
        }
        match spec.kind {
            Kind::Bento { stream } => {
                check.extend(["--consumer".into(), format!("{stream}/{}", spec.name)])
            }
            Kind::Replica { group, monitor } => {
                check.extend([
                    "--consumer".into(),
                    format!("WORK/{group}"),
                    "--own-subscription".into(),
                ]);
                if monitor {
                    check.extend(["--monitor".into(), place.monitor]);
                }
            }
            Kind::Producer => {}
        }
        run.extend(client);
        let container = {
            let ns = Arc::clone(&ns);
            let lb = place.lb.clone();
            Box::new(move || {
                let args: Vec<&str> = run.iter().map(String::as_str).collect();
                Peer::spawn_in(Some(&ns), lb.as_deref(), &args)
            })
        };
        // The liveness probe's command, or (`startup`) the startupProbe's: natsprobe's with
        // `--startup` on the same state dir, the others' the same command.
        let probe_command = |startup: bool| -> ProbeCommand {
            match checker {
                Checker::Natsprobe => {
                    let ns = Arc::clone(&ns);
                    let mut args = check.clone();
                    args.extend(["--state-dir".into(), state.path().to_string_lossy().into()]);
                    if startup {
                        args.push("--startup".into());
                    }
                    let lb = place.lb.clone();
                    Box::new(move || {
                        let args: Vec<&str> = args.iter().map(String::as_str).collect();
                        let p = probe(&args).ns(&ns).sampling_defaults();
                        match &lb {
                            Some(procs) => p.in_cgroup(procs).command(),
                            None => p.command(),
                        }
                    })
                }
                Checker::TcpSocket => {
                    let (node, target) = (place.node.name.clone(), format!("{ip}/8080"));
                    Box::new(move || {
                        in_netns(
                            &node,
                            &["bash", "-c", &format!("exec 3<>/dev/tcp/{target}")],
                        )
                    })
                }
                Checker::Serve | Checker::InPlace => unreachable!("serve's probes are httpGet"),
                Checker::Grep => {
                    let pod = ns.name.clone();
                    Box::new(move || {
                        in_netns(
                            &pod,
                            &[
                                "/bin/grep",
                                "-qE",
                                crate::harness::GREP_ONE_LINER,
                                "/proc/net/tcp",
                                "/proc/net/tcp6",
                            ],
                        )
                    })
                }
            }
        };
        let spec_k = Spec::scaled(t.period, t.timeout, t.failure_threshold, t.backoff_scale);
        if matches!(checker, Checker::Serve | Checker::InPlace) {
            let in_place = checker == Checker::InPlace;
            let (kubelet, sidecar) = serve_pod(
                &ns,
                &check,
                &state,
                place.lb.clone(),
                t,
                container,
                in_place,
            );
            return Pod {
                spec,
                ip,
                ns,
                kubelet,
                sidecar: Some(sidecar),
                check,
                lb: place.lb,
                _state: state,
            };
        }
        // As the README's manifests: a startupProbe twice as often as the liveness probe,
        // 60 failures before a restart, so a container still connecting is not restarted.
        let startup = Startup {
            period: t.period / 2,
            timeout: t.timeout,
            failure_threshold: 60,
            probe: probe_command(true),
        };
        let kubelet = Kubelet::start_with(spec_k, Some(startup), probe_command(false), container);
        Pod {
            spec,
            ip,
            ns,
            kubelet,
            sidecar: None,
            check,
            lb: place.lb,
            _state: state,
        }
    }

    /// What one run of this pod's probe that asks NATS costs the servers in CPU: `runs`
    /// runs back to back, each asking about the consumers and the subscription
    /// (`--sample-every 0s --subscription-every 0s`, on a state dir of their own), with the
    /// kubelets stopped: the servers' CPU (`cpu_ticks`) over the runs, less their rate just
    /// before over as long.
    pub fn session_cost(&self, cpu_ticks: impl Fn() -> u64, runs: u32) -> Duration {
        let state = crate::harness::memory_dir("natsprobe-state");
        let mut args = self.check.clone();
        args.extend(
            [
                "--state-dir",
                &state.path().to_string_lossy(),
                "--sample-every",
                "0s",
                "--subscription-every",
                "0s",
            ]
            .map(String::from),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // As the pod's own probe runs: in its load balancer's cgroup, if any.
        let run = || {
            let p = probe(&args).ns(&self.ns).sampling_defaults();
            match &self.lb {
                Some(procs) => p.in_cgroup(procs).run(),
                None => p.run(),
            }
        };
        // The first run matches by address; the cost is of the runs after it.
        run();
        let (quiet_from, quiet_ticks) = (Instant::now(), cpu_ticks());
        std::thread::sleep(Duration::from_secs(3));
        let quiet = (cpu_ticks() - quiet_ticks) as f64 / quiet_from.elapsed().as_secs_f64();
        let (from, ticks) = (Instant::now(), cpu_ticks());
        for _ in 0..runs {
            run();
        }
        let spent = (cpu_ticks() - ticks) as f64 - quiet * from.elapsed().as_secs_f64();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        Duration::from_secs_f64((spent / hz / f64::from(runs)).max(0.0))
    }
}

/// The serve world's pod: `natsprobe serve` with the pod's checks in a native sidecar, as
/// examples/kubernetes/native-sidecar.yaml (`--startup`, a look every period; its own
/// livenessProbe on `/selfz` at half the period, 2 failures, a one-second grace), and the app
/// container's probes httpGet to it, at the exec world's settings. `in_place`: as
/// examples/kubernetes/restart-in-place.yaml, serve exits 88 after 3 unhealthy looks in a row
/// and the sidecar's rules restart the pod's containers in place on it (both killed, then the
/// sidecar started, then the app: `kubelet::InPlacePod`); the app's liveness probe, the
/// fallback, fails 6 times before a restart. Returns the app's kubelet and the sidecar's.
fn serve_pod(
    ns: &Arc<NetNs>,
    check: &[String],
    state: &tempfile::TempDir,
    lb: Option<std::path::PathBuf>,
    t: &Timings,
    container: crate::harness::kubelet::Container,
    in_place: bool,
) -> (Kubelet, Kubelet) {
    let mut args: Vec<std::ffi::OsString> =
        vec![crate::harness::probe::binary().into(), "serve".into()];
    args.extend(check[1..].iter().map(std::ffi::OsString::from));
    args.extend(
        [
            "--startup",
            "--every",
            &humantime(t.period),
            "--state-dir",
            &state.path().to_string_lossy(),
        ]
        .map(std::ffi::OsString::from),
    );
    if in_place {
        args.extend(["--exit-unhealthy", "88"].map(std::ffi::OsString::from));
    }
    let pod = Arc::new(crate::harness::kubelet::InPlacePod::default());
    let part = |on_exit: Vec<i32>, sidecar: bool| {
        in_place.then(|| crate::harness::kubelet::InPlace {
            pod: Arc::clone(&pod),
            on_exit,
            sidecar,
        })
    };
    let sidecar = {
        let ns = Arc::clone(ns);
        Box::new(move || {
            let program = match &lb {
                Some(procs) => crate::harness::service::in_cgroup(procs, &args),
                None => args.clone(),
            };
            let rest: Vec<&str> = program[1..].iter().map(|a| a.to_str().unwrap()).collect();
            let mut serve = Peer::spawn_as(Some(&ns), std::path::Path::new(&program[0]), &rest);
            serve.wait_for("natsprobe serve: answering on", Duration::from_secs(10));
            serve
        })
    };
    let mut own = Spec::scaled(t.period / 2, t.timeout, 2, t.backoff_scale);
    own.grace = Duration::from_secs(1).mul_f64(t.backoff_scale);
    own.in_place = part(vec![88], true);
    let sidecar = Kubelet::start_http(own, None, http_get(ns, 8281, "/selfz"), sidecar);
    let startup = HttpStartup {
        period: t.period / 2,
        timeout: t.timeout,
        failure_threshold: 60,
        probe: http_get(ns, 8281, "/startupz"),
    };
    let fallback = if in_place { 6 } else { t.failure_threshold };
    let mut app = Spec::scaled(t.period, t.timeout, fallback, t.backoff_scale);
    app.in_place = part(vec![], false);
    let kubelet = Kubelet::start_http(app, Some(startup), http_get(ns, 8281, "/livez"), container);
    (kubelet, sidecar)
}

/// `argv` run in the named network namespace (`/run/netns/<name>`).
fn in_netns(name: &str, argv: &[&str]) -> Command {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net=/run/netns/{name}"))
        .arg("--")
        .args(argv);
    cmd
}
