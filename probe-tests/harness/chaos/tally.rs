//! The tally of one world: each restart the kubelet made, judged against what the script did
//! to that pod (never against what the check said), each need met or missed, the times, and
//! the servers' CPU; and the tables that put the three worlds side by side.

use super::cron::GuardRun;
use super::fleet::{Checker, Kind, FLEET};
use super::script::{Fault, Injected, Need, Ran};
use super::world::World;
use super::{secs, Timings};
use std::time::{Duration, Instant};

/// The one restart a pod a fault left a hang no restart fixes may get (`Need::Once`), as
/// docs/checks.md's principle 4 allows: counted apart from those that did not help.
pub const ONCE: &str = "once for a hang no restart fixes";

/// A restart by the kubelet (its kill after the probe failed `failureThreshold` times).
#[derive(Debug, Clone)]
pub struct Restart {
    pub pod: usize,
    /// Since the script began.
    pub at: Duration,
    pub when: Instant,
    /// Why it did not help (None: it did).
    pub useless: Option<&'static str>,
    /// The probe's last failure before it, as the kubelet's event has it.
    pub line: String,
}

/// A pod the script left needing a restart, and what came of it.
#[derive(Debug, Clone)]
pub struct Served {
    pub fault: Fault,
    pub pod: usize,
    pub need: Need,
    /// From the fault (for clients that gave up: from NATS's return) to the first restart.
    pub restart_after: Option<Duration>,
    /// To the first ack (the producer: its connection) of a container a restart started:
    /// the restart that helped.
    pub working_after: Option<Duration>,
    /// Without a restart, from the fault to the client's own recovery (or the path's heal).
    pub recovered_after: Option<Duration>,
    /// The slowest restart the probe's settings allow (natsprobe only).
    pub bound: Option<Duration>,
}

/// What the fleet's probes asked of NATS over the script: the NATS sessions they opened
/// (each a login through the auth callout: a look at the consumers, with the subscription's
/// lookup), and their cost to the servers, each session at what one of its pod's kind
/// cost when measured in place after the script.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    pub sessions: usize,
    /// The most sessions that began within one second.
    pub busiest_second: usize,
    /// Measured per session: (what kind of pod, the servers' CPU).
    pub per_session: Vec<(Kind, Duration)>,
    /// Sessions × their cost.
    pub cpu: Duration,
}

pub struct Tally {
    pub checker: Checker,
    pub injected: Vec<Injected>,
    pub restarts: Vec<Restart>,
    pub served: Vec<Served>,
    /// The servers' CPU (user and system, every node) over the script, and its length.
    pub cpu: Duration,
    pub span: Duration,
    /// natsprobe's sessions (both natsprobe worlds) and their cost (priced in the exec
    /// world; serve's looks hold one session each, so a session's price is not a look's).
    pub asked: Option<Asked>,
    /// The guard's CronJob: each run's alert, the durables it named, since the script began.
    pub guard: Vec<(Duration, Vec<String>)>,
    /// Every pod's kubelet events, for a failure's report.
    pub logs: Vec<(String, String)>,
    pub t0: Instant,
    /// The serve world: natsprobe's own containers started again (killed by their kubelet, or
    /// exited), over every pod, and the app containers' httpGet probes that failed while
    /// natsprobe was not answering them (refused, or timed out).
    pub own_restarts: usize,
    pub unanswered: usize,
}

impl Tally {
    pub fn new(
        w: &World,
        t: &Timings,
        ran: Ran,
        guard: Vec<GuardRun>,
        costs: &[(Kind, Duration)],
    ) -> Tally {
        let Ran {
            mut injected,
            ticks,
            t0,
            ended,
        } = ran;
        injected.sort_by_key(|f| f.at);
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        let mut served: Vec<Served> = Vec::new();
        // Each need, open from when a restart can help: (index into served, open from,
        // closes without a restart at).
        let mut open: Vec<(usize, Instant, Option<Instant>)> = Vec::new();
        for f in &injected {
            for &(pod, need) in &f.hit {
                if matches!(need, Need::None | Need::Once) {
                    continue;
                }
                let closes = match need {
                    Need::Helps => {
                        let own = w.pods[pod].kubelet.with_runs(|runs| {
                            runs.iter()
                                .rev()
                                .find(|r| r.started <= f.at)
                                .and_then(|r| r.first_after(&["reconnected"], f.at))
                        });
                        Some(own.map_or(f.until, |o| o.min(f.until)))
                    }
                    _ => None,
                };
                open.push((served.len(), f.from, closes));
                served.push(Served {
                    fault: f.fault,
                    pod,
                    need,
                    restart_after: None,
                    working_after: None,
                    recovered_after: None,
                    bound: match w.checker {
                        Checker::Natsprobe => t.bound(f.fault, FLEET[pod].kind),
                        Checker::Serve | Checker::InPlace => t
                            .bound(f.fault, FLEET[pod].kind)
                            .map(|b| b + t.serve_staleness()),
                        _ => None,
                    },
                });
            }
        }
        let mut restarts = Vec::new();
        let mut logs = Vec::new();
        for (p, pod) in w.pods.iter().enumerate() {
            let events = pod.kubelet.events();
            let containers = pod.kubelet.with_runs(|runs| {
                runs.iter()
                    .map(|r| {
                        format!(
                            "  container started at +{}:\n{}",
                            secs(r.started.saturating_duration_since(t0)),
                            r.output()
                                .lines()
                                .map(|l| format!("    {l}"))
                                .collect::<Vec<_>>()
                                .join("\n")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            let kubelet_began = events.first().map_or(t0, |e| e.at);
            // From when a fault left this pod a hang no restart fixes, and whether it had its
            // one restart for it.
            let once_from = injected
                .iter()
                .filter(|f| f.hit.contains(&(p, Need::Once)))
                .map(|f| f.at)
                .min();
            let mut had_once = false;
            // Every probe run's line, passes too: what a run that did not fail saw.
            let probed = pod
                .kubelet
                .probed()
                .iter()
                .map(|(at, ok, line)| {
                    let at = match at.checked_duration_since(t0) {
                        Some(d) => format!("+{}", secs(d)),
                        None => format!("-{}", secs(t0 - *at)),
                    };
                    format!("    {at} {} {line}", if *ok { "pass" } else { "FAIL" })
                })
                .collect::<Vec<_>>()
                .join("\n");
            logs.push((
                FLEET[p].name.to_string(),
                format!(
                    "(the kubelet's times count from {} before the script)\n{}\n{containers}\n  probe runs (from the script's start):\n{probed}",
                    secs(t0.saturating_duration_since(kubelet_began)),
                    pod.kubelet.log()
                ),
            ));
            for (k, e) in events.iter().enumerate() {
                if e.reason != "Killing" {
                    continue;
                }
                let line = events[..k]
                    .iter()
                    .rev()
                    .find(|u| u.reason == "Unhealthy")
                    .map(|u| u.message.clone())
                    .unwrap_or_default();
                // The container this restart started, and when it came to work, if it did.
                let works = pod.kubelet.with_runs(|runs| {
                    let next = runs.iter().find(|r| r.started > e.at)?;
                    next.first_after(&[FLEET[p].working_line()], next.started)
                });
                let mut needed = false;
                for (s, from, closes) in &open {
                    let need = &mut served[*s];
                    let done = need.working_after.is_some() || closes.is_some_and(|c| e.at >= c);
                    if need.pod != p || done || e.at < *from {
                        continue;
                    }
                    needed = true;
                    need.restart_after.get_or_insert(e.at - *from);
                    need.working_after = works.map(|at| at - *from);
                }
                // A NATS fault on (or less than a window behind); the flaky auth service, which
                // refuses only the probes' logins while the pods' own faults show, aside.
                let nats_on = |flaky: bool| {
                    injected.iter().any(|f| {
                        f.fault.of_nats()
                            && (flaky || f.fault != Fault::Flaky)
                            && e.at >= f.at
                            && e.at <= f.until + t.window()
                    })
                };
                let useless = match (needed, works.is_some()) {
                    (true, true) => None,
                    _ if !had_once
                        && once_from.is_some_and(|from| e.at >= from)
                        && !nats_on(false) =>
                    {
                        had_once = true;
                        Some(ONCE)
                    }
                    _ if nats_on(true) => Some("NATS was the problem"),
                    (true, false) => Some("the new container did not work either"),
                    (false, _) => Some("the pod was working"),
                };
                restarts.push(Restart {
                    pod: p,
                    when: e.at,
                    at: e.at.saturating_duration_since(t0),
                    useless,
                    line,
                });
            }
        }
        for (s, from, closes) in &open {
            let need = &mut served[*s];
            if need.working_after.is_none() {
                need.recovered_after = closes.map(|c| c.saturating_duration_since(*from));
            }
        }
        restarts.sort_by_key(|r| r.at);
        let asked = w.checker.is_natsprobe().then(|| asked(w, costs, t0, ended));
        logs.push((
            "the guard".into(),
            guard
                .iter()
                .map(|g| {
                    format!(
                        "  +{} exit {:?}: {}",
                        secs(g.ended.saturating_duration_since(t0)),
                        g.code,
                        g.line
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ));
        let guard = guard
            .iter()
            .filter(|g| g.code == Some(1))
            .map(|g| {
                let named = g
                    .line
                    .rsplit_once(": ")
                    .map(|(_, names)| names.split(", ").map(str::to_string).collect())
                    .unwrap_or_default();
                (g.ended.saturating_duration_since(t0), named)
            })
            .collect();
        let own_restarts = w
            .pods
            .iter()
            .filter_map(|p| p.sidecar.as_ref())
            .map(|k| {
                k.events()
                    .iter()
                    .filter(|e| e.reason == "Started")
                    .count()
                    .saturating_sub(1)
            })
            .sum();
        let unanswered = w
            .pods
            .iter()
            .filter(|p| p.sidecar.is_some())
            .map(|p| {
                p.kubelet
                    .probed()
                    .iter()
                    .filter(|(_, ok, line)| !ok && !line.contains("statuscode"))
                    .count()
            })
            .sum();
        for (p, pod) in w.pods.iter().enumerate() {
            if let Some(sidecar) = &pod.sidecar {
                let name = format!("{} (natsprobe's own container)", FLEET[p].name);
                let runs = sidecar.with_runs(|runs| {
                    runs.iter()
                        .map(|r| r.output())
                        .collect::<Vec<_>>()
                        .join("\n  ---\n")
                });
                logs.push((
                    name,
                    format!("{}\n  natsprobe serve's log:\n{runs}", sidecar.log()),
                ));
            }
        }
        Tally {
            own_restarts,
            unanswered,
            checker: w.checker,
            injected,
            restarts,
            served,
            cpu: Duration::from_millis(ticks * 1000 / hz),
            span: ended - t0,
            asked,
            guard,
            logs,
            t0,
        }
    }

    /// The fault injected last before a restart: the one it followed.
    pub fn after(&self, r: &Restart) -> Option<Fault> {
        self.injected
            .iter()
            .filter(|f| f.at <= r.when)
            .max_by_key(|f| f.at)
            .map(|f| f.fault)
    }

    pub fn helped(&self) -> usize {
        self.restarts.iter().filter(|r| r.useless.is_none()).count()
    }

    fn count(&self, why: &str) -> usize {
        self.restarts
            .iter()
            .filter(|r| r.useless == Some(why))
            .count()
    }

    /// Restarts that did not help: (the pod was working, NATS was the problem); the one a
    /// poisoned pod may get is neither (`once`).
    pub fn useless(&self) -> (usize, usize) {
        let nats = self.count("NATS was the problem");
        let others = self.restarts.iter().filter(|r| r.useless.is_some()).count();
        (others - nats - self.once(), nats)
    }

    /// Restarts of pods a fault left a hang no restart fixes, each pod's first (a second is
    /// one that did not help).
    pub fn once(&self) -> usize {
        self.count(ONCE)
    }

    /// Pods that needed a restart (their client could not recover by itself) and never got
    /// one.
    pub fn missed(&self) -> Vec<&Served> {
        self.served
            .iter()
            .filter(|s| s.need == Need::Restart && s.working_after.is_none())
            .collect()
    }

    /// Restarts that came later than the probe's settings allow.
    pub fn late(&self) -> Vec<&Served> {
        self.served
            .iter()
            .filter(|s| matches!((s.restart_after, s.bound), (Some(r), Some(b)) if r > b))
            .collect()
    }

    /// Injections whose effect was not seen.
    pub fn unshown(&self) -> Vec<(Fault, &str)> {
        self.injected
            .iter()
            .filter_map(|f| f.shown.as_ref().err().map(|e| (f.fault, e.as_str())))
            .collect()
    }
}

/// The sessions natsprobe's probes opened between `from` and `to`, as the callout service
/// answered their logins (named `natsprobe-<pid>-...`; the guard's are its own), priced at
/// what one of their pod's kind costs (nothing where `costs` has no price).
fn asked(w: &World, costs: &[(Kind, Duration)], from: Instant, to: Instant) -> Asked {
    let sessions: Vec<(Instant, Kind)> = w
        .logins()
        .into_iter()
        .filter(|l| l.at >= from && l.at <= to)
        .filter(|l| l.name.starts_with("natsprobe-") && l.name != "natsprobe-guard")
        .filter_map(|l| {
            let pod = w.pods.iter().find(|p| p.ip == l.host)?;
            Some((l.at, pod.spec.kind))
        })
        .collect();
    let cost = |kind: Kind| {
        costs
            .iter()
            .find(|(k, _)| match (k, kind) {
                (Kind::Bento { .. }, Kind::Bento { .. }) => true,
                (Kind::Replica { monitor: a, .. }, Kind::Replica { monitor: b, .. }) => *a == b,
                _ => false,
            })
            .map_or(Duration::ZERO, |(_, c)| *c)
    };
    let busiest_second = sessions
        .iter()
        .map(|(at, _)| {
            sessions
                .iter()
                .filter(|(b, _)| *b >= *at && *b < *at + Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0);
    Asked {
        sessions: sessions.len(),
        busiest_second,
        per_session: costs.to_vec(),
        cpu: sessions.iter().map(|(_, k)| cost(*k)).sum(),
    }
}
