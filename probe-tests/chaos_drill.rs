//! The chaos drill at scaled-down timings: a fleet under the kubelet through a script of
//! faults against NATS and against the pods (probe-tests/harness/chaos). natsprobe at the
//! recommended settings restarts only the pods that need it, each within the time its settings
//! allow; a `tcpSocket` probe and the grep one-liner, in worlds of their own under the same
//! script, for comparison.

use crate::harness::chaos::{
    bounds_table, chaos_drill, chaos_drill_of, stalls_line, Checker, Figures, Timings,
};

#[test]
fn the_chaos_drill() {
    let _serial = crate::harness::timing_lock();
    let t = Timings::scaled();
    let outcome = chaos_drill(&t);
    let figures = Figures(&outcome.tallies, &t);
    let notes = figures.notes();
    let tables = format!(
        "{}\n{}\n\n{}\n{}\nInjections seen:\n{}\n{}",
        figures.settings(),
        stalls_line(&outcome.stalls),
        figures.by_fault(),
        figures.summary(),
        figures.shown(),
        notes
    );
    println!("chaos drill ({:?}):\n{tables}", outcome.took);
    // On a failure, every pod's kubelet events and containers' lines, in a file it names.
    let report = || {
        let logs =
            std::env::temp_dir().join(format!("natsprobe-chaos-drill-{}.log", std::process::id()));
        let all: String = outcome
            .tallies
            .iter()
            .flat_map(|t| {
                t.logs.iter().map(move |(pod, log)| {
                    format!("=== {} world, {pod}\n{log}\n", t.checker.name())
                })
            })
            .collect();
        std::fs::write(&logs, format!("{tables}\n{all}")).unwrap();
        format!(
            "{tables}\n(every pod's events and lines: {})",
            logs.display()
        )
    };
    if std::env::var_os("NATSPROBE_DRILL_LOG").is_some() {
        report();
    }
    for tally in &outcome.tallies {
        let unshown = tally.unshown();
        assert!(
            unshown.is_empty(),
            "{}: injections not seen to take effect: {unshown:?}\n{}",
            tally.checker.name(),
            report()
        );
    }
    let natsprobe = outcome
        .tallies
        .iter()
        .find(|t| t.checker == Checker::Natsprobe)
        .unwrap();
    // Any restart of the throttled consumer's pod, and a second of the poisoned one's, is one
    // that did not help.
    let (working, nats) = natsprobe.useless();
    assert!(
        working + nats == 0 && natsprobe.missed().is_empty() && natsprobe.late().is_empty(),
        "natsprobe missed a goal:\n{notes}\n{}",
        report()
    );
    // Every pod a fault left needing a restart got one, and the half-open ones too.
    let unserved: Vec<_> = natsprobe
        .served
        .iter()
        .filter(|s| s.working_after.is_none())
        .collect();
    assert!(
        unserved.is_empty(),
        "natsprobe left pods unrestarted: {unserved:?}\n{}",
        report()
    );
    // The comparison is a comparison: the others see none of the pods' own faults, and
    // the grep one-liner restarts pods while NATS is down.
    let tcp = outcome
        .tallies
        .iter()
        .find(|t| t.checker == Checker::TcpSocket)
        .unwrap();
    assert!(tcp.missed().len() >= 5, "{}", report());
    let grep = outcome
        .tallies
        .iter()
        .find(|t| t.checker == Checker::Grep)
        .unwrap();
    assert!(grep.useless().1 >= 1, "{}", report());
}

/// The same script in a world where natsprobe runs as `natsprobe serve` in a native sidecar
/// and the kubelet's probes are httpGet: no restart that did not help, none missed, each
/// within its bound (the exec probe's, and a look's staleness); natsprobe's own container is
/// restarted alone, if at all.
#[test]
fn the_chaos_drill_behind_serve() {
    drill_behind_serve(Checker::Serve);
}

/// The same script in a world where `natsprobe serve --exit-unhealthy 88` in the native
/// sidecar restarts each pod's containers in place (`restartPolicyRules`, Kubernetes 1.36+, as
/// the harness kubelet does it after KEP-5532: every container killed at once, then the
/// sidecar started, then the app), the app's httpGet probe the fallback: the same goals.
#[test]
fn the_chaos_drill_restarting_in_place() {
    drill_behind_serve(Checker::InPlace);
}

/// The drill in a world of `serve` sidecars (`checker`): no restart that did not help, none
/// missed, each within its bound; natsprobe's own container restarted alone, if at all.
fn drill_behind_serve(checker: Checker) {
    let _serial = crate::harness::timing_lock();
    let t = Timings::scaled();
    let outcome = chaos_drill_of(&t, &[checker]);
    let figures = Figures(&outcome.tallies, &t);
    let notes = figures.notes();
    let tables = format!(
        "{}\n{}\n\n{}\n{}\nInjections seen:\n{}\n{}",
        figures.settings(),
        stalls_line(&outcome.stalls),
        figures.by_fault(),
        figures.summary(),
        figures.shown(),
        notes
    );
    println!(
        "chaos drill, {} ({:?}):\n{tables}",
        checker.name(),
        outcome.took
    );
    let serve = &outcome.tallies[0];
    let report = || {
        let logs = std::env::temp_dir().join(format!(
            "natsprobe-chaos-drill-{}-{}.log",
            checker.name().replace([' ', ','], "-"),
            std::process::id()
        ));
        let all: String = serve
            .logs
            .iter()
            .map(|(pod, log)| format!("=== {pod}\n{log}\n"))
            .collect();
        std::fs::write(&logs, format!("{tables}\n{all}")).unwrap();
        format!(
            "{tables}\n(every pod's events and lines: {})",
            logs.display()
        )
    };
    if std::env::var_os("NATSPROBE_DRILL_LOG").is_some() {
        report();
    }
    let unshown = serve.unshown();
    assert!(
        unshown.is_empty(),
        "injections not seen to take effect: {unshown:?}\n{}",
        report()
    );
    // As natsprobe's: the throttled consumer never restarted, the poisoned one once at most.
    let (working, nats) = serve.useless();
    assert!(
        working + nats == 0 && serve.missed().is_empty() && serve.late().is_empty(),
        "{} missed a goal:\n{notes}\n{}",
        checker.name(),
        report()
    );
    let unserved: Vec<_> = serve
        .served
        .iter()
        .filter(|s| s.working_after.is_none())
        .collect();
    assert!(
        unserved.is_empty(),
        "pods left unrestarted: {unserved:?}\n{}",
        report()
    );
    println!(
        "natsprobe's own containers restarted: {}; the apps' probes natsprobe did not answer: {}",
        serve.own_restarts, serve.unanswered
    );
    // How the apps were restarted: by serve's exit, in place, or by their own probe.
    let said = |what: &str| -> usize {
        serve
            .logs
            .iter()
            .map(|(_, log)| log.matches(what).count())
            .sum()
    };
    let (in_place, by_probe) = (
        said("Container client: the pod's containers restart in place"),
        said("failed liveness probe"),
    );
    println!("the apps restarted in place: {in_place}; by their own liveness probe: {by_probe}");
    if checker == Checker::InPlace {
        assert!(
            in_place >= 1 && by_probe == 0,
            "the fallback probe acted before serve: {in_place} in place, {by_probe} by the probe\n{}",
            report()
        );
    }
}

/// docs/chaos-drill.md's table of bounds is the drill's own, at both timings.
#[test]
fn the_documented_bounds_are_the_drills() {
    let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/chaos-drill.md");
    let doc = std::fs::read_to_string(doc).unwrap();
    let table = bounds_table();
    assert!(
        doc.contains(&table),
        "docs/chaos-drill.md lacks the drill's bounds; they are now:\n{table}"
    );
}

/// A drill run from the README on a machine where probe-tests/setup has not run says in one
/// line what is missing and how to get it; here, where it has, nothing is.
#[test]
fn a_drill_says_what_is_missing() {
    let empty = tempfile::tempdir().unwrap();
    let said = crate::harness::missing_for_a_drill(empty.path()).unwrap();
    assert!(
        said.contains("nats-server-2.10.26/bin/nats-server is missing: run probe-tests/setup"),
        "{said}"
    );
    assert!(!said.contains('\n'), "{said}");
    assert_eq!(
        crate::harness::missing_for_a_drill(&crate::harness::deps_dir()),
        None
    );
}
