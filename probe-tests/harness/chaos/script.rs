//! The script of faults, the same in every world at the same moments: first the pods' own
//! faults, overlapping each other while NATS is well; then NATS's, one after the other and
//! some overlapping, on nodes whose clients are known when each begins. Each injection's
//! effect is shown from outside the pods, or the injection says why not.

use super::fleet::{Kind, BULK_COUNT, BULK_SIZE, FLEET, POISONED, POISON_SEQ, THROTTLED};
use super::world::World;
use super::{secs, Timings};
use crate::harness::callout::Answer;
use crate::harness::load::Starved;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The Bento-like consumer stops acking (its handler stuck): only a restart clears it.
    Wedged,
    /// The same on a stream that deletes from the front (max_msgs, discard old): its
    /// messages are lost to retention while the ack floor moves.
    Retention,
    /// Its durable deleted: the app creates it when it starts.
    DurableDeleted,
    /// A replica of a deliver group drops its subscription and keeps its connection.
    Deaf,
    /// The same, with `--monitor` in its probe.
    DeafMonitor,
    /// A node cut off from the others (its routes), its clients still connected to it.
    Partition,
    /// A node killed and started again, sooner than the clients' reconnect budget.
    NodeRestart,
    /// The JetStream meta leader steps down; another is elected.
    MetaElection,
    /// A node stopped for most of every second.
    Starved,
    /// The auth callout service down; connected clients stay connected.
    AuthDown,
    /// A node lost to its clients without a word (no FIN, no RST): half-open connections.
    Lost,
    /// Every node down for longer than the clients' reconnect budget: they give up.
    ClusterDown,
    /// While the pods' own faults show: the auth service refuses one of each probe's logins
    /// in three and answers another after the probe's deadline.
    Flaky,
    /// Large messages for a push consumer NATS throttles (`rate_limit_bps`): the server
    /// delivers a burst, which the pod acks, and holds the rest back.
    Throttled,
    /// Messages for a serialized consumer whose app NAKs one of them with a delay longer than
    /// the drill: nothing after it is delivered, to this pod or a new one.
    Poison,
}

impl Fault {
    pub fn describe(self) -> &'static str {
        match self {
            Fault::Wedged => "consumer wedged (stops acking)",
            Fault::Retention => "consumer wedged on a max_msgs stream: losing messages",
            Fault::DurableDeleted => "durable deleted",
            Fault::Deaf => "replica deaf (dropped its subscription)",
            Fault::DeafMonitor => "replica deaf, probe with --monitor",
            Fault::Partition => "node n3 partitioned from the cluster",
            Fault::NodeRestart => "node n3 restarted",
            Fault::MetaElection => "meta-leader election",
            Fault::Starved => "node n2 starved of CPU",
            Fault::AuthDown => "auth callout service down",
            Fault::Lost => "node n2 lost without a word (half-open)",
            Fault::ClusterDown => "whole cluster down, clients give up",
            Fault::Flaky => "auth service flaky: each probe's logins refused, late, answered",
            Fault::Throttled => {
                "push consumer throttled by NATS (rate_limit_bps), the pod acking all it gets"
            }
            Fault::Poison => {
                "poison message NAKed with a delay longer than the drill (max_ack_pending 1)"
            }
        }
    }

    /// Faults of NATS (no pod of its own doing): a restart during one never helps by itself.
    pub fn of_nats(self) -> bool {
        !matches!(
            self,
            Fault::Wedged
                | Fault::Retention
                | Fault::DurableDeleted
                | Fault::Deaf
                | Fault::DeafMonitor
                | Fault::Throttled
                | Fault::Poison
        )
    }
}

/// What the fault did to the pods it hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing a restart fixes: NATS's own trouble, which passes.
    None,
    /// The client can no longer recover by itself: it needs a restart.
    Restart,
    /// The client recovers by itself only when it notices (nats.go's pings, minutes in
    /// production) or the path heals: a restart helps, sooner.
    Helps,
    /// Nothing a restart fixes, though from outside it is a hang (work waiting on the pod's
    /// own unacknowledged message): restarted once at most, as docs/checks.md's principle 4
    /// allows, never in a loop.
    Once,
}

/// One fault as it was injected in one world.
#[derive(Debug, Clone)]
pub struct Injected {
    pub fault: Fault,
    pub at: Instant,
    /// When it ended (NATS's faults); `at` for the pods' own, which last until a restart.
    pub until: Instant,
    /// From when a restart can help (the cluster's return for clients that gave up).
    pub from: Instant,
    /// The pods it hit, with what they need.
    pub hit: Vec<(usize, Need)>,
    /// How the injection was seen to take effect, or why it was not.
    pub shown: Result<String, String>,
}

impl Injected {
    fn new(fault: Fault, at: Instant) -> Injected {
        Injected {
            fault,
            at,
            until: at,
            from: at,
            hit: Vec::new(),
            shown: Err("not checked".into()),
        }
    }
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

fn pod(name: &str) -> usize {
    FLEET.iter().position(|p| p.name == name).unwrap()
}

/// A JetStream request of the harness's own, asked again (up to three times) while its answer
/// is not `complete` (no server answered in time on a busy machine): its failing says nothing
/// about a fault.
fn answered(
    mut ask: impl FnMut() -> serde_json::Value,
    complete: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut answer = ask();
    for _ in 0..2 {
        if complete(&answer) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        answer = ask();
    }
    answer
}

fn no_fatal(answer: &serde_json::Value) -> bool {
    answer.get("fatal").is_none()
}

fn seq(info: &serde_json::Value, field: &str) -> Option<u64> {
    info[field]["consumer_seq"].as_u64()
}

/// One world's run of the script.
pub struct Ran {
    pub injected: Vec<Injected>,
    /// The servers' CPU ticks over the script.
    pub ticks: u64,
    pub t0: Instant,
    /// When it ended: every restart it asked for done, and settled.
    pub ended: Instant,
}

/// Runs the script in `w` from `t0`, the guard's CronJob beside it.
pub fn run(w: &mut World, t: &Timings, t0: Instant) -> Ran {
    w.start_guard(t);
    sleep_until(t0);
    let cpu_at_start = w.cpu_ticks();
    let mut done = pod_faults(w, t, t0);
    // The pods' faults show to the probes (a look comes, the stall clock runs) while the auth
    // service is flaky.
    let mut flaky = flaky_on(w, t);
    // NATS's faults, once the pods' own must all have been restarted (by their bounds).
    let slowest = [Fault::Wedged, Fault::Retention]
        .iter()
        .filter_map(|&f| t.bound(f, Kind::Bento { stream: "ORDERS" }))
        .max()
        .unwrap();
    // The throttled and the poisoned consumers seen held a step before, not to put NATS's
    // faults off.
    sleep_until(t0 + t.step * 5 + slowest);
    for f in &mut done {
        held(w, t, f);
    }
    sleep_until(t0 + t.step * 6 + slowest);
    flaky_off(w, &mut flaky);
    done.push(flaky);
    let pause = |steps: u32| std::thread::sleep(t.step * steps);
    let mut nats = Vec::new();
    nats.push(partition(w, t));
    pause(3);
    nats.push(node_restart(w, t));
    pause(3);
    nats.push(meta_election(w, t));
    pause(2);
    nats.extend(starved_and_auth_down(w, t));
    pause(2);
    nats.push(lost(w, t));
    // A client that gave up in one of these (none should: each is shorter than their
    // budget) needs a restart from then on, whatever the script meant.
    for f in &mut nats {
        let gave_up: Vec<(usize, Instant)> = (0..w.pods.len())
            .filter_map(|i| Some((i, w.pods[i].line_after("closed", f.at)?)))
            .collect();
        for (i, need) in &mut f.hit {
            if gave_up.iter().any(|(g, _)| g == i) {
                *need = Need::Restart;
            }
        }
        if let Some(first) = gave_up.iter().map(|(_, at)| *at).min() {
            f.from = first;
        }
    }
    done.extend(nats);
    // Time for the pods restarted away from the lost node to work: until the node heals, it
    // keeps its dead clients' subscriptions, and a consumer led there delivers to them.
    pause(5);
    let cluster = cluster_down(w, t);
    done.push(cluster.clone());
    settle(w, t, &cluster);
    Ran {
        injected: done,
        ticks: w.cpu_ticks() - cpu_at_start,
        t0,
        ended: Instant::now(),
    }
}

/// The pods' own faults, one a step after the other, while NATS is well; then their effects,
/// seen from outside while they last (no restart comes this soon; the throttled and the
/// poisoned consumers' are seen by `held`, once they have lasted).
fn pod_faults(w: &mut World, t: &Timings, t0: Instant) -> Vec<Injected> {
    let step = t.step;
    let wedge = |name: &str, fault: Fault| {
        let i = pod(name);
        let mut f = Injected::new(fault, Instant::now());
        w.pods[i].signal(libc::SIGUSR1);
        f.hit = vec![(i, Need::Restart)];
        f
    };
    let mut wedged = wedge("bento-w", Fault::Wedged);
    sleep_until(t0 + step);
    let mut capped = wedge("bento-c", Fault::Retention);
    sleep_until(t0 + step * 2);
    let mut deleted = Injected::new(Fault::DurableDeleted, Instant::now());
    let answer = answered(|| w.delete_durable("ORDERS", "bento-d"), no_fatal);
    deleted.hit = vec![(pod("bento-d"), Need::Restart)];
    // Seen gone at once: its pod, restarted for it (as soon as 1.5 s later), creates it again.
    let info = answered(|| w.consumer("ORDERS", "bento-d"), no_fatal);
    deleted.shown = match info["error"]["err_code"].as_u64() {
        Some(10014) => Ok(format!(
            "CONSUMER.DELETE answered {}; its info: consumer not found",
            answer["success"]
        )),
        _ => Err(format!("still there: {info}")),
    };
    sleep_until(t0 + step * 3);
    let mut deaf = Vec::new();
    for (name, fault) in [("a1", Fault::Deaf), ("m1", Fault::DeafMonitor)] {
        let i = pod(name);
        let mut f = Injected::new(fault, Instant::now());
        let server = w.pods[i].server().unwrap_or_default();
        let before = w.subscriptions_of(node_index(&server), FLEET[i].name);
        w.pods[i].signal(libc::SIGHUP);
        f.hit = vec![(i, Need::Restart)];
        // Seen at once, once the client says it dropped it: a look due now may restart the
        // pod a second later, and its new container holds the subscription again.
        let limit = Instant::now() + Duration::from_secs(1);
        while w.pods[i].line_after("unsubscribed", f.at).is_none() && Instant::now() < limit {
            std::thread::sleep(Duration::from_millis(20));
        }
        let now = w.subscriptions_of(node_index(&server), FLEET[i].name);
        deaf.push((f, i, server, before, now));
        std::thread::sleep(step);
    }

    let floors = |stream, durable| {
        let read =
            |info: &serde_json::Value| (seq(info, "ack_floor"), info["num_pending"].as_u64());
        let info = answered(
            || w.consumer(stream, durable),
            |info| matches!(read(info), (Some(_), Some(_))),
        );
        read(&info)
    };
    let (w_floor, _) = floors("ORDERS", "bento-w");
    let (c_floor, _) = floors("CAPPED", "bento-c");
    let floored = Instant::now();
    // After the first floors: the large messages' publishing slows the harness's own asks.
    let mut throttled = Injected::new(Fault::Throttled, Instant::now());
    let bulk = w.publish("bulk.x", BULK_COUNT, BULK_SIZE);
    throttled.hit = vec![(pod("bento-t"), Need::None)];
    sleep_until(t0 + step * 6);
    let mut poison = Injected::new(Fault::Poison, Instant::now());
    // Ten small messages, published well before this function returns (and drops it).
    let _published = w.publish("poison.x", "10", "64");
    poison.hit = vec![(pod("bento-p"), Need::Once)];
    sleep_until(floored + step * 2);
    let (w_floor2, w_pending) = floors("ORDERS", "bento-w");
    wedged.shown = match (w_floor, w_floor2, w_pending) {
        (Some(a), Some(b), Some(p)) if a == b && p > 0 => Ok(format!(
            "ack floor held at {a} for {:?}, {p} waiting",
            step * 2
        )),
        other => Err(format!("the floor moved or nothing waits: {other:?}")),
    };
    let (c_floor2, _) = floors("CAPPED", "bento-c");
    let acked_since = w.pods[pod("bento-c")].line_after("acked", capped.at + step / 2);
    capped.shown = match (c_floor, c_floor2, acked_since) {
        (Some(a), Some(b), None) if b > a => Ok(format!(
            "ack floor {a} → {b} with no ack: retention deleted them unacknowledged"
        )),
        other => Err(format!("no loss seen (floors, an ack since): {other:?}")),
    };
    // The large messages' publishing goes on after this returns.
    w.aside(bulk);
    let mut done = vec![wedged, capped, deleted, throttled, poison];
    for (mut f, i, server, before, now) in deaf {
        let name = FLEET[i].name;
        let Kind::Replica { group, .. } = FLEET[i].kind else {
            unreachable!("only replicas go deaf")
        };
        let subject = format!("deliver.{group}");
        f.shown = match (before, now) {
            (Some(b), Some(n)) if b.contains(&subject) && !n.contains(&subject) => Ok(format!(
                "{server}'s /connz: {name}'s connection held {subject}, now holds {n:?}"
            )),
            other => Err(format!("{server}'s /connz before and after: {other:?}")),
        };
        done.push(f);
    }
    done
}

/// The throttled and the poisoned consumers, seen held once their faults have lasted longer
/// than a window (their durables' info): the rest of their work waiting, nothing delivered.
fn held(w: &World, t: &Timings, f: &mut Injected) {
    let (stream, durable) = match f.fault {
        Fault::Throttled => (THROTTLED, "bento-t"),
        Fault::Poison => (POISONED, "bento-p"),
        _ => return,
    };
    let info = answered(
        || w.consumer(stream, durable),
        |i| seq(i, "ack_floor").is_some(),
    );
    let stream_seq = |field: &str| info[field]["stream_seq"].as_u64();
    let numbers = (
        stream_seq("delivered"),
        stream_seq("ack_floor"),
        info["num_ack_pending"].as_u64(),
        info["num_pending"].as_u64(),
    );
    let time = |v: &serde_json::Value| natsprobe::observe::jetstream::parse_time(v.as_str()?);
    let ago = match (time(&info["ts"]), time(&info["delivered"]["last_active"])) {
        (Some(ts), Some(last)) => Duration::from_nanos((ts - last).max(0) as u64),
        _ => Duration::ZERO,
    };
    let i = pod(durable);
    let poisoned = w.pods[i].kubelet.with_runs(|runs| {
        runs.iter()
            .any(|r| r.first_after(&["poisoned"], f.at).is_some())
    });
    f.shown = match (f.fault, numbers) {
        // The burst delivered past the first two messages and acked, the rest held.
        (Fault::Throttled, (Some(d), Some(a), Some(0), Some(p)))
            if d > 2 && a == d && p > 0 && ago >= t.window() =>
        {
            Ok(format!(
                "delivered to stream message {d}, all acked; {p} waiting, none awaiting an ack, nothing delivered for {} by the server's clock",
                secs(ago)
            ))
        }
        (Fault::Poison, (Some(d), Some(a), Some(1), Some(p)))
            if d == POISON_SEQ && a == POISON_SEQ - 1 && p > 0 && poisoned =>
        {
            Ok(format!(
                "the pod NAKed stream message {d} with a delay; it awaits its ack, {p} waiting behind it, nothing delivered for {} by the server's clock",
                secs(ago)
            ))
        }
        _ => Err(format!(
            "(delivered, ack floor, awaiting an ack, waiting): {numbers:?}, delivered {ago:?} ago; the pod NAKed it: {poisoned}"
        )),
    };
}

/// The auth service turns flaky for the probes' logins: shown by three logins named as a
/// probe's, from the node.
fn flaky_on(w: &World, t: &Timings) -> Injected {
    let mut f = Injected::new(Fault::Flaky, Instant::now());
    f.hit = (0..w.pods.len()).map(|i| (i, Need::None)).collect();
    let pattern = t.flaky();
    w.flaky(Some(&pattern));
    f.at = Instant::now();
    let logins: Vec<Result<String, String>> = pattern
        .iter()
        .map(|_| w.echo_as(0, "natsprobe-drill", Duration::from_millis(800)))
        .collect();
    f.shown = match &logins[..] {
        [Err(refused), Err(late), Ok(_)]
            if refused.contains("authorization") && !late.contains("authorization") =>
        {
            Ok(format!(
                "three logins named as a probe's: refused ({refused}), no answer in 800ms ({late}), answered"
            ))
        }
        other => Err(format!("three logins named as a probe's: {other:?}")),
    };
    f
}

/// The auth service answers every login as usual again; what the probes made of it.
fn flaky_off(w: &World, f: &mut Injected) {
    w.flaky(None);
    f.until = Instant::now();
    let (refused, late) = w
        .logins()
        .iter()
        .filter(|l| l.at >= f.at && l.at <= f.until && l.name != "natsprobe-drill")
        .fold((0, 0), |(r, l), login| match login.answer {
            Answer::Refused => (r + 1, l),
            Answer::Late(_) => (r, l + 1),
            Answer::AsUsual => (r, l),
        });
    let carried = (0..w.pods.len())
        .map(|i| {
            w.pods[i]
                .kubelet
                .probed()
                .iter()
                .filter(|(at, ok, line)| {
                    *at >= f.at && *at <= f.until && !ok && line.contains("this run could not look")
                })
                .count()
        })
        .sum::<usize>();
    if let Ok(shown) = &f.shown {
        f.shown = Ok(format!(
            "{shown}; the probes' logins: {refused} refused, {late} late; {carried} runs reported the fault their last look saw"
        ));
    }
}

const N2: usize = 1;
const N3: usize = 2;

/// The pods whose client is on `node` now, each needing `need`.
fn hit_on(w: &World, node: &str, need: Need) -> Vec<(usize, Need)> {
    w.pods_on(node).into_iter().map(|i| (i, need)).collect()
}

/// n3 cut off from the others: its clients stay on it.
fn partition(w: &World, t: &Timings) -> Injected {
    let mut f = Injected::new(Fault::Partition, Instant::now());
    f.hit = hit_on(w, "n3", Need::None);
    let quick = Duration::from_millis(800);
    let before = w.echo_via(N3, quick);
    w.partition(N3, true);
    f.at = Instant::now();
    let during = w.echo_via(N3, quick);
    sleep_until(f.at + t.partition);
    w.partition(N3, false);
    f.until = Instant::now();
    f.shown = match (&before, &during) {
        (Ok(_), Err(e)) => Ok(format!(
            "a request through n3 alone to a service on n1: answered before, not during ({e})"
        )),
        other => Err(format!("request through n3 (before, during): {other:?}")),
    };
    f
}

/// n3 killed and started again: its clients move to another node.
fn node_restart(w: &mut World, t: &Timings) -> Injected {
    let mut f = Injected::new(Fault::NodeRestart, Instant::now());
    f.hit = hit_on(w, "n3", Need::None);
    let pid = w.nodes[N3].server.pid();
    w.nodes[N3].stop();
    std::thread::sleep(t.node_down);
    w.nodes[N3].resume();
    f.until = Instant::now();
    let dropped: Vec<&str> = f
        .hit
        .iter()
        .filter(|(i, _)| w.pods[*i].line_after("disconnected", f.at).is_some())
        .map(|(i, _)| FLEET[*i].name)
        .collect();
    f.shown = match (pid, w.nodes[N3].server.pid()) {
        (Some(a), Some(b)) if a != b && dropped.len() == f.hit.len() => Ok(format!(
            "n3 pid {a} → {b}; its clients lost their connections: {dropped:?}"
        )),
        other => Err(format!(
            "n3's pid before and after: {other:?}; its clients that lost their connections: {dropped:?}"
        )),
    };
    f
}

/// The meta leader steps down; another is elected.
fn meta_election(w: &World, t: &Timings) -> Injected {
    let mut f = Injected::new(Fault::MetaElection, Instant::now());
    let leader = w.meta_leader();
    // Asked again while the leader stays: a cluster still settling after the node's restart
    // may not answer the first.
    let (mut answer, mut after) = (String::new(), None);
    let limit = Instant::now() + t.step * 8;
    while Instant::now() < limit && (after.is_none() || after == leader) {
        answer = w.meta_stepdown();
        f.at = Instant::now();
        let settle = Instant::now() + t.step * 2;
        while Instant::now() < settle {
            after = w.meta_leader();
            if after.is_some() && after != leader {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    f.until = Instant::now();
    f.shown = match (&leader, &after) {
        (Some(a), Some(b)) if a != b => Ok(format!("meta leader {a} → {b}")),
        _ => Err(format!("meta leader {leader:?} → {after:?}: {answer}")),
    };
    f
}

/// n2 starved of CPU; halfway through, the auth service goes down too, and stays down after.
fn starved_and_auth_down(w: &mut World, t: &Timings) -> [Injected; 2] {
    let mut starve = Injected::new(Fault::Starved, Instant::now());
    starve.hit = hit_on(w, "n2", Need::None);
    let quick = w.varz_time(N2);
    let starved = Starved::new(
        w.nodes[N2].server.pid().unwrap(),
        t.starve_stopped,
        Duration::from_secs(1),
    );
    starve.at = Instant::now();
    // Asked until an answer waits out a stop, over two of its cycles at most: the stopping
    // thread may not yet have run when the first questions go.
    let mut slow = Duration::ZERO;
    while slow < Duration::from_millis(200) && starve.at.elapsed() < Duration::from_secs(2) {
        slow = slow.max(w.varz_time(N2));
    }
    starve.shown = match slow > quick * 3 && slow >= Duration::from_millis(200) {
        true => Ok(format!(
            "n2's /varz answered in {quick:?} before, {slow:?} during"
        )),
        false => Err(format!("n2's /varz: {quick:?} before, {slow:?} during")),
    };
    sleep_until(starve.at + t.starve / 2);
    let mut auth = Injected::new(Fault::AuthDown, Instant::now());
    auth.hit = (0..w.pods.len()).map(|i| (i, Need::None)).collect();
    w.stop_callout();
    auth.at = Instant::now();
    let refused = w.echo_via(0, Duration::from_secs(3));
    sleep_until(starve.at + t.starve);
    drop(starved);
    starve.until = Instant::now();
    sleep_until(auth.at + t.auth_down);
    let disconnected: Vec<&str> = (0..w.pods.len())
        .filter(|&i| w.pods[i].line_after("disconnected", auth.at).is_some())
        .map(|i| FLEET[i].name)
        .collect();
    w.start_callout();
    auth.until = Instant::now();
    auth.shown = match &refused {
        Err(e) if e.contains("authorization") && disconnected.is_empty() => Ok(format!(
            "a new login on n1 refused ({e}); no client disconnected"
        )),
        _ => Err(format!(
            "login: {refused:?}; disconnected: {disconnected:?}"
        )),
    };
    [starve, auth]
}

/// n2 lost to its clients without a word: their connections half-open.
fn lost(w: &World, t: &Timings) -> Injected {
    let mut f = Injected::new(Fault::Lost, Instant::now());
    f.hit = hit_on(w, "n2", Need::Helps);
    let reachable = w.connects(N2, Duration::from_millis(500));
    w.lose(N2, true);
    f.at = Instant::now();
    let unreachable = !w.connects(N2, Duration::from_millis(500));
    sleep_until(f.at + t.half_open_seen() + t.period);
    let unacked: Vec<&str> = f
        .hit
        .iter()
        .filter(|(i, _)| w.unacked_sockets(*i) > 0)
        .map(|(i, _)| FLEET[*i].name)
        .collect();
    f.shown = match reachable && unreachable && !unacked.is_empty() {
        true => Ok(format!(
            "n2:4222 answered before, not during; ESTABLISHED with data unacknowledged: {unacked:?}"
        )),
        false => Err(format!(
            "n2:4222 before {reachable}, during {}; unacked in {unacked:?}",
            !unreachable
        )),
    };
    sleep_until(f.at + t.lost);
    w.lose(N2, false);
    f.until = Instant::now();
    f
}

/// Every node down for longer than the clients' budget: they give up. A restart helps each
/// client that gave up, once NATS is back.
fn cluster_down(w: &mut World, t: &Timings) -> Injected {
    let mut f = Injected::new(Fault::ClusterDown, Instant::now());
    for node in &mut w.nodes {
        node.stop();
    }
    let down = (0..3).all(|i| !w.connects(i, Duration::from_millis(300)));
    sleep_until(f.at + t.cluster_down);
    let disconnected = (0..w.pods.len())
        .filter(|&i| {
            w.pods[i].kubelet.with_runs(|runs| {
                runs.iter()
                    .any(|r| r.first_after(&["disconnected"], f.at).is_some())
            })
        })
        .count();
    let mut back = None;
    for node in &mut w.nodes {
        node.resume();
        back.get_or_insert_with(Instant::now);
    }
    f.until = Instant::now();
    f.from = back.unwrap();
    // Who gave up: the container running when NATS came back printed `closed` during it.
    let gave_up: Vec<usize> = (0..w.pods.len())
        .filter(|&i| {
            w.pods[i].kubelet.with_runs(|runs| {
                let last = runs.last().unwrap();
                last.first_after(&["closed"], f.at)
                    .is_some_and(|c| c <= f.from)
            })
        })
        .collect();
    f.hit = (0..w.pods.len())
        .map(|i| match gave_up.contains(&i) {
            true => (i, Need::Restart),
            false => (i, Need::None),
        })
        .collect();
    f.shown = match down && disconnected == w.pods.len() {
        true => Ok(format!(
            "no node took a connection; every client disconnected, and {} of {} had given up (closed) when NATS was back",
            gave_up.len(),
            w.pods.len()
        )),
        false => Err(format!(
            "every node refusing: {down}; clients disconnected: {disconnected} of {}",
            w.pods.len()
        )),
    };
    f
}

/// Until every pod works again after the outage, or could have been restarted and be working
/// had its check restarted it: a consumer works at its first ack, once JetStream, started
/// again whole, has elected its streams' leaders (an election of 4 to 9 s each, which no
/// setting scales): up to a window more.
fn settle(w: &World, t: &Timings, cluster: &Injected) {
    let settle = t.bound(Fault::ClusterDown, Kind::Producer).unwrap() + t.window() + t.step * 8;
    let limit = cluster.from + settle;
    while Instant::now() < limit {
        let working = (0..w.pods.len()).all(|i| {
            w.pods[i]
                .line_after(FLEET[i].working_line(), cluster.from)
                .is_some()
        });
        if working && Instant::now() > cluster.from + t.step * 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn node_index(name: &str) -> usize {
    name.trim_start_matches('n')
        .parse::<usize>()
        .map_or(0, |n| n.saturating_sub(1))
}
