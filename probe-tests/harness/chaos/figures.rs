//! The three worlds' tallies side by side, as tables: one row per fault, the goals world by
//! world, how each injection was seen, and the notes on every goal missed.

use super::fleet::{Kind, FLEET};
use super::script::{Fault, Injected, Need};
use super::tally::{Served, Tally, ONCE};
use super::{secs, Timings};
use std::time::Duration;

/// The worlds' tallies, as tables.
pub struct Figures<'a>(pub &'a [Tally], pub &'a Timings);

fn span(ds: &[Duration]) -> String {
    match (ds.iter().min(), ds.iter().max()) {
        (Some(a), Some(b)) if a == b => secs(*a),
        (Some(a), Some(b)) => format!("{}–{}", secs(*a), secs(*b)),
        _ => "-".into(),
    }
}

impl Figures<'_> {
    /// One row per fault: the pods it hit, and in each world what came of them.
    pub fn by_fault(&self) -> String {
        let Figures(tallies, _) = self;
        let mut out = String::from("| fault | at | pods hit | needs a restart |");
        for t in tallies.iter() {
            out.push_str(&format!(" {} |", t.checker.name()));
        }
        out.push_str(&format!(
            " bound ({}) | the guard (CronJob) |\n|---|---|---|---|",
            tallies[0].checker.name()
        ));
        out.push_str(&"---|".repeat(tallies.len() + 2));
        out.push('\n');
        let faults: Vec<Fault> = tallies[0].injected.iter().map(|f| f.fault).collect();
        for fault in faults {
            let first = tallies[0]
                .injected
                .iter()
                .find(|f| f.fault == fault)
                .unwrap();
            let names: Vec<&str> = first.hit.iter().map(|(p, _)| FLEET[*p].name).collect();
            let needs = first
                .hit
                .iter()
                .filter(|(_, n)| *n != Need::None)
                .map(|(_, n)| *n)
                .next();
            let need = match needs {
                None => "no".to_string(),
                Some(Need::Restart) if fault == Fault::ClusterDown => {
                    "yes, once NATS is back (clients that gave up)".into()
                }
                Some(Need::Restart) => "yes".into(),
                Some(Need::Helps) => {
                    "helps (recovers by itself only when nats.go's pings notice)".into()
                }
                Some(Need::Once) => "no, though it looks like a hang: once at most".into(),
                Some(Need::None) => unreachable!(),
            };
            let pods = match names.len() {
                0 => "none".to_string(),
                n if n == FLEET.len() => "all".to_string(),
                _ => names.join(", "),
            };
            let at = first.at.saturating_duration_since(tallies[0].t0);
            out.push_str(&format!(
                "| {} | +{} | {pods} | {need} |",
                fault.describe(),
                secs(at)
            ));
            for t in tallies.iter() {
                out.push_str(&format!(" {} |", cell(t, fault)));
            }
            let bounds: Vec<Duration> = tallies[0]
                .served
                .iter()
                .filter(|s| s.fault == fault)
                .filter_map(|s| s.bound)
                .collect();
            let bound = bounds
                .iter()
                .max()
                .map_or("-".into(), |b| format!("≤ {}", secs(*b)));
            out.push_str(&format!(" {bound} | {} |\n", tallies[0].guard_cell(first)));
        }
        out
    }

    /// The settings the drill ran at.
    pub fn settings(&self) -> String {
        let t = self.1;
        format!(
            "{} timings: periodSeconds {}, failureThreshold {}, timeoutSeconds {}; a startupProbe of the same command (natsprobe's with --startup) every {}, failureThreshold 60; --stall-after {} (--sample-every {}), --half-open-after {} (called at {}), ack_wait {}; nats.go: {} reconnects {} apart, PingInterval {}; the kubelet's back-off at {}×",
            t.name,
            secs(t.period),
            t.failure_threshold,
            secs(t.timeout),
            secs(t.period / 2),
            secs(t.stall_after),
            secs(t.sample_every()),
            secs(t.half_open_after),
            secs(t.half_open_seen()),
            secs(t.ack_wait),
            t.max_reconnects,
            secs(t.reconnect_wait),
            secs(t.ping_interval),
            t.backoff_scale,
        )
    }

    /// The goals, world by world.
    pub fn summary(&self) -> String {
        let Figures(tallies, _) = self;
        let mut out = String::from("| |");
        for t in tallies.iter() {
            out.push_str(&format!(" {} |", t.checker.name()));
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(tallies.len()));
        let row = |label: &str, f: &dyn Fn(&Tally) -> String| {
            let mut r = format!("\n| {label} |");
            for t in tallies.iter() {
                r.push_str(&format!(" {} |", f(t)));
            }
            r
        };
        out.push_str(&row("restarts that helped", &|t| t.helped().to_string()));
        out.push_str(&row(
            "restarts that did not help: the pod was working (or the restart did not fix it) / NATS was the problem",
            &|t| {
                let (working, nats) = t.useless();
                format!("{working} / {nats}")
            },
        ));
        out.push_str(&row(
            "restarts for a hang no restart fixes (a poison message), one a pod at most",
            &|t| t.once().to_string(),
        ));
        out.push_str(&row("pods that needed one and never got it", &|t| {
            t.missed().len().to_string()
        }));
        out.push_str(&row("fault → restart, slowest", &|t| {
            let ds: Vec<Duration> = t.served.iter().filter_map(|s| s.restart_after).collect();
            ds.iter().max().map_or("-".into(), |d| secs(*d))
        }));
        out.push_str(&row(
            "NATS sessions the probes opened (the busiest second)",
            &|t| match &t.asked {
                Some(a) => format!("{} ({})", a.sessions, a.busiest_second),
                None => "none: it asks NATS nothing".into(),
            },
        ));
        out.push_str(&row(
            "their cost to the servers' CPU",
            &|t| match &t.asked {
                Some(a) if !a.per_session.is_empty() => format!(
                    "{:.2}s ({:.2}% of a core; per session {})",
                    a.cpu.as_secs_f64(),
                    100.0 * a.cpu.as_secs_f64() / t.span.as_secs_f64(),
                    a.per_session
                        .iter()
                        .map(|(k, c)| format!(
                            "{} {:.1}ms",
                            kind_name(*k),
                            c.as_secs_f64() * 1000.0
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => "-".into(),
            },
        ));
        out.push_str(&row("servers' CPU over the script, everything", &|t| {
            format!(
                "{:.2}s ({:.1}% of a core over {})",
                t.cpu.as_secs_f64(),
                100.0 * t.cpu.as_secs_f64() / t.span.as_secs_f64(),
                secs(t.span)
            )
        }));
        out.push('\n');
        out
    }

    /// Every restart that did not help and every need missed or late, with the probe's
    /// words: what the test prints when a goal is missed.
    pub fn notes(&self) -> String {
        let Figures(tallies, _) = self;
        let mut out = String::new();
        for t in tallies.iter() {
            for r in t.restarts.iter().filter(|r| r.useless.is_some()) {
                out.push_str(&format!(
                    "{}: restart of {} at +{} did not help ({}): {}\n",
                    t.checker.name(),
                    FLEET[r.pod].name,
                    secs(r.at),
                    r.useless.unwrap(),
                    r.line
                ));
            }
            for s in t.missed() {
                out.push_str(&format!(
                    "{}: {} needed a restart ({}) and never got one\n",
                    t.checker.name(),
                    FLEET[s.pod].name,
                    s.fault.describe()
                ));
            }
            for s in t.late() {
                out.push_str(&format!(
                    "{}: {} restarted {} after {}, later than its bound {}\n",
                    t.checker.name(),
                    FLEET[s.pod].name,
                    secs(s.restart_after.unwrap()),
                    s.fault.describe(),
                    secs(s.bound.unwrap())
                ));
            }
            for (fault, why) in t.unshown() {
                out.push_str(&format!(
                    "{}: {} was not seen to take effect: {why}\n",
                    t.checker.name(),
                    fault.describe()
                ));
            }
        }
        out
    }

    /// How each injection was seen to take effect (the natsprobe world's).
    pub fn shown(&self) -> String {
        let Figures(tallies, _) = self;
        tallies[0]
            .injected
            .iter()
            .map(|f| {
                format!(
                    "- {}: {}\n",
                    f.fault.describe(),
                    match &f.shown {
                        Ok(s) => s.clone(),
                        Err(e) => format!("NOT SEEN: {e}"),
                    }
                )
            })
            .collect()
    }
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Bento { .. } => "consumer",
        Kind::Replica { monitor: false, .. } => "replica",
        Kind::Replica { monitor: true, .. } => "replica with --monitor",
        Kind::Producer => "producer",
    }
}

impl Tally {
    /// When the guard first named the durable a pod's fault hit, after the fault (the
    /// throttled one as NATS's).
    fn guard_cell(&self, f: &Injected) -> String {
        let durables: Vec<String> = f
            .hit
            .iter()
            .filter_map(|(p, _)| FLEET[*p].durable())
            .map(|(s, d)| format!("{s}/{d}"))
            .collect();
        if durables.is_empty()
            || f.fault.of_nats()
            || !matches!(FLEET[f.hit[0].0].kind, Kind::Bento { .. })
        {
            return "-".into();
        }
        let since = f.at.saturating_duration_since(self.t0);
        // The guard names a stall NATS holds back `S/D (NATS's)`.
        let named = |names: &[String]| {
            names.iter().find_map(|n| {
                durables
                    .iter()
                    .find_map(|d| match n.strip_prefix(d.as_str()) {
                        Some("") => Some(""),
                        Some(" (NATS's)") => Some(", as NATS's"),
                        _ => None,
                    })
            })
        };
        match self
            .guard
            .iter()
            .filter(|(at, _)| *at >= since)
            .find_map(|(at, names)| Some((at, named(names)?)))
        {
            Some((at, how)) => format!("alerted {} after{how}", secs(*at - since)),
            None => "no alert".into(),
        }
    }
}

/// One world's outcome for one fault.
fn cell(t: &Tally, fault: Fault) -> String {
    let needs: Vec<&Served> = t.served.iter().filter(|s| s.fault == fault).collect();
    let useless = t
        .restarts
        .iter()
        .filter(|r| r.useless.is_some_and(|u| u != ONCE) && t.after(r) == Some(fault))
        .count();
    let mut parts = Vec::new();
    // The one restart each pod this fault left a hang no restart fixes may get.
    if let Some(f) = t.injected.iter().find(|f| f.fault == fault) {
        let once: Vec<Duration> = t
            .restarts
            .iter()
            .filter(|r| r.useless == Some(ONCE) && f.hit.contains(&(r.pod, Need::Once)))
            .map(|r| r.when.saturating_duration_since(f.at))
            .collect();
        if !once.is_empty() {
            let pods = f.hit.iter().filter(|(_, n)| *n == Need::Once).count();
            parts.push(format!(
                "{}/{pods} restarted once, after {}",
                once.len(),
                span(&once)
            ));
        }
    }
    let helped: Vec<&&Served> = needs.iter().filter(|s| s.working_after.is_some()).collect();
    if !helped.is_empty() {
        let restarted: Vec<Duration> = helped.iter().filter_map(|s| s.restart_after).collect();
        let working: Vec<Duration> = helped.iter().filter_map(|s| s.working_after).collect();
        parts.push(format!(
            "{}/{} restarted after {}, working after {}",
            helped.len(),
            needs.len(),
            span(&restarted),
            span(&working)
        ));
    }
    let unhelped = |restarted: bool| {
        needs
            .iter()
            .filter(|s| s.working_after.is_none() && s.recovered_after.is_none())
            .filter(|s| s.restart_after.is_some() == restarted)
            .count()
    };
    if unhelped(false) > 0 {
        parts.push(format!("{} never restarted", unhelped(false)));
    }
    if unhelped(true) > 0 {
        parts.push(format!("{} restarted, never working again", unhelped(true)));
    }
    let recovered: Vec<Duration> = needs.iter().filter_map(|s| s.recovered_after).collect();
    if !recovered.is_empty() {
        parts.push(format!(
            "{} not restarted, recovered by themselves after {}",
            recovered.len(),
            span(&recovered)
        ));
    }
    if useless > 0 {
        parts.push(format!("{useless} restarts that did not help"));
    }
    match parts.is_empty() {
        true => "no restart".into(),
        false => parts.join("; "),
    }
}
