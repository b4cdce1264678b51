//! What a run may take from the runs before it instead of asking the server, so that a fleet
//! of probes costs the server O(1) per run on average. Pure.
//!
//! - The consumers are asked at most every `--sample-every`, and only while the last look
//!   found every one healthy with its stall clock at zero, on the connections it saw: between
//!   looks only the sockets are read. A look is never skipped after a fault, a running stall
//!   clock, a consumer that could not be judged, or a new connection, so no verdict is carried
//!   over from one run to the next except "healthy, nothing waiting unworked".
//! - The pod's connection is found at the server once by address (`rules::subscription`);
//!   later runs ask the server for that connection alone, by the cid it had there, and match
//!   by address again when the socket, the server or the answer's address differ: a cid is
//!   unique per server only and is reused after a restart. A connection seen holding the
//!   subscription, on the same socket since, is trusted for `--subscription-every`: given, or
//!   `auto` (`trust_time`), which asks less often where each lookup costs the server more.

use crate::prelude::*;

use super::answers;
use super::consumer::{Fault, Healthy, Outcome};
use super::subscription::{holds, Held};
use crate::facts::{
    Connz, ConsumerName, Due, LookedUp, Published, Remembered, Sample, Sampling, ServerConnection,
    Unanswered, Unknown, Wanted,
};
use crate::timing::{
    AUTO_AT_LOOK_UP_TO, AUTO_TRUST, AUTO_TRUST_MAX, AUTO_TRUST_PER_CONNECTION, WINDOW_SHARE,
};
use core::net::SocketAddr;
use core::time::Duration;
use serde::{Deserialize, Serialize};

/// One of this pod's ESTABLISHED connections: the local address (IPv4 unmapped) and the
/// socket's inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Socket {
    pub addr: SocketAddr,
    pub inode: u64,
}

/// The last run that asked the server about the consumers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastLook {
    /// Local clock, ms since the epoch.
    pub at_ms: i64,
    /// The look was calm (`calm`): every consumer idle, paused, progressing or `cannot_tell`,
    /// its stall clock at zero, nothing pinned, no fault standing.
    pub calm: bool,
    /// The inodes of the pod's live connections then.
    pub inodes: Vec<u64>,
    /// The deliver subscriptions the consumers had then (`--own-subscription`).
    pub wanted: Vec<(Wanted, ConsumerName)>,
    /// The least window of the consumers then: the next look comes inside every one.
    pub window_ms: i64,
}

/// What a kept fault is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Of {
    Consumer(ConsumerName),
    Subscription(Wanted),
}

/// What a look saw wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wrong {
    /// A consumer's fault.
    Consumer(Fault),
    /// The pod's connection listed without the subscription.
    NotHeld { connection: SocketAddr },
    /// A pull consumer's part: the pod's connections published nothing for `quiet_ms` while
    /// the consumer delivered `delivered` messages.
    NotPulling {
        connection: SocketAddr,
        quiet_ms: i64,
        delivered: u64,
    },
}

/// A fault a look saw, kept as the freshest evidence of what it is about until a look sees
/// that again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenFault {
    pub of: Of,
    pub wrong: Wrong,
    /// Local clock, ms since the epoch.
    pub at_ms: i64,
    /// The window of what it is about then: how long it stays fresh.
    pub window_ms: i64,
    /// The pod's live connections then.
    pub inodes: Vec<u64>,
}

impl SeenFault {
    /// Whether it is still the verdict of a run that could not look (`why`), with the pod's
    /// live connections `live`, at `now_ms`: fresh (its look no older than its window, and the
    /// pod on no connection it did not hold then: a new one may hold what was missing), and
    /// left standing by the answer (`answers::leaves_evidence`: NATS took the ask). The one
    /// test, for a consumer's fault and a missing subscription alike. Never latched: only a
    /// look makes one, and time voids it.
    pub fn stands(&self, why: &Unknown, live: &[u64], now_ms: i64) -> bool {
        answers::leaves_evidence(why) && self.fresh(live, now_ms)
    }

    /// Whether it is fresh (docs/checks.md's word) with the pod's live connections `live` at
    /// `now_ms`: its look no older than its window, and the pod on no connection it did not
    /// hold then.
    pub fn fresh(&self, live: &[u64], now_ms: i64) -> bool {
        (0..=self.window_ms).contains(&(now_ms - self.at_ms))
            && !live.is_empty()
            && live.iter().all(|i| self.inodes.contains(i))
    }

    /// How long ago its look was.
    pub fn ago(&self, now_ms: i64) -> Duration {
        super::consumer::ms(now_ms - self.at_ms)
    }
}

/// A fault this run reports from the last look, because it could not look itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Carried {
    /// Why this run could not look.
    pub why: Unknown,
    /// How long ago the look that saw the fault was.
    pub ago: Duration,
}

/// Whether to ask about the consumers now, with the pod's live connections `inodes`.
///
/// Between looks a run skips the consumers while the last look was calm, on the same
/// connections, is younger than `every`, and waiting for the next run keeps the next look
/// inside the window: the runs' period is learned from the run before this one
/// (`previous_run_ms`: any probe's run of this check), so a `periodSeconds` up to half the
/// window never leaves two looks further apart than the window.
pub fn sampling(
    last: Option<&LastLook>,
    previous_run_ms: Option<i64>,
    inodes: &[u64],
    every: Duration,
    now_ms: i64,
) -> Sampling {
    if every.is_zero() {
        return Sampling::Ask(Due::EveryRun);
    }
    let Some(last) = last else {
        return Sampling::Ask(Due::FirstLook);
    };
    if !last.calm {
        return Sampling::Ask(Due::NotCalm);
    }
    let age = now_ms - last.at_ms;
    if age < 0 || age >= every.as_millis() as i64 {
        return Sampling::Ask(Due::Old);
    }
    if inodes.is_empty() || inodes.iter().any(|i| !last.inodes.contains(i)) {
        return Sampling::Ask(Due::NewConnection);
    }
    // The next run comes about a period later (the last run's spacing; without one, as long
    // again as the look's age).
    let period = previous_run_ms
        .map_or(age, |p| now_ms - p)
        .clamp(0, i64::MAX / 4);
    if (age + period) * WINDOW_SHARE.1 > last.window_ms * WINDOW_SHARE.0 {
        return Sampling::Ask(Due::WindowEnds);
    }
    Sampling::Skip {
        asked_ago: Duration::from_millis(age as u64),
    }
}

/// Whether a look is calm (docs/checks.md's word), which lets the next runs skip: every
/// consumer idle, paused, progressing or `cannot_tell`, its stall clock at zero and its floor
/// not pinned (work waiting unmeasured, or waiting inside
/// the window, is asked again every run, so the window is judged exactly as without skips).
/// Anything else, a consumer NATS did not answer for included, is asked again on the next run.
pub fn calm(judged: &[(&Outcome, Option<&Sample>)]) -> bool {
    judged.iter().all(|(outcome, sample)| {
        let settled = matches!(
            outcome,
            Outcome::Healthy(
                Healthy::Idle
                    | Healthy::Paused
                    | Healthy::Progressing(_)
                    | Healthy::CannotTell { .. }
            )
        );
        settled && sample.is_some_and(|s| s.stalled_ms == 0 && s.pinned_ms.is_none())
    })
}

/// Whether a run that asked about the consumers is a look (docs/checks.md's word): NATS
/// answered for at least one of them. A look NATS answered for none is no evidence: it
/// refreshes nothing of the last (its time, its calm).
pub fn is_look(outcomes: &[&Outcome]) -> bool {
    outcomes.iter().any(|o| !matches!(o, Outcome::NotJudged(_)))
}

/// Why the pod's connection is matched by address again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rematch {
    /// Nothing remembered.
    FirstTime,
    /// The remembered socket is gone (a new connection, a new port, or the same port on a new
    /// socket).
    SocketChanged,
    /// The server answering by that name has another id: it restarted, and its cids restarted.
    ServerRestarted,
    /// The server has no open connection with that cid.
    Closed,
    /// The server's connection with that cid comes from another address: not this pod's.
    AnotherConnection(SocketAddr),
}

/// How this run found the pod's connection at the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Seen holding the subscription this long ago, on the same socket since: not asked.
    Trusted { held_ago: Duration, trust: Trust },
    /// The server was asked for the remembered connection alone, by cid.
    LookedUp { cid: u64 },
    /// Matched by address in the server's connection list.
    Matched(Rematch),
    /// Not asked: earlier asks went unanswered, and the next is not due.
    Waited,
    /// A pull consumer's part, not asked: the consumer delivered nothing since this pod's
    /// connections were last read, so no reading could find it not taking part.
    NothingDelivered,
    /// A pull consumer's part, not asked: its connections last published (or were first read)
    /// less than the window ago, so no reading could find it not taking part yet.
    WithinWindow,
}

/// What to do first, before any lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Judged from what was kept, without asking (`found` says why): a connection seen
    /// holding the subscription within its trust time, or a pull consumer's part no reading
    /// could find not taking part (`subscription::unread`).
    Judged(Held, Found),
    LookUp,
    Match(Rematch),
    /// The last asks went unanswered: ask nothing until this much later (not judged).
    Wait(Duration),
}

/// `--subscription-every`: a time, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustSetting {
    Auto,
    Fixed(Duration),
}

/// How long a connection seen holding its subscription is trusted, and why that long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trust {
    pub length: Duration,
    /// `auto` stretched past `AUTO_TRUST` for this many connections in the account.
    pub stretched_for: Option<u64>,
    /// `auto` asks with each look at the consumers (`--sample-every`): the lookup is cheap
    /// for the server (the monitoring port's, or a small account's).
    pub at_look: bool,
}

/// How the run may ask for the pod's connection: `--subscription-every`, the consumers'
/// `--sample-every`, whether the lookup goes to the monitoring port (direct), and whether
/// this run looks at the consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asking {
    pub setting: TrustSetting,
    pub sample_every: Duration,
    pub direct: bool,
    pub looking: bool,
}

/// The trust time of a connection remembered with `account_connections` at its server.
/// `auto`: at the consumers' pace where a lookup is cheap (the monitoring port finds a cid
/// directly; a small account's report is small), else 5 minutes, and longer the more
/// connections the account has.
pub fn trust_time(asking: Asking, account_connections: u64) -> Trust {
    // In whole seconds, as it is said.
    let per = AUTO_TRUST_PER_CONNECTION.as_millis() as u64;
    let wanted = Duration::from_secs(account_connections.saturating_mul(per) / 1000);
    let (length, stretched_for, at_look) = match asking.setting {
        TrustSetting::Fixed(length) => (length, None, false),
        TrustSetting::Auto if asking.direct || account_connections <= AUTO_AT_LOOK_UP_TO => {
            (asking.sample_every, None, true)
        }
        TrustSetting::Auto if wanted > AUTO_TRUST => {
            (wanted.min(AUTO_TRUST_MAX), Some(account_connections), false)
        }
        TrustSetting::Auto => (AUTO_TRUST, None, false),
    };
    Trust {
        length,
        stretched_for,
        at_look,
    }
}

/// Trust, look up, or match again; or, after asks that went unanswered, wait.
///
/// A connection seen holding the subscription within its trust time is trusted whatever
/// came since, unless it is asked with each look and this run looks. Otherwise, after `unanswered` asks in a row (a server that answered late, or
/// not at all), the next waits `retry_after`; a connection matched before is then looked up
/// by cid again, never matched afresh: a full match walks every connection of the account,
/// and is only for a socket that changed, a server restarted or an answer that is another
/// connection's.
pub fn plan(
    memo: Option<&Remembered>,
    unanswered: Option<&Unanswered>,
    ours: &[Socket],
    asking: Asking,
    now_ms: i64,
) -> Plan {
    let same_socket = memo.filter(|m| ours.iter().any(|s| s.addr == m.local && s.inode == m.inode));
    let connections = memo.map_or(0, |m| m.account_connections);
    let trust = trust_time(asking, connections);
    if let Some(m) = same_socket {
        let with_the_look = trust.at_look && asking.looking;
        match m.held_at_ms.map(|at| now_ms - at) {
            Some(ago) if ago >= 0 && ago < trust.length.as_millis() as i64 && !with_the_look => {
                let held_ago = Duration::from_millis(ago as u64);
                return Plan::Judged(
                    Held::Yes { by: m.local },
                    Found::Trusted { held_ago, trust },
                );
            }
            _ => {}
        }
    }
    if let Some(wait) = waiting(unanswered, trust.length, now_ms) {
        return Plan::Wait(wait);
    }
    match (memo, same_socket) {
        (None, _) => Plan::Match(Rematch::FirstTime),
        (Some(_), None) => Plan::Match(Rematch::SocketChanged),
        (Some(_), Some(_)) => Plan::LookUp,
    }
}

/// Whether the connections a pull consumer's part was judged by can be asked for again by
/// cid: every one still this pod's same socket, named by its server, and no other of the
/// pod's live connections (a new one may be the one that pulls). Else why to match again.
pub fn plan_pull(kept: Option<&Published>, live: &[Socket]) -> Result<(), Rematch> {
    let Some(kept) = kept else {
        return Err(Rematch::FirstTime);
    };
    let same = |s: &Socket| {
        kept.connections
            .iter()
            .any(|(m, _)| m.local == s.addr && m.inode == s.inode && !m.server.name.is_empty())
    };
    match live.len() == kept.connections.len() && live.iter().all(same) {
        true => Ok(()),
        false => Err(Rematch::SocketChanged),
    }
}

/// After asks that went unanswered in a row, how long the next one waits from now (`trust`
/// the time a healthy pod's asks come apart); none when it is due.
pub fn waiting(unanswered: Option<&Unanswered>, trust: Duration, now_ms: i64) -> Option<Duration> {
    let u = unanswered?;
    let due = u.last_ms + retry_after(u.count, trust).as_millis() as i64;
    (now_ms >= u.last_ms && now_ms < due).then(|| Duration::from_millis((due - now_ms) as u64))
}

/// How long after `count` unanswered asks in a row the next one comes: the trust time, then
/// twice that, and so on, up to an hour. Never sooner than a healthy pod asks, so a fleet
/// costs a slow server no more than a well one; a trust time of zero asks every run.
pub fn retry_after(count: u32, trust: Duration) -> Duration {
    let times = 1u32
        .checked_shl(count.saturating_sub(1))
        .unwrap_or(u32::MAX);
    let doubled = trust.saturating_mul(times);
    doubled.min(AUTO_TRUST_MAX.max(trust))
}

/// The unanswered asks to keep after this run: one more after an ask that went unanswered
/// (the server late or silent, which makes the next ask wait, rather than a refusal or an
/// answer), as they were after a run that waited, none after an answer.
pub fn count_unanswered(
    before: Option<&Unanswered>,
    held: &Held,
    asked: bool,
    now_ms: i64,
) -> Option<Unanswered> {
    let unanswered = matches!(held, Held::NotJudged(why) if answers::unanswered(why));
    match (unanswered, asked) {
        (false, _) => None,
        (true, false) => before.copied(),
        (true, true) => Some(Unanswered {
            count: before.map_or(0, |u| u.count).saturating_add(1),
            last_ms: now_ms,
        }),
    }
}

/// What a lookup's answers say of the remembered connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmed<'a> {
    /// Still this pod's: the same server (name and id) and the address it was matched by.
    Yes(&'a ServerConnection),
    /// The remembered server did not answer (slow, or gone): no evidence, asked again later.
    Unanswered,
    /// Not this pod's connection any more: matched by address again.
    Changed(Rematch),
}

/// The remembered connection in a lookup's answers.
pub fn confirm<'a>(memo: &Remembered, answers: &'a [LookedUp]) -> Confirmed<'a> {
    let Some(answer) = answers.iter().find(|a| a.server.name == memo.server.name) else {
        return Confirmed::Unanswered;
    };
    if answer.server.id != memo.server.id {
        return Confirmed::Changed(Rematch::ServerRestarted);
    }
    let Some(c) = answer.connection.as_ref() else {
        return Confirmed::Changed(Rematch::Closed);
    };
    if c.addr != memo.local || c.cid != memo.cid {
        return Confirmed::Changed(Rematch::AnotherConnection(c.addr));
    }
    Confirmed::Yes(c)
}

/// The verdict on a confirmed connection: it is this pod's, so it holds the subscription or
/// this pod's connection does not.
pub fn judge_confirmed(wanted: &Wanted, c: &ServerConnection) -> Held {
    match holds(c, wanted) {
        true => Held::Yes { by: c.addr },
        false => Held::NotByThisConnection { connection: c.addr },
    }
}

/// What to remember after a run that reached the server: the connection the verdict was
/// drawn from, when the server named itself and the connection is one of this pod's sockets.
pub fn remember(
    wanted: &Wanted,
    held: &Held,
    ours: &[Socket],
    listed: &[&ServerConnection],
    now_ms: i64,
) -> Option<Remembered> {
    let (addr, holding) = match held {
        Held::Yes { by } => (*by, true),
        Held::NotByThisConnection { connection } => (*connection, false),
        Held::NotJudged(_) | Held::Pulls { .. } | Held::NotPulling { .. } => return None,
    };
    let socket = ours.iter().find(|s| s.addr == addr)?;
    let c = listed
        .iter()
        .filter(|c| c.addr == addr)
        .find(|c| !holding || holds(c, wanted))?;
    Some(Remembered {
        server: c.server.clone()?,
        cid: c.cid,
        local: addr,
        inode: socket.inode,
        held_at_ms: holding.then_some(now_ms),
        account_connections: c.account_connections,
    })
}

/// Every connection a full match listed.
pub fn listed(connz: &Connz) -> Vec<&ServerConnection> {
    connz
        .holding
        .iter()
        .chain(connz.all.iter().flatten())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::ServerIdent;
    use crate::rules::restart::Cadence;

    const NOW: i64 = 1_800_000_000_000;

    fn ident(name: &str, id: &str) -> ServerIdent {
        ServerIdent {
            name: name.into(),
            id: id.into(),
        }
    }

    fn wanted() -> Wanted {
        Wanted {
            subject: "deliver.D".into(),
            queue: Some("D".into()),
        }
    }

    fn conn(addr: &str, cid: u64, at: &ServerIdent, holding: bool) -> ServerConnection {
        ServerConnection {
            addr: addr.parse().unwrap(),
            name: None,
            subscriptions: Some(match holding {
                true => vec![("deliver.D".into(), Some("D".into()))],
                false => vec![("_INBOX.x.*".into(), None)],
            }),
            cid,
            server: Some(at.clone()),
            account_connections: 0,
            in_msgs: 0,
        }
    }

    fn socket(addr: &str, inode: u64) -> Socket {
        Socket {
            addr: addr.parse().unwrap(),
            inode,
        }
    }

    fn memo(held_secs_ago: Option<i64>) -> Remembered {
        Remembered {
            server: ident("n1", "NID1"),
            cid: 7,
            local: "10.200.0.2:51828".parse().unwrap(),
            inode: 4242,
            held_at_ms: held_secs_ago.map(|s| NOW - s * 1000),
            account_connections: 0,
        }
    }

    /// A fault a look saw stays the verdict of the runs that cannot look while it is fresh
    /// (its look no older than its window, the pod on no connection it did not hold then) and
    /// the answer leaves it standing (NATS took the ask: late, refused, not asked yet); NATS's
    /// own trouble voids it, and so does time.
    #[test]
    fn a_fault_stands_while_fresh_and_the_answer_leaves_it() {
        let seen = |secs_ago: i64| SeenFault {
            of: Of::Subscription(wanted()),
            wrong: Wrong::NotHeld {
                connection: "10.200.0.2:51828".parse().unwrap(),
            },
            at_ms: NOW - secs_ago * 1000,
            window_ms: 15_000,
            inodes: vec![4242],
        };
        for why in [
            Unknown::Deadline,
            Unknown::Credentials,
            Unknown::InboxDenied("_INBOX.>".into()),
            Unknown::NotListed("n1 did not answer in time".into()),
            Unknown::Waiting(Duration::from_secs(2)),
        ] {
            assert!(seen(3).stands(&why, &[4242], NOW), "{why:?}");
            assert!(
                seen(15).stands(&why, &[4242], NOW),
                "{why:?}: at the window"
            );
            assert!(!seen(16).stands(&why, &[4242], NOW), "{why:?}: past it");
            assert!(
                !seen(-1).stands(&why, &[4242], NOW),
                "{why:?}: from the future"
            );
        }
        assert_eq!(seen(3).ago(NOW), Duration::from_secs(3));
        // NATS's own trouble: void.
        for why in [
            Unknown::Unreachable("refused".into()),
            Unknown::TemporarilyUnavailable,
            Unknown::NoResponders,
            Unknown::Failed("?".into()),
        ] {
            assert!(!seen(3).stands(&why, &[4242], NOW), "{why:?}");
        }
        // A new connection may hold what was missing: void; one of them gone is not.
        assert!(!seen(3).stands(&Unknown::Deadline, &[4242, 4343], NOW));
        assert!(!seen(3).stands(&Unknown::Deadline, &[4343], NOW));
        assert!(!seen(3).stands(&Unknown::Deadline, &[], NOW));
        let two = SeenFault {
            inodes: vec![4242, 4343],
            ..seen(3)
        };
        assert!(two.stands(&Unknown::Deadline, &[4343], NOW));
    }

    const TRUST: TrustSetting = TrustSetting::Fixed(Duration::from_secs(300));

    /// A run between looks, with `--sample-every 45s`.
    fn asking(setting: TrustSetting, direct: bool) -> Asking {
        Asking {
            setting,
            sample_every: Duration::from_secs(45),
            direct,
            looking: false,
        }
    }
    const FIVE_MINUTES: Trust = Trust {
        length: Duration::from_secs(300),
        stretched_for: None,
        at_look: false,
    };

    #[test]
    fn trust_only_the_same_socket_for_a_bounded_time() {
        let same = [socket("10.200.0.2:51828", 4242)];
        assert_eq!(
            plan(None, None, &same, asking(TRUST, false), NOW),
            Plan::Match(Rematch::FirstTime)
        );
        assert_eq!(
            plan(
                Some(&memo(Some(60))),
                None,
                &same,
                asking(TRUST, false),
                NOW
            ),
            Plan::Judged(
                Held::Yes {
                    by: "10.200.0.2:51828".parse().unwrap()
                },
                Found::Trusted {
                    held_ago: Duration::from_secs(60),
                    trust: FIVE_MINUTES
                }
            )
        );
        // Past the trust time, or never seen holding it: asked by cid.
        assert_eq!(
            plan(
                Some(&memo(Some(300))),
                None,
                &same,
                asking(TRUST, false),
                NOW
            ),
            Plan::LookUp
        );
        assert_eq!(
            plan(Some(&memo(None)), None, &same, asking(TRUST, false), NOW),
            Plan::LookUp
        );
        // A held time in the future (the clock went back) is no trust.
        assert_eq!(
            plan(
                Some(&memo(Some(-5))),
                None,
                &same,
                asking(TRUST, false),
                NOW
            ),
            Plan::LookUp
        );
        // A trust time of zero asks every run.
        assert_eq!(
            plan(
                Some(&memo(Some(0))),
                None,
                &same,
                asking(TrustSetting::Fixed(Duration::ZERO), false),
                NOW
            ),
            Plan::LookUp
        );
        // The same port on another socket, or another port: matched again.
        for ours in [
            [socket("10.200.0.2:51828", 9999)],
            [socket("10.200.0.2:51900", 4242)],
        ] {
            assert_eq!(
                plan(Some(&memo(Some(1))), None, &ours, asking(TRUST, false), NOW),
                Plan::Match(Rematch::SocketChanged)
            );
        }
    }

    /// A server that answers late is asked less often, not more: after an unanswered ask,
    /// the next waits the trust time, then twice that, up to an hour; a connection matched
    /// before is looked up again, never matched afresh, and one seen holding the
    /// subscription within its trust time is trusted meanwhile.
    #[test]
    fn unanswered_asks_wait_and_never_fall_back_to_a_full_match() {
        let same = [socket("10.200.0.2:51828", 4242)];
        let five = Duration::from_secs(300);
        assert_eq!(retry_after(1, five), five);
        assert_eq!(retry_after(2, five), 2 * five);
        assert_eq!(retry_after(5, five), Duration::from_secs(3600));
        assert_eq!(retry_after(40, five), Duration::from_secs(3600));
        assert_eq!(retry_after(3, Duration::ZERO), Duration::ZERO);
        let after = |count, secs_ago: i64| Unanswered {
            count,
            last_ms: NOW - secs_ago * 1000,
        };
        let stale = memo(Some(600));
        assert_eq!(
            plan(
                Some(&stale),
                Some(&after(1, 60)),
                &same,
                asking(TRUST, false),
                NOW
            ),
            Plan::Wait(Duration::from_secs(240))
        );
        assert_eq!(
            plan(
                Some(&stale),
                Some(&after(1, 300)),
                &same,
                asking(TRUST, false),
                NOW
            ),
            Plan::LookUp
        );
        assert_eq!(
            plan(
                Some(&stale),
                Some(&after(2, 300)),
                &same,
                asking(TRUST, false),
                NOW
            ),
            Plan::Wait(Duration::from_secs(300))
        );
        // Trusted within its trust time, whatever went unanswered since.
        assert!(matches!(
            plan(
                Some(&memo(Some(10))),
                Some(&after(3, 1)),
                &same,
                asking(TRUST, false),
                NOW
            ),
            Plan::Judged(_, Found::Trusted { .. })
        ));
        // Never matched: the first match waits as a lookup would.
        assert_eq!(
            plan(None, Some(&after(1, 60)), &same, asking(TRUST, false), NOW),
            Plan::Wait(Duration::from_secs(240))
        );
        assert_eq!(
            plan(None, Some(&after(1, 300)), &same, asking(TRUST, false), NOW),
            Plan::Match(Rematch::FirstTime)
        );
        // Every run with a trust time of zero.
        let every = TrustSetting::Fixed(Duration::ZERO);
        assert_eq!(
            plan(
                Some(&stale),
                Some(&after(9, 0)),
                &same,
                asking(every, false),
                NOW
            ),
            Plan::LookUp
        );
        // Counted: one more per unanswered ask, kept while waiting, none after an answer.
        let late = Held::NotJudged(Unknown::Deadline);
        let first = count_unanswered(None, &late, true, NOW).unwrap();
        assert_eq!(first, after(1, 0));
        let waited = Held::NotJudged(Unknown::Waiting(Duration::from_secs(1)));
        assert_eq!(
            count_unanswered(Some(&first), &waited, false, NOW + 9),
            Some(first)
        );
        assert_eq!(
            count_unanswered(Some(&first), &late, true, NOW + 9).map(|u| u.count),
            Some(2)
        );
        let yes = Held::Yes {
            by: "10.200.0.2:51828".parse().unwrap(),
        };
        assert_eq!(count_unanswered(Some(&first), &yes, true, NOW), None);
        // A refusal is no late answer: it does not make the next ask wait.
        let refused = Held::NotJudged(Unknown::Credentials);
        assert_eq!(count_unanswered(Some(&first), &refused, true, NOW), None);
    }

    #[test]
    fn a_lookup_is_believed_only_for_the_same_server_and_address() {
        let m = memo(Some(400));
        let n1 = ident("n1", "NID1");
        let ok = [LookedUp {
            server: n1.clone(),
            connection: Some(conn("10.200.0.2:51828", 7, &n1, true)),
        }];
        let yes = |c: Confirmed<'_>| match c {
            Confirmed::Yes(c) => c.clone(),
            other => panic!("not confirmed: {other:?}"),
        };
        assert_eq!(yes(confirm(&m, &ok)).cid, 7);
        assert_eq!(
            judge_confirmed(&wanted(), &yes(confirm(&m, &ok))),
            Held::Yes {
                by: "10.200.0.2:51828".parse().unwrap()
            }
        );
        // A server whose name contains "n1" answered too (the filter is a substring).
        let n10 = ident("n10", "NID10");
        let both = [
            LookedUp {
                server: n10.clone(),
                connection: Some(conn("10.200.0.9:1000", 7, &n10, true)),
            },
            ok[0].clone(),
        ];
        assert_eq!(yes(confirm(&m, &both)).addr, m.local);
        // The remembered server did not answer (slow): no evidence, and no full match.
        assert_eq!(confirm(&m, &both[..1]), Confirmed::Unanswered);
        // Restarted: another id; its cid 7 is someone else's now.
        let again = ident("n1", "NID2");
        let restarted = [LookedUp {
            server: again.clone(),
            connection: Some(conn("10.200.0.3:40000", 7, &again, true)),
        }];
        assert_eq!(
            confirm(&m, &restarted),
            Confirmed::Changed(Rematch::ServerRestarted)
        );
        // Same server, the cid now another connection's (it holds the subscription: taking
        // it would call a deaf pod healthy).
        let other = [LookedUp {
            server: n1.clone(),
            connection: Some(conn("10.200.0.3:40000", 7, &n1, true)),
        }];
        assert_eq!(
            confirm(&m, &other),
            Confirmed::Changed(Rematch::AnotherConnection(
                "10.200.0.3:40000".parse().unwrap()
            ))
        );
        let closed = [LookedUp {
            server: n1.clone(),
            connection: None,
        }];
        assert_eq!(confirm(&m, &closed), Confirmed::Changed(Rematch::Closed));
        // This pod's connection, without the subscription: the deaf replica, by cid.
        let deaf = conn("10.200.0.2:51828", 7, &n1, false);
        assert_eq!(
            judge_confirmed(&wanted(), &deaf),
            Held::NotByThisConnection {
                connection: m.local
            }
        );
    }

    #[test]
    fn what_is_remembered_after_a_match() {
        let n1 = ident("n1", "NID1");
        let ours = [socket("10.200.0.2:51828", 4242)];
        let mine = conn("10.200.0.2:51828", 7, &n1, true);
        let theirs = conn("10.200.0.3:40000", 8, &n1, true);
        let yes = Held::Yes { by: mine.addr };
        assert_eq!(
            remember(&wanted(), &yes, &ours, &[&theirs, &mine], NOW),
            Some(Remembered {
                held_at_ms: Some(NOW),
                ..memo(None)
            })
        );
        let deaf = conn("10.200.0.2:51828", 7, &n1, false);
        let not = Held::NotByThisConnection {
            connection: deaf.addr,
        };
        assert_eq!(
            remember(&wanted(), &not, &ours, &[&deaf], NOW),
            Some(memo(None))
        );
        // A server that did not name itself, or no connection: nothing to remember.
        let anonymous = ServerConnection {
            server: None,
            ..mine.clone()
        };
        assert_eq!(remember(&wanted(), &yes, &ours, &[&anonymous], NOW), None);
        let none = Held::NotJudged(crate::facts::Unknown::Deadline);
        assert_eq!(remember(&wanted(), &none, &ours, &[&mine], NOW), None);
    }

    fn look(calm: bool, secs_ago: i64) -> LastLook {
        LastLook {
            at_ms: NOW - secs_ago * 1000,
            calm,
            inodes: vec![1, 2],
            wanted: vec![],
            window_ms: 60_000,
        }
    }

    #[test]
    fn the_consumers_are_skipped_only_after_a_calm_look_on_the_same_connections() {
        let every = Duration::from_secs(45);
        assert_eq!(
            sampling(Some(&look(true, 10)), None, &[1], every, NOW),
            Sampling::Skip {
                asked_ago: Duration::from_secs(10),
            }
        );
        assert_eq!(
            sampling(Some(&look(true, 10)), None, &[1], Duration::ZERO, NOW),
            Sampling::Ask(Due::EveryRun)
        );
        assert_eq!(
            sampling(None, None, &[1], every, NOW),
            Sampling::Ask(Due::FirstLook)
        );
        assert_eq!(
            sampling(Some(&look(false, 10)), None, &[1], every, NOW),
            Sampling::Ask(Due::NotCalm)
        );
        assert_eq!(
            sampling(Some(&look(true, 45)), None, &[1], every, NOW),
            Sampling::Ask(Due::Old)
        );
        assert_eq!(
            sampling(Some(&look(true, -1)), None, &[1], every, NOW),
            Sampling::Ask(Due::Old)
        );
        assert_eq!(
            sampling(Some(&look(true, 10)), None, &[1, 3], every, NOW),
            Sampling::Ask(Due::NewConnection)
        );
    }

    #[test]
    fn auto_asks_with_each_look_where_a_lookup_is_cheap_and_trusts_longer_where_it_is_dear() {
        let auto = |n, direct| trust_time(asking(TrustSetting::Auto, direct), n);
        let at_look = Trust {
            length: Duration::from_secs(45),
            stretched_for: None,
            at_look: true,
        };
        assert_eq!(auto(0, false), at_look);
        assert_eq!(auto(100, false), at_look);
        assert_eq!(auto(1_000, false), at_look);
        assert_eq!(auto(1_001, false), FIVE_MINUTES);
        assert_eq!(auto(2_500, false), FIVE_MINUTES);
        assert_eq!(auto(2_605, false).length, Duration::from_secs(312));
        assert_eq!(
            auto(10_000, false),
            Trust {
                length: Duration::from_secs(1200),
                stretched_for: Some(10_000),
                at_look: false,
            }
        );
        assert_eq!(auto(30_000, false).length, Duration::from_secs(3600));
        assert_eq!(auto(u64::MAX, false).length, Duration::from_secs(3600));
        // The monitoring port finds a cid directly: its cost does not grow.
        assert_eq!(auto(10_000, true), at_look);
        // A time given is kept, whatever the account's size.
        assert_eq!(
            trust_time(
                asking(TrustSetting::Fixed(Duration::from_secs(60)), false),
                10_000
            ),
            Trust {
                length: Duration::from_secs(60),
                stretched_for: None,
                at_look: false,
            }
        );
        // The count remembered is the one used.
        let big = Remembered {
            account_connections: 10_000,
            ..memo(Some(400))
        };
        let same = [socket("10.200.0.2:51828", 4242)];
        assert!(matches!(
            plan(
                Some(&big),
                None,
                &same,
                asking(TrustSetting::Auto, false),
                NOW
            ),
            Plan::Judged(_, Found::Trusted { .. })
        ));
        assert_eq!(
            plan(
                Some(&big),
                None,
                &same,
                asking(TrustSetting::Auto, true),
                NOW
            ),
            Plan::LookUp
        );
        // At the consumers' pace: trusted between looks, asked with each look.
        let small = memo(Some(10));
        assert!(matches!(
            plan(
                Some(&small),
                None,
                &same,
                asking(TrustSetting::Auto, false),
                NOW
            ),
            Plan::Judged(_, Found::Trusted { .. })
        ));
        let looking = Asking {
            looking: true,
            ..asking(TrustSetting::Auto, false)
        };
        assert_eq!(plan(Some(&small), None, &same, looking, NOW), Plan::LookUp);
    }

    /// Looks always inside the window: at `--stall-after 60s` and `--sample-every 45s`, for
    /// every `periodSeconds` from 1 to 30 (half the window), no two looks are further apart
    /// than the window; the period is learned from the runs themselves.
    #[test]
    fn looks_stay_inside_the_window_for_every_period_up_to_half_of_it() {
        for period in 1..=30 {
            let cadence = Cadence {
                period: Duration::from_secs(period),
                ..Cadence::DEFAULT
            };
            let apart = longest_between_looks(cadence, 400);
            assert!(
                apart <= cadence.window,
                "periodSeconds {period}: looks {apart:?} apart"
            );
        }
        // The default period looks no more often than every 50 s (1 run in 5).
        assert_eq!(
            longest_between_looks(Cadence::DEFAULT, 400),
            Duration::from_secs(50)
        );
    }

    /// The longest time between two looks over `runs` calm runs at `cadence`.
    fn longest_between_looks(cadence: Cadence, runs: u32) -> Duration {
        let mut last: Option<LastLook> = None;
        let mut looks = Vec::new();
        for run in 0..runs {
            let now = NOW + run as i64 * cadence.period.as_millis() as i64;
            let previous = (run > 0).then(|| now - cadence.period.as_millis() as i64);
            if let Sampling::Ask(_) =
                sampling(last.as_ref(), previous, &[1], cadence.sample_every, now)
            {
                looks.push(now);
                last = Some(LastLook {
                    at_ms: now,
                    calm: true,
                    inodes: vec![1],
                    wanted: vec![],
                    window_ms: cadence.window.as_millis() as i64,
                });
            }
        }
        let most = looks.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        Duration::from_millis(most as u64)
    }

    #[test]
    fn only_a_healthy_consumer_with_no_stall_clock_is_calm() {
        use crate::rules::consumer::{Fault, Unmeasured};
        let s = |stalled_ms: i64, pinned_ms: Option<i64>| Sample {
            created: "c".into(),
            floor_consumer_seq: 1,
            floor_stream_seq: 1,
            delivered_stream_seq: 1,
            ack_last_active: None,
            delivered_last_active: None,
            waiting: 1,
            stalled_ms,
            pinned_ms,
            seen_at_ms: NOW,
            seen_ts: None,
            gap: crate::facts::Gap::None,
            window_ms: 60_000,
        };
        let healthy = Outcome::Healthy(Healthy::Idle);
        let unbound = Outcome::Unhealthy(Fault::Unbound { waiting: 1 });
        let unmeasured = Outcome::Healthy(Healthy::Unmeasured(Unmeasured::FirstSample));
        let quiet = s(0, None);
        let stalling = s(5_000, None);
        let pinned = s(0, Some(0));
        assert!(calm(&[(&healthy, Some(&quiet))]));
        assert!(calm(&[]));
        assert!(!calm(&[(&healthy, Some(&quiet)), (&unbound, Some(&quiet))]));
        assert!(!calm(&[(&healthy, Some(&stalling))]));
        assert!(!calm(&[(&healthy, Some(&pinned))]));
        assert!(!calm(&[(&healthy, None)]));
        assert!(!calm(&[(&unmeasured, Some(&quiet))]));
        // Not answered (in time, or at all) is never calm: no evidence either way.
        for why in [Unknown::Deadline, Unknown::Credentials] {
            assert!(!calm(&[(&Outcome::NotJudged(why), Some(&quiet))]));
        }
    }

    /// A pull consumer's part is asked for by cid only while the pod holds exactly the
    /// sockets it was read by, each named by its server; else it is matched again.
    #[test]
    fn a_pull_part_is_looked_up_only_on_the_same_sockets() {
        let kept = |conns: &[(&str, u64, &str)]| Published {
            connections: conns
                .iter()
                .map(|(addr, inode, server)| {
                    let m = Remembered {
                        server: ident(server, "NID1"),
                        local: addr.parse().unwrap(),
                        inode: *inode,
                        ..memo(None)
                    };
                    (m, 10)
                })
                .collect(),
            created: "c".into(),
            delivered: 5,
            moved_at_ms: NOW,
        };
        let one = kept(&[("10.200.0.2:51828", 4242, "n1")]);
        let live = [socket("10.200.0.2:51828", 4242)];
        assert_eq!(plan_pull(None, &live), Err(Rematch::FirstTime));
        assert_eq!(plan_pull(Some(&one), &live), Ok(()));
        // Another socket on the same port, another port, one more connection of the pod.
        assert_eq!(
            plan_pull(Some(&one), &[socket("10.200.0.2:51828", 4243)]),
            Err(Rematch::SocketChanged)
        );
        assert_eq!(
            plan_pull(Some(&one), &[socket("10.200.0.2:51829", 4242)]),
            Err(Rematch::SocketChanged)
        );
        let more = [live[0], socket("10.200.0.2:51900", 5000)];
        assert_eq!(plan_pull(Some(&one), &more), Err(Rematch::SocketChanged));
        assert_eq!(plan_pull(Some(&one), &[]), Err(Rematch::SocketChanged));
        // A server that did not name itself cannot be asked by cid.
        let anonymous = kept(&[("10.200.0.2:51828", 4242, "")]);
        assert_eq!(
            plan_pull(Some(&anonymous), &live),
            Err(Rematch::SocketChanged)
        );
        let two = kept(&[
            ("10.200.0.2:51828", 4242, "n1"),
            ("10.200.0.2:51900", 5000, "n1"),
        ]);
        assert_eq!(plan_pull(Some(&two), &more), Ok(()));
    }
}
